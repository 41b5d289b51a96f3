// Looking at the whole folder again, where the browser cannot say what changed (no
// FileSystemObserver: Firefox, Safari, a plain-http page), or when it lost changes: the
// folder is listed afresh into the share's rescan, which brings the index in line with it
// (what is the same stays as it was; visitors hear only of what changed), and each file
// is read from where the rescan found it. A folder input's files cannot be listed again
// (the browser gave a fixed list): such a share offers no rescan.

import type { TabShare } from '../wasm/page';
import { FolderWalk, rootName, type FileSource, type FolderRoot } from './folder-walk';

export interface RescanFigures {
  added: number;
  updated: number;
  removed: number;
  ms: number;
}

/** Whether `root` can be listed again. */
export function canRescan(root: FolderRoot): boolean {
  return root.kind !== 'files';
}

/** Lists `root` again and brings `share` in line; `sources` (by entry id) follow. */
export async function rescan(root: FolderRoot, share: TabShare, sources: (FileSource | undefined)[]): Promise<RescanFigures> {
  const started = performance.now();
  share.rescanBegin(rootName(root));
  const fresh: (FileSource | undefined)[] = [];
  const walk = new FolderWalk(root, (b) => share.rescanAdd(b.parents, b.dirs, b.sizes, b.mtimes, b.names), () => undefined, fresh);
  await walk.run();
  const done = share.rescanDone();
  for (let i = 0; i + 1 < done.pairs.length; i += 2) {
    const [f, id] = [done.pairs[i]!, done.pairs[i + 1]!];
    sources[id] = fresh[f];
  }
  return { added: done.added, updated: done.updated, removed: done.removed, ms: performance.now() - started };
}

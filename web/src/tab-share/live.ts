// A tab share that follows the folder: the browser's FileSystemObserver (Chromium 133
// and later, on a folder the page holds a handle for) says which paths changed; the
// share settles them as the native sharer does (core's Settler: a path is looked at once
// it has been quiet for 200 ms); then this looks at each settled path on disk and hands
// what it found to the share, which updates the index every visitor follows. A new
// folder is listed whole (a folder moved in comes as one change).
//
// Elsewhere (Firefox, Safari, a folder input, a plain-http page) the share is a snapshot,
// and the page says so.

import type { TabShare } from '../wasm/page';
import { FolderWalk, REFUSED, entryFile, type FileSource, type FolderRoot } from './folder-walk';

/** The parts of FileSystemObserver this uses (not yet in TypeScript's DOM types). */
interface ChangeRecord {
  type: 'appeared' | 'disappeared' | 'modified' | 'moved' | 'unknown' | 'errored';
  relativePathComponents: string[];
  relativePathMovedFrom?: string[];
}
interface Observer {
  observe(handle: FileSystemHandle, options: { recursive: boolean }): Promise<void>;
  disconnect(): void;
}
type ObserverConstructor = new (callback: (records: ChangeRecord[]) => void) => Observer;

/** What was found at a path. */
type Found = { kind: 'unknown' } | { kind: 'gone' } | { kind: 'file'; size: number; mtime: number; source: FileSource } | { kind: 'dir'; folder: FolderRoot };

export class LiveFolder {
  private observer: Observer | null = null;

  constructor(
    private readonly root: FolderRoot,
    private readonly share: TabShare,
    private readonly sources: (FileSource | undefined)[],
  ) {}

  /** Starts following the folder; false where the browser cannot (a snapshot then). */
  async start(): Promise<boolean> {
    const Observer = (globalThis as { FileSystemObserver?: ObserverConstructor }).FileSystemObserver;
    const handle = this.root.kind === 'handle' ? this.root.handle : this.root.kind === 'entry' ? this.root.handle : null;
    if (Observer === undefined || handle === null) return false;
    const observer = new Observer((records) => this.changed(records));
    try {
      await observer.observe(handle, { recursive: true });
    } catch {
      return false;
    }
    this.observer = observer;
    return true;
  }

  stop(): void {
    this.observer?.disconnect();
    this.observer = null;
  }

  private changed(records: ChangeRecord[]): void {
    const paths: string[] = [];
    for (const r of records) {
      if (r.type === 'unknown' || r.type === 'errored') {
        this.share.changesLost();
        continue;
      }
      paths.push(r.relativePathComponents.join('/'));
      if (r.relativePathMovedFrom) paths.push(r.relativePathMovedFrom.join('/'));
    }
    if (paths.length > 0) this.share.pathsChanged(paths.filter((p) => p !== ''));
  }

  /** The share says these paths settled: look at each, and the index follows. */
  async settled(paths: string[]): Promise<void> {
    // A folder before what it holds (the share finds a new path's folder by its path).
    const looked = await Promise.all([...paths].sort().map(async (p) => ({ path: p, found: await this.look(p) })));
    // What could not be looked at (not readable now) is left as the index has it.
    const known = looked.filter((l) => l.found.kind !== 'unknown');
    const sorted = known.map((l) => l.path);
    const found = known.map((l) => l.found);
    const kinds = new Uint8Array(found.map((f) => (f.kind === 'gone' ? 0 : f.kind === 'file' ? 1 : 2)));
    const sizes = new Float64Array(found.map((f) => (f.kind === 'file' ? f.size : 0)));
    const mtimes = new Float64Array(found.map((f) => (f.kind === 'file' ? f.mtime : 0)));
    const ids = this.share.applyLooked(sorted, kinds, sizes, mtimes);
    for (const [i, f] of found.entries()) {
      const id = ids[i] ?? REFUSED;
      if (id === REFUSED) continue;
      if (f.kind === 'file') this.sources[id] = f.source;
      if (f.kind === 'dir') {
        // A folder that appeared, perhaps moved in with everything in it: list it whole.
        const walk = new FolderWalk(f.folder, (b) => this.share.addEntries(b.parents, b.dirs, b.sizes, b.mtimes, b.names), () => undefined, this.sources, id);
        await walk.run();
      }
    }
  }

  /** What is at `path` now. */
  private async look(path: string): Promise<Found> {
    try {
      if (this.root.kind === 'entry') return await lookEntry(this.root.entry, path);
      if (this.root.kind === 'handle') return await lookHandle(this.root.handle, path);
    } catch (error) {
      // Only "not found" means gone; anything else (not readable now) leaves it be.
      const name = error instanceof DOMException ? error.name : '';
      return name === 'NotFoundError' || name === 'TypeMismatchError' ? { kind: 'gone' } : { kind: 'unknown' };
    }
    return { kind: 'unknown' };
  }
}

async function lookEntry(root: FileSystemDirectoryEntry, path: string): Promise<Found> {
  const file = await new Promise<FileSystemFileEntry | null>((resolve) => root.getFile(path, {}, (e) => resolve(e as FileSystemFileEntry), () => resolve(null)));
  if (file) {
    const f = await entryFile(file);
    return { kind: 'file', size: f.size, mtime: f.lastModified, source: { kind: 'entry', entry: file } };
  }
  const dir = await new Promise<FileSystemDirectoryEntry | null>((resolve) => root.getDirectory(path, {}, (e) => resolve(e as FileSystemDirectoryEntry), () => resolve(null)));
  return dir ? { kind: 'dir', folder: { kind: 'entry', entry: dir, handle: null } } : { kind: 'gone' };
}

async function lookHandle(root: FileSystemDirectoryHandle, path: string): Promise<Found> {
  const parts = path.split('/');
  const name = parts.pop() ?? '';
  let dir = root;
  for (const part of parts) dir = await dir.getDirectoryHandle(part);
  try {
    const handle = await dir.getFileHandle(name);
    const f = await handle.getFile();
    return { kind: 'file', size: f.size, mtime: f.lastModified, source: { kind: 'handle', handle } };
  } catch (error) {
    if (error instanceof DOMException && error.name === 'TypeMismatchError') {
      return { kind: 'dir', folder: { kind: 'handle', handle: await dir.getDirectoryHandle(name) } };
    }
    throw error;
  }
}

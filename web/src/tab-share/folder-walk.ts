// The folder a person shares from this tab, walked: every entry handed to the share's
// index in batches as the walk goes (a folder before what it holds), and each file's
// source kept so a read can take it afresh.
//
// Three ways in, best first (what each browser has: docs/tab-sharing.md):
// - a FileSystemDirectoryHandle (showDirectoryPicker, or a drop's getAsFileSystemHandle;
//   Chromium in a secure context): live, and kept across a reload;
// - a dropped folder's FileSystemDirectoryEntry (webkitGetAsEntry; every browser, any
//   origin): read afresh at each read; gone after a reload, so the drop's handle is
//   kept beside it where the browser gives one. A drop walks the entries even then:
//   Chromium's handles leave out names Windows cannot hold (`a?b`, a trailing space);
//   its entries list them;
// - a folder input's files (webkitdirectory; every browser): a snapshot.

/** Where a file's bytes come from. */
export type FileSource =
  | { kind: 'handle'; handle: FileSystemFileHandle }
  | { kind: 'entry'; entry: FileSystemFileEntry }
  | { kind: 'file'; file: File };

/** The folder as chosen. */
export type FolderRoot =
  | { kind: 'handle'; handle: FileSystemDirectoryHandle }
  | { kind: 'entry'; entry: FileSystemDirectoryEntry; handle: FileSystemDirectoryHandle | null }
  | { kind: 'files'; name: string; files: File[] };

/** What the walk hands the index: parallel arrays, names joined by '/'. */
export interface EntryBatch {
  parents: Uint32Array;
  dirs: Uint8Array;
  sizes: Float64Array;
  mtimes: Float64Array;
  names: string;
}

/** The index's side of the walk: adds a batch, returns each entry's id (REFUSED: not taken). */
export type AddEntries = (batch: EntryBatch) => Uint32Array;

export const REFUSED = 0xffff_ffff;

/** Entries per batch handed to the index. */
const BATCH = 2000;
/** Files whose size and time are asked for at once, per folder being listed. */
const AT_ONCE = 64;
/** Dropped files whose size and time are asked for at once, per folder being listed. */
const METADATA_AT_ONCE = 1000;
/** Folders listed at once. */
const LISTERS = 4;

/** One entry found, before it has an id. */
interface Found {
  parent: number;
  name: string;
  dir: boolean;
  size: number;
  mtime: number;
  source: FileSource | null;
  /** A folder's way in, to list it next. */
  folder: Folder | null;
}

type Folder =
  | { kind: 'handle'; handle: FileSystemDirectoryHandle }
  | { kind: 'entry'; entry: FileSystemDirectoryEntry }
  | { kind: 'files'; children: Map<string, FilesNode> };

/** A folder input's files as a tree. */
interface FilesNode {
  file: File | null;
  children: Map<string, FilesNode>;
}

export interface WalkProgress {
  entries: number;
  folders: number;
  skipped: number;
}

/** The name shown for the shared folder. */
export function rootName(root: FolderRoot): string {
  return root.kind === 'files' ? root.name : root.kind === 'handle' ? root.handle.name : root.entry.name;
}

/** The folder input's files (paths `<folder>/<...>`) as a root. */
export function filesRoot(files: File[]): FolderRoot {
  const first = files[0]?.webkitRelativePath ?? '';
  const name = first.split('/')[0] || 'Shared files';
  return { kind: 'files', name, files };
}

/**
 * Walks `root`, handing batches to `add`; `sources[id]` is each file's source (by
 * its id in the index). Resolves when everything was listed.
 */
export class FolderWalk {
  readonly progress: WalkProgress = { entries: 1, folders: 1, skipped: 0 };
  private stopped = false;
  /** Browsers give no folder times: a folder shows when the share started. */
  private readonly started = Date.now();

  /**
   * `sources[id]` is filled with each file's source; `start` is the id `root` has in
   * the index (0: the shared folder; a folder that appeared later: its own).
   */
  constructor(
    private readonly root: FolderRoot,
    private readonly add: AddEntries,
    private readonly onProgress: (p: WalkProgress) => void,
    readonly sources: (FileSource | undefined)[] = [],
    private readonly start = 0,
  ) {}

  stop(): void {
    this.stopped = true;
  }

  async run(): Promise<WalkProgress> {
    const queue: [number, Folder][] = [[this.start, this.rootFolder()]];
    let pending: Found[] = [];
    const flush = (): void => {
      if (pending.length === 0) return;
      const ids = this.add(packed(pending, this.started));
      for (const [i, f] of pending.entries()) {
        const id = ids[i] ?? REFUSED;
        if (id === REFUSED) {
          this.progress.skipped += 1;
          continue;
        }
        this.progress.entries += 1;
        if (f.source) this.sources[id] = f.source;
        if (f.folder) {
          this.progress.folders += 1;
          queue.push([id, f.folder]);
        }
      }
      pending = [];
      this.onProgress(this.progress);
    };
    // Folders are listed LISTERS at a time: each file's size and time is a call into the
    // browser (about 0.5 ms in Chromium), so one folder at a time left the walk waiting.
    let listing = 0;
    let waiting: (() => void)[] = [];
    const woken = (): Promise<void> => new Promise((resolve) => waiting.push(resolve));
    const wake = (): void => {
      const all = waiting;
      waiting = [];
      for (const w of all) w();
    };
    const lister = async (): Promise<void> => {
      while (!this.stopped) {
        const next = queue.shift();
        if (next === undefined) {
          if (listing === 0) {
            flush();
            if (queue.length === 0) {
              wake();
              return;
            }
            wake();
            continue;
          }
          await woken();
          continue;
        }
        listing += 1;
        try {
          const [id, folder] = next;
          for await (const found of this.list(id, folder)) {
            pending.push(found);
            if (pending.length >= BATCH) flush();
          }
        } catch {
          // A folder that cannot be listed (removed meanwhile, or not readable): what
          // was listed of it stays; the rest of the walk goes on.
          this.progress.skipped += 1;
        } finally {
          listing -= 1;
        }
        // What a folder holds goes in before its subfolders are listed.
        if (queue.length === 0 || pending.length >= BATCH / 4) flush();
        wake();
      }
      wake(); // stopped: the others see it too
    };
    await Promise.all(Array.from({ length: LISTERS }, () => lister()));
    return this.progress;
  }

  private rootFolder(): Folder {
    switch (this.root.kind) {
      case 'handle':
        return { kind: 'handle', handle: this.root.handle };
      case 'entry':
        return { kind: 'entry', entry: this.root.entry };
      case 'files':
        return { kind: 'files', children: filesTree(this.root.files) };
    }
  }

  private async *list(parent: number, folder: Folder): AsyncGenerator<Found> {
    switch (folder.kind) {
      case 'handle':
        yield* listHandle(parent, folder.handle);
        return;
      case 'entry':
        yield* listEntry(parent, folder.entry);
        return;
      case 'files':
        for (const [name, node] of folder.children) {
          yield node.file
            ? { parent, name, dir: false, size: node.file.size, mtime: node.file.lastModified, source: { kind: 'file', file: node.file }, folder: null }
            : { parent, name, dir: true, size: 0, mtime: 0, source: null, folder: { kind: 'files', children: node.children } };
        }
    }
  }
}

async function* listHandle(parent: number, dir: FileSystemDirectoryHandle): AsyncGenerator<Found> {
  let files: FileSystemFileHandle[] = [];
  const described = async function* (): AsyncGenerator<Found> {
    const done = await Promise.allSettled(files.map((h) => h.getFile()));
    for (const [i, r] of done.entries()) {
      const handle = files[i]!;
      // A file that cannot be read now (removed meanwhile) is left out.
      if (r.status === 'fulfilled') {
        yield { parent, name: handle.name, dir: false, size: r.value.size, mtime: r.value.lastModified, source: { kind: 'handle', handle }, folder: null };
      }
    }
    files = [];
  };
  for await (const handle of dir.values()) {
    if (handle.kind === 'directory') {
      yield { parent, name: handle.name, dir: true, size: 0, mtime: 0, source: null, folder: { kind: 'handle', handle: handle as FileSystemDirectoryHandle } };
    } else {
      files.push(handle as FileSystemFileHandle);
      if (files.length >= AT_ONCE) yield* described();
    }
  }
  yield* described();
}

async function* listEntry(parent: number, dir: FileSystemDirectoryEntry): AsyncGenerator<Found> {
  const reader = dir.createReader();
  let files: FileSystemFileEntry[] = [];
  // Each file's size and time by getMetadata, many at once: measured in Chromium 156,
  // 5,000 files took 345 ms so and 2,066 ms by `file()` 64 at a time.
  const described = async function* (): AsyncGenerator<Found> {
    const done = await Promise.allSettled(files.map(entryMetadata));
    for (const [i, r] of done.entries()) {
      const entry = files[i]!;
      // A file that cannot be read now (removed meanwhile) is left out.
      if (r.status === 'fulfilled') {
        yield { parent, name: entry.name, dir: false, size: r.value.size, mtime: r.value.modificationTime.getTime(), source: { kind: 'entry', entry }, folder: null };
      }
    }
    files = [];
  };
  for (;;) {
    const batch = await new Promise<FileSystemEntry[]>((resolve, reject) => reader.readEntries(resolve, reject));
    if (batch.length === 0) break;
    for (const e of batch) {
      if (e.isDirectory) {
        yield { parent, name: e.name, dir: true, size: 0, mtime: 0, source: null, folder: { kind: 'entry', entry: e as FileSystemDirectoryEntry } };
      } else if (e.isFile) {
        files.push(e as FileSystemFileEntry);
      }
    }
    if (files.length >= METADATA_AT_ONCE) yield* described();
  }
  yield* described();
}

function entryMetadata(entry: FileSystemEntry): Promise<{ size: number; modificationTime: Date }> {
  type WithMetadata = FileSystemEntry & {
    getMetadata(ok: (m: { size: number; modificationTime: Date }) => void, failed: (e: DOMException) => void): void;
  };
  return new Promise((resolve, reject) => (entry as WithMetadata).getMetadata(resolve, reject));
}

export function entryFile(entry: FileSystemFileEntry): Promise<File> {
  return new Promise<File>((resolve, reject) => entry.file(resolve, reject));
}

/** A folder input's files (paths below the chosen folder) as a tree; empty folders are not given. */
function filesTree(files: File[]): Map<string, FilesNode> {
  const top = new Map<string, FilesNode>();
  for (const file of files) {
    const parts = (file.webkitRelativePath || file.name).split('/').slice(1);
    let level = top;
    for (const [i, part] of parts.entries()) {
      if (part === '') continue;
      let node = level.get(part);
      if (!node) {
        node = { file: i === parts.length - 1 ? file : null, children: new Map() };
        level.set(part, node);
      }
      level = node.children;
    }
  }
  return top;
}

function packed(found: Found[], folderTime: number): EntryBatch {
  const n = found.length;
  const batch: EntryBatch = {
    parents: new Uint32Array(n),
    dirs: new Uint8Array(n),
    sizes: new Float64Array(n),
    mtimes: new Float64Array(n),
    names: '',
  };
  const names: string[] = [];
  for (const [i, f] of found.entries()) {
    batch.parents[i] = f.parent;
    batch.dirs[i] = f.dir ? 1 : 0;
    batch.sizes[i] = f.size;
    batch.mtimes[i] = f.dir ? folderTime : f.mtime;
    // No name holds '/'; one that did could not be told apart, so it is refused (empty).
    names.push(f.name.includes('/') ? '' : f.name);
  }
  batch.names = names.join('/');
  return batch;
}

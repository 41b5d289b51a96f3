// Messages between the page (../share.ts, through ./page.ts) and the index worker
// (./worker.ts). The page owns the data link; the worker owns the index and its
// storage. The value types are the ones the wasm module generates (type-only
// imports: nothing here loads the wasm).

import type { EntryPath, EntryRow, ListPage, Progress, SearchBatch, Stats } from '../../../core-wasm/pkg/linkfs_core_wasm.js';

/** Figures the worker reports with every progress message (tests, benchmarks). */
export interface ShareStats extends Stats {
  /** The page's own wasm memory (the data link), added by the page. */
  pageWasmMemoryBytes?: number;
  /** With the first answer only: the worker's wasm start-up and its whole `open`, ms. */
  workerWasmInitMs?: number;
  workerOpenMs?: number;
}

export type WorkerProgress = Progress;

/** Queries answered by the worker's index, and what each answers with. */
export type IndexQuery =
  | { method: 'list'; dir: number; sort: string; descending: boolean; start: number; count: number }
  | { method: 'entry'; id: number }
  | { method: 'path'; id: number }
  | { method: 'lookup'; path: string }
  | { method: 'indexIn'; dir: number; id: number; sort: string; descending: boolean };

export type QueryAnswer = ListPage | EntryRow | EntryPath | number | null;

/** What to serve or save: one file, or a ZIP of a selection (files and folders). */
export type ServeSource = { kind: 'file'; entry: number } | { kind: 'zip'; roots: number[]; name: string };

/** Where the bytes go. */
export type ServeTarget =
  /** To the service worker on this port; `once`: a download (ends with its one stream), else media. */
  | { kind: 'port'; port: MessagePort; once: boolean }
  /** Into a file the user chose (File System Access), from byte `resumeAt` on. */
  | { kind: 'file'; handle: FileSystemFileHandle; resumeAt?: number }
  /** Into a Blob in memory, refused above `cap` bytes (the last resort). */
  | { kind: 'blob'; cap: number }
  /** A ZIP source's members into `folder` in this directory (File System Access); `resume`: skip files there at full size. */
  | { kind: 'directory'; handle: FileSystemDirectoryHandle; folder: string; resume: boolean };

/** What the page learns of a ZIP before its first byte. */
export interface ZipFacts {
  size: number;
  files: number;
  folders: number;
  contentBytes: number;
  notes: string[];
  notesTotal: number;
}

export type ToWorker =
  | { type: 'open'; key: string }
  | { type: 'channel-open' }
  | { type: 'channel-closed' }
  | { type: 'give-up' }
  | { type: 'frame'; frame: ArrayBuffer }
  | { type: 'query'; id: number; query: IndexQuery }
  | { type: 'read'; id: number; entry: number }
  | { type: 'cancel-read'; id: number }
  | { type: 'serve'; token: string; source: ServeSource; target: ServeTarget }
  | { type: 'serve-stop'; token: string; reason: string }
  /** Starts a whole-share search (replacing any other); results come as `search-results`. */
  | { type: 'search'; id: number; query: string }
  | { type: 'search-stop'; id: number };

export type FromWorker =
  | { type: 'ready'; progress: WorkerProgress; stats: ShareStats }
  | { type: 'open-failed'; message: string }
  | { type: 'send'; frames: ArrayBuffer[] }
  | { type: 'progress'; progress: WorkerProgress; stats: ShareStats }
  | { type: 'reset' }
  | { type: 'changed'; dirs: number[]; all: boolean }
  | { type: 'link-lost' }
  | { type: 'ended'; gone: boolean; message: string }
  | { type: 'answer'; id: number; value: QueryAnswer }
  | { type: 'query-failed'; id: number; message: string }
  | { type: 'read-progress'; id: number; done: number; total: number }
  | { type: 'read-done'; id: number; blob: Blob }
  | { type: 'read-failed'; id: number; message: string }
  | { type: 'serve-ready'; token: string; size: number; name: string; zip?: ZipFacts }
  /** `sent`: bytes delivered onward; `read`: bytes read from the sharer (with read-ahead). */
  | { type: 'serve-progress'; token: string; sent: number; read: number }
  | { type: 'serve-blob'; token: string; blob: Blob }
  /** `folder`, `notes`, `notesTotal`: a directory save's folder and the names it changed. */
  | { type: 'serve-finished'; token: string; ok: boolean; message: string; folder?: string; notes?: string[]; notesTotal?: number }
  | { type: 'search-results'; id: number; batch: SearchBatch };

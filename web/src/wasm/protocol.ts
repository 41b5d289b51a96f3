// Messages between the page (../share.ts, through ./page.ts) and the index worker
// (./worker.ts). The worker owns the visit (core's receiving lifecycle: when to
// connect, the index, its storage); the page owns the data links the visit asks
// for, since Chromium cannot hand a data channel to a worker. The value types are
// the ones the wasm module generates (type-only imports: nothing here loads the wasm).

import type { EntryId, EntryPath, EntryRow, LinkRights, ListPage, Progress, SearchBatch, SortKey, Stats } from '../../../core-wasm/pkg/linkfs_core_wasm.js';
import type { ThumbnailAsk as ThumbAsk, Thumbnail as ThumbMade, ConnectionStatus, TransferSource, TransferTarget, UploadState, ZipFacts } from '../api';
import type { LinkState } from './page';

/** Figures the worker reports with every progress message (tests, benchmarks). */
export interface ShareStats extends Stats {
  /** The page's own wasm memory (the data link), added by the page. */
  pageWasmMemoryBytes?: number;
  /** With the first answer only: the worker's wasm start-up and its whole `open`, ms. */
  workerWasmInitMs?: number;
  workerOpenMs?: number;
}

/** Queries answered by the worker's index, and what each answers with. */
export type IndexQuery =
  | { method: 'list'; dir: EntryId; sort: SortKey; descending: boolean; start: number; count: number }
  | { method: 'entry'; id: EntryId }
  | { method: 'path'; id: EntryId }
  | { method: 'lookup'; path: string }
  | { method: 'indexIn'; dir: EntryId; id: EntryId; sort: SortKey; descending: boolean };

/** A query's answer, tagged with the query's method (the page checks it before use). */
export type QueryAnswer =
  | { method: 'list'; value: ListPage }
  | { method: 'entry'; value: EntryRow | null }
  | { method: 'path'; value: EntryPath }
  | { method: 'lookup'; value: EntryRow | null }
  | { method: 'indexIn'; value: number | null };

export type ToWorker =
  | { type: 'open'; key: string }
  /** What the page's data link said: its handshake's progress, or why it failed. */
  | { type: 'link-status'; state: LinkState; message: string }
  | { type: 'link-open' }
  | { type: 'link-closed' }
  /** The page painted its first screen from a kept folder (the restore need not wait for a listing). */
  | { type: 'shown' }
  /** The link's password, which the visit asks for (kept for later links). */
  | { type: 'password'; password: string }
  | { type: 'frame'; frame: ArrayBuffer }
  | { type: 'query'; id: number; query: IndexQuery }
  | { type: 'read'; id: number; entry: EntryId }
  | { type: 'cancel-read'; id: number }
  | { type: 'serve'; token: string; source: TransferSource; target: TransferTarget }
  | { type: 'serve-stop'; token: string; reason: string }
  /** Starts a whole-share search (replacing any other); results come as `search-results`. */
  | { type: 'search'; id: number; query: string }
  | { type: 'search-stop'; id: number }
  /** Adds `file` to the share at `path` (relative to the link's folder); its state comes as `upload-state`. */
  | { type: 'upload'; id: number; file: File; path: string }
  | { type: 'upload-cancel'; id: number }
  /** A thumbnail of an image (or a cached video poster); answered by `thumb-done`. */
  | { type: 'thumb'; id: number; ask: ThumbAsk }
  | { type: 'thumb-cancel'; id: number }
  /** A thumbnail the page made (a video's poster), to keep. */
  | { type: 'thumb-store'; ask: ThumbAsk; blob: Blob };


export type FromWorker =
  | { type: 'ready'; progress: Progress; stats: ShareStats }
  | { type: 'open-failed'; message: string }
  /** Where opening the index is (until 'ready'): loading its code, opening its storage. */
  | { type: 'opening'; step: 'code' | 'storage' }
  /** Open a data link to the sharer (closing any other first) and report on it. */
  | { type: 'connect' }
  /** Close the data link, or drop the attempt under way. */
  | { type: 'close-link' }
  | { type: 'send'; frames: ArrayBuffer[] }
  | { type: 'status'; status: ConnectionStatus }
  | { type: 'progress'; progress: Progress; stats: ShareStats }
  | { type: 'reset' }
  | { type: 'changed'; dirs: EntryId[]; all: boolean }
  | { type: 'answer'; id: number; answer: QueryAnswer }
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
  | { type: 'search-results'; id: number; batch: SearchBatch }
  /** What the link lets this visitor do (once the sharer said). */
  | { type: 'rights'; rights: LinkRights }
  | { type: 'upload-state'; id: number; state: UploadState }
  | { type: 'thumb-done'; id: number; made: ThumbMade }
  | { type: 'thumb-failed'; id: number; message: string };

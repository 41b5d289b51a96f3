// Messages between the page (share.ts) and the index worker (worker.ts).
// The page owns the data channel; the worker owns the index and its storage.

import type { IndexProgress } from './api';

/** Figures the worker reports with every progress message (tests, benchmarks). */
export interface ShareStats {
  indexWireBytes: number;
  entries: number;
  indexHeapBytes: number;
  wasmMemoryBytes: number;
  refusedOps: number;
  /** The page's own wasm memory (the connection), added by the page. */
  pageWasmMemoryBytes?: number;
}

export interface WorkerProgress extends IndexProgress {
  storageProblem?: string;
}

/** Queries answered by the worker's index. */
export type IndexQuery =
  | { method: 'list'; dir: number; sort: string; descending: boolean; start: number; count: number }
  | { method: 'entry'; id: number }
  | { method: 'path'; id: number }
  | { method: 'lookup'; path: string };

export type ToWorker =
  | { type: 'open'; room: string }
  | { type: 'channel-open' }
  | { type: 'channel-closed' }
  | { type: 'frame'; frame: ArrayBuffer }
  | { type: 'query'; id: number; query: IndexQuery }
  | { type: 'read'; id: number; entry: number }
  | { type: 'cancel-read'; id: number };

export type FromWorker =
  | { type: 'ready'; progress: WorkerProgress; stats: ShareStats }
  | { type: 'open-failed'; message: string }
  | { type: 'send'; frames: ArrayBuffer[] }
  | { type: 'progress'; progress: WorkerProgress; stats: ShareStats }
  | { type: 'reset' }
  | { type: 'ended'; gone: boolean; message: string }
  | { type: 'answer'; id: number; value: unknown }
  | { type: 'query-failed'; id: number; message: string }
  | { type: 'read-progress'; id: number; done: number; total: number }
  | { type: 'read-done'; id: number; blob: Blob }
  | { type: 'read-failed'; id: number; message: string };

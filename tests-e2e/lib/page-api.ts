// What the harness may touch inside a linkfs page. `window.linkfsShare` is the UI's own
// interface (web/src/api.ts); `window.linkfsStats` is a test hook the web app provides
// (optional: figures that need it are reported as null when it is absent).

import type { ConnectionStatus, IndexProgress, ShareApi, TabShareProbe } from '../../web/src/api.ts';

export type { ConnectionStatus, EntryId, EntryKind, EntryRow, IndexProgress, ShareApi } from '../../web/src/api.ts';

export interface LinkfsStats {
  /** Bytes of index batches received over the data channel so far (frames as sent). */
  indexWireBytes: number;
  /** The worker's wasm memory and the page's (bytes). */
  wasmMemoryBytes?: number;
  pageWasmMemoryBytes?: number;
  /** Snapshots of the index stored in this session; the last one's size and build time. */
  snapshots?: number;
  snapshotBytes?: number;
  snapshotMs?: number;
  [figure: string]: unknown;
}

declare global {
  interface Window {
    linkfsShare?: ShareApi;
    /** A tab that shares a folder. */
    linkfsTabShare?: TabShareProbe;
    linkfsStats?: () => LinkfsStats | null;
    /** Checks the protocol's test vectors in the page's wasm build; returns how many. */
    linkfsSelfTest?: () => number;
  }
}

/** A snapshot of where a page is, for waits and error messages. */
export interface ShareSnapshot {
  hasApi: boolean;
  bodyState: string | null;
  status: ConnectionStatus | null;
  progress: IndexProgress | null;
}

export function describeSnapshot(s: ShareSnapshot | null): string {
  if (s === null) return 'no snapshot';
  if (!s.hasApi) return `window.linkfsShare is not set (body state ${JSON.stringify(s.bodyState)})`;
  const p = s.progress;
  return `state ${JSON.stringify(s.status?.state)} (${JSON.stringify(s.status?.message)}), progress ${p === null ? 'none' : `received ${p.received}, announced ${p.announced}, persisted ${p.persisted}, complete ${String(p.complete)}`}`;
}

/**
 * What `document.body.dataset.opening` (set by the page while its index opens) says of
 * a page that never connected: '' once it opened, else the step it stopped at.
 */
export function openingStep(opening: string | null | undefined): string {
  if (opening == null) return '';
  return ` (the index worker is still opening: ${opening === 'code' ? 'loading its code' : 'opening its storage'})`;
}

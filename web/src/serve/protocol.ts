// Messages of the serving path: the page registers a byte source with the service
// worker (../sw.ts) under a token; the service worker answers requests for
// `<app>/linkfs-serve/<token>/<name>` with a streamed Response whose bytes come
// from the index worker (../wasm/serve.ts) over a MessagePort, credit by credit,
// so no side ever holds more than a window of the file.
//
//   page ──register{token, port}──▶ service worker ──open/credit/cancel──▶ index worker
//                                   service worker ◀──data/end/error────── index worker
//
// Downloads (Content-Disposition: attachment), media (Range, 206) and PDFs
// (inline) all take this path.

/** URL path segment the service worker answers under the app's scope. */
export const SERVE_PREFIX = 'linkfs-serve';

/** Bytes the service worker lets the index worker send ahead of the browser's reading, for downloads. */
export const SERVE_WINDOW = 4 * 1024 * 1024;
/** The same for media: the element buffers ahead itself, and a seek wastes what was sent ahead. */
export const MEDIA_WINDOW = 256 * 1024;

/** What a token serves, as the service worker needs to answer for it. */
export interface ServedResource {
  /** Exact length in bytes (a file's size, or the ZIP's predicted length). */
  size: number;
  /** The file name offered to the browser (the last URL segment carries it too). */
  name: string;
  /** Content-Type. */
  mime: string;
  /** `inline` for media and PDFs shown in the browser, `attachment` for downloads. */
  disposition: 'inline' | 'attachment';
  /** Range requests are answered (files); a ZIP is only ever served whole. */
  ranges: boolean;
  /** Bytes the index worker may send ahead of the browser's reading (SERVE_WINDOW for downloads, less for media, whose element buffers ahead itself). */
  window: number;
}

/** Page -> service worker. */
export type ToServiceWorker =
  /** `port` leads to the index worker; the service worker answers `registered` on `reply`. */
  | { type: 'register'; token: string; resource: ServedResource; port: MessagePort; reply: MessagePort }
  | { type: 'unregister'; token: string }
  /** Keeps the service worker alive while the page has streams running. */
  | { type: 'ping' }
  /** Figures for tests: the service worker answers a `ServiceWorkerStats` on `reply`. */
  | { type: 'stats'; reply: MessagePort };

/** What the service worker holds now (tests and benchmarks). */
export interface ServiceWorkerStats {
  /** Bytes received from the index worker and not yet read by the browser. */
  heldBytes: number;
  streams: number;
  served: number;
}

/** Service worker -> page, on a `register`'s reply port. */
export interface RegisteredReply {
  type: 'registered';
  token: string;
}

/** Service worker -> index worker, on a token's port. */
export type ToSource =
  /** A request arrived: serve bytes [start, end) as stream `stream`, `credit` bytes may go at once. */
  | { type: 'open'; stream: number; start: number; end: number; credit: number }
  /** The browser read `bytes` more: that much more may be sent. */
  | { type: 'credit'; stream: number; bytes: number }
  /** The browser stopped reading (a seek, a cancelled download, a closed tab). */
  | { type: 'cancel'; stream: number }
  /** The browser read the stream to its end. */
  | { type: 'drained'; stream: number };

/** Index worker -> service worker, on a token's port. */
export type FromSource =
  | { type: 'data'; stream: number; chunk: ArrayBuffer }
  | { type: 'end'; stream: number }
  | { type: 'error'; stream: number; message: string };

// The one interface the UI codes against. `share.ts` implements it on top of the
// wasm module (loaded lazily, the only place that touches it); tests reach the
// same object as `window.linkfsShare` once a link is open.

// The values the index worker answers with are the types core-wasm generates
// from its Rust structs (type-only: nothing here loads the wasm). Ids are branded
// numbers, as they are newtypes in Rust.
export type {
  LinkRights,
  ConnectionState,
  EntryId,
  EntryRow,
  Kind as EntryKind,
  ListPage,
  Progress as IndexProgress,
  ReadHandle,
  SearchHit,
  SortKey,
} from '../../core-wasm/pkg/linkfs_core_wasm.js';
import type {
  ConnectionState,
  LinkRights,
  EntryId,
  EntryRow,
  ListPage,
  Progress as IndexProgress,
  SearchHit,
  SortKey,
} from '../../core-wasm/pkg/linkfs_core_wasm.js';

/** The share's root folder. */
export const ROOT_ID = 0 as EntryId;

/** Where one added file stands. */
export interface UploadState {
  /** hashing: read to hash; waiting: for the sharer; sending; done; failed. */
  phase: 'hashing' | 'waiting' | 'sending' | 'done' | 'failed';
  /** Bytes hashed (hashing) or written by the sharer (sending, done). */
  done: number;
  total: number;
  /** The sharer already held this many bytes of it (a resumed upload). */
  resumedFrom?: number;
  /** Where it goes or went, in the link's folder. */
  path?: string;
  /** How its names were made safe, one change per line. */
  changes?: string;
  /** The name asked for was taken: `path` is another. */
  renamed?: boolean;
  message?: string;
  /**
   * Failed because the visit ended: the sharer keeps what it has of the file, and the
   * same file added on a later visit goes on from there.
   */
  resumable?: boolean;
}

/** A thumbnail wanted: of entry `entry` as the index lists it, `px` device pixels on its short side. */
export interface ThumbnailAsk {
  entry: EntryId;
  name: string;
  size: number;
  mtime: number;
  px: number;
  /** Only a cached one (a video's poster, which the page makes and keeps with `keepThumbnail`). */
  cachedOnly: boolean;
}

/** A thumbnail, and what it cost. */
export interface Thumbnail {
  /** Null: none can be made (not an image this browser decodes, too big, or not cached). */
  blob: Blob | null;
  /** Bytes read from the sharer to make it (0 from the cache). */
  bytesRead: number;
  /** cache: kept from before; embedded: the preview a photo carries; decoded: from the whole image. */
  from: 'cache' | 'embedded' | 'decoded' | 'none';
}

export interface ConnectionStatus {
  state: ConnectionState;
  /** What happened, in words a user understands, with the fix where there is one. */
  message: string;
}

export interface ReadProgress {
  /** Verified bytes received so far. */
  done: number;
  total: number;
}

export interface ReadOptions {
  onProgress?: (p: ReadProgress) => void;
  signal?: AbortSignal;
}

export type ShareEvent =
  | { type: 'status'; status: ConnectionStatus }
  /** What the link lets this visitor do, once the sharer said. */
  | { type: 'rights'; rights: LinkRights }
  | { type: 'progress'; progress: IndexProgress }
  /**
   * Entries under these directories changed (the directories themselves may have
   * been renamed, moved or removed); re-list them if shown. `all`: more changed
   * than was recorded, so any directory may have.
   */
  | { type: 'changed'; dirs: EntryId[]; all?: boolean }
  /**
   * The index opened after the page had drawn a folder from what it kept of an
   * earlier visit (see `ShareApi.opened`): ask again for what is shown.
   */
  | { type: 'opened' };

/** What to serve or save: one file, or a ZIP of a selection of files and folders. */
export type TransferSource = { kind: 'file'; id: EntryId } | { kind: 'zip'; ids: EntryId[]; name: string };

/** Where a transfer's bytes go. */
export type TransferTarget =
  /** To the service worker on `port` (a download when `once`, else media answering many ranges). */
  | { kind: 'port'; port: MessagePort; once: boolean }
  /** Into a file the user picked (File System Access), continuing at byte `resumeAt`. */
  | { kind: 'file'; handle: FileSystemFileHandle; resumeAt?: number }
  /**
   * Into a Blob the browser keeps on its disk until complete (`TransferDone.blob`):
   * where there is neither a service worker nor File System Access (plain http).
   */
  | { kind: 'blob' }
  /**
   * A ZIP source's files and folders into the folder `folder` inside `handle` (File
   * System Access; made if missing), structure kept; `resume`: skip files already
   * there at full size (a retry).
   */
  | { kind: 'directory'; handle: FileSystemDirectoryHandle; folder: string; resume: boolean };

/** How a transfer ended well. */
export interface TransferDone {
  /** A `blob` target's bytes. */
  blob?: Blob;
  /** A `directory` target: the folder written into… */
  folder?: string;
  /** …and names changed while writing (the first 1,000; `notesTotal` counts all). */
  notes?: string[];
  notesTotal?: number;
}

/** A ZIP's facts, known before its first byte. */
export interface ZipFacts {
  /** Exact length of the ZIP. */
  size: number;
  files: number;
  folders: number;
  contentBytes: number;
  /** Names changed or entries left out, in words (the first 1,000). */
  notes: string[];
  notesTotal: number;
}

export interface Transfer {
  /** Size and name, once the source is ready (a ZIP's plan is made first). */
  readonly ready: Promise<{ size: number; name: string; zip?: ZipFacts }>;
  /** Settles when the bytes are all delivered (with the Blob for a `blob` target), or why not. */
  readonly done: Promise<TransferDone>;
  /**
   * Called with the bytes delivered so far (for a `file` target: the position
   * reached) and the bytes read from the sharer for it (read-ahead included).
   */
  onProgress: ((sent: number, read: number) => void) | null;
  stop(reason: string): void;
}

/** What a search found since the last report, and how far it is. */
export interface SearchUpdate {
  hits: SearchHit[];
  /** Entries scanned so far, of `total`. */
  scanned: number;
  total: number;
  done: boolean;
  /** More matched than are reported (10,000). */
  truncated: boolean;
}

/** The data link as `getStats` sees it (the selected ICE candidate pair). */
export interface ConnectionInfo {
  /** `direct`: host, srflx or prflx candidates on both ends; `relayed`: through a TURN server. */
  route: 'direct' | 'relayed';
  localType: string;
  remoteType: string;
  /** udp or tcp. */
  protocol: string;
  /** Current round-trip time, if measured. */
  rttMs: number | null;
  /** Bytes received so far, over every connection (for the speed). */
  bytesReceived: number;
  /**
   * More connections (lanes) carrying this link's reads: opened at a distance when
   * one connection moves a big read slowly.
   */
  lanes: number;
}

export interface ShareApi {
  readonly rootId: EntryId;
  /**
   * Settles once the share's index is open (it can answer everything). Until then a
   * reopened share may answer the questions that draw a folder from what the page
   * kept of it (see kept-folders.ts). Rejects when the index cannot be opened.
   */
  readonly opened: Promise<void>;
  status(): ConnectionStatus;
  progress(): IndexProgress;
  /** Returns an unsubscribe function. */
  subscribe(listener: (event: ShareEvent) => void): () => void;
  list(dir: EntryId, sort: SortKey, descending: boolean, start: number, count: number): Promise<ListPage>;
  entry(id: EntryId): Promise<EntryRow | null>;
  /** The entries from the root down to `id`, for breadcrumbs. */
  path(id: EntryId): Promise<EntryRow[]>;
  /** Looks up a '/'-separated path relative to the share root ('' is the root). */
  lookup(path: string): Promise<EntryRow | null>;
  /** Reads a whole file; every chunk is BLAKE3-verified before it is used. */
  read(id: EntryId, options?: ReadOptions): Promise<Blob>;
  /**
   * Searches every name in the share (case-folded, NFC-normalised; substring, or a
   * `*`/`?` glob over the whole name), in the index worker; `onUpdate` hears the
   * matches as they are found. Settles when done or when `signal` aborts.
   */
  search(query: string, onUpdate: (update: SearchUpdate) => void, signal?: AbortSignal): Promise<void>;
  /** Where entry `id` is in folder `dir` listed in this order, if there. */
  indexIn(dir: EntryId, id: EntryId, sort: SortKey, descending: boolean): Promise<number | null>;
  /** The current data link's route and round trip, or null when there is none. */
  connection(): Promise<ConnectionInfo | null>;
  /** Streams a file or a ZIP somewhere with bounded memory; see `TransferTarget`. */
  transfer(source: TransferSource, target: TransferTarget): Transfer;
  /** The link's password, when the status is `password` (or before: kept for when asked). */
  givePassword(password: string): void;
  /** What the link lets this visitor do; null until the sharer said. */
  rights(): LinkRights | null;
  /**
   * Adds `file` to the share at `path` ('/'-separated, relative to the link's folder),
   * read from disk as it goes (never whole in memory); `onState` hears where it stands
   * until `done` or `failed`. Returns a function that cancels it.
   */
  upload(file: File, path: string, onState: (state: UploadState) => void): () => void;
  /**
   * A thumbnail, made in the index worker from the bytes read on demand (a photo's
   * embedded preview where it has one), or from the browser's cache with nothing read.
   */
  thumbnail(ask: ThumbnailAsk, signal?: AbortSignal): Promise<Thumbnail>;
  /**
   * A thumbnail from the browser's cache alone, read on the page (not through the
   * index worker, which may be busy), as a URL an image can show (the caller owns
   * it: a `blob:` one is revoked when done with): null when it is not there.
   */
  cachedThumbnail(ask: ThumbnailAsk): Promise<string | null>;
  /** Keeps a thumbnail the page made (a video's poster) in the cache. */
  keepThumbnail(ask: ThumbnailAsk, blob: Blob): void;
  /**
   * The thumbnails kept with the first screen of the folder shown last on an
   * earlier visit (the grid's key -> data: URL), when that folder is being drawn
   * from what was kept; else none.
   */
  keptPictures(): ReadonlyMap<string, string>;
  /** Keeps the thumbnails of the first screen shown now for the next visit (as the page is hidden). */
  keepPictures(pictures: ReadonlyMap<string, string>): void;
  close(): void;
}

/** One visitor of a folder shared from this tab. */
export interface TabVisitorRow {
  peer: number;
  who: string;
  /** Unix seconds. */
  since: number;
  /** Bytes of files sent to it. */
  served: number;
  reads: number;
  /** Bytes the browser holds for it, not yet sent. */
  queued: number;
  /** The file it read last (relative to the folder; empty before any). */
  reading: string;
}

/** What tests and the benchmark read of a tab that shares a folder (`window.linkfsTabShare`). */
export interface TabShareProbe {
  link: string;
  /** Entries shared now, the folder itself included. */
  entries(): number;
  walkDone: boolean;
  /** Whether the share follows changes on disk (FileSystemObserver), or is a snapshot. */
  live: boolean;
  /** The walk's time, ms, once done. */
  walkMs: number;
  visitors(): TabVisitorRow[];
  /** Bytes read from files for visitors so far. */
  readBytes(): number;
  /** Bytes the share's index holds. */
  indexBytes(): number;
  /** Bytes of the page's wasm memory. */
  wasmBytes(): number;
  /** Parts of the share held for links that show one (a folder, a selection). */
  parts(): number;
}

// The ShareApi on top of the wasm module, which it reaches only through
// ./wasm/page.ts (the page's side) and the index worker (./wasm/worker.ts).
//
// The index worker holds the visit (core's receiving lifecycle: when to connect,
// reconnect or give up, the status words, the index and IndexedDB); the page
// opens and closes the data links it asks for (signaling + the browser's
// RTCPeerConnection and data channel, in wasm: Chromium cannot hand a data
// channel to a worker) and shows what it says. Frames move between the two as
// transferred ArrayBuffers.

import {
  type ConnectionInfo,
  type ConnectionStatus,
  type EntryId,
  type EntryRow,
  type IndexProgress,
  type LinkRights,
  type ListPage,
  type ReadOptions,
  ROOT_ID,
  type ShareApi,
  type ShareEvent,
  type SearchUpdate,
  type SortKey,
  type Thumbnail,
  type ThumbnailAsk,
  type Transfer,
  type TransferDone,
  type TransferSource,
  type TransferTarget,
  type UploadState,
  type ZipFacts,
} from './api';
import { KeptFolders } from './kept-folders';
import { shareTag, ThumbStore } from './thumb-store';
import type { FromWorker, IndexQuery, QueryAnswer, ShareStats, ToWorker } from './wasm/protocol';
import { type DataLink, type LinkState, openDataLink, pageWasmMemoryBytes, startIndexWorker, wasmSelfTest } from './wasm/page';

/** The link's key part is malformed: the page says so instead of connecting. */
export class InvalidLinkError extends Error {
  override name = 'InvalidLinkError';
}

declare global {
  interface Window {
    /** Latest figures from the index worker (tests and benchmarks). */
    linkfsStats?: () => ShareStats | null;
    /** Decodes the protocol's test vectors with this page's wasm build; returns how many. */
    linkfsSelfTest?: () => number;
  }
}

const KEY_SHAPE = /^[A-Za-z0-9_-]{8,64}\.[A-Za-z0-9_-]{22}$/;

interface PendingQuery {
  /** Takes the answer if it is the one asked for (else rejects). */
  take: (answer: QueryAnswer) => void;
  reject: (error: Error) => void;
}

interface PendingRead {
  resolve: (blob: Blob) => void;
  reject: (error: Error) => void;
  onProgress?: ReadOptions['onProgress'];
}

interface PendingTransfer {
  transfer: Transfer;
  ready: { resolve: (v: { size: number; name: string; zip?: ZipFacts }) => void; reject: (e: Error) => void };
  done: { resolve: (v: TransferDone) => void; reject: (e: Error) => void };
  blob?: Blob;
}

class WasmShare implements ShareApi {
  readonly rootId = ROOT_ID;
  readonly opened: Promise<void>;
  /** The index answers (the worker said 'ready'). */
  private isOpen = false;
  /** What the page keeps of this share's folders (recorded from the index's answers). */
  private kept: KeptFolders | null = null;
  /** Answer from `kept` until the index is open. */
  private answerEarly = false;
  /** Something was answered from `kept`: the view asks again once the index is open. */
  private answeredEarly = false;
  /** A folder question the index answered before it was whole (so not kept): ask again once whole. */
  private answeredUnkept = false;
  private worker: Worker;
  private readonly startWorker: () => Worker;
  /**
   * What was posted to the worker before it said anything (it says 'opening' as soon
   * as its code runs), to post again to a new one; null once it has spoken.
   */
  private unheard: Array<[ToWorker, Transferable[]]> | null = [];
  private workerStartTimer: ReturnType<typeof setTimeout> | undefined;
  /** Index workers made again because one never started. */
  private workerRestarts = 0;
  /** The data link the visit asked for last (open, or being opened). */
  private dataLink: DataLink | null = null;
  private currentStatus: ConnectionStatus = { state: 'connecting', message: 'Opening the share…' };
  /** Where opening the index stands (the worker says), and since when it is under way. */
  private openStep: 'code' | 'storage' | null = null;
  private openStartedAt = 0;
  private slowOpenTimer: ReturnType<typeof setInterval> | undefined;
  /** Told, besides the share's listeners, when opening is slow (a view not attached yet). */
  onSlowOpen: ((status: ConnectionStatus) => void) | null = null;
  private currentProgress: IndexProgress = { received: 0, announced: 0, complete: false, persisted: 0, fromCache: 0, loadingCache: false };
  private stats: ShareStats | null = null;
  private readonly listeners = new Set<(event: ShareEvent) => void>();
  private readonly queries = new Map<number, PendingQuery>();
  private readonly reads = new Map<number, PendingRead>();
  private readonly thumbs = new Map<number, { resolve: (t: Thumbnail) => void; reject: (e: Error) => void }>();
  private readonly transfers = new Map<string, PendingTransfer>();
  private search_: { id: number; onUpdate: (u: SearchUpdate) => void; resolve: () => void } | null = null;
  private nextId = 1;
  private rights_: LinkRights | null = null;
  /** Where each added file's state goes, by the page's id. */
  private readonly uploads = new Map<number, (state: UploadState) => void>();
  /** The link being followed (origin + fragment). */
  private link = '';

  constructor(startWorker: () => Worker) {
    this.startWorker = startWorker;
    this.opened = new Promise((resolve, reject) => (this.readyWaiter = { resolve, reject }));
    this.opened.catch(() => undefined); // whoever opened the share hears it
    this.worker = this.attach(startWorker());
    this.workerStartTimer = setTimeout(() => this.restartSilentWorker(), WORKER_START_MS);
  }

  private attach(worker: Worker): Worker {
    worker.onmessage = (event: MessageEvent<FromWorker>) => {
      if (this.unheard !== null) {
        this.unheard = null;
        clearTimeout(this.workerStartTimer);
      }
      this.onWorker(event.data);
    };
    worker.onerror = (event: ErrorEvent) => {
      const message = `The page's index worker failed: ${event.message}. Reload the page.`;
      if (!this.isOpen) this.failOpen(new Error(message));
      this.setStatus({ state: 'error', message });
    };
    return worker;
  }

  /**
   * A worker whose code never ran (in Firefox ESR a module worker now and then neither
   * starts nor fails: the page said "Connecting…" for good) is made again, and told
   * again what it was told, up to WORKER_RESTARTS times. Not once anything posted to it
   * carried a transferable, which cannot be posted twice.
   */
  private restartSilentWorker(): void {
    const told = this.unheard;
    if (told === null || this.workerRestarts >= WORKER_RESTARTS) return;
    if (told.some(([, transfer]) => transfer.length > 0)) return;
    this.worker.onmessage = null;
    this.worker.onerror = null;
    this.worker.terminate();
    this.workerRestarts += 1;
    console.warn(`linkfs: the index worker said nothing in ${WORKER_START_MS} ms; starting it again (${this.workerRestarts})`);
    this.worker = this.attach(this.startWorker());
    for (const [message, transfer] of told) this.worker.postMessage(message, transfer);
    this.workerStartTimer = setTimeout(() => this.restartSilentWorker(), WORKER_START_MS);
  }

  private post(message: ToWorker, transfer: Transferable[] = []): void {
    // Bounded: a page posts a few messages before its worker speaks.
    if (this.unheard !== null && this.unheard.length >= 256) this.unheard = null;
    this.unheard?.push([message, transfer]);
    this.worker.postMessage(message, transfer);
  }

  /** Opens the cached index in the worker; `opened` settles when it can answer queries. */
  open(key: string): void {
    this.thumbStore = new ThumbStore(shareTag(key));
    this.post({ type: 'open', key });
    this.openStartedAt = performance.now();
    this.slowOpenTimer = setInterval(() => this.sayOpenIsSlow(), 1000);
  }

  /**
   * Opening the index takes a fraction of a second; past SLOW_OPEN_MS the status says
   * what it waits for, and what to do, instead of "Connecting…" with no end.
   */
  private sayOpenIsSlow(): void {
    if (this.readyWaiter === null) return this.openSettled(); // opened, or failed to
    const ms = performance.now() - this.openStartedAt;
    if (ms < SLOW_OPEN_MS) return;
    const waiting =
      this.openStep === 'storage'
        ? "this browser's storage has not answered yet (after 10 s the page goes on without it)"
        : this.openStep === 'code'
          ? "this browser is still loading the page's code; if it stays so, check the connection and reload the page"
          : "the page's worker has not started; reload the page";
    const status: ConnectionStatus = { state: 'connecting', message: `Still opening the share after ${Math.round(ms / 1000)} s: ${waiting}.` };
    this.setStatus(status);
    this.onSlowOpen?.(status);
  }

  private openSettled(): void {
    clearInterval(this.slowOpenTimer);
    this.slowOpenTimer = undefined;
    delete document.body.dataset.opening;
  }

  /**
   * Keeps what the index answers about folders in `kept`; with `answerEarly`, the
   * questions `kept` can answer are answered from it until the index is open.
   */
  keep(kept: KeptFolders, answerEarly: boolean): void {
    this.kept = kept;
    this.answerEarly = answerEarly && !this.isOpen;
  }

  /**
   * The kept answers, while they stand in for the index: until it is open and its
   * saved part is loaded whole (a big one answers while it loads the rest, and a
   * folder not loaded yet would look missing or empty).
   */
  private early(): KeptFolders | null {
    return this.answerEarly && !this.indexWhole() ? this.kept : null;
  }

  /** The index is open and holds all it saved (what it answers is what it has). */
  private indexWhole(): boolean {
    return this.isOpen && !this.currentProgress.loadingCache;
  }

  /** Answers `value` from what was kept. */
  private answered<T>(value: T): Promise<T> {
    if (!this.answeredEarly) {
      performance.mark('linkfs:kept-folder');
      // Once what it drew is painted, the worker's restore need not wait for a listing.
      requestAnimationFrame(() => setTimeout(() => this.post({ type: 'shown' }), 0));
    }
    this.answeredEarly = true;
    return Promise.resolve(value);
  }

  /** The thumbnails' cache, read from the page. */
  private thumbStore: ThumbStore | null = null;

  private readyWaiter: { resolve: () => void; reject: (e: Error) => void } | null = null;

  givePassword(password: string): void {
    this.post({ type: 'password', password });
  }

  /** Follows `link` (origin + fragment): from now on the visit's requests for a data link are served. */
  follow(link: string): void {
    this.link = link;
  }

  /** Opens the data link the visit asked for, reporting what happens to it to the worker. */
  private async openLink(): Promise<void> {
    this.dropLink();
    let dataLink: DataLink | null = null;
    const current = (): boolean => dataLink !== null && this.dataLink === dataLink;
    const pending: ToWorker[] = [];
    // Until the link object exists, what it reports waits (its constructor may report at once).
    const report = (message: ToWorker, transfer: Transferable[] = []): void => {
      if (dataLink === null) pending.push(message);
      else if (current()) this.post(message, transfer);
    };
    try {
      dataLink = await openDataLink(this.link, {
        onStatus: (state: LinkState, message: string) => report({ type: 'link-status', state, message }),
        onOpen: () => report({ type: 'link-open' }),
        onFrame: (frame: ArrayBuffer) => report({ type: 'frame', frame }, [frame]),
        onClose: () => report({ type: 'link-closed' }),
      });
    } catch (error) {
      const text = error instanceof Error ? error.message : String(error);
      this.post({ type: 'link-status', state: 'error', message: `Could not connect to the sharer: ${text}` });
      return;
    }
    this.dataLink = dataLink;
    for (const m of pending) this.post(m);
  }

  /**
   * The browser would not send a frame (its data channel's queue was full, or the
   * channel was closing). The link is one ordered, reliable stream, so a frame left out
   * breaks everything after it (an upload's chunks would wait on a gap for good): the
   * link counts as lost, and the visit connects again and goes on from what the sharer
   * has, as after any dropped connection.
   */
  private loseLink(error: unknown): void {
    const text = error instanceof Error ? error.message : String(error);
    console.warn(`linkfs: the browser refused to send on the link (${text}); connecting again`);
    this.dropLink();
    this.post({ type: 'link-closed' });
  }

  private dropLink(): void {
    const old = this.dataLink;
    this.dataLink = null;
    old?.close();
  }

  /** The page could not start at all (a bad link, no wasm here…): the status says so for good. */
  failToConnect(error: unknown): void {
    const invalid = error instanceof InvalidLinkError;
    const text = error instanceof Error ? error.message : String(error);
    this.setStatus({ state: invalid ? 'invalid-link' : 'error', message: invalid ? text : `Could not connect to the sharer: ${text}` });
  }

  private setStatus(status: ConnectionStatus): void {
    // What shows nothing of itself next time keeps nothing of this visit.
    if (['password', 'password-wrong', 'link-ended', 'invalid-link'].includes(status.state)) this.kept?.forget();
    this.currentStatus = status;
    this.emit({ type: 'status', status });
  }

  private emit(event: ShareEvent): void {
    for (const l of this.listeners) l(event);
  }

  private onProgress(progress: IndexProgress, stats: ShareStats): void {
    const wasWhole = this.indexWhole();
    this.stats = stats;
    this.currentProgress = progress;
    if (this.indexWhole()) this.kept?.progressed(progress);
    this.emit({ type: 'progress', progress });
    // The kept answers stood in until now, or the index answered before it was whole
    // (what it said then was not kept): the view asks the index again.
    if (!wasWhole && this.indexWhole() && (this.answeredEarly || this.answeredUnkept)) {
      this.answeredUnkept = false;
      this.emit({ type: 'opened' });
    }
  }

  /** Keeps an answer of the whole index; one given before it was whole is asked again once it is. */
  private keepOrNote(keep: () => void): void {
    if (this.indexWhole()) keep();
    else if (this.kept !== null) this.answeredUnkept = true;
  }

  /** The index could not be opened: `opened` rejects, and so does every question waiting for it. */
  private failOpen(error: Error): void {
    this.openSettled();
    this.readyWaiter?.reject(error);
    this.readyWaiter = null;
    for (const q of this.queries.values()) q.reject(error);
    this.queries.clear();
    for (const t of this.thumbs.values()) t.reject(error);
    this.thumbs.clear();
  }

  private onWorker(m: FromWorker): void {
    switch (m.type) {
      case 'ready':
        this.openTimings = { workerWasmInitMs: m.stats.workerWasmInitMs ?? 0, workerOpenMs: m.stats.workerOpenMs ?? 0 };
        this.isOpen = true;
        this.openSettled();
        this.onProgress(m.progress, m.stats);
        this.readyWaiter?.resolve();
        this.readyWaiter = null;
        return;
      case 'open-failed':
        this.failOpen(new Error(m.message));
        return;
      case 'opening':
        // Also where a page that never opens stopped, for the tests' failure messages.
        this.openStep = m.step;
        document.body.dataset.opening = m.step;
        return;
      case 'send':
        for (const f of m.frames) {
          const link = this.dataLink;
          if (link === null) return; // no link: the worker heard (or hears) it closed
          try {
            link.send(new Uint8Array(f));
          } catch (error) {
            this.loseLink(error);
            return;
          }
        }
        return;
      case 'progress':
        this.onProgress(m.progress, m.stats);
        return;
      case 'connect':
        void this.openLink();
        return;
      case 'close-link':
        this.dropLink();
        return;
      case 'status':
        this.setStatus(m.status);
        return;
      case 'reset':
        this.emit({ type: 'changed', dirs: [this.rootId], all: true });
        return;
      case 'changed':
        this.emit({ type: 'changed', dirs: m.dirs, all: m.all });
        return;
      case 'answer':
        this.queries.get(m.id)?.take(m.answer);
        this.queries.delete(m.id);
        return;
      case 'query-failed':
        this.queries.get(m.id)?.reject(new Error(m.message));
        this.queries.delete(m.id);
        return;
      case 'read-progress':
        this.reads.get(m.id)?.onProgress?.({ done: m.done, total: m.total });
        return;
      case 'read-done':
        this.reads.get(m.id)?.resolve(m.blob);
        this.reads.delete(m.id);
        return;
      case 'thumb-done':
        this.thumbs.get(m.id)?.resolve(m.made);
        this.thumbs.delete(m.id);
        return;
      case 'thumb-failed':
        this.thumbs.get(m.id)?.reject(new Error(m.message));
        this.thumbs.delete(m.id);
        return;
      case 'read-failed':
        this.reads.get(m.id)?.reject(new Error(m.message));
        this.reads.delete(m.id);
        return;
      case 'search-results': {
        const run = this.search_;
        if (!run || run.id !== m.id) return;
        const b = m.batch;
        run.onUpdate({ hits: b.rows, scanned: b.scanned, total: b.total, done: b.done, truncated: b.truncated });
        if (b.done) {
          this.search_ = null;
          run.resolve();
        }
        return;
      }
      case 'rights':
        this.rights_ = m.rights;
        for (const l of this.listeners) l({ type: 'rights', rights: m.rights });
        return;
      case 'upload-state': {
        const onState = this.uploads.get(m.id);
        if (m.state.phase === 'done' || m.state.phase === 'failed') this.uploads.delete(m.id);
        onState?.(m.state);
        return;
      }
      case 'serve-ready':
        this.transfers.get(m.token)?.ready.resolve({ size: m.size, name: m.name, ...(m.zip ? { zip: m.zip } : {}) });
        return;
      case 'serve-progress':
        this.transfers.get(m.token)?.transfer.onProgress?.(m.sent, m.read);
        return;
      case 'serve-blob': {
        const t = this.transfers.get(m.token);
        if (t) t.blob = m.blob;
        return;
      }
      case 'serve-finished': {
        const t = this.transfers.get(m.token);
        if (!t) return;
        this.transfers.delete(m.token);
        if (m.ok) {
          const extra = m.folder === undefined ? {} : { folder: m.folder, notes: m.notes ?? [], notesTotal: m.notesTotal ?? 0 };
          t.done.resolve(t.blob ? { blob: t.blob, ...extra } : extra);
        } else {
          const error = new Error(m.message);
          t.ready.reject(error);
          t.done.reject(error);
        }
        return;
      }
    }
  }

  /** Asks the worker's index; `pick` returns the answer's value if it is the one asked for. */
  private query<T>(query: IndexQuery, pick: (answer: QueryAnswer) => T | undefined): Promise<T> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const take = (answer: QueryAnswer): void => {
        const value = pick(answer);
        if (value === undefined) reject(new Error(`the index worker answered '${answer.method}' to '${query.method}'`));
        else resolve(value);
      };
      this.queries.set(id, { take, reject });
      this.post({ type: 'query', id, query });
    });
  }

  private openTimings: { workerWasmInitMs: number; workerOpenMs: number } | null = null;

  rights(): LinkRights | null {
    return this.rights_;
  }

  upload(file: File, path: string, onState: (state: UploadState) => void): () => void {
    const id = this.nextId++;
    this.uploads.set(id, onState);
    this.post({ type: 'upload', id, file, path });
    return () => {
      if (this.uploads.has(id)) this.post({ type: 'upload-cancel', id });
    };
  }

  latestStats(): ShareStats | null {
    if (this.stats === null) return null;
    return { ...this.stats, ...this.openTimings, pageWasmMemoryBytes: pageWasmMemoryBytes() };
  }

  status(): ConnectionStatus {
    return this.currentStatus;
  }

  progress(): IndexProgress {
    // While kept answers stand in, the kept progress (the header keeps its shape),
    // still loading: a folder not found yet may only not be loaded yet.
    const kept = this.early()?.progress;
    return kept ? { ...kept, loadingCache: true } : this.currentProgress;
  }

  subscribe(listener: (event: ShareEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  list(dir: EntryId, sort: SortKey, descending: boolean, start: number, count: number): Promise<ListPage> {
    const early = this.early()?.list(dir, sort, descending, start, count);
    if (early) return this.answered(early);
    return this.query({ method: 'list', dir, sort, descending, start, count }, (a) => (a.method === 'list' ? a.value : undefined)).then((page) => {
      if (start === 0) this.keepOrNote(() => this.kept?.listed(page, sort, descending));
      return page;
    });
  }

  entry(id: EntryId): Promise<EntryRow | null> {
    return this.query({ method: 'entry', id }, (a) => (a.method === 'entry' ? a.value : undefined));
  }

  path(id: EntryId): Promise<EntryRow[]> {
    const early = this.early()?.path(id);
    if (early) return this.answered(early);
    return this.query({ method: 'path', id }, (a) => (a.method === 'path' ? a.value : undefined)).then((crumbs) => {
      this.keepOrNote(() => this.kept?.pathOf(id, crumbs));
      return crumbs;
    });
  }

  lookup(path: string): Promise<EntryRow | null> {
    const early = this.early()?.lookup(path);
    if (early) return this.answered(early);
    return this.query({ method: 'lookup', path }, (a) => (a.method === 'lookup' ? a.value : undefined)).then((entry) => {
      this.keepOrNote(() => this.kept?.lookedUp(path, entry));
      return entry;
    });
  }

  read(id: EntryId, options: ReadOptions = {}): Promise<Blob> {
    const { signal, onProgress } = options;
    if (signal?.aborted) return Promise.reject(abortError());
    const rid = this.nextId++;
    return new Promise<Blob>((resolve, reject) => {
      const pending: PendingRead = { resolve, reject };
      if (onProgress) pending.onProgress = onProgress;
      this.reads.set(rid, pending);
      signal?.addEventListener(
        'abort',
        () => {
          if (this.reads.delete(rid)) {
            this.post({ type: 'cancel-read', id: rid });
            reject(abortError());
          }
        },
        { once: true },
      );
      this.post({ type: 'read', id: rid, entry: id });
    });
  }

  thumbnail(ask: ThumbnailAsk, signal?: AbortSignal): Promise<Thumbnail> {
    if (signal?.aborted) return Promise.reject(abortError());
    const id = this.nextId++;
    return new Promise<Thumbnail>((resolve, reject) => {
      this.thumbs.set(id, { resolve, reject });
      signal?.addEventListener(
        'abort',
        () => {
          if (this.thumbs.delete(id)) {
            this.post({ type: 'thumb-cancel', id });
            reject(abortError());
          }
        },
        { once: true },
      );
      this.post({ type: 'thumb', id, ask });
    });
  }

  cachedThumbnail(ask: ThumbnailAsk): Promise<string | null> {
    return this.thumbStore?.url(ask) ?? Promise.resolve(null);
  }

  keptPictures(): ReadonlyMap<string, string> {
    return (this.answerEarly && this.kept?.pictures) || new Map<string, string>();
  }

  keepPictures(pictures: ReadonlyMap<string, string>): void {
    this.kept?.keepPictures(pictures);
  }

  keepThumbnail(ask: ThumbnailAsk, blob: Blob): void {
    this.post({ type: 'thumb-store', ask, blob });
  }

  search(query: string, onUpdate: (update: SearchUpdate) => void, signal?: AbortSignal): Promise<void> {
    const previous = this.search_;
    if (previous) {
      this.post({ type: 'search-stop', id: previous.id });
      previous.resolve();
    }
    const id = this.nextId++;
    return new Promise<void>((resolve) => {
      this.search_ = { id, onUpdate, resolve };
      signal?.addEventListener(
        'abort',
        () => {
          if (this.search_?.id !== id) return;
          this.search_ = null;
          this.post({ type: 'search-stop', id });
          resolve();
        },
        { once: true },
      );
      this.post({ type: 'search', id, query });
    });
  }

  async connection(): Promise<ConnectionInfo | null> {
    const link = this.dataLink;
    const report = (await link?.statsReport()) as RTCStatsReport | undefined;
    if (!report || !link) return null;
    const info = connectionOf(report);
    // Lanes carry reads too: the speed counts every connection's frames.
    return info === null ? null : { ...info, lanes: link.lanesOpen(), bytesReceived: link.frameBytes() };
  }

  indexIn(dir: EntryId, id: EntryId, sort: SortKey, descending: boolean): Promise<number | null> {
    return this.query({ method: 'indexIn', dir, id, sort, descending }, (a) => (a.method === 'indexIn' ? a.value : undefined));
  }

  transfer(source: TransferSource, target: TransferTarget): Transfer {
    const token = `t${this.nextId++}`;
    let readyHooks!: PendingTransfer['ready'];
    let doneHooks!: PendingTransfer['done'];
    const ready = new Promise<{ size: number; name: string; zip?: ZipFacts }>((resolve, reject) => {
      readyHooks = { resolve, reject };
    });
    const done = new Promise<TransferDone>((resolve, reject) => {
      doneHooks = { resolve, reject };
    });
    // Nobody may be waiting on these (a preview that was closed): no unhandled rejection.
    ready.catch(() => undefined);
    done.catch(() => undefined);
    const transfer: Transfer = {
      ready,
      done,
      onProgress: null,
      stop: (reason: string) => {
        const t = this.transfers.get(token);
        if (!t) return;
        this.transfers.delete(token);
        this.post({ type: 'serve-stop', token, reason });
        t.done.reject(abortError(reason));
      },
    };
    this.transfers.set(token, { transfer, ready: readyHooks, done: doneHooks });
    this.post({ type: 'serve', token, source, target }, target.kind === 'port' ? [target.port] : []);
    return transfer;
  }

  close(): void {
    this.dropLink();
    clearTimeout(this.workerStartTimer);
    this.worker.terminate();
  }
}

interface StatsEntry {
  id: string;
  type: string;
  [key: string]: unknown;
}

/** The selected candidate pair of a stats report, as a ConnectionInfo. */
export function connectionOf(report: RTCStatsReport): ConnectionInfo | null {
  const all = new Map<string, StatsEntry>();
  report.forEach((value: StatsEntry) => all.set(value.id, value));
  let pair: StatsEntry | undefined;
  for (const e of all.values()) {
    if (e.type === 'transport' && typeof e.selectedCandidatePairId === 'string') pair = all.get(e.selectedCandidatePairId);
  }
  // Firefox marks the pair itself instead.
  pair ??= [...all.values()].find((e) => e.type === 'candidate-pair' && (e.selected === true || (e.nominated === true && e.state === 'succeeded')));
  if (!pair) return null;
  const local = all.get(String(pair.localCandidateId));
  const remote = all.get(String(pair.remoteCandidateId));
  const localType = String(local?.candidateType ?? 'unknown');
  const remoteType = String(remote?.candidateType ?? 'unknown');
  const rtt = typeof pair.currentRoundTripTime === 'number' ? pair.currentRoundTripTime * 1000 : null;
  return {
    route: localType === 'relay' || remoteType === 'relay' ? 'relayed' : 'direct',
    localType,
    remoteType,
    protocol: String(local?.protocol ?? 'udp'),
    rttMs: rtt,
    bytesReceived: typeof pair.bytesReceived === 'number' ? pair.bytesReceived : 0,
    lanes: 0,
  };
}

function abortError(message = 'The read was cancelled'): Error {
  return new DOMException(message, 'AbortError');
}

/** How to open a share. */
export interface OpenOptions {
  /**
   * The path (as `lookup` takes it) the page shows first. When the page kept that
   * folder from an earlier visit, openShare resolves at once and the folder is drawn
   * from what was kept while the index opens; `opened` says when it has. Without it
   * (a link that asks for a password) nothing of the share is kept or drawn early.
   */
  showFirst?: string;
  /** Told when opening the index is slow (past SLOW_OPEN_MS), with words for the status. */
  onSlowOpen?: (status: ConnectionStatus) => void;
}

/** When the status starts saying why the share is not open yet, ms. */
const SLOW_OPEN_MS = 5_000;
/** A worker silent this long after it was made never started (see restartSilentWorker). */
const WORKER_START_MS = 7_000;
const WORKER_RESTARTS = 2;

/** Opens the share whose key (`<room>.<secret>`) is in the page's fragment. */
export async function openShare(key: string, options: OpenOptions = {}): Promise<ShareApi> {
  if (!KEY_SHAPE.test(key)) {
    throw new InvalidLinkError(
      'This link is not valid: the part after # should be <room>.<secret>. Check that you copied the whole link.',
    );
  }
  performance.mark('linkfs:open');
  const share = new WasmShare(startIndexWorker);
  share.onSlowOpen = options.onSlowOpen ?? null;
  window.linkfsStats = () => share.latestStats();
  window.linkfsSelfTest = wasmSelfTest;
  share.follow(`${window.location.origin}/#${key}`);
  share.open(key);
  void share.opened.then(() => performance.mark('linkfs:index-ready'), () => undefined);
  // A link that asks for a password (showFirst not given) keeps nothing of itself.
  if (options.showFirst !== undefined) {
    const kept = await KeptFolders.load(key);
    const early = kept.canShow(options.showFirst);
    share.keep(kept, early);
    if (!early) await share.opened;
    return share;
  }
  // The index (from IndexedDB on a return visit) is usable once opened: the page
  // lists it while the visit connects (it asks the page for the data link), and a
  // connection that fails says so in the status.
  await share.opened;
  return share;
}

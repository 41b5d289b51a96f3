// The ShareApi on top of the wasm module, which it reaches only through
// ./wasm/page.ts (the page's side) and the index worker (./wasm/worker.ts).
//
// The page holds the data link (signaling + the browser's RTCPeerConnection and
// data channel, in wasm); the index worker holds the receiver session, the index
// and IndexedDB. Frames move between the two as transferred ArrayBuffers.

import type {
  ConnectionInfo,
  ConnectionStatus,
  EntryRow,
  IndexProgress,
  ListPage,
  ReadOptions,
  ShareApi,
  ShareEvent,
  SearchHit,
  SearchUpdate,
  SortKey,
  Transfer,
  TransferDone,
  TransferSource,
  TransferTarget,
  ZipFacts,
} from './api';
import type { FromWorker, IndexQuery, ShareStats, ToWorker, WorkerProgress } from './wasm/protocol';
import {
  type DataLink,
  type LinkState,
  openDataLink,
  pageWasmMemoryBytes,
  type ReconnectTimer,
  reconnectSchedule,
  startIndexWorker,
  wasmSelfTest,
} from './wasm/page';

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

/** How long to wait for the sharer before saying so. */
const CONNECT_TIMEOUT_MS = 30_000;

/** How long reconnect attempts wait for a sharer that is not there (it may be restarting). */
const SHARER_RESTART_GRACE_MS = 60_000;

const KEY_SHAPE = /^[A-Za-z0-9_-]{8,64}\.[A-Za-z0-9_-]{22}$/;

interface PendingQuery {
  resolve: (value: unknown) => void;
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
  readonly rootId = 0;
  private readonly worker: Worker;
  private dataLink: DataLink | null = null;
  private currentStatus: ConnectionStatus = { state: 'connecting', message: 'Opening the share…' };
  private currentProgress: IndexProgress = { received: 0, announced: 0, complete: false, persisted: 0, fromCache: 0 };
  private stats: ShareStats | null = null;
  private readonly listeners = new Set<(event: ShareEvent) => void>();
  private readonly queries = new Map<number, PendingQuery>();
  private readonly reads = new Map<number, PendingRead>();
  private readonly transfers = new Map<string, PendingTransfer>();
  private search_: { id: number; onUpdate: (u: SearchUpdate) => void; resolve: () => void } | null = null;
  private nextId = 1;
  private connectTimer: ReturnType<typeof setTimeout> | null = null;
  /** The link being followed (origin + fragment). */
  private link = '';
  /** Core's reconnect schedule, once connecting started. */
  private schedule: ReconnectTimer | null = null;
  private reconnectTimer: ReturnType<typeof setTimeout> | null = null;
  /** Since when reconnect attempts found no sharer (it may be restarting). */
  private goneSince: number | null = null;
  /** The session is over for good (goodbye, given up, closed). */
  private over = false;

  constructor(worker: Worker) {
    this.worker = worker;
    worker.onmessage = (event: MessageEvent<FromWorker>) => this.onWorker(event.data);
    worker.onerror = (event: ErrorEvent) => {
      this.setStatus({ state: 'error', message: `The page's index worker failed: ${event.message}. Reload the page.` });
    };
  }

  private post(message: ToWorker, transfer: Transferable[] = []): void {
    this.worker.postMessage(message, transfer);
  }

  /** Opens the cached index in the worker; resolves once it can answer queries. */
  ready(key: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.readyWaiter = { resolve, reject };
      this.post({ type: 'open', key });
    });
  }

  private readyWaiter: { resolve: () => void; reject: (e: Error) => void } | null = null;

  async connect(link: string): Promise<void> {
    this.link = link;
    this.schedule = await reconnectSchedule();
    const dataLink = await this.attempt(false);
    this.connectTimer = setTimeout(() => {
      if (this.currentStatus.state === 'connecting') {
        dataLink.close();
        this.over = true;
        this.setStatus({
          state: 'error',
          message:
            'Could not reach the sharer within 30 seconds. They may have stopped sharing, or your networks may not allow a direct connection (the relay needs a TURN server then). Reload to try again.',
        });
      }
    }, CONNECT_TIMEOUT_MS);
  }

  /** Opens one data link: the first, or (`again`) one after a link was lost. */
  private async attempt(again: boolean): Promise<DataLink> {
    const dataLink = await openDataLink(this.link, {
      onStatus: (state: LinkState, message: string) => {
        if (!again) {
          this.onConnectionStatus(state, message);
          return;
        }
        // While reconnecting the page keeps saying so until a link works or it gives up.
        if (state === 'connected') {
          this.schedule?.succeeded();
          this.goneSince = null;
          this.setStatus({ state, message });
        } else if (state === 'invalid-link') {
          this.giveUp(state, message);
        } else if (state !== 'connecting') {
          this.dataLink?.close();
          if (state === 'sharer-gone') this.goneSince ??= performance.now();
          this.retryLater(message);
        }
      },
      onOpen: () => {
        this.clearConnectTimer();
        this.post({ type: 'channel-open' });
      },
      onFrame: (frame: ArrayBuffer) => this.post({ type: 'frame', frame }, [frame]),
      // The worker says whether the session ended (a goodbye) or waits for a new link.
      onClose: () => this.post({ type: 'channel-closed' }),
    });
    this.dataLink = dataLink;
    return dataLink;
  }

  /** The link was lost (or an attempt failed): try again on core's schedule. */
  private retryLater(reason: string | null): void {
    if (this.over) return;
    const gone = this.goneSince !== null && performance.now() - this.goneSince > SHARER_RESTART_GRACE_MS;
    const wait = gone ? undefined : this.schedule?.failed(performance.now());
    if (wait === undefined) {
      this.giveUp(
        'sharer-gone',
        `Could not reconnect to the sharer${reason ? ` (${reason})` : ''}. You can still browse what was received; reopen the link when they share again.`,
      );
      return;
    }
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      if (!this.over) void this.attempt(true);
    }, wait);
  }

  /** No more links: the worker's session ends, reads fail, the status is final. */
  private giveUp(state: ConnectionStatus['state'], message: string): void {
    this.over = true;
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
    this.dataLink?.close();
    this.post({ type: 'give-up' });
    this.setStatus({ state, message });
  }

  private clearConnectTimer(): void {
    if (this.connectTimer !== null) clearTimeout(this.connectTimer);
    this.connectTimer = null;
  }

  private onConnectionStatus(s: LinkState, message: string): void {
    if (s !== 'connecting') this.clearConnectTimer();
    // Once the sharer is gone, the closing of the channel does not change the words.
    if (this.currentStatus.state === 'sharer-gone' && s === 'sharer-gone') return;
    this.setStatus({ state: s, message });
  }

  /** Connecting failed before any data link existed (a bad link, no WebRTC here…). */
  failToConnect(error: unknown): void {
    this.over = true;
    const invalid = error instanceof InvalidLinkError;
    const text = error instanceof Error ? error.message : String(error);
    this.setStatus({ state: invalid ? 'invalid-link' : 'error', message: invalid ? text : `Could not connect to the sharer: ${text}` });
  }

  private setStatus(status: ConnectionStatus): void {
    this.currentStatus = status;
    this.emit({ type: 'status', status });
    if (status.state !== 'connecting' && status.state !== 'connected' && status.state !== 'reconnecting') {
      this.failPendingReads(status.message);
    }
  }

  private failPendingReads(message: string): void {
    for (const [id, r] of this.reads) {
      r.reject(new Error(message));
      this.reads.delete(id);
    }
    for (const [token, t] of this.transfers) {
      t.ready.reject(new Error(message));
      t.done.reject(new Error(message));
      this.transfers.delete(token);
      this.post({ type: 'serve-stop', token, reason: message });
    }
  }

  private emit(event: ShareEvent): void {
    for (const l of this.listeners) l(event);
  }

  private onProgress(progress: WorkerProgress, stats: ShareStats): void {
    this.stats = stats;
    const p: IndexProgress = {
      received: progress.received,
      announced: progress.announced,
      complete: progress.complete,
      persisted: progress.persisted,
      fromCache: progress.fromCache,
      ...(progress.loadingCache ? { loadingCache: true } : {}),
    };
    this.currentProgress = p;
    this.emit({ type: 'progress', progress: p });
  }

  private onWorker(m: FromWorker): void {
    switch (m.type) {
      case 'ready':
        this.openTimings = { workerWasmInitMs: m.stats.workerWasmInitMs ?? 0, workerOpenMs: m.stats.workerOpenMs ?? 0 };
        this.onProgress(m.progress, m.stats);
        this.readyWaiter?.resolve();
        this.readyWaiter = null;
        return;
      case 'open-failed':
        this.readyWaiter?.reject(new Error(m.message));
        this.readyWaiter = null;
        return;
      case 'send':
        for (const f of m.frames) {
          try {
            this.dataLink?.send(new Uint8Array(f));
          } catch {
            // The channel closed under us; the close handler reports it.
          }
        }
        return;
      case 'progress':
        this.onProgress(m.progress, m.stats);
        return;
      case 'reset':
        this.emit({ type: 'changed', dirs: [this.rootId], all: true });
        return;
      case 'changed':
        this.emit({ type: 'changed', dirs: m.dirs, all: m.all });
        return;
      case 'link-lost':
        if (this.over) return;
        this.setStatus({
          state: 'reconnecting',
          message: 'Lost the connection to the sharer; reconnecting… Downloads continue once it is back.',
        });
        this.retryLater(null);
        return;
      case 'ended':
        this.over = true;
        if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer);
        this.reconnectTimer = null;
        if (m.gone) {
          if (this.currentStatus.state !== 'sharer-gone') {
            this.setStatus({
              state: 'sharer-gone',
              message: `${sentence(m.message)} You can still browse what was received; reopen the link when they share again.`,
            });
          }
        } else {
          this.setStatus({ state: 'error', message: m.message });
        }
        this.dataLink?.close();
        return;
      case 'answer':
        this.queries.get(m.id)?.resolve(m.value);
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
      case 'read-failed':
        this.reads.get(m.id)?.reject(new Error(m.message));
        this.reads.delete(m.id);
        return;
      case 'search-results': {
        const run = this.search_;
        if (!run || run.id !== m.id) return;
        const b = m.batch;
        run.onUpdate({ hits: b.rows as SearchHit[], scanned: b.scanned, total: b.total, done: b.done, truncated: b.truncated });
        if (b.done) {
          this.search_ = null;
          run.resolve();
        }
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

  private query<T>(query: IndexQuery): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.queries.set(id, { resolve: (v) => resolve(v as T), reject });
      this.post({ type: 'query', id, query });
    });
  }

  private openTimings: { workerWasmInitMs: number; workerOpenMs: number } | null = null;

  latestStats(): ShareStats | null {
    if (this.stats === null) return null;
    return { ...this.stats, ...this.openTimings, pageWasmMemoryBytes: pageWasmMemoryBytes() };
  }

  status(): ConnectionStatus {
    return this.currentStatus;
  }

  progress(): IndexProgress {
    return this.currentProgress;
  }

  subscribe(listener: (event: ShareEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  list(dir: number, sort: SortKey, descending: boolean, start: number, count: number): Promise<ListPage> {
    return this.query<ListPage>({ method: 'list', dir, sort, descending, start, count });
  }

  entry(id: number): Promise<EntryRow | null> {
    return this.query<EntryRow | null>({ method: 'entry', id });
  }

  path(id: number): Promise<EntryRow[]> {
    return this.query<EntryRow[]>({ method: 'path', id });
  }

  lookup(path: string): Promise<EntryRow | null> {
    return this.query<EntryRow | null>({ method: 'lookup', path });
  }

  read(id: number, options: ReadOptions = {}): Promise<Blob> {
    const { signal, onProgress } = options;
    if (signal?.aborted) return Promise.reject(abortError());
    if (this.currentStatus.state !== 'connected' && this.currentStatus.state !== 'reconnecting') {
      return Promise.reject(new Error(`Cannot read files now: ${this.currentStatus.message}`));
    }
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
    const report = (await this.dataLink?.statsReport()) as RTCStatsReport | undefined;
    if (!report) return null;
    return connectionOf(report);
  }

  indexIn(dir: number, id: number, sort: SortKey, descending: boolean): Promise<number | null> {
    return this.query<number | null>({ method: 'indexIn', dir, id, sort, descending });
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
    if (this.currentStatus.state !== 'connected' && this.currentStatus.state !== 'reconnecting') {
      const error = new Error(`Cannot read files now: ${this.currentStatus.message}`);
      readyHooks.reject(error);
      doneHooks.reject(error);
      return transfer;
    }
    this.transfers.set(token, { transfer, ready: readyHooks, done: doneHooks });
    const workerSource = source.kind === 'file' ? { kind: 'file' as const, entry: source.id } : { kind: 'zip' as const, roots: source.ids, name: source.name };
    this.post({ type: 'serve', token, source: workerSource, target }, target.kind === 'port' ? [target.port] : []);
    return transfer;
  }

  close(): void {
    this.over = true;
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer);
    this.clearConnectTimer();
    this.dataLink?.close();
    this.worker.terminate();
  }
}

interface StatsEntry {
  id: string;
  type: string;
  [key: string]: unknown;
}

/** The selected candidate pair of a stats report, as a ConnectionInfo. */
function connectionOf(report: RTCStatsReport): ConnectionInfo | null {
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
  };
}

/** "the sharer stopped sharing" -> "The sharer stopped sharing." */
function sentence(text: string): string {
  const t = text.trim() || 'the sharer went away';
  return `${t.charAt(0).toUpperCase()}${t.slice(1)}${/[.!?]$/.test(t) ? '' : '.'}`;
}

function abortError(message = 'The read was cancelled'): Error {
  return new DOMException(message, 'AbortError');
}

/** Opens the share whose key (`<room>.<secret>`) is in the page's fragment. */
export async function openShare(key: string): Promise<ShareApi> {
  if (!KEY_SHAPE.test(key)) {
    throw new InvalidLinkError(
      'This link is not valid: the part after # should be <room>.<secret>. Check that you copied the whole link.',
    );
  }
  performance.mark('linkfs:open');
  const share = new WasmShare(startIndexWorker());
  window.linkfsStats = () => share.latestStats();
  window.linkfsSelfTest = wasmSelfTest;
  await share.ready(key);
  performance.mark('linkfs:index-ready');
  // The index (from IndexedDB on a return visit) is usable now: the page lists it
  // while the connection is made, and a connection that fails says so in the status.
  share.connect(`${window.location.origin}/#${key}`).catch((error: unknown) => share.failToConnect(error));
  return share;
}

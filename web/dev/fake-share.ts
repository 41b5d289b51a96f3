// DEVELOPMENT FAKE of the ShareApi: an in-memory share over a generated tree
// (fake-tree.ts), with no network, no wasm and no sharer. It exists so the UI can be
// built, looked at and measured before the wasm-backed implementation is ready. It is
// not a model of the protocol; it only plays the events a visitor would see.
//
// It plays these situations, chosen by the room part of the link:
//   #dev.x          index fills over 1.5 s, then a file appears in /live every 4 s
//   #dev-slow.x     index fills over 20 s
//   #dev-instant.x  the whole index is there at once (for measuring the UI alone)
//   #dev-cached.x   60% of the tree "comes from the local cache", the rest follows
//   #dev-gone.x     the sharer goes away 2.5 s in, before the index is complete
//   #dev-invalid.x  the link's secret is wrong
//   #dev-reject.x   openShare itself fails
// A fragment without a '.' is rejected as not a link.

import type {
  ConnectionInfo,
  SearchHit,
  SearchUpdate,
  Transfer,
  TransferSource,
  TransferTarget,
  ConnectionStatus,
  EntryRow,
  IndexProgress,
  ListPage,
  ReadOptions,
  ShareApi,
  ShareEvent,
  SortKey,
  Thumbnail,
  ThumbnailAsk,
  LinkRights,
  UploadState,
} from '../src/api';
import { ROOT_ID, type EntryId } from '../src/api';
import { FakeTree, type FakeEntry } from './fake-tree';
import { linesContent } from './fake-files';

interface Scenario {
  fillMs: number;
  cachedShare: number;
  goneAfterMs: number | null;
  invalid: boolean;
}

const READ_CHUNK = 61_392;
/** Simulated transfer rate of reads, bytes per second. */
const READ_RATE = 40 * 1024 * 1024;
/** Simulated worker round trip of a list call. */
const LIST_LATENCY_MS = 1;
const LIVE_EVERY_MS = 4000;
const LIVE_LIMIT = 30;

function scenarioFor(room: string): Scenario {
  const base: Scenario = { fillMs: 1500, cachedShare: 0, goneAfterMs: null, invalid: false };
  switch (room) {
    case 'dev-slow':
      return { ...base, fillMs: 20_000 };
    case 'dev-instant':
      return { ...base, fillMs: 0 };
    case 'dev-cached':
      return { ...base, fillMs: 6000, cachedShare: 0.6 };
    case 'dev-gone':
      return { ...base, fillMs: 8000, goneAfterMs: 2500 };
    case 'dev-invalid':
      return { ...base, invalid: true };
    default:
      return base;
  }
}

class InvalidLinkError extends Error {
  override name = 'InvalidLinkError';
}

export async function openShare(fragment: string): Promise<ShareApi> {
  const key = fragment.replace(/^#/, '').split('/')[0] ?? '';
  const dot = key.indexOf('.');
  if (dot <= 0 || dot === key.length - 1) {
    throw new InvalidLinkError('This link is not valid: it should end in #<room>.<secret>. Check that you copied the whole link.');
  }
  const room = key.slice(0, dot);
  if (room === 'dev-reject') {
    throw new Error('Could not start the share reader: this browser blocked WebAssembly. (development fake: simulated failure)');
  }
  await new Promise((resolve) => setTimeout(resolve, 30));
  return new FakeShare(scenarioFor(room));
}

class FakeShare implements ShareApi {
  readonly rootId = ROOT_ID;
  readonly opened = Promise.resolve();
  private readonly tree = buildTree();
  private readonly listeners = new Set<(event: ShareEvent) => void>();
  private readonly timers: ReturnType<typeof setTimeout>[] = [];
  private readonly started = performance.now();
  private current: ConnectionStatus = { state: 'connecting', message: 'Connecting to the sharer…' };
  /** Entries with id < received are in the "local index". */
  private received: number;
  private announced: number;
  private readonly fromCache: number;
  private walkDone = false;
  private liveAdded = 0;
  private readonly sorted = new Map<string, number[]>();
  private readonly byName = new Map<number, Map<string, number>>();

  constructor(private readonly scenario: Scenario) {
    const total = this.tree.entries.length;
    this.fromCache = Math.floor(total * scenario.cachedShare);
    this.received = this.fromCache;
    this.announced = this.fromCache;
    if (scenario.invalid) {
      this.later(300, () =>
        this.setStatus({
          state: 'invalid-link',
          message: 'This link is not valid: the sharer could not verify its secret. Ask the sharer to send the link again, and copy all of it.',
        }),
      );
      return;
    }
    this.later(400, () => this.setStatus({ state: 'connected', message: 'Connected to the sharer.' }));
    if (scenario.goneAfterMs !== null) {
      this.later(scenario.goneAfterMs, () =>
        this.setStatus({
          state: 'sharer-gone',
          message: 'The sharer went away. You can still browse what was received; reopen the link when they share again.',
        }),
      );
    }
    if (scenario.fillMs === 0) {
      this.received = total;
      this.announced = total;
      this.walkDone = true;
      this.later(LIVE_EVERY_MS, () => this.addLiveFile());
    } else {
      this.later(400, () => this.fillStep());
    }
  }

  status(): ConnectionStatus {
    return this.current;
  }

  progress(): IndexProgress {
    return {
      received: this.received,
      announced: this.announced,
      complete: this.walkDone && this.received >= this.announced,
      persisted: this.received,
      fromCache: this.fromCache,
      loadingCache: false,
    };
  }

  subscribe(listener: (event: ShareEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async list(dir: number, sort: SortKey, descending: boolean, start: number, count: number): Promise<ListPage> {
    await new Promise((resolve) => setTimeout(resolve, LIST_LATENCY_MS));
    const children = this.visibleSorted(dir, sort);
    const total = children.length;
    const from = Math.max(0, Math.min(start, total));
    const to = Math.max(from, Math.min(total, start + Math.max(0, count)));
    const rows: EntryRow[] = [];
    const dirs = this.leadingDirs(children);
    for (let i = from; i < to; i += 1) {
      // Directories stay first in both directions; each group is reversed on its own.
      const index = !descending ? i : i < dirs ? dirs - 1 - i : dirs + (total - 1 - i);
      const id = children[index];
      if (id !== undefined) rows.push(this.rowOf(id));
    }
    return { dir: dir as EntryId, total, start: from, rows };
  }

  async entry(id: number): Promise<EntryRow | null> {
    return this.visible(id) ? this.rowOf(id) : null;
  }

  async path(id: number): Promise<EntryRow[]> {
    const out: EntryRow[] = [];
    let at: number | undefined = id;
    while (at !== undefined && this.visible(at)) {
      out.push(this.rowOf(at));
      if (at === this.rootId) return out.reverse();
      at = this.tree.get(at)?.row.parent;
    }
    return [];
  }

  async lookup(path: string): Promise<EntryRow | null> {
    let at: number = this.rootId;
    for (const name of path.split('/').filter((s) => s.length > 0)) {
      const next = this.childNamed(at, name);
      if (next === undefined || !this.visible(next)) return null;
      at = next;
    }
    return this.visible(at) ? this.rowOf(at) : null;
  }

  /** The fake has no data link. */
  async connection(): Promise<ConnectionInfo | null> {
    return null;
  }

  /**
   * The fake's search: a plain scan of its tree, all at once, with the real syntax
   * (substring, or a `*`/`?` glob over the whole name) and an approximation of the
   * real folding (NFC + lower case; the real one case-folds with Unicode's table).
   */
  async search(query: string, onUpdate: (update: SearchUpdate) => void): Promise<void> {
    const fold = (text: string): string => text.normalize('NFC').toLowerCase().replace(/ß/g, 'ss').replace(/ς/g, 'σ');
    const q = fold(query.trim());
    const glob = /[*?]/.test(q) ? new RegExp(`^${q.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`, 'su') : null;
    const matches = (name: string): boolean => (glob ? glob.test(fold(name)) : fold(name).includes(q));
    const hits: SearchHit[] = [];
    let total = 0;
    let truncated = false;
    for (let id = 1; ; id++) {
      const e = this.tree.get(id);
      if (!e) break;
      total += 1;
      if (q === '' || !this.visible(id) || !matches(e.row.name)) continue;
      if (hits.length === 10_000) {
        truncated = true;
        break;
      }
      const path = (await this.path(id)).slice(1).map((r) => r.name).join('/');
      hits.push({ ...this.rowOf(id), path });
    }
    onUpdate({ hits, scanned: total, total, done: true, truncated });
  }

  async indexIn(dir: number, id: number, sort: SortKey, descending: boolean): Promise<number | null> {
    const page = await this.list(dir, sort, descending, 0, 1_000_000);
    const at = page.rows.findIndex((r) => r.id === id);
    return at < 0 ? null : at;
  }

  /** The fake streams nothing: transfers (service worker, File System Access) need the real share. */
  transfer(_source: TransferSource, _target: TransferTarget): Transfer {
    const error = new Error('Streaming transfers are not simulated by the development fake; downloads use read().');
    const failed = Promise.reject(error);
    failed.catch(() => undefined);
    return { ready: failed, done: failed, onProgress: null, stop: () => undefined };
  }

  async read(id: number, options: ReadOptions = {}): Promise<Blob> {
    const entry = this.tree.get(id);
    if (!entry || !this.visible(id)) throw new Error('This file is no longer in the share.');
    if (entry.row.kind === 'dir') throw new Error(`“${entry.row.name}” is a folder; only files can be read.`);
    if (entry.row.kind === 'symlink') throw new Error(`“${entry.row.name}” is a link to ${entry.row.target ?? 'somewhere else'}; links are not followed.`);
    const content = entry.content;
    if (!content) throw new Error('This file has no content.');
    const { signal, onProgress } = options;
    const parts: Uint8Array<ArrayBuffer>[] = [];
    let done = 0;
    const total = content.size;
    onProgress?.({ done, total });
    while (done < total) {
      this.checkReadable(entry, done, total, signal);
      // Deliver about one frame's worth of chunks per tick at READ_RATE.
      const burst = Math.max(READ_CHUNK, Math.floor(READ_RATE / 60 / READ_CHUNK) * READ_CHUNK);
      const end = Math.min(total, done + burst);
      for (let at = done; at < end; at += READ_CHUNK) {
        parts.push(new Uint8Array(content.bytes(at, Math.min(READ_CHUNK, end - at))));
      }
      done = end;
      onProgress?.({ done, total });
      if (done < total) await sleep(1000 / 60, signal);
    }
    return new Blob(parts);
  }

  givePassword(_password: string): void {
    // The fake share asks for no password.
  }

  rights(): LinkRights | null {
    // The fake share's links only read.
    return { list: true, upload: false, maxFile: 0, bytesLeft: 0, filesLeft: 0 };
  }

  upload(file: File, _path: string, onState: (state: UploadState) => void): () => void {
    onState({ phase: 'failed', done: 0, total: file.size, message: 'the development fake takes no files' });
    return () => undefined;
  }

  thumbnail(_ask: ThumbnailAsk): Promise<Thumbnail> {
    // The fake share's files are not images: the grid shows their icons.
    return Promise.resolve({ blob: null, bytesRead: 0, from: 'none' });
  }

  cachedThumbnail(): Promise<string | null> {
    return Promise.resolve(null);
  }

  keepThumbnail(): void {
    // Nothing is kept by the fake.
  }

  keptPictures(): ReadonlyMap<string, string> {
    return new Map();
  }

  keepPictures(): void {
    // Nothing is kept by the fake.
  }

  close(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.listeners.clear();
  }

  // --- simulation ---

  private checkReadable(entry: FakeEntry, done: number, total: number, signal: AbortSignal | undefined): void {
    if (signal?.aborted) throw new DOMException('The download was cancelled.', 'AbortError');
    if (this.current.state === 'sharer-gone') {
      throw new Error('The sharer went away, so this file cannot be read now. Reopen the link when they share again.');
    }
    if (entry.changesWhileRead && done > total / 2) {
      throw new Error(`“${entry.row.name}” changed on the sharer's computer while it was being read, so the copy was dropped. Try again to get the new version.`);
    }
  }

  private fillStep(): void {
    if (this.current.state === 'sharer-gone') return;
    const total = this.tree.entries.length;
    const elapsed = performance.now() - this.started - 400;
    const share = Math.min(1, elapsed / Math.max(1, this.scenario.fillMs));
    this.received = Math.max(this.received, Math.floor(this.fromCache + (total - this.fromCache) * share));
    this.walkDone = share >= 0.7;
    this.announced = this.walkDone ? total : Math.max(this.received, Math.min(total, Math.floor(this.received * 1.25 + 2000)));
    this.emit({ type: 'progress', progress: this.progress() });
    if (this.received < total) {
      this.later(50, () => this.fillStep());
    } else {
      this.later(LIVE_EVERY_MS, () => this.addLiveFile());
    }
  }

  private addLiveFile(): void {
    if (this.current.state === 'sharer-gone' || this.liveAdded >= LIVE_LIMIT) return;
    this.liveAdded += 1;
    const name = `tick-${String(this.liveAdded).padStart(3, '0')}.txt`;
    this.tree.file(this.tree.liveDir, name, linesContent(64 * this.liveAdded, name), Math.floor(Date.now() / 1000));
    for (const key of [...this.sorted.keys()]) if (key.startsWith(`${this.tree.liveDir}:`)) this.sorted.delete(key);
    this.byName.delete(this.tree.liveDir);
    this.received = this.tree.entries.length;
    this.announced = this.received;
    this.emit({ type: 'changed', dirs: [this.tree.liveDir as EntryId] });
    this.emit({ type: 'progress', progress: this.progress() });
    this.later(LIVE_EVERY_MS, () => this.addLiveFile());
  }

  private setStatus(status: ConnectionStatus): void {
    this.current = status;
    this.emit({ type: 'status', status });
  }

  private emit(event: ShareEvent): void {
    for (const listener of this.listeners) listener(event);
  }

  private later(ms: number, run: () => void): void {
    this.timers.push(setTimeout(run, ms));
  }

  // --- index queries ---

  private visible(id: number): boolean {
    return id >= 0 && id < this.received && id < this.tree.entries.length;
  }

  private rowOf(id: number): EntryRow {
    const entry = this.tree.get(id);
    if (!entry) throw new Error(`no entry ${id}`);
    if (entry.children) {
      return { ...entry.row, children: countBelow(entry.children, this.received) };
    }
    return { ...entry.row };
  }

  private childNamed(dir: number, name: string): number | undefined {
    let names = this.byName.get(dir);
    if (!names) {
      names = new Map();
      for (const id of this.tree.get(dir)?.children ?? []) {
        const row = this.tree.get(id)?.row;
        if (row) names.set(row.name, id);
      }
      this.byName.set(dir, names);
    }
    return names.get(name);
  }

  /** Children of `dir` in the local index, directories first, ascending by `sort`. */
  private visibleSorted(dir: number, sort: SortKey): number[] {
    const children = this.tree.get(dir)?.children;
    if (!children || !this.visible(dir)) return [];
    const key = `${dir}:${sort}`;
    let all = this.sorted.get(key);
    if (!all) {
      performance.mark('fake-sort-start');
      all = this.sortChildren(children, sort);
      performance.measure(`fake share: sort ${children.length} entries by ${sort}`, 'fake-sort-start');
      this.sorted.set(key, all);
    }
    const visibleCount = countBelow(children, this.received);
    return visibleCount === children.length ? all : all.filter((id) => id < this.received);
  }

  private leadingDirs(ids: number[]): number {
    let n = 0;
    while (n < ids.length && this.tree.get(ids[n] ?? -1)?.row.kind === 'dir') n += 1;
    return n;
  }

  /** Sorts ids by precomputed keys (directories first, then `sort`, then name). */
  private sortChildren(children: number[], sort: SortKey): number[] {
    const rows = children.map((id) => {
      const row = this.tree.get(id)?.row;
      const kind = row?.kind ?? 'file';
      return {
        id,
        group: sort === 'kind' ? (kind === 'dir' ? 0 : kind === 'symlink' ? 1 : 2) : kind === 'dir' ? 0 : 1,
        value: sort === 'size' ? (row?.size ?? 0) : sort === 'mtime' ? (row?.mtime ?? 0) : 0,
        name: row?.name.toLowerCase() ?? '',
      };
    });
    rows.sort((a, b) => a.group - b.group || a.value - b.value || (a.name < b.name ? -1 : a.name > b.name ? 1 : a.id - b.id));
    return rows.map((row) => row.id);
  }
}

function buildTree(): FakeTree {
  performance.mark('fake-tree-start');
  const tree = new FakeTree();
  performance.measure(`fake share: generate ${tree.entries.length} entries`, 'fake-tree-start');
  return tree;
}

/** How many ids in an ascending list are below `limit`. */
function countBelow(ids: number[], limit: number): number {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((ids[mid] ?? Infinity) < limit) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(new DOMException('The download was cancelled.', 'AbortError'));
      },
      { once: true },
    );
  });
}

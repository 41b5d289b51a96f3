// The index worker: the browser's drive loop around the wasm ReceiverSession
// (core's persistent receiver: index, BLAKE3 checks, the storage policy, bound to
// IndexedDB), off the main thread. The page forwards data-link frames here and
// sends whatever this worker posts back as 'send'. One of the two modules that
// touch the wasm (the other is ./page.ts).

/// <reference lib="webworker" />

import init, { ReceiverSession, type SessionEvent } from '../../../core-wasm/pkg/linkfs_core_wasm.js';
import wasmUrl from '../../../core-wasm/pkg/linkfs_core_wasm_bg.wasm?url';
import type { EntryRow } from '../api';
import { entryStream, MEDIA, BULK, type RangeReader, type ReadSink } from './entry-stream';
import type { FromWorker, IndexQuery, QueryAnswer, ServeSource, ShareStats, ToWorker, WorkerProgress } from './protocol';
import { type ByteSource, messageOf, SourceServer } from './serve';
import { saveToBlob, saveToFile } from './save-sinks';
import { type PlanMember, planZip, zipSource } from './zip-source';
import { saveToDirectory } from './directory-sink';

declare const self: DedicatedWorkerGlobalScope;

/** Progress messages to the page at most this often while the index fills. */
const PROGRESS_EVERY_MS = 50;
/** Downloads go to the service worker in messages of about this many bytes. */
const DOWNLOAD_MESSAGE_BYTES = 512 * 1024;
/** Read progress at most this often per read. */
const READ_PROGRESS_EVERY_MS = 100;


let session: ReceiverSession | null = null;
let timer: ReturnType<typeof setTimeout> | null = null;
let lastProgressAt = 0;
let progressTimer: ReturnType<typeof setTimeout> | null = null;
/** Where each read's events go, by the session's read handle. */
const sinks = new Map<number, ReadSink>();
/** Whole-file reads the page asked for (previews), by the page's id: their handle. */
const handleById = new Map<number, number>();
/** Resources being served or saved, by the page's token. */
const serving = new Map<string, { stop(reason: string): void }>();
const early: ToWorker[] = [];

function post(message: FromWorker, transfer: Transferable[] = []): void {
  self.postMessage(message, transfer);
}

function progressNow(s: ReceiverSession): { progress: WorkerProgress; stats: ShareStats } {
  return { progress: s.progress(), stats: s.stats() };
}

function postProgress(force: boolean): void {
  const s = session;
  if (!s) return;
  const now = performance.now();
  if (!force && now - lastProgressAt < PROGRESS_EVERY_MS) {
    progressTimer ??= setTimeout(() => {
      progressTimer = null;
      postProgress(true);
    }, PROGRESS_EVERY_MS);
    return;
  }
  lastProgressAt = now;
  post({ type: 'progress', ...progressNow(s) });
}

/** Sends what the session wants sent, handles its events, re-arms its timer. */
function flush(): void {
  const s = session;
  if (!s) return;
  const out = s.takeOutgoing();
  if (out.length > 0) {
    const frames = out.map((f) => f.buffer as ArrayBuffer);
    post({ type: 'send', frames }, frames);
  }
  for (const ev of s.takeEvents()) {
    handleEvent(ev);
  }
  if (timer !== null) clearTimeout(timer);
  const wait = s.nextTimeout();
  timer =
    wait === undefined
      ? null
      : setTimeout(() => {
          timer = null;
          s.tick();
          flush();
        }, Math.max(0, wait));
}

function handleEvent(ev: SessionEvent): void {
  switch (ev.type) {
    case 'data':
      sinks.get(ev.handle)?.data(ev.bytes);
      return;
    case 'done': {
      const sink = sinks.get(ev.handle);
      sinks.delete(ev.handle);
      sink?.done();
      return;
    }
    case 'failed': {
      const sink = sinks.get(ev.handle);
      sinks.delete(ev.handle);
      sink?.failed(ev.message);
      return;
    }
    case 'ended':
      post({ type: 'ended', gone: ev.gone, message: ev.message });
      postProgress(true);
      return;
    case 'reset':
      post({ type: 'reset' });
      return;
    case 'changed':
      post({ type: 'changed', dirs: ev.dirs, all: ev.all });
      return;
    case 'link-lost':
      post({ type: 'link-lost' });
      return;
  }
}

/** Range reads on the session, their events routed to `sink`; `counted` hears every byte read. */
function rangeReader(s: ReceiverSession, counted: (bytes: number) => void = () => undefined): RangeReader {
  return {
    start(entry, offset, len, sink) {
      const h = s.startReadRange(entry, offset, len);
      sinks.set(h, {
        data: (bytes) => {
          counted(bytes.byteLength);
          sink.data(bytes);
        },
        done: () => sink.done(),
        failed: (message) => sink.failed(message),
      });
      // The request goes out (and a zero-length read's "done" comes) on the next flush.
      queueMicrotask(flush);
      return h;
    },
    cancel(handle) {
      if (sinks.delete(handle)) {
        s.cancelRead(handle);
        queueMicrotask(flush);
      }
    },
  };
}

/** A whole file read into a Blob (previews), with progress to the page. */
function readWhole(id: number, entry: number, s: ReceiverSession): void {
  const total = s.entry(entry)?.size ?? 0;
  const parts: Uint8Array[] = [];
  let done = 0;
  let lastProgress = 0;
  const h = s.startRead(entry);
  handleById.set(id, h);
  sinks.set(h, {
    data(bytes) {
      parts.push(bytes);
      done += bytes.byteLength;
      const now = performance.now();
      if (now - lastProgress >= READ_PROGRESS_EVERY_MS) {
        lastProgress = now;
        post({ type: 'read-progress', id, done, total });
      }
    },
    done() {
      handleById.delete(id);
      post({ type: 'read-progress', id, done, total });
      post({ type: 'read-done', id, blob: new Blob(parts as BlobPart[]) });
    },
    failed(message) {
      handleById.delete(id);
      post({ type: 'read-failed', id, message });
    },
  });
  flush();
}

/** All rows of one folder's window, for planning a ZIP. */
function listChildren(s: ReceiverSession) {
  return (dir: number, start: number, count: number): { total: number; rows: EntryRow[] } => {
    const page = s.list(dir, 'name', false, start, count);
    return { total: page.total, rows: page.rows as EntryRow[] };
  };
}

/** The byte source the page asked for, and what the page should know of it. */
function sourceOf(
  source: ServeSource,
  s: ReceiverSession,
  media: boolean,
  counted: (bytes: number) => void,
): { bytes: ByteSource; name: string; zip?: ReturnType<typeof planZip>['plan']; members?: PlanMember[]; reader: RangeReader } {
  const reader = rangeReader(s, counted);
  if (source.kind === 'file') {
    const row = s.entry(source.entry);
    if (!row) throw new Error('This file is no longer in the share.');
    if (row.kind !== 'file') throw new Error(`"${row.name}" is not a file.`);
    const size = row.size;
    const ahead = media ? MEDIA : BULK;
    return { name: row.name, reader, bytes: { size, ownsChunks: true, open: (start, end) => entryStream(reader, source.entry, start, end, ahead) } };
  }
  const roots: EntryRow[] = [];
  for (const id of source.roots) {
    const row = s.entry(id);
    if (!row) throw new Error('Part of the selection is no longer in the share.');
    roots.push(row as EntryRow);
  }
  const { plan, members } = planZip(roots, listChildren(s), source.name.replace(/\.zip$/i, ''));
  return { name: source.name, reader, bytes: zipSource(reader, plan, members), zip: plan, members };
}

function serve(message: Extract<ToWorker, { type: 'serve' }>, s: ReceiverSession): void {
  const { token } = message;
  let made: ReturnType<typeof sourceOf>;
  // Bytes read from the sharer for this transfer (with what the read-ahead took).
  let read = 0;
  const media = message.target.kind === 'port' && !message.target.once;
  try {
    made = sourceOf(message.source, s, media, (n) => {
      read += n;
    });
  } catch (error) {
    post({ type: 'serve-finished', token, ok: false, message: messageOf(error) });
    return;
  }
  const { bytes } = made;
  const target = message.target;
  if (target.kind === 'directory' && made.members === undefined) {
    post({ type: 'serve-finished', token, ok: false, message: 'Only folders and selections are saved into a folder; save a file as itself.' });
    return;
  }
  // A directory save's size is its files' bytes (no ZIP around them).
  const size = target.kind === 'directory' ? (made.zip?.contentBytes ?? 0) : bytes.size;
  post({ type: 'serve-ready', token, size, name: made.name, ...(made.zip ? { zip: made.zip } : {}) });
  let lastProgress = 0;
  let lastSent = 0;
  let trailing: ReturnType<typeof setTimeout> | null = null;
  const progress = (sent: number, force = false): void => {
    lastSent = sent;
    const now = performance.now();
    if (!force && now - lastProgress < READ_PROGRESS_EVERY_MS) {
      // The last figures always arrive, a moment late.
      trailing ??= setTimeout(() => {
        trailing = null;
        progress(lastSent, true);
      }, READ_PROGRESS_EVERY_MS);
      return;
    }
    lastProgress = now;
    post({ type: 'serve-progress', token, sent, read });
  };
  const finished = (ok: boolean, text: string, sent: number, extra: { folder?: string; notes?: string[]; notesTotal?: number } = {}): void => {
    if (!serving.delete(token)) return;
    progress(sent, true);
    post({ type: 'serve-finished', token, ok, message: text, ...extra });
  };
  if (target.kind === 'port') {
    let sentNow = 0;
    const server = new SourceServer(target.port, bytes, {
      progress: (p) => {
        sentNow = p.sent;
        progress(p.sent);
      },
      finished: (ok, text) => {
        // Media answers many streams; only downloads end with their stream.
        if (target.once) {
          server.close(text || 'done');
          finished(ok, text, sentNow);
        }
      },
    }, target.once ? DOWNLOAD_MESSAGE_BYTES : 0);
    serving.set(token, {
      stop: (reason) => {
        server.close(reason);
        serving.delete(token);
      },
    });
    return;
  }
  const controller = new AbortController();
  serving.set(token, { stop: (reason) => controller.abort(new Error(reason)) });
  const onSent = (sent: number): void => progress(sent);
  if (target.kind === 'directory') {
    saveToDirectory({
      reader: made.reader,
      plan: made.zip!,
      members: made.members!,
      target: target.handle,
      folder: target.folder,
      resume: target.resume,
      signal: controller.signal,
      onSent,
    }).then(
      (r) => finished(true, '', r.written, { folder: r.folder, notes: r.notes, notesTotal: r.notesTotal }),
      (error: unknown) => finished(false, messageOf(error), (error as { written?: number }).written ?? 0),
    );
    return;
  }
  const run =
    target.kind === 'file'
      ? saveToFile(bytes, target.handle, target.resumeAt ?? 0, controller.signal, onSent)
      : saveToBlob(bytes, target.cap, controller.signal, onSent);
  run.then(
    (result) => {
      if (result.blob) post({ type: 'serve-blob', token, blob: result.blob });
      finished(true, '', result.written);
    },
    (error: unknown) => finished(false, messageOf(error), (error as { written?: number }).written ?? 0),
  );
}

function answer(id: number, query: IndexQuery, s: ReceiverSession): void {
  let value: QueryAnswer;
  switch (query.method) {
    case 'list':
      value = s.list(query.dir, query.sort, query.descending, query.start, query.count);
      firstListedAt ??= performance.now();
      break;
    case 'entry':
      value = s.entry(query.id) ?? null;
      break;
    case 'path':
      value = s.path(query.id);
      break;
    case 'lookup':
      value = s.lookup(query.path) ?? null;
      break;
    case 'indexIn':
      value = s.indexIn(query.dir, query.id, query.sort, query.descending) ?? null;
      break;
  }
  post({ type: 'answer', id, value });
}

function handle(message: ToWorker, s: ReceiverSession): void {
  switch (message.type) {
    case 'open':
      return;
    case 'channel-open':
      s.channelOpened();
      flush();
      return;
    case 'channel-closed':
      s.channelClosed();
      flush();
      return;
    case 'give-up':
      s.giveUp();
      flush();
      return;
    case 'frame':
      s.handleFrame(new Uint8Array(message.frame));
      flush();
      postProgress(false);
      return;
    case 'query':
      try {
        answer(message.id, message.query, s);
      } catch (error) {
        post({ type: 'query-failed', id: message.id, message: String(error) });
      }
      return;
    case 'read':
      try {
        readWhole(message.id, message.entry, s);
      } catch (error) {
        post({ type: 'read-failed', id: message.id, message: messageOf(error) });
      }
      return;
    case 'cancel-read': {
      const h = handleById.get(message.id);
      if (h !== undefined) {
        handleById.delete(message.id);
        sinks.delete(h);
        s.cancelRead(h);
        flush();
      }
      return;
    }
    case 'serve':
      serve(message, s);
      return;
    case 'serve-stop':
      serving.get(message.token)?.stop(message.reason);
      return;
    case 'search':
      startSearch(message.id, message.query, s);
      return;
    case 'search-stop':
      if (searching?.id === message.id) searching = null;
      return;
  }
}

/** Entry slots one search step scans (a few ms), between which other messages run. */
const SEARCH_STEP_SLOTS = 40_000;
/** Hits per message to the page, at most. */
const SEARCH_HITS_PER_MESSAGE = 250;
let searching: { id: number; handle: number } | null = null;

/** Runs a search step by step, posting what each step found, until done or replaced. */
function startSearch(id: number, query: string, s: ReceiverSession): void {
  const run = { id, handle: s.searchStart(query) };
  searching = run;
  const step = (): void => {
    if (searching !== run) return;
    let batch;
    try {
      batch = s.searchStep(run.handle, SEARCH_STEP_SLOTS);
    } catch (error) {
      searching = null;
      post({ type: 'search-results', id, batch: { rows: [], scanned: 0, total: 0, done: true, truncated: false } });
      console.warn('linkfs: search failed', error);
      return;
    }
    // At most SEARCH_HITS_PER_MESSAGE hits per message: the page decodes each
    // message on its main thread, which must never be busy for long.
    const rows = batch.rows;
    for (let at = 0; at + SEARCH_HITS_PER_MESSAGE < rows.length; at += SEARCH_HITS_PER_MESSAGE) {
      post({ type: 'search-results', id, batch: { ...batch, rows: rows.slice(at, at + SEARCH_HITS_PER_MESSAGE), done: false, truncated: false } });
    }
    const last = rows.length > SEARCH_HITS_PER_MESSAGE ? rows.slice(rows.length - (rows.length % SEARCH_HITS_PER_MESSAGE || SEARCH_HITS_PER_MESSAGE)) : rows;
    post({ type: 'search-results', id, batch: { ...batch, rows: last } });
    if (batch.done) searching = null;
    else setTimeout(step, 0);
  };
  step();
}

async function open(key: string): Promise<void> {
  const t0 = performance.now();
  try {
    await init({ module_or_path: wasmUrl });
    wasmInitMs = performance.now() - t0;
    session = await ReceiverSession.open(key, () => {
      flush();
      postProgress(false);
    });
  } catch (error) {
    post({ type: 'open-failed', message: error instanceof Error ? error.message : String(error) });
    return;
  }
  const ready = progressNow(session);
  post({ type: 'ready', ...ready, stats: { ...ready.stats, workerWasmInitMs: wasmInitMs, workerOpenMs: performance.now() - t0 } });
  const s = session;
  // The rest of the cached index, in steps: listings and lookups are answered in
  // between (from the part loaded so far); what would touch the session proper
  // (frames from the sharer, reads, saves) and searches wait until it is all loaded.
  loadingCache = true;
  for (const m of early.splice(0)) dispatch(m, s);
  // The first screen before the rest: the page lists from what is loaded, and only
  // then does loading the rest take a core (on 2 cores it delayed that first paint).
  const openedAt = performance.now();
  while (performance.now() - openedAt < FIRST_SCREEN_WAIT_MS && (firstListedAt === null || performance.now() - firstListedAt < FIRST_PAINT_MS)) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const rest = s.loadRest();
  while (!s.loadStep(LOAD_STEP_MS)) {
    postProgress(false);
    await nextTask();
  }
  await rest;
  loadingCache = false;
  postProgress(true);
  for (const m of heldBack.splice(0)) handle(m, s);
  flush();
}

/** When the page's first listing was answered (loading the rest of the cache waits for it). */
let firstListedAt: number | null = null;
/** Loading the rest of a cached index waits at most this long for the first listing… */
const FIRST_SCREEN_WAIT_MS = 250;
/** …and after it, about this long for the page to paint it. */
const FIRST_PAINT_MS = 40;

/** How long the worker's wasm took to instantiate (a figure for the reopen benchmark). */
let wasmInitMs = 0;

/** Loading the cached index: messages that need the session proper wait in `heldBack`. */
let loadingCache = false;
const heldBack: ToWorker[] = [];
/** How long one step of loading the cached index runs, ms. */
const LOAD_STEP_MS = 12;
// Searches too: one run over a partly loaded index would miss names and never know.
const WAITS_FOR_LOAD = new Set<ToWorker['type']>(['channel-open', 'channel-closed', 'give-up', 'frame', 'read', 'cancel-read', 'serve', 'serve-stop', 'search', 'search-stop']);

function dispatch(message: ToWorker, s: ReceiverSession): void {
  if (loadingCache && WAITS_FOR_LOAD.has(message.type)) heldBack.push(message);
  else handle(message, s);
}

/** Resolves in a new task (after messages already queued), without timer clamping. */
function nextTask(): Promise<void> {
  return new Promise((resolve) => {
    const c = new MessageChannel();
    c.port1.onmessage = () => {
      c.port1.close();
      resolve();
    };
    c.port2.postMessage(0);
  });
}

self.onmessage = (event: MessageEvent<ToWorker>) => {
  const message = event.data;
  if (message.type === 'open') {
    void open(message.key);
    return;
  }
  if (!session) {
    early.push(message);
    return;
  }
  dispatch(message, session);
};

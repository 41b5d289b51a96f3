// The index worker: the browser's shell around the wasm Visit (core's receiving
// lifecycle: when to connect and reconnect, the index, BLAKE3 checks, the storage
// policy, bound to IndexedDB), off the main thread. It does what the visit's
// `poll` says: frames to send and data links to open or close go to the page,
// events go to their reads and to the page, and `tick` runs when asked. It
// decides nothing about the connection. One of the two modules that touch the
// wasm (the other is ./page.ts).

/// <reference lib="webworker" />

import init, { FileHasher, type SearchBatch, Visit, type VisitOutput } from '../../../core-wasm/pkg/linkfs_core_wasm.js';
import wasmUrl from '../../../core-wasm/pkg/linkfs_core_wasm_bg.wasm?url';
import type { EntryId, EntryRow, ReadHandle, TransferSource } from '../api';
import { entryStream, MEDIA, BULK, type RangeReader, type ReadSink } from './entry-stream';
import type { FromWorker, IndexQuery, QueryAnswer, ShareStats, ToWorker } from './protocol';
import { type ByteSource, messageOf, SourceServer } from './serve';
import { saveToBlob, saveToFile } from './save-sinks';
import { type PlanMember, planZip, zipSource } from './zip-source';
import { saveToDirectory } from './directory-sink';
import { Uploads } from './uploads';
import { ThumbnailMaker } from './thumbnails';
import { shareTag, ThumbStore } from '../thumb-store';
import { Unsealer } from './unsealer';

declare const self: DedicatedWorkerGlobalScope;

/** Progress messages to the page at most this often while the index fills. */
const PROGRESS_EVERY_MS = 50;
/** Downloads go to the service worker in messages of about this many bytes. */
const DOWNLOAD_MESSAGE_BYTES = 512 * 1024;
/** Read progress at most this often per read. */
const READ_PROGRESS_EVERY_MS = 100;

let visit: Visit | null = null;
let timer: ReturnType<typeof setTimeout> | null = null;
let lastProgressAt = 0;
let progressTimer: ReturnType<typeof setTimeout> | null = null;
/** Where each read's events go, by the visit's read handle. */
const sinks = new Map<ReadHandle, ReadSink>();
/** Whole-file reads the page asked for (previews), by the page's id: their handle. */
const handleById = new Map<number, ReadHandle>();
/** Resources being served or saved, by the page's token. */
const serving = new Map<string, { stop(reason: string): void }>();
/** Messages that came before the visit was open. */
const early: ToWorker[] = [];
/** Serves wait until the saved index is restored whole (a ZIP plan lists folders). */
let restoring = true;
const waitingForIndex: Extract<ToWorker, { type: 'serve' }>[] = [];

function post(message: FromWorker, transfer: Transferable[] = []): void {
  self.postMessage(message, transfer);
}

const uploads = new Uploads(post, () => flush(), () => new FileHasher());
/** Thumbnails (their cache is named once the share's key is known). */
let tagOfShare: (tag: string) => void = () => undefined;
const thumbnails = new ThumbnailMaker(new ThumbStore(new Promise<string>((resolve) => (tagOfShare = resolve)), 'timer'));
/** The link's rights were told to the page. */
let rightsTold = false;

function progressNow(v: Visit): { progress: ReturnType<Visit['progress']>; stats: ShareStats } {
  return { progress: v.progress(), stats: v.stats() };
}

function postProgress(force: boolean): void {
  const v = visit;
  if (!v) return;
  const now = performance.now();
  if (!force && now - lastProgressAt < PROGRESS_EVERY_MS) {
    progressTimer ??= setTimeout(() => {
      progressTimer = null;
      postProgress(true);
    }, PROGRESS_EVERY_MS);
    return;
  }
  lastProgressAt = now;
  post({ type: 'progress', ...progressNow(v) });
}

/** Does what the visit says now, and arms its timer. */
function flush(): void {
  const v = visit;
  if (!v) return;
  const { outputs, wakeInMs } = v.poll();
  let frames: ArrayBuffer[] = [];
  const sendFrames = (): void => {
    if (frames.length === 0) return;
    post({ type: 'send', frames }, frames);
    frames = [];
  };
  for (const out of outputs) {
    if (out.type === 'send') {
      frames.push(out.frame.buffer as ArrayBuffer);
      continue;
    }
    sendFrames();
    handleOutput(out, v);
  }
  sendFrames();
  if (!rightsTold) {
    const rights = v.rights();
    if (rights !== undefined) {
      rightsTold = true;
      post({ type: 'rights', rights });
    }
  }
  if (timer !== null) clearTimeout(timer);
  timer =
    wakeInMs === undefined
      ? null
      : setTimeout(() => {
          timer = null;
          v.tick();
          flush();
        }, Math.max(0, wakeInMs));
}

function handleOutput(out: Exclude<VisitOutput, { type: 'send' }>, v: Visit): void {
  switch (out.type) {
    case 'connect':
      post({ type: 'connect' });
      return;
    case 'close-link':
      post({ type: 'close-link' });
      return;
    case 'status':
      post({ type: 'status', status: { state: out.state, message: out.message } });
      postProgress(true);
      return;
    case 'data':
      sinks.get(out.handle)?.data(out.bytes);
      return;
    case 'done': {
      const sink = sinks.get(out.handle);
      sinks.delete(out.handle);
      sink?.done();
      return;
    }
    case 'failed': {
      const sink = sinks.get(out.handle);
      sinks.delete(out.handle);
      sink?.failed(out.message);
      return;
    }
    case 'reset':
      post({ type: 'reset' });
      return;
    case 'changed':
      post({ type: 'changed', dirs: out.dirs, all: out.all });
      return;
    case 'upload-read':
    case 'upload-ready':
    case 'upload-progress':
    case 'upload-done':
    case 'upload-refused':
    case 'upload-interrupted':
      uploads.output(out, v);
      return;
    case 'restored':
      restoring = false;
      stopUnsealer();
      postProgress(true);
      for (const m of waitingForIndex.splice(0)) serve(m, v);
      return;
  }
}

/** A transfer's range reads, pinned to the versions its files had when it was planned. */
interface PinnedReader extends RangeReader {
  /** Reads of `entry` from now on ask for the version the index holds now. */
  pin(entry: EntryId): void;
}

/**
 * Range reads on the visit, their events routed to `sink`; `counted` hears every byte
 * read. A pinned file's ranges are all read at the version it was pinned at: if it
 * changes meanwhile, the next range is refused as changed (and so is one already
 * asked for, by the sharer), so a save never holds two versions' bytes.
 */
function rangeReader(v: Visit, counted: (bytes: number) => void = () => undefined): PinnedReader {
  const pinned = new Map<EntryId, number>();
  return {
    pin(entry) {
      const version = v.version(entry);
      if (version !== undefined) pinned.set(entry, version);
    },
    start(entry, offset, len, sink) {
      const h = v.startRead(entry, offset, len, pinned.get(entry));
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
        v.cancelRead(handle);
        queueMicrotask(flush);
      }
    },
  };
}

/** A whole file read into a Blob (previews), with progress to the page. */
function readWhole(id: number, entry: EntryId, v: Visit): void {
  const row = v.entry(entry);
  if (!row) throw new Error('This file is no longer in the share.');
  const total = row.size;
  const parts: Uint8Array[] = [];
  let done = 0;
  let lastProgress = 0;
  const h = v.startRead(entry, 0, total);
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
function listChildren(v: Visit) {
  return (dir: EntryId, start: number, count: number): { total: number; rows: EntryRow[] } => {
    const page = v.list(dir, 'name', false, start, count);
    return { total: page.total, rows: page.rows };
  };
}

/** The byte source the page asked for, and what the page should know of it. */
function sourceOf(
  source: TransferSource,
  v: Visit,
  media: boolean,
  counted: (bytes: number) => void,
): { bytes: ByteSource; name: string; zip?: ReturnType<typeof planZip>['plan']; members?: PlanMember[]; reader: RangeReader } {
  const reader = rangeReader(v, counted);
  if (source.kind === 'file') {
    const row = v.entry(source.id);
    if (!row) throw new Error('This file is no longer in the share.');
    if (row.kind !== 'file') throw new Error(`"${row.name}" is not a file.`);
    const size = row.size;
    const ahead = media ? MEDIA : BULK;
    reader.pin(source.id);
    return { name: row.name, reader, bytes: { size, ownsChunks: true, open: (start, end) => entryStream(reader, source.id, start, end, ahead) } };
  }
  const roots: EntryRow[] = [];
  for (const id of source.ids) {
    const row = v.entry(id);
    if (!row) throw new Error('Part of the selection is no longer in the share.');
    roots.push(row);
  }
  const { plan, members } = planZip(roots, listChildren(v), source.name.replace(/\.zip$/i, ''));
  // Planned and pinned in one task of this worker: no index change comes between.
  for (const m of members) reader.pin(m.id);
  return { name: source.name, reader, bytes: zipSource(reader, plan, members), zip: plan, members };
}

function serve(message: Extract<ToWorker, { type: 'serve' }>, v: Visit): void {
  if (restoring) {
    waitingForIndex.push(message);
    return;
  }
  const { token } = message;
  let made: ReturnType<typeof sourceOf>;
  // Bytes read from the sharer for this transfer (with what the read-ahead took).
  let read = 0;
  const media = message.target.kind === 'port' && !message.target.once;
  try {
    made = sourceOf(message.source, v, media, (n) => {
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
      : saveToBlob(bytes, controller.signal, onSent);
  run.then(
    (result) => {
      if (result.blob) post({ type: 'serve-blob', token, blob: result.blob });
      finished(true, '', result.written);
    },
    (error: unknown) => finished(false, messageOf(error), (error as { written?: number }).written ?? 0),
  );
}

function answer(id: number, query: IndexQuery, v: Visit): void {
  let answer: QueryAnswer;
  switch (query.method) {
    case 'list':
      answer = { method: 'list', value: v.list(query.dir, query.sort, query.descending, query.start, query.count) };
      break;
    case 'entry':
      answer = { method: 'entry', value: v.entry(query.id) ?? null };
      break;
    case 'path':
      answer = { method: 'path', value: v.path(query.id) };
      break;
    case 'lookup':
      answer = { method: 'lookup', value: v.lookup(query.path) ?? null };
      break;
    case 'indexIn':
      answer = { method: 'indexIn', value: v.indexIn(query.dir, query.id, query.sort, query.descending) ?? null };
      break;
  }
  post({ type: 'answer', id, answer });
}

function handle(message: ToWorker, v: Visit): void {
  switch (message.type) {
    case 'open':
      return;
    case 'link-status':
      if (message.state === 'connecting') v.linkProgress(message.message);
      else if (message.state !== 'connected') v.linkFailed(message.state, message.message);
      flush();
      return;
    case 'link-open':
      v.linkOpened();
      flush();
      return;
    case 'link-closed':
      v.linkClosed();
      flush();
      return;
    case 'shown':
      v.shown();
      flush();
      return;
    case 'password':
      v.givePassword(message.password);
      flush();
      return;
    case 'frame':
      v.handleFrame(new Uint8Array(message.frame));
      flush();
      postProgress(false);
      return;
    case 'query':
      try {
        answer(message.id, message.query, v);
      } catch (error) {
        post({ type: 'query-failed', id: message.id, message: messageOf(error) });
      }
      return;
    case 'read':
      try {
        readWhole(message.id, message.entry, v);
      } catch (error) {
        post({ type: 'read-failed', id: message.id, message: messageOf(error) });
      }
      return;
    case 'cancel-read': {
      const h = handleById.get(message.id);
      if (h !== undefined) {
        handleById.delete(message.id);
        sinks.delete(h);
        v.cancelRead(h);
        flush();
      }
      return;
    }
    case 'serve':
      serve(message, v);
      return;
    case 'serve-stop': {
      const waiting = waitingForIndex.findIndex((m) => m.token === message.token);
      if (waiting >= 0) waitingForIndex.splice(waiting, 1);
      serving.get(message.token)?.stop(message.reason);
      return;
    }
    case 'search':
      startSearch(message.id, message.query, v);
      return;
    case 'search-stop':
      if (searching?.id === message.id) searching = null;
      return;
    case 'upload':
      void uploads.start(message.id, message.file, message.path, () => visit);
      return;
    case 'upload-cancel':
      uploads.cancel(message.id, v);
      return;
    case 'thumb':
      thumbnails.make(message.id, message.ask, rangeReader(v)).then(
        (made) => post({ type: 'thumb-done', id: message.id, made }),
        (error: unknown) => post({ type: 'thumb-failed', id: message.id, message: messageOf(error) }),
      );
      return;
    case 'thumb-cancel':
      thumbnails.cancel(message.id);
      return;
    case 'thumb-store':
      void thumbnails.keep(message.ask, message.blob);
      return;
  }
}

/** Entry slots one search step scans (about a millisecond). */
const SEARCH_STEP_SLOTS = 10_000;
/** Steps run back to back for at most this long before the worker yields to other messages, ms. */
const SEARCH_SLICE_MS = 8;
/** Hits per message to the page, at most. */
const SEARCH_HITS_PER_MESSAGE = 250;
/** How often a search asks again while the saved index is still being restored, ms. */
const SEARCH_WAIT_MS = 20;
let searching: { id: number; handle: number } | null = null;

/**
 * Yields to the worker's other messages and comes back at once. A message on a
 * channel, not `setTimeout(f, 0)`: nested timers are clamped to 4 ms each, which
 * cost a search over a million names a hundred milliseconds of waiting.
 */
const yieldChannel = new MessageChannel();
const afterYield: (() => void)[] = [];
yieldChannel.port1.onmessage = () => afterYield.shift()?.();
function yieldThen(f: () => void): void {
  afterYield.push(f);
  yieldChannel.port2.postMessage(null);
}

/** Runs a search in slices of steps, posting what each slice found, until done or replaced. */
function startSearch(id: number, query: string, v: Visit): void {
  const run = { id, handle: v.searchStart(query) };
  searching = run;
  const slice = (): void => {
    if (searching !== run) return;
    const from = performance.now();
    let rows: SearchBatch['rows'] = [];
    let batch;
    for (;;) {
      try {
        batch = v.searchStep(run.handle, SEARCH_STEP_SLOTS);
      } catch (error) {
        searching = null;
        post({ type: 'search-results', id, batch: { rows: [], scanned: 0, total: 0, done: true, truncated: false } });
        console.warn('linkfs: search failed', error);
        return;
      }
      // Nothing scanned and not done: the visit waits for the whole index.
      if (!batch.done && batch.total === 0) {
        setTimeout(slice, SEARCH_WAIT_MS);
        return;
      }
      rows = rows.length === 0 ? batch.rows : rows.concat(batch.rows);
      if (batch.done || performance.now() - from >= SEARCH_SLICE_MS || rows.length >= SEARCH_HITS_PER_MESSAGE * 4) break;
    }
    // At most SEARCH_HITS_PER_MESSAGE hits per message: the page decodes each
    // message on its main thread, which must never be busy for long.
    for (let at = 0; at + SEARCH_HITS_PER_MESSAGE < rows.length; at += SEARCH_HITS_PER_MESSAGE) {
      post({ type: 'search-results', id, batch: { ...batch, rows: rows.slice(at, at + SEARCH_HITS_PER_MESSAGE), done: false, truncated: false } });
    }
    const last = rows.length > SEARCH_HITS_PER_MESSAGE ? rows.slice(rows.length - (rows.length % SEARCH_HITS_PER_MESSAGE || SEARCH_HITS_PER_MESSAGE)) : rows;
    post({ type: 'search-results', id, batch: { ...batch, rows: last } });
    if (batch.done) searching = null;
    else yieldThen(slice);
  };
  slice();
}

async function open(key: string): Promise<void> {
  const t0 = performance.now();
  let v: Visit;
  try {
    // Started at once, so its wasm is ready by the time the restore reads its
    // second chunk; ended once the restore is over, or at once when open finds
    // nothing to restore. Started by its first chunk instead, the 1M reopen's
    // whole index came 30-40 ms later (446-464 ms against 421-432).
    unsealer = new Unsealer();
    const u = unsealer;
    post({ type: 'opening', step: 'code' });
    await init({ module_or_path: wasmUrl });
    wasmInitMs = performance.now() - t0;
    post({ type: 'opening', step: 'storage' });
    v = await Visit.open(
      key,
      () => {
        flush();
        postProgress(false);
      },
      (blob, lens, first, from, to) => u.unseal(blob, lens, first, from, to),
    );
  } catch (error) {
    stopUnsealer();
    post({ type: 'open-failed', message: messageOf(error) });
    return;
  }
  visit = v;
  restoring = v.progress().loadingCache;
  if (!restoring) stopUnsealer();
  const ready = progressNow(v);
  post({ type: 'ready', ...ready, stats: { ...ready.stats, workerWasmInitMs: wasmInitMs, workerOpenMs: performance.now() - t0 } });
  for (const m of early.splice(0)) handle(m, v);
  flush();
}

/** The unseal worker's side, while a stored index is restored (./unsealer.ts). */
let unsealer: Unsealer | null = null;

function stopUnsealer(): void {
  unsealer?.stop();
  unsealer = null;
}

/** How long the worker's wasm took to instantiate (a figure for the reopen benchmark). */
let wasmInitMs = 0;

self.onmessage = (event: MessageEvent<ToWorker>) => {
  const message = event.data;
  if (message.type === 'open') {
    tagOfShare(shareTag(message.key));
    void open(message.key);
    return;
  }
  if (!visit) {
    early.push(message);
    return;
  }
  handle(message, visit);
};

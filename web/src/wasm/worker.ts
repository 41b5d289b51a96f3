// The index worker: the browser's drive loop around the wasm ReceiverSession
// (core's persistent receiver: index, BLAKE3 checks, the storage policy, bound to
// IndexedDB), off the main thread. The page forwards data-link frames here and
// sends whatever this worker posts back as 'send'. One of the two modules that
// touch the wasm (the other is ./page.ts).

/// <reference lib="webworker" />

import init, { ReceiverSession, type SessionEvent } from '../../../core-wasm/pkg/linkfs_core_wasm.js';
import wasmUrl from '../../../core-wasm/pkg/linkfs_core_wasm_bg.wasm?url';
import type { FromWorker, IndexQuery, QueryAnswer, ShareStats, ToWorker, WorkerProgress } from './protocol';

declare const self: DedicatedWorkerGlobalScope;

/** Progress messages to the page at most this often while the index fills. */
const PROGRESS_EVERY_MS = 50;
/** Read progress at most this often per read. */
const READ_PROGRESS_EVERY_MS = 100;

interface ActiveRead {
  id: number;
  total: number;
  done: number;
  parts: Uint8Array[];
  lastProgress: number;
}

let session: ReceiverSession | null = null;
let timer: ReturnType<typeof setTimeout> | null = null;
let lastProgressAt = 0;
let progressTimer: ReturnType<typeof setTimeout> | null = null;
const readsByHandle = new Map<number, ActiveRead>();
const handleById = new Map<number, number>();
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
    case 'data': {
      const r = readsByHandle.get(ev.handle);
      if (!r) return;
      r.parts.push(ev.bytes);
      r.done += ev.bytes.byteLength;
      const now = performance.now();
      if (now - r.lastProgress >= READ_PROGRESS_EVERY_MS) {
        r.lastProgress = now;
        post({ type: 'read-progress', id: r.id, done: r.done, total: r.total });
      }
      return;
    }
    case 'done': {
      const r = takeRead(ev.handle);
      if (!r) return;
      post({ type: 'read-progress', id: r.id, done: r.done, total: r.total });
      post({ type: 'read-done', id: r.id, blob: new Blob(r.parts as BlobPart[]) });
      return;
    }
    case 'failed': {
      const r = takeRead(ev.handle);
      if (r) post({ type: 'read-failed', id: r.id, message: ev.message });
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

function takeRead(handle: number): ActiveRead | undefined {
  const r = readsByHandle.get(handle);
  if (!r) return undefined;
  readsByHandle.delete(handle);
  handleById.delete(r.id);
  return r;
}

function answer(id: number, query: IndexQuery, s: ReceiverSession): void {
  let value: QueryAnswer;
  switch (query.method) {
    case 'list':
      value = s.list(query.dir, query.sort, query.descending, query.start, query.count);
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
    case 'read': {
      try {
        const total = s.entry(message.entry)?.size ?? 0;
        const h = s.startRead(message.entry);
        readsByHandle.set(h, { id: message.id, total, done: 0, parts: [], lastProgress: 0 });
        handleById.set(message.id, h);
        flush();
      } catch (error) {
        post({ type: 'read-failed', id: message.id, message: error instanceof Error ? error.message : String(error) });
      }
      return;
    }
    case 'cancel-read': {
      const h = handleById.get(message.id);
      if (h !== undefined) {
        s.cancelRead(h);
        readsByHandle.delete(h);
        handleById.delete(message.id);
        flush();
      }
      return;
    }
  }
}

async function open(key: string): Promise<void> {
  try {
    await init({ module_or_path: wasmUrl });
    session = await ReceiverSession.open(key, () => {
      flush();
      postProgress(false);
    });
  } catch (error) {
    post({ type: 'open-failed', message: error instanceof Error ? error.message : String(error) });
    return;
  }
  post({ type: 'ready', ...progressNow(session) });
  const s = session;
  for (const m of early.splice(0)) handle(m, s);
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
  handle(message, session);
};

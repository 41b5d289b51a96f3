// The service worker: answers `<scope>linkfs-serve/<token>/<name>` with a streamed
// Response whose bytes come from the index worker over the token's MessagePort
// (see ./serve/protocol.ts). It holds no file data beyond one window per stream
// (the resource's window), hands the browser each chunk only when the browser asks for it
// (a pull stream with no queue of its own), and returns that much credit.
//
// Range requests (media elements seek with them) are answered 206 with exactly the
// range; a ZIP is answered whole. Anything not under the prefix goes to the network
// untouched. Only media and PDFs are ever served inline; everything else is an
// attachment typed application/octet-stream, so nothing served can run in the
// app's origin. Built to `sw.js` at the app's root (vite.config.ts) as one classic
// script: it imports only modules nothing else imports, so they are inlined.

/// <reference lib="webworker" />

import { dispositionOf, INLINE_TYPES, parseRange } from './serve/http';
import type { FromSource, ServedResource, ServiceWorkerStats, ToServiceWorker, ToSource } from './serve/protocol';

declare const self: ServiceWorkerGlobalScope;

const PREFIX = 'linkfs-serve';

/** Credit is returned once this much was read (or the queue ran dry). */
const CREDIT_STEP = 256 * 1024;

interface Stream {
  queue: Uint8Array[];
  /** Bytes the browser read that were not yet credited back. */
  owed: number;
  ended: boolean;
  failure: string | null;
  /** The pull waiting for a chunk, if any. */
  wake: (() => void) | null;
}

interface Served {
  resource: ServedResource;
  port: MessagePort;
  streams: Map<number, Stream>;
}

const served = new Map<string, Served>();
let nextStream = 1;

/** Chromium's Static Routing API (not in every browser's types or every browser). */
interface RouterInstallEvent extends ExtendableEvent {
  addRoutes?: (rules: { condition: Record<string, unknown>; source: 'network' }[]) => Promise<void>;
}

self.addEventListener('install', (event: RouterInstallEvent) => {
  void self.skipWaiting();
  // Only `linkfs-serve/` needs this worker: page loads and the app's own files go
  // straight to the network, without starting it (a stopped worker cost a reopened
  // page tens of milliseconds before its first request). Where the API is missing,
  // the fetch handler below lets them through as before.
  // (Not "every navigation": downloads are navigations of a hidden frame to
  // `linkfs-serve/`, which must reach this worker.)
  if (typeof event.addRoutes === 'function') {
    const scope = new URL(self.registration.scope);
    event.waitUntil(
      event
        .addRoutes([
          { condition: { urlPattern: { pathname: scope.pathname } }, source: 'network' },
          { condition: { urlPattern: { pathname: `${scope.pathname}index.html` } }, source: 'network' },
          { condition: { urlPattern: { pathname: `${scope.pathname}assets/*` } }, source: 'network' },
        ])
        .catch(() => undefined),
    );
  }
});

self.addEventListener('activate', (event) => {
  event.waitUntil(self.clients.claim());
});

self.addEventListener('message', (event: ExtendableMessageEvent) => {
  const message = event.data as ToServiceWorker;
  switch (message.type) {
    case 'register': {
      const entry: Served = { resource: message.resource, port: message.port, streams: new Map() };
      message.port.onmessage = (e: MessageEvent<FromSource>) => onSource(entry, e.data);
      served.get(message.token)?.port.close();
      served.set(message.token, entry);
      message.reply.postMessage({ type: 'registered', token: message.token });
      message.reply.close();
      return;
    }
    case 'unregister': {
      const entry = served.get(message.token);
      if (entry) {
        // Streams that received everything still drain into the browser.
        for (const [id, s] of entry.streams) if (!s.ended) endStream(entry, id, s, 'the page stopped serving this file');
        entry.port.close();
        served.delete(message.token);
      }
      return;
    }
    case 'ping':
      return;
    case 'stats': {
      let heldBytes = 0;
      let streams = 0;
      for (const entry of served.values()) {
        for (const st of entry.streams.values()) {
          streams += 1;
          for (const c of st.queue) heldBytes += c.byteLength;
        }
      }
      const stats: ServiceWorkerStats = { heldBytes, streams, served: served.size };
      message.reply.postMessage(stats);
      message.reply.close();
      return;
    }
  }
});

self.addEventListener('fetch', (event: FetchEvent) => {
  const url = new URL(event.request.url);
  const scope = new URL(self.registration.scope);
  if (url.origin !== scope.origin || !url.pathname.startsWith(`${scope.pathname}${PREFIX}/`)) return;
  const token = url.pathname.slice(scope.pathname.length + PREFIX.length + 1).split('/')[0] ?? '';
  event.respondWith(answer(token, event.request));
});

function onSource(entry: Served, m: FromSource): void {
  const s = entry.streams.get(m.stream);
  if (!s) return;
  switch (m.type) {
    case 'data':
      s.queue.push(new Uint8Array(m.chunk));
      break;
    case 'end':
      s.ended = true;
      break;
    case 'error':
      s.failure = m.message;
      break;
  }
  const wake = s.wake;
  s.wake = null;
  wake?.();
}

function endStream(entry: Served, id: number, s: Stream, failure: string): void {
  s.failure ??= failure;
  entry.streams.delete(id);
  const wake = s.wake;
  s.wake = null;
  wake?.();
}

function post(entry: Served, m: ToSource): void {
  entry.port.postMessage(m);
}

function plain(status: number, text: string): Response {
  return new Response(text, { status, headers: { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' } });
}

async function answer(token: string, request: Request): Promise<Response> {
  const entry = served.get(token);
  if (!entry) {
    return plain(404, 'This file is no longer being served by the page that opened it. Go back to the share and open it again.');
  }
  const { resource } = entry;
  const inline = resource.disposition === 'inline' && INLINE_TYPES.test(resource.mime);
  const headers = new Headers({
    'Content-Type': inline ? resource.mime : 'application/octet-stream',
    'Content-Disposition': dispositionOf(inline ? 'inline' : 'attachment', resource.name),
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    // Media shown inline run no scripts. Not on downloads (Chromium cancels a large
    // download whose response carries a CSP) nor on PDFs (the viewer is an embed).
    ...(inline && !resource.mime.endsWith('/pdf') ? { 'Content-Security-Policy': "default-src 'none'; media-src 'self'" } : {}),
  });
  let start = 0;
  let end = resource.size;
  let status = 200;
  const rangeHeader = request.headers.get('Range');
  if (resource.ranges) {
    headers.set('Accept-Ranges', 'bytes');
    if (rangeHeader !== null) {
      const range = parseRange(rangeHeader, resource.size);
      if (range === null) {
        headers.set('Content-Range', `bytes */${resource.size}`);
        return new Response(null, { status: 416, headers });
      }
      if (range !== undefined) {
        ({ start, end } = range);
        status = 206;
        headers.set('Content-Range', `bytes ${start}-${end - 1}/${resource.size}`);
      }
    }
  }
  headers.set('Content-Length', String(end - start));
  if (request.method === 'HEAD' || end === start) return new Response(null, { status, headers });

  const id = nextStream++;
  const stream: Stream = { queue: [], owed: 0, ended: false, failure: null, wake: null };
  entry.streams.set(id, stream);
  post(entry, { type: 'open', stream: id, start, end, credit: resource.window });
  const body = new ReadableStream<Uint8Array>(
    {
      pull: (controller) =>
        new Promise<void>((resolve) => {
          const take = (): void => {
            const chunk = stream.queue.shift();
            if (chunk !== undefined) {
              controller.enqueue(chunk);
              // Credit goes back in steps (fewer messages), at once when nothing is left.
              stream.owed += chunk.byteLength;
              if (stream.owed >= CREDIT_STEP || stream.queue.length === 0) {
                post(entry, { type: 'credit', stream: id, bytes: stream.owed });
                stream.owed = 0;
              }
            } else if (stream.failure !== null) {
              entry.streams.delete(id);
              controller.error(new Error(stream.failure));
            } else if (stream.ended) {
              entry.streams.delete(id);
              controller.close();
              post(entry, { type: 'drained', stream: id });
            } else {
              stream.wake = take;
              return;
            }
            resolve();
          };
          take();
        }),
      cancel: () => {
        if (entry.streams.delete(id)) post(entry, { type: 'cancel', stream: id });
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(body, { status, headers });
}

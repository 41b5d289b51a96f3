// The page's side of the service worker (../sw.ts): registers it at the app's
// root, registers served resources with it, keeps it alive while anything is
// being served (Firefox stops an idle service worker after 30 s even while one of
// its responses is still streaming), and builds the URLs it answers.

import type { RegisteredReply, ServedResource, ToServiceWorker } from '../serve/protocol';
import { SERVE_PREFIX } from '../serve/protocol';

/** How often the page pings the service worker while anything is served. */
const KEEPALIVE_MS = 10_000;
/** How long registering may take before the page saves another way. */
const REGISTER_TIMEOUT_MS = 5_000;

let registration: Promise<ServiceWorkerRegistration | null> | null = null;
const live = new Set<string>();
let keepalive: ReturnType<typeof setInterval> | null = null;

/** Registers the service worker (once); null where the browser has none (plain http on a LAN address, some private windows). */
export function serviceWorker(): Promise<ServiceWorkerRegistration | null> {
  registration ??= (async () => {
    if (!('serviceWorker' in navigator) || !window.isSecureContext) return null;
    try {
      const reg = await navigator.serviceWorker.register(new URL('sw.js', document.baseURI), { scope: './' });
      await navigator.serviceWorker.ready;
      return reg;
    } catch (error) {
      console.warn('linkfs: no service worker: files are read whole before they are saved or played', error);
      return null;
    }
  })();
  return registration;
}

/** True once the service worker controls this page (media requests go through it). */
export function controlsPage(): boolean {
  return navigator.serviceWorker?.controller != null;
}

/** The URL the service worker answers for `token`, ending in the file's name. */
export function servedUrl(token: string, name: string): string {
  return new URL(`${SERVE_PREFIX}/${token}/${encodeURIComponent(name)}`, document.baseURI).href;
}

function send(worker: ServiceWorker, message: ToServiceWorker, transfer: Transferable[] = []): void {
  worker.postMessage(message, transfer);
}

/** Hands `port` (to the index worker) to the service worker under `token`. */
export async function registerServed(token: string, resource: ServedResource, port: MessagePort): Promise<void> {
  const reg = await serviceWorker();
  const worker = reg?.active;
  if (!worker) throw new Error('the service worker is not running');
  const reply = new MessageChannel();
  const registered = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the service worker did not answer')), REGISTER_TIMEOUT_MS);
    reply.port1.onmessage = (event: MessageEvent<RegisteredReply>) => {
      if (event.data.type === 'registered' && event.data.token === token) {
        clearTimeout(timer);
        resolve();
      }
    };
  });
  send(worker, { type: 'register', token, resource, port, reply: reply.port2 }, [port, reply.port2]);
  await registered;
  reply.port1.close();
  live.add(token);
  keepalive ??= setInterval(() => {
    const active = navigator.serviceWorker.controller ?? reg?.active;
    if (active) send(active, { type: 'ping' });
  }, KEEPALIVE_MS);
}

export function unregisterServed(token: string): void {
  if (!live.delete(token)) return;
  void serviceWorker().then((reg) => {
    if (reg?.active) send(reg.active, { type: 'unregister', token });
  });
  if (live.size === 0 && keepalive !== null) {
    clearInterval(keepalive);
    keepalive = null;
  }
}

/**
 * Starts the browser's own download of a served URL (it writes the file to disk as
 * the bytes stream in) from a hidden frame; returns the function that removes the
 * frame, to be called once the download ended (removing it earlier cancels the
 * download in Chromium).
 */
export function startBrowserDownload(url: string): () => void {
  const frame = document.createElement('iframe');
  frame.hidden = true;
  frame.src = url;
  document.body.append(frame);
  return () => frame.remove();
}

/** A random token for a served resource. */
export function newToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

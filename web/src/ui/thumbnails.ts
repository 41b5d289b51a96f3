// The grid's thumbnails on the page's side: which to ask the index worker for, in
// what order, and the object URLs of those that came.
//
// - Only the tiles on screen are asked for; a tile scrolled away before its
//   thumbnail came is cancelled (its read stops).
// - The smallest files first: they come soonest, so the screen fills fastest.
// - At most MAX_RUNNING at once (the worker makes them one after the other as
//   their bytes arrive; more in flight would only delay the first).
// - A video's poster is made here (a worker has no media element): the video is
//   served through the service worker like the preview's player, a frame a tenth of
//   the way in (at most 2 s) is drawn small, and the worker keeps it in its cache.
//   One at a time.
// - Thumbnails are data: URLs (see thumb-store.ts for why not Blobs), kept for the
//   last URL_CACHE thumbnails. Those of a folder's first screen are kept across
//   visits too (`seed`, `firstScreen`; see kept-folders.ts): a reopened share shows
//   them in its first frame.

import type { EntryId, EntryRow, ShareApi, ThumbnailAsk } from '../api';
import { dataUrl } from '../thumb-store';
import { thumbnailKindOf } from './file-types';
import { MEDIA_WINDOW } from '../serve/protocol';
import { controlsPage, newToken, registerServed, servedUrl, unregisterServed } from './service-worker';

const MAX_RUNNING = 4;
/** A thumbnail that failed (the sharer away, a read that broke) is asked again after this, ms. */
const RETRY_AFTER_MS = 30_000;
const URL_CACHE = 400;
/** Keys remembered as looked up or as having no thumbnail, at most (then forgotten). */
const MEMORY_KEYS = 50_000;
/** A poster not made by then is given up (the tile keeps its icon). */
const POSTER_TIMEOUT_MS = 15_000;

/** What thumbnails cost so far on this page (for the benchmark and the curious). */
export interface ThumbnailStats {
  shown: number;
  /** Kept with the folder's first screen from an earlier visit (shown in the first frame). */
  kept: number;
  fromCache: number;
  embedded: number;
  decoded: number;
  posters: number;
  none: number;
  bytesRead: number;
}

export class ThumbnailQueue {
  private readonly urls = new Map<string, string>();
  /** Keys for which there is no thumbnail (not decodable, too big, failed). */
  private readonly none = new Set<string>();
  /** Keys whose making failed, and when (asked again after RETRY_AFTER_MS). */
  private readonly failed = new Map<string, number>();
  private readonly running = new Map<string, AbortController>();
  /** Keys asked of the cache alone (all at once: answers from the cache are quick). */
  private readonly probed = new Set<string>();
  private readonly probing = new Map<string, AbortController>();
  private posterRunning = false;
  private wanted: { key: string; row: EntryRow; px: number }[] = [];
  readonly stats: ThumbnailStats = { shown: 0, kept: 0, fromCache: 0, embedded: 0, decoded: 0, posters: 0, none: 0, bytesRead: 0 };

  constructor(
    private readonly api: ShareApi,
    /** A thumbnail for entry `id` came: tiles showing it take it now. */
    private readonly ready: (id: EntryId) => void,
  ) {}

  /** Thumbnails kept from an earlier visit (key -> data: URL): shown as if they had just come. */
  seed(kept: ReadonlyMap<string, string>): void {
    for (const [key, url] of kept) {
      if (this.urls.has(key)) continue;
      this.urls.set(key, url);
      this.stats.kept += 1;
    }
  }

  /** The thumbnails of `rows` at `px` that are here (key -> data: URL), for keeping. */
  here(rows: EntryRow[], px: number): Map<string, string> {
    const out = new Map<string, string>();
    for (const row of rows) {
      const key = keyOf(row, px);
      const url = this.urls.get(key);
      if (url !== undefined) out.set(key, url);
    }
    return out;
  }

  /** The URL of `row`'s thumbnail at `px`, if it is here. */
  url(row: EntryRow, px: number): string | null {
    const key = keyOf(row, px);
    const url = this.urls.get(key);
    if (url === undefined) return null;
    // Most recently used last.
    this.urls.delete(key);
    this.urls.set(key, url);
    return url;
  }

  /** The rows on screen now: what is not among them stops, what is and has no thumbnail is asked for. */
  want(rows: EntryRow[], px: number): void {
    // What was learned of keys is only a shortcut: forgotten past a bound (a long visit).
    if (this.probed.size > MEMORY_KEYS) this.probed.clear();
    if (this.none.size > MEMORY_KEYS) this.none.clear();
    const wanted: { key: string; row: EntryRow; px: number }[] = [];
    for (const row of rows) {
      if (row.kind !== 'file' || thumbnailKindOf(row.name, row.size) === null) continue;
      const key = keyOf(row, px);
      if (this.urls.has(key) || this.none.has(key)) continue;
      const failedAt = this.failed.get(key);
      if (failedAt !== undefined && performance.now() - failedAt < RETRY_AFTER_MS) continue;
      wanted.push({ key, row, px });
    }
    wanted.sort((a, b) => a.row.size - b.row.size);
    const keys = new Set(wanted.map((w) => w.key));
    for (const running of [this.running, this.probing]) {
      for (const [key, controller] of running) {
        if (!keys.has(key)) {
          controller.abort();
          running.delete(key);
        }
      }
    }
    // First the cache, for every tile at once (a reopened share fills its screen in one go)…
    for (const want of wanted) if (!this.probed.has(want.key) && !this.probing.has(want.key)) this.probe(want);
    // …then what it did not have, a few at a time.
    this.wanted = wanted.filter((w) => this.probed.has(w.key));
    this.pump();
  }

  private probe(want: { key: string; row: EntryRow; px: number }): void {
    const { row, px, key } = want;
    if (this.probed.size === 0 && this.probing.size === 0) performance.mark('linkfs-thumbs-asked');
    const controller = new AbortController();
    this.probing.set(key, controller);
    const ask: ThumbnailAsk = { entry: row.id, name: row.name, size: row.size, mtime: row.mtime, px, cachedOnly: true };
    this.api.cachedThumbnail(ask).then(
      (url) => {
        if (this.probing.get(key) !== controller) {
          return;
        }
        this.probing.delete(key);
        this.probed.add(key);
        if (url !== null) {
          this.stats.fromCache += 1;
          this.take(key, row, url);
        } else {
          this.wanted.push(want);
          this.wanted.sort((a, b) => a.row.size - b.row.size);
          this.pump();
        }
      },
      () => {
        if (this.probing.get(key) === controller) this.probing.delete(key);
      },
    );
  }

  /** `url` (now owned here) shows `row`'s thumbnail. */
  private take(key: string, row: EntryRow, url: string): void {
    this.urls.set(key, url);
    this.stats.shown += 1;
    performance.mark('linkfs-thumb-came');
    while (this.urls.size > URL_CACHE) {
      const oldKey = this.urls.keys().next().value as string;
      this.urls.delete(oldKey);
    }
    this.ready(row.id);
  }

  private pump(): void {
    for (const want of this.wanted) {
      if (this.running.size >= MAX_RUNNING) return;
      if (this.running.has(want.key) || this.urls.has(want.key) || this.none.has(want.key)) continue;
      // One poster at a time: a media element each is heavy.
      const video = thumbnailKindOf(want.row.name, want.row.size) === 'video';
      if (video && this.posterRunning) continue;
      const controller = new AbortController();
      this.running.set(want.key, controller);
      if (video) this.posterRunning = true;
      void this.make(want, video, controller.signal).finally(() => {
        if (video) this.posterRunning = false;
        if (this.running.get(want.key) === controller) this.running.delete(want.key);
        this.wanted = this.wanted.filter((w) => w.key !== want.key);
        this.pump();
      });
    }
  }

  private async make(want: { key: string; row: EntryRow; px: number }, video: boolean, signal: AbortSignal): Promise<void> {
    const { row, px, key } = want;
    // Its cache entry was looked for already: a video's poster is made here, an image's in the worker.
    const ask: ThumbnailAsk = { entry: row.id, name: row.name, size: row.size, mtime: row.mtime, px, cachedOnly: video };
    try {
      const made = video ? { blob: null, bytesRead: 0, from: 'none' as const } : await this.api.thumbnail(ask, signal);
      let blob = made.blob;
      this.stats.bytesRead += made.bytesRead;
      if (made.from === 'cache') this.stats.fromCache += 1;
      else if (made.from === 'embedded') this.stats.embedded += 1;
      else if (made.from === 'decoded') this.stats.decoded += 1;
      if (!blob && video && controlsPage()) {
        blob = await makePoster(this.api, row, px, signal);
        if (blob) {
          this.stats.posters += 1;
          this.api.keepThumbnail(ask, blob);
        }
      }
      if (signal.aborted) return;
      if (!blob) {
        this.stats.none += 1;
        this.none.add(key);
        return;
      }
      this.take(key, row, await dataUrl(blob));
    } catch {
      if (!signal.aborted) this.failed.set(key, performance.now());
    }
  }
}

function keyOf(row: EntryRow, px: number): string {
  return `${row.id}|${row.size}|${row.mtime}|${px}`;
}

/** A frame of a video, drawn with its short side at `px`: read through the service worker as the player reads. */
async function makePoster(api: ShareApi, row: EntryRow, px: number, signal: AbortSignal): Promise<Blob | null> {
  const token = newToken();
  const channel = new MessageChannel();
  const transfer = api.transfer({ kind: 'file', id: row.id }, { kind: 'port', port: channel.port1, once: false });
  const video = document.createElement('video');
  const stop = (): void => {
    video.removeAttribute('src');
    video.load();
    unregisterServed(token);
    transfer.stop('The poster is made.');
  };
  try {
    const ready = await transfer.ready;
    await registerServed(token, { size: ready.size, name: ready.name, mime: 'video/mp4', disposition: 'inline', ranges: true, window: MEDIA_WINDOW }, channel.port2);
    video.muted = true;
    video.playsInline = true;
    video.preload = 'auto';
    video.src = servedUrl(token, row.name);
    const frame = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), POSTER_TIMEOUT_MS);
      const end = (ok: boolean): void => {
        clearTimeout(timer);
        resolve(ok);
      };
      signal.addEventListener('abort', () => end(false), { once: true });
      video.addEventListener('error', () => end(false), { once: true });
      video.addEventListener('loadedmetadata', () => {
        const at = Number.isFinite(video.duration) ? Math.min(2, video.duration / 10) : 0;
        video.currentTime = at;
      }, { once: true });
      video.addEventListener('seeked', () => end(true), { once: true });
    });
    if (!frame || video.videoWidth === 0) return null;
    const scale = Math.min(1, px / Math.min(video.videoWidth, video.videoHeight));
    const canvas = document.createElement('canvas');
    canvas.width = Math.max(1, Math.round(video.videoWidth * scale));
    canvas.height = Math.max(1, Math.round(video.videoHeight * scale));
    canvas.getContext('2d')?.drawImage(video, 0, 0, canvas.width, canvas.height);
    return await new Promise<Blob | null>((resolve) => canvas.toBlob(resolve, 'image/jpeg', 0.8));
  } catch {
    return null;
  } finally {
    stop();
  }
}

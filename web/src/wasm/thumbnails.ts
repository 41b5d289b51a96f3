// Thumbnails, made in the index worker (off the page's main thread) from the
// bytes read on demand, and kept in IndexedDB so a reopened share shows them at
// once without reading anything.
//
// How one is made:
// 1. The cache, keyed by the share, the entry, its size and modification time, and
//    the pixel size asked for. A hit reads nothing from the sharer.
// 2. A JPEG's head (32 KiB, or to the end of a longer EXIF block): where it embeds a preview in its EXIF block
//    (every camera and phone does), that preview is the thumbnail, turned as the
//    photo is. A few KiB are read, not the photo's MiBs.
// 3. Otherwise the whole image is read and decoded by `createImageBitmap`, asked for
//    the size shown (Chromium then decodes a JPEG at a fraction of its size).
// 4. Drawn on an OffscreenCanvas at the size asked (its short side `px`, its long
//    side at most three times that) and encoded small: JPEG for photos, WebP (with
//    transparency) for the rest.
//
// Video posters cannot be made here (a worker has no media element): the page
// makes them and stores them through `put`.

import type { EntryId, ThumbnailAsk as ThumbAsk, Thumbnail as ThumbMade } from '../api';
import type { RangeReader } from './entry-stream';
import { FIRST_HEAD_BYTES, headNeeds, imageFacts, turnsSideways } from './image-facts';

/** Images bigger than this get no thumbnail (the page shows their icon). */
export const THUMB_SOURCE_LIMIT = 64 * 1024 * 1024;
/** Thumbnails kept per browser, at most; the oldest go first. */
const CACHE_MAX = 20_000;
const DB_NAME = 'linkfs-thumbnails';
const STORE = 'thumbs';

/** Reads `len` bytes at `offset` of `entry` into memory. */
function readBytes(reader: RangeReader, entry: EntryId, offset: number, len: number, signal: AbortSignal): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const out = new Uint8Array(len);
    let at = 0;
    const handle = reader.start(entry, offset, len, {
      data(bytes) {
        const n = Math.min(bytes.byteLength, len - at);
        out.set(bytes.subarray(0, n), at);
        at += n;
      },
      done: () => resolve(out.subarray(0, at)),
      failed: (message) => reject(new Error(message)),
    });
    signal.addEventListener('abort', () => {
      reader.cancel(handle);
      reject(new DOMException('cancelled', 'AbortError'));
    }, { once: true });
  });
}

export class ThumbnailMaker {
  private db: Promise<IDBDatabase | null>;
  private readonly running = new Map<number, AbortController>();
  private puts = 0;

  /** `share`: a name for the share that is not its key (the cache's key prefix). */
  constructor(private readonly share: Promise<string>) {
    this.db = openDb();
  }

  private async keyOf(ask: Pick<ThumbAsk, 'entry' | 'size' | 'mtime' | 'px'>): Promise<string> {
    return `${await this.share}|${ask.entry}|${ask.size}|${ask.mtime}|${ask.px}`;
  }

  async make(id: number, ask: ThumbAsk, reader: RangeReader | null): Promise<ThumbMade> {
    const controller = new AbortController();
    this.running.set(id, controller);
    try {
      const key = await this.keyOf(ask);
      const cached = await this.get(key);
      if (cached) return { blob: cached, bytesRead: 0, from: 'cache' };
      if (ask.cachedOnly || !reader || ask.size === 0) return { blob: null, bytesRead: 0, from: 'none' };
      const made = await this.fromSource(ask, reader, controller.signal);
      if (made.blob) void this.put(key, made.blob);
      return made;
    } finally {
      this.running.delete(id);
    }
  }

  cancel(id: number): void {
    this.running.get(id)?.abort();
  }

  /** Keeps a thumbnail the page made (a video's poster). */
  async store(ask: Pick<ThumbAsk, 'entry' | 'size' | 'mtime' | 'px'>, blob: Blob): Promise<void> {
    await this.put(await this.keyOf(ask), blob);
  }

  private async fromSource(ask: ThumbAsk, reader: RangeReader, signal: AbortSignal): Promise<ThumbMade> {
    let head = await readBytes(reader, ask.entry, 0, Math.min(ask.size, FIRST_HEAD_BYTES), signal);
    // An EXIF block longer than the first read: read on to its end (one more round trip).
    const needs = headNeeds(head);
    if (needs !== null && head.length < ask.size) {
      const more = await readBytes(reader, ask.entry, head.length, Math.min(ask.size, needs) - head.length, signal);
      const joined = new Uint8Array(head.length + more.length);
      joined.set(head);
      joined.set(more, head.length);
      head = joined;
    }
    let bytesRead = head.length;
    const facts = imageFacts(head);
    const jpeg = head[0] === 0xff && head[1] === 0xd8;
    const type = jpeg ? 'image/jpeg' : 'image/webp';
    if (facts.embedded) {
      const bitmap = await createImageBitmap(new Blob([facts.embedded as BlobPart], { type: 'image/jpeg' }));
      return { blob: await draw(bitmap, ask.px, facts.orientation, type), bytesRead, from: 'embedded' };
    }
    if (ask.size > THUMB_SOURCE_LIMIT) return { blob: null, bytesRead, from: 'none' };
    let whole = head;
    if (head.length < ask.size) {
      const rest = await readBytes(reader, ask.entry, head.length, ask.size - head.length, signal);
      bytesRead += rest.length;
      whole = new Uint8Array(head.length + rest.length);
      whole.set(head);
      whole.set(rest, head.length);
    }
    const blob = new Blob([whole as BlobPart]);
    let bitmap: ImageBitmap;
    if (facts.width !== null && facts.height !== null && facts.width > 0 && facts.height > 0) {
      const [w, h] = turnsSideways(facts.orientation) ? [facts.height, facts.width] : [facts.width, facts.height];
      const size = fitted(w, h, ask.px);
      // Decoded at about the size shown; the browser applies the orientation.
      bitmap = await createImageBitmap(blob, { resizeWidth: size.w, resizeHeight: size.h, resizeQuality: 'medium' });
    } else {
      bitmap = await createImageBitmap(blob);
    }
    return { blob: await draw(bitmap, ask.px, 1, type), bytesRead, from: 'decoded' };
  }

  /** Looks `key` up; lookups asked in the same turn share one transaction (a screenful at once). */
  private get(key: string): Promise<Blob | null> {
    return new Promise((resolve) => {
      this.lookups.push({ key, resolve });
      // A timer, not a microtask: the lookups of the messages already queued join the batch.
      if (this.lookups.length === 1) setTimeout(() => void this.lookUp(), 0);
    });
  }

  private readonly lookups: { key: string; resolve: (blob: Blob | null) => void }[] = [];

  private async lookUp(): Promise<void> {
    const db = await this.db;
    const batch = this.lookups.splice(0);
    if (!db) {
      for (const l of batch) l.resolve(null);
      return;
    }
    try {
      const store = db.transaction(STORE, 'readonly').objectStore(STORE);
      for (const { key, resolve } of batch) {
        const request = store.get(key);
        request.onsuccess = () => {
          const value = request.result as { blob?: unknown } | undefined;
          resolve(value?.blob instanceof Blob ? value.blob : null);
        };
        request.onerror = () => resolve(null);
      }
    } catch {
      for (const l of batch) l.resolve(null);
    }
  }

  private async put(key: string, blob: Blob): Promise<void> {
    const db = await this.db;
    if (!db) return;
    try {
      const tx = db.transaction(STORE, 'readwrite');
      tx.objectStore(STORE).put({ blob, at: Date.now() }, key);
      this.puts += 1;
      if (this.puts % 200 === 0) trim(db);
    } catch {
      // A full or closed store: thumbnails are made again next time.
    }
  }
}

/** The pixel size a picture of w×h is drawn at: its short side `px`, its long side at most 3×px. */
function fitted(w: number, h: number, px: number): { w: number; h: number } {
  const scale = Math.min(1, px / Math.min(w, h));
  return {
    w: Math.max(1, Math.min(Math.round(w * scale), px * 3)),
    h: Math.max(1, Math.min(Math.round(h * scale), px * 3)),
  };
}

/** Draws `bitmap` turned by EXIF `orientation`, at its fitted size, and encodes it. */
async function draw(bitmap: ImageBitmap, px: number, orientation: number, type: string): Promise<Blob> {
  const sideways = turnsSideways(orientation);
  const [w, h] = sideways ? [bitmap.height, bitmap.width] : [bitmap.width, bitmap.height];
  const size = fitted(w, h, px);
  const canvas = new OffscreenCanvas(size.w, size.h);
  const context = canvas.getContext('2d');
  if (!context) throw new Error('This browser cannot draw thumbnails.');
  context.imageSmoothingQuality = 'high';
  // The EXIF orientations as canvas transforms (the stored picture → as seen).
  const W = size.w;
  const H = size.h;
  const transforms: Record<number, [number, number, number, number, number, number]> = {
    2: [-1, 0, 0, 1, W, 0],
    3: [-1, 0, 0, -1, W, H],
    4: [1, 0, 0, -1, 0, H],
    5: [0, 1, 1, 0, 0, 0],
    6: [0, 1, -1, 0, W, 0],
    7: [0, -1, -1, 0, W, H],
    8: [0, -1, 1, 0, 0, H],
  };
  const t = transforms[orientation];
  if (t) context.setTransform(...t);
  // Drawn into the stored picture's frame (its axes swapped when turned sideways).
  context.drawImage(bitmap, 0, 0, sideways ? H : W, sideways ? W : H);
  bitmap.close();
  return canvas.convertToBlob({ type, quality: 0.8 });
}

function openDb(): Promise<IDBDatabase | null> {
  return new Promise((resolve) => {
    try {
      const request = indexedDB.open(DB_NAME, 1);
      request.onupgradeneeded = () => {
        const store = request.result.createObjectStore(STORE);
        store.createIndex('at', 'at');
      };
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => resolve(null);
      request.onblocked = () => resolve(null);
    } catch {
      resolve(null);
    }
  });
}

/** Drops the oldest thumbnails beyond CACHE_MAX. */
function trim(db: IDBDatabase): void {
  const store = db.transaction(STORE, 'readwrite').objectStore(STORE);
  const count = store.count();
  count.onsuccess = () => {
    let extra = count.result - CACHE_MAX;
    if (extra <= 0) return;
    const cursor = store.index('at').openCursor();
    cursor.onsuccess = () => {
      const c = cursor.result;
      if (!c || extra <= 0) return;
      c.delete();
      extra -= 1;
      c.continue();
    };
  };
}

/** A name for the share's thumbnails that does not reveal its key: a SHA-256 of it, in hex. */
export async function shareTag(key: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(`linkfs-thumbnails:${key}`));
  return Array.from(new Uint8Array(digest).subarray(0, 16), (b) => b.toString(16).padStart(2, '0')).join('');
}

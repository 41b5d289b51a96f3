// The browser's store of thumbnails: one IndexedDB database (`linkfs-thumbnails`),
// one object store of `{bytes, type, at}` records keyed by
// `<share tag>|<entry>|<size>|<mtime>|<px>`, where the share tag is a SHA-256 of the
// link's key (never the key itself). The index worker writes (it makes the
// thumbnails); both the worker and the page read: the page asks the store directly
// for the tiles on screen, so a reopened share's first screen does not wait behind
// the worker, which is busy then bringing the index up to date.
//
// The bytes are kept, not a Blob: Chromium keeps every Blob in IndexedDB as a file
// of its own, and each one read back costs the page's main thread a round trip to
// the browser to name it as a URL and another to load it (about 2 ms a thumbnail,
// 75 ms for a desktop's first screen); bytes come inline with the record and make
// a data: URL the page decodes itself. (Records of `{blob}` written before are read too.)
//
// Lookups made in the same turn share one transaction, and are answered together
// when it completes (one task for a screenful, not one each). At most CACHE_MAX records
// are kept; the oldest go first. Any failure (no IndexedDB, a full disk, a private
// window) only means no cached thumbnail: they are made again.

import { storageTag } from './storage-tag.ts';

const DB_NAME = 'linkfs-thumbnails';
const STORE = 'thumbs';
/** Thumbnails kept per browser, at most. */
const CACHE_MAX = 20_000;
/** The store is trimmed after this many writes. */
const TRIM_EVERY = 200;

/** What names one thumbnail in the store. */
export interface ThumbKey {
  entry: number;
  size: number;
  mtime: number;
  px: number;
}

/** A name for the share's thumbnails that does not reveal its key: a SHA-256 of it, in hex. */
export function shareTag(key: string): string {
  return storageTag(key, 'linkfs-thumbnails:', 16);
}

export class ThumbStore {
  private readonly db: Promise<IDBDatabase | null> = openDb();
  private readonly lookups: { key: string; resolve: (kept: Kept | null) => void }[] = [];
  private writes = 0;

  /**
   * `batch`: how lookups are gathered into one transaction: 'turn' (the page, whose
   * lookups for a screen are asked in one go) or 'timer' (the worker, whose come in
   * one message each: those already queued join).
   */
  constructor(
    /** The share's tag, or a promise of it (the worker learns the key after it starts). */
    private readonly tag: string | Promise<string>,
    private readonly batch: 'turn' | 'timer' = 'turn',
  ) {}

  private async name(k: ThumbKey): Promise<string> {
    return `${await this.tag}|${k.entry}|${k.size}|${k.mtime}|${k.px}`;
  }

  /** The kept thumbnail, or null. */
  async get(k: ThumbKey): Promise<Blob | null> {
    const kept = await this.lookup(k);
    if (kept === null || kept instanceof Blob) return kept;
    return new Blob([kept.bytes], { type: kept.type });
  }

  /** The kept thumbnail as a data: URL, or null. */
  async url(k: ThumbKey): Promise<string | null> {
    const kept = await this.lookup(k);
    if (kept === null) return null;
    if (kept instanceof Blob) return dataUrl(kept).catch(() => null);
    return `data:${kept.type};base64,${base64(new Uint8Array(kept.bytes))}`;
  }

  private async lookup(k: ThumbKey): Promise<Kept | null> {
    const key = await this.name(k);
    return new Promise((resolve) => {
      this.lookups.push({ key, resolve });
      if (this.lookups.length !== 1) return;
      if (this.batch === 'timer') setTimeout(() => void this.lookUp(), 0);
      else queueMicrotask(() => void this.lookUp());
    });
  }

  private async lookUp(): Promise<void> {
    const db = await this.db;
    const batch = this.lookups.splice(0);
    const found: (Kept | null)[] = batch.map(() => null);
    const answer = (): void => batch.forEach((l, i) => l.resolve(found[i] ?? null));
    if (!db) {
      answer();
      return;
    }
    try {
      const tx = db.transaction(STORE, 'readonly');
      const store = tx.objectStore(STORE);
      batch.forEach(({ key }, i) => {
        const request = store.get(key);
        request.onsuccess = () => {
          found[i] = keptOf(request.result);
        };
      });
      tx.oncomplete = answer;
      tx.onerror = answer;
      tx.onabort = answer;
    } catch {
      answer();
    }
  }

  async put(k: ThumbKey, blob: Blob): Promise<void> {
    const key = await this.name(k);
    const db = await this.db;
    if (!db) return;
    try {
      const bytes = await blob.arrayBuffer();
      db.transaction(STORE, 'readwrite').objectStore(STORE).put({ bytes, type: blob.type || 'image/jpeg', at: Date.now() }, key);
      this.writes += 1;
      if (this.writes % TRIM_EVERY === 0) trim(db);
    } catch {
      // A full or closed store: thumbnails are made again next time.
    }
  }
}

/** A kept thumbnail as read back: its bytes and type, or a Blob (records written before). */
type Kept = { bytes: ArrayBuffer; type: string } | Blob;

/** The thumbnail in a stored record, if it holds one of an image type. */
function keptOf(value: unknown): Kept | null {
  if (typeof value !== 'object' || value === null) return null;
  const v = value as { bytes?: unknown; type?: unknown; blob?: unknown };
  if (v.bytes instanceof ArrayBuffer && typeof v.type === 'string' && /^image\/[a-z0-9.+-]+$/.test(v.type)) return { bytes: v.bytes, type: v.type };
  if (v.blob instanceof Blob) return v.blob;
  return null;
}

/** `blob` as a data: URL. */
export async function dataUrl(blob: Blob): Promise<string> {
  return `data:${blob.type || 'image/jpeg'};base64,${base64(new Uint8Array(await blob.arrayBuffer()))}`;
}

const BASE64 = new TextEncoder().encode('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/');

/**
 * `bytes` in base64 (for a data: URL): the browser's own `toBase64` where it has one
 * (Chromium 140+, Firefox 133+), else a table (a screenful of thumbnails is ~300 KB;
 * building a string a char at a time would cost the first screen ~10 ms).
 */
export function base64(bytes: Uint8Array): string {
  const native = (bytes as Uint8Array & { toBase64?: () => string }).toBase64;
  if (typeof native === 'function') return native.call(bytes);
  const out = new Uint8Array(Math.ceil(bytes.length / 3) * 4);
  let o = 0;
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out[o++] = BASE64[n >> 18]!;
    out[o++] = BASE64[(n >> 12) & 63]!;
    out[o++] = BASE64[(n >> 6) & 63]!;
    out[o++] = BASE64[n & 63]!;
  }
  if (i < bytes.length) {
    const two = i + 1 < bytes.length;
    const n = (bytes[i]! << 16) | ((two ? bytes[i + 1]! : 0) << 8);
    out[o++] = BASE64[n >> 18]!;
    out[o++] = BASE64[(n >> 12) & 63]!;
    out[o++] = two ? BASE64[(n >> 6) & 63]! : 61; // '='
    out[o++] = 61;
  }
  return new TextDecoder().decode(out);
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

// The browser's store of thumbnails: one IndexedDB database (`linkfs-thumbnails`),
// one object store of `{blob, at}` records keyed by
// `<share tag>|<entry>|<size>|<mtime>|<px>`, where the share tag is a SHA-256 of the
// link's key (never the key itself). The index worker writes (it makes the
// thumbnails); both the worker and the page read: the page asks the store directly
// for the tiles on screen, so a reopened share's first screen does not wait behind
// the worker, which is busy then bringing the index up to date.
//
// Lookups made in the same turn share one transaction. At most CACHE_MAX records
// are kept; the oldest go first. Any failure (no IndexedDB, a full disk, a private
// window) only means no cached thumbnail: they are made again.

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
export async function shareTag(key: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(`linkfs-thumbnails:${key}`));
  return Array.from(new Uint8Array(digest).subarray(0, 16), (b) => b.toString(16).padStart(2, '0')).join('');
}

export class ThumbStore {
  private readonly db: Promise<IDBDatabase | null> = openDb();
  private readonly lookups: { key: string; resolve: (blob: Blob | null) => void }[] = [];
  private writes = 0;

  /**
   * `batch`: how lookups are gathered into one transaction: 'turn' (the page, whose
   * lookups for a screen are asked in one go) or 'timer' (the worker, whose come in
   * one message each: those already queued join).
   */
  constructor(
    private readonly tag: Promise<string>,
    private readonly batch: 'turn' | 'timer' = 'turn',
  ) {}

  private async name(k: ThumbKey): Promise<string> {
    return `${await this.tag}|${k.entry}|${k.size}|${k.mtime}|${k.px}`;
  }

  /** The kept thumbnail, or null. */
  async get(k: ThumbKey): Promise<Blob | null> {
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

  async put(k: ThumbKey, blob: Blob): Promise<void> {
    const key = await this.name(k);
    const db = await this.db;
    if (!db) return;
    try {
      db.transaction(STORE, 'readwrite').objectStore(STORE).put({ blob, at: Date.now() }, key);
      this.writes += 1;
      if (this.writes % TRIM_EVERY === 0) trim(db);
    } catch {
      // A full or closed store: thumbnails are made again next time.
    }
  }
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

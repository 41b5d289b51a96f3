// The share this tab shares, kept across a reload (IndexedDB, this origin only): the
// sharer's key and the link's secret (`TabShare.kept()`, as private as the link
// itself), its other links (their secrets, and passwords as Argon2id hashes), the folder's name, and its handle where the browser gives one (a handle
// can be kept; a dropped folder's entries and a folder input's files cannot). After a
// reload the page offers "Go on sharing <name>": one click, as the browser asks for
// permission to read the folder again, and the link is the same.

import type { FolderRoot } from './folder-walk';

const DB = 'linkfs-tab-share';
const STORE = 'kept';
const KEY = 'share';

export interface KeptShare {
  /** `TabShare.kept()`. */
  kept: string;
  name: string;
  link: string;
  handle: FileSystemDirectoryHandle | null;
  /** `TabShare.keptLinks()`: the links besides the main one (empty: none). */
  links: string;
}

function open(): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(DB, 1);
    req.onupgradeneeded = () => req.result.createObjectStore(STORE);
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error ?? new Error('IndexedDB could not be opened'));
  });
}

async function run<T>(mode: IDBTransactionMode, f: (s: IDBObjectStore) => IDBRequest<T>): Promise<T> {
  const db = await open();
  try {
    return await new Promise<T>((resolve, reject) => {
      const req = f(db.transaction(STORE, mode).objectStore(STORE));
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error ?? new Error('IndexedDB refused the request'));
    });
  } finally {
    db.close();
  }
}

/** The share kept from before, if any (a damaged record is dropped). */
export async function keptShare(): Promise<KeptShare | null> {
  try {
    const v: unknown = await run('readonly', (s) => s.get(KEY));
    if (typeof v !== 'object' || v === null) return null;
    const r = v as Record<string, unknown>;
    if (typeof r['kept'] !== 'string' || typeof r['name'] !== 'string' || typeof r['link'] !== 'string') return null;
    const handle = r['handle'];
    return {
      kept: r['kept'],
      name: r['name'],
      link: r['link'],
      links: typeof r['links'] === 'string' ? r['links'] : '',
      handle: typeof FileSystemDirectoryHandle !== 'undefined' && handle instanceof FileSystemDirectoryHandle ? handle : null,
    };
  } catch {
    return null;
  }
}

/** Keeps the share for the next load of this page. */
export async function keepShare(kept: string, link: string, root: FolderRoot, name: string, links: string): Promise<void> {
  const handle = root.kind === 'handle' ? root.handle : root.kind === 'entry' ? root.handle : null;
  try {
    await run('readwrite', (s) => s.put({ kept, name, link, handle, links }, KEY));
  } catch {
    // Not kept: a reload then makes a new link (said in docs/tab-sharing.md).
  }
}

/** Forgets the kept share (the next share gets a new link). */
export async function forgetShare(): Promise<void> {
  try {
    await run('readwrite', (s) => s.delete(KEY));
  } catch {
    // Nothing kept.
  }
}

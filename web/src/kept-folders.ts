// What a reopened share shows before its index is open.
//
// Opening the saved index takes the worker 150-250 ms (its script, the wasm,
// IndexedDB): most of the 300 ms in which a reopened share should show its first
// screen. So the page keeps, per share, the answers that draw a folder opened by
// its address: where the path leads, the folder's breadcrumbs, and its first rows
// in the order they were asked for; and how far the index had come (so the header
// does not change shape when the index opens and says the same). They live in
// localStorage, which the page can read as it starts. Until the worker is ready,
// those questions are answered from here; once it is, the index answers
// everything again, and the view lists anew, so whatever changed since shows then.
//
// With them, the thumbnails of the first screen of the folder last shown, as
// data: URLs (`pictures`): the thumbnail cache is IndexedDB, which answers a page
// only once its first frame is done (~60-100 ms later), so a reopened grid would
// show its pictures a beat after its tiles. Kept as the page is hidden, for the
// PICTURE_SHARES shares shown last, at most PICTURES of them and PICTURE_CHARS in
// all (~400 KB) per share.
//
// - Named by a SHA-256 of the link's key, never the key (as are the index and the
//   thumbnails).
// - Bounded: at most FOLDERS folders per share, SHARES shares, ROWS rows a folder.
// - Written at most once every WRITE_EVERY_MS, and when the page is hidden or goes.
// - Forgotten when the link ends, turns out invalid, or asks for a password (a
//   password link shows nothing of itself before the password).
// - Every field is checked as it is read back: a damaged value is dropped, never
//   shown, and never stops the page.

import type { EntryId, EntryRow, IndexProgress, ListPage, SortKey } from './api.ts';
import { storageTag } from './storage-tag.ts';

/** Folders kept per share (the most recently shown). */
export const FOLDERS = 4;
/** Shares kept per browser (the most recently opened). */
export const SHARES = 10;
/** Rows kept per folder: the first page the listing asks for. */
export const ROWS = 128;
const WRITE_EVERY_MS = 2000;
const PREFIX = 'linkfs-kept:';
/** The tags of the shares kept, most recent first. */
const SHARES_KEY = 'linkfs-kept-shares';
const VERSION = 1;
/** Bounds on what is read back (longer means damaged). */
const MAX_PATH = 4096;
const MAX_CRUMBS = 256;
const MAX_NAME = 4096;
/** Shares whose first-screen thumbnails are kept (the most recently hidden). */
export const PICTURE_SHARES = 2;
/** Thumbnails kept per share, and their size in all (characters of data: URLs). */
export const PICTURES = 64;
export const PICTURE_CHARS = 512 * 1024;
const PICTURES_PREFIX = 'linkfs-kept-pictures:';
const PICTURE_SHARES_KEY = 'linkfs-kept-pictures-shares';
const PICTURE_KEY = /^\d{1,10}\|[0-9.e+-]{1,24}\|[0-9.e+-]{1,24}\|\d{1,5}$/;
const PICTURE_URL = /^data:image\/(?:jpeg|webp|png);base64,[A-Za-z0-9+/]+={0,2}$/;

interface KeptList {
  sort: SortKey;
  descending: boolean;
  total: number;
  rows: EntryRow[];
}

interface KeptFolder {
  /** The path as asked of `lookup` ('' for the top folder). */
  path: string;
  entry: EntryRow;
  crumbs: EntryRow[] | null;
  list: KeptList | null;
}

export class KeptFolders {
  /** Most recently shown first. */
  private folders: KeptFolder[];
  /** The index's progress as last told. */
  private lastProgress: IndexProgress | null;
  /** Thumbnails of the first screen last shown (thumbnail key -> data: URL). */
  private keptPictures: Map<string, string>;
  private forgotten = false;
  private writeTimer: ReturnType<typeof setTimeout> | null = null;
  private dirty = false;

  private constructor(
    private readonly tag: string,
    kept: Kept,
  ) {
    this.folders = kept.folders;
    this.lastProgress = kept.progress;
    this.keptPictures = kept.pictures;
  }

  /** This share's kept folders (none if the browser keeps nothing, or kept nothing usable). */
  static async load(key: string): Promise<KeptFolders> {
    const tag = storageTag(key, PREFIX, 16);
    let found: Kept = { folders: [], progress: null, pictures: new Map() };
    try {
      const text = localStorage.getItem(PREFIX + tag);
      if (text !== null) found = parseKept(text);
      const pictures = localStorage.getItem(PICTURES_PREFIX + tag);
      if (pictures !== null) found.pictures = parsePictures(pictures);
    } catch {
      // No storage here (a private window, a blocked origin): nothing kept.
    }
    const kept = new KeptFolders(tag, found);
    // A phone may end a hidden page without `pagehide`: hidden is the last sure moment.
    globalThis.addEventListener?.('pagehide', () => kept.write());
    globalThis.document?.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'hidden') kept.write();
    });
    return kept;
  }

  /** Whether the folder at `path` can be drawn from here. */
  canShow(path: string): boolean {
    const folder = this.folders.find((f) => f.path === path);
    return folder !== undefined && folder.crumbs !== null && folder.list !== null;
  }

  // --- answers, while the index is not open ---

  /** Thumbnails of the first screen last shown (thumbnail key -> data: URL). */
  get pictures(): ReadonlyMap<string, string> {
    return this.keptPictures;
  }

  /** How far the index had come, as last told. */
  get progress(): IndexProgress | null {
    return this.lastProgress;
  }

  lookup(path: string): EntryRow | undefined {
    return this.folders.find((f) => f.path === path && f.crumbs !== null && f.list !== null)?.entry;
  }

  path(id: EntryId): EntryRow[] | undefined {
    return this.byDir(id)?.crumbs ?? undefined;
  }

  list(dir: EntryId, sort: SortKey, descending: boolean, start: number, count: number): ListPage | undefined {
    const list = this.byDir(dir)?.list;
    if (!list || start !== 0 || list.sort !== sort || list.descending !== descending) return undefined;
    // Fewer kept than asked, and more there: the index must answer.
    if (count > list.rows.length && list.total > list.rows.length) return undefined;
    return { dir, total: list.total, start: 0, rows: list.rows.slice(0, count) };
  }

  // --- what the index answered, kept ---

  /** `lookup(path)` answered `entry`. */
  lookedUp(path: string, entry: EntryRow | null): void {
    if (this.forgotten) return;
    const at = this.folders.findIndex((f) => f.path === path);
    const old = at >= 0 ? this.folders.splice(at, 1)[0] : undefined;
    if (entry?.kind === 'dir') {
      const same = old !== undefined && old.entry.id === entry.id;
      this.folders.unshift({ path, entry, crumbs: same ? old.crumbs : null, list: same ? old.list : null });
      this.folders.length = Math.min(this.folders.length, FOLDERS);
    }
    this.changed();
  }

  /** `path(id)` answered `crumbs`. */
  pathOf(id: EntryId, crumbs: EntryRow[]): void {
    const folder = this.byDir(id);
    if (!folder || this.forgotten) return;
    if (!leadsTo(folder.path, crumbs)) {
      // Renamed or moved: its old path no longer leads here.
      this.folders = this.folders.filter((f) => f !== folder);
    } else {
      folder.crumbs = crumbs.slice(0, MAX_CRUMBS);
    }
    this.changed();
  }

  /** `list(…, start 0, …)` answered `page` (kept if it holds a whole first page, or the whole folder). */
  listed(page: ListPage, sort: SortKey, descending: boolean): void {
    const folder = this.byDir(page.dir);
    if (!folder || this.forgotten || page.start !== 0 || page.rows.length < Math.min(ROWS, page.total)) return;
    folder.list = { sort, descending, total: page.total, rows: page.rows.slice(0, ROWS) };
    this.changed();
  }

  /** The index's progress is now `progress`. */
  progressed(progress: IndexProgress): void {
    if (this.forgotten) return;
    const { received, announced, complete, persisted, fromCache, loadingCache } = progress;
    const shapeChanged = this.lastProgress?.complete !== complete;
    this.lastProgress = { received, announced, complete, persisted, fromCache, loadingCache };
    // Only whether it is complete changes the header: counts alone wait for the next write.
    if (shapeChanged) this.changed();
  }

  /**
   * Keeps `pictures` (the thumbnails of the first screen shown now) for the next
   * visit, within the bounds; written at once (the page is being hidden).
   */
  keepPictures(pictures: ReadonlyMap<string, string>): void {
    if (this.forgotten) return;
    const kept = new Map<string, string>();
    let chars = 0;
    for (const [key, url] of pictures) {
      if (kept.size >= PICTURES || chars + url.length > PICTURE_CHARS) break;
      if (!PICTURE_KEY.test(key) || !PICTURE_URL.test(url)) continue;
      kept.set(key, url);
      chars += url.length;
    }
    this.keptPictures = kept;
    try {
      const others = readTags(PICTURE_SHARES_KEY).filter((t) => t !== this.tag);
      if (kept.size === 0) {
        localStorage.removeItem(PICTURES_PREFIX + this.tag);
        localStorage.setItem(PICTURE_SHARES_KEY, JSON.stringify(others));
        return;
      }
      const tags = [this.tag, ...others];
      for (const old of tags.splice(PICTURE_SHARES)) localStorage.removeItem(PICTURES_PREFIX + old);
      localStorage.setItem(PICTURE_SHARES_KEY, JSON.stringify(tags));
      localStorage.setItem(PICTURES_PREFIX + this.tag, JSON.stringify([...kept]));
    } catch {
      // Storage full or refused: none kept (a half-written value would only be dropped).
      try {
        localStorage.removeItem(PICTURES_PREFIX + this.tag);
      } catch {
        // Nothing to do.
      }
    }
  }

  /** Drops what is kept of this share, and keeps nothing more of this visit. */
  forget(): void {
    this.forgotten = true;
    this.folders = [];
    this.keptPictures = new Map();
    if (this.writeTimer !== null) clearTimeout(this.writeTimer);
    this.writeTimer = null;
    try {
      localStorage.removeItem(PREFIX + this.tag);
      localStorage.removeItem(PICTURES_PREFIX + this.tag);
      for (const key of [SHARES_KEY, PICTURE_SHARES_KEY]) {
        const tags = readTags(key);
        if (tags.includes(this.tag)) localStorage.setItem(key, JSON.stringify(tags.filter((t) => t !== this.tag)));
      }
    } catch {
      // Nothing could be stored either.
    }
  }

  /** Writes what changed now (the page is going away). */
  write(): void {
    if (this.writeTimer !== null) clearTimeout(this.writeTimer);
    this.writeTimer = null;
    if (!this.dirty || this.forgotten) return;
    this.dirty = false;
    const complete = this.folders.filter((f) => f.crumbs !== null && f.list !== null);
    try {
      const shares = [this.tag, ...readShares().filter((t) => t !== this.tag)];
      for (const old of shares.splice(SHARES)) localStorage.removeItem(PREFIX + old);
      writeShares(shares);
      localStorage.setItem(PREFIX + this.tag, JSON.stringify({ v: VERSION, progress: this.lastProgress, folders: complete }));
    } catch {
      // Storage full or refused: the next reopen waits for the index, as without this.
    }
  }

  private byDir(id: EntryId): KeptFolder | undefined {
    return this.folders.find((f) => f.entry.id === id);
  }

  private changed(): void {
    this.dirty = true;
    if (this.writeTimer === null) this.writeTimer = setTimeout(() => this.write(), WRITE_EVERY_MS);
  }
}

/** Whether `path` (as looked up) names the folder at the end of `crumbs` (root first). */
function leadsTo(path: string, crumbs: EntryRow[]): boolean {
  return crumbs.slice(1).map((c) => c.name).join('/') === path;
}

function readShares(): string[] {
  return readTags(SHARES_KEY);
}

/** The share tags listed under `key`, most recent first. */
function readTags(key: string): string[] {
  try {
    const value: unknown = JSON.parse(localStorage.getItem(key) ?? '[]');
    return Array.isArray(value) ? value.filter((t): t is string => typeof t === 'string' && /^[0-9a-f]{32}$/.test(t)) : [];
  } catch {
    return [];
  }
}

function writeShares(tags: string[]): void {
  localStorage.setItem(SHARES_KEY, JSON.stringify(tags));
}

interface Kept {
  folders: KeptFolder[];
  progress: IndexProgress | null;
  pictures: Map<string, string>;
}

/** Kept thumbnails in `text`: pairs of a thumbnail key and a data: URL of an image; bounded; anything else is dropped. */
export function parsePictures(text: string): Map<string, string> {
  const out = new Map<string, string>();
  if (text.length > PICTURE_CHARS + PICTURES * 64) return out;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return out;
  }
  if (!Array.isArray(value)) return out;
  for (const pair of value.slice(0, PICTURES)) {
    if (!Array.isArray(pair) || pair.length !== 2) continue;
    const [key, url] = pair as unknown[];
    if (typeof key === 'string' && typeof url === 'string' && PICTURE_KEY.test(key) && PICTURE_URL.test(url)) out.set(key, url);
  }
  return out;
}

/** What is kept in `text`, each part checked; what does not check out is dropped. */
export function parseKept(text: string): Kept {
  const none: Kept = { folders: [], progress: null, pictures: new Map() };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return none;
  }
  if (!isObject(value) || value['v'] !== VERSION || !Array.isArray(value['folders'])) return none;
  const folders: KeptFolder[] = [];
  for (const f of value['folders'].slice(0, FOLDERS)) {
    const folder = checkFolder(f);
    if (folder) folders.push(folder);
  }
  return { folders, progress: checkProgress(value['progress']), pictures: new Map() };
}

function checkProgress(p: unknown): IndexProgress | null {
  if (!isObject(p)) return null;
  const { received, announced, complete, persisted, fromCache, loadingCache } = p;
  if (!isCount(received) || !isCount(announced) || !isCount(persisted) || !isCount(fromCache)) return null;
  if (typeof complete !== 'boolean' || typeof loadingCache !== 'boolean') return null;
  return { received, announced, complete, persisted, fromCache, loadingCache };
}

function checkFolder(f: unknown): KeptFolder | null {
  if (!isObject(f) || typeof f['path'] !== 'string' || f['path'].length > MAX_PATH) return null;
  const entry = checkRow(f['entry']);
  if (!entry || entry.kind !== 'dir') return null;
  const crumbs = checkRows(f['crumbs'], MAX_CRUMBS);
  // The breadcrumbs end in the folder itself, and spell its path.
  if (!crumbs || crumbs.length === 0 || crumbs[crumbs.length - 1]!.id !== entry.id || !leadsTo(f['path'], crumbs)) return null;
  const list = f['list'];
  if (!isObject(list)) return null;
  const sort = list['sort'];
  if (sort !== 'name' && sort !== 'size' && sort !== 'mtime' && sort !== 'kind') return null;
  if (typeof list['descending'] !== 'boolean' || !isCount(list['total'])) return null;
  const rows = checkRows(list['rows'], ROWS);
  if (!rows || rows.length > list['total'] || rows.some((r) => r.parent !== entry.id)) return null;
  return { path: f['path'], entry, crumbs, list: { sort, descending: list['descending'], total: list['total'], rows } };
}

function checkRows(value: unknown, max: number): EntryRow[] | null {
  if (!Array.isArray(value) || value.length > max) return null;
  const rows: EntryRow[] = [];
  for (const v of value) {
    const row = checkRow(v);
    if (!row) return null;
    rows.push(row);
  }
  return rows;
}

function checkRow(v: unknown): EntryRow | null {
  if (!isObject(v)) return null;
  const { id, parent, name, kind, size, mtime, mode, target, children } = v;
  if (!isId(id) || !isId(parent) || typeof name !== 'string' || name.length > MAX_NAME) return null;
  if (kind !== 'file' && kind !== 'dir' && kind !== 'symlink') return null;
  if (!isCount(size) || typeof mtime !== 'number' || !Number.isFinite(mtime) || !isId(mode)) return null;
  const row: EntryRow = { id: id as EntryId, parent: parent as EntryId, name, kind, size, mtime, mode };
  if (target !== undefined) {
    if (typeof target !== 'string' || target.length > MAX_PATH) return null;
    row.target = target;
  }
  if (children !== undefined) {
    if (!isId(children)) return null;
    row.children = children;
  }
  return row;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isId(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0xffff_ffff;
}

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= Number.MAX_SAFE_INTEGER;
}

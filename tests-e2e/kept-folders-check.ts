// What the page keeps of a share's folders (web/src/kept-folders.ts), checked in
// Node: answers kept are answered back exactly and only for the question asked;
// the bounds hold (folders per share, shares per browser, thumbnails kept); only
// data: URLs of images are kept as thumbnails; a forgotten share keeps nothing;
// and every truncation and 20,000 random corruptions of a stored value
// read back without throwing, as nothing or as folders that hold together (a
// damaged value is never shown half-right). The storage names are SHA-256, checked
// against Node's.
//
// Node has no localStorage: a Map-backed stand-in of its four methods (named
// `StandInStorage`) takes its place. Everything else is the page's own code.
//
//   node_modules/.bin/tsx tests-e2e/kept-folders-check.ts

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import type { EntryId, EntryRow, IndexProgress, ListPage } from '../web/src/api.ts';
import { storageTag } from '../web/src/storage-tag.ts';
import { formatFullTime, formatTime } from '../web/src/ui/format.ts';
import { FOLDERS, KeptFolders, parseKept, parsePictures, PICTURE_CHARS, PICTURE_SHARES, PICTURES, ROWS, SHARES } from '../web/src/kept-folders.ts';

/** A stand-in for the browser's localStorage (Node has none). */
class StandInStorage {
  readonly map = new Map<string, string>();
  getItem(k: string): string | null {
    return this.map.get(k) ?? null;
  }
  setItem(k: string, v: string): void {
    this.map.set(k, String(v));
  }
  removeItem(k: string): void {
    this.map.delete(k);
  }
  keys(prefix: string): string[] {
    return [...this.map.keys()].filter((k) => k.startsWith(prefix) && k !== 'linkfs-kept-shares');
  }
}
const storage = new StandInStorage();
(globalThis as unknown as { localStorage: StandInStorage }).localStorage = storage;

let failures = 0;
function check(ok: boolean, what: string): void {
  if (!ok) {
    failures += 1;
    console.log(`FAIL ${what}`);
  }
}

const id = (n: number) => n as EntryId;
function row(n: number, parent: number, name: string, kind: EntryRow['kind'] = 'file'): EntryRow {
  const r: EntryRow = { id: id(n), parent: id(parent), name, kind, size: kind === 'file' ? n * 1000 : 0, mtime: 1_700_000_000 + n, mode: 0o644 };
  if (kind === 'dir') r.children = 3;
  return r;
}
const root = row(0, 0, 'photos', 'dir');
const sub = row(1, 0, 'trip', 'dir');
const files = Array.from({ length: 200 }, (_, i) => row(10 + i, 1, `img-${String(i).padStart(4, '0')}.jpg`));
const page = (dir: EntryId, rows: EntryRow[], total: number): ListPage => ({ dir, total, start: 0, rows });
const progress: IndexProgress = { received: 202, announced: 202, complete: true, persisted: 202, fromCache: 0, loadingCache: false };

/** Records what a visit to `trip/` asks and the index answers, then writes. */
async function visit(key: string): Promise<KeptFolders> {
  const kept = await KeptFolders.load(key);
  kept.lookedUp('trip', sub);
  kept.pathOf(sub.id, [root, sub]);
  kept.listed(page(sub.id, files.slice(0, ROWS), files.length), 'name', false);
  kept.progressed(progress);
  kept.write();
  return kept;
}

// Kept, then answered back exactly, and only for the question asked.
await visit('room1.secret-one-aaaaaaaaaaaaaa');
const again = await KeptFolders.load('room1.secret-one-aaaaaaaaaaaaaa');
check(again.canShow('trip'), 'a folder kept with its path, breadcrumbs and rows can be shown');
check(!again.canShow(''), 'a folder never opened by its address (the top) is not kept');
assert.deepEqual(again.lookup('trip'), sub);
assert.deepEqual(again.path(sub.id), [root, sub]);
const first = again.list(sub.id, 'name', false, 0, ROWS);
check(first !== undefined && first.total === 200 && first.rows.length === ROWS && first.rows[5]!.name === 'img-0005.jpg', `the first rows come back as kept: ${JSON.stringify(first?.rows.slice(0, 1))}`);
check(again.list(sub.id, 'size', false, 0, ROWS) === undefined, 'rows kept in name order answered a question in size order');
check(again.list(sub.id, 'name', true, 0, ROWS) === undefined, 'rows kept ascending answered a question descending');
check(again.list(sub.id, 'name', false, ROWS, ROWS) === undefined, 'rows past the first page were answered (none are kept)');
check(again.list(sub.id, 'name', false, 0, ROWS + 10) === undefined, 'more rows asked than kept (and more there) were answered short');
check(again.list(root.id, 'name', false, 0, ROWS) === undefined, 'another folder was answered');
assert.deepEqual(again.progress, progress);
// Another share's key sees nothing of it.
check(!(await KeptFolders.load('room2.secret-two-bbbbbbbbbbbbbb')).canShow('trip'), "another share's page sees this share's folder");
// The key itself is never stored.
check(![...storage.map.entries()].some(([k, v]) => k.includes('secret-one') || v.includes('secret-one')), 'the link key was stored');

// A short answer from the first row (the preview's neighbour, a selection) does not
// replace the kept first page (regression: one row was kept of 200, and the next
// visit drew breadcrumbs and no rows).
{
  const k = await KeptFolders.load('room1.secret-one-aaaaaaaaaaaaaa');
  k.lookedUp('trip', sub);
  k.listed(page(sub.id, files.slice(0, 1), files.length), 'name', false);
  k.write();
  const back = await KeptFolders.load('room1.secret-one-aaaaaaaaaaaaaa');
  check(back.list(sub.id, 'name', false, 0, ROWS)?.rows.length === ROWS, 'a one-row answer replaced the kept first page');
}

// Renamed: the kept path no longer leads to the folder, so it is dropped (regression:
// the old link drew the folder under its new name, then said it is not in the share).
{
  const k = await visit('room5.secret-five-hhhhhhhhhhhh');
  k.pathOf(sub.id, [root, { ...sub, name: 'trip-2024' }]);
  k.write();
  check(!(await KeptFolders.load('room5.secret-five-hhhhhhhhhhhh')).canShow('trip'), 'a renamed folder is still drawn for its old path');
  const stored = JSON.parse(storage.map.get(storage.keys('linkfs-kept:').find((key) => storage.map.get(key)!.includes('img-0000'))!)!) as { v: number; folders: { crumbs: EntryRow[] }[] };
  stored.folders[0]!.crumbs[1]!.name = 'elsewhere';
  check(parseKept(JSON.stringify(stored)).folders.length === 0, 'a kept folder whose breadcrumbs spell another path was read back');
}

// A folder looked up again as something else (a file now) is dropped.
{
  const k = await KeptFolders.load('room1.secret-one-aaaaaaaaaaaaaa');
  k.lookedUp('trip', row(1, 0, 'trip', 'file'));
  k.write();
  check(!(await KeptFolders.load('room1.secret-one-aaaaaaaaaaaaaa')).canShow('trip'), 'a path that now names a file still shows the folder kept');
}

// At most FOLDERS folders per share: the most recently shown.
{
  const k = await KeptFolders.load('room3.secret-three-cccccccccccc');
  for (let i = 0; i < FOLDERS + 3; i += 1) {
    const dir = row(1000 + i, 0, `d${i}`, 'dir');
    k.lookedUp(`d${i}`, dir);
    k.pathOf(dir.id, [root, dir]);
    k.listed(page(dir.id, [row(5000 + i, 1000 + i, 'x.jpg')], 1), 'name', false);
  }
  k.write();
  const stored = [...storage.map.values()].find((v) => v.includes('"d6"'));
  check(stored !== undefined && (JSON.parse(stored) as { folders: unknown[] }).folders.length === FOLDERS, `more than ${FOLDERS} folders of a share were stored`);
  const back = await KeptFolders.load('room3.secret-three-cccccccccccc');
  const shown = Array.from({ length: FOLDERS + 3 }, (_, i) => back.canShow(`d${i}`));
  check(shown.filter(Boolean).length === FOLDERS && shown.slice(3).every(Boolean), `kept folders: ${JSON.stringify(shown)} (expected the last ${FOLDERS})`);
}

// At most SHARES shares: the most recently written; the oldest go.
{
  for (let i = 0; i < SHARES + 4; i += 1) await visit(`many${i}.secret-many-dddddddddddd${String(i).padStart(2, '0')}`);
  check(storage.keys('linkfs-kept:').length === SHARES, `${storage.keys('linkfs-kept:').length} shares kept (at most ${SHARES})`);
  check(!(await KeptFolders.load('many0.secret-many-dddddddddddd00')).canShow('trip'), 'the oldest share is still kept past the bound');
  check((await KeptFolders.load(`many${SHARES + 3}.secret-many-dddddddddddd${SHARES + 3}`)).canShow('trip'), 'the newest share was not kept');
}

// Forgotten (the link ended, or asks for a password): nothing left, nothing kept after.
{
  const k = await visit('room4.secret-four-eeeeeeeeeeee');
  const before = storage.keys('linkfs-kept:').length;
  k.forget();
  check(storage.keys('linkfs-kept:').length === before - 1, 'forget() left the share in storage');
  k.lookedUp('trip', sub);
  k.pathOf(sub.id, [root, sub]);
  k.listed(page(sub.id, files.slice(0, 3), 200), 'name', false);
  k.write();
  check(!(await KeptFolders.load('room4.secret-four-eeeeeeeeeeee')).canShow('trip'), 'a forgotten share kept what came after');
}

// The first screen's thumbnails: kept and read back; bounded in count, size and
// shares; only data: URLs of images under well-formed keys.
{
  const url = (n: number, len = 1000) => `data:image/jpeg;base64,${'A'.repeat(len - 24 - String(n).length)}${n}`;
  const key = (n: number) => `${n}|${n * 1000}|1700000000|320`;
  const k = await visit('pics1.secret-pics-ffffffffffff');
  const many = new Map(Array.from({ length: PICTURES + 20 }, (_, i) => [key(i), url(i)] as const));
  many.set('1|2|3|320', 'javascript:alert(1)');
  many.set('2|2|3|320', 'data:text/html;base64,PGgxPg==');
  many.set('../x', url(7));
  k.keepPictures(many);
  const back = (await KeptFolders.load('pics1.secret-pics-ffffffffffff')).pictures;
  check(back.size === PICTURES, `${back.size} thumbnails kept (at most ${PICTURES})`);
  check(back.get(key(3)) === url(3), 'a kept thumbnail came back different');
  check([...back.values()].every((u) => u.startsWith('data:image/jpeg;base64,')), 'something other than a data: URL of an image was kept');
  check(![...back.keys()].includes('../x'), 'a malformed key was kept');
  // Big ones: no more than PICTURE_CHARS in all.
  k.keepPictures(new Map(Array.from({ length: 20 }, (_, i) => [key(i), url(i, 100_000)] as const)));
  const big = (await KeptFolders.load('pics1.secret-pics-ffffffffffff')).pictures;
  const chars = [...big.values()].reduce((n, u) => n + u.length, 0);
  check(chars <= PICTURE_CHARS && big.size === Math.floor(PICTURE_CHARS / 100_000), `${big.size} thumbnails of ${chars} characters kept (at most ${PICTURE_CHARS})`);
  // At most PICTURE_SHARES shares keep thumbnails: the most recently hidden.
  for (let i = 0; i < PICTURE_SHARES + 2; i += 1) (await visit(`pics${i + 2}.secret-pics-gggggggggggg`)).keepPictures(new Map([[key(1), url(1)]]));
  const withPictures = storage.keys('linkfs-kept-pictures:').filter((k2) => k2 !== 'linkfs-kept-pictures-shares');
  check(withPictures.length === PICTURE_SHARES, `${withPictures.length} shares keep thumbnails (at most ${PICTURE_SHARES})`);
  check((await KeptFolders.load('pics1.secret-pics-ffffffffffff')).pictures.size === 0, 'the share hidden longest ago still keeps its thumbnails');
  // Forgotten: the thumbnails go too.
  const last = await KeptFolders.load(`pics${PICTURE_SHARES + 3}.secret-pics-gggggggggggg`);
  check(last.pictures.size === 1, 'the share hidden last lost its thumbnails');
  last.forget();
  check((await KeptFolders.load(`pics${PICTURE_SHARES + 3}.secret-pics-gggggggggggg`)).pictures.size === 0, 'a forgotten share kept its thumbnails');
  // Damaged: never throws, keeps only well-formed pairs.
  const text = JSON.stringify([[key(1), url(1)], [key(2), url(2)]]);
  for (let n = 0; n < text.length; n += 1) check(parsePictures(text.slice(0, n)).size <= 2, 'a truncated value gave more thumbnails than it held');
  check(parsePictures('{"a":1}').size === 0 && parsePictures('[[1,2],["x"]]').size === 0 && parsePictures('not json').size === 0, 'a damaged value gave thumbnails');
}

// Damaged values: every truncation and 20,000 random corruptions read back without
// throwing, as folders that hold together or as nothing.
const stored = storage.map.get(storage.keys('linkfs-kept:').find((k) => storage.map.get(k)!.includes('img-0001'))!)!;
function holdsTogether(text: string): boolean {
  const { folders, progress: p } = parseKept(text);
  for (const f of folders) {
    if (f.entry.kind !== 'dir' || !f.crumbs || f.crumbs.at(-1)!.id !== f.entry.id || !f.list) return false;
    if (f.list.rows.length > f.list.total || f.list.rows.some((r) => r.parent !== f.entry.id)) return false;
  }
  return p === null || (Number.isInteger(p.received) && typeof p.complete === 'boolean');
}
check(parseKept(stored).folders.length === 1, 'the stored value itself does not read back');
let truncations = 0;
for (let n = 0; n < stored.length; n += 1) {
  try {
    check(holdsTogether(stored.slice(0, n)), `truncated at ${n}: read back folders that do not hold together`);
    truncations += 1;
  } catch (error) {
    check(false, `truncated at ${n}: threw ${String(error)}`);
  }
}
let seed = 7;
const random = (n: number) => {
  seed = (seed * 1103515245 + 12345) % 2 ** 31;
  return seed % n;
};
const swaps = ['"', '{', '}', '[', ']', ',', ':', '0', '-1', '1e309', 'null', 'true', '"dir"', '"file"', '4294967296', 'x'];
let corrupted = 0;
for (let i = 0; i < 20_000; i += 1) {
  let text = stored;
  for (let j = 0, n = 1 + random(3); j < n; j += 1) {
    const at = random(text.length);
    text = text.slice(0, at) + swaps[random(swaps.length)]! + text.slice(at + 1 + random(3));
  }
  try {
    check(holdsTogether(text), `corruption ${i}: read back folders that do not hold together`);
    corrupted += 1;
  } catch (error) {
    check(false, `corruption ${i}: threw ${String(error)}`);
  }
}
// Each field made wrong drops the folder.
const whole = JSON.parse(stored) as { v: number; folders: Record<string, unknown>[] };
const wrongs: [string, (f: Record<string, unknown>) => void][] = [
  ['an entry that is a file', (f) => ((f['entry'] as Record<string, unknown>)['kind'] = 'file')],
  ['breadcrumbs ending elsewhere', (f) => (f['crumbs'] as unknown[]).pop()],
  ['a row of another folder', (f) => (((f['list'] as Record<string, unknown[]>)['rows']![0] as Record<string, unknown>)['parent'] = 999)],
  ['more rows than the total', (f) => ((f['list'] as Record<string, unknown>)['total'] = 1)],
  ['a negative size', (f) => (((f['list'] as Record<string, unknown[]>)['rows']![0] as Record<string, unknown>)['size'] = -5)],
  ['an id past 32 bits', (f) => ((f['entry'] as Record<string, unknown>)['id'] = 2 ** 33)],
  ['an unknown order', (f) => ((f['list'] as Record<string, unknown>)['sort'] = 'colour')],
  ['a path that is not text', (f) => (f['path'] = 5)],
  ['a path its breadcrumbs do not spell', (f) => (f['path'] = 'elsewhere')],
];
for (const [what, spoil] of wrongs) {
  const copy = structuredClone(whole);
  spoil(copy.folders[0]!);
  check(parseKept(JSON.stringify(copy)).folders.length === 0, `a kept folder with ${what} was read back`);
}
check(parseKept(JSON.stringify({ ...whole, v: 2 })).folders.length === 0, 'a value of another version was read back');

// The names under which the page keeps things are the SHA-256 they were when the page
// used crypto.subtle (now @noble/hashes, which plain http allows): what browsers kept
// before is still found. Node's own SHA-256 is the reference.
for (const [key, purpose, bytes] of [['room.secret', '', 32], ['ROOM-ü.sëcret✓', 'linkfs-kept:', 16], ['r.s', 'linkfs-thumbnails:', 16], ['', '', 32]] as const) {
  const want = createHash('sha256').update(`${purpose}${key}`, 'utf8').digest('hex').slice(0, bytes * 2);
  check(storageTag(key, purpose, bytes) === want, `storageTag(${JSON.stringify(key)}, ${JSON.stringify(purpose)}, ${bytes}) is ${storageTag(key, purpose, bytes)}, not the SHA-256 ${want}`);
}

// A kept row (or one from the sharer) with a time past what a Date holds: the listing
// formats it as unknown; before, formatting threw and the folder drew nothing.
for (const seconds of [9e12, 1e300, Number.MAX_SAFE_INTEGER, 2 ** 63, -1, 0, Number.NaN]) {
  let shown = '';
  try {
    shown = `${formatTime(seconds)} / ${formatFullTime(seconds)}`;
  } catch (error) {
    shown = `threw ${String(error)}`;
  }
  check(shown === '— / unknown', `a time of ${seconds} s formats as ${shown}`);
}
check(formatTime(1_700_000_000) !== '—', 'a time of 2023 formats as unknown');

console.log(JSON.stringify({ truncations, corruptions: corrupted, failures }));
if (failures > 0) process.exit(1);

// The page's whole index compared with the folder on disk one folder at a time, so
// that neither side is ever held whole: at ten million entries the walk of the
// expected side alone (tests-e2e/lib/tree.ts) ran Node out of its 4 GB heap.
//
// Depth first from the root: a folder's children are read from disk (readdir, lstat
// each, never following symlinks) and from the page (`list(dir, 'name', …)` in
// windows of `window` rows, each window one page call), matched by name, and every
// difference reported as in verify.ts (path, field, expected, got). The folders
// under it follow, each with the id the page gave it. What is held at once: the
// children of the folders on the current path (a folder of a million names is held
// while it is compared), the ids of the folders seen (a folder reached twice is a
// mismatch), and the first `keep` mismatches (all are counted).
//
// Along the way it collects what the scale test needs without a second walk: entry
// counts, each folder's size (the biggest and the smallest non-empty one), a seeded
// sample of files spread over the tree, and the first small files, with their page ids.

import { lstat, readdir, readlink } from 'node:fs/promises';
import type { Page } from 'playwright-core';
import type { EntryId, EntryKind } from './page-api.ts';
import { mtimeSeconds } from './tree.ts';
import type { Mismatch } from './verify.ts';

const utf8 = new TextDecoder('utf-8'); // not fatal: invalid bytes become U+FFFD, as in the page

/** A file met on both sides. */
export interface MatchedFile {
  path: string;
  id: number;
  size: number;
}

export interface StreamCompareReport {
  /** Entries under the root on disk (the root not included). */
  entries: number;
  files: number;
  dirs: number;
  symlinks: number;
  /** Entries that are neither file, folder nor symlink (the share does not list them). */
  others: number;
  mismatchCount: number;
  /** The first `keep` mismatches. */
  mismatches: Mismatch[];
  /** The folder with the most children, and one with the fewest (at least one). */
  biggest: { path: string; children: number; id: number };
  smallest: { path: string; children: number; id: number; firstChild: string };
  /** A name in the biggest folder, about 61% of the way through its sorted names. */
  bigProbe: string;
  /** Files met on both sides: `sample` spread over the tree (reservoir, seeded)... */
  sample: MatchedFile[];
  /** ...and the first `smallFiles` of 1 to 4,096 bytes. */
  small: MatchedFile[];
}

export interface StreamCompareOptions {
  /** Rows per page call. */
  window?: number;
  keep?: number;
  sample?: number;
  smallFiles?: number;
  /** Called every 100,000 entries compared. */
  progress?: (entries: number) => void;
}

interface LocalChild {
  name: string;
  raw: Buffer;
  kind: EntryKind | 'other';
  size: number;
  mtime: number;
  mode: number;
  target?: string;
}

interface RemoteRow {
  id: number;
  name: string;
  kind: EntryKind;
  size: number;
  mtime: number;
  mode: number;
  target?: string;
}

/** lstat calls in flight at once (one at a time, a million took most of the comparison). */
const STATS_AT_ONCE = 64;

/** One child on disk. */
async function localChild(dir: Buffer, name: Buffer): Promise<LocalChild> {
  const full = Buffer.concat([dir, Buffer.from('/'), name]);
  const st = await lstat(full, { bigint: true });
  const common = { name: utf8.decode(name), raw: full, size: Number(st.size), mtime: mtimeSeconds(st), mode: Number(st.mode & 0o7777n) };
  if (st.isSymbolicLink()) return { ...common, kind: 'symlink', target: utf8.decode(await readlink(full, { encoding: 'buffer' })) };
  if (st.isDirectory()) return { ...common, kind: 'dir' };
  if (st.isFile()) return { ...common, kind: 'file' };
  return { ...common, kind: 'other' };
}

/** One folder's children on disk. */
async function localChildren(raw: Buffer): Promise<LocalChild[]> {
  const names = await readdir(raw, { encoding: 'buffer' });
  const out: LocalChild[] = new Array(names.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < names.length) {
      const i = next++;
      out[i] = await localChild(raw, names[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(STATS_AT_ONCE, names.length) }, worker));
  return out;
}

type WireRow = [number, string, EntryKind, number, number, number, string | null];

/** A window the page has not answered in this long is a hang, reported with the page's state. */
const LIST_TIMEOUT_MS = 60_000;

/**
 * A window of one folder's rows from the page, with its total and start as listed.
 * Rows cross as one JSON string of arrays: Playwright's own serialization of a
 * value made a million rows take two minutes.
 */
async function remoteWindow(page: Page, dir: number, start: number, count: number): Promise<{ total: number; start: number; rows: RemoteRow[] }> {
  const text = await page.evaluate(
    async ({ dir, start, count, timeoutMs }) => {
      const share = window.linkfsShare!;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const stats = window.linkfsStats?.() ?? null;
          reject(new Error(`the page did not list folder ${dir} (rows ${start}..) within ${timeoutMs / 1000} s; status ${JSON.stringify(share.status())}, progress ${JSON.stringify(share.progress())}, stats ${JSON.stringify(stats)}`));
        }, timeoutMs);
      });
      try {
        const p = await Promise.race([share.list(dir as EntryId, 'name', false, start, count), late]);
        return JSON.stringify({ total: p.total, start: p.start, rows: p.rows.map((r) => [r.id, r.name, r.kind, r.size, r.mtime, r.mode, r.target ?? null]) });
      } finally {
        clearTimeout(timer);
      }
    },
    { dir, start, count, timeoutMs: LIST_TIMEOUT_MS },
  );
  const w = JSON.parse(text) as { total: number; start: number; rows: WireRow[] };
  return {
    total: w.total,
    start: w.start,
    rows: w.rows.map(([id, name, kind, size, mtime, mode, target]) => {
      const row: RemoteRow = { id, name, kind, size, mtime, mode };
      if (target !== null) row.target = target;
      return row;
    }),
  };
}

/** A small seeded generator (mulberry32), so the sample is the same run to run. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Compares the page's index under its root with the folder `root` on disk. */
export async function compareStreamed(page: Page, root: string, options: StreamCompareOptions = {}): Promise<StreamCompareReport> {
  const windowRows = options.window ?? 5000;
  const keep = options.keep ?? 50;
  const sampleSize = options.sample ?? 20;
  const smallWanted = options.smallFiles ?? 200;
  const random = seeded(20261127);
  const rootId = await page.evaluate(() => window.linkfsShare!.rootId as number);

  const report: StreamCompareReport = {
    entries: 0,
    files: 0,
    dirs: 0,
    symlinks: 0,
    others: 0,
    mismatchCount: 0,
    mismatches: [],
    biggest: { path: '', children: -1, id: rootId },
    smallest: { path: '', children: Number.POSITIVE_INFINITY, id: rootId, firstChild: '' },
    bigProbe: '',
    sample: [],
    small: [],
  };
  let filesSeen = 0;
  let nextProgress = 100_000;
  const mismatch = (m: Mismatch): void => {
    report.mismatchCount += 1;
    if (report.mismatches.length < keep) report.mismatches.push(m);
  };
  const seenDirs = new Set<number>([rootId]);
  let biggestNames: string[] = [];

  const stack: Array<{ raw: Buffer; path: string; id: number }> = [{ raw: Buffer.from(root), path: '', id: rootId }];
  while (stack.length > 0) {
    const dir = stack.pop()!;
    // The page's first window is asked for while the disk is read: most folders
    // are small, and for them the two waits were most of the time (at 100k,
    // 2,200 folders: compared in 16.1 s one after the other, 12.0 s so; asking
    // for the next 8 folders' windows ahead as well did not help: 14.4 s).
    const first = remoteWindow(page, dir.id, 0, windowRows);
    first.catch(() => undefined); // awaited below; an error surfaces there
    const local = await localChildren(dir.raw);
    const byName = new Map<string, LocalChild[]>();
    let listed = 0;
    for (const c of local) {
      if (c.kind === 'other') {
        report.others += 1;
        continue;
      }
      listed += 1;
      const same = byName.get(c.name);
      if (same) same.push(c);
      else byName.set(c.name, [c]);
    }
    report.entries += listed;
    if (listed > report.biggest.children) {
      report.biggest = { path: dir.path, children: listed, id: dir.id };
      biggestNames = [...byName.keys()];
    }
    const pathOf = (name: string) => (dir.path === '' ? name : `${dir.path}/${name}`);
    if (dir.path !== '' && listed > 0 && listed < report.smallest.children) {
      const first = [...byName.keys()].sort()[0]!;
      report.smallest = { path: dir.path, children: listed, id: dir.id, firstChild: pathOf(first) };
    }

    const below: Array<{ raw: Buffer; path: string; id: number }> = [];
    let start = 0;
    let total = -1;
    for (;;) {
      const w = start === 0 ? await first : await remoteWindow(page, dir.id, start, windowRows);
      total = w.total;
      if (w.start !== start) mismatch({ path: dir.path, field: 'list.start', expected: start, got: w.start });
      for (const r of w.rows) {
        const p = pathOf(r.name);
        const candidates = byName.get(r.name);
        const l = candidates?.shift();
        if (candidates !== undefined && candidates.length === 0) byName.delete(r.name);
        if (l === undefined) {
          mismatch({ path: p, field: 'presence', expected: 'absent', got: `present (${r.kind})` });
          continue;
        }
        if (r.kind !== l.kind) {
          mismatch({ path: p, field: 'kind', expected: l.kind, got: r.kind });
          continue;
        }
        if (l.kind === 'file' && r.size !== l.size) mismatch({ path: p, field: 'size', expected: l.size, got: r.size });
        if (r.mtime !== l.mtime) mismatch({ path: p, field: 'mtime', expected: l.mtime, got: r.mtime });
        if (l.kind !== 'symlink' && r.mode !== l.mode) mismatch({ path: p, field: 'mode', expected: `0o${l.mode.toString(8)}`, got: `0o${r.mode.toString(8)}` });
        if (l.kind === 'symlink' && r.target !== l.target) mismatch({ path: p, field: 'target', expected: l.target, got: r.target ?? null });
        if (l.kind === 'dir') {
          report.dirs += 1;
          if (seenDirs.has(r.id)) mismatch({ path: p, field: 'id', expected: 'a directory id seen once', got: `id ${r.id} again` });
          else {
            seenDirs.add(r.id);
            below.push({ raw: l.raw, path: p, id: r.id });
          }
        } else if (l.kind === 'symlink') report.symlinks += 1;
        else {
          report.files += 1;
          filesSeen += 1;
          const f = { path: p, id: r.id, size: l.size };
          if (report.sample.length < sampleSize) report.sample.push(f);
          else {
            const at = Math.floor(random() * filesSeen);
            if (at < sampleSize) report.sample[at] = f;
          }
          if (report.small.length < smallWanted && l.size > 0 && l.size <= 4096) report.small.push(f);
        }
      }
      start += w.rows.length;
      if (w.rows.length === 0 || start >= w.total) break;
    }
    if (start !== total) mismatch({ path: dir.path, field: 'list rows vs total', expected: total, got: start });
    for (const [name, left] of byName) for (const l of left) mismatch({ path: pathOf(name), field: 'presence', expected: `present (${l.kind})`, got: 'missing' });
    // Deepest last on the stack: sorted so the walk's order is the same run to run.
    below.sort((a, b) => (a.path < b.path ? 1 : a.path > b.path ? -1 : 0));
    stack.push(...below);
    if (options.progress && report.entries >= nextProgress) {
      options.progress(report.entries);
      nextProgress = (Math.floor(report.entries / 100_000) + 1) * 100_000;
    }
  }
  biggestNames.sort();
  report.bigProbe = report.biggest.path === '' ? (biggestNames[Math.floor(biggestNames.length * 0.61)] ?? '') : `${report.biggest.path}/${biggestNames[Math.floor(biggestNames.length * 0.61)] ?? ''}`;
  report.sample.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return report;
}

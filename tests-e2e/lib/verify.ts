// Verifies what a browser sees of a share against the directory on disk, through the
// page's own `window.linkfsShare` (the interface the UI uses):
//   1. wait until the index is complete (timed from the sharer's spawn),
//   2. enumerate the whole index by BFS with `list(dir, 'name', false, start, 1000)`,
//   3. compare paths, kinds, file sizes, mtimes (seconds), modes and symlink targets,
//   4. read every file with `read(id)` in the page, hash it there (SHA-256) and compare.
// Every difference is reported as (path, field, expected, got).

import { createHash } from 'node:crypto';
import type { Page } from 'playwright-core';
import { describeSnapshot, type EntryId, type EntryKind, type ShareSnapshot } from './page-api.ts';
import type { Tree, TreeEntry } from './tree.ts';

export interface Mismatch {
  path: string;
  field: string;
  expected: unknown;
  got: unknown;
}

export function formatMismatch(m: Mismatch): string {
  return `${m.path === '' ? '(root)' : m.path}: ${m.field}: expected ${JSON.stringify(m.expected)}, got ${JSON.stringify(m.got)}`;
}

/** One entry as the page's index has it, with its path rebuilt from the BFS. */
export interface RemoteEntry {
  path: string;
  id: number;
  kind: EntryKind;
  size: number;
  mtime: number;
  mode: number;
  target?: string;
}

export interface VerifyFigures {
  entries: number;
  files: number;
  bytes: number;
  /** Sharer spawn -> link printed. */
  link_seconds: number;
  /** Sharer spawn -> page's index complete. */
  index_seconds: number;
  entries_per_second: number;
  /** Index bytes on the wire per entry, from window.linkfsStats(); null if the hook is absent. */
  wire_bytes_per_entry: number | null;
  files_read: number;
  read_seconds: number | null;
  /** Files read and verified per second (small files measure per-read latency). */
  reads_per_second: number | null;
  read_mb_per_s: number | null;
  mismatches: number;
}

export interface VerifyReport {
  figures: VerifyFigures;
  mismatches: Mismatch[];
}

export interface VerifyOptions {
  page: Page;
  /** The local tree, walked with `hash: true` when reads are verified. */
  tree: Tree;
  /** performance.now() at the sharer's spawn (ShareProcess.spawnedAt). */
  spawnedAt: number;
  /** ShareProcess.linkMs */
  linkMs: number;
  completeTimeoutMs?: number;
  /** Read and hash every file (default true). */
  reads?: boolean;
  readConcurrency?: number;
  /** Abort a read that makes no progress for this long (default 15 s). */
  stallMs?: number;
  log?: (line: string) => void;
}

async function snapshot(page: Page): Promise<ShareSnapshot | null> {
  return page
    .evaluate(() => {
      const s = window.linkfsShare;
      return {
        hasApi: s !== undefined,
        bodyState: document.body?.dataset.state ?? null,
        status: s ? s.status() : null,
        progress: s ? s.progress() : null,
      };
    })
    .catch(() => null);
}

/**
 * Waits until `linkfsShare.progress().complete`; returns seconds since `spawnedAt`.
 * Fails at once if the page reports 'invalid-link', 'error' or 'sharer-gone'.
 */
export async function waitForComplete(page: Page, spawnedAt: number, timeoutMs = 120_000): Promise<number> {
  try {
    const handle = await page.waitForFunction(
      () => {
        const s = window.linkfsShare;
        if (!s) return false;
        const state = s.status().state;
        if (state === 'invalid-link' || state === 'error' || state === 'sharer-gone') return { failed: state };
        return s.progress().complete ? { failed: null } : false;
      },
      undefined,
      { polling: 10, timeout: timeoutMs },
    );
    const seconds = (performance.now() - spawnedAt) / 1000;
    const outcome = (await handle.jsonValue()) as { failed: string | null };
    if (outcome.failed !== null) {
      throw new Error(`the page went to '${outcome.failed}' before its index was complete: ${describeSnapshot(await snapshot(page))}`);
    }
    return seconds;
  } catch (e) {
    if (e instanceof Error && e.name === 'TimeoutError') {
      throw new Error(`the index was not complete within ${timeoutMs} ms: ${describeSnapshot(await snapshot(page))}`);
    }
    throw e;
  }
}

/**
 * The whole index, by BFS from the root in windows of `windowSize` rows, in one page
 * call. Listing inconsistencies (rows past `total`, a directory reached twice) are
 * returned as mismatches.
 */
export async function enumerateIndex(page: Page, windowSize = 1000): Promise<{ entries: RemoteEntry[]; problems: Mismatch[] }> {
  // Handed over as one JSON string: Playwright's own serialisation of 100,000 row
  // objects took 7-10 s here, the JSON string well under one.
  const json = await page.evaluate(async (size: number) => {
    const share = window.linkfsShare;
    if (!share) throw new Error('window.linkfsShare is not set');
    const entries: RemoteEntry[] = [];
    const problems: Mismatch[] = [];
    const queue: Array<{ id: EntryId; path: string }> = [{ id: share.rootId, path: '' }];
    const seenDirs = new Set<number>([share.rootId]);
    for (let head = 0; head < queue.length; head += 1) {
      const dir = queue[head]!;
      let start = 0;
      let total = -1;
      for (;;) {
        const page = await share.list(dir.id, 'name', false, start, size);
        total = page.total;
        if (page.start !== start) problems.push({ path: dir.path, field: 'list.start', expected: start, got: page.start });
        if (page.rows.length > size) problems.push({ path: dir.path, field: 'list.rows.length', expected: `<= ${size}`, got: page.rows.length });
        for (const r of page.rows) {
          const path = dir.path === '' ? r.name : `${dir.path}/${r.name}`;
          const e: RemoteEntry = { path, id: r.id, kind: r.kind, size: r.size, mtime: r.mtime, mode: r.mode };
          if (r.target !== undefined) e.target = r.target;
          entries.push(e);
          if (r.kind === 'dir') {
            if (seenDirs.has(r.id)) {
              problems.push({ path, field: 'id', expected: 'a directory id seen once', got: `id ${r.id} again` });
            } else {
              seenDirs.add(r.id);
              queue.push({ id: r.id, path });
            }
          }
        }
        start += page.rows.length;
        if (page.rows.length === 0 || start >= page.total) break;
      }
      if (start !== total) problems.push({ path: dir.path, field: 'list rows vs total', expected: total, got: start });
    }
    return JSON.stringify({ entries, problems });
  }, windowSize);
  return JSON.parse(json) as { entries: RemoteEntry[]; problems: Mismatch[] };
}

/** Compares the page's index with the local tree; [] when they agree. */
export function compareIndex(local: Tree, remote: RemoteEntry[]): Mismatch[] {
  const out: Mismatch[] = [];
  const remoteByPath = new Map<string, RemoteEntry>();
  for (const r of remote) {
    if (remoteByPath.has(r.path)) out.push({ path: r.path, field: 'presence', expected: 'listed once', got: 'listed twice' });
    remoteByPath.set(r.path, r);
  }
  const localPaths = new Set<string>();
  for (const l of local.entries) {
    localPaths.add(l.path);
    const r = remoteByPath.get(l.path);
    if (r === undefined) {
      out.push({ path: l.path, field: 'presence', expected: `present (${l.kind})`, got: 'missing' });
      continue;
    }
    if (r.kind !== l.kind) {
      out.push({ path: l.path, field: 'kind', expected: l.kind, got: r.kind });
      continue;
    }
    if (l.kind === 'file' && r.size !== l.size) out.push({ path: l.path, field: 'size', expected: l.size, got: r.size });
    if (r.mtime !== l.mtime) out.push({ path: l.path, field: 'mtime', expected: l.mtime, got: r.mtime });
    if (l.kind !== 'symlink' && r.mode !== l.mode) {
      out.push({ path: l.path, field: 'mode', expected: `0o${l.mode.toString(8)}`, got: `0o${r.mode.toString(8)}` });
    }
    if (l.kind === 'symlink' && r.target !== l.target) out.push({ path: l.path, field: 'target', expected: l.target, got: r.target ?? null });
  }
  for (const r of remote) {
    if (!localPaths.has(r.path)) out.push({ path: r.path, field: 'presence', expected: 'absent', got: `present (${r.kind})` });
  }
  return out;
}

export interface ReadResult {
  id: number;
  bytes: number;
  sha256: string | null;
  error: string | null;
  ms: number;
}

/** The most a page without `crypto.subtle` (plain http) hands back to be hashed here. */
const UNHASHED_LIMIT = 64 * 1024 * 1024;

/**
 * Reads files in the page with `linkfsShare.read(id)` (at most `concurrency` at once),
 * hashes each there and returns only hex digests. A read with no progress for
 * `stallMs` is aborted and reported as a stall. A page that is not a secure context
 * (a plain-http LAN link) has no `crypto.subtle`: it hands the bytes back (base64, up
 * to 64 MiB a file) and they are hashed here.
 */
export async function readInPage(page: Page, ids: number[], concurrency = 4, stallMs = 15_000): Promise<{ results: ReadResult[]; ms: number }> {
  const read = await page.evaluate(
    async ({ ids, concurrency, stallMs, unhashedLimit }) => {
      const share = window.linkfsShare;
      if (!share) throw new Error('window.linkfsShare is not set');
      const results: Array<{ id: number; bytes: number; sha256: string | null; base64?: string; error: string | null; ms: number }> = [];
      let next = 0;
      const hex = (buf: ArrayBuffer) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
      const one = async (id: number) => {
        const abort = new AbortController();
        let lastProgress = performance.now();
        let stalled = false;
        const watchdog = setInterval(() => {
          if (performance.now() - lastProgress > stallMs) {
            stalled = true;
            abort.abort(new Error(`no progress for ${stallMs} ms`));
          }
        }, 250);
        const t0 = performance.now();
        try {
          const blob = await share.read(id as EntryId, {
            signal: abort.signal,
            onProgress: () => {
              lastProgress = performance.now();
            },
          });
          lastProgress = performance.now();
          if (globalThis.crypto?.subtle === undefined) {
            if (blob.size > unhashedLimit) throw new Error(`${blob.size} bytes: too big to hand back for hashing from a page without crypto.subtle`);
            const url = await new Promise<string>((resolve, reject) => {
              const reader = new FileReader();
              reader.onload = () => resolve(String(reader.result));
              reader.onerror = () => reject(reader.error ?? new Error('FileReader failed'));
              reader.readAsDataURL(blob);
            });
            results.push({ id, bytes: blob.size, sha256: null, base64: url.slice(url.indexOf(',') + 1), error: null, ms: performance.now() - t0 });
            return;
          }
          const buf = await blob.arrayBuffer();
          const digest = await crypto.subtle.digest('SHA-256', buf);
          results.push({ id, bytes: buf.byteLength, sha256: hex(digest), error: null, ms: performance.now() - t0 });
        } catch (e) {
          const message = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
          results.push({ id, bytes: 0, sha256: null, error: stalled ? `stalled: no progress for ${stallMs} ms` : message, ms: performance.now() - t0 });
        } finally {
          clearInterval(watchdog);
        }
      };
      const start = performance.now();
      const workers = Array.from({ length: Math.min(concurrency, ids.length) }, async () => {
        while (next < ids.length) await one(ids[next++]!);
      });
      await Promise.all(workers);
      return { results, ms: performance.now() - start };
    },
    { ids, concurrency, stallMs, unhashedLimit: UNHASHED_LIMIT },
  );
  const results = read.results.map(({ base64, ...r }) => (base64 === undefined ? r : { ...r, sha256: createHash('sha256').update(Buffer.from(base64, 'base64')).digest('hex') }));
  return { results, ms: read.ms };
}

/** Reads every local file through the page and compares sizes and SHA-256. */
export async function verifyReads(
  page: Page,
  local: TreeEntry[],
  remote: RemoteEntry[],
  options: { concurrency?: number; stallMs?: number; log?: (line: string) => void } = {},
): Promise<{ mismatches: Mismatch[]; bytes: number; seconds: number; filesRead: number }> {
  const remoteByPath = new Map(remote.map((r) => [r.path, r]));
  const files = local.filter((l) => l.kind === 'file' && remoteByPath.get(l.path)?.kind === 'file');
  const mismatches: Mismatch[] = [];
  let bytes = 0;
  let ms = 0;
  let filesRead = 0;
  // Batches keep each page call bounded in time and in what it returns.
  const maxFiles = 256;
  const maxBytes = 128 << 20;
  for (let i = 0; i < files.length; ) {
    const batch: TreeEntry[] = [];
    let batchBytes = 0;
    while (i < files.length && batch.length < maxFiles && (batch.length === 0 || batchBytes + files[i]!.size <= maxBytes)) {
      batchBytes += files[i]!.size;
      batch.push(files[i]!);
      i += 1;
    }
    const byId = new Map(batch.map((l) => [remoteByPath.get(l.path)!.id, l]));
    const { results, ms: batchMs } = await readInPage(page, [...byId.keys()], options.concurrency ?? 4, options.stallMs ?? 15_000);
    ms += batchMs;
    for (const r of results) {
      const l = byId.get(r.id)!;
      filesRead += 1;
      if (r.error !== null) {
        mismatches.push({ path: l.path, field: 'read', expected: `${l.size} bytes`, got: r.error });
        continue;
      }
      bytes += r.bytes;
      if (r.bytes !== l.size) mismatches.push({ path: l.path, field: 'read.bytes', expected: l.size, got: r.bytes });
      else if (r.sha256 !== l.sha256) mismatches.push({ path: l.path, field: 'read.sha256', expected: l.sha256, got: r.sha256 });
    }
    options.log?.(`  read ${filesRead}/${files.length} files, ${(bytes / 1e6).toFixed(1)} MB`);
  }
  return { mismatches, bytes, seconds: ms / 1000, filesRead };
}

/** Index bytes on the wire so far, from the page's test hook; null without it. */
export async function indexWireBytes(page: Page): Promise<number | null> {
  return page.evaluate(() => {
    const stats = window.linkfsStats?.();
    return stats !== undefined && stats !== null && typeof stats.indexWireBytes === 'number' ? stats.indexWireBytes : null;
  });
}

/** Steps 1-4 above; returns the figures and every mismatch. */
export async function verifyShare(options: VerifyOptions): Promise<VerifyReport> {
  const { page, tree } = options;
  const log = options.log ?? (() => undefined);
  const indexSeconds = await waitForComplete(page, options.spawnedAt, options.completeTimeoutMs);
  log(`  index complete ${indexSeconds.toFixed(3)} s after the sharer started`);
  const wire = await indexWireBytes(page);
  const { entries: remote, problems } = await enumerateIndex(page);
  const mismatches = [...problems, ...compareIndex(tree, remote)];
  log(`  index: ${remote.length} entries listed, local tree ${tree.entries.length}, ${mismatches.length} mismatches`);

  let readBytes = 0;
  let readSeconds: number | null = null;
  let filesRead = 0;
  if (options.reads ?? true) {
    const reads = await verifyReads(page, tree.entries, remote, {
      concurrency: options.readConcurrency ?? 4,
      stallMs: options.stallMs ?? 15_000,
      log,
    });
    mismatches.push(...reads.mismatches);
    readBytes = reads.bytes;
    readSeconds = reads.seconds;
    filesRead = reads.filesRead;
  }
  let files = 0;
  let bytes = 0;
  for (const e of tree.entries) {
    if (e.kind === 'file') {
      files += 1;
      bytes += e.size;
    }
  }
  const entries = tree.entries.length;
  return {
    figures: {
      entries,
      files,
      bytes,
      link_seconds: round(options.linkMs / 1000, 3),
      index_seconds: round(indexSeconds, 3),
      entries_per_second: Math.round(entries / indexSeconds),
      wire_bytes_per_entry: wire === null || entries === 0 ? null : round(wire / entries, 2),
      files_read: filesRead,
      read_seconds: readSeconds === null ? null : round(readSeconds, 3),
      reads_per_second: readSeconds === null || readSeconds === 0 ? null : Math.round(filesRead / readSeconds),
      read_mb_per_s: readSeconds === null || readSeconds === 0 ? null : round(readBytes / 1e6 / readSeconds, 1),
      mismatches: mismatches.length,
    },
    mismatches,
  };
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

// The scale test: a tree of SCALE_N files through the real `linkfs share`, the real
// relay and the real web app in Chromium (inside the network namespace that
// tests-e2e/run sets up). It FAILS on any missing, extra or wrong entry or byte;
// the figures are reported, not asserted (these machines are noisy).
//
//   SCALE_N=100000 npm run e2e:scale
//   SCALE_DIR=/some/tree npm run e2e:scale        (reuse a tree instead of generating one)
//   SCALE_EMPTY=1 ...                              (a generated tree of empty files: at 10M the
//                                                  bytes are 17 GiB; names, folders, mtimes alike)
//   SCALE_SHAPE=one-folder ...                     (all SCALE_N files in one folder, no other)
//   SCALE_OUT=figures.json ...                     (also write the JSON there)
//   SCALE_TRACE=1 ...                              (log what made main-thread tasks long)
//   SCALE_SHARER_NICE=0 ...                        (the sharer at nice 0; default 19, see below)
//
// The tree comes from `linkfs-gen-tree` (cached under tests-e2e/.tmp/scale-N). The LAST
// stdout line is one JSON object:
//   entries, index_seconds (share start -> complete index committed in IndexedDB),
//   entries_per_second, statwalk_seconds (`find -printf` of the same tree, warm) and
//   index_vs_statwalk, wire_bytes_per_entry, browser_bytes_per_entry (page + worker JS
//   heaps after GC + both wasm memories, minus the same for an empty share),
//   sharer_rss_bytes_per_entry (peak RSS, minus an empty share's), longest_task_ms (main
//   thread, during the fill; the longtask API reports only tasks of 50 ms or more, so 0
//   means none) and main_thread_max_gap_ms (longest gap between 4 ms timer ticks),
//   list_big_dir_ms / list_small_dir_ms / lookup_big_dir_ms / lookup_small_dir_ms,
//   readback_ok (20 files spread over the tree, SHA-256), small_file_read_ms {n, p50, p99}
//   (whole reads of files up to 4 KiB, one at a time), search [{query, found,
//   first_results_ms, all_results_ms, longest_task_ms}] (typed into the page's search
//   field; the search runs in the index worker), reopen_first_listing_ms and
//   reopen_index_usable_ms (the page reloaded with its index in IndexedDB: from the
//   navigation's start to the first listing painted, and to every entry loaded from the
//   cache, a deep lookup then answered), reopen_in_new_tab_ms {first_listing,
//   index_usable} (the same, the link opened in a new tab a second after the old one
//   closed), reopen_longest_task_ms, reopen_worker_ms
//   {open_db, load_batches (the reads' own times, summed), rebuild_index (the restore,
//   wall), rebuild_busy (the part of it its steps held the worker)}, reopen_from_snapshot
//   (whether the reopened page restored a stored snapshot of the index, see
//   docs/browser-content.md), snapshot_bytes_per_entry and snapshot_build_ms (its size,
//   and how long building it held the worker), mismatches.

import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { CDPSession, Page } from 'playwright-core';
import type { EntryId } from './lib/page-api.ts';
import { launchChromium, openLink, type ChromiumInstance } from './lib/chromium.ts';
import { scratchDir } from './lib/paths.ts';
import { generatedTree } from './lib/gen-tree.ts';
import { startShare, type ShareProcess } from './lib/share-process.ts';
import { compareStreamed } from './lib/stream-compare.ts';
import { sha256File } from './lib/tree.ts';
import { formatMismatch, indexWireBytes, readInPage } from './lib/verify.ts';
import { longTaskReport, longTasks as traceLongTasks, mainThreadCpuReport, startTrace, type Trace } from './lib/trace.ts';

const log = (line: string) => console.error(line);
const round = (x: number, digits = 3) => Math.round(x * 10 ** digits) / 10 ** digits;

/** Seconds for `find DIR -printf ...` over the tree, warm cache (the second of two runs). */
function statWalkSeconds(dir: string): number {
  const run = () => {
    const t0 = performance.now();
    const r = spawnSync('sh', ['-c', 'find "$1" -printf "%p %s %T@ %m\\n" > /dev/null', 'sh', dir], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error(`find over ${dir} failed`);
    return (performance.now() - t0) / 1000;
  };
  run();
  return run();
}

/** Peak resident memory of a process, from /proc. */
async function peakRss(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = /VmHWM:\s+(\d+) kB/.exec(status)?.[1];
  if (kb === undefined) throw new Error(`no VmHWM for process ${pid}`);
  return Number(kb) * 1024;
}

/** JS heap after GC in the page and in its workers (over CDP), plus both wasm memories. */
async function browserMemory(page: Page): Promise<{ pageHeap: number; workerHeap: number; wasm: number; total: number }> {
  const cdp: CDPSession = await page.context().newCDPSession(page);
  try {
    await cdp.send('HeapProfiler.collectGarbage');
    const pageHeap = (await cdp.send('Runtime.getHeapUsage')).usedSize;
    // Dedicated workers: attach (non-flattened) and talk to each through the page session.
    const sessions: string[] = [];
    const replies = new Map<number, (m: { result?: { usedSize?: number } }) => void>();
    cdp.on('Target.attachedToTarget', (e) => {
      if (e.targetInfo.type === 'worker') sessions.push(e.sessionId);
    });
    cdp.on('Target.receivedMessageFromTarget', (e) => {
      const m = JSON.parse(e.message) as { id: number; result?: { usedSize?: number } };
      replies.get(m.id)?.(m);
      replies.delete(m.id);
    });
    await cdp.send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: false, flatten: false });
    await page.waitForTimeout(200);
    let id = 1;
    const call = (sessionId: string, method: string) =>
      new Promise<{ result?: { usedSize?: number } }>((resolve) => {
        const n = id++;
        replies.set(n, resolve);
        void cdp.send('Target.sendMessageToTarget', { sessionId, message: JSON.stringify({ id: n, method, params: {} }) });
      });
    let workerHeap = 0;
    for (const s of sessions) {
      await call(s, 'HeapProfiler.collectGarbage');
      workerHeap += (await call(s, 'Runtime.getHeapUsage')).result?.usedSize ?? 0;
    }
    if (sessions.length === 0) throw new Error('the index worker was not found over CDP');
    const stats = await page.evaluate(() => window.linkfsStats?.() ?? null);
    const wasm = Number(stats?.wasmMemoryBytes ?? 0) + Number(stats?.pageWasmMemoryBytes ?? 0);
    return { pageHeap, workerHeap, wasm, total: pageHeap + workerHeap + wasm };
  } finally {
    await cdp.detach().catch(() => undefined);
  }
}

/** Said on the console once a reloaded page's first listing is painted and its whole index usable. */
const REOPENED = 'linkfs-scale: reopened';

/**
 * Installed before load: main-thread tasks of 50 ms or more (PerformanceObserver
 * 'longtask', which reports nothing shorter), and the longest gap between ticks of a
 * 4 ms timer (what a shorter task would delay; also the timer's own jitter).
 */
const longTaskScript = `globalThis.__longTasks = []; globalThis.__gaps = [];
{ const seen = () => { if (globalThis.__firstRowAt === undefined && document.querySelector('[data-testid=row]')) { const at = performance.now(); globalThis.__firstRowAt = at; requestAnimationFrame(() => setTimeout(() => { globalThis.__firstRowPaintedAt = performance.now(); globalThis.__reopenSeen?.(); }, 0)); } };
  new MutationObserver(seen).observe(document, { childList: true, subtree: true }); }
{ const poll = () => { const s = globalThis.linkfsShare; if (s && s.progress().fromCache > 0 && !s.progress().loadingCache && globalThis.__cacheUsableAt === undefined) { globalThis.__cacheUsableAt = performance.now(); globalThis.__reopenSeen?.(); } if (globalThis.__cacheUsableAt === undefined) setTimeout(poll, 2); }; setTimeout(poll, 2); }
globalThis.__reopenSeen = () => { if (globalThis.__firstRowPaintedAt !== undefined && globalThis.__cacheUsableAt !== undefined) console.debug('${REOPENED}'); };
try { new PerformanceObserver((l) => { for (const e of l.getEntries()) globalThis.__longTasks.push([e.startTime, e.duration]); }).observe({ type: 'longtask', buffered: true }); } catch {}
{ let last = performance.now(); const tick = () => { const now = performance.now(); if (now - last > 8 && globalThis.__gaps.length < 10000) globalThis.__gaps.push([last, now - last]); last = now; setTimeout(tick, 4); }; setTimeout(tick, 4); }`;

/** The longest of `[start, duration]` pairs that end after `from` (page clock, ms). */
async function longestSince(page: Page, what: '__longTasks' | '__gaps', from: number): Promise<{ longest: number; count: number }> {
  return page.evaluate(
    ({ what, from }) => {
      const all = ((globalThis as unknown as Record<string, [number, number][] | undefined>)[what] ?? []).filter(([at, d]) => at + d >= from);
      return { longest: all.reduce((m, [, d]) => Math.max(m, d), 0), count: all.length };
    },
    { what, from },
  );
}

/**
 * The sharer's nice value (SCALE_SHARER_NICE, default 19): the main-thread figures are
 * the browser's, and a visitor's browser does not share its CPU with the sharer. With
 * both at nice 0 on these 2 cores, the page's main thread waits for a core: tasks of
 * 5-11 ms of CPU took 80-140 ms of wall time (Chromium trace, SCALE_TRACE=1).
 */
const sharerNice = Number(process.env.SCALE_SHARER_NICE ?? '19');

/** One sharer + one fresh browser: open the link and wait for the index in IndexedDB. */
async function openShare(dir: string, name: string): Promise<{ chromium: ChromiumInstance; page: Page; share: ShareProcess; indexSeconds: number; connectedAt: number; fillTrace: { longestWallMs: number; longestCpuMs: number } | null }> {
  const chromium = await launchChromium({ name, log });
  await chromium.context.addInitScript({ content: longTaskScript });
  const page = await chromium.page();
  const share = await startShare(dir, { nice: sharerNice });
  await openLink(page, share.link, ['connected'], 120_000);
  // SCALE_TRACE=1: a Chromium trace of the fill, and what made its long tasks long (stderr).
  const trace: Trace | null = process.env.SCALE_TRACE ? await startTrace(page) : null;
  const connectedAt = await page.evaluate(() => performance.now());
  const handle = await page.waitForFunction(
    () => {
      const s = window.linkfsShare;
      if (!s) return false;
      const st = s.status().state;
      if (st !== 'connected' && st !== 'connecting') return { failed: `${st}: ${s.status().message}` };
      const p = s.progress();
      return p.complete && p.persisted >= p.received ? { failed: null } : false;
    },
    undefined,
    { polling: 10, timeout: 1_200_000 },
  );
  const indexSeconds = (performance.now() - share.spawnedAt) / 1000;
  let fillTrace: { longestWallMs: number; longestCpuMs: number } | null = null;
  if (trace !== null) {
    const events = await trace.stop();
    const report = traceLongTasks(events);
    for (const line of report.lines) log(`scale: fill ${line}`);
    for (const line of mainThreadCpuReport(events)) log(`scale: fill ${line}`);
    fillTrace = report;
  }
  const outcome = (await handle.jsonValue()) as { failed: string | null };
  if (outcome.failed !== null) throw new Error(`the page failed before its index was complete: ${outcome.failed}`);
  return { chromium, page, share, indexSeconds, connectedAt, fillTrace };
}

/**
 * A ShareApi query timed in the page, round trip to the worker included (ms): the
 * first call alone, then the mean of `n` more (the page clock ticks in 0.1 ms, so
 * one fast call alone reads as 0 or 0.1).
 */
async function timedInPage(page: Page, what: 'list' | 'lookup', arg: number | string, n: number): Promise<{ first: number; mean: number }> {
  return page.evaluate(
    async ({ what, arg, n }) => {
      const s = window.linkfsShare!;
      const once = async () => {
        if (what === 'list') await s.list(arg as EntryId, 'name', false, 0, 60);
        else if ((await s.lookup(arg as string)) === null) throw new Error(`lookup(${String(arg)}) found nothing`);
      };
      let t0 = performance.now();
      await once();
      const first = performance.now() - t0;
      t0 = performance.now();
      for (let i = 0; i < n; i += 1) await once();
      return { first, mean: (performance.now() - t0) / n };
    },
    { what, arg, n },
  );
}

async function main(): Promise<Record<string, unknown>> {
  const n = Number(process.env.SCALE_N ?? process.env.SCALE_FILES ?? '100000');
  if (!Number.isInteger(n) || n < 1) throw new Error(`SCALE_N=${process.env.SCALE_N ?? ''} is not a positive integer`);
  const emptyFiles = process.env.SCALE_EMPTY === '1';
  const shape = process.env.SCALE_SHAPE ?? 'tree';
  if (shape !== 'tree' && shape !== 'one-folder') throw new Error(`SCALE_SHAPE=${shape}: say tree or one-folder`);
  const dir = process.env.SCALE_DIR
    ? path.resolve(process.env.SCALE_DIR)
    : await generatedTree(n, { empty: emptyFiles, oneFolder: shape === 'one-folder' });
  const statwalk = statWalkSeconds(dir);
  log(`scale: find -printf over ${dir} takes ${statwalk.toFixed(3)} s`);

  // The empty share: what a page and a sharer cost before any entry.
  const empty = await mkdtemp(path.join(scratchDir, 'scale-empty-'));
  let baseline: { browser: number; sharer: number };
  {
    const b = await openShare(empty, 'scale-empty');
    try {
      baseline = { browser: (await browserMemory(b.page)).total, sharer: await peakRss(b.share.pid) };
    } finally {
      await b.chromium.close();
      await b.share.stop();
      await rm(empty, { recursive: true, force: true });
    }
  }

  const run = await openShare(dir, 'scale');
  const { chromium, page, share } = run;
  try {
    log(`scale: index complete and committed after ${run.indexSeconds.toFixed(3)} s`);
    // From the moment the channel opened: page load and wasm start-up are not the fill.
    const longTasks = await longestSince(page, '__longTasks', run.connectedAt);
    const gaps = await longestSince(page, '__gaps', run.connectedAt);
    const wire = await indexWireBytes(page);
    const sharerPeak = await peakRss(share.pid);
    const memory = await browserMemory(page);

    // Every entry, compared with the tree, one folder at a time (neither side is
    // held whole); the same pass finds the biggest and the smallest folder and
    // picks the files read back below.
    log('scale: comparing the whole index with the tree ...');
    const compareStart = performance.now();
    const compared = await compareStreamed(page, dir, { progress: (n) => log(`scale: compared ${n} entries`) });
    const entries = compared.entries + 1; // the index also holds the root
    const mismatchCount = compared.mismatchCount;
    for (const m of compared.mismatches) log(`MISMATCH ${formatMismatch(m)}`);
    if (mismatchCount > compared.mismatches.length) log(`... and ${mismatchCount - compared.mismatches.length} more mismatches`);
    log(`scale: ${entries} entries, ${mismatchCount} mismatches (compared in ${((performance.now() - compareStart) / 1000).toFixed(1)} s)`);

    // The biggest folder and the smallest non-empty one (the generator makes
    // `single`, with one file).
    const { path: bigPath, children: bigCount } = compared.biggest;
    const { path: smallPath, children: smallCount } = compared.smallest;
    const list = await timedInPage(page, 'list', compared.biggest.id, 200);
    const bigProbe = compared.bigProbe;
    const lookupBig = await timedInPage(page, 'lookup', bigProbe, 1000);
    const smallProbe = compared.smallest.firstChild;
    const lookupSmall = await timedInPage(page, 'lookup', smallProbe, 1000);
    const listSmall = await timedInPage(page, 'list', compared.smallest.id, 200);

    // 20 files spread over the tree, byte for byte.
    const picks = compared.sample;
    const ids = picks.map((f) => f.id);
    const { results } = await readInPage(page, ids, 4, 30_000);
    let readbackOk = ids.length === Math.min(20, compared.files);
    for (const f of picks) {
      const r = results.find((x) => x.id === f.id);
      const want = await sha256File(path.join(dir, f.path));
      if (r === undefined || r.error !== null || r.sha256 !== want) {
        readbackOk = false;
        log(`scale: read-back of ${f.path} failed: ${r?.error ?? `sha256 ${String(r?.sha256)} != ${want}`}`);
      }
    }

    // Small files, one at a time: time to the whole file (= its first byte for files
    // of one chunk), p50 / p99 over up to 200 reads.
    const small = compared.small.map((r) => r.id);
    const firstByte = await page.evaluate(async (list: number[]) => {
      const times: number[] = [];
      for (const id of list) {
        const t0 = performance.now();
        await window.linkfsShare!.read(id as EntryId);
        times.push(performance.now() - t0);
      }
      times.sort((a, b) => a - b);
      const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? null;
      return { n: times.length, p50: at(0.5), p99: at(0.99) };
    }, small);

    // The whole-share search, typed into the page: first results and all results,
    // and the longest main-thread task while it ran.
    const searchFigures: Record<string, unknown>[] = [];
    const probeName = picks[0] ? path.basename(picks[0].path) : 'a';
    for (const q of [probeName.slice(0, Math.max(3, Math.floor(probeName.length / 2))), '*9.*']) {
      const from = await page.evaluate(() => performance.now());
      const trace: Trace | null = process.env.SCALE_TRACE ? await startTrace(page) : null;
      await page.locator('[data-testid=search]').fill(q);
      await page.waitForFunction((query) => {
        const panel = document.querySelector<HTMLElement>('.search-panel');
        return panel?.dataset.query === query && panel.dataset.state === 'done';
      }, q, { timeout: 60_000 });
      const panel = await page.locator('.search-panel').evaluate((e) => ({ ...(e as HTMLElement).dataset }));
      const tasks = await longestSince(page, '__longTasks', from);
      if (trace !== null) for (const line of longTaskReport(await trace.stop())) log(`scale: search ${q}: ${line}`);
      searchFigures.push({ query: q, found: Number(panel.found), first_results_ms: panel.firstMs === undefined ? null : Number(panel.firstMs), all_results_ms: Number(panel.doneMs), longest_task_ms: Math.round(tasks.longest) });
    }
    await page.locator('[data-testid=search]').fill('');

    // Reopening: the same page reloaded, its index in IndexedDB. From the navigation's
    // start: the first listing painted, and the whole index answering queries (every
    // entry loaded from the cache, a deep lookup answered).
    const persisted = await page.evaluate(() => window.linkfsShare!.progress().persisted);
    if (persisted < entries) throw new Error(`only ${persisted} of ${entries} entries reached IndexedDB before reopening`);
    // The worker stores a snapshot of a big index a second after its batches
    // stop (docs/browser-content.md); reopening restores it. A small index
    // (under 32 batches) has none and replays its batches.
    const snapshot = await page
      .waitForFunction(() => (window.linkfsStats?.()?.snapshots ?? 0) >= 1, undefined, { timeout: 20_000 })
      .then(() => page.evaluate(() => ({ snapshotBytes: window.linkfsStats?.()?.snapshotBytes ?? 0, snapshotMs: window.linkfsStats?.()?.snapshotMs ?? 0 })))
      .catch(() => null);
    const reopenTrace: Trace | null = process.env.SCALE_TRACE ? await startTrace(page) : null;
    // Waited for on the console, not by polling the page: Playwright's first call into
    // a new document installs its own script on the main thread (12-15 ms of CPU), and
    // that landed inside the first listing it measures.
    const reopened = page.waitForEvent('console', { predicate: (m) => m.text() === REOPENED, timeout: 60_000 });
    await page.reload({ waitUntil: 'commit' });
    await reopened;
    const reopen = await page.evaluate(async (deep: string) => {
      const g = globalThis as unknown as { __firstRowPaintedAt: number; __cacheUsableAt: number };
      const s = window.linkfsShare!;
      const found = await s.lookup(deep);
      const st = (window.linkfsStats?.() ?? {}) as { openDbMs?: number; loadMs?: number; rebuildMs?: number; rebuildBusyMs?: number; openedFromSnapshot?: boolean };
      return { firstListing: g.__firstRowPaintedAt, usable: g.__cacheUsableAt, fromCache: s.progress().fromCache, deepFound: found !== null, answeredAt: performance.now(), openDb: st.openDbMs ?? null, load: st.loadMs ?? null, rebuild: st.rebuildMs ?? null, rebuildBusy: st.rebuildBusyMs ?? null, fromSnapshot: st.openedFromSnapshot ?? false, marks: Object.fromEntries([...performance.getEntriesByType('mark').map((m) => [m.name, Math.round(m.startTime)]), ...Object.entries(performance.getEntriesByType('navigation')[0]?.toJSON() ?? {}).filter(([k, v]) => typeof v === 'number' && /End|Start/.test(k)).map(([k, v]) => [k, Math.round(v as number)]), ['firstRowAt', Math.round((g as unknown as { __firstRowAt: number }).__firstRowAt)]]) };
    }, bigProbe);
    log(`scale: reopen marks ${JSON.stringify(reopen.marks)}`);
    if (reopenTrace !== null) {
      const events = await reopenTrace.stop();
      for (const line of longTaskReport(events, 10)) log(`scale: reopen: ${line}`);
      // Every thread's events, for a closer look (chrome://tracing, Perfetto).
      if (process.env.SCALE_TRACE_OUT) await writeFile(process.env.SCALE_TRACE_OUT, JSON.stringify({ traceEvents: events }));
    }
    if (reopen.fromCache !== entries || !reopen.deepFound) throw new Error(`the reopened page had ${reopen.fromCache} of ${entries} entries from IndexedDB (deep lookup ${reopen.deepFound ? 'answered' : 'not answered'})`);
    const reopenLongTasks = await longestSince(page, '__longTasks', 0);
    // A search typed the moment the page is back finds what it found before (it
    // waits for the whole cached index; a scan of the part loaded so far would miss
    // names without knowing it). At 100k the cache often loads before the typed
    // search starts, so this catches that only sometimes; at 1M, always.
    const globQuery = '*9.*';
    const before = searchFigures.find((f) => f.query === globQuery)?.found;
    await page.reload();
    await page.locator('[data-testid=search]').fill(globQuery);
    await page.waitForFunction((query) => {
      const panel = document.querySelector<HTMLElement>('.search-panel');
      return panel?.dataset.query === query && panel.dataset.state === 'done';
    }, globQuery, { timeout: 60_000 });
    const foundOnReopen = Number(await page.locator('.search-panel').getAttribute('data-found'));
    if (foundOnReopen !== before) throw new Error(`"${globQuery}" typed at once on the reopened page found ${foundOnReopen} names, ${String(before)} before`);

    // The link opened again in a new tab, the old one closed a second before (another
    // day, another window). A reload also tears the old page's worker down while the
    // new one starts: at 10M, 130 ms of a core freeing its index (Chromium trace). Both
    // are reported.
    const link = page.url();
    await page.close();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const tab = await chromium.context.newPage();
    const tabReopened = tab.waitForEvent('console', { predicate: (m) => m.text() === REOPENED, timeout: 60_000 });
    await tab.goto(link, { waitUntil: 'commit' });
    await tabReopened;
    const inTab = await tab.evaluate(() => {
      const g = globalThis as unknown as { __firstRowPaintedAt: number; __cacheUsableAt: number };
      const nav = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming | undefined;
      const marks = Object.fromEntries(performance.getEntriesByType('mark').map((m) => [m.name, Math.round(m.startTime)]));
      return { firstListing: g.__firstRowPaintedAt, usable: g.__cacheUsableAt, fromCache: window.linkfsShare?.progress().fromCache ?? 0, marks: { ...marks, fetchStart: nav?.fetchStart, responseEnd: nav?.responseEnd, domContentLoaded: nav?.domContentLoadedEventStart } };
    });
    log(`scale: reopen in a new tab, marks ${JSON.stringify(inTab.marks)}`);
    if (inTab.fromCache !== entries) throw new Error(`the share opened again in a new tab had ${inTab.fromCache} of ${entries} entries from IndexedDB`);

    const figures = {
      entries,
      dir,
      empty_files: emptyFiles,
      shape,
      index_seconds: round(run.indexSeconds),
      entries_per_second: Math.round(entries / run.indexSeconds),
      statwalk_seconds: round(statwalk),
      index_vs_statwalk: round(run.indexSeconds / statwalk, 2),
      link_seconds: round(share.linkMs / 1000),
      wire_bytes_per_entry: wire === null ? null : round(wire / entries, 2),
      browser_bytes_per_entry: round((memory.total - baseline.browser) / entries, 1),
      browser_memory: { page_js_heap: memory.pageHeap, worker_js_heap: memory.workerHeap, wasm: memory.wasm, empty_share_total: baseline.browser },
      sharer_rss_bytes_per_entry: round((sharerPeak - baseline.sharer) / entries, 1),
      sharer_peak_rss_bytes: sharerPeak,
      sharer_nice: sharerNice,
      longest_task_ms: Math.round(longTasks.longest),
      tasks_over_50ms: longTasks.count,
      // SCALE_TRACE=1 only: the longest main-thread task of the fill in the trace, wall and CPU time.
      ...(run.fillTrace ? { fill_longest_task_trace_ms: { wall: round(run.fillTrace.longestWallMs, 1), cpu: round(run.fillTrace.longestCpuMs, 1) } } : {}),
      main_thread_max_gap_ms: round(gaps.longest, 1),
      big_dir: { path: bigPath, entries: bigCount },
      list_big_dir_ms: round(list.first, 2),
      list_big_dir_mean_ms: round(list.mean, 3),
      small_dir: { path: smallPath, entries: smallCount },
      list_small_dir_ms: round(listSmall.first, 2),
      list_small_dir_mean_ms: round(listSmall.mean, 3),
      lookup_big_dir_ms: round(lookupBig.mean, 4),
      lookup_small_dir_ms: round(lookupSmall.mean, 4),
      lookup_big_vs_small: round(lookupBig.mean / lookupSmall.mean, 2),
      lookup_big_dir_first_ms: round(lookupBig.first, 2),
      readback_ok: readbackOk,
      small_file_read_ms: { n: firstByte.n, p50: firstByte.p50 === null ? null : round(firstByte.p50, 2), p99: firstByte.p99 === null ? null : round(firstByte.p99, 2) },
      search: searchFigures,
      reopen_first_listing_ms: Math.round(reopen.firstListing),
      reopen_index_usable_ms: Math.round(reopen.usable),
      reopen_in_new_tab_ms: { first_listing: Math.round(inTab.firstListing), index_usable: Math.round(inTab.usable) },
      reopen_longest_task_ms: Math.round(reopenLongTasks.longest),
      reopen_worker_ms: { open_db: reopen.openDb, load_batches: reopen.load, rebuild_index: reopen.rebuild, rebuild_busy: reopen.rebuildBusy },
      reopen_from_snapshot: reopen.fromSnapshot,
      snapshot_bytes_per_entry: snapshot === null ? null : Number((snapshot.snapshotBytes / entries).toFixed(2)),
      snapshot_build_ms: snapshot === null ? null : Math.round(snapshot.snapshotMs),
      mismatches: mismatchCount,
      error: mismatchCount > 0 || !readbackOk ? `${mismatchCount} index mismatches; read-back ${readbackOk ? 'ok' : 'FAILED'}` : null,
    };
    await chromium.close();
    await share.stop();
    return figures;
  } catch (e) {
    await chromium.close().catch(() => undefined);
    await share.kill();
    throw e;
  }
}

let figures: Record<string, unknown>;
try {
  figures = await main();
} catch (e) {
  figures = { error: e instanceof Error ? e.message : String(e) };
}
if (figures.error !== null) log(`scale: FAILED: ${String(figures.error)}`);
const line = JSON.stringify(figures);
if (process.env.SCALE_OUT) {
  await mkdir(path.dirname(path.resolve(process.env.SCALE_OUT)), { recursive: true });
  await writeFile(process.env.SCALE_OUT, `${line}\n`);
}
console.log(line);
process.exit(figures.error === null ? 0 : 1);

// Figures of a live share (docs/benchmarks.md, "A live share"), through the real
// `linkfs share`, a browser and a `linkfs mount` open at once, inside the network
// namespace that tests-e2e/run sets up. The LAST stdout line is one JSON object:
//
//   change_to_browser_ms / change_to_mount_ms   {p50, p99, max, missed} over
//       LIVE_BENCH_CHANGES (200) changes made one at a time, a quarter each of:
//       create, append, rename, delete. From the change on disk until the page's
//       lookup shows it (size and all) / until `stat` on the mount does.
//   burst                  LIVE_BENCH_BURST (10,000) files written at once into a new
//       folder: seconds after the last write until the page / the mount list them all,
//       and index bytes on the wire per created entry.
//   wire_bytes_per_change  index bytes the page received per single change above.
//   reconnect_ms           {browser, native}: a dropped data link (SIGUSR1 to the
//       sharer) until the page is connected again / the mount says "reconnected",
//       LIVE_BENCH_DROPS (5) times each, median and max.
//   restart                the sharer stopped and started on the same folder: the
//       index bytes a page that had the index receives on reopening, against a
//       fresh visitor's, and the same link (true).
//   idle                   a share of LIVE_BENCH_IDLE_N (1,000,000; 0 skips) generated
//       entries, walked, then idle 10 s: CPU percent, and the RSS a watched share
//       holds beyond an unwatched one, per entry and per watched folder (plus the
//       kernel's inotify marks, from /proc/slabinfo when readable).
//
//   npm run bench:live        (or: bash tests-e2e/run live-bench)

import { appendFile, mkdir, mkdtemp, readFile, readdir, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { launchChromium, openLink, waitForState } from './lib/chromium.ts';
import { convergeIndex, convergeMount } from './lib/follow.ts';
import { generatedTree } from './lib/gen-tree.ts';
import { startMount, type MountProcess } from './lib/mount-process.ts';
import { scratchDir } from './lib/paths.ts';
import { startShare, type ShareProcess } from './lib/share-process.ts';
import { formatMismatch, indexWireBytes, waitForComplete } from './lib/verify.ts';

const log = (line: string) => console.error(line);
const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const envInt = (name: string, fallback: number) => {
  const v = process.env[name];
  return v === undefined || v === '' ? fallback : Number.parseInt(v, 10);
};

const CHANGES = envInt('LIVE_BENCH_CHANGES', 200);
const BURST = envInt('LIVE_BENCH_BURST', 10_000);
const DROPS = envInt('LIVE_BENCH_DROPS', 5);
const IDLE_N = envInt('LIVE_BENCH_IDLE_N', 1_000_000);
const WAIT_MS = 10_000;

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

function summary(samples: number[], missed: number): { p50: number; p99: number; max: number; samples: number; missed: number } {
  const s = [...samples].sort((a, b) => a - b);
  return { p50: round(percentile(s, 50)), p99: round(percentile(s, 99)), max: round(s[s.length - 1] ?? Number.NaN), samples: s.length, missed };
}

/** Polls `check` every 2 ms until it holds; milliseconds since `since`, or null after WAIT_MS. */
async function until(since: number, check: () => Promise<boolean>): Promise<number | null> {
  for (;;) {
    if (await check()) return performance.now() - since;
    if (performance.now() - since > WAIT_MS) return null;
    await sleep(2);
  }
}

/** What one change should look like once seen: a path with a size, or a path gone. */
type Expect = { path: string; size: number } | { path: string; gone: true };

async function pageShows(page: Page, e: Expect): Promise<number | null> {
  // Polled from here: page.evaluate awaits the lookup's promise (waitForFunction
  // would take the promise itself for a truthy answer).
  const since = performance.now();
  return until(since, () =>
    page.evaluate(async (x: Expect) => {
      const row = await window.linkfsShare!.lookup(x.path);
      return 'gone' in x ? row === null : row !== null && row.size === x.size;
    }, e),
  );
}

async function mountShows(mnt: string, e: Expect): Promise<number | null> {
  const since = performance.now();
  const p = path.join(mnt, e.path);
  return until(since, async () => {
    const st = await stat(p).catch(() => null);
    return 'gone' in e ? st === null : st !== null && st.size === e.size;
  });
}

/** One change at a time: create, append, rename, delete, in turn, under lat/. */
async function changeLatencies(page: Page, dir: string, mnt: string) {
  const browser: number[] = [];
  const mount: number[] = [];
  let missedBrowser = 0;
  let missedMount = 0;
  const wireBefore = (await indexWireBytes(page)) ?? 0;
  for (let i = 0; i < CHANGES; i += 1) {
    const at = (name: string) => path.join(dir, 'lat', name);
    let expect: Expect;
    switch (i % 4) {
      case 0:
        await writeFile(at(`f-${i}.txt`), `created ${i}\n`);
        expect = { path: `lat/f-${i}.txt`, size: (await stat(at(`f-${i}.txt`))).size };
        break;
      case 1:
        await appendFile(at(`f-${i - 1}.txt`), `appended ${i}\n`);
        expect = { path: `lat/f-${i - 1}.txt`, size: (await stat(at(`f-${i - 1}.txt`))).size };
        break;
      case 2:
        await rename(at(`f-${i - 2}.txt`), at(`r-${i}.txt`));
        expect = { path: `lat/r-${i}.txt`, size: (await stat(at(`r-${i}.txt`))).size };
        break;
      default:
        await unlink(at(`r-${i - 1}.txt`));
        expect = { path: `lat/r-${i - 1}.txt`, gone: true };
    }
    const [b, m] = await Promise.all([pageShows(page, expect), mountShows(mnt, expect)]);
    if (b === null) missedBrowser += 1;
    else browser.push(b);
    if (m === null) missedMount += 1;
    else mount.push(m);
    if ((i + 1) % 50 === 0) log(`live-bench: ${i + 1}/${CHANGES} changes`);
  }
  const wire = ((await indexWireBytes(page)) ?? 0) - wireBefore;
  return {
    change_to_browser_ms: summary(browser, missedBrowser),
    change_to_mount_ms: summary(mount, missedMount),
    wire_bytes_per_change: round(wire / CHANGES),
  };
}

async function burst(page: Page, dir: string, mnt: string) {
  const wireBefore = (await indexWireBytes(page)) ?? 0;
  await mkdir(path.join(dir, 'burst'));
  for (let n = 0; n < BURST; n += 500) {
    await Promise.all(Array.from({ length: Math.min(500, BURST - n) }, (_, k) => writeFile(path.join(dir, 'burst', `b-${n + k}.txt`), `${n + k}`)));
  }
  const lastWrite = performance.now();
  const [browser, mount] = await Promise.all([
    until(lastWrite, async () => (await page.evaluate(async () => (await window.linkfsShare!.lookup('burst'))?.children ?? 0)) === BURST),
    until(lastWrite, async () => (await readdir(path.join(mnt, 'burst')).catch(() => [])).length === BURST),
  ]);
  const wire = ((await indexWireBytes(page)) ?? 0) - wireBefore;
  return {
    files: BURST,
    browser_seconds_after_last_write: browser === null ? null : round(browser / 1000, 3),
    mount_seconds_after_last_write: mount === null ? null : round(mount / 1000, 3),
    wire_bytes_per_entry: round(wire / (BURST + 1)),
  };
}

async function reconnects(page: Page, s: ShareProcess, m: MountProcess) {
  const browser: number[] = [];
  const native: number[] = [];
  let nativeBack: (() => void) | null = null;
  m.process.onStderrLine((line) => {
    if (line.includes('reconnected to the sharer')) nativeBack?.();
  });
  for (let d = 0; d < DROPS; d += 1) {
    const nativeDone = new Promise<number>((resolve) => {
      nativeBack = () => resolve(performance.now());
    });
    const t0 = performance.now();
    process.kill(s.pid, 'SIGUSR1');
    await page.waitForFunction(() => window.linkfsShare!.status().state !== 'connected', undefined, { polling: 2, timeout: WAIT_MS });
    await page.waitForFunction(() => window.linkfsShare!.status().state === 'connected', undefined, { polling: 2, timeout: 30_000 });
    browser.push(performance.now() - t0);
    const back = await Promise.race([nativeDone, sleep(30_000).then(() => null)]);
    if (back === null) throw new Error(`the mount did not say it reconnected within 30 s of drop ${d + 1}`);
    native.push(back - t0);
    await sleep(500);
  }
  const s2 = (xs: number[]) => ({ median: round(percentile([...xs].sort((a, b) => a - b), 50)), max: round(Math.max(...xs)) });
  return { drops: DROPS, browser: s2(browser), native: s2(native) };
}

async function restart(page: Page, s: ShareProcess, dir: string) {
  await s.stop();
  const again = await startShare(dir);
  const fresh = await launchChromium({ name: 'fresh', log });
  try {
    const freshPage = await fresh.page();
    await openLink(freshPage, again.link, ['connected']);
    await waitForComplete(freshPage, again.spawnedAt, 60_000);
    const freshBytes = (await indexWireBytes(freshPage)) ?? 0;
    await page.reload();
    await waitForState(page, ['connected'], 20_000);
    await waitForComplete(page, again.spawnedAt, 30_000);
    const c = await convergeIndex(page, dir, WAIT_MS);
    if (c.mismatches.length > 0) throw new Error(`after the restart the page differs from the folder: ${c.mismatches.slice(0, 5).map(formatMismatch).join('; ')}`);
    const reopenBytes = (await indexWireBytes(page)) ?? 0;
    return {
      same_link: again.link === s.link,
      reopen_index_bytes: reopenBytes,
      fresh_visit_index_bytes: freshBytes,
      percent_of_fresh: round((100 * reopenBytes) / Math.max(1, freshBytes), 2),
      share: again,
    };
  } finally {
    await fresh.close();
  }
}

/** utime+stime of a process, in clock ticks (100 per second on Linux). */
async function cpuTicks(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

async function rss(pid: number): Promise<number> {
  const kb = /VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb ?? 0) * 1024;
}

/** Bytes the kernel holds in inotify marks, from /proc/slabinfo (null when not readable). */
async function inotifySlabBytes(): Promise<number | null> {
  const text = await readFile('/proc/slabinfo', 'utf8').catch(() => null);
  const line = text?.split('\n').find((l) => l.startsWith('inotify_inode_mark '));
  if (line === undefined) return null;
  const f = line.split(/\s+/);
  return Number(f[1]) * Number(f[3]);
}

async function idleShare(dir: string, watch: boolean) {
  const slabBefore = await inotifySlabBytes();
  const s = await startShare(dir, { args: watch ? [] : ['--no-watch'], env: { LINKFS_STATE_DIR: await mkdtemp(path.join(scratchDir, 'idle-state-')) } });
  let folders = 0;
  let entries = 0;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the share of ${dir} did not finish indexing in 600 s`)), 600_000);
    s.process.onStderrLine((line) => {
      const m = /^indexed (\d+) entries \((\d+) files, (\d+) folders/.exec(line);
      if (m !== null) {
        entries = Number(m[1]);
        folders = Number(m[3]);
        clearTimeout(timer);
        resolve();
      }
    });
  });
  await sleep(2_000);
  const t0 = await cpuTicks(s.pid);
  const w0 = performance.now();
  await sleep(10_000);
  const cpuPercent = ((await cpuTicks(s.pid)) - t0) / ((performance.now() - w0) / 1000);
  const rssBytes = await rss(s.pid);
  const slabAfter = await inotifySlabBytes();
  await s.stop(30_000);
  return { entries, folders, cpu_percent: round(cpuPercent, 2), rss_bytes: rssBytes, kernel_inotify_bytes: slabBefore === null || slabAfter === null ? null : slabAfter - slabBefore };
}

async function idle() {
  if (IDLE_N <= 0) return null;
  const dir = await generatedTree(IDLE_N);
  log(`live-bench: idle share of ${IDLE_N} generated entries, without and with watching`);
  const unwatched = await idleShare(dir, false);
  const watched = await idleShare(dir, true);
  const extra = watched.rss_bytes - unwatched.rss_bytes;
  return {
    entries: watched.entries,
    watched_folders: watched.folders,
    cpu_percent_watched: watched.cpu_percent,
    cpu_percent_unwatched: unwatched.cpu_percent,
    rss_bytes_watched: watched.rss_bytes,
    rss_bytes_unwatched: unwatched.rss_bytes,
    extra_rss_bytes_per_entry: round(extra / Math.max(1, watched.entries), 2),
    extra_rss_bytes_per_folder: round(extra / Math.max(1, watched.folders)),
    kernel_inotify_bytes_per_folder: watched.kernel_inotify_bytes === null ? null : round(watched.kernel_inotify_bytes / Math.max(1, watched.folders)),
  };
}

async function main(): Promise<void> {
  await mkdir(scratchDir, { recursive: true });
  const dir = await mkdtemp(path.join(scratchDir, 'live-bench-'));
  const mnt = await mkdtemp(path.join(scratchDir, 'live-bench-mnt-'));
  const chromium = await launchChromium({ name: 'live-bench', log });
  let share: ShareProcess | null = null;
  let mount: MountProcess | null = null;
  try {
    await mkdir(path.join(dir, 'lat'));
    for (let f = 0; f < 10; f += 1) {
      await mkdir(path.join(dir, `seed-${f}`));
      await Promise.all(Array.from({ length: 100 }, (_, n) => writeFile(path.join(dir, `seed-${f}`, `s-${n}.txt`), `${f}/${n}\n`)));
    }
    share = await startShare(dir);
    const page = await chromium.page();
    await openLink(page, share.link, ['connected']);
    await waitForComplete(page, share.spawnedAt, 60_000);
    mount = await startMount(share.link, mnt);
    const m0 = await convergeMount(mnt, dir, 30_000);
    if (m0.mismatches.length > 0) throw new Error(`the mount differs from the folder before any change: ${m0.mismatches.slice(0, 5).map(formatMismatch).join('; ')}`);
    log('live-bench: single changes');
    const single = await changeLatencies(page, dir, mnt);
    log('live-bench: burst');
    const burstFigures = await burst(page, dir, mnt);
    log('live-bench: dropped links');
    const reconnect = await reconnects(page, share, mount);
    await mount.stop();
    mount = null;
    log('live-bench: restart');
    const restarted = await restart(page, share, dir);
    share = restarted.share;
    const { share: _, ...restartFigures } = restarted;
    await share.stop();
    share = null;
    const idleFigures = await idle();
    const figures = { date: new Date().toISOString(), ...single, burst: burstFigures, reconnect_ms: reconnect, restart: restartFigures, idle: idleFigures };
    console.log(JSON.stringify(figures));
  } finally {
    await mount?.kill();
    await share?.kill();
    await chromium.close();
    await rm(dir, { recursive: true, force: true });
    await rm(mnt, { recursive: true, force: true }).catch(() => undefined);
  }
}

await main();

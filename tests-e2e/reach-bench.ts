// Figures for "reach" (npm run bench:reach = tests-e2e/run reach-bench), one JSON line:
//
//   connect_ms        link opened in Chromium -> data channel open, with the sharer on the
//                     same relay as the page and on another relay of a Redis fleet (medians
//                     of REACH_CONNECTS alternating attempts, default 7) and their ratio
//   turn_loopback     `linkfs get` of a 200 MiB file direct and through coturn (--ice-policy
//                     relay), MB/s, same run
//   rtt_20ms          through coturn behind linkfs-udp-delay, the visitor forced through
//                     TURN (--ice-policy relay) and the sharer sending straight to the relayed
//                     address (10 ms each way on the visitor's leg: 20 ms more per round trip):
//                     a 100,000-file tree's index complete (the mount is ready), first byte of
//                     small files on the mount (p50/p99 of 100), and bulk MB/s via `get` and
//                     the mount
//   rtt_20ms_both_relayed
//                     the same with the sharer forced through TURN too (`linkfs share
//                     --ice-policy relay`), 5 ms each way on each leg: every packet crosses the
//                     forwarder twice, so the round trip is again 20 ms more, and no packet
//                     reaches coturn at loopback speed (on a real path none does)
//
// Every process is real and inside the test namespace; nothing is asserted but that
// each step worked. REACH_ONLY=rtt_20ms,... runs only the figures named.

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, open, readdir, rm, stat, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { exitWithin, killHard, spawnTracked } from './lib/child.ts';
import { launchChromium, waitForState } from './lib/chromium.ts';
import { generatedTree } from './lib/gen-tree.ts';
import { startMount } from './lib/mount-process.ts';
import { binary, scratchDir } from './lib/paths.ts';
import { freePort, startRelay } from './lib/relay-process.ts';
import { nsAddr, startCoturn, startRedis } from './lib/services.ts';
import { startShare } from './lib/share-process.ts';

const log = (line: string) => console.error(line);
const cleanups: Array<() => unknown> = [];
const later = (fn: () => unknown) => cleanups.push(fn);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
}

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
}

/** `linkfs get LINK --out DIR ARGS`: MB/s as it reports it. */
async function getRate(link: string, rel: string, args: string[]): Promise<number> {
  const out = await mkdtemp(path.join(scratchDir, 'reach-bench-get-'));
  try {
    const proc = spawnTracked('get', binary('linkfs'), ['get', link, rel, '--out', out, ...args]);
    const exit = await exitWithin(proc, 300_000);
    if (exit === null || exit.code !== 0) {
      if (exit === null) await killHard(proc);
      throw new Error(`linkfs get ${args.join(' ')} failed:\n${proc.stderrTail()}`);
    }
    const m = /\(([\d.]+) MB\/s\)/.exec(proc.stderrTail());
    if (m === null) throw new Error(`no MB/s in linkfs get's output:\n${proc.stderrTail()}`);
    return Number(m[1]);
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

async function connectTimes(): Promise<Record<string, number>> {
  const redis = await startRedis();
  later(() => redis.stop());
  const a = await startRelay({ args: ['--redis', redis.url] });
  later(() => a.stop());
  const b = await startRelay({ args: ['--redis', redis.url] });
  later(() => b.stop());
  const dir = await mkdtemp(path.join(scratchDir, 'reach-bench-small-'));
  later(() => rm(dir, { recursive: true, force: true }));
  await writeFile(path.join(dir, 'a.txt'), 'hello\n');
  const s = await startShare(dir, { args: ['--relay', a.url, '--no-qr'] });
  later(() => s.kill());
  const chromium = await launchChromium({ name: 'reach-bench', log });
  later(() => chromium.close());
  const hash = new URL(s.link).hash;
  const same: number[] = [];
  const across: number[] = [];
  const rounds = Number(process.env.REACH_CONNECTS ?? 7);
  for (let i = 0; i < rounds * 2; i += 1) {
    const origin = i % 2 === 0 ? a.url : b.url;
    const page = await chromium.page();
    const t0 = performance.now();
    await page.goto(`${origin}/${hash}`, { waitUntil: 'domcontentloaded' });
    await waitForState(page, ['connected'], 30_000);
    (i % 2 === 0 ? same : across).push(performance.now() - t0);
    await page.close();
  }
  return { same_relay: Math.round(median(same)), across_relays: Math.round(median(across)), ratio: Math.round((median(across) / median(same)) * 100) / 100 };
}

async function bulkFile(mib: number): Promise<string> {
  const dir = path.join(scratchDir, `reach-bench-bulk-${mib}`);
  const file = path.join(dir, 'bulk.bin');
  if ((await stat(file).catch(() => null))?.size !== mib << 20) {
    await mkdir(dir, { recursive: true });
    const f = await open(file, 'w');
    for (let i = 0; i < mib; i += 1) await f.write(randomBytes(1 << 20));
    await f.close();
  }
  return dir;
}

async function turnLoopback(): Promise<Record<string, number>> {
  const secret = randomBytes(12).toString('hex');
  const turn = await startCoturn(secret);
  later(() => turn.stop());
  const dir = await bulkFile(200);
  const s = await startShare(dir, { args: ['--no-qr', '--turn-secret', secret, '--turn-url', turn.url] });
  later(() => s.kill());
  const direct = await getRate(s.link, 'bulk.bin', []);
  const relayed = await getRate(s.link, 'bulk.bin', ['--ice-policy', 'relay']);
  return { direct_mb_per_s: direct, relayed_mb_per_s: relayed };
}

const rtt20 = () => rttPath(10, []);
const rtt20BothRelayed = () => rttPath(5, ['--ice-policy', 'relay']);

async function rttPath(delayMs: number, shareArgs: string[]): Promise<Record<string, unknown>> {
  const secret = randomBytes(12).toString('hex');
  const turn = await startCoturn(secret);
  later(() => turn.stop());
  const port = await freePort();
  const delay = spawnTracked('udp-delay', path.join(path.dirname(binary('linkfs')), 'linkfs-udp-delay'), ['--listen', `${nsAddr}:${port}`, '--to', `${nsAddr}:${turn.port}`, '--delay-ms', String(delayMs)]);
  later(() => killHard(delay));
  await new Promise((r) => setTimeout(r, 300));
  const turnUrl = `turn:${nsAddr}:${port}`;
  const tree = await generatedTree(100_000);
  const s = await startShare(tree, { args: ['--no-qr', '--turn-secret', secret, '--turn-url', turnUrl, ...shareArgs] });
  later(() => s.kill());
  const mnt = await mkdtemp(path.join(scratchDir, 'reach-bench-mnt-'));
  const t0 = performance.now();
  const m = await startMount(s.link, mnt, 120_000, ['--ice-policy', 'relay']);
  const indexSeconds = (performance.now() - t0) / 1000;
  later(async () => {
    await m.kill();
    await rm(mnt, { recursive: true, force: true });
  });
  // Small files across the tree, each opened and read once (never read before).
  const small: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      if (small.length >= 100) return;
      const p = path.join(dir, e.name);
      if (e.isDirectory() && !e.name.startsWith('big-')) await walk(p);
      else if (e.isFile() && (await stat(p)).size > 0 && (await stat(p)).size <= 4096) small.push(p);
    }
  };
  await walk(mnt);
  const firstByte: number[] = [];
  for (const p of small) {
    const t = performance.now();
    const f = await open(p, 'r');
    await f.read(Buffer.alloc(1), 0, 1, 0);
    firstByte.push(performance.now() - t);
    await f.close();
  }
  await m.stop();
  const bulkDir = await bulkFile(200);
  const sb = await startShare(bulkDir, { args: ['--no-qr', '--turn-secret', secret, '--turn-url', turnUrl, ...shareArgs] });
  later(() => sb.kill());
  const getMb = await getRate(sb.link, 'bulk.bin', ['--ice-policy', 'relay']);
  const mnt2 = await mkdtemp(path.join(scratchDir, 'reach-bench-mnt-'));
  const m2 = await startMount(sb.link, mnt2, 120_000, ['--ice-policy', 'relay']);
  later(async () => {
    await m2.kill();
    await rm(mnt2, { recursive: true, force: true });
  });
  const t1 = performance.now();
  const cat = spawnSync('cat', [path.join(mnt2, 'bulk.bin')], { stdio: ['ignore', 'ignore', 'pipe'], maxBuffer: 1 << 20 });
  if (cat.status !== 0) throw new Error(`cat through the mount failed: ${cat.stderr}`);
  const mountMb = (200 * 1048576) / 1e6 / ((performance.now() - t1) / 1000);
  await m2.stop();
  return {
    round_trip_added_ms: shareArgs.length > 0 ? 4 * delayMs : 2 * delayMs,
    index_100k_seconds: Math.round(indexSeconds * 100) / 100,
    first_byte_ms: { n: firstByte.length, p50: Math.round(quantile(firstByte, 0.5) * 10) / 10, p99: Math.round(quantile(firstByte, 0.99) * 10) / 10 },
    get_mb_per_s: getMb,
    mount_mb_per_s: Math.round(mountMb * 10) / 10,
  };
}

// REACH_ONLY=name,name runs only those figures.
const only = process.env.REACH_ONLY?.split(',').filter((n) => n !== '');
let code = 0;
const figures: Record<string, unknown> = {};
try {
  for (const [name, run] of [['connect_ms', connectTimes], ['turn_loopback', turnLoopback], ['rtt_20ms', rtt20], ['rtt_20ms_both_relayed', rtt20BothRelayed]] as const) {
    if (only && !only.includes(name)) continue;
    log(`reach-bench: ${name} ...`);
    try {
      figures[name] = await run();
    } catch (e) {
      figures[name] = { error: e instanceof Error ? e.message : String(e) };
      code = 1;
    }
    log(`reach-bench: ${name} ${JSON.stringify(figures[name])}`);
    for (const fn of cleanups.splice(0).reverse()) await Promise.resolve().then(fn).catch(() => undefined);
  }
} finally {
  for (const fn of cleanups.reverse()) await Promise.resolve().then(fn).catch(() => undefined);
}
console.log(JSON.stringify(figures));
process.exit(code);

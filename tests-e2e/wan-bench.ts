// Figures at a distance (npm run bench:wan = tests-e2e/run wan-bench): on each path
// below, two network namespaces joined by linkfs-wan (delay each way, a bottleneck
// with a drop-tail queue of one BDP, random loss), the sharer on the near side and
// every receiver on the far side. One JSON object on the last stdout line, per path:
//
//   tcp_mb_per_s            iperf3 -C bbr, near -> far, 8 s: the reference (BBR: this
//                           machine's default, and it ignores random loss)
//   tcp_cubic_mb_per_s      iperf3 -C cubic, the same: what most desktops run (CUBIC
//                           backs off on every loss); tcp_congestion names both as run
//   sshfs_mb_per_s          `cat` of the bulk file on an sshfs mount (Debian's sshd and sshfs)
//   get_mb_per_s            `linkfs get` of the bulk file
//   mount_mb_per_s          `cat` of the bulk file on a `linkfs mount`
//   browser_mb_per_s        Chromium saving the bulk file through the page
//                           (LINK=... npm run e2e:download, run in the far namespace)
//   browser_pair_mb_per_s   the browser's own ceiling: Chromium to Chromium over a plain
//                           data channel, as many bytes (tests-e2e/browser-pair.ts; not
//                           through coturn)
//   far_udp_receive_drops   per step, datagrams the far side's UDP sockets dropped for a
//                           full receive buffer (a receiver that did not keep up);
//                           near_udp_receive_drops the same on the near side (the
//                           sharer's sockets, and coturn's on the TURN path)
//   *_vs_tcp, *_vs_cubic    each of those as a ratio to TCP (BBR) and to TCP (CUBIC)
//                           in the same run
//   first_byte_during_bulk_ms   {p50, p99} of opening and reading the first byte of 40
//                           small files (WAN_FIRST_BYTE_N, at most 100) on the mount while a
//                           bulk read of another file runs (last to first, so the mount's
//                           fetching ahead never serves one), and the four slowest (with 40,
//                           p99 is the slowest)
//   small_files_200_seconds reading 200 small files one after another on the mount
//   put_mb_per_s            `linkfs put` of the bulk file from the far side (an upload
//                           link; put_vs_get: as a ratio to the download on the same path)
//   browser_put_mb_per_s    Chromium on the far side adding the bulk file through the page
//                           (browser_put_vs_save: against the same page saving it back;
//                           browser_put_lanes: the most lanes the page showed meanwhile)
//   index_100k_seconds      a 100,000-file tree: `linkfs ls -R` until the index is complete
//   small_*                 many small files (WAN_SMALL_N, default 100,000 of 1 KiB), copied
//                           whole to the far side: small_get_files_per_s (`linkfs get` of
//                           a share of them), small_rsync_files_per_s (`rsync -a` over ssh),
//                           small_sshfs_cp_files_per_s (`cp -r` from an sshfs mount, stopped
//                           after WAN_SMALL_CP_S s, default 120), each from its start
//                           (connecting, listing) to its end; small_get_vs_*: ratios
//   sharer_peak_rss_mib / mount_peak_rss_mib    the processes' peak RSS after it all
//   cpu                     per step (tcp_bbr, tcp_cubic, sshfs, get, put, mount, browser):
//                           each side's CPU seconds per GB moved (sender or sharer,
//                           receiver, and the line, linkfs-wan), and cores_busy, the CPU
//                           seconds of all of them per wall second, and machine_cores_busy,
//                           the whole machine's (the kernel's network work included): this
//                           machine has 2 cores, so near 2 the step was CPU bound.
//                           iperf3's own figures come from its -J cpu_utilization_percent;
//                           the browser's receiver is Chromium with its node driver;
//                           sharer_switches_per_s: the sharer's context switches a second.
//
// Steps (WAN_STEPS=sshfs,get,put,mount,browser,browser_put,browser_pair,small,index runs only those, and
// `small` runs only when named; TCP always
// runs, it sizes the bulk file; `mount` covers the mount's three figures).
// Paths (WAN_ONLY=name,... runs only those): host_1g (no delay: one host), rtt5_1g (5 ms, 1 Gbit/s), rtt20_200m, rtt20_100m,
// rtt20_200m_loss0.1, rtt50_200m, rtt100_100m_loss0.5, rtt20_200m_turn (both peers
// through coturn, on the near side). The bulk file is sized from TCP's rate on the
// path (about 8 s of it, 16-256 MiB). WAN_SOCKETS=desktop caps UDP socket buffers at a
// desktop's 212,992 bytes (net.core.rmem_max/wmem_max, restored afterwards) for the
// run; WAN_SOCKETS=both runs every path both ways. WAN_VISIT_ARGS="--lanes 0" adds
// arguments to every `linkfs get` and mount (split on spaces). WAN_GET_FILE=bulk2.bin makes
// `get` fetch the second bulk file (twice the bytes: what a read's start costs shows as the
// difference). WAN_GET_TRACE=1 prints `get`'s progress as `ss.mmm:MB` pairs (wall-clock
// seconds, bytes on disk, every 50 ms) to set beside its log's times. Nothing is asserted
// but that each step worked; a step that fails reports its error and the others go on.

import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, open, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { exitWithin, killHard, spawnTracked } from './lib/child.ts';
import { CpuClock, cpuFigures, cpuFromStderr, treeContextSwitches, withCpu } from './lib/cpu-time.ts';
import { generatedTree } from './lib/gen-tree.ts';
import { startMount } from './lib/mount-process.ts';
import { binary, binDir, repoRoot, scratchDir } from './lib/paths.ts';
import { startShare, type ShareProcess } from './lib/share-process.ts';
import { inNs, NEAR_ADDR, openWanLine } from './lib/wan-line.ts';

const log = (line: string) => console.error(line);
const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface WanPath {
  name: string;
  delayMs: number;
  rateMbit: number;
  lossPct: number;
  /** Both peers only through coturn (on the near side). */
  turn?: boolean;
}

const PATHS: WanPath[] = [
  // Both sides on this machine: the line adds no delay (the many-small figures "on one host").
  { name: 'host_1g', delayMs: 0, rateMbit: 1000, lossPct: 0 },
  { name: 'rtt5_1g', delayMs: 2.5, rateMbit: 1000, lossPct: 0 },
  { name: 'rtt20_200m', delayMs: 10, rateMbit: 200, lossPct: 0 },
  // Where the line, the sharer and a browser do not saturate this machine's 2 cores.
  { name: 'rtt20_100m', delayMs: 10, rateMbit: 100, lossPct: 0 },
  { name: 'rtt20_200m_loss0.1', delayMs: 10, rateMbit: 200, lossPct: 0.1 },
  { name: 'rtt50_200m', delayMs: 25, rateMbit: 200, lossPct: 0 },
  { name: 'rtt100_100m_loss0.5', delayMs: 50, rateMbit: 100, lossPct: 0.5 },
  { name: 'rtt20_200m_turn', delayMs: 10, rateMbit: 200, lossPct: 0, turn: true },
];

const DESKTOP_SOCKET_MAX = 212_992;

const cleanups: Array<() => unknown> = [];
const later = (fn: () => unknown) => cleanups.push(fn);
async function cleanUp(): Promise<void> {
  for (const fn of cleanups.splice(0).reverse()) await Promise.resolve().then(fn).catch(() => undefined);
}

function run(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status ?? r.signal}): ${r.stderr.trim()}`);
  return r.stdout;
}

/** The far and near namespaces of the path being measured. */
let farNs: string | null = null;
let nearNs: string | null = null;

/** Datagrams the namespace's UDP sockets dropped for a full receive buffer (RcvbufErrors). */
function udpReceiveDrops(ns: string): number {
  const [c, a] = inNs(ns, 'cat', ['/proc/net/snmp']);
  const lines = run(c, a).split('\n').filter((l) => l.startsWith('Udp: '));
  const names = lines[0]?.split(/\s+/) ?? [];
  const values = lines[1]?.split(/\s+/) ?? [];
  const i = names.indexOf('RcvbufErrors');
  return i < 0 ? 0 : Number(values[i]);
}

/**
 * Runs a command in a namespace to its end (at most `ms`); its stdout, and with `cpu`
 * the CPU seconds it and its descendants used (`cpuSeconds`, else null).
 */
async function runIn(
  ns: string,
  name: string,
  cmd: string,
  args: string[],
  ms: number,
  cpu = false,
): Promise<{ stdout: string; stderr: string; seconds: number; cpuSeconds: number | null }> {
  const [c, a] = cpu ? inNs(ns, ...withCpu(cmd, args)) : inNs(ns, cmd, args);
  const t0 = performance.now();
  const p = spawnTracked(name, c, a);
  const exit = await exitWithin(p, ms);
  if (exit === null) {
    await killHard(p);
    throw new Error(`${cmd} did not finish within ${ms / 1000} s`);
  }
  if (exit.code !== 0) {
    // A bench script says why in its last stdout line (its JSON's `error`) as well.
    const said = p.stdout.join('\n').trim().split('\n').pop() ?? '';
    throw new Error(`${cmd} ${args.join(' ')} failed (exit ${String(exit.code)}): ${p.stderrTail()}${said === '' ? '' : ` | last output: ${said.slice(0, 2000)}`}`);
  }
  // 'exit' can come before the last stderr lines are read: the CPU line is the last.
  for (let i = 0; cpu && i < 50 && cpuFromStderr(p.stderrTail()) === null; i += 1) await sleep(10);
  const stderr = p.stderrTail();
  return { stdout: p.stdout.join('\n'), stderr, seconds: (performance.now() - t0) / 1000, cpuSeconds: cpu ? cpuFromStderr(stderr) : null };
}

/** Two fresh namespaces and a linkfs-wan line between them, for one path. */
async function line(p: WanPath): Promise<{ near: string; far: string; pid: number }> {
  const l = await openWanLine(p);
  later(async () => {
    const counts = await l.close();
    if (counts) log(`wan-bench: ${p.name}: the line carried ${counts}`);
  });
  return l;
}

/**
 * iperf3 near -> far for 8 s with TCP congestion control `cc` (-C; in reverse mode the
 * near side sends and iperf3 applies it there): MB/s, and the algorithm the sender
 * reports it used.
 */
async function tcpRate(near: string, far: string, cc: 'bbr' | 'cubic', linePid: number): Promise<{ mbPerS: number; used: string; cpu: Record<string, number | null> }> {
  const [c, a] = inNs(near, 'iperf3', ['-s', '-1', '-B', NEAR_ADDR]);
  const server = spawnTracked('iperf3-s', c, a);
  later(() => killHard(server));
  await sleep(400);
  const clock = new CpuClock({ line: [linePid] });
  const r = await runIn(far, 'iperf3-c', 'iperf3', ['-c', NEAR_ADDR, '-R', '-J', '-t', '8', '-C', cc], 60_000);
  const json = JSON.parse(r.stdout) as {
    end: {
      sum_received: { bits_per_second: number; bytes: number; seconds: number };
      sender_tcp_congestion?: string;
      // In reverse mode the remote (the server, near) sends and the host receives.
      cpu_utilization_percent?: { host_total: number; remote_total: number };
    };
  };
  await exitWithin(server, 5_000).catch(() => undefined);
  const { bytes, seconds } = json.end.sum_received;
  const util = json.end.cpu_utilization_percent;
  const used = clock.read();
  const cpu = cpuFigures(
    bytes,
    seconds,
    {
      sender: util ? (util.remote_total / 100) * seconds : null,
      receiver: util ? (util.host_total / 100) * seconds : null,
      line: used.cpu.line!,
    },
    // iperf3's start and end around its `seconds`: the machine's share of them, scaled.
    (used.machine * seconds) / used.wall,
  );
  return { mbPerS: json.end.sum_received.bits_per_second / 8e6, used: json.end.sender_tcp_congestion ?? 'unreported', cpu };
}

/**
 * A folder with a bulk file (random bytes) of `mib` MiB, a second one of twice that
 * (read while the small files' first bytes are timed: it must outlast 40 of them on
 * a lossy path), and small files.
 */
async function bulkDir(mib: number): Promise<string> {
  const dir = path.join(scratchDir, `wan-bench-${mib}`);
  const marker = `${dir}.done`;
  if ((await readFile(marker, 'utf8').catch(() => '')) === 'v2') return dir;
  await rm(dir, { recursive: true, force: true });
  await mkdir(path.join(dir, 'small'), { recursive: true });
  for (const [name, size] of [['bulk.bin', mib], ['bulk2.bin', 2 * mib]] as const) {
    const f = await open(path.join(dir, name), 'w');
    for (let i = 0; i < size; i += 1) await f.write(randomBytes(1 << 20));
    await f.close();
  }
  for (let i = 0; i < 300; i += 1) await writeFile(path.join(dir, 'small', `s${String(i).padStart(3, '0')}.txt`), randomBytes(1000 + (i % 7) * 400));
  await writeFile(marker, 'v2');
  return dir;
}

/** A share of `dir` on the near side, reachable at the near address. */
async function share(near: string, dir: string, extra: string[]): Promise<ShareProcess> {
  const s = await startShare(dir, { netns: near, name: 'share', args: ['--no-qr', '--bind', `${NEAR_ADDR}:0`, ...extra] });
  later(() => s.kill());
  return s;
}

function peakRssMib(pid: number): Promise<number | null> {
  return readFile(`/proc/${pid}/status`, 'utf8')
    .then((t) => {
      const m = /VmHWM:\s+(\d+) kB/.exec(t);
      return m ? round(Number(m[1]) / 1024, 1) : null;
    })
    .catch(() => null);
}

/** `linkfs get` of `rel` on the far side: MB/s as it reports it, and its CPU seconds. */
async function getRate(far: string, link: string, rel: string, extra: string[], ms: number): Promise<{ mbPerS: number; cpuSeconds: number | null }> {
  const out = await mkdtemp(path.join(scratchDir, 'wan-bench-get-'));
  try {
    const trace = process.env.WAN_GET_TRACE === undefined ? null : progressTrace(out);
    const r = await runIn(far, 'get', binary('linkfs'), ['get', link, rel, '--out', out, ...extra], ms, true);
    if (trace !== null) console.error(`wan-bench: get's progress ${trace()}`);
    const m = /\(([\d.]+) MB\/s\)/.exec(r.stderr);
    if (m === null) throw new Error(`no MB/s in linkfs get's output:\n${r.stderr}`);
    return { mbPerS: Number(m[1]), cpuSeconds: r.cpuSeconds };
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

/**
 * Samples the bytes on disk under `dir` every 50 ms (blocks, so a file written at
 * offsets counts what is there) until the returned function is called; it returns the
 * samples as `ss.mmm:MB`, wall-clock seconds within the minute.
 */
function progressTrace(dir: string): () => string {
  const samples: string[] = [];
  const onDisk = (d: string): number => {
    let n = 0;
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const f = path.join(d, e.name);
      try {
        n += e.isDirectory() ? onDisk(f) : statSync(f).blocks * 512;
      } catch {
        // renamed or removed meanwhile
      }
    }
    return n;
  };
  const timer = setInterval(() => {
    samples.push(`${new Date().toISOString().slice(17, 23)}:${(onDisk(dir) / 1e6).toFixed(1)}`);
  }, 50);
  return () => {
    clearInterval(timer);
    return samples.join(' ');
  };
}

/** `linkfs put` of `dir`/bulk.bin from the far side into the share: MB/s as it reports it, and its CPU seconds. */
async function putRate(far: string, link: string, dir: string, extra: string[], ms: number): Promise<{ mbPerS: number; cpuSeconds: number | null }> {
  const to = `uploaded-${randomBytes(4).toString('hex')}`;
  try {
    const r = await runIn(far, 'put', binary('linkfs'), ['put', link, path.join(dir, 'bulk.bin'), '--to', to, ...extra], ms, true);
    const m = /\(([\d.]+) MB\/s\)/.exec(r.stderr);
    if (m === null) throw new Error(`no MB/s in linkfs put's output:\n${r.stderr}`);
    return { mbPerS: Number(m[1]), cpuSeconds: r.cpuSeconds };
  } finally {
    await rm(path.join(dir, to), { recursive: true, force: true });
  }
}

/** Reads a whole file through the page cache-less path of a mount: MB/s. */
function catRate(file: string, bytes: number, ms: number): number {
  const t0 = performance.now();
  const r = spawnSync('cat', [file], { stdio: ['ignore', 'ignore', 'pipe'], timeout: ms });
  if (r.status !== 0) throw new Error(`cat ${file} failed (${r.status ?? r.signal}): ${String(r.stderr)}`);
  return bytes / 1e6 / ((performance.now() - t0) / 1000);
}

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
}

interface Sshd {
  work: string;
  pid: number;
  /** ssh's options to reach it from the far side as root with this run's key. */
  sshArgs: string[];
}

/** This path's sshd on the near side (a key made for this run), started on first use. */
let pathSshd: Promise<Sshd> | null = null;

function sshd(near: string): Promise<Sshd> {
  pathSshd ??= startSshd(near);
  return pathSshd;
}

async function startSshd(near: string): Promise<Sshd> {
  if (spawnSync('which', ['sshfs']).status !== 0 || spawnSync('test', ['-x', '/usr/sbin/sshd']).status !== 0) {
    throw new Error('sshfs or sshd is missing: apt-get install -y openssh-server sshfs');
  }
  const work = await mkdtemp(path.join(scratchDir, 'wan-bench-ssh-'));
  later(() => rm(work, { recursive: true, force: true }));
  run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(work, 'host')]);
  run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(work, 'user')]);
  await writeFile(path.join(work, 'authorized'), await readFile(path.join(work, 'user.pub')));
  await writeFile(
    path.join(work, 'sshd_config'),
    [`ListenAddress ${NEAR_ADDR}:2222`, `HostKey ${work}/host`, `AuthorizedKeysFile ${work}/authorized`, 'PermitRootLogin prohibit-password', 'PasswordAuthentication no', 'StrictModes no', 'UsePAM no', `PidFile ${work}/sshd.pid`, 'Subsystem sftp internal-sftp', ''].join('\n'),
  );
  await mkdir('/run/sshd', { recursive: true });
  const [c, a] = inNs(near, '/usr/sbin/sshd', ['-D', '-e', '-f', path.join(work, 'sshd_config')]);
  const daemon = spawnTracked('sshd', c, a);
  later(() => {
    pathSshd = null;
    return killHard(daemon);
  });
  await sleep(500);
  return { work, pid: daemon.child.pid ?? -1, sshArgs: ['-p', '2222', '-i', `${work}/user`, '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR'] };
}

/**
 * An sshfs mount of `dir` on the far side, through the path's sshd: the mount point,
 * sshd's pid and the sshfs daemon's (for their CPU time).
 */
async function sshfsMount(near: string, far: string, dir: string): Promise<{ mnt: string; sshdPid: number; sshfsPid: number }> {
  const d = await sshd(near);
  const mnt = await mkdtemp(path.join(d.work, 'mnt-'));
  await runIn(far, 'sshfs', 'sshfs', [`root@${NEAR_ADDR}:${dir}`, mnt, '-p', '2222', '-o', `IdentityFile=${d.work}/user,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null`], 30_000);
  later(() => spawnSync('umount', ['-l', mnt]));
  // sshfs forks into the background: find the daemon by its mount point.
  const pids = spawnSync('pgrep', ['-f', mnt], { encoding: 'utf8' }).stdout.split('\n').filter((l) => l !== '');
  const daemon = pids.find((pid) => spawnSync('cat', [`/proc/${pid}/comm`], { encoding: 'utf8' }).stdout.trim() === 'sshfs');
  return { mnt, sshdPid: d.pid, sshfsPid: Number(daemon ?? -1) };
}

/** Files of SMALL_BYTES in the many-small tree (WAN_SMALL_N, default 100,000), 1,000 a folder. */
const SMALL_N = Number(process.env.WAN_SMALL_N ?? 100_000);
// Small files read during bulk (the first 100 of the 300; the 200 after them are the
// small_files_200_seconds step's, so they must not be in the mount's cache).
const firstByteFiles = Math.min(100, Math.max(1, Number(process.env.WAN_FIRST_BYTE_N ?? 40)));
const SMALL_BYTES = 1024;

/** The many-small tree: SMALL_N files of 1 KiB of random bytes, made once and cached. */
async function smallTree(): Promise<string> {
  const dir = path.join(scratchDir, `wan-small-${SMALL_N}`);
  const marker = `${dir}.done`;
  const done = `${SMALL_N} files of ${SMALL_BYTES} bytes, 1000 a folder\n`;
  if ((await readFile(marker, 'utf8').catch(() => '')) === done) return dir;
  await rm(dir, { recursive: true, force: true });
  log(`wan-bench: making ${SMALL_N} files of ${SMALL_BYTES} bytes under ${dir} ...`);
  for (let i = 0; i < SMALL_N; i += 1) {
    const folder = path.join(dir, `d${Math.floor(i / 1000)}`);
    if (i % 1000 === 0) await mkdir(folder, { recursive: true });
    await writeFile(path.join(folder, `f${i}.bin`), randomBytes(SMALL_BYTES));
  }
  await writeFile(marker, done);
  return dir;
}

/** The files under `dir` and their bytes in all (a copy is checked against the source by these). */
function countFiles(dir: string): { files: number; bytes: number } {
  const out = run('find', [dir, '-type', 'f', '-printf', '%s\n']);
  const sizes = out.split('\n').filter((l) => l !== '');
  return { files: sizes.length, bytes: sizes.reduce((a, b) => a + Number(b), 0) };
}

/**
 * Copies the many-small tree to the far side three ways, each timed from its start
 * (connecting, listing) to its end: `linkfs get` of a share of it, `rsync -a` over ssh,
 * and `cp -r` from an sshfs mount (stopped after WAN_SMALL_CP_S seconds, default 120:
 * at one round trip or more per file it would take hours at a distance). Files per
 * second each; every copy is counted against the source.
 */
async function manySmall(near: string, far: string, f: Record<string, unknown>, shareArgs: string[], visitArgs: string[]): Promise<void> {
  const tree = await smallTree();
  const source = countFiles(tree);
  f.small_files = source.files;
  f.small_file_bytes = SMALL_BYTES;
  const copied = async (key: string, fn: (out: string) => Promise<void>, stoppedOk = false) => {
    const out = await mkdtemp(path.join(scratchDir, `wan-bench-${key}-`));
    try {
      // The step before's copy and its removal written out first: each starts on a quiet disk.
      spawnSync('sync');
      const t0 = performance.now();
      await fn(out);
      const seconds = (performance.now() - t0) / 1000;
      const got = countFiles(out);
      if (!stoppedOk && (got.files !== source.files || got.bytes !== source.bytes)) {
        throw new Error(`${key} copied ${got.files} files, ${got.bytes} bytes; the tree has ${source.files}, ${source.bytes}`);
      }
      f[`small_${key}_seconds`] = round(seconds);
      if (got.files < source.files) f[`small_${key}_files_copied`] = got.files;
      return round(got.files / seconds, 0);
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  };
  await step(f, 'small_get_files_per_s', async () => {
    const s = await share(near, tree, shareArgs);
    try {
      return await copied('get', async (out) => {
        await runIn(far, 'get', binary('linkfs'), ['get', s.link, '--out', out, ...visitArgs], 1_800_000);
      });
    } finally {
      await s.stop().catch(() => undefined);
    }
  });
  await step(f, 'small_rsync_files_per_s', async () => {
    if (spawnSync('which', ['rsync']).status !== 0) throw new Error('rsync is missing: apt-get install -y rsync');
    const d = await sshd(near);
    return copied('rsync', async (out) => {
      await runIn(far, 'rsync', 'rsync', ['-a', '-e', ['ssh', ...d.sshArgs].join(' '), `root@${NEAR_ADDR}:${tree}/`, `${out}/`], 1_800_000);
    });
  });
  await step(f, 'small_sshfs_cp_files_per_s', async () => {
    const limit = Number(process.env.WAN_SMALL_CP_S ?? 120);
    const m = await sshfsMount(near, far, tree);
    const rate = await copied(
      'sshfs_cp',
      async (out) => {
        const [c, a] = inNs(far, 'timeout', [String(limit), 'cp', '-r', `${m.mnt}/.`, out]);
        const r = spawnSync(c, a, { encoding: 'utf8' });
        if (r.status === 124) f.small_sshfs_cp_stopped_after_s = limit;
        else if (r.status !== 0) throw new Error(`cp -r from sshfs failed (${r.status ?? r.signal}): ${r.stderr.trim()}`);
      },
      true,
    );
    spawnSync('umount', ['-l', m.mnt]);
    return rate;
  });
  const get = f.small_get_files_per_s;
  for (const other of ['rsync', 'sshfs_cp']) {
    const v = f[`small_${other}_files_per_s`];
    if (typeof get === 'number' && typeof v === 'number' && v > 0) f[`small_get_vs_${other}`] = round(get / v);
  }
}

/** Chromium in the far namespace saving `rel` through the page: MB/s, and the CPU seconds of Chromium and its driver. */
async function browserRate(far: string, link: string, rel: string, ms: number): Promise<{ mbPerS: number; cpuSeconds: number | null }> {
  const out = await mkdtemp(path.join(scratchDir, 'wan-bench-browser-'));
  try {
    const tsx = path.join(repoRoot, 'node_modules', '.bin', 'tsx');
    const r = await runIn(far, 'browser', 'env', [`LINK=${link}`, tsx, path.join(repoRoot, 'tests-e2e', 'download.ts'), rel, '--out', path.join(out, 'file')], ms, true);
    const last = r.stdout.trim().split('\n').pop() ?? '';
    const json = JSON.parse(last) as { mb_per_s: number | null; error: string | null; lanes?: number };
    if (json.mb_per_s === null) throw new Error(json.error ?? 'no figure');
    log(`wan-bench:   the page read over ${String((json.lanes ?? 0) + 1)} connections (its link and the most lanes it showed)`);
    return { mbPerS: json.mb_per_s, cpuSeconds: r.cpuSeconds };
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

/** Chromium on the far side adding `dir`/bulk.bin through the page (an upload link): MB/s, and saving it back. */
async function browserPutRate(far: string, link: string, dir: string, ms: number): Promise<{ up: number; down: number; lanes: number }> {
  const before = new Set(await readdir(dir));
  try {
    const tsx = path.join(repoRoot, 'node_modules', '.bin', 'tsx');
    const r = await runIn(far, 'browser-put', 'env', [`LINK=${link}`, `UPLOAD_FILE=${path.join(dir, 'bulk.bin')}`, tsx, path.join(repoRoot, 'tests-e2e', 'upload-bench.ts')], ms);
    const json = JSON.parse(r.stdout.trim().split('\n').pop() ?? '') as { mb_per_s: number | null; download_mb_per_s?: number; landed?: string; lanes?: number; error: string | null };
    if (json.mb_per_s === null) throw new Error(json.error ?? 'no figure');
    const landed = path.join(dir, json.landed ?? '');
    if (spawnSync('cmp', ['-s', path.join(dir, 'bulk.bin'), landed]).status !== 0) throw new Error(`what landed (${json.landed}) is not bulk.bin`);
    return { up: json.mb_per_s, down: json.download_mb_per_s ?? Number.NaN, lanes: json.lanes ?? 0 };
  } finally {
    // A script killed on a timeout leaves its Chromium behind: its profile names it.
    spawnSync('pkill', ['-f', 'user-data-dir=.*chromium-upload-bench-']);
    for (const n of await readdir(dir)) if (!before.has(n)) await rm(path.join(dir, n), { recursive: true, force: true });
  }
}

/** Chromium in the near namespace sending `mib` to Chromium in the far one over a plain data channel: MB/s. */
async function browserPairRate(near: string, far: string, mib: number, ms: number): Promise<number> {
  const signal = await mkdtemp(path.join(scratchDir, 'wan-bench-pair-'));
  const tsx = path.join(repoRoot, 'node_modules', '.bin', 'tsx');
  const script = path.join(repoRoot, 'tests-e2e', 'browser-pair.ts');
  const args = ['--signal', signal, '--mib', String(mib)];
  const [c, a] = inNs(near, tsx, [script, 'send', ...args]);
  const sender = spawnTracked('pair-send', c, a);
  try {
    const r = await runIn(far, 'pair-receive', tsx, [script, 'receive', ...args], ms);
    const json = JSON.parse(r.stdout.trim().split('\n').pop() ?? '') as { mb_per_s: number };
    return json.mb_per_s;
  } finally {
    if ((await exitWithin(sender, 10_000)) === null) await killHard(sender);
    // A script killed on a timeout leaves its Chromium behind: its profile names it.
    spawnSync('pkill', ['-f', 'user-data-dir=.*chromium-pair-']);
    await rm(signal, { recursive: true, force: true });
  }
}

const onlySteps = process.env.WAN_STEPS?.split(',').filter((n) => n !== '');
/** Whether the step group `name` runs (WAN_STEPS). */
const wanted = (name: string) => onlySteps === undefined || onlySteps.includes(name);

/**
 * Runs `fn`, recording its value or its error under `key`, and what the far side's UDP
 * sockets dropped meanwhile under `far_udp_receive_drops` (a receiver that could not keep
 * up), the near side's under `near_udp_receive_drops` (the sharer's, or coturn's there).
 */
async function step<T>(figures: Record<string, unknown>, key: string, fn: () => Promise<T>): Promise<T | null> {
  log(`wan-bench:   ${key} ...`);
  const dropsBefore = farNs === null ? 0 : udpReceiveDrops(farNs);
  const nearBefore = nearNs === null ? 0 : udpReceiveDrops(nearNs);
  const drops = (figures.far_udp_receive_drops ??= {}) as Record<string, number>;
  const nearDrops = (figures.near_udp_receive_drops ??= {}) as Record<string, number>;
  try {
    const v = await fn();
    figures[key] = v;
    log(`wan-bench:   ${key} = ${JSON.stringify(v)}`);
    return v;
  } catch (e) {
    figures[key] = { error: e instanceof Error ? e.message.slice(0, 400) : String(e) };
    log(`wan-bench:   ${key} failed: ${String(e)}`);
    return null;
  } finally {
    if (farNs !== null) drops[key] = udpReceiveDrops(farNs) - dropsBefore;
    if (nearNs !== null) nearDrops[key] = udpReceiveDrops(nearNs) - nearBefore;
  }
}

async function measure(p: WanPath): Promise<Record<string, unknown>> {
  const f: Record<string, unknown> = { round_trip_ms: 2 * p.delayMs, rate_mbit: p.rateMbit, loss_percent: p.lossPct, turn: p.turn ?? false };
  const { near, far, pid: linePid } = await line(p);
  farNs = far;
  nearNs = near;
  const used: Record<string, string> = {};
  const cpu: Record<string, unknown> = {};
  f.cpu = cpu;
  const tcp =
    (await step(f, 'tcp_mb_per_s', async () => {
      const r = await tcpRate(near, far, 'bbr', linePid);
      used.bbr = r.used;
      cpu.tcp_bbr = r.cpu;
      return round(r.mbPerS);
    })) ?? 10;
  const cubic = await step(f, 'tcp_cubic_mb_per_s', async () => {
    const r = await tcpRate(near, far, 'cubic', linePid);
    used.cubic = r.used;
    cpu.tcp_cubic = r.cpu;
    return round(r.mbPerS);
  });
  f.tcp_congestion = used;
  const mib = Math.min(256, Math.max(16, Math.round((tcp * 8) / 16) * 16));
  f.bulk_mib = mib;
  const dir = await bulkDir(mib);
  const bytes = mib * 1048576;
  // Generous: a tenth of TCP's rate, and a minute more.
  const slow = Math.round((bytes / 1e6 / Math.max(0.5, tcp / 10)) * 1000) + 60_000;

  let shareArgs: string[] = [];
  let visitArgs: string[] = (process.env.WAN_VISIT_ARGS ?? '').split(' ').filter((a) => a !== '');
  if (p.turn) {
    const secret = randomBytes(12).toString('hex');
    const [c, a] = inNs(near, 'turnserver', [
      '-n', `--listening-ip=${NEAR_ADDR}`, '--listening-port=3478', `--relay-ip=${NEAR_ADDR}`, '--use-auth-secret', `--static-auth-secret=${secret}`,
      '--realm=linkfs.test', '--no-tls', '--no-dtls', '--no-tcp-relay', '--no-cli', '--log-file=stdout', '--min-port=40000', '--max-port=40999',
    ]);
    const turn = spawnTracked('coturn', c, a);
    later(() => killHard(turn));
    await sleep(700);
    shareArgs = ['--turn-secret', secret, '--turn-url', `turn:${NEAR_ADDR}:3478`, '--ice-policy', 'relay'];
    visitArgs = [...visitArgs, '--ice-policy', 'relay'];
  }

  if (wanted('sshfs')) {
    await step(f, 'sshfs_mb_per_s', async () => {
      const m = await sshfsMount(near, far, dir);
      const clock = new CpuClock({ sender: [m.sshdPid], receiver: [m.sshfsPid], line: [linePid] });
      try {
        const rate = catRate(path.join(m.mnt, 'bulk.bin'), bytes, slow);
        const used = clock.read();
        // `cat` itself is the reader's: left out, as it is for the mount.
        cpu.sshfs = cpuFigures(bytes, used.wall, used.cpu, used.machine);
        return round(rate);
      } finally {
        // Else its ssh client outlives the path (one left running per path).
        spawnSync('umount', ['-l', m.mnt]);
      }
    });
  }

  // The printed link takes uploads too (the put step).
  const s = await share(near, dir, [...shareArgs, '--allow-upload', '--label', 'wan-bench']);
  const link = p.turn ? `${s.link.split('#')[0]}?ice=relay#${s.link.split('#')[1]}` : s.link;
  /** Runs a step that moves `bytes`, recording the sharer's and the line's CPU time beside the receiver's (or sender's) own. */
  const metered = async (key: string, other: 'receiver' | 'sender', fn: () => Promise<{ mbPerS: number; cpuSeconds: number | null }>) => {
    const clock = new CpuClock({ sharer: [s.pid], line: [linePid] });
    const switches = treeContextSwitches([s.pid]);
    const r = await fn();
    const used = clock.read();
    cpu[key] = {
      ...cpuFigures(bytes, used.wall, { ...used.cpu, [other]: r.cpuSeconds }, used.machine),
      // What the sharer's CPU follows (docs/benchmarks.md, "CPU per GB").
      sharer_switches_per_s: Math.round((treeContextSwitches([s.pid]) - switches) / used.wall),
    };
    return r.mbPerS;
  };
  if (wanted('get')) await step(f, 'get_mb_per_s', () => metered('get', 'receiver', () => getRate(far, s.link, process.env.WAN_GET_FILE ?? 'bulk.bin', visitArgs, slow)));
  if (wanted('put')) await step(f, 'put_mb_per_s', () => metered('put', 'sender', () => putRate(far, s.link, dir, visitArgs, slow)));
  if (wanted('mount')) {
    const mnt = await mkdtemp(path.join(scratchDir, 'wan-bench-mnt-'));
    const m = await startMount(s.link, mnt, 120_000, visitArgs, far);
    later(async () => {
      await m.kill();
      await rm(mnt, { recursive: true, force: true });
    });
    await step(f, 'mount_mb_per_s', async () => {
      const clock = new CpuClock({ sharer: [s.pid], receiver: [m.process.child.pid ?? -1], line: [linePid] });
      const rate = catRate(path.join(mnt, 'bulk.bin'), bytes, slow);
      const used = clock.read();
      cpu.mount = cpuFigures(bytes, used.wall, used.cpu, used.machine);
      return round(rate);
    });
    await step(f, 'first_byte_during_bulk_ms', async () => {
      const bulk = spawn('cat', [path.join(mnt, 'bulk2.bin')], { stdio: ['ignore', 'ignore', 'ignore'] });
      try {
        await sleep(1500);
        // Last to first: the mount fetches the small files after the one read ahead
        // of the reader, so in this order every first byte crosses the path.
        const names = (await readdir(path.join(mnt, 'small'))).slice(0, firstByteFiles).reverse();
        const times: number[] = [];
        for (const name of names) {
          const t0 = performance.now();
          const fh = await open(path.join(mnt, 'small', name), 'r');
          await fh.read(Buffer.alloc(1), 0, 1, 0);
          times.push(performance.now() - t0);
          await fh.close();
          if (bulk.exitCode !== null) throw new Error('the bulk read ended before the small reads did (file too small for this path)');
        }
        const slowest = [...times].sort((a, b) => b - a).slice(0, 4).map((t) => round(t, 1));
        return { n: times.length, p50: round(quantile(times, 0.5), 1), p99: round(quantile(times, 0.99), 1), slowest };
      } finally {
        bulk.kill('SIGKILL');
      }
    });
    await step(f, 'small_files_200_seconds', async () => {
      const names = (await readdir(path.join(mnt, 'small'))).slice(100, 300);
      const t0 = performance.now();
      for (const name of names) await readFile(path.join(mnt, 'small', name));
      return round((performance.now() - t0) / 1000);
    });
    f.mount_peak_rss_mib = await peakRssMib(m.process.child.pid ?? 0);
    await m.stop().catch(() => undefined);
  }

  if (wanted('browser')) await step(f, 'browser_mb_per_s', () => metered('browser', 'receiver', () => browserRate(far, link, 'bulk.bin', slow + 120_000)));
  if (wanted('browser_put')) {
    await step(f, 'browser_put_mb_per_s', async () => {
      const r = await browserPutRate(far, link, dir, slow + 120_000);
      f.browser_put_then_save_mb_per_s = r.down;
      f.browser_put_vs_save = round(r.up / r.down);
      f.browser_put_lanes = r.lanes;
      return r.up;
    });
  }
  if (wanted('browser_pair') && !p.turn) await step(f, 'browser_pair_mb_per_s', async () => browserPairRate(near, far, mib, slow + 60_000));
  f.sharer_peak_rss_mib = await peakRssMib(s.pid);
  await s.stop().catch(() => undefined);

  // Only when asked for by name: copying 100,000 files three ways takes minutes a path.
  if (onlySteps?.includes('small') === true) await manySmall(near, far, f, shareArgs, visitArgs);

  if (wanted('index')) {
    await step(f, 'index_100k_seconds', async () => {
      const tree = await generatedTree(100_000);
      const t = await share(near, tree, shareArgs);
      // -R: the whole index (a plain ls ends once its folder is listed, before the rest).
      const r = await runIn(far, 'ls', binary('linkfs'), ['ls', '-R', t.link, ...visitArgs], 300_000);
      const m2 = /index complete: \d+ entries (?:\([^)]*\) )?in ([\d.]+) s/.exec(r.stderr);
      await t.stop().catch(() => undefined);
      if (m2 === null) throw new Error(`no index time in linkfs ls's output: ${r.stderr}`);
      return Number(m2[1]);
    });
  }

  for (const key of ['sshfs', 'get', 'put', 'mount', 'browser', 'browser_put', 'browser_pair']) {
    const v = f[`${key}_mb_per_s`];
    if (typeof v === 'number' && tcp > 0) f[`${key}_vs_tcp`] = round(v / tcp);
    if (typeof v === 'number' && typeof cubic === 'number' && cubic > 0) f[`${key}_vs_cubic`] = round(v / cubic);
  }
  if (typeof f.put_mb_per_s === 'number' && typeof f.get_mb_per_s === 'number' && f.get_mb_per_s > 0) {
    f.put_vs_get = round(f.put_mb_per_s / f.get_mb_per_s);
  }
  return f;
}

function socketLimits(): { r: number; w: number } {
  const get = (k: string) => Number(run('sysctl', ['-n', k]).trim());
  return { r: get('net.core.rmem_max'), w: get('net.core.wmem_max') };
}

function setSocketLimits(r: number, w: number): void {
  run('sysctl', ['-q', '-w', `net.core.rmem_max=${r}`, `net.core.wmem_max=${w}`]);
}

const only = process.env.WAN_ONLY?.split(',').filter((n) => n !== '');
const modes = process.env.WAN_SOCKETS === 'both' ? ['machine', 'desktop'] : [process.env.WAN_SOCKETS === 'desktop' ? 'desktop' : 'machine'];
const original = socketLimits();
const result: Record<string, unknown> = { date: new Date().toISOString(), socket_limits_here: { rmem_max: original.r, wmem_max: original.w } };
let code = 0;
try {
  for (const mode of modes) {
    if (mode === 'desktop') setSocketLimits(DESKTOP_SOCKET_MAX, DESKTOP_SOCKET_MAX);
    else setSocketLimits(original.r, original.w);
    const paths: Record<string, unknown> = {};
    for (const p of PATHS) {
      if (only && !only.includes(p.name)) continue;
      log(`wan-bench: ${p.name} (${mode} socket limits) ...`);
      try {
        paths[p.name] = await measure(p);
      } catch (e) {
        paths[p.name] = { error: e instanceof Error ? e.message : String(e) };
        code = 1;
      }
      log(`wan-bench: ${p.name}: ${JSON.stringify(paths[p.name])}`);
      await cleanUp();
    }
    result[mode === 'desktop' ? 'desktop_sockets' : 'machine_sockets'] = paths;
  }
} finally {
  await cleanUp();
  setSocketLimits(original.r, original.w);
}
console.log(JSON.stringify(result));
process.exit(code);

// CPU time of processes, read from /proc: what a benchmark step cost each side, so a
// figure can say whether it was bound by the network or by this machine's cores.
//
// - A long-lived process (a sharer, a mount, the line) is read before and after a step:
//   user + system time of it and every descendant alive, plus what those already reaped
//   (cutime/cstime), so a helper that came and went in between still counts.
// - A command run to its end is wrapped in `sh -c` (`withCpu`), which prints its own
//   reaped children's time after the command exits (`cpuFromStderr`).

import { readdirSync, readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

const TICKS_PER_S = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

interface Stat {
  ppid: number;
  /** utime + stime + cutime + cstime, in clock ticks. */
  ticks: number;
}

/** The fields after `comm` in /proc/PID/stat (`comm` may hold spaces and parentheses). */
function fieldsAfterComm(text: string): string[] {
  return text.slice(text.lastIndexOf(')') + 2).trim().split(' ');
}

/** Fields 4 (ppid) and 14-17 (utime, stime, cutime, cstime) of a stat line. */
function parseStat(text: string): Stat | null {
  const f = fieldsAfterComm(text);
  const ppid = Number(f[1]);
  const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(f[i]), 0);
  return Number.isFinite(ppid) && Number.isFinite(ticks) ? { ppid, ticks } : null;
}

function allStats(): Map<number, Stat> {
  const stats = new Map<number, Stat>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const s = parseStat(readFileSync(`/proc/${name}/stat`, 'utf8'));
      if (s !== null) stats.set(Number(name), s);
    } catch {
      // Gone between the listing and the read.
    }
  }
  return stats;
}

/** The processes `roots` and all their descendants alive now. */
function treePids(roots: readonly number[], stats = allStats()): number[] {
  const children = new Map<number, number[]>();
  for (const [pid, s] of stats) children.set(s.ppid, [...(children.get(s.ppid) ?? []), pid]);
  const seen = new Set<number>();
  const todo = roots.filter((p) => p > 0);
  while (todo.length > 0) {
    const pid = todo.pop()!;
    if (seen.has(pid)) continue;
    seen.add(pid);
    todo.push(...(children.get(pid) ?? []));
  }
  return [...seen];
}

/** CPU seconds used so far by the processes `roots` and all their descendants. */
export function treeCpuSeconds(roots: readonly number[]): number {
  const stats = allStats();
  const ticks = treePids(roots, stats).reduce((sum, pid) => sum + (stats.get(pid)?.ticks ?? 0), 0);
  return ticks / TICKS_PER_S;
}

/** Context switches (voluntary and not) of every thread of the processes `roots` and their descendants so far. */
export function treeContextSwitches(roots: readonly number[]): number {
  let n = 0;
  for (const pid of treePids(roots)) {
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const tid of tasks) {
      try {
        const status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
        for (const m of status.matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)$/gm)) n += Number(m[1]);
      } catch {
        // The thread ended meanwhile.
      }
    }
  }
  return n;
}

/**
 * CPU seconds every process on the machine has used so far, kernel threads (softirqs,
 * kworkers) included, with what each has reaped: a difference of two readings is the
 * machine's busy time between them. (/proc/stat's busy ticks would be simpler, but they
 * are sampled at the timer tick, and a load of many short wake-ups, like the sharer's,
 * mostly runs between ticks: here they said half of what the processes had used.)
 */
export function machineBusySeconds(): number {
  let ticks = 0;
  for (const s of allStats().values()) ticks += s.ticks;
  return ticks / TICKS_PER_S;
}

/** A reading of several sides' CPU time, and the machine's, started now. */
export class CpuClock {
  private readonly start: Record<string, number>;
  private readonly machineStart = machineBusySeconds();
  private readonly t0 = performance.now();

  constructor(private readonly sides: Record<string, readonly number[]>) {
    this.start = Object.fromEntries(Object.entries(sides).map(([k, pids]) => [k, treeCpuSeconds(pids)]));
  }

  /** Each side's CPU seconds since the start, the machine's busy seconds, and the wall seconds. */
  read(): { cpu: Record<string, number>; machine: number; wall: number } {
    const cpu = Object.fromEntries(Object.entries(this.sides).map(([k, pids]) => [k, treeCpuSeconds(pids) - this.start[k]!]));
    return { cpu, machine: machineBusySeconds() - this.machineStart, wall: (performance.now() - this.t0) / 1000 };
  }
}

const MARK = 'linkfs-cpu-ticks:';

/** `cmd args` wrapped so that it prints, as it ends, the CPU time it and its descendants used. */
export function withCpu(cmd: string, args: string[]): [string, string[]] {
  // `$$` is the shell; after `"$@"` returns, its cutime/cstime hold the command's time
  // and that of every descendant the command reaped.
  const script = `"$@"; rc=$?; echo "${MARK} $(cat /proc/$$/stat)" >&2; exit $rc`;
  return ['sh', ['-c', script, 'sh', cmd, ...args]];
}

/** The CPU seconds a `withCpu` command printed, or null if it printed none. */
export function cpuFromStderr(stderr: string): number | null {
  const line = stderr.split('\n').reverse().find((l) => l.startsWith(MARK));
  if (line === undefined) return null;
  const f = fieldsAfterComm(line.slice(MARK.length));
  const ticks = Number(f[13]) + Number(f[14]);
  return Number.isFinite(ticks) ? ticks / TICKS_PER_S : null;
}

/**
 * A step's CPU figures: each side's CPU seconds per GB moved, how many cores those sides
 * kept busy on average, and (given `machineBusy`, its busy CPU seconds over the step) how
 * many the whole machine did: this machine has 2, so near 2 the step was CPU bound.
 */
export function cpuFigures(bytes: number, wallSeconds: number, seconds: Record<string, number | null>, machineBusy?: number): Record<string, number | null> {
  const gb = bytes / 1e9;
  const out: Record<string, number | null> = {};
  let total = 0;
  for (const [side, s] of Object.entries(seconds)) {
    out[`${side}_s_per_gb`] = s === null ? null : Math.round((s / gb) * 100) / 100;
    total += s ?? 0;
  }
  out.cores_busy = wallSeconds > 0 ? Math.round((total / wallSeconds) * 100) / 100 : null;
  if (machineBusy !== undefined) out.machine_cores_busy = wallSeconds > 0 ? Math.round((machineBusy / wallSeconds) * 100) / 100 : null;
  return out;
}

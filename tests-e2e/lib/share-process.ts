// Runs `linkfs share [ARGS...] DIR` and hands back the link it prints as its first
// stdout line (docs/architecture.md: "prints the link as the first stdout line").

import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { binary } from './paths.ts';
import { describeExit, exitWithin, killHard, spawnTracked, type TrackedChild } from './child.ts';

export interface ShareOptions {
  /** Extra `linkfs share` arguments, e.g. ['--relay', url]. */
  args?: string[];
  /** How long to wait for the link. Default 20 s. */
  linkTimeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  /** Log prefix. Default 'share'. */
  name?: string;
  /**
   * Run the sharer at this nice value (through `nice`, same pid): where a figure is
   * about the browser, the sharer, which on a visitor's machine runs elsewhere, then
   * takes only spare CPU from the browser on this 2-core machine. With the kernel's
   * autogroups (`/proc/sys/kernel/sched_autogroup_enabled`, on here and on most
   * desktops) a nice value counts only against processes of the same session, and
   * Chromium runs in a session of its own: so the sharer gets a session of its own
   * too (`setsid`, same pid) and that session's group the same nice value
   * (`/proc/PID/autogroup`). Without it the sharer at nice 19 still took an equal
   * share of the CPU against all of Chromium.
   */
  nice?: number;
  /**
   * Run it in this named network namespace (`ip netns add NS`), entered with `nsenter
   * --net` (same pid, same mount namespace: unlike `ip netns exec`, a mount it makes is
   * seen by everyone).
   */
  netns?: string;
}

export interface ShareProcess {
  readonly link: string;
  /** performance.now() just before spawn: the start of every "from share start" figure. */
  readonly spawnedAt: number;
  /** Spawn -> link line, milliseconds. */
  readonly linkMs: number;
  readonly pid: number;
  readonly process: TrackedChild;
  /** Stops the sharer as a user would (SIGTERM) and asserts it exits with code 0 in time. */
  stop(timeoutMs?: number): Promise<void>;
  /** SIGKILL, for cleanup after a failure; no assertion. */
  kill(): Promise<void>;
}

export async function startShare(dir: string, options: ShareOptions = {}): Promise<ShareProcess> {
  const name = options.name ?? 'share';
  const args = ['share', ...(options.args ?? []), dir];
  const niced = options.nice === undefined ? [binary('linkfs'), ...args] : ['setsid', 'nice', '-n', String(options.nice), binary('linkfs'), ...args];
  const full = options.netns === undefined ? niced : ['nsenter', `--net=/run/netns/${options.netns}`, ...niced];
  const proc = spawnTracked(name, full[0]!, full.slice(1), options.env);
  if (options.nice !== undefined && proc.child.pid !== undefined) niceAutogroup(proc.child.pid, options.nice);
  const timeoutMs = options.linkTimeoutMs ?? 20_000;
  const shown = `linkfs ${args.join(' ')}`;

  const first = await new Promise<string>((resolve, reject) => {
    if (proc.stdout.length > 0) return resolve(proc.stdout[0]!);
    const timer = setTimeout(() => {
      reject(new Error(`${shown} printed no link within ${timeoutMs} ms; stderr tail:\n${proc.stderrTail()}`));
    }, timeoutMs);
    proc.onStdoutLine((line) => {
      clearTimeout(timer);
      resolve(line);
    });
    void proc.exit.then((e) => {
      clearTimeout(timer);
      reject(new Error(`${shown} ended (${describeExit(e)}) before printing a link; stderr tail:\n${proc.stderrTail()}`));
    });
  }).catch(async (e: unknown) => {
    await killHard(proc);
    throw e;
  });
  const linkMs = performance.now() - proc.spawnedAt;

  const link = first.trim();
  let url: URL;
  try {
    url = new URL(link);
  } catch {
    await killHard(proc);
    throw new Error(`the first stdout line of ${shown} is not a link: ${JSON.stringify(first)}`);
  }
  if (url.hash.length <= 1) {
    await killHard(proc);
    throw new Error(`the link ${link} has no #fragment (room.secret)`);
  }

  return {
    link,
    spawnedAt: proc.spawnedAt,
    linkMs,
    pid: proc.child.pid ?? -1,
    process: proc,
    async stop(stopTimeoutMs = 10_000) {
      const already = proc.exited();
      if (already !== null) {
        throw new Error(`the sharer had already ended (${describeExit(already)}) before it was stopped; stderr tail:\n${proc.stderrTail()}`);
      }
      proc.child.kill('SIGTERM');
      const e = await exitWithin(proc, stopTimeoutMs);
      if (e === null) {
        await killHard(proc);
        throw new Error(`the sharer did not exit within ${stopTimeoutMs} ms of SIGTERM; stderr tail:\n${proc.stderrTail()}`);
      }
      if (e.code !== 0) {
        throw new Error(`the sharer ended with ${describeExit(e)} after SIGTERM, expected exit code 0; stderr tail:\n${proc.stderrTail()}`);
      }
    },
    kill: () => killHard(proc),
  };
}

/** Splits `ORIGIN/#room.secret` into the part up to the '.' and the secret. */
function splitSecret(link: string): { head: string; secret: string } {
  const hashAt = link.indexOf('#');
  const dot = link.lastIndexOf('.');
  if (hashAt < 0 || dot < hashAt) throw new Error(`cannot find '#<room>.<secret>' in ${link}`);
  const secret = link.slice(dot + 1);
  if (secret.length === 0) throw new Error(`the link ${link} has an empty secret`);
  return { head: link.slice(0, dot + 1), secret };
}

/**
 * The same link with a different but well-formed secret (every byte of the base64url
 * secret flipped, re-encoded to the same length): what a visitor with someone else's
 * or a guessed secret would have.
 */
export function withWrongSecret(link: string): string {
  const { head, secret } = splitSecret(link);
  const bytes = Buffer.from(secret, 'base64url');
  if (bytes.length === 0 || bytes.toString('base64url') !== secret) {
    throw new Error(`the secret ${JSON.stringify(secret)} in ${link} is not unpadded base64url`);
  }
  for (let i = 0; i < bytes.length; i += 1) bytes[i] = bytes[i]! ^ 0xa5;
  return `${head}${bytes.toString('base64url')}`;
}

/** The link with the last `chars` characters of its secret cut off (a bad copy-paste). */
export function truncatedLink(link: string, chars = 3): string {
  const { head, secret } = splitSecret(link);
  return `${head}${secret.slice(0, Math.max(1, secret.length - chars))}`;
}

/**
 * Gives the autogroup of `pid` (its session's, see `ShareOptions.nice`) the nice
 * value `nice`, once `setsid` has made the session: the file names the group, and a
 * write sets its nice value. Where the kernel has no autogroups there is nothing to
 * do.
 */
function niceAutogroup(pid: number, nice: number): void {
  const file = `/proc/${String(pid)}/autogroup`;
  for (let tries = 0; tries < 200; tries += 1) {
    let group: string;
    try {
      group = readFileSync(file, 'utf8');
    } catch {
      return; // no autogroups here, or the process is gone
    }
    // The group of the test's own session until setsid and exec have run.
    if (group.trim() !== readFileSync('/proc/self/autogroup', 'utf8').trim()) {
      writeFileSync(file, String(nice));
      return;
    }
    spawnSync('sleep', ['0.005']);
  }
  throw new Error(`the sharer (pid ${String(pid)}) never got a session of its own`);
}

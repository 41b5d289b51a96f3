// A path between two fresh network namespaces: `linkfs-wan` joins them through TUN
// devices with a delay each way, a bottleneck rate with a drop-tail queue, and random
// loss (tools/src/bin/linkfs-wan.rs). The near side is 10.88.0.1, the far side
// 10.88.0.2; each has a default route over the line (Chromium gathers no ICE
// candidates without one).

import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { exitWithin, killHard, spawnTracked } from './child.ts';
import { binDir } from './paths.ts';

export const NEAR_ADDR = '10.88.0.1';
export const FAR_ADDR = '10.88.0.2';

export interface WanLineOptions {
  /** One way. */
  delayMs: number;
  rateMbit: number;
  lossPct: number;
}

export interface WanLine {
  readonly near: string;
  readonly far: string;
  /** The linkfs-wan process carrying the line (for its CPU time). */
  readonly pid: number;
  /** Stops the line and removes both namespaces; the line's counts (JSON), if it printed them. */
  close(): Promise<string | null>;
}

function run(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status ?? r.signal}): ${r.stderr.trim()}`);
}

/**
 * A command to run in a namespace: `nsenter --net` (not `ip netns exec`, which gives
 * the command a mount namespace of its own, so the mounts it makes would not be seen here).
 */
export function inNs(ns: string, cmd: string, args: string[]): [string, string[]] {
  return ['nsenter', [`--net=/run/netns/${ns}`, cmd, ...args]];
}

/** Two fresh namespaces (named after this process and `tag`) and the line between them. */
export async function openWanLine(o: WanLineOptions, tag = 'line'): Promise<WanLine> {
  const near = `wan-near-${process.pid}-${tag}`;
  const far = `wan-far-${process.pid}-${tag}`;
  const removeNamespaces = () => {
    for (const ns of [near, far]) spawnSync('ip', ['netns', 'del', ns]);
  };
  removeNamespaces();
  for (const ns of [near, far]) run('ip', ['netns', 'add', ns]);
  const args = ['--a', near, '--b', far, '--a-addr', NEAR_ADDR, '--b-addr', FAR_ADDR, '--delay-ms', String(o.delayMs), '--rate-mbit', String(o.rateMbit), '--loss', String(o.lossPct)];
  const wan = spawnTracked('wan', path.join(binDir(), 'linkfs-wan'), args);
  const close = async (): Promise<string | null> => {
    wan.child.kill('SIGTERM');
    if ((await exitWithin(wan, 3000)) === null) await killHard(wan);
    removeNamespaces();
    return wan.stdout.find((l) => l.startsWith('{')) ?? null;
  };
  try {
    const deadline = performance.now() + 10_000;
    while (!wan.stdout.some((l) => l.startsWith('linkfs-wan: '))) {
      if (wan.exited() !== null || performance.now() > deadline) throw new Error(`linkfs-wan did not start: ${wan.stderrTail()}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    run('ip', ['-n', near, 'route', 'add', 'default', 'dev', `wan-a${wan.child.pid}`]);
    run('ip', ['-n', far, 'route', 'add', 'default', 'dev', `wan-b${wan.child.pid}`]);
  } catch (e) {
    await close();
    throw e;
  }
  return { near, far, pid: wan.child.pid ?? -1, close };
}

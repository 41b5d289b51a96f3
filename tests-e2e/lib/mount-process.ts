// Runs `linkfs mount LINK MOUNTPOINT` and waits until the mount is there (needs root
// and /dev/fuse, as in the test namespace).

import { spawnSync } from 'node:child_process';
import { mkdir, readFile } from 'node:fs/promises';
import { binary } from './paths.ts';
import { describeExit, exitWithin, killHard, spawnTracked, type TrackedChild } from './child.ts';

export interface MountProcess {
  readonly mountpoint: string;
  readonly process: TrackedChild;
  /** SIGTERM, then asserts a clean exit and that the mount is gone. */
  stop(timeoutMs?: number): Promise<void>;
  /** SIGKILL and a lazy unmount, for cleanup; no assertion. */
  kill(): Promise<void>;
}

async function isMounted(mountpoint: string): Promise<boolean> {
  const info = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
  return info.split('\n').some((l) => l.split(' ')[4] === mountpoint);
}

/**
 * `netns`: run it in this named network namespace (`ip netns add NS`), entered with
 * `nsenter --net` so that the mount is seen outside (`ip netns exec` gives the command a
 * mount namespace of its own).
 */
export async function startMount(link: string, mountpoint: string, timeoutMs = 60_000, args: string[] = [], netns?: string): Promise<MountProcess> {
  await mkdir(mountpoint, { recursive: true });
  const command = [binary('linkfs'), 'mount', link, mountpoint, ...args];
  const full = netns === undefined ? command : ['nsenter', `--net=/run/netns/${netns}`, ...command];
  const proc = spawnTracked('mount', full[0]!, full.slice(1));
  const started = performance.now();
  while (!(await isMounted(mountpoint))) {
    const exit = proc.exited();
    if (exit !== null) throw new Error(`linkfs mount ended (${describeExit(exit)}) before mounting; stderr tail:\n${proc.stderrTail()}`);
    if (performance.now() - started > timeoutMs) {
      await killHard(proc);
      throw new Error(`not mounted after ${timeoutMs} ms; stderr tail:\n${proc.stderrTail()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const kill = async () => {
    await killHard(proc);
    spawnSync('umount', ['-l', mountpoint]);
  };
  return {
    mountpoint,
    process: proc,
    async stop(stopTimeoutMs = 20_000) {
      proc.child.kill('SIGTERM');
      const e = await exitWithin(proc, stopTimeoutMs);
      if (e === null) {
        await kill();
        throw new Error(`linkfs mount did not exit within ${stopTimeoutMs} ms of SIGTERM; stderr tail:\n${proc.stderrTail()}`);
      }
      if (e.code !== 0) throw new Error(`linkfs mount ended with ${describeExit(e)} after SIGTERM; stderr tail:\n${proc.stderrTail()}`);
      if (await isMounted(mountpoint)) throw new Error(`${mountpoint} is still mounted after linkfs mount exited`);
    },
    kill,
  };
}

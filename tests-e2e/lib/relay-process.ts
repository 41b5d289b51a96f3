// Runs a standalone `linkfs-relay --bind 127.0.0.1:<free port>` and waits for /healthz.

import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { binary } from './paths.ts';
import { describeExit, exitWithin, killHard, spawnTracked, type TrackedChild } from './child.ts';

export interface RelayProcess {
  /** e.g. http://127.0.0.1:41234 (no trailing slash) */
  readonly url: string;
  readonly port: number;
  readonly process: TrackedChild;
  /** SIGTERM, then SIGKILL after `timeoutMs`; returns how it ended. */
  stop(timeoutMs?: number): Promise<string>;
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function healthy(url: string): Promise<boolean> {
  try {
    const r = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1_000) });
    return r.ok;
  } catch {
    return false;
  }
}

export async function startRelay(options: { readyTimeoutMs?: number; args?: string[]; port?: number } = {}): Promise<RelayProcess> {
  const command = binary('linkfs-relay');
  const readyTimeoutMs = options.readyTimeoutMs ?? 15_000;
  let lastError = '';
  // The port can be taken between our probe and the relay's bind: try a few.
  for (let attempt = 1; attempt <= 3; attempt += 1) {
    const port = options.port ?? (await freePort());
    const url = `http://127.0.0.1:${port}`;
    const args = ['--bind', `127.0.0.1:${port}`, ...(options.args ?? [])];
    const proc = spawnTracked('relay', command, args);
    const deadline = performance.now() + readyTimeoutMs;
    let ready = false;
    while (performance.now() < deadline && proc.exited() === null) {
      if (await healthy(url)) {
        ready = true;
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    if (ready) {
      return {
        url,
        port,
        process: proc,
        async stop(timeoutMs = 10_000) {
          if (proc.exited() !== null) return `had already ended (${describeExit(proc.exited()!)})`;
          proc.child.kill('SIGTERM');
          const e = await exitWithin(proc, timeoutMs);
          if (e === null) {
            await killHard(proc);
            return `did not exit within ${timeoutMs} ms of SIGTERM (killed)`;
          }
          return describeExit(e);
        },
      };
    }
    const ended = proc.exited();
    await killHard(proc);
    lastError = ended !== null
      ? `linkfs-relay ${args.join(' ')} ended (${describeExit(ended)}) before ${url}/healthz answered; stderr tail:\n${proc.stderrTail()}`
      : `${url}/healthz did not answer 200 within ${readyTimeoutMs} ms; stderr tail:\n${proc.stderrTail()}`;
    if (ended === null || !/in use/i.test(proc.stderrTail())) break;
  }
  throw new Error(lastError);
}

// The servers a relay operator runs beside linkfs-relay, as real processes from
// Debian's packages: coturn (TURN, with the REST shared secret), redis-server (the
// fleet's room directory) and haproxy (a load balancer in front of several relays).
// Each binds an address inside the test's network namespace and is killed after use.

import { createHmac } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { exitWithin, killHard, spawnTracked, type TrackedChild } from './child.ts';
import { freePort } from './relay-process.ts';

/** The namespace's own address (tests-e2e/run sets it up): reachable by Chromium too. */
export const nsAddr = process.env.LINKFS_NETNS_ADDR ?? '127.0.0.1';

export interface Service {
  readonly port: number;
  readonly process: TrackedChild;
  stop(): Promise<void>;
}

async function waitForPort(host: string, port: number, proc: TrackedChild, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (proc.exited() !== null) throw new Error(`${what} ended before listening; stderr tail:\n${proc.stderrTail()}`);
    const open = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host, port }, () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what} did not listen on ${host}:${port} within ${timeoutMs} ms; stderr tail:\n${proc.stderrTail()}`);
}

function service(port: number, proc: TrackedChild): Service {
  return {
    port,
    process: proc,
    async stop() {
      if (proc.exited() !== null) return;
      proc.child.kill('SIGTERM');
      if ((await exitWithin(proc, 3_000)) === null) await killHard(proc);
    },
  };
}

export interface Coturn extends Service {
  readonly url: string;
  readonly secret: string;
  /** Lines of coturn's log (verbose), for what it accepted and refused. */
  log(): string;
}

/** coturn with `use-auth-secret` on the namespace's address, UDP only. */
export async function startCoturn(secret: string): Promise<Coturn> {
  const port = await freePort();
  const lines: string[] = [];
  const proc = spawnTracked('coturn', 'turnserver', [
    '-n', `--listening-ip=${nsAddr}`, `--listening-port=${port}`, `--relay-ip=${nsAddr}`,
    '--use-auth-secret', `--static-auth-secret=${secret}`, '--realm=linkfs.test',
    '--no-tls', '--no-dtls', '--no-tcp-relay', '--no-cli', '--log-file=stdout', '--verbose',
    '--min-port=40000', '--max-port=40999',
  ]);
  proc.onStdoutLine((l) => lines.push(l));
  // coturn answers TURN over UDP; its TCP listener on the same port says it is up.
  await waitForPort(nsAddr, port, proc, 'turnserver');
  return { ...service(port, proc), url: `turn:${nsAddr}:${port}`, secret, log: () => lines.join('\n') };
}

/** coturn's REST credentials for `name`, valid until unix time `expiry`. */
export function turnCredentials(secret: string, expiry: number, name: string): { user: string; password: string } {
  const user = `${expiry}:${name}`;
  return { user, password: createHmac('sha1', secret).update(user).digest('base64') };
}

/** Asks coturn for an allocation with `user`/`password` (Debian's turnutils_uclient): whether it was granted. */
export async function allocates(turn: Coturn, user: string, password: string): Promise<boolean> {
  const proc = spawnTracked('uclient', 'turnutils_uclient', ['-u', user, '-w', password, '-n', '1', '-m', '1', '-l', '64', '-e', nsAddr, '-r', '9', '-p', String(turn.port), nsAddr]);
  const exit = await exitWithin(proc, 4_000);
  if (exit === null) await killHard(proc);
  // A refused allocation ends at once ("Cannot complete Allocation", exit 255); a granted
  // one goes on to send data to a peer that is not there (it is killed above).
  return !/Cannot complete Allocation/.test(proc.stderrTail() + proc.stdout.join('\n'));
}

export interface RedisServer extends Service {
  readonly url: string;
}

/** redis-server on 127.0.0.1 (on `port`, e.g. to start it again after a stop), no persistence. */
export async function startRedis(port?: number): Promise<RedisServer> {
  const p = port ?? (await freePort());
  const proc = spawnTracked('redis', 'redis-server', ['--port', String(p), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']);
  await waitForPort('127.0.0.1', p, proc, 'redis-server');
  return { ...service(p, proc), url: `redis://127.0.0.1:${p}/` };
}

export interface Haproxy extends Service {
  readonly url: string;
}

/**
 * haproxy on the namespace's address in front of `backends` (http://127.0.0.1:PORT),
 * `balance first`: every new connection goes to the first healthy relay (GET /healthz
 * every 300 ms), so a test knows which relay a client lands on until that one dies.
 */
export async function startHaproxy(dir: string, backends: string[]): Promise<Haproxy> {
  const port = await freePort();
  const servers = backends
    .map((b, i) => `  server relay${i + 1} ${new URL(b).host} check inter 300 fall 2 rise 2`)
    .join('\n');
  const config = `global
  maxconn 4096
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  timeout tunnel 1h
frontend relays
  bind ${nsAddr}:${port}
  default_backend relays
backend relays
  balance first
  option httpchk GET /healthz
${servers}
`;
  const file = path.join(dir, 'haproxy.cfg');
  await writeFile(file, config);
  const proc = spawnTracked('haproxy', 'haproxy', ['-f', file, '-db']);
  await waitForPort(nsAddr, port, proc, 'haproxy');
  return { ...service(port, proc), url: `http://${nsAddr}:${port}` };
}

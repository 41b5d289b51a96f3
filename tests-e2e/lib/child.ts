// Child processes of the harness: output captured line by line (the tail kept for
// error messages), exit observed, and everything killed if the harness itself exits.

import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface TrackedChild {
  readonly name: string;
  readonly child: ChildProcess;
  /** performance.now() just before spawn. */
  readonly spawnedAt: number;
  /** Every stdout line so far. */
  readonly stdout: string[];
  /** The last lines of stderr, joined. */
  stderrTail(): string;
  /** Resolves when the process has exited (never rejects). */
  readonly exit: Promise<Exit>;
  /** The exit, once it happened. */
  exited(): Exit | null;
  /** Calls `fn` for every stdout line from now on. */
  onStdoutLine(fn: (line: string) => void): void;
  /** Calls `fn` for every stderr line from now on. */
  onStderrLine(fn: (line: string) => void): void;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    for (const c of live) c.kill('SIGKILL');
    process.exit(130);
  });
}

const tailLines = 60;

export function describeExit(e: Exit): string {
  return e.signal !== null ? `killed by ${e.signal}` : `exit code ${String(e.code)}`;
}

export function spawnTracked(name: string, command: string, args: string[], env: NodeJS.ProcessEnv = {}): TrackedChild {
  const verbose = process.env.LINKFS_E2E_VERBOSE === '1';
  const spawnedAt = performance.now();
  const child = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, RUST_BACKTRACE: '1', ...env },
  });
  live.add(child);
  const stdout: string[] = [];
  const stderr: string[] = [];
  const listeners: Array<(line: string) => void> = [];
  const errListeners: Array<(line: string) => void> = [];
  let exitInfo: Exit | null = null;

  createInterface({ input: child.stdout! }).on('line', (line) => {
    stdout.push(line);
    if (verbose) console.log(`[${name}] ${line}`);
    for (const fn of listeners) fn(line);
  });
  createInterface({ input: child.stderr! }).on('line', (line) => {
    stderr.push(line);
    if (stderr.length > tailLines) stderr.shift();
    if (verbose) console.log(`[${name}:err] ${line}`);
    for (const fn of errListeners) fn(line);
  });
  const exit = new Promise<Exit>((resolve) => {
    child.once('error', (err) => {
      stderr.push(`spawn failed: ${err.message}`);
      live.delete(child);
      exitInfo = { code: null, signal: null };
      resolve(exitInfo);
    });
    child.once('exit', (code, signal) => {
      live.delete(child);
      exitInfo = { code, signal };
      resolve(exitInfo);
    });
  });

  return {
    name,
    child,
    spawnedAt,
    stdout,
    stderrTail: () => (stderr.length === 0 ? '(stderr empty)' : stderr.join('\n')),
    exit,
    exited: () => exitInfo,
    onStdoutLine: (fn) => listeners.push(fn),
    onStderrLine: (fn) => errListeners.push(fn),
  };
}

/** Waits for the exit, at most `ms`; null if still running then. */
export async function exitWithin(t: TrackedChild, ms: number): Promise<Exit | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), ms);
  });
  try {
    return await Promise.race([t.exit, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Kills with SIGKILL (cleanup path: no assertion) and waits for the exit. */
export async function killHard(t: TrackedChild): Promise<void> {
  if (t.exited() !== null) return;
  t.child.kill('SIGKILL');
  await t.exit;
}

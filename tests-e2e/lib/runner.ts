// A minimal sequential test runner: each test prints its name, result and duration;
// cleanups run in reverse order whatever happened; the process exits non-zero if any
// test failed. The last line is the plain 'N passed, N failed' summary.
//
// Pick tests with LINKFS_E2E_ONLY=word[,word...]: a word picks the tests whose names
// start with it (e.g. 'd:'), or, if it has 3 or more characters, contain it ('relay').

export interface TestContext {
  readonly name: string;
  /** Runs `fn` after the test (last registered first), also when it failed or timed out. */
  defer(fn: () => unknown): void;
  /** Runs `fn` only if the test failed, before the cleanups (screenshots, logs). */
  onFailure(fn: () => unknown): void;
}

export interface TestCase {
  name: string;
  /** Whole-test limit, cleanups excluded. Default 120 s. */
  timeoutMs?: number;
  run(t: TestContext): Promise<void>;
}

export class AssertionError extends Error {
  override name = 'AssertionError';
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new AssertionError(message);
}

export function fail(message: string): never {
  throw new AssertionError(message);
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(2)} s`;
}

function describe(e: unknown): string {
  if (e instanceof AssertionError) return e.message;
  if (e instanceof Error) return e.stack ?? `${e.name}: ${e.message}`;
  return String(e);
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => `    ${l}`)
    .join('\n');
}

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${seconds(ms)}`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

interface Outcome {
  name: string;
  ok: boolean;
  ms: number;
}

async function runOne(test: TestCase): Promise<Outcome> {
  const cleanups: Array<() => unknown> = [];
  const failureHooks: Array<() => unknown> = [];
  const t: TestContext = {
    name: test.name,
    defer: (fn) => cleanups.push(fn),
    onFailure: (fn) => failureHooks.push(fn),
  };
  console.log(`\n▶ ${test.name}`);
  const start = performance.now();
  const errors: string[] = [];
  try {
    await withTimeout(test.run(t), test.timeoutMs ?? 120_000, 'test');
  } catch (e) {
    errors.push(describe(e));
  }
  if (errors.length > 0) {
    for (const hook of failureHooks) {
      try {
        await withTimeout(Promise.resolve().then(hook), 15_000, 'failure hook');
      } catch (e) {
        console.log(`    (failure hook: ${describe(e)})`);
      }
    }
  }
  for (const fn of cleanups.reverse()) {
    try {
      await withTimeout(Promise.resolve().then(fn), 30_000, 'cleanup');
    } catch (e) {
      errors.push(`cleanup: ${describe(e)}`);
    }
  }
  const ms = performance.now() - start;
  const ok = errors.length === 0;
  if (ok) {
    console.log(`ok   ${test.name} (${seconds(ms)})`);
  } else {
    console.log(`FAIL ${test.name} (${seconds(ms)})\n${indent(errors.join('\n'))}`);
  }
  return { name: test.name, ok, ms };
}

export interface SuiteOptions {
  /** Runs once after the last test (removing shared fixtures); its failure fails the suite. */
  afterAll?: () => unknown;
}

/** Runs the tests in order, prints a summary and exits (code 1 if any failed). */
export async function runSuite(suite: string, tests: TestCase[], options: SuiteOptions = {}): Promise<never> {
  const only = (process.env.LINKFS_E2E_ONLY ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const picks = (name: string, word: string) => name.startsWith(word) || (word.length >= 3 && name.includes(word));
  const selected = only.length === 0 ? tests : tests.filter((t) => only.some((o) => picks(t.name, o)));
  if (selected.length === 0) {
    console.log(`${suite}: no test matches LINKFS_E2E_ONLY=${process.env.LINKFS_E2E_ONLY ?? ''}`);
    process.exit(1);
  }
  const outcomes: Outcome[] = [];
  for (const test of selected) outcomes.push(await runOne(test));
  if (options.afterAll) {
    const start = performance.now();
    try {
      await withTimeout(Promise.resolve().then(options.afterAll), 60_000, 'afterAll');
    } catch (e) {
      console.log(`FAIL afterAll\n${indent(describe(e))}`);
      outcomes.push({ name: 'afterAll', ok: false, ms: performance.now() - start });
    }
  }
  const passed = outcomes.filter((o) => o.ok).length;
  const failed = outcomes.length - passed;
  console.log(`\n${suite} summary:`);
  for (const o of outcomes) console.log(`  ${o.ok ? 'ok  ' : 'FAIL'} ${seconds(o.ms).padStart(9)}  ${o.name}`);
  console.log(`${passed} passed, ${failed} failed`);
  // Exit explicitly: a stuck child or socket must not keep the suite alive.
  process.exit(failed === 0 ? 0 : 1);
}

// Tests the harness end to end against the reference fake sharer (tests-e2e/fake/),
// so a harness that passes anything, or fails everything, is caught before the product
// is blamed:
//   - verify.ts accepts a faithful share and prints the JSON figures last;
//   - verify.ts reports each injected fault (missing entry, extra entry, wrong mtime,
//     corrupted bytes, stalled read) with its path and field, and exits 1;
//   - the e2e tests that do not need the real web UI or relay pass against the fake.
// Run inside the namespace (it starts Chromium): bash tests-e2e/run harness

import { spawn } from 'node:child_process';
import path from 'node:path';
import { makeFixture, type Fixture } from './lib/fixture.ts';
import { repoRoot } from './lib/paths.ts';
import { assert, runSuite, type TestCase } from './lib/runner.ts';

const fakeBin = path.join(repoRoot, 'tests-e2e', 'fake', 'bin');
const tsx = path.join(repoRoot, 'node_modules', '.bin', 'tsx');

function run(script: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; lines: string[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(tsx, [path.join(repoRoot, 'tests-e2e', script)], {
      cwd: repoRoot,
      env: { ...process.env, LINKFS_BIN_DIR: fakeBin, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, lines: out.trimEnd().split('\n') }));
  });
}

function indent(lines: string[]): string {
  return lines.map((l) => `      ${l}`).join('\n');
}

let fixture: Fixture | undefined;
const getFixture = async () => (fixture ??= await makeFixture({ manyFiles: 300 }));

const tests: TestCase[] = [
  {
    name: 'verify.ts accepts a faithful share and prints the figures as the last line',
    timeoutMs: 120_000,
    async run() {
      const f = await getFixture();
      const { code, lines } = await run('verify.ts', { SHARE_DIR: f.dir });
      assert(code === 0, `verify.ts exited ${String(code)} on a faithful share:\n${indent(lines)}`);
      const figures = JSON.parse(lines.at(-1)!) as Record<string, unknown>;
      for (const key of ['entries', 'bytes', 'index_seconds', 'entries_per_second', 'wire_bytes_per_entry', 'mismatches']) {
        assert(key in figures, `the last line lacks ${key}: ${lines.at(-1)!}`);
      }
      assert(figures.mismatches === 0 && figures.error === null, `figures report problems: ${lines.at(-1)!}`);
      assert(typeof figures.entries === 'number' && figures.entries > 300, `entries ${String(figures.entries)}`);
      assert(typeof figures.wire_bytes_per_entry === 'number', 'wire_bytes_per_entry is not a number though the fake page has linkfsStats');
      console.log(`    ${lines.at(-1)!}`);
    },
  },
  {
    name: 'verify.ts reports every injected fault by path and field, and exits 1',
    timeoutMs: 120_000,
    async run() {
      const f = await getFixture();
      const expected = [
        ['drop:docs/notes.md', 'MISMATCH docs/notes.md: presence: expected "present (file)", got "missing"'],
        ['extra:ghost.txt', 'MISMATCH ghost.txt: presence: expected "absent", got "present (file)"'],
        ['mtime:names/#hash.txt', 'MISMATCH names/#hash.txt: mtime: expected '],
        ['corrupt:data/random-61393.bin', 'MISMATCH data/random-61393.bin: read.sha256: expected '],
        ['stall:many/f00007', 'MISMATCH many/f00007: read: expected "2 bytes", got "stalled: no progress for 3000 ms"'],
      ];
      const { code, lines } = await run('verify.ts', {
        SHARE_DIR: f.dir,
        LINKFS_FAKE_FAULTS: expected.map(([fault]) => fault).join(';'),
        LINKFS_VERIFY_STALL_MS: '3000',
      });
      assert(code === 1, `verify.ts exited ${String(code)} with faults injected, expected 1`);
      const reported = lines.filter((l) => l.startsWith('MISMATCH'));
      for (const [fault, line] of expected) {
        assert(reported.some((r) => r.startsWith(line!)), `fault ${fault} was not reported as ${JSON.stringify(line)}; reported:\n${indent(reported)}`);
      }
      assert(reported.length === expected.length, `${reported.length} mismatches reported for ${expected.length} faults:\n${indent(reported)}`);
      const figures = JSON.parse(lines.at(-1)!) as Record<string, unknown>;
      assert(figures.mismatches === expected.length, `the JSON line says ${String(figures.mismatches)} mismatches: ${lines.at(-1)!}`);
    },
  },
  {
    name: 'the e2e tests that need no real web UI or relay pass against the fake (a, b, c, e, g)',
    timeoutMs: 300_000,
    async run() {
      const { code, lines } = await run('e2e.ts', { LINKFS_E2E_ONLY: 'a:,b:,c:,e:,g:' });
      const summary = lines.at(-1);
      assert(code === 0 && summary === '5 passed, 0 failed', `e2e against the fake: exit ${String(code)}, last line ${JSON.stringify(summary)}:\n${indent(lines.slice(-40))}`);
      for (const l of lines.filter((x) => x.includes('figures') || x.includes('read('))) console.log(l);
    },
  },
];

await runSuite('harness-fake', tests, { afterAll: () => fixture?.remove() });

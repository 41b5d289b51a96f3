// Checks the harness itself, with no product code and no namespace needed:
// `node_modules/.bin/tsx tests-e2e/harness-check.ts`.
//   - the fixture has what the end-to-end tests rely on (special names, the 255-byte
//     name, 30-deep chain, empty things, mtimes, modes, symlinks);
//   - the tree walker agrees with GNU find and sha256sum, never follows symlinks, and
//     shows invalid UTF-8 as U+FFFD;
//   - scripts/check-wasm-imports rejects a module importing from "env" and accepts one
//     that does not;
//   - only the modules in web/src/wasm/ load the wasm module (others may import its
//     generated types with `import type`).

import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { dataSizes, makeFixture, name255, specialNames, type Fixture } from './lib/fixture.ts';
import { repoRoot, scratchDir } from './lib/paths.ts';
import { assert, runSuite, type TestCase } from './lib/runner.ts';
import { compareStreamed } from './lib/stream-compare.ts';
import { treeTotals, walkTree, type Tree, type TreeEntry } from './lib/tree.ts';
import { formatMismatch } from './lib/verify.ts';

let fixture: Fixture | undefined;
let tree: Tree | undefined;

async function fixtureTree(): Promise<{ fixture: Fixture; tree: Tree; byPath: Map<string, TreeEntry> }> {
  fixture ??= await makeFixture();
  tree ??= await walkTree(fixture.dir, { hash: true });
  return { fixture, tree, byPath: new Map(tree.entries.map((e) => [e.path, e])) };
}

function get(byPath: Map<string, TreeEntry>, p: string): TreeEntry {
  const e = byPath.get(p);
  assert(e !== undefined, `fixture has no entry ${JSON.stringify(p)}`);
  return e;
}

/** A wasm module importing one function `field` from `module`. */
function wasmImporting(module: string, field: string): Buffer {
  const name = (s: string) => [s.length, ...Buffer.from(s)];
  const imports = [1, ...name(module), ...name(field), 0x00, 0x00];
  return Buffer.from([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    ...[0x01, 0x04, 0x01, 0x60, 0x00, 0x00], // type section: one () -> ()
    ...[0x02, imports.length, ...imports],
  ]);
}

const tests: TestCase[] = [
  {
    name: 'fixture: special names, the 255-byte name, depth 30, empty things',
    async run() {
      const { fixture, byPath } = await fixtureTree();
      for (const n of specialNames) get(byPath, `names/${n}`);
      const long = name255();
      assert(Buffer.byteLength(long) === 255, `name255() is ${Buffer.byteLength(long)} bytes, expected 255`);
      assert(/[\u4e00-\u9fff]/.test(long) && /\p{Extended_Pictographic}/u.test(long) && long.includes('é'), 'the 255-byte name lacks 2-, 3- or 4-byte characters');
      assert(fixture.paths.longName === `names/${long}`, 'paths.longName is not the 255-byte name');
      get(byPath, fixture.paths.longName);
      for (const p of ['中文/文件.txt', 'über/straße.txt', 'emoji 🎉/party 🥳.txt']) get(byPath, p);
      const leaf = get(byPath, fixture.paths.deepLeaf!);
      const dirsAbove = leaf.path.split('/').length - 1;
      assert(dirsAbove === 30, `the deep leaf is under ${dirsAbove} directories, expected 30`);
      assert(get(byPath, 'empty-dir').kind === 'dir', 'empty-dir is not a directory');
      assert(![...byPath.keys()].some((p) => p.startsWith('empty-dir/') || p.startsWith('nested/empty/')), 'an empty directory has children');
      assert(get(byPath, 'zero.bin').size === 0 && get(byPath, 'nested/zero-too').size === 0, 'the empty files are not empty');
      const many = [...byPath.keys()].filter((p) => p.startsWith('many/')).length;
      assert(many === 1234, `many/ holds ${many} files, expected 1234`);
    },
  },
  {
    name: 'fixture: data sizes, mtimes, modes, symlinks',
    async run() {
      const { fixture, tree, byPath } = await fixtureTree();
      for (const size of dataSizes) {
        const e = get(byPath, `data/random-${size}.bin`);
        assert(e.size === size, `data/random-${size}.bin is ${e.size} bytes`);
      }
      const totals = treeTotals(tree);
      assert(totals.bytes > 4_000_000 && totals.bytes < 8_000_000, `fixture holds ${totals.bytes} bytes, expected a few MB`);
      const mtimes = new Set(tree.entries.map((e) => e.mtime));
      for (const t of [1_234_567_890, 2 ** 32 + 5, 4_102_444_800, 1]) assert(mtimes.has(t), `no entry has mtime ${t}`);
      const dirMtimes = new Set(tree.entries.filter((e) => e.kind === 'dir').map((e) => e.mtime));
      assert(dirMtimes.size > 3, 'directories do not have varied mtimes');
      const modes: Array<[string, number]> = [
        ['modes/read-only.txt', 0o444],
        ['modes/private.txt', 0o600],
        ['modes/group.txt', 0o640],
        ['modes/run.sh', 0o755],
        ['modes/private-dir', 0o700],
        ['modes/group-dir', 0o750],
      ];
      for (const [p, mode] of modes) {
        const got = get(byPath, p).mode;
        assert(got === mode, `${p} has mode ${got.toString(8)}, expected ${mode.toString(8)}`);
      }
      const links: Array<[string, string]> = [
        ['links/to-readme', '../docs/readme.txt'],
        ['links/to-docs', '../docs'],
        ['links/escape', '../../outside/secret.txt'],
        ['links/abs-escape', fixture.outsideSecretPath],
        ['links/dangling', 'does-not-exist'],
      ];
      for (const [p, target] of links) {
        const e = get(byPath, p);
        assert(e.kind === 'symlink' && e.target === target, `${p}: ${e.kind} -> ${String(e.target)}, expected symlink -> ${target}`);
      }
      assert(path.resolve(fixture.dir, 'links', '../../outside/secret.txt') === fixture.outsideSecretPath, 'links/escape does not point at the outside secret');
      assert(!fixture.outsideSecretPath.startsWith(`${fixture.dir}/`), 'the outside secret is inside the shared dir');
      assert(![...byPath.keys()].some((p) => p.startsWith('links/to-docs/')), 'the walker followed the links/to-docs symlink');
    },
  },
  {
    name: 'tree walker agrees with GNU find and sha256sum',
    async run() {
      const { fixture, tree } = await fixtureTree();
      const out = execFileSync('find', [fixture.dir, '-mindepth', '1', '-printf', '%P\\0%y\\0%s\\0%T@\\0%m\\0%l\\0'], { maxBuffer: 64 << 20 });
      const fields = out.toString('utf8').split('\0');
      fields.pop();
      assert(fields.length % 6 === 0, `find printed ${fields.length} fields, not a multiple of 6`);
      const kinds: Record<string, string> = { f: 'file', d: 'dir', l: 'symlink' };
      const fromFind = new Map<string, string>();
      for (let i = 0; i < fields.length; i += 6) {
        const [p, y, s, t, m, l] = fields.slice(i, i + 6) as [string, string, string, string, string, string];
        fromFind.set(p, JSON.stringify([kinds[y] ?? y, Number(s), Math.floor(Number(t)), parseInt(m, 8), y === 'l' ? l : undefined]));
      }
      assert(fromFind.size === tree.entries.length, `find lists ${fromFind.size} entries, the walker ${tree.entries.length}`);
      for (const e of tree.entries) {
        const mine = JSON.stringify([e.kind, e.size, e.mtime, e.mode, e.target]);
        const theirs = fromFind.get(e.path);
        assert(theirs === mine, `${e.path}: walker says ${mine}, find says ${String(theirs)}`);
      }
      const files = tree.entries.filter((e) => e.kind === 'file' && e.path.startsWith('data/'));
      const sums = execFileSync('sha256sum', files.map((e) => path.join(fixture.dir, e.path)), { encoding: 'utf8' });
      const byFile = new Map(sums.trim().split('\n').map((l) => [l.slice(66), l.slice(0, 64)]));
      for (const e of files) {
        const expected = byFile.get(path.join(fixture.dir, e.path));
        assert(e.sha256 === expected, `${e.path}: walker sha256 ${String(e.sha256)}, sha256sum ${String(expected)}`);
      }
    },
  },
  {
    name: 'tree walker shows invalid UTF-8 names as U+FFFD and still reads them',
    async run(t) {
      const dir = await mkdtemp(path.join(scratchDir, 'badname-'));
      t.defer(() => rm(dir, { recursive: true, force: true }));
      await writeFile(Buffer.concat([Buffer.from(`${dir}/bad`), Buffer.from([0xff]), Buffer.from('.txt')]), 'abc');
      const walked = await walkTree(dir, { hash: true });
      assert(walked.entries.length === 1, `walked ${walked.entries.length} entries, expected 1`);
      const e = walked.entries[0]!;
      assert(e.path === 'bad\uFFFD.txt', `path is ${JSON.stringify(e.path)}, expected "bad\\uFFFD.txt"`);
      assert(e.size === 3 && e.sha256 === 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad', `size ${e.size}, sha256 ${String(e.sha256)}`);
    },
  },
  {
    name: 'scripts/check-wasm-imports rejects imports from "env" and accepts others',
    async run(t) {
      const dir = await mkdtemp(path.join(scratchDir, 'wasm-'));
      t.defer(() => rm(dir, { recursive: true, force: true }));
      const bad = path.join(dir, 'bad_bg.wasm');
      const good = path.join(dir, 'good_bg.wasm');
      await writeFile(bad, wasmImporting('env', 'abort'));
      await writeFile(good, wasmImporting('wbg', '__wbindgen_throw'));
      const script = path.join(repoRoot, 'scripts', 'check-wasm-imports');
      const rejected = spawnSync('bash', [script, bad], { encoding: 'utf8' });
      assert(rejected.status === 1, `exit ${String(rejected.status)} for a module importing env.abort, expected 1; output: ${rejected.stdout}${rejected.stderr}`);
      assert(`${rejected.stdout}${rejected.stderr}`.includes('env.abort'), `the rejection does not name env.abort: ${rejected.stdout}${rejected.stderr}`);
      const accepted = spawnSync('bash', [script, good], { encoding: 'utf8' });
      assert(accepted.status === 0, `exit ${String(accepted.status)} for a module importing only from wbg; output: ${accepted.stdout}${accepted.stderr}`);
      const none = spawnSync('bash', [script, path.join(dir, 'missing_bg.wasm')], { encoding: 'utf8' });
      assert(none.status !== 0, 'a missing .wasm file was accepted');
    },
  },
  {
    name: 'only web/src/wasm/ loads the wasm module (the page, the index worker, the password worker)',
    async run() {
      const webSrc = path.join(repoRoot, 'web', 'src');
      const files = (await readdir(webSrc, { recursive: true })).filter((f) => f.endsWith('.ts'));
      const loaders: string[] = [];
      for (const f of files) {
        const text = await readFile(path.join(webSrc, f), 'utf8');
        // Any import of core-wasm/pkg that is not `import type` / `export type` (a
        // statement may span lines): static, re-exported, dynamic or `?url`.
        const code = text.replace(/^\s*\/\/.*$/gm, '');
        const statics = [...code.matchAll(/(?:^|;|\n)\s*(import|export)\s+([^;]*?)\bfrom\s*['"]([^'"]*)['"]/g)].filter(
          (m) => m[3]!.includes('core-wasm/pkg/') && !m[2]!.trimStart().startsWith('type '),
        );
        const dynamic = /\bimport\(\s*['"][^'"]*core-wasm\/pkg\//.test(code);
        if (statics.length > 0 || dynamic) loaders.push(f);
      }
      const outside = loaders.filter((f) => !f.startsWith(`wasm${path.sep}`));
      assert(outside.length === 0, `modules outside web/src/wasm/ load the wasm: ${outside.join(', ')}`);
      const want = ['page.ts', 'password-worker.ts', 'unseal-worker.ts', 'worker.ts'].map((f) => `wasm${path.sep}${f}`);
      assert(
        JSON.stringify(loaders.sort()) === JSON.stringify(want),
        `expected the page, the index worker, the password worker and the unseal worker to load it, found: ${loaders.join(', ')}`,
      );
    },
  },
  {
    name: 'a file modified at x.999999999 s is expected at second x, as the sharer lists it (a double of milliseconds rounded it up: one mismatch in the 10M scale tree)',
    async run() {
      const dir = await mkdtemp(path.join(scratchDir, 'mtime-'));
      try {
        await writeFile(path.join(dir, 'late.txt'), 'x');
        execFileSync('touch', ['-d', '@1725061324.999999999', path.join(dir, 'late.txt')]);
        const walked = await walkTree(dir);
        assert(walked.entries[0]?.mtime === 1725061324, `the walker says ${walked.entries[0]?.mtime}, 1725061324 expected`);
        const compared = await compareStreamed(stubPage(indexOf(walked)), dir);
        assert(compared.mismatchCount === 0 && compared.files === 1, `the streamed comparison disagrees: ${compared.mismatches.map(formatMismatch).join('; ')}`);
        const wrong = indexOf(walked);
        wrong.rows[0]!.mtime = 1725061325;
        const off = await compareStreamed(stubPage(wrong), dir);
        assert(off.mismatches.some((m) => m.field === 'mtime' && m.expected === 1725061324), 'a listing one second late was not reported');
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  },
  {
    name: "the scale test's folder-at-a-time comparison agrees with the tree walker on the fixture, and reports a missing, an extra, a wrong and a twice-listed entry",
    async run() {
      const { fixture, tree } = await fixtureTree();
      const totals = treeTotals(tree);
      const clean = await compareStreamed(stubPage(indexOf(tree)), fixture.dir, { window: 7 });
      assert(clean.mismatchCount === 0, `mismatches on an index equal to the tree: ${clean.mismatches.map(formatMismatch).join('; ')}`);
      assert(clean.entries === totals.entries && clean.files === totals.files && clean.dirs === totals.dirs, `counted ${clean.entries}/${clean.files}/${clean.dirs} entries/files/folders, the walker ${totals.entries}/${totals.files}/${totals.dirs}`);
      assert(clean.sample.length === Math.min(20, totals.files) && clean.small.every((f) => f.size > 0 && f.size <= 4096), 'the sample or the small files are wrong');

      const files = tree.entries.filter((e) => e.kind === 'file' && e.path.includes('/'));
      const dirs = tree.entries.filter((e) => e.kind === 'dir');
      const gone = files[0]!.path;
      const resized = files[1]!.path;
      const damaged = indexOf(tree);
      damaged.rows = damaged.rows.filter((r) => r.path !== gone);
      damaged.rows.find((r) => r.path === resized)!.size += 1;
      damaged.rows.push({ ...damaged.rows.find((r) => r.path === resized)!, id: 999_999, name: 'not on disk', path: 'not on disk', parent: 0 });
      const twice = dirs[0]!;
      const other = dirs.find((d) => !d.path.startsWith(`${twice.path}/`) && d.path !== twice.path && !twice.path.startsWith(`${d.path}/`))!;
      damaged.rows.find((r) => r.path === other.path)!.id = damaged.rows.find((r) => r.path === twice.path)!.id;
      const found = await compareStreamed(stubPage(damaged), fixture.dir, { window: 7, keep: 1000 });
      const has = (p: string, field: string) => found.mismatches.some((m) => m.path === p && m.field === field);
      assert(has(gone, 'presence'), `the entry missing from the index was not reported: ${found.mismatches.map(formatMismatch).join('; ')}`);
      assert(has('not on disk', 'presence'), 'the entry only in the index was not reported');
      assert(has(resized, 'size'), 'the wrong size was not reported');
      assert(found.mismatches.some((m) => m.field === 'id'), 'a folder listed twice under one id was not reported');
    },
  },
];

/** A page index built from the walker's tree: ids are positions, the root is 0. */
function indexOf(tree: Tree): { rows: Array<{ id: number; parent: number; name: string; path: string; kind: string; size: number; mtime: number; mode: number; target?: string }> } {
  const idOf = new Map<string, number>([['', 0]]);
  tree.entries.forEach((e, i) => idOf.set(e.path, i + 1));
  const rows = tree.entries.map((e, i) => {
    const parent = e.path.includes('/') ? e.path.slice(0, e.path.lastIndexOf('/')) : '';
    const row = { id: i + 1, parent: idOf.get(parent)!, name: e.path.slice(e.path.lastIndexOf('/') + 1), path: e.path, kind: e.kind, size: e.kind === 'file' ? e.size : 0, mtime: e.mtime, mode: e.mode } as { id: number; parent: number; name: string; path: string; kind: string; size: number; mtime: number; mode: number; target?: string };
    if (e.target !== undefined) row.target = e.target;
    return row;
  });
  return { rows };
}

/** Stands in for a Playwright page whose `window.linkfsShare` lists `index` (named as such: no browser here). */
function stubPage(index: ReturnType<typeof indexOf>): import('playwright-core').Page {
  const share = {
    rootId: 0,
    list: async (dir: number, _sort: string, _desc: boolean, start: number, count: number) => {
      const all = index.rows.filter((r) => r.parent === dir).sort((a, b) => (a.name < b.name ? -1 : 1));
      return { total: all.length, start, rows: all.slice(start, start + count) };
    },
  };
  (globalThis as unknown as { window: unknown }).window = { linkfsShare: share };
  return { evaluate: async (fn: (arg: unknown) => unknown, arg: unknown) => fn(arg) } as unknown as import('playwright-core').Page;
}

await runSuite('harness-check', tests, { afterAll: () => fixture?.remove() });

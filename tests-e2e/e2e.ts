// The end-to-end suite: the real `linkfs share`, the real relay, the real web app in
// the system Chromium, inside a private network namespace. Run with
// `bash tests-e2e/run e2e` (or `npm run e2e`); pick tests with LINKFS_E2E_ONLY=d:,f:
// (names starting with those) or LINKFS_E2E_ONLY=relay (names containing it).
// Screenshots of failed tests land in tests-e2e/out/.

import { createHash } from 'node:crypto';
import { appendFile, chmod, mkdir, mkdtemp, readdir, readFile, rename, rm, stat, symlink, truncate, unlink, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { launchChromium, openLink, screenshot, statusText, waitForState, type ChromiumInstance } from './lib/chromium.ts';
import { makeBigFileFixture, makeFixture, makeSmallFixture, type Fixture } from './lib/fixture.ts';
import type { EntryId, EntryRow, IndexProgress } from './lib/page-api.ts';
import { startRelay } from './lib/relay-process.ts';
import { assert, fail, runSuite, type TestCase, type TestContext } from './lib/runner.ts';
import { startShare, truncatedLink, withWrongSecret, type ShareOptions, type ShareProcess } from './lib/share-process.ts';
import { walkTree, type Tree } from './lib/tree.ts';
import { compareIndex, enumerateIndex, formatMismatch, indexWireBytes, readInPage, verifyShare, waitForComplete, type VerifyReport } from './lib/verify.ts';
import { generatedTree } from './lib/gen-tree.ts';
import { changedFiles, checkBytesInPage, checkBytesOnMount, convergeIndex, convergeMount } from './lib/follow.ts';
import { startMount } from './lib/mount-process.ts';
import { binary, scratchDir } from './lib/paths.ts';
import { spawnSync } from 'node:child_process';

const log = (line: string) => console.log(line);
/**
 * How often k drops the data link during the fill. 6 by default (20 until 2026-11-28,
 * then 10: each drop is the same reconnect and resume, about 3 s of CI each).
 * LINKFS_E2E_FILL_DROPS sets it.
 */
const fillDrops = Number(process.env.LINKFS_E2E_FILL_DROPS ?? '6');

// Fixtures are made once and shared by the tests that only read them.
let full: { fixture: Fixture; tree: Tree } | undefined;
let small: { fixture: Fixture; tree: Tree } | undefined;

async function fullFixture(): Promise<{ fixture: Fixture; tree: Tree }> {
  if (full === undefined) {
    const fixture = await makeFixture();
    full = { fixture, tree: await walkTree(fixture.dir, { hash: true }) };
  }
  return full;
}

async function smallFixture(): Promise<{ fixture: Fixture; tree: Tree }> {
  if (small === undefined) {
    const fixture = await makeSmallFixture();
    small = { fixture, tree: await walkTree(fixture.dir, { hash: true }) };
  }
  return small;
}

/**
 * Starts a sharer that is killed after the test whatever happens. Start browsers
 * first: index times run from the sharer's spawn and must not include Chromium's start.
 */
async function share(t: TestContext, dir: string, options: ShareOptions = {}): Promise<ShareProcess> {
  const s = await startShare(dir, options);
  t.defer(() => s.kill());
  t.onFailure(() => log(`    sharer stderr tail:\n${s.process.stderrTail().replace(/^/gm, '      ')}`));
  log(`    link ${s.link} after ${(s.linkMs / 1000).toFixed(3)} s`);
  return s;
}

/** A fresh Chromium, closed after the test; its page is screenshot if the test fails. */
async function browser(t: TestContext, name: string): Promise<{ chromium: ChromiumInstance; page: Page }> {
  const chromium = await launchChromium({ name, log });
  t.defer(() => chromium.close());
  const page = await chromium.page();
  t.onFailure(async () => {
    const file = await screenshot(page, `${t.name}-${name}`);
    if (file !== null) log(`    screenshot of ${name}: ${file}`);
    log(`    ${name} body state ${JSON.stringify(await page.evaluate(() => document.body?.dataset.state ?? null).catch(() => null))}, status ${JSON.stringify(await statusText(page).catch(() => ''))}`);
  });
  return { chromium, page };
}

function assertNoMismatches(report: VerifyReport, who: string): void {
  log(`    ${who} figures ${JSON.stringify(report.figures)}`);
  if (report.mismatches.length > 0) {
    const shown = report.mismatches.slice(0, 40).map(formatMismatch);
    const more = report.mismatches.length > shown.length ? `\n  ... and ${report.mismatches.length - shown.length} more` : '';
    fail(`${who}: ${report.mismatches.length} differences between the share and the directory:\n  ${shown.join('\n  ')}${more}`);
  }
}

function assertNoPageErrors(chromium: ChromiumInstance): void {
  assert(chromium.pageErrors.length === 0, `${chromium.name}: uncaught errors in the page:\n  ${chromium.pageErrors.join('\n  ')}`);
}

async function lookup(page: Page, path: string): Promise<EntryRow | null> {
  return page.evaluate((p: string) => window.linkfsShare!.lookup(p), path);
}

/** Progress once the reopened page has restored its cache: it restores in
 *  short steps (the first screens show while the rest is applied), and until
 *  it is done progress counts what is restored so far. */
async function restoredProgress(page: Page): Promise<IndexProgress> {
  await page.waitForFunction(() => window.linkfsShare!.progress().loadingCache !== true, null, { timeout: 10_000 });
  return page.evaluate(() => window.linkfsShare!.progress());
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

const tests: TestCase[] = [
  {
    name: 'a: share the fixture; the complete index equals the directory and every file reads back byte for byte',
    timeoutMs: 180_000,
    async run(t) {
      const { fixture, tree } = await fullFixture();
      const { chromium, page } = await browser(t, 'a');
      const s = await share(t, fixture.dir);
      await openLink(page, s.link, ['connected']);
      const report = await verifyShare({ page, tree, spawnedAt: s.spawnedAt, linkMs: s.linkMs, log });
      assertNoMismatches(report, 'browser');

      // lookup() by path finds the awkward names too.
      for (const p of [fixture.paths.longName!, fixture.paths.deepLeaf!, 'names/say "hi".txt', 'names/100% done.txt', '中文/文件.txt']) {
        const row = await lookup(page, p);
        const expected = p.split('/').pop();
        assert(row !== null && row.name === expected, `lookup(${JSON.stringify(p)}) gave ${JSON.stringify(row)}, expected the entry named ${JSON.stringify(expected)}`);
      }

      // Symlinks that leave the share are listed, but never read through.
      const secretHash = sha256(fixture.outsideSecret);
      for (const p of [fixture.paths.escapeLink!, fixture.paths.absEscapeLink!]) {
        const row = await lookup(page, p);
        assert(row !== null && row.kind === 'symlink', `lookup(${JSON.stringify(p)}) gave ${JSON.stringify(row)}, expected a symlink`);
        const { results } = await readInPage(page, [row.id], 1, 10_000);
        const r = results[0]!;
        assert(r.sha256 !== secretHash, `reading ${p} in the browser returned the content of ${fixture.outsideSecretPath}, outside the share`);
        log(`    read(${p}) -> ${r.error ?? `${r.bytes} bytes (not the outside file)`}`);
      }
      assertNoPageErrors(chromium);
      await s.stop();
    },
  },
  {
    name: 'b: a wrong secret shows "not valid"; the sharer keeps serving the right link',
    timeoutMs: 90_000,
    async run(t) {
      const { fixture } = await smallFixture();
      const s = await share(t, fixture.dir);
      const wrong = withWrongSecret(s.link);
      const { chromium, page } = await browser(t, 'wrong-secret');
      await openLink(page, wrong, ['invalid-link'], 30_000);
      const text = await statusText(page);
      assert(/not valid/i.test(text), `status text ${JSON.stringify(text)} does not say the link is "not valid"`);
      const leaked = await page.evaluate(() => (window.linkfsShare ? window.linkfsShare.progress().received : 0));
      assert(leaked === 0, `a visitor with the wrong secret received ${leaked} index entries`);

      const right = await chromium.page();
      await openLink(right, s.link, ['connected']);
      await waitForComplete(right, s.spawnedAt, 30_000);
      assert(s.process.exited() === null, 'the sharer exited after the wrong-secret visit');
      assertNoPageErrors(chromium);
    },
  },
  {
    name: 'b2: a truncated link (bad copy-paste) shows "not valid"',
    timeoutMs: 60_000,
    async run(t) {
      const { fixture } = await smallFixture();
      const { chromium, page } = await browser(t, 'truncated');
      const s = await share(t, fixture.dir);
      await openLink(page, truncatedLink(s.link), ['invalid-link'], 30_000);
      const text = await statusText(page);
      assert(/not valid/i.test(text), `status text ${JSON.stringify(text)} does not say the link is "not valid"`);
      assertNoPageErrors(chromium);
    },
  },
  {
    name: 'c: two browsers open the link at once; each gets the full index and verified reads',
    timeoutMs: 240_000,
    async run(t) {
      const { fixture, tree } = await fullFixture();
      const [one, two] = await Promise.all([browser(t, 'c1'), browser(t, 'c2')]);
      const s = await share(t, fixture.dir);
      await Promise.all([openLink(one.page, s.link, ['connected']), openLink(two.page, s.link, ['connected'])]);
      const reports = await Promise.all(
        [one, two].map(({ page }, i) => verifyShare({ page, tree, spawnedAt: s.spawnedAt, linkMs: s.linkMs, log: (l) => log(`  [c${i + 1}]${l}`) })),
      );
      assertNoMismatches(reports[0]!, 'browser c1');
      assertNoMismatches(reports[1]!, 'browser c2');
      assertNoPageErrors(one.chromium);
      assertNoPageErrors(two.chromium);
      await s.stop();
    },
  },
  {
    name: 'd: share through a separately running linkfs-relay',
    timeoutMs: 90_000,
    async run(t) {
      const { fixture, tree } = await smallFixture();
      const relay = await startRelay();
      t.defer(async () => log(`    relay stopped: ${await relay.stop()}`));
      const { chromium, page } = await browser(t, 'relay');
      const s = await share(t, fixture.dir, { args: ['--relay', relay.url] });
      assert(new URL(s.link).origin === relay.url, `the link ${s.link} does not point at the relay ${relay.url}`);
      await openLink(page, s.link, ['connected']);
      assertNoMismatches(await verifyShare({ page, tree, spawnedAt: s.spawnedAt, linkMs: s.linkMs, log }), 'browser via relay');
      assertNoPageErrors(chromium);
      await s.stop();
      assert(relay.process.exited() === null, 'the relay exited when the sharer stopped');
    },
  },
  {
    name: "e: the sharer stops (SIGTERM, exit 0) while a page is open; the page says 'sharer-gone'",
    timeoutMs: 60_000,
    async run(t) {
      const { fixture } = await smallFixture();
      const { chromium, page } = await browser(t, 'gone');
      const s = await share(t, fixture.dir);
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 30_000);
      await s.stop();
      await waitForState(page, ['sharer-gone'], 20_000);
      const text = await statusText(page);
      assert(text.trim() !== '', 'the page is in state sharer-gone but its status says nothing');
      log(`    status: ${JSON.stringify(text)}`);
      // The tab must take the sharer's departure in its stride: nothing thrown while the
      // connection winds down, and what was received stays browsable.
      await page.waitForTimeout(1_000);
      assertNoPageErrors(chromium);
      const root = await page.evaluate(() => window.linkfsShare!.list(window.linkfsShare!.rootId, 'name', false, 0, 100));
      assert(root.total > 0, 'after the sharer left, the received index lists nothing at the root');
    },
  },
  {
    name: 'f: UI smoke: rows, directory navigation, text preview, sort by size',
    timeoutMs: 90_000,
    async run(t) {
      const { fixture, tree } = await smallFixture();
      const s = await share(t, fixture.dir);
      const { chromium, page } = await browser(t, 'ui');
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 30_000);

      const rowsNow = () =>
        page.$$eval('[data-testid=row]', (els) => els.map((e) => ({ name: (e as HTMLElement).dataset.name ?? '', kind: (e as HTMLElement).dataset.kind ?? '' })));
      const waitRows = async (expected: string[], ordered: boolean, what: string) => {
        const want = ordered ? expected : [...expected].sort();
        let got: string[] = [];
        for (const deadline = Date.now() + 10_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
          got = (await rowsNow()).map((r) => r.name);
          if (!ordered) got.sort();
          if (JSON.stringify(got) === JSON.stringify(want)) return;
        }
        fail(`${what}: rows are ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
      };
      const crumbs = () => page.locator('[data-testid=breadcrumb]').count();
      // Rows are recycled while the listing loads: click one only once every shown row has its data.
      const row = (name: string) => page.locator(`[data-testid=listing][data-loading=false] [data-testid=row][data-name=${JSON.stringify(name)}]`);

      const top = tree.entries.filter((e) => !e.path.includes('/'));
      await waitRows(top.map((e) => e.path), false, 'root listing');
      for (const r of await rowsNow()) {
        const expected = top.find((e) => e.path === r.name)!.kind;
        assert(r.kind === expected, `row ${r.name} has data-kind ${r.kind}, expected ${expected}`);
      }

      const rootCrumbs = await crumbs();
      await row('docs').click();
      await waitRows(['readme.txt'], false, 'after opening docs');
      const docsCrumbs = await crumbs();
      assert(docsCrumbs === rootCrumbs + 1, `breadcrumbs went from ${rootCrumbs} to ${docsCrumbs} on opening docs, expected ${rootCrumbs + 1}`);

      await row('readme.txt').click();
      const preview = page.locator('[data-testid=preview]');
      const text = fixture.texts['docs/readme.txt']!.trim();
      try {
        await preview.filter({ hasText: text }).waitFor({ timeout: 10_000 });
      } catch {
        fail(`the preview does not show ${JSON.stringify(text)}; it shows ${JSON.stringify(await preview.textContent().catch(() => null))}`);
      }

      await page.locator('[data-testid=breadcrumb]').first().click();
      await waitRows(top.map((e) => e.path), false, 'back at the root');
      await row('sizes').click();
      const sizes = tree.entries.filter((e) => e.path.startsWith('sizes/')).map((e) => ({ name: e.path.slice('sizes/'.length), size: e.size }));
      const ascending = [...sizes].sort((x, y) => x.size - y.size).map((e) => e.name);
      const descending = [...ascending].reverse();
      await waitRows(ascending, false, 'sizes/');
      await page.locator('[data-testid=sort-size]').click();
      let first: string[] = [];
      for (const deadline = Date.now() + 10_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
        first = (await rowsNow()).map((r) => r.name);
        if (JSON.stringify(first) === JSON.stringify(ascending) || JSON.stringify(first) === JSON.stringify(descending)) break;
      }
      const isAscending = JSON.stringify(first) === JSON.stringify(ascending);
      assert(isAscending || JSON.stringify(first) === JSON.stringify(descending), `after sorting by size the rows are ${JSON.stringify(first)}; expected ${JSON.stringify(ascending)} or its reverse`);
      await page.locator('[data-testid=sort-size]').click();
      await waitRows(isAscending ? descending : ascending, true, 'after clicking sort-size again');
      assertNoPageErrors(chromium);
    },
  },
  {
    name: 'g: a 64 MiB file reads in the browser 3 times in a row, verified, without stalling',
    timeoutMs: 240_000,
    async run(t) {
      const bytes = 64 * 1024 * 1024;
      const fixture = await makeBigFileFixture(bytes);
      t.defer(() => fixture.remove());
      const tree = await walkTree(fixture.dir, { hash: true });
      const expected = tree.entries.find((e) => e.path === 'big.bin')!;
      const s = await share(t, fixture.dir);
      const { chromium, page } = await browser(t, 'big');
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 30_000);
      const row = await lookup(page, 'big.bin');
      assert(row !== null && row.kind === 'file' && row.size === bytes, `lookup('big.bin') gave ${JSON.stringify(row)}, expected a ${bytes}-byte file`);
      const rates: number[] = [];
      for (let i = 1; i <= 3; i += 1) {
        const { results } = await readInPage(page, [row.id], 1, 10_000);
        const r = results[0]!;
        assert(r.error === null, `read ${i} of big.bin failed: ${r.error}`);
        assert(r.bytes === bytes, `read ${i} of big.bin gave ${r.bytes} bytes, expected ${bytes}`);
        assert(r.sha256 === expected.sha256, `read ${i} of big.bin: sha256 ${r.sha256}, expected ${expected.sha256}`);
        const rate = bytes / 1e6 / (r.ms / 1000);
        rates.push(Math.round(rate * 10) / 10);
        log(`    read ${i}: ${(r.ms / 1000).toFixed(2)} s, ${rate.toFixed(1)} MB/s (read + SHA-256 in the page)`);
      }
      log(`    figures ${JSON.stringify({ file_bytes: bytes, read_mb_per_s: rates })}`);
      assertNoPageErrors(chromium);
      await s.stop();
    },
  },
  {
    name: 'g2: a save paused while its file changes on disk never holds two versions: it fails saying the file changed',
    timeoutMs: 120_000,
    async run(t) {
      const bytes = 48 * 1024 * 1024;
      const fixture = await makeBigFileFixture(bytes);
      t.defer(() => fixture.remove());
      const file = path.join(fixture.dir, 'big.bin');
      const old = sha256(await readFile(file));
      const s = await share(t, fixture.dir);
      const { chromium, page } = await browser(t, 'paused');
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 30_000);
      const row = await lookup(page, 'big.bin');
      assert(row !== null && row.kind === 'file' && row.size === bytes, `lookup('big.bin') gave ${JSON.stringify(row)}`);
      // The page's transfer, as the service worker drives it, given credit for 8 MiB
      // only: the save reads ahead its window and waits, as one does whose disk or
      // download manager is paused.
      await page.evaluate(
        async ({ id, size, credit }) => {
          const channel = new MessageChannel();
          const transfer = window.linkfsShare!.transfer({ kind: 'file', id }, { kind: 'port', port: channel.port1, once: true });
          transfer.done.catch(() => undefined);
          await transfer.ready;
          const state = { got: 0, ended: false, error: null as string | null, parts: [] as Uint8Array[] };
          channel.port2.onmessage = (event: MessageEvent<{ type: string; chunk?: ArrayBuffer; message?: string }>) => {
            const m = event.data;
            if (m.type === 'data' && m.chunk) {
              state.parts.push(new Uint8Array(m.chunk));
              state.got += m.chunk.byteLength;
            } else if (m.type === 'end') state.ended = true;
            else if (m.type === 'error') state.error = m.message ?? 'an error without words';
          };
          channel.port2.postMessage({ type: 'open', stream: 1, start: 0, end: size, credit });
          const w = window as unknown as Record<string, unknown>;
          w['pausedSave'] = { state, more: (n: number) => channel.port2.postMessage({ type: 'credit', stream: 1, bytes: n }) };
        },
        { id: row.id, size: bytes, credit: 8 * 1024 * 1024 },
      );
      const got = () => page.evaluate(() => ((window as unknown as Record<string, { state: { got: number } }>)['pausedSave']!.state.got));
      const deadline = Date.now() + 30_000;
      while ((await got()) < 8 * 1024 * 1024) {
        assert(Date.now() < deadline, `the paused save received ${await got()} bytes in 30 s, not its 8 MiB of credit`);
        await new Promise((r) => setTimeout(r, 100));
      }
      await new Promise((r) => setTimeout(r, 1000)); // its read-ahead settles: nothing in flight
      // The file rewritten in place, same size, new bytes and time; then wait until the
      // page's index has the new version.
      const fresh = Buffer.alloc(bytes, 0x5a);
      for (let i = 0; i < bytes; i += 4096) fresh.writeUInt32LE((i ^ 0x9e3779b9) >>> 0, i);
      await writeFile(file, fresh);
      const later = new Date(Math.floor(Date.now() / 1000 + 120) * 1000);
      await utimes(file, later, later);
      const newer = sha256(fresh);
      const seen = Date.now() + 15_000;
      while ((await lookup(page, 'big.bin'))?.mtime !== later.getTime() / 1000) {
        assert(Date.now() < seen, 'the page did not hear of the new version within 15 s');
        await new Promise((r) => setTimeout(r, 100));
      }
      await page.evaluate((n) => (window as unknown as Record<string, { more: (n: number) => void }>)['pausedSave']!.more(n), bytes);
      const end = await page.waitForFunction(
        () => {
          const st = (window as unknown as Record<string, { state: { ended: boolean; error: string | null } }>)['pausedSave']!.state;
          return st.ended || st.error !== null ? { ended: st.ended, error: st.error } : null;
        },
        null,
        { timeout: 60_000, polling: 100 },
      );
      const result = (await end.jsonValue()) as { ended: boolean; error: string | null };
      const digest = await page.evaluate(async () => {
        const st = (window as unknown as Record<string, { state: { parts: Uint8Array[]; got: number } }>)['pausedSave']!.state;
        const all = new Uint8Array(st.got);
        let at = 0;
        for (const p of st.parts) {
          all.set(p, at);
          at += p.byteLength;
        }
        const h = new Uint8Array(await crypto.subtle.digest('SHA-256', all));
        return Array.from(h, (b) => b.toString(16).padStart(2, '0')).join('');
      });
      if (result.error !== null) {
        assert(/changed/.test(result.error), `the save failed, but not saying the file changed: ${result.error}`);
        log(`    the save failed as it should: ${result.error}`);
      } else {
        assert(digest === old || digest === newer, `the save finished holding bytes of two versions of the file (sha256 ${digest}; the old ${old}, the new ${newer})`);
        log(`    the save finished with one version whole (${digest === old ? 'the old' : 'the new'})`);
      }
      assertNoPageErrors(chromium);
    },
  },
  {
    name: 'h: reopening the link shows the index from IndexedDB at once and fetches only what is new',
    timeoutMs: 120_000,
    async run(t) {
      const { fixture, tree } = await smallFixture();
      const { chromium, page } = await browser(t, 'reopen');
      const s = await share(t, fixture.dir);
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 30_000);
      const first = await page.evaluate(() => ({ progress: window.linkfsShare!.progress(), stats: window.linkfsStats?.() ?? null }));
      assert(first.stats !== null, 'window.linkfsStats() gave nothing');
      // Wait until the worker has committed everything to IndexedDB.
      for (const deadline = Date.now() + 10_000; ; await page.waitForTimeout(50)) {
        const p = await page.evaluate(() => window.linkfsShare!.progress());
        if (p.persisted === tree.entries.length + 1) break;
        if (Date.now() > deadline) fail(`only ${p.persisted} of ${tree.entries.length + 1} entries reached IndexedDB`);
      }
      await page.reload();
      // Before the sharer answers, the tree is already there from the cache.
      await page.waitForFunction(() => window.linkfsShare !== undefined, null, { timeout: 15_000 });
      const cached = await restoredProgress(page);
      assert(cached.fromCache === tree.entries.length + 1, `after reopening, ${cached.fromCache} entries came from IndexedDB, expected ${tree.entries.length + 1}`);
      await waitForState(page, ['connected'], 20_000);
      // The sharer answers the resume with just the batch that says "complete".
      const resumed = await page
        .waitForFunction(() => (window.linkfsStats?.()?.indexWireBytes ?? 0) > 0 && window.linkfsShare!.progress().complete, null, { timeout: 20_000 })
        .then(() => true, () => false);
      const again = await page.evaluate(() => window.linkfsStats?.() ?? null);
      assert(resumed && again !== null, `the reopened page never heard from the sharer about its index (stats ${JSON.stringify(again)})`);
      log(`    index bytes on the wire: first visit ${first.stats.indexWireBytes}, reopened ${again.indexWireBytes}`);
      assert(
        again.indexWireBytes < 64 && again.indexWireBytes < first.stats.indexWireBytes / 10,
        `reopening fetched ${again.indexWireBytes} index bytes again (first visit ${first.stats.indexWireBytes}); it should resume, not start over`,
      );
      assertNoMismatches(await verifyShare({ page, tree, spawnedAt: s.spawnedAt, linkMs: s.linkMs, log }), 'reopened browser');
      assertNoPageErrors(chromium);
      await s.stop();
    },
  },
  {
    name: "h2: a share whose database another tab holds at an older version still opens, in memory (regression: the page said 'Connecting…' for good)",
    timeoutMs: 120_000,
    async run(t) {
      const { fixture, tree } = await smallFixture();
      const { chromium, page } = await browser(t, 'held-db');
      const s = await share(t, fixture.dir);
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 30_000);
      const known = new Set(['linkfs-thumbnails', 'linkfs-tab-share']);
      const names = await page.evaluate(async () => (await indexedDB.databases()).map((d) => d.name ?? ''));
      const shareDbs = names.filter((n) => !known.has(n));
      assert(shareDbs.length === 1, `expected the share's one database, found ${JSON.stringify(names)}`);
      const dbName = shareDbs[0]!;
      // Another tab of the origin (an older page, say) holds the database open at
      // version 1 and never lets go: opening it at the current version is blocked.
      await page.goto('about:blank');
      const holder = await chromium.page();
      await holder.goto(new URL(s.link).origin + '/');
      const held = await holder.evaluate(async (name) => {
        const done = (r: IDBRequest) => new Promise((resolve, reject) => ((r.onsuccess = resolve), (r.onerror = () => reject(r.error))));
        await done(indexedDB.deleteDatabase(name));
        const open = indexedDB.open(name, 1);
        await done(open);
        (window as unknown as { held: IDBDatabase }).held = open.result;
        return open.result.version;
      }, dbName);
      assert(held === 1, `the holder opened version ${held}`);
      const opened = Date.now();
      await page.goto(s.link);
      // Meanwhile the status says what the page waits for.
      await page.waitForFunction(() => /storage has not answered/.test(document.querySelector('[data-testid=status]')?.textContent ?? ''), null, { timeout: 9_000 });
      await waitForState(page, ['connected'], 25_000);
      await waitForComplete(page, s.spawnedAt, 30_000);
      const p = await page.evaluate(() => window.linkfsShare!.progress());
      log(`    connected ${Date.now() - opened} ms after opening, storage: ${JSON.stringify(p.storageProblem ?? null)}`);
      assert(/did not open/.test(p.storageProblem ?? ''), `the page should say its storage did not open, says ${JSON.stringify(p.storageProblem ?? null)}`);
      assertNoMismatches(await verifyShare({ page, tree, spawnedAt: s.spawnedAt, linkMs: s.linkMs, log }), 'browser without storage');
      await s.stop();
    },
  },
  {
    name: "h3: an index worker that never starts is started again, and the share opens (regression: Firefox ESR's page said 'Connecting…' for good, its worker silent)",
    timeoutMs: 120_000,
    async run(t) {
      const { fixture, tree } = await smallFixture();
      const { page } = await browser(t, 'silent-worker');
      const s = await share(t, fixture.dir);
      // The first fetch of the index worker's script is never answered: the worker
      // neither starts nor fails, as Firefox ESR's did now and then.
      let held = 0;
      let passed = 0;
      await page.route(/\/assets\/worker-[^/]*\.js(\?.*)?$/, async (route) => {
        if (held === 0) {
          held += 1;
          return; // left unanswered
        }
        passed += 1;
        await route.continue();
      });
      const warnings: string[] = [];
      page.on('console', (m) => {
        if (m.text().includes('index worker said nothing')) warnings.push(m.text());
      });
      const opened = Date.now();
      await page.goto(s.link);
      await waitForState(page, ['connected'], 30_000);
      await waitForComplete(page, s.spawnedAt, 30_000);
      log(`    connected ${Date.now() - opened} ms after opening; worker script fetches held ${held}, passed ${passed}; ${JSON.stringify(warnings)}`);
      assert(held === 1 && passed >= 1, `the worker's script was fetched ${held + passed} times (held ${held}): the page did not start its worker again`);
      assert(warnings.length === 1, `the page should say once that it started its worker again, said ${JSON.stringify(warnings)}`);
      assertNoMismatches(await verifyShare({ page, tree, spawnedAt: s.spawnedAt, linkMs: s.linkMs, log }), 'browser whose first worker never started');
      await page.unrouteAll({ behavior: 'ignoreErrors' });
      await s.stop();
    },
  },
  {
    name: "i: the wasm build decodes the protocol's byte-exact test vectors in the browser",
    timeoutMs: 60_000,
    async run(t) {
      const { fixture } = await smallFixture();
      const { chromium, page } = await browser(t, 'vectors');
      const s = await share(t, fixture.dir);
      await openLink(page, s.link, ['connected']);
      const result = await page.evaluate(() => {
        try {
          return { checked: window.linkfsSelfTest!(), error: null };
        } catch (e) {
          return { checked: 0, error: String(e) };
        }
      });
      assert(result.error === null, `the wasm self-test failed in the browser: ${result.error}`);
      assert(result.checked >= 10, `the wasm self-test checked ${result.checked} vectors, expected all of them (at least 10)`);
      log(`    ${result.checked} vectors checked in the browser`);
      assertNoPageErrors(chromium);
      await s.stop();
    },
  },
  {
    name: 'j: live share: a browser and a mount follow every kind of change to the folder',
    timeoutMs: 300_000,
    async run(t) {
      const dir = await mkdtemp(path.join(scratchDir, 'live-'));
      const outside = await mkdtemp(path.join(scratchDir, 'outside-'));
      t.defer(() => rm(dir, { recursive: true, force: true }));
      t.defer(() => rm(outside, { recursive: true, force: true }));
      await mkdir(path.join(dir, 'docs'), { recursive: true });
      await writeFile(path.join(dir, 'docs/log.txt'), 'start');
      await writeFile(path.join(dir, 'docs/replace-me'), 'a file, for now');
      await mkdir(path.join(dir, 'big/sub'), { recursive: true });
      for (let n = 0; n < 2999; n += 1) await writeFile(path.join(dir, `big/sub/${n}`), `${n}`);
      await mkdir(path.join(dir, 'leaving/inner'), { recursive: true });
      await writeFile(path.join(dir, 'leaving/inner/f'), 'bye');
      await symlink('docs/log.txt', path.join(dir, 'link'));

      const { chromium, page } = await browser(t, 'live');
      const s = await share(t, dir);
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 60_000);
      const mnt = path.join(scratchDir, `live-mnt-${process.pid}`);
      const m = await startMount(s.link, mnt);
      t.defer(() => m.kill());
      t.onFailure(() => log(`    mount stderr tail:\n${m.process.stderrTail().replace(/^/gm, '      ')}`));

      let before: Tree | null = null;
      const step = async (what: string, change: () => Promise<void>) => {
        await change();
        const inPage = await convergeIndex(page, dir);
        const onMount = await convergeMount(mnt, dir);
        const problems = [...inPage.mismatches.map((x) => `browser: ${formatMismatch(x)}`), ...onMount.mismatches.map((x) => `mount: ${formatMismatch(x)}`)];
        const changed = changedFiles(before, inPage.tree);
        if (problems.length === 0 && changed.length <= 50) {
          for (const x of await checkBytesInPage(page, changed, inPage.remote)) problems.push(`browser bytes: ${formatMismatch(x)}`);
          for (const x of await checkBytesOnMount(mnt, changed)) problems.push(`mount bytes: ${formatMismatch(x)}`);
        }
        log(`    ${what}: browser ${inPage.seconds.toFixed(2)} s, mount ${onMount.seconds.toFixed(2)} s, ${changed.length} changed files`);
        assert(problems.length === 0, `${what}: the receivers differ from the folder after 10 s:\n  ${problems.slice(0, 20).join('\n  ')}`);
        before = inPage.tree;
      };

      await step('the first state', async () => undefined);
      await step('1,000 files created', async () => {
        for (let n = 0; n < 1000; n += 1) await writeFile(path.join(dir, `docs/new-${n}.txt`), `file ${n}`);
      });
      await step('appended to 50 times in a second', async () => {
        for (let n = 0; n < 50; n += 1) {
          await appendFile(path.join(dir, 'docs/log.txt'), ` ${n}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      });
      await step('truncated', async () => truncate(path.join(dir, 'docs/log.txt'), 5));
      await step('chmod', async () => chmod(path.join(dir, 'docs/new-1.txt'), 0o600));
      await step('deleted', async () => unlink(path.join(dir, 'docs/new-2.txt')));
      const idBefore = (await lookup(page, 'big/sub/42'))?.id;
      await step('a folder of 3,000 entries renamed', async () => rename(path.join(dir, 'big'), path.join(dir, 'renamed')));
      assert((await lookup(page, 'renamed/sub/42'))?.id === idBefore, 'the renamed folder kept its entries (same ids)');
      await step('a folder moved out of the share, another moved in', async () => {
        await rename(path.join(dir, 'leaving'), path.join(outside, 'leaving'));
        await mkdir(path.join(outside, 'arriving/deep'), { recursive: true });
        await writeFile(path.join(outside, 'arriving/deep/g'), 'hello from outside');
        await rename(path.join(outside, 'arriving'), path.join(dir, 'arriving'));
      });
      await step('a file replaced by a folder of the same name', async () => {
        await unlink(path.join(dir, 'docs/replace-me'));
        await mkdir(path.join(dir, 'docs/replace-me'));
        await writeFile(path.join(dir, 'docs/replace-me/now-a-folder'), 'x');
      });
      await step('a symlink retargeted', async () => {
        await unlink(path.join(dir, 'link'));
        await symlink('arriving/deep/g', path.join(dir, 'link'));
      });
      assertNoPageErrors(chromium);
      await m.stop();
      await s.stop();
    },
  },
  {
    name: `k: the data link drops ${fillDrops} times while 100,000 entries fill in; the page reconnects, resumes, ends identical at about the bytes of a fill without drops`,
    timeoutMs: 400_000,
    async run(t) {
      // The entries arrive over time (the folder fills while shared), so the fill
      // outlasts the reconnects: a fill of a finished tree takes under a second here.
      const total = 100_000;
      const folders = 50;
      const fill = async (dir: string, drop: (() => Promise<void>) | null) => {
        const t0 = performance.now();
        const { chromium, page } = await browser(t, drop ? 'drops' : 'no-drops');
        const s = await share(t, dir);
        await openLink(page, s.link, ['connected']);
        let creating = true;
        const creator = (async () => {
          for (let f = 0; f < folders; f += 1) {
            await mkdir(path.join(dir, `part-${f}`));
            const writes: Promise<void>[] = [];
            for (let n = 0; n < total / folders; n += 1) writes.push(writeFile(path.join(dir, `part-${f}`, `file-${n}.txt`), `${f}/${n}`));
            await Promise.all(writes);
            await new Promise((r) => setTimeout(r, 150));
          }
          creating = false;
        })();
        let drops = 0;
        let duringFill = 0;
        while (drop !== null && drops < fillDrops) {
          await page.waitForFunction(() => window.linkfsShare!.status().state === 'connected', undefined, { polling: 5, timeout: 60_000 });
          await new Promise((r) => setTimeout(r, 150));
          const received = await page.evaluate(() => window.linkfsShare!.progress().received);
          if (creating || received < total) duringFill += 1;
          process.kill(s.pid, 'SIGUSR1');
          drops += 1;
          await page.waitForFunction(() => window.linkfsShare!.status().state !== 'connected', undefined, { polling: 5, timeout: 15_000 });
          const now = await page.evaluate(() => window.linkfsShare!.status().state);
          assert(now === 'reconnecting', `after drop ${drops} the page says ${now}, expected 'reconnecting'`);
        }
        await creator;
        const filled = performance.now();
        const converged = await convergeIndex(page, dir, 60_000);
        log(`    ${drop ? 'with drops' : 'without drops'}: filled in ${((filled - t0) / 1000).toFixed(1)} s, the index equal ${converged.seconds.toFixed(1)} s later`);
        assert(converged.mismatches.length === 0, `${drops} drops: the index differs from the folder:\n  ${converged.mismatches.slice(0, 20).map(formatMismatch).join('\n  ')}`);
        assertNoPageErrors(chromium);
        return { wire: (await indexWireBytes(page)) ?? 0, drops, duringFill, entries: converged.tree.entries.length, s };
      };
      const first = await mkdtemp(path.join(scratchDir, 'filling-'));
      const second = await mkdtemp(path.join(scratchDir, 'filling-'));
      t.defer(() => rm(first, { recursive: true, force: true }));
      t.defer(() => rm(second, { recursive: true, force: true }));
      const dropped = await fill(first, async () => undefined);
      await dropped.s.stop();
      const reference = await fill(second, null);
      // And the finished folder as a fresh snapshot, for scale.
      const { page: fresh } = await browser(t, 'fresh');
      await openLink(fresh, reference.s.link, ['connected']);
      await waitForComplete(fresh, reference.s.spawnedAt, 120_000);
      const snapshot = (await indexWireBytes(fresh)) ?? 1;
      const ratio = dropped.wire / Math.max(1, reference.wire);
      log(`    figures ${JSON.stringify({ entries: dropped.entries, drops: dropped.drops, drops_during_fill: dropped.duringFill, wire_bytes_with_drops: dropped.wire, wire_bytes_same_fill_without_drops: reference.wire, ratio: Math.round(ratio * 1000) / 1000, fresh_snapshot_bytes: snapshot })}`);
      assert(dropped.duringFill >= fillDrops, `only ${dropped.duringFill} of the drops came during the fill`);
      assert(ratio < 1.5, `${ratio.toFixed(2)}x the bytes of the same fill without drops`);
      await reference.s.stop();
    },
  },
  {
    name: 'k2: a download in progress continues at its byte across dropped links',
    timeoutMs: 240_000,
    async run(t) {
      const bytes = 64 * 1024 * 1024;
      const fixture = await makeBigFileFixture(bytes);
      t.defer(() => fixture.remove());
      const tree = await walkTree(fixture.dir, { hash: true });
      const expected = tree.entries.find((e) => e.path === 'big.bin')!;
      const s = await share(t, fixture.dir);
      const { chromium, page } = await browser(t, 'download-drops');
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 30_000);
      const row = await lookup(page, 'big.bin');
      assert(row !== null, 'big.bin is listed');
      // Start the read in the page, drop the link three times while it runs.
      await page.evaluate((id: number) => {
        const w = window as unknown as { linkfsTestRead?: Promise<{ sha256: string; bytes: number } | { error: string }>; linkfsTestDone?: number };
        w.linkfsTestDone = 0;
        w.linkfsTestRead = window
          .linkfsShare!.read(id as EntryId, { onProgress: (p) => { w.linkfsTestDone = p.done; } })
          .then(async (blob) => {
            const buf = await blob.arrayBuffer();
            const digest = await crypto.subtle.digest('SHA-256', buf);
            return { bytes: buf.byteLength, sha256: Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('') };
          })
          .catch((e: unknown) => ({ error: String(e) }));
      }, row.id);
      for (let d = 1; d <= 3; d += 1) {
        const at = d * (bytes / 5);
        await page.waitForFunction((n: number) => ((window as unknown as { linkfsTestDone?: number }).linkfsTestDone ?? 0) >= n, at, { polling: 5, timeout: 60_000 });
        process.kill(s.pid, 'SIGUSR1');
        await page.waitForFunction(() => window.linkfsShare!.status().state !== 'connected', undefined, { polling: 5, timeout: 15_000 });
      }
      const result = await page.evaluate(() => (window as unknown as { linkfsTestRead: Promise<unknown> }).linkfsTestRead);
      const r = result as { sha256?: string; bytes?: number; error?: string };
      assert(r.error === undefined, `the download failed across dropped links: ${r.error}`);
      assert(r.bytes === bytes && r.sha256 === expected.sha256, `the download's bytes differ: ${JSON.stringify(r)}`);
      assertNoPageErrors(chromium);
      await s.stop();
    },
  },
  {
    name: "l: the relay restarts under the share: the sharer takes its room back and a new visitor joins",
    timeoutMs: 120_000,
    async run(t) {
      const { fixture, tree } = await smallFixture();
      let relay = await startRelay();
      const port = relay.port;
      t.defer(async () => log(`    relay stopped: ${await relay.stop()}`));
      const { chromium, page } = await browser(t, 'before');
      const s = await share(t, fixture.dir, { args: ['--relay', relay.url] });
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 30_000);
      log(`    relay stopped: ${await relay.stop()}`);
      relay = await startRelay({ port });
      // The page that was connected stays connected: its data link never used the relay.
      assert((await page.evaluate(() => window.linkfsShare!.status().state)) === 'connected', 'the open page lost its connection');
      const { chromium: later, page: second } = await browser(t, 'after');
      const started = performance.now();
      // The sharer reconnects on its backoff schedule; a visitor may arrive first and retry.
      for (;;) {
        await second.goto('about:blank');
        try {
          await openLink(second, s.link, ['connected'], 10_000);
          break;
        } catch (e) {
          assert(performance.now() - started < 60_000, `no visitor could join within 60 s of the relay's restart: ${String(e)}`);
        }
      }
      log(`    a new visitor joined ${((performance.now() - started) / 1000).toFixed(2)} s after the relay restarted`);
      assertNoMismatches(await verifyShare({ page: second, tree, spawnedAt: s.spawnedAt, linkMs: s.linkMs, log }), 'visitor after the relay restart');
      assertNoPageErrors(chromium);
      assertNoPageErrors(later);
      await s.stop();
    },
  },
  {
    name: 'm: linkfs share restarted on the same folder prints the same link; a reopened page resumes for a few bytes and shows what changed while it was stopped',
    timeoutMs: 180_000,
    async run(t) {
      const dir = await mkdtemp(path.join(scratchDir, 'restart-'));
      t.defer(() => rm(dir, { recursive: true, force: true }));
      for (let f = 0; f < 20; f += 1) {
        await mkdir(path.join(dir, `folder-${f}`));
        await Promise.all(Array.from({ length: 250 }, (_, n) => writeFile(path.join(dir, `folder-${f}`, `file-${n}.txt`), `${f}/${n}\n`)));
      }
      const entries = 1 + 20 + 20 * 250;
      const { chromium, page } = await browser(t, 'restart');
      const s1 = await share(t, dir);
      await openLink(page, s1.link, ['connected']);
      await waitForComplete(page, s1.spawnedAt, 60_000);
      const firstBytes = (await indexWireBytes(page)) ?? 0;
      for (const deadline = Date.now() + 10_000; ; await page.waitForTimeout(50)) {
        const p = await page.evaluate(() => window.linkfsShare!.progress());
        if (p.persisted === entries) break;
        if (Date.now() > deadline) fail(`only ${p.persisted} of ${entries} entries reached IndexedDB`);
      }
      await s1.stop();

      // Where the link is kept: readable by its owner only.
      const stateDir = process.env.LINKFS_STATE_DIR;
      assert(stateDir !== undefined, 'tests-e2e/run sets LINKFS_STATE_DIR');
      const kept = (await readdir(path.join(stateDir, 'shares'), { withFileTypes: true })).map((d) => path.join(stateDir, 'shares', d.name, 'share.json'));
      const modes = await Promise.all(kept.map(async (f) => (await stat(f).catch(() => null))?.mode));
      assert(modes.some((m) => m !== undefined && (m & 0o777) === 0o600) && modes.every((m) => m === undefined || (m & 0o077) === 0), `kept links must be mode 0600, found ${modes.map((m) => m?.toString(8)).join(', ')}`);

      // Nothing changed: the same link, and the reopened page gets a few bytes.
      const s2 = await share(t, dir);
      assert(s2.link === s1.link, `restarting printed another link:\n  before ${s1.link}\n  after  ${s2.link}`);
      await page.reload();
      await page.waitForFunction(() => window.linkfsShare !== undefined, null, { timeout: 15_000 });
      const cached = await restoredProgress(page);
      assert(cached.fromCache === entries, `after the restart ${cached.fromCache} entries came from IndexedDB at once, expected ${entries}`);
      await waitForState(page, ['connected'], 20_000);
      await waitForComplete(page, s2.spawnedAt, 30_000);
      const unchanged = await convergeIndex(page, dir, 10_000);
      assert(unchanged.mismatches.length === 0, `after a restart with nothing changed the index differs:\n  ${unchanged.mismatches.slice(0, 20).map(formatMismatch).join('\n  ')}`);
      const againBytes = (await indexWireBytes(page)) ?? 0;
      log(`    figures ${JSON.stringify({ entries, first_visit_index_bytes: firstBytes, after_restart_index_bytes: againBytes, percent: Math.round((10_000 * againBytes) / Math.max(1, firstBytes)) / 100 })}`);
      assert(againBytes < firstBytes / 100, `after a restart with nothing changed the page received ${againBytes} index bytes, not under 1% of the first visit's ${firstBytes}`);
      await s2.stop();

      // Changed while stopped: it shows after the restart, and the new bytes read back.
      const before = await walkTree(dir);
      await writeFile(path.join(dir, 'made-while-stopped.txt'), 'new while the sharer was stopped\n');
      await appendFile(path.join(dir, 'folder-3', 'file-7.txt'), 'appended while stopped\n');
      await unlink(path.join(dir, 'folder-4', 'file-9.txt'));
      await rename(path.join(dir, 'folder-5'), path.join(dir, 'folder-5-renamed'));
      await rm(path.join(dir, 'folder-6'), { recursive: true });
      const s3 = await share(t, dir);
      assert(s3.link === s1.link, `the third start printed another link: ${s3.link}`);
      await page.reload();
      await waitForState(page, ['connected'], 20_000);
      const changed = await convergeIndex(page, dir, 15_000);
      assert(changed.mismatches.length === 0, `what changed while the sharer was stopped did not arrive:\n  ${changed.mismatches.slice(0, 20).map(formatMismatch).join('\n  ')}`);
      const now = await walkTree(dir);
      const bad = await checkBytesInPage(page, changedFiles(before, now), changed.remote);
      assert(bad.length === 0, `changed files read back wrong:\n  ${bad.map(formatMismatch).join('\n  ')}`);
      log(`    changes made while stopped arrived in ${changed.seconds.toFixed(2)} s, ${(await indexWireBytes(page)) ?? 0} index bytes`);
      assertNoPageErrors(chromium);
      await s3.stop();
    },
  },
  {
    name: 'n: a share that reuses a room id with another secret never sees the cached index of the first',
    timeoutMs: 120_000,
    async run(t) {
      const dir = await mkdtemp(path.join(scratchDir, 'reused-room-'));
      t.defer(() => rm(dir, { recursive: true, force: true }));
      for (let n = 0; n < 50; n += 1) await writeFile(path.join(dir, `first-${n}.txt`), `${n}\n`);
      const { chromium, page } = await browser(t, 'reused-room');
      const s1 = await share(t, dir);
      await openLink(page, s1.link, ['connected']);
      await waitForComplete(page, s1.spawnedAt, 30_000);
      for (const deadline = Date.now() + 10_000; ; await page.waitForTimeout(50)) {
        if ((await page.evaluate(() => window.linkfsShare!.progress())).persisted === 51) break;
        if (Date.now() > deadline) fail('the first share never reached IndexedDB');
      }
      await s1.stop();
      // Another share under the same room id: the kept key's secret replaced.
      const stateDir = process.env.LINKFS_STATE_DIR!;
      let keptFile = '';
      for (const d of await readdir(path.join(stateDir, 'shares'))) {
        const f = path.join(stateDir, 'shares', d, 'share.json');
        const kept = JSON.parse(await readFile(f, 'utf8').catch(() => '{}')) as { folder?: string };
        if (kept.folder === dir) keptFile = f;
      }
      assert(keptFile !== '', `no kept link for ${dir} under ${stateDir}`);
      const kept = JSON.parse(await readFile(keptFile, 'utf8')) as { key: string };
      const [room, secret] = kept.key.split('.') as [string, string];
      const other = (secret[0] === 'A' ? 'B' : 'A') + secret.slice(1);
      await writeFile(keptFile, JSON.stringify({ ...kept, key: `${room}.${other}` }));
      for (let n = 0; n < 50; n += 1) await unlink(path.join(dir, `first-${n}.txt`));
      for (let n = 0; n < 7; n += 1) await writeFile(path.join(dir, `second-${n}.txt`), `${n}\n`);
      const s2 = await share(t, dir);
      assert(s2.link.includes(`#${room}.`) && !s2.link.endsWith(secret), `expected the same room with another secret: ${s2.link}`);
      await page.goto('about:blank');
      await openLink(page, s2.link, ['connected']);
      const p = await page.evaluate(() => window.linkfsShare!.progress());
      assert(p.fromCache === 0, `the second share showed ${p.fromCache} entries cached from the first`);
      const c = await convergeIndex(page, dir, 20_000);
      assert(c.mismatches.length === 0, `the second share's index differs from its folder:\n  ${c.mismatches.slice(0, 10).map(formatMismatch).join('\n  ')}`);
      assertNoPageErrors(chromium);
      await s2.stop();
    },
  },
  {
    name: "o: a withdrawn link's page is cut off within a second and says so; another link's page reads on",
    timeoutMs: 90_000,
    async run(t) {
      const { fixture, tree } = await smallFixture();
      const ann = await browser(t, 'withdrawn');
      const bob = await browser(t, 'other');
      const s = await share(t, fixture.dir);
      const linkfs = (args: string[]) => {
        const r = spawnSync(binary('linkfs'), [...args, '--dir', fixture.dir], { encoding: 'utf8' });
        assert(r.status === 0, `linkfs ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
        return r.stdout.trim();
      };
      const annLink = linkfs(['link', 'add', '--label', 'for Ann']);
      const bobLink = linkfs(['link', 'add', '--label', 'for Bob', '--expires', '7d']);
      assert(annLink !== bobLink && annLink !== s.link, 'each link has its own secret');
      for (const [who, link] of [[ann, annLink], [bob, bobLink]] as const) {
        await openLink(who.page, link, ['connected']);
        await waitForComplete(who.page, s.spawnedAt, 30_000);
      }
      const visitors = linkfs(['visitors', '--json']).split('\n');
      assert(visitors.length === 2, `two visitors listed: ${visitors.join(' | ')}`);
      // Ann's page keeps the folder it shows (to draw it at once next time)…
      await ann.page.waitForFunction(() => Object.keys(localStorage).some((k) => k.startsWith('linkfs-kept:')), undefined, { timeout: 10_000 });
      linkfs(['link', 'revoke', '1']);
      const revokedAt = performance.now();
      await waitForState(ann.page, ['link-ended'], 5_000);
      const ms = performance.now() - revokedAt;
      log(`    the withdrawn link's page said so ${ms.toFixed(0)} ms after the revoke`);
      assert(ms < 1_000, `the page showed 'link-ended' ${ms.toFixed(0)} ms after the revoke (budget 1 s)`);
      const words = await statusText(ann.page);
      assert(/withdrawn by the sharer/i.test(words), `the status says why: ${JSON.stringify(words)}`);
      // Reloaded, the withdrawn link is refused with the same words.
      await ann.page.goto('about:blank');
      await openLink(ann.page, annLink, ['link-ended']);
      // …and once the link ended, nothing of it is kept to be drawn on the next visit.
      const kept = await ann.page.evaluate(() => ({
        keys: Object.keys(localStorage).filter((k) => k.startsWith('linkfs-kept:')).length,
        drawn: performance.getEntriesByName('linkfs:kept-folder').length,
      }));
      assert(kept.keys === 0 && kept.drawn === 0, `the withdrawn link's folders are still kept in the browser: ${JSON.stringify(kept)}`);
      // Bob's page still reads, byte for byte.
      const file = tree.entries.find((e) => e.kind === 'file' && e.size > 0 && e.sha256 !== undefined)!;
      const row = await lookup(bob.page, file.path);
      assert(row !== null, `${file.path} is listed on the other link's page`);
      const { results } = await readInPage(bob.page, [row.id], 1, 10_000);
      assert(results[0]!.error === null && results[0]!.sha256 === file.sha256, `reading ${file.path} on the other link's page: ${JSON.stringify(results[0])}`);
      assertNoPageErrors(bob.chromium);
      await s.stop();
    },
  },
  {
    name: 'p: a password link asks first, shows nothing of the share before it, refuses a wrong one and opens with the right one',
    timeoutMs: 120_000,
    async run(t) {
      const { fixture, tree } = await smallFixture();
      const { chromium, page } = await browser(t, 'password');
      const s = await share(t, fixture.dir);
      const pwFile = path.join(scratchDir, `pw-${process.pid}`);
      await writeFile(pwFile, 'open sesame\n');
      t.defer(() => rm(pwFile, { force: true }));
      const r = spawnSync(binary('linkfs'), ['link', 'add', '--label', 'locked', '--password-file', pwFile, '--dir', fixture.dir], { encoding: 'utf8' });
      assert(r.status === 0, `link add: ${r.stderr}`);
      const locked = r.stdout.trim();
      const names = tree.entries.filter((e) => !e.path.includes('/')).map((e) => e.path);
      const showsNothing = async (when: string) => {
        const text = await page.evaluate(() => document.body.innerText);
        const shown = names.filter((n) => n.length > 3 && text.includes(n));
        assert(shown.length === 0, `${when}: the page shows ${JSON.stringify(shown)} before the password`);
        const p = await page.evaluate(() => window.linkfsShare?.progress() ?? null);
        assert(p === null || p.received === 0, `${when}: ${p?.received} entries arrived before the password`);
      };
      await openLink(page, locked, ['password']);
      await showsNothing('asked');
      const form = page.getByTestId('password-form');
      assert(await form.isVisible(), 'the password form is shown');
      // A wrong one: refused in words, still nothing shown.
      await page.getByTestId('password-input').fill('open sesame!');
      await page.getByTestId('password-submit').click();
      await waitForState(page, ['password-wrong'], 10_000);
      assert((await statusText(page)).includes('password is wrong'), `status: ${await statusText(page)}`);
      await showsNothing('after a wrong password');
      // The right one: the page opens the link again with it.
      await page.getByTestId('password-input').fill('open sesame');
      await page.getByTestId('password-submit').click();
      await waitForState(page, ['connected'], 20_000);
      await waitForComplete(page, s.spawnedAt, 30_000);
      const file = tree.entries.find((e) => e.kind === 'file' && e.size > 0 && e.sha256 !== undefined)!;
      const row = await lookup(page, file.path);
      assert(row !== null, `${file.path} is listed once the password is right`);
      const { results } = await readInPage(page, [row.id], 1, 10_000);
      assert(results[0]!.sha256 === file.sha256, `reading ${file.path}: ${JSON.stringify(results[0])}`);
      // Reopened, it asks before anything, even what this browser keeps of it.
      await page.goto('about:blank');
      await page.goto(locked, { waitUntil: 'domcontentloaded' });
      await page.getByTestId('password-form').waitFor({ state: 'visible', timeout: 10_000 });
      await page.waitForTimeout(500);
      await showsNothing('reopened');
      await page.getByTestId('password-input').fill('open sesame');
      await page.getByTestId('password-submit').click();
      await waitForState(page, ['connected'], 20_000);
      // A password link keeps none of its folders to draw before the password
      // (past the 2 s in which other links' are written).
      await page.waitForTimeout(2_500);
      const kept = await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('linkfs-kept:') || k.startsWith('linkfs-kept-pictures:')));
      assert(kept.length === 0, `the password link's folders were kept in the browser: ${kept.join(', ')}`);
      assertNoPageErrors(chromium);
      await s.stop();
    },
  },
  {
    name: 'p2: the right password given at the first prompt opens the share (regression: the page stayed on its password form while the sharer served it)',
    timeoutMs: 90_000,
    async run(t) {
      const { fixture, tree } = await smallFixture();
      const { chromium, page } = await browser(t, 'password-first');
      const s = await share(t, fixture.dir);
      const pwFile = path.join(scratchDir, `pw2-${process.pid}`);
      await writeFile(pwFile, 'open sesame\n');
      t.defer(() => rm(pwFile, { force: true }));
      const r = spawnSync(binary('linkfs'), ['link', 'add', '--label', 'locked', '--password-file', pwFile, '--dir', fixture.dir], { encoding: 'utf8' });
      assert(r.status === 0, `link add: ${r.stderr}`);
      await openLink(page, r.stdout.trim(), ['password']);
      await page.getByTestId('password-input').fill('open sesame');
      await page.getByTestId('password-submit').click();
      await waitForState(page, ['connected'], 20_000);
      assert(await page.getByTestId('password-form').isHidden(), 'the password form is still shown once the share opened');
      await waitForComplete(page, s.spawnedAt, 30_000);
      const file = tree.entries.find((e) => e.kind === 'file' && e.size > 0 && e.sha256 !== undefined)!;
      const row = await lookup(page, file.path);
      assert(row !== null, `${file.path} is not listed`);
      const { results } = await readInPage(page, [row.id], 1, 10_000);
      assert(results[0]!.sha256 === file.sha256, `reading ${file.path}: ${JSON.stringify(results[0])}`);
      assertNoPageErrors(chromium);
      await s.stop();
    },
  },
  {
    name: 'q: a scoped link shows its folder as the root: the page holds exactly that tree, and nothing above or beside it (live, and in what it keeps)',
    timeoutMs: 120_000,
    async run(t) {
      const { fixture, tree } = await smallFixture();
      // A top folder with files below it and no symlinks: its tree is what the page must hold.
      const tops = tree.entries.filter((e) => e.kind === 'dir' && !e.path.includes('/'));
      const below = (d: { path: string }) => tree.entries.filter((e) => e.path.startsWith(`${d.path}/`));
      const scope = tops
        .filter((d) => below(d).some((e) => e.kind === 'file') && !below(d).some((e) => e.kind === 'symlink'))
        .sort((x, y) => below(y).length - below(x).length)[0];
      assert(scope !== undefined, 'the fixture has a top folder with files and no symlinks');
      const outside = tree.entries
        .filter((e) => !e.path.startsWith(`${scope.path}/`) && e.path !== scope.path)
        .map((e) => e.path.split('/').pop()!)
        .filter((n) => n.length >= 4 && !tree.entries.some((i) => i.path.startsWith(`${scope.path}/`) && i.path.split('/').pop() === n));
      // A relay of its own, so the page still loads once the sharer stops (to see what it kept).
      const relay = await startRelay();
      t.defer(async () => log(`    relay stopped: ${await relay.stop()}`));
      const { chromium, page } = await browser(t, 'scoped');
      const s = await share(t, fixture.dir, { args: ['--relay', relay.url] });
      const r = spawnSync(binary('linkfs'), ['link', 'add', '--scope', scope.path, '--label', 'part', '--dir', fixture.dir], { encoding: 'utf8' });
      assert(r.status === 0, `link add --scope: ${r.stderr}`);
      const scoped = r.stdout.trim();
      await openLink(page, scoped, ['connected']);
      await waitForComplete(page, s.spawnedAt, 30_000);
      const c = await convergeIndex(page, path.join(fixture.dir, scope.path), 10_000);
      assert(c.mismatches.length === 0, `the page's index is not the scope's tree:\n  ${c.mismatches.slice(0, 10).map(formatMismatch).join('\n  ')}`);
      const names = new Set(c.remote.map((e) => e.path.split('/').pop()));
      const leaked = outside.filter((n) => names.has(n));
      assert(leaked.length === 0, `names from outside the scope reached the page: ${JSON.stringify(leaked.slice(0, 10))}`);
      const p = await page.evaluate(() => window.linkfsShare!.progress());
      // The count includes the root (the scope folder itself).
      assert(p.announced === c.remote.length + 1, `the page was told of ${p.announced} entries, the scope has ${c.remote.length} and its root (a count from outside it?)`);
      // Live: a file made inside arrives; one made beside it does not.
      await writeFile(path.join(fixture.dir, scope.path, 'made-inside.txt'), 'in\n');
      await writeFile(path.join(fixture.dir, 'made-beside.txt'), 'out\n');
      const after = await convergeIndex(page, path.join(fixture.dir, scope.path), 10_000);
      assert(after.mismatches.length === 0, `after a change: ${after.mismatches.slice(0, 5).map(formatMismatch).join('; ')}`);
      assert(!after.remote.some((e) => e.path.endsWith('made-beside.txt')), 'a file made beside the scope reached the page');
      // What the browser keeps: reopened offline (the sharer stopped), the cached index is the scope's.
      await s.stop();
      await page.goto('about:blank');
      await page.goto(scoped, { waitUntil: 'domcontentloaded' });
      await waitForState(page, ['sharer-gone', 'connecting', 'reconnecting'], 20_000);
      await page.waitForFunction(() => (window.linkfsShare?.progress().fromCache ?? 0) > 0, undefined, { timeout: 20_000 });
      const kept = await enumerateIndex(page);
      const keptNames = new Set(kept.entries.map((e) => e.path.split('/').pop()));
      const keptLeaks = outside.filter((n) => keptNames.has(n));
      assert(keptLeaks.length === 0, `the browser kept names from outside the scope: ${JSON.stringify(keptLeaks.slice(0, 10))}`);
      assert(kept.entries.length === after.remote.length, `kept ${kept.entries.length} entries, the scope has ${after.remote.length}`);
      log(`    scope ${scope.path}: ${after.remote.length} entries; ${outside.length} names outside it, none reached the page or its cache`);
      assertNoPageErrors(chromium);
      await rm(path.join(fixture.dir, scope.path, 'made-inside.txt'), { force: true });
      await rm(path.join(fixture.dir, 'made-beside.txt'), { force: true });
    },
  },
  {
    name: 'r: on a phone-sized screen (390x844) the listing starts in the first third, nothing scrolls sideways, rows are tall enough to tap, the folder actions are in a menu',
    timeoutMs: 60_000,
    async run(t) {
      const { fixture } = await smallFixture();
      const { chromium, page } = await browser(t, 'phone');
      await page.setViewportSize({ width: 390, height: 844 });
      const s = await share(t, fixture.dir);
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 30_000);
      await page.waitForSelector('.listing-row[data-id]', { timeout: 10_000 });
      const m = await page.evaluate(() => {
        const row = document.querySelector<HTMLElement>('.listing-row[data-id]');
        const r = row?.getBoundingClientRect();
        return { top: r?.top ?? -1, height: r?.height ?? 0, scrollWidth: document.documentElement.scrollWidth, width: window.innerWidth, height_: window.innerHeight };
      });
      assert(m.top > 0 && m.top <= m.height_ / 3, `the first entry starts at ${m.top} px of ${m.height_}: not within the first third`);
      assert(m.scrollWidth <= m.width, `the page scrolls sideways (${m.scrollWidth} px wide in ${m.width})`);
      assert(m.height >= 44, `rows are ${m.height} px tall: too small to tap`);
      // The folder's actions: behind one button, and it works.
      assert(!(await page.isVisible('[data-testid=folder-download]')), 'the folder actions take room in the toolbar');
      await page.click('[data-testid=folder-actions-toggle]');
      assert(await page.isVisible('[data-testid=folder-download]'), 'the actions menu did not open');
      assert((await page.getAttribute('[data-testid=folder-actions-toggle]', 'aria-expanded')) === 'true', 'the menu button does not say it is open');
      await page.keyboard.press('Escape');
      assert(!(await page.isVisible('[data-testid=folder-download]')), 'Escape did not close the actions menu');
      log(`    first entry at ${m.top.toFixed(0)} px of ${m.height_}, rows ${m.height.toFixed(0)} px`);
      assertNoPageErrors(chromium);
    },
  },
];

await runSuite('e2e', tests, {
  afterAll: async () => {
    await full?.fixture.remove();
    await small?.fixture.remove();
  },
});

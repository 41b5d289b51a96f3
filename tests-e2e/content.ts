// The browser's real content, end to end (real share, relay, web app, service
// worker, the browser's own download manager): huge files saved to disk with
// bounded memory and across dropped links, folders as ZIPs, audio/video played with
// seeking. Run with `bash tests-e2e/run content` (LINKFS_E2E_ONLY picks tests, as in
// e2e.ts). LINKFS_CONTENT_BIG_GIB sets the size of the huge file (default 4.5).

import { createHash, randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, open, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { launchChromium, openLink, screenshot, statusText, type ChromiumInstance } from './lib/chromium.ts';
import { makeVideo, mp4Boxes } from './lib/media.ts';
import { downloadThroughPage, openFolder } from './lib/page-download.ts';
import { scratchDir } from './lib/paths.ts';
import { assert, runSuite, type TestCase, type TestContext } from './lib/runner.ts';
import { startShare, type ShareProcess } from './lib/share-process.ts';
import { waitForComplete } from './lib/verify.ts';

const log = (line: string) => console.log(line);
const GIB = 1024 ** 3;
const MIB = 1024 ** 2;

async function share(t: TestContext, dir: string): Promise<ShareProcess> {
  const s = await startShare(dir);
  t.defer(() => s.kill());
  t.onFailure(() => log(`    sharer stderr tail:\n${s.process.stderrTail().replace(/^/gm, '      ')}`));
  return s;
}

async function browser(t: TestContext, name: string): Promise<{ chromium: ChromiumInstance; page: Page }> {
  const chromium = await launchChromium({ name, log });
  t.defer(() => chromium.close());
  const page = await chromium.page();
  t.onFailure(async () => {
    const file = await screenshot(page, `${t.name}-${name}`);
    if (file !== null) log(`    screenshot of ${name}: ${file}`);
    log(`    ${name} status ${JSON.stringify(await statusText(page).catch(() => ''))}`);
  });
  return { chromium, page };
}

async function scratch(t: TestContext, prefix: string): Promise<string> {
  await mkdir(scratchDir, { recursive: true });
  const dir = await mkdtemp(path.join(scratchDir, prefix));
  t.defer(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A sparse file of `size` bytes with 8 MiB of random bytes at its start, middle and end. */
async function sparseWithRandomRegions(file: string, size: number): Promise<void> {
  const fh = await open(file, 'w');
  try {
    await fh.truncate(size);
    for (const at of [0, Math.floor(size / 2 / MIB) * MIB, size - 8 * MIB]) await fh.write(randomBytes(8 * MIB), 0, 8 * MIB, at);
  } finally {
    await fh.close();
  }
}

async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file, { highWaterMark: 8 << 20 })) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Clicks a file's row (opens the preview) in its folder. */
async function openRow(page: Page, relPath: string): Promise<void> {
  const entry = await page.evaluate((p) => window.linkfsShare!.lookup(p), relPath);
  assert(entry !== null, `${relPath} is not in the index`);
  await openFolder(page, relPath.includes('/') ? relPath.slice(0, relPath.lastIndexOf('/')) : '');
  const row = page.locator(`[data-testid=row][data-id="${entry.id}"]`);
  await row.waitFor({ timeout: 10_000 });
  await row.click();
}

interface PlayReport {
  duration: number;
  seekMs: number;
  servedBytes: number;
  error: string | null;
}

/** Plays the open preview's player, seeks to 90 %, plays on; reports the seek and the bytes read. */
async function playAndSeek(page: Page): Promise<PlayReport> {
  await page.waitForSelector('[data-testid=player]', { timeout: 20_000 });
  return page.evaluate(async () => {
    const player = document.querySelector<HTMLMediaElement>('[data-testid=player]')!;
    const preview = document.querySelector<HTMLElement>('[data-testid=preview]')!;
    const fail = (what: string) => ({ duration: player.duration, seekMs: -1, servedBytes: Number(preview.dataset.servedBytes ?? 0), error: `${what} (media error ${player.error?.code ?? 'none'}: ${player.error?.message ?? ''})` });
    const until = (test: () => boolean, ms: number) =>
      new Promise<boolean>((resolve) => {
        const t0 = performance.now();
        const tick = () => {
          if (test()) resolve(true);
          else if (performance.now() - t0 > ms || player.error) resolve(false);
          else setTimeout(tick, 10);
        };
        tick();
      });
    player.muted = true;
    if (!(await until(() => player.readyState >= 1, 20_000))) return fail('no metadata within 20 s');
    await player.play();
    if (!(await until(() => player.currentTime > 1, 20_000))) return fail('did not play 1 s from the start');
    const target = player.duration * 0.9;
    const t0 = performance.now();
    player.currentTime = target;
    if (!(await until(() => !player.seeking && player.currentTime > target + 0.05 && !player.paused, 20_000))) return fail('did not play again after seeking to 90 %');
    const seekMs = performance.now() - t0;
    if (!(await until(() => player.currentTime > target + 1, 20_000))) return fail('did not play 1 s after the seek');
    player.pause();
    // The worker reports what it read at most every 100 ms: wait for its last word.
    await new Promise((r) => setTimeout(r, 400));
    return { duration: player.duration, seekMs, servedBytes: Number(preview.dataset.servedBytes ?? 0), error: null };
  });
}

const bigGib = Number(process.env.LINKFS_CONTENT_BIG_GIB ?? '4.5');

/** Names a ZIP (and the file systems it is unpacked on) finds awkward; `{i}` makes each unique. */
const AWKWARD = [
  'Café {i}.txt', // NFC
  'Cafe\u0301 {i}.txt', // NFD
  '日本語 ファイル {i}.txt',
  '😀 emoji {i}.txt',
  ' leading space {i}.txt',
  'trailing space {i}.txt ',
  'quote " and \'single\' {i}.txt',
  '#hash %25 percent? {i}.txt',
  'star* colon: pipe| lt< gt> {i}.txt',
  'new\nline {i}.txt',
  'tab\tname {i}.txt',
  '-dash first {i}',
  '.hidden {i}',
  'back\\slash {i}.txt',
  'CASE {i}.TXT',
  'case {i}.txt',
  `${'long-name-'.repeat(23)}{i}.txt`,
  'plain {i}.bin',
];

/** `count` files with awkward names (some empty, most a few hundred bytes) in 100 folders, plus empty folders. */
async function awkwardTree(dir: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const folder = path.join(dir, `folder ${String(i % 100).padStart(2, '0')}${i % 100 === 7 ? ' ünï' : ''}`);
    if (i < 100) await mkdir(folder, { recursive: true });
    const name = AWKWARD[i % AWKWARD.length]!.replace('{i}', String(i));
    await writeFile(path.join(folder, name), i % 13 === 0 ? Buffer.alloc(0) : randomBytes(64 + (i % 700)));
  }
  await mkdir(path.join(dir, 'empty folder', 'empty inside'), { recursive: true });
}

const tests: TestCase[] = [
  {
    name: 'p: a video with its index at the end plays, seeks to 90 % and plays on, reading under 20 % of the file; a WebM too',
    timeoutMs: 240_000,
    async run(t) {
      const dir = await scratch(t, 'media-');
      // Ten minutes: the browser buffers ahead of where it plays (10 s or more, depending on its load).
      const mp4 = path.join(dir, 'clip end-index.mp4');
      makeVideo(mp4, 600, 2000);
      const boxes = await mp4Boxes(mp4);
      const moov = boxes.findIndex((b) => b.type === 'moov');
      const mdat = boxes.findIndex((b) => b.type === 'mdat');
      assert(moov > mdat && mdat >= 0, `the MP4 fixture should have its moov after mdat: ${boxes.map((b) => b.type).join(' ')}`);
      makeVideo(path.join(dir, 'clip.webm'), 600, 2000);
      const s = await share(t, dir);
      const { chromium, page } = await browser(t, 'media');
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 30_000);
      for (const name of ['clip end-index.mp4', 'clip.webm']) {
        const size = (await stat(path.join(dir, name))).size;
        await openRow(page, name);
        const r = await playAndSeek(page);
        log(`    ${name}: ${(size / MIB).toFixed(1)} MiB, ${r.duration.toFixed(1)} s; seek -> playing ${r.seekMs.toFixed(0)} ms; read ${(r.servedBytes / MIB).toFixed(1)} MiB = ${((100 * r.servedBytes) / size).toFixed(1)} %`);
        assert(r.error === null, `${name}: ${r.error}`);
        assert(r.servedBytes > 0, `${name}: the page says it read nothing, yet it played`);
        assert(r.servedBytes < 0.2 * size, `${name}: playing 1 s, seeking to 90 % and playing 1 s read ${r.servedBytes} bytes, ${((100 * r.servedBytes) / size).toFixed(1)} % of the file (at most 20 % expected)`);
        await page.keyboard.press('Escape');
      }
      assert(chromium.pageErrors.length === 0, `uncaught errors in the page: ${chromium.pageErrors.join('; ')}`);
      await s.stop();
    },
  },
  {
    name: `r: a folder of 20,000 awkwardly named files and a ${bigGib} GiB file downloads as one ZIP (Zip64): Python's zipfile reads every member equal to its source`,
    timeoutMs: 30 * 60_000,
    async run(t) {
      const dir = await scratch(t, 'zip-');
      const folder = path.join(dir, 'awkward');
      await awkwardTree(folder, 20_000);
      await sparseWithRandomRegions(path.join(folder, 'huge.img'), Math.floor(bigGib * GIB));
      const s = await share(t, dir);
      const { chromium, page } = await browser(t, 'zip');
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 60_000);
      const out = path.join(await scratch(t, 'zip-out-'), 'awkward.zip');
      const r = await downloadThroughPage(page, { target: 'awkward', out, log: (l) => log(`    ${l}`), browserPid: chromium.browserPid });
      log(`    ${JSON.stringify(r)}`);
      assert(r.zip_files === 20_001, `the page planned ${r.zip_files} files, 20,001 expected`);
      const check = spawnSync('python3', [path.join(import.meta.dirname, 'lib', 'check_zip.py'), out, folder, 'awkward'], { encoding: 'utf8' });
      log(`    check_zip: ${check.stdout.trim()}${check.stderr ? `\n${check.stderr}` : ''}`);
      assert(check.status === 0, `Python's zipfile found problems in the ZIP: ${check.stdout}${check.stderr}`);
      const report = JSON.parse(check.stdout) as { renamed: number; files: number };
      assert(report.files === 20_001, `the ZIP holds ${report.files} files, 20,001 expected`);
      // Every renamed member was reported by the page (backslashes, case collisions).
      assert(r.zip_notes !== null && r.zip_notes >= report.renamed && report.renamed > 0, `renamed ${report.renamed} members, the page reported ${r.zip_notes} changes`);
      assert(r.browser_growth_bytes < 64 * MIB, `the browser's memory grew by ${(r.browser_growth_bytes / MIB).toFixed(1)} MiB during the ZIP download`);
      assert(chromium.pageErrors.length === 0, `uncaught errors in the page: ${chromium.pageErrors.join('; ')}`);
      await s.stop();
    },
  },
  {
    name: `q: a ${bigGib} GiB file (random regions at start, middle, end) saved through the service worker: right SHA-256, browser memory grows < 64 MiB, resumes across 2 dropped links`,
    timeoutMs: 30 * 60_000,
    async run(t) {
      const dir = await scratch(t, 'huge-');
      const file = path.join(dir, 'disk image.img');
      await sparseWithRandomRegions(file, Math.floor(bigGib * GIB));
      const expected = await sha256File(file);
      const s = await share(t, dir);
      const { chromium, page } = await browser(t, 'huge');
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 30_000);
      const out = path.join(await scratch(t, 'huge-out-'), 'saved.img');
      let dropped = 0;
      const r = await downloadThroughPage(page, {
        target: 'disk image.img',
        out,
        log: (l) => log(`    ${l}`),
        browserPid: chromium.browserPid,
        onTick: (sent, total) => {
          if (dropped < 2 && total > 1 && sent >= ((dropped + 1) / 3) * total) {
            dropped += 1;
            log(`    dropping the data link at ${(sent / GIB).toFixed(2)} GiB`);
            process.kill(s.pid, 'SIGUSR1');
          }
        },
      });
      log(`    ${JSON.stringify(r)}`);
      assert(dropped === 2, `the link was dropped ${dropped} times, 2 expected`);
      assert(r.sha256 === expected, `the saved file's SHA-256 ${r.sha256} differs from the source's ${expected}`);
      assert(r.route === 'service-worker', `saved through ${r.route}, not the service worker`);
      assert(r.browser_growth_bytes < 64 * MIB, `the browser's memory grew by ${(r.browser_growth_bytes / MIB).toFixed(1)} MiB during the download (at most 64 MiB)`);
      assert(chromium.pageErrors.length === 0, `uncaught errors in the page: ${chromium.pageErrors.join('; ')}`);
      await s.stop();
    },
  },
];

await runSuite('content', tests);

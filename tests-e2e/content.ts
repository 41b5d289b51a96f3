// The browser's real content, end to end (real share, relay, web app, service
// worker, the browser's own download manager): huge files saved to disk with
// bounded memory and across dropped links, folders and selections as ZIPs,
// audio/video played with seeking, the whole-share search, in Chromium and in
// Firefox ESR. Run with `bash tests-e2e/run content` (LINKFS_E2E_ONLY picks tests,
// as in e2e.ts). Sizes: LINKFS_CONTENT_HUGE_GIB (the file saved alone, default
// 0.3), LINKFS_CONTENT_BIG_GIB (the file in the ZIP, default 0.25),
// LINKFS_CONTENT_FIREFOX_GIB (Firefox's, default 0.45), LINKFS_CONTENT_FIREFOX_ZIP_GIB
// (the file in Firefox's ZIP, default 0.1).

import { createHash, randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { launchChromium, openLink, screenshot, statusText, type ChromiumInstance } from './lib/chromium.ts';
import * as firefox from './lib/firefox.ts';
import { cachedVideo, mp4Boxes } from './lib/media.ts';
import { downloadThroughPage, openFolder } from './lib/page-download.ts';
import { firefoxBrowser, firefoxDownload, openRow, playAndSeek, puppeteerClick, realErrors } from './lib/page-actions.ts';
import { generatedTree } from './lib/gen-tree.ts';
import { sparseWithRandomRegions } from './lib/fixture.ts';
import { scratchDir } from './lib/paths.ts';
import { assert, runSuite, type TestCase, type TestContext } from './lib/runner.ts';
import { startShare, type ShareProcess } from './lib/share-process.ts';
import { waitForComplete } from './lib/verify.ts';
import { longTasks as traceLongTasks, startTrace } from './lib/trace.ts';

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

async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file, { highWaterMark: 8 << 20 })) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

const VIDEO_SECONDS = 1200;
const VIDEO_KBPS = 1000;

/**
 * The huge file saved alone (GiB). 0.3 by default to keep the suite within CI's time:
 * what q adds is the single file's resume across dropped links, its bytes and its
 * memory (bounded at 64 MiB, a fifth of the file; it grew 5 MB saving 0.5 GiB), which
 * 0.3 GiB shows as well as 4.1 (1 until 2026-11-28, then 0.5: 18 s more of CI).
 * LINKFS_CONTENT_HUGE_GIB=4.1 runs it past 4 GiB (a stream past every 32-bit size
 * through the service worker). The LAN suite saves 0.75 GiB in both browsers.
 */
const hugeGib = Number(process.env.LINKFS_CONTENT_HUGE_GIB ?? '0.3');
/**
 * The big file inside r's ZIP (GiB). 0.25 by default (0.5 until 2026-11-28): the ZIP writer past 4 GiB and
 * 65,535 entries (Zip64) is checked in Node by tests-e2e/zip-check.ts, the page's own
 * code on a 4.1 GiB file in a minute; moving 4.1 GiB through the browser here took
 * five. What r adds is the browser's part: the ZIP streamed through the service worker
 * to the download manager, the awkward names, the memory. LINKFS_CONTENT_BIG_GIB=4.1
 * runs it past 4 GiB in the browser too.
 */
const bigGib = Number(process.env.LINKFS_CONTENT_BIG_GIB ?? '0.25');
/**
 * Firefox's huge file and ZIP (GiB). Smaller by default to keep the suite within CI's
 * time: the bytes and the ZIP come from the same code in both browsers; what Firefox
 * adds is a service-worker stream that must outlive its 30 s idle timeout, which a
 * transfer of 40 s or more covers (0.45 GiB at the 11 MB/s measured here; 0.6 until
 * 2026-11-28).
 */
const firefoxGib = Number(process.env.LINKFS_CONTENT_FIREFOX_GIB ?? '0.45');
/**
 * The big file in Firefox's ZIP (GiB): what r-ff adds is Firefox's ZIP of awkward names
 * beside a member of many chunks; q-ff already keeps a service-worker stream past its
 * idle timeout. 0.1 since 2026-11-29 (0.3 before: 46 s of CI's time for the same checks).
 */
const firefoxZipGib = Number(process.env.LINKFS_CONTENT_FIREFOX_ZIP_GIB ?? '0.1');

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
      // Twenty minutes: browsers buffer well ahead of where they play (Firefox about a
      // minute), and the test plays at two places.
      const mp4 = path.join(dir, 'clip end-index.mp4');
      await cachedVideo(mp4, VIDEO_SECONDS, VIDEO_KBPS);
      const boxes = await mp4Boxes(mp4);
      const moov = boxes.findIndex((b) => b.type === 'moov');
      const mdat = boxes.findIndex((b) => b.type === 'mdat');
      assert(moov > mdat && mdat >= 0, `the MP4 fixture should have its moov after mdat: ${boxes.map((b) => b.type).join(' ')}`);
      await cachedVideo(path.join(dir, 'clip.webm'), VIDEO_SECONDS, VIDEO_KBPS);
      const s = await share(t, dir);
      const { chromium, page } = await browser(t, 'media');
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 30_000);
      for (const name of ['clip end-index.mp4', 'clip.webm']) {
        const size = (await stat(path.join(dir, name))).size;
        await openRow(page, name, (sel) => page.locator(sel).click());
        await page.waitForSelector('[data-testid=player]', { timeout: 20_000 });
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
    name: `r: a folder of 20,000 awkwardly named files and a ${bigGib} GiB file downloads as one ZIP${bigGib > 4 ? ' (Zip64)' : ''}: Python's zipfile reads every member equal to its source`,
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
      assert(r.route === 'service-worker', `the ZIP was saved through ${r.route}, not the service worker`);
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
    name: `q: a ${hugeGib} GiB file (random regions at start, middle, end) saved through the service worker: right SHA-256, browser memory grows < 64 MiB, resumes across 2 dropped links`,
    timeoutMs: 30 * 60_000,
    async run(t) {
      const dir = await scratch(t, 'huge-');
      const file = path.join(dir, 'disk image.img');
      await sparseWithRandomRegions(file, Math.floor(hugeGib * GIB));
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
  {
    name: 's: a selection made with Ctrl-click, Shift-click and a checkbox downloads as one ZIP of exactly those entries',
    timeoutMs: 120_000,
    async run(t) {
      const dir = await scratch(t, 'select-');
      for (const n of ['a.txt', 'b.txt', 'c.txt', 'd.txt']) await writeFile(path.join(dir, n), `${n} `.repeat(100));
      await mkdir(path.join(dir, 'e folder', 'inner'), { recursive: true });
      await writeFile(path.join(dir, 'e folder', 'f.bin'), randomBytes(70_000));
      await writeFile(path.join(dir, 'e folder', 'inner', 'g.txt'), 'g');
      const s = await share(t, dir);
      const { chromium, page } = await browser(t, 'select');
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 30_000);
      const id = async (p: string) => (await page.evaluate((x) => window.linkfsShare!.lookup(x), p))!.id;
      const row = async (p: string) => page.locator(`[data-testid=row][data-id="${await id(p)}"]`);
      await (await row('a.txt')).click({ modifiers: ['Control'] });
      await (await row('c.txt')).click({ modifiers: ['Shift'] });
      await (await row('e folder')).locator('[data-testid=row-select]').click();
      const count = await page.locator('[data-testid=selection-count]').textContent();
      assert(count === '4 selected', `the selection bar says ${JSON.stringify(count)}, "4 selected" expected`);
      const out = path.join(await scratch(t, 'select-out-'), 'selection.zip');
      const r = await downloadThroughPage(page, { target: '', out, button: '[data-testid=selection-download]', log: (l) => log(`    ${l}`) });
      const list = spawnSync('python3', ['-c', 'import sys, zipfile, json; z = zipfile.ZipFile(sys.argv[1]); print(json.dumps(sorted((i.filename, len(z.read(i))) for i in z.infolist())))', out], { encoding: 'utf8' });
      assert(list.status === 0, `Python's zipfile could not read the selection's ZIP: ${list.stderr}`);
      const members = JSON.parse(list.stdout) as [string, number][];
      const expected = [['a.txt', 600], ['b.txt', 600], ['c.txt', 600], ['e folder/', 0], ['e folder/f.bin', 70_000], ['e folder/inner/', 0], ['e folder/inner/g.txt', 1]];
      assert(JSON.stringify(members) === JSON.stringify(expected), `the ZIP holds ${JSON.stringify(members)}, expected ${JSON.stringify(expected)}`);
      log(`    selection ZIP: ${r.bytes} bytes, ${members.length} members`);
      assert(chromium.pageErrors.length === 0, `uncaught errors in the page: ${chromium.pageErrors.join('; ')}`);
      await s.stop();
    },
  },
  {
    name: 'u: a folder saved into a chosen folder keeps its structure and bytes, reports every name changed, overwrites nothing, and resumes after a cancel',
    timeoutMs: 180_000,
    async run(t) {
      const dir = await scratch(t, 'into-');
      const root = path.join(dir, 'photos');
      await mkdir(path.join(root, 'sub', 'inner'), { recursive: true });
      await mkdir(path.join(root, 'empty folder'));
      await mkdir(path.join(root, 'many'));
      // Names a disk (or Windows) cannot hold, names that collide ignoring case or
      // once changed, and plain ones.
      const awkward = ['what?.txt', 'colon:name.txt', 'star*.txt', 'pipe|.txt', 'quote".txt', '<angle>.txt', 'trailing dot.', 'trailing space ', 'CON', 'nul.txt', 'back\\slash.txt', 'tab\tname.txt', 'x:y.txt', 'x_y.txt', 'Same.txt', 'same.TXT', 'plain.txt', '.hidden'];
      for (const [i, n] of awkward.entries()) await writeFile(path.join(root, n), `${i}:${n}\n`.repeat(i + 1));
      await writeFile(path.join(root, 'sub', 'empty.txt'), '');
      await writeFile(path.join(root, 'sub', 'inner', 'deep.bin'), randomBytes(3 * MIB + 17));
      await writeFile(path.join(root, 'big.bin'), randomBytes(96 * MIB));
      for (let i = 0; i < 300; i++) await writeFile(path.join(root, 'many', `f${i}.txt`), randomBytes(i * 37));
      await symlink('plain.txt', path.join(root, 'link to plain'));
      const source = new Map<string, string>(); // path under photos -> sha256
      const walk = async (rel: string): Promise<void> => {
        for (const e of await readdir(path.join(root, rel), { withFileTypes: true })) {
          const p = rel === '' ? e.name : `${rel}/${e.name}`;
          if (e.isDirectory()) await walk(p);
          else if (e.isFile()) source.set(p, await sha256File(path.join(root, p)));
        }
      };
      await walk('');
      const s = await share(t, dir);
      const { chromium, page } = await browser(t, 'into');
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 30_000);
      // The one part that cannot run here is the browser's native folder dialog: a
      // stand-in answers with a folder of the origin's private file system (the same
      // File System Access handles, really written), which already holds a "photos".
      await page.evaluate(async () => {
        const opfs = await navigator.storage.getDirectory();
        const chosen = await opfs.getDirectoryHandle('chosen', { create: true });
        const old = await chosen.getDirectoryHandle('photos', { create: true });
        const w = await (await old.getFileHandle('mine.txt', { create: true })).createWritable();
        await w.write('already here');
        await w.close();
        (window as unknown as { showDirectoryPicker: () => Promise<FileSystemDirectoryHandle> }).showDirectoryPicker = async () => chosen;
      });
      await openFolder(page, 'photos');
      await page.locator('[data-testid=folder-save]').click();
      const item = page.locator('[data-testid=download]').first();
      // Cancel once part of big.bin is written, then resume.
      await page.waitForFunction(() => {
        const bar = document.querySelector<HTMLProgressElement>('[data-testid=download] progress');
        return bar !== null && bar.max > 1 && bar.value > bar.max * 0.3;
      }, undefined, { timeout: 60_000 });
      await item.locator('.download-cancel').click();
      await page.waitForFunction(() => document.querySelector<HTMLElement>('[data-testid=download]')?.dataset.state === 'cancelled', undefined, { timeout: 10_000 });
      await item.locator('.download-retry').click();
      await page.waitForFunction(() => {
        const st = document.querySelector<HTMLElement>('[data-testid=download]')?.dataset.state;
        return st === 'done' || st === 'failed';
      }, undefined, { timeout: 120_000 });
      const facts: { state?: string; error?: string; folder?: string; notes: string[] } = await item.evaluate((e) => ({ ...(e as HTMLElement).dataset, notes: [...e.querySelectorAll('.download-note-list li')].map((li) => li.textContent ?? '') }));
      assert(facts.state === 'done', `the save ended ${facts.state}: ${facts.error ?? ''}`);
      assert(facts.folder === 'photos (2)', `saved into ${JSON.stringify(facts.folder)}, expected "photos (2)" next to the "photos" already there`);
      // What is on disk, read back through the same API, hashed in the page.
      const saved = (await page.evaluate(async () => {
        const hex = (b: ArrayBuffer) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, '0')).join('');
        const chosen = await (await navigator.storage.getDirectory()).getDirectoryHandle('chosen');
        const out: { path: string; sha256: string | null }[] = [];
        const walk = async (d: FileSystemDirectoryHandle, rel: string): Promise<void> => {
          for await (const [name, h] of (d as unknown as { entries(): AsyncIterable<[string, FileSystemHandle]> }).entries()) {
            const p = rel === '' ? name : `${rel}/${name}`;
            if (h.kind === 'directory') {
              out.push({ path: `${p}/`, sha256: null });
              await walk(h as FileSystemDirectoryHandle, p);
            } else {
              out.push({ path: p, sha256: hex(await crypto.subtle.digest('SHA-256', await (await (h as FileSystemFileHandle).getFile()).arrayBuffer())) });
            }
          }
        };
        await walk(chosen, '');
        return out;
      })) as { path: string; sha256: string | null }[];
      const mine = saved.filter((e) => e.path.startsWith('photos/') || e.path === 'photos/');
      assert(JSON.stringify(mine.map((e) => e.path)) === JSON.stringify(['photos/', 'photos/mine.txt']), `the "photos" already there was written into: ${JSON.stringify(mine.map((e) => e.path))}`);
      const files = new Map(saved.filter((e) => e.path.startsWith('photos (2)/') && e.sha256 !== null).map((e) => [e.path.slice('photos (2)/'.length), e.sha256!]));
      const folders = new Set(saved.filter((e) => e.path.startsWith('photos (2)/') && e.sha256 === null).map((e) => e.path.slice('photos (2)/'.length)));
      assert(folders.has('empty folder/') && folders.has('sub/inner/') && folders.has('many/'), `folders missing: ${JSON.stringify([...folders])}`);
      assert(files.size === source.size, `${files.size} files saved, ${source.size} in the source (${[...files.keys()].filter((k) => !source.has(k)).join(', ')})`);
      const bytes = (m: Map<string, string>) => [...m.values()].sort().join();
      assert(bytes(files) === bytes(source), 'the saved files\' contents differ from the source\'s');
      // Every file not saved under its own name is named in a note; every note is true.
      const moved = [...source.keys()].filter((p) => files.get(p) !== source.get(p));
      for (const p of moved) assert(facts.notes.some((n) => n.startsWith(`photos/${p}:`)), `${p} was saved under another name without a note saying so (notes: ${JSON.stringify(facts.notes)})`);
      for (const p of ['what?.txt', 'CON', 'trailing dot.', 'tab\tname.txt', 'back\\slash.txt', 'x:y.txt']) assert(moved.includes(p), `${JSON.stringify(p)} was saved under its own name, which a disk cannot hold portably (changed: ${JSON.stringify(moved)})`);
      assert(facts.notes.some((n) => n.startsWith('photos/link to plain:') && n.includes('left out')), `the symbolic link is not reported: ${JSON.stringify(facts.notes)}`);
      log(`    saved into "photos (2)": ${files.size} files, ${folders.size} folders; ${moved.length} renamed: ${facts.notes.slice(0, 30).join(' | ')}`);
      assert(chromium.pageErrors.length === 0, `uncaught errors in the page: ${chromium.pageErrors.join('; ')}`);
      await s.stop();
    },
  },
  {
    name: 't: search the whole share: an NFD name found by typing its NFC form, a glob finds a deep file, a result opens its folder with it selected',
    timeoutMs: 120_000,
    async run(t) {
      const dir = await scratch(t, 'search-');
      const deep = path.join(dir, 'a', 'b', 'c');
      await mkdir(deep, { recursive: true });
      await writeFile(path.join(deep, 'Cafe\u0301 menu.txt'), 'menu');
      await writeFile(path.join(deep, 'Report 2024.PDF'), 'pdf');
      await writeFile(path.join(dir, 'a', 'Straße.txt'), 'street');
      for (let i = 0; i < 3000; i++) {
        const sub = path.join(dir, `folder ${i % 30}`);
        if (i < 30) await mkdir(sub);
        await writeFile(path.join(sub, `file ${i}.txt`), '');
      }
      const s = await share(t, dir);
      const { chromium, page } = await browser(t, 'search');
      await openLink(page, s.link, ['connected']);
      await waitForComplete(page, s.spawnedAt, 30_000);
      // The connection is shown: direct here (no TURN in the test namespace), with a round trip.
      await page.waitForFunction(() => document.querySelector<HTMLElement>('[data-testid=connection-info]')?.dataset.route !== undefined, undefined, { timeout: 10_000 });
      const info = await page.locator('[data-testid=connection-info]').evaluate((e) => ({ route: (e as HTMLElement).dataset.route, rtt: (e as HTMLElement).dataset.rttMs, text: e.textContent }));
      log(`    connection: ${JSON.stringify(info)}`);
      assert(info.route === 'direct' && info.text?.startsWith('Direct') === true, `the page says the connection is ${JSON.stringify(info)}, expected direct`);
      assert(info.rtt !== '' && Number(info.rtt) >= 0, `no round-trip time shown: ${JSON.stringify(info)}`);
      const search = page.locator('[data-testid=search]');
      /** Types `q` and waits for its whole search to finish; returns the paths shown. */
      const searchFor = async (q: string): Promise<string[]> => {
        await search.fill(q);
        await page.waitForFunction((query) => {
          const panel = document.querySelector<HTMLElement>('.search-panel');
          return panel?.dataset.query === query && panel.dataset.state === 'done';
        }, q, { timeout: 10_000 });
        return page.locator('[data-testid=search-hit]').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.path ?? ''));
      };
      const cafe = await searchFor('Café');
      assert(cafe.length === 1 && cafe[0] === 'a/b/c/Cafe\u0301 menu.txt', `typing "Café" (NFC) found ${JSON.stringify(cafe)}, expected the NFD name a/b/c/Café menu.txt`);
      const pdf = await searchFor('*.pdf');
      assert(pdf.length === 1 && pdf[0] === 'a/b/c/Report 2024.PDF', `"*.pdf" found ${JSON.stringify(pdf)}`);
      const many = await searchFor('file 29*');
      assert(many.length === 111, `"file 29*" found ${many.length} names, 111 expected (file 29, file 290-299, file 2900-2999)`);
      assert((await searchFor('Report')).length === 1, '"Report" should find one name');
      const street = await searchFor('STRASSE');
      assert(street.length === 1 && street[0] === 'a/Straße.txt', `"STRASSE" found ${JSON.stringify(street)}, expected a/Straße.txt (ß case-folds to ss)`);
      // Sorting the results by size, then descending: the largest first.
      const shown = await searchFor('*.*');
      const found = await page.locator('.search-panel').getAttribute('data-found');
      assert(found === '3003' && shown.length === 200, `"*.*" found ${found} names and shows ${shown.length}, 3,003 and the first 200 expected`);
      await page.locator('[data-testid=search-sort-size]').click();
      await page.locator('[data-testid=search-sort-size]').click();
      const firstBySize = await page.locator('[data-testid=search-hit]').first().getAttribute('data-path');
      assert(firstBySize === 'a/Straße.txt', `sorted by size descending, the first result is ${firstBySize}, expected a/Straße.txt (6 bytes)`);
      await page.locator('[data-testid=search-sort-name]').click();
      await searchFor('Report');
      const target = await page.evaluate(() => window.linkfsShare!.lookup('a/b/c/Report 2024.PDF'));
      await page.locator('[data-testid=search-hit]').first().click();
      await page.waitForFunction((id) => {
        const row = document.querySelector(`[data-testid=row][data-id="${id}"]`);
        return row?.classList.contains('is-selected') === true && row.classList.contains('is-active');
      }, target!.id, { timeout: 10_000 });
      const hash = await page.evaluate(() => decodeURIComponent(window.location.hash.split('/').slice(1).join('/')));
      assert(hash === 'a/b/c', `the result opened ${JSON.stringify(hash)}, not its folder a/b/c`);
      assert(chromium.pageErrors.length === 0, `uncaught errors in the page: ${chromium.pageErrors.join('; ')}`);
      await s.stop();
    },
  },
  {
    name: 't1m: search a 1,000,000-entry share: first results within 100 ms, every search done within 1 s, no main-thread task of 50 ms or more while searching, an NFD name found by its NFC form',
    timeoutMs: 15 * 60_000,
    async run(t) {
      // Empty files: the search is over names, and an empty tree is made in a quarter of the time.
      const tree = await generatedTree(1_000_000, { empty: true });
      // A name stored decomposed (NFD), as macOS writes it, in the generated tree for
      // the length of the test.
      const probeDir = path.join(tree, 'zz search probe');
      await mkdir(probeDir, { recursive: true });
      await writeFile(path.join(probeDir, 'Cre\u0300me bru\u0302le\u0301e.txt'), 'dessert');
      t.defer(() => rm(probeDir, { recursive: true, force: true }));
      const s = await startShare(tree, { nice: 19 });
      t.defer(() => s.kill());
      const { chromium, page } = await browser(t, 'search-1m');
      await chromium.context.addInitScript({
        content: `globalThis.__longTasks = []; try { new PerformanceObserver((l) => { for (const e of l.getEntries()) globalThis.__longTasks.push([e.startTime, e.duration]); }).observe({ type: 'longtask', buffered: true }); } catch {}`,
      });
      await openLink(page, s.link, ['connected'], 60_000);
      await waitForComplete(page, s.spawnedAt, 120_000);
      const entries = await page.evaluate(() => window.linkfsShare!.progress().received);
      assert(entries > 1_000_000, `the index holds ${entries} entries, over 1,000,000 expected`);
      const search = page.locator('[data-testid=search]');
      const figures: Record<string, unknown>[] = [];
      for (const q of ['*9.*', 'budget', 'Crème brûlée']) {
        const from = await page.evaluate(() => performance.now());
        // The trace gives each main-thread task's time on a core as well as its wall
        // time: on a shared machine a short task can be kept from its core for tens of
        // milliseconds (a CI run once saw a 78 ms "long task" here that runs 0 ms long
        // on this machine alone), so the budget is on the page's own work.
        const trace = await startTrace(page);
        await search.fill(q);
        await page.waitForFunction((query) => {
          const panel = document.querySelector<HTMLElement>('.search-panel');
          return panel?.dataset.query === query && panel.dataset.state === 'done';
        }, q, { timeout: 30_000 });
        const r = await page.evaluate((since) => {
          const panel = document.querySelector<HTMLElement>('.search-panel')!;
          const tasks = ((globalThis as unknown as { __longTasks: [number, number][] }).__longTasks ?? []).filter(([at, d]) => at + d >= since);
          return {
            found: Number(panel.dataset.found),
            firstMs: panel.dataset.firstMs === undefined ? null : Number(panel.dataset.firstMs),
            doneMs: Number(panel.dataset.doneMs),
            longestTaskMs: Math.round(tasks.reduce((m, [, d]) => Math.max(m, d), 0)),
            paths: [...document.querySelectorAll<HTMLElement>('[data-testid=search-hit]')].slice(0, 5).map((e) => e.dataset.path ?? ''),
          };
        }, from);
        const traced = traceLongTasks(await trace.stop(), 50);
        figures.push({ query: q, found: r.found, first_results_ms: r.firstMs, all_results_ms: r.doneMs, longest_task_ms: r.longestTaskMs, longest_task_cpu_ms: Math.round(traced.longestCpuMs) });
        assert(traced.longestCpuMs < 50, `searching "${q}" made a main-thread task of ${traced.longestCpuMs.toFixed(0)} ms on a core (under 50 ms expected): ${traced.lines.join('; ')}`);
        if (r.longestTaskMs >= 50) log(`    "${q}": a ${r.longestTaskMs} ms main-thread task by the clock, ${traced.longestCpuMs.toFixed(0)} ms of it on a core (the machine kept it waiting): ${traced.lines.join('; ')}`);
        assert(r.doneMs <= 1000, `searching "${q}" over ${entries} entries took ${r.doneMs} ms (1 s at most)`);
        if (q === '*9.*') {
          assert(r.found === 10_000, `"*9.*" found ${r.found}; 10,000 (the cap) expected`);
          assert(r.firstMs !== null && r.firstMs <= 100, `the first results of "*9.*" came after ${r.firstMs} ms (100 ms at most)`);
        }
        if (q === 'Crème brûlée') {
          assert(r.found === 1 && r.paths[0] === 'zz search probe/Cre\u0300me bru\u0302le\u0301e.txt', `typing "Crème brûlée" (NFC) found ${JSON.stringify(r.paths)}, expected the NFD-named file`);
        }
      }
      log(`    ${JSON.stringify({ entries, search: figures })}`);
      assert(chromium.pageErrors.length === 0, `uncaught errors in the page: ${chromium.pageErrors.join('; ')}`);
      await s.stop();
    },
  },
  {
    name: 'p-ff: Firefox ESR plays the same videos with seeking, reading under 20 % of each',
    timeoutMs: 240_000,
    async run(t) {
      const dir = await scratch(t, 'media-ff-');
      await cachedVideo(path.join(dir, 'clip end-index.mp4'), VIDEO_SECONDS, VIDEO_KBPS);
      await cachedVideo(path.join(dir, 'clip.webm'), VIDEO_SECONDS, VIDEO_KBPS);
      const s = await share(t, dir);
      const { fx, page } = await firefoxBrowser(t, 'media-ff', log);
      await firefox.openLink(page, s.link, ['connected'], 30_000);
      await page.waitForFunction(() => window.linkfsShare?.progress().complete === true, { timeout: 30_000 });
      await page.evaluate(() => navigator.serviceWorker.ready.then(() => undefined));
      for (const name of ['clip end-index.mp4', 'clip.webm']) {
        const size = (await stat(path.join(dir, name))).size;
        await openRow(page, name, puppeteerClick(page));
        await page.waitForSelector('[data-testid=player]', { timeout: 20_000 });
        const r = await playAndSeek(page);
        log(`    ${name}: ${(size / MIB).toFixed(1)} MiB; seek -> playing ${r.seekMs.toFixed(0)} ms; read ${(r.servedBytes / MIB).toFixed(1)} MiB = ${((100 * r.servedBytes) / size).toFixed(1)} %`);
        assert(r.error === null, `${name} in Firefox: ${r.error}`);
        assert(r.servedBytes > 0 && r.servedBytes < 0.2 * size, `${name} in Firefox read ${r.servedBytes} bytes, ${((100 * r.servedBytes) / size).toFixed(1)} % of the file (at most 20 % expected)`);
        await page.keyboard.press('Escape');
      }
      const errors = realErrors(fx.pageErrors);
      assert(errors.length === 0, `uncaught errors in the page: ${errors.join('; ')}`);
      await s.stop();
    },
  },
  {
    name: `q-ff: Firefox ESR saves a ${firefoxGib} GiB file through the service worker, across a dropped link: right SHA-256, not cut short`,
    timeoutMs: 20 * 60_000,
    async run(t) {
      const dir = await scratch(t, 'huge-ff-');
      const file = path.join(dir, 'disk image.img');
      const size = Math.floor(firefoxGib * GIB);
      await sparseWithRandomRegions(file, size);
      const expected = await sha256File(file);
      const s = await share(t, dir);
      const { fx, page } = await firefoxBrowser(t, 'huge-ff', log);
      await firefox.openLink(page, s.link, ['connected'], 30_000);
      await page.waitForFunction(() => window.linkfsShare?.progress().complete === true, { timeout: 30_000 });
      let dropped = false;
      const r = await firefoxDownload(fx, page, 'disk image.img', 'disk image.img', (bytes) => {
        if (!dropped && bytes > size / 2) {
          dropped = true;
          log(`    dropping the data link at ${(bytes / GIB).toFixed(2)} GiB`);
          process.kill(s.pid, 'SIGUSR1');
        }
      });
      const got = await sha256File(r.file);
      log(`    ${(size / GIB).toFixed(2)} GiB in ${r.seconds.toFixed(1)} s = ${(size / 1e6 / r.seconds).toFixed(1)} MB/s through ${r.route}`);
      assert(dropped, 'the link was never dropped (no progress seen in the .part file)');
      assert(r.route === 'service-worker', `Firefox saved through ${r.route}, not the service worker`);
      assert(got === expected, `the file Firefox saved has SHA-256 ${got}, the source ${expected}`);
      const errors = realErrors(fx.pageErrors);
      assert(errors.length === 0, `uncaught errors in the page: ${errors.join('; ')}`);
      await s.stop();
    },
  },
  {
    name: `r-ff: Firefox ESR saves a folder of 2,000 awkward names and a ${firefoxZipGib} GiB file as one ZIP that Python's zipfile reads back equal`,
    timeoutMs: 20 * 60_000,
    async run(t) {
      const dir = await scratch(t, 'zip-ff-');
      const folder = path.join(dir, 'awkward');
      await awkwardTree(folder, 2_000);
      await sparseWithRandomRegions(path.join(folder, 'huge.img'), Math.floor(firefoxZipGib * GIB));
      const s = await share(t, dir);
      const { fx, page } = await firefoxBrowser(t, 'zip-ff', log);
      await firefox.openLink(page, s.link, ['connected'], 30_000);
      await page.waitForFunction(() => window.linkfsShare?.progress().complete === true, { timeout: 60_000 });
      const r = await firefoxDownload(fx, page, 'awkward', 'awkward.zip');
      log(`    ZIP in ${r.seconds.toFixed(1)} s through ${r.route}, ${r.files} files planned`);
      assert(r.files === 2_001, `the page planned ${r.files} files, 2,001 expected`);
      const check = spawnSync('python3', [path.join(import.meta.dirname, 'lib', 'check_zip.py'), r.file, folder, 'awkward'], { encoding: 'utf8' });
      log(`    check_zip: ${check.stdout.trim()}${check.stderr ? `\n${check.stderr}` : ''}`);
      assert(check.status === 0, `Python's zipfile found problems in Firefox's ZIP: ${check.stdout}${check.stderr}`);
      const errors = realErrors(fx.pageErrors);
      assert(errors.length === 0, `uncaught errors in the page: ${errors.join('; ')}`);
      await s.stop();
    },
  },
];

await runSuite('content', tests);

// Visitors adding files through the page, in Chromium, against a real `linkfs share`:
// - a folder of awkward names dragged and dropped (Chromium's own drop of a folder's
//   path) and a few files dropped, landing whole in the link's folder;
// - a large file that keeps going across three dropped connections;
// - a reload in the middle of an upload, then the same file added again going on
//   from where it stopped;
// - a drop link that shows nothing and takes a picked folder;
// - a send the browser refuses in the middle of an upload, which goes on over a new link.
// Every file is compared byte for byte with its source on the sharer's disk.
//
//   bash tests-e2e/run uploads [NAME_PREFIX...]

import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { launchChromium, openLink, screenshot, type ChromiumInstance } from './lib/chromium.ts';
import { name255, specialNames } from './lib/fixture.ts';
import { assert, runSuite, type TestCase, type TestContext } from './lib/runner.ts';
import { startShare, type ShareProcess } from './lib/share-process.ts';
import { binary, scratchDir } from './lib/paths.ts';

const log = (line: string) => console.log(line);
/**
 * b's file (MiB). 320 by default: three drops come 64 MiB apart (each after the upload
 * went on past the last), and the rest shows the upload lands whole after them. 1024
 * until 2026-11-28, then 640 with drops 150 MiB apart: 45 s more of CI for nothing more
 * shown. LINKFS_UPLOADS_DROPS_MIB sets it.
 */
const dropsUploadMib = Number(process.env.LINKFS_UPLOADS_DROPS_MIB ?? '320');
/** Bytes the upload must move on between two drops: a fifth of the file. */
const dropsApart = Math.floor((dropsUploadMib << 20) / 5);

async function browser(t: TestContext, name: string): Promise<{ chromium: ChromiumInstance; page: Page }> {
  const chromium = await launchChromium({ name, log });
  t.defer(() => chromium.close());
  const page = await chromium.page();
  t.defer(async () => {
    const file = await screenshot(page, `${t.name}-${name}`);
    if (file) log(`    screenshot: ${file}`);
  });
  return { chromium, page };
}

async function shared(t: TestContext, tag: string): Promise<{ dir: string; s: ShareProcess }> {
  await mkdir(scratchDir, { recursive: true });
  const dir = await mkdtemp(path.join(scratchDir, `uploads-${tag}-`));
  t.defer(() => rm(dir, { recursive: true, force: true }));
  await writeFile(path.join(dir, 'already-here.txt'), 'the sharer\'s own\n');
  const s = await startShare(dir, { args: ['--no-qr'] });
  t.defer(() => s.kill());
  return { dir, s };
}

function addLink(dir: string, args: string[]): string {
  const r = spawnSync(binary('linkfs'), ['link', 'add', ...args, '--dir', dir], { encoding: 'utf8' });
  assert(r.status === 0, `linkfs link add ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.trim();
}

/** Every file under `dir` (relative path -> SHA-256), the staging folder left out. */
async function hashes(dir: string, prefix = ''): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const e of await readdir(path.join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix === '' ? e.name : `${prefix}/${e.name}`;
    if (rel === '.linkfs-incoming') continue;
    if (e.isDirectory()) for (const [k, v] of await hashes(dir, rel)) out.set(k, v);
    else if (e.isFile()) out.set(rel, createHash('sha256').update(await readFile(path.join(dir, rel))).digest('hex'));
  }
  return out;
}

type PanelItem = { path: string; state: string; detail: string; notes: string };

/** What the uploads panel shows now: each item's path, state and words. */
async function panel(page: Page): Promise<PanelItem[]> {
  return page.$$eval('[data-testid=upload]', (items) =>
    items.map((i) => ({
      path: (i as HTMLElement).dataset['path'] ?? '',
      state: (i as HTMLElement).dataset['state'] ?? '',
      detail: i.querySelector('.download-detail')?.textContent ?? '',
      notes: i.querySelector('.download-notes')?.textContent ?? '',
    })),
  );
}

/**
 * Waits until every upload in the panel has finished; returns each one's path, state
 * and words. On a timeout the error says what the panel held, so a failure tells a
 * drop that never arrived (fewer items) from an upload that stalled (its state and words).
 */
async function uploadsFinished(page: Page, count: number, timeoutMs: number): Promise<PanelItem[]> {
  try {
    await page.waitForFunction(
      (n) => {
        const items = [...document.querySelectorAll<HTMLElement>('[data-testid=upload]')];
        return items.length >= n && items.every((i) => i.dataset['state'] === 'done' || i.dataset['state'] === 'failed');
      },
      count,
      { timeout: timeoutMs, polling: 200 },
    );
  } catch (error) {
    const now = await panel(page).catch(() => [] as PanelItem[]);
    const status = await page.locator('[data-testid=status]').textContent({ timeout: 1_000 }).catch(() => '(no status)');
    const lines = now.map((i) => `${i.state || '(going)'}  ${i.path}: ${i.detail} ${i.notes}`.trim());
    const dropNotes = await page.$$eval('[data-testid=drop-failed]', (notes) => notes.map((n) => n.textContent ?? '')).catch(() => [] as string[]);
    lines.push(...dropNotes.map((n) => `drop failed: ${n}`));
    throw new Error(`${now.length} of ${count} uploads in the panel, not all finished after ${timeoutMs / 1000} s; status "${status}":\n      ${lines.join('\n      ')}\n    ${String(error)}`);
  }
  return panel(page);
}

/** Bytes the sharer holds aside (part files) now. */
async function partBytes(dir: string): Promise<number> {
  const staging = path.join(dir, '.linkfs-incoming');
  let n = 0;
  for (const f of await readdir(staging).catch(() => [] as string[])) n += (await stat(path.join(staging, f)).catch(() => ({ size: 0 }))).size;
  return n;
}

async function bigFile(bytes: number, tag: string): Promise<string> {
  const dir = await mkdtemp(path.join(scratchDir, `uploads-src-${tag}-`));
  const file = path.join(dir, `${tag}.bin`);
  const w = spawnSync('sh', ['-c', `head -c ${bytes} /dev/urandom > '${file}'`]);
  assert(w.status === 0, `could not make ${file}`);
  return file;
}

function sha256File(file: string): string {
  const r = spawnSync('sha256sum', [file], { encoding: 'utf8' });
  return r.stdout.split(' ')[0] ?? '';
}

/**
 * Drags `paths` (files or folders on this machine) onto the page and drops them,
 * as a person dragging them from their file manager would: Chromium builds the
 * drop's entries from the paths itself (folders as folder entries).
 */
/** Waits until the sharer holds at least `bytes` aside (polling every `everyMs`); fails saying `what`. */
async function untilPartBytes(dir: string, bytes: number, what: string, timeoutMs = 60_000, everyMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await partBytes(dir)) < bytes) {
    assert(Date.now() < deadline, what);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

async function dropPaths(page: Page, paths: string[]): Promise<void> {
  const cdp = await page.context().newCDPSession(page);
  try {
    const data = { items: [], files: paths, dragOperationsMask: 1 };
    for (const type of ['dragEnter', 'dragOver', 'drop'] as const) {
      await cdp.send('Input.dispatchDragEvent', { type, x: 400, y: 300, data });
    }
  } finally {
    await cdp.detach().catch(() => undefined);
  }
}

const tests: TestCase[] = [
  {
    name: 'a: a folder of awkward names dragged and dropped, and files dropped, land whole in the link\'s folder; a taken name gets " (2)"; nothing outside it',
    timeoutMs: 120_000,
    async run(t) {
      const { dir } = await shared(t, 'folder');
      await mkdir(path.join(dir, 'inbox'));
      await writeFile(path.join(dir, 'inbox', 'notes.txt'), 'the sharer\'s own notes\n');
      const link = addLink(dir, ['--allow-upload', '--scope', 'inbox', '--label', 'inbox']);
      // The source: a folder of the awkward names the other suites use, nested.
      const src = await mkdtemp(path.join(scratchDir, 'uploads-src-folder-'));
      t.defer(() => rm(src, { recursive: true, force: true }));
      const album = path.join(src, 'album');
      const names = [...specialNames.filter((n) => n !== 'back\\slash.txt' && !n.endsWith(' ')), name255()];
      for (const [i, n] of names.entries()) {
        const sub = i % 2 === 0 ? album : path.join(album, 'deeper', 'still');
        await mkdir(sub, { recursive: true });
        await writeFile(path.join(sub, n), `file ${i}: ${n}\n`.repeat(i * 50 + 1));
      }
      const want = await hashes(src);
      const { chromium, page } = await browser(t, 'folder');
      await openLink(page, link, ['connected']);
      await page.waitForSelector('[data-testid=add-files]', { state: 'visible', timeout: 20_000 });
      // The folder dragged from the desktop and dropped on the page: Chromium's own
      // drag and drop with the folder's path (what the OS hands it), through DevTools.
      await dropPaths(page, [album]);
      // And two files made in the page and dropped (one taking a name that is there).
      await page.evaluate(async () => {
        const dt = new DataTransfer();
        dt.items.add(new File(['dropped one\n'], 'dropped.txt', { type: 'text/plain' }));
        dt.items.add(new File(['the visitor\'s notes\n'], 'notes.txt', { type: 'text/plain' }));
        document.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
        document.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
      });
      const done = await uploadsFinished(page, names.length + 2, 60_000);
      const failed = done.filter((u) => u.state !== 'done');
      assert(failed.length === 0, `not added: ${JSON.stringify(failed)}`);
      const got = await hashes(path.join(dir, 'inbox'));
      // A hidden name (a leading '.') lands with '_' for its dot: this link does not take hidden names.
      const landedAs = (rel: string) => rel.split('/').map((part) => (part.startsWith('.') ? `_${part.slice(1)}` : part)).join('/');
      for (const [rel, h] of want) {
        assert(got.get(landedAs(rel)) === h, `${rel}: ${got.has(landedAs(rel)) ? 'other bytes' : `missing on the sharer's disk (as ${landedAs(rel)})`}`);
      }
      const hidden = done.find((u) => u.path.endsWith('.hidden'));
      assert(hidden !== undefined && `${hidden.detail} ${hidden.notes}`.includes('hidden'), `the page did not say the hidden name was changed: ${JSON.stringify(hidden)}`);
      assert((await readFile(path.join(dir, 'inbox', 'notes.txt'), 'utf8')) === 'the sharer\'s own notes\n', 'the sharer\'s file was replaced');
      assert((await readFile(path.join(dir, 'inbox', 'notes (2).txt'), 'utf8')) === 'the visitor\'s notes\n', 'the taken name did not land as "notes (2).txt"');
      assert(done.some((u) => u.path === 'notes.txt' && u.detail.includes('notes (2).txt')), `the page did not say where the taken name landed: ${JSON.stringify(done.find((u) => u.path === 'notes.txt'))}`);
      const top = (await readdir(dir)).filter((n) => n !== '.linkfs-incoming').sort();
      assert(JSON.stringify(top) === JSON.stringify(['already-here.txt', 'inbox']), `something landed outside the link's folder: ${JSON.stringify(top)}`);
      // The page shows them through the live share.
      await page.waitForFunction(() => document.querySelector('[data-testid=listing]')?.textContent?.includes('dropped.txt') ?? false, undefined, { timeout: 10_000 });
      log(`    ${want.size} files of a dropped folder and 2 dropped files landed, byte for byte`);
      assert(chromium.pageErrors.length === 0, `uncaught errors in the page:\n  ${chromium.pageErrors.join('\n  ')}`);
    },
  },
  {
    name: `b: a ${dropsUploadMib} MiB file keeps going across three dropped connections and lands whole`,
    timeoutMs: 300_000,
    async run(t) {
      const { dir, s } = await shared(t, 'drops');
      const link = addLink(dir, ['--allow-upload']);
      const file = await bigFile(dropsUploadMib << 20, 'gib');
      t.defer(() => rm(path.dirname(file), { recursive: true, force: true }));
      const { page } = await browser(t, 'drops');
      await openLink(page, link, ['connected']);
      await page.waitForSelector('[data-testid=add-files]', { state: 'visible', timeout: 20_000 });
      await page.setInputFiles('[data-testid=upload-files-input]', file);
      for (let drop = 1; drop <= 3; drop += 1) {
        const before = await partBytes(dir);
        await untilPartBytes(dir, before + dropsApart, `the upload did not move before drop ${drop}`, 120_000, 50);
        process.kill(s.pid, 'SIGUSR1');
        log(`    dropped every connection at ${((await partBytes(dir)) / 1048576).toFixed(0)} MiB`);
      }
      const done = await uploadsFinished(page, 1, 240_000);
      assert(done[0]?.state === 'done', `not added: ${JSON.stringify(done[0])}`);
      assert(sha256File(path.join(dir, 'gib.bin')) === sha256File(file), 'the file on the sharer\'s disk has other bytes');
    },
  },
  {
    name: 'c: a reload in the middle of an upload: the page offers to go on, and the same file added again goes on from its byte',
    timeoutMs: 240_000,
    async run(t) {
      const { dir } = await shared(t, 'reload');
      await mkdir(path.join(dir, 'deep', 'er'), { recursive: true });
      const link = addLink(dir, ['--allow-upload']);
      // Reloaded past 100 MiB, then on from its byte: 256 MiB in all (600 until
      // 2026-11-28, 50 s more of CI for nothing more shown).
      const file = await bigFile(256 << 20, 'reloaded');
      t.defer(() => rm(path.dirname(file), { recursive: true, force: true }));
      const { page } = await browser(t, 'reload');
      await openLink(page, `${link}/deep/er`, ['connected']);
      await page.waitForSelector('[data-testid=add-files]', { state: 'visible', timeout: 20_000 });
      await page.setInputFiles('[data-testid=upload-files-input]', file);
      await untilPartBytes(dir, 100 << 20, 'the upload did not start');
      await page.reload({ waitUntil: 'domcontentloaded' });
      const held = await partBytes(dir);
      const note = await page.waitForSelector('[data-testid=upload-resume]', { state: 'visible', timeout: 20_000 });
      const words = (await note.textContent()) ?? '';
      assert(words.includes('reloaded.bin') && words.includes('go on'), `the page did not offer to go on: ${words}`);
      // Added again from the top folder: it goes where it was going, on from its byte.
      await openLink(page, link, ['connected']);
      await page.waitForSelector('[data-testid=add-files]', { state: 'visible', timeout: 20_000 });
      await page.setInputFiles('[data-testid=upload-files-input]', file);
      const done = await uploadsFinished(page, 1, 180_000);
      assert(done[0]?.state === 'done', `not added: ${JSON.stringify(done[0])}`);
      assert(done[0]?.path === 'deep/er/reloaded.bin', `it went to ${done[0]?.path}, not where it was going`);
      assert(done[0]?.notes.includes('Went on from'), `it did not go on from its byte (the sharer held ${held} bytes): ${JSON.stringify(done[0])}`);
      assert(sha256File(path.join(dir, 'deep', 'er', 'reloaded.bin')) === sha256File(file), 'the file on the sharer\'s disk has other bytes');
      log(`    reloaded with ${(held / 1048576).toFixed(0)} MiB held; ${done[0]?.notes}`);
    },
  },
  {
    name: 'c2: the sharer stops in the middle of an upload: the page says so, and when the share is back the same file goes on from its byte',
    timeoutMs: 180_000,
    async run(t) {
      // Broke: the visit ended and the upload stayed "sending" in the panel for good.
      const { dir, s } = await shared(t, 'stopped');
      const link = addLink(dir, ['--allow-upload']);
      const file = await bigFile(96 << 20, 'stopped');
      t.defer(() => rm(path.dirname(file), { recursive: true, force: true }));
      const { page, chromium } = await browser(t, 'stopped');
      await openLink(page, link, ['connected']);
      await page.waitForSelector('[data-testid=add-files]', { state: 'visible', timeout: 20_000 });
      await page.setInputFiles('[data-testid=upload-files-input]', file);
      await untilPartBytes(dir, 24 << 20, 'the upload did not start');
      await s.stop();
      const held = await partBytes(dir);
      const ended = await uploadsFinished(page, 1, 30_000);
      assert(ended[0]?.state === 'failed', `the upload did not end with the share: ${JSON.stringify(ended[0])}`);
      assert(ended[0]?.detail.includes('stopped sharing') === true, `the page did not say why: ${JSON.stringify(ended[0])}`);
      assert(ended[0]?.notes.includes('kept by the sharer') === true, `the page did not say the bytes sent are kept: ${JSON.stringify(ended[0])}`);
      // The share back (same folder, same link), the page opened again: it offers to go on.
      const again = await startShare(dir, { args: ['--no-qr'] });
      t.defer(() => again.kill());
      // Away and back: the same URL again would be a same-document navigation.
      await page.goto('about:blank');
      await openLink(page, link, ['connected']);
      const note = await page.waitForSelector('[data-testid=upload-resume]', { state: 'visible', timeout: 20_000 });
      const words = (await note.textContent()) ?? '';
      assert(words.includes('stopped.bin'), `the page did not offer to go on: ${words}`);
      await page.setInputFiles('[data-testid=upload-files-input]', file);
      const done = await uploadsFinished(page, 1, 120_000);
      assert(done[0]?.state === 'done', `not added: ${JSON.stringify(done[0])}`);
      assert(done[0]?.notes.includes('Went on from') === true, `it did not go on from its byte (the sharer held ${held} bytes): ${JSON.stringify(done[0])}`);
      assert(sha256File(path.join(dir, 'stopped.bin')) === sha256File(file), 'the file on the sharer\'s disk has other bytes');
      assert(chromium.pageErrors.length === 0, `uncaught errors in the page:\n  ${chromium.pageErrors.join('\n  ')}`);
      log(`    stopped with ${(held / 1048576).toFixed(0)} MiB held; ${ended[0]?.detail}; then ${done[0]?.notes}`);
    },
  },
  {
    name: 'd: a drop link shows nothing of the share and takes files, which land in its own folder',
    timeoutMs: 90_000,
    async run(t) {
      const { dir } = await shared(t, 'drop');
      const link = addLink(dir, ['--drop', '--label', 'Send me files']);
      const { page } = await browser(t, 'drop');
      await openLink(page, link, ['connected']);
      await page.waitForSelector('[data-testid=add-files]', { state: 'visible', timeout: 20_000 });
      const said = await page
        .waitForFunction(() => document.body.textContent?.includes('This link takes files') ?? false, undefined, { timeout: 20_000 })
        .then(() => true, () => false);
      const text = (await page.textContent('body')) ?? '';
      assert(said, `the page does not say what the link is for: ${text.slice(0, 400)}`);
      assert(!text.includes('already-here.txt'), 'a drop link showed the sharer\'s files');
      // A folder picked with "Add a folder".
      const src = await mkdtemp(path.join(scratchDir, 'uploads-src-drop-'));
      t.defer(() => rm(src, { recursive: true, force: true }));
      await mkdir(path.join(src, 'for you', 'inside'), { recursive: true });
      await writeFile(path.join(src, 'for you', 'inside', 'for-you.txt'), 'for you\n');
      await page.setInputFiles('[data-testid=upload-folder-input]', path.join(src, 'for you'));
      const done = await uploadsFinished(page, 1, 30_000);
      assert(done[0]?.state === 'done', `not added: ${JSON.stringify(done[0])}`);
      // In the link's own folder, apart from the sharer's files.
      assert((await readFile(path.join(dir, 'Send me files (dropped files)', 'for you', 'inside', 'for-you.txt'), 'utf8')) === 'for you\n', 'the picked folder did not land with its structure in the drop link\'s own folder');
      assert(!(await readdir(dir)).includes('for you'), 'the drop landed beside the sharer\'s files');
      const after = (await page.textContent('body')) ?? '';
      assert(!after.includes('already-here.txt'), 'after the upload, the drop link showed the sharer\'s files');
    },
  },
  {
    // Chromium throws from RTCDataChannel.send when the channel's send queue is full
    // (an OperationError). The page used to swallow that, the chunk was never sent, and
    // the sharer waited on the gap for good: the upload stopped. The refusal is made
    // here by wrapping the page's RTCDataChannel.send (the one fault injected in this
    // suite): one upload chunk, once, as the browser would.
    name: 'e: a chunk the browser refuses to send ends the link; the upload goes on over a new one and lands whole',
    timeoutMs: 180_000,
    async run(t) {
      const { dir } = await shared(t, 'refused');
      const link = addLink(dir, ['--allow-upload']);
      const file = await bigFile(192 << 20, 'refused');
      t.defer(() => rm(path.dirname(file), { recursive: true, force: true }));
      const { chromium, page } = await browser(t, 'refused');
      await page.addInitScript(() => {
        const w = window as unknown as { linkfsRefuseASend?: () => void; linkfsRefused?: number };
        const send = RTCDataChannel.prototype.send as (this: RTCDataChannel, data: unknown) => void;
        let refuse = false;
        w.linkfsRefused = 0;
        w.linkfsRefuseASend = () => {
          refuse = true;
        };
        RTCDataChannel.prototype.send = function (this: RTCDataChannel, data: unknown): void {
          // An upload chunk frame starts with 0x41 and is large.
          if (refuse && ArrayBuffer.isView(data) && data.byteLength > 16_384 && new Uint8Array(data.buffer, data.byteOffset, 1)[0] === 0x41) {
            refuse = false;
            w.linkfsRefused = (w.linkfsRefused ?? 0) + 1;
            throw new DOMException("Failed to execute 'send' on 'RTCDataChannel': RTCDataChannel send queue is full", 'OperationError');
          }
          send.call(this, data);
        } as typeof RTCDataChannel.prototype.send;
      });
      await openLink(page, link, ['connected']);
      await page.waitForSelector('[data-testid=add-files]', { state: 'visible', timeout: 20_000 });
      await page.setInputFiles('[data-testid=upload-files-input]', file);
      await untilPartBytes(dir, 32 << 20, 'the upload did not start');
      await page.evaluate(() => (window as unknown as { linkfsRefuseASend: () => void }).linkfsRefuseASend());
      const done = await uploadsFinished(page, 1, 120_000).catch(async (error: unknown) => {
        throw new Error(`the upload did not finish after the refused send (the sharer holds ${((await partBytes(dir)) / 1048576).toFixed(0)} MiB): ${String(error)}`);
      });
      const refused = await page.evaluate(() => (window as unknown as { linkfsRefused: number }).linkfsRefused);
      assert(refused === 1, `the browser was to refuse one send, and refused ${refused}`);
      assert(done[0]?.state === 'done', `not added: ${JSON.stringify(done[0])}`);
      assert(sha256File(path.join(dir, 'refused.bin')) === sha256File(file), 'the file on the sharer\'s disk has other bytes');
      assert(chromium.pageErrors.length === 0, `uncaught errors in the page:\n  ${chromium.pageErrors.join('\n  ')}`);
      log(`    one send refused at 32 MiB or later; the upload went on over a new link and landed whole`);
    },
  },
];

await runSuite('uploads', tests);

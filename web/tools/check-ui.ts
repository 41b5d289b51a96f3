// Behaviour checks of the web UI over the development fake share (not the e2e suite,
// which runs against a real sharer): navigation and history, keyboard, sorting,
// symlinks, live changes, preview, downloads with cancel, and the test hooks.
//
//   npx vite build --mode fake && npx tsx web/tools/check-ui.ts
//
// Prints one line per check and exits non-zero if any failed.

import { chromium, type Page } from 'playwright-core';
import { serveDirectory } from './static-server';

/** Where `vite build --mode fake` puts the UI built over the development fake. */
const FAKE_BUILD = 'target/web-fake';

const FLAGS = [
  '--no-sandbox', '--headless', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
const KEY = 'dev-instant.CheckSecret';

type Check = [name: string, run: (page: Page, origin: string) => Promise<void>];

function expect(condition: boolean, message: string): void {
  if (!condition) throw new Error(message);
}

/** Names of the rows in DOM order, as the e2e suite reads them. */
const rowNames = (page: Page): Promise<string[]> =>
  page.$$eval('[data-testid="row"]', (rows) => rows.map((row) => (row as HTMLElement).dataset.name ?? ''));

/** Fails unless every row is visible and the DOM order is the index order. */
async function expectRowsInOrder(page: Page): Promise<void> {
  const rows = await page.$$eval('[data-testid="row"]', (els) =>
    els.map((el) => ({ index: Number((el as HTMLElement).dataset.index), hidden: (el as HTMLElement).hidden })),
  );
  expect(rows.every((row) => !row.hidden), 'a hidden element is marked as a row');
  expect(rows.every((row, i) => i === 0 || row.index === (rows[i - 1]?.index ?? 0) + 1), `DOM order ${rows.map((r) => r.index).join(',')}`);
}

const checks: Check[] = [
  ['hooks: linkfsShare, body state, status text', async (page, origin) => {
    await page.goto(`${origin}/#${KEY}`);
    await page.waitForFunction(() => 'linkfsShare' in window && document.body.dataset.state === 'connected');
    const status = await page.textContent('[data-testid="status"]');
    expect((status ?? '').includes('Connected'), `status text: ${status}`);
    const title = await page.title();
    expect(title.startsWith('linkfs demo'), `title: ${title}`);
  }],
  ['index progress says the count once complete', async (page) => {
    const text = await page.textContent('[data-testid="index-progress"]');
    expect(/^[\d,]+ entries$/.test(text ?? ''), `progress: ${text}`);
  }],
  ['directories first, sorted by name', async (page) => {
    await page.waitForSelector('[data-testid="row"]');
    const names = await rowNames(page);
    expect(names[0] === 'big folder (100k)' && names.at(-1) === 'outside', `rows: ${names.join(', ')}`);
  }],
  ['symlink shows its target and does not open', async (page) => {
    const text = await page.textContent('[data-testid="row"][data-name="outside"]');
    expect((text ?? '').includes('→ /etc/passwd'), `symlink row: ${text}`);
    await page.click('[data-testid="row"][data-name="outside"]');
    await page.waitForTimeout(200);
    expect(await page.isHidden('[data-testid="preview"]'), 'preview opened for a symlink');
    expect(!(await page.evaluate(() => location.hash.includes('outside'))), 'navigated into a symlink');
  }],
  ['click a folder: fragment path, breadcrumbs with ids', async (page) => {
    await page.click('[data-testid="row"][data-name="Ünïcödé & spaces #1 %20?"]');
    await page.waitForSelector('[data-testid="row"][data-name="日本語のファイル.txt"]');
    await page.waitForSelector('[data-testid="listing"][data-loading="false"]');
    const inFolder = await rowNames(page);
    expect(inFolder.length === 2, `rows after opening a 2-entry folder: ${inFolder.join(', ')}`);
    const hash = await page.evaluate(() => location.hash);
    expect(hash === `#${KEY}/${encodeURIComponent('Ünïcödé & spaces #1 %20?')}`, `hash: ${hash}`);
    const crumbs = await page.$$eval('[data-testid="breadcrumb"]', (links) => links.map((l) => `${(l as HTMLElement).dataset.id}:${l.textContent}`));
    expect(crumbs.length === 2 && crumbs[0]?.startsWith('0:') === true, `crumbs: ${crumbs.join(' | ')}`);
  }],
  ['back and forward', async (page) => {
    await page.goBack();
    await page.waitForSelector('[data-testid="row"][data-name="docs"]');
    await page.goForward();
    await page.waitForSelector('[data-testid="row"][data-name="日本語のファイル.txt"]');
  }],
  ['keyboard: Backspace up, arrows and Enter open', async (page) => {
    await page.focus('.listing-grid');
    await page.keyboard.press('Backspace');
    await page.waitForSelector('[data-testid="row"][data-name="docs"]');
    await page.focus('.listing-grid');
    await page.keyboard.press('Home');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Enter'); // third row: docs
    await page.waitForSelector('[data-testid="row"][data-name="README.md"]');
    const active = await page.getAttribute('.listing-grid', 'aria-activedescendant');
    expect(active !== null, 'no active row');
  }],
  ['aria-sort and descending size order, directories still first', async (page, origin) => {
    await page.goto(`${origin}/#${KEY}/docs`);
    await page.waitForSelector('[data-testid="row"][data-name="README.md"]');
    await page.click('[data-testid="sort-size"]');
    await page.click('[data-testid="sort-size"]');
    await page.waitForFunction(() => document.querySelector('[data-testid="sort-size"]')?.getAttribute('aria-sort') === 'descending');
    await page.waitForFunction(() => document.querySelector<HTMLElement>('[data-testid="row"][data-index="0"]')?.dataset.name === 'archive.zip');
    expect(await page.getAttribute('[data-testid="sort-name"]', 'aria-sort') === 'none', 'name header still sorted');
    await page.click('[data-testid="sort-name"]');
    await page.waitForFunction(() => document.querySelector('[data-testid="sort-name"]')?.getAttribute('aria-sort') === 'ascending');
  }],
  ['text preview, Escape closes', async (page) => {
    await page.waitForSelector('[data-testid="listing"][data-loading="false"]');
    await page.click('[data-testid="row"][data-name="notes.txt"]');
    await page.waitForSelector('[data-testid="preview"][data-state="shown"][data-kind="text"]');
    const text = await page.textContent('.preview-text');
    expect((text ?? '').includes('strawberries'), `preview text: ${text}`);
    await page.keyboard.press('Escape');
    await page.waitForSelector('[data-testid="preview"]', { state: 'hidden' });
  }],
  ['unnamed small UTF-8 file previews as text; binary offers download', async (page) => {
    await page.click('[data-testid="row"][data-name="unnamed-text"]');
    await page.waitForSelector('[data-testid="preview"][data-kind="text"]');
    await page.click('[data-testid="row"][data-name="unnamed-binary"]');
    await page.waitForSelector('[data-testid="preview"][data-state="no-preview"]');
  }],
  ['text over 1 MiB offers a download instead', async (page) => {
    await page.click('[data-testid="row"][data-name="server.log"]');
    await page.waitForSelector('[data-testid="preview"][data-state="no-preview"]');
    const text = await page.textContent('[data-testid="preview"]');
    expect((text ?? '').includes('up to 1.0 MiB'), `preview: ${text}`);
    await page.click('.preview-close');
  }],
  ['download: cancel, then retry to done', async (page) => {
    await page.click('[data-testid="row"][data-name="archive.zip"]');
    await page.waitForSelector('[data-testid="download"][data-name="archive.zip"][data-state="running"]');
    await page.click('[data-testid="download"][data-name="archive.zip"] .download-cancel');
    await page.waitForSelector('[data-testid="download"][data-name="archive.zip"][data-state="cancelled"]');
    const saved = page.waitForEvent('download');
    await page.click('[data-testid="download"][data-name="archive.zip"] .download-retry');
    await page.waitForSelector('[data-testid="download"][data-name="archive.zip"][data-state="done"]', { timeout: 20_000 });
    expect((await saved).suggestedFilename() === 'archive.zip', 'saved name');
  }],
  ['image preview (SVG through <img>)', async (page, origin) => {
    await page.goto(`${origin}/#${KEY}/photos/2024`);
    await page.click('[data-testid="row"][data-name="logo.svg"]');
    await page.waitForSelector('[data-testid="preview"][data-state="shown"][data-kind="image"]');
    await page.click('[data-testid="row"][data-name="broken.png"]');
    await page.waitForSelector('[data-testid="preview"][data-state="failed"]');
  }],
  ['a live change re-lists the shown folder', async (page, origin) => {
    await page.goto(`${origin}/#${KEY}/live`);
    await page.waitForSelector('[data-testid="row"][data-name="about.txt"]');
    await page.waitForSelector('[data-testid="row"][data-name="tick-001.txt"]', { timeout: 10_000 });
  }],
  ['filter the 100k folder by name', async (page, origin) => {
    await page.goto(`${origin}/#${KEY}/${encodeURIComponent('big folder (100k)')}`);
    await page.waitForSelector('[data-testid="row"]');
    await page.fill('[data-testid="filter"]', 'report-04242');
    await page.waitForFunction(() => / of 100,000 items$/.test(document.querySelector('.folder-count')?.textContent ?? ''));
    const names = await rowNames(page);
    const count = await page.textContent('.folder-count');
    expect(names.length > 0 && names.every((n) => n.startsWith('report-04242')), `filtered: ${names.join(', ')}`);
    expect(count === `${names.length} ${names.length === 1 ? 'match' : 'matches'} of 100,000 items`, `count: ${count}`);
  }],
  ['scrolled deep into the 100k folder, rows carry their data', async (page) => {
    await page.fill('[data-testid="filter"]', '');
    await page.waitForFunction(() => document.querySelector('.folder-count')?.textContent === '100,000 items');
    await page.$eval('.listing-viewport', (viewport) => { viewport.scrollTop = viewport.scrollHeight; });
    await page.waitForSelector('[data-testid="row"][data-index="99999"]');
    await page.waitForSelector('[data-testid="listing"][data-loading="false"]');
    expect(await page.locator('.row-pending').count() === 0, 'pending rows after settling');
    await expectRowsInOrder(page);
    await page.$eval('.listing-viewport', (viewport) => { viewport.scrollTop -= 700; });
    await page.waitForTimeout(300);
    await expectRowsInOrder(page);
    await page.$eval('.listing-viewport', (viewport) => { viewport.scrollTop = 1_500_000; });
    await page.waitForSelector('[data-testid="listing"][data-loading="false"]');
    await expectRowsInOrder(page);
  }],
  ['folder not in the share', async (page, origin) => {
    await page.goto(`${origin}/#${KEY}/no/such`);
    await page.waitForSelector('.notice:has-text("is not in this share")');
  }],
  ['sharer gone: banner, state, browsing continues', async (page, origin) => {
    await page.goto(`${origin}/#dev-gone.x`);
    await page.waitForFunction(() => document.body.dataset.state === 'sharer-gone', undefined, { timeout: 10_000 });
    const status = await page.textContent('[data-testid="status"]');
    expect((status ?? '').includes('The sharer went away'), `status: ${status}`);
    await page.click('[data-testid="row"][data-name="docs"]');
    await page.waitForSelector('[data-testid="row"][data-name="README.md"]');
  }],
  ['invalid link', async (page, origin) => {
    await page.goto(`${origin}/#dev-invalid.x`);
    await page.waitForFunction(() => document.body.dataset.state === 'invalid-link');
  }],
  ['no key in the address', async (page, origin) => {
    await page.goto(`${origin}/`);
    await page.waitForFunction(() => document.body.dataset.state === 'invalid-link');
  }],
];

async function main(): Promise<void> {
  const server = await serveDirectory(FAKE_BUILD);
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: FLAGS });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
  await context.addInitScript('globalThis.__name = (fn) => fn;');
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  let failed = 0;
  try {
    for (const [name, run] of checks) {
      try {
        await run(page, server.origin);
        console.log(`ok    ${name}`);
      } catch (error) {
        failed += 1;
        console.log(`FAIL  ${name}: ${error instanceof Error ? error.message.split('\n').slice(0, 3).join(' ') : String(error)}`);
      }
    }
    for (const error of errors) {
      failed += 1;
      console.log(`FAIL  page error: ${error}`);
    }
  } finally {
    await browser.close();
    await server.close();
  }
  process.exitCode = failed === 0 ? 0 : 1;
}

void main();

// Measures the web UI over the development fake share and takes screenshots.
//
//   npx vite build --mode fake && npx tsx web/tools/measure-ui.ts [screenshot-dir]
//
// Prints JSON figures: time from navigation to the first screen of the 100k
// directory, rAF frame times while scrolling it (steady and jumping), sort time, the
// longest main-thread task, plus checks that the page sent no request carrying the
// share key and hit no CSP violation. Chromium is the system one (/usr/bin/chromium).

import { mkdir } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContextOptions, type Page } from 'playwright-core';
import { serveDirectory, type StaticServer } from './static-server';

/** Where `vite build --mode fake` puts the UI built over the development fake. */
const FAKE_BUILD = 'target/web-fake';

const FLAGS = [
  '--no-sandbox', '--headless', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
const SECRET = 'S3cr3tKeyNeverSent';
const BIG = 'big%20folder%20(100k)';

interface FrameStats {
  frames: number;
  medianMs: number;
  p95Ms: number;
  maxMs: number;
  over50Ms: number;
  framesWithPendingRows: number;
  /** Main-thread work per frame, from Chromium's own counters (CDP Performance.getMetrics). */
  perFrame?: { scriptMs: number; styleMs: number; layoutMs: number; taskMs: number };
}

declare global {
  interface Window {
    measureLongTasks?: number[];
    measureCsp?: string[];
  }
}

async function main(): Promise<void> {
  const shots = process.argv[2] ?? '/tmp/linkfs-ui-shots';
  await mkdir(shots, { recursive: true });
  const server = await serveDirectory(FAKE_BUILD);
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: FLAGS });
  const problems: string[] = [];
  try {
    const figures = await measure(browser, server, shots, problems);
    const leaked = server.requests.filter((url) => url.includes(SECRET) || url.includes('?'));
    if (leaked.length > 0) problems.push(`requests carrying the key or a query: ${leaked.join(', ')}`);
    const load = loadavg().map((n) => Math.round(n * 10) / 10);
    console.log(JSON.stringify({ loadAverage: load, ...figures, requests: server.requests.length, problems }, null, 2));
  } finally {
    await browser.close();
    await server.close();
  }
}

async function openPage(browser: Browser, problems: string[], options: BrowserContextOptions = {}): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true, ...options });
  // tsx compiles with keepNames, which wraps functions passed to evaluate in __name().
  await context.addInitScript('globalThis.__name = (fn) => fn;');
  await context.addInitScript(() => {
    window.measureLongTasks = [];
    window.measureCsp = [];
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) window.measureLongTasks?.push(entry.duration);
    }).observe({ type: 'longtask', buffered: true });
    document.addEventListener('securitypolicyviolation', (event) => {
      window.measureCsp?.push(`${event.violatedDirective} ${event.blockedURI}`);
    });
  });
  const page = await context.newPage();
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
  });
  return page;
}

async function collectPageProblems(page: Page, problems: string[]): Promise<number> {
  const { longTasks, csp } = await page.evaluate(() => ({ longTasks: window.measureLongTasks ?? [], csp: window.measureCsp ?? [] }));
  for (const violation of csp) problems.push(`CSP violation: ${violation}`);
  return Math.max(0, ...longTasks);
}

async function firstScreen(page: Page): Promise<void> {
  await page.waitForFunction(
    () => document.querySelectorAll('[data-testid="row"]').length >= 15 && (document.querySelector('.folder-count')?.textContent ?? '').startsWith('100,000'),
    undefined,
    { polling: 'raf', timeout: 30_000 },
  );
}

async function measure(browser: Browser, server: StaticServer, shots: string, problems: string[]): Promise<Record<string, unknown>> {
  const origin = server.origin;
  const figures: Record<string, unknown> = {};

  // 1. The whole index present at once: the UI's own cost.
  const page = await openPage(browser, problems);
  await page.goto(`${origin}/#dev-instant.${SECRET}/${BIG}`);
  await firstScreen(page);
  figures.firstScreen100kMs = Math.round(await page.evaluate(() => performance.now()));
  // What the development fake itself spent (generating the tree, sorting): not UI work.
  figures.fakeShareWork = await page.evaluate(() =>
    performance.getEntriesByType('measure').map((m) => `${m.name}: ${Math.round(m.duration)} ms`),
  );
  await page.screenshot({ path: join(shots, '01-big-folder.png') });

  figures.scrollSteady = await scrollFrames(page, 'steady');
  figures.scrollJumping = await scrollFrames(page, 'jump');
  await page.waitForTimeout(300);
  await page.screenshot({ path: join(shots, '02-big-folder-scrolled.png') });

  const sortStart = Date.now();
  await page.click('[data-testid="sort-size"]');
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll<HTMLElement>('[data-testid="row"]')];
    return document.querySelector('[data-testid="sort-size"]')?.getAttribute('aria-sort') === 'ascending' && rows.length > 10 && rows[0]?.dataset.kind === 'dir';
  }, undefined, { polling: 'raf' });
  figures.sortBySize100kMs = Date.now() - sortStart;
  await page.click('[data-testid="sort-size"]');
  await page.waitForFunction(() => document.querySelector('[data-testid="sort-size"]')?.getAttribute('aria-sort') === 'descending', undefined, { polling: 'raf' });
  await page.waitForTimeout(200);
  await page.screenshot({ path: join(shots, '03-big-folder-by-size-desc.png') });
  const filterStart = Date.now();
  await page.fill('[data-testid="filter"]', '4242');
  await page.waitForFunction(() => / of 100,000 items$/.test(document.querySelector('.folder-count')?.textContent ?? ''), undefined, { polling: 'raf' });
  figures.filter100kMs = Date.now() - filterStart - 200; // minus the typing pause
  figures.filterMatches = await page.locator('.folder-count').textContent();
  await page.screenshot({ path: join(shots, '03b-big-folder-filtered.png') });
  await page.fill('[data-testid="filter"]', '');
  figures.longestTaskMs = Math.round(await collectPageProblems(page, problems));
  figures.fakeShareWork = await page.evaluate(() =>
    performance.getEntriesByType('measure').map((m) => `${m.name}: ${Math.round(m.duration)} ms`),
  );

  // 2. The root, a preview of an image and of text, a download.
  await page.goto(`${origin}/#dev-instant.${SECRET}`);
  await page.waitForSelector('[data-testid="row"][data-name="photos"]');
  await page.waitForTimeout(200);
  await page.screenshot({ path: join(shots, '04-root.png') });
  await page.click('[data-testid="row"][data-name="photos"]');
  await page.click('[data-testid="row"][data-name="2024"]');
  await page.click('[data-testid="row"][data-name="sunset.png"]');
  await page.waitForSelector('[data-testid="preview"][data-state="shown"]');
  await page.screenshot({ path: join(shots, '05-preview-image.png') });
  await page.goBack();
  await page.goBack();
  await page.waitForSelector('[data-testid="row"][data-name="docs"]');
  await page.click('[data-testid="row"][data-name="docs"]');
  await page.click('[data-testid="row"][data-name="README.md"]');
  await page.waitForSelector('[data-testid="preview"][data-state="shown"]');
  await page.screenshot({ path: join(shots, '06-preview-text.png') });
  await page.keyboard.press('Escape');
  const downloadEvent = page.waitForEvent('download');
  await page.click('[data-testid="row"][data-name="archive.zip"]');
  await page.click('[data-testid="row"][data-name="server.log"] [data-testid="row-download"]');
  await page.waitForTimeout(150);
  await page.screenshot({ path: join(shots, '07-downloads-running.png') });
  const started = Date.now();
  await page.waitForSelector('[data-testid="download"][data-name="archive.zip"][data-state="done"]', { timeout: 30_000 });
  figures.download24MiBMs = Date.now() - started;
  const download = await downloadEvent;
  figures.downloadSuggestedName = download.suggestedFilename();
  await page.click('[data-testid="row"][data-name="vanishing.txt"] [data-testid="row-download"]');
  await page.waitForSelector('[data-testid="download"][data-name="vanishing.txt"][data-state="failed"]');
  await page.screenshot({ path: join(shots, '08-downloads-done-failed.png') });
  await collectPageProblems(page, problems);
  await page.context().close();

  // 3. The index filling, from the cache, the sharer gone, a bad link, no key.
  const filling = await openPage(browser, problems);
  await filling.goto(`${origin}/#dev-slow.${SECRET}/${BIG}`);
  await filling.waitForSelector('[data-testid="row"]', { timeout: 30_000 });
  await filling.waitForTimeout(1500);
  await filling.screenshot({ path: join(shots, '09-indexing.png') });
  figures.longestTaskWhileFillingMs = Math.round(await collectPageProblems(filling, problems));
  await filling.context().close();

  for (const [room, file, wait] of [
    ['dev-cached', '10-from-cache.png', 1200],
    ['dev-gone', '11-sharer-gone.png', 3500],
    ['dev-invalid', '12-invalid-link.png', 800],
    ['dev-reject', '13-open-failed.png', 500],
  ] as const) {
    const other = await openPage(browser, problems);
    await other.goto(`${origin}/#${room}.${SECRET}`);
    await other.waitForTimeout(wait);
    await other.screenshot({ path: join(shots, file) });
    await collectPageProblems(other, problems);
    await other.context().close();
  }
  const noKey = await openPage(browser, problems);
  await noKey.goto(`${origin}/`);
  await noKey.waitForTimeout(300);
  await noKey.screenshot({ path: join(shots, '14-no-key.png') });
  await noKey.goto(`${origin}/#dev-instant.${SECRET}/no/such/folder`);
  await noKey.waitForTimeout(500);
  await noKey.screenshot({ path: join(shots, '15-not-found.png') });
  await noKey.context().close();

  // 4. Narrow and dark.
  const narrow = await openPage(browser, problems, { viewport: { width: 420, height: 760 } });
  await narrow.goto(`${origin}/#dev-instant.${SECRET}/docs`);
  await narrow.waitForSelector('[data-testid="row"]');
  await narrow.waitForTimeout(200);
  await narrow.screenshot({ path: join(shots, '16-narrow.png') });
  await narrow.context().close();
  const dark = await openPage(browser, problems, { colorScheme: 'dark' });
  await dark.goto(`${origin}/#dev-instant.${SECRET}/photos/2024`);
  await dark.waitForSelector('[data-testid="row"]');
  await dark.click('[data-testid="row"][data-name="logo.svg"]');
  await dark.waitForSelector('[data-testid="preview"][data-state="shown"]');
  await dark.screenshot({ path: join(shots, '17-dark.png') });
  await dark.context().close();
  return figures;
}

/** Scrolls the listing every frame for 3 s and reports the frame times. */
async function scrollFrames(page: Page, mode: 'steady' | 'jump'): Promise<FrameStats> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  const metrics = async (): Promise<Map<string, number>> =>
    new Map((await cdp.send('Performance.getMetrics')).metrics.map((m) => [m.name, m.value]));
  const before = await metrics();
  const stats = await page.evaluate(async (jump) => {
    const viewport = document.querySelector<HTMLElement>('.listing-viewport');
    if (!viewport) throw new Error('no listing');
    const deltas: number[] = [];
    let pending = 0;
    let seed = 12345;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    await new Promise<void>((done) => {
      const start = performance.now();
      let last = start;
      const step = (now: number): void => {
        deltas.push(now - last);
        last = now;
        if (document.querySelector('.listing-viewport .row-pending')) pending += 1;
        if (jump) viewport.scrollTop = random() * (viewport.scrollHeight - viewport.clientHeight);
        else viewport.scrollTop += 540;
        if (now - start < 3000) requestAnimationFrame(step);
        else done();
      };
      requestAnimationFrame(step);
    });
    deltas.shift();
    const sorted = [...deltas].sort((a, b) => a - b);
    const at = (q: number): number => Math.round((sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0) * 10) / 10;
    return {
      frames: deltas.length,
      medianMs: at(0.5),
      p95Ms: at(0.95),
      maxMs: at(1),
      over50Ms: deltas.filter((d) => d > 50).length,
      framesWithPendingRows: pending,
    };
  }, mode === 'jump');
  const after = await metrics();
  const perFrame = (name: string): number =>
    Math.round((((after.get(name) ?? 0) - (before.get(name) ?? 0)) * 1000 * 100) / Math.max(1, stats.frames)) / 100;
  await cdp.detach();
  return {
    ...stats,
    perFrame: {
      scriptMs: perFrame('ScriptDuration'),
      styleMs: perFrame('RecalcStyleDuration'),
      layoutMs: perFrame('LayoutDuration'),
      taskMs: perFrame('TaskDuration'),
    },
  };
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});

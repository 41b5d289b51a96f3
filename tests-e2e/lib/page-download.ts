// Downloads through the page exactly as a user's click does: open the folder, click
// the row's download button (a folder's gives a ZIP; `''` with zip downloads the
// whole share from the toolbar), let the browser's download manager write the file,
// and measure the browser's memory while it runs.

import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { rename, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Download, Locator, Page } from 'playwright-core';
import { MemorySampler } from './browser-memory.ts';

export interface PageDownloadOptions {
  /** Share-relative path of a file, or of a folder ('' = the whole share) saved as a ZIP. */
  target: string;
  /** Where the finished file goes. */
  out: string;
  /** Gives up after this long. Default 30 min. */
  timeoutMs?: number;
  /** Called every second with the page's progress of the download (bytes). */
  onTick?: (sent: number, total: number) => void;
  log?: (line: string) => void;
  /** The browser's main process, for the renderer RSS cross-check. */
  browserPid?: number | null;
  /** Click this instead of the target's own download button (e.g. the selection's). */
  button?: string;
}

export interface PageDownloadResult {
  bytes: number;
  seconds: number;
  mb_per_s: number;
  sha256: string;
  /** Highest memory sum (see browser-memory.ts) during the download. */
  browser_peak_bytes: number;
  /** That peak minus the same sum just before the click. */
  browser_growth_bytes: number;
  /** Cross-check: the highest RSS of all the browser's renderer processes, minus before the click. */
  renderer_rss_growth_bytes: number;
  /** How the page saved it (`service-worker`, `file-picker`, `memory`). */
  route: string;
  /** A ZIP's member count and changed names, from the page. */
  zip_files: number | null;
  zip_notes: number | null;
}

/** The SHA-256 of a file, streamed. */
export async function sha256Of(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file, { highWaterMark: 4 << 20 })) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Opens the folder `dir` (share-relative) in the page and waits for its listing. */
export async function openFolder(page: Page, dir: string): Promise<void> {
  const key = await page.evaluate(() => window.location.hash.slice(1).split('/')[0] ?? '');
  const segments = dir === '' ? [] : dir.split('/').map(encodeURIComponent);
  await page.evaluate((hash) => {
    window.location.hash = hash;
  }, [key, ...segments].join('/'));
}

/**
 * Clicks a row's button. Seen once under load (lan.ts b, 1 run in many): the row was
 * there but not visible for 30 s, the listing having re-rendered around it; so a click
 * that does not land within 15 s brings the row into view and tries once more.
 */
async function clickRow(button: Locator): Promise<void> {
  try {
    await button.click({ timeout: 15_000 });
  } catch {
    await button.evaluate((e) => e.scrollIntoView({ block: 'center' })).catch(() => undefined);
    await button.click({ timeout: 15_000, force: true });
  }
}

export async function downloadThroughPage(page: Page, options: PageDownloadOptions): Promise<PageDownloadResult> {
  const log = options.log ?? (() => undefined);
  const timeoutMs = options.timeoutMs ?? 30 * 60_000;
  const target = options.target.replace(/^\/+|\/+$/g, '');
  const entry = await page.evaluate((p) => window.linkfsShare!.lookup(p), target);
  if (entry === null) throw new Error(`${target || '(the share)'} is not in the share's index`);
  const parent = target.includes('/') ? target.slice(0, target.lastIndexOf('/')) : '';
  const button = options.button
    ? page.locator(options.button)
    : target === ''
      ? page.locator('[data-testid=folder-download]')
      : page.locator(`[data-testid=row][data-id="${entry.id}"] [data-testid=row-download]`);
  if (!options.button) await openFolder(page, target === '' ? '' : parent);
  if (target !== '' && !options.button) {
    // Bring the row into view (the listing renders only visible rows).
    const deadline = Date.now() + 30_000;
    while ((await button.count()) === 0) {
      if (Date.now() > deadline) throw new Error(`the row of ${target} did not appear in its folder's listing`);
      await page.evaluate((name) => {
        const filter = document.querySelector<HTMLInputElement>('[data-testid=filter]');
        if (filter && filter.value !== name) {
          filter.value = name;
          filter.dispatchEvent(new Event('input', { bubbles: true }));
        }
      }, entry.name);
      await page.waitForTimeout(100);
    }
  }
  // Wait for the service worker: the first click after opening must not fall back.
  await page.evaluate(() => navigator.serviceWorker?.ready.then(() => undefined));

  const sampler = await MemorySampler.attach(page, options.browserPid ?? null);
  const first = await sampler.sample(true);
  const before = first.total;
  let peak = before;
  let rssPeak = first.rendererRss;
  // Worker heaps are read before and after only (see browser-memory.ts); in between
  // the last value read stands in.
  let workerHeap = first.workerHeap;
  let sampling = true;
  const samples = (async () => {
    while (sampling) {
      const m = await sampler.sample(false, true).catch(() => null);
      if (m) {
        peak = Math.max(peak, m.total + workerHeap);
        rssPeak = Math.max(rssPeak, m.rendererRss);
      }
      const progress = await page
        .evaluate(() => {
          const item = document.querySelector<HTMLElement>('[data-testid=download]');
          const bar = item?.querySelector('progress');
          return bar ? { sent: bar.value, total: bar.max } : null;
        })
        .catch(() => null);
      if (progress) options.onTick?.(progress.sent, progress.total);
      await new Promise((r) => setTimeout(r, 1000));
    }
  })();

  const t0 = performance.now();
  let download: Download;
  try {
    // Through the service worker the browser's download starts at once; from a
    // plain-http page (no service worker) only once the page holds the whole file.
    const started = page.waitForEvent('download', { timeout: timeoutMs });
    started.catch(() => undefined); // the race below may end first
    const items = page.locator('[data-testid=download]');
    await items.evaluateAll((els) => els.forEach((e) => ((e as HTMLElement).dataset.seenByTest = '1')));
    await clickRow(button.first());
    // The click must add the download to the panel (a click that landed while the
    // listing re-rendered selects the row instead): once more, then say so.
    if (!(await newItem(page, 10_000))) {
      log('download: the click added nothing to the downloads panel; clicking again');
      await clickRow(button.first());
      if (!(await newItem(page, 50_000))) throw new Error(`clicking the download button of ${target || 'the share'} added nothing to the downloads panel`);
    }
    const item = page.locator('[data-testid=download]:not([data-seen-by-test])').first();
    const said = async (): Promise<string> => ((await item.count()) > 0 ? `${await item.getAttribute('data-state')}: ${await item.textContent()}` : 'no download in the panel');
    let waiting = true;
    const pageFailed = (async (): Promise<never> => {
      while (waiting) {
        await new Promise((r) => setTimeout(r, 500));
        const state = await item.getAttribute('data-state', { timeout: 1_000 }).catch(() => null);
        if (waiting && (state === 'failed' || state === 'cancelled')) throw new Error(`the browser started no download: the page's ${await said()}`);
      }
      return new Promise<never>(() => undefined);
    })();
    download = await Promise.race([
      started.catch(async (e: unknown) => {
        throw new Error(`the browser started no download (${await said()}): ${(e as Error).message.split('\n')[0]}`);
      }),
      pageFailed,
    ]).finally(() => {
      waiting = false;
    });
    log(`download: the browser is saving ${download.suggestedFilename()}`);
    const failure = await Promise.race([
      download.failure(),
      new Promise<string>((resolve) => setTimeout(() => resolve(`did not finish within ${timeoutMs / 1000} s`), timeoutMs)),
    ]);
    if (failure !== null) {
      const item = page.locator('[data-testid=download]:not([data-seen-by-test])').first();
      const said = await item.textContent().catch(() => null);
      throw new Error(`the browser's download failed: ${failure}${said ? ` (the page says: ${said})` : ''}`);
    }
  } finally {
    sampling = false;
    await samples;
    const last = await sampler.sample(false, true).catch(() => null);
    if (last) {
      workerHeap = Math.max(workerHeap, last.workerHeap);
      peak = Math.max(peak, last.total);
      rssPeak = Math.max(rssPeak, last.rendererRss);
    }
    await sampler.detach();
  }
  const seconds = (performance.now() - t0) / 1000;
  const saved = await download.path();
  await rename(saved, options.out);
  const bytes = (await stat(options.out)).size;
  const item = page.locator('[data-testid=download]:not([data-seen-by-test])').first();
  const route = (await item.getAttribute('data-route')) ?? 'unknown';
  const files = await item.getAttribute('data-files');
  const notes = await item.getAttribute('data-notes');
  log(`download: ${bytes} bytes in ${seconds.toFixed(2)} s; hashing ${path.basename(options.out)}`);
  return {
    bytes,
    seconds: Math.round(seconds * 1000) / 1000,
    mb_per_s: Math.round((bytes / 1e6 / seconds) * 10) / 10,
    sha256: await sha256Of(options.out),
    browser_peak_bytes: peak,
    browser_growth_bytes: peak - before,
    renderer_rss_growth_bytes: rssPeak - first.rendererRss,
    route,
    zip_files: files === null ? null : Number(files),
    zip_notes: notes === null ? null : Number(notes),
  };
}

/** Whether the downloads panel shows an item the test has not marked as seen, within `ms`. */
async function newItem(page: Page, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if ((await page.locator('[data-testid=download]:not([data-seen-by-test])').count()) > 0) return true;
    await page.waitForTimeout(100);
  }
  return false;
}

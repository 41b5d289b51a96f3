// Actions on the share's page that both browsers' tests take the same way (Playwright
// drives Chromium, puppeteer Firefox): open a file's row, save a file or a ZIP through
// Firefox's download manager, play a video and seek in it.

import type { Page as PuppeteerPage } from 'puppeteer-core';
import * as firefox from './firefox.ts';
import { assert, type TestContext } from './runner.ts';

/** A Firefox ESR for one test: closed after it, a screenshot and its status logged if it fails. */
export async function firefoxBrowser(t: TestContext, name: string, log: (line: string) => void): Promise<{ fx: firefox.FirefoxInstance; page: PuppeteerPage }> {
  const fx = await firefox.launchFirefox({ name, log });
  t.defer(() => fx.close());
  const page = await fx.page();
  t.onFailure(async () => {
    const file = await firefox.screenshot(page, `${t.name}-${name}`);
    if (file !== null) log(`    screenshot of ${name}: ${file}`);
    log(`    ${name} status ${JSON.stringify(await firefox.statusText(page).catch(() => ''))}`);
  });
  return { fx, page };
}

/** What both browsers' pages offer here (Playwright's and puppeteer's). */
export interface AnyPage {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the two libraries type evaluate differently
  evaluate(fn: (arg: any) => unknown, arg: any): Promise<any>;
}

/** Clicks a file's row (opens the preview) in its folder; `click(selector)` clicks in either browser. */
export async function openRow(page: AnyPage, relPath: string, click: (selector: string) => Promise<void>): Promise<void> {
  const entry = await page.evaluate((p: string) => window.linkfsShare!.lookup(p), relPath);
  assert(entry !== null, `${relPath} is not in the index`);
  const dir = relPath.includes('/') ? relPath.slice(0, relPath.lastIndexOf('/')) : '';
  await page.evaluate((d: string) => {
    const key = window.location.hash.slice(1).split('/')[0] ?? '';
    window.location.hash = [key, ...(d === '' ? [] : d.split('/').map(encodeURIComponent))].join('/');
  }, dir);
  await click(`[data-testid=row][data-id="${entry.id}"]`);
}

/** Puppeteer: waits for `selector` and clicks it. */
export function puppeteerClick(page: PuppeteerPage): (selector: string) => Promise<void> {
  return async (selector) => {
    const handle = await page.waitForSelector(selector, { timeout: 15_000 });
    assert(handle !== null, `${selector} did not appear`);
    await handle.click();
  };
}

/** Page errors Firefox raises when a media element drops a response it no longer wants after a seek (harmless). */
export function realErrors(errors: string[]): string[] {
  return errors.filter((e) => !e.includes('A ServiceWorker intercepted the request and encountered an unexpected error'));
}

/**
 * Downloads `target` (a file, or a folder as a ZIP) through the page in Firefox: the
 * row's button, the service worker, Firefox's download manager into its folder.
 */
export async function firefoxDownload(
  fx: firefox.FirefoxInstance,
  page: PuppeteerPage,
  target: string,
  fileName: string,
  onProgress?: (bytes: number) => void,
): Promise<{ file: string; seconds: number; route: string | null; files: number | null }> {
  const entry = await page.evaluate((p: string) => window.linkfsShare!.lookup(p), target);
  assert(entry !== null, `${target} is not in the index`);
  const dir = target.includes('/') ? target.slice(0, target.lastIndexOf('/')) : '';
  await page.evaluate((d: string) => {
    const key = window.location.hash.slice(1).split('/')[0] ?? '';
    window.location.hash = [key, ...(d === '' ? [] : d.split('/').map(encodeURIComponent))].join('/');
  }, dir);
  // A page with a service worker saves through it: wait for it (a plain-http page has none).
  await page.evaluate(() => navigator.serviceWorker?.ready.then(() => undefined));
  const t0 = performance.now();
  await puppeteerClick(page)(`[data-testid=row][data-id="${entry.id}"] [data-testid=row-download]`);
  // Size: a file's; a ZIP's once the page has planned it.
  let size: number | undefined = entry.kind === 'file' ? entry.size : undefined;
  if (size === undefined) {
    const deadline = Date.now() + 120_000;
    while (size === undefined) {
      const max = await page.evaluate(() => document.querySelector<HTMLProgressElement>('[data-testid=download] progress')?.max ?? 0);
      if (max > 1) size = max;
      else if (Date.now() > deadline) throw new Error('the page did not plan the ZIP within 120 s');
      else await new Promise((r) => setTimeout(r, 200));
    }
  }
  // Firefox leaves a failed download as a placeholder: the page's word ends the wait.
  let finished = false;
  const failure = (async (): Promise<never> => {
    for (;;) {
      await new Promise((r) => setTimeout(r, 500));
      if (finished) return new Promise<never>(() => undefined);
      const item = await page
        .evaluate(() => {
          const e = document.querySelector<HTMLElement>('[data-testid=download]');
          return e ? { state: e.dataset.state ?? '', text: e.textContent ?? '' } : null;
        })
        .catch(() => null);
      if (item?.state === 'failed' || item?.state === 'cancelled') throw new Error(`the page's download of ${target} ${item.state}: ${item.text}`);
    }
  })();
  const file = await Promise.race([
    firefox.waitForDownload(fx.downloadDir, fileName, { size, timeoutMs: 30 * 60_000, ...(onProgress ? { onProgress } : {}) }),
    failure,
  ]).finally(() => {
    finished = true;
  });
  const seconds = (performance.now() - t0) / 1000;
  const route = await page.evaluate(() => document.querySelector<HTMLElement>('[data-testid=download]')?.dataset.route ?? null);
  const files = await page.evaluate(() => Number(document.querySelector<HTMLElement>('[data-testid=download]')?.dataset.files ?? NaN));
  return { file, seconds, route, files: Number.isNaN(files) ? null : files };
}

export interface PlayReport {
  duration: number;
  seekMs: number;
  servedBytes: number;
  error: string | null;
}

/** Plays the open preview's player, seeks to 90 %, plays on; reports the seek and the bytes read. */
export async function playAndSeek(page: AnyPage): Promise<PlayReport> {
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
  }, undefined);
}

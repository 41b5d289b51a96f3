// The page on a phone and photos shown as photos, against a real `linkfs share` of
// ffmpeg-made photos and a video, in Chromium as a phone (390x844, touch, 3x) and in
// Firefox ESR:
// - a photo folder opens as a grid; the tiles on screen get thumbnails made from
//   the photos' embedded previews (a few KiB read each), tiles off screen none;
//   the video gets a poster;
// - reopened, the thumbnails come from the cache with nothing read;
// - reopened, the folder is drawn at once from what the page kept of it, then what
//   changed on the sharer's side meanwhile shows; damaged kept values are ignored;
// - photos without an embedded preview are decoded, and a turned photo (EXIF
//   orientation 6) stands upright in its thumbnail;
// - long-press selects, taps then add and remove;
// - the preview covers the screen and swipes to the next and previous photo; Back closes it;
// - the keyboard reaches the grid, steps through it, opens and steps the preview;
// - axe-core finds nothing serious or critical on the listing, the grid, the
//   preview and the search results (light and dark).
//
//   bash tests-e2e/run gallery [NAME_PREFIX...]

import { copyFile, readFile, rm, mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { launchChromium, openLink, screenshot, type ChromiumInstance } from './lib/chromium.ts';
import * as firefox from './lib/firefox.ts';
import { assert, runSuite, type TestCase, type TestContext } from './lib/runner.ts';
import { startShare, type ShareProcess } from './lib/share-process.ts';
import { scratchDir } from './lib/paths.ts';
import { makePhotos, makeVideo } from './lib/photos.ts';
import { thumbs, waitForScreenThumbs, type Thumbs } from './lib/gallery-page.ts';

const log = (line: string) => console.log(line);
const PHONE = { width: 390, height: 844, scale: 3 };

async function browser(t: TestContext, name: string, phone = true): Promise<{ chromium: ChromiumInstance; page: Page }> {
  const chromium = await launchChromium({ name, log, ...(phone ? { phone: PHONE } : {}) });
  t.defer(() => chromium.close());
  const page = await chromium.page();
  t.onFailure(async () => {
    const file = await screenshot(page, `${t.name}-${name}`);
    if (file) log(`    screenshot: ${file}`);
  });
  return { chromium, page };
}

/** A shared folder: `photos` photos (800x600, embedded previews), a video and two text files. */
async function photoShare(t: TestContext, tag: string, options: { photos?: number; embedded?: boolean; orientation?: number } = {}): Promise<{ dir: string; s: ShareProcess }> {
  await mkdir(scratchDir, { recursive: true });
  const dir = await mkdtemp(path.join(scratchDir, `gallery-${tag}-`));
  t.defer(() => rm(dir, { recursive: true, force: true }));
  await makePhotos(dir, { count: options.photos ?? 60, width: 800, height: 600, embedded: options.embedded ?? true, orientation: options.orientation ?? 1, bases: 4 });
  makeVideo(path.join(dir, 'clip.mp4'), 4);
  await writeFile(path.join(dir, 'notes.txt'), 'not a picture\n');
  await writeFile(path.join(dir, 'zz-readme.md'), '# the last entry\n');
  const s = await startShare(dir, { args: ['--no-qr'] });
  t.defer(() => s.kill());
  return { dir, s };
}

async function touchSession(page: Page) {
  const cdp = await page.context().newCDPSession(page);
  const send = (type: 'touchStart' | 'touchMove' | 'touchEnd', x: number, y: number) =>
    cdp.send('Input.dispatchTouchEvent', { type, touchPoints: type === 'touchEnd' ? [] : [{ x, y }] });
  return {
    async longPress(x: number, y: number) {
      await send('touchStart', x, y);
      await page.waitForTimeout(800);
      await send('touchEnd', x, y);
    },
    async swipe(fromX: number, toX: number, y: number) {
      await send('touchStart', fromX, y);
      for (let i = 1; i <= 6; i += 1) {
        await send('touchMove', fromX + ((toX - fromX) * i) / 6, y);
        await page.waitForTimeout(16);
      }
      await send('touchEnd', toX, y);
    },
  };
}

async function tileCenter(page: Page, name: string): Promise<{ x: number; y: number }> {
  const box = await page.locator(`.listing-row[data-name="${name}"]`).boundingBox();
  assert(box !== null, `the tile of ${name} is not shown`);
  return { x: box.x + box.width / 2, y: box.y + box.height / 2 };
}

/** Runs axe-core on the page; returns the serious and critical findings, in words. */
async function axeFindings(page: Page, where: string): Promise<string[]> {
  const require = createRequire(import.meta.url);
  const source = await readFile(require.resolve('axe-core/axe.min.js'), 'utf8');
  // Evaluated through the DevTools protocol: the page's script policy allows no inline script.
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(source);
  const violations = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(context: unknown, options: unknown): Promise<{ violations: { id: string; impact: string | null; help: string; nodes: { target: unknown[] }[] }[] }> } }).axe;
    const result = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.slice(0, 3).map((n) => JSON.stringify(n.target)) }));
  });
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${where}: ${v.id} (${v.impact}): ${v.help} at ${v.targets.join(', ')}`);
}

const tests: TestCase[] = [
  {
    name: 'a: a photo folder opens as a grid on a phone; the tiles on screen get thumbnails from the embedded previews, those off screen none; the video gets a poster; reopened, they come from the cache with nothing read',
    timeoutMs: 120_000,
    async run(t) {
      const { s } = await photoShare(t, 'grid');
      const { chromium, page } = await browser(t, 'phone');
      await openLink(page, s.link, ['connected']);
      await page.waitForSelector('.listing[data-layout=grid] .listing-row[data-testid=row]', { timeout: 15_000 });
      const first = await waitForScreenThumbs(page);
      const stats = await thumbs(page);
      log(`    ${first.withThumb} tiles on screen with thumbnails; ${JSON.stringify(stats)}`);
      // 62 pictures in the folder; a phone's screen shows about 20.
      assert(first.pictures >= 9 && first.pictures < 40, `${first.pictures} picture tiles on screen: expected a phone's screenful`);
      assert(first.names.includes('clip.mp4'), `the video's tile is not on screen (${first.names.join(', ')})`);
      assert(stats.posters === 1, `the video got ${stats.posters} posters, expected 1`);
      assert(stats.embedded >= first.pictures - 1 && stats.decoded === 0, `thumbnails were decoded from whole photos (${stats.decoded}) instead of their embedded previews (${stats.embedded})`);
      assert(stats.shown <= first.pictures + 6, `${stats.shown} thumbnails were made for ${first.pictures} tiles on screen: tiles off screen were read`);
      const perPhoto = (stats.bytesRead) / Math.max(1, stats.embedded);
      assert(perPhoto <= 32 * 1024, `a thumbnail read ${Math.round(perPhoto)} bytes per photo: more than the 32 KiB first read, for EXIF blocks of a few KiB`);
      // Tiles are the grid's: about a third of the width each, no sideways scroll.
      const m = await page.evaluate(() => ({
        tile: document.querySelector('.listing-row[data-testid=row]')!.getBoundingClientRect().width,
        scrollWidth: document.documentElement.scrollWidth,
      }));
      assert(m.tile >= 100 && m.tile <= 140, `tiles are ${m.tile} px wide on a 390 px screen`);
      assert(m.scrollWidth <= PHONE.width, `the page scrolls sideways (${m.scrollWidth} px)`);
      // A text file shows its icon.
      await page.waitForSelector('.listing-row[data-name="notes.txt"]', { timeout: 5_000 });
      assert(!(await page.isVisible('.listing-row[data-name="notes.txt"] img.tile-thumb')), 'a text file got a picture');

      // Reopened in a new tab: the same thumbnails, from the cache, nothing read.
      await page.close();
      const again = await chromium.page();
      await openLink(again, s.link, ['connected', 'connecting']);
      await again.waitForSelector('.listing[data-layout=grid] .listing-row[data-testid=row]', { timeout: 15_000 });
      const reopened = await waitForScreenThumbs(again);
      const cached = await thumbs(again);
      log(`    reopened: ${reopened.withThumb} tiles; ${JSON.stringify(cached)}`);
      assert(cached.bytesRead === 0, `reopened, the thumbnails read ${cached.bytesRead} bytes from the sharer (expected none)`);
      const keptUsed = await again.evaluate(() => performance.getEntriesByName('linkfs:kept-folder').length);
      assert(keptUsed === 1, 'reopened, the folder was not drawn from what the page kept of it (it waited for the index)');
      assert(cached.fromCache + cached.kept >= reopened.pictures - 1, `reopened, only ${cached.fromCache} of ${reopened.pictures} thumbnails came from the cache (and ${cached.kept} were kept with the folder's first screen)`);
      assert(cached.kept >= reopened.pictures - 1, `reopened, only ${cached.kept} of the ${reopened.pictures} thumbnails on screen were kept with the folder's first screen (shown in its first frame)`);
      assert(chromium.pageErrors.length === 0, `page errors: ${chromium.pageErrors.join('; ')}`);
    },
  },
  {
    name: 'b: photos without an embedded preview are decoded whole, and a turned photo (EXIF orientation 6) stands upright in its thumbnail',
    timeoutMs: 120_000,
    async run(t) {
      const { s } = await photoShare(t, 'decode', { photos: 12, embedded: false, orientation: 6 });
      const { page } = await browser(t, 'phone');
      await openLink(page, s.link, ['connected']);
      await page.waitForSelector('.listing[data-layout=grid] .listing-row[data-testid=row]', { timeout: 15_000 });
      await waitForScreenThumbs(page);
      const stats = await thumbs(page);
      assert(stats.decoded >= 10 && stats.embedded === 0, `expected whole-photo decodes, got ${JSON.stringify(stats)}`);
      const shapes = await page.$$eval('.listing-row[data-name$=".jpg"] img.tile-thumb', (imgs) => imgs.map((i) => [(i as HTMLImageElement).naturalWidth, (i as HTMLImageElement).naturalHeight]));
      assert(shapes.length > 0 && shapes.every(([w, h]) => w! < h!), `a photo stored 800x600 and turned (orientation 6) should stand upright: thumbnails are ${JSON.stringify(shapes.slice(0, 4))}`);
      // Turned with an embedded preview too.
      const { s: s2 } = await photoShare(t, 'turned', { photos: 6, embedded: true, orientation: 6 });
      await openLink(page, s2.link, ['connected']);
      await page.waitForSelector('.listing[data-layout=grid] .listing-row[data-testid=row]', { timeout: 15_000 });
      await waitForScreenThumbs(page);
      const turned = await page.$$eval('.listing-row[data-name$=".jpg"] img.tile-thumb', (imgs) => imgs.map((i) => [(i as HTMLImageElement).naturalWidth, (i as HTMLImageElement).naturalHeight]));
      assert(turned.length > 0 && turned.every(([w, h]) => w! < h!), `embedded previews of turned photos should stand upright: ${JSON.stringify(turned.slice(0, 4))}`);
    },
  },
  {
    name: 'c: long-press selects a tile, taps then add and remove; the preview covers the screen and swipes to the next and previous photo',
    timeoutMs: 120_000,
    async run(t) {
      const { s } = await photoShare(t, 'touch', { photos: 20 });
      const { chromium, page } = await browser(t, 'phone');
      await openLink(page, s.link, ['connected']);
      await page.waitForSelector('.listing[data-layout=grid] .listing-row[data-name="photo-00002.jpg"]', { timeout: 15_000 });
      const touch = await touchSession(page);
      const a = await tileCenter(page, 'photo-00002.jpg');
      await touch.longPress(a.x, a.y);
      await page.waitForSelector('.listing[data-selected="1"]', { timeout: 3_000 });
      assert(!(await page.isVisible('[data-testid=preview]')), 'a long-press opened the preview');
      // Selecting moved nothing on the page.
      assert(JSON.stringify(await tileCenter(page, 'photo-00002.jpg')) === JSON.stringify(a), 'the tiles moved when the selection bar appeared');
      const b = await tileCenter(page, 'photo-00003.jpg');
      await page.touchscreen.tap(b.x, b.y);
      await page.waitForSelector('.listing[data-selected="2"]', { timeout: 3_000 });
      await page.touchscreen.tap(a.x, a.y);
      await page.waitForSelector('.listing[data-selected="1"]', { timeout: 3_000 });
      assert(await page.isVisible('[data-testid=selection-download]'), 'the selection bar is not shown');
      await page.click('[data-testid=selection-clear]');
      await page.waitForSelector('.listing[data-selected="0"]', { timeout: 3_000 });

      // A tap opens the photo full-screen.
      await page.touchscreen.tap(b.x, b.y);
      await page.waitForSelector('[data-testid=preview][data-state=shown][data-name="photo-00003.jpg"]', { timeout: 15_000 });
      const box = await page.locator('[data-testid=preview]').boundingBox();
      assert(box !== null && box.x <= 0 && box.y <= 0 && box.width >= PHONE.width && box.height >= PHONE.height, `the preview does not cover the screen: ${JSON.stringify(box)}`);
      await touch.swipe(330, 60, 500);
      await page.waitForSelector('[data-testid=preview][data-state=shown][data-name="photo-00004.jpg"]', { timeout: 10_000 });
      await touch.swipe(60, 330, 500);
      await page.waitForSelector('[data-testid=preview][data-state=shown][data-name="photo-00003.jpg"]', { timeout: 10_000 });
      // Before the first photo come notes.txt and clip.mp4 (the gallery steps through every file), then nothing.
      await page.click('[data-testid=preview-previous]');
      await page.waitForSelector('[data-testid=preview][data-name="photo-00002.jpg"]', { timeout: 10_000 });
      await page.click('[data-testid=preview-previous]');
      await page.waitForSelector('[data-testid=preview][data-name="photo-00001.jpg"]', { timeout: 10_000 });
      await page.click('[data-testid=preview-previous]');
      await page.waitForSelector('[data-testid=preview][data-name="notes.txt"]', { timeout: 10_000 });
      await page.click('[data-testid=preview-previous]');
      await page.waitForSelector('[data-testid=preview][data-name="clip.mp4"]', { timeout: 10_000 });
      await page.waitForFunction(() => document.querySelector<HTMLButtonElement>('[data-testid=preview-previous]')?.hidden === true, undefined, { timeout: 5_000 });
      // The phone's Back closes the preview and stays in the folder.
      const folder = await page.evaluate(() => window.location.hash);
      await page.evaluate(() => history.back());
      await page.waitForSelector('[data-testid=preview]', { state: 'hidden', timeout: 5_000 });
      assert((await page.evaluate(() => window.location.hash)) === folder, 'Back left the folder instead of closing the preview');
      assert(await page.isVisible('.listing[data-layout=grid]'), 'the grid is not shown after Back');
      // Closed by its button, the preview leaves no step behind in the history.
      await page.click('.listing-row[data-name="photo-00003.jpg"]');
      await page.waitForSelector('[data-testid=preview][data-state=shown]', { timeout: 10_000 });
      await page.click('.preview-close');
      await page.waitForSelector('[data-testid=preview]', { state: 'hidden', timeout: 5_000 });
      await page.waitForTimeout(300);
      assert((await page.evaluate(() => (history.state as { linkfsPreview?: boolean } | null)?.linkfsPreview)) !== true, 'the closed preview left its history entry');
      assert(chromium.pageErrors.length === 0, `page errors: ${chromium.pageErrors.join('; ')}`);
    },
  },
  {
    name: 'd: the keyboard reaches the grid, steps through it, opens the preview and steps it; focus is visible',
    timeoutMs: 90_000,
    async run(t) {
      const { s } = await photoShare(t, 'keys', { photos: 12 });
      const { page } = await browser(t, 'desktop', false);
      await page.setViewportSize({ width: 1280, height: 800 });
      await openLink(page, s.link, ['connected']);
      await page.waitForSelector('.listing[data-layout=grid] .listing-row[data-testid=row]', { timeout: 15_000 });
      // Tab from the top of the page to the grid, with a visible focus on the way.
      let reached = false;
      for (let i = 0; i < 30 && !reached; i += 1) {
        await page.keyboard.press('Tab');
        const f = await page.evaluate(() => {
          const a = document.activeElement as HTMLElement | null;
          if (!a || a === document.body) return { grid: false, visible: true, what: 'body' };
          // A ring: an outline or a box shadow, on the element or the box around it.
          const ring = (e: Element | null): boolean => {
            if (!e) return false;
            const s = getComputedStyle(e);
            return (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== 'none';
          };
          const grid = a.getAttribute('role') === 'grid';
          // In the grid, the active tile carries the ring.
          const visible = grid ? ring(a.querySelector('.listing-row.is-active > .col-name')) : ring(a) || ring(a.parentElement);
          return { grid, visible, what: a.outerHTML.slice(0, 80) };
        });
        assert(f.visible, `focus is not visible on ${f.what}`);
        reached = f.grid;
      }
      assert(reached, 'Tab never reached the grid');
      await page.keyboard.press('ArrowRight');
      await page.keyboard.press('ArrowRight');
      const active = await page.getAttribute('.listing-row.is-active', 'data-name');
      assert(active === 'photo-00001.jpg', `two steps right from clip.mp4 (then notes.txt) should be photo-00001.jpg, is ${active}`);
      await page.keyboard.press('ArrowDown');
      const below = await page.getAttribute('.listing-row.is-active', 'data-index');
      const cols = await page.evaluate(() => Math.round(document.querySelector('.listing-viewport')!.clientWidth / document.querySelector('.listing-row[data-testid=row]')!.getBoundingClientRect().width));
      assert(Number(below) === 2 + cols, `ArrowDown should move a line (${cols} tiles) down, went to ${below}`);
      await page.keyboard.press('Enter');
      await page.waitForSelector('[data-testid=preview][data-state=shown]', { timeout: 10_000 });
      const opened = await page.getAttribute('[data-testid=preview]', 'data-name');
      await page.focus('[data-testid=preview-next]');
      await page.keyboard.press('Enter');
      await page.waitForFunction((name) => document.querySelector<HTMLElement>('[data-testid=preview]')?.dataset['name'] !== name, opened, { timeout: 10_000 });
      await page.keyboard.press('Escape');
      assert(!(await page.isVisible('[data-testid=preview]')), 'Escape did not close the preview');
      // The layout button says what it does, and switches.
      const label = await page.getAttribute('[data-testid=layout-toggle]', 'aria-label');
      assert(label === 'Show as a list', `the layout button is labelled ${label}`);
      await page.focus('[data-testid=layout-toggle]');
      await page.keyboard.press('Enter');
      await page.waitForSelector('.listing[data-layout=list]', { timeout: 3_000 });
    },
  },
  {
    name: 'e: axe-core finds nothing serious or critical on the listing, the grid, the preview and the search results, light and dark, phone and desktop',
    timeoutMs: 150_000,
    async run(t) {
      const { s } = await photoShare(t, 'axe', { photos: 12 });
      const findings: string[] = [];
      for (const scheme of ['light', 'dark'] as const) {
        for (const phone of [true, false]) {
          const { page } = await browser(t, `${scheme}-${phone ? 'phone' : 'desktop'}`, phone);
          await page.emulateMedia({ colorScheme: scheme });
          await openLink(page, s.link, ['connected']);
          await page.waitForSelector('.listing[data-layout=grid] .listing-row[data-testid=row]', { timeout: 15_000 });
          await waitForScreenThumbs(page);
          const where = `${scheme} ${phone ? 'phone' : 'desktop'}`;
          findings.push(...(await axeFindings(page, `${where} grid`)));
          await page.click('[data-testid=layout-toggle]');
          await page.waitForSelector('.listing[data-layout=list]');
          findings.push(...(await axeFindings(page, `${where} list`)));
          await page.click('.listing-row[data-name="photo-00001.jpg"]');
          await page.waitForSelector('[data-testid=preview][data-state=shown]', { timeout: 10_000 });
          findings.push(...(await axeFindings(page, `${where} preview`)));
          await page.keyboard.press('Escape');
          await page.fill('[data-testid=search]', 'photo');
          await page.waitForSelector('[data-testid=search-hit]', { timeout: 10_000 });
          findings.push(...(await axeFindings(page, `${where} search results`)));
          await page.close();
        }
      }
      assert(findings.length === 0, `accessibility findings:\n${findings.join('\n')}`);
    },
  },
  {
    name: 'f: Firefox ESR shows the photo folder as a grid with thumbnails, and the preview steps to the next photo',
    timeoutMs: 120_000,
    async run(t) {
      const { s } = await photoShare(t, 'firefox', { photos: 16 });
      const fx = await firefox.launchFirefox({ name: 'firefox', log });
      t.defer(() => fx.close());
      const page = await fx.page();
      t.onFailure(async () => {
        const file = await firefox.screenshot(page, `${t.name}-firefox`);
        if (file !== null) log(`    screenshot: ${file}`);
      });
      await page.setViewport({ width: 1024, height: 768 });
      await firefox.openLink(page, s.link, ['connected'], 30_000);
      await page.waitForSelector('.listing[data-layout=grid] .listing-row[data-testid=row]', { timeout: 20_000 });
      await page.waitForFunction(() => {
        const imgs = [...document.querySelectorAll<HTMLImageElement>('.listing-row[data-name$=".jpg"] img.tile-thumb')];
        return imgs.length >= 8 && imgs.filter((i) => !i.hidden && i.complete && i.naturalWidth > 0).length >= 8;
      }, { timeout: 30_000, polling: 200 });
      const stats = await page.evaluate(() => ({ ...(window as unknown as { linkfsThumbnails: Thumbs }).linkfsThumbnails }));
      log(`    firefox: ${JSON.stringify(stats)}`);
      assert(stats.embedded >= 8, `Firefox made ${stats.embedded} thumbnails from embedded previews`);
      const tile = await page.waitForSelector('.listing-row[data-name="photo-00001.jpg"]');
      await tile!.click();
      await page.waitForSelector('[data-testid=preview][data-state=shown][data-name="photo-00001.jpg"]', { timeout: 15_000 });
      await (await page.waitForSelector('[data-testid=preview-next]'))!.click();
      await page.waitForSelector('[data-testid=preview][data-state=shown][data-name="photo-00002.jpg"]', { timeout: 15_000 });
    },
  },
  {
    name: 'g: reopened, the folder is drawn at once from what the page kept, then what changed since shows (a photo added, one removed); damaged kept values are ignored',
    timeoutMs: 150_000,
    async run(t) {
      const { dir, s } = await photoShare(t, 'kept', { photos: 30 });
      const { chromium, page } = await browser(t, 'phone');
      const origin = new URL(s.link).origin;
      await openLink(page, s.link, ['connected']);
      await page.waitForSelector('.listing[data-layout=grid] .listing-row[data-testid=row]', { timeout: 15_000 });
      await waitForScreenThumbs(page);
      // Kept within seconds of the last answer (and as the page goes).
      await page.waitForFunction(() => Object.keys(localStorage).some((k) => k.startsWith('linkfs-kept:') && localStorage.getItem(k)!.includes('photo-00001.jpg')), undefined, { timeout: 10_000 });
      await page.close();

      // Meanwhile on the sharer's side: a photo added (it sorts first), one removed.
      await copyFile(path.join(dir, 'photo-00002.jpg'), path.join(dir, '0-added.jpg'));
      await rm(path.join(dir, 'photo-00001.jpg'));
      const shows = (p: Page, added: string, removed: string) =>
        p.waitForFunction(([a, r]) => {
          const names = [...document.querySelectorAll<HTMLElement>('.listing-row[data-testid=row]')].map((e) => e.dataset['name']);
          return names.includes(a) && !names.includes(r);
        }, [added, removed] as const, { timeout: 20_000 });

      const again = await chromium.page();
      await openLink(again, s.link, ['connected', 'connecting']);
      await again.waitForSelector('.listing-row[data-testid=row]', { timeout: 15_000 });
      const kept = await again.evaluate(() => performance.getEntriesByName('linkfs:kept-folder').length);
      assert(kept === 1, 'reopened, the folder was not drawn from what the page kept of it');
      const keptPictures = (await thumbs(again)).kept;
      assert(keptPictures > 0, 'reopened, none of the first screen\'s thumbnails were kept with it');
      await shows(again, '0-added.jpg', 'photo-00001.jpg');
      const fresh = await waitForScreenThumbs(again);
      assert(fresh.names.includes('0-added.jpg'), `the added photo is not on the first screen: ${fresh.names.join(', ')}`);
      await again.close();

      // Damaged kept values (storage edited, a disk error, another version): each is
      // ignored, the folder comes from the index, and is kept right again.
      const damages: [string, string][] = [
        ['not JSON', '{"v":1,"folders":[{"path":""'],
        ['a row of another folder', 'parent'],
        ['more rows than a page', 'rows'],
        ['an entry id that is text', 'id'],
      ];
      for (const [what, how] of damages) {
        const tab = await chromium.page();
        await tab.goto(`${origin}/favicon.svg`);
        const written = await tab.evaluate((how) => {
          const out: string[] = [];
          for (const k of Object.keys(localStorage)) {
            if (!k.startsWith('linkfs-kept:')) continue;
            const value = JSON.parse(localStorage.getItem(k)!) as { folders: { entry: { id: unknown }; list: { rows: { parent: number }[] } }[] };
            const folder = value.folders[0]!;
            if (how === 'parent') folder.list.rows[0]!.parent = 999_999;
            else if (how === 'rows') folder.list.rows = Array.from({ length: 200 }, () => folder.list.rows[0]!);
            else if (how === 'id') folder.entry.id = 'zero';
            const bad = how.startsWith('{') ? how : JSON.stringify(value);
            localStorage.setItem(k, bad);
            out.push(bad);
          }
          return out;
        }, how);
        assert(written.length === 1, `expected one kept share to damage, found ${written.length}`);
        await openLink(tab, s.link, ['connected', 'connecting']);
        await shows(tab, '0-added.jpg', 'photo-00001.jpg');
        const used = await tab.evaluate(() => performance.getEntriesByName('linkfs:kept-folder').length);
        assert(used === 0, `a kept value with ${what} was drawn`);
        // Kept right again: the stored value is no longer the damaged one written above
        // (a damaged value can itself name the added photo, so its name alone proves nothing).
        const keptAgain = await tab
          .waitForFunction((bad) => Object.keys(localStorage).some((k) => {
            const v = k.startsWith('linkfs-kept:') ? localStorage.getItem(k) : null;
            return v !== null && v !== bad && v.includes('0-added.jpg');
          }), written[0]!, { timeout: 10_000 })
          .then(() => true, () => false);
        if (!keptAgain) {
          const now = await tab.evaluate(() => Object.entries(localStorage).filter(([k]) => k.startsWith('linkfs-kept:')).map(([, v]) => v.slice(0, 300)));
          assert(false, `after a kept value with ${what}, the page did not keep the folder right again within 10 s; kept: ${JSON.stringify(now)}`);
        }
        await tab.close();
      }
      const last = await chromium.page();
      await openLink(last, s.link, ['connected', 'connecting']);
      await shows(last, '0-added.jpg', 'photo-00001.jpg');
      assert((await last.evaluate(() => performance.getEntriesByName('linkfs:kept-folder').length)) === 1, 'after the damaged values, the folder kept right again was not drawn from it');
      assert(chromium.pageErrors.length === 0, `page errors: ${chromium.pageErrors.join('; ')}`);
    },
  },
];

await runSuite('gallery', tests);

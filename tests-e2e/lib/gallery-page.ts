// The photo grid as a test sees it (Chromium): the thumbnails' figures the page
// reports, and the picture tiles on screen with a thumbnail shown.

import type { Page } from 'playwright-core';

/** `window.linkfsThumbnails`: what the grid's thumbnails cost so far. */
export interface Thumbs {
  shown: number;
  kept: number;
  fromCache: number;
  embedded: number;
  decoded: number;
  posters: number;
  none: number;
  bytesRead: number;
}

export async function thumbs(page: Page): Promise<Thumbs> {
  return page.evaluate(() => ({ ...(window as unknown as { linkfsThumbnails: Thumbs }).linkfsThumbnails }));
}

/** The picture tiles on screen, and how many of them show a loaded thumbnail. */
export async function screenTiles(page: Page): Promise<{ pictures: number; withThumb: number; names: string[] }> {
  return page.evaluate(() => {
    const view = document.querySelector('.listing-viewport')!.getBoundingClientRect();
    let pictures = 0;
    let withThumb = 0;
    const names: string[] = [];
    for (const tile of document.querySelectorAll<HTMLElement>('.listing-row[data-testid=row]')) {
      const r = tile.getBoundingClientRect();
      if (r.bottom <= view.top || r.top >= view.bottom) continue;
      const name = tile.dataset['name'] ?? '';
      if (!/\.(jpg|mp4)$/.test(name)) continue;
      pictures += 1;
      const img = tile.querySelector<HTMLImageElement>('img.tile-thumb');
      if (img && !img.hidden && img.complete && img.naturalWidth > 0) withThumb += 1;
      names.push(name);
    }
    return { pictures, withThumb, names };
  });
}

export async function waitForScreenThumbs(page: Page, timeoutMs = 20_000): Promise<{ pictures: number; withThumb: number; names: string[] }> {
  const until = Date.now() + timeoutMs;
  let last = await screenTiles(page);
  while (Date.now() < until) {
    last = await screenTiles(page);
    if (last.pictures > 0 && last.withThumb === last.pictures) return last;
    await page.waitForTimeout(100);
  }
  throw new Error(`only ${last.withThumb} of the ${last.pictures} picture tiles on screen got a thumbnail in ${timeoutMs / 1000} s`);
}

// Thumbnails, made in the index worker (off the page's main thread) from the
// bytes read on demand, and kept in IndexedDB so a reopened share shows them at
// once without reading anything.
//
// How one is made:
// 1. The cache (../thumb-store.ts), keyed by the share, the entry, its size and
//    modification time, and the pixel size asked for. A hit reads nothing from the sharer.
// 2. A JPEG's head (32 KiB, or to the end of a longer EXIF block): where it embeds a preview in its EXIF block
//    (every camera and phone does), that preview is the thumbnail, turned as the
//    photo is. A few KiB are read, not the photo's MiBs.
// 3. Otherwise the whole image is read and decoded by `createImageBitmap`, asked for
//    the size shown (Chromium then decodes a JPEG at a fraction of its size).
// 4. Drawn on an OffscreenCanvas at the size asked (its short side `px`, its long
//    side at most three times that) and encoded small: JPEG for photos, WebP (with
//    transparency) for the rest.
//
// Video posters cannot be made here (a worker has no media element): the page
// makes them and stores them through `put`.

import type { EntryId, ThumbnailAsk as ThumbAsk, Thumbnail as ThumbMade } from '../api';
import type { RangeReader } from './entry-stream';
import type { ThumbStore } from '../thumb-store';
import { FIRST_HEAD_BYTES, headNeeds, imageFacts, turnsSideways } from './image-facts';

/** Images bigger than this get no thumbnail (the page shows their icon). */
export const THUMB_SOURCE_LIMIT = 64 * 1024 * 1024;
/** Images of more pixels than this are not decoded (a small file can claim a huge picture). */
const MAX_PIXELS = 120_000_000;
/**
 * Most pixels of a picture that is not a JPEG (PNG, WebP, GIF, BMP, AVIF): browsers
 * decode those whole before scaling, 4 bytes a pixel, so 50 megapixels is 200 MB.
 */
const MAX_PIXELS_DECODED_WHOLE = 50_000_000;
/** Pictures of more pixels than this decode one at a time, like big files. */
const BIG_PIXELS = 16_000_000;
/** Reads after the first to reach a picture's size (EXIF block, then frame header). */
const HEAD_READS_MORE = 3;
/** Whole images bigger than this are read and decoded one at a time (memory stays bounded). */
const BIG_SOURCE = 8 * 1024 * 1024;

/** Reads `len` bytes at `offset` of `entry` into memory. */
function readBytes(reader: RangeReader, entry: EntryId, offset: number, len: number, signal: AbortSignal): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(new DOMException('cancelled', 'AbortError'));
      return;
    }
    const out = new Uint8Array(len);
    let at = 0;
    const handle = reader.start(entry, offset, len, {
      data(bytes) {
        const n = Math.min(bytes.byteLength, len - at);
        out.set(bytes.subarray(0, n), at);
        at += n;
      },
      done: () => resolve(out.subarray(0, at)),
      failed: (message) => reject(new Error(message)),
    });
    signal.addEventListener('abort', () => {
      reader.cancel(handle);
      reject(new DOMException('cancelled', 'AbortError'));
    }, { once: true });
  });
}

export class ThumbnailMaker {
  private readonly running = new Map<number, AbortController>();

  constructor(private readonly store: ThumbStore) {}

  async make(id: number, ask: ThumbAsk, reader: RangeReader | null): Promise<ThumbMade> {
    const controller = new AbortController();
    this.running.set(id, controller);
    try {
      const cached = await this.store.get(ask);
      if (cached) return { blob: cached, bytesRead: 0, from: 'cache' };
      if (ask.cachedOnly || !reader || ask.size === 0) return { blob: null, bytesRead: 0, from: 'none' };
      const made = await this.fromSource(ask, reader, controller.signal);
      if (made.blob) void this.store.put(ask, made.blob);
      return made;
    } finally {
      this.running.delete(id);
    }
  }

  cancel(id: number): void {
    this.running.get(id)?.abort();
  }

  /** Keeps a thumbnail the page made (a video's poster). */
  async keep(ask: ThumbAsk, blob: Blob): Promise<void> {
    await this.store.put(ask, blob);
  }

  private async fromSource(ask: ThumbAsk, reader: RangeReader, signal: AbortSignal): Promise<ThumbMade> {
    let head = await readBytes(reader, ask.entry, 0, Math.min(ask.size, FIRST_HEAD_BYTES), signal);
    // An EXIF block longer than the first read, or a frame header after long segments:
    // read on to it (a round trip each, a few at most, within MAX_HEAD_BYTES).
    for (let more = 0; more < HEAD_READS_MORE && head.length < ask.size; more += 1) {
      const needs = headNeeds(head);
      if (needs === null) break;
      const rest = await readBytes(reader, ask.entry, head.length, Math.min(ask.size, needs) - head.length, signal);
      const joined = new Uint8Array(head.length + rest.length);
      joined.set(head);
      joined.set(rest, head.length);
      head = joined;
    }
    const bytesRead = head.length;
    const facts = imageFacts(head);
    if (facts.embedded) {
      const bitmap = await createImageBitmap(new Blob([facts.embedded as BlobPart], { type: 'image/jpeg' }));
      return { blob: await draw(bitmap, ask.px, facts.orientation, 'image/jpeg'), bytesRead, from: 'embedded' };
    }
    if (ask.size > THUMB_SOURCE_LIMIT) return { blob: null, bytesRead, from: 'none' };
    // A picture whose size its head does not say is not decoded: a few bytes can say
    // 16383x16383 (a gigabyte decoded) where nothing checks it.
    if (facts.width === null || facts.height === null || facts.width <= 0 || facts.height <= 0) return { blob: null, bytesRead, from: 'none' };
    const pixels = facts.width * facts.height;
    const jpeg = head[0] === 0xff && head[1] === 0xd8;
    if (pixels > (jpeg ? MAX_PIXELS : MAX_PIXELS_DECODED_WHOLE)) return { blob: null, bytesRead, from: 'none' };
    // Big ones wait for each other: four 64 MiB photos at once would be 256 MiB here,
    // four 50-megapixel PNGs 800 MiB decoded.
    const release = ask.size > BIG_SOURCE || pixels > BIG_PIXELS ? await this.bigTurn() : () => undefined;
    try {
      return await this.decodeWhole(ask, reader, signal, head, bytesRead, facts);
    } finally {
      release();
    }
  }

  private bigQueue: Promise<void> = Promise.resolve();

  /** Waits for the previous big image to finish; returns the function that lets the next go. */
  private async bigTurn(): Promise<() => void> {
    let release = (): void => undefined;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const before = this.bigQueue;
    this.bigQueue = before.then(() => mine);
    await before;
    return release;
  }

  private async decodeWhole(ask: ThumbAsk, reader: RangeReader, signal: AbortSignal, head: Uint8Array, headRead: number, facts: ReturnType<typeof imageFacts>): Promise<ThumbMade> {
    let bytesRead = headRead;
    const type = head[0] === 0xff && head[1] === 0xd8 ? 'image/jpeg' : 'image/webp';
    let whole = head;
    if (head.length < ask.size) {
      const rest = await readBytes(reader, ask.entry, head.length, ask.size - head.length, signal);
      bytesRead += rest.length;
      whole = new Uint8Array(head.length + rest.length);
      whole.set(head);
      whole.set(rest, head.length);
    }
    const blob = new Blob([whole as BlobPart]);
    const [w, h] = turnsSideways(facts.orientation) ? [facts.height ?? 1, facts.width ?? 1] : [facts.width ?? 1, facts.height ?? 1];
    const size = fitted(w, h, ask.px);
    // Decoded at about the size shown; the browser applies the orientation.
    const bitmap = await createImageBitmap(blob, { resizeWidth: size.w, resizeHeight: size.h, resizeQuality: 'medium' });
    return { blob: await draw(bitmap, ask.px, 1, type), bytesRead, from: 'decoded' };
  }

}

/** The pixel size a picture of w×h is drawn at: its short side `px`, its long side at most 3×px. */
function fitted(w: number, h: number, px: number): { w: number; h: number } {
  const scale = Math.min(1, px / Math.min(w, h));
  return {
    w: Math.max(1, Math.min(Math.round(w * scale), px * 3)),
    h: Math.max(1, Math.min(Math.round(h * scale), px * 3)),
  };
}

/** Draws `bitmap` turned by EXIF `orientation`, at its fitted size, and encodes it. */
async function draw(bitmap: ImageBitmap, px: number, orientation: number, type: string): Promise<Blob> {
  const sideways = turnsSideways(orientation);
  const [w, h] = sideways ? [bitmap.height, bitmap.width] : [bitmap.width, bitmap.height];
  const size = fitted(w, h, px);
  const canvas = new OffscreenCanvas(size.w, size.h);
  const context = canvas.getContext('2d');
  if (!context) throw new Error('This browser cannot draw thumbnails.');
  context.imageSmoothingQuality = 'high';
  // The EXIF orientations as canvas transforms (the stored picture → as seen).
  const W = size.w;
  const H = size.h;
  const transforms: Record<number, [number, number, number, number, number, number]> = {
    2: [-1, 0, 0, 1, W, 0],
    3: [-1, 0, 0, -1, W, H],
    4: [1, 0, 0, -1, 0, H],
    5: [0, 1, 1, 0, 0, 0],
    6: [0, 1, -1, 0, W, 0],
    7: [0, -1, -1, 0, W, H],
    8: [0, -1, 1, 0, 0, H],
  };
  const t = transforms[orientation];
  if (t) context.setTransform(...t);
  // Drawn into the stored picture's frame (its axes swapped when turned sideways).
  context.drawImage(bitmap, 0, 0, sideways ? H : W, sideways ? W : H);
  bitmap.close();
  return canvas.convertToBlob({ type, quality: 0.8 });
}

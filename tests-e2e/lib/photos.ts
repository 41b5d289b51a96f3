// Folders of photos and videos for the grid's tests and benchmark, made with
// Debian's ffmpeg: noisy test-pattern JPEGs (noise makes them as big as camera
// photos: 2-5 MB at 3000x2000), each given an EXIF block with a small preview in
// it, as every camera and phone writes, and a comment that makes every file's
// bytes differ. `embedded: false` leaves the preview out (a picture saved by an
// editor that drops EXIF), so the page has to decode the whole image.

import { spawnSync } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

export interface PhotoOptions {
  count: number;
  width: number;
  height: number;
  /** Put an EXIF preview in each (default true). */
  embedded?: boolean;
  /** The EXIF orientation written (default 1). */
  orientation?: number;
  /** Distinct pictures made with ffmpeg; the files cycle through them (default 10). */
  bases?: number;
  /** Name prefix (default 'photo-'). */
  prefix?: string;
}

function ffmpeg(args: string[]): void {
  const r = spawnSync('ffmpeg', ['-v', 'error', '-y', ...args], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ffmpeg ${args.join(' ')} failed: ${r.stderr || r.error?.message}`);
}

/** A TIFF/EXIF block (little-endian): IFD0 with the orientation, IFD1 pointing at `thumb`. */
export function exifBlock(thumb: Uint8Array | null, orientation: number): Uint8Array {
  const ifd0 = 8;
  const ifd1 = ifd0 + 2 + 12 + 4;
  const thumbAt = ifd1 + 2 + 24 + 4;
  const tiff = new Uint8Array(thumbAt + (thumb?.length ?? 0));
  const v = new DataView(tiff.buffer);
  tiff.set([0x49, 0x49, 0x2a, 0x00]);
  v.setUint32(4, ifd0, true);
  v.setUint16(ifd0, 1, true);
  v.setUint16(ifd0 + 2, 0x0112, true);
  v.setUint16(ifd0 + 4, 3, true);
  v.setUint32(ifd0 + 6, 1, true);
  v.setUint16(ifd0 + 10, orientation, true);
  v.setUint32(ifd0 + 14, thumb ? ifd1 : 0, true);
  if (thumb) {
    v.setUint16(ifd1, 2, true);
    const entry = (at: number, tag: number, value: number): void => {
      v.setUint16(at, tag, true);
      v.setUint16(at + 2, 4, true);
      v.setUint32(at + 4, 1, true);
      v.setUint32(at + 8, value, true);
    };
    entry(ifd1 + 2, 0x0201, thumbAt);
    entry(ifd1 + 14, 0x0202, thumb.length);
    v.setUint32(ifd1 + 26, 0, true);
    tiff.set(thumb, thumbAt);
  }
  return tiff;
}

function segment(marker: number, body: Uint8Array): Uint8Array {
  const out = new Uint8Array(4 + body.length);
  out[0] = 0xff;
  out[1] = marker;
  new DataView(out.buffer).setUint16(2, body.length + 2);
  out.set(body, 4);
  return out;
}

/** `jpeg` with an EXIF block and a comment right after its start marker. */
export function withExif(jpeg: Uint8Array, thumb: Uint8Array | null, orientation: number, comment: string): Uint8Array {
  const exif = exifBlock(thumb, orientation);
  const app1 = segment(0xe1, new Uint8Array([...new TextEncoder().encode('Exif'), 0, 0, ...exif]));
  const com = segment(0xfe, new TextEncoder().encode(comment));
  const out = new Uint8Array(jpeg.length + app1.length + com.length);
  out.set(jpeg.subarray(0, 2));
  out.set(app1, 2);
  out.set(com, 2 + app1.length);
  out.set(jpeg.subarray(2), 2 + app1.length + com.length);
  return out;
}

/** Writes `count` photos into `dir`; returns their names and total bytes. */
export async function makePhotos(dir: string, options: PhotoOptions): Promise<{ names: string[]; bytes: number }> {
  await mkdir(dir, { recursive: true });
  const bases = Math.min(options.bases ?? 10, options.count);
  const orientation = options.orientation ?? 1;
  const work = path.join(dir, '.photo-bases');
  await mkdir(work, { recursive: true });
  const pictures: { jpeg: Uint8Array; thumb: Uint8Array }[] = [];
  for (let b = 0; b < bases; b += 1) {
    const file = path.join(work, `base-${b}.jpg`);
    const thumb = path.join(work, `thumb-${b}.jpg`);
    // Each base a different moment of the pattern, hue and noise (so sizes spread over 2-5 MB).
    const noise = 18 + ((b * 7) % 20);
    ffmpeg(['-f', 'lavfi', '-i', `testsrc2=size=${options.width}x${options.height}:rate=1`, '-vf', `hue=h=${b * 36},noise=alls=${noise}:allf=t`, '-ss', String(b), '-frames:v', '1', '-q:v', '2', file]);
    const tw = 160;
    const th = Math.max(1, Math.round((tw * options.height) / options.width));
    ffmpeg(['-i', file, '-vf', `scale=${tw}:${th}`, '-q:v', '4', thumb]);
    pictures.push({ jpeg: new Uint8Array(await readFile(file)), thumb: new Uint8Array(await readFile(thumb)) });
  }
  spawnSync('rm', ['-rf', work]);
  const names: string[] = [];
  let bytes = 0;
  for (let i = 0; i < options.count; i += 1) {
    const picture = pictures[i % bases]!;
    const name = `${options.prefix ?? 'photo-'}${String(i + 1).padStart(5, '0')}.jpg`;
    const data = withExif(picture.jpeg, options.embedded === false ? null : picture.thumb, orientation, `linkfs test photo ${i + 1}`);
    await writeFile(path.join(dir, name), data);
    names.push(name);
    bytes += data.length;
  }
  return { names, bytes };
}

/** An H.264 MP4 of `seconds` seconds (a moving test pattern), as phones record. */
export function makeVideo(file: string, seconds: number): void {
  ffmpeg(['-f', 'lavfi', '-i', `testsrc2=size=640x360:rate=25:duration=${seconds}`, '-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-movflags', '+faststart', file]);
}

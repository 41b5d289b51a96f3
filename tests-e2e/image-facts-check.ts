// The thumbnail maker's parser of image heads (web/src/wasm/image-facts.ts) against
// bytes a sharer could send: well-formed photos with EXIF previews read right, and
// every truncation and 20,000 random corruptions of them parse without throwing
// (what does not parse is simply not known). Runs in Node; no browser needed.
//
//   node_modules/.bin/tsx tests-e2e/image-facts-check.ts

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FIRST_HEAD_BYTES, MAX_HEAD_BYTES, headNeeds, imageFacts } from '../web/src/wasm/image-facts.ts';
import { withExif } from './lib/photos.ts';
import { base64 } from '../web/src/thumb-store.ts';

let failures = 0;
function check(ok: boolean, what: string): void {
  if (!ok) {
    failures += 1;
    console.log(`FAIL ${what}`);
  }
}

/** A minimal JPEG: start, a frame header of w×h, `pad` bytes of a comment, end. */
function jpeg(w: number, h: number, pad = 0): Uint8Array {
  const sof = [0xff, 0xc0, 0x00, 0x11, 0x08, h >> 8, h & 0xff, w >> 8, w & 0xff, 0x03, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1];
  const com = pad > 0 ? [0xff, 0xfe, (pad + 2) >> 8, (pad + 2) & 0xff, ...new Array<number>(pad).fill(0x20)] : [];
  return new Uint8Array([0xff, 0xd8, ...com, ...sof, 0xff, 0xd9]);
}

// A photo of 4000x3000 turned (orientation 6) with a 160x120 preview.
const preview = jpeg(160, 120);
const photo = withExif(jpeg(4000, 3000), preview, 6, 'a photo');
const facts = imageFacts(photo);
check(facts.width === 4000 && facts.height === 3000, `the photo's size read as ${facts.width}x${facts.height}, expected 4000x3000`);
check(facts.orientation === 6, `orientation read as ${facts.orientation}, expected 6`);
check(facts.embedded !== null && facts.embedded.length === preview.length && facts.embedded.every((b, i) => b === preview[i]), 'the embedded preview was not found byte for byte');

// A preview too small to show (80x60) is not used.
check(imageFacts(withExif(jpeg(4000, 3000), jpeg(80, 60), 1, 'x')).embedded === null, 'an 80x60 preview was used');
// No EXIF at all.
const plain = imageFacts(jpeg(640, 480));
check(plain.embedded === null && plain.orientation === 1 && plain.width === 640, 'a JPEG without EXIF read wrong');

// An EXIF block longer than the first read: headNeeds says how far to read, and then the preview is found.
const bigPreview = jpeg(320, 240, 50_000);
const long = withExif(jpeg(4000, 3000), bigPreview, 1, 'long exif');
const first = long.subarray(0, FIRST_HEAD_BYTES);
const needs = headNeeds(first);
check(needs !== null && needs > FIRST_HEAD_BYTES && needs <= 64 * 1024 + 4096, `headNeeds said ${needs} for a ~50 KB EXIF block`);
check(imageFacts(first).embedded === null, 'a cut EXIF block gave a preview');
check(needs !== null && imageFacts(long.subarray(0, needs)).embedded !== null, 'reading to where headNeeds said did not give the preview');
check(headNeeds(photo) === null, 'headNeeds asked for more of a photo read whole');

// Every truncation, and random corruptions: never a throw.
let thrown = 0;
const tryParse = (bytes: Uint8Array): void => {
  try {
    imageFacts(bytes);
    headNeeds(bytes);
  } catch (error) {
    thrown += 1;
    if (thrown <= 3) console.log(`  threw on ${bytes.length} bytes: ${String(error)}`);
  }
};
for (let n = 0; n <= photo.length; n += 1) tryParse(photo.subarray(0, n));
let seed = 12345;
const random = (): number => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return seed / 0x7fffffff;
};
for (let i = 0; i < 20_000; i += 1) {
  const bytes = new Uint8Array(photo);
  const flips = 1 + Math.floor(random() * 4);
  for (let f = 0; f < flips; f += 1) bytes[Math.floor(random() * Math.min(bytes.length, 200))] = Math.floor(random() * 256);
  tryParse(bytes.subarray(0, Math.floor(random() * bytes.length) + 1));
}
check(thrown === 0, `the parser threw on ${thrown} damaged heads`);

// PNG: the size from its header.
const png = new Uint8Array(33);
png.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]);
new DataView(png.buffer).setUint32(16, 1920);
new DataView(png.buffer).setUint32(20, 1080);
const p = imageFacts(png);
check(p.width === 1920 && p.height === 1080, `a PNG's size read as ${p.width}x${p.height}`);

// Every format the grid makes thumbnails of says its size in its head, made by Debian's
// ffmpeg (a picture whose size is not known is not decoded: a few bytes can claim a
// gigabyte of pixels). 37x23: odd sides, so a swapped or off-by-one read shows.
const made = mkdtempSync(join(tmpdir(), 'linkfs-image-facts-'));
try {
  const formats: [string, string[]][] = [
    ['a.gif', []],
    ['a.bmp', []],
    ['lossy.webp', ['-c:v', 'libwebp', '-lossless', '0']],
    ['lossless.webp', ['-c:v', 'libwebp', '-lossless', '1']],
    ['alpha.webp', ['-c:v', 'libwebp', '-pix_fmt', 'yuva420p']],
    ['a.avif', ['-c:v', 'libaom-av1', '-still-picture', '1', '-cpu-used', '8']],
    ['big-exif-less.jpg', []],
  ];
  for (const [name, codec] of formats) {
    const out = join(made, name);
    execFileSync('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', 'testsrc=size=37x23:rate=1', '-frames:v', '1', ...codec, out]);
    const f = imageFacts(new Uint8Array(readFileSync(out).subarray(0, FIRST_HEAD_BYTES)));
    check(f.width === 37 && f.height === 23, `${name}: size read as ${f.width}x${f.height}, not 37x23`);
  }
} finally {
  rmSync(made, { recursive: true, force: true });
}
// A JPEG whose frame header comes after 40 KiB of comment: past the first read, so the
// head is read on to it; past MAX_HEAD_BYTES, never (and then its size is not known).
const late = jpeg(30000, 30000, 40_000);
const lateNeeds = headNeeds(late.subarray(0, FIRST_HEAD_BYTES));
check(lateNeeds !== null && lateNeeds > 40_000 && lateNeeds <= 40_000 + 4096, `headNeeds said ${lateNeeds} for a frame header at 40 KB`);
const lateFacts = imageFacts(late.subarray(0, lateNeeds ?? 0));
check(lateFacts.width === 30000 && lateFacts.height === 30000, `a late frame header read as ${lateFacts.width}x${lateFacts.height}`);
const segments = Array.from({ length: 20 }, () => Array.from(jpeg(1, 1, 65_000).subarray(2, 2 + 4 + 65_000)));
const far = new Uint8Array([0xff, 0xd8, ...segments.flat(), ...jpeg(30000, 30000).subarray(2)]);
let reads = 0;
for (let head = far.subarray(0, FIRST_HEAD_BYTES); ; reads += 1) {
  const n = headNeeds(head);
  if (n === null) break;
  check(n <= MAX_HEAD_BYTES, `headNeeds asked for ${n} bytes`);
  head = far.subarray(0, n);
  if (reads > 100) break;
}
check(reads < 100, 'headNeeds never stopped asking');

// The cache's base64 for data: URLs (Node has no Uint8Array#toBase64: the table is what runs here).
for (const n of [0, 1, 2, 3, 4, 5, 6, 7, 100, 10_000, 10_001, 10_002]) {
  const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 7919 + n) & 255);
  check(base64(bytes) === Buffer.from(bytes).toString('base64'), `base64 of ${n} bytes differs from Node's`);
}

if (failures > 0) {
  console.log(`image facts: ${failures} failed`);
  process.exit(1);
}
console.log('image facts: all checks passed (a photo, previews, a long EXIF block, every truncation, 20,000 corruptions, PNG, GIF, BMP, WebP, AVIF and a late JPEG frame header sized, base64 for the cache)');

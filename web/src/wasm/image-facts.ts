// What a thumbnail maker learns from an image's first bytes, without decoding it:
// its pixel size, its EXIF orientation, and (JPEG) the small preview image a
// camera or phone embeds in its EXIF block. Reading these needs only the start of
// the file, which is how a grid of photos reads a few KiB per photo, not MiBs.
//
// Everything here reads bytes that came from the sharer: every offset is checked
// against the buffer, and what does not parse is simply not known (null).

/** What the head of an image says about it. */
export interface ImageFacts {
  /** Stored pixel size (before the orientation is applied), if the head holds it. */
  width: number | null;
  height: number | null;
  /** EXIF orientation 1-8 (1: as stored). */
  orientation: number;
  /** The embedded preview's bytes (a JPEG), where there is one. */
  embedded: Uint8Array | null;
}

/**
 * Bytes of an image read first: enough for most phones' EXIF blocks with their
 * previews; a longer EXIF block (at most 64 KiB) is read on to its end (`headNeeds`).
 */
export const FIRST_HEAD_BYTES = 32 * 1024;
/** An embedded preview smaller than this many pixels on its short side is not used. */
const MIN_EMBEDDED_SIDE = 96;

/** The most of an image's head read to find its pixel size (a JPEG's frame header after long ICC, XMP or comment segments). */
export const MAX_HEAD_BYTES = 1024 * 1024;

export function imageFacts(head: Uint8Array): ImageFacts {
  if (head.length >= 3 && head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return jpegFacts(head);
  const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
  const sized = (width: number, height: number): ImageFacts => ({ width, height, orientation: 1, embedded: null });
  const ascii = (at: number, text: string): boolean =>
    at + text.length <= head.length && [...text].every((c, i) => head[at + i] === c.charCodeAt(0));
  if (head.length >= 24 && head[0] === 0x89 && ascii(1, 'PNG')) return sized(view.getUint32(16), view.getUint32(20));
  if (head.length >= 10 && (ascii(0, 'GIF87a') || ascii(0, 'GIF89a'))) return sized(view.getUint16(6, true), view.getUint16(8, true));
  if (ascii(0, 'RIFF') && ascii(8, 'WEBP')) return webpFacts(head, view);
  if (head.length >= 26 && ascii(0, 'BM')) {
    // BITMAPCOREHEADER (12 bytes): 16-bit sides; the later headers: 32-bit, height negative when stored top-down.
    if (view.getUint32(14, true) === 12) return sized(view.getUint16(18, true), view.getUint16(20, true));
    return sized(Math.abs(view.getInt32(18, true)), Math.abs(view.getInt32(22, true)));
  }
  if (ascii(4, 'ftyp')) return isobmffFacts(head, view);
  return { width: null, height: null, orientation: 1, embedded: null };
}

/** A WebP's canvas size, from its first chunk (lossy, lossless or extended). */
function webpFacts(head: Uint8Array, view: DataView): ImageFacts {
  const facts: ImageFacts = { width: null, height: null, orientation: 1, embedded: null };
  const chunk = String.fromCharCode(...head.subarray(12, 16));
  if (chunk === 'VP8 ' && head.length >= 30) {
    facts.width = view.getUint16(26, true) & 0x3fff;
    facts.height = view.getUint16(28, true) & 0x3fff;
  } else if (chunk === 'VP8L' && head.length >= 25 && head[20] === 0x2f) {
    const bits = view.getUint32(21, true);
    facts.width = (bits & 0x3fff) + 1;
    facts.height = ((bits >>> 14) & 0x3fff) + 1;
  } else if (chunk === 'VP8X' && head.length >= 30) {
    facts.width = (view.getUint32(24, true) & 0xffffff) + 1;
    facts.height = (view.getUint32(27, true) & 0xffffff) + 1;
  }
  return facts;
}

/**
 * An AVIF's (or HEIF's) pixel size: the largest of its image spatial extent ('ispe')
 * properties in the head (a grid's whole picture has the largest).
 */
function isobmffFacts(head: Uint8Array, view: DataView): ImageFacts {
  const facts: ImageFacts = { width: null, height: null, orientation: 1, embedded: null };
  for (let at = 4; at + 16 <= head.length; at += 1) {
    if (head[at] !== 0x69 || head[at + 1] !== 0x73 || head[at + 2] !== 0x70 || head[at + 3] !== 0x65) continue;
    const width = view.getUint32(at + 8);
    const height = view.getUint32(at + 12);
    if (facts.width === null || facts.height === null || width * height > facts.width * facts.height) {
      facts.width = width;
      facts.height = height;
    }
  }
  return facts;
}

/**
 * How many bytes from the start a JPEG needs read for its EXIF block whole and its
 * frame header (the pixel size), when that is more than `head` holds and at most
 * [`MAX_HEAD_BYTES`]; else null (all is there, or it is not a JPEG, or too far in).
 */
export function headNeeds(head: Uint8Array): number | null {
  if (!(head.length >= 4 && head[0] === 0xff && head[1] === 0xd8)) return null;
  const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
  let at = 2;
  for (;;) {
    if (at + 4 > head.length) break;
    if (head[at] !== 0xff) return null;
    const marker = head[at + 1]!;
    if (marker === 0xff) {
      at += 1;
      continue;
    }
    if (marker === 0xd8 || (marker >= 0xd0 && marker <= 0xd7) || marker === 0x01) {
      at += 2;
      continue;
    }
    // The frame header (or the scan, or the end): what the thumbnail needs is here.
    if ((marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) || marker === 0xda || marker === 0xd9) {
      return at + 12 > head.length ? Math.min(at + 2048, MAX_HEAD_BYTES) : null;
    }
    const length = view.getUint16(at + 2);
    if (length < 2) return null;
    at += 2 + length;
  }
  // The head ends inside or after a segment: read past it, and a little on for the frame header.
  const needs = at + 2048;
  return needs > MAX_HEAD_BYTES || needs <= head.length ? null : needs;
}

/** Whether orientation `o` swaps width and height (a quarter turn). */
export function turnsSideways(o: number): boolean {
  return o >= 5 && o <= 8;
}

function jpegFacts(bytes: Uint8Array): ImageFacts {
  const facts: ImageFacts = { width: null, height: null, orientation: 1, embedded: null };
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 2;
  while (at + 4 <= bytes.length) {
    if (bytes[at] !== 0xff) return facts;
    const marker = bytes[at + 1]!;
    // Fill bytes, and markers without a length.
    if (marker === 0xff) {
      at += 1;
      continue;
    }
    if (marker === 0xd8 || (marker >= 0xd0 && marker <= 0xd7) || marker === 0x01) {
      at += 2;
      continue;
    }
    const length = view.getUint16(at + 2);
    if (length < 2) return facts;
    const body = at + 4;
    const end = at + 2 + length;
    if (marker === 0xe1 && end <= bytes.length && isExif(bytes, body)) {
      readExif(bytes.subarray(body + 6, end), facts);
    }
    // Start of frame (not DHT, JPG, DAC): the pixel size.
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      if (body + 5 <= bytes.length) {
        facts.height = view.getUint16(body + 1);
        facts.width = view.getUint16(body + 3);
      }
      return facts;
    }
    if (marker === 0xda || marker === 0xd9) return facts;
    at = end;
  }
  return facts;
}

function isExif(bytes: Uint8Array, at: number): boolean {
  return at + 6 <= bytes.length && bytes[at] === 0x45 && bytes[at + 1] === 0x78 && bytes[at + 2] === 0x69 && bytes[at + 3] === 0x66 && bytes[at + 4] === 0 && bytes[at + 5] === 0;
}

/** Reads IFD0's orientation and IFD1's embedded JPEG from a TIFF structure. */
function readExif(tiff: Uint8Array, facts: ImageFacts): void {
  if (tiff.length < 8) return;
  const view = new DataView(tiff.buffer, tiff.byteOffset, tiff.byteLength);
  const little = tiff[0] === 0x49 && tiff[1] === 0x49;
  if (!little && !(tiff[0] === 0x4d && tiff[1] === 0x4d)) return;
  const u16 = (at: number): number | null => (at + 2 <= tiff.length ? view.getUint16(at, little) : null);
  const u32 = (at: number): number | null => (at + 4 <= tiff.length ? view.getUint32(at, little) : null);
  if (u16(2) !== 42) return;
  /** The entries of the IFD at `at` as tag → value (short or long), and where the next IFD is. */
  const ifd = (at: number): { tags: Map<number, number>; next: number | null } | null => {
    const count = u16(at);
    if (count === null || count > 512) return null;
    const tags = new Map<number, number>();
    for (let i = 0; i < count; i += 1) {
      const entry = at + 2 + i * 12;
      const tag = u16(entry);
      const type = u16(entry + 2);
      if (tag === null || type === null) return null;
      const value = type === 3 ? u16(entry + 8) : type === 4 ? u32(entry + 8) : null;
      if (value !== null) tags.set(tag, value);
    }
    return { tags, next: u32(at + 2 + count * 12) };
  };
  const first = u32(4);
  if (first === null) return;
  const ifd0 = ifd(first);
  if (!ifd0) return;
  const orientation = ifd0.tags.get(0x0112);
  if (orientation !== undefined && orientation >= 1 && orientation <= 8) facts.orientation = orientation;
  if (!ifd0.next) return;
  const ifd1 = ifd(ifd0.next);
  const offset = ifd1?.tags.get(0x0201);
  const length = ifd1?.tags.get(0x0202);
  if (offset === undefined || length === undefined || length < 4 || offset + length > tiff.length) return;
  const jpeg = tiff.subarray(offset, offset + length);
  if (jpeg[0] !== 0xff || jpeg[1] !== 0xd8) return;
  // Too small to be worth showing (some cameras embed 80 px ones): decode the photo instead.
  const inner = jpegFacts(jpeg);
  if (inner.width !== null && inner.height !== null && Math.min(inner.width, inner.height) < MIN_EMBEDDED_SIDE) return;
  facts.embedded = jpeg;
}

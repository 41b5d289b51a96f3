// DEVELOPMENT FAKE — file contents for the fake share (see fake-share.ts). Real bytes
// in real formats (PNG, BMP, GIF, SVG, UTF-8 text), generated on demand so that a
// tree of 100,000 files costs no memory until a file is read.

/** Produces the bytes of one file, a range at a time. */
export interface FakeContent {
  readonly size: number;
  bytes(offset: number, length: number): Uint8Array;
}

export function fixedContent(bytes: Uint8Array): FakeContent {
  return { size: bytes.length, bytes: (offset, length) => bytes.subarray(offset, offset + length) };
}

export function textContent(text: string): FakeContent {
  return fixedContent(new TextEncoder().encode(text));
}

const LINE_WIDTH = 64;
const LINE_TEXT = 'The quick brown fox jumps over the lazy dog. 0123456789 ~';

/**
 * ASCII text of exactly `size` bytes in numbered 64-byte lines, so any range can be
 * produced without building the rest.
 */
export function linesContent(size: number, label: string): FakeContent {
  const tag = label.replace(/[^\x20-\x7e]/g, '?').slice(0, 24);
  return {
    size,
    bytes(offset, length) {
      const end = Math.min(size, offset + length);
      const out = new Uint8Array(Math.max(0, end - offset));
      let line = -1;
      let lineBytes = '';
      for (let i = offset; i < end; i += 1) {
        const n = Math.floor(i / LINE_WIDTH);
        if (n !== line) {
          line = n;
          lineBytes = `${String(n + 1).padStart(8, '0')} ${tag} ${LINE_TEXT}`.slice(0, LINE_WIDTH - 1).padEnd(LINE_WIDTH - 1, '.');
        }
        const col = i % LINE_WIDTH;
        out[i - offset] = col === LINE_WIDTH - 1 ? 10 : lineBytes.charCodeAt(col);
      }
      return out;
    },
  };
}

/** Deterministic pseudo-random bytes (a stand-in for archives, videos, databases). */
export function noiseContent(size: number, seed: number): FakeContent {
  return {
    size,
    bytes(offset, length) {
      const end = Math.min(size, offset + length);
      const out = new Uint8Array(Math.max(0, end - offset));
      for (let i = offset; i < end; i += 1) {
        out[i - offset] = (mix32(seed ^ Math.floor(i / 4)) >>> ((i % 4) * 8)) & 0xff;
      }
      return out;
    },
  };
}

export function mix32(x: number): number {
  let h = x | 0;
  h = Math.imul(h ^ (h >>> 16), 0x45d9f3b);
  h = Math.imul(h ^ (h >>> 16), 0x45d9f3b);
  return (h ^ (h >>> 16)) >>> 0;
}

// --- PNG (uncompressed deflate, so the size depends only on the dimensions) ---

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n += 1) {
    let c = n;
    for (let k = 0; k < 8; k += 1) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

function crc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of bytes) c = (CRC_TABLE[(c ^ b) & 0xff] ?? 0) ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function adler32(bytes: Uint8Array): number {
  let a = 1;
  let b = 0;
  for (const byte of bytes) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  return ((b << 16) | a) >>> 0;
}

class ByteWriter {
  private parts: Uint8Array[] = [];
  private length = 0;
  u8(...values: number[]): void { this.push(Uint8Array.from(values)); }
  u16le(v: number): void { this.u8(v & 0xff, (v >>> 8) & 0xff); }
  u32le(v: number): void { this.u8(v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, (v >>> 24) & 0xff); }
  u32be(v: number): void { this.u8((v >>> 24) & 0xff, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff); }
  ascii(s: string): void { this.push(new TextEncoder().encode(s)); }
  push(bytes: Uint8Array): void { this.parts.push(bytes); this.length += bytes.length; }
  finish(): Uint8Array {
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const part of this.parts) { out.set(part, at); at += part.length; }
    return out;
  }
}

function pngChunk(out: ByteWriter, type: string, data: Uint8Array): void {
  const typed = new Uint8Array(4 + data.length);
  typed.set(new TextEncoder().encode(type), 0);
  typed.set(data, 4);
  out.u32be(data.length);
  out.push(typed);
  out.u32be(crc32(typed));
}

/** An RGB PNG whose pixel (x, y) is `pixel(x, y)` = [r, g, b]. */
export function encodePng(width: number, height: number, pixel: (x: number, y: number) => [number, number, number]): Uint8Array {
  const raw = new Uint8Array(height * (1 + width * 3));
  let at = 0;
  for (let y = 0; y < height; y += 1) {
    raw[at++] = 0; // filter: none
    for (let x = 0; x < width; x += 1) {
      const [r, g, b] = pixel(x, y);
      raw[at++] = r;
      raw[at++] = g;
      raw[at++] = b;
    }
  }
  const zlib = new ByteWriter();
  zlib.u8(0x78, 0x01);
  for (let offset = 0; offset < raw.length || offset === 0; offset += 65535) {
    const block = raw.subarray(offset, offset + 65535);
    const final = offset + 65535 >= raw.length ? 1 : 0;
    zlib.u8(final);
    zlib.u16le(block.length);
    zlib.u16le(~block.length & 0xffff);
    zlib.push(block);
    if (final) break;
  }
  zlib.u32be(adler32(raw));

  const ihdr = new ByteWriter();
  ihdr.u32be(width);
  ihdr.u32be(height);
  ihdr.u8(8, 2, 0, 0, 0); // 8-bit, RGB, deflate, no filter, no interlace

  const png = new ByteWriter();
  png.u8(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a);
  pngChunk(png, 'IHDR', ihdr.finish());
  pngChunk(png, 'IDAT', zlib.finish());
  pngChunk(png, 'IEND', new Uint8Array(0));
  return png.finish();
}

/** A 24-bit BMP. */
export function encodeBmp(width: number, height: number, pixel: (x: number, y: number) => [number, number, number]): Uint8Array {
  const rowBytes = Math.ceil((width * 3) / 4) * 4;
  const out = new ByteWriter();
  out.ascii('BM');
  out.u32le(54 + rowBytes * height);
  out.u32le(0);
  out.u32le(54);
  out.u32le(40);
  out.u32le(width);
  out.u32le(height);
  out.u16le(1);
  out.u16le(24);
  out.u32le(0);
  out.u32le(rowBytes * height);
  out.u32le(2835);
  out.u32le(2835);
  out.u32le(0);
  out.u32le(0);
  for (let y = height - 1; y >= 0; y -= 1) {
    const row = new Uint8Array(rowBytes);
    for (let x = 0; x < width; x += 1) {
      const [r, g, b] = pixel(x, y);
      row[x * 3] = b;
      row[x * 3 + 1] = g;
      row[x * 3 + 2] = r;
    }
    out.push(row);
  }
  return out.finish();
}

/** A 1x1 red GIF (the smallest valid GIF87a). */
export const RED_PIXEL_GIF = Uint8Array.from(atob('R0lGODdhAQABAPAAAP8AAAAAACwAAAAAAQABAAACAkQBADs='), (c) => c.charCodeAt(0));

/** A smooth sky-to-sunset gradient. */
export function sunsetPixel(width: number, height: number): (x: number, y: number) => [number, number, number] {
  return (x, y) => {
    const t = y / height;
    const sun = Math.max(0, 1 - Math.hypot(x - width * 0.62, y - height * 0.66) / (height * 0.22));
    const r = Math.min(255, 40 + 215 * t + 60 * sun);
    const g = Math.min(255, 70 + 90 * t * (1 - t) * 2 + 120 * sun);
    const b = Math.min(255, 160 - 110 * t + 20 * sun);
    return [r | 0, g | 0, b | 0];
  };
}

/** A small PNG tinted by `seed`; every one of them has the same byte size. */
export const THUMB_WIDTH = 48;
export const THUMB_HEIGHT = 32;
export function thumbnailPng(seed: number): Uint8Array {
  const h = mix32(seed);
  const base: [number, number, number] = [h & 0xff, (h >>> 8) & 0xff, (h >>> 16) & 0xff];
  return encodePng(THUMB_WIDTH, THUMB_HEIGHT, (x, y) => [
    (base[0] + x * 3) & 0xff,
    (base[1] + y * 5) & 0xff,
    (base[2] + (x ^ y) * 2) & 0xff,
  ]);
}
export const THUMBNAIL_SIZE = thumbnailPng(0).length;

export const LOGO_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="240" height="120" viewBox="0 0 240 120">
  <rect width="240" height="120" rx="16" fill="#1f6feb"/>
  <circle cx="60" cy="60" r="28" fill="none" stroke="#fff" stroke-width="10"/>
  <circle cx="104" cy="60" r="28" fill="none" stroke="#9ecbff" stroke-width="10"/>
  <text x="146" y="70" font-family="sans-serif" font-size="30" fill="#fff">linkfs</text>
</svg>
`;

// DEVELOPMENT FAKE — the folder tree behind the fake share (see fake-share.ts): a
// generated tree with one directory of 100,000 entries, nested folders, real text and
// image files, symlinks and awkward names. Entries get ids in the order a sharer's
// walk would find them, so "the first n entries" is what a visitor has received.

import type { EntryId, EntryKind, EntryRow } from '../src/api';
import {
  LOGO_SVG,
  RED_PIXEL_GIF,
  THUMBNAIL_SIZE,
  encodeBmp,
  encodePng,
  fixedContent,
  linesContent,
  mix32,
  noiseContent,
  sunsetPixel,
  textContent,
  thumbnailPng,
  type FakeContent,
} from './fake-files';

export interface FakeEntry {
  row: EntryRow;
  /** Absent for directories and symlinks. */
  content?: FakeContent;
  /** Reads of this file fail halfway, as if it changed on the sharer's disk. */
  changesWhileRead?: boolean;
  /** Children ids in walk (id) order, directories only. */
  children?: number[];
}

export const BIG_FOLDER_NAME = 'big folder (100k)';
export const BIG_FOLDER_SIZE = 100_000;

const NOW = Math.floor(Date.UTC(2026, 10, 21, 12, 0, 0) / 1000);
const YEAR = 365 * 24 * 3600;

export class FakeTree {
  readonly entries: FakeEntry[] = [];
  /** Where new entries of the "live" folder go. */
  readonly liveDir: number;

  constructor() {
    const root = this.add(-1, 'linkfs demo (development fake)', 'dir');
    this.buildSmallFolders(root);
    this.liveDir = this.add(root, 'live', 'dir');
    this.file(this.liveDir, 'about.txt', textContent('New files appear in this folder every few seconds, like a folder someone is writing to.\n'));
    this.buildBigFolder(root);
  }

  get(id: number): FakeEntry | undefined {
    return this.entries[id];
  }

  /** Adds an entry and returns its id. */
  add(parent: number, name: string, kind: EntryKind, extra: Partial<FakeEntry> = {}, mtime = NOW - 3600): number {
    const id = this.entries.length;
    const row: EntryRow = {
      id: id as EntryId,
      parent: Math.max(parent, 0) as EntryId,
      name,
      kind,
      size: extra.content?.size ?? 0,
      mtime,
      mode: kind === 'dir' ? 0o755 : 0o644,
    };
    const entry: FakeEntry = { row, ...extra };
    if (kind === 'dir') entry.children = [];
    this.entries.push(entry);
    if (parent >= 0) this.entries[parent]?.children?.push(id);
    return id;
  }

  file(parent: number, name: string, content: FakeContent, mtime?: number): number {
    return this.add(parent, name, 'file', { content }, mtime);
  }

  symlink(parent: number, name: string, target: string): number {
    const id = this.add(parent, name, 'symlink');
    const row = this.entries[id]?.row;
    if (row) {
      row.target = target;
      row.size = new TextEncoder().encode(target).length;
      row.mode = 0o777;
    }
    return id;
  }

  private buildSmallFolders(root: number): void {
    const photos = this.add(root, 'photos', 'dir');
    const y2024 = this.add(photos, '2024', 'dir');
    this.file(y2024, 'sunset.png', fixedContent(encodePng(640, 400, sunsetPixel(640, 400))), NOW - 40 * 24 * 3600);
    this.file(y2024, 'pattern.bmp', fixedContent(encodeBmp(96, 64, (x, y) => [(x * 4) & 0xff, (y * 4) & 0xff, ((x ^ y) * 8) & 0xff])));
    this.file(y2024, 'red-pixel.gif', fixedContent(RED_PIXEL_GIF));
    this.file(y2024, 'logo.svg', textContent(LOGO_SVG));
    this.file(y2024, 'broken.png', noiseContent(5000, 7));
    const y2023 = this.add(photos, '2023', 'dir');
    for (let i = 1; i <= 12; i += 1) {
      this.file(y2023, `IMG_${String(i).padStart(4, '0')}.png`, fixedContent(thumbnailPng(i)), NOW - YEAR - i * 86400);
    }

    const docs = this.add(root, 'docs', 'dir');
    this.file(docs, 'README.md', textContent(README));
    this.file(docs, 'notes.txt', textContent('Shopping list\n- milk\n- bread\n- 🍓 strawberries\n'));
    this.file(docs, 'config.json', textContent(JSON.stringify({ name: 'demo', port: 8080, tags: ['a', 'b'] }, null, 2) + '\n'));
    this.file(docs, 'main.rs', textContent('fn main() {\n    println!("hello from a shared folder");\n}\n'));
    this.file(docs, 'LICENSE', textContent('Permission is hereby granted, free of charge, to any person obtaining a copy...\n'));
    this.file(docs, 'unnamed-text', textContent('A file without an extension whose bytes are plain UTF-8 text: ünïcödé.\n'));
    this.file(docs, 'unnamed-binary', noiseContent(4096, 3));
    this.file(docs, 'server.log', linesContent(3 * 1024 * 1024 + 123, 'server.log'));
    this.file(docs, 'archive.zip', noiseContent(24 * 1024 * 1024, 11));
    this.add(docs, 'vanishing.txt', 'file', { content: linesContent(2 * 1024 * 1024, 'vanishing'), changesWhileRead: true });

    const odd = this.add(root, 'Ünïcödé & spaces #1 %20?', 'dir');
    this.file(odd, '日本語のファイル.txt', textContent('こんにちは、世界。\n'));
    this.file(odd, 'a%2Fb — not a slash.txt', textContent('The name contains %2F literally.\n'));

    this.add(root, 'empty folder', 'dir');
    let deep = this.add(root, 'deep', 'dir');
    for (const name of ['a', 'b', 'c', 'd', 'e', 'f']) deep = this.add(deep, name, 'dir');
    this.file(deep, 'bottom.txt', textContent('You found the bottom.\n'));

    this.symlink(root, 'latest photos', 'photos/2024');
    this.symlink(root, 'outside', '/etc/passwd');
  }

  private buildBigFolder(root: number): void {
    const big = this.add(root, BIG_FOLDER_NAME, 'dir');
    const dirs = 100;
    for (let i = 0; i < dirs; i += 1) {
      const dir = this.add(big, `group-${String(i).padStart(3, '0')}`, 'dir', {}, NOW - (mix32(i) % YEAR));
      this.file(dir, 'index.txt', linesContent(640, `group ${i}`));
    }
    const kinds = ['report', 'data', 'frame', 'blob'] as const;
    for (let i = 0; i < BIG_FOLDER_SIZE - dirs; i += 1) {
      const h = mix32(i + 1);
      const kind = kinds[h % kinds.length] ?? 'blob';
      const n = String(i).padStart(6, '0');
      const mtime = NOW - (h % (3 * YEAR));
      switch (kind) {
        case 'report':
          this.file(big, `report-${n}.txt`, linesContent(64 * (1 + (h % 200)), `report ${n}`), mtime);
          break;
        case 'data':
          this.file(big, `data-${n}.csv`, linesContent(64 * (1 + (h % 5000)), `data ${n}`), mtime);
          break;
        case 'frame':
          this.file(big, `frame-${n}.png`, { size: THUMBNAIL_SIZE, bytes: lazyThumbnail(i) }, mtime);
          break;
        case 'blob':
          this.file(big, `blob-${n}.bin`, noiseContent(1 + (h % (8 * 1024 * 1024)), h), mtime);
          break;
      }
    }
  }
}

function lazyThumbnail(seed: number): FakeContent['bytes'] {
  let bytes: Uint8Array | null = null;
  return (offset, length) => {
    bytes ??= thumbnailPng(seed);
    return bytes.subarray(offset, offset + length);
  };
}

const README = `# linkfs demo share

This tree is generated in the browser by the **development fake** (web/dev/fake-share.ts).
It stands in for a real sharer while the UI is built and measured.

- \`big folder (100k)\` holds 100,000 entries.
- \`photos/2024\` holds real PNG, BMP, GIF and SVG images.
- \`docs\` holds text files, a 3 MiB log, a 24 MiB archive and a file that changes while read.
- \`live\` gains a file every few seconds.
`;

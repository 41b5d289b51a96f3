// Builds the directory trees the end-to-end tests share, in fresh temporary
// directories: names that break naive URL, HTML or path handling, empty things, sizes
// around the read-chunk boundaries, a 30-deep chain, mtimes and modes that are easy to
// get wrong, and symlinks inside and outside the tree.

import { randomBytes } from 'node:crypto';
import { chmod, lutimes, mkdir, mkdtemp, open, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { scratchDir } from './paths.ts';

export interface Fixture {
  /** The directory to share. */
  dir: string;
  /** Temp directory holding `dir` and what lies outside it. */
  base: string;
  /** Relative paths (inside `dir`) of entries tests look at. */
  paths: Record<string, string>;
  /** Text content of the small text files, by relative path. */
  texts: Record<string, string>;
  /** A file next to (outside) the shared directory that no visitor may read. */
  outsideSecretPath: string;
  outsideSecret: Buffer;
  remove(): Promise<void>;
}

/** The 255-byte (valid UTF-8) name: a mix of 1-, 2-, 3- and 4-byte characters. */
export function name255(): string {
  const cycle = ['é', '中', '🎉', 'a', 'ü', '文'];
  let name = 'long-';
  for (let i = 0; ; i += 1) {
    const next = cycle[i % cycle.length]!;
    if (Buffer.byteLength(name + next) > 255) break;
    name += next;
  }
  while (Buffer.byteLength(name) < 255) name += 'z';
  if (Buffer.byteLength(name) !== 255) throw new Error(`name255 is ${Buffer.byteLength(name)} bytes`);
  return name;
}

/** Names that are legal on Linux and that naive URL, HTML or path code mishandles. */
export const specialNames = [
  'with space.txt',
  "it's.txt",
  'say "hi".txt',
  '#hash.txt',
  '100% done.txt',
  '%41%2F.txt',
  'what?.txt',
  'a&b <c>.txt',
  'back\\slash.txt',
  '-leading-dash',
  '.hidden',
  'trailing space ',
  'café é.txt',
  'über',
  '中文.txt',
  'emoji 🎉🚀.bin',
] as const;

/** mtimes (seconds) that catch truncation, sign and rounding mistakes. */
export const interestingMtimes = [
  1_000_000_000, // 2001-09-09
  1_234_567_890.75, // fractional: must show as ...890
  1_700_000_000,
  4_102_444_800, // 2100-01-01
  2 ** 32 + 5, // 2106: does not fit 32 bits
  1, // 1970-01-01T00:00:01
];

/** Sizes around 4 KiB pages, the 61,392-byte read chunk and the 64 KiB message limit. */
export const dataSizes = [1, 2, 1000, 4095, 4096, 4097, 61_391, 61_392, 61_393, 65_535, 65_536, 65_537, (1 << 20) + 7, 3 * (1 << 20) - 1];

interface Builder {
  dir: string;
  files: string[];
  dirs: string[];
  symlinks: string[];
}

async function newBase(prefix: string): Promise<string> {
  await mkdir(scratchDir, { recursive: true });
  return mkdtemp(path.join(scratchDir, `${prefix}-`));
}

async function addDir(b: Builder, rel: string, mode = 0o755): Promise<void> {
  await mkdir(path.join(b.dir, rel), { recursive: true });
  await chmod(path.join(b.dir, rel), mode);
  b.dirs.push(rel);
}

async function addFile(b: Builder, rel: string, content: Buffer | string, mode = 0o644): Promise<void> {
  const full = path.join(b.dir, rel);
  await mkdir(path.dirname(full), { recursive: true });
  await writeFile(full, content);
  await chmod(full, mode);
  b.files.push(rel);
}

async function addSymlink(b: Builder, rel: string, target: string): Promise<void> {
  const full = path.join(b.dir, rel);
  await mkdir(path.dirname(full), { recursive: true });
  await symlink(target, full);
  b.symlinks.push(rel);
}

/**
 * Gives files and symlinks the interesting mtimes in turn and then every directory
 * (explicit or implied by a path), deepest first (creating an entry changes its parent's mtime, so directories go last).
 */
async function setMtimes(b: Builder, keepNow: (rel: string) => boolean): Promise<void> {
  let i = 0;
  const next = () => interestingMtimes[i++ % interestingMtimes.length]!;
  for (const rel of b.files) {
    if (keepNow(rel)) continue;
    const t = next();
    await utimes(path.join(b.dir, rel), t, t);
  }
  for (const rel of b.symlinks) {
    const t = next();
    await lutimes(path.join(b.dir, rel), t, t);
  }
  const all = new Set(b.dirs);
  for (const rel of [...b.files, ...b.symlinks, ...b.dirs]) {
    for (let d = path.posix.dirname(rel); d !== '.'; d = path.posix.dirname(d)) all.add(d);
  }
  const dirs = [...all].sort((x, y) => y.split('/').length - x.split('/').length);
  for (const rel of dirs) {
    const t = next();
    await utimes(path.join(b.dir, rel), t, t);
  }
}

function fixtureFrom(base: string, dir: string, paths: Record<string, string>, texts: Record<string, string>, secretPath: string, secret: Buffer): Fixture {
  return {
    dir,
    base,
    paths,
    texts,
    outsideSecretPath: secretPath,
    outsideSecret: secret,
    remove: () => rm(base, { recursive: true, force: true }),
  };
}

async function writeOutsideSecret(base: string): Promise<{ secretPath: string; secret: Buffer }> {
  const secretPath = path.join(base, 'outside', 'secret.txt');
  const secret = Buffer.from(`outside secret ${randomBytes(16).toString('hex')}\n`);
  await mkdir(path.dirname(secretPath), { recursive: true });
  await writeFile(secretPath, secret);
  return { secretPath, secret };
}

export interface FullFixtureOptions {
  /** Files in `many/`, to make listings span several 1000-entry windows. Default 1234. */
  manyFiles?: number;
}

/** The full fixture (about 1,400 entries, about 4.6 MB). */
export async function makeFixture(options: FullFixtureOptions = {}): Promise<Fixture> {
  const base = await newBase('fixture');
  const dir = path.join(base, 'share');
  await mkdir(dir);
  const b: Builder = { dir, files: [], dirs: [], symlinks: [] };
  const paths: Record<string, string> = {};
  const texts: Record<string, string> = {};

  texts['docs/readme.txt'] = 'linkfs fixture: hello, reader.\nThis is docs/readme.txt.\n';
  texts['docs/notes.md'] = '# Notes\n\n* one\n* two\n';
  for (const [rel, text] of Object.entries(texts)) await addFile(b, rel, text);
  paths.readme = 'docs/readme.txt';

  await addDir(b, 'empty-dir');
  await addDir(b, 'nested/empty');
  await addFile(b, 'zero.bin', '');
  await addFile(b, 'nested/zero-too', '');
  await addFile(b, 'nested/a/b/c.txt', 'c\n');
  paths.emptyDir = 'empty-dir';
  paths.emptyFile = 'zero.bin';

  await addDir(b, 'data');
  for (const size of dataSizes) await addFile(b, `data/random-${size}.bin`, randomBytes(size));

  await addDir(b, 'names');
  for (const name of specialNames) await addFile(b, `names/${name}`, `${name}\n`);
  const long = name255();
  await addFile(b, `names/${long}`, 'the name of this file is 255 bytes\n');
  paths.longName = `names/${long}`;
  await addFile(b, '中文/文件.txt', '中文内容\n');
  await addFile(b, 'über/straße.txt', 'Straße\n');
  await addFile(b, 'emoji 🎉/party 🥳.txt', '🎉\n');

  const chain = ['deep', ...Array.from({ length: 29 }, (_, i) => `d${String(i + 2).padStart(2, '0')}`)];
  paths.deepLeaf = `${chain.join('/')}/leaf.txt`;
  await addFile(b, paths.deepLeaf, 'thirty directories down\n');

  await addDir(b, 'modes');
  await addFile(b, 'modes/read-only.txt', 'r\n', 0o444);
  await addFile(b, 'modes/private.txt', 'p\n', 0o600);
  await addFile(b, 'modes/group.txt', 'g\n', 0o640);
  await addFile(b, 'modes/run.sh', '#!/bin/sh\necho run\n', 0o755);
  await addDir(b, 'modes/private-dir', 0o700);
  await addDir(b, 'modes/group-dir', 0o750);

  const manyFiles = options.manyFiles ?? 1234;
  await addDir(b, 'many');
  for (let i = 0; i < manyFiles; i += 1) await addFile(b, `many/f${String(i).padStart(5, '0')}`, `${i}\n`);

  const { secretPath, secret } = await writeOutsideSecret(base);
  await addDir(b, 'links');
  await addSymlink(b, 'links/to-readme', '../docs/readme.txt');
  await addSymlink(b, 'links/to-docs', '../docs');
  await addSymlink(b, 'links/escape', '../../outside/secret.txt');
  await addSymlink(b, 'links/abs-escape', secretPath);
  await addSymlink(b, 'links/dangling', 'does-not-exist');
  paths.insideLink = 'links/to-readme';
  paths.escapeLink = 'links/escape';
  paths.absEscapeLink = 'links/abs-escape';

  await setMtimes(b, (rel) => rel.startsWith('many/'));
  return fixtureFrom(base, dir, paths, texts, secretPath, secret);
}

/**
 * A small tree for UI and relay tests: a few directories, a text file to preview, and
 * `sizes/` whose files sort differently by name and by size.
 */
export async function makeSmallFixture(): Promise<Fixture> {
  const base = await newBase('small');
  const dir = path.join(base, 'share');
  await mkdir(dir);
  const b: Builder = { dir, files: [], dirs: [], symlinks: [] };
  const texts: Record<string, string> = {
    'docs/readme.txt': 'Hello from the small linkfs fixture.\n',
    'with space.txt': 'spaces\n',
    'nested/inner/deeper.txt': 'deeper\n',
  };
  for (const [rel, text] of Object.entries(texts)) await addFile(b, rel, text);
  await addDir(b, 'empty-dir');
  await addDir(b, 'sizes');
  // name order a, b, c, d; size order (ascending) d, b, c, a.
  await addFile(b, 'sizes/a.bin', randomBytes(3000));
  await addFile(b, 'sizes/b.bin', randomBytes(1000));
  await addFile(b, 'sizes/c.bin', randomBytes(2000));
  await addFile(b, 'sizes/d.bin', randomBytes(10));
  await addFile(b, 'random.bin', randomBytes(200_000));
  const { secretPath, secret } = await writeOutsideSecret(base);
  await setMtimes(b, () => false);
  return fixtureFrom(base, dir, { readme: 'docs/readme.txt', sizes: 'sizes' }, texts, secretPath, secret);
}

/** A directory holding one file of `bytes` random bytes, named `big.bin`. */
export async function makeBigFileFixture(bytes: number): Promise<Fixture> {
  const base = await newBase('big');
  const dir = path.join(base, 'share');
  await mkdir(dir);
  const chunk = 1 << 20;
  const parts: Buffer[] = [];
  for (let done = 0; done < bytes; done += chunk) parts.push(randomBytes(Math.min(chunk, bytes - done)));
  await writeFile(path.join(dir, 'big.bin'), Buffer.concat(parts));
  const { secretPath, secret } = await writeOutsideSecret(base);
  return fixtureFrom(base, dir, { big: 'big.bin' }, {}, secretPath, secret);
}

/** A sparse file of `size` bytes with 8 MiB of random bytes at its start, middle and end. */
export async function sparseWithRandomRegions(file: string, size: number): Promise<void> {
  const fh = await open(file, 'w');
  try {
    await fh.truncate(size);
    for (const at of [0, Math.floor(size / 2 / 2 ** 20) * 2 ** 20, size - 8 * 2 ** 20]) await fh.write(randomBytes(8 * 2 ** 20), 0, 8 * 2 ** 20, at);
  } finally {
    await fh.close();
  }
}

// Generated trees for the scale and reconnect tests, made once with linkfs-gen-tree
// and cached under the scratch directory.

import { spawnSync } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { binary, scratchDir } from './paths.ts';

const log = (line: string) => console.error(line);

export /**
 * The generated tree for `n` files (cached: generation takes seconds to minutes);
 * `empty`: every file 0 bytes (linkfs-gen-tree --empty); `oneFolder`: all `n` in one
 * folder (--one-folder).
 */
async function generatedTree(n: number, options: { empty?: boolean; oneFolder?: boolean } = {}): Promise<string> {
  const empty = options.empty === true;
  const oneFolder = options.oneFolder === true;
  const dir = path.join(scratchDir, `scale-${n}${oneFolder ? '-one-folder' : ''}${empty ? '-empty' : ''}`);
  const marker = `${dir}.done`;
  // Bump the shape's version when linkfs-gen-tree changes what it makes.
  const done = `${n} files, shape 2${oneFolder ? ', one folder' : ''}${empty ? ', empty' : ''}\n`;
  if ((await readFile(marker, 'utf8').catch(() => '')) === done) return dir;
  await rm(dir, { recursive: true, force: true });
  await mkdir(scratchDir, { recursive: true });
  log(`scale: generating ${n} files under ${dir} ...`);
  const r = spawnSync(binary('linkfs-gen-tree'), ['--files', String(n), '--out', dir, ...(empty ? ['--empty'] : []), ...(oneFolder ? ['--one-folder'] : [])], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`linkfs-gen-tree failed (${r.status ?? r.signal}): ${r.stdout}`);
  log(`scale: generated: ${r.stdout.trim()}`);
  // The kernel writes a fresh tree's million inodes back to disk for tens of seconds
  // after it is made, on the same 2 cores as the timed steps that follow: a user's
  // folder is not written the moment before it is shared, so the test waits for that.
  const synced = spawnSync('sync', ['-f', dir], { stdio: 'inherit' });
  if (synced.status !== 0) log(`scale: sync failed (${synced.status ?? synced.signal}), timings may include the tree's writeback`);
  await writeFile(marker, done);
  return dir;
}


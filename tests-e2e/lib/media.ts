// Test media made with Debian's ffmpeg: an MP4 whose index (moov) is at the END
// (ffmpeg's default, not "faststart"), and a WebM; plus where an MP4's moov sits,
// to prove the fixture is what it claims.

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, open, rename } from 'node:fs/promises';
import path from 'node:path';
import { scratchDir } from './paths.ts';

/** `makeVideo`, made once per set of parameters and kept under the scratch folder; copied to `out`. */
export async function cachedVideo(out: string, seconds: number, kbps: number): Promise<void> {
  const cache = path.join(scratchDir, 'media-cache');
  await mkdir(cache, { recursive: true });
  const kept = path.join(cache, `${seconds}s-${kbps}k${path.extname(out)}`);
  if (!existsSync(kept)) {
    const making = `${kept}.making${path.extname(out)}`;
    makeVideo(making, seconds, kbps);
    await rename(making, kept);
  }
  await copyFile(kept, out);
}

/** Makes `seconds` of 320x180, 10 fps test video with a tone, at about `kbps`, into `out` (.mp4 or .webm). */
export function makeVideo(out: string, seconds: number, kbps: number): void {
  const webm = out.endsWith('.webm');
  const codec = webm ? ['-c:v', 'libvpx', '-deadline', 'realtime', '-cpu-used', '8', '-c:a', 'libopus'] : ['-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-c:a', 'aac'];
  const r = spawnSync(
    'ffmpeg',
    [
      '-hide_banner', '-loglevel', 'error', '-y',
      '-f', 'lavfi', '-i', `testsrc2=size=320x180:rate=10:duration=${seconds}`,
      '-f', 'lavfi', '-i', `sine=frequency=440:duration=${seconds}`,
      ...codec,
      '-b:v', `${kbps}k`, '-minrate', `${kbps}k`, '-maxrate', `${kbps}k`, '-bufsize', `${kbps * 2}k`,
      '-g', '20',
      out,
    ],
    { stdio: ['ignore', 'inherit', 'inherit'] },
  );
  if (r.status !== 0) throw new Error(`ffmpeg could not make ${out} (is the Debian package ffmpeg installed? scripts/setup installs it)`);
}

/** Offsets of the top-level MP4 boxes named `names`, in file order. */
export async function mp4Boxes(file: string): Promise<{ type: string; offset: number; size: number }[]> {
  const fh = await open(file, 'r');
  try {
    const { size: total } = await fh.stat();
    const boxes: { type: string; offset: number; size: number }[] = [];
    let at = 0;
    const head = Buffer.alloc(16);
    while (at + 8 <= total && boxes.length < 64) {
      await fh.read(head, 0, 16, at);
      let size = head.readUInt32BE(0);
      const type = head.toString('latin1', 4, 8);
      if (size === 1) size = Number(head.readBigUInt64BE(8));
      else if (size === 0) size = total - at;
      if (size < 8) break;
      boxes.push({ type, offset: at, size });
      at += size;
    }
    return boxes;
  } finally {
    await fh.close();
  }
}

// Downloads one file, or a folder as a ZIP, from a real share through the page, the
// way a user's click does, and reports it:
//
//   SHARE_DIR=DIR npm run e2e:download -- PATH [--zip] [--out FILE] [--drops N] [--lan]
//   LINK=URL npm run e2e:download -- PATH [--zip] [--out FILE]
//
// shares DIR with the real `linkfs share` (or, with LINK, opens a link that is
// already shared, somewhere this command did not start: across a network path,
// say), opens the link in Chromium, waits for the complete index, clicks PATH's
// download button (a folder, or '' for the whole share,
// needs --zip and is saved as one ZIP), lets the browser write it, and moves it to
// --out (default tests-e2e/out/download/<name>). --drops N drops the data channel
// N times while it runs (SIGUSR1 to the sharer, spread over the transfer): the
// download must resume, not restart. --lan shares with `--bind 0.0.0.0:PORT`, so the
// link names this machine's LAN address: a plain-http page, as a colleague opens it.
//
// The LAST stdout line is one JSON object: bytes, seconds, mb_per_s, sha256 (of the
// file written), browser_peak_bytes (page + worker + service worker JS heaps + both
// wasm memories, at their highest), browser_growth_bytes (that minus just before the
// click), route, lanes (the most extra connections the page showed carrying the
// transfer, [data-testid=connection-info]), drops, zip_files, zip_notes, error. Exit
// status 1 on any failure.

import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { launchChromium, openLink, type ChromiumInstance } from './lib/chromium.ts';
import { downloadThroughPage, type PageDownloadResult } from './lib/page-download.ts';
import { outDir } from './lib/paths.ts';
import { freePort } from './lib/relay-process.ts';
import { startShare, type ShareProcess } from './lib/share-process.ts';

const log = (line: string) => console.error(line);

interface Args {
  target: string;
  zip: boolean;
  out: string | null;
  drops: number;
  /** Share with `--bind 0.0.0.0:PORT`: the link names the LAN address (plain http, not a secure context). */
  lan: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { target: '', zip: false, out: null, drops: 0, lan: false };
  let positional: string | null = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') continue;
    else if (a === '--zip') args.zip = true;
    else if (a === '--out') args.out = argv[++i] ?? '';
    else if (a === '--drops') args.drops = Number(argv[++i] ?? 'x');
    else if (a === '--lan') args.lan = true;
    else if (a.startsWith('--')) throw new Error(`unknown option ${a} (options: --zip, --out FILE, --drops N, --lan)`);
    else if (positional === null) positional = a;
    else throw new Error(`one PATH only (got ${positional} and ${a})`);
  }
  if (positional === null) throw new Error('no PATH given: SHARE_DIR=DIR npm run e2e:download -- PATH [--zip] [--out FILE]');
  if (!Number.isInteger(args.drops) || args.drops < 0) throw new Error('--drops takes a whole number');
  args.target = positional.replace(/^\.?\/+|\/+$/g, '').replace(/^\.$/, '');
  return args;
}

async function waitComplete(page: import('playwright-core').Page, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await page.evaluate(() => window.linkfsShare?.progress().complete ?? false))) {
    if (Date.now() > deadline) throw new Error(`the index was not complete within ${timeoutMs / 1000} s`);
    await page.waitForTimeout(100);
  }
}

/** Watches the page's connection info for the most lanes it shows, until stopped. */
function watchLanes(page: import('playwright-core').Page): { stop: () => number } {
  let most = 0;
  const timer = setInterval(() => {
    page
      .locator('[data-testid=connection-info]')
      .getAttribute('data-lanes', { timeout: 1000 })
      .then((v) => {
        most = Math.max(most, Number(v ?? 0) || 0);
      })
      .catch(() => undefined);
  }, 500);
  return {
    stop: () => {
      clearInterval(timer);
      return most;
    },
  };
}

async function main(): Promise<PageDownloadResult & { drops: number; lanes: number }> {
  const link = process.env.LINK;
  const raw = process.env.SHARE_DIR;
  if (!raw && !link) throw new Error('neither SHARE_DIR nor LINK is set: SHARE_DIR=/some/dir npm run e2e:download -- PATH, or LINK=http://host:port/#room.secret npm run e2e:download -- PATH');
  if (raw && link) throw new Error('set SHARE_DIR (share it here) or LINK (open a link shared elsewhere), not both');
  const args = parseArgs(process.argv.slice(2));
  if (link && args.drops > 0) throw new Error('--drops needs the sharer started here (SHARE_DIR): it drops the channel from the sharer\'s side');
  const dir = raw ? path.resolve(raw) : null;
  if (dir !== null) {
    const source = await stat(path.join(dir, args.target)).catch(() => null);
    if (source === null) throw new Error(`${path.join(dir, args.target)} does not exist`);
    if (source.isDirectory() && !args.zip) throw new Error(`${args.target || 'the share'} is a folder: add --zip to download it as one ZIP`);
    if (!source.isDirectory() && args.zip) throw new Error(`${args.target} is a file: --zip is for folders`);
  }
  const shareName = dir === null ? 'share' : path.basename(dir);
  const name = args.target === '' ? `${shareName}.zip` : `${path.basename(args.target)}${args.zip ? '.zip' : ''}`;
  const out = path.resolve(args.out ?? path.join(outDir, 'download', name));
  await mkdir(path.dirname(out), { recursive: true });

  let share: ShareProcess | undefined;
  let chromium: ChromiumInstance | undefined;
  try {
    // A link to another machine's plain-http address opens as users open it: not a
    // secure context, so no service worker, and the page saves through a Blob the
    // browser keeps on its disk (the JSON's `route` says which way it went).
    chromium = await launchChromium({ name: 'download', log });
    const page = await chromium.page();
    if (link && args.lan) throw new Error('--lan shares SHARE_DIR on the LAN address: it needs SHARE_DIR, not LINK');
    if (dir !== null) share = await startShare(dir, { name: 'share', ...(args.lan ? { args: ['--bind', `0.0.0.0:${await freePort()}`, '--no-qr'] } : {}) });
    await openLink(page, share?.link ?? link!, ['connected'], 60_000);
    await waitComplete(page, 10 * 60_000);
    const s = share;
    let dropped = 0;
    const lanes = watchLanes(page);
    const result = await downloadThroughPage(page, {
      target: args.target,
      out,
      log,
      browserPid: chromium.browserPid,
      onTick: (sent, total) => {
        // Drop the channel at evenly spread points of the transfer.
        if (dropped < args.drops && total > 1 && sent >= ((dropped + 1) / (args.drops + 1)) * total) {
          dropped += 1;
          log(`download: dropping the data channel (${dropped} of ${args.drops}) at ${sent} of ${total} bytes`);
          if (s) process.kill(s.pid, 'SIGUSR1');
        }
      },
    });
    const mostLanes = lanes.stop();
    if (dropped < args.drops) throw new Error(`only ${dropped} of ${args.drops} drops happened before the download finished (too small a file to drop it that often)`);
    if (chromium.pageErrors.length > 0) throw new Error(`uncaught errors in the page: ${chromium.pageErrors.join('; ')}`);
    await chromium.close();
    chromium = undefined;
    await share?.stop();
    share = undefined;
    return { ...result, drops: dropped, lanes: mostLanes };
  } finally {
    await chromium?.close().catch(() => undefined);
    await share?.kill();
  }
}

try {
  const r = await main();
  console.log(JSON.stringify({ ...r, error: null }));
  process.exit(0);
} catch (e) {
  const error = e instanceof Error ? e.message : String(e);
  log(`download: FAILED: ${error}`);
  console.log(JSON.stringify({ bytes: null, seconds: null, mb_per_s: null, sha256: null, browser_peak_bytes: null, error }));
  process.exit(1);
}

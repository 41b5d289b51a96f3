// Launches the system Chromium through playwright-core, one fresh profile per browser,
// with the flags that work on this machine (see docs/webrtc-notes.md), and forwards
// what goes wrong in its pages to our log.

import { mkdir, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { outDir, scratchDir } from './paths.ts';
import { openingStep } from './page-api.ts';

export const chromiumPath = process.env.LINKFS_CHROMIUM ?? '/usr/bin/chromium';

/** Flags for a headless Chromium running as root in a network namespace. */
const baseArgs = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  ...(process.env.LINKFS_CHROMIUM_EXTRA ? process.env.LINKFS_CHROMIUM_EXTRA.split(' ') : []),
];

/**
 * Features we disable on top of Playwright's own list. Without the mDNS one Chromium
 * hides its host candidates behind `.local` names that nothing here can resolve.
 */
const ourDisabledFeatures = ['WebRtcHideLocalIpsWithMdns'];

export type Log = (line: string) => void;
export const defaultLog: Log = (line) => console.log(line);

export interface ChromiumOptions {
  /** Prefix for every forwarded line, e.g. 'browser-a'. */
  name: string;
  log?: Log;
  /** A phone: its screen in CSS pixels, device pixel ratio, touch and mobile viewport. */
  phone?: { width: number; height: number; scale: number };
}

export interface ChromiumInstance {
  readonly name: string;
  readonly context: BrowserContext;
  readonly userDataDir: string;
  /** The browser's main process (its renderers descend from it), if found. */
  readonly browserPid: number | null;
  /** Uncaught exceptions and crashes seen in any page of this browser. */
  readonly pageErrors: string[];
  /** The first call returns the tab the browser opened with, later calls new tabs. */
  page(): Promise<Page>;
  /** Closes the browser and removes its profile. */
  close(): Promise<void>;
}

/**
 * Chromium keeps only the LAST `--disable-features` on its command line, and Playwright
 * passes its own list. To add ours without dropping Playwright's, we learn Playwright's
 * exact switch once (from a probe browser's command line), tell Playwright to leave it
 * out, and pass the merged list ourselves.
 */
let playwrightDisableFeatures: Promise<string | null> | undefined;

async function browserCommandLine(userDataDir: string): Promise<string[] | null> {
  return (await browserProcess(userDataDir))?.args ?? null;
}

/** The browser's main process for a profile: its pid and command line. */
async function browserProcess(userDataDir: string): Promise<{ pid: number; args: string[] } | null> {
  const marker = `--user-data-dir=${userDataDir}`;
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let raw: string;
    try {
      raw = await readFile(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue; // exited meanwhile, or not ours to read
    }
    const args = raw.split('\0').filter((a) => a !== '');
    if (args.includes(marker) && !args.some((a) => a.startsWith('--type='))) return { pid: Number(pid), args };
  }
  return null;
}

async function launchContext(userDataDir: string, args: string[], ignoreDefaultArgs: string[], phone?: ChromiumOptions['phone']): Promise<BrowserContext> {
  return chromium.launchPersistentContext(userDataDir, {
    ...(phone ? { viewport: { width: phone.width, height: phone.height }, deviceScaleFactor: phone.scale, isMobile: true, hasTouch: true } : {}),
    executablePath: chromiumPath,
    headless: true,
    chromiumSandbox: false,
    args,
    ignoreDefaultArgs,
    timeout: 30_000,
  });
}

async function probeDefaultDisableFeatures(): Promise<string | null> {
  await mkdir(scratchDir, { recursive: true });
  const dir = await mkdtemp(path.join(scratchDir, 'chromium-probe-'));
  try {
    const context = await launchContext(dir, baseArgs, []);
    try {
      const cmdline = await browserCommandLine(dir);
      if (cmdline === null) throw new Error(`could not find the Chromium process using ${dir} in /proc`);
      return cmdline.find((a) => a.startsWith('--disable-features=')) ?? null;
    } finally {
      await context.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function attachPageLogging(page: Page, name: string, log: Log, pageErrors: string[]): void {
  const everything = process.env.LINKFS_E2E_CONSOLE === 'all';
  page.on('console', (msg) => {
    const type = msg.type();
    if (everything || type === 'error' || type === 'warning') {
      log(`[${name}] console.${type}: ${msg.text()}`);
    }
  });
  page.on('pageerror', (err) => {
    const line = `${err.name}: ${err.message}`;
    pageErrors.push(line);
    log(`[${name}] pageerror: ${err.stack ?? line}`);
  });
  page.on('crash', () => {
    pageErrors.push('page crashed');
    log(`[${name}] page crashed`);
  });
}

/** Starts one Chromium with a fresh, empty profile (so no IndexedDB cache from earlier runs). */
export async function launchChromium(options: ChromiumOptions): Promise<ChromiumInstance> {
  const { name } = options;
  const log = options.log ?? defaultLog;
  playwrightDisableFeatures ??= probeDefaultDisableFeatures();
  const theirs = await playwrightDisableFeatures;
  const features = [...(theirs ? theirs.slice('--disable-features='.length).split(',') : []), ...ourDisabledFeatures];
  const args = [...baseArgs, `--disable-features=${features.filter((f) => f !== '').join(',')}`];

  await mkdir(scratchDir, { recursive: true });
  const userDataDir = await mkdtemp(path.join(scratchDir, `chromium-${name}-`));
  let context: BrowserContext;
  try {
    context = await launchContext(userDataDir, args, theirs ? [theirs] : [], options.phone);
  } catch (e) {
    await rm(userDataDir, { recursive: true, force: true });
    throw new Error(`[${name}] Chromium (${chromiumPath}) did not start: ${(e as Error).message}`);
  }

  // The merged switch must be the only one, or Chromium silently uses another list.
  const main = await browserProcess(userDataDir);
  const cmdline = main?.args ?? null;
  const switches = (cmdline ?? []).filter((a) => a.startsWith('--disable-features='));
  if (cmdline !== null && (switches.length !== 1 || !switches[0]!.includes('WebRtcHideLocalIpsWithMdns'))) {
    await context.close();
    await rm(userDataDir, { recursive: true, force: true });
    throw new Error(`[${name}] Chromium started with ${switches.length} --disable-features switches (${switches.join(' ')}); expected one that includes WebRtcHideLocalIpsWithMdns`);
  }

  // tsx compiles with esbuild's keepNames, which wraps named functions inside the
  // closures we hand to page.evaluate in `__name(fn, "name")`: give pages that helper.
  await context.addInitScript({ content: 'globalThis.__name ??= (fn) => fn;' });

  const pageErrors: string[] = [];
  context.on('page', (page) => attachPageLogging(page, name, log, pageErrors));
  for (const page of context.pages()) attachPageLogging(page, name, log, pageErrors);

  let initialUsed = false;
  let closed = false;
  return {
    name,
    context,
    userDataDir,
    browserPid: main?.pid ?? null,
    pageErrors,
    async page() {
      const initial = context.pages()[0];
      if (!initialUsed && initial !== undefined) {
        initialUsed = true;
        return initial;
      }
      return context.newPage();
    },
    async close() {
      if (closed) return;
      closed = true;
      try {
        await context.close();
      } finally {
        await rm(userDataDir, { recursive: true, force: true });
      }
    },
  };
}

/** `document.body.dataset.state` now, or null before the app has set one. */
export async function bodyState(page: Page): Promise<string | null> {
  return page.evaluate(() => document.body?.dataset.state ?? null);
}

/** The text of the app's `[data-testid=status]`, or '' if there is none. */
export async function statusText(page: Page): Promise<string> {
  const el = page.locator('[data-testid=status]').first();
  return (await el.count()) > 0 ? ((await el.textContent()) ?? '') : '';
}

/** States after which waiting for another state is pointless. */
const terminalStates = new Set(['invalid-link', 'link-ended', 'password-wrong', 'error']);

/**
 * Waits until `document.body.dataset.state` is one of `wanted`. Fails at once if the page
 * lands in a terminal state it was not asked for, and on timeout; both errors say the
 * state the page is in and its status text.
 */
export async function waitForState(page: Page, wanted: string[], timeoutMs = 20_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let state: string | null = null;
  for (;;) {
    state = await bodyState(page).catch(() => null);
    if (state !== null && wanted.includes(state)) return state;
    if (state !== null && terminalStates.has(state)) {
      throw new Error(`page state is '${state}' (status: ${JSON.stringify(await statusText(page))}), expected ${wanted.map((w) => `'${w}'`).join(' or ')}`);
    }
    if (Date.now() >= deadline) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const status = await statusText(page).catch(() => '');
  // Set while the page's index is opening: the step it stopped at.
  const opening = await page.evaluate(() => document.body?.dataset.opening ?? null).catch(() => null);
  const stuck = openingStep(opening);
  throw new Error(`page state did not become ${wanted.map((w) => `'${w}'`).join(' or ')} within ${timeoutMs} ms: it is ${state === null ? 'unset (no body[data-state])' : `'${state}'`}, status: ${JSON.stringify(status)}${stuck}`);
}

/** Opens `url` in `page` and waits for one of the `wanted` body states. */
export async function openLink(page: Page, url: string, wanted: string[] = ['connected'], timeoutMs = 20_000): Promise<string> {
  const response = await page.goto(url, { waitUntil: 'domcontentloaded', timeout: timeoutMs });
  if (response !== null && !response.ok()) {
    throw new Error(`GET ${url} answered ${response.status()} ${response.statusText()}`);
  }
  return waitForState(page, wanted, timeoutMs);
}

/** Saves a screenshot to tests-e2e/out/<name>.png; returns its path, or null if the page is gone. */
export async function screenshot(page: Page, name: string): Promise<string | null> {
  await mkdir(outDir, { recursive: true });
  const file = path.join(outDir, `${name.replace(/[^A-Za-z0-9._-]+/g, '_')}.png`);
  try {
    await page.screenshot({ path: file, fullPage: true, timeout: 5_000 });
    return file;
  } catch {
    return null;
  }
}

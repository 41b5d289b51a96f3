// Launches Debian's Firefox ESR through puppeteer-core over WebDriver BiDi (nothing
// downloaded), one fresh profile per browser, with the prefs that let downloads land in
// a given directory without any dialog, and forwards what goes wrong in its pages to
// our log, like chromium.ts does for Chromium.
//
// Measured with Firefox 153.7.0esr and puppeteer-core 24.43 (see
// tests-e2e/probe/README.md for the experiments):
// - No pref is needed for WebRTC inside tests-e2e/run's namespace: the page connects to
//   a native sharer with Firefox's defaults (mDNS-obfuscated host candidates included,
//   since the native side learns Firefox's address from its checks).
// - puppeteer's download-behaviour API is CDP-only; over BiDi the prefs below do it.
// - While a download runs Firefox keeps an EMPTY placeholder with the final name and
//   writes the data to `<stem>.<random><ext>.part` (see isPartOf), renamed over the
//   placeholder when the download ends.
// - Firefox reports "Failed to load ‘’. A ServiceWorker intercepted the request and
//   encountered an unexpected error." as a page error (it lands in pageErrors) both
//   when a SW stream errors (a real failure) and when a media element drops a 206
//   response it no longer wants after a seek (harmless): filter by context.

import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { outDir, scratchDir } from './paths.ts';
import { openingStep } from './page-api.ts';

export const firefoxPath = process.env.LINKFS_FIREFOX ?? '/usr/bin/firefox-esr';

export type Log = (line: string) => void;
export const defaultLog: Log = (line) => console.log(line);

export interface FirefoxOptions {
  /** Prefix for every forwarded line, e.g. 'firefox-a'. */
  name: string;
  log?: Log;
  /** Where downloads go. Default: a fresh folder inside this browser's scratch folder (removed by close()). */
  downloadDir?: string;
  /** More prefs, e.g. for an experiment. They win over ours. */
  prefs?: Record<string, unknown>;
  /**
   * Lets the test stand in for the system's file dialog (`answerFolderDialog`):
   * `-remote-allow-system-access`, privileged access for the driver to Firefox's parent
   * process. It changes nothing a page may do; the page gets what a person's pick
   * gives it, through Firefox's own code and its own "Confirm Upload" prompt.
   */
  systemAccess?: boolean;
}

export interface FirefoxInstance {
  readonly name: string;
  readonly browser: Browser;
  /** Firefox's main process (its content processes descend from it), if known. */
  readonly pid: number | null;
  /** The profile (user.js holds the prefs below). */
  readonly userDataDir: string;
  /** Where downloads land, already created. */
  readonly downloadDir: string;
  /** Uncaught exceptions and crashes seen in any page of this browser. */
  readonly pageErrors: string[];
  /** The first call returns the tab the browser opened with, later calls new tabs. */
  page(): Promise<Page>;
  /** Closes the browser and removes its profile (and the download folder if we made it). */
  close(): Promise<void>;
}

/** Prefs that make every download go straight to `dir`, with no dialog and no panel. */
export function downloadPrefs(dir: string): Record<string, unknown> {
  return {
    'browser.download.folderList': 2, // 2 = browser.download.dir
    'browser.download.dir': dir,
    'browser.download.useDownloadDir': true,
    'browser.download.always_ask_before_handling_new_types': false,
    'browser.helperApps.neverAsk.saveToDisk': 'application/octet-stream,application/zip,application/x-zip-compressed,application/pdf,video/mp4,video/webm',
    'browser.download.alwaysOpenPanel': false,
    'browser.download.panel.shown': true,
    'browser.download.manager.showWhenStarting': false,
    // Several downloads from one page without a click in between are otherwise held
    // as "This site is trying to download multiple files".
    'browser.download.enable_spam_prevention': false,
    // Write straight into `dir` (as `<name>.part`), not into a temp folder first.
    'browser.download.start_downloads_in_tmp_dir': false,
    'pdfjs.disabled': true,
  };
}

/** Our prefs on top of puppeteer's own test profile (@puppeteer/browsers). */
function basePrefs(downloadDir: string): Record<string, unknown> {
  return {
    ...downloadPrefs(downloadDir),
    // Nothing may try to reach the internet (the namespace has none anyway).
    'network.captive-portal-service.enabled': false,
    'network.connectivity-service.enabled': false,
    'browser.aboutwelcome.enabled': false,
    'toolkit.telemetry.reportingpolicy.firstRunURL': '',
    'app.update.auto': false,
    'extensions.pocket.enabled': false,
    'browser.ping-centre.telemetry': false,
  };
}

function attachPageLogging(page: Page, name: string, log: Log, pageErrors: string[]): void {
  const everything = process.env.LINKFS_E2E_CONSOLE === 'all';
  page.on('console', (msg) => {
    const type = msg.type();
    if (everything || type === 'error' || type === 'warn') {
      log(`[${name}] console.${type}: ${msg.text()}`);
    }
  });
  page.on('pageerror', (err) => {
    const e = err as Error;
    const line = `${e.name ?? 'Error'}: ${e.message ?? String(err)}`;
    pageErrors.push(line);
    log(`[${name}] pageerror: ${e.stack ?? line}`);
  });
  page.on('error', (err) => {
    pageErrors.push(`page crashed: ${err.message}`);
    log(`[${name}] page crashed: ${err.message}`);
  });
}

/** Starts one Firefox ESR with a fresh, empty profile. */
export async function launchFirefox(options: FirefoxOptions): Promise<FirefoxInstance> {
  const { name } = options;
  const log = options.log ?? defaultLog;
  if (!existsSync(firefoxPath)) {
    throw new Error(`${firefoxPath} does not exist: install Debian's firefox-esr (scripts/setup test), or point LINKFS_FIREFOX at a Firefox`);
  }
  await mkdir(scratchDir, { recursive: true });
  const root = await mkdtemp(path.join(scratchDir, `firefox-${name}-`));
  const userDataDir = path.join(root, 'profile');
  const home = path.join(root, 'home'); // Firefox wants a writable HOME (~/.mozilla, caches)
  const downloadDir = path.resolve(options.downloadDir ?? path.join(root, 'downloads'));
  await Promise.all([mkdir(userDataDir), mkdir(home), mkdir(downloadDir, { recursive: true })]);

  let browser: Browser;
  try {
    browser = await puppeteer.launch({
      browser: 'firefox',
      executablePath: firefoxPath,
      headless: true,
      userDataDir,
      extraPrefsFirefox: { ...basePrefs(downloadDir), ...(options.prefs ?? {}) },
      args: options.systemAccess === true ? ['-remote-allow-system-access'] : [],
      env: { ...process.env, HOME: home, MOZ_CRASHREPORTER_DISABLE: '1', MOZ_REMOTE_SETTINGS_DEVTOOLS: '1' },
      protocolTimeout: 60_000,
      timeout: 60_000,
      defaultViewport: { width: 1280, height: 800 },
    });
  } catch (e) {
    await rm(root, { recursive: true, force: true });
    throw new Error(`[${name}] Firefox (${firefoxPath}) did not start: ${(e as Error).message}`);
  }

  const pageErrors: string[] = [];
  const prepared = new WeakSet<Page>();
  const prepare = async (page: Page): Promise<Page> => {
    if (prepared.has(page)) return page;
    prepared.add(page);
    attachPageLogging(page, name, log, pageErrors);
    // tsx compiles with esbuild's keepNames, which wraps named functions inside the
    // closures we hand to page.evaluate in `__name(fn, "name")`: give pages that helper.
    await page.evaluateOnNewDocument('globalThis.__name ??= (fn) => fn;');
    await page.evaluate('globalThis.__name ??= (fn) => fn;').catch(() => {});
    return page;
  };
  browser.on('targetcreated', (target) => {
    void target.page().then((p) => (p ? prepare(p) : null)).catch(() => {});
  });

  let initialUsed = false;
  let closed = false;
  return {
    name,
    browser,
    pid: browser.process()?.pid ?? null,
    userDataDir,
    downloadDir,
    pageErrors,
    async page() {
      if (!initialUsed) {
        initialUsed = true;
        const initial = (await browser.pages())[0];
        if (initial !== undefined) return prepare(initial);
      }
      return prepare(await browser.newPage());
    },
    async close() {
      if (closed) return;
      closed = true;
      try {
        await browser.close();
      } catch (e) {
        log(`[${name}] closing Firefox: ${(e as Error).message}; killing it`);
        browser.process()?.kill('SIGKILL');
      } finally {
        // The profile, HOME and (unless the caller gave one) the download folder.
        await rm(root, { recursive: true, force: true });
      }
    },
  };
}

export interface WaitForDownloadOptions {
  /** Gives up after this long. Default 60 s. */
  timeoutMs?: number;
  /** Expected size: the wait goes on until the finished file has it. */
  size?: number;
  /** Called with the `.part` file's size while the download runs. */
  onProgress?: (bytes: number) => void;
}

/**
 * Whether `entry` is the in-progress file of the download `name`. Firefox 153 creates
 * an EMPTY placeholder `name` at once and writes the data to `<stem>.<8 random
 * chars><ext>.part` (e.g. `Ünïcødé ✓.o2Q24H8H.bin.part` for `Ünïcødé ✓.bin`), renaming
 * it over the placeholder at the end; older versions used `name.part`. Chromium uses
 * `*.crdownload`.
 */
export function isPartOf(entry: string, name: string): boolean {
  if (entry.endsWith('.crdownload')) return true;
  if (!entry.endsWith('.part')) return false;
  if (entry === `${name}.part`) return true;
  const ext = path.extname(name);
  const stem = name.slice(0, name.length - ext.length);
  const middle = entry.slice(0, -'.part'.length);
  return middle.startsWith(`${stem}.`) && middle.endsWith(ext) && middle.length > stem.length + ext.length + 1;
}

/**
 * Waits until the finished download `name` is in `dir`: the file exists, no
 * in-progress file of it (see isPartOf) is left, and its size stops changing (or
 * equals `size`). Returns its full path. Fails on timeout, saying what is in the
 * folder, and (with `size`) when the file is final but has another size. Note that
 * Firefox's empty placeholder `name` exists from the start: never treat "the file
 * exists" alone as finished. A download whose stream errored (controller.error) stays
 * as placeholder + `.part` in Firefox, so it ends here as a timeout; pass a short
 * timeout, or watch the page, to see such a failure.
 */
export async function waitForDownload(dir: string, name: string, options: WaitForDownloadOptions = {}): Promise<string> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  const file = path.join(dir, name);
  let lastSize = -1;
  let stableSince = 0;
  for (;;) {
    const entries = await readdir(dir).catch(() => [] as string[]);
    const parts = entries.filter((e) => isPartOf(e, name));
    const partial = parts.length > 0;
    if (partial && options.onProgress) {
      const s = await stat(path.join(dir, parts[0]!)).catch(() => null);
      if (s) options.onProgress(s.size);
    }
    if (!partial && entries.includes(name)) {
      const s = await stat(file).catch(() => null);
      if (s !== null) {
        if (s.size !== lastSize) {
          lastSize = s.size;
          stableSince = Date.now();
        }
        if (options.size === undefined ? Date.now() - stableSince >= 300 : s.size === options.size) return file;
        // Firefox renames a download whose stream simply stopped (e.g. its service worker
        // was terminated) to the final name as if it were complete: a wrong size that
        // stays is a truncated download, not one still running.
        if (options.size !== undefined && Date.now() - stableSince >= 2_000) {
          throw new Error(`download ${JSON.stringify(name)} ended with ${s.size} bytes, expected ${options.size} (truncated: the stream stopped early)`);
        }
      }
    }
    if (Date.now() >= deadline) {
      throw new Error(`download ${JSON.stringify(name)} did not finish in ${dir} within ${timeoutMs} ms; the folder holds ${JSON.stringify(entries)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `document.body.dataset.state` now, or null before the app has set one. */
export async function bodyState(page: Page): Promise<string | null> {
  return page.evaluate(() => document.body?.dataset.state ?? null);
}

/** The text of the app's `[data-testid=status]`, or '' if there is none. */
export async function statusText(page: Page): Promise<string> {
  return page.evaluate(() => document.querySelector('[data-testid=status]')?.textContent ?? '');
}

const terminalStates = new Set(['invalid-link', 'link-ended', 'password-wrong', 'error']);

/** Waits until `document.body.dataset.state` is one of `wanted` (as chromium.ts's waitForState). */
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
    await page.screenshot({ path: file as `${string}.png`, fullPage: true });
    return file;
  } catch {
    return null;
  }
}

/**
 * The next folder dialog Firefox opens (an `<input type=file webkitdirectory>`'s) picks
 * `dir`, as a person choosing it in the system's dialog would, and Firefox's own
 * "Confirm Upload" prompt that follows is answered "Upload" once its button is enabled
 * (it stays disabled for a moment, against hurried clicks). Needs `systemAccess`.
 * Headless Firefox has no system dialog to drive; WebDriver BiDi's setFiles takes files
 * only ("Is directory"), so this replaces the dialog's component with one that answers.
 */
export async function answerFolderDialog(browser: Browser, dir: string): Promise<void> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- puppeteer's BiDi connection is not public API
  const connection = (browser as any).connection as { send(method: string, params: unknown): Promise<{ result: any }> };
  const tree = await connection.send('browsingContext.getTree', { 'moz:scope': 'chrome' });
  const context = tree.result?.contexts?.[0]?.context as string | undefined;
  if (context === undefined) throw new Error('Firefox shows no chrome window to answer its folder dialog from (start it with systemAccess)');
  const script = `(() => {
    const dir = ${JSON.stringify(dir)};
    const registrar = Components.manager.QueryInterface(Ci.nsIComponentRegistrar);
    const picker = () => ({
      init() {},
      appendFilters() {}, appendFilter() {}, appendRawFilter() {},
      open(callback) { callback.done(Ci.nsIFilePicker.returnOK); },
      get file() { const f = Cc['@mozilla.org/file/local;1'].createInstance(Ci.nsIFile); f.initWithPath(dir); return f; },
      get files() { return [this.file][Symbol.iterator](); },
      domFileOrDirectory: null,
      displayDirectory: null, displaySpecialDirectory: '', defaultString: '', defaultExtension: '',
      filterIndex: 0, addToRecentDocs: false, okButtonLabel: '', capture: 0,
      QueryInterface: ChromeUtils.generateQI(['nsIFilePicker']),
    });
    registrar.registerFactory(Services.uuid.generateUUID(), 'linkfs tests: the folder a person picks', '@mozilla.org/filepicker;1', {
      createInstance(iid) { return picker().QueryInterface(iid); },
    });
    const upload = (dialog) => {
      const body = dialog.document.getElementById('infoBody');
      if (!body || !body.textContent.includes('upload all files')) return;
      // The button is enabled after security.dialog_enable_delay (1 s by default).
      dialog.setTimeout(() => dialog.document.querySelector('dialog').acceptDialog(), 1500);
    };
    Services.obs.addObserver(upload, 'common-dialog-loaded');
    return 'ready';
  })()`;
  const r = await connection.send('script.evaluate', { expression: script, target: { context }, awaitPromise: false });
  if (r.result?.type !== 'success') throw new Error(`could not stand in for Firefox's folder dialog: ${JSON.stringify(r.result).slice(0, 300)}`);
}

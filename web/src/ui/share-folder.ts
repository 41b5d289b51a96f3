// The page with no link: "Share a folder" from this browser. The person picks a folder
// (showDirectoryPicker where the browser has it), drops one on the page, or uses a
// folder input; the link shows at once and the tree fills in behind it. While the tab
// shares: who is visiting (and a way to send one away), the screen kept awake, a
// question before the tab is closed, and the tab's title saying it shares. Closing
// the tab tells visitors the sharer stopped sharing.

import type { TabShareProbe } from '../api';
import type { TabShare, TabShareEvent } from '../wasm/page';
import { openTabShare, pageWasmMemoryBytes } from '../wasm/page';
import { FileReads } from '../tab-share/file-reads';
import { FolderWalk, filesRoot, rootName, type EntryBatch, type FolderRoot, type WalkProgress } from '../tab-share/folder-walk';
import { forgetShare, keepShare, keptShare, type KeptShare } from '../tab-share/kept-share';
import { LiveFolder } from '../tab-share/live';
import { Passwords } from '../wasm/passwords';
import { canRescan, rescan } from '../tab-share/rescan';
import { qrImage, TabLinks } from './tab-links';
import { button, el } from './dom';
import { formatCount, formatSize } from './format';
import { errorText } from './save-file';
import { connectionOf } from '../share';

declare global {
  interface Window {
    linkfsTabShare?: TabShareProbe;
  }
}

type PickerWindow = Window & {
  showDirectoryPicker?: (options?: { id?: string; mode?: 'read' | 'readwrite' }) => Promise<FileSystemDirectoryHandle>;
};
type HandleItem = DataTransferItem & { getAsFileSystemHandle?: () => Promise<FileSystemHandle | null> };
type PermissionHandle = FileSystemDirectoryHandle & {
  queryPermission?: (d: { mode: 'read' }) => Promise<PermissionState>;
  requestPermission?: (d: { mode: 'read' }) => Promise<PermissionState>;
};

const LIVE_WORDS = 'Live: files created, changed, moved or removed in the folder reach visitors within a second or two.';
const SNAPSHOT_WORDS = 'This browser does not tell the page when the folder changes: files changed on disk are read afresh when a visitor opens them, and the page looks at the whole folder again now and then (or when you press Look again) for new and removed files.';
const INPUT_SNAPSHOT_WORDS = 'This is a snapshot: files added or changed on disk after you chose the folder are not shared. Choose it again to share what is there now.';

/** How often the visitors' figures are redrawn while sharing. */
const REFRESH_MS = 1000;
/** A folder that cannot be followed is looked at again this often at least... */
const RESCAN_EVERY_MS = 60_000;
/** ...and never more than a tenth of the time (a large folder takes a while to list). */
const RESCAN_SHARE = 10;

export class ShareFolderView {
  readonly element: HTMLElement;
  private readonly start: HTMLElement;
  private readonly sharing: HTMLElement;
  private readonly folderInput: HTMLInputElement;
  private readonly problem: HTMLElement;
  private readonly resume: HTMLElement;
  private share: TabShare | null = null;
  private walk: FolderWalk | null = null;
  private name = '';
  private wakeLock: WakeLockSentinel | null = null;
  private starting = false;
  private stopped = false;
  private goingOn = false;
  private live: LiveFolder | null = null;
  private walking = true;
  private settledWhileWalking: string[] = [];
  private following: Promise<void> = Promise.resolve();
  private refresh: number | null = null;
  private links: TabLinks | null = null;
  private readonly passwords = new Passwords();
  /** Keeps the share (its key, links, folder) for a reload. */
  private keep: () => void = () => undefined;
  private root: FolderRoot | null = null;
  private rescanning: Promise<void> | null = null;
  private rescanTimer: number | null = null;
  private lastWalkMs = 0;
  /** How each visitor is connected ("direct", "through TURN"), by peer. */
  private readonly routes = new Map<number, string>();

  constructor(noLinkWords: string) {
    this.folderInput = el('input', { attrs: { type: 'file', webkitdirectory: '' }, data: { testid: 'share-folder-input' } });
    this.folderInput.hidden = true;
    this.folderInput.addEventListener('change', () => {
      const files = [...(this.folderInput.files ?? [])];
      this.folderInput.value = '';
      if (files.length > 0) void this.begin(filesRoot(files));
    });
    const pick = button('Share a folder…', 'primary-button', () => void this.pick());
    pick.dataset['testid'] = 'share-folder-pick';
    this.problem = el('p', { className: 'share-folder-problem', attrs: { role: 'alert' }, data: { testid: 'share-folder-problem' } });
    this.problem.hidden = true;
    this.resume = el('div', { className: 'share-folder-resume', data: { testid: 'share-folder-resume' } });
    this.resume.hidden = true;
    this.start = el(
      'section',
      { className: 'share-folder-start', data: { testid: 'share-folder' } },
      el('h1', { text: 'Share a folder from this browser' }),
      el('p', { text: 'Pick a folder, or drop one on this page. You get a link at once: whoever opens it sees the whole folder and reads any file, straight from this tab, while it stays open. Nothing is uploaded anywhere.' }),
      this.resume,
      el('div', { className: 'share-folder-actions' }, pick, this.folderInput),
      this.problem,
      el('p', { className: 'share-folder-hint', text: noLinkWords }),
    );
    this.sharing = el('section', { className: 'share-folder-live', data: { testid: 'tab-share' } });
    this.sharing.hidden = true;
    this.element = el('main', { className: 'share-folder' }, this.start, this.sharing);

    document.addEventListener('dragover', (event) => {
      if (this.share || !event.dataTransfer?.types.includes('Files')) return;
      event.preventDefault();
      event.dataTransfer.dropEffect = 'copy';
    });
    document.addEventListener('drop', (event) => {
      if (this.share || !event.dataTransfer) return;
      event.preventDefault();
      void this.dropped(event.dataTransfer);
    });
    void this.offerResume();
  }

  /** The browser's folder picker, or the folder input where there is none. */
  private async pick(): Promise<void> {
    const picker = (window as PickerWindow).showDirectoryPicker;
    if (typeof picker !== 'function') {
      this.folderInput.click();
      return;
    }
    try {
      const handle = await picker.call(window, { id: 'linkfs-share', mode: 'read' });
      await this.begin({ kind: 'handle', handle });
    } catch (error) {
      if (error instanceof DOMException && error.name === 'AbortError') return;
      this.say(`Could not open that folder: ${errorText(error)}`);
    }
  }

  /** A drop: the folder's handle where the browser gives one, its entry otherwise. */
  private async dropped(data: DataTransfer): Promise<void> {
    const items = [...data.items].filter((i) => i.kind === 'file');
    if (items.length !== 1) {
      this.say(items.length === 0 ? 'Drop a folder to share it.' : 'Drop one folder: everything in it is shared.');
      return;
    }
    const item = items[0] as HandleItem;
    // Both must be asked for during the drop event itself.
    const handle = item.getAsFileSystemHandle?.().catch(() => null) ?? Promise.resolve(null);
    const entry = item.webkitGetAsEntry?.() ?? null;
    const h = await handle;
    // A dropped folder's entries list every name; Chromium's handles leave out names
    // Windows cannot hold (`a?b`, `say "hi"`, a trailing space). So the walk and the
    // reads go through the entries, and the handle is kept for a reload.
    if (entry?.isDirectory) {
      const kept = h && h.kind === 'directory' ? (h as FileSystemDirectoryHandle) : null;
      await this.begin({ kind: 'entry', entry: entry as FileSystemDirectoryEntry, handle: kept });
    } else if (h && h.kind === 'directory') {
      await this.begin({ kind: 'handle', handle: h as FileSystemDirectoryHandle });
    } else {
      this.say('That is a file, not a folder. Drop the folder that holds it, or pick one.');
    }
  }

  /** After a reload: "Go on sharing <name>" under the same link. */
  private async offerResume(): Promise<void> {
    const kept = await keptShare();
    if (!kept || this.share) return;
    const words = kept.handle
      ? `You were sharing “${kept.name}”. Go on under the same link:`
      : `You were sharing “${kept.name}”. Go on under the same link: choose it again.`;
    const goOn = button(`Go on sharing ${kept.name}`, 'primary-button', () => void this.goOn(kept));
    goOn.dataset['testid'] = 'share-folder-go-on';
    const forget = button('New link instead', 'text-button', () => {
      void forgetShare();
      this.resume.hidden = true;
    });
    this.resume.replaceChildren(el('p', { text: words }), el('div', { className: 'share-folder-actions' }, goOn, forget));
    this.resume.hidden = false;
  }

  private async goOn(kept: KeptShare): Promise<void> {
    // Whatever folder comes next goes on under the kept link: the person said so.
    this.goingOn = true;
    const handle = kept.handle as PermissionHandle | null;
    if (!handle) {
      await this.pick();
      return;
    }
    try {
      // Still granted (the browser may keep it across a reload), or asked for again.
      const now = (await handle.queryPermission?.({ mode: 'read' })) ?? 'granted';
      const state = now === 'granted' ? now : ((await handle.requestPermission?.({ mode: 'read' })) ?? 'granted');
      if (state !== 'granted') {
        this.say(`The browser did not let this page read “${kept.name}” again. Pick it to go on.`);
        return;
      }
      await this.begin({ kind: 'handle', handle });
    } catch (error) {
      this.say(`Could not open “${kept.name}” again: ${errorText(error)}. Pick it to go on.`);
    }
  }

  private say(words: string): void {
    this.problem.textContent = words;
    this.problem.hidden = false;
  }

  /** Shares `root`: the link at once, the walk behind it. */
  private async begin(root: FolderRoot): Promise<void> {
    // Once a page has shared, sharing again takes a reload (a clean start).
    if (this.share || this.starting || this.stopped) return;
    this.starting = true;
    try {
      await this.share_(root);
    } finally {
      this.starting = false;
    }
  }

  private async share_(root: FolderRoot): Promise<void> {
    this.problem.hidden = true;
    const name = rootName(root);
    const kept = await keptShare();
    // The kept link goes on for the same folder (the browser tells a handle's
    // folder apart), or when the person asked to go on; another folder of the
    // same name gets a link of its own.
    const handle = root.kind === 'handle' ? root.handle : root.kind === 'entry' ? root.handle : null;
    const same = kept?.handle && handle ? await kept.handle.isSameEntry(handle).catch(() => false) : false;
    const goesOn = kept !== null && (same || this.goingOn);
    const again = goesOn ? kept.kept : undefined;
    const againLinks = goesOn && kept.links !== '' ? kept.links : undefined;
    const walk = new FolderWalk(root, (batch: EntryBatch) => share.addEntries(batch.parents, batch.dirs, batch.sizes, batch.mtimes, batch.names), (p) => this.walked(p));
    const reads = new FileReads(walk.sources);
    let share: TabShare;
    try {
      share = await openTabShare(name, Date.now(), again, againLinks, {
        read: (entry, offset, len, size, mtimeMs) => reads.read(entry, offset, len, size, mtimeMs),
        checkPassword: (hash, attempt) => this.passwords.check(hash, attempt),
        onEvent: (event) => this.event(event),
      });
    } catch (error) {
      this.say(`Could not start sharing: ${errorText(error)}`);
      return;
    }
    this.share = share;
    this.walk = walk;
    this.root = root;
    this.name = name;
    const link = share.link();
    this.keep = () => void keepShare(share.kept(), link, root, name, share.keptLinks());
    await keepShare(share.kept(), link, root, name, share.keptLinks());
    const probe: TabShareProbe = {
      link,
      entries: () => share.entries(),
      walkDone: false,
      live: false,
      walkMs: 0,
      visitors: () => share.visitors(),
      readBytes: () => reads.bytes,
      indexBytes: () => share.indexBytes(),
      wasmBytes: () => pageWasmMemoryBytes(),
      parts: () => share.partsHeld(),
    };
    window.linkfsTabShare = probe;
    this.links = new TabLinks(share, this.passwords, () => this.keep());
    this.showSharing(link, root, this.links);
    window.addEventListener('beforeunload', beforeUnload);
    window.addEventListener('pagehide', () => share.stop());
    void this.keepAwake();
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'visible' && this.share) void this.keepAwake();
    });
    this.refresh = window.setInterval(() => this.drawVisitors(), REFRESH_MS);
    this.updateTitle(0);
    // Following the folder starts with the walk, so nothing changed meanwhile is
    // missed; what settles is looked at once the walk is done (the walk would add it too).
    // (Not awaited before the walk: setting the watches up takes the browser a while
    // on a large tree, and the first listing must not wait for it.)
    const live = new LiveFolder(root, share, walk.sources);
    this.live = live;
    const starting = live.start().then((following) => {
      this.setText('tab-share-kind', following ? LIVE_WORDS : root.kind === 'files' ? INPUT_SNAPSHOT_WORDS : SNAPSHOT_WORDS);
      return following;
    });
    const started = performance.now();
    try {
      const done = await walk.run();
      this.walked(done, true);
    } catch (error) {
      this.setText('tab-share-listing', `Listing the folder stopped: ${errorText(error)}. What was listed is shared.`);
    }
    share.walkDone();
    probe.walkMs = performance.now() - started;
    probe.live = await starting;
    probe.walkDone = true;
    this.walking = false;
    this.lastWalkMs = probe.walkMs;
    if (!probe.live && canRescan(root)) this.scheduleRescan();
    const waiting = this.settledWhileWalking.splice(0);
    if (waiting.length > 0) this.follow(waiting);
  }

  /** Looks at paths that settled, one batch after another. */
  private follow(paths: string[]): void {
    const live = this.live;
    if (!live) return;
    this.following = this.following.then(() => live.settled(paths)).catch((error: unknown) => {
      console.warn(`linkfs: a change on disk could not be followed: ${errorText(error)}`);
    });
  }

  private showSharing(link: string, root: FolderRoot, links: TabLinks): void {
    this.start.hidden = true;
    const linkField = el('input', { className: 'tab-share-link', attrs: { readonly: '', 'aria-label': 'The link to this share' }, data: { testid: 'tab-share-link' } });
    linkField.value = link;
    linkField.addEventListener('focus', () => linkField.select());
    const copy = button('Copy the link', 'text-button', () => {
      void navigator.clipboard?.writeText(link).then(
        () => (copy.textContent = 'Copied'),
        () => linkField.select(),
      );
      if (!navigator.clipboard) linkField.select();
    }, 'Copy');
    const again = button('Look again', 'text-button', () => void this.lookAgain());
    again.dataset['testid'] = 'tab-share-rescan';
    again.hidden = !canRescan(root);
    const stop = button('Stop sharing', 'text-button danger', () => this.stopSharing());
    stop.dataset['testid'] = 'tab-share-stop';
    const kind = root.kind === 'files' ? INPUT_SNAPSHOT_WORDS : SNAPSHOT_WORDS;
    this.sharing.replaceChildren(
      el('h1', { text: `Sharing “${this.name}”` }),
      el('div', { className: 'tab-share-link-row' }, linkField, copy),
      qrImage(link, 'QR code of the link: open it with a phone’s camera') ?? el('span'),
      el('p', { className: 'tab-share-relay', text: 'Connecting to the relay…', data: { testid: 'tab-share-relay' } }),
      el('p', { className: 'tab-share-listing', text: 'Listing the folder…', data: { testid: 'tab-share-listing' } }),
      el('p', { className: 'tab-share-kind', text: kind, data: { testid: 'tab-share-kind' } }),
      el('p', { className: 'tab-share-rescanned', data: { testid: 'tab-share-rescanned' } }),
      el('h2', { text: 'Visitors' }),
      el('ul', { className: 'tab-share-visitors', data: { testid: 'tab-share-visitors' } }, el('li', { className: 'muted', text: 'No one yet.' })),
      links.element,
      el('p', { className: 'tab-share-note', text: 'Keep this tab open: the share lives in it. If this computer sleeps, visitors wait and go on when it wakes (for a while). Visitors cannot add files to a share from a browser tab.' }),
      el('div', { className: 'share-folder-actions' }, again, stop),
    );
    this.sharing.hidden = false;
  }

  /** Looks at the whole folder again (one look at a time; none during the first walk). */
  private lookAgain(): Promise<void> {
    const share = this.share;
    const root = this.root;
    const walk = this.walk;
    if (!share || !root || !walk || this.walking || !canRescan(root)) return Promise.resolve();
    this.rescanning ??= (async () => {
      this.setText('tab-share-rescanned', 'Looking at the whole folder again…');
      try {
        const f = await rescan(root, share, walk.sources);
        this.lastWalkMs = f.ms;
        const what = f.added + f.updated + f.removed === 0 ? 'nothing changed' : `${formatCount(f.added)} added, ${formatCount(f.updated)} changed, ${formatCount(f.removed)} removed`;
        this.setText('tab-share-rescanned', `Looked at the whole folder again at ${new Date().toLocaleTimeString()}: ${what}.`);
        console.info(`linkfs: looked again in ${Math.round(f.ms)} ms: ${what}`);
      } catch (error) {
        this.setText('tab-share-rescanned', `Could not look at the folder again: ${errorText(error)}. What was shared stays shared.`);
      } finally {
        this.rescanning = null;
      }
    })();
    return this.rescanning;
  }

  /** The next look at a folder the browser does not follow. */
  private scheduleRescan(): void {
    if (this.stopped) return;
    const wait = Math.max(RESCAN_EVERY_MS, RESCAN_SHARE * this.lastWalkMs);
    this.rescanTimer = window.setTimeout(() => {
      void this.lookAgain().then(() => this.scheduleRescan());
    }, wait);
  }

  private setText(testid: string, text: string): void {
    const node = this.sharing.querySelector<HTMLElement>(`[data-testid=${testid}]`);
    if (node) node.textContent = text;
  }

  private walked(p: WalkProgress, done = false): void {
    const skipped = p.skipped > 0 ? ` (${formatCount(p.skipped)} names could not be shared)` : '';
    this.setText('tab-share-listing', done ? `${formatCount(p.entries)} entries shared${skipped}.` : `Listing the folder… ${formatCount(p.entries)} entries so far${skipped}`);
  }

  private event(event: TabShareEvent): void {
    switch (event.kind) {
      case 'sharing':
        console.info(`linkfs: the relay holds the link${event.again ? ' again' : ''}`);
        this.setText('tab-share-relay', 'The relay holds the link: anyone who has it can open the share now.');
        break;
      case 'failed':
        this.setText('tab-share-relay', `The relay refused this share: ${event.message}`);
        break;
      case 'relay-lost':
        console.info('linkfs: lost the relay; trying again');
        this.setText('tab-share-relay', 'Lost the relay; trying again. Visitors who are connected stay connected.');
        break;
      case 'visitor-came':
        console.info(`linkfs: ${event.who} connected`);
        this.updateTitle(event.visitors);
        this.drawVisitors();
        break;
      case 'visitor-left':
        console.info(`linkfs: ${event.who} left: ${event.why}`);
        this.routes.delete(event.peer);
        this.updateTitle(event.visitors);
        this.drawVisitors();
        break;
      case 'settled':
        if (this.walking) this.settledWhileWalking.push(...event.paths);
        else this.follow(event.paths);
        break;
      case 'rescan':
        console.warn('linkfs: too much changed on disk at once to follow; looking at the whole folder again');
        void this.lookAgain();
        break;
      case 'links-changed':
        this.keep();
        this.links?.draw();
        break;
      case 'file-changed':
        console.info(`linkfs: entry ${event.entry} changed on disk since it was listed; visitors are told`);
        break;
      case 'note':
        console.warn(`linkfs: ${event.message}`);
        break;
    }
  }

  private drawVisitors(): void {
    if (!this.share) return;
    this.links?.draw();
    const list = this.sharing.querySelector<HTMLElement>('[data-testid=tab-share-visitors]');
    if (!list) return;
    const rows = this.share.visitors();
    if (rows.length === 0) {
      list.replaceChildren(el('li', { className: 'muted', text: 'No one now.' }));
      return;
    }
    for (const v of rows) void this.learnRoute(v.peer);
    list.replaceChildren(
      ...rows.map((v) => {
        const kick = button(`Disconnect ${v.who}`, 'text-button', () => {
          try {
            this.share?.kick(v.peer);
          } catch {
            // Gone already.
          }
        }, 'Disconnect');
        const facts = [this.routes.get(v.peer), `${formatSize(v.served)} read`, v.reading === '' ? undefined : `last: ${v.reading}`].filter((f) => f !== undefined);
        return el('li', { data: { testid: 'tab-share-visitor', peer: String(v.peer) } }, el('span', { text: `${v.who} · ${facts.join(' · ')}` }), kick);
      }),
    );
  }

  /** How visitor `peer` is connected, from its connection's statistics (once known). */
  private async learnRoute(peer: number): Promise<void> {
    if (this.routes.has(peer)) return;
    try {
      const stats = this.share?.visitorStats(peer);
      if (!stats) return;
      const info = connectionOf((await stats) as RTCStatsReport);
      if (info) this.routes.set(peer, info.route === 'relayed' ? 'through TURN' : 'direct');
    } catch {
      // Not known yet: asked again at the next redraw.
    }
  }

  private updateTitle(visitors: number): void {
    document.title = visitors > 0 ? `Sharing ${this.name} · ${visitors} ${visitors === 1 ? 'visitor' : 'visitors'}` : `Sharing ${this.name}`;
  }

  private async keepAwake(): Promise<void> {
    try {
      this.wakeLock = (await navigator.wakeLock?.request('screen')) ?? null;
    } catch {
      // Not granted (not a secure context, or a hidden tab): the share goes on.
    }
  }

  private stopSharing(): void {
    this.share?.stop();
    this.walk?.stop();
    this.live?.stop();
    this.share = null;
    this.stopped = true;
    if (this.refresh !== null) window.clearInterval(this.refresh);
    if (this.rescanTimer !== null) window.clearTimeout(this.rescanTimer);
    void this.wakeLock?.release().catch(() => undefined);
    window.removeEventListener('beforeunload', beforeUnload);
    void forgetShare();
    document.title = 'linkfs';
    this.sharing.replaceChildren(el('h1', { text: `Stopped sharing “${this.name}”` }), el('p', { text: 'Visitors were told. The link does not open anything any more. To share again (under a new link), reload this page.' }));
    delete window.linkfsTabShare;
  }
}

function beforeUnload(event: BeforeUnloadEvent): void {
  event.preventDefault();
  // Older browsers show the question only with this set.
  event.returnValue = '';
}

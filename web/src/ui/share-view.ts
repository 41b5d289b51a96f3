// The page for one open share: header (share name, index progress, connection
// status), breadcrumbs, the directory listing, the preview panel and the downloads
// panel, and the navigation between folders. The shown folder lives in the fragment
// after the share key (`#<key>/photos/2024`), so back/forward and reload work.

import type { ConnectionStatus, EntryId, EntryRow, IndexProgress, ShareApi, ShareEvent } from '../api';
import { Breadcrumbs } from './breadcrumbs';
import type { ListingOrder } from './directory-pages';
import { el } from './dom';
import { DownloadsPanel } from './downloads';
import { previewKindOf } from './file-types';
import { formatCount, formatItems } from './format';
import { MAX_MATCHES, type FilterProgress } from './name-filter';
import { icon } from './icons';
import { IndexProgressView } from './index-progress';
import { DirectoryListing, type Layout } from './listing';
import type { ThumbnailStats } from './thumbnails';
import { plainHttpNotice } from './plain-http-notice';
import { PreviewPanel } from './preview';
import { errorText } from './save-file';
import { canSaveIntoFolder, pickFolder } from './save';
import { fragmentFor, lookupPath, parseFragment } from './share-link';
import { ConnectionInfoView } from './connection-info';
import { SearchPanel } from './search';
import { ConnectionStatusView } from './status';
import { keepForReload, PasswordPrompt, rememberAsks } from './password-prompt';
import { throttle } from './throttle';
import { UploadsPanel } from './uploads';

/** While the index fills, the shown folder is re-listed at most this often. */
const PROGRESS_REFRESH_MS = 500;
/** A `changed` event re-lists the shown folder at most this often. */
const CHANGE_REFRESH_MS = 100;
/** Typing in the filter box rescans after this pause. */
const FILTER_DELAY_MS = 200;
/** Folders whose scroll position is remembered for back/forward. */
const REMEMBERED_SCROLLS = 200;

export class ShareView {
  readonly element: HTMLElement;
  private readonly status = new ConnectionStatusView();
  private readonly indexProgress = new IndexProgressView();
  private readonly breadcrumbs: Breadcrumbs;
  private readonly shareName: HTMLElement;
  private readonly count: HTMLElement;
  private readonly notice: HTMLElement;
  private readonly content: HTMLElement;
  private readonly password = new PasswordPrompt();
  private readonly toolbar: HTMLElement;
  private readonly folderDownload: HTMLButtonElement;
  private readonly folderSave: HTMLButtonElement;
  /** The folder's actions; on a narrow screen, a menu behind `actionsToggle`. */
  private readonly folderActions: HTMLElement;
  private readonly actionsToggle: HTMLButtonElement;
  private readonly layoutToggle: HTMLButtonElement;
  /** The layout chosen for a folder in this tab (others are decided by what they hold). */
  private readonly layouts = new Map<EntryId, Layout>();
  private search: SearchPanel | null = null;
  private connectionInfo: ConnectionInfoView | null = null;
  private readonly searchSlot: HTMLElement;
  /** A search result to select once its folder is listed. */
  private pendingReveal: { id: EntryId; parent: EntryId } | null = null;
  private readonly selectionBar: HTMLElement;
  private readonly selectionCount: HTMLElement;
  private readonly filterBox: HTMLInputElement;
  private filterTimer: ReturnType<typeof setTimeout> | null = null;

  private api: ShareApi | null = null;
  private listing: DirectoryListing | null = null;
  private preview: PreviewPanel | null = null;
  private downloads: DownloadsPanel | null = null;
  private uploads: UploadsPanel | null = null;

  private order: ListingOrder = { sort: 'name', descending: false };
  private shownDir: EntryRow | null = null;
  private crumbs: EntryRow[] = [];
  /** Bumped by every navigation; answers for an older one are dropped. */
  private navigation = 0;
  /** A folder from the link that is not in the index yet. */
  private waitingFor: string[] | null = null;
  private lastReceived = -1;
  private lastComplete = false;
  private readonly scrolls = new Map<EntryId, number>();

  private readonly progressRefresh = throttle(() => this.onIndexGrew(), PROGRESS_REFRESH_MS);
  private readonly changeRefresh = throttle(() => this.listing?.refresh(), CHANGE_REFRESH_MS);

  constructor(private readonly key: string) {
    this.breadcrumbs = new Breadcrumbs(key);
    this.shareName = el('h1', { className: 'share-name', text: 'Shared folder' });
    this.count = el('div', { className: 'folder-count', attrs: { 'aria-live': 'off' } });
    this.notice = el('div', { className: 'notice', attrs: { role: 'status' } });
    this.notice.hidden = true;
    this.content = el('main', { className: 'content' }, this.notice);
    this.filterBox = el('input', {
      className: 'filter',
      attrs: { type: 'search', placeholder: 'Filter this folder', 'aria-label': 'Filter this folder by name', spellcheck: 'false', autocomplete: 'off' },
      data: { testid: 'filter' },
    });
    this.filterBox.addEventListener('input', () => this.onFilterInput());
    this.filterBox.addEventListener('keydown', (event) => this.onFilterKey(event));
    const filter = el('label', { className: 'filter-box' }, icon('search'), this.filterBox);
    this.folderDownload = el('button', {
      className: 'text-button folder-download',
      text: 'Download folder',
      attrs: { type: 'button', title: 'Download this folder as a ZIP' },
      data: { testid: 'folder-download' },
    });
    this.folderDownload.prepend(icon('download'));
    this.folderDownload.addEventListener('click', () => {
      if (this.shownDir) this.downloadRows([this.shownDir]);
    });
    // Where the browser has File System Access: the folder's files into a folder the user picks.
    this.folderSave = el('button', {
      className: 'text-button folder-save',
      text: 'Save into folder…',
      attrs: { type: 'button', title: 'Save this folder into a folder on this computer, structure kept' },
      data: { testid: 'folder-save' },
    });
    this.folderSave.prepend(icon('folder'));
    this.folderSave.hidden = !canSaveIntoFolder();
    this.folderSave.addEventListener('click', () => {
      if (this.shownDir) void this.saveRowsIntoFolder([this.shownDir]);
    });
    this.selectionCount = el('span', { className: 'selection-count', data: { testid: 'selection-count' } });
    const selectionDownload = el('button', {
      className: 'text-button selection-download',
      text: 'Download',
      attrs: { type: 'button', 'aria-label': 'Download the selected entries' },
      data: { testid: 'selection-download' },
    });
    selectionDownload.prepend(icon('download'));
    selectionDownload.addEventListener('click', () => {
      const rows = this.listing?.selection ?? [];
      if (rows.length > 0) this.downloadRows(rows);
    });
    const selectionSave = el('button', {
      className: 'text-button selection-save',
      text: 'Save into folder…',
      attrs: { type: 'button', title: 'Save the selected entries into a folder on this computer, structure kept' },
      data: { testid: 'selection-save' },
    });
    selectionSave.prepend(icon('folder'));
    selectionSave.hidden = !canSaveIntoFolder();
    selectionSave.addEventListener('click', () => {
      const rows = this.listing?.selection ?? [];
      if (rows.length > 0) void this.saveRowsIntoFolder(rows);
    });
    const selectionClear = el('button', { className: 'text-button', text: 'Clear', attrs: { type: 'button', 'aria-label': 'Clear the selection' }, data: { testid: 'selection-clear' } });
    selectionClear.addEventListener('click', () => this.listing?.clearSelection());
    this.selectionBar = el('div', { className: 'selection-bar', attrs: { role: 'group', 'aria-label': 'Selection' } }, this.selectionCount, selectionDownload, selectionSave, selectionClear);
    this.selectionBar.hidden = true;
    this.folderActions = el('div', { className: 'folder-actions', attrs: { id: 'folder-actions' } }, this.folderDownload, this.folderSave);
    this.actionsToggle = el('button', {
      className: 'icon-button folder-actions-toggle',
      text: '⋯',
      attrs: { type: 'button', 'aria-label': 'Folder actions', 'aria-expanded': 'false', 'aria-controls': 'folder-actions' },
      data: { testid: 'folder-actions-toggle' },
    });
    this.actionsToggle.addEventListener('click', (event) => {
      event.stopPropagation();
      this.showActions(!this.folderActions.classList.contains('is-open'));
    });
    // An action taken, a click elsewhere or Escape closes the menu.
    this.folderActions.addEventListener('click', () => this.showActions(false));
    document.addEventListener('click', (event) => {
      if (!this.folderActions.contains(event.target as Node)) this.showActions(false);
    });
    document.addEventListener('keydown', (event) => {
      if (event.key === 'Escape' && this.folderActions.classList.contains('is-open')) {
        this.showActions(false);
        this.actionsToggle.focus();
      }
    });
    this.layoutToggle = el('button', {
      className: 'icon-button layout-toggle',
      attrs: { type: 'button', 'aria-label': 'Show as a grid', title: 'Show as a grid' },
      data: { testid: 'layout-toggle' },
    });
    this.layoutToggle.append(icon('grid'));
    this.layoutToggle.addEventListener('click', () => {
      const listing = this.listing;
      if (!listing || listing.dir === null) return;
      const layout: Layout = listing.shownLayout === 'grid' ? 'list' : 'grid';
      this.layouts.set(listing.dir, layout);
      listing.setLayout(layout);
    });
    this.toolbar = el('div', { className: 'toolbar' }, this.breadcrumbs.element, this.count, this.selectionBar, this.layoutToggle, this.actionsToggle, this.folderActions, filter);

    this.element = el(
      'div',
      { className: 'app' },
      el(
        'header',
        { className: 'topbar' },
        el('div', { className: 'brand', text: 'linkfs', attrs: { 'aria-hidden': 'true' } }),
        this.shareName,
        (this.searchSlot = el('div', { className: 'search-slot' })),
        this.indexProgress.element,
        this.status.element,
      ),
      plainHttpNotice(),
      this.password.element,
      this.toolbar,
      this.content,
    );
    this.showStatus({ state: 'connecting', message: '' });
  }

  showStatus(status: ConnectionStatus): void {
    this.status.show(status);
    this.askPassword(status);
    this.connectionInfo?.setConnected(status.state === 'connected');
    if (this.api) this.indexProgress.show(this.api.progress(), status.state);
  }

  /** The share could not be opened at all. */
  showFailure(status: ConnectionStatus): void {
    this.showStatus(status);
    this.indexProgress.element.hidden = true;
    this.setNotice(null);
    this.setContentShown(false);
  }

  attach(api: ShareApi): void {
    this.api = api;
    this.listing = new DirectoryListing(api, {
      open: (row) => this.open(row),
      download: (row) => this.downloadRows([row]),
      up: () => this.up(),
      orderChanged: (order) => this.setOrder(order),
      countChanged: (total, filter) => this.showCount(total, filter),
      selectionChanged: (rows) => {
        this.selectionBar.hidden = rows.length === 0;
        this.folderDownload.hidden = rows.length > 0;
        this.folderSave.hidden = rows.length > 0 || !canSaveIntoFolder();
        this.selectionCount.textContent = `${formatCount(rows.length)} selected`;
      },
      layoutChanged: (layout) => {
        const other = layout === 'grid' ? 'list' : 'grid';
        const label = `Show as a ${other}`;
        this.layoutToggle.replaceChildren(icon(other));
        this.layoutToggle.setAttribute('aria-label', label);
        this.layoutToggle.title = label;
        this.layoutToggle.dataset.layout = layout;
      },
    });
    this.preview = new PreviewPanel(api, {
      download: (row, blob) => this.downloads?.start(row, blob),
      closed: () => {
        this.content.classList.remove('has-preview');
        // Closed by its button or Escape: the history entry its opening added goes too.
        if ((history.state as { linkfsPreview?: boolean } | null)?.linkfsPreview === true) history.back();
      },
      neighbour: (row, delta) => this.listing?.neighbour(row, delta) ?? Promise.resolve(null),
      moved: (_row, index) => this.listing?.follow(index),
    });
    this.downloads = new DownloadsPanel(api);
    this.search = new SearchPanel(api, {
      reveal: (hit) => {
        this.pendingReveal = { id: hit.id, parent: hit.parent };
        const folder = hit.path.includes('/') ? hit.path.slice(0, hit.path.lastIndexOf('/')).split('/') : [];
        this.search?.clear();
        this.navigateTo(folder);
        // Already in that folder: no navigation happens, select it now.
        if (this.shownDir?.id === hit.parent) void this.revealPending();
      },
      shown: (open) => {
        this.content.classList.toggle('is-searching', open);
        this.listing?.element.toggleAttribute('hidden', open);
      },
    });
    this.searchSlot.append(this.search.field);
    this.connectionInfo = new ConnectionInfoView(api);
    this.status.element.after(this.connectionInfo.element);
    this.content.append(this.listing.element, this.search.element, this.preview.element);
    this.element.append(this.downloads.element);
    this.uploads = new UploadsPanel(api, this.key, () => parseFragment(window.location.hash).path.join('/'));
    this.folderActions.append(this.uploads.control);
    this.element.append(this.uploads.element);
    const rights = api.rights();
    if (rights) this.showRights(rights.list);

    // The first screen's thumbnails, kept from the last visit, are there for the first frame…
    this.listing.thumbnails.seed(api.keptPictures());
    // …and kept again as the page is hidden (the last moment a phone surely gives).
    const keepPictures = (): void => {
      if (this.listing && this.shownDir) api.keepPictures(this.listing.firstScreenPictures());
    };
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'hidden') keepPictures();
    });
    window.addEventListener('pagehide', keepPictures);
    api.subscribe((event) => this.onEvent(event));
    this.showStatus(api.status());
    this.onProgress(api.progress());
    window.addEventListener('hashchange', () => this.onLocationChange());
    window.addEventListener('popstate', (event) => {
      if ((event.state as { linkfsPreview?: boolean } | null)?.linkfsPreview !== true) this.preview?.close();
    });
    this.onLocationChange();
  }

  /** What the grid's thumbnails cost so far. */
  get thumbnailStats(): ThumbnailStats | null {
    return this.listing?.thumbnails.stats ?? null;
  }

  /** Saves one file as itself, anything else (a folder, several entries) as one ZIP. */
  downloadRows(rows: EntryRow[]): void {
    const first = rows[0];
    if (!first || !this.downloads) return;
    if (rows.length === 1 && first.kind === 'file') {
      this.downloads.start(first);
      return;
    }
    const base = this.zipBase(rows);
    this.downloads.save({
      name: `${base}.zip`,
      source: { kind: 'zip', ids: rows.map((r) => r.id), name: `${base}.zip` },
      size: 0,
      id: first.id,
    });
  }

  /** The name of a folder's or a selection's ZIP, without ".zip". */
  private zipBase(rows: EntryRow[]): string {
    const share = this.shareName.textContent || 'share';
    return rows.length === 1 ? rows[0]!.name || share : `${share} (${rows.length} items)`;
  }

  /**
   * Saves folders and files into a folder the user picks (File System Access), in
   * one new folder there named like the ZIP would be. From the user's click.
   */
  async saveRowsIntoFolder(rows: EntryRow[]): Promise<void> {
    if (rows.length === 0 || !this.downloads) return;
    let handle: FileSystemDirectoryHandle | null;
    try {
      handle = await pickFolder();
    } catch (error) {
      this.setNotice(`Could not open the folder picker: ${error instanceof Error ? error.message : String(error)}`);
      return;
    }
    if (handle === null) return;
    const base = this.zipBase(rows);
    this.downloads.save({ name: base, source: { kind: 'zip', ids: rows.map((r) => r.id), name: `${base}.zip` }, size: 0, id: rows[0]!.id, into: handle });
  }

  // --- events from the share ---

  private onEvent(event: ShareEvent): void {
    switch (event.type) {
      case 'status':
        this.showStatus(event.status);
        // A folder we wait for may now never come: say so at once.
        if (this.waitingFor) this.progressRefresh.flush();
        break;
      case 'progress':
        this.onProgress(event.progress);
        break;
      case 'changed':
        this.onChanged(event.dirs, event.all ?? false);
        break;
      case 'rights':
        this.showRights(event.rights.list);
        break;
      case 'opened':
        this.onOpened();
        break;
    }
  }

  /**
   * The index opened after the shown folder was drawn from what the page kept of an
   * earlier visit, or from the index while it was still loading (so not kept): the
   * path is looked up again (an id kept may be stale) and the
   * rows are asked for anew. Kept rows stay on screen until fresh ones replace them.
   */
  private onOpened(): void {
    this.showPath(parseFragment(window.location.hash).path)
      .then(() => this.listing?.refresh())
      .catch((error: unknown) => this.setNotice(`Could not open this folder: ${errorText(error)}`));
  }

  /** Opens or closes the folder's actions menu (narrow screens). */
  private showActions(open: boolean): void {
    this.folderActions.classList.toggle('is-open', open);
    this.actionsToggle.setAttribute('aria-expanded', String(open));
  }

  /** A drop link (`list` false): the page is for adding files only. */
  private showRights(list: boolean): void {
    this.element.classList.toggle('is-drop-link', !list);
    if (!list) {
      this.listing?.setEmptyText('This link takes files: drop them here, or use Add files. What is already there is not shown.');
      this.listing?.refresh();
    }
  }

  private onProgress(progress: IndexProgress): void {
    const state = this.api?.status().state ?? 'connecting';
    this.indexProgress.show(progress, state);
    if (!this.element.classList.contains('is-drop-link')) {
      this.listing?.setEmptyText(progress.complete ? 'This folder is empty.' : 'Nothing here yet; the folder list is still arriving.');
    }
    // While the index fills, any folder may grow: re-list the shown one now and then.
    // Once complete, growth comes with `changed` events naming the folders.
    if (progress.received !== this.lastReceived || progress.complete !== this.lastComplete) {
      this.lastReceived = progress.received;
      const completed = progress.complete && !this.lastComplete;
      this.lastComplete = progress.complete;
      if (completed) this.progressRefresh.flush();
      else if (!progress.complete || this.waitingFor) this.progressRefresh.request();
    }
  }

  /** The index grew: look again for a folder we wait for, or re-list the shown one. */
  private onIndexGrew(): void {
    const failed = (error: unknown): void => this.setNotice(`Could not open this folder: ${errorText(error)}`);
    if (this.waitingFor) {
      this.showPath(this.waitingFor).catch(failed);
    } else if (this.shownDir) {
      this.listing?.refresh();
      if (this.crumbs.length === 0 || this.crumbs[0]?.name === '') this.updateCrumbs(this.navigation).catch(failed);
    }
  }

  private onChanged(dirs: EntryId[], all: boolean): void {
    const shown = this.shownDir?.id;
    if (shown === undefined) return;
    if (all || dirs.includes(shown)) this.changeRefresh.request();
    // A change in an ancestor may have renamed or removed the shown folder.
    if (all || this.crumbs.some((crumb) => crumb.id !== shown && dirs.includes(crumb.id))) {
      this.updateCrumbs(this.navigation).catch(() => undefined); // the next change tries again
    }
  }

  // --- navigation ---

  private onLocationChange(): void {
    const location = parseFragment(window.location.hash);
    if (location.key !== this.key) {
      // Another share's link was pasted into this tab: start over with it.
      window.location.reload();
      return;
    }
    this.showPath(location.path).catch((error: unknown) => {
      this.setNotice(`Could not open this folder: ${errorText(error)}`);
    });
  }

  private async showPath(path: string[]): Promise<void> {
    const api = this.api;
    if (!api) return;
    const navigation = ++this.navigation;
    let entry: EntryRow | null;
    try {
      entry = await api.lookup(lookupPath(path));
    } catch (error) {
      if (navigation === this.navigation) this.setNotice(`Could not open this folder: ${errorText(error)}`);
      return;
    }
    if (navigation !== this.navigation) return;
    if (!entry) {
      this.showMissing(path);
      return;
    }
    this.waitingFor = null;
    if (entry.kind === 'dir') {
      await this.showDir(entry, navigation);
      return;
    }
    // A link to a file: show its folder, and the file in the preview.
    const parent = await api.entry(entry.parent);
    if (navigation !== this.navigation || !parent) return;
    await this.showDir(parent, navigation);
    if (entry.kind === 'file' && navigation === this.navigation) this.open(entry);
  }

  private showMissing(path: string[]): void {
    const api = this.api;
    if (!api) return;
    const state = api.status().state;
    const progress = api.progress();
    // A saved index still loading may hold the folder in a part not loaded yet.
    const stillArriving = (!progress.complete || progress.loadingCache) && (state === 'connecting' || state === 'connected');
    const where = path.length === 0 ? 'the shared folder' : `“${path.join('/')}”`;
    if (stillArriving) {
      this.waitingFor = path;
      this.setNotice(`Waiting for ${where} to arrive…`);
      return;
    }
    this.waitingFor = null;
    if (state === 'invalid-link' || state === 'link-ended' || state === 'error') {
      // The status banner says what went wrong; there is nothing to list.
      this.setNotice(null);
      this.setContentShown(false);
      return;
    }
    if (path.length === 0) {
      this.setNotice('Nothing of this share arrived before the connection ended.');
      return;
    }
    const root = el('a', { text: 'Go to the top folder', attrs: { href: fragmentFor(this.key, []) } });
    this.setNotice(`${where} is not in this share. It may have been moved or removed. `, root);
  }

  private async showDir(entry: EntryRow, navigation: number): Promise<void> {
    const listing = this.listing;
    if (!listing) return;
    this.setNotice(null);
    this.setContentShown(true);
    if (listing.dir !== entry.id) {
      if (listing.dir !== null) this.rememberScroll(listing.dir, listing.scrollTop);
      const hadFocus = document.activeElement === document.body || listing.element.contains(document.activeElement);
      // A filter belongs to the folder it was typed in, and so does a preview.
      this.filterBox.value = '';
      if (this.preview?.shown && this.preview.shown.parent !== entry.id) this.preview.close();
      listing.show(entry.id, this.order, this.scrolls.get(entry.id) ?? 0, '', this.layouts.get(entry.id) ?? null);
      if (hadFocus) listing.focus();
    }
    this.shownDir = entry;
    await this.updateCrumbs(navigation);
    await this.revealPending();
  }

  /** Selects the search result waiting for its folder, once that folder is shown. */
  private async revealPending(): Promise<void> {
    const want = this.pendingReveal;
    const listing = this.listing;
    if (!want || !listing || !this.api || listing.dir !== want.parent) return;
    this.pendingReveal = null;
    const at = await this.api.indexIn(want.parent, want.id, this.order.sort, this.order.descending);
    const row = await this.api.entry(want.id);
    if (at !== null && row !== null && listing.dir === want.parent) listing.reveal(at, row);
  }

  /** Fetches the path of the shown folder for the breadcrumbs and the title. */
  private async updateCrumbs(navigation: number): Promise<void> {
    const api = this.api;
    const shown = this.shownDir;
    if (!api || !shown) return;
    const crumbs = await api.path(shown.id);
    if (navigation !== this.navigation) return;
    if (crumbs.length === 0) {
      // The shown folder left the index (removed on the sharer's side).
      this.setNotice('This folder was removed on the sharer’s side.', el('a', { text: 'Go to the top folder', attrs: { href: fragmentFor(this.key, []) } }));
      return;
    }
    this.crumbs = crumbs;
    this.breadcrumbs.show(crumbs);
    const names = crumbs.slice(1).map((crumb) => crumb.name);
    const fragment = fragmentFor(this.key, names);
    if (fragment !== window.location.hash) {
      // The folder was renamed, or the link spelled it differently: fix the address.
      history.replaceState(history.state, '', fragment);
    }
    const rootName = crumbs[0]?.name || 'Shared folder';
    this.shareName.textContent = rootName;
    this.shareName.title = rootName;
    const here = crumbs.length > 1 ? ` › ${crumbs[crumbs.length - 1]?.name ?? ''}` : '';
    document.title = `${rootName}${here} — linkfs`;
  }

  private navigateTo(names: string[]): void {
    window.location.hash = fragmentFor(this.key, names);
  }

  private open(row: EntryRow): void {
    if (row.kind === 'dir') {
      const shown = this.shownDir;
      if (shown && row.parent === shown.id && this.crumbs.at(-1)?.id === shown.id) {
        this.navigateTo([...this.crumbs.slice(1).map((crumb) => crumb.name), row.name]);
      } else {
        void this.api?.path(row.id).then((path) => this.navigateTo(path.slice(1).map((crumb) => crumb.name)));
      }
      return;
    }
    if (row.kind !== 'file') return;
    if (previewKindOf(row.name, row.size).kind === 'none') {
      this.downloads?.start(row);
      return;
    }
    const wasShown = this.preview?.shown !== null && this.preview?.shown !== undefined;
    this.preview?.open(row);
    this.content.classList.add('has-preview');
    // The phone's Back closes the preview (it covers the screen there) instead of leaving the folder.
    if (!wasShown) history.pushState({ linkfsPreview: true }, '');
  }

  private up(): void {
    if (this.crumbs.length > 1) this.navigateTo(this.crumbs.slice(1, -1).map((crumb) => crumb.name));
  }

  private setOrder(order: ListingOrder): void {
    this.order = order;
    const listing = this.listing;
    if (listing?.dir != null) {
      this.scrolls.delete(listing.dir);
      listing.show(listing.dir, order, 0, this.filterBox.value, listing.shownLayout);
    }
  }

  private onFilterInput(): void {
    if (this.filterTimer !== null) clearTimeout(this.filterTimer);
    this.filterTimer = setTimeout(() => {
      this.filterTimer = null;
      const listing = this.listing;
      if (listing?.dir != null) listing.show(listing.dir, this.order, 0, this.filterBox.value, listing.shownLayout);
    }, FILTER_DELAY_MS);
  }

  private onFilterKey(event: KeyboardEvent): void {
    if (event.key === 'Escape' && this.filterBox.value !== '') {
      this.filterBox.value = '';
      this.onFilterInput();
      event.stopPropagation();
    } else if (event.key === 'ArrowDown' || event.key === 'Enter') {
      this.listing?.focus();
      event.preventDefault();
    }
  }

  private rememberScroll(dir: EntryId, scrollTop: number): void {
    this.scrolls.delete(dir);
    this.scrolls.set(dir, scrollTop);
    if (this.scrolls.size > REMEMBERED_SCROLLS) {
      const oldest = this.scrolls.keys().next();
      if (!oldest.done) this.scrolls.delete(oldest.value);
    }
  }

  private showCount(total: number | null, filter: FilterProgress | null): void {
    let text = total === null ? '' : formatItems(total);
    if (filter) {
      const matches = `${formatCount(filter.matches)} ${filter.matches === 1 ? 'match' : 'matches'}`;
      if (filter.truncated) text = `First ${formatCount(MAX_MATCHES)} matches`;
      else if (!filter.done) text = `${matches} · ${filter.total > 0 ? Math.floor((filter.scanned / filter.total) * 100) : 0}% searched`;
      else text = `${matches} of ${formatItems(filter.total)}`;
    }
    this.count.textContent = text;
  }

  /**
   * The link asks for a password: the form instead of the share, before anything of
   * it; a wrong one ended the visit, so the next try opens the link again.
   */
  private askPassword(status: ConnectionStatus): void {
    if (status.state !== 'password' && status.state !== 'password-wrong') {
      // The sharer closes a prompt left for a minute and the page connects
      // again: the form stays, with what was typed, until the share opens.
      if ((status.state === 'reconnecting' || status.state === 'connecting') && !this.password.element.hidden) return;
      if (!this.password.element.hidden) {
        this.password.hide();
        this.setContentShown(true);
      }
      return;
    }
    void rememberAsks(this.key);
    this.setNotice(null);
    this.setContentShown(false);
    this.indexProgress.element.hidden = true;
    if (status.state === 'password') {
      this.password.show('', (p) => this.api?.givePassword(p));
    } else {
      this.password.show(status.message, (p) => {
        void keepForReload(this.key, p).then(() => window.location.reload());
      });
    }
  }

  /** Hides the toolbar and the listing when there is nothing to browse at all. */
  private setContentShown(shown: boolean): void {
    this.toolbar.hidden = !shown;
    this.content.hidden = !shown;
  }

  private setNotice(text: string | null, ...extra: Node[]): void {
    this.notice.hidden = text === null;
    this.notice.replaceChildren(text ?? '', ...extra);
    this.content.classList.toggle('has-notice', text !== null);
  }
}

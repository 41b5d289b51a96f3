// The directory listing: a virtualized grid with a fixed row height. Only the rows in
// view (plus a small overscan) exist in the DOM, and their data comes in windows from
// DirectoryPages, so a directory of 100,000 or 1,000,000 entries scrolls like one of 50.
//
// Directories too tall for a browser's maximum element height are scrolled
// proportionally: the scrollbar maps onto row indexes instead of onto pixels.

import type { EntryId, EntryRow, SortKey, ShareApi } from '../api';
import { DirectoryPages, PAGE_ROWS, type ListingOrder, type RowSource } from './directory-pages';
import { FilteredRows, type FilterProgress } from './name-filter';
import { el } from './dom';
import { mostlyPictures, previewKindOf } from './file-types';
import { ThumbnailQueue } from './thumbnails';
import { formatFullTime, formatItems, formatSize, formatTime } from './format';
import { icon, type IconName } from './icons';

/** Rows are taller on narrow screens, where fingers tap (style.css's --row says the same). */
const NARROW = typeof matchMedia === 'function' ? matchMedia('(max-width: 600px)') : null;
export function rowHeight(): number {
  return NARROW?.matches ? 46 : 36;
}
const OVERSCAN = 8;
/** Lines of tiles kept beyond the screen in the grid (thumbnails are asked only for those on it). */
const GRID_OVERSCAN = 2;
/** A folder opens as a grid when this many of its first entries are mostly photos and videos. */
const LAYOUT_SAMPLE = 48;
/** A touch held this long selects (as on phones), ms. */
const LONG_PRESS_MS = 500;

/** Rows of names, or tiles of thumbnails. */
export type Layout = 'list' | 'grid';
/** Keep the scrollable height well under every browser's element size limit. */
const MAX_SCROLL_PX = 8_000_000;

export interface ListingActions {
  /** A row was activated (click or Enter). */
  open(row: EntryRow): void;
  download(row: EntryRow): void;
  /** Backspace: go to the parent folder. */
  up(): void;
  orderChanged(order: ListingOrder): void;
  /**
   * The number of rows shown changed (null: not known yet), or, while a name filter
   * scans the directory, its progress.
   */
  countChanged(total: number | null, filter: FilterProgress | null): void;
  /** The selection changed (checkboxes, Ctrl/⌘-click, Shift-click, Space, Ctrl+A, long-press). */
  selectionChanged(rows: EntryRow[]): void;
  /** The folder is shown as a list or a grid now (chosen, or decided by what it holds). */
  layoutChanged(layout: Layout): void;
}

/** At most this many entries are selected at once (select all of a huge folder stops there). */
export const MAX_SELECTED = 100_000;

const COLUMNS: { key: SortKey; label: string; className: string }[] = [
  { key: 'name', label: 'Name', className: 'col-name' },
  { key: 'size', label: 'Size', className: 'col-size' },
  { key: 'mtime', label: 'Modified', className: 'col-mtime' },
];

/** One row element, built once and refilled as it is recycled for other indexes. */
interface RowView {
  element: HTMLElement;
  iconSlot: HTMLElement;
  iconName: IconName | null;
  name: HTMLElement;
  target: HTMLElement;
  size: HTMLElement;
  mtime: HTMLElement;
  download: HTMLButtonElement;
  check: HTMLInputElement;
  thumb: HTMLImageElement;
  /** The data it shows; a new object from a fresher page re-renders it. */
  data: EntryRow | undefined;
  index: number;
}

let firstRowMarked = false;

export class DirectoryListing {
  readonly element: HTMLElement;
  private readonly grid: HTMLElement;
  private readonly viewport: HTMLElement;
  private readonly sizer: HTMLElement;
  private readonly message: HTMLElement;
  private readonly headers = new Map<SortKey, HTMLElement>();
  private pages: RowSource | null = null;
  private order: ListingOrder = { sort: 'name', descending: false };
  private readonly rendered = new Map<number, RowView>();
  /** Row views in the DOM but hidden, ready for reuse. */
  private readonly pool: RowView[] = [];
  private activeIndex = 0;
  private frame = 0;
  /** focus() came while a render was pending: focus once it is painted. */
  private focusAfterRender = false;
  private pendingScrollTop: number | null = null;
  private revealIndex: number | null = null;
  /** Text for an empty directory: differs while the index is still filling. */
  private emptyText = 'This folder is empty.';
  private reportedCount = '';
  /** Selected entries of the shown folder, by id, in the order they were selected. */
  private readonly selected = new Map<EntryId, EntryRow>();
  /** Where a Shift-click range starts (the last row clicked or toggled). */
  private anchor: number | null = null;
  private readonly selectAllBox: HTMLInputElement;
  private layout: Layout = 'list';
  /** The thumbnails' size in this render (0 in the list). */
  private tilePx = 0;
  /** Decide the layout from the folder's first entries (no choice was made for it). */
  private layoutPending = false;
  readonly thumbnails: ThumbnailQueue;
  /** A long-press selected: the click that ends it does not open the row. */
  private pressed = false;
  private pressTimer: ReturnType<typeof setTimeout> | null = null;
  private pressStart: { x: number; y: number } | null = null;
  /** The last pointer was a finger (a tap toggles while something is selected). */
  private touching = false;

  constructor(
    private readonly api: ShareApi,
    private readonly actions: ListingActions,
  ) {
    const headRow = el('div', { className: 'listing-row listing-head-row', attrs: { role: 'row', 'aria-rowindex': '1' } });
    this.selectAllBox = el('input', {
      className: 'row-select select-all',
      attrs: { type: 'checkbox', 'aria-label': 'Select everything in this folder', title: 'Select all (Ctrl+A)' },
      data: { testid: 'select-all' },
    });
    this.selectAllBox.addEventListener('click', (event) => {
      event.stopPropagation();
      if (this.selectAllBox.checked) void this.selectAll();
      else this.clearSelection();
    });
    for (const column of COLUMNS) {
      const header = el(
        'div',
        { className: `listing-header ${column.className}`, attrs: { role: 'columnheader', 'aria-sort': 'none' }, data: { testid: `sort-${column.key}` } },
        el('button', { className: 'sort-button', text: column.label, attrs: { type: 'button', title: `Sort by ${column.label.toLowerCase()}` } }),
      );
      header.addEventListener('click', () => this.sortBy(column.key));
      if (column.key === 'name') header.prepend(this.selectAllBox);
      this.headers.set(column.key, header);
      headRow.append(header);
    }
    headRow.append(el('div', { className: 'listing-header col-actions', attrs: { role: 'columnheader', 'aria-label': 'Actions' } }));

    this.sizer = el('div', { className: 'listing-sizer', attrs: { role: 'presentation' } });
    this.message = el('div', { className: 'listing-message', attrs: { role: 'status' } });
    this.viewport = el('div', { className: 'listing-viewport', attrs: { role: 'rowgroup' } }, this.sizer);
    this.grid = el(
      'div',
      { className: 'listing-grid', attrs: { role: 'grid', 'aria-label': 'Folder contents', 'aria-colcount': '4', tabindex: '0' } },
      el('div', { className: 'listing-head', attrs: { role: 'rowgroup' } }, headRow),
      this.viewport,
    );
    // The message ("This folder is empty.", errors) sits over the grid, outside it.
    this.element = el('div', { className: 'listing', data: { testid: 'listing', loading: 'true' } }, this.grid, this.message);

    this.viewport.addEventListener('scroll', () => this.schedule(), { passive: true });
    this.viewport.addEventListener('click', (event) => this.onClick(event));
    this.viewport.addEventListener('pointerdown', (event) => this.onPointerDown(event));
    this.viewport.addEventListener('pointermove', (event) => this.onPointerMove(event), { passive: true });
    for (const type of ['pointerup', 'pointercancel'] as const) this.viewport.addEventListener(type, () => this.cancelPress());
    this.viewport.addEventListener('contextmenu', (event) => {
      if (this.touching) event.preventDefault();
    });
    this.grid.addEventListener('keydown', (event) => this.onKey(event));
    new ResizeObserver(() => this.schedule()).observe(this.viewport);
    this.updateHeaders();
    this.thumbnails = new ThumbnailQueue(api, (id) => this.thumbnailCame(id));
  }

  /** Shows `dir` in `order`, scrolled to `scrollTop`, only names containing `filter`. */
  show(dir: EntryId, order: ListingOrder, scrollTop = 0, filter = '', layout: Layout | null = null): void {
    this.order = order;
    this.layoutPending = layout === null;
    this.setLayoutNow(layout ?? this.layout);
    this.pages?.dispose();
    const changed = (): void => this.schedule();
    this.pages = filter.trim() === ''
      ? new DirectoryPages(this.api, dir, order, changed)
      : new FilteredRows(this.api, dir, order, filter, changed);
    // The first rows are asked for now, not at the next frame's render.
    if (scrollTop === 0 && this.pages instanceof DirectoryPages) this.pages.want(0, PAGE_ROWS - 1);
    this.activeIndex = 0;
    this.reportedCount = '';
    if (this.selected.size > 0 || this.anchor !== null) this.clearSelection();
    this.clearRows();
    this.pendingScrollTop = scrollTop;
    this.updateHeaders();
    this.schedule();
  }

  /** The shown directory changed (or may have): refetch the visible rows. */
  refresh(): void {
    this.pages?.invalidate();
    this.schedule();
  }

  get dir(): EntryId | null {
    return this.pages?.dir ?? null;
  }

  get scrollTop(): number {
    return this.viewport.scrollTop;
  }

  /** Rows the shown directory has, as of the latest answer (null before it). */
  get total(): number | null {
    return this.pages?.total ?? null;
  }

  setEmptyText(text: string): void {
    if (text === this.emptyText) return;
    this.emptyText = text;
    this.schedule();
  }

  /**
   * Focuses the listing; with a render pending, once that render is painted.
   * Focusing asks the browser for the page's layout at once: before the render it
   * was laid out twice (~20 ms of a reopened share's first frame); right after it,
   * inside the frame, the new rows were laid out before their paint (a third of
   * that frame's script time at 1M entries, Chromium's profiler). After the paint
   * the layout is already done.
   */
  focus(): void {
    if (this.frame !== 0) this.focusAfterRender = true;
    else this.grid.focus({ preventScroll: true });
  }

  /**
   * The thumbnails shown on the folder's first screen (the tiles of its first
   * lines, scrolled or not), for keeping with it: none in the list layout.
   */
  firstScreenPictures(): Map<string, string> {
    const pages = this.pages;
    if (this.layout !== 'grid' || !pages || this.tilePx === 0) return new Map();
    const { cols, lineH } = this.metrics();
    const count = Math.min(pages.total ?? 0, cols * Math.ceil((this.viewport.clientHeight || 1) / lineH));
    const rows: EntryRow[] = [];
    for (let index = 0; index < count; index += 1) {
      const row = pages.row(index);
      if (row) rows.push(row);
    }
    return this.thumbnails.here(rows, this.tilePx);
  }

  get shownLayout(): Layout {
    return this.layout;
  }

  /** Shows the folder as a list or a grid (the user chose). */
  setLayout(layout: Layout): void {
    this.layoutPending = false;
    if (layout === this.layout) return;
    const index = this.activeIndex;
    this.setLayoutNow(layout);
    this.scrollToIndex(index);
  }

  private setLayoutNow(layout: Layout): void {
    const changed = layout !== this.layout;
    this.layout = layout;
    this.element.classList.toggle('is-grid', layout === 'grid');
    this.element.dataset.layout = layout;
    this.grid.setAttribute('aria-colcount', layout === 'grid' ? '1' : '4');
    if (changed) {
      // Views are rebuilt for the other shape.
      for (const view of this.rendered.values()) this.park(view);
      this.rendered.clear();
      this.schedule();
    }
    this.actions.layoutChanged(layout);
  }

  /** Columns, and the height of one line of rows or tiles, for the viewport's width. */
  private metrics(): { cols: number; lineH: number; tileW: number } {
    if (this.layout === 'list') return { cols: 1, lineH: rowHeight(), tileW: 0 };
    const width = this.viewport.clientWidth || 360;
    const cols = Math.max(2, Math.floor(width / (NARROW?.matches ? 110 : 150)));
    const tileW = Math.floor(width / cols);
    return { cols, lineH: tileW, tileW };
  }

  /** Thumbnails' short side in device pixels: the tile's, in steps of 64 (so the cache keeps matching). */
  private thumbPx(tileW: number): number {
    const ratio = Math.min(2, Math.max(1, globalThis.devicePixelRatio || 1));
    return Math.min(512, Math.ceil((tileW * ratio) / 64) * 64);
  }

  private thumbnailCame(id: EntryId): void {
    for (const view of this.rendered.values()) if (view.data?.id === id) this.fillThumb(view);
  }

  private fillThumb(view: RowView): void {
    const data = view.data;
    // The size of this render's tiles: reading the viewport's width here, between
    // writes to the rows, would make the browser lay the page out once per tile.
    const url = this.layout === 'grid' && data && data.kind === 'file' && this.tilePx > 0 ? this.thumbnails.url(data, this.tilePx) : null;
    if (url === null) {
      if (!view.thumb.hidden) {
        view.thumb.hidden = true;
        view.thumb.removeAttribute('src');
        view.element.classList.remove('has-thumb');
      }
      return;
    }
    if (view.thumb.getAttribute('src') !== url) view.thumb.src = url;
    view.thumb.hidden = false;
    view.element.classList.add('has-thumb');
  }

  // --- rendering ---

  private schedule(): void {
    this.element.dataset.loading = 'true';
    if (this.frame !== 0) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
      if (this.focusAfterRender) {
        this.focusAfterRender = false;
        // The frame paints when this callback returns; the task after it comes then.
        setTimeout(() => this.focus(), 0);
      }
    });
  }

  private render(): void {
    const pages = this.pages;
    if (!pages) return;
    const total = pages.total ?? 0;
    this.decideLayout(pages, total);
    const { cols, lineH, tileW } = this.metrics();
    const grid = this.layout === 'grid';
    this.tilePx = grid ? this.thumbPx(tileW) : 0;
    const lines = Math.ceil(total / cols);
    const fullHeight = lines * lineH;
    const height = Math.min(fullHeight, MAX_SCROLL_PX);
    this.sizer.style.height = `${height}px`;
    this.grid.setAttribute('aria-rowcount', String(total + 1));

    if (this.pendingScrollTop !== null && pages.total !== null) {
      this.viewport.scrollTop = this.pendingScrollTop;
      this.pendingScrollTop = null;
    }
    if (this.revealIndex !== null && pages.total !== null) {
      const index = this.revealIndex;
      this.revealIndex = null;
      this.scrollToIndex(index);
    }

    const viewHeight = this.viewport.clientHeight;
    const scrollTop = this.viewport.scrollTop;
    const visibleLines = Math.ceil(viewHeight / lineH);
    const scaled = fullHeight > MAX_SCROLL_PX;
    const topLine = scaled
      ? (scrollTop / Math.max(1, height - viewHeight)) * Math.max(0, lines - viewHeight / lineH)
      : scrollTop / lineH;
    const overscan = grid ? GRID_OVERSCAN : OVERSCAN;
    const first = Math.max(0, (Math.floor(topLine) - overscan) * cols);
    const last = Math.min(total - 1, (Math.floor(topLine) + visibleLines + overscan) * cols + cols - 1);
    pages.want(first, Math.max(first, last));
    // Thumbnails for the tiles on screen only, asked before the tiles are drawn (the
    // cache's answers come while this render's DOM work goes on).
    if (grid) {
      const onScreen: EntryRow[] = [];
      const from = Math.floor(topLine) * cols;
      const to = Math.min(total - 1, Math.ceil(topLine + viewHeight / lineH) * cols - 1);
      for (let index = from; index <= to; index += 1) {
        const row = pages.row(index);
        if (row) onScreen.push(row);
      }
      this.thumbnails.want(onScreen, this.tilePx);
    } else {
      this.thumbnails.want([], 0);
    }

    // Views leaving the range are refilled for the rows entering it. The shown rows
    // stay in index order in the DOM (for screen readers and tests): rows that stay
    // keep their place, and each entering row goes next to its neighbour, so a scroll
    // by k rows moves k elements.
    const free: RowView[] = [];
    let firstKept: HTMLElement | null = null;
    let firstKeptIndex = Infinity;
    for (const [index, view] of this.rendered) {
      if (index < first || index > last) {
        this.rendered.delete(index);
        free.push(view);
      } else if (index < firstKeptIndex) {
        firstKeptIndex = index;
        firstKept = view.element;
      }
    }
    let previous: HTMLElement | null = null;
    for (let index = first; index <= last; index += 1) {
      let view = this.rendered.get(index);
      const data = pages.row(index);
      if (!view) {
        view = free.pop() ?? this.pool.pop() ?? this.createRow();
        this.fill(view, index, data);
        view.element.hidden = false;
        if (previous) {
          if (previous.nextElementSibling !== view.element) previous.after(view.element);
        } else if (firstKept) {
          if (firstKept.previousElementSibling !== view.element) this.sizer.insertBefore(view.element, firstKept);
        } else if (this.sizer.firstElementChild !== view.element) {
          this.sizer.prepend(view.element);
        }
        this.rendered.set(index, view);
      } else if (view.data !== data) {
        this.fill(view, index, data);
      }
      previous = view.element;
      const line = Math.floor(index / cols);
      const top = scaled ? scrollTop + (line - topLine) * lineH : line * lineH;
      if (grid) {
        view.element.style.transform = `translate(${(index % cols) * tileW}px, ${top}px)`;
        view.element.style.width = `${tileW}px`;
        view.element.style.height = `${lineH}px`;
      } else {
        view.element.style.transform = `translateY(${top}px)`;
        view.element.style.width = '';
        view.element.style.height = '';
      }
    }
    for (const view of free) this.park(view);
    this.updateActive();
    this.updateMessage(pages, total);
    // For tests and styles: which folder is shown, and whether rows are still coming.
    let pending = pages.loading || pages.total === null;
    for (const view of this.rendered.values()) if (!view.data) pending = true;
    this.element.dataset.dir = String(pages.dir);
    this.element.dataset.total = String(pages.total ?? '');
    this.element.dataset.loading = String(pending && pages.error === null);
    const filter = pages instanceof FilteredRows ? pages.progress : null;
    const count = `${pages.total}:${filter ? `${filter.scanned}:${filter.done}` : ''}`;
    if (count !== this.reportedCount) {
      this.reportedCount = count;
      this.actions.countChanged(pages.total, filter);
    }
  }

  /** No layout was chosen for this folder: a grid when its first entries are mostly pictures. */
  private decideLayout(pages: RowSource, total: number): void {
    if (!this.layoutPending || pages.total === null) return;
    // The folder's first entries; or, scrolled down (a folder shown again), the ones loaded there.
    const wanted = Math.min(total, LAYOUT_SAMPLE);
    let sample: EntryRow[] = [];
    for (let i = 0; i < wanted; i += 1) {
      const row = pages.row(i);
      if (row) sample.push(row);
    }
    if (sample.length < wanted) {
      sample = [];
      const { cols } = this.metrics();
      const from = Math.floor(this.viewport.scrollTop / this.metrics().lineH) * cols;
      for (let i = from; i < Math.min(total, from + LAYOUT_SAMPLE); i += 1) {
        const row = pages.row(i);
        if (row) sample.push(row);
      }
      if (sample.length < Math.min(wanted, LAYOUT_SAMPLE / 2)) return;
    }
    this.layoutPending = false;
    const layout: Layout = mostlyPictures(sample) ? 'grid' : 'list';
    if (layout !== this.layout) this.setLayoutNow(layout);
  }

  private createRow(): RowView {
    const iconSlot = el('span', { className: 'icon-slot' });
    const name = el('span', { className: 'entry-name' });
    const target = el('span', { className: 'link-target' });
    const size = el('div', { className: 'cell col-size', attrs: { role: 'gridcell' } });
    const mtime = el('div', { className: 'cell col-mtime', attrs: { role: 'gridcell' } });
    // Clicks on it reach the viewport's delegated handler (onClick).
    const download = el(
      'button',
      { className: 'icon-button row-download', attrs: { type: 'button', tabindex: '-1' }, data: { testid: 'row-download' } },
      icon('download'),
    );
    const check = el('input', { className: 'row-select', attrs: { type: 'checkbox', tabindex: '-1' }, data: { testid: 'row-select' } });
    // Decorative: the tile's name says what it is.
    const thumb = el('img', { className: 'tile-thumb', attrs: { alt: '', decoding: 'async', draggable: 'false' }, data: { testid: 'thumb' } });
    thumb.hidden = true;
    const element = el(
      'div',
      { className: 'listing-row', attrs: { role: 'row' } },
      el('div', { className: 'cell col-name', attrs: { role: 'gridcell' } }, thumb, check, iconSlot, name, target),
      size,
      mtime,
      el('div', { className: 'cell col-actions', attrs: { role: 'gridcell' } }, download),
    );
    this.sizer.append(element);
    return { element, iconSlot, iconName: null, name, target, size, mtime, download, check, thumb, data: undefined, index: -1 };
  }

  private fill(view: RowView, index: number, data: EntryRow | undefined): void {
    view.data = data;
    view.index = index;
    const element = view.element;
    element.id = `listing-row-${index}`;
    element.setAttribute('aria-rowindex', String(index + 2));
    element.dataset.index = String(index);
    if (!data) {
      element.className = 'listing-row row-pending';
      element.dataset.testid = 'row-pending';
      delete element.dataset.name;
      delete element.dataset.kind;
      delete element.dataset.id;
      element.removeAttribute('title');
      this.setIcon(view, null);
      view.name.textContent = '';
      view.target.textContent = '';
      view.size.textContent = '';
      view.mtime.textContent = '';
      view.mtime.removeAttribute('title');
      view.download.hidden = true;
      view.check.hidden = true;
      this.fillThumb(view);
      return;
    }
    if (!firstRowMarked) {
      // When the page first showed an entry (benchmarks read it).
      firstRowMarked = true;
      performance.mark('linkfs-first-row');
    }
    element.className = `listing-row row-${data.kind}`;
    view.check.hidden = false;
    view.check.checked = this.selected.has(data.id);
    view.check.setAttribute('aria-label', `Select ${data.name}`);
    element.classList.toggle('is-selected', view.check.checked);
    element.dataset.testid = 'row';
    element.dataset.name = data.name;
    element.dataset.kind = data.kind;
    element.dataset.id = String(data.id);
    this.setIcon(view, iconFor(data));
    view.name.textContent = data.name;
    if (data.kind === 'symlink') {
      view.target.textContent = `→ ${data.target ?? ''}`;
      element.title = `${data.name} is a link to ${data.target ?? 'an unknown target'}; links are not followed.`;
    } else {
      view.target.textContent = '';
      element.removeAttribute('title');
    }
    view.size.textContent = data.kind === 'dir' ? (data.children === undefined ? '' : formatItems(data.children)) : formatSize(data.size);
    view.mtime.textContent = formatTime(data.mtime);
    view.mtime.title = formatFullTime(data.mtime);
    view.download.hidden = data.kind === 'symlink';
    this.fillThumb(view);
    if (this.layout === 'grid') {
      const what = data.kind === 'dir' ? `folder, ${view.size.textContent}` : data.kind === 'symlink' ? 'link' : view.size.textContent;
      element.setAttribute('aria-label', `${data.name}, ${what}`);
    } else {
      element.removeAttribute('aria-label');
    }
    if (data.kind !== 'symlink') {
      const label = data.kind === 'dir' ? `Download ${data.name} as a ZIP` : `Download ${data.name}`;
      view.download.setAttribute('aria-label', label);
      view.download.title = label;
    }
  }

  private setIcon(view: RowView, name: IconName | null): void {
    if (view.iconName === name) return;
    view.iconName = name;
    view.iconSlot.replaceChildren(...(name === null ? [] : [icon(name)]));
  }

  /** Hides a view for reuse; it stops looking like a row to queries. */
  private park(view: RowView): void {
    view.element.hidden = true;
    view.element.dataset.testid = 'row-parked';
    view.data = undefined;
    this.pool.push(view);
  }

  private clearRows(): void {
    for (const view of this.rendered.values()) this.park(view);
    this.rendered.clear();
    this.sizer.style.height = '0px';
    this.message.hidden = true;
  }

  private updateMessage(pages: RowSource, total: number): void {
    let text = '';
    if (pages.error !== null) text = `Could not list this folder: ${pages.error}`;
    else if (pages.total === null) text = pages.loading ? (pages instanceof FilteredRows ? 'Looking for matching names…' : 'Loading…') : '';
    else if (total === 0) text = pages instanceof FilteredRows ? (pages.loading ? '' : 'No names in this folder match the filter.') : this.emptyText;
    this.message.textContent = text;
    this.message.hidden = text === '';
    this.message.classList.toggle('is-error', pages.error !== null);
  }

  private updateHeaders(): void {
    for (const [key, header] of this.headers) {
      const active = key === this.order.sort;
      header.setAttribute('aria-sort', active ? (this.order.descending ? 'descending' : 'ascending') : 'none');
      header.classList.toggle('is-sorted', active);
    }
  }

  // --- interaction ---

  private sortBy(key: SortKey): void {
    const descending = key === this.order.sort ? !this.order.descending : false;
    this.actions.orderChanged({ sort: key, descending });
  }

  private rowAtEvent(event: Event): EntryRow | undefined {
    const target = event.target instanceof Element ? event.target.closest<HTMLElement>('.listing-row') : null;
    const index = Number(target?.dataset.index);
    if (!target || !Number.isInteger(index)) return undefined;
    this.activeIndex = index;
    this.updateActive();
    return this.rendered.get(index)?.data;
  }

  private onClick(event: MouseEvent): void {
    if (this.pressed) {
      // The click ending a long-press: it selected already.
      this.pressed = false;
      event.preventDefault();
      return;
    }
    const row = this.rowAtEvent(event);
    if (!row) return;
    const onCheck = event.target instanceof HTMLInputElement && event.target.classList.contains('row-select');
    // On a phone, once something is selected, a tap adds or removes (as galleries do).
    const tapToggles = this.touching && this.selected.size > 0;
    if (onCheck || event.ctrlKey || event.metaKey || tapToggles) {
      this.toggle(row, this.activeIndex);
      if (!onCheck) event.preventDefault();
      return;
    }
    if (event.shiftKey && this.anchor !== null) {
      event.preventDefault();
      void this.selectRange(this.anchor, this.activeIndex);
      return;
    }
    const onDownload = event.target instanceof Element && event.target.closest('.row-download') !== null;
    if (onDownload) this.actions.download(row);
    else if (row.kind !== 'symlink') this.actions.open(row);
  }

  private onPointerDown(event: PointerEvent): void {
    this.touching = event.pointerType === 'touch';
    this.pressed = false;
    this.cancelPress();
    if (!this.touching) return;
    this.pressStart = { x: event.clientX, y: event.clientY };
    const target = event.target;
    this.pressTimer = setTimeout(() => {
      this.pressTimer = null;
      const fake = { target } as Event;
      const row = this.rowAtEvent(fake);
      if (!row) return;
      this.pressed = true;
      this.toggle(row, this.activeIndex);
      navigator.vibrate?.(10);
    }, LONG_PRESS_MS);
  }

  private onPointerMove(event: PointerEvent): void {
    const start = this.pressStart;
    if (this.pressTimer === null || !start) return;
    // A finger that moves is scrolling, not pressing.
    if (Math.hypot(event.clientX - start.x, event.clientY - start.y) > 10) this.cancelPress();
  }

  private cancelPress(): void {
    if (this.pressTimer !== null) clearTimeout(this.pressTimer);
    this.pressTimer = null;
    this.pressStart = null;
  }

  private onKey(event: KeyboardEvent): void {
    if (event.target instanceof HTMLButtonElement && (event.key === 'Enter' || event.key === ' ')) return;
    const total = this.pages?.total ?? 0;
    const { cols, lineH } = this.metrics();
    const page = Math.max(1, Math.floor(this.viewport.clientHeight / lineH) - 1) * cols;
    let next: number | null = null;
    switch (event.key) {
      case 'ArrowDown': next = this.activeIndex + cols; break;
      case 'ArrowUp':
        if (event.altKey) { this.actions.up(); event.preventDefault(); return; }
        next = this.activeIndex - cols;
        break;
      case 'ArrowRight':
        if (this.layout !== 'grid') return;
        next = this.activeIndex + 1;
        break;
      case 'ArrowLeft':
        if (this.layout !== 'grid') return;
        next = this.activeIndex - 1;
        break;
      case 'PageDown': next = this.activeIndex + page; break;
      case 'PageUp': next = this.activeIndex - page; break;
      case 'Home': next = 0; break;
      case 'End': next = total - 1; break;
      case 'Enter': {
        const row = this.pages?.row(this.activeIndex);
        if (row && row.kind !== 'symlink') this.actions.open(row);
        event.preventDefault();
        return;
      }
      case 'Backspace':
        this.actions.up();
        event.preventDefault();
        return;
      case ' ': {
        const row = this.pages?.row(this.activeIndex);
        if (row) this.toggle(row, this.activeIndex);
        event.preventDefault();
        return;
      }
      case 'a':
      case 'A':
        if (!event.ctrlKey && !event.metaKey) return;
        void this.selectAll();
        event.preventDefault();
        return;
      case 'Escape':
        if (this.selected.size === 0) return;
        this.clearSelection();
        event.preventDefault();
        return;
      default:
        return;
    }
    event.preventDefault();
    if (total === 0) return;
    this.activeIndex = Math.max(0, Math.min(total - 1, next));
    this.scrollToIndex(this.activeIndex);
    this.updateActive();
  }

  private scrollToIndex(index: number): void {
    const { cols, lineH } = this.metrics();
    const lines = Math.ceil((this.pages?.total ?? 0) / cols);
    const line = Math.floor(index / cols);
    const viewHeight = this.viewport.clientHeight;
    const fullHeight = lines * lineH;
    if (fullHeight > MAX_SCROLL_PX) {
      const height = Math.min(fullHeight, MAX_SCROLL_PX);
      const linesInView = viewHeight / lineH;
      const topLine = Math.max(0, Math.min(line - linesInView / 2, lines - linesInView));
      this.viewport.scrollTop = (topLine / Math.max(1, lines - linesInView)) * (height - viewHeight);
    } else {
      const top = line * lineH;
      if (top < this.viewport.scrollTop) this.viewport.scrollTop = top;
      else if (top + lineH > this.viewport.scrollTop + viewHeight) this.viewport.scrollTop = top + lineH - viewHeight;
    }
    this.schedule();
  }

  /** The row `delta` places from `row` in the shown order that is a file (the gallery's next and previous). */
  async neighbour(row: EntryRow, delta: 1 | -1): Promise<{ row: EntryRow; index: number } | null> {
    const pages = this.pages;
    if (!pages || row.parent !== pages.dir) return null;
    let index: number | null = null;
    for (const [i, view] of this.rendered) if (view.data?.id === row.id) index = i;
    index ??= await this.api.indexIn(pages.dir, row.id, this.order.sort, this.order.descending);
    if (index === null) return null;
    // Folders and links are stepped over (a few at most are looked at).
    for (let step = 1; step <= 64; step += 1) {
      const at = index + delta * step;
      if (at < 0 || at >= (pages.total ?? 0)) return null;
      const next = pages.row(at) ?? (await this.api.list(pages.dir, this.order.sort, this.order.descending, at, 1)).rows[0];
      if (!next) return null;
      if (next.kind === 'file') return { row: next, index: at };
    }
    return null;
  }

  /** Makes row `index` the active one and scrolls to it (the gallery moved there). */
  follow(index: number): void {
    this.activeIndex = index;
    this.scrollToIndex(index);
    this.updateActive();
  }

  /** Makes row `index` (holding `row`) the active one, scrolled into view and selected alone. */
  reveal(index: number, row: EntryRow): void {
    this.activeIndex = index;
    this.selected.clear();
    this.selected.set(row.id, row);
    this.anchor = index;
    // Scrolled to once the folder's size is known (it may not be yet).
    this.pendingScrollTop = null;
    this.revealIndex = index;
    this.schedule();
    this.updateActive();
    this.selectionChanged();
    this.focus();
  }

  // --- selection ---

  /** The selected entries, in the order they were selected. */
  get selection(): EntryRow[] {
    return [...this.selected.values()];
  }

  clearSelection(): void {
    this.selected.clear();
    this.anchor = null;
    this.selectionChanged();
  }

  private toggle(row: EntryRow, index: number): void {
    if (this.selected.has(row.id)) this.selected.delete(row.id);
    else if (this.selected.size < MAX_SELECTED) this.selected.set(row.id, row);
    this.anchor = index;
    this.selectionChanged();
  }

  /** Rows [from, to] of the shown order, from the loaded windows or asked for. */
  private async rowsBetween(from: number, to: number): Promise<EntryRow[]> {
    const pages = this.pages;
    if (!pages) return [];
    const [a, b] = from <= to ? [from, to] : [to, from];
    const end = Math.min(b, a + MAX_SELECTED - 1);
    const rows: EntryRow[] = [];
    let missing = false;
    for (let i = a; i <= end; i += 1) {
      const row = pages.row(i);
      if (row) rows.push(row);
      else missing = true;
    }
    if (!missing || pages instanceof FilteredRows) return rows;
    const out: EntryRow[] = [];
    for (let start = a; start <= end; start += 5000) {
      const page = await this.api.list(pages.dir, this.order.sort, this.order.descending, start, Math.min(5000, end - start + 1));
      out.push(...page.rows);
      if (page.rows.length === 0) break;
    }
    return out;
  }

  private async selectRange(from: number, to: number): Promise<void> {
    const dir = this.dir;
    const rows = await this.rowsBetween(from, to);
    if (this.dir !== dir) return;
    for (const row of rows) if (this.selected.size < MAX_SELECTED) this.selected.set(row.id, row);
    this.selectionChanged();
  }

  private async selectAll(): Promise<void> {
    const total = this.pages?.total ?? 0;
    if (total === 0) return;
    await this.selectRange(0, total - 1);
  }

  private selectionChanged(): void {
    for (const view of this.rendered.values()) {
      const on = view.data !== undefined && this.selected.has(view.data.id);
      view.check.checked = on;
      view.element.classList.toggle('is-selected', on);
    }
    const total = this.pages?.total ?? 0;
    this.selectAllBox.checked = total > 0 && this.selected.size >= Math.min(total, MAX_SELECTED);
    this.selectAllBox.indeterminate = this.selected.size > 0 && !this.selectAllBox.checked;
    this.element.dataset.selected = String(this.selected.size);
    this.actions.selectionChanged(this.selection);
  }

  private updateActive(): void {
    for (const [index, row] of this.rendered) {
      const active = index === this.activeIndex;
      row.element.classList.toggle('is-active', active);
      row.element.setAttribute('aria-selected', String(active));
    }
    const active = this.rendered.get(this.activeIndex);
    if (active) this.grid.setAttribute('aria-activedescendant', active.element.id);
    else this.grid.removeAttribute('aria-activedescendant');
  }
}

function iconFor(row: EntryRow): IconName {
  if (row.kind === 'dir') return 'folder';
  if (row.kind === 'symlink') return 'link';
  const preview = previewKindOf(row.name, row.size);
  if (preview.kind === 'image') return 'image';
  if (preview.kind === 'media' && preview.element === 'video') return 'video';
  if (preview.kind === 'text') return 'text';
  return 'file';
}

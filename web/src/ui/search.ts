// The whole-share search: a field in the top bar and a results panel that takes
// the listing's place while a query is typed. The search itself runs in the index
// worker (ShareApi.search, core's `search` module: case-folded, NFC-normalised,
// substring or `*`/`?` glob over names) and streams its matches; the panel shows
// them as they come (full path, size, date), sortable by any column, at most
// SHOWN_STEP more rows at a time in the DOM (appended, never rebuilt while results stream) so a huge result list never stalls the page.
// Clicking a result opens its folder with it selected.

import type { SearchHit, SearchUpdate, ShareApi, SortKey } from '../api';
import { button, el } from './dom';
import { formatCount, formatFullTime, formatSize, formatTime } from './format';
import { icon } from './icons';

/** Typing pauses this long before a search starts. */
const DEBOUNCE_MS = 150;
/** Rows added to the DOM per "Show more". */
const SHOWN_STEP = 200;
/** Re-render at most this often while results stream in. */
const RENDER_EVERY_MS = 100;
/** Names sort like people read them ("file 2" before "file 10"); far cheaper than localeCompare per call. */
const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: 'base' });

export interface SearchActions {
  /** A result was chosen: show it in its folder. */
  reveal(hit: SearchHit): void;
  /** The panel opened (a query) or closed (none). */
  shown(open: boolean): void;
}

const COLUMNS: { key: SortKey; label: string }[] = [
  { key: 'name', label: 'Name' },
  { key: 'size', label: 'Size' },
  { key: 'mtime', label: 'Modified' },
];

export class SearchPanel {
  /** The search field (goes in the top bar). */
  readonly field: HTMLElement;
  /** The results (go where the listing is). */
  readonly element: HTMLElement;
  private readonly input: HTMLInputElement;
  private readonly status: HTMLElement;
  private readonly list: HTMLElement;
  private readonly more: HTMLButtonElement;
  private readonly headers = new Map<SortKey, HTMLButtonElement>();
  private hits: SearchHit[] = [];
  /** `hits` in the chosen order, kept up to date by merging each batch (null: not built yet). */
  private ordered: SearchHit[] | null = null;
  private update: SearchUpdate | null = null;
  private shownCount = SHOWN_STEP;
  /** Rows in the DOM now, in the order of `sorted()`; `-1`: rebuild on the next render. */
  private rendered = -1;
  private sort: SortKey | null = null;
  private descending = false;
  private controller: AbortController | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private renderTimer: ReturnType<typeof setTimeout> | null = null;
  private startedAt = 0;

  constructor(
    private readonly api: ShareApi,
    private readonly actions: SearchActions,
  ) {
    this.input = el('input', {
      className: 'search-input',
      attrs: { type: 'search', placeholder: 'Search the whole share', 'aria-label': 'Search every name in the share (* and ? match any text and any one character)', spellcheck: 'false', autocomplete: 'off' },
      data: { testid: 'search' },
    });
    this.input.addEventListener('input', () => this.onInput());
    this.input.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') {
        this.clear();
        event.preventDefault();
      } else if (event.key === 'Enter') {
        this.list.querySelector<HTMLElement>('.search-hit')?.focus();
      }
    });
    this.field = el('label', { className: 'search-box' }, icon('search'), this.input);

    this.status = el('div', { className: 'search-status', attrs: { role: 'status', 'aria-live': 'polite' }, data: { testid: 'search-status' } });
    const head = el('div', { className: 'search-head' });
    for (const c of COLUMNS) {
      const b = button(`Sort results by ${c.label.toLowerCase()}`, 'sort-button', () => this.sortBy(c.key), c.label);
      b.dataset.testid = `search-sort-${c.key}`;
      this.headers.set(c.key, b);
      head.append(el('div', { className: `search-col search-col-${c.key}` }, b));
    }
    this.list = el('ol', { className: 'search-list', attrs: { 'aria-label': 'Search results' }, data: { testid: 'search-results' } });
    this.more = button('Show more results', 'text-button search-more', () => {
      this.shownCount += SHOWN_STEP;
      this.render();
    }, 'Show more');
    // Rows are only ever appended while results stream in (arrival order); a new
    // search or another order rebuilds them.
    this.more.hidden = true;
    this.element = el('section', { className: 'search-panel', attrs: { 'aria-label': 'Search results' } }, this.status, head, this.list, this.more);
    this.element.hidden = true;
  }

  get query(): string {
    return this.input.value;
  }

  clear(): void {
    this.input.value = '';
    this.onInput();
  }

  private onInput(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    const q = this.input.value.trim();
    if (q === '') {
      this.stop();
      this.element.hidden = true;
      this.actions.shown(false);
      return;
    }
    this.timer = setTimeout(() => this.start(q), DEBOUNCE_MS);
  }

  private stop(): void {
    this.controller?.abort();
    this.controller = null;
  }

  private start(query: string): void {
    this.stop();
    const controller = new AbortController();
    this.controller = controller;
    this.hits = [];
    this.ordered = null;
    this.update = null;
    this.shownCount = SHOWN_STEP;
    this.rendered = -1;
    this.startedAt = performance.now();
    this.element.hidden = false;
    this.element.dataset.state = 'searching';
    this.element.dataset.query = query;
    delete this.element.dataset.firstMs;
    this.actions.shown(true);
    this.render();
    void this.api.search(
      query,
      (u) => {
        if (controller.signal.aborted) return;
        if (u.hits.length > 0 && this.element.dataset.firstMs === undefined) {
          this.element.dataset.firstMs = String(Math.round(performance.now() - this.startedAt));
        }
        for (const h of u.hits) this.hits.push(h);
        this.merge(u.hits);
        this.update = u;
        // A sorted list may change anywhere with new results: rebuilt (200 rows at most).
        if (this.sort !== null && u.hits.length > 0) this.rendered = -1;
        if (u.done) {
          this.element.dataset.state = 'done';
          this.element.dataset.doneMs = String(Math.round(performance.now() - this.startedAt));
          this.render();
        } else {
          this.renderSoon();
        }
      },
      controller.signal,
    );
  }

  private renderSoon(): void {
    if (this.renderTimer !== null) return;
    this.renderTimer = setTimeout(() => {
      this.renderTimer = null;
      this.render();
    }, RENDER_EVERY_MS);
  }

  private sortBy(key: SortKey): void {
    this.descending = this.sort === key ? !this.descending : false;
    this.sort = key;
    this.rendered = -1;
    this.ordered = null;
    this.render();
  }

  private compare(): ((a: SearchHit, b: SearchHit) => number) | null {
    const key = this.sort;
    if (key === null) return null;
    const dir = this.descending ? -1 : 1;
    if (key === 'size') return (a, b) => (a.size - b.size) * dir || collator.compare(a.path, b.path);
    if (key === 'mtime') return (a, b) => (a.mtime - b.mtime) * dir || collator.compare(a.path, b.path);
    return (a, b) => collator.compare(a.name, b.name) * dir || collator.compare(a.path, b.path);
  }

  /** Adds a batch to the ordered view: sorts the batch, then one linear merge (no full re-sort per batch). */
  private merge(batch: SearchHit[]): void {
    const cmp = this.compare();
    if (cmp === null || this.ordered === null || batch.length === 0) return;
    const add = [...batch].sort(cmp);
    const old = this.ordered;
    const out: SearchHit[] = new Array(old.length + add.length);
    let i = 0;
    let j = 0;
    let k = 0;
    while (i < old.length && j < add.length) out[k++] = cmp(add[j]!, old[i]!) < 0 ? add[j++]! : old[i++]!;
    while (i < old.length) out[k++] = old[i++]!;
    while (j < add.length) out[k++] = add[j++]!;
    this.ordered = out;
  }

  private sorted(): SearchHit[] {
    const cmp = this.compare();
    if (cmp === null) return this.hits;
    if (this.ordered === null) this.ordered = [...this.hits].sort(cmp);
    return this.ordered;
  }

  private render(): void {
    const u = this.update;
    const found = this.hits.length;
    let text: string;
    if (!u) text = 'Searching…';
    else if (!u.done) text = `Searching… ${formatCount(u.scanned)} of ${formatCount(u.total)} entries · ${formatCount(found)} found`;
    else if (u.truncated) text = `More than ${formatCount(found)} found; showing the first ${formatCount(found)}. Type more to narrow it down.`;
    else text = found === 0 ? 'Nothing in the share has a matching name.' : `${formatCount(found)} found`;
    this.status.textContent = text;
    this.element.dataset.found = String(found);
    for (const [key, b] of this.headers) {
      // Sort buttons, not table headers: they say whether they are the order in force.
      b.setAttribute('aria-pressed', String(key === this.sort));
      b.dataset.sort = key === this.sort ? (this.descending ? 'descending' : 'ascending') : 'none';
    }
    const want = Math.min(found, this.shownCount);
    if (this.rendered < 0) {
      this.list.replaceChildren(...this.sorted().slice(0, want).map((h) => this.row(h)));
      this.rendered = want;
    } else if (this.rendered < want) {
      // Arrival order, or a sorted list growing by "Show more": append what is new.
      const source = this.sort === null ? this.hits : this.sorted();
      this.list.append(...source.slice(this.rendered, want).map((h) => this.row(h)));
      this.rendered = want;
    }
    this.more.hidden = found <= this.shownCount;
  }

  private row(h: SearchHit): HTMLElement {
    const folder = h.path.includes('/') ? h.path.slice(0, h.path.lastIndexOf('/')) : '';
    const li = el(
      'li',
      { className: 'search-hit', attrs: { tabindex: '0', title: h.path }, data: { testid: 'search-hit', id: String(h.id), path: h.path } },
      el('span', { className: 'search-col search-col-name' }, icon(h.kind === 'dir' ? 'folder' : h.kind === 'symlink' ? 'link' : 'file'), el('span', { className: 'search-name', text: h.name }), el('span', { className: 'search-path', text: folder === '' ? '/' : folder })),
      el('span', { className: 'search-col search-col-size', text: h.kind === 'dir' ? '' : formatSize(h.size) }),
      el('span', { className: 'search-col search-col-mtime', text: formatTime(h.mtime), attrs: { title: formatFullTime(h.mtime) } }),
    );
    const choose = (): void => this.actions.reveal(h);
    li.addEventListener('click', choose);
    li.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') choose();
      else if (event.key === 'ArrowDown') (li.nextElementSibling as HTMLElement | null)?.focus();
      else if (event.key === 'ArrowUp') (li.previousElementSibling as HTMLElement | null)?.focus() ?? this.input.focus();
      else return;
      event.preventDefault();
    });
    return li;
  }
}

// The rows of one directory listing, fetched in windows ("pages") from
// `ShareApi.list` as the visible range needs them. Only a bounded number of pages is
// kept, and only a few requests run at once; a view that scrolls faster than answers
// arrive simply asks for what is visible now. After `invalidate()` (the directory
// changed, or the index grew) the old rows stay on screen until fresh ones replace
// them, so the list does not flash.

import type { EntryId, EntryRow, ShareApi, SortKey } from '../api';

export interface ListingOrder {
  sort: SortKey;
  descending: boolean;
}

/** Rows of one directory as the listing sees them: by index, fetched on demand. */
export interface RowSource {
  readonly dir: EntryId;
  /** Rows there are to show; null before the first answer. */
  readonly total: number | null;
  /** The latest failure, in words; null when the last request succeeded. */
  readonly error: string | null;
  /** True while rows the view needs are being fetched. */
  readonly loading: boolean;
  row(index: number): EntryRow | undefined;
  /** Declares the rows the view shows now (inclusive). */
  want(first: number, last: number): void;
  /** The directory changed: fetch again, keeping old rows on screen meanwhile. */
  invalidate(): void;
  dispose(): void;
}

/** Rows per `list` call. */
export const PAGE_ROWS = 128;
/** Pages kept in memory (about 3,000 rows). */
const MAX_PAGES = 24;
/** `list` calls in flight at once. */
const MAX_IN_FLIGHT = 3;

interface Page {
  rows: EntryRow[];
  /** Fetched before the last invalidate(): shown, but due for a refetch. */
  stale: boolean;
  lastUsed: number;
}

export class DirectoryPages implements RowSource {
  /** Children of the directory as of the latest answer; null before the first. */
  total: number | null = null;
  /** Set when the latest request failed; cleared by the next success. */
  error: string | null = null;

  private readonly pages = new Map<number, Page>();
  /** Page index -> generation it was requested in. */
  private readonly inFlight = new Map<number, number>();
  private generation = 0;
  /** A request of this generation failed: no more requests until invalidate(). */
  private failedGeneration = -1;
  private wantedFirst = 0;
  private wantedLast = PAGE_ROWS - 1;
  private clock = 0;
  private disposed = false;

  constructor(
    private readonly api: ShareApi,
    readonly dir: EntryId,
    readonly order: ListingOrder,
    /** Called when rows or the total changed. */
    private readonly onChange: () => void,
  ) {}

  /** The row at `index`, if its page has arrived. */
  row(index: number): EntryRow | undefined {
    const page = this.pages.get(Math.floor(index / PAGE_ROWS));
    return page?.rows[index % PAGE_ROWS];
  }

  /** Declares the rows the view shows now (inclusive), fetching what is missing. */
  want(first: number, last: number): void {
    this.wantedFirst = Math.max(0, first);
    this.wantedLast = Math.max(this.wantedFirst, last);
    this.clock += 1;
    for (let p = this.firstPage(); p <= this.lastPage(); p += 1) {
      const page = this.pages.get(p);
      if (page) page.lastUsed = this.clock;
    }
    this.pump();
  }

  /** The directory changed: refetch what is shown, keeping the old rows meanwhile. */
  invalidate(): void {
    this.generation += 1;
    for (const [index, page] of this.pages) {
      if (index >= this.firstPage() && index <= this.lastPage()) page.stale = true;
      else this.pages.delete(index);
    }
    this.pump();
  }

  /** Stops all further callbacks (the view moved to another directory or order). */
  dispose(): void {
    this.disposed = true;
    this.pages.clear();
  }

  /** True while a request for the current generation is outstanding. */
  get loading(): boolean {
    for (const generation of this.inFlight.values()) if (generation === this.generation) return true;
    return false;
  }

  private firstPage(): number {
    return Math.floor(this.wantedFirst / PAGE_ROWS);
  }

  private lastPage(): number {
    const last = this.total === null ? this.wantedLast : Math.min(this.wantedLast, Math.max(0, this.total - 1));
    return Math.max(this.firstPage(), Math.floor(last / PAGE_ROWS));
  }

  private pump(): void {
    if (this.disposed || this.failedGeneration === this.generation) return;
    for (let p = this.firstPage(); p <= this.lastPage() && this.inFlight.size < MAX_IN_FLIGHT; p += 1) {
      const page = this.pages.get(p);
      const requested = this.inFlight.get(p);
      const fresh = page !== undefined && !page.stale;
      if (fresh || requested === this.generation) continue;
      if (requested !== undefined) continue; // an older request for it is still out; wait for it
      this.fetch(p);
    }
  }

  private fetch(pageIndex: number): void {
    const generation = this.generation;
    this.inFlight.set(pageIndex, generation);
    const { sort, descending } = this.order;
    this.api
      .list(this.dir, sort, descending, pageIndex * PAGE_ROWS, PAGE_ROWS)
      .then(
        (answer) => {
          if (this.disposed) return;
          this.error = null;
          const current = generation === this.generation;
          if (current || this.total === null) this.total = answer.total;
          const existing = this.pages.get(pageIndex);
          if (current || !existing || existing.stale) {
            this.pages.set(pageIndex, { rows: answer.rows, stale: !current, lastUsed: this.clock });
          }
          this.evict();
        },
        (error: unknown) => {
          if (this.disposed) return;
          this.error = error instanceof Error ? error.message : String(error);
          this.failedGeneration = generation;
        },
      )
      .finally(() => {
        if (this.disposed) return;
        if (this.inFlight.get(pageIndex) === generation) this.inFlight.delete(pageIndex);
        this.onChange();
        this.pump();
      });
  }

  private evict(): void {
    if (this.pages.size <= MAX_PAGES) return;
    const first = this.firstPage();
    const last = this.lastPage();
    const candidates = [...this.pages.entries()]
      .filter(([index]) => index < first || index > last)
      .sort((a, b) => a[1].lastUsed - b[1].lastUsed);
    for (const [index] of candidates) {
      if (this.pages.size <= MAX_PAGES) break;
      this.pages.delete(index);
    }
  }
}

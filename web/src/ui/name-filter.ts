// Filtering the shown directory by name. The share lists a directory only in
// windows, so the filter scans it window by window in the current order and keeps
// only the matches (at most MAX_MATCHES), which the listing shows like any other
// rows. A change to the directory rescans it; the old matches stay on screen until
// the new scan is done.

import type { EntryId, EntryRow, ShareApi } from '../api';
import type { ListingOrder, RowSource } from './directory-pages';

/** Rows per `list` call while scanning. */
const SCAN_ROWS = 2000;
/** Matches kept; beyond this the filter says it stopped. */
export const MAX_MATCHES = 200_000;

export interface FilterProgress {
  /** Rows of the directory looked at so far, and how many it has. */
  scanned: number;
  total: number;
  matches: number;
  done: boolean;
  /** Stopped at MAX_MATCHES. */
  truncated: boolean;
}

export class FilteredRows implements RowSource {
  error: string | null = null;
  private matches: EntryRow[] = [];
  private scan = 0;
  private scanning = false;
  /** The directory changed during a scan: scan again when it ends. */
  private rescan = false;
  private disposed = false;
  private progressNow: FilterProgress = { scanned: 0, total: 0, matches: 0, done: false, truncated: false };
  private readonly needle: string;

  constructor(
    private readonly api: ShareApi,
    readonly dir: EntryId,
    private readonly order: ListingOrder,
    query: string,
    private readonly onChange: () => void,
  ) {
    this.needle = query.trim().toLocaleLowerCase();
    void this.run();
  }

  get total(): number | null {
    return this.progressNow.done || this.matches.length > 0 ? this.matches.length : null;
  }

  get loading(): boolean {
    return this.scanning;
  }

  get progress(): FilterProgress {
    return this.progressNow;
  }

  row(index: number): EntryRow | undefined {
    return this.matches[index];
  }

  want(): void {
    // Every match is in memory; nothing to fetch.
  }

  invalidate(): void {
    // Let a running scan finish (so a fast-changing directory still gets answers),
    // then scan once more.
    if (this.scanning) this.rescan = true;
    else void this.run();
  }

  dispose(): void {
    this.disposed = true;
    this.matches = [];
  }

  private async run(): Promise<void> {
    const scan = ++this.scan;
    this.scanning = true;
    this.rescan = false;
    const found: EntryRow[] = [];
    const first = this.matches.length === 0;
    let start = 0;
    let total = Infinity;
    let truncated = false;
    let failure: string | null = null;
    try {
      while (start < total && !truncated) {
        const page = await this.api.list(this.dir, this.order.sort, this.order.descending, start, SCAN_ROWS);
        if (this.disposed || scan !== this.scan) return;
        total = page.total;
        for (const row of page.rows) {
          if (!row.name.toLocaleLowerCase().includes(this.needle)) continue;
          if (found.length >= MAX_MATCHES) {
            truncated = true;
            break;
          }
          found.push(row);
        }
        if (page.rows.length === 0) break;
        start += page.rows.length;
        // The first scan shows matches as they come; a rescan swaps at the end and
        // meanwhile leaves the previous result (and its count) on screen.
        if (first) {
          this.matches = found;
          this.progressNow = { scanned: Math.min(start, total), total, matches: found.length, done: false, truncated };
          this.onChange();
        }
      }
    } catch (error) {
      if (this.disposed || scan !== this.scan) return;
      failure = error instanceof Error ? error.message : String(error);
    }
    this.error = failure;
    this.matches = found;
    const known = Number.isFinite(total) ? total : 0;
    this.progressNow = { scanned: Math.min(start, known), total: known, matches: found.length, done: true, truncated };
    this.scanning = false;
    this.onChange();
    if (this.rescan) void this.run();
  }
}

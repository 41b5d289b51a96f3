// The downloads panel: every file or ZIP being saved, with a progress bar, its rate,
// the time left, and cancel / retry / save-again. Several run at once; the share
// schedules the reads. Bytes go to disk through ./save.ts (the service worker, File
// System Access, or a Blob the browser keeps on disk), never all through memory. A preview
// that already read a file hands its Blob over, so saving it costs nothing.

import type { EntryRow, ShareApi, TransferSource, ZipFacts } from '../api';
import { freeFolderName } from '../folder-names';
import { button, el } from './dom';
import { formatCount, formatRate, formatSize } from './format';
import { icon } from './icons';
import { type Resume, type SaveRoute, startSave } from './save';
import { errorText, isAbort, saveFile } from './save-file';

export type DownloadState = 'running' | 'done' | 'failed' | 'cancelled';

/** Finished items kept in the panel. */
const KEEP_FINISHED = 20;

/** What to save: a file (with its row), or a selection as one ZIP. */
export interface SaveRequest {
  /** The name shown (and offered to the browser). */
  name: string;
  source: TransferSource;
  /** Bytes, when known before the plan (files). */
  size: number;
  /** Entry id for tests (`data-id`): the file's, or the first selected. */
  id: number;
  /** Save a ZIP source's files into a new folder in this directory instead of as a ZIP. */
  into?: FileSystemDirectoryHandle;
}

class Download {
  readonly element: HTMLElement;
  state: DownloadState = 'running';
  private readonly bar: HTMLProgressElement;
  private readonly detail: HTMLElement;
  private readonly notes: HTMLElement;
  private readonly buttons: HTMLElement;
  private job: { cancel(): void; resumeState(): Resume | null } | null = null;
  private blob: Blob | null = null;
  private done = 0;
  private total: number;
  private startedAt = performance.now();
  private startedFrom = 0;
  private frame = 0;
  private route: SaveRoute | null = null;
  private resume: Resume | null = null;
  /** A folder save: the folder made in the chosen directory (a retry writes into it again). */
  private folder: string | undefined;
  private zipFacts: ZipFacts | null = null;

  constructor(
    private readonly api: ShareApi,
    readonly request: SaveRequest,
    private readonly onRemove: (item: Download) => void,
    private readonly onStateChange: () => void,
  ) {
    this.total = request.size;
    this.bar = el('progress', { className: 'download-bar', attrs: { max: '1', 'aria-label': `Download of ${request.name}` } });
    this.detail = el('div', { className: 'download-detail', attrs: { 'aria-live': 'polite' } });
    this.notes = el('div', { className: 'download-notes' });
    this.notes.hidden = true;
    this.buttons = el('div', { className: 'download-buttons' });
    this.element = el(
      'li',
      { className: 'download', data: { testid: 'download', id: String(request.id), name: request.name } },
      el('div', { className: 'download-name', text: request.name, attrs: { title: request.name } }),
      this.bar,
      el('div', { className: 'download-foot' }, this.detail, this.buttons),
      this.notes,
    );
  }

  /** Saves the file (or `blob` already read elsewhere). Call from the user's click. */
  start(blob?: Blob): void {
    if (blob) {
      this.done = blob.size;
      this.total = blob.size;
      this.blob = blob;
      saveFile(blob, this.request.name);
      this.setState('done');
      return;
    }
    this.startedAt = performance.now();
    this.startedFrom = this.resume?.at ?? 0;
    this.done = this.startedFrom;
    this.setState('running');
    const resume = this.request.source.kind === 'file' ? (this.resume ?? undefined) : undefined;
    const into = this.request.into;
    const retry = this.folder !== undefined;
    // A folder save writes into a new folder in the chosen directory; a retry into the same one.
    const folder = into === undefined ? Promise.resolve(undefined) : retry ? Promise.resolve(this.folder) : freeFolderName(into, this.request.name.replace(/\.zip$/i, ''));
    folder
      .then((name) => {
        if (into !== undefined && name !== undefined) {
          this.folder = name;
          this.element.dataset.folder = name;
        }
        return startSave(this.api, this.request.source, this.request.name, resume, into && name !== undefined ? { handle: into, folder: name, resume: retry } : undefined);
      })
      .then(
      (job) => {
        if (this.state !== 'running') {
          job.cancel();
          return;
        }
        this.job = job;
        this.route = job.route;
        this.element.dataset.route = job.route;
        job.onProgress = (sent) => this.onProgress(sent);
        job.ready.then(
          ({ size, zip }) => {
            this.total = size;
            if (zip) {
              this.zipFacts = zip;
              this.showZipFacts(zip);
            }
            this.render();
          },
          () => undefined,
        );
        job.done.then(
          (result) => {
            if (result.folder !== undefined) {
              if (this.zipFacts && (result.notesTotal ?? 0) > 0) {
                const z = this.zipFacts;
                this.showZipFacts({ ...z, notes: [...z.notes, ...(result.notes ?? [])], notesTotal: z.notesTotal + (result.notesTotal ?? 0) });
              }
            }
            this.done = this.total;
            this.element.dataset.bytes = String(this.total);
            this.setState('done');
          },
          (error: unknown) => this.failed(error),
        );
      },
      (error: unknown) => this.failed(error),
    );
  }

  private failed(error: unknown): void {
    if (this.state !== 'running') return;
    this.resume = this.job?.resumeState() ?? null;
    if (isAbort(error)) this.setState('cancelled');
    else this.setState('failed', errorText(error));
  }

  cancel(): void {
    if (this.state !== 'running') return;
    this.job?.cancel();
    this.setState('cancelled');
  }

  private showZipFacts(zip: ZipFacts): void {
    const parts = [`${formatCount(zip.files)} files`, `${formatCount(zip.folders)} folders`];
    this.element.dataset.files = String(zip.files);
    this.element.dataset.notes = String(zip.notesTotal);
    if (zip.notesTotal === 0) {
      this.notes.hidden = true;
      this.notes.textContent = parts.join(' · ');
      this.notes.hidden = false;
      return;
    }
    const summary = el('summary', { text: `${parts.join(' · ')} · ${formatCount(zip.notesTotal)} ${zip.notesTotal === 1 ? 'name' : 'names'} changed or left out` });
    const list = el('ul', { className: 'download-note-list' }, ...zip.notes.map((n) => el('li', { text: n })));
    if (zip.notesTotal > zip.notes.length) list.append(el('li', { text: `… and ${formatCount(zip.notesTotal - zip.notes.length)} more` }));
    this.notes.replaceChildren(el('details', {}, summary, list));
    this.notes.hidden = false;
  }

  private onProgress(sent: number): void {
    this.done = sent;
    if (this.frame !== 0) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      if (this.state === 'running') this.render();
    });
  }

  private setState(state: DownloadState, failure?: string): void {
    this.state = state;
    this.element.dataset.state = state;
    if (failure !== undefined) this.element.dataset.error = failure;
    this.render(failure);
    this.renderButtons();
    this.onStateChange();
  }

  /** Progress text and bar; runs on every progress frame. */
  private render(failure?: string): void {
    const { done, total } = this;
    this.bar.max = Math.max(1, total);
    this.bar.value = Math.min(done, Math.max(1, total));
    this.bar.hidden = this.state !== 'running';
    let text: string;
    switch (this.state) {
      case 'running': {
        const seconds = (performance.now() - this.startedAt) / 1000;
        const rate = (done - this.startedFrom) / Math.max(seconds, 1e-3);
        let extra = '';
        if (seconds > 0.5 && rate > 0) {
          extra = ` · ${formatRate(rate)}`;
          if (total > done) extra += ` · ${formatDuration((total - done) / rate)} left`;
        }
        text = total > 0 ? `${formatSize(done)} of ${formatSize(total)}${extra}` : 'Preparing…';
        // A plain-http link: the browser keeps the file until complete, then saves it.
        if (this.route === 'blob') text += ' · saved once complete';
        break;
      }
      case 'done':
        text =
          this.route === 'service-worker'
            ? `Saved by the browser · ${formatSize(total)}`
            : this.folder !== undefined
              ? `Saved into the folder “${this.folder}” · ${formatSize(total)}`
              : `Saved · ${formatSize(total)}`;
        break;
      case 'cancelled':
        text = 'Cancelled';
        break;
      case 'failed':
        text = failure ?? 'Failed';
        break;
    }
    this.detail.textContent = text;
    this.detail.title = text;
    this.detail.classList.toggle('is-error', this.state === 'failed');
  }

  /** The buttons; only on state changes, so a button is never swapped under the pointer. */
  private renderButtons(): void {
    const name = this.request.name;
    const controls: HTMLElement[] = [];
    if (this.state === 'running') {
      controls.push(button(`Cancel download of ${name}`, 'text-button download-cancel', () => this.cancel(), 'Cancel'));
    } else {
      if (this.state === 'done' && this.blob) {
        const blob = this.blob;
        controls.push(button(`Save ${name} again`, 'text-button download-save', () => saveFile(blob, name), 'Save again'));
      } else if (this.state !== 'done') {
        const label = (this.resume && this.resume.at > 0) || this.folder !== undefined ? 'Resume' : 'Retry';
        controls.push(button(`${label} downloading ${name}`, 'text-button download-retry', () => this.start(), label));
      }
      const remove = button(`Remove ${name} from the list`, 'icon-button download-remove', () => this.onRemove(this), '');
      remove.append(icon('close'));
      controls.push(remove);
    }
    this.buttons.replaceChildren(...controls);
  }
}

/** "1 h 5 min", "3 min", "12 s". */
function formatDuration(seconds: number): string {
  const s = Math.ceil(seconds);
  if (s < 60) return `${s} s`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export class DownloadsPanel {
  readonly element: HTMLElement;
  private readonly list: HTMLOListElement;
  private readonly heading: HTMLElement;
  private readonly items: Download[] = [];
  private collapsed = false;
  private readonly toggle: HTMLButtonElement;

  constructor(private readonly api: ShareApi) {
    this.heading = el('h2', { className: 'downloads-title', text: 'Downloads' });
    this.list = el('ol', { className: 'downloads-list' });
    this.toggle = button('Hide downloads', 'text-button', () => this.setCollapsed(!this.collapsed), 'Hide');
    const clear = button('Remove finished downloads from the list', 'text-button', () => this.clearFinished(), 'Clear');
    this.element = el(
      'section',
      { className: 'downloads', attrs: { 'aria-label': 'Downloads' }, data: { testid: 'downloads' } },
      el('header', { className: 'downloads-head' }, this.heading, el('div', { className: 'downloads-actions' }, clear, this.toggle)),
      this.list,
    );
    this.element.hidden = true;
  }

  /** Starts downloading `row`; pass `blob` when its bytes were already read. */
  start(row: EntryRow, blob?: Blob): void {
    this.save({ name: row.name, source: { kind: 'file', id: row.id }, size: row.size, id: row.id }, blob);
  }

  /** Saves a file or a ZIP (call from the user's click). */
  save(request: SaveRequest, blob?: Blob): void {
    const item = new Download(this.api, request, (it) => this.remove(it), () => this.update());
    this.items.unshift(item);
    this.list.prepend(item.element);
    this.setCollapsed(false);
    item.start(blob);
    this.trim();
    this.update();
  }

  private remove(item: Download): void {
    item.cancel();
    const at = this.items.indexOf(item);
    if (at >= 0) this.items.splice(at, 1);
    item.element.remove();
    this.update();
  }

  private clearFinished(): void {
    for (const item of [...this.items]) if (item.state !== 'running') this.remove(item);
  }

  private trim(): void {
    const finished = this.items.filter((item) => item.state !== 'running');
    for (const item of finished.slice(KEEP_FINISHED)) this.remove(item);
  }

  private setCollapsed(collapsed: boolean): void {
    this.collapsed = collapsed;
    this.element.classList.toggle('is-collapsed', collapsed);
    this.toggle.textContent = collapsed ? 'Show' : 'Hide';
    this.toggle.setAttribute('aria-label', collapsed ? 'Show downloads' : 'Hide downloads');
    this.toggle.setAttribute('aria-expanded', String(!collapsed));
  }

  private update(): void {
    const running = this.items.filter((item) => item.state === 'running').length;
    this.heading.textContent = running > 0 ? `Downloads · ${running} running` : 'Downloads';
    this.element.hidden = this.items.length === 0;
  }
}

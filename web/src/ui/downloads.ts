// The downloads panel: every file being fetched from the sharer, with a progress bar,
// its rate, and cancel / retry / save-again. Several run at once; the share schedules
// the actual reads. Finished items keep their Blob so "Save again" costs nothing, and
// are dropped (oldest first) beyond a small bound.

import type { EntryRow, ReadProgress, ShareApi } from '../api';
import { button, el } from './dom';
import { formatRate, formatSize } from './format';
import { icon } from './icons';
import { errorText, isAbort, saveFile } from './save-file';

export type DownloadState = 'running' | 'done' | 'failed' | 'cancelled';

/** Finished items kept in the panel. */
const KEEP_FINISHED = 20;

class Download {
  readonly element: HTMLElement;
  state: DownloadState = 'running';
  private readonly bar: HTMLProgressElement;
  private readonly detail: HTMLElement;
  private readonly buttons: HTMLElement;
  private controller = new AbortController();
  private blob: Blob | null = null;
  private progress: ReadProgress = { done: 0, total: 0 };
  private startedAt = performance.now();
  private frame = 0;

  constructor(
    private readonly api: ShareApi,
    readonly row: EntryRow,
    private readonly onRemove: (item: Download) => void,
    private readonly onStateChange: () => void,
  ) {
    this.bar = el('progress', { className: 'download-bar', attrs: { max: '1', 'aria-label': `Download of ${row.name}` } });
    this.detail = el('div', { className: 'download-detail' });
    this.buttons = el('div', { className: 'download-buttons' });
    this.element = el(
      'li',
      { className: 'download', data: { testid: 'download', id: String(row.id), name: row.name } },
      el('div', { className: 'download-name', text: row.name, attrs: { title: row.name } }),
      this.bar,
      el('div', { className: 'download-foot' }, this.detail, this.buttons),
    );
  }

  /** Reads the file (or uses `blob` already read elsewhere) and saves it. */
  start(blob?: Blob): void {
    if (blob) {
      this.progress = { done: blob.size, total: blob.size };
      this.finish(blob);
      return;
    }
    this.controller = new AbortController();
    this.startedAt = performance.now();
    this.progress = { done: 0, total: this.row.size };
    this.setState('running');
    const signal = this.controller.signal;
    this.api
      .read(this.row.id, { signal, onProgress: (p) => this.onProgress(p) })
      .then(
        (result) => {
          if (!signal.aborted) this.finish(result);
        },
        (error: unknown) => {
          if (signal.aborted || isAbort(error)) this.setState('cancelled');
          else this.setState('failed', errorText(error));
        },
      );
  }

  cancel(): void {
    if (this.state !== 'running') return;
    this.controller.abort();
    this.setState('cancelled');
  }

  private finish(blob: Blob): void {
    this.blob = blob;
    this.setState('done');
    saveFile(blob, this.row.name);
  }

  private onProgress(progress: ReadProgress): void {
    this.progress = progress;
    if (this.frame !== 0) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      if (this.state === 'running') this.render();
    });
  }

  private setState(state: DownloadState, failure?: string): void {
    this.state = state;
    this.element.dataset.state = state;
    this.render(failure);
    this.renderButtons();
    this.onStateChange();
  }

  /** Progress text and bar; runs on every progress frame. */
  private render(failure?: string): void {
    const { done, total } = this.progress;
    this.bar.max = Math.max(1, total);
    this.bar.value = Math.min(done, Math.max(1, total));
    this.bar.hidden = this.state !== 'running';
    let text: string;
    switch (this.state) {
      case 'running': {
        const seconds = (performance.now() - this.startedAt) / 1000;
        const rate = seconds > 0.25 && done > 0 ? ` · ${formatRate(done / seconds)}` : '';
        text = `${formatSize(done)} of ${formatSize(total)}${rate}`;
        break;
      }
      case 'done':
        text = `Saved · ${formatSize(total)}`;
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
    const controls: HTMLElement[] = [];
    if (this.state === 'running') {
      controls.push(button(`Cancel download of ${this.row.name}`, 'text-button download-cancel', () => this.cancel(), 'Cancel'));
    } else {
      if (this.state === 'done' && this.blob) {
        const blob = this.blob;
        controls.push(button(`Save ${this.row.name} again`, 'text-button download-save', () => saveFile(blob, this.row.name), 'Save again'));
      } else {
        controls.push(button(`Try downloading ${this.row.name} again`, 'text-button download-retry', () => this.start(), 'Retry'));
      }
      const remove = button(`Remove ${this.row.name} from the list`, 'icon-button download-remove', () => this.onRemove(this), '');
      remove.append(icon('close'));
      controls.push(remove);
    }
    this.buttons.replaceChildren(...controls);
  }
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
    const item = new Download(this.api, row, (it) => this.remove(it), () => this.update());
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

// The preview panel: images and text shown in the page, beside the listing. Images
// are shown through <img> from a typed blob URL (an SVG there cannot run scripts);
// text up to 1 MiB as plain text. Anything else offers a download. Reading shows
// progress and stops when the panel closes or another file opens.

import type { EntryRow, ReadProgress, ShareApi } from '../api';
import { button, el } from './dom';
import { decodeText, previewKindOf, TEXT_PREVIEW_LIMIT } from './file-types';
import { formatFullTime, formatSize, formatTime } from './format';
import { icon } from './icons';
import { errorText, isAbort } from './save-file';

export interface PreviewActions {
  /** Save the file; `blob` when its bytes are already here. */
  download(row: EntryRow, blob?: Blob): void;
  closed(): void;
}

export class PreviewPanel {
  readonly element: HTMLElement;
  private readonly title: HTMLElement;
  private readonly meta: HTMLElement;
  private readonly body: HTMLElement;
  private readonly downloadButton: HTMLButtonElement;
  private controller: AbortController | null = null;
  private objectUrl: string | null = null;
  private row: EntryRow | null = null;
  private blob: Blob | null = null;

  constructor(
    private readonly api: ShareApi,
    private readonly actions: PreviewActions,
  ) {
    this.title = el('h2', { className: 'preview-title' });
    this.meta = el('div', { className: 'preview-meta' });
    this.body = el('div', { className: 'preview-body' });
    this.downloadButton = button('Download this file', 'text-button preview-download', () => this.download(), 'Download');
    this.downloadButton.prepend(icon('download'));
    const close = button('Close the preview', 'icon-button preview-close', () => this.close(), '');
    close.append(icon('close'));
    this.element = el(
      'aside',
      { className: 'preview', attrs: { 'aria-label': 'Preview' }, data: { testid: 'preview' } },
      el('header', { className: 'preview-head' }, el('div', { className: 'preview-heading' }, this.title, this.meta), this.downloadButton, close),
      this.body,
    );
    this.element.hidden = true;
    document.addEventListener('keydown', (event) => {
      if (event.key === 'Escape' && !this.element.hidden) this.close();
    });
  }

  /** The entry shown, if any. */
  get shown(): EntryRow | null {
    return this.row;
  }

  open(row: EntryRow): void {
    this.reset();
    this.row = row;
    this.element.hidden = false;
    this.element.dataset.id = String(row.id);
    this.element.dataset.name = row.name;
    this.title.textContent = row.name;
    this.title.title = row.name;
    this.meta.textContent = `${formatSize(row.size)} · ${formatTime(row.mtime)}`;
    this.meta.title = formatFullTime(row.mtime);

    const kind = previewKindOf(row.name, row.size);
    if (kind.kind === 'none') {
      this.showMessage('There is no preview for this kind of file.', true);
      return;
    }
    if (kind.kind === 'text' && row.size > TEXT_PREVIEW_LIMIT) {
      this.showMessage(`This text file is ${formatSize(row.size)}; previews show text files up to ${formatSize(TEXT_PREVIEW_LIMIT)}.`, true);
      return;
    }
    void this.load(row, kind.kind === 'image' ? kind.mime : null);
  }

  close(): void {
    if (this.element.hidden) return;
    this.reset();
    this.element.hidden = true;
    this.actions.closed();
  }

  private async load(row: EntryRow, imageType: string | null): Promise<void> {
    const controller = new AbortController();
    this.controller = controller;
    this.element.dataset.state = 'loading';
    const bar = el('progress', { className: 'preview-bar', attrs: { max: '1', 'aria-label': `Reading ${row.name}` } });
    const label = el('span', { text: 'Reading…' });
    this.body.replaceChildren(el('div', { className: 'preview-loading' }, label, bar));
    const onProgress = ({ done, total }: ReadProgress): void => {
      bar.max = Math.max(1, total);
      bar.value = done;
      label.textContent = `Reading… ${formatSize(done)} of ${formatSize(total)}`;
    };
    let blob: Blob;
    try {
      blob = await this.api.read(row.id, { signal: controller.signal, onProgress });
    } catch (error) {
      if (controller.signal.aborted || isAbort(error)) return;
      this.element.dataset.state = 'failed';
      this.showMessage(`Could not read this file: ${errorText(error)}`, false, true);
      return;
    }
    if (controller.signal.aborted) return;
    this.blob = blob;
    if (imageType !== null) {
      this.showImage(new Blob([blob], { type: imageType }));
      return;
    }
    const text = blob.size <= TEXT_PREVIEW_LIMIT ? decodeText(new Uint8Array(await blob.arrayBuffer())) : null;
    if (controller.signal.aborted) return;
    if (text === null) {
      this.showMessage('This file is not text, and there is no preview for it.', true);
      return;
    }
    this.element.dataset.state = 'shown';
    this.element.dataset.kind = 'text';
    this.body.replaceChildren(el('pre', { className: 'preview-text', text, attrs: { tabindex: '0' } }));
  }

  private showImage(blob: Blob): void {
    this.objectUrl = URL.createObjectURL(blob);
    const row = this.row;
    const image = el('img', { className: 'preview-image', attrs: { alt: row?.name ?? '', src: this.objectUrl } });
    image.addEventListener('load', () => {
      this.element.dataset.state = 'shown';
      if (row) this.meta.textContent = `${image.naturalWidth} × ${image.naturalHeight} · ${formatSize(row.size)} · ${formatTime(row.mtime)}`;
    });
    image.addEventListener('error', () => {
      this.element.dataset.state = 'failed';
      this.showMessage('This image could not be shown: it may be damaged, or in a format this browser does not support.', true, true);
    });
    this.element.dataset.kind = 'image';
    this.body.replaceChildren(el('div', { className: 'preview-image-frame' }, image));
  }

  private showMessage(text: string, offerDownload: boolean, isError = false): void {
    if (!isError) this.element.dataset.state = 'no-preview';
    const message = el('div', { className: `preview-message${isError ? ' is-error' : ''}` }, el('p', { text }));
    if (offerDownload) {
      message.append(button('Download this file', 'primary-button', () => this.download(), 'Download'));
    }
    this.body.replaceChildren(message);
  }

  private download(): void {
    if (!this.row) return;
    if (this.blob) this.actions.download(this.row, this.blob);
    else this.actions.download(this.row);
  }

  private reset(): void {
    this.controller?.abort();
    this.controller = null;
    if (this.objectUrl !== null) URL.revokeObjectURL(this.objectUrl);
    this.objectUrl = null;
    this.blob = null;
    this.row = null;
    this.body.replaceChildren();
    delete this.element.dataset.state;
    delete this.element.dataset.kind;
  }
}

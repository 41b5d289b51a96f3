// The preview panel: images and text shown in the page, beside the listing. Images
// are shown through <img> from a typed blob URL (an SVG there cannot run scripts);
// text up to 1 MiB as plain text. Audio and video play as they stream, with
// seeking: the service worker answers the media element's Range requests from
// on-demand reads (./save.ts's serving path), so nothing is downloaded first. A PDF
// opens in the browser's own viewer from the same kind of URL. Anything else offers
// a download. Reading shows progress and stops when the panel closes or another
// file opens.

import type { EntryRow, ReadProgress, ShareApi, Transfer } from '../api';
import { button, el } from './dom';
import { decodeText, previewKindOf, TEXT_PREVIEW_LIMIT } from './file-types';
import { formatFullTime, formatSize, formatTime } from './format';
import { icon } from './icons';
import { errorText, isAbort } from './save-file';
import { MEDIA_WINDOW } from '../serve/protocol';
import { controlsPage, newToken, registerServed, servedUrl, unregisterServed } from './service-worker';

/** A file served to the page's media element or the PDF viewer while the preview shows it. */
interface Served {
  token: string;
  transfer: Transfer;
}

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
  private served: Served | null = null;

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
    if (kind.kind === 'media' || kind.kind === 'pdf') {
      void this.stream(row, kind.kind === 'media' ? kind : { mime: 'application/pdf', element: null });
      return;
    }
    void this.load(row, kind.kind === 'image' ? kind.mime : null);
  }

  /** Serves the file through the service worker and shows it: a player, or a link to the PDF viewer. */
  private async stream(row: EntryRow, how: { mime: string; element: 'video' | 'audio' | null }): Promise<void> {
    if (!controlsPage()) {
      this.showMessage('Playing and viewing files here needs this page to be opened over https or on localhost (its service worker streams them). You can download the file.', true);
      return;
    }
    const token = newToken();
    const channel = new MessageChannel();
    const transfer = this.api.transfer({ kind: 'file', id: row.id }, { kind: 'port', port: channel.port1, once: false });
    const served: Served = { token, transfer };
    this.served = served;
    // Bytes read from the sharer for the player so far, read-ahead included (tests and the curious).
    transfer.onProgress = (_sent, read) => {
      if (this.served === served) this.element.dataset.servedBytes = String(read);
    };
    this.element.dataset.state = 'loading';
    try {
      const ready = await transfer.ready;
      if (this.served !== served) return;
      await registerServed(token, { size: ready.size, name: ready.name, mime: how.mime, disposition: 'inline', ranges: true, window: MEDIA_WINDOW }, channel.port2);
    } catch (error) {
      if (this.served !== served) return;
      this.element.dataset.state = 'failed';
      this.showMessage(`Could not open this file: ${errorText(error)}`, true, true);
      return;
    }
    if (this.served !== served) {
      unregisterServed(token);
      return;
    }
    const url = servedUrl(token, row.name);
    if (how.element === null) {
      this.element.dataset.state = 'shown';
      this.element.dataset.kind = 'pdf';
      const open = el('a', { className: 'primary-button', text: 'Open the PDF', attrs: { href: url, target: '_blank', rel: 'noopener' }, data: { testid: 'open-pdf' } });
      this.body.replaceChildren(el('div', { className: 'preview-message' }, el('p', { text: 'The PDF opens in the browser’s viewer, read from the sharer as you page through it.' }), open));
      return;
    }
    const player = el(how.element, { className: `preview-${how.element}`, attrs: { controls: '', preload: 'metadata', src: url }, data: { testid: 'player' } });
    player.addEventListener('loadedmetadata', () => {
      this.element.dataset.state = 'shown';
      if (player instanceof HTMLVideoElement && player.videoWidth > 0) {
        this.meta.textContent = `${player.videoWidth} × ${player.videoHeight} · ${formatDuration(player.duration)} · ${formatSize(row.size)} · ${formatTime(row.mtime)}`;
      } else {
        this.meta.textContent = `${formatDuration(player.duration)} · ${formatSize(row.size)} · ${formatTime(row.mtime)}`;
      }
    });
    player.addEventListener('error', () => {
      if (this.served !== served) return;
      this.element.dataset.state = 'failed';
      this.showMessage('This browser cannot play this file (its format or codec is not supported here). You can download it.', true, true);
    });
    this.element.dataset.kind = how.element;
    this.body.replaceChildren(el('div', { className: 'preview-media-frame' }, player));
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
    if (this.served) {
      const { token, transfer } = this.served;
      this.served = null;
      // Stop the player's requests first, then what serves them.
      for (const media of this.body.querySelectorAll('video, audio')) {
        (media as HTMLMediaElement).removeAttribute('src');
        (media as HTMLMediaElement).load();
      }
      unregisterServed(token);
      transfer.stop('The preview was closed.');
    }
    this.controller?.abort();
    this.controller = null;
    if (this.objectUrl !== null) URL.revokeObjectURL(this.objectUrl);
    this.objectUrl = null;
    this.blob = null;
    this.row = null;
    this.body.replaceChildren();
    delete this.element.dataset.state;
    delete this.element.dataset.kind;
    delete this.element.dataset.servedBytes;
  }
}

/** "1:02:03", "4:05". */
function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return 'live';
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${sec}` : `${m}:${sec}`;
}

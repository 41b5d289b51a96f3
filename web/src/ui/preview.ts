// The preview panel: images and text shown in the page, beside the listing. Images
// are shown through <img> from a typed blob URL (an SVG there cannot run scripts);
// text up to 1 MiB as plain text. Audio and video play as they stream, with
// seeking: the service worker answers the media element's Range requests from
// on-demand reads (./save.ts's serving path), so nothing is downloaded first. A PDF
// opens in the browser's own viewer from the same kind of URL. A page without a
// service worker (a plain-http link) reads the file whole first and plays it from a
// Blob, saying why. Anything else offers a download. Reading shows progress and stops when the panel closes or another
// file opens.

import type { EntryId, EntryRow, ReadProgress, ShareApi, Transfer } from '../api';
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
  /** The file before or after `row` in the folder as listed (folders stepped over), if any. */
  neighbour(row: EntryRow, delta: 1 | -1): Promise<{ row: EntryRow; index: number } | null>;
  /** The gallery moved to the file at `index` of the listing. */
  moved(row: EntryRow, index: number): void;
}

/** How a video, a sound or a PDF is shown: its type, and the element that plays it (null: a PDF). */
interface MediaHow {
  mime: string;
  element: 'video' | 'audio' | null;
}

/**
 * Without a service worker (plain http) a player needs the whole file first: up to
 * this size it is read as soon as the preview opens, above it on the user's word.
 */
const HOLD_AT_ONCE = 256 * 1024 * 1024;

/** What a plain-http page says it lacks, everywhere it says so. */
const FULL_PAGE_HINT = 'Opened over https, the page plays and saves files as they stream.';

/** Images read ahead for the gallery's next and previous, at most this big each. */
const PRELOAD_LIMIT = 24 * 1024 * 1024;
/** A finger moved this far sideways (and more sideways than down) is a swipe, px. */
const SWIPE_PX = 50;

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
  /** A media file being read whole (no service worker), until shown. */
  private holding: Transfer | null = null;
  private readonly previousButton: HTMLButtonElement;
  private readonly nextButton: HTMLButtonElement;
  /** Neighbours' images read ahead, by entry (with the size and time they were read at). */
  private readonly preloaded = new Map<EntryId, { key: string; blob: Blob }>();
  private preloading: AbortController | null = null;
  private swipeStart: { x: number; y: number; id: number } | null = null;
  /** Which open is current (a step's lookups answer late). */
  private opened = 0;

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
    this.previousButton = button('Previous file', 'icon-button preview-step preview-previous', () => void this.step(-1), '');
    this.previousButton.append(icon('previous'));
    this.previousButton.dataset.testid = 'preview-previous';
    this.nextButton = button('Next file', 'icon-button preview-step preview-next', () => void this.step(1), '');
    this.nextButton.append(icon('next'));
    this.nextButton.dataset.testid = 'preview-next';
    this.element = el(
      'aside',
      { className: 'preview', attrs: { 'aria-label': 'Preview' }, data: { testid: 'preview' } },
      el('header', { className: 'preview-head' }, el('div', { className: 'preview-heading' }, this.title, this.meta), this.previousButton, this.nextButton, this.downloadButton, close),
      this.body,
    );
    this.element.hidden = true;
    document.addEventListener('keydown', (event) => {
      if (this.element.hidden) return;
      if (event.key === 'Escape') this.close();
      // Arrows step through the folder, except where they mean something else (a player, text, a field).
      const target = event.target;
      const owned = target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || target instanceof HTMLMediaElement || (target instanceof HTMLElement && target.isContentEditable);
      const inListing = target instanceof Element && target.closest('.listing') !== null;
      if (owned || inListing || event.altKey || event.ctrlKey || event.metaKey) return;
      if (event.key === 'ArrowRight' || event.key === 'ArrowLeft') {
        event.preventDefault();
        void this.step(event.key === 'ArrowRight' ? 1 : -1);
      }
    });
    // Swipes on the picture (touch or pen) step to the next and previous file.
    this.body.addEventListener('pointerdown', (event) => {
      if (event.pointerType === 'mouse') return;
      this.swipeStart = { x: event.clientX, y: event.clientY, id: event.pointerId };
    });
    this.body.addEventListener('pointerup', (event) => {
      const start = this.swipeStart;
      this.swipeStart = null;
      if (!start || start.id !== event.pointerId) return;
      const dx = event.clientX - start.x;
      const dy = event.clientY - start.y;
      if (Math.abs(dx) >= SWIPE_PX && Math.abs(dx) > 1.5 * Math.abs(dy)) void this.step(dx < 0 ? 1 : -1);
    });
    this.body.addEventListener('pointercancel', () => (this.swipeStart = null));
  }

  /** Shows the next (1) or previous (-1) file of the folder. */
  async step(delta: 1 | -1): Promise<void> {
    const row = this.row;
    if (!row) return;
    const opened = this.opened;
    const next = await this.actions.neighbour(row, delta);
    if (!next || this.opened !== opened) return;
    this.open(next.row);
    this.actions.moved(next.row, next.index);
  }

  /** Finds the neighbours (the steps offered), and reads their images ahead (the next step shows at once). */
  private async preloadNeighbours(row: EntryRow): Promise<void> {
    this.preloading?.abort();
    const controller = new AbortController();
    this.preloading = controller;
    const opened = this.opened;
    const keep = new Set<EntryId>([row.id]);
    const wanted: EntryRow[] = [];
    for (const delta of [1, -1] as const) {
      const next = await this.actions.neighbour(row, delta);
      if (this.opened !== opened) return;
      (delta === 1 ? this.nextButton : this.previousButton).hidden = next === null;
      if (next) {
        keep.add(next.row.id);
        wanted.push(next.row);
      }
    }
    for (const id of [...this.preloaded.keys()]) if (!keep.has(id)) this.preloaded.delete(id);
    for (const next of wanted) {
      const kind = previewKindOf(next.name, next.size);
      if (kind.kind !== 'image' || next.size > PRELOAD_LIMIT || this.preloaded.get(next.id)?.key === keyOf(next)) continue;
      try {
        const blob = await this.api.read(next.id, { signal: controller.signal });
        if (controller.signal.aborted) return;
        this.preloaded.set(next.id, { key: keyOf(next), blob });
      } catch {
        if (controller.signal.aborted) return;
      }
    }
  }

  /** The entry shown, if any. */
  get shown(): EntryRow | null {
    return this.row;
  }

  open(row: EntryRow): void {
    this.reset();
    this.opened += 1;
    this.row = row;
    void this.preloadNeighbours(row);
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

  /**
   * Shows a video, a sound or a PDF: served through the service worker as the player
   * asks for it (ranges, seeking); without one (a plain-http link) read whole first
   * into a Blob the browser keeps on its disk, then played from there.
   */
  private async stream(row: EntryRow, how: MediaHow): Promise<void> {
    if (!controlsPage()) {
      if (row.size <= HOLD_AT_ONCE) void this.hold(row, how);
      else this.offerHold(row, how);
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
    this.present(row, how, servedUrl(token, row.name), 'The PDF opens in the browser’s viewer, read from the sharer as you page through it.');
  }

  /** A big file on a plain-http link: say why the player must wait for it, and let the user choose. */
  private offerHold(row: EntryRow, how: MediaHow): void {
    this.element.dataset.state = 'no-preview';
    const what = how.element === null ? 'view this PDF' : `play this ${how.element === 'video' ? 'video' : 'sound'}`;
    const load = button(`Load ${row.name} (${formatSize(row.size)}) to ${what}`, 'primary-button', () => void this.hold(row, how), `Load ${formatSize(row.size)} and ${how.element === null ? 'view' : 'play'}`);
    load.dataset.testid = 'hold-media';
    this.body.replaceChildren(
      el(
        'div',
        { className: 'preview-message' },
        el('p', { text: `To ${what}, this page must read all of it first (${formatSize(row.size)}): it was opened over plain http, where browsers do not let a page stream files to its player. ${FULL_PAGE_HINT}` }),
        load,
        button('Download this file', 'text-button', () => this.download(), 'Download'),
      ),
    );
  }

  /** Reads the whole file into a Blob the browser keeps on its disk, with progress, then shows it. */
  private async hold(row: EntryRow, how: MediaHow): Promise<void> {
    const opened = this.opened;
    const transfer = this.api.transfer({ kind: 'file', id: row.id }, { kind: 'blob' });
    this.holding = transfer;
    this.element.dataset.state = 'loading';
    const bar = el('progress', { className: 'preview-bar', attrs: { max: String(Math.max(1, row.size)), 'aria-label': `Reading ${row.name}` } });
    const label = el('span', { text: 'Reading…' });
    this.body.replaceChildren(
      el('div', { className: 'preview-loading' }, label, bar, el('p', { className: 'preview-note', text: `This plain-http page reads the whole file before it can ${how.element === null ? 'show it' : 'play it'}. ${FULL_PAGE_HINT}` })),
    );
    transfer.onProgress = (sent, read) => {
      if (this.opened !== opened) return;
      this.element.dataset.servedBytes = String(read);
      bar.value = sent;
      label.textContent = `Reading… ${formatSize(sent)} of ${formatSize(row.size)}`;
    };
    let blob: Blob | undefined;
    try {
      blob = (await transfer.done).blob;
      if (!blob) throw new Error('the file did not arrive');
    } catch (error) {
      if (this.opened !== opened || isAbort(error)) return;
      this.element.dataset.state = 'failed';
      this.showMessage(`Could not read this file: ${errorText(error)}`, true, true);
      return;
    }
    if (this.opened !== opened) return;
    this.holding = null;
    this.blob = blob;
    this.objectUrl = URL.createObjectURL(new Blob([blob], { type: how.mime }));
    this.present(row, how, this.objectUrl, 'The PDF opens in the browser’s viewer.');
  }

  /** The player for `url`, or a link that opens the PDF at `url` in the browser's viewer. */
  private present(row: EntryRow, how: MediaHow, url: string, pdfNote: string): void {
    const opened = this.opened;
    if (how.element === null) {
      this.element.dataset.state = 'shown';
      this.element.dataset.kind = 'pdf';
      const open = el('a', { className: 'primary-button', text: 'Open the PDF', attrs: { href: url, target: '_blank', rel: 'noopener' }, data: { testid: 'open-pdf' } });
      this.body.replaceChildren(el('div', { className: 'preview-message' }, el('p', { text: pdfNote }), open));
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
      if (this.opened !== opened) return;
      this.element.dataset.state = 'failed';
      this.showMessage('This browser cannot play this file (its format or codec is not supported here). You can download it.', true, true);
    });
    this.element.dataset.kind = how.element;
    this.body.replaceChildren(el('div', { className: 'preview-media-frame' }, player));
  }

  close(): void {
    if (this.element.hidden) return;
    this.reset();
    this.preloading?.abort();
    this.preloading = null;
    this.preloaded.clear();
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
    const ready = this.preloaded.get(row.id);
    try {
      blob = ready?.key === keyOf(row) ? ready.blob : await this.api.read(row.id, { signal: controller.signal, onProgress });
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
    this.holding?.stop('The preview was closed.');
    this.holding = null;
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

/** What a read-ahead image was read as (a changed file is read again). */
function keyOf(row: EntryRow): string {
  return `${row.size}|${row.mtime}`;
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

// Adding files to the share, when the link takes them: an "Add files" button (files
// or a whole folder, picked), the whole page as a drop zone (files and folders,
// dragged in), and a panel with each file's progress, speed and outcome (the name
// it landed under, how its name was made safe, or why it was refused). Files go to
// the folder shown, keeping a dropped folder's structure. Bytes are read from disk
// as they go (never a whole file in memory).
//
// A reload loses the browser's hold on the files; what was not finished is kept in
// localStorage under a hash of the link's key (names, sizes, times, where they were
// going) and offered on the next
// visit: the same file added again (same name, size and time) goes where it was going
// and on from where it stopped (the sharer keeps each file's bytes under its path,
// size and hash).

import type { LinkRights, ShareApi, UploadState } from '../api';
import { button, el } from './dom';
import { formatRate, formatSize } from './format';
import { icon } from './icons';
import { keyTag } from './password-prompt';

/** Finished items kept in the panel. */
const KEEP_FINISHED = 50;
/** Files a folder drop may hold (a bound on what one drop walks). */
const MAX_DROPPED_FILES = 100_000;

/** A file and where it goes, relative to the folder shown. */
export interface Picked {
  file: File;
  /** '/'-separated: the file's name, or its path in a dropped or picked folder. */
  rel: string;
}

/** An upload that had not finished when the page went away. */
interface Unfinished {
  path: string;
  size: number;
  lastModified: number;
}

class Upload {
  readonly element: HTMLElement;
  finished = false;
  /** It failed because the visit ended: the sharer keeps what it has of it. */
  resumable = false;
  private readonly bar: HTMLProgressElement;
  private readonly detail: HTMLElement;
  private readonly notes: HTMLElement;
  private readonly cancelButton: HTMLButtonElement;
  private cancel: (() => void) | null = null;
  private startedAt = 0;
  private startedFrom = 0;

  constructor(
    readonly path: string,
    private readonly file: File,
    private readonly onFinished: (item: Upload, ok: boolean) => void,
  ) {
    this.bar = el('progress', { className: 'download-bar', attrs: { max: '1', 'aria-label': `Adding ${path}` } });
    this.detail = el('div', { className: 'download-detail', attrs: { 'aria-live': 'polite' }, text: 'Waiting…' });
    this.notes = el('div', { className: 'download-notes' });
    this.notes.hidden = true;
    this.cancelButton = button(`Cancel adding ${path}`, 'icon-button', () => this.cancel?.(), '');
    this.cancelButton.append(icon('close'));
    this.element = el(
      'li',
      { className: 'download upload', data: { testid: 'upload', path, state: 'running' } },
      el('div', { className: 'download-name', text: path, attrs: { title: path } }),
      this.bar,
      el('div', { className: 'download-foot' }, this.detail, el('div', { className: 'download-buttons' }, this.cancelButton)),
      this.notes,
    );
  }

  start(api: ShareApi, target: string): void {
    this.cancel = api.upload(this.file, target, (s) => this.show(s));
  }

  private show(s: UploadState): void {
    const total = Math.max(1, s.total);
    switch (s.phase) {
      case 'hashing':
        this.bar.removeAttribute('value');
        this.detail.textContent = `Reading ${Math.floor((100 * s.done) / total)}%…`;
        return;
      case 'waiting':
        this.detail.textContent = 'Waiting for the sharer…';
        return;
      case 'sending': {
        if (s.resumedFrom !== undefined) {
          this.startedAt = performance.now();
          this.startedFrom = s.resumedFrom;
          if (s.resumedFrom > 0) this.note(`Went on from ${formatSize(s.resumedFrom)} sent before.`);
          for (const change of (s.changes ?? '').split('\n').filter((c) => c !== '')) this.note(`Name made safe: ${change}`);
        }
        this.bar.value = s.done / total;
        const seconds = (performance.now() - this.startedAt) / 1000;
        const rate = seconds > 0.3 ? (s.done - this.startedFrom) / seconds : 0;
        this.detail.textContent = `${formatSize(s.done)} of ${formatSize(s.total)}${rate > 0 ? ` · ${formatRate(rate)}` : ''}`;
        return;
      }
      case 'done':
        this.bar.value = 1;
        this.detail.textContent = s.renamed ? `Added as ${s.path ?? ''} (that name was taken)` : `Added (${formatSize(s.total)})`;
        this.finish('done', true);
        return;
      case 'failed':
        this.detail.textContent = `Not added: ${s.message ?? 'it failed'}`;
        this.detail.classList.add('is-error');
        if (s.resumable === true) {
          this.resumable = true;
          this.note('What was sent is kept by the sharer: add the same file again when the share is back, and it goes on from there.');
        }
        this.finish('failed', false);
        return;
    }
  }

  private note(text: string): void {
    this.notes.hidden = false;
    this.notes.append(el('div', { text }));
  }

  private finish(state: 'done' | 'failed', ok: boolean): void {
    if (this.finished) return;
    this.finished = true;
    this.element.dataset['state'] = state;
    this.cancelButton.hidden = true;
    this.onFinished(this, ok);
  }
}

/** Every file in a dropped folder entry, with its path below the drop. */
async function walkEntry(entry: FileSystemEntry, prefix: string, out: Picked[]): Promise<void> {
  if (out.length >= MAX_DROPPED_FILES) return;
  if (entry.isFile) {
    const file = await new Promise<File>((resolve, reject) => (entry as FileSystemFileEntry).file(resolve, reject));
    out.push({ file, rel: `${prefix}${entry.name}` });
    return;
  }
  if (!entry.isDirectory) return;
  const reader = (entry as FileSystemDirectoryEntry).createReader();
  for (;;) {
    const batch = await new Promise<FileSystemEntry[]>((resolve, reject) => reader.readEntries(resolve, reject));
    if (batch.length === 0) return;
    for (const child of batch) await walkEntry(child, `${prefix}${entry.name}/`, out);
  }
}

/** The files of a drop: files as themselves, folders with everything in them. */
export async function droppedFiles(data: DataTransfer): Promise<Picked[]> {
  const entries = [...data.items]
    .filter((item) => item.kind === 'file')
    .map((item) => item.webkitGetAsEntry?.() ?? null);
  if (entries.length > 0 && entries.every((e) => e !== null)) {
    const out: Picked[] = [];
    for (const entry of entries) await walkEntry(entry!, '', out);
    return out;
  }
  return [...data.files].map((file) => ({ file, rel: file.name }));
}

export class UploadsPanel {
  /** The toolbar's "Add files" control (hidden until the link takes files). */
  readonly control: HTMLElement;
  /** The panel listing what is being added. */
  readonly element: HTMLElement;
  private readonly list: HTMLElement;
  private readonly title: HTMLElement;
  private readonly resumeNote: HTMLElement;
  private readonly items: Upload[] = [];
  /** Where unfinished uploads are kept: a SHA-256 of the link's key, never the key. */
  private storeKey: string | null = null;
  private rights: LinkRights | null = null;

  constructor(
    private readonly api: ShareApi,
    key: string,
    /** The folder shown, '/'-separated from the link's folder ('' at its top). */
    private readonly folder: () => string,
  ) {
    this.storeKey = `linkfs-uploads:${keyTag(key)}`;
    const filesInput = el('input', { attrs: { type: 'file', multiple: '' }, data: { testid: 'upload-files-input' } });
    const folderInput = el('input', { attrs: { type: 'file', webkitdirectory: '' }, data: { testid: 'upload-folder-input' } });
    filesInput.hidden = true;
    folderInput.hidden = true;
    filesInput.addEventListener('change', () => {
      this.add([...(filesInput.files ?? [])].map((file) => ({ file, rel: file.name })));
      filesInput.value = '';
    });
    folderInput.addEventListener('change', () => {
      this.add([...(folderInput.files ?? [])].map((file) => ({ file, rel: file.webkitRelativePath || file.name })));
      folderInput.value = '';
    });
    const addFiles = el('button', { className: 'text-button add-files', text: 'Add files', attrs: { type: 'button', 'aria-label': 'Add files to this folder of the share' }, data: { testid: 'add-files' } });
    addFiles.prepend(icon('up'));
    addFiles.addEventListener('click', () => filesInput.click());
    const addFolder = el('button', { className: 'text-button add-folder', text: 'Add a folder', attrs: { type: 'button', 'aria-label': 'Add a folder, with everything in it, to this folder of the share' }, data: { testid: 'add-folder' } });
    addFolder.prepend(icon('folder'));
    addFolder.addEventListener('click', () => folderInput.click());
    this.control = el('div', { className: 'add-controls' }, addFiles, addFolder, filesInput, folderInput);
    this.control.hidden = true;

    this.title = el('h2', { className: 'downloads-title', text: 'Adding files' });
    this.list = el('ul', { className: 'downloads-list' });
    this.resumeNote = el('div', { className: 'upload-resume', data: { testid: 'upload-resume' } });
    this.resumeNote.hidden = true;
    this.element = el(
      'section',
      { className: 'downloads uploads', attrs: { 'aria-label': 'Files being added' }, data: { testid: 'uploads' } },
      el('div', { className: 'downloads-head' }, this.title, el('div', { className: 'downloads-actions' }, button('Clear finished', 'text-button', () => this.clearFinished(), 'Clear'))),
      this.resumeNote,
      this.list,
    );
    this.element.hidden = true;

    // The whole page takes drops while the link takes files.
    document.addEventListener('dragover', (event) => {
      if (!this.rights?.upload || !event.dataTransfer?.types.includes('Files')) return;
      event.preventDefault();
      event.dataTransfer.dropEffect = 'copy';
      document.body.classList.add('is-dropping');
    });
    document.addEventListener('dragleave', (event) => {
      if (event.relatedTarget === null) document.body.classList.remove('is-dropping');
    });
    document.addEventListener('drop', (event) => {
      document.body.classList.remove('is-dropping');
      if (!this.rights?.upload || !event.dataTransfer) return;
      event.preventDefault();
      void droppedFiles(event.dataTransfer).then(
        (files) => this.add(files),
        (error: unknown) => this.dropFailed(error),
      );
    });
    const known = api.rights();
    if (known) this.setRights(known);
    api.subscribe((event) => {
      if (event.type === 'rights') this.setRights(event.rights);
    });
  }

  private setRights(rights: LinkRights): void {
    this.rights = rights;
    this.control.hidden = !rights.upload;
    if (rights.upload) this.offerResume();
  }

  /** Adds `files` to the folder shown now. */
  add(files: Picked[]): void {
    if (!this.rights?.upload || files.length === 0) return;
    const base = this.folder();
    this.element.hidden = false;
    const unfinished = this.unfinished();
    for (const { file, rel } of files) {
      // A file that was being added when the page closed goes where it was going
      // (and on from where it stopped), wherever it is added from now.
      const before = unfinished.find(
        (u) => u.size === file.size && u.lastModified === file.lastModified && (u.path === rel || u.path.endsWith(`/${rel}`)) && !this.items.some((i) => !i.finished && i.path === u.path),
      );
      const path = before?.path ?? (base === '' ? rel : `${base}/${rel}`);
      const item = new Upload(path, file, (done, ok) => this.finished(done, ok));
      this.items.push(item);
      this.list.append(item.element);
      if (!before) unfinished.push({ path, size: file.size, lastModified: file.lastModified });
      item.start(this.api, path);
    }
    this.keep(unfinished);
    this.updateTitle();
  }

  /** What was dropped could not be read (a folder that went away, no permission): say so. */
  private dropFailed(error: unknown): void {
    const why = error instanceof Error ? error.message : String(error);
    const note = el('div', {
      className: 'upload-resume is-error',
      text: `Could not read what was dropped (${why}). Try again, or use Add files or Add a folder.`,
      attrs: { role: 'alert' },
      data: { testid: 'drop-failed' },
    });
    this.list.prepend(note);
    this.element.hidden = false;
  }

  private finished(item: Upload, _ok: boolean): void {
    // Ended with the visit: kept, so the next visit offers to go on.
    if (!item.resumable) this.keep(this.unfinished().filter((u) => u.path !== item.path));
    // An unfinished file added again: the note has done its job.
    if (this.unfinished().length === 0) this.resumeNote.hidden = true;
    this.updateTitle();
    const done = this.items.filter((i) => i.finished);
    for (const old of done.slice(0, Math.max(0, done.length - KEEP_FINISHED))) this.remove(old);
  }

  private remove(item: Upload): void {
    const at = this.items.indexOf(item);
    if (at >= 0) this.items.splice(at, 1);
    item.element.remove();
  }

  private clearFinished(): void {
    for (const item of this.items.filter((i) => i.finished)) this.remove(item);
    if (this.items.length === 0 && this.resumeNote.hidden) this.element.hidden = true;
    this.updateTitle();
  }

  private updateTitle(): void {
    const running = this.items.filter((i) => !i.finished).length;
    this.title.textContent = running > 0 ? `Adding ${running} file${running === 1 ? '' : 's'}` : 'Files added';
  }

  private unfinished(): Unfinished[] {
    if (this.storeKey === null) return [];
    try {
      const kept: unknown = JSON.parse(localStorage.getItem(this.storeKey) ?? '[]');
      return Array.isArray(kept) ? (kept as Unfinished[]) : [];
    } catch {
      return [];
    }
  }

  private keep(list: Unfinished[]): void {
    if (this.storeKey === null) return;
    try {
      if (list.length === 0) localStorage.removeItem(this.storeKey);
      else localStorage.setItem(this.storeKey, JSON.stringify(list.slice(-1000)));
    } catch {
      // Storage full or off: a reload then offers nothing to go on with.
    }
  }

  /** Files that were being added when the page last closed: say so, once. */
  private offerResume(): void {
    const running = new Set(this.items.map((i) => i.path));
    const left = this.unfinished().filter((u) => !running.has(u.path));
    if (left.length === 0) return;
    const total = left.reduce((n, u) => n + u.size, 0);
    const names = left.slice(0, 5).map((u) => u.path).join(', ');
    this.resumeNote.replaceChildren(
      el('p', {
        text: `${left.length} file${left.length === 1 ? ' was' : 's were'} being added when this page closed (${formatSize(total)}: ${names}${left.length > 5 ? ', …' : ''}). Add the same files again (from anywhere in this page) and they go on where they stopped.`,
      }),
      button('Forget them', 'text-button', () => {
        this.keep([]);
        this.resumeNote.hidden = true;
        if (this.items.length === 0) this.element.hidden = true;
      }, 'Forget'),
    );
    this.resumeNote.hidden = false;
    this.element.hidden = false;
  }
}

// How a file or a ZIP gets from the share to the user's disk, with memory bounded
// by a window whatever the size. In order of preference:
//
// 1. The service worker (every current browser on https or localhost): the browser's
//    own download manager writes the file as our stream delivers it, no dialog, one
//    click. A dropped connection pauses the stream; the session resumes the read at
//    its byte and the download goes on.
// 2. File System Access (Chromium without a usable service worker): the user picks
//    the file, the worker writes it at explicit positions; a retry continues at the
//    byte reached.
// 3. A Blob the browser keeps on its disk (a plain-http link, where neither of the
//    above exists): the page's memory stays bounded, the file reaches the download
//    manager once complete, and the disk holds it twice meanwhile.
//
// A folder or a selection goes as one ZIP through the same routes, or, when the
// user chose "Save into a folder…" (File System Access), file by file into a new
// folder inside the directory they picked (route `directory`).
//
// `route()` says which one applies here; `startSave` runs one save.

import type { ShareApi, Transfer, TransferDone, TransferSource, ZipFacts } from '../api';
import { registerServed, serviceWorker, servedUrl, startBrowserDownload, newToken, unregisterServed } from './service-worker';
import { saveFile } from './save-file';
import { SERVE_WINDOW } from '../serve/protocol';

export type SaveRoute = 'service-worker' | 'file-picker' | 'blob' | 'directory';

interface SavePickerWindow {
  showSaveFilePicker?: (options?: { suggestedName?: string }) => Promise<FileSystemFileHandle>;
  showDirectoryPicker?: (options?: { id?: string; mode?: 'read' | 'readwrite' }) => Promise<FileSystemDirectoryHandle>;
}

/** Can this browser save a folder into a directory the user picks (File System Access)? */
export function canSaveIntoFolder(): boolean {
  return typeof (window as SavePickerWindow).showDirectoryPicker === 'function';
}

/**
 * Asks the user for a directory to save into (from their click); null when they
 * cancel the dialog.
 */
export async function pickFolder(): Promise<FileSystemDirectoryHandle | null> {
  const picker = (window as SavePickerWindow).showDirectoryPicker;
  if (!picker) throw new Error('This browser cannot save into a folder (no File System Access API); download a ZIP instead.');
  try {
    return await picker.call(window, { id: 'linkfs-save', mode: 'readwrite' });
  } catch (error) {
    if (error instanceof DOMException && error.name === 'AbortError') return null;
    throw error;
  }
}

export async function route(): Promise<SaveRoute> {
  if ((await serviceWorker())?.active) return 'service-worker';
  if (typeof (window as SavePickerWindow).showSaveFilePicker === 'function') return 'file-picker';
  return 'blob';
}

export interface SaveJob {
  readonly route: SaveRoute;
  /** Size and final name (a ZIP's plan first). */
  readonly ready: Promise<{ size: number; name: string; zip?: ZipFacts }>;
  /** Settles when saved; a directory save says into which folder and which names it changed. */
  readonly done: Promise<TransferDone>;
  set onProgress(f: ((sent: number) => void) | null);
  cancel(): void;
}

/** For a retry through File System Access: the file chosen and how far it got. */
export interface Resume {
  handle: FileSystemFileHandle;
  at: number;
}

/** A save into a directory: the one chosen, the folder to write there, and whether this is a retry. */
export interface IntoFolder {
  handle: FileSystemDirectoryHandle;
  folder: string;
  resume: boolean;
}

/**
 * Starts saving `source` as `name`. Call it from the click (the file picker needs
 * the user's gesture); `resume` continues an earlier File System Access save.
 */
export async function startSave(api: ShareApi, source: TransferSource, name: string, resume?: Resume, into?: IntoFolder): Promise<SaveJob & { resumeState(): Resume | null }> {
  const picker = (window as SavePickerWindow).showSaveFilePicker;
  const how = into ? 'directory' : resume ? 'file-picker' : await route();
  let transfer: Transfer;
  let finish: () => void = () => undefined;
  let handle: FileSystemFileHandle | null = resume?.handle ?? null;
  let reached = resume?.at ?? 0;
  if (how === 'directory' && into) {
    transfer = api.transfer(source, { kind: 'directory', handle: into.handle, folder: into.folder, resume: into.resume });
  } else if (how === 'service-worker') {
    const token = newToken();
    const channel = new MessageChannel();
    transfer = api.transfer(source, { kind: 'port', port: channel.port1, once: true });
    const ready = await transfer.ready;
    await registerServed(
      token,
      // No ranges for downloads: Chromium would split a big download into parallel
      // range requests, and our stream already runs at the data channel's speed.
      { size: ready.size, name: ready.name, mime: 'application/octet-stream', disposition: 'attachment', ranges: false, window: SERVE_WINDOW },
      channel.port2,
    );
    const removeFrame = startBrowserDownload(servedUrl(token, ready.name));
    finish = () => {
      unregisterServed(token);
      // Give the browser a moment to finish writing before the frame goes.
      setTimeout(removeFrame, 10_000);
    };
  } else if (how === 'file-picker' && (handle !== null || picker)) {
    handle ??= await picker!.call(window, { suggestedName: name });
    transfer = api.transfer(source, { kind: 'file', handle, resumeAt: reached });
  } else {
    transfer = api.transfer(source, { kind: 'blob' });
  }
  const done = transfer.done.then(
    (result) => {
      finish();
      if (result.blob) saveFile(result.blob, name);
      return result;
    },
    (error: unknown) => {
      finish();
      throw error;
    },
  );
  return {
    route: how,
    ready: transfer.ready,
    done,
    set onProgress(f: ((sent: number) => void) | null) {
      transfer.onProgress = (sent) => {
        reached = sent;
        f?.(sent);
      };
    },
    cancel: () => transfer.stop('The download was cancelled.'),
    resumeState: () => (handle !== null && how === 'file-picker' ? { handle, at: reached } : null),
  };
}

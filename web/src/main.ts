// Bootstrap: read the share key from the fragment, open the share, show it.
// The key is handed only to openShare; it never goes into a URL query or a request.

import './style.css';
import type { ConnectionStatus, ShareApi } from './api';
import { openShare } from './share';
import { errorText } from './ui/save-file';
import { serviceWorker } from './ui/service-worker';
import { lookupPath, parseFragment } from './ui/share-link';
import { ShareFolderView } from './ui/share-folder';
import { ShareView } from './ui/share-view';
import type { ThumbnailStats } from './ui/thumbnails';
import { linkAsks, PasswordPrompt, takeKept } from './ui/password-prompt';

declare global {
  interface Window {
    /** The open share, for tests and for the curious (set once its index is open). */
    linkfsShare?: ShareApi;
    /** What the grid's thumbnails cost so far (tests, the benchmark). */
    linkfsThumbnails?: ThumbnailStats;
  }
}

/** Said on the page with no link, under "Share a folder". */
const NO_KEY = 'To open a folder someone shared with you, open the complete link they gave you; it ends in #<room>.<secret>.';

async function main(): Promise<void> {
  const mount = document.getElementById('app');
  if (!mount) throw new Error('index.html has no #app element');
  const { key, path } = parseFragment(window.location.hash);
  // A link that asks for a password asks before anything of it is shown (its cached
  // listing included); a wrong one's retry brings the password across the reload.
  let password = key === '' ? null : await takeKept(key);
  if (key !== '' && password === null && (await linkAsks(key))) {
    password = await PasswordPrompt.ask(mount);
  }
  // The index worker starts first (its wasm, the saved index) while the page builds its
  // view. A folder kept from an earlier visit is drawn meanwhile (not for a password link).
  if (key === '') {
    // No link: this page shares a folder instead.
    mount.replaceChildren(new ShareFolderView(NO_KEY).element);
    // Pasting a link into this tab's address bar only changes the fragment.
    window.addEventListener('hashchange', () => window.location.reload(), { once: true });
    return;
  }
  // (Called seconds later, once `view` below exists.)
  const onSlowOpen = (status: ConnectionStatus) => view.showStatus(status);
  const opening = openShare(key, password === null ? { showFirst: lookupPath(path), onSlowOpen } : { onSlowOpen });
  opening.catch(() => undefined); // awaited below
  const view = new ShareView(key);
  mount.replaceChildren(view.element);

  // Registered early: the first download or video must not wait for it.
  void serviceWorker();
  try {
    const api = await opening;
    if (password !== null) api.givePassword(password);
    view.attach(api);
    const stats = view.thumbnailStats;
    if (stats) window.linkfsThumbnails = stats;
    // Resolved early (a kept folder): the index may still fail to open.
    await api.opened;
    window.linkfsShare = api;
  } catch (error) {
    view.showFailure(failureStatus(error));
  }
}

/** openShare failed: a link the share rejects as malformed, or anything else. */
function failureStatus(error: unknown): ConnectionStatus {
  const invalid = error instanceof Error && error.name === 'InvalidLinkError';
  return {
    state: invalid ? 'invalid-link' : 'error',
    message: invalid ? errorText(error) : `Could not open this share: ${errorText(error)}`,
  };
}

void main();

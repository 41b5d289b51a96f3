// What a page opened over plain http (a LAN link, `linkfs share --bind`) cannot do,
// said once in words, with how to get the full page. Browsers keep service workers
// and File System Access to secure contexts (https, localhost); without them the page
// still lists, searches, previews, plays and saves everything, but a file is read
// whole before it is saved or played (held by the browser on its disk), and "Save
// into folder" is not offered. Dismissed for good in this browser by its close button.

import { button, el } from './dom';
import { icon } from './icons';

const DISMISSED = 'linkfs-plain-http-notice';

/** The notice, or null on a secure page or once dismissed here. */
export function plainHttpNotice(): HTMLElement | null {
  if (window.isSecureContext) return null;
  try {
    if (localStorage.getItem(DISMISSED) === '1') return null;
  } catch {
    // No storage (a blocked origin): the notice shows each time.
  }
  // One line folded (a phone's listing must still start in the first third), the why unfolded.
  const notice = el(
    'div',
    { className: 'plain-http-notice', attrs: { role: 'note' }, data: { testid: 'plain-http-notice' } },
    el(
      'details',
      {},
      el('summary', { text: 'This link is plain http: files load whole before they are saved or played.' }),
      el('p', {
        text: 'Browsers let only https pages (and localhost) stream files, so this page reads each file completely before it saves or plays it, and “Save into folder” is not offered. An https link from the sharer gives the full page.',
      }),
    ),
  );
  const close = button('Dismiss this note', 'icon-button', () => {
    notice.remove();
    try {
      localStorage.setItem(DISMISSED, '1');
    } catch {
      // Not kept: it shows again next time.
    }
  }, '');
  close.append(icon('close'));
  notice.append(close);
  return notice;
}

// How much of the share's index has arrived: "Indexing… 41,233 of 100,000 entries"
// with a bar while it fills, "100,000 entries" once complete. When the tree came from
// this browser's cache first, it says so while catching up.

import type { ConnectionState, IndexProgress } from '../api';
import { el } from './dom';
import { formatCount } from './format';

export class IndexProgressView {
  readonly element: HTMLElement;
  private readonly label: HTMLElement;
  private readonly bar: HTMLProgressElement;

  constructor() {
    this.label = el('span', { className: 'index-label', text: 'Waiting for the folder list…' });
    this.bar = el('progress', { className: 'index-bar', attrs: { max: '1' } });
    this.element = el('div', { className: 'index-progress', data: { testid: 'index-progress' } }, this.label, this.bar);
  }

  show(progress: IndexProgress, state: ConnectionState): void {
    const { received, announced, complete, fromCache } = progress;
    const target = Math.max(received, announced);
    this.element.dataset.received = String(received);
    this.element.dataset.announced = String(announced);
    this.element.dataset.complete = String(complete);
    this.element.dataset.fromCache = String(fromCache);
    this.element.dataset.loadingCache = String(progress.loadingCache === true);
    this.element.classList.toggle('is-complete', complete);

    this.bar.hidden = complete || target === 0;
    if (target > 0) {
      this.bar.max = target;
      this.bar.value = received;
    }

    let text: string;
    if (complete) {
      text = `${formatCount(received)} ${received === 1 ? 'entry' : 'entries'}`;
    } else if (state === 'sharer-gone' || state === 'invalid-link' || state === 'link-ended' || state === 'error') {
      text = target === 0
        ? 'No entries received.'
        : `${formatCount(received)} of ${formatCount(target)} entries received; the rest did not arrive.`;
    } else if (progress.loadingCache) {
      text = `Loading the saved folder list… ${formatCount(received)} entries`;
    } else if (fromCache > 0) {
      text = `From the local cache; catching up… ${formatCount(received)} of ${formatCount(target)} entries`;
    } else if (target === 0) {
      text = 'Waiting for the folder list…';
    } else {
      text = `Indexing… ${formatCount(received)} of ${formatCount(target)} entries`;
    }
    this.label.textContent = text;
    this.label.title = fromCache > 0 && !complete ? `${formatCount(fromCache)} entries came from this browser's cache; the rest are arriving from the sharer.` : '';
    // Nothing to count when the link was refused before anything arrived.
    this.element.hidden = target === 0 && (state === 'invalid-link' || state === 'link-ended' || state === 'error');
    this.bar.setAttribute('aria-label', text);
  }
}

// The path from the share root to the shown folder. Each crumb is a real link to its
// fragment, so it can be opened in a new tab; clicking one navigates in place.

import type { EntryRow } from '../api';
import { el } from './dom';
import { fragmentFor } from './share-link';

export class Breadcrumbs {
  readonly element: HTMLElement;
  private readonly list: HTMLOListElement;

  constructor(private readonly key: string) {
    this.list = el('ol', { className: 'crumbs' });
    this.element = el('nav', { className: 'breadcrumbs', attrs: { 'aria-label': 'Folder path' } }, this.list);
  }

  /** `path` runs from the root (first) to the shown folder (last). */
  show(path: readonly EntryRow[]): void {
    const names: string[] = [];
    const items = path.map((entry, depth) => {
      if (depth > 0) names.push(entry.name);
      const label = depth === 0 ? entry.name || 'Shared folder' : entry.name;
      const last = depth === path.length - 1;
      const link = el('a', {
        className: depth === 0 ? 'crumb crumb-root' : 'crumb',
        text: label,
        attrs: { href: fragmentFor(this.key, names), title: label },
        data: { testid: 'breadcrumb', id: String(entry.id) },
      });
      if (last) link.setAttribute('aria-current', 'page');
      return el('li', {}, link);
    });
    this.list.replaceChildren(...items);
  }
}

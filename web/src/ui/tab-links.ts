// A tab share's links: the main one and those made here, each with what it shows,
// when it expires, whether it asks a password, who is visiting through it, its QR code,
// and a way to withdraw it. A new link shows one folder or file of the share (or the
// whole), may expire (`48h`, `7d`, a date) and may ask a password (hashed in the
// password worker; only the hash is kept). The rules are the sharing machine's.

import type { TabLink, TabShare } from '../wasm/page';
import { qrSvg } from '../wasm/page';
import type { Passwords } from '../wasm/passwords';
import { button, el } from './dom';
import { errorText } from './save-file';

export class TabLinks {
  readonly element: HTMLElement;
  private readonly list: HTMLElement;
  private readonly problem: HTMLElement;
  private readonly label: HTMLInputElement;
  private readonly shows: HTMLTextAreaElement;
  private readonly expires: HTMLInputElement;
  private readonly password: HTMLInputElement;
  private readonly make: HTMLButtonElement;
  /** What the list shows now, to redraw only when it changes. */
  private drawn = '';

  constructor(
    private readonly share: TabShare,
    private readonly passwords: Passwords,
    /** The links changed: keep them for a reload. */
    private readonly changed: () => void,
  ) {
    const field = (label: string, input: HTMLInputElement | HTMLTextAreaElement): HTMLElement => el('label', { className: 'tab-links-field' }, el('span', { text: label }), input);
    this.label = el('input', { attrs: { type: 'text', maxlength: '200', placeholder: 'for Ann' }, data: { testid: 'tab-link-label' } });
    // One path: a folder becomes the link's root, a file is shown alone. Several (one a
    // line): each at its place, nothing beside them.
    this.shows = el('textarea', { attrs: { rows: '1', placeholder: 'the whole folder, or Photos/2024 (one path a line)' }, data: { testid: 'tab-link-shows' } });
    this.expires = el('input', { attrs: { type: 'text', list: 'tab-link-expiries', placeholder: 'never, or 48h, 7d, 2026-12-31' }, data: { testid: 'tab-link-expires' } });
    const expiries = el('datalist', { attrs: { id: 'tab-link-expiries' } }, ...['1h', '24h', '7d', '30d'].map((v) => el('option', { attrs: { value: v } })));
    this.password = el('input', { attrs: { type: 'password', autocomplete: 'new-password', placeholder: 'none' }, data: { testid: 'tab-link-password' } });
    this.make = button('Make the link', 'primary-button', () => void this.add());
    this.make.dataset['testid'] = 'tab-link-make';
    this.problem = el('p', { className: 'share-folder-problem', attrs: { role: 'alert' }, data: { testid: 'tab-link-problem' } });
    this.problem.hidden = true;
    this.list = el('ul', { className: 'tab-links-list', data: { testid: 'tab-links' } });
    const form = el(
      'details',
      { className: 'tab-links-new' },
      el('summary', { text: 'Another link: part of the folder, an expiry, a password' }),
      el('div', { className: 'tab-links-form' }, field('Label', this.label), field('Shows', this.shows), field('Expires', this.expires), expiries, field('Password', this.password), this.make),
      this.problem,
    );
    this.element = el('section', { className: 'tab-links' }, el('h2', { text: 'Links' }), this.list, form);
    this.draw();
  }

  /** Redraws the list if anything in it changed (visitors per link, ends). */
  draw(): void {
    let rows: TabLink[];
    try {
      // The main link is shown above, with its QR code.
      rows = this.share.links().filter((l) => l.id !== 0);
    } catch {
      return;
    }
    const now = JSON.stringify(rows);
    if (now === this.drawn) return;
    this.drawn = now;
    this.list.replaceChildren(...(rows.length === 0 ? [el('li', { className: 'muted', text: 'Only the main link.' })] : rows.map((l) => this.row(l))));
  }

  private row(l: TabLink): HTMLElement {
    const url = el('input', { className: 'tab-share-link', attrs: { readonly: '', 'aria-label': `Link ${l.label}` }, data: { testid: 'tab-link-url' } });
    url.value = l.url;
    url.addEventListener('focus', () => url.select());
    const facts = [l.shows];
    if (l.password) facts.push('asks a password');
    if (l.ended) facts.push(l.ended);
    else if (l.expires !== undefined && l.expires !== null) facts.push(`expires ${new Date(l.expires * 1000).toLocaleString()}`);
    if (l.visitors > 0) facts.push(`${l.visitors} ${l.visitors === 1 ? 'visitor' : 'visitors'}`);
    const item = el('li', { className: l.ended ? 'tab-link ended' : 'tab-link', data: { testid: 'tab-link', link: String(l.id) } }, el('strong', { text: l.label || `Link ${l.id}` }), el('span', { className: 'muted', text: ` ${facts.join(' · ')}` }));
    if (l.ended) return item;
    item.append(url);
    const qr = qrImage(l.url, `QR code of link ${l.id}`);
    if (qr) item.append(el('details', { className: 'tab-link-qr-box' }, el('summary', { text: 'QR code' }), qr));
    {
      const withdraw = button(`Withdraw ${l.label || `link ${l.id}`}`, 'text-button danger', () => {
        try {
          this.share.revoke(l.id);
        } catch (error) {
          this.say(errorText(error));
        }
        this.changed();
        this.draw();
      }, 'Withdraw');
      withdraw.dataset['testid'] = 'tab-link-withdraw';
      item.append(withdraw);
    }
    return item;
  }

  private async add(): Promise<void> {
    this.problem.hidden = true;
    this.make.disabled = true;
    try {
      const password = this.password.value;
      const hash = password === '' ? undefined : await this.passwords.hash(password);
      const paths = this.shows.value
        .split('\n')
        .map((p) => p.trim())
        .filter((p) => p !== '');
      const [scope, rest] = paths.length === 1 ? [paths[0] ?? '', []] : ['', paths];
      this.share.addLink(this.label.value, scope, rest, this.expires.value, hash);
      this.label.value = '';
      this.shows.value = '';
      this.expires.value = '';
      this.password.value = '';
      this.changed();
      this.draw();
    } catch (error) {
      this.say(`No link made: ${errorText(error)}`);
    } finally {
      this.make.disabled = false;
    }
  }

  private say(words: string): void {
    this.problem.textContent = words;
    this.problem.hidden = false;
  }
}

/** `link`'s QR code as an image (null if the link is too long for one). */
export function qrImage(link: string, alt: string): HTMLImageElement | null {
  const svg = qrSvg(link);
  if (svg === null) return null;
  return el('img', { className: 'tab-link-qr', attrs: { alt, src: `data:image/svg+xml;utf8,${encodeURIComponent(svg)}`, width: '160', height: '160' }, data: { testid: 'tab-link-qr' } });
}

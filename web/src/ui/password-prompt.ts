// The password a link asks for: a small form shown instead of the share (before
// anything of it), and what the page remembers so that a reopened link asks first.
//
// - The password goes to the sharer over the link's encrypted data channel (the
//   worker's visit sends it when the sharer asks); the page never stores it
//   beyond the reload that a wrong password needs (sessionStorage, this tab only,
//   removed as soon as it is read).
// - A link known to ask (localStorage holds a SHA-256 of its key, not the key) shows
//   the form before the share opens, so its cached listing is not shown first.

import { storageTag } from '../storage-tag';
import { el } from './dom';

const ASKS = 'linkfs-asks-password:';
const PENDING = 'linkfs-password:';

/** A SHA-256 of a link's key (hex), to name what is stored for it without the key itself. */
export function keyTag(key: string): string {
  return storageTag(key);
}

/** Whether this link asked for a password before (on this browser). */
export async function linkAsks(key: string): Promise<boolean> {
  try {
    return localStorage.getItem(ASKS + keyTag(key)) === '1';
  } catch {
    return false;
  }
}

/** Remembers that this link asks for a password. */
export async function rememberAsks(key: string): Promise<void> {
  try {
    localStorage.setItem(ASKS + keyTag(key), '1');
  } catch {
    // No storage: the form comes when the sharer asks.
  }
}

/** Keeps `password` for the next page load of this link only (a wrong one's retry). */
export async function keepForReload(key: string, password: string): Promise<void> {
  sessionStorage.setItem(PENDING + keyTag(key), password);
}

/** The password kept for this load, removed as it is read. */
export async function takeKept(key: string): Promise<string | null> {
  try {
    const tag = PENDING + keyTag(key);
    const p = sessionStorage.getItem(tag);
    sessionStorage.removeItem(tag);
    return p;
  } catch {
    return null;
  }
}

export class PasswordPrompt {
  readonly element: HTMLElement;
  private readonly input: HTMLInputElement;
  private readonly message: HTMLElement;
  private readonly button: HTMLButtonElement;
  private onSubmit: ((password: string) => void) | null = null;

  constructor() {
    this.input = el('input', {
      attrs: { type: 'password', autocomplete: 'current-password', required: '', 'aria-label': 'Password' },
      data: { testid: 'password-input' },
    }) as HTMLInputElement;
    this.message = el('p', { className: 'password-message', attrs: { role: 'alert' } });
    this.button = el('button', { text: 'Open', attrs: { type: 'submit' }, data: { testid: 'password-submit' } }) as HTMLButtonElement;
    const form = el(
      'form',
      { className: 'password-form', data: { testid: 'password-form' } },
      el('label', { text: 'This link asks for a password.' }),
      this.input,
      this.button,
      this.message,
    );
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const password = this.input.value;
      if (password === '' || this.onSubmit === null) return;
      this.button.disabled = true;
      this.message.textContent = 'Checking…';
      this.onSubmit(password);
    });
    this.element = el('div', { className: 'password-prompt' }, form);
    this.element.hidden = true;
  }

  /** Shows the form (with `problem`, if the last try failed); `submit` gets the password. */
  show(problem: string, submit: (password: string) => void): void {
    this.onSubmit = submit;
    // Asked again after a reconnect: what is typed (or being checked) stays.
    if (!this.element.hidden && problem === '') return;
    this.message.textContent = problem;
    this.button.disabled = false;
    this.input.value = '';
    this.element.hidden = false;
    this.input.focus();
  }

  hide(): void {
    this.element.hidden = true;
    this.onSubmit = null;
  }

  /** Waits for a password, with the form shown in `mount` alone (before the share opens). */
  static ask(mount: HTMLElement): Promise<string> {
    const prompt = new PasswordPrompt();
    mount.replaceChildren(el('div', { className: 'app' }, prompt.element));
    return new Promise((resolve) => prompt.show('', resolve));
  }
}

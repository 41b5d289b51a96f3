// The connection status: a compact indicator while connecting or connected, a
// prominent banner when something is wrong. The words come from the share
// (ConnectionStatus.message); the defaults below are only for an empty message.
// `document.body.dataset.state` mirrors the state for tests and styles.

import type { ConnectionState, ConnectionStatus } from '../api';
import { el } from './dom';

const DEFAULT_MESSAGES: Record<ConnectionState, string> = {
  connecting: 'Connecting…',
  connected: 'Connected',
  reconnecting: 'Lost the connection to the sharer; reconnecting…',
  'sharer-gone': 'The sharer went away. You can still browse what was received; reopen the link when they share again.',
  'invalid-link': 'This link is not valid. Ask the sharer for the link again and copy all of it.',
  'link-ended': 'The sharer withdrew this link, or its time ran out. Ask them for a new one.',
  password: 'This link asks for a password.',
  'password-wrong': 'The password is wrong.',
  error: 'Something went wrong while talking to the sharer.',
};

const TITLES: Record<ConnectionState, string> = {
  connecting: 'Connecting',
  connected: 'Connected',
  reconnecting: 'Reconnecting',
  'sharer-gone': 'Sharer offline',
  'invalid-link': 'Link not valid',
  'link-ended': 'Link no longer valid',
  password: 'Password',
  'password-wrong': 'Password',
  error: 'Problem',
};

export class ConnectionStatusView {
  readonly element: HTMLElement;
  private readonly title: HTMLElement;
  private readonly text: HTMLElement;

  constructor() {
    this.title = el('strong', { className: 'status-title' });
    this.text = el('span', { className: 'status-text' });
    this.element = el(
      'div',
      { className: 'status', attrs: { role: 'status', 'aria-live': 'polite' }, data: { testid: 'status' } },
      el('span', { className: 'status-dot', attrs: { 'aria-hidden': 'true' } }),
      this.title,
      this.text,
    );
  }

  show(status: ConnectionStatus): void {
    const message = status.message.trim() || DEFAULT_MESSAGES[status.state];
    const problem = status.state !== 'connecting' && status.state !== 'connected';
    this.element.dataset.state = status.state;
    this.element.classList.toggle('is-problem', problem);
    this.element.setAttribute('role', problem ? 'alert' : 'status');
    // Problems get a title and the full message; routine states just the message.
    this.title.textContent = problem ? `${TITLES[status.state]}.` : '';
    this.title.hidden = !problem;
    this.text.textContent = message;
    document.body.dataset.state = status.state;
  }
}

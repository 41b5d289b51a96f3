// What the connection is, next to its status: direct or through a TURN relay (the
// selected ICE candidate pair from getStats), the round-trip time and the current
// receive speed. Polled every 2 s while connected; hidden otherwise.

import type { ConnectionInfo, ShareApi } from '../api';
import { el } from './dom';
import { formatRate } from './format';

const POLL_MS = 2000;

export class ConnectionInfoView {
  readonly element: HTMLElement;
  private timer: ReturnType<typeof setInterval> | null = null;
  private last: { at: number; bytes: number } | null = null;

  constructor(private readonly api: ShareApi) {
    this.element = el('div', { className: 'connection-info', attrs: { 'aria-live': 'off' }, data: { testid: 'connection-info' } });
    this.element.hidden = true;
  }

  /** Polls while `connected` is true. */
  setConnected(connected: boolean): void {
    if (connected && this.timer === null) {
      this.timer = setInterval(() => void this.poll(), POLL_MS);
      void this.poll();
    } else if (!connected && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
      this.last = null;
      this.element.hidden = true;
    }
  }

  private async poll(): Promise<void> {
    let info: ConnectionInfo | null;
    try {
      info = await this.api.connection();
    } catch {
      info = null;
    }
    if (info === null || this.timer === null) {
      this.element.hidden = true;
      return;
    }
    const now = performance.now();
    let speed = '';
    if (this.last !== null && info.bytesReceived >= this.last.bytes) {
      const rate = ((info.bytesReceived - this.last.bytes) * 1000) / Math.max(1, now - this.last.at);
      if (rate > 10_000) speed = ` · ${formatRate(rate)}`;
    }
    this.last = { at: now, bytes: info.bytesReceived };
    const route = info.route === 'relayed' ? 'Through a relay (TURN)' : 'Direct';
    const rtt = info.rttMs === null ? '' : ` · ${info.rttMs < 1 ? '<1' : Math.round(info.rttMs)} ms`;
    const lanes = info.lanes > 0 ? ` · ${info.lanes + 1} connections` : '';
    this.element.textContent = `${route}${rtt}${speed}${lanes}`;
    this.element.title = `Connection: ${info.localType} ⇄ ${info.remoteType} candidates over ${info.protocol}${info.rttMs === null ? '' : `, round trip ${info.rttMs.toFixed(1)} ms`}`;
    this.element.dataset.route = info.route;
    this.element.dataset.rttMs = info.rttMs === null ? '' : String(info.rttMs);
    this.element.dataset.lanes = String(info.lanes);
    this.element.hidden = false;
  }
}

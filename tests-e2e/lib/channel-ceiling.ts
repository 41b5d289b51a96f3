// What Chromium's own data channel moves on this machine, now: two peer connections in
// one page, MIB MiB in 64 KiB messages, with at most 4 MiB queued (as the notes measured
// the browser baselines). A bench reports its browser figures against this, in the same
// run, since this machine's speed for it moves from day to day (45.6 MB/s one day, 17
// another, with the native figures unchanged).

import type { Page } from 'playwright-core';

/** MB/s that `page`'s Chromium moves between two of its own peer connections. */
export async function chromiumChannelMbS(page: Page, mib = 200): Promise<number> {
  // A page not yet navigated has no init scripts: the helper tsx's names need.
  await page.evaluate('globalThis.__name ??= (fn) => fn;');
  return page.evaluate(async (mib) => {
    const a = new RTCPeerConnection();
    const b = new RTCPeerConnection();
    a.onicecandidate = (e) => void (e.candidate && b.addIceCandidate(e.candidate));
    b.onicecandidate = (e) => void (e.candidate && a.addIceCandidate(e.candidate));
    const dc = a.createDataChannel('ceiling');
    dc.binaryType = 'arraybuffer';
    const total = mib * 1048576;
    let got = 0;
    const arrived = new Promise<void>((done) => {
      b.ondatachannel = (e) => {
        e.channel.binaryType = 'arraybuffer';
        e.channel.onmessage = (m) => {
          got += (m.data as ArrayBuffer).byteLength;
          if (got >= total) done();
        };
      };
    });
    await a.setLocalDescription();
    await b.setRemoteDescription(a.localDescription!);
    await b.setLocalDescription();
    await a.setRemoteDescription(b.localDescription!);
    await new Promise((open) => (dc.onopen = open));
    const message = new Uint8Array(65536);
    let sent = 0;
    const started = performance.now();
    dc.bufferedAmountLowThreshold = 1 << 20;
    const pump = () => {
      while (sent < total && dc.bufferedAmount < 4 << 20) {
        dc.send(message);
        sent += message.length;
      }
    };
    dc.onbufferedamountlow = pump;
    pump();
    await arrived;
    const seconds = (performance.now() - started) / 1000;
    a.close();
    b.close();
    return total / 1e6 / seconds;
  }, mib);
}

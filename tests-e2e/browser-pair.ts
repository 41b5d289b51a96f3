// The browser's own ceiling on a path: one Chromium sends bulk bytes to another over a
// WebRTC data channel (Chrome's own SCTP at both ends, nothing of linkfs), for
// `npm run bench:wan` to set beside Chromium saving through linkfs.
//
//   tsx tests-e2e/browser-pair.ts send    --signal DIR --mib N
//   tsx tests-e2e/browser-pair.ts receive --signal DIR --mib N
//
// Run each end in its own network namespace; they trade a complete offer and answer
// (every candidate gathered, no trickle) as files in DIR, a directory both can see.
// The sender keeps at most 4 MiB queued in its channel and sends 64 KiB messages,
// ordered and reliable as linkfs's own channel. The receiver prints one JSON line:
// {bytes, seconds, mb_per_s}, timed from its first message to its last.

import { readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { launchChromium } from './lib/chromium.ts';

const log = (line: string) => console.error(line);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const [role, ...rest] = process.argv.slice(2);
const opt = (name: string): string => {
  const i = rest.indexOf(name);
  const v = i >= 0 ? rest[i + 1] : undefined;
  if (v === undefined) throw new Error(`browser-pair: ${name} is missing (usage: browser-pair.ts send|receive --signal DIR --mib N)`);
  return v;
};
if (role !== 'send' && role !== 'receive') throw new Error(`browser-pair: the role is "send" or "receive", not ${JSON.stringify(role)}`);
const dir = opt('--signal');
const bytes = Number(opt('--mib')) * 1048576;
if (!(bytes > 0)) throw new Error('browser-pair: --mib must be a positive number');

/** Writes a file whole (others poll for it). */
async function publish(name: string, text: string): Promise<void> {
  const tmp = path.join(dir, `.${name}.tmp`);
  await writeFile(tmp, text);
  await rename(tmp, path.join(dir, name));
}

async function waitFor(name: string, ms: number): Promise<string> {
  const until = Date.now() + ms;
  for (;;) {
    try {
      return await readFile(path.join(dir, name), 'utf8');
    } catch {
      if (Date.now() > until) throw new Error(`browser-pair ${role}: no ${name} from the other end within ${ms / 1000} s`);
      await sleep(50);
    }
  }
}

const browser = await launchChromium({ name: `pair-${role}`, log });
try {
  const page = await browser.page();
  const gathered = `new Promise((resolve) => {
    if (pc.iceGatheringState === 'complete') return resolve();
    pc.onicegatheringstatechange = () => { if (pc.iceGatheringState === 'complete') resolve(); };
  })`;
  if (role === 'send') {
    const offer = await page.evaluate(
      `(async () => {
        const pc = new RTCPeerConnection();
        const dc = pc.createDataChannel('bulk', { ordered: true });
        dc.binaryType = 'arraybuffer';
        window.pair = { pc, dc };
        await pc.setLocalDescription(await pc.createOffer());
        await ${gathered};
        return pc.localDescription.sdp;
      })()`,
    );
    await publish('offer.sdp', String(offer));
    const answer = await waitFor('answer.sdp', 60_000);
    await page.evaluate(
      `(async (answer, total) => {
        const { pc, dc } = window.pair;
        await pc.setRemoteDescription({ type: 'answer', sdp: answer });
        if (dc.readyState !== 'open') await new Promise((resolve, reject) => {
          dc.onopen = resolve;
          setTimeout(() => reject(new Error('the data channel did not open within 30 s')), 30000);
        });
        const message = new Uint8Array(65536);
        crypto.getRandomValues(message);
        dc.bufferedAmountLowThreshold = 1 << 20;
        let sent = 0;
        while (sent < total) {
          while (sent < total && dc.bufferedAmount < (4 << 20)) {
            dc.send(message);
            sent += message.length;
          }
          if (sent < total) await new Promise((resolve) => { dc.onbufferedamountlow = resolve; });
        }
        // Stay until the receiver has it all (it closes the connection, or we are killed).
        await new Promise((resolve) => { dc.onclose = resolve; pc.onconnectionstatechange = () => { if (pc.connectionState !== 'connected') resolve(); }; });
      })(${JSON.stringify(answer)}, ${bytes})`,
    );
  } else {
    const offer = await waitFor('offer.sdp', 60_000);
    const answer = await page.evaluate(
      `(async (offer, total) => {
        const pc = new RTCPeerConnection();
        const got = new Promise((resolve, reject) => {
          pc.ondatachannel = (e) => {
            const dc = e.channel;
            dc.binaryType = 'arraybuffer';
            let n = 0, first = 0;
            dc.onmessage = (m) => {
              if (n === 0) first = performance.now();
              n += m.data.byteLength;
              if (n >= total) resolve({ bytes: n, ms: performance.now() - first });
            };
            dc.onclose = () => reject(new Error('the channel closed after ' + n + ' bytes'));
          };
        });
        window.pair = { pc, got };
        await pc.setRemoteDescription({ type: 'offer', sdp: offer });
        await pc.setLocalDescription(await pc.createAnswer());
        await ${gathered};
        return pc.localDescription.sdp;
      })(${JSON.stringify(offer)}, ${bytes})`,
    );
    await publish('answer.sdp', String(answer));
    const r = (await page.evaluate(`window.pair.got.then((r) => { window.pair.pc.close(); return r; })`)) as { bytes: number; ms: number };
    const seconds = r.ms / 1000;
    console.log(JSON.stringify({ bytes: r.bytes, seconds: Math.round(seconds * 1000) / 1000, mb_per_s: Math.round((r.bytes / 1e6 / seconds) * 100) / 100 }));
  }
} finally {
  await browser.close();
}

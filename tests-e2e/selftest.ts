// Proves the test environment, without any linkfs code: run it with
// `bash tests-e2e/run selftest`. It checks that
//   1. we are inside a private network namespace holding only lo and the veth pair,
//   2. Chromium starts there and loads a page from a server on 127.0.0.1,
//   3. two separate Chromium instances connect to each other with RTCPeerConnection
//      (host candidates on the veth address, no mDNS names) and exchange messages,
//   4. an outside address (1.1.1.1) cannot be reached, from node or from the page.
// A failure here means the machine or tests-e2e/run is broken, not the product.

import { readFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { launchChromium, type ChromiumInstance } from './lib/chromium.ts';
import { runSuite, assert, type TestCase } from './lib/runner.ts';

const outside = '1.1.1.1';

function servePage(): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(`<!doctype html><title>selftest</title><body data-state="ready"><p id="t">served ${req.url ?? ''}</p></body>`);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}/`,
        close: () => new Promise<void>((r) => server.close(() => r())),
      });
    });
  });
}

function tcpConnect(host: string, port: number, timeoutMs: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (outcome: string) => {
      socket.destroy();
      resolve(outcome);
    };
    socket.setTimeout(timeoutMs, () => done('timeout'));
    socket.once('connect', () => done('connected'));
    socket.once('error', (e) => done(`error ${(e as NodeJS.ErrnoException).code ?? e.message}`));
  });
}

const tests: TestCase[] = [
  {
    name: 'inside a private namespace with only lo and the veth pair',
    async run() {
      assert(process.env.LINKFS_IN_NETNS === '1', 'not started through tests-e2e/run (LINKFS_IN_NETNS unset)');
      // /proc/net is per network namespace (/sys/class/net would show the host's).
      const links = (await readFile('/proc/net/dev', 'utf8'))
        .split('\n')
        .slice(2)
        .map((l) => l.split(':')[0]!.trim())
        .filter((n) => n !== '')
        .sort();
      assert(JSON.stringify(links) === JSON.stringify(['lfs0', 'lfs1', 'lo']), `interfaces are ${links.join(', ')}; expected exactly lfs0, lfs1, lo`);
      const routes = (await readFile('/proc/net/route', 'utf8')).trim().split('\n').slice(1);
      const defaults = routes.map((l) => l.split('\t')).filter((f) => f[1] === '00000000');
      assert(defaults.length === 1 && defaults[0]![0] === 'lfs0', `default routes: ${JSON.stringify(defaults.map((f) => f[0]))}; expected one, via lfs0`);
    },
  },
  {
    name: `node cannot reach ${outside}`,
    async run() {
      const outcome = await tcpConnect(outside, 80, 4_000);
      assert(outcome !== 'connected', `a TCP connection to ${outside}:80 succeeded: the namespace leaks`);
      console.log(`    connect ${outside}:80 -> ${outcome}`);
    },
  },
  {
    name: 'Chromium loads a local page; two Chromiums connect over WebRTC; the page cannot reach outside',
    timeoutMs: 60_000,
    async run(t) {
      const server = await servePage();
      t.defer(server.close);
      const browsers: ChromiumInstance[] = [];
      for (const name of ['a', 'b']) {
        const b = await launchChromium({ name: `selftest-${name}` });
        t.defer(() => b.close());
        browsers.push(b);
      }
      const [a, b] = browsers as [ChromiumInstance, ChromiumInstance];
      const pa = await a.page();
      const pb = await b.page();
      for (const [p, label] of [[pa, 'a'], [pb, 'b']] as const) {
        await p.goto(`${server.url}?${label}`);
        const text = await p.locator('#t').textContent();
        assert(text === `served /?${label}`, `browser ${label} shows ${JSON.stringify(text)}, expected "served /?${label}"`);
      }

      // Offer with every candidate gathered (no trickle needed between our two pages).
      const offer = await pa.evaluate(async () => {
        const pc = new RTCPeerConnection();
        const dc = pc.createDataChannel('selftest');
        const got = new Promise<string>((resolve) => {
          dc.onmessage = (e) => resolve(String(e.data));
        });
        dc.onopen = () => dc.send('hello from a');
        (window as unknown as Record<string, unknown>).selftest = { pc, got };
        await pc.setLocalDescription(await pc.createOffer());
        await new Promise<void>((resolve) => {
          if (pc.iceGatheringState === 'complete') return resolve();
          pc.onicegatheringstatechange = () => {
            if (pc.iceGatheringState === 'complete') resolve();
          };
        });
        return pc.localDescription!.sdp;
      });
      const candidates = offer.split('\r\n').filter((l) => l.startsWith('a=candidate:'));
      console.log(`    browser a candidates: ${candidates.map((c) => c.split(' ').slice(4, 8).join(' ')).join(' | ') || 'none'}`);
      assert(candidates.length > 0, 'browser a gathered no ICE candidates: is the default route via the veth missing?');
      assert(!candidates.some((c) => c.includes('.local')), 'browser a offers mDNS (.local) candidates: --disable-features=WebRtcHideLocalIpsWithMdns did not take effect');
      assert(candidates.some((c) => c.includes(process.env.LINKFS_NETNS_ADDR ?? '10.77.0.1')), 'no candidate on the veth address');

      const answer = await pb.evaluate(async (offerSdp: string) => {
        const pc = new RTCPeerConnection();
        const got = new Promise<string>((resolve) => {
          pc.ondatachannel = (e) => {
            e.channel.onmessage = (m) => {
              e.channel.send('hello from b');
              resolve(String(m.data));
            };
          };
        });
        (window as unknown as Record<string, unknown>).selftest = { pc, got };
        await pc.setRemoteDescription({ type: 'offer', sdp: offerSdp });
        await pc.setLocalDescription(await pc.createAnswer());
        await new Promise<void>((resolve) => {
          if (pc.iceGatheringState === 'complete') return resolve();
          pc.onicegatheringstatechange = () => {
            if (pc.iceGatheringState === 'complete') resolve();
          };
        });
        return pc.localDescription!.sdp;
      }, offer);
      await pa.evaluate(async (answerSdp: string) => {
        const { pc } = (window as unknown as { selftest: { pc: RTCPeerConnection } }).selftest;
        await pc.setRemoteDescription({ type: 'answer', sdp: answerSdp });
      }, answer);

      const received = async (p: typeof pa) =>
        p.evaluate(() =>
          Promise.race([
            (window as unknown as { selftest: { got: Promise<string> } }).selftest.got,
            new Promise<string>((_, reject) => setTimeout(() => reject(new Error('no message within 15 s')), 15_000)),
          ]),
        );
      const [atB, atA] = await Promise.all([received(pb), received(pa)]);
      assert(atB === 'hello from a', `browser b received ${JSON.stringify(atB)}`);
      assert(atA === 'hello from b', `browser a received ${JSON.stringify(atA)}`);

      const fetchOutcome = await pa.evaluate(async (target: string) => {
        try {
          const r = await fetch(target, { mode: 'no-cors', signal: AbortSignal.timeout(5_000) });
          return `answered (type ${r.type})`;
        } catch (e) {
          return `failed: ${(e as Error).name}: ${(e as Error).message}`;
        }
      }, `http://${outside}/`);
      console.log(`    page fetch http://${outside}/ -> ${fetchOutcome}`);
      assert(fetchOutcome.startsWith('failed'), `the page reached ${outside}: ${fetchOutcome}`);
    },
  },
];

await runSuite('selftest', tests);

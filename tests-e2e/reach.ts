// Reach: links that work from other machines, through TURN, and on relays that scale
// out. Real processes inside the test's network namespace (tests-e2e/run reach):
// `linkfs share`, `linkfs-relay`, Debian's coturn, redis-server and haproxy, Chromium.
//
//   a: --bind 0.0.0.0 prints a link with the namespace's address; `linkfs ls` lists through it
//   b: TURN with coturn's REST secret: Chromium (?ice=relay) and `linkfs get --ice-policy relay`
//      complete through it (the selected pair is relayed); coturn refuses expired and forged
//      credentials and accepts fresh ones
//   c: three relays + Redis + haproxy: sharer on the first, a browser on the second,
//      `linkfs get` on the third; the sharer's relay is killed and the sharer comes back on
//      another; Redis stops for a few seconds: /healthz says so and recovers, no restarts
//   e: at a distance (linkfs-wan: 20 ms round trip, 0.1% loss) the page opens lanes: a
//      download arrives whole over more than one connection, and Chromium's figures say so
//   e2: the same path, the page adding a file: its upload opens lanes and lands whole
//   d: (last: it adds an IPv6 address to the namespace) --bind [::] names the IPv6
//      default-route address, and a native visitor bound only to IPv6 connects directly

import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { spawnTracked, exitWithin, killHard } from './lib/child.ts';
import { launchChromium, openLink, screenshot, type ChromiumInstance } from './lib/chromium.ts';
import { makeBigFileFixture, makeSmallFixture, type Fixture } from './lib/fixture.ts';
import type { Page } from 'playwright-core';
import { binary, repoRoot, scratchDir } from './lib/paths.ts';
import { freePort, startRelay, type RelayProcess } from './lib/relay-process.ts';
import { assert, runSuite, type TestCase, type TestContext } from './lib/runner.ts';
import { allocates, nsAddr, startCoturn, startHaproxy, startRedis, turnCredentials } from './lib/services.ts';
import { startShare, type ShareProcess } from './lib/share-process.ts';
import { readInPage, waitForComplete } from './lib/verify.ts';
import { inNs, NEAR_ADDR, openWanLine } from './lib/wan-line.ts';

const log = (line: string) => console.log(line);

async function share(t: TestContext, dir: string, args: string[]): Promise<ShareProcess> {
  const s = await startShare(dir, { args });
  t.defer(() => s.kill());
  t.onFailure(() => log(`    sharer stderr tail:\n${s.process.stderrTail().replace(/^/gm, '      ')}`));
  log(`    link ${s.link}`);
  return s;
}

async function browser(t: TestContext, name: string): Promise<{ chromium: ChromiumInstance; page: Page }> {
  const chromium = await launchChromium({ name, log });
  t.defer(() => chromium.close());
  const page = await chromium.page();
  t.onFailure(async () => {
    const file = await screenshot(page, `${t.name}-${name}`);
    if (file !== null) log(`    screenshot: ${file}`);
  });
  return { chromium, page };
}

/** Runs `linkfs ARGS...` to its end; its exit code, stdout and stderr. */
async function linkfs(args: string[], timeoutMs = 60_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawnTracked('linkfs', binary('linkfs'), args);
  const stderr: string[] = [];
  proc.onStderrLine((l) => stderr.push(l));
  const exit = await exitWithin(proc, timeoutMs);
  if (exit === null) {
    await killHard(proc);
    throw new Error(`linkfs ${args.join(' ')} did not end within ${timeoutMs} ms; stderr:\n${stderr.join('\n')}`);
  }
  return { code: exit.code, stdout: proc.stdout.join('\n'), stderr: stderr.join('\n') };
}

/** The same share at another relay: `link` with its origin replaced. */
function at(origin: string, link: string): string {
  return `${origin}/${new URL(link).hash}`;
}

async function sha256File(file: string): Promise<string> {
  return createHash('sha256').update(await readFile(file)).digest('hex');
}

/** Reads `rel` of the share in the page (once its index is complete); fails unless it equals the file on disk. */
async function readAndCompare(page: Page, fixture: Fixture, rel: string): Promise<void> {
  // 'connected' comes with the data link; the index may still be arriving.
  await waitForComplete(page, performance.now(), 30_000);
  const row = await page.evaluate((p: string) => window.linkfsShare!.lookup(p), rel);
  assert(row !== null, `${rel} is not in the page's index`);
  const { results } = await readInPage(page, [row.id], 1, 20_000);
  const want = await sha256File(path.join(fixture.dir, rel));
  assert(results[0]?.sha256 === want, `${rel} read in the page: ${JSON.stringify(results[0])}, want sha256 ${want}`);
}

/** `linkfs get LINK --out DIR ARGS...`: fails unless every file arrived equal. */
async function getAndCompare(link: string, fixture: Fixture, rel: string, args: string[] = []): Promise<string> {
  const out = await mkdtemp(path.join(scratchDir, 'reach-get-'));
  try {
    const r = await linkfs(['get', link, rel, '--out', out, ...args]);
    assert(r.code === 0, `linkfs get ${args.join(' ')} exited ${String(r.code)}:\n${r.stderr}`);
    const got = await sha256File(path.join(out, path.basename(rel)));
    assert(got === (await sha256File(path.join(fixture.dir, rel))), `linkfs get ${rel}: the bytes differ`);
    return r.stderr;
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

const tests: TestCase[] = [
  {
    name: 'a: --bind 0.0.0.0 names the address other machines reach, and that link lists the share',
    async run(t) {
      const fixture = await makeSmallFixture();
      t.defer(() => fixture.remove());
      const port = await freePort();
      const s = await share(t, fixture.dir, ['--bind', `0.0.0.0:${port}`, '--no-qr']);
      const url = new URL(s.link);
      assert(url.hostname === nsAddr && url.port === String(port), `the link ${s.link} should name ${nsAddr}:${port}, the address of the interface holding the default route`);
      const ls = await linkfs(['ls', s.link]);
      assert(ls.code === 0, `linkfs ls exited ${String(ls.code)}:\n${ls.stderr}`);
      for (const name of ['docs', 'random.bin', 'with space.txt']) assert(ls.stdout.includes(name), `linkfs ls did not list ${name}:\n${ls.stdout}`);
      // --public-url names what a proxy or port forward exposes; the sharer still reaches its relay.
      const p = await share(t, fixture.dir, ['--bind', '127.0.0.1:0', '--public-url', 'https://files.example.org/', '--no-qr']);
      assert(p.link.startsWith('https://files.example.org/#'), `--public-url: the link is ${p.link}`);
    },
  },
  {
    name: 'b: through TURN with short-lived credentials: a browser and linkfs get, relayed',
    timeoutMs: 180_000,
    async run(t) {
      const secret = randomBytes(12).toString('hex');
      const turn = await startCoturn(secret);
      t.defer(() => turn.stop());
      t.onFailure(() => log(`    coturn log tail:\n${turn.log().split('\n').slice(-30).join('\n')}`));
      const fixture = await makeBigFileFixture(24 << 20);
      t.defer(() => fixture.remove());
      const s = await share(t, fixture.dir, ['--no-qr', '--turn-secret', secret, '--turn-url', turn.url]);

      // The browser, told to use nothing but the relay.
      const { page } = await browser(t, 'relay-only');
      const link = new URL(s.link);
      await openLink(page, `${link.origin}/?ice=relay${link.hash}`, ['connected'], 30_000);
      await readAndCompare(page, fixture, 'big.bin');
      const info = await page.evaluate(() => window.linkfsShare!.connection());
      assert(info !== null && info.route === 'relayed' && info.localType === 'relay', `the page's selected candidate pair should be relayed: ${JSON.stringify(info)}`);
      log(`    browser: ${JSON.stringify(info)}`);

      // The native receiver, the same way.
      const stderr = await getAndCompare(s.link, fixture, 'big.bin', ['--ice-policy', 'relay']);
      assert(/connected to the sharer through a TURN relay \(relay to /.test(stderr), `linkfs get --ice-policy relay should say it went through the TURN relay:\n${stderr}`);
      assert(/ALLOCATE processed, success/.test(turn.log()), 'coturn logged no successful allocation');

      // coturn itself: fresh credentials from the secret work, expired or forged ones do not.
      const now = Math.floor(Date.now() / 1000);
      const fresh = turnCredentials(secret, now + 600, 'probe');
      const expired = turnCredentials(secret, now - 60, 'probe');
      assert(await allocates(turn, fresh.user, fresh.password), 'coturn refused fresh credentials made with its secret');
      assert(!(await allocates(turn, expired.user, expired.password)), 'coturn accepted expired credentials');
      assert(!(await allocates(turn, fresh.user, `${fresh.password.slice(0, -4)}AAA=`)), 'coturn accepted a forged password');
      assert(!(await allocates(turn, fresh.user, turnCredentials('not-the-secret', now + 600, 'probe').password)), 'coturn accepted credentials made with another secret');
    },
  },
  {
    name: 'c: three relays and Redis: members on different relays, a relay killed, Redis down and back',
    timeoutMs: 240_000,
    async run(t) {
      const redis = await startRedis();
      t.defer(() => redis.stop());
      const relays: RelayProcess[] = [];
      for (let i = 0; i < 3; i += 1) {
        const r = await startRelay({ args: ['--redis', redis.url] });
        t.defer(() => r.stop());
        t.onFailure(() => log(`    relay ${i + 1} stderr tail:\n${r.process.stderrTail()}`));
        relays.push(r);
      }
      const work = await mkdtemp(path.join(scratchDir, 'reach-lb-'));
      t.defer(() => rm(work, { recursive: true, force: true }));
      const lb = await startHaproxy(work, relays.map((r) => r.url));
      t.defer(() => lb.stop());
      const fixture = await makeSmallFixture();
      t.defer(() => fixture.remove());

      // The sharer reaches the fleet through the load balancer (relay 1: "first").
      const s = await share(t, fixture.dir, ['--relay', lb.url, '--no-qr']);
      const [r1, r2, r3] = relays as [RelayProcess, RelayProcess, RelayProcess];
      const { page } = await browser(t, 'on-relay-2');
      await openLink(page, at(r2.url, s.link), ['connected'], 30_000);
      await readAndCompare(page, fixture, 'random.bin');
      await getAndCompare(at(r3.url, s.link), fixture, 'docs/readme.txt');
      const forwarded = await metric(r1.url, 'linkfs_relay_fleet_received_total');
      assert(forwarded > 0, 'relay 1 (the sharer\'s) received nothing from the other relays');

      // The sharer's relay dies: the sharer reconnects through the balancer to another
      // and takes its room back; a new visitor on relay 3 reaches it.
      r1.process.child.kill('SIGKILL');
      const back = performance.now();
      await eventually(45_000, 'a visitor on relay 3 after relay 1 died', async () => {
        const ls = await linkfs(['ls', at(r3.url, s.link)], 20_000);
        return ls.code === 0 && ls.stdout.includes('random.bin');
      });
      log(`    a new visitor connected ${((performance.now() - back) / 1000).toFixed(1)} s after the sharer's relay died`);

      // Redis stops: the relays say they are not ready; it comes back on the same port:
      // they are ready again and serve new visitors, without a restart.
      await redis.stop();
      await eventually(10_000, '/healthz 503 on relays 2 and 3 without Redis', async () => (await health(r2.url)) === 503 && (await health(r3.url)) === 503);
      const text = await (await fetch(`${r2.url}/healthz`)).text();
      assert(/cannot reach Redis/.test(text), `/healthz should say why: ${text}`);
      const again = await startRedis(redis.port);
      t.defer(() => again.stop());
      await eventually(15_000, '/healthz 200 once Redis is back', async () => (await health(r2.url)) === 200 && (await health(r3.url)) === 200);
      await eventually(30_000, 'a visitor on relay 3 after Redis came back', async () => {
        const ls = await linkfs(['ls', at(r3.url, s.link)], 20_000);
        return ls.code === 0 && ls.stdout.includes('random.bin');
      });
    },
  },
  {
    name: 'e: at a distance (20 ms, 0.1% loss) the page opens lanes and a download arrives whole',
    timeoutMs: 240_000,
    async run(t) {
      const wan = await openWanLine({ delayMs: 10, rateMbit: 200, lossPct: 0.1 }, 'reach-e');
      t.defer(async () => log(`    the line carried ${(await wan.close()) ?? '(no counts)'}`));
      const fixture = await makeBigFileFixture(48 << 20);
      t.defer(() => fixture.remove());
      const s = await startShare(fixture.dir, { netns: wan.near, args: ['--no-qr', '--bind', `${NEAR_ADDR}:0`] });
      t.defer(() => s.kill());
      t.onFailure(() => log(`    sharer stderr tail:\n${s.process.stderrTail().replace(/^/gm, '      ')}`));
      const out = await mkdtemp(path.join(scratchDir, 'reach-e-'));
      t.defer(() => rm(out, { recursive: true, force: true }));
      // The browser on the far side, through the page's own save path.
      const tsx = path.join(repoRoot, 'node_modules', '.bin', 'tsx');
      const [cmd, args] = inNs(wan.far, 'env', [`LINK=${s.link}`, tsx, path.join(repoRoot, 'tests-e2e', 'download.ts'), 'big.bin', '--out', path.join(out, 'big.bin')]);
      const dl = spawnTracked('download', cmd, args);
      const exit = await exitWithin(dl, 200_000);
      if (exit === null) await killHard(dl);
      const result = JSON.parse(dl.stdout.at(-1) ?? '{}') as { sha256?: string; mb_per_s?: number; lanes?: number; error?: string | null };
      assert(exit?.code === 0 && !result.error, `the download through the page failed: ${result.error ?? `exit ${JSON.stringify(exit)}`}\n${dl.stderrTail()}`);
      const want = createHash('sha256').update(await readFile(path.join(fixture.dir, 'big.bin'))).digest('hex');
      assert(result.sha256 === want, `the saved file's SHA-256 is ${String(result.sha256)}, the shared file's ${want}`);
      assert((result.lanes ?? 0) >= 1, `the page showed no lanes beside its link at 20 ms with 0.1% loss (${JSON.stringify(result)})`);
      log(`    saved 48 MiB at ${String(result.mb_per_s)} MB/s over ${String((result.lanes ?? 0) + 1)} connections`);
    },
  },
  {
    name: "e2: at a distance (20 ms, 0.1% loss) the page's upload opens lanes and the file lands whole",
    timeoutMs: 240_000,
    async run(t) {
      const wan = await openWanLine({ delayMs: 10, rateMbit: 200, lossPct: 0.1 }, 'reach-e2');
      t.defer(async () => log(`    the line carried ${(await wan.close()) ?? '(no counts)'}`));
      const fixture = await makeBigFileFixture(48 << 20);
      t.defer(() => fixture.remove());
      const s = await startShare(fixture.dir, { netns: wan.near, args: ['--no-qr', '--allow-upload', '--bind', `${NEAR_ADDR}:0`] });
      t.defer(() => s.kill());
      t.onFailure(() => log(`    sharer stderr tail:\n${s.process.stderrTail().replace(/^/gm, '      ')}`));
      // Chromium on the far side adds the file through the page (and saves it back).
      const tsx = path.join(repoRoot, 'node_modules', '.bin', 'tsx');
      const file = path.join(fixture.dir, 'big.bin');
      const [cmd, args] = inNs(wan.far, 'env', [`LINK=${s.link}`, `UPLOAD_FILE=${file}`, tsx, path.join(repoRoot, 'tests-e2e', 'upload-bench.ts')]);
      const up = spawnTracked('upload', cmd, args);
      const exit = await exitWithin(up, 200_000);
      if (exit === null) await killHard(up);
      const result = JSON.parse(up.stdout.at(-1) ?? '{}') as { landed?: string; mb_per_s?: number | null; lanes?: number; error?: string | null };
      assert(exit?.code === 0 && !result.error, `the upload through the page failed: ${result.error ?? `exit ${JSON.stringify(exit)}`}\n${up.stderrTail()}`);
      const landed = path.join(fixture.dir, result.landed ?? '');
      assert(landed !== file, `the upload landed on the shared file itself (${JSON.stringify(result)})`);
      assert((await sha256File(landed)) === (await sha256File(file)), `what landed (${String(result.landed)}) differs from the file added`);
      assert((result.lanes ?? 0) >= 1, `the page showed no lanes beside its link while it added 48 MiB at 20 ms with 0.1% loss (${JSON.stringify(result)})`);
      log(`    added 48 MiB at ${String(result.mb_per_s)} MB/s over ${String((result.lanes ?? 0) + 1)} connections`);
    },
  },
  {
    name: 'd: IPv6: the link names an IPv6 address and a visitor on IPv6 alone connects directly',
    async run(t) {
      // A unique-local address and a default route on the namespace's veth (nothing leaves:
      // the route leads to the veth's other end, in the same namespace).
      for (const args of [['-6', 'addr', 'add', 'fd77::1/64', 'dev', 'lfs0', 'nodad'], ['-6', 'route', 'add', 'default', 'dev', 'lfs0']]) {
        const r = spawnSync('ip', args, { encoding: 'utf8' });
        assert(r.status === 0 || /exists/.test(r.stderr), `ip ${args.join(' ')}: ${r.stderr}`);
      }
      const fixture = await makeSmallFixture();
      t.defer(() => fixture.remove());
      const port = await freePort();
      const s = await share(t, fixture.dir, ['--bind', `[::]:${port}`, '--no-qr']);
      assert(new URL(s.link).hostname === '[fd77::1]', `the link ${s.link} should name [fd77::1], the IPv6 default route's address`);
      const ls = await linkfs(['ls', s.link, '--webrtc-bind', '[fd77::1]:0']);
      assert(ls.code === 0 && ls.stdout.includes('random.bin'), `linkfs ls over IPv6 exited ${String(ls.code)}:\n${ls.stderr}`);
      assert(/connected to the sharer directly/.test(ls.stderr), `a visitor bound to IPv6 alone should connect directly:\n${ls.stderr}`);
    },
  },
];

async function health(url: string): Promise<number> {
  try {
    return (await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2_000) })).status;
  } catch {
    return 0;
  }
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? Number.NaN : Number(line.split(' ')[1]);
}

/** Tries `check` until it holds, within `ms`. */
async function eventually(ms: number, what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = performance.now() + ms;
  while (performance.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`${what}: not within ${ms / 1000} s`);
}

await runSuite('reach', tests);

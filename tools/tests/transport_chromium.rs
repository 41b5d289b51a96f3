//! The native transport against the real browser: Chromium (driven by playwright-core)
//! opens the linkfs channel to `linkfs-bench-channel --stdio-answerer` and receives
//! 3 x 64 MiB through a `DataLink`. Ignored by default (it needs Node, playwright-core
//! in the workspace's `node_modules` and `/usr/bin/chromium`); run it inside a private
//! network namespace with a veth pair and a default route (`tests-e2e/run exec`):
//!
//! ```text
//! cargo test -p linkfs-tools --test transport_chromium -- --ignored --nocapture
//! ```
//!
//! It prints the bench's JSON figures (MB/s per run, UDP receive drops). For figures
//! from an optimised build, run the driver script this test writes
//! (`$TMPDIR/linkfs-transport-chromium.mjs MIB RUNS [bench options]`) with
//! `LINKFS_BENCH_BIN` pointing at the release binary.

use std::path::PathBuf;
use std::process::Command;

/// The browser side: an offerer with the linkfs channel, candidates queued until the
/// answer is set, one confirmation message per `MIB` MiB received.
const DRIVER: &str = r#"
import { createRequire } from 'node:module';
import { spawn } from 'node:child_process';
import readline from 'node:readline';
const require = createRequire(process.env.LINKFS_NODE_ROOT + '/package.json');
const { chromium } = require('playwright-core');
const [mib, runs, ...extra] = process.argv.slice(2);
const total = Number(mib) * 1024 * 1024;
const bench = spawn(process.env.LINKFS_BENCH_BIN,
  ['--stdio-answerer', '--mib', mib, '--runs', runs, ...extra], { stdio: ['pipe', 'pipe', 'inherit'] });
const browser = await chromium.launch({ executablePath: process.env.LINKFS_CHROMIUM || '/usr/bin/chromium',
  headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-features=WebRtcHideLocalIpsWithMdns'] });
const page = await browser.newPage();
await page.exposeFunction('toNative', (line) => bench.stdin.write(line + '\n'));
let result = null;
readline.createInterface({ input: bench.stdout }).on('line', async (line) => {
  const msg = JSON.parse(line);
  if (msg.bench) { result = line; return; }
  await page.evaluate((m) => window.fromNative(m), msg);
});
await page.evaluate(async ({ total }) => {
  const pc = new RTCPeerConnection();
  const dc = pc.createDataChannel('linkfs/1', { ordered: true });
  dc.binaryType = 'arraybuffer';
  let got = 0, runs = 0;
  dc.onmessage = (e) => {
    got += e.data.byteLength;
    if (got >= total) { got -= total; runs++; dc.send(new Uint8Array([runs])); }
  };
  const early = []; let answered = false;
  pc.onicecandidate = (e) => {
    if (e.candidate && e.candidate.candidate) window.toNative(JSON.stringify({ type: 'candidate',
      candidate: e.candidate.candidate, sdpMid: e.candidate.sdpMid, sdpMLineIndex: e.candidate.sdpMLineIndex }));
  };
  window.fromNative = async (m) => {
    if (m.type === 'answer') {
      await pc.setRemoteDescription({ type: 'answer', sdp: m.sdp });
      answered = true;
      for (const c of early) await pc.addIceCandidate(c);
    } else if (m.type === 'candidate') {
      const c = { candidate: m.candidate, sdpMid: m.sdpMid ?? undefined, sdpMLineIndex: m.sdpMLineIndex ?? 0 };
      if (answered) await pc.addIceCandidate(c); else early.push(c);
    }
  };
  const offer = await pc.createOffer();
  await pc.setLocalDescription(offer);
  window.toNative(JSON.stringify({ type: 'offer', sdp: offer.sdp }));
}, { total });
const started = Date.now();
while (!result && Date.now() - started < 240000) await new Promise((r) => setTimeout(r, 100));
console.log(result ?? '{"error":"no figures within 240 s"}');
await browser.close();
bench.kill();
process.exit(result ? 0 : 1);
"#;

#[test]
#[ignore = "needs Node, playwright-core and Chromium, inside a network namespace"]
fn chromium_receives_three_times_64_mib_through_a_data_link() {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the peer crate lives in the workspace")
        .to_path_buf();
    let script = std::env::temp_dir().join("linkfs-transport-chromium.mjs");
    std::fs::write(&script, DRIVER).expect("writing the driver script");
    let bench = std::env::var("LINKFS_BENCH_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_linkfs-bench-channel").to_owned());
    let output = Command::new("node")
        .arg(&script)
        .args(["64", "3", "--timeout-s", "60"])
        .env("LINKFS_NODE_ROOT", &workspace)
        .env("LINKFS_BENCH_BIN", &bench)
        .output()
        .expect("running node (is it installed?)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the Chromium run failed:\n{stdout}\n{stderr}"
    );
    let figures = stdout
        .lines()
        .rev()
        .find(|line| line.starts_with('{'))
        .expect("the bench's figures line");
    println!("{figures}");
    let figures: serde_json::Value = serde_json::from_str(figures).expect("JSON figures");
    let runs = figures["mb_per_s"].as_array().expect("mb_per_s");
    assert_eq!(runs.len(), 3, "{figures}");
    assert!(runs.iter().all(|r| r.as_f64().is_some_and(|mb| mb > 0.0)));
}

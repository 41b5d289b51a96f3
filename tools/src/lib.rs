//! linkfs's measuring and test tools, kept out of the product crate. Each is a
//! binary that prints JSON figures (or makes a tree) and is run by the commands
//! `docs/benchmarks.md` gives:
//!
//! - `linkfs-gen-tree`: a realistic generated tree of N files (the scale tests).
//! - `linkfs-bench-walk`: the share walk against `find`.
//! - `linkfs-bench-index`: walk -> sender -> receiver in one process (bytes per entry).
//! - `linkfs-bench-channel`: the raw data channel, native <-> native or toward a browser.
//! - `linkfs-bench-mount`: the native receiver's figures (`ls -l`, stat, first byte,
//!   sequential reads) on a real share and a real mount.
//! - `linkfs-bench-mount-scale`: the mount against the disk on a big tree made before
//!   (`find`, `ls -f` of the biggest folder, lookups, first bytes and live changes in
//!   it against small folders, memory per entry).
//! - `linkfs-sctp-sim`: two real SCTP associations (webrtc-rs's, the copy patched
//!   under `third_party/`) on a simulated path in virtual time ([`sctp_line`]):
//!   the loss-recovery figures no real path can repeat exactly.
//!
//! What the benches driving real processes share is in [`bench`]. They use the native peer (`linkfs-peer`) as a library, and find `linkfs` beside
//! themselves in the target directory.

pub mod bench;
pub mod sctp_line;

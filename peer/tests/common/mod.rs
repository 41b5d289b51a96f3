//! Shared by the peer's integration tests.

#![allow(dead_code)]

use std::path::PathBuf;

pub mod sharing;

/// A binary of the `linkfs-tools` crate (e.g. `linkfs-gen-tree`), from the same
/// target directory as this test. `cargo test --workspace` builds them (the tools
/// crate has integration tests); alone, `cargo build -p linkfs-tools` does.
pub fn tool(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    // target/<profile>/deps/<test> -> target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test runs from target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is not built: run `cargo build -p linkfs-tools` with this profile (cargo test --workspace builds it)",
        path.display()
    );
    path
}

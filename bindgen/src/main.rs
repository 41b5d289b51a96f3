//! `linkfs-bindgen INPUT.wasm OUT_DIR`: core-wasm's JavaScript glue and
//! TypeScript declarations, as `wasm-bindgen --target web --out-dir OUT_DIR
//! INPUT.wasm` writes them (byte for byte: the same library at the same
//! version, with the same options).
//!
//! Why not the `wasm-bindgen` command: `cargo install wasm-bindgen-cli` builds
//! its test runner too (an HTTP server, TLS, compression), 2m50s of a fresh
//! machine's two cores; this builds only the generator, beside the workspace's
//! own dependencies, and its version comes from Cargo.lock, so it can never
//! differ from core-wasm's `wasm-bindgen` (scripts/build-wasm checks both).

use anyhow::{Context, bail};

fn main() -> anyhow::Result<()> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let [input, out_dir] = args.as_slice() else {
        bail!("usage: linkfs-bindgen INPUT.wasm OUT_DIR");
    };
    let mut bindgen = wasm_bindgen_cli_support::Bindgen::new();
    bindgen
        .input_path(input)
        .web(true)?
        .demangle(true)
        .typescript(true)
        .omit_default_module_path(false);
    bindgen
        .generate(out_dir)
        .with_context(|| format!("generating the glue for {}", input.to_string_lossy()))
}

//! Command-line glue: argument parsing, logging, signals, exit codes.

mod share;
mod visit;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Share a folder as a link; anyone with the link browses it in a browser.
#[derive(Debug, Parser)]
#[command(name = "linkfs", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Share a folder: prints a link (first line on stdout) and a QR code, then
    /// serves visitors until Ctrl-C.
    Share(share::ShareArgs),
    /// Mount a share read-only with FUSE (listings and stat from the local index,
    /// reads on demand, verified) until Ctrl-C or the sharer stops.
    Mount(visit::MountArgs),
    /// List a folder of a share (from the local index).
    Ls(visit::LsArgs),
    /// Download a file or folder of a share, verified and resumable.
    Get(visit::GetArgs),
}

/// Default log filter: our warnings; webrtc-rs's routine ICE/DTLS chatter only when it is an error.
const QUIET_LOGS: &str =
    "warn,rtc=error,rtc_ice=error,rtc_dtls=error,rtc_sctp=error,rtc_datachannel=error,webrtc=error";

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("LINKFS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(QUIET_LOGS));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("linkfs: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Share(args) => share::run(args).await,
            Command::Mount(args) => visit::mount(args).await,
            Command::Ls(args) => visit::ls(args).await,
            Command::Get(args) => visit::get_cmd(args).await,
        }
    });
    // Visitors' tasks may still be winding down; don't wait for them.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("linkfs: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

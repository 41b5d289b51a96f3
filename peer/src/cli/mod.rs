//! Command-line glue: argument parsing, logging, signals, exit codes.

mod desk;
mod link_args;
mod share;
mod sizes;
mod stop;
mod visit;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit codes, as `--help` lists them.
pub mod exit {
    /// Done.
    pub const OK: u8 = 0;
    /// Something failed; the message says what.
    pub const FAILURE: u8 = 1;
    /// The command line is not valid (clap's code).
    pub const USAGE: u8 = 2;
    /// The sharer stopped sharing, or no one shares at this link any more.
    pub const SHARER_GONE: u8 = 3;
    /// This link is not valid (malformed, or its secret does not match the share).
    pub const INVALID_LINK: u8 = 4;
    /// The relay or the sharer could not be reached, or the connection was lost.
    pub const UNREACHABLE: u8 = 5;
    /// The sharer withdrew this link (or sent this visitor away), or its time ran out.
    pub const LINK_ENDED: u8 = 6;
    /// The link's password is wrong or was not given (or too many wrong ones were, lately).
    pub const PASSWORD: u8 = 7;
}

const EXIT_CODES: &str = "Exit codes:
  0  done
  1  failure (the message says what)
  2  the command line is not valid
  3  the sharer stopped sharing, or no one shares at this link any more
  4  this link is not valid (malformed, or its secret does not match the share)
  5  the relay or the sharer could not be reached, or the connection was lost
  6  the sharer withdrew this link (or disconnected you), or its time ran out
  7  the link's password is wrong or was not given";

/// Share a folder as a link; anyone with the link browses it in a browser.
#[derive(Debug, Parser)]
#[command(name = "linkfs", version, about, long_about = None, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Share a folder: prints a link (first line on stdout) and a QR code, then
    /// serves visitors until Ctrl-C.
    #[command(
        after_help = "Signals: Ctrl-C (SIGINT) or SIGTERM stop sharing; visitors are told.
SIGUSR1 drops every visitor's connection as a network failure would: they reconnect
and resume where they were (a way to see that reconnecting works)."
    )]
    Share(Box<share::ShareArgs>),
    /// Mount a share read-only with FUSE (listings and stat from the local index,
    /// reads on demand, verified) until Ctrl-C or the sharer stops.
    #[command(after_help = EXIT_CODES)]
    Mount(visit::MountArgs),
    /// List a folder of a share (from the local index).
    #[command(after_help = EXIT_CODES)]
    Ls(visit::LsArgs),
    /// Download a file or folder of a share, verified and resumable.
    #[command(after_help = EXIT_CODES)]
    Get(visit::GetArgs),
    /// Add files and folders to a share, through a link that takes them
    /// (verified, resumable; nothing is ever replaced: a taken name gets " (2)").
    #[command(after_help = EXIT_CODES)]
    Put(visit::PutArgs),
    /// A running share's links: list them, add one (its own secret, label and
    /// expiry), withdraw one (its visitors are disconnected at once).
    #[command(subcommand)]
    Link(desk::LinkCommand),
    /// The visitors of a running share now (which link, since when).
    Visitors(desk::VisitorsArgs),
    /// Disconnect one visitor of a running share (its number in `linkfs visitors`).
    Kick(desk::KickArgs),
}

/// Default log filter: our warnings; webrtc-rs's routine ICE/DTLS chatter only when it is an error.
/// Its TURN client's refused permissions are routine too: a TURN server refuses
/// to relay to the other side's loopback candidate (127.0.0.1, offered for
/// visitors on the same host), and the pair that works is used (`LINKFS_LOG=debug`
/// shows them).
const QUIET_LOGS: &str = "warn,rtc=error,rtc_ice=error,rtc_dtls=error,rtc_sctp=error,rtc_datachannel=error,webrtc=error,webrtc::peer_connection::transport::turn_relayer=off";

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            });
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("LINKFS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(QUIET_LOGS));
    linkfs_process::log_output(filter);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("linkfs: cannot start: {e}");
            return ExitCode::from(exit::FAILURE);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Share(args) => share::run(*args).await,
            Command::Mount(args) => visit::mount(args).await,
            Command::Ls(args) => visit::ls(args).await,
            Command::Get(args) => visit::get_cmd(args).await,
            Command::Put(args) => visit::put_cmd(args).await,
            Command::Link(cmd) => desk::link(cmd).await,
            Command::Visitors(args) => desk::visitors(args).await,
            Command::Kick(args) => desk::kick(args).await,
        }
    });
    // Visitors' tasks may still be winding down; don't wait for them.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    match result {
        Ok(()) => ExitCode::from(exit::OK),
        Err(e) => {
            // Errors may carry a sharer's words (a goodbye, a refusal): escaped.
            eprintln!(
                "linkfs: error: {}",
                linkfs_peer::terminal::escaped(&linkfs_peer::terminal::causes_once(
                    e.chain().map(ToString::to_string)
                ))
            );
            ExitCode::from(exit_code(&e))
        }
    }
}

/// The exit code for an error: the kind of the first typed failure in its chain.
fn exit_code(e: &anyhow::Error) -> u8 {
    use linkfs_core::FailureKind;
    let kind = e.chain().find_map(|cause| {
        if let Some(v) = cause.downcast_ref::<linkfs_peer::visit::VisitError>() {
            Some(v.kind())
        } else {
            cause
                .downcast_ref::<linkfs_core::EndReason>()
                .map(linkfs_core::EndReason::kind)
        }
    });
    match kind {
        Some(FailureKind::SharerGone) => exit::SHARER_GONE,
        Some(FailureKind::InvalidLink) => exit::INVALID_LINK,
        Some(FailureKind::Unreachable) => exit::UNREACHABLE,
        Some(FailureKind::LinkEnded) => exit::LINK_ENDED,
        Some(FailureKind::PasswordRefused) => exit::PASSWORD,
        _ => exit::FAILURE,
    }
}

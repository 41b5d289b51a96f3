//! What every linkfs program does as it starts, written once: `linkfs`, the
//! `linkfs-relay` binary and the benchmarks that serve many connections.
//!
//! - [`raise_open_file_limit`]: every socket and every open file is a
//!   descriptor. A desktop's soft limit is often 1,024, far below what a relay
//!   (embedded in `linkfs share` or on its own) or a sharer with many visitors
//!   holds; the hard limit is usually much higher, and a process may raise its
//!   soft limit up to it without privileges. Raising it is what `nginx`,
//!   `systemd` services and most servers do.
//! - [`log_output`]: log lines for `tracing-subscriber`'s formatter, in colour
//!   only where a person reads them: on a terminal, and not when `NO_COLOR` is
//!   set (<https://no-color.org>). A file or a pipe gets plain text.

use std::io::IsTerminal;

/// The soft limit on open files after [`raise_open_file_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFileLimit {
    /// The soft limit before.
    pub was: u64,
    /// The soft limit now (the hard one, unless raising failed).
    pub now: u64,
}

/// Raises this process's soft limit on open files to its hard limit, and says
/// what it is now. Never fails: where the limit cannot be read or raised, it
/// reports the limit as it stands (`u64::MAX` when it cannot be read at all).
pub fn raise_open_file_limit() -> OpenFileLimit {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return OpenFileLimit {
            was: u64::MAX,
            now: u64::MAX,
        };
    };
    if soft < hard {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    let now = getrlimit(Resource::RLIMIT_NOFILE).map_or(soft, |(s, _)| s);
    OpenFileLimit { was: soft, now }
}

/// This process's soft limit on open files now (`u64::MAX` if unknown).
pub fn open_file_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit};
    getrlimit(Resource::RLIMIT_NOFILE).map_or(u64::MAX, |(soft, _)| soft)
}

/// Whether log lines on standard error should carry colour: only on a
/// terminal, and never with `NO_COLOR` set to anything but the empty string.
pub fn colour_on_stderr() -> bool {
    colour_wanted(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

fn colour_wanted(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Starts logging to standard error with `filter`, in colour only where
/// [`colour_on_stderr`] says so. Call once, first thing.
pub fn log_output(filter: tracing_subscriber::EnvFilter) {
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour_on_stderr())
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour_wanted(true, None));
        assert!(!colour_wanted(false, None), "a file or a pipe");
        assert!(!colour_wanted(true, Some(OsStr::new("1"))));
        // no-color.org: set and not empty.
        assert!(colour_wanted(true, Some(OsStr::new(""))));
    }

    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        use nix::sys::resource::{Resource, getrlimit};
        let limit = raise_open_file_limit();
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        assert_eq!((limit.now, soft), (hard, hard));
        assert!(limit.was <= limit.now);
    }
}

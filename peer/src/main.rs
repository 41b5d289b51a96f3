//! `linkfs`: share a folder as a link; browse or mount someone's share.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}

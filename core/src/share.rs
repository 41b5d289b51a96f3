//! The sharing side of a share, sans IO (the peer of [`crate::visit::Visit`]).
//!
//! - [`links`]: a share's links besides its main one, their rights, expiry
//!   and end, kept across runs.

pub mod links;

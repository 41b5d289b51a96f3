//! placeholder
pub mod transport;

//! placeholder
pub mod transport;
pub mod walk;

//! Decode errors. Every one names the byte offset where decoding stopped, so a
//! log line from a misbehaving peer says what was wrong and where.

/// Why bytes from the other side could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("message is empty")]
    Empty,
    #[error("message ends early: wanted {wanted} more byte(s) at offset {at}")]
    Truncated { at: usize, wanted: usize },
    #[error("varint at offset {at} is longer than 64 bits")]
    VarintOverflow { at: usize },
    #[error("{what} at offset {at} is out of range")]
    OutOfRange { at: usize, what: &'static str },
    #[error("text at offset {at} is not valid UTF-8")]
    BadUtf8 { at: usize },
    #[error("{count} unexpected byte(s) after the end of the message at offset {at}")]
    TrailingBytes { at: usize, count: usize },
    #[error("message of {len} bytes is over the {max}-byte limit")]
    TooLarge { len: usize, max: usize },
    #[error("frame type 0x{kind:02x} is not valid in this direction")]
    WrongDirection { kind: u8 },
    #[error("invalid {what} at offset {at}")]
    Invalid { at: usize, what: &'static str },
}

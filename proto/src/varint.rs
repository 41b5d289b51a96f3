//! LEB128 varints, zigzag signed integers and a bounds-checked reader.
//!
//! Every decoder in this crate reads through [`Reader`], which never panics and
//! never allocates more than the input it was given: a length prefix larger than
//! what is left of the input is an error, not an allocation.

use crate::DecodeError;

/// Appends `v` as an unsigned LEB128 varint (1 to 10 bytes).
pub fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zigzag-encoded (small magnitudes of either sign stay short).
pub fn put_ivarint(out: &mut Vec<u8>, v: i64) {
    put_uvarint(out, zigzag(v));
}

/// Number of bytes [`put_uvarint`] writes for `v`.
pub fn uvarint_len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Maps signed to unsigned so that -1 -> 1, 1 -> 2, -2 -> 3 ...
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A cursor over received bytes. All reads are bounds-checked.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Offset of the next byte, for error messages.
    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        let b = *self.buf.get(self.pos).ok_or(DecodeError::Truncated {
            at: self.pos,
            wanted: 1,
        })?;
        self.pos += 1;
        Ok(b)
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated {
                at: self.pos,
                wanted: n,
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let s = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// The rest of the input.
    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    pub fn uvarint(&mut self) -> Result<u64, DecodeError> {
        let start = self.pos;
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = self.u8()?;
            let part = u64::from(b & 0x7f);
            if i == 9 && b > 1 {
                return Err(DecodeError::VarintOverflow { at: start });
            }
            v |= part << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::VarintOverflow { at: start })
    }

    pub fn ivarint(&mut self) -> Result<i64, DecodeError> {
        Ok(unzigzag(self.uvarint()?))
    }

    /// A varint that must fit in `u32`.
    pub fn u32varint(&mut self) -> Result<u32, DecodeError> {
        let at = self.pos;
        let v = self.uvarint()?;
        u32::try_from(v).map_err(|_| DecodeError::OutOfRange {
            at,
            what: "32-bit value",
        })
    }

    /// A varint length, checked against what is left of the input.
    pub fn len_prefix(&mut self) -> Result<usize, DecodeError> {
        let at = self.pos;
        let v = self.uvarint()?;
        if v > self.remaining() as u64 {
            return Err(DecodeError::Truncated {
                at,
                wanted: usize::try_from(v).unwrap_or(usize::MAX),
            });
        }
        // Checked above against remaining(), which is a usize.
        Ok(v as usize)
    }

    /// A length-prefixed byte string.
    pub fn byte_string(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.len_prefix()?;
        self.bytes(n)
    }

    /// A length-prefixed UTF-8 string.
    pub fn string(&mut self) -> Result<String, DecodeError> {
        let at = self.pos;
        let b = self.byte_string()?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| DecodeError::BadUtf8 { at })
    }

    /// Fails unless every byte was consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes {
                at: self.pos,
                count: self.remaining(),
            })
        }
    }
}

/// Appends a length-prefixed byte string.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_uvarint(out, b.len() as u64);
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_vectors() {
        let cases: &[(u64, &[u8])] = &[
            (0, &[0x00]),
            (1, &[0x01]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (
                u64::MAX,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ];
        for (v, bytes) in cases {
            let mut out = Vec::new();
            put_uvarint(&mut out, *v);
            assert_eq!(&out[..], *bytes, "encoding {v}");
            assert_eq!(uvarint_len(*v), bytes.len());
            let mut r = Reader::new(bytes);
            assert_eq!(r.uvarint().unwrap(), *v);
            assert!(r.is_empty());
        }
    }

    #[test]
    fn zigzag_vectors() {
        for (v, z) in [
            (0i64, 0u64),
            (-1, 1),
            (1, 2),
            (-2, 3),
            (i64::MAX, u64::MAX - 1),
            (i64::MIN, u64::MAX),
        ] {
            assert_eq!(zigzag(v), z);
            assert_eq!(unzigzag(z), v);
        }
    }

    #[test]
    fn overlong_varint_is_an_error_not_a_panic() {
        let bytes = [0xffu8; 11];
        assert!(matches!(
            Reader::new(&bytes).uvarint(),
            Err(DecodeError::VarintOverflow { at: 0 })
        ));
        // Tenth byte may only carry the top bit of a u64.
        let bytes = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert!(Reader::new(&bytes).uvarint().is_err());
    }

    #[test]
    fn length_prefix_longer_than_input_is_truncated() {
        let bytes = [0x05, b'a', b'b'];
        assert!(matches!(
            Reader::new(&bytes).byte_string(),
            Err(DecodeError::Truncated { at: 0, wanted: 5 })
        ));
    }
}

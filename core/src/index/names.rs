//! Entry names: bytes in a paged arena, compressed with a symbol table the
//! index learns from its own names once it holds [`LEARN_AT`] entries.
//!
//! Names are the biggest part of a big index (21 of 36 bytes an entry on a
//! generated tree of ten million). They compress well one at a time, which
//! a listing, a lookup and a search need (no block to unpack to read one
//! name): FSST, "Fast Static Symbol Tables" (Boncz, Neumann, Leis, VLDB
//! 2020), learns up to 255 symbols of 1-8 bytes from a sample and codes each
//! name as a byte per symbol, or an escape and the byte itself. Measured on
//! a million generated names 21.0 -> 13.7 bytes, on `/usr` 19.1 -> 9.7-14.1.
//! The `fsst-rs` crate (SpiralDB's, maintained with the Vortex file format)
//! learns the table and compresses; reading is this module's own short loop,
//! bounds-checked, because a stored snapshot's bytes reach it.
//!
//! | state | names held | when |
//! | --- | --- | --- |
//! | raw | as they are | fewer than [`LEARN_AT`] entries so far |
//! | learned | coded, each on its own | from then on; the table never changes |
//!
//! The switch is one step (`Index::learn_names`): the table is learned from
//! the names present, and every name is coded again into a new arena.
//! After it, a name is held as it is (the caller marks it long) when its code
//! would be longer than the name or than [`NAME_LEN_BIG`] bytes, or the name
//! is longer than [`INLINE_NAME`]: coding never costs more than the name.
//! A table learned from the first names fits later ones less well, never
//! wrongly (any byte can be escaped).

use std::fmt;
use std::ops::Deref;

use fsst::{Compressor, Symbol};

/// Bytes per name-arena page (a name never spans pages).
pub(super) const NAME_PAGE: usize = 64 * 1024;
/// In [`NameArena::push_run`]'s lengths: no value in this slot.
pub(super) const ABSENT: u32 = u32::MAX;
/// Entries present when the index learns its symbol table: 65,536. Smaller
/// indexes keep names as they are (they are small anyway); the learning
/// itself reads FSST's sample of 16 KiB of names and takes about 2 ms.
pub const LEARN_AT: usize = 65_536;
/// The longest name kept coded (longer ones, rare, are kept as they are).
pub const INLINE_NAME: usize = 255;
/// A name's stored length that means "long: held as it is, its length on the side".
pub(super) const NAME_LEN_BIG: u8 = u8::MAX;
/// The escape code: the next byte stands for itself.
const ESCAPE: u8 = 255;
/// Decoding writes whole 8-byte symbols, so its buffer has 8 bytes of room past a name.
const DECODE_ROOM: usize = INLINE_NAME + 8;
/// A buffer a loop that reads many names decodes each into.
pub(super) type NameBuf = [u8; DECODE_ROOM];

/// A name read from the index: borrowed when held as it is, decoded on the
/// stack when coded. Derefs to its bytes.
#[derive(Clone, Copy)]
pub struct Name<'a>(Repr<'a>);

// The decoded bytes live in the value on purpose: a name read is a copy on
// the stack, never an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy)]
enum Repr<'a> {
    Held(&'a [u8]),
    Decoded { len: u16, bytes: [u8; DECODE_ROOM] },
}

impl<'a> Name<'a> {
    /// A name held as it is.
    pub fn held(bytes: &'a [u8]) -> Self {
        Name(Repr::Held(bytes))
    }

    /// The bytes, for as long as the index is borrowed when the name was
    /// held as it is (a decoded name lives in the value itself).
    pub fn to_vec(&self) -> Vec<u8> {
        self.deref().to_vec()
    }
}

impl Deref for Name<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Held(b) => b,
            Repr::Decoded { len, bytes } => &bytes[..*len as usize],
        }
    }
}

impl AsRef<[u8]> for Name<'_> {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl PartialEq for Name<'_> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Name<'_> {}

impl PartialEq<[u8]> for Name<'_> {
    fn eq(&self, other: &[u8]) -> bool {
        **self == *other
    }
}

impl PartialEq<&[u8]> for Name<'_> {
    fn eq(&self, other: &&[u8]) -> bool {
        **self == **other
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for Name<'_> {
    fn eq(&self, other: &&[u8; N]) -> bool {
        **self == other[..]
    }
}

impl fmt::Debug for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

/// A learned symbol table: FSST's compressor, and the symbols as bytes for
/// this module's decoder.
pub(super) struct SymbolTable {
    compressor: Compressor,
    /// Symbol bytes by code, zero past each symbol's length.
    symbols: [[u8; 8]; 255],
    /// Symbol lengths by code (1-8; 0 past the last symbol).
    lens: [u8; 255],
}

impl fmt::Debug for SymbolTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SymbolTable({} symbols)", self.len())
    }
}

/// Why a stored symbol table cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BadTable(pub &'static str);

/// FSST's lookup table of symbols of 3 bytes and more holds one symbol per
/// hash of its first 3 bytes (`fsst-rs` 0.7 `lossy_pht.rs`: 2,048 slots,
/// `fsst_hash`); a stored table must not put two in one slot, or rebuilding
/// it would panic. A learned table never does (learning skips a colliding
/// symbol); this guards a stored one.
const PHT_SLOTS: u64 = 1 << 11;

fn pht_slot(symbol: &[u8; 8]) -> u64 {
    let prefix = u64::from_le_bytes(*symbol) & 0xFF_FF_FF;
    (prefix.wrapping_mul(2_971_215_073) ^ (prefix >> 15)) & (PHT_SLOTS - 1)
}

impl SymbolTable {
    /// Learns a table from `sample` (none if it learns no symbol).
    pub(super) fn learn(sample: &[&[u8]]) -> Option<Self> {
        let compressor = Compressor::train(&sample.to_vec());
        if compressor.n_symbols() == 0 {
            return None;
        }
        let mut symbols = [[0u8; 8]; 255];
        let mut lens = [0u8; 255];
        for (k, (s, len)) in compressor
            .symbol_table()
            .iter()
            .zip(compressor.symbol_lengths())
            .enumerate()
        {
            let bytes = s.to_u64().to_le_bytes();
            symbols[k][..*len as usize].copy_from_slice(&bytes[..*len as usize]);
            lens[k] = *len;
        }
        Some(SymbolTable {
            compressor,
            symbols,
            lens,
        })
    }

    /// Rebuilds a stored table (see [`write_to`](Self::write_to)), checking
    /// everything FSST's rebuild would otherwise assert, and that no symbol
    /// holds a byte a name cannot (`/`, NUL).
    pub(super) fn from_stored(stored: &[(u8, [u8; 8])]) -> Result<Self, BadTable> {
        if stored.is_empty() || stored.len() > 255 {
            return Err(BadTable("a symbol table of no or too many symbols"));
        }
        let mut symbols = [[0u8; 8]; 255];
        let mut lens = [0u8; 255];
        let mut slots = [false; PHT_SLOTS as usize];
        // FSST's order: symbols of 2, 3, ... 8 bytes, then those of 1 byte.
        let (mut at_least, mut ones) = (2u8, false);
        for (k, (len, bytes)) in stored.iter().enumerate() {
            let len = *len;
            if !(1..=8).contains(&len) {
                return Err(BadTable("a symbol of no or more than 8 bytes"));
            }
            if len == 1 {
                ones = true;
            } else if ones || len < at_least {
                return Err(BadTable("symbols out of FSST's order"));
            } else {
                at_least = len;
            }
            let used = &bytes[..len as usize];
            if used.iter().any(|b| *b == b'/' || *b == 0)
                || bytes[len as usize..].iter().any(|b| *b != 0)
            {
                return Err(BadTable("a symbol holds a byte no name has"));
            }
            if len >= 3 {
                let slot = pht_slot(bytes) as usize;
                if slots[slot] {
                    return Err(BadTable("two symbols FSST cannot tell apart"));
                }
                slots[slot] = true;
            }
            symbols[k] = *bytes;
            lens[k] = len;
        }
        let fsst_symbols: Vec<Symbol> = symbols[..stored.len()]
            .iter()
            .map(Symbol::from_slice)
            .collect();
        let compressor = Compressor::rebuild_from(fsst_symbols, &lens[..stored.len()]);
        Ok(SymbolTable {
            compressor,
            symbols,
            lens,
        })
    }

    /// Symbols in the table.
    pub(super) fn len(&self) -> usize {
        self.compressor.n_symbols()
    }

    /// The table as stored: each symbol's length and its 8 bytes, in code order.
    pub(super) fn stored(&self) -> impl Iterator<Item = (u8, [u8; 8])> + '_ {
        (0..self.len()).map(|k| (self.lens[k], self.symbols[k]))
    }

    fn encode(&self, name: &[u8]) -> Vec<u8> {
        self.compressor.compress(name)
    }

    /// Decodes `code` into `out`; `None` if it is not a whole code or its
    /// name would be longer than [`INLINE_NAME`].
    fn decode_into(&self, code: &[u8], out: &mut [u8; DECODE_ROOM]) -> Option<usize> {
        let (mut at, mut k) = (0usize, 0usize);
        while let Some(&c) = code.get(k) {
            if c == ESCAPE {
                *out.get_mut(at)? = *code.get(k + 1)?;
                at += 1;
                k += 2;
            } else {
                let len = self.lens[c as usize] as usize;
                if len == 0 {
                    return None;
                }
                out.get_mut(at..at + 8)?
                    .copy_from_slice(&self.symbols[c as usize]);
                at += len;
                k += 1;
            }
        }
        (at <= INLINE_NAME).then_some(at)
    }

    /// Whether `code` is whole and decodes to a name an index may hold (what
    /// [`decode_into`](Self::decode_into) and then `name_is_safe` say), read
    /// without decoding: a stored table's symbols hold no `/` or NUL
    /// ([`from_stored`](Self::from_stored) checks), so only an escaped byte
    /// can be one, and only names of one or two bytes can be `.` or `..`.
    fn code_is_safe(&self, code: &[u8]) -> bool {
        let (mut len, mut k) = (0usize, 0usize);
        while let Some(&c) = code.get(k) {
            if c == ESCAPE {
                match code.get(k + 1) {
                    Some(&b) if b != b'/' && b != 0 => {}
                    _ => return false,
                }
                len += 1;
                k += 2;
            } else {
                let l = self.lens[c as usize] as usize;
                if l == 0 {
                    return false;
                }
                len += l;
                k += 1;
            }
        }
        match len {
            0 => false,
            1 | 2 => {
                let mut buf = [0; DECODE_ROOM];
                self.decode_into(code, &mut buf)
                    .is_some_and(|n| super::name_is_safe(&buf[..n]))
            }
            _ => len <= INLINE_NAME,
        }
    }

    /// Heap bytes of FSST's lookup tables (two-byte codes, the hash of longer symbols).
    fn heap_bytes(&self) -> usize {
        65_536 * 2 + PHT_SLOTS as usize * 16
    }
}

/// How a name was stored: its code's length, or held as it is and long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stored {
    /// Below [`NAME_LEN_BIG`] bytes: coded if the arena has a table, else as it is.
    Short(u8),
    /// Held as it is, this many bytes (the caller keeps the length on the side).
    Long(u16),
}

/// Name bytes in pages of [`NAME_PAGE`]; an offset is `page * NAME_PAGE + byte`.
#[derive(Debug, Default)]
pub(super) struct NameArena {
    pub(super) pages: Vec<Vec<u8>>,
    /// Bytes that belong to removed or renamed entries.
    pub(super) dead: usize,
    pub(super) table: Option<Box<SymbolTable>>,
}

impl NameArena {
    /// An empty arena that codes names with `table`.
    pub(super) fn with_table(table: Option<Box<SymbolTable>>) -> Self {
        NameArena {
            table,
            ..NameArena::default()
        }
    }

    /// Stores a name (coded when there is a table and that is shorter).
    pub(super) fn store(&mut self, name: &[u8]) -> (u32, Stored) {
        if let Some(t) = &self.table {
            if name.len() <= INLINE_NAME {
                let code = t.encode(name);
                if code.len() <= name.len() && code.len() < NAME_LEN_BIG as usize {
                    return (self.push(&code), Stored::Short(code.len() as u8));
                }
            }
            return (self.push(name), Stored::Long(name.len() as u16));
        }
        let stored = if name.len() < NAME_LEN_BIG as usize {
            Stored::Short(name.len() as u8)
        } else {
            Stored::Long(name.len() as u16)
        };
        (self.push(name), stored)
    }

    /// Appends stored bytes as they are (a snapshot's, already coded or not).
    pub(super) fn push(&mut self, bytes: &[u8]) -> u32 {
        let fits = self
            .pages
            .last()
            .is_some_and(|p| p.len() + bytes.len() <= NAME_PAGE);
        if !fits {
            self.pages.push(Vec::with_capacity(NAME_PAGE));
        }
        let page = self.pages.len() - 1;
        // Just ensured there is a last page.
        let p = &mut self.pages[page];
        let off = p.len();
        p.extend_from_slice(bytes);
        (page * NAME_PAGE + off) as u32
    }

    /// Appends a run of stored values as they are, in the pages `push` would
    /// put them in, one copy per page rather than one per value: `bytes` is
    /// the values back to back, and `offs` holds each one's length on the way
    /// in and its offset on the way out ([`ABSENT`] slots take no room and
    /// come out 0). The lengths must add up to `bytes.len()`.
    pub(super) fn push_run(&mut self, bytes: &[u8], offs: &mut [u32]) {
        let mut copied = 0; // `bytes` up to here is in the pages
        let mut placed = 0; // and up to here has its offset, in the last page
        for off in offs.iter_mut() {
            if *off == ABSENT {
                *off = 0;
                continue;
            }
            let len = *off as usize;
            let pending = placed - copied;
            let fits = self
                .pages
                .last()
                .is_some_and(|p| p.len() + pending + len <= NAME_PAGE);
            if !fits {
                if let Some(p) = self.pages.last_mut() {
                    p.extend_from_slice(&bytes[copied..placed]);
                }
                copied = placed;
                self.pages.push(Vec::with_capacity(NAME_PAGE));
            }
            let page = self.pages.len() - 1;
            let at = self.pages[page].len() + (placed - copied);
            *off = (page * NAME_PAGE + at) as u32;
            placed += len;
        }
        if let Some(p) = self.pages.last_mut() {
            p.extend_from_slice(&bytes[copied..placed]);
        }
    }

    /// The stored bytes at `off` (a code, or a name held as it is).
    pub(super) fn stored_at(&self, off: u32, len: usize) -> &[u8] {
        let (page, at) = (off as usize / NAME_PAGE, off as usize % NAME_PAGE);
        self.pages
            .get(page)
            .and_then(|p| p.get(at..at + len))
            .unwrap_or(&[])
    }

    /// The name a short stored value stands for (decoded if coded; a code
    /// that does not decode reads as an empty name: it was not stored here).
    pub(super) fn read<'a>(&'a self, stored: &'a [u8]) -> Name<'a> {
        match &self.table {
            None => Name::held(stored),
            Some(t) => {
                let mut name = Name(Repr::Decoded {
                    len: 0,
                    bytes: [0u8; DECODE_ROOM],
                });
                if let Repr::Decoded { len, bytes } = &mut name.0 {
                    *len = t.decode_into(stored, bytes).unwrap_or(0) as u16;
                }
                name
            }
        }
    }

    /// The name a short stored value stands for, decoded into `buf` if
    /// coded (empty for a code that does not decode): for loops that read
    /// many names, with one buffer.
    pub(super) fn read_with<'b>(&'b self, stored: &'b [u8], buf: &'b mut NameBuf) -> &'b [u8] {
        match &self.table {
            None => stored,
            Some(t) => {
                let len = t.decode_into(stored, buf).unwrap_or(0);
                &buf[..len]
            }
        }
    }

    /// Whether a short stored value is a name an index may hold (the checks
    /// of `name_is_safe`, and for a code that it decodes within
    /// [`INLINE_NAME`]), for a snapshot being restored.
    pub(super) fn short_is_safe(&self, stored: &[u8], root: bool, buf: &mut NameBuf) -> bool {
        match &self.table {
            None => root || super::name_is_safe(stored),
            Some(t) if root => t.decode_into(stored, buf).is_some(),
            Some(t) => t.code_is_safe(stored),
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.pages.iter().map(Vec::capacity).sum::<usize>()
            + self.pages.capacity() * 24
            + self.table.as_ref().map_or(0, |t| t.heap_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A snapshot's names put in one run land where one push each would put
    /// them, across page ends, absent slots included.
    #[test]
    fn a_run_of_names_is_placed_as_one_push_each_would_place_it() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut one_by_one = NameArena::default();
        let mut in_runs = NameArena::default();
        for _ in 0..40 {
            let mut bytes = Vec::new();
            let mut lens = Vec::new();
            let mut want = Vec::new();
            for _ in 0..(next() % 4000) {
                if next() % 9 == 0 {
                    lens.push(ABSENT);
                    want.push(0);
                    continue;
                }
                // Mostly short, now and then long (a page end comes often).
                let len = if next() % 50 == 0 {
                    next() % 3000
                } else {
                    next() % 40
                } as usize;
                let name: Vec<u8> = (0..len).map(|_| b'a' + (next() % 26) as u8).collect();
                want.push(one_by_one.push(&name));
                lens.push(len as u32);
                bytes.extend_from_slice(&name);
            }
            in_runs.push_run(&bytes, &mut lens);
            assert_eq!(lens, want);
        }
        assert_eq!(in_runs.pages, one_by_one.pages);
    }

    #[test]
    fn a_code_is_judged_safe_exactly_when_its_decoded_name_is() {
        let names: Vec<Vec<u8>> = (0..3000)
            .map(|i| format!("file-{i:05}.dat..{}", i % 7).into_bytes())
            .collect();
        let sample: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
        let stored: Vec<(u8, [u8; 8])> = SymbolTable::learn(&sample)
            .expect("a table")
            .stored()
            .collect();
        let t = SymbolTable::from_stored(&stored).expect("its own table");
        let judged = |code: &[u8]| {
            let mut buf = [0; DECODE_ROOM];
            t.decode_into(code, &mut buf)
                .is_some_and(|n| crate::index::name_is_safe(&buf[..n]))
        };
        assert!(!t.code_is_safe(&[]));
        for a in 0..=255u8 {
            assert_eq!(t.code_is_safe(&[a]), judged(&[a]), "code {a}");
            for b in 0..=255u8 {
                assert_eq!(t.code_is_safe(&[a, b]), judged(&[a, b]), "code {a} {b}");
            }
        }
        for bad in [
            &[ESCAPE, b'.'][..],
            &[ESCAPE, b'.', ESCAPE, b'.'],
            &[ESCAPE, b'/', ESCAPE, b'a', ESCAPE, b'b'],
        ] {
            assert!(!t.code_is_safe(bad), "{bad:?}");
        }
        // Longer codes: mostly symbols, some escapes of any byte, some codes
        // past the table, up to names longer than a short name may be.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = 3 + (x % 64) as usize;
            let mut y = x;
            let code: Vec<u8> = (0..len)
                .map(|_| {
                    y = y.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    match (y >> 56) % 16 {
                        0 => ESCAPE,
                        1 => (y >> 40) as u8,
                        _ => ((y >> 32) % t.len() as u64) as u8,
                    }
                })
                .collect();
            assert_eq!(t.code_is_safe(&code), judged(&code), "{code:?}");
        }
    }
}

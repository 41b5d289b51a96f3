//! Whole-share name search over the receiver's [`Index`] (sans-IO).
//!
//! **Syntax.** The query is one pattern matched against each entry's *name*
//! (not its path), folded the same way on both sides: Unicode NFC, then full
//! Unicode case folding (`CaseFolding.txt`, C + F), then NFC again. So "Café"
//! typed in NFC finds a name stored in NFD, "straße" finds "STRASSE",
//! "ΟΔΟΣ" finds "οδος" (final sigma) and "été" finds "ÉTÉ". Without `*` or
//! `?` the pattern matches anywhere in the name (substring); with them it is a
//! glob over the whole name: `*` any run of characters (none included), `?`
//! exactly one character (`*.jpg`, `IMG_????.*`). There is no escape: a name
//! with a literal `*` is found by `?` in its place. Leading and trailing spaces
//! are ignored, inner ones are literal ("my file" is one substring); an empty
//! query matches nothing.
//!
//! **Why case folding, not lower case.** Lower case is for display; Unicode
//! defines caseless matching with case folding, which also equates `ß`/`ss`,
//! `ς`/`σ` and ligatures such as `ﬁ`/`fi` that lower-casing keeps apart. The
//! `caseless` crate carries the Unicode table (about 1,500 entries).
//!
//! **Incremental.** [`Search::step`] scans at most a given number of entry
//! slots and returns the matches among them, so the shell (the browser's index
//! worker) can stream results and stay responsive; the index may change
//! between steps (entries added, removed, renamed): a step only reports
//! entries present when it scans them, never an id that is gone. Entries added
//! behind the cursor (a freed slot reused) are not found by a search already
//! past them. At most [`MAX_RESULTS`] matches are reported; the search then
//! ends `truncated`.
//!
//! **Cost.** The scan walks the index's columns a page at a time
//! ([`Index::scan_names`]). ASCII names (most) are compared in place,
//! lower-casing byte by byte, with no copy; other names take the Unicode path (quick NFC checks skip the
//! normalisation of names already in NFC). Globs over ASCII names match bytes.
//! No cache: nothing is kept per entry, so the index's memory is unchanged
//! (1,000,000 names are scanned well within the budget; see
//! `docs/benchmarks.md`).

use caseless::Caseless;
use linkfs_proto::EntryId;
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

use crate::index::Index;

/// Matches reported by one search, at most.
pub const MAX_RESULTS: usize = 10_000;

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamePattern {
    /// The folded text must occur in the folded name.
    Contains(String),
    /// The folded name must match the whole glob (`*`, `?`).
    Glob(Vec<char>),
}

/// The folded form of `text` that names and queries are compared in: NFC,
/// full case folding, NFC.
pub fn fold(text: &str) -> String {
    let mut out = String::new();
    fold_into(text, &mut out, &mut String::new());
    out
}

/// [`fold`] into `out` (cleared first), using `tmp` as scratch.
fn fold_into(text: &str, out: &mut String, tmp: &mut String) {
    out.clear();
    if text.is_ascii() {
        // ASCII is its own NFC and folds to its lower case.
        out.push_str(text);
        out.make_ascii_lowercase();
        return;
    }
    // Fast path, one pass: below U+0300 (ASCII, Latin-1, Latin Extended) every
    // character is a starter that composes with nothing before it, so such a
    // text is already NFC; folding it is exact as long as what it folds to
    // stays below U+0300 too (ǰ, for one, folds to j + a combining caron).
    let mut fast = true;
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else if c < '\u{300}' {
            for f in std::iter::once(c).default_case_fold() {
                fast &= f < '\u{300}';
                out.push(f);
            }
        } else {
            fast = false;
            break;
        }
    }
    if fast {
        return;
    }
    out.clear();
    tmp.clear();
    if is_nfc_quick(text.chars()) == IsNormalized::Yes {
        text.chars().for_each(|c| push_folded(c, tmp));
    } else {
        text.nfc().for_each(|c| push_folded(c, tmp));
    }
    // Folding can leave a sequence NFC would compose (rarely): normalise again.
    if is_nfc_quick(tmp.chars()) == IsNormalized::Yes {
        out.push_str(tmp);
    } else {
        out.extend(tmp.nfc());
    }
}

/// Scripts without case: CJK (radicals to Yi), Hangul, emoji and symbols,
/// the supplementary ideographs. Nothing in them has a case folding
/// (`caseless_ranges_fold_to_themselves` checks every one), so a name in
/// them skips the folding table's search.
const CASELESS: [(char, char); 4] = [
    ('\u{2E80}', '\u{A63F}'),
    ('\u{AC00}', '\u{D7FF}'),
    ('\u{1F000}', '\u{1FAFF}'),
    ('\u{20000}', '\u{3FFFF}'),
];

/// Pushes the full case folding of `c` onto `out`.
fn push_folded(c: char, out: &mut String) {
    if c.is_ascii() {
        out.push(c.to_ascii_lowercase());
    } else if CASELESS.iter().any(|&(lo, hi)| (lo..=hi).contains(&c)) {
        out.push(c);
    } else {
        out.extend(std::iter::once(c).default_case_fold());
    }
}

impl NamePattern {
    /// The pattern of a query, or `None` for an empty one.
    pub fn parse(query: &str) -> Option<NamePattern> {
        let q = query.trim();
        if q.is_empty() {
            return None;
        }
        let folded = fold(q);
        Some(if folded.contains(['*', '?']) {
            NamePattern::Glob(folded.chars().collect())
        } else {
            NamePattern::Contains(folded)
        })
    }

    /// Does the (already [`fold`]ed) name match?
    pub fn matches(&self, folded_name: &str) -> bool {
        self.matches_with(folded_name, &mut Vec::new())
    }

    /// [`matches`](Self::matches) with a reusable buffer for globs.
    fn matches_with(&self, folded_name: &str, chars: &mut Vec<char>) -> bool {
        match self {
            NamePattern::Contains(text) => folded_name.contains(text.as_str()),
            NamePattern::Glob(glob) if folded_name.is_ascii() => {
                // One byte is one character: match bytes. A non-ASCII glob
                // character never equals an ASCII byte, as it should.
                glob_matches(glob, folded_name.as_bytes(), |g, b| {
                    *g as u32 == u32::from(*b)
                })
            }
            NamePattern::Glob(glob) => {
                chars.clear();
                chars.extend(folded_name.chars());
                glob_matches(glob, chars, |g, c| g == c)
            }
        }
    }
}

/// Whole-string glob match (`*`, `?`), linear with one backtrack point.
fn glob_matches<T>(glob: &[char], name: &[T], eq: impl Fn(&char, &T) -> bool) -> bool {
    let (mut g, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match glob.get(g) {
            Some('*') => {
                star = Some((g, n));
                g += 1;
            }
            Some('?') => {
                g += 1;
                n += 1;
            }
            Some(c) if eq(c, &name[n]) => {
                g += 1;
                n += 1;
            }
            _ => match star {
                Some((sg, sn)) => {
                    g = sg + 1;
                    n = sn + 1;
                    star = Some((sg, sn + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|c| *c == '*')
}

/// One search in progress; see the module docs.
#[derive(Debug)]
pub struct Search {
    pattern: Option<NamePattern>,
    /// For [`NamePattern::Contains`]: the needle's searcher, built once per query.
    finder: Option<memchr::memmem::Finder<'static>>,
    /// The next entry slot to scan.
    cursor: u32,
    found: usize,
    truncated: bool,
    /// Reused buffers: the folded name, folding scratch, a name's characters.
    folded: String,
    tmp: String,
    chars: Vec<char>,
}

/// What one step found.
#[derive(Debug, Default)]
pub struct SearchStep {
    pub matches: Vec<EntryId>,
    /// Entry slots scanned so far, of `total`.
    pub scanned: u32,
    pub total: u32,
    pub done: bool,
    /// More than [`MAX_RESULTS`] matched; the rest are not reported.
    pub truncated: bool,
}

impl Search {
    pub fn new(query: &str) -> Search {
        let pattern = NamePattern::parse(query);
        let finder = match &pattern {
            Some(NamePattern::Contains(text)) => {
                Some(memchr::memmem::Finder::new(text.as_bytes()).into_owned())
            }
            _ => None,
        };
        Search {
            pattern,
            finder,
            cursor: 0,
            found: 0,
            truncated: false,
            folded: String::new(),
            tmp: String::new(),
            chars: Vec::new(),
        }
    }

    /// Scans at most `max_slots` entry slots of `index` from where the last
    /// step stopped.
    pub fn step(&mut self, index: &Index, max_slots: u32) -> SearchStep {
        let total = index.id_bound();
        let mut out = SearchStep {
            total,
            ..SearchStep::default()
        };
        let Some(pattern) = &self.pattern else {
            self.cursor = total;
            out.scanned = total;
            out.done = true;
            return out;
        };
        let end = self.cursor.saturating_add(max_slots).min(total);
        let (folded, tmp, chars) = (&mut self.folded, &mut self.tmp, &mut self.chars);
        let (finder, found, truncated) = (&self.finder, &mut self.found, &mut self.truncated);
        // The share's root (slot 0) has no name of its own.
        index.scan_names(self.cursor.max(1), end, |slot, name| {
            let hit = if name.is_ascii() {
                // ASCII folds to its lower case, byte for byte: compared in
                // place, nothing copied.
                match pattern {
                    NamePattern::Contains(text) => {
                        contains_ascii_folded(name, text.as_bytes(), finder.as_ref())
                    }
                    NamePattern::Glob(glob) => glob_matches(glob, name, |g, b| {
                        *g as u32 == u32::from(b.to_ascii_lowercase())
                    }),
                }
            } else {
                let text = String::from_utf8_lossy(name);
                fold_into(&text, folded, tmp);
                match finder {
                    Some(f) => f.find(folded.as_bytes()).is_some(),
                    None => pattern.matches_with(folded, chars),
                }
            };
            if hit {
                if *found >= MAX_RESULTS {
                    *truncated = true;
                    return false;
                }
                *found += 1;
                out.matches.push(EntryId(slot));
            }
            true
        });
        self.cursor = if self.truncated { total } else { end };
        out.scanned = self.cursor.min(total);
        out.done = self.cursor >= total;
        out.truncated = self.truncated;
        out
    }
}

/// Names longer than this are searched with the prebuilt searcher (on a
/// lower-cased copy) rather than compared at each position.
const SHORT_NAME: usize = 64;

/// Does the ASCII `name`, lower-cased, contain the folded `needle`? A
/// non-ASCII needle never does (an ASCII name folds to ASCII). Short names,
/// nearly all, are compared in place at each position; long ones go to
/// `finder` on a copy.
fn contains_ascii_folded(
    name: &[u8],
    needle: &[u8],
    finder: Option<&memchr::memmem::Finder<'_>>,
) -> bool {
    let Some((&first, rest)) = needle.split_first() else {
        return true;
    };
    if !needle.is_ascii() || needle.len() > name.len() {
        return false;
    }
    if name.len() > SHORT_NAME {
        let lower = name.to_ascii_lowercase();
        return match finder {
            Some(f) => f.find(&lower).is_some(),
            None => memchr::memmem::find(&lower, needle).is_some(),
        };
    }
    // Each place the needle's first byte (either case) starts and the needle fits.
    let last = name.len() - needle.len();
    let upper = first.to_ascii_uppercase();
    let mut from = 0;
    while let Some(pos) = memchr::memchr2(first, upper, &name[from..=last]) {
        let at = from + pos;
        if name[at + 1..]
            .iter()
            .zip(rest)
            .all(|(a, b)| a.to_ascii_lowercase() == *b)
        {
            return true;
        }
        from = at + 1;
        if from > last {
            break;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(q: &str) -> NamePattern {
        NamePattern::parse(q).expect("a pattern")
    }

    #[test]
    fn caseless_ranges_fold_to_themselves() {
        for &(lo, hi) in &CASELESS {
            for c in lo..=hi {
                let folded: String = std::iter::once(c).default_case_fold().collect();
                assert_eq!(
                    folded,
                    c.to_string(),
                    "U+{:04X} has a case folding",
                    c as u32
                );
            }
        }
    }

    #[test]
    fn nfd_names_are_found_by_their_nfc_form_and_the_other_way_round() {
        let nfd = fold("Cafe\u{301} au lait.txt");
        assert!(p("Café").matches(&nfd));
        assert!(p("cafe\u{301}").matches(&fold("CAFÉ.md")));
    }

    #[test]
    fn case_is_folded_beyond_ascii() {
        assert!(p("été").matches(&fold("RAPPORT ÉTÉ.pdf")));
        assert!(p("ÉTÉ").matches(&fold("été 2024.jpg")));
        assert!(p("ΣΟΦΙΑ").matches(&fold("σοφια.txt")));
        assert!(p("strasse").matches(&fold("Straße")), "ß folds to ss");
        assert!(p("Straße").matches(&fold("STRASSE.txt")));
        assert!(p("STRAẞE").matches(&fold("strasse")), "capital ẞ too");
        assert!(p("οδος").matches(&fold("ΟΔΟΣ")), "final sigma equals sigma");
        assert!(p("fi").matches(&fold("ﬁle")), "the ligature ﬁ folds to fi");
        assert_eq!(fold("Cafe\u{301}"), "café", "the folded form is NFC");
        assert!(!p("cafe").matches(&fold("Café")), "accents are kept");
        assert_eq!(
            fold("ǰ"),
            "ǰ",
            "j + caron from the folding is composed again"
        );
        assert_eq!(fold("ÀÉÎÕÜ Ÿ"), "àéîõü ÿ");
    }

    #[test]
    fn plain_text_is_a_substring_and_globs_match_the_whole_name() {
        assert!(p("port").matches(&fold("Report.pdf")));
        assert!(p("*.PDF").matches(&fold("Report.pdf")));
        assert!(!p("*.pdf").matches(&fold("Report.pdf.bak")));
        assert!(p("IMG_????.*").matches(&fold("img_0042.jpeg")));
        assert!(!p("IMG_????.*").matches(&fold("img_042.jpeg")));
        assert!(p("*a*b*c*").matches(&fold("xxaxxbxxcxx")));
        assert!(!p("*a*b*c*").matches(&fold("xxcxxbxxaxx")));
        assert!(p("?").matches("é"), "? is one character, not one byte");
        assert!(
            p("caf?.txt").matches(&fold("Cafe\u{301}.txt")),
            "NFD é is one character"
        );
        assert!(p("?ß*").matches(&fold("ASS")), "a glob of a folded query");
        assert!(p("*").matches(&fold("anything")));
        assert!(!p("a?").matches(&fold("a")));
        assert!(
            p("my file").matches(&fold("My File.txt")),
            "inner spaces are literal"
        );
        assert_eq!(NamePattern::parse("   "), None);
    }
}

//! Whole-share name search over the receiver's [`Index`] (sans-IO).
//!
//! **Syntax.** The query is one pattern matched against each entry's *name*
//! (not its path), case-folded and Unicode-normalised on both sides (NFC, then
//! full lower case), so "Café" typed in NFC finds a name stored in NFD, and
//! "straße" finds "STRASSE"'s lower case only where Unicode says so. Without
//! `*` or `?` the pattern matches anywhere in the name (substring); with them
//! it is a glob over the whole name: `*` any run of characters, `?` exactly one
//! (`*.jpg`, `IMG_????.*`). Leading and trailing spaces are ignored; an empty
//! query matches nothing.
//!
//! **Incremental.** [`Search::step`] scans at most a given number of entry
//! slots and returns the matches among them, so the shell (the browser's index
//! worker) can stream results and stay responsive; the index may change
//! between steps (entries added, removed, renamed): a step only reports
//! entries present when it scans them, never an id that is gone. At most
//! [`MAX_RESULTS`] matches are reported; the search then ends `truncated`.
//!
//! **Cost.** ASCII names (most) are folded with an ASCII lower-casing into a
//! reused buffer; only names with other characters are normalised. No cache:
//! nothing is kept per entry, so the index's memory is unchanged.

use linkfs_proto::EntryId;
use unicode_normalization::UnicodeNormalization;

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

/// NFC, then full Unicode lower case.
pub fn fold(text: &str) -> String {
    text.nfc().flat_map(char::to_lowercase).collect()
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

    /// Does the (already folded) name match?
    pub fn matches(&self, folded_name: &str) -> bool {
        match self {
            NamePattern::Contains(text) => folded_name.contains(text.as_str()),
            NamePattern::Glob(glob) => glob_matches(glob, folded_name),
        }
    }
}

/// Whole-string glob match (`*`, `?`), linear with one backtrack point.
fn glob_matches(glob: &[char], name: &str) -> bool {
    let name: Vec<char> = name.chars().collect();
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
            Some(c) if *c == name[n] => {
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
    /// The next entry slot to scan.
    cursor: u32,
    found: usize,
    truncated: bool,
    scratch: String,
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
        Search {
            pattern: NamePattern::parse(query),
            cursor: 0,
            found: 0,
            truncated: false,
            scratch: String::new(),
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
        for slot in self.cursor..end {
            let id = EntryId(slot);
            let Some(name) = index.name_of(id) else {
                continue;
            };
            if slot == 0 {
                continue; // the share's root has no name of its own
            }
            self.scratch.clear();
            if name.is_ascii() {
                // ASCII is its own NFC; lower-case it in place.
                self.scratch
                    .extend(name.iter().map(|b| b.to_ascii_lowercase() as char));
            } else {
                let text = String::from_utf8_lossy(name);
                self.scratch.extend(text.nfc().flat_map(char::to_lowercase));
            }
            if pattern.matches(&self.scratch) {
                if self.found >= MAX_RESULTS {
                    self.truncated = true;
                    self.cursor = total;
                    break;
                }
                self.found += 1;
                out.matches.push(id);
            }
        }
        if !self.truncated {
            self.cursor = end;
        }
        out.scanned = self.cursor.min(total);
        out.done = self.cursor >= total;
        out.truncated = self.truncated;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(q: &str) -> NamePattern {
        NamePattern::parse(q).expect("a pattern")
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
        assert!(p("ΣΟΦΙΑ").matches(&fold("σοφια.txt")));
        assert!(
            !p("strasse").matches(&fold("Straße")),
            "ß lower-cases to itself, not to ss"
        );
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
        assert_eq!(NamePattern::parse("   "), None);
    }
}

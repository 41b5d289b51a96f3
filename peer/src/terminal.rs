//! Text from outside (a sharer's names and messages, a visitor's goodbye) on a
//! terminal: control characters are escaped, so nobody can move the cursor,
//! retitle the window, or hide text in someone else's terminal.
//!
//! Escaped: C0 controls (0x00-0x1f), DEL (0x7f), C1 controls (U+0080-U+009F),
//! and the bidirectional overrides and isolates (U+202A-U+202E,
//! U+2066-U+2069), which can make a name read as another. In bytes (names,
//! which need not be UTF-8) they become `\xNN` (C1 and bidi as their UTF-8
//! bytes) and a backslash becomes `\\`, so the form is unambiguous; in strings
//! they become `\u{NN}`, and in `ls --json` `\uXXXX` ([`TerminalSafeJson`]). A
//! lone byte 0x80-0x9f that is not UTF-8 is escaped too (an 8-bit terminal
//! takes it for a C1 control).

/// Whether `c` must not reach a terminal as it is.
fn is_hostile(c: char) -> bool {
    c.is_control()
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// `raw` (any bytes) with control characters escaped, for writing to a terminal.
pub fn escape_bytes(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut rest = raw;
    while !rest.is_empty() {
        let (valid, bad) = match std::str::from_utf8(rest) {
            Ok(s) => (s, 0),
            Err(e) => {
                // Safe: `valid_up_to` bytes are valid UTF-8.
                let s = std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or_default();
                (s, e.error_len().unwrap_or(rest.len() - e.valid_up_to()))
            }
        };
        for c in valid.chars() {
            if c == '\\' {
                out.extend_from_slice(b"\\\\");
            } else if is_hostile(c) {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
                }
            } else {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
        let at = valid.len();
        // Bytes that are not UTF-8 are passed on as they are: a terminal shows
        // them as replacement characters, and they are part of the name. But
        // not 0x80-0x9f alone: an 8-bit terminal takes them for C1 controls
        // (0x9b is a CSI).
        for b in &rest[at..at + bad] {
            if (0x80..=0x9f).contains(b) {
                out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
            } else {
                out.push(*b);
            }
        }
        rest = &rest[at + bad..];
    }
    out
}

/// serde_json's compact form with every character that must not reach a
/// terminal written as `\uXXXX` (serde_json itself escapes only C0 controls,
/// and `ls --json` is read on terminals too). The JSON means the same.
pub struct TerminalSafeJson;

impl serde_json::ser::Formatter for TerminalSafeJson {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if is_hostile(c) {
                writer.write_all(&fragment.as_bytes()[start..i])?;
                // Every such character is in the Basic Multilingual Plane.
                write!(writer, "\\u{:04x}", u32::from(c))?;
                start = i + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
}

/// `raw` escaped (see [`escape_bytes`]) and shown as text (bytes that are not
/// UTF-8 as U+FFFD).
pub fn escaped_name(raw: &[u8]) -> String {
    String::from_utf8_lossy(&escape_bytes(raw)).into_owned()
}

/// A message from outside with its control characters escaped.
pub fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_hostile(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// An error and its causes in one line, `outer: inner: ...`, each cause said
/// once: a cause whose words the line already holds (a library error that
/// prints its source and gives it as its source too) is left out.
pub fn causes_once<S: AsRef<str>>(causes: impl IntoIterator<Item = S>) -> String {
    let mut line = String::new();
    for cause in causes {
        let cause = cause.as_ref();
        if cause.is_empty() || line.contains(cause) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(cause);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::causes_once;

    /// What broke: "...: IO error: Connection refused (os error 111): IO error:
    /// Connection refused (os error 111): Connection refused (os error 111)".
    #[test]
    fn an_error_says_each_cause_once() {
        let line = causes_once([
            "could not reach the relay at ws://127.0.0.1:9/signal: IO error: Connection refused (os error 111)",
            "IO error: Connection refused (os error 111)",
            "Connection refused (os error 111)",
        ]);
        assert_eq!(
            line,
            "could not reach the relay at ws://127.0.0.1:9/signal: IO error: Connection refused (os error 111)"
        );
        assert_eq!(
            causes_once(["cannot mount on /m", "Permission denied (os error 13)"]),
            "cannot mount on /m: Permission denied (os error 13)"
        );
    }
}

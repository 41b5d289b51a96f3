//! A sharer's names and a visitor's words never reach a terminal raw.

use linkfs_core::Index;
use linkfs_peer::terminal::{escape_bytes, escaped, escaped_name};
use linkfs_peer::visit::listing::{ListOptions, list};
use linkfs_proto::{EntryId, EntryKind, EntryView, Generation, OpView};

fn upsert(ix: &mut Index, id: u32, kind: EntryKind, name: &[u8], target: &[u8]) {
    ix.apply(OpView::Upsert(EntryView {
        id: EntryId(id),
        parent: EntryId::ROOT,
        kind,
        name,
        size: 1,
        mtime: 0,
        mode: 0o644,
        generation: Generation(0),
        target,
    }))
    .unwrap();
}

#[test]
fn control_characters_in_names_are_escaped_in_ls_output() {
    let mut ix = Index::new();
    upsert(&mut ix, 0, EntryKind::Dir, b"root", b"");
    upsert(
        &mut ix,
        1,
        EntryKind::File,
        b"evil\x1b]0;owned\x07\x1b[2J",
        b"",
    );
    upsert(&mut ix, 2, EntryKind::Symlink, b"link", b"\x1b[31mred\\x");
    let mut out = Vec::new();
    list(&ix, b"", ListOptions::default(), &mut out).unwrap();
    assert!(
        !out.iter().any(|b| *b == 0x1b || *b == 0x07),
        "raw escape bytes reached the output: {:?}",
        String::from_utf8_lossy(&out)
    );
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains(r"evil\x1b]0;owned\x07\x1b[2J"), "{text}");
    assert!(text.contains(r"link -> \x1b[31mred\\x"), "{text}");
}

#[test]
fn escaping_covers_c1_controls_and_bidi_overrides_and_keeps_the_rest() {
    assert_eq!(escape_bytes("a\u{9b}b".as_bytes()), br"a\xc2\x9bb");
    assert_eq!(
        escaped_name("x\u{202e}txt.exe".as_bytes()),
        r"x\xe2\x80\xaetxt.exe"
    );
    assert_eq!(
        escape_bytes(b"caf\xc3\xa9 \xff"),
        b"caf\xc3\xa9 \xff",
        "UTF-8 and other bytes stay"
    );
    assert_eq!(escaped("bye\u{1b}[2Jnow\n"), r"bye\u{1b}[2Jnow\u{a}");
    assert_eq!(escaped("plain words"), "plain words");
}

/// What broke: `ls --json` wrote DEL, C1 controls (U+009B is a CSI) and bidi
/// overrides raw (serde_json escapes only C0), and text `ls` a lone 0x9b byte.
#[test]
fn ls_json_and_text_write_no_c1_control_or_bidi_override_raw() {
    let mut ix = Index::new();
    upsert(&mut ix, 0, EntryKind::Dir, b"root", b"");
    let hostile = "clear\u{9b}2J title\u{9d}0;pwned\u{9c} gpj\u{202e}.exe del\u{7f}";
    upsert(&mut ix, 1, EntryKind::File, hostile.as_bytes(), b"");
    upsert(
        &mut ix,
        2,
        EntryKind::Symlink,
        b"link",
        "\u{2066}x".as_bytes(),
    );
    upsert(&mut ix, 3, EntryKind::File, b"lone\x9b2J", b"");
    let raw = |out: &[u8]| {
        let text = String::from_utf8_lossy(out);
        text.chars()
            .filter(|c| c.is_control() && *c != '\n' || ('\u{202a}'..='\u{2069}').contains(c))
            .count()
            + out.iter().filter(|b| **b == 0x9b).count()
    };
    let mut out = Vec::new();
    list(
        &ix,
        b"",
        ListOptions {
            json: true,
            recursive: false,
        },
        &mut out,
    )
    .unwrap();
    assert_eq!(raw(&out), 0, "{}", String::from_utf8_lossy(&out));
    let names: Vec<String> = String::from_utf8_lossy(&out)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["path"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(
        names.contains(&hostile.to_owned()),
        "the JSON still means the name: {names:?}"
    );
    let mut text = Vec::new();
    list(&ix, b"", ListOptions::default(), &mut text).unwrap();
    assert_eq!(raw(&text), 0, "{}", String::from_utf8_lossy(&text));
    assert!(String::from_utf8_lossy(&text).contains(r"lone\x9b2J"));
}

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

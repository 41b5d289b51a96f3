//! Writes the seed corpora of the fuzz targets (`scripts/fuzz` runs it): every
//! protocol test vector for the decoders it concerns, and an input for each
//! regression of issue "every trust boundary holds" that a target can reach
//! (the zstd window bomb, an entry id far beyond the log, a folder turned into
//! a file under itself, a chunk offset that wraps, a saved index).
//!
//!   linkfs-fuzz-seeds --out DIR      (DIR/<target>/<name> files)

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Parser;
use linkfs_core::{NewEntry, ShareIndex};
use linkfs_proto::batch::BatchEncoder;
use linkfs_proto::frame::encode_chunk_into;
use linkfs_proto::vectors::{Message, all, hex_bytes};
use linkfs_proto::{
    EntryId, EntryKind, EntryView, Epoch, FRAME_INDEX_BATCH, Generation, MAX_FRAME_LEN, ReadChunk,
    ReadId, Seq,
};

#[derive(Parser)]
struct Args {
    /// Where to write the corpora.
    #[arg(long)]
    out: PathBuf,
}

fn write(out: &Path, target: &str, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = out.join(target);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(dir.join(name), bytes).with_context(|| format!("cannot write {name}"))
}

/// A batch declaring a 1 GiB zstd window over run-length blocks.
fn window_bomb() -> Vec<u8> {
    let mut frame = vec![FRAME_INDEX_BATCH, 0, 0, 2, 0, 0, 0, 1];
    frame.extend_from_slice(&[0x28, 0xB5, 0x2F, 0xFD, 0x00, 20 << 3]);
    let header = ((128u32 * 1024) << 3) | (1 << 1);
    while frame.len() + 8 < MAX_FRAME_LEN {
        frame.extend_from_slice(&header.to_le_bytes()[..3]);
        frame.push(b'a');
    }
    frame
}

fn view(id: u32, parent: u32, kind: EntryKind, name: &[u8]) -> EntryView<'_> {
    EntryView {
        id: EntryId(id),
        parent: EntryId(parent),
        kind,
        name,
        size: 1,
        mtime: 1,
        mode: 0o644,
        generation: Generation(0),
        target: b"",
    }
}

fn batch(ops: &[EntryView<'_>]) -> Vec<u8> {
    let mut enc = BatchEncoder::new(Seq(0), MAX_FRAME_LEN);
    for op in ops {
        enc.push_upsert(op);
    }
    enc.finish(ops.len() as u64, true)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let out = &args.out;
    for (n, v) in all().iter().enumerate() {
        let bytes = hex_bytes(v.hex)?;
        let name = format!("vector-{n:02}");
        match &v.message {
            Message::ToSender(_) => write(out, "receiver_frames", &name, &bytes)?,
            Message::Batch { .. } => {
                write(out, "index_batch", &name, &bytes)?;
                write(out, "sender_frames", &name, &bytes)?;
                write(out, "receiver_session", &name, &bytes)?;
            }
            _ => {
                write(out, "sender_frames", &name, &bytes)?;
                write(out, "receiver_session", &name, &bytes)?;
            }
        }
    }
    let bomb = window_bomb();
    for target in ["index_batch", "sender_frames", "receiver_session"] {
        write(out, target, "zstd-window-bomb", &bomb)?;
    }
    let root = view(0, 0, EntryKind::Dir, b"root");
    let sparse = batch(&[root, view(0xFFFF_FFF0, 0, EntryKind::File, b"far")]);
    write(out, "index_batch", "sparse-entry-id", &sparse)?;
    let self_parent = batch(&[
        root,
        view(1, 0, EntryKind::Dir, b"d"),
        view(1, 1, EntryKind::File, b"d"),
    ]);
    write(
        out,
        "index_batch",
        "folder-as-file-under-itself",
        &self_parent,
    )?;
    let mut chunk = Vec::new();
    encode_chunk_into(
        &mut chunk,
        &ReadChunk {
            read: ReadId(1),
            offset: u64::MAX - 20,
            hash: [0; 32],
            data: &[7; 50],
        },
    );
    write(out, "receiver_session", "chunk-offset-wraps", &chunk)?;
    write(out, "sender_frames", "chunk-offset-wraps", &chunk)?;
    let mut ix = ShareIndex::new(Epoch(1));
    for (id, parent, kind, name) in [
        (0, 0, EntryKind::Dir, "root"),
        (1, 0, EntryKind::Dir, "a"),
        (2, 1, EntryKind::File, "b"),
    ] {
        ix.push(&NewEntry {
            id: EntryId(id),
            parent: EntryId(parent),
            kind,
            name: name.as_bytes(),
            size: 3,
            mtime: 1,
            mtime_nsec: 0,
            mode: 0o644,
            target: b"",
            dev: 1,
            ino: u64::from(id),
            ctime_ns: 0,
        })?;
    }
    ix.mark_snapshot_complete();
    write(out, "saved_index", "small", &ix.to_saved())?;
    let relay_texts = [
        r#"{"t":"welcome","peer":1,"ice_servers":[],"max_message":16384}"#,
        r#"{"t":"joined","peer":3}"#,
        r#"{"t":"msg","from":0,"data":"AQID"}"#,
        r#"{"t":"error","code":"room-full","message":"full"}"#,
    ];
    for (n, t) in relay_texts.iter().enumerate() {
        write(out, "signaling", &format!("relay-{n}"), t.as_bytes())?;
    }
    write(
        out,
        "signaling_machines",
        "relay-all",
        relay_texts.join("\u{fe}").as_bytes(),
    )?;
    eprintln!("seeds written to {}", out.display());
    Ok(())
}

//! `linkfs-bench-index DIR`: the metadata path without the network, as JSON.
//!
//! Walks DIR with the real walk into a real share index, streams it with a real
//! sender session into a real receiver (both in this process, frames handed
//! over directly), and reports where the time and the bytes go: walk, batch
//! encoding, decoding + applying, bytes per entry on the wire, the receiver
//! index's heap per entry, and whole-share search times (stepped as the
//! browser's worker steps it). Use it to compare encodings and index layouts
//! on real trees quickly; the browser figures come from the scale test.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use linkfs_core::{
    Index, Millis, Receiver, ReceiverConfig, Search, SenderConfig, SenderSession, ShareIndex,
    SnapshotRestorer, SortKey,
};
use linkfs_peer::walk::{WalkOptions, Walker};
use linkfs_proto::{EntryId, Epoch};

#[derive(Debug, Parser)]
#[command(
    name = "linkfs-bench-index",
    about = "Index path figures for a folder, without the network"
)]
struct Args {
    /// The folder to index.
    dir: PathBuf,
    /// Restore the snapshot this many times and report the median (and the
    /// fastest): one restore of a 1M index is ~0.1 s, within a busy
    /// machine's swing.
    #[arg(long, default_value_t = 1)]
    snapshot_runs: usize,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let t0 = Instant::now();
    let walk = Walker::new(&args.dir, WalkOptions::default())?;
    let mut index = ShareIndex::new(Epoch(1));
    while let Some(batch) = walk.recv() {
        for e in &batch.entries {
            index.push(&e.new_entry())?;
        }
        for &dir in &batch.listed {
            index.mark_listed(dir);
        }
    }
    let summary = walk.join();
    index.mark_snapshot_complete();
    let walk_s = t0.elapsed().as_secs_f64();

    // Sender -> receiver, frames passed directly; acks flow back at once.
    let mut sender = SenderSession::new(SenderConfig::default());
    let mut receiver = Receiver::new(ReceiverConfig::default(), Index::new(), None);
    let (mut encode_s, mut apply_s) = (0.0, 0.0);
    let mut wire = 0u64;
    let mut batches = 0u64;
    let mut in_columns = 0u64;
    loop {
        let mut moved = false;
        while let Some(f) = receiver.poll_transmit(Millis(0)) {
            sender.handle_frame(Millis(0), &f, &index)?;
            moved = true;
        }
        let t = Instant::now();
        let out = sender.poll_transmit(Millis(0), &index);
        encode_s += t.elapsed().as_secs_f64();
        if let Some(f) = out {
            if f[0] == linkfs_proto::FRAME_INDEX_BATCH {
                wire += f.len() as u64;
                batches += 1;
                in_columns += u64::from(linkfs_proto::BatchReader::new(&f)?.in_columns());
            }
            let t = Instant::now();
            receiver.handle_frame(Millis(0), &f);
            apply_s += t.elapsed().as_secs_f64();
            while receiver.poll_event().is_some() {}
            moved = true;
        }
        if !moved {
            break;
        }
    }
    let entries = receiver.index().len() as u64;
    anyhow::ensure!(
        entries == index.entries() && receiver.progress().complete,
        "the receiver holds {entries} of {} entries",
        index.entries()
    );
    // Listing and lookup in the largest directory.
    let idx = receiver.index_mut();
    let (big, big_n) = (0..index.next_id().0)
        .map(EntryId)
        .filter(|id| {
            idx.get(*id)
                .is_some_and(|e| e.kind == linkfs_proto::EntryKind::Dir)
        })
        .map(|id| (id, idx.child_count(id)))
        .max_by_key(|(_, n)| *n)
        .unwrap_or((EntryId::ROOT, 0));
    let t = Instant::now();
    let first_screen = idx.list(big, SortKey::Name, false, 0, 50);
    let list_ms = t.elapsed().as_secs_f64() * 1e3;
    let probe = first_screen
        .last()
        .and_then(|id| idx.get(*id))
        .map(|e| e.name.to_vec())
        .unwrap_or_default();
    let t = Instant::now();
    let found = idx.lookup_child(big, &probe);
    let lookup_us = t.elapsed().as_secs_f64() * 1e6;
    anyhow::ensure!(
        found.is_some() || big_n == 0,
        "lookup of a listed name failed"
    );
    let heap = idx.heap_bytes() as f64;
    let search: Vec<_> = ["img", "*9.*", "é", "no such name"]
        .into_iter()
        .map(|q| search_figures(idx, q))
        .collect();
    let snapshot = snapshot_figures(idx, args.snapshot_runs.max(1))?;
    let figures = serde_json::json!({
        "dir": args.dir,
        "entries": entries,
        "walk_seconds": walk_s,
        "walk_errors": summary.error_count,
        "batches": batches,
        "batches_in_columns": in_columns,
        "wire_bytes_per_entry": wire as f64 / entries.max(1) as f64,
        "encode_seconds": encode_s,
        "apply_seconds": apply_s,
        "receiver_heap_bytes_per_entry": heap / entries.max(1) as f64,
        "sharer_heap_bytes_per_entry": index.heap_bytes() as f64 / entries.max(1) as f64,
        "biggest_dir_entries": big_n,
        "list_first_screen_ms": list_ms,
        "lookup_in_biggest_dir_us": lookup_us,
        "search": search,
        "snapshot": snapshot,
    });
    println!("{figures}");
    Ok(())
}

/// A stored snapshot of the index (what the browser keeps instead of its batch
/// log): size, time to build its parts, time to restore them (the median of
/// `runs`), and the time its checksums alone take.
fn snapshot_figures(index: &mut Index, runs: usize) -> anyhow::Result<serde_json::Value> {
    let t = Instant::now();
    let parts: Vec<Vec<u8>> = index.snapshot_parts().collect();
    let build_ms = t.elapsed().as_secs_f64() * 1e3;
    let bytes: usize = parts.iter().map(Vec::len).sum();
    let mut restores = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        let mut restorer = SnapshotRestorer::new(&parts[0])?;
        for p in &parts[1..] {
            restorer.push(p)?;
        }
        let restored = restorer.finish()?;
        restores.push(t.elapsed().as_secs_f64() * 1e3);
        anyhow::ensure!(
            restored.len() == index.len(),
            "the snapshot restored another index"
        );
    }
    restores.sort_by(f64::total_cmp);
    let restore_ms = restores[restores.len() / 2];
    let t = Instant::now();
    for p in &parts {
        std::hint::black_box(blake3::hash(p));
    }
    let checksum_ms = t.elapsed().as_secs_f64() * 1e3;
    Ok(serde_json::json!({
        "parts": parts.len(),
        "bytes_per_entry": bytes as f64 / index.len().max(1) as f64,
        "build_ms": build_ms,
        "restore_ms": restore_ms,
        "restore_fastest_ms": restores[0],
        "restore_runs": runs,
        "checksum_ms": checksum_ms,
    }))
}

/// Entry slots per search step: what the browser's index worker scans between yields.
const SEARCH_STEP_SLOTS: u32 = 40_000;

/// One whole-share search run step by step as the worker runs it (without the
/// rows' paths and the posting): first match, all of it, the longest step.
fn search_figures(index: &Index, query: &str) -> serde_json::Value {
    let mut search = Search::new(query);
    let t = Instant::now();
    let (mut first_ms, mut longest_step_ms, mut found, mut steps) = (None, 0f64, 0usize, 0u32);
    loop {
        let s = Instant::now();
        let step = search.step(index, SEARCH_STEP_SLOTS);
        longest_step_ms = longest_step_ms.max(s.elapsed().as_secs_f64() * 1e3);
        steps += 1;
        found += step.matches.len();
        if found > 0 && first_ms.is_none() {
            first_ms = Some(t.elapsed().as_secs_f64() * 1e3);
        }
        if step.done {
            return serde_json::json!({
                "query": query,
                "found": found,
                "truncated": step.truncated,
                "steps": steps,
                "first_results_ms": first_ms,
                "all_results_ms": t.elapsed().as_secs_f64() * 1e3,
                "longest_step_ms": longest_step_ms,
            });
        }
    }
}

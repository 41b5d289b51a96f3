//! A batch whose zstd frame declares a huge window: refused before decoding,
//! without the receiver allocating the window. Its own test binary, because it
//! watches the process's peak memory.

use linkfs_proto::batch::BatchReader;
use linkfs_proto::{DecodeError, FRAME_INDEX_BATCH, MAX_FRAME_LEN};

/// The process's peak resident memory so far (Linux), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM in /proc/self/status")
        * 1024
}

/// A zstd frame declaring a window of 2^`log` bytes, then as many run-length
/// blocks of 128 KiB as fit in `budget` bytes: tiny, and decompressing to
/// about 32,000 times its size.
fn window_bomb(log: u8, budget: usize) -> Vec<u8> {
    let mut z = vec![0x28, 0xB5, 0x2F, 0xFD];
    // No content size, not single-segment, no checksum, no dictionary.
    z.push(0x00);
    z.push((log - 10) << 3);
    let block = 128 * 1024u32;
    while z.len() + 8 < budget {
        // Block header: last = 0, type 1 (RLE), size; then the byte to repeat.
        let header = (block << 3) | (1 << 1);
        z.extend_from_slice(&header.to_le_bytes()[..3]);
        z.push(b'a');
    }
    let last = (block << 3) | (1 << 1) | 1;
    z.extend_from_slice(&last.to_le_bytes()[..3]);
    z.push(b'a');
    z
}

#[test]
fn a_batch_declaring_a_huge_zstd_window_is_refused_before_any_allocation_of_it() {
    // The batch header (seq 0, known 0, flags: zstd, first id 0, base mtime 0,
    // no modes, 1 op), then the bomb: 1 GiB window, about 1.8 GiB of output.
    let mut frame = vec![FRAME_INDEX_BATCH, 0, 0, 2, 0, 0, 0, 1];
    frame.extend(window_bomb(30, MAX_FRAME_LEN - frame.len()));
    assert!(frame.len() <= MAX_FRAME_LEN);
    let before = peak_rss();
    let result = BatchReader::new(&frame);
    let grew = peak_rss().saturating_sub(before);
    assert!(
        matches!(result, Err(DecodeError::TooLarge { .. })),
        "refused as too large, got {:?}",
        result.err()
    );
    assert!(
        grew < 64 << 20,
        "decoding the refused frame raised peak memory by {grew} bytes"
    );
}

#[test]
fn a_declared_content_size_over_the_cap_is_refused_too() {
    let mut frame = vec![FRAME_INDEX_BATCH, 0, 0, 2, 0, 0, 0, 1];
    // Single segment, 4-byte content size of 16 MiB.
    frame.extend_from_slice(&[0x28, 0xB5, 0x2F, 0xFD, 0xA0]);
    frame.extend_from_slice(&(16u32 << 20).to_le_bytes());
    frame.extend_from_slice(&[0x01, 0x00, 0x00]);
    assert!(matches!(
        BatchReader::new(&frame),
        Err(DecodeError::TooLarge { .. })
    ));
}

//! "Folders listed": which folders a receiver holds whole once it has applied
//! the log up to a position, while the rest of the index is still coming.
//!
//! ```text
//! u8    0x12                 frame type
//! uv    upto                 log position: every child of these folders
//!                            (as the sharer found them) is before it
//! uv    n                    folders (>= 1)
//! iv*   id - previous id     n times (previous starts at 0)
//! ```
//!
//! A sharer sends it right after the index batch that carried the last
//! child of each folder, so a receiver that shows folders (a mount) can
//! answer a listing of a folder it holds whole without waiting for the whole
//! index: at ten million entries the root's listing is there in the first
//! batches, the whole index half a minute later. Once a batch says the
//! receiver is complete, every folder is listed and no more of these come.
//!
//! Receivers from before it skip it (an unknown frame type), and a sharer
//! from before it never sends it: such receivers wait for the whole index,
//! as before.

use crate::ids::{EntryId, Seq};
use crate::varint::{Reader, put_ivarint, put_uvarint};
use crate::{DecodeError, MAX_FRAME_LEN};

pub const FRAME_FOLDERS_LISTED: u8 = 0x12;

/// Header room reserved in each frame: type, upto, count.
const HEADER_MAX: usize = 1 + 10 + 10;
/// Most bytes one id takes (a zigzag varint of a 33-bit difference).
const ID_MAX: usize = 5;

/// Folders whose every child is at a log position before `upto`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldersListed {
    pub upto: Seq,
    pub folders: Vec<EntryId>,
}

/// The frames that say `folders` are listed at `upto`: as many as the frame
/// cap needs (none for no folders).
pub fn encode_folders_listed(upto: Seq, folders: &[EntryId]) -> Vec<Vec<u8>> {
    let per_frame = (MAX_FRAME_LEN - HEADER_MAX) / ID_MAX;
    folders
        .chunks(per_frame)
        .map(|part| {
            let mut out = Vec::with_capacity(HEADER_MAX + part.len() * 3);
            out.push(FRAME_FOLDERS_LISTED);
            put_uvarint(&mut out, upto.0);
            put_uvarint(&mut out, part.len() as u64);
            let mut prev = 0i64;
            for id in part {
                let id = i64::from(id.0);
                put_ivarint(&mut out, id - prev);
                prev = id;
            }
            out
        })
        .collect()
}

/// Reads the frame after its type byte.
pub(crate) fn decode_folders_listed(r: &mut Reader<'_>) -> Result<FoldersListed, DecodeError> {
    let upto = Seq(r.uvarint()?);
    let n_at = r.position();
    let n = r.uvarint()?;
    // Every id takes at least one byte: a count beyond that is a lie.
    if n == 0 || n > r.remaining() as u64 {
        return Err(DecodeError::OutOfRange {
            at: n_at,
            what: "folder count",
        });
    }
    let mut folders = Vec::with_capacity(n as usize);
    let mut prev = 0i64;
    for _ in 0..n {
        let at = r.position();
        let id = prev
            .checked_add(r.ivarint()?)
            .filter(|id| (0..=i64::from(u32::MAX)).contains(id))
            .ok_or(DecodeError::OutOfRange {
                at,
                what: "folder id",
            })?;
        folders.push(EntryId(id as u32));
        prev = id;
    }
    r.finish()?;
    Ok(FoldersListed { upto, folders })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SenderToReceiver;

    fn decode(frame: &[u8]) -> Result<FoldersListed, DecodeError> {
        match SenderToReceiver::decode(frame)? {
            SenderToReceiver::FoldersListed(l) => Ok(l),
            other => panic!("decoded as {other:?}"),
        }
    }

    #[test]
    fn folders_listed_round_trip_in_any_order() {
        let folders = [7, 3, 3_000_000_000, 0, 12].map(EntryId);
        let frames = encode_folders_listed(Seq(99), &folders);
        assert_eq!(frames.len(), 1);
        assert_eq!(
            decode(&frames[0]).unwrap(),
            FoldersListed {
                upto: Seq(99),
                folders: folders.to_vec()
            }
        );
        assert!(encode_folders_listed(Seq(1), &[]).is_empty());
    }

    #[test]
    fn many_folders_are_cut_into_frames_under_the_cap() {
        let folders: Vec<EntryId> = (0..40_000u32).map(|i| EntryId(i * 100_000)).collect();
        let frames = encode_folders_listed(Seq(5), &folders);
        assert!(frames.len() > 1);
        let mut back = Vec::new();
        for f in &frames {
            assert!(f.len() <= MAX_FRAME_LEN, "{} bytes", f.len());
            back.extend(decode(f).unwrap().folders);
        }
        assert_eq!(back, folders);
    }

    #[test]
    fn a_lying_count_an_id_out_of_range_or_trailing_bytes_are_refused() {
        // Count 5 with two bytes left.
        assert!(decode(&[FRAME_FOLDERS_LISTED, 1, 5, 2, 2]).is_err());
        // No folders.
        assert!(decode(&[FRAME_FOLDERS_LISTED, 1, 0]).is_err());
        // Below 0: zigzag 1 is -1.
        assert!(decode(&[FRAME_FOLDERS_LISTED, 1, 1, 1]).is_err());
        // Trailing byte.
        let mut f = encode_folders_listed(Seq(1), &[EntryId(4)]).remove(0);
        f.push(0);
        assert!(decode(&f).is_err());
    }
}

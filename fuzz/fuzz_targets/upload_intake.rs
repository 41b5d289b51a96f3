//! The sharer's upload intake (`core::UploadsIn`) fed what a hostile visitor
//! could send and what its shell could answer: upload frames decoded from
//! anything, and begins, chunks (with right and wrong hashes), cancels and IO
//! results made from the input. No panic; the bounds hold: at most
//! `MAX_UPLOADS` open, and the IO queue no longer than what was accepted.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linkfs_core::upload_name::NameRules;
use linkfs_core::{UploadIo, UploadResult, UploadsIn};
use linkfs_proto::{
    ReceiverToSender, Rights, SESSION_UPLOAD_WINDOW, UploadBegin, UploadChunk, UploadId, UploadRefusal,
    upload_chunk_hash,
};

fuzz_target!(|data: &[u8]| {
    let rights = Rights {
        list: data.first().is_some_and(|b| b & 1 == 0),
        upload: true,
        max_file: u64::from(data.get(1).copied().unwrap_or(0)) << 12,
        bytes_left: 0,
        files_left: 0,
    };
    let names = NameRules {
        hidden: data.get(2).is_some_and(|b| b & 1 == 1),
    };
    let mut u = UploadsIn::new(rights, names);
    // What was begun: id, size, hash, next offset (to make chunks that pass).
    let mut begun: Vec<(UploadId, u64, [u8; 32], u64)> = Vec::new();
    let mut queued = 0usize;
    for (i, chunk) in data.chunks(23).enumerate() {
        let pick = |n: usize| chunk.get(n).copied().unwrap_or(0);
        let id = UploadId(u32::from(pick(0) % 8));
        match pick(1) % 7 {
            // Any frame, decoded as the sharer decodes a visitor's.
            0 => match ReceiverToSender::decode(chunk) {
                Ok(ReceiverToSender::UploadBegin(b)) => {
                    let _ = u.begin(b);
                }
                Ok(ReceiverToSender::UploadChunk(c)) => {
                    let _ = u.chunk(&c);
                }
                Ok(ReceiverToSender::UploadCancel { upload }) => u.cancel(upload),
                _ => {}
            },
            1 => {
                let size = u64::from(u16::from_le_bytes([pick(2), pick(3)]));
                let hash = *blake3::hash(chunk).as_bytes();
                let path = chunk[4.min(chunk.len())..].to_vec();
                if u.begin(UploadBegin { upload: id, size, hash, path }).is_ok() {
                    begun.retain(|b| b.0 != id);
                    begun.push((id, size, hash, 0));
                }
            }
            2 => {
                if let Some(b) = begun.iter_mut().find(|b| b.0 == id) {
                    let len = (u64::from(pick(2)) + 1).min(b.1.saturating_sub(b.3)).max(1);
                    let bytes = vec![pick(3); len as usize];
                    let hash = if pick(4) % 5 == 0 {
                        [0; 32]
                    } else {
                        upload_chunk_hash(&b.2, b.3, &bytes)
                    };
                    let offset = if pick(5) % 7 == 0 { b.3 + 1 } else { b.3 };
                    if u.chunk(&UploadChunk { upload: id, offset, hash, data: &bytes }).is_ok() {
                        b.3 += len;
                    }
                }
            }
            3 => u.cancel(id),
            4 => {
                let result = match pick(2) % 4 {
                    0 => UploadResult::Ready { offset: u64::from(pick(3)) },
                    1 => UploadResult::Written { end: u64::from(pick(3)) * 1024 },
                    2 => UploadResult::Landed { path: format!("p{i}"), renamed: pick(3) & 1 == 1 },
                    _ => UploadResult::Refused { code: UploadRefusal::Failed, message: "no".into() },
                };
                let _ = u.handle_io(id, result);
            }
            _ => {
                while let Some(io) = u.poll_io() {
                    queued += 1;
                    if let UploadIo::Write { data, .. } = &io {
                        assert!(data.len() as u64 <= SESSION_UPLOAD_WINDOW);
                    }
                }
                while u.poll_ack().is_some() {}
            }
        }
        assert!(u.open() <= linkfs_core::uploads_in::MAX_UPLOADS, "{} uploads open", u.open());
    }
    let _ = queued;
});

//! Host proofs seen, so a proof is used once (a captured `?role=host` URL
//! cannot open the room again), bounded so that nobody can fill the table.
//!
//! Anyone can make valid proofs (of a key of their own, with any nonce), so
//! the table is bounded twice: each client address may have at most
//! [`PER_ADDRESS`] proofs remembered at once, and the whole table
//! [`HOST_PROOFS_REMEMBERED`]. One address that makes proofs as fast as it
//! can is refused after its own share, and every other sharer still opens its
//! room; filling the table takes `HOST_PROOFS_REMEMBERED / PER_ADDRESS`
//! addresses at once. Proofs are forgotten after the window in which they are
//! valid, oldest first, in constant time each (they expire in the order they
//! came: every one lives the same time).
//!
//! Sans-IO: the caller passes the time in.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;

/// Host proofs remembered at most (each is valid for a few minutes): 100,000.
pub const HOST_PROOFS_REMEMBERED: usize = 100_000;

/// Host proofs remembered at most per client address: 256 in one window (a
/// sharer makes one each time it connects to the relay; 16 shares from one
/// address reconnecting every 40 s stay within it).
pub const PER_ADDRESS: u32 = 256;

/// Why a proof is not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProofRefused {
    /// This very proof was used before.
    UsedBefore,
    /// This address made [`PER_ADDRESS`] proofs in the window.
    TooManyFromAddress,
    /// [`HOST_PROOFS_REMEMBERED`] proofs are in their window.
    TooMany,
}

#[derive(Debug, Default)]
pub struct HostProofs {
    /// Signatures remembered, with when each is forgotten and whose it was,
    /// in the order they came (so in the order they expire).
    order: VecDeque<(u64, String, IpAddr)>,
    seen: HashSet<String>,
    per_address: HashMap<IpAddr, u32>,
}

impl HostProofs {
    /// Takes proof `sig` from `from` at `now` (seconds), remembered for `keep`
    /// seconds, or says why not.
    pub fn first_use(
        &mut self,
        sig: &str,
        from: IpAddr,
        now: u64,
        keep: u64,
    ) -> Result<(), ProofRefused> {
        self.forget_expired(now);
        if self.seen.contains(sig) {
            return Err(ProofRefused::UsedBefore);
        }
        let count = self.per_address.get(&from).copied().unwrap_or(0);
        if count >= PER_ADDRESS {
            return Err(ProofRefused::TooManyFromAddress);
        }
        if self.seen.len() >= HOST_PROOFS_REMEMBERED {
            return Err(ProofRefused::TooMany);
        }
        self.seen.insert(sig.to_owned());
        self.per_address.insert(from, count + 1);
        self.order
            .push_back((now.saturating_add(keep), sig.to_owned(), from));
        Ok(())
    }

    fn forget_expired(&mut self, now: u64) {
        while let Some((expiry, _, _)) = self.order.front() {
            if *expiry > now {
                break;
            }
            let Some((_, sig, from)) = self.order.pop_front() else {
                break;
            };
            self.seen.remove(&sig);
            if let Some(n) = self.per_address.get_mut(&from) {
                *n -= 1;
                if *n == 0 {
                    self.per_address.remove(&from);
                }
            }
        }
    }

    /// Proofs remembered now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEEP: u64 = 600;

    #[test]
    fn one_address_making_proofs_as_fast_as_it_can_does_not_keep_other_sharers_out() {
        let mut p = HostProofs::default();
        let flooder: IpAddr = "198.51.100.7".parse().unwrap();
        let sharer: IpAddr = "203.0.113.9".parse().unwrap();
        let mut taken = 0;
        for n in 0..(HOST_PROOFS_REMEMBERED as u32 + 10) {
            if p.first_use(&format!("flood-{n}"), flooder, 1_000, KEEP)
                .is_ok()
            {
                taken += 1;
            }
        }
        assert_eq!(taken, PER_ADDRESS, "the flooder's proofs taken");
        assert_eq!(
            p.first_use("flood-999999", flooder, 1_000, KEEP),
            Err(ProofRefused::TooManyFromAddress)
        );
        assert_eq!(p.first_use("sharer-1", sharer, 1_001, KEEP), Ok(()));
        assert_eq!(
            p.first_use("sharer-1", sharer, 1_002, KEEP),
            Err(ProofRefused::UsedBefore),
            "a proof is still used once"
        );
        // After the window the flooder's are forgotten, and it may go on.
        assert_eq!(p.first_use("flood-x", flooder, 1_000 + KEEP, KEEP), Ok(()));
        assert_eq!(p.len(), 2, "the sharer's and the flooder's new one");
    }

    #[test]
    fn the_whole_table_is_bounded_across_addresses() {
        let mut p = HostProofs::default();
        let mut refused = None;
        'fill: for a in 0..=u16::MAX {
            let from = IpAddr::from([10, 0, (a >> 8) as u8, a as u8]);
            for n in 0..PER_ADDRESS {
                if let Err(e) = p.first_use(&format!("{a}-{n}"), from, 5, KEEP) {
                    refused = Some(e);
                    break 'fill;
                }
            }
        }
        assert_eq!(refused, Some(ProofRefused::TooMany));
        assert_eq!(p.len(), HOST_PROOFS_REMEMBERED);
        assert_eq!(
            p.first_use("later", "10.9.9.9".parse().unwrap(), 5 + KEEP, KEEP),
            Ok(())
        );
        assert_eq!(p.len(), 1);
    }
}

//! Host proofs seen, so a proof is used once (a captured `?role=host` URL
//! cannot open the room again), bounded so that nobody can fill the table.
//!
//! Anyone can make valid proofs (of a key of their own, with any nonce), so
//! the table is bounded twice: each client address may have at most
//! [`per_address`] proofs remembered at once, and the whole table
//! [`HOST_PROOFS_REMEMBERED`]. One address that makes proofs as fast as it
//! can is refused after its own share, and every other sharer still opens its
//! room; filling the table takes `HOST_PROOFS_REMEMBERED / per_address`
//! addresses at once. Proofs are forgotten after the window in which they are
//! valid, oldest first, in constant time each (they expire in the order they
//! came: every one lives the same time).
//!
//! Sans-IO: the caller passes the time in.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;

/// Host proofs remembered at most (each is valid for a few minutes): 100,000.
pub const HOST_PROOFS_REMEMBERED: usize = 100_000;

/// Host proofs remembered at most per client address in one window, for a
/// relay that lets one address open `rooms_per_address` rooms: 16 per room (a
/// sharer makes one each time it connects to the relay, so a room's sharer may
/// reconnect every 40 s), 256 with the default 16 rooms, never past the whole
/// table.
pub fn per_address(rooms_per_address: usize) -> u32 {
    let n = rooms_per_address
        .saturating_mul(16)
        .clamp(256, HOST_PROOFS_REMEMBERED);
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Why a proof is not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProofRefused {
    /// This very proof was used before.
    UsedBefore,
    /// This address made [`per_address`] proofs in the window.
    TooManyFromAddress,
    /// [`HOST_PROOFS_REMEMBERED`] proofs are in their window.
    TooMany,
}

#[derive(Debug)]
pub struct HostProofs {
    /// Proofs remembered at most per address ([`per_address`]).
    limit: u32,
    /// Signatures remembered, with when each is forgotten and whose it was,
    /// in the order they came (so in the order they expire).
    order: VecDeque<(u64, String, IpAddr)>,
    seen: HashSet<String>,
    per_address: HashMap<IpAddr, u32>,
}

impl HostProofs {
    pub fn new(per_address: u32) -> HostProofs {
        HostProofs {
            limit: per_address,
            order: VecDeque::new(),
            seen: HashSet::new(),
            per_address: HashMap::new(),
        }
    }

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
        if count >= self.limit {
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
        let mut p = HostProofs::new(per_address(16));
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
        assert_eq!(taken, 256, "the flooder's proofs taken");
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
        let mut p = HostProofs::new(per_address(16));
        let mut refused = None;
        'fill: for a in 0..=u16::MAX {
            let from = IpAddr::from([10, 0, (a >> 8) as u8, a as u8]);
            for n in 0..256 {
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

    #[test]
    fn a_relay_that_lets_an_address_open_many_rooms_takes_as_many_proofs_from_it() {
        assert_eq!(per_address(16), 256);
        assert_eq!(per_address(10_000), 100_000);
        assert_eq!(per_address(usize::MAX), 100_000);
        let mut p = HostProofs::new(per_address(1_000));
        let one: IpAddr = "127.0.0.1".parse().unwrap();
        for n in 0..10_000 {
            assert_eq!(
                p.first_use(&format!("{n}"), one, 5, KEEP),
                Ok(()),
                "proof {n}"
            );
        }
    }
}

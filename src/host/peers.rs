//! Which bundle framing each peer reads (issue 25): the compact bundle (wire version 5,
//! keyed 6) goes to a peer only once a compact datagram has come from it; every other
//! peer gets version 3 (4 keyed), which every build since bundles reads. Older builds
//! drop versions they do not know (counted `bad_version`, SPEC 3) and refuse non-zero
//! bundle flags, so no version-3 datagram can announce the compact one; instead:
//!
//! - Learning: a compact datagram proves a build that reads it. A newer build still
//!   sends version 3 to a destination it does not know (to `Dest::All` while one peer
//!   is old or unheard), so a version-3 heartbeat from a peer known compact is no
//!   proof of an older build: the peer falls back to version 3 on a version-3
//!   datagram that carries a round's message (ELECT, VOTE, RESIGN: what an older build
//!   that replaced it sends first when it cannot read our LEADs), after
//!   `FALLBACK_STREAK` version-3 datagrams in a row (a newer build's probes break
//!   every streak long before), or, keyed, at once when its boot number changes (it
//!   restarted: it must be heard again).
//! - Probing: a heartbeat-only datagram (LEADs that are not RESIGNs, and ACKs) to a
//!   destination not known compact is, once in `PROBE_EVERY` such datagrams (the
//!   first included), followed by a compact copy of itself. An older peer drops the
//!   copy and has had the version-3 original: it misses nothing. (Replacing the
//!   original instead would cost an older peer one heartbeat in 64; with
//!   `missed-heartbeats 2`, the least the configuration allows, one lost LEAD can let
//!   a follower's faith lapse by the network's jitter, and one lost ACK the leader's
//!   lease by 2 x drift, so a copy it is.) A newer peer reads both; the copy comes
//!   second, so it learns at once and answers in compact. The duplicate is one the
//!   core takes as any duplicated datagram (a second ACK of the same LEAD). ELECTs,
//!   VOTEs and RESIGNs are never probes, nor copied: a round is never delayed or
//!   doubled by the upgrade.
//! - `Dest::All` (multicast, or the transport's unicast fan-out of one datagram) gets
//!   compact only when every configured peer is known compact.
//!
//! The state is three arrays indexed by server id (ids are 1..=255): bounded, no clock,
//! pure like the rest of the host. The hold and every other field still travel in
//! every datagram: nothing a receiver reads depends on an earlier datagram.

use crate::node::Dest;
use crate::wire::{self, Framing};

/// One heartbeat-only datagram in this many, to a destination not known to read the
/// compact bundle, is followed by a compact copy (a probe).
pub const PROBE_EVERY: u32 = 64;

/// Version-3 datagrams in a row, none of them a round's, after which a peer known
/// compact gets version 3 again: above the longest streak a newer build sends (its
/// probes to `Dest::All` and to this server each break it within `PROBE_EVERY`).
pub const FALLBACK_STREAK: u32 = 2 * PROBE_EVERY + 16;

/// What a peer is known to read.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum PeerWire {
    /// Nothing accepted from it yet (since this process started).
    #[default]
    Unknown,
    /// It sent version 1 to 4 and is not known to read more.
    Classic,
    /// It sent a compact bundle (version 5 or 6), and nothing since that says it was
    /// replaced by an older build.
    Compact,
}

/// Per server id, the framing it reads and the probe cadence towards it.
#[derive(Clone, Debug)]
pub struct PeerFramings {
    /// By server id (index 0 unused).
    heard: [PeerWire; 256],
    /// By server id: version-3 datagrams in a row since its last compact one.
    streak: [u32; 256],
    /// Heartbeat-only datagrams sent to each destination while it was not known
    /// compact: index 0 for `Dest::All`, else the server id.
    sent: [u32; 256],
}

impl Default for PeerFramings {
    fn default() -> Self {
        PeerFramings {
            heard: [PeerWire::Unknown; 256],
            streak: [0; 256],
            sent: [0; 256],
        }
    }
}

impl PeerFramings {
    /// An accepted datagram from `sender` came in `framing`; `round`: it carried an
    /// ELECT, VOTE or RESIGN. Returns true when that changed what `sender` is known to
    /// read.
    pub fn heard(&mut self, sender: u16, framing: Framing, round: bool) -> bool {
        let i = usize::from(sender);
        if sender == 0 || i >= self.heard.len() {
            return false;
        }
        let was = self.heard[i];
        let now = match framing {
            Framing::Compact => {
                self.streak[i] = 0;
                PeerWire::Compact
            }
            Framing::Bundle if was != PeerWire::Compact || round => PeerWire::Classic,
            Framing::Bundle => {
                self.streak[i] = self.streak[i].saturating_add(1);
                if self.streak[i] >= FALLBACK_STREAK {
                    PeerWire::Classic
                } else {
                    PeerWire::Compact
                }
            }
        };
        self.heard[i] = now;
        now != was
    }

    /// `peer` restarted (a new boot number): nothing is known of it until it is heard.
    pub fn restarted(&mut self, peer: u16) {
        if let Some(w) = self.heard.get_mut(usize::from(peer)) {
            *w = PeerWire::Unknown;
        }
    }

    /// What `peer` was last heard to send.
    pub fn of(&self, peer: u16) -> PeerWire {
        self.heard
            .get(usize::from(peer))
            .copied()
            .unwrap_or_default()
    }

    /// The framing for `dest`: compact for a peer known compact, or for `Dest::All`
    /// when every one of `peers` is; else version 3.
    pub fn framing(&self, dest: Dest, mut peers: impl Iterator<Item = u16>) -> Framing {
        let known = match dest {
            Dest::One(p) => self.of(p) == PeerWire::Compact,
            Dest::All => peers.all(|p| self.of(p) == PeerWire::Compact),
        };
        if known {
            Framing::Compact
        } else {
            Framing::Bundle
        }
    }

    /// Counts a version-3 datagram to `dest` of `entries`; true when it is to be
    /// followed by a compact copy (heartbeat-only, and the first of `PROBE_EVERY`).
    pub fn probe(&mut self, dest: Dest, entries: &[wire::Entry]) -> bool {
        let heartbeat_only = entries.iter().all(|e| {
            matches!(
                e.msg.body,
                wire::Body::Lead { resign: false, .. } | wire::Body::Ack { .. }
            )
        });
        let i = match dest {
            Dest::All => 0,
            Dest::One(p) => usize::from(p),
        };
        let Some(n) = self.sent.get_mut(i).filter(|_| heartbeat_only) else {
            return false;
        };
        let probe = *n % PROBE_EVERY == 0;
        *n = n.wrapping_add(1) % PROBE_EVERY;
        probe
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Body, Entry, Message, PeerSet};

    fn entry(body: Body) -> Entry {
        Entry {
            group: 0,
            msg: Message {
                sender: 1,
                fingerprint: 1,
                term: 1,
                body,
            },
        }
    }

    fn lead(resign: bool) -> Entry {
        entry(Body::Lead {
            seq: 2,
            hold_ms: 300,
            resign,
            successor: 0,
            unfit: false,
            alive: PeerSet::EMPTY,
            acks: PeerSet::EMPTY,
        })
    }

    #[test]
    fn a_compact_datagram_teaches_and_a_round_in_version_3_unteaches() {
        let mut p = PeerFramings::default();
        let peers = || [2u16, 3].into_iter();
        assert_eq!(p.framing(Dest::One(2), peers()), Framing::Bundle);
        assert!(p.heard(2, Framing::Bundle, false));
        assert_eq!(p.of(2), PeerWire::Classic);
        assert!(p.heard(2, Framing::Compact, false));
        assert!(!p.heard(2, Framing::Compact, false));
        assert_eq!(p.framing(Dest::One(2), peers()), Framing::Compact);
        assert_eq!(p.framing(Dest::All, peers()), Framing::Bundle, "3 unknown");
        p.heard(3, Framing::Compact, false);
        assert_eq!(p.framing(Dest::All, peers()), Framing::Compact);
        // Version-3 heartbeats from a newer build (its LEADs to All while another peer
        // is old) do not unteach, short of a streak no newer build sends.
        for _ in 1..FALLBACK_STREAK {
            assert!(!p.heard(3, Framing::Bundle, false));
        }
        p.heard(3, Framing::Compact, false);
        for _ in 1..FALLBACK_STREAK {
            p.heard(3, Framing::Bundle, false);
        }
        assert_eq!(p.of(3), PeerWire::Compact);
        assert!(p.heard(3, Framing::Bundle, false), "the streak's end");
        assert_eq!(p.framing(Dest::All, peers()), Framing::Bundle);
        // A round's message in version 3 (an older build that replaced server 2 and
        // cannot read our LEADs): back to version 3 at once, for All as well.
        assert!(p.heard(2, Framing::Bundle, true));
        assert_eq!(p.framing(Dest::One(2), peers()), Framing::Bundle);
        // A restart (new boot number): unknown until heard.
        p.heard(2, Framing::Compact, false);
        p.restarted(2);
        assert_eq!(p.of(2), PeerWire::Unknown);
        assert!(!p.heard(0, Framing::Compact, false));
        assert_eq!(p.of(0), PeerWire::Unknown);
    }

    #[test]
    fn only_heartbeats_probe_once_in_64() {
        let mut p = PeerFramings::default();
        let hb = [
            lead(false),
            entry(Body::Ack {
                seq: 2,
                unfit: false,
            }),
        ];
        let probes = (0..200).filter(|_| p.probe(Dest::One(2), &hb)).count();
        assert_eq!(probes, 4, "datagrams 0, 64, 128 and 192");
        let mut q = PeerFramings::default();
        assert!(q.probe(Dest::All, &hb), "the first heartbeat probes");
        assert!(!q.probe(Dest::All, &hb));
        for e in [
            lead(true),
            entry(Body::Vote { candidate: 2 }),
            entry(Body::Elect {
                last_term: 0,
                last_seq: 0,
                priority: 0,
                heard: 1,
                ineligible: false,
                last_resort: false,
            }),
        ] {
            let mut r = PeerFramings::default();
            for _ in 0..200 {
                assert!(!r.probe(Dest::One(3), &[lead(false), e]), "{e:?}");
            }
        }
    }
}

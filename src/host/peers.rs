//! Which bundle framing each peer reads (issue 25). The framings are ordered levels,
//! each read by the builds that speak it and by every later one: version 3 (4 keyed,
//! `Classic`), which every build since bundles reads; the compact bundle, version 5 (6
//! keyed, `Compact`); and the compact bundle with ack maps, version 7 (8 keyed,
//! `CompactAcks`). A peer gets the highest level it has been heard to send, never more
//! than this build speaks (`PeerFramings::top`); a peer not heard yet gets version 3.
//! Older builds drop versions they do not know (counted `bad_version`, SPEC 3) and
//! refuse unknown bundle flags, so no datagram can announce a higher level; instead:
//!
//! - Learning: a datagram of level L proves a build that reads L: the peer is raised
//!   to L at once. A newer build still sends a lower level to a destination it does
//!   not know at its top (to `Dest::All` while one peer is older or unheard), so a
//!   lower-level heartbeat from a peer known higher is no proof of an older build: the
//!   peer is lowered to that level on a lower-level datagram that carries a round's
//!   message (ELECT, VOTE, RESIGN: what an older build that replaced it sends first
//!   when it cannot read our LEADs), after `FALLBACK_STREAK` lower-level datagrams in a
//!   row (a newer build's probes break every streak long before), or, keyed, to
//!   unknown at once when its boot number changes (it restarted: it must be heard
//!   again).
//! - Probing: a heartbeat-only datagram (LEADs that are not RESIGNs, and ACKs) to a
//!   destination not known at the top level is, once in `PROBE_EVERY` such datagrams
//!   (the first included), followed by a copy of itself in the top level. An older
//!   peer drops the copy and has had the original in the level it reads: it misses
//!   nothing. (Replacing the original instead would cost an older peer one heartbeat
//!   in 64; with `missed-heartbeats 2`, the least the configuration allows, one lost
//!   LEAD can let a follower's faith lapse by the network's jitter, and one lost ACK
//!   the leader's lease by 2 x drift, so a copy it is.) A newer peer reads both; the
//!   copy comes second, so it learns at once and answers in the top level. The
//!   duplicate is one the core takes as any duplicated datagram (a second ACK of the
//!   same LEAD; a LEAD whose copy may name the followers asked to acknowledge it while
//!   the original, unable to carry the ack map, asks every follower). ELECTs, VOTEs and
//!   RESIGNs are never probes, nor copied: a round is never delayed or doubled by the
//!   upgrade. A peer learned at a level (raised, lowered or restarted), or heard in a
//!   level below the one it is known at (the first such datagram in a row: it may not
//!   know that this host reads more, having restarted, unkeyed, and heard it to
//!   `Dest::All` in a lower level), restarts the cadence towards it and towards
//!   `Dest::All`: the next heartbeat datagram that reaches it, if not in the top
//!   level, is followed by a copy, so that two builds that speak the top level learn
//!   each other within a heartbeat of either one learning the other, not a cadence
//!   later. (The lower-level hint counts once per level learned: two newer builds
//!   that both send to `Dest::All` in a lower level would otherwise answer each
//!   other's probes with probes.) A v5-only peer drops these copies and is
//!   learned from its own (version-5) probes; a v3-only peer likewise.
//! - `Dest::All` (multicast, or the transport's unicast fan-out of one datagram) gets
//!   the lowest level known among the configured peers (version 3 while one is unheard).
//!
//! The state is three arrays indexed by server id (ids are 1..=255): bounded, no clock,
//! pure like the rest of the host. The hold and every other field still travel in
//! every datagram: nothing a receiver reads depends on an earlier datagram.

use crate::node::Dest;
use crate::wire::{self, Framing};

/// One heartbeat-only datagram in this many, to a destination not known to read the
/// top level, is followed by a copy in the top level (a probe).
pub const PROBE_EVERY: u32 = 64;

/// Lower-level datagrams in a row, none of them a round's, after which a peer known at
/// a level gets the lower one again: above the longest streak a newer build sends (its
/// probes to `Dest::All` and to this server each break it within `PROBE_EVERY`).
pub const FALLBACK_STREAK: u32 = 2 * PROBE_EVERY + 16;

/// What a peer is known to read, lowest first.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PeerWire {
    /// Nothing accepted from it yet (since this process started, or since it
    /// restarted).
    #[default]
    Unknown,
    /// It sent version 1 to 4 and is not known to read more.
    Classic,
    /// It sent a compact bundle (version 5 or 6), and is not known to read more.
    Compact,
    /// It sent a compact bundle with ack maps (version 7 or 8).
    CompactAcks,
}

impl PeerWire {
    /// The level a datagram of `framing` proves.
    pub fn of(framing: Framing) -> PeerWire {
        match framing {
            Framing::Bundle => PeerWire::Classic,
            Framing::Compact => PeerWire::Compact,
            Framing::CompactAcks => PeerWire::CompactAcks,
        }
    }

    /// The framing a peer of this level reads (version 3 when unknown).
    pub fn framing(self) -> Framing {
        match self {
            PeerWire::Unknown | PeerWire::Classic => Framing::Bundle,
            PeerWire::Compact => Framing::Compact,
            PeerWire::CompactAcks => Framing::CompactAcks,
        }
    }
}

/// Per server id, the level it reads and the probe cadence towards it.
#[derive(Clone, Debug)]
pub struct PeerFramings {
    /// By server id (index 0 unused).
    heard: [PeerWire; 256],
    /// By server id: datagrams below its level in a row.
    streak: [u32; 256],
    /// By server id: a lower-level datagram already restarted the probe cadence since
    /// its level was last learned (once per level learned).
    hinted: [bool; 256],
    /// Heartbeat-only datagrams sent to each destination while it was not known at the
    /// top level: index 0 for `Dest::All`, else the server id (modulo `PROBE_EVERY`).
    sent: [u32; 256],
    /// The highest framing this host speaks (`Framing::TOP`, lower only in tests
    /// that emulate older builds).
    top: Framing,
}

impl Default for PeerFramings {
    fn default() -> Self {
        PeerFramings {
            heard: [PeerWire::Unknown; 256],
            streak: [0; 256],
            hinted: [false; 256],
            sent: [0; 256],
            top: Framing::TOP,
        }
    }
}

impl PeerFramings {
    /// The highest framing this host speaks.
    pub fn top(&self) -> Framing {
        self.top
    }

    /// Caps what this host speaks at `top` (tests emulating older builds): nothing
    /// above it is sent, and `Host` decodes nothing above it.
    pub fn cap(&mut self, top: Framing) {
        self.top = top;
    }

    /// An accepted datagram from `sender` came in `framing`; `round`: it carried an
    /// ELECT, VOTE or RESIGN. Returns true when that changed what `sender` is known to
    /// read.
    pub fn heard(&mut self, sender: u16, framing: Framing, round: bool) -> bool {
        let i = usize::from(sender);
        if sender == 0 || i >= self.heard.len() {
            return false;
        }
        let was = self.heard[i];
        let at = PeerWire::of(framing.min(self.top));
        let now = if at >= was || round {
            self.streak[i] = 0;
            at
        } else {
            self.streak[i] = self.streak[i].saturating_add(1);
            if self.streak[i] == 1 && !self.hinted[i] {
                // The first lower datagram since one of its level: maybe it does not
                // know that we read its level (it restarted, unkeyed, and heard us
                // in a lower level to All). Our next heartbeat to it or to All, if
                // below the top, is followed by a copy. Once per level learned: two
                // newer builds that both send to All in a lower level (for an older
                // or unheard peer) would otherwise answer each other's probes with
                // probes, every heartbeat.
                self.hinted[i] = true;
                self.learned(i);
            }
            if self.streak[i] >= FALLBACK_STREAK {
                self.streak[i] = 0;
                at
            } else {
                was
            }
        };
        self.heard[i] = now;
        if now != was {
            self.hinted[i] = false;
            self.learned(i);
        }
        now != was
    }

    /// `peer` restarted (a new boot number): nothing is known of it until it is heard.
    pub fn restarted(&mut self, peer: u16) {
        let i = usize::from(peer);
        if let Some(w) = self.heard.get_mut(i).filter(|_| peer != 0) {
            *w = PeerWire::Unknown;
            self.streak[i] = 0;
            self.hinted[i] = false;
            self.learned(i);
        }
    }

    /// What is known of server `i` changed: the next heartbeat datagram to it or to
    /// `Dest::All`, if below the top level, is followed by a copy (a probe), so a peer
    /// that reads the top level learns at once that this host does.
    fn learned(&mut self, i: usize) {
        self.sent[i] = 0;
        self.sent[0] = 0;
    }

    /// What `peer` was last heard to send.
    pub fn of(&self, peer: u16) -> PeerWire {
        self.heard
            .get(usize::from(peer))
            .copied()
            .unwrap_or_default()
    }

    /// The framing for `dest`: the level `Dest::One(p)` is known to read, or for
    /// `Dest::All` the lowest level known among `peers` (for `Dest::Only`, among
    /// those it names; the host sends those one by one); never above the top level.
    pub fn framing(&self, dest: Dest, peers: impl Iterator<Item = u16>) -> Framing {
        let known = match dest {
            Dest::One(p) => self.of(p).framing(),
            Dest::Only(set) => set
                .iter()
                .map(|p| self.of(p).framing())
                .min()
                .unwrap_or(self.top),
            Dest::All => peers
                .map(|p| self.of(p).framing())
                .min()
                .unwrap_or(self.top),
        };
        known.min(self.top)
    }

    /// Counts a datagram below the top level to `dest` of `entries`; true when it is to
    /// be followed by a copy in the top level (heartbeat-only, and the first of
    /// `PROBE_EVERY`).
    pub fn probe(&mut self, dest: Dest, entries: &[wire::Entry]) -> bool {
        let heartbeat_only = entries.iter().all(|e| {
            matches!(
                e.msg.body,
                wire::Body::Lead { resign: false, .. } | wire::Body::Ack { .. }
            )
        });
        let i = match dest {
            Dest::All | Dest::Only(_) => 0,
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

impl super::Host {
    /// Caps the framings this host speaks at `top`, to emulate an older build in
    /// tests: `Framing::Compact` is a build of versions 1 to 6 (before the ack map),
    /// `Framing::Bundle` one of versions 1 to 4 (before the compact bundle). It sends
    /// nothing above `top` (originals and probes' copies alike) and drops every
    /// datagram above it as such a build does (`bad_version`, or `too_long` when longer
    /// than a single message).
    #[doc(hidden)]
    pub fn cap_wire(&mut self, top: Framing) {
        self.wire.cap(top);
    }

    /// The highest framing this host speaks (`Framing::TOP` unless capped).
    pub fn wire_top(&self) -> Framing {
        self.wire.top()
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

    use Framing::{Bundle, Compact, CompactAcks};

    /// Heartbeat-only datagrams to `dest` in a row, and which of them probe.
    fn probes(p: &mut PeerFramings, dest: Dest, n: usize) -> Vec<usize> {
        (0..n).filter(|_| p.probe(dest, &[lead(false)])).collect()
    }

    #[test]
    fn a_datagram_of_a_level_raises_to_it_at_once() {
        let mut p = PeerFramings::default();
        let peers = || [2u16, 3].into_iter();
        assert_eq!(p.framing(Dest::One(2), peers()), Bundle, "unknown");
        assert!(p.heard(2, Bundle, false));
        assert_eq!(p.of(2), PeerWire::Classic);
        assert!(p.heard(2, Compact, false));
        assert_eq!(p.framing(Dest::One(2), peers()), Compact);
        assert!(p.heard(2, CompactAcks, false));
        assert!(!p.heard(2, CompactAcks, false));
        assert_eq!(p.of(2), PeerWire::CompactAcks);
        assert_eq!(p.framing(Dest::One(2), peers()), CompactAcks);
        // Straight from unknown to the top as well.
        assert!(p.heard(3, CompactAcks, false));
        assert_eq!(p.framing(Dest::One(3), peers()), CompactAcks);
        assert!(!p.heard(0, CompactAcks, false));
        assert_eq!(p.of(0), PeerWire::Unknown);
    }

    #[test]
    fn all_gets_the_lowest_level_among_the_peers() {
        let mut p = PeerFramings::default();
        let peers = || [2u16, 3, 4].into_iter();
        p.heard(2, CompactAcks, false);
        p.heard(3, CompactAcks, false);
        assert_eq!(p.framing(Dest::All, peers()), Bundle, "4 unheard");
        p.heard(4, Compact, false);
        assert_eq!(p.framing(Dest::All, peers()), Compact);
        p.heard(4, CompactAcks, false);
        assert_eq!(p.framing(Dest::All, peers()), CompactAcks);
        p.heard(3, Bundle, true);
        assert_eq!(p.framing(Dest::All, peers()), Bundle);
        assert_eq!(p.framing(Dest::One(2), peers()), CompactAcks);
        assert_eq!(p.framing(Dest::All, std::iter::empty()), CompactAcks);
    }

    #[test]
    fn a_round_lowers_at_once_and_heartbeats_only_after_a_streak() {
        let peers = || [2u16].into_iter();
        for lower in [Bundle, Compact] {
            let mut p = PeerFramings::default();
            p.heard(2, CompactAcks, false);
            // Lower heartbeats from a newer build (to All while another peer is
            // older) do not lower it, short of a streak no newer build sends.
            for _ in 1..FALLBACK_STREAK {
                assert!(!p.heard(2, lower, false));
            }
            p.heard(2, CompactAcks, false);
            for _ in 1..FALLBACK_STREAK {
                p.heard(2, lower, false);
            }
            assert_eq!(p.of(2), PeerWire::CompactAcks, "{lower:?}");
            assert!(p.heard(2, lower, false), "the streak's end");
            assert_eq!(p.framing(Dest::One(2), peers()), lower);
            // A round's message in a lower level: lowered at once.
            p.heard(2, CompactAcks, false);
            assert!(p.heard(2, lower, true));
            assert_eq!(p.of(2), PeerWire::of(lower));
        }
        // A compact heartbeat breaks a streak of version 3 towards a compact peer, and
        // a version-3 round lowers a compact peer.
        let mut p = PeerFramings::default();
        p.heard(2, Compact, false);
        for _ in 0..3 * FALLBACK_STREAK {
            p.heard(2, Bundle, false);
            p.heard(2, Compact, false);
        }
        assert_eq!(p.of(2), PeerWire::Compact);
        assert!(p.heard(2, Bundle, true));
        // A restart (new boot number): unknown until heard.
        p.heard(2, CompactAcks, false);
        p.restarted(2);
        assert_eq!(p.of(2), PeerWire::Unknown);
        assert_eq!(p.framing(Dest::One(2), peers()), Bundle);
    }

    #[test]
    fn a_capped_host_speaks_nothing_above_its_cap() {
        let mut p = PeerFramings::default();
        p.cap(Compact);
        assert_eq!(p.top(), Compact);
        p.heard(2, CompactAcks, false);
        assert_eq!(p.of(2), PeerWire::Compact);
        assert_eq!(p.framing(Dest::One(2), [2u16].into_iter()), Compact);
        assert_eq!(p.framing(Dest::All, std::iter::empty()), Compact);
    }

    #[test]
    fn learning_restarts_the_probe_cadence() {
        let mut p = PeerFramings::default();
        assert_eq!(probes(&mut p, Dest::One(2), 10), [0], "the first probes");
        assert_eq!(probes(&mut p, Dest::All, 10), [0]);
        // Server 2 heard in version 5: what it knows of us may be old, so the next
        // heartbeat to it (and to All) is followed by a top-level copy, not 54 later.
        p.heard(2, Compact, false);
        assert_eq!(probes(&mut p, Dest::One(2), 70), [0, 64]);
        assert_eq!(probes(&mut p, Dest::All, 10), [0]);
        // Nothing new (the same level again): the cadence goes on.
        p.heard(2, Compact, false);
        assert_eq!(probes(&mut p, Dest::One(2), 10), []);
        // Other peers' cadences are their own.
        assert_eq!(probes(&mut p, Dest::One(3), 3), [0]);
        p.heard(2, CompactAcks, false);
        assert_eq!(probes(&mut p, Dest::One(3), 3), []);
        assert_eq!(probes(&mut p, Dest::All, 3), [0]);
        p.restarted(2);
        assert_eq!(probes(&mut p, Dest::One(2), 3), [0]);
        // Known at the top, heard lower: the first such datagram in a row restarts the
        // cadence (it may not know we read more), the next ones do not.
        p.heard(2, CompactAcks, false);
        assert_eq!(probes(&mut p, Dest::One(2), 3), [0]);
        assert!(!p.heard(2, Compact, false));
        assert_eq!(probes(&mut p, Dest::All, 3), [0]);
        assert!(!p.heard(2, Compact, false));
        assert_eq!(probes(&mut p, Dest::All, 3), []);
        assert_eq!(p.of(2), PeerWire::CompactAcks);
        // Once per level learned: its probes break the streak, and the next lower
        // datagram does not restart the cadence again (no probe ping-pong between
        // two newer builds that both send to All in a lower level).
        for _ in 0..10 {
            p.heard(2, CompactAcks, false);
            p.heard(2, Compact, false);
            assert_eq!(probes(&mut p, Dest::All, 1), []);
        }
        // Until it is learned anew.
        p.heard(2, Compact, true);
        p.heard(2, CompactAcks, false);
        p.heard(2, Compact, false);
        assert_eq!(probes(&mut p, Dest::All, 64), [0]);
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

//! The flush: every group's outputs after an input (SPEC sections 4 and 15). One write
//! of the state file for every group that asked is handed out (`poll_write`); nothing
//! that waits for it leaves before the driver reports it done (each core holds back
//! what it queued after its request until `handle_persisted`). Events go out in order;
//! then the datagrams, batched per destination, with a leader's heartbeats of all its
//! groups aligned into one.
//!
//! One write is in flight at a time; requests made meanwhile (the latest per group) go
//! into the next. Meanwhile what no pending write holds still leaves: other groups'
//! LEADs, and a steady leader's heartbeats (a leader asks for a write only when its
//! term or hold promise changes).

use super::*;
use crate::node::Output;
use crate::wire::Framing;

/// The steps of one flush, as [`flush_passes`] sequences them.
pub trait FlushSteps {
    /// Takes every group's queued outputs.
    fn drain(&mut self, now: Time);
    /// Hands out the state file's write if a group asked and none is in flight.
    fn start_write(&mut self);
    /// True when a LEAD is about to leave.
    fn has_heartbeat(&self) -> bool;
    /// False only when alignment is switched off (a negative control).
    fn may_align(&self) -> bool {
        true
    }
    /// Lets every led group send its LEAD now if due within HBT/2.
    fn align(&mut self, now: Time);
}

/// Drains, starts the write and aligns until nothing is left: what waits for a write
/// stays held in its core until the write is confirmed, and one heartbeat alignment.
/// After the alignment the groups are always drained again, whether or not a LEAD was
/// pulled: the alignment passes time to every group, and a timer that fired there (an
/// ELECT, a VOTE, a RESIGN) must leave in this flush, not at the next wakeup, up to a
/// heartbeat later (issue 20).
pub fn flush_passes<S: FlushSteps>(s: &mut S, now: Time) {
    let mut aligned = false;
    // Bounded: each pass aligns once or finds nothing left.
    for _ in 0..64 {
        s.drain(now);
        s.start_write();
        if !aligned && s.may_align() && s.has_heartbeat() {
            aligned = true;
            s.align(now);
            continue;
        }
        break;
    }
}

impl FlushSteps for Host {
    fn drain(&mut self, now: Time) {
        self.drain_outputs(now);
    }

    fn start_write(&mut self) {
        self.submit_write();
    }

    fn has_heartbeat(&self) -> bool {
        self.outbox.iter().any(|(_, e)| is_heartbeat(&e.msg))
    }

    fn may_align(&self) -> bool {
        !self.sabotage.no_align
    }

    fn align(&mut self, now: Time) {
        for g in &mut self.groups {
            let within = g.node.heartbeat() / 2;
            g.node.handle_heartbeat_due(now, within);
        }
    }
}

impl Host {
    /// Drains every group's core: the write (handed out, one write of the state file
    /// for all groups; what waits for it stays held in the cores), events, then the
    /// datagrams, batched per destination (SPEC section 15). When a LEAD leaves, the
    /// other groups this server leads send theirs now if due within HBT/2, so every
    /// group's heartbeat shares one datagram and their ACKs come back in one. Every
    /// `handle_*` ends with it; call it after changing a core through `group_mut`.
    pub fn flush(&mut self, now: Time) -> Result<(), HostError> {
        self.unflushed = false;
        self.release_clear(now);
        self.apply_health(now);
        flush_passes(self, now);
        if self.sabotage.confirm_early {
            self.confirm_now(now);
        }
        self.send_outbox()?;
        if self.boot_pending {
            // A new boot number goes to disk before a datagram that carries it leaves.
            self.submit_write();
        }
        self.push_lines(now);
        Ok(())
    }

    /// The sabotage `confirm_early`: the write in flight is confirmed before it is
    /// durable, and what it released is drained into this flush.
    fn confirm_now(&mut self, now: Time) {
        let Some(f) = self.in_flight.as_mut() else {
            return;
        };
        let states = std::mem::take(&mut f.states);
        if states.is_empty() {
            return;
        }
        for (g, state) in states {
            self.groups[g].durable = state;
            self.groups[g].node.handle_persisted(now, state);
        }
        flush_passes(self, now);
    }

    /// Hands out the state file as it should be (every group's newest state) when some
    /// group asked and no write is in flight.
    fn submit_write(&mut self) {
        if self.in_flight.is_some()
            || !(self.extra_dirty || self.groups.iter().any(|g| g.want.is_some()))
        {
            return;
        }
        let mut all = self.kept.clone();
        let mut states = Vec::new();
        let mut by_group = Vec::with_capacity(self.groups.len());
        for (i, g) in self.groups.iter_mut().enumerate() {
            let state = g.want.take();
            all.insert(g.name.clone(), state.unwrap_or(g.durable));
            by_group.push(state.unwrap_or(g.durable));
            states.extend(state.map(|s| (i, s)));
        }
        self.extra_dirty = false;
        self.writes_submitted += 1;
        self.write = Some(StateWrite {
            groups: all,
            extra: self.extra.clone(),
            by_group,
        });
        self.in_flight = Some(InFlight {
            states,
            boot: self.boot_pending,
        });
    }

    /// Takes every group's queued outputs: sends go to the outbox, writes are noted
    /// (the latest per group holds everything before it), events are passed on.
    fn drain_outputs(&mut self, now: Time) {
        for g in 0..self.groups.len() {
            while let Some(out) = self.groups[g].node.poll_output() {
                match out {
                    // Each named follower alone, so it shares the datagram with what
                    // else goes to it (another group's heartbeat or ACK); and every peer
                    // not known to read the ack map (a build before version 7, or not
                    // heard yet): it reads every LEAD as asking it, so it never waits
                    // the heartbeat of room for its next turn, and must have every one
                    // (the review's `an_older_follower_losing_one_lead_opens_no_round`).
                    Output::Send {
                        dest: Dest::Only(set),
                        msg,
                    } if self.cfg.unicast => {
                        let entry = wire::Entry {
                            group: g as u8,
                            msg,
                        };
                        for (id, _) in self.groups[g].node.peers() {
                            if set.contains(id)
                                || (!self.sabotage.named_only
                                    && self.wire.framing(Dest::One(id), std::iter::empty())
                                        < Framing::CompactAcks)
                            {
                                self.outbox.push((Dest::One(id), entry));
                            }
                        }
                    }
                    Output::Send { dest, msg } => self.outbox.push((
                        match dest {
                            Dest::Only(_) => Dest::All,
                            d => d,
                        },
                        wire::Entry {
                            group: g as u8,
                            msg,
                        },
                    )),
                    Output::Persist(state) => self.groups[g].want = Some(state),
                    Output::Event(e) => self.on_event(now, g, e),
                }
            }
        }
    }

    /// An event of group `g`: logged as the daemon always did, passed on in order. A
    /// handoff's RESIGN is released at once when no supervisor must confirm first
    /// (the registry is clear), so it leaves in this flush.
    fn on_event(&mut self, now: Time, g: usize, e: Event) {
        let tag = self.tag(g);
        let mut released = false;
        match e {
            Event::DualLeader { term, other } => {
                log::error!("{tag}server {other} also led term {term}")
            }
            Event::Elected { term } => log::debug!("{tag}won the round of term {term}"),
            Event::Resigning { until, .. } => {
                self.groups[g].resign_began = now;
                self.groups[g].resign_until = Some(until);
                if self.registry_clear(g, now) {
                    released = true;
                    self.groups[g].node.handle_released(now);
                }
            }
            Event::Resigned { .. } => self.groups[g].resign_until = None,
            _ => {}
        }
        self.notices.push_back(Notice::Event {
            group: g,
            event: e,
            released,
        });
    }

    /// Encodes what the flush queued: per destination one bundle (split at
    /// `wire::MAX_BUNDLE_LEN`), in the order queued within it, in the framing that
    /// destination reads; a heartbeat-only datagram below the top level is now and then
    /// followed by its copy in the top level, the probe (`peers.rs`). Reuses the scratch vectors: a
    /// steady heartbeat allocates nothing.
    fn send_outbox(&mut self) -> Result<(), HostError> {
        if self.outbox.is_empty() {
            return Ok(());
        }
        let mut outbox = std::mem::take(&mut self.outbox);
        let mut dests = std::mem::take(&mut self.scratch.dests);
        let mut entries = std::mem::take(&mut self.scratch.sending);
        dests.clear();
        for (d, _) in &outbox {
            if !dests.contains(d) {
                dests.push(*d);
            }
        }
        let mut r = Ok(());
        for &dest in &dests {
            entries.clear();
            entries.extend(outbox.iter().filter(|(d, _)| *d == dest).map(|(_, e)| *e));
            r = self.send_to(dest, &entries);
            if r.is_err() {
                break;
            }
        }
        outbox.clear();
        self.outbox = outbox;
        self.scratch.dests = dests;
        self.scratch.sending = entries;
        r
    }

    /// The datagrams of `entries`, all for `dest` (`send_outbox`).
    fn send_to(&mut self, dest: Dest, entries: &[wire::Entry]) -> Result<(), HostError> {
        let framing = self.framing_for(dest);
        let keyed = self.keys.is_some();
        for run in wire::runs(framing, entries, keyed) {
            let part = &entries[run];
            let mut kinds = [0u64; 5];
            for e in part {
                kinds[e.msg.body.kind() as usize] += 1;
            }
            let bytes = self.encode(framing, part)?;
            self.push_transmit(Transmit {
                to: dest,
                bytes,
                kinds,
            });
            // The copy is in the top level this host speaks. One that would pass
            // MAX_BUNDLE_LEN (longer than its original: ack maps, or a version-3
            // original of terms and seqs near 2^64) is not sent.
            let top = self.wire.top();
            if framing < top
                && wire::bundle_len(top, part, keyed) <= wire::MAX_BUNDLE_LEN
                && self.wire.probe(dest, part)
            {
                let bytes = self.encode(top, part)?;
                self.metrics.probes += 1;
                self.push_transmit(Transmit {
                    to: dest,
                    bytes,
                    kinds: [0; 5],
                });
            }
        }
        Ok(())
    }

    /// The framing `dest` reads (`peers.rs`); the peers are those of the server list.
    fn framing_for(&self, dest: Dest) -> Framing {
        match self.groups.first() {
            Some(g) => self.wire.framing(dest, g.node.peers().map(|(id, _)| id)),
            None => Framing::Bundle,
        }
    }

    /// One datagram of `entries` in `framing`, keyed with the next counter when keys
    /// are configured, in a buffer handed back by the driver if there is one.
    fn encode(&mut self, framing: Framing, part: &[wire::Entry]) -> Result<Vec<u8>, HostError> {
        let mut bytes = self
            .scratch
            .pool
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(wire::MAX_BUNDLE_LEN));
        let (id, fp) = (self.cfg.id, part[0].msg.fingerprint);
        let counter = match self.keys {
            Some(_) => Some(self.next_counter()?),
            None => None,
        };
        let key = counter.zip(self.keys.as_ref().map(|k| &k.current));
        wire::encode_in(framing, id, fp, part, key, &mut bytes);
        self.metrics.encoded[framing.index()] += 1;
        Ok(bytes)
    }

    /// Takes back the buffer of a datagram sent (`Transmit::bytes`), for a later
    /// datagram: a driver that hands every one back makes the steady heartbeat free
    /// of allocations (issue 25). Optional; at most `POOL` are kept.
    pub fn recycle(&mut self, mut bytes: Vec<u8>) {
        if self.scratch.pool.len() < POOL && bytes.capacity() >= wire::MAX_BUNDLE_LEN {
            bytes.clear();
            self.scratch.pool.push(bytes);
        }
    }

    /// Queues `t`, or holds it while a new boot number is not yet on disk.
    fn push_transmit(&mut self, t: Transmit) {
        if self.boot_pending {
            self.held.push(t);
        } else {
            self.transmits.push_back(t);
        }
    }

    /// The next counter of a keyed datagram: boot number, then a sequence within it.
    /// After 2^32 datagrams in one boot a new boot number is taken; the datagrams that
    /// carry it are held until a write has put it on disk.
    fn next_counter(&mut self) -> Result<u64, HostError> {
        self.send_seq = self.send_seq.wrapping_add(1);
        if self.send_seq == 0 {
            self.extra.boot = self
                .extra
                .boot
                .checked_add(1)
                .ok_or_else(|| HostError("boot counter exhausted".into()))?;
            self.extra_dirty = true;
            self.boot_pending = true;
            self.send_seq = 1;
        }
        Ok(u64::from(self.extra.boot) << 32 | u64::from(self.send_seq))
    }
}

/// Datagram buffers kept for reuse ([`Host::recycle`]): a flush sends one per
/// destination (and a probe now and then); more are rare and may allocate.
const POOL: usize = 8;

/// What the datagram path and the flush reuse from one input to the next, so the
/// steady heartbeat allocates nothing (issue 25).
#[derive(Debug, Default)]
pub(super) struct Scratch {
    /// The entries of the datagram being handled (`recv.rs`).
    pub(super) entries: Vec<wire::Entry>,
    /// The outbox's destinations, in order, and the entries for one of them.
    dests: Vec<Dest>,
    sending: Vec<wire::Entry>,
    /// Buffers of sent datagrams handed back, the latest last (reused first: warm).
    pool: Vec<Vec<u8>>,
}

/// True for a heartbeat (a LEAD that is not a RESIGN).
pub fn is_heartbeat(msg: &wire::Message) -> bool {
    matches!(msg.body, wire::Body::Lead { resign: false, .. })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flush of two groups: group 0 sends a LEAD; in the alignment, time passes to
    /// group 1 and its elector timer fires (an ELECT).
    #[derive(Default)]
    struct Fake {
        queued: Vec<&'static str>,
        outbox: Vec<&'static str>,
        writes: usize,
        want: bool,
        elect_on_align: bool,
    }

    impl FlushSteps for Fake {
        fn drain(&mut self, _: Time) {
            self.outbox.append(&mut self.queued);
        }
        fn start_write(&mut self) {
            if self.want {
                self.want = false;
                self.writes += 1;
            }
        }
        fn has_heartbeat(&self) -> bool {
            self.outbox.contains(&"LEAD")
        }
        fn align(&mut self, _: Time) {
            if self.elect_on_align {
                self.queued.push("ELECT");
            }
        }
    }

    #[test]
    fn what_the_alignment_makes_leaves_in_the_same_flush() {
        let mut f = Fake {
            queued: vec!["LEAD"],
            elect_on_align: true,
            ..Fake::default()
        };
        flush_passes(&mut f, Time(0));
        assert_eq!(f.outbox, ["LEAD", "ELECT"]);
        assert!(f.queued.is_empty(), "an output left for the next wakeup");
    }

    #[test]
    fn writes_come_first_and_alignment_once() {
        let mut f = Fake {
            queued: vec!["LEAD"],
            want: true,
            ..Fake::default()
        };
        flush_passes(&mut f, Time(0));
        assert_eq!((f.writes, f.outbox.as_slice()), (1, &["LEAD"][..]));
    }
}

//! The flush: every group's outputs after an input (SPEC sections 4 and 15). Durable
//! writes first (one write of the state file for every group that asked, confirmed
//! before anything that waited for it leaves), events, then the datagrams, batched per
//! destination, with a leader's heartbeats of all its groups aligned into one.

use super::*;

/// The steps of one flush, as [`flush_passes`] sequences them.
pub(super) trait FlushSteps {
    /// Takes every group's queued outputs.
    fn drain(&mut self) -> Result<(), Fatal>;
    /// True when some group asked for a write of the state file.
    fn wants_write(&self) -> bool;
    /// Writes the state file and confirms it to the groups that asked.
    fn write(&mut self) -> Result<(), Fatal>;
    /// True when a LEAD is about to leave.
    fn has_heartbeat(&self) -> bool;
    /// Lets every led group send its LEAD now if due within HBT/2.
    fn align(&mut self);
}

/// Drains, writes and aligns until nothing is left: every write before what waited for
/// it, and one heartbeat alignment. After the alignment the groups are always drained
/// again, whether or not a LEAD was pulled: the alignment passes time to every group,
/// and a timer that fired there (an ELECT, a VOTE, a RESIGN) must leave in this flush,
/// not at the next wakeup, up to a heartbeat later (issue 20).
pub(super) fn flush_passes<S: FlushSteps>(s: &mut S) -> Result<(), Fatal> {
    let mut aligned = false;
    // Bounded: each pass either writes, aligns once, or finds nothing left; a core
    // queues at most a few writes per input.
    for _ in 0..64 {
        s.drain()?;
        if s.wants_write() {
            s.write()?;
            continue;
        }
        if !aligned && s.has_heartbeat() {
            aligned = true;
            s.align();
            continue;
        }
        break;
    }
    Ok(())
}

impl FlushSteps for Daemon {
    fn drain(&mut self) -> Result<(), Fatal> {
        self.drain_outputs()
    }

    fn wants_write(&self) -> bool {
        self.groups.iter().any(|g| g.want.is_some())
    }

    fn write(&mut self) -> Result<(), Fatal> {
        self.write_state()
    }

    fn has_heartbeat(&self) -> bool {
        self.outbox.iter().any(|(_, e)| is_heartbeat(&e.msg))
    }

    fn align(&mut self) {
        let now = boot_now();
        for g in &mut self.groups {
            let within = g.node.heartbeat() / 2;
            g.node.handle_heartbeat_due(now, within);
        }
    }
}

impl Daemon {
    /// Runs every group's due timers, then flushes.
    pub(super) fn on_timeouts(&mut self) -> Result<(), Fatal> {
        let now = boot_now();
        for g in &mut self.groups {
            g.node.handle_timeout(now);
        }
        self.flush_node()
    }

    /// Drains every group's core: durable writes (one write of the state file for all
    /// groups, confirmed before anything that waited for it leaves), events, then the
    /// datagrams, batched per destination (SPEC section 15). When a LEAD leaves, the
    /// other groups this server leads send theirs now if due within HBT/2, so every
    /// group's heartbeat shares one datagram and their ACKs come back in one.
    pub(super) fn flush_node(&mut self) -> Result<(), Fatal> {
        flush_passes(self)?;
        self.send_outbox()?;
        self.report_changes();
        Ok(())
    }

    /// Takes every group's queued outputs: sends go to the outbox, writes are noted
    /// (the latest per group holds everything before it), events are handled.
    pub(super) fn drain_outputs(&mut self) -> Result<(), Fatal> {
        for g in 0..self.groups.len() {
            while let Some(out) = self.groups[g].node.poll_output() {
                match out {
                    Output::Send { dest, msg } => self.outbox.push((
                        dest,
                        wire::Entry {
                            group: g as u8,
                            msg,
                        },
                    )),
                    Output::Persist(state) => self.groups[g].want = Some(state),
                    Output::Event(e) => self.on_event(g, e),
                }
            }
        }
        Ok(())
    }

    /// Writes the state file with every group's newest state, then confirms it to each
    /// group that asked. Nothing that depends on it has left: the cores hold it back.
    pub(super) fn write_state(&mut self) -> Result<(), Fatal> {
        let mut all = self.kept.clone();
        for g in &self.groups {
            all.insert(g.name.clone(), g.want.unwrap_or(g.durable));
        }
        // If it cannot be written, stopping is the only safe answer.
        self.store
            .save(&all, &self.extra)
            .map_err(|e| Fatal(format!("cannot write the state: {e}")))?;
        self.metrics.state_writes += 1;
        let now = boot_now();
        for g in &mut self.groups {
            if let Some(state) = g.want.take() {
                g.durable = state;
                g.node.handle_persisted(now, state);
            }
        }
        Ok(())
    }

    /// Writes the state file as it stands (boot numbers changed, no group asked).
    pub(super) fn save_state(&self) -> Result<(), crate::store::StoreError> {
        let mut all = self.kept.clone();
        for g in &self.groups {
            all.insert(g.name.clone(), g.durable);
        }
        self.store.save(&all, &self.extra)
    }

    pub(super) fn on_event(&mut self, g: usize, e: Event) {
        let tag = self.groups[g].tag(self.cfg.has_groups());
        match e {
            Event::DualLeader { term, other } => {
                error!("{tag}server {other} also led term {term}")
            }
            Event::Elected { term } => debug!("{tag}won the round of term {term}"),
            Event::Resigning {
                term,
                until,
                to,
                reason,
            } => self.on_resigning(g, term, until, to, reason),
            Event::Resigned { term } => self.on_resigned(g, term),
            Event::Voted { .. } | Event::SteppedDown { .. } => {}
        }
    }

    /// Sends what the flush queued: per destination one bundle (split at
    /// `wire::MAX_BUNDLE_LEN`), in the order queued within it.
    pub(super) fn send_outbox(&mut self) -> Result<(), Fatal> {
        if self.outbox.is_empty() {
            return Ok(());
        }
        let mut outbox = std::mem::take(&mut self.outbox);
        let mut dests: Vec<Dest> = Vec::new();
        for (d, _) in &outbox {
            if !dests.contains(d) {
                dests.push(*d);
            }
        }
        let mut entries: Vec<wire::Entry> = Vec::with_capacity(outbox.len());
        let mut bytes = Vec::with_capacity(wire::MAX_BUNDLE_LEN);
        for dest in dests {
            entries.clear();
            entries.extend(outbox.iter().filter(|(d, _)| *d == dest).map(|(_, e)| *e));
            let keyed = self.keys.is_some();
            for run in wire::pack(&entries, keyed) {
                let part = &entries[run];
                bytes.clear();
                let (id, fp) = (self.cfg.id, part[0].msg.fingerprint);
                match self.keys.clone() {
                    Some(k) => {
                        let counter = self.next_counter()?;
                        wire::encode_bundle(id, fp, part, Some((counter, &k.current)), &mut bytes)
                    }
                    None => wire::encode_bundle(id, fp, part, None, &mut bytes),
                };
                let (sent, errors) = self.transport.send(dest, &bytes);
                self.metrics.datagrams_sent += sent;
                for e in part {
                    self.metrics.sent[e.msg.body.kind() as usize] += sent;
                }
                self.metrics.sent_bytes += sent * bytes.len() as u64;
                for (to, e) in errors {
                    self.metrics.send_errors += 1;
                    debug!("send {} entries to {to}: {e}", part.len());
                }
            }
        }
        outbox.clear();
        self.outbox = outbox;
        Ok(())
    }
}

/// True for a heartbeat (a LEAD that is not a RESIGN).
pub(super) fn is_heartbeat(msg: &wire::Message) -> bool {
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
        fn drain(&mut self) -> Result<(), Fatal> {
            self.outbox.append(&mut self.queued);
            Ok(())
        }
        fn wants_write(&self) -> bool {
            self.want
        }
        fn write(&mut self) -> Result<(), Fatal> {
            self.want = false;
            self.writes += 1;
            Ok(())
        }
        fn has_heartbeat(&self) -> bool {
            self.outbox.contains(&"LEAD")
        }
        fn align(&mut self) {
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
        flush_passes(&mut f).unwrap();
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
        flush_passes(&mut f).unwrap();
        assert_eq!((f.writes, f.outbox.as_slice()), (1, &["LEAD"][..]));
    }
}

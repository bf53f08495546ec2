//! The flush: every group's outputs after an input (SPEC sections 4 and 15). Durable
//! writes are handed to the state writer thread (one write of the state file for every
//! group that asked; nothing that waited for it leaves before the thread reports it
//! done), events are handled, then the datagrams leave, batched per destination, with a
//! leader's heartbeats of all its groups aligned into one.
//!
//! Why the loop never waits on the disk and persist-then-confirm still holds (SPEC
//! sections 4 and 12): a core that asks for a write (`Output::Persist`) holds back every
//! datagram it queues after the request until `handle_persisted` confirms it, and only
//! `finish_write` confirms, after the writer thread reported the fsyncs done. The loop
//! meanwhile answers requests and sends what no pending write holds: other groups'
//! LEADs, and a steady leader's heartbeats (they need no write: a leader asks for one
//! only when its term or hold promise changes). One write is in flight at a time;
//! requests made meanwhile (`Group::want`, the latest per group) go into the next.

use super::*;

/// The steps of one flush, as [`flush_passes`] sequences them.
pub(super) trait FlushSteps {
    /// Takes every group's queued outputs.
    fn drain(&mut self) -> Result<(), Fatal>;
    /// Hands the state file's write to the writer thread if a group asked and none
    /// is in flight (confirmed later, when it is durable).
    fn start_write(&mut self) -> Result<(), Fatal>;
    /// True when a LEAD is about to leave.
    fn has_heartbeat(&self) -> bool;
    /// Lets every led group send its LEAD now if due within HBT/2.
    fn align(&mut self);
}

/// Drains, starts the write and aligns until nothing is left: what waits for a write
/// stays held in its core until the write is confirmed, and one heartbeat alignment. After the alignment the groups are always drained
/// again, whether or not a LEAD was pulled: the alignment passes time to every group,
/// and a timer that fired there (an ELECT, a VOTE, a RESIGN) must leave in this flush,
/// not at the next wakeup, up to a heartbeat later (issue 20).
pub(super) fn flush_passes<S: FlushSteps>(s: &mut S) -> Result<(), Fatal> {
    let mut aligned = false;
    // Bounded: each pass aligns once or finds nothing left.
    for _ in 0..64 {
        s.drain()?;
        s.start_write()?;
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

    fn start_write(&mut self) -> Result<(), Fatal> {
        self.submit_write()
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
/// A write of the state file handed to the writer thread.
pub(super) struct InFlight {
    /// The groups that asked, with the state the write holds for each: confirmed to
    /// them once it is durable.
    states: Vec<(usize, Durable)>,
    /// When it was handed over (a write that takes long is logged once).
    since: Instant,
    warned: bool,
}

/// A write that has not finished after this long is logged (once per write).
const SLOW_WRITE: Duration = Duration::from_secs(5);

impl Daemon {
    /// Runs every group's due timers, then flushes.
    pub(super) fn on_timeouts(&mut self) -> Result<(), Fatal> {
        let now = boot_now();
        for g in &mut self.groups {
            g.node.handle_timeout(now);
        }
        self.flush_node()
    }

    /// Drains every group's core: durable writes (handed to the writer thread, one
    /// write of the state file for all groups; what waits for it stays held in the
    /// cores), events, then the datagrams, batched per destination (SPEC section 15).
    /// When a LEAD leaves, the other groups this server leads send theirs now if due
    /// within HBT/2, so every group's heartbeat shares one datagram and their ACKs come
    /// back in one.
    pub(super) fn flush_node(&mut self) -> Result<(), Fatal> {
        flush_passes(self)?;
        self.send_outbox()?;
        self.report_changes();
        Ok(())
    }

    /// True while a write is in flight or waits to be handed over.
    pub(super) fn write_pending(&self) -> bool {
        self.in_flight.is_some() || self.extra_dirty || self.groups.iter().any(|g| g.want.is_some())
    }

    /// How long the write in flight has taken so far (zero when none).
    pub(super) fn write_age(&self) -> Duration {
        self.in_flight
            .as_ref()
            .map_or(Duration::ZERO, |f| f.since.elapsed())
    }

    /// Hands the writer thread the state file as it should be (every group's newest
    /// state) when some group asked and no write is in flight.
    fn submit_write(&mut self) -> Result<(), Fatal> {
        if self.in_flight.is_some()
            || !(self.extra_dirty || self.groups.iter().any(|g| g.want.is_some()))
        {
            return Ok(());
        }
        let mut all = self.kept.clone();
        let mut states = Vec::new();
        for (i, g) in self.groups.iter_mut().enumerate() {
            let state = g.want.take();
            all.insert(g.name.clone(), state.unwrap_or(g.durable));
            states.extend(state.map(|s| (i, s)));
        }
        self.extra_dirty = false;
        self.writes_submitted += 1;
        self.writer
            .submit(all, self.extra.clone())
            .map_err(|e| Fatal(format!("cannot write the state: {e}")))?;
        self.in_flight = Some(InFlight {
            states,
            since: Instant::now(),
            warned: false,
        });
        Ok(())
    }

    /// Takes the writer thread's report, if the write in flight has finished: confirms
    /// it to the groups that asked, then flushes what it released (and starts the next
    /// write). A failed write stops the daemon, as it always did: nothing that depended
    /// on it has left, and without a working state file stopping is the only safe answer.
    pub(super) fn take_write_result(&mut self) -> Result<(), Fatal> {
        let Some(f) = self.in_flight.as_mut() else {
            return Ok(());
        };
        match self.writer.try_result() {
            Some(r) => {
                self.finish_write(r)?;
                self.flush_node()
            }
            None => {
                if !f.warned && f.since.elapsed() >= SLOW_WRITE {
                    f.warned = true;
                    warn!(
                        "the state file write has taken {} s so far ({}): votes and new terms wait for it; leases, heartbeats and the control socket go on",
                        f.since.elapsed().as_secs(),
                        self.cfg.state.display()
                    );
                }
                Ok(())
            }
        }
    }

    /// Confirms the finished write `r` to each group that asked (or stops on its error).
    fn finish_write(&mut self, r: Result<(), String>) -> Result<(), Fatal> {
        let Some(f) = self.in_flight.take() else {
            return Ok(());
        };
        r.map_err(|e| Fatal(format!("cannot write the state: {e}")))?;
        self.metrics.state_writes += 1;
        if f.warned {
            info!(
                "the state file write finished after {} ms",
                f.since.elapsed().as_millis()
            );
        }
        let now = boot_now();
        for (g, state) in f.states {
            let group = &mut self.groups[g];
            group.durable = state;
            group.node.handle_persisted(now, state);
        }
        Ok(())
    }

    /// The number of the write that will hold everything asked for so far: a write
    /// counts as done once `metrics.state_writes` reaches it (writes finish in the
    /// order they are submitted, one at a time). Zero when nothing is pending.
    pub(super) fn write_holding_all(&self) -> u64 {
        if !self.write_pending() {
            0
        } else if self.extra_dirty || self.groups.iter().any(|g| g.want.is_some()) {
            self.writes_submitted + 1
        } else {
            self.writes_submitted
        }
    }

    /// Writes the state file as it stands, now (a new boot number must be on disk
    /// before a datagram carries it: rare, once per 2^32 datagrams). The write in
    /// flight, if any, finishes first: two writes never race on the temporary file.
    pub(super) fn save_state(&mut self) -> Result<(), crate::store::StoreError> {
        if self.in_flight.is_some() {
            let r = self.writer.wait_result();
            if let Err(e) = self.finish_write(r) {
                return Err(crate::store::StoreError::Io(
                    self.cfg.state.clone(),
                    io::Error::other(e.0),
                ));
            }
        }
        let mut all = self.kept.clone();
        for g in &self.groups {
            all.insert(g.name.clone(), g.durable);
        }
        self.store.save(&all, &self.extra)
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
        fn start_write(&mut self) -> Result<(), Fatal> {
            if self.want {
                self.want = false;
                self.writes += 1;
            }
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

//! The flush: every group's outputs after an input (SPEC sections 4 and 15). Durable
//! writes first (one write of the state file for every group that asked, confirmed
//! before anything that waited for it leaves), events, then the datagrams, batched per
//! destination, with a leader's heartbeats of all its groups aligned into one.

use super::*;

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
        let mut aligned = false;
        // Bounded: each pass either writes, aligns once, or finds nothing left; a core
        // queues at most a few writes per input.
        for _ in 0..64 {
            self.drain_outputs()?;
            if self.groups.iter().any(|g| g.want.is_some()) {
                self.write_state()?;
                continue;
            }
            if !aligned && self.outbox.iter().any(|(_, e)| is_heartbeat(&e.msg)) {
                aligned = true;
                let now = boot_now();
                let mut pulled = false;
                for g in &mut self.groups {
                    let within = g.node.heartbeat() / 2;
                    pulled |= g.node.handle_heartbeat_due(now, within);
                }
                if pulled {
                    continue;
                }
            }
            break;
        }
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

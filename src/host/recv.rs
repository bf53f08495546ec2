//! The datagram path (SPEC sections 3, 4, 10 and 15): decode and authenticate, the
//! source check in unicast mode, the replay window and peers' boot numbers, each
//! entry to its group's core, news of the sender for the groups the datagram carried
//! nothing for, and drops counted by reason (logged at debug with a rate limit).

use super::*;
use crate::node::Reject;
use log::{debug, warn};

impl Host {
    /// A datagram from `src`. Returns true when it decoded and passed the source and
    /// replay checks (the simulator counts deliveries); the cores' outputs are flushed.
    pub fn handle_datagram(
        &mut self,
        now: Time,
        src: SocketAddr,
        bytes: &[u8],
    ) -> Result<bool, HostError> {
        let ok = self.on_datagram(now, src, bytes);
        self.flush(now)?;
        Ok(ok)
    }

    /// A datagram that waited in the socket for this wakeup (`datagrams_may_wait`),
    /// handled as [`Host::handle_datagram`] handles one but not flushed: its outputs
    /// leave with the wakeup's timers, which the driver runs next at the same wakeup
    /// (`handle_timeout`, or `flush`). A leader at rest then makes one flush a
    /// heartbeat, not one for its ACK and one for its LEAD (issue 25). The cores queue
    /// their outputs in order and hold what waits for a write until it is durable, so
    /// one flush after several inputs sends what a flush after each would, in the same
    /// order (tests/waiting_flush.rs). Returns what `handle_datagram` returns.
    pub fn handle_waiting_datagram(&mut self, now: Time, src: SocketAddr, bytes: &[u8]) -> bool {
        self.unflushed = true;
        self.on_datagram(now, src, bytes)
    }

    fn on_datagram(&mut self, now: Time, src: SocketAddr, bytes: &[u8]) -> bool {
        // One vector of entries for every datagram: no allocation per heartbeat.
        let mut entries = std::mem::take(&mut self.scratch.entries);
        let ok = self.on_entries(now, src, bytes, &mut entries);
        self.scratch.entries = entries;
        ok
    }

    fn on_entries(
        &mut self,
        now: Time,
        src: SocketAddr,
        bytes: &[u8],
        entries: &mut Vec<wire::Entry>,
    ) -> bool {
        self.metrics.received_bytes += bytes.len() as u64;
        let decoded = match &self.keys {
            Some(k) => {
                // `Keys::verifiers` without its vector.
                let (both, n) = match &k.next {
                    Some(next) => ([&k.current, next], 2),
                    None => ([&k.current, &k.current], 1),
                };
                let verifiers = &both[..n];
                let top = self.wire.top();
                wire::decode_upto_into(top, bytes, Some(verifiers), self.groups.len(), entries)
            }
            // Up to the top level this host speaks: all of them but in tests that
            // emulate an older build (`Host::cap_wire`).
            None => {
                let top = self.wire.top();
                wire::decode_upto_into(top, bytes, None, self.groups.len(), entries)
            }
        };
        let bundle = match decoded {
            Ok(b) => b,
            Err(e) => {
                self.drop_datagram(now, e.reason(), format_args!("{e} from {src}"));
                return false;
            }
        };
        if let Some(sources) = &self.cfg.sources {
            let expected = sources.iter().find(|p| p.0 == bundle.sender).map(|p| p.1);
            if expected.is_some() && expected != Some(src) {
                self.drop_datagram(
                    now,
                    "source_mismatch",
                    format_args!("server {} sent from {src}", bundle.sender),
                );
                return false;
            }
        }
        if let Some(counter) = bundle.counter.filter(|_| bundle.sender != self.cfg.id) {
            if !self.replay.accept(bundle.sender, counter) {
                self.drop_datagram(
                    now,
                    "replay",
                    format_args!("server {} counter {counter:#x} not new", bundle.sender),
                );
                return false;
            }
            self.note_peer_boot(bundle.sender, (counter >> 32) as u32);
        }
        let mut accepted = false;
        let mut has = [false; crate::config::MAX_GROUPS];
        for e in entries.iter() {
            let mut g = usize::from(e.group);
            if self.sabotage.misroute_groups && g < 2 && self.groups.len() > 1 {
                g = 1 - g;
            }
            accepted |= self.on_message(now, g, &e.msg, src);
            has[g] = true;
        }
        if accepted {
            self.metrics.datagrams_received += 1;
            // The framing this sender reads: the one it last sent in (`peers.rs`).
            let framing = wire::Framing::of(bytes);
            self.metrics.accepted_framing[framing.index()] += 1;
            let round = entries.iter().any(|e| {
                !matches!(
                    e.msg.body,
                    wire::Body::Lead { resign: false, .. } | wire::Body::Ack { .. }
                )
            });
            if bundle.sender != self.cfg.id && self.wire.heard(bundle.sender, framing, round) {
                debug!(
                    "server {} sends the {} wire: it gets that from now on",
                    bundle.sender,
                    framing.name()
                );
            }
            // Any valid datagram is news of its sender, for every group (SPEC section 4):
            // the groups this one carried nothing for hear it too.
            for (g, group) in self.groups.iter_mut().enumerate() {
                if !has[g] {
                    group.node.handle_heard(now, bundle.sender);
                }
            }
        }
        true
    }

    /// One message of an accepted datagram, for group `g`'s core (decode_any checked
    /// that the group exists). True when the core took it.
    fn on_message(&mut self, now: Time, g: usize, msg: &wire::Message, src: SocketAddr) -> bool {
        let msg = *msg;
        match self.groups[g].node.handle_datagram(now, &msg) {
            Ok(()) => {
                self.metrics.received[msg.body.kind() as usize] += 1;
                return true;
            }
            Err(Reject::OwnEcho) => {
                *self.metrics.dropped.entry("own_echo").or_insert(0) += 1;
            }
            Err(Reject::Fingerprint) => {
                *self.metrics.dropped.entry("fingerprint").or_insert(0) += 1;
                if self.may_warn(now, msg.sender, "fingerprint") {
                    warn!(
                        "server {} runs with a different server list (fingerprint {:08x}, ours {:08x})",
                        msg.sender, msg.fingerprint, self.cfg.fingerprint
                    );
                }
            }
            Err(r @ (Reject::TermLimit | Reject::HoldLimit)) => {
                // SPEC section 8: refused so one datagram cannot wedge the cluster; an
                // operator must hear of it (a bug or an attack), once a minute per sender.
                self.drop_datagram(
                    now,
                    r.reason(),
                    format_args!("sender {} from {src}", msg.sender),
                );
                if self.may_warn(now, msg.sender, r.reason()) {
                    warn!("{}", self.limit_warning(g, r, &msg));
                }
            }
            Err(r) => self.drop_datagram(
                now,
                r.reason(),
                format_args!("sender {} from {src}", msg.sender),
            ),
        }
        false
    }

    /// Counts a drop; logs it at debug, at most once a second.
    fn drop_datagram(&mut self, now: Time, reason: &'static str, detail: std::fmt::Arguments<'_>) {
        *self.metrics.dropped.entry(reason).or_insert(0) += 1;
        if self
            .last_debug_drop
            .is_none_or(|t| now.saturating_since(t) >= Duration::from_secs(1))
        {
            self.last_debug_drop = Some(now);
            debug!("dropped datagram ({reason}): {detail}");
        }
    }

    /// True at most once a minute per (sender, reason): rate limit of warnings.
    fn may_warn(&mut self, now: Time, sender: u16, reason: &'static str) -> bool {
        let key = (sender, reason);
        let due = self
            .warned
            .get(&key)
            .is_none_or(|t| now.saturating_since(*t) >= Duration::from_secs(60));
        if due && (self.warned.len() < 1024 || self.warned.contains_key(&key)) {
            self.warned.insert(key, now);
            return true;
        }
        false
    }

    /// "server 3 sent a LEAD with hold 4294967295 ms above max-hold 60000 ms: dropped".
    fn limit_warning(&self, g: usize, r: Reject, msg: &wire::Message) -> String {
        let kind = msg.body.kind().name();
        let term = self.groups[g].node.term();
        match (r, msg.body) {
            (Reject::HoldLimit, wire::Body::Lead { hold_ms, .. }) => format!(
                "server {} sent a {kind} with hold {hold_ms} ms above max-hold {} ms: dropped",
                msg.sender,
                self.cfg.max_hold.as_millis()
            ),
            (_, wire::Body::Elect { last_term, .. }) => format!(
                "server {} sent an {kind} with term {} and last term {last_term}, at or above 2^62 or more than 2^40 above our term {}: dropped",
                msg.sender, msg.term, term
            ),
            _ => format!(
                "server {} sent a {kind} with term {}, at or above 2^62 or more than 2^40 above our term {}: dropped",
                msg.sender, msg.term, term
            ),
        }
    }

    /// Remembers a peer's newest boot on disk, so its earlier boots stay refused across
    /// our restarts. Rare: once per restart of a peer.
    fn note_peer_boot(&mut self, peer: u16, boot: u32) {
        if self.extra.peer_boots.get(&peer).is_some_and(|&b| boot > b) {
            // It restarted, maybe as another build: heard again before it gets more
            // than version 3.
            self.wire.restarted(peer);
        }
        if self.extra.peer_boots.get(&peer).is_none_or(|&b| boot > b)
            && self.extra.peer_boots.len() < 256
        {
            self.extra.peer_boots.insert(peer, boot);
            // In the next write of the state file: nothing waits for it (it only keeps
            // that peer's earlier boots refused across our restarts).
            self.extra_dirty = true;
        }
    }
}

//! The datagram path: bounded reads, decoding and authentication (replay window,
//! source check), the core's verdict on each message, and drop counting.

use super::*;

impl Daemon {
    pub(super) fn read_udp(&mut self, which: usize) -> Result<(), Fatal> {
        let mut buf = [0u8; RECV_BUF];
        self.udp_more[which] = true;
        for _ in 0..UDP_BUDGET {
            let sock = if which == 0 {
                Some(&self.transport.unicast)
            } else {
                self.transport.group.as_ref()
            };
            let Some(sock) = sock else { break };
            match sock.recv_from(&mut buf) {
                Ok((n, src)) => {
                    self.on_datagram(&buf[..n], src);
                    self.flush_node()?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.udp_more[which] = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // ICMP errors from earlier sends surface here; they are not fatal.
                    debug!("UDP receive: {e}");
                }
            }
        }
        Ok(())
    }

    pub(super) fn drop_datagram(&mut self, reason: &'static str, detail: std::fmt::Arguments<'_>) {
        *self.metrics.dropped.entry(reason).or_insert(0) += 1;
        let now = Instant::now();
        if self
            .last_debug_drop
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            self.last_debug_drop = Some(now);
            debug!("dropped datagram ({reason}): {detail}");
        }
    }

    pub(super) fn on_datagram(&mut self, bytes: &[u8], src: std::net::SocketAddr) {
        self.metrics.received_bytes += bytes.len() as u64;
        let decoded = match &self.keys {
            Some(k) => wire::decode_any(bytes, Some(&k.verifiers()), self.groups.len()),
            None => wire::decode_any(bytes, None, self.groups.len()),
        };
        let bundle = match decoded {
            Ok(b) => b,
            Err(e) => return self.drop_datagram(e.reason(), format_args!("{e} from {src}")),
        };
        if matches!(self.cfg.transport, Mode::Unicast) {
            let expected = self.transport.peer_addr(bundle.sender);
            if expected.is_some() && expected != Some(src) {
                return self.drop_datagram(
                    "source_mismatch",
                    format_args!("server {} sent from {src}", bundle.sender),
                );
            }
        }
        if let Some(counter) = bundle.counter.filter(|_| bundle.sender != self.cfg.id) {
            if !self.replay.accept(bundle.sender, counter) {
                return self.drop_datagram(
                    "replay",
                    format_args!("server {} counter {counter:#x} not new", bundle.sender),
                );
            }
            self.note_peer_boot(bundle.sender, (counter >> 32) as u32);
        }
        let mut accepted = false;
        let mut has = [false; crate::config::MAX_GROUPS];
        for e in &bundle.entries {
            let g = usize::from(e.group);
            accepted |= self.on_message(g, &e.msg, src);
            has[g] = true;
        }
        if accepted {
            self.metrics.datagrams_received += 1;
            // Any valid datagram is news of its sender, for every group (SPEC section 4):
            // the groups this one carried nothing for hear it too.
            let now = boot_now();
            for (g, group) in self.groups.iter_mut().enumerate() {
                if !has[g] {
                    group.node.handle_heard(now, bundle.sender);
                }
            }
        }
    }

    /// One message of an accepted datagram, for group `g`'s core (decode_any checked
    /// that the group exists). True when the core took it.
    pub(super) fn on_message(
        &mut self,
        g: usize,
        msg: &wire::Message,
        src: std::net::SocketAddr,
    ) -> bool {
        let msg = *msg;
        match self.groups[g].node.handle_datagram(boot_now(), &msg) {
            Ok(()) => {
                self.metrics.received[msg.body.kind() as usize] += 1;
                return true;
            }
            Err(Reject::OwnEcho) => {
                *self.metrics.dropped.entry("own_echo").or_insert(0) += 1;
            }
            Err(Reject::Fingerprint) => {
                *self.metrics.dropped.entry("fingerprint").or_insert(0) += 1;
                if self.may_warn(msg.sender, "fingerprint") {
                    warn!(
                        "server {} runs with a different server list (fingerprint {:08x}, ours {:08x})",
                        msg.sender,
                        msg.fingerprint,
                        self.cfg.fingerprint()
                    );
                }
            }
            Err(r @ (Reject::TermLimit | Reject::HoldLimit)) => {
                // SPEC section 8: refused so one datagram cannot wedge the cluster; an
                // operator must hear of it (a bug or an attack), once a minute per sender.
                self.drop_datagram(r.reason(), format_args!("sender {} from {src}", msg.sender));
                if self.may_warn(msg.sender, r.reason()) {
                    warn!("{}", self.limit_warning(g, r, &msg));
                }
            }
            Err(r) => {
                self.drop_datagram(r.reason(), format_args!("sender {} from {src}", msg.sender))
            }
        }
        false
    }

    /// True at most once a minute per (sender, reason): rate limit of warnings.
    pub(super) fn may_warn(&mut self, sender: u16, reason: &'static str) -> bool {
        let now = Instant::now();
        let key = (sender, reason);
        let due = self
            .warned
            .get(&key)
            .is_none_or(|t| now.duration_since(*t) >= Duration::from_secs(60));
        if due && (self.warned.len() < 1024 || self.warned.contains_key(&key)) {
            self.warned.insert(key, now);
            return true;
        }
        false
    }

    /// "server 3 sent a LEAD with hold 4294967295 ms above max-hold 60000 ms: dropped".
    pub(super) fn limit_warning(&self, g: usize, r: Reject, msg: &wire::Message) -> String {
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
    pub(super) fn note_peer_boot(&mut self, peer: u16, boot: u32) {
        if self.extra.peer_boots.get(&peer).is_none_or(|&b| boot > b)
            && self.extra.peer_boots.len() < 256
        {
            self.extra.peer_boots.insert(peer, boot);
            // In the next write of the state file, off the loop: nothing waits for it
            // (it only keeps that peer's earlier boots refused across our restarts).
            self.extra_dirty = true;
        }
    }

    /// The next counter of a keyed datagram: boot number, then a sequence within it.
    pub(super) fn next_counter(&mut self) -> Result<u64, Fatal> {
        self.send_seq = self.send_seq.wrapping_add(1);
        if self.send_seq == 0 {
            // 2^32 datagrams in one boot: take a new boot number, on disk first.
            self.extra.boot = self
                .extra
                .boot
                .checked_add(1)
                .ok_or_else(|| Fatal("boot counter exhausted".into()))?;
            self.save_state()
                .map_err(|e| Fatal(format!("cannot write the state: {e}")))?;
            self.send_seq = 1;
        }
        Ok(u64::from(self.extra.boot) << 32 | u64::from(self.send_seq))
    }
}

//! Invariants asserted after every input (TigerBeetle style): terms never fall, a
//! vote is durable before it leaves, a lease never moves earlier.

use super::*;

impl Node {
    /// Checks one invariant. Inlined, so a check that holds costs a comparison: the
    /// message is formatted only on the cold path (issue 25).
    #[inline(always)]
    pub(super) fn invariant(&self, ok: bool, what: std::fmt::Arguments<'_>) {
        if !ok {
            self.invariant_broken(what);
        }
    }

    #[cold]
    #[inline(never)]
    fn invariant_broken(&self, what: std::fmt::Arguments<'_>) {
        if self.cfg.strict {
            panic!("server {}: invariant broken: {what}", self.cfg.id);
        }
        error!(
            "{}invariant broken (a bug; please report it): {what}",
            self.log_tag
        );
    }

    /// The core's invariants, checked after every input (issue 10).
    pub(super) fn check_invariants(&mut self, now: Time) {
        self.invariant(
            self.term >= self.checked_term,
            format_args!("term fell from {} to {}", self.checked_term, self.term),
        );
        self.checked_term = self.term;
        self.invariant(
            self.voted_term <= self.term,
            format_args!("voted_term {} above term {}", self.voted_term, self.term),
        );
        if let Some(l) = &self.leadership {
            if let Some(u) = l.lease_until() {
                self.invariant(
                    u <= now + l.longest_lease(),
                    format_args!(
                        "lease ends {:?} after now + its length",
                        u.saturating_since(now)
                    ),
                );
            }
            self.invariant(
                !l.regressed(),
                format_args!("the lease end of term {} moved earlier", l.term),
            );
            self.invariant(
                l.term <= self.led_term,
                format_args!("leads term {} above led_term {}", l.term, self.led_term),
            );
        }
        // The promise covers the faith still owed (what a restart must stay quiet for).
        let owed = self.faith_until.saturating_since(now);
        self.invariant(
            self.cfg.sabotage.hold_replaced || self.promise >= owed,
            format_args!(
                "hold promise {:?} below the faith owed {owed:?}",
                self.promise
            ),
        );
        self.invariant(
            self.requested.is_some() || self.held.is_empty(),
            format_args!("outputs held with no write pending"),
        );
    }

    /// Checks, as a datagram leaves, that the state it reflects is durable.
    pub(super) fn check_durable_for(&self, msg: &Message) {
        if self.cfg.sabotage.any() {
            return;
        }
        let d = &self.durable;
        self.invariant(
            self.requested.is_none(),
            format_args!("a datagram left while a write was pending"),
        );
        match msg.body {
            Body::Vote { candidate } => self.invariant(
                d.voted_term >= msg.term && (d.voted_term > msg.term || d.voted_for == candidate),
                format_args!("VOTE of term {} left before it was durable", msg.term),
            ),
            Body::Lead {
                hold_ms, resign, ..
            } => {
                self.invariant(
                    resign || d.led_term >= msg.term,
                    format_args!("LEAD of term {} left before led_term was durable", msg.term),
                );
                self.invariant(
                    resign || d.hold_ms >= hold_ms,
                    format_args!("LEAD hold {hold_ms} ms above the durable promise"),
                );
            }
            Body::Ack { .. } => self.invariant(
                d.term >= msg.term,
                format_args!("ACK of term {} left before the term was durable", msg.term),
            ),
            Body::Elect { .. } => {}
        }
    }
}

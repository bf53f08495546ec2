//! Invariants asserted after every input (TigerBeetle style): terms never fall, a
//! vote is durable before it leaves, a lease never moves earlier.

use super::*;

/// Checks one invariant of `node`: when it holds, this costs the comparison alone. The
/// message, and every argument of it, is evaluated only when it is broken: built
/// eagerly, the `format_args!` of the checks after every input put some 50 code lines
/// on a resting leader's path (issue 25, twelfth round).
macro_rules! invariant {
    ($node:expr, $ok:expr, $($fmt:tt)+) => {
        if !$ok {
            $node.invariant_broken(format_args!($($fmt)+));
        }
    };
}

impl Node {
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
        invariant!(
            self,
            self.term >= self.checked_term,
            "term fell from {} to {}",
            self.checked_term,
            self.term
        );
        self.checked_term = self.term;
        invariant!(
            self,
            self.voted_term <= self.term,
            "voted_term {} above term {}",
            self.voted_term,
            self.term
        );
        if let Some(l) = &self.leadership {
            if let Some(u) = l.lease_until() {
                invariant!(
                    self,
                    u <= now + l.longest_lease(),
                    "lease ends {:?} after now + its length",
                    u.saturating_since(now)
                );
            }
            invariant!(
                self,
                !l.regressed(),
                "the lease end of term {} moved earlier",
                l.term
            );
            invariant!(
                self,
                l.term <= self.led_term,
                "leads term {} above led_term {}",
                l.term,
                self.led_term
            );
        }
        // The promise covers the faith still owed (what a restart must stay quiet for).
        let owed = self.faith_until.saturating_since(now);
        invariant!(
            self,
            self.cfg.sabotage.hold_replaced || self.promise >= owed,
            "hold promise {:?} below the faith owed {owed:?}",
            self.promise
        );
        invariant!(
            self,
            self.sends_wait() || self.held.is_empty(),
            "outputs held with no write pending that holds them"
        );
    }

    /// Checks, as a datagram leaves, that the state it reflects is durable.
    pub(super) fn check_durable_for(&self, msg: &Message) {
        if self.cfg.sabotage.any() {
            return;
        }
        let d = &self.durable;
        invariant!(
            self,
            !self.sends_wait(),
            "a datagram left while a write that holds it was pending"
        );
        match msg.body {
            Body::Vote { candidate } => invariant!(
                self,
                d.voted_term >= msg.term && (d.voted_term > msg.term || d.voted_for == candidate),
                "VOTE of term {} left before it was durable",
                msg.term
            ),
            Body::Lead {
                hold_ms, resign, ..
            } => {
                invariant!(
                    self,
                    resign || d.led_term >= msg.term,
                    "LEAD of term {} left before led_term was durable",
                    msg.term
                );
                // Its hold, unless the promise has since shrunk below it: this LEAD
                // was built (and its faith counted, `send_lead`) before it waited for
                // a write, and the promise shrinks only once the faith owed has run
                // down to within the new hold, as for an ACK below. Held for a write
                // of a longer hold that a later write lowered again (a reload back on
                // a stalled disk with `Sabotage::reload_holds_sends`), the full hold
                // was asked of the disk and the check fired though nothing was owed
                // past the promise on disk.
                let need = hold_ms.min(ms_ceil(self.promise));
                invariant!(
                    self,
                    resign || self.min_hold_pending() >= need,
                    "LEAD hold {need} ms above the durable promise (or one a pending write \
                     may leave)"
                );
            }
            Body::Ack { .. } => {
                invariant!(
                    self,
                    d.term >= msg.term,
                    "ACK of term {} left before the term was durable",
                    msg.term
                );
                // The hold of the last LEAD accepted, unless the promise has since
                // shrunk below it (the faith that LEAD earned has then run down to
                // within the promise): an ACK held and released after that needs only
                // the promise on disk.
                let need = self.ack_hold_ms.min(ms_ceil(self.promise));
                invariant!(
                    self,
                    self.min_hold_pending() >= need,
                    "ACK of a LEAD with hold {need} ms left with {} ms on disk (or that a \
                     pending write may leave)",
                    self.min_hold_pending()
                );
            }
            Body::Elect { .. } => {}
        }
    }
}

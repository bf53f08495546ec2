//! The core's timers, one table indexed by an enum (as quinn-proto's
//! `connection/timer.rs`): `next_deadline` is the minimum over it, and
//! `handle_timeout` fires each entry that is due, once (firing early or twice does
//! nothing: every handler checks its own deadline).
//!
//! The deadlines themselves live with the state they belong to (the elector's round,
//! the leadership's next heartbeat, a handoff's RESIGN); the table gathers them.

use super::*;

/// Every timer of a `Node`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Timer {
    /// WATCHING: the hold, or the retry wait; VOTING: the end of the window.
    Elector,
    /// A leader's next LEAD.
    Heartbeat,
    /// A leader that lost its quorum (or never got a lease) steps down.
    StepDown,
    /// The lease end: the reported role changes (no action, but watchers must hear).
    LeaseEnd,
    /// An unfit leader waits this long for its followers' answers before handing over.
    UnfitWait,
    /// A handoff's RESIGN: the lease end while supervisors stop, then the second copy.
    Resign,
    /// A preemption waits this long for the answers of the servers preferred to its
    /// successor before handing over.
    PreemptWait,
}

impl Timer {
    /// Every timer, in the order `handle_timeout` considers them.
    pub const ALL: [Timer; 7] = [
        Timer::StepDown,
        Timer::Resign,
        Timer::Heartbeat,
        Timer::Elector,
        Timer::LeaseEnd,
        Timer::UnfitWait,
        Timer::PreemptWait,
    ];
}

impl Node {
    /// When `timer` fires next, if it is set. Inlined: over `Timer::ALL` the match
    /// folds away (`next_deadline`, `on_time_but`).
    #[inline(always)]
    pub fn deadline(&self, timer: Timer) -> Option<Time> {
        let l = self.leadership.as_ref();
        match timer {
            Timer::Elector => Some(self.elector_deadline),
            Timer::Heartbeat => l.map(|l| l.next_lead_at),
            Timer::StepDown => l.map(|l| self.step_down_at(l)),
            // Once past, the lease end is no deadline.
            Timer::LeaseEnd => l
                .and_then(|l| l.lease_until())
                .filter(|&u| u > self.last_now),
            Timer::UnfitWait => self
                .unfit_wait
                .filter(|&w| w > self.last_now)
                .filter(|_| l.is_some() && self.resign == Resign::Idle),
            Timer::PreemptWait => self
                .preempt_ask
                .map(|a| a.until)
                .filter(|&w| w > self.last_now)
                .filter(|_| l.is_some() && self.resign == Resign::Idle),
            Timer::Resign => match self.resign {
                Resign::Idle => None,
                Resign::Waiting { until, .. } => Some(until),
                Resign::Again { at, .. } => Some(at),
            },
        }
    }

    /// The earliest deadline of all timers: call `handle_timeout` then (or earlier:
    /// that does nothing).
    pub fn next_deadline(&self) -> Time {
        // The elector's deadline is always set (it is one of `Timer::ALL`).
        let mut next = self.elector_deadline;
        for t in Timer::ALL {
            if let Some(d) = self.deadline(t) {
                next = next.min(d);
            }
        }
        next
    }

    /// Fires every timer that is due at `now`, once, in the order of `Timer::ALL`
    /// (each deadline is read afresh: a step-down clears the heartbeat).
    pub(super) fn on_time(&mut self, now: Time) {
        self.on_time_but(now, None);
    }

    /// As [`Node::on_time`], leaving `skip` (if due) for a later call.
    pub(super) fn on_time_but(&mut self, now: Time, skip: Option<Timer>) {
        self.last_now = self.last_now.max(now);
        // Nothing due: no timer fires, so none changes another's deadline, and the
        // walk below would do nothing. At rest two of a leader's three passes a
        // heartbeat (its ACK, the alignment) end here (issue 25).
        if self.next_deadline() > now {
            return;
        }
        for t in Timer::ALL {
            if Some(t) != skip && self.deadline(t).is_some_and(|d| now >= d) {
                self.fire(t, now);
            }
        }
    }

    fn fire(&mut self, timer: Timer, now: Time) {
        match timer {
            Timer::StepDown => self.on_step_down_timer(now),
            Timer::Resign => self.on_resign_timer(now),
            Timer::Heartbeat => self.send_lead(now),
            Timer::Elector => self.on_elector_timer(now),
            // Nothing to do: the role is reported from the lease, and the handovers
            // wait in `consider_handover`; they are deadlines so the driver wakes.
            Timer::LeaseEnd | Timer::UnfitWait | Timer::PreemptWait => {}
        }
    }
}

//! Stopping (SIGTERM, SIGINT; SPEC sections 6 Resign and 12): every group this server
//! leads hands over, and every group claims unfit (not persisted), so no round elects
//! a server about to leave. The daemon exits once every RESIGN has left and the state
//! file holds what it promised, or at the latest at the bound: the lease end of every
//! handoff begun plus a heartbeat.

use super::*;

/// How far a stop has come.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StopState {
    /// Not stopping.
    Running,
    /// A RESIGN or a write is still to come; the bound is then.
    Waiting(Time),
    /// Every handoff's RESIGN left and nothing is left to write: exit now.
    Done,
    /// The bound passed with no RESIGN waiting for a supervisor, but before the last
    /// one left (a RESIGN held behind a write that never finished).
    BoundPassed,
}

impl Host {
    /// Begins a stop, or continues one (call at every wakeup while stopping: a group
    /// won since, in a round begun before this server claimed unfit, is handed over
    /// too). The bound is set once and moved later only by a handoff begun now: it must
    /// not slide with the clock, or a RESIGN that never leaves would keep it open.
    pub fn handle_stop(&mut self, now: Time) -> Result<(), HostError> {
        let mut yielded = false;
        for g in 0..self.groups.len() {
            if !self.sabotage.stop_without_yield && self.groups[g].node.handle_yield(now) {
                log::info!("{}resigning leadership before exit", self.tag(g));
                yielded = true;
            }
        }
        let first = self.stopping.is_none();
        if first {
            // Unfit from this flush on (`apply_health`); the bound is set below.
            self.stopping = Some(now);
        }
        self.flush(now)?;
        if first || yielded {
            let until = self
                .groups
                .iter()
                .filter_map(|g| g.resign_until)
                .fold(now, Time::max);
            let bound = until + self.groups[0].node.heartbeat();
            let old = if first {
                bound
            } else {
                self.stopping.unwrap_or(bound)
            };
            self.stopping = Some(old.max(bound));
        }
        Ok(())
    }

    /// True once a stop began.
    pub fn stopping(&self) -> bool {
        self.stopping.is_some()
    }

    /// How far the stop has come at `now`.
    pub fn stop_state(&self, now: Time) -> StopState {
        let Some(bound) = self.stopping else {
            return StopState::Running;
        };
        if self.groups.iter().all(|g| g.node.resign_complete()) && !self.write_pending() {
            StopState::Done
        } else if now >= bound && !self.groups.iter().any(|g| g.node.resign_pending()) {
            StopState::BoundPassed
        } else {
            StopState::Waiting(bound)
        }
    }
}

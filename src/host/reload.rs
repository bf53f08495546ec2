//! A reload's new timers (SIGHUP, SPEC sections 11 and 16): every group takes them or
//! none does, and they are refused while they would leave a connected supervisor's
//! `--grace` no room in the lease (`electctl run` could then never run its command).

use super::*;
use crate::supervise::{Timers, check_grace, max_grace};

/// The timers a reload may change.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ReloadTimers {
    /// The heartbeat interval.
    pub heartbeat: Duration,
    /// The round-trip bound.
    pub rtt: Duration,
    /// `missed-heartbeats`.
    pub missed_heartbeats: u32,
    /// The clock drift bound, parts per million.
    pub drift_ppm: u32,
    /// `max-hold`.
    pub max_hold: Duration,
}

/// The timers every group ran before a reload, for a refusal to put back.
#[derive(Debug)]
pub struct TimersBefore {
    groups: Vec<crate::node::TimersBefore>,
    rtt: Duration,
    max_hold: Duration,
}

impl Host {
    /// Applies `new` to every group, all or nothing: on a refusal every group keeps
    /// the timers it ran (in force, and any still waiting for their hold to be
    /// written) and the error says why. Ok gives those, for a refusal later in the
    /// same reload (`restore_timers`). Flush after.
    pub fn handle_reload_timers(&mut self, new: ReloadTimers) -> Result<TimersBefore, String> {
        let before = TimersBefore {
            groups: self.groups.iter().map(|g| g.node.timers_before()).collect(),
            rtt: self.cfg.rtt,
            max_hold: self.cfg.max_hold,
        };
        for g in 0..self.groups.len() {
            let set = self.groups[g].node.set_timers(
                new.heartbeat,
                new.rtt,
                new.missed_heartbeats,
                new.drift_ppm,
                new.max_hold,
            );
            if let Err(e) = set {
                self.restore_timers(before);
                return Err(e.to_string());
            }
        }
        if let Err(e) = self.graces_fit(new.rtt) {
            self.restore_timers(before);
            return Err(e);
        }
        self.cfg.rtt = new.rtt;
        self.cfg.max_hold = new.max_hold;
        Ok(before)
    }

    /// Puts back what every group ran before a reload refused later (the check
    /// runners): no check, these are the timers that ran.
    pub fn restore_timers(&mut self, before: TimersBefore) {
        for (group, t) in self.groups.iter_mut().zip(before.groups) {
            group.node.put_back_timers(t);
        }
        self.cfg.rtt = before.rtt;
        self.cfg.max_hold = before.max_hold;
    }

    /// Err names the first supervisor whose `--grace` has no room in its group's lease
    /// with the timers now set and round-trip bound `rtt`, and the largest that fits.
    fn graces_fit(&self, rtt: Duration) -> Result<(), String> {
        for g in 0..self.groups.len() {
            // The timers asked for, also while they wait for their hold to be written.
            let (lease_len, heartbeat) = self.groups[g].node.timers_asked();
            let t = Timers {
                lease_len,
                heartbeat,
                rtt,
            };
            let tag = if self.cfg.several {
                format!(" of group {}", self.groups[g].name)
            } else {
                String::new()
            };
            for (client, pid, grace) in self.registry.graces(g) {
                if check_grace(grace, &t).is_ok() {
                    continue;
                }
                let who = pid.map_or(String::new(), |p| format!(" (pid {p})"));
                return Err(format!(
                    "the new timers leave no room for the --grace {}ms of the supervisor `electctl run`{who} on {client}{tag}: the new lease lasts {} ms, renewed every {} ms with acknowledgements within {} ms, so the largest grace that fits is {} ms; lower that supervisor's --grace to {}ms or less (and restart it) first, or choose longer timers",
                    grace.as_millis(),
                    t.budget_lease().as_millis(),
                    t.heartbeat.as_millis(),
                    t.rtt.as_millis(),
                    max_grace(&t).as_millis(),
                    max_grace(&t).as_millis(),
                ));
            }
        }
        Ok(())
    }
}

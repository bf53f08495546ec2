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

impl Host {
    /// Applies `new` to every group, all or nothing: on a refusal every group keeps
    /// `old` (the running timers) and the error says why. Flush after.
    pub fn handle_reload_timers(
        &mut self,
        old: ReloadTimers,
        new: ReloadTimers,
    ) -> Result<(), String> {
        let set = |host: &mut Host, g: usize, t: ReloadTimers| {
            host.groups[g].node.set_timers(
                t.heartbeat,
                t.rtt,
                t.missed_heartbeats,
                t.drift_ppm,
                t.max_hold,
            )
        };
        let restore = |host: &mut Host, upto: usize| {
            for g in 0..upto {
                if let Err(back) = set(host, g, old) {
                    log::error!("reload: cannot restore the running timers: {back}");
                }
            }
        };
        for g in 0..self.groups.len() {
            if let Err(e) = set(self, g, new) {
                restore(self, g);
                return Err(e.to_string());
            }
        }
        if let Err(e) = self.graces_fit(new.rtt) {
            restore(self, self.groups.len());
            return Err(e);
        }
        self.cfg.rtt = new.rtt;
        self.cfg.max_hold = new.max_hold;
        Ok(())
    }

    /// Puts back `old` after a reload refused later (the check runners): no check,
    /// these are the timers that ran.
    pub fn restore_timers(&mut self, old: ReloadTimers) {
        for g in 0..self.groups.len() {
            let r = self.groups[g].node.set_timers(
                old.heartbeat,
                old.rtt,
                old.missed_heartbeats,
                old.drift_ppm,
                old.max_hold,
            );
            if let Err(back) = r {
                log::error!("reload: cannot restore the running timers: {back}");
            }
        }
        self.cfg.rtt = old.rtt;
        self.cfg.max_hold = old.max_hold;
    }

    /// Err names the first supervisor whose `--grace` has no room in its group's lease
    /// with the timers now set and round-trip bound `rtt`, and the largest that fits.
    fn graces_fit(&self, rtt: Duration) -> Result<(), String> {
        for g in 0..self.groups.len() {
            let node = &self.groups[g].node;
            let t = Timers {
                lease_len: node.lease_len(),
                heartbeat: node.heartbeat(),
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

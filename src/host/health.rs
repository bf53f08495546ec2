//! Health (SPEC section 13): per group, its check's verdict (fall/rise counting,
//! `crate::health::CheckState`) and its supervisors' reports, combined into one
//! verdict, computed and stored here once, applied to the group's core (a stopping
//! server stays unfit whatever it says) and logged when it changes.
//!
//! The driver runs the check processes and hands in each result
//! ([`Host::handle_check_result`]); a supervisor's report comes through the registry
//! (`Host::handle_supervisor_health`). Every flush applies what changed, so the core
//! hears of it in the same flush.

use super::*;
use crate::health::{CheckState, Limits, Outcome, Verdict};

impl Host {
    /// Group `g`'s check at start, before the first input: its fall and rise (None:
    /// no check, always ok). With a check the verdict is `unknown` until it rises.
    pub fn set_check(&mut self, now: Time, g: usize, limits: Option<Limits>) {
        let group = &mut self.groups[g];
        group.last_resort_from = now + limits.map_or(std::time::Duration::ZERO, |l| l.settle);
        group.check = CheckState::new(limits);
        group.verdict = group.check.verdict();
        if group.verdict != Verdict::Ok && !self.sabotage.ignore_health {
            // Before anything else: its first round must already claim unfit.
            group.node.set_health(now, false);
        }
    }

    /// Group `g`'s check after a reload: the verdict follows `CheckState::set_limits`
    /// (a reload is no restart and never moves the verdict by itself).
    pub fn reload_check(&mut self, g: usize, limits: Option<Limits>) {
        self.groups[g].check.set_limits(limits);
    }

    /// One result of group `g`'s check. Flush after (a batch of results, one flush).
    pub fn handle_check_result(&mut self, g: usize, o: &Outcome) {
        self.groups[g].check.record(o);
    }

    /// Group `g`'s verdict, as its core was last told.
    pub fn verdict(&self, g: usize) -> Verdict {
        self.groups[g].verdict
    }

    /// Group `g`'s verdict now and, unless it is `ok`, its causes: the check's and each
    /// unhealthy supervisor's (for `status`).
    pub fn health(&self, g: usize) -> (Verdict, Option<String>) {
        let mut causes: Vec<String> = self.groups[g].check.cause().into_iter().collect();
        for (client, why) in self.registry.unhealthy(g) {
            causes.push(format!("electctl run on {client}: {why}"));
        }
        let v = self.combined(g);
        (v, (!causes.is_empty()).then(|| causes.join("; ")))
    }

    /// Changes of group `g`'s verdict so far.
    pub fn health_changes(&self, g: usize) -> u64 {
        self.groups[g].health_changes
    }

    /// The check's verdict, failing while a supervisor reports its command unhealthy.
    fn combined(&self, g: usize) -> Verdict {
        if self.registry.unhealthy(g).next().is_some() {
            Verdict::Failing
        } else {
            self.groups[g].check.verdict()
        }
    }

    /// Applies every group's verdict: logs and counts a change, and tells the core
    /// whether it may lead (ok and not stopping). Runs at the start of every flush.
    pub(super) fn apply_health(&mut self, now: Time) {
        for g in 0..self.groups.len() {
            let v = self.combined(g);
            if v != self.groups[g].verdict {
                self.log_change(g, v);
            }
            let fit = v == Verdict::Ok && self.stopping.is_none();
            // A stopping server is never a last resort (SPEC section 13).
            let last_resort = self
                .stopping
                .is_none()
                .then_some(self.groups[g].last_resort_from);
            let node = &mut self.groups[g].node;
            if !self.sabotage.ignore_health {
                node.set_last_resort(now, last_resort);
            }
            if fit != node.healthy() && !self.sabotage.ignore_health {
                node.set_health(now, fit);
                if !fit && self.sabotage.naive_health_yield && node.is_leader(now) {
                    node.handle_yield(now);
                }
            }
        }
    }

    /// Group `g`'s verdict changed to `v`: stored, counted and logged with its cause.
    fn log_change(&mut self, g: usize, v: Verdict) {
        let (_, cause) = self.health(g);
        let tag = self.tag(g);
        let group = &mut self.groups[g];
        let was = std::mem::replace(&mut group.verdict, v);
        group.health_changes += 1;
        let cause = cause.unwrap_or_default();
        match v {
            Verdict::Ok => log::info!("{tag}health ok (was {}): this server may lead", was.name()),
            Verdict::Failing if group.node.leads().is_some() => log::warn!(
                "{tag}health failing: {cause}; this leader hands over as soon as another server is known fit, and leads on meanwhile"
            ),
            Verdict::Failing => {
                log::warn!("{tag}health failing: {cause}; this server may not lead")
            }
            Verdict::Unknown => log::info!("{tag}health unknown: {cause}"),
        }
    }
}

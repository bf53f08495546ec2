//! Health (SPEC section 13): the check's verdict and the supervisors' reports, as the one
//! bool the core is told.

use super::*;

impl Daemon {
    /// This server's health: the check's verdict and every supervisor's report. Cheap:
    /// it runs at every wakeup.
    pub(super) fn verdict(&self) -> Verdict {
        if self.control.unhealthy_supervisors(0).next().is_some() {
            Verdict::Failing
        } else {
            self.checks.verdict()
        }
    }

    /// The verdict with the causes of anything but `ok`.
    pub(super) fn health(&self) -> (Verdict, Option<String>) {
        let mut causes: Vec<String> = self.checks.cause().into_iter().collect();
        let mut v = self.checks.verdict();
        for (slot, why) in self.control.unhealthy_supervisors(0) {
            v = Verdict::Failing;
            causes.push(format!("electctl run on control client {slot}: {why}"));
        }
        (v, (!causes.is_empty()).then(|| causes.join("; ")))
    }

    /// Tells the core when the combined health changes, and logs it with its cause.
    /// Returns true on a change.
    pub(super) fn update_health(&mut self) -> Result<bool, Fatal> {
        self.checks.set_leader(self.view.role == Role::Leader);
        if self.verdict() == self.health {
            return Ok(false);
        }
        let (v, cause) = self.health();
        let was = std::mem::replace(&mut self.health, v);
        self.metrics.health_changes += 1;
        let cause = cause.unwrap_or_default();
        match v {
            Verdict::Ok => info!("health ok (was {}): this server may lead", was.name()),
            Verdict::Failing if self.node.leads().is_some() => warn!(
                "health failing: {cause}; this leader hands over as soon as another server is known fit, and leads on meanwhile"
            ),
            Verdict::Failing => warn!("health failing: {cause}; this server may not lead"),
            Verdict::Unknown => info!("health unknown: {cause}"),
        }
        let healthy = v == Verdict::Ok;
        if healthy != self.node.healthy() {
            self.node.set_health(boot_now(), healthy);
        }
        // The view's health changes here, even when the core's bool does not.
        self.flush_node()?;
        Ok(true)
    }
}

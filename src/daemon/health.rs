//! Health (SPEC section 13): per group, the check's verdict and the reports of the
//! group's supervisors, as the one bool the group's core is told.

use super::*;

impl Daemon {
    /// Group `g`'s health: its check's verdict and every one of its supervisors'
    /// reports. Cheap: it runs at every wakeup.
    pub(super) fn verdict(&self, g: usize) -> Verdict {
        if self.host.registry().unhealthy(g).next().is_some() {
            Verdict::Failing
        } else {
            self.groups[g].checks.verdict()
        }
    }

    /// Group `g`'s verdict with the causes of anything but `ok`.
    pub(super) fn health(&self, g: usize) -> (Verdict, Option<String>) {
        let checks = &self.groups[g].checks;
        let mut causes: Vec<String> = checks.cause().into_iter().collect();
        let mut v = checks.verdict();
        for (client, why) in self.host.registry().unhealthy(g) {
            v = Verdict::Failing;
            causes.push(format!("electctl run on {client}: {why}"));
        }
        (v, (!causes.is_empty()).then(|| causes.join("; ")))
    }

    /// Tells each group's core when its combined health changes, and logs it with its
    /// cause. Returns true on a change.
    pub(super) fn update_health(&mut self) -> Result<bool, Fatal> {
        let mut any = false;
        let several = self.cfg.has_groups();
        for g in 0..self.groups.len() {
            let group = &self.groups[g];
            group.checks.set_leader(group.view.role == Role::Leader);
            if self.verdict(g) == group.health {
                continue;
            }
            let (v, cause) = self.health(g);
            let group = &mut self.groups[g];
            let was = std::mem::replace(&mut group.health, v);
            group.metrics.health_changes += 1;
            let cause = cause.unwrap_or_default();
            let tag = group.tag(several);
            match v {
                Verdict::Ok => info!("{tag}health ok (was {}): this server may lead", was.name()),
                Verdict::Failing if self.host.group(g).node.leads().is_some() => warn!(
                    "{tag}health failing: {cause}; this leader hands over as soon as another server is known fit, and leads on meanwhile"
                ),
                Verdict::Failing => warn!("{tag}health failing: {cause}; this server may not lead"),
                Verdict::Unknown => info!("{tag}health unknown: {cause}"),
            }
            // A stopping server stays unfit whatever its check says (`stop_groups`).
            let healthy = v == Verdict::Ok && self.stopping.is_none();
            let node = &mut self.host.group_mut(g).node;
            if healthy != node.healthy() {
                node.set_health(boot_now(), healthy);
            }
            any = true;
        }
        if any {
            // The views' health changes here, even when a core's bool does not.
            self.flush_node()?;
        }
        Ok(any)
    }
}

//! Health (SPEC section 13): the check runner's results go to the host, which owns
//! each group's verdict (`crate::host`, health.rs); the checks learn this server's
//! role (their ELECTD_ROLE).

use super::*;

impl Daemon {
    /// Hands every group's new check results to the host (one flush for all), and
    /// tells each group's checks whether this server leads.
    pub(super) fn take_check_results(&mut self) -> Result<(), Fatal> {
        let mut results = Vec::new();
        for (g, group) in self.groups.iter_mut().enumerate() {
            group.checks.set_leader(group.view.role == Role::Leader);
            results.extend(group.checks.take_results().into_iter().map(|o| (g, o)));
        }
        if results.is_empty() {
            return Ok(());
        }
        self.drive(|h, now| {
            for (g, o) in &results {
                h.handle_check_result(*g, o);
            }
            h.flush(now)
        })
    }
}

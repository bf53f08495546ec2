//! Planned handoffs (SPEC section 6, Resign): logged and counted here; the host's
//! supervisor registry tells the group's supervisors and releases the RESIGN once each
//! has confirmed its command exited (`crate::host::Release` says why it left).

use super::*;
use crate::host::Release;

/// A planned handoff under way: when it began and why its RESIGN left.
#[derive(Copy, Clone, Debug)]
pub(super) struct Handoff {
    pub(super) term: u64,
    pub(super) began: Time,
    pub(super) until: Time,
    /// Set when the host released the RESIGN.
    pub(super) released: Option<Release>,
}

impl Daemon {
    /// The host released group `g`'s waiting RESIGN: every supervisor was clear.
    pub(super) fn on_released(&mut self, g: usize, why: Release) {
        if let Some(h) = self.groups[g].handoff.as_mut() {
            h.released = Some(why);
        }
    }

    /// A planned handoff of group `g` began: its supervisors are told by the line the
    /// host sends next; with none engaged the host let the RESIGN go at once
    /// (`released`).
    pub(super) fn on_resigning(
        &mut self,
        g: usize,
        term: u64,
        until: Time,
        to: Option<u16>,
        reason: Handover,
        released: bool,
    ) {
        let now = boot_now();
        let tag = self.groups[g].tag(self.cfg.has_groups());
        let waiting = self.host.registry().supervisors(g);
        let successor = to.map_or(String::new(), |t| {
            format!(
                ": the RESIGN names server {t} ({}) as successor",
                self.cfg.name_of(t)
            )
        });
        let group = &mut self.groups[g];
        group.metrics.handoffs += 1;
        group.last_handover_to = to;
        info!(
            "{tag}handoff of term {term} begins ({}){successor}",
            reason.name()
        );
        let mut h = Handoff {
            term,
            began: now,
            until,
            released: None,
        };
        if released {
            h.released = Some(Release::NoSupervisor);
        } else {
            info!(
                "{tag}handoff of term {term}: waiting for {waiting} supervisor(s) to stop their commands, {} ms at most",
                until.saturating_since(now).as_millis()
            );
        }
        group.handoff = Some(h);
    }

    /// Group `g`'s RESIGN left: logs how long it waited and why it ended.
    pub(super) fn on_resigned(&mut self, g: usize, term: u64) {
        let now = boot_now();
        let tag = self.groups[g].tag(self.cfg.has_groups());
        let group = &mut self.groups[g];
        let Some(h) = group.handoff.take().filter(|h| h.term == term) else {
            return;
        };
        let waited = now.saturating_since(h.began);
        let why = h.released.unwrap_or(if now >= h.until {
            Release::LeaseEnd
        } else {
            Release::Unwaited
        });
        if why.waited() {
            group.metrics.handoffs_waited += 1;
        }
        group.metrics.last_handoff_wait_ms = waited.as_millis() as u64;
        info!(
            "{tag}handoff of term {term}: RESIGN after {:.1} ms ({})",
            waited.as_secs_f64() * 1e3,
            why.describe()
        );
    }
}

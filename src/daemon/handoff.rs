//! Planned handoffs (SPEC section 6, Resign): a group's supervisors are told at once,
//! and the group's RESIGN is released only once each has confirmed its command exited.

use super::*;

/// A planned handoff under way: when it began and why its RESIGN left.
#[derive(Copy, Clone, Debug)]
pub(super) struct Handoff {
    pub(super) term: u64,
    pub(super) began: Time,
    pub(super) until: Time,
    /// Set when the daemon released the RESIGN: every supervisor had confirmed.
    pub(super) released: Option<&'static str>,
}

impl Daemon {
    /// During planned handoffs: releases each group's RESIGN once every one of its
    /// supervisors is clear.
    pub(super) fn check_release(&mut self) -> Result<(), Fatal> {
        let now = boot_now();
        let mut any = false;
        for g in 0..self.groups.len() {
            if !self.host.group(g).node.resign_pending()
                || !self.control.supervisors_clear(g, now.as_nanos())
            {
                continue;
            }
            let departed = self.control.departed_until_ns(g);
            let group = &mut self.groups[g];
            if let Some(h) = group.handoff.as_mut() {
                h.released = Some(if departed > h.began.as_nanos() {
                    "every supervisor confirmed, and the lease known to a departed one ended"
                } else {
                    "every supervisor confirmed"
                });
            }
            self.host.group_mut(g).node.handle_released(now);
            any = true;
        }
        if any {
            self.flush_node()?;
        }
        Ok(())
    }

    /// A planned handoff of group `g` began: its supervisors are told by the follower
    /// line pushed next; with none engaged the host let the RESIGN go at once
    /// (`released`, its release gate).
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
        let waiting = self.control.supervisors(g);
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
            h.released = Some("no supervisor held the lease");
            group.handoff = Some(h);
        } else {
            info!(
                "{tag}handoff of term {term}: waiting for {waiting} supervisor(s) to stop their commands, {} ms at most",
                until.saturating_since(now).as_millis()
            );
            group.handoff = Some(h);
        }
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
            "lease end: not every supervisor confirmed"
        } else {
            "sent without waiting"
        });
        if !matches!(why, "no supervisor held the lease" | "sent without waiting") {
            group.metrics.handoffs_waited += 1;
        }
        group.metrics.last_handoff_wait_ms = waited.as_millis() as u64;
        info!(
            "{tag}handoff of term {term}: RESIGN after {:.1} ms ({why})",
            waited.as_secs_f64() * 1e3
        );
    }
}

//! Planned handoffs (SPEC section 6, Resign): supervisors are told at once, and the
//! RESIGN is released only once each has confirmed its command exited.

use super::*;

impl Daemon {
    /// During a planned handoff: releases the RESIGN once every supervisor is clear.
    pub(super) fn check_release(&mut self) -> Result<(), Fatal> {
        if !self.node.resign_pending() || !self.control.supervisors_clear(0, boot_now().as_nanos())
        {
            return Ok(());
        }
        if let Some(h) = self.handoff.as_mut() {
            h.released = Some(if self.control.departed_until_ns(0) > h.began.as_nanos() {
                "every supervisor confirmed, and the lease known to a departed one ended"
            } else {
                "every supervisor confirmed"
            });
        }
        self.node.handle_released(boot_now());
        self.flush_node()
    }

    /// A planned handoff began: supervisors are told by the follower line pushed next;
    /// with none engaged the RESIGN leaves at once.
    pub(super) fn on_resigning(
        &mut self,
        term: u64,
        until: Time,
        to: Option<u16>,
        reason: Handover,
    ) {
        let now = boot_now();
        self.metrics.handoffs += 1;
        self.last_handover_to = to;
        info!(
            "handoff of term {term} begins ({}){}",
            reason.name(),
            to.map_or(String::new(), |t| format!(
                ": the RESIGN names server {t} ({}) as successor",
                self.cfg.name_of(t)
            ))
        );
        let mut h = Handoff {
            term,
            began: now,
            until,
            released: None,
        };
        if self.control.supervisors_clear(0, now.as_nanos()) {
            h.released = Some("no supervisor held the lease");
            self.handoff = Some(h);
            self.node.handle_released(now);
        } else {
            info!(
                "handoff of term {term}: waiting for {} supervisor(s) to stop their commands, {} ms at most",
                self.control.supervisors(0),
                until.saturating_since(now).as_millis()
            );
            self.handoff = Some(h);
        }
    }

    /// The RESIGN left: logs how long it waited and why it ended.
    pub(super) fn on_resigned(&mut self, term: u64) {
        let now = boot_now();
        let Some(h) = self.handoff.take().filter(|h| h.term == term) else {
            return;
        };
        let waited = now.saturating_since(h.began);
        let why = h.released.unwrap_or(if now >= h.until {
            "lease end: not every supervisor confirmed"
        } else {
            "sent without waiting"
        });
        if !matches!(why, "no supervisor held the lease" | "sent without waiting") {
            self.metrics.handoffs_waited += 1;
        }
        self.metrics.last_handoff_wait_ms = waited.as_millis() as u64;
        info!(
            "handoff of term {term}: RESIGN after {:.1} ms ({why})",
            waited.as_secs_f64() * 1e3
        );
    }
}

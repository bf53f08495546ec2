//! Driving the host: every input goes through [`Daemon::drive`], which first tells the
//! host of the supervisors whose connections are gone, hands it the input with the
//! boot clock's `now`, then takes what it produced: events (handoffs, logged and
//! counted here), supervisor lines (to their connections), the state file's write (to
//! the writer thread: the loop never waits on the disk, SPEC section 12), and the
//! datagrams.
//!
//! Persist-then-confirm holds because the host confirms a write to the cores only
//! when `handle_write_done` reports it, after the writer thread's fsyncs; what waited
//! for it stays held in its core until then (`crate::host`).

use super::*;
use crate::host::HostError;

/// A write that has not finished after this long is logged (once per write).
const SLOW_WRITE: Duration = Duration::from_secs(5);

impl Daemon {
    /// Feeds the host one input (`f`, given `now`), then carries out what it asked.
    pub(super) fn drive<T>(
        &mut self,
        f: impl FnOnce(&mut Host, Time) -> Result<T, HostError>,
    ) -> Result<T, Fatal> {
        let now = boot_now();
        self.take_departures();
        let r = f(&mut self.host, now).map_err(|e| Fatal::State(e.0))?;
        self.take_outputs(now)?;
        Ok(r)
    }

    /// Tells the host of the supervisors whose connections were freed.
    pub(super) fn take_departures(&mut self) {
        for c in self.control.take_departed() {
            self.host.handle_client_gone(c);
        }
    }

    /// Runs every group's due timers, then flushes.
    pub(super) fn on_timeouts(&mut self) -> Result<(), Fatal> {
        self.drive(|h, now| h.handle_timeout(now))
    }

    /// Flushes the host after a core was changed through `host.group_mut`.
    pub(super) fn flush_node(&mut self) -> Result<(), Fatal> {
        self.drive(|h, now| h.flush(now))
    }

    /// Events, then the write (to the writer thread), then the datagrams; then
    /// watchers and supervisors hear of changes, as of `now`, the instant the host
    /// was given (one clock read per input, issue 25).
    fn take_outputs(&mut self, now: Time) -> Result<(), Fatal> {
        while let Some(n) = self.host.poll_event() {
            match n {
                Notice::Event {
                    group,
                    event,
                    released,
                } => self.on_event(group, event, released),
                Notice::Released { group, why } => self.on_released(group, why),
                Notice::Supervisor { client, line } => {
                    self.control.send_line(client, &line.to_json())
                }
                Notice::ArmTimers { client, at, .. } => {
                    if let Err(e) = self.control.arm_timers(client, at) {
                        // Not armed: the supervisor's timers keep the last lease end
                        // armed, so its command is stopped early, never late.
                        warn!("cannot arm the stop timers of supervisor on {client}: {e}");
                    }
                }
            }
        }
        if let Some(w) = self.host.poll_write() {
            self.writer
                .submit(w.groups, w.extra)
                .map_err(|e| Fatal::State(format!("cannot write the state: {e}")))?;
            self.write_since = Some((Instant::now(), false));
        }
        self.send_transmits();
        self.report_changes(now);
        Ok(())
    }

    /// How long the write in flight has taken so far (zero when none).
    pub(super) fn write_age(&self) -> Duration {
        self.write_since
            .as_ref()
            .map_or(Duration::ZERO, |(since, _)| since.elapsed())
    }

    /// Takes the writer thread's report, if the write in flight has finished, and hands
    /// it to the host (which confirms it to the groups that asked and flushes what it
    /// released). A failed write stops the daemon.
    pub(super) fn take_write_result(&mut self) -> Result<(), Fatal> {
        let Some((since, warned)) = self.write_since.as_mut() else {
            return Ok(());
        };
        match self.writer.try_result() {
            Some(r) => self.write_done(r),
            None => {
                if !*warned && since.elapsed() >= SLOW_WRITE {
                    *warned = true;
                    warn!(
                        "the state file write has taken {} s so far ({}): votes and new terms wait for it; leases, heartbeats and the control socket go on",
                        since.elapsed().as_secs(),
                        self.cfg.state.display()
                    );
                }
                Ok(())
            }
        }
    }

    /// The write in flight finished with `r`.
    fn write_done(&mut self, r: Result<(), String>) -> Result<(), Fatal> {
        if let Some((since, true)) = self.write_since.take() {
            if r.is_ok() {
                info!(
                    "the state file write finished after {} ms",
                    since.elapsed().as_millis()
                );
            }
        }
        self.drive(|h, now| h.handle_write_done(now, r))
    }

    /// The number of the write that will hold everything asked for so far: a write
    /// counts as done once the host's `state_writes` reaches it (`Host::write_holding_all`).
    pub(super) fn write_holding_all(&self) -> u64 {
        self.host.write_holding_all()
    }

    /// An event of group `g`'s core, after the flush that made it (the host logged
    /// the ones that are only logged). `released`: the host let its RESIGN go at once.
    fn on_event(&mut self, g: usize, e: Event, released: bool) {
        match e {
            Event::Resigning {
                term,
                until,
                to,
                reason,
            } => self.on_resigning(g, term, until, to, reason, released),
            Event::Resigned { term } => self.on_resigned(g, term),
            Event::DualLeader { .. }
            | Event::Elected { .. }
            | Event::Voted { .. }
            | Event::SteppedDown { .. } => {}
        }
    }
}

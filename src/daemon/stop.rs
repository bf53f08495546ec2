//! The end of a stop (SIGTERM, SIGINT; README "Signals"): once the host's stop is
//! over (every RESIGN out, the state file written), the daemon still waits for the
//! hooks that run or wait to run, at most `hook-timeout` from then. Resigning starts
//! `on-follower`, the hook that often stops the processor: a daemon that exited under
//! it would leave systemd to kill it with the rest of the unit's control group, and
//! the processor running on a server that no longer leads.
//!
//! The loop keeps running meanwhile: SIGCHLD wakes it when a hook exits, and each
//! running hook's kill is brought forward to the bound, so `Hooks::deadline` wakes it
//! there at the latest. A queued hook is started by the stop's turn (`Hooks::kill_by`),
//! only before the bound: one reaped at the bound leaves the next unstarted. None of
//! this runs at rest.

use super::*;
use crate::hooks::HookRun;

impl Daemon {
    /// How far the stop has come, hooks included: the host's answer
    /// (`Host::stop_state`), held as `Waiting` while the stop is over but a hook runs
    /// or waits, until `hook-timeout` after the host first said so. Past that bound
    /// every hook left is killed, by name in the log, and the host's answer stands.
    #[inline(never)]
    pub(super) fn stop_state(&mut self, now: Time) -> StopState {
        let state = self.host.stop_state(now);
        if !matches!(state, StopState::Done | StopState::BoundPassed)
            || !self.groups.iter().any(|g| g.hooks.busy())
        {
            return state;
        }
        let at = Instant::now();
        let bound = match self.hooks_bound {
            Some(b) => b,
            None => {
                // Set once: it must not slide, or hooks queued one after another (a
                // group won and handed over again) would keep the stop open.
                let b = at + self.cfg.hook_timeout;
                self.hooks_bound = Some(b);
                self.log_hook_wait();
                b
            }
        };
        if at < bound {
            // Starts a queued hook if none runs (only here, never past the bound).
            for g in &mut self.groups {
                g.hooks.kill_by(bound, at);
            }
            return StopState::Waiting(now + (bound - at));
        }
        self.abandon_hooks();
        state
    }

    /// Says once what the stop waits for: each group's running hook.
    fn log_hook_wait(&self) {
        let several = self.cfg.has_groups();
        for g in self.groups.iter().filter(|g| g.hooks.busy()) {
            let queued = match g.hooks.queued() {
                q if q.is_empty() => String::new(),
                q => format!(", then {}", q.join(", ")),
            };
            match g.hooks.running() {
                Some(HookRun { name, pid }) => info!(
                    "{}stopping: waiting for hook {name} (pid {pid}) to finish{queued}, at most hook-timeout {:?}",
                    g.tag(several),
                    self.cfg.hook_timeout
                ),
                None => info!(
                    "{}stopping: waiting for hooks{queued}, at most hook-timeout {:?}",
                    g.tag(several),
                    self.cfg.hook_timeout
                ),
            }
        }
    }

    /// Kills what still runs at the bound and names what waits, which never runs.
    fn abandon_hooks(&mut self) {
        let several = self.cfg.has_groups();
        let timeout = self.cfg.hook_timeout;
        for g in &mut self.groups {
            if let Some(HookRun { name, pid }) = g.hooks.kill_now() {
                warn!(
                    "{}stopping: killed hook {name} (pid {pid}) and its process group: it outlived hook-timeout {timeout:?} after the stop",
                    g.tag(several)
                );
            }
            let queued = g.hooks.queued();
            if !queued.is_empty() {
                warn!(
                    "{}stopping: exiting without running the queued hooks {}",
                    g.tag(several),
                    queued.join(", ")
                );
            }
        }
    }
}

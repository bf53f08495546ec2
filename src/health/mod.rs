//! Health checks (SPEC section 13): the `check` command, run off the event loop, and
//! the verdict its results give.
//!
//! - [`outcome`]: what one run came to ([`Outcome`], [`Failure`]) and the counters.
//! - [`process`]: one check process: no shell, its own process group, the timeout
//!   that kills the group, the first line of its output ([`run_once`]).
//! - `runner`: the thread that runs the check every `check-interval` and wakes the
//!   event loop (a `mio::Waker`) with each result; the loop never waits for a check.
//! - [`verdict`]: pure fall/rise counting ([`CheckState`]): `unknown` until the first
//!   verdict, `ok` after `check-rise` consecutive successes, `failing` after
//!   `check-fall` consecutive failures, and the cause while it is not `ok`. A server
//!   with a check is unhealthy until its verdict is `ok`.
//!
//! [`Checks`] ties them together for the daemon: one group's runner and verdict.

pub mod outcome;
pub mod process;
mod runner;
pub mod verdict;

pub use outcome::{CheckCounters, Failure, Outcome, REASONS, signal_name};
pub use process::{OUTPUT_BYTES, Stuck, run_once};
pub use verdict::{CheckState, FallRise, Limits, Verdict};

use crate::config::Check;
use log::info;
use runner::{Runner, Who};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The fall and rise of a configured check, and the time it takes to rise.
pub fn limits(c: &Check) -> Limits {
    Limits {
        fall: c.fall,
        rise: c.rise,
        settle: c.interval.saturating_mul(c.rise).saturating_add(c.timeout),
    }
}

/// The check as the event loop sees it: the runner and its counters. The verdict
/// its results give is the host's (`crate::host`, `CheckState`).
pub struct Checks {
    check: Option<Check>,
    runner: Option<Runner>,
    waker: Arc<mio::Waker>,
    who: Who,
    leader: Arc<AtomicBool>,
    /// Counters for metrics.
    pub counters: CheckCounters,
}

impl Checks {
    /// Starts the runner of election group `group`'s check (its ELECTD_GROUP), if one
    /// is configured. Call after the daemon's signal mask is set: the thread inherits
    /// it, so signals still reach the signalfd.
    pub fn start(
        check: Option<&Check>,
        waker: Arc<mio::Waker>,
        id: u16,
        group: &str,
    ) -> io::Result<Checks> {
        let who = Who {
            id,
            group: group.to_string(),
        };
        let leader = Arc::new(AtomicBool::new(false));
        let runner = match check {
            Some(c) => Some(Runner::start(
                c.into(),
                waker.clone(),
                who.clone(),
                leader.clone(),
            )?),
            None => None,
        };
        Ok(Checks {
            check: check.cloned(),
            runner,
            waker,
            who,
            leader,
            counters: CheckCounters::default(),
        })
    }

    /// True when a check is configured.
    pub fn configured(&self) -> bool {
        self.check.is_some()
    }

    /// Tells the checks whether this server leads (their ELECTD_ROLE).
    pub fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::Relaxed);
    }

    /// Applies a reloaded configuration: the runner takes the new command and timing,
    /// or stops with the check (the host's verdict follows
    /// [`CheckState::set_limits`]: a reload is no restart).
    pub fn reconfigure(&mut self, new: Option<&Check>) -> io::Result<()> {
        if new == self.check.as_ref() {
            return Ok(());
        }
        match new {
            None => {
                self.runner = None;
                info!("health check removed");
            }
            Some(c) => {
                match &self.runner {
                    Some(r) if r.settings.send(c.into()).is_ok() => {}
                    _ => {
                        self.runner = Some(Runner::start(
                            c.into(),
                            self.waker.clone(),
                            self.who.clone(),
                            self.leader.clone(),
                        )?)
                    }
                }
                info!(
                    "health check: {} every {:?} (timeout {:?}, fall {}, rise {})",
                    c.argv.join(" "),
                    c.interval,
                    c.timeout,
                    c.fall,
                    c.rise
                );
            }
        }
        self.check = new.cloned();
        Ok(())
    }

    /// Takes the results that arrived (counted), for the host's verdict
    /// ([`CheckState::record`] logs them).
    pub fn take_results(&mut self) -> Vec<Outcome> {
        let (Some(r), Some(_)) = (self.runner.as_ref(), self.check.as_ref()) else {
            return Vec::new();
        };
        let outcomes: Vec<Outcome> = r.results.try_iter().collect();
        for o in &outcomes {
            self.counters.count(o);
        }
        outcomes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// The runner's results, fed to a `CheckState` as the host does: failing after
    /// `fall`, ok again after a reload to a passing check.
    #[test]
    fn the_runner_reports_through_the_waker() {
        let poll = mio::Poll::new().unwrap();
        let waker = Arc::new(mio::Waker::new(poll.registry(), mio::Token(7)).unwrap());
        let check = Check {
            argv: vec!["/bin/sh".into(), "-c".into(), "exit 1".into()],
            line: 1,
            interval: Duration::from_millis(20),
            timeout: Duration::from_millis(20),
            fall: 2,
            rise: 1,
        };
        let mut c = Checks::start(Some(&check), waker, 1, "default").unwrap();
        let mut state = CheckState::new(Some(limits(&check)));
        assert_eq!(state.verdict(), Verdict::Unknown);
        let t0 = Instant::now();
        while state.verdict() != Verdict::Failing {
            assert!(t0.elapsed() < Duration::from_secs(10), "no verdict");
            std::thread::sleep(Duration::from_millis(10));
            for o in c.take_results() {
                state.record(&o);
            }
        }
        assert!(
            state.cause().unwrap().contains("exit status 1"),
            "{:?}",
            state.cause()
        );
        assert!(c.counters.failures[0] >= 2);
        // Reloaded to a passing check: the verdict follows after `rise` successes.
        let pass = Check {
            argv: vec!["/bin/true".into()],
            ..check
        };
        c.reconfigure(Some(&pass)).unwrap();
        state.set_limits(Some(limits(&pass)));
        while state.verdict() != Verdict::Ok {
            assert!(t0.elapsed() < Duration::from_secs(10), "no recovery");
            std::thread::sleep(Duration::from_millis(10));
            for o in c.take_results() {
                state.record(&o);
            }
        }
        c.reconfigure(None).unwrap();
        state.set_limits(None);
        assert_eq!((state.verdict(), state.cause()), (Verdict::Ok, None));
        assert!(c.take_results().is_empty(), "results without a check");
    }
}

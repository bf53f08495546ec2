//! The verdict (SPEC section 13), pure: fall/rise counting of check results into
//! `unknown`, `ok` or `failing`, and the cause given while it is not `ok`. No clock,
//! process, thread or file: results come in as [`Outcome`] values, so the daemon's
//! runner and the simulator drive the same rules.

use super::outcome::Outcome;
use log::{debug, info};

/// A health verdict.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A check is configured and has not reached a verdict since start.
    Unknown,
    /// Passing: `rise` consecutive successes (or no check at all).
    Ok,
    /// `fall` consecutive failures.
    Failing,
}

impl Verdict {
    /// `unknown`, `ok` or `failing`: the `health` of `status`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Unknown => "unknown",
            Verdict::Ok => "ok",
            Verdict::Failing => "failing",
        }
    }
}

/// Fall/rise counting: a pure function of the results so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FallRise {
    fall: u32,
    rise: u32,
    verdict: Verdict,
    /// Consecutive successes and failures up to the latest result.
    oks: u32,
    fails: u32,
}

impl FallRise {
    /// Starts `Unknown`: `rise` successes make it `Ok`, `fall` failures `Failing`.
    pub fn new(fall: u32, rise: u32) -> FallRise {
        FallRise {
            fall: fall.max(1),
            rise: rise.max(1),
            verdict: Verdict::Unknown,
            oks: 0,
            fails: 0,
        }
    }

    /// The current verdict.
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// Consecutive failures (0 after a success).
    pub fn failures_in_a_row(&self) -> u32 {
        self.fails
    }

    /// Consecutive successes (0 after a failure).
    pub fn successes_in_a_row(&self) -> u32 {
        self.oks
    }

    /// New limits (SIGHUP); the verdict and the streaks so far stay.
    pub fn set_limits(&mut self, fall: u32, rise: u32) {
        self.fall = fall.max(1);
        self.rise = rise.max(1);
    }

    /// Records one result; returns the new verdict when it changed.
    pub fn record(&mut self, ok: bool) -> Option<Verdict> {
        if ok {
            self.oks = self.oks.saturating_add(1);
            self.fails = 0;
        } else {
            self.fails = self.fails.saturating_add(1);
            self.oks = 0;
        }
        let next = match self.verdict {
            Verdict::Ok if self.fails >= self.fall => Verdict::Failing,
            Verdict::Failing | Verdict::Unknown if self.oks >= self.rise => Verdict::Ok,
            Verdict::Unknown if self.fails >= self.fall => Verdict::Failing,
            v => v,
        };
        (next != self.verdict).then(|| {
            self.verdict = next;
            next
        })
    }
}

/// `check-fall` and `check-rise` as configured.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Consecutive failures that make a healthy server unhealthy.
    pub fall: u32,
    /// Consecutive successes that make an unhealthy server healthy.
    pub rise: u32,
    /// How long a passing check takes to rise after a start (check-rise x
    /// check-interval + check-timeout): until then a failing verdict may only mean
    /// "not yet checked", and the server is no last resort (SPEC section 13).
    pub settle: std::time::Duration,
}

/// One group's verdict: the fall/rise count of its check's results and the latest
/// failure, which together give the cause. Without a check the verdict is `Ok`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckState {
    /// None without a check.
    limits: Option<Limits>,
    counting: FallRise,
    /// The latest failure, described ("exit status 3; output: ...").
    last_failure: Option<String>,
}

impl CheckState {
    /// At start: `Unknown` with a check (`limits`), `Ok` without one.
    pub fn new(limits: Option<Limits>) -> CheckState {
        CheckState {
            limits,
            counting: limits.map_or(FallRise::new(1, 1), |l| FallRise::new(l.fall, l.rise)),
            last_failure: None,
        }
    }

    /// The verdict: `Ok` without a check.
    pub fn verdict(&self) -> Verdict {
        if self.limits.is_some() {
            self.counting.verdict()
        } else {
            Verdict::Ok
        }
    }

    /// Why the verdict is not `Ok`, if it is not.
    pub fn cause(&self) -> Option<String> {
        let l = self.limits?;
        match self.counting.verdict() {
            Verdict::Ok => None,
            Verdict::Failing => Some(format!(
                "check failed {} times in a row, last: {}",
                self.counting.failures_in_a_row(),
                self.last_failure.as_deref().unwrap_or("?")
            )),
            Verdict::Unknown => Some(format!(
                "check has no verdict yet ({} of {} successes needed{})",
                self.counting.successes_in_a_row(),
                l.rise,
                self.last_failure
                    .as_deref()
                    .map_or(String::new(), |f| format!("; last failure: {f}"))
            )),
        }
    }

    /// Records one check result; returns the new verdict when it changed. Without a
    /// check, a result (a late one) changes nothing. Logs a failure that begins a run
    /// of failures (at info) and the rest at debug; the caller logs changes of health.
    pub fn record(&mut self, o: &Outcome) -> Option<Verdict> {
        let l = self.limits?;
        if o.result.is_err() {
            let text = o.describe();
            if self.counting.failures_in_a_row() == 0 {
                info!(
                    "health check failed (1 of {} before unhealthy): {text}",
                    l.fall
                );
            } else {
                debug!("health check failed again: {text}");
            }
            self.last_failure = Some(text);
        } else if self.counting.failures_in_a_row() > 0 {
            info!("health check passed ({:?}) after a failure", o.took);
        } else {
            debug!("health check passed in {:?}", o.took);
        }
        self.counting.record(o.result.is_ok())
    }

    /// Applies reloaded limits (`None`: the check was removed). A reload is no restart
    /// and must not move the leadership by itself: changed limits keep the verdict and
    /// the streaks; a check added by a reload starts from the current verdict, `ok`,
    /// and needs `check-fall` failures to fail; a removed check leaves the server
    /// healthy.
    pub fn set_limits(&mut self, new: Option<Limits>) {
        match (self.limits, new) {
            (_, None) => {
                self.counting = FallRise::new(1, 1);
                self.last_failure = None;
            }
            (None, Some(l)) => {
                // Healthy so far, without a check: keep it until the check fails.
                self.counting = FallRise {
                    verdict: Verdict::Ok,
                    ..FallRise::new(l.fall, l.rise)
                };
            }
            (Some(_), Some(l)) => self.counting.set_limits(l.fall, l.rise),
        }
        self.limits = new;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::Failure;
    use std::time::Duration;

    #[test]
    fn fall_and_rise_count_consecutive_results() {
        let mut f = FallRise::new(3, 2);
        assert_eq!(f.verdict(), Verdict::Unknown);
        // Unknown: one success is not enough, a failure restarts the count.
        assert_eq!(f.record(true), None);
        assert_eq!(f.record(false), None);
        assert_eq!(f.record(true), None);
        assert_eq!(f.record(true), Some(Verdict::Ok));
        // Flapping within fall changes nothing.
        for _ in 0..10 {
            assert_eq!(f.record(false), None);
            assert_eq!(f.record(false), None);
            assert_eq!(f.record(true), None);
        }
        assert_eq!(f.record(false), None);
        assert_eq!(f.record(false), None);
        assert_eq!(f.record(false), Some(Verdict::Failing));
        assert_eq!(f.record(false), None);
        // Flapping within rise changes nothing either.
        for _ in 0..10 {
            assert_eq!(f.record(true), None);
            assert_eq!(f.record(false), None);
        }
        assert_eq!(f.record(true), None);
        assert_eq!(f.record(true), Some(Verdict::Ok));
        // From unknown, `fall` failures give a verdict too.
        let mut g = FallRise::new(2, 5);
        assert_eq!(g.record(false), None);
        assert_eq!(g.record(false), Some(Verdict::Failing));
        // fall = rise = 1 follows every result.
        let mut h = FallRise::new(1, 1);
        assert_eq!(h.record(false), Some(Verdict::Failing));
        assert_eq!(h.record(true), Some(Verdict::Ok));
        assert_eq!(h.record(false), Some(Verdict::Failing));
    }
    fn pass() -> Outcome {
        Outcome {
            result: Ok(()),
            output: String::new(),
            took: Duration::from_millis(3),
        }
    }

    fn fail() -> Outcome {
        Outcome {
            result: Err(Failure::Exit(3)),
            output: "broker down".into(),
            took: Duration::from_millis(3),
        }
    }

    const LIMITS: Limits = Limits {
        fall: 3,
        rise: 2,
        settle: std::time::Duration::ZERO,
    };

    #[test]
    fn a_check_starts_unknown_and_no_check_is_ok() {
        let mut s = CheckState::new(Some(LIMITS));
        assert_eq!(s.verdict(), Verdict::Unknown);
        assert_eq!(
            s.cause().as_deref(),
            Some("check has no verdict yet (0 of 2 successes needed)")
        );
        assert_eq!(s.record(&fail()), None);
        assert_eq!(s.record(&pass()), None);
        assert_eq!(
            s.cause().as_deref(),
            Some(
                "check has no verdict yet (1 of 2 successes needed; \
                 last failure: exit status 3; output: broker down)"
            )
        );
        // Without a check: ok, no cause, and a late result changes nothing.
        let mut none = CheckState::new(None);
        assert_eq!((none.verdict(), none.cause()), (Verdict::Ok, None));
        assert_eq!(none.record(&fail()), None);
        assert_eq!((none.verdict(), none.cause()), (Verdict::Ok, None));
    }

    #[test]
    fn exactly_fall_failures_fail_and_rise_successes_recover() {
        let mut s = CheckState::new(Some(LIMITS));
        assert_eq!(s.record(&pass()), None);
        assert_eq!(s.record(&pass()), Some(Verdict::Ok));
        // Flapping within fall changes nothing.
        for _ in 0..5 {
            assert_eq!(s.record(&fail()), None);
            assert_eq!(s.record(&fail()), None);
            assert_eq!(s.record(&pass()), None);
            assert_eq!((s.verdict(), s.cause()), (Verdict::Ok, None));
        }
        assert_eq!(s.record(&fail()), None);
        assert_eq!(s.record(&fail()), None);
        assert_eq!(s.record(&fail()), Some(Verdict::Failing));
        assert_eq!(
            s.cause().as_deref(),
            Some("check failed 3 times in a row, last: exit status 3; output: broker down")
        );
        // Flapping within rise changes nothing either.
        for _ in 0..5 {
            assert_eq!(s.record(&pass()), None);
            assert_eq!(s.record(&fail()), None);
            assert_eq!(s.verdict(), Verdict::Failing);
        }
        assert_eq!(s.record(&pass()), None);
        assert_eq!(s.record(&pass()), Some(Verdict::Ok));
        assert_eq!(s.cause(), None);
    }

    #[test]
    fn a_reload_never_moves_the_verdict_by_itself() {
        let mut s = CheckState::new(Some(LIMITS));
        for _ in 0..3 {
            s.record(&fail());
        }
        assert_eq!(s.verdict(), Verdict::Failing);
        // New limits keep the verdict and the streak.
        s.set_limits(Some(Limits {
            fall: 1,
            rise: 4,
            settle: std::time::Duration::ZERO,
        }));
        assert_eq!(s.verdict(), Verdict::Failing);
        for _ in 0..3 {
            assert_eq!(s.record(&pass()), None);
        }
        assert_eq!(s.record(&pass()), Some(Verdict::Ok));
        // A removed check leaves the server healthy, with no cause.
        s.record(&fail());
        s.set_limits(None);
        assert_eq!((s.verdict(), s.cause()), (Verdict::Ok, None));
        // A check added by a reload starts ok and needs `fall` failures to fail.
        s.set_limits(Some(LIMITS));
        assert_eq!((s.verdict(), s.cause()), (Verdict::Ok, None));
        assert_eq!(s.record(&fail()), None);
        assert_eq!(s.record(&fail()), None);
        assert_eq!(s.record(&fail()), Some(Verdict::Failing));
    }
}

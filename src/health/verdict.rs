//! The verdict (SPEC section 13), pure: fall/rise counting of check results into
//! `unknown`, `ok` or `failing`. No clock, process, thread or file.

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
    pub(super) verdict: Verdict,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}

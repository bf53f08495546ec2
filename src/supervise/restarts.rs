//! `--max-restarts N --restart-window D` (SPEC section 13): the count of the command's
//! exits that turns this server unhealthy, and clears it after a quiet window.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Counts a command's exits: failing once `n` fall within `window`, healthy again
/// once `window` has passed since the last exit (SPEC section 13: "until it has run
/// for D without exiting"). A pure function of the exit times it is given.
#[derive(Clone, Debug)]
pub struct RestartWindow {
    pub(super) n: u32,
    pub(super) window: Duration,
    /// The latest exits, at most `n`.
    exits: VecDeque<Instant>,
    failing: bool,
}

impl RestartWindow {
    /// A window of `n` (at least 1) exits within `window`.
    pub fn new(n: u32, window: Duration) -> RestartWindow {
        RestartWindow {
            n: n.max(1),
            window,
            exits: VecDeque::new(),
            failing: false,
        }
    }

    /// Records an exit at `now`.
    pub fn exit(&mut self, now: Instant) {
        if self.exits.len() >= self.n as usize {
            self.exits.pop_front();
        }
        self.exits.push_back(now);
        let first = self.exits[0];
        if self.exits.len() >= self.n as usize && now.duration_since(first) <= self.window {
            self.failing = true;
        }
    }

    /// True while the command counts as failing at `now`.
    pub fn failing(&mut self, now: Instant) -> bool {
        if self.failing && self.clears_at().is_some_and(|t| now >= t) {
            self.failing = false;
        }
        self.failing
    }

    /// When a failing command counts as healthy again, unless it exits before.
    pub fn clears_at(&self) -> Option<Instant> {
        let last = self.exits.back()?;
        self.failing.then(|| *last + self.window)
    }

    /// "3 exits within 60s", for the report and the logs.
    pub fn describe(&self) -> String {
        format!("{} exits within {:?}", self.n, self.window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_window_fails_at_n_exits_and_clears_after_a_quiet_window() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut w = RestartWindow::new(3, s(60));
        w.exit(t0);
        w.exit(t0 + s(1));
        assert!(!w.failing(t0 + s(2)));
        assert_eq!(w.clears_at(), None);
        w.exit(t0 + s(2));
        assert!(w.failing(t0 + s(2)));
        assert_eq!(w.describe(), "3 exits within 60s");
        // Healthy again only once the window has passed since the last exit.
        assert_eq!(w.clears_at(), Some(t0 + s(62)));
        assert!(w.failing(t0 + s(61)));
        // An exit meanwhile (slower than the failing rate) keeps it failing.
        w.exit(t0 + s(50));
        assert!(w.failing(t0 + s(100)));
        assert!(!w.failing(t0 + s(110)));
        // Exits spread wider than the window never fail.
        let mut w = RestartWindow::new(2, s(10));
        for i in 0..10 {
            w.exit(t0 + s(11 * i));
            assert!(!w.failing(t0 + s(11 * i)), "{i}");
        }
        // N = 1: the first exit fails.
        let mut w = RestartWindow::new(1, s(5));
        w.exit(t0);
        assert!(w.failing(t0));
        assert!(!w.failing(t0 + s(5)));
    }
}

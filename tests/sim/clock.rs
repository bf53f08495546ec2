//! Simulated time: `Real` (nanoseconds of real time), each host's drifting `Clock`
//! (rate error, rate changes, a clock that stops while suspended) and the verb that
//! changes a clock's rate mid-run.

use super::{Ev, Sim};
use electd::time::Time;

/// Nanoseconds of simulated real time.
pub type Real = u64;

/// Milliseconds as simulated nanoseconds.
pub const fn ms(v: u64) -> Real {
    v * 1_000_000
}

/// A host's clock: it runs at `1 + error_ppm/1e6` of real time, piecewise (a rate may
/// change mid-run, as NTP slews it), and stops while `stopped_at` is set (a suspend
/// with `monotonic_suspend`). It never runs backwards.
#[derive(Copy, Clone, Debug)]
pub struct Clock {
    base_local: u64,
    base_real: Real,
    error_ppm: i64,
    stopped_at: Option<Real>,
}

impl Clock {
    /// A clock reading `offset` at real time 0, running at `error_ppm`.
    pub fn new(offset: u64, error_ppm: i64) -> Clock {
        Clock {
            base_local: offset,
            base_real: 0,
            error_ppm,
            stopped_at: None,
        }
    }

    /// What the clock reads at real time `real`.
    pub fn local(&self, real: Real) -> Time {
        let r = self.stopped_at.map_or(real, |s| s.min(real));
        let dr = i128::from(r) - i128::from(self.base_real);
        let d = (dr * (1_000_000 + i128::from(self.error_ppm))).div_euclid(1_000_000);
        Time((i128::from(self.base_local) + d).max(0) as u64)
    }

    /// The first real time at which the local clock reads at least `t` (as if it ran).
    pub fn real(&self, t: Time) -> Real {
        let running = Clock {
            stopped_at: None,
            ..*self
        };
        let dl = i128::from(t.0) - i128::from(self.base_local);
        let dr = dl * 1_000_000 / (1_000_000 + i128::from(self.error_ppm));
        let mut r = (i128::from(self.base_real) + dr).max(0) as u64;
        while running.local(r) < t {
            r += 1;
        }
        while r > 0 && running.local(r - 1) >= t {
            r -= 1;
        }
        r
    }

    /// True while the clock is stopped.
    pub fn stopped(&self) -> bool {
        self.stopped_at.is_some()
    }

    /// The rate error now in force.
    pub fn error_ppm(&self) -> i64 {
        self.error_ppm
    }

    /// From real time `now` on, the clock runs at `error_ppm`.
    pub fn set_rate(&mut self, now: Real, error_ppm: i64) {
        self.base_local = self.local(now).0;
        self.base_real = now;
        self.error_ppm = error_ppm;
    }

    /// The clock stops at `now` (until `start`).
    pub fn stop(&mut self, now: Real) {
        if self.stopped_at.is_none() {
            self.stopped_at = Some(now);
        }
    }

    /// A stopped clock runs again from `now`, from the reading where it stopped.
    pub fn start(&mut self, now: Real) {
        if self.stopped_at.is_some() {
            self.base_local = self.local(now).0;
            self.base_real = now;
            self.stopped_at = None;
        }
    }
}

impl Sim {
    /// From now on `id`'s clock runs at `error_ppm`.
    pub fn set_clock_rate(&mut self, id: u16, error_ppm: i64) {
        let (i, now) = (self.idx(id), self.now);
        let h = &mut self.hosts[i];
        h.clock.set_rate(now, error_ppm);
        self.sup_clock_remapped(i);
        self.gather();
        let h = &mut self.hosts[i];
        if self.opts.trace {
            self.trace
                .push(format!("{now} clock {id} rate {error_ppm} ppm"));
        }
        // Timers were placed with the old rate: place them again.
        if !h.paused && h.up() {
            h.timer_at = None;
            self.drive(i);
        }
    }

    /// The process's one timer fires (unless a crash, a pause or a newer deadline made
    /// it stale).
    pub(super) fn on_timer(&mut self, host: usize, inc: u64, deadline: Real) {
        let h = &mut self.hosts[host];
        if h.inc != inc || h.paused || !h.up() || h.timer_at != Some(deadline) {
            return;
        }
        h.timer_at = None;
        // The datagrams that waited for this wakeup first: the ACKs of the last LEAD
        // are taken before the next leaves (issue 25), as the daemon's loop reads its
        // sockets before its timers.
        self.read_deferred(host);
        let h = &mut self.hosts[host];
        if h.inc != inc || h.paused || !h.up() {
            return;
        }
        let local = h.clock.local(self.now);
        // One timer per process, at its groups' earliest deadline: the host runs
        // every group's handler (early is a no-op), as the daemon does.
        if let Some(sh) = h.shell.as_mut() {
            sh.handle_timeout(local).expect("host");
            if sh.stopping() {
                // As the daemon's loop does: a group won while stopping hands over too.
                sh.handle_stop(local).expect("host");
            }
        }
        self.drive(host);
    }

    /// Places the process's one timer at `deadline` (real time), unless it is there
    /// already or the process is paused.
    pub(super) fn place_timer(&mut self, host: usize, deadline: Real) {
        let h = &mut self.hosts[host];
        let inc = h.inc;
        if h.timer_at != Some(deadline) && !h.paused {
            h.timer_at = Some(deadline);
            // A real scheduler wakes a little late (epoll counts in milliseconds).
            let late = self.rng.below(self.opts.timer_slop + 1);
            self.push(
                deadline + late,
                Ev::Timer {
                    host,
                    inc,
                    deadline,
                },
            );
        }
    }
}

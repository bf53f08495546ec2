//! `electctl run`: run a command only while this server holds the lease (SPEC 6, 8, 11).
//!
//! The supervisor registers with the daemon (`supervise`) and is pushed one numbered
//! line at every change of role, leader or term; it blocks in ppoll(2) on that socket,
//! the command's pidfd, its stop timer and its own signals, with a timeout equal to the
//! next thing it must do, so it learns of a planned stop at once.
//!
//! - Renewals (issue 25): `run` makes a CLOCK_BOOTTIME timerfd, its stop timer
//!   (`timers.rs`), that fires at the SIGTERM instant of a lease end and carries its
//!   SIGKILL instant ([`stop_at`]), and passes it with SCM_RIGHTS on `supervise`. The
//!   daemon re-arms it at every renewal from its own lease end (one `timerfd_settime`),
//!   so a steady leader's `run` and its enforcer wake for nothing. A daemon that does
//!   not take it (older, or it refused it) pushes every renewal as a line, and `run`
//!   arms it itself from each line.
//!
//! - Planned stop (the daemon reports non-leader while the known lease has time left):
//!   SIGTERM to the command's process group, wait out `--grace` (or until it exits),
//!   SIGKILL only after the grace, then `released N` for the non-leader line N: the
//!   daemon's RESIGN waits for that (SPEC section 6, Resign).
//! - The lease end is enforced here too, on CLOCK_BOOTTIME, so a frozen or dead daemon
//!   cannot keep the command alive: SIGTERM when the stop timer fires (`grace +
//!   MARGIN` before the last lease end armed), SIGKILL after the grace or at the
//!   SIGKILL instant it carries (`MARGIN` before it). The command starts only while the
//!   stop timer has not fired. A lost connection counts as a planned stop.
//! - Options that cannot work are refused at start (exit 2): `grace + MARGIN` must fit
//!   in the least lease a steady leader can have left just before a renewal,
//!   `lease_len - heartbeat - rtt` (see [`check_grace`]); then the command is never
//!   stopped spuriously in steady state and a planned stop always gets the whole grace.
//! - `--poll` is only the reconnect interval. Once registered, `run` never asks the
//!   daemon again (issue 25; see `conn::Conn`): every change is pushed, a dead or
//!   restarted daemon closes the connection, supervising connections are never closed
//!   as idle, and the lease end is enforced here and by the enforcer from the last
//!   lease end armed, whatever the daemon does. A `run` at rest, leader or not, costs
//!   its daemon no request and wakes once a minute (`wakeup::IDLE_WAKEUP`, a backstop);
//!   no `--poll` is unsafe.
//! - Whatever stalls this process (SIGSTOP, a debugger, a blocked write), the lease end
//!   is also enforced by a process of its own started beside each command
//!   ([`enforce`]); if that process dies, the command is stopped at once. Log lines
//!   never block ([`log`]), and signals are sent before the lines that tell of them.
//! - A grace that stops fitting the daemon's lease (it restarted with shorter timers)
//!   is logged once, loudly, and reported as `health failing` on the connection, so
//!   the lease moves where a command can run. The grace is announced in the
//!   `supervise` request, so the daemon refuses a reload that would do it (SPEC 11).
//!
//! A command that exits while this server still leads is restarted with a doubling
//! backoff (0.1 s, 0.2 s, 0.4 s, ... 10 s). ELECTD_TERM holds the term the command was
//! started in: the fencing token to hand downstream.
//!
//! With `--max-restarts N --restart-window D` (SPEC section 13), N exits (or failures
//! to start) within D make the supervisor report `health failing N exits within D` on
//! its connection, so the daemon turns unhealthy and hands over once another server is
//! known fit; it reports `health ok` once D has passed since the last exit (if this
//! server no longer leads, nothing runs and nothing exits, so that is D after the
//! last one). The report belongs to the connection: after a reconnect it is sent
//! again, and a supervisor that dies takes it with it.

/// A log line of `run` (`electctl run: ...`), through the queue that never blocks.
macro_rules! say {
    ($($t:tt)*) => {
        $crate::supervise::log::say(&format!($($t)*))
    };
}

mod command;
mod conn;
pub mod enforce;
mod escaped;
mod lease;
pub mod log;
mod options;
mod restarts;
mod spawn;
mod timers;
mod wakeup;

pub use conn::{Line, NO_SUCH_GROUP, parse_line, send_with_fds};
pub use lease::{MARGIN, StopAt, Timers, check_grace, max_grace, stop_at};
pub use options::{
    DEFAULT_RESTART_WINDOW, MAX_GRACE, MAX_RESTART_WINDOW, MAX_RESTARTS, RunOptions,
};
pub use restarts::RestartWindow;
pub use timers::{Alarm, INTERVAL_BASE_NS, Look, StopTimers, TimersRefused, look};

use command::Running;
use conn::Conn;
use enforce::Enforcer;
use std::time::{Duration, Instant};
use wakeup::signal_pipe;

/// The supervisor's state between wakeups.
struct Supervisor<'a> {
    opts: &'a RunOptions,
    conn: Option<Conn>,
    next_connect: Instant,
    /// This server leads (the last line said so, on a live connection).
    leader: bool,
    term: u64,
    /// The election group the daemon's lines name (for ELECTD_GROUP).
    group: Option<String>,
    /// The stop timers: armed by the daemon at every renewal when it took them on
    /// `supervise`, else by this process from each line; the command runs only while
    /// the SIGTERM one has not fired ([`StopTimers::room`]).
    timers: StopTimers,
    /// The timers were checked against the grace at least once.
    checked: Option<Timers>,
    running: Option<Running>,
    backoff: Duration,
    next_start: Instant,
    last_error: String,
    stopping: bool,
    /// `--max-restarts`: the command's exits.
    restarts: Option<RestartWindow>,
    /// Enforcers of commands that are gone, until they have exited (reaped).
    retired: Vec<Enforcer>,
    /// The enforcer of the next command, started and not yet exec'd.
    next_enforcer: Option<Enforcer>,
    /// Commands' processes SIGKILLed before their exec, until reaped (without
    /// blocking: a debugger may hold one past its SIGKILL).
    dying: Vec<libc::pid_t>,
    /// The enforcer of the running command exited: stop the command.
    enforcer_lost: bool,
    /// Why this supervisor cannot work against the daemon's timers any more (a reload
    /// or restart shortened the lease below `--grace`): reported as unhealthy.
    unfit: Option<String>,
    /// What the last "waiting" line said (leader, term): one line per change, so an
    /// operator of a follower sees why nothing runs, and for whom it waits.
    waiting: Option<(Option<u64>, u64)>,
    /// What the last ppoll(2) found ready; None: look at everything.
    ready: Option<wakeup::Ready>,
}

/// Runs the supervisor until SIGTERM or SIGINT; returns the exit code.
pub fn run(opts: &RunOptions) -> i32 {
    log::init();
    let code = supervise(opts);
    log::finish(Duration::from_millis(200));
    code
}

fn supervise(opts: &RunOptions) -> i32 {
    let sig = match signal_pipe() {
        Ok(fd) => fd,
        Err(e) => {
            say!("{e}");
            return 2;
        }
    };
    // Orphans of the command's tree are adopted by this process, not init, so a stop
    // reaches what left the command's process group (`escaped`).
    if let Err(e) = escaped::become_subreaper() {
        say!(
            "cannot become a child subreaper ({e}): processes that leave the command's process group may outlive a stop"
        );
    }
    let timers = match StopTimers::create() {
        Ok(t) => t,
        Err(e) => {
            say!("cannot create the stop timers (timerfd_create): {e}");
            return 2;
        }
    };
    let mut s = Supervisor {
        opts,
        conn: None,
        next_connect: Instant::now(),
        leader: false,
        term: 0,
        group: opts.group.clone(),
        timers,
        checked: None,
        running: None,
        backoff: Duration::from_millis(100),
        next_start: Instant::now(),
        last_error: String::new(),
        stopping: false,
        restarts: opts.restarts.map(|(n, w)| RestartWindow::new(n, w)),
        retired: Vec::new(),
        next_enforcer: None,
        dying: Vec::new(),
        unfit: None,
        waiting: None,
        enforcer_lost: false,
        ready: None,
    };
    loop {
        if let Err(code) = s.step() {
            // Refused before anything started: no lease of ours is left to wait for.
            if let Some(c) = s.conn.as_mut() {
                let _ = c.send("leave\n");
            }
            return code;
        }
        if s.stopping && s.running.is_none() {
            if let Some(c) = s.conn.as_mut() {
                let _ = c.send("leave\n");
            }
            return 0;
        }
        s.wait(&sig);
    }
}

impl Supervisor<'_> {
    fn error(&mut self, e: String) {
        if e != self.last_error {
            say!("{e}");
            self.last_error = e;
        }
    }

    /// Does everything that is due now; Err(exit code) to stop at once.
    fn step(&mut self) -> Result<(), i32> {
        if self.conn.is_none() && Instant::now() >= self.next_connect {
            self.next_connect = Instant::now() + self.opts.poll;
            match Conn::open(self.opts, &self.timers) {
                Ok(c) => {
                    self.conn = Some(c);
                    self.last_error.clear();
                }
                Err(e) => self.error(e),
            }
        }
        self.read_daemon()?;
        self.watch_start();
        self.reap();
        self.watch_enforcer();
        self.enforce();
        self.confirm();
        self.maybe_start();
        self.report_health();
        // Used once: the next step comes after a ppoll that says again.
        self.ready = None;
        Ok(())
    }

    /// The connection is gone: the daemon may be dead, so stop as on a planned stop.
    fn lost(&mut self, e: String) {
        self.error(e);
        self.conn = None;
        self.leader = false;
        self.next_connect = Instant::now() + self.opts.poll;
    }
}

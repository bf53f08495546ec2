//! `electctl run`: run a command only while this server holds the lease (SPEC 6, 8, 11).
//!
//! The supervisor registers with the daemon (`supervise`) and is pushed one numbered
//! line at every change of role, leader or term and at every lease renewal; it blocks in
//! ppoll(2) on that socket, the command's pidfd and its own signals, with a timeout equal
//! to the next thing it must do, so it learns of a planned stop at once.
//!
//! - Planned stop (the daemon reports non-leader while the known lease has time left):
//!   SIGTERM to the command's process group, wait out `--grace` (or until it exits),
//!   SIGKILL only after the grace, then `released N` for the non-leader line N: the
//!   daemon's RESIGN waits for that (SPEC section 6, Resign).
//! - The lease end is enforced here too, on CLOCK_BOOTTIME, so a frozen or dead daemon
//!   cannot keep the command alive: SIGTERM when `grace + MARGIN` is left, SIGKILL when
//!   `MARGIN` is left. A lost connection counts as a planned stop.
//! - Options that cannot work are refused at start (exit 2): `grace + MARGIN` must fit
//!   in the least lease a steady leader can have left just before a renewal,
//!   `lease_len - heartbeat - rtt` (see [`check_grace`]); then the command is never
//!   stopped spuriously in steady state and a planned stop always gets the whole grace.
//! - `--poll` is only the reconnect interval and the longest silence before the daemon
//!   is asked again (at least [`IDLE_ASK`] while this server does not lead, and a
//!   follower confirms only after a leader line: an idle `run` costs its daemon at most
//!   one request a second): no value is unsafe.
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

pub mod enforce;
pub mod log;

use crate::json::{self, Value};
use crate::time::boot_now;
use enforce::Enforcer;
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// A log line of `run` (`electctl run: ...`), through the queue that never blocks.
macro_rules! say {
    ($($t:tt)*) => {
        log::say(&format!($($t)*))
    };
}

/// How long before the lease end the command is SIGKILLed; SIGTERM comes this plus the
/// grace before it. Covers signal delivery, the kernel reaping a process group, and
/// scheduling delays of this supervisor.
pub const MARGIN: Duration = Duration::from_millis(20);
/// The longest line accepted from the daemon.
const MAX_LINE: usize = 4096;
/// Re-check the command this often when no pidfd could be opened.
const CHILD_TICK: Duration = Duration::from_millis(10);
/// The largest `--max-restarts`.
pub const MAX_RESTARTS: u32 = 1000;
/// `--restart-window` when only `--max-restarts` is given.
pub const DEFAULT_RESTART_WINDOW: Duration = Duration::from_secs(60);
/// The longest `--restart-window`.
pub const MAX_RESTART_WINDOW: Duration = Duration::from_secs(86_400);

/// The supervisor's settings.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The daemon's control socket.
    pub socket: PathBuf,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Reconnect interval, and the longest silence before the daemon is asked again.
    pub poll: Duration,
    /// The command and its arguments.
    pub argv: Vec<String>,
    /// `--max-restarts N --restart-window D`: N exits within D make this server
    /// unhealthy.
    pub restarts: Option<(u32, Duration)>,
    /// `--group GROUP`: the election group whose lease the command follows (None: the
    /// daemon's only group, or `default`).
    pub group: Option<String>,
}

/// The request that registers a supervisor (of a group's lease, when one is named).
/// It carries the grace (`grace_ms=N`), so the daemon can refuse a reload that would
/// leave it no room in the lease (SPEC 11).
fn supervise_request(opts: &RunOptions) -> String {
    let grace_ms = opts.grace.as_millis();
    let grace = if OLD_DAEMON.load(Ordering::Relaxed) {
        String::new()
    } else {
        format!(" grace_ms={grace_ms}")
    };
    match &opts.group {
        Some(g) => format!("supervise {g}{grace}\n"),
        None => format!("supervise{grace}\n"),
    }
}

/// The daemon is older than `grace_ms` (it answered that `grace_ms=N` is no group, or
/// that `supervise` takes one argument): register without it. Such a daemon cannot
/// refuse a reload for the grace, but `run` still checks the grace against every line
/// and reports unhealthy when it no longer fits. One process, one daemon: a flag.
static OLD_DAEMON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// True for an older daemon's refusal of the `grace_ms=N` argument.
fn refuses_grace(error: &str) -> bool {
    (error.contains("'grace_ms=") && error.contains("is not a group name"))
        || error.ends_with("usage: supervise [GROUP]")
}

/// While this server does not lead, `run` asks the daemon at most this often (SPEC 11:
/// "no more than one request a second"): changes are pushed, the ask only checks that
/// the connection is alive.
pub const IDLE_ASK: Duration = Duration::from_secs(1);

/// The start of the daemon's answer to a `supervise` naming a group it does not run:
/// no later answer can change it (the group list cannot be reloaded), so run exits.
pub const NO_SUCH_GROUP: &str = "electd: no group";

/// Counts a command's exits: failing once `n` fall within `window`, healthy again
/// once `window` has passed since the last exit (SPEC section 13: "until it has run
/// for D without exiting"). A pure function of the exit times it is given.
#[derive(Clone, Debug)]
pub struct RestartWindow {
    n: u32,
    window: Duration,
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

/// The daemon's timers, as a supervisor line carries them.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Timers {
    /// K*HBT*(1-2*rho): the lease a majority's acknowledgement gives.
    pub lease_len: Duration,
    /// The heartbeat: how often the lease is renewed.
    pub heartbeat: Duration,
    /// The round-trip bound: how late the acknowledgements of a renewal may come.
    pub rtt: Duration,
}

impl Timers {
    /// The lease as the grace budget counts it: `lease_len` with the microsecond that
    /// the core takes off every lease (`LEASE_MARGIN`, so that no tie of instants
    /// decides safety) given back. That microsecond is no time a command can use, and
    /// without this it cost the largest grace a whole millisecond (154 ms became 153 at
    /// heartbeat 100 ms, rtt 20 ms, K 3, drift 0.01). The supervisor's own `MARGIN`
    /// (20 ms) is what covers scheduling and signal delivery.
    pub fn budget_lease(&self) -> Duration {
        self.lease_len.saturating_add(crate::core::LEASE_MARGIN)
    }
}

/// Refuses a grace that cannot work against these timers (SPEC 11: exit 2 at start).
///
/// Just before a renewal, a leader's lease can have as little as
/// `lease_len - heartbeat - rtt` left (its last acknowledged LEAD left a heartbeat ago,
/// and the acks of the next may take up to `rtt`). SIGTERM goes out when `grace + MARGIN` is left, so that
/// must fit below it, or the command would be stopped in steady state and a planned
/// stop could not give the whole grace.
pub fn check_grace(grace: Duration, t: &Timers) -> Result<(), String> {
    let budget = t.budget_lease().saturating_sub(t.heartbeat + t.rtt);
    if grace + MARGIN <= budget {
        return Ok(());
    }
    let max = max_grace(t);
    Err(format!(
        "--grace {}ms cannot work against this daemon's lease: the lease lasts {} ms and is renewed every {} ms (heartbeat) with acknowledgements within {} ms (rtt), so just before a renewal it may have only {} ms left; the grace plus the {} ms safety margin must fit in that. Use --grace {}ms or less, or give electd a longer heartbeat or more missed-heartbeats",
        grace.as_millis(),
        t.budget_lease().as_millis(),
        t.heartbeat.as_millis(),
        t.rtt.as_millis(),
        budget.as_millis(),
        MARGIN.as_millis(),
        max.as_millis()
    ))
}

/// The largest `--grace` that [`check_grace`] accepts against these timers.
pub fn max_grace(t: &Timers) -> Duration {
    t.budget_lease()
        .saturating_sub(t.heartbeat + t.rtt)
        .saturating_sub(MARGIN)
}

/// One numbered line from the daemon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// Its number on this connection.
    pub n: u64,
    /// The daemon's current term.
    pub term: u64,
    /// The lease end (CLOCK_BOOTTIME ns) while this server leads; None otherwise.
    pub lease_until_ns: Option<u64>,
    /// The daemon's timers.
    pub timers: Timers,
    /// The election group the line is about (absent from older daemons' lines).
    pub group: Option<String>,
    /// The server that leads, as this server knows it (None: none known).
    pub leader_id: Option<u64>,
}

/// Parses a supervisor line; Err for anything else (an `{"error":..}` line included).
pub fn parse_line(text: &str) -> Result<Line, String> {
    let v = json::parse(text.trim()).map_err(|e| format!("unreadable line from electd: {e}"))?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        return Err(format!("electd: {e}"));
    }
    let num = |k: &str| {
        v.get(k)
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("line from electd without '{k}': {}", text.trim()))
    };
    let leader = v.get("role").and_then(Value::as_str) == Some("leader");
    let until = v.get("lease_until_ns").and_then(Value::as_u64);
    Ok(Line {
        group: v.get("group").and_then(Value::as_str).map(str::to_string),
        leader_id: v.get("leader").and_then(Value::as_u64),
        n: num("n")?,
        term: num("term")?,
        lease_until_ns: if leader { until } else { None },
        timers: Timers {
            lease_len: Duration::from_nanos(num("lease_len_ns")?),
            heartbeat: Duration::from_nanos(num("heartbeat_ns")?),
            rtt: Duration::from_nanos(num("rtt_ns")?),
        },
    })
}

/// The write end of the self-pipe the signal handler writes to (-1: none).
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_: libc::c_int) {
    let fd = SIGNAL_PIPE.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; a full pipe only loses a duplicate.
        unsafe { libc::write(fd, b"s".as_ptr().cast(), 1) };
    }
}

/// SIGTERM and SIGINT wake the loop through a pipe: no wakeup is lost between a check
/// and the wait.
fn signal_pipe() -> Result<OwnedFd, String> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    SIGNAL_PIPE.store(fds[1], Ordering::SeqCst);
    // SAFETY: installing an async-signal-safe handler (one write to the pipe).
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
    }
    // SAFETY: fds[0] is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fds[0]) })
}

fn signal_group(child: &Child, sig: i32) {
    // SAFETY: kill(2) on the process group of a child we started and have not reaped.
    unsafe { libc::kill(-(child.id() as i32), sig) };
}

/// A descriptor that becomes readable when `pid` exits (Linux 5.3+), if available.
fn pidfd(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a non-negative result is a fresh descriptor we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn ms(ns: u64) -> u64 {
    ns / 1_000_000
}

struct Running {
    child: Child,
    exit_fd: Option<OwnedFd>,
    term: u64,
    started: Instant,
    /// SIGTERM was sent: SIGKILL at this boot-clock time unless it exits first.
    kill_at_ns: Option<u64>,
    /// The process that stops the command by the lease end even if this one stalls.
    enforcer: Option<Enforcer>,
}

/// The connection to the daemon.
struct Conn {
    stream: UnixStream,
    inbuf: Vec<u8>,
    last_line: Instant,
    /// The highest non-leader line not yet confirmed.
    to_confirm: Option<u64>,
    /// The number of the last leader line read (0: none).
    last_leader_n: u64,
    /// The number of the last line confirmed (`released N`).
    confirmed_n: u64,
    /// What this connection was told is failing (`health failing REASON`), if anything.
    reported: Option<String>,
}

impl Conn {
    fn open(opts: &RunOptions) -> Result<Conn, String> {
        let mut stream = UnixStream::connect(&opts.socket)
            .map_err(|e| crate::control::connect_error(&opts.socket, &e))?;
        stream
            .set_write_timeout(Some(Duration::from_secs(1)))
            .and_then(|_| stream.write_all(supervise_request(opts).as_bytes()))
            .and_then(|_| stream.set_nonblocking(true))
            .map_err(|e| format!("{}: {e}", opts.socket.display()))?;
        Ok(Conn {
            stream,
            inbuf: Vec::new(),
            last_line: Instant::now(),
            to_confirm: None,
            last_leader_n: 0,
            confirmed_n: 0,
            reported: None,
        })
    }

    fn send(&mut self, text: &str) -> Result<(), String> {
        // Short lines on a local socket: the buffer never fills with this traffic.
        self.stream
            .write_all(text.as_bytes())
            .map_err(|e| format!("write to electd: {e}"))
    }

    /// Reads what arrived; Err when the connection is gone or talks nonsense.
    fn read_lines(&mut self) -> Result<Vec<String>, String> {
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Err("electd closed the connection".into()),
                Ok(n) => self.inbuf.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read from electd: {e}")),
            }
            if self.inbuf.len() > 16 * MAX_LINE {
                break;
            }
        }
        let mut lines = Vec::new();
        while let Some(p) = self.inbuf.iter().position(|&b| b == b'\n') {
            let l: Vec<u8> = self.inbuf.drain(..=p).collect();
            lines.push(String::from_utf8_lossy(&l).into_owned());
        }
        if self.inbuf.len() > MAX_LINE {
            return Err(format!("a line from electd longer than {MAX_LINE} bytes"));
        }
        Ok(lines)
    }
}

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
    /// The lease end the daemon last gave (boot clock ns; 0: none known).
    until_ns: u64,
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
    /// The enforcer of the running command exited: stop the command.
    enforcer_lost: bool,
    /// Why this supervisor cannot work against the daemon's timers any more (a reload
    /// or restart shortened the lease below `--grace`): reported as unhealthy.
    unfit: Option<String>,
    /// What the last "waiting" line said (leader, term): one line per change, so an
    /// operator of a follower sees why nothing runs, and for whom it waits.
    waiting: Option<(Option<u64>, u64)>,
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
    let mut s = Supervisor {
        opts,
        conn: None,
        next_connect: Instant::now(),
        leader: false,
        term: 0,
        group: opts.group.clone(),
        until_ns: 0,
        checked: None,
        running: None,
        backoff: Duration::from_millis(100),
        next_start: Instant::now(),
        last_error: String::new(),
        stopping: false,
        restarts: opts.restarts.map(|(n, w)| RestartWindow::new(n, w)),
        retired: Vec::new(),
        unfit: None,
        waiting: None,
        enforcer_lost: false,
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
            match Conn::open(self.opts) {
                Ok(c) => {
                    self.conn = Some(c);
                    self.last_error.clear();
                }
                Err(e) => self.error(e),
            }
        }
        self.read_daemon()?;
        self.reap();
        self.watch_enforcer();
        self.enforce();
        self.confirm();
        self.maybe_start();
        self.report_health();
        Ok(())
    }

    /// Records an exit of the command (or a failure to start it) for --max-restarts.
    fn count_exit(&mut self) {
        if let Some(w) = self.restarts.as_mut() {
            w.exit(Instant::now());
        }
    }

    /// Tells the daemon when --max-restarts turns the command failing or healthy.
    fn report_health(&mut self) {
        let now = Instant::now();
        let restarts = self.restarts.as_mut().map(|w| (w.failing(now), w.clone()));
        let Some(c) = self.conn.as_mut() else { return };
        // A grace that no longer fits weighs most: nothing can run here at all.
        let want = match (&self.unfit, &restarts) {
            (Some(why), _) => Some(why.clone()),
            (None, Some((true, w))) => Some(w.describe()),
            _ => None,
        };
        if want == c.reported {
            return;
        }
        if let Some((failing, w)) = &restarts {
            let was = c.reported.as_deref() == Some(w.describe().as_str());
            if *failing && !was && self.unfit.is_none() {
                say!(
                    "the command exited {} times within {:?}: reporting this server unhealthy to electd",
                    w.n,
                    w.window
                );
            } else if !failing && was {
                say!(
                    "no exit for {:?}: reporting this server healthy again",
                    w.window
                );
            }
        }
        let line = match &want {
            Some(why) => format!("health failing {why}\n"),
            None => "health ok\n".to_string(),
        };
        match c.send(&line) {
            Ok(()) => c.reported = want,
            Err(e) => self.lost(e),
        }
    }

    fn read_daemon(&mut self) -> Result<(), i32> {
        let Some(c) = self.conn.as_mut() else {
            return Ok(());
        };
        let lines = match c.read_lines() {
            Ok(l) => l,
            Err(e) => {
                self.lost(e);
                return Ok(());
            }
        };
        for text in lines {
            match parse_line(&text) {
                Ok(l) => self.on_line(l)?,
                Err(e) if refuses_grace(&e) && !OLD_DAEMON.load(Ordering::Relaxed) => {
                    // A rolling upgrade: this `run` is newer than its daemon.
                    OLD_DAEMON.store(true, Ordering::Relaxed);
                    say!(
                        "electd is older than this electctl (it does not take grace_ms): registering without it; upgrade electd so that a reload can check --grace"
                    );
                    if let Some(c) = self.conn.as_mut() {
                        if let Err(e) = c.send(&supervise_request(self.opts)) {
                            self.lost(e);
                            return Ok(());
                        }
                    }
                }
                Err(e) if e.starts_with(NO_SUCH_GROUP) || e.contains("several election groups") => {
                    // The command never started on this connection: nothing to stop.
                    say!("{e}");
                    return Err(2);
                }
                Err(e) => self.error(e),
            }
        }
        let ask = self.ask_interval();
        if let Some(c) = self.conn.as_mut() {
            if c.last_line.elapsed() >= ask {
                // Fallback: nothing pushed for a while; ask again (a fresh line comes).
                c.last_line = Instant::now();
                if let Err(e) = c.send(&supervise_request(self.opts)) {
                    self.lost(e);
                }
            }
        }
        Ok(())
    }

    /// How long a connection may stay silent before the daemon is asked again: the
    /// `--poll` while this server leads, at least IDLE_ASK while it does not.
    fn ask_interval(&self) -> Duration {
        if self.leader {
            self.opts.poll
        } else {
            self.opts.poll.max(IDLE_ASK)
        }
    }

    fn on_line(&mut self, l: Line) -> Result<(), i32> {
        if self.checked != Some(l.timers) {
            match check_grace(self.opts.grace, &l.timers) {
                Err(e) if self.checked.is_none() => {
                    say!("{e}");
                    return Err(2);
                }
                Err(e) => {
                    // The daemon's lease got shorter (a restart with shorter timers,
                    // or a reload by a daemon that did not know the grace): nothing
                    // can run here, so say so where it counts, once, and loudly.
                    if self.unfit.is_none() {
                        say!(
                            "ERROR: this supervisor cannot work any more: {e}. Reporting this server unhealthy to electd so that the lease moves where a command can run"
                        );
                    }
                    self.unfit = Some(format!(
                        "electctl run --grace {}ms no longer fits the lease",
                        self.opts.grace.as_millis()
                    ));
                }
                Ok(()) => {
                    if self.unfit.take().is_some() {
                        say!("the grace fits the daemon's lease again: reporting healthy");
                    }
                }
            }
            self.checked = Some(l.timers);
        }
        let c = self.conn.as_mut().expect("lines come from a connection");
        c.last_line = Instant::now();
        self.term = l.term;
        if l.group.is_some() {
            self.group = l.group;
        }
        match l.lease_until_ns {
            Some(u) => {
                self.leader = true;
                self.waiting = None;
                self.until_ns = u;
                c.last_leader_n = l.n;
            }
            None => {
                // Planned stop or no lease: confirm once no command runs. The known
                // lease end stays: it still bounds the SIGKILL of a stopping command.
                self.leader = false;
                if self.waiting != Some((l.leader_id, l.term)) {
                    self.waiting = Some((l.leader_id, l.term));
                    // The group only when one was named (`--group`): the daemon calls
                    // the one group of a file without `group` lines `default`.
                    let group = self
                        .opts
                        .group
                        .as_deref()
                        .map_or(String::new(), |g| format!(" group {g}"));
                    match l.leader_id {
                        Some(id) => say!(
                            "waiting: server {id} leads{group} (term {}); the command starts when this server holds the lease",
                            l.term
                        ),
                        None => say!(
                            "waiting: no leader{group} known yet (term {}); the command starts when this server holds the lease",
                            l.term
                        ),
                    }
                }
                // Only a leader line since the last confirmation needs one (the
                // daemon counts a supervisor clear otherwise): an idle follower's
                // lines cost the daemon nothing more.
                if c.last_leader_n > c.confirmed_n {
                    c.to_confirm = Some(c.to_confirm.map_or(l.n, |p| p.max(l.n)));
                }
            }
        }
        Ok(())
    }

    /// The connection is gone: the daemon may be dead, so stop as on a planned stop.
    fn lost(&mut self, e: String) {
        self.error(e);
        self.conn = None;
        self.leader = false;
        self.next_connect = Instant::now() + self.opts.poll;
    }

    fn reap(&mut self) {
        let Some(r) = self.running.as_mut() else {
            return;
        };
        // SAFETY: waitid with WNOWAIT only looks: the exited leader stays a zombie, so
        // its process group id cannot be reused before the group is killed below.
        let exited = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                r.child.id() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            ) == 0
                && info.si_pid() != 0
        };
        if !exited {
            return;
        }
        // Nothing of its process group may outlive it: the confirmation says "exited".
        signal_group(&r.child, libc::SIGKILL);
        if let Some(e) = r.enforcer.take().and_then(Enforcer::retire) {
            self.retired.push(e);
        }
        let status = match r.child.wait() {
            Ok(s) => s.to_string(),
            Err(e) => e.to_string(),
        };
        say!(
            "command of term {} exited ({status}) after {:?}",
            r.term,
            r.started.elapsed()
        );
        // Stopped by the enforcer (this process was stopped or blocked past the time
        // it owed the SIGTERM), or on a stop this process has only just learned of, is
        // not an exit by itself: no backoff, and it does not count for --max-restarts.
        let stop_ns = crate::time::duration_nanos(self.opts.grace + MARGIN);
        let lease_ending = boot_now().as_nanos() + stop_ns >= self.until_ns;
        let by_itself = r.kill_at_ns.is_none() && self.leader && !lease_ending;
        if by_itself {
            // It exited by itself while leader: restart later, with a doubling backoff.
            if r.started.elapsed() > Duration::from_secs(10) {
                self.backoff = Duration::from_millis(100);
            }
            self.next_start = Instant::now() + self.backoff;
            self.backoff = (self.backoff * 2).min(Duration::from_secs(10));
        }
        self.running = None;
        if by_itself {
            self.count_exit();
        }
    }

    /// Hands the lease end on to the enforcer; a command whose enforcer is gone is
    /// stopped as on a planned stop (nothing would stop it if this process stalled).
    /// Reaps retired enforcers.
    fn watch_enforcer(&mut self) {
        self.retired.retain_mut(|e| !e.exited());
        let Some(r) = self.running.as_mut() else {
            return;
        };
        let Some(e) = r.enforcer.as_mut() else {
            return;
        };
        if self.leader {
            e.deadline(self.until_ns);
        }
        if e.exited() {
            r.enforcer = None;
            if r.kill_at_ns.is_none() {
                self.enforcer_lost = true;
            }
        }
    }

    /// SIGTERM on a planned stop or near the lease end; SIGKILL after the grace or at
    /// `MARGIN` before the lease end, whichever comes first. Signals go first, log
    /// lines after (and those never block).
    fn enforce(&mut self) {
        let grace_ns = crate::time::duration_nanos(self.opts.grace);
        let margin_ns = crate::time::duration_nanos(MARGIN);
        let Some(r) = self.running.as_mut() else {
            return;
        };
        let now = boot_now().as_nanos();
        let left = self.until_ns.saturating_sub(now);
        if r.kill_at_ns.is_none() {
            let why = if self.stopping {
                "electctl run is stopping"
            } else if !self.leader {
                "electd no longer leads"
            } else if self.enforcer_lost {
                "the lease enforcer process exited"
            } else if left <= grace_ns + margin_ns {
                "the lease ends without a renewal"
            } else {
                return;
            };
            let kill_at = (now + grace_ns).min(self.until_ns.saturating_sub(margin_ns));
            if let Some(e) = r.enforcer.as_mut() {
                e.terminating();
            }
            signal_group(&r.child, libc::SIGTERM);
            r.kill_at_ns = Some(kill_at);
            say!(
                "{why}: SIGTERM to the command of term {} (lease {} ms left, SIGKILL in {} ms unless it exits)",
                r.term,
                ms(left),
                ms(kill_at.saturating_sub(now))
            );
        }
        if r.kill_at_ns.is_some_and(|k| now >= k) {
            signal_group(&r.child, libc::SIGKILL);
            let term = r.term;
            let _ = r.child.wait();
            if let Some(e) = r.enforcer.take().and_then(Enforcer::retire) {
                self.retired.push(e);
            }
            self.running = None;
            say!("the command of term {term} did not exit in time: SIGKILL");
        }
    }

    /// Confirms the last non-leader line once no command runs.
    fn confirm(&mut self) {
        if self.running.is_some() {
            return;
        }
        let Some(c) = self.conn.as_mut() else { return };
        let Some(n) = c.to_confirm.take() else { return };
        match c.send(&format!("released {n}\n")) {
            Ok(()) => c.confirmed_n = n,
            Err(e) => self.lost(e),
        }
    }

    fn maybe_start(&mut self) {
        let stop_ns = crate::time::duration_nanos(self.opts.grace + MARGIN);
        let left = self.until_ns.saturating_sub(boot_now().as_nanos());
        if self.running.is_some()
            || self.stopping
            || !self.leader
            || self.checked.is_none()
            || left <= stop_ns
            || Instant::now() < self.next_start
        {
            return;
        }
        let argv = &self.opts.argv;
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .env("ELECTD_TERM", self.term.to_string())
            .env("ELECTD_GROUP", self.group.as_deref().unwrap_or("default"))
            .env("ELECTD_ROLE", "leader")
            .process_group(0);
        // SAFETY: prctl is async-signal-safe; if this supervisor dies (even by SIGKILL)
        // the command gets SIGKILL instead of running on unsupervised.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        match cmd.spawn() {
            Ok(mut child) => {
                let exit_fd = pidfd(child.id());
                let enforcer = Enforcer::start(
                    child.id(),
                    exit_fd.as_ref(),
                    self.opts.grace,
                    MARGIN,
                    self.until_ns,
                );
                let enforcer = match enforcer {
                    Ok(e) => e,
                    Err(e) => {
                        // Nothing would stop it if this process stalled: not started.
                        signal_group(&child, libc::SIGKILL);
                        let _ = child.wait();
                        say!(
                            "cannot start the lease enforcer ({e}): the command was stopped at once"
                        );
                        self.next_start = Instant::now() + self.backoff;
                        self.backoff = (self.backoff * 2).min(Duration::from_secs(10));
                        self.count_exit();
                        return;
                    }
                };
                self.enforcer_lost = false;
                say!(
                    "leader in term {} ({} ms of lease left): started pid {}",
                    self.term,
                    ms(left),
                    child.id()
                );
                self.running = Some(Running {
                    exit_fd,
                    child,
                    term: self.term,
                    started: Instant::now(),
                    kill_at_ns: None,
                    enforcer: Some(enforcer),
                });
            }
            Err(e) => {
                say!("cannot start {}: {e}", argv[0]);
                self.next_start = Instant::now() + self.backoff;
                self.backoff = (self.backoff * 2).min(Duration::from_secs(10));
                self.count_exit();
            }
        }
    }

    /// How long to block: until the next thing this supervisor must do.
    fn timeout(&self) -> Duration {
        let now_ns = boot_now().as_nanos();
        let after_ns = |t: u64| Duration::from_nanos(t.saturating_sub(now_ns));
        let now = Instant::now();
        let mut t = Duration::from_secs(60);
        match &self.conn {
            Some(c) => {
                t = t.min((c.last_line + self.ask_interval()).saturating_duration_since(now))
            }
            None => t = t.min(self.next_connect.saturating_duration_since(now)),
        }
        match &self.running {
            Some(r) => {
                let grace = crate::time::duration_nanos(self.opts.grace + MARGIN);
                t = t.min(match r.kill_at_ns {
                    Some(k) => after_ns(k),
                    None => after_ns(self.until_ns.saturating_sub(grace)),
                });
                let enforcer_fd = r.enforcer.as_ref().map(Enforcer::exit_fd);
                if r.exit_fd.is_none() || enforcer_fd.is_some_and(|f| f.is_none()) {
                    t = t.min(CHILD_TICK);
                }
            }
            None if self.leader => t = t.min(self.next_start.saturating_duration_since(now)),
            None => {}
        }
        if let Some(at) = self.restarts.as_ref().and_then(RestartWindow::clears_at) {
            t = t.min(at.saturating_duration_since(now));
        }
        if !self.retired.is_empty() {
            t = t.min(CHILD_TICK);
        }
        t
    }

    /// Blocks in ppoll(2) on the daemon, the command's exit and our own signals.
    fn wait(&mut self, sig: &OwnedFd) {
        let t = self.timeout();
        let mut fds = vec![libc::pollfd {
            fd: sig.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        if let Some(c) = &self.conn {
            fds.push(libc::pollfd {
                fd: c.stream.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        if let Some(fd) = self.running.as_ref().and_then(|r| r.exit_fd.as_ref()) {
            fds.push(libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let enforcer = self.running.as_ref().and_then(|r| r.enforcer.as_ref());
        if let Some(fd) = enforcer.and_then(Enforcer::exit_fd) {
            fds.push(libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        if let Some(fd) = log::flush() {
            // Lines wait for stderr: wake when it takes writes again.
            fds.push(libc::pollfd {
                fd,
                events: libc::POLLOUT,
                revents: 0,
            });
        }
        let ts = libc::timespec {
            tv_sec: t.as_secs() as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `fds` is a valid array of pollfd for the call; the mask is null.
        unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        if fds[0].revents != 0 {
            let mut b = [0u8; 16];
            // SAFETY: reading into a local buffer from our non-blocking pipe.
            while unsafe { libc::read(sig.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) } > 0 {}
            if !self.stopping {
                say!("signal received: stopping");
            }
            self.stopping = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rolling upgrade: the answers of electd before `grace_ms` (82751f4) to this
    /// `run`'s request are recognised, and the request is then made without it.
    #[test]
    fn an_older_daemons_refusal_of_the_grace_is_recognised() {
        for old in [
            r#"{"error":"supervise: 'grace_ms=150' is not a group name ([a-z][a-z0-9_-]{0,31})"}"#,
            r#"{"error":"usage: supervise [GROUP]"}"#,
        ] {
            let e = parse_line(old).unwrap_err();
            assert!(refuses_grace(&e), "{e}");
        }
        for other in [
            r#"{"error":"no group 'orders' (this server's groups: a, b)"}"#,
            r#"{"error":"supervise: 'Orders' is not a group name ([a-z][a-z0-9_-]{0,31})"}"#,
        ] {
            assert!(!refuses_grace(&parse_line(other).unwrap_err()), "{other}");
        }
    }

    fn timers(lease_ms: u64, hbt_ms: u64, rtt_ms: u64) -> Timers {
        Timers {
            lease_len: Duration::from_millis(lease_ms),
            heartbeat: Duration::from_millis(hbt_ms),
            rtt: Duration::from_millis(rtt_ms),
        }
    }

    #[test]
    fn grace_must_fit_before_a_renewal() {
        // heartbeat 100ms, rtt 20ms, K=3, drift 0.01: lease 294 ms, 174 ms before renewal.
        let t = timers(294, 100, 20);
        let e = check_grace(Duration::from_millis(300), &t).unwrap_err();
        assert!(
            e.contains("--grace 300ms") && e.contains("154ms or less"),
            "{e}"
        );
        assert!(check_grace(Duration::from_millis(155), &t).is_err());
        assert!(check_grace(Duration::from_millis(154), &t).is_ok());
        assert!(check_grace(Duration::from_millis(100), &t).is_ok());
        // Defaults (heartbeat 1s, rtt 100ms): up to 1820 ms.
        let t = timers(2940, 1000, 100);
        assert!(check_grace(Duration::from_millis(1820), &t).is_ok());
        assert!(check_grace(Duration::from_millis(1821), &t).is_err());
        // A lease shorter than a heartbeat: nothing fits, no panic.
        assert!(check_grace(Duration::ZERO, &timers(50, 100, 20)).is_err());
    }

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

    #[test]
    fn lines_parse_and_bad_lines_are_errors() {
        let l = parse_line(
            r#"{"n":3,"id":1,"role":"leader","leader":1,"term":7,"lease_until_ns":123,"now_ns":100,"lease_len_ns":294000000,"heartbeat_ns":100000000,"rtt_ns":20000000,"resigning":false}"#,
        )
        .unwrap();
        assert_eq!((l.n, l.term, l.lease_until_ns), (3, 7, Some(123)));
        assert_eq!(l.timers, timers(294, 100, 20));
        // A follower line carries no lease, whatever it says.
        let f = parse_line(
            r#"{"n":4,"role":"follower","term":7,"lease_until_ns":5,"lease_len_ns":1,"heartbeat_ns":1,"rtt_ns":1}"#,
        )
        .unwrap();
        assert_eq!(f.lease_until_ns, None);
        assert!(
            parse_line(r#"{"error":"nope"}"#)
                .unwrap_err()
                .contains("nope")
        );
        assert!(parse_line(r#"{"role":"leader"}"#).is_err());
        assert!(parse_line("{{{").is_err());
        assert!(parse_line("").is_err());
    }
}

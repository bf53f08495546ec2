//! Health checks (SPEC section 13): the `check` command, run off the event loop.
//!
//! A runner thread starts the check every `check-interval`, one at a time, no shell,
//! in its own process group, in the clean environment hooks get
//! ([`crate::hooks::clean_env`]) plus ELECTD_ID, ELECTD_ROLE and ELECTD_GROUP. A check still running
//! at `check-timeout` is killed with its whole group (SIGKILL to -pgid) and reaped; so
//! is whatever a check that exited leaves behind in its group. Its stdout and stderr
//! share one pipe that is read while it runs (a chatty check never blocks on a full
//! pipe); the first line of the first [`OUTPUT_BYTES`] bytes is kept for the logs.
//!
//! Exit status 0 is a success. Everything else is a failure, never a success: a
//! non-zero exit (126 and 127, the shell's "cannot execute" and "not found", are
//! counted as `exec`), a command that cannot be started, a timeout, death by a signal.
//!
//! Each result reaches the event loop through a bounded channel and a `mio::Waker`;
//! the loop never waits for a check. There, [`FallRise`] turns results into a verdict:
//! `unknown` until the first verdict, `ok` after `check-rise` consecutive successes,
//! `failing` after `check-fall` consecutive failures. A server with a check is
//! unhealthy until its verdict is `ok`.

use crate::config::Check;
use crate::hooks::clean_env;
use log::{debug, info};
use std::fmt;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TryRecvError};
use std::time::{Duration, Instant};

/// Output bytes kept per check run; the rest is read and discarded.
pub const OUTPUT_BYTES: usize = 200;
/// Results queued between the runner and the loop (one per interval is produced).
const QUEUED: usize = 8;
/// How often a child is looked at when no pidfd could be opened.
const CHILD_TICK: Duration = Duration::from_millis(5);

/// Why a check run failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// It exited with this non-zero status.
    Exit(i32),
    /// It was killed by this signal (not by us).
    Signal(i32),
    /// It outlived `check-timeout`; its process group was killed.
    Timeout(Duration),
    /// It could not be started (not found, not executable, ...), or a killed check
    /// could not even be reaped.
    Exec(String),
}

impl Failure {
    /// The metrics label: `exit`, `signal`, `timeout` or `exec`.
    pub fn reason(&self) -> &'static str {
        match self {
            Failure::Exit(126 | 127) | Failure::Exec(_) => "exec",
            Failure::Exit(_) => "exit",
            Failure::Signal(_) => "signal",
            Failure::Timeout(_) => "timeout",
        }
    }

    /// Index into [`CheckCounters::failures`].
    pub fn index(&self) -> usize {
        REASONS
            .iter()
            .position(|r| *r == self.reason())
            .expect("every reason is listed")
    }
}

/// The failure reasons, in the order of [`CheckCounters::failures`].
pub const REASONS: [&str; 4] = ["exit", "signal", "timeout", "exec"];

/// A readable name for the signals a check is likely to die of.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => return format!("signal {sig}"),
    };
    format!("signal {sig} ({name})")
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Exit(126) => write!(f, "exit status 126 (cannot execute)"),
            Failure::Exit(127) => write!(f, "exit status 127 (command not found)"),
            Failure::Exit(c) => write!(f, "exit status {c}"),
            Failure::Signal(s) => write!(f, "killed by {}", signal_name(*s)),
            Failure::Timeout(t) => write!(
                f,
                "timed out after {} ms (check-timeout): its process group was killed",
                t.as_millis()
            ),
            Failure::Exec(e) => write!(f, "cannot execute: {e}"),
        }
    }
}

/// One check run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Ok for exit status 0.
    pub result: Result<(), Failure>,
    /// The first line of its output (stdout and stderr together), at most
    /// [`OUTPUT_BYTES`] bytes, control characters replaced.
    pub output: String,
    /// How long it ran.
    pub took: Duration,
}

impl Outcome {
    /// "exit status 3; output: broker unreachable", for the logs and `status`.
    pub fn describe(&self) -> String {
        let what = match &self.result {
            Ok(()) => "exit status 0".to_string(),
            Err(f) => f.to_string(),
        };
        if self.output.is_empty() {
            what
        } else {
            format!("{what}; output: {}", self.output)
        }
    }
}

/// The first bytes a check writes, and the rest drained.
struct Capture {
    head: Vec<u8>,
    more: bool,
}

impl Capture {
    fn take(&mut self, bytes: &[u8]) {
        let room = OUTPUT_BYTES.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.more |= bytes.len() > room;
    }

    /// Reads what the pipe holds now; false once it is closed (or broken).
    fn drain(&mut self, pipe: &mut std::fs::File) -> bool {
        let mut buf = [0u8; 4096];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => self.take(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }

    fn first_line(&self) -> String {
        let text = String::from_utf8_lossy(&self.head);
        let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        let mut out: String = line
            .trim()
            .chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect();
        if self.more && !text.contains('\n') {
            out.push_str("...");
        }
        out
    }
}

fn pipe() -> io::Result<(std::fs::File, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two fresh descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and owned by nobody else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl on a descriptor we own; only the read end is made non-blocking.
    unsafe {
        let fl = libc::fcntl(r.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(r.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    Ok((std::fs::File::from(r), w))
}

/// A descriptor that becomes readable when `pid` exits (Linux 5.3+), if available.
fn pidfd(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a non-negative result is a fresh descriptor we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// True once `child` has exited. It stays a zombie (WNOWAIT), so its process group
/// id cannot be reused before the group is killed.
fn exited(child: &Child) -> bool {
    // SAFETY: waitid with WNOWAIT only looks at a child of ours.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_PID,
            child.id() as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        ) == 0
            && info.si_pid() != 0
    }
}

fn kill_group(child: &Child) {
    // SAFETY: kill(2) on the process group of a child we started and have not reaped.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
}

/// Waits up to `within` for the pidfd (or, without one, one tick) and the pipe.
fn wait_some(exit_fd: Option<&OwnedFd>, pipe: Option<&std::fs::File>, within: Duration) {
    let mut fds = Vec::with_capacity(2);
    for fd in [exit_fd.map(|f| f.as_raw_fd()), pipe.map(|p| p.as_raw_fd())]
        .into_iter()
        .flatten()
    {
        fds.push(libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
    }
    let within = if exit_fd.is_none() {
        within.min(CHILD_TICK)
    } else {
        within
    };
    let ms = within.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: `fds` is a valid array of pollfd for the duration of the call.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
}

/// A check that was killed and has not exited yet (stuck in the kernel).
pub struct Stuck {
    child: Child,
    exit_fd: Option<OwnedFd>,
}

impl Stuck {
    /// Waits up to `within` for it to exit; true once reaped.
    pub fn reap(&mut self, within: Duration) -> bool {
        let until = Instant::now() + within;
        loop {
            if exited(&self.child) {
                let _ = self.child.wait();
                return true;
            }
            let now = Instant::now();
            if now >= until {
                return false;
            }
            wait_some(self.exit_fd.as_ref(), None, until - now);
        }
    }
}

/// Runs `argv` once with `timeout`; blocks until it has exited and been reaped (or,
/// killed, it would not die within a second: then also returns it as [`Stuck`]).
pub fn run_once(
    argv: &[String],
    timeout: Duration,
    env: &[(&str, String)],
) -> (Outcome, Option<Stuck>) {
    let started = Instant::now();
    let fail = |f: Failure| Outcome {
        result: Err(f),
        output: String::new(),
        took: started.elapsed(),
    };
    let Some(program) = argv.first() else {
        return (fail(Failure::Exec("empty command".into())), None);
    };
    let (mut out, w) = match pipe() {
        Ok(p) => p,
        Err(e) => return (fail(Failure::Exec(format!("pipe: {e}"))), None),
    };
    let w2 = match w.try_clone() {
        Ok(w2) => w2,
        Err(e) => return (fail(Failure::Exec(format!("pipe: {e}"))), None),
    };
    let mut cmd = Command::new(program);
    clean_env(&mut cmd)
        .args(&argv[1..])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::from(w))
        .stderr(Stdio::from(w2))
        .process_group(0);
    // SAFETY: prctl is async-signal-safe. The check dies with the thread that runs it,
    // so a daemon that dies leaves no check behind.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    // Our copies of the pipe's write end must close, or it never reports EOF.
    drop(cmd);
    let child = match spawned {
        Ok(c) => c,
        Err(e) => return (fail(Failure::Exec(format!("{program}: {e}"))), None),
    };
    let exit_fd = pidfd(child.id());
    let mut capture = Capture {
        head: Vec::new(),
        more: false,
    };
    let mut open = true;
    let deadline = started + timeout;
    let timed_out = loop {
        if open {
            open = capture.drain(&mut out);
        }
        if exited(&child) {
            break false;
        }
        let now = Instant::now();
        if now >= deadline {
            break true;
        }
        wait_some(exit_fd.as_ref(), open.then_some(&out), deadline - now);
    };
    // Nothing of its process group may outlive it: not on a timeout, and not what an
    // exited check left running in the background either.
    kill_group(&child);
    let mut stuck = Stuck { child, exit_fd };
    let reaped = stuck.reap(Duration::from_secs(1));
    if open {
        capture.drain(&mut out);
    }
    let result = if timed_out {
        Err(Failure::Timeout(timeout))
    } else {
        match stuck.child.try_wait() {
            Ok(Some(s)) if s.success() => Ok(()),
            Ok(Some(s)) => match (s.code(), s.signal()) {
                (Some(c), _) => Err(Failure::Exit(c)),
                (None, Some(sig)) => Err(Failure::Signal(sig)),
                _ => Err(Failure::Exec(format!("unknown status {s}"))),
            },
            Ok(None) => Err(Failure::Exec("exited but could not be reaped".into())),
            Err(e) => Err(Failure::Exec(format!("wait: {e}"))),
        }
    };
    let outcome = Outcome {
        result,
        output: capture.first_line(),
        took: started.elapsed(),
    };
    (outcome, (!reaped).then_some(stuck))
}

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

/// What the runner thread needs to know.
#[derive(Clone, Debug)]
struct Settings {
    argv: Vec<String>,
    interval: Duration,
    timeout: Duration,
}

impl From<&Check> for Settings {
    fn from(c: &Check) -> Settings {
        Settings {
            argv: c.argv.clone(),
            interval: c.interval,
            timeout: c.timeout,
        }
    }
}

/// The thread that runs checks; dropped, it stops after the check under way.
struct Runner {
    settings: Sender<Settings>,
    results: Receiver<Outcome>,
}

/// Whose check it is: the server and the election group, for its environment.
#[derive(Clone, Debug)]
struct Who {
    id: u16,
    group: String,
}

/// The runner thread's body: a check every interval, one at a time.
fn runner(
    mut s: Settings,
    ctl: Receiver<Settings>,
    out: SyncSender<Outcome>,
    waker: Arc<mio::Waker>,
    who: Who,
    leader: Arc<AtomicBool>,
) {
    let send = |o: Outcome| {
        let ok = out.send(o).is_ok();
        let _ = waker.wake();
        ok
    };
    let mut next = Instant::now();
    loop {
        // Sleep until the next check, taking new settings as they come.
        loop {
            let now = Instant::now();
            let msg = if now >= next {
                match ctl.try_recv() {
                    Ok(m) => Ok(m),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return,
                }
            } else {
                ctl.recv_timeout(next - now)
            };
            match msg {
                Ok(new) => {
                    // A shorter interval applies to the wait under way.
                    next = next.min(Instant::now() + new.interval);
                    s = new;
                }
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        let start = Instant::now();
        let role = if leader.load(Ordering::Relaxed) {
            "leader"
        } else {
            "follower"
        };
        let env = [
            ("ELECTD_ID", who.id.to_string()),
            ("ELECTD_ROLE", role.to_string()),
            ("ELECTD_GROUP", who.group.clone()),
        ];
        let (outcome, stuck) = run_once(&s.argv, s.timeout, &env);
        if !send(outcome) {
            return;
        }
        if let Some(mut stuck) = stuck {
            // A killed check that does not die (stuck in the kernel) must not freeze
            // the verdict: every interval it is still there counts as a failure.
            while !stuck.reap(s.interval) {
                let o = Outcome {
                    result: Err(Failure::Exec(
                        "the previous check, killed on its timeout, has still not exited".into(),
                    )),
                    output: String::new(),
                    took: start.elapsed(),
                };
                if !send(o) {
                    return;
                }
            }
        }
        next = (start + s.interval).max(Instant::now());
    }
}

impl Runner {
    fn start(
        s: Settings,
        waker: Arc<mio::Waker>,
        who: Who,
        leader: Arc<AtomicBool>,
    ) -> io::Result<Runner> {
        let (settings, ctl) = mpsc::channel();
        let (out, results) = mpsc::sync_channel(QUEUED);
        std::thread::Builder::new()
            .name("electd-check".into())
            .spawn(move || runner(s, ctl, out, waker, who, leader))?;
        Ok(Runner { settings, results })
    }
}

/// Counters for metrics.
#[derive(Clone, Debug, Default)]
pub struct CheckCounters {
    /// Check runs finished.
    pub runs: u64,
    /// Failures by reason, in the order of [`REASONS`].
    pub failures: [u64; 4],
}

/// The check as the event loop sees it: the runner, the verdict and its cause.
pub struct Checks {
    check: Option<Check>,
    runner: Option<Runner>,
    counting: FallRise,
    /// The latest failure, described ("exit status 3; output: ...").
    last_failure: Option<String>,
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
        let counting = check.map_or(FallRise::new(1, 1), |c| FallRise::new(c.fall, c.rise));
        Ok(Checks {
            check: check.cloned(),
            runner,
            counting,
            last_failure: None,
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

    /// The verdict: `Ok` without a check.
    pub fn verdict(&self) -> Verdict {
        if self.check.is_some() {
            self.counting.verdict()
        } else {
            Verdict::Ok
        }
    }

    /// Why the verdict is not `Ok`, if it is not.
    pub fn cause(&self) -> Option<String> {
        let c = self.check.as_ref()?;
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
                c.rise,
                self.last_failure
                    .as_deref()
                    .map_or(String::new(), |f| format!("; last failure: {f}"))
            )),
        }
    }

    /// Tells the checks whether this server leads (their ELECTD_ROLE).
    pub fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::Relaxed);
    }

    /// Applies a reloaded configuration. A changed command or timing keeps the verdict
    /// (a reload is no restart and must not move the leadership by itself); a check
    /// added by a reload starts from the current verdict, `ok`, and needs `check-fall`
    /// failures to fail; a removed check leaves the server healthy.
    pub fn reconfigure(&mut self, new: Option<&Check>) -> io::Result<()> {
        if new == self.check.as_ref() {
            return Ok(());
        }
        match new {
            None => {
                self.runner = None;
                self.counting = FallRise::new(1, 1);
                self.last_failure = None;
                info!("health check removed");
            }
            Some(c) => {
                if self.check.is_none() {
                    // Healthy so far, without a check: keep it until the check fails.
                    self.counting = FallRise {
                        verdict: Verdict::Ok,
                        ..FallRise::new(c.fall, c.rise)
                    };
                } else {
                    self.counting.set_limits(c.fall, c.rise);
                }
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

    /// Takes the results that arrived; returns the new verdict if it changed. Logs a
    /// failure that begins a run of failures (at info) and the rest at debug; the
    /// caller logs changes of health.
    pub fn drain(&mut self) -> Option<Verdict> {
        let mut changed = None;
        let r = self.runner.as_ref()?;
        let outcomes: Vec<Outcome> = r.results.try_iter().collect();
        let c = self.check.as_ref()?;
        for o in outcomes {
            self.counters.runs += 1;
            let ok = o.result.is_ok();
            let text = o.describe();
            if let Err(f) = &o.result {
                self.counters.failures[f.index()] += 1;
                if self.counting.failures_in_a_row() == 0 {
                    info!(
                        "health check failed (1 of {} before unhealthy): {text}",
                        c.fall
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
            if let Some(v) = self.counting.record(ok) {
                changed = Some(v);
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, timeout_ms: u64) -> Outcome {
        let argv = vec!["/bin/sh".to_string(), "-c".into(), script.into()];
        let (o, stuck) = run_once(&argv, Duration::from_millis(timeout_ms), &[]);
        assert!(stuck.is_none());
        o
    }

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

    #[test]
    fn exit_zero_is_the_only_success() {
        let o = sh("echo all good; exit 0", 5_000);
        assert_eq!(o.result, Ok(()));
        assert_eq!(o.output, "all good");
        let o = sh("echo broker down >&2; exit 3", 5_000);
        assert_eq!(o.result, Err(Failure::Exit(3)));
        assert_eq!(o.result.as_ref().unwrap_err().reason(), "exit");
        assert_eq!(o.output, "broker down");
        assert_eq!(o.describe(), "exit status 3; output: broker down");
        for code in [126, 127] {
            let o = sh(&format!("exit {code}"), 5_000);
            assert_eq!(o.result.as_ref().unwrap_err().reason(), "exec", "{code}");
        }
    }

    #[test]
    fn a_command_that_cannot_run_is_a_failure() {
        let (o, _) = run_once(
            &["/nonexistent/electd-check".to_string()],
            Duration::from_secs(5),
            &[],
        );
        let f = o.result.unwrap_err();
        assert_eq!(f.reason(), "exec");
        assert!(
            f.to_string()
                .starts_with("cannot execute: /nonexistent/electd-check:"),
            "{f}"
        );
        // Found but not executable.
        let (o, _) = run_once(&["/etc/passwd".to_string()], Duration::from_secs(5), &[]);
        assert_eq!(o.result.unwrap_err().reason(), "exec");
        let (o, _) = run_once(&[], Duration::from_secs(5), &[]);
        assert_eq!(o.result.unwrap_err().reason(), "exec");
    }

    #[test]
    fn death_by_a_signal_is_a_failure() {
        let o = sh("kill -9 $$", 5_000);
        assert_eq!(o.result, Err(Failure::Signal(libc::SIGKILL)));
        assert_eq!(o.result.as_ref().unwrap_err().reason(), "signal");
        assert_eq!(
            o.result.unwrap_err().to_string(),
            "killed by signal 9 (SIGKILL)"
        );
    }

    #[test]
    fn a_timeout_kills_the_whole_group() {
        let mark = std::env::temp_dir().join(format!("electd-check-grp-{}", std::process::id()));
        let _ = std::fs::remove_file(&mark);
        // The grandchild would write the mark after 1 s if it survived the kill.
        let script = format!("(sleep 1; touch {}) & sleep 10", mark.display());
        let t0 = Instant::now();
        let o = sh(&script, 200);
        assert_eq!(o.result, Err(Failure::Timeout(Duration::from_millis(200))));
        assert_eq!(o.result.as_ref().unwrap_err().reason(), "timeout");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        std::thread::sleep(Duration::from_millis(1_300));
        assert!(!mark.exists(), "a process of the check's group outlived it");
    }

    #[test]
    fn output_is_bounded_and_never_blocks_the_check() {
        // 1 MiB of output: far more than a pipe holds.
        let o = sh(
            "head -c 1048576 /dev/zero | tr '\\0' x; echo; exit 0",
            10_000,
        );
        assert_eq!(o.result, Ok(()));
        assert_eq!(o.output.len(), OUTPUT_BYTES + 3);
        assert!(o.output.ends_with("..."));
        let o = sh("printf '\\n  first\\tline \\nsecond\\n'", 5_000);
        assert_eq!(o.output, "first?line");
    }

    #[test]
    fn the_environment_names_the_server_and_hides_the_daemons_own() {
        // SAFETY: tests in this module do not read NOTIFY_SOCKET concurrently.
        unsafe { std::env::set_var("NOTIFY_SOCKET", "/run/systemd/notify") };
        let argv: Vec<String> = [
            "/bin/sh",
            "-c",
            "echo \"$ELECTD_ID $ELECTD_ROLE ${NOTIFY_SOCKET:-none} $PATH\"",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let env = [
            ("ELECTD_ID", "4".to_string()),
            ("ELECTD_ROLE", "follower".to_string()),
        ];
        let (o, _) = run_once(&argv, Duration::from_secs(5), &env);
        assert_eq!(
            o.output,
            format!("4 follower none {}", crate::hooks::CHILD_PATH)
        );
    }

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
        assert_eq!(c.verdict(), Verdict::Unknown);
        let t0 = Instant::now();
        while c.verdict() != Verdict::Failing {
            assert!(t0.elapsed() < Duration::from_secs(10), "no verdict");
            std::thread::sleep(Duration::from_millis(10));
            c.drain();
        }
        assert!(
            c.cause().unwrap().contains("exit status 1"),
            "{:?}",
            c.cause()
        );
        assert!(c.counters.failures[0] >= 2);
        // Reloaded to a passing check: the verdict follows after `rise` successes.
        let pass = Check {
            argv: vec!["/bin/true".into()],
            ..check
        };
        c.reconfigure(Some(&pass)).unwrap();
        while c.verdict() != Verdict::Ok {
            assert!(t0.elapsed() < Duration::from_secs(10), "no recovery");
            std::thread::sleep(Duration::from_millis(10));
            c.drain();
        }
        c.reconfigure(None).unwrap();
        assert_eq!((c.verdict(), c.cause()), (Verdict::Ok, None));
    }
}

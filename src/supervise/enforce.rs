//! The lease enforcer: a process of its own that stops `electctl run`'s command by the
//! lease end whatever happens to `run` (SPEC sections 8 S5 and 11; docs/PROTOCOL.md,
//! "S5 through stalls").
//!
//! `run` starts it *before* each command as `electctl __enforce GRACE_NS RUN_PID` (a fresh exec
//! of the same binary: nothing of `run`'s state, threads or locks is inherited), in a
//! process group of its own, so `kill -STOP` of run's pid, a debugger on run, or a
//! terminal's ^Z or ^C do not reach it. The command is then forked (`spawn.rs`, which
//! does not wait for the exec; tests use [`Enforcer::guard`] on a std `Command`) with
//! its `Handover`: before its exec, the command's own process sets
//! PR_SET_PDEATHSIG and gives up unless `run` is still its parent, writes its pid
//! (`P<pid>`) into the enforcer's pipe, and gives up unless the stop timer's SIGTERM
//! instant is still ahead. So no command runs that its enforcer does not know, nor one
//! forked on a lease that ended, whatever happens to `run` from its `room()` look on
//! (SIGSTOP, a debugger, SIGKILL: the twenty-second round's review, findings 1-3,
//! tests/adv22.rs). A gate opened by `run` would not do: a start waits for the exec.
//!
//! Its stdin is that pipe from `run`, fd 4 `run`'s stop timer (`supervise/timers.rs`): a
//! CLOCK_BOOTTIME timerfd that fires at the SIGTERM instant of the last lease end armed
//! and carries its SIGKILL instant. The daemon re-arms it at every renewal (or, with a
//! daemon that does not take it, `run` does from each line); the enforcer never arms
//! it, it only sleeps on it, so a lease renewed in time never wakes it (issue 25):
//!
//! - the stop timer fired: the pipe is read for `T` (run sent SIGTERM itself); if
//!   none came, a live `run` that woke on the same timer is given a few ms (at most a
//!   quarter of the grace) to say it, then the enforcer sends SIGTERM to the command's
//!   process group itself;
//! - the SIGKILL instant came (its own alarm, armed from the fired stop timer, rang):
//!   SIGKILL to the group;
//! - it acts on what the stop timer says when it looks (the instants armed), not on its
//!   own idea of when it should have woken: a stopped enforcer that resumes acts at
//!   once on what came due;
//! - when the command's leader exits (a pidfd it opens itself), it SIGKILLs what is
//!   left of the group and exits; it also exits once the group is empty, and at once
//!   if the pipe closes before any command announced itself.
//!
//! It writes nothing (stdout and stderr are /dev/null): no log sink can block it.

use super::spawn::{Outcome, Prepared, Setup, Starting, reaped, spawn};
use super::timers::StopTimers;
use std::io::ErrorKind;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The hidden `electctl` subcommand that runs the enforcer.
pub const SUBCOMMAND: &str = "__enforce";
/// The error a guarded command's start fails with when the stop timer's SIGTERM
/// instant came before its exec ([`Enforcer::guard`]).
pub const LEASE_ENDED: i32 = libc::ETIME;
/// The descriptor the stop timer is handed on as.
const TIMER_FD: i32 = 4;
/// How long after its SIGTERM timer fired the enforcer waits for a live `run`'s `T`
/// (ns, at most a quarter of the grace), so the command does not get two SIGTERMs.
const TERM_LAG: u64 = 5_000_000;
/// How often the group is checked when no pidfd tells of the leader's exit.
const TICK: Duration = Duration::from_millis(50);
/// How often the stop timer is looked at between SIGTERM and SIGKILL (only then).
const GRACE_TICK: Duration = Duration::from_millis(10);

/// `run`'s handle on its enforcer.
pub struct Enforcer {
    pid: libc::pid_t,
    /// Its exec pipe, until it exec'd (`spawn`: `run` does not wait for it).
    starting: Option<Starting>,
    /// When it was forked.
    since: Instant,
    /// The write end of the pipe (non-blocking); None once closed.
    pipe: Option<OwnedFd>,
    /// A pidfd of the enforcer: readable once it exits.
    exit_fd: Option<OwnedFd>,
}

fn nonblocking_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors that nothing else owns.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl on our own write end: run's writes never block.
    unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    Ok((r, w))
}

/// Sets every signal whose action is a handler back to SIG_DFL (ignored ones stay
/// ignored), as an exec does; in a forked child, before its exec: sigaction(2) only.
pub(super) fn default_handlers() {
    for sig in 1..32 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: sigaction(2) is async-signal-safe; an all-zero sigaction is a valid
        // out-parameter and, with SIG_DFL, a valid new action.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction != libc::SIG_DFL
                && old.sa_sigaction != libc::SIG_IGN
            {
                let dfl: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
    }
}

/// Writes `P<pid>\n` into `out` without allocating (a forked child calls it); its length.
fn announce(pid: libc::pid_t, out: &mut [u8; 24]) -> usize {
    let mut digits = [0u8; 20];
    let mut v = pid.max(0) as u64;
    let mut k = 0;
    loop {
        digits[k] = b'0' + (v % 10) as u8;
        k += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out[0] = b'P';
    for i in 0..k {
        out[1 + i] = digits[k - 1 - i];
    }
    out[1 + k] = b'\n';
    k + 2
}

/// The command's process's hand-over to its enforcer, run between its fork and its
/// exec ([`Enforcer::guard`]): plain values, nothing that allocates.
#[derive(Clone, Copy)]
pub(super) struct Handover {
    /// `run`'s pid: the parent the command's process must still have after its prctl.
    parent: libc::pid_t,
    /// The write end of the enforcer's pipe.
    pipe: RawFd,
    /// `run`'s stop timer.
    timer: RawFd,
}

impl Handover {
    /// In the forked process, after its signal handlers are set back to default: (1)
    /// PR_SET_PDEATHSIG, and ESRCH unless `run` is still its parent; (2) `P<pid>` into
    /// the enforcer's pipe (EPIPE if the enforcer is gone); (3) ETIME ([`LEASE_ENDED`])
    /// unless the stop timer's SIGTERM instant is still ahead. Err(errno) to give up.
    ///
    /// Async-signal-safe: prctl, getppid, getpid, signal, write and timerfd_gettime
    /// (through `look`), arithmetic on the stack; nothing allocates or takes a lock.
    pub(super) fn run(&self) -> Result<(), i32> {
        let errno = || {
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO)
        };
        // SAFETY: the system calls named above, on values this struct holds.
        unsafe {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(errno());
            }
            if libc::getppid() != self.parent {
                // run died before the prctl: nothing would supervise the command.
                return Err(libc::ESRCH);
            }
            let mut line = [0u8; 24];
            let n = announce(libc::getpid(), &mut line);
            // A write to an enforcer already gone fails with EPIPE, not SIGPIPE.
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            let w = libc::write(self.pipe, line.as_ptr().cast(), n);
            let err = errno();
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            if w != n as isize {
                return Err(if w < 0 { err } else { libc::EPIPE });
            }
        }
        if !super::timers::look(self.timer).is_some_and(|l| l.room()) {
            return Err(LEASE_ENDED);
        }
        Ok(())
    }
}

impl Enforcer {
    /// Starts an enforcer sleeping on `timers`' stop timer, for the command started
    /// next with [`Enforcer::guard`].
    /// Its signals reach what the command started outside its group too (every
    /// descendant of this process but its enforcers: `escaped`), so call it only from a
    /// process whose children are the command's and the enforcers (`run`).
    pub fn start(grace: Duration, timers: &StopTimers) -> std::io::Result<Enforcer> {
        // SAFETY: getpid(2) cannot fail.
        let me = unsafe { libc::getpid() };
        Self::spawn(Path::new("/proc/self/exe"), grace, timers, Some(me))
    }

    /// As [`Enforcer::start`], with the `electctl` binary `exe` (tests start the real
    /// one), signalling the command's group only: the caller may have other children.
    /// Returns once it has exec'd.
    pub fn start_with(
        exe: &Path,
        grace: Duration,
        timers: &StopTimers,
    ) -> std::io::Result<Enforcer> {
        let mut e = Self::spawn(exe, grace, timers, None)?;
        e.wait_exec()?;
        Ok(e)
    }

    fn spawn(
        exe: &Path,
        grace: Duration,
        timers: &StopTimers,
        run: Option<i32>,
    ) -> std::io::Result<Enforcer> {
        let (r, w) = nonblocking_pipe()?;
        let null = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")?;
        let argv = [
            "electctl-enforce".to_string(),
            SUBCOMMAND.to_string(),
            crate::time::duration_nanos(grace).to_string(),
            run.unwrap_or(0).to_string(),
        ];
        let mut p = Prepared::at(exe, &argv)?;
        // Not waited for: a process held before its exec does not hold `run` (review
        // 24); `run` gives it START_LIMIT (`exec_overdue`).
        let st = spawn(
            &mut p,
            Setup::Enforcer {
                input: r.as_raw_fd(),
                null: null.as_raw_fd(),
                timer: timers.fd(),
            },
        )?;
        Ok(Enforcer {
            pid: st.pid,
            exit_fd: super::command::pidfd(st.pid as u32),
            starting: Some(st),
            since: Instant::now(),
            pipe: Some(w),
        })
    }

    /// True while its process has not exec'd (or failed to: it then exits) after
    /// START_LIMIT: `run` then takes it for lost.
    pub(super) fn exec_overdue(&mut self) -> bool {
        self.exec_pending() && self.since.elapsed() >= super::command::START_LIMIT
    }

    /// When its exec is overdue, while it may still be pending (`exec_overdue` reads).
    pub(super) fn exec_deadline(&self) -> Option<Instant> {
        self.starting
            .as_ref()
            .map(|_| self.since + super::command::START_LIMIT)
    }

    /// Its exec pipe, while it has not exec'd.
    pub(super) fn exec_fd(&self) -> Option<RawFd> {
        self.starting.as_ref().map(|st| st.fd.as_raw_fd())
    }

    /// True while its process has not exec'd yet (reads its exec pipe).
    fn exec_pending(&mut self) -> bool {
        let Some(st) = self.starting.as_ref() else {
            return false;
        };
        if st.outcome() == Outcome::Pending {
            return true;
        }
        // Exec'd, or gave up (it exits, and `exited` says so).
        self.starting = None;
        false
    }

    /// Waits (at most 10 s) until its process has exec'd: for callers that signal or
    /// measure it at once (tests).
    fn wait_exec(&mut self) -> std::io::Result<()> {
        let t0 = Instant::now();
        while self.exec_pending() {
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(std::io::Error::from_raw_os_error(libc::ETIMEDOUT));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        match self.exited() {
            true => Err(std::io::Error::other("the enforcer exited before its exec")),
            false => Ok(()),
        }
    }

    /// Makes `cmd` hand itself to this enforcer before it runs: in the forked process,
    /// before the exec, it (1) sets PR_SET_PDEATHSIG and gives up unless the process
    /// that calls this is still its parent (it may have died before the prctl), (2)
    /// writes its pid into the enforcer's pipe, so the enforcer holds its process group
    /// before it execs, and (3) gives up unless the stop timer's SIGTERM instant is
    /// still ahead (the look of `room()` may be long past). A command that gives up
    /// makes `spawn` fail; (3) with ETIME ([`LEASE_ENDED`]).
    ///
    /// First of all it sets every signal `run` handles back to its default action, as
    /// the exec would: from its announcement on, the enforcer may signal the group, and
    /// a SIGTERM that ran `run`'s handler in this copy of `run` would write into `run`'s
    /// own wakeup pipe (`run` would take it for its own SIGTERM and stop) while the
    /// command went on to its exec.
    ///
    /// Call it on a command that makes its own process group (`process_group(0)`),
    /// from the thread that spawns it (PR_SET_PDEATHSIG follows that thread).
    pub fn guard(&self, cmd: &mut Command, timers: &StopTimers) {
        let hand = self.handover(timers);
        // SAFETY: `Handover::run` is async-signal-safe (see there), and so is
        // `default_handlers`.
        unsafe {
            cmd.pre_exec(move || {
                default_handlers();
                hand.run().map_err(std::io::Error::from_raw_os_error)
            });
        }
    }

    /// What the command's process does before its exec to hand itself over to this
    /// enforcer (steps 1-3 of [`Enforcer::guard`]); made in `run`, run in the child.
    pub(super) fn handover(&self, timers: &StopTimers) -> Handover {
        Handover {
            // SAFETY: getpid(2) cannot fail.
            parent: unsafe { libc::getpid() },
            pipe: self.pipe.as_ref().map_or(-1, AsRawFd::as_raw_fd),
            timer: timers.fd(),
        }
    }

    /// Says that run sends the command SIGTERM itself now (call before sending it).
    pub fn terminating(&mut self) {
        let Some(w) = &self.pipe else { return };
        // SAFETY: a write of two bytes (atomic in a pipe) to our non-blocking end; the
        // pipe carries nothing else but the command's one `P` line, so it never fills.
        unsafe { libc::write(w.as_raw_fd(), b"T\n".as_ptr().cast(), 2) };
    }

    /// The descriptor that turns readable when the enforcer exits.
    pub fn exit_fd(&self) -> Option<&OwnedFd> {
        self.exit_fd.as_ref()
    }

    /// True once the enforcer has exited (it is reaped then).
    pub fn exited(&mut self) -> bool {
        reaped(self.pid)
    }

    /// The command is gone: closes the pipe and reaps the enforcer if it has exited;
    /// Some(self) while it has not (it exits at once, having seen the command go).
    pub fn retire(mut self) -> Option<Enforcer> {
        self.pipe = None;
        (!self.exited()).then_some(self)
    }

    /// The enforcer's process id.
    pub fn id(&self) -> u32 {
        self.pid as u32
    }
}

/// What the enforcer was told on its command line: `GRACE_NS RUN_PID`.
struct Args {
    grace_ns: u64,
    /// The `run` that started it (its parent, until `run` dies), whose descendants
    /// outside the command's group are the command's too; None (0): a parent with
    /// other children (a test), whose descendants are left alone.
    run: Option<i32>,
}

fn parse(args: &[String]) -> Option<Args> {
    let [grace, run] = args else {
        return None;
    };
    let run: i32 = run.parse().ok()?;
    Some(Args {
        grace_ns: grace.parse().ok()?,
        run: match run {
            0 => None,
            p if p > 1 => Some(p),
            _ => return None,
        },
    })
}

/// What came on run's pipe (stdin, non-blocking): the command's `P<pid>` line (from
/// the command's own process, before its exec) and run's `T` line.
#[derive(Default)]
struct Input {
    /// The command's pid (its process group), once announced.
    pid: Option<i32>,
    /// run said it sends SIGTERM itself.
    termed: bool,
    /// The pipe reached its end (run and the command's process closed it).
    closed: bool,
    line: [u8; 24],
    len: usize,
    /// The line being read is longer than `line`: ignored whole.
    over: bool,
}

impl Input {
    /// Reads what is waiting. Bounded: the pipe carries one `P` and one `T` line per
    /// command (anything else is ignored, an overlong line cut).
    fn read(&mut self) {
        let mut buf = [0u8; 64];
        for _ in 0..16 {
            // SAFETY: read(2) into a local buffer from our non-blocking stdin.
            let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
            if n == 0 {
                self.closed = true;
                break;
            }
            if n < 0 {
                match std::io::Error::last_os_error().kind() {
                    ErrorKind::Interrupted => continue,
                    ErrorKind::WouldBlock => {}
                    _ => self.closed = true,
                }
                break;
            }
            for &b in &buf[..n as usize] {
                self.byte(b);
            }
        }
    }

    fn byte(&mut self, b: u8) {
        if b != b'\n' {
            if self.len < self.line.len() {
                self.line[self.len] = b;
                self.len += 1;
            } else {
                self.over = true;
            }
            return;
        }
        let line = &self.line[..self.len];
        if self.over {
        } else if line == b"T" {
            self.termed = true;
        } else if let Some(d) = line.strip_prefix(b"P")
            && self.pid.is_none()
        {
            self.pid = std::str::from_utf8(d)
                .ok()
                .and_then(|d| d.parse::<i32>().ok())
                .filter(|p| *p > 1);
        }
        self.len = 0;
        self.over = false;
    }
}

/// kill(2) on the process group; false when the group is gone.
fn group(pgid: i32, sig: i32) -> bool {
    // SAFETY: kill(2) on the command's process group, which run created for it.
    unsafe { libc::kill(-pgid, sig) == 0 }
}

/// False once no process is left in the group (ESRCH; EPERM means some are left).
fn group_exists(pgid: i32) -> bool {
    group(pgid, 0) || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// True if `fd` is an open descriptor.
fn is_open(fd: i32) -> bool {
    // SAFETY: fcntl(F_GETFD) only asks whether the descriptor is open.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// True if `fd` turns readable within `timeout_ns` (0: now).
fn readable(fd: RawFd, timeout_ns: u64) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: ppoll(2) on one pollfd we own; the mask is null.
    unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) == 1 && p.revents != 0 }
}

/// The enforcer's state: what was sent already.
struct State {
    pgid: i32,
    /// `run`, whose descendants outside the group are signalled too (`escaped`).
    run: Option<i32>,
    grace_ns: u64,
    input: Input,
    termed: bool,
    killed: bool,
}

impl State {
    /// `sig` to the command's group and to what it started outside it, under `run`
    /// (while this process's parent is still that `run`: after its death the pid could
    /// name another process's tree).
    fn signal(&self, sig: i32) {
        group(self.pgid, sig);
        // SAFETY: getppid and getpid cannot fail.
        let (parent, me) = unsafe { (libc::getppid(), libc::getpid()) };
        if let Some(run) = self.run
            && parent == run
        {
            super::escaped::signal_outside_of(run, self.pgid, &[me], sig);
        }
    }

    /// Signals what the stop timer says is due.
    fn act(&mut self, timers: &StopTimers) {
        let look = timers.look();
        if !self.killed && look.kill_in() == 0 {
            self.killed = true;
            self.signal(libc::SIGKILL);
            return;
        }
        if self.killed || self.termed || look.room() {
            return;
        }
        if !self.input.closed {
            self.input.read();
        }
        // A live run woke on the same timer: give it a moment to say `T` first.
        let lag = TERM_LAG.min(self.grace_ns / 4);
        if !self.input.termed && !self.input.closed && readable(0, lag) {
            self.input.read();
        }
        self.termed = true;
        if !self.input.termed {
            self.signal(libc::SIGTERM);
        }
    }
}

/// Waits for the command's `P<pid>` line; None when the pipe closes without one (run
/// gave up or died before any command announced itself). Each pass sleeps until the
/// pipe is readable.
fn announced(input: &mut Input) -> Option<i32> {
    loop {
        input.read();
        if input.pid.is_some() {
            return input.pid;
        }
        if input.closed {
            return None;
        }
        let mut p = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll(2) on one pollfd we own, no timeout.
        unsafe { libc::poll(&mut p, 1, -1) };
    }
}

/// `electctl __enforce ...`: the enforcer's main; returns the exit code.
pub fn main(args: &[String]) -> i32 {
    let Some(a) = parse(args) else {
        return 2;
    };
    // SAFETY: ignoring signals a terminal or a hang-up would send; fcntl on our stdin.
    unsafe {
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        let fl = libc::fcntl(0, libc::F_GETFL);
        libc::fcntl(0, libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    // The stop timer run handed on as fd 4 (checked open), with an alarm of this
    // process's own for the SIGKILL instant.
    let timers = if is_open(TIMER_FD) {
        // SAFETY: fd 4 is open and this process owns its copy.
        StopTimers::adopt(unsafe { OwnedFd::from_raw_fd(TIMER_FD) }).ok()
    } else {
        None
    };
    let Some(timers) = timers else {
        // Nothing to sleep on: exit before any command announces itself, so its start
        // fails (its write finds no reader).
        return 1;
    };
    let mut input = Input::default();
    let Some(pgid) = announced(&mut input) else {
        return 0;
    };
    // The command's leader's exit, if the kernel has pidfds (opened here: the command
    // is run's child, not ours, but a pidfd needs no parent).
    let pidfd = super::command::pidfd(pgid as u32);
    let pidfd_raw = pidfd.as_ref().map(AsRawFd::as_raw_fd);
    let mut s = State {
        pgid,
        run: a.run,
        grace_ns: a.grace_ns,
        input,
        termed: false,
        killed: false,
    };
    // Bounded by the command's life: each pass sleeps until a timer fires or the
    // command's leader exits (or TICK without a pidfd, or once SIGKILL is sent).
    loop {
        s.act(&timers);
        if pidfd_raw.is_some_and(|fd| readable(fd, 0)) {
            // Nothing of the group may outlive its leader (as run does on a reap).
            s.signal(libc::SIGKILL);
            return 0;
        }
        if !group_exists(s.pgid) {
            return 0;
        }
        wait(&s, pidfd_raw, &timers);
    }
}

/// Sleeps until the stop timer fires (SIGTERM not sent yet), or its SIGKILL instant
/// comes (the alarm once it fired), or the command's leader exits. A fired stop timer
/// is never read (run polls it too) and not watched once acted on.
fn wait(s: &State, pidfd: Option<i32>, timers: &StopTimers) {
    let mut fds = Vec::with_capacity(2);
    let mut watch = |fd: RawFd| {
        fds.push(libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
    };
    if !s.killed {
        watch(if s.termed {
            timers.kill_fd()
        } else {
            timers.fd()
        });
    }
    if let Some(fd) = pidfd {
        watch(fd);
    }
    // Without a pidfd the group is checked every TICK, and after the SIGKILL until it
    // is gone; between SIGTERM and SIGKILL every GRACE_TICK, so that an arming that
    // moves the SIGKILL instant earlier is seen though the alarm sleeps on the old one
    // (review of the one stop timer: the daemon's lease end never moves earlier, but S5
    // should not rest on that); otherwise the wait is unbounded but for the timers.
    let timeout = if s.termed && !s.killed {
        GRACE_TICK.as_millis() as i32
    } else if pidfd.is_none() || s.killed {
        TICK.as_millis() as i32
    } else {
        -1
    };
    // SAFETY: poll(2) on a valid array of pollfd.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let a = parse(&v(&["5", "4242"])).unwrap();
        assert_eq!((a.grace_ns, a.run), (5, Some(4242)));
        assert_eq!(parse(&v(&["5", "0"])).unwrap().run, None, "a test's");
        assert!(parse(&v(&["x", "4242"])).is_none());
        assert!(parse(&v(&["5"])).is_none(), "no run");
        assert!(parse(&v(&["5", "1"])).is_none(), "init is never its run");
        assert!(parse(&v(&["5", "-3"])).is_none());
        assert!(parse(&v(&[])).is_none());
        assert!(parse(&v(&["123", "5", "pidfd"])).is_none(), "the old form");
    }

    #[test]
    fn the_announcement_is_read_back() {
        for pid in [2, 9, 10, 12345, i32::MAX] {
            let mut out = [0u8; 24];
            let n = announce(pid, &mut out);
            assert_eq!(&out[..n], format!("P{pid}\n").as_bytes());
            let mut i = Input::default();
            out[..n].iter().for_each(|&b| i.byte(b));
            assert_eq!(i.pid, Some(pid));
            assert!(!i.termed);
        }
    }

    #[test]
    fn the_pipe_input_is_parsed_strictly() {
        let feed = |s: &[u8]| {
            let mut i = Input::default();
            s.iter().for_each(|&b| i.byte(b));
            (i.pid, i.termed)
        };
        assert_eq!(feed(b"P77\nT\n"), (Some(77), true));
        assert_eq!(feed(b"T\nP77\n"), (Some(77), true));
        assert_eq!(feed(b"P77"), (None, false), "no line end yet");
        assert_eq!(feed(b"P1\n"), (None, false), "pid 1 is no group of ours");
        assert_eq!(feed(b"P0\nP-5\nPx\nP\n"), (None, false));
        assert_eq!(
            feed(b"P77\nP88\n"),
            (Some(77), false),
            "the first announcement holds"
        );
        assert_eq!(
            feed(b"TT\nXT\n"),
            (None, false),
            "T only as a line of its own"
        );
        let long = [b'9'; 100];
        let mut v = b"P".to_vec();
        v.extend_from_slice(&long);
        v.extend_from_slice(b"\nP42\n");
        assert_eq!(feed(&v), (Some(42), false), "an overlong line is ignored");
        let mut v = b"P12".to_vec();
        v.extend_from_slice(&[b' '; 40]);
        v.extend_from_slice(b"\nT\n");
        assert_eq!(feed(&v), (None, true), "whole, not cut to a valid prefix");
    }
}

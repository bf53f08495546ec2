//! The lease enforcer: a process of its own that stops `electctl run`'s command by the
//! lease end whatever happens to `run` (SPEC sections 8 S5 and 11; docs/PROTOCOL.md,
//! "S5 through stalls").
//!
//! `run` starts it beside each command as `electctl __enforce PGID GRACE_NS MARGIN_NS
//! DEADLINE_NS pidfd timerfd` (a fresh exec of the same binary: nothing of `run`'s
//! state, threads or locks is inherited), in a process group of its own, so `kill
//! -STOP` of run's pid, a debugger on run, or a terminal's ^Z or ^C do not reach it.
//! Its stdin is a pipe from `run`, fd 3 the command's pidfd, fd 4 a CLOCK_BOOTTIME
//! timerfd that `run` made and shares. It only sleeps on that timer until the next
//! thing it must do:
//!
//! - SIGTERM to the command's process group when `grace + margin` is left of the
//!   deadline (5 ms later, so a live `run`'s own comes first; none if `run` said it
//!   sent one), SIGKILL when `margin` is left;
//! - a line `D NS` from `run` moves the deadline (each lease renewal), `T` says run sent
//!   SIGTERM itself; the pipe is read only when the timer fires, just before the
//!   enforcer acts, so a renewal costs it no wakeup (issue 25): what it acts on is the
//!   newest deadline `run` handed on by then, exactly as when it read each line at
//!   once, and a line that comes later could only have moved the deadline later;
//! - with each `D NS` `run` also re-arms the shared timer for that deadline's SIGTERM
//!   (after the line is written), so the timer fires only when no renewal came in
//!   time: a lease renewed every heartbeat never wakes the enforcer. The timer is only
//!   ever armed for a lease end the daemon told (by `run` or by the enforcer itself),
//!   so a stopped or dead `run` leaves it at the last one;
//! - when the pipe closes (run exited or was killed) it keeps the last deadline it was
//!   given: nothing can extend it any more;
//! - when the command's leader exits, it SIGKILLs what is left of the group and exits;
//!   it also exits once the group is empty.
//!
//! It writes nothing (stdout and stderr are /dev/null): no log sink can block it.

use std::io::ErrorKind;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The hidden `electctl` subcommand that runs the enforcer.
pub const SUBCOMMAND: &str = "__enforce";
/// The descriptor the command's pidfd is handed on as.
const PIDFD: i32 = 3;
/// How much later than `run` the enforcer sends its SIGTERM (ns, at most a quarter of
/// the grace).
const TERM_LAG: u64 = 5_000_000;
/// How often the group is checked when no pidfd tells of the leader's exit.
const TICK: Duration = Duration::from_millis(50);

/// The descriptor the shared timer is handed on as.
const TIMERFD: i32 = 4;

/// `run`'s handle on its enforcer.
pub struct Enforcer {
    child: Child,
    /// The write end of the deadline pipe (non-blocking); None once closed.
    pipe: Option<OwnedFd>,
    /// A pidfd of the enforcer: readable once it exits.
    exit_fd: Option<OwnedFd>,
    /// The deadline last handed on (boot clock ns).
    sent_ns: u64,
    /// The timer the enforcer sleeps on, shared: re-armed with each deadline.
    timer: OwnedFd,
    grace_ns: u64,
    margin_ns: u64,
}

/// The boot-clock instant of the enforcer's SIGTERM for `deadline_ns`: `grace + margin`
/// before it, a little later than a live `run`'s own (which says `T` first), so the
/// command does not get two.
fn term_at(deadline_ns: u64, grace_ns: u64, margin_ns: u64) -> u64 {
    let lag = TERM_LAG.min(grace_ns / 4);
    deadline_ns
        .saturating_sub(margin_ns)
        .saturating_sub(grace_ns)
        + lag
}

/// Bytes of lines waiting in the pipe at which `run` wakes the enforcer to read them.
/// Each renewal re-arms the shared timer later, so a leader's enforcer never wakes by
/// itself: without this its pipe filled (64 KiB: about 3,850 renewals, an hour at
/// heartbeat 1 s; 200 with a one-page pipe), every later line was lost, and when the
/// renewals stopped the enforcer acted on a deadline an hour old: SIGKILL at once,
/// without the command's grace (found by the review of issue 25's second round).
const DRAIN_AT: usize = 1024;

/// Bytes waiting to be read in the pipe whose end `fd` is (FIONREAD works on either).
fn pending(fd: &OwnedFd) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int for a pipe descriptor we own.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut n) };
    if r == 0 {
        usize::try_from(n).unwrap_or(0)
    } else {
        0
    }
}

/// Where `run` arms the shared timer after handing on `deadline_ns` with `waiting`
/// bytes in the pipe: at the enforcer's SIGTERM for it, or at once (1 ns, long past)
/// when the lines waiting must be read; the enforcer then reads them all and arms the
/// timer for the newest deadline itself.
fn rearm_at(waiting: usize, deadline_ns: u64, grace_ns: u64, margin_ns: u64) -> u64 {
    if waiting >= DRAIN_AT {
        1
    } else {
        term_at(deadline_ns, grace_ns, margin_ns)
    }
}

/// Hands a renewal's lease end `deadline_ns` to an enforcer: the line on its pipe (the
/// write end `pipe`, non-blocking), then the shared `timer` re-armed for its SIGTERM, or
/// at once when lines are piling up (`DRAIN_AT`). `run` does this for every renewal
/// (`Enforcer::deadline`); public so that tests drive a real enforcer the same way.
pub fn hand_on(pipe: &OwnedFd, timer: &OwnedFd, deadline_ns: u64, grace_ns: u64, margin_ns: u64) {
    let line = format!("D {deadline_ns}\n");
    // SAFETY: a write of a few bytes (atomic in a pipe) to a non-blocking end we hold.
    // A full pipe keeps the older deadline there: the enforcer then stops the command
    // earlier, never later.
    unsafe { libc::write(pipe.as_raw_fd(), line.as_ptr().cast(), line.len()) };
    let at = rearm_at(pending(pipe), deadline_ns, grace_ns, margin_ns);
    arm(timer, Some(at));
}

/// A CLOCK_BOOTTIME timerfd (close-on-exec, non-blocking).
fn boot_timer() -> std::io::Result<OwnedFd> {
    // SAFETY: timerfd_create returns a new descriptor or -1.
    let fd = unsafe {
        libc::timerfd_create(libc::CLOCK_BOOTTIME, libc::TFD_CLOEXEC | libc::TFD_NONBLOCK)
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
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

impl Enforcer {
    /// Starts the enforcer of the command whose process group is `pgid` (its pidfd
    /// `cmd_pidfd`, if one could be opened), with the lease end `deadline_ns`.
    pub fn start(
        pgid: u32,
        cmd_pidfd: Option<&OwnedFd>,
        grace: Duration,
        margin: Duration,
        deadline_ns: u64,
    ) -> std::io::Result<Enforcer> {
        let (r, w) = nonblocking_pipe()?;
        let (grace_ns, margin_ns) = (
            crate::time::duration_nanos(grace),
            crate::time::duration_nanos(margin),
        );
        let timer = boot_timer()?;
        arm(&timer, Some(term_at(deadline_ns, grace_ns, margin_ns)));
        let mut cmd = Command::new("/proc/self/exe");
        cmd.arg0("electctl-enforce")
            .arg(SUBCOMMAND)
            .arg(pgid.to_string())
            .arg(crate::time::duration_nanos(grace).to_string())
            .arg(crate::time::duration_nanos(margin).to_string())
            .arg(deadline_ns.to_string())
            .arg(if cmd_pidfd.is_some() { "pidfd" } else { "-" })
            .arg("timerfd")
            .stdin(Stdio::from(r))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let pid_raw = cmd_pidfd.map(AsRawFd::as_raw_fd);
        let timer_raw = timer.as_raw_fd();
        // SAFETY: dup2 and fcntl are async-signal-safe; they only touch the
        // child's descriptor table. dup2 clears close-on-exec on fds 3 and 4.
        unsafe {
            cmd.pre_exec(move || {
                // The timer out of fd 3's way first, the pidfd out of fd 4's. The copy
                // goes above fd 4 and closes on exec, so only fd 4 reaches the enforcer
                // (a plain dup could land on 5 and leak there).
                let t = if timer_raw == PIDFD {
                    libc::fcntl(timer_raw, libc::F_DUPFD_CLOEXEC, TIMERFD + 1)
                } else {
                    timer_raw
                };
                if let Some(p) = pid_raw {
                    if p == PIDFD {
                        libc::fcntl(PIDFD, libc::F_SETFD, 0);
                    } else if libc::dup2(p, PIDFD) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                if t == TIMERFD {
                    libc::fcntl(TIMERFD, libc::F_SETFD, 0);
                } else if t < 0 || libc::dup2(t, TIMERFD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        let exit_fd = super::command::pidfd(child.id());
        Ok(Enforcer {
            child,
            pipe: Some(w),
            exit_fd,
            sent_ns: deadline_ns,
            timer,
            grace_ns,
            margin_ns,
        })
    }

    fn send(&mut self, msg: &str) {
        let Some(w) = &self.pipe else { return };
        // SAFETY: a write of a few bytes (atomic in a pipe) to our non-blocking end. A
        // full pipe keeps the older deadline there: the enforcer then stops the
        // command earlier, never later.
        unsafe { libc::write(w.as_raw_fd(), msg.as_ptr().cast(), msg.len()) };
    }

    /// Hands on a new lease end (a renewal): the line first, then the shared timer
    /// re-armed for its SIGTERM, so the enforcer that wakes finds the line (it wakes
    /// only if no renewal came in time). Nothing is done when it is unchanged.
    pub fn deadline(&mut self, deadline_ns: u64) {
        if deadline_ns != self.sent_ns {
            self.sent_ns = deadline_ns;
            match &self.pipe {
                Some(w) => hand_on(w, &self.timer, deadline_ns, self.grace_ns, self.margin_ns),
                None => arm(
                    &self.timer,
                    Some(term_at(deadline_ns, self.grace_ns, self.margin_ns)),
                ),
            }
        }
    }

    /// Says that run sends the command SIGTERM itself now (call before sending it).
    pub fn terminating(&mut self) {
        self.send("T\n");
    }

    /// The descriptor that turns readable when the enforcer exits.
    pub fn exit_fd(&self) -> Option<&OwnedFd> {
        self.exit_fd.as_ref()
    }

    /// True once the enforcer has exited (it is reaped then).
    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// The command is gone: closes the pipe and reaps the enforcer if it has exited;
    /// Some(self) while it has not (it exits at once, having seen the command go).
    pub fn retire(mut self) -> Option<Enforcer> {
        self.pipe = None;
        (!self.exited()).then_some(self)
    }
}

/// What the enforcer was told on its command line.
struct Args {
    pgid: i32,
    grace_ns: u64,
    margin_ns: u64,
    deadline_ns: u64,
    pidfd: bool,
    /// fd 4 is `run`'s shared timer (else the enforcer makes its own).
    timerfd: bool,
}

fn parse(args: &[String]) -> Option<Args> {
    let (pgid, grace, margin, deadline, pidfd, timerfd) = match args {
        [a, b, c, d, e] => (a, b, c, d, e, false),
        [a, b, c, d, e, t] if t == "timerfd" => (a, b, c, d, e, true),
        _ => return None,
    };
    Some(Args {
        pgid: pgid.parse().ok().filter(|p| *p > 1)?,
        grace_ns: grace.parse().ok()?,
        margin_ns: margin.parse().ok()?,
        deadline_ns: deadline.parse().ok()?,
        pidfd: pidfd == "pidfd",
        timerfd,
    })
}

/// The enforcer's state: the deadline and what was sent already.
struct State {
    a: Args,
    termed: bool,
    killed: bool,
    /// run's pipe is still open (it may move the deadline).
    open: bool,
    inbuf: Vec<u8>,
}

impl State {
    /// Reads run's messages; the newest deadline wins.
    fn read(&mut self) {
        let mut buf = [0u8; 1024];
        // Bounded: a full pipe holds 64 KiB; run writes a few bytes per renewal.
        for _ in 0..256 {
            // SAFETY: read(2) into a local buffer from our non-blocking stdin.
            let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
            if n == 0 {
                self.open = false;
                break;
            }
            if n < 0 {
                let e = std::io::Error::last_os_error();
                match e.kind() {
                    ErrorKind::Interrupted => continue,
                    ErrorKind::WouldBlock => {}
                    _ => self.open = false,
                }
                break;
            }
            self.inbuf.extend_from_slice(&buf[..n as usize]);
            if (n as usize) < buf.len() {
                // All there was: more (or the close) wakes poll again.
                break;
            }
        }
        while let Some(p) = self.inbuf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.inbuf.drain(..=p).collect();
            match line.as_slice() {
                [b'T', b'\n'] => self.termed = true,
                [b'D', b' ', rest @ ..] => {
                    if let Some(d) = std::str::from_utf8(rest)
                        .ok()
                        .and_then(|s| s.trim().parse().ok())
                    {
                        self.a.deadline_ns = d;
                    }
                }
                _ => {}
            }
        }
        if self.inbuf.len() > 64 {
            self.inbuf.clear();
        }
    }

    /// True when the deadline known says a signal is due at `now_ns`: run's pipe is
    /// read first (a newer deadline may be there although the timer, which `run`
    /// re-arms, has not fired; without a pidfd the enforcer also wakes every TICK).
    fn due(&self, now_ns: u64) -> bool {
        let kill_at = self.a.deadline_ns.saturating_sub(self.a.margin_ns);
        let term_at = term_at(self.a.deadline_ns, self.a.grace_ns, self.a.margin_ns);
        !self.killed && now_ns >= if self.termed { kill_at } else { term_at }
    }

    /// Signals what is due at `now_ns`; returns the next boot-clock instant to act at.
    fn act(&mut self, now_ns: u64) -> Option<u64> {
        let kill_at = self.a.deadline_ns.saturating_sub(self.a.margin_ns);
        let term_at = term_at(self.a.deadline_ns, self.a.grace_ns, self.a.margin_ns);
        if now_ns >= kill_at {
            self.killed = true;
            group(self.a.pgid, libc::SIGKILL);
        } else if now_ns >= term_at && !self.termed {
            self.termed = true;
            group(self.a.pgid, libc::SIGTERM);
        }
        if self.killed {
            None
        } else if self.termed {
            Some(kill_at)
        } else {
            Some(term_at)
        }
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

/// Arms `tfd` for the boot-clock instant `at_ns` (absolute), or disarms it. Public so
/// that tests arm a shared timer as `run` does.
pub fn arm(tfd: &OwnedFd, at_ns: Option<u64>) {
    let at = at_ns.map_or(0, |a| a.max(1));
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (at / 1_000_000_000) as libc::time_t,
            tv_nsec: (at % 1_000_000_000) as libc::c_long,
        },
    };
    // SAFETY: timerfd_settime on our timerfd with a valid itimerspec.
    unsafe {
        libc::timerfd_settime(
            tfd.as_raw_fd(),
            libc::TFD_TIMER_ABSTIME,
            &spec,
            std::ptr::null_mut(),
        )
    };
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
    let tfd = if a.timerfd && is_open(TIMERFD) {
        // SAFETY: fd 4 is the timer run handed on (checked open); this process owns
        // its copy.
        unsafe { OwnedFd::from_raw_fd(TIMERFD) }
    } else {
        match boot_timer() {
            Ok(t) => t,
            Err(_) => {
                // Nothing to sleep on: the command may not outlive a lease nobody
                // enforces.
                group(a.pgid, libc::SIGKILL);
                return 1;
            }
        }
    };
    let pidfd = a.pidfd.then_some(PIDFD);
    let mut s = State {
        a,
        termed: false,
        killed: false,
        open: true,
        inbuf: Vec::new(),
    };
    // What the last poll found ready (None: look at everything). run's pipe is read
    // only when the timer fired or the deadline known says a signal is due, just
    // before acting on it (issue 25: a renewal wakes this process no more); the
    // command's exit is asked only when its pidfd said so (poll is level-triggered,
    // so nothing that turns ready later is missed).
    let mut woke: Option<Woke> = None;
    loop {
        let now = crate::time::boot_now().as_nanos();
        if s.open && (woke.is_none_or(|w| w.timer) || s.due(now)) {
            s.read();
        }
        let next = s.act(now);
        let leader_gone = match woke {
            Some(w) => w.pidfd,
            None => pidfd.is_some_and(|fd| readable(fd, 0)),
        };
        if leader_gone {
            // Nothing of the group may outlive its leader (as run does on a reap).
            group(s.a.pgid, libc::SIGKILL);
            return 0;
        }
        if !group_exists(s.a.pgid) {
            return 0;
        }
        arm(&tfd, next);
        woke = wait(&s, pidfd, &tfd);
    }
}

/// Which descriptors a poll of [`wait`] found ready.
#[derive(Clone, Copy, Debug)]
struct Woke {
    /// The timer fired: a signal may be due (read run's pipe first).
    timer: bool,
    /// The command's leader exited.
    pidfd: bool,
}

/// True if `fd` is an open descriptor.
fn is_open(fd: i32) -> bool {
    // SAFETY: fcntl(F_GETFD) only asks whether the descriptor is open.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

fn readable(fd: i32, timeout_ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) on one pollfd we own.
    unsafe { libc::poll(&mut p, 1, timeout_ms) == 1 && p.revents != 0 }
}

/// Sleeps until the timer fires or the command's leader exits (run's pipe is not
/// watched: it is read when the timer fires); says which were ready (None when poll
/// failed: look at everything).
fn wait(s: &State, pidfd: Option<i32>, tfd: &OwnedFd) -> Option<Woke> {
    let mut fds = vec![libc::pollfd {
        fd: tfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    let pidfd_at = pidfd.map(|fd| {
        fds.push(libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        fds.len() - 1
    });
    // Without a pidfd the group is checked every TICK; with one the wait is unbounded
    // but for the timer (armed whenever a signal is still due).
    let timeout = if pidfd.is_none() || s.killed {
        TICK.as_millis() as i32
    } else {
        -1
    };
    // SAFETY: poll(2) on a valid array of pollfd.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
    let timer = fds[0].revents != 0;
    if n < 0 || timer {
        let mut b = [0u8; 8];
        // SAFETY: reading the expiry count from our non-blocking timerfd into a local.
        unsafe { libc::read(tfd.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) };
    }
    let ready = |i: Option<usize>| i.is_some_and(|i| fds[i].revents != 0);
    (n >= 0).then(|| Woke {
        timer,
        pidfd: ready(pidfd_at),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(deadline_ns: u64) -> State {
        State {
            a: Args {
                pgid: 999_999_999,
                grace_ns: 100,
                margin_ns: 10,
                deadline_ns,
                pidfd: false,
                timerfd: false,
            },
            termed: false,
            killed: false,
            open: true,
            inbuf: Vec::new(),
        }
    }

    #[test]
    fn the_next_action_follows_the_deadline() {
        let mut s = state(1000);
        // SIGTERM at deadline - margin - grace, plus a quarter of the grace at most.
        assert_eq!(s.act(0), Some(915));
        assert!(!s.termed);
        assert_eq!(s.act(914), Some(915));
        assert!(!s.termed);
        assert_eq!(s.act(915), Some(990));
        assert!(s.termed && !s.killed);
        assert_eq!(s.act(990), None);
        assert!(s.killed);
        // run's own SIGTERM: none from here, SIGKILL at the margin.
        let mut s = state(1000);
        s.termed = true;
        assert_eq!(s.act(0), Some(990));
    }

    /// The pipe never fills: once `DRAIN_AT` bytes wait, `run` arms the timer at once
    /// so the enforcer reads them; below, at the SIGTERM for the deadline. And FIONREAD
    /// counts the bytes from the write end, which is the end `run` holds.
    #[test]
    fn run_wakes_the_enforcer_before_its_pipe_fills() {
        let (r, w) = nonblocking_pipe().unwrap();
        assert_eq!(pending(&w), 0);
        let line = b"D 1234567890123456789\n";
        let mut written = 0;
        while written < DRAIN_AT {
            // SAFETY: a write of our buffer to our pipe.
            let n = unsafe { libc::write(w.as_raw_fd(), line.as_ptr().cast(), line.len()) };
            assert_eq!(n, line.len() as isize);
            written += line.len();
        }
        assert_eq!(pending(&w), written, "FIONREAD on the write end");
        assert_eq!(pending(&r), written);
        assert_eq!(rearm_at(written, 10_000, 100, 10), 1, "at once");
        assert_eq!(
            rearm_at(DRAIN_AT - 1, 10_000, 100, 10),
            term_at(10_000, 100, 10)
        );
        assert_eq!(rearm_at(0, 10_000, 100, 10), 9_915);
        // A whole pipe of lines is far more than DRAIN_AT: one page (the least a pipe
        // can be) holds 4096 bytes.
        const { assert!(DRAIN_AT * 2 <= 4096) };
    }

    #[test]
    fn arguments_parse() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let a = parse(&v(&["123", "5", "6", "7", "pidfd"])).unwrap();
        assert_eq!(
            (a.pgid, a.grace_ns, a.margin_ns, a.deadline_ns),
            (123, 5, 6, 7)
        );
        assert!(a.pidfd);
        assert!(parse(&v(&["1", "5", "6", "7", "-"])).is_none(), "pgid 1");
        assert!(parse(&v(&["0", "5", "6", "7", "-"])).is_none());
        assert!(parse(&v(&["x", "5", "6", "7", "-"])).is_none());
        assert!(parse(&v(&["5", "6", "7"])).is_none());
        let a = parse(&v(&["123", "5", "6", "7", "pidfd", "timerfd"])).unwrap();
        assert!(a.pidfd && a.timerfd);
        assert!(!parse(&v(&["123", "5", "6", "7", "-"])).unwrap().timerfd);
        assert!(parse(&v(&["123", "5", "6", "7", "-", "x"])).is_none());
    }
}

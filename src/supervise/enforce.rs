//! The lease enforcer: a process of its own that stops `electctl run`'s command by the
//! lease end whatever happens to `run` (SPEC sections 8 S5 and 11; docs/PROTOCOL.md,
//! "S5 through stalls").
//!
//! `run` starts it beside each command as `electctl __enforce PGID GRACE_NS pidfd` (a
//! fresh exec of the same binary: nothing of `run`'s state, threads or locks is
//! inherited), in a process group of its own, so `kill -STOP` of run's pid, a debugger
//! on run, or a terminal's ^Z or ^C do not reach it. Its stdin is a pipe from `run`,
//! fd 3 the command's pidfd, fd 4 `run`'s stop timer (`supervise/timers.rs`): a
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
//! - when the command's leader exits, it SIGKILLs what is left of the group and exits;
//!   it also exits once the group is empty.
//!
//! It writes nothing (stdout and stderr are /dev/null): no log sink can block it.

use super::timers::StopTimers;
use std::io::ErrorKind;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The hidden `electctl` subcommand that runs the enforcer.
pub const SUBCOMMAND: &str = "__enforce";
/// The descriptor the command's pidfd is handed on as.
const PIDFD: i32 = 3;
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
    child: Child,
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

impl Enforcer {
    /// Starts the enforcer of the command whose process group is `pgid` (its pidfd
    /// `cmd_pidfd`, if one could be opened), sleeping on `timers`' stop timer.
    pub fn start(
        pgid: u32,
        cmd_pidfd: Option<&OwnedFd>,
        grace: Duration,
        timers: &StopTimers,
    ) -> std::io::Result<Enforcer> {
        Self::start_with(Path::new("/proc/self/exe"), pgid, cmd_pidfd, grace, timers)
    }

    /// As [`Enforcer::start`], with the `electctl` binary `exe` (tests start the real one).
    pub fn start_with(
        exe: &Path,
        pgid: u32,
        cmd_pidfd: Option<&OwnedFd>,
        grace: Duration,
        timers: &StopTimers,
    ) -> std::io::Result<Enforcer> {
        let (r, w) = nonblocking_pipe()?;
        let mut cmd = Command::new(exe);
        cmd.arg0("electctl-enforce")
            .arg(SUBCOMMAND)
            .arg(pgid.to_string())
            .arg(crate::time::duration_nanos(grace).to_string())
            .arg(if cmd_pidfd.is_some() { "pidfd" } else { "-" })
            .stdin(Stdio::from(r))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let srcs = [cmd_pidfd.map_or(-1, AsRawFd::as_raw_fd), timers.fd()];
        // SAFETY: fcntl and dup2 are async-signal-safe; they only touch the child's
        // descriptor table. Each source is first copied above fd 9 (close-on-exec), so
        // no dup2 onto 3 or 4 can clobber a source not yet placed; dup2 then clears
        // close-on-exec on 3 and 4 only.
        unsafe {
            cmd.pre_exec(move || {
                let mut high = [-1; 2];
                for (h, &s) in high.iter_mut().zip(&srcs) {
                    if s >= 0 {
                        *h = libc::fcntl(s, libc::F_DUPFD_CLOEXEC, 10);
                        if *h < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                }
                for (&h, to) in high.iter().zip([PIDFD, TIMER_FD]) {
                    if h >= 0 && libc::dup2(h, to) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
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
        })
    }

    /// Says that run sends the command SIGTERM itself now (call before sending it).
    pub fn terminating(&mut self) {
        let Some(w) = &self.pipe else { return };
        // SAFETY: a write of two bytes (atomic in a pipe) to our non-blocking end; the
        // pipe carries nothing else, so it never fills.
        unsafe { libc::write(w.as_raw_fd(), b"T\n".as_ptr().cast(), 2) };
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

    /// The enforcer's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }
}

/// What the enforcer was told on its command line.
struct Args {
    pgid: i32,
    grace_ns: u64,
    pidfd: bool,
}

fn parse(args: &[String]) -> Option<Args> {
    let [pgid, grace, pidfd] = args else {
        return None;
    };
    Some(Args {
        pgid: pgid.parse().ok().filter(|p| *p > 1)?,
        grace_ns: grace.parse().ok()?,
        pidfd: pidfd == "pidfd",
    })
}

/// Reads run's pipe (stdin, non-blocking); true once `T` was read. Bounded: the pipe
/// carries one `T` per command.
fn read_term(open: &mut bool) -> bool {
    let mut buf = [0u8; 64];
    let mut termed = false;
    for _ in 0..16 {
        // SAFETY: read(2) into a local buffer from our non-blocking stdin.
        let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        if n == 0 {
            *open = false;
            break;
        }
        if n < 0 {
            match std::io::Error::last_os_error().kind() {
                ErrorKind::Interrupted => continue,
                ErrorKind::WouldBlock => {}
                _ => *open = false,
            }
            break;
        }
        termed |= buf[..n as usize].contains(&b'T');
    }
    termed
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
    a: Args,
    termed: bool,
    killed: bool,
    /// run's pipe is still open.
    open: bool,
}

impl State {
    /// Signals what the stop timer says is due.
    fn act(&mut self, timers: &StopTimers) {
        let look = timers.look();
        if !self.killed && look.kill_in() == 0 {
            self.killed = true;
            group(self.a.pgid, libc::SIGKILL);
            return;
        }
        if self.killed || self.termed || look.room() {
            return;
        }
        if self.open && read_term(&mut self.open) {
            self.termed = true;
            return;
        }
        // A live run woke on the same timer: give it a moment to say `T` first.
        let lag = TERM_LAG.min(self.a.grace_ns / 4);
        if self.open && readable(0, lag) && read_term(&mut self.open) {
            self.termed = true;
            return;
        }
        self.termed = true;
        group(self.a.pgid, libc::SIGTERM);
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
        // Nothing to sleep on: the command may not outlive a lease nobody enforces.
        group(a.pgid, libc::SIGKILL);
        return 1;
    };
    let pidfd = a.pidfd.then_some(PIDFD);
    let mut s = State {
        a,
        termed: false,
        killed: false,
        open: true,
    };
    // Bounded by the command's life: each pass sleeps until a timer fires or the
    // command's leader exits (or TICK without a pidfd, or once SIGKILL is sent).
    loop {
        s.act(&timers);
        if pidfd.is_some_and(|fd| readable(fd, 0)) {
            // Nothing of the group may outlive its leader (as run does on a reap).
            group(s.a.pgid, libc::SIGKILL);
            return 0;
        }
        if !group_exists(s.a.pgid) {
            return 0;
        }
        wait(&s, pidfd, &timers);
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
        let a = parse(&v(&["123", "5", "pidfd"])).unwrap();
        assert_eq!((a.pgid, a.grace_ns), (123, 5));
        assert!(a.pidfd);
        assert!(!parse(&v(&["123", "5", "-"])).unwrap().pidfd);
        assert!(parse(&v(&["1", "5", "-"])).is_none(), "pgid 1");
        assert!(parse(&v(&["0", "5", "-"])).is_none());
        assert!(parse(&v(&["x", "5", "-"])).is_none());
        assert!(parse(&v(&["5", "6"])).is_none());
        assert!(parse(&v(&["123", "5", "6", "7", "pidfd"])).is_none());
    }
}

//! One check process (SPEC section 13): started with no shell, in its own process
//! group, in the clean environment hooks get ([`crate::hooks::clean_env`]) plus what the
//! caller adds. A check still running at its timeout is killed with its whole group
//! (SIGKILL to -pgid) and reaped; so is whatever a check that exited leaves behind in
//! its group. Its stdout and stderr share one pipe that is read while it runs (a chatty
//! check never blocks on a full pipe); the first line of the first [`OUTPUT_BYTES`]
//! bytes is kept for the logs.
//!
//! Exit status 0 is a success. Everything else is a failure, never a success: a
//! non-zero exit (126 and 127, the shell's "cannot execute" and "not found", are
//! counted as `exec`), a command that cannot be started, a timeout, death by a signal.

use super::outcome::{Failure, Outcome};
use crate::hooks::clean_env;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Output bytes kept per check run; the rest is read and discarded.
pub const OUTPUT_BYTES: usize = 200;
/// How often a child is looked at when no pidfd could be opened.
const CHILD_TICK: Duration = Duration::from_millis(5);

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
}

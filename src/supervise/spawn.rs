//! Starting the command without waiting for its exec (the twenty-third round's review,
//! tests/adv23.rs).
//!
//! std's `Command::spawn` returns only once the child has exec'd (or failed to): it
//! blocks on a close-on-exec pipe. Since the command's process hands itself over to
//! its enforcer before its exec ([`Handover`]), a process held there (a debugger, a
//! SIGSTOP, a starved machine) held `run` too: it answered no signal, no leadership
//! line and no `released`, and with the process stopped before its `P` line, for
//! ever, while the daemon led with no processor.
//!
//! So `run` forks the command itself and watches that pipe in its ppoll beside
//! everything else: a start in progress is one more state of its event loop
//! ([`Starting`]). The pipe turns readable at the exec (end of file) or when the
//! process gives up (four bytes: the errno, then it exits). Everything the child
//! needs is made before the fork (argv, envp, the paths to try), so between fork and
//! exec it calls only async-signal-safe functions and allocates nothing.
//!
//! In the child, in order: every handled signal back to its default (a SIGTERM sent
//! to the new group from here on ends it, and never runs `run`'s handler in this copy
//! of `run`), the signal mask emptied (`run` blocks every signal around the fork, so
//! none is handled before that), its own process group (the parent sets it too, so
//! that a group signal sent right after the fork reaches it), the hand-over to the
//! enforcer, SIGPIPE back to default (std ignores it in `run`), and the exec of each
//! path in turn, as execvp(3) does (a file without `#!` with `/bin/sh`). The enforcer
//! is started the same way ([`Setup::Enforcer`]), and the command only once it has
//! exec'd (review 24: std's spawn of the enforcer held `run` the same way).

use super::enforce::{Handover, default_handlers};
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// A command ready to fork: everything the child needs, made beforehand.
pub(super) struct Prepared {
    /// The paths to exec, in order (one when the program names a slash).
    paths: Vec<CString>,
    /// Keeps the strings `argv` points into.
    _args: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    _env: Vec<CString>,
    envp: Vec<*const libc::c_char>,
    /// `/bin/sh PATH ARGS...` for a file the kernel cannot exec (ENOEXEC: a script
    /// without `#!`), as execvp(3) runs it; slot 1 is set in the child to the path.
    sh_argv: Vec<*const libc::c_char>,
}

/// The shell execvp(3) runs a file without `#!` with.
const SHELL: &std::ffi::CStr = c"/bin/sh";

fn cstring(s: &OsStr) -> std::io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{s:?} contains a NUL byte"),
        )
    })
}

impl Prepared {
    /// `argv` run from the file `path` (no PATH lookup; `argv[0]` is only its name),
    /// with this process's environment.
    pub(super) fn at(path: &std::path::Path, argv: &[String]) -> std::io::Result<Prepared> {
        let mut p = Prepared::new(argv, &[])?;
        p.paths = vec![cstring(path.as_os_str())?];
        Ok(p)
    }

    /// `argv` (argv[0] the program, looked up in PATH unless it has a slash) with this
    /// process's environment, in which `set` replaces or adds variables.
    pub(super) fn new(argv: &[String], set: &[(&str, &str)]) -> std::io::Result<Prepared> {
        let Some(program) = argv.first().filter(|p| !p.is_empty()) else {
            return Err(std::io::Error::from_raw_os_error(libc::ENOENT));
        };
        let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(k, _)| set.iter().all(|(s, _)| OsStr::new(s) != k))
            .collect();
        env.extend(set.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        let paths = if program.contains('/') {
            vec![cstring(OsStr::new(program))?]
        } else {
            // As execvp(3): each PATH entry in turn, an empty one the current directory.
            let path = env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map_or_else(|| OsString::from("/bin:/usr/bin"), |(_, v)| v.clone());
            let mut v = Vec::new();
            for dir in path.as_bytes().split(|&b| b == b':') {
                let mut p = if dir.is_empty() {
                    b".".to_vec()
                } else {
                    dir.to_vec()
                };
                p.push(b'/');
                p.extend_from_slice(program.as_bytes());
                v.push(cstring(OsStr::from_bytes(&p))?);
            }
            v
        };
        let args = argv
            .iter()
            .map(|a| cstring(OsStr::new(a)))
            .collect::<std::io::Result<Vec<_>>>()?;
        let env = env
            .into_iter()
            .map(|(k, v)| {
                let mut kv = k.into_vec();
                kv.push(b'=');
                kv.extend(v.into_vec());
                cstring(&OsString::from_vec(kv))
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        let ptrs = |v: &[CString]| {
            v.iter()
                .map(|c| c.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect::<Vec<_>>()
        };
        let argv = ptrs(&args);
        let sh_argv = [SHELL.as_ptr(), std::ptr::null()]
            .into_iter()
            .chain(argv[1..].iter().copied())
            .collect();
        Ok(Prepared {
            paths,
            argv,
            _args: args,
            envp: ptrs(&env),
            _env: env,
            sh_argv,
        })
    }
}

/// A forked command that has not said yet whether it exec'd.
pub(super) struct Starting {
    pub(super) pid: libc::pid_t,
    /// The read end of the close-on-exec pipe (non-blocking).
    pub(super) fd: OwnedFd,
}

/// What the exec pipe said.
#[derive(Debug, PartialEq)]
pub(super) enum Outcome {
    /// Nothing yet: the process is still before its exec.
    Pending,
    /// End of file: it exec'd (or died before it could say otherwise).
    Execed,
    /// It gave up before its exec with this errno, and exits.
    Failed(i32),
}

impl Starting {
    /// Reads the pipe without blocking.
    pub(super) fn outcome(&self) -> Outcome {
        let mut b = [0u8; 4];
        let mut got = 0;
        // Bounded: a short read is completed from the same four bytes, written at once.
        for _ in 0..4 {
            // SAFETY: read(2) into a local buffer from our non-blocking pipe.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    b[got..].as_mut_ptr().cast(),
                    b.len() - got,
                )
            };
            match n {
                0 if got == 0 => return Outcome::Execed,
                0 => break,
                n if n > 0 => {
                    got += n as usize;
                    if got == b.len() {
                        return Outcome::Failed(i32::from_ne_bytes(b));
                    }
                }
                _ => {
                    let e = std::io::Error::last_os_error();
                    match e.kind() {
                        std::io::ErrorKind::Interrupted => continue,
                        std::io::ErrorKind::WouldBlock if got == 0 => return Outcome::Pending,
                        _ => break,
                    }
                }
            }
        }
        // A pipe that says neither: the process is gone or going; call it a failure.
        Outcome::Failed(libc::EIO)
    }
}

/// True once our child `pid` has exited (then reaped), without blocking.
pub(super) fn reaped(pid: libc::pid_t) -> bool {
    let mut status = 0;
    // SAFETY: waitpid(2) with WNOHANG on a child of ours that nothing else reaps.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    r == pid || (r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD))
}

/// Writes `errno` into the exec pipe and exits: the child's end when it gives up.
fn give_up(fd: i32, errno: i32) -> ! {
    let b = errno.to_ne_bytes();
    // SAFETY: write(2) and _exit(2), async-signal-safe.
    unsafe {
        libc::write(fd, b.as_ptr().cast(), b.len());
        libc::_exit(127)
    }
}

/// What the child does before its exec, beside what every child does.
#[derive(Clone, Copy)]
pub(super) enum Setup<'a> {
    /// The command: it hands itself over to its enforcer ([`Handover`]).
    Command(&'a Handover),
    /// The enforcer: stdin from `input` (run's pipe), stdout and stderr to `null`,
    /// fd 4 the stop timer `timer`.
    Enforcer {
        input: RawFd,
        null: RawFd,
        timer: RawFd,
    },
    /// Nothing more.
    #[cfg(test)]
    Plain,
}

/// The errno of the last failed call.
fn errno() -> i32 {
    // SAFETY: reading this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// `fd` copied at 10 or above, close-on-exec (out of the way of 0-4).
fn high(fd: RawFd) -> RawFd {
    // SAFETY: fcntl(2) is async-signal-safe.
    unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) }
}

/// The enforcer's descriptors (see [`Setup::Enforcer`]); Err(errno).
fn enforcer_fds(input: RawFd, null: RawFd, timer: RawFd) -> Result<(), i32> {
    // Copies first, out of the way, so that no target clobbers a source.
    let (i, n, t) = (high(input), high(null), high(timer));
    if i < 0 || n < 0 || t < 0 {
        return Err(errno());
    }
    for (from, to) in [(i, 0), (n, 1), (n, 2), (t, 4)] {
        // SAFETY: dup2(2) is async-signal-safe; it clears close-on-exec on `to`.
        if unsafe { libc::dup2(from, to) } < 0 {
            return Err(errno());
        }
    }
    Ok(())
}

/// The child, between fork and exec (see the module's comment). Never returns. `p` is
/// this process's own copy after the fork: writing into it allocates nothing.
fn child(p: &mut Prepared, setup: Setup<'_>, report: i32) -> ! {
    // Out of the way of the descriptors the enforcer's setup places (0-4).
    let report = match high(report) {
        r if r >= 0 => r,
        _ => give_up(report, errno()),
    };
    default_handlers();
    // SAFETY: sigemptyset, sigprocmask and setpgid are async-signal-safe.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        if libc::setpgid(0, 0) != 0 {
            give_up(report, errno());
        }
    }
    let ready = match setup {
        Setup::Command(h) => h.run(),
        Setup::Enforcer { input, null, timer } => enforcer_fds(input, null, timer),
        #[cfg(test)]
        Setup::Plain => Ok(()),
    };
    if let Err(e) = ready {
        give_up(report, e);
    }
    let mut err = libc::ENOENT;
    let mut denied = false;
    // SAFETY: signal(2) and execve(2) are async-signal-safe; `paths`, `argv` and
    // `envp` are NUL-terminated strings and null-terminated arrays made before the fork.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        for path in &p.paths {
            libc::execve(path.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr());
            match *libc::__errno_location() {
                libc::EACCES => denied = true,
                libc::ENOENT | libc::ENOTDIR => {}
                libc::ENOEXEC => {
                    // As execvp(3): a file without `#!` runs with the shell.
                    p.sh_argv[1] = path.as_ptr();
                    libc::execve(SHELL.as_ptr(), p.sh_argv.as_ptr(), p.envp.as_ptr());
                    err = *libc::__errno_location();
                    break;
                }
                e => {
                    err = e;
                    break;
                }
            }
        }
    }
    if denied && err == libc::ENOENT {
        err = libc::EACCES;
    }
    give_up(report, err)
}

/// Forks `p` in a process group of its own, set up with `setup` before its exec,
/// and returns at once: the exec (or the reason it failed) comes on
/// [`Starting::fd`]. Call it from a single-threaded process (`run` is one).
pub(super) fn spawn(p: &mut Prepared, setup: Setup<'_>) -> std::io::Result<Starting> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors that nothing else owns.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: sigfillset/sigprocmask on local sets; fork(2) in a process with one
    // thread; the child runs only `child`, which is async-signal-safe and never
    // returns; the parent restores its mask before anything else.
    let (pid, err) = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_BLOCK, &all, &mut old);
        let pid = libc::fork();
        if pid == 0 {
            child(p, setup, w.as_raw_fd());
        }
        let err = std::io::Error::last_os_error();
        libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        (pid, err)
    };
    if pid < 0 {
        return Err(err);
    }
    // SAFETY: setpgid on our child (it may have done so itself, or exec'd: then this
    // fails harmlessly); fcntl on our own read end.
    unsafe {
        libc::setpgid(pid, pid);
        libc::fcntl(r.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK);
    }
    drop(w);
    Ok(Starting { pid, fd: r })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn wait_outcome(s: &Starting) -> Outcome {
        let t0 = Instant::now();
        loop {
            let o = s.outcome();
            if o != Outcome::Pending || t0.elapsed() > Duration::from_secs(10) {
                return o;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn reap(pid: libc::pid_t) -> i32 {
        let mut status = 0;
        // SAFETY: waitpid on our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        status
    }

    #[test]
    fn a_program_in_path_execs_with_the_variables_set() {
        let out = std::env::temp_dir().join(format!("electd-spawn-{}", std::process::id()));
        let script = format!("printf '%s %s' \"$ELECTD_X\" \"$0\" > {}", out.display());
        let argv = ["sh", "-c", &script, "zero"].map(String::from);
        let mut p = Prepared::new(&argv, &[("ELECTD_X", "forty-two")]).unwrap();
        let s = spawn(&mut p, Setup::Plain).unwrap();
        assert_eq!(wait_outcome(&s), Outcome::Execed);
        assert_eq!(reap(s.pid), 0);
        let got = std::fs::read_to_string(&out).unwrap();
        let _ = std::fs::remove_file(&out);
        assert_eq!(got, "forty-two zero");
    }

    #[test]
    fn a_missing_program_fails_with_enoent_and_the_child_exits() {
        let argv = ["electd-no-such-program-anywhere".to_string()];
        let s = spawn(&mut Prepared::new(&argv, &[]).unwrap(), Setup::Plain).unwrap();
        assert_eq!(wait_outcome(&s), Outcome::Failed(libc::ENOENT));
        assert_eq!(reap(s.pid), 127 << 8);
        let argv = ["/nonexistent/electd/x".to_string()];
        let s = spawn(&mut Prepared::new(&argv, &[]).unwrap(), Setup::Plain).unwrap();
        assert_eq!(wait_outcome(&s), Outcome::Failed(libc::ENOENT));
        reap(s.pid);
    }

    #[test]
    fn a_file_that_is_not_executable_fails_with_eacces() {
        let f = std::env::temp_dir().join(format!("electd-spawn-noexec-{}", std::process::id()));
        std::fs::write(&f, "#!/bin/sh\n").unwrap();
        let argv = [f.display().to_string()];
        let s = spawn(&mut Prepared::new(&argv, &[]).unwrap(), Setup::Plain).unwrap();
        let o = wait_outcome(&s);
        reap(s.pid);
        let _ = std::fs::remove_file(&f);
        assert_eq!(o, Outcome::Failed(libc::EACCES));
    }

    #[test]
    fn the_child_leads_its_own_process_group() {
        let argv = ["sleep", "5"].map(String::from);
        let s = spawn(&mut Prepared::new(&argv, &[]).unwrap(), Setup::Plain).unwrap();
        // The parent set it too: it holds the moment spawn returns.
        // SAFETY: getpgid and kill on our own child.
        let pgid = unsafe { libc::getpgid(s.pid) };
        assert_eq!(wait_outcome(&s), Outcome::Execed);
        unsafe { libc::kill(s.pid, libc::SIGKILL) };
        reap(s.pid);
        assert_eq!(pgid, s.pid);
    }

    #[test]
    fn an_argument_with_a_nul_is_refused_before_any_fork() {
        let argv = ["sh".to_string(), "a\0b".to_string()];
        assert!(Prepared::new(&argv, &[]).is_err());
        assert!(Prepared::new(&[], &[]).is_err());
    }
}

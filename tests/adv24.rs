//! Adversarial review 24 (SPEC section 8 S5, section 11 `electctl run`): 8a030d1 made
//! `run` fork its command itself (src/supervise/spawn.rs) and watch the exec in its
//! ppoll, instead of std's `Command::spawn`, which blocked until the exec. Attacked:
//!
//! - what the command starts with, against what std's spawn gave it: descriptors (none
//!   of `run`'s), stdio, signal mask and dispositions, process group and session,
//!   environment, argv[0];
//! - the PATH lookup (empty entries, an entry that is a file, a program found first
//!   without the execute bit), and exec failures (ENOEXEC: a script without `#!`);
//! - a stop while the command's process is held at its exec: `run` SIGKILLs it and
//!   sends `released` before it is reaped; the held process must never run;
//! - a start held before its exec past `START_LIMIT` with `--max-restarts 1`;
//! - the *enforcer's* start, which still uses std's blocking `Command::spawn`.
//!
//! Open findings (their tests ignored; `-- --ignored` to see them fail):
//!
//! - `run_answers_sigterm_while_its_enforcer_is_held_before_exec` and
//!   `enforcer_stopped_before_exec_blocks_run_for_ever`: the enforcer is still started
//!   with std's blocking `Command::spawn`, so review 23's hang remains, one process
//!   over (a hang and a leader with no processor, not an S5 break);
//! - `a_script_without_a_shebang_runs_as_with_std_spawn`: ENOEXEC is final now, where
//!   glibc's execvp (std's spawn with a `pre_exec`) ran the file with /bin/sh.
//!
//! Not a bug (passing, each shown able to fail): `released` sent while a SIGKILLed
//! process held at its exec still exists is safe (the SIGKILL is pending first, and
//! the kernel skips an execve entered with it); `dying` reaps it.
//!
//! Run: `cargo test --release --test adv24 -- --test-threads=1` (strace is needed by
//! the tests that hold a process at a system call; they are skipped without it).

mod common;
#[path = "common/straced.rs"]
mod straced;

use straced::{Setup, kill_tree, sigkill_pending};

use common::{Cluster, Mode, SERIAL, boottime_ns, slacked, spans};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Not a test: the wrapped command, when this binary is re-executed by `electctl run`.
#[test]
fn cmd_helper() {
    common::cmd_helper();
}

/// A killed processor's end is known to within one alive period (2 ms) and a little.
const SLOP_NS: u64 = 3_000_000;

/// A scratch directory of this test.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("electd-adv24-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write_exec(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `electctl --socket S run ARGS -- CMD` against server `id` of `c`, its log appended to
/// the run log of `id`.
fn run_cmd(c: &Cluster, id: u16, args: &[&str], cmd: &[&str]) -> Command {
    let mut r = Command::new(env!("CARGO_BIN_EXE_electctl"));
    r.arg("--socket")
        .arg(c.sock(id))
        .arg("run")
        .args(args)
        .arg("--")
        .args(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(common::run_log(c, id)));
    r
}

fn run_log_of(c: &Cluster, id: u16) -> String {
    std::fs::read_to_string(c.dir.join(format!("run-{id}.log"))).unwrap_or_default()
}

/// Stops a `run` with SIGTERM and waits (bounded); SIGKILL to what is left below it.
fn stop_run(mut r: Child) {
    common::signal(&r, libc::SIGTERM);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        if r.try_wait().ok().flatten().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    kill_tree(&mut r);
}

/// The fields of /proc/PID/status named in `keys`.
fn status_fields(pid: u32, keys: &[&str]) -> BTreeMap<String, String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| keys.contains(k))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// The open descriptors of `pid`, with what they point at.
fn fds(pid: u32) -> BTreeMap<u32, String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let n = e.file_name().to_str()?.parse::<u32>().ok()?;
                    let l = std::fs::read_link(e.path()).ok()?;
                    Some((n, l.display().to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// (pgrp, session) of `pid`, from /proc/PID/stat.
fn pgrp_session(pid: u32) -> (i64, i64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let f: Vec<i64> = stat
        .rsplit_once(')')
        .map(|(_, r)| {
            r.split_whitespace()
                .skip(2)
                .take(2)
                .filter_map(|v| v.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    (
        f.first().copied().unwrap_or(-1),
        f.get(1).copied().unwrap_or(-1),
    )
}

/// Waits (bounded) for a child of `run` whose command line starts with `prefix`.
fn command_of(run: u32, prefix: &str, within: Duration) -> Option<u32> {
    let t0 = Instant::now();
    while t0.elapsed() < slacked(within) {
        if let Some((p, _)) = common::children(run)
            .into_iter()
            .find(|(_, c)| c.starts_with(prefix))
        {
            return Some(p);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

/// What the command starts with is what std's `Command::spawn` gave it (and what a
/// processor may rely on): no descriptor but the three stdio ones, and those `run`'s
/// own (inherited, not reopened); no signal blocked; no handler (exec resets them);
/// the same ignored signals as a program started by std from the same parent (`run`
/// ignores SIGPIPE, as every std program does, and must not pass that on); a process
/// group of its own, led by it, in `run`'s session; the environment of `run` plus the
/// ELECTD_* variables; argv[0] as given. `run` is started with a descriptor left open
/// on purpose (an inherited one, not close-on-exec) to tell "run's own descriptors"
/// apart from "descriptors run was given": std passes the latter on, and so must this.
///
/// Shown able to fail: with the `sigprocmask` that empties the mask in the child
/// removed (spawn.rs, `child`), the command started with every signal blocked
/// (`SigBlk: fffffffe7ffbfeff` against 0); with `O_CLOEXEC` removed from the exec
/// pipe's `pipe2` (spawn.rs, `spawn`), both its ends leaked into the command (fds 9
/// and 13 there).
#[test]
fn the_command_starts_as_std_spawn_started_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::start(Mode::Unicast, 1);
    c.agreement(slacked(Duration::from_secs(5)));
    let dir = scratch("stdio");
    // A descriptor run inherits (not close-on-exec): std would hand it on too.
    let keep = std::fs::File::create(dir.join("inherited")).unwrap();
    let keep_fd = std::os::fd::AsRawFd::as_raw_fd(&keep);
    let mut r = run_cmd(&c, 1, &["--grace", "100ms"], &["sleep", "30"]);
    r.env("ELECTD_ADV24_MARK", "m1");
    // SAFETY: fcntl(2) on a descriptor of this test, in the child before its exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut r, move || {
            let fl = libc::fcntl(keep_fd, libc::F_GETFD);
            libc::fcntl(keep_fd, libc::F_SETFD, fl & !libc::FD_CLOEXEC);
            Ok(())
        });
    }
    let run = r.spawn().unwrap();
    let run_pid = run.id();
    let cmd = command_of(run_pid, "sleep", Duration::from_secs(5));
    // The reference: the same program started by std from this process, with the same
    // inherited descriptor.
    let mut std_ref = Command::new("sleep");
    std_ref
        .arg("30")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: as above.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut std_ref, move || {
            let fl = libc::fcntl(keep_fd, libc::F_GETFD);
            libc::fcntl(keep_fd, libc::F_SETFD, fl & !libc::FD_CLOEXEC);
            Ok(())
        });
    }
    let mut reference = std_ref.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let sig_keys = ["SigBlk", "SigIgn", "SigCgt"];
    let want_sigs = status_fields(reference.id(), &sig_keys);
    let want_fds: Vec<u32> = fds(reference.id()).into_keys().collect();
    let _ = reference.kill();
    let _ = reference.wait();
    let Some(cmd) = cmd else {
        let log = run_log_of(&c, 1);
        stop_run(run);
        panic!("run started no `sleep`:\n{log}");
    };
    let got_sigs = status_fields(cmd, &sig_keys);
    let got_fds = fds(cmd);
    let run_fds = fds(run_pid);
    let (pgrp, sid) = pgrp_session(cmd);
    let (_, run_sid) = pgrp_session(run_pid);
    let environ = std::fs::read(format!("/proc/{cmd}/environ")).unwrap_or_default();
    let environ: Vec<String> = environ
        .split(|&b| b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    let argv = std::fs::read(format!("/proc/{cmd}/cmdline")).unwrap_or_default();
    let log = run_log_of(&c, 1);
    stop_run(run);
    eprintln!(
        "command {cmd}: fds {got_fds:?} (run's: {run_fds:?}); signals {got_sigs:?} (std: \
         {want_sigs:?}); pgrp {pgrp} session {sid} (run's {run_sid})"
    );
    assert_eq!(
        got_sigs, want_sigs,
        "the command's signal mask and dispositions differ from std's spawn:\n{log}"
    );
    let got_fd_keys: Vec<u32> = got_fds.keys().copied().collect();
    assert_eq!(
        got_fd_keys, want_fds,
        "the command's descriptors differ from std's spawn (run's own leaked? run has \
         {run_fds:?}): {got_fds:?}"
    );
    for fd in [0, 1, 2, keep_fd as u32] {
        assert_eq!(
            got_fds.get(&fd),
            run_fds.get(&fd),
            "fd {fd} is not run's own, inherited"
        );
    }
    assert_eq!(pgrp, i64::from(cmd), "not the leader of a group of its own");
    assert_eq!(sid, run_sid, "not in run's session");
    for want in [
        "ELECTD_ADV24_MARK=m1",
        "ELECTD_ROLE=leader",
        "ELECTD_GROUP=default",
    ] {
        assert!(
            environ.iter().any(|e| e == want),
            "{want} missing: {environ:?}"
        );
    }
    assert!(
        environ
            .iter()
            .filter(|e| e.starts_with("ELECTD_TERM="))
            .count()
            == 1,
        "ELECTD_TERM not once: {environ:?}"
    );
    assert_eq!(argv, b"sleep\x0030\x00", "argv");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Waits (bounded) until `file` has a line; its text.
fn wait_file(file: &Path, within: Duration) -> String {
    let t0 = Instant::now();
    loop {
        let s = std::fs::read_to_string(file).unwrap_or_default();
        if s.contains('\n') || t0.elapsed() > slacked(within) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The PATH lookup is execvp(3)'s, as with std's spawn: entries in order, one that
/// does not exist or is a file (ENOENT, ENOTDIR) skipped, one whose file is not
/// executable (EACCES) skipped too (and reported only if nothing else is found), an
/// empty entry the current directory. Here the program is found only through the empty
/// entry, after all three kinds of misses; a name with a slash is taken relative to
/// `run`'s directory, without PATH. Shown able to fail: with EACCES treated as final in
/// the child's loop (spawn.rs, `child`), `run` logged "cannot start electd-adv24-prog:
/// Permission denied" and never ran it.
#[test]
fn path_lookup_is_execvps() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::start(Mode::Unicast, 1);
    c.agreement(slacked(Duration::from_secs(5)));
    let dir = scratch("path");
    let out = dir.join("out");
    let prog = "electd-adv24-prog";
    let body = format!(
        "#!/bin/sh\necho \"found $0 $ELECTD_ROLE\" >> {}\nexec sleep 30\n",
        out.display()
    );
    std::fs::write(dir.join("afile"), "").unwrap();
    std::fs::create_dir_all(dir.join("noexec")).unwrap();
    write_exec(&dir.join("noexec").join(prog), &body, 0o644);
    std::fs::create_dir_all(dir.join("cwd/sub")).unwrap();
    write_exec(&dir.join("cwd").join(prog), &body, 0o755);
    write_exec(&dir.join("cwd/sub").join(prog), &body, 0o755);
    let path = format!(
        "/nonexistent-electd-adv24:{d}/afile:{d}/noexec::/usr/bin:/bin",
        d = dir.display()
    );
    for (name, want) in [
        (prog.to_string(), format!("found ./{prog} leader")),
        (format!("sub/{prog}"), format!("found sub/{prog} leader")),
    ] {
        let _ = std::fs::remove_file(&out);
        let mut r = run_cmd(&c, 1, &["--grace", "100ms"], &[&name]);
        r.env("PATH", &path).current_dir(dir.join("cwd"));
        let run = r.spawn().unwrap();
        let got = wait_file(&out, Duration::from_secs(5));
        let log = run_log_of(&c, 1);
        stop_run(run);
        assert_eq!(
            got.trim(),
            want,
            "{name} with PATH={path} was not run as execvp runs it:\n{log}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// **Open (a behaviour change from std's spawn, not an S5 break).** An executable file
/// that is not a binary and has no `#!` line: execve(2) fails with ENOEXEC, and
/// execvp(3), which std's `Command::spawn` used (through `pre_exec`, std forks and
/// calls execvp), then runs it with /bin/sh, as POSIX requires of execvp and of the
/// shell. The new start (spawn.rs, `child`) calls execve on each candidate and gives up
/// on ENOEXEC: `run` logs "cannot start ...: Exec format error (os error 8)" and tries
/// again and again with its backoff (and counts each for `--max-restarts`, so a
/// `run --max-restarts` of such a script now turns its server unhealthy), where
/// the same command line used to run. The module comment says "as execvp(3) does".
/// Suggested fix: on ENOEXEC, execve `/bin/sh` with `[argv[0] as found, args...]`
/// (argv made before the fork too), as glibc's execvp does; or document the change.
/// This test first shows std's spawn running the script from this process.
#[test]
fn a_script_without_a_shebang_runs_as_with_std_spawn() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("noexec-fmt");
    let script = dir.join("no-shebang");
    let out = dir.join("out");
    write_exec(
        &script,
        &format!(
            "echo \"ran $ELECTD_ROLE\" >> {}\nexec sleep 30\n",
            out.display()
        ),
        0o755,
    );
    // std's spawn with a `pre_exec` (as `run` made it before 8a030d1, for the
    // enforcer's hand-over) forks and calls execvp, which runs it with /bin/sh. (Without
    // one, std uses posix_spawnp, which does not: that is std's own inconsistency.)
    let mut by_std = Command::new(&script);
    by_std.env("ELECTD_ROLE", "std").stdin(Stdio::null());
    // SAFETY: an empty hook, as a stand-in for the old `Enforcer::guard`.
    unsafe { std::os::unix::process::CommandExt::pre_exec(&mut by_std, || Ok(())) };
    let mut by_std = by_std.spawn().expect("std's spawn of a script without #!");
    let std_got = wait_file(&out, Duration::from_secs(3));
    let _ = by_std.kill();
    let _ = by_std.wait();
    assert_eq!(std_got.trim(), "ran std", "std's spawn did not run it");
    let _ = std::fs::remove_file(&out);
    let c = Cluster::start(Mode::Unicast, 1);
    c.agreement(slacked(Duration::from_secs(5)));
    let run = run_cmd(&c, 1, &["--grace", "100ms"], &[script.to_str().unwrap()])
        .spawn()
        .unwrap();
    let got = wait_file(&out, Duration::from_secs(3));
    let log = run_log_of(&c, 1);
    stop_run(run);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        got.trim(),
        "ran leader",
        "electctl run did not run a script without #! that std's spawn runs:\n{log}"
    );
}

/// The number of the system call `pid` is in, from /proc/PID/syscall.
fn in_syscall(pid: u32) -> Option<i64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/syscall")).ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// A yield while the command's own process is held at its execve (after its `P` line
/// and its look at the stop timer found room): `run` no longer waits for the exec, so
/// it SIGKILLs the group at once, forgets the process (`dying`, reaped later) and sends
/// `released` while the process still exists. That is safe only if the SIGKILL is
/// already pending when the next leader's processor starts (a held process dies of it
/// when let go, and the kernel skips an execve entered with a fatal signal pending), so
/// that is what is checked each time the log is read, until the next processor shows;
/// and the held process must never run. `run` must also have said so at once.
///
/// strace holds the first execve of each traced process: `run`'s own, the enforcer's
/// (std's spawn: `run` waits), then the command's, each for `HOLD_US`.
///
/// Shown able to fail: with the `signal_group(pid, SIGKILL)` of the pre-exec branch of
/// `enforce` (command.rs) removed, the next leader's processor started while the held
/// process had no SIGKILL pending (the enforcer, retired, signals only at the old
/// lease's end); with the reaping of `dying` (`reap`, command.rs) removed, the killed
/// process was left a zombie of `run`.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Fault {
    Yield,
    Crash,
}

#[test]
fn released_while_the_commands_process_is_held_at_exec_is_safe() {
    held_at_exec_then(Fault::Yield);
}

/// As `released_while_the_commands_process_is_held_at_exec_is_safe`, the leader's
/// daemon SIGKILLed instead of a yield: `run` reads the end of its connection, and the
/// held process must be SIGKILLed before the next leader's processor starts.
#[test]
fn daemon_crash_while_the_commands_process_is_held_at_exec() {
    held_at_exec_then(Fault::Crash);
}

fn held_at_exec_then(fault: Fault) {
    const HOLD_US: u64 = 3_000_000;
    let inject = format!("inject=execve:delay_enter={HOLD_US}:when=1");
    let args = ["-f", "-e", "trace=execve", "-e", &inject].map(String::from);
    let Some(mut s) = Setup::start(&args, &[]) else {
        return;
    };
    let held = s.wait_children(
        Duration::from_micros(3 * HOLD_US) + Duration::from_secs(3),
        "run forked no command",
        |_, kids| {
            kids.iter().find(|(_, c)| c.contains("__enforce"))?;
            Some(kids.iter().find(|(_, c)| c.contains(" run "))?.0)
        },
    );
    // At its execve (59 on x86_64), not yet the processor.
    let t0 = Instant::now();
    while in_syscall(held).is_none_or(|nr| nr != libc::SYS_execve)
        && t0.elapsed() < Duration::from_secs(1)
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    let at = in_syscall(held);
    assert_eq!(
        at,
        Some(libc::SYS_execve),
        "the command's process {held} is not held at its execve"
    );
    let fault_at = boottime_ns();
    match fault {
        Fault::Yield => s.yield_leader(),
        Fault::Crash => s.c.kill(s.leader),
    }
    let leader = s.leader;
    // Until the next leader's processor shows: is the held process's SIGKILL pending?
    let mut unkilled_at_handoff = None;
    let t0 = Instant::now();
    loop {
        let killed = !common::alive(held) || sigkill_pending(held);
        let next = spans(&s.log).into_iter().find(|p| p.host != leader);
        if let Some(n) = next {
            if !killed {
                unkilled_at_handoff = Some(n);
            }
            break;
        }
        if t0.elapsed() > slacked(Duration::from_secs(6)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let handoff_seen = t0.elapsed();
    // Let the hold end: the held process must die without running.
    std::thread::sleep(Duration::from_micros(HOLD_US) + Duration::from_millis(500));
    let gone = !common::alive(held);
    // ... and be reaped by `run` (`dying`), not left a zombie.
    let reaped = !Path::new(&format!("/proc/{held}")).exists();
    let run_log = s.run_log();
    let all = s.stop();
    let mine: Vec<_> = all.iter().filter(|p| p.host == leader).collect();
    let o = common::overlaps(&all, SLOP_NS);
    eprintln!(
        "held {held}; next processor seen {handoff_seen:?} after the {fault:?}; spans {:?}",
        all.iter()
            .map(|p| (p.host, (p.start as i64 - fault_at as i64) / 1_000_000))
            .collect::<Vec<_>>()
    );
    assert!(
        all.iter().any(|p| p.host != leader),
        "the next leader's processor never started: the test proves nothing\n{run_log}"
    );
    assert!(
        unkilled_at_handoff.is_none(),
        "`released` before the held process was killed: the next processor {:?} ran \
         while the old leader's process {held} (held at its exec) had no SIGKILL \
         pending\n{run_log}",
        unkilled_at_handoff
    );
    assert!(
        mine.is_empty() && o.is_empty() && gone,
        "the held process ran or lived on: processors on the old leader {mine:?}, \
         overlaps {o:?}, gone {gone}\n{run_log}"
    );
    assert!(
        reaped,
        "run left its killed process {held} unreaped (a zombie)\n{run_log}"
    );
    assert!(
        run_log.contains("before its exec"),
        "run did not say it killed the process before its exec:\n{run_log}"
    );
}

/// **Open (a hang, not an S5 break): the same finding as review 23's, one process
/// over.** 8a030d1 stopped waiting for the command's exec, but the enforcer is still
/// started with std's `Command::spawn` (enforce.rs, `Enforcer::start_with`), which
/// returns only once the enforcer has exec'd. While the enforcer's process is held
/// between its fork and its exec (here strace holds its first dup2, which std's
/// child code makes for its stdin, for 5 s; a SIGSTOP to its group, a debugger with
/// `-f`, a starved machine in life), `run` is blocked in `spawn`: it answers no
/// SIGTERM, reads no leadership line, sends no `released`, and the server leads with
/// no processor. A SIGSTOP of that process (it is in a group of its own) makes it for
/// ever; START_LIMIT does not apply, since `run` never gets back to its loop. Here
/// `run` gets SIGTERM 0.1 s into the hold and must exit within 1 s (as it now does
/// when the command's process is held, tests/adv23.rs). Found: it exits only when the
/// hold ends, 4.9 s later. Suggested fix: start the enforcer with spawn.rs's fork too
/// (its exec watched in the loop like the command's: the command is forked only
/// once the enforcer exec'd), or bound the wait.
#[test]
fn run_answers_sigterm_while_its_enforcer_is_held_before_exec() {
    const HOLD_US: u64 = 5_000_000;
    let inject = format!("inject=dup2,dup3:delay_enter={HOLD_US}:when=1");
    let args = ["-f", "-e", "trace=dup2,dup3", "-e", &inject].map(String::from);
    let Some(s) = Setup::start(&args, &[]) else {
        return;
    };
    let (run, held) = s.wait_children(
        Duration::from_secs(3),
        "run forked no enforcer",
        |run, kids| {
            // The enforcer's process before its exec shows run's command line.
            let h = kids.iter().find(|(_, c)| c.contains(" run "))?.0;
            Some((run, h))
        },
    );
    std::thread::sleep(Duration::from_millis(100));
    let kids = common::children(run);
    assert!(
        kids.len() == 1 && in_syscall(held).is_some_and(|nr| nr == libc::SYS_dup2),
        "not the enforcer's process held at its dup2 alone: {kids:?} {:?}",
        in_syscall(held)
    );
    // SAFETY: kill(2) on the `electctl run` this test started (under strace).
    unsafe { libc::kill(run as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    while common::alive(run) && t0.elapsed() < Duration::from_micros(2 * HOLD_US) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = t0.elapsed();
    let run_log = s.run_log();
    let _ = s.stop();
    eprintln!("run exited {took:?} after its SIGTERM (enforcer's process {held} held)");
    assert!(
        took < slacked(Duration::from_millis(1_000)),
        "run took {took:?} to stop on SIGTERM while its enforcer's process {held} was \
         held before its exec (a SIGSTOP would make it for ever):\n{run_log}"
    );
}

/// A start held before its exec past `START_LIMIT` is a failed start, and counts for
/// `--max-restarts`: with `--max-restarts 1`, the one start killed by the limit turns
/// the server unhealthy (`health failing`), so the lease moves to a server whose
/// processor runs, rather than staying with a leader whose every start is held (here
/// strace holds the first prctl of every command's process for 8 s, the second
/// start's too). Checked: the limit's kill is logged, the next leader's processor
/// runs within a few seconds of it, and no two processors overlap. Shown able to
/// fail: with the `count_exit` of `start_failed` skipped for the limit's kill (its
/// backoff kept), the lease stayed with the held leader and no other processor ran.
#[test]
fn a_start_killed_by_the_limit_counts_for_max_restarts() {
    const LONG_US: u64 = 13_000_000;
    let inject = format!("inject=prctl:delay_enter={LONG_US}:when=1");
    let args = ["-f", "-e", "trace=prctl", "-e", &inject].map(String::from);
    let Some(s) = Setup::start(&args, &["--max-restarts", "1", "--restart-window", "60s"]) else {
        return;
    };
    // run's own first prctl (it becomes a child subreaper) is held first.
    let within = Duration::from_secs(3) + Duration::from_micros(LONG_US);
    let _ = s.wait_children(within, "run forked no command", |_, k| {
        k.iter().find(|(_, c)| c.contains("__enforce"))?;
        Some(k.iter().find(|(_, c)| c.contains(" run "))?.0)
    });
    let said = "did not reach its exec within 10 s";
    let t0 = Instant::now();
    while !s.run_log().contains(said) && t0.elapsed() < slacked(Duration::from_secs(12)) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        s.run_log().contains(said),
        "no start limit kill:\n{}",
        s.run_log()
    );
    let killed_at = Instant::now();
    let leader = s.leader;
    let moved = |log: &str| spans(log).into_iter().find(|p| p.host != leader);
    while moved(&s.log).is_none() && killed_at.elapsed() < slacked(Duration::from_secs(5)) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let next = moved(&s.log);
    let took = killed_at.elapsed();
    let run_log = s.run_log();
    let daemons = s.c.logs();
    let all = s.stop();
    let o = common::overlaps(&all, SLOP_NS);
    eprintln!("next processor {next:?} {took:?} after the limit's kill");
    assert!(
        next.is_some(),
        "the lease stayed with leader {leader}, whose start was killed by the limit \
         with --max-restarts 1:\n{run_log}\n{daemons}"
    );
    assert!(o.is_empty(), "overlaps {o:?}");
    assert!(
        all.iter().all(|p| p.host != leader),
        "a held start ran on {leader}: {all:?}"
    );
}

/// The "for ever" form of `run_answers_sigterm_while_its_enforcer_is_held_before_exec`:
/// the enforcer's process is SIGSTOPped between its fork and its exec (caught there by
/// strace's hold on its first dup2, then strace is killed, so the SIGSTOP stops it for
/// good). `run` stays blocked in std's `Command::spawn` (it reads std's close-on-exec
/// pipe, which nothing will close): no SIGTERM answered, and its server keeps the lease
/// (renewed by the daemon, which `run` never told anything) with no processor.
/// Found: `run` was still alive 6 s after its SIGTERM (the bound, slacked), and its
/// server still led, with no processor. Suggested fix: as for the test above.
#[test]
fn enforcer_stopped_before_exec_blocks_run_for_ever() {
    const HOLD_US: u64 = 3_000_000;
    let inject = format!("inject=dup2,dup3:delay_enter={HOLD_US}:when=1");
    let args = ["-f", "-e", "trace=dup2,dup3", "-e", &inject].map(String::from);
    let Some(mut s) = Setup::start(&args, &[]) else {
        return;
    };
    let (run, held) = s.wait_children(
        Duration::from_secs(3),
        "run forked no enforcer",
        |run, kids| Some((run, kids.iter().find(|(_, c)| c.contains(" run "))?.0)),
    );
    // SAFETY: kill(2) on the enforcer's process this test's `run` forked.
    unsafe { libc::kill(held as i32, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(50));
    // strace lets everything go: the held process stops on its SIGSTOP.
    let _ = s.traced.kill();
    let _ = s.traced.wait();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on the `electctl run` this test started.
    unsafe { libc::kill(run as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    while common::alive(run) && t0.elapsed() < slacked(Duration::from_secs(3)) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let stuck = common::alive(run);
    let took = t0.elapsed();
    let role =
        s.c.status(s.leader)
            .and_then(|v| v.get("role")?.as_str().map(String::from));
    let processors = spans(&s.log).iter().filter(|p| p.host == s.leader).count();
    let run_log = s.run_log();
    let leader = s.leader;
    for p in [held, run] {
        // SAFETY: kill(2) on processes this test started (below it).
        unsafe { libc::kill(p as i32, libc::SIGKILL) };
    }
    let _ = s.stop();
    eprintln!(
        "run alive {took:?} after its SIGTERM: {stuck}; server {leader} role {role:?}, \
         processors there {processors}"
    );
    assert!(
        !stuck,
        "run did not answer its SIGTERM in {took:?}: blocked in std's spawn of its \
         enforcer, whose process {held} is stopped before its exec (server role \
         {role:?}, {processors} processors there):\n{run_log}"
    );
}

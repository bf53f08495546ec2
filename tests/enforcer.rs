//! The lease enforcer (`electctl __enforce`, src/supervise/enforce.rs) on its own, with
//! the stop timers armed as the daemon arms them (issue 25): renewals never wake it,
//! and once they stop it acts at the instants the timers say, on the last lease end
//! armed: SIGTERM with the grace, SIGKILL at the margin; a `T` from `run` spares the
//! command a second SIGTERM; a stopped enforcer acts at once when it resumes.

#[path = "common/enforce.rs"]
mod enforce;

use electd::supervise::enforce::Enforcer;
use electd::supervise::{StopTimers, stop_at};
use electd::time::boot_now;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

const ELECTCTL: &str = env!("CARGO_BIN_EXE_electctl");
const GRACE: Duration = Duration::from_millis(100);
const MARGIN: Duration = Duration::from_millis(20);
/// How far ahead of now each lease end armed lies (a lease renewed every 20 ms).
const AHEAD: Duration = Duration::from_millis(300);

fn ns(d: Duration) -> u64 {
    d.as_nanos() as u64
}

fn voluntary_switches(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn alive(child: &mut Child) -> bool {
    matches!(child.try_wait(), Ok(None))
}

/// The command `argv` in a process group of its own, with its enforcer sleeping on
/// `timers`, armed first for the lease end `until_ns`.
fn start(until_ns: u64, argv: &[&str]) -> (Child, Enforcer, StopTimers) {
    let timers = StopTimers::create().unwrap();
    timers.arm(stop_at(until_ns, GRACE)).unwrap();
    let (cmd, e) = enforce::start_enforced(Path::new(ELECTCTL), &timers, GRACE, argv);
    (cmd, e, timers)
}

/// Waits (bounded) until `cmd` exits; the boot-clock instant it was seen gone.
fn gone_at(cmd: &mut Child) -> u64 {
    let t = Instant::now();
    while alive(cmd) && t.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(!alive(cmd), "the command outlived its last lease end");
    boot_now().as_nanos()
}

fn wait_exit(e: &mut Enforcer) {
    let t = Instant::now();
    while !e.exited() && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(e.exited(), "the enforcer outlived its command");
}

/// Renews every 20 ms for 1.2 s as the daemon does (the timers re-armed, nothing
/// else); returns the last lease end armed and the enforcer's wakeups meanwhile.
fn renew(timers: &StopTimers, pid: u32) -> (u64, u64) {
    std::thread::sleep(Duration::from_millis(50));
    let before = voluntary_switches(pid);
    let t0 = Instant::now();
    let mut last = 0;
    while t0.elapsed() < Duration::from_millis(1200) {
        last = boot_now().as_nanos() + ns(AHEAD);
        timers.arm(stop_at(last, GRACE)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    (last, voluntary_switches(pid) - before)
}

/// Renewals on the timers never wake the enforcer (before issue 25's third round it
/// read a line per renewal, or drained its pipe); once they stop, SIGTERM comes at the
/// last lease end's SIGTERM instant (a few ms later: no `run` says `T` here), never
/// before it and never after the lease end.
#[test]
fn renewals_never_wake_the_enforcer_and_the_last_one_counts() {
    let (mut cmd, mut e, timers) = start(boot_now().as_nanos() + ns(AHEAD), &["sleep", "30"]);
    let (last, woke) = renew(&timers, e.id());
    assert!(alive(&mut cmd), "stopped while its lease was renewed");
    eprintln!("enforcer wakeups during 1.2 s of renewals: {woke}");
    assert!(woke <= 1, "the enforcer woke {woke} times for renewals");
    let term_at = stop_at(last, GRACE).term_ns;
    let gone = gone_at(&mut cmd);
    assert!(
        gone + 2_000_000 >= term_at,
        "stopped {} ms before the SIGTERM was due",
        (term_at - gone) / 1_000_000
    );
    assert!(
        gone <= last,
        "stopped {} ms after the lease end",
        (gone - last) / 1_000_000
    );
    let _ = cmd.wait();
    wait_exit(&mut e);
}

/// A command that ignores SIGTERM keeps its whole grace: SIGKILL at the SIGKILL
/// instant of the last lease end armed, not before (the review of issue 25's second
/// round found an enforcer that acted on a lease end an hour old: SIGKILL at once).
#[test]
fn the_grace_is_kept_and_the_kill_comes_at_the_margin() {
    let argv = ["sh", "-c", "trap '' TERM; exec sleep 30"];
    let (mut cmd, mut e, timers) = start(boot_now().as_nanos() + ns(AHEAD), &argv);
    let (last, _) = renew(&timers, e.id());
    assert!(alive(&mut cmd), "stopped while renewed");
    let gone = gone_at(&mut cmd);
    let kill_at = last - ns(MARGIN);
    assert!(
        gone + 3_000_000 >= kill_at,
        "killed {:.1} ms before its SIGKILL was due",
        (kill_at as f64 - gone as f64) / 1e6
    );
    assert!(gone <= last, "the command outlived the lease end");
    let _ = cmd.wait();
    wait_exit(&mut e);
}

/// `T` (run sent SIGTERM itself) is read when the SIGTERM timer fires, so the command
/// gets one SIGTERM, not two; the SIGKILL still comes at the margin.
#[test]
fn a_term_from_run_is_seen_before_the_enforcer_acts() {
    let deadline = boot_now().as_nanos() + ns(AHEAD);
    // sleep dies on SIGTERM, so when it died says which signal came first.
    let (mut cmd, mut e, _timers) = start(deadline, &["sleep", "30"]);
    e.terminating();
    let gone = gone_at(&mut cmd);
    let kill_at = deadline - ns(MARGIN);
    assert!(
        gone + 2_000_000 >= kill_at,
        "the command died {} ms before the SIGKILL was due: it got a SIGTERM after T",
        (kill_at - gone) / 1_000_000
    );
    assert!(gone <= deadline, "the command outlived the lease end");
    let _ = cmd.wait();
    wait_exit(&mut e);
}

/// An enforcer stopped (SIGSTOP) past both instants acts at once when it resumes, on
/// what the timers say (it makes no arithmetic of its own on the clock): SIGKILL.
#[test]
fn a_stopped_enforcer_acts_at_once_on_resuming() {
    let argv = ["sh", "-c", "trap '' TERM; exec sleep 30"];
    let deadline = boot_now().as_nanos() + ns(Duration::from_millis(200));
    let (mut cmd, mut e, _timers) = start(deadline, &argv);
    std::thread::sleep(Duration::from_millis(50));
    // SAFETY: kill(2) on the enforcer this test started.
    unsafe { libc::kill(e.id() as i32, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(300));
    assert!(alive(&mut cmd), "nobody else stops it here");
    let resumed = boot_now().as_nanos();
    // SAFETY: as above.
    unsafe { libc::kill(e.id() as i32, libc::SIGCONT) };
    let gone = gone_at(&mut cmd);
    assert!(
        gone - resumed < 50_000_000,
        "the command died {} ms after the enforcer resumed",
        (gone - resumed) / 1_000_000
    );
    let _ = cmd.wait();
    wait_exit(&mut e);
}

/// A command whose stop timer shows no room when its own process looks, just before
/// its exec, is not started (`Enforcer::guard`: `run` may have been stopped between
/// its look and the fork), and its enforcer exits: for a lease end already past, and
/// for a timer never armed (nothing says how long it may run).
#[test]
fn no_command_execs_without_room_on_the_stop_timer() {
    for armed in [true, false] {
        let timers = StopTimers::create().unwrap();
        if armed {
            let past = boot_now().as_nanos() - ns(Duration::from_millis(10));
            timers.arm(stop_at(past, GRACE)).unwrap();
        }
        let e = Enforcer::start_with(Path::new(ELECTCTL), GRACE, &timers).unwrap();
        let mut cmd = std::process::Command::new("sleep");
        std::os::unix::process::CommandExt::process_group(cmd.arg("30"), 0);
        e.guard(&mut cmd, &timers);
        let r = cmd.spawn();
        assert_eq!(
            r.as_ref().err().and_then(std::io::Error::raw_os_error),
            Some(electd::supervise::enforce::LEASE_ENDED),
            "armed {armed}: a command started with no room: {r:?}"
        );
        let mut e = e
            .retire()
            .unwrap_or_else(|| panic!("retired before it saw the end"));
        wait_exit(&mut e);
    }
}

/// An enforcer whose pipe closes before any command announced itself (`run` gave up
/// or died first) exits, and says it would have nothing to enforce (exit 0).
#[test]
fn an_enforcer_without_a_command_exits_when_run_lets_go() {
    let timers = StopTimers::create().unwrap();
    timers
        .arm(stop_at(boot_now().as_nanos() + ns(AHEAD), GRACE))
        .unwrap();
    let e = Enforcer::start_with(Path::new(ELECTCTL), GRACE, &timers).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let mut e = e
        .retire()
        .expect("it waits for a command while run holds the pipe");
    wait_exit(&mut e);
}

/// The write end of the pipe [`on_term`] writes to, as `run`'s own handler does.
static TERM_PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

extern "C" fn on_term(_: libc::c_int) {
    let fd = TERM_PIPE.load(std::sync::atomic::Ordering::SeqCst);
    // SAFETY: write(2) is async-signal-safe.
    unsafe { libc::write(fd, b"s".as_ptr().cast(), 1) };
}

/// A SIGTERM that reaches the command's process after it announced itself to the
/// enforcer and before its exec (the enforcer may signal the group from then on) acts
/// as on the command: it dies. It must not run the handler `run` installed (inherited
/// by the fork), which would write into `run`'s own wakeup pipe, so that `run` took it
/// for its own SIGTERM and stopped, while the command went on to its exec. The signal
/// is raised by a `pre_exec` step after `guard`'s.
#[test]
fn a_sigterm_before_the_exec_ends_the_command_not_run() {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors.
    assert_eq!(
        unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) },
        0
    );
    TERM_PIPE.store(fds[1], std::sync::atomic::Ordering::SeqCst);
    // SAFETY: an async-signal-safe handler, as `run` installs (src/supervise/wakeup.rs).
    let before = unsafe { libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t) };
    let timers = StopTimers::create().unwrap();
    timers
        .arm(stop_at(boot_now().as_nanos() + ns(AHEAD), GRACE))
        .unwrap();
    let e = Enforcer::start_with(Path::new(ELECTCTL), GRACE, &timers).unwrap();
    let mut cmd = std::process::Command::new("sleep");
    std::os::unix::process::CommandExt::process_group(cmd.arg("30"), 0);
    e.guard(&mut cmd, &timers);
    // SAFETY: raise(3) is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::raise(libc::SIGTERM);
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    let mut buf = [0u8; 8];
    // SAFETY: read(2) from our non-blocking pipe.
    let n = unsafe { libc::read(fds[0], buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: restoring the test process's action; closing our pipe.
    unsafe {
        libc::signal(libc::SIGTERM, before);
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    let status = spawned.map(|mut c| {
        let t = Instant::now();
        while alive(&mut c) && t.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = c.kill();
        c.wait().unwrap()
    });
    assert!(
        n <= 0,
        "the SIGTERM ran run's handler in the command's process"
    );
    let sig = status
        .as_ref()
        .ok()
        .and_then(std::os::unix::process::ExitStatusExt::signal);
    assert_eq!(
        sig,
        Some(libc::SIGTERM),
        "the command was not ended by it: {status:?}"
    );
    // It exits once the command is gone (it may have already).
    if let Some(mut e) = e.retire() {
        wait_exit(&mut e);
    }
}

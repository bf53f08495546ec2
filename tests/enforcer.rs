//! The lease enforcer (`electctl __enforce`, src/supervise/enforce.rs) on its own: a
//! renewal handed on through its pipe costs it no wakeup (issue 25), it still acts on
//! the newest deadline it was handed when the time comes, and it stops the command by
//! the last one once no newer comes; with `run`'s shared timer (fd 4), re-armed with
//! each renewal as `run` does, it does not wake at all while renewals come.

use electd::time::boot_now;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ELECTCTL: &str = env!("CARGO_BIN_EXE_electctl");
const GRACE: Duration = Duration::from_millis(100);
const MARGIN: Duration = Duration::from_millis(20);
/// How far ahead of now each deadline handed on lies (a lease renewed every 20 ms).
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

/// When the enforcer sends SIGTERM for `deadline_ns` (as src/supervise/enforce.rs).
fn term_at(deadline_ns: u64) -> u64 {
    deadline_ns - ns(GRACE + MARGIN) + 5_000_000
}

/// Arms `tfd` for the boot-clock instant `at_ns`, as `run` does.
fn arm(tfd: &OwnedFd, at_ns: u64) {
    electd::supervise::enforce::arm(tfd, Some(at_ns));
}

/// A command in a process group of its own, its pidfd, and its enforcer reading the
/// write end returned; with `shared`, the enforcer sleeps on a timer this test holds
/// too (fd 4), armed for the first deadline.
fn start(deadline_ns: u64, shared: bool) -> (Child, Child, std::fs::File, Option<OwnedFd>) {
    start_cmd(deadline_ns, shared, &["sleep", "30"])
}

/// As `start`, for the command `argv`.
fn start_cmd(
    deadline_ns: u64,
    shared: bool,
    argv: &[&str],
) -> (Child, Child, std::fs::File, Option<OwnedFd>) {
    let cmd = Command::new(argv[0])
        .args(&argv[1..])
        .process_group(0)
        .spawn()
        .expect("sleep");
    // SAFETY: pidfd_open on our child's pid; a non-negative result is ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, cmd.id() as libc::pid_t, 0) };
    assert!(fd >= 0, "pidfd_open");
    // SAFETY: a fresh descriptor.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: fresh descriptors.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let raw = pidfd.as_raw_fd();
    let timer = shared.then(|| {
        // SAFETY: timerfd_create returns a new descriptor or -1.
        let fd = unsafe {
            libc::timerfd_create(libc::CLOCK_BOOTTIME, libc::TFD_CLOEXEC | libc::TFD_NONBLOCK)
        };
        assert!(fd >= 0, "timerfd_create");
        // SAFETY: a fresh descriptor.
        let t = unsafe { OwnedFd::from_raw_fd(fd) };
        arm(&t, term_at(deadline_ns));
        t
    });
    let traw = timer.as_ref().map_or(-1, |t| t.as_raw_fd());
    let mut e = Command::new(ELECTCTL);
    e.arg("__enforce")
        .arg(cmd.id().to_string())
        .arg(ns(GRACE).to_string())
        .arg(ns(MARGIN).to_string())
        .arg(deadline_ns.to_string())
        .arg("pidfd")
        .args(shared.then_some("timerfd"))
        .stdin(Stdio::from(r))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    // SAFETY: dup2 and fcntl are async-signal-safe; the pidfd goes on as fd 3 (dup2
    // clears close-on-exec; if it is fd 3 already, fcntl does).
    unsafe {
        e.pre_exec(move || {
            let t = if traw == 3 { libc::dup(traw) } else { traw };
            if raw == 3 {
                libc::fcntl(3, libc::F_SETFD, 0);
            } else if libc::dup2(raw, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if t == 4 {
                libc::fcntl(4, libc::F_SETFD, 0);
            } else if t >= 0 && libc::dup2(t, 4) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let enforcer = e.spawn().expect("electctl __enforce");
    drop(pidfd);
    (cmd, enforcer, std::fs::File::from(w), timer)
}

/// Renewals every 20 ms for 1.2 s (four times the first deadline's distance): the
/// command runs on, the enforcer wakes only when a deadline it knows comes near (about
/// every 185 ms here: 300 ms ahead, SIGTERM at 115 ms before), not once per renewal
/// (60); once they stop, the command is stopped by the last deadline handed on.
#[test]
fn renewals_cost_the_enforcer_no_wakeup_and_the_last_one_counts() {
    renewals_then_silence(false, 15);
}

/// As above with `run`'s shared timer, re-armed after each line as `run` does: the
/// enforcer does not wake while renewals come (at most twice: its start, a renewal
/// racing the timer), and the last deadline still counts.
#[test]
fn with_the_shared_timer_renewals_never_wake_the_enforcer() {
    renewals_then_silence(true, 2);
}

fn renewals_then_silence(shared: bool, most: u64) {
    let now = boot_now().as_nanos();
    let (mut cmd, mut enforcer, mut pipe, timer) = start(now + ns(AHEAD), shared);
    std::thread::sleep(Duration::from_millis(50));
    let before = voluntary_switches(enforcer.id());
    let t0 = Instant::now();
    let mut renewals = 0;
    let mut last = 0;
    while t0.elapsed() < Duration::from_millis(1200) {
        last = boot_now().as_nanos() + ns(AHEAD);
        writeln!(pipe, "D {last}").unwrap();
        if let Some(t) = &timer {
            arm(t, term_at(last));
        }
        renewals += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    let woke = voluntary_switches(enforcer.id()) - before;
    assert!(
        alive(&mut cmd),
        "the command was stopped while its deadline was being renewed"
    );
    eprintln!("{renewals} renewals, {woke} enforcer wakeups (shared timer: {shared})");
    assert!(
        woke <= most,
        "the enforcer woke {woke} times for {renewals} renewals (shared timer: {shared})"
    );
    // No more renewals: SIGTERM 115 ms before the last deadline (sleep exits on it).
    let term_at = term_at(last);
    let t1 = Instant::now();
    while alive(&mut cmd) && t1.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(2));
    }
    let gone = boot_now().as_nanos();
    assert!(!alive(&mut cmd), "the command outlived its last deadline");
    assert!(
        gone + 2_000_000 >= term_at,
        "stopped {} ms before the SIGTERM was due",
        (term_at - gone) / 1_000_000
    );
    assert!(
        gone <= last,
        "stopped {} ms after the last deadline",
        (gone - last) / 1_000_000
    );
    let _ = cmd.wait();
    let t2 = Instant::now();
    while alive(&mut enforcer) && t2.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!alive(&mut enforcer), "the enforcer outlived its command");
}

/// `T` (run sent SIGTERM itself) is read when the enforcer's time comes, so the
/// command gets one SIGTERM, not two; the SIGKILL still comes at the margin.
#[test]
fn a_term_from_run_is_seen_before_the_enforcer_acts() {
    let now = boot_now().as_nanos();
    // sleep dies on SIGTERM, so when it died says which signal came first.
    let deadline = now + ns(AHEAD);
    let (mut cmd, mut enforcer, mut pipe, _timer) = start(deadline, false);
    writeln!(pipe, "T").unwrap();
    let t0 = Instant::now();
    while alive(&mut cmd) && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(2));
    }
    let gone = boot_now().as_nanos();
    // With `T` read, the enforcer sends no SIGTERM: sleep lives until the SIGKILL at
    // the margin, 20 ms before the deadline, not 115 ms before it.
    let kill_at = deadline - ns(MARGIN);
    assert!(
        gone + 2_000_000 >= kill_at,
        "the command died {} ms before the SIGKILL was due: it got a SIGTERM after T",
        (kill_at - gone) / 1_000_000
    );
    assert!(gone <= deadline, "the command outlived the deadline");
    let _ = cmd.wait();
    let t2 = Instant::now();
    while alive(&mut enforcer) && t2.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Found by the review of issue 25's second round: a leader's renewals re-arm the
/// shared timer later each time, so its enforcer never woke to read its pipe; once
/// 64 KiB of lines had piled up every later one was lost, and when the renewals
/// stopped the enforcer acted on a deadline long past: SIGKILL at once instead of after
/// the grace. Renewals handed on as `run` hands them (`hand_on`), twice what a pipe
/// holds, then silence: the command, which ignores SIGTERM, dies by the SIGKILL at the
/// last deadline's margin, not sooner.
#[test]
fn a_pipe_of_renewals_never_fills_and_the_grace_is_kept() {
    use electd::supervise::enforce::hand_on;
    let now = boot_now().as_nanos();
    let argv = ["sh", "-c", "trap '' TERM; exec sleep 30"];
    let (mut cmd, mut enforcer, pipe, timer) = start_cmd(now + ns(AHEAD), true, &argv);
    let timer = timer.expect("shared timer");
    let pipe = OwnedFd::from(pipe);
    // SAFETY: fcntl on our own write end: run's writes never block either.
    unsafe { libc::fcntl(pipe.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    std::thread::sleep(Duration::from_millis(50));
    let mut last = 0;
    let renewals = 6000;
    for i in 0..renewals {
        last = boot_now().as_nanos() + ns(AHEAD);
        hand_on(&pipe, &timer, last, ns(GRACE), ns(MARGIN));
        if i % 20 == 19 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    assert!(alive(&mut cmd), "stopped while renewed");
    let t1 = Instant::now();
    while alive(&mut cmd) && t1.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let gone = boot_now().as_nanos();
    assert!(!alive(&mut cmd), "the command outlived its last deadline");
    let kill_at = last - ns(MARGIN);
    eprintln!(
        "{renewals} renewals handed on; the command died {:.1} ms before the last deadline \
         (its SIGKILL due {} ms before it)",
        (last as f64 - gone as f64) / 1e6,
        MARGIN.as_millis()
    );
    assert!(
        gone + 3_000_000 >= kill_at,
        "killed {:.1} ms before its SIGKILL was due: the enforcer acted on an old deadline",
        (kill_at as f64 - gone as f64) / 1e6
    );
    assert!(gone <= last, "the command outlived the deadline");
    let _ = cmd.wait();
    let t2 = Instant::now();
    while alive(&mut enforcer) && t2.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

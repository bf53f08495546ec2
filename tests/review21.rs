//! Review 21 of bc5fff7 (one stop timer): adversarial tests of the enforcer.
//!
//! The enforcer runs under `strace -e inject=timerfd_gettime:delay_enter=D:when=N`:
//! the N-th timerfd_gettime of the enforcer is delayed by D before the kernel runs it,
//! which is exactly what a stall (SIGSTOP, preemption) of the enforcer between the
//! clock read and its timerfd_gettime does. The two-timer enforcer (`due(kill)` = the
//! kernel's own verdict) was immune to a stall there; bc5fff7 derived instants as
//! `clock read before + time left`, so a stall of D made every derived instant D early,
//! and it acted on them. Since 8b868e8 a look gives only times left, from the one read,
//! and these tests pass; on bc5fff7 the first two failed (the third tests a rule
//! bc5fff7 dropped: the enforcer now looks again every 10 ms in the grace).

#[path = "common/enforce.rs"]
mod enforce;

use electd::supervise::enforce::Enforcer;
use electd::supervise::{StopTimers, stop_at};
use electd::time::boot_now;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const ELECTCTL: &str = env!("CARGO_BIN_EXE_electctl");
const MS: u64 = 1_000_000;

fn alive(child: &mut Child) -> bool {
    matches!(child.try_wait(), Ok(None))
}

fn strace_available() -> bool {
    Command::new("strace")
        .args(["-qq", "-o", "/dev/null", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

/// A wrapper that execs the real electctl under strace, the `when`-th
/// timerfd_gettime delayed by `delay_us` (a stall of the enforcer right before it).
fn wrapper(dir: &Path, delay_us: u64, when: u32) -> PathBuf {
    let p = dir.join("enforce-under-strace.sh");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\nexec strace -qq -o /dev/null -e trace=timerfd_gettime \
             -e inject=timerfd_gettime:delay_enter={delay_us}:when={when} {ELECTCTL} \"$@\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("review21-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The command `argv` in a group of its own and its enforcer (started as `exe`).
fn start(exe: &Path, timers: &StopTimers, grace: Duration, argv: &[&str]) -> (Child, Enforcer) {
    enforce::start_enforced(exe, timers, grace, argv)
}

fn gone_at(cmd: &mut Child, within: Duration) -> Option<u64> {
    let t = Instant::now();
    while alive(cmd) && t.elapsed() < within {
        std::thread::sleep(Duration::from_millis(1));
    }
    (!alive(cmd)).then(|| boot_now().as_nanos())
}

fn cleanup(mut cmd: Child, e: Enforcer) {
    // SAFETY: kill(2) on the group and the process this test started.
    unsafe {
        libc::kill(-(cmd.id() as i32), libc::SIGKILL);
        libc::kill(e.id() as i32, libc::SIGKILL);
    }
    let _ = cmd.wait();
}

/// Finding 1 (liveness, grace): a lease renewed every 20 ms, always about a second
/// ahead, and an enforcer stalled for 1.5 s right before its first timerfd_gettime
/// (SIGSTOP or preemption between a clock read and the syscall). On bc5fff7 it derived
/// on resuming a SIGKILL instant 1.5 s early, found it past and SIGKILLed the command,
/// without SIGTERM, while its lease was valid for most of a second more. The command
/// must live on.
#[test]
fn a_stalled_look_never_kills_a_command_whose_lease_is_renewed() {
    if !strace_available() {
        eprintln!("strace not available: skipped");
        return;
    }
    let dir = tempdir("renewed");
    let grace = Duration::from_millis(100);
    let ahead = 1_000 * MS;
    let timers = StopTimers::create().unwrap();
    timers
        .arm(stop_at(boot_now().as_nanos() + ahead, grace))
        .unwrap();
    let exe = wrapper(&dir, 1_500_000, 1);
    let (mut cmd, e) = start(&exe, &timers, grace, &["sleep", "30"]);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(3_000) {
        let now = boot_now().as_nanos();
        timers.arm(stop_at(now + ahead, grace)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        if !alive(&mut cmd) {
            break;
        }
    }
    let survived = alive(&mut cmd);
    let after = t0.elapsed();
    cleanup(cmd, e);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        survived,
        "the command was killed after {after:?} although its lease was renewed every 20 ms, \
         its SIGTERM instant never less than ~850 ms ahead: the enforcer stalled 1.5 s \
         between its clock read and timerfd_gettime and acted on instants 1.5 s early"
    );
}

/// Finding 1, at the SIGTERM instant (grace promise): grace 800 ms, no renewal; the
/// enforcer stalls 500 ms right before the look it takes when the stop timer fires.
/// When it resumes 300 ms are left before the SIGKILL instant, so SIGTERM and 300 ms of
/// grace are still possible (the two-timer enforcer gave exactly that); bc5fff7 derived
/// the SIGKILL instant 500 ms early and sent SIGKILL at once, no SIGTERM at all, 300 ms
/// before the SIGKILL instant armed. SIGTERM must come, then SIGKILL at the instant.
#[test]
fn a_stall_at_the_sigterm_instant_keeps_sigterm_and_its_grace() {
    if !strace_available() {
        eprintln!("strace not available: skipped");
        return;
    }
    let dir = tempdir("grace");
    let mark = dir.join("term");
    let grace = Duration::from_millis(800);
    let until = boot_now().as_nanos() + 1_500 * MS;
    let at = stop_at(until, grace);
    let timers = StopTimers::create().unwrap();
    timers.arm(at).unwrap();
    let exe = wrapper(&dir, 500_000, 2);
    let script = format!(
        "trap 'echo TERM > {}' TERM; while :; do sleep 0.01; done",
        mark.display()
    );
    let (mut cmd, e) = start(&exe, &timers, grace, &["sh", "-c", &script]);
    let gone = gone_at(&mut cmd, Duration::from_secs(4));
    let termed = mark.exists();
    cleanup(cmd, e);
    let _ = std::fs::remove_dir_all(&dir);
    let gone = gone.expect("the command outlived its lease end");
    assert!(gone <= until, "the command outlived the lease end");
    assert!(
        termed && gone + 5 * MS >= at.kill_ns,
        "SIGTERM received: {termed}; gone {:.0} ms before the SIGKILL instant armed \
         (the stall left 300 ms for SIGTERM and grace)",
        (at.kill_ns as f64 - gone as f64) / 1e6
    );
}

/// Finding 2 (latent safety): once the stop timer fired and SIGTERM went out, bc5fff7's
/// enforcer slept only on its private alarm, armed at the SIGKILL instant it read then,
/// so an arming that moved SIGKILL earlier was not seen until the alarm rang (the
/// two-timer enforcer slept on the SIGKILL timer itself, which any arming moved). Today's
/// daemon only arms lease ends that never move earlier; since 8b868e8 the enforcer looks
/// again every 10 ms in the grace, so S5 does not rest on that.
#[test]
fn an_earlier_arming_after_sigterm_is_seen_by_the_enforcer() {
    let dir = tempdir("earlier");
    let grace = Duration::from_millis(2_000);
    let now = boot_now().as_nanos();
    let timers = StopTimers::create().unwrap();
    // SIGTERM instant 100 ms from now, SIGKILL 2.1 s from now.
    timers.arm(stop_at(now + 2_120 * MS, grace)).unwrap();
    let argv = ["sh", "-c", "trap '' TERM; exec sleep 30"];
    let (mut cmd, e) = start(Path::new(ELECTCTL), &timers, grace, &argv);
    // Past the SIGTERM instant: the enforcer sent SIGTERM and sleeps on its alarm.
    std::thread::sleep(Duration::from_millis(400));
    assert!(alive(&mut cmd));
    // A new arming: SIGKILL 100 ms from now (SIGTERM long past).
    let now = boot_now().as_nanos();
    let until = now + 120 * MS;
    timers.arm(stop_at(until, grace)).unwrap();
    let gone = gone_at(&mut cmd, Duration::from_secs(3));
    cleanup(cmd, e);
    let _ = std::fs::remove_dir_all(&dir);
    let gone = gone.expect("not killed at all");
    assert!(
        gone <= until,
        "the command outlived the last lease end armed by {} ms",
        (gone - until) / 1_000_000
    );
}

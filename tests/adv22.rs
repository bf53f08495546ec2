//! Adversarial review 22 (SPEC section 8, S5; section 11 `electctl run`): `run`
//! stopped at an awkward moment.
//!
//! They are `#[ignore]`d on main until the fixes land, so that CI stays green while
//! they stay runnable: `cargo test --release --test adv22 -- --ignored --test-threads=1`.
//!
//! **These tests fail on ebe86c2 because of a real bug.** S5 is promised "also when
//! `electctl run` itself is stopped (SIGSTOP of its pid, a debugger)". The enforcer
//! that stops the command by the lease end whatever `run` does is started by `run`
//! *after* the command (`Supervisor::maybe_start`, src/supervise/command.rs: `cmd.spawn()`,
//! then `pidfd(child.id())`, then `Enforcer::start`). Between the command's exec and the
//! enforcer's fork nothing but `run` itself can stop the command: no enforcer exists
//! yet, and PR_SET_PDEATHSIG acts only on `run`'s death, not on a stop. A `run` stopped
//! in that window leaves the command running unsupervised for as long as the stop
//! lasts, through the lease end, while the next leader's processor starts.
//!
//! The stop is made exact with a debugger: `run` runs under
//! `strace -e inject=pidfd_open:delay_enter=D:when=1`, which holds `run` at the entry
//! of its first `pidfd_open`, the call right after the command's spawn and before the
//! enforcer's (a SIGSTOP landing there does the same; the window is a few hundred
//! microseconds a start, so a stop at a random instant hits it rarely, but not never).
//! While `run` is held, the leader yields (a planned handoff: its RESIGN rightly waits
//! for the lease end, since `run` cannot confirm) or its daemon crashes; the next
//! leader's processor starts while the old one still runs.
//!
//! Seen on ebe86c2: overlaps of 3.45 s (yield) and 3.43 s (crash) with a 4 s hold;
//! in the third test (PDEATHSIG race) 2.0 s, until the test itself killed the orphan.
//! Suggested fix: never let the command exec before its enforcer knows it, and make
//! the last look at the stop timer in the child itself. Start the enforcer *first*
//! (it already sleeps on the stop timer, its target group not yet known); spawn the
//! command with a `pre_exec` that (1) sets PR_SET_PDEATHSIG and `_exit`s unless
//! `getppid()` is still `run`'s pid, (2) makes its own process group, (3) writes its
//! pid into the enforcer's pipe (a write, async-signal-safe), (4) looks at the stop
//! timer (`timerfd_gettime` on the inherited descriptor) and fails unless the SIGTERM
//! instant is still ahead. Then whatever happens to `run` once the child exists, the
//! enforcer holds the group before the command runs, and a `run` stopped between its
//! `room()` and the fork finds no room in the child. (A gate the parent opens after
//! starting the enforcer does not work with `std::process::Command`: `spawn` waits
//! for the exec, so it would deadlock.)

mod common;

use common::{Cluster, Mode, Opts, SERIAL, boottime_ns, slacked, spans};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Not a test: the wrapped command, when this binary is re-executed by `electctl run`.
#[test]
fn cmd_helper() {
    common::cmd_helper();
}

const HBT_MS: u64 = 200;
const RTT_MS: u64 = 40;
const GRACE: &str = "250ms";
const LINGER_MS: &str = "50";
/// A killed processor's end is known to within one alive period (2 ms) and a little.
const SLOP_NS: u64 = 3_000_000;
/// How long the debugger holds `run` at its first `pidfd_open`.
const HOLD_US: u64 = 4_000_000;

fn strace_available() -> bool {
    Command::new("strace")
        .args(["-qq", "-o", "/dev/null", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

#[derive(Copy, Clone, Debug, PartialEq)]
enum Fault {
    Yield,
    Crash,
}

/// Kills `child` and every process below it (strace, run, the command, the enforcer).
fn kill_tree(child: &mut Child) {
    fn below(pid: u32, out: &mut Vec<u32>) {
        for (p, _) in common::children(pid) {
            below(p, out);
            out.push(p);
        }
    }
    let mut pids = Vec::new();
    below(child.id(), &mut pids);
    for p in pids {
        // SAFETY: kill(2) on a process this test started (directly or below).
        unsafe { libc::kill(p as i32, libc::SIGKILL) };
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The leader's `run` under a debugger that holds it between the command's spawn and
/// the enforcer's; `fault` on the leader meanwhile. Returns the overlaps found.
fn held_run(fault: Fault) -> Option<Vec<(common::Span, common::Span, u64)>> {
    if !strace_available() {
        eprintln!("strace not available: skipped");
        return None;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut o = Opts::new(Mode::Unicast, 3);
    o.hbt_ms = HBT_MS;
    o.rtt_ms = RTT_MS;
    let mut c = Cluster::build(&o);
    let log = c.dir.join("cmd.log").to_str().unwrap().to_string();
    let bound = o.failover_bound() + Duration::from_secs(1);
    let (leader, term) = c.agreement(bound);
    let env = [(common::CMD_LINGER_VAR, LINGER_MS)];
    let args = ["--grace", GRACE];
    let mut sups: Vec<Child> = Vec::new();
    for id in (1..=3).filter(|&i| i != leader) {
        let child = common::supervise_cmd(&c, id, &log, &args, &env)
            .stdin(Stdio::null())
            .stderr(Stdio::from(common::run_log(&c, id)))
            .spawn()
            .unwrap();
        sups.push(child);
    }
    // The same `electctl run` for the leader, under strace.
    let plain = common::supervise_cmd(&c, leader, &log, &args, &env);
    let mut traced = Command::new("strace");
    traced
        .args(["-qq", "-o", "/dev/null", "-e", "trace=pidfd_open", "-e"])
        .arg(format!("inject=pidfd_open:delay_enter={HOLD_US}:when=1"))
        .arg(plain.get_program())
        .args(plain.get_args());
    for (k, v) in plain.get_envs() {
        if let Some(v) = v {
            traced.env(k, v);
        }
    }
    let mut held = traced
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(common::run_log(&c, leader)))
        .spawn()
        .unwrap();
    // The leader's processor starts; its `run` is now held before the enforcer.
    let t0 = Instant::now();
    while !spans(&log).iter().any(|s| s.host == leader) {
        assert!(
            t0.elapsed() < slacked(Duration::from_secs(3)),
            "no processor on leader {leader} (term {term})\n{}",
            c.logs()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let fault_at = boottime_ns();
    eprintln!("leader {leader} term {term}: processor started; {fault:?} while run is held");
    match fault {
        Fault::Yield => {
            let (code, out, err) = common::electctl_at(&c.sock(leader), &["yield"]);
            eprintln!("yield: {code:?} {out} {err}");
        }
        Fault::Crash => c.kill(leader),
    }
    // Let the hold run out and the enforcer (started late) do its work.
    std::thread::sleep(Duration::from_micros(HOLD_US) + Duration::from_secs(2));
    let all = spans(&log);
    kill_tree(&mut held);
    for s in &mut sups {
        let _ = s.kill();
        let _ = s.wait();
    }
    for s in &all {
        eprintln!(
            "processor pid {} on {} term {}: {:.0} ms to {:.0} ms after the fault",
            s.pid,
            s.host,
            s.term,
            (s.start as f64 - fault_at as f64) / 1e6,
            (s.end as f64 - fault_at as f64) / 1e6
        );
    }
    assert!(
        all.iter().any(|s| s.host != leader),
        "the next leader's processor never started: the test proves nothing\n{}",
        c.logs()
    );
    Some(common::overlaps(&all, SLOP_NS))
}

fn assert_no_overlap(fault: Fault) {
    let Some(o) = held_run(fault) else { return };
    let worst = o.iter().map(|x| x.2).max().unwrap_or(0);
    assert!(
        o.is_empty(),
        "S5 broken: two processors ran at once (worst {:.0} ms) while the old leader's \
         `electctl run` was stopped between the command's spawn and its enforcer's: {o:?}",
        worst as f64 / 1e6
    );
}

/// `run` SIGKILLed while the command it just forked has not yet set PR_SET_PDEATHSIG
/// (the child's `pre_exec`, src/supervise/command.rs): the classic PDEATHSIG race. The
/// child sets it after its parent died, so it never fires, and no enforcer was started:
/// the command execs and runs unsupervised for ever. The leader then yields (its
/// supervisor left without confirming, so the RESIGN rightly waits for the lease end)
/// and the next leader's processor starts beside the orphan. The debugger (`strace -f`)
/// only makes the window (fork to prctl, microseconds) exact. FAILS on ebe86c2 (real
/// bug). Suggested fix: in `pre_exec`, after the prctl, `_exit` unless `getppid()` is
/// still the pid `run` had before the fork (the usual idiom), as in the module
/// comment's fix.
#[test]
#[ignore = "known S5 hole, open: run killed before its child sets PR_SET_PDEATHSIG (twenty-second round review, finding 2)"]
fn run_killed_before_its_child_sets_pdeathsig() {
    if !strace_available() {
        eprintln!("strace not available: skipped");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut o = Opts::new(Mode::Unicast, 3);
    o.hbt_ms = HBT_MS;
    o.rtt_ms = RTT_MS;
    let c = Cluster::build(&o);
    let log = c.dir.join("cmd.log").to_str().unwrap().to_string();
    let bound = o.failover_bound() + Duration::from_secs(1);
    let (leader, term) = c.agreement(bound);
    let env = [(common::CMD_LINGER_VAR, LINGER_MS)];
    let args = ["--grace", GRACE];
    let mut sups: Vec<Child> = Vec::new();
    for id in (1..=3).filter(|&i| i != leader) {
        let child = common::supervise_cmd(&c, id, &log, &args, &env)
            .stdin(Stdio::null())
            .stderr(Stdio::from(common::run_log(&c, id)))
            .spawn()
            .unwrap();
        sups.push(child);
    }
    let plain = common::supervise_cmd(&c, leader, &log, &args, &env);
    let mut traced = Command::new("strace");
    traced
        .args(["-f", "-qq", "-o", "/dev/null", "-e", "trace=prctl", "-e"])
        .arg(format!("inject=prctl:delay_enter={HOLD_US}:when=1"))
        .arg(plain.get_program())
        .args(plain.get_args());
    for (k, v) in plain.get_envs() {
        if let Some(v) = v {
            traced.env(k, v);
        }
    }
    let mut strace = traced
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(common::run_log(&c, leader)))
        .spawn()
        .unwrap();
    // run (strace's child) forks the command, whose prctl is held.
    let t0 = Instant::now();
    let (run, forked) = loop {
        let run = common::children(strace.id()).first().map(|p| p.0);
        if let Some(r) = run
            && let Some(f) = common::children(r).first().map(|p| p.0)
        {
            break (r, f);
        }
        assert!(
            t0.elapsed() < slacked(Duration::from_secs(3)),
            "run forked nothing\n{}",
            c.logs()
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    // SAFETY: kill(2) on the `electctl run` this test started (under strace).
    unsafe { libc::kill(run as i32, libc::SIGKILL) };
    let fault_at = boottime_ns();
    eprintln!("leader {leader} term {term}: run {run} killed, its child {forked} held at prctl");
    let (code, out, err) = common::electctl_at(&c.sock(leader), &["yield"]);
    eprintln!("yield: {code:?} {out} {err}");
    // The held prctl, then the exec'd processor's own first prctl (its test harness
    // names its thread: a new tracee, held as well), then a while.
    std::thread::sleep(Duration::from_micros(2 * HOLD_US) + Duration::from_secs(2));
    let all = spans(&log);
    for s in &all {
        eprintln!(
            "processor pid {} on {} term {}: {:.0} ms to {:.0} ms after the kill",
            s.pid,
            s.host,
            s.term,
            (s.start as f64 - fault_at as f64) / 1e6,
            (s.end as f64 - fault_at as f64) / 1e6
        );
    }
    let orphan_alive = common::alive(forked);
    // The orphan, if it ran: its group and the tracer.
    // SAFETY: kill(2) on processes this test started (directly or below).
    unsafe {
        libc::kill(-(forked as i32), libc::SIGKILL);
        libc::kill(forked as i32, libc::SIGKILL);
    }
    kill_tree(&mut strace);
    for s in &mut sups {
        let _ = s.kill();
        let _ = s.wait();
    }
    assert!(
        all.iter().any(|s| s.host != leader),
        "the next leader's processor never started: the test proves nothing\n{}",
        c.logs()
    );
    let o = common::overlaps(&all, SLOP_NS);
    assert!(
        o.is_empty(),
        "S5 broken: the command forked by a `run` killed before its PR_SET_PDEATHSIG ran \
         on unsupervised beside the next leader's (the orphan was still \
         alive at the end, 10 s after run's death: {orphan_alive}): {o:?}"
    );
}

/// Planned handoff (`yield`) while the leader's `run` is held between the command's
/// spawn and the enforcer's. FAILS on ebe86c2 (real bug, see the module comment).
#[test]
#[ignore = "known S5 hole, open: run stopped between its command and its enforcer (finding 1)"]
fn run_held_before_its_enforcer_starts_yield() {
    assert_no_overlap(Fault::Yield);
}

/// The leader's daemon crashes while its `run` is held between the command's spawn and
/// the enforcer's. FAILS on ebe86c2 (real bug, see the module comment).
#[test]
#[ignore = "known S5 hole, open: run stopped between its command and its enforcer (finding 1)"]
fn run_held_before_its_enforcer_starts_crash() {
    assert_no_overlap(Fault::Crash);
}

/// The second window of the same start (`maybe_start`): `run` stopped after its
/// `room()` look and before the fork. When it resumes it forks and execs the command
/// on a lease that ended while it was stopped (the next leader's processor already
/// runs), and only then starts the enforcer and looks at the stop timer again. The
/// command lives from its exec until `run`'s own next `enforce()` (a few ms): an
/// overlap as long as that. The debugger holds `run` at the entry of its first fork
/// (`clone`). Whether the processor stamps its start before the SIGKILL is a race of a
/// few ms, so this test may pass on ebe86c2 even though the window exists (it failed
/// on the first run: the old leader's processor stamped its start 3.42 s after the next
/// leader's had started, and was SIGKILLed within about a millisecond); it is here
/// because an enforcer-first fix alone does not close it: the command's child must
/// look at the stop timer itself, after the gate, before its exec.
#[test]
#[ignore = "known S5 hole, open: run stopped between its room check and the fork (finding 3)"]
fn run_held_between_its_room_check_and_the_fork() {
    if !strace_available() {
        eprintln!("strace not available: skipped");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut o = Opts::new(Mode::Unicast, 3);
    o.hbt_ms = HBT_MS;
    o.rtt_ms = RTT_MS;
    let c = Cluster::build(&o);
    let log = c.dir.join("cmd.log").to_str().unwrap().to_string();
    let bound = o.failover_bound() + Duration::from_secs(1);
    let (leader, term) = c.agreement(bound);
    let env = [(common::CMD_LINGER_VAR, LINGER_MS)];
    let args = ["--grace", GRACE];
    let mut sups: Vec<Child> = Vec::new();
    for id in (1..=3).filter(|&i| i != leader) {
        let child = common::supervise_cmd(&c, id, &log, &args, &env)
            .stdin(Stdio::null())
            .stderr(Stdio::from(common::run_log(&c, id)))
            .spawn()
            .unwrap();
        sups.push(child);
    }
    let plain = common::supervise_cmd(&c, leader, &log, &args, &env);
    let mut traced = Command::new("strace");
    traced
        .args([
            "-qq",
            "-o",
            "/dev/null",
            "-e",
            "trace=clone,clone3,fork,vfork",
            "-e",
        ])
        .arg(format!(
            "inject=clone,clone3,fork,vfork:delay_enter={HOLD_US}:when=1"
        ))
        .arg(plain.get_program())
        .args(plain.get_args());
    for (k, v) in plain.get_envs() {
        if let Some(v) = v {
            traced.env(k, v);
        }
    }
    let mut held = traced
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(common::run_log(&c, leader)))
        .spawn()
        .unwrap();
    // run registers, finds room and is held at its fork.
    let run_log = c.dir.join(format!("run-{leader}.log"));
    let t0 = Instant::now();
    while !std::fs::read_to_string(&run_log)
        .unwrap_or_default()
        .contains("holds the stop timers")
    {
        assert!(
            t0.elapsed() < slacked(Duration::from_secs(3)),
            "run on {leader} did not register\n{}",
            c.logs()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    let fault_at = boottime_ns();
    eprintln!("leader {leader} term {term}: run held before its fork; yield");
    let (code, out, err) = common::electctl_at(&c.sock(leader), &["yield"]);
    eprintln!("yield: {code:?} {out} {err}");
    std::thread::sleep(Duration::from_micros(HOLD_US) + Duration::from_secs(2));
    let all = spans(&log);
    kill_tree(&mut held);
    for s in &mut sups {
        let _ = s.kill();
        let _ = s.wait();
    }
    for s in &all {
        eprintln!(
            "processor pid {} on {} term {}: {:.1} ms to {:.1} ms after the yield",
            s.pid,
            s.host,
            s.term,
            (s.start as f64 - fault_at as f64) / 1e6,
            (s.end as f64 - fault_at as f64) / 1e6
        );
    }
    assert!(
        all.iter().any(|s| s.host != leader),
        "the next leader's processor never started: the test proves nothing\n{}",
        c.logs()
    );
    let o = common::overlaps(&all, 0);
    assert!(
        o.is_empty(),
        "S5 broken: a `run` held between its room check and its fork started the command \
         after its lease had ended, beside the next leader's: {o:?}"
    );
}

/// The state file names no server and no cluster (src/store.rs, `electd-state 4`), so a
/// server started on another server's file (a cloned disk image, a backup restored on
/// the wrong host, a `state` path without `{id}` and a changed `--id`) takes that
/// server's votes, highest term led and boot number as its own, silently, and loses
/// its own. **FAILED on 450c839 (a missing check, not a race); fixed by state file
/// version 5.** What that broke:
/// - S4/S1: server 3 voted Y in term E, server 1 voted X in E. On server 1's file,
///   server 3 may "resend" a VOTE for X in E (SPEC 5: E == voted_term and the same
///   choice), so with N = 3 both X (votes of 1 and 3) and Y (votes of 2 and 3) can
///   complete a majority in E;
/// - S3/S1: server 3's own `led_term` is lost, so late VOTEs of a term it led and
///   resigned can make it lead that term again (issue 10, finding 1, through a swap
///   of files instead of a lost mark);
/// - keyed clusters: its boot number may fall below the one its peers remember for it,
///   and they drop its datagrams as replays until it climbs back.
///
/// SPEC 4 says an unusable state file stops the daemon with a clear error and is never
/// silently reset; a file of another server is unusable for this one. The fix: the
/// file says `id N` and `cluster NAME` (version 5, src/store.rs), and a file whose id
/// or cluster differs is refused before anything is sent, naming both; files of
/// versions 1-4 are read as before and rewritten as version 5.
#[test]
fn a_state_file_of_another_server_is_refused() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = Cluster::start(Mode::Unicast, 3);
    let _ = c.agreement(Duration::from_secs(10));
    let child = c.terminate(3);
    assert!(
        common::wait_exit(child, Duration::from_secs(5)).is_some(),
        "electd 3 stopped"
    );
    // Server 1's file, copied while it runs (it is replaced atomically: always whole).
    std::fs::copy(c.dir.join("1.state"), c.dir.join("3.state")).unwrap();
    let copied = std::fs::read(c.dir.join("3.state")).unwrap();
    // Started as `Cluster::spawn` does, without its wait for the control socket: a
    // refused start never opens it.
    let child = Command::new(env!("CARGO_BIN_EXE_electd"))
        .arg("--config")
        .arg(c.conf_of(3))
        .args(["--id", "3", "--log-level", "debug"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(c.dir.join("3.log")).unwrap())
        .spawn()
        .unwrap();
    let code = common::wait_exit(child, Duration::from_millis(1_500));
    let log = c.log(3);
    assert!(
        code.is_some_and(|c| c != 0),
        "electd 3 started on server 1's state file and runs with its votes as its own \
         (S4 across the swap), exit {code:?}:\n{log}"
    );
    assert!(
        log.contains("belongs to server 1 of cluster")
            && log.contains("this is server 3 of cluster")
            && log.contains("3.state"),
        "the refusal names the file and both servers:\n{log}"
    );
    assert_eq!(
        std::fs::read(c.dir.join("3.state")).unwrap(),
        copied,
        "the refused file is left as it was (no boot written into it)"
    );
}

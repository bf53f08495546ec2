//! Adversarial review 23 (SPEC section 8, S5; section 11 `electctl run`): the new
//! start sequence of 09dc4db (the enforcer first; the command's own process announces
//! itself with `P<pid>` on the enforcer's pipe and looks at the stop timer before its
//! exec, `Enforcer::guard`), attacked at the points that the new order creates:
//!
//! - the command's process held at its `execve`, after its look found room, while the
//!   lease ends (`run` is blocked in `spawn` meanwhile: only the enforcer, which has
//!   the `P` line, can stop it);
//! - `run` SIGKILLed after starting the enforcer but before forking the command: the
//!   enforcer, which never gets a `P` line, must not be left behind;
//! - the enforcer SIGKILLed before the command's process announces itself: the
//!   command must not exec (its `P` write finds no reader), and `run` starts again;
//! - leadership flipped ten times in a row (start/stop churn): no enforcer, zombie or
//!   orphan left behind, no overlap.
//!
//! These pass on the code reviewed (acadbb2); each was shown to fail with the code
//! broken on purpose (see each test). One finding is open and its test ignored
//! (`run_answers_sigterm_while_its_commands_process_is_held_before_exec`: `run` is
//! blocked in `spawn` while its command's process is held before its exec; a hang,
//! not an S5 break): `cargo test --release --test adv23 -- --ignored`.
//!
//! A note on the method: a process the debugger holds at a system call (ptrace stop)
//! dies of a SIGKILL only once strace lets it go (it then skips the system call), so
//! these tests look for a *pending* SIGKILL, or kill strace to let a killed `run` die. The stops are made exact with a debugger
//! (`strace -e inject=SYSCALL:delay_enter=US:when=N`, counted per traced process), as
//! in tests/adv22.rs. Run: `cargo test --release --test adv23 -- --test-threads=1`.

mod common;
#[path = "common/straced.rs"]
mod straced;

use straced::{GRACE, HBT_MS, LINGER_MS, RTT_MS, Setup, sigkill_pending};

use common::{Cluster, Mode, Opts, SERIAL, boottime_ns, slacked, spans};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Not a test: the wrapped command, when this binary is re-executed by `electctl run`.
#[test]
fn cmd_helper() {
    common::cmd_helper();
}

/// A killed processor's end is known to within one alive period (2 ms) and a little.
const SLOP_NS: u64 = 3_000_000;
/// How long the debugger holds a process at the system call chosen.
const HOLD_US: u64 = 5_000_000;

#[derive(Copy, Clone, Debug, PartialEq)]
enum Fault {
    Yield,
    Crash,
}

/// The command's own process held at its `execve` (after its `P` line and its look at
/// the stop timer found room), while `fault` ends the lease. `run` is blocked in
/// `spawn` all along (it waits for the exec), so only the enforcer, which holds the
/// command's group from the `P` line, can stop it: by the lease's SIGKILL instant the
/// held process must be dead, and it must never have run as a processor.
///
/// `strace -f` holds the first `execve` of every process it traces: `run`'s own (at
/// its start), the enforcer's, then the command's. A held process dies of a SIGKILL
/// only when the debugger lets it go (a real SIGSTOP would not delay it), so the test
/// asserts that the SIGKILL is pending by the lease end. Shown able to fail: with the
/// enforcer's signals to the group disabled (`group()` in `State::act` turned into a
/// no-op), no SIGKILL was pending 3.5 s after the fault, past the lease end.
fn command_held_at_its_exec(fault: Fault) {
    let inject = format!("inject=execve:delay_enter={HOLD_US}:when=1");
    let args = ["-f", "-e", "trace=execve", "-e", &inject].map(String::from);
    let Some(mut s) = Setup::start(&args, &[]) else {
        return;
    };
    // run's own exec is held, then the enforcer's; then the command's process is
    // forked (it still shows run's command line: its exec is held) beside the enforcer.
    let (enforcer, held) = s.wait_children(
        Duration::from_micros(3 * HOLD_US) + Duration::from_secs(3),
        "run started no enforcer and command",
        |_, kids| {
            let e = kids.iter().find(|(_, c)| c.contains("__enforce"))?.0;
            let h = kids.iter().find(|(_, c)| !c.contains("__enforce"))?.0;
            Some((e, h))
        },
    );
    // Held at its exec, not yet the processor: its command line is still run's.
    std::thread::sleep(Duration::from_millis(100));
    let cmdline = String::from_utf8_lossy(
        &std::fs::read(format!("/proc/{held}/cmdline")).unwrap_or_default(),
    )
    .replace('\0', " ");
    assert!(
        cmdline.contains(" run "),
        "the command's process {held} is not held before its exec: {cmdline:?}"
    );
    let fault_at = boottime_ns();
    eprintln!(
        "leader {} term {}: command's process {held} held at execve (enforcer {enforcer}); \
         {fault:?}",
        s.leader, s.term
    );
    match fault {
        Fault::Yield => s.yield_leader(),
        Fault::Crash => s.c.kill(s.leader),
    }
    // The lease (about a second here) has ended well before the hold does.
    std::thread::sleep(Duration::from_millis(3_500));
    // A process held by the debugger dies of a SIGKILL only when let go (and then
    // before its exec: the kernel skips a system call entered with a fatal signal
    // pending), so what counts is that the SIGKILL was sent by now.
    let killed = !common::alive(held) || sigkill_pending(held);
    let enforcer_alive = common::alive(enforcer);
    std::thread::sleep(Duration::from_micros(HOLD_US) - Duration::from_millis(3_500));
    std::thread::sleep(Duration::from_secs(2));
    let run_log = s.run_log();
    let leader = s.leader;
    let all = s.finish(fault_at, true);
    let mine: Vec<_> = all.iter().filter(|p| p.host == leader).collect();
    let o = common::overlaps(&all, SLOP_NS);
    assert!(
        killed && mine.is_empty() && o.is_empty(),
        "S5 broken: the command's process held at its exec had no SIGKILL 3.5 s after the \
         {fault:?} (killed: {killed}; enforcer alive: {enforcer_alive}), processors on the \
         old leader {mine:?}, overlaps {o:?}\nrun's log:\n{run_log}"
    );
}

#[test]
fn command_held_at_its_exec_yield() {
    command_held_at_its_exec(Fault::Yield);
}

#[test]
fn command_held_at_its_exec_crash() {
    command_held_at_its_exec(Fault::Crash);
}

/// The leader's `run` held at its second fork (the command's; the first is the
/// enforcer's), so that the enforcer is running and waits for a `P` line.
fn held_at_the_commands_fork() -> Option<(Setup, u32, u32)> {
    let inject = format!("inject=clone,clone3,fork,vfork:delay_enter={HOLD_US}:when=2");
    let args = ["-e", "trace=clone,clone3,fork,vfork", "-e", &inject].map(String::from);
    let s = Setup::start(&args, &[])?;
    let (run, enforcer) = s.wait_children(
        Duration::from_secs(3),
        "run started no enforcer",
        |run, kids| {
            let e = kids.iter().find(|(_, c)| c.contains("__enforce"))?.0;
            Some((run, e))
        },
    );
    // run is now at (or about to reach) its held fork; it forks nothing else.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        common::children(run).len(),
        1,
        "run forked its command already: not held at its fork"
    );
    Some((s, run, enforcer))
}

/// `run` SIGKILLed after starting the enforcer and before forking the command: the
/// enforcer never gets a `P` line, and the pipe closes with `run`'s death. It must
/// exit (an enforcer per start left behind would leak one process per crash of `run`,
/// each holding a copy of the stop timer). Shown able to fail: with `announced`
/// (src/supervise/enforce.rs) not returning on a closed pipe, the enforcer lived on.
#[test]
fn run_killed_before_the_commands_fork_leaves_no_enforcer() {
    let Some((mut s, run, enforcer)) = held_at_the_commands_fork() else {
        return;
    };
    // SAFETY: kill(2) on the `electctl run` this test started (under strace).
    unsafe { libc::kill(run as i32, libc::SIGKILL) };
    // A process held by the debugger dies of its SIGKILL only once let go: strace is
    // killed (it detaches), and `run` dies at its held fork without forking.
    let _ = s.traced.kill();
    let _ = s.traced.wait();
    let fault_at = boottime_ns();
    let t0 = Instant::now();
    while common::alive(run) && t0.elapsed() < slacked(Duration::from_secs(2)) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(!common::alive(run), "run {run} did not die");
    let t0 = Instant::now();
    while common::alive(enforcer) && t0.elapsed() < slacked(Duration::from_secs(2)) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let left = common::alive(enforcer);
    let gone_after = t0.elapsed();
    if left {
        eprintln!("DIAG {}", diag(run, enforcer));
        // SAFETY: kill(2) on the enforcer this test's `run` started.
        unsafe { libc::kill(enforcer as i32, libc::SIGKILL) };
    }
    let leader = s.leader;
    let all = s.finish(fault_at, false);
    assert!(
        !left,
        "the enforcer {enforcer} of a `run` killed before its command's fork was still \
         alive {gone_after:?} after run's death"
    );
    assert!(
        all.iter().all(|p| p.host != leader),
        "a processor ran on {leader}, whose run died before its fork: {all:?}"
    );
}

/// The enforcer SIGKILLed after its start and before the command's process announces
/// itself (`run` held at the command's fork): the command's `P` write finds no reader,
/// so its start fails (EPIPE), or `run` kills it first, and it never execs without an
/// enforcer; `run` then starts
/// a new enforcer and the command. Shown able to fail: without the check of the write
/// in `Enforcer::guard`, the command exec'd with its enforcer dead, and `run` logged
/// "the lease enforcer process exited" and stopped it (since 8a030d1 in 2 of 3 runs:
/// in the others `run` saw the enforcer gone before the exec and killed the process).
#[test]
fn enforcer_killed_before_the_p_line() {
    let Some((s, run, enforcer)) = held_at_the_commands_fork() else {
        return;
    };
    // SAFETY: kill(2) on the enforcer this test's `run` started.
    unsafe { libc::kill(enforcer as i32, libc::SIGKILL) };
    let fault_at = boottime_ns();
    // The hold ends; the start fails; the next start (after the backoff) holds.
    let started = s.wait_children(
        Duration::from_micros(HOLD_US) + Duration::from_secs(3),
        "run did not start a new enforcer and command",
        |_, kids| {
            let e = kids
                .iter()
                .find(|(p, c)| *p != enforcer && c.contains("__enforce"))?
                .0;
            let c = kids.iter().find(|(_, c)| c.contains("cmd_helper"))?.0;
            Some((e, c))
        },
    );
    std::thread::sleep(Duration::from_millis(500));
    let run_log = s.run_log();
    let alive_run = common::alive(run);
    let leader = s.leader;
    let all = s.finish(fault_at, false);
    eprintln!("{run_log}");
    assert!(alive_run, "run died");
    // It gives up (EPIPE), or run, seeing the enforcer gone first, kills it before its
    // exec (8a030d1: run no longer waits for the exec); it never runs without one, so
    // run never has to SIGTERM an exec'd command for the enforcer's loss.
    assert!(
        (run_log.contains("the lease enforcer exited before the command's exec")
            || run_log
                .contains("the lease enforcer process exited: SIGKILL to the command's process"))
            && !run_log.contains("the lease enforcer process exited: SIGTERM"),
        "the command's process of a start whose enforcer was gone must give up before \
         its exec (EPIPE), not run without one:\n{run_log}"
    );
    assert_eq!(
        all.iter().filter(|p| p.host == leader).count(),
        1,
        "one processor on {leader} (the second start's, {started:?}): {all:?}\n{run_log}"
    );
}

/// What holds the enforcer's stdin pipe, and the states of `run` and the enforcer.
fn diag(run: u32, enforcer: u32) -> String {
    let stat = |p: u32| std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
    let pipe = std::fs::read_link(format!("/proc/{enforcer}/fd/0"))
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mut holders = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(format!("/proc/{p}/fd")) else {
            continue;
        };
        for f in fds.flatten() {
            if std::fs::read_link(f.path()).is_ok_and(|l| l.display().to_string() == pipe) {
                let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                holders.push(format!(
                    "{p} fd {:?} {}",
                    f.file_name(),
                    String::from_utf8_lossy(&cmd).replace('\0', " ")
                ));
            }
        }
    }
    format!(
        "run: {}\nenforcer: {}\npipe {pipe} held by {holders:#?}\nenforcer wchan {}",
        stat(run),
        stat(enforcer),
        std::fs::read_to_string(format!("/proc/{enforcer}/wchan")).unwrap_or_default()
    )
}

/// **Known, open (a hang, not an S5 break).** `run` waits in `Command::spawn` until the
/// command's process has exec'd (std's CLOEXEC error pipe), and since 09dc4db that
/// process runs `Enforcer::guard` first (sigactions, prctl, getppid, getpid, write,
/// timerfd_gettime). While it is held there (a debugger, or a SIGSTOP of it) `run` is
/// blocked: it answers no signal, no leadership line and no `released`, and with a
/// real SIGSTOP before the `P` line it stays so for ever (the enforcer knows no pid
/// to signal, and a leader's lease is renewed, so the stop timer never fires; the
/// server leads with no processor). Here the command's process is held 5 s at its
/// prctl and `run` gets SIGTERM 0.1 s into the hold: `run` exited 4.9 s after the
/// SIGTERM (the rest of the hold; then the command exec'd, got its SIGTERM and exited
/// within 1 ms), instead of at once. Not new in kind (the pre_exec used to call prctl alone, so the window was one
/// system call), but wider now. Suggested fix: fork without waiting for the exec
/// (fork/exec by hand with the CLOEXEC error pipe watched in `run`'s ppoll beside the
/// command's pidfd, so a start in progress is one more state of the event loop), or
/// bound the wait and SIGKILL a process that has not exec'd within it.
#[test]
fn run_answers_sigterm_while_its_commands_process_is_held_before_exec() {
    let inject = format!("inject=prctl:delay_enter={HOLD_US}:when=1");
    let args = ["-f", "-e", "trace=prctl", "-e", &inject].map(String::from);
    let Some(s) = Setup::start(&args, &[]) else {
        return;
    };
    // run's own first prctl (it becomes a child subreaper) is held first.
    let (run, held) = s.wait_children(
        Duration::from_secs(3) + Duration::from_micros(HOLD_US),
        "run forked no command",
        |run, kids| {
            // The enforcer (exec'd: its command line names `__enforce`), then the
            // command's process (before its exec, with run's command line).
            kids.iter().find(|(_, c)| c.contains("__enforce"))?;
            let h = kids.iter().find(|(_, c)| !c.contains("__enforce"))?.0;
            Some((run, h))
        },
    );
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: kill(2) on the `electctl run` this test started (under strace).
    unsafe { libc::kill(run as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    while common::alive(run) && t0.elapsed() < Duration::from_micros(2 * HOLD_US) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = t0.elapsed();
    let run_log = s.run_log();
    let _ = s.finish(boottime_ns(), false);
    eprintln!("run exited {took:?} after its SIGTERM (command's process {held} held)");
    assert!(
        took < slacked(Duration::from_millis(1_000)),
        "run took {took:?} to stop on SIGTERM while its command's process {held} was \
         held before its exec (a SIGSTOP would make it for ever):\n{run_log}"
    );
}

/// The command's process held before its exec for longer than `run` allows a start
/// (`START_LIMIT`, 10 s; a debugger here, a SIGSTOP or a starved machine in life): `run`
/// must not wait for it for ever, leading with no processor. It SIGKILLs it by the
/// limit, says so, and starts the command again; once nothing holds the new process,
/// the processor runs. Held here at its `prctl` for 8 s (strace holds the first prctl
/// of every process, so the second start is held too, until strace is killed and lets
/// it go). Fails on acadbb2, whose `run` waited in `spawn` for the whole hold.
#[test]
fn a_start_held_past_the_limit_is_killed_and_made_again() {
    const LONG_US: u64 = 13_000_000;
    let inject = format!("inject=prctl:delay_enter={LONG_US}:when=1");
    let args = ["-f", "-e", "trace=prctl", "-e", &inject].map(String::from);
    let Some(s) = Setup::start(&args, &[]) else {
        return;
    };
    let first = |_: u32, kids: &[(u32, String)]| {
        kids.iter().find(|(_, c)| c.contains("__enforce"))?;
        Some(kids.iter().find(|(_, c)| !c.contains("__enforce"))?.0)
    };
    // run's own first prctl (it becomes a child subreaper) is held first.
    let within = Duration::from_secs(3) + Duration::from_micros(LONG_US);
    let (run, held) = s.wait_children(within, "run forked no command", |r, k| {
        Some((r, first(r, k)?))
    });
    let t0 = Instant::now();
    let said = "did not reach its exec within 10 s";
    while !s.run_log().contains(said) && t0.elapsed() < slacked(Duration::from_secs(12)) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = t0.elapsed();
    let killed = !common::alive(held) || sigkill_pending(held);
    let run_log = s.run_log();
    assert!(
        run_log.contains(said) && killed,
        "the command's process {held} held before its exec was not killed by the start \
         limit ({took:?} after its fork; SIGKILL sent: {killed}):\n{run_log}"
    );
    assert!(
        took > Duration::from_millis(9_500),
        "killed {took:?} after its fork, before the 10 s limit"
    );
    // Started again (after the 0.1 s backoff): a new process, held in turn.
    let again = s.wait_children(Duration::from_secs(3), "run did not start again", |r, k| {
        first(r, k).filter(|&p| p != held)
    });
    // Let every held process go: kill strace alone (its tracees are detached).
    // SAFETY: kill(2) on the strace this test started.
    unsafe { libc::kill(s.traced.id() as i32, libc::SIGKILL) };
    let t1 = Instant::now();
    let leader = s.leader;
    let runs_here = |log: &str| spans(log).iter().any(|p| p.host == leader);
    while !runs_here(&s.log) && t1.elapsed() < slacked(Duration::from_secs(3)) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let ran = runs_here(&s.log);
    let run_log = s.run_log();
    // run is no longer below strace: end it by its id (its processor dies with it).
    // SAFETY: kill(2) on the `electctl run` this test started.
    unsafe { libc::kill(run as i32, libc::SIGKILL) };
    let _ = s.finish(boottime_ns(), false);
    eprintln!("killed {took:?} after its fork; started again as {again}; processor ran: {ran}");
    assert!(
        ran,
        "the processor never ran once the start was let go:\n{run_log}"
    );
}

/// Leadership flipped again and again (`yield` at whichever server leads, some a few
/// ms after the last handoff, others after the processor started), with `run` on every
/// server: each start makes an enforcer, and every start that ends (a planned stop, a
/// start refused, a command gone) must take its enforcer with it. At rest afterwards,
/// each `run` may hold one enforcer (its running command's) and no zombie, and no
/// enforcer may be left whose parent is not a `run` (an orphan). Also: no two
/// processors overlapped. Shown able to fail: with the enforcer's two exit paths (the
/// leader's pidfd, the empty group) turned into a sleep, enforcers piled up (one per
/// start) under each `run`.
#[test]
fn leadership_churn_leaks_no_enforcer() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut o = Opts::new(Mode::Unicast, 3);
    o.hbt_ms = HBT_MS;
    o.rtt_ms = RTT_MS;
    let c = Cluster::build(&o);
    let log = c.dir.join("cmd.log").to_str().unwrap().to_string();
    let bound = o.failover_bound() + Duration::from_secs(1);
    let _ = c.agreement(bound);
    let env = [(common::CMD_LINGER_VAR, LINGER_MS)];
    let mut runs: Vec<Child> = (1..=3)
        .map(|id| {
            common::supervise_cmd(&c, id, &log, &["--grace", GRACE], &env)
                .stdin(Stdio::null())
                .stderr(Stdio::from(common::run_log(&c, id)))
                .spawn()
                .unwrap()
        })
        .collect();
    let pauses_ms = [30, 600, 5, 300, 60, 900, 10, 400, 150, 700];
    let mut yields = 0;
    for p in pauses_ms {
        let (l, _) = c.agreement(bound);
        let (code, _, _) = common::electctl_at(&c.sock(l), &["yield"]);
        yields += usize::from(code == Some(0));
        std::thread::sleep(Duration::from_millis(p));
    }
    let (l, _) = c.agreement(bound);
    // At rest: the leader's processor runs, the handoffs are over.
    std::thread::sleep(Duration::from_secs(3));
    let run_pids: Vec<u32> = runs.iter().map(Child::id).collect();
    let mut per_run = Vec::new();
    for &r in &run_pids {
        let kids = common::children(r);
        let enforcers = kids.iter().filter(|(_, c)| c.contains("__enforce")).count();
        let zombies = kids.iter().filter(|(p, _)| !common::alive(*p)).count();
        per_run.push((r, enforcers, zombies));
    }
    // Enforcers of this cluster (their timer is no clue; their command line is the same
    // for all): any whose parent is not one of these runs is an orphan, if it belongs to
    // this test (a child of this process's tree was reparented: look for ones started
    // after this test began and not under another live `electctl run`).
    let orphans: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(0);
            let env = std::fs::read(format!("/proc/{p}/environ")).unwrap_or_default();
            String::from_utf8_lossy(&cmd).contains("__enforce")
                && !run_pids.contains(&ppid)
                && String::from_utf8_lossy(&env).contains(&log)
        })
        .collect();
    let all = spans(&log);
    for r in &mut runs {
        let _ = r.kill();
        let _ = r.wait();
    }
    eprintln!("{yields} yields; leader {l}; per run (pid, enforcers, zombies): {per_run:?}");
    let o = common::overlaps(&all, SLOP_NS);
    assert!(o.is_empty(), "S5 broken under churn: {o:?}");
    assert!(
        per_run.iter().all(|&(_, e, z)| e <= 1 && z == 0) && orphans.is_empty(),
        "enforcers left behind after {yields} handoffs: per run (pid, enforcers, zombies) \
         {per_run:?}, orphans {orphans:?}"
    );
    assert!(
        all.len() > yields / 2,
        "too few processors ran ({}) for {yields} yields: the test proves little",
        all.len()
    );
}

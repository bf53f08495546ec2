//! `electctl run` (issue 4): three servers, each with its command wrapped in
//! `electctl run`; the leader is killed and frozen again and again; the commands stamp
//! their start, liveness and stop on CLOCK_BOOTTIME into one shared file, and no two
//! may ever have run at the same moment.

mod common;

use common::{Cluster, Mode, Netns, SERIAL, spans, supervise};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Not a test: the wrapped command, when this binary is re-executed by `electctl run`.
#[test]
fn cmd_helper() {
    common::cmd_helper();
}

fn running_pids(log: &str) -> Vec<u32> {
    spans(log)
        .into_iter()
        .filter(|s| !s.stopped)
        .map(|s| s.pid)
        .collect()
}

#[test]
fn wrapped_command_never_runs_on_two_servers() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // In a namespace of its own the leader can really be partitioned (nftables on its
    // loopback); without root, kills and freezes only.
    let ns = Netns::create("run");
    let mut c = match &ns {
        Some(ns) => Cluster::start_in(ns, 3),
        None => Cluster::start(Mode::Unicast, 3),
    };
    let log = c.dir.join("cmd.log").to_str().unwrap().to_string();
    // Stopped when dropped, on a failed assertion too.
    let mut sups = common::Supervisors((1..=3).map(|id| supervise(&c, id, &log)).collect());
    // The pid alone could not be replayed: the seed is printed with the variable that
    // replays it.
    let seed = common::env_seed("ELECTD_RUN_SEED");
    let mut rng = electd::rng::SplitMix64::new(seed);
    eprintln!("seed {seed} (replay: ELECTD_RUN_SEED={seed})");
    let mut faults = 0;
    for round in 0..8 {
        let (leader, _) = c.agreement(Duration::from_secs(5));
        // Wait until the leader's command runs.
        let deadline = Instant::now() + common::slacked(Duration::from_secs(3));
        while running_pids(&log).is_empty() {
            assert!(
                Instant::now() < deadline,
                "round {round}: no command started on leader {leader}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(rng.below(200)));
        let fault = rng.below(if ns.is_some() { 3 } else { 2 });
        eprintln!(
            "round {round}: leader {leader}, fault {}",
            ["kill", "freeze", "partition"][fault as usize]
        );
        if fault == 0 {
            c.kill(leader);
            std::thread::sleep(Duration::from_millis(400 + rng.below(400)));
            c.spawn(leader);
        } else if fault == 2 {
            // Cut off, still running: its daemon steps down, its supervisor must stop.
            let ns = ns.as_ref().expect("partitions need the namespace");
            ns.isolate_port(c.ports[usize::from(leader) - 1]);
            std::thread::sleep(Duration::from_millis(600 + rng.below(600)));
            ns.heal();
        } else {
            // Frozen past its lease: the others elect; it must step down when it thaws.
            common::signal(c.child(leader), libc::SIGSTOP);
            std::thread::sleep(Duration::from_millis(500 + rng.below(500)));
            common::signal(c.child(leader), libc::SIGCONT);
        }
        faults += 1;
        // Let a restarted server pass its quiet period before the next fault.
        std::thread::sleep(Duration::from_millis(400));
    }
    sups.stop();
    let spans = spans(&log);
    eprintln!("{faults} faults, {} command runs", spans.len());
    assert!(
        spans.len() > faults / 2,
        "seed {seed}: the command moved between servers: {spans:?}"
    );
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            let overlap = a.start < b.end && b.start < a.end;
            assert!(
                !overlap,
                "two commands ran at once (seed {seed}): {a:?} and {b:?}"
            );
        }
    }
    assert!(
        spans.iter().all(|s| s.stopped),
        "every command was stopped by SIGTERM within the grace: {spans:?}"
    );
}

/// A command that exits while this server leads is started again, with a doubling
/// backoff (0.1 s, 0.2 s, 0.4 s, ...), and each run gets the term in ELECTD_TERM.
#[test]
fn exited_command_is_restarted_with_backoff() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::start(Mode::Unicast, 1);
    c.agreement(Duration::from_secs(3));
    let log = c.dir.join("starts.log");
    let mut sup = Command::new(env!("CARGO_BIN_EXE_electctl"))
        .arg("--socket")
        .arg(c.sock(1))
        .args(["run", "--"])
        .args([
            "sh",
            "-c",
            &format!("echo \"$ELECTD_TERM\" >> {}", log.display()),
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1400));
    common::signal(&sup, libc::SIGTERM);
    let _ = sup.wait();
    let starts = std::fs::read_to_string(&log).unwrap_or_default();
    let terms: Vec<&str> = starts.lines().collect();
    // Starts at about 0, 0.1, 0.3, 0.7 s (and 1.5 s, past the window): 3 to 5 runs, not
    // the ~70 a restart every poll would give.
    assert!(
        (3..=5).contains(&terms.len()),
        "{} starts: {terms:?}",
        terms.len()
    );
    assert!(
        terms.iter().all(|t| t.parse::<u64>().is_ok_and(|t| t >= 1)),
        "{terms:?}"
    );
}

/// A server up for three years: every process runs in a time namespace whose boot and
/// monotonic clocks are three years ahead, so the boot-clock nanoseconds of every
/// status and supervisor line (`now_ns`, `lease_until_ns`) pass 2^53, where an f64
/// no longer holds them exactly (electctl's JSON parser read every number as one, and
/// rounded them by up to 8 ns here). The cluster elects, `electctl run` runs the
/// command on the leader alone, and three yields move it, never two at once, each stop
/// graceful, with the command's own stamps on the namespace's clock.
#[test]
fn a_server_up_for_three_years_runs_its_command_once_at_a_time() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Three years in seconds; in nanoseconds far past 2^53 (104 days).
    const YEARS3: u64 = 3 * 365 * 86_400;
    const { assert!(YEARS3 * 1_000_000_000 > 1 << 53) };
    let Some(tns) = common::TimeNs::create(YEARS3) else {
        return;
    };
    let mut o = common::Opts::new(Mode::Unicast, 3);
    o.run = 0;
    let bound = o.failover_bound();
    let mut c = Cluster::build(&o);
    c.prefix = tns.prefix();
    for id in 1..=3 {
        c.spawn(id);
    }
    let (mut leader, mut term) = c.agreement(bound);
    let st = c.status(leader).expect("status");
    let now_ns = st.get("now_ns").and_then(electd::json::Value::as_u64);
    assert!(
        now_ns.is_some_and(|n| n > YEARS3 * 1_000_000_000),
        "the daemon's boot clock is three years ahead: {now_ns:?}"
    );
    let log = c.dir.join("cmd.log").to_str().unwrap().to_string();
    let mut sups = common::Supervisors((1..=3).map(|id| supervise(&c, id, &log)).collect());
    let runs_on = |host: u16| {
        common::wait_for("the leader's command", bound * 2, || {
            spans(&log)
                .into_iter()
                .find(|s| s.host == host && !s.stopped)
        })
    };
    runs_on(leader);
    for _ in 0..3 {
        let out = c.request(leader, "yield").unwrap_or_default();
        assert!(out.contains("ok"), "yield on {leader}: {out}");
        let (next, _) = c.new_leader_since(leader, term, Instant::now(), bound);
        runs_on(next);
        (leader, term) = c.agreement(bound);
    }
    sups.stop();
    let spans = spans(&log);
    eprintln!(
        "three years up: {} command runs, the first started at {} ns",
        spans.len(),
        spans.first().map_or(0, |s| s.start)
    );
    assert!(
        spans.len() >= 4,
        "the command moved with each yield: {spans:?}"
    );
    assert!(
        spans.iter().all(|s| s.start > 1 << 53),
        "the commands stamped the namespace's clock: {spans:?}"
    );
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            assert!(
                !(a.start < b.end && b.start < a.end),
                "two commands ran at once: {a:?} and {b:?}"
            );
        }
    }
    assert!(
        spans.iter().all(|s| s.stopped),
        "every command was stopped by SIGTERM within the grace: {spans:?}"
    );
}

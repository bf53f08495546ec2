//! S5 end to end (SPEC section 8, issue 10 item 4): a command wrapped in `electctl run`
//! never runs on two servers at once, through crashes, freezes and every planned handoff,
//! and on a planned handoff (yield, SIGTERM to electd) it gets SIGTERM and its grace.
//!
//! Three real daemons on loopback, `electctl run` on each around this test binary
//! re-executed as the processor (`common::cmd_helper`). The processor stamps its start,
//! that it is alive every 2 ms, the moment SIGTERM arrived and its own exit on
//! CLOCK_BOOTTIME, one clock for every process on this host, into one shared file; on
//! SIGTERM it keeps running 50 ms and then exits by itself. Faults come in a seeded
//! random order: `ELECTD_S5_SEED=N` replays one.
//!
//! The checker is proved able to fail by `sabotaged_resign_overlaps`: with the RESIGN
//! sent before the supervisors confirm (`ELECTD_TEST_SABOTAGE=resign_early`), the same
//! checker must find two processors running at once.

mod common;

use common::{Cluster, Mode, Opts, SERIAL, Span, Supervisors, boottime_ns, slacked, spans};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Not a test: the wrapped command, when this binary is re-executed by `electctl run`.
#[test]
fn cmd_helper() {
    common::cmd_helper();
}

const HBT_MS: u64 = 200;
const RTT_MS: u64 = 40;
/// How long the processor keeps running after SIGTERM.
const LINGER_MS: u64 = 50;
const GRACE: &str = "250ms";
/// A killed processor's end is known to within one alive period (2 ms) and a little.
const SLOP_NS: u64 = 3_000_000;

#[derive(Copy, Clone, Debug, PartialEq)]
enum Fault {
    /// `electctl yield` on the leader: planned.
    Yield,
    /// SIGTERM to the leader's electd, then a restart: planned.
    Terminate,
    /// SIGKILL of the leader's electd, then a restart.
    Crash,
    /// SIGSTOP of the leader's electd past its lease, then SIGCONT.
    Freeze,
}

impl Fault {
    fn planned(self) -> bool {
        matches!(self, Fault::Yield | Fault::Terminate)
    }
}

/// One fault as it happened: on which leader, at which boot-clock instant.
#[derive(Debug)]
struct Done {
    fault: Fault,
    leader: u16,
    at_ns: u64,
}

fn seed() -> u64 {
    std::env::var("ELECTD_S5_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| boottime_ns() ^ u64::from(std::process::id()))
}

fn s5_cluster(env: &[(&str, &str)]) -> (Cluster, Opts) {
    let mut o = Opts::new(Mode::Unicast, 3);
    o.hbt_ms = HBT_MS;
    o.rtt_ms = RTT_MS;
    o.env = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (Cluster::build(&o), o)
}

fn supervisors(c: &Cluster, log: &str, poll: &str, linger_ms: u64) -> Supervisors {
    let linger = linger_ms.to_string();
    Supervisors(
        (1..=3)
            .map(|id| {
                common::supervise_with(
                    c,
                    id,
                    log,
                    &["--grace", GRACE, "--poll", poll],
                    &[(common::CMD_LINGER_VAR, &linger)],
                )
            })
            .collect(),
    )
}

/// The processor running now on `host` (its last stamp is recent), waiting for it.
fn running_on(log: &str, host: u16, within: Duration, c: &Cluster) -> Span {
    let t0 = Instant::now();
    let limit = slacked(within);
    loop {
        let now = boottime_ns();
        let live = spans(log).into_iter().find(|s| {
            s.host == host
                && !s.stopped
                && s.sigterm.is_none()
                && now.saturating_sub(s.end) < 50_000_000
        });
        if let Some(s) = live {
            return s;
        }
        assert!(
            t0.elapsed() < limit,
            "no processor runs on leader {host} within {limit:?}\n{}\n{}",
            c.logs(),
            supervisor_logs(c)
        );
        // The log grows by a line every 2 ms: parse it at a gentler pace.
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn supervisor_logs(c: &Cluster) -> String {
    (1..=3)
        .map(|id| {
            let t = std::fs::read_to_string(c.dir.join(format!("run-{id}.log")));
            format!("--- electctl run on {id}\n{}", t.unwrap_or_default())
        })
        .collect()
}

/// Applies `fault` to the current leader and returns once it is over (the server is up
/// again, or thawed).
fn apply(c: &mut Cluster, fault: Fault, leader: u16, rng: &mut electd::rng::SplitMix64) {
    let hold = Duration::from_millis(3 * HBT_MS);
    match fault {
        Fault::Yield => {
            let out = Command::new(env!("CARGO_BIN_EXE_electctl"))
                .arg("--socket")
                .arg(c.sock(leader))
                .arg("yield")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap();
            assert!(out.code().is_some(), "electctl yield ran");
        }
        Fault::Terminate => {
            let child = c.terminate(leader);
            // A resign waits at most for the lease end; the exit follows.
            let code = common::wait_exit(child, hold * 4);
            assert!(code.is_some(), "electd {leader} exited after SIGTERM");
            c.spawn(leader);
        }
        Fault::Crash => {
            c.kill(leader);
            std::thread::sleep(Duration::from_millis(rng.below(500)));
            c.spawn(leader);
        }
        Fault::Freeze => {
            common::signal(c.child(leader), libc::SIGSTOP);
            std::thread::sleep(hold + Duration::from_millis(300 + rng.below(500)));
            common::signal(c.child(leader), libc::SIGCONT);
        }
    }
}

fn check(log: &str, done: &[Done], linger_ms: u64) -> common::StopReport {
    let planned: Vec<(u16, u64, String)> = done
        .iter()
        .filter(|d| d.fault.planned())
        .map(|d| (d.leader, d.at_ns, format!("{d:?}")))
        .collect();
    common::stop_report(log, &planned, linger_ms, SLOP_NS)
}

/// Runs `faults` (shuffled by the seed) against a cluster with `electctl run --poll
/// poll` on every server, around a processor that runs `linger_ms` past SIGTERM;
/// returns the report, the seed and the cluster.
fn scenario(
    poll: &str,
    faults: &[Fault],
    linger_ms: u64,
    env: &[(&str, &str)],
) -> (common::StopReport, u64, Cluster) {
    let seed = seed();
    eprintln!("S5 seed {seed} (replay: ELECTD_S5_SEED={seed}), poll {poll}");
    let mut rng = electd::rng::SplitMix64::new(seed);
    let mut order = faults.to_vec();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let (mut c, o) = s5_cluster(env);
    let log = c.dir.join("cmd.log").to_str().unwrap().to_string();
    // Dropped (stopped) on every way out, a failed assertion's included.
    let mut sups = supervisors(&c, &log, poll, linger_ms);
    let poll_d = electd::config::parse_duration(poll).unwrap();
    // A leader within the failover bound; its processor within one more poll.
    let bound = o.failover_bound() + Duration::from_secs(1);
    let mut done = Vec::new();
    for (round, &fault) in order.iter().enumerate() {
        let (leader, term) = c.agreement(bound);
        let s = running_on(&log, leader, bound + poll_d * 2, &c);
        std::thread::sleep(Duration::from_millis(rng.below(300)));
        eprintln!(
            "round {round}: leader {leader} term {term} pid {}: {fault:?}",
            s.pid
        );
        let at_ns = boottime_ns();
        apply(&mut c, fault, leader, &mut rng);
        done.push(Done {
            fault,
            leader,
            at_ns,
        });
    }
    // The last handoff completes before the supervisors are stopped.
    let (leader, _) = c.agreement(bound);
    running_on(&log, leader, bound + poll_d * 2, &c);
    // The test's own teardown, not a fault.
    sups.stop();
    let r = check(&log, &done, linger_ms);
    eprintln!("{}", r.describe());
    (r, seed, c)
}

fn s5(poll: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t0 = Instant::now();
    use Fault::*;
    // Planned stops weigh most: they are where the promise broke (issue 10 item 4).
    let faults = [
        Yield, Yield, Yield, Yield, Yield, Yield, Yield, Yield, Terminate, Terminate, Terminate,
        Terminate, Crash, Crash, Crash, Freeze, Freeze, Freeze,
    ];
    let (r, seed, c) = scenario(poll, &faults, LINGER_MS, &[]);
    eprintln!("S5 with --poll {poll}: {:?}", t0.elapsed());
    let why = format!(
        "seed {seed} (ELECTD_S5_SEED={seed} to replay)\n{}\n{}\n{}",
        r.describe(),
        c.logs(),
        supervisor_logs(&c)
    );
    assert!(
        r.spans.len() > faults.len() / 2,
        "the processor moved between servers: {why}"
    );
    // Issue 25: renewals reached `run` through the stop timers the daemon arms.
    assert!(
        supervisor_logs(&c).contains("electd holds the stop timers"),
        "run did not pass its stop timers: {why}"
    );
    assert!(r.overlaps.is_empty(), "two processors ran at once: {why}");
    assert!(
        r.graceless.is_empty(),
        "a planned stop did not give SIGTERM and the grace: {why}"
    );
}

/// Waits for SPEC 11's registered supervisors ("told at once"), planned handoffs that
/// wait for them, and safe `--poll 20ms`.
#[test]
fn s5_poll_20ms() {
    s5("20ms");
}

/// `--poll 1s` must be as safe (and must start the command at all: issue 10 item 4).
#[test]
fn s5_poll_1s() {
    s5("1s");
}

/// Negative control: with the RESIGN sent before the supervisors confirm, a processor
/// that takes a while to exit after SIGTERM still runs when the next leader's starts:
/// the checker must report the overlap. The processor lingers 200 ms here (50 ms in the
/// tests above): a new leader's processor starts some 40-80 ms after a RESIGN (the
/// VOTING window, a poll, an exec), so 50 ms would overlap only sometimes.
#[test]
fn sabotaged_resign_overlaps() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let faults = [Fault::Yield; 6];
    let (r, seed, c) = scenario(
        "20ms",
        &faults,
        4 * LINGER_MS,
        &[("ELECTD_TEST_SABOTAGE", "resign_early")],
    );
    let worst = r.overlaps.iter().map(|o| o.2).max().unwrap_or(0);
    eprintln!(
        "sabotaged: {} overlaps in {} yields, worst {:.1} ms",
        r.overlaps.len(),
        faults.len(),
        worst as f64 / 1e6
    );
    assert!(
        !r.overlaps.is_empty(),
        "the checker missed the overlap that resign_early makes (seed {seed}):\n{}\n{}",
        r.describe(),
        supervisor_logs(&c)
    );
}

/// Options that cannot work against the daemon's lease are refused at start: at
/// heartbeat 100 ms and K 3 the lease is ~294 ms, shorter than a 300 ms grace. `run`
/// exits 2 with a message naming the grace and never starts the command; `--poll 1s`
/// is safe and starts it.
#[test]
fn run_refuses_options_the_lease_cannot_honour() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let o = Opts::new(Mode::Unicast, 1);
    let c = Cluster::build(&o);
    c.agreement(o.failover_bound());
    let log = c.dir.join("refused.log").to_str().unwrap().to_string();
    let child = Command::new(env!("CARGO_BIN_EXE_electctl"))
        .arg("--socket")
        .arg(c.sock(1))
        .args(["run", "--grace", "300ms", "--"])
        .arg(std::env::current_exe().unwrap())
        .args(["cmd_helper", "--exact", "--nocapture", "--test-threads=1"])
        .env(common::CMD_LOG_VAR, &log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded: a supervisor that does not refuse is killed after the wait.
    let out = common::output_within(child, Duration::from_secs(3));
    let err = String::from_utf8_lossy(&out.stderr);
    let started = spans(&log).len();
    assert_eq!(
        out.status.code(),
        Some(2),
        "run --grace 300ms against a ~294 ms lease must exit 2 at once (stderr: {err})"
    );
    assert!(err.contains("grace"), "the refusal names the grace: {err}");
    assert_eq!(started, 0, "the command was never started");

    let log1 = c.dir.join("poll1s.log").to_str().unwrap().to_string();
    let mut sup = Supervisors(vec![common::supervise_with(
        &c,
        1,
        &log1,
        &["--poll", "1s"],
        &[],
    )]);
    let ok = common::eventually(Duration::from_secs(3), || !spans(&log1).is_empty());
    sup.stop();
    assert!(
        ok,
        "run --poll 1s started the command:\n{}",
        supervisor_logs(&c)
    );
}

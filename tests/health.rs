//! Health checks, drain and preferred leaders on real processes (SPEC sections 13 and
//! 14, issue 11), tested from outside: real `electd` daemons on loopback (unicast,
//! per-server ports), driven only through their config files, their control sockets,
//! `electctl` and signals.
//!
//! Each server's `check` is a small shell script reading that server's flag files in the
//! test's directory (`fail-ID`: fail; `pat-ID`: a cycle of `f`/`o` results), so the test
//! flips health without touching the daemon. Where a processor runs under `electctl
//! run`, it is this test binary re-executed (`common::cmd_helper`): it stamps its start,
//! life, the SIGTERM it got and its exit on CLOCK_BOOTTIME, and every test that uses it
//! checks that no two processors ever ran at once (S5) and that planned handoffs gave
//! SIGTERM and the grace. Every wait is bounded and scaled by `ELECTD_TEST_SLACK`; every
//! process is started by the test and ended through its handle or its pid.

mod common;

use common::{
    Cluster, Mode, Opts, SERIAL, Span, Supervisors, boottime_ns, eventually, overlaps, slacked,
    spans, wait_for,
};
use electd::json::{self, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// Not a test: the wrapped command, when this binary is re-executed by `electctl run`.
#[test]
fn cmd_helper() {
    common::cmd_helper();
}

const HBT_MS: u64 = 100;
/// RTT bounds round trips. 20 ms held alone, but with a second `cargo test` and a
/// compiler beside the suite on 2 cores, one-way delays reached tens of ms: a fresh
/// leader's first LEAD came after another server's retry round (2*RTT) had elected the
/// server of higher priority, and a `yield --to` round missed the named server's claim.
const RTT_MS: u64 = 40;
/// `electctl run --grace`: fits the ~294 ms lease of heartbeat 100 ms, K 3.
const GRACE: &str = "100ms";
/// How long the processor keeps running after SIGTERM.
const LINGER_MS: u64 = 30;
/// A killed processor's end is known to within one alive period (2 ms) and a little.
const SLOP_NS: u64 = 3_000_000;

// ---------------------------------------------------------------------------------
// Clusters with per-server checks and priorities

/// The check every server runs (`check DIR/check.sh ID`): it counts its runs in `n-ID`,
/// takes its result from the cycle in `pat-ID` (letters `f` and `o`) when that file is
/// not empty, fails while `fail-ID` exists, appends the result to `runs-ID`, and on
/// failure prints a first line naming the server, which the daemon must log as the cause.
const CHECK_SH: &str = r#"#!/bin/sh
d=$(dirname "$0")
n=$(cat "$d/n-$1" 2>/dev/null || echo 0)
echo $((n + 1)) > "$d/n-$1"
r=o
pat=$(cat "$d/pat-$1" 2>/dev/null)
if [ -n "$pat" ]; then
  i=$((n % ${#pat}))
  r=$(printf %s "$pat" | cut -c$((i + 1)))
fi
[ -e "$d/fail-$1" ] && r=f
echo "$r" >> "$d/runs-$1"
if [ "$r" = o ]; then exit 0; fi
echo "flagged-unhealthy-$1"
exit 1
"#;

fn write_exec(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `check-interval`, `check-timeout` (= the interval), `check-fall`, `check-rise`.
fn check_timers(interval_ms: u64, fall: u32, rise: u32) -> String {
    format!(
        "check-interval {interval_ms}ms\ncheck-timeout {interval_ms}ms\ncheck-fall {fall}\ncheck-rise {rise}\n"
    )
}

/// The `check` line of server `id`, reading its flag files.
fn check_line(dir: &Path, id: u16) -> String {
    format!("check {}/check.sh {id}\n", dir.display())
}

/// A unicast cluster of `n` servers: heartbeat `hbt_ms`, rtt `rtt_ms`, the shared lines
/// `extra`, `priority` on the server lines listed in `prio`, and per server the lines
/// `per(dir, id)`. Every server is started, in id order.
fn cluster(
    n: u16,
    hbt_ms: u64,
    rtt_ms: u64,
    extra: &str,
    prio: &[(u16, u8)],
    per: impl Fn(&Path, u16) -> String,
) -> Cluster {
    let mut o = Opts::new(Mode::Unicast, n);
    o.hbt_ms = hbt_ms;
    o.rtt_ms = rtt_ms;
    o.extra = extra.to_string();
    o.run = 0;
    let mut c = Cluster::build(&o);
    // Priorities are not part of the fingerprint: they go on the server lines.
    let text = std::fs::read_to_string(&c.conf).unwrap();
    let text: String = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let p = prio
                .iter()
                .find(|p| f[0] == "server" && f.get(1) == Some(&p.0.to_string().as_str()));
            match p {
                Some(p) => format!("{l} priority {}\n", p.1),
                None => format!("{l}\n"),
            }
        })
        .collect();
    std::fs::write(&c.conf, text).unwrap();
    write_exec(&c.dir.join("check.sh"), CHECK_SH);
    for id in 1..=n {
        let own = per(&c.dir, id);
        if !own.is_empty() {
            c.set_server_conf(id, &own);
        }
    }
    for id in 1..=n {
        c.spawn(id);
    }
    c
}

fn flag(c: &Cluster, id: u16, failing: bool) {
    let p = c.dir.join(format!("fail-{id}"));
    if failing {
        std::fs::write(p, "").unwrap();
    } else {
        let _ = std::fs::remove_file(p);
    }
}

/// Sets server `id`'s result cycle (empty: pass), atomically.
fn pattern(c: &Cluster, id: u16, pat: &str) {
    let tmp = c.dir.join(format!("pat-{id}.tmp"));
    std::fs::write(&tmp, pat).unwrap();
    std::fs::rename(tmp, c.dir.join(format!("pat-{id}"))).unwrap();
}

/// The results server `id`'s check has produced so far (`f`/`o`).
fn runs(c: &Cluster, id: u16) -> Vec<char> {
    std::fs::read_to_string(c.dir.join(format!("runs-{id}")))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.chars().next())
        .collect()
}

// ---------------------------------------------------------------------------------
// Status, metrics, watch

fn boolean(v: &Value, key: &str) -> Option<bool> {
    match v.get(key)? {
        Value::Bool(b) => Some(*b),
        _ => None,
    }
}

fn leads(c: &Cluster, id: u16) -> bool {
    c.status(id)
        .is_some_and(|v| v.get("role").and_then(Value::as_str) == Some("leader"))
}

fn healthy(c: &Cluster, id: u16) -> Option<bool> {
    boolean(&c.status(id)?, "healthy")
}

fn health(c: &Cluster, id: u16) -> Option<String> {
    Some(c.status(id)?.get("health")?.as_str()?.to_string())
}

fn drained(c: &Cluster, id: u16) -> Option<bool> {
    boolean(&c.status(id)?, "drained")
}

/// `healthy` of `peer` in server `id`'s status: Some(Some(b)), Some(None) for null,
/// None when absent.
fn peer_healthy(c: &Cluster, id: u16, peer: u16) -> Option<Option<bool>> {
    let v = c.status(id)?;
    let p = v
        .get("peers")?
        .as_array()?
        .iter()
        .find(|p| p.get("id").and_then(Value::as_u64) == Some(u64::from(peer)))?;
    match p.get("healthy")? {
        Value::Bool(b) => Some(Some(*b)),
        Value::Null => Some(None),
        _ => None,
    }
}

/// A metric's value, None when the daemon does not export that series.
fn metric(c: &Cluster, id: u16, series: &str) -> Option<f64> {
    let text = c.request(id, "metrics")?;
    common::metric_value(&text, series)
}

/// The sum of every series of a metric family (any labels).
fn metric_sum(c: &Cluster, id: u16, family: &str) -> f64 {
    let text = c.request(id, "metrics").unwrap_or_default();
    text.lines()
        .filter(|l| {
            l.starts_with(family) && matches!(l[family.len()..].chars().next(), Some(' ' | '{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn handovers(c: &Cluster, id: u16, reason: &str) -> f64 {
    metric(
        c,
        id,
        &format!("electd_handovers_total{{reason=\"{reason}\"}}"),
    )
    .unwrap_or(0.0)
}

/// `electctl --socket (server id) ARGS`, at most 5 s (times the slack).
fn electctl(c: &Cluster, id: u16, args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_electctl"))
        .arg("--socket")
        .arg(c.sock(id))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::output_within(child, Duration::from_secs(5))
}

fn describe(o: &Output) -> String {
    format!(
        "status {:?}, stdout {:?}, stderr {:?}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// One server's `watch` stream, read by a thread; closed on drop.
struct Watch {
    rx: mpsc::Receiver<Value>,
    sock: UnixStream,
}

impl Watch {
    fn new(c: &Cluster, id: u16) -> Watch {
        let mut s = UnixStream::connect(c.sock(id)).expect("watch");
        s.write_all(b"watch\n").unwrap();
        let sock = s.try_clone().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(s);
            let mut line = String::new();
            while r.read_line(&mut line).is_ok_and(|n| n > 0) {
                if let Ok(v) = json::parse(line.trim()) {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
                line.clear();
            }
        });
        Watch { rx, sock }
    }

    /// The first line, from now on, that satisfies `f`, waiting at most `within` times
    /// the slack factor.
    fn until(&self, within: Duration, f: impl Fn(&Value) -> bool) -> Option<Value> {
        let deadline = Instant::now() + slacked(within);
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let v = self.rx.recv_timeout(left).ok()?;
            if f(&v) {
                return Some(v);
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }
}

/// One view of one server, taken by the monitor.
#[derive(Clone, Debug)]
struct Sample {
    at: u64,
    id: u16,
    leader: bool,
    term: u64,
    healthy: Option<bool>,
    health: Option<String>,
    drained: Option<bool>,
}

fn status_at(path: &Path) -> Option<Value> {
    let mut s = UnixStream::connect(path).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    s.write_all(b"status\n").ok()?;
    let mut l = String::new();
    BufReader::new(s).read_line(&mut l).ok()?;
    json::parse(l.trim()).ok()
}

/// Polls every server's status every 10 ms until stopped: the record of who led when,
/// with which health, that the tests check afterwards. Servers that are down are
/// skipped.
struct Monitor {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<Sample>>>,
}

impl Monitor {
    fn start(c: &Cluster) -> Monitor {
        let socks: Vec<(u16, PathBuf)> = (1..=c.n).map(|id| (id, c.sock(id))).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut out = Vec::new();
            while !stop2.load(Ordering::SeqCst) {
                for (id, p) in &socks {
                    if let Some(v) = status_at(p) {
                        out.push(Sample {
                            at: boottime_ns(),
                            id: *id,
                            leader: v.get("role").and_then(Value::as_str) == Some("leader"),
                            term: v.get("term").and_then(Value::as_u64).unwrap_or(0),
                            healthy: boolean(&v, "healthy"),
                            health: v.get("health").and_then(Value::as_str).map(String::from),
                            drained: boolean(&v, "drained"),
                        });
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            out
        });
        Monitor {
            stop,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> Vec<Sample> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// The distinct (leader, term) pairs the samples show, in order of first appearance.
fn leaderships(samples: &[Sample]) -> Vec<(u16, u64)> {
    let mut out: Vec<(u16, u64)> = Vec::new();
    for s in samples.iter().filter(|s| s.leader) {
        if !out.contains(&(s.id, s.term)) {
            out.push((s.id, s.term));
        }
    }
    out
}

/// Makes `want`, the server of highest priority, the leader: a cold start need not elect
/// it (the first server to claim has heard nobody yet, so its claim is not eligible), so
/// the leader yields until it is, a plain yield picking by priority (issue 11).
fn lead_by_priority(c: &Cluster, want: u16, bound: Duration) -> (u16, u64) {
    for i in 0..3 {
        let (l, term) = c.agreement(bound);
        if l == want {
            if i > 0 {
                // A server that resigned is ineligible for HBT/10 after (its second
                // RESIGN is pending): let that pass before the next handoff.
                std::thread::sleep(Duration::from_millis(300));
            }
            return (l, term);
        }
        eprintln!("cold start elected {l}, not {want}: {l} yields");
        let out = electctl(c, l, &["yield"]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let (n, _) = c.new_leader_since(l, term, Instant::now(), bound);
        assert_eq!(
            n, want,
            "a plain yield of {l} picks the highest priority, {want}"
        );
    }
    panic!("{want} never led");
}

/// Waits until each of `ids` is unhealthy by its own status AND as server `seer` sees
/// it. Both are needed: `seer`'s view alone may be a stale report from before the server
/// first turned healthy (servers with a check start unhealthy), which passes the wait at
/// once while the server is in fact still fit (CI saw that: a failing leader then handed
/// over, as designed, to a server it had just heard fit).
fn wait_seen_unhealthy(c: &Cluster, seer: u16, ids: &[u16], what: &str) {
    wait_for(what, Duration::from_secs(3), || {
        ids.iter()
            .all(|&f| healthy(c, f) == Some(false) && peer_healthy(c, seer, f) == Some(Some(false)))
            .then_some(())
    });
}

fn all_healthy(c: &Cluster, ids: &[u16], within: Duration) {
    wait_for("every server healthy", within, || {
        ids.iter()
            .all(|&id| healthy(c, id) == Some(true))
            .then_some(())
    });
}

// ---------------------------------------------------------------------------------
// Processors under `electctl run`

fn supervisors(c: &Cluster, log: &str, ids: impl Iterator<Item = u16>) -> Supervisors {
    let linger = LINGER_MS.to_string();
    Supervisors(
        ids.map(|id| {
            common::supervise_with(
                c,
                id,
                log,
                &["--grace", GRACE],
                &[(common::CMD_LINGER_VAR, &linger)],
            )
        })
        .collect(),
    )
}

fn supervisor_logs(c: &Cluster) -> String {
    (1..=c.n)
        .map(|id| {
            let t = std::fs::read_to_string(c.dir.join(format!("run-{id}.log")));
            format!("--- electctl run on {id}\n{}", t.unwrap_or_default())
        })
        .collect()
}

/// The processor running now on `host` (stamped within the last 50 ms, no SIGTERM yet).
fn running_on(c: &Cluster, log: &str, host: u16, within: Duration) -> Span {
    let limit = slacked(within);
    let t0 = Instant::now();
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
            "no processor runs on {host} within {limit:?}\n{}\n{}",
            c.logs(),
            supervisor_logs(c)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts that no two processors ever ran at once.
fn assert_no_overlap(c: &Cluster, log: &str) {
    let s = spans(log);
    let o = overlaps(&s, SLOP_NS);
    assert!(
        o.is_empty(),
        "two processors ran at once (S5): {o:?}\nall runs: {s:?}\n{}\n{}",
        c.logs(),
        supervisor_logs(c)
    );
}

/// Asserts that `old` (the processor of the leader that handed over) got SIGTERM and ran
/// its linger to its own exit, and that the next processor (the first to start after
/// its SIGTERM, on another host) started only after that exit. Returns the next one.
fn assert_graceful(c: &Cluster, log: &str, old: &Span, within: Duration) -> Span {
    let limit = slacked(within);
    let t0 = Instant::now();
    let (o, next) = loop {
        let all = spans(log);
        let o = all.iter().find(|s| s.pid == old.pid).copied().unwrap();
        let next = all
            .iter()
            .find(|s| s.pid != old.pid && s.host != old.host && s.start > old.start)
            .copied();
        if let (true, Some(n)) = (o.stopped, next) {
            break (o, n);
        }
        assert!(
            t0.elapsed() < limit,
            "no graceful stop and next start within {limit:?}: old {o:?}, next {next:?}\n{}\n{}",
            c.logs(),
            supervisor_logs(c)
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let term_at = o.sigterm.unwrap_or_else(|| {
        panic!(
            "the old processor never got SIGTERM: {o:?}\n{}",
            supervisor_logs(c)
        )
    });
    let lingered = o.end.saturating_sub(term_at);
    assert!(
        lingered >= (LINGER_MS - 1) * 1_000_000,
        "the old processor was cut short {} ms after SIGTERM (linger {LINGER_MS} ms): {o:?}",
        lingered / 1_000_000
    );
    assert!(
        next.start > o.end,
        "the new processor started {:.1} ms before the old one exited: old {o:?}, new {next:?}",
        (o.end - next.start) as f64 / 1e6
    );
    next
}

fn failover_bound(hbt_ms: u64, rtt_ms: u64) -> Duration {
    Duration::from_millis(3 * hbt_ms + 5 * hbt_ms + 8 * rtt_ms)
}

/// Like `Cluster::new_leader_since`, asking only the servers `among` (a frozen server's
/// socket would stall each poll).
fn new_leader_among(
    c: &Cluster,
    among: &[u16],
    old: u16,
    term: u64,
    t0: Instant,
    limit: Duration,
) -> (u16, Duration) {
    let limit = slacked(limit);
    loop {
        for &id in among.iter().filter(|&&id| id != old) {
            if let Some(v) = c.status(id) {
                let t = v.get("term").and_then(Value::as_u64).unwrap_or(0);
                if v.get("role").and_then(Value::as_str) == Some("leader") && t > term {
                    return (id, t0.elapsed());
                }
            }
        }
        assert!(
            t0.elapsed() < limit,
            "no new leader within {limit:?}\n{}",
            c.logs()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

// ---------------------------------------------------------------------------------
// The tests

/// A server with a check starts unhealthy (`"health":"unknown"` or `"failing"`,
/// `healthy` false) and is not elected until `check-rise` successes: a lone server with
/// a slow rise becomes leader only after it turned healthy.
#[test]
fn a_server_with_a_check_starts_unhealthy_and_leads_only_once_healthy() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Rise 4 at 150 ms: healthy 450 ms after the first check at the earliest, well after
    // the 300 ms quiet period of a lone server.
    let c = cluster(1, HBT_MS, RTT_MS, &check_timers(150, 2, 4), &[], check_line);
    let first = c.status(1).expect("status");
    let m = Monitor::start(&c);
    assert_eq!(
        boolean(&first, "healthy"),
        Some(false),
        "a server with a check starts unhealthy: {first:?}"
    );
    let h = first.get("health").and_then(Value::as_str);
    assert!(
        matches!(h, Some("unknown" | "failing")),
        "before its first results a server reports health unknown (or failing): {first:?}"
    );
    wait_for("leader", Duration::from_secs(3), || {
        leads(&c, 1).then_some(())
    });
    // A server that turns fit opens a round at once, so it may lead within a
    // millisecond of turning healthy: let the monitor (every 10 ms) see it lead.
    std::thread::sleep(Duration::from_millis(100));
    let samples = m.stop();
    let first_healthy = samples
        .iter()
        .find(|s| s.healthy == Some(true))
        .map(|s| s.at);
    let first_lead = samples.iter().find(|s| s.leader).map(|s| s.at);
    assert!(
        first_healthy.is_some() && first_lead >= first_healthy,
        "led (at {first_lead:?}) before turning healthy (at {first_healthy:?})\n{}",
        c.logs()
    );
    assert_eq!(health(&c, 1).as_deref(), Some("ok"));
    assert!(runs(&c, 1).len() >= 4, "check ran {:?}", runs(&c, 1));
}

/// Issue 11 test 1: the leader's check starts failing; after `check-fall` failures it
/// hands over to the one healthy server (the other follower is unhealthy too), as a
/// planned handoff: its `electctl run` processor gets SIGTERM and exits by itself before
/// the new leader's processor starts. The old leader reports `healthy` false and
/// `"health":"failing"`, its watchers see the change, its log gives the cause (the
/// check's first line of output), and the metrics count the checks and the handover.
#[test]
fn failing_check_on_the_leader_hands_over_gracefully() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Hooks record ELECTD_HEALTH with every transition.
    let with_hooks = |d: &Path, id: u16| {
        write_exec(
            &d.join("hook.sh"),
            &format!(
                "#!/bin/sh\necho \"$ELECTD_ID $ELECTD_ROLE $ELECTD_HEALTH\" >> {}/hooks.log\n",
                d.display()
            ),
        );
        format!(
            "{}on-leader {d}/hook.sh\non-follower {d}/hook.sh\n",
            check_line(d, id),
            d = d.display()
        )
    };
    let c = cluster(3, HBT_MS, RTT_MS, &check_timers(100, 2, 2), &[], with_hooks);
    let log = c.dir.join("cmd.log").to_str().unwrap().to_string();
    let mut sups = supervisors(&c, &log, 1..=3);
    let bound = failover_bound(HBT_MS, RTT_MS);
    all_healthy(&c, &[1, 2, 3], Duration::from_secs(3));
    let (l, term) = c.agreement(bound);
    let old = running_on(&c, &log, l, Duration::from_secs(2));
    let others: Vec<u16> = (1..=3).filter(|&i| i != l).collect();
    let (bad, good) = (others[0], others[1]);

    // An unhealthy follower: seen as such by the leader, and the leader stays.
    flag(&c, bad, true);
    wait_for(
        "the follower unhealthy, as the leader sees it",
        Duration::from_secs(2),
        || {
            (healthy(&c, bad) == Some(false) && peer_healthy(&c, l, bad) == Some(Some(false)))
                .then_some(())
        },
    );
    assert_eq!(
        peer_healthy(&c, l, good),
        Some(Some(true)),
        "the leader knows its healthy follower: {:?}",
        c.status(l)
    );
    assert_eq!(
        c.agreement(bound),
        (l, term),
        "an unhealthy follower moved the leader"
    );

    let w = Watch::new(&c, l);
    let h0 = metric(&c, l, "electd_health_changes_total");
    let runs0 = metric(&c, l, "electd_check_runs_total");
    flag(&c, l, true);
    let t0 = Instant::now();
    // fall x interval + one interval of phase + the processor's linger + a round.
    let within = Duration::from_millis(2 * 100 + 100 + LINGER_MS + RTT_MS + 150);
    let (n, dt) = c.new_leader_since(l, term, t0, within);
    eprintln!("health handover from {l} to {n} in {dt:?}");
    assert_eq!(
        n,
        good,
        "the new leader must be the healthy server\n{}",
        c.logs()
    );
    assert_eq!(healthy(&c, n), Some(true));
    assert!(!leads(&c, l), "the old leader still reports leader");
    let next = assert_graceful(&c, &log, &old, Duration::from_secs(2));
    assert_eq!(next.host, good, "the new processor runs on the new leader");

    // What the old leader reports.
    let v = c.status(l).unwrap();
    assert_eq!(boolean(&v, "healthy"), Some(false), "{v:?}");
    assert_eq!(
        v.get("health").and_then(Value::as_str),
        Some("failing"),
        "{v:?}"
    );
    assert!(
        w.until(Duration::from_secs(1), |v| boolean(v, "healthy")
            == Some(false)
            || v.get("health").and_then(Value::as_str) == Some("failing"))
            .is_some(),
        "no watch line reported the leader's health change"
    );
    assert!(
        handovers(&c, l, "health") >= 1.0,
        "handovers{{reason=health}} on {l}"
    );
    assert_eq!(metric(&c, l, "electd_healthy"), Some(0.0));
    assert!(
        metric(&c, l, "electd_health_changes_total") > h0,
        "electd_health_changes_total did not grow ({h0:?})"
    );
    assert!(
        metric(&c, l, "electd_check_runs_total") > runs0,
        "electd_check_runs_total did not grow ({runs0:?})"
    );
    assert!(metric_sum(&c, l, "electd_check_failures_total") >= 2.0);
    // Hooks get ELECTD_HEALTH: the old leader's on-follower says failing, the new
    // leader's on-leader ok.
    let hooks = c.dir.join("hooks.log");
    let want = [format!("{l} follower failing"), format!("{good} leader ok")];
    let ok = eventually(Duration::from_secs(2), || {
        let t = std::fs::read_to_string(&hooks).unwrap_or_default();
        want.iter().all(|w| t.lines().any(|x| x == w))
    });
    assert!(
        ok,
        "hooks did not get ELECTD_HEALTH {want:?}: {:?}",
        std::fs::read_to_string(&hooks)
    );
    let text = c.log(l);
    assert!(
        text.contains(&format!("flagged-unhealthy-{l}")),
        "the health change is logged with its cause (the check's first line of output):\n{text}"
    );
    sups.stop();
    assert_no_overlap(&c, &log);
}

/// Issue 11 test 2: a check that cannot execute (a missing path on server 3, a file
/// without the execute bit on server 2, whose text would exit 0 if run by a shell) is a
/// failure, never a success: those servers stay unhealthy and never lead while server 1
/// can, even when it yields; when it stops, one of them leads as a last resort (SPEC
/// 13), reports failing, and hands the seat back once server 1 returns; the daemons
/// keep running; the reason is logged and counted; `--check-config` warns but passes.
#[test]
fn a_check_that_cannot_execute_keeps_its_server_ineligible_but_a_last_resort() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let per = |dir: &Path, id: u16| match id {
        2 => {
            let p = dir.join("notexec.sh");
            std::fs::write(&p, "#!/bin/sh\nexit 0\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
            format!("check {}\n", p.display())
        }
        3 => format!("check {}/missing/healthy --fast\n", dir.display()),
        _ => String::new(),
    };
    let mut c = cluster(3, HBT_MS, RTT_MS, &check_timers(100, 2, 2), &[], per);
    for (id, want) in [(2, "notexec.sh"), (3, "missing/healthy")] {
        let out = Command::new(env!("CARGO_BIN_EXE_electd"))
            .arg("--config")
            .arg(c.conf_of(id))
            .args(["--id", &id.to_string(), "--check-config"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "--check-config passes: {err}");
        assert!(
            err.contains(want) && err.to_lowercase().contains("warn"),
            "--check-config warns about {want}: {err:?}"
        );
    }
    let bound = failover_bound(HBT_MS, RTT_MS);
    let m = Monitor::start(&c);
    let (l, _) = c.agreement(bound);
    assert_eq!(l, 1, "only server 1 can lead");
    // Ten check intervals and more.
    std::thread::sleep(Duration::from_millis(1200));
    for id in [2, 3] {
        let v = c.status(id).expect("the daemon keeps running");
        assert_eq!(boolean(&v, "healthy"), Some(false), "server {id}: {v:?}");
        let h = v.get("health").and_then(Value::as_str);
        assert!(
            matches!(h, Some("failing" | "unknown")),
            "server {id}: {v:?}"
        );
        assert_eq!(
            peer_healthy(&c, 1, id),
            Some(Some(false)),
            "server 1 sees {id} unhealthy: {:?}",
            c.status(1)
        );
        assert!(
            metric_sum(&c, id, "electd_check_failures_total") >= 2.0,
            "server {id} counts its failed checks"
        );
    }
    assert!(
        c.log(2).contains("notexec.sh"),
        "server 2 logs why:\n{}",
        c.log(2)
    );
    assert!(
        c.log(3).contains("missing/healthy"),
        "server 3 logs why:\n{}",
        c.log(3)
    );

    // Server 1 yields: it may not lead the next round, and 2 and 3 may not lead at all.
    let out = electctl(&c, 1, &["yield"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let (l, _) = c.agreement(bound + Duration::from_secs(1));
    assert_eq!(
        l, 1,
        "after its yield server 1 leads again: nobody else can"
    );
    // No other server led while server 1 could.
    let samples = m.stop();
    let bad: Vec<&Sample> = samples.iter().filter(|s| s.leader && s.id != 1).collect();
    assert!(
        bad.is_empty(),
        "a server whose check cannot run led while server 1 was fit: {bad:?}\n{}",
        c.logs()
    );
    for id in [2, 3] {
        assert!(
            samples
                .iter()
                .filter(|s| s.id == id)
                .all(|s| s.healthy == Some(false)),
            "server {id} reported healthy at some point\n{}",
            c.log(id)
        );
    }
    // Server 1 stops: 2 and 3 are left, both unhealthy, so one of them leads as a last
    // resort (SPEC 13, issue 22) and says it is failing; before, nobody led.
    let child = c.terminate(1);
    assert!(common::wait_exit(child, Duration::from_secs(3)).is_some());
    let (lr, _) = c.agreement(bound + Duration::from_secs(1));
    assert!(matches!(lr, 2 | 3), "a last resort among 2 and 3: {lr}");
    let v = c.status(lr).expect("status");
    assert_eq!(
        v.get("health").and_then(Value::as_str),
        Some("failing"),
        "the last-resort leader reports failing: {v:?}"
    );
    assert!(
        c.log(lr).contains("as a last resort"),
        "the last-resort leader says so in its log:\n{}",
        c.log(lr)
    );
    // Server 1 comes back fit: the last resort hands it the seat.
    c.spawn(1);
    let deadline = Instant::now() + slacked(bound + Duration::from_secs(3));
    loop {
        let (l, _) = c.agreement(bound + Duration::from_secs(1));
        if l == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "server 1 was not handed the seat back (leader {l})\n{}",
            c.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for id in [2, 3] {
        assert!(c.status(id).is_some(), "server {id}'s daemon died");
    }
}

/// SPEC 13: exit 126, exit 127, death by a signal and a timeout are failures; a timeout
/// kills the check's whole process group (a grandchild it left behind too, both ignoring
/// SIGTERM, so only SIGKILL ends them); and checks
/// never delay the event loop: with a check that hangs on both followers, their control
/// sockets answer at once and the leader never loses its lease.
#[test]
fn check_failures_of_every_kind_and_a_hung_check_never_delays_the_loop() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let per = |d: &Path, id: u16| {
        write_exec(&d.join("e126.sh"), "#!/bin/sh\nexit 126\n");
        write_exec(&d.join("e127.sh"), "#!/bin/sh\nexit 127\n");
        write_exec(&d.join("signal.sh"), "#!/bin/sh\nkill -KILL $$\n");
        write_exec(
            &d.join("hang.sh"),
            &format!(
                "#!/bin/sh\ntrap '' TERM\nsleep 30 &\necho \"$! $(cat /proc/uptime)\" >> {}\nwait\n",
                d.join("grandchildren").display()
            ),
        );
        match id {
            2 => format!("check {}\n", d.join("e126.sh").display()),
            3 => format!("check {}\n", d.join("e127.sh").display()),
            _ => String::new(),
        }
    };
    // Checks every 300 ms that may run 300 ms: a daemon that waited for them would be
    // blocked most of the time.
    let mut c = cluster(3, HBT_MS, RTT_MS, &check_timers(300, 2, 2), &[], per);
    let d = c.dir.clone();
    let kids = d.join("grandchildren");
    let bound = failover_bound(HBT_MS, RTT_MS);
    let (l, term) = c.agreement(bound);
    assert_eq!(l, 1, "server 1 is the only one without a failing check");
    for (round, (s2, s3)) in [("e126.sh", "e127.sh"), ("signal.sh", "hang.sh")]
        .into_iter()
        .enumerate()
    {
        for (id, script) in [(2u16, s2), (3u16, s3)] {
            if round == 0 {
                break;
            }
            let child = c.terminate(id);
            assert!(common::wait_exit(child, Duration::from_secs(3)).is_some());
            c.set_server_conf(id, &format!("check {}\n", d.join(script).display()));
            c.spawn(id);
            // It acknowledges the leader again before the next one restarts.
            wait_for(
                "the restarted follower follows",
                Duration::from_secs(2),
                || (c.status(id)?.get("leader")?.as_u64()? == u64::from(l)).then_some(()),
            );
        }
        let m = Monitor::start(&c);
        let t0 = Instant::now();
        // Five check intervals, the control sockets timed meanwhile.
        let mut worst = Duration::ZERO;
        while t0.elapsed() < Duration::from_millis(1500) {
            for id in [2, 3] {
                let t = Instant::now();
                assert!(c.status(id).is_some());
                worst = worst.max(t.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let samples = m.stop();
        for (id, script) in [(2u16, s2), (3u16, s3)] {
            assert!(
                samples
                    .iter()
                    .filter(|s| s.id == id)
                    .all(|s| s.healthy == Some(false)),
                "a check '{script}' counted as success on server {id}\n{}",
                c.log(id)
            );
            assert!(
                metric_sum(&c, id, "electd_check_failures_total") >= 2.0,
                "'{script}': failures counted on {id}"
            );
            assert!(samples.iter().all(|s| !s.leader || s.id == 1));
        }
        assert!(
            worst < slacked(Duration::from_millis(50)),
            "a control request waited {worst:?} while checks {s2}/{s3} ran: checks delay the loop"
        );
    }
    let (l2, term2) = c.agreement(bound);
    assert_eq!(
        (l2, term2),
        (l, term),
        "the leader lost its seat while its followers' checks hung\n{}",
        c.logs()
    );
    // Every grandchild of a timed-out check is dead one timeout and a little after it was
    // left behind (the youngest may belong to the check running now).
    let text = std::fs::read_to_string(&kids).unwrap_or_default();
    let pids: Vec<i32> = text
        .lines()
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect();
    assert!(pids.len() >= 3, "the hanging check ran: {text}");
    let alive = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        }) && std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|s| s.starts_with("sleep"))
    };
    let survivors: Vec<i32> = pids[..pids.len() - 1]
        .iter()
        .copied()
        .filter(|&p| alive(p))
        .collect();
    // Ours to clean up either way (started by our check script; by pid).
    for &p in &pids {
        if alive(p) {
            // SAFETY: kill(2) on a `sleep` our own check script started.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
    }
    assert!(
        survivors.is_empty(),
        "a timed-out check's process group was not killed: grandchildren {survivors:?} of {pids:?} still run"
    );
    assert!(
        metric(&c, 3, "electd_check_failures_total{reason=\"timeout\"}").unwrap_or(0.0) >= 2.0,
        "timeouts are counted as such:\n{}",
        c.request(3, "metrics").unwrap_or_default()
    );
}

/// Issue 11 test 3: every check fails. The followers turn unhealthy first, then the
/// leader: with nobody healthy to hand over to, it stays leader with `"health":"failing"`
/// (one shared fault does not leave the cluster leaderless). Its check recovers: health
/// returns to ok in the same daemon, and no leader change happened throughout. Then,
/// all failing again, the recovery of one follower alone is enough for the still failing
/// leader to hand over to it.
///
/// Fall 3: the check's timeout is its 100 ms interval, and a loaded machine once timed
/// out two checks of the unflagged leader in a row, which made it (rightly) hand over to
/// a healthy follower before the test had failed them.
#[test]
fn all_checks_failing_keep_the_leader_and_recovery_needs_no_restart() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster(3, HBT_MS, RTT_MS, &check_timers(100, 3, 2), &[], check_line);
    let bound = failover_bound(HBT_MS, RTT_MS);
    all_healthy(&c, &[1, 2, 3], Duration::from_secs(3));
    let (l, term) = c.agreement(bound);
    let pid = c.child(l).id();
    let fs: Vec<u16> = (1..=3).filter(|&i| i != l).collect();
    let m = Monitor::start(&c);
    for &f in &fs {
        flag(&c, f, true);
    }
    wait_seen_unhealthy(
        &c,
        l,
        &fs,
        "both followers unhealthy, as the leader sees them",
    );
    flag(&c, l, true);
    wait_for("the leader failing", Duration::from_secs(2), || {
        (health(&c, l).as_deref() == Some("failing")).then_some(())
    });
    // Failing, for a while: still the leader, same term.
    std::thread::sleep(Duration::from_millis(1500));
    let v = c.status(l).unwrap();
    assert_eq!(
        v.get("role").and_then(Value::as_str),
        Some("leader"),
        "{v:?}"
    );
    assert_eq!(
        v.get("health").and_then(Value::as_str),
        Some("failing"),
        "{v:?}"
    );
    assert_eq!(boolean(&v, "healthy"), Some(false), "{v:?}");
    assert_eq!(metric(&c, l, "electd_healthy"), Some(0.0));
    // The leader recovers first, then the followers.
    flag(&c, l, false);
    wait_for("the leader healthy again", Duration::from_secs(2), || {
        (health(&c, l).as_deref() == Some("ok") && healthy(&c, l) == Some(true)).then_some(())
    });
    for &f in &fs {
        flag(&c, f, false);
    }
    all_healthy(&c, &[1, 2, 3], Duration::from_secs(2));
    std::thread::sleep(Duration::from_millis(300));
    let samples = m.stop();
    assert_eq!(
        leaderships(&samples),
        vec![(l, term)],
        "the leadership changed while every check failed\n{}",
        c.logs()
    );
    assert_eq!(c.child(l).id(), pid, "same daemon");
    assert_eq!(handovers(&c, l, "health"), 0.0);
    assert_eq!(metric(&c, l, "electd_healthy"), Some(1.0));

    // All failing again; then one follower recovers: the failing leader hands over to it.
    // First the leader must have heard both followers healthy again: otherwise its view
    // from the first phase still says unhealthy, the wait below passes at once, and a
    // follower's late "fit" ACK reaches a leader that is failing already (a loaded
    // machine did that: the leader handed over, as designed, to a server it saw fit).
    wait_for(
        "both followers healthy again, as the leader sees them",
        Duration::from_secs(3),
        || {
            fs.iter()
                .all(|&f| peer_healthy(&c, l, f) == Some(Some(true)))
                .then_some(())
        },
    );
    for &f in &fs {
        flag(&c, f, true);
    }
    wait_seen_unhealthy(&c, l, &fs, "both followers unhealthy again");
    flag(&c, l, true);
    wait_for("the leader failing again", Duration::from_secs(2), || {
        (health(&c, l).as_deref() == Some("failing")).then_some(())
    });
    assert_eq!(c.agreement(bound), (l, term));
    let pick = fs[1];
    flag(&c, pick, false);
    let t0 = Instant::now();
    // rise x interval + a phase + a handover.
    let (n, dt) = c.new_leader_since(l, term, t0, Duration::from_millis(300 + 100 + 150));
    eprintln!("the failing leader handed over to {n} {dt:?} after its recovery began");
    assert_eq!(n, pick, "handed over to the only healthy server");
    assert!(handovers(&c, l, "health") >= 1.0);
}

/// Issue 11 test 4: with fall 3, a check failing twice in a row and then passing, over
/// and over (on the leader and on a follower), changes nothing: no handover, health
/// stays ok, no health change counted. With rise 2, an unhealthy follower passing once
/// between failures stays unhealthy. Positive control: three failures in a row (another
/// follower) do turn a server unhealthy, and two passes turn it healthy again.
#[test]
fn flapping_within_fall_and_rise_changes_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 200 ms: a check (a shell script with a few forks) that outlives a 100 ms timeout
    // on a loaded machine is a real failure, and made a third one in a row once.
    let c = cluster(3, HBT_MS, RTT_MS, &check_timers(200, 3, 2), &[], check_line);
    let bound = failover_bound(HBT_MS, RTT_MS);
    all_healthy(&c, &[1, 2, 3], Duration::from_secs(3));
    let (l, term) = c.agreement(bound);
    let fs: Vec<u16> = (1..=3).filter(|&i| i != l).collect();
    let (flap, control) = (fs[0], fs[1]);
    let changes = |id| metric(&c, id, "electd_health_changes_total").unwrap_or(0.0);
    let (c_l, c_flap) = (changes(l), changes(flap));
    let runs0 = (runs(&c, l).len(), runs(&c, flap).len());
    let m = Monitor::start(&c);
    pattern(&c, l, "ffo");
    pattern(&c, flap, "ffo");
    pattern(&c, control, "fffooo");
    std::thread::sleep(Duration::from_millis(3000));
    pattern(&c, l, "");
    pattern(&c, flap, "");
    pattern(&c, control, "");
    std::thread::sleep(Duration::from_millis(300));
    let samples = m.stop();
    let fails = |id, from: usize| runs(&c, id)[from..].iter().filter(|&&r| r == 'f').count();
    assert!(
        fails(l, runs0.0) >= 8 && fails(flap, runs0.1) >= 8,
        "the checks did fail: leader {:?}, follower {:?}",
        &runs(&c, l)[runs0.0..],
        &runs(&c, flap)[runs0.1..]
    );
    assert_eq!(
        leaderships(&samples),
        vec![(l, term)],
        "flapping within check-fall moved the leader\n{}",
        c.logs()
    );
    for id in [l, flap] {
        let bad: Vec<&Sample> = samples
            .iter()
            .filter(|s| {
                s.id == id && (s.healthy != Some(true) || s.health.as_deref() != Some("ok"))
            })
            .collect();
        assert!(
            bad.is_empty(),
            "server {id} turned unhealthy within check-fall: {:?}",
            bad.first()
        );
    }
    assert_eq!(changes(l), c_l, "health changes counted on the leader");
    assert_eq!(
        changes(flap),
        c_flap,
        "health changes counted on the flapping follower"
    );
    assert_eq!(handovers(&c, l, "health"), 0.0);
    // The control did flip: 3 failures in a row reach fall 3.
    assert!(
        samples
            .iter()
            .any(|s| s.id == control && s.healthy == Some(false)),
        "three failures in a row never made server {control} unhealthy (positive control)\n{}",
        c.log(control)
    );

    // Rise: unhealthy, then one pass between failures, for a while.
    flag(&c, flap, true);
    wait_for("unhealthy", Duration::from_secs(2), || {
        (healthy(&c, flap) == Some(false)).then_some(())
    });
    pattern(&c, flap, "of");
    flag(&c, flap, false);
    let m = Monitor::start(&c);
    std::thread::sleep(Duration::from_millis(2000));
    let samples = m.stop();
    assert!(
        samples
            .iter()
            .filter(|s| s.id == flap)
            .all(|s| s.healthy == Some(false)),
        "single passes between failures made server {flap} healthy with rise 2 ({:?})",
        runs(&c, flap)
    );
    pattern(&c, flap, "");
    wait_for(
        "healthy after two passes",
        Duration::from_millis(1200),
        || (healthy(&c, flap) == Some(true)).then_some(()),
    );
}

/// Issue 11 test 5: a drained follower stays drained through a restart of its daemon
/// (SIGTERM, start again on the same state file) and never leads, even when it is the
/// only server left that could; draining the leader hands over (reason drain); undrain
/// makes the server eligible again.
#[test]
fn drain_survives_a_restart_and_drain_of_the_leader_hands_over() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = cluster(3, HBT_MS, RTT_MS, "", &[], |_, _| String::new());
    let bound = failover_bound(HBT_MS, RTT_MS);
    let log = c.dir.join("cmd.log").to_str().unwrap().to_string();
    let mut sups = supervisors(&c, &log, 1..=3);
    let (l, _) = c.agreement(bound);
    let fs: Vec<u16> = (1..=3).filter(|&i| i != l).collect();
    let (f, g) = (fs[0], fs[1]);
    let m = Monitor::start(&c);

    let wf = Watch::new(&c, f);
    let out = electctl(&c, f, &["drain"]);
    assert_eq!(out.status.code(), Some(0), "drain: {}", describe(&out));
    assert_eq!(drained(&c, f), Some(true), "{:?}", c.status(f));
    assert!(
        wf.until(Duration::from_secs(1), |v| boolean(v, "drained")
            == Some(true))
            .is_some(),
        "no watch line reported the drain"
    );
    assert_eq!(metric(&c, f, "electd_drained"), Some(1.0));
    drop(wf);
    let child = c.terminate(f);
    assert_eq!(common::wait_exit(child, Duration::from_secs(3)), Some(0));
    c.spawn(f);
    assert_eq!(
        drained(&c, f),
        Some(true),
        "the drain did not survive a restart: {:?}",
        c.status(f)
    );
    // The restarted server sees the leader again before the next step.
    wait_for(
        "the restarted server follows",
        Duration::from_secs(3),
        || (c.status(f)?.get("leader")?.as_u64()? == u64::from(l)).then_some(()),
    );

    // Drain the leader: it hands over to g, the only server fit to lead.
    let (l0, term) = c.agreement(bound);
    assert_eq!(l0, l);
    // A drained leader leads on until a fit server has answered its LEAD (a few ms).
    let handed_term = term;
    let old = running_on(&c, &log, l, Duration::from_secs(2));
    let t0 = Instant::now();
    let out = electctl(&c, l, &["drain"]);
    assert_eq!(out.status.code(), Some(0), "drain: {}", describe(&out));
    let (n, dt) = c.new_leader_since(l, term, t0, Duration::from_millis(LINGER_MS + 200));
    eprintln!("drain of leader {l}: {n} leads after {dt:?}");
    assert_eq!(
        n, g,
        "the drained leader hands over to the one undrained server"
    );
    assert_graceful(&c, &log, &old, Duration::from_secs(2));
    assert!(
        handovers(&c, l, "drain") >= 1.0,
        "handovers{{reason=drain}}"
    );
    assert_eq!(drained(&c, l), Some(true));

    // g yields with l and f drained: nobody else may lead, so g leads again.
    let (_, term) = c.agreement(bound);
    let out = electctl(&c, g, &["yield"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let (n, _) = wait_for("a new term", bound + Duration::from_secs(1), || {
        let (n, t) = c.agreement(bound + Duration::from_secs(1));
        (t > term).then_some((n, t))
    });
    assert_eq!(n, g, "with both others drained, only {g} may lead");

    // Undrain f; drain g: g hands over to f.
    let out = electctl(&c, f, &["undrain"]);
    assert_eq!(out.status.code(), Some(0), "undrain: {}", describe(&out));
    assert_eq!(drained(&c, f), Some(false));
    let samples_before = m.stop();
    let (_, term) = c.agreement(bound);
    let out = electctl(&c, g, &["drain"]);
    assert_eq!(out.status.code(), Some(0), "drain: {}", describe(&out));
    let (n, _) = c.new_leader_since(
        g,
        term,
        Instant::now(),
        Duration::from_millis(LINGER_MS + 200),
    );
    assert_eq!(n, f, "undrained, {f} can lead again");
    for id in [l, g] {
        let out = electctl(&c, id, &["undrain"]);
        assert_eq!(out.status.code(), Some(0), "undrain: {}", describe(&out));
    }
    let bad: Vec<&Sample> = samples_before
        .iter()
        .filter(|s| s.leader && s.id == f)
        .collect();
    assert!(
        bad.is_empty(),
        "the drained server {f} led: {:?}\n{}",
        bad.first(),
        c.logs()
    );
    let bad: Vec<&Sample> = samples_before
        .iter()
        .filter(|s| s.leader && s.id == l && s.drained == Some(true) && s.term != handed_term)
        .collect();
    assert!(
        bad.is_empty(),
        "the drained server {l} led: {:?}",
        bad.first()
    );
    sups.stop();
    assert_no_overlap(&c, &log);
}

/// The answer `electctl drain` prints for a single group, and how long it took.
fn drain_line(c: &Cluster, id: u16) -> (String, Duration) {
    let t0 = Instant::now();
    let out = electctl(c, id, &["drain"]);
    let dt = t0.elapsed();
    assert_eq!(out.status.code(), Some(0), "drain: {}", describe(&out));
    (
        String::from_utf8_lossy(&out.stdout).trim_end().to_string(),
        dt,
    )
}

/// Issue 22 item 4: on a healthy cluster, `electctl drain` on the leader names the
/// server it hands over to (the one that leads next), never "no other fit server
/// known" while both peers are healthy in its own status: the answer waits (at most
/// RTT more) until the leader has chosen. With no other server fit, it says that the
/// leader leads on, and a peer's undrain then takes the leadership.
#[test]
fn drain_of_the_leader_names_its_successor() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster(3, HBT_MS, RTT_MS, "", &[], |_, _| String::new());
    let bound = failover_bound(HBT_MS, RTT_MS);
    let mut got = Vec::new();
    for _ in 0..5 {
        let (l, term) = c.agreement(bound);
        let peers: Vec<u16> = (1..=3).filter(|&i| i != l).collect();
        wait_for(
            "the leader's status lists both peers healthy",
            Duration::from_secs(2),
            || {
                peers
                    .iter()
                    .all(|&p| peer_healthy(&c, l, p) == Some(Some(true)))
                    .then_some(())
            },
        );
        let (line, dt) = drain_line(&c, l);
        let (n, _) = c.new_leader_since(l, term, Instant::now(), Duration::from_secs(1));
        eprintln!("drain of leader {l}: {line:?} after {dt:?}; {n} leads");
        got.push((l, line.clone(), n));
        assert_eq!(
            line,
            format!("drained; handing over to server {n}"),
            "drain of the leader {l} of a healthy cluster; answers so far {got:?}\n{}",
            c.logs()
        );
        let out = electctl(&c, l, &["undrain"]);
        assert_eq!(out.status.code(), Some(0), "undrain: {}", describe(&out));
    }

    // Both followers drained: nobody else may lead, and the answer says so.
    let (l, term) = c.agreement(bound);
    let peers: Vec<u16> = (1..=3).filter(|&i| i != l).collect();
    for &p in &peers {
        let (line, _) = drain_line(&c, p);
        assert_eq!(line, "drained", "drain of a follower");
    }
    wait_for(
        "the leader's status lists both peers drained",
        Duration::from_secs(2),
        || {
            peers
                .iter()
                .all(|&p| peer_healthy(&c, l, p) == Some(Some(false)))
                .then_some(())
        },
    );
    let (line, dt) = drain_line(&c, l);
    eprintln!("drain of leader {l} with no fit peer: {line:?} after {dt:?}");
    assert_eq!(
        line,
        "drained; still leader: waiting: no other fit server known; this server leads on and hands over as soon as one is"
    );
    assert!(
        leads(&c, l),
        "the drained leader leads on while none is fit"
    );
    assert_eq!(c.agreement(bound), (l, term));
    let out = electctl(&c, peers[0], &["undrain"]);
    assert_eq!(out.status.code(), Some(0), "undrain: {}", describe(&out));
    let (n, _) = c.new_leader_since(l, term, Instant::now(), Duration::from_secs(1));
    assert_eq!(n, peers[0], "the undrained server takes over");
}

/// The cluster of the preempt-delay tests: server 1 preferred (priority 20), then 2
/// (10), then 3 (5).
fn preferred_cluster(extra: &str) -> Cluster {
    cluster(
        3,
        HBT_MS,
        RTT_MS,
        extra,
        &[(1, 20), (2, 10), (3, 5)],
        |_, _| String::new(),
    )
}

/// Server 1 leads, stops (a planned handoff: 2 takes over, by priority), and comes back.
/// Returns when it is back and following 2, with the instant it was started.
fn preferred_leaves_and_returns(c: &mut Cluster) -> (u64, Instant) {
    let bound = failover_bound(HBT_MS, RTT_MS);
    lead_by_priority(c, 1, bound);
    // Some heartbeats under the new leader: no handoff follows another at once.
    std::thread::sleep(Duration::from_millis(1000));
    let child = c.terminate(1);
    assert_eq!(common::wait_exit(child, Duration::from_secs(3)), Some(0));
    let (n, term) = c.agreement(bound);
    assert_eq!(
        n, 2,
        "a plain handoff picks by priority: 2 (10) before 3 (5)"
    );
    // Long enough for 1's old reports to have expired everywhere.
    std::thread::sleep(Duration::from_millis(1000));
    let t = Instant::now();
    c.spawn(1);
    (term, t)
}

/// Issue 11 test 6: with `preempt-delay`, the preferred server 1 comes back after a
/// stop; it does not take over by itself, and the leader keeps its seat for the whole
/// delay; then the leader hands over to it (reason preempt). While 1 is drained, the
/// delay does not run.
#[test]
fn preempt_delay_hands_back_only_after_the_delay() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let delay = Duration::from_millis(1500);
    let mut c = preferred_cluster("preempt-delay 1500ms\n");
    let bound = failover_bound(HBT_MS, RTT_MS);
    let (term, t_back) = preferred_leaves_and_returns(&mut c);
    let (n, dt) = c.new_leader_since(2, term, t_back, delay + Duration::from_millis(600));
    eprintln!("preempt: server {n} leads {dt:?} after its restart (delay {delay:?})");
    assert_eq!(n, 1, "the leader hands over to the preferred server");
    assert!(
        dt >= delay - Duration::from_millis(50),
        "the preferred server led {dt:?} after its restart, before the preempt-delay of {delay:?}\n{}",
        c.logs()
    );
    assert!(
        handovers(&c, 2, "preempt") >= 1.0,
        "handovers{{reason=preempt}} on 2"
    );

    // Drained, the preferred server is not preempted to; undrained, after the delay.
    let (l, term) = c.agreement(bound);
    assert_eq!(l, 1);
    let out = electctl(&c, 1, &["drain"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let (n, _) = c.new_leader_since(1, term, Instant::now(), Duration::from_millis(300));
    assert_eq!(n, 2);
    let (_, term) = c.agreement(bound);
    std::thread::sleep(delay + Duration::from_millis(500));
    assert_eq!(
        c.agreement(bound),
        (2, term),
        "preempted to a drained server"
    );
    let out = electctl(&c, 1, &["undrain"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let t_u = Instant::now();
    let (n, dt) = c.new_leader_since(2, term, t_u, delay + Duration::from_millis(600));
    assert_eq!(n, 1);
    assert!(
        dt >= delay - Duration::from_millis(50),
        "handed over {dt:?} after the undrain, before the delay"
    );
}

/// Issue 11 test 6, second half: without `preempt-delay` (sticky, the default), the
/// preferred server comes back and never takes over.
#[test]
fn without_preempt_delay_the_preferred_server_never_takes_over() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = preferred_cluster("");
    let (term, _) = preferred_leaves_and_returns(&mut c);
    let m = Monitor::start(&c);
    std::thread::sleep(Duration::from_millis(3000));
    let samples = m.stop();
    assert_eq!(
        leaderships(&samples),
        vec![(2, term)],
        "the leadership moved without preempt-delay\n{}",
        c.logs()
    );
    assert_eq!(handovers(&c, 2, "preempt"), 0.0);
}

/// Issue 11 test 7: `yield --to ID` hands over to the named server (not the usual
/// choice); when the named server is drained, frozen (SIGSTOP) or killed, the handover
/// still completes promptly, to the usual choice (highest priority, then smallest id,
/// among the others); an unknown id or the leader's own is refused with exit status 2
/// and changes nothing; on a follower it exits 1. Four servers (priorities 30, 20, 20,
/// 10) so that the usual choice is not the only one left; `electctl run` everywhere.
#[test]
fn yield_to_picks_the_named_server_and_falls_back_cleanly() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (hbt, rtt) = (200, 40);
    let mut c = cluster(
        4,
        hbt,
        rtt,
        "",
        &[(1, 30), (2, 20), (3, 20), (4, 10)],
        |_, _| String::new(),
    );
    let bound = failover_bound(hbt, rtt);
    let log = c.dir.join("cmd.log").to_str().unwrap().to_string();
    let mut sups = supervisors(&c, &log, 1..=4);
    // Graceful: the processor's linger, the voting window and a few delays; a fallback
    // may take one retry round (2-3 rtt) more. Waiting out the hold would take 600 ms.
    let prompt = Duration::from_millis(LINGER_MS + 3 * rtt + 3 * rtt + 40);
    lead_by_priority(&c, 1, bound);

    // `yield --to` on `from`, leader of `term`; the new leader among `among`.
    let yield_to = |c: &Cluster, from: u16, term: u64, to: &str, among: &[u16]| {
        let old = running_on(c, &log, from, Duration::from_secs(2));
        let t0 = Instant::now();
        let out = electctl(c, from, &["yield", "--to", to]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "yield --to {to}: {}",
            describe(&out)
        );
        let (n, dt) = new_leader_among(c, among, from, term, t0, Duration::from_secs(2));
        assert_graceful(c, &log, &old, Duration::from_secs(2));
        eprintln!("yield --to {to} on {from}: {n} leads after {dt:?}");
        (n, dt)
    };
    let all = [1, 2, 3, 4];

    // Named: 4, the lowest priority.
    let (_, term) = c.agreement(bound);
    let (n, dt) = yield_to(&c, 1, term, "4", &all);
    assert_eq!(n, 4, "yield --to 4 hands over to 4");
    assert!(dt < slacked(prompt), "named handover took {dt:?}");
    // Plain yield from 4: the usual choice is 1 (priority 30).
    let (_, term) = c.agreement(bound);
    let out = electctl(&c, 4, &["yield"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let (n, _) = c.new_leader_since(4, term, Instant::now(), Duration::from_secs(2));
    assert_eq!(n, 1, "a plain yield picks the highest priority");
    // Named 3: of two equal priorities the usual choice would be 2, the smaller id.
    let (_, term) = c.agreement(bound);
    let (n, _) = yield_to(&c, 1, term, "3", &all);
    assert_eq!(n, 3);
    // Back to 1 for the fallbacks.
    let (_, term) = c.agreement(bound);
    let (n, _) = yield_to(&c, 3, term, "1", &all);
    assert_eq!(n, 1);

    // Drained target 2: the usual choice among 3 and 4 is 3.
    let out = electctl(&c, 2, &["drain"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let (_, term) = c.agreement(bound);
    let (n, dt) = yield_to(&c, 1, term, "2", &all);
    assert_eq!(n, 3, "drained target: the usual choice (3) leads");
    assert!(
        dt < slacked(prompt),
        "fallback from a drained target took {dt:?}"
    );
    let out = electctl(&c, 2, &["undrain"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    // 3 leads. Frozen target 4 (SIGSTOP just before the yield): the usual choice is 1.
    let (_, term) = c.agreement(bound);
    common::signal(c.child(4), libc::SIGSTOP);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        yield_to(&c, 3, term, "4", &[1, 2, 3])
    }));
    common::signal(c.child(4), libc::SIGCONT);
    let (n, dt) = r.unwrap_or_else(|e| std::panic::resume_unwind(e));
    assert_eq!(n, 1, "frozen target: the usual choice (1) leads");
    assert!(
        dt < slacked(prompt),
        "fallback from a frozen target took {dt:?}"
    );
    // 1 leads. Killed target 4: the usual choice is 2.
    let (_, term) = c.agreement(bound + Duration::from_secs(1));
    c.kill(4);
    let (n, dt) = yield_to(&c, 1, term, "4", &[1, 2, 3]);
    assert_eq!(n, 2, "killed target: the usual choice (2) leads");
    assert!(
        dt < slacked(prompt),
        "fallback from a dead target took {dt:?}"
    );
    c.spawn(4);
    sups.0.push(common::supervise_with(
        &c,
        4,
        &log,
        &["--grace", GRACE],
        &[(common::CMD_LINGER_VAR, &LINGER_MS.to_string())],
    ));

    // Refusals: unknown id, own id (exit 2, nothing changes); a follower (exit 1).
    let (l, term) = c.agreement(bound + Duration::from_secs(1));
    let own = l.to_string();
    for to in ["9", own.as_str()] {
        let out = electctl(&c, l, &["yield", "--to", to]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "yield --to {to}: {}",
            describe(&out)
        );
        assert!(err.contains(to), "the error names the id {to}: {err}");
        assert!(leads(&c, l), "a refused yield --to {to} made {l} resign");
    }
    let answer = c.request(l, "yield 9").unwrap_or_default();
    assert!(answer.contains("error"), "socket `yield 9`: {answer}");
    let f = (1..=4).find(|&i| i != l).unwrap();
    let out = electctl(&c, f, &["yield", "--to", &own]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "yield --to on a follower: {}",
        describe(&out)
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        c.agreement(bound),
        (l, term),
        "a refused yield changed the leadership"
    );
    sups.stop();
    assert_no_overlap(&c, &log);
}

/// Issue 11 test 8: `electctl run --max-restarts 3 --restart-window 5s` around a
/// command that exits at once makes the server unhealthy, and the leader hands over;
/// the next leader's command runs, never beside the old one; the old leader turns
/// healthy again once the window has passed without an exit.
#[test]
fn a_command_that_keeps_exiting_makes_the_leader_hand_over() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster(3, HBT_MS, RTT_MS, "", &[], |_, _| String::new());
    let bound = failover_bound(HBT_MS, RTT_MS);
    let log = c.dir.join("cmd.log").to_str().unwrap().to_string();
    // The command: exits 3 at once while crash-ID exists, else the stamping processor.
    let proc_sh = c.dir.join("proc.sh");
    write_exec(
        &proc_sh,
        &format!(
            "#!/bin/sh\nif [ -e \"$(dirname \"$0\")/crash-$1\" ]; then echo \"crash $1 $(cat /proc/uptime)\" >> \"$(dirname \"$0\")/crashes\"; exit 3; fi\nexec {} cmd_helper --exact --nocapture --test-threads=1\n",
            std::env::current_exe().unwrap().display()
        ),
    );
    let mut sups = Supervisors(
        (1..=3u16)
            .map(|id| {
                Command::new(env!("CARGO_BIN_EXE_electctl"))
                    .arg("--socket")
                    .arg(c.sock(id))
                    .args([
                        "run",
                        "--grace",
                        GRACE,
                        "--max-restarts",
                        "3",
                        "--restart-window",
                        "5s",
                        "--",
                    ])
                    .arg(&proc_sh)
                    .arg(id.to_string())
                    .env(common::CMD_LOG_VAR, &log)
                    .env(common::CMD_HOST_VAR, id.to_string())
                    .env(common::CMD_LINGER_VAR, LINGER_MS.to_string())
                    .stdout(Stdio::null())
                    .stderr(common::run_log(&c, id))
                    .spawn()
                    .unwrap()
            })
            .collect(),
    );
    let (l, term) = c.agreement(bound);
    let p = running_on(&c, &log, l, Duration::from_secs(2));
    std::fs::write(c.dir.join(format!("crash-{l}")), "").unwrap();
    let t0 = Instant::now();
    // SAFETY: kill(2) on the processor our own supervisor started, seen alive just now.
    unsafe { libc::kill(p.pid as i32, libc::SIGKILL) };
    // Exits at once, restarted after 0.1, 0.2, 0.4 s: unhealthy within a second.
    let (n, dt) = c.new_leader_since(l, term, t0, Duration::from_millis(1500));
    eprintln!("crash loop on {l}: {n} leads after {dt:?}");
    let crashes = std::fs::read_to_string(c.dir.join("crashes")).unwrap_or_default();
    assert!(
        crashes.lines().count() >= 2,
        "the command was restarted: {crashes}"
    );
    assert_eq!(healthy(&c, l), Some(false), "{:?}", c.status(l));
    assert_eq!(health(&c, l).as_deref(), Some("failing"));
    assert!(
        handovers(&c, l, "health") >= 1.0,
        "handovers{{reason=health}} on {l}"
    );
    running_on(&c, &log, n, Duration::from_secs(2));
    // Recovery: no exit for the window.
    let _ = std::fs::remove_file(c.dir.join(format!("crash-{l}")));
    let ok = eventually(Duration::from_secs(7), || healthy(&c, l) == Some(true));
    sups.stop();
    assert_no_overlap(&c, &log);
    assert!(
        ok,
        "server {l} stayed unhealthy for 7 s (times the slack) after its command last exited, with a 5 s restart window: {:?}\n{}",
        c.status(l),
        supervisor_logs(&c)
    );
}

/// Issue 11: a plain handoff picks its successor by priority, then id, also when the
/// server of highest priority is the one that yielded the handoff before: its
/// ineligibility lasts one round, not until its next round. Priorities 20, 10, 5: 1
/// yields (2 leads), then, a second later, 2 yields: 1 must lead again, not 3.
#[test]
fn a_plain_handoff_picks_by_priority_after_an_earlier_yield() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = preferred_cluster("");
    let bound = failover_bound(HBT_MS, RTT_MS);
    for _ in 0..3 {
        lead_by_priority(&c, 1, bound);
        let (_, term) = c.agreement(bound);
        let out = electctl(&c, 1, &["yield"]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let (n, _) = c.new_leader_since(1, term, Instant::now(), bound);
        assert_eq!(n, 2, "1 yielded: 2 (priority 10) before 3 (priority 5)");
        std::thread::sleep(Duration::from_millis(1000));
        let (_, term) = c.agreement(bound);
        let out = electctl(&c, 2, &["yield"]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let (n, _) = c.new_leader_since(2, term, Instant::now(), bound);
        assert_eq!(
            n,
            1,
            "2 yielded a second after 1 had: 1 (priority 20) before 3 (priority 5)\n{}",
            c.logs()
        );
        // Not back to back (see back_to_back_handoffs_keep_the_priority_order).
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// SPEC 13: a failing check is never ignored. keepalived users list several
/// `track_script`s; a config with two `check` lines must either be refused or run both:
/// a server whose config holds a passing and a failing check (in either order) must not
/// turn healthy.
#[test]
fn a_second_check_line_never_hides_a_failing_check() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let per = |d: &Path, id: u16| {
        write_exec(&d.join("pass.sh"), "#!/bin/sh\nexit 0\n");
        write_exec(&d.join("fail.sh"), "#!/bin/sh\necho down\nexit 1\n");
        let (pass, fail) = (d.join("pass.sh"), d.join("fail.sh"));
        match id {
            2 => format!("check {}\ncheck {}\n", fail.display(), pass.display()),
            3 => format!("check {}\ncheck {}\n", pass.display(), fail.display()),
            _ => String::new(),
        }
    };
    let mut o = Opts::new(Mode::Unicast, 3);
    o.run = 0;
    let c = Cluster::build(&o);
    for id in 2..=3 {
        c.set_server_conf(id, &per(&c.dir, id));
    }
    let refused: Vec<bool> = (2..=3u16)
        .map(|id| {
            let out = Command::new(env!("CARGO_BIN_EXE_electd"))
                .arg("--config")
                .arg(c.conf_of(id))
                .args(["--id", &id.to_string(), "--check-config"])
                .output()
                .unwrap();
            out.status.code() != Some(0)
        })
        .collect();
    if refused.iter().all(|&r| r) {
        return;
    }
    drop(c);
    let c = cluster(3, HBT_MS, RTT_MS, &check_timers(100, 2, 2), &[], per);
    std::thread::sleep(Duration::from_millis(1000));
    for id in 2..=3 {
        assert_eq!(
            healthy(&c, id),
            Some(false),
            "server {id} runs a failing check and is healthy: its config has two `check` lines, one ignored without a word:\n{}\n{}",
            std::fs::read_to_string(c.conf_of(id)).unwrap(),
            c.log(id)
        );
    }
}

/// SPEC 13, per-peer `healthy`: every server knows every peer's health, the leader's
/// included (it is heard every heartbeat). A follower asked for the health of its
/// leader answers true while the leader is healthy and false once it is failing (it
/// keeps leading: the other follower is unhealthy too), never null.
#[test]
fn a_follower_knows_its_leaders_health() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster(3, HBT_MS, RTT_MS, &check_timers(100, 2, 2), &[], check_line);
    let bound = failover_bound(HBT_MS, RTT_MS);
    all_healthy(&c, &[1, 2, 3], Duration::from_secs(3));
    let (l, term) = c.agreement(bound);
    let fs: Vec<u16> = (1..=3).filter(|&i| i != l).collect();
    // Long after the election: what the followers knew from the leader's claim in the
    // round has expired, only its heartbeats remain.
    std::thread::sleep(Duration::from_millis(1000));
    let ok = eventually(Duration::from_secs(1), || {
        fs.iter()
            .all(|&f| peer_healthy(&c, f, l) == Some(Some(true)))
    });
    let views: Vec<_> = fs.iter().map(|&f| (f, peer_healthy(&c, f, l))).collect();
    assert!(
        ok,
        "followers' view of healthy leader {l}'s health: {views:?} (Some(None) is null)\n{:?}",
        c.status(fs[0])
    );
    for &f in &fs {
        flag(&c, f, true);
    }
    wait_seen_unhealthy(&c, l, &fs, "followers unhealthy");
    flag(&c, l, true);
    wait_for("leader failing", Duration::from_secs(2), || {
        (health(&c, l).as_deref() == Some("failing")).then_some(())
    });
    assert_eq!(c.agreement(bound), (l, term));
    let ok = eventually(Duration::from_secs(1), || {
        peer_healthy(&c, fs[0], l) == Some(Some(false))
    });
    assert!(
        ok,
        "follower {}'s view of failing leader {l}: {:?}",
        fs[0],
        peer_healthy(&c, fs[0], l)
    );
}

/// S5 through every kind of planned handoff of issue 11 at random: checks failing and
/// recovering, drains and undrains, `yield --to` and plain yields, on a seeded schedule
/// (`ELECTD_HEALTH_SEED=N` replays one), with `electctl run` on every server. No two
/// processors ever run at once, every processor stop is graceful (SIGTERM, then its
/// linger to its own exit: no handoff here is a crash), and once the faults stop a
/// leader runs its processor within the failover bound; two plain yields then move it
/// twice more, so every run moves the processor whatever the seed drew.
#[test]
fn random_health_drain_and_yield_to_keep_s5() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let seed = common::env_seed("ELECTD_HEALTH_SEED");
    eprintln!("seed {seed} (replay: ELECTD_HEALTH_SEED={seed})");
    let mut rng = electd::rng::SplitMix64::new(seed);
    let c = cluster(3, HBT_MS, RTT_MS, &check_timers(50, 2, 2), &[], check_line);
    let bound = failover_bound(HBT_MS, RTT_MS);
    let log = c.dir.join("cmd.log").to_str().unwrap().to_string();
    let mut sups = supervisors(&c, &log, 1..=3);
    all_healthy(&c, &[1, 2, 3], Duration::from_secs(3));
    c.agreement(bound);
    let mut failing = [false; 4];
    let mut drained_ = [false; 4];
    let mut ops = Vec::new();
    for _ in 0..40 {
        let id = 1 + rng.below(3) as u16;
        let leader = (1..=3).find(|&i| leads(&c, i));
        let op = match rng.below(4) {
            0 | 1 => {
                failing[usize::from(id)] ^= true;
                flag(&c, id, failing[usize::from(id)]);
                format!(
                    "check {id} {}",
                    if failing[usize::from(id)] {
                        "fails"
                    } else {
                        "passes"
                    }
                )
            }
            2 => {
                drained_[usize::from(id)] ^= true;
                let cmd = if drained_[usize::from(id)] {
                    "drain"
                } else {
                    "undrain"
                };
                let out = electctl(&c, id, &[cmd]);
                assert_eq!(out.status.code(), Some(0), "{cmd} {id}: {}", describe(&out));
                format!("{cmd} {id}")
            }
            _ => match leader {
                Some(l) if id != l => {
                    let out = electctl(&c, l, &["yield", "--to", &id.to_string()]);
                    format!("yield --to {id} on {l}: {:?}", out.status.code())
                }
                Some(l) => {
                    let out = electctl(&c, l, &["yield"]);
                    format!("yield on {l}: {:?}", out.status.code())
                }
                None => "no leader".to_string(),
            },
        };
        ops.push(op);
        std::thread::sleep(Duration::from_millis(50 + rng.below(350)));
    }
    eprintln!("ops: {ops:?}");
    for id in 1..=3 {
        flag(&c, id, false);
        if drained_[usize::from(id)] {
            let out = electctl(&c, id, &["undrain"]);
            assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        }
    }
    all_healthy(&c, &[1, 2, 3], Duration::from_secs(2));
    let (mut l, mut term) = c.agreement(bound);
    running_on(&c, &log, l, bound);
    // Then two plain yields on the healed cluster, whatever the seed drew: the seeded
    // ops move the processor only through what they happen to draw (a seed with at
    // most one `yield` among its 40 ops, about 1.4e-4 of them, relies on the health
    // handovers alone), so the coverage check below holds by construction.
    for _ in 0..2 {
        let out = electctl(&c, l, &["yield"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "seed {seed}: yield on {l}: {}",
            describe(&out)
        );
        let (n, _) = c.new_leader_since(l, term, Instant::now(), bound);
        running_on(&c, &log, n, bound);
        (l, term) = c.agreement(bound);
    }
    sups.stop();
    assert_no_overlap(&c, &log);
    let all = spans(&log);
    let graceless: Vec<&Span> = all
        .iter()
        .filter(|s| {
            !s.stopped
                || s.sigterm
                    .is_none_or(|t| s.end.saturating_sub(t) < (LINGER_MS - 1) * 1_000_000)
        })
        .collect();
    assert!(
        graceless.is_empty(),
        "seed {seed}: processors stopped without SIGTERM and their linger: {graceless:?}\nops {ops:?}\n{}",
        supervisor_logs(&c)
    );
    assert!(all.len() >= 3, "seed {seed}: the processor moved: {all:?}");
}

/// Issue 11 review: a failing leader must not hand over to a follower that it heard fit
/// a moment ago but that has frozen since (or crashed, or been cut off): the old leader
/// and the other follower are unhealthy, hence INELIGIBLE, so such a handover would
/// leave no leader at all. The leader turning unfit sends a LEAD at once and hands over
/// only to a server that acknowledges it as fit: the frozen one cannot, so the failing
/// leader keeps its seat (SPEC 13), and hands over to it as soon as it thaws.
#[test]
fn a_failing_leader_whose_successor_froze_is_not_left_leaderless() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster(3, HBT_MS, RTT_MS, &check_timers(100, 2, 2), &[], check_line);
    let bound = failover_bound(HBT_MS, RTT_MS);
    all_healthy(&c, &[1, 2, 3], Duration::from_secs(3));
    let (l, term) = c.agreement(bound);
    let fs: Vec<u16> = (1..=3).filter(|&i| i != l).collect();
    let (frozen, sick) = (fs[0], fs[1]);
    flag(&c, sick, true);
    wait_seen_unhealthy(&c, l, &[sick], "unhealthy follower");
    common::signal(c.child(frozen), libc::SIGSTOP);
    flag(&c, l, true);
    wait_for("leader failing", Duration::from_secs(2), || {
        (health(&c, l).as_deref() == Some("failing")).then_some(())
    });
    // A second on: the failing leader still leads, in the same term, and handed nothing.
    std::thread::sleep(Duration::from_millis(1000));
    let views = (c.status(l), c.status(sick));
    let term_now = views
        .0
        .as_ref()
        .and_then(|v| v.get("term"))
        .and_then(Value::as_u64);
    let kept = leads(&c, l) && term_now == Some(term);
    let handed = handovers(&c, l, "health");
    common::signal(c.child(frozen), libc::SIGCONT);
    assert!(
        kept && handed == 0.0,
        "the failing leader {l} gave up its seat while the only healthy server {frozen} was frozen (handovers {handed}): {views:?}\n{}",
        c.log(l)
    );
    // Thawed, the healthy server's ACKs say fit: the failing leader hands over to it.
    let (n, _) = c.new_leader_since(l, term, Instant::now(), bound + Duration::from_secs(1));
    assert_eq!(n, frozen, "the thawed healthy server takes over");
}

/// DESIGN DECISION (ignored: it shows what electd does not do): with every server's
/// check failing, the leader keeps its seat (SPEC 13), but only as long as it lives:
/// once it crashes, the others are unhealthy, hence INELIGIBLE, and no one leads until a
/// check recovers. The same shared fault at a cold start leaves the cluster without a
/// leader. SPEC 13 says an unhealthy server "is never voted leader", and the promise is
/// that the one active processor is a working one: electing a server whose processor
/// is known broken gains nothing. A fit server is elected within the L1 bound once a
/// check passes. Run: `cargo test --release --test health -- --ignored leader_crash_during`.
#[test]
#[ignore = "by design: an unhealthy server is never elected, so a shared fault plus a crash leaves no leader until a check passes"]
fn a_leader_crash_during_a_shared_fault_leaves_a_leader() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = cluster(3, HBT_MS, RTT_MS, &check_timers(100, 2, 2), &[], check_line);
    let bound = failover_bound(HBT_MS, RTT_MS);
    all_healthy(&c, &[1, 2, 3], Duration::from_secs(3));
    let (l, _) = c.agreement(bound);
    let fs: Vec<u16> = (1..=3).filter(|&i| i != l).collect();
    for &f in &fs {
        flag(&c, f, true);
    }
    wait_seen_unhealthy(&c, l, &fs, "followers unhealthy");
    flag(&c, l, true);
    wait_for("leader failing", Duration::from_secs(2), || {
        (health(&c, l).as_deref() == Some("failing")).then_some(())
    });
    c.kill(l);
    let led = eventually(bound + Duration::from_secs(1), || {
        fs.iter().any(|&f| leads(&c, f))
    });
    assert!(
        led,
        "no leader after the failing leader crashed: {:?}",
        fs.iter().map(|&f| c.status(f)).collect::<Vec<_>>()
    );
}

/// Issue 11 finding (fixed): a server stayed INELIGIBLE for HBT/10 after its RESIGN (its
/// second RESIGN pending), also in a round that is not "the next round" (SPEC 6): at
/// heartbeat 1 s, 2 yields, 1 (priority 20) takes over at once and yields within
/// 100 ms; the usual choice is 2 (priority 10), but 3 (priority 5) was elected.
#[test]
fn back_to_back_handoffs_keep_the_priority_order() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster(3, 1000, 100, "", &[(1, 20), (2, 10), (3, 5)], |_, _| {
        String::new()
    });
    let bound = failover_bound(1000, 100);
    let (_, _) = lead_by_priority(&c, 1, bound);
    // 1 yields: 2 leads; a second later 2 yields: 1 leads, and yields again at once.
    let (_, term) = c.agreement(bound);
    c.request(1, "yield");
    let (n, _) = c.new_leader_since(1, term, Instant::now(), bound);
    assert_eq!(n, 2);
    std::thread::sleep(Duration::from_millis(1500));
    let (_, term) = c.agreement(bound);
    c.request(2, "yield");
    let (n, _) = c.new_leader_since(2, term, Instant::now(), bound);
    assert_eq!(n, 1);
    let term = c
        .status(1)
        .unwrap()
        .get("term")
        .and_then(Value::as_u64)
        .unwrap();
    c.request(1, "yield");
    let (n, dt) = c.new_leader_since(1, term, Instant::now(), bound);
    assert_eq!(
        n, 2,
        "1 yielded {dt:?} after taking over from 2: 2 (priority 10) before 3 (5)"
    );
}

/// Issue 11 finding (fixed): with `preempt-delay`, `yield --to` a server of lower
/// priority than another fit one was undone at once. The named server was elected and,
/// having heard the other one fit for longer than the delay ("time before this server
/// became leader counts", SPEC 14), preempted to it within a millisecond; after the
/// delay that one preempted back to the original leader: 1 -> 3 -> 2 -> 1, three
/// handoffs for one `yield --to 3`. A server named successor now counts its delay from
/// the RESIGN that named it.
#[test]
fn yield_to_under_preempt_delay_keeps_the_named_server() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = preferred_cluster("preempt-delay 1500ms\n");
    let bound = failover_bound(HBT_MS, RTT_MS);
    lead_by_priority(&c, 1, bound);
    // Everyone has heard everyone fit for longer than the delay.
    std::thread::sleep(Duration::from_millis(2000));
    let (_, term) = c.agreement(bound);
    let m = Monitor::start(&c);
    let out = electctl(&c, 1, &["yield", "--to", "3"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    std::thread::sleep(Duration::from_millis(1000));
    let samples = m.stop();
    let (n, _) = c.agreement(bound);
    let handovers: Vec<String> = (1..=3)
        .flat_map(|id| {
            c.log(id)
                .lines()
                .filter(|l| l.contains("resigning leadership"))
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        n,
        3,
        "the server named by yield --to did not keep its seat (leaderships seen from term {term}: {:?}):\n{}",
        leaderships(&samples),
        handovers.join("\n")
    );
}

/// SPEC 13 (issue 22): a fault every server shares, the checks failing one by one in a
/// random order within a second, and the leader killed (SIGKILL) at a random moment in
/// the middle, never leaves the cluster without a leader: within the failover bound a
/// survivor leads, as a last resort once every survivor fails, and reports failing.
/// Before the last-resort rule nobody led until a check passed (a killed leader whose
/// followers were all unhealthy left no leader at all). Then the checks pass again and
/// the killed server comes back: one leader, fit. `ELECTD_SHARED_FAULT_RUNS` rounds per
/// cluster size (default 2), `ELECTD_SHARED_FAULT_SEED` to replay.
#[test]
fn a_shared_fault_with_a_leader_crash_leaves_a_leader() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let runs: u32 = common::env_num("ELECTD_SHARED_FAULT_RUNS", 2);
    let seed = common::env_seed("ELECTD_SHARED_FAULT_SEED");
    eprintln!("shared fault with a leader crash: seed {seed} (ELECTD_SHARED_FAULT_SEED)");
    let mut rng = electd::rng::SplitMix64::new(seed);
    let bound = failover_bound(HBT_MS, RTT_MS);
    let mut led = Vec::new();
    let mut last_resorts = 0;
    for n in [3u16, 5] {
        let mut c = cluster(n, HBT_MS, RTT_MS, &check_timers(100, 1, 1), &[], |d, id| {
            check_line(d, id)
        });
        for round in 0..runs {
            for id in 1..=n {
                flag(&c, id, false);
            }
            // Every server fit, and seen fit by the leader.
            let l = wait_for("every server fit", slacked(Duration::from_secs(10)), || {
                let (l, _) = c.agreement(bound + Duration::from_secs(2));
                let all = (1..=n).all(|id| {
                    c.status(id)
                        .is_some_and(|v| boolean(&v, "healthy") == Some(true))
                });
                all.then_some(l)
            });
            // The plan: each check fails at a random instant of one second, the leader
            // is killed at another.
            let mut plan: Vec<(u64, Option<u16>)> =
                (1..=n).map(|id| (rng.below(1000), Some(id))).collect();
            plan.push((rng.below(1000), None));
            plan.sort_unstable();
            let start = Instant::now();
            let mut l = l;
            for &(at, what) in &plan {
                let due = start + Duration::from_millis(at);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
                match what {
                    Some(id) => flag(&c, id, true),
                    None => {
                        // The leader of this moment (an unhealthy leader may have handed
                        // over already).
                        l = (1..=n)
                            .find(|&id| {
                                c.status(id).is_some_and(|v| {
                                    v.get("role").and_then(Value::as_str) == Some("leader")
                                })
                            })
                            .unwrap_or(l);
                        c.kill(l);
                    }
                }
            }
            let crashed = start.elapsed();
            // A survivor leads, unhealthy: a last resort.
            let t = Instant::now();
            let x = wait_for(
                "a last-resort leader among the survivors",
                slacked(bound + Duration::from_secs(2)),
                || {
                    let (x, _) = c.agreement(bound + Duration::from_secs(1));
                    let v = c.status(x)?;
                    (v.get("health").and_then(Value::as_str) == Some("failing")).then_some(x)
                },
            );
            led.push(t.elapsed());
            assert_ne!(x, l, "N={n} round {round}: the killed server cannot lead");
            // (Elected as a last resort, or elected while still fit and leading on once
            // its own check failed too: either way one leader, reporting failing.)
            last_resorts += u32::from(c.log(x).contains("as a last resort"));
            eprintln!(
                "N={n} round {round}: plan {plan:?} (ms, server failing or None: leader {l} \
                 killed), done at {crashed:?}; last resort {x} leads {:?} later",
                t.elapsed()
            );
            c.spawn(l);
        }
    }
    eprintln!(
        "shared fault with a leader crash: a leader reporting failing after {led:?}; \
         {last_resorts} of {} elected as a last resort",
        led.len()
    );
}

/// README's worked example, the check script `consumer-healthy`, run as README gives
/// it with stubs for what it calls (nc, df, curl, and a pgrep that never finds the
/// consumer, as under electd's unit: `ProtectProc=invisible` hides the consumer's
/// processes, which run as another user). A leader whose consumer runs and fails its
/// /healthz must be unhealthy; nothing listening (between restarts) is not the check's
/// concern. The script used to ask pgrep first, and so never reached the curl.
#[test]
fn readme_consumer_check_behaves_as_described() {
    let readme = std::fs::read_to_string("README.md").unwrap();
    let start = readme
        .find("#!/bin/sh\n# /usr/local/bin/consumer-healthy")
        .expect("README's consumer-healthy script");
    let script = &readme[start..start + readme[start..].find("\n```").unwrap() + 1];
    let dir = std::env::temp_dir().join(format!("electd-readme-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let exe = |name: &str, body: &str| {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    exe("consumer-healthy", script.trim_start_matches("#!/bin/sh\n"));
    exe("bin/nc", "exit \"${STUB_NC:-0}\"");
    exe(
        "bin/df",
        "echo '    Avail'; echo \"${STUB_AVAIL_KB:-5000000}\"",
    );
    exe("bin/curl", "exit \"${STUB_CURL:-0}\"");
    exe("bin/pgrep", "exit 1");
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap()
    );
    let run = |env: &[(&str, &str)]| -> (i32, String) {
        let out = Command::new("sh")
            .arg(dir.join("consumer-healthy"))
            .env("PATH", &path)
            .env_remove("ELECTD_ROLE")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    // (environment, exit status, first words of the line printed)
    type Case<'a> = (&'a [(&'a str, &'a str)], i32, &'a str);
    let cases: [Case; 8] = [
        (&[("ELECTD_ROLE", "follower")], 0, ""),
        (
            &[("ELECTD_ROLE", "follower"), ("STUB_NC", "1")],
            1,
            "broker",
        ),
        (
            &[("ELECTD_ROLE", "leader"), ("STUB_AVAIL_KB", "1000")],
            1,
            "spool",
        ),
        (&[("ELECTD_ROLE", "leader")], 0, ""),
        (&[("ELECTD_ROLE", "leader"), ("STUB_CURL", "7")], 0, ""),
        (
            &[("ELECTD_ROLE", "leader"), ("STUB_CURL", "22")],
            1,
            "consumer runs",
        ),
        (
            &[("ELECTD_ROLE", "leader"), ("STUB_CURL", "28")],
            1,
            "consumer runs",
        ),
        // A follower does not ask the consumer, which runs only on the leader.
        (&[("ELECTD_ROLE", "follower"), ("STUB_CURL", "22")], 0, ""),
    ];
    for (env, code, said) in cases {
        let (got, out) = run(env);
        assert!(
            got == code && out.starts_with(said),
            "{env:?}: exit {got} ({out:?}), README says {code} ({said:?})"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

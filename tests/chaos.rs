//! Chaos on real processes (issue 7): five electd hosts, each in a network namespace of
//! its own (10.77.0.1-5), joined by a bridge in a sixth; faults are nftables rules on
//! the bridge (partitions, one-way cuts, loss) and signals (SIGSTOP past the lease,
//! SIGKILL and restart), drawn from a seed that the test prints. A checker follows
//! every server's `watch` stream (each lease renewal is reported) and checks, on the
//! one CLOCK_BOOTTIME all hosts share: S1, S2 (exactly: no two lease intervals
//! overlap), S3; L1 after each heal; L2 when a follower is cut off. `electctl run`
//! wraps a command on every host; no two may run at once.
//!
//! Issue 12: the cluster runs two election groups (`a` prefers 1 2 3 4 5, `b` the
//! reverse), each with its own `electctl run --group` on every host; every check above
//! holds per group, and each round's fault aims at one group's leader.
//!
//! Needs root, iproute2 and nftables (CI has them); CHAOS_SEED=n replays a run,
//! CHAOS_ROUNDS sets the seeded faults per mode (default 10), after which each group's
//! leader is frozen past its lease once, so every run fails every group over.
//! Everything it creates carries a per-run prefix and is deleted on drop; namespaces of
//! runs that were killed are deleted at the next start.

mod common;

use common::{Cluster, SERIAL, Span, sh, spans, supervise_with};
use electd::json::{self, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const N: u16 = 5;
const HBT_MS: u64 = 100;
const RTT_MS: u64 = 20;
/// The election groups every host runs.
const GROUPS: [&str; 2] = ["a", "b"];

fn sh_ok(args: &[&str]) {
    assert!(sh(args), "failed: {}", args.join(" "));
}

/// Deletes namespaces left by earlier runs that were killed (their pid is gone).
fn remove_stale() {
    for name in common::stale_netns("ecx") {
        let _ = sh(&["ip", "netns", "del", &name]);
    }
}

/// Five hosts and a bridge, each a namespace named with this run's prefix.
struct Net {
    hosts: Vec<String>,
    br: String,
}

impl Net {
    fn create(tag: &str) -> Option<Net> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 || !sh(&["nft", "--version"]) {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root with nftables"
            );
            eprintln!("SKIPPED: chaos needs root, iproute2 and nftables");
            return None;
        }
        remove_stale();
        let prefix = format!("ecx{}{tag}", std::process::id());
        let br = format!("{prefix}-br");
        let hosts: Vec<String> = (1..=N).map(|i| format!("{prefix}-h{i}")).collect();
        let net = Net { hosts, br };
        sh_ok(&["ip", "netns", "add", &net.br]);
        sh_ok(&[
            "ip",
            "-n",
            &net.br,
            "link",
            "add",
            "br0",
            "type",
            "bridge",
            "mcast_snooping",
            "0",
        ]);
        sh_ok(&["ip", "-n", &net.br, "link", "set", "br0", "up"]);
        for (i, h) in net.hosts.iter().enumerate() {
            let port = format!("v{}", i + 1);
            sh_ok(&["ip", "netns", "add", h]);
            sh_ok(&[
                "ip", "-n", &net.br, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                "netns", h,
            ]);
            sh_ok(&[
                "ip", "-n", &net.br, "link", "set", &port, "master", "br0", "up",
            ]);
            sh_ok(&[
                "ip",
                "-n",
                h,
                "addr",
                "add",
                &format!("10.77.0.{}/24", i + 1),
                "dev",
                "eth0",
            ]);
            sh_ok(&["ip", "-n", h, "link", "set", "eth0", "up"]);
            sh_ok(&["ip", "-n", h, "link", "set", "lo", "up"]);
            sh_ok(&["ip", "-n", h, "route", "add", "224.0.0.0/4", "dev", "eth0"]);
        }
        net.nft("add table bridge chaos\nadd chain bridge chaos faults { type filter hook forward priority 0; policy accept; }\n");
        Some(net)
    }

    fn nft(&self, script: &str) {
        assert!(common::nft_in(&self.br, script), "nft: {script}");
    }

    fn heal(&self) {
        self.nft("flush chain bridge chaos faults\n");
    }

    /// Drops frames from host `a` to host `b` (one direction).
    fn cut(&self, a: u16, b: u16) {
        self.nft(&format!(
            "add rule bridge chaos faults iifname \"v{a}\" oifname \"v{b}\" drop\n"
        ));
    }

    fn partition(&self, side: &[u16]) {
        for a in 1..=N {
            for b in 1..=N {
                if side.contains(&a) != side.contains(&b) {
                    self.cut(a, b);
                }
            }
        }
    }

    fn loss(&self, pct: u64) {
        self.nft(&format!(
            "add rule bridge chaos faults numgen random mod 100 < {pct} drop\n"
        ));
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for h in &self.hosts {
            let _ = sh(&["ip", "netns", "del", h]);
        }
        let _ = sh(&["ip", "netns", "del", &self.br]);
    }
}

/// One watch line: group (index in GROUPS), server, its clock at the report, role,
/// term, lease end.
#[derive(Clone, Copy, Debug)]
struct Line {
    group: usize,
    id: u16,
    now: u64,
    leader: bool,
    term: u64,
    until: u64,
}

/// Follows every server's watch stream of every group, reconnecting across restarts.
fn follow(
    c: &Cluster,
    lines: &Arc<Mutex<Vec<Line>>>,
    stop: &Arc<std::sync::atomic::AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    (1..=N)
        .flat_map(|id| (0..GROUPS.len()).map(move |g| (id, g)))
        .map(|(id, group)| {
            let path = c.sock(id);
            let (lines, stop) = (lines.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let Ok(mut s) = UnixStream::connect(&path) else {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    };
                    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
                    if s.write_all(format!("watch {}\n", GROUPS[group]).as_bytes())
                        .is_err()
                    {
                        continue;
                    }
                    let mut r = BufReader::new(s);
                    let mut l = String::new();
                    loop {
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            return;
                        }
                        l.clear();
                        match r.read_line(&mut l) {
                            Ok(0) => break,
                            Ok(_) => {
                                let Ok(v) = json::parse(l.trim()) else {
                                    continue;
                                };
                                let num = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
                                lines.lock().unwrap().push(Line {
                                    group,
                                    id,
                                    now: num("now_ns"),
                                    leader: v.get("role").and_then(Value::as_str) == Some("leader"),
                                    term: num("term"),
                                    until: num("lease_until_ns"),
                                });
                            }
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                ) => {}
                            Err(_) => break,
                        }
                    }
                }
            })
        })
        .collect()
}

/// One server's lease, as reported: [start, end) on CLOCK_BOOTTIME, first and last term.
#[derive(Clone, Copy, Debug)]
struct Lease {
    id: u16,
    start: u64,
    end: u64,
    first_term: u64,
    last_term: u64,
}

fn leases(lines: &[Line]) -> Vec<Lease> {
    let mut out = Vec::new();
    for id in 1..=N {
        let mut open: Option<Lease> = None;
        let mut mine: Vec<&Line> = lines.iter().filter(|l| l.id == id).collect();
        mine.sort_by_key(|l| l.now);
        for l in mine {
            match (&mut open, l.leader) {
                (Some(o), true) => {
                    o.end = o.end.max(l.until);
                    o.last_term = o.last_term.max(l.term);
                }
                (None, true) => {
                    open = Some(Lease {
                        id,
                        start: l.now,
                        end: l.until,
                        first_term: l.term,
                        last_term: l.term,
                    })
                }
                (Some(o), false) => {
                    o.end = o.end.min(l.now);
                    out.push(*o);
                    open = None;
                }
                (None, false) => {}
            }
        }
        out.extend(open);
    }
    out.sort_by_key(|l| l.start);
    out
}

/// S1, S2, S3 over the reported leases; returns the violations.
fn check(ls: &[Lease]) -> Vec<String> {
    let mut v = Vec::new();
    for (i, a) in ls.iter().enumerate() {
        for b in &ls[i + 1..] {
            if a.id != b.id && a.start < b.end && b.start < a.end {
                v.push(format!("S2: leases overlap: {a:?} and {b:?}"));
            }
            if a.id != b.id && b.first_term <= a.last_term {
                v.push(format!(
                    "S1/S3: a later lease has term {} after {}: {a:?} then {b:?}",
                    b.first_term, a.last_term
                ));
            }
        }
    }
    v
}

/// Group `g`'s leases and wrapped commands, checked: S1, S2, S3, L1 after each heal,
/// no two commands at once. Returns the leases, the runs, the violations.
fn check_group(
    g: usize,
    lines: &[Line],
    heals: &[(u64, &str)],
    bound: Duration,
    log: &str,
) -> (Vec<Lease>, Vec<Span>, Vec<String>) {
    let mine: Vec<Line> = lines.iter().filter(|l| l.group == g).copied().collect();
    let ls = leases(&mine);
    let tag = |v: String| format!("group {}: {v}", GROUPS[g]);
    let mut violations: Vec<String> = check(&ls).into_iter().map(tag).collect();
    // L1: after each heal, some lease within the bound.
    for &(t, name) in heals {
        let first = ls
            .iter()
            .filter(|l| l.end > t)
            .map(|l| l.start.max(t))
            .min();
        match first {
            Some(at) if at - t <= bound.as_nanos() as u64 => {}
            other => violations.push(tag(format!(
                "L1: no lease within {bound:?} after healing '{name}' (first after {:?} ms)",
                other.map(|a| (a - t) / 1_000_000)
            ))),
        }
    }
    let runs: Vec<Span> = spans(log);
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            if a.start < b.end && b.start < a.end {
                violations.push(tag(format!("run: two commands at once: {a:?} and {b:?}")));
            }
        }
    }
    (ls, runs, violations)
}

fn config(multicast: bool, dir: &std::path::Path) -> String {
    let mut t = format!("cluster chaos-{}\n", std::process::id());
    for i in 1..=N {
        t += &format!(
            "server {i} 10.77.0.{i}:{} name h{i}\n",
            if multicast { 7401 } else { 7400 }
        );
    }
    t += if multicast {
        "multicast 239.255.77.1:7400 interface eth0 ttl 1\n"
    } else {
        "unicast\n"
    };
    t += &format!(
        "heartbeat {HBT_MS}ms\nrtt {RTT_MS}ms\nmissed-heartbeats 3\nsocket {0}/{{id}}.sock\nstate {0}/{{id}}.state\n",
        dir.display()
    );
    t += "group a\n  prefer 1 2 3 4 5\ngroup b\n  prefer 5 4 3 2 1\n";
    t
}

/// Now on the boot clock, the clock of `now_ns` and `lease_until_ns` in `status` (SPEC
/// 11) and of the wrapped commands' stamps.
fn now_ns() -> u64 {
    common::boottime_ns()
}

const FAULTS: [&str; 7] = [
    "partition, leader in minority",
    "partition, leader in majority",
    "one-way cut from the leader",
    "30% loss",
    "leader frozen past its lease",
    "kill and restart",
    "everything at once",
];

/// The fault that surely moves the targeted group's leader.
const FROZEN: usize = 4;

fn chaos(multicast: bool) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(net) = Net::create(if multicast { "m" } else { "u" }) else {
        return;
    };
    let seed: u64 = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| now_ns() ^ u64::from(std::process::id()));
    let rounds: usize = std::env::var("CHAOS_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    eprintln!(
        "chaos ({}): seed {seed}; replay: CHAOS_SEED={seed} cargo test --release --test chaos",
        if multicast { "multicast" } else { "unicast" }
    );
    let mut rng = electd::rng::SplitMix64::new(seed);
    let mut c = Cluster::launch(N, net.hosts.clone(), |d| config(multicast, d));
    let lines = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let followers = follow(&c, &lines, &stop);
    let dir = c.dir.clone();
    let log = move |g: &str| {
        dir.join(format!("cmd-{g}.log"))
            .to_str()
            .unwrap()
            .to_string()
    };
    // Stopped when dropped, on a failed assertion too.
    let mut sups = common::Supervisors(
        (1..=N)
            .flat_map(|id| GROUPS.map(|g| (id, g)))
            .map(|(id, g)| supervise_with(&c, id, &log(g), &["--group", g, "--grace", "50ms"], &[]))
            .collect(),
    );
    let mut heals: Vec<(u64, &str)> = Vec::new();
    let mut applied = Vec::new();
    let mut l2_checks = 0;
    // L1's bound plus 400 ms, times the slack factor for a loaded machine.
    let bound = common::slacked(Duration::from_millis(
        3 * HBT_MS + 5 * HBT_MS + 8 * RTT_MS + 400,
    ));
    // The seeded rounds, then one round per group that freezes its leader past its
    // lease: a seed whose random faults all missed one group's leader (seed
    // 62470645085842 left group a with one lease) still fails every group over once.
    let schedule = (0..rounds)
        .map(|_| None)
        .chain(GROUPS.iter().map(|&g| Some(g)));
    for forced in schedule {
        // Each round aims at one group's leader; the other group's may be the same
        // server or not.
        let target = forced.unwrap_or_else(|| GROUPS[rng.below(GROUPS.len() as u64) as usize]);
        let other = GROUPS
            .iter()
            .find(|&&g| g != target)
            .copied()
            .unwrap_or("b");
        let (leader, _) = c.agreement_in(Some(target), Duration::from_secs(10));
        let (leader_b, _) = c.agreement_in(Some(other), Duration::from_secs(10));
        let others: Vec<u16> = (1..=N).filter(|&i| i != leader).collect();
        let pick =
            |rng: &mut electd::rng::SplitMix64| others[rng.below(others.len() as u64) as usize];
        let (fault, hold) = match forced {
            Some(_) => (FROZEN, Duration::from_millis(1_000)),
            None => (
                rng.below(FAULTS.len() as u64 + 1) as usize,
                Duration::from_millis(700 + rng.below(800)),
            ),
        };
        let mut killed = None;
        if fault == FAULTS.len() {
            // L2: a follower of both groups cut off and back; each leader must keep
            // its seat.
            let f = loop {
                let f = pick(&mut rng);
                if f != leader_b {
                    break f;
                }
            };
            net.partition(&[f]);
            std::thread::sleep(hold);
            net.heal();
            std::thread::sleep(Duration::from_millis(600));
            for (g, seat) in [(target, leader), (other, leader_b)] {
                let (l2, _) = c.agreement_in(Some(g), Duration::from_secs(5));
                assert_eq!(
                    l2, seat,
                    "L2 (seed {seed}): cutting off follower {f} moved group {g}'s seat"
                );
            }
            applied.push("follower cut off (L2)");
            l2_checks += 1;
            continue;
        }
        let name = FAULTS[fault];
        applied.push(name);
        match fault {
            0 => net.partition(&[leader, pick(&mut rng)]),
            1 => net.partition(&[pick(&mut rng), pick(&mut rng)]),
            2 => others.iter().for_each(|&o| net.cut(leader, o)),
            3 => net.loss(30),
            FROZEN => common::signal(c.child(leader), libc::SIGSTOP),
            5 => {
                let victim = if rng.below(2) == 0 {
                    leader
                } else {
                    pick(&mut rng)
                };
                c.kill(victim);
                killed = Some(victim);
            }
            _ => {
                net.partition(&[leader, pick(&mut rng)]);
                net.loss(20);
                let victim = pick(&mut rng);
                c.kill(victim);
                killed = Some(victim);
            }
        }
        std::thread::sleep(hold);
        net.heal();
        if fault == FROZEN {
            common::signal(c.child(leader), libc::SIGCONT);
        }
        if let Some(v) = killed {
            c.spawn(v);
        }
        // L1 is measured from when a majority has run K*HBT after the heal.
        heals.push((now_ns() + 3 * HBT_MS * 1_000_000, name));
        std::thread::sleep(bound + Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(500));
    sups.stop();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for f in followers {
        let _ = f.join();
    }
    let lines = lines.lock().unwrap().clone();
    let mut violations = Vec::new();
    let mut per_group = Vec::new();
    for (g, name) in GROUPS.iter().enumerate() {
        let (ls, runs, v) = check_group(g, &lines, &heals, bound, &log(name));
        violations.extend(v);
        per_group.push((ls, runs));
    }
    let (ls, runs) = per_group[0].clone();
    // The longest time without a lease, and the fault around it.
    let mut longest = (0u64, "start");
    for w in ls.windows(2) {
        let gap = w[1].start.saturating_sub(w[0].end);
        if gap > longest.0 {
            let cause = heals
                .iter()
                .filter(|h| h.0 - 3 * HBT_MS * 1_000_000 >= w[0].end.saturating_sub(3_000_000_000))
                .map(|h| h.1)
                .next()
                .unwrap_or("?");
            longest = (gap, cause);
        }
    }
    let (ls_b, runs_b) = &per_group[1];
    eprintln!(
        "chaos report ({}), seed {seed}: faults {} [{}]; L2 checks {l2_checks}; group a: leases {}, leader changes {}, command runs {}, longest without a leader {} ms (around '{}'); group b: leases {}, leader changes {}, command runs {}; violations {}",
        if multicast { "multicast" } else { "unicast" },
        applied.len(),
        applied.join(", "),
        ls.len(),
        ls.windows(2).filter(|w| w[0].id != w[1].id).count(),
        runs.len(),
        longest.0 / 1_000_000,
        longest.1,
        ls_b.len(),
        ls_b.windows(2).filter(|w| w[0].id != w[1].id).count(),
        runs_b.len(),
        violations.len()
    );
    // Every group's leader was frozen past its lease at least once.
    for (g, (ls, runs)) in GROUPS.iter().zip(&per_group) {
        assert!(
            ls.len() >= 2 && runs.len() >= 2,
            "seed {seed}: group {g} failed over and ran its command again"
        );
    }
    assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
}

/// The per-group checker: leases of two groups may overlap (they are independent), two
/// leases of one group may not.
#[test]
fn groups_are_checked_apart() {
    let line = |group, id, now, leader, term, until| Line {
        group,
        id,
        now,
        leader,
        term,
        until,
    };
    let lines = [
        line(0, 1, 10, true, 2, 100),
        line(1, 2, 20, true, 5, 100),
        line(0, 1, 100, false, 2, 0),
        line(1, 2, 100, false, 5, 0),
    ];
    let none = tempfile_log();
    let (a, _, v) = check_group(0, &lines, &[], Duration::from_secs(1), &none);
    assert_eq!(a.len(), 1);
    assert!(v.is_empty(), "different groups overlap freely: {v:?}");
    let mut same = lines;
    same[1].group = 0;
    same[3].group = 0;
    let (_, _, v) = check_group(0, &same, &[], Duration::from_secs(1), &none);
    assert!(v[0].starts_with("group a: S2"), "{v:?}");
}

/// A command log that does not exist: no runs.
fn tempfile_log() -> String {
    std::env::temp_dir()
        .join(format!("electd-chaos-none-{}", std::process::id()))
        .display()
        .to_string()
}

/// Not a test: the command wrapped by `electctl run` when re-executed.
#[test]
fn cmd_helper() {
    common::cmd_helper();
}

#[test]
fn chaos_unicast() {
    chaos(false);
}

#[test]
fn chaos_multicast() {
    chaos(true);
}

/// The checker can fail: overlapping leases, and a later lease of a lower term.
#[test]
fn checker_detects_overlaps_and_term_order() {
    let l = |id, start, end, term| Lease {
        id,
        start,
        end,
        first_term: term,
        last_term: term,
    };
    assert!(check(&[l(1, 0, 100, 3), l(2, 100, 200, 4)]).is_empty());
    assert!(check(&[l(1, 0, 100, 3), l(2, 99, 200, 4)])[0].starts_with("S2"));
    assert!(check(&[l(1, 0, 100, 5), l(2, 100, 200, 4)])[0].starts_with("S1/S3"));
    let lines = [
        Line {
            group: 0,
            id: 1,
            now: 10,
            leader: true,
            term: 2,
            until: 50,
        },
        Line {
            group: 0,
            id: 1,
            now: 40,
            leader: true,
            term: 2,
            until: 90,
        },
        Line {
            group: 0,
            id: 1,
            now: 60,
            leader: false,
            term: 2,
            until: 0,
        },
        Line {
            group: 0,
            id: 2,
            now: 70,
            leader: true,
            term: 3,
            until: 120,
        },
    ];
    let ls = leases(&lines);
    assert_eq!(
        (ls[0].start, ls[0].end),
        (10, 60),
        "renewal extends, stepping down ends it"
    );
    assert!(
        check(&ls).is_empty(),
        "server 2 began at 70, after 1 stepped down at 60"
    );
    let mut early = lines;
    early[3].now = 55;
    assert!(
        check(&leases(&early))[0].starts_with("S2"),
        "server 2 beginning at 55 overlaps"
    );
}

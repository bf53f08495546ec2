//! Election groups (issue 12, SPEC section 15) on real daemons on loopback: idle cost
//! for 1, 8 and 64 groups on 5 servers, with every group preferring one server and with
//! `balance on`; and crash failover per group with 8 balanced groups.
//! `BENCH_ONLY_GROUPS=1 cargo bench --bench electd` runs these (and the idle traffic
//! table of traffic.rs); `BENCH_GROUPS_IDLE_S` sets each idle measurement (default
//! 20 s), `BENCH_TRIALS` the crashes (default 30).

use crate::common::{Cluster, Mode, Opts, agreed, groups_text};
use crate::traffic::{DaemonCost, idle_per_daemon};
use crate::{Watch, sent_in, stats, trials};
use electd::json::Value;
use electd::time::boot_now;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// Servers, heartbeat, rtt, missed heartbeats and preempt-delay of every cluster here.
const N: u16 = 5;
const HBT_MS: u64 = 100;
const RTT_MS: u64 = 20;
const K: u64 = 3;
const PREEMPT_MS: u64 = 300;

fn idle_secs() -> u64 {
    std::env::var("BENCH_GROUPS_IDLE_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

#[derive(Clone, Copy, PartialEq)]
enum Layout {
    /// Every group `prefer 1 2 3 4 5`: server 1 leads them all.
    Same,
    /// `balance on`: group k prefers server k mod N + 1.
    Balanced,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Layout::Same => "(a) all prefer server 1",
            Layout::Balanced => "(b) `balance on`",
        }
    }

    /// The server group `k` settles on.
    fn preferred(self, k: usize) -> u16 {
        match self {
            Layout::Same => 1,
            Layout::Balanced => (k % usize::from(N)) as u16 + 1,
        }
    }
}

/// Five servers (unicast, heartbeat 100 ms, rtt 20 ms, preempt-delay 300 ms) running
/// groups g0..g{G-1} laid out as `layout` says; each serves its metrics over HTTP on
/// loopback, at the returned ports (the control socket drops a `metrics` answer over
/// its 64 KiB buffer, which 64 groups exceed).
fn cluster(layout: Layout, groups: usize) -> (Cluster, Vec<u16>) {
    let names: Vec<String> = (0..groups).map(|k| format!("g{k}")).collect();
    let prefer = (layout == Layout::Same).then_some("1 2 3 4 5");
    let sections: Vec<(&str, Option<&str>)> = names.iter().map(|n| (n.as_str(), prefer)).collect();
    let mut o = Opts::new(Mode::Unicast, N);
    o.hbt_ms = HBT_MS;
    o.rtt_ms = RTT_MS;
    o.run = 0;
    let head = format!(
        "{}preempt-delay {PREEMPT_MS}ms\n",
        if layout == Layout::Balanced {
            "balance on\n"
        } else {
            ""
        },
    );
    o.extra = head.clone() + &groups_text(&sections);
    let mut c = Cluster::build(&o);
    let text = std::fs::read_to_string(&c.conf).expect("config");
    let at = text.find(&head).expect("cluster-wide lines");
    let mut ports = Vec::new();
    for id in 1..=N {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mine = format!(
            "{}metrics-listen 127.0.0.1:{port}\n{}",
            &text[..at],
            &text[at..]
        );
        c.set_server_text(id, &mine);
        c.spawn(id);
        ports.push(port);
    }
    (c, ports)
}

/// GET /metrics on loopback `port`: (datagrams, bytes) sent.
fn http_sent(port: u16) -> (u64, u64) {
    let get = || -> std::io::Result<String> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
        let mut text = String::new();
        s.read_to_string(&mut text)?;
        Ok(text)
    };
    sent_in(&get().unwrap_or_default())
}

/// Per group, (leader, term) once every group is led by its preferred server and every
/// running server agrees; None after 60 s (saying what it saw last).
fn settled(c: &Cluster, layout: Layout) -> Option<Agreement> {
    let t0 = Instant::now();
    let mut last = None;
    while t0.elapsed() < Duration::from_secs(60) {
        if let Some(a) = agreed(c) {
            let home = a.iter().all(|(name, (l, _))| {
                let k: usize = name[1..].parse().unwrap_or(usize::MAX);
                *l == layout.preferred(k)
            });
            if home {
                return Some(a);
            }
            last = Some(a);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "bench groups: {}: not settled within 60 s; last agreement: {last:?}",
        layout.name()
    );
    None
}

/// Per group, the (leader, term) every server agrees on.
type Agreement = BTreeMap<String, (u16, u64)>;

/// Distinct leaders in an agreement.
fn leaders(a: &Agreement) -> usize {
    let mut l: Vec<u16> = a.values().map(|v| v.0).collect();
    l.sort_unstable();
    l.dedup();
    l.len()
}

/// Idle cost of `groups` groups laid out as `layout`, once settled: per daemon, the
/// distinct leaders, and whether any group moved while measuring.
fn idle_groups(layout: Layout, groups: usize, secs: u64) -> Option<(Vec<DaemonCost>, usize, bool)> {
    let (c, ports) = cluster(layout, groups);
    let t0 = Instant::now();
    let a = settled(&c, layout)?;
    eprintln!(
        "bench groups: {groups} groups, {}: settled in {:?}",
        layout.name(),
        t0.elapsed()
    );
    // Heartbeat alignment takes a heartbeat or two; idle_per_daemon waits a second.
    let per = idle_per_daemon(&c, N, secs, &|id| http_sent(ports[usize::from(id) - 1]));
    let moved = agreed(&c).as_ref() != Some(&a);
    Some((per, leaders(&a), moved))
}

fn idle_report(out: &mut String) {
    let secs = idle_secs();
    let _ = writeln!(
        out,
        "\n### Idle cost of election groups (5 servers, unicast, heartbeat 100 ms, rtt 20 ms, preempt-delay {PREEMPT_MS} ms, {secs} s)\n"
    );
    let _ = writeln!(
        out,
        "Measured once every group is led by its preferred server. Sums over the cluster, busiest daemon, CPU per daemon (mean / max); x1 is the ratio to one group in the same layout. Target (issue 12): 64 groups cost at most 2x one group.\n"
    );
    let _ = writeln!(
        out,
        "| layout | groups | leaders | datagrams/s | x1 | busiest daemon datagrams/s | bytes/s | x1 | CPU % per daemon (mean / max) | x1 (mean) |"
    );
    let _ = writeln!(
        out,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for layout in [Layout::Same, Layout::Balanced] {
        let mut one: Option<(f64, f64, f64)> = None;
        for groups in [1usize, 8, 64] {
            let Some((per, leaders, moved)) = idle_groups(layout, groups, secs) else {
                continue;
            };
            let d: f64 = per.iter().map(|p| p.1).sum();
            let b: f64 = per.iter().map(|p| p.2).sum();
            let cpu = per.iter().map(|p| p.0).sum::<f64>() / f64::from(N);
            let cpu_max = per.iter().map(|p| p.0).fold(0.0, f64::max);
            let busiest = per.iter().map(|p| p.1).fold(0.0, f64::max);
            let base = *one.get_or_insert((d, b, cpu));
            let _ = writeln!(
                out,
                "| {} | {groups} | {leaders}{} | {d:.1} | {:.2} | {busiest:.1} | {b:.0} | {:.1} | {cpu:.3} / {cpu_max:.3} | {:.1} |",
                layout.name(),
                if moved { " (a group moved)" } else { "" },
                d / base.0,
                b / base.1,
                cpu / base.2,
            );
            eprintln!("bench groups: idle {groups} groups, {} done", layout.name());
        }
    }
}

impl Watch {
    /// The next watch line before `deadline`.
    fn next_before(&self, deadline: Instant) -> Option<(u16, u64, Value)> {
        let left = deadline.checked_duration_since(Instant::now())?;
        self.rx.recv_timeout(left).ok()
    }
}

/// In an all-groups watch line, the term of group `name` when the server reports its
/// lease.
fn lease_term(v: &Value, name: &str) -> Option<u64> {
    let g = v
        .get("groups")?
        .as_array()?
        .iter()
        .find(|g| g.get("group").and_then(Value::as_str) == Some(name))?;
    g.get("lease_until_ns")?.as_u64()?;
    (g.get("role")?.as_str()? == "leader")
        .then(|| g.get("term")?.as_u64())
        .flatten()
}

/// What the crash trials measured.
#[derive(Default)]
struct Crashes {
    /// Per group: kill to the first watch line of another server's lease with a higher
    /// term (ms).
    per_group: BTreeMap<String, Vec<f64>>,
    /// Per kill: to the last of the dead server's groups.
    last: Vec<f64>,
    /// Groups of the dead server with no new lease within the limit.
    missed: usize,
    /// Groups of other servers whose leader or term changed across a trial.
    disturbed: usize,
    kills: usize,
}

/// `trials` SIGKILLs, each of a random server (every one leads a group or two) at a
/// random phase of its heartbeat, on 5 servers with 8 balanced groups.
fn crashes(trials: usize) -> Crashes {
    let layout = Layout::Balanced;
    let (mut c, _) = cluster(layout, 8);
    let w = Watch::new();
    for id in 1..=N {
        w.follow(&c, id);
    }
    let mut rng = electd::rng::SplitMix64::new(u64::from(std::process::id()) ^ 0x9e37);
    let mut out = Crashes::default();
    let limit = Duration::from_millis(10 * HBT_MS + 2000);
    let mut before: Option<(u16, Agreement)> = None;
    for _ in 0..trials {
        // The dead server has run K*HBT and taken its groups back (preempt-delay).
        let Some(a) = settled(&c, layout) else {
            break;
        };
        if let Some((victim, prev)) = before.take() {
            out.disturbed += prev
                .iter()
                .filter(|(name, (l, t))| *l != victim && a.get(*name) != Some(&(*l, *t)))
                .count();
        }
        let victim = rng.below(u64::from(N)) as u16 + 1;
        let mut led: BTreeMap<String, u64> = a
            .iter()
            .filter(|(_, (l, _))| *l == victim)
            .map(|(name, (_, t))| (name.clone(), *t))
            .collect();
        std::thread::sleep(Duration::from_millis(rng.below(HBT_MS)));
        w.drain();
        let t0 = boot_now().as_nanos();
        c.kill(victim);
        out.kills += 1;
        let deadline = Instant::now() + limit;
        let mut last = 0.0f64;
        while !led.is_empty() {
            let Some((id, at, v)) = w.next_before(deadline) else {
                break;
            };
            if id == victim {
                continue;
            }
            let done: Vec<String> = led
                .iter()
                .filter(|(name, old)| lease_term(&v, name).is_some_and(|t| t > **old))
                .map(|(name, _)| name.clone())
                .collect();
            for name in done {
                led.remove(&name);
                let ms = (at - t0) as f64 / 1e6;
                last = last.max(ms);
                out.per_group.entry(name).or_default().push(ms);
            }
        }
        if led.is_empty() {
            out.last.push(last);
        } else {
            eprintln!("bench groups: no new lease for {led:?} within {limit:?}");
            out.missed += led.len();
        }
        c.spawn(victim);
        w.follow(&c, victim);
        before = Some((victim, a));
    }
    out
}

fn crash_report(out: &mut String, trials: usize) {
    let bound = K * HBT_MS + RTT_MS;
    let r = crashes(trials);
    let _ = writeln!(
        out,
        "\n### Crash failover per group (5 servers, 8 groups, `balance on`, preempt-delay {PREEMPT_MS} ms, heartbeat 100 ms, rtt 20 ms, {} kills)\n",
        r.kills
    );
    let _ = writeln!(
        out,
        "SIGKILL of a random server (each leads one or two groups) at a random phase of its heartbeat; per group it led, the time from the kill to the first `watch` line in which another server reports that group's lease with a higher term. Single-group bound (SPEC section 7): K*HBT + RTT + delays = {bound} ms + delays.\n"
    );
    let _ = writeln!(
        out,
        "| measure | samples | min | median | p99 | max (ms) | above {bound} ms |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- |");
    let row = |out: &mut String, name: &str, v: &[f64]| {
        if v.is_empty() {
            let _ = writeln!(out, "| {name} | 0 | - | - | - | - | - |");
            return;
        }
        let [mn, md, p99, mx] = stats(v.to_vec());
        let above = v.iter().filter(|&&x| x > bound as f64).count();
        let _ = writeln!(
            out,
            "| {name} | {} | {mn:.1} | {md:.1} | {p99:.1} | {mx:.1} | {above} |",
            v.len()
        );
    };
    let all: Vec<f64> = r.per_group.values().flatten().copied().collect();
    row(out, "every group of the dead server", &all);
    row(out, "the last group of each kill", &r.last);
    for (name, v) in &r.per_group {
        row(out, &format!("group {name}"), v);
    }
    let _ = writeln!(
        out,
        "\nGroups of the dead server without a new lease within {} ms: {}. Groups led by other servers whose leader or term changed across a trial: {}.",
        10 * HBT_MS + 2000,
        r.missed,
        r.disturbed
    );
}

/// The tables of this module: idle cost by groups, then crash failover per group.
pub fn report(out: &mut String) {
    idle_report(out);
    crash_report(out, trials());
}

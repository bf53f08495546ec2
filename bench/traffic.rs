//! Idle traffic as the cluster grows (issue 12): followers acknowledge to the leader
//! only, so datagrams per heartbeat grow linearly with the servers. Real daemons on
//! loopback. `BENCH_ONLY_TRAFFIC=1 cargo bench --bench electd` runs only this part;
//! `BENCH_TRAFFIC_IDLE_S` sets the measurement (default 20 s).

use crate::common::{Cluster, Mode};
use crate::{proc_stat, sent, timed_cluster};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

fn idle_secs() -> u64 {
    std::env::var("BENCH_TRAFFIC_IDLE_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

/// One daemon's idle cost: CPU % of a core, datagrams sent/s, bytes sent/s.
pub(crate) type DaemonCost = (f64, f64, f64);

/// Per daemon (servers 1..=n), its idle cost over `secs` seconds, after one second for
/// the cluster to settle; `sent` reads a server's (datagrams, bytes) sent so far.
pub(crate) fn idle_per_daemon(
    c: &Cluster,
    n: u16,
    secs: u64,
    sent: &dyn Fn(u16) -> (u64, u64),
) -> Vec<DaemonCost> {
    std::thread::sleep(Duration::from_secs(1));
    let before: Vec<_> = (1..=n)
        .map(|id| (proc_stat(c.child(id).id()).0, sent(id)))
        .collect();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let dt = t0.elapsed().as_secs_f64();
    (1..=n)
        .map(|id| {
            let (cpu0, (d0, b0)) = before[usize::from(id) - 1];
            let cpu1 = proc_stat(c.child(id).id()).0;
            let (d1, b1) = sent(id);
            (
                (cpu1 - cpu0) / dt * 100.0,
                (d1 - d0) as f64 / dt,
                (b1 - b0) as f64 / dt,
            )
        })
        .collect()
}

/// Cluster-wide datagrams/s and bytes/s, and per daemon CPU % (mean, max), idle.
pub(crate) fn idle_cost(c: &Cluster, n: u16, secs: u64) -> (f64, f64, f64, f64) {
    let per = idle_per_daemon(c, n, secs, &|id| sent(c, id));
    let sum = |f: fn(&DaemonCost) -> f64| per.iter().map(f).sum::<f64>();
    let cpu_max = per.iter().map(|p| p.0).fold(0.0, f64::max);
    (
        sum(|p| p.1),
        sum(|p| p.2),
        sum(|p| p.0) / f64::from(n),
        cpu_max,
    )
}

/// Idle datagrams/s against the issue-12 targets for N = 3 (multicast and unicast), 5,
/// 9, 17 and 33 servers.
pub fn report(out: &mut String) {
    let secs = idle_secs();
    let _ = writeln!(
        out,
        "\n### Idle traffic as the cluster grows (one group, heartbeat 100 ms, {secs} s)\n"
    );
    let _ = writeln!(
        out,
        "Target (issue 12): datagrams/s at most 3 x N x 10; at N=3 no more frames than twice keepalived's 20/s (40/s).\n"
    );
    let _ = writeln!(
        out,
        "| N | transport | datagrams/s | target | bytes/s | CPU % per daemon (mean / max) |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
    for (n, mode) in [
        (3u16, Mode::Multicast),
        (3, Mode::Unicast),
        (5, Mode::Unicast),
        (9, Mode::Unicast),
        (17, Mode::Unicast),
        (33, Mode::Unicast),
    ] {
        let c = timed_cluster(mode, n, 100, 20);
        c.agreement(Duration::from_secs(30));
        let (d, b, cpu, cpu_max) = idle_cost(&c, n, secs);
        let target = if n == 3 { 40 } else { 30 * u64::from(n) };
        let _ = writeln!(
            out,
            "| {n} | {mode:?} | {d:.1} | {target} | {b:.0} | {cpu:.3} / {cpu_max:.3} |"
        );
        eprintln!("bench traffic: N={n} {mode:?} done");
    }
}

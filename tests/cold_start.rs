//! Cold starts of real daemons follow the preference (SPEC section 14, issue 22): the
//! README's three processors (orders, payments, audit with `balance on`) on three
//! servers spread 1/1/1 from the first election, whether the servers start all at once
//! or up to K*HBT apart, in any order; with plain priorities 20/10/10 the priority-20
//! server leads. No `preempt-delay`, so a first election that went elsewhere would stay
//! (sticky): what each group's leader is after the start is what it was first.
//!
//! Each configuration is one cluster stopped (SIGKILL) and started again
//! `ELECTD_COLD_STARTS` times (default 5, so CI stays fast; the figures of issue 22 are
//! measured with 20): its state files stay, as for an operator's restart of every
//! server. The start order and gaps are drawn from a seed printed on failure
//! (`ELECTD_COLD_SEED` replays it).

mod common;

use common::{Cluster, Mode, Opts, SERIAL};
use electd::rng::SplitMix64;
use std::time::Duration;

const GROUPS: [&str; 3] = ["orders", "payments", "audit"];

fn starts() -> usize {
    common::env_num("ELECTD_COLD_STARTS", 5)
}

fn seed() -> u64 {
    common::env_seed("ELECTD_COLD_SEED")
}

/// Starts every server of `c`, in an order drawn from `rng`; with `spread`, each at an
/// offset drawn from 0..=K*HBT after the first (so any two within K*HBT of each other).
/// Returns the spread measured: from the first server's control socket answering to
/// the last one's (each `spawn` returns once it does, polled every 5 ms). A loaded
/// machine starts a process late, so the servers may really start further apart than
/// drawn: the premise of SPEC 14's cold start (within K*HBT) is judged on this.
fn start_all(c: &mut Cluster, rng: &mut SplitMix64, spread: bool, hold: Duration) -> Duration {
    let mut order: Vec<u16> = (1..=c.n).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut offsets: Vec<u64> = (0..order.len())
        .map(|_| {
            if spread {
                rng.below(hold.as_millis() as u64 + 1)
            } else {
                0
            }
        })
        .collect();
    offsets.sort_unstable();
    let t0 = std::time::Instant::now();
    let mut ready = Vec::new();
    for (id, off) in order.iter().zip(&offsets) {
        let at = t0 + Duration::from_millis(*off);
        if let Some(wait) = at.checked_duration_since(std::time::Instant::now()) {
            std::thread::sleep(wait);
        }
        c.spawn(*id);
        ready.push(std::time::Instant::now());
    }
    ready[ready.len() - 1] - ready[0]
}

/// How far apart the servers may have started for SPEC 14's cold start to apply, on
/// the spread `start_all` measured: K*HBT less the 5 ms that polling each socket may
/// add to each end.
fn within_premise(spread: Duration, hold: Duration) -> bool {
    spread + Duration::from_millis(5) <= hold
}

/// Runs `runs` cold starts of `c` and returns, per run, each group's leader (group
/// `None`: a file without groups) and whether the servers started within the premise
/// (`within_premise`).
fn cold_starts(
    c: &mut Cluster,
    groups: &[Option<&str>],
    runs: usize,
    spread: bool,
    seed: u64,
    hbt_ms: u64,
) -> Vec<(Vec<u16>, bool)> {
    let mut rng = SplitMix64::new(seed);
    let hold = Duration::from_millis(3 * hbt_ms);
    let mut out = Vec::new();
    for _ in 0..runs {
        let apart = start_all(c, &mut rng, spread, hold);
        // The quiet period (K*HBT), the first round after it, the spread, and slack.
        let within = Duration::from_secs(5) + 4 * hold;
        let leaders: Vec<u16> = groups
            .iter()
            .map(|g| c.agreement_in(*g, within).0)
            .collect();
        if !within_premise(apart, hold) {
            eprintln!(
                "cold start: the servers started {} ms apart, more than K*HBT ({} ms) \
                 less 5 ms: outside SPEC 14's premise, not judged (leaders {leaders:?})",
                apart.as_millis(),
                hold.as_millis()
            );
        }
        out.push((leaders, within_premise(apart, hold)));
        for id in 1..=c.n {
            c.kill(id);
        }
    }
    out
}

/// Tallies the runs within the premise against `want`; prints the figure; returns a
/// failure (`what: ok of judged`) if one of them did not honour it, or if none was
/// within the premise (the check would then have covered nothing).
fn report(what: &str, got: &[(Vec<u16>, bool)], want: &[u16], seed: u64) -> Option<String> {
    let judged: Vec<&Vec<u16>> = got.iter().filter(|g| g.1).map(|g| &g.0).collect();
    let ok = judged.iter().filter(|g| g[..] == want[..]).count();
    eprintln!(
        "cold start ({what}): {ok} of {} honoured the preference {want:?} ({} outside the \
         premise; seed {seed}); leaders per run: {got:?}",
        judged.len(),
        got.len() - judged.len()
    );
    (judged.is_empty() || ok < judged.len()).then(|| format!("{what}: {ok} of {}", judged.len()))
}

/// README's example: `balance on` and three groups over three servers, started all at
/// once and up to K*HBT apart, unicast and multicast: one group per server, every time.
#[test]
fn balance_spreads_one_group_per_server_from_a_cold_start() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let seed = seed();
    let groups: Vec<Option<&str>> = GROUPS.iter().map(|g| Some(*g)).collect();
    let runs = starts();
    let mut failed = Vec::new();
    for mode in [Mode::Unicast, Mode::Multicast] {
        let mut o = Opts::new(mode, 3);
        o.run = 0;
        o.extra = "balance on\ngroup orders\ngroup payments\ngroup audit\n".into();
        let mut c = Cluster::build(&o);
        for (what, spread) in [("all at once", false), ("within K*HBT", true)] {
            let what = format!("{mode:?}, {what}");
            let got = cold_starts(&mut c, &groups, runs, spread, seed, common::HBT_MS);
            failed.extend(report(&format!("balance, {what}"), &got, &[1, 2, 3], seed));
        }
    }
    assert!(
        failed.is_empty(),
        "cold starts that ignored balance: {failed:?}; replay: ELECTD_COLD_SEED={seed} \
         cargo test --release --test cold_start -- --nocapture"
    );
}

/// Plain priorities 20/10/10 (no groups): the priority-20 server leads after every cold
/// start, all at once or up to K*HBT apart.
#[test]
fn the_highest_priority_leads_from_a_cold_start() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let seed = seed();
    let mut o = Opts::new(Mode::Unicast, 3);
    o.run = 0;
    let mut c = Cluster::build(&o);
    let text = std::fs::read_to_string(&c.conf).unwrap();
    let text = text
        .replace("name s1\n", "name s1 priority 20\n")
        .replace("name s2\n", "name s2 priority 10\n")
        .replace("name s3\n", "name s3 priority 10\n");
    std::fs::write(&c.conf, text).unwrap();
    let runs = starts();
    let mut failed = Vec::new();
    for (what, spread) in [("all at once", false), ("within K*HBT", true)] {
        let got = cold_starts(&mut c, &[None], runs, spread, seed, common::HBT_MS);
        failed.extend(report(
            &format!("priority 20/10/10, {what}"),
            &got,
            &[1],
            seed,
        ));
    }
    assert!(
        failed.is_empty(),
        "cold starts that ignored priority: {failed:?}; replay: ELECTD_COLD_SEED={seed} \
         cargo test --release --test cold_start -- --nocapture"
    );
}

/// The other shapes of issue 22's requirement: five servers (`balance on` with five
/// groups: one each; plain priorities: the top one), and a heartbeat of 1 s (three
/// servers, balance; five, priority), unicast and multicast, all at once and up to
/// K*HBT apart.
#[test]
fn five_servers_and_a_one_second_heartbeat_follow_the_preference_from_a_cold_start() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let seed = seed();
    let runs = starts();
    let five: [&str; 5] = ["orders", "payments", "audit", "billing", "reports"];
    let mut failed = Vec::new();
    // (servers, heartbeat ms, mode, balance with one group per server, else priorities)
    let shapes = [
        (5u16, 100u64, Mode::Unicast, true),
        (5, 100, Mode::Multicast, false),
        (3, 1000, Mode::Multicast, true),
        (5, 1000, Mode::Unicast, false),
    ];
    for (n, hbt_ms, mode, balance) in shapes {
        let mut o = Opts::new(mode, n);
        o.run = 0;
        o.hbt_ms = hbt_ms;
        let names = &five[..usize::from(n)];
        if balance {
            o.extra = "balance on\n".to_string()
                + &names
                    .iter()
                    .map(|g| format!("group {g}\n"))
                    .collect::<String>();
        }
        let mut c = Cluster::build(&o);
        let (groups, want): (Vec<Option<&str>>, Vec<u16>) = if balance {
            (names.iter().map(|g| Some(*g)).collect(), (1..=n).collect())
        } else {
            // Priorities 10, 10, 30, 20, 10: server 3 is preferred.
            let text = std::fs::read_to_string(&c.conf).unwrap();
            let mut text = text;
            for (id, p) in [(1, 10), (2, 10), (3, 30), (4, 20), (5, 10)] {
                text = text.replace(
                    &format!("name s{id}\n"),
                    &format!("name s{id} priority {p}\n"),
                );
            }
            std::fs::write(&c.conf, text).unwrap();
            (vec![None], vec![3])
        };
        for (what, spread) in [("all at once", false), ("within K*HBT", true)] {
            let what = format!(
                "N={n}, heartbeat {hbt_ms} ms, {mode:?}, {}, {what}",
                if balance { "balance" } else { "priority" }
            );
            let got = cold_starts(&mut c, &groups, runs, spread, seed, hbt_ms);
            failed.extend(report(&what, &got, &want, seed));
        }
    }
    assert!(
        failed.is_empty(),
        "cold starts that ignored the preference: {failed:?}; replay: ELECTD_COLD_SEED={seed} \
         cargo test --release --test cold_start -- --nocapture"
    );
}

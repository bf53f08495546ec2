//! Issue 25, sparse acknowledgements, attacked (an independent review): N bare cores on
//! an in-memory network with a one-millisecond delay, every output honoured, with
//! ACKs dropped on demand and timers reloaded mid-run. Each test states a property the
//! sparse rule claims and would fail if it broke.

mod corenet;

use corenet::{Lead, Net, ids};
use electd::node::Sabotage;
use std::time::Duration;

/// N = 3..=7: once settled, every LEAD asks exactly Q-1 followers (never itself),
/// any two LEADs in a row ask every follower between them, only asked followers ACK,
/// and the leader keeps its lease throughout on a lossless network.
#[test]
fn every_sparse_lead_asks_q_minus_1_and_two_in_a_row_ask_everyone() {
    for n in 3u16..=7 {
        let mut net = Net::new(n, 3);
        net.run(4_000);
        let leader = net.leader();
        let lid = leader as u16 + 1;
        let t0 = net.now;
        let lapses_before = net.lapses.len();
        net.run(t0 + 4_000);
        assert_eq!(net.lapses.len(), lapses_before, "N={n}: {:?}", net.lapses);
        let q = usize::from(n) / 2 + 1;
        let leads: Vec<&Lead> = net
            .leads
            .iter()
            .filter(|l| l.at > t0 && l.from == lid)
            .collect();
        assert!(leads.len() >= 38, "N={n}: {} LEADs", leads.len());
        for l in &leads {
            assert_eq!(ids(&l.asked).len(), q - 1, "N={n}: {l:?}");
            assert!(!l.asked.contains(lid), "N={n}: asks itself: {l:?}");
        }
        for w in leads.windows(2) {
            for f in (1..=n).filter(|&f| f != lid) {
                assert!(
                    w[0].asked.contains(f) || w[1].asked.contains(f),
                    "N={n}: follower {f} not asked by two LEADs in a row: {w:?}"
                );
            }
        }
        for &(at, from, seq) in net.acks.iter().filter(|a| a.0 > t0 + 1) {
            let lead = leads.iter().find(|l| l.seq == seq).unwrap();
            assert!(
                lead.asked.contains(from),
                "N={n}: {from} acked LEAD {seq} at {at} unasked"
            );
        }
    }
}

/// A timer reload to a longer heartbeat while sparse: the LEAD after the reload is
/// decided with the new (longer) lease and heartbeat, but if its one asked ACK is lost
/// the lease rests on the LEAD before, sent with the old, shorter lease, which must
/// last until the ACK of the LEAD after, one new heartbeat later. Dense, a second
/// follower's ACK covered it.
#[test]
fn a_reload_to_a_longer_heartbeat_while_sparse_survives_one_lost_ack() {
    let mut net = Net::new(3, 3);
    net.run(4_000);
    let leader = net.leader();
    let last = net.leads.last().unwrap().clone();
    assert_eq!(ids(&last.asked).len(), 1, "sparse by now: {last:?}");
    // Just after a LEAD (and its ACK) every server reloads to HBT 300 ms, K 3.
    net.run_to_next_lead(leader, net.now + 200);
    net.run(net.now + 5);
    for node in &mut net.nodes {
        node.set_timers(
            Duration::from_millis(300),
            Duration::from_millis(20),
            3,
            10_000,
            Duration::from_secs(60),
        )
        .unwrap();
    }
    // The next LEAD (at the old deadline, new timers): one ACK of it is lost, the
    // one it asked for (or, dense, one of the two).
    net.run_to_next_lead(leader, net.now + 200);
    let l = net.leads.last().unwrap().clone();
    assert_eq!(l.from, leader as u16 + 1);
    let next = l.seq;
    let lost = l
        .asked
        .iter()
        .next()
        .unwrap_or(if leader == 0 { 2 } else { 1 });
    net.drop_acks.push((lost, next));
    let lapses_before = net.lapses.len();
    net.run(net.now + 2_000);
    let l_asked = ids(&l.asked);
    assert!(
        net.lapses.len() == lapses_before,
        "lease lost after a reload to a longer heartbeat and one lost ACK of LEAD {next} \
         (asked {l_asked:?}): {:?}",
        &net.lapses[lapses_before..]
    );
}

#[derive(Clone, Copy, Debug)]
enum Trigger {
    Yield,
    Unhealthy,
    Drain,
}

/// Runs one handover from a leader at rest and returns (was it sparse when the
/// handover began, ms from the trigger to another server leading, successor named).
fn handover(
    n: u16,
    witnesses: &[u16],
    trigger: Trigger,
    offset: u64,
    sabotage: Sabotage,
) -> (bool, u64, u16) {
    let mut net = Net::with(n, 3, witnesses, sabotage);
    net.run(4_000);
    let leader = net.leader();
    net.run_to_next_lead(leader, net.now + 200);
    net.run(net.now + offset);
    let sparse = !net.leads.last().unwrap().asked.is_empty();
    let t0 = net.now;
    let now = net.t();
    match trigger {
        Trigger::Yield => assert!(net.nodes[leader].handle_yield(now)),
        Trigger::Unhealthy => net.nodes[leader].set_health(now, false),
        Trigger::Drain => net.nodes[leader].set_drained(now, true),
    }
    net.flush(leader);
    let mut took = None;
    while net.now < t0 + 3_000 {
        net.step();
        let now = net.t();
        if took.is_none() && (0..net.n).any(|i| i != leader && net.nodes[i].is_leader(now)) {
            took = Some(net.now - t0);
        }
    }
    assert_eq!(net.overlaps, 0, "two leaders at once");
    let took = took.unwrap_or_else(|| panic!("no new leader after {trigger:?}"));
    let successor = net.resigns.iter().find(|r| r.0 >= t0).map_or(0, |r| r.2);
    (sparse, took, successor)
}

/// Yield, ill health and drain of a leader whose followers acknowledge in turn: the
/// RESIGN of an unfit leader names a successor (never a witness), the same as dense, and the seat moves no later than with
/// every follower acknowledging (Sabotage::dense_acks), for N = 3 (with and without a
/// witness), 4 and 5, the trigger early and late in a heartbeat.
#[test]
fn handovers_while_sparse_behave_as_dense() {
    let dense = Sabotage {
        dense_acks: true,
        ..Sabotage::default()
    };
    for (n, witnesses) in [
        (3u16, &[][..]),
        (3, &[3u16][..]),
        (4, &[][..]),
        (5, &[][..]),
    ] {
        for trigger in [Trigger::Yield, Trigger::Unhealthy, Trigger::Drain] {
            for offset in [0u64, 2, 50, 97] {
                let case = format!("N={n} witnesses={witnesses:?} {trigger:?} +{offset} ms");
                let (sparse, took, succ) =
                    handover(n, witnesses, trigger, offset, Sabotage::default());
                let (was_sparse, took_dense, succ_dense) =
                    handover(n, witnesses, trigger, offset, dense.clone());
                assert!(sparse, "{case}: sparse at the trigger");
                assert!(!was_sparse, "{case}: the control is dense");
                if !matches!(trigger, Trigger::Yield) {
                    assert_ne!(succ, 0, "{case}: the RESIGN names a successor");
                }
                assert!(!witnesses.contains(&succ), "{case}: successor {succ}");
                assert_eq!(succ, succ_dense, "{case}: the same successor as dense");
                assert!(
                    took <= took_dense,
                    "{case}: {took} ms to a new leader, dense {took_dense} ms"
                );
            }
        }
    }
}

/// A leader that is unfit (unhealthy or drained) asks every follower until it hands
/// over: it needs every follower's fitness at once to choose its successor.
#[test]
fn an_unfit_leader_asks_everyone() {
    for drain in [false, true] {
        let mut net = Net::new(3, 3);
        net.run(4_000);
        let leader = net.leader();
        let lid = leader as u16 + 1;
        assert!(!net.leads.last().unwrap().asked.is_empty(), "sparse first");
        let t0 = net.now;
        let now = net.t();
        if drain {
            net.nodes[leader].set_drained(now, true);
        } else {
            net.nodes[leader].set_health(now, false);
        }
        net.run(t0 + 2_000);
        let sparse: Vec<&Lead> = net
            .leads
            .iter()
            .filter(|l| l.at >= t0 && l.from == lid && !l.asked.is_empty())
            .collect();
        assert!(
            sparse.is_empty(),
            "drain={drain}: unfit yet sparse: {sparse:?}"
        );
        assert!(
            net.resigns.iter().any(|r| r.0 >= t0 && r.1 == lid),
            "drain={drain}: handed over"
        );
    }
}

/// With preempt-delay set, a leader with a more preferred server configured may be
/// preempted at any heartbeat and asks every follower (the handover's choice rests on
/// whose fit ACKs came); the most preferred, once it leads, goes sparse.
#[test]
fn a_leader_that_may_be_preempted_asks_everyone() {
    // Server 3 (preferred) is away while another is elected, then comes back: the
    // other leads, settled but for preemption, through the delay (40 heartbeats).
    let mut net = Net::with_cfg(3, 3, |c| {
        c.preempt_delay = Some(Duration::from_secs(4));
        for s in &mut c.servers {
            s.priority = if s.id == 3 { 10 } else { 0 };
        }
    });
    net.down[2] = true;
    net.run(2_000);
    assert_ne!(net.leader(), 2);
    net.down[2] = false;
    net.run(4_500);
    assert_ne!(net.leader(), 2, "not preempted yet");
    net.run(14_000);
    let by_low: Vec<&Lead> = net
        .leads
        .iter()
        .filter(|l| l.from != 3 && !l.asked.is_empty())
        .collect();
    assert!(
        by_low.is_empty(),
        "sparse below a preferred server: {by_low:?}"
    );
    assert_eq!(net.leader(), 2, "server 3 leads at the end");
    assert!(
        net.leads
            .iter()
            .rfind(|l| l.from == 3)
            .is_some_and(|l| !l.asked.is_empty()),
        "server 3, the most preferred, goes sparse"
    );
}

/// Every LEAD duplicated and delivered again 150 ms or 250 ms late, behind one or two
/// newer LEADs: a follower acknowledges an old LEAD only if that LEAD asked it, an old
/// ACK never moves the leader's record of a follower back (so no false miss), and the
/// leader stays sparse with its lease throughout.
#[test]
fn duplicated_and_reordered_leads_change_nothing_at_rest() {
    for delay in [150u64, 250] {
        let mut net = Net::new(3, 3);
        net.dup_leads = Some(delay);
        net.run(4_000);
        let leader = net.leader();
        let lid = leader as u16 + 1;
        let t0 = net.now;
        let lapses = net.lapses.len();
        net.run(t0 + 5_000);
        assert_eq!(net.lapses.len(), lapses, "delay {delay}: {:?}", net.lapses);
        let leads: Vec<&Lead> = net
            .leads
            .iter()
            .filter(|l| l.at > t0 && l.from == lid)
            .collect();
        assert!(leads.len() >= 48);
        let dense: Vec<_> = leads.iter().filter(|l| l.asked.is_empty()).collect();
        assert!(dense.is_empty(), "delay {delay}: dense again: {dense:?}");
        for &(at, from, seq) in net.acks.iter().filter(|a| a.0 > t0 + 1) {
            let lead = net
                .leads
                .iter()
                .find(|l| l.seq == seq && l.from == lid)
                .unwrap();
            assert!(
                lead.asked.contains(from),
                "delay {delay}: {from} acked LEAD {seq} at {at} unasked"
            );
        }
    }
}

/// N = 5 (sets alternate between two pairs): a follower that turns unhealthy while
/// the next LEAD does not ask it acknowledges that LEAD anyway, once, with UNFIT, and
/// the leader knows at once; a follower that recovers likewise. On a multicast network:
/// with unicast the LEAD that does not ask it does not reach it (targeted heartbeats),
/// and it reports at its turn (tests/sparse_acks.rs).
#[test]
fn an_unasked_follower_reports_a_change_of_fitness_with_five_servers() {
    let mut net = Net::new(5, 3);
    net.multicast = true;
    net.run(4_000);
    let leader = net.leader();
    for healthy in [false, true] {
        net.run_to_next_lead(leader, net.now + 200);
        net.run(net.now + 5);
        let last = net.leads.last().unwrap().clone();
        assert_eq!(ids(&last.asked).len(), 2, "sparse: {last:?}");
        let quiet = last.asked.iter().next().unwrap();
        let t = net.t();
        net.nodes[usize::from(quiet) - 1].set_health(t, healthy);
        let before = net.acks.len();
        net.run_to_next_lead(leader, net.now + 200);
        let next = net.leads.last().unwrap().clone();
        assert!(!next.asked.contains(quiet), "not asked: {next:?}");
        net.run(net.now + 3);
        let from_quiet = net.acks[before..].iter().filter(|a| a.1 == quiet).count();
        assert_eq!(from_quiet, 1, "healthy={healthy}: server {quiet} reported");
        let now = net.t();
        assert_eq!(net.nodes[leader].peer_fit(now, quiet), Some(healthy));
    }
}

//! Issue 25, sparse acknowledgements, in the bare core: three nodes on an in-memory
//! network with a one-millisecond delay (no wire: the core's own rules, every output
//! honoured). A leader at rest asks Q-1 followers per LEAD, a window that moves each
//! LEAD; after any ACK it asked for fails to come, the next LEAD asks everyone and the
//! streak of clean heartbeats starts again; one server down, or a lease that could not
//! survive one lost ACK, keeps every follower acknowledging.

mod corenet;

use corenet::{Lead, Net, ids};
use electd::node::Sabotage;

/// The streak the core waits for (`core::leadership::SPARSE_AFTER`).
const SPARSE_AFTER: usize = 16;

/// Each LEAD asks one follower, never the same one twice in a row.
fn assert_alternating(leads: &[&Lead], leader: u16) {
    let followers: Vec<u16> = (1..=3).filter(|&i| i != leader).collect();
    for w in leads.windows(2) {
        assert_eq!(ids(&w[0].asked).len(), 1, "one follower asked: {w:?}");
        assert_ne!(
            ids(&w[0].asked),
            ids(&w[1].asked),
            "the window moves: {w:?}"
        );
        assert!(followers.contains(&ids(&w[0].asked)[0]));
    }
}

#[test]
fn a_leader_at_rest_asks_one_follower_in_turn_and_keeps_its_lease() {
    let mut net = Net::new(3, 3);
    let leader = net.settle();
    let lid = leader as u16 + 1;
    let t0 = net.now;
    net.run(t0 + 5_000);
    assert!(net.lapses.is_empty() || net.lapses.iter().all(|&(t, _)| t < t0));
    let leads = net.leads_since(t0);
    assert!(leads.len() >= 48, "{} LEADs in 5 s", leads.len());
    assert_alternating(&leads, lid);
    // Every ACK after t0 answers a LEAD that asked its sender.
    for &(at, from, seq) in net.acks.iter().filter(|a| a.0 > t0 + 1) {
        let lead = leads
            .iter()
            .find(|l| l.seq == seq)
            .unwrap_or_else(|| panic!("ACK of unknown LEAD {seq} at {at}"));
        assert!(
            lead.asked.contains(from),
            "server {from} acked LEAD {seq}, which asked {:?}",
            ids(&lead.asked)
        );
    }
    let acks = net.acks.iter().filter(|a| a.0 > t0 + 1).count();
    assert!(
        acks <= leads.len() + 1,
        "{acks} ACKs for {} LEADs: one a heartbeat, not two",
        leads.len()
    );
    // The lease is renewed at every heartbeat: it never has less than lease - HBT
    // - RTT left just before the next LEAD.
    let n = &net.nodes[leader];
    assert!(n.is_leader(net.t()));
    // Targeted heartbeats: a LEAD reaches only the follower it asks, which ACKs it;
    // all but the first sparse one, which follows a dense LEAD and goes to everyone.
    let not_asked: u64 = net.nodes.iter().map(|n| n.counters().acks_not_asked).sum();
    assert_eq!(
        not_asked, 1,
        "a follower received a LEAD that did not ask it, other than the first sparse one"
    );
}

/// As above on a multicast network: every LEAD reaches every follower, and the one
/// it does not ask sends nothing.
#[test]
fn on_multicast_a_follower_not_asked_reads_the_lead_and_sends_nothing() {
    let mut net = Net::new(3, 3);
    net.multicast = true;
    let leader = net.settle();
    let t0 = net.now;
    net.run(t0 + 5_000);
    let leads = net.leads_since(t0);
    assert_alternating(&leads, leader as u16 + 1);
    let acks = net.acks.iter().filter(|a| a.0 > t0 + 1).count();
    assert!(
        acks <= leads.len() + 1,
        "{acks} ACKs for {} LEADs",
        leads.len()
    );
    let not_asked: u64 = net.nodes.iter().map(|n| n.counters().acks_not_asked).sum();
    assert!(not_asked >= 45, "{not_asked} ACKs not sent");
}

#[test]
fn a_missing_ack_makes_the_next_lead_ask_everyone() {
    for sabotage in [false, true] {
        let mut net = Net::with(
            3,
            3,
            &[],
            Sabotage {
                sparse_ignores_misses: sabotage,
                ..Sabotage::default()
            },
        );
        let leader = net.settle();
        let last = net.leads.last().unwrap().clone();
        assert_eq!(ids(&last.asked).len(), 1, "sparse by now: {last:?}");
        // The ACK of the next LEAD is lost.
        let next = last.seq + 1;
        let asked = (1..=3u16)
            .find(|&i| i != leader as u16 + 1 && !last.asked.contains(i))
            .unwrap();
        net.drop_acks.push((asked, next));
        net.run(net.now + 250);
        let after: Vec<Lead> = net.leads.iter().filter(|l| l.seq > next).cloned().collect();
        assert!(!after.is_empty());
        if sabotage {
            assert_eq!(
                ids(&after[0].asked).len(),
                1,
                "the sabotaged leader keeps asking one follower"
            );
            continue;
        }
        assert!(
            after[0].asked.is_empty(),
            "the LEAD after a miss asks everyone: {after:?}"
        );
        net.run(net.now + 100 * (2 * SPARSE_AFTER as u64 + 3));
        let after: Vec<Lead> = net.leads.iter().filter(|l| l.seq > next).cloned().collect();
        let dense = after.iter().take_while(|l| l.asked.is_empty()).count();
        assert_eq!(
            dense,
            2 * SPARSE_AFTER,
            "the streak starts again, and a miss while sparse doubles it: {} LEADs ask \
             everyone",
            2 * SPARSE_AFTER
        );
        assert!(
            net.lapses.is_empty(),
            "one lost ACK never costs the lease: {:?}",
            net.lapses
        );
    }
}

#[test]
fn a_server_down_keeps_every_follower_acknowledging() {
    let mut net = Net::new(3, 3);
    let leader = net.settle();
    let gone = (0..3).find(|&i| i != leader).unwrap();
    net.down[gone] = true;
    let t0 = net.now;
    net.run(t0 + 2_000);
    let leads = net.leads_since(t0 + 300);
    assert!(leads.len() >= 15);
    assert!(
        leads.iter().all(|l| l.asked.is_empty()),
        "with server {} down every LEAD asks everyone: {leads:?}",
        gone + 1
    );
    assert!(
        net.nodes[leader].is_leader(net.t()),
        "the majority keeps it"
    );
}

#[test]
fn a_lease_that_cannot_survive_one_lost_ack_stays_dense() {
    // K = 2: lease = 2 x 100 ms x 0.98 = 196 ms < 2 x HBT + RTT = 220 ms.
    let mut net = Net::new(3, 2);
    net.settle();
    net.run(net.now + 3_000);
    assert!(net.leads.len() > 2 * SPARSE_AFTER);
    assert!(net.leads.iter().all(|l| l.asked.is_empty()));
}

/// A settled cluster of three (`multicast` or unicast) whose follower that the next
/// LEAD will not ask (the window moves) turns unhealthy now: the net, the leader, that
/// follower's id and how many ACKs had been sent.
fn quiet_follower_turns_unhealthy(multicast: bool) -> (Net, usize, u16, usize) {
    let mut net = Net::new(3, 3);
    net.multicast = multicast;
    let leader = net.settle();
    let last = net.leads.last().unwrap().clone();
    let quiet = last.asked.iter().next().unwrap();
    let t = net.t();
    net.nodes[usize::from(quiet) - 1].set_health(t, false);
    let before = net.acks.len();
    (net, leader, quiet, before)
}

/// Multicast: a follower that the next LEAD does not ask reports a change of fitness
/// with it, at once. (Unicast: at its next turn, below.)
#[test]
fn a_follower_not_asked_still_reports_a_change_of_fitness() {
    let (mut net, leader, quiet, before) = quiet_follower_turns_unhealthy(true);
    net.run(net.now + 100);
    let from_quiet: Vec<_> = net.acks[before..].iter().filter(|a| a.1 == quiet).collect();
    assert_eq!(
        from_quiet.len(),
        1,
        "server {quiet} acked the LEAD that did not ask it, to report UNFIT"
    );
    let lid = leader as u16 + 1;
    let now = net.t();
    assert_eq!(
        net.nodes[leader].peer_fit(now, quiet),
        Some(false),
        "leader {lid} knows"
    );
}

/// Unicast (targeted heartbeats): the follower that the next LEAD does not ask does
/// not receive it; it reports a change of fitness with the LEAD after, its turn, two
/// heartbeats at most after the change.
#[test]
fn unicast_a_follower_reports_a_change_of_fitness_at_its_turn() {
    let (mut net, leader, quiet, before) = quiet_follower_turns_unhealthy(false);
    net.run(net.now + 100);
    assert!(
        net.acks[before..].iter().all(|a| a.1 != quiet),
        "server {quiet} acked a LEAD it should not have received"
    );
    net.run(net.now + 110);
    let from_quiet = net.acks[before..].iter().filter(|a| a.1 == quiet).count();
    assert_eq!(from_quiet, 1, "server {quiet} did not report at its turn");
    let now = net.t();
    assert_eq!(net.nodes[leader].peer_fit(now, quiet), Some(false));
}

/// Steady loss of the ACKs sparse LEADs ask for keeps a leader dense: each miss while
/// sparse doubles the clean streak needed before it goes sparse again.
#[test]
fn misses_while_sparse_double_the_streak_needed() {
    let mut net = Net::new(3, 3);
    let leader = net.settle();
    let mut runs = Vec::new();
    for _ in 0..4 {
        let last = net.leads.last().unwrap().clone();
        assert_eq!(ids(&last.asked).len(), 1, "sparse again: {last:?}");
        let next = last.seq + 1;
        let asked = (1..=3u16)
            .find(|&i| i != leader as u16 + 1 && !last.asked.contains(i))
            .unwrap();
        net.drop_acks.push((asked, next));
        // Long enough for the longest dense run expected (256) and a few sparse.
        let until = net.now + 100 * 270;
        net.run(until);
        let dense = net
            .leads
            .iter()
            .filter(|l| l.seq > next)
            .take_while(|l| l.asked.is_empty())
            .count();
        runs.push(dense);
    }
    let want: Vec<usize> = (1..=4).map(|k| SPARSE_AFTER << k).collect();
    assert_eq!(runs, want, "dense runs after each miss");
    assert!(net.lapses.is_empty(), "{:?}", net.lapses);
}

/// A leader that reads at the heartbeat takes the ACKs of its last LEAD at the tick
/// where the next LEAD is due. The core handles an ACK before the timers due at the
/// same instant, so those ACKs count for the LEAD they acknowledge: before, the LEAD
/// timer fired first, every ACK looked a LEAD late, and in the daemon the leader never
/// asked only some followers. Here every ACK arrives exactly at the next tick.
#[test]
fn acks_read_at_the_tick_count_before_the_next_lead() {
    let mut net = Net::new(3, 3);
    net.ack_delay = 98; // LEAD at t, at the follower t+1, ACK back at t+100: the tick.
    let leader = net.settle();
    let t0 = net.now;
    net.run(t0 + 3_000);
    let leads = net.leads_since(t0);
    assert!(
        leads.iter().all(|l| ids(&l.asked).len() == 1),
        "ACKs read at the tick keep the streak: {:?}",
        leads.iter().map(|l| ids(&l.asked)).collect::<Vec<_>>()
    );
    assert!(net.nodes[leader].is_leader(net.t()));
}

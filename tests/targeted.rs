//! Issue 25, targeted heartbeats: a steady unicast leader sends each LEAD only to the
//! followers it asks to acknowledge it (docs/PROTOCOL.md, "Targeted heartbeats"),
//! driven through the hosts' own inputs on three hosts joined by a network with a
//! delay per datagram that a test may lose or lengthen, and instant disks.
//!
//! What must hold, beside the lease (the swarm's checks):
//! - at rest, each follower gets a LEAD every second heartbeat, and the leader sends
//!   one LEAD a heartbeat;
//! - one lost LEAD opens no round: the follower it was for waits a heartbeat past its
//!   faith for its next turn (`Sabotage::no_turn_wait` is the control);
//! - a crash of the leader is found as soon as without targeting: the follower the
//!   newest LEAD did not ask starts the round at the faith of the asked one.

mod delaynet;
mod hostnet;

use delaynet::Net;
use electd::node::Sabotage;
use hostnet::HBT;
use std::time::Duration;

/// Three servers, unicast or multicast.
fn net(unicast: bool, sabotage: Sabotage) -> Net {
    Net::new(3, unicast, sabotage, |_, c| c, &[])
}

/// At rest the leader sends one LEAD a heartbeat, and each follower gets every second
/// one; in multicast mode (`unicast` off) every LEAD still reaches every follower.
#[test]
fn at_rest_each_follower_gets_every_second_lead() {
    for unicast in [true, false] {
        let mut net = net(unicast, Sabotage::default());
        let l = net.leader(HBT * 20);
        let (ins, outs) = (net.leads_in.clone(), net.leads_sent[l]);
        net.run(HBT * 40);
        let outs = net.leads_sent[l] - outs;
        for f in (0..3).filter(|&f| f != l) {
            let got = net.leads_in[f] - ins[f];
            if unicast {
                assert!(
                    (19..=21).contains(&got),
                    "follower {}: {got} LEADs in 40 heartbeats",
                    f + 1
                );
            } else {
                assert!(
                    (39..=41).contains(&got),
                    "multicast, follower {}: {got}",
                    f + 1
                );
            }
        }
        if unicast {
            assert!(
                (39..=41).contains(&outs),
                "the leader sent {outs} LEAD datagrams in 40 heartbeats"
            );
        }
        assert!(net.hosts[l].group(0).node.is_leader(net.now));
    }
}

/// Runs a settled cluster and loses the next LEAD to each follower in turn, six
/// times, with the LEADs after it 4 ms late (so a follower's faith of its LEAD before
/// ends before the next one arrives: `delaynet::Net::lose_next_lead_to`); returns the
/// ELECTs sent and whether every term stayed.
fn lose_one_lead(sabotage: Sabotage) -> (u64, bool) {
    let mut net = net(true, sabotage);
    let l = net.leader(HBT * 20);
    let term = net.term(l);
    let elects = net.elects();
    for round in 0..6 {
        let f = (0..3).filter(|&f| f != l).nth(round % 2).unwrap();
        net.lose_next_lead_to(l, f as u16 + 1);
        assert_eq!(
            net.leader_now(),
            Some(l),
            "the leader lost its seat (round {round})"
        );
    }
    let same = (0..3).all(|i| net.term(i) == term);
    (net.elects() - elects, same)
}

/// One lost LEAD opens no round: the follower it was for waits for its next turn.
#[test]
fn one_lost_lead_opens_no_round() {
    let (elects, same) = lose_one_lead(Sabotage::default());
    assert_eq!(elects, 0, "a lost LEAD made a follower start a round");
    assert!(same, "a term changed");
}

/// The control: a follower that starts its round at its faith's end does.
#[test]
fn negative_control_no_turn_wait_opens_rounds() {
    let (elects, _) = lose_one_lead(Sabotage {
        no_turn_wait: true,
        ..Sabotage::default()
    });
    assert!(
        elects > 0,
        "the control caught nothing: the test cannot fail"
    );
}

/// Crashes the leader `phase` into a heartbeat, `n` times in a row on fresh clusters;
/// returns each time from the crash until a new leader holds a lease.
fn failovers(unicast: bool, sabotage: &Sabotage) -> Vec<Duration> {
    let mut out = Vec::new();
    for k in 0..10u64 {
        let mut net = net(unicast, sabotage.clone());
        let l = net.leader(HBT * 20);
        // At rest; crash it k tenths into a heartbeat after 10 more.
        net.run(HBT * 10 + HBT * k as u32 / 10);
        let crash = net.now;
        net.down.push(l as u16 + 1);
        let end = crash + Duration::from_secs(3);
        while net.leader_now().is_none() && net.now < end {
            net.step(end);
        }
        assert!(
            net.leader_now().is_some(),
            "no new leader within 3 s of the crash"
        );
        out.push(net.now.saturating_since(crash));
    }
    out
}

/// A crash is found as soon as without targeting: each failover of a targeted cluster
/// within 2 ms of the same crash in multicast mode (every LEAD to every follower), and
/// never more than the hold plus 3 RTT after the crash.
#[test]
fn a_crash_is_found_as_soon_as_without_targeting() {
    let targeted = failovers(true, &Sabotage::default());
    let multicast = failovers(false, &Sabotage::default());
    println!(
        "failover ms, targeted: {:?}",
        targeted.iter().map(|d| d.as_millis()).collect::<Vec<_>>()
    );
    println!(
        "failover ms, multicast: {:?}",
        multicast.iter().map(|d| d.as_millis()).collect::<Vec<_>>()
    );
    for (k, (t, m)) in targeted.iter().zip(&multicast).enumerate() {
        assert!(
            *t <= *m + Duration::from_millis(2),
            "crash {k}/10 into a heartbeat: targeted {t:?}, multicast {m:?}"
        );
        assert!(
            *t <= HBT * 3 + Duration::from_millis(60),
            "crash {k}: {t:?}"
        );
    }
}

//! The bare core, driven by hand: every output checked (STYLE.md, BlazingMQ-style).

use electd::node::{Dest, Durable, Event, Node, NodeConfig, Output, Sabotage, ServerInfo};
use electd::time::Time;
use electd::wire::{Body, Message};
use std::time::Duration;

const FP: u32 = 0xF1F1;

fn cfg(id: u16, n: u16) -> NodeConfig {
    NodeConfig {
        id,
        servers: (1..=n)
            .map(|id| ServerInfo {
                id,
                priority: 0,
                witness: false,
            })
            .collect(),
        fingerprint: FP,
        heartbeat: Duration::from_millis(100),
        rtt: Duration::from_millis(20),
        missed_heartbeats: 3,
        drift_ppm: 10_000,
        max_hold: Duration::from_secs(60),
        preempt_delay: None,
        seed: 1,
        strict: true,
        sabotage: Sabotage::default(),
    }
}

fn ms(v: u64) -> Time {
    Time(v * 1_000_000)
}

fn drain(n: &mut Node) -> Vec<Output> {
    std::iter::from_fn(|| n.poll_output()).collect()
}

fn msg(sender: u16, term: u64, body: Body) -> Message {
    Message {
        sender,
        fingerprint: FP,
        term,
        body,
    }
}

fn elect(sender: u16, term: u64, heard: u8) -> Message {
    msg(
        sender,
        term,
        Body::Elect {
            last_term: 0,
            last_seq: 0,
            priority: 0,
            heard,
            ineligible: false,
            last_resort: false,
        },
    )
}

/// The writes the node asks for, from its pending outputs.
fn persists(n: &mut Node) -> Vec<Durable> {
    drain(n)
        .into_iter()
        .filter_map(|o| match o {
            Output::Persist(d) => Some(d),
            _ => None,
        })
        .collect()
}

fn sends(out: &[Output]) -> Vec<(Dest, Body)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send { dest, msg } => Some((*dest, msg.body)),
            _ => None,
        })
        .collect()
}

#[test]
fn vote_leaves_only_after_its_state_is_durable() {
    // The whole VOTING window, so the round ends on the timer below.
    let mut c = cfg(3, 3);
    c.sabotage.full_window = true;
    let mut n = Node::new(c, Durable::default(), ms(0)).unwrap();
    let t = ms(1000); // past the quiet period (K*HBT = 300 ms)
    n.handle_datagram(t, &elect(1, 1, 3)).unwrap();
    let out = drain(&mut n);
    assert!(
        matches!(sends(&out)[..], [(Dest::All, Body::Elect { heard: 2, .. })]),
        "{out:?}"
    );
    n.handle_datagram(t, &elect(2, 1, 3)).unwrap();
    assert!(drain(&mut n).is_empty());
    n.handle_timeout(t + Duration::from_millis(20));
    let out = drain(&mut n);
    let want = Durable {
        term: 1,
        voted_term: 1,
        voted_for: 1,
        led_term: 0,
        hold_ms: 0,
        drained: false,
    };
    assert_eq!(
        out,
        vec![Output::Persist(want)],
        "nothing may leave before the write"
    );
    n.handle_persisted(t, want);
    let out = drain(&mut n);
    assert_eq!(
        out,
        vec![
            Output::Event(Event::Voted {
                term: 1,
                candidate: 1
            }),
            Output::Send {
                dest: Dest::One(1),
                msg: msg(3, 1, Body::Vote { candidate: 1 })
            },
        ]
    );
}

#[test]
fn ack_of_a_higher_term_waits_for_the_term_to_be_durable() {
    let mut n = Node::new(
        cfg(2, 3),
        Durable {
            term: 4,
            ..Durable::default()
        },
        ms(0),
    )
    .unwrap();
    n.handle_datagram(
        ms(10),
        &msg(
            1,
            3,
            Body::Lead {
                seq: 1,
                hold_ms: 300,
                resign: false,
                successor: 0,
                unfit: false,
                alive: electd::wire::PeerSet::EMPTY,
                acks: electd::wire::PeerSet::EMPTY,
            },
        ),
    )
    .unwrap();
    assert!(
        drain(&mut n).is_empty(),
        "a LEAD of a lower term is refused and not acknowledged"
    );
    n.handle_datagram(
        ms(20),
        &msg(
            1,
            9,
            Body::Lead {
                seq: 5,
                hold_ms: 500,
                resign: false,
                successor: 0,
                unfit: false,
                alive: electd::wire::PeerSet::EMPTY,
                acks: electd::wire::PeerSet::EMPTY,
            },
        ),
    )
    .unwrap();
    let want = Durable {
        term: 9,
        voted_term: 0,
        voted_for: 0,
        led_term: 0,
        hold_ms: 500,
        drained: false,
    };
    assert_eq!(drain(&mut n), vec![Output::Persist(want)]);
    n.handle_persisted(ms(21), want);
    assert_eq!(
        sends(&drain(&mut n)),
        vec![(
            // To the leader only (issue 12): nobody else uses an ACK.
            Dest::One(1),
            // UNFIT: just started, in its quiet period, it could not take over.
            Body::Ack {
                seq: 5,
                unfit: true
            }
        )]
    );
    let st = n.status(ms(22));
    assert_eq!((st.leader, st.term), (Some(1), 9));
    // The leader's longer hold (500 ms > K*HBT) is kept: still followed at 519 ms.
    assert_eq!(n.status(ms(519)).leader, Some(1));
    assert_eq!(n.status(ms(520)).leader, None);
}

#[test]
fn restarted_server_is_quiet_for_the_largest_hold_it_accepted() {
    let disk = Durable {
        term: 5,
        voted_term: 5,
        voted_for: 1,
        led_term: 0,
        hold_ms: 2000,
        drained: false,
    };
    let mut n = Node::new(cfg(3, 3), disk, ms(0)).unwrap();
    for (at, votes) in [(ms(1500), false), (ms(2500), true)] {
        n.handle_datagram(at, &elect(1, 6, 3)).unwrap();
        n.handle_datagram(at, &elect(2, 6, 3)).unwrap();
        n.handle_timeout(at + Duration::from_millis(20));
        let out = drain(&mut n);
        let persisted = out.iter().any(|o| matches!(o, Output::Persist(_)));
        assert_eq!(persisted, votes, "at {at:?}: {out:?}");
        // While quiet it does not even claim: its claim would only make futile rounds.
        let claimed = sends(&out)
            .iter()
            .any(|(_, b)| matches!(b, Body::Elect { .. }));
        assert_eq!(claimed, votes, "at {at:?}: {out:?}");
        n.handle_timeout(at + Duration::from_millis(900)); // let the retry round pass
        drain(&mut n);
    }
}

#[test]
fn single_server_leads_itself_and_renews_its_lease() {
    let mut n = Node::new(cfg(1, 1), Durable::default(), ms(0)).unwrap();
    let mut now = ms(0);
    for _ in 0..100 {
        now = n.next_deadline().max(now);
        n.handle_timeout(now);
        while let Some(o) = n.poll_output() {
            if let Output::Persist(d) = o {
                n.handle_persisted(now, d);
            }
        }
    }
    assert!(n.is_leader(now));
    assert_eq!(n.status(now).term, 1);
    assert!(n.handle_yield(now));
    assert!(!n.is_leader(now));
}

/// Issue 23 item 9: a claim that cannot win a round (at a cold start a claimant has
/// heard too few servers yet) is no report of a peer's health: `status` showed a
/// healthy peer as unfit for K*HBT + HBT after every round.
#[test]
fn an_election_claim_is_no_health_report_in_status() {
    let mut n = Node::new(cfg(1, 3), Durable::default(), ms(0)).unwrap();
    n.handle_datagram(ms(10), &elect(2, 1, 1)).unwrap();
    assert_eq!(
        n.peer_fit(ms(20), 2),
        None,
        "a claim says nothing of health"
    );
    n.handle_datagram(ms(30), &elect(3, 1, 3)).unwrap();
    assert_eq!(n.peer_fit(ms(40), 3), None);
}

#[test]
fn foreign_and_own_datagrams_are_rejected() {
    let mut n = Node::new(cfg(2, 3), Durable::default(), ms(0)).unwrap();
    let mut m = elect(1, 1, 3);
    m.fingerprint = 7;
    assert_eq!(
        n.handle_datagram(ms(1), &m),
        Err(electd::node::Reject::Fingerprint)
    );
    assert_eq!(
        n.handle_datagram(ms(1), &elect(9, 1, 3)),
        Err(electd::node::Reject::UnknownSender)
    );
    assert_eq!(
        n.handle_datagram(ms(1), &elect(2, 1, 3)),
        Err(electd::node::Reject::OwnEcho)
    );
    assert!(drain(&mut n).is_empty());
}

#[test]
fn invalid_configurations_are_refused() {
    let bad = [
        NodeConfig {
            rtt: Duration::from_millis(100),
            ..cfg(1, 3)
        },
        NodeConfig {
            heartbeat: Duration::from_millis(5),
            rtt: Duration::from_millis(1),
            ..cfg(1, 3)
        },
        NodeConfig {
            missed_heartbeats: 1,
            ..cfg(1, 3)
        },
        NodeConfig {
            drift_ppm: 100_000,
            ..cfg(1, 3)
        },
        NodeConfig { id: 4, ..cfg(1, 3) },
        NodeConfig {
            servers: vec![],
            ..cfg(1, 3)
        },
    ];
    for c in bad {
        assert!(
            Node::new(c.clone(), Durable::default(), ms(0)).is_err(),
            "{c:?}"
        );
    }
}

/// A round is decided as soon as every server heard recently has claimed the same term,
/// without waiting out the window; one that has not claimed yet keeps it open.
#[test]
fn complete_round_is_decided_early() {
    let mut n = Node::new(cfg(3, 3), Durable::default(), ms(0)).unwrap();
    let t = ms(1000);
    // Server 2 was heard (an ACK), so its claim is awaited.
    n.handle_datagram(
        t,
        &msg(
            2,
            0,
            Body::Ack {
                seq: 1,
                unfit: false,
            },
        ),
    )
    .unwrap();
    n.handle_datagram(t, &elect(1, 1, 3)).unwrap();
    let out = drain(&mut n);
    assert!(
        !out.iter().any(|o| matches!(o, Output::Persist(_))),
        "2 has not claimed: {out:?}"
    );
    n.handle_datagram(t + Duration::from_millis(1), &elect(2, 1, 3))
        .unwrap();
    let out = drain(&mut n);
    assert_eq!(
        out,
        vec![Output::Persist(Durable {
            term: 1,
            voted_term: 1,
            voted_for: 1,
            led_term: 0,
            hold_ms: 0,
            drained: false
        })]
    );
    assert_eq!(
        n.status(t).elector,
        electd::elector::ElectorState::Watching,
        "decided 19 ms early"
    );
}

/// A server that resigned never leads that term again, whatever late VOTEs arrive.
#[test]
fn late_votes_never_undo_a_resignation() {
    let mut n = Node::new(cfg(1, 3), Durable::default(), ms(0)).unwrap();
    let t = ms(1000);
    n.handle_datagram(t, &elect(2, 1, 3)).unwrap();
    n.handle_datagram(t, &elect(3, 1, 3)).unwrap();
    for o in drain(&mut n) {
        if let Output::Persist(d) = o {
            n.handle_persisted(t, d);
        }
    }
    drain(&mut n);
    n.handle_datagram(t, &msg(2, 1, Body::Vote { candidate: 1 }))
        .unwrap();
    assert_eq!(n.leads(), Some(1), "elected with its own vote and 2's");
    assert!(n.handle_yield(t));
    drain(&mut n);
    n.handle_datagram(t, &msg(3, 1, Body::Vote { candidate: 1 }))
        .unwrap();
    n.handle_datagram(t, &msg(2, 1, Body::Vote { candidate: 1 }))
        .unwrap();
    assert_eq!(n.leads(), None, "a resigned term stays resigned");
}

/// The (INELIGIBLE, LAST_RESORT) flags of every ELECT in `out`.
fn claim_flags(out: &[Output]) -> Vec<(bool, bool)> {
    sends(out)
        .into_iter()
        .filter_map(|(_, b)| match b {
            Body::Elect {
                ineligible,
                last_resort,
                ..
            } => Some((ineligible, last_resort)),
            _ => None,
        })
        .collect()
}

/// The flags of the claim a fresh server 3 of 3 makes when a round opens at 1 s, after
/// `setup` (at 0).
fn first_claim(setup: impl FnOnce(&mut Node)) -> Vec<(bool, bool)> {
    let mut n = Node::new(cfg(3, 3), Durable::default(), ms(0)).unwrap();
    setup(&mut n);
    for o in drain(&mut n) {
        if let Output::Persist(d) = o {
            n.handle_persisted(ms(0), d);
        }
    }
    n.handle_datagram(ms(1000), &elect(1, 1, 3)).unwrap();
    claim_flags(&drain(&mut n))
}

/// SPEC 13 with 5: a server that claimed eligible in a round and turns unhealthy
/// before the round ends sends no further claim in it, however many claims it hears
/// (its next round says INELIGIBLE, and LAST_RESORT). The last-resort change first
/// re-sent such a claim on every input, and two such servers sent each other claims
/// without end (the swarm's seed 215). And a server that turns unhealthy while watching
/// claims INELIGIBLE with LAST_RESORT in its next round.
#[test]
fn a_claim_is_not_resent_for_turning_unhealthy_mid_round() {
    let mut c = cfg(3, 3);
    c.sabotage.full_window = true;
    let mut n = Node::new(c, Durable::default(), ms(0)).unwrap();
    let t = ms(1000); // past the quiet period
    n.handle_datagram(t, &elect(1, 1, 3)).unwrap();
    assert_eq!(claim_flags(&drain(&mut n)), [(false, false)]);
    n.set_health(t, false);
    for k in 0..5u64 {
        n.handle_datagram(
            t + Duration::from_millis(k),
            &elect(1 + (k % 2) as u16, 1, 3),
        )
        .unwrap();
        n.handle_heard(t + Duration::from_millis(k), 2);
    }
    assert_eq!(claim_flags(&drain(&mut n)), [], "no claim re-sent");
    // The next round: INELIGIBLE, as a last resort.
    let unhealthy = |n: &mut Node| n.set_health(ms(0), false);
    assert_eq!(first_claim(unhealthy), [(true, true)]);
    // Not before the time its checks need to rise, and not while drained.
    assert_eq!(
        first_claim(|n| {
            unhealthy(n);
            n.set_last_resort(ms(0), Some(ms(5000)));
        }),
        [(true, false)]
    );
    assert_eq!(
        first_claim(|n| {
            unhealthy(n);
            n.set_drained(ms(0), true);
        }),
        [(true, false)]
    );
}

/// A reload to a hold longer than the one on disk waits for a write of it, which holds
/// no datagram; a refused reload puts back both the timers in force and those waiting;
/// the write's confirmation puts the waiting ones in force.
#[test]
fn longer_timers_wait_for_their_hold_on_disk() {
    let d = Durable {
        hold_ms: 300,
        ..Durable::default()
    };
    let mut n = Node::new(cfg(1, 3), d, ms(0)).unwrap();
    drain(&mut n);
    let hbt = |ms: u64| Duration::from_millis(ms);
    let (rtt, max) = (hbt(20), Duration::from_secs(60));
    // Shorter or equal: in force at once, no write.
    n.set_timers(hbt(80), rtt, 3, 10_000, max).unwrap();
    assert_eq!(n.heartbeat(), hbt(80));
    assert!(drain(&mut n).is_empty(), "no write for a shorter hold");
    // Longer than the hold on disk and in force: asked for, not in force yet.
    n.set_timers(hbt(200), rtt, 3, 10_000, max).unwrap();
    assert_eq!(
        n.heartbeat(),
        hbt(80),
        "in force before its hold is durable"
    );
    assert!(n.timers_waiting());
    assert_eq!(n.timers_asked().1, hbt(200));
    let writes = persists(&mut n);
    assert_eq!(writes.len(), 1, "one write of the longer hold");
    assert_eq!(writes[0].hold_ms, 600);
    // A reload refused after set_timers puts back what waited, too.
    let before = n.timers_before();
    n.set_timers(hbt(400), rtt, 3, 10_000, max).unwrap();
    assert_eq!(n.timers_asked().1, hbt(400));
    n.put_back_timers(before);
    assert_eq!(n.heartbeat(), hbt(80));
    assert_eq!(
        n.timers_asked().1,
        hbt(200),
        "the waiting timers wait again"
    );
    // The write of 600 ms confirmed while the refused reload's, of 1,200 ms, is still
    // asked for: the waiting timers stay waiting, since the core counts the lowest
    // hold asked for since no write was pending (300 ms on disk when the first was
    // asked) as what may still land (`min_hold_pending`, conservative).
    let later = persists(&mut n);
    assert_eq!(later.len(), 1, "one write of the refused reload's hold");
    n.handle_persisted(ms(1), writes[0]);
    assert_eq!(n.heartbeat(), hbt(80));
    assert!(n.timers_waiting());
    // Every write landed: the waiting timers come into force.
    n.handle_persisted(ms(2), later[0]);
    assert_eq!(n.heartbeat(), hbt(200));
    assert!(!n.timers_waiting());
    assert_eq!(n.timers_asked().1, hbt(200));
}

//! The bare core against the findings of issue 10 ("Never two processors"): each fix
//! is driven by hand, and each test that has a `Sabotage` switch shows the switch
//! reintroduces the finding (so the test can fail).

use electd::node::{
    Dest, Durable, Event, Handover, MAX_TERM, MAX_TERM_JUMP, Node, NodeConfig, Output, Reject,
    Role, Sabotage, ServerInfo,
};
use electd::time::Time;
use electd::wire::{Body, Message};
use std::time::Duration;

const FP: u32 = 0x1EA5;

fn cfg(id: u16, heartbeat: Duration, sabotage: Sabotage) -> NodeConfig {
    NodeConfig {
        id,
        servers: (1..=3)
            .map(|id| ServerInfo {
                id,
                priority: 0,
                witness: false,
            })
            .collect(),
        fingerprint: FP,
        heartbeat,
        rtt: Duration::from_millis(20),
        missed_heartbeats: 3,
        drift_ppm: 0,
        max_hold: Duration::from_secs(60),
        preempt_delay: None,
        seed: 7,
        strict: true,
        sabotage,
    }
}

fn ms(v: u64) -> Time {
    Time(v * 1_000_000)
}

fn msg(sender: u16, term: u64, body: Body) -> Message {
    Message {
        sender,
        fingerprint: FP,
        term,
        body,
    }
}

fn lead(sender: u16, term: u64, seq: u64, hold_ms: u32, resign: bool) -> Message {
    msg(
        sender,
        term,
        Body::Lead {
            seq,
            hold_ms,
            resign,
            successor: 0,
            unfit: false,
            alive: electd::wire::PeerSet::EMPTY,
            acks: electd::wire::PeerSet::EMPTY,
        },
    )
}

fn vote(sender: u16, term: u64, candidate: u16) -> Message {
    msg(sender, term, Body::Vote { candidate })
}

/// A node and its disk: every write lands at once, as a driver confirms it.
struct Host {
    node: Node,
    disk: Durable,
    sent: Vec<(Dest, Message)>,
    events: Vec<Event>,
}

impl Host {
    fn new(c: NodeConfig, disk: Durable, now: Time) -> Host {
        Host {
            node: Node::new(c, disk, now).unwrap(),
            disk,
            sent: Vec::new(),
            events: Vec::new(),
        }
    }

    /// Drains the outputs, confirming each write as the daemon does.
    fn pump(&mut self, now: Time) {
        while let Some(o) = self.node.poll_output() {
            match o {
                Output::Send { dest, msg } => self.sent.push((dest, msg)),
                Output::Persist(d) => {
                    self.disk = d;
                    self.node.handle_persisted(now, d);
                }
                Output::Event(e) => self.events.push(e),
            }
        }
    }

    fn rx(&mut self, now: Time, m: &Message) -> Result<(), Reject> {
        let r = self.node.handle_datagram(now, m);
        self.pump(now);
        r
    }

    fn tick(&mut self, now: Time) {
        self.node.handle_timeout(now);
        self.pump(now);
    }

    fn take_sent(&mut self) -> Vec<Message> {
        self.sent.drain(..).map(|(_, m)| m).collect()
    }

    fn leads(&mut self) -> Vec<(u64, u64, u32, bool)> {
        self.take_sent()
            .into_iter()
            .filter_map(|m| match m.body {
                Body::Lead {
                    seq,
                    hold_ms,
                    resign,
                    ..
                } => Some((m.term, seq, hold_ms, resign)),
                _ => None,
            })
            .collect()
    }
}

/// Server 1 elected in `term` by VOTEs from 2 and 3 (it has not voted itself), with a
/// lease from 2's ACK of its first LEAD. Returns the host at time `at`.
fn leader(term: u64, at: Time, heartbeat: Duration, sabotage: Sabotage) -> Host {
    let mut h = Host::new(cfg(1, heartbeat, sabotage), Durable::default(), ms(0));
    h.rx(at, &vote(2, term, 1)).unwrap();
    h.rx(at, &vote(3, term, 1)).unwrap();
    assert!(
        h.events.contains(&Event::Elected { term }),
        "{:?}",
        h.events
    );
    h.rx(
        at,
        &msg(
            2,
            term,
            Body::Ack {
                seq: 1,
                unfit: false,
            },
        ),
    )
    .unwrap();
    assert_eq!(h.node.status(at).role, Role::Leader);
    h
}

/// Finding 1: a server never leads a term it led, across a restart, so late VOTEs of
/// that term cannot revive a leadership whose RESIGN may still be in flight.
#[test]
fn a_restarted_leader_never_leads_its_term_again() {
    for (sabotage, revived) in [
        (Sabotage::default(), false),
        (
            Sabotage {
                volatile_led: true,
                ..Sabotage::default()
            },
            true,
        ),
    ] {
        let t = ms(1000);
        let h = leader(1, t, Duration::from_millis(100), sabotage.clone());
        let disk = h.disk;
        assert_eq!(disk.led_term, u64::from(!revived), "led_term on disk");
        // Crash and restart with the state file; then duplicates of the old VOTEs.
        let mut h = Host::new(cfg(1, Duration::from_millis(100), sabotage), disk, t);
        let later = t + Duration::from_millis(5);
        h.rx(later, &vote(2, 1, 1)).unwrap();
        h.rx(later, &vote(3, 1, 1)).unwrap();
        assert_eq!(
            h.events.contains(&Event::Elected { term: 1 }),
            revived,
            "{:?}",
            h.events
        );
    }
}

/// Finding 1, the other half: only the RESIGN of the followed leadership releases.
#[test]
fn resign_releases_only_the_followed_leadership() {
    let mut h = Host::new(
        cfg(2, Duration::from_millis(100), Sabotage::default()),
        Durable::default(),
        ms(0),
    );
    let t = ms(1000);
    h.rx(t, &lead(1, 3, 5, 300, false)).unwrap();
    let released = |h: &Host, now| h.node.status(now).leader.is_none();
    for (what, m) in [
        ("an older term", lead(1, 2, 9, 300, true)),
        ("another server", lead(3, 3, 9, 300, true)),
        ("a seq already seen", lead(1, 3, 5, 300, true)),
        ("a newer term never followed", lead(1, 4, 1, 300, true)),
    ] {
        h.rx(t, &m).unwrap();
        assert!(!released(&h, t), "released by {what}");
    }
    h.rx(t, &lead(1, 3, 6, 300, true)).unwrap();
    assert!(released(&h, t), "the matching RESIGN releases");
    assert!(
        h.take_sent()
            .iter()
            .any(|m| matches!(m.body, Body::Elect { .. })),
        "and opens a round at once"
    );
}

/// Finding 2: the hold travels rounded up, never down.
#[test]
fn the_hold_is_carried_rounded_up() {
    let hbt = Duration::from_micros(100_900); // K*HBT = 302.7 ms
    for (sabotage, want) in [
        (Sabotage::default(), 303),
        (
            Sabotage {
                hold_rounded_down: true,
                ..Sabotage::default()
            },
            302,
        ),
    ] {
        let mut h = leader(1, ms(1000), hbt, sabotage);
        let leads = h.leads();
        assert!(!leads.is_empty());
        assert!(
            leads.iter().all(|&(_, _, hold, _)| hold == want),
            "{leads:?}"
        );
        if want == 303 {
            // A follower at heartbeat 100 ms keeps faith at least as long as the lease.
            let lease = h.node.lease_len();
            assert!(Duration::from_millis(u64::from(want)) >= lease, "{lease:?}");
        }
    }
}

/// Finding 3: a LEAD with a shorter hold never shortens what an earlier one promised.
#[test]
fn a_shorter_hold_never_cuts_a_promise_short() {
    for (sabotage, faith_end) in [
        (Sabotage::default(), 1000 + 1440),
        (
            Sabotage {
                hold_replaced: true,
                ..Sabotage::default()
            },
            1100 + 576,
        ),
    ] {
        let mut h = Host::new(
            cfg(2, Duration::from_millis(100), sabotage),
            Durable::default(),
            ms(0),
        );
        h.rx(ms(1000), &lead(3, 1, 8, 1440, false)).unwrap();
        h.rx(ms(1100), &lead(3, 1, 9, 576, false)).unwrap();
        assert_eq!(h.node.faith_until(), ms(faith_end));
        // No vote for anyone else before then: its hold timer is the faith end.
        assert_eq!(h.node.next_deadline(), ms(faith_end));
    }
}

/// Finding 6: the hold promise grows at once (on disk before the ACK), shrinks only
/// once the longer faith has run out, and a restart is quiet only that long.
#[test]
fn the_hold_promise_shrinks_after_the_long_faith_ran_out() {
    let mut h = Host::new(
        cfg(2, Duration::from_millis(100), Sabotage::default()),
        Durable::default(),
        ms(0),
    );
    h.rx(ms(1000), &lead(1, 1, 1, 3000, false)).unwrap();
    assert_eq!(h.disk.hold_ms, 3000, "grown before the ACK left");
    let mut seq = 2;
    let mut shrunk_at = None;
    for t in (1100..=5000).step_by(100) {
        h.rx(ms(t), &lead(1, 1, seq, 300, false)).unwrap();
        seq += 1;
        if shrunk_at.is_none() && h.disk.hold_ms == 300 {
            shrunk_at = Some(t);
        }
    }
    // Faith from the 3000 ms LEAD at t=1000 runs to 4000: the promise may drop to 300
    // only once 4000 <= now + 300.
    assert_eq!(shrunk_at, Some(3700));
    // A restart now stays quiet for K*HBT (300 ms), not 3 s: it votes at once after.
    let disk = h.disk;
    let start = ms(6000);
    let mut r = Host::new(
        cfg(2, Duration::from_millis(100), Sabotage::default()),
        disk,
        start,
    );
    let claim = |sender| {
        msg(
            sender,
            disk.term + 1,
            Body::Elect {
                last_term: 1,
                last_seq: seq,
                priority: 0,
                heard: 3,
                ineligible: false,
                last_resort: false,
            },
        )
    };
    let after_quiet = start + Duration::from_millis(301);
    r.rx(after_quiet, &claim(1)).unwrap();
    r.rx(after_quiet, &claim(3)).unwrap();
    r.tick(after_quiet + Duration::from_millis(20));
    assert!(
        r.take_sent()
            .iter()
            .any(|m| matches!(m.body, Body::Vote { .. })),
        "voted right after a 300 ms quiet period"
    );
}

/// Finding 6: no single datagram can wedge the cluster.
#[test]
fn wedge_datagrams_are_refused_and_change_nothing() {
    let mut h = Host::new(
        cfg(2, Duration::from_millis(100), Sabotage::default()),
        Durable::default(),
        ms(0),
    );
    let t = ms(1000);
    let elect_last = |last_term| {
        msg(
            1,
            1,
            Body::Elect {
                last_term,
                last_seq: 0,
                priority: 0,
                heard: 3,
                ineligible: false,
                last_resort: false,
            },
        )
    };
    for (m, why) in [
        (lead(1, u64::MAX - 1, 1, 300, false), Reject::TermLimit),
        (lead(1, MAX_TERM, 1, 300, false), Reject::TermLimit),
        (lead(1, MAX_TERM_JUMP + 1, 1, 300, false), Reject::TermLimit),
        (lead(1, 1, 1, u32::MAX, false), Reject::HoldLimit),
        (lead(1, 1, 1, 60_001, false), Reject::HoldLimit),
        (elect_last(MAX_TERM), Reject::TermLimit),
        (vote(3, MAX_TERM, 2), Reject::TermLimit),
    ] {
        assert_eq!(h.rx(t, &m), Err(why), "{m:?}");
    }
    assert_eq!(h.node.term(), 0);
    assert!(h.take_sent().is_empty() && h.events.is_empty());
    assert_eq!(h.rx(t, &lead(1, MAX_TERM_JUMP, 1, 60_000, false)), Ok(()));
}

/// Finding 4, the core's half: a planned handoff stops reporting leader at once and
/// sends no LEAD, and its RESIGN waits for `handle_released` or the lease end.
#[test]
fn a_yield_resigns_only_after_release_or_at_the_lease_end() {
    let hbt = Duration::from_millis(100);
    for release in [true, false] {
        let t = ms(1000);
        let mut h = leader(1, t, hbt, Sabotage::default());
        let until = h.node.status(t).lease_until.expect("lease");
        h.take_sent();
        assert!(h.node.handle_yield(t));
        h.pump(t);
        assert_eq!(h.node.status(t).role, Role::Follower, "stops at once");
        assert!(h.events.contains(&Event::Resigning {
            term: 1,
            until,
            to: None,
            reason: Handover::Yield
        }));
        assert!(h.node.resign_pending() && !h.node.resign_complete());
        // Votes for a next term cannot make it lead while it waits.
        h.rx(t, &vote(2, 2, 1)).unwrap();
        h.rx(t, &vote(3, 2, 1)).unwrap();
        assert!(!h.events.contains(&Event::Elected { term: 2 }));
        let mid = t + Duration::from_millis(150);
        h.tick(mid);
        assert!(
            h.leads().is_empty(),
            "no heartbeat and no RESIGN while waiting"
        );
        let at = if release {
            h.node.handle_released(mid);
            h.pump(mid);
            mid
        } else {
            assert_eq!(h.node.next_deadline(), until);
            h.tick(until);
            until
        };
        assert_eq!(h.leads(), vec![(1, 2, 300, true)], "the first RESIGN");
        assert!(h.events.contains(&Event::Resigned { term: 1 }));
        h.tick(at + hbt / 10);
        assert_eq!(
            h.leads(),
            vec![(1, 3, 300, true)],
            "the second, HBT/10 later"
        );
        assert!(h.node.resign_complete());
        // VOTEs of a next-term round still in flight do not make it lead again.
        h.rx(at, &vote(2, 2, 1)).unwrap();
        h.rx(at, &vote(3, 2, 1)).unwrap();
        assert!(!h.events.contains(&Event::Elected { term: 2 }));
    }
}

/// The deliberately broken build sends the RESIGN at once (the e2e negative control).
#[test]
fn resign_early_sabotage_sends_at_once() {
    let t = ms(1000);
    let mut h = leader(
        1,
        t,
        Duration::from_millis(100),
        Sabotage {
            resign_early: true,
            ..Sabotage::default()
        },
    );
    h.take_sent();
    assert!(h.node.handle_yield(t));
    h.pump(t);
    assert_eq!(h.leads(), vec![(1, 2, 300, true)]);
}

/// Found by the swarm (seed 11833): after a reload to a shorter hold, the leader's own
/// entry in its ack table was overwritten with the earlier end of its newest LEAD, so
/// the lease end moved earlier than one already reported to `electctl run`, and a yield
/// whose supervisor never confirmed sent its RESIGN at the earlier end while the
/// supervisor still ran its command to the later one.
#[test]
fn the_lease_end_never_moves_earlier_after_a_shorter_reload() {
    let t = ms(1000);
    let mut h = leader(1, t, Duration::from_millis(100), Sabotage::default());
    let reported = h.node.status(t).lease_until.expect("lease");
    assert_eq!(
        reported,
        t + Duration::from_millis(300) - electd::node::LEASE_MARGIN
    );
    h.node
        .set_timers(
            Duration::from_millis(50),
            Duration::from_millis(20),
            3,
            0,
            Duration::from_secs(60),
        )
        .unwrap();
    let t2 = t + Duration::from_millis(100);
    h.tick(t2); // LEAD seq 2 with a 150 ms lease length
    h.rx(
        t2,
        &msg(
            2,
            1,
            Body::Ack {
                seq: 2,
                unfit: false,
            },
        ),
    )
    .unwrap();
    assert_eq!(h.node.status(t2).lease_until, Some(reported));
    assert!(h.node.handle_yield(t2));
    h.pump(t2);
    assert!(
        h.events.contains(&Event::Resigning {
            term: 1,
            until: reported,
            to: None,
            reason: Handover::Yield
        }),
        "{:?}",
        h.events
    );
}

//! An adversarial review of issue 25's targeted heartbeats (docs/PROTOCOL.md,
//! "Targeted heartbeats"), written apart from the change: hosts on a network with a
//! delay per datagram, N servers, per-server timers and wire levels, and rules that
//! lose or slow chosen LEADs. Each test compares the targeted cluster with the same
//! cluster where every LEAD still goes to every server (`Sabotage::untargeted`, what
//! unicast did before the change) at the same moment of the same schedule.
//!
//! The docs' claims questioned here:
//! - "one lost LEAD opens no round": the follower a LEAD was for waits a heartbeat
//!   past its faith. Only a follower the LEAD *before* named gets that heartbeat; the
//!   follower not named by the first sparse LEAD after a dense one, and a follower of
//!   an older build (which reads no ack map, so every LEAD asks it), do not;
//! - "a crash is found as soon as without targeting": the follower the newest LEAD did
//!   not name has its timer at the faith of the LEAD before plus a heartbeat only when
//!   the LEAD before was sparse and reached it.

mod delaynet;
mod hostnet;

use delaynet::{Fate, Net, settled};
use electd::node::{NodeConfig, Sabotage, ServerInfo};
use electd::wire::Framing;
use hostnet::HBT;
use std::time::Duration;

/// A follower that the first sparse LEAD after a dense one did not name has its timer
/// at the faith of the dense LEAD, with no heartbeat added; its next LEAD is the one
/// after (the first that names it), and when that one is lost, the one after it asks
/// everyone: three heartbeats after the dense one, exactly its faith at K = 3. With
/// that LEAD 4 ms late (as in tests/targeted.rs one_lost_lead_opens_no_round) the
/// follower opens a round against its healthy leader, which the others join (it is no
/// straggler to the follower whose newest LEAD is the first sparse one) and which
/// re-elects the leader in a higher term: the term, a fencing token, moves with no
/// failure. Returns the ELECTs sent, and whether the seat and every term stayed.
fn lose_first_turn_after_dense(sabotage: Sabotage, n: usize) -> (u64, bool) {
    let (mut net, l) = settled(n, sabotage, &[]);
    let lid = l as u16 + 1;
    let term = net.term(l);
    let first_sparse = net.first_sparse_after_dense(l);
    let elects = net.elects();
    // The first sparse LEAD just left. Lose the next one to the followers it names
    // (not named by the first sparse one), and delay the one after by 4 ms.
    let mut lost_to = Vec::new();
    net.rule = Box::new(move |o| {
        if o.from != lid {
            return Fate::Deliver;
        }
        if o.seq == first_sparse + 1 {
            lost_to.push(o.to);
            return Fate::Lose;
        }
        if o.seq == first_sparse + 2 {
            return Fate::Late(Duration::from_millis(4));
        }
        Fate::Deliver
    });
    let mut seat = true;
    let end = net.now + HBT * 10;
    while net.step(end) {
        seat &= net.leader_now() == Some(l);
    }
    net.now = end;
    let held = net.leader_now() == Some(l);
    let same = (0..n).all(|i| net.term(i) == term);
    println!(
        "N = {n}: leader {}, term {term} -> {:?}, seat kept throughout: {seat}, ELECTs {:?}",
        l + 1,
        (0..n).map(|i| net.term(i)).collect::<Vec<_>>(),
        net.elects_out
    );
    (net.elects() - elects, held && same)
}

/// The first sparse LEAD after a dense one: losing the next LEAD opens a round against
/// the healthy leader. Fails on the targeted code; passes when every LEAD goes to
/// every follower (the control below), or once the follower not named by a sparse LEAD
/// also gets its heartbeat of room (e.g. the leader sends the first sparse LEAD after a
/// dense one to every follower, or the follower arms faith + HBT whenever its leader
/// is sparse, not only when named).
#[test]
fn first_turn_after_a_dense_lead_lost_opens_no_round() {
    let got: Vec<_> = [3, 4, 5]
        .into_iter()
        .map(|n| (n, lose_first_turn_after_dense(Sabotage::default(), n)))
        .collect();
    println!("(N, (ELECTs, terms and seat kept)): {got:?}");
    for (n, (elects, same)) in got {
        assert_eq!(
            elects, 0,
            "N = {n}: one lost LEAD after the first sparse LEAD opened a round"
        );
        assert!(same, "N = {n}: a term changed or the leader lost its seat");
    }
}

/// The negative control of the fix: the first sparse LEAD after a dense one sent only
/// to the followers it names (`Sabotage::first_sparse_targeted`, the code the review
/// found) opens the round again.
#[test]
fn negative_control_first_sparse_targeted_opens_a_round() {
    let caught = [3, 4, 5].into_iter().any(|n| {
        let (elects, same) = lose_first_turn_after_dense(
            Sabotage {
                first_sparse_targeted: true,
                ..Sabotage::default()
            },
            n,
        );
        elects > 0 || !same
    });
    assert!(caught, "the control caught nothing: the test cannot fail");
}

/// The same schedule with every LEAD to every server (unicast before the change):
/// no round, so the round above is the change's.
#[test]
fn control_untargeted_first_turn_lost_opens_no_round() {
    for n in [3, 4, 5] {
        let (elects, same) = lose_first_turn_after_dense(
            Sabotage {
                untargeted: true,
                ..Sabotage::default()
            },
            n,
        );
        assert_eq!(elects, 0, "N = {n}: untargeted opened a round");
        assert!(same, "N = {n}");
    }
}

/// Crash the leader right after the first sparse LEAD that follows a dense one;
/// returns the time from the crash until a new leader holds a lease.
fn crash_after_first_sparse(sabotage: Sabotage, n: usize) -> Duration {
    let (mut net, l) = settled(n, sabotage, &[]);
    let lid = l as u16 + 1;
    net.first_sparse_after_dense(l);
    let crash = net.now;
    net.down.push(lid);
    let end = crash + Duration::from_secs(5);
    let ok = net.run_until(Duration::from_secs(5), |net| net.leader_now().is_some());
    assert!(ok && net.now <= end, "no new leader within 5 s");
    net.now.saturating_since(crash)
}

/// "A crash is found as soon as without targeting": not when it comes just after the
/// first sparse LEAD following a dense one (at every settling, and after every missed
/// ACK). The follower that LEAD did not name has its timer at the dense LEAD's faith,
/// a heartbeat before the named followers' faith ends: its round finds them in faith,
/// and the retries' backoff runs past it. Compared with the same cluster sending every
/// LEAD to everyone (`untargeted`, crashed at the same LEAD). Fails on the current
/// code; passes once the follower the first sparse LEAD skips has the same timer as
/// the named ones' faith (the first sparse LEAD after a dense one sent to everyone).
#[test]
fn a_crash_after_the_first_sparse_lead_is_found_as_soon_as_without_targeting() {
    let mut bad = Vec::new();
    for n in [3, 4, 5] {
        let t = crash_after_first_sparse(Sabotage::default(), n);
        let u = crash_after_first_sparse(
            Sabotage {
                untargeted: true,
                ..Sabotage::default()
            },
            n,
        );
        println!("N = {n}: targeted {t:?}, untargeted {u:?}");
        if t > u + Duration::from_millis(2) {
            bad.push((n, t, u));
        }
    }
    assert!(
        bad.is_empty(),
        "a crash after the first sparse LEAD found later than untargeted (N, targeted, untargeted): {bad:?}"
    );
}

/// A follower of an older build (wire capped below the ack map: version 5/6) reads
/// every LEAD as asking every follower, so it never waits a heartbeat past its faith;
/// a targeting leader still sends it only the LEADs that name it, every second
/// heartbeat. One lost LEAD to it, and the next (asking everyone) 4 ms late, opens a
/// round against the healthy leader during a rolling upgrade; before the change it had
/// every LEAD (the LEAD to `Dest::All` went at the lowest level known). Fails on the
/// current code; passes once the host sends a `Dest::Only` LEAD also to every peer not
/// known to read the ack map (or to all while one is not).
fn old_follower_loses_one(sabotage: Sabotage) -> (u64, bool) {
    old_follower_loses_one_with(sabotage, false)
}

/// As above; `named_only`: the hosts send a targeted LEAD to the named followers
/// alone, an older one too (`HostSabotage::named_only`, the code the review found).
fn old_follower_loses_one_with(sabotage: Sabotage, named_only: bool) -> (u64, bool) {
    // Server 3 is an older build; let the others settle with 1 or 2 leading.
    let (mut net, l) = settled(3, sabotage, &[(3, Framing::Compact)]);
    for h in net.hosts.iter_mut() {
        h.set_sabotage(electd::host::HostSabotage {
            named_only,
            ..Default::default()
        });
    }
    let lid = l as u16 + 1;
    let term = net.term(l);
    let old = if lid == 3 { 2 } else { 3 };
    let elects = net.elects();
    // Lose the next LEAD to the old follower, six times, 40 heartbeats apart (the
    // first at rest, sparse; the others whatever the miss streak makes them).
    for _ in 0..6 {
        net.lose_next_lead_to(l, old);
    }
    let held = net.leader_now() == Some(l);
    let same = (0..3).all(|i| net.term(i) == term);
    println!(
        "leader {lid}, older follower {old}: ELECTs by server {:?}",
        net.elects_out
    );
    (net.elects() - elects, held && same)
}

#[test]
fn an_older_follower_losing_one_lead_opens_no_round() {
    let (elects, same) = old_follower_loses_one(Sabotage::default());
    assert_eq!(
        elects, 0,
        "an older-build follower opened a round after one lost LEAD"
    );
    assert!(same, "a term changed");
}

/// The negative control of the fix: an older follower sent only the LEADs that name
/// it opens a round again.
#[test]
fn negative_control_named_only_opens_a_round_at_an_older_follower() {
    let (elects, same) = old_follower_loses_one_with(Sabotage::default(), true);
    assert!(
        elects > 0 || !same,
        "the control caught nothing: the test cannot fail"
    );
}

#[test]
fn control_untargeted_older_follower_opens_no_round() {
    let (elects, same) = old_follower_loses_one(Sabotage {
        untargeted: true,
        ..Sabotage::default()
    });
    assert_eq!(elects, 0, "untargeted: a round");
    assert!(same, "untargeted: a term changed");
}

/// Followers with a longer heartbeat than the leader's (a rolling reload to a longer
/// heartbeat, followers first; SPEC 8 allows timers to differ between servers): a
/// follower arms its timer at its faith plus its *own* heartbeat, so the follower the
/// newest LEAD did not name starts its round at the faith of the LEAD before plus
/// HBT_f, which is HBT_f - HBT_l after the named followers' faith ends, not at it as
/// PROTOCOL.md reasons ("the faith of the LEAD before plus one heartbeat, the moment
/// the named followers' faith ends": true only when both heartbeats are equal).
/// Returns the time from a crash (just after a LEAD) until a new leader holds a lease.
fn crash_with_longer_follower_heartbeat(sabotage: Sabotage) -> Duration {
    let hb_f = Duration::from_millis(300);
    let mut net = Net::new(
        3,
        true,
        sabotage,
        move |id, c| {
            let servers = c
                .servers
                .iter()
                .map(|s| ServerInfo {
                    priority: if s.id == 1 { 9 } else { 0 },
                    ..s.clone()
                })
                .collect();
            if id == 1 {
                NodeConfig { servers, ..c }
            } else {
                NodeConfig {
                    servers,
                    heartbeat: hb_f,
                    ..c
                }
            }
        },
        &[],
    );
    let l = net.leader(HBT * 60);
    assert_eq!(l, 0, "server 1 was to lead");
    // At rest and sparse: its last LEAD went to one follower.
    assert!(net.leads[l].last().unwrap().1, "the leader is not sparse");
    // Crash just after its next LEAD leaves.
    let next = net.last_seq(l) + 1;
    assert!(net.run_until(HBT * 2, |net| net.last_seq(l) == next));
    let crash = net.now;
    net.down.push(1);
    let ok = net.run_until(Duration::from_secs(5), |net| net.leader_now().is_some());
    assert!(ok, "no new leader within 5 s");
    net.now.saturating_since(crash)
}

/// Fails on the current code (about HBT_f - HBT_l = 200 ms later than untargeted);
/// passes once the extra room is the leader's heartbeat (e.g. carried in the LEAD, or
/// derived from the interval between the LEADs that name this follower) rather than
/// the follower's own.
///
/// Not fixed yet (the eighth round's note): a known delay during a rolling reload that
/// leaves followers at a longer heartbeat than their leader's. Run it with
/// `--ignored`.
#[test]
#[ignore = "known: the room is the follower's own heartbeat (a crash found HBT_f - HBT_l later during such a reload)"]
fn a_follower_with_a_longer_heartbeat_finds_a_crash_as_soon_as_without_targeting() {
    let t = crash_with_longer_follower_heartbeat(Sabotage::default());
    let u = crash_with_longer_follower_heartbeat(Sabotage {
        untargeted: true,
        ..Sabotage::default()
    });
    println!("targeted {t:?}, untargeted {u:?}");
    assert!(
        t <= u + Duration::from_millis(5),
        "targeted {t:?}, untargeted {u:?}"
    );
}

/// A rolling upgrade from the release before targeted heartbeats (sparse ACKs and the
/// ack map, wire versions 7/8, but no `wait_for_next_turn`: exactly this core with
/// `Sabotage::no_turn_wait`, its timer at its faith). Such a follower reads the same
/// wire level as this build, so no wire check can tell it apart, and a targeting
/// leader sends it only the LEADs that name it. One lost LEAD to it, with the next
/// (asking everyone) 4 ms late, opens a round against the healthy leader. Returns the
/// ELECTs sent and whether the seat and every term stayed.
fn previous_release_follower_loses_one(sabotage: Sabotage) -> (u64, bool) {
    let prev: u16 = 3;
    let mut net = Net::new(
        3,
        true,
        sabotage,
        move |id, c| {
            if id == prev {
                NodeConfig {
                    sabotage: Sabotage {
                        no_turn_wait: true,
                        ..c.sabotage.clone()
                    },
                    ..c
                }
            } else {
                c
            }
        },
        &[],
    );
    let l = net.leader(HBT * 40);
    let lid = l as u16 + 1;
    let old = if lid == prev { 2 } else { prev };
    let term = net.term(l);
    let elects = net.elects();
    for _ in 0..6 {
        net.lose_next_lead_to(l, old);
    }
    let held = net.leader_now() == Some(l);
    let same = (0..3).all(|i| net.term(i) == term);
    (net.elects() - elects, held && same)
}

/// Fails on the current code; passes once a leader targets only followers known to
/// wait for their turn (which needs a sign on the wire, e.g. a flag in the ACK or a new
/// version: the ack map alone does not say it), or while any follower is not known to.
///
/// Not fixed (the eighth round's note; README, upgrading): during a rolling upgrade
/// from that release a lost LEAD can re-elect the healthy leader in a higher term.
/// Run it with `--ignored`.
#[test]
#[ignore = "known: a v7/v8 follower of the release before targeting cannot be told apart on the wire"]
fn a_previous_release_follower_losing_one_lead_opens_no_round() {
    let (elects, same) = previous_release_follower_loses_one(Sabotage::default());
    assert_eq!(
        elects, 0,
        "a follower of the release before targeting opened a round after one lost LEAD"
    );
    assert!(same, "a term changed");
}

/// The control: the same mixed cluster with every LEAD to every server, as that
/// release's leader sent them.
#[test]
fn control_untargeted_previous_release_follower_opens_no_round() {
    let (elects, same) = previous_release_follower_loses_one(Sabotage {
        untargeted: true,
        ..Sabotage::default()
    });
    assert_eq!(elects, 0, "untargeted: a round");
    assert!(same, "untargeted: a term changed");
}

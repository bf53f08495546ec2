//! Issue 25, sparse acknowledgements, on real daemons on loopback (unicast): the
//! status line and the metrics show followers acknowledging in turn.

mod common;

use common::{Cluster, Mode, Opts, SERIAL};
use std::time::{Duration, Instant};

/// The value of the metric line starting with `name` in `electctl metrics`'s answer.
fn metric(c: &Cluster, id: u16, name: &str) -> u64 {
    let text = c.request(id, "metrics").unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
        .unwrap_or_else(|| panic!("no {name} in server {id}'s metrics"))
}

/// Issue 25, sparse acknowledgements, on real daemons: once the leader of three has had
/// a streak of clean heartbeats it reports `"acks":"in_turn"`, and each follower is
/// asked every second LEAD, so each sends about one ACK every two heartbeats (before:
/// one a heartbeat) while the lease is renewed at each heartbeat. In unicast a LEAD
/// goes only to the follower it asks (targeted heartbeats): each receives about every
/// second LEAD, and none that does not ask it.
#[test]
fn followers_at_rest_acknowledge_in_turn() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let o = Opts::new(Mode::Unicast, 3);
    let c = Cluster::build(&o);
    let (leader, _) = c.agreement(o.failover_bound() + Duration::from_secs(2));
    // 16 clean heartbeats after the wire versions are learned: 1.6 s at 100 ms.
    common::wait_for("acks in turn", Duration::from_secs(6), || {
        let s = c.status(leader)?;
        (s.get("acks").and_then(electd::json::Value::as_str) == Some("in_turn")).then_some(())
    });
    let followers: Vec<u16> = (1..=3).filter(|&i| i != leader).collect();
    let name = "electd_acks_not_asked_total";
    let sent = "electd_datagrams_sent_total";
    let got = "electd_messages_received_total{kind=\"lead\"}";
    let before: Vec<(u64, u64, u64)> = followers
        .iter()
        .map(|&f| (metric(&c, f, name), metric(&c, f, sent), metric(&c, f, got)))
        .collect();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let heartbeats = t0.elapsed().as_secs_f64() / (o.hbt_ms as f64 / 1000.0);
    for (&f, &(skipped0, sent0, got0)) in followers.iter().zip(&before) {
        let skipped = metric(&c, f, name) - skipped0;
        let sent = metric(&c, f, sent) - sent0;
        let got = metric(&c, f, got) - got0;
        eprintln!(
            "follower {f}: {got} LEADs received, {skipped} not asking it, {sent} \
             datagrams sent, in {heartbeats:.1} heartbeats"
        );
        // About half of the LEADs each; slack for a miss on a loaded machine (a miss
        // makes 16-32 LEADs ask everyone).
        assert!(
            (got as f64) <= heartbeats * 0.75 + 2.0,
            "follower {f} received {got} LEADs in {heartbeats:.1} heartbeats: not only \
             those that ask it"
        );
        assert!(
            (got as f64) >= heartbeats * 0.3,
            "follower {f} received {got} LEADs in {heartbeats:.1} heartbeats"
        );
        assert_eq!(
            skipped, 0,
            "follower {f} received LEADs that did not ask it"
        );
        assert!(
            (sent as f64) <= heartbeats * 0.75 + 2.0,
            "follower {f} sent {sent} datagrams in {heartbeats:.1} heartbeats"
        );
    }
    let (again, _) = c.agreement(Duration::from_secs(3));
    assert_eq!(again, leader, "the leader changed during the window");
    let s = c.status(leader).expect("status");
    assert!(
        // Just before a tick the lease known rests on the LEAD of two ticks before
        // (read at the heartbeat): 294 - 200 ms left; a missed renewal would leave 0-94.
        s.get("lease_ms").and_then(electd::json::Value::as_u64) > Some(60),
        "the lease is renewed at each heartbeat: {s:?}"
    );
}

//! Real electd processes on loopback (issue 3): unicast and multicast on `lo`, 3 and 5
//! servers, heartbeat 100 ms, rtt 20 ms. Every process is started by the test and ended
//! by it, by its own handle; all traffic stays on 127.0.0.1 and one multicast group.

mod common;

use common::{Cluster, HBT_MS, Mode, RTT_MS, SERIAL, free_udp_port, slacked, wait_exit, wait_for};
use electd::json::{self, Value};
use electd::wire::{self, Body, Message};
use std::io::{BufRead, BufReader, Write};
use std::net::UdpSocket;
use std::os::unix::net::UnixStream;
use std::process::Command;

use std::time::{Duration, Instant};

/// Garbage of every kind at a server's port: counted as dropped, nothing changes.
fn garbage(c: &Cluster, mode: Mode, target: u16) {
    let (leader, term) = c.agreement(Duration::from_secs(3));
    let before = c.dropped_total(target);
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = format!("127.0.0.1:{}", c.ports[usize::from(target) - 1]);
    let mut rng = electd::rng::SplitMix64::new(7);
    for i in 0..200u32 {
        let len = 1 + rng.below(80) as usize;
        let b: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        tx.send_to(&b, &to).unwrap();
        if i % 50 == 0 {
            tx.send_to(&[0u8; 1500], &to).unwrap();
        }
    }
    // Well-formed but foreign: another cluster's fingerprint, an unknown sender.
    let forged = |sender, fingerprint| {
        wire::encode_to_vec(&Message {
            sender,
            fingerprint,
            term: u64::MAX / 2,
            body: Body::Lead {
                seq: 1,
                hold_ms: 60_000,
                resign: false,
                successor: 0,
                unfit: false,
                alive: electd::wire::PeerSet::EMPTY,
                acks: electd::wire::PeerSet::EMPTY,
            },
        })
    };
    let other = if target == 1 { 2 } else { 1 };
    tx.send_to(&forged(other, 0xBAD), &to).unwrap();
    tx.send_to(&forged(200, 0xBAD), &to).unwrap();
    let after = wait_for(
        "every bad datagram counted",
        Duration::from_millis(500),
        || {
            let after = c.dropped_total(target);
            (after - before >= 200 + 4 + 2).then_some(after)
        },
    );
    assert_eq!(
        after - before,
        200 + 4 + 2,
        "every bad datagram is counted once"
    );
    assert!(
        c.metric(
            target,
            "electd_datagrams_dropped_total{reason=\"bad_trailer\"}"
        ) > 0
    );
    assert!(
        c.metric(
            target,
            "electd_datagrams_dropped_total{reason=\"too_short\"}"
        ) > 0
    );
    let too_long = c.metric(
        target,
        "electd_datagrams_dropped_total{reason=\"too_long\"}",
    );
    assert!(too_long >= 4, "too long counted: {too_long}");
    // In unicast mode a datagram must come from its sender's configured address, which
    // is checked first; in multicast mode the fingerprint catches the forgery.
    let reason = if mode == Mode::Unicast {
        "source_mismatch"
    } else {
        "fingerprint"
    };
    assert_eq!(
        c.metric(
            target,
            &format!("electd_datagrams_dropped_total{{reason=\"{reason}\"}}")
        ),
        1
    );
    assert!(
        c.metric(
            target,
            "electd_datagrams_dropped_total{reason=\"unknown_sender\"}"
        ) >= 1
    );
    assert_eq!(
        c.agreement(Duration::from_secs(1)),
        (leader, term),
        "garbage changed the leader or term"
    );
}

fn scenario(mode: Mode, n: u16) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = Cluster::start(mode, n);
    let (leader, term) = c.agreement(Duration::from_secs(5));
    assert!(term >= 1);

    garbage(&c, mode, if leader == 1 { 2 } else { 1 });

    // A killed follower restarts and rejoins; the leader keeps its seat and term.
    let f = if leader == n { n - 1 } else { n };
    c.kill(f);
    std::thread::sleep(Duration::from_millis(500));
    // SPEC 8 L2: the leader keeps its seat. Its term may grow only if a round re-elected
    // it (a follower that missed K heartbeats, which a loaded 2-core machine can cause:
    // seen with a compiler running beside the tests); report that, do not fail on it.
    let (l1, t1) = c.agreement(Duration::from_secs(1));
    assert_eq!(l1, leader, "a follower's crash moved the seat");
    if t1 != term {
        eprintln!("{mode:?} n={n}: the leader was re-elected in term {t1} (was {term})");
    }
    c.spawn(f);
    std::thread::sleep(Duration::from_millis(800));
    let (l2, t2) = c.agreement(Duration::from_secs(2));
    assert_eq!(l2, leader, "a restarted follower moved the seat");
    if t2 != t1 {
        eprintln!("{mode:?} n={n}: the leader was re-elected in term {t2} (was {t1})");
    }

    // SIGKILL of the leader: a new leader with a higher term within 3*HBT + RTT + 100 ms,
    // times the slack factor (420 ms, 840 ms with the default slack).
    let (l, t) = c.agreement(Duration::from_secs(1));
    std::thread::sleep(Duration::from_millis(
        u64::from(std::process::id()) % HBT_MS,
    ));
    let t0 = Instant::now();
    c.kill(l);
    let bound = slacked(Duration::from_millis(3 * HBT_MS + RTT_MS + 100));
    let (new, took) = c.new_leader_since(l, t, t0, Duration::from_secs(3));
    eprintln!(
        "{mode:?} n={n}: SIGKILL failover {} -> {new} in {took:?}",
        l
    );
    assert!(
        took <= bound,
        "crash failover took {took:?} > {bound:?}\n{}",
        c.logs()
    );
    c.spawn(l);
    let (l2, t2) = c.agreement(Duration::from_secs(2));
    assert_eq!(l2, new, "the restarted old leader took the seat back");

    // SIGTERM of the leader: it resigns; a new leader within RTT + 100 ms (times the
    // slack factor; a planned handoff also waits for local supervisors, none here). The server
    // restarted above must first have run K*HBT (its quiet period, SPEC section 5):
    // with 3 servers it is one of the two voters left.
    std::thread::sleep(Duration::from_millis(3 * HBT_MS + 50));
    let t0 = Instant::now();
    let child = c.terminate(l2);
    let (new2, took) = c.new_leader_since(l2, t2, t0, Duration::from_secs(2));
    eprintln!("{mode:?} n={n}: SIGTERM handoff {l2} -> {new2} in {took:?}");
    assert!(
        took <= slacked(Duration::from_millis(RTT_MS + 100)),
        "graceful handoff took {took:?}\n{}",
        c.logs()
    );
    let status = wait_exit(child, Duration::from_secs(2));
    assert_eq!(status, Some(0), "SIGTERM exits 0 after resigning");
    assert!(c.log(l2).contains("resigning leadership"));
}

#[test]
fn unicast_3() {
    scenario(Mode::Unicast, 3);
}

#[test]
fn unicast_5() {
    scenario(Mode::Unicast, 5);
}

#[test]
fn multicast_on_lo_3() {
    scenario(Mode::Multicast, 3);
}

#[test]
fn multicast_on_lo_5() {
    scenario(Mode::Multicast, 5);
}

/// A bad configuration is refused with its file and line, by --check-config and by a
/// plain start alike, and nothing is left running.
#[test]
fn bad_config_is_refused_with_its_line() {
    let dir = std::env::temp_dir().join(format!("electd-badconf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("bad.conf");
    std::fs::write(
        &conf,
        "cluster x\nserver 1 127.0.0.1:7999\nid 1\nunicast\nhearbeat 1s\n",
    )
    .unwrap();
    let want = format!(
        "{}:5: unknown directive 'hearbeat' (did you mean 'heartbeat'?)",
        conf.display()
    );
    common::assert_refused(&conf, &want);
    std::fs::write(
        &conf,
        "cluster x\nserver 1 127.0.0.1:7999\nid 1\nunicast\nheartbeat 1s\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_electd"))
        .arg("--config")
        .arg(&conf)
        .arg("--check-config")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(env!("CARGO_BIN_EXE_electd"))
        .args(["--id", "0", "--check-config"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A corrupt state file stops the daemon with a message naming the file.
#[test]
fn corrupt_state_file_stops_the_daemon() {
    let dir = std::env::temp_dir().join(format!("electd-corrupt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("c.conf");
    let port = free_udp_port();
    std::fs::write(
        &conf,
        format!("cluster x\nserver 1 127.0.0.1:{port}\nid 1\nunicast\nstate {0}/1.state\nsocket {0}/1.sock\n", dir.display()),
    )
    .unwrap();
    std::fs::write(dir.join("1.state"), "electd-state 1\nterm 7\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_electd"))
        .arg("--config")
        .arg(&conf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("state file {}/1.state is corrupt", dir.display())),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("1.state")).unwrap(),
        "electd-state 1\nterm 7\n",
        "left untouched"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// electctl's exit codes: is-leader 0 on the leader, 1 on a follower, 2 without a daemon;
/// and the control socket's limits answer clearly.
#[test]
fn electctl_and_socket_limits() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::start(Mode::Unicast, 3);
    let (l, _) = c.agreement(Duration::from_secs(5));
    let ctl = |id: u16, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_electctl"))
            .arg("--socket")
            .arg(c.sock(id))
            .args(args)
            .output()
            .unwrap()
    };
    let f = if l == 1 { 2 } else { 1 };
    assert_eq!(ctl(l, &["is-leader"]).status.code(), Some(0));
    assert_eq!(ctl(f, &["is-leader"]).status.code(), Some(1));
    let missing = Command::new(env!("CARGO_BIN_EXE_electctl"))
        .args(["--socket", "/nonexistent/x.sock", "is-leader"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot connect"));
    let leader = ctl(f, &["leader"]);
    assert_eq!(
        String::from_utf8_lossy(&leader.stdout).trim(),
        l.to_string()
    );
    let table = String::from_utf8_lossy(&ctl(l, &["status"]).stdout).to_string();
    assert!(table.contains("role      leader"), "{table}");
    assert_eq!(
        ctl(f, &["yield"]).status.code(),
        Some(1),
        "a follower cannot yield"
    );
    let metrics = String::from_utf8_lossy(&ctl(l, &["metrics"]).stdout).to_string();
    assert!(
        metrics.contains("electd_is_leader{group=\"default\"} 1")
            && metrics.trim_end().ends_with("# EOF"),
        "{metrics}"
    );
    assert_eq!(ctl(l, &["frobnicate"]).status.code(), Some(2));

    // Unknown command and an over-long request: clear errors, and the daemon answers on.
    let answer = c.request(l, "frobnicate").unwrap();
    assert!(
        answer.contains("\"error\":\"unknown command 'frobnicate'"),
        "{answer}"
    );
    let long = "x".repeat(2000);
    let answer = c.request(l, &long).unwrap_or_default();
    assert!(answer.contains("longer than 1024 bytes"), "{answer}");
    assert!(c.status(l).is_some());
    // elect on a healthy cluster re-elects the same leader.
    let (_, t) = c.agreement(Duration::from_secs(1));
    assert_eq!(ctl(f, &["elect"]).status.code(), Some(0));
    let (l2, t2) = wait_for("the elect round", Duration::from_secs(2), || {
        let (l2, t2) = c.agreement(Duration::from_secs(2));
        (t2 > t).then_some((l2, t2))
    });
    assert_eq!(l2, l, "an elect round keeps a live leader");
    assert!(t2 > t, "the round ran: term {t} -> {t2}");
}

#[test]
fn watch_reports_changes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = Cluster::start(Mode::Unicast, 3);
    let (l, _) = c.agreement(Duration::from_secs(5));
    let f = if l == 1 { 2 } else { 1 };
    let mut s = UnixStream::connect(c.sock(f)).unwrap();
    s.set_read_timeout(Some(slacked(Duration::from_secs(3))))
        .unwrap();
    s.write_all(b"watch\n").unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert_eq!(
        json::parse(line.trim())
            .unwrap()
            .get("leader")
            .and_then(Value::as_u64),
        Some(u64::from(l))
    );
    c.kill(l);
    let mut leaders = Vec::new();
    for _ in 0..10 {
        line.clear();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        let v = json::parse(line.trim()).unwrap();
        leaders.push(v.get("leader").and_then(Value::as_u64));
        if leaders.last().unwrap().is_some_and(|x| x != u64::from(l)) {
            break;
        }
    }
    assert_eq!(
        leaders.first(),
        Some(&None),
        "the watcher hears the leader go: {leaders:?}"
    );
    assert!(
        leaders.last().unwrap().is_some_and(|x| x != u64::from(l)),
        "then the new one: {leaders:?}"
    );
}

/// Issue 12: idle traffic grows linearly with the servers. On real daemons (unicast, 5
/// servers) each follower sends its ACKs to the leader only, and receives none; the
/// leader receives the followers' ACKs and sends one LEAD per follower a heartbeat.
/// Before the change each follower also received the other three's ACKs. Since issue
/// 25 a leader at rest asks Q-1 = 2 followers per LEAD, in turn: each follower sends
/// an ACK every second heartbeat and the leader receives two a heartbeat; and it sends
/// each LEAD only to the two it asks (targeted heartbeats): two LEADs a heartbeat, and
/// each follower receives one every second heartbeat.
#[test]
fn idle_acks_go_to_the_leader_only() {
    let c = Cluster::start(Mode::Unicast, 5);
    let (l, _) = c.agreement(Duration::from_secs(10));
    // At rest: 16 clean heartbeats (1.6 s) before the leader asks in turn.
    wait_for("acks in turn", Duration::from_secs(6), || {
        let s = c.status(l)?;
        (s.get("acks").and_then(Value::as_str) == Some("in_turn")).then_some(())
    });
    let ack_sent = |id| c.metric(id, "electd_messages_sent_total{kind=\"ack\"}");
    let ack_got = |id| c.metric(id, "electd_messages_received_total{kind=\"ack\"}");
    let lead_sent = |id| c.metric(id, "electd_messages_sent_total{kind=\"lead\"}");
    let lead_got = |id| c.metric(id, "electd_messages_received_total{kind=\"lead\"}");
    let before: Vec<(u64, u64, u64, u64)> = (1..=5)
        .map(|id| (ack_sent(id), ack_got(id), lead_sent(id), lead_got(id)))
        .collect();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(2));
    let after: Vec<(u64, u64, u64, u64)> = (1..=5)
        .map(|id| (ack_sent(id), ack_got(id), lead_sent(id), lead_got(id)))
        .collect();
    let beats = t0.elapsed().as_millis() as f64 / HBT_MS as f64;
    let near = |got: u64, want: f64| (got as f64) >= want * 0.7 && (got as f64) <= want * 1.3 + 2.0;
    assert_eq!(
        c.agreement(Duration::from_secs(1)).0,
        l,
        "the leader changed"
    );
    for id in 1..=5u16 {
        let i = usize::from(id) - 1;
        let (s, g, lead, lead_in) = (
            after[i].0 - before[i].0,
            after[i].1 - before[i].1,
            after[i].2 - before[i].2,
            after[i].3 - before[i].3,
        );
        if id == l {
            assert!(
                near(g, 2.0 * beats),
                "leader {id} received {g} ACKs in {beats} beats"
            );
            assert!(
                near(lead, 2.0 * beats),
                "leader {id} sent {lead} LEADs in {beats} beats"
            );
            assert_eq!(s, 0, "the leader sent ACKs");
        } else {
            assert!(
                near(s, beats / 2.0),
                "follower {id} sent {s} ACKs in {beats} beats"
            );
            assert!(
                near(lead_in, beats / 2.0),
                "follower {id} received {lead_in} LEADs in {beats} beats"
            );
            assert_eq!(
                g, 0,
                "follower {id} received ACKs: they go to the leader only"
            );
        }
    }
}

/// Issue 23 item 9: on a follower, `status` shows every live peer as heard (the other
/// follower through the leader's `alive` map: ACKs go to the leader only) and never a
/// healthy peer as unfit (election claims are no health reports: the first round's
/// claims, made before a claimant had heard a majority, showed as unfit for K*HBT+HBT).
#[test]
fn a_followers_status_shows_live_peers_heard_and_none_unfit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::start(Mode::Unicast, 3);
    let (leader, _) = c.agreement(Duration::from_secs(5));
    let check = |when: &str| {
        for id in (1..=3).filter(|&id| id != leader) {
            let v = c.status(id).expect("status");
            let peers = v.get("peers").and_then(Value::as_array).unwrap();
            assert_eq!(peers.len(), 2, "{v:?}");
            for p in peers {
                assert!(
                    p.get("heard_ms_ago").and_then(Value::as_u64).is_some(),
                    "{when}: server {id} shows a live peer as never heard: {v:?}"
                );
                assert_ne!(
                    p.get("healthy"),
                    Some(&Value::Bool(false)),
                    "{when}: server {id} shows a healthy peer as unfit: {v:?}"
                );
            }
        }
    };
    check("right after the first round");
    std::thread::sleep(Duration::from_millis(1500));
    check("1.5 s later");
}

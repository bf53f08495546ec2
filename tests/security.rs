//! Hostile input (issue 6), on real daemons: authenticated datagrams, replays, forged
//! messages, key rotation, and the control socket's limits under abuse.

mod common;

use common::{Cluster, Mode, SERIAL, eventually, slack, wait_for};
use electd::json::Value;
use electd::wire::{self, Body, Key, Message};
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn key_dir() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("electd-keys-{}-{k}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write_key(path: &Path, byte: u8, mode: u32) {
    std::fs::write(path, [byte; 48]).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn group_of(c: &Cluster) -> SocketAddrV4 {
    let text = std::fs::read_to_string(&c.conf).unwrap();
    let line = text.lines().find(|l| l.starts_with("multicast")).unwrap();
    line.split(' ').nth(1).unwrap().parse().unwrap()
}

/// A socket that receives the cluster's multicast group: what an attacker on the LAN sees.
fn sniffer(group: SocketAddrV4) -> UdpSocket {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
    s.set_reuse_address(true).unwrap();
    s.set_reuse_port(true).unwrap();
    s.bind(&std::net::SocketAddr::V4(group).into()).unwrap();
    s.join_multicast_v4(group.ip(), &Ipv4Addr::LOCALHOST)
        .unwrap();
    let u: UdpSocket = s.into();
    u.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    u
}

fn dropped(c: &Cluster, id: u16, reason: &str) -> u64 {
    c.metric(
        id,
        &format!("electd_datagrams_dropped_total{{reason=\"{reason}\"}}"),
    )
}

fn keyed_cluster(n: u16) -> (Cluster, PathBuf) {
    let dir = key_dir();
    let key = dir.join("key");
    write_key(&key, 0x5a, 0o600);
    let c = Cluster::start_with(
        Mode::Multicast,
        n,
        &format!("key-file {}\n", key.display()),
        &[],
    );
    (c, dir)
}

/// SPEC 10: with a key, forged LEADs with a huge term, forged VOTEs and ELECTs (unkeyed,
/// or tagged with another key) and replays of captured datagrams change neither the
/// leader nor the term, and each is counted by its reason.
#[test]
fn forgeries_and_replays_change_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (mut c, dir) = keyed_cluster(3);
    let (leader, _) = c.agreement(Duration::from_secs(5));
    let group = group_of(&c);
    let sniff = sniffer(group);
    // Capture real traffic, an election's included.
    let mut captured: Vec<Vec<u8>> = Vec::new();
    let f = if leader == 1 { 2 } else { 1 };
    c.request(f, "elect");
    let t = Instant::now();
    let mut buf = [0u8; 256];
    while t.elapsed() < Duration::from_millis(800) {
        if let Ok(n) = sniff.recv(&mut buf) {
            captured.push(buf[..n].to_vec());
        }
    }
    // An ELECT bundle: keyed bundle header (20 bytes), then the entry's group and kind.
    assert!(
        captured
            .iter()
            .any(|b| b.len() > 21 && b[2] == wire::VERSION_BUNDLE_KEYED && b[21] == 2),
        "an ELECT was captured"
    );
    // Let the term move on past everything captured.
    let (_, captured_term) = c.agreement(Duration::from_secs(2));
    c.request(f, "elect");
    let (leader, term) = wait_for("the term to move on", Duration::from_secs(2), || {
        let (l, t) = c.agreement(Duration::from_secs(2));
        (t > captured_term).then_some((l, t))
    });

    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let targets: Vec<String> = std::iter::once(group.to_string())
        .chain(c.ports.iter().map(|p| format!("127.0.0.1:{p}")))
        .collect();
    let send_all = |b: &[u8]| {
        for to in &targets {
            tx.send_to(b, to).unwrap();
        }
    };
    let wrong = Key::new(&[0x11; 48]);
    let forged = [
        Message {
            sender: f,
            fingerprint: 0,
            term: u64::MAX / 2,
            body: Body::Lead {
                seq: 1,
                hold_ms: 600_000,
                resign: false,
                successor: 0,
                unfit: false,
                alive: electd::wire::PeerSet::EMPTY,
            },
        },
        Message {
            sender: f,
            fingerprint: 0,
            term: term + 100,
            body: Body::Vote { candidate: f },
        },
        Message {
            sender: f,
            fingerprint: 0,
            term: term + 100,
            body: Body::Elect {
                last_term: u64::MAX,
                last_seq: 1,
                priority: 255,
                heard: 255,
                ineligible: false,
                last_resort: false,
            },
        },
    ];
    let before_tag: u64 = (1..=3).map(|id| dropped(&c, id, "bad_tag")).sum();
    for m in &forged {
        send_all(&wire::encode_to_vec(m));
        let mut b = Vec::new();
        wire::encode_keyed(m, u64::MAX, &wrong, &mut b);
        send_all(&b);
    }
    let tagged = || (1..=3).map(|id| dropped(&c, id, "bad_tag")).sum::<u64>();
    eventually(Duration::from_millis(500), || tagged() >= before_tag + 9);
    let after_tag = tagged();
    assert!(
        after_tag >= before_tag + 9,
        "forgeries refused by their tag: {before_tag} -> {after_tag}"
    );
    assert_eq!(
        c.agreement(Duration::from_secs(1)),
        (leader, term),
        "forgeries moved the leader or term"
    );

    // Replays: everything captured, to everyone.
    let before_replay: u64 = (1..=3).map(|id| dropped(&c, id, "replay")).sum();
    for b in &captured {
        send_all(b);
    }
    let replayed = || (1..=3).map(|id| dropped(&c, id, "replay")).sum::<u64>();
    eventually(Duration::from_millis(500), || {
        replayed() >= before_replay + captured.len() as u64
    });
    let after_replay = replayed();
    assert!(
        after_replay >= before_replay + captured.len() as u64,
        "replays counted: {before_replay} -> {after_replay} for {}",
        captured.len()
    );
    assert_eq!(
        c.agreement(Duration::from_secs(1)),
        (leader, term),
        "replays moved the leader or term"
    );

    // After the sender restarts (new boot) and the receiver restarts, the sender's old
    // datagrams are still refused: its new boot number is on the receiver's disk.
    let r = if leader == 3 { 2 } else { 3 };
    let s = 6 - r - leader; // the third server
    let from_s: Vec<&Vec<u8>> = captured.iter().filter(|b| b[7] as u16 == s).collect();
    c.kill(s);
    c.spawn(s);
    // r has heard s's new boot (and persisted it) once it hears s again after a restart.
    let t_restart = Instant::now();
    wait_for("r to hear the restarted s", Duration::from_secs(2), || {
        let v = c.status(r)?;
        let ago = v
            .get("peers")?
            .as_array()?
            .iter()
            .find(|p| p.get("id").and_then(Value::as_u64) == Some(u64::from(s)))?
            .get("heard_ms_ago")?
            .as_u64()?;
        (u128::from(ago) + 50 < t_restart.elapsed().as_millis()).then_some(())
    });
    // Followers acknowledge to the leader only (issue 12), so r, a follower too, hears
    // s directly (and learns its boot) only when s sends to everyone: a round does it,
    // once s's startup quiet period (K*HBT, in which it sends no ELECT) has passed.
    std::thread::sleep(Duration::from_millis(800));
    c.request(s, "elect").expect("elect on s");
    std::thread::sleep(Duration::from_millis(300));
    c.kill(r);
    c.spawn(r);
    let before = dropped(&c, r, "replay");
    let to_r = format!("127.0.0.1:{}", c.ports[usize::from(r) - 1]);
    for b in &from_s {
        tx.send_to(b, &to_r).unwrap();
    }
    eventually(Duration::from_millis(500), || {
        dropped(&c, r, "replay") - before >= from_s.len() as u64
    });
    assert_eq!(
        dropped(&c, r, "replay") - before,
        from_s.len() as u64,
        "old boots refused after a restart"
    );
    let (l2, _) = c.agreement(Duration::from_secs(3));
    assert_eq!(
        l2, leader,
        "the leader kept its seat through replays and restarts"
    );
    drop(c);
    std::fs::remove_dir_all(dir).unwrap();
}

/// SPEC 10: a key readable by others, or too short, stops the daemon with a clear error.
#[test]
fn unsafe_key_files_are_refused() {
    let dir = key_dir();
    let key = dir.join("key");
    let conf = dir.join("c.conf");
    let port = common::free_udp_port();
    std::fs::write(&conf, format!("cluster k\nserver 1 127.0.0.1:{port}\nid 1\nunicast\nkey-file {}\nstate {1}/s\nsocket {1}/x.sock\n", key.display(), dir.display())).unwrap();
    for (mode, body, want) in [
        (0o644, 48usize, "readable by others"),
        (0o600, 8, "at least 32"),
    ] {
        std::fs::write(&key, vec![b'k'; body]).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
        common::assert_refused(&conf, want);
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// SPEC 10: a key is rotated without downtime: key-file-next is accepted, then each
/// server switches by SIGHUP; the leader never changes on the way.
#[test]
fn key_rotation_without_downtime() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (c, dir) = keyed_cluster(3);
    let (leader, _) = c.agreement(Duration::from_secs(5));
    let old = dir.join("key");
    let new = dir.join("key-new");
    write_key(&new, 0x77, 0o600);
    let set = |current: &Path, next: Option<&Path>| {
        let text = std::fs::read_to_string(&c.conf).unwrap();
        let kept: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with("key-file"))
            .collect();
        let mut t = kept.join("\n") + "\n";
        t += &format!("key-file {}\n", current.display());
        if let Some(n) = next {
            t += &format!("key-file-next {}\n", n.display());
        }
        std::fs::write(&c.conf, t).unwrap();
    };
    // Each server reads the same file; the steps are staggered by SIGHUP per server.
    // SIGHUP to server `id`, and a bounded wait until it has reloaded.
    let reload = |id: u16| {
        let before = c.log(id).matches("configuration reloaded").count();
        common::signal(c.child(id), libc::SIGHUP);
        wait_for("the key reload", Duration::from_secs(2), || {
            (c.log(id).matches("configuration reloaded").count() > before).then_some(())
        });
    };
    set(&old, Some(&new));
    for id in 1..=3 {
        reload(id);
    }
    set(&new, Some(&old));
    for id in 1..=3 {
        reload(id);
        // Mid-rotation, servers sign with different keys: all must still agree.
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(c.agreement(Duration::from_secs(1)).0, leader, "step {id}");
    }
    set(&new, None);
    for id in 1..=3 {
        reload(id);
    }
    assert_eq!(c.agreement(Duration::from_secs(1)).0, leader);
    assert!(c.log(1).contains("configuration reloaded"));
    assert_eq!(
        dropped(&c, 1, "bad_tag"),
        0,
        "no datagram was lost to the rotation"
    );
    drop(c);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Heartbeat gaps of the leader, seen on the group, while `abuse` runs.
fn heartbeat_gaps_during(c: &Cluster, leader: u16, abuse: impl FnOnce()) -> f64 {
    let sniff = sniffer(group_of(c));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let watcher = std::thread::spawn(move || {
        let mut buf = [0u8; 256];
        let mut last: Option<Instant> = None;
        let mut worst: f64 = 0.0;
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok(n) = sniff.recv(&mut buf) {
                if let Ok(b) = wire::decode_any(&buf[..n], None, 256) {
                    let lead = b
                        .entries
                        .iter()
                        .any(|e| matches!(e.msg.body, Body::Lead { .. }));
                    if b.sender == leader && lead {
                        if let Some(p) = last {
                            worst = worst.max(p.elapsed().as_secs_f64() * 1e3);
                        }
                        last = Some(Instant::now());
                    }
                }
            }
        }
        worst
    });
    abuse();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    watcher.join().unwrap()
}

/// SPEC 10: an over-long request, a client that never sends, 1,000 clients at once and a
/// watcher that stops reading all leave the daemon answering others and heartbeating.
#[test]
fn control_socket_survives_abuse() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: raising this process's own file limit for the 1,000 connections.
    unsafe {
        let lim = libc::rlimit {
            rlim_cur: 4096,
            rlim_max: 4096,
        };
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    let c = Cluster::start_with(Mode::Multicast, 3, "", &[]);
    let (l, _) = c.agreement(Duration::from_secs(5));
    let answers = |c: &Cluster| c.status(l).is_some();
    let worst = heartbeat_gaps_during(&c, l, || {
        // Over-long request.
        let long = "x".repeat(64 * 1024);
        assert!(
            c.request(l, &long)
                .unwrap_or_default()
                .contains("longer than 1024")
        );
        // 1,000 clients that connect and never send.
        let idle: Vec<UnixStream> = (0..1000)
            .filter_map(|_| UnixStream::connect(c.sock(l)).ok())
            .collect();
        assert!(idle.len() >= 64);
        assert!(answers(&c), "answering with 1,000 idle clients connected");
        // A watcher that stops reading, while the term changes again and again.
        let mut w = UnixStream::connect(c.sock(l)).unwrap();
        w.write_all(b"watch\n").unwrap();
        // Every read bounded: a connection the daemon closes (a client idle while a
        // thousand others wait may be evicted) must end a read, not spin on EOF (a run
        // once spun for 775 s until a write hit the reset).
        let connect = |id: u16| {
            let s = UnixStream::connect(c.sock(id)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            BufReader::new(s)
        };
        let mut ctl = connect(l);
        let mut line = String::new();
        let f = if l == 1 { 2 } else { 1 };
        let mut fctl = connect(f);
        // Until the watcher is dropped, bounded by time rather than by a count of
        // rounds: a loaded machine completes fewer rounds per request (15,000 requests
        // once ended before the watcher's buffer filled).
        let deadline = Instant::now() + common::slacked(Duration::from_secs(60));
        let mut i = 0u64;
        while Instant::now() < deadline {
            i += 1;
            fctl.get_mut().write_all(b"elect\n").unwrap();
            line.clear();
            assert!(
                fctl.read_line(&mut line).unwrap() > 0,
                "server {f} closed a connection that asks for rounds"
            );
            std::thread::sleep(Duration::from_millis(1));
            if i % 100 == 99 {
                if ctl.get_mut().write_all(b"metrics\n").is_err() {
                    // Evicted while idle: ask again on a new connection.
                    ctl = connect(l);
                    continue;
                }
                let mut watchers = None;
                loop {
                    line.clear();
                    if ctl.read_line(&mut line).unwrap_or(0) == 0 {
                        // Evicted (EOF, reset or no answer within the timeout).
                        ctl = connect(l);
                        break;
                    }
                    if let Some(v) = line.strip_prefix("electd_control_watchers ") {
                        watchers = v.trim().parse::<u64>().ok();
                    }
                    if line.trim_end() == "# EOF" {
                        break;
                    }
                }
                if watchers == Some(0) {
                    break;
                }
            }
        }
        assert!(answers(&c), "answering after the slow watcher");
        drop(idle);
        drop(w);
    });
    let text = c.request(l, "metrics").unwrap_or_default();
    let dropped_clients: u64 = text
        .lines()
        .find(|x| x.starts_with("electd_control_dropped_total"))
        .and_then(|x| x.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(
        dropped_clients >= 900,
        "idle clients evicted and the slow watcher dropped: {dropped_clients}"
    );
    assert!(
        c.log(l).contains("is not reading its answers"),
        "the slow watcher was dropped"
    );
    eprintln!("worst heartbeat gap under abuse: {worst:.1} ms");
    // HBT + 50 ms, the 50 ms times the slack factor for a loaded machine.
    let bound = 100.0 + 50.0 * slack();
    assert!(
        worst < bound,
        "heartbeats kept their 100 ms pace: worst gap {worst:.1} ms (bound {bound:.0} ms)"
    );
    // Still one leader, and the abused daemon answers. Which server leads is not
    // asserted: every `elect` opens a round in which the sitting leader is re-elected
    // only if its claim arrives within the RTT, and a loaded machine (two suites on two
    // cores) once let another server win one of those thousands of rounds, as designed.
    let (now, term) = c.agreement(Duration::from_secs(5));
    let v = c.status(l).unwrap();
    let role = v.get("role").and_then(Value::as_str).unwrap_or("?");
    assert_eq!(role == "leader", now == l, "{v:?}");
    eprintln!("after abuse: server {now} leads term {term} (server {l} led before)");
}

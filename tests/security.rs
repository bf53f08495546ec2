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
                acks: electd::wire::PeerSet::EMPTY,
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

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

fn exited(pid: u32) -> bool {
    let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    st.is_empty()
        || st
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
}

/// Issue 25 review (cf80a7a): control clients that pass descriptors behind lines they
/// never end cannot fill the daemon's descriptor table. With the soft RLIMIT_NOFILE a
/// systemd service gets by default (1024), 64 clients each passing 4 batches of 4 used
/// to park 1024 descriptors; the next state write (a vote, once the leader is killed)
/// failed with EMFILE and the daemon exited. Now a batch of more than 2 is closed at
/// once, a second batch drops the client, and the daemon parks at most MAX_PARKED.
#[test]
fn passed_descriptors_cannot_exhaust_the_daemons_descriptor_table() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut o = common::Opts::new(Mode::Unicast, 3);
    o.hbt_ms = 100;
    o.rtt_ms = 20;
    let mut c = Cluster::build(&o);
    let (leader, term) = c.agreement(o.failover_bound() + Duration::from_secs(1));
    let victim = (1..=3u16).find(|&i| i != leader).unwrap();
    let d = c.child(victim).id();
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prlimit(2) on a daemon this test started; reads then sets its soft limit.
    unsafe {
        assert_eq!(
            libc::prlimit(d as i32, libc::RLIMIT_NOFILE, std::ptr::null(), &mut lim),
            0
        );
        lim.rlim_cur = 1024;
        assert_eq!(
            libc::prlimit(d as i32, libc::RLIMIT_NOFILE, &lim, std::ptr::null_mut()),
            0
        );
    }
    let before = open_fds(d);
    let t = electd::supervise::StopTimers::create().unwrap();
    let (two, four) = ([t.fd(); 2], [t.fd(); 4]);
    let mut conns = Vec::new();
    for i in 0..electd::control::MAX_CLIENTS {
        let Ok(mut s) = UnixStream::connect(c.sock(victim)) else {
            break;
        };
        s.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
        // One byte of an unfinished line per sendmsg, each a read of its own for the
        // daemon (a read ends with the message that carried descriptors): most
        // clients pass batches of 4, one in 8 batches of 2 (the most a request may
        // bring). Before the fix these parked 56 x 16 + 8 x 8 = 960.
        let fds: &[i32] = if i % 8 == 7 { &two } else { &four };
        for _ in 0..4 {
            if electd::supervise::send_with_fds(&mut s, b"s", fds).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        conns.push(s);
    }
    let full = eventually(Duration::from_secs(2), || open_fds(d) >= 1000);
    let held = open_fds(d);
    eprintln!(
        "{} clients; the daemon holds {held} descriptors ({before} before)",
        conns.len()
    );
    // Keep the clients from the idle timeout: a byte (no descriptors) every 2 s.
    let keep = |conns: &mut Vec<UnixStream>| {
        for s in conns.iter_mut() {
            let _ = s.write_all(b"s");
        }
    };
    // A new term: the leader is killed, the two left elect (the victim votes, and a
    // vote is written to the state file before it is sent).
    c.kill(leader);
    let t0 = Instant::now();
    let mut last_keep = Instant::now();
    let mut gone = None;
    while t0.elapsed() < Duration::from_secs(6) {
        if last_keep.elapsed() >= Duration::from_secs(2) {
            keep(&mut conns);
            last_keep = Instant::now();
        }
        if exited(d) {
            gone = Some(t0.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(conns);
    let log = c.log(victim);
    let tail = log.lines().rev().take(15).collect::<Vec<_>>();
    assert!(
        gone.is_none(),
        "server {victim} (follower of term {term}) exited {gone:?} after the leader was killed, its descriptor table filled by {held} descriptors parked by control clients:\n{tail:#?}"
    );
    // Its sockets to the 64 clients, and at most MAX_PARKED passed descriptors.
    let bound = before + electd::control::MAX_CLIENTS + electd::control::MAX_PARKED + 16;
    assert!(
        !full && held <= bound,
        "the daemon held {held} descriptors ({before} before, bound {bound})"
    );
    let refused = c
        .request(victim, "metrics")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("electd_control_passed_refused_total "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    assert!(refused >= 64, "refusals counted: {refused}");
}

/// A TCP connection to `l` whose peer never reads, with SO_LINGER of `secs` and its
/// send buffer full: the last close of `tcp` blocks in close(2) for up to `secs`
/// seconds, O_NONBLOCK or not. Returns (tcp, the peer), the peer kept open by the
/// caller for as long as the close should block.
fn lingering_tcp(
    l: &std::net::TcpListener,
    secs: i32,
) -> (std::net::TcpStream, std::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let tcp = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (peer, _) = l.accept().unwrap(); // never read
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: secs,
    };
    // SAFETY: setsockopt(SO_LINGER) on our own socket with a valid struct.
    let r = unsafe {
        libc::setsockopt(
            tcp.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as u32,
        )
    };
    assert_eq!(r, 0);
    tcp.set_nonblocking(true).unwrap();
    let chunk = vec![0u8; 65536];
    let mut w = &tcp;
    for _ in 0..1000 {
        if w.write(&chunk).is_err() {
            break;
        }
    }
    (tcp, peer)
}

/// A control client can pass any descriptor. The last close of a TCP socket with
/// SO_LINGER and unsent data (its peer does not read) blocks in close(2) for the linger
/// time, O_NONBLOCK or not; the daemon used to do it on its event loop (review
/// af0f3d4: the leader stalled 5 s and the cluster moved to a new term; before
/// runtimer too, inside read(2)). Now every descriptor it does not keep is closed on
/// its closer thread: the leader's heartbeats keep their pace and its term stays.
#[test]
fn a_passed_lingering_socket_cannot_block_the_event_loop() {
    use std::os::fd::AsRawFd;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::start_with(Mode::Multicast, 3, "", &[]);
    let (leader, term) = c.agreement(Duration::from_secs(5));
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut answers = Vec::new();
    let mut took = Duration::ZERO;
    let worst = heartbeat_gaps_during(&c, leader, || {
        // Twice: with a line (closed with the refusal) and behind an unfinished line
        // the client then leaves (closed when the client is freed).
        for unfinished in [false, true] {
            let (tcp, peer) = lingering_tcp(&l, 3);
            let mut s = UnixStream::connect(c.sock(leader)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            electd::supervise::send_with_fds(&mut s, b"status", &[tcp.as_raw_fd()]).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            // Ours closed first: the daemon's copy is the last one.
            drop(tcp);
            std::thread::sleep(Duration::from_millis(50));
            let t0 = Instant::now();
            if unfinished {
                drop(s);
                answers.push(c.request(leader, "status").unwrap_or_default());
            } else {
                s.write_all(b"\n").unwrap();
                let mut a = String::new();
                let _ = BufReader::new(&s).read_line(&mut a);
                answers.push(a);
            }
            took = took.max(t0.elapsed());
            // Heartbeats are watched for a while after the close.
            std::thread::sleep(Duration::from_millis(1000));
            drop(peer);
        }
    });
    let after = c.agreement(Duration::from_secs(5));
    eprintln!(
        "answers {answers:?} within {took:?}; worst heartbeat gap {worst:.1} ms; term {term} -> {after:?}"
    );
    let bound = 100.0 + 50.0 * slack();
    assert!(
        took < Duration::from_secs(1) && worst < bound,
        "the event loop blocked: answers after {took:?}, worst heartbeat gap {worst:.1} ms (bound {bound:.0} ms)\n{}",
        c.log(leader)
            .lines()
            .rev()
            .take(10)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(after, (leader, term), "the leader kept its seat and term");
    assert!(
        answers[0].contains("descriptors may be passed only with"),
        "{answers:?}"
    );
    assert!(answers[1].contains("\"role\""), "{answers:?}");
}

/// The closer's full channel, end to end (control/closer.rs): while the closer thread
/// is stuck in a lingering close, the batches of descriptors the daemon refuses find
/// its channel (16 batches) full and wait in a list the loop retries at each wakeup;
/// from CLOSE_BACKLOG descriptors waiting, the daemon reads no control client. Phase 1
/// stays under that bound, so once the close returns only the loop's retry can hand
/// over the batches left waiting: every one of them must be closed (the daemon's
/// descriptors back to where they were). Phase 2 reaches it: the clients after the
/// pause are not read while the closer is stuck, and get their answers once it catches
/// up. In both the leader keeps its pace and its term.
///
/// Nothing here races the machine's speed. The close stays stuck until the test
/// releases it: dropping the peer, whose unread data makes it reset the connection,
/// ends the lingering close at once (the linger only bounds it). And each client's
/// answer is read before the next client connects, so the daemon reads one client at a
/// time and the pause begins at the same client however its wakeups fall. (Sent as a
/// burst, phase 2's 40 clients were all read before the pause only when the daemon
/// read the last of them in one wakeup; on a loaded machine it paused at the 33rd,
/// whose answer then came only when a 3 s linger ran out, and the precondition failed
/// with 69 descriptors.)
#[test]
fn a_stuck_closer_with_a_full_channel_loses_no_descriptor_and_no_heartbeat() {
    use electd::control::closer::CLOSE_BACKLOG;
    use std::os::fd::AsRawFd;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::start_with(Mode::Multicast, 3, "", &[]);
    let (leader, term) = c.agreement(Duration::from_secs(5));
    let pid = c.child(leader).id();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (pr, pw) = std::io::pipe().unwrap();
    let two = [pr.as_raw_fd(), pw.as_raw_fd()];
    // Only a bound: the test releases the close long before (drop(peer)).
    let linger_s = 120;
    // An answer the daemon owes comes at once; this only bounds a read that would hang.
    let answer_within = Duration::from_secs(10);
    // A batch of 2 with a whole line: refused, its descriptors handed to the closer.
    let refused_batch = |s: &mut UnixStream| {
        electd::supervise::send_with_fds(s, b"status\n", &two).unwrap();
    };
    let read_answer = |k: &UnixStream| {
        let mut a = String::new();
        let _ = BufReader::new(k).read_line(&mut a);
        a
    };
    let refusal = |a: &str| a.contains("descriptors may be passed only with");
    // Clients read one at a time with the closer stuck: before the k-th, 1 + 2(k - 1)
    // descriptors wait (the stuck socket, 2 per client answered), so the daemon reads
    // exactly the first `under` of them and pauses at the next.
    let under = CLOSE_BACKLOG / 2;
    assert!(1 + 2 * (under - 1) < CLOSE_BACKLOG && 1 + 2 * under >= CLOSE_BACKLOG);
    let before = open_fds(pid);
    let late_count = |phase: usize| if phase == 2 { 4 } else { 0 };
    let mut report = Vec::new();
    let worst = heartbeat_gaps_during(&c, leader, || {
        // Phase 1: 24 batches, 8 more than the channel holds; 1 + 2 x 24 = 49 waiting at
        // most, under CLOSE_BACKLOG. Phase 2: 32, then 1 + 2 x 32 = 65 wait: the bound.
        for (phase, clients) in [(1usize, 24usize), (2, under)] {
            assert_eq!(1 + 2 * clients >= CLOSE_BACKLOG, phase == 2);
            let (tcp, peer) = lingering_tcp(&l, linger_s);
            let mut s = UnixStream::connect(c.sock(leader)).unwrap();
            s.set_read_timeout(Some(answer_within)).unwrap();
            electd::supervise::send_with_fds(&mut s, b"status", &[tcp.as_raw_fd()]).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            drop(tcp); // the daemon's copy is the last: its close lingers
            s.write_all(b"\n").unwrap();
            let a = read_answer(&s);
            assert!(refusal(&a), "{a}");
            // The closer is now in close(2), until `peer` goes.
            let t0 = Instant::now();
            let mut conns = Vec::new();
            let mut answered = 0;
            let mut other = None;
            for _ in 0..clients {
                let mut k = UnixStream::connect(c.sock(leader)).unwrap();
                k.set_read_timeout(Some(answer_within)).unwrap();
                refused_batch(&mut k);
                // Answered before the next client connects: read alone.
                let a = read_answer(&k);
                if refusal(&a) {
                    answered += 1;
                } else if other.is_none() {
                    other = Some(a);
                }
                conns.push(k);
            }
            let all_answered = t0.elapsed();
            // The closer is still in the lingering close: none of these batches is
            // closed yet (each client's connection is open too). Every answer above came
            // while it was stuck.
            let held = open_fds(pid);
            assert!(
                held >= before + 3 * clients,
                "phase {phase}: the closer was not stuck ({held} descriptors, {before} before, {clients} clients): the test proves nothing"
            );
            // Phase 2: now at CLOSE_BACKLOG, the daemon reads no client until the
            // closer catches up; then it reads and answers them.
            let mut late = Vec::new();
            if phase == 2 {
                for _ in 0..4 {
                    let mut k = UnixStream::connect(c.sock(leader)).unwrap();
                    refused_batch(&mut k);
                    late.push(k);
                }
                for k in &late {
                    k.set_read_timeout(Some(Duration::from_millis(300)))
                        .unwrap();
                    assert_eq!(
                        read_answer(k),
                        "",
                        "a client was read while {held} descriptors waited to be closed"
                    );
                }
            }
            // The release: the peer's reset ends the lingering close.
            drop(peer);
            let released = Instant::now();
            let mut late_answered = 0;
            for k in &late {
                k.set_read_timeout(Some(answer_within)).unwrap();
                if refusal(&read_answer(k)) {
                    late_answered += 1;
                }
            }
            let late_after = released.elapsed();
            drop(conns);
            drop(late);
            drop(s);
            // Every descriptor handed to the closer is closed once it is free: the
            // batches left waiting go only through the loop's retry in phase 1.
            let closed = eventually(Duration::from_secs(10), || open_fds(pid) <= before);
            report.push(format!(
                "phase {phase}: {answered} of {clients} answered within {all_answered:?} ({held} descriptors held then), {late_answered} late clients answered {late_after:?} after the release; descriptors {before} before, {} after (closed: {closed}, {:?} after the release)",
                open_fds(pid),
                released.elapsed()
            ));
            assert!(
                answered == clients && closed && late_answered == late_count(phase),
                "phase {phase}: {answered} of {clients} answered (another answer: {other:?}), the daemon holds {} descriptors, {before} before: {report:?}",
                open_fds(pid)
            );
        }
    });
    let after = c.agreement(Duration::from_secs(5));
    eprintln!("{report:?}; worst heartbeat gap {worst:.1} ms; term {term} -> {after:?}");
    let bound = 100.0 + 50.0 * slack();
    assert!(
        worst < bound,
        "worst heartbeat gap {worst:.1} ms (bound {bound:.0} ms): {report:?}"
    );
    assert_eq!(after, (leader, term), "the leader kept its seat and term");
}

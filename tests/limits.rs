//! Limits (SPEC sections 4, 8 and 10; issue 10 items 6 and 7), on real daemons: no single
//! datagram wedges the cluster, a long-timers reload does not leave restarts quiet for
//! ever, and local clients cannot stall the leader's heartbeats.
//!
//! Every latency bound is multiplied by `common::slack()` (ELECTD_TEST_SLACK, default
//! 2.0); each test says how far below the regression it guards against the bound stays.

mod common;

use common::{Cluster, LeadTap, Mode, Opts, SERIAL, slacked, wait_for};
use electd::wire::{self, Body, Message};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

fn fingerprint(c: &Cluster) -> u32 {
    electd::config::Config::load(&c.conf, Some(1))
        .unwrap()
        .fingerprint()
}

fn internet_checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for ch in b.chunks(2) {
        let w = u16::from_be_bytes([ch[0], *ch.get(1).unwrap_or(&0)]);
        sum += u32::from(w);
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Sends one UDP datagram on loopback with a forged source address and port (a raw
/// socket, root only): in unicast mode a datagram must come from the sender's
/// configured address, and that port is the running server's own.
fn spoof_udp(from: SocketAddrV4, to: SocketAddrV4, payload: &[u8]) {
    let mut pkt = Vec::with_capacity(28 + payload.len());
    let total = (28 + payload.len()) as u16;
    // IPv4 header: version 4, IHL 5, total length, TTL 64, protocol UDP.
    pkt.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    pkt[2..4].copy_from_slice(&total.to_be_bytes());
    pkt.extend_from_slice(&from.ip().octets());
    pkt.extend_from_slice(&to.ip().octets());
    let ck = internet_checksum(&pkt[..20]);
    pkt[10..12].copy_from_slice(&ck.to_be_bytes());
    // UDP header; checksum 0 (none) is valid over IPv4.
    pkt.extend_from_slice(&from.port().to_be_bytes());
    pkt.extend_from_slice(&to.port().to_be_bytes());
    pkt.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    pkt.extend_from_slice(&[0, 0]);
    pkt.extend_from_slice(payload);
    // SAFETY: a raw socket we own, a sockaddr_in on the stack, a buffer we own; closed
    // before return.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW);
        assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(to.ip().octets()),
            },
            sin_zero: [0; 8],
        };
        let n = libc::sendto(
            fd,
            pkt.as_ptr().cast(),
            pkt.len(),
            0,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        assert_eq!(n as usize, pkt.len(), "raw sendto: {err}");
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn refused_by_limits(c: &Cluster) -> u64 {
    c.up()
        .into_iter()
        .map(|id| {
            ["term_limit", "hold_limit"]
                .iter()
                .map(|r| {
                    c.metric(
                        id,
                        &format!("electd_datagrams_dropped_total{{reason=\"{r}\"}}"),
                    )
                })
                .sum::<u64>()
        })
        .sum()
}

/// Issue 10 item 6 (SPEC 8): one well-formed LEAD from a configured server, with the
/// right fingerprint, term 2^64-2 and hold 2^32-1 ms, sent (from that server's own
/// address) to every server of a unicast cluster. It is refused and counted, the
/// cluster keeps its leader and term, and a leader crash still fails over within the
/// normal bound. Before the fix the same datagram left the cluster with no leader at
/// all: the failover wait (about 2 s with the default slack) would run out.
#[test]
fn one_datagram_cannot_wedge_the_cluster() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !is_root() {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root");
        eprintln!("SKIPPED: forging a source address needs a raw socket (root)");
        return;
    }
    let o = Opts::new(Mode::Unicast, 3);
    let mut c = Cluster::build(&o);
    let bound = o.failover_bound();
    let (leader, term) = c.agreement(bound);
    let fp = fingerprint(&c);
    let addr = |id: u16| SocketAddrV4::new(Ipv4Addr::LOCALHOST, c.ports[usize::from(id) - 1]);
    let lead = |sender: u16, term: u64, hold_ms: u32| Message {
        sender,
        fingerprint: fp,
        term,
        body: Body::Lead {
            seq: 1,
            hold_ms,
            resign: false,
            successor: 0,
            unfit: false,
            alive: electd::wire::PeerSet::EMPTY,
            acks: electd::wire::PeerSet::EMPTY,
        },
    };
    let before = refused_by_limits(&c);
    let mut sent = 0;
    // The datagram, then each half of it alone: a sane term with the huge hold,
    // and a term at 2^62 with a sane hold. From every server (the leader's id
    // included), to every other server.
    for m in [
        |s| (s, u64::MAX - 1, u32::MAX),
        |s| (s, 0, u32::MAX),
        |s| (s, 1u64 << 62, 300),
    ] {
        for s in 1..=3u16 {
            let (s, t, h) = m(s);
            let t = if t == 0 { term + 1 } else { t };
            let bytes = wire::encode_to_vec(&lead(s, t, h));
            for r in (1..=3).filter(|&r| r != s) {
                spoof_udp(addr(s), addr(r), &bytes);
                sent += 1;
            }
        }
    }
    let counted = common::eventually(Duration::from_secs(1), || {
        refused_by_limits(&c) >= before + sent
    });
    assert!(
        counted,
        "{sent} wedge datagrams counted as dropped (term_limit, hold_limit): {} -> {}",
        before,
        refused_by_limits(&c)
    );
    assert_eq!(
        c.agreement(bound),
        (leader, term),
        "the wedge datagrams moved the leader or the term"
    );
    // The cluster can still elect: crash the leader.
    let t0 = Instant::now();
    c.kill(leader);
    let (next, took) = c.new_leader_since(leader, term, t0, bound);
    eprintln!(
        "after the wedge datagrams: leader {leader} crashed, {next} leads after {took:?} (bound {bound:?} x slack)"
    );
}

fn set_heartbeat(c: &Cluster, hbt: &str) {
    let text = std::fs::read_to_string(&c.conf).unwrap();
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("heartbeat ") {
                format!("heartbeat {hbt}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(&c.conf, text).unwrap();
}

/// SIGHUP to every server and a bounded wait until each has logged the reload.
fn reload_all(c: &Cluster, hbt_log: &str) {
    for id in c.up() {
        let before = c.log(id).matches("configuration reloaded").count();
        common::signal(c.child(id), libc::SIGHUP);
        wait_for(
            &format!("server {id} to reload"),
            Duration::from_secs(2),
            || {
                let log = c.log(id);
                (log.matches("configuration reloaded").count() > before
                    && log
                        .lines()
                        .rev()
                        .find(|l| l.contains("configuration reloaded"))
                        .is_some_and(|l| l.contains(hbt_log)))
                .then_some(())
            },
        );
    }
}

/// Issue 10 item 6 (SPEC 4, the hold promise): at heartbeat 100 ms, a reload of every
/// server to `heartbeat 1s` for 5 s and back, then 4 s later a full restart elects
/// within the normal bound (K*HBT quiet + 5*HBT + 8*RTT = 0.96 s, times the slack):
/// the 3 s hold promised during the long timers has run out and must not keep the
/// restarted servers quiet. Before the fix this took 3.1 s (the bound with the default
/// slack is 1.9 s).
#[test]
fn restart_after_a_long_timers_reload_elects_in_the_normal_bound() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let o = Opts::new(Mode::Unicast, 3);
    let mut c = Cluster::build(&o);
    let bound = o.failover_bound();
    c.agreement(bound);
    set_heartbeat(&c, "1s");
    reload_all(&c, "heartbeat 1s");
    // Long timers for a while: every LEAD now carries a 3 s hold.
    std::thread::sleep(Duration::from_secs(5));
    let (_, term) = c.agreement(Duration::from_secs(9));
    set_heartbeat(&c, "100ms");
    reload_all(&c, "heartbeat 100ms");
    // Past the 3 s hold of the last long LEAD, with margin.
    std::thread::sleep(Duration::from_secs(4));
    for id in 1..=3 {
        c.kill(id);
    }
    let t0 = Instant::now();
    for id in 1..=3 {
        c.spawn(id);
    }
    let limit = slacked(bound);
    let (leader, t) = c.agreement(bound);
    let took = t0.elapsed();
    eprintln!(
        "full restart after a long-timers reload: leader {leader} term {t} after {took:?} (bound {bound:?} x slack = {limit:?})"
    );
    assert!(t > term, "a new term after the restart");
    assert!(took <= limit, "elected after {took:?}, bound {limit:?}");
}

/// One control client that writes `n` requests without reading first (a writer thread)
/// while reading answers (this thread) until the daemon closes or all are answered.
/// Lowers the calling thread's CPU priority (nice 10). The 128 threads of the
/// pipelining clients parse millions of answer lines on 2 cores; at equal priority the
/// kernel could leave the daemons and the LEAD tap's thread (which timestamps each LEAD
/// when it runs) waiting behind them, and a gap would measure the scheduler, not the
/// daemon's bounded work per wakeup (a clean CI run once saw 145 ms against 100 ms in
/// every other run). The daemon's loop, the thing under test, is not helped by it.
fn lower_priority() {
    // SAFETY: gettid and setpriority on this thread have no memory preconditions.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
}

fn pipelining_client(path: std::path::PathBuf, n: usize) -> usize {
    lower_priority();
    let Ok(s) = UnixStream::connect(&path) else {
        return 0;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        lower_priority();
        let batch: String = (0..n)
            .map(|i| if i % 2 == 0 { "metrics\n" } else { "status\n" })
            .collect();
        let _ = w.write_all(batch.as_bytes());
    });
    let mut r = BufReader::with_capacity(64 * 1024, s);
    let mut answers = 0;
    let mut line = String::new();
    while answers < n {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if line.starts_with('{') || line.trim_end() == "# EOF" {
                    answers += 1;
                }
            }
        }
    }
    let _ = writer.join();
    answers
}

/// A cluster of 4 configured servers, 3 running; server 4's address is `tap`.
fn tapped_cluster() -> (Cluster, Opts, UdpSocket) {
    let tap = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut o = Opts::new(Mode::Unicast, 4);
    o.run = 3;
    o.ports = vec![(4, tap.local_addr().unwrap().port())];
    (Cluster::build(&o), o, tap)
}

fn gauge(c: &Cluster, id: u16, name: &str) -> Option<u64> {
    let text = c.request(id, "metrics")?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} "))?.trim().parse().ok())
}

/// Issue 10 item 7 (SPEC 10, "bounded work per client per wakeup"): 64 clients, each
/// pipelining 2,000 `metrics` and `status` requests to the leader's socket, leave its
/// heartbeat gaps within HBT + 10 %. The bound carries the slack for a loaded machine:
/// HBT + (10 % of HBT + 10 ms) x slack = 140 ms at HBT 100 ms and the default slack,
/// well below the 241 ms that 32 such clients caused before the fix (on main before
/// the fix, these 64 clients stalled the leader for ~900 ms: it lost its lease).
#[test]
fn pipelining_clients_do_not_stall_heartbeats() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (c, o, tap) = tapped_cluster();
    let (leader, term) = c.agreement(o.failover_bound());
    let served_before = c.metric(leader, "electd_control_requests_total");
    let hbt = Duration::from_millis(o.hbt_ms);
    let tapped = LeadTap::start(tap, leader);
    let t0 = Instant::now();
    let clients: Vec<_> = (0..64)
        .map(|_| {
            let p = c.sock(leader);
            std::thread::spawn(move || pipelining_client(p, 2000))
        })
        .collect();
    let answered: usize = clients.into_iter().map(|h| h.join().unwrap()).sum();
    let took = t0.elapsed();
    let (worst, leads) = tapped.finish();
    let served = c
        .metric(leader, "electd_control_requests_total")
        .saturating_sub(served_before);
    let bound = common::gap_bound(hbt);
    eprintln!(
        "64 pipelining clients: {answered} answers read, {served} requests served in {took:?}; {leads} LEADs, worst gap {worst:?} (bound {bound:?})"
    );
    // The load was real, and the tap saw the heartbeats all along.
    assert!(served >= 20_000, "only {served} requests served");
    common::assert_kept_pace(
        &c,
        &o,
        (leader, term),
        (worst, leads),
        took,
        "pipelining clients",
    );
}

/// SPEC 10: a watcher that stops reading is dropped and its slot freed, also when it
/// pipelined requests whose answers refill a buffer already marked for closing (issue
/// 10 item 7): the clients gauge goes back down. Before the fix the slot was kept for
/// ever, and this wait (5 s x slack) runs out.
#[test]
fn a_watcher_that_stops_reading_is_dropped() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let o = Opts::new(Mode::Unicast, 3);
    let c = Cluster::build(&o);
    let (leader, _) = c.agreement(o.failover_bound());
    let f = if leader == 1 { 2 } else { 1 };
    // The metrics request's own connection is counted: the baseline includes it.
    let base_clients = gauge(&c, leader, "electd_control_clients").expect("clients gauge");
    let base_watchers = gauge(&c, leader, "electd_control_watchers").expect("watchers gauge");
    // One watcher that sends nothing more, and one that keeps pipelining `metrics` in
    // small batches, never reading: its answers first fill the kernel's socket buffer,
    // then its 64 KiB queue, and the answers after the drop would refill the queue.
    let quiet = UnixStream::connect(c.sock(leader)).unwrap();
    (&quiet).write_all(b"watch\n").unwrap();
    let pipe = UnixStream::connect(c.sock(leader)).unwrap();
    pipe.set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    (&pipe).write_all(b"watch\n").unwrap();
    let mut w = pipe.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let batch = "metrics\n".repeat(15);
        for _ in 0..60 {
            // Once dropped, writes fail or time out: that is the point.
            if w.write_all(batch.as_bytes()).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let stuck = [quiet, pipe];
    wait_for("the watchers to register", Duration::from_secs(2), || {
        (gauge(&c, leader, "electd_control_watchers")? > base_watchers).then_some(())
    });
    // Changes for the watchers to hear: each `elect` moves the term.
    let mut ctl = BufReader::new(UnixStream::connect(c.sock(f)).unwrap());
    // How soon depends on how fast changes come (each round moves the term; the
    // watchers' buffers must fill first), not on a protocol bound: since ACKs go to the
    // leader only this takes ~5 s here (a CI run needed more), so allow 15 s.
    let freed = common::eventually(Duration::from_secs(15), || {
        let mut line = String::new();
        let _ = ctl.get_mut().write_all(b"elect\n");
        let _ = ctl.read_line(&mut line);
        std::thread::sleep(Duration::from_millis(20));
        gauge(&c, leader, "electd_control_clients").is_some_and(|n| n <= base_clients + 1)
            && gauge(&c, leader, "electd_control_watchers").is_some_and(|n| n <= base_watchers)
    });
    let clients = gauge(&c, leader, "electd_control_clients");
    let watchers = gauge(&c, leader, "electd_control_watchers");
    // The test's `elect` connection to `f` is not on the leader; the stuck ones are.
    assert!(
        freed,
        "slots of watchers that stopped reading were not freed: clients {clients:?} (base {base_clients}), watchers {watchers:?} (base {base_watchers})"
    );
    writer.join().unwrap();
    // Their sockets were closed by the daemon: a read ends (after what was queued), or
    // is reset when the daemon closed with requests of ours still unread (which a
    // client that pipelines without reading must expect). A timeout means still open.
    for mut w in stuck {
        w.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut sink = Vec::new();
        let r = w.read_to_end(&mut sink);
        assert!(
            r.is_ok()
                || r.as_ref()
                    .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
            "the daemon did not close the watcher: {r:?}"
        );
    }
}

/// SPEC 4 (issue 10 item 8): a second daemon on a running daemon's state file refuses
/// to start, naming the file and the holder, and the first one leads on untouched.
/// (Another socket and port, so that nothing but the state file is shared.)
#[test]
fn a_second_daemon_on_the_same_state_file_refuses_to_start() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let o = Opts::new(Mode::Unicast, 1);
    let c = Cluster::build(&o);
    let (leader, term) = c.agreement(o.failover_bound());
    let state = c.dir.join("1.state");
    let text = std::fs::read_to_string(&c.conf).unwrap();
    let other = c.dir.join("other.conf");
    let port = c.ports[0];
    std::fs::write(
        &other,
        text.replace(
            &format!(":{port} "),
            &format!(":{} ", common::free_udp_port()),
        )
        .replace("{id}.sock", "other-{id}.sock"),
    )
    .unwrap();
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_electd"))
        .arg("--config")
        .arg(&other)
        .args(["--id", "1"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = c.child(1).id();
    // Bounded: a second daemon that starts is killed after the wait, and fails the test.
    let out = common::output_within(second, Duration::from_secs(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the second daemon refused: {err}"
    );
    assert!(
        err.contains(state.to_str().unwrap()) && err.contains(&pid.to_string()),
        "the refusal names {} and pid {pid}: {err}",
        state.display()
    );
    assert_eq!(c.agreement(o.failover_bound()), (leader, term));
}

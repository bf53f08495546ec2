//! Reload at its boundaries (SIGHUP and `electctl reload`, README "Signals", electd(8),
//! SPEC sections 9, 11 and 12), on real three-server clusters on 127.0.0.1 with
//! `watch` and `electctl run` clients connected: a reload that does not touch the
//! leadership must leave the leadership, the term, the lease, the watch stream and the
//! supervised command exactly as they were; a refused reload must change nothing at
//! all and say why in the log, in `status` and in `electctl reload`'s exit status.
//!
//! Every server gets a config file of its own from the start (`Cluster::set_server_text`
//! before its first spawn), so one server can be reloaded to a file the others do not
//! read. Ports come from `free_udp_ports` (ephemeral, held while picked), as in every
//! other cluster test; every wait is bounded; every process is started here and ended
//! through its own handle (`Cluster`, `Supervisors`, `Watch`).

mod common;

use common::{Cluster, Mode, Opts, SERIAL, Supervisors, spans, supervise, wait_for};
use common::{ctl_output as run_ctl, electctl_at as electctl};
use electd::json::{self, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Not a test: the wrapped command, when this binary is re-executed by `electctl run`.
#[test]
fn cmd_helper() {
    common::cmd_helper();
}

// ----- helpers -------------------------------------------------------------------------

/// A three-server unicast cluster at heartbeat 100 ms, rtt 20 ms, K 3, each server
/// reading its own copy of the file; not yet agreed.
fn cluster3() -> Cluster {
    let mut o = Opts::new(Mode::Unicast, 3);
    o.run = 0;
    let mut c = Cluster::build(&o);
    let base = std::fs::read_to_string(&c.conf).unwrap();
    for id in 1..=3 {
        c.set_server_text(id, &base);
    }
    for id in 1..=3 {
        c.spawn(id);
    }
    c
}

/// Server `id`'s own file.
fn conf(c: &Cluster, id: u16) -> PathBuf {
    c.dir.join(format!("electd-{id}.conf"))
}

/// Replaces server `id`'s file atomically (write + rename), so that a SIGHUP never
/// reads half a file.
fn put(c: &Cluster, id: u16, text: &str) {
    let tmp = c.dir.join(format!("electd-{id}.conf.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, conf(c, id)).unwrap();
}

fn text_of(c: &Cluster, id: u16) -> String {
    std::fs::read_to_string(conf(c, id)).unwrap()
}

fn reload(c: &Cluster, id: u16) -> (Option<i32>, String, String) {
    electctl(&c.sock(id), &["reload"])
}

/// (role, leader, term, lease_ms, config_refused) of server `id`.
#[derive(Debug, Clone, PartialEq)]
struct View {
    role: String,
    leader: Option<u64>,
    term: u64,
    lease_ms: Option<u64>,
    refused: Option<String>,
}

fn view(c: &Cluster, id: u16) -> View {
    let v = c
        .status(id)
        .unwrap_or_else(|| panic!("server {id} does not answer status\n{}", c.logs()));
    View {
        role: v
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        leader: v.get("leader").and_then(Value::as_u64),
        term: v.get("term").and_then(Value::as_u64).unwrap_or(0),
        lease_ms: v.get("lease_ms").and_then(Value::as_u64),
        refused: match v.get("config_refused") {
            Some(Value::Str(s)) => Some(s.clone()),
            _ => None,
        },
    }
}

/// A `watch` stream on server `id`'s socket, read by a thread into `lines`; `eof` once
/// the daemon closed it. Dropping it shuts the socket down (the thread then ends).
struct Watch {
    stream: UnixStream,
    lines: Arc<Mutex<Vec<String>>>,
    eof: Arc<Mutex<bool>>,
}

impl Watch {
    fn open(c: &Cluster, id: u16) -> Watch {
        let mut s = UnixStream::connect(c.sock(id)).unwrap();
        s.write_all(b"watch\n").unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let eof = Arc::new(Mutex::new(false));
        let (l2, e2) = (lines.clone(), eof.clone());
        let r = s.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut r = BufReader::new(r);
            loop {
                let mut l = String::new();
                match r.read_line(&mut l) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => l2.lock().unwrap().push(l.trim().to_string()),
                }
            }
            *e2.lock().unwrap() = true;
        });
        let w = Watch {
            stream: s,
            lines,
            eof,
        };
        wait_for("the first watch line", Duration::from_secs(2), || {
            (w.len() > 0).then_some(())
        });
        w
    }

    fn len(&self) -> usize {
        self.lines.lock().unwrap().len()
    }

    fn closed(&self) -> bool {
        *self.eof.lock().unwrap()
    }

    /// (role, leader, term) of every line from index `from` on.
    fn since(&self, from: usize) -> Vec<(String, Option<u64>, u64)> {
        self.lines.lock().unwrap()[from..]
            .iter()
            .map(|l| {
                let v = json::parse(l).unwrap_or_else(|e| panic!("watch line {l:?}: {e:?}"));
                (
                    v.get("role")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    v.get("leader").and_then(Value::as_u64),
                    v.get("term").and_then(Value::as_u64).unwrap_or(0),
                )
            })
            .collect()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// An `electctl watch` process on server `id` (the CLI path), stdout into a file.
fn ctl_watch(c: &Cluster, id: u16) -> (Child, PathBuf) {
    let out = c.dir.join(format!("ctl-watch-{id}.out"));
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_electctl"))
        .arg("--socket")
        .arg(c.sock(id))
        .arg("watch")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (child, out)
}

/// The supervised command running now: (pid, host), once exactly one runs.
fn running(log: &str) -> Option<(u32, u16)> {
    let now = common::boottime_ns();
    let live: Vec<_> = spans(log)
        .into_iter()
        .filter(|s| !s.stopped && s.sigterm.is_none() && now.saturating_sub(s.end) < 200_000_000)
        .collect();
    match live[..] {
        [s] => Some((s.pid, s.host)),
        _ => None,
    }
}

/// Where the supervised commands of cluster `c` stamp their runs (`spans`).
fn cmd_log(c: &Cluster) -> String {
    c.dir.join("cmd.log").to_str().unwrap().to_string()
}

/// The cluster agreed, every server supervised by `electctl run` (grace 50 ms), the
/// leader's command started: (leader, term, the command's pid).
fn settle(c: &Cluster, log: &str) -> (u16, u64, Supervisors, u32) {
    let (l, term) = c.agreement(Duration::from_secs(5));
    let sups = Supervisors((1..=3).map(|id| supervise(c, id, log)).collect());
    let (pid, host) = wait_for("the leader's command", Duration::from_secs(3), || {
        running(log)
    });
    assert_eq!(host, l, "the command runs on the leader");
    (l, term, sups, pid)
}

/// The leader, the term and the command are exactly as before: one run of the
/// command, never signalled, still stamping; no server saw another term or leader.
fn assert_untouched(c: &Cluster, log: &str, leader: u16, term: u64, pid: u32, what: &str) {
    for id in 1..=3 {
        let v = view(c, id);
        assert_eq!(
            v.leader,
            Some(u64::from(leader)),
            "{what}: server {id} {v:?}"
        );
        assert_eq!(v.term, term, "{what}: server {id} {v:?}\n{}", c.logs());
        if id == leader {
            assert_eq!(v.role, "leader", "{what}: {v:?}");
            assert!(v.lease_ms.is_some_and(|l| l > 0), "{what}: {v:?}");
        } else {
            assert_eq!(v.role, "follower", "{what}: server {id} {v:?}");
        }
    }
    let all = spans(log);
    assert_eq!(
        all.len(),
        1,
        "{what}: the command was stopped or started again: {all:?}\n{}",
        c.logs()
    );
    assert_eq!(all[0].pid, pid, "{what}");
    assert!(all[0].sigterm.is_none(), "{what}: SIGTERM sent: {all:?}");
    let before = all[0].end;
    wait_for("the command still stamping", Duration::from_secs(1), || {
        (spans(log)[0].end > before).then_some(())
    });
}

fn followers(leader: u16) -> Vec<u16> {
    (1..=3).filter(|&i| i != leader).collect()
}

// ----- tests ---------------------------------------------------------------------------

/// A reload that changes only timers, on every server, with a raw `watch` stream, an
/// `electctl watch` and `electctl run` on every server connected. Catches: a reload
/// that stops or restarts the supervised command (the past "a reload silently stopped
/// every processor"), that drops or closes watch clients, that makes a watch stream
/// report a role/leader/term change that did not happen, or that moves the leadership
/// or the term; then the streams must still carry a real change (a yield), which
/// catches a reload that leaves a client registered but deaf.
#[test]
fn timers_reload_keeps_watchers_and_the_supervised_command() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster3();
    let log = cmd_log(&c);
    let (l, term, mut sups, pid) = settle(&c, &log);
    let watches: Vec<Watch> = (1..=3).map(|id| Watch::open(&c, id)).collect();
    let (mut ctlw, ctlw_out) = ctl_watch(&c, l);
    let marks: Vec<usize> = watches.iter().map(Watch::len).collect();

    for (hbt, k) in [("150ms", "4"), ("100ms", "3")] {
        for id in 1..=3 {
            let t = text_of(&c, id)
                .replace("heartbeat 100ms", &format!("heartbeat {hbt}"))
                .replace("heartbeat 150ms", &format!("heartbeat {hbt}"))
                .replace("missed-heartbeats 3", &format!("missed-heartbeats {k}"))
                .replace("missed-heartbeats 4", &format!("missed-heartbeats {k}"));
            put(&c, id, &t);
        }
        // Followers first, the leader last, as the README's rolling advice says.
        for id in followers(l).into_iter().chain([l]) {
            let (code, out, err) = reload(&c, id);
            assert_eq!(code, Some(0), "server {id}: {out}{err}");
            assert!(
                c.log(id)
                    .contains(&format!("configuration reloaded: heartbeat {hbt}")),
                "server {id} applied it before answering"
            );
        }
        std::thread::sleep(Duration::from_millis(600));
        assert_untouched(&c, &log, l, term, pid, &format!("after reload to {hbt}"));
    }
    for (i, w) in watches.iter().enumerate() {
        assert!(!w.closed(), "watch on server {} closed by a reload", i + 1);
        for (role, leader, t) in w.since(marks[i]) {
            assert_eq!(
                (leader, t),
                (Some(u64::from(l)), term),
                "watch on server {} reported a change that did not happen ({role})",
                i + 1
            );
        }
    }
    assert!(
        ctlw.try_wait().unwrap().is_none(),
        "electctl watch exited on a reload"
    );

    // The streams still carry a real change: the leader yields.
    let (code, out, err) = electctl(&c.sock(l), &["yield"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let (l2, _) = c.new_leader_since(l, term, Instant::now(), Duration::from_secs(3));
    for (i, w) in watches.iter().enumerate() {
        wait_for(
            &format!("watch on server {} hears the new leader {l2}", i + 1),
            Duration::from_secs(2),
            || {
                w.since(marks[i])
                    .iter()
                    .any(|x| x.1 == Some(u64::from(l2)))
                    .then_some(())
            },
        );
    }
    wait_for(
        "electctl watch prints the handover",
        Duration::from_secs(2),
        || {
            std::fs::read_to_string(&ctlw_out)
                .unwrap_or_default()
                .lines()
                .any(|x| x.contains(&format!("\"leader\":{l2}")))
                .then_some(())
        },
    );
    // One command at a time through the handover.
    wait_for("the new leader's command", Duration::from_secs(3), || {
        running(&log).filter(|r| r.1 == l2)
    });
    assert!(common::overlaps(&spans(&log), 3_000_000).is_empty());
    sups.stop();
    common::signal(&ctlw, libc::SIGTERM);
    let _ = ctlw.wait();
}

/// Timers changed on the followers only, then on the leader only (a long heartbeat
/// and K on the leader alone, then back), while `run` is active. Catches: a needless
/// election (a follower that times out a leader whose LEADs carry a longer hold, or a
/// leader whose shorter lease lapses), a needless stop of the command, two commands at
/// once, a lease that does not follow the new timers on the leader, and a follower
/// that raises the "hears no other server" alarm against a leader it follows.
#[test]
fn timers_reloaded_on_followers_then_leader_alone_move_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster3();
    let log = cmd_log(&c);
    let (l, term, mut sups, pid) = settle(&c, &log);
    let base = text_of(&c, l);
    let slow = base
        .replace("heartbeat 100ms", "heartbeat 500ms")
        .replace("rtt 20ms", "rtt 40ms")
        .replace("missed-heartbeats 3", "missed-heartbeats 4");

    // Followers alone.
    for f in followers(l) {
        put(&c, f, &slow);
        let (code, out, err) = reload(&c, f);
        assert_eq!(code, Some(0), "{out}{err}");
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert_untouched(
        &c,
        &log,
        l,
        term,
        pid,
        "followers at 500ms, leader at 100ms",
    );
    let lease = view(&c, l).lease_ms.unwrap();
    assert!(lease <= 294, "the leader's lease is still K*HBT: {lease}");

    // Followers back, then the leader alone.
    for f in followers(l) {
        put(&c, f, &base);
        assert_eq!(reload(&c, f).0, Some(0));
    }
    let deaf = |c: &Cluster| -> Vec<usize> {
        followers(l)
            .into_iter()
            .map(|f| c.log(f).matches("hears no other server").count())
            .collect()
    };
    let deaf_before = deaf(&c);
    put(&c, l, &slow);
    let (code, out, err) = reload(&c, l);
    assert_eq!(code, Some(0), "{out}{err}");
    wait_for("the leader's longer lease", Duration::from_secs(2), || {
        view(&c, l).lease_ms.filter(|&m| m > 294)
    });
    std::thread::sleep(Duration::from_millis(2000));
    // The followers hear the leader every 500 ms, as its LEADs' hold (2 s) says: no
    // "hears no other server" alarm from their own 300 ms hold.
    assert_eq!(
        deaf(&c),
        deaf_before,
        "a false hears-nobody alarm on a follower"
    );
    assert_untouched(
        &c,
        &log,
        l,
        term,
        pid,
        "leader at 500ms x4, followers at 100ms x3",
    );

    // And back down on the leader alone: the shorter timers take over without a gap.
    put(&c, l, &base);
    assert_eq!(reload(&c, l).0, Some(0));
    std::thread::sleep(Duration::from_millis(2000));
    assert_untouched(&c, &log, l, term, pid, "leader back at 100ms");
    wait_for(
        "the leader's short lease again",
        Duration::from_secs(3),
        || view(&c, l).lease_ms.filter(|&m| m <= 294),
    );
    for id in 1..=3 {
        assert!(
            !c.log(id).contains("elected leader of term") || id == l,
            "server {id} ran an election:\n{}",
            c.log(id)
        );
    }
    sups.stop();
}

/// Files that must be refused, each sent to the leader (and some to a follower) with
/// `electctl reload` while `watch` and `run` are connected. Catches: a bad file that is
/// applied in part (timers changed alongside a refused change must not run), a refusal
/// without exit 1 and a reason, a `status` that does not show it, and any loss on the
/// way (leadership, term, lease, the command, the watch stream).
#[test]
fn refused_reloads_change_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster3();
    let log = cmd_log(&c);
    let (l, term, mut sups, pid) = settle(&c, &log);
    let w = Watch::open(&c, l);
    let mark = w.len();
    let good = text_of(&c, l);
    let other = followers(l)[0];
    let other_port = c.ports[usize::from(other) - 1];
    let my_port = c.ports[usize::from(l) - 1];
    // Held for the metrics-listen case: the address cannot be bound.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_addr = busy.local_addr().unwrap();
    let key = c.dir.join("key");
    std::fs::write(&key, "0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let slower = |t: &str| t.replace("heartbeat 100ms", "heartbeat 400ms");
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "syntax error",
            good.replace("heartbeat 100ms", "heartbeat fast"),
            "unknown unit 'fast'",
        ),
        (
            "unknown directive",
            good.clone() + "hearbeat 1s\n",
            "unknown directive 'hearbeat'",
        ),
        (
            "this server's id removed",
            slower(&good).replace(&format!("server {l} 127.0.0.1:{my_port} name s{l}\n"), ""),
            "",
        ),
        (
            "another server removed",
            slower(&good).replace(
                &format!("server {other} 127.0.0.1:{other_port} name s{other}\n"),
                "",
            ),
            "server list changed",
        ),
        (
            "a port changed",
            slower(&good).replace(
                &format!("127.0.0.1:{other_port}"),
                &format!("127.0.0.1:{}", common::free_udp_port()),
            ),
            "server list changed",
        ),
        (
            "cluster renamed",
            slower(&good).replacen("cluster test-", "cluster renamed-", 1),
            "cluster name or server list changed",
        ),
        (
            "witness added",
            slower(&good).replace(
                &format!("name s{other}\n"),
                &format!("name s{other} witness\n"),
            ),
            "server list changed",
        ),
        (
            "priority changed",
            slower(&good).replace(
                &format!("name s{other}\n"),
                &format!("name s{other} priority 9\n"),
            ),
            "priority",
        ),
        (
            "transport changed",
            slower(&good).replace(
                "unicast\n",
                "multicast 239.255.7.7:40999 interface lo ttl 0\n",
            ),
            "transport",
        ),
        (
            "socket moved",
            slower(&good).replace("{id}.sock", "{id}-new.sock"),
            "socket",
        ),
        (
            "state moved",
            slower(&good).replace("{id}.state", "{id}-new.state"),
            "state",
        ),
        (
            "key-file added",
            slower(&good) + &format!("key-file {}\n", key.display()),
            "authentication",
        ),
        (
            "metrics-listen on a busy address",
            slower(&good) + &format!("metrics-listen {busy_addr}\n"),
            "metrics-listen",
        ),
        (
            "group list added",
            slower(&good) + "group orders\n",
            "group list changed",
        ),
    ];
    for (what, text, want) in &cases {
        put(&c, l, text);
        let (code, out, err) = reload(&c, l);
        assert_eq!(code, Some(1), "{what}: must be refused: {out}{err}");
        assert!(
            err.contains("reload refused") && err.contains(want),
            "{what}: the reason ({want}) on stderr: {err}"
        );
        let v = view(&c, l);
        let why = v.refused.clone().expect("status shows the refusal");
        assert!(why.contains(want), "{what}: status: {why}");
        assert!(
            v.lease_ms.is_some_and(|m| m <= 294),
            "{what}: a refused file's timers ran: {v:?}"
        );
        assert!(
            c.log(l)
                .lines()
                .any(|x| x.contains("ERROR") && x.contains("reload refused") && x.contains(want)),
            "{what}: logged at error level"
        );
        assert_untouched(&c, &log, l, term, pid, what);
    }
    // The follower side: a file without the leader's server line.
    let lport = my_port;
    let ftext =
        text_of(&c, other).replace(&format!("server {l} 127.0.0.1:{lport} name s{l}\n"), "");
    put(&c, other, &ftext);
    let (code, _, err) = reload(&c, other);
    assert_eq!(code, Some(1), "the leader removed on a follower: {err}");
    assert!(err.contains("server list changed"), "{err}");
    assert!(view(&c, other).refused.is_some());

    // SIGHUP takes the same path.
    put(&c, l, &(good.clone() + "hearbeat 1s\n"));
    common::signal(c.child(l), libc::SIGHUP);
    wait_for("the SIGHUP refusal", Duration::from_secs(2), || {
        view(&c, l)
            .refused
            .filter(|r| r.contains("hearbeat"))
            .map(|_| ())
    });
    // A good file clears it everywhere; nothing was lost on the way.
    put(&c, l, &good);
    put(&c, other, &good);
    for id in [l, other] {
        let (code, out, err) = reload(&c, id);
        assert_eq!(code, Some(0), "{out}{err}");
        assert_eq!(view(&c, id).refused, None);
    }
    assert_untouched(&c, &log, l, term, pid, "after the good file");
    assert!(!w.closed(), "the watch stream was closed");
    for (_, leader, t) in w.since(mark) {
        assert_eq!((leader, t), (Some(u64::from(l)), term), "watch");
    }
    drop(busy);
    sups.stop();
}

/// A burst of SIGHUPs (and `electctl reload`s from another thread) at the leader and a
/// follower, the file flipping between two valid timer sets, with watchers and `run`
/// connected. Catches: a signal storm that kills or wedges the daemon, coalesced
/// SIGHUPs that leave the daemon on an older file than the one on disk at the last
/// signal, a refusal of a valid file, a needless stop of the command or an election,
/// and a watch stream dropped on the way.
#[test]
fn sighup_burst_with_clients_connected() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster3();
    let log = cmd_log(&c);
    let (l, term, mut sups, pid) = settle(&c, &log);
    let f = followers(l)[0];
    let watches = [Watch::open(&c, l), Watch::open(&c, f)];
    let marks: Vec<usize> = watches.iter().map(Watch::len).collect();
    let good = text_of(&c, l);
    let variants = [
        good.clone(),
        good.replace("heartbeat 100ms", "heartbeat 120ms"),
        good.replace("rtt 20ms", "rtt 25ms"),
    ];
    let stop = Arc::new(Mutex::new(false));
    let (sock_l, sock_f, stop2) = (c.sock(l), c.sock(f), stop.clone());
    let ctl = std::thread::spawn(move || {
        let mut n = 0;
        while !*stop2.lock().unwrap() {
            for s in [&sock_l, &sock_f] {
                let (code, out, err) = electctl(s, &["reload"]);
                assert!(
                    code == Some(0),
                    "a valid file refused or reload failed: {code:?} {out}{err}"
                );
                n += 1;
            }
        }
        n
    });
    let (pl, pf) = (c.child(l).id() as i32, c.child(f).id() as i32);
    for i in 0..200 {
        for id in [l, f] {
            put(&c, id, &variants[i % variants.len()]);
        }
        // SAFETY: kill(2) on daemons this test started and has not reaped.
        unsafe {
            libc::kill(pl, libc::SIGHUP);
            libc::kill(pf, libc::SIGHUP);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    *stop.lock().unwrap() = true;
    let n = ctl.join().unwrap();
    assert!(n > 0);
    // The last file is the one the daemons must run (199 % 3 == 1: heartbeat 120ms).
    let last = &variants[199 % variants.len()];
    assert!(last.contains("heartbeat 120ms"));
    for id in [l, f] {
        wait_for(
            &format!("server {id} on the last file"),
            Duration::from_secs(2),
            || {
                c.log(id)
                    .lines()
                    .rev()
                    .find(|x| x.contains("configuration reloaded:"))
                    .filter(|x| x.contains("heartbeat 120ms, rtt 20ms"))
                    .map(|_| ())
            },
        );
        assert!(
            !c.log(id).contains("reload refused"),
            "server {id} refused a valid file:\n{}",
            c.log(id)
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_untouched(&c, &log, l, term, pid, "after the burst");
    for (i, w) in watches.iter().enumerate() {
        assert!(!w.closed(), "watch {i} closed in the burst");
        for (_, leader, t) in w.since(marks[i]) {
            assert_eq!((leader, t), (Some(u64::from(l)), term), "watch {i}");
        }
    }
    sups.stop();
}

/// The documented forms of the command work as written (README "electctl", electctl(1)):
/// `electctl --config PATH --id ID reload` finds the socket of server ID in the file,
/// prints where the file came from, exits 0; a refused file exits 1 with the reason on
/// stderr and `electctl status` says "last reload REFUSED". Catches a broken
/// `--config/--id` socket lookup for reload and a changed exit-status contract.
#[test]
fn documented_reload_forms_work() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster3();
    let (l, term) = c.agreement(Duration::from_secs(5));
    let path = conf(&c, l);
    let by_id = |c: &Cluster| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_electctl"));
        cmd.arg("--config")
            .arg(&path)
            .args(["--id", &l.to_string(), "reload"]);
        let _ = c;
        run_ctl(cmd)
    };
    let (code, out, err) = by_id(&c);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("configuration reloaded from") && out.contains(path.to_str().unwrap()),
        "{out}"
    );
    let good = text_of(&c, l);
    put(&c, l, &(good.clone() + "hearbeat 1s\n"));
    let (code, out, err) = by_id(&c);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("hearbeat"), "{err}");
    let (code, table, _) = electctl(&c.sock(l), &["status"]);
    assert_eq!(code, Some(0));
    assert!(table.contains("last reload REFUSED"), "{table}");
    let (code, js, _) = electctl(&c.sock(l), &["status", "--json"]);
    assert_eq!(code, Some(0));
    assert!(js.contains("\"config_refused\":\""), "{js}");
    // The socket's own answers, as README's socket table gives them.
    let raw = c.request(l, "reload").unwrap_or_default();
    let v = json::parse(raw.trim()).unwrap_or_else(|e| panic!("{raw}: {e:?}"));
    assert_eq!(v.get("refused"), Some(&Value::Bool(true)), "{raw}");
    assert!(
        v.get("error")
            .and_then(Value::as_str)
            .is_some_and(|e| e.starts_with("reload refused: ") && e.contains("hearbeat")),
        "{raw}"
    );
    put(&c, l, &good);
    let raw = c.request(l, "reload").unwrap_or_default();
    let v = json::parse(raw.trim()).unwrap_or_else(|e| panic!("{raw}: {e:?}"));
    assert_eq!(v.get("ok"), Some(&Value::Bool(true)), "{raw}");
    assert_eq!(
        v.get("config").and_then(Value::as_str),
        path.to_str(),
        "{raw}"
    );
    assert_eq!(by_id(&c).0, Some(0));
    assert_eq!(view(&c, l).term, term);
    assert_eq!(view(&c, l).role, "leader");
}

/// A daemon this test started outside `Cluster::spawn` (which always passes
/// `--log-level debug`): killed and reaped when dropped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        common::signal(&self.0, libc::SIGKILL);
        let _ = self.0.wait();
    }
}

/// Server 1 of `c` started without `--log-level` and without RUST_LOG, its stderr in
/// `c.log(1)`; returns once its socket answers.
fn spawn_plain(c: &Cluster) -> Daemon {
    let log = std::fs::File::create(c.dir.join("1.log")).unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_electd"))
        .arg("--config")
        .arg(&c.conf)
        .args(["--id", "1"])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let d = Daemon(child);
    wait_for("the socket", Duration::from_secs(5), || {
        c.status(1).map(|_| ())
    });
    d
}

fn one_server(extra: &str) -> Cluster {
    let mut o = Opts::new(Mode::Unicast, 1);
    o.run = 0;
    o.extra = extra.to_string();
    Cluster::build(&o)
}

/// README "Signals": `log-level` is applied by a reload (no `--log-level` given), and
/// the level is "`--log-level`, else the file's `log-level`, else `RUST_LOG`, else
/// `info`". A reload to `log-level warn` must hide the info line "configuration
/// reloaded"; a reload to a file without `log-level` must bring `info` back (what a
/// restart with that file would run). Catches a reload that ignores the level, and a
/// removed directive that leaves the old level running.
#[test]
fn removing_log_level_on_reload_restores_the_default() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = one_server("log-level info\n");
    let _d = spawn_plain(&c);
    let reloaded = |c: &Cluster| c.log(1).matches("configuration reloaded:").count();
    let good = std::fs::read_to_string(&c.conf).unwrap();
    assert_eq!(reload(&c, 1).0, Some(0));
    wait_for("the info line at info", Duration::from_secs(2), || {
        (reloaded(&c) == 1).then_some(())
    });
    std::fs::write(&c.conf, good.replace("log-level info", "log-level warn")).unwrap();
    assert_eq!(reload(&c, 1).0, Some(0));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        reloaded(&c),
        1,
        "log-level warn hides info lines:\n{}",
        c.log(1)
    );
    std::fs::write(&c.conf, good.replace("log-level info\n", "")).unwrap();
    let (code, out, err) = reload(&c, 1);
    assert_eq!(code, Some(0), "{out}{err}");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        reloaded(&c),
        2,
        "without log-level the daemon logs at info again (as a restart would):\n{}",
        c.log(1)
    );
}

/// The grace boundary of README "Timers that no longer fit" and SPEC 11, to the
/// millisecond: at heartbeat 100 ms, rtt 20 ms, K 3, drift 0.01 `run --grace 154ms` is
/// the largest accepted (155 ms is refused at start, exit 2); a reload to rtt 21 ms
/// leaves it no room and is refused naming its pid and 153 ms, the running timers
/// staying; once that `run` has gone the same reload is applied (a departed supervisor
/// must not block it). Catches an off-by-one between `run`'s own check and the
/// daemon's, a refusal that forgets the pid or the largest grace, a refused reload
/// whose timers ran anyway, and a stale registration that refuses reloads forever.
#[test]
fn grace_boundary_on_reload_is_exact() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::start(Mode::Unicast, 1);
    wait_for("leadership", Duration::from_secs(3), || {
        (view(&c, 1).role == "leader").then_some(())
    });
    let log = cmd_log(&c);
    let too_long = common::supervise_with(&c, 1, &log, &["--grace", "155ms"], &[]);
    assert_eq!(
        common::wait_exit(too_long, Duration::from_secs(5)),
        Some(2),
        "--grace 155ms cannot fit at heartbeat 100ms"
    );
    let sup = common::supervise_with(&c, 1, &log, &["--grace", "154ms"], &[]);
    let run_pid = sup.id();
    let mut sups = Supervisors(vec![sup]);
    let (pid, _) = wait_for("the command", Duration::from_secs(3), || running(&log));
    let good = std::fs::read_to_string(&c.conf).unwrap();
    let tighter = good.replace("rtt 20ms", "rtt 21ms");
    std::fs::write(&c.conf, &tighter).unwrap();
    let (code, out, err) = reload(&c, 1);
    assert_eq!(
        code,
        Some(1),
        "rtt 21ms leaves --grace 154ms no room: {out}{err}"
    );
    for want in [
        format!("(pid {run_pid})"),
        "--grace 154ms".to_string(),
        "largest grace that fits is 153 ms".to_string(),
    ] {
        assert!(err.contains(&want), "the refusal names {want:?}: {err}");
    }
    // rtt is not in status: the refusal kept the running timers if the grace check of
    // a new `run` still uses rtt 20 ms (154 ms fits), which the command running shows.
    assert_eq!(spans(&log).len(), 1);
    assert_eq!(spans(&log)[0].pid, pid);
    assert!(spans(&log)[0].sigterm.is_none());
    let second = common::supervise_with(&c, 1, &log, &["--grace", "154ms"], &[]);
    std::thread::sleep(Duration::from_millis(300));
    let mut second = Supervisors(vec![second]);
    assert!(
        second.0[0].try_wait().unwrap().is_none(),
        "a second run --grace 154ms is accepted: the running rtt is still 20ms"
    );
    second.stop();
    sups.stop();
    let (code, out, err) = reload(&c, 1);
    assert_eq!(
        code,
        Some(0),
        "no supervisor is connected any more: {out}{err}\n{}",
        c.log(1)
    );
    assert_eq!(view(&c, 1).refused, None);
    assert_eq!(view(&c, 1).role, "leader");
}

/// README "Signals" and electd(8): server names are applied by a reload; a missing
/// file is "a file with an error", refused with the reason, the daemon leading on.
/// Catches names that only change at a restart, and a reload of a vanished file that
/// crashes the daemon or is taken as an empty configuration.
#[test]
fn names_apply_and_a_missing_file_is_refused() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::start(Mode::Unicast, 1);
    wait_for("leadership", Duration::from_secs(3), || {
        (view(&c, 1).role == "leader").then_some(())
    });
    let term = view(&c, 1).term;
    let good = std::fs::read_to_string(&c.conf).unwrap();
    std::fs::write(&c.conf, good.replace("name s1", "name alpha")).unwrap();
    let (code, out, err) = reload(&c, 1);
    assert_eq!(code, Some(0), "{out}{err}");
    let name = c
        .status(1)
        .and_then(|v| v.get("name").and_then(Value::as_str).map(str::to_string));
    assert_eq!(name.as_deref(), Some("alpha"), "the new name in status");
    std::fs::remove_file(&c.conf).unwrap();
    let (code, out, err) = reload(&c, 1);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("cannot read"), "{err}");
    let v = view(&c, 1);
    assert!(v.refused.is_some_and(|r| r.contains("cannot read")));
    assert_eq!((v.role.as_str(), v.term), ("leader", term));
    std::fs::write(&c.conf, &good).unwrap();
    assert_eq!(reload(&c, 1).0, Some(0));
}

/// README "Configuration": the fingerprint holds host names as written, case aside; a
/// reload compares that text, so `LOCALHOST` for `localhost` is the same list and is
/// applied, while replacing the name by its address is refused as a changed list.
/// Catches a reload that compares resolved addresses (then the address would pass) or
/// case-sensitive names (then the case change would be refused).
#[test]
fn host_names_on_reload_compare_as_text() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut o = Opts::new(Mode::Unicast, 1);
    o.run = 0;
    let mut c = Cluster::build(&o);
    let text = std::fs::read_to_string(&c.conf)
        .unwrap()
        .replace("server 1 127.0.0.1:", "server 1 localhost:");
    std::fs::write(&c.conf, &text).unwrap();
    c.spawn(1);
    wait_for("leadership", Duration::from_secs(3), || {
        (view(&c, 1).role == "leader").then_some(())
    });
    std::fs::write(&c.conf, text.replace("localhost:", "LocalHost:")).unwrap();
    let (code, out, err) = reload(&c, 1);
    assert_eq!(code, Some(0), "case does not matter: {out}{err}");
    std::fs::write(&c.conf, text.replace("localhost:", "127.0.0.1:")).unwrap();
    let (code, out, err) = reload(&c, 1);
    assert_eq!(code, Some(1), "the address for the name: {out}{err}");
    assert!(err.contains("server list changed"), "{err}");
    assert_eq!(view(&c, 1).role, "leader");
}

/// A config path that has become a FIFO (a config-management tool writing through a
/// named pipe, a mistaken `mkfifo`): the reload must not block the event loop. README
/// "Signals"/SPEC 12: a sitting leader keeps renewing its lease whatever the disk
/// does. Expected: the SIGHUP is refused (not a regular file) and the leader keeps its
/// lease and answers `status`. Catches a reload that opens and reads the file inside
/// the event loop without checking its type.
#[test]
fn config_fifo_does_not_block_the_loop() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster3();
    let log = cmd_log(&c);
    let (l, term, mut sups, _pid) = settle(&c, &log);
    let path = conf(&c, l);
    let good = text_of(&c, l);
    std::fs::remove_file(&path).unwrap();
    let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path in this test's own directory.
    assert_eq!(unsafe { libc::mkfifo(cpath.as_ptr(), 0o600) }, 0);
    common::signal(c.child(l), libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(1000));
    let answered = c.status(l).is_some();
    let kept = c
        .status(l)
        .map(|v| {
            v.get("role").and_then(Value::as_str) == Some("leader")
                && v.get("term").and_then(Value::as_u64) == Some(term)
        })
        .unwrap_or(false);
    let others: Vec<View> = followers(l).into_iter().map(|f| view(&c, f)).collect();
    // Unblock the daemon, if it waits: a writer opens and closes the FIFO (EOF).
    {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path);
    }
    std::thread::sleep(Duration::from_millis(200));
    std::fs::remove_file(&path).unwrap();
    put(&c, l, &good);
    // Whatever happened, one command at a time.
    sups.stop();
    assert!(
        common::overlaps(&spans(&log), 3_000_000).is_empty(),
        "two commands at once"
    );
    assert!(
        answered && kept,
        "leader {l} (term {term}) after SIGHUP on a FIFO config: answered status {answered}, kept its lease {kept}; followers see {others:?}\n{}",
        c.log(l)
    );
    // Refused, saying why (not read as an empty file, not left to wait).
    assert!(
        c.log(l).contains("not a regular file (a FIFO)"),
        "no refusal naming the FIFO:\n{}",
        c.log(l)
    );
}

/// Election groups: three groups, one preferred on each server, an `electctl run
/// --group G` on every server for every group (nine supervisors). A reload on every
/// server that changes timers, `preempt-delay` and a group's own hooks must leave
/// every group's leader, term and command alone. Catches the past "a reload silently
/// stopped every processor" in its per-group form (supervisors of groups other than
/// the first, or of a group whose hooks changed), and a reload that re-runs a round in
/// some group.
#[test]
fn reload_with_groups_keeps_every_groups_command() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut o = Opts::new(Mode::Unicast, 3);
    o.run = 0;
    o.extra = "preempt-delay 300ms\n".to_string()
        + &common::groups_text(&[
            ("ga", Some("1 2 3")),
            ("gb", Some("2 3 1")),
            ("gc", Some("3 1 2")),
        ]);
    let mut c = Cluster::build(&o);
    let base = std::fs::read_to_string(&c.conf).unwrap();
    for id in 1..=3 {
        c.set_server_text(id, &base);
        c.spawn(id);
    }
    let want = |a: &std::collections::BTreeMap<String, (u16, u64)>| {
        a.get("ga").map(|x| x.0) == Some(1)
            && a.get("gb").map(|x| x.0) == Some(2)
            && a.get("gc").map(|x| x.0) == Some(3)
    };
    let before = wait_for(
        "each group on its preferred server",
        Duration::from_secs(8),
        || common::agreed(&c).filter(want),
    );
    let logs: Vec<(&str, String)> = ["ga", "gb", "gc"]
        .iter()
        .map(|g| {
            (
                *g,
                c.dir
                    .join(format!("cmd-{g}.log"))
                    .to_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    let mut sups = Supervisors(Vec::new());
    for (g, log) in &logs {
        for id in 1..=3 {
            sups.0.push(common::supervise_with(
                &c,
                id,
                log,
                &["--group", g, "--grace", "50ms"],
                &[],
            ));
        }
    }
    let mut pids = Vec::new();
    for (g, log) in &logs {
        let (pid, host) = wait_for(
            &format!("group {g}'s command"),
            Duration::from_secs(3),
            || running(log),
        );
        assert_eq!(host, before[*g].0, "group {g}'s command runs on its leader");
        pids.push(pid);
    }
    let new = base
        .replace("heartbeat 100ms", "heartbeat 120ms")
        .replace("preempt-delay 300ms", "preempt-delay 400ms")
        .replace(
            "group gb\n",
            "group gb\n  on-leader /bin/true\n  on-follower /bin/true\n",
        );
    for id in 1..=3 {
        put(&c, id, &new);
        let (code, out, err) = reload(&c, id);
        assert_eq!(code, Some(0), "server {id}: {out}{err}");
    }
    std::thread::sleep(Duration::from_millis(1500));
    let after = common::agreed(&c).expect("every group agreed after the reload");
    assert_eq!(after, before, "no group changed leader or term");
    for ((g, log), pid) in logs.iter().zip(&pids) {
        let s = spans(log);
        assert_eq!(
            s.len(),
            1,
            "group {g}'s command was stopped or restarted: {s:?}"
        );
        assert_eq!(s[0].pid, *pid);
        assert!(s[0].sigterm.is_none(), "group {g}: SIGTERM sent: {s:?}");
        let end = s[0].end;
        wait_for(
            &format!("group {g}'s command alive"),
            Duration::from_secs(1),
            || (spans(log)[0].end > end).then_some(()),
        );
    }
    sups.stop();
}

/// README "Signals": a changed `socket` line is refused by a reload ("needs a
/// restart"), logged, shown in `status` and exit 1 from `electctl reload`. README
/// "One file for every server" and electctl(1) `--id`: the template unit reloads with
/// `electctl --id ID reload`, which takes the socket from the file, and "a file the
/// daemon would refuse still names the socket". Expected: after the `socket` line is
/// edited, the documented reload command reaches the running daemon and gets the
/// refusal (exit 1, `config_refused` set). Catches a reload path that cannot tell the
/// operator about the very change it cannot apply.
#[test]
fn socket_change_is_refused_through_the_units_reload_command() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster3();
    let (l, _) = c.agreement(Duration::from_secs(5));
    let path = conf(&c, l);
    put(
        &c,
        l,
        &text_of(&c, l).replace("{id}.sock", "{id}-moved.sock"),
    );
    let ctl = || {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_electctl"));
        cmd.arg("--config")
            .arg(&path)
            .args(["--id", &l.to_string(), "reload"])
            .env_remove("MAINPID");
        cmd
    };
    // By hand, without systemd's MAINPID: the file's socket does not exist, and the
    // error says why that may be and what to do.
    let (code, out, err) = run_ctl(ctl());
    assert!(
        code == Some(2) && err.contains("still listens on its old socket"),
        "without MAINPID: exit {code:?}, {out}{err}"
    );
    // As the units run it (ExecReload sets MAINPID): the reload fails, and the
    // daemon gets it as a SIGHUP and refuses the change where the operator looks.
    let mut cmd = ctl();
    cmd.env("MAINPID", c.child(l).id().to_string());
    let (code, out, err) = run_ctl(cmd);
    assert!(
        code == Some(1) && err.contains("sent it SIGHUP"),
        "electctl --config F --id {l} reload after a socket change: exit {code:?}, {out}{err}"
    );
    let refused = wait_for("the daemon's refusal", Duration::from_secs(3), || {
        view(&c, l).refused
    });
    assert!(refused.contains("socket"), "refused {refused:?}");
}

/// A reload keeps a drained server drained and its successor leading: `drain` is
/// state (in the state file), not configuration. Catches a reload that rebuilds the
/// cores' flags from the file and so undrains (the drained server would take the
/// leadership back after `preempt-delay`, or claim it in the next round).
#[test]
fn reload_keeps_a_drain() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster3();
    let (l, term) = c.agreement(Duration::from_secs(5));
    let (code, out, err) = electctl(&c.sock(l), &["drain"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let (l2, _) = c.new_leader_since(l, term, Instant::now(), Duration::from_secs(3));
    let (_, term2) = c.agreement(Duration::from_secs(3));
    for id in 1..=3 {
        let t = text_of(&c, id).replace("heartbeat 100ms", "heartbeat 110ms");
        put(&c, id, &t);
        assert_eq!(reload(&c, id).0, Some(0));
    }
    std::thread::sleep(Duration::from_millis(1000));
    let drained = c.status(l).and_then(|v| match v.get("drained") {
        Some(Value::Bool(b)) => Some(*b),
        _ => None,
    });
    assert_eq!(drained, Some(true), "still drained after a reload");
    assert_eq!(c.agreement(Duration::from_secs(2)), (l2, term2));
    // A round now must not elect the drained server.
    let (code, out, err) = electctl(&c.sock(l2), &["yield"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let (l3, _) = c.new_leader_since(l2, term2, Instant::now(), Duration::from_secs(3));
    assert_ne!(l3, l, "the drained server was elected after a reload");
    assert_eq!(electctl(&c.sock(l), &["undrain"]).0, Some(0));
}

/// electd.conf(5) HEALTH: "A reload applies a changed check, interval, timeout, fall
/// and rise without moving the leadership by itself: the verdict stays"; "a check
/// added by a reload starts from ok"; "a removed check leaves the server healthy".
/// On the leader with `run` connected: change the check's command and every setting,
/// remove it, add it back; the leader, term and command must not move. Catches a
/// reload that restarts the check runner from `unknown` (the server is unhealthy
/// meanwhile, and a leader that turns unhealthy hands over while a fit follower
/// exists: a needless stop).
#[test]
fn check_changes_on_reload_do_not_move_the_leadership() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut o = Opts::new(Mode::Unicast, 3);
    o.run = 0;
    o.extra = "check /bin/true\ncheck-interval 100ms\ncheck-fall 2\ncheck-rise 2\n".into();
    let mut c = Cluster::build(&o);
    let base = std::fs::read_to_string(&c.conf).unwrap();
    for id in 1..=3 {
        c.set_server_text(id, &base);
        c.spawn(id);
    }
    let log = cmd_log(&c);
    // Every server healthy first (a check must rise before the server is fit).
    wait_for("every server healthy", Duration::from_secs(5), || {
        (1..=3)
            .all(|id| {
                c.status(id)
                    .and_then(|v| v.get("health").and_then(Value::as_str).map(str::to_string))
                    .as_deref()
                    == Some("ok")
            })
            .then_some(())
    });
    let (l, term, mut sups, pid) = settle(&c, &log);
    let no_check = base
        .lines()
        .filter(|x| !x.starts_with("check"))
        .map(|x| format!("{x}\n"))
        .collect::<String>();
    let steps = [
        (
            "changed command and settings",
            base.replace("check /bin/true", "check /bin/sh -c true")
                .replace("check-interval 100ms", "check-interval 150ms")
                .replace("check-fall 2", "check-fall 3")
                .replace("check-rise 2", "check-rise 4")
                + "check-timeout 80ms\n",
        ),
        ("check removed", no_check),
        ("check added back", base.clone()),
    ];
    for (what, text) in &steps {
        put(&c, l, text);
        let (code, out, err) = reload(&c, l);
        assert_eq!(code, Some(0), "{what}: {out}{err}");
        std::thread::sleep(Duration::from_millis(800));
        let h = c
            .status(l)
            .and_then(|v| v.get("health").and_then(Value::as_str).map(str::to_string));
        assert_eq!(h.as_deref(), Some("ok"), "{what}: health on the leader");
        assert_untouched(&c, &log, l, term, pid, what);
    }
    sups.stop();
}

/// Reloads in the middle of handovers: every round the leader yields while its command
/// lingers 100 ms in its 150 ms grace, and SIGHUPs hit every server at once, the file
/// flipping between heartbeat 100 ms and 140 ms (and rtt 20/15 ms). Catches a reload
/// that disturbs a stop in progress (the command started on the new leader while the
/// old one still runs: S5), loses the successor's start, or wedges a round.
#[test]
fn reloads_during_handovers_keep_one_command_at_a_time() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster3();
    let log = cmd_log(&c);
    let (mut l, mut term) = c.agreement(Duration::from_secs(5));
    let mut sups = Supervisors(
        (1..=3)
            .map(|id| {
                common::supervise_with(
                    &c,
                    id,
                    &log,
                    &["--grace", "150ms"],
                    &[(common::CMD_LINGER_VAR, "100")],
                )
            })
            .collect(),
    );
    let base = text_of(&c, 1);
    let variants = [
        base.clone(),
        base.replace("heartbeat 100ms", "heartbeat 140ms")
            .replace("rtt 20ms", "rtt 15ms"),
    ];
    let pids: Vec<i32> = (1..=3).map(|id| c.child(id).id() as i32).collect();
    for round in 0..6 {
        wait_for(
            &format!("round {round}: the command on leader {l}"),
            Duration::from_secs(3),
            || running(&log).filter(|r| r.1 == l),
        );
        let (code, out, err) = electctl(&c.sock(l), &["yield"]);
        assert_eq!(code, Some(0), "round {round}: {out}{err}");
        for i in 0..10 {
            for id in 1..=3 {
                put(&c, id, &variants[(round + i) % 2]);
            }
            for p in &pids {
                // SAFETY: kill(2) on daemons this test started and has not reaped.
                unsafe { libc::kill(*p, libc::SIGHUP) };
            }
            std::thread::sleep(Duration::from_millis(15));
        }
        let (l2, _) = c.new_leader_since(l, term, Instant::now(), Duration::from_secs(3));
        let (l3, t3) = c.agreement(Duration::from_secs(3));
        assert_eq!(l2, l3, "round {round}");
        (l, term) = (l3, t3);
    }
    wait_for("the last leader's command", Duration::from_secs(3), || {
        running(&log).filter(|r| r.1 == l)
    });
    sups.stop();
    let bad = common::overlaps(&spans(&log), 3_000_000);
    assert!(
        bad.is_empty(),
        "two commands at once: {bad:?}\n{}",
        c.logs()
    );
    for id in 1..=3 {
        assert!(
            !c.log(id).contains("reload refused"),
            "server {id} refused a valid file:\n{}",
            c.log(id)
        );
    }
}

/// One GET /metrics on `addr`: true when it answers 200.
fn metrics_up(addr: std::net::SocketAddr) -> bool {
    use std::io::Read;
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}

/// A reload refused late (its timers leave a connected `run` no room) that also moves
/// `metrics-listen`: the new address was bound before the timers were checked, so the
/// refusal must close it again and keep the old listener serving. Catches a refused
/// reload that leaks the new listener (the port stays taken, a later reload to it
/// fails) or that closes the old one.
#[test]
fn late_refusal_releases_the_new_metrics_listener() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pick = || {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (a, b) = (pick(), pick());
    let c = Cluster::start_with(Mode::Unicast, 1, &format!("metrics-listen {a}\n"), &[]);
    wait_for("leadership", Duration::from_secs(3), || {
        (view(&c, 1).role == "leader").then_some(())
    });
    assert!(metrics_up(a), "metrics on {a}");
    let log = cmd_log(&c);
    let mut sups = Supervisors(vec![common::supervise_with(
        &c,
        1,
        &log,
        &["--grace", "150ms"],
        &[],
    )]);
    wait_for("the command", Duration::from_secs(3), || running(&log));
    let good = std::fs::read_to_string(&c.conf).unwrap();
    std::fs::write(
        &c.conf,
        good.replace(
            &format!("metrics-listen {a}"),
            &format!("metrics-listen {b}"),
        )
        .replace("rtt 20ms", "rtt 40ms"),
    )
    .unwrap();
    let (code, out, err) = reload(&c, 1);
    assert_eq!(
        code,
        Some(1),
        "grace 150ms has no room at rtt 40ms: {out}{err}"
    );
    assert!(err.contains("--grace 150ms"), "{err}");
    assert!(metrics_up(a), "the old listener still serves");
    assert!(
        !metrics_up(b),
        "the refused reload's listener on {b} still answers"
    );
    assert!(
        std::net::TcpListener::bind(b).is_ok(),
        "the refused reload left {b} bound"
    );
    sups.stop();
    // With the supervisor gone the same file is applied and moves the listener.
    let (code, out, err) = reload(&c, 1);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(metrics_up(b) && !metrics_up(a), "moved to {b}");
}

/// A reload refuses exactly what a start refuses (README "Signals": "a file with an
/// error" is refused; electd(8)): for timer values at and just past every bound
/// (heartbeat, rtt, missed-heartbeats, drift, max-hold against the hold as a LEAD
/// carries it) and a few other values, `electd --check-config` on the file and
/// `electctl reload` of it must agree (0 and 0, or refusal and refusal). Catches a
/// reload that applies a file the daemon could not start with (the next restart would
/// fail with exit 78) or refuses one it could start with.
#[test]
fn reload_and_check_config_agree_at_the_bounds() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::start(Mode::Unicast, 1);
    wait_for("leadership", Duration::from_secs(3), || {
        (view(&c, 1).role == "leader").then_some(())
    });
    let term = view(&c, 1).term;
    let good = std::fs::read_to_string(&c.conf).unwrap();
    let t = |pairs: &[(&str, &str)], extra: &str| {
        let mut s = good.clone();
        for (from, to) in pairs {
            s = s.replace(from, to);
        }
        s + extra
    };
    let cases: Vec<(&str, String)> = vec![
        (
            "heartbeat 10ms rtt 9ms",
            t(
                &[
                    ("heartbeat 100ms", "heartbeat 10ms"),
                    ("rtt 20ms", "rtt 9ms"),
                ],
                "",
            ),
        ),
        (
            "heartbeat 9ms",
            t(
                &[
                    ("heartbeat 100ms", "heartbeat 9ms"),
                    ("rtt 20ms", "rtt 5ms"),
                ],
                "",
            ),
        ),
        ("rtt 99ms", t(&[("rtt 20ms", "rtt 99ms")], "")),
        ("rtt = heartbeat", t(&[("rtt 20ms", "rtt 100ms")], "")),
        ("rtt 0ms", t(&[("rtt 20ms", "rtt 0ms")], "")),
        (
            "missed-heartbeats 1",
            t(&[("missed-heartbeats 3", "missed-heartbeats 1")], ""),
        ),
        (
            "missed-heartbeats 2",
            t(&[("missed-heartbeats 3", "missed-heartbeats 2")], ""),
        ),
        (
            "missed-heartbeats 100",
            t(&[("missed-heartbeats 3", "missed-heartbeats 100")], ""),
        ),
        (
            "missed-heartbeats 101",
            t(&[("missed-heartbeats 3", "missed-heartbeats 101")], ""),
        ),
        ("drift 0.099", t(&[], "drift 0.099\n")),
        ("drift 0.1", t(&[], "drift 0.1\n")),
        ("drift -0.01", t(&[], "drift -0.01\n")),
        ("max-hold = hold", t(&[], "max-hold 300ms\n")),
        ("max-hold below hold", t(&[], "max-hold 299ms\n")),
        (
            "hold rounds up past max-hold",
            t(
                &[("heartbeat 100ms", "heartbeat 100.9ms")],
                "max-hold 302ms\n",
            ),
        ),
        ("max-hold 50d", t(&[], "max-hold 1200h\n")),
        ("hook-timeout 0s", t(&[], "hook-timeout 0s\n")),
        ("preempt-delay 0s", t(&[], "preempt-delay 0s\n")),
        ("log-level loud", t(&[], "log-level loud\n")),
        ("metrics-listen [::1]", t(&[], "metrics-listen [::1]:0\n")),
        (
            "check-interval 0s",
            t(&[], "check /bin/true\ncheck-interval 0s\n"),
        ),
        ("directive given twice", t(&[], "heartbeat 100ms\n")),
    ];
    let probe = c.dir.join("probe.conf");
    let mut mismatches = Vec::new();
    let (mut ok, mut refused) = (0, 0);
    for (what, text) in &cases {
        std::fs::write(&probe, text).unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_electd"))
            .arg("--config")
            .arg(&probe)
            .args(["--id", "1", "--check-config"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = common::output_within(child, Duration::from_secs(10));
        let checked = out.status.code() == Some(0);
        std::fs::write(&c.conf, text).unwrap();
        let (code, o, e) = reload(&c, 1);
        let applied = code == Some(0);
        if applied {
            ok += 1;
        } else {
            refused += 1;
        }
        if checked != applied {
            mismatches.push(format!(
                "{what}: --check-config {:?} ({}), reload {code:?} ({o}{e})",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        std::fs::write(&c.conf, &good).unwrap();
        assert_eq!(reload(&c, 1).0, Some(0), "{what}: back to the good file");
        let v = view(&c, 1);
        assert_eq!((v.role.as_str(), v.term), ("leader", term), "{what}");
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    // Both sides of the bounds were exercised (a case list that only refuses, or only
    // applies, would prove little).
    assert!(ok >= 5 && refused >= 5, "{ok} applied, {refused} refused");
}

/// electd(8)/electd.conf(5): "A reload also applies preempt-delay at once: a leader
/// that has already heard a server of higher priority fit for the new delay hands
/// over." Server 3 has priority 10; it is drained so that another server leads, then
/// undrained and left fit for longer than 300 ms; a reload of `preempt-delay 300ms` on
/// the leader alone must hand over to 3 promptly (well before another 300 ms plus a
/// round), with `run` on every server and never two commands at once. Catches a
/// preempt-delay that a reload only arms for servers heard after it (then nothing
/// moves), or a handover that skips the grace.
#[test]
fn preempt_delay_added_by_reload_applies_at_once() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut o = Opts::new(Mode::Unicast, 3);
    o.run = 0;
    let mut c = Cluster::build(&o);
    let base = std::fs::read_to_string(&c.conf)
        .unwrap()
        .replace("name s3\n", "name s3 priority 10\n");
    std::fs::write(&c.conf, &base).unwrap();
    for id in 1..=3 {
        c.set_server_text(id, &base);
        c.spawn(id);
    }
    let log = cmd_log(&c);
    let mut sups = Supervisors((1..=3).map(|id| supervise(&c, id, &log)).collect());
    let (l0, t0) = c.agreement(Duration::from_secs(5));
    if l0 == 3 {
        assert_eq!(electctl(&c.sock(3), &["drain"]).0, Some(0));
        c.new_leader_since(3, t0, Instant::now(), Duration::from_secs(3));
    } else {
        assert_eq!(electctl(&c.sock(3), &["drain"]).0, Some(0));
    }
    let (l, term) = c.agreement(Duration::from_secs(3));
    assert_ne!(l, 3);
    assert_eq!(electctl(&c.sock(3), &["undrain"]).0, Some(0));
    // Sticky without preempt-delay: 3 is fit and heard, and nothing moves.
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(c.agreement(Duration::from_secs(1)), (l, term), "sticky");
    wait_for("the leader's command", Duration::from_secs(3), || {
        running(&log).filter(|r| r.1 == l)
    });
    put(&c, l, &(base.clone() + "preempt-delay 300ms\n"));
    let t = Instant::now();
    let (code, out, err) = reload(&c, l);
    assert_eq!(code, Some(0), "{out}{err}");
    let (n, dt) = c.new_leader_since(l, term, t, Duration::from_millis(700));
    assert_eq!(n, 3, "handed over to the server of higher priority");
    eprintln!("preempt after reload: {dt:?}");
    wait_for("3's command", Duration::from_secs(3), || {
        running(&log).filter(|r| r.1 == 3)
    });
    sups.stop();
    let bad = common::overlaps(&spans(&log), 3_000_000);
    assert!(bad.is_empty(), "two commands at once: {bad:?}");
}

/// SIGHUPs while the leader stops (SIGTERM: it resigns and waits for its `run` to
/// confirm that the command exited, here 100 ms into a 150 ms grace): the reloads
/// must not disturb the stop. Catches a reload during shutdown that re-registers
/// supervisors, re-arms the lease, or makes the daemon claim again; expected: exit 0
/// within a bound, a successor elected, one command at a time.
#[test]
fn sighup_during_a_clean_stop() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = cluster3();
    let log = cmd_log(&c);
    let (l, term) = c.agreement(Duration::from_secs(5));
    let mut sups = Supervisors(
        (1..=3)
            .map(|id| {
                common::supervise_with(
                    &c,
                    id,
                    &log,
                    &["--grace", "150ms"],
                    &[(common::CMD_LINGER_VAR, "100")],
                )
            })
            .collect(),
    );
    wait_for("the leader's command", Duration::from_secs(3), || {
        running(&log).filter(|r| r.1 == l)
    });
    let t = text_of(&c, l).replace("heartbeat 100ms", "heartbeat 130ms");
    put(&c, l, &t);
    let pid = c.child(l).id() as i32;
    let child = c.terminate(l);
    for _ in 0..20 {
        // SAFETY: kill(2) on the daemon this test started; not yet reaped (the
        // handle is held until wait_exit below).
        unsafe { libc::kill(pid, libc::SIGHUP) };
        std::thread::sleep(Duration::from_millis(5));
    }
    let code = common::wait_exit(child, Duration::from_secs(3));
    assert_eq!(code, Some(0), "a clean stop under SIGHUP");
    let (n, _) = c.new_leader_since(l, term, Instant::now(), Duration::from_secs(3));
    wait_for("the successor's command", Duration::from_secs(3), || {
        running(&log).filter(|r| r.1 == n)
    });
    sups.stop();
    let bad = common::overlaps(&spans(&log), 3_000_000);
    assert!(bad.is_empty(), "two commands at once: {bad:?}");
    let first = spans(&log).into_iter().find(|s| s.host == l).unwrap();
    assert!(
        first.stopped && first.sigterm.is_some(),
        "the old leader's command had its grace: {first:?}"
    );
}

/// README "Signals": `on-leader`, `on-follower` and `hook-timeout` are applied by a
/// reload without a role change. The leader is reloaded with hooks it did not have:
/// adding them runs nothing (no transition), and its next transitions (a yield, then
/// the leadership coming back) run the new hooks with the documented environment.
/// Catches hooks that only take effect at a restart, and a reload that runs
/// `on-leader` again for a leadership it already had (a second processor start).
#[test]
fn hooks_added_by_reload_run_at_the_next_transition_only() {
    use std::os::unix::fs::PermissionsExt;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster3();
    let (l, term) = c.agreement(Duration::from_secs(5));
    let out = c.dir.join("hooks.log");
    let hook = c.dir.join("hook.sh");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\necho \"$ELECTD_ROLE $ELECTD_ID $ELECTD_TERM\" >> {}\n",
            out.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let t = text_of(&c, l)
        + &format!(
            "on-leader {0}\non-follower {0}\nhook-timeout 2s\n",
            hook.display()
        );
    put(&c, l, &t);
    let (code, o, e) = reload(&c, l);
    assert_eq!(code, Some(0), "{o}{e}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !out.exists(),
        "a reload ran a hook without a transition: {:?}",
        std::fs::read_to_string(&out)
    );
    assert_eq!(electctl(&c.sock(l), &["yield"]).0, Some(0));
    let (n, _) = c.new_leader_since(l, term, Instant::now(), Duration::from_secs(3));
    let lines = || std::fs::read_to_string(&out).unwrap_or_default();
    wait_for("the new on-follower hook", Duration::from_secs(3), || {
        lines().contains(&format!("follower {l} ")).then_some(())
    });
    // Back to l: its on-leader hook runs with the new term.
    assert_eq!(
        electctl(&c.sock(n), &["yield", "--to", &l.to_string()]).0,
        Some(0)
    );
    let (back, _) = c.new_leader_since(n, term, Instant::now(), Duration::from_secs(3));
    assert_eq!(back, l);
    let t3 = view(&c, l).term;
    wait_for("the new on-leader hook", Duration::from_secs(3), || {
        lines().contains(&format!("leader {l} {t3}")).then_some(())
    });
}

/// The server list is compared as a list, not as lines: server lines in another
/// order, comments, blank lines, spacing and an explicit default `priority 0` are the
/// same configuration and must be applied (exit 0), while the leader keeps its lease.
/// Catches a reload that compares the file's text (a cosmetic edit would then need a
/// restart of every server, moving the leadership).
#[test]
fn cosmetic_edits_are_applied() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = cluster3();
    let (l, term) = c.agreement(Duration::from_secs(5));
    let good = text_of(&c, l);
    let (servers, rest): (Vec<&str>, Vec<&str>) =
        good.lines().partition(|x| x.starts_with("server "));
    let mut text = String::from("# reordered, commented\n\n");
    text += rest[0];
    text += "\n";
    for s in servers.iter().rev() {
        text += &format!("{}   # a comment\n\n", s.replace(' ', "  "));
    }
    for r in &rest[1..] {
        text += r;
        text += "\n";
    }
    let text = text.replace(&format!("name  s{l} "), &format!("name  s{l}  priority 0 "));
    assert!(text.contains("priority 0"), "{text}");
    assert_ne!(text, good);
    put(&c, l, &text);
    let (code, out, err) = reload(&c, l);
    assert_eq!(
        code,
        Some(0),
        "a cosmetic edit must be applied: {out}{err}\n{text}"
    );
    let v = view(&c, l);
    assert_eq!((v.role.as_str(), v.term, v.refused), ("leader", term, None));
}

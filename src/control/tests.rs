//! Tests of the client table, supervisor departures and watchers on a real socket.

use super::*;
use crate::host::ClientId;
use mio::{Poll, Token};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Instant;

/// The closer thread and its backlog are the process's (`closer::backlog`), and
/// reads pause while more than CLOSE_BACKLOG descriptors wait to be closed: a test that
/// hands it SCM_MAX_FD descriptors paused every other test's reads until the thread
/// had closed them, and under load one found no request where it expected one (CI,
/// `long_requests_are_answered_in_order_then_refused`). Each fixture holds this lock,
/// and starts once the closer is idle.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Fixture {
    poll: Poll,
    control: Control,
    path: PathBuf,
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let t = Instant::now();
        // Batches that found the channel full wait for a retry (the loop's, at each
        // wakeup: here, this one's).
        while {
            super::closer::retry();
            super::closer::backlog() > 0
        } {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(30),
                "the closer thread closed nothing for 30 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let path =
            std::env::temp_dir().join(format!("electd-control-{tag}-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let poll = Poll::new().unwrap();
        let mut control = Control::bind(&path, 0o600, 10).unwrap();
        control.register(poll.registry(), Token(10)).unwrap();
        Fixture {
            poll,
            control,
            path,
            _serial: serial,
        }
    }

    fn connect(&mut self) -> std::os::unix::net::UnixStream {
        let s = std::os::unix::net::UnixStream::connect(&self.path).unwrap();
        self.control.accept(self.poll.registry(), Instant::now());
        s
    }

    /// Reads every client as if each had a readiness event.
    fn read_all(&mut self) {
        for slot in 0..MAX_CLIENTS {
            if self.control.clients.get(slot).is_some() {
                self.control
                    .readable(self.control.clients.token(slot), Instant::now());
            }
        }
    }

    fn flush(&mut self) {
        self.control.flush(self.poll.registry(), Instant::now());
    }
}

#[test]
fn work_per_wakeup_is_bounded_and_shared_round_robin() {
    let mut f = Fixture::new("budget");
    let mut socks: Vec<_> = (0..20).map(|_| f.connect()).collect();
    for s in &mut socks {
        s.write_all(&b"ping\n".repeat(50)).unwrap();
    }
    f.read_all();
    let first = f.control.take_requests(Instant::now());
    assert_eq!(first.len(), REQUESTS_PER_WAKEUP);
    let mut per = [0usize; MAX_CLIENTS];
    for (slot, r) in &first {
        assert_eq!(r.0, Request::Ping);
        per[*slot] += 1;
    }
    assert!(per.iter().all(|&n| n <= REQUESTS_PER_CLIENT), "{per:?}");
    // Leftovers stay buffered and the loop must not sleep on them.
    assert!(f.control.has_more());
    let second = f.control.take_requests(Instant::now());
    // The next wakeup starts where this one stopped: the clients left out come first.
    let served_first: std::collections::BTreeSet<usize> = first.iter().map(|r| r.0).collect();
    let starved = (0..20).find(|s| !served_first.contains(s)).unwrap();
    assert_eq!(second[0].0, starved);
    let mut total = first.len() + second.len();
    for _ in 0..100 {
        total += f.control.take_requests(Instant::now()).len();
    }
    assert_eq!(total, 20 * 50);
    assert!(!f.control.has_more());
}

#[test]
fn the_peer_uid_is_the_connecting_process_user() {
    let mut f = Fixture::new("cred");
    let _s = f.connect();
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    assert_eq!(f.control.peer_uid(0), Some(me));
    assert_eq!(f.control.peer_uid(1), None, "no client in slot 1");
}

/// One answer larger than `MAX_OUTBUF` (`metrics` of 64 groups) reaches a client
/// that reads; a second one queued behind it past the cap drops the client, and
/// nothing beyond `MAX_ANSWER` is ever queued.
#[test]
fn one_large_answer_is_queued_but_not_two() {
    let mut f = Fixture::new("large");
    let sock = f.connect();
    let big = format!("{}\n", "m".repeat(MAX_OUTBUF * 2));
    f.control.reply(0, &big);
    assert_eq!(f.control.counters.dropped, 0, "one large answer is queued");
    f.control.reply(0, "{\"ok\":true}\n");
    assert_eq!(f.control.counters.dropped, 1, "a second behind it is not");
    drop(f);
    let mut f = Fixture::new("large2");
    let mut reader = f.connect();
    f.control.reply(0, &big);
    let reading = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 65536];
        while !got.ends_with(b"\n") {
            let n = std::io::Read::read(&mut reader, &mut buf).unwrap();
            assert!(n > 0, "closed after {} bytes", got.len());
            got.extend_from_slice(&buf[..n]);
        }
        got.len()
    });
    for _ in 0..1000 {
        f.flush();
        if reading.is_finished() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(
        reading.join().unwrap(),
        big.len(),
        "the whole answer arrived"
    );
    drop(f);
    let mut f = Fixture::new("huge");
    let _c = f.connect();
    f.control.reply(0, &"h".repeat(MAX_ANSWER + 1));
    assert_eq!(f.control.counters.dropped, 1, "beyond MAX_ANSWER: dropped");
    drop(sock);
}

#[test]
fn a_reader_that_stops_never_keeps_its_slot() {
    let mut f = Fixture::new("slow");
    let _watcher = f.connect();
    f.control.watch(0, Scope::Group(0));
    let line = format!("{}\n", "x".repeat(1000));
    // The kernel buffer fills, then ours: the watcher is marked for dropping.
    for _ in 0..2000 {
        f.control.broadcast(Scope::Group(0), &line);
        if f.control.counters.dropped > 0 {
            break;
        }
        f.flush();
    }
    assert_eq!(f.control.counters.dropped, 1);
    // One more answer (to a request read with the last bytes) must not refill the
    // buffer of a client being dropped: it could never be written, and the slot
    // would stay taken for ever (issue 10, finding 7).
    f.control.reply(0, &line);
    f.flush();
    assert_eq!(f.control.clients(), 0, "the watcher kept its slot");
}

#[test]
fn long_requests_are_answered_in_order_then_refused() {
    let mut f = Fixture::new("long");
    let s = f.connect();
    let mut w = s.try_clone().unwrap();
    w.write_all(b"ping\n").unwrap();
    w.write_all(&vec![b'a'; MAX_REQUEST + 10]).unwrap();
    f.read_all();
    let reqs: Vec<_> = f
        .control
        .take_requests(Instant::now())
        .into_iter()
        .map(|(s, (r, _))| (s, r))
        .collect();
    assert_eq!(reqs, vec![(0, Request::Ping)]);
    f.control.reply(0, "{\"ok\":true}\n");
    f.flush();
    assert!(f.control.has_more(), "the refusal is still to come");
    assert!(f.control.take_requests(Instant::now()).is_empty());
    f.flush();
    assert_eq!(f.control.clients(), 0);
    let mut r = std::io::BufReader::new(s);
    let mut l = String::new();
    r.read_line(&mut l).unwrap();
    assert_eq!(l, "{\"ok\":true}\n");
    l.clear();
    r.read_line(&mut l).unwrap();
    assert!(l.contains("longer than 1024"), "{l}");
}

/// The host's registry learns of every supervisor that goes (closed, dropped, EOF)
/// exactly once, and of no other client; `leave` unmarks it.
#[test]
fn a_supervisors_departure_is_reported_once_and_no_one_elses() {
    let mut f = Fixture::new("sup");
    let s = f.connect();
    let _plain = f.connect();
    let t = f.connect();
    f.control.mark_supervisor(0);
    f.control.mark_supervisor(2);
    f.control.unmark_supervisor(2);
    assert!(f.control.take_departed().is_empty());
    drop(s);
    drop(t);
    f.read_all();
    f.flush();
    let gone = f.control.take_departed();
    assert_eq!(gone, vec![ClientId { slot: 0, serial: 0 }], "{gone:?}");
    assert!(f.control.take_departed().is_empty(), "reported twice");
}

/// SPEC section 15: watchers hear only their scope.
#[test]
fn watchers_belong_to_one_group() {
    let mut f = Fixture::new("groups");
    // Watchers hear only their scope.
    let w = f.connect();
    f.control.watch(0, Scope::Group(1));
    f.control.broadcast(Scope::Group(0), "zero\n");
    f.control.broadcast(Scope::All, "all\n");
    f.control.broadcast(Scope::Group(1), "one\n");
    f.flush();
    let mut r = std::io::BufReader::new(w);
    let mut l = String::new();
    r.read_line(&mut l).unwrap();
    assert_eq!(l, "one\n");
}

/// Issue 25: the loop wakes once a second only while some client is swept by time. A
/// supervisor or a watcher with nothing to write is not (they are never dropped as
/// idle); a plain client is (it is dropped after `IDLE_TIMEOUT`), and so is a client
/// with an answer not yet written.
#[test]
fn only_clients_swept_by_time_keep_the_loop_waking() {
    let mut f = Fixture::new("sweep");
    assert!(!f.control.sweeps_due(), "no client");
    let _sup = f.connect();
    let _w = f.connect();
    assert!(
        f.control.sweeps_due(),
        "plain clients are dropped when idle"
    );
    f.control.mark_supervisor(0);
    f.control.watch(1, Scope::All);
    assert!(!f.control.sweeps_due(), "a supervisor and a watcher");
    f.control.broadcast(Scope::All, "line\n");
    assert!(f.control.sweeps_due(), "an answer waits to be written");
    f.flush();
    assert!(!f.control.sweeps_due(), "written");
    let _plain = f.connect();
    assert!(f.control.sweeps_due(), "a third, plain client");
}

/// Descriptors passed (SCM_RIGHTS) come with the request line they were sent with, not
/// with the lines before or after it, and the line framing is unchanged (issue 25).
#[test]
fn passed_descriptors_belong_to_their_line() {
    let mut f = Fixture::new("fds");
    let mut s = f.connect();
    let t = crate::supervise::StopTimers::create().unwrap();
    s.write_all(b"ping\n").unwrap();
    crate::supervise::send_with_fds(&mut s, b"supervise grace_ms=100\n", &[t.fd(), t.fd()])
        .unwrap();
    s.write_all(b"status\nping\n").unwrap();
    f.read_all();
    let reqs = f.control.take_requests(Instant::now());
    let got: Vec<(Request, usize)> = reqs
        .into_iter()
        .map(|(_, (r, p))| (r, p.fds.len()))
        .collect();
    assert_eq!(
        got,
        vec![
            (Request::Ping, 0),
            (
                Request::Supervise(None, Some(std::time::Duration::from_millis(100))),
                2
            ),
            (Request::Status(None), 0),
            (Request::Ping, 0),
        ]
    );
    // Too many descriptors: all closed at once, the request knows why.
    let many: Vec<i32> = (0..super::MAX_PASSED + 1).map(|_| t.fd()).collect();
    crate::supervise::send_with_fds(&mut s, b"supervise grace_ms=100\n", &many).unwrap();
    f.read_all();
    let reqs = f.control.take_requests(Instant::now());
    assert_eq!(reqs.len(), 1);
    let p = &reqs[0].1.1;
    assert!(
        p.refused == Some(super::PassRefused::TooMany(3)) && p.fds.is_empty(),
        "{p:?}"
    );
    assert_eq!(f.control.counters.passed_refused, 1);
    // Descriptors with a line the next read does not end: closed, the line refused.
    crate::supervise::send_with_fds(&mut s, b"supervise gr", &[t.fd(), t.fd()]).unwrap();
    f.read_all();
    s.write_all(b"ace").unwrap();
    f.read_all();
    s.write_all(b"_ms=100\n").unwrap();
    f.read_all();
    let reqs = f.control.take_requests(Instant::now());
    assert_eq!(reqs.len(), 1);
    let p = &reqs[0].1.1;
    assert!(
        p.refused == Some(super::PassRefused::LineNotEnded) && p.fds.is_empty(),
        "{p:?}"
    );
    assert_eq!(f.control.counters.passed_refused, 2);
    // Split across two reads: the next read ends the line, the descriptors are taken.
    crate::supervise::send_with_fds(&mut s, b"supervise gr", &[t.fd(), t.fd()]).unwrap();
    f.read_all();
    s.write_all(b"ace_ms=100\n").unwrap();
    f.read_all();
    let reqs = f.control.take_requests(Instant::now());
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].1.1.fds.len(), 2, "{:?}", reqs[0].1.1);
    // A second batch while one waits for its line: the client is dropped.
    crate::supervise::send_with_fds(&mut s, b"s", &[t.fd()]).unwrap();
    f.read_all();
    crate::supervise::send_with_fds(&mut s, b"s", &[t.fd()]).unwrap();
    f.read_all();
    assert!(f.control.take_requests(Instant::now()).is_empty());
    assert_eq!(
        f.control.counters.passed_refused, 4,
        "the first expired, the second refused"
    );
    assert_eq!(f.control.counters.dropped, 1);
}

/// The whole daemon parks at most MAX_PARKED descriptors behind unfinished lines: a
/// batch beyond is closed at once and its line refused (issue 25 review: 64 clients
/// parking 16 each filled a 1024 descriptor table, and the next state write failed).
#[test]
fn parked_descriptors_are_capped_daemon_wide() {
    let mut f = Fixture::new("parked");
    let t = crate::supervise::StopTimers::create().unwrap();
    let n = super::MAX_PARKED / super::MAX_PASSED;
    let mut conns: Vec<_> = (0..n + 1).map(|_| f.connect()).collect();
    for s in conns.iter_mut() {
        crate::supervise::send_with_fds(s, b"supervise grace_ms=1", &[t.fd(), t.fd()]).unwrap();
        f.read_all();
    }
    assert_eq!(
        f.control.counters.passed_refused, 1,
        "the one beyond the cap"
    );
    for s in conns.iter_mut() {
        s.write_all(b"00\n").unwrap();
    }
    f.read_all();
    let reqs = f.control.take_requests(Instant::now());
    assert_eq!(reqs.len(), n + 1);
    let full: Vec<_> = reqs
        .iter()
        .filter(|(_, (_, p))| p.refused == Some(super::PassRefused::DaemonFull))
        .collect();
    assert_eq!(full.len(), 1);
    assert_eq!(
        reqs.iter().map(|(_, (_, p))| p.fds.len()).sum::<usize>(),
        super::MAX_PARKED
    );
}

/// recvmsg has room for every descriptor one message may carry (SCM_MAX_FD), so the
/// kernel never discards (closes) any inside recvmsg on the event loop: they all come
/// to the daemon, which refuses them and closes them on its closer thread.
#[test]
fn every_descriptor_of_a_message_is_received_then_closed_off_the_loop() {
    let mut f = Fixture::new("scm-max");
    let mut s = f.connect();
    let t = crate::supervise::StopTimers::create().unwrap();
    let many = vec![t.fd(); super::SCM_MAX_FD];
    crate::supervise::send_with_fds(&mut s, b"supervise grace_ms=100\n", &many).unwrap();
    f.read_all();
    let reqs = f.control.take_requests(Instant::now());
    assert_eq!(reqs.len(), 1);
    let p = &reqs[0].1.1;
    assert_eq!(
        p.refused,
        Some(super::PassRefused::TooMany(super::SCM_MAX_FD)),
        "all received, none discarded by the kernel: {p:?}"
    );
}

//! The metrics listener (SPEC section 16): `metrics-listen ADDR:PORT` serves
//! `GET /metrics` (and `HEAD`) over HTTP/1.1 for Prometheus, from the daemon's own mio
//! loop: no thread, no HTTP crate. The body is the control socket's `metrics` answer
//! (the daemon builds both with one function).
//!
//! HTTP as RFC 9112 asks of a server with one resource: a request line and header fields
//! up to an empty line (CRLF, or a bare LF), `Host` required in HTTP/1.1, persistent
//! connections by default in 1.1 (`Connection: close` honoured; HTTP/1.0 closes),
//! pipelined requests answered in order. 404 for other paths, 405 with `Allow` for other
//! methods on /metrics, 400 for a malformed request, 431 for a head over `MAX_HEAD` bytes
//! or `MAX_FIELDS` fields, 505 for a version other than 1.x, 413 for a body over
//! `MAX_BODY` (a smaller one, which GET has no use for, is read and discarded), 501 for
//! `Transfer-Encoding`, 408 for a request not complete within `REQUEST_TIMEOUT`. Every
//! refusal closes the connection with a lingering close: our side is shut once the
//! answer is out and the peer's late bytes are read and discarded (at most `LINGER`,
//! `LINGER_BYTES`), so the answer is not lost to a reset.
//!
//! Limits, as the control socket has them (SPEC section 10, `control.rs`): at most
//! `MAX_CLIENTS` connections (a new one evicts the connection that has waited longest
//! for its next request, so idle or slow clients never lock a scraper out),
//! `REQUESTS_PER_CLIENT` requests of one connection and `REQUESTS_PER_WAKEUP` in all per
//! wakeup, round-robin, `ACCEPTS_PER_WAKEUP` new connections per wakeup, at most
//! `MAX_HEAD` bytes buffered per connection, and no request served to a connection with
//! `BACKPRESSURE` bytes of answers unread. The slots, reads, writes and the round-robin
//! scheduler are the connection table the control socket uses too (`crate::conns`). A connection gets `REQUEST_TIMEOUT` from its accept or its last answer
//! to complete its next request (a slowloris client sending a byte at a time gets no
//! more), so every slot frees itself; the daemon sweeps at least once a second.

mod parse;

pub use parse::{
    CONTENT_TYPE, Head, MAX_BODY, MAX_FIELDS, MAX_HEAD, Method, Parsed, Reply, http_date,
    parse_head, parse_listen, render,
};

use crate::conns::{self, Table, Take, Written};
use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr};
use std::time::{Duration, Instant};

/// The most connections served at once.
pub const MAX_CLIENTS: usize = 64;
/// A connection must complete its next request within this of its accept or its last
/// answer; an idle one is then closed, a partial request gets 408.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Requests of one connection answered per wakeup.
pub const REQUESTS_PER_CLIENT: usize = 4;
/// Requests of all connections answered per wakeup (one `metrics` body costs about
/// 21 us: see `control::REQUESTS_PER_WAKEUP`; the daemon runs the core's timers between
/// two answers).
pub const REQUESTS_PER_WAKEUP: usize = 64;
/// Connections accepted per wakeup; the rest wait in the kernel's backlog.
pub const ACCEPTS_PER_WAKEUP: usize = 64;
/// Unread answer bytes beyond which a connection is not served until it reads.
pub const BACKPRESSURE: usize = 32 * 1024;
/// Unread answer bytes beyond which a connection is dropped (at most
/// `REQUESTS_PER_CLIENT` answers are queued past `BACKPRESSURE`, so only an enormous
/// body gets here).
const MAX_OUTBUF: usize = 256 * 1024;
/// A closing connection is freed after this, whether or not its answer went out.
pub const LINGER: Duration = Duration::from_secs(1);
/// Bytes read and discarded from a closing connection before it is freed.
const LINGER_BYTES: usize = 64 * 1024;

/// The status codes this server answers with, in the order of `Counters::answers`.
pub const CODES: [u16; 9] = [200, 400, 404, 405, 408, 413, 431, 501, 505];

/// A connection of the metrics listener: the shared connection (its `closing`: no more
/// requests, since when the close was decided) and its HTTP state.
type Conn = conns::Conn<TcpStream, ConnState>;

/// What the listener tracks of one connection beyond its bytes.
#[derive(Debug)]
struct ConnState {
    /// Body bytes of the last request still to read and discard.
    skip: u64,
    /// Since when the next request is awaited: the accept, or the last answer queued.
    since: Instant,
    /// The buffered bytes are a partial head: nothing to do until more arrive.
    partial: bool,
    /// Our side is shut down (the answer is out): lingering.
    shut: bool,
    /// Bytes read and discarded while lingering.
    discarded: usize,
}

impl Conn {
    fn servable(&self) -> bool {
        self.closing.is_none()
            && self.outbuf.len() < BACKPRESSURE
            && self.skip == 0
            && !self.partial
            && !self.inbuf.is_empty()
    }

    fn wants_read(&self) -> bool {
        self.more && !self.eof && self.closing.is_none() && self.inbuf.len() < MAX_HEAD
    }

    /// Waiting for a request with nothing of it received.
    fn idle(&self) -> bool {
        self.inbuf.is_empty() && self.outbuf.is_empty() && self.skip == 0
    }

    /// Drops body bytes still owed by the last request from the buffer.
    fn consume_skip(&mut self) {
        let n = self.inbuf.len().min(self.skip as usize);
        self.inbuf.drain(..n);
        self.skip -= n as u64;
    }

    /// Reads what the peer sent, up to `MAX_HEAD` buffered bytes (body bytes owed by the
    /// last request are discarded as they come).
    fn receive(&mut self, now: Instant) {
        if self.shut {
            self.more = false;
            return self.discard();
        }
        let read = self.read(
            |c| {
                MAX_HEAD
                    .saturating_sub(c.inbuf.len())
                    .saturating_add(c.skip.min(MAX_BODY) as usize)
            },
            |c, bytes| {
                let k = bytes.len().min(c.skip as usize);
                c.skip -= k as u64;
                c.inbuf.extend_from_slice(&bytes[k..]);
                c.partial = false;
            },
        );
        if read.is_err() {
            self.outbuf.clear();
            self.close(now);
        }
    }

    /// Lingering close: reads and discards what the peer still sends, up to
    /// `LINGER_BYTES` in all.
    fn discard(&mut self) {
        let mut buf = [0u8; 4096];
        while !self.eof && self.discarded < LINGER_BYTES {
            match self.stream.read(&mut buf) {
                Ok(0) => self.eof = true,
                Ok(n) => self.discarded += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => self.eof = true,
            }
        }
    }
}

/// Counters for metrics.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Answers by status code, in the order of `CODES`.
    pub answers: [u64; CODES.len()],
    /// Connections accepted.
    pub accepted: u64,
    /// Connections closed to make room for a new one (the client limit).
    pub evicted: u64,
    /// Connections closed for want of a complete request within `REQUEST_TIMEOUT`
    /// (partly received: 408).
    pub timed_out: u64,
    /// Idle connections closed after `REQUEST_TIMEOUT` without a request (a keep-alive
    /// connection between two scrapes, or one that never sent anything).
    pub idle_closed: u64,
    /// Connections closed because their answers were not read (over `MAX_OUTBUF`, or
    /// unread for `REQUEST_TIMEOUT`).
    pub unread: u64,
}

/// The listening socket and its connections.
#[derive(Debug)]
pub struct Http {
    listener: TcpListener,
    addr: SocketAddr,
    conns: Table<TcpStream, ConnState>,
    /// The listener may hold more connections than the last wakeup accepted.
    accept_more: bool,
    /// When an accept error was last logged (rate limit).
    warned: Option<Instant>,
    /// Counters for metrics.
    pub counters: Counters,
}

impl Http {
    /// Binds `addr`. Connections get the tokens after `first_token`.
    pub fn bind(addr: SocketAddr, first_token: usize) -> io::Result<Http> {
        let listener = TcpListener::bind(addr)?;
        Ok(Http {
            addr: listener.local_addr().unwrap_or(addr),
            listener,
            conns: Table::new(MAX_CLIENTS, first_token + 1),
            accept_more: false,
            warned: None,
            counters: Counters::default(),
        })
    }

    /// The address listened on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Registers the listener under `token`.
    pub fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(&mut self.listener, token, Interest::READABLE)
    }

    /// True if `token` belongs to a connection of this listener.
    pub fn owns(&self, token: Token) -> bool {
        self.conns.owns(token)
    }

    /// Accepts up to `ACCEPTS_PER_WAKEUP` pending connections, evicting when full.
    pub fn accept(&mut self, registry: &Registry, now: Instant) {
        self.accept_more = false;
        for _ in 0..ACCEPTS_PER_WAKEUP {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    let free = self.conns.free_slot();
                    let slot = free.unwrap_or_else(|| self.evict(registry));
                    let _ = stream.set_nodelay(true);
                    let state = ConnState {
                        skip: 0,
                        since: now,
                        partial: false,
                        shut: false,
                        discarded: 0,
                    };
                    if self
                        .conns
                        .insert(registry, slot, conns::Conn::new(stream, true, state))
                    {
                        self.counters.accepted += 1;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of file descriptors, say: the backlog keeps them; retry at
                    // the next event rather than spin.
                    if self
                        .warned
                        .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(60))
                    {
                        self.warned = Some(now);
                        log::warn!("metrics-listen {}: accept: {e}", self.addr);
                    }
                    return;
                }
            }
        }
        self.accept_more = true;
    }

    /// Frees a slot when all are taken: a closing connection first, else the one that
    /// has waited longest for its next request, idle or partial alike. A scraper's new
    /// connection is the youngest, so clients that connect and send nothing, or send a
    /// byte at a time, cannot lock it out.
    fn evict(&mut self, registry: &Registry) -> usize {
        let slot = (0..MAX_CLIENTS)
            .min_by_key(|&i| self.conns.get(i).map(|c| (c.closing.is_none(), c.since)))
            .unwrap_or(0);
        if self.conns.get(slot).is_some_and(|c| c.closing.is_none()) {
            self.counters.evicted += 1;
        }
        self.free(slot, registry);
        slot
    }

    fn free(&mut self, slot: usize, registry: &Registry) {
        self.conns.remove(registry, slot);
    }

    /// Reads from connection `token` after a readiness event.
    pub fn readable(&mut self, token: Token, now: Instant) {
        let Some(slot) = self.conns.slot(token) else {
            return;
        };
        if let Some(c) = self.conns.get_mut(slot) {
            c.receive(now);
        }
    }

    /// True when requests wait, sockets hold unread bytes or connections wait to be
    /// accepted: the next wakeup must not wait on poll.
    pub fn has_more(&self) -> bool {
        self.accept_more
            || self
                .conns
                .iter()
                .any(|(_, c)| c.servable() || c.wants_read())
    }

    /// The requests to answer in this wakeup, in order per connection: at most
    /// `REQUESTS_PER_CLIENT` per connection and `REQUESTS_PER_WAKEUP` in all,
    /// round-robin from where the last wakeup stopped. Answer each with `answer`.
    pub fn take_requests(&mut self, registry: &Registry, now: Instant) -> Vec<(usize, Reply)> {
        if self.accept_more {
            self.accept(registry, now);
        }
        for c in self.conns.iter_mut() {
            if c.wants_read() {
                c.receive(now);
            }
        }
        self.conns
            .round_robin(REQUESTS_PER_CLIENT, REQUESTS_PER_WAKEUP, |c, _| {
                Self::next_request(c, now)
            })
    }

    /// The next request of connection `c`, parsed and routed.
    fn next_request(c: &mut Conn, now: Instant) -> Take<Reply> {
        if !c.servable() {
            return Take::Stop;
        }
        let reply = match parse_head(&c.inbuf) {
            Parsed::Partial => {
                c.partial = true;
                return Take::Stop;
            }
            Parsed::Complete { head, len } => {
                c.inbuf.drain(..len);
                c.skip = head.body;
                c.consume_skip();
                Reply::route(head)
            }
            Parsed::Refused { code, why } => Reply {
                code,
                head_only: false,
                close: true,
                why,
            },
        };
        if reply.close {
            // Nothing after this request is read as a request.
            c.close(now);
        }
        Take::Request(reply)
    }

    /// Queues the answer `reply` for connection `slot`; `metrics` is the body of a 200.
    pub fn answer(&mut self, slot: usize, reply: &Reply, metrics: Option<&str>, now: Instant) {
        let Some(c) = self.conns.get_mut(slot) else {
            return;
        };
        Self::queue(c, &mut self.counters, reply, metrics, now);
    }

    fn queue(
        c: &mut Conn,
        counters: &mut Counters,
        reply: &Reply,
        metrics: Option<&str>,
        now: Instant,
    ) {
        if c.shut {
            return;
        }
        if let Some(i) = CODES.iter().position(|&k| k == reply.code) {
            counters.answers[i] += 1;
        }
        let bytes = render(reply, metrics);
        if c.outbuf.len() + bytes.len() > MAX_OUTBUF {
            counters.unread += 1;
            c.outbuf.clear();
            c.close(now);
            return;
        }
        c.outbuf.extend_from_slice(&bytes);
        c.since = now;
    }

    /// Writes queued answers; closes finished, refused, timed-out and idle connections.
    pub fn flush(&mut self, registry: &Registry, now: Instant) {
        for slot in 0..MAX_CLIENTS {
            let Some(c) = self.conns.get_mut(slot) else {
                continue;
            };
            if c.closing.is_none() && now.duration_since(c.since) >= REQUEST_TIMEOUT {
                if c.idle() {
                    // An idle keep-alive connection is closed without a word.
                    self.counters.idle_closed += 1;
                    c.close(now);
                } else if !c.outbuf.is_empty() {
                    // Its answers have not been read for that long: not a slow request.
                    self.counters.unread += 1;
                    c.outbuf.clear();
                    c.close(now);
                } else {
                    self.counters.timed_out += 1;
                    let reply = Reply {
                        code: 408,
                        head_only: false,
                        close: true,
                        why: "request not complete within 10 s",
                    };
                    Self::queue(c, &mut self.counters, &reply, None, now);
                    c.close(now);
                }
            }
            // The peer is gone or its request can never complete: nothing to answer.
            if c.eof && c.closing.is_none() && (c.skip > 0 || c.inbuf.is_empty() || c.partial) {
                c.close(now);
            }
            if c.write() == Written::Gone {
                c.outbuf.clear();
                c.eof = true;
                c.close(now);
            }
            if c.closing.is_some() && c.outbuf.is_empty() && !c.shut {
                // Lingering close: FIN after the answer, then the peer's late bytes.
                let _ = c.stream.shutdown(Shutdown::Write);
                c.shut = true;
            }
            if c.shut {
                c.discard();
            }
            let lingered = c.closing.is_some_and(|t| now.duration_since(t) >= LINGER);
            let done = c.shut && (c.eof || c.discarded >= LINGER_BYTES);
            if lingered || done {
                self.free(slot, registry);
            }
        }
    }

    /// The number of open connections.
    pub fn clients(&self) -> usize {
        self.conns.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::Poll;
    use std::io::{BufRead, Write};

    struct Fixture {
        poll: Poll,
        http: Http,
    }

    impl Fixture {
        fn new() -> Fixture {
            let poll = Poll::new().unwrap();
            let mut http = Http::bind("127.0.0.1:0".parse().unwrap(), 10).unwrap();
            http.register(poll.registry(), Token(10)).unwrap();
            Fixture { poll, http }
        }

        fn connect(&mut self) -> std::net::TcpStream {
            let s = std::net::TcpStream::connect(self.http.addr()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            // The kernel completes the handshake before accept: bounded retries.
            let before = self.http.counters.accepted;
            for _ in 0..1000 {
                self.http.accept(self.poll.registry(), Instant::now());
                if self.http.counters.accepted > before {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            assert!(self.http.counters.accepted > before, "not accepted");
            s
        }

        /// Reads every connection as if each had a readiness event.
        fn read_all(&mut self) {
            for slot in 0..MAX_CLIENTS {
                self.http
                    .readable(self.http.conns.token(slot), Instant::now());
            }
        }

        fn take(&mut self) -> Vec<(usize, Reply)> {
            self.http
                .take_requests(self.poll.registry(), Instant::now())
        }
    }

    fn get(path: &str) -> String {
        format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n")
    }

    #[test]
    fn work_per_wakeup_is_bounded_and_shared_round_robin() {
        let mut f = Fixture::new();
        let mut socks: Vec<_> = (0..20).map(|_| f.connect()).collect();
        for s in &mut socks {
            s.write_all(get("/metrics").repeat(50).as_bytes()).unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        f.read_all();
        let first = f.take();
        assert_eq!(first.len(), REQUESTS_PER_WAKEUP);
        let mut per = [0usize; MAX_CLIENTS];
        for (slot, r) in &first {
            assert_eq!(r.code, 200);
            per[*slot] += 1;
        }
        assert!(per.iter().all(|&n| n <= REQUESTS_PER_CLIENT), "{per:?}");
        assert!(f.http.has_more(), "leftovers must not wait on poll");
        // The next wakeup starts with the connections left out.
        let served: std::collections::BTreeSet<usize> = first.iter().map(|r| r.0).collect();
        let second = f.take();
        assert!(!served.contains(&second[0].0), "{:?}", second[0]);
        let mut total = first.len() + second.len();
        for _ in 0..100 {
            total += f.take().len();
        }
        assert_eq!(total, 20 * 50);
        assert!(!f.http.has_more());
    }

    #[test]
    fn answers_keep_the_order_of_pipelined_requests() {
        let mut f = Fixture::new();
        let s = f.connect();
        (&s).write_all(format!("{}{}", get("/x"), get("/metrics")).as_bytes())
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        f.read_all();
        let reqs = f.take();
        assert_eq!(
            reqs.iter().map(|r| r.1.code).collect::<Vec<_>>(),
            vec![404, 200]
        );
        for (slot, r) in reqs {
            f.http
                .answer(slot, &r, Some("body\n# EOF\n"), Instant::now());
        }
        f.http.flush(f.poll.registry(), Instant::now());
        let mut r = std::io::BufReader::new(s);
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        assert_eq!(l, "HTTP/1.1 404 Not Found\r\n");
        let mut rest = vec![0u8; 4096];
        let mut text = String::new();
        while !text.contains("# EOF") {
            let n = r.read(&mut rest).unwrap();
            assert!(n > 0);
            text += &String::from_utf8_lossy(&rest[..n]);
        }
        assert!(text.contains("HTTP/1.1 200 OK\r\n"), "{text}");
        assert_eq!(f.http.counters.answers[0], 1);
        assert_eq!(f.http.counters.answers[2], 1);
    }

    #[test]
    fn a_new_connection_evicts_the_one_waiting_longest() {
        let mut f = Fixture::new();
        let mut socks: Vec<_> = (0..MAX_CLIENTS).map(|_| f.connect()).collect();
        // The first sends half a request; the second is the oldest idle one, but the
        // first has waited longer: it goes.
        socks[0].write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        f.read_all();
        assert!(f.take().is_empty());
        let _new = f.connect();
        assert_eq!(f.http.clients(), MAX_CLIENTS);
        assert_eq!(f.http.counters.evicted, 1);
        let mut b = [0u8; 1];
        assert_eq!(socks[0].read(&mut b).unwrap(), 0, "the oldest was closed");
        socks[1].set_nonblocking(true).unwrap();
        assert!(
            socks[1]
                .read(&mut b)
                .is_err_and(|e| e.kind() == io::ErrorKind::WouldBlock),
            "the next oldest stays"
        );
    }

    #[test]
    fn idle_and_partial_connections_time_out() {
        let mut f = Fixture::new();
        let mut idle = f.connect();
        let partial = f.connect();
        (&partial)
            .write_all(b"GET /metrics HTTP/1.1\r\nHo")
            .unwrap();
        // An answer still queued when the time is up: its client is not reading.
        let deaf = f.connect();
        (&deaf).write_all(get("/metrics").as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        f.read_all();
        let reqs = f.take();
        assert_eq!(reqs.len(), 1);
        // Not yet.
        f.http
            .flush(f.poll.registry(), Instant::now() + REQUEST_TIMEOUT / 2);
        assert_eq!(f.http.clients(), 3);
        f.http
            .answer(reqs[0].0, &reqs[0].1, Some("x\n"), Instant::now());
        let later = Instant::now() + REQUEST_TIMEOUT;
        f.http.flush(f.poll.registry(), later);
        let n = &f.http.counters;
        assert_eq!((n.idle_closed, n.timed_out, n.unread), (1, 1, 1));
        drop(deaf);
        let mut b = [0u8; 1];
        assert_eq!(idle.read(&mut b).unwrap(), 0, "idle: closed without a word");
        let mut r = std::io::BufReader::new(partial);
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        assert_eq!(l, "HTTP/1.1 408 Request Timeout\r\n");
        // Freed once the peer has closed, or after the linger at the latest.
        drop(r);
        f.http
            .flush(f.poll.registry(), later + LINGER + Duration::from_millis(1));
        assert_eq!(f.http.clients(), 0);
    }
}

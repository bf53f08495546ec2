//! The control socket (SPEC sections 10 and 11): a Unix stream socket, one request word
//! per line, one JSON object per answer line.
//!
//! This module owns the clients and their limits; it turns bytes into `Request`s and
//! queues answers, and the daemon decides what to answer. Limits: requests up to 1 KiB,
//! at most 64 clients, at most `MAX_OUTBUF` bytes queued per client (a `watch` or
//! `supervise` client that stops reading is dropped, never waited for), idle clients
//! closed after `IDLE_TIMEOUT` (or at once, longest idle first, when a 65th client
//! arrives).
//!
//! Work per wakeup is bounded (issue 10, finding 7): at most `REQUESTS_PER_CLIENT`
//! requests of one client and `REQUESTS_PER_WAKEUP` in all are handed to the daemon per
//! wakeup, round-robin across clients; what is left stays buffered (at most
//! `INBUF_CAP` bytes per client, the rest stays in the kernel) and is served at the
//! next wakeup, which then does not wait on poll. A client whose answers pile up (more
//! than half of `MAX_OUTBUF` unwritten) is not served until it reads: backpressure
//! instead of a drop.
//!
//! Supervisors (`supervise`, SPEC section 6 Resign): each line pushed to a supervisor
//! is numbered per connection; the client confirms a non-leader line N with
//! `released N` once its command has exited. A supervisor is clear when it has
//! confirmed a number above the last leader line it was sent. One that leaves without
//! confirming is no confirmation: its last known lease end is kept
//! (`departed_until_ns`) and a handoff may not be released before it.
//!
//! A supervisor may also report its command's health (`health failing REASON`,
//! `health ok`: `electctl run --max-restarts`, SPEC section 13). The report belongs to
//! the connection: a supervisor that leaves or disconnects takes it with it.

use mio::net::{UnixListener, UnixStream};
use mio::{Interest, Registry, Token};
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The error a leader-only request gets on a follower (`electctl` exits 1 on it).
pub const NOT_LEADER: &str = "not leader";
/// The start of the error a refused `reload` gets; its answer also carries
/// `"refused":true` (`electctl reload` exits 1 on it, 2 on other errors).
pub const RELOAD_REFUSED: &str = "reload refused";
/// The longest reason kept from a supervisor's `health failing` report.
pub const MAX_HEALTH_REASON: usize = 200;

/// The longest request line accepted.
pub const MAX_REQUEST: usize = 1024;
/// The most clients served at once.
pub const MAX_CLIENTS: usize = 64;
/// The most answer bytes queued for one client before it is dropped.
pub const MAX_OUTBUF: usize = 64 * 1024;
/// The longest single answer: one may exceed `MAX_OUTBUF` when nothing else is queued
/// for the client (`metrics` of 64 election groups is about 100 KiB; the status line of
/// every group about 20 KiB). Bounded by the configuration, so this never drops a
/// client that reads.
pub const MAX_ANSWER: usize = 256 * 1024;
/// A client that is not watching and sends nothing for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Requests of one client handed to the daemon per wakeup.
pub const REQUESTS_PER_CLIENT: usize = 4;
/// Requests of all clients handed to the daemon per wakeup. A `metrics` answer costs
/// about 21 us to build and write (measured: 5,000 pipelined on one connection in
/// 0.107 s), so one wakeup's control work stays near 1.4 ms; the daemon also runs the
/// core's timers between two answers, so a LEAD never waits for a whole batch.
pub const REQUESTS_PER_WAKEUP: usize = 64;
/// Bytes buffered per client beyond which the socket is not read (the kernel holds the
/// rest, and the client blocks once that is full).
const INBUF_CAP: usize = 4 * 1024;
/// A client being dropped whose last answer cannot be written is freed after this.
const LINGER: Duration = Duration::from_secs(1);

/// A request from a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// One status line (of a group, or of every group).
    Status(Option<String>),
    /// The status line, then one line per change (of a group, or of every group).
    Watch(Option<String>),
    /// Register as a supervisor of a group's lease (or, registered, ask again):
    /// numbered lines. `supervise [GROUP] [grace_ms=N]`: the supervisor's `--grace`,
    /// which a reload must leave room for (absent from older clients).
    Supervise(Option<String>, Option<Duration>),
    /// A supervisor confirms that its command has exited after line N.
    Released(u64),
    /// A supervisor leaves: no command of its runs and none will be started.
    Leave,
    /// Start a round now (in a group).
    Elect(Option<String>),
    /// Resign a group's leadership if leader; with an id, hand over to that server
    /// (`yield [GROUP] [ID]`).
    Yield(Option<String>, Option<u64>),
    /// Make this server ineligible in a group (persisted) until `undrain`.
    Drain(Option<String>),
    /// End a drain.
    Undrain(Option<String>),
    /// A supervisor reports its command's health: None for `health ok`, the reason
    /// for `health failing REASON`.
    Health(Option<String>),
    /// Prometheus text.
    Metrics,
    /// Liveness check.
    Ping,
    /// Re-read the configuration file now, as SIGHUP does, and answer whether the new
    /// configuration was applied or refused (and why).
    Reload,
    /// A known word with bad arguments (the message for the answer).
    Invalid(String),
    /// Anything else (the word, truncated for the answer).
    Unknown(String),
}

/// True for a group name as SPEC section 15 spells it: `[a-z][a-z0-9_-]{0,31}` (a letter
/// first, so a group is never taken for a server id).
pub fn valid_group_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 32
        && b[0].is_ascii_lowercase()
        && b[1..]
            .iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
}

/// A request word's words, shortened for an error answer.
fn shown(w: &str) -> String {
    w.chars().take(32).collect()
}

/// The optional GROUP of `word [GROUP]`; the error request otherwise.
fn group_arg(word: &str, args: &[&str]) -> Result<Option<String>, Request> {
    match args {
        [] => Ok(None),
        [g] if valid_group_name(g) => Ok(Some((*g).to_string())),
        [g] => Err(Request::Invalid(format!(
            "{word}: '{}' is not a group name ([a-z][a-z0-9_-]{{0,31}})",
            shown(g)
        ))),
        _ => Err(Request::Invalid(format!("usage: {word} [GROUP]"))),
    }
}

/// A server id argument: a number is always an id, however large (then no such server).
fn id_arg(word: &str, id: &str) -> Result<u64, Request> {
    match id.parse::<u64>() {
        Ok(n) => Ok(n),
        Err(_) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => {
            Err(Request::Invalid(format!(
                "{word}: no server {} in the server list",
                shown(id)
            )))
        }
        Err(_) => Err(Request::Invalid(format!(
            "{word}: '{}' is not a server id (a number)",
            shown(id)
        ))),
    }
}

/// `yield`, `yield ID`, `yield GROUP`, `yield GROUP ID`.
fn yield_args(args: &[&str]) -> Result<Request, Request> {
    let is_id = |w: &str| w.bytes().all(|b| b.is_ascii_digit());
    match args {
        [] => Ok(Request::Yield(None, None)),
        [id] if is_id(id) => Ok(Request::Yield(None, Some(id_arg("yield", id)?))),
        [g] if valid_group_name(g) => Ok(Request::Yield(Some((*g).to_string()), None)),
        [g, id] if valid_group_name(g) => Ok(Request::Yield(
            Some((*g).to_string()),
            Some(id_arg("yield", id)?),
        )),
        [w] | [w, _] if !valid_group_name(w) && !is_id(w) => Err(Request::Invalid(format!(
            "yield: '{}' is neither a server id (a number) nor a group name",
            shown(w)
        ))),
        _ => Err(Request::Invalid("usage: yield [GROUP] [ID]".into())),
    }
}

/// `supervise [GROUP] [grace_ms=N]`.
fn supervise_args(args: &[&str]) -> Request {
    let (grace, rest): (Vec<&str>, Vec<&str>) =
        args.iter().partition(|a| a.starts_with("grace_ms="));
    let grace = match grace[..] {
        [] => None,
        [g] => match g["grace_ms=".len()..].parse::<u64>() {
            Ok(ms) if ms <= MAX_GRACE_MS => Some(Duration::from_millis(ms)),
            _ => {
                return Request::Invalid(format!(
                    "supervise: '{}' is not a grace in ms (grace_ms=N, N at most {MAX_GRACE_MS})",
                    shown(g)
                ));
            }
        },
        _ => return Request::Invalid("usage: supervise [GROUP] [grace_ms=N]".into()),
    };
    match group_arg("supervise", &rest) {
        Ok(g) => Request::Supervise(g, grace),
        Err(e) => e,
    }
}

/// The largest grace a supervisor may announce (a day: far above any lease).
const MAX_GRACE_MS: u64 = 86_400_000;

impl Request {
    fn parse(line: &str) -> Request {
        let mut words = line.split_whitespace();
        let word = words.next().unwrap_or("");
        if word == "health" {
            return Self::parse_health(line);
        }
        // At most three words are looked at: more is a usage error either way.
        let rest: Vec<&str> = words.take(3).collect();
        let r = rest.as_slice();
        let grouped = |f: fn(Option<String>) -> Request| match group_arg(word, r) {
            Ok(g) => f(g),
            Err(e) => e,
        };
        match (word, r) {
            ("status", _) => grouped(Request::Status),
            ("watch", _) => grouped(Request::Watch),
            ("supervise", _) => supervise_args(r),
            ("elect", _) => grouped(Request::Elect),
            ("drain", _) => grouped(Request::Drain),
            ("undrain", _) => grouped(Request::Undrain),
            ("released", [n]) => match n.parse::<u64>() {
                Ok(n) if n > 0 => Request::Released(n),
                _ => Request::Invalid("released: N must be a line number from 1".into()),
            },
            ("released", _) => Request::Invalid("usage: released N".into()),
            ("leave", []) => Request::Leave,
            ("yield", _) => yield_args(r).unwrap_or_else(|e| e),
            ("metrics", []) => Request::Metrics,
            ("ping", []) => Request::Ping,
            ("reload", []) => Request::Reload,
            ("reload", _) => Request::Invalid("reload takes no arguments".into()),
            _ => Request::Unknown(line.trim().chars().take(64).collect()),
        }
    }

    /// `health ok` or `health failing REASON...` (the reason is free text).
    fn parse_health(line: &str) -> Request {
        let rest = line
            .trim()
            .strip_prefix("health")
            .unwrap_or("")
            .trim_start();
        let (state, reason) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        match (state, reason.trim()) {
            ("ok", "") => Request::Health(None),
            ("failing", r) => {
                let r: String = r
                    .chars()
                    .map(|c| if c.is_control() { '?' } else { c })
                    .take(MAX_HEALTH_REASON)
                    .collect();
                Request::Health(Some(if r.is_empty() {
                    "no reason given".into()
                } else {
                    r
                }))
            }
            _ => Request::Invalid("usage: health ok | health failing REASON".into()),
        }
    }
}

/// The user and process ids of the process at the other end of `stream` (SO_PEERCRED).
fn peer_cred(stream: &UnixStream) -> Option<(u32, u32)> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, which we own.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0 && len as usize == std::mem::size_of::<libc::ucred>())
        .then_some((cred.uid, cred.pid as u32))
}

/// What a client (`electctl`) says when it cannot connect to the socket at `path`: a
/// permission problem is not a stopped daemon, and each has its own remedy.
pub fn connect_error(path: &Path, e: &io::Error) -> String {
    let p = path.display();
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => {
            // The socket, or the directory that holds it when that cannot be searched.
            let group = std::fs::metadata(path)
                .or_else(|_| std::fs::metadata(path.parent().unwrap_or(Path::new("/"))))
                .ok()
                .map(|m| std::os::unix::fs::MetadataExt::gid(&m))
                .map(|gid| crate::access::group_name(gid).unwrap_or_else(|| format!("gid {gid}")));
            format!(
                "permission denied on {p}: run as root or as a member of the socket's group{} (socket-mode)",
                group.map_or(String::new(), |g| format!(" '{g}'"))
            )
        }
        Some(libc::ENOENT | libc::ECONNREFUSED) => {
            format!("cannot connect to {p}: {e} (is electd running?)")
        }
        _ => format!("cannot connect to {p}: {e}"),
    }
}

/// Escapes a string for a JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An `{"error": ...}` answer.
pub fn error_line(msg: &str) -> String {
    format!("{{\"error\":{}}}\n", json_str(msg))
}

/// What a `watch` client is told of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One group's status line per change (the group's index in the configuration).
    Group(usize),
    /// With several groups, one line holding every group's status per change.
    All,
}

/// What the daemon tracks of one supervisor (`electctl run`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Supervisor {
    /// The number of the last line sent (lines count from 1 per connection).
    pub sent: u64,
    /// The number of the last line sent that reported this server as leader (0: none).
    pub last_leader: u64,
    /// The lease end (boot clock, ns) carried by that leader line.
    pub leader_until_ns: u64,
    /// The highest line number confirmed with `released N`.
    pub confirmed: u64,
    /// The election group (index in the configuration) whose lease it supervises.
    pub group: usize,
    /// Its `--grace`, if it said (older clients do not).
    pub grace: Option<Duration>,
}

impl Supervisor {
    /// True when no command of this supervisor can be running on a lease it was told of:
    /// it never heard of one, or it confirmed a line sent after the last leader line.
    pub fn clear(&self) -> bool {
        self.last_leader == 0 || self.confirmed > self.last_leader
    }
}

#[derive(Debug)]
struct Client {
    stream: UnixStream,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    /// What a `watch` client is told of: one group's changes, or every group's.
    watching: Option<Scope>,
    sup: Option<Supervisor>,
    /// A supervisor's report that its command is unhealthy (`health failing`).
    unhealthy: Option<String>,
    /// The peer finished sending: answer what is buffered, then close.
    eof: bool,
    /// Being dropped (a limit or an error): nothing more is queued, freed soon.
    dropping: Option<Instant>,
    last_active: Instant,
    /// The kernel may hold unread bytes: reading stopped before WouldBlock.
    more: bool,
    /// A line over `MAX_REQUEST` came after the buffered ones: refuse it once they
    /// are answered.
    too_long: bool,
    /// The client's user id as the kernel saw it at connect (SO_PEERCRED), if known.
    peer_uid: Option<u32>,
    /// This connection's number (never reused): a held answer goes only to the
    /// connection that asked, never to a later client in the same slot.
    serial: u64,
    /// An answer is held until a write is durable (`drain`): no further request of
    /// this client is served before it, and the client is not closed meanwhile.
    held: bool,
    /// The client's process id at connect (SO_PEERCRED), if known.
    peer_pid: Option<u32>,
}

impl Client {
    fn has_line(&self) -> bool {
        self.inbuf.contains(&b'\n')
    }

    /// Requests of this client may be handed to the daemon now.
    fn servable(&self) -> bool {
        !self.held
            && self.dropping.is_none()
            && self.outbuf.len() < MAX_OUTBUF / 2
            && self.has_line()
    }

    /// The socket should be read again without waiting for an event.
    fn wants_read(&self) -> bool {
        self.more && !self.eof && self.dropping.is_none() && self.inbuf.len() < INBUF_CAP
    }

    fn drop_now(&mut self, now: Instant) {
        if self.dropping.is_none() {
            self.dropping = Some(now);
        }
    }
}

/// Counters for metrics.
#[derive(Clone, Debug, Default)]
pub struct ControlCounters {
    /// Requests answered.
    pub requests: u64,
    /// Clients refused because the limit was reached.
    pub refused: u64,
    /// Clients dropped: too long a request, too slow a reader, or idle.
    pub dropped: u64,
    /// Supervisors that left with a lease they had not confirmed the end of.
    pub departed_unconfirmed: u64,
}

/// The listening socket and its clients.
#[derive(Debug)]
pub struct Control {
    listener: UnixListener,
    path: PathBuf,
    clients: Vec<Option<Client>>,
    first_token: usize,
    /// Counters for metrics.
    pub counters: ControlCounters,
    /// The slot served first at the next wakeup (round-robin).
    next_slot: usize,
    /// Per group, the latest lease end (boot clock, ns) known to a supervisor that left
    /// without confirming: its command may run until then.
    departed_until_ns: Vec<u64>,
    /// The serial of the next connection.
    next_serial: u64,
}

/// An answer the daemon holds for a client until something it reports is durable
/// (see [`Control::hold`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldReply {
    slot: usize,
    serial: u64,
}

impl Control {
    /// Binds the socket at `path` with `mode`, replacing a stale socket file but never a
    /// live one (another daemon answering there is an error).
    pub fn bind(path: &Path, mode: u32, first_token: usize) -> io::Result<Control> {
        if path.exists() {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{} is in use by a running daemon", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot bind {}: {e}", path.display()))
        })?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
        Ok(Control {
            listener,
            path: path.to_path_buf(),
            clients: (0..MAX_CLIENTS).map(|_| None).collect(),
            first_token: first_token + 1,
            counters: ControlCounters::default(),
            next_slot: 0,
            departed_until_ns: Vec::new(),
            next_serial: 0,
        })
    }

    /// Registers the listener under `token`.
    pub fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(&mut self.listener, token, Interest::READABLE)
    }

    /// True if `token` belongs to a client of this control socket.
    pub fn owns(&self, token: Token) -> bool {
        (self.first_token..self.first_token + MAX_CLIENTS).contains(&token.0)
    }

    /// Accepts every pending connection (refusing those over the limit).
    pub fn accept(&mut self, registry: &Registry, now: Instant) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, _)) => {
                    let free = self.clients.iter().position(Option::is_none);
                    let Some(slot) = free.or_else(|| self.evict_idle(registry)) else {
                        self.counters.refused += 1;
                        let _ = stream.write(error_line("too many clients").as_bytes());
                        continue;
                    };
                    let token = Token(self.first_token + slot);
                    if registry
                        .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
                        .is_err()
                    {
                        continue;
                    }
                    let cred = peer_cred(&stream);
                    self.clients[slot] = Some(Client {
                        stream,
                        inbuf: Vec::new(),
                        outbuf: Vec::new(),
                        watching: None,
                        sup: None,
                        unhealthy: None,
                        eof: false,
                        dropping: None,
                        last_active: now,
                        more: false,
                        too_long: false,
                        peer_uid: cred.map(|c| c.0),
                        peer_pid: cred.map(|c| c.1),
                        serial: self.next_serial,
                        held: false,
                    });
                    self.next_serial += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::warn!("control socket accept: {e}");
                    break;
                }
            }
        }
    }

    /// When every slot is taken, frees the one of the client idle longest that is not
    /// watching or supervising and has nothing in flight: clients that connect and send
    /// nothing cannot lock everyone else out. Only 64 watchers fill the socket for good.
    fn evict_idle(&mut self, registry: &Registry) -> Option<usize> {
        let slot = (0..MAX_CLIENTS)
            .filter(|&i| {
                self.clients[i].as_ref().is_some_and(|c| {
                    c.watching.is_none()
                        && c.sup.is_none()
                        && c.dropping.is_none()
                        && c.outbuf.is_empty()
                        && c.inbuf.is_empty()
                        && !c.more
                })
            })
            .min_by_key(|&i| self.clients[i].as_ref().map(|c| c.last_active))?;
        self.counters.dropped += 1;
        self.free(slot, registry);
        Some(slot)
    }

    /// Frees slot `slot`. A supervisor that was not clear leaves its lease end behind:
    /// its command may still run until then.
    fn free(&mut self, slot: usize, registry: &Registry) {
        let Some(mut c) = self.clients[slot].take() else {
            return;
        };
        let _ = registry.deregister(&mut c.stream);
        if let Some(why) = c.unhealthy.take().filter(|_| c.sup.is_some()) {
            log::warn!(
                "supervisor on control client {slot} disconnected: its unhealthy report ({why}) goes with it"
            );
        }
        if let Some(s) = c.sup.filter(|s| !s.clear()) {
            self.counters.departed_unconfirmed += 1;
            if self.departed_until_ns.len() <= s.group {
                self.departed_until_ns.resize(s.group + 1, 0);
            }
            let d = &mut self.departed_until_ns[s.group];
            *d = (*d).max(s.leader_until_ns);
            log::warn!(
                "supervisor on control client {slot} left without confirming the end of the lease of line {}: a handoff waits for that lease end",
                s.last_leader
            );
        }
    }

    /// Reads from client `token` after a readiness event.
    pub fn readable(&mut self, token: Token, now: Instant) {
        if let Some(slot) = token.0.checked_sub(self.first_token) {
            self.read_client(slot, now);
        }
    }

    /// True when requests are buffered or sockets hold unread bytes: the next wakeup
    /// must not wait on poll.
    pub fn has_more(&self) -> bool {
        self.clients
            .iter()
            .flatten()
            .any(|c| c.servable() || c.wants_read() || (c.too_long && c.dropping.is_none()))
    }

    /// Reads what a client sent, up to `INBUF_CAP` buffered bytes.
    fn read_client(&mut self, slot: usize, now: Instant) {
        let Some(c) = self.clients.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let mut buf = [0u8; 4096];
        c.more = false;
        while !c.eof && c.dropping.is_none() {
            let room = INBUF_CAP.saturating_sub(c.inbuf.len());
            if room == 0 {
                c.more = true;
                break;
            }
            let cap = buf.len().min(room);
            match c.stream.read(&mut buf[..cap]) {
                Ok(0) => c.eof = true,
                Ok(n) => {
                    c.last_active = now;
                    c.inbuf.extend_from_slice(&buf[..n]);
                    // A line still open after MAX_REQUEST bytes is too long already.
                    let open = c.inbuf.iter().rev().take_while(|&&b| b != b'\n').count();
                    if open > MAX_REQUEST {
                        Self::line_too_long(c, &mut self.counters, now);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    c.eof = true;
                    c.drop_now(now);
                }
            }
        }
    }

    /// A line is over `MAX_REQUEST`: the complete lines before it are answered, then
    /// the client is told why and closed. Nothing more is read from it.
    fn line_too_long(c: &mut Client, counters: &mut ControlCounters, now: Instant) {
        counters.dropped += 1;
        let keep = c
            .inbuf
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        c.inbuf.truncate(keep);
        c.more = false;
        c.eof = true;
        c.too_long = true;
        if !c.has_line() {
            Self::refuse_long(c, now);
        }
    }

    fn refuse_long(c: &mut Client, now: Instant) {
        c.inbuf.clear();
        c.too_long = false;
        c.outbuf.extend_from_slice(
            error_line(&format!("request longer than {MAX_REQUEST} bytes")).as_bytes(),
        );
        c.drop_now(now);
    }

    /// The requests to answer in this wakeup: at most `REQUESTS_PER_CLIENT` per client
    /// and `REQUESTS_PER_WAKEUP` in all, round-robin from where the last wakeup stopped.
    pub fn take_requests(&mut self, now: Instant) -> Vec<(usize, Request)> {
        for slot in 0..MAX_CLIENTS {
            if self.clients[slot].as_ref().is_some_and(Client::wants_read) {
                self.read_client(slot, now);
            }
        }
        let mut out = Vec::new();
        let start = self.next_slot;
        for i in 0..MAX_CLIENTS {
            if out.len() >= REQUESTS_PER_WAKEUP {
                break;
            }
            let slot = (start + i) % MAX_CLIENTS;
            let Some(c) = self.clients[slot].as_mut() else {
                continue;
            };
            let mut taken = 0;
            while taken < REQUESTS_PER_CLIENT && out.len() < REQUESTS_PER_WAKEUP && c.servable() {
                let pos = c
                    .inbuf
                    .iter()
                    .position(|&b| b == b'\n')
                    .expect("has a line");
                let line: Vec<u8> = c.inbuf.drain(..=pos).collect();
                let line = &line[..line.len() - 1];
                if line.len() > MAX_REQUEST {
                    // A whole line over the limit arrived in one read.
                    self.counters.dropped += 1;
                    Self::refuse_long(c, now);
                    break;
                }
                let text = String::from_utf8_lossy(line);
                if text.trim().is_empty() {
                    continue;
                }
                c.last_active = now;
                out.push((slot, Request::parse(&text)));
                taken += 1;
            }
            // Refused at the next wakeup, after the answers to this one's requests.
            if c.too_long && !c.has_line() && c.dropping.is_none() && taken == 0 {
                Self::refuse_long(c, now);
            }
            if taken > 0 {
                self.next_slot = (slot + 1) % MAX_CLIENTS;
            }
        }
        self.counters.requests += out.len() as u64;
        out
    }

    /// Queues `line` for client `slot`. A client being dropped gets nothing more; one
    /// whose buffer would exceed `MAX_OUTBUF` is dropped (a single answer up to
    /// `MAX_ANSWER` is queued when nothing else is).
    pub fn reply(&mut self, slot: usize, line: &str) {
        let Some(c) = self.clients.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if c.dropping.is_some() {
            return;
        }
        let fits = if c.outbuf.is_empty() {
            line.len() <= MAX_ANSWER
        } else {
            c.outbuf.len() + line.len() <= MAX_OUTBUF
        };
        if !fits {
            log::warn!("control client {slot} is not reading its answers: dropped");
            self.counters.dropped += 1;
            c.drop_now(Instant::now());
            c.outbuf.clear();
            c.inbuf.clear();
            return;
        }
        c.outbuf.extend_from_slice(line.as_bytes());
    }

    /// Holds the answer to client `slot`'s current request: nothing more of it is
    /// served, and it is not closed, until [`Control::reply_held`]. None when there is
    /// no such client.
    pub fn hold(&mut self, slot: usize) -> Option<HeldReply> {
        let c = self.clients.get_mut(slot)?.as_mut()?;
        c.held = true;
        Some(HeldReply {
            slot,
            serial: c.serial,
        })
    }

    /// Sends a held answer, if the connection that asked is still there.
    pub fn reply_held(&mut self, h: HeldReply, line: &str) {
        let Some(c) = self.clients.get_mut(h.slot).and_then(Option::as_mut) else {
            return;
        };
        if c.serial != h.serial {
            return;
        }
        c.held = false;
        self.reply(h.slot, line);
    }

    /// The user id of client `slot` (SO_PEERCRED at connect), if known.
    pub fn peer_uid(&self, slot: usize) -> Option<u32> {
        self.clients.get(slot)?.as_ref()?.peer_uid
    }

    /// Marks client `slot` as a watcher of `scope`.
    pub fn watch(&mut self, slot: usize, scope: Scope) {
        if let Some(c) = self.clients[slot].as_mut() {
            c.watching = Some(scope);
        }
    }

    /// Queues `line` for every watcher of `scope`.
    pub fn broadcast(&mut self, scope: Scope, line: &str) {
        for slot in 0..MAX_CLIENTS {
            if self.clients[slot]
                .as_ref()
                .is_some_and(|c| c.watching == Some(scope) && c.dropping.is_none() && !c.eof)
            {
                self.reply(slot, line);
            }
        }
    }

    /// Marks client `slot` as a supervisor of `group`'s lease (once; later `supervise`
    /// requests only ask for a fresh line). A connection supervises one group: asking
    /// for another is an error.
    pub fn supervise(
        &mut self,
        slot: usize,
        group: usize,
        grace: Option<Duration>,
    ) -> Result<(), String> {
        let Some(c) = self.clients[slot].as_mut() else {
            return Ok(());
        };
        let s = c.sup.get_or_insert(Supervisor {
            group,
            ..Supervisor::default()
        });
        if s.group != group {
            return Err("supervise: this connection supervises another group".into());
        }
        if grace.is_some() {
            s.grace = grace;
        }
        Ok(())
    }

    /// The supervisors of `group` that announced a grace: (slot, peer pid, grace).
    pub fn supervisor_graces(
        &self,
        group: usize,
    ) -> impl Iterator<Item = (usize, Option<u32>, Duration)> + '_ {
        self.clients
            .iter()
            .enumerate()
            .filter_map(move |(slot, c)| {
                let c = c.as_ref()?;
                let s = c.sup.filter(|s| s.group == group)?;
                Some((slot, c.peer_pid, s.grace?))
            })
    }

    /// The group supervised by client `slot`, if it is a supervisor.
    pub fn supervised_group(&self, slot: usize) -> Option<usize> {
        Some(self.clients.get(slot)?.as_ref()?.sup?.group)
    }

    /// Sends supervisor `slot` its next numbered line: `{"n":N,` then `fields` (JSON
    /// members without braces) then `}`. `leader_until_ns` is Some for a leader line.
    pub fn push_supervisor(&mut self, slot: usize, fields: &str, leader_until_ns: Option<u64>) {
        let Some(c) = self.clients.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if c.dropping.is_some() || c.eof {
            return;
        }
        let Some(s) = c.sup.as_mut() else { return };
        s.sent += 1;
        if let Some(u) = leader_until_ns {
            s.last_leader = s.sent;
            s.leader_until_ns = u;
        }
        let line = format!("{{\"n\":{},{fields}}}\n", s.sent);
        self.reply(slot, &line);
    }

    /// Sends every supervisor of `group` its next numbered line (see `push_supervisor`).
    pub fn push_supervisors(&mut self, group: usize, fields: &str, leader_until_ns: Option<u64>) {
        for slot in 0..MAX_CLIENTS {
            if self.supervised_group(slot) == Some(group) {
                self.push_supervisor(slot, fields, leader_until_ns);
            }
        }
    }

    /// Records `released n` from client `slot`.
    pub fn confirm(&mut self, slot: usize, n: u64) -> Result<(), String> {
        let Some(s) = self.clients[slot].as_mut().and_then(|c| c.sup.as_mut()) else {
            return Err("released: not a supervisor (send 'supervise' first)".into());
        };
        if n > s.sent {
            return Err(format!("released {n}: only {} lines were sent", s.sent));
        }
        s.confirmed = s.confirmed.max(n);
        Ok(())
    }

    /// Client `slot` stops supervising: its command has exited and none will start, so
    /// its departure is no unconfirmed lease.
    pub fn leave(&mut self, slot: usize) {
        if let Some(c) = self.clients[slot].as_mut() {
            if let Some(why) = c.unhealthy.take().filter(|_| c.sup.is_some()) {
                log::info!(
                    "supervisor on control client {slot} left: its unhealthy report ({why}) goes with it"
                );
            }
            c.sup = None;
        }
    }

    /// Records a supervisor's health report (None: healthy). Only a supervisor may
    /// report; the report lasts until the next one or until it leaves.
    pub fn set_supervisor_health(
        &mut self,
        slot: usize,
        report: Option<String>,
    ) -> Result<(), String> {
        let Some(c) = self.clients[slot].as_mut().filter(|c| c.sup.is_some()) else {
            return Err("health: not a supervisor (send 'supervise' first)".into());
        };
        match (&c.unhealthy, &report) {
            (None, Some(why)) => {
                log::warn!(
                    "supervisor on control client {slot} reports its command unhealthy: {why}"
                )
            }
            (Some(_), None) => {
                log::info!("supervisor on control client {slot} reports its command healthy again")
            }
            _ => {}
        }
        c.unhealthy = report;
        Ok(())
    }

    /// The supervisors of `group` that report their command unhealthy: (slot, reason).
    pub fn unhealthy_supervisors(&self, group: usize) -> impl Iterator<Item = (usize, &str)> + '_ {
        self.clients
            .iter()
            .enumerate()
            .filter_map(move |(slot, c)| {
                let c = c.as_ref()?;
                if c.sup?.group != group {
                    return None;
                }
                Some((slot, c.unhealthy.as_deref()?))
            })
    }

    /// True when every supervisor of `group` is clear and none that left unconfirmed can
    /// still hold a lease of it at `now_ns` (boot clock): a handoff's RESIGN may leave.
    pub fn supervisors_clear(&self, group: usize, now_ns: u64) -> bool {
        now_ns >= self.departed_until_ns(group)
            && self
                .clients
                .iter()
                .flatten()
                .filter_map(|c| c.sup)
                .filter(|s| s.group == group)
                .all(|s| s.clear())
    }

    /// The lease end of `group`'s supervisors that left unconfirmed (boot clock, ns; 0
    /// if none).
    pub fn departed_until_ns(&self, group: usize) -> u64 {
        self.departed_until_ns.get(group).copied().unwrap_or(0)
    }

    /// The number of registered supervisors of `group`.
    pub fn supervisors(&self, group: usize) -> usize {
        self.clients
            .iter()
            .flatten()
            .filter(|c| c.sup.is_some_and(|s| s.group == group))
            .count()
    }

    /// Writes queued answers, closes finished, dropped and idle clients.
    pub fn flush(&mut self, registry: &Registry, now: Instant) {
        for slot in 0..MAX_CLIENTS {
            let Some(c) = self.clients[slot].as_mut() else {
                continue;
            };
            let mut stuck = false;
            while !c.outbuf.is_empty() {
                match c.stream.write(&c.outbuf) {
                    Ok(0) => {
                        c.drop_now(now);
                        c.outbuf.clear();
                    }
                    Ok(n) => {
                        c.outbuf.drain(..n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        stuck = true;
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => {
                        c.drop_now(now);
                        c.outbuf.clear();
                    }
                }
            }
            let idle = c.watching.is_none()
                && c.sup.is_none()
                && !c.held
                && now.duration_since(c.last_active) >= IDLE_TIMEOUT;
            if idle {
                self.counters.dropped += 1;
            }
            // A dropped client is freed once its last answer is out, or after LINGER if
            // it cannot be written: a client that stops reading never keeps its slot.
            let dropped = c
                .dropping
                .is_some_and(|t| c.outbuf.is_empty() || (stuck && now.duration_since(t) >= LINGER));
            let finished = c.eof && !c.held && !c.has_line() && !c.too_long && c.outbuf.is_empty();
            if dropped || finished || idle {
                self.free(slot, registry);
            }
        }
    }

    /// The number of connected clients.
    pub fn clients(&self) -> usize {
        self.clients.iter().flatten().count()
    }

    /// The number of watchers.
    /// True when a client watches `scope` (and is not being dropped).
    pub fn watches(&self, scope: Scope) -> bool {
        self.clients
            .iter()
            .flatten()
            .any(|c| c.watching == Some(scope) && c.dropping.is_none())
    }

    /// Clients watching.
    pub fn watchers(&self) -> usize {
        self.clients
            .iter()
            .flatten()
            .filter(|c| c.watching.is_some())
            .count()
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::Poll;
    use std::io::BufRead;

    #[test]
    fn requests_parse_and_json_escapes() {
        assert_eq!(Request::parse("status\r"), Request::Status(None));
        assert_eq!(Request::parse(" watch "), Request::Watch(None));
        assert_eq!(Request::parse("supervise"), Request::Supervise(None, None));
        assert_eq!(
            Request::parse("supervise grace_ms=250"),
            Request::Supervise(None, Some(Duration::from_millis(250)))
        );
        assert!(matches!(
            Request::parse("supervise grace_ms=x"),
            Request::Invalid(_)
        ));
        assert!(matches!(
            Request::parse("supervise grace_ms=1 grace_ms=2"),
            Request::Invalid(_)
        ));
        assert_eq!(Request::parse("released 7"), Request::Released(7));
        assert!(matches!(Request::parse("released 0"), Request::Invalid(_)));
        assert!(matches!(Request::parse("released x"), Request::Invalid(_)));
        assert!(matches!(Request::parse("released"), Request::Invalid(_)));
        assert!(matches!(
            Request::parse("released 99999999999999999999999"),
            Request::Invalid(_)
        ));
        assert_eq!(Request::parse("leave"), Request::Leave);
        assert_eq!(Request::parse("reload"), Request::Reload);
        assert!(matches!(Request::parse("reload now"), Request::Invalid(_)));
        assert_eq!(Request::parse("yield"), Request::Yield(None, None));
        assert_eq!(Request::parse("yield 2"), Request::Yield(None, Some(2)));
        // A number is always an id: 0 and 999 reach the daemon, which knows the list.
        assert_eq!(Request::parse("yield 0"), Request::Yield(None, Some(0)));
        assert_eq!(Request::parse("yield 999"), Request::Yield(None, Some(999)));
        assert_eq!(
            Request::parse("yield Abc"),
            Request::Invalid(
                "yield: 'Abc' is neither a server id (a number) nor a group name".into()
            )
        );
        assert_eq!(
            Request::parse("yield -1"),
            Request::Invalid(
                "yield: '-1' is neither a server id (a number) nor a group name".into()
            )
        );
        assert_eq!(
            Request::parse("yield 99999999999999999999"),
            Request::Invalid("yield: no server 99999999999999999999 in the server list".into())
        );
        assert_eq!(
            Request::parse("yield 1 2"),
            Request::Invalid("usage: yield [GROUP] [ID]".into())
        );
        assert_eq!(Request::parse("drain"), Request::Drain(None));
        assert_eq!(Request::parse(" undrain\r"), Request::Undrain(None));
        assert_eq!(
            Request::parse("drain Extra"),
            Request::Invalid("drain: 'Extra' is not a group name ([a-z][a-z0-9_-]{0,31})".into())
        );
        assert_eq!(
            Request::parse("undrain now please"),
            Request::Invalid("usage: undrain [GROUP]".into())
        );
        // Election groups (SPEC section 15): a letter first is a group, digits an id.
        let g = || Some("orders".to_string());
        assert_eq!(Request::parse("status orders"), Request::Status(g()));
        assert_eq!(Request::parse("watch orders"), Request::Watch(g()));
        assert_eq!(
            Request::parse("supervise orders"),
            Request::Supervise(g(), None)
        );
        assert_eq!(
            Request::parse("supervise orders grace_ms=7"),
            Request::Supervise(g(), Some(Duration::from_millis(7)))
        );
        assert_eq!(Request::parse("elect orders"), Request::Elect(g()));
        assert_eq!(Request::parse("drain orders"), Request::Drain(g()));
        assert_eq!(Request::parse("undrain orders"), Request::Undrain(g()));
        assert_eq!(Request::parse("yield orders"), Request::Yield(g(), None));
        assert_eq!(
            Request::parse("yield orders 3"),
            Request::Yield(g(), Some(3))
        );
        assert_eq!(Request::parse("yield 3"), Request::Yield(None, Some(3)));
        assert!(matches!(
            Request::parse("yield orders x"),
            Request::Invalid(_)
        ));
        assert!(matches!(
            Request::parse("yield 3 orders"),
            Request::Invalid(_)
        ));
        assert!(matches!(Request::parse("status a b"), Request::Invalid(_)));
        assert!(matches!(Request::parse("status 1x"), Request::Invalid(_)));
        let long = format!("status a{}", "b".repeat(32));
        assert!(
            matches!(Request::parse(&long), Request::Invalid(_)),
            "33 characters"
        );
        assert_eq!(
            Request::parse(&format!("status a{}", "b".repeat(31))),
            Request::Status(Some(format!("a{}", "b".repeat(31))))
        );
        assert_eq!(Request::parse("health ok"), Request::Health(None));
        assert_eq!(
            Request::parse("health failing 3 exits in 60s"),
            Request::Health(Some("3 exits in 60s".into()))
        );
        assert_eq!(
            Request::parse("health failing"),
            Request::Health(Some("no reason given".into()))
        );
        assert!(matches!(Request::parse("health"), Request::Invalid(_)));
        assert!(matches!(
            Request::parse("health ok really"),
            Request::Invalid(_)
        ));
        assert!(matches!(Request::parse("health bad"), Request::Invalid(_)));
        let Request::Health(Some(long)) =
            Request::parse(&format!("health failing {}", "x".repeat(900)))
        else {
            panic!("a long reason is truncated, not refused");
        };
        assert_eq!(long.len(), MAX_HEALTH_REASON);
        assert_eq!(Request::parse("bogus"), Request::Unknown("bogus".into()));
        assert_eq!(json_str("a\"b\\c\n"), r#""a\"b\\c\u000a""#);
        assert_eq!(error_line("x"), "{\"error\":\"x\"}\n");
    }

    struct Fixture {
        poll: Poll,
        control: Control,
        path: PathBuf,
    }

    impl Fixture {
        fn new(tag: &str) -> Fixture {
            let path = std::env::temp_dir()
                .join(format!("electd-control-{tag}-{}.sock", std::process::id()));
            let _ = std::fs::remove_file(&path);
            let poll = Poll::new().unwrap();
            let mut control = Control::bind(&path, 0o600, 10).unwrap();
            control.register(poll.registry(), Token(10)).unwrap();
            Fixture {
                poll,
                control,
                path,
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
                if self.control.clients[slot].is_some() {
                    self.control
                        .readable(Token(self.control.first_token + slot), Instant::now());
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
            assert_eq!(*r, Request::Ping);
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
        let reqs = f.control.take_requests(Instant::now());
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

    #[test]
    fn supervisors_are_clear_only_after_confirming_a_later_line() {
        let mut f = Fixture::new("sup");
        let s = f.connect();
        assert!(f.control.supervisors_clear(0, 0));
        f.control.supervise(0, 0, None).unwrap();
        assert!(f.control.supervisors_clear(0, 0), "no lease told yet");
        f.control
            .push_supervisor(0, "\"role\":\"leader\"", Some(5_000));
        assert!(!f.control.supervisors_clear(0, 0));
        f.control
            .push_supervisor(0, "\"role\":\"leader\"", Some(6_000));
        assert!(f.control.confirm(0, 3).is_err(), "line 3 was never sent");
        f.control.confirm(0, 2).unwrap();
        assert!(
            !f.control.supervisors_clear(0, 0),
            "line 2 is a leader line"
        );
        f.control.push_supervisor(0, "\"role\":\"follower\"", None);
        f.control.confirm(0, 3).unwrap();
        assert!(f.control.supervisors_clear(0, 0));
        // Told of a new lease, then gone without confirming: no confirmation, but
        // only until the lease end it was told of.
        f.control
            .push_supervisor(0, "\"role\":\"leader\"", Some(9_000));
        drop(s);
        f.read_all();
        f.flush();
        assert_eq!(f.control.supervisors(0), 0);
        assert!(!f.control.supervisors_clear(0, 8_999));
        assert!(f.control.supervisors_clear(0, 9_000));
        assert_eq!(f.control.counters.departed_unconfirmed, 1);
    }

    #[test]
    fn a_supervisors_health_report_goes_with_it() {
        let mut f = Fixture::new("health");
        let s = f.connect();
        let _other = f.connect();
        assert!(
            f.control
                .set_supervisor_health(1, Some("x".into()))
                .is_err(),
            "only a supervisor reports health"
        );
        f.control.supervise(0, 0, None).unwrap();
        f.control
            .set_supervisor_health(0, Some("3 exits in 60s".into()))
            .unwrap();
        let all: Vec<_> = f.control.unhealthy_supervisors(0).collect();
        assert_eq!(all, vec![(0, "3 exits in 60s")]);
        f.control.set_supervisor_health(0, None).unwrap();
        assert_eq!(f.control.unhealthy_supervisors(0).count(), 0);
        f.control
            .set_supervisor_health(0, Some("again".into()))
            .unwrap();
        drop(s);
        f.read_all();
        f.flush();
        assert_eq!(f.control.unhealthy_supervisors(0).count(), 0);
        // `leave` takes it too.
        let _t = f.connect();
        let slot = (0..MAX_CLIENTS)
            .find(|&i| f.control.clients[i].is_some() && i != 1)
            .unwrap();
        f.control.supervise(slot, 0, None).unwrap();
        f.control
            .set_supervisor_health(slot, Some("x".into()))
            .unwrap();
        f.control.leave(slot);
        assert_eq!(f.control.unhealthy_supervisors(0).count(), 0);
    }

    #[test]
    fn a_supervisor_that_leaves_cleanly_holds_nothing() {
        let mut f = Fixture::new("leave");
        let s = f.connect();
        f.control.supervise(0, 0, None).unwrap();
        f.control
            .push_supervisor(0, "\"role\":\"leader\"", Some(9_000));
        f.control.leave(0);
        drop(s);
        f.read_all();
        f.flush();
        assert!(f.control.supervisors_clear(0, 0));
        assert!(f.control.confirm(0, 1).is_err());
    }

    /// SPEC section 15: a group's handoff waits only for that group's supervisors, a
    /// supervisor that leaves unconfirmed holds back only its own group, and a
    /// connection supervises one group.
    #[test]
    fn supervisors_and_watchers_belong_to_one_group() {
        let mut f = Fixture::new("groups");
        let a = f.connect();
        let _b = f.connect();
        f.control.supervise(0, 0, None).unwrap();
        f.control.supervise(1, 1, None).unwrap();
        assert!(
            f.control.supervise(1, 0, None).is_err(),
            "one group per connection"
        );
        assert_eq!(f.control.supervised_group(1), Some(1));
        f.control
            .push_supervisors(1, "\"role\":\"leader\"", Some(7_000));
        assert!(
            f.control.supervisors_clear(0, 0),
            "group 0 was told of no lease"
        );
        assert!(!f.control.supervisors_clear(1, 0));
        assert_eq!((f.control.supervisors(0), f.control.supervisors(1)), (1, 1));
        f.control
            .push_supervisors(0, "\"role\":\"leader\"", Some(9_000));
        drop(a);
        f.read_all();
        f.flush();
        assert_eq!(f.control.departed_until_ns(0), 9_000);
        assert_eq!(
            f.control.departed_until_ns(1),
            0,
            "group 1's supervisor stayed"
        );
        assert!(!f.control.supervisors_clear(0, 8_999));
        assert!(f.control.supervisors_clear(0, 9_000));
        // Watchers hear only their scope.
        let w = f.connect();
        let slot = (0..MAX_CLIENTS)
            .find(|&i| {
                f.control.clients[i]
                    .as_ref()
                    .is_some_and(|c| c.sup.is_none())
            })
            .unwrap();
        f.control.watch(slot, Scope::Group(1));
        f.control.broadcast(Scope::Group(0), "zero\n");
        f.control.broadcast(Scope::All, "all\n");
        f.control.broadcast(Scope::Group(1), "one\n");
        f.flush();
        let mut r = std::io::BufReader::new(w);
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        assert_eq!(l, "one\n");
    }
}

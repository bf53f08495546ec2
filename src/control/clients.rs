//! The control socket's clients on the shared connection table (`crate::conns`):
//! accept, request lines read and taken round-robin, bounded answer buffers, slow
//! readers and idle clients dropped, each with the control socket's own limits.

use super::closer::{self, CLOSE_BACKLOG};
use super::passed::{FdStream, MAX_PARKED, PassRefused, Passed, Pending};
use super::request::{MAX_REQUEST, Request, error_line};
use crate::conns::{Conn, Table, Take, Written};
use crate::host::ClientId;
use mio::net::{UnixListener, UnixStream};
use mio::{Interest, Registry, Token};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

/// What a `watch` client is told of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One group's status line per change (the group's index in the configuration).
    Group(usize),
    /// With several groups, one line holding every group's status per change.
    All,
}

/// A client of the control socket: the shared connection (its `closing` is "being
/// dropped": a limit or an error; nothing more is queued, freed soon) and its state.
pub(super) type Client = Conn<FdStream, ClientState>;

/// What the control socket tracks of one client beyond its bytes.
#[derive(Debug)]
pub(super) struct ClientState {
    /// What a `watch` client is told of: one group's changes, or every group's.
    pub(super) watching: Option<Scope>,
    /// It supervises a lease (`supervise`; the host's registry has the rest).
    pub(super) supervising: bool,
    pub(super) last_active: Instant,
    /// A line over `MAX_REQUEST` came after the buffered ones: refuse it once they
    /// are answered.
    pub(super) too_long: bool,
    /// The client's user id as the kernel saw it at connect (SO_PEERCRED), if known.
    pub(super) peer_uid: Option<u32>,
    /// This connection's number (never reused): a held answer goes only to the
    /// connection that asked, never to a later client in the same slot.
    pub(super) serial: u64,
    /// An answer is held until a write is durable (`drain`): no further request of
    /// this client is served before it, and the client is not closed meanwhile.
    pub(super) held: bool,
    /// The client's process id at connect (SO_PEERCRED), if known.
    pub(super) peer_pid: Option<u32>,
    /// Descriptors passed (SCM_RIGHTS) waiting for the request lines they came with.
    pub(super) passed: Pending,
    /// A supervisor's stop timers, armed at each renewal; closed when it goes.
    pub(super) timers: Option<crate::supervise::StopTimers>,
}

impl Client {
    fn has_line(&self) -> bool {
        self.inbuf.contains(&b'\n')
    }

    /// Requests of this client may be handed to the daemon now.
    fn servable(&self) -> bool {
        !self.held
            && self.closing.is_none()
            && self.outbuf.len() < MAX_OUTBUF / 2
            && self.has_line()
    }

    /// The socket should be read again without waiting for an event.
    fn wants_read(&self) -> bool {
        self.more && !self.eof && self.closing.is_none() && self.inbuf.len() < INBUF_CAP
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
    /// Batches of passed descriptors refused and closed unused: too many, a line not
    /// ended by the next read, another batch waiting, the daemon's cap.
    pub passed_refused: u64,
}

/// The listening socket and its clients.
#[derive(Debug)]
pub struct Control {
    pub(super) listener: UnixListener,
    pub(super) path: PathBuf,
    pub(super) clients: Table<FdStream, ClientState>,
    /// Counters for metrics.
    pub counters: ControlCounters,
    /// Supervisors freed since the last `take_departed`.
    pub(super) departed: Vec<ClientId>,
    /// The serial of the next connection.
    pub(super) next_serial: u64,
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
            clients: Table::new(MAX_CLIENTS, first_token + 1).write_on_demand(),
            counters: ControlCounters::default(),
            departed: Vec::new(),
            next_serial: 0,
        })
    }

    /// Registers the listener under `token`.
    pub fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(&mut self.listener, token, Interest::READABLE)
    }

    /// True if `token` belongs to a client of this control socket.
    pub fn owns(&self, token: Token) -> bool {
        self.clients.owns(token)
    }

    /// Accepts every pending connection (refusing those over the limit).
    pub fn accept(&mut self, registry: &Registry, now: Instant) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, _)) => {
                    let free = self.clients.free_slot();
                    let Some(slot) = free.or_else(|| self.evict_idle(registry)) else {
                        self.counters.refused += 1;
                        let _ = stream.write(error_line("too many clients").as_bytes());
                        continue;
                    };
                    let cred = peer_cred(&stream);
                    let state = ClientState {
                        watching: None,
                        supervising: false,
                        last_active: now,
                        too_long: false,
                        peer_uid: cred.map(|c| c.0),
                        peer_pid: cred.map(|c| c.1),
                        serial: self.next_serial,
                        held: false,
                        passed: Pending::default(),
                        timers: None,
                    };
                    let stream = FdStream::new(stream);
                    if self
                        .clients
                        .insert(registry, slot, Conn::new(stream, false, state))
                    {
                        self.next_serial += 1;
                    }
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
        let (slot, _) = self
            .clients
            .iter()
            .filter(|(_, c)| {
                c.watching.is_none()
                    && !c.supervising
                    && c.closing.is_none()
                    && c.outbuf.is_empty()
                    && c.inbuf.is_empty()
                    && !c.more
            })
            .min_by_key(|(_, c)| c.last_active)?;
        self.counters.dropped += 1;
        self.free(slot, registry);
        Some(slot)
    }

    /// Frees slot `slot`. A supervisor that was not clear leaves its lease end behind:
    /// its command may still run until then.
    fn free(&mut self, slot: usize, registry: &Registry) {
        if let Some(mut c) = self.clients.remove(registry, slot) {
            self.depart(slot, &mut c);
        }
    }

    /// Reads from client `token` after a readiness event.
    pub fn readable(&mut self, token: Token, now: Instant) {
        if let Some(slot) = self.clients.slot(token) {
            self.read_client(slot, now);
        }
    }

    /// True when requests are buffered or sockets hold unread bytes: the next wakeup
    /// must not wait on poll (unread bytes wait while reads are paused).
    pub fn has_more(&self) -> bool {
        let paused = Self::reads_paused();
        self.clients.iter().any(|(_, c)| {
            c.servable() || (c.wants_read() && !paused) || (c.too_long && c.closing.is_none())
        })
    }

    /// No client is read while the closer thread is behind: what clients send stays in
    /// the kernel, so descriptors to close cannot pile up in the daemon.
    fn reads_paused() -> bool {
        closer::backlog() >= CLOSE_BACKLOG
    }

    /// Reads what a client sent, up to `INBUF_CAP` buffered bytes.
    fn read_client(&mut self, slot: usize, now: Instant) {
        if Self::reads_paused() {
            if let Some(c) = self.clients.get_mut(slot) {
                // Read at a later wakeup (the sweep comes within a second).
                c.more = true;
            }
            return;
        }
        // Descriptors waiting for their lines in the whole daemon.
        let mut parked: usize = self.clients.iter().map(|(_, c)| c.passed.fds()).sum();
        let Some(c) = self.clients.get_mut(slot) else {
            return;
        };
        let counters = &mut self.counters;
        let read = c.read(
            |c| INBUF_CAP.saturating_sub(c.inbuf.len()),
            |c, bytes| {
                c.last_active = now;
                // The kernel ends a read with the message that carried descriptors
                // (it may begin the read with bytes sent before it): they belong to
                // the line holding the last byte read.
                let mut passed = c.stream.take_passed();
                let offset = c.inbuf.len() + bytes.len().saturating_sub(1);
                c.inbuf.extend_from_slice(bytes);
                // A batch whose line this read did not end either is closed now.
                let before = c.passed.fds();
                if c.ext.passed.after_read(&c.inbuf) {
                    counters.passed_refused += 1;
                    parked -= before;
                }
                if passed.refused.is_some() {
                    counters.passed_refused += 1;
                } else if parked + passed.fds.len() > MAX_PARKED {
                    counters.passed_refused += 1;
                    passed.refuse(PassRefused::DaemonFull);
                }
                let n = passed.fds.len();
                if c.passed.add(offset, passed).is_err() {
                    // One batch waits for its line at a time: the client is dropped.
                    counters.passed_refused += 1;
                    counters.dropped += 1;
                    parked -= c.passed.fds();
                    c.inbuf.clear();
                    c.passed.clear();
                    c.more = false;
                    c.eof = true;
                    c.outbuf.extend_from_slice(
                        error_line(
                            "descriptors passed again before the line of the last ones was answered (too many requests with descriptors)",
                        )
                        .as_bytes(),
                    );
                    c.close(now);
                    return;
                }
                parked += n;
                // A line still open after MAX_REQUEST bytes is too long already.
                let open = c.inbuf.iter().rev().take_while(|&&b| b != b'\n').count();
                if open > MAX_REQUEST {
                    Self::line_too_long(c, counters, now);
                }
            },
        );
        if read.is_err() {
            c.close(now);
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
        // Descriptors of the lines kept stay tied to them; a later batch is closed
        // when the line is refused (below).
        c.more = false;
        c.eof = true;
        c.too_long = true;
        if !c.has_line() {
            Self::refuse_long(c, now);
        }
    }

    fn refuse_long(c: &mut Client, now: Instant) {
        c.inbuf.clear();
        c.passed.clear();
        c.too_long = false;
        c.outbuf.extend_from_slice(
            error_line(&format!("request longer than {MAX_REQUEST} bytes")).as_bytes(),
        );
        c.close(now);
    }

    /// The requests to answer in this wakeup: at most `REQUESTS_PER_CLIENT` per client
    /// and `REQUESTS_PER_WAKEUP` in all, round-robin from where the last wakeup stopped;
    /// each with the descriptors passed with its line.
    pub fn take_requests(&mut self, now: Instant) -> Vec<(usize, (Request, Passed))> {
        for slot in 0..self.clients.end() {
            if self.clients.get(slot).is_some_and(Client::wants_read) {
                self.read_client(slot, now);
            }
        }
        let counters = &mut self.counters;
        let out = self
            .clients
            .round_robin(REQUESTS_PER_CLIENT, REQUESTS_PER_WAKEUP, |c, taken| {
                Self::next_request(c, taken, counters, now)
            });
        self.counters.requests += out.len() as u64;
        out
    }

    /// The next request line of client `c`, of which `taken` were taken in this wakeup.
    fn next_request(
        c: &mut Client,
        taken: usize,
        counters: &mut ControlCounters,
        now: Instant,
    ) -> Take<(Request, Passed)> {
        if !c.servable() {
            // Refused at the next wakeup, after the answers to this one's requests.
            if c.too_long && !c.has_line() && c.closing.is_none() && taken == 0 {
                Self::refuse_long(c, now);
            }
            return Take::Stop;
        }
        let pos = c
            .inbuf
            .iter()
            .position(|&b| b == b'\n')
            .expect("has a line");
        let line: Vec<u8> = c.inbuf.drain(..=pos).collect();
        // Closed when dropped: with a blank or too long line, or by the answer.
        let passed = c.passed.take_line(line.len());
        let line = &line[..line.len() - 1];
        if line.len() > MAX_REQUEST {
            // A whole line over the limit arrived in one read.
            counters.dropped += 1;
            Self::refuse_long(c, now);
            return Take::Stop;
        }
        let text = String::from_utf8_lossy(line);
        if text.trim().is_empty() {
            return Take::Skip;
        }
        c.last_active = now;
        Take::Request((Request::parse(&text), passed))
    }

    /// Queues `line` for client `slot`. A client being dropped gets nothing more; one
    /// whose buffer would exceed `MAX_OUTBUF` is dropped (a single answer up to
    /// `MAX_ANSWER` is queued when nothing else is).
    pub fn reply(&mut self, slot: usize, line: &str) {
        let Some(c) = self.clients.get_mut(slot) else {
            return;
        };
        if c.closing.is_some() {
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
            c.close(Instant::now());
            c.outbuf.clear();
            c.inbuf.clear();
            return;
        }
        c.outbuf.extend_from_slice(line.as_bytes());
    }

    /// The user id of client `slot` (SO_PEERCRED at connect), if known.
    pub fn peer_uid(&self, slot: usize) -> Option<u32> {
        self.clients.get(slot)?.peer_uid
    }

    /// Marks client `slot` as a watcher of `scope`.
    pub fn watch(&mut self, slot: usize, scope: Scope) {
        if let Some(c) = self.clients.get_mut(slot) {
            c.watching = Some(scope);
        }
    }

    /// Queues `line` for every watcher of `scope`.
    pub fn broadcast(&mut self, scope: Scope, line: &str) {
        for slot in 0..self.clients.end() {
            if self
                .clients
                .get(slot)
                .is_some_and(|c| c.watching == Some(scope) && c.closing.is_none() && !c.eof)
            {
                self.reply(slot, line);
            }
        }
    }

    /// Writes queued answers, closes finished, dropped and idle clients.
    pub fn flush(&mut self, registry: &Registry, now: Instant) {
        // Batches of descriptors to close that found the closer's channel full.
        closer::retry();
        for slot in 0..self.clients.end() {
            let Some(written) = self.clients.write(registry, slot) else {
                continue;
            };
            let c = self.clients.get_mut(slot).expect("written: in use");
            if written == Written::Gone {
                c.close(now);
                c.outbuf.clear();
            }
            let stuck = written == Written::Blocked;
            let idle = c.watching.is_none()
                && !c.supervising
                && !c.held
                && now.duration_since(c.last_active) >= IDLE_TIMEOUT;
            if idle {
                self.counters.dropped += 1;
            }
            // A dropped client is freed once its last answer is out, or after LINGER if
            // it cannot be written: a client that stops reading never keeps its slot.
            let dropped = c
                .closing
                .is_some_and(|t| c.outbuf.is_empty() || (stuck && now.duration_since(t) >= LINGER));
            let finished = c.eof && !c.held && !c.has_line() && !c.too_long && c.outbuf.is_empty();
            if dropped || finished || idle {
                self.free(slot, registry);
            }
        }
    }

    /// As [`Control::flush`] at the current instant, read only when a client is
    /// connected: with none, the flush only retries the closer's batches (issue 25:
    /// no clock read a heartbeat at rest).
    pub fn flush_now(&mut self, registry: &Registry) {
        if self.clients.is_empty() {
            closer::retry();
            return;
        }
        self.flush(registry, Instant::now());
    }

    /// True when a client is swept by time (`flush`): one that may be dropped as idle
    /// (neither watching nor supervising), one being dropped, or one with answers not
    /// yet written. The daemon's loop then wakes at least once a second; with only
    /// watchers and supervisors connected it waits for events and its own deadlines.
    pub fn sweeps_due(&self) -> bool {
        let paused = Self::reads_paused();
        self.clients.iter().any(|(_, c)| {
            (c.watching.is_none() && !c.supervising)
                || c.closing.is_some()
                || !c.outbuf.is_empty()
                || (paused && c.wants_read())
        })
    }

    /// The number of connected clients.
    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// True when a client watches `scope` (and is not being dropped).
    pub fn watches(&self, scope: Scope) -> bool {
        self.clients
            .iter()
            .any(|(_, c)| c.watching == Some(scope) && c.closing.is_none())
    }

    /// Clients watching.
    pub fn watchers(&self) -> usize {
        self.clients
            .iter()
            .filter(|(_, c)| c.watching.is_some())
            .count()
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

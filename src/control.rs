//! The control socket (SPEC sections 10 and 11): a Unix stream socket, one request word
//! per line, one JSON object per answer line.
//!
//! This module owns the clients and their limits; it turns bytes into `Request`s and
//! queues answers, and the daemon decides what to answer. Limits: requests up to 1 KiB,
//! at most 64 clients, at most `MAX_OUTBUF` bytes queued per client (a `watch` client
//! that stops reading is dropped, never waited for), idle clients closed after
//! `IDLE_TIMEOUT` (or at once, longest idle first, when a 65th client arrives), and a
//! read budget per wakeup so one client cannot starve the loop.

use mio::net::{UnixListener, UnixStream};
use mio::{Interest, Registry, Token};
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest request line accepted.
pub const MAX_REQUEST: usize = 1024;
/// The most clients served at once.
pub const MAX_CLIENTS: usize = 64;
/// The most answer bytes queued for one client before it is dropped.
pub const MAX_OUTBUF: usize = 64 * 1024;
/// A client that is not watching and sends nothing for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes read from one client per wakeup before others get their turn.
const READ_BUDGET: usize = 16 * 1024;

/// A request from a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// One status line.
    Status,
    /// The status line, then one line per change.
    Watch,
    /// Start a round now.
    Elect,
    /// Resign if leader.
    Yield,
    /// Prometheus text.
    Metrics,
    /// Liveness check.
    Ping,
    /// Anything else (the word, truncated for the answer).
    Unknown(String),
}

impl Request {
    fn parse(line: &str) -> Request {
        match line.trim() {
            "status" => Request::Status,
            "watch" => Request::Watch,
            "elect" => Request::Elect,
            "yield" => Request::Yield,
            "metrics" => Request::Metrics,
            "ping" => Request::Ping,
            other => Request::Unknown(other.chars().take(64).collect()),
        }
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

#[derive(Debug)]
struct Client {
    stream: UnixStream,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    watching: bool,
    closing: bool,
    last_active: Instant,
    /// Bytes may remain unread: the read budget ran out before WouldBlock.
    more: bool,
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
    /// Error answers to queue after the requests read with them.
    pending_errors: Vec<(usize, String)>,
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
            pending_errors: Vec::new(),
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
                    self.clients[slot] = Some(Client {
                        stream,
                        inbuf: Vec::new(),
                        outbuf: Vec::new(),
                        watching: false,
                        closing: false,
                        last_active: now,
                        more: false,
                    });
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
    /// watching and has nothing in flight: clients that connect and send nothing cannot
    /// lock everyone else out. Only 64 watchers fill the socket for good.
    fn evict_idle(&mut self, registry: &Registry) -> Option<usize> {
        let slot = (0..MAX_CLIENTS)
            .filter(|&i| {
                self.clients[i]
                    .as_ref()
                    .is_some_and(|c| !c.watching && !c.closing && c.outbuf.is_empty() && !c.more)
            })
            .min_by_key(|&i| self.clients[i].as_ref().map(|c| c.last_active))?;
        let mut c = self.clients[slot]
            .take()
            .expect("chosen among the occupied");
        let _ = registry.deregister(&mut c.stream);
        self.counters.dropped += 1;
        Some(slot)
    }

    /// Reads from client `token` and returns its complete requests.
    pub fn readable(&mut self, token: Token, now: Instant) -> Vec<(usize, Request)> {
        let slot = token.0 - self.first_token;
        self.read_client(slot, now)
    }

    /// Clients whose read budget ran out last time, to be read again without waiting.
    pub fn has_more(&self) -> bool {
        self.clients.iter().flatten().any(|c| c.more)
    }

    /// Reads again from clients with unread bytes.
    pub fn read_more(&mut self, now: Instant) -> Vec<(usize, Request)> {
        let slots: Vec<usize> = (0..MAX_CLIENTS)
            .filter(|&i| self.clients[i].as_ref().is_some_and(|c| c.more))
            .collect();
        slots
            .into_iter()
            .flat_map(|s| self.read_client(s, now))
            .collect()
    }

    fn read_client(&mut self, slot: usize, now: Instant) -> Vec<(usize, Request)> {
        let mut requests = Vec::new();
        let Some(c) = self.clients.get_mut(slot).and_then(Option::as_mut) else {
            return requests;
        };
        let mut buf = [0u8; 4096];
        let mut budget = READ_BUDGET;
        let mut too_long = false;
        c.more = false;
        while !c.closing {
            if budget == 0 {
                c.more = true;
                break;
            }
            let cap = buf.len().min(budget);
            match c.stream.read(&mut buf[..cap]) {
                Ok(0) => c.closing = true,
                Ok(n) => {
                    budget -= n;
                    c.last_active = now;
                    c.inbuf.extend_from_slice(&buf[..n]);
                    while let Some(pos) = c.inbuf.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = c.inbuf.drain(..=pos).collect();
                        if line.len() > MAX_REQUEST + 1 {
                            too_long = true;
                            break;
                        }
                        let text = String::from_utf8_lossy(&line[..line.len() - 1]).to_string();
                        if !text.trim().is_empty() {
                            requests.push((slot, Request::parse(&text)));
                        }
                    }
                    too_long |= c.inbuf.len() > MAX_REQUEST;
                    if too_long {
                        c.closing = true;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => c.closing = true,
            }
        }
        if too_long {
            // Answer what came before, then say why, then close.
            self.counters.dropped += 1;
            c.inbuf.clear();
            c.more = false;
            self.pending_errors.push((
                slot,
                error_line(&format!("request longer than {MAX_REQUEST} bytes")),
            ));
        }
        self.counters.requests += requests.len() as u64;
        requests
    }

    /// Queues `line` for client `slot` (dropping a client that would exceed its buffer).
    pub fn reply(&mut self, slot: usize, line: &str) {
        if let Some(c) = self.clients[slot].as_mut() {
            if c.outbuf.len() + line.len() > MAX_OUTBUF {
                log::warn!("control client {slot} is not reading its answers: dropped");
                self.counters.dropped += 1;
                c.closing = true;
                c.outbuf.clear();
                return;
            }
            c.outbuf.extend_from_slice(line.as_bytes());
        }
    }

    /// Marks client `slot` as a watcher.
    pub fn watch(&mut self, slot: usize) {
        if let Some(c) = self.clients[slot].as_mut() {
            c.watching = true;
        }
    }

    /// Queues `line` for every watcher.
    pub fn broadcast(&mut self, line: &str) {
        let watchers: Vec<usize> = (0..MAX_CLIENTS)
            .filter(|&i| {
                self.clients[i]
                    .as_ref()
                    .is_some_and(|c| c.watching && !c.closing)
            })
            .collect();
        for slot in watchers {
            self.reply(slot, line);
        }
    }

    /// Writes queued answers, closes finished and idle clients.
    pub fn flush(&mut self, registry: &Registry, now: Instant) {
        for (slot, line) in std::mem::take(&mut self.pending_errors) {
            if let Some(c) = self.clients[slot].as_mut() {
                c.outbuf.extend_from_slice(line.as_bytes());
            }
        }
        for slot in 0..MAX_CLIENTS {
            let Some(c) = self.clients[slot].as_mut() else {
                continue;
            };
            while !c.outbuf.is_empty() {
                match c.stream.write(&c.outbuf) {
                    Ok(0) => {
                        c.closing = true;
                        c.outbuf.clear();
                    }
                    Ok(n) => {
                        c.outbuf.drain(..n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => {
                        c.closing = true;
                        c.outbuf.clear();
                    }
                }
            }
            let idle = !c.watching && now.duration_since(c.last_active) >= IDLE_TIMEOUT;
            if idle {
                self.counters.dropped += 1;
            }
            if (c.closing && c.outbuf.is_empty()) || idle {
                let mut c = self.clients[slot].take().expect("checked");
                let _ = registry.deregister(&mut c.stream);
            }
        }
    }

    /// The number of connected clients.
    pub fn clients(&self) -> usize {
        self.clients.iter().flatten().count()
    }

    /// The number of watchers.
    pub fn watchers(&self) -> usize {
        self.clients.iter().flatten().filter(|c| c.watching).count()
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

    #[test]
    fn requests_parse_and_json_escapes() {
        assert_eq!(Request::parse("status\r"), Request::Status);
        assert_eq!(Request::parse(" watch "), Request::Watch);
        assert_eq!(Request::parse("bogus"), Request::Unknown("bogus".into()));
        assert_eq!(json_str("a\"b\\c\n"), r#""a\"b\\c\u000a""#);
        assert_eq!(error_line("x"), "{\"error\":\"x\"}\n");
    }
}

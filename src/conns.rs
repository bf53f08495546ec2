//! The connection table shared by the control socket (`control`) and the metrics
//! listener (`http`): slots and their mio tokens, bounded reads, writes of queued
//! answers, and the round-robin scheduler that bounds the requests taken per wakeup
//! (issue 10, finding 7; issue 24).
//!
//! Each protocol keeps its own parser, answers, limits and policy (what is servable,
//! when a connection is evicted, idle or closed); the table only owns what both did
//! alike. A connection is a [`Conn`]: the socket and its buffers, plus the protocol's
//! own state `X`, reached through `Deref`.

use mio::event::Source;
use mio::{Interest, Registry, Token};
use std::io::{self, Read, Write};
use std::ops::{Deref, DerefMut};
use std::time::Instant;

/// Bytes read from a socket per call.
const READ_CHUNK: usize = 4096;

thread_local! {
    /// The read buffer of [`Conn::read`], allocated once per thread.
    static READ_BUF: std::cell::Cell<Option<Box<[u8]>>> = const { std::cell::Cell::new(None) };
}

/// One connection: its socket, the bytes it sent and the answers queued for it.
#[derive(Debug)]
pub struct Conn<S, X> {
    /// The socket.
    pub stream: S,
    /// Bytes received and not yet taken as requests.
    pub inbuf: Vec<u8>,
    /// Answer bytes not yet written.
    pub outbuf: Vec<u8>,
    /// The peer sends nothing more (or the socket failed).
    pub eof: bool,
    /// The kernel may hold unread bytes: reading stopped before WouldBlock.
    pub more: bool,
    /// Being closed or dropped: since when. Nothing more is read as a request.
    pub closing: Option<Instant>,
    /// Its socket is registered for writable events too (see [`Table::write`]).
    writable_interest: bool,
    /// The protocol's own state of this connection.
    pub ext: X,
}

impl<S, X> Deref for Conn<S, X> {
    type Target = X;
    fn deref(&self) -> &X {
        &self.ext
    }
}

impl<S, X> DerefMut for Conn<S, X> {
    fn deref_mut(&mut self) -> &mut X {
        &mut self.ext
    }
}

/// How a write of the queued answers ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// Everything queued is out.
    All,
    /// The socket is full: the rest waits for the next writable event.
    Blocked,
    /// The socket is gone (an error, or a write of 0 bytes).
    Gone,
}

/// What the protocol's `next` does with one connection's buffered bytes (see
/// [`Table::round_robin`]).
#[derive(Debug)]
pub enum Take<R> {
    /// One request taken.
    Request(R),
    /// Bytes consumed that were no request (a blank line): look again.
    Skip,
    /// Nothing more from this connection in this wakeup.
    Stop,
}

impl<S: Read + Write, X> Conn<S, X> {
    /// A connection with empty buffers.
    pub fn new(stream: S, more: bool, ext: X) -> Self {
        Conn {
            stream,
            inbuf: Vec::new(),
            outbuf: Vec::new(),
            eof: false,
            more,
            closing: None,
            writable_interest: true,
            ext,
        }
    }

    /// Marks the connection closing, keeping the first time it was asked.
    pub fn close(&mut self, now: Instant) {
        self.closing.get_or_insert(now);
    }

    /// Reads until WouldBlock, EOF, closing, or `room` says no more fits (then `more`
    /// is set: the kernel holds the rest). `got` takes each chunk read. An error sets
    /// `eof` and is returned for the protocol to act on.
    pub fn read(
        &mut self,
        room: impl Fn(&Self) -> usize,
        got: impl FnMut(&mut Self, &[u8]),
    ) -> io::Result<()> {
        self.more = false;
        // Reused, not zeroed per call (issue 25): only `buf[..n]` is ever read.
        let mut buf = READ_BUF
            .take()
            .unwrap_or_else(|| vec![0u8; READ_CHUNK].into_boxed_slice());
        let r = self.read_into(&mut buf, room, got);
        READ_BUF.set(Some(buf));
        r
    }

    fn read_into(
        &mut self,
        buf: &mut [u8],
        room: impl Fn(&Self) -> usize,
        mut got: impl FnMut(&mut Self, &[u8]),
    ) -> io::Result<()> {
        while !self.eof && self.closing.is_none() {
            let cap = buf.len().min(room(self));
            if cap == 0 {
                self.more = true;
                break;
            }
            match self.stream.read(&mut buf[..cap]) {
                Ok(0) => self.eof = true,
                Ok(n) => got(self, &buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.eof = true;
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Writes what is queued, until it is all out or the socket is full or gone.
    pub fn write(&mut self) -> Written {
        while !self.outbuf.is_empty() {
            match self.stream.write(&self.outbuf) {
                Ok(0) => return Written::Gone,
                Ok(n) => {
                    self.outbuf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Written::Blocked,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Written::Gone,
            }
        }
        Written::All
    }
}

/// A fixed number of connection slots, each with its own mio token.
#[derive(Debug)]
pub struct Table<S, X> {
    slots: Vec<Option<Conn<S, X>>>,
    /// The token of slot 0.
    first_token: usize,
    /// The slot served first at the next wakeup (round-robin).
    next_slot: usize,
    /// One past the highest slot in use: scans stop there (a daemon with one
    /// supervisor looked at 64 slots several times per wakeup; issue 25).
    end: usize,
    /// The number of slots in use.
    open: usize,
    /// Sockets are registered for writable events only while an answer is blocked
    /// ([`Table::write_on_demand`]).
    on_demand: bool,
}

impl<S: Read + Write + Source, X> Table<S, X> {
    /// `max` empty slots; slot i gets token `first_token + i`.
    pub fn new(max: usize, first_token: usize) -> Self {
        Table {
            slots: (0..max).map(|_| None).collect(),
            first_token,
            next_slot: 0,
            end: 0,
            open: 0,
            on_demand: false,
        }
    }

    /// Registers sockets for readable events only, and for writable events only while
    /// a write of [`Table::write`] is blocked. With both always registered (edge
    /// triggered), each answer the peer reads wakes the loop once more for nothing: a
    /// leader's `run` reads a line every renewal (issue 25).
    pub fn write_on_demand(mut self) -> Self {
        self.on_demand = true;
        self
    }

    /// One past the highest slot in use: every connection is in `0..end()`.
    pub fn end(&self) -> usize {
        self.end
    }

    /// The number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// True if `token` belongs to a slot of this table.
    pub fn owns(&self, token: Token) -> bool {
        (self.first_token..self.first_token + self.slots.len()).contains(&token.0)
    }

    /// The slot of `token`, if it is one of this table's.
    pub fn slot(&self, token: Token) -> Option<usize> {
        self.owns(token).then(|| token.0 - self.first_token)
    }

    /// The token of `slot`.
    pub fn token(&self, slot: usize) -> Token {
        Token(self.first_token + slot)
    }

    /// The first free slot.
    pub fn free_slot(&self) -> Option<usize> {
        self.slots.iter().position(Option::is_none)
    }

    /// Registers `conn`'s socket (readable and writable) and puts it in `slot`; false
    /// (and the connection dropped) if registration fails.
    pub fn insert(&mut self, registry: &Registry, slot: usize, mut conn: Conn<S, X>) -> bool {
        let token = self.token(slot);
        let interest = if self.on_demand {
            Interest::READABLE
        } else {
            Interest::READABLE | Interest::WRITABLE
        };
        conn.writable_interest = !self.on_demand;
        if registry
            .register(&mut conn.stream, token, interest)
            .is_err()
        {
            return false;
        }
        if self.slots[slot].replace(conn).is_none() {
            self.open += 1;
        }
        self.end = self.end.max(slot + 1);
        true
    }

    /// Takes the connection out of `slot` and deregisters its socket.
    pub fn remove(&mut self, registry: &Registry, slot: usize) -> Option<Conn<S, X>> {
        let mut c = self.slots.get_mut(slot)?.take()?;
        self.open -= 1;
        while self.end > 0 && self.slots[self.end - 1].is_none() {
            self.end -= 1;
        }
        let _ = registry.deregister(&mut c.stream);
        Some(c)
    }

    /// Writes what is queued for `slot` ([`Conn::write`]); with
    /// [`Table::write_on_demand`], registers for writable events while blocked, and
    /// for readable events only once all is out.
    pub fn write(&mut self, registry: &Registry, slot: usize) -> Option<Written> {
        let token = self.token(slot);
        let on_demand = self.on_demand;
        let c = self.get_mut(slot)?;
        let w = c.write();
        if on_demand && (w == Written::Blocked) != c.writable_interest {
            let blocked = w == Written::Blocked;
            let interest = if blocked {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            // A failed reregistration keeps the old interest (a spare wakeup at worst,
            // or, blocked, the next wakeup for any reason flushes again).
            if registry.reregister(&mut c.stream, token, interest).is_ok() {
                c.writable_interest = blocked;
            }
        }
        Some(w)
    }

    /// The connection in `slot`.
    pub fn get(&self, slot: usize) -> Option<&Conn<S, X>> {
        self.slots.get(slot)?.as_ref()
    }

    /// The connection in `slot`, mutably.
    pub fn get_mut(&mut self, slot: usize) -> Option<&mut Conn<S, X>> {
        self.slots.get_mut(slot)?.as_mut()
    }

    /// Every connection with its slot.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &Conn<S, X>)> + '_ {
        self.slots[..self.end]
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some((i, c.as_ref()?)))
    }

    /// Every connection, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Conn<S, X>> + '_ {
        self.slots[..self.end].iter_mut().flatten()
    }

    /// The number of open connections.
    pub fn len(&self) -> usize {
        self.open
    }

    /// True when no connection is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The requests of this wakeup: at most `per_conn` of one connection and
    /// `per_wakeup` in all, round-robin from the slot after the last one served.
    /// `next(conn, taken)` takes one request of a connection (`taken`: how many were
    /// already taken of it in this wakeup), skips bytes, or stops.
    pub fn round_robin<R>(
        &mut self,
        per_conn: usize,
        per_wakeup: usize,
        mut next: impl FnMut(&mut Conn<S, X>, usize) -> Take<R>,
    ) -> Vec<(usize, R)> {
        let mut out = Vec::new();
        // Slots from `end` on are empty.
        let n = self.end;
        if n == 0 {
            return out;
        }
        let start = self.next_slot % n;
        for i in 0..n {
            if out.len() >= per_wakeup {
                break;
            }
            let slot = (start + i) % n;
            let Some(c) = self.slots[slot].as_mut() else {
                continue;
            };
            let mut taken = 0;
            while taken < per_conn && out.len() < per_wakeup {
                match next(c, taken) {
                    Take::Request(r) => {
                        out.push((slot, r));
                        taken += 1;
                    }
                    Take::Skip => {}
                    Take::Stop => break,
                }
            }
            if taken > 0 {
                self.next_slot = (slot + 1) % n;
            }
        }
        out
    }
}

//! Descriptors passed on the control socket (SCM_RIGHTS): `electctl run` passes its stop
//! timers with `supervise` (issue 25). The client's socket is read with recvmsg(2)
//! (MSG_CMSG_CLOEXEC: nothing received leaks into a hook or check the daemon starts).
//! Linux ends a read of a stream socket with the message that carried descriptors (it
//! may start the read with bytes sent before that message), so the descriptors that
//! come with a read are tied to the request line holding its last byte: a sender passes
//! them with one sendmsg(2) of the `supervise` line alone. The line framing is
//! unchanged; the descriptors are closed with that request's answer unless the daemon
//! keeps them (or at once, when the line is refused or the client goes).
//!
//! Bounded, so that clients cannot fill the daemon's descriptor table (a state write
//! that fails for EMFILE is fatal): recvmsg has room for [`SCM_MAX_FD`] descriptors,
//! the most the kernel attaches to one message, so it never has to discard (close)
//! any inside recvmsg; a client has at most one batch of at most [`MAX_PASSED`] waiting
//! for its line, and that line must end by the next read; the whole daemon holds at most
//! [`MAX_PARKED`] such descriptors. Anything beyond is closed at once and its line
//! refused with the reason (counted). Every descriptor the daemon does not keep is
//! closed on the closer thread (`super::closer`), never on the event loop.

use mio::event::Source;
use mio::net::UnixStream;
use mio::{Interest, Registry, Token};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The most descriptors taken with one request; more are closed at once and the
/// request refused. `supervise` keeps one (the stop timer); two are still taken here so
/// that an older `run`, which passes two timers, is told "2 descriptors passed, 1
/// expected" and registers without them.
pub const MAX_PASSED: usize = 2;
/// The most descriptors waiting for their request lines in the whole daemon (32: 16
/// clients' stop timers arriving at once); a batch beyond is closed at once and its
/// request refused. Far below the 1024 of a default soft RLIMIT_NOFILE.
pub const MAX_PARKED: usize = 32;
/// The most descriptors the kernel attaches to one message (SCM_MAX_FD): recvmsg has
/// room for them all, so none is discarded (closed) on the event loop inside recvmsg.
pub const SCM_MAX_FD: usize = 253;

/// Why the descriptors passed with a request were closed unused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassRefused {
    /// More than [`MAX_PASSED`] came with the read (how many).
    TooMany(usize),
    /// Ancillary data of another kind came, or the kernel truncated it.
    OtherData,
    /// The line they came with had not ended by the next read.
    LineNotEnded,
    /// The daemon already held [`MAX_PARKED`] descriptors waiting for their lines.
    DaemonFull,
}

impl std::fmt::Display for PassRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PassRefused::TooMany(n) => write!(
                f,
                "more than {MAX_PASSED} descriptors passed ({n}); they were closed"
            ),
            PassRefused::OtherData => {
                write!(
                    f,
                    "ancillary data of another kind came; the descriptors were closed"
                )
            }
            PassRefused::LineNotEnded => write!(
                f,
                "the line the descriptors came with did not end by the next read (send the whole line with them); they were closed"
            ),
            PassRefused::DaemonFull => write!(
                f,
                "the daemon already holds {MAX_PARKED} passed descriptors waiting for their lines; they were closed, try again"
            ),
        }
    }
}

/// The descriptors passed with one request. Those not taken out of `fds` are closed
/// on the closer thread when this is dropped, never on the event loop.
#[derive(Debug, Default)]
pub struct Passed {
    /// The descriptors, in the order sent.
    pub fds: Vec<OwnedFd>,
    /// They were refused and closed already (then `fds` is empty): the request that
    /// came with them is refused with this reason.
    pub refused: Option<PassRefused>,
}

impl Passed {
    /// True when nothing was passed.
    pub fn is_empty(&self) -> bool {
        self.fds.is_empty() && self.refused.is_none()
    }

    /// Closes the descriptors now (on the closer thread); the request is refused for
    /// `why`.
    pub fn refuse(&mut self, why: PassRefused) {
        super::closer::close_later(std::mem::take(&mut self.fds));
        self.refused.get_or_insert(why);
    }
}

impl Drop for Passed {
    fn drop(&mut self) {
        super::closer::close_later(std::mem::take(&mut self.fds));
    }
}

/// A control client's socket, read with recvmsg(2): the descriptors of the last read
/// wait in `received` until the reader takes them.
#[derive(Debug)]
pub struct FdStream {
    stream: UnixStream,
    received: Passed,
}

impl FdStream {
    /// Wraps an accepted connection.
    pub fn new(stream: UnixStream) -> Self {
        FdStream {
            stream,
            received: Passed::default(),
        }
    }

    /// The socket.
    pub fn inner(&self) -> &UnixStream {
        &self.stream
    }

    /// The descriptors received with the last read (empty if none).
    pub fn take_passed(&mut self) -> Passed {
        std::mem::take(&mut self.received)
    }
}

impl Read for FdStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let fd_bytes = SCM_MAX_FD * std::mem::size_of::<i32>();
        // SAFETY: CMSG_SPACE only computes a size.
        let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
        // u64 words: the control buffer must be aligned for cmsghdr. On the stack
        // (1,032 bytes): room for every descriptor one message may carry.
        let mut cbuf = [0u64; 136];
        debug_assert!(space <= std::mem::size_of_val(&cbuf));
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: an all-zero msghdr is valid; the pointers set point into locals that
        // outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: recvmsg into our buffers as described by `msg`.
        let n = unsafe {
            libc::recvmsg(
                self.stream.as_raw_fd(),
                &mut msg,
                libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut other = msg.msg_flags & libc::MSG_CTRUNC != 0;
        // SAFETY: walking the control messages the kernel wrote, within msg_controllen;
        // each SCM_RIGHTS payload holds whole descriptors, now ours.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let data = libc::CMSG_DATA(c);
                let len = (*c).cmsg_len as usize - (data as usize - c as usize);
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    for i in 0..len / std::mem::size_of::<i32>() {
                        let fd = std::ptr::read_unaligned(data.cast::<i32>().add(i));
                        self.received.fds.push(OwnedFd::from_raw_fd(fd));
                    }
                } else {
                    other = true;
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        // Beyond what a request may bring: closed at once (off the loop).
        let got = self.received.fds.len();
        if other {
            self.received.refuse(PassRefused::OtherData);
        } else if got > MAX_PASSED {
            self.received.refuse(PassRefused::TooMany(got));
        }
        Ok(n as usize)
    }
}

impl Write for FdStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

impl Source for FdStream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        self.stream.register(r, t, i)
    }
    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        self.stream.reregister(r, t, i)
    }
    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        self.stream.deregister(r)
    }
}

/// The batch of descriptors of one client waiting for its request line, with the
/// offset in the client's input buffer of the last byte read with it. One at most.
#[derive(Debug, Default)]
pub struct Pending {
    batch: Option<(usize, Passed)>,
}

/// True when `inbuf` holds a newline at or after `at`.
fn line_ended(inbuf: &[u8], at: usize) -> bool {
    inbuf.get(at..).is_some_and(|t| t.contains(&b'\n'))
}

/// A second batch came while one waited for its line: the client is dropped.
#[derive(Debug, PartialEq, Eq)]
pub struct AnotherWaits;

impl Pending {
    /// The descriptors waiting.
    pub fn fds(&self) -> usize {
        self.batch.as_ref().map_or(0, |(_, p)| p.fds.len())
    }

    /// A read appended its bytes to the client's input buffer `inbuf`: a batch that
    /// came with an earlier read and whose line has still not ended is closed (its
    /// request will be refused). True if one was.
    pub fn after_read(&mut self, inbuf: &[u8]) -> bool {
        match &mut self.batch {
            Some((at, p)) if p.refused.is_none() && !line_ended(inbuf, *at) => {
                p.refuse(PassRefused::LineNotEnded);
                true
            }
            _ => false,
        }
    }

    /// A batch came with the bytes read up to `offset` (the last byte) of the input
    /// buffer. Refused (and closed) when another waits already.
    pub fn add(&mut self, offset: usize, p: Passed) -> Result<(), AnotherWaits> {
        if p.is_empty() {
            return Ok(());
        }
        if self.batch.is_some() {
            return Err(AnotherWaits);
        }
        self.batch = Some((offset, p));
        Ok(())
    }

    /// The line of `len` bytes (its newline included) was taken from the front of the
    /// input buffer: the descriptors that came with its bytes, if any; the offset of a
    /// later one moved up.
    pub fn take_line(&mut self, len: usize) -> Passed {
        match &mut self.batch {
            Some((at, _)) if *at < len => self.batch.take().map(|(_, p)| p).unwrap_or_default(),
            Some((at, _)) => {
                *at -= len;
                Passed::default()
            }
            None => Passed::default(),
        }
    }

    /// Closes the descriptors waiting (the input buffer was discarded).
    pub fn clear(&mut self) {
        self.batch = None;
    }
}

//! Descriptors passed on the control socket (SCM_RIGHTS): `electctl run` passes its stop
//! timers with `supervise` (issue 25). The client's socket is read with recvmsg(2)
//! (MSG_CMSG_CLOEXEC: nothing received leaks into a hook or check the daemon starts).
//! Linux ends a read of a stream socket with the message that carried descriptors (it
//! may start the read with bytes sent before that message), so the descriptors that
//! come with a read are tied to the request line holding its last byte: a sender passes
//! them with one sendmsg(2) of the `supervise` line alone. The line framing is
//! unchanged; the descriptors are closed with that request's answer unless the daemon
//! keeps them (or at once, when the line is refused or the client goes).

use mio::event::Source;
use mio::net::UnixStream;
use mio::{Interest, Registry, Token};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The most descriptors received with one read; more are closed by the kernel and the
/// request refused.
pub const MAX_PASSED: usize = 4;
/// The most batches of descriptors waiting for their request lines per client; more
/// and the client is dropped.
pub const MAX_BATCHES: usize = 4;

/// The descriptors passed with one request (closed when dropped).
#[derive(Debug, Default)]
pub struct Passed {
    /// The descriptors, in the order sent.
    pub fds: Vec<OwnedFd>,
    /// More were sent than [`MAX_PASSED`] (the rest were closed by the kernel), or
    /// ancillary data of another kind came.
    pub truncated: bool,
}

impl Passed {
    /// True when nothing was passed.
    pub fn is_empty(&self) -> bool {
        self.fds.is_empty() && !self.truncated
    }

    fn merge(&mut self, other: Passed) {
        self.fds.extend(other.fds);
        self.truncated |= other.truncated;
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
        let fd_bytes = MAX_PASSED * std::mem::size_of::<i32>();
        // SAFETY: CMSG_SPACE only computes a size.
        let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
        // u64 words: the control buffer must be aligned for cmsghdr. On the stack.
        let mut cbuf = [0u64; 8];
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
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            self.received.truncated = true;
        }
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
                    self.received.truncated = true;
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
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

/// The batches of descriptors of one client waiting for their request lines: each
/// with the offset in the client's input buffer of the last byte read with it.
#[derive(Debug, Default)]
pub struct Pending {
    batches: Vec<(usize, Passed)>,
}

impl Pending {
    /// A batch came with the bytes read up to `offset` (the last byte) of the input
    /// buffer; false (and the batch closed) when too many wait already.
    pub fn add(&mut self, offset: usize, p: Passed) -> bool {
        if p.is_empty() {
            return true;
        }
        if self.batches.len() >= MAX_BATCHES {
            return false;
        }
        self.batches.push((offset, p));
        true
    }

    /// The line of `len` bytes (its newline included) was taken from the front of the
    /// input buffer: the descriptors that came with its bytes, the rest moved up.
    pub fn take_line(&mut self, len: usize) -> Passed {
        let mut out = Passed::default();
        let mut i = 0;
        while i < self.batches.len() {
            if self.batches[i].0 < len {
                let (_, p) = self.batches.remove(i);
                out.merge(p);
            } else {
                self.batches[i].0 -= len;
                i += 1;
            }
        }
        out
    }

    /// Closes every descriptor waiting (the input buffer was discarded).
    pub fn clear(&mut self) {
        self.batches.clear();
    }
}

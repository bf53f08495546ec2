//! The datagram path's I/O: bounded reads from each UDP socket, each datagram handed
//! to the host (`Host::handle_datagram`: decoding, authentication, replay window,
//! source check, the cores' verdicts and drop counting live there).

use super::*;
use log::trace;

use std::cell::RefCell;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;

/// Datagrams taken per recvmmsg(2).
const BATCH: usize = 8;

/// What recvmmsg(2) fills: BATCH buffers and source addresses, allocated once per
/// thread and never zeroed again (zeroing 8 KiB per read was 35 % of an idle daemon's
/// instructions; issue 25). Only `buf[..n]` of what the kernel wrote is ever read.
///
/// The message headers and their iovecs are built once too, pointing into this same
/// heap block (it never moves: it lives in a `Box`, and only the box is moved): a read
/// resets only each header's address length, which the kernel overwrites. Building
/// eight headers on the stack at every read took code and stack lines of every wakeup
/// (issue 25, tenth round; with the u64 `duration_nanos`, about 100 fewer instructions
/// a heartbeat for a leader at rest, `bench/perf/footprint.py`).
struct Batch {
    bufs: Vec<u8>,
    addrs: [libc::sockaddr_storage; BATCH],
    iov: [libc::iovec; BATCH],
    msgs: [libc::mmsghdr; BATCH],
}

impl Batch {
    /// A batch with its headers pointing at its own buffers and address storage.
    fn new() -> Box<Batch> {
        let mut b = Box::new(Batch {
            bufs: vec![0u8; RECV_BUF * BATCH],
            // SAFETY: all-zero bytes are a valid sockaddr_storage.
            addrs: unsafe { std::mem::zeroed() },
            iov: [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; BATCH],
            // SAFETY: all-zero bytes are a valid mmsghdr (null pointers, zero lengths).
            msgs: unsafe { std::mem::zeroed() },
        });
        let base = b.bufs.as_mut_ptr();
        for i in 0..BATCH {
            // SAFETY: buffer i lies within `bufs` (BATCH buffers of RECV_BUF bytes).
            b.iov[i].iov_base = unsafe { base.add(i * RECV_BUF) }.cast();
            b.iov[i].iov_len = RECV_BUF;
            let addr = (&mut b.addrs[i] as *mut libc::sockaddr_storage).cast();
            let iov: *mut libc::iovec = &mut b.iov[i];
            let h = &mut b.msgs[i].msg_hdr;
            h.msg_name = addr;
            h.msg_iov = iov;
            h.msg_iovlen = 1;
        }
        b
    }
}

thread_local! {
    static BATCH_BUFS: RefCell<Option<Box<Batch>>> = const { RefCell::new(None) };
}

/// The source address recvmmsg(2) wrote, if it is an IP one.
fn source(a: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(a.ss_family) {
        libc::AF_INET => {
            // SAFETY: ss_family says the storage holds a sockaddr_in.
            let a = unsafe { &*(a as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: ss_family says the storage holds a sockaddr_in6.
            let a = unsafe { &*(a as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

impl Daemon {
    /// Reads what waits on UDP socket `which` (at most UDP_BUDGET datagrams), BATCH per
    /// recvmmsg(2): a batch that comes back short emptied the queue, so no read is made
    /// only to hear EAGAIN (one system call per wakeup instead of two for the one
    /// datagram a follower gets per heartbeat; issue 25). The socket is edge-triggered:
    /// a datagram that arrives later raises a new event.
    pub(super) fn read_udp(&mut self, which: usize, waited: bool) -> Result<(), Fatal> {
        // Taken out and put back: a (never expected) nested call gets fresh buffers.
        let mut b = BATCH_BUFS
            .with(|c| c.borrow_mut().take())
            .unwrap_or_else(Batch::new);
        let r = self.read_udp_into(which, waited, &mut b);
        BATCH_BUFS.with(|c| *c.borrow_mut() = Some(b));
        r
    }

    fn read_udp_into(&mut self, which: usize, waited: bool, b: &mut Batch) -> Result<(), Fatal> {
        self.udp_more[which] = true;
        let mut taken = 0;
        // Bounded in calls too: errors (ICMP) and interruptions take a turn each.
        for _ in 0..UDP_BUDGET {
            if taken >= UDP_BUDGET {
                break;
            }
            let sock = if which == 0 {
                Some(&self.transport.unicast)
            } else {
                self.transport.group.as_ref()
            };
            let Some(sock) = sock else { break };
            let want = BATCH.min(UDP_BUDGET - taken);
            for m in &mut b.msgs[..want] {
                // The kernel wrote the last source's length here; the rest stays.
                m.msg_hdr.msg_namelen =
                    std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            }
            // SAFETY: `want` headers, built by `Batch::new`, each pointing at its own
            // buffer and address storage in this batch, which outlives the call (and
            // has not moved: it is the same heap block); non-blocking, no timeout.
            let n = unsafe {
                libc::recvmmsg(
                    sock.as_raw_fd(),
                    b.msgs.as_mut_ptr(),
                    want as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => {
                        self.udp_more[which] = false;
                        break;
                    }
                    io::ErrorKind::Interrupted => {}
                    _ => {
                        // ICMP errors from earlier sends surface here; they are not fatal.
                        debug!("UDP receive: {e}");
                    }
                }
                continue;
            }
            let n = n as usize;
            for i in 0..n {
                let len = (b.msgs[i].msg_len as usize).min(RECV_BUF);
                let Some(src) = source(&b.addrs[i]) else {
                    continue;
                };
                let bytes = &b.bufs[i * RECV_BUF..i * RECV_BUF + len];
                if waited {
                    // Flushed with the timers that the loop runs next (issue 25).
                    self.host.handle_waiting_datagram(boot_now(), src, bytes);
                } else {
                    self.drive(|h, now| h.handle_datagram(now, src, bytes).map(|_| ()))?;
                }
            }
            taken += n;
            if n < want {
                // The queue was empty when the batch ended.
                self.udp_more[which] = false;
                break;
            }
        }
        Ok(())
    }
    /// Reads both UDP sockets (the group socket only in multicast mode). `waited`:
    /// the datagrams waited for this wakeup at rest, and the timers run next flushes
    /// them (`Host::handle_waiting_datagram`); else each is flushed as it is handled.
    pub(super) fn read_udp_all(&mut self, waited: bool) -> Result<(), Fatal> {
        self.read_udp(0, waited)?;
        if self.transport.group.is_some() {
            self.read_udp(1, waited)?;
        }
        Ok(())
    }

    /// Applies the host's answer to "may datagrams wait?" (`Host::datagrams_may_wait`,
    /// issue 25), at its transitions only (one epoll_ctl per socket per change, none
    /// per heartbeat). Called at the top of every loop iteration, once its inputs are
    /// handled: a yes deregisters the UDP sockets, and from then on every wakeup reads
    /// them before the timers; the host's next deadline, a heartbeat away at most
    /// while it says yes, bounds how long a datagram waits. A no registers them again
    /// (edge-triggered, as before) and reads them at once, rather than count on the
    /// registration to report what queued up meanwhile (no edge was raised for it).
    /// Registered before that read, so whatever comes after it raises an edge.
    ///
    /// The answer may change anywhere in an iteration (a datagram read at the wakeup
    /// opens a round, a request yields): the sockets keep the state of the iteration's
    /// start until the next call here, at the top of the next iteration, with no
    /// wait in between. So a no takes effect before the loop sleeps again; after a
    /// yes, a datagram that came after the iteration's reads (its edge is dropped with
    /// the registration) waits for the next wakeup, as any does while the answer is
    /// yes.
    ///
    /// Returns true when it read (the sockets were taken back): the caller runs a
    /// whole iteration without waiting, so that what the read produced (supervisor
    /// lines, watcher reports) is carried out before the loop sleeps.
    pub(super) fn apply_deferral(&mut self) -> Result<bool, Fatal> {
        let wait = self.host.datagrams_may_wait(boot_now());
        if wait == self.udp_deferred {
            return Ok(false);
        }
        let reg = self.poll.registry();
        let fail = |e: io::Error| Fatal::System(format!("poll register: {e}"));
        if wait {
            reg.deregister(&mut self.transport.unicast).map_err(fail)?;
            if let Some(g) = self.transport.group.as_mut() {
                reg.deregister(g).map_err(fail)?;
            }
            self.udp_deferred = true;
            trace!("at rest: datagrams are read at each heartbeat");
            return Ok(false);
        }
        reg.register(&mut self.transport.unicast, UDP_UNICAST, Interest::READABLE)
            .map_err(fail)?;
        if let Some(g) = self.transport.group.as_mut() {
            reg.register(g, UDP_GROUP, Interest::READABLE)
                .map_err(fail)?;
        }
        self.udp_deferred = false;
        trace!("not at rest: datagrams are read as they come");
        self.read_udp_all(false)?;
        Ok(true)
    }

    /// Sends the host's datagrams, counting what left.
    pub(super) fn send_transmits(&mut self) {
        while let Some(t) = self.host.poll_transmit() {
            let (sent, errors) = self.transport.send(t.to, &t.bytes);
            self.metrics.datagrams_sent += sent;
            for (k, n) in t.kinds.iter().enumerate() {
                self.metrics.sent[k] += sent * n;
            }
            self.metrics.sent_bytes += sent * t.bytes.len() as u64;
            for (to, e) in errors {
                self.metrics.send_errors += 1;
                debug!("send {} entries to {to}: {e}", t.kinds.iter().sum::<u64>());
            }
            // The buffer goes back to the host's pool: no allocation per datagram.
            self.host.recycle(t.bytes);
        }
    }
}

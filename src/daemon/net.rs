//! The datagram path's I/O: bounded reads from each UDP socket, each datagram handed
//! to the host (`Host::handle_datagram`: decoding, authentication, replay window,
//! source check, the cores' verdicts and drop counting live there).

use super::*;
use log::trace;

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
/// resets only the address length of the headers the last read filled, the only ones
/// the kernel wrote (`arm`, `filled`). Resetting all eight at every read wrote eight
/// cache lines (a 64-byte mmsghdr each) where a leader at rest gets one ACK. Building
/// eight headers on the stack at every read took code and stack lines of every wakeup
/// (issue 25, tenth round; with the u64 `duration_nanos`, about 100 fewer instructions
/// a heartbeat for a leader at rest, `bench/perf/footprint.py`).
///
/// Kept in the daemon (`Daemon::batch`), not in a thread-local: the loop is one thread,
/// and a field is a plain load where the thread-local took its lazy-init state, a
/// RefCell borrow flag and the Option's drop at each read (issue 25).
pub(super) struct Batch {
    bufs: Vec<u8>,
    addrs: [libc::sockaddr_storage; BATCH],
    iov: [libc::iovec; BATCH],
    msgs: [libc::mmsghdr; BATCH],
    /// Headers from 0 up to this one may have been written by the kernel since their
    /// address length was last set; every header from it on holds the full length.
    written: usize,
}

/// The address length every header has when it is handed to recvmmsg(2).
const NAMELEN: libc::socklen_t = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;

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
            written: 0,
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
            h.msg_namelen = NAMELEN;
        }
        b
    }

    /// Readies the first `want` headers for recvmmsg(2): the kernel writes each
    /// filled header's address length (the source's), so those of the last read are
    /// set back to the full length; the others still hold it.
    fn arm(&mut self, want: usize) {
        for m in &mut self.msgs[..self.written] {
            m.msg_hdr.msg_namelen = NAMELEN;
        }
        self.written = 0;
        debug_assert!(
            self.msgs[..want]
                .iter()
                .all(|m| m.msg_hdr.msg_namelen == NAMELEN)
        );
    }

    /// Notes what recvmmsg(2) returned (`n`) for `want` headers: the kernel wrote the
    /// headers of the datagrams it filled (on an error, every header handed over is
    /// counted as written, to be safe).
    fn filled(&mut self, n: isize, want: usize) {
        self.written = if n < 0 { want } else { (n as usize).min(want) };
    }
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
        let mut b = self.batch.take().unwrap_or_else(Batch::new);
        let r = self.read_udp_into(which, waited, &mut b);
        self.batch = Some(b);
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
            b.arm(want);
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
            b.filled(n as isize, want);
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
    pub(super) fn apply_deferral(&mut self, now: Time) -> Result<bool, Fatal> {
        let wait = self.host.datagrams_may_wait(now);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    /// One recvmmsg(2) through the batch's headers, as `read_udp_into` makes it.
    fn read(b: &mut Batch, sock: &UdpSocket) -> isize {
        b.arm(BATCH);
        // SAFETY: as in `read_udp_into`: the headers point into `b`, which outlives
        // the call; non-blocking, no timeout.
        let n = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                b.msgs.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        } as isize;
        b.filled(n, BATCH);
        n
    }

    /// Only the headers the last read filled are reset before the next (issue 25),
    /// and that is enough: the kernel shortens the address length of each header it
    /// fills (an IPv4 source: 16 bytes), and a header handed over with a short length
    /// would truncate an IPv6 source. Fails if `arm` skips a header the kernel wrote.
    #[test]
    fn every_header_handed_to_the_kernel_has_the_full_address_length() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut b = Batch::new();
        let full = |b: &Batch| b.msgs.iter().all(|m| m.msg_hdr.msg_namelen == NAMELEN);
        assert!(full(&b), "a new batch");
        for round in 1..=3usize {
            for _ in 0..round {
                tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
            }
            std::thread::sleep(Duration::from_millis(20));
            assert_eq!(read(&mut b, &rx), round as isize);
            for i in 0..round {
                assert_eq!(
                    b.msgs[i].msg_hdr.msg_namelen, 16,
                    "the kernel wrote header {i}"
                );
                assert_eq!(
                    source(&b.addrs[i]),
                    Some(tx.local_addr().unwrap()),
                    "round {round}"
                );
            }
            b.arm(BATCH);
            assert!(full(&b), "after round {round}");
        }
        // Nothing queued: an error (EAGAIN) counts every header as written.
        assert_eq!(read(&mut b, &rx), -1);
        assert_eq!(b.written, BATCH);
        b.arm(BATCH);
        assert!(full(&b));
    }
}

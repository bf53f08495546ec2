//! The datagram path's I/O: bounded reads from each UDP socket, each datagram handed
//! to the host (`Host::handle_datagram`: decoding, authentication, replay window,
//! source check, the cores' verdicts and drop counting live there).

use super::*;

use std::cell::Cell;

thread_local! {
    /// The receive buffer, allocated and zeroed once per thread and reused by every
    /// `read_udp`: zeroing 8 KiB on each call was 35 % of an idle daemon's instructions
    /// (issue 25). Only `buf[..n]` of what the kernel wrote is ever read.
    static RECV: Cell<Option<Box<[u8]>>> = const { Cell::new(None) };
}

impl Daemon {
    pub(super) fn read_udp(&mut self, which: usize) -> Result<(), Fatal> {
        // Taken out and put back: a (never expected) nested call gets a fresh buffer.
        let mut buf = RECV
            .take()
            .unwrap_or_else(|| vec![0u8; RECV_BUF].into_boxed_slice());
        let r = self.read_udp_into(which, &mut buf);
        RECV.set(Some(buf));
        r
    }

    fn read_udp_into(&mut self, which: usize, buf: &mut [u8]) -> Result<(), Fatal> {
        self.udp_more[which] = true;
        for _ in 0..UDP_BUDGET {
            let sock = if which == 0 {
                Some(&self.transport.unicast)
            } else {
                self.transport.group.as_ref()
            };
            let Some(sock) = sock else { break };
            match sock.recv_from(buf) {
                Ok((n, src)) => {
                    let bytes = &buf[..n];
                    self.drive(|h, now| h.handle_datagram(now, src, bytes).map(|_| ()))?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.udp_more[which] = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // ICMP errors from earlier sends surface here; they are not fatal.
                    debug!("UDP receive: {e}");
                }
            }
        }
        Ok(())
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
        }
    }
}

//! UDP transport (SPEC sections 9 and 16): multicast with port sharing, or unicast
//! fan-out, over IPv4 or IPv6 (one family per cluster).
//!
//! Every server owns a unicast socket bound to its configured address; all datagrams
//! leave from it, so their source is the sender's configured address. It is bound
//! with IP_FREEBIND / IPV6_FREEBIND, so an address that is not up yet does not stop
//! the start (a loud warning says so). In multicast mode a second socket, bound to the
//! group port with SO_REUSEPORT (so several daemons share one host), receives the
//! group; broadcasts go to the group with the configured TTL (hop limit) and loopback
//! on. IPv6 names the interface by index (IPV6_ADD_MEMBERSHIP, IPV6_MULTICAST_IF);
//! IPv4 by its address, as before. In unicast mode broadcasts are sent to each other
//! server, with one sendmmsg(2) for all of them (issue 25: a leader's LEADs cost one
//! system call per heartbeat, not one per follower).

use crate::addr::{self, Address, Family};
use crate::config::{Config, Transport as Mode};
use crate::node::Dest;
use log::{info, warn};
use mio::net::UdpSocket;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV6};

/// The receive buffer: one byte more than the longest datagram accepted, so a longer
/// one is seen as too long rather than cut to a length that might parse.
pub const RECV_BUF: usize = crate::wire::MAX_DATAGRAM + 1;

/// The sockets of one server.
#[derive(Debug)]
pub struct Transport {
    /// Bound to this server's address: receives VOTEs (and everything in unicast mode).
    pub unicast: UdpSocket,
    /// Bound to the group port, multicast mode only.
    pub group: Option<UdpSocket>,
    group_addr: Option<SocketAddr>,
    peers: Vec<(u16, SocketAddr)>,
    /// The peers' addresses as the kernel takes them (sendmmsg), in `peers`' order.
    names: Vec<socket2::SockAddr>,
}

/// Messages per sendmmsg(2) call: a broadcast to more peers takes several calls.
const SEND_BATCH: usize = 16;

/// The IPv4 address of interface `name`.
pub fn interface_addr(name: &str) -> io::Result<Ipv4Addr> {
    match addr::multicast_interface(name, Family::V4)? {
        IpAddr::V4(a) => Ok(a),
        IpAddr::V6(a) => Err(io::Error::other(format!("{a} is not IPv4"))),
    }
}

fn udp_socket(family: Family) -> io::Result<Socket> {
    let domain = match family {
        Family::V4 => Domain::IPV4,
        Family::V6 => Domain::IPV6,
    };
    let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP)).map_err(|e| {
        io::Error::new(
            e.kind(),
            match family {
                Family::V4 => format!("cannot open an IPv4 socket: {e}"),
                // Most likely a sandbox (systemd's RestrictAddressFamilies) or a host
                // without IPv6; say both.
                Family::V6 => format!(
                    "cannot open an IPv6 socket: {e} (is IPv6 off on this host, or AF_INET6 missing from the unit's RestrictAddressFamilies?)"
                ),
            },
        )
    })?;
    if family == Family::V6 {
        s.set_only_v6(true)?;
    }
    s.set_nonblocking(true)?;
    s.set_cloexec(true)?;
    Ok(s)
}

/// Lets a socket bind an address this host does not have yet (IP_FREEBIND,
/// IPV6_FREEBIND): a daemon started before its address is up (boot ordering, a
/// transient failure) binds and works once the address appears, instead of failing
/// the start and looping through restarts.
fn set_freebind(s: &Socket, family: Family) -> io::Result<()> {
    match family {
        Family::V4 => s.set_freebind_v4(true),
        Family::V6 => s.set_freebind_v6(true),
    }
}

impl Transport {
    /// Opens the sockets `cfg` asks for; `addrs` are the servers' addresses as
    /// `Config::resolve` gave them.
    pub fn open(cfg: &Config, addrs: &[(u16, SocketAddr)]) -> io::Result<Transport> {
        let family = cfg.family;
        let me = addrs
            .iter()
            .find(|a| a.0 == cfg.id)
            .map(|a| a.1)
            .ok_or_else(|| io::Error::other(format!("no address for server {}", cfg.id)))?;
        for &(id, a) in addrs {
            if let Some(s) = cfg.server(id).filter(|s| s.addr != Address::Ip(a)) {
                info!("server {id}: {} is {a}", s.addr);
            }
        }
        if let Some(why) = addr::own_address_problem(cfg.id, me) {
            warn!("{}:{}: {why}", cfg.path.display(), cfg.me().line);
        }
        let uni = udp_socket(family)?;
        set_freebind(&uni, family)?;
        uni.bind(&me.into())
            .map_err(|e| io::Error::new(e.kind(), format!("cannot bind {me}: {e}")))?;
        let peers: Vec<(u16, SocketAddr)> =
            addrs.iter().filter(|a| a.0 != cfg.id).copied().collect();
        let names = peers.iter().map(|&(_, a)| a.into()).collect();
        let (group, group_addr) = match &cfg.transport {
            Mode::Unicast => (None, None),
            Mode::Multicast {
                group,
                interface,
                ttl,
            } => {
                let (g, to) = match group {
                    SocketAddr::V4(group) => {
                        let ifaddr = interface_addr(interface)?;
                        uni.set_multicast_if_v4(&ifaddr)?;
                        uni.set_multicast_ttl_v4(*ttl)?;
                        uni.set_multicast_loop_v4(true)?;
                        let g = udp_socket(family)?;
                        g.set_reuse_address(true)?;
                        g.set_reuse_port(true)?;
                        // Bound to the group address, the socket sees only the group's traffic.
                        g.bind(&SocketAddr::V4(*group).into()).map_err(|e| {
                            io::Error::new(e.kind(), format!("cannot bind group {group}: {e}"))
                        })?;
                        g.join_multicast_v4(group.ip(), &ifaddr).map_err(|e| {
                            io::Error::new(
                                e.kind(),
                                format!("cannot join {} on {interface}: {e}", group.ip()),
                            )
                        })?;
                        (g, SocketAddr::V4(*group))
                    }
                    SocketAddr::V6(group) => {
                        // By index: IPv6 names the interface, not one of its addresses.
                        // One with no IPv6 address has IPv6 off and is refused as
                        // IPv4 refuses one without an IPv4 address.
                        addr::multicast_interface(interface, Family::V6)?;
                        let index = addr::interface_index(interface)?;
                        uni.set_multicast_if_v6(index)?;
                        uni.set_multicast_hops_v6(*ttl)?;
                        uni.set_multicast_loop_v6(true)?;
                        let g = udp_socket(family)?;
                        g.set_reuse_address(true)?;
                        g.set_reuse_port(true)?;
                        // The scope is the interface: a link-scope group (ff02::, ff12::)
                        // can only be bound with one, and the socket then hears only it.
                        let scoped = SocketAddrV6::new(*group.ip(), group.port(), 0, index);
                        g.bind(&SocketAddr::V6(scoped).into()).map_err(|e| {
                            io::Error::new(e.kind(), format!("cannot bind group {group}: {e}"))
                        })?;
                        g.join_multicast_v6(group.ip(), index).map_err(|e| {
                            io::Error::new(
                                e.kind(),
                                format!("cannot join {} on {interface}: {e}", group.ip()),
                            )
                        })?;
                        (g, SocketAddr::V6(scoped))
                    }
                };
                (Some(UdpSocket::from_std(g.into())), Some(to))
            }
        };
        Ok(Transport {
            unicast: UdpSocket::from_std(uni.into()),
            group,
            group_addr,
            peers,
            names,
        })
    }

    /// Sends `bytes` to `dest`; returns how many datagrams left and the errors seen.
    pub fn send(&self, dest: Dest, bytes: &[u8]) -> (u64, Vec<(SocketAddr, io::Error)>) {
        let mut sent = 0;
        let mut errors = Vec::new();
        if let (Dest::All, None) = (dest, self.group_addr) {
            for (peers, names) in self
                .peers
                .chunks(SEND_BATCH)
                .zip(self.names.chunks(SEND_BATCH))
            {
                self.send_each(peers, names, bytes, &mut sent, &mut errors);
            }
            return (sent, errors);
        }
        let mut one = |to: SocketAddr| match self.unicast.send_to(bytes, to) {
            Ok(_) => sent += 1,
            Err(e) => errors.push((to, e)),
        };
        match (dest, self.group_addr) {
            (Dest::All, Some(g)) => one(g),
            (Dest::All, None) => unreachable!("sent above"),
            // One datagram reaches the whole group anyway.
            (Dest::Only(_), Some(g)) => one(g),
            (Dest::Only(set), None) => {
                for &(id, a) in &self.peers {
                    if set.contains(id) {
                        one(a)
                    }
                }
            }
            (Dest::One(id), _) => {
                if let Some(&(_, a)) = self.peers.iter().find(|p| p.0 == id) {
                    one(a)
                }
            }
        }
        (sent, errors)
    }

    /// Sends `bytes` to each of `peers` (at most SEND_BATCH) with sendmmsg(2): one
    /// system call for all of them while none fails. A failed one is reported with its
    /// error, as a sendto(2) of it would have been, and the rest are sent after it.
    fn send_each(
        &self,
        peers: &[(u16, SocketAddr)],
        names: &[socket2::SockAddr],
        bytes: &[u8],
        sent: &mut u64,
        errors: &mut Vec<(SocketAddr, io::Error)>,
    ) {
        use std::os::fd::AsRawFd;
        debug_assert!(peers.len() <= SEND_BATCH && names.len() == peers.len());
        let mut iov = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        // SAFETY: mmsghdr is plain data; all-zero is a valid empty header.
        let mut msgs: [libc::mmsghdr; SEND_BATCH] = unsafe { std::mem::zeroed() };
        for (m, a) in msgs.iter_mut().zip(names) {
            m.msg_hdr.msg_name = a.as_ptr() as *mut libc::c_void;
            m.msg_hdr.msg_namelen = a.len();
            m.msg_hdr.msg_iov = &mut iov;
            m.msg_hdr.msg_iovlen = 1;
        }
        let mut at = 0;
        while at < peers.len() {
            // SAFETY: msgs[at..peers.len()] point at live addresses and one iovec over
            // `bytes`, all outliving the call; the kernel only reads them (and writes
            // msg_len).
            let n = unsafe {
                libc::sendmmsg(
                    self.unicast.as_raw_fd(),
                    msgs[at..].as_mut_ptr(),
                    (peers.len() - at) as libc::c_uint,
                    0,
                )
            };
            if n > 0 {
                *sent += n as u64;
                at += n as usize;
                continue;
            }
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // The first message failed: report it, go on with the next.
            errors.push((peers[at].1, e));
            at += 1;
        }
    }

    /// The configured address of server `id`.
    pub fn peer_addr(&self, id: u16) -> Option<SocketAddr> {
        self.peers.iter().find(|p| p.0 == id).map(|p| p.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::SockRef;
    use std::path::Path;

    fn free_port() -> u16 {
        std::net::UdpSocket::bind("127.0.0.1:0")
            .and_then(|s| s.local_addr())
            .map(|a| a.port())
            .unwrap()
    }

    fn open(text: &str) -> Transport {
        let cfg = Config::parse(text, Path::new("t.conf"), Some(1)).unwrap();
        Transport::open(&cfg, &cfg.resolve().unwrap()).unwrap()
    }

    /// `ttl 0` reaches the socket (host-only multicast), and the unicast socket of
    /// either family is bound with freebind.
    #[test]
    fn ttl_zero_and_freebind_reach_the_sockets() {
        let (p, g) = (free_port(), free_port());
        let t = open(&format!(
            "cluster t\nserver 1 127.0.0.1:{p}\nmulticast 239.255.77.77:{g} interface lo ttl 0\n"
        ));
        let uni = SockRef::from(&t.unicast);
        assert_eq!(uni.multicast_ttl_v4().unwrap(), 0);
        assert!(uni.freebind_v4().unwrap());
        drop(t);
        let t = open(&format!(
            "cluster t\nserver 1 127.0.0.1:{p}\nmulticast 239.255.77.77:{g} interface lo ttl 7\n"
        ));
        assert_eq!(SockRef::from(&t.unicast).multicast_ttl_v4().unwrap(), 7);
        drop(t);
        let t = open(&format!("cluster t\nserver 1 [::1]:{p}\nunicast\n"));
        let uni = SockRef::from(&t.unicast);
        assert!(uni.freebind_v6().unwrap());
        assert_eq!(
            t.unicast.local_addr().unwrap(),
            format!("[::1]:{p}").parse().unwrap()
        );
    }

    /// Issue 25: a unicast broadcast leaves in one sendmmsg(2) per SEND_BATCH peers;
    /// every peer gets it, and a peer the kernel refuses (here an IPv6 address from an
    /// IPv4 socket) is reported with its error while those after it still get theirs,
    /// as with one sendto(2) each.
    #[test]
    fn a_broadcast_reaches_every_peer_and_reports_the_one_that_fails() {
        let p = free_port();
        let mut t = open(&format!("cluster t\nserver 1 127.0.0.1:{p}\nunicast\n"));
        let rx: Vec<std::net::UdpSocket> = (0..SEND_BATCH + 3)
            .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let bad: SocketAddr = "[::1]:9".parse().unwrap();
        t.peers = rx
            .iter()
            .enumerate()
            .map(|(i, s)| (i as u16 + 2, s.local_addr().unwrap()))
            .collect();
        t.peers.insert(1, (99, bad));
        t.names = t.peers.iter().map(|&(_, a)| a.into()).collect();
        let (sent, errors) = t.send(Dest::All, b"hello");
        assert_eq!(sent, rx.len() as u64, "{errors:?}");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].0, bad);
        let mut buf = [0u8; 16];
        for s in &rx {
            s.set_read_timeout(Some(std::time::Duration::from_secs(2)))
                .unwrap();
            let (n, from) = s.recv_from(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"hello");
            assert_eq!(from.port(), p);
        }
    }
}

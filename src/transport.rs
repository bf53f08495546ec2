//! UDP transport (SPEC section 9): multicast with port sharing, or unicast fan-out.
//!
//! Every server owns a unicast socket bound to its configured address; all datagrams
//! leave from it, so their source is the sender's configured address. In multicast
//! mode a second socket, bound to the group port with SO_REUSEPORT (so several daemons
//! share one host), receives the group; broadcasts go to the group with the configured
//! TTL and loopback on. In unicast mode broadcasts are sent to each other server.

use crate::config::{Config, Transport as Mode};
use crate::node::Dest;
use mio::net::UdpSocket;
use socket2::{Domain, Protocol, Socket, Type};
use std::ffi::CString;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};

/// The receive buffer: anything longer than a valid datagram is refused anyway.
pub const RECV_BUF: usize = 2048;

/// The sockets of one server.
#[derive(Debug)]
pub struct Transport {
    /// Bound to this server's address: receives VOTEs (and everything in unicast mode).
    pub unicast: UdpSocket,
    /// Bound to the group port, multicast mode only.
    pub group: Option<UdpSocket>,
    group_addr: Option<SocketAddr>,
    peers: Vec<(u16, SocketAddr)>,
}

/// The IPv4 address of interface `name`.
pub fn interface_addr(name: &str) -> io::Result<Ipv4Addr> {
    let cname = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad interface name"))?;
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found = None;
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let matches = !ifa.ifa_name.is_null()
            && unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) } == cname.as_c_str();
        if matches && !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points to a sockaddr; its family says which one.
            let family = unsafe { (*ifa.ifa_addr).sa_family };
            if i32::from(family) == libc::AF_INET {
                // SAFETY: AF_INET means the sockaddr is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                found = Some(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
                break;
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    found.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("interface '{name}' has no IPv4 address"),
        )
    })
}

fn udp_socket() -> io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_nonblocking(true)?;
    s.set_cloexec(true)?;
    Ok(s)
}

impl Transport {
    /// Opens the sockets `cfg` asks for.
    pub fn open(cfg: &Config) -> io::Result<Transport> {
        let me = cfg.me().addr;
        let uni = udp_socket()?;
        uni.bind(&SocketAddr::V4(me).into())
            .map_err(|e| io::Error::new(e.kind(), format!("cannot bind {me}: {e}")))?;
        let peers = cfg
            .servers
            .iter()
            .filter(|s| s.id != cfg.id)
            .map(|s| (s.id, SocketAddr::V4(s.addr)))
            .collect();
        let (group, group_addr) = match &cfg.transport {
            Mode::Unicast => (None, None),
            Mode::Multicast {
                group,
                interface,
                ttl,
            } => {
                let ifaddr = interface_addr(interface)?;
                uni.set_multicast_if_v4(&ifaddr)?;
                uni.set_multicast_ttl_v4(*ttl)?;
                uni.set_multicast_loop_v4(true)?;
                let g = udp_socket()?;
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
                (
                    Some(UdpSocket::from_std(g.into())),
                    Some(SocketAddr::V4(*group)),
                )
            }
        };
        Ok(Transport {
            unicast: UdpSocket::from_std(uni.into()),
            group,
            group_addr,
            peers,
        })
    }

    /// Sends `bytes` to `dest`; returns how many datagrams left and the errors seen.
    pub fn send(&self, dest: Dest, bytes: &[u8]) -> (u64, Vec<(SocketAddr, io::Error)>) {
        let mut sent = 0;
        let mut errors = Vec::new();
        let mut one = |to: SocketAddr| match self.unicast.send_to(bytes, to) {
            Ok(_) => sent += 1,
            Err(e) => errors.push((to, e)),
        };
        match (dest, self.group_addr) {
            (Dest::All, Some(g)) => one(g),
            (Dest::All, None) => self.peers.iter().for_each(|&(_, a)| one(a)),
            (Dest::One(id), _) => {
                if let Some(&(_, a)) = self.peers.iter().find(|p| p.0 == id) {
                    one(a)
                }
            }
        }
        (sent, errors)
    }

    /// The configured address of server `id`.
    pub fn peer_addr(&self, id: u16) -> Option<SocketAddr> {
        self.peers.iter().find(|p| p.0 == id).map(|p| p.1)
    }
}

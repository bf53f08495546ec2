//! Addresses (SPEC sections 9 and 16): a server address as written (IPv4, IPv6 or a
//! host name), the cluster's one address family, resolution at start, and what this
//! host has (interfaces and local addresses) for `--check-config` and the start.
//!
//! The rules:
//! - One address family per cluster: every literal server address and the multicast
//!   group are IPv4, or all are IPv6. A list of names alone is IPv4 unless the file says
//!   `unicast ipv6`. A mix is a configuration error.
//! - Host names are resolved once, at start (`--check-config` resolves them too), never
//!   inside the event loop: a reload compares the text of the list, not addresses.
//!   A name takes its first address of the cluster's family (a dual-stack `localhost`
//!   is 127.0.0.1 in an IPv4 cluster and ::1 in an IPv6 one).
//! - Link-local unicast (fe80::/10) and zones (`%eth0`) are refused: the zone is a local
//!   interface name that differs per host while the list must be the same text on
//!   every server. Unique-local (fd00::/8) or global addresses do the same job.

use std::ffi::{CStr, CString};
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6, ToSocketAddrs};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long the names of a server list may take to resolve, all together: a dead DNS
/// server delays a start by this much at most, then the start fails naming the server.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(20);
/// The longest host name (RFC 1035: 253 characters written out).
const MAX_NAME_LEN: usize = 253;
/// At most this many interfaces or addresses are listed in a hint.
const MAX_LISTED: usize = 16;

/// An address family; every address of a cluster has the same one.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// The family of `ip`.
    pub fn of(ip: IpAddr) -> Family {
        match ip {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        })
    }
}

/// A server address as the file gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    /// A literal IPv4 or IPv6 address and port.
    Ip(SocketAddr),
    /// A host name (lowercased: DNS names are case-insensitive) and port.
    Name(String, u16),
}

impl Address {
    /// The port.
    pub fn port(&self) -> u16 {
        match self {
            Address::Ip(a) => a.port(),
            Address::Name(_, p) => *p,
        }
    }

    /// The family of a literal address; None for a name.
    pub fn family(&self) -> Option<Family> {
        match self {
            Address::Ip(a) => Some(Family::of(a.ip())),
            Address::Name(..) => None,
        }
    }
}

/// The canonical text: `10.0.0.1:7400`, `[2001:db8::1]:7400`, `node2.example.net:7400`.
/// The fingerprint is made of it, so an IPv4 list keeps the fingerprint it always had.
impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Ip(a) => write!(f, "{a}"),
            Address::Name(n, p) => write!(f, "{n}:{p}"),
        }
    }
}

const FORMS: &str = "ADDRESS:PORT, [IPV6-ADDRESS]:PORT or NAME:PORT";

fn parse_port(p: &str, whole: &str) -> Result<u16, String> {
    p.parse()
        .map_err(|_| format!("'{p}' in '{whole}' is not a port (0..=65535)"))
}

/// Parses a server address: `10.0.0.1:7400`, `[2001:db8::1]:7400` or
/// `node2.example.net:7400`. The port may be 0 here; the caller refuses it.
pub fn parse_address(s: &str) -> Result<Address, String> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, port) = rest
            .split_once("]:")
            .ok_or_else(|| format!("'{s}' is not [IPV6-ADDRESS]:PORT"))?;
        if let Some((_, zone)) = host.split_once('%') {
            return Err(format!(
                "'{s}': zones ('%{zone}') are not supported: the list must be the same text on every server; use a global or unique-local (fd00::/8) address"
            ));
        }
        let ip: Ipv6Addr = host
            .parse()
            .map_err(|_| format!("'{host}' in '{s}' is not an IPv6 address"))?;
        check_unicast(IpAddr::V6(ip))?;
        let port = parse_port(port, s)?;
        return Ok(Address::Ip(SocketAddr::V6(SocketAddrV6::new(
            ip, port, 0, 0,
        ))));
    }
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("'{s}' needs a port: {FORMS}"))?;
    if host.contains(':') {
        return Err(format!(
            "'{s}': write an IPv6 address in brackets, as [IPV6-ADDRESS]:PORT"
        ));
    }
    if host.is_empty() {
        return Err(format!("'{s}' has no address before the port: {FORMS}"));
    }
    let port = parse_port(port, s)?;
    if host.chars().all(|c| c.is_ascii_digit() || c == '.') {
        // Looks like a number: an IPv4 address or nothing (getaddrinfo would read
        // "10.1" as 10.0.0.1; nobody means that).
        let ip: Ipv4Addr = host
            .parse()
            .map_err(|_| format!("'{host}' in '{s}' is not an IPv4 address"))?;
        check_unicast(IpAddr::V4(ip))?;
        return Ok(Address::Ip(SocketAddr::new(IpAddr::V4(ip), port)));
    }
    check_name(host).map_err(|why| format!("'{host}' in '{s}' is not a host name: {why}"))?;
    Ok(Address::Name(host.to_ascii_lowercase(), port))
}

/// Letters, digits, '-' and '_' in dot-separated labels of 1..=63 (a trailing dot is
/// allowed), at most 253 characters.
fn check_name(host: &str) -> Result<(), String> {
    if host.len() > MAX_NAME_LEN {
        return Err(format!("longer than {MAX_NAME_LEN} characters"));
    }
    let labels = host.strip_suffix('.').unwrap_or(host);
    for label in labels.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err("a label is empty or longer than 63 characters".into());
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(format!("'{c}' is not allowed"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err("a label starts or ends with '-'".into());
        }
    }
    Ok(())
}

/// Refuses what cannot be a server's own unicast address.
fn check_unicast(ip: IpAddr) -> Result<(), String> {
    if ip.is_unspecified() {
        return Err(format!(
            "{ip} is the unspecified address; give this server's own address"
        ));
    }
    if ip.is_multicast() {
        return Err(format!(
            "{ip} is a multicast address; a server needs a unicast one (the group goes on the 'multicast' line)"
        ));
    }
    if let IpAddr::V6(v6) = ip {
        if v6.to_ipv4_mapped().is_some() {
            return Err(format!(
                "{ip} is an IPv4-mapped address; write it as IPv4 ({})",
                v6.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED)
            ));
        }
        if (v6.segments()[0] & 0xffc0) == 0xfe80 {
            return Err(format!(
                "{ip} is link-local (fe80::/10): its scope is an interface name that differs per host; use a global or unique-local (fd00::/8) address"
            ));
        }
    }
    Ok(())
}

/// Parses a multicast group: `239.255.47.1:7400` or `[ff12::4711]:7400`.
pub fn parse_group(s: &str) -> Result<SocketAddr, String> {
    let group: SocketAddr = s.parse().map_err(|_| {
        if s.contains('%') {
            format!("'{s}': zones are not supported; the interface is named by 'interface'")
        } else {
            format!("'{s}' is not a group:port (239.255.47.1:7400 or [ff12::4711]:7400)")
        }
    })?;
    if !group.ip().is_multicast() {
        return Err(format!("{} is not a multicast address", group.ip()));
    }
    if group.port() == 0 {
        return Err("the multicast group needs a port other than 0".into());
    }
    Ok(group)
}

/// Who fixes the cluster's family: a multicast group, `unicast ipv4|ipv6` or a
/// literal server address, with its line and a description for errors.
pub struct Claim {
    /// The line it is on.
    pub line: usize,
    /// What it is, for an error: "server 3 \[2001:db8::13\]:7400".
    pub what: String,
    /// The family it says.
    pub family: Family,
}

/// The cluster's family: the one every claim agrees on, IPv4 with none. A claim that
/// disagrees with the first (by line) is an error on its line.
pub fn cluster_family(mut claims: Vec<Claim>) -> Result<Family, (usize, String)> {
    claims.sort_by_key(|c| c.line);
    let Some(first) = claims.first() else {
        return Ok(Family::V4);
    };
    if let Some(c) = claims.iter().find(|c| c.family != first.family) {
        return Err((
            c.line,
            format!(
                "{} is {} but {} (line {}) is {}: one address family per cluster (every server and the multicast group)",
                c.what, c.family, first.what, first.line, first.family
            ),
        ));
    }
    Ok(first.family)
}

/// The first address of `family` in what a name resolved to (getaddrinfo's order).
pub fn pick(addrs: &[SocketAddr], family: Family) -> Option<SocketAddr> {
    addrs.iter().copied().find(|a| Family::of(a.ip()) == family)
}

/// Resolves each (name, port), all at once, within `timeout` together. Each result is
/// the addresses getaddrinfo gave, or why there are none.
pub fn resolve_names(
    names: &[(String, u16)],
    timeout: Duration,
) -> Vec<Result<Vec<SocketAddr>, String>> {
    resolve_with(names, timeout, |host, port| {
        (host, port)
            .to_socket_addrs()
            .map(|it| it.collect())
            .map_err(|e| e.to_string())
    })
}

type Lookup = fn(&str, u16) -> Result<Vec<SocketAddr>, String>;

/// `resolve_names` with the lookup given (tests give one that hangs).
fn resolve_with(
    names: &[(String, u16)],
    timeout: Duration,
    lookup: Lookup,
) -> Vec<Result<Vec<SocketAddr>, String>> {
    let (tx, rx) = mpsc::channel();
    let mut handles = Vec::new();
    let mut out: Vec<Option<Result<Vec<SocketAddr>, String>>> = vec![None; names.len()];
    for (i, (host, port)) in names.iter().enumerate() {
        let (tx, host, port) = (tx.clone(), host.clone(), *port);
        let spawned = std::thread::Builder::new()
            .name("electd-resolve".into())
            .spawn(move || {
                let _ = tx.send((i, lookup(&host, port)));
            });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => out[i] = Some(Err(format!("cannot start a resolver thread: {e}"))),
        }
    }
    drop(tx);
    let deadline = Instant::now() + timeout;
    while out.iter().any(Option::is_none) {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok((i, r)) => out[i] = Some(r),
            Err(_) => break,
        }
    }
    if out.iter().all(Option::is_some) {
        // Every thread has sent: wait for them to end, so none runs on (with signals
        // unblocked) once the daemon has masked them.
        for h in handles {
            let _ = h.join();
        }
    }
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err(format!("no answer within {}s", timeout.as_secs_f64()))))
        .collect()
}

/// One network interface of this host and its IP addresses.
#[derive(Clone, Debug)]
pub struct Interface {
    /// Its name.
    pub name: String,
    /// Its IPv4 and IPv6 addresses (none for an interface without any).
    pub addrs: Vec<IpAddr>,
    /// IFF_LOOPBACK.
    pub loopback: bool,
}

/// This host's interfaces (getifaddrs), those without an IP address too.
pub fn interfaces() -> io::Result<Vec<Interface>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out: Vec<Interface> = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        let ip = if ifa.ifa_addr.is_null() {
            None
        } else {
            // SAFETY: ifa_addr points to a sockaddr; its family says which one.
            match i32::from(unsafe { (*ifa.ifa_addr).sa_family }) {
                libc::AF_INET => {
                    // SAFETY: AF_INET means the sockaddr is a sockaddr_in.
                    let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                    Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                        sin.sin_addr.s_addr,
                    ))))
                }
                libc::AF_INET6 => {
                    // SAFETY: AF_INET6 means the sockaddr is a sockaddr_in6.
                    let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                    Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
                }
                _ => None,
            }
        };
        let i = match out.iter().position(|i| i.name == name) {
            Some(i) => i,
            None => {
                out.push(Interface {
                    name,
                    addrs: Vec::new(),
                    loopback: false,
                });
                out.len() - 1
            }
        };
        out[i].addrs.extend(ip);
        out[i].loopback |= ifa.ifa_flags & libc::IFF_LOOPBACK as u32 != 0;
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

fn listed<T: fmt::Display>(items: impl Iterator<Item = T>) -> String {
    let all: Vec<String> = items.map(|i| i.to_string()).collect();
    if all.is_empty() {
        return "none".into();
    }
    let mut s = all[..all.len().min(MAX_LISTED)].join(", ");
    if all.len() > MAX_LISTED {
        s += &format!(" and {} more", all.len() - MAX_LISTED);
    }
    s
}

/// The first address of `family` on interface `name`, for multicast, or what is
/// wrong: it does not exist (naming those that do), has no address of that family, or
/// is a loopback interface and the family IPv6 (Linux routes no IPv6 multicast there:
/// sends fail with "network unreachable", and even with a route nothing arrives).
pub fn multicast_interface(name: &str, family: Family) -> io::Result<IpAddr> {
    let all = interfaces()?;
    let Some(ifc) = all.iter().find(|i| i.name == name) else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "interface '{name}' does not exist (this host has: {})",
                listed(all.iter().map(|i| &i.name))
            ),
        ));
    };
    if ifc.loopback && family == Family::V6 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "interface '{name}' is a loopback interface, which carries no IPv6 multicast; use another interface, or unicast"
            ),
        ));
    }
    ifc.addrs
        .iter()
        .copied()
        .find(|a| Family::of(*a) == family)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "interface '{name}' has no {family} address (it has: {})",
                    listed(ifc.addrs.iter())
                ),
            )
        })
}

/// The index of interface `name` (if_nametoindex).
pub fn interface_index(name: &str) -> io::Result<u32> {
    let c = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad interface name"))?;
    // SAFETY: if_nametoindex reads a NUL-terminated string we own.
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("interface '{name}' does not exist"),
        )),
        i => Ok(i),
    }
}

/// True when `ip` is an address of this host now: a socket binds to it without
/// IP_FREEBIND. This is the kernel's own answer (a 127.0.0.0/8 address, an AnyIP
/// route and a still tentative IPv6 address are judged as the bind would be), where a
/// search of getifaddrs would be a guess.
pub fn is_local(ip: IpAddr) -> io::Result<bool> {
    match std::net::UdpSocket::bind(SocketAddr::new(ip, 0)) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AddrNotAvailable => Ok(false),
        Err(e) => Err(e),
    }
}

/// Why this server's own address `addr` (server `id`) is a problem, if it is not an
/// address of this host: the text `--check-config` prints and the daemon logs, after
/// the file and the line of the server.
pub fn own_address_problem(id: u16, addr: SocketAddr) -> Option<String> {
    match is_local(addr.ip()) {
        Ok(true) => None,
        Ok(false) => {
            let here = interfaces()
                .map(|is| listed(is.iter().flat_map(|i| i.addrs.iter())))
                .unwrap_or_else(|e| format!("unknown: {e}"));
            Some(format!(
                "{} (server {id}, this server) is not an address of this host (yet): electd binds it anyway (freebind) but sends and receives nothing until it is configured here; if it never will be, --id or the server line is wrong (this host has: {here})",
                addr.ip()
            ))
        }
        Err(e) => Some(format!(
            "cannot tell whether {} (server {id}, this server) is an address of this host: {e}",
            addr.ip()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_forms_and_their_canonical_text() {
        for (text, canon) in [
            ("10.0.2.12:7400", "10.0.2.12:7400"),
            ("[2001:db8::12]:7400", "[2001:db8::12]:7400"),
            ("[2001:0DB8:0::12]:7400", "[2001:db8::12]:7400"),
            ("[::1]:7400", "[::1]:7400"),
            ("[fd77::1]:1", "[fd77::1]:1"),
            ("Node2.Example.NET:7400", "node2.example.net:7400"),
            ("localhost:7400", "localhost:7400"),
            ("a_b-c.d.:1", "a_b-c.d.:1"),
            ("10.0.0.1:0", "10.0.0.1:0"),
        ] {
            assert_eq!(
                parse_address(text).map(|a| a.to_string()),
                Ok(canon.to_string()),
                "{text}"
            );
        }
        assert_eq!(
            parse_address("node:7400"),
            Ok(Address::Name("node".into(), 7400))
        );
        assert_eq!(
            parse_address("[::1]:7400").unwrap().family(),
            Some(Family::V6)
        );
        assert_eq!(parse_address("h:1").unwrap().family(), None);
    }

    #[test]
    fn bad_addresses_say_why() {
        for (text, want) in [
            ("nowhere", "needs a port"),
            ("2001:db8::12:7400", "in brackets"),
            ("[2001:db8::12]7400", "is not [IPV6-ADDRESS]:PORT"),
            ("[2001:db8::zz]:1", "is not an IPv6 address"),
            ("[fe80::1]:7400", "link-local"),
            ("[fe80::1%eth0]:7400", "zones ('%eth0') are not supported"),
            ("[::ffff:10.0.0.1]:7400", "write it as IPv4 (10.0.0.1)"),
            ("[::]:7400", "unspecified"),
            ("0.0.0.0:7400", "unspecified"),
            ("239.1.1.1:7400", "multicast"),
            ("[ff12::1]:7400", "multicast"),
            (
                "10.0.0.300:7400",
                "'10.0.0.300' in '10.0.0.300:7400' is not an IPv4 address",
            ),
            ("1234:7400", "is not an IPv4 address"),
            ("host:x", "'x' in 'host:x' is not a port"),
            ("host:70000", "is not a port"),
            ("a..b:1", "label is empty"),
            ("-a.b:1", "starts or ends with '-'"),
            ("a/b:1", "'/' is not allowed"),
            (":1", "has no address before the port"),
        ] {
            let e = parse_address(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
        let long = format!("{}:1", "a.".repeat(127));
        assert!(
            parse_address(&long)
                .unwrap_err()
                .contains("longer than 253")
        );
    }

    #[test]
    fn groups() {
        assert_eq!(
            parse_group("[ff12::4711]:7400").unwrap().to_string(),
            "[ff12::4711]:7400"
        );
        assert!(parse_group("239.255.1.1:7400").is_ok());
        assert!(
            parse_group("[fd77::1]:7400")
                .unwrap_err()
                .contains("not a multicast")
        );
        assert!(
            parse_group("[ff12::1%eth0]:7400")
                .unwrap_err()
                .contains("zones")
        );
        assert!(
            parse_group("[ff12::1]:0")
                .unwrap_err()
                .contains("port other than 0")
        );
        assert!(
            parse_group("group:1")
                .unwrap_err()
                .contains("is not a group:port")
        );
    }

    #[test]
    fn one_family_per_cluster() {
        let c = |line, what: &str, family| Claim {
            line,
            what: what.into(),
            family,
        };
        assert_eq!(cluster_family(vec![]), Ok(Family::V4));
        assert_eq!(
            cluster_family(vec![c(3, "b", Family::V6), c(2, "a", Family::V6)]),
            Ok(Family::V6)
        );
        assert_eq!(
            cluster_family(vec![c(5, "multicast group ff12::1", Family::V6), c(2, "server 1 10.0.0.1:1", Family::V4)]),
            Err((
                5,
                "multicast group ff12::1 is IPv6 but server 1 10.0.0.1:1 (line 2) is IPv4: one address family per cluster (every server and the multicast group)".into()
            ))
        );
    }

    #[test]
    fn a_dual_stack_name_gives_the_address_of_the_clusters_family() {
        let v4: SocketAddr = "127.0.0.1:7".parse().unwrap();
        let v6: SocketAddr = "[::1]:7".parse().unwrap();
        let v6b: SocketAddr = "[fd77::1]:7".parse().unwrap();
        assert_eq!(pick(&[v6, v4], Family::V4), Some(v4));
        assert_eq!(pick(&[v6, v4, v6b], Family::V6), Some(v6));
        assert_eq!(pick(&[v4], Family::V6), None);
    }

    #[test]
    fn names_resolve_or_say_why() {
        let r = resolve_names(
            &[
                ("localhost".into(), 7400),
                ("no-such-host.invalid".into(), 1),
            ],
            RESOLVE_TIMEOUT,
        );
        assert!(
            pick(r[0].as_ref().unwrap(), Family::V4)
                .is_some_and(|a| a.ip().is_loopback() && a.port() == 7400),
            "{r:?}"
        );
        assert!(r[1].is_err(), "{r:?}");
        // A resolver that hangs costs the timeout, not the start.
        let t0 = Instant::now();
        let r = resolve_with(
            &[("slow".into(), 1), ("fast".into(), 2)],
            Duration::from_millis(200),
            |host, port| {
                if host == "slow" {
                    std::thread::sleep(Duration::from_secs(30));
                }
                Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))])
            },
        );
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        assert_eq!(r[0], Err("no answer within 0.2s".to_string()));
        assert_eq!(r[1], Ok(vec!["127.0.0.1:2".parse().unwrap()]));
    }

    #[test]
    fn this_hosts_interfaces_and_addresses() {
        let lo = multicast_interface("lo", Family::V4).unwrap();
        assert!(lo.is_loopback());
        let e = multicast_interface("lo", Family::V6)
            .unwrap_err()
            .to_string();
        assert!(e.contains("carries no IPv6 multicast"), "{e}");
        assert!(interface_index("lo").unwrap() > 0);
        let e = multicast_interface("electd-nope0", Family::V4)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("interface 'electd-nope0' does not exist (this host has: "),
            "{e}"
        );
        assert!(e.contains("lo"), "{e}");
        assert!(interface_index("electd-nope0").is_err());
        assert!(is_local("127.0.0.1".parse().unwrap()).unwrap());
        // TEST-NET-3 is never an address of a test machine.
        assert!(!is_local("203.0.113.77".parse().unwrap()).unwrap());
        assert!(own_address_problem(1, "127.0.0.1:7400".parse().unwrap()).is_none());
        let w = own_address_problem(2, "203.0.113.77:7400".parse().unwrap()).unwrap();
        assert!(
            w.starts_with(
                "203.0.113.77 (server 2, this server) is not an address of this host (yet)"
            ) && w.contains("127.0.0.1"),
            "{w}"
        );
    }
}

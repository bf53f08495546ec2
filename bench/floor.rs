//! The protocol floor of the idle benchmark (issue 25): the least a process can do to
//! send one datagram of electd's LEAD size to each peer every heartbeat, and to receive
//! it (and, for a protocol with acknowledgements, answer it with one datagram of ACK
//! size). No election, no state, no logging: epoll, a timerfd, recvfrom, sendto.
//!
//! It is a hidden mode of the bench binary, so `cargo bench` builds it and the benchmark
//! runs it in the same namespaces as electd and keepalived:
//! `electd-bench --idle-floor ROLE HBT_MS SELF PEER...` with ROLE one of `sender` (wakes
//! on a periodic timerfd, sends LEAD_LEN bytes to each peer, reads any replies until
//! EAGAIN when woken by them), `quiet` (receives until EAGAIN, sends nothing: the VRRP
//! backup's shape) and `ack` (receives, and answers every datagram with ACK_LEN bytes
//! to its sender). SELF and the peers are IPv4 addresses; the port is the benchmark's.

/// The hidden argument that selects this mode.
pub const ARG: &str = "--idle-floor";
/// An idle LEAD's electd datagram (UDP payload), bytes: version 7, asking one follower
/// (tests/bench_wire_layout.rs holds it to the encoder; 42 until the seventh round,
/// version 3's size).
pub const LEAD_LEN: usize = 23;
/// An idle ACK's electd datagram, bytes (36 until the seventh round).
pub const ACK_LEN: usize = 17;

fn sockaddr(ip: &str, port: u16) -> libc::sockaddr_in {
    let ip: std::net::Ipv4Addr = ip.parse().expect("an IPv4 address");
    // SAFETY: sockaddr_in is plain data; all zeroes is a valid value.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = port.to_be();
    sa.sin_addr.s_addr = u32::from(ip).to_be();
    sa
}

fn check(what: &str, rc: i64) {
    if rc < 0 {
        eprintln!("idle floor: {what}: {}", std::io::Error::last_os_error());
        std::process::exit(1);
    }
}

/// Runs the floor process described by `args` (those after [`ARG`]); never returns.
pub fn main(args: &[String], port: u16) -> ! {
    let [role, hbt, me, peers @ ..] = args else {
        eprintln!("idle floor: usage: {ARG} sender|quiet|ack HBT_MS SELF PEER...");
        std::process::exit(2);
    };
    let hbt_ms: u64 = hbt.parse().expect("heartbeat in ms");
    let peers: Vec<libc::sockaddr_in> = peers.iter().map(|p| sockaddr(p, port)).collect();
    let salen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let lead = [0x4cu8; LEAD_LEN];
    let ack = [0x41u8; ACK_LEN];
    // SAFETY: plain system calls on descriptors this process owns, with buffers and
    // structures that live across each call.
    unsafe {
        let s = libc::socket(
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        );
        check("socket", s.into());
        let sa = sockaddr(me, port);
        check(
            "bind",
            libc::bind(s, (&sa as *const libc::sockaddr_in).cast(), salen).into(),
        );
        let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        check("epoll_create1", ep.into());
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: 0,
        };
        check(
            "epoll_ctl",
            libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, s, &mut ev).into(),
        );
        let mut tfd = -1;
        if role == "sender" {
            tfd = libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            );
            check("timerfd_create", tfd.into());
            let period = libc::timespec {
                tv_sec: (hbt_ms / 1000) as libc::time_t,
                tv_nsec: ((hbt_ms % 1000) * 1_000_000) as libc::c_long,
            };
            let its = libc::itimerspec {
                it_interval: period,
                it_value: period,
            };
            check(
                "timerfd_settime",
                libc::timerfd_settime(tfd, 0, &its, std::ptr::null_mut()).into(),
            );
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: 1,
            };
            check(
                "epoll_ctl",
                libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, tfd, &mut ev).into(),
            );
        } else if role != "quiet" && role != "ack" {
            eprintln!("idle floor: unknown role {role}");
            std::process::exit(2);
        }
        let reply = role == "ack";
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 4];
        let mut buf = [0u8; 2048];
        loop {
            let n = libc::epoll_wait(ep, evs.as_mut_ptr(), evs.len() as i32, -1);
            if n < 0 {
                continue; // EINTR
            }
            for e in &evs[..n as usize] {
                if e.u64 == 1 {
                    let mut expirations = 0u64;
                    libc::read(tfd, (&mut expirations as *mut u64).cast(), 8);
                    for p in &peers {
                        libc::sendto(
                            s,
                            lead.as_ptr().cast(),
                            lead.len(),
                            0,
                            (p as *const libc::sockaddr_in).cast(),
                            salen,
                        );
                    }
                    continue;
                }
                loop {
                    let mut from: libc::sockaddr_in = std::mem::zeroed();
                    let mut flen = salen;
                    let got = libc::recvfrom(
                        s,
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        0,
                        (&mut from as *mut libc::sockaddr_in).cast(),
                        &mut flen,
                    );
                    if got < 0 {
                        break; // EAGAIN: drained
                    }
                    if reply {
                        libc::sendto(
                            s,
                            ack.as_ptr().cast(),
                            ack.len(),
                            0,
                            (&from as *const libc::sockaddr_in).cast(),
                            flen,
                        );
                    }
                }
            }
        }
    }
}

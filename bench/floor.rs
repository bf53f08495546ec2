//! The protocol floor of the idle benchmark (issue 25): the least a process can do to
//! send one datagram of electd's LEAD size to each peer every heartbeat, and to receive
//! it (and, for a protocol with acknowledgements, answer it with one datagram of ACK
//! size). No election, no state, no logging: epoll, a timerfd, recvfrom, sendto.
//!
//! It is a hidden mode of the bench binary, so `cargo bench` builds it and the benchmark
//! runs it in the same namespaces as electd and keepalived:
//! `electd-bench --idle-floor ROLE HBT_MS SELF PEER...` with ROLE one of `sender` (wakes
//! on a periodic timerfd, sends LEAD_LEN bytes to each peer, reads any replies until
//! EAGAIN when woken by them: the VRRP master's shape), `leader` (electd's leader at
//! rest, issue 25's tenth round: wakes once a heartbeat on epoll_wait's timeout, with
//! its socket not in the epoll set; reads what waits with one recvmmsg of up to 8,
//! then sends LEAD_LEN bytes to one peer, the peers in turn: three system calls a
//! heartbeat, as electd's leader makes them), `quiet` (receives until EAGAIN, sends
//! nothing: the VRRP backup's shape) and `ack` (receives, and answers every datagram
//! with ACK_LEN bytes to its sender). SELF and the peers are IPv4 addresses; the port
//! is the benchmark's.

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
    if role == "leader" && peers.is_empty() {
        eprintln!("idle floor: the leader role needs at least one PEER");
        std::process::exit(2);
    }
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
        if role == "leader" {
            leader(s, ep, hbt_ms, &peers, salen);
        }
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

/// The `leader` role: electd's leader at rest in system calls, with nothing else. Wakes
/// once a heartbeat on epoll_wait's timeout (its socket is not in the epoll set, as
/// electd's leader deregisters its sockets at rest), takes the acknowledgements that
/// waited with one recvmmsg of up to 8 datagrams, then sends one LEAD to the next peer
/// in turn (electd's targeted heartbeats at N = 3). Never returns.
///
/// # Safety
/// `s` and `ep` are this process's socket and epoll descriptors.
unsafe fn leader(s: i32, ep: i32, hbt_ms: u64, peers: &[libc::sockaddr_in], salen: u32) -> ! {
    const BATCH: usize = 8;
    let lead = [0x4cu8; LEAD_LEN];
    let mut bufs = vec![0u8; 2048 * BATCH];
    // SAFETY: all zeroes is a valid sockaddr_in, iovec and mmsghdr.
    let mut addrs: [libc::sockaddr_in; BATCH] = unsafe { std::mem::zeroed() };
    let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
    let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
    for i in 0..BATCH {
        iov[i].iov_base = bufs[i * 2048..].as_mut_ptr().cast();
        iov[i].iov_len = 2048;
        msgs[i].msg_hdr.msg_name = (&mut addrs[i] as *mut libc::sockaddr_in).cast();
        msgs[i].msg_hdr.msg_iov = &mut iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    let chase = Chase::from_env();
    let hbt = hbt_ms * 1_000_000;
    let mut next = electd::time::boot_now().as_nanos() + hbt;
    let mut turn = 0;
    let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 4];
    loop {
        let now = electd::time::boot_now().as_nanos();
        if now < next {
            // Rounded up to the millisecond, as mio rounds electd's timeout.
            let ms = (next - now).div_ceil(1_000_000) as i32;
            // SAFETY: an epoll descriptor of ours and a buffer of 4 events.
            unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), evs.len() as i32, ms) };
            continue;
        }
        chase.run();
        for m in &mut msgs {
            m.msg_hdr.msg_namelen = salen;
        }
        // SAFETY: BATCH headers pointing at buffers of this frame; non-blocking.
        unsafe {
            libc::recvmmsg(
                s,
                msgs.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let p = &peers[turn % peers.len()];
        turn += 1;
        // SAFETY: a datagram from a live buffer to an IPv4 address.
        unsafe {
            libc::sendto(
                s,
                lead.as_ptr().cast(),
                lead.len(),
                0,
                (p as *const libc::sockaddr_in).cast(),
                salen,
            )
        };
        next += hbt;
        if next <= now {
            next = now + hbt;
        }
    }
}

/// A calibration for the cost model of issue 25 (tenth round), off unless
/// `FLOOR_CHASE_LINES=N` is set: at each wakeup the `leader` role follows a ring of N
/// pointers, each in a cache line of its own, in a random order over 6N lines (about
/// ten lines a 4 KiB page, as electd's heartbeat runs 618 code lines in 54 pages). Each
/// load depends on the one before, so the misses come one after the other, as the
/// cold code lines of a wakeup do (an instruction fetch waits for its line). The
/// floor's CPU with and without it gives what N lines that went cold during a
/// heartbeat's sleep cost, against which electd's own lines a heartbeat can be weighed.
struct Chase {
    ring: Vec<usize>,
    start: usize,
    lines: usize,
}

impl Chase {
    const STRIDE: usize = 64 / std::mem::size_of::<usize>();

    fn from_env() -> Chase {
        let lines: usize = match std::env::var("FLOOR_CHASE_LINES") {
            Err(_) => 0,
            Ok(v) => match v.parse::<usize>() {
                Ok(n) if n <= 1 << 16 => n,
                _ => {
                    eprintln!(
                        "idle floor: FLOOR_CHASE_LINES must be a number of lines up to 65536, not '{v}'"
                    );
                    std::process::exit(2);
                }
            },
        };
        let slots = lines * 6;
        let mut ring = vec![0usize; slots * Self::STRIDE];
        // `lines` distinct slots of `slots`, in a random order (xorshift, fixed seed),
        // linked in a ring: a slot's first word holds the index of the next one's.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut order: Vec<usize> = (0..slots).collect();
        for i in (1..slots).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
        order.truncate(lines);
        for k in 0..lines {
            ring[order[k] * Self::STRIDE] = order[(k + 1) % lines] * Self::STRIDE;
        }
        Chase {
            ring,
            start: order.first().map_or(0, |o| o * Self::STRIDE),
            lines,
        }
    }

    /// Follows the ring once around (nothing when off).
    fn run(&self) {
        let mut at = self.start;
        for _ in 0..self.lines {
            at = self.ring[at];
        }
        std::hint::black_box(at);
    }
}

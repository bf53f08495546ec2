//! The systemd notify protocol (sd_notify(3)) without libsystemd: datagrams such as
//! `READY=1` sent to the Unix socket named by NOTIFY_SOCKET (a path, or `@name` for an
//! abstract socket), and the watchdog period from WATCHDOG_USEC.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// An unbound datagram socket that never blocks a send: when the service manager's
/// queue is full, the send fails with WouldBlock instead of stalling the event loop.
fn unbound_nonblocking() -> io::Result<UnixDatagram> {
    let s = UnixDatagram::unbound()?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// A connection to the service manager, if there is one.
#[derive(Debug)]
pub struct Notifier {
    sock: Option<(UnixDatagram, SocketAddr)>,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// Reads NOTIFY_SOCKET and WATCHDOG_USEC (honouring WATCHDOG_PID); both optional.
    pub fn from_env() -> io::Result<Notifier> {
        let sock = match std::env::var_os("NOTIFY_SOCKET") {
            None => None,
            Some(p) => {
                let p = p.to_string_lossy().to_string();
                let addr = match p.strip_prefix('@') {
                    Some(name) => SocketAddr::from_abstract_name(name.as_bytes())?,
                    None => SocketAddr::from_pathname(&p)?,
                };
                Some((unbound_nonblocking()?, addr))
            }
        };
        let for_us = std::env::var("WATCHDOG_PID")
            .ok()
            .and_then(|p| p.parse::<u32>().ok())
            .is_none_or(|p| p == std::process::id());
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&us| us > 0 && for_us)
            .map(Duration::from_micros);
        Ok(Notifier { sock, watchdog })
    }

    /// How often to send WATCHDOG=1: half the watchdog period, if one is set.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.sock.as_ref().and(self.watchdog).map(|w| w / 2)
    }

    /// Sends one notification; failures are logged, never fatal. Never waits: a
    /// service manager that stops reading costs lost notifications (a later STATUS=
    /// says the same again), never a stalled event loop (SPEC section 12).
    pub fn send(&self, msg: &str) {
        if let Some((s, addr)) = &self.sock {
            if let Err(e) = s.send_to_addr(msg.as_bytes(), addr) {
                log::debug!("sd_notify '{msg}': {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A service manager that never reads: sends fail fast instead of blocking.
    #[test]
    fn a_stuck_service_manager_never_blocks_a_send() {
        let dir = std::env::temp_dir().join(format!("electd-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let _stuck = UnixDatagram::bind(&path).unwrap();
        let n = Notifier {
            sock: Some((
                unbound_nonblocking().unwrap(),
                SocketAddr::from_pathname(&path).unwrap(),
            )),
            watchdog: None,
        };
        // Far more than the receive queue holds (net.unix.max_dgram_qlen, 512 by
        // default, or the socket buffer): a blocking socket would hang there, so the
        // sends run on a thread and the test fails instead of hanging.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let status = "STATUS=".to_string() + &"x".repeat(1000);
            for _ in 0..5000 {
                n.send(&status);
            }
            let _ = tx.send(());
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_secs(20)).is_ok(),
            "a send blocked on a service manager that does not read"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

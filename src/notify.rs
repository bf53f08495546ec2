//! The systemd notify protocol (sd_notify(3)) without libsystemd: datagrams such as
//! `READY=1` sent to the Unix socket named by NOTIFY_SOCKET (a path, or `@name` for an
//! abstract socket), and the watchdog period from WATCHDOG_USEC.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

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
                Some((UnixDatagram::unbound()?, addr))
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

    /// Sends one notification; failures are logged, never fatal.
    pub fn send(&self, msg: &str) {
        if let Some((s, addr)) = &self.sock {
            if let Err(e) = s.send_to_addr(msg.as_bytes(), addr) {
                log::debug!("sd_notify '{msg}': {e}");
            }
        }
    }
}

//! Signals: the handled set is blocked in every thread and read from a signalfd in the
//! loop (SIGTERM and SIGINT hand over and stop, SIGHUP reloads, SIGCHLD reaps hooks).

use super::*;

/// The signals the daemon takes through its signalfd.
pub(super) const SIGNALS_HANDLED: [i32; 4] =
    [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGCHLD];

pub(super) fn handled_mask() -> libc::sigset_t {
    // SAFETY: sigemptyset and sigaddset initialise and fill a sigset we own.
    unsafe {
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut mask);
        for s in SIGNALS_HANDLED {
            libc::sigaddset(&mut mask, s);
        }
        mask
    }
}

pub(super) fn set_handled(how: libc::c_int) -> io::Result<()> {
    let mask = handled_mask();
    // SAFETY: the mask applies to the calling thread; threads started later inherit it.
    let rc = unsafe { libc::pthread_sigmask(how, &mask, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Blocks SIGTERM, SIGINT, SIGHUP and SIGCHLD. `electd` calls it first thing in main,
/// before reading the configuration, binding or loading the state: a signal that
/// arrives meanwhile (`systemctl reload` racing the start) stays pending instead of
/// killing the daemon, and the signalfd reports it once the loop runs (SIGHUP then
/// reloads, SIGTERM stops cleanly). Children get an empty mask (std resets it).
pub fn block_signals() -> io::Result<()> {
    set_handled(libc::SIG_BLOCK)
}

/// Undoes [`block_signals`], for a run that ends without the loop (`--check-config`):
/// an ordinary short command that SIGTERM or Ctrl-C must stop.
pub fn unblock_signals() -> io::Result<()> {
    set_handled(libc::SIG_UNBLOCK)
}

/// Blocks the handled signals (again: [`block_signals`] normally did already) and
/// returns a signalfd that reports them, pending ones included.
pub(super) fn signal_fd() -> io::Result<i32> {
    block_signals()?;
    let mask = handled_mask();
    // SAFETY: signalfd reads the mask we own and returns a new descriptor or -1.
    unsafe {
        let fd = libc::signalfd(-1, &mask, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(fd)
    }
}

pub(super) fn read_signals(fd: i32) -> Vec<i32> {
    let mut out = Vec::new();
    loop {
        // SAFETY: signalfd_siginfo is plain data; read fills at most one of them.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        let n = unsafe { libc::read(fd, (&mut info as *mut libc::signalfd_siginfo).cast(), size) };
        if n as usize != size {
            break;
        }
        out.push(info.ssi_signo as i32);
    }
    out
}

impl Daemon {
    pub(super) fn on_signals(&mut self) -> Result<(), Fatal> {
        for sig in read_signals(self.signals) {
            match sig {
                // Logged, and kept for `status`, by reload itself.
                libc::SIGHUP => {
                    let _ = self.reload();
                }
                libc::SIGCHLD => {
                    for g in &mut self.groups {
                        g.hooks.poll(Instant::now());
                    }
                }
                _ if !self.host.stopping() => {
                    info!("signal {sig}: stopping");
                    self.notifier.send("STOPPING=1");
                    self.stop_groups()?;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl Daemon {
    /// Stopping (SIGTERM, SIGINT): the host hands over every group this server leads
    /// and makes every group claim unfit (`crate::host::Host::handle_stop`); called
    /// again from the loop while stopping, for a group won since.
    pub(super) fn stop_groups(&mut self) -> Result<(), Fatal> {
        self.drive(|h, now| h.handle_stop(now))
    }
}

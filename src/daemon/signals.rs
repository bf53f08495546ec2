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
                _ if self.stopping.is_none() => {
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
    /// Stopping (SIGTERM, SIGINT): every group this server leads hands over, and every
    /// group claims unfit (not persisted), so no round elects a server that is about to
    /// leave; a group won anyway (a round already under way) is handed over when this
    /// runs again, from the loop. The exit bound covers each handoff's lease end plus a
    /// heartbeat.
    pub(super) fn stop_groups(&mut self) -> Result<(), Fatal> {
        let now = boot_now();
        let several = self.cfg.has_groups();
        let (mut yielded, mut changed) = (false, false);
        for (i, g) in self.groups.iter().enumerate() {
            let node = &mut self.host.group_mut(i).node;
            if node.handle_yield(now) {
                info!("{}resigning leadership before exit", g.tag(several));
                yielded = true;
            }
            if node.healthy() {
                node.set_health(now, false);
                changed = true;
            }
        }
        if yielded || changed {
            self.flush_node()?;
        }
        // Set once, and moved later only by a handoff begun now: the bound must not
        // slide with the clock, or a RESIGN that never leaves would keep it open.
        if self.stopping.is_none() || yielded {
            let until = self
                .groups
                .iter()
                .filter_map(|g| g.handoff.map(|h| h.until))
                .fold(now, Time::max);
            let bound = until + self.host.group_mut(0).node.heartbeat();
            self.stopping = Some(self.stopping.map_or(bound, |b| b.max(bound)));
        }
        Ok(())
    }
}

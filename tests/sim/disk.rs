//! The state file: `Disk` (every group's `Durable`), the host's one write in flight
//! with its random latency, its confirmation to the host, and crashes that land in the
//! middle of a write.

use super::{Ev, Real, Sim};
use electd::host::StateWrite;
use electd::node::Durable;

/// The state file: every group's `Durable`, written as one (SPEC section 15). It reads
/// as group 0's state, as the one-group tests read it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Disk(pub Vec<Durable>);

impl Disk {
    /// Group `g`'s state (a group never written has the default).
    pub fn group(&self, g: usize) -> Durable {
        self.0.get(g).copied().unwrap_or_default()
    }
}

impl std::ops::Deref for Disk {
    type Target = Durable;
    fn deref(&self) -> &Durable {
        &self.0[0]
    }
}

impl Sim {
    /// A write of the state file completed: the host confirms it to the groups that
    /// asked (`Host::handle_write_done`).
    pub(super) fn persisted(&mut self, host: usize, _state: &Disk) {
        let h = &mut self.hosts[host];
        let local = h.clock.local(self.now);
        if let Some(sh) = h.shell.as_mut() {
            sh.handle_write_done(local, Ok(())).expect("host");
        }
        self.drive(host);
    }

    /// Starts the host's write of the whole state file (one in flight at a time).
    pub(super) fn write(&mut self, host: usize, w: StateWrite) {
        let d = self.rng.below(self.opts.persist_max + 1);
        let h = &mut self.hosts[host];
        let state = Disk(w.by_group);
        h.writing = Some(state.clone());
        let at = (self.now + d)
            .max(h.write_done_at + 1)
            .max(h.disk_stalled_until);
        if self.opts.trace {
            let what = if state.0.len() == 1 {
                format!("{:?}", state.0[0])
            } else {
                format!("{:?}", state.0)
            };
            self.trace
                .push(format!("{} {} write {what} until {at}", self.now, h.id));
        }
        h.write_done_at = at;
        let inc = h.life;
        self.disk_on_write(host, &state);
        let h = &mut self.hosts[host];
        let dies = std::mem::take(&mut h.crash_in_write);
        self.push(at, Ev::PersistDone { host, inc, state });
        if dies {
            // Dies before the write is confirmed: it lands or not (`crash`).
            let when = self.now + self.rng.below(at - self.now);
            let restart_after = Some(self.rng.below(self.opts.hold()));
            self.stats.crashes_in_write += 1;
            self.push(
                when,
                Ev::Crash {
                    host,
                    inc,
                    restart_after,
                },
            );
        }
    }

    /// `id`'s state disk stalls for `d` from now (fsfreeze on its file system): every
    /// write started before the stall ends lands at its end at the earliest. A write
    /// already in flight keeps its time.
    pub fn stall_disk(&mut self, id: u16, d: Real) {
        let i = self.idx(id);
        self.hosts[i].disk_stalled_until = self.now + d;
        if self.opts.trace {
            self.trace.push(format!(
                "{} {id} disk stalled until {}",
                self.now,
                self.now + d
            ));
        }
    }

    /// The process dies at a random moment of its next state write (which lands or not),
    /// and restarts within a hold.
    pub fn crash_in_write(&mut self, id: u16) {
        let i = self.idx(id);
        self.hosts[i].crash_in_write = true;
    }

    /// Cancels armed crashes (the faults stop).
    pub fn disarm(&mut self) {
        self.hosts.iter_mut().for_each(|h| h.crash_in_write = false);
    }

    /// A write reached the disk (if its process still lives): the host hears of it now,
    /// or when a pause ends.
    pub(super) fn on_persist_done(&mut self, host: usize, inc: u64, state: Disk) {
        let h = &mut self.hosts[host];
        if h.life != inc || !h.up() {
            return;
        }
        h.disk = state.clone();
        if h.writing.as_ref() == Some(&state) {
            h.writing = None;
        }
        if h.paused {
            h.backlog.push(Ev::PersistDone { host, inc, state });
            return;
        }
        self.persisted(host, &state);
    }
}

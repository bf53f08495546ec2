//! The control socket's side of supervisors and held answers: which connections
//! supervise (the host's registry keeps what they were told and confirmed; this side
//! reports their departures and delivers their lines), and answers held until a write
//! is durable.

use super::clients::{Client, Control};
use crate::host::ClientId;

/// An answer the daemon holds for a client until something it reports is durable
/// (see [`Control::hold`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldReply {
    slot: usize,
    serial: u64,
}

impl Control {
    /// Holds the answer to client `slot`'s current request: nothing more of it is
    /// served, and it is not closed, until [`Control::reply_held`]. None when there is
    /// no such client.
    pub fn hold(&mut self, slot: usize) -> Option<HeldReply> {
        let c = self.clients.get_mut(slot)?;
        c.held = true;
        Some(HeldReply {
            slot,
            serial: c.serial,
        })
    }

    /// True while the connection that asked is still there to take the held answer.
    pub fn still_held(&self, h: HeldReply) -> bool {
        self.clients
            .get(h.slot)
            .is_some_and(|c| c.serial == h.serial)
    }

    /// Sends a held answer, if the connection that asked is still there.
    pub fn reply_held(&mut self, h: HeldReply, line: &str) {
        let Some(c) = self.clients.get_mut(h.slot) else {
            return;
        };
        if c.serial != h.serial {
            return;
        }
        c.held = false;
        self.reply(h.slot, line);
    }

    /// The host's name for client `slot`'s connection, if there is one.
    pub fn client_id(&self, slot: usize) -> Option<ClientId> {
        let c = self.clients.get(slot)?;
        Some(ClientId {
            slot,
            serial: c.serial,
        })
    }

    /// The process id of client `slot` (SO_PEERCRED at connect), if known.
    pub fn peer_pid(&self, slot: usize) -> Option<u32> {
        self.clients.get(slot)?.peer_pid
    }

    /// Client `slot` supervises a lease (`supervise`): it is never evicted as idle, and
    /// its departure is reported (`take_departed`).
    pub fn mark_supervisor(&mut self, slot: usize) {
        if let Some(c) = self.clients.get_mut(slot) {
            c.supervising = true;
        }
    }

    /// Client `slot` no longer supervises (`leave`).
    pub fn unmark_supervisor(&mut self, slot: usize) {
        if let Some(c) = self.clients.get_mut(slot) {
            c.supervising = false;
        }
    }

    /// The supervisors whose connections were freed since the last call, each once. A
    /// connection is freed only once every request it sent was answered (a `released
    /// N` or a `leave` before its EOF counts) and its answers are out, or it was
    /// dropped; reporting it any earlier loses the requests still in the batch being
    /// answered (an independent review found both: a `supervise` registered after its
    /// own departure stayed for ever, a `released N` before EOF became an unconfirmed
    /// departure).
    pub fn take_departed(&mut self) -> Vec<ClientId> {
        std::mem::take(&mut self.departed)
    }

    /// True when a supervisor's connection was freed and the host has not heard yet.
    pub fn has_departed(&self) -> bool {
        !self.departed.is_empty()
    }

    /// Sends supervisor `client` a line, if its connection is still there.
    pub fn send_line(&mut self, client: ClientId, line: &str) {
        let Some(c) = self.clients.get(client.slot) else {
            return;
        };
        if c.serial != client.serial || c.closing.is_some() || c.eof {
            return;
        }
        self.reply(client.slot, line);
    }

    /// Client `slot`'s stop timers become `timers` (passed with an accepted
    /// `supervise`: they stay with the connection and are closed when it goes); the
    /// ones it held before are returned, to be put back if the `supervise` is refused.
    pub fn replace_timers(
        &mut self,
        slot: usize,
        timers: Option<crate::supervise::StopTimers>,
    ) -> Option<crate::supervise::StopTimers> {
        let c = self.clients.get_mut(slot)?;
        std::mem::replace(&mut c.timers, timers)
    }

    /// True if client `slot` passed stop timers that the daemon holds.
    pub fn has_timers(&self, slot: usize) -> bool {
        self.clients.get(slot).is_some_and(|c| c.timers.is_some())
    }

    /// Arms supervisor `client`'s stop timers for `at`, if its connection is still
    /// there (a departed one's timers were closed with it: its `run` and enforcer keep
    /// the last instants armed). Err only when timerfd_settime fails.
    pub fn arm_timers(
        &mut self,
        client: ClientId,
        at: crate::supervise::StopAt,
    ) -> std::io::Result<()> {
        let Some(c) = self.clients.get(client.slot) else {
            return Ok(());
        };
        match &c.timers {
            Some(t) if c.serial == client.serial => t.arm(at),
            _ => Ok(()),
        }
    }

    /// Client `slot` is freed: a supervisor's departure is reported to the host.
    pub(super) fn depart(&mut self, slot: usize, c: &mut Client) {
        if std::mem::take(&mut c.supervising) {
            self.departed.push(ClientId {
                slot,
                serial: c.serial,
            });
        }
    }
}

//! The supervisor registry (SPEC section 6 Resign, section 13): which clients supervise
//! which group's lease, what each was told and confirmed, the lease ends of those that
//! left unconfirmed, their graces and health reports; and answers held until a write
//! is durable.

use super::clients::{Client, Control, MAX_CLIENTS};
use std::time::Duration;

/// What the daemon tracks of one supervisor (`electctl run`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Supervisor {
    /// The number of the last line sent (lines count from 1 per connection).
    pub sent: u64,
    /// The number of the last line sent that reported this server as leader (0: none).
    pub last_leader: u64,
    /// The lease end (boot clock, ns) carried by that leader line.
    pub leader_until_ns: u64,
    /// The highest line number confirmed with `released N`.
    pub confirmed: u64,
    /// The election group (index in the configuration) whose lease it supervises.
    pub group: usize,
    /// Its `--grace`, if it said (older clients do not).
    pub grace: Option<Duration>,
}

impl Supervisor {
    /// True when no command of this supervisor can be running on a lease it was told of:
    /// it never heard of one, or it confirmed a line sent after the last leader line.
    pub fn clear(&self) -> bool {
        self.last_leader == 0 || self.confirmed > self.last_leader
    }
}

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

    /// Marks client `slot` as a supervisor of `group`'s lease (once; later `supervise`
    /// requests only ask for a fresh line). A connection supervises one group: asking
    /// for another is an error.
    pub fn supervise(
        &mut self,
        slot: usize,
        group: usize,
        grace: Option<Duration>,
    ) -> Result<(), String> {
        let Some(c) = self.clients.get_mut(slot) else {
            return Ok(());
        };
        let s = c.sup.get_or_insert(Supervisor {
            group,
            ..Supervisor::default()
        });
        if s.group != group {
            return Err("supervise: this connection supervises another group".into());
        }
        if grace.is_some() {
            s.grace = grace;
        }
        Ok(())
    }

    /// The supervisors of `group` that announced a grace: (slot, peer pid, grace).
    pub fn supervisor_graces(
        &self,
        group: usize,
    ) -> impl Iterator<Item = (usize, Option<u32>, Duration)> + '_ {
        self.clients.iter().filter_map(move |(slot, c)| {
            let s = c.sup.filter(|s| s.group == group)?;
            Some((slot, c.peer_pid, s.grace?))
        })
    }

    /// The group supervised by client `slot`, if it is a supervisor.
    pub fn supervised_group(&self, slot: usize) -> Option<usize> {
        Some(self.clients.get(slot)?.sup?.group)
    }

    /// Sends supervisor `slot` its next numbered line: `{"n":N,` then `fields` (JSON
    /// members without braces) then `}`. `leader_until_ns` is Some for a leader line.
    pub fn push_supervisor(&mut self, slot: usize, fields: &str, leader_until_ns: Option<u64>) {
        let Some(c) = self.clients.get_mut(slot) else {
            return;
        };
        if c.closing.is_some() || c.eof {
            return;
        }
        let Some(s) = c.sup.as_mut() else { return };
        s.sent += 1;
        if let Some(u) = leader_until_ns {
            s.last_leader = s.sent;
            s.leader_until_ns = u;
        }
        let line = format!("{{\"n\":{},{fields}}}\n", s.sent);
        self.reply(slot, &line);
    }

    /// Sends every supervisor of `group` its next numbered line (see `push_supervisor`).
    pub fn push_supervisors(&mut self, group: usize, fields: &str, leader_until_ns: Option<u64>) {
        for slot in 0..MAX_CLIENTS {
            if self.supervised_group(slot) == Some(group) {
                self.push_supervisor(slot, fields, leader_until_ns);
            }
        }
    }

    /// Records `released n` from client `slot`.
    pub fn confirm(&mut self, slot: usize, n: u64) -> Result<(), String> {
        let Some(s) = self.clients.get_mut(slot).and_then(|c| c.sup.as_mut()) else {
            return Err("released: not a supervisor (send 'supervise' first)".into());
        };
        if n > s.sent {
            return Err(format!("released {n}: only {} lines were sent", s.sent));
        }
        s.confirmed = s.confirmed.max(n);
        Ok(())
    }

    /// Client `slot` stops supervising: its command has exited and none will start, so
    /// its departure is no unconfirmed lease.
    pub fn leave(&mut self, slot: usize) {
        if let Some(c) = self.clients.get_mut(slot) {
            if let Some(why) = c.unhealthy.take().filter(|_| c.sup.is_some()) {
                log::info!(
                    "supervisor on control client {slot} left: its unhealthy report ({why}) goes with it"
                );
            }
            c.sup = None;
        }
    }

    /// Records a supervisor's health report (None: healthy). Only a supervisor may
    /// report; the report lasts until the next one or until it leaves.
    pub fn set_supervisor_health(
        &mut self,
        slot: usize,
        report: Option<String>,
    ) -> Result<(), String> {
        let Some(c) = self.clients.get_mut(slot).filter(|c| c.sup.is_some()) else {
            return Err("health: not a supervisor (send 'supervise' first)".into());
        };
        match (&c.unhealthy, &report) {
            (None, Some(why)) => {
                log::warn!(
                    "supervisor on control client {slot} reports its command unhealthy: {why}"
                )
            }
            (Some(_), None) => {
                log::info!("supervisor on control client {slot} reports its command healthy again")
            }
            _ => {}
        }
        c.unhealthy = report;
        Ok(())
    }

    /// The supervisors of `group` that report their command unhealthy: (slot, reason).
    pub fn unhealthy_supervisors(&self, group: usize) -> impl Iterator<Item = (usize, &str)> + '_ {
        self.clients.iter().filter_map(move |(slot, c)| {
            if c.sup?.group != group {
                return None;
            }
            Some((slot, c.unhealthy.as_deref()?))
        })
    }

    /// True when every supervisor of `group` is clear and none that left unconfirmed can
    /// still hold a lease of it at `now_ns` (boot clock): a handoff's RESIGN may leave.
    pub fn supervisors_clear(&self, group: usize, now_ns: u64) -> bool {
        now_ns >= self.departed_until_ns(group)
            && self
                .clients
                .iter()
                .map(|(_, c)| c)
                .filter_map(|c| c.sup)
                .filter(|s| s.group == group)
                .all(|s| s.clear())
    }

    /// The lease end of `group`'s supervisors that left unconfirmed (boot clock, ns; 0
    /// if none).
    pub fn departed_until_ns(&self, group: usize) -> u64 {
        self.departed_until_ns.get(group).copied().unwrap_or(0)
    }

    /// The number of registered supervisors of `group`.
    pub fn supervisors(&self, group: usize) -> usize {
        self.clients
            .iter()
            .map(|(_, c)| c)
            .filter(|c| c.sup.is_some_and(|s| s.group == group))
            .count()
    }

    /// Client `slot` is freed. A supervisor that was not clear leaves its lease end
    /// behind: its command may still run until then.
    pub(super) fn depart(&mut self, slot: usize, c: &mut Client) {
        if let Some(why) = c.unhealthy.take().filter(|_| c.sup.is_some()) {
            log::warn!(
                "supervisor on control client {slot} disconnected: its unhealthy report ({why}) goes with it"
            );
        }
        if let Some(s) = c.sup.filter(|s| !s.clear()) {
            self.counters.departed_unconfirmed += 1;
            if self.departed_until_ns.len() <= s.group {
                self.departed_until_ns.resize(s.group + 1, 0);
            }
            let d = &mut self.departed_until_ns[s.group];
            *d = (*d).max(s.leader_until_ns);
            log::warn!(
                "supervisor on control client {slot} left without confirming the end of the lease of line {}: a handoff waits for that lease end",
                s.last_leader
            );
        }
    }
}

//! The supervisor registry (SPEC section 6 Resign, sections 8 S5, 11 and 13): which
//! clients supervise which group's lease (`electctl run`), the numbered lines each was
//! sent and the last it confirmed, the lease ends of those that left unconfirmed, their
//! graces and health reports; and the release of a planned handoff's RESIGN once every
//! supervisor of its group is clear.
//!
//! The driver hands in the requests (`supervise`, `released N`, `health`, `leave`) and
//! the departures of connections; the host sends each supervisor a line whenever what
//! it says changes (`Notice::Supervisor`), and releases a waiting RESIGN inside the
//! flush that made its group clear.

use super::*;
use crate::node::Role;
use std::fmt;
use std::ops::Bound;

/// A supervisor's connection, as the driver names it: the slot (for log lines, "control
/// client N") and a serial that is never reused (a later client in the same slot is
/// another supervisor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId {
    /// The driver's slot of the connection.
    pub slot: usize,
    /// The connection's number, unique for the driver's life.
    pub serial: u64,
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "control client {}", self.slot)
    }
}

/// One numbered line to a supervisor (SPEC section 11): what its group's lease is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SupervisorLine {
    /// The line's number on its connection (from 1); `released N` confirms it.
    pub n: u64,
    /// This server's id.
    pub id: u16,
    /// The group's name.
    pub group: String,
    /// This server's role in the group.
    pub role: Role,
    /// The leader this server knows of.
    pub leader: Option<u16>,
    /// The term (the fencing token while leader).
    pub term: u64,
    /// The lease end while this server leads (boot clock).
    pub lease_until: Option<Time>,
    /// When the line was made (boot clock).
    pub now: Time,
    /// The lease length, the heartbeat and the round-trip bound (for `--grace` checks).
    pub lease_len: Duration,
    /// The heartbeat interval.
    pub heartbeat: Duration,
    /// The round-trip bound.
    pub rtt: Duration,
    /// A planned handoff waits for the supervisors.
    pub resigning: bool,
    /// The daemon holds this supervisor's stop timers and arms them at every renewal
    /// (`"timers":true`, absent otherwise): renewals alone reach it only that way.
    pub timers: bool,
}

impl SupervisorLine {
    /// The line as sent on the control socket (one JSON object and a newline); times
    /// in ns on CLOCK_BOOTTIME so `run` can check its options exactly.
    pub fn to_json(&self) -> String {
        use crate::time::duration_nanos;
        format!(
            "{{\"n\":{},\"id\":{},\"group\":{},\"role\":\"{}\",\"leader\":{},\"term\":{},\"lease_until_ns\":{},\"now_ns\":{},\"lease_len_ns\":{},\"heartbeat_ns\":{},\"rtt_ns\":{},\"resigning\":{}{}}}\n",
            self.n,
            self.id,
            crate::json::string(&self.group),
            self.role.name(),
            self.leader.map_or("null".into(), |l| l.to_string()),
            self.term,
            self.lease_until
                .map_or("null".into(), |u| u.as_nanos().to_string()),
            self.now.as_nanos(),
            duration_nanos(self.lease_len),
            duration_nanos(self.heartbeat),
            duration_nanos(self.rtt),
            self.resigning,
            if self.timers { ",\"timers\":true" } else { "" }
        )
    }

    /// What the line says, without its number and time: a new line goes out when this
    /// changes.
    fn key(&self) -> LineKey {
        (
            self.role,
            self.leader,
            self.term,
            self.lease_until,
            self.lease_len,
            self.heartbeat,
            self.resigning,
            self.rtt,
        )
    }
}

/// What a line says (its number and time aside): role, leader, term, lease end, lease
/// length, heartbeat, resigning, round-trip bound. Everything `run` acts on or checks
/// its grace against is here, so a reload that changes only the round-trip bound is
/// pushed too: `run` never asks (issue 25), so nothing else would tell it.
type LineKey = (
    Role,
    Option<u16>,
    u64,
    Option<Time>,
    Duration,
    Duration,
    bool,
    Duration,
);

/// Why a planned handoff's RESIGN left (logged with the time it waited).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// No supervisor of the group had been told of the lease: it left at once.
    NoSupervisor,
    /// Every supervisor confirmed its command exited.
    Confirmed,
    /// Every supervisor confirmed, and the lease end known to one that left
    /// unconfirmed passed.
    ConfirmedAndDepartedEnded,
    /// The lease ended before every supervisor confirmed.
    LeaseEnd,
    /// Sent without waiting (the core let it go: nothing to wait for).
    Unwaited,
}

impl Release {
    /// The words of the log line.
    pub fn describe(self) -> &'static str {
        match self {
            Release::NoSupervisor => "no supervisor held the lease",
            Release::Confirmed => "every supervisor confirmed",
            Release::ConfirmedAndDepartedEnded => {
                "every supervisor confirmed, and the lease known to a departed one ended"
            }
            Release::LeaseEnd => "lease end: not every supervisor confirmed",
            Release::Unwaited => "sent without waiting",
        }
    }

    /// True when the RESIGN waited for a supervisor.
    pub fn waited(self) -> bool {
        !matches!(self, Release::NoSupervisor | Release::Unwaited)
    }
}

/// What the host tracks of one supervisor.
#[derive(Clone, Debug, Default)]
struct Supervisor {
    /// The election group (index in the configuration) whose lease it supervises.
    group: usize,
    /// The number of the last line sent (lines count from 1 per connection).
    sent: u64,
    /// The number of the last line sent that reported this server as leader (0: none).
    last_leader: u64,
    /// The lease end carried by that leader line.
    leader_until: Time,
    /// The highest line number confirmed with `released N`.
    confirmed: u64,
    /// Its `--grace`, if it said (older clients do not).
    grace: Option<Duration>,
    /// Its process id, if the driver knows it (for log lines).
    pid: Option<u32>,
    /// Its report that its command is unhealthy (`health failing`).
    unhealthy: Option<String>,
    /// What the last line sent to it said (with stop timers: or the last renewal
    /// armed).
    last_key: Option<LineKey>,
    /// The driver holds its stop timers (passed with `supervise`): every renewal arms
    /// them, and a renewal alone goes out as a line only when the timers may have fired.
    timers: bool,
}

/// What a supervisor gets for its group's line of now ([`Supervisor::due`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Push {
    /// Nothing: it was told this, or a renewal it does not need yet.
    Nothing,
    /// A renewal alone, for its stop timers only.
    Arm,
    /// The line (its stop timers armed first, if it has them and the line a lease).
    Line,
}

impl Supervisor {
    /// What this supervisor should be sent for a line saying `key` now.
    ///
    /// Every change is sent at once as a line but one: a renewal alone (the same role,
    /// leader, term, timers (round-trip bound included) and resigning, a later lease
    /// end).
    ///
    /// A supervisor with stop timers gets every renewal on them ([`Push::Arm`]: two
    /// timerfd_settime calls, no wakeup of `run` or its enforcer; issue 25); a line as
    /// well only when the SIGTERM instant of the lease end last armed has come, since
    /// `run` may then have stopped its command and waits for a lease with room.
    ///
    /// Without timers the renewal is sent only when the lease end the supervisor was
    /// last told comes within `grace + slack` of `now`, `slack` covering the time to
    /// the next check and one more heartbeat (see `push_lines`), a late check (rtt) and
    /// `run`'s `MARGIN`. `run` sends SIGTERM when `grace + MARGIN` of the lease it knows
    /// is left, so it has the newer lease end before that even when the
    /// acknowledgements of a round are lost, and the lease end it and its enforcer act
    /// on is an earlier one than the daemon's, never a later one (S5: the safe side).
    /// Without a grace (an older `run`) every renewal is sent. With `missed-heartbeats
    /// 3` the lease (2.94 heartbeats) always comes that close within a heartbeat, so
    /// every renewal is still sent; with 5 and a short grace, one renewal in two.
    fn due(&self, key: &LineKey, now: Time, slack: Duration) -> Push {
        let Some(last) = &self.last_key else {
            return Push::Line;
        };
        if last == key {
            return Push::Nothing;
        }
        let renewal = |k: &LineKey| (k.0, k.1, k.2, k.4, k.5, k.6, k.7);
        if self.timers {
            return match (last.3, key.3) {
                (Some(told), Some(new)) if renewal(last) == renewal(key) && new >= told => {
                    let grace = self.grace.unwrap_or_default();
                    let term = crate::supervise::stop_at(told.as_nanos(), grace).term_ns;
                    if term <= now.as_nanos() {
                        Push::Line
                    } else {
                        Push::Arm
                    }
                }
                _ => Push::Line,
            };
        }
        match (self.grace, last.3, key.3) {
            (Some(grace), Some(told), Some(new))
                if renewal(last) == renewal(key) && new >= told =>
            {
                if told <= now + grace + slack {
                    Push::Line
                } else {
                    Push::Nothing
                }
            }
            _ => Push::Line,
        }
    }

    /// True when no command of this supervisor can be running on a lease it was told
    /// of: it never heard of one, or it confirmed a line sent after the last leader line.
    /// `older_ok` (a negative control): any confirmation will do.
    fn clear(&self, older_ok: bool) -> bool {
        self.last_leader == 0
            || self.confirmed > self.last_leader
            || (older_ok && self.confirmed > 0)
    }
}

/// Every supervisor of this server, by connection.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    sups: BTreeMap<ClientId, Supervisor>,
    /// Per group, the latest lease end known to a supervisor that left without
    /// confirming: its command may run until then.
    departed_until: Vec<Time>,
    /// Supervisors that left with a lease they had not confirmed the end of.
    pub departed_unconfirmed: u64,
}

impl Registry {
    /// True when every supervisor of `group` is clear and none that left unconfirmed
    /// can still hold a lease of it at `now`: a handoff's RESIGN may leave.
    pub fn clear(&self, group: usize, now: Time) -> bool {
        self.clear_if(group, now, false)
    }

    fn clear_if(&self, group: usize, now: Time, older_ok: bool) -> bool {
        now >= self.departed_until(group)
            && self
                .sups
                .values()
                .filter(|s| s.group == group)
                .all(|s| s.clear(older_ok))
    }

    /// The lease end of `group`'s supervisors that left unconfirmed (zero if none).
    pub fn departed_until(&self, group: usize) -> Time {
        self.departed_until.get(group).copied().unwrap_or(Time(0))
    }

    /// The number of registered supervisors of `group`.
    pub fn supervisors(&self, group: usize) -> usize {
        self.sups.values().filter(|s| s.group == group).count()
    }

    /// The supervisors of `group` that announced a grace: (client, pid, grace).
    pub fn graces(
        &self,
        group: usize,
    ) -> impl Iterator<Item = (ClientId, Option<u32>, Duration)> + '_ {
        self.sups
            .iter()
            .filter(move |(_, s)| s.group == group)
            .filter_map(|(&c, s)| Some((c, s.pid, s.grace?)))
    }

    /// The supervisors of `group` that report their command unhealthy: (client, why).
    pub fn unhealthy(&self, group: usize) -> impl Iterator<Item = (ClientId, &str)> + '_ {
        self.sups
            .iter()
            .filter(move |(_, s)| s.group == group)
            .filter_map(|(&c, s)| Some((c, s.unhealthy.as_deref()?)))
    }

    /// True if `client` is a supervisor.
    pub fn is_supervisor(&self, client: ClientId) -> bool {
        self.sups.contains_key(&client)
    }

    /// Client `client` is gone. A supervisor that was not clear leaves its lease end
    /// behind: its command may still run until then.
    fn depart(&mut self, client: ClientId) {
        let Some(s) = self.sups.remove(&client) else {
            return;
        };
        if let Some(why) = &s.unhealthy {
            log::warn!(
                "supervisor on {client} disconnected: its unhealthy report ({why}) goes with it"
            );
        }
        if !s.clear(false) {
            self.departed_unconfirmed += 1;
            if self.departed_until.len() <= s.group {
                self.departed_until.resize(s.group + 1, Time(0));
            }
            let d = &mut self.departed_until[s.group];
            *d = (*d).max(s.leader_until);
            log::warn!(
                "supervisor on {client} left without confirming the end of the lease of line {}: a handoff waits for that lease end",
                s.last_leader
            );
        }
    }
}

impl Host {
    /// The supervisor registry, to read (views, reload's grace check).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The registry, to change (tests of the views only).
    #[doc(hidden)]
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// `supervise [GROUP]` from `client` (pid `pid` if known): it supervises group `g`'s
    /// lease with `grace` (if it said); `timers`: the driver holds its stop timers
    /// (passed with this request or an earlier one; armed for a grace of 0 while none
    /// was said: the daemon takes timers only with a grace). It is
    /// sent a line at once; a connection supervises one group, asking for another is
    /// an error. Flush after.
    pub fn handle_supervise(
        &mut self,
        now: Time,
        client: ClientId,
        g: usize,
        grace: Option<Duration>,
        pid: Option<u32>,
        timers: bool,
    ) -> Result<(), String> {
        self.supervise_refusal(client, g)?;
        let s = self.registry.sups.entry(client).or_insert(Supervisor {
            group: g,
            pid,
            ..Supervisor::default()
        });
        if grace.is_some() {
            s.grace = grace;
        }
        s.timers |= timers;
        let line = self.line_of(now, g);
        self.send_line(client, line);
        Ok(())
    }

    /// Why `supervise` of group `g` from `client` would be refused, if it would: a
    /// connection supervises one group. Checked before the daemon takes the stop timers
    /// passed with it, so a refusal changes nothing.
    pub fn supervise_refusal(&self, client: ClientId, g: usize) -> Result<(), String> {
        match self.registry.sups.get(&client) {
            Some(s) if s.group != g => {
                Err("supervise: this connection supervises another group".into())
            }
            _ => Ok(()),
        }
    }

    /// `released N` from `client`: the command it ran on the leases of lines up to N
    /// has exited. A RESIGN this made clear leaves in the flush that follows.
    pub fn handle_released(&mut self, client: ClientId, n: u64) -> Result<(), String> {
        let Some(s) = self.registry.sups.get_mut(&client) else {
            return Err("released: not a supervisor (send 'supervise' first)".into());
        };
        if n > s.sent {
            return Err(format!("released {n}: only {} lines were sent", s.sent));
        }
        s.confirmed = s.confirmed.max(n);
        Ok(())
    }

    /// `health failing REASON` (Some) or `health ok` (None) from supervisor `client`:
    /// the report lasts until the next one or until it leaves.
    pub fn handle_supervisor_health(
        &mut self,
        client: ClientId,
        report: Option<String>,
    ) -> Result<(), String> {
        let Some(s) = self.registry.sups.get_mut(&client) else {
            return Err("health: not a supervisor (send 'supervise' first)".into());
        };
        match (&s.unhealthy, &report) {
            (None, Some(why)) => {
                log::warn!("supervisor on {client} reports its command unhealthy: {why}")
            }
            (Some(_), None) => {
                log::info!("supervisor on {client} reports its command healthy again")
            }
            _ => {}
        }
        s.unhealthy = report;
        Ok(())
    }

    /// `leave` from `client`: its command has exited and none will start, so its
    /// departure is no unconfirmed lease.
    pub fn handle_leave(&mut self, client: ClientId) {
        if let Some(s) = self.registry.sups.remove(&client) {
            if let Some(why) = s.unhealthy {
                log::info!(
                    "supervisor on {client} left: its unhealthy report ({why}) goes with it"
                );
            }
        }
    }

    /// Connection `client` is gone (closed, dropped or evicted).
    pub fn handle_client_gone(&mut self, client: ClientId) {
        if self.sabotage.departure_confirms {
            self.registry.sups.remove(&client);
            return;
        }
        self.registry.depart(client);
    }

    /// The earliest instant a waiting RESIGN may leave without another input: the lease
    /// end left behind by a supervisor that departed unconfirmed.
    pub(super) fn release_deadline(&self, now: Time) -> Option<Time> {
        (0..self.groups.len())
            .filter(|&g| self.groups[g].node.resign_pending())
            .map(|g| self.registry.departed_until(g))
            .filter(|&t| t > now)
            .min()
    }

    /// Releases the RESIGN of every group whose handoff waits and whose supervisors are
    /// all clear now. Returns true if any was released (its RESIGN is queued).
    pub(super) fn release_clear(&mut self, now: Time) -> bool {
        let mut any = false;
        for g in 0..self.groups.len() {
            if !self.groups[g].node.resign_pending() || !self.registry_clear(g, now) {
                continue;
            }
            let why = if self.registry.departed_until(g) > self.handoff_began(g) {
                Release::ConfirmedAndDepartedEnded
            } else {
                Release::Confirmed
            };
            self.groups[g].node.handle_released(now);
            self.notices.push_back(Notice::Released { group: g, why });
            any = true;
        }
        any
    }

    /// Group `g`'s supervisors are clear (or a negative control says so).
    pub(super) fn registry_clear(&self, g: usize, now: Time) -> bool {
        self.registry
            .clear_if(g, now, self.sabotage.release_on_older_confirmation)
    }

    /// Sends each supervisor a line if what its group's line says changed since the
    /// last line it was sent, except a renewal alone that it does not need yet (see
    /// [`Supervisor::due`]).
    pub(super) fn push_lines(&mut self, now: Time) {
        if self.registry.sups.is_empty() {
            return;
        }
        for g in 0..self.groups.len() {
            // What the line would say, without building it (its group name is a
            // String): most flushes change nothing a supervisor must hear of. Made
            // when the group's first supervisor is found.
            let mut said = None;
            // Each supervisor's push depends on its own state only, which only its
            // own push changes: one at a time, in client order, without a vector.
            let mut after = None;
            loop {
                let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
                let found = self
                    .registry
                    .sups
                    .range((lower, Bound::Unbounded))
                    .find(|(_, s)| s.group == g)
                    .map(|(&c, s)| {
                        let (key, slack) = *said.get_or_insert_with(|| {
                            // Between two checks (flushes) a leader goes at most a
                            // heartbeat: it sends a LEAD every heartbeat, and every
                            // flush checks; a second heartbeat lets the renewal go out
                            // with the acknowledgements that made it (fresh) rather
                            // than with the next LEAD (a heartbeat old). The round-trip
                            // bound covers a late flush, `run`'s MARGIN its own
                            // scheduling.
                            let node = &self.groups[g].node;
                            let slack =
                                node.heartbeat() * 2 + node.rtt() + crate::supervise::MARGIN;
                            (self.key_of(now, g), slack)
                        });
                        (c, s.due(&key, now, slack), key)
                    });
                let Some((c, push, key)) = found else {
                    break;
                };
                after = Some(c);
                match push {
                    Push::Nothing => {}
                    Push::Arm => self.arm_timers(c, &key),
                    Push::Line => self.send_line(c, self.line_of(now, g)),
                }
            }
        }
    }

    /// What group `g`'s line now says ([`SupervisorLine::key`] of [`Host::line_of`]).
    fn key_of(&self, now: Time, g: usize) -> LineKey {
        let node = &self.groups[g].node;
        let st = node.status(now);
        (
            st.role,
            st.leader,
            st.term,
            st.lease_until,
            node.lease_len(),
            node.heartbeat(),
            node.resign_pending(),
            node.rtt(),
        )
    }

    /// Group `g`'s line now (numbered when sent).
    fn line_of(&self, now: Time, g: usize) -> SupervisorLine {
        let node = &self.groups[g].node;
        let st = node.status(now);
        SupervisorLine {
            n: 0,
            id: self.cfg.id,
            group: self.groups[g].name.clone(),
            role: st.role,
            leader: st.leader,
            term: st.term,
            lease_until: st.lease_until,
            now,
            lease_len: node.lease_len(),
            heartbeat: node.heartbeat(),
            rtt: node.rtt(),
            resigning: node.resign_pending(),
            timers: false,
        }
    }

    /// Arms supervisor `client`'s stop timers for `line`'s lease end, if it has timers
    /// and the line a lease: its command may run until then (a departure without
    /// confirmation leaves that lease end behind).
    fn arm_timers(&mut self, client: ClientId, key: &LineKey) {
        let Some(s) = self.registry.sups.get_mut(&client) else {
            return;
        };
        let (Some(u), true) = (key.3, s.timers) else {
            return;
        };
        if key.0 != Role::Leader {
            return;
        }
        s.last_key = Some(*key);
        s.leader_until = s.leader_until.max(u);
        let end = if self.sabotage.timers_late {
            u + Duration::from_millis(500)
        } else {
            u
        };
        let at = crate::supervise::stop_at(end.as_nanos(), s.grace.unwrap_or_default());
        self.notices.push_back(Notice::ArmTimers {
            client,
            until: u,
            at,
        });
    }

    /// Numbers `line` for `client` and queues it, its stop timers armed first.
    fn send_line(&mut self, client: ClientId, mut line: SupervisorLine) {
        self.arm_timers(client, &line.key());
        let Some(s) = self.registry.sups.get_mut(&client) else {
            return;
        };
        s.sent += 1;
        s.last_key = Some(line.key());
        line.n = s.sent;
        line.timers = s.timers;
        if line.role == Role::Leader {
            if let Some(u) = line.lease_until {
                s.last_leader = s.sent;
                s.leader_until = s.leader_until.max(u);
            }
        }
        self.notices.push_back(Notice::Supervisor { client, line });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(rtt_ms: u64, until: u64) -> LineKey {
        (
            Role::Leader,
            Some(1),
            7,
            Some(Time(until)),
            Duration::from_millis(294),
            Duration::from_millis(100),
            false,
            Duration::from_millis(rtt_ms),
        )
    }

    /// A reload that changes only the round-trip bound reaches `run` as a line, with or
    /// without stop timers: `run` checks its grace against it and never asks the daemon
    /// again (issue 25), so this push is the only way it learns of it.
    #[test]
    fn a_new_round_trip_bound_alone_is_pushed() {
        for timers in [false, true] {
            let s = Supervisor {
                grace: Some(Duration::from_millis(100)),
                timers,
                last_key: Some(key(20, 1_000_000_000)),
                ..Supervisor::default()
            };
            let now = Time(0);
            let slack = Duration::from_millis(240);
            assert_eq!(s.due(&key(20, 1_000_000_000), now, slack), Push::Nothing);
            assert_eq!(
                s.due(&key(30, 1_000_000_000), now, slack),
                Push::Line,
                "timers {timers}: an rtt-only change is pushed"
            );
            // A renewal far from its end is not a line (the test is not blind).
            let renewal = if timers { Push::Arm } else { Push::Nothing };
            assert_eq!(s.due(&key(20, 1_100_000_000), now, slack), renewal);
            assert_eq!(
                s.due(&key(30, 1_100_000_000), now, slack),
                Push::Line,
                "timers {timers}: a renewal with a new rtt is a line"
            );
        }
    }
}

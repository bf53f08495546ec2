//! The daemon's counters, and the snapshot of them (and of the host's, the cores' and
//! the sockets') that `crate::metrics` renders as the Prometheus text of `metrics` and
//! `GET /metrics`. A new metric is an entry in `crate::metrics::table`; here it only
//! gains the line that fills its field.

use super::*;
use crate::metrics::{Cause, GroupSnapshot, HttpSnapshot, Snapshot};

/// Cluster-wide counters of what left, for `metrics` (each group's are in
/// `GroupMetrics`; what came in, drops and writes are the host's, `HostMetrics`).
#[derive(Debug, Default)]
pub(super) struct Metrics {
    /// Messages (bundle entries) sent by kind, per copy; a datagram carries one or more.
    pub(super) sent: [u64; 5],
    /// Datagrams: one per destination per flush, carrying every group's messages.
    pub(super) datagrams_sent: u64,
    pub(super) sent_bytes: u64,
    pub(super) send_errors: u64,
    /// True while no datagram from any other server has arrived for the hold, after
    /// the start or since the last one (said once when it begins and once when it ends).
    pub(super) hears_nobody: bool,
}

/// One group's changes of leader, counted once per change: a handover (leader, then
/// none, then the successor) is one change, a re-election of the same leader none.
/// The core's `leader_changes` counts each step (two per handover) and is left as is.
#[derive(Debug, Default)]
pub(super) struct LeaderChanges {
    counts: [u64; 3],
    /// The last leader known here, kept while no leader is known.
    last: Option<u16>,
    /// Why `last` stopped leading here, once it has.
    ended: Option<Cause>,
    /// The handovers this server had begun when it last became leader.
    handovers_at_lead: u64,
}

impl LeaderChanges {
    /// True when `leader` is the leader already noted (nothing to count).
    pub(super) fn is_current(&self, leader: Option<u16>) -> bool {
        match leader {
            Some(l) => self.ended.is_none() && self.last == Some(l),
            None => self.last.is_none() || self.ended.is_some(),
        }
    }

    /// Notes that the group's known leader is now `leader`. `me` is this server,
    /// `handovers` the handovers it has begun so far, `heard_ago(id)` how long ago a
    /// peer was last heard, `heartbeat` the leader's LEAD interval.
    pub(super) fn observe(
        &mut self,
        leader: Option<u16>,
        me: u16,
        handovers: u64,
        heard_ago: impl Fn(u16) -> Option<Duration>,
        heartbeat: Duration,
    ) {
        if let Some(old) = self
            .last
            .filter(|&l| Some(l) != leader && self.ended.is_none())
        {
            // A live leader is heard every heartbeat; a RESIGN was heard just now; a
            // crashed one's followers give up only after its hold (K >= 2 heartbeats).
            let resigned = if old == me {
                handovers > self.handovers_at_lead
            } else {
                heard_ago(old).is_some_and(|ago| ago < heartbeat)
            };
            self.ended = Some(if resigned {
                Cause::Handover
            } else {
                Cause::Failover
            });
        }
        let Some(new) = leader else {
            return;
        };
        if self.last == Some(new) && self.ended.is_none() {
            return;
        }
        match self.last {
            None => self.counts[Cause::Start as usize] += 1,
            Some(old) if old != new => {
                self.counts[self.ended.unwrap_or(Cause::Failover) as usize] += 1;
            }
            Some(_) => {}
        }
        if new == me {
            self.handovers_at_lead = handovers;
        }
        self.last = Some(new);
        self.ended = None;
    }
}

impl Daemon {
    /// Counts a change of group `g`'s leader (once per change, with its cause): called
    /// with each new view.
    pub(super) fn note_leader(&mut self, g: usize, leader: Option<u16>) {
        if self.groups[g].metrics.leader_changes.is_current(leader) {
            return;
        }
        let me = self.cfg.id;
        let heartbeat = self.cfg.heartbeat;
        let now = boot_now();
        let node = &self.host.group(g).node;
        let handovers = node.counters().handovers.iter().sum();
        let group = &mut self.groups[g];
        let heard_ago = |id: u16| {
            node.peers()
                .find(|&(p, _)| p == id)
                .and_then(|(_, t)| t)
                .map(|t| now.saturating_since(t))
        };
        group
            .metrics
            .leader_changes
            .observe(leader, me, handovers, heard_ago, heartbeat);
    }

    /// Says once, as a warning, that this server hears nobody: no datagram from any
    /// other server for missed-heartbeats x heartbeat after the start or since the last
    /// one (wrong addresses, a firewall, another cluster name or key); and once, when
    /// one arrives, whom it hears again (issue 23). True when that changed (STATUS=).
    pub(super) fn check_hearing(&mut self, now: Time) -> bool {
        let others = self.cfg.servers.len().saturating_sub(1);
        if others == 0 {
            return false;
        }
        let hold = self.cfg.heartbeat * self.cfg.missed_heartbeats;
        // Every flush asks this: the latest time any group heard any peer, read in
        // place (the per-peer list is built only for the log line of a change).
        let last = self
            .host
            .groups()
            .iter()
            .flat_map(|g| g.node.peers().filter_map(|(_, t)| t))
            .max();
        let deaf = match last {
            Some(t) => now.saturating_since(t) >= hold,
            None => self.started.elapsed() >= hold,
        };
        if deaf == self.metrics.hears_nobody {
            return false;
        }
        self.metrics.hears_nobody = deaf;
        if deaf {
            let since = match last {
                Some(t) => format!("for {:.1}s", now.saturating_since(t).as_secs_f64()),
                None => "since it started".into(),
            };
            warn!(
                "this server hears no other server: no datagram from any of the {others} other servers {since} (missed-heartbeats x heartbeat is {hold:?}): check the server addresses, firewalls, and that every server has the same cluster name, server list and key"
            );
        } else {
            let ids: Vec<String> = self
                .peers_heard()
                .iter()
                .filter(|&&(_, t)| t.is_some_and(|t| now.saturating_since(t) < hold))
                .map(|(id, _)| format!("{id} ({})", self.cfg.name_of(*id)))
                .collect();
            let which = if ids.len() == 1 { "server" } else { "servers" };
            info!("this server hears {which} {} again", ids.join(", "));
        }
        true
    }

    /// The Prometheus text of `metrics` and `GET /metrics`.
    pub(super) fn metrics_text(&self) -> String {
        crate::metrics::render(&self.metrics_snapshot())
    }

    /// What `metrics` reports, read now.
    fn metrics_snapshot(&self) -> Snapshot {
        let now = boot_now();
        let m = &self.metrics;
        // What the host counts: what came in, what was dropped, writes confirmed.
        let hm = self.host.metrics();
        let control = &self.control.counters;
        let hold = self.cfg.heartbeat * self.cfg.missed_heartbeats;
        let heard = self.peers_heard();
        // Wall clock, as Prometheus's time() is: a lease ends now plus the lease left.
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Snapshot {
            groups: (0..self.groups.len())
                .map(|g| self.group_snapshot(g, now, wall))
                .collect(),
            id: self.cfg.id,
            name: self.cfg.name_of(self.cfg.id),
            cluster: self.cfg.cluster.clone(),
            peers_heard: heard
                .iter()
                .filter(|&&(_, t)| t.is_some_and(|t| now.saturating_since(t) < hold))
                .count(),
            control_clients: self.control.clients(),
            control_watchers: self.control.watchers(),
            uptime: self.started.elapsed(),
            config_refused: self.config_refused.is_some(),
            supervisors_departed_unconfirmed: self.host.registry().departed_unconfirmed,
            state_writes: hm.state_writes,
            send_errors: m.send_errors,
            control_requests: control.requests,
            control_dropped: control.dropped + control.refused,
            control_passed_refused: control.passed_refused,
            log_lines_dropped: crate::logsink::dropped_total(),
            state_write_age: self.write_age(),
            datagrams_sent: m.datagrams_sent,
            datagrams_received: hm.datagrams_received,
            messages_received: hm.received,
            messages_sent: m.sent,
            dropped: hm.dropped.iter().map(|(&r, &n)| (r, n)).collect(),
            sent_bytes: m.sent_bytes,
            received_bytes: hm.received_bytes,
            framing_encoded: hm.encoded,
            framing_accepted: hm.accepted_framing,
            wire_probes: hm.probes,
            peer_last_heard: heard
                .iter()
                .filter_map(|&(id, t)| Some((id, now.saturating_since(t?))))
                .collect(),
            http: self.http.as_ref().map(|h| HttpSnapshot {
                answers: h.counters.answers,
                clients: h.clients(),
                accepted: h.counters.accepted,
                idle_closed: h.counters.idle_closed,
                timed_out: h.counters.timed_out,
                evicted: h.counters.evicted,
                unread: h.counters.unread,
            }),
        }
    }

    /// What `metrics` reports of group `g`, read at `now` (`wall`: the same moment as
    /// Unix time).
    fn group_snapshot(&self, g: usize, now: Time, wall: Duration) -> GroupSnapshot {
        let group = &self.groups[g];
        let node = &self.host.group(g).node;
        let status = node.status(now);
        let counters = node.counters();
        let leading = status.role == Role::Leader;
        GroupSnapshot {
            name: group.name.clone(),
            is_leader: leading,
            term: status.term,
            leader_id: status.leader.unwrap_or(0),
            voted_term: status.voted_term,
            supervisors: self.host.registry().supervisors(g),
            healthy: node.healthy(),
            drained: node.drained(),
            timers_waiting: node.timers_waiting(),
            lease_expiry: status
                .lease_until
                .filter(|_| leading)
                .map(|until| wall + until.saturating_since(now)),
            last_handoff_wait_ms: group.metrics.last_handoff_wait_ms,
            role_changes: group.metrics.role_changes,
            elections: counters.rounds,
            votes: counters.votes,
            elected: counters.elected,
            dual_leader: counters.dual_leader,
            acks_not_asked: counters.acks_not_asked,
            handoffs: group.metrics.handoffs,
            handoffs_waited: group.metrics.handoffs_waited,
            health_changes: self.host.health_changes(g),
            check_runs: group.checks.counters.runs,
            check_failures: group.checks.counters.failures,
            successor_votes: counters.successor_votes,
            hook_runs: group.hooks.runs,
            hook_failures: group.hooks.failures,
            leader_changes: group.metrics.leader_changes.counts,
            handovers: counters.handovers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::path::Path;

    /// A daemon of three groups whose server name and cluster need escaping, every
    /// counter the daemon owns set to a distinct value, and junk datagrams fed to the
    /// host (drops by reason, bytes received).
    fn populated() -> (Daemon, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "electd-metrics-golden-{}-{}",
            std::process::id(),
            boot_now().0
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let ports: Vec<u16> = (0..3)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect::<Vec<_>>()
            .iter()
            .map(|s| s.local_addr().unwrap().port())
            .collect();
        let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let http_port = http.local_addr().unwrap().port();
        drop(http);
        let text = format!(
            "cluster c\"l\\u\nserver 1 127.0.0.1:{} name o\"n\\e\nserver 2 127.0.0.1:{} name two\nserver 3 127.0.0.1:{}\nid 1\nunicast\nsocket {}/c.sock\nstate {}/s.state\nmetrics-listen 127.0.0.1:{}\ngroup orders\ngroup pay_ments\ngroup audit-2\n",
            ports[0],
            ports[1],
            ports[2],
            dir.display(),
            dir.display(),
            http_port
        );
        let cfg = Config::parse(&text, Path::new("electd.conf"), None).unwrap();
        let mut d = Daemon::start(cfg, None, None, None).unwrap();
        d.metrics.sent = [1, 2, 3, 4, 5];
        d.metrics.datagrams_sent = 6;
        d.metrics.sent_bytes = 7;
        d.metrics.send_errors = 8;
        for (i, g) in d.groups.iter_mut().enumerate() {
            let b = 100 * (i as u64 + 1);
            g.metrics.role_changes = b + 1;
            g.metrics.handoffs = b + 2;
            g.metrics.handoffs_waited = b + 3;
            g.metrics.last_handoff_wait_ms = b + 1234;
            g.metrics.leader_changes.counts = [b + 6, b + 7, b + 8];
            g.checks.counters.runs = b + 9;
            g.checks.counters.failures = [b + 10, b + 11, b + 12, b + 13];
            g.hooks.runs = b + 14;
            g.hooks.failures = b + 15;
        }
        d.control.counters.requests = 21;
        d.control.counters.refused = 22;
        d.control.counters.dropped = 23;
        d.control.counters.passed_refused = 25;
        d.host.registry_mut().departed_unconfirmed = 24;
        d.config_refused = Some("no".into());
        let now = boot_now();
        let peer: std::net::SocketAddr = format!("127.0.0.1:{}", ports[1]).parse().unwrap();
        let stranger: std::net::SocketAddr = "127.0.0.9:9".parse().unwrap();
        for (src, bytes) in [
            (peer, &b""[..]),
            (peer, &b"junk"[..]),
            (peer, &[0u8; 40][..]),
            (stranger, &[1u8; 64][..]),
        ] {
            d.host.handle_datagram(now, src, bytes).unwrap();
        }
        // Long past every deadline: each group's core starts a round (counters, terms).
        d.host
            .handle_timeout(now + Duration::from_secs(30))
            .unwrap();
        (d, dir)
    }

    /// The lines whose values follow the clock, with the value replaced by `T`.
    fn timeless(text: &str) -> String {
        text.lines()
            .map(|l| {
                let clocked = ["electd_uptime_seconds ", "electd_log_lines_dropped_total "];
                match clocked.iter().find(|p| l.starts_with(*p)) {
                    Some(p) => format!("{p}T\n"),
                    None => format!("{l}\n"),
                }
            })
            .collect()
    }

    /// The exposition text of a populated daemon, byte for byte (recorded from the
    /// hand-written renderer before metrics became a table of families).
    #[test]
    fn metrics_text_is_unchanged() {
        let (d, dir) = populated();
        let text = timeless(&d.metrics_text());
        drop(d);
        let _ = std::fs::remove_dir_all(dir);
        assert_eq!(text, GOLDEN, "\n{text}");
    }

    /// Recorded from the hand-written renderer (b4e64f1), before the table; since then
    /// only families added (issue 25: `electd_acks_not_asked_total`).
    const GOLDEN: &str = include_str!("metrics_golden.txt");
}

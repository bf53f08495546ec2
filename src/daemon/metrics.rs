//! The daemon's counters and the Prometheus text (format 0.0.4) of `metrics` and
//! `GET /metrics`.

use super::*;

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

/// Why a group's leader changed, as seen by this server: the `cause` label of
/// `electd_leader_changes_total`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Cause {
    /// The first leader this server learned of since it started.
    Start,
    /// The old leader resigned (a planned handoff: yield, SIGTERM, health, drain,
    /// preempt): it was heard within a heartbeat of its leadership ending here, or it
    /// is this server and it began a handover.
    Handover,
    /// The old leader's lease ran out unannounced (a crash, a freeze, a partition).
    Failover,
}

impl Cause {
    const ALL: [Cause; 3] = [Cause::Start, Cause::Handover, Cause::Failover];

    fn name(self) -> &'static str {
        match self {
            Cause::Start => "start",
            Cause::Handover => "handover",
            Cause::Failover => "failover",
        }
    }
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

/// A label value with `\`, `"` and newlines escaped (text format 0.0.4).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Appends one metric family: HELP, TYPE, then a sample per (labels, value). A
/// counter's family is named with its _total suffix, like its samples (Prometheus
/// text format 0.0.4, what `promtool check metrics` parses).
fn family(s: &mut String, kind: &str, name: &str, help: &str, rows: &[(String, String)]) {
    let total = if kind == "counter" { "_total" } else { "" };
    let _ = writeln!(
        s,
        "# HELP electd_{name}{total} {help}\n# TYPE electd_{name}{total} {kind}"
    );
    for (labels, v) in rows {
        let labels = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(s, "electd_{name}{total}{labels} {v}");
    }
}

/// A per-group metric: its name, help and value.
type GroupMetric<'a, T> = (&'static str, &'static str, &'a dyn Fn(&Group, usize) -> T);

/// One unlabelled sample.
fn one(v: impl ToString) -> [(String, String); 1] {
    [(String::new(), v.to_string())]
}

impl Daemon {
    /// One sample per group, labelled `group`.
    fn per_group(&self, f: impl Fn(&Group, usize) -> String) -> Vec<(String, String)> {
        self.groups
            .iter()
            .enumerate()
            .map(|(i, g)| (format!("group=\"{}\"", g.name), f(g, i)))
            .collect()
    }

    /// One sample per (group, label value), labelled `group` and `label`.
    fn per_group_by(
        &self,
        label: &str,
        f: impl Fn(&Group, usize) -> Vec<(&'static str, u64)>,
    ) -> Vec<(String, String)> {
        let mut rows = Vec::new();
        for (i, g) in self.groups.iter().enumerate() {
            for (value, v) in f(g, i) {
                rows.push((
                    format!("group=\"{}\",{label}=\"{value}\"", g.name),
                    v.to_string(),
                ));
            }
        }
        rows
    }

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
    pub(super) fn check_hearing(&mut self) -> bool {
        let others = self.cfg.servers.len().saturating_sub(1);
        if others == 0 {
            return false;
        }
        let now = boot_now();
        let hold = self.cfg.heartbeat * self.cfg.missed_heartbeats;
        let heard = self.peers_heard();
        let last = heard.iter().filter_map(|&(_, t)| t).max();
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
            let ids: Vec<String> = heard
                .iter()
                .filter(|&&(_, t)| t.is_some_and(|t| now.saturating_since(t) < hold))
                .map(|(id, _)| format!("{id} ({})", self.cfg.name_of(*id)))
                .collect();
            let which = if ids.len() == 1 { "server" } else { "servers" };
            info!("this server hears {which} {} again", ids.join(", "));
        }
        true
    }

    pub(super) fn metrics_text(&self) -> String {
        let now = boot_now();
        let m = &self.metrics;
        // What the host counts: what came in, what was dropped, writes confirmed.
        let hm = self.host.metrics();
        let mut s = String::new();
        let node = |i: usize| &self.host.group(i).node;
        let status = |i: usize| node(i).status(now);
        let gauges: [GroupMetric<String>; 7] = [
            (
                "is_leader",
                "1 while this server holds a valid lease of the group.",
                &|_, i| u8::from(status(i).role == Role::Leader).to_string(),
            ),
            ("term", "Highest term seen in the group.", &|_, i| {
                status(i).term.to_string()
            }),
            (
                "leader_id",
                "Known leader id of the group, 0 if none.",
                &|_, i| status(i).leader.unwrap_or(0).to_string(),
            ),
            (
                "voted_term",
                "Highest term voted in, in the group.",
                &|_, i| status(i).voted_term.to_string(),
            ),
            (
                "supervisors",
                "Supervisors (electctl run) registered for the group.",
                &|_, i| self.host.registry().supervisors(i).to_string(),
            ),
            (
                "healthy",
                "1 while this server is healthy in the group (its check passes and no supervisor reports failing).",
                &|_, i| u8::from(node(i).healthy()).to_string(),
            ),
            (
                "drained",
                "1 while this server is drained in the group (electctl drain).",
                &|_, i| u8::from(node(i).drained()).to_string(),
            ),
        ];
        for (name, help, f) in gauges {
            family(&mut s, "gauge", name, help, &self.per_group(f));
        }
        // Wall clock, as Prometheus's time() is: now plus the lease left here.
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        family(
            &mut s,
            "gauge",
            "lease_expiry_timestamp_seconds",
            "When this server's lease of the group ends, in Unix seconds (wall clock: now plus the lease left); 0 while it does not lead.",
            &self.per_group(|_, i| match status(i).lease_until {
                Some(until) if status(i).role == Role::Leader => {
                    format!("{:.3}", (wall + until.saturating_since(now)).as_secs_f64())
                }
                _ => "0".into(),
            }),
        );
        family(
            &mut s,
            "gauge",
            "handoff_last_wait_seconds",
            "How long the group's last planned handoff's RESIGN waited, in seconds.",
            &self.per_group(|g, _| format!("{:.3}", g.metrics.last_handoff_wait_ms as f64 / 1e3)),
        );
        let counters: [GroupMetric<u64>; 12] = [
            (
                "role_changes",
                "Changes of the reported role or leader.",
                &|g, _| g.metrics.role_changes,
            ),
            (
                "elections",
                "Election rounds this server took part in.",
                &|_, i| node(i).counters().rounds,
            ),
            ("votes", "Votes cast.", &|_, i| node(i).counters().votes),
            (
                "elected",
                "Rounds won (including re-elections).",
                &|_, i| node(i).counters().elected,
            ),
            (
                "dual_leader",
                "LEADs from another leader of our own term (must stay 0).",
                &|_, i| node(i).counters().dual_leader,
            ),
            (
                "handoffs",
                "Planned handoffs begun (yield, SIGTERM, health, drain, preempt).",
                &|g, _| g.metrics.handoffs,
            ),
            (
                "handoffs_waited",
                "Planned handoffs whose RESIGN waited for supervisors to stop their commands.",
                &|g, _| g.metrics.handoffs_waited,
            ),
            (
                "health_changes",
                "Changes of health (ok, failing, unknown).",
                &|g, _| g.metrics.health_changes,
            ),
            ("check_runs", "Health check runs finished.", &|g, _| {
                g.checks.counters.runs
            }),
            (
                "successor_votes",
                "Rounds in which this server voted for the successor a RESIGN named.",
                &|_, i| node(i).counters().successor_votes,
            ),
            ("hook_runs", "Hooks started.", &|g, _| g.hooks.runs),
            (
                "hook_failures",
                "Hooks that failed, timed out or could not start.",
                &|g, _| g.hooks.failures,
            ),
        ];
        for (name, help, f) in counters {
            family(
                &mut s,
                "counter",
                name,
                help,
                &self.per_group(|g, i| f(g, i).to_string()),
            );
        }
        family(
            &mut s,
            "counter",
            "check_failures",
            "Health check runs that failed, by reason (exit: non-zero status; exec: could not run, or status 126 or 127; signal; timeout).",
            &self.per_group_by("reason", |g, _| {
                REASONS
                    .iter()
                    .copied()
                    .zip(g.checks.counters.failures)
                    .collect()
            }),
        );
        family(
            &mut s,
            "counter",
            "leader_changes",
            "Changes of the group's leader as seen here, once per change (a handover counts one), by cause: start (the first leader known since this server started), handover (the old leader resigned), failover (its lease ran out unannounced).",
            &self.per_group_by("cause", |g, _| {
                Cause::ALL
                    .iter()
                    .map(|&c| (c.name(), g.metrics.leader_changes.counts[c as usize]))
                    .collect()
            }),
        );
        family(
            &mut s,
            "counter",
            "handovers",
            "Handovers this leader began, by reason (yield includes SIGTERM).",
            &self.per_group_by("reason", |_, i| {
                [
                    Handover::Yield,
                    Handover::Health,
                    Handover::Drain,
                    Handover::Preempt,
                ]
                .iter()
                .map(|&h| (h.name(), node(i).counters().handovers[h as usize]))
                .collect()
            }),
        );
        family(
            &mut s,
            "gauge",
            "server_info",
            "This server: its id and name in the server list, its cluster and electd's version; always 1.",
            &[(
                format!(
                    "id=\"{}\",name=\"{}\",cluster=\"{}\",version=\"{}\"",
                    self.cfg.id,
                    label(&self.cfg.name_of(self.cfg.id)),
                    label(&self.cfg.cluster),
                    env!("CARGO_PKG_VERSION")
                ),
                "1".into(),
            )],
        );
        let hold = self.cfg.heartbeat * self.cfg.missed_heartbeats;
        let heard = self
            .peers_heard()
            .into_iter()
            .filter(|&(_, t)| t.is_some_and(|t| now.saturating_since(t) < hold))
            .count();
        family(
            &mut s,
            "gauge",
            "peers_heard",
            "Servers heard from within missed-heartbeats x heartbeat; 0: this server hears nobody.",
            &one(heard),
        );
        let cluster: [(&str, &str, &str, String); 9] = [
            (
                "gauge",
                "control_clients",
                "Connected control socket clients.",
                self.control.clients().to_string(),
            ),
            (
                "gauge",
                "control_watchers",
                "Control socket clients watching.",
                self.control.watchers().to_string(),
            ),
            (
                "gauge",
                "uptime_seconds",
                "Seconds since start.",
                format!("{:.3}", self.started.elapsed().as_secs_f64()),
            ),
            (
                "gauge",
                "config_refused",
                "1 while the last reload was refused: the running configuration is not the file's, and a restart would load the file.",
                u8::from(self.config_refused.is_some()).to_string(),
            ),
            (
                "counter",
                "supervisors_departed_unconfirmed",
                "Supervisors that left without confirming the end of a lease they were told of.",
                self.host.registry().departed_unconfirmed.to_string(),
            ),
            (
                "counter",
                "state_writes",
                "Durable writes of the state file (every group's state in one).",
                hm.state_writes.to_string(),
            ),
            (
                "counter",
                "send_errors",
                "Datagrams the kernel refused to send.",
                m.send_errors.to_string(),
            ),
            (
                "counter",
                "control_requests",
                "Control socket requests answered.",
                self.control.counters.requests.to_string(),
            ),
            (
                "counter",
                "control_dropped",
                "Control clients dropped (limits).",
                (self.control.counters.dropped + self.control.counters.refused).to_string(),
            ),
        ];
        for (kind, name, help, v) in cluster {
            family(&mut s, kind, name, help, &one(v));
        }
        family(
            &mut s,
            "counter",
            "log_lines_dropped",
            "Log lines dropped because the log sink (stderr) did not take them in time (SPEC section 12).",
            &one(crate::logsink::dropped_total()),
        );
        family(
            &mut s,
            "gauge",
            "state_write_seconds",
            "How long the state file write in flight has taken so far (0 when none): votes and new terms wait for it.",
            &one(format!("{:.3}", self.write_age().as_secs_f64())),
        );
        family(
            &mut s,
            "counter",
            "datagrams_sent",
            "Datagrams sent (one per destination per flush, carrying every group's messages).",
            &one(m.datagrams_sent),
        );
        family(
            &mut s,
            "counter",
            "datagrams_received",
            "Valid datagrams received.",
            &one(hm.datagrams_received),
        );
        let kinds = [Kind::Lead, Kind::Elect, Kind::Vote, Kind::Ack];
        let by_kind = |counts: &[u64; 5]| -> Vec<(String, String)> {
            kinds
                .iter()
                .map(|&k| {
                    (
                        format!("kind=\"{}\"", k.name()),
                        counts[k as usize].to_string(),
                    )
                })
                .collect()
        };
        family(
            &mut s,
            "counter",
            "messages_received",
            "Messages received and accepted, by kind (every group's; a datagram carries one or more).",
            &by_kind(&hm.received),
        );
        family(
            &mut s,
            "counter",
            "messages_sent",
            "Messages sent, by kind, once per recipient datagram (every group's).",
            &by_kind(&m.sent),
        );
        let dropped: Vec<(String, String)> = hm
            .dropped
            .iter()
            .map(|(r, v)| (format!("reason=\"{r}\""), v.to_string()))
            .collect();
        family(
            &mut s,
            "counter",
            "datagrams_dropped",
            "Datagrams (or messages in them) dropped, by reason.",
            &dropped,
        );
        family(
            &mut s,
            "counter",
            "bytes",
            "Datagram bytes sent and received.",
            &[
                ("direction=\"sent\"".into(), m.sent_bytes.to_string()),
                (
                    "direction=\"received\"".into(),
                    hm.received_bytes.to_string(),
                ),
            ],
        );
        let peers: Vec<(String, String)> = self
            .peers_heard()
            .into_iter()
            .filter_map(|(id, heard)| {
                let t = heard?;
                Some((
                    format!("peer=\"{id}\""),
                    format!("{:.3}", now.saturating_since(t).as_secs_f64()),
                ))
            })
            .collect();
        family(
            &mut s,
            "gauge",
            "peer_last_heard_seconds",
            "Seconds since each peer was last heard (absent: never).",
            &peers,
        );
        if let Some(h) = &self.http {
            h.write_metrics(&mut s);
        }
        s.push_str("# EOF\n");
        s
    }
}

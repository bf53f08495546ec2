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
                &|_, i| self.control.supervisors(i).to_string(),
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
                self.control.counters.departed_unconfirmed.to_string(),
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
        let mut d = Daemon::start(cfg, None, None).unwrap();
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
            g.metrics.health_changes = b + 5;
            g.metrics.leader_changes.counts = [b + 6, b + 7, b + 8];
            g.checks.counters.runs = b + 9;
            g.checks.counters.failures = [b + 10, b + 11, b + 12, b + 13];
            g.hooks.runs = b + 14;
            g.hooks.failures = b + 15;
        }
        d.control.counters.requests = 21;
        d.control.counters.refused = 22;
        d.control.counters.dropped = 23;
        d.control.counters.departed_unconfirmed = 24;
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

    const GOLDEN: &str = r#"# HELP electd_is_leader 1 while this server holds a valid lease of the group.
# TYPE electd_is_leader gauge
electd_is_leader{group="orders"} 0
electd_is_leader{group="pay_ments"} 0
electd_is_leader{group="audit-2"} 0
# HELP electd_term Highest term seen in the group.
# TYPE electd_term gauge
electd_term{group="orders"} 0
electd_term{group="pay_ments"} 0
electd_term{group="audit-2"} 0
# HELP electd_leader_id Known leader id of the group, 0 if none.
# TYPE electd_leader_id gauge
electd_leader_id{group="orders"} 0
electd_leader_id{group="pay_ments"} 0
electd_leader_id{group="audit-2"} 0
# HELP electd_voted_term Highest term voted in, in the group.
# TYPE electd_voted_term gauge
electd_voted_term{group="orders"} 0
electd_voted_term{group="pay_ments"} 0
electd_voted_term{group="audit-2"} 0
# HELP electd_supervisors Supervisors (electctl run) registered for the group.
# TYPE electd_supervisors gauge
electd_supervisors{group="orders"} 0
electd_supervisors{group="pay_ments"} 0
electd_supervisors{group="audit-2"} 0
# HELP electd_healthy 1 while this server is healthy in the group (its check passes and no supervisor reports failing).
# TYPE electd_healthy gauge
electd_healthy{group="orders"} 1
electd_healthy{group="pay_ments"} 1
electd_healthy{group="audit-2"} 1
# HELP electd_drained 1 while this server is drained in the group (electctl drain).
# TYPE electd_drained gauge
electd_drained{group="orders"} 0
electd_drained{group="pay_ments"} 0
electd_drained{group="audit-2"} 0
# HELP electd_lease_expiry_timestamp_seconds When this server's lease of the group ends, in Unix seconds (wall clock: now plus the lease left); 0 while it does not lead.
# TYPE electd_lease_expiry_timestamp_seconds gauge
electd_lease_expiry_timestamp_seconds{group="orders"} 0
electd_lease_expiry_timestamp_seconds{group="pay_ments"} 0
electd_lease_expiry_timestamp_seconds{group="audit-2"} 0
# HELP electd_handoff_last_wait_seconds How long the group's last planned handoff's RESIGN waited, in seconds.
# TYPE electd_handoff_last_wait_seconds gauge
electd_handoff_last_wait_seconds{group="orders"} 1.334
electd_handoff_last_wait_seconds{group="pay_ments"} 1.434
electd_handoff_last_wait_seconds{group="audit-2"} 1.534
# HELP electd_role_changes_total Changes of the reported role or leader.
# TYPE electd_role_changes_total counter
electd_role_changes_total{group="orders"} 101
electd_role_changes_total{group="pay_ments"} 201
electd_role_changes_total{group="audit-2"} 301
# HELP electd_elections_total Election rounds this server took part in.
# TYPE electd_elections_total counter
electd_elections_total{group="orders"} 1
electd_elections_total{group="pay_ments"} 1
electd_elections_total{group="audit-2"} 1
# HELP electd_votes_total Votes cast.
# TYPE electd_votes_total counter
electd_votes_total{group="orders"} 0
electd_votes_total{group="pay_ments"} 0
electd_votes_total{group="audit-2"} 0
# HELP electd_elected_total Rounds won (including re-elections).
# TYPE electd_elected_total counter
electd_elected_total{group="orders"} 0
electd_elected_total{group="pay_ments"} 0
electd_elected_total{group="audit-2"} 0
# HELP electd_dual_leader_total LEADs from another leader of our own term (must stay 0).
# TYPE electd_dual_leader_total counter
electd_dual_leader_total{group="orders"} 0
electd_dual_leader_total{group="pay_ments"} 0
electd_dual_leader_total{group="audit-2"} 0
# HELP electd_handoffs_total Planned handoffs begun (yield, SIGTERM, health, drain, preempt).
# TYPE electd_handoffs_total counter
electd_handoffs_total{group="orders"} 102
electd_handoffs_total{group="pay_ments"} 202
electd_handoffs_total{group="audit-2"} 302
# HELP electd_handoffs_waited_total Planned handoffs whose RESIGN waited for supervisors to stop their commands.
# TYPE electd_handoffs_waited_total counter
electd_handoffs_waited_total{group="orders"} 103
electd_handoffs_waited_total{group="pay_ments"} 203
electd_handoffs_waited_total{group="audit-2"} 303
# HELP electd_health_changes_total Changes of health (ok, failing, unknown).
# TYPE electd_health_changes_total counter
electd_health_changes_total{group="orders"} 105
electd_health_changes_total{group="pay_ments"} 205
electd_health_changes_total{group="audit-2"} 305
# HELP electd_check_runs_total Health check runs finished.
# TYPE electd_check_runs_total counter
electd_check_runs_total{group="orders"} 109
electd_check_runs_total{group="pay_ments"} 209
electd_check_runs_total{group="audit-2"} 309
# HELP electd_successor_votes_total Rounds in which this server voted for the successor a RESIGN named.
# TYPE electd_successor_votes_total counter
electd_successor_votes_total{group="orders"} 0
electd_successor_votes_total{group="pay_ments"} 0
electd_successor_votes_total{group="audit-2"} 0
# HELP electd_hook_runs_total Hooks started.
# TYPE electd_hook_runs_total counter
electd_hook_runs_total{group="orders"} 114
electd_hook_runs_total{group="pay_ments"} 214
electd_hook_runs_total{group="audit-2"} 314
# HELP electd_hook_failures_total Hooks that failed, timed out or could not start.
# TYPE electd_hook_failures_total counter
electd_hook_failures_total{group="orders"} 115
electd_hook_failures_total{group="pay_ments"} 215
electd_hook_failures_total{group="audit-2"} 315
# HELP electd_check_failures_total Health check runs that failed, by reason (exit: non-zero status; exec: could not run, or status 126 or 127; signal; timeout).
# TYPE electd_check_failures_total counter
electd_check_failures_total{group="orders",reason="exit"} 110
electd_check_failures_total{group="orders",reason="signal"} 111
electd_check_failures_total{group="orders",reason="timeout"} 112
electd_check_failures_total{group="orders",reason="exec"} 113
electd_check_failures_total{group="pay_ments",reason="exit"} 210
electd_check_failures_total{group="pay_ments",reason="signal"} 211
electd_check_failures_total{group="pay_ments",reason="timeout"} 212
electd_check_failures_total{group="pay_ments",reason="exec"} 213
electd_check_failures_total{group="audit-2",reason="exit"} 310
electd_check_failures_total{group="audit-2",reason="signal"} 311
electd_check_failures_total{group="audit-2",reason="timeout"} 312
electd_check_failures_total{group="audit-2",reason="exec"} 313
# HELP electd_leader_changes_total Changes of the group's leader as seen here, once per change (a handover counts one), by cause: start (the first leader known since this server started), handover (the old leader resigned), failover (its lease ran out unannounced).
# TYPE electd_leader_changes_total counter
electd_leader_changes_total{group="orders",cause="start"} 106
electd_leader_changes_total{group="orders",cause="handover"} 107
electd_leader_changes_total{group="orders",cause="failover"} 108
electd_leader_changes_total{group="pay_ments",cause="start"} 206
electd_leader_changes_total{group="pay_ments",cause="handover"} 207
electd_leader_changes_total{group="pay_ments",cause="failover"} 208
electd_leader_changes_total{group="audit-2",cause="start"} 306
electd_leader_changes_total{group="audit-2",cause="handover"} 307
electd_leader_changes_total{group="audit-2",cause="failover"} 308
# HELP electd_handovers_total Handovers this leader began, by reason (yield includes SIGTERM).
# TYPE electd_handovers_total counter
electd_handovers_total{group="orders",reason="yield"} 0
electd_handovers_total{group="orders",reason="health"} 0
electd_handovers_total{group="orders",reason="drain"} 0
electd_handovers_total{group="orders",reason="preempt"} 0
electd_handovers_total{group="pay_ments",reason="yield"} 0
electd_handovers_total{group="pay_ments",reason="health"} 0
electd_handovers_total{group="pay_ments",reason="drain"} 0
electd_handovers_total{group="pay_ments",reason="preempt"} 0
electd_handovers_total{group="audit-2",reason="yield"} 0
electd_handovers_total{group="audit-2",reason="health"} 0
electd_handovers_total{group="audit-2",reason="drain"} 0
electd_handovers_total{group="audit-2",reason="preempt"} 0
# HELP electd_server_info This server: its id and name in the server list, its cluster and electd's version; always 1.
# TYPE electd_server_info gauge
electd_server_info{id="1",name="o\"n\\e",cluster="c\"l\\u",version="0.1.0"} 1
# HELP electd_peers_heard Servers heard from within missed-heartbeats x heartbeat; 0: this server hears nobody.
# TYPE electd_peers_heard gauge
electd_peers_heard 0
# HELP electd_control_clients Connected control socket clients.
# TYPE electd_control_clients gauge
electd_control_clients 0
# HELP electd_control_watchers Control socket clients watching.
# TYPE electd_control_watchers gauge
electd_control_watchers 0
# HELP electd_uptime_seconds Seconds since start.
# TYPE electd_uptime_seconds gauge
electd_uptime_seconds T
# HELP electd_config_refused 1 while the last reload was refused: the running configuration is not the file's, and a restart would load the file.
# TYPE electd_config_refused gauge
electd_config_refused 1
# HELP electd_supervisors_departed_unconfirmed_total Supervisors that left without confirming the end of a lease they were told of.
# TYPE electd_supervisors_departed_unconfirmed_total counter
electd_supervisors_departed_unconfirmed_total 24
# HELP electd_state_writes_total Durable writes of the state file (every group's state in one).
# TYPE electd_state_writes_total counter
electd_state_writes_total 0
# HELP electd_send_errors_total Datagrams the kernel refused to send.
# TYPE electd_send_errors_total counter
electd_send_errors_total 8
# HELP electd_control_requests_total Control socket requests answered.
# TYPE electd_control_requests_total counter
electd_control_requests_total 21
# HELP electd_control_dropped_total Control clients dropped (limits).
# TYPE electd_control_dropped_total counter
electd_control_dropped_total 45
# HELP electd_log_lines_dropped_total Log lines dropped because the log sink (stderr) did not take them in time (SPEC section 12).
# TYPE electd_log_lines_dropped_total counter
electd_log_lines_dropped_total T
# HELP electd_state_write_seconds How long the state file write in flight has taken so far (0 when none): votes and new terms wait for it.
# TYPE electd_state_write_seconds gauge
electd_state_write_seconds 0.000
# HELP electd_datagrams_sent_total Datagrams sent (one per destination per flush, carrying every group's messages).
# TYPE electd_datagrams_sent_total counter
electd_datagrams_sent_total 6
# HELP electd_datagrams_received_total Valid datagrams received.
# TYPE electd_datagrams_received_total counter
electd_datagrams_received_total 0
# HELP electd_messages_received_total Messages received and accepted, by kind (every group's; a datagram carries one or more).
# TYPE electd_messages_received_total counter
electd_messages_received_total{kind="lead"} 0
electd_messages_received_total{kind="elect"} 0
electd_messages_received_total{kind="vote"} 0
electd_messages_received_total{kind="ack"} 0
# HELP electd_messages_sent_total Messages sent, by kind, once per recipient datagram (every group's).
# TYPE electd_messages_sent_total counter
electd_messages_sent_total{kind="lead"} 2
electd_messages_sent_total{kind="elect"} 3
electd_messages_sent_total{kind="vote"} 4
electd_messages_sent_total{kind="ack"} 5
# HELP electd_datagrams_dropped_total Datagrams (or messages in them) dropped, by reason.
# TYPE electd_datagrams_dropped_total counter
electd_datagrams_dropped_total{reason="bad_trailer"} 1
electd_datagrams_dropped_total{reason="too_long"} 1
electd_datagrams_dropped_total{reason="too_short"} 2
# HELP electd_bytes_total Datagram bytes sent and received.
# TYPE electd_bytes_total counter
electd_bytes_total{direction="sent"} 7
electd_bytes_total{direction="received"} 108
# HELP electd_peer_last_heard_seconds Seconds since each peer was last heard (absent: never).
# TYPE electd_peer_last_heard_seconds gauge
# HELP electd_http_requests_total Requests answered on metrics-listen, by status code.
# TYPE electd_http_requests_total counter
electd_http_requests_total{code="200"} 0
electd_http_requests_total{code="400"} 0
electd_http_requests_total{code="404"} 0
electd_http_requests_total{code="405"} 0
electd_http_requests_total{code="408"} 0
electd_http_requests_total{code="413"} 0
electd_http_requests_total{code="431"} 0
electd_http_requests_total{code="501"} 0
electd_http_requests_total{code="505"} 0
# HELP electd_http_clients Connections open on metrics-listen.
# TYPE electd_http_clients gauge
electd_http_clients 0
# HELP electd_http_connections_total Connections accepted on metrics-listen.
# TYPE electd_http_connections_total counter
electd_http_connections_total 0
# HELP electd_http_closed_total Connections on metrics-listen closed by the daemon (idle: no request for 10 s; timeout: a request not complete within 10 s; evicted: the client limit; unread: answers not read).
# TYPE electd_http_closed_total counter
electd_http_closed_total{reason="idle"} 0
electd_http_closed_total{reason="timeout"} 0
electd_http_closed_total{reason="evicted"} 0
electd_http_closed_total{reason="unread"} 0
# EOF
"#;
}

//! The daemon's counters and the Prometheus text (format 0.0.4) of `metrics` and
//! `GET /metrics`.

use super::*;

/// Counters for `metrics` beyond the core's.
#[derive(Debug, Default)]
pub(super) struct Metrics {
    pub(super) received: [u64; 5],
    pub(super) sent: [u64; 5],
    pub(super) sent_bytes: u64,
    pub(super) received_bytes: u64,
    pub(super) dropped: BTreeMap<&'static str, u64>,
    pub(super) send_errors: u64,
    pub(super) state_writes: u64,
    pub(super) role_changes: u64,
    /// Planned handoffs begun.
    pub(super) handoffs: u64,
    /// Planned handoffs whose RESIGN waited for supervisors (not sent at once).
    pub(super) handoffs_waited: u64,
    /// How long the last handoff's RESIGN waited, in ms.
    pub(super) last_handoff_wait_ms: u64,
    /// Changes of `health` (ok, failing, unknown).
    pub(super) health_changes: u64,
}

impl Daemon {
    pub(super) fn metrics_text(&self) -> String {
        let now = boot_now();
        let st = self.node.status(now);
        let c = self.node.counters();
        let m = &self.metrics;
        let mut s = String::new();
        // Prometheus text format 0.0.4 (what Prometheus scrapes and `promtool check
        // metrics` parses): a counter's family is named with its _total suffix, like
        // its sample, and units are base units. The final `# EOF`, a comment in that
        // format, ends the answer on the control socket.
        let mut family = |kind: &str, name: &str, help: &str, v: String| {
            let total = if kind == "counter" { "_total" } else { "" };
            let _ = writeln!(
                s,
                "# HELP electd_{name}{total} {help}\n# TYPE electd_{name}{total} {kind}\nelectd_{name}{total} {v}"
            );
        };
        family(
            "gauge",
            "is_leader",
            "1 while this server holds a valid lease.",
            u8::from(st.role == Role::Leader).to_string(),
        );
        family("gauge", "term", "Highest term seen.", st.term.to_string());
        family(
            "gauge",
            "leader_id",
            "Known leader id, 0 if none.",
            st.leader.unwrap_or(0).to_string(),
        );
        family(
            "gauge",
            "voted_term",
            "Highest term voted in.",
            st.voted_term.to_string(),
        );
        family(
            "gauge",
            "control_clients",
            "Connected control socket clients.",
            self.control.clients().to_string(),
        );
        family(
            "gauge",
            "control_watchers",
            "Control socket clients watching.",
            self.control.watchers().to_string(),
        );
        family(
            "gauge",
            "uptime_seconds",
            "Seconds since start.",
            format!("{:.3}", self.started.elapsed().as_secs_f64()),
        );
        family(
            "counter",
            "leader_changes",
            "Changes of the known leader (as seen here).",
            c.leader_changes.to_string(),
        );
        family(
            "counter",
            "role_changes",
            "Changes of the reported role or leader.",
            m.role_changes.to_string(),
        );
        family(
            "counter",
            "elections",
            "Election rounds this server took part in.",
            c.rounds.to_string(),
        );
        family("counter", "votes", "Votes cast.", c.votes.to_string());
        family(
            "counter",
            "elected",
            "Rounds won (including re-elections).",
            c.elected.to_string(),
        );
        family(
            "counter",
            "dual_leader",
            "LEADs from another leader of our own term (must stay 0).",
            c.dual_leader.to_string(),
        );
        family(
            "gauge",
            "supervisors",
            "Supervisors (electctl run) registered on the control socket.",
            self.control.supervisors(0).to_string(),
        );
        family(
            "counter",
            "handoffs",
            "Planned handoffs begun (yield, SIGTERM, health, drain, preempt).",
            m.handoffs.to_string(),
        );
        family(
            "counter",
            "handoffs_waited",
            "Planned handoffs whose RESIGN waited for supervisors to stop their commands.",
            m.handoffs_waited.to_string(),
        );
        family(
            "gauge",
            "handoff_last_wait_seconds",
            "How long the last planned handoff's RESIGN waited, in seconds.",
            format!("{:.3}", m.last_handoff_wait_ms as f64 / 1e3),
        );
        family(
            "gauge",
            "healthy",
            "1 while this server is healthy (its check passes and no supervisor reports failing).",
            u8::from(self.node.healthy()).to_string(),
        );
        family(
            "gauge",
            "drained",
            "1 while this server is drained (electctl drain).",
            u8::from(self.node.drained()).to_string(),
        );
        family(
            "gauge",
            "config_refused",
            "1 while the last reload was refused: the running configuration is not the file's, and a restart would load the file.",
            u8::from(self.config_refused.is_some()).to_string(),
        );
        family(
            "counter",
            "health_changes",
            "Changes of health (ok, failing, unknown).",
            self.metrics.health_changes.to_string(),
        );
        family(
            "counter",
            "check_runs",
            "Health check runs finished.",
            self.checks.counters.runs.to_string(),
        );
        family(
            "counter",
            "successor_votes",
            "Rounds in which this server voted for the successor a RESIGN named.",
            c.successor_votes.to_string(),
        );
        family(
            "counter",
            "supervisors_departed_unconfirmed",
            "Supervisors that left without confirming the end of a lease they were told of.",
            self.control.counters.departed_unconfirmed.to_string(),
        );
        family(
            "counter",
            "state_writes",
            "Durable writes of the state file.",
            m.state_writes.to_string(),
        );
        family(
            "counter",
            "send_errors",
            "Datagrams the kernel refused to send.",
            m.send_errors.to_string(),
        );
        family(
            "counter",
            "hook_runs",
            "Hooks started.",
            self.hooks.runs.to_string(),
        );
        family(
            "counter",
            "hook_failures",
            "Hooks that failed, timed out or could not start.",
            self.hooks.failures.to_string(),
        );
        family(
            "counter",
            "control_requests",
            "Control socket requests answered.",
            self.control.counters.requests.to_string(),
        );
        family(
            "counter",
            "control_dropped",
            "Control clients dropped (limits).",
            (self.control.counters.dropped + self.control.counters.refused).to_string(),
        );
        let kinds = [Kind::Lead, Kind::Elect, Kind::Vote, Kind::Ack];
        let by_kind = |counts: &[u64; 5]| {
            kinds
                .iter()
                .map(|&k| ("kind", k.name(), counts[k as usize]))
                .collect::<Vec<_>>()
        };
        let dropped: Vec<_> = m.dropped.iter().map(|(r, v)| ("reason", *r, *v)).collect();
        let check_failures: Vec<_> = REASONS
            .iter()
            .zip(self.checks.counters.failures)
            .map(|(r, v)| ("reason", *r, v))
            .collect();
        let handovers: Vec<_> = [
            Handover::Yield,
            Handover::Health,
            Handover::Drain,
            Handover::Preempt,
        ]
        .iter()
        .map(|&h| ("reason", h.name(), c.handovers[h as usize]))
        .collect();
        for (name, help, rows) in [
            (
                "datagrams_received",
                "Valid datagrams received, by kind.",
                by_kind(&m.received),
            ),
            (
                "datagrams_sent",
                "Datagrams sent, by kind.",
                by_kind(&m.sent),
            ),
            (
                "datagrams_dropped",
                "Datagrams dropped, by reason.",
                dropped,
            ),
            (
                "check_failures",
                "Health check runs that failed, by reason (exit: non-zero status; exec: could not run, or status 126 or 127; signal; timeout).",
                check_failures,
            ),
            (
                "handovers",
                "Handovers this leader began, by reason (yield includes SIGTERM).",
                handovers,
            ),
        ] {
            let _ = writeln!(
                s,
                "# HELP electd_{name}_total {help}\n# TYPE electd_{name}_total counter"
            );
            for (label, value, v) in rows {
                let _ = writeln!(s, "electd_{name}_total{{{label}=\"{value}\"}} {v}");
            }
        }
        s.push_str(
            "# HELP electd_bytes_total Datagram bytes sent and received.\n# TYPE electd_bytes_total counter\n",
        );
        let _ = writeln!(
            s,
            "electd_bytes_total{{direction=\"sent\"}} {}",
            m.sent_bytes
        );
        let _ = writeln!(
            s,
            "electd_bytes_total{{direction=\"received\"}} {}",
            m.received_bytes
        );
        s.push_str("# HELP electd_peer_last_heard_seconds Seconds since each peer was last heard (absent: never).\n# TYPE electd_peer_last_heard_seconds gauge\n");
        for (id, heard) in self.node.peers() {
            if let Some(t) = heard {
                let _ = writeln!(
                    s,
                    "electd_peer_last_heard_seconds{{peer=\"{id}\"}} {:.3}",
                    now.saturating_since(t).as_secs_f64()
                );
            }
        }
        if let Some(h) = &self.http {
            h.write_metrics(&mut s);
        }
        s.push_str("# EOF\n");
        s
    }
}

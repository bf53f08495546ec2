//! Every metric family electd exports, in the order of the text: its name (without
//! `electd_` and a counter's `_total`), type, help, labels, and how to read its
//! samples from a [`Snapshot`]. Names, help and order are an interface (dashboards,
//! alert rules in `deploy/`): change them only on purpose.

use super::{Cause, GroupSnapshot, HttpSnapshot, Snapshot, Value};
use crate::health::REASONS;
use crate::http::CODES;
use crate::node::Handover;
use crate::wire::Kind;

/// A family's Prometheus type.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Type {
    Counter,
    Gauge,
}

/// One sample: its label values (after its source's own) and its value.
pub type Row = (Vec<String>, Value);

/// How a family's samples are read from its source `S`. Their label values follow
/// the source's own (a group's name), in the order of [`Family::labels`].
pub enum Read<S> {
    /// One sample.
    Value(fn(&S) -> Value),
    /// One sample per value of the last label, in the order given.
    Each(fn(&S) -> Vec<(&'static str, u64)>),
    /// Samples with their label values (not known in advance: ids, names).
    Rows(fn(&S) -> Vec<Row>),
}

/// One metric family.
pub struct Family<S> {
    /// Its name without `electd_` and, for a counter, `_total`.
    pub name: &'static str,
    pub kind: Type,
    /// The HELP text.
    pub help: &'static str,
    /// Its label names, in the order written.
    pub labels: &'static [&'static str],
    pub read: Read<S>,
}

/// The labels of a family with one sample per group.
const GROUP: &[&str] = &["group"];
/// The handover reasons, in the order written.
const HANDOVERS: [Handover; 4] = [
    Handover::Yield,
    Handover::Health,
    Handover::Drain,
    Handover::Preempt,
];
/// The message kinds, in the order written.
const KINDS: [Kind; 4] = [Kind::Lead, Kind::Elect, Kind::Vote, Kind::Ack];

/// Counts of `kinds` by kind name.
fn by_kind(counts: &[u64; 5]) -> Vec<(&'static str, u64)> {
    KINDS
        .iter()
        .map(|&k| (k.name(), counts[k as usize]))
        .collect()
}

/// A counter per wire framing, oldest first: `classic` (versions 3 and 4), `compact`
/// (5 and 6) and `compact_acks` (7 and 8), so an operator can tell a peer still on
/// the previous build (its `compact` count keeps growing with heartbeats).
fn by_framing(counts: &[u64; 3]) -> Vec<(&'static str, u64)> {
    use crate::wire::Framing;
    [Framing::Bundle, Framing::Compact, Framing::CompactAcks]
        .into_iter()
        .map(|f| (f.name(), counts[f.index()]))
        .collect()
}

/// The per-group families, first in the text; one sample (or one per label value)
/// for each group, labelled `group` first.
pub const GROUPS: &[Family<GroupSnapshot>] = &[
    Family {
        name: "is_leader",
        kind: Type::Gauge,
        help: "1 while this server holds a valid lease of the group.",
        labels: GROUP,
        read: Read::Value(|g| g.is_leader.into()),
    },
    Family {
        name: "term",
        kind: Type::Gauge,
        help: "Highest term seen in the group.",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.term)),
    },
    Family {
        name: "leader_id",
        kind: Type::Gauge,
        help: "Known leader id of the group, 0 if none.",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.leader_id.into())),
    },
    Family {
        name: "voted_term",
        kind: Type::Gauge,
        help: "Highest term voted in, in the group.",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.voted_term)),
    },
    Family {
        name: "supervisors",
        kind: Type::Gauge,
        help: "Supervisors (electctl run) registered for the group.",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.supervisors as u64)),
    },
    Family {
        name: "healthy",
        kind: Type::Gauge,
        help: "1 while this server is healthy in the group (its check passes and no supervisor reports failing).",
        labels: GROUP,
        read: Read::Value(|g| g.healthy.into()),
    },
    Family {
        name: "drained",
        kind: Type::Gauge,
        help: "1 while this server is drained in the group (electctl drain).",
        labels: GROUP,
        read: Read::Value(|g| g.drained.into()),
    },
    Family {
        name: "timers_waiting",
        kind: Type::Gauge,
        help: "1 while a reload's longer timers wait for their hold promise to be written to the state file; the timers before the reload stay in force until then (a stalled state disk keeps it at 1).",
        labels: GROUP,
        read: Read::Value(|g| g.timers_waiting.into()),
    },
    Family {
        name: "lease_expiry_timestamp_seconds",
        kind: Type::Gauge,
        help: "When this server's lease of the group ends, in Unix seconds (wall clock: now plus the lease left); 0 while it does not lead.",
        labels: GROUP,
        read: Read::Value(|g| match g.lease_expiry {
            Some(t) => Value::Seconds(t.as_secs_f64()),
            None => Value::Count(0),
        }),
    },
    Family {
        name: "handoff_last_wait_seconds",
        kind: Type::Gauge,
        help: "How long the group's last planned handoff's RESIGN waited, in seconds.",
        labels: GROUP,
        read: Read::Value(|g| Value::Seconds(g.last_handoff_wait_ms as f64 / 1e3)),
    },
    Family {
        name: "role_changes",
        kind: Type::Counter,
        help: "Changes of the reported role or leader.",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.role_changes)),
    },
    Family {
        name: "elections",
        kind: Type::Counter,
        help: "Election rounds this server took part in.",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.elections)),
    },
    Family {
        name: "votes",
        kind: Type::Counter,
        help: "Votes cast.",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.votes)),
    },
    Family {
        name: "elected",
        kind: Type::Counter,
        help: "Rounds won (including re-elections).",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.elected)),
    },
    Family {
        name: "dual_leader",
        kind: Type::Counter,
        help: "LEADs from another leader of our own term (must stay 0).",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.dual_leader)),
    },
    Family {
        name: "acks_not_asked",
        kind: Type::Counter,
        help: "LEADs accepted that asked other followers to acknowledge them (sparse acknowledgements): ACKs not sent.",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.acks_not_asked)),
    },
    Family {
        name: "handoffs",
        kind: Type::Counter,
        help: "Planned handoffs begun (yield, SIGTERM, health, drain, preempt).",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.handoffs)),
    },
    Family {
        name: "handoffs_waited",
        kind: Type::Counter,
        help: "Planned handoffs whose RESIGN waited for supervisors to stop their commands.",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.handoffs_waited)),
    },
    Family {
        name: "health_changes",
        kind: Type::Counter,
        help: "Changes of health (ok, failing, unknown).",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.health_changes)),
    },
    Family {
        name: "check_runs",
        kind: Type::Counter,
        help: "Health check runs finished.",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.check_runs)),
    },
    Family {
        name: "successor_votes",
        kind: Type::Counter,
        help: "Rounds in which this server voted for the successor a RESIGN named.",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.successor_votes)),
    },
    Family {
        name: "hook_runs",
        kind: Type::Counter,
        help: "Hooks started.",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.hook_runs)),
    },
    Family {
        name: "hook_failures",
        kind: Type::Counter,
        help: "Hooks that failed, timed out or could not start.",
        labels: GROUP,
        read: Read::Value(|g| Value::Count(g.hook_failures)),
    },
    Family {
        name: "check_failures",
        kind: Type::Counter,
        help: "Health check runs that failed, by reason (exit: non-zero status; exec: could not run, or status 126 or 127; signal; timeout).",
        labels: &["group", "reason"],
        read: Read::Each(|g| REASONS.iter().copied().zip(g.check_failures).collect()),
    },
    Family {
        name: "leader_changes",
        kind: Type::Counter,
        help: "Changes of the group's leader as seen here, once per change (a handover counts one), by cause: start (the first leader known since this server started), handover (the old leader resigned), failover (its lease ran out unannounced).",
        labels: &["group", "cause"],
        read: Read::Each(|g| Cause::NAMES.iter().copied().zip(g.leader_changes).collect()),
    },
    Family {
        name: "handovers",
        kind: Type::Counter,
        help: "Handovers this leader began, by reason (yield includes SIGTERM).",
        labels: &["group", "reason"],
        read: Read::Each(|g| {
            HANDOVERS
                .iter()
                .map(|&h| (h.name(), g.handovers[h as usize]))
                .collect()
        }),
    },
];

/// The server-wide families, after the groups'.
pub const SERVER: &[Family<Snapshot>] = &[
    Family {
        name: "server_info",
        kind: Type::Gauge,
        help: "This server: its id and name in the server list, its cluster and electd's version; always 1.",
        labels: &["id", "name", "cluster", "version"],
        read: Read::Rows(|s| {
            let labels = vec![
                s.id.to_string(),
                s.name.clone(),
                s.cluster.clone(),
                env!("CARGO_PKG_VERSION").to_string(),
            ];
            vec![(labels, Value::Count(1))]
        }),
    },
    Family {
        name: "peers_heard",
        kind: Type::Gauge,
        help: "Servers heard from within missed-heartbeats x heartbeat; 0: this server hears nobody.",
        labels: &[],
        read: Read::Value(|s| Value::Count(s.peers_heard as u64)),
    },
    Family {
        name: "control_clients",
        kind: Type::Gauge,
        help: "Connected control socket clients.",
        labels: &[],
        read: Read::Value(|s| Value::Count(s.control_clients as u64)),
    },
    Family {
        name: "control_watchers",
        kind: Type::Gauge,
        help: "Control socket clients watching.",
        labels: &[],
        read: Read::Value(|s| Value::Count(s.control_watchers as u64)),
    },
    Family {
        name: "uptime_seconds",
        kind: Type::Gauge,
        help: "Seconds since start.",
        labels: &[],
        read: Read::Value(|s| Value::Seconds(s.uptime.as_secs_f64())),
    },
    Family {
        name: "config_refused",
        kind: Type::Gauge,
        help: "1 while the last reload was refused: the running configuration is not the file's, and a restart would load the file.",
        labels: &[],
        read: Read::Value(|s| s.config_refused.into()),
    },
    Family {
        name: "supervisors_departed_unconfirmed",
        kind: Type::Counter,
        help: "Supervisors that left without confirming the end of a lease they were told of.",
        labels: &[],
        read: Read::Value(|s| Value::Count(s.supervisors_departed_unconfirmed)),
    },
    Family {
        name: "state_writes",
        kind: Type::Counter,
        help: "Durable writes of the state file (every group's state in one).",
        labels: &[],
        read: Read::Value(|s| Value::Count(s.state_writes)),
    },
    Family {
        name: "send_errors",
        kind: Type::Counter,
        help: "Datagrams the kernel refused to send.",
        labels: &[],
        read: Read::Value(|s| Value::Count(s.send_errors)),
    },
    Family {
        name: "control_requests",
        kind: Type::Counter,
        help: "Control socket requests answered.",
        labels: &[],
        read: Read::Value(|s| Value::Count(s.control_requests)),
    },
    Family {
        name: "control_dropped",
        kind: Type::Counter,
        help: "Control clients dropped (limits).",
        labels: &[],
        read: Read::Value(|s| Value::Count(s.control_dropped)),
    },
    Family {
        name: "control_passed_refused",
        kind: Type::Counter,
        help: "Batches of descriptors passed on the control socket refused and closed unused (more than 2, a line not ended, another batch waiting, the daemon's cap).",
        labels: &[],
        read: Read::Value(|s| Value::Count(s.control_passed_refused)),
    },
    Family {
        name: "log_lines_dropped",
        kind: Type::Counter,
        help: "Log lines dropped because the log sink (stderr) did not take them in time (SPEC section 12).",
        labels: &[],
        read: Read::Value(|s| Value::Count(s.log_lines_dropped)),
    },
    Family {
        name: "state_write_seconds",
        kind: Type::Gauge,
        help: "How long the state file write in flight has taken so far (0 when none): votes and new terms wait for it.",
        labels: &[],
        read: Read::Value(|s| Value::Seconds(s.state_write_age.as_secs_f64())),
    },
    Family {
        name: "datagrams_sent",
        kind: Type::Counter,
        help: "Datagrams sent (one per destination per flush, carrying every group's messages).",
        labels: &[],
        read: Read::Value(|s| Value::Count(s.datagrams_sent)),
    },
    Family {
        name: "datagrams_received",
        kind: Type::Counter,
        help: "Valid datagrams received.",
        labels: &[],
        read: Read::Value(|s| Value::Count(s.datagrams_received)),
    },
    Family {
        name: "messages_received",
        kind: Type::Counter,
        help: "Messages received and accepted, by kind (every group's; a datagram carries one or more).",
        labels: &["kind"],
        read: Read::Each(|s| by_kind(&s.messages_received)),
    },
    Family {
        name: "messages_sent",
        kind: Type::Counter,
        help: "Messages sent, by kind, once per recipient datagram (every group's).",
        labels: &["kind"],
        read: Read::Each(|s| by_kind(&s.messages_sent)),
    },
    Family {
        name: "datagrams_dropped",
        kind: Type::Counter,
        help: "Datagrams (or messages in them) dropped, by reason.",
        labels: &["reason"],
        read: Read::Each(|s| s.dropped.clone()),
    },
    Family {
        name: "bytes",
        kind: Type::Counter,
        help: "Datagram bytes sent and received.",
        labels: &["direction"],
        read: Read::Each(|s| vec![("sent", s.sent_bytes), ("received", s.received_bytes)]),
    },
    Family {
        name: "wire_encoded",
        kind: Type::Counter,
        help: "Datagrams encoded, by wire framing: classic (versions 3 and 4), compact (5 and 6) or compact_acks (7 and 8, with the followers a LEAD asks to acknowledge), each sent to a peer once it has been heard speaking it; a datagram to every peer counts once.",
        labels: &["framing"],
        read: Read::Each(|s| by_framing(&s.framing_encoded)),
    },
    Family {
        name: "wire_accepted",
        kind: Type::Counter,
        help: "Datagrams received and accepted, by wire framing (classic, compact or compact_acks).",
        labels: &["framing"],
        read: Read::Each(|s| by_framing(&s.framing_accepted)),
    },
    Family {
        name: "wire_probes",
        kind: Type::Counter,
        help: "Compact copies of heartbeat datagrams sent to peers not yet heard speaking compact; an older build drops each one (counted there as bad_version).",
        labels: &[],
        read: Read::Value(|s| Value::Count(s.wire_probes)),
    },
    Family {
        name: "peer_last_heard_seconds",
        kind: Type::Gauge,
        help: "Seconds since each peer was last heard (absent: never).",
        labels: &["peer"],
        read: Read::Rows(|s| {
            s.peer_last_heard
                .iter()
                .map(|(id, ago)| (vec![id.to_string()], Value::Seconds(ago.as_secs_f64())))
                .collect()
        }),
    },
];

/// The metrics listener's families, last (only when `metrics-listen` is set).
pub const HTTP: &[Family<HttpSnapshot>] = &[
    Family {
        name: "http_requests",
        kind: Type::Counter,
        help: "Requests answered on metrics-listen, by status code.",
        labels: &["code"],
        read: Read::Rows(|h| {
            CODES
                .iter()
                .zip(h.answers)
                .map(|(code, n)| (vec![code.to_string()], Value::Count(n)))
                .collect()
        }),
    },
    Family {
        name: "http_clients",
        kind: Type::Gauge,
        help: "Connections open on metrics-listen.",
        labels: &[],
        read: Read::Value(|h| Value::Count(h.clients as u64)),
    },
    Family {
        name: "http_connections",
        kind: Type::Counter,
        help: "Connections accepted on metrics-listen.",
        labels: &[],
        read: Read::Value(|h| Value::Count(h.accepted)),
    },
    Family {
        name: "http_closed",
        kind: Type::Counter,
        help: "Connections on metrics-listen closed by the daemon (idle: no request for 10 s; timeout: a request not complete within 10 s; evicted: the client limit; unread: answers not read).",
        labels: &["reason"],
        read: Read::Each(|h| {
            vec![
                ("idle", h.idle_closed),
                ("timeout", h.timed_out),
                ("evicted", h.evicted),
                ("unread", h.unread),
            ]
        }),
    },
];

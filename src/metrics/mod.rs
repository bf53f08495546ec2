//! The Prometheus text (format 0.0.4) of `metrics` and `GET /metrics`, as a table of
//! families: the daemon fills a [`Snapshot`] (plain numbers, no clock read here), and
//! [`render`] walks [`table`] and writes each family's HELP, TYPE and samples.
//!
//! No clock, socket or file: what the text says depends only on the snapshot, so it is
//! tested without a daemon. A new metric is one entry in [`table`] (plus the counter
//! it reads, and its field here if the snapshot lacks it).

mod render;
pub mod table;

pub use render::render;

use std::time::Duration;

/// Why a group's leader changed, as seen by this server: the `cause` label of
/// `electd_leader_changes_total`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Cause {
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
    /// The label value of each cause, in the order of their discriminants.
    pub const NAMES: [&'static str; 3] = ["start", "handover", "failover"];
}

/// A sample's value, written as Prometheus reads it.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Value {
    /// A count or a flag: an integer.
    Count(u64),
    /// Seconds (or Unix time), to the millisecond.
    Seconds(f64),
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Count(u64::from(b))
    }
}

/// What `metrics` reports of one election group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupSnapshot {
    /// The group's name: its `group` label.
    pub name: String,
    /// True while this server holds a valid lease of the group.
    pub is_leader: bool,
    /// Highest term seen.
    pub term: u64,
    /// Known leader, 0 if none.
    pub leader_id: u16,
    /// Highest term voted in.
    pub voted_term: u64,
    /// Supervisors registered for the group.
    pub supervisors: usize,
    pub healthy: bool,
    pub drained: bool,
    /// A reload's longer timers wait for their hold promise to be written (the timers
    /// before the reload stay in force until then).
    pub timers_waiting: bool,
    /// While this server leads: when its lease ends, as Unix time (wall clock).
    pub lease_expiry: Option<Duration>,
    /// How long the last planned handoff's RESIGN waited, in ms.
    pub last_handoff_wait_ms: u64,
    pub role_changes: u64,
    /// Election rounds taken part in.
    pub elections: u64,
    pub votes: u64,
    pub elected: u64,
    pub dual_leader: u64,
    /// LEADs accepted that asked other followers to acknowledge them: ACKs not sent
    /// (issue 25, sparse acknowledgements).
    pub acks_not_asked: u64,
    pub handoffs: u64,
    pub handoffs_waited: u64,
    pub health_changes: u64,
    pub check_runs: u64,
    /// Check failures by reason, in the order of `crate::health::REASONS`.
    pub check_failures: [u64; 4],
    pub successor_votes: u64,
    pub hook_runs: u64,
    pub hook_failures: u64,
    /// Changes of leader by cause, indexed by [`Cause`].
    pub leader_changes: [u64; 3],
    /// Handovers begun by reason, indexed by `crate::node::Handover`.
    pub handovers: [u64; 4],
}

/// What `metrics` reports of the metrics listener (`metrics-listen`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HttpSnapshot {
    /// Answers by status code, in the order of `crate::http::CODES`.
    pub answers: [u64; crate::http::CODES.len()],
    /// Connections open.
    pub clients: usize,
    /// Connections accepted.
    pub accepted: u64,
    pub idle_closed: u64,
    pub timed_out: u64,
    pub evicted: u64,
    pub unread: u64,
}

/// Everything `metrics` reports, read from the daemon at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// The groups, in configuration order.
    pub groups: Vec<GroupSnapshot>,
    /// This server's id, its name in the server list and its cluster.
    pub id: u16,
    pub name: String,
    pub cluster: String,
    /// Servers heard within missed-heartbeats x heartbeat.
    pub peers_heard: usize,
    pub control_clients: usize,
    pub control_watchers: usize,
    pub uptime: Duration,
    /// True while the last reload was refused.
    pub config_refused: bool,
    pub supervisors_departed_unconfirmed: u64,
    /// State-file writes confirmed.
    pub state_writes: u64,
    pub send_errors: u64,
    pub control_requests: u64,
    /// Control clients dropped or refused (limits).
    pub control_dropped: u64,
    /// Batches of descriptors passed on the control socket refused and closed unused.
    pub control_passed_refused: u64,
    pub log_lines_dropped: u64,
    /// How long the state-file write in flight has taken so far (zero when none).
    pub state_write_age: Duration,
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    /// Messages accepted and sent, indexed by `crate::wire::Kind`.
    pub messages_received: [u64; 5],
    pub messages_sent: [u64; 5],
    /// Datagrams (or messages) dropped, by reason, in the order to report them.
    pub dropped: Vec<(&'static str, u64)>,
    pub sent_bytes: u64,
    pub received_bytes: u64,
    /// Datagrams encoded and accepted, by wire framing (`crate::wire::Framing::index`).
    pub framing_encoded: [u64; 3],
    pub framing_accepted: [u64; 3],
    /// Copies of heartbeat datagrams in the top level sent as probes.
    pub wire_probes: u64,
    /// How long ago each peer heard from was last heard, by id (never heard: absent).
    pub peer_last_heard: Vec<(u16, Duration)>,
    /// The metrics listener, if configured.
    pub http: Option<HttpSnapshot>,
}

//! The configuration file (SPEC section 9): parse, validate, fingerprint.
//!
//! One directive per line, `#` starts a comment. Every error names the file, the line
//! and the problem, with a suggestion for a misspelled directive. This file holds the
//! types and defaults; the rooms:
//!
//! - `parse`: one line into the raw directives, durations, suggestions;
//! - `groups`: the `group` sections, inheritance, `prefer` and `balance` (section 15);
//! - `load`: reading a file and the rules that validate it into a `Config`;
//! - `cluster`: what the rest of electd asks of one (names resolved, fingerprint);
//! - `warnings`: what does not stop the daemon but an operator should know;
//! - `preflight`: `electd --check-config`, the file checked on this host.

mod cluster;
mod groups;
mod load;
mod parse;
mod preflight;
mod warnings;

use parse::{Raw, expand, one, parse_line};
pub use parse::{closest, parse_duration, socket_in};

pub use groups::balanced_order;
pub use preflight::{Line, Report, check_config};
pub use warnings::executable;

use crate::addr::{self, Address, Claim, Family};
use crate::node::{NodeConfig, Sabotage, ServerInfo};
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default configuration file.
pub const DEFAULT_PATH: &str = "/etc/electd/electd.conf";
/// The default control socket.
pub const DEFAULT_SOCKET: &str = "/run/electd/electd.sock";

/// The default `max-hold`: the longest hold a LEAD may carry (SPEC section 8).
pub const DEFAULT_MAX_HOLD: Duration = Duration::from_secs(60);

/// The longest configuration file read (a server list of 255 fits many times over).
const MAX_FILE_BYTES: u64 = 1 << 20;

/// The log level in force (README "Logs"): `--log-level`, else the file's `log-level`,
/// else `RUST_LOG` (a level word), else info. At a start and at each reload, so that a
/// reload that removes `log-level` returns to what a restart would run.
pub fn effective_log_level(
    cli: Option<log::LevelFilter>,
    file: Option<log::LevelFilter>,
) -> log::LevelFilter {
    cli.or(file)
        .or_else(|| std::env::var("RUST_LOG").ok().and_then(|v| v.parse().ok()))
        .unwrap_or(log::LevelFilter::Info)
}

const DIRECTIVES: &[&str] = &[
    "cluster",
    "server",
    "id",
    "multicast",
    "unicast",
    "heartbeat",
    "rtt",
    "missed-heartbeats",
    "drift",
    "max-hold",
    "socket",
    "socket-mode",
    "state",
    "on-leader",
    "on-follower",
    "hook-timeout",
    "key-file",
    "key-file-next",
    "log-level",
    "check",
    "check-interval",
    "check-timeout",
    "check-fall",
    "check-rise",
    "preempt-delay",
    "metrics-listen",
    "group",
    "prefer",
    "balance",
];

/// The default `check-interval`.
pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// The default `check-timeout` (never above the interval: see `Check`).
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_millis(500);
/// The default `check-fall`.
pub const DEFAULT_CHECK_FALL: u32 = 3;
/// The default `check-rise`.
pub const DEFAULT_CHECK_RISE: u32 = 2;
/// `check-interval` bounds: a check every 10 ms at most, every hour at least.
const CHECK_INTERVAL_RANGE: (Duration, Duration) =
    (Duration::from_millis(10), Duration::from_secs(3600));
/// `check-fall` and `check-rise` are 1..=this.
pub const MAX_FALL_RISE: u32 = 100;
/// The most words (command and arguments) a `check` line may hold.
pub const MAX_CHECK_ARGS: usize = 64;
/// The longest `preempt-delay`.
const MAX_PREEMPT_DELAY: Duration = Duration::from_secs(86_400);

/// One server of the list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    /// 1..=255.
    pub id: u16,
    /// Where it receives datagrams (its unicast address), as written: a literal or a
    /// host name resolved at start (`Config::resolve`).
    pub addr: Address,
    /// A readable name for logs and status.
    pub name: Option<String>,
    /// Higher wins ties between equally up-to-date claimants.
    pub priority: u8,
    /// Votes and acknowledges, never leads.
    pub witness: bool,
    /// The line of its `server` directive (for errors about its address).
    pub line: usize,
}

/// The health check (SPEC section 13): a command run every `interval`, no shell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// The command and its arguments.
    pub argv: Vec<String>,
    /// The line of the `check` directive (for warnings).
    pub line: usize,
    /// Time between the starts of two checks.
    pub interval: Duration,
    /// A check still running after this is killed with its process group: a failure.
    /// At most `interval`, so checks never queue up behind a slow one.
    pub timeout: Duration,
    /// Consecutive failures that make a healthy server unhealthy.
    pub fall: u32,
    /// Consecutive successes that make an unhealthy server healthy.
    pub rise: u32,
}

/// How broadcasts travel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// LEAD, ELECT and ACK go to a multicast group; VOTE goes unicast.
    Multicast {
        /// The group and port, IPv4 or IPv6 (the cluster's family).
        group: SocketAddr,
        /// The interface name.
        interface: String,
        /// Multicast TTL (IPv6 hop limit), 0..=255; 0 keeps datagrams on this host.
        ttl: u32,
    },
    /// Every broadcast is sent to each other server's address.
    Unicast,
}

/// The name of the one group a file without `group` lines has (SPEC section 15).
pub const DEFAULT_GROUP: &str = "default";
/// The most election groups one cluster may have (SPEC section 15).
pub const MAX_GROUPS: usize = 64;

/// One election group (SPEC section 15): its own term, vote, lease, leader, hooks,
/// check, preference and drain, over the cluster's servers, transport and timers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// `[a-z][a-z0-9_-]{0,31}`; `default` when the file has no `group` line.
    pub name: String,
    /// The line of its `group` directive (0 for the implicit `default` group).
    pub line: usize,
    /// Its `prefer` list as written, if any.
    pub prefer: Option<Vec<u16>>,
    /// The preference order in force: `prefer`, or with `balance on` the server list
    /// rotated by this group's rank among the groups without `prefer` (`balanced_order`); empty when the
    /// servers' own `priority` values decide.
    pub order: Vec<u16>,
    /// Hook run on becoming leader of this group (argv); the cluster-wide one if the
    /// group sets none.
    pub on_leader: Option<Vec<String>>,
    /// Hook run on ceasing to lead this group (argv); the cluster-wide one if unset.
    pub on_follower: Option<Vec<String>>,
    /// This group's health check; the cluster-wide one if the group sets none.
    pub check: Option<Check>,
}

impl Group {
    /// The priority server `id` has in this group: from the preference order (first is
    /// highest, unlisted servers lowest), or the server's own `priority`.
    pub fn priority_of(&self, id: u16, server_priority: u8) -> u8 {
        if self.order.is_empty() {
            return server_priority;
        }
        match self.order.iter().position(|&o| o == id) {
            Some(p) => u8::try_from(self.order.len() - p).unwrap_or(u8::MAX),
            None => 0,
        }
    }
}

/// A parsed and validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The file it came from.
    pub path: PathBuf,
    /// The cluster name (part of the fingerprint).
    pub cluster: String,
    /// The server list, sorted by id.
    pub servers: Vec<Server>,
    /// This server's id.
    pub id: u16,
    /// Multicast or unicast.
    pub transport: Transport,
    /// The one address family of every server and the group (`addr` module).
    pub family: Family,
    /// HBT.
    pub heartbeat: Duration,
    /// RTT.
    pub rtt: Duration,
    /// K.
    pub missed_heartbeats: u32,
    /// rho, in millionths.
    pub drift_ppm: u32,
    /// The longest hold a LEAD may carry; longer ones are refused (SPEC section 8).
    pub max_hold: Duration,
    /// The control socket path ({id} expanded).
    pub socket: PathBuf,
    /// The control socket's file mode.
    pub socket_mode: u32,
    /// The state file path ({id} expanded).
    pub state: PathBuf,
    /// Hook run on becoming leader (argv), as set before the first `group` line: the
    /// default of every group (a group's own is in `groups`).
    pub on_leader: Option<Vec<String>>,
    /// Hook run on ceasing to be leader (argv), as set before the first `group` line.
    pub on_follower: Option<Vec<String>>,
    /// How long a hook may run before it is killed.
    pub hook_timeout: Duration,
    /// Log level, if the file sets one.
    pub log_level: Option<log::LevelFilter>,
    /// The shared secret that signs and verifies datagrams ({id} expanded).
    pub key_file: Option<PathBuf>,
    /// A second secret also accepted when receiving (for rotation).
    pub key_file_next: Option<PathBuf>,
    /// The health check, if any (SPEC section 13), as set before the first `group`
    /// line: the default of every group (a group's own is in `groups`).
    pub check: Option<Check>,
    /// `preempt-delay`: hand over to a higher-priority server fit this long (section 14).
    pub preempt_delay: Option<Duration>,
    /// The line of a `check-interval` or `check-timeout` given without a `check`
    /// (a warning: a shared file may set them for servers that have no check).
    pub unused_check_settings: Option<usize>,
    /// `metrics-listen`: where `GET /metrics` is served over HTTP (SPEC section 16).
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// The election groups, in file order; at least one (`default` without `group`
    /// lines). A group's index is what the wire carries.
    pub groups: Vec<Group>,
    /// `balance on`: groups without `prefer` get the server list rotated by their rank.
    pub balance: bool,
    /// The line of the `balance` directive, if the file has one (for warnings).
    pub balance_line: Option<usize>,
    /// (group index, line): a `check-interval` or `check-timeout` a group sets while
    /// it has no check, its own or inherited (a warning, like `unused_check_settings`).
    pub group_unused_check_settings: Vec<(usize, usize)>,
    /// The line of each cluster-wide directive the file gives (each is given once), so
    /// that checks made later (this host's, the daemon's) can name it.
    pub lines: BTreeMap<String, usize>,
}

/// A configuration error: file, line (when it is about one line) and problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file's name as given.
    pub file: String,
    /// The 1-based line, if the problem is on one line.
    pub line: Option<usize>,
    /// What is wrong.
    pub msg: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.file, self.msg),
            None => write!(f, "{}: {}", self.file, self.msg),
        }
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests;

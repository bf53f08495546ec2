//! The configuration file (SPEC section 9): parse, validate, fingerprint.
//!
//! One directive per line, `#` starts a comment. Every error names the file, the line
//! and the problem, with a suggestion for a misspelled directive. Election groups
//! (SPEC section 15, `group` lines) are parsed in `groups`.

mod cluster;
mod groups;
mod parse;

use parse::{Raw, expand, one, parse_line};
pub use parse::{closest, parse_duration, socket_in};

pub use groups::balanced_order;

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

impl Config {
    /// Reads and validates `path`; `id` overrides the file's `id` directive.
    pub fn load(path: &Path, id: Option<u16>) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let err = |msg: String| ConfigError {
            file: file.clone(),
            line: None,
            msg,
        };
        let meta = std::fs::metadata(path).map_err(|e| err(format!("cannot read: {e}")))?;
        if meta.len() > MAX_FILE_BYTES {
            return Err(err(format!("file is larger than {MAX_FILE_BYTES} bytes")));
        }
        let bytes = std::fs::read(path).map_err(|e| err(format!("cannot read: {e}")))?;
        let text = String::from_utf8(bytes).map_err(|_| err("file is not UTF-8".into()))?;
        Config::parse(&text, path, id)
    }

    /// Parses configuration text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path, id_override: Option<u16>) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let at = |line: Option<usize>, msg: String| ConfigError {
            file: file.clone(),
            line,
            msg,
        };
        let mut raw = Raw::default();
        // (section, directive) -> (line, as written): section 0 is the cluster-wide
        // part, n the n-th group. A directive other than `server` and `group` is given
        // once per section; `unicast` and `multicast` are one directive (issue 23).
        let mut given: BTreeMap<(usize, &str), (usize, &str)> = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let content = line.split('#').next().unwrap_or("");
            let words: Vec<&str> = content.split_whitespace().collect();
            let Some(&directive) = words.first() else {
                continue;
            };
            // A value's own error first; then the repeat.
            parse_line(&mut raw, i + 1, &words).map_err(|m| at(Some(i + 1), m))?;
            if !matches!(directive, "server" | "group") {
                let key = match directive {
                    "unicast" | "multicast" => "transport",
                    d => d,
                };
                // parse_line has taken a `group` line's section already.
                let section = raw.groups.len();
                if let Some(&(first, was)) = given.get(&(section, key)) {
                    let msg = if was == directive {
                        format!("'{directive}' is given twice (first on line {first}): keep one")
                    } else {
                        format!(
                            "'{directive}' and '{was}' (line {first}) together: choose one transport"
                        )
                    };
                    return Err(at(Some(i + 1), msg));
                }
                given.insert((section, key), (i + 1, directive));
            }
        }
        let lines: BTreeMap<String, usize> = given
            .iter()
            .filter(|((section, _), _)| *section == 0)
            .map(|(_, &(line, directive))| (directive.to_string(), line))
            .collect();
        // A rule about several directives names the last line among them it mentions.
        let line_in = |msg: &str| {
            msg.split(|c: char| !(c.is_ascii_lowercase() || c == '-'))
                .filter_map(|w| lines.get(w).copied())
                .max()
        };
        let check = raw.top.check(&at)?;
        let raw_preempt = raw.preempt_delay;
        let cluster = raw
            .cluster
            .ok_or_else(|| at(None, "missing 'cluster NAME'".into()))?;
        if raw.servers.is_empty() {
            return Err(at(None, "no 'server' lines".into()));
        }
        if raw.servers.iter().all(|(_, s)| s.witness) {
            return Err(at(
                Some(raw.servers[0].0),
                "every server is a witness: none can lead (a witness only votes); drop 'witness' from at least one".into(),
            ));
        }
        if raw.servers.len() > crate::node::MAX_SERVERS {
            return Err(at(
                None,
                format!("{} servers listed; at most 255", raw.servers.len()),
            ));
        }
        let mut servers: Vec<Server> = Vec::new();
        for (line, s) in raw.servers {
            if servers.iter().any(|o| o.id == s.id) {
                return Err(at(
                    Some(line),
                    format!("server id {} is listed twice", s.id),
                ));
            }
            if servers.iter().any(|o| o.addr == s.addr) {
                return Err(at(
                    Some(line),
                    format!("address {} is listed twice", s.addr),
                ));
            }
            if s.name.is_some() && servers.iter().any(|o| o.name == s.name) {
                return Err(at(
                    Some(line),
                    format!("name {} is listed twice", s.name.as_deref().unwrap_or("")),
                ));
            }
            servers.push(s);
        }
        servers.sort_by_key(|s| s.id);
        let id = match (id_override, raw.id) {
            (Some(id), _) => id,
            (None, Some((_, id))) => id,
            (None, None) => return Err(at(None, "missing 'id N' (or pass --id)".into())),
        };
        if !servers.iter().any(|s| s.id == id) {
            let line = raw.id.filter(|_| id_override.is_none()).map(|(l, _)| l);
            return Err(at(
                line,
                format!("this server's id {id} is not in the server list"),
            ));
        }
        let transport = raw.transport.ok_or_else(|| {
            at(
                None,
                "missing transport: add 'multicast GROUP:PORT interface NAME' or 'unicast'".into(),
            )
        })?;
        let family = family(&servers, &transport, raw.transport_line, raw.unicast_family)
            .map_err(|(l, m)| at(Some(l), m))?;
        let mut cfg = Config {
            path: path.to_path_buf(),
            cluster,
            servers,
            id,
            transport,
            family,
            heartbeat: raw.heartbeat.unwrap_or(Duration::from_secs(1)),
            rtt: raw.rtt.unwrap_or(Duration::from_millis(100)),
            missed_heartbeats: raw.k.unwrap_or(3),
            drift_ppm: raw.drift_ppm.unwrap_or(10_000),
            max_hold: raw.max_hold.unwrap_or(DEFAULT_MAX_HOLD),
            socket: expand(raw.socket.as_deref().unwrap_or(DEFAULT_SOCKET), id),
            socket_mode: raw.socket_mode.unwrap_or(0o660),
            state: expand(
                raw.state.as_deref().unwrap_or("/var/lib/electd/{id}.state"),
                id,
            ),
            on_leader: raw.top.on_leader.clone(),
            on_follower: raw.top.on_follower.clone(),
            hook_timeout: raw.hook_timeout.unwrap_or(Duration::from_secs(10)),
            log_level: raw.log_level,
            key_file: raw.key_file.as_deref().map(|p| expand(p, id)),
            key_file_next: raw.key_file_next.as_deref().map(|p| expand(p, id)),
            check,
            preempt_delay: None,
            // The top level's settings are the defaults of a group's own check too.
            unused_check_settings: raw.top.unused_check_settings(
                raw.top.check.is_some() || raw.groups.iter().any(|g| g.check.is_some()),
            ),
            metrics_listen: raw.metrics_listen,
            groups: Vec::new(),
            balance: raw.balance.is_some_and(|(_, on)| on),
            balance_line: raw.balance.map(|(l, _)| l),
            group_unused_check_settings: Vec::new(),
            lines: Default::default(),
        };
        cfg.groups = groups::groups(&raw.top, &raw.groups, &cfg.servers, cfg.balance, &at)?;
        for (i, (g, s)) in cfg.groups.iter().zip(&raw.groups).enumerate() {
            if let Some(l) = s.unused_check_settings(g.check.is_some()) {
                cfg.group_unused_check_settings.push((i, l));
            }
        }
        if cfg.key_file.is_none() && cfg.key_file_next.is_some() {
            let msg = "key-file-next needs key-file".to_string();
            return Err(at(line_in(&msg), msg));
        }
        cfg.node_config(0).validate().map_err(|e| {
            let msg = e.to_string();
            at(line_in(&msg), msg)
        })?;
        if cfg.hook_timeout.is_zero() {
            return Err(at(None, "hook-timeout must be positive".into()));
        }
        cfg.preempt_delay = preempt_delay(raw_preempt, &cfg, &at)?;
        cfg.lines = lines;
        Ok(cfg)
    }

    /// The line of cluster-wide directive `directive`, if the file gives it.
    pub fn line_of(&self, directive: &str) -> Option<usize> {
        self.lines.get(directive).copied()
    }

    /// `FILE:LINE` of `directive` (`FILE` alone when the file does not give it), to
    /// start a message about it.
    pub fn place(&self, directive: &str) -> String {
        match self.line_of(directive) {
            Some(l) => format!("{}:{l}", self.path.display()),
            None => self.path.display().to_string(),
        }
    }

    /// Things that do not stop the daemon but that an operator should know
    /// (`--check-config` prints them): a check command that cannot be run, check
    /// settings no check uses, a `balance` or `preempt-delay` that can never act.
    pub fn warnings(&self) -> Vec<String> {
        let file = self.path.display();
        let mut out = self.check_warnings();
        if let Some(l) = self.unused_check_settings {
            // Most likely the check line was removed by mistake, and the operator
            // believes this server is checked.
            out.push(format!(
                "{file}:{l}: check settings without a 'check' line: this server is not health-checked"
            ));
        }
        for &(g, l) in &self.group_unused_check_settings {
            out.push(format!(
                "{file}:{l}: check settings without a 'check' line in group '{}': this server is not health-checked in it",
                self.groups[g].name
            ));
        }
        if let (true, Some(l)) = (self.balance, self.balance_line) {
            if !self.has_groups() {
                out.push(format!(
                    "{file}:{l}: balance on has no effect without 'group' lines"
                ));
            } else if self.groups.iter().all(|g| g.prefer.is_some()) {
                out.push(format!(
                    "{file}:{l}: balance on has no effect: every group has a 'prefer' line"
                ));
            }
        }
        if self.preempt_delay.is_some() && self.groups.iter().all(|g| self.flat(g)) {
            out.push(if self.has_groups() {
                format!("{file}: preempt-delay has no effect: in every group, every server that may lead has the same priority")
            } else {
                format!("{file}: preempt-delay has no effect: every server that may lead has the same priority")
            });
        }
        out
    }

    /// True when every server that may lead has the same priority in group `g`:
    /// `preempt-delay` never acts there (SPEC section 14).
    fn flat(&self, g: &Group) -> bool {
        let mut prios = self
            .servers
            .iter()
            .filter(|s| !s.witness)
            .map(|s| g.priority_of(s.id, s.priority));
        let first = prios.next();
        prios.all(|p| Some(p) == first)
    }

    /// A check command that cannot be run, once per `check` line, naming the groups
    /// that run it when the file has groups; a top-level check every group overrides.
    fn check_warnings(&self) -> Vec<String> {
        let file = self.path.display();
        let mut out = Vec::new();
        let runs = |line: usize| {
            self.groups
                .iter()
                .filter(move |g| g.check.as_ref().is_some_and(|c| c.line == line))
        };
        let mut seen: Vec<usize> = Vec::new();
        for c in self.groups.iter().filter_map(|g| g.check.as_ref()) {
            if seen.contains(&c.line) {
                continue;
            }
            seen.push(c.line);
            let Err(why) = executable(&c.argv[0]) else {
                continue;
            };
            let whom = if !self.has_groups() {
                "(it never leads)".to_string()
            } else {
                let names: Vec<String> = runs(c.line).map(|g| format!("'{}'", g.name)).collect();
                match names.len() {
                    1 => format!("in group {} (it never leads it)", names[0]),
                    _ => format!("in groups {} (it never leads them)", names.join(", ")),
                }
            };
            out.push(format!(
                "{file}:{}: check command '{}' {why}: checks will fail and this server will stay unhealthy {whom} until it can run",
                c.line, c.argv[0]
            ));
        }
        if let Some(c) = self.check.as_ref().filter(|c| !seen.contains(&c.line)) {
            out.push(format!(
                "{file}:{}: every group sets its own 'check': this one is never run",
                c.line
            ));
        }
        out
    }
}

/// `preempt-delay`, at least heartbeat x missed-heartbeats: fitness is learnt from
/// ACKs and ELECTs, so a shorter delay would let one report of a server that just
/// came back move the leadership.
fn preempt_delay(
    raw: Option<(usize, Option<Duration>)>,
    cfg: &Config,
    at: &impl Fn(Option<usize>, String) -> ConfigError,
) -> Result<Option<Duration>, ConfigError> {
    let Some((line, Some(d))) = raw else {
        return Ok(None);
    };
    // Validated: heartbeat <= 1h and missed-heartbeats <= 100.
    let hold = cfg.heartbeat * cfg.missed_heartbeats;
    if d < hold {
        return Err(at(
            Some(line),
            format!(
                "preempt-delay {} ms must be at least heartbeat x missed-heartbeats ({} ms)",
                d.as_millis(),
                hold.as_millis()
            ),
        ));
    }
    Ok(Some(d))
}

/// The cluster's address family (SPEC section 16): the one of every literal server
/// address and the multicast group, or the one `unicast ipv4|ipv6` names; IPv4 for a
/// list of names alone. A mix is an error on the line that breaks the rule.
fn family(
    servers: &[Server],
    transport: &Transport,
    transport_line: usize,
    unicast_family: Option<Family>,
) -> Result<Family, (usize, String)> {
    let mut claims: Vec<Claim> = servers
        .iter()
        .filter_map(|s| {
            Some(Claim {
                line: s.line,
                what: format!("server {} {}", s.id, s.addr),
                family: s.addr.family()?,
            })
        })
        .collect();
    match (transport, unicast_family) {
        (Transport::Multicast { group, .. }, _) => claims.push(Claim {
            line: transport_line,
            what: format!("multicast group {group}"),
            family: Family::of(group.ip()),
        }),
        (Transport::Unicast, Some(f)) => claims.push(Claim {
            line: transport_line,
            what: format!("'unicast {}'", f.to_string().to_ascii_lowercase()),
            family: f,
        }),
        (Transport::Unicast, None) => {}
    }
    addr::cluster_family(claims)
}

/// Ok when `cmd` names an executable file (searched in PATH when it has no '/');
/// otherwise why not.
pub fn executable(cmd: &str) -> Result<(), String> {
    let candidates: Vec<PathBuf> = if cmd.contains('/') {
        vec![PathBuf::from(cmd)]
    } else {
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).map(|d| d.join(cmd)).collect())
            .unwrap_or_default()
    };
    let mut why = if cmd.contains('/') {
        "does not exist".to_string()
    } else {
        "is not found in PATH".to_string()
    };
    for p in candidates {
        match std::fs::metadata(&p) {
            Ok(m) if m.is_dir() => why = "is a directory".into(),
            Ok(_) => {
                let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else {
                    continue;
                };
                // SAFETY: access(2) on a NUL-terminated path we own.
                if unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 {
                    return Ok(());
                }
                why = "is not executable".into();
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => why = format!("cannot be read: {e}"),
        }
    }
    Err(why)
}

#[cfg(test)]
mod tests;

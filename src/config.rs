//! The configuration file (SPEC section 9): parse, validate, fingerprint.
//!
//! One directive per line, `#` starts a comment. Every error names the file, the line
//! and the problem, with a suggestion for a misspelled directive. Election groups
//! (SPEC section 15, `group` lines) are parsed in `groups`.

mod groups;

pub use groups::balanced_order;

use crate::addr::{self, Address, Claim, Family};
use crate::node::{NodeConfig, Sabotage, ServerInfo};
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

/// Parses a duration such as `250ms`, `1s`, `1.5s`, `2m` or `1h`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let scale: f64 = match unit {
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "" => return Err(format!("duration '{s}' needs a unit (ms, s, m or h)")),
        _ => {
            return Err(format!(
                "unknown unit '{unit}' in '{s}' (use ms, s, m or h)"
            ));
        }
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration"))?;
    let secs = v * scale;
    if !(0.0..=86_400.0 * 365.0).contains(&secs) {
        return Err(format!("duration '{s}' is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn suggest(word: &str) -> String {
    let best = DIRECTIVES
        .iter()
        .map(|d| (edit_distance(word, d), *d))
        .min();
    match best {
        Some((d, s)) if d <= 2 => format!(" (did you mean '{s}'?)"),
        _ => String::new(),
    }
}

/// Expands `{id}` in a path.
fn expand(path: &str, id: u16) -> PathBuf {
    PathBuf::from(path.replace("{id}", &id.to_string()))
}

#[derive(Default)]
struct Raw {
    cluster: Option<String>,
    servers: Vec<(usize, Server)>,
    id: Option<(usize, u16)>,
    transport: Option<Transport>,
    /// The line of the transport directive, and the family `unicast ipv4|ipv6` names.
    transport_line: usize,
    unicast_family: Option<Family>,
    heartbeat: Option<Duration>,
    rtt: Option<Duration>,
    k: Option<u32>,
    drift_ppm: Option<u32>,
    max_hold: Option<Duration>,
    socket: Option<String>,
    socket_mode: Option<u32>,
    state: Option<String>,
    hook_timeout: Option<Duration>,
    log_level: Option<log::LevelFilter>,
    key_file: Option<String>,
    key_file_next: Option<String>,
    /// Hooks and check before the first `group` line: the defaults of every group.
    top: groups::Section,
    /// One section per `group` line, in file order.
    groups: Vec<groups::Section>,
    /// `balance on|off` and its line.
    balance: Option<(usize, bool)>,
    preempt_delay: Option<(usize, Option<Duration>)>,
    metrics_listen: Option<std::net::SocketAddr>,
}

fn one<'a>(args: &[&'a str], what: &str) -> Result<&'a str, String> {
    match args {
        [v] => Ok(v),
        [] => Err(format!("missing {what}")),
        _ => Err(format!("expected one {what}, got {}", args.len())),
    }
}

fn parse_server(args: &[&str], line: usize) -> Result<Server, String> {
    let usage = "expected: server ID ADDRESS:PORT [name NAME] [priority P] [witness]";
    let (id, addr) = match args {
        [id, addr, ..] => (id, addr),
        _ => return Err(usage.into()),
    };
    let id: u16 = id
        .parse()
        .ok()
        .filter(|i| (1..=255).contains(i))
        .ok_or_else(|| format!("server id '{id}' is not in 1..=255"))?;
    let addr = addr::parse_address(addr)?;
    if addr.port() == 0 {
        return Err(format!("server {id} needs a port other than 0"));
    }
    let mut s = Server {
        id,
        addr,
        name: None,
        priority: 0,
        witness: false,
        line,
    };
    let mut rest = args[2..].iter();
    while let Some(&word) = rest.next() {
        match word {
            "name" => s.name = Some(rest.next().ok_or("'name' needs a value")?.to_string()),
            "priority" => {
                let p = rest.next().ok_or("'priority' needs a value")?;
                s.priority = p
                    .parse()
                    .map_err(|_| format!("priority '{p}' is not in 0..=255"))?;
            }
            "witness" => s.witness = true,
            other => return Err(format!("unknown server option '{other}'; {usage}")),
        }
    }
    Ok(s)
}

fn parse_multicast(args: &[&str]) -> Result<Transport, String> {
    let usage = "expected: multicast GROUP:PORT interface NAME [ttl N]";
    let group = addr::parse_group(args.first().ok_or(usage)?)?;
    let mut interface = None;
    let mut ttl = 1;
    let mut rest = args[1..].iter();
    while let Some(&word) = rest.next() {
        match word {
            "interface" => {
                interface = Some(rest.next().ok_or("'interface' needs a name")?.to_string())
            }
            "ttl" => {
                let t = rest.next().ok_or("'ttl' needs a value")?;
                // 0 is host-only: the datagrams loop back to this host's sockets.
                ttl = t
                    .parse()
                    .ok()
                    .filter(|t| (0..=255).contains(t))
                    .ok_or_else(|| format!("ttl '{t}' is not in 0..=255"))?;
            }
            other => return Err(format!("unknown multicast option '{other}'; {usage}")),
        }
    }
    let interface = interface.ok_or("multicast needs 'interface NAME'")?;
    Ok(Transport::Multicast {
        group,
        interface,
        ttl,
    })
}

fn parse_line(raw: &mut Raw, lineno: usize, words: &[&str]) -> Result<(), String> {
    let (directive, args) = (words[0], &words[1..]);
    if directive == "group" {
        return groups::start_group(&mut raw.groups, lineno, args);
    }
    if groups::SECTION_DIRECTIVES.contains(&directive) {
        let section = raw.groups.last_mut().unwrap_or(&mut raw.top);
        return section.parse_line(lineno, directive, args);
    }
    if !raw.groups.is_empty() && DIRECTIVES.contains(&directive) {
        // A group section ends only at the next `group` line: a cluster-wide directive
        // there would read as the group's own.
        return Err(format!(
            "'{directive}' is cluster-wide: put it before the first 'group' line"
        ));
    }
    match directive {
        "cluster" => raw.cluster = Some(one(args, "cluster name")?.to_string()),
        "server" => raw.servers.push((lineno, parse_server(args, lineno)?)),
        "id" => {
            let v = one(args, "id")?;
            let id = v
                .parse()
                .ok()
                .filter(|i| (1..=255).contains(i))
                .ok_or_else(|| format!("id '{v}' is not in 1..=255"))?;
            raw.id = Some((lineno, id));
        }
        "multicast" => {
            raw.transport = Some(parse_multicast(args)?);
            (raw.transport_line, raw.unicast_family) = (lineno, None);
        }
        "unicast" => {
            // The family matters only for a list of names alone (`addr` module).
            let family = match args {
                [] => None,
                ["ipv4"] => Some(Family::V4),
                ["ipv6"] => Some(Family::V6),
                _ => return Err("expected: unicast [ipv4|ipv6]".into()),
            };
            raw.transport = Some(Transport::Unicast);
            (raw.transport_line, raw.unicast_family) = (lineno, family);
        }
        "heartbeat" => raw.heartbeat = Some(parse_duration(one(args, "duration")?)?),
        "rtt" => raw.rtt = Some(parse_duration(one(args, "duration")?)?),
        "max-hold" => raw.max_hold = Some(parse_duration(one(args, "duration")?)?),
        "hook-timeout" => raw.hook_timeout = Some(parse_duration(one(args, "duration")?)?),
        "missed-heartbeats" => {
            let v = one(args, "count")?;
            raw.k = Some(v.parse().map_err(|_| format!("'{v}' is not a count"))?);
        }
        "drift" => {
            let v = one(args, "fraction")?;
            let d: f64 = v.parse().map_err(|_| format!("'{v}' is not a number"))?;
            if !(0.0..0.1).contains(&d) {
                return Err(format!("drift {v} must be in [0, 0.1)"));
            }
            raw.drift_ppm = Some((d * 1e6).round() as u32);
        }
        "socket" => raw.socket = Some(one(args, "path")?.to_string()),
        "state" => raw.state = Some(one(args, "path")?.to_string()),
        "socket-mode" => {
            let v = one(args, "octal mode")?;
            let m = u32::from_str_radix(v, 8)
                .ok()
                .filter(|m| *m <= 0o777)
                .ok_or_else(|| format!("'{v}' is not an octal mode like 0660"))?;
            raw.socket_mode = Some(m);
        }
        "log-level" => {
            let v = one(args, "level")?;
            raw.log_level = Some(v.parse().map_err(|_| {
                format!("unknown log level '{v}' (error, warn, info, debug, trace)")
            })?);
        }
        "preempt-delay" => {
            let v = one(args, "duration or 'off'")?;
            let d = if v == "off" {
                None
            } else {
                Some(parse_duration(v)?)
            };
            if d.is_some_and(|d| d > MAX_PREEMPT_DELAY) {
                return Err("preempt-delay must be at most 24h".into());
            }
            raw.preempt_delay = Some((lineno, d));
        }
        "metrics-listen" => {
            raw.metrics_listen = crate::http::parse_listen(one(args, "address:port or 'off'")?)?
        }
        "balance" => {
            let on = match one(args, "'on' or 'off'")? {
                "on" => true,
                "off" => false,
                v => return Err(format!("expected: balance on|off, not '{v}'")),
            };
            raw.balance = Some((lineno, on));
        }
        "key-file" => raw.key_file = Some(one(args, "path")?.to_string()),
        "key-file-next" => raw.key_file_next = Some(one(args, "path")?.to_string()),
        other => return Err(format!("unknown directive '{other}'{}", suggest(other))),
    }
    Ok(())
}

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
        for (i, line) in text.lines().enumerate() {
            let content = line.split('#').next().unwrap_or("");
            let words: Vec<&str> = content.split_whitespace().collect();
            if words.is_empty() {
                continue;
            }
            parse_line(&mut raw, i + 1, &words).map_err(|m| at(Some(i + 1), m))?;
        }
        let check = raw.top.check(&at)?;
        let raw_preempt = raw.preempt_delay;
        let cluster = raw
            .cluster
            .ok_or_else(|| at(None, "missing 'cluster NAME'".into()))?;
        if raw.servers.is_empty() {
            return Err(at(None, "no 'server' lines".into()));
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
        };
        cfg.groups = groups::groups(&raw.top, &raw.groups, &cfg.servers, cfg.balance, &at)?;
        for (i, (g, s)) in cfg.groups.iter().zip(&raw.groups).enumerate() {
            if let Some(l) = s.unused_check_settings(g.check.is_some()) {
                cfg.group_unused_check_settings.push((i, l));
            }
        }
        if cfg.key_file.is_none() && cfg.key_file_next.is_some() {
            return Err(at(None, "key-file-next needs key-file".into()));
        }
        cfg.node_config(0)
            .validate()
            .map_err(|e| at(None, e.to_string()))?;
        if cfg.hook_timeout.is_zero() {
            return Err(at(None, "hook-timeout must be positive".into()));
        }
        cfg.preempt_delay = preempt_delay(raw_preempt, &cfg, &at)?;
        Ok(cfg)
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

    /// This server's entry in the list.
    pub fn me(&self) -> &Server {
        self.servers
            .iter()
            .find(|s| s.id == self.id)
            .expect("validated: id is listed")
    }

    /// The entry of server `id`.
    pub fn server(&self, id: u16) -> Option<&Server> {
        self.servers.iter().find(|s| s.id == id)
    }

    /// Every server's address (by id), host names resolved to the cluster's family.
    /// Blocking (getaddrinfo, at most `addr::RESOLVE_TIMEOUT`): call it at start and in
    /// `--check-config`, never in the event loop. Errors name the server's line.
    pub fn resolve(&self) -> Result<Vec<(u16, SocketAddr)>, ConfigError> {
        let at = |line: usize, msg: String| ConfigError {
            file: self.path.display().to_string(),
            line: Some(line),
            msg,
        };
        // Each distinct name once; `asks[i]` is server i's question, if it has one.
        let mut names: Vec<(String, u16)> = Vec::new();
        let mut asks: Vec<usize> = Vec::new();
        for s in &self.servers {
            if let Address::Name(n, p) = &s.addr {
                let q = (n.clone(), *p);
                asks.push(names.iter().position(|x| *x == q).unwrap_or(names.len()));
                if !names.contains(&q) {
                    names.push(q);
                }
            } else {
                asks.push(usize::MAX);
            }
        }
        let answers = addr::resolve_names(&names, addr::RESOLVE_TIMEOUT);
        let mut out: Vec<(u16, SocketAddr)> = Vec::with_capacity(self.servers.len());
        for (s, &ask) in self.servers.iter().zip(&asks) {
            let a = match &s.addr {
                Address::Ip(a) => *a,
                Address::Name(n, _) => {
                    let got: &[SocketAddr] = match answers.get(ask) {
                        Some(Ok(got)) => got,
                        Some(Err(e)) => {
                            return Err(at(
                                s.line,
                                format!("server {}: cannot resolve '{n}': {e}", s.id),
                            ));
                        }
                        None => &[],
                    };
                    addr::pick(got, self.family).ok_or_else(|| {
                        let ips: Vec<String> = got.iter().map(|a| a.ip().to_string()).collect();
                        at(
                            s.line,
                            format!(
                                "server {}: '{n}' has no {} address (it resolves to {}); the cluster is {} (one address family per cluster)",
                                s.id,
                                self.family,
                                ips.join(", "),
                                self.family
                            ),
                        )
                    })?
                }
            };
            if let Some((other, _)) = out.iter().find(|(_, o)| *o == a) {
                return Err(at(
                    s.line,
                    format!(
                        "server {} {} is {a}, the address of server {other}",
                        s.id, s.addr
                    ),
                ));
            }
            out.push((s.id, a));
        }
        Ok(out)
    }

    /// CRC-32 of the canonical cluster name and server list (ids, addresses, witness marks).
    /// Textual (SPEC section 16): a host name counts as written (lowercased), never as
    /// what it resolves to, and literals in their canonical form, so an IPv4 list has
    /// the fingerprint it always had. An IPv6 cluster adds its family: a list of names
    /// means other addresses under `unicast ipv6`.
    pub fn fingerprint(&self) -> u32 {
        let mut canon = format!("electd-cluster-v1\ncluster {}\n", self.cluster);
        if self.family == Family::V6 {
            canon.push_str("family ipv6\n");
        }
        for s in &self.servers {
            canon.push_str(&format!(
                "server {} {}{}\n",
                s.id,
                s.addr,
                if s.witness { " witness" } else { "" }
            ));
        }
        // The wire names a group by its index: servers must agree on the list. Without
        // `group` lines nothing is added, so such a cluster keeps its fingerprint.
        if self.has_groups() {
            for g in &self.groups {
                canon.push_str(&format!("group {}\n", g.name));
            }
        }
        crc32fast::hash(canon.as_bytes())
    }

    /// The index of the group called `name`.
    pub fn group_index(&self, name: &str) -> Option<usize> {
        self.groups.iter().position(|g| g.name == name)
    }

    /// True when the file has `group` lines (more than the implicit `default`).
    pub fn has_groups(&self) -> bool {
        self.groups.first().is_some_and(|g| g.line != 0)
    }

    /// One line about group `g` for `--check-config`: its name and line, its
    /// preference order and where it comes from, its check and its hooks.
    pub fn group_summary(&self, g: usize) -> Option<String> {
        let group = self.groups.get(g)?;
        let ids = |v: &[u16]| v.iter().map(u16::to_string).collect::<Vec<_>>().join(" ");
        let order = match (&group.prefer, group.order.is_empty()) {
            (Some(p), _) => format!("order {} (prefer)", ids(p)),
            (None, false) => format!("order {} (balance)", ids(&group.order)),
            (None, true) => "order by server priority".to_string(),
        };
        let check = match &group.check {
            Some(c) if c.line < group.line => format!("check (line {}, inherited)", c.line),
            Some(c) => format!("check (line {})", c.line),
            None => "no check".to_string(),
        };
        let hooks: Vec<&str> = [
            ("on-leader", group.on_leader.is_some()),
            ("on-follower", group.on_follower.is_some()),
        ]
        .iter()
        .filter(|(_, set)| *set)
        .map(|(h, _)| *h)
        .collect();
        let hooks = if hooks.is_empty() {
            "no hooks".to_string()
        } else {
            hooks.join(", ")
        };
        Some(format!(
            "group {} (line {}): {order}; {check}; {hooks}",
            group.name, group.line
        ))
    }

    /// The core's view of group `g` (an index into `groups`): the cluster with this
    /// group's priorities.
    pub fn group_node_config(&self, g: usize, seed: u64) -> NodeConfig {
        let mut nc = self.node_config(seed);
        if let Some(group) = self.groups.get(g) {
            for s in &mut nc.servers {
                s.priority = group.priority_of(s.id, s.priority);
            }
        }
        nc
    }

    /// The core's view of this configuration (its first group's priorities are the
    /// servers' own: see `group_node_config`).
    pub fn node_config(&self, seed: u64) -> NodeConfig {
        NodeConfig {
            id: self.id,
            servers: self
                .servers
                .iter()
                .map(|s| ServerInfo {
                    id: s.id,
                    priority: s.priority,
                    witness: s.witness,
                })
                .collect(),
            fingerprint: self.fingerprint(),
            heartbeat: self.heartbeat,
            rtt: self.rtt,
            missed_heartbeats: self.missed_heartbeats,
            preempt_delay: self.preempt_delay,
            drift_ppm: self.drift_ppm,
            max_hold: self.max_hold,
            seed,
            strict: false,
            sabotage: Sabotage::default(),
        }
    }

    /// The name of server `id` (its `name`, or its id).
    pub fn name_of(&self, id: u16) -> String {
        self.server(id)
            .and_then(|s| s.name.clone())
            .unwrap_or_else(|| id.to_string())
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
mod tests {
    use super::*;

    const GOOD: &str = "\
cluster orders-eu                      # name
server 1 10.0.1.11:7400 name a1
server 2 10.0.2.12:7400 name b1 priority 10
server 3 10.0.3.13:7400 name c1 witness
id 1
multicast 239.255.47.1:7400 interface eth0 ttl 1
heartbeat 1s
rtt 100ms
missed-heartbeats 3
drift 0.01
socket /run/electd/electd-{id}.sock
socket-mode 0660
state /var/lib/electd/{id}.state
hook-timeout 10s
";

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("electd.conf"), None)
    }

    #[test]
    fn the_spec_example_parses() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.servers.len(), 3);
        assert_eq!(c.servers[1].priority, 10);
        assert!(c.servers[2].witness);
        assert_eq!(c.state, PathBuf::from("/var/lib/electd/1.state"));
        assert_eq!(c.socket, PathBuf::from("/run/electd/electd-1.sock"));
        assert_eq!(c.socket_mode, 0o660);
        assert!(matches!(c.transport, Transport::Multicast { ttl: 1, .. }));
        let o = Config::parse(GOOD, Path::new("x"), Some(2)).unwrap();
        assert_eq!(
            (o.id, o.state.clone()),
            (2, PathBuf::from("/var/lib/electd/2.state"))
        );
        assert_eq!(
            o.fingerprint(),
            c.fingerprint(),
            "the id is not part of the cluster"
        );
    }

    #[test]
    fn fingerprint_covers_name_ids_addresses_and_witness_marks() {
        let base = parse(GOOD).unwrap().fingerprint();
        for (from, to) in [
            ("orders-eu", "orders-us"),
            ("10.0.2.12:7400", "10.0.2.12:7401"),
            (
                "server 3 10.0.3.13:7400 name c1 witness",
                "server 3 10.0.3.13:7400 name c1",
            ),
            ("server 3 ", "server 4 "),
        ] {
            assert_ne!(
                parse(&GOOD.replace(from, to)).unwrap().fingerprint(),
                base,
                "{from} -> {to}"
            );
        }
        let renamed = parse(&GOOD.replace("name b1 priority 10", "name bee priority 3")).unwrap();
        assert_eq!(
            renamed.fingerprint(),
            base,
            "names and priorities may differ per server"
        );
    }

    #[test]
    fn errors_name_file_line_and_problem() {
        let cases = [
            (
                "hearbeat 1s",
                "electd.conf:15: unknown directive 'hearbeat' (did you mean 'heartbeat'?)",
            ),
            (
                "heartbeat 1",
                "electd.conf:15: duration '1' needs a unit (ms, s, m or h)",
            ),
            (
                "rtt 5parsecs",
                "electd.conf:15: unknown unit 'parsecs' in '5parsecs' (use ms, s, m or h)",
            ),
            (
                "server 1 10.0.9.9:1 name z",
                "electd.conf:15: server id 1 is listed twice",
            ),
            (
                "server 0 10.0.9.9:1",
                "electd.conf:15: server id '0' is not in 1..=255",
            ),
            (
                "server 9 nowhere",
                "electd.conf:15: 'nowhere' needs a port: ADDRESS:PORT, [IPV6-ADDRESS]:PORT or NAME:PORT",
            ),
            (
                "multicast 10.0.0.1:7400 interface eth0",
                "electd.conf:15: 10.0.0.1 is not a multicast address",
            ),
            ("drift 0.5", "electd.conf:15: drift 0.5 must be in [0, 0.1)"),
            (
                "socket-mode 999",
                "electd.conf:15: '999' is not an octal mode like 0660",
            ),
            ("rtt 2s", "electd.conf: rtt must be shorter than heartbeat"),
            (
                "max-hold 2s",
                "electd.conf: heartbeat * missed-heartbeats must not exceed max-hold",
            ),
            (
                "max-hold 2000h",
                "electd.conf: max-hold must be at most 49 days",
            ),
            (
                "id 9",
                "electd.conf:15: this server's id 9 is not in the server list",
            ),
        ];
        for (line, want) in cases {
            let text = format!("{GOOD}{line}\n");
            assert_eq!(parse(&text).unwrap_err().to_string(), want, "{line}");
        }
        assert_eq!(
            parse("server 1 1.2.3.4:5\nid 1\nunicast\n")
                .unwrap_err()
                .to_string(),
            "electd.conf: missing 'cluster NAME'"
        );
        assert!(
            parse("cluster x\nserver 1 1.2.3.4:5\nid 1\n")
                .unwrap_err()
                .msg
                .starts_with("missing transport")
        );
    }

    #[test]
    fn check_and_preempt_directives() {
        let c = parse(GOOD).unwrap();
        assert_eq!((c.check.clone(), c.preempt_delay), (None, None));
        let c = parse(&format!(
            "{GOOD}check /usr/local/bin/healthy --fast  -x\npreempt-delay 30s\n"
        ))
        .unwrap();
        let k = c.check.clone().unwrap();
        assert_eq!(k.argv, ["/usr/local/bin/healthy", "--fast", "-x"]);
        assert_eq!(k.line, 15);
        assert_eq!(
            (k.interval, k.timeout, k.fall, k.rise),
            (Duration::from_secs(1), Duration::from_millis(500), 3, 2)
        );
        assert_eq!(c.preempt_delay, Some(Duration::from_secs(30)));
        assert_eq!(
            c.node_config(0).preempt_delay,
            Some(Duration::from_secs(30))
        );
        // A short interval shortens the default timeout with it.
        let c = parse(&format!(
            "{GOOD}check x\ncheck-interval 100ms\ncheck-fall 2\ncheck-rise 5\n"
        ))
        .unwrap()
        .check
        .unwrap();
        assert_eq!(
            (c.interval, c.timeout, c.fall, c.rise),
            (Duration::from_millis(100), Duration::from_millis(100), 2, 5)
        );
        assert_eq!(
            parse(&format!("{GOOD}preempt-delay off\n"))
                .unwrap()
                .preempt_delay,
            None
        );
        // Settings without a check are a warning; a second check line is refused.
        let c = parse(&format!("{GOOD}check-interval 2s\n")).unwrap();
        assert!(c.check.is_none());
        assert!(
            c.warnings().iter().any(|w| w.ends_with(
                ":15: check settings without a 'check' line: this server is not health-checked"
            )),
            "{:?}",
            c.warnings()
        );
        assert_eq!(
            parse(&format!("{GOOD}check a\ncheck b\n"))
                .unwrap_err()
                .to_string(),
            "electd.conf:16: 'check' is given twice (first on line 15); run both checks from one script"
        );
    }

    #[test]
    fn check_and_preempt_errors_name_the_line() {
        let cases = [
            ("check", "electd.conf:15: 'check' needs a command"),
            (
                "check-interval 5ms",
                "electd.conf:15: check-interval must be between 10ms and 1h, not 5ms",
            ),
            (
                "check-interval 2h",
                "electd.conf:15: check-interval must be between 10ms and 1h, not 7200s",
            ),
            ("check-interval", "electd.conf:15: missing duration"),
            (
                "check-timeout 0ms",
                "electd.conf:15: check-timeout must be at least 1ms",
            ),
            (
                "check x\ncheck-timeout 2s",
                "electd.conf:16: check-timeout 2000 ms must not exceed check-interval 1000 ms (checks run one at a time)",
            ),
            (
                "check-fall 0",
                "electd.conf:15: check-fall '0' is not in 1..=100",
            ),
            (
                "check-rise 101",
                "electd.conf:15: check-rise '101' is not in 1..=100",
            ),
            (
                "check-rise x",
                "electd.conf:15: check-rise 'x' is not in 1..=100",
            ),
            (
                "preempt-delay 1s",
                "electd.conf:15: preempt-delay 1000 ms must be at least heartbeat x missed-heartbeats (3000 ms)",
            ),
            (
                "preempt-delay 25h",
                "electd.conf:15: preempt-delay must be at most 24h",
            ),
            (
                "preempt-delay soon",
                "electd.conf:15: unknown unit 'soon' in 'soon' (use ms, s, m or h)",
            ),
            (
                "chek /bin/true",
                "electd.conf:15: unknown directive 'chek' (did you mean 'check'?)",
            ),
        ];
        for (line, want) in cases {
            let text = format!("{GOOD}{line}\n");
            assert_eq!(parse(&text).unwrap_err().to_string(), want, "{line}");
        }
        let long = format!("{GOOD}check {}\n", "a ".repeat(MAX_CHECK_ARGS + 1));
        assert!(parse(&long).unwrap_err().msg.contains("at most 64"));
    }

    #[test]
    fn warnings_for_a_check_that_cannot_run() {
        let c = parse(&format!("{GOOD}check /nonexistent/electd-check\n")).unwrap();
        let w = c.warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with(
                "electd.conf:15: check command '/nonexistent/electd-check' does not exist"
            ),
            "{w:?}"
        );
        assert!(
            parse(&format!("{GOOD}check /bin/sh -c true\n"))
                .unwrap()
                .warnings()
                .is_empty()
        );
        assert!(
            parse(&format!("{GOOD}check sh -c true\n"))
                .unwrap()
                .warnings()
                .is_empty()
        );
        let plain = std::env::temp_dir().join(format!("electd-check-{}", std::process::id()));
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        let w = parse(&format!("{GOOD}check {}\n", plain.display()))
            .unwrap()
            .warnings();
        let _ = std::fs::remove_file(&plain);
        assert!(w[0].contains("is not executable"), "{w:?}");
        assert!(executable("/").unwrap_err().contains("directory"));
        assert!(
            executable("no-such-electd-check")
                .unwrap_err()
                .contains("PATH")
        );
        // Same priority everywhere: preempt-delay can never act.
        let same = GOOD.replace(" priority 10", "");
        let w = parse(&format!("{same}preempt-delay 1m\n"))
            .unwrap()
            .warnings();
        assert!(w[0].contains("preempt-delay has no effect"), "{w:?}");
        assert!(
            parse(&format!("{GOOD}preempt-delay 1m\n"))
                .unwrap()
                .warnings()
                .is_empty()
        );
    }

    /// Issue 13: IPv6 and host names, one family per cluster, ttl 0.
    #[test]
    fn ipv6_names_and_one_family_per_cluster() {
        let v6 = "cluster c\nserver 1 [2001:db8::11]:7400\nserver 2 [2001:db8::12]:7400 name b\nserver 3 node3.example.net:7400\nid 1\n";
        let c = parse(&format!(
            "{v6}multicast [ff12::4711]:7400 interface eth0 ttl 0\n"
        ))
        .unwrap();
        assert_eq!(c.family, Family::V6);
        assert_eq!(
            c.transport,
            Transport::Multicast {
                group: "[ff12::4711]:7400".parse().unwrap(),
                interface: "eth0".into(),
                ttl: 0
            }
        );
        assert_eq!(c.servers[1].addr.to_string(), "[2001:db8::12]:7400");
        assert_eq!(
            c.servers[2].addr,
            Address::Name("node3.example.net".into(), 7400)
        );
        assert_eq!(c.servers[2].line, 4);
        assert_eq!(parse(&format!("{v6}unicast\n")).unwrap().family, Family::V6);
        // Names alone: IPv4 unless 'unicast ipv6' says otherwise.
        let names = "cluster c\nserver 1 a.example:1\nserver 2 b.example:1\nid 1\n";
        for (t, f) in [
            ("unicast", Family::V4),
            ("unicast ipv4", Family::V4),
            ("unicast ipv6", Family::V6),
            ("multicast [ff15::1]:7 interface eth0", Family::V6),
            ("multicast 239.1.1.1:7 interface eth0 ttl 255", Family::V4),
        ] {
            assert_eq!(parse(&format!("{names}{t}\n")).unwrap().family, f, "{t}");
        }
        let v4 = "cluster c\nserver 1 10.0.0.1:7400\nserver 2 n2.example:7400\nid 1\n";
        for (text, want) in [
            (
                format!("{v4}server 3 [2001:db8::3]:7400\nunicast\n"),
                "electd.conf:5: server 3 [2001:db8::3]:7400 is IPv6 but server 1 10.0.0.1:7400 (line 2) is IPv4: one address family per cluster (every server and the multicast group)",
            ),
            (
                format!("{v4}multicast [ff12::1]:7400 interface eth0\n"),
                "electd.conf:5: multicast group [ff12::1]:7400 is IPv6 but server 1 10.0.0.1:7400 (line 2) is IPv4: one address family per cluster (every server and the multicast group)",
            ),
            (
                format!("{v4}unicast ipv6\n"),
                "electd.conf:5: 'unicast ipv6' is IPv6 but server 1 10.0.0.1:7400 (line 2) is IPv4: one address family per cluster (every server and the multicast group)",
            ),
            (
                format!("{v4}unicast ipv5\n"),
                "electd.conf:5: expected: unicast [ipv4|ipv6]",
            ),
            (
                format!("{v4}server 3 [fe80::3]:7400\nunicast\n"),
                "electd.conf:5: fe80::3 is link-local (fe80::/10): its scope is an interface name that differs per host; use a global or unique-local (fd00::/8) address",
            ),
            (
                format!("{v4}server 3 [fe80::3%eth0]:7400\nunicast\n"),
                "electd.conf:5: '[fe80::3%eth0]:7400': zones ('%eth0') are not supported: the list must be the same text on every server; use a global or unique-local (fd00::/8) address",
            ),
            (
                format!("{v4}server 3 N2.Example:7400\nunicast\n"),
                "electd.conf:5: address n2.example:7400 is listed twice",
            ),
            (
                format!("{v4}multicast 239.1.1.1:7400 interface eth0 ttl 256\n"),
                "electd.conf:5: ttl '256' is not in 0..=255",
            ),
        ] {
            assert_eq!(parse(&text).unwrap_err().to_string(), want);
        }
        assert_eq!(
            parse(&format!(
                "{v6}server 4 [2001:0DB8::12]:1\nserver 5 [2001:db8::12]:7400\nunicast\n"
            ))
            .unwrap_err()
            .to_string(),
            "electd.conf:7: address [2001:db8::12]:7400 is listed twice"
        );
        let c = parse(&format!(
            "{v4}multicast 239.1.1.1:7400 interface eth0 ttl 0\n"
        ))
        .unwrap();
        assert!(matches!(c.transport, Transport::Multicast { ttl: 0, .. }));
    }

    /// The fingerprint is the text of the list (SPEC section 16): an IPv4 list keeps
    /// the value it had before names and IPv6 existed; a name is not its address.
    #[test]
    fn fingerprint_is_the_text_of_the_list() {
        // The value electd computed for this list before issue 13: a rolling upgrade
        // of an IPv4 cluster keeps talking.
        assert_eq!(parse(GOOD).unwrap().fingerprint(), 0xdb28_d655);
        let base = "cluster c\nserver 1 127.0.0.1:7400\nserver 2 localhost:7401\nid 1\nunicast\n";
        let fp = |t: &str| parse(t).unwrap().fingerprint();
        assert_ne!(
            fp(base),
            fp(&base.replace("localhost", "127.0.0.1")),
            "a name counts as written, not as what it resolves to"
        );
        assert_eq!(fp(base), fp(&base.replace("localhost", "LocalHost")));
        assert_ne!(fp(base), fp(&base.replace("localhost", "localhost.")));
        let v6 =
            "cluster c\nserver 1 [2001:db8::1]:7400\nserver 2 [2001:db8::2]:7400\nid 1\nunicast\n";
        assert_eq!(fp(v6), fp(&v6.replace("2001:db8::1", "2001:0db8:0:0::1")));
        let names = "cluster c\nserver 1 a.example:1\nserver 2 b.example:1\nid 1\nunicast\n";
        assert_ne!(
            fp(names),
            fp(&names.replace("unicast", "unicast ipv6")),
            "the same names in another family are other addresses"
        );
        assert_eq!(fp(names), fp(&names.replace("unicast", "unicast ipv4")));
    }

    #[test]
    fn names_resolve_once_to_the_clusters_family() {
        let c =
            parse("cluster c\nserver 1 localhost:7400\nserver 2 127.0.0.2:7400\nid 1\nunicast\n")
                .unwrap();
        assert_eq!(
            c.resolve().unwrap(),
            vec![
                (1, "127.0.0.1:7400".parse().unwrap()),
                (2, "127.0.0.2:7400".parse().unwrap())
            ]
        );
        let c = parse("cluster c\nserver 1 localhost:7400\nserver 2 no-such-host.invalid:7400\nid 1\nunicast\n")
            .unwrap();
        let e = c.resolve().unwrap_err().to_string();
        assert!(
            e.starts_with("electd.conf:3: server 2: cannot resolve 'no-such-host.invalid': "),
            "{e}"
        );
        let c =
            parse("cluster c\nserver 1 127.0.0.1:7400\nserver 2 localhost:7400\nid 1\nunicast\n")
                .unwrap();
        assert_eq!(
            c.resolve().unwrap_err().to_string(),
            "electd.conf:3: server 2 localhost:7400 is 127.0.0.1:7400, the address of server 1"
        );
        // An IPv6 cluster takes localhost's IPv6 address, or says it has none (hosts
        // files differ: Debian lists ::1 as localhost, some containers do not).
        let c = parse("cluster c\nserver 1 [::1]:7400\nserver 2 localhost:7401\nid 1\nunicast\n")
            .unwrap();
        match c.resolve() {
            Ok(a) => assert_eq!(a[1], (2, "[::1]:7401".parse().unwrap())),
            Err(e) => assert!(
                e.to_string().starts_with(
                    "electd.conf:3: server 2: 'localhost' has no IPv6 address (it resolves to 127.0.0.1"
                ),
                "{e}"
            ),
        }
    }

    /// Three servers that may all lead, for election groups (SPEC section 15).
    const THREE: &str = "\
cluster g
server 1 127.0.0.1:7411
server 2 127.0.0.1:7412 priority 5
server 3 127.0.0.1:7413
id 1
unicast
";

    /// `THREE` with `n` groups g0, g1, ... after `top`, each holding `body`.
    fn with_groups(top: &str, n: usize, body: &str) -> String {
        let groups: String = (0..n).map(|i| format!("group g{i}\n{body}")).collect();
        format!("{THREE}{top}{groups}")
    }

    fn orders(c: &Config) -> Vec<Vec<u16>> {
        c.groups.iter().map(|g| g.order.clone()).collect()
    }

    /// SPEC section 15: without `group` lines, one `default` group and nothing changes.
    #[test]
    fn no_group_lines_make_one_default_group() {
        let c = parse(GOOD).unwrap();
        assert_eq!(
            c.groups,
            [Group {
                name: "default".into(),
                line: 0,
                prefer: None,
                order: vec![],
                on_leader: None,
                on_follower: None,
                check: None,
            }]
        );
        assert!(!c.has_groups() && !c.balance);
        assert_eq!(
            c.fingerprint(),
            0xdb28_d655,
            "the fingerprint of before groups"
        );
        assert_eq!(c.group_index("default"), Some(0));
        let prios = |nc: NodeConfig| -> Vec<u8> { nc.servers.iter().map(|s| s.priority).collect() };
        assert_eq!(prios(c.group_node_config(0, 7)), [0, 10, 0]);
        // The default group runs the file's hooks and check.
        let c = parse(&format!(
            "{GOOD}on-leader /bin/start a\non-follower /bin/stop\ncheck /bin/true\ncheck-fall 5\n"
        ))
        .unwrap();
        let g = &c.groups[0];
        assert_eq!(
            (&g.on_leader, &g.on_follower, &g.check),
            (&c.on_leader, &c.on_follower, &c.check)
        );
        assert_eq!(g.check.as_ref().unwrap().fall, 5);
        assert_eq!(c.fingerprint(), 0xdb28_d655);
        // `balance on` alone leaves the servers' priorities in charge, and says so.
        let c = parse(&format!("{GOOD}balance on\n")).unwrap();
        assert!(c.groups[0].order.is_empty());
        assert_eq!(c.fingerprint(), 0xdb28_d655);
        assert_eq!(
            c.warnings(),
            ["electd.conf:15: balance on has no effect without 'group' lines"]
        );
    }

    /// SPEC section 15: the k-th group without `prefer` gets the list rotated by k; past
    /// the first S groups the rest of the order turns too, so a server's groups fall
    /// back to different servers.
    #[test]
    fn balance_rotates_the_server_list_over_the_groups() {
        let c = parse(&with_groups("balance on\n", 6, "")).unwrap();
        assert!(c.has_groups() && c.balance);
        assert_eq!(
            orders(&c),
            [
                [1, 2, 3],
                [2, 3, 1],
                [3, 1, 2],
                [1, 3, 2],
                [2, 1, 3],
                [3, 2, 1]
            ]
        );
        for id in 1..=3 {
            let mine: Vec<&Group> = c.groups.iter().filter(|g| g.order[0] == id).collect();
            assert_eq!(mine.len(), 2, "server {id} leads 6/3 groups");
            assert_ne!(
                mine[0].order[1], mine[1].order[1],
                "server {id}'s groups fall back to different servers"
            );
        }
        // 5 servers, 20 groups: first choices 4 each; each server's second choices
        // cover all four others.
        for (s, g) in [(5u16, 20usize), (4, 12), (2, 4)] {
            let leaders: Vec<u16> = (1..=s).collect();
            let orders: Vec<Vec<u16>> = (0..g)
                .map(|k| groups::balanced_order(&leaders, k))
                .collect();
            for id in 1..=s {
                let mine: Vec<&Vec<u16>> = orders.iter().filter(|o| o[0] == id).collect();
                assert_eq!(mine.len(), g / usize::from(s));
                let seconds: std::collections::BTreeSet<u16> = mine.iter().map(|o| o[1]).collect();
                assert_eq!(
                    seconds.len(),
                    mine.len().min(usize::from(s) - 1),
                    "{s} servers, {g} groups, server {id}: {orders:?}"
                );
                for o in &mine {
                    let mut sorted = o.to_vec();
                    sorted.sort();
                    assert_eq!(sorted, leaders, "an order lists every server once");
                }
            }
        }
        // Groups with `prefer` keep it and do not count; witnesses are never in an order.
        let text = THREE
            .replace("7412 priority 5", "7412 witness")
            .replace("unicast\n", "server 4 127.0.0.1:7414\nunicast\n")
            + "balance on\ngroup a\ngroup b\nprefer 4\ngroup c\ngroup d\n";
        let c = parse(&text).unwrap();
        assert_eq!(
            orders(&c),
            [vec![1, 3, 4], vec![4], vec![3, 4, 1], vec![4, 1, 3]]
        );
        assert_eq!(c.groups[1].prefer, Some(vec![4]));
        // Without balance, groups without `prefer` leave it to the servers' priorities.
        let c = parse(&with_groups("balance off\n", 2, "")).unwrap();
        assert!(!c.balance);
        assert_eq!(orders(&c), [Vec::<u16>::new(), vec![]]);
        let c = parse(&with_groups("", 1, "prefer 3 1\n")).unwrap();
        assert_eq!(orders(&c), [[3, 1]]);
        assert_eq!(
            parse(&format!("{THREE}balance maybe\n"))
                .unwrap_err()
                .to_string(),
            "electd.conf:7: expected: balance on|off, not 'maybe'"
        );
    }

    /// The first server of a group's order has the highest priority in that group.
    #[test]
    fn group_node_config_follows_the_order() {
        let c = parse(&format!("{THREE}group a\nprefer 3 1\ngroup b\n")).unwrap();
        let prio = |g: usize| -> Vec<(u16, u8)> {
            let nc = c.group_node_config(g, 0);
            nc.servers.iter().map(|s| (s.id, s.priority)).collect()
        };
        assert_eq!(prio(0), [(1, 1), (2, 0), (3, 2)]);
        assert_eq!(
            prio(1),
            [(1, 0), (2, 5), (3, 0)],
            "the servers' own priorities"
        );
        let c = parse(&with_groups("balance on\n", 2, "")).unwrap();
        let nc = c.group_node_config(1, 0);
        let best = nc.servers.iter().max_by_key(|s| s.priority).unwrap();
        assert_eq!(best.id, c.groups[1].order[0]);
        assert_eq!(best.id, 2);
    }

    #[test]
    fn prefer_names_servers_that_may_lead() {
        let cases = [
            (
                "prefer 1 9",
                "electd.conf:16: prefer: server 9 is not in the server list",
            ),
            (
                "prefer 3",
                "electd.conf:16: prefer: server 3 is a witness: a witness never leads",
            ),
            (
                "prefer 1 2 1",
                "electd.conf:16: prefer: server 1 is listed twice",
            ),
            (
                "prefer",
                "electd.conf:16: 'prefer' needs at least one server id",
            ),
            (
                "prefer 1 b1",
                "electd.conf:16: prefer: 'b1' is not a server id (1..=255)",
            ),
            (
                "prefer 0",
                "electd.conf:16: prefer: '0' is not a server id (1..=255)",
            ),
            (
                "prefer 1\nprefer 2",
                "electd.conf:17: 'prefer' is given twice in group 'orders' (first on line 16)",
            ),
        ];
        // GOOD's servers: 1, 2 and the witness 3; `group orders` is line 15.
        for (line, want) in cases {
            let text = format!("{GOOD}group orders\n{line}\n");
            let got = parse(&text).unwrap_err();
            assert_eq!(got.to_string(), want, "{line}");
        }
        assert_eq!(
            parse(&format!("{GOOD}prefer 1 2\n"))
                .unwrap_err()
                .to_string(),
            "electd.conf:15: 'prefer' belongs to a group: put it after a 'group' line"
        );
        let c = parse(&format!("{GOOD}group orders\nprefer 2 1\n")).unwrap();
        assert_eq!(c.groups[0].prefer, Some(vec![2, 1]));
    }

    #[test]
    fn cluster_wide_directives_stand_before_the_first_group() {
        for d in [
            "heartbeat 2s",
            "balance on",
            "preempt-delay 30s",
            "server 4 127.0.0.1:7414",
            "id 2",
            "unicast",
            "metrics-listen off",
            "hook-timeout 5s",
        ] {
            let word = d.split(' ').next().unwrap();
            assert_eq!(
                parse(&format!("{THREE}group a\ncheck /bin/true\n{d}\ngroup b\n"))
                    .unwrap_err()
                    .to_string(),
                format!(
                    "electd.conf:9: '{word}' is cluster-wide: put it before the first 'group' line"
                ),
            );
        }
        // A misspelling is still one, inside a group too.
        assert_eq!(
            parse(&format!("{THREE}group a\nprefr 1\n"))
                .unwrap_err()
                .to_string(),
            "electd.conf:8: unknown directive 'prefr' (did you mean 'prefer'?)"
        );
        assert_eq!(
            parse(&format!("{THREE}grop a\n")).unwrap_err().to_string(),
            "electd.conf:7: unknown directive 'grop' (did you mean 'group'?)"
        );
        assert!(parse(&format!("{THREE}balance on\npreempt-delay 30s\ngroup a\n")).is_ok());
    }

    #[test]
    fn group_names_and_the_number_of_groups() {
        let name_err = |n: &str| {
            parse(&format!("{THREE}group {n}\n"))
                .unwrap_err()
                .to_string()
        };
        for bad in ["1abc", "Orders", "oRders", "a.b", "_a", "-a", "a/b", "ä"] {
            assert_eq!(
                name_err(bad),
                format!(
                    "electd.conf:7: group name '{bad}' must be a lowercase letter followed by at most 31 of a-z, 0-9, '_' and '-'"
                ),
            );
        }
        let long = format!("a{}", "b".repeat(32));
        assert!(
            name_err(&long).contains("must be a lowercase letter"),
            "33 characters"
        );
        assert_eq!(name_err(""), "electd.conf:7: missing group name");
        assert_eq!(
            name_err("a b"),
            "electd.conf:7: expected one group name, got 2"
        );
        let ok = format!("a{}", "-_9z".repeat(7) + "xyz");
        assert_eq!(ok.len(), 32);
        for good in ["default", "a", "orders-eu_2", ok.as_str()] {
            let c = parse(&format!("{THREE}group {good}\n")).unwrap();
            assert_eq!((c.groups[0].name.as_str(), c.groups[0].line), (good, 7));
        }
        assert_eq!(
            parse(&format!("{THREE}group a\ngroup b\ngroup a\n"))
                .unwrap_err()
                .to_string(),
            "electd.conf:9: group 'a' is given twice (first on line 7)"
        );
        let c = parse(&with_groups("", MAX_GROUPS, "")).unwrap();
        assert_eq!(c.groups.len(), 64);
        assert_eq!(c.group_index("g63"), Some(63));
        assert_eq!(
            parse(&with_groups("", MAX_GROUPS + 1, ""))
                .unwrap_err()
                .to_string(),
            "electd.conf:71: more than 64 groups"
        );
    }

    /// Top-level hooks and check are defaults each group may override, one by one.
    #[test]
    fn groups_inherit_hooks_and_check_from_the_top_level() {
        let top = "on-leader /bin/start\non-follower /bin/stop\ncheck /bin/true top\ncheck-interval 2s\ncheck-fall 4\n";
        let text = format!(
            "{THREE}{top}group plain\ngroup own\non-leader /bin/own-start\ncheck /bin/true own\ncheck-rise 7\ngroup tuned\ncheck-interval 300ms\n"
        );
        let c = parse(&text).unwrap();
        assert_eq!(
            c.on_leader,
            Some(vec!["/bin/start".to_string()]),
            "the top level's"
        );
        let top_check = c.check.clone().unwrap();
        assert_eq!(
            (top_check.line, top_check.interval, top_check.fall),
            (9, Duration::from_secs(2), 4)
        );
        let [plain, own, tuned] = &c.groups[..] else {
            panic!("{:?}", c.groups)
        };
        assert_eq!(
            (&plain.on_leader, &plain.on_follower, &plain.check),
            (&c.on_leader, &c.on_follower, &c.check)
        );
        assert_eq!(own.on_leader, Some(vec!["/bin/own-start".to_string()]));
        assert_eq!(own.on_follower, c.on_follower, "inherited");
        let k = own.check.clone().unwrap();
        assert_eq!(k.argv, ["/bin/true", "own"]);
        // Settings the group does not set come from the top level.
        assert_eq!(
            (k.line, k.interval, k.timeout, k.fall, k.rise),
            (15, Duration::from_secs(2), Duration::from_millis(500), 4, 7)
        );
        let k = tuned.check.clone().unwrap();
        assert_eq!(k.argv, ["/bin/true", "top"], "the inherited command");
        assert_eq!(
            (k.line, k.interval, k.timeout),
            (9, Duration::from_millis(300), Duration::from_millis(300))
        );
        assert!(c.warnings().is_empty(), "{:?}", c.warnings());
        // A group's check rules are the top level's.
        for (tail, want) in [
            (
                "group a\ncheck x\ncheck y\n",
                "electd.conf:10: 'check' is given twice (first on line 9); run both checks from one script",
            ),
            ("group a\ncheck\n", "electd.conf:9: 'check' needs a command"),
            (
                "group a\ncheck-rise 0\n",
                "electd.conf:9: check-rise '0' is not in 1..=100",
            ),
            (
                "group a\ncheck x\ncheck-timeout 3s\n",
                "electd.conf:10: check-timeout 3000 ms must not exceed check-interval 1000 ms in group 'a' (checks run one at a time)",
            ),
        ] {
            let text = format!("{THREE}check-fall 2\n{tail}");
            assert_eq!(parse(&text).unwrap_err().to_string(), want, "{tail}");
        }
        let long = format!(
            "{THREE}group a\ncheck {}\n",
            "a ".repeat(MAX_CHECK_ARGS + 1)
        );
        assert!(parse(&long).unwrap_err().msg.contains("at most 64"));
        // An inherited timeout that the group's own interval makes too long: the
        // group's line is the one to fix.
        assert_eq!(
            parse(&format!(
                "{THREE}check-timeout 800ms\ngroup a\ncheck x\ncheck-interval 500ms\n"
            ))
            .unwrap_err()
            .to_string(),
            "electd.conf:10: check-timeout 800 ms must not exceed check-interval 500 ms in group 'a' (checks run one at a time)"
        );
        // A group may hold a check the top level does not have; the top level's
        // settings are its defaults, so they are not unused.
        let c = parse(&format!(
            "{THREE}check-interval 3s\ngroup a\ngroup b\ncheck /bin/true\n"
        ))
        .unwrap();
        assert_eq!((c.check.clone(), c.groups[0].check.clone()), (None, None));
        assert_eq!(
            c.groups[1].check.as_ref().unwrap().interval,
            Duration::from_secs(3)
        );
        assert!(c.warnings().is_empty(), "{:?}", c.warnings());
    }

    #[test]
    fn group_warnings_name_the_group_and_line() {
        let c = parse(&format!(
            "{THREE}check /nonexistent/top\ngroup a\ngroup b\ncheck /nonexistent/b\ngroup c\ncheck /bin/true\ncheck-interval 2s\ngroup d\n"
        ))
        .unwrap();
        assert_eq!(
            c.warnings(),
            [
                "electd.conf:7: check command '/nonexistent/top' does not exist: checks will fail and this server will stay unhealthy in groups 'a', 'd' (it never leads them) until it can run",
                "electd.conf:10: check command '/nonexistent/b' does not exist: checks will fail and this server will stay unhealthy in group 'b' (it never leads it) until it can run",
            ]
        );
        let c = parse(&format!("{THREE}check /bin/true\ngroup a\ncheck /bin/sh\n")).unwrap();
        assert_eq!(
            c.warnings(),
            ["electd.conf:7: every group sets its own 'check': this one is never run"]
        );
        let c = parse(&format!(
            "{THREE}check-interval 2s\ngroup a\ncheck-timeout 100ms\ngroup b\n"
        ))
        .unwrap();
        assert_eq!(
            c.warnings(),
            [
                "electd.conf:7: check settings without a 'check' line: this server is not health-checked",
                "electd.conf:9: check settings without a 'check' line in group 'a': this server is not health-checked in it",
            ]
        );
        let c = parse(&format!("{THREE}balance on\ngroup a\nprefer 1\n")).unwrap();
        assert_eq!(
            c.warnings(),
            ["electd.conf:7: balance on has no effect: every group has a 'prefer' line"]
        );
    }

    /// SPEC section 14: preempt-delay acts when some group prefers one server to another.
    #[test]
    fn preempt_delay_warning_looks_at_every_group() {
        let flat = THREE.replace(" priority 5", "");
        let warns = |tail: &str| {
            parse(&format!("{flat}preempt-delay 1m\n{tail}"))
                .unwrap()
                .warnings()
        };
        assert_eq!(
            warns(""),
            [
                "electd.conf: preempt-delay has no effect: every server that may lead has the same priority"
            ]
        );
        assert_eq!(
            warns("group a\ngroup b\n"),
            [
                "electd.conf: preempt-delay has no effect: in every group, every server that may lead has the same priority"
            ]
        );
        assert!(warns("group a\ngroup b\nprefer 2\n").is_empty());
        assert!(warns("group a\nprefer 1 2 3\n").is_empty());
        let balanced = parse(&format!("{flat}balance on\npreempt-delay 1m\ngroup a\n")).unwrap();
        assert!(balanced.warnings().is_empty(), "{:?}", balanced.warnings());
        // Servers' own priorities differ: a group without an order keeps them.
        assert!(
            parse(&format!("{THREE}preempt-delay 1m\ngroup a\n"))
                .unwrap()
                .warnings()
                .is_empty()
        );
    }

    /// The wire names groups by index: the list of names, in order, is in the
    /// fingerprint; preferences may differ per server like priorities.
    #[test]
    fn group_names_and_their_order_are_in_the_fingerprint() {
        let fp = |tail: &str| parse(&format!("{THREE}{tail}")).unwrap().fingerprint();
        let base = fp("group a\ngroup b\n");
        assert_ne!(base, fp(""));
        assert_ne!(
            base,
            fp("group default\n"),
            "an explicit default is a group line"
        );
        assert_ne!(base, fp("group b\ngroup a\n"));
        assert_ne!(base, fp("group a\ngroup c\n"));
        assert_ne!(base, fp("group a\n"));
        assert_eq!(base, fp("group a\nprefer 3 2\ngroup b\ncheck /bin/true\n"));
        assert_eq!(base, fp("balance on\ngroup a\ngroup b\n"));
    }

    #[test]
    fn group_summary_for_check_config() {
        let c = parse(&format!(
            "{THREE}balance on\non-follower /bin/stop\ncheck /bin/true\ngroup a\nprefer 3\ngroup b\non-leader /bin/go\ncheck /bin/sh\ngroup c\n"
        ))
        .unwrap();
        let lines: Vec<String> = (0..3).filter_map(|g| c.group_summary(g)).collect();
        assert_eq!(
            lines,
            [
                "group a (line 10): order 3 (prefer); check (line 9, inherited); on-follower",
                "group b (line 12): order 1 2 3 (balance); check (line 14); on-leader, on-follower",
                "group c (line 15): order 2 3 1 (balance); check (line 9, inherited); on-follower",
            ]
        );
        assert_eq!(c.group_summary(3), None);
        let c = parse(GOOD).unwrap();
        assert_eq!(
            c.group_summary(0).unwrap(),
            "group default (line 0): order by server priority; no check; no hooks"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        for bad in ["", "s", "1x", "-1s", "1e9h", "1..2s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}

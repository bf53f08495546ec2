//! Reading a file into a validated `Config` (SPEC section 9): the directives once per
//! section, the server list, the cluster's one address family, the defaults, and the
//! rules that tie several directives together.

use super::*;

/// Reads `path` without waiting: opened with O_NONBLOCK (so a FIFO's `open()` does not
/// wait for a writer), then refused unless it is a regular file, and refused when it
/// holds more than `max` bytes (read at most `max + 1`, whatever its size said when it
/// was checked). Errors name what was found: "cannot read: ...", "not a regular file
/// (a FIFO)", "file is larger than N bytes".
fn read_regular_file(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("cannot read: {e}"))?;
    let t = f
        .metadata()
        .map_err(|e| format!("cannot read: {e}"))?
        .file_type();
    if !t.is_file() {
        let what = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_socket() {
            "a socket"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else {
            "not a file"
        };
        return Err(format!(
            "not a regular file ({what}); a reload reads only a regular file"
        ));
    }
    let mut bytes = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > max {
        return Err(format!("file is larger than {max} bytes"));
    }
    Ok(bytes)
}

/// `at(line, msg)`: an error about this file, on `line` when it is about one line.
type At<'a> = dyn Fn(Option<usize>, String) -> ConfigError + 'a;

impl Config {
    /// Reads and validates `path`; `id` overrides the file's `id` directive. At a
    /// start the file may be anything that reads (a FIFO or a process substitution
    /// waits for its writer, before the event loop runs); a reload reads it with
    /// [`Config::load_regular`].
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

    /// `load` for a reload, on the event loop, which must never wait (SPEC 12): only a
    /// regular file is read, opened without blocking, and at most `MAX_FILE_BYTES` of
    /// it. A FIFO put in the file's place blocked `open()` until a writer came, and the
    /// leader stopped heartbeating and lost its lease (tests/reload_review.rs); a
    /// device (a link to /dev/zero) would read without end.
    pub fn load_regular(path: &Path, id: Option<u16>) -> Result<Config, ConfigError> {
        let bytes = read_regular_file(path, MAX_FILE_BYTES).map_err(|msg| ConfigError {
            file: path.display().to_string(),
            line: None,
            msg,
        })?;
        let text = String::from_utf8(bytes).map_err(|_| ConfigError {
            file: path.display().to_string(),
            line: None,
            msg: "file is not UTF-8".into(),
        })?;
        Config::parse(&text, path, id)
    }

    /// `load`, and the key files opened as the daemon opens them (SPEC section 10):
    /// what a start refuses, with an error that names the file and line.
    pub fn load_with_keys(path: &Path, id: Option<u16>) -> Result<Config, String> {
        let cfg = Config::load(path, id).map_err(|e| e.to_string())?;
        crate::auth::load_keys(cfg.key_file.as_deref(), cfg.key_file_next.as_deref())
            .map_err(|e| format!("{}: {e}", cfg.key_place(&e)))?;
        Ok(cfg)
    }

    /// `FILE:LINE` of the key-file line a key error `e` is about.
    pub(super) fn key_place(&self, e: &str) -> String {
        let next = self
            .key_file_next
            .as_ref()
            .is_some_and(|n| e.contains(&n.display().to_string()));
        self.place(if next { "key-file-next" } else { "key-file" })
    }

    /// Parses configuration text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path, id_override: Option<u16>) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let at = |line: Option<usize>, msg: String| ConfigError {
            file: file.clone(),
            line,
            msg,
        };
        let (raw, lines) = directives(text, &at)?;
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
        let servers = server_list(raw.servers, &at)?;
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
}

/// Every line of `text` into `Raw`, and the line of each cluster-wide directive. A
/// directive other than `server` and `group` is given once per section (the
/// cluster-wide part, then each group); `unicast` and `multicast` are one directive
/// (issue 23).
fn directives(text: &str, at: &At) -> Result<(Raw, BTreeMap<String, usize>), ConfigError> {
    let mut raw = Raw::default();
    // (section, directive) -> (line, as written): section 0 is the cluster-wide part,
    // n the n-th group.
    let mut given: BTreeMap<(usize, &str), (usize, &str)> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let content = line.split('#').next().unwrap_or("");
        let words: Vec<&str> = content.split_whitespace().collect();
        let Some(&directive) = words.first() else {
            continue;
        };
        // A value's own error first; then the repeat.
        parse_line(&mut raw, i + 1, &words).map_err(|m| at(Some(i + 1), m))?;
        if matches!(directive, "server" | "group") {
            continue;
        }
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
                format!("'{directive}' and '{was}' (line {first}) together: choose one transport")
            };
            return Err(at(Some(i + 1), msg));
        }
        given.insert((section, key), (i + 1, directive));
    }
    let lines = given
        .iter()
        .filter(|((section, _), _)| *section == 0)
        .map(|(_, &(line, directive))| (directive.to_string(), line))
        .collect();
    Ok((raw, lines))
}

/// The `server` lines (line, server) as a list sorted by id: at least one, at most
/// 255, one that may lead, and no id, address or name twice.
fn server_list(raw: Vec<(usize, Server)>, at: &At) -> Result<Vec<Server>, ConfigError> {
    if raw.is_empty() {
        return Err(at(None, "no 'server' lines".into()));
    }
    if raw.iter().all(|(_, s)| s.witness) {
        return Err(at(
            Some(raw[0].0),
            "every server is a witness: none can lead (a witness only votes); drop 'witness' from at least one".into(),
        ));
    }
    if raw.len() > crate::node::MAX_SERVERS {
        return Err(at(
            None,
            format!("{} servers listed; at most 255", raw.len()),
        ));
    }
    let mut servers: Vec<Server> = Vec::new();
    for (line, s) in raw {
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
    Ok(servers)
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

//! The line parser: one directive per line into `Raw`, durations, suggestions for
//! misspelled directives (SPEC section 9).

use super::*;

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

pub(super) fn edit_distance(a: &str, b: &str) -> usize {
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

/// The candidate closest to `word` (a typo's edit distance, at most 2), if any: the
/// "did you mean" of the configuration and of electctl's commands.
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .min()
        .filter(|&(d, _)| d <= 2)
        .map(|(_, c)| c)
}

pub(super) fn suggest(word: &str) -> String {
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
pub(super) fn expand(path: &str, id: u16) -> PathBuf {
    PathBuf::from(path.replace("{id}", &id.to_string()))
}

/// The control socket that configuration `text` names for server `id` (the file's
/// `id` line without one), read leniently: only its `socket` and `id` lines count, so
/// a file the daemon would refuse (one being reloaded) still names the socket of the
/// daemon that runs. None when the socket has `{id}` and no id is known.
pub fn socket_in(text: &str, id: Option<u16>) -> Option<PathBuf> {
    let mut socket = None;
    let mut file_id = None;
    for line in text.lines() {
        let mut w = line.split('#').next().unwrap_or("").split_whitespace();
        match (w.next(), w.next()) {
            (Some("socket"), Some(p)) if socket.is_none() => socket = Some(p.to_string()),
            (Some("id"), Some(v)) if file_id.is_none() => file_id = v.parse::<u16>().ok(),
            _ => {}
        }
    }
    let socket = socket.unwrap_or_else(|| super::DEFAULT_SOCKET.to_string());
    match id.or(file_id) {
        Some(id) => Some(expand(&socket, id)),
        None => (!socket.contains("{id}")).then(|| PathBuf::from(socket)),
    }
}

#[derive(Default)]
pub(super) struct Raw {
    pub(super) cluster: Option<String>,
    pub(super) servers: Vec<(usize, Server)>,
    pub(super) id: Option<(usize, u16)>,
    pub(super) transport: Option<Transport>,
    /// The line of the transport directive, and the family `unicast ipv4|ipv6` names.
    pub(super) transport_line: usize,
    pub(super) unicast_family: Option<Family>,
    pub(super) heartbeat: Option<Duration>,
    pub(super) rtt: Option<Duration>,
    pub(super) k: Option<u32>,
    pub(super) drift_ppm: Option<u32>,
    pub(super) max_hold: Option<Duration>,
    pub(super) socket: Option<String>,
    pub(super) socket_mode: Option<u32>,
    pub(super) state: Option<String>,
    pub(super) hook_timeout: Option<Duration>,
    pub(super) log_level: Option<log::LevelFilter>,
    pub(super) key_file: Option<String>,
    pub(super) key_file_next: Option<String>,
    /// Hooks and check before the first `group` line: the defaults of every group.
    pub(super) top: groups::Section,
    /// One section per `group` line, in file order.
    pub(super) groups: Vec<groups::Section>,
    /// `balance on|off` and its line.
    pub(super) balance: Option<(usize, bool)>,
    pub(super) preempt_delay: Option<(usize, Option<Duration>)>,
    pub(super) metrics_listen: Option<std::net::SocketAddr>,
}

pub(super) fn one<'a>(args: &[&'a str], what: &str) -> Result<&'a str, String> {
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

pub(super) fn parse_line(raw: &mut Raw, lineno: usize, words: &[&str]) -> Result<(), String> {
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
    // A bad duration names its directive: "rtt: unknown unit ...".
    let dur = |v: &str| parse_duration(v).map_err(|e| format!("{directive}: {e}"));
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
        "heartbeat" => raw.heartbeat = Some(dur(one(args, "duration")?)?),
        "rtt" => raw.rtt = Some(dur(one(args, "duration")?)?),
        "max-hold" => raw.max_hold = Some(dur(one(args, "duration")?)?),
        "hook-timeout" => raw.hook_timeout = Some(dur(one(args, "duration")?)?),
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
            let d = if v == "off" { None } else { Some(dur(v)?) };
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

//! electctl: talk to a local electd over its control socket.
//!
//! Exit codes: 0 success (for `is-leader`: this server holds a valid lease), 1 a
//! negative answer (`is-leader`: not leader; `yield`: not leader; `reload`: the daemon
//! refused the new configuration), 2 an error (no daemon, refused connection, bad
//! usage, an unknown `yield --to` id, unreadable answer).

use electd::config::{DEFAULT_PATH, DEFAULT_SOCKET, closest, parse_duration, socket_in};
use electd::control::{NOT_LEADER, connect_error, valid_group_name};
use electd::json::{self, Value};
use electd::supervise::{self, RunOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

const USAGE: &str = "Usage: electctl [--socket PATH] COMMAND

Commands:
  status [GROUP] [--json]
                    this server's view: role, leader, term, lease, health,
                    drain, peers, a refused reload; --json: the raw status line.
                    With several election groups and no GROUP: every group
  leader [GROUP]    the leader's id, or 'none'
  is-leader [GROUP]
                    exit 0 while this server holds a valid lease, 1 otherwise,
                    2 on error (also: several groups and none named)
  watch [GROUP]     one JSON line now and one per change of role, leader, term,
                    lease, health or drain (of every group when none is named
                    and there are several: one 'groups' line per change)
  elect [GROUP]     start an election round now
  yield [GROUP] [--to ID]
                    make this server resign if it leads (exit 1 if it does not);
                    with --to, the RESIGN names server ID as successor, and
                    voters choose it if it claims eligibly (otherwise the usual
                    choice). An ID not in the server list, this server's or a
                    witness's exits 2.
  drain [GROUP]     make this server ineligible to lead until 'undrain', across
                    restarts; a leader hands over once another server is known
                    fit
  undrain [GROUP]   end the drain
  metrics           Prometheus text
  reload            re-read the configuration file now, as SIGHUP does, and
                    wait for the answer: exit 0 when applied, 1 with the reason
                    when refused (the daemon then keeps its running
                    configuration); root or the daemon's user only
  run [--group GROUP] [--grace D] [--poll D] [--max-restarts N
                    [--restart-window D]] -- CMD [ARGS]: run CMD only while
                    this server holds the (group's) lease. run registers
                    with electd ('supervise') and is told at once when the
                    lease is given up: it sends SIGTERM to CMD's process
                    group, SIGKILL after the grace (default 100ms), then
                    confirms, and only then does electd release the other
                    servers. It also enforces the lease end itself (boot
                    clock): SIGTERM when grace + 20ms of lease are left, SIGKILL
                    at 20ms. Refused (exit 2, CMD never started) unless grace +
                    20ms fits in lease - heartbeat - rtt of this electd (e.g. at
                    most 154ms with heartbeat 100ms, rtt 20ms, missed-heartbeats
                    3).
                    --poll (default 20ms) is only the reconnect interval and the
                    longest silence before electd is asked again; any value is
                    safe. CMD is restarted with backoff (0.1s, 0.2s, 0.4s ...)
                    if it exits while this server leads; ELECTD_TERM holds the
                    term (the fencing token), ELECTD_GROUP the group.
                    --max-restarts N: when CMD exits (or cannot start) N times
                    within --restart-window (default 1m), run reports this
                    server unhealthy to electd, which then hands over as soon as
                    another server is known fit; healthy again once the window
                    has passed since the last exit.

Options:
  -s, --socket PATH the control socket (default: the 'socket' of
                    /etc/electd/electd.conf)
  -c, --config PATH take the socket from this file instead
  -i, --id ID       the socket of server ID in the file ({id} replaced), as
                    electd --id ID (electd@ID.service) listens on
  -h, --help        print this help

Exit status: 0 success; 1 a negative answer (is-leader, yield on a follower,
reload refused); 2 an error (no daemon, permission denied, bad usage).
";

fn default_socket() -> PathBuf {
    socket_of(DEFAULT_PATH, None).unwrap_or_else(|_| PathBuf::from(DEFAULT_SOCKET))
}

/// The socket of server `id` (the file's `id` without one) in the file at `config`,
/// `{id}` replaced: what `electd --config CONFIG --id ID` listens on, whatever its
/// `socket` line (the template unit's reload).
fn socket_of(config: &str, id: Option<&str>) -> Result<PathBuf, String> {
    let id = match id {
        Some(v) => Some(
            v.parse::<u16>()
                .map_err(|_| format!("--id {v}: not a server id"))?,
        ),
        None => None,
    };
    let text =
        std::fs::read_to_string(config).map_err(|e| format!("{config}: cannot read: {e}"))?;
    socket_in(&text, id).ok_or_else(|| {
        format!("{config}: its socket has {{id}} and it has no id: give one with --id")
    })
}

struct Conn {
    reader: BufReader<UnixStream>,
    path: PathBuf,
}

impl Conn {
    fn open(path: &Path, timeout: Option<Duration>) -> Result<Conn, String> {
        let s = UnixStream::connect(path).map_err(|e| connect_error(path, &e))?;
        s.set_read_timeout(timeout).map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        Ok(Conn {
            reader: BufReader::new(s),
            path: path.to_path_buf(),
        })
    }

    fn send(&mut self, cmd: &str) -> Result<(), String> {
        self.reader
            .get_mut()
            .write_all(format!("{cmd}\n").as_bytes())
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }

    fn line(&mut self) -> Result<String, String> {
        let mut l = String::new();
        match self.reader.read_line(&mut l) {
            Ok(0) => Err(format!(
                "{}: the daemon closed the connection",
                self.path.display()
            )),
            Ok(_) => Ok(l),
            Err(e) => Err(format!("{}: {e}", self.path.display())),
        }
    }

    fn request(&mut self, cmd: &str) -> Result<Value, String> {
        self.send(cmd)?;
        let l = self.line()?;
        let v = json::parse(l.trim()).map_err(|e| format!("unreadable answer: {e}"))?;
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            return Err(format!("electd: {e}"));
        }
        Ok(v)
    }
}

fn show(v: &Value, key: &str) -> String {
    match v.get(key) {
        None | Some(Value::Null) => "-".into(),
        Some(Value::Str(s)) => s.clone(),
        Some(Value::Num(n)) => format!("{n}"),
        Some(other) => format!("{other:?}"),
    }
}

fn table(v: &Value) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "server    {} ({})\n",
        show(v, "id"),
        show(v, "name")
    ));
    if let Some(g) = v.get("group").and_then(Value::as_str) {
        out.push_str(&format!("group     {g}\n"));
    }
    out.push_str(&format!("role      {}\n", show(v, "role")));
    out.push_str(&format!(
        "leader    {}\n",
        v.get("leader")
            .and_then(Value::as_u64)
            .map_or("none".into(), |l| l.to_string())
    ));
    out.push_str(&format!("term      {}\n", show(v, "term")));
    if let Some(ms) = v.get("lease_ms").and_then(Value::as_u64) {
        out.push_str(&format!("lease     {ms} ms left\n"));
    }
    out.push_str(&format!("elector   {}\n", show(v, "elector")));
    out.push_str(&format!("voted in  term {}\n", show(v, "voted_term")));
    let health = show(v, "health");
    match v.get("health_cause").and_then(Value::as_str) {
        Some(c) => out.push_str(&format!("health    {health} ({c})\n")),
        None => out.push_str(&format!("health    {health}\n")),
    }
    let drained = v.get("drained") == Some(&Value::Bool(true));
    out.push_str(&format!(
        "drained   {}\n",
        if drained {
            "yes: will not lead until 'electctl undrain'"
        } else {
            "no"
        }
    ));
    if let Some(why) = v.get("config_refused").and_then(Value::as_str) {
        out.push_str(&format!(
            "config    last reload REFUSED: {why}\n          running the previous configuration; a restart would load the refused file\n"
        ));
    }
    out.push_str("peers     ");
    let peers: Vec<String> = v
        .get("peers")
        .and_then(Value::as_array)
        .unwrap_or(&[])
        .iter()
        .map(|p| {
            let ago = p
                .get("heard_ms_ago")
                .and_then(Value::as_u64)
                .map_or("never heard".into(), |a| format!("{a} ms ago"));
            let fit = match p.get("healthy") {
                Some(Value::Bool(true)) => ", fit",
                Some(Value::Bool(false)) => ", unfit",
                _ => "",
            };
            format!("{}: {ago}{fit}", show(p, "id"))
        })
        .collect();
    out.push_str(&peers.join(", "));
    out.push('\n');
    out
}

/// Every group's status of an all-groups line, each completed with what the line
/// holds once for all (server, refused reload, when each peer was heard), so each
/// reads as a one-group status.
fn group_views(v: &Value) -> Vec<Value> {
    let Some(groups) = v.get("groups").and_then(Value::as_array) else {
        return vec![v.clone()];
    };
    let heard = v.get("peers").and_then(Value::as_array).unwrap_or(&[]);
    groups
        .iter()
        .map(|g| {
            let Value::Obj(mut fields) = g.clone() else {
                return g.clone();
            };
            for key in ["id", "name", "config_refused"] {
                if let Some(x) = v.get(key) {
                    fields.insert(key.to_string(), x.clone());
                }
            }
            let listed = |key: &str, id: Option<u64>| {
                id.is_some()
                    && g.get(key)
                        .and_then(Value::as_array)
                        .unwrap_or(&[])
                        .iter()
                        .any(|x| x.as_u64() == id)
            };
            let peers = heard
                .iter()
                .map(|p| {
                    let mut p = p.clone();
                    let id = p.get("id").and_then(Value::as_u64);
                    let healthy = if listed("peers_fit", id) {
                        Some(Value::Bool(true))
                    } else if listed("peers_unfit", id) {
                        Some(Value::Bool(false))
                    } else {
                        None
                    };
                    if let (Value::Obj(pf), Some(h)) = (&mut p, healthy) {
                        pf.insert("healthy".into(), h);
                    }
                    p
                })
                .collect();
            fields.insert("peers".into(), Value::Arr(peers));
            Value::Obj(fields)
        })
        .collect()
}

/// The request word with its optional group: `status` or `status orders`.
fn with_group(word: &str, group: Option<&str>) -> String {
    match group {
        Some(g) => format!("{word} {g}"),
        None => word.to_string(),
    }
}

/// Splits an optional leading GROUP (SPEC section 15) off a command's arguments. A first
/// argument that is neither an option nor a valid group name is an error.
fn take_group(cmd: &str, rest: &[String]) -> Result<(Option<String>, Vec<String>), String> {
    match rest.split_first() {
        Some((g, more)) if !g.starts_with('-') => {
            if !valid_group_name(g) {
                return Err(format!(
                    "{cmd}: '{g}' is not a group name (a letter first, then up to 31 of a-z, 0-9, _ and -)"
                ));
            }
            Ok((Some(g.clone()), more.to_vec()))
        }
        _ => Ok((None, rest.to_vec())),
    }
}

/// The per-group parts of an answer (`groups`), or the answer itself.
fn answers(v: &Value) -> Vec<Value> {
    match v.get("groups").and_then(Value::as_array) {
        Some(gs) => gs.to_vec(),
        None => vec![v.clone()],
    }
}

/// One group's status line: the answer itself, or, when the daemon answers with every
/// group (`groups`), the only one there is; several are an error naming them.
fn one_group(v: Value, cmd: &str) -> Result<Value, String> {
    let Some(groups) = v.get("groups").and_then(Value::as_array) else {
        return Ok(v);
    };
    if groups.len() == 1 {
        return Ok(groups[0].clone());
    }
    let names: Vec<String> = groups.iter().map(|g| show(g, "group")).collect();
    Err(format!(
        "this server runs several election groups; name one: electctl {cmd} GROUP ({})",
        names.join(", ")
    ))
}

fn run(socket: &Path, cmd: &str, rest: &[String]) -> Result<i32, String> {
    let one_shot = Some(Duration::from_secs(5));
    if cmd == "run" {
        return run_command(socket, rest);
    }
    let (group, rest) = match cmd {
        "status" | "leader" | "is-leader" | "watch" | "elect" | "yield" | "drain" | "undrain" => {
            take_group(cmd, rest)?
        }
        _ => (None, rest.to_vec()),
    };
    let g = group.as_deref();
    match (cmd, rest.as_slice()) {
        ("status", []) => {
            let v = Conn::open(socket, one_shot)?.request(&with_group("status", g))?;
            let tables: Vec<String> = group_views(&v).iter().map(table).collect();
            print!("{}", tables.join("\n"));
            Ok(0)
        }
        ("status", [flag]) if flag == "--json" => {
            let mut c = Conn::open(socket, one_shot)?;
            c.send(&with_group("status", g))?;
            print!("{}", c.line()?);
            Ok(0)
        }
        ("leader", []) => {
            let v = Conn::open(socket, one_shot)?.request(&with_group("status", g))?;
            let v = one_group(v, cmd)?;
            println!(
                "{}",
                v.get("leader")
                    .and_then(Value::as_u64)
                    .map_or("none".into(), |l| l.to_string())
            );
            Ok(0)
        }
        ("is-leader", []) => {
            let v = Conn::open(socket, one_shot)?.request(&with_group("status", g))?;
            let v = one_group(v, cmd)?;
            Ok(if v.get("role").and_then(Value::as_str) == Some("leader") {
                0
            } else {
                1
            })
        }
        ("watch", []) => {
            let mut c = Conn::open(socket, None)?;
            c.send(&with_group("watch", g))?;
            let stdout = std::io::stdout();
            loop {
                let l = c.line()?;
                let mut out = stdout.lock();
                if out
                    .write_all(l.as_bytes())
                    .and_then(|_| out.flush())
                    .is_err()
                {
                    return Ok(0);
                }
            }
        }
        ("elect", []) => {
            Conn::open(socket, one_shot)?.request(&with_group("elect", g))?;
            println!("election started");
            Ok(0)
        }
        ("yield", []) => yield_to(socket, g, None),
        ("yield", [flag, id]) if flag == "--to" => yield_to(socket, g, Some(id)),
        ("yield", [flag]) if flag.starts_with("--to=") => yield_to(socket, g, Some(&flag[5..])),
        ("drain", []) => {
            let v = Conn::open(socket, one_shot)?.request(&with_group("drain", g))?;
            for d in answers(&v) {
                let tag = d
                    .get("group")
                    .and_then(Value::as_str)
                    .map_or(String::new(), |g| format!("{g}: "));
                match d.get("handover") {
                    Some(Value::Str(h)) if h == "started" => {
                        match d.get("to").and_then(Value::as_u64) {
                            Some(to) => println!("{tag}drained; handing over to server {to}"),
                            None => println!("{tag}drained; handing over"),
                        }
                    }
                    Some(Value::Str(h)) => println!("{tag}drained; still leader: {h}"),
                    _ => println!("{tag}drained"),
                }
            }
            Ok(0)
        }
        ("undrain", []) => {
            Conn::open(socket, one_shot)?.request(&with_group("undrain", g))?;
            println!("undrained");
            Ok(0)
        }
        ("metrics", []) => {
            let mut c = Conn::open(socket, one_shot)?;
            c.send("metrics")?;
            loop {
                let l = c.line()?;
                print!("{l}");
                if l.trim_end() == "# EOF" {
                    return Ok(0);
                }
            }
        }
        ("reload", []) => reload(socket),
        _ if !COMMANDS.contains(&cmd) => Err(match closest(cmd, &COMMANDS) {
            Some(c) => format!(
                "unknown command '{cmd}' (did you mean '{c}'?); electctl --help lists the commands"
            ),
            None => format!("unknown command '{cmd}'; electctl --help lists the commands"),
        }),
        _ => Err(format!(
            "unknown command or arguments: {cmd} {}\n{USAGE}",
            rest.join(" ")
        )),
    }
}

/// electctl's commands, for the "did you mean" of a mistyped one.
const COMMANDS: [&str; 11] = [
    "status",
    "leader",
    "is-leader",
    "watch",
    "elect",
    "yield",
    "drain",
    "undrain",
    "metrics",
    "reload",
    "run",
];

/// `yield` and `yield --to ID`: exit 1 when this server does not lead, 2 for an id
/// that is not a number, not in the list, or this server's own.
fn yield_to(socket: &Path, group: Option<&str>, to: Option<&str>) -> Result<i32, String> {
    let word = with_group("yield", group);
    let cmd = match to {
        None => word,
        // Digits go as they are: the daemon knows the server list.
        Some(id) if !id.is_empty() && id.len() <= 32 && id.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{word} {id}")
        }
        Some(id) => return Err(format!("yield --to: '{id}' is not a server id (a number)")),
    };
    let mut c = Conn::open(socket, Some(Duration::from_secs(5)))?;
    c.send(&cmd)?;
    let v = json::parse(c.line()?.trim()).map_err(|e| format!("unreadable answer: {e}"))?;
    match v.get("error").and_then(Value::as_str) {
        Some(e) if e == NOT_LEADER => {
            eprintln!("electctl: {e}");
            Ok(1)
        }
        Some(e) => Err(e.to_string()),
        None => {
            let groups: Vec<String> = v
                .get("groups")
                .and_then(Value::as_array)
                .unwrap_or(&[])
                .iter()
                .filter_map(|g| g.as_str().map(str::to_string))
                .collect();
            match v.get("to").and_then(Value::as_u64) {
                Some(to) => println!("leadership yielded to server {to}"),
                None if !groups.is_empty() => {
                    println!("leadership yielded: {}", groups.join(", "))
                }
                None => println!("leadership yielded"),
            }
            if let Some(note) = v.get("note").and_then(Value::as_str) {
                println!("note: {note}");
            }
            Ok(0)
        }
    }
}

/// `reload`: exit 0 once the daemon applied the file, 1 (reason on stderr) when it
/// refused it, 2 on any other error (no daemon, not allowed).
fn reload(socket: &Path) -> Result<i32, String> {
    // A reload reads a few small files and may start the check runner: quick, but not
    // as quick as `status`.
    let mut c = Conn::open(socket, Some(Duration::from_secs(30)))?;
    c.send("reload")?;
    let v = json::parse(c.line()?.trim()).map_err(|e| format!("unreadable answer: {e}"))?;
    match v.get("error").and_then(Value::as_str) {
        Some(e) if v.get("refused") == Some(&Value::Bool(true)) => {
            eprintln!("electctl: {e}");
            Ok(1)
        }
        Some(e) => Err(e.to_string()),
        None => {
            match v.get("config").and_then(Value::as_str) {
                Some(path) => println!("configuration reloaded from {path}"),
                None => println!("configuration reloaded"),
            }
            Ok(0)
        }
    }
}

fn run_command(socket: &Path, rest: &[String]) -> Result<i32, String> {
    let mut opts = getopts::Options::new();
    opts.parsing_style(getopts::ParsingStyle::StopAtFirstFree);
    opts.optopt(
        "",
        "group",
        "the election group whose lease the command follows (default: the only one)",
        "GROUP",
    );
    opts.optopt(
        "",
        "grace",
        "time between SIGTERM and SIGKILL (default 100ms); must fit in the lease",
        "DURATION",
    );
    opts.optopt(
        "",
        "poll",
        "reconnect interval and longest silence before asking again (default 20ms)",
        "DURATION",
    );
    opts.optopt(
        "",
        "max-restarts",
        "exits within --restart-window that make this server unhealthy",
        "N",
    );
    opts.optopt(
        "",
        "restart-window",
        "the window for --max-restarts (default 1m)",
        "DURATION",
    );
    let m = opts.parse(rest).map_err(|e| format!("run: {e}\n{USAGE}"))?;
    let duration = |name: &str, default: u64| -> Result<Duration, String> {
        match m.opt_str(name) {
            None => Ok(Duration::from_millis(default)),
            Some(v) => parse_duration(&v).map_err(|e| format!("run --{name}: {e}")),
        }
    };
    let group = m.opt_str("group");
    if let Some(g) = group.as_deref().filter(|g| !valid_group_name(g)) {
        return Err(format!(
            "run --group: '{g}' is not a group name (a letter first, then up to 31 of a-z, 0-9, _ and -)"
        ));
    }
    let grace = duration("grace", 100)?;
    let poll = duration("poll", 20)?;
    if poll.is_zero() || poll > Duration::from_secs(10) {
        return Err("run --poll must be between 1ms and 10s".into());
    }
    let restarts = match (m.opt_str("max-restarts"), m.opt_str("restart-window")) {
        (None, None) => None,
        (None, Some(_)) => return Err("run --restart-window needs --max-restarts".into()),
        (Some(n), w) => {
            let n: u32 = n
                .parse()
                .ok()
                .filter(|n| (1..=supervise::MAX_RESTARTS).contains(n))
                .ok_or_else(|| {
                    format!(
                        "run --max-restarts '{n}' must be a count from 1 to {}",
                        supervise::MAX_RESTARTS
                    )
                })?;
            let window = match w {
                None => supervise::DEFAULT_RESTART_WINDOW,
                Some(w) => parse_duration(&w).map_err(|e| format!("run --restart-window: {e}"))?,
            };
            if window.is_zero() || window > supervise::MAX_RESTART_WINDOW {
                return Err("run --restart-window must be more than 0 and at most 24h".into());
            }
            Some((n, window))
        }
    };
    let argv: Vec<String> = m
        .free
        .iter()
        .skip_while(|a| a.as_str() == "--")
        .cloned()
        .collect();
    if argv.is_empty() {
        return Err(format!("run: no command given\n{USAGE}"));
    }
    Ok(supervise::run(&RunOptions {
        socket: socket.to_path_buf(),
        grace,
        poll,
        argv,
        restarts,
        group,
    }))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(supervise::enforce::SUBCOMMAND) {
        // `run`'s lease enforcer, started by `run` itself (not for people).
        std::process::exit(supervise::enforce::main(&args[1..]));
    }
    let mut opts = getopts::Options::new();
    opts.parsing_style(getopts::ParsingStyle::StopAtFirstFree);
    opts.optopt(
        "s",
        "socket",
        "control socket (default: from /etc/electd/electd.conf)",
        "PATH",
    );
    opts.optopt(
        "c",
        "config",
        "the socket is this file's (default /etc/electd/electd.conf)",
        "PATH",
    );
    opts.optopt("i", "id", "the socket of server ID in the file", "ID");
    opts.optflag("h", "help", "print this help");
    let m = match opts.parse(&args) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("electctl: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    if m.opt_present("help") {
        print!("{USAGE}");
        return;
    }
    let Some((cmd, rest)) = m.free.split_first() else {
        eprintln!("electctl: no command\n{USAGE}");
        std::process::exit(2);
    };
    let socket = match (m.opt_str("socket"), m.opt_str("config"), m.opt_str("id")) {
        (Some(s), None, None) => PathBuf::from(s),
        (Some(_), _, _) => {
            eprintln!("electctl: --socket goes without --config and --id\n{USAGE}");
            std::process::exit(2);
        }
        (None, None, None) => default_socket(),
        (None, config, id) => {
            match socket_of(config.as_deref().unwrap_or(DEFAULT_PATH), id.as_deref()) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("electctl: {e}");
                    std::process::exit(2);
                }
            }
        }
    };
    match run(&socket, cmd, rest) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("electctl: {e}");
            std::process::exit(2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::USAGE;
    use std::process::Command;

    /// The commands of electctl(1), in its order: each `.B`/`.BR` entry of COMMANDS.
    fn man_commands() -> Vec<String> {
        let man = include_str!("../../docs/man/man1/electctl.1");
        let section = man
            .split(".SH COMMANDS")
            .nth(1)
            .and_then(|s| s.split("\n.SH ").next())
            .expect("a COMMANDS section");
        let mut out = Vec::new();
        let mut lines = section.lines();
        while let Some(l) = lines.next() {
            if l == ".TP" {
                let entry = lines.next().unwrap_or("");
                let word = entry
                    .trim_start_matches(".BR ")
                    .trim_start_matches(".B ")
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .replace('\\', "");
                out.push(word);
            }
        }
        out
    }

    /// Issue 13 item 7: `electctl --help` fits 80 columns (a longer line wraps to
    /// column 0 and breaks the hanging indent), every description starts at column 20,
    /// and it lists the commands of the man page in the same order.
    #[test]
    fn help_fits_80_columns_and_matches_the_man_page() {
        let mut commands = Vec::new();
        let mut in_commands = false;
        for l in USAGE.lines() {
            assert!(l.chars().count() <= 80, "over 80 columns: {l:?}");
            if l == "Commands:" {
                in_commands = true;
                continue;
            }
            if l.is_empty() {
                in_commands = false;
            }
            if !in_commands {
                continue;
            }
            if let Some(entry) = l.strip_prefix("  ").filter(|e| !e.starts_with(' ')) {
                commands.push(entry.split_whitespace().next().unwrap().to_string());
                // A command's description starts at column 20 unless its synopsis is
                // longer, then on the next line.
                if entry.contains("  ") {
                    assert_eq!(&l[18..20], "  ", "description not at column 20: {l:?}");
                    assert_ne!(&l[20..21], " ", "description not at column 20: {l:?}");
                }
            } else {
                assert!(
                    l.starts_with(&" ".repeat(20)) && !l.starts_with(&" ".repeat(21)),
                    "continuation not at column 20: {l:?}"
                );
            }
        }
        assert_eq!(commands, man_commands(), "electctl --help vs electctl(1)");
    }

    /// The bash completion the package installs (issue 23, item 9).
    const COMPLETION: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/pkg/completion/electctl");

    /// What the completion offers for the words typed so far.
    fn complete(words: &[&str]) -> Vec<String> {
        let script = format!(
            "source {COMPLETION}; COMP_WORDS=({}); COMP_CWORD={}; _electctl; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            words
                .iter()
                .map(|w| format!("'{w}'"))
                .collect::<Vec<_>>()
                .join(" "),
            words.len() - 1
        );
        let o = Command::new("bash").args(["-c", &script]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn bash_completion_offers_every_command_and_option() {
        let o = Command::new("bash")
            .args(["-n", COMPLETION])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut want = man_commands();
        assert!(want.len() >= 10, "{want:?}");
        want.sort();
        let mut got = complete(&["electctl", ""]);
        got.sort();
        assert_eq!(got, want, "the commands of electctl(1)");
        assert_eq!(complete(&["electctl", "st"]), ["status"]);
        assert_eq!(
            complete(&["electctl", "--socket", "/run/x.sock", "is"]),
            ["is-leader"]
        );
        let opts = complete(&["electctl", "--"]);
        for o in ["--socket", "--config", "--id", "--help"] {
            assert!(opts.contains(&o.to_string()), "{opts:?}");
        }
        assert_eq!(complete(&["electctl", "status", "--j"]), ["--json"]);
        assert_eq!(complete(&["electctl", "yield", "--"]), ["--to"]);
        let run = complete(&["electctl", "run", "--"]);
        for o in [
            "--group",
            "--grace",
            "--poll",
            "--max-restarts",
            "--restart-window",
        ] {
            assert!(run.contains(&o.to_string()), "{run:?}");
        }
    }
}

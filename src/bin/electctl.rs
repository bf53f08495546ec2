//! electctl: talk to a local electd over its control socket.
//!
//! Exit codes: 0 success (for `is-leader`: this server holds a valid lease), 1 a
//! negative answer (`is-leader`: not leader; `yield`: not leader), 2 an error (no
//! daemon, refused connection, bad usage, unreadable answer).

use electd::config::{Config, DEFAULT_PATH, DEFAULT_SOCKET, parse_duration};
use electd::json::{self, Value};
use electd::supervise::{self, RunOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

const USAGE: &str = "Usage: electctl [--socket PATH] COMMAND

Commands:
  status [--json]   this server's view: role, leader, term, lease, peers
  leader            the leader's id, or 'none'
  is-leader         exit 0 while this server holds a valid lease, 1 otherwise, 2 on error
  watch             one JSON line now and one per change of role, leader, term or lease
  elect             start an election round now
  yield             make this server resign if it leads
  metrics           Prometheus text
  run [--grace D] [--poll D] -- CMD [ARGS]
                    run CMD only while this server holds the lease. run registers with
                    electd ('supervise') and is told at once when the lease is given up:
                    it sends SIGTERM to CMD's process group, SIGKILL after the grace
                    (default 100ms), then confirms, and only then does electd release
                    the other servers. It also enforces the lease end itself (boot
                    clock): SIGTERM when grace + 20ms of lease are left, SIGKILL at 20ms.
                    Refused (exit 2, CMD never started) unless grace + 20ms fits in
                    lease - heartbeat - rtt of this electd (e.g. at most 154ms with
                    heartbeat 100ms, rtt 20ms, missed-heartbeats 3).
                    --poll (default 20ms) is only the reconnect interval and the longest
                    silence before electd is asked again; any value is safe.
                    CMD is restarted with backoff (0.1s, 0.2s, 0.4s ...) if it exits while
                    this server leads; ELECTD_TERM holds the term (the fencing token)
";

fn default_socket() -> PathBuf {
    Config::load(Path::new(DEFAULT_PATH), None)
        .map(|c| c.socket)
        .unwrap_or_else(|_| PathBuf::from(DEFAULT_SOCKET))
}

struct Conn {
    reader: BufReader<UnixStream>,
    path: PathBuf,
}

impl Conn {
    fn open(path: &Path, timeout: Option<Duration>) -> Result<Conn, String> {
        let s = UnixStream::connect(path).map_err(|e| {
            format!(
                "cannot connect to {}: {e} (is electd running?)",
                path.display()
            )
        })?;
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
            format!("{}: {ago}", show(p, "id"))
        })
        .collect();
    out.push_str(&peers.join(", "));
    out.push('\n');
    out
}

fn run(socket: &Path, cmd: &str, rest: &[String]) -> Result<i32, String> {
    let one_shot = Some(Duration::from_secs(5));
    match (cmd, rest) {
        ("status", []) => {
            let v = Conn::open(socket, one_shot)?.request("status")?;
            print!("{}", table(&v));
            Ok(0)
        }
        ("status", [flag]) if flag == "--json" => {
            let mut c = Conn::open(socket, one_shot)?;
            c.send("status")?;
            print!("{}", c.line()?);
            Ok(0)
        }
        ("leader", []) => {
            let v = Conn::open(socket, one_shot)?.request("status")?;
            println!(
                "{}",
                v.get("leader")
                    .and_then(Value::as_u64)
                    .map_or("none".into(), |l| l.to_string())
            );
            Ok(0)
        }
        ("is-leader", []) => {
            let v = Conn::open(socket, one_shot)?.request("status")?;
            Ok(if v.get("role").and_then(Value::as_str) == Some("leader") {
                0
            } else {
                1
            })
        }
        ("watch", []) => {
            let mut c = Conn::open(socket, None)?;
            c.send("watch")?;
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
            Conn::open(socket, one_shot)?.request("elect")?;
            println!("election started");
            Ok(0)
        }
        ("yield", []) => {
            let mut c = Conn::open(socket, one_shot)?;
            c.send("yield")?;
            let v = json::parse(c.line()?.trim()).map_err(|e| format!("unreadable answer: {e}"))?;
            match v.get("error").and_then(Value::as_str) {
                Some(e) => {
                    eprintln!("electctl: {e}");
                    Ok(1)
                }
                None => {
                    println!("leadership yielded");
                    Ok(0)
                }
            }
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
        ("run", _) => run_command(socket, rest),
        _ => Err(format!(
            "unknown command or arguments: {cmd} {}\n{USAGE}",
            rest.join(" ")
        )),
    }
}

fn run_command(socket: &Path, rest: &[String]) -> Result<i32, String> {
    let mut opts = getopts::Options::new();
    opts.parsing_style(getopts::ParsingStyle::StopAtFirstFree);
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
    let m = opts.parse(rest).map_err(|e| format!("run: {e}\n{USAGE}"))?;
    let duration = |name: &str, default: u64| -> Result<Duration, String> {
        match m.opt_str(name) {
            None => Ok(Duration::from_millis(default)),
            Some(v) => parse_duration(&v).map_err(|e| format!("run --{name}: {e}")),
        }
    };
    let grace = duration("grace", 100)?;
    let poll = duration("poll", 20)?;
    if poll.is_zero() || poll > Duration::from_secs(10) {
        return Err("run --poll must be between 1ms and 10s".into());
    }
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
    }))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = getopts::Options::new();
    opts.parsing_style(getopts::ParsingStyle::StopAtFirstFree);
    opts.optopt(
        "s",
        "socket",
        "control socket (default: from /etc/electd/electd.conf)",
        "PATH",
    );
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
    let socket = m
        .opt_str("socket")
        .map(PathBuf::from)
        .unwrap_or_else(default_socket);
    match run(&socket, cmd, rest) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("electctl: {e}");
            std::process::exit(2);
        }
    }
}

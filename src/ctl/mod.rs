//! electctl's commands: each sends its request on the control socket and prints the
//! answer, with the exit code of the command (the binary only reads the global flags).

mod conn;
mod run;
mod usage;
mod view;

pub use usage::USAGE;

use crate::config::closest;
use crate::control::{NOT_LEADER, valid_group_name};
use crate::json::{self, Value};
use conn::Conn;
use run::run_command;
use std::io::Write;
use std::path::Path;
use std::time::Duration;
use view::{answers, group_views, one_group, table};

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

/// Runs command `cmd` with its arguments `rest` against the daemon at `socket`;
/// Ok(exit code), or Err(message) for exit 2.
pub fn run(socket: &Path, cmd: &str, rest: &[String]) -> Result<i32, String> {
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

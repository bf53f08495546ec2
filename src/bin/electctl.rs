//! electctl: talk to a local electd over its control socket.
//!
//! Exit codes: 0 success (for `is-leader`: this server holds a valid lease), 1 a
//! negative answer (`is-leader`: not leader; `yield`: not leader; `reload`: the daemon
//! refused the new configuration), 2 an error (no daemon, refused connection, bad
//! usage, an unknown `yield --to` id, unreadable answer).

use electd::config::{DEFAULT_PATH, DEFAULT_SOCKET, socket_in};
use electd::ctl::{self, USAGE};
use electd::supervise;
use std::path::PathBuf;

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
    // A reload after the file's `socket` line changed: the daemon keeps the socket it
    // started with until a restart, so the file names a socket nobody listens on. Under
    // systemd (ExecReload sets MAINPID) the running daemon's socket is found and the
    // reload reaches it, which then refuses the change and says so (exit 1, status
    // config_refused), rather than "is electd running?".
    let from_file = m.opt_str("socket").is_none();
    let socket = if from_file && cmd == "reload" && std::fs::symlink_metadata(&socket).is_err() {
        match std::env::var("MAINPID")
            .ok()
            .and_then(|p| p.parse::<u32>().ok())
            .and_then(|pid| listening_socket_of(pid).map(|s| (pid, s)))
        {
            Some((pid, running)) if running != socket => {
                eprintln!(
                    "electctl: {} (from the file) does not exist; electd (pid {pid}) listens on {}: reloading through it",
                    socket.display(),
                    running.display()
                );
                running
            }
            _ => socket,
        }
    } else {
        socket
    };
    match ctl::run(&socket, cmd, rest) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            if from_file && cmd == "reload" {
                eprintln!(
                    "electctl: {e}; if the file's `socket` line changed since electd started, it still listens on its old socket: give that with --socket (a changed socket needs a restart)"
                );
            } else {
                eprintln!("electctl: {e}");
            }
            std::process::exit(2);
        }
    }
}

/// The Unix socket the process `pid` listens on, when it has exactly one: its
/// descriptors (/proc/PID/fd, `socket:[INODE]`) matched against the listening sockets
/// of /proc/net/unix (flag __SO_ACCEPTCON, 0x10000) that have a path. None when it
/// cannot be read or is not one socket.
fn listening_socket_of(pid: u32) -> Option<PathBuf> {
    let mut inodes = std::collections::HashSet::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.flatten() {
        if let Ok(t) = std::fs::read_link(e.path()) {
            if let Some(n) = t
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse::<u64>().ok())
            {
                inodes.insert(n);
            }
        }
    }
    let table = std::fs::read_to_string("/proc/net/unix").ok()?;
    let mut found = None;
    // Num RefCount Protocol Flags Type St Inode Path
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let listening = u64::from_str_radix(f[3], 16).is_ok_and(|x| x & 0x10000 != 0);
        let inode = f[6].parse::<u64>().ok();
        let path = f[7..].join(" ");
        if listening && inode.is_some_and(|i| inodes.contains(&i)) && path.starts_with('/') {
            if found.is_some() {
                return None;
            }
            found = Some(PathBuf::from(path));
        }
    }
    found
}

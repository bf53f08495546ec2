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
    // started with until a restart, so the file names a socket nobody listens on.
    // Under systemd (ExecReload sets MAINPID) the daemon still gets the reload, as a
    // SIGHUP, so that it refuses the change where the operator looks (status
    // config_refused, STATUS=, the log), and the reload fails: the outcome cannot be
    // read back without the socket. (Finding its socket through /proc does not work in
    // the unit's sandbox: ProtectProc=invisible with PrivateUsers=yes hides the main
    // process from the reload's.)
    let from_file = m.opt_str("socket").is_none();
    if from_file && cmd == "reload" && std::fs::symlink_metadata(&socket).is_err() {
        if let Some(pid) = std::env::var("MAINPID")
            .ok()
            .and_then(|p| p.parse::<i32>().ok())
            .filter(|&p| p > 1)
        {
            // SAFETY: kill(2) with a pid systemd named as this unit's main process.
            let sent = unsafe { libc::kill(pid, libc::SIGHUP) } == 0;
            eprintln!(
                "electctl: {} (the file's socket) does not exist: if the `socket` line changed, electd (pid {pid}) still listens on the socket it started with and refuses the change until a restart; {}",
                socket.display(),
                if sent {
                    "sent it SIGHUP: its status (config_refused) and log say what it did"
                } else {
                    "and it could not be sent SIGHUP"
                }
            );
            std::process::exit(1);
        }
    }
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

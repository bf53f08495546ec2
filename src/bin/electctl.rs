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
    match ctl::run(&socket, cmd, rest) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("electctl: {e}");
            std::process::exit(2);
        }
    }
}

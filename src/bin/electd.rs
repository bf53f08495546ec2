//! electd: flags, logging and the daemon's lifetime; everything else is in the library.

use electd::config::{Config, DEFAULT_PATH, Line};
use electd::daemon::{Daemon, Fatal};
use log::LevelFilter;
use std::io::Write;
use std::path::PathBuf;

fn usage(opts: &getopts::Options) -> String {
    opts.usage(
        "Usage: electd [--config PATH] [--id N] [--state-cluster OLD] [--check-config [--as-user NAME]] [--log-level LEVEL] [--version] [--help]",
    )
}

/// Logging through env_logger's format and levels into the bounded queue of
/// `logsink`, drained to stderr by its own thread: no other thread ever waits on a log
/// write (SPEC section 12). Without that thread (it could not start), straight to
/// stderr as before.
fn init_logging(level: LevelFilter) {
    let journal = std::env::var_os("JOURNAL_STREAM").is_some();
    let target = match electd::logsink::start(std::io::stderr()) {
        Ok(w) => env_logger::Target::Pipe(Box::new(w)),
        Err(e) => {
            eprintln!(
                "electd: cannot start the log writer thread ({e}): logging to stderr directly"
            );
            env_logger::Target::Stderr
        }
    };
    env_logger::Builder::new()
        .target(target)
        .filter_level(LevelFilter::Trace)
        .format(move |buf, rec| {
            if journal {
                // sd-daemon(3) priority prefixes: journald stores the level, not the text.
                let prio = match rec.level() {
                    log::Level::Error => 3,
                    log::Level::Warn => 4,
                    log::Level::Info => 6,
                    log::Level::Debug | log::Level::Trace => 7,
                };
                writeln!(buf, "<{prio}>{}", rec.args())
            } else {
                // No colour: the format writes no styles, and the crate is built
                // without its colour features (Cargo.toml).
                writeln!(
                    buf,
                    "{} {:<5} {}",
                    buf.timestamp_millis(),
                    rec.level(),
                    rec.args()
                )
            }
        })
        .init();
    log::set_max_level(level);
}

/// The exit status of a daemon that refuses its configuration, or a state file of
/// another server or cluster (sysexits' EX_CONFIG): the units do not restart it for
/// this status (RestartPreventExitStatus=78), since only the operator can help.
const EXIT_CONFIG: i32 = 78;

/// Reports a configuration the daemon refuses: it says, in one line (an error under
/// journald), what to do, and exits 78. (`--check-config` exits 1 as it always did.)
fn refused(why: &str) -> i32 {
    let err = if std::env::var_os("JOURNAL_STREAM").is_some() {
        "<3>"
    } else {
        ""
    };
    eprintln!(
        "{err}electd: {why}; not started: fix the file, check it with electd --check-config, then start electd again (exit status {EXIT_CONFIG}: systemd does not restart it)"
    );
    EXIT_CONFIG
}

fn main() {
    // First of all, before anything can take time: a SIGHUP or SIGTERM that arrives
    // while the daemon starts must wait for the loop, not kill it (SPEC section 12).
    if let Err(e) = electd::daemon::block_signals() {
        eprintln!("electd: cannot block signals: {e}");
        std::process::exit(1);
    }
    // A panic (a bug) prints after the lines queued before it, when the sink works.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().name() != Some(electd::logsink::THREAD_NAME) {
            electd::logsink::flush(LOG_FLUSH);
        }
        report(info);
    }));
    let code = run();
    // The last lines ("stopped", "stopping on error: ...") leave before the exit, unless
    // the sink is stalled: then the exit does not wait for it longer than this.
    electd::logsink::flush(LOG_FLUSH);
    std::process::exit(code);
}

/// The longest an exit waits for the log lines still queued.
const LOG_FLUSH: std::time::Duration = std::time::Duration::from_secs(2);

/// Raises the soft RLIMIT_NOFILE to the hard limit: the daemon's own caps keep it far
/// below 1024 descriptors, this is margin (a state write that fails for EMFILE is
/// fatal). The shipped units set LimitNOFILE and forbid setrlimit (`@resources`), so
/// there the raise is refused and the unit's value stands.
fn raise_nofile() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills `lim`, which we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return;
    }
    let was = lim.rlim_cur;
    if was < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: setrlimit with a valid rlimit, raising soft to hard.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            log::debug!(
                "descriptor limit (RLIMIT_NOFILE) {was}, not raised to {}: {}",
                lim.rlim_max,
                std::io::Error::last_os_error()
            );
            return;
        }
    }
    log::debug!(
        "descriptor limit (RLIMIT_NOFILE) {} (was {was}, hard {})",
        lim.rlim_cur,
        lim.rlim_max
    );
}

fn run() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = getopts::Options::new();
    opts.optopt(
        "c",
        "config",
        &format!("configuration file (default {DEFAULT_PATH})"),
        "PATH",
    );
    opts.optopt(
        "",
        "id",
        "this server's id, overriding the file's 'id'",
        "N",
    );
    opts.optopt(
        "",
        "state-cluster",
        "after a rename of the cluster: take this server's state file written under the former name OLD, keeping its votes",
        "OLD",
    );
    opts.optflag("", "check-config", "validate the configuration and exit");
    opts.optopt(
        "",
        "as-user",
        "with --check-config: check that user NAME can read the key files (default: the current user; as root, 'electd' if it exists)",
        "NAME",
    );
    opts.optopt(
        "",
        "log-level",
        "error, warn, info, debug or trace (default: the file's log-level, RUST_LOG, info)",
        "LEVEL",
    );
    opts.optflag("V", "version", "print the version and exit");
    opts.optflag("h", "help", "print this help and exit");
    let m = match opts.parse(&args) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("electd: {e}\n{}", usage(&opts));
            return 2;
        }
    };
    if m.opt_present("help") {
        print!("{}", usage(&opts));
        return 0;
    }
    if m.opt_present("version") {
        println!("electd {}", env!("CARGO_PKG_VERSION"));
        return 0;
    }
    if !m.free.is_empty() {
        eprintln!(
            "electd: unexpected argument '{}'\n{}",
            m.free[0],
            usage(&opts)
        );
        return 2;
    }
    let id = match m.opt_str("id").map(|v| {
        v.parse::<u16>()
            .ok()
            .filter(|i| (1..=255).contains(i))
            .ok_or(v)
    }) {
        None => None,
        Some(Ok(id)) => Some(id),
        Some(Err(v)) => {
            eprintln!("electd: --id '{v}' is not in 1..=255");
            return 2;
        }
    };
    let cli_level = match m
        .opt_str("log-level")
        .map(|v| v.parse::<LevelFilter>().map_err(|_| v))
    {
        None => None,
        Some(Ok(l)) => Some(l),
        Some(Err(v)) => {
            eprintln!("electd: --log-level '{v}' is not one of error, warn, info, debug, trace");
            return 2;
        }
    };
    if m.opt_present("as-user") && !m.opt_present("check-config") {
        eprintln!(
            "electd: --as-user goes with --check-config\n{}",
            usage(&opts)
        );
        return 2;
    }
    let state_cluster = m.opt_str("state-cluster");
    if state_cluster
        .as_deref()
        .is_some_and(|c| c.is_empty() || c.chars().any(char::is_whitespace))
    {
        eprintln!("electd: --state-cluster takes a cluster name: one word");
        return 2;
    }
    if state_cluster.is_some() && m.opt_present("check-config") {
        eprintln!(
            "electd: --state-cluster goes with a start, not with --check-config\n{}",
            usage(&opts)
        );
        return 2;
    }
    let path = PathBuf::from(m.opt_str("config").unwrap_or_else(|| DEFAULT_PATH.into()));
    if m.opt_present("check-config") {
        // No loop will take them: a check is stopped by SIGTERM or Ctrl-C as usual.
        if let Err(e) = electd::daemon::unblock_signals() {
            eprintln!("electd: cannot unblock signals: {e}");
            return 1;
        }
        let report = electd::config::check_config(&path, id, m.opt_str("as-user"));
        for line in &report.lines {
            match line {
                Line::Out(s) => println!("{s}"),
                Line::Warning(w) => eprintln!("electd: warning: {w}"),
                Line::Error(e) => eprintln!("electd: {e}"),
            }
        }
        return report.status;
    }
    let cfg = match Config::load_with_keys(&path, id) {
        Ok(c) => c,
        Err(e) => return refused(&e),
    };
    init_logging(electd::config::effective_log_level(
        cli_level,
        cfg.log_level,
    ));
    raise_nofile();
    // Off the loop before the control socket can receive a descriptor.
    electd::control::closer::start();
    // What --check-config warns about, in the log of every start.
    for w in cfg.warnings() {
        log::warn!("{w}");
    }
    let mut daemon = match Daemon::start(cfg, id, cli_level, state_cluster.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            log::error!("cannot start: {e}");
            // Another server's or cluster's state file: a restart would only refuse it
            // again, so the status the units do not restart for.
            return if matches!(e, Fatal::Foreign(_)) {
                EXIT_CONFIG
            } else {
                1
            };
        }
    };
    match daemon.run() {
        Ok(()) => 0,
        Err(e) => {
            log::error!("stopping on error: {e}");
            1
        }
    }
}

//! electd: flags, logging and the daemon's lifetime; everything else is in the library.

use electd::access::{self, DAEMON_USER, User};
use electd::addr::{self, Address};
use electd::config::{Config, DEFAULT_PATH, Transport};
use electd::daemon::Daemon;
use log::LevelFilter;
use std::io::Write;
use std::path::PathBuf;

fn usage(opts: &getopts::Options) -> String {
    opts.usage(
        "Usage: electd [--config PATH] [--id N] [--check-config [--as-user NAME]] [--log-level LEVEL]",
    )
}

/// The user whose access `--check-config` checks the key files for, and a note saying
/// which was assumed. `--as-user NAME`; else, as root, the unit's user `electd` if it
/// exists (root can read anything, so root's own open would prove nothing), else root;
/// else the current user.
fn key_reader(as_user: Option<String>) -> Result<(User, Option<String>), String> {
    if let Some(name) = as_user {
        return match access::lookup(&name)? {
            Some(u) => Ok((u, None)),
            None => Err(format!("--as-user: no user '{name}' on this system")),
        };
    }
    let me = access::current();
    if me.uid != 0 {
        return Ok((me, None));
    }
    Ok(match access::lookup(DAEMON_USER)? {
        Some(u) => (
            u,
            Some(format!(
                "key files checked for user {DAEMON_USER}, the unit's user (--as-user NAME checks another)"
            )),
        ),
        None => (
            me,
            Some(format!(
                "no user '{DAEMON_USER}' here: key files checked for root; --as-user NAME checks them for the user electd runs as"
            )),
        ),
    })
}

/// `--check-config`: the key files are readable by `user` (SPEC section 10). As that
/// user, `load_keys` has opened them already; as root for another user, a child acting
/// as that user opens them.
fn check_key_access(cfg: &Config, user: &User) -> Result<(), (i32, String)> {
    let keys: Vec<&std::path::Path> = cfg
        .key_file
        .iter()
        .chain(cfg.key_file_next.iter())
        .map(PathBuf::as_path)
        .collect();
    let me = access::current();
    if keys.is_empty() || user.uid == me.uid {
        return Ok(());
    }
    if me.uid != 0 {
        return Err((
            2,
            format!(
                "--as-user {}: only root can check the key files for another user; run the check as {0}",
                user.name
            ),
        ));
    }
    for k in keys {
        access::readable_as(k, user).map_err(|e| (1, e))?;
    }
    Ok(())
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

/// `FILE:LINE` of the key-file line a key error `e` is about.
fn key_place(cfg: &Config, e: &str) -> String {
    let next = cfg
        .key_file_next
        .as_ref()
        .is_some_and(|n| e.contains(&n.display().to_string()));
    cfg.place(if next { "key-file-next" } else { "key-file" })
}

/// `--check-config` as root for the daemon's user `user` (the unit's, by default): the
/// file must be readable by it (an error: the daemon could not start), and each check
/// command runnable by it (a warning: the checks would fail, SPEC section 13).
fn as_daemon_user(cfg: &Config, user: &User) -> Result<Vec<String>, String> {
    if access::current().uid != 0 || user.uid == 0 {
        return Ok(Vec::new());
    }
    let file = cfg.path.display();
    access::can_as(&cfg.path, user, access::Can::Read).map_err(|e| {
        format!(
            "{file}: user {} cannot read it: {e}; electd, running as {0}, would not start",
            user.name
        )
    })?;
    let mut warnings = Vec::new();
    let mut seen = Vec::new();
    for c in cfg.groups.iter().filter_map(|g| g.check.as_ref()) {
        let cmd = std::path::Path::new(&c.argv[0]);
        if seen.contains(&c.line) || !cmd.is_absolute() || !cmd.exists() {
            continue;
        }
        seen.push(c.line);
        if let Err(e) = access::can_as(cmd, user, access::Can::Run) {
            warnings.push(format!(
                "{file}:{}: check {}: user {} cannot run it: {e}; checks will fail and this server will stay unhealthy",
                c.line,
                cmd.display(),
                user.name
            ));
        }
    }
    Ok(warnings)
}

/// With `--id` (the template unit `electd@N` passes it, so that one file serves every
/// instance on a host): a `socket` or `state` path without `{id}` is the same for every
/// instance, which would then share one socket. Checked by loading the file as another
/// server of the list.
fn shared_path_warnings(cfg: &Config, id: Option<u16>) -> Vec<String> {
    let Some(other) = id.and_then(|_| cfg.servers.iter().map(|s| s.id).find(|&s| s != cfg.id))
    else {
        return Vec::new();
    };
    let Ok(o) = Config::load(&cfg.path, Some(other)) else {
        return Vec::new();
    };
    let file = cfg.path.display();
    let mut w = Vec::new();
    if o.socket == cfg.socket {
        w.push(format!(
            "{file}: socket {} has no {{id}}, and --id is given: instances on one host would share it (the template unit electd@N expects socket /run/electd/electd-{{id}}.sock)",
            cfg.socket.display()
        ));
    }
    if o.state == cfg.state {
        w.push(format!(
            "{file}: state {} has no {{id}}, and --id is given: a second instance on this host would find it locked",
            cfg.state.display()
        ));
    }
    w
}

/// `--check-config` on this host (SPEC section 16): names resolve to the cluster's
/// family and the multicast interface has an address of it (errors, printed; None),
/// and this server's own address is one of this host's (a warning, returned). Not an
/// error: the daemon binds it with freebind and works once it is up, and the unit runs
/// `--check-config` before every start, at boot too, when it may not be up yet.
fn check_host(cfg: &Config) -> Option<Vec<String>> {
    let file = cfg.path.display();
    let addrs = match cfg.resolve() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("electd: {e}");
            return None;
        }
    };
    for s in &cfg.servers {
        if let Some((_, a)) = addrs
            .iter()
            .find(|a| a.0 == s.id && s.addr != Address::Ip(a.1))
        {
            println!("{file}:{}: server {} {} is {a}", s.line, s.id, s.addr);
        }
    }
    if let Transport::Multicast {
        group, interface, ..
    } = &cfg.transport
    {
        if let Err(e) = addr::multicast_interface(interface, cfg.family) {
            eprintln!("electd: {}: multicast {group}: {e}", cfg.place("multicast"));
            return None;
        }
    }
    // The metrics listener has no freebind: an address that is not this host's, or a
    // privileged port without the capability, stops the daemon at start.
    if let Some(ml) = cfg.metrics_listen {
        match addr::is_local(ml.ip()) {
            Ok(true) => {}
            Ok(false) => {
                eprintln!(
                    "electd: {}: metrics-listen {ml}: {} is not an address of this host: the daemon could not start",
                    cfg.place("metrics-listen"),
                    ml.ip()
                );
                return None;
            }
            Err(e) => {
                eprintln!(
                    "electd: {}: metrics-listen {ml}: {e}",
                    cfg.place("metrics-listen")
                );
                return None;
            }
        }
    }
    let me = addrs.iter().find(|a| a.0 == cfg.id)?.1;
    let mut warnings: Vec<String> = addr::own_address_problem(cfg.id, me)
        .map(|why| format!("{file}:{}: {why}", cfg.me().line))
        .into_iter()
        .collect();
    if let Transport::Multicast { ttl: 0, group, .. } = &cfg.transport {
        for (sid, a) in &addrs {
            if *sid != cfg.id && matches!(addr::is_local(a.ip()), Ok(false)) {
                warnings.push(format!(
                    "{}: multicast {group} ttl 0 keeps datagrams on this host, but server {sid} ({a}) is not an address of this host: it would never hear this server's LEADs",
                    cfg.place("multicast")
                ));
            }
        }
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if let Some(ml) = cfg.metrics_listen.filter(|m| m.port() < 1024 && !root) {
        warnings.push(format!(
            "{}: metrics-listen {ml}: port {} is below 1024, which needs CAP_NET_BIND_SERVICE (the unit grants none): use a port above 1023",
            cfg.place("metrics-listen"),
            ml.port()
        ));
    }
    Some(warnings)
}

/// The exit status of a daemon that refuses its configuration (sysexits' EX_CONFIG):
/// the units do not restart it for this status (RestartPreventExitStatus=78), since
/// only an edit can help.
const EXIT_CONFIG: i32 = 78;

/// Reports a configuration the daemon refuses: `--check-config` exits 1 as it always
/// did; a daemon says, in one line (an error under journald), what to do, and exits 78.
fn refused(check: bool, why: &str) -> i32 {
    if check {
        eprintln!("electd: {why}");
        return 1;
    }
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
    if m.opt_present("check-config") {
        // No loop will take them: a check is stopped by SIGTERM or Ctrl-C as usual.
        if let Err(e) = electd::daemon::unblock_signals() {
            eprintln!("electd: cannot unblock signals: {e}");
            return 1;
        }
    }
    let path = PathBuf::from(m.opt_str("config").unwrap_or_else(|| DEFAULT_PATH.into()));
    let check = m.opt_present("check-config");
    let cfg = match Config::load(&path, id) {
        Ok(c) => c,
        Err(e) => return refused(check, &e.to_string()),
    };
    if let Err(e) = electd::auth::load_keys(cfg.key_file.as_deref(), cfg.key_file_next.as_deref()) {
        return refused(check, &format!("{}: {e}", key_place(&cfg, &e)));
    }
    if m.opt_present("check-config") {
        let (reader, note) = match key_reader(m.opt_str("as-user")) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("electd: {e}");
                return 2;
            }
        };
        if let Err((code, e)) = check_key_access(&cfg, &reader) {
            eprintln!("electd: {}: {e}", key_place(&cfg, &e));
            return code;
        }
        let run_warnings = match as_daemon_user(&cfg, &reader) {
            Ok(w) => w,
            Err(e) => {
                eprintln!("electd: {e}");
                return 1;
            }
        };
        let Some(host_warnings) = check_host(&cfg) else {
            return 1;
        };
        // Warnings do not fail the check: the daemon runs with them (SPEC section 13).
        let shared = shared_path_warnings(&cfg, id);
        for w in cfg
            .warnings()
            .into_iter()
            .chain(host_warnings)
            .chain(shared)
            .chain(run_warnings)
        {
            eprintln!("electd: warning: {w}");
        }
        println!(
            "{}: OK: cluster '{}', {} servers, this server {} ({}), fingerprint {:08x}",
            path.display(),
            cfg.cluster,
            cfg.servers.len(),
            cfg.id,
            cfg.name_of(cfg.id),
            cfg.fingerprint()
        );
        // One line per group, so an operator sees who prefers whom (SPEC section 15);
        // a file without group lines prints as it always did.
        if cfg.has_groups() {
            for line in (0..cfg.groups.len()).filter_map(|g| cfg.group_summary(g)) {
                println!("{line}");
            }
        }
        if cfg.key_file.is_some() {
            println!(
                "key files readable by user {} (uid {}){}",
                reader.name,
                reader.uid,
                note.map_or(String::new(), |n| format!(": {n}"))
            );
        }
        return 0;
    }
    let env_level = std::env::var("RUST_LOG").ok().and_then(|v| v.parse().ok());
    init_logging(
        cli_level
            .or(cfg.log_level)
            .or(env_level)
            .unwrap_or(LevelFilter::Info),
    );
    // What --check-config warns about, in the log of every start.
    for w in cfg.warnings() {
        log::warn!("{w}");
    }
    let mut daemon = match Daemon::start(cfg, id, cli_level) {
        Ok(d) => d,
        Err(e) => {
            log::error!("cannot start: {e}");
            return 1;
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

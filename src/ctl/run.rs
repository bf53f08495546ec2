//! `electctl run`'s options, read into the supervisor's settings before it starts.

use super::USAGE;
use crate::config::parse_duration;
use crate::control::valid_group_name;
use crate::supervise::{self, RunOptions};
use std::path::Path;
use std::time::Duration;

/// `run`'s options: long name, description, value.
const OPTIONS: [(&str, &str, &str); 5] = [
    (
        "group",
        "the election group whose lease the command follows (default: the only one)",
        "GROUP",
    ),
    (
        "grace",
        "time between SIGTERM and SIGKILL (default 100ms); must fit in the lease",
        "DURATION",
    ),
    (
        "poll",
        "reconnect interval (default 20ms); once registered, electd is never asked again",
        "DURATION",
    ),
    (
        "max-restarts",
        "exits within --restart-window that make this server unhealthy",
        "N",
    ),
    (
        "restart-window",
        "the window for --max-restarts (default 1m)",
        "DURATION",
    ),
];

/// `electctl run [OPTIONS] -- CMD [ARGS]`: reads the options and runs the supervisor
/// until it stops; Ok(its exit code).
pub(super) fn run_command(socket: &Path, rest: &[String]) -> Result<i32, String> {
    let mut opts = getopts::Options::new();
    opts.parsing_style(getopts::ParsingStyle::StopAtFirstFree);
    for (name, help, hint) in OPTIONS {
        opts.optopt("", name, help, hint);
    }
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
    if grace > supervise::MAX_GRACE {
        // The daemon would refuse it in `supervise`, an error `run` does not know: it
        // would wait without running CMD, saying so once.
        return Err(format!(
            "run --grace {} is more than 24h: no lease could leave it room (the daemon refuses graces above a day)",
            m.opt_str("grace").unwrap_or_default()
        ));
    }
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

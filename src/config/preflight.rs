//! `electd --check-config`: what a start would refuse or warn about, found before it
//! starts (an operator runs it before a start or reload; the start does the same checks): the file, the key files and check
//! commands as the daemon's user (SPEC sections 10 and 13), this host's addresses and
//! interfaces (section 16), paths an `--id` instance would share, and a state file a
//! start would refuse (section 4).

use super::{Config, Transport};
use crate::access::{self, DAEMON_USER, User};
use crate::addr::{self, Address};
use std::path::{Path, PathBuf};

/// One line of a `--check-config` report, in the order the checks found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    /// For stdout: the summary, a group, a name and what it resolves to, the key
    /// files' reader.
    Out(String),
    /// For stderr after `electd: warning: `; it does not fail the check: the daemon
    /// runs with it (SPEC section 13).
    Warning(String),
    /// For stderr after `electd: `; it fails the check.
    Error(String),
}

/// What `--check-config` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// Every finding, in order; an `Error` is the last.
    pub lines: Vec<Line>,
    /// The exit status: 0 passed; 1 the file, a key file, a check or this host fails;
    /// 2 `--as-user` cannot be checked.
    pub status: i32,
}

/// Runs every check of `electd --check-config` on the file at `path`: `id` is `--id`,
/// `as_user` is `--as-user` (the user the key files and check commands are checked
/// for; see `key_reader`).
pub fn check_config(path: &Path, id: Option<u16>, as_user: Option<String>) -> Report {
    let mut lines = Vec::new();
    let status = match run(path, id, as_user, &mut lines) {
        Ok(()) => 0,
        Err((status, e)) => {
            lines.push(Line::Error(e));
            status
        }
    };
    Report { lines, status }
}

/// The checks in turn, each error with its exit status; findings go to `lines`.
fn run(
    path: &Path,
    id: Option<u16>,
    as_user: Option<String>,
    lines: &mut Vec<Line>,
) -> Result<(), (i32, String)> {
    let cfg = Config::load_with_keys(path, id).map_err(|e| (1, e))?;
    let (reader, note) = key_reader(as_user).map_err(|e| (2, e))?;
    check_key_access(&cfg, &reader)
        .map_err(|(code, e)| (code, format!("{}: {e}", cfg.key_place(&e))))?;
    let run_warnings = as_daemon_user(&cfg, &reader).map_err(|e| (1, e))?;
    let host_warnings = check_host(&cfg, lines).map_err(|e| (1, e))?;
    let state_warning = check_state(&cfg).map_err(|e| (1, e))?;
    let shared = shared_path_warnings(&cfg, id);
    lines.extend(
        cfg.warnings()
            .into_iter()
            .chain(host_warnings)
            .chain(shared)
            .chain(state_warning)
            .chain(run_warnings)
            .map(Line::Warning),
    );
    lines.push(Line::Out(format!(
        "{}: OK: cluster '{}', {} servers, this server {} ({}), fingerprint {:08x}",
        path.display(),
        cfg.cluster,
        cfg.servers.len(),
        cfg.id,
        cfg.name_of(cfg.id),
        cfg.fingerprint()
    )));
    // One line per group, so an operator sees who prefers whom (SPEC section 15); a
    // file without group lines prints as it always did.
    if cfg.has_groups() {
        let groups = (0..cfg.groups.len()).filter_map(|g| cfg.group_summary(g));
        lines.extend(groups.map(Line::Out));
    }
    if cfg.key_file.is_some() {
        lines.push(Line::Out(format!(
            "key files readable by user {} (uid {}){}",
            reader.name,
            reader.uid,
            note.map_or(String::new(), |n| format!(": {n}"))
        )));
    }
    Ok(())
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

/// The key files are readable by `user` (SPEC section 10). As that user,
/// `Config::load_with_keys` has opened them already; as root for another user, a child
/// acting as that user opens them.
fn check_key_access(cfg: &Config, user: &User) -> Result<(), (i32, String)> {
    let keys: Vec<&Path> = cfg
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

/// As root for the daemon's user `user` (the unit's, by default): the file must be
/// readable by it (an error: the daemon could not start), and each check command
/// runnable by it (a warning: the checks would fail, SPEC section 13).
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
        let cmd = Path::new(&c.argv[0]);
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

/// The state file, read as a start reads it (SPEC section 4), neither locked nor
/// written: one of another server or cluster, or a corrupt one, is an error with the
/// message the start would give (the start exits 78 or 1 on it), as is one that is not
/// a regular file. One this user may not read is a warning: the check may run as
/// someone other than the daemon's user.
fn check_state(cfg: &Config) -> Result<Option<String>, String> {
    use crate::store::{Identity, Store, StoreError};
    let this = Identity {
        id: cfg.id,
        cluster: cfg.cluster.clone(),
    };
    // A FIFO or another non-regular file in its place is refused, not read (store.rs).
    match Store::new(&cfg.state, this).load_as(None) {
        Ok(_) => Ok(None),
        Err(StoreError::Io(p, e)) if e.kind() == std::io::ErrorKind::PermissionDenied => Ok(Some(
            format!("state file {}: {e}: not checked", p.display()),
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// This host (SPEC section 16): names resolve to the cluster's family, and the
/// multicast interface and the metrics listener have an address of this host (errors);
/// each name and what it resolves to goes to `lines`. Warnings, returned: this
/// server's own address is not one of this host's (not an error: the daemon binds it
/// with freebind and works once it is up, and a check may run at boot, before the
/// address is up), a `ttl 0` that cannot reach
/// the others, a privileged metrics port.
fn check_host(cfg: &Config, lines: &mut Vec<Line>) -> Result<Vec<String>, String> {
    let file = cfg.path.display();
    let addrs = cfg.resolve().map_err(|e| e.to_string())?;
    for s in &cfg.servers {
        if let Some((_, a)) = addrs
            .iter()
            .find(|a| a.0 == s.id && s.addr != Address::Ip(a.1))
        {
            lines.push(Line::Out(format!(
                "{file}:{}: server {} {} is {a}",
                s.line, s.id, s.addr
            )));
        }
    }
    if let Transport::Multicast {
        group, interface, ..
    } = &cfg.transport
    {
        addr::multicast_interface(interface, cfg.family)
            .map_err(|e| format!("{}: multicast {group}: {e}", cfg.place("multicast")))?;
    }
    // The metrics listener has no freebind: an address that is not this host's, or a
    // privileged port without the capability, stops the daemon at start.
    if let Some(ml) = cfg.metrics_listen {
        let place = cfg.place("metrics-listen");
        match addr::is_local(ml.ip()) {
            Ok(true) => {}
            Ok(false) => {
                return Err(format!(
                    "{place}: metrics-listen {ml}: {} is not an address of this host: the daemon could not start",
                    ml.ip()
                ));
            }
            Err(e) => return Err(format!("{place}: metrics-listen {ml}: {e}")),
        }
    }
    // `resolve` answers for every server, this one too.
    let mut warnings: Vec<String> = addrs
        .iter()
        .find(|a| a.0 == cfg.id)
        .and_then(|&(_, me)| addr::own_address_problem(cfg.id, me))
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
    Ok(warnings)
}

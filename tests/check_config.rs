//! `electd --check-config` for an operator's first day (issue 23, item 3): every
//! message names the file's line; a key file that is a directory says so; run as root,
//! the configuration file and the check command are checked as the daemon's user (a
//! file only root can read passed, and the restart then failed with "Permission
//! denied"), as the key files already are.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("electd-checkcfg-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    // Others may enter it: the checks run as `nobody` must reach the files in it.
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

fn said(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `electd --config CONF --check-config ARGS`.
fn check(conf: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_electd"))
        .arg("--config")
        .arg(conf)
        .arg("--check-config")
        .args(args)
        .output()
        .unwrap()
}

/// A one-server file in `dir` (line 1 cluster, 2 server, 3 id, 4 unicast, 5 socket,
/// 6 state), then `extra` from line 7 on.
fn conf(dir: &Path, extra: &str) -> PathBuf {
    let p = dir.join("electd.conf");
    std::fs::write(
        &p,
        format!(
            "cluster c\nserver 1 127.0.0.1:7400\nid 1\nunicast\nsocket {0}/1.sock\nstate {0}/1.state\n{extra}",
            dir.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    p
}

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn key_host_and_listener_messages_name_their_line() {
    let dir = scratch("lines");
    let keydir = dir.join("key.d");
    std::fs::create_dir_all(&keydir).unwrap();
    for (extra, want) in [
        (
            format!("key-file {}\n", keydir.display()),
            format!(
                "electd.conf:7: key file {} is a directory: key-file names a file holding the secret",
                keydir.display()
            ),
        ),
        (
            format!("key-file {}/missing\n", dir.display()),
            format!("electd.conf:7: key file {}/missing: No such file", dir.display()),
        ),
        (
            "metrics-listen 192.0.2.99:9477\n".to_string(),
            "electd.conf:7: metrics-listen 192.0.2.99:9477: 192.0.2.99 is not an address of this host".into(),
        ),
    ] {
        let p = conf(&dir, &extra);
        let o = check(&p, &[]);
        assert_eq!(o.status.code(), Some(1), "{extra}: {}", said(&o));
        assert!(said(&o).contains(&want), "{extra}: want {want}: {}", said(&o));
    }
    // The multicast interface: the transport's line.
    let p = dir.join("mc.conf");
    std::fs::write(
        &p,
        format!(
            "cluster c\nserver 1 127.0.0.1:7400\nid 1\nmulticast 239.255.77.1:7400 interface electd-nope0\nsocket {0}/1.sock\n",
            dir.display()
        ),
    )
    .unwrap();
    let o = check(&p, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(
        said(&o).contains("mc.conf:4: multicast 239.255.77.1:7400: "),
        "{}",
        said(&o)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// As root, `--check-config --as-user nobody` (the unit's user by default) refuses a
/// file that user cannot read, and warns about a check it cannot run.
#[test]
fn config_file_and_check_are_checked_as_the_daemons_user() {
    if !root() {
        eprintln!("SKIPPED: needs root (to check for another user)");
        assert!(std::env::var_os("CI").is_none(), "CI runs as root");
        return;
    }
    let dir = scratch("as-user");
    let p = conf(&dir, "");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = check(&p, &["--as-user", "nobody"]);
    let text = said(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    for must in [
        "electd.conf: user nobody cannot read it",
        "Permission denied",
        "chmod 0640",
    ] {
        assert!(text.contains(must), "lacks {must}: {text}");
    }
    // Readable by that user: OK.
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = check(&p, &["--as-user", "nobody"]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    // A check only root may run: a warning naming the check's line.
    let script = dir.join("healthy");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o700)).unwrap();
    let p = conf(&dir, &format!("check {}\n", script.display()));
    let o = check(&p, &["--as-user", "nobody"]);
    let text = said(&o);
    assert_eq!(o.status.code(), Some(0), "a warning: {text}");
    assert!(
        text.contains(&format!(
            "electd.conf:7: check {}: user nobody cannot run it",
            script.display()
        )) && text.contains("warning: "),
        "{text}"
    );
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = check(&p, &["--as-user", "nobody"]);
    assert!(!said(&o).contains("cannot run it"), "{}", said(&o));
    std::fs::remove_dir_all(dir).unwrap();
}

/// SPEC section 15 (issue 22): `balance on` without `preempt-delay` passes the check
/// (exit 0) with a warning that the spread is not restored after a failure; with
/// `preempt-delay` there is none. A daemon started without `--check-config` logs the
/// same warning once, for the operator who never runs the check.
#[test]
fn balance_without_preempt_delay_is_warned_by_the_check_and_at_start() {
    let dir = scratch("balance");
    let p = dir.join("electd.conf");
    let ports = common::free_udp_ports(3);
    let base = format!(
        "cluster c\nserver 1 127.0.0.1:{}\nserver 2 127.0.0.1:{}\nserver 3 127.0.0.1:{}\nid 1\nunicast\nheartbeat 100ms\nrtt 20ms\nsocket {3}/1.sock\nstate {3}/1.state\n",
        ports[0],
        ports[1],
        ports[2],
        dir.display()
    );
    let groups = "group orders\ngroup payments\ngroup audit\n";
    let warned = format!(
        "{}:11: balance on without preempt-delay: balance cannot restore the spread after a failure (a group that moved stays on its new leader); set preempt-delay",
        p.display()
    );
    std::fs::write(&p, format!("{base}balance on\n{groups}")).unwrap();
    let o = check(&p, &[]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "a warning, not an error: {}",
        said(&o)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("electd: warning: {warned}\n")),
        "{}",
        said(&o)
    );
    // The daemon's log at start: the same text, once.
    let log = dir.join("1.log");
    let child = Command::new(env!("CARGO_BIN_EXE_electd"))
        .arg("--config")
        .arg(&p)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    let started = common::eventually(Duration::from_secs(5), || text().contains(" started: "));
    common::signal(&child, libc::SIGTERM);
    let exit = common::wait_exit(child, Duration::from_secs(5));
    let text = text();
    assert!(started, "the daemon never said it started: {text}");
    assert_eq!(
        text.matches(&warned).count(),
        1,
        "the start logs the warning once: {text}"
    );
    assert_eq!(exit, Some(0), "{text}");
    // With preempt-delay: no such warning.
    std::fs::write(&p, format!("{base}balance on\npreempt-delay 1s\n{groups}")).unwrap();
    let o = check(&p, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    assert!(!said(&o).contains("warning"), "{}", said(&o));
    std::fs::remove_dir_all(dir).unwrap();
}

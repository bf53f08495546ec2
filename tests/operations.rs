//! Running it in production (issue 4): the notify protocol, hooks, SIGHUP reload and
//! journald log prefixes, on real daemons.

mod common;

use common::{Cluster, Mode, SERIAL, signal, wait_exit};
use electd::json::Value;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A bounded wait: `within` times the slack factor (`common::slack`).
fn wait_for(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + common::slacked(within);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn hook_dir() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("electd-hooks-{}-{k}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// SPEC 12: READY=1 once sockets are bound and state loaded, STATUS= on changes,
/// WATCHDOG=1 at half of WATCHDOG_USEC, STOPPING=1 on SIGTERM.
#[test]
fn notify_protocol() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = hook_dir();
    let path = dir.join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let p = path.to_str().unwrap();
    let mut c = Cluster::start_with(
        Mode::Unicast,
        1,
        "",
        &[("NOTIFY_SOCKET", p), ("WATCHDOG_USEC", "200000")],
    );
    let mut got: Vec<String> = Vec::new();
    let mut buf = [0u8; 512];
    let start = Instant::now();
    while start.elapsed() < common::slacked(Duration::from_secs(3)) {
        let n = sock.recv(&mut buf).expect("a notification");
        got.push(String::from_utf8_lossy(&buf[..n]).to_string());
        let dogs = got.iter().filter(|m| *m == "WATCHDOG=1").count();
        if got.iter().any(|m| m.starts_with("STATUS=leader")) && dogs >= 3 {
            break;
        }
    }
    assert_eq!(got[0], "READY=1", "{got:?}");
    assert!(
        got.iter()
            .any(|m| m == "STATUS=follower, no leader, term 0"),
        "{got:?}"
    );
    assert!(
        got.iter().any(|m| m.starts_with("STATUS=leader, term ")),
        "{got:?}"
    );
    assert!(
        got.iter().filter(|m| *m == "WATCHDOG=1").count() >= 3,
        "{got:?}"
    );
    let child = c.terminate(1);
    let mut stopping = false;
    while let Ok(n) = sock.recv(&mut buf) {
        if &buf[..n] == b"STOPPING=1" {
            stopping = true;
            break;
        }
    }
    assert!(stopping, "STOPPING=1 on SIGTERM");
    assert_eq!(wait_exit(child, Duration::from_secs(2)), Some(0));
    std::fs::remove_dir_all(dir).unwrap();
}

/// SPEC 12: hooks run one at a time, in the order of the transitions, with the
/// ELECTD_* environment; the loop keeps answering while one runs.
#[test]
fn hooks_run_in_order_one_at_a_time() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = hook_dir();
    let log = dir.join("hooks.log");
    let hook = script(
        &dir,
        "hook.sh",
        &format!(
            "echo \"start $ELECTD_ROLE $ELECTD_TERM $ELECTD_ID [$ELECTD_LEADER]\" >> {0}\nsleep 0.3\necho \"end $ELECTD_ROLE\" >> {0}",
            log.display()
        ),
    );
    let extra = format!(
        "on-leader {0}\non-follower {0}\nhook-timeout 5s\n",
        hook.display()
    );
    let c = Cluster::start_with(Mode::Unicast, 1, &extra, &[]);
    wait_for("the first on-leader hook", Duration::from_secs(3), || {
        lines(&log).iter().any(|l| l == "end leader")
    });
    // Resign: follower at once; re-elected a round later, while on-follower still runs.
    assert!(c.request(1, "yield").unwrap().contains("ok"));
    let t = Instant::now();
    assert!(c.status(1).is_some());
    assert!(
        t.elapsed() < common::slacked(Duration::from_millis(100)),
        "the loop answers while a hook runs"
    );
    wait_for("three hooks", Duration::from_secs(5), || {
        lines(&log).iter().filter(|l| l.starts_with("end")).count() >= 3
    });
    let l = lines(&log);
    let shape: Vec<String> = l
        .iter()
        .take(6)
        .map(|x| x.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        shape,
        [
            "start leader",
            "end leader",
            "start follower",
            "end follower",
            "start leader",
            "end leader"
        ],
        "{l:?}"
    );
    assert!(
        l[0].ends_with(" 1 [1]"),
        "ELECTD_ID and ELECTD_LEADER: {}",
        l[0]
    );
    let term = |i: usize| l[i].split(' ').nth(2).unwrap().parse::<u64>().unwrap();
    assert!(
        term(4) > term(0),
        "the second leadership has a higher term: {l:?}"
    );
    assert_eq!(c.metric(1, "electd_hook_runs_total"), 3);
    assert_eq!(c.metric(1, "electd_hook_failures_total"), 0);
    drop(c);
    std::fs::remove_dir_all(dir).unwrap();
}

/// SPEC 12: a hook past hook-timeout is killed, a failing hook is logged with its exit
/// status, and neither disturbs the role.
#[test]
fn hooks_time_out_and_fail_loudly() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = hook_dir();
    let marker = dir.join("still-running");
    let slow = script(
        &dir,
        "slow.sh",
        &format!("sleep 3\ntouch {}", marker.display()),
    );
    let fail = script(&dir, "fail.sh", "exit 3");
    let extra = format!(
        "on-leader {}\non-follower {}\nhook-timeout 200ms\n",
        slow.display(),
        fail.display()
    );
    let c = Cluster::start_with(Mode::Unicast, 1, &extra, &[]);
    wait_for("the slow hook to be killed", Duration::from_secs(3), || {
        c.log(1).contains("killed after")
    });
    assert!(
        c.log(1).contains("outlived hook-timeout 200ms"),
        "{}",
        c.log(1)
    );
    assert_eq!(
        c.status(1).unwrap().get("role").and_then(Value::as_str),
        Some("leader")
    );
    assert!(c.request(1, "yield").unwrap().contains("ok"));
    wait_for("the failing hook", Duration::from_secs(3), || {
        c.log(1).contains("failed with exit status 3")
    });
    assert!(c.metric(1, "electd_hook_failures_total") >= 2);
    std::thread::sleep(Duration::from_millis(3300));
    assert!(
        !marker.exists(),
        "the killed hook's whole group died, sleep included"
    );
    drop(c);
    std::fs::remove_dir_all(dir).unwrap();
}

/// SPEC 12: SIGHUP applies new timers without a role change; a changed server list is
/// refused and the running configuration stays.
#[test]
fn sighup_reloads_timers_and_refuses_a_new_server_list() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::start_with(Mode::Unicast, 1, "", &[]);
    let lease_ms = || {
        c.status(1)
            .and_then(|v| v.get("lease_ms").and_then(Value::as_u64))
            .unwrap_or(0)
    };
    wait_for("leadership", Duration::from_secs(3), || lease_ms() > 0);
    let term = c
        .status(1)
        .unwrap()
        .get("term")
        .and_then(Value::as_u64)
        .unwrap();
    assert!(lease_ms() <= 294, "K*HBT*(1-2rho) at 100ms");
    let text = std::fs::read_to_string(&c.conf).unwrap();
    std::fs::write(&c.conf, text.replace("heartbeat 100ms", "heartbeat 200ms")).unwrap();
    signal_daemon(&c);
    wait_for("the reload", Duration::from_secs(2), || {
        c.log(1).contains("configuration reloaded: heartbeat 200ms")
    });
    wait_for("a longer lease", Duration::from_secs(2), || {
        lease_ms() > 300
    });
    let v = c.status(1).unwrap();
    assert_eq!(
        v.get("role").and_then(Value::as_str),
        Some("leader"),
        "no role change"
    );
    assert_eq!(
        v.get("term").and_then(Value::as_u64),
        Some(term),
        "no new term"
    );

    let now = std::fs::read_to_string(&c.conf).unwrap();
    std::fs::write(
        &c.conf,
        now.replacen("unicast\n", "server 2 127.0.0.1:9\nunicast\n", 1),
    )
    .unwrap();
    signal_daemon(&c);
    wait_for("the refusal", Duration::from_secs(2), || {
        c.log(1)
            .contains("reload refused: the cluster name or server list changed")
    });
    std::thread::sleep(Duration::from_millis(300));
    let v = c.status(1).unwrap();
    assert_eq!(
        v.get("role").and_then(Value::as_str),
        Some("leader"),
        "still leading alone: the list stayed"
    );
    assert_eq!(v.get("term").and_then(Value::as_u64), Some(term));
    assert_eq!(
        v.get("peers").and_then(Value::as_array).map(<[Value]>::len),
        Some(0)
    );
}

fn signal_daemon(c: &Cluster) {
    signal(c.child(1), libc::SIGHUP);
}

/// SPEC 12: under journald each line carries its priority prefix.
#[test]
fn journald_priority_prefixes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::start_with(Mode::Unicast, 1, "", &[("JOURNAL_STREAM", "8:12345")]);
    wait_for("an election", Duration::from_secs(3), || {
        c.log(1).contains("elected leader")
    });
    let log = c.log(1);
    assert!(
        log.lines().any(|l| l == "<6>elected leader of term 1"),
        "{log}"
    );
    assert!(
        log.lines()
            .filter(|l| !l.is_empty())
            .all(|l| l.starts_with('<')),
        "{log}"
    );
}

//! Running it in production (issue 4): the notify protocol, hooks, SIGHUP reload and
//! journald log prefixes, on real daemons.

mod common;

use common::electctl_at as electctl;

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
    assert!(
        c.log(1)
            .lines()
            .any(|l| l.contains("killed after") && l.contains("(pid ")),
        "the kill's line names no pid:\n{}",
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

/// A single-server cluster that leads, with `on-follower` set to `body` and
/// `hook-timeout` to `timeout`, and the directory of the hook's files.
fn leader_with_on_follower(body: &str, timeout: &str) -> (Cluster, PathBuf) {
    let dir = hook_dir();
    let hook = script(&dir, "on-follower.sh", body);
    let extra = format!("on-follower {}\nhook-timeout {timeout}\n", hook.display());
    let c = Cluster::start_with(Mode::Unicast, 1, &extra, &[]);
    c.agreement(Duration::from_secs(3));
    (c, dir)
}

/// SIGTERM to server 1 and its exit, waited for at most 10 s (times the slack): its
/// exit status, how long it took, and its log.
fn sigterm_and_wait(c: &mut Cluster) -> (Option<i32>, Duration, String) {
    let t0 = Instant::now();
    let code = wait_exit(c.terminate(1), Duration::from_secs(10));
    (code, t0.elapsed(), c.log(1))
}

/// README "Signals": SIGTERM makes a leader resign, which starts its `on-follower`
/// hook (the one that stops the processor); the daemon exits only once that hook has
/// finished. (It used to exit as soon as the RESIGN was out, and under systemd the
/// stop then killed the hook's processes with the rest of the unit's control group,
/// leaving the processor running on a server that no longer leads.)
#[test]
fn sigterm_waits_for_the_on_follower_hook() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (mut c, dir) = leader_with_on_follower("sleep 1\ntouch \"$(dirname \"$0\")/done\"", "5s");
    let (code, took, log) = sigterm_and_wait(&mut c);
    assert_eq!(code, Some(0), "{log}");
    assert!(
        dir.join("done").exists(),
        "electd exited {took:?} after SIGTERM, before its on-follower hook finished:\n{log}"
    );
    assert!(log.contains("hook on-follower finished"), "{log}");
    assert!(log.contains("waiting for hook on-follower (pid "), "{log}");
    drop(c);
    std::fs::remove_dir_all(dir).unwrap();
}

/// README "Hooks": the wait at SIGTERM is bounded by `hook-timeout`: a hook that
/// outlives it has its process group killed, and the daemon exits all the same.
#[test]
fn sigterm_kills_a_hook_that_outlives_hook_timeout() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (mut c, dir) = leader_with_on_follower(
        "sleep 30 &\necho $$ $! > \"$(dirname \"$0\")/pids\"\nwait",
        "1s",
    );
    let (code, took, log) = sigterm_and_wait(&mut c);
    let pids: Vec<u32> = std::fs::read_to_string(dir.join("pids"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    assert_eq!(pids.len(), 2, "the hook ran and wrote its pids:\n{log}");
    // The hook's group dies with SIGKILL, at once; a zombie left to init counts as gone.
    let dead = common::eventually(Duration::from_secs(1), || {
        !pids.iter().any(|&p| common::alive(p))
    });
    // Ours to clean up either way: the hook leads its process group (by pid).
    // SAFETY: kill(2) on the process group of a hook this test's daemon started.
    unsafe { libc::kill(-(pids[0] as i32), libc::SIGKILL) };
    assert_eq!(code, Some(0), "{log}");
    // hook-timeout 1s, then the exit: far below the hook's 30 s.
    assert!(
        took < Duration::from_secs(10),
        "exit {took:?} after SIGTERM:\n{log}"
    );
    assert!(dead, "the hook's process group outlived electd:\n{log}");
    // Killed at its own timeout (poll) or at the stop's bound, whichever came first,
    // named with its pid either way.
    let killed = log
        .lines()
        .find(|l| l.contains("killed"))
        .unwrap_or_else(|| panic!("no line names the kill:\n{log}"));
    assert!(
        killed.contains(&format!("(pid {})", pids[0])),
        "the kill's line does not name the hook's pid {}:\n{log}",
        pids[0]
    );
    assert!(
        killed.contains("outlived hook-timeout 1s")
            || killed.contains("outlived the stop's bound (hook-timeout 1s, cut to "),
        "{log}"
    );
    assert!(log.contains("waiting for hook on-follower (pid "), "{log}");
    drop(c);
    std::fs::remove_dir_all(dir).unwrap();
}

/// The pids a hook wrote to `file` (its own first: it leads its process group).
fn hook_pids(file: &Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// README "Signals"/"Hooks", a hook still queued at the stop's bound: a slow
/// `on-leader` still runs at SIGTERM, so the `on-follower` the resign starts waits
/// behind it. `hook-timeout` after the stop the running one is killed with its process
/// group and the queued one never starts (daemon/stop.rs: the stop "names what waits,
/// which never runs"), each named in the log, and the daemon exits 0. The on-leader
/// hook started under a `hook-timeout` of 60s that a reload then cut to 1s: it keeps
/// its own, so only the stop's bound can end it while the other waits.
#[test]
fn sigterm_kills_the_running_hook_and_never_starts_the_queued_one_at_hook_timeout() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = hook_dir();
    let on_leader = script(
        &dir,
        "on-leader.sh",
        "sleep 60 &\necho $$ $! > \"$(dirname \"$0\")/leader-pids\"\nwait",
    );
    let on_follower = script(
        &dir,
        "on-follower.sh",
        "sleep 60 &\necho $$ $! > \"$(dirname \"$0\")/follower-pids\"\nwait",
    );
    let extra = format!(
        "on-leader {}\non-follower {}\nhook-timeout 60s\n",
        on_leader.display(),
        on_follower.display()
    );
    let mut c = Cluster::start_with(Mode::Unicast, 1, &extra, &[]);
    c.agreement(Duration::from_secs(3));
    wait_for("the on-leader hook", Duration::from_secs(3), || {
        hook_pids(&dir.join("leader-pids")).len() == 2
    });
    let leader_pids = hook_pids(&dir.join("leader-pids"));
    // The stop's bound from now on; the running hook keeps its 60s.
    let hook_timeout = Duration::from_secs(1);
    let text = std::fs::read_to_string(&c.conf).unwrap();
    std::fs::write(&c.conf, text.replace("hook-timeout 60s", "hook-timeout 1s")).unwrap();
    signal_daemon(&c);
    wait_for("the reload", Duration::from_secs(2), || {
        c.log(1).contains("configuration reloaded")
    });
    let (code, took, log) = sigterm_and_wait(&mut c);
    // The group dies with SIGKILL at once; a zombie left to init counts as gone.
    let leader_dead = common::eventually(Duration::from_secs(1), || {
        !leader_pids.iter().any(|&p| common::alive(p))
    });
    // A hook started at the exit would have written its pids by now.
    std::thread::sleep(Duration::from_millis(300));
    let follower_pids = hook_pids(&dir.join("follower-pids"));
    // Ours to clean up either way: each hook leads its process group.
    for pids in [&leader_pids, &follower_pids] {
        if let Some(&p) = pids.first() {
            // SAFETY: kill(2) on the process group of a hook this test's daemon started.
            unsafe { libc::kill(-(p as i32), libc::SIGKILL) };
        }
    }
    assert_eq!(code, Some(0), "{log}");
    assert!(
        follower_pids.is_empty() && !log.contains("hook on-follower started"),
        "the queued on-follower hook started (pids {follower_pids:?}):\n{log}"
    );
    // The host's stop is over within a few heartbeats (no `electctl run` to wait for),
    // then the bound: the exit comes one loop turn after it. A second of slack (times
    // the slack factor) for a loaded machine is far from the on-leader hook's own 60s
    // and from a queued hook given a hook-timeout of its own.
    let limit = hook_timeout + common::slacked(Duration::from_secs(1));
    assert!(
        took >= hook_timeout && took < limit,
        "exit {took:?} after SIGTERM, not within [{hook_timeout:?}, {limit:?}):\n{log}"
    );
    assert!(
        log.contains(&format!(
            "waiting for hook on-leader (pid {}) to finish, then on-follower, at most hook-timeout 1s",
            leader_pids[0]
        )),
        "{log}"
    );
    assert!(
        leader_dead,
        "the on-leader hook's process group outlived electd ({leader_pids:?}):\n{log}"
    );
    // Killed at the bound by the stop, or by `poll` at the deadline the stop brought
    // forward to the bound, which reaps it at once when it died fast enough.
    assert!(
        log.contains(&format!(
            "killed hook on-leader (pid {}) and its process group",
            leader_pids[0]
        )) || log.contains("hook on-leader killed after"),
        "{log}"
    );
    assert!(
        log.contains("exiting without running the queued hooks on-follower"),
        "{log}"
    );
    eprintln!("exit {took:?} after SIGTERM (hook-timeout {hook_timeout:?})");
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

/// Every notification waiting on a non-blocking notify socket.
fn notifications(sock: &UnixDatagram) -> Vec<String> {
    let mut buf = [0u8; 4096];
    let mut got = Vec::new();
    while let Ok(n) = sock.recv(&mut buf) {
        got.push(String::from_utf8_lossy(&buf[..n]).to_string());
    }
    got
}

fn config_refused(c: &Cluster) -> Option<String> {
    match c.status(1).unwrap().get("config_refused") {
        Some(Value::Str(s)) => Some(s.clone()),
        Some(Value::Null) => None,
        other => panic!("status has no config_refused: {other:?}"),
    }
}

/// Issue 13 item 1 (SPEC 12, 16): `electctl reload` reloads synchronously and exits 0
/// when the file was applied, 1 with the daemon's reason when it was refused (a typo,
/// a new server list); the refusal shows in `status`, in STATUS= and in metrics until
/// a reload succeeds, and SIGHUP takes the same path. The daemon keeps leading with the
/// running configuration throughout.
#[test]
fn electctl_reload_says_whether_the_file_was_applied() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = hook_dir();
    let npath = dir.join("notify.sock");
    let notify = UnixDatagram::bind(&npath).unwrap();
    notify.set_nonblocking(true).unwrap();
    let c = Cluster::start_with(
        Mode::Unicast,
        1,
        "",
        &[("NOTIFY_SOCKET", npath.to_str().unwrap())],
    );
    let sock = c.sock(1);
    wait_for("leadership", Duration::from_secs(3), || {
        c.status(1)
            .and_then(|v| v.get("role").and_then(Value::as_str).map(str::to_string))
            .as_deref()
            == Some("leader")
    });
    let good = std::fs::read_to_string(&c.conf).unwrap();

    // Applied: the answer comes once the new timers run (no wait on the log).
    std::fs::write(&c.conf, good.replace("heartbeat 100ms", "heartbeat 200ms")).unwrap();
    let (code, out, err) = electctl(&sock, &["reload"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("configuration reloaded from"), "{out}");
    assert!(
        c.log(1).contains("configuration reloaded: heartbeat 200ms"),
        "applied before the answer:\n{}",
        c.log(1)
    );
    assert_eq!(config_refused(&c), None);
    assert_eq!(c.metric(1, "electd_config_refused"), 0);

    // A typo: refused with the file's own error, exit 1, the old config stays.
    let _ = notifications(&notify);
    std::fs::write(&c.conf, good.replace("heartbeat 100ms", "hearbeat 300ms")).unwrap();
    let (code, _, err) = electctl(&sock, &["reload"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("reload refused") && err.contains("unknown directive 'hearbeat'"),
        "{err}"
    );
    let why = config_refused(&c).expect("status shows the refusal");
    assert!(why.contains("hearbeat"), "{why}");
    assert_eq!(c.metric(1, "electd_config_refused"), 1);
    let status: Vec<String> = notifications(&notify)
        .into_iter()
        .filter(|m| m.starts_with("STATUS="))
        .collect();
    assert!(
        status.iter().any(|m| m.contains("reload refused")
            && m.contains("hearbeat")
            && m.contains("a restart would load the refused file")),
        "STATUS= tells the operator: {status:?}"
    );
    assert!(
        c.log(1)
            .lines()
            .any(|l| l.contains("ERROR") && l.contains("reload refused")),
        "logged at error level:\n{}",
        c.log(1)
    );
    // A new server list: refused with that reason.
    std::fs::write(
        &c.conf,
        good.replacen("unicast\n", "server 2 127.0.0.1:9\nunicast\n", 1),
    )
    .unwrap();
    let (code, _, err) = electctl(&sock, &["reload"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("server list changed"), "{err}");
    let v = c.status(1).unwrap();
    assert_eq!(v.get("role").and_then(Value::as_str), Some("leader"));
    assert_eq!(
        v.get("peers").and_then(Value::as_array).map(<[Value]>::len),
        Some(0),
        "the running list stayed"
    );
    let (_, table, _) = electctl(&sock, &["status"]);
    assert!(table.contains("last reload REFUSED"), "{table}");

    // A good file again: the refusal is cleared, in status and in STATUS=.
    let _ = notifications(&notify);
    std::fs::write(&c.conf, &good).unwrap();
    let (code, out, err) = electctl(&sock, &["reload"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(config_refused(&c), None);
    let status: Vec<String> = notifications(&notify)
        .into_iter()
        .filter(|m| m.starts_with("STATUS="))
        .collect();
    assert!(
        !status.is_empty() && status.iter().all(|m| !m.contains("refused")),
        "{status:?}"
    );

    // SIGHUP takes the same path: a refusal shows in status too.
    std::fs::write(&c.conf, good.replace("rtt 20ms", "rtt 20")).unwrap();
    signal(c.child(1), libc::SIGHUP);
    wait_for(
        "the SIGHUP refusal in status",
        Duration::from_secs(2),
        || config_refused(&c).is_some_and(|w| w.contains("needs a unit")),
    );
    assert_eq!(
        c.status(1).unwrap().get("role").and_then(Value::as_str),
        Some("leader")
    );
    std::fs::write(&c.conf, &good).unwrap();
    signal(c.child(1), libc::SIGHUP);
    wait_for(
        "the SIGHUP reload to clear it",
        Duration::from_secs(2),
        || config_refused(&c).is_none(),
    );

    // No daemon: the usual exit status 2.
    let (code, _, err) = electctl(&dir.join("none.sock"), &["reload"]);
    assert_eq!(code, Some(2), "{err}");
    drop(c);
    std::fs::remove_dir_all(dir).unwrap();
}

/// True when this test runs as root (setpriv can then run a command as `nobody`).
fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A copy of electctl that `nobody` can run, whatever the build directory's modes.
fn electctl_for_anyone(dir: &Path) -> PathBuf {
    let p = dir.join("electctl");
    std::fs::copy(env!("CARGO_BIN_EXE_electctl"), &p).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// `electctl ARGS...` as uid and gid 65534 (nobody), without supplementary groups.
fn electctl_as_nobody(exe: &Path, args: &[&str]) -> (Option<i32>, String) {
    let child = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(exe)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("setpriv (util-linux) is needed to run electctl as nobody");
    let out = common::output_within(child, Duration::from_secs(20));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Issue 13 item 1: `reload` is for whoever may send the daemon SIGHUP (root and its
/// own user), not for every client the socket mode lets in: a member of the socket's
/// group may read the status but not make the daemon apply a file.
#[test]
fn reload_is_refused_to_other_users_of_the_socket() {
    if !root() {
        eprintln!("SKIPPED: running electctl as another user needs root");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::start_with(Mode::Unicast, 1, "socket-mode 0666\n", &[]);
    let exe = electctl_for_anyone(&c.dir);
    let sock = c.sock(1);
    let s = sock.to_str().unwrap();
    let (code, out) = electctl_as_nobody(&exe, &["--socket", s, "status", "--json"]);
    assert_eq!(code, Some(0), "nobody may read the status: {out}");
    let before = c.log(1).matches("configuration reloaded").count();
    let (code, out) = electctl_as_nobody(&exe, &["--socket", s, "reload"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("permission denied for uid 65534") && out.contains("only root"),
        "{out}"
    );
    assert_eq!(
        c.log(1).matches("configuration reloaded").count(),
        before,
        "nothing was reloaded"
    );
    let (code, out, err) = electctl(&sock, &["reload"]);
    assert_eq!(code, Some(0), "root may: {out}{err}");
}

/// A one-server daemon whose config path is a FIFO: returned once the daemon is
/// blocked reading it (so it is past exec and inside main, reading its config), with
/// the FIFO's write end. The path already names a regular file with the same text
/// (renamed over the FIFO), so reloads read that. Write the text and drop the writer
/// to let it start.
struct HeldStart {
    dir: PathBuf,
    child: std::process::Child,
    writer: std::fs::File,
    text: String,
}

fn held_start(args: &[&str]) -> HeldStart {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = hook_dir();
    let port = common::free_udp_port();
    let text = format!(
        "cluster held-{pid}-{port}\nserver 1 127.0.0.1:{port}\nid 1\nunicast\nheartbeat 100ms\nrtt 20ms\nsocket {d}/1.sock\nstate {d}/1.state\n",
        d = dir.display(),
        pid = std::process::id()
    );
    let fifo = dir.join("electd.conf");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let real = dir.join("real.conf");
    std::fs::write(&real, &text).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_electd"))
        .arg("--config")
        .arg(&fifo)
        .args(["--log-level", "debug"])
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("log")).unwrap())
        .spawn()
        .unwrap();
    // A non-blocking open for writing succeeds only once a reader has the FIFO open:
    // the daemon is then reading its configuration.
    let t0 = Instant::now();
    let writer = loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
        {
            Ok(w) => break w,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {}
            Err(e) => panic!("open the FIFO: {e}"),
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "electd exited before reading its config"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "electd never opened its config"
        );
        std::thread::sleep(Duration::from_micros(200));
    };
    std::fs::rename(&real, &fifo).unwrap();
    HeldStart {
        dir,
        child,
        writer,
        text,
    }
}

fn sock_status(sock: &Path) -> Option<Value> {
    use std::io::{BufRead, BufReader, Write};
    let mut s = std::os::unix::net::UnixStream::connect(sock).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"status\n").ok()?;
    let mut l = String::new();
    BufReader::new(s).read_line(&mut l).ok()?;
    electd::json::parse(l.trim()).ok()
}

/// Issue 13 item 3: SIGHUP hammered at the daemon from the moment it reads its config,
/// through binding, loading the state and the first rounds, neither kills it nor keeps
/// it from electing itself; the signals that arrive once the loop runs reload.
#[test]
fn sighup_while_starting_does_not_kill() {
    use std::io::Write;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = held_start(&[]);
    let pid = h.child.id() as i32;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hammer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut sent = 0u64;
            let t0 = Instant::now();
            // Bounded: until told, at most 20 s.
            while !stop.load(std::sync::atomic::Ordering::Relaxed)
                && t0.elapsed() < Duration::from_secs(20)
            {
                // SAFETY: kill(2) on our child, not yet reaped, so its pid is not reused.
                unsafe { libc::kill(pid, libc::SIGHUP) };
                sent += 1;
                std::thread::sleep(Duration::from_micros(100));
            }
            sent
        })
    };
    // Some SIGHUPs land while the daemon is blocked in reading its config.
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        h.child.try_wait().unwrap().is_none(),
        "a SIGHUP while reading the config killed electd"
    );
    h.writer.write_all(h.text.as_bytes()).unwrap();
    drop(h.writer);
    let sock = h.dir.join("1.sock");
    let log = h.dir.join("log");
    let t0 = Instant::now();
    let mut led = None;
    while t0.elapsed() < common::slacked(Duration::from_secs(5)) {
        if let Some(st) = h.child.try_wait().unwrap() {
            panic!(
                "electd died under SIGHUP while starting: {st}\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        if sock_status(&sock)
            .and_then(|v| v.get("role").and_then(Value::as_str).map(str::to_string))
            .as_deref()
            == Some("leader")
        {
            led = Some(t0.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Keep hammering the running loop a little.
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = hammer.join().unwrap();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        led.is_some(),
        "no election under SIGHUP ({sent} sent):\n{text}"
    );
    eprintln!(
        "{sent} SIGHUPs from the config read on; leader {:?} after the config was written; {} reloads",
        led.unwrap_or_default(),
        text.matches("configuration reloaded").count()
    );
    assert!(
        h.child.try_wait().unwrap().is_none(),
        "electd died:\n{text}"
    );
    assert!(
        text.contains("configuration reloaded"),
        "the loop took the SIGHUPs as reloads:\n{text}"
    );
    assert!(!text.contains("reload refused"), "{text}");
    signal(&h.child, libc::SIGTERM);
    assert_eq!(wait_exit(h.child, Duration::from_secs(3)), Some(0));
    std::fs::remove_dir_all(&h.dir).unwrap();
}

/// Issue 13 item 3: a SIGTERM that arrives while the daemon reads its config waits for
/// the loop, which then stops cleanly (exit 0, "stopping") instead of the signal
/// killing a half-started daemon.
#[test]
fn sigterm_while_starting_stops_cleanly_once_running() {
    use std::io::Write;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = held_start(&[]);
    signal(&h.child, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        h.child.try_wait().unwrap().is_none(),
        "a SIGTERM while reading the config killed electd"
    );
    h.writer.write_all(h.text.as_bytes()).unwrap();
    drop(h.writer);
    let dir = h.dir.clone();
    assert_eq!(
        wait_exit(h.child, Duration::from_secs(5)),
        Some(0),
        "{}",
        std::fs::read_to_string(dir.join("log")).unwrap_or_default()
    );
    let text = std::fs::read_to_string(dir.join("log")).unwrap();
    assert!(text.contains("started: server 1"), "{text}");
    assert!(text.contains("stopping"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--check-config` runs no loop: it does not keep the daemon's signals blocked, so a
/// check stuck on its file stops at SIGTERM like any command.
#[test]
fn check_config_stops_at_sigterm() {
    use std::os::unix::process::ExitStatusExt;
    let mut h = held_start(&["--check-config"]);
    signal(&h.child, libc::SIGTERM);
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = h.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < common::slacked(Duration::from_secs(3)),
            "--check-config ignored SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status}");
    drop(h.writer);
    std::fs::remove_dir_all(&h.dir).unwrap();
}

/// The variables of an `env` dump, by name.
fn env_dump(p: &Path) -> std::collections::BTreeMap<String, String> {
    lines(p)
        .iter()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Issue 13 item 2: hooks and checks start in a clean environment: none of the
/// daemon's systemd variables (NOTIFY_SOCKET, WATCHDOG_*, INVOCATION_ID,
/// JOURNAL_STREAM, LISTEN_*) nor anything else it inherited, only a fixed PATH, LANG and
/// TZ passed through, and their ELECTD_* variables.
#[test]
fn hooks_and_checks_get_a_clean_environment() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = hook_dir();
    let hook_env = dir.join("hook.env");
    let check_env = dir.join("check.env");
    let hook = script(&dir, "hook.sh", &format!("env > {}", hook_env.display()));
    let check = script(&dir, "check.sh", &format!("env > {}", check_env.display()));
    let extra = format!(
        "on-leader {}\ncheck {}\ncheck-interval 100ms\ncheck-rise 1\n",
        hook.display(),
        check.display()
    );
    let notify = dir.join("notify.sock");
    let systemd = [
        ("NOTIFY_SOCKET", notify.to_str().unwrap()),
        ("WATCHDOG_USEC", "10000000"),
        ("WATCHDOG_PID", "1"),
        ("INVOCATION_ID", "0123456789abcdef0123456789abcdef"),
        ("JOURNAL_STREAM", "8:12345"),
        ("LISTEN_FDS", "1"),
        ("LISTEN_PID", "1"),
        ("MANAGERPID", "1"),
        ("SYSTEMD_EXEC_PID", "1"),
        ("RUNTIME_DIRECTORY", "/run/electd"),
        ("OPERATOR_SHELL_VAR", "leaks"),
        ("ELECTD_TEST_SABOTAGE_NOT", "x"),
    ];
    let mut env: Vec<(&str, &str)> = systemd.to_vec();
    env.extend([("LANG", "de_DE.UTF-8"), ("TZ", "Europe/Berlin")]);
    env.push(("PATH", "/opt/daemon-only/bin:/usr/bin:/bin"));
    let c = Cluster::start_with(Mode::Unicast, 1, &extra, &env);
    wait_for("the on-leader hook", Duration::from_secs(5), || {
        env_dump(&hook_env).contains_key("ELECTD_HEALTH")
    });
    wait_for("a check", Duration::from_secs(5), || {
        env_dump(&check_env).contains_key("ELECTD_ROLE")
    });
    let path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    for (what, file, own) in [
        (
            "hook",
            &hook_env,
            &[
                "ELECTD_ROLE",
                "ELECTD_LEADER",
                "ELECTD_TERM",
                "ELECTD_ID",
                "ELECTD_HEALTH",
                "ELECTD_GROUP",
            ][..],
        ),
        (
            "check",
            &check_env,
            &["ELECTD_ROLE", "ELECTD_ID", "ELECTD_GROUP"][..],
        ),
    ] {
        let got = env_dump(file);
        for (k, _) in systemd {
            assert!(!got.contains_key(k), "{what} inherited {k}: {got:?}");
        }
        assert_eq!(got.get("PATH").map(String::as_str), Some(path), "{what}");
        assert_eq!(
            got.get("LANG").map(String::as_str),
            Some("de_DE.UTF-8"),
            "{what}"
        );
        assert_eq!(
            got.get("TZ").map(String::as_str),
            Some("Europe/Berlin"),
            "{what}"
        );
        for k in own {
            assert!(got.contains_key(*k), "{what} lacks {k}: {got:?}");
        }
        // Without group lines, the one group is `default` (SPEC section 15).
        assert_eq!(
            got.get("ELECTD_GROUP").map(String::as_str),
            Some("default"),
            "{what}"
        );
        // The shell adds PWD (and some add SHLVL and _); nothing else may appear.
        let allowed = ["PATH", "LANG", "TZ", "PWD", "SHLVL", "_"];
        let extra: Vec<&String> = got
            .keys()
            .filter(|k| !allowed.contains(&k.as_str()) && !own.contains(&k.as_str()))
            .collect();
        assert!(extra.is_empty(), "{what} got {extra:?}: {got:?}");
    }
    assert_eq!(env_dump(&hook_env)["ELECTD_ROLE"], "leader");
    drop(c);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Issue 13 item 5: electctl tells a permission problem (EACCES: not root, not in the
/// socket's group) from a daemon that is not running (no socket: ENOENT; a stale
/// socket: ECONNREFUSED); both exit 2.
#[test]
fn electctl_tells_permission_from_no_daemon() {
    let dir = hook_dir();
    let missing = dir.join("missing.sock");
    let (code, _, err) = electctl(&missing, &["status"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is electd running?"), "ENOENT: {err}");
    let stale = dir.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let (code, _, err) = electctl(&stale, &["status"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("is electd running?") && err.contains("refused"),
        "ECONNREFUSED: {err}"
    );
    if !root() {
        eprintln!("SKIPPED (the permission half): running electctl as nobody needs root");
        std::fs::remove_dir_all(dir).unwrap();
        return;
    }
    // A live socket, 0660 root:root, as the daemon makes it: nobody may not connect.
    let live = dir.join("live.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&live).unwrap();
    std::os::unix::fs::chown(&live, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(&live, std::fs::Permissions::from_mode(0o660)).unwrap();
    let exe = electctl_for_anyone(&dir);
    let (code, out) = electctl_as_nobody(&exe, &["--socket", live.to_str().unwrap(), "status"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains(&format!("permission denied on {}", live.display()))
            && out.contains("run as root or as a member of the socket's group 'root'"),
        "EACCES: {out}"
    );
    assert!(!out.contains("is electd running"), "{out}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// `electd --config CONF --check-config ARGS...` as this user: (exit code, stdout + stderr).
fn check_config(conf: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_electd"))
        .arg("--config")
        .arg(conf)
        .arg("--check-config")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// SPEC 15: `--check-config` prints one line per group after validating (the example
/// conf/groups-3.conf among them), nothing more for a file without `group` lines, and
/// refuses a cluster-wide directive inside a group with its line.
#[test]
fn check_config_lists_the_groups() {
    let (code, out) = check_config(Path::new("conf/groups-3.conf"), &["--id", "2"]);
    assert_eq!(code, Some(0), "{out}");
    for want in [
        "group orders (line 34): order 3 1 2 (prefer); no check; on-leader, on-follower",
        "group payments (line 41): order 1 2 3 (balance); no check; on-leader, on-follower",
        "group audit (line 46): order 2 3 1 (balance); no check; on-leader, on-follower",
    ] {
        assert!(out.lines().any(|l| l == want), "wanted '{want}' in {out}");
    }
    let (code, out) = check_config(Path::new("conf/local-3.conf"), &["--id", "2"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("group "), "{out}");
    let dir = hook_dir();
    let conf = dir.join("g.conf");
    let text = std::fs::read_to_string("conf/groups-3.conf").unwrap();
    std::fs::write(&conf, format!("{text}heartbeat 1s\n")).unwrap();
    let (code, out) = check_config(&conf, &["--id", "2"]);
    assert_eq!(code, Some(1), "{out}");
    let line = text.lines().count() + 1;
    assert!(
        out.contains(&format!(
            "g.conf:{line}: 'heartbeat' is cluster-wide: put it before the first 'group' line"
        )),
        "{out}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// Issue 13 item 4 (SPEC 9, 10): `--check-config` checks that the key files are readable
/// by the user electd runs as: run as that user, by opening them; run as root, for
/// `--as-user NAME` (default `electd` if it exists), by a child acting as that user.
#[test]
fn check_config_checks_the_key_files_for_the_daemons_user() {
    if !root() {
        eprintln!("SKIPPED: checking key files for another user needs root");
        return;
    }
    let dir = hook_dir();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let key = dir.join("key");
    let next = dir.join("key-next");
    for k in [&key, &next] {
        std::fs::write(k, [b'k'; 48]).unwrap();
        std::os::unix::fs::chown(k, Some(0), Some(0)).unwrap();
        std::fs::set_permissions(k, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let conf = dir.join("c.conf");
    let port = common::free_udp_port();
    let base = format!(
        "cluster k\nserver 1 127.0.0.1:{port}\nid 1\nunicast\nstate {0}/s\nsocket {0}/x.sock\nkey-file {1}\n",
        dir.display(),
        key.display()
    );
    std::fs::write(&conf, &base).unwrap();
    std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o644)).unwrap();
    let set = |k: &Path, uid: u32, gid: u32, mode: u32| {
        std::os::unix::fs::chown(k, Some(uid), Some(gid)).unwrap();
        std::fs::set_permissions(k, std::fs::Permissions::from_mode(mode)).unwrap();
    };

    // As root for nobody: root:root 0600 is unreadable, and the error says how to fix it.
    let (code, out) = check_config(&conf, &["--as-user", "nobody"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!(
            "key file {} is not readable by user nobody (uid 65534)",
            key.display()
        )) && out.contains("Permission denied")
            && out.contains("mode 0600")
            && out.contains("chmod 0640"),
        "{out}"
    );
    // Readable through the group (root:nogroup 0640), or as the owner.
    set(&key, 0, 65534, 0o640);
    let (code, out) = check_config(&conf, &["--as-user", "nobody"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("key files readable by user nobody (uid 65534)"),
        "{out}"
    );
    set(&key, 65534, 0, 0o600);
    assert_eq!(check_config(&conf, &["--as-user", "nobody"]).0, Some(0));
    // key-file-next is checked too.
    std::fs::write(&conf, format!("{base}key-file-next {}\n", next.display())).unwrap();
    let (code, out) = check_config(&conf, &["--as-user", "nobody"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!("key file {} is not", next.display())),
        "{out}"
    );
    std::fs::write(&conf, &base).unwrap();
    // An unknown user is a usage error.
    let (code, out) = check_config(&conf, &["--as-user", "no-such-user-electd-test"]);
    assert_eq!(code, Some(2), "{out}");
    // Without --as-user, root checks for the unit's user `electd` if there is one.
    let (code, out) = check_config(&conf, &[]);
    if electd::access::lookup("electd").unwrap().is_some() {
        assert!(out.contains("for user electd, the unit's user"), "{out}");
    } else {
        assert_eq!(code, Some(0), "{out}");
        assert!(
            out.contains("no user 'electd' here: key files checked for root"),
            "{out}"
        );
    }

    // Run as the daemon's user (ExecStartPre), opening the file is the check.
    let exe = dir.join("electd");
    std::fs::copy(env!("CARGO_BIN_EXE_electd"), &exe).unwrap();
    let as_nobody = |args: &[&str]| {
        let out = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&exe)
            .arg("--config")
            .arg(&conf)
            .arg("--check-config")
            .args(args)
            .output()
            .expect("setpriv (util-linux) is needed to run electd as nobody");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (code, out) = as_nobody(&[]);
    assert_eq!(code, Some(0), "owned by nobody: {out}");
    set(&key, 0, 0, 0o600);
    let (code, out) = as_nobody(&[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("Permission denied") && out.contains("runs as user nobody"),
        "{out}"
    );
    // Only root can check for someone else.
    let (code, out) = as_nobody(&["--as-user", "root"]);
    assert_eq!(
        code,
        Some(1),
        "the key is unreadable to nobody first: {out}"
    );
    set(&key, 65534, 0, 0o600);
    let (code, out) = as_nobody(&["--as-user", "root"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("only root can check"), "{out}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Issue 13 item 6: outside journald each log line is "TIMESTAMP LEVEL message" (an
/// RFC 3339 time to the millisecond, the level padded to 5), with no colour escapes
/// even when the environment asks for colour; journald's `<N>` prefixes are
/// `journald_priority_prefixes`.
#[test]
fn plain_log_lines_have_a_timestamp_and_no_colour() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::start_with(
        Mode::Unicast,
        1,
        "",
        &[("CLICOLOR_FORCE", "1"), ("TERM", "xterm-256color")],
    );
    wait_for("an election", Duration::from_secs(3), || {
        c.log(1).contains("elected leader")
    });
    let log = c.log(1);
    assert!(!log.contains('\x1b'), "colour escapes: {log:?}");
    let line = log
        .lines()
        .find(|l| l.contains("elected leader of term 1"))
        .unwrap_or_else(|| panic!("{log}"));
    // 2026-01-02T03:04:05.678Z INFO  elected leader of term 1
    let (ts, rest) = line.split_once(' ').unwrap();
    let shape: String = ts
        .chars()
        .map(|c| if c.is_ascii_digit() { '9' } else { c })
        .collect();
    assert_eq!(shape, "9999-99-99T99:99:99.999Z", "{line}");
    assert_eq!(rest, "INFO  elected leader of term 1", "{line}");
}

/// Issue 13 item 7 (SPEC 9: "paths may hold {id}"): every path directive expands
/// `{id}`, the key files as the socket and the state file, with `--id` overriding.
#[test]
fn every_path_expands_id() {
    let text = "cluster c\nserver 1 127.0.0.1:7401\nserver 2 127.0.0.1:7402\nid 1\nunicast\n\
                socket /run/e/{id}.sock\nstate /var/lib/e/{id}.state\n\
                key-file /etc/e/{id}.key\nkey-file-next /etc/e/{id}.next\n";
    let cfg = electd::config::Config::parse(text, Path::new("electd.conf"), Some(2)).unwrap();
    assert_eq!(cfg.socket, Path::new("/run/e/2.sock"));
    assert_eq!(cfg.state, Path::new("/var/lib/e/2.state"));
    assert_eq!(cfg.key_file.as_deref(), Some(Path::new("/etc/e/2.key")));
    assert_eq!(
        cfg.key_file_next.as_deref(),
        Some(Path::new("/etc/e/2.next"))
    );
}

/// Issue 13 item 7: the duration units the docs list (ms, s, m, h, with fractions) are
/// the ones the parser takes, and nothing else.
#[test]
fn durations_take_the_documented_units() {
    use electd::config::parse_duration;
    for (text, ms) in [
        ("250ms", 250),
        ("1s", 1000),
        ("1.5s", 1500),
        ("2m", 120_000),
        ("1h", 3_600_000),
        ("0.5h", 1_800_000),
    ] {
        assert_eq!(
            parse_duration(text),
            Ok(Duration::from_millis(ms)),
            "{text}"
        );
    }
    for bad in ["1", "1d", "1us", "1 s", "h", "1sec"] {
        assert!(parse_duration(bad).is_err(), "{bad} accepted");
    }
    let err = parse_duration("1d").unwrap_err();
    assert!(err.contains("ms, s, m or h"), "{err}");
}

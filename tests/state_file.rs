//! The state file's owner (SPEC section 4; src/store.rs, version 5): a file of the
//! release before names nobody and is taken, then rewritten naming this server and
//! cluster; a cluster renamed on purpose keeps its votes through `--state-cluster`.
//! (A file of another server is refused: tests/adv22.rs,
//! `a_state_file_of_another_server_is_refused`.)

mod common;

use common::{free_udp_port, request_at, wait_exit, wait_for};
use electd::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The exit status of a start refused for what only an operator can fix (sysexits'
/// EX_CONFIG): the units do not restart it (`RestartPreventExitStatus=78`).
const EXIT_CONFIG: i32 = 78;

/// A one-server cluster `cluster` in a fresh directory: (directory, config file).
fn one_server(tag: &str, cluster: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("electd-statefile-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("c.conf");
    write_conf(&dir, &conf, cluster);
    (dir, conf)
}

fn write_conf(dir: &Path, conf: &Path, cluster: &str) {
    std::fs::write(
        conf,
        format!(
            "cluster {cluster}\nserver 1 127.0.0.1:{}\nid 1\nunicast\nheartbeat 100ms\nrtt 20ms\nstate {dir}/1.state\nsocket {dir}/1.sock\n",
            free_udp_port(),
            dir = dir.display()
        ),
    )
    .unwrap();
}

/// `content` with the CRC line electd writes.
fn signed(content: &str) -> String {
    format!("{content}crc {:08x}\n", crc32fast::hash(content.as_bytes()))
}

/// electd on `conf` with `extra` flags, its stderr in `dir/electd.log`.
fn electd(dir: &Path, conf: &Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_electd"))
        .arg("--config")
        .arg(conf)
        .args(["--log-level", "debug"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("electd.log")).unwrap())
        .spawn()
        .unwrap()
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("electd.log")).unwrap_or_default()
}

/// The daemon's `status` once it leads (a server alone elects itself).
fn leading(dir: &Path) -> json::Value {
    wait_for("the lone server to lead", Duration::from_secs(10), || {
        let line = request_at(&dir.join("1.sock"), "status")?;
        let v = json::parse(line.trim()).ok()?;
        (v.get("role").and_then(|r| r.as_str()) == Some("leader")).then_some(v)
    })
}

fn stop(child: Child) {
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(wait_exit(child, Duration::from_secs(5)), Some(0));
}

/// A version-4 file as the release before version 5 wrote it is taken as this
/// server's (it names nobody), the daemon runs on its votes, and the file on disk
/// becomes version 5 naming this server and cluster.
#[test]
fn a_version_4_file_of_the_previous_release_is_taken_and_rewritten_as_5() {
    let (dir, conf) = one_server("v4", "orders-eu");
    std::fs::write(
        dir.join("1.state"),
        signed(
            "electd-state 4\ngroup default\nterm 12\nvoted_term 12\nvoted_for 1\nled_term 12\nhold_ms 300\ndrained 0\nboot 7\npeer_boots\n",
        ),
    )
    .unwrap();
    let child = electd(&dir, &conf, &[]);
    let st = leading(&dir);
    let term = st.get("term").and_then(|t| t.as_u64()).unwrap();
    assert!(
        term > 12,
        "it kept its votes and led a new term: {term}\n{}",
        log(&dir)
    );
    let text = std::fs::read_to_string(dir.join("1.state")).unwrap();
    assert!(
        text.starts_with("electd-state 5\nid 1\ncluster orders-eu\ngroup default\n"),
        "{text}"
    );
    assert!(
        text.contains("\nboot 8\n"),
        "the boot went on from 7: {text}"
    );
    assert!(
        log(&dir).contains("upgraded from version 4 to 5"),
        "{}",
        log(&dir)
    );
    stop(child);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A cluster renamed on purpose: its servers' files name the old cluster, so a start
/// is refused (naming both names and the way out) and leaves the file as it was;
/// `--state-cluster OLD` takes it with its votes and rewrites it under the new name,
/// after which the option is not needed.
#[test]
fn a_renamed_cluster_refuses_without_state_cluster_and_keeps_its_votes_with_it() {
    let (dir, conf) = one_server("rename", "orders-new");
    let old = signed(
        "electd-state 5\nid 1\ncluster orders-old\ngroup default\nterm 40\nvoted_term 40\nvoted_for 1\nled_term 40\nhold_ms 300\ndrained 0\nboot 3\npeer_boots\n",
    );
    std::fs::write(dir.join("1.state"), &old).unwrap();
    let code = wait_exit(electd(&dir, &conf, &[]), Duration::from_secs(5));
    let err = log(&dir);
    assert_eq!(code, Some(EXIT_CONFIG), "{err}");
    assert!(
        err.contains(
            "belongs to server 1 of cluster 'orders-old', this is server 1 of cluster 'orders-new'"
        ) && err.contains("--state-cluster orders-old"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("1.state")).unwrap(),
        old,
        "a refused file is left as it was"
    );
    // Another former name does not take it.
    let code = wait_exit(
        electd(&dir, &conf, &["--state-cluster", "orders-other"]),
        Duration::from_secs(5),
    );
    assert_eq!(code, Some(EXIT_CONFIG), "{}", log(&dir));
    // The right one does, votes and all.
    let child = electd(&dir, &conf, &["--state-cluster", "orders-old"]);
    let st = leading(&dir);
    let voted = st.get("voted_term").and_then(|t| t.as_u64()).unwrap();
    assert!(
        voted > 40,
        "its voted_term 40 was kept: {voted}\n{}",
        log(&dir)
    );
    let text = std::fs::read_to_string(dir.join("1.state")).unwrap();
    assert!(
        text.starts_with("electd-state 5\nid 1\ncluster orders-new\n"),
        "{text}"
    );
    assert!(log(&dir).contains("taken over"), "{}", log(&dir));
    stop(child);
    // From now on the file is the new cluster's: no option needed.
    let child = electd(&dir, &conf, &[]);
    leading(&dir);
    stop(child);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The shell block of README.md that contains `needle`, as written.
fn readme_block(needle: &str) -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let at = readme
        .find(needle)
        .unwrap_or_else(|| panic!("README.md has no block with {needle:?}"));
    let fence = readme[..at].rfind("```\n").expect("an opening fence");
    let line_start = readme[..fence].rfind('\n').map_or(0, |i| i + 1);
    // A block in a list item is indented like its fence: taken off, as a reader does.
    let indent = fence - line_start;
    let close = at + readme[at..].find("```").expect("a closing fence");
    let end = readme[..close].rfind('\n').unwrap() + 1;
    readme[fence + 4..end]
        .lines()
        .map(|l| format!("{}\n", l.get(indent..).unwrap_or("")))
        .collect()
}

/// Runs a README block with `sh`, the example path `/var/lib/electd/1.state` replaced
/// by `state`; None when python3 (which the blocks use) is not installed.
fn run_readme_block(block: &str, state: &Path) -> Option<std::process::Output> {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("python3 not installed: README's block not run");
        return None;
    }
    let script = block.replace("/var/lib/electd/1.state", &state.display().to_string());
    assert_ne!(script, block, "the block names /var/lib/electd/1.state");
    Some(Command::new("sh").arg("-c").arg(&script).output().unwrap())
}

/// README "The state file", downgrade to the build before version 5, run as written:
/// the file becomes exactly what that build wrote (version 4, every group kept, no
/// owner lines, a valid CRC), and this build, started on it again, takes it with its
/// votes (its own upgrade). The steps README gave before (delete two lines, fix the
/// CRC "as in" the version-3 script, which keeps the `default` group only) lost every
/// other group's votes.
#[test]
fn readme_downgrade_to_version_4_keeps_every_group_and_upgrades_back() {
    let (dir, conf) = one_server("downgrade", "orders-eu");
    let state = dir.join("1.state");
    let groups = "group default\nterm 12\nvoted_term 12\nvoted_for 1\nled_term 12\nhold_ms 300\ndrained 0\ngroup orders\nterm 30\nvoted_term 29\nvoted_for 2\nled_term 7\nhold_ms 300\ndrained 1\nboot 7\npeer_boots 2:4\n";
    std::fs::write(
        &state,
        signed(&format!(
            "electd-state 5\nid 1\ncluster orders-eu\n{groups}"
        )),
    )
    .unwrap();
    let block = readme_block("'electd-state 4'");
    let Some(out) = run_readme_block(&block, &state) else {
        return;
    };
    assert!(
        out.status.success(),
        "README's downgrade failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&state).unwrap(),
        signed(&format!("electd-state 4\n{groups}")),
        "README's downgrade writes the version-4 file the build before wrote, every group kept"
    );
    // This build takes it back, votes and all, and names itself again.
    let child = electd(&dir, &conf, &[]);
    let st = leading(&dir);
    let term = st.get("term").and_then(|t| t.as_u64()).unwrap();
    assert!(term > 12, "it kept its votes: {term}\n{}", log(&dir));
    stop(child);
    let text = std::fs::read_to_string(&state).unwrap();
    assert!(
        text.starts_with("electd-state 5\nid 1\ncluster orders-eu\n")
            && text.contains("group orders\nterm 30\nvoted_term 29\nvoted_for 2\n"),
        "{text}"
    );
    assert!(
        log(&dir).contains("upgraded from version 4 to 5"),
        "{}",
        log(&dir)
    );
    // Run on a file that is not version 5 (twice, say), it refuses and changes nothing.
    let v4 = signed(&format!("electd-state 4\n{groups}"));
    std::fs::write(&state, &v4).unwrap();
    let out = run_readme_block(&block, &state).unwrap();
    assert!(!out.status.success(), "a second run must fail");
    assert_eq!(std::fs::read_to_string(&state).unwrap(), v4);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// README "Upgrading from a build before wire version 3", the downgrade's script run
/// as written on a version-5 file: it writes the `default` group's version-3 file
/// that such a build reads (this build reads it back as version 3, its votes kept).
#[test]
fn readme_downgrade_to_version_3_writes_the_default_groups_file() {
    let (dir, conf) = one_server("downgrade3", "orders-eu");
    let state = dir.join("1.state");
    std::fs::write(
        &state,
        signed(
            "electd-state 5\nid 1\ncluster orders-eu\ngroup default\nterm 12\nvoted_term 12\nvoted_for 1\nled_term 12\nhold_ms 300\ndrained 0\nboot 7\npeer_boots 2:4\n",
        ),
    )
    .unwrap();
    let Some(out) = run_readme_block(&readme_block("'electd-state 3'"), &state) else {
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&state).unwrap(),
        signed(
            "electd-state 3\nterm 12\nvoted_term 12\nvoted_for 1\nled_term 12\nhold_ms 300\ndrained 0\nboot 7\npeer_boots 2:4\n"
        )
    );
    let child = electd(&dir, &conf, &[]);
    let term = leading(&dir).get("term").and_then(|t| t.as_u64()).unwrap();
    assert!(term > 12, "it kept its votes: {term}\n{}", log(&dir));
    stop(child);
    assert!(
        log(&dir).contains("upgraded from version 3 to 5"),
        "{}",
        log(&dir)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A state file of another server exits 78 (EX_CONFIG), which the units do not
/// restart: a restart cannot make the file this server's, so systemd's restarts every
/// 2 s (without a start limit) would only repeat the refusal for ever. The file is
/// left as it was. A corrupt file keeps exit status 1 (README: "1 with a message").
#[test]
fn a_state_file_of_another_server_exits_78_and_a_corrupt_one_1() {
    let (dir, conf) = one_server("exit78", "orders-eu");
    let theirs = signed(
        "electd-state 5\nid 2\ncluster orders-eu\ngroup default\nterm 9\nvoted_term 9\nvoted_for 2\nled_term 9\nhold_ms 300\ndrained 0\nboot 3\npeer_boots\n",
    );
    std::fs::write(dir.join("1.state"), &theirs).unwrap();
    let code = wait_exit(electd(&dir, &conf, &[]), Duration::from_secs(5));
    let err = log(&dir);
    assert_eq!(code, Some(EXIT_CONFIG), "{err}");
    assert!(
        err.contains("cannot start: state file ")
            && err.contains("belongs to server 2 of cluster 'orders-eu', this is server 1 of cluster 'orders-eu'"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("1.state")).unwrap(),
        theirs
    );
    // Corrupt (here: its CRC does not match): exit 1 as before.
    let corrupt = theirs.replace("term 9\n", "term 8\n");
    std::fs::write(dir.join("1.state"), &corrupt).unwrap();
    let code = wait_exit(electd(&dir, &conf, &[]), Duration::from_secs(5));
    let err = log(&dir);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("is corrupt (checksum mismatch)"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("1.state")).unwrap(),
        corrupt
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `electd --check-config` says what a start would refuse: a state file of another
/// server or cluster fails the check (exit 1, as every failed check) with the message
/// the start gives, so `electd --check-config && systemctl restart electd` does not
/// restart into a refusal. This server's own file, a version-4 one and none at all
/// pass; a corrupt one fails as the start would. The check never writes the file.
#[test]
fn check_config_reports_a_state_file_the_start_would_refuse() {
    let (dir, conf) = one_server("check", "orders-eu");
    let state = dir.join("1.state");
    let check = || {
        Command::new(env!("CARGO_BIN_EXE_electd"))
            .arg("--config")
            .arg(&conf)
            .arg("--check-config")
            .output()
            .unwrap()
    };
    let body = "group default\nterm 9\nvoted_term 9\nvoted_for 2\nled_term 9\nhold_ms 300\ndrained 0\nboot 3\npeer_boots\n";
    for (file, code, says) in [
        (None, 0, ""),
        (
            Some(signed(&format!(
                "electd-state 5\nid 1\ncluster orders-eu\n{body}"
            ))),
            0,
            "",
        ),
        (Some(signed(&format!("electd-state 4\n{body}"))), 0, ""),
        (
            Some(signed(&format!(
                "electd-state 5\nid 2\ncluster orders-eu\n{body}"
            ))),
            1,
            "belongs to server 2 of cluster 'orders-eu', this is server 1 of cluster 'orders-eu'",
        ),
        (
            Some(signed(&format!(
                "electd-state 5\nid 1\ncluster orders-old\n{body}"
            ))),
            1,
            "start once with --state-cluster orders-old",
        ),
        (
            Some(
                signed(&format!("electd-state 5\nid 1\ncluster orders-eu\n{body}"))
                    .replace("term 9", "term 8"),
            ),
            1,
            "is corrupt (checksum mismatch)",
        ),
    ] {
        let _ = std::fs::remove_file(&state);
        if let Some(f) = &file {
            std::fs::write(&state, f).unwrap();
        }
        let out = check();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{file:?}: {err}");
        assert!(err.contains(says), "{file:?}: {err}");
        if code != 0 {
            assert!(
                err.contains(&format!("electd: state file {}", state.display())),
                "{err}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(&state).ok(),
            file,
            "the check wrote the file"
        );
    }
    assert!(!dir.join("1.state.lock").exists(), "the check took no lock");
    // A FIFO in its place is refused at once, not read (which would wait for a writer).
    let _ = std::fs::remove_file(&state);
    let c = std::ffi::CString::new(state.display().to_string()).unwrap();
    // SAFETY: mkfifo(3) on a NUL-terminated path this test owns.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let out = check();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("not a regular file"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

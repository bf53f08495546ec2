//! electctl for a newcomer (issue 23, item 9): a mistyped command gets one line with
//! the command meant, not sixty lines of usage. (The bash completion's test sits with
//! electctl's unit tests, beside the man page's command list it is checked against.)

use std::process::Command;

fn electctl(args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_electctl"))
        .args(["--socket", "/nonexistent/electd.sock"])
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

#[test]
fn a_mistyped_command_gets_a_suggestion_in_one_line() {
    let (code, err) = electctl(&["stauts"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err.trim(),
        "electctl: unknown command 'stauts' (did you mean 'status'?); electctl --help lists the commands"
    );
    let (code, err) = electctl(&["frobnicate"]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err.trim(),
        "electctl: unknown command 'frobnicate'; electctl --help lists the commands"
    );
    // A known command with wrong arguments still shows the usage.
    let (code, err) = electctl(&["reload", "now"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("Usage: electctl"), "{err}");
}

/// `run --grace` above a day is refused at once, exit 2, before `run` connects: the
/// daemon refuses such a grace in `supervise`, an answer `run` does not know, and it
/// used to wait there without running CMD (here, with no daemon, it waited for one).
/// A day itself is accepted (it then waits for the daemon, and is stopped here).
#[test]
fn a_grace_above_a_day_is_refused_before_connecting() {
    use std::time::{Duration, Instant};
    let spawn = |grace: &str| {
        Command::new(env!("CARGO_BIN_EXE_electctl"))
            .args([
                "--socket",
                "/nonexistent/electd.sock",
                "run",
                "--grace",
                grace,
            ])
            .args(["--", "true"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Some(status) once it exits within `within`; None after killing it (ours, by id).
    let exit_within = |c: &mut std::process::Child, within: Duration| {
        let end = Instant::now() + within;
        while Instant::now() < end {
            if let Some(s) = c.try_wait().unwrap() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        c.kill().unwrap();
        c.wait().unwrap();
        None
    };
    for grace in ["86401s", "25h", "48h"] {
        let mut c = spawn(grace);
        let status = exit_within(&mut c, Duration::from_secs(10));
        let mut err = String::new();
        std::io::Read::read_to_string(c.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(2),
            "--grace {grace}: {err}"
        );
        assert!(
            err.contains(&format!("run --grace {grace} is more than 24h")),
            "--grace {grace}: {err}"
        );
    }
    let mut c = spawn("24h");
    assert_eq!(
        exit_within(&mut c, Duration::from_millis(500)),
        None,
        "--grace 24h was refused"
    );
}

/// electd's usage line, README's and electd(8)'s SYNOPSIS name the same options, and
/// every option `--help` lists (the usage line once left out `--version` and `--help`).
#[test]
fn electd_usage_readme_and_man_page_name_every_option() {
    let o = Command::new(env!("CARGO_BIN_EXE_electd"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout).to_string();
    let usage = help
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("Usage: "))
        .unwrap_or_else(|| panic!("no usage line:\n{help}"))
        .to_string();
    let longs = |s: &str| -> Vec<String> {
        s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .filter(|w| w.starts_with("--") && w.len() > 2)
            .map(String::from)
            .collect()
    };
    let listed: std::collections::BTreeSet<String> = help
        .lines()
        .skip(1)
        .flat_map(|l| longs(l.trim_start().split("  ").next().unwrap_or("")))
        .collect();
    assert!(listed.len() >= 6, "options not found in:\n{help}");
    let in_usage: std::collections::BTreeSet<String> = longs(&usage).into_iter().collect();
    assert_eq!(
        in_usage, listed,
        "the usage line against the options:\n{help}"
    );
    let readme = std::fs::read_to_string("README.md").unwrap();
    assert!(
        readme.lines().any(|l| l == usage),
        "README.md has no line '{usage}'"
    );
    let man = std::fs::read_to_string("docs/man/man8/electd.8").unwrap();
    let synopsis: String = man
        .split(".SH SYNOPSIS\n")
        .nth(1)
        .and_then(|s| s.split("\n.SH").next())
        .unwrap()
        .replace("\\fB", "")
        .replace("\\fR", "")
        .replace("\\fI", "")
        .replace("\\-", "-")
        .replace(".B ", "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(
        synopsis, usage,
        "electd(8)'s SYNOPSIS against the usage line"
    );
}

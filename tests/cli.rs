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

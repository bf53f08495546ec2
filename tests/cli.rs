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

//! electctl for a newcomer (issue 23, item 9): a mistyped command gets one line with
//! the command meant, not sixty lines of usage; the bash completion the package
//! installs offers every command of electctl(1) and the options.

use std::process::Command;

const COMPLETION: &str = "pkg/completion/electctl";

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

/// The commands electctl(1) documents, in its order.
fn man_commands() -> Vec<String> {
    let man = std::fs::read_to_string("docs/man/man1/electctl.1").unwrap();
    let section = man.split(".SH COMMANDS").nth(1).unwrap();
    let section = section.split("\n.SH ").next().unwrap();
    let mut out = Vec::new();
    let mut lines = section.lines();
    while let Some(l) = lines.next() {
        if l == ".TP" {
            let entry = lines.next().unwrap_or("");
            let word = entry
                .trim_start_matches(".BR ")
                .trim_start_matches(".B ")
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_matches('"')
                .replace("\\-", "-");
            if !word.is_empty() && !out.contains(&word) {
                out.push(word);
            }
        }
    }
    out
}

/// What the completion offers for the words typed so far.
fn complete(words: &[&str]) -> Vec<String> {
    let script = format!(
        "source {COMPLETION}; COMP_WORDS=({}); COMP_CWORD={}; _electctl; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        words
            .iter()
            .map(|w| format!("'{w}'"))
            .collect::<Vec<_>>()
            .join(" "),
        words.len() - 1
    );
    let o = Command::new("bash").args(["-c", &script]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completion_offers_every_command_and_option() {
    let o = Command::new("bash")
        .args(["-n", COMPLETION])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut want = man_commands();
    assert!(want.len() >= 10, "{want:?}");
    want.sort();
    let mut got = complete(&["electctl", ""]);
    got.sort();
    assert_eq!(got, want, "the commands of electctl(1)");
    assert_eq!(complete(&["electctl", "st"]), ["status"]);
    assert_eq!(
        complete(&["electctl", "--socket", "/run/x.sock", "is"]),
        ["is-leader"]
    );
    let opts = complete(&["electctl", "--"]);
    for o in ["--socket", "--config", "--id", "--help"] {
        assert!(opts.contains(&o.to_string()), "{opts:?}");
    }
    assert_eq!(complete(&["electctl", "status", "--j"]), ["--json"]);
    assert_eq!(complete(&["electctl", "yield", "--"]), ["--to"]);
    let run = complete(&["electctl", "run", "--"]);
    for o in [
        "--group",
        "--grace",
        "--poll",
        "--max-restarts",
        "--restart-window",
    ] {
        assert!(run.contains(&o.to_string()), "{run:?}");
    }
}

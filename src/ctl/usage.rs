//! electctl's `--help`, and the tests that keep it in step with electctl(1) and the
//! bash completion.

/// electctl's `--help`: the commands, their options and the exit status.
pub const USAGE: &str = "Usage: electctl [--socket PATH] COMMAND

Commands:
  status [GROUP] [--json]
                    this server's view: role, leader, term, lease, health,
                    drain, peers, a refused reload; --json: the raw status line.
                    With several election groups and no GROUP: every group
  leader [GROUP]    the leader's id, or 'none'
  is-leader [GROUP]
                    exit 0 while this server holds a valid lease, 1 otherwise,
                    2 on error (also: several groups and none named)
  watch [GROUP]     one JSON line now and one per change of role, leader, term,
                    lease, health or drain (of every group when none is named
                    and there are several: one 'groups' line per change)
  elect [GROUP]     start an election round now
  yield [GROUP] [--to ID]
                    make this server resign if it leads (exit 1 if it does not);
                    with --to, the RESIGN names server ID as successor, and
                    voters choose it if it claims eligibly (otherwise the usual
                    choice). An ID not in the server list, this server's or a
                    witness's exits 2.
  drain [GROUP]     make this server ineligible to lead until 'undrain', across
                    restarts; a leader hands over once another server is known
                    fit
  undrain [GROUP]   end the drain
  metrics           Prometheus text
  reload            re-read the configuration file now, as SIGHUP does, and
                    wait for the answer: exit 0 when applied, 1 with the reason
                    when refused (the daemon then keeps its running
                    configuration); root or the daemon's user only
  run [--group GROUP] [--grace D] [--poll D] [--max-restarts N
                    [--restart-window D]] -- CMD [ARGS]: run CMD only while
                    this server holds the (group's) lease. run registers
                    with electd ('supervise') and is told at once when the
                    lease is given up: it sends SIGTERM to CMD's process
                    group, SIGKILL after the grace (default 100ms), then
                    confirms, and only then does electd release the other
                    servers. It also enforces the lease end itself (boot
                    clock): SIGTERM when grace + 20ms of lease are left, SIGKILL
                    at 20ms. Refused (exit 2, CMD never started) unless grace +
                    20ms fits in lease - heartbeat - rtt of this electd (e.g. at
                    most 154ms with heartbeat 100ms, rtt 20ms, missed-heartbeats
                    3), and at once, before connecting, above 24h.
                    --poll (default 20ms) is only the reconnect interval
                    (electd pushes every change; run never asks again once
                    registered); any value is safe. CMD
                    is restarted with backoff (0.1s, 0.2s, 0.4s ...)
                    if it exits while this server leads; ELECTD_TERM holds the
                    term (the fencing token), ELECTD_GROUP the group.
                    --max-restarts N: when CMD exits (or cannot start) N times
                    within --restart-window (default 1m), run reports this
                    server unhealthy to electd, which then hands over as soon as
                    another server is known fit; healthy again once the window
                    has passed since the last exit.

Options:
  -s, --socket PATH the control socket (default: the 'socket' of
                    /etc/electd/electd.conf)
  -c, --config PATH take the socket from this file instead
  -i, --id ID       the socket of server ID in the file ({id} replaced), as
                    electd --id ID (electd@ID.service) listens on
  -h, --help        print this help

Exit status: 0 success; 1 a negative answer (is-leader, yield on a follower,
reload refused); 2 an error (no daemon, permission denied, bad usage).
";

#[cfg(test)]
mod tests {
    use super::USAGE;
    use std::process::Command;

    /// The commands of electctl(1), in its order: each `.B`/`.BR` entry of COMMANDS.
    fn man_commands() -> Vec<String> {
        let man = include_str!("../../docs/man/man1/electctl.1");
        let section = man
            .split(".SH COMMANDS")
            .nth(1)
            .and_then(|s| s.split("\n.SH ").next())
            .expect("a COMMANDS section");
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
                    .replace('\\', "");
                out.push(word);
            }
        }
        out
    }

    /// Issue 13 item 7: `electctl --help` fits 80 columns (a longer line wraps to
    /// column 0 and breaks the hanging indent), every description starts at column 20,
    /// and it lists the commands of the man page in the same order.
    #[test]
    fn help_fits_80_columns_and_matches_the_man_page() {
        let mut commands = Vec::new();
        let mut in_commands = false;
        for l in USAGE.lines() {
            assert!(l.chars().count() <= 80, "over 80 columns: {l:?}");
            if l == "Commands:" {
                in_commands = true;
                continue;
            }
            if l.is_empty() {
                in_commands = false;
            }
            if !in_commands {
                continue;
            }
            if let Some(entry) = l.strip_prefix("  ").filter(|e| !e.starts_with(' ')) {
                commands.push(entry.split_whitespace().next().unwrap().to_string());
                // A command's description starts at column 20 unless its synopsis is
                // longer, then on the next line.
                if entry.contains("  ") {
                    assert_eq!(&l[18..20], "  ", "description not at column 20: {l:?}");
                    assert_ne!(&l[20..21], " ", "description not at column 20: {l:?}");
                }
            } else {
                assert!(
                    l.starts_with(&" ".repeat(20)) && !l.starts_with(&" ".repeat(21)),
                    "continuation not at column 20: {l:?}"
                );
            }
        }
        assert_eq!(commands, man_commands(), "electctl --help vs electctl(1)");
    }

    /// The bash completion the package installs (issue 23, item 9).
    const COMPLETION: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/pkg/completion/electctl");

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
}

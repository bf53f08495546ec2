//! The configuration parser's tests: every directive, rule and message.

use super::*;

const GOOD: &str = "\
cluster orders-eu                      # name
server 1 10.0.1.11:7400 name a1
server 2 10.0.2.12:7400 name b1 priority 10
server 3 10.0.3.13:7400 name c1 witness
id 1
multicast 239.255.47.1:7400 interface eth0 ttl 1
heartbeat 1s
rtt 100ms
missed-heartbeats 3
drift 0.01
socket /run/electd/electd-{id}.sock
socket-mode 0660
state /var/lib/electd/{id}.state
hook-timeout 10s
";

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("electd.conf"), None)
}

/// The warnings of `text`, which must parse.
fn warnings_of(text: &str) -> Vec<String> {
    parse(text).unwrap().warnings()
}

/// Asserts that `GOOD` with each case's line appended (line 15) is refused with the
/// case's error.
fn assert_appended_refused(cases: &[(&str, &str)]) {
    for &(line, want) in cases {
        let text = format!("{GOOD}{line}\n");
        assert_eq!(parse(&text).unwrap_err().to_string(), want, "{line}");
    }
}

/// Issue 20: a hold is compared with max-hold as a LEAD carries it (rounded up to
/// whole milliseconds). 100.9ms * 3 = 302.7 ms travels as 303 ms, which every
/// receiver with max-hold 302.7ms refuses: the cluster would churn with no lease.
#[test]
fn max_hold_is_checked_against_the_hold_as_carried() {
    let base = GOOD.replace("heartbeat 1s\n", "heartbeat 100.9ms\n");
    let refused = parse(&format!("{base}max-hold 302.7ms\n")).unwrap_err();
    assert!(
        refused.to_string().contains("must not exceed max-hold"),
        "{refused}"
    );
    assert!(parse(&format!("{base}max-hold 303ms\n")).is_ok());
}

#[test]
fn the_spec_example_parses() {
    let c = parse(GOOD).unwrap();
    assert_eq!(c.servers.len(), 3);
    assert_eq!(c.servers[1].priority, 10);
    assert!(c.servers[2].witness);
    assert_eq!(c.state, PathBuf::from("/var/lib/electd/1.state"));
    assert_eq!(c.socket, PathBuf::from("/run/electd/electd-1.sock"));
    assert_eq!(c.socket_mode, 0o660);
    assert!(matches!(c.transport, Transport::Multicast { ttl: 1, .. }));
    let o = Config::parse(GOOD, Path::new("x"), Some(2)).unwrap();
    assert_eq!(
        (o.id, o.state.clone()),
        (2, PathBuf::from("/var/lib/electd/2.state"))
    );
    assert_eq!(
        o.fingerprint(),
        c.fingerprint(),
        "the id is not part of the cluster"
    );
}

#[test]
fn fingerprint_covers_name_ids_addresses_and_witness_marks() {
    let base = parse(GOOD).unwrap().fingerprint();
    for (from, to) in [
        ("orders-eu", "orders-us"),
        ("10.0.2.12:7400", "10.0.2.12:7401"),
        (
            "server 3 10.0.3.13:7400 name c1 witness",
            "server 3 10.0.3.13:7400 name c1",
        ),
        ("server 3 ", "server 4 "),
    ] {
        assert_ne!(
            parse(&GOOD.replace(from, to)).unwrap().fingerprint(),
            base,
            "{from} -> {to}"
        );
    }
    let renamed = parse(&GOOD.replace("name b1 priority 10", "name bee priority 3")).unwrap();
    assert_eq!(
        renamed.fingerprint(),
        base,
        "names and priorities may differ per server"
    );
}

#[test]
fn errors_name_file_line_and_problem() {
    let cases = [
        (
            "hearbeat 1s",
            "electd.conf:15: unknown directive 'hearbeat' (did you mean 'heartbeat'?)",
        ),
        (
            "heartbeat 1",
            "electd.conf:15: heartbeat: duration '1' needs a unit (ms, s, m or h)",
        ),
        (
            "rtt 5parsecs",
            "electd.conf:15: rtt: unknown unit 'parsecs' in '5parsecs' (use ms, s, m or h)",
        ),
        (
            "server 1 10.0.9.9:1 name z",
            "electd.conf:15: server id 1 is listed twice",
        ),
        (
            "server 0 10.0.9.9:1",
            "electd.conf:15: server id '0' is not in 1..=255",
        ),
        (
            "server 9 nowhere",
            "electd.conf:15: 'nowhere' needs a port: ADDRESS:PORT, [IPV6-ADDRESS]:PORT or NAME:PORT",
        ),
        (
            "multicast 10.0.0.1:7400 interface eth0",
            "electd.conf:15: 10.0.0.1 is not a multicast address",
        ),
        ("drift 0.5", "electd.conf:15: drift 0.5 must be in [0, 0.1)"),
        (
            "socket-mode 999",
            "electd.conf:15: '999' is not an octal mode like 0660",
        ),
        (
            "rtt 2s",
            "electd.conf:15: 'rtt' is given twice (first on line 8): keep one",
        ),
        (
            "max-hold 2s",
            "electd.conf:15: heartbeat * missed-heartbeats must not exceed max-hold (in whole milliseconds, rounded up, as a LEAD carries it)",
        ),
        (
            "max-hold 2000h",
            "electd.conf:15: max-hold must be at most 49 days",
        ),
        (
            "id 9",
            "electd.conf:15: 'id' is given twice (first on line 5): keep one",
        ),
    ];
    assert_appended_refused(&cases);
    assert_eq!(
        parse(&GOOD.replace("id 1", "id 9"))
            .unwrap_err()
            .to_string(),
        "electd.conf:5: this server's id 9 is not in the server list"
    );
    assert_eq!(
        parse("server 1 1.2.3.4:5\nid 1\nunicast\n")
            .unwrap_err()
            .to_string(),
        "electd.conf: missing 'cluster NAME'"
    );
    assert!(
        parse("cluster x\nserver 1 1.2.3.4:5\nid 1\n")
            .unwrap_err()
            .msg
            .starts_with("missing transport")
    );
}

#[test]
fn check_and_preempt_directives() {
    let c = parse(GOOD).unwrap();
    assert_eq!((c.check.clone(), c.preempt_delay), (None, None));
    let c = parse(&format!(
        "{GOOD}check /usr/local/bin/healthy --fast  -x\npreempt-delay 30s\n"
    ))
    .unwrap();
    let k = c.check.clone().unwrap();
    assert_eq!(k.argv, ["/usr/local/bin/healthy", "--fast", "-x"]);
    assert_eq!(k.line, 15);
    assert_eq!(
        (k.interval, k.timeout, k.fall, k.rise),
        (Duration::from_secs(1), Duration::from_millis(500), 3, 2)
    );
    assert_eq!(c.preempt_delay, Some(Duration::from_secs(30)));
    assert_eq!(
        c.node_config(0).preempt_delay,
        Some(Duration::from_secs(30))
    );
    // A short interval shortens the default timeout with it.
    let c = parse(&format!(
        "{GOOD}check x\ncheck-interval 100ms\ncheck-fall 2\ncheck-rise 5\n"
    ))
    .unwrap()
    .check
    .unwrap();
    assert_eq!(
        (c.interval, c.timeout, c.fall, c.rise),
        (Duration::from_millis(100), Duration::from_millis(100), 2, 5)
    );
    assert_eq!(
        parse(&format!("{GOOD}preempt-delay off\n"))
            .unwrap()
            .preempt_delay,
        None
    );
    // Settings without a check are a warning; a second check line is refused.
    let c = parse(&format!("{GOOD}check-interval 2s\n")).unwrap();
    assert!(c.check.is_none());
    assert!(
        c.warnings().iter().any(|w| w.ends_with(
            ":15: check settings without a 'check' line: this server is not health-checked"
        )),
        "{:?}",
        c.warnings()
    );
    assert_eq!(
        parse(&format!("{GOOD}check a\ncheck b\n"))
            .unwrap_err()
            .to_string(),
        "electd.conf:16: 'check' is given twice (first on line 15); run both checks from one script"
    );
}

#[test]
fn check_and_preempt_errors_name_the_line() {
    let cases = [
        ("check", "electd.conf:15: 'check' needs a command"),
        (
            "check-interval 5ms",
            "electd.conf:15: check-interval must be between 10ms and 1h, not 5ms",
        ),
        (
            "check-interval 2h",
            "electd.conf:15: check-interval must be between 10ms and 1h, not 7200s",
        ),
        ("check-interval", "electd.conf:15: missing duration"),
        (
            "check-timeout 0ms",
            "electd.conf:15: check-timeout must be at least 1ms",
        ),
        (
            "check x\ncheck-timeout 2s",
            "electd.conf:16: check-timeout 2000 ms must not exceed check-interval 1000 ms (checks run one at a time)",
        ),
        (
            "check-fall 0",
            "electd.conf:15: check-fall '0' is not in 1..=100",
        ),
        (
            "check-rise 101",
            "electd.conf:15: check-rise '101' is not in 1..=100",
        ),
        (
            "check-rise x",
            "electd.conf:15: check-rise 'x' is not in 1..=100",
        ),
        (
            "preempt-delay 1s",
            "electd.conf:15: preempt-delay 1000 ms must be at least heartbeat x missed-heartbeats (3000 ms)",
        ),
        (
            "preempt-delay 25h",
            "electd.conf:15: preempt-delay must be at most 24h",
        ),
        (
            "preempt-delay soon",
            "electd.conf:15: preempt-delay: unknown unit 'soon' in 'soon' (use ms, s, m or h)",
        ),
        (
            "chek /bin/true",
            "electd.conf:15: unknown directive 'chek' (did you mean 'check'?)",
        ),
    ];
    assert_appended_refused(&cases);
    let long = format!("{GOOD}check {}\n", "a ".repeat(MAX_CHECK_ARGS + 1));
    assert!(parse(&long).unwrap_err().msg.contains("at most 64"));
}

#[test]
fn warnings_for_a_check_that_cannot_run() {
    let c = parse(&format!("{GOOD}check /nonexistent/electd-check\n")).unwrap();
    let w = c.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with(
            "electd.conf:15: check command '/nonexistent/electd-check' does not exist"
        ),
        "{w:?}"
    );
    assert!(warnings_of(&format!("{GOOD}check /bin/sh -c true\n")).is_empty());
    assert!(warnings_of(&format!("{GOOD}check sh -c true\n")).is_empty());
    let plain = std::env::temp_dir().join(format!("electd-check-{}", std::process::id()));
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    let w = warnings_of(&format!("{GOOD}check {}\n", plain.display()));
    let _ = std::fs::remove_file(&plain);
    assert!(w[0].contains("is not executable"), "{w:?}");
    assert!(executable("/").unwrap_err().contains("directory"));
    assert!(
        executable("no-such-electd-check")
            .unwrap_err()
            .contains("PATH")
    );
    // Same priority everywhere: preempt-delay can never act.
    let same = GOOD.replace(" priority 10", "");
    let w = warnings_of(&format!("{same}preempt-delay 1m\n"));
    assert!(w[0].contains("preempt-delay has no effect"), "{w:?}");
    assert!(warnings_of(&format!("{GOOD}preempt-delay 1m\n")).is_empty());
}

/// Issue 13: IPv6 and host names, one family per cluster, ttl 0.
#[test]
fn ipv6_names_and_one_family_per_cluster() {
    let v6 = "cluster c\nserver 1 [2001:db8::11]:7400\nserver 2 [2001:db8::12]:7400 name b\nserver 3 node3.example.net:7400\nid 1\n";
    let c = parse(&format!(
        "{v6}multicast [ff12::4711]:7400 interface eth0 ttl 0\n"
    ))
    .unwrap();
    assert_eq!(c.family, Family::V6);
    assert_eq!(
        c.transport,
        Transport::Multicast {
            group: "[ff12::4711]:7400".parse().unwrap(),
            interface: "eth0".into(),
            ttl: 0
        }
    );
    assert_eq!(c.servers[1].addr.to_string(), "[2001:db8::12]:7400");
    assert_eq!(
        c.servers[2].addr,
        Address::Name("node3.example.net".into(), 7400)
    );
    assert_eq!(c.servers[2].line, 4);
    assert_eq!(parse(&format!("{v6}unicast\n")).unwrap().family, Family::V6);
    // Names alone: IPv4 unless 'unicast ipv6' says otherwise.
    let names = "cluster c\nserver 1 a.example:1\nserver 2 b.example:1\nid 1\n";
    for (t, f) in [
        ("unicast", Family::V4),
        ("unicast ipv4", Family::V4),
        ("unicast ipv6", Family::V6),
        ("multicast [ff15::1]:7 interface eth0", Family::V6),
        ("multicast 239.1.1.1:7 interface eth0 ttl 255", Family::V4),
    ] {
        assert_eq!(parse(&format!("{names}{t}\n")).unwrap().family, f, "{t}");
    }
    let v4 = "cluster c\nserver 1 10.0.0.1:7400\nserver 2 n2.example:7400\nid 1\n";
    for (text, want) in [
        (
            format!("{v4}server 3 [2001:db8::3]:7400\nunicast\n"),
            "electd.conf:5: server 3 [2001:db8::3]:7400 is IPv6 but server 1 10.0.0.1:7400 (line 2) is IPv4: one address family per cluster (every server and the multicast group)",
        ),
        (
            format!("{v4}multicast [ff12::1]:7400 interface eth0\n"),
            "electd.conf:5: multicast group [ff12::1]:7400 is IPv6 but server 1 10.0.0.1:7400 (line 2) is IPv4: one address family per cluster (every server and the multicast group)",
        ),
        (
            format!("{v4}unicast ipv6\n"),
            "electd.conf:5: 'unicast ipv6' is IPv6 but server 1 10.0.0.1:7400 (line 2) is IPv4: one address family per cluster (every server and the multicast group)",
        ),
        (
            format!("{v4}unicast ipv5\n"),
            "electd.conf:5: expected: unicast [ipv4|ipv6]",
        ),
        (
            format!("{v4}server 3 [fe80::3]:7400\nunicast\n"),
            "electd.conf:5: fe80::3 is link-local (fe80::/10): its scope is an interface name that differs per host; use a global or unique-local (fd00::/8) address",
        ),
        (
            format!("{v4}server 3 [fe80::3%eth0]:7400\nunicast\n"),
            "electd.conf:5: '[fe80::3%eth0]:7400': zones ('%eth0') are not supported: the list must be the same text on every server; use a global or unique-local (fd00::/8) address",
        ),
        (
            format!("{v4}server 3 N2.Example:7400\nunicast\n"),
            "electd.conf:5: address n2.example:7400 is listed twice",
        ),
        (
            format!("{v4}multicast 239.1.1.1:7400 interface eth0 ttl 256\n"),
            "electd.conf:5: ttl '256' is not in 0..=255",
        ),
    ] {
        assert_eq!(parse(&text).unwrap_err().to_string(), want);
    }
    assert_eq!(
        parse(&format!(
            "{v6}server 4 [2001:0DB8::12]:1\nserver 5 [2001:db8::12]:7400\nunicast\n"
        ))
        .unwrap_err()
        .to_string(),
        "electd.conf:7: address [2001:db8::12]:7400 is listed twice"
    );
    let c = parse(&format!(
        "{v4}multicast 239.1.1.1:7400 interface eth0 ttl 0\n"
    ))
    .unwrap();
    assert!(matches!(c.transport, Transport::Multicast { ttl: 0, .. }));
}

/// The fingerprint is the text of the list (SPEC section 16): an IPv4 list keeps
/// the value it had before names and IPv6 existed; a name is not its address.
#[test]
fn fingerprint_is_the_text_of_the_list() {
    // The value electd computed for this list before issue 13: a rolling upgrade
    // of an IPv4 cluster keeps talking.
    assert_eq!(parse(GOOD).unwrap().fingerprint(), 0xdb28_d655);
    let base = "cluster c\nserver 1 127.0.0.1:7400\nserver 2 localhost:7401\nid 1\nunicast\n";
    let fp = |t: &str| parse(t).unwrap().fingerprint();
    assert_ne!(
        fp(base),
        fp(&base.replace("localhost", "127.0.0.1")),
        "a name counts as written, not as what it resolves to"
    );
    assert_eq!(fp(base), fp(&base.replace("localhost", "LocalHost")));
    assert_ne!(fp(base), fp(&base.replace("localhost", "localhost.")));
    let v6 = "cluster c\nserver 1 [2001:db8::1]:7400\nserver 2 [2001:db8::2]:7400\nid 1\nunicast\n";
    assert_eq!(fp(v6), fp(&v6.replace("2001:db8::1", "2001:0db8:0:0::1")));
    let names = "cluster c\nserver 1 a.example:1\nserver 2 b.example:1\nid 1\nunicast\n";
    assert_ne!(
        fp(names),
        fp(&names.replace("unicast", "unicast ipv6")),
        "the same names in another family are other addresses"
    );
    assert_eq!(fp(names), fp(&names.replace("unicast", "unicast ipv4")));
}

#[test]
fn names_resolve_once_to_the_clusters_family() {
    let c = parse("cluster c\nserver 1 localhost:7400\nserver 2 127.0.0.2:7400\nid 1\nunicast\n")
        .unwrap();
    assert_eq!(
        c.resolve().unwrap(),
        vec![
            (1, "127.0.0.1:7400".parse().unwrap()),
            (2, "127.0.0.2:7400".parse().unwrap())
        ]
    );
    let c = parse(
        "cluster c\nserver 1 localhost:7400\nserver 2 no-such-host.invalid:7400\nid 1\nunicast\n",
    )
    .unwrap();
    let e = c.resolve().unwrap_err().to_string();
    assert!(
        e.starts_with("electd.conf:3: server 2: cannot resolve 'no-such-host.invalid': "),
        "{e}"
    );
    let c = parse("cluster c\nserver 1 127.0.0.1:7400\nserver 2 localhost:7400\nid 1\nunicast\n")
        .unwrap();
    assert_eq!(
        c.resolve().unwrap_err().to_string(),
        "electd.conf:3: server 2 localhost:7400 is 127.0.0.1:7400, the address of server 1"
    );
    // An IPv6 cluster takes localhost's IPv6 address, or says it has none (hosts
    // files differ: Debian lists ::1 as localhost, some containers do not).
    let c =
        parse("cluster c\nserver 1 [::1]:7400\nserver 2 localhost:7401\nid 1\nunicast\n").unwrap();
    match c.resolve() {
        Ok(a) => assert_eq!(a[1], (2, "[::1]:7401".parse().unwrap())),
        Err(e) => assert!(
            e.to_string().starts_with(
                "electd.conf:3: server 2: 'localhost' has no IPv6 address (it resolves to 127.0.0.1"
            ),
            "{e}"
        ),
    }
}

/// Three servers that may all lead, for election groups (SPEC section 15).
const THREE: &str = "\
cluster g
server 1 127.0.0.1:7411
server 2 127.0.0.1:7412 priority 5
server 3 127.0.0.1:7413
id 1
unicast
";

/// `THREE` with `n` groups g0, g1, ... after `top`, each holding `body`.
fn with_groups(top: &str, n: usize, body: &str) -> String {
    let groups: String = (0..n).map(|i| format!("group g{i}\n{body}")).collect();
    format!("{THREE}{top}{groups}")
}

fn orders(c: &Config) -> Vec<Vec<u16>> {
    c.groups.iter().map(|g| g.order.clone()).collect()
}

/// SPEC section 15: without `group` lines, one `default` group and nothing changes.
#[test]
fn no_group_lines_make_one_default_group() {
    let c = parse(GOOD).unwrap();
    assert_eq!(
        c.groups,
        [Group {
            name: "default".into(),
            line: 0,
            prefer: None,
            order: vec![],
            on_leader: None,
            on_follower: None,
            check: None,
        }]
    );
    assert!(!c.has_groups() && !c.balance);
    assert_eq!(
        c.fingerprint(),
        0xdb28_d655,
        "the fingerprint of before groups"
    );
    assert_eq!(c.group_index("default"), Some(0));
    let prios = |nc: NodeConfig| -> Vec<u8> { nc.servers.iter().map(|s| s.priority).collect() };
    assert_eq!(prios(c.group_node_config(0, 7)), [0, 10, 0]);
    // The default group runs the file's hooks and check.
    let c = parse(&format!(
        "{GOOD}on-leader /bin/start a\non-follower /bin/stop\ncheck /bin/true\ncheck-fall 5\n"
    ))
    .unwrap();
    let g = &c.groups[0];
    assert_eq!(
        (&g.on_leader, &g.on_follower, &g.check),
        (&c.on_leader, &c.on_follower, &c.check)
    );
    assert_eq!(g.check.as_ref().unwrap().fall, 5);
    assert_eq!(c.fingerprint(), 0xdb28_d655);
    // `balance on` alone leaves the servers' priorities in charge, and says so.
    let c = parse(&format!("{GOOD}balance on\n")).unwrap();
    assert!(c.groups[0].order.is_empty());
    assert_eq!(c.fingerprint(), 0xdb28_d655);
    assert_eq!(
        c.warnings(),
        ["electd.conf:15: balance on has no effect without 'group' lines"]
    );
}

/// SPEC section 15: the k-th group without `prefer` gets the list rotated by k; past
/// the first S groups the rest of the order turns too, so a server's groups fall
/// back to different servers.
#[test]
fn balance_rotates_the_server_list_over_the_groups() {
    let c = parse(&with_groups("balance on\n", 6, "")).unwrap();
    assert!(c.has_groups() && c.balance);
    assert_eq!(
        orders(&c),
        [
            [1, 2, 3],
            [2, 3, 1],
            [3, 1, 2],
            [1, 3, 2],
            [2, 1, 3],
            [3, 2, 1]
        ]
    );
    for id in 1..=3 {
        let mine: Vec<&Group> = c.groups.iter().filter(|g| g.order[0] == id).collect();
        assert_eq!(mine.len(), 2, "server {id} leads 6/3 groups");
        assert_ne!(
            mine[0].order[1], mine[1].order[1],
            "server {id}'s groups fall back to different servers"
        );
    }
    // 5 servers, 20 groups: first choices 4 each; each server's second choices
    // cover all four others.
    for (s, g) in [(5u16, 20usize), (4, 12), (2, 4)] {
        let leaders: Vec<u16> = (1..=s).collect();
        let orders: Vec<Vec<u16>> = (0..g)
            .map(|k| groups::balanced_order(&leaders, k))
            .collect();
        for id in 1..=s {
            let mine: Vec<&Vec<u16>> = orders.iter().filter(|o| o[0] == id).collect();
            assert_eq!(mine.len(), g / usize::from(s));
            let seconds: std::collections::BTreeSet<u16> = mine.iter().map(|o| o[1]).collect();
            assert_eq!(
                seconds.len(),
                mine.len().min(usize::from(s) - 1),
                "{s} servers, {g} groups, server {id}: {orders:?}"
            );
            for o in &mine {
                let mut sorted = o.to_vec();
                sorted.sort();
                assert_eq!(sorted, leaders, "an order lists every server once");
            }
        }
    }
    // Groups with `prefer` keep it and do not count; witnesses are never in an order.
    let text = THREE
        .replace("7412 priority 5", "7412 witness")
        .replace("unicast\n", "server 4 127.0.0.1:7414\nunicast\n")
        + "balance on\ngroup a\ngroup b\nprefer 4\ngroup c\ngroup d\n";
    let c = parse(&text).unwrap();
    assert_eq!(
        orders(&c),
        [vec![1, 3, 4], vec![4], vec![3, 4, 1], vec![4, 1, 3]]
    );
    assert_eq!(c.groups[1].prefer, Some(vec![4]));
    // Without balance, groups without `prefer` leave it to the servers' priorities.
    let c = parse(&with_groups("balance off\n", 2, "")).unwrap();
    assert!(!c.balance);
    assert_eq!(orders(&c), [Vec::<u16>::new(), vec![]]);
    let c = parse(&with_groups("", 1, "prefer 3 1\n")).unwrap();
    assert_eq!(orders(&c), [[3, 1]]);
    assert_eq!(
        parse(&format!("{THREE}balance maybe\n"))
            .unwrap_err()
            .to_string(),
        "electd.conf:7: expected: balance on|off, not 'maybe'"
    );
}

/// The first server of a group's order has the highest priority in that group.
#[test]
fn group_node_config_follows_the_order() {
    let c = parse(&format!("{THREE}group a\nprefer 3 1\ngroup b\n")).unwrap();
    let prio = |g: usize| -> Vec<(u16, u8)> {
        let nc = c.group_node_config(g, 0);
        nc.servers.iter().map(|s| (s.id, s.priority)).collect()
    };
    assert_eq!(prio(0), [(1, 1), (2, 0), (3, 2)]);
    assert_eq!(
        prio(1),
        [(1, 0), (2, 5), (3, 0)],
        "the servers' own priorities"
    );
    let c = parse(&with_groups("balance on\n", 2, "")).unwrap();
    let nc = c.group_node_config(1, 0);
    let best = nc.servers.iter().max_by_key(|s| s.priority).unwrap();
    assert_eq!(best.id, c.groups[1].order[0]);
    assert_eq!(best.id, 2);
}

#[test]
fn prefer_names_servers_that_may_lead() {
    let cases = [
        (
            "prefer 1 9",
            "electd.conf:16: prefer: server 9 is not in the server list",
        ),
        (
            "prefer 3",
            "electd.conf:16: prefer: server 3 is a witness: a witness never leads",
        ),
        (
            "prefer 1 2 1",
            "electd.conf:16: prefer: server 1 is listed twice",
        ),
        (
            "prefer",
            "electd.conf:16: 'prefer' needs at least one server id",
        ),
        (
            "prefer 1 b1",
            "electd.conf:16: prefer: 'b1' is not a server id (1..=255)",
        ),
        (
            "prefer 0",
            "electd.conf:16: prefer: '0' is not a server id (1..=255)",
        ),
        (
            "prefer 1\nprefer 2",
            "electd.conf:17: 'prefer' is given twice in group 'orders' (first on line 16)",
        ),
    ];
    // GOOD's servers: 1, 2 and the witness 3; `group orders` is line 15.
    for (line, want) in cases {
        let text = format!("{GOOD}group orders\n{line}\n");
        let got = parse(&text).unwrap_err();
        assert_eq!(got.to_string(), want, "{line}");
    }
    assert_eq!(
        parse(&format!("{GOOD}prefer 1 2\n"))
            .unwrap_err()
            .to_string(),
        "electd.conf:15: 'prefer' belongs to a group: put it after a 'group' line"
    );
    let c = parse(&format!("{GOOD}group orders\nprefer 2 1\n")).unwrap();
    assert_eq!(c.groups[0].prefer, Some(vec![2, 1]));
}

#[test]
fn cluster_wide_directives_stand_before_the_first_group() {
    for d in [
        "heartbeat 2s",
        "balance on",
        "preempt-delay 30s",
        "server 4 127.0.0.1:7414",
        "id 2",
        "unicast",
        "metrics-listen off",
        "hook-timeout 5s",
    ] {
        let word = d.split(' ').next().unwrap();
        assert_eq!(
            parse(&format!("{THREE}group a\ncheck /bin/true\n{d}\ngroup b\n"))
                .unwrap_err()
                .to_string(),
            format!(
                "electd.conf:9: '{word}' is cluster-wide: put it before the first 'group' line"
            ),
        );
    }
    // A misspelling is still one, inside a group too.
    assert_eq!(
        parse(&format!("{THREE}group a\nprefr 1\n"))
            .unwrap_err()
            .to_string(),
        "electd.conf:8: unknown directive 'prefr' (did you mean 'prefer'?)"
    );
    assert_eq!(
        parse(&format!("{THREE}grop a\n")).unwrap_err().to_string(),
        "electd.conf:7: unknown directive 'grop' (did you mean 'group'?)"
    );
    assert!(parse(&format!("{THREE}balance on\npreempt-delay 30s\ngroup a\n")).is_ok());
}

#[test]
fn group_names_and_the_number_of_groups() {
    let name_err = |n: &str| {
        parse(&format!("{THREE}group {n}\n"))
            .unwrap_err()
            .to_string()
    };
    for bad in ["1abc", "Orders", "oRders", "a.b", "_a", "-a", "a/b", "ä"] {
        assert_eq!(
            name_err(bad),
            format!(
                "electd.conf:7: group name '{bad}' must be a lowercase letter followed by at most 31 of a-z, 0-9, '_' and '-'"
            ),
        );
    }
    let long = format!("a{}", "b".repeat(32));
    assert!(
        name_err(&long).contains("must be a lowercase letter"),
        "33 characters"
    );
    assert_eq!(name_err(""), "electd.conf:7: missing group name");
    assert_eq!(
        name_err("a b"),
        "electd.conf:7: expected one group name, got 2"
    );
    let ok = format!("a{}", "-_9z".repeat(7) + "xyz");
    assert_eq!(ok.len(), 32);
    for good in ["default", "a", "orders-eu_2", ok.as_str()] {
        let c = parse(&format!("{THREE}group {good}\n")).unwrap();
        assert_eq!((c.groups[0].name.as_str(), c.groups[0].line), (good, 7));
    }
    assert_eq!(
        parse(&format!("{THREE}group a\ngroup b\ngroup a\n"))
            .unwrap_err()
            .to_string(),
        "electd.conf:9: group 'a' is given twice (first on line 7)"
    );
    let c = parse(&with_groups("", MAX_GROUPS, "")).unwrap();
    assert_eq!(c.groups.len(), 64);
    assert_eq!(c.group_index("g63"), Some(63));
    assert_eq!(
        parse(&with_groups("", MAX_GROUPS + 1, ""))
            .unwrap_err()
            .to_string(),
        "electd.conf:71: more than 64 groups"
    );
}

/// Top-level hooks and check are defaults each group may override, one by one.
#[test]
fn groups_inherit_hooks_and_check_from_the_top_level() {
    let top = "on-leader /bin/start\non-follower /bin/stop\ncheck /bin/true top\ncheck-interval 2s\ncheck-fall 4\n";
    let text = format!(
        "{THREE}{top}group plain\ngroup own\non-leader /bin/own-start\ncheck /bin/true own\ncheck-rise 7\ngroup tuned\ncheck-interval 300ms\n"
    );
    let c = parse(&text).unwrap();
    assert_eq!(
        c.on_leader,
        Some(vec!["/bin/start".to_string()]),
        "the top level's"
    );
    let top_check = c.check.clone().unwrap();
    assert_eq!(
        (top_check.line, top_check.interval, top_check.fall),
        (9, Duration::from_secs(2), 4)
    );
    let [plain, own, tuned] = &c.groups[..] else {
        panic!("{:?}", c.groups)
    };
    assert_eq!(
        (&plain.on_leader, &plain.on_follower, &plain.check),
        (&c.on_leader, &c.on_follower, &c.check)
    );
    assert_eq!(own.on_leader, Some(vec!["/bin/own-start".to_string()]));
    assert_eq!(own.on_follower, c.on_follower, "inherited");
    let k = own.check.clone().unwrap();
    assert_eq!(k.argv, ["/bin/true", "own"]);
    // Settings the group does not set come from the top level.
    assert_eq!(
        (k.line, k.interval, k.timeout, k.fall, k.rise),
        (15, Duration::from_secs(2), Duration::from_millis(500), 4, 7)
    );
    let k = tuned.check.clone().unwrap();
    assert_eq!(k.argv, ["/bin/true", "top"], "the inherited command");
    assert_eq!(
        (k.line, k.interval, k.timeout),
        (9, Duration::from_millis(300), Duration::from_millis(300))
    );
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
    // A group's check rules are the top level's.
    for (tail, want) in [
        (
            "group a\ncheck x\ncheck y\n",
            "electd.conf:10: 'check' is given twice (first on line 9); run both checks from one script",
        ),
        ("group a\ncheck\n", "electd.conf:9: 'check' needs a command"),
        (
            "group a\ncheck-rise 0\n",
            "electd.conf:9: check-rise '0' is not in 1..=100",
        ),
        (
            "group a\ncheck x\ncheck-timeout 3s\n",
            "electd.conf:10: check-timeout 3000 ms must not exceed check-interval 1000 ms in group 'a' (checks run one at a time)",
        ),
    ] {
        let text = format!("{THREE}check-fall 2\n{tail}");
        assert_eq!(parse(&text).unwrap_err().to_string(), want, "{tail}");
    }
    let long = format!(
        "{THREE}group a\ncheck {}\n",
        "a ".repeat(MAX_CHECK_ARGS + 1)
    );
    assert!(parse(&long).unwrap_err().msg.contains("at most 64"));
    // An inherited timeout that the group's own interval makes too long: the
    // group's line is the one to fix.
    assert_eq!(
        parse(&format!(
            "{THREE}check-timeout 800ms\ngroup a\ncheck x\ncheck-interval 500ms\n"
        ))
        .unwrap_err()
        .to_string(),
        "electd.conf:10: check-timeout 800 ms must not exceed check-interval 500 ms in group 'a' (checks run one at a time)"
    );
    // A group may hold a check the top level does not have; the top level's
    // settings are its defaults, so they are not unused.
    let c = parse(&format!(
        "{THREE}check-interval 3s\ngroup a\ngroup b\ncheck /bin/true\n"
    ))
    .unwrap();
    assert_eq!((c.check.clone(), c.groups[0].check.clone()), (None, None));
    assert_eq!(
        c.groups[1].check.as_ref().unwrap().interval,
        Duration::from_secs(3)
    );
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
}

#[test]
fn group_warnings_name_the_group_and_line() {
    let c = parse(&format!(
        "{THREE}check /nonexistent/top\ngroup a\ngroup b\ncheck /nonexistent/b\ngroup c\ncheck /bin/true\ncheck-interval 2s\ngroup d\n"
    ))
    .unwrap();
    assert_eq!(
        c.warnings(),
        [
            "electd.conf:7: check command '/nonexistent/top' does not exist: checks will fail and this server will stay unhealthy in groups 'a', 'd' (it never leads them) until it can run",
            "electd.conf:10: check command '/nonexistent/b' does not exist: checks will fail and this server will stay unhealthy in group 'b' (it never leads it) until it can run",
        ]
    );
    let c = parse(&format!("{THREE}check /bin/true\ngroup a\ncheck /bin/sh\n")).unwrap();
    assert_eq!(
        c.warnings(),
        ["electd.conf:7: every group sets its own 'check': this one is never run"]
    );
    let c = parse(&format!(
        "{THREE}check-interval 2s\ngroup a\ncheck-timeout 100ms\ngroup b\n"
    ))
    .unwrap();
    assert_eq!(
        c.warnings(),
        [
            "electd.conf:7: check settings without a 'check' line: this server is not health-checked",
            "electd.conf:9: check settings without a 'check' line in group 'a': this server is not health-checked in it",
        ]
    );
    let c = parse(&format!("{THREE}balance on\ngroup a\nprefer 1\n")).unwrap();
    assert_eq!(
        c.warnings(),
        ["electd.conf:7: balance on has no effect: every group has a 'prefer' line"]
    );
}

/// SPEC section 15: `balance on` without `preempt-delay` spreads the first elections
/// but cannot restore the spread after a failure, and says so; with it, or where
/// balance never acts, no such warning.
#[test]
fn balance_without_preempt_delay_warns() {
    let want = "electd.conf:7: balance on without preempt-delay: balance cannot restore the spread after a failure (a group that moved stays on its new leader); set preempt-delay";
    assert_eq!(
        warnings_of(&format!("{THREE}balance on\ngroup a\ngroup b\n")),
        [want]
    );
    // `preempt-delay off` is no preempt-delay.
    assert_eq!(
        warnings_of(&format!("{THREE}balance on\npreempt-delay off\ngroup a\n")),
        [want]
    );
    // A group with `prefer` beside one balance rotates: balance still acts.
    assert_eq!(
        warnings_of(&format!("{THREE}balance on\ngroup a\nprefer 2\ngroup b\n")),
        [want]
    );
    for quiet in [
        "balance on\npreempt-delay 30s\ngroup a\ngroup b\n",
        "balance off\ngroup a\ngroup b\n",
        "group a\ngroup b\n",
    ] {
        assert!(
            warnings_of(&format!("{THREE}{quiet}")).is_empty(),
            "{quiet}"
        );
    }
}

/// SPEC section 14: preempt-delay acts when some group prefers one server to another.
#[test]
fn preempt_delay_warning_looks_at_every_group() {
    let flat = THREE.replace(" priority 5", "");
    let warns = |tail: &str| warnings_of(&format!("{flat}preempt-delay 1m\n{tail}"));
    assert_eq!(
        warns(""),
        [
            "electd.conf: preempt-delay has no effect: every server that may lead has the same priority"
        ]
    );
    assert_eq!(
        warns("group a\ngroup b\n"),
        [
            "electd.conf: preempt-delay has no effect: in every group, every server that may lead has the same priority"
        ]
    );
    assert!(warns("group a\ngroup b\nprefer 2\n").is_empty());
    assert!(warns("group a\nprefer 1 2 3\n").is_empty());
    let balanced = parse(&format!("{flat}balance on\npreempt-delay 1m\ngroup a\n")).unwrap();
    assert!(balanced.warnings().is_empty(), "{:?}", balanced.warnings());
    // Servers' own priorities differ: a group without an order keeps them.
    assert!(warnings_of(&format!("{THREE}preempt-delay 1m\ngroup a\n")).is_empty());
}

/// The wire names groups by index: the list of names, in order, is in the
/// fingerprint; preferences may differ per server like priorities.
#[test]
fn group_names_and_their_order_are_in_the_fingerprint() {
    let fp = |tail: &str| parse(&format!("{THREE}{tail}")).unwrap().fingerprint();
    let base = fp("group a\ngroup b\n");
    assert_ne!(base, fp(""));
    assert_ne!(
        base,
        fp("group default\n"),
        "an explicit default is a group line"
    );
    assert_ne!(base, fp("group b\ngroup a\n"));
    assert_ne!(base, fp("group a\ngroup c\n"));
    assert_ne!(base, fp("group a\n"));
    assert_eq!(base, fp("group a\nprefer 3 2\ngroup b\ncheck /bin/true\n"));
    assert_eq!(base, fp("balance on\ngroup a\ngroup b\n"));
}

#[test]
fn group_summary_for_check_config() {
    let c = parse(&format!(
        "{THREE}balance on\non-follower /bin/stop\ncheck /bin/true\ngroup a\nprefer 3\ngroup b\non-leader /bin/go\ncheck /bin/sh\ngroup c\n"
    ))
    .unwrap();
    let lines: Vec<String> = (0..3).filter_map(|g| c.group_summary(g)).collect();
    assert_eq!(
        lines,
        [
            "group a (line 10): order 3 (prefer); check (line 9, inherited); on-follower",
            "group b (line 12): order 1 2 3 (balance); check (line 14); on-leader, on-follower",
            "group c (line 15): order 2 3 1 (balance); check (line 9, inherited); on-follower",
        ]
    );
    assert_eq!(c.group_summary(3), None);
    let c = parse(GOOD).unwrap();
    assert_eq!(
        c.group_summary(0).unwrap(),
        "group default (line 0): order by server priority; no check; no hooks"
    );
}

#[test]
fn durations() {
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
    assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    for bad in ["", "s", "1x", "-1s", "1e9h", "1..2s"] {
        assert!(parse_duration(bad).is_err(), "{bad}");
    }
}

/// Issue 23, item 3: a scalar directive given twice, `unicast` with `multicast`, a
/// list of witnesses only, and the timing and key rules are refused with the line to
/// fix (the last of the lines a rule involves).
#[test]
fn repeats_both_transports_only_witnesses_and_timings_name_their_line() {
    let appended = [
        (
            "heartbeat 2s",
            "electd.conf:15: 'heartbeat' is given twice (first on line 7): keep one",
        ),
        (
            "unicast",
            "electd.conf:15: 'unicast' and 'multicast' (line 6) together: choose one transport",
        ),
        (
            "multicast 239.1.1.1:7400 interface eth1",
            "electd.conf:15: 'multicast' is given twice (first on line 6): keep one",
        ),
        (
            "socket /tmp/other.sock",
            "electd.conf:15: 'socket' is given twice (first on line 11): keep one",
        ),
        (
            "max-hold 2s",
            "electd.conf:15: heartbeat * missed-heartbeats must not exceed max-hold (in whole milliseconds, rounded up, as a LEAD carries it)",
        ),
        (
            "key-file-next /etc/electd/key.new",
            "electd.conf:15: key-file-next needs key-file",
        ),
    ];
    assert_appended_refused(&appended);
    let replaced = [
        (
            "rtt 100ms",
            "rtt 2s",
            "electd.conf:8: rtt must be shorter than heartbeat",
        ),
        (
            "missed-heartbeats 3",
            "missed-heartbeats 1",
            "electd.conf:9: missed-heartbeats must be between 2 and 100",
        ),
        (
            "heartbeat 1s",
            "heartbeat 5ms",
            "electd.conf:7: heartbeat must be at least 10ms",
        ),
        (
            "name b1 priority 10",
            "name b1 priority 10 witness\nserver 4 10.0.4.14:7400 witness",
            "",
        ),
    ];
    for (from, to, want) in replaced {
        let text = GOOD.replace(from, to);
        match parse(&text) {
            Err(e) => assert_eq!(e.to_string(), want, "{to}"),
            Ok(_) => assert!(want.is_empty(), "{to}: accepted"),
        }
    }
    let witnesses = GOOD
        .replace("name a1", "name a1 witness")
        .replace("priority 10", "priority 10 witness");
    assert_eq!(
        parse(&witnesses).unwrap_err().to_string(),
        "electd.conf:2: every server is a witness: none can lead (a witness only votes); \
         drop 'witness' from at least one"
    );
    // Servers repeat; a group's own directives are once per group.
    let groups = format!("{GOOD}group a\nprefer 1 2\ngroup b\nprefer 2 1\n");
    assert!(parse(&groups).is_ok(), "{:?}", parse(&groups).err());
    let twice = format!("{GOOD}group a\nprefer 1 2\nprefer 2 1\n");
    assert_eq!(
        parse(&twice).unwrap_err().to_string(),
        "electd.conf:17: 'prefer' is given twice in group 'a' (first on line 16)"
    );
    // The lines stay known for the checks made later (the host's, the daemon's).
    let c = parse(GOOD).unwrap();
    assert_eq!(c.line_of("multicast"), Some(6));
    assert_eq!(c.line_of("metrics-listen"), None);
    assert_eq!(c.place("multicast"), "electd.conf:6");
    assert_eq!(c.place("key-file"), "electd.conf");
}

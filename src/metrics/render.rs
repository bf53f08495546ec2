//! The one writer of the text format 0.0.4: walks the table, writes each family's
//! HELP and TYPE, then its samples with their labels escaped.

use super::table::{Family, GROUPS, HTTP, Read, Row, SERVER, Type};
use super::{Snapshot, Value};
use std::fmt::Write as _;

/// The exposition text of `s`: every family of the table in order, then `# EOF`.
pub fn render(s: &Snapshot) -> String {
    let mut out = String::new();
    for f in GROUPS {
        let sources: Vec<_> = s
            .groups
            .iter()
            .map(|g| (Some(g.name.as_str()), g))
            .collect();
        write_family(&mut out, f, &sources);
    }
    for f in SERVER {
        write_family(&mut out, f, &[(None, s)]);
    }
    if let Some(h) = &s.http {
        for f in HTTP {
            write_family(&mut out, f, &[(None, h)]);
        }
    }
    out.push_str("# EOF\n");
    out
}

/// Appends family `f` read from each source: HELP, TYPE, then its samples. A source's
/// own label value (a group's name), if any, comes first. A counter's family is named
/// with its _total suffix, like its samples (what `promtool check metrics` parses).
fn write_family<S>(out: &mut String, f: &Family<S>, sources: &[(Option<&str>, &S)]) {
    let name = match f.kind {
        Type::Counter => format!("electd_{}_total", f.name),
        Type::Gauge => format!("electd_{}", f.name),
    };
    let kind = match f.kind {
        Type::Counter => "counter",
        Type::Gauge => "gauge",
    };
    let _ = writeln!(out, "# HELP {name} {}\n# TYPE {name} {kind}", f.help);
    for &(own, src) in sources {
        let own: Vec<String> = own.into_iter().map(str::to_string).collect();
        let rows: Vec<Row> = match &f.read {
            Read::Value(read) => vec![(Vec::new(), read(src))],
            Read::Each(read) => read(src)
                .into_iter()
                .map(|(label, n)| (vec![label.to_string()], Value::Count(n)))
                .collect(),
            Read::Rows(read) => read(src),
        };
        for (values, v) in rows {
            let values: Vec<&String> = own.iter().chain(&values).collect();
            debug_assert_eq!(values.len(), f.labels.len(), "labels of {name}");
            out.push_str(&name);
            write_labels(out, f.labels, &values);
            let _ = match v {
                Value::Count(n) => writeln!(out, " {n}"),
                Value::Seconds(x) => writeln!(out, " {x:.3}"),
            };
        }
    }
}

/// `{name="value",...}`, nothing when there are no labels.
fn write_labels(out: &mut String, names: &[&str], values: &[&String]) {
    if names.is_empty() {
        return;
    }
    out.push('{');
    for (i, (name, value)) in names.iter().zip(values).enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{name}=\"{}\"", escape(value));
    }
    out.push('}');
}

/// A label value with `\`, `"` and newlines escaped (text format 0.0.4).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::table::{Family, GROUPS, HTTP, SERVER};
    use crate::metrics::{GroupSnapshot, HttpSnapshot};
    use std::time::Duration;

    fn lines_of<'a>(text: &'a str, family: &str) -> Vec<&'a str> {
        text.lines().filter(|l| l.starts_with(family)).collect()
    }

    #[test]
    fn a_leader_writes_its_lease_end_and_peers_their_age_to_the_millisecond() {
        let s = Snapshot {
            groups: vec![GroupSnapshot {
                name: "orders".into(),
                is_leader: true,
                lease_expiry: Some(Duration::from_micros(1_700_000_000_123_456)),
                ..GroupSnapshot::default()
            }],
            peer_last_heard: vec![(2, Duration::from_millis(1500)), (3, Duration::ZERO)],
            peers_heard: 2,
            ..Snapshot::default()
        };
        let text = render(&s);
        assert_eq!(
            lines_of(&text, "electd_lease_expiry_timestamp_seconds{"),
            ["electd_lease_expiry_timestamp_seconds{group=\"orders\"} 1700000000.123"]
        );
        assert_eq!(
            lines_of(&text, "electd_peer_last_heard_seconds{"),
            [
                "electd_peer_last_heard_seconds{peer=\"2\"} 1.500",
                "electd_peer_last_heard_seconds{peer=\"3\"} 0.000"
            ]
        );
        assert_eq!(
            lines_of(&text, "electd_peers_heard "),
            ["electd_peers_heard 2"]
        );
        assert!(text.ends_with("# TYPE electd_peer_last_heard_seconds gauge\nelectd_peer_last_heard_seconds{peer=\"2\"} 1.500\nelectd_peer_last_heard_seconds{peer=\"3\"} 0.000\n# EOF\n"));
    }

    #[test]
    fn label_values_are_escaped() {
        let s = Snapshot {
            id: 7,
            name: "a\\b\"c\nd".into(),
            cluster: "plain".into(),
            ..Snapshot::default()
        };
        let line = format!(
            "electd_server_info{{id=\"7\",name=\"a\\\\b\\\"c\\nd\",cluster=\"plain\",version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(lines_of(&render(&s), "electd_server_info{"), [line]);
    }

    #[test]
    fn a_family_without_samples_keeps_its_help_and_type() {
        let text = render(&Snapshot::default());
        assert!(text.contains("# HELP electd_is_leader 1 while this server holds a valid lease of the group.\n# TYPE electd_is_leader gauge\n# HELP electd_term "));
        assert!(
            !text.contains("electd_http_"),
            "no listener, no http families"
        );
    }

    #[test]
    fn the_listener_families_come_last() {
        let s = Snapshot {
            http: Some(HttpSnapshot {
                answers: [1, 2, 3, 4, 5, 6, 7, 8, 9],
                clients: 3,
                unread: 4,
                ..HttpSnapshot::default()
            }),
            ..Snapshot::default()
        };
        let text = render(&s);
        let tail = &text[text.find("# HELP electd_http_requests_total").unwrap()..];
        assert!(tail.contains("electd_http_requests_total{code=\"505\"} 9\n"));
        assert!(tail.contains("electd_http_clients 3\n"));
        assert!(tail.ends_with("electd_http_closed_total{reason=\"unread\"} 4\n# EOF\n"));
    }

    /// Every family is named once and declares the labels its samples carry.
    #[test]
    fn the_table_is_consistent() {
        fn names<S>(t: &[Family<S>]) -> Vec<&'static str> {
            t.iter().map(|f| f.name).collect()
        }
        let mut all = [names(GROUPS), names(SERVER), names(HTTP)].concat();
        assert!(all.iter().all(|n| !n.ends_with("_total")));
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "a family named twice");
        assert!(GROUPS.iter().all(|f| f.labels.first() == Some(&"group")));
        fn labels<S>(t: &[Family<S>]) -> Vec<usize> {
            t.iter().map(|f| f.labels.len()).collect()
        }
        let labels = [labels(GROUPS), labels(SERVER), labels(HTTP)].concat();
        let s = Snapshot {
            groups: vec![GroupSnapshot::default(); 2],
            dropped: vec![("too_short", 1)],
            peer_last_heard: vec![(2, Duration::ZERO)],
            http: Some(HttpSnapshot::default()),
            ..Snapshot::default()
        };
        let text = render(&s);
        let families: Vec<&str> = text.split("# HELP ").skip(1).collect();
        assert_eq!(families.len(), n);
        for (family, want) in families.iter().zip(labels) {
            for sample in family.lines().skip(2).filter(|l| *l != "# EOF") {
                assert_eq!(sample.matches("=\"").count(), want, "{sample}");
            }
        }
    }
}

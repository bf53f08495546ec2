//! The control socket's request protocol (SPEC section 11): request lines into
//! [`Request`]s, and the error answer and string escaping every answer uses.

use std::io;
use std::path::Path;
use std::time::Duration;

/// The error a leader-only request gets on a follower (`electctl` exits 1 on it).
pub const NOT_LEADER: &str = "not leader";
/// The start of the error a refused `reload` gets; its answer also carries
/// `"refused":true` (`electctl reload` exits 1 on it, 2 on other errors).
pub const RELOAD_REFUSED: &str = "reload refused";
/// The longest reason kept from a supervisor's `health failing` report.
pub const MAX_HEALTH_REASON: usize = 200;

/// The longest request line accepted.
pub const MAX_REQUEST: usize = 1024;

/// A request from a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// One status line (of a group, or of every group).
    Status(Option<String>),
    /// The status line, then one line per change (of a group, or of every group).
    Watch(Option<String>),
    /// Register as a supervisor of a group's lease (or, registered, ask again):
    /// numbered lines. `supervise [GROUP] [grace_ms=N]`: the supervisor's `--grace`,
    /// which a reload must leave room for (absent from older clients).
    Supervise(Option<String>, Option<Duration>),
    /// A supervisor confirms that its command has exited after line N.
    Released(u64),
    /// A supervisor leaves: no command of its runs and none will be started.
    Leave,
    /// Start a round now (in a group).
    Elect(Option<String>),
    /// Resign a group's leadership if leader; with an id, hand over to that server
    /// (`yield [GROUP] [ID]`).
    Yield(Option<String>, Option<u64>),
    /// Make this server ineligible in a group (persisted) until `undrain`.
    Drain(Option<String>),
    /// End a drain.
    Undrain(Option<String>),
    /// A supervisor reports its command's health: None for `health ok`, the reason
    /// for `health failing REASON`.
    Health(Option<String>),
    /// Prometheus text.
    Metrics,
    /// Liveness check.
    Ping,
    /// Re-read the configuration file now, as SIGHUP does, and answer whether the new
    /// configuration was applied or refused (and why).
    Reload,
    /// A known word with bad arguments (the message for the answer).
    Invalid(String),
    /// Anything else (the word, truncated for the answer).
    Unknown(String),
}

/// True for a group name as SPEC section 15 spells it: `[a-z][a-z0-9_-]{0,31}` (a letter
/// first, so a group is never taken for a server id).
pub fn valid_group_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 32
        && b[0].is_ascii_lowercase()
        && b[1..]
            .iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
}

/// A request word's words, shortened for an error answer.
fn shown(w: &str) -> String {
    w.chars().take(32).collect()
}

/// The optional GROUP of `word [GROUP]`; the error request otherwise.
fn group_arg(word: &str, args: &[&str]) -> Result<Option<String>, Request> {
    match args {
        [] => Ok(None),
        [g] if valid_group_name(g) => Ok(Some((*g).to_string())),
        [g] => Err(Request::Invalid(format!(
            "{word}: '{}' is not a group name ([a-z][a-z0-9_-]{{0,31}})",
            shown(g)
        ))),
        _ => Err(Request::Invalid(format!("usage: {word} [GROUP]"))),
    }
}

/// A server id argument: a number is always an id, however large (then no such server).
fn id_arg(word: &str, id: &str) -> Result<u64, Request> {
    match id.parse::<u64>() {
        Ok(n) => Ok(n),
        Err(_) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => {
            Err(Request::Invalid(format!(
                "{word}: no server {} in the server list",
                shown(id)
            )))
        }
        Err(_) => Err(Request::Invalid(format!(
            "{word}: '{}' is not a server id (a number)",
            shown(id)
        ))),
    }
}

/// `yield`, `yield ID`, `yield GROUP`, `yield GROUP ID`.
fn yield_args(args: &[&str]) -> Result<Request, Request> {
    let is_id = |w: &str| w.bytes().all(|b| b.is_ascii_digit());
    match args {
        [] => Ok(Request::Yield(None, None)),
        [id] if is_id(id) => Ok(Request::Yield(None, Some(id_arg("yield", id)?))),
        [g] if valid_group_name(g) => Ok(Request::Yield(Some((*g).to_string()), None)),
        [g, id] if valid_group_name(g) => Ok(Request::Yield(
            Some((*g).to_string()),
            Some(id_arg("yield", id)?),
        )),
        [w] | [w, _] if !valid_group_name(w) && !is_id(w) => Err(Request::Invalid(format!(
            "yield: '{}' is neither a server id (a number) nor a group name",
            shown(w)
        ))),
        _ => Err(Request::Invalid("usage: yield [GROUP] [ID]".into())),
    }
}

/// `supervise [GROUP] [grace_ms=N]`.
fn supervise_args(args: &[&str]) -> Request {
    let (grace, rest): (Vec<&str>, Vec<&str>) =
        args.iter().partition(|a| a.starts_with("grace_ms="));
    let grace = match grace[..] {
        [] => None,
        [g] => match g["grace_ms=".len()..].parse::<u64>() {
            Ok(ms) if ms <= MAX_GRACE_MS => Some(Duration::from_millis(ms)),
            _ => {
                return Request::Invalid(format!(
                    "supervise: '{}' is not a grace in ms (grace_ms=N, N at most {MAX_GRACE_MS})",
                    shown(g)
                ));
            }
        },
        _ => return Request::Invalid("usage: supervise [GROUP] [grace_ms=N]".into()),
    };
    match group_arg("supervise", &rest) {
        Ok(g) => Request::Supervise(g, grace),
        Err(e) => e,
    }
}

/// The largest grace a supervisor may announce (`electctl run` refuses a longer
/// `--grace` before it connects).
const MAX_GRACE_MS: u64 = crate::supervise::MAX_GRACE.as_millis() as u64;

impl Request {
    /// Parses one request line (without its newline).
    pub(super) fn parse(line: &str) -> Request {
        let mut words = line.split_whitespace();
        let word = words.next().unwrap_or("");
        if word == "health" {
            return Self::parse_health(line);
        }
        // At most three words are looked at: more is a usage error either way.
        let rest: Vec<&str> = words.take(3).collect();
        let r = rest.as_slice();
        let grouped = |f: fn(Option<String>) -> Request| match group_arg(word, r) {
            Ok(g) => f(g),
            Err(e) => e,
        };
        match (word, r) {
            ("status", _) => grouped(Request::Status),
            ("watch", _) => grouped(Request::Watch),
            ("supervise", _) => supervise_args(r),
            ("elect", _) => grouped(Request::Elect),
            ("drain", _) => grouped(Request::Drain),
            ("undrain", _) => grouped(Request::Undrain),
            ("released", [n]) => match n.parse::<u64>() {
                Ok(n) if n > 0 => Request::Released(n),
                _ => Request::Invalid("released: N must be a line number from 1".into()),
            },
            ("released", _) => Request::Invalid("usage: released N".into()),
            ("leave", []) => Request::Leave,
            ("yield", _) => yield_args(r).unwrap_or_else(|e| e),
            ("metrics", []) => Request::Metrics,
            ("ping", []) => Request::Ping,
            ("reload", []) => Request::Reload,
            ("reload", _) => Request::Invalid("reload takes no arguments".into()),
            _ => Request::Unknown(line.trim().chars().take(64).collect()),
        }
    }

    /// `health ok` or `health failing REASON...` (the reason is free text).
    fn parse_health(line: &str) -> Request {
        let rest = line
            .trim()
            .strip_prefix("health")
            .unwrap_or("")
            .trim_start();
        let (state, reason) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        match (state, reason.trim()) {
            ("ok", "") => Request::Health(None),
            ("failing", r) => {
                let r: String = r
                    .chars()
                    .map(|c| if c.is_control() { '?' } else { c })
                    .take(MAX_HEALTH_REASON)
                    .collect();
                Request::Health(Some(if r.is_empty() {
                    "no reason given".into()
                } else {
                    r
                }))
            }
            _ => Request::Invalid("usage: health ok | health failing REASON".into()),
        }
    }
}

/// What a client (`electctl`) says when it cannot connect to the socket at `path`: a
/// permission problem is not a stopped daemon, and each has its own remedy.
pub fn connect_error(path: &Path, e: &io::Error) -> String {
    let p = path.display();
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => {
            // The socket, or the directory that holds it when that cannot be searched.
            let group = std::fs::metadata(path)
                .or_else(|_| std::fs::metadata(path.parent().unwrap_or(Path::new("/"))))
                .ok()
                .map(|m| std::os::unix::fs::MetadataExt::gid(&m))
                .map(|gid| crate::access::group_name(gid).unwrap_or_else(|| format!("gid {gid}")));
            format!(
                "permission denied on {p}: run as root or as a member of the socket's group{} (socket-mode)",
                group.map_or(String::new(), |g| format!(" '{g}'"))
            )
        }
        Some(libc::ENOENT | libc::ECONNREFUSED) => {
            format!("cannot connect to {p}: {e} (is electd running?)")
        }
        _ => format!("cannot connect to {p}: {e}"),
    }
}

/// Escapes a string for a JSON string literal (see [`crate::json::string`]).
pub fn json_str(s: &str) -> String {
    crate::json::string(s)
}

/// An `{"error": ...}` answer.
pub fn error_line(msg: &str) -> String {
    crate::json::Obj::new().str("error", msg).line()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_json_escapes() {
        assert_eq!(Request::parse("status\r"), Request::Status(None));
        assert_eq!(Request::parse(" watch "), Request::Watch(None));
        assert_eq!(Request::parse("supervise"), Request::Supervise(None, None));
        assert_eq!(
            Request::parse("supervise grace_ms=250"),
            Request::Supervise(None, Some(Duration::from_millis(250)))
        );
        assert!(matches!(
            Request::parse("supervise grace_ms=x"),
            Request::Invalid(_)
        ));
        assert!(matches!(
            Request::parse("supervise grace_ms=1 grace_ms=2"),
            Request::Invalid(_)
        ));
        assert_eq!(Request::parse("released 7"), Request::Released(7));
        assert!(matches!(Request::parse("released 0"), Request::Invalid(_)));
        assert!(matches!(Request::parse("released x"), Request::Invalid(_)));
        assert!(matches!(Request::parse("released"), Request::Invalid(_)));
        assert!(matches!(
            Request::parse("released 99999999999999999999999"),
            Request::Invalid(_)
        ));
        assert_eq!(Request::parse("leave"), Request::Leave);
        assert_eq!(Request::parse("reload"), Request::Reload);
        assert!(matches!(Request::parse("reload now"), Request::Invalid(_)));
        assert_eq!(Request::parse("yield"), Request::Yield(None, None));
        assert_eq!(Request::parse("yield 2"), Request::Yield(None, Some(2)));
        // A number is always an id: 0 and 999 reach the daemon, which knows the list.
        assert_eq!(Request::parse("yield 0"), Request::Yield(None, Some(0)));
        assert_eq!(Request::parse("yield 999"), Request::Yield(None, Some(999)));
        assert_eq!(
            Request::parse("yield Abc"),
            Request::Invalid(
                "yield: 'Abc' is neither a server id (a number) nor a group name".into()
            )
        );
        assert_eq!(
            Request::parse("yield -1"),
            Request::Invalid(
                "yield: '-1' is neither a server id (a number) nor a group name".into()
            )
        );
        assert_eq!(
            Request::parse("yield 99999999999999999999"),
            Request::Invalid("yield: no server 99999999999999999999 in the server list".into())
        );
        assert_eq!(
            Request::parse("yield 1 2"),
            Request::Invalid("usage: yield [GROUP] [ID]".into())
        );
        assert_eq!(Request::parse("drain"), Request::Drain(None));
        assert_eq!(Request::parse(" undrain\r"), Request::Undrain(None));
        assert_eq!(
            Request::parse("drain Extra"),
            Request::Invalid("drain: 'Extra' is not a group name ([a-z][a-z0-9_-]{0,31})".into())
        );
        assert_eq!(
            Request::parse("undrain now please"),
            Request::Invalid("usage: undrain [GROUP]".into())
        );
        // Election groups (SPEC section 15): a letter first is a group, digits an id.
        let g = || Some("orders".to_string());
        assert_eq!(Request::parse("status orders"), Request::Status(g()));
        assert_eq!(Request::parse("watch orders"), Request::Watch(g()));
        assert_eq!(
            Request::parse("supervise orders"),
            Request::Supervise(g(), None)
        );
        assert_eq!(
            Request::parse("supervise orders grace_ms=7"),
            Request::Supervise(g(), Some(Duration::from_millis(7)))
        );
        assert_eq!(Request::parse("elect orders"), Request::Elect(g()));
        assert_eq!(Request::parse("drain orders"), Request::Drain(g()));
        assert_eq!(Request::parse("undrain orders"), Request::Undrain(g()));
        assert_eq!(Request::parse("yield orders"), Request::Yield(g(), None));
        assert_eq!(
            Request::parse("yield orders 3"),
            Request::Yield(g(), Some(3))
        );
        assert_eq!(Request::parse("yield 3"), Request::Yield(None, Some(3)));
        assert!(matches!(
            Request::parse("yield orders x"),
            Request::Invalid(_)
        ));
        assert!(matches!(
            Request::parse("yield 3 orders"),
            Request::Invalid(_)
        ));
        assert!(matches!(Request::parse("status a b"), Request::Invalid(_)));
        assert!(matches!(Request::parse("status 1x"), Request::Invalid(_)));
        let long = format!("status a{}", "b".repeat(32));
        assert!(
            matches!(Request::parse(&long), Request::Invalid(_)),
            "33 characters"
        );
        assert_eq!(
            Request::parse(&format!("status a{}", "b".repeat(31))),
            Request::Status(Some(format!("a{}", "b".repeat(31))))
        );
        assert_eq!(Request::parse("health ok"), Request::Health(None));
        assert_eq!(
            Request::parse("health failing 3 exits in 60s"),
            Request::Health(Some("3 exits in 60s".into()))
        );
        assert_eq!(
            Request::parse("health failing"),
            Request::Health(Some("no reason given".into()))
        );
        assert!(matches!(Request::parse("health"), Request::Invalid(_)));
        assert!(matches!(
            Request::parse("health ok really"),
            Request::Invalid(_)
        ));
        assert!(matches!(Request::parse("health bad"), Request::Invalid(_)));
        let Request::Health(Some(long)) =
            Request::parse(&format!("health failing {}", "x".repeat(900)))
        else {
            panic!("a long reason is truncated, not refused");
        };
        assert_eq!(long.len(), MAX_HEALTH_REASON);
        assert_eq!(Request::parse("bogus"), Request::Unknown("bogus".into()));
        assert_eq!(json_str("a\"b\\c\n"), r#""a\"b\\c\u000a""#);
        assert_eq!(error_line("x"), "{\"error\":\"x\"}\n");
    }
}

//! Election groups in the file (SPEC section 15): the sections, their directives,
//! inheritance from the top level, `prefer` and `balance`.
//!
//! The file is one top-level section (everything before the first `group` line) and
//! one section per `group` line. A section holds only the directives of
//! `SECTION_DIRECTIVES`; the top level's are the defaults every group inherits, one
//! directive at a time.

use super::{
    CHECK_INTERVAL_RANGE, Check, ConfigError, DEFAULT_CHECK_FALL, DEFAULT_CHECK_INTERVAL,
    DEFAULT_CHECK_RISE, DEFAULT_CHECK_TIMEOUT, DEFAULT_GROUP, Group, MAX_CHECK_ARGS, MAX_FALL_RISE,
    MAX_GROUPS, Server, one, parse_duration,
};
use std::time::Duration;

/// What a section (the top level or a group) may hold; everything else is cluster-wide.
pub(super) const SECTION_DIRECTIVES: &[&str] = &[
    "prefer",
    "on-leader",
    "on-follower",
    "check",
    "check-interval",
    "check-timeout",
    "check-fall",
    "check-rise",
];

/// The longest group name: `[a-z][a-z0-9_-]{0,31}`.
const MAX_GROUP_NAME: usize = 32;

/// One section as written: a `None` field was not set in it.
#[derive(Clone, Default)]
pub(super) struct Section {
    /// The group's name (empty for the top level).
    pub name: String,
    /// The line of its `group` directive (0 for the top level).
    pub line: usize,
    /// `prefer`: its line and the ids.
    pub prefer: Option<(usize, Vec<u16>)>,
    /// `on-leader` (argv).
    pub on_leader: Option<Vec<String>>,
    /// `on-follower` (argv).
    pub on_follower: Option<Vec<String>>,
    /// `check`: its line and argv.
    pub check: Option<(usize, Vec<String>)>,
    /// `check-interval` and its line.
    pub check_interval: Option<(usize, Duration)>,
    /// `check-timeout` and its line.
    pub check_timeout: Option<(usize, Duration)>,
    /// `check-fall`.
    pub check_fall: Option<u32>,
    /// `check-rise`.
    pub check_rise: Option<u32>,
}

fn argv(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

impl Section {
    /// True for a `group` section, false for the top level.
    fn is_group(&self) -> bool {
        self.line != 0
    }

    /// Applies one of `SECTION_DIRECTIVES` to this section.
    pub fn parse_line(
        &mut self,
        lineno: usize,
        directive: &str,
        args: &[&str],
    ) -> Result<(), String> {
        match directive {
            "prefer" => self.prefer = Some((lineno, self.parse_prefer(args)?)),
            "on-leader" | "on-follower" => {
                if args.is_empty() {
                    return Err(format!("'{directive}' needs a command"));
                }
                if directive == "on-leader" {
                    self.on_leader = Some(argv(args));
                } else {
                    self.on_follower = Some(argv(args));
                }
            }
            "check" => {
                if args.is_empty() {
                    return Err("'check' needs a command".into());
                }
                if args.len() > MAX_CHECK_ARGS {
                    return Err(format!(
                        "'check' has {} words; at most {MAX_CHECK_ARGS}",
                        args.len()
                    ));
                }
                if let Some((first, _)) = &self.check {
                    // One check per section: a second line would silently replace the
                    // first, and a failing check hidden that way is a leader that never
                    // hands over.
                    return Err(format!(
                        "'check' is given twice (first on line {first}); run both checks from one script"
                    ));
                }
                self.check = Some((lineno, argv(args)));
            }
            "check-interval" => {
                let d = parse_duration(one(args, "duration")?)
                    .map_err(|e| format!("check-interval: {e}"))?;
                let (lo, hi) = CHECK_INTERVAL_RANGE;
                if d < lo || d > hi {
                    return Err(format!(
                        "check-interval must be between 10ms and 1h, not {d:?}"
                    ));
                }
                self.check_interval = Some((lineno, d));
            }
            "check-timeout" => {
                let d = parse_duration(one(args, "duration")?)
                    .map_err(|e| format!("check-timeout: {e}"))?;
                if d < Duration::from_millis(1) {
                    return Err("check-timeout must be at least 1ms".into());
                }
                self.check_timeout = Some((lineno, d));
            }
            "check-fall" | "check-rise" => {
                let v = one(args, "count")?;
                let n = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_FALL_RISE).contains(n))
                    .ok_or_else(|| format!("{directive} '{v}' is not in 1..={MAX_FALL_RISE}"))?;
                if directive == "check-fall" {
                    self.check_fall = Some(n);
                } else {
                    self.check_rise = Some(n);
                }
            }
            // The caller passes only SECTION_DIRECTIVES; no panic on input all the same.
            other => return Err(format!("'{other}' is not allowed here")),
        }
        Ok(())
    }

    /// The ids of a `prefer` line, checked against each other (the server list is
    /// checked once it is whole: `order`).
    fn parse_prefer(&self, args: &[&str]) -> Result<Vec<u16>, String> {
        if !self.is_group() {
            return Err("'prefer' belongs to a group: put it after a 'group' line".into());
        }
        if let Some((first, _)) = &self.prefer {
            return Err(format!(
                "'prefer' is given twice in group '{}' (first on line {first})",
                self.name
            ));
        }
        if args.is_empty() {
            return Err("'prefer' needs at least one server id".into());
        }
        let mut ids: Vec<u16> = Vec::with_capacity(args.len());
        for a in args {
            let id = a
                .parse()
                .ok()
                .filter(|i| (1..=255).contains(i))
                .ok_or_else(|| format!("prefer: '{a}' is not a server id (1..=255)"))?;
            if ids.contains(&id) {
                return Err(format!("prefer: server {id} is listed twice"));
            }
            ids.push(id);
        }
        Ok(ids)
    }

    /// This group's section with every directive it does not set taken from `top`.
    pub fn inherit(&self, top: &Section) -> Section {
        Section {
            name: self.name.clone(),
            line: self.line,
            prefer: self.prefer.clone(),
            on_leader: self.on_leader.clone().or_else(|| top.on_leader.clone()),
            on_follower: self.on_follower.clone().or_else(|| top.on_follower.clone()),
            check: self.check.clone().or_else(|| top.check.clone()),
            check_interval: self.check_interval.or(top.check_interval),
            check_timeout: self.check_timeout.or(top.check_timeout),
            check_fall: self.check_fall.or(top.check_fall),
            check_rise: self.check_rise.or(top.check_rise),
        }
    }

    /// The check settings: the command, and the interval, timeout, fall and rise with
    /// their defaults. The timeout defaults to 500ms or the interval, whichever is
    /// shorter, and may not exceed the interval: checks run one at a time, so a longer
    /// one would delay the next and stretch every verdict by as much.
    pub fn check(
        &self,
        at: &impl Fn(Option<usize>, String) -> ConfigError,
    ) -> Result<Option<Check>, ConfigError> {
        let Some((line, argv)) = self.check.clone() else {
            return Ok(None);
        };
        let interval = self
            .check_interval
            .map_or(DEFAULT_CHECK_INTERVAL, |(_, d)| d);
        let timeout = match self.check_timeout {
            Some((l, t)) if t > interval => {
                // The line that broke the rule: the timeout's, unless the timeout is
                // inherited and this group's own interval made it too long.
                let own = |l: usize| l > self.line;
                let l = match self.check_interval {
                    Some((il, _)) if !own(l) && own(il) => il,
                    _ => l,
                };
                let in_group = if self.is_group() {
                    format!(" in group '{}'", self.name)
                } else {
                    String::new()
                };
                return Err(at(
                    Some(l),
                    format!(
                        "check-timeout {} ms must not exceed check-interval {} ms{in_group} (checks run one at a time)",
                        t.as_millis(),
                        interval.as_millis()
                    ),
                ));
            }
            Some((_, t)) => t,
            None => DEFAULT_CHECK_TIMEOUT.min(interval),
        };
        Ok(Some(Check {
            argv,
            line,
            interval,
            timeout,
            fall: self.check_fall.unwrap_or(DEFAULT_CHECK_FALL),
            rise: self.check_rise.unwrap_or(DEFAULT_CHECK_RISE),
        }))
    }

    /// The line of a `check-interval` or `check-timeout` set in this section when no
    /// check will use it.
    pub fn unused_check_settings(&self, has_check: bool) -> Option<usize> {
        if has_check {
            return None;
        }
        self.check_interval.or(self.check_timeout).map(|(l, _)| l)
    }
}

/// Starts the section of a `group NAME` line.
pub(super) fn start_group(
    groups: &mut Vec<Section>,
    lineno: usize,
    args: &[&str],
) -> Result<(), String> {
    let name = one(args, "group name")?;
    valid_name(name)?;
    if let Some(first) = groups.iter().find(|g| g.name == name) {
        return Err(format!(
            "group '{name}' is given twice (first on line {})",
            first.line
        ));
    }
    if groups.len() == MAX_GROUPS {
        return Err(format!("more than {MAX_GROUPS} groups"));
    }
    groups.push(Section {
        name: name.to_string(),
        line: lineno,
        ..Section::default()
    });
    Ok(())
}

/// Ok when `name` is `[a-z][a-z0-9_-]{0,31}`: a letter first, so never read as an id
/// (SPEC section 15: `yield GROUP ID`).
fn valid_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-".contains(c));
    if first_ok && rest_ok && name.len() <= MAX_GROUP_NAME {
        return Ok(());
    }
    Err(format!(
        "group name '{name}' must be a lowercase letter followed by at most {} of a-z, 0-9, '_' and '-'",
        MAX_GROUP_NAME - 1
    ))
}

/// The groups in force: `sections` (the `group` lines in file order) with what they
/// inherit from `top` and their preference orders, or the one `default` group.
pub(super) fn groups(
    top: &Section,
    sections: &[Section],
    servers: &[Server],
    balance: bool,
    at: &impl Fn(Option<usize>, String) -> ConfigError,
) -> Result<Vec<Group>, ConfigError> {
    if sections.is_empty() {
        // Everything as before groups existed (SPEC section 15): the servers' own
        // priorities decide, whatever `balance` says.
        let mut g = group(top, at)?;
        g.name = DEFAULT_GROUP.to_string();
        return Ok(vec![g]);
    }
    let leaders: Vec<u16> = servers
        .iter()
        .filter(|s| !s.witness)
        .map(|s| s.id)
        .collect();
    let mut rank = 0;
    let mut out = Vec::with_capacity(sections.len());
    for s in sections {
        let mut g = group(&s.inherit(top), at)?;
        if let Some((line, ids)) = &s.prefer {
            check_prefer(ids, servers).map_err(|m| at(Some(*line), m))?;
            g.order = ids.clone();
        } else if balance && !leaders.is_empty() {
            g.order = balanced_order(&leaders, rank);
            rank += 1;
        }
        out.push(g);
    }
    Ok(out)
}

/// `balance on`: the preference order of the k-th group without `prefer`. The list
/// rotated by k (SPEC section 15), so each server comes first in floor(G/S) or
/// ceil(G/S) of the groups; beyond the first S groups the rest of the order is rotated
/// too, by k/S, so the groups a server leads have different second choices and its
/// failure spreads them over the others instead of piling them on one (with plain
/// rotation, groups k and k+S have the same order). The first S groups keep the plain
/// rotation.
pub fn balanced_order(leaders: &[u16], k: usize) -> Vec<u16> {
    let s = leaders.len();
    let mut order = leaders.to_vec();
    if s == 0 {
        return order;
    }
    order.rotate_left(k % s);
    if s > 2 {
        order[1..].rotate_left((k / s) % (s - 1));
    }
    order
}

/// A group from its (inherited) section; its order is set by the caller.
fn group(
    s: &Section,
    at: &impl Fn(Option<usize>, String) -> ConfigError,
) -> Result<Group, ConfigError> {
    Ok(Group {
        name: s.name.clone(),
        line: s.line,
        prefer: s.prefer.as_ref().map(|(_, ids)| ids.clone()),
        order: Vec::new(),
        on_leader: s.on_leader.clone(),
        on_follower: s.on_follower.clone(),
        check: s.check(at)?,
    })
}

/// Every id of a `prefer` line is a server that may lead.
fn check_prefer(ids: &[u16], servers: &[Server]) -> Result<(), String> {
    for id in ids {
        match servers.iter().find(|s| s.id == *id) {
            None => return Err(format!("prefer: server {id} is not in the server list")),
            Some(s) if s.witness => {
                return Err(format!(
                    "prefer: server {id} is a witness: a witness never leads"
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

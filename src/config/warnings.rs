//! What does not stop the daemon but an operator should know (`--check-config` prints
//! it, every start logs it): a check command that cannot be run, check settings no
//! check uses, a `balance` or `preempt-delay` that can never act, a `balance` that
//! cannot restore the spread (SPEC sections 13-15).

use super::*;

impl Config {
    /// Things that do not stop the daemon but that an operator should know
    /// (`--check-config` prints them): a check command that cannot be run, check
    /// settings no check uses, a `balance` or `preempt-delay` that can never act, a
    /// `balance` without `preempt-delay`.
    pub fn warnings(&self) -> Vec<String> {
        let file = self.path.display();
        let mut out = self.check_warnings();
        if let Some(l) = self.unused_check_settings {
            // Most likely the check line was removed by mistake, and the operator
            // believes this server is checked.
            out.push(format!(
                "{file}:{l}: check settings without a 'check' line: this server is not health-checked"
            ));
        }
        for &(g, l) in &self.group_unused_check_settings {
            out.push(format!(
                "{file}:{l}: check settings without a 'check' line in group '{}': this server is not health-checked in it",
                self.groups[g].name
            ));
        }
        if let (true, Some(l)) = (self.balance, self.balance_line) {
            if !self.has_groups() {
                out.push(format!(
                    "{file}:{l}: balance on has no effect without 'group' lines"
                ));
            } else if self.groups.iter().all(|g| g.prefer.is_some()) {
                out.push(format!(
                    "{file}:{l}: balance on has no effect: every group has a 'prefer' line"
                ));
            } else if self.preempt_delay.is_none() {
                // SPEC section 15: balance spreads the first elections, but a group
                // that moved during a failure stays where it is (sticky) unless the
                // leader may hand it back.
                out.push(format!(
                    "{file}:{l}: balance on without preempt-delay: balance cannot restore the spread after a failure (a group that moved stays on its new leader); set preempt-delay"
                ));
            }
        }
        if self.preempt_delay.is_some() && self.groups.iter().all(|g| self.flat(g)) {
            out.push(if self.has_groups() {
                format!("{file}: preempt-delay has no effect: in every group, every server that may lead has the same priority")
            } else {
                format!("{file}: preempt-delay has no effect: every server that may lead has the same priority")
            });
        }
        out
    }

    /// True when every server that may lead has the same priority in group `g`:
    /// `preempt-delay` never acts there (SPEC section 14).
    fn flat(&self, g: &Group) -> bool {
        let mut prios = self
            .servers
            .iter()
            .filter(|s| !s.witness)
            .map(|s| g.priority_of(s.id, s.priority));
        let first = prios.next();
        prios.all(|p| Some(p) == first)
    }

    /// A check command that cannot be run, once per `check` line, naming the groups
    /// that run it when the file has groups; a top-level check every group overrides.
    fn check_warnings(&self) -> Vec<String> {
        let file = self.path.display();
        let mut out = Vec::new();
        let runs = |line: usize| {
            self.groups
                .iter()
                .filter(move |g| g.check.as_ref().is_some_and(|c| c.line == line))
        };
        let mut seen: Vec<usize> = Vec::new();
        for c in self.groups.iter().filter_map(|g| g.check.as_ref()) {
            if seen.contains(&c.line) {
                continue;
            }
            seen.push(c.line);
            let Err(why) = executable(&c.argv[0]) else {
                continue;
            };
            let whom = if !self.has_groups() {
                "(it never leads)".to_string()
            } else {
                let names: Vec<String> = runs(c.line).map(|g| format!("'{}'", g.name)).collect();
                match names.len() {
                    1 => format!("in group {} (it never leads it)", names[0]),
                    _ => format!("in groups {} (it never leads them)", names.join(", ")),
                }
            };
            out.push(format!(
                "{file}:{}: check command '{}' {why}: checks will fail and this server will stay unhealthy {whom} until it can run",
                c.line, c.argv[0]
            ));
        }
        if let Some(c) = self.check.as_ref().filter(|c| !seen.contains(&c.line)) {
            out.push(format!(
                "{file}:{}: every group sets its own 'check': this one is never run",
                c.line
            ));
        }
        out
    }
}

/// Ok when `cmd` names an executable file (searched in PATH when it has no '/');
/// otherwise why not.
pub fn executable(cmd: &str) -> Result<(), String> {
    let candidates: Vec<PathBuf> = if cmd.contains('/') {
        vec![PathBuf::from(cmd)]
    } else {
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).map(|d| d.join(cmd)).collect())
            .unwrap_or_default()
    };
    let mut why = if cmd.contains('/') {
        "does not exist".to_string()
    } else {
        "is not found in PATH".to_string()
    };
    for p in candidates {
        match std::fs::metadata(&p) {
            Ok(m) if m.is_dir() => why = "is a directory".into(),
            Ok(_) => {
                let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else {
                    continue;
                };
                // SAFETY: access(2) on a NUL-terminated path we own.
                if unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 {
                    return Ok(());
                }
                why = "is not executable".into();
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => why = format!("cannot be read: {e}"),
        }
    }
    Err(why)
}

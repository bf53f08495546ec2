//! The adversarial reviews' harness (tests/adv22.rs, adv23.rs, adv24.rs): a cluster of
//! three agreed on a leader, `electctl run` on both followers, and the leader's `run`
//! started under strace, whose fault injection (`-e inject=SYSCALL:delay_enter=US:
//! when=N`, counted per traced process) holds a chosen process at a chosen system call.
//! Included with `#[path = "common/straced.rs"] mod straced;` beside `mod common;`.

#![allow(dead_code)]

use crate::common::{self, Cluster, Mode, Opts, SERIAL, slacked, spans};
use std::process::{Child, Command, Stdio};
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

pub const HBT_MS: u64 = 200;
pub const RTT_MS: u64 = 40;
pub const GRACE: &str = "250ms";
pub const LINGER_MS: &str = "50";

pub fn strace_available() -> bool {
    Command::new("strace")
        .args(["-qq", "-o", "/dev/null", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

/// True if `pid` has a SIGKILL pending (to it or its thread group).
pub fn sigkill_pending(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().any(|l| {
        (l.starts_with("SigPnd:") || l.starts_with("ShdPnd:"))
            && l.split_whitespace()
                .nth(1)
                .and_then(|m| u64::from_str_radix(m, 16).ok())
                .is_some_and(|m| m & (1 << (libc::SIGKILL - 1)) != 0)
    })
}

/// Every process below `pid`, deepest first.
pub fn below(pid: u32, out: &mut Vec<u32>) {
    for (p, _) in common::children(pid) {
        below(p, out);
        out.push(p);
    }
}

/// Kills `child` and every process below it (strace, run, the command, the enforcer).
pub fn kill_tree(child: &mut Child) {
    let mut pids = Vec::new();
    // Only while it is still ours: once reaped, its pid may name another process.
    if matches!(child.try_wait(), Ok(None)) {
        below(child.id(), &mut pids);
    }
    for p in pids {
        // SAFETY: kill(2) on a process this test started (directly or below).
        unsafe { libc::kill(p as i32, libc::SIGKILL) };
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// See the module.
pub struct Setup {
    _serial: MutexGuard<'static, ()>,
    pub c: Cluster,
    /// The processors' log (`spans`).
    pub log: String,
    pub leader: u16,
    pub term: u64,
    pub followers: Vec<Child>,
    /// strace, with the leader's `run` below it.
    pub traced: Child,
}

impl Setup {
    /// Every `run` gets `--grace GRACE` and `extra`; the leader's is started under
    /// `strace -qq -o /dev/null STRACE_ARGS`. None when strace is missing (the test is
    /// then skipped, saying so).
    pub fn start(strace_args: &[String], extra: &[&str]) -> Option<Setup> {
        if !strace_available() {
            eprintln!("strace not available: skipped");
            return None;
        }
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let mut o = Opts::new(Mode::Unicast, 3);
        o.hbt_ms = HBT_MS;
        o.rtt_ms = RTT_MS;
        let c = Cluster::build(&o);
        let log = c.dir.join("cmd.log").to_str().unwrap().to_string();
        let bound = o.failover_bound() + Duration::from_secs(1);
        let (leader, term) = c.agreement(bound);
        let env = [(common::CMD_LINGER_VAR, LINGER_MS)];
        let mut args = vec!["--grace", GRACE];
        args.extend_from_slice(extra);
        let followers = (1..=3)
            .filter(|&i| i != leader)
            .map(|id| {
                common::supervise_cmd(&c, id, &log, &args, &env)
                    .stdin(Stdio::null())
                    .stderr(Stdio::from(common::run_log(&c, id)))
                    .spawn()
                    .unwrap()
            })
            .collect();
        let plain = common::supervise_cmd(&c, leader, &log, &args, &env);
        let mut strace = Command::new("strace");
        strace
            .args(["-qq", "-o", "/dev/null"])
            .args(strace_args)
            .arg(plain.get_program())
            .args(plain.get_args());
        for (k, v) in plain.get_envs() {
            if let Some(v) = v {
                strace.env(k, v);
            }
        }
        let traced = strace
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(common::run_log(&c, leader)))
            .spawn()
            .unwrap();
        Some(Setup {
            _serial: serial,
            c,
            log,
            leader,
            term,
            followers,
            traced,
        })
    }

    /// The leader's `run` log.
    pub fn run_log(&self) -> String {
        std::fs::read_to_string(self.c.dir.join(format!("run-{}.log", self.leader)))
            .unwrap_or_default()
    }

    /// The leader's `run` (strace's child), once it exists.
    pub fn run_pid(&self) -> Option<u32> {
        common::children(self.traced.id()).first().map(|p| p.0)
    }

    /// Waits (bounded by `within`) until `f` on the children of the leader's `run`
    /// gives Some; panics naming `what` otherwise.
    pub fn wait_children<T>(
        &self,
        within: Duration,
        what: &str,
        f: impl Fn(u32, &[(u32, String)]) -> Option<T>,
    ) -> T {
        let t0 = Instant::now();
        loop {
            if let Some(run) = self.run_pid()
                && let Some(v) = f(run, &common::children(run))
            {
                return v;
            }
            assert!(
                t0.elapsed() < slacked(within),
                "{what} (leader {} term {})\n{}\n{}",
                self.leader,
                self.term,
                self.run_log(),
                self.c.logs()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    pub fn yield_leader(&self) {
        let (code, out, err) = common::electctl_at(&self.c.sock(self.leader), &["yield"]);
        eprintln!("yield: {code:?} {out} {err}");
    }

    /// Stops everything this test started (`Drop`); the processors' spans.
    pub fn stop(self) -> Vec<common::Span> {
        spans(&self.log)
    }

    /// As [`Setup::stop`], printing the spans from `fault_at`; with `handoff`, after
    /// checking that the next leader's processor started.
    pub fn finish(self, fault_at: u64, handoff: bool) -> Vec<common::Span> {
        let leader = self.leader;
        let logs = self.c.logs();
        let all = self.stop();
        for s in &all {
            eprintln!(
                "processor pid {} on {} term {}: {:.1} ms to {:.1} ms after the fault",
                s.pid,
                s.host,
                s.term,
                (s.start as f64 - fault_at as f64) / 1e6,
                (s.end as f64 - fault_at as f64) / 1e6
            );
        }
        if handoff {
            assert!(
                all.iter().any(|s| s.host != leader),
                "the next leader's processor never started: the test proves nothing\n{logs}"
            );
        }
        all
    }
}

/// strace with the leader's `run` below it, and the followers' `run`s, end with the
/// test, also when it panics (a failed assertion left them running before).
impl Drop for Setup {
    fn drop(&mut self) {
        kill_tree(&mut self.traced);
        for s in &mut self.followers {
            kill_tree(s);
        }
    }
}

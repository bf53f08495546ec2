//! `on-leader` and `on-follower` hooks (SPEC section 12).
//!
//! Hooks run one at a time, in the order of the transitions, each in its own process
//! group, in a clean environment ([`clean_env`]) with ELECTD_ROLE, ELECTD_LEADER,
//! ELECTD_TERM, ELECTD_ID, ELECTD_GROUP and ELECTD_HEALTH set. The event loop
//! never waits for one: it starts a hook, is told of its exit by SIGCHLD (through the
//! daemon's signalfd), and kills the group of a hook that outlives `hook-timeout`.

use crate::node::Role;
use log::{error, info, warn};
use std::collections::VecDeque;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Transitions waiting for their hook, at most; the oldest is dropped beyond it.
pub const MAX_QUEUED: usize = 32;

/// The PATH of hooks and checks: the daemon's own may be anything (a shell's, a test's).
pub const CHILD_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// LANG when the daemon has none.
pub const DEFAULT_LANG: &str = "C.UTF-8";

/// Gives a hook or check a clean environment: PATH is [`CHILD_PATH`], LANG and TZ come
/// from the daemon's environment (LANG defaults to [`DEFAULT_LANG`]), and the caller
/// adds the ELECTD_* variables. Nothing else is inherited: the daemon's systemd
/// variables speak for the daemon alone (a child with NOTIFY_SOCKET or WATCHDOG_PID
/// could report READY, STOPPING or a watchdog ping in its name, and the journal logs
/// each refused one; INVOCATION_ID and JOURNAL_STREAM describe the daemon's own
/// invocation and stream; LISTEN_* would hand it sockets it does not own), and neither
/// a test switch such as ELECTD_TEST_SABOTAGE nor whatever the shell that started the
/// daemon held belongs in a hook.
pub fn clean_env(cmd: &mut Command) -> &mut Command {
    cmd.env_clear().env("PATH", CHILD_PATH).env(
        "LANG",
        std::env::var_os("LANG").unwrap_or_else(|| DEFAULT_LANG.into()),
    );
    if let Some(tz) = std::env::var_os("TZ") {
        cmd.env("TZ", tz);
    }
    cmd
}

#[derive(Clone, Debug)]
struct Job {
    name: &'static str,
    argv: Vec<String>,
    role: Role,
    leader: Option<u16>,
    term: u64,
    health: &'static str,
}

#[derive(Debug)]
struct Running {
    job: Job,
    child: Child,
    started: Instant,
    /// `hook-timeout` when it started: a reload changes the next hook's, not this one's.
    /// A stop's bound may bring it forward (`kill_by`).
    timeout: Duration,
    /// Its `hook-timeout`, as it started, for the log when a stop's bound cut it short.
    configured: Duration,
    killed: bool,
}

/// The hook runner.
#[derive(Debug)]
pub struct Hooks {
    id: u16,
    /// The election group whose transitions these hooks follow (ELECTD_GROUP).
    group: String,
    /// Put before every log line ("group orders: "; empty for a single group).
    log_tag: String,
    on_leader: Option<Vec<String>>,
    on_follower: Option<Vec<String>>,
    timeout: Duration,
    queue: VecDeque<Job>,
    /// At a stop, the queue held back from `poll` (which starts the next hook as soon as
    /// it reaps one): the stop starts them, only before its bound (`kill_by`).
    held: VecDeque<Job>,
    /// A stop has begun (`kill_by` was called): hooks of later transitions wait in
    /// `held` too, started only by the stop's turn before its bound.
    stopping: bool,
    running: Option<Running>,
    /// Hooks that exited non-zero, were killed or could not start.
    pub failures: u64,
    /// Hooks run.
    pub runs: u64,
}

impl Hooks {
    /// A runner for server `id`.
    pub fn new(
        id: u16,
        on_leader: Option<Vec<String>>,
        on_follower: Option<Vec<String>>,
        timeout: Duration,
    ) -> Hooks {
        Hooks {
            id,
            group: "default".into(),
            log_tag: String::new(),
            on_leader,
            on_follower,
            timeout,
            queue: VecDeque::new(),
            held: VecDeque::new(),
            stopping: false,
            running: None,
            failures: 0,
            runs: 0,
        }
    }

    /// Names the election group these hooks serve (ELECTD_GROUP; `default` until set).
    pub fn set_group(&mut self, group: &str) {
        self.group = group.to_string();
    }

    /// Sets what every log line of these hooks starts with ("group orders: ").
    pub fn set_log_tag(&mut self, tag: &str) {
        self.log_tag = tag.to_string();
    }

    /// Replaces the commands and timeout (SIGHUP); a running hook finishes undisturbed,
    /// under the timeout it started with.
    pub fn reconfigure(
        &mut self,
        on_leader: Option<Vec<String>>,
        on_follower: Option<Vec<String>>,
        timeout: Duration,
    ) {
        self.on_leader = on_leader;
        self.on_follower = on_follower;
        self.timeout = timeout;
    }

    /// Queues the hook for a change of role, and starts it if none runs. `health` is
    /// this server's health at the transition (`ok`, `failing`, `unknown`).
    pub fn transition(&mut self, role: Role, leader: Option<u16>, term: u64, health: &'static str) {
        let (name, argv) = match role {
            Role::Leader => ("on-leader", self.on_leader.clone()),
            Role::Follower => ("on-follower", self.on_follower.clone()),
        };
        let Some(argv) = argv else { return };
        // At a stop the hooks wait in `held` (see below): the same limit applies there.
        let waiting = if self.stopping {
            &mut self.held
        } else {
            &mut self.queue
        };
        if waiting.len() >= MAX_QUEUED {
            if let Some(old) = waiting.pop_front() {
                warn!(
                    "{}hook queue full: dropped the {} hook of term {}",
                    self.log_tag, old.name, old.term
                );
            }
        }
        let job = Job {
            name,
            argv,
            role,
            leader,
            term,
            health,
        };
        if self.stopping {
            // At a stop only its own turn starts a hook, before its bound (`kill_by`):
            // one started here past the bound would be killed at once.
            self.held.push_back(job);
            return;
        }
        self.queue.push_back(job);
        self.start_next();
    }

    fn start_next(&mut self) {
        while self.running.is_none() {
            let Some(job) = self.queue.pop_front() else {
                return;
            };
            let mut cmd = Command::new(&job.argv[0]);
            clean_env(&mut cmd)
                .args(&job.argv[1..])
                .env("ELECTD_ROLE", job.role.name())
                .env(
                    "ELECTD_LEADER",
                    job.leader.map_or(String::new(), |l| l.to_string()),
                )
                .env("ELECTD_TERM", job.term.to_string())
                .env("ELECTD_ID", self.id.to_string())
                .env("ELECTD_GROUP", &self.group)
                .env("ELECTD_HEALTH", job.health)
                .stdin(Stdio::null())
                .process_group(0);
            self.runs += 1;
            match cmd.spawn() {
                Ok(child) => {
                    info!(
                        "{}hook {} started (pid {}, term {})",
                        self.log_tag,
                        job.name,
                        child.id(),
                        job.term
                    );
                    self.running = Some(Running {
                        job,
                        child,
                        started: Instant::now(),
                        timeout: self.timeout,
                        configured: self.timeout,
                        killed: false,
                    });
                }
                Err(e) => {
                    self.failures += 1;
                    error!(
                        "{}hook {} ({}) could not start: {e}",
                        self.log_tag, job.name, job.argv[0]
                    );
                }
            }
        }
    }

    /// Reaps a finished hook (call on SIGCHLD and on the deadline); kills one past its
    /// timeout; starts the next.
    pub fn poll(&mut self, now: Instant) {
        if let Some(r) = self.running.as_mut() {
            if !r.killed && now.duration_since(r.started) >= r.timeout {
                r.killed = true;
                // SAFETY: kill(2) on the process group this hook leads, which we started
                // and have not reaped, so its id cannot have been reused.
                unsafe { libc::kill(-(r.child.id() as i32), libc::SIGKILL) };
            }
            match r.child.try_wait() {
                Ok(Some(status)) => {
                    let took = now.duration_since(r.started);
                    if r.killed {
                        self.failures += 1;
                        let pid = r.child.id();
                        if r.timeout < r.configured {
                            error!(
                                "{}hook {} (pid {pid}) killed after {took:?}: it outlived the stop's bound (hook-timeout {:?}, cut to {:?})",
                                self.log_tag, r.job.name, r.configured, r.timeout
                            );
                        } else {
                            error!(
                                "{}hook {} (pid {pid}) killed after {took:?}: it outlived hook-timeout {:?}",
                                self.log_tag, r.job.name, r.timeout
                            );
                        }
                    } else if status.success() {
                        info!("{}hook {} finished in {took:?}", self.log_tag, r.job.name);
                    } else {
                        self.failures += 1;
                        match (status.code(), status.signal()) {
                            (Some(c), _) => {
                                error!(
                                    "{}hook {} failed with exit status {c}",
                                    self.log_tag, r.job.name
                                )
                            }
                            (None, Some(s)) => {
                                error!("{}hook {} died of signal {s}", self.log_tag, r.job.name)
                            }
                            _ => error!("{}hook {} failed: {status}", self.log_tag, r.job.name),
                        }
                    }
                    self.running = None;
                }
                Ok(None) => {}
                Err(e) => {
                    error!("{}hook {}: wait failed: {e}", self.log_tag, r.job.name);
                    self.running = None;
                }
            }
        }
        self.start_next();
    }

    /// When the running hook's timeout expires, if one runs.
    pub fn deadline(&self) -> Option<Instant> {
        self.running
            .as_ref()
            .filter(|r| !r.killed)
            .map(|r| r.started + r.timeout)
    }
}

/// A hook as a stop names it in the log: its name and its pid.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct HookRun {
    /// `on-leader` or `on-follower`.
    pub name: &'static str,
    /// Its process, which leads its process group.
    pub pid: u32,
}

/// What a stop waits for and, past its bound, gives up on (README "Signals"). Apart
/// from `poll`, `deadline` and `start_next`, which a daemon at rest runs and the
/// profile-guided build has laid out from a profile: the stop changes only the data
/// they read, and drops nothing here (a drop here would move what they inline).
impl Hooks {
    /// True while a hook runs or waits to run.
    pub fn busy(&self) -> bool {
        self.running.is_some() || !self.queue.is_empty() || !self.held.is_empty()
    }

    /// The running hook, if one runs.
    pub fn running(&self) -> Option<HookRun> {
        self.running.as_ref().map(|r| HookRun {
            name: r.job.name,
            pid: r.child.id(),
        })
    }

    /// The names of the hooks waiting behind the running one, oldest first.
    pub fn queued(&self) -> Vec<&'static str> {
        self.held
            .iter()
            .chain(&self.queue)
            .map(|j| j.name)
            .collect()
    }

    /// A stop's turn before its bound `by` (`now` is earlier): starts the next hook if
    /// none runs, and brings the running hook's kill forward to `by` if its timeout ends
    /// later (`deadline` then wakes the loop by `by`). Call at every turn of the stopping
    /// loop until the bound: each hook started keeps the timeout of its start, brought
    /// forward here. The queue is held back from `poll`, which starts the next hook as
    /// soon as it reaps one: reaped at or past the bound (where `poll` kills it), the
    /// next would start only to be killed at once. So only this starts one, and only
    /// before the bound; past it they stay queued and never start (`kill_now`).
    pub fn kill_by(&mut self, by: Instant, now: Instant) {
        self.stopping = true;
        self.held.append(&mut self.queue);
        while self.running.is_none() && now < by {
            let Some(job) = self.held.pop_front() else {
                break;
            };
            self.queue.push_back(job);
            self.start_next();
        }
        if let Some(r) = self.running.as_mut() {
            r.timeout = r.timeout.min(by.saturating_duration_since(r.started));
        }
    }

    /// Kills the running hook's process group now, without waiting for it (a stop past
    /// its bound: the daemon exits next, and whoever inherits the hook reaps it).
    /// Returns the hook, if one ran; the queued ones stay queued and never start.
    pub fn kill_now(&mut self) -> Option<HookRun> {
        let r = self.running.as_mut()?;
        if !r.killed {
            r.killed = true;
            self.failures += 1;
            // SAFETY: kill(2) on the process group this hook leads, which we started
            // and have not reaped, so its id cannot have been reused.
            unsafe { libc::kill(-(r.child.id() as i32), libc::SIGKILL) };
        }
        self.running()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Polls until the running hook has been reaped, at most `bound`; then kills one
    /// still running (ours, not reaped: its process group cannot have been reused) so
    /// that a failed test leaves no process behind. True when it had been reaped.
    fn reap(h: &mut Hooks, bound: Duration) -> bool {
        let end = Instant::now() + bound;
        while h.running.is_some() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
            h.poll(Instant::now());
        }
        let Some(r) = h.running.as_mut() else {
            return true;
        };
        // SAFETY: kill(2) on the process group of a child we started and have not reaped.
        unsafe { libc::kill(-(r.child.id() as i32), libc::SIGKILL) };
        let _ = r.child.wait();
        h.running = None;
        false
    }

    fn sleeper(secs: &str, timeout: Duration) -> Hooks {
        let mut h = Hooks::new(1, Some(vec!["sleep".into(), secs.into()]), None, timeout);
        h.transition(Role::Leader, Some(1), 7, "ok");
        assert!(h.running.is_some(), "the hook did not start");
        h
    }

    /// A reload that shortens `hook-timeout` leaves the hook already running alone: it
    /// keeps the timeout it started with, as the core's running timers keep theirs.
    /// (It used to be killed at the next poll once past the new timeout, and the log
    /// line named the new timeout.)
    #[test]
    fn a_reload_does_not_shorten_the_running_hooks_timeout() {
        let mut h = sleeper("0.3", Duration::from_secs(30));
        let started = h.running.as_ref().map(|r| r.started).unwrap();
        h.reconfigure(Some(vec!["true".into()]), None, Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(20));
        h.poll(Instant::now());
        assert_eq!(h.deadline(), Some(started + Duration::from_secs(30)));
        assert!(
            !h.running.as_ref().unwrap().killed,
            "killed by the new timeout"
        );
        assert!(
            reap(&mut h, Duration::from_secs(10)),
            "the hook did not finish"
        );
        assert_eq!(
            (h.runs, h.failures),
            (1, 0),
            "the hook did not finish undisturbed"
        );
    }

    /// And one that lengthens it does not save a hook already running: the next one
    /// gets the new timeout.
    #[test]
    fn a_reload_does_not_lengthen_the_running_hooks_timeout() {
        let mut h = sleeper("30", Duration::from_millis(100));
        h.reconfigure(
            Some(vec!["sleep".into(), "30".into()]),
            None,
            Duration::from_secs(60),
        );
        assert!(
            reap(&mut h, Duration::from_secs(10)),
            "the hook outlived the timeout it started with"
        );
        assert_eq!(
            (h.runs, h.failures),
            (1, 1),
            "the hook was not killed at its timeout"
        );
        h.transition(Role::Leader, Some(1), 8, "ok");
        let started = h.running.as_ref().map(|r| r.started).unwrap();
        assert_eq!(h.deadline(), Some(started + Duration::from_secs(60)));
        reap(&mut h, Duration::ZERO);
    }

    /// At a stop's bound the queue never starts (README "Signals", daemon/stop.rs): a
    /// running hook reaped past the bound (killed there by `poll`, or ended on its own)
    /// leaves the next one queued, for the stop to name. `poll` used to start it as it
    /// reaped the last one, and the stop then killed it at once, logged as outliving
    /// hook-timeout: the race the loop lost whenever the killed hook died before
    /// `poll`'s wait (2 runs in 6 of the operations test on one CPU).
    #[test]
    fn a_hook_reaped_past_a_stops_bound_starts_none_of_the_queue() {
        let t = Some(vec!["true".into()]);
        let mut h = Hooks::new(1, t.clone(), t, Duration::from_secs(60));
        h.transition(Role::Leader, Some(1), 7, "ok");
        h.transition(Role::Follower, None, 7, "ok");
        let pid = h.running().map(|r| r.pid).expect("on-leader started");
        assert_eq!(h.queued(), ["on-follower"]);
        // The stop's bound, set while the hook runs, then passed: it has exited (a
        // zombie, not yet reaped) when the loop's next turn comes.
        let bound = Instant::now() + Duration::from_millis(20);
        h.kill_by(bound, Instant::now());
        let end = Instant::now() + Duration::from_secs(10);
        while !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        }) {
            assert!(Instant::now() < end, "the hook did not exit");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(bound.saturating_duration_since(Instant::now()));
        h.poll(Instant::now());
        let started = h.running();
        reap(&mut h, Duration::ZERO);
        assert_eq!(started, None, "a queued hook started past the stop's bound");
        assert!(h.busy(), "the queued hook still waits");
        assert_eq!(h.queued(), ["on-follower"]);
        assert_eq!(h.runs, 1);
        // A transition past the bound (a group's role changes while the stop waits)
        // starts nothing either: it waits with the rest.
        h.transition(Role::Leader, Some(1), 8, "ok");
        assert_eq!(
            h.running(),
            None,
            "a transition past the bound started a hook"
        );
        assert_eq!(h.queued(), ["on-follower", "on-leader"]);
    }

    /// A stop's bound (README "Signals"): `kill_by` brings the running hook's deadline
    /// in, never out; `kill_now` kills its group at once and names it and the queue.
    #[test]
    fn a_stop_brings_the_kill_forward_and_kills_at_its_bound() {
        let sleep = Some(vec!["sleep".into(), "30".into()]);
        let mut h = Hooks::new(1, sleep, Some(vec!["true".into()]), Duration::from_secs(60));
        h.transition(Role::Leader, Some(1), 7, "ok");
        h.transition(Role::Follower, None, 7, "ok");
        let started = h.running.as_ref().map(|r| r.started).unwrap();
        let by = started + Duration::from_secs(5);
        h.kill_by(by, Instant::now());
        assert_eq!(h.deadline(), Some(by));
        h.kill_by(started + Duration::from_secs(50), Instant::now());
        assert_eq!(h.deadline(), Some(by), "kill_by moved the kill out");
        assert!(h.busy());
        let pid = h.running().map(|r| r.pid).unwrap();
        assert_eq!(h.queued(), ["on-follower"]);
        assert_eq!(
            h.kill_now(),
            Some(HookRun {
                name: "on-leader",
                pid
            })
        );
        assert_eq!(h.deadline(), None, "a killed hook has no deadline");
        let r = h.running.as_mut().unwrap();
        let status = r.child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
        h.running = None;
        h.queue.clear();
    }
}

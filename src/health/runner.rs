//! The runner thread (SPEC section 13): the check every `check-interval`, one at a
//! time, each result sent through a bounded channel and a `mio::Waker`, so the event
//! loop never waits for a check. ELECTD_ID, ELECTD_ROLE and ELECTD_GROUP tell the
//! check whose it is.

use super::outcome::{Failure, Outcome};
use super::process::run_once;
use crate::config::Check;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TryRecvError};
use std::time::{Duration, Instant};

/// Results queued between the runner and the loop (one per interval is produced).
const QUEUED: usize = 8;

/// What the runner thread needs to know.
#[derive(Clone, Debug)]
pub(super) struct Settings {
    argv: Vec<String>,
    interval: Duration,
    timeout: Duration,
}

impl From<&Check> for Settings {
    fn from(c: &Check) -> Settings {
        Settings {
            argv: c.argv.clone(),
            interval: c.interval,
            timeout: c.timeout,
        }
    }
}

/// The thread that runs checks; dropped, it stops after the check under way.
pub(super) struct Runner {
    /// New settings for the thread (a reload).
    pub(super) settings: Sender<Settings>,
    /// The results, in the order the checks finished.
    pub(super) results: Receiver<Outcome>,
}

/// Whose check it is: the server and the election group, for its environment.
#[derive(Clone, Debug)]
pub(super) struct Who {
    /// This server's id: ELECTD_ID.
    pub(super) id: u16,
    /// The election group: ELECTD_GROUP.
    pub(super) group: String,
}

/// The runner thread's body: a check every interval, one at a time.
fn runner(
    mut s: Settings,
    ctl: Receiver<Settings>,
    out: SyncSender<Outcome>,
    waker: Arc<mio::Waker>,
    who: Who,
    leader: Arc<AtomicBool>,
) {
    let send = |o: Outcome| {
        let ok = out.send(o).is_ok();
        let _ = waker.wake();
        ok
    };
    let mut next = Instant::now();
    loop {
        // Sleep until the next check, taking new settings as they come.
        loop {
            let now = Instant::now();
            let msg = if now >= next {
                match ctl.try_recv() {
                    Ok(m) => Ok(m),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return,
                }
            } else {
                ctl.recv_timeout(next - now)
            };
            match msg {
                Ok(new) => {
                    // A shorter interval applies to the wait under way.
                    next = next.min(Instant::now() + new.interval);
                    s = new;
                }
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        let start = Instant::now();
        let role = if leader.load(Ordering::Relaxed) {
            "leader"
        } else {
            "follower"
        };
        let env = [
            ("ELECTD_ID", who.id.to_string()),
            ("ELECTD_ROLE", role.to_string()),
            ("ELECTD_GROUP", who.group.clone()),
        ];
        let (outcome, stuck) = run_once(&s.argv, s.timeout, &env);
        if !send(outcome) {
            return;
        }
        if let Some(mut stuck) = stuck {
            // A killed check that does not die (stuck in the kernel) must not freeze
            // the verdict: every interval it is still there counts as a failure.
            while !stuck.reap(s.interval) {
                let o = Outcome {
                    result: Err(Failure::Exec(
                        "the previous check, killed on its timeout, has still not exited".into(),
                    )),
                    output: String::new(),
                    took: start.elapsed(),
                };
                if !send(o) {
                    return;
                }
            }
        }
        next = (start + s.interval).max(Instant::now());
    }
}

impl Runner {
    /// Starts the thread; its first check runs at once.
    pub(super) fn start(
        s: Settings,
        waker: Arc<mio::Waker>,
        who: Who,
        leader: Arc<AtomicBool>,
    ) -> io::Result<Runner> {
        let (settings, ctl) = mpsc::channel();
        let (out, results) = mpsc::sync_channel(QUEUED);
        std::thread::Builder::new()
            .name("electd-check".into())
            .spawn(move || runner(s, ctl, out, waker, who, leader))?;
        Ok(Runner { settings, results })
    }
}

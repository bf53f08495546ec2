//! `electctl run`: run a command only while this server holds the lease (SPEC 11).
//!
//! The supervisor polls the daemon's `status` and keeps the last `lease_until_ns`, a
//! point on this host's CLOCK_MONOTONIC. It enforces that deadline itself, so a frozen
//! or dead daemon cannot keep the command alive: SIGTERM goes to the command's process
//! group `grace + margin` before the lease ends, SIGKILL `margin` before, and the
//! command is started only while more than that remains. A command that exits while
//! this server still leads is restarted with a doubling backoff. ELECTD_TERM holds the
//! term the command was started in: the fencing token to hand downstream.

use crate::daemon::monotonic_now;
use crate::json::{self, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The supervisor's settings.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The daemon's control socket.
    pub socket: PathBuf,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// How often the daemon is asked.
    pub poll: Duration,
    /// The command and its arguments.
    pub argv: Vec<String>,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// What the daemon last said, with the lease end on CLOCK_MONOTONIC.
#[derive(Copy, Clone, Debug)]
struct Lease {
    term: u64,
    until_ns: u64,
}

struct Daemon {
    path: PathBuf,
    conn: Option<BufReader<UnixStream>>,
    timeout: Duration,
}

impl Daemon {
    /// Asks for `status`, waiting at most `wait`; Ok(None) while this server does not
    /// lead, Err when the daemon cannot be reached or does not answer in time.
    fn lease(&mut self, wait: Duration) -> Result<Option<Lease>, String> {
        if self.conn.is_none() {
            let s = UnixStream::connect(&self.path)
                .map_err(|e| format!("{}: {e}", self.path.display()))?;
            self.conn = Some(BufReader::new(s));
        }
        let wait = Some(wait.min(self.timeout).max(Duration::from_millis(1)));
        let s = self.conn.as_ref().expect("connected").get_ref();
        if let Err(e) = s
            .set_read_timeout(wait)
            .and_then(|_| s.set_write_timeout(wait))
        {
            self.conn = None;
            return Err(e.to_string());
        }
        let r = self.ask();
        if r.is_err() {
            self.conn = None;
        }
        r
    }

    fn ask(&mut self) -> Result<Option<Lease>, String> {
        let c = self.conn.as_mut().expect("connected");
        c.get_mut()
            .write_all(b"status\n")
            .map_err(|e| e.to_string())?;
        let mut line = String::new();
        match c.read_line(&mut line) {
            Ok(0) => return Err("the daemon closed the connection".into()),
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
        let v = json::parse(line.trim()).map_err(|e| format!("unreadable status: {e}"))?;
        if v.get("role").and_then(Value::as_str) != Some("leader") {
            return Ok(None);
        }
        let term = v
            .get("term")
            .and_then(Value::as_u64)
            .ok_or("status without term")?;
        let until_ns = v
            .get("lease_until_ns")
            .and_then(Value::as_u64)
            .ok_or("leader without lease_until_ns")?;
        Ok(Some(Lease { term, until_ns }))
    }
}

fn signal_group(child: &Child, sig: i32) {
    // SAFETY: kill(2) on the process group of a child we started and have not reaped.
    unsafe { libc::kill(-(child.id() as i32), sig) };
}

struct Running {
    child: Child,
    term: u64,
    started: Instant,
    term_sent: Option<Instant>,
}

/// Runs the supervisor until SIGTERM or SIGINT; returns the exit code.
pub fn run(opts: &RunOptions) -> i32 {
    // SAFETY: installing an async-signal-safe handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
    }
    let margin = (opts.poll * 2).max(Duration::from_millis(20));
    let margin_ns = margin.as_nanos() as u64;
    let stop_ns = (opts.grace + margin).as_nanos() as u64;
    let mut daemon = Daemon {
        path: opts.socket.clone(),
        conn: None,
        timeout: opts.poll.max(Duration::from_millis(50)),
    };
    let mut lease: Option<Lease> = None;
    let mut running: Option<Running> = None;
    let mut backoff = Duration::from_millis(100);
    let mut next_start = Instant::now();
    let mut last_error = String::new();
    loop {
        let stopping = STOP.load(Ordering::SeqCst);
        // Never wait on the daemon past the moment the command must be signalled.
        let now = monotonic_now().as_nanos();
        let left = lease.map_or(0, |l| l.until_ns.saturating_sub(now));
        let wait = match &running {
            Some(_) if left > stop_ns => Duration::from_nanos(left - stop_ns),
            // Inside the stop window: act first, do not wait on a possibly frozen daemon.
            Some(_) => Duration::from_millis(1),
            None => opts.poll,
        };
        match daemon.lease(wait) {
            Ok(l) => {
                lease = l;
                last_error.clear();
            }
            Err(e) => {
                // Unreachable: keep the last known deadline, which only runs out.
                if e != last_error {
                    eprintln!("electctl run: {e}");
                    last_error = e;
                }
            }
        }
        let now = monotonic_now().as_nanos();
        let left = lease.map_or(0, |l| l.until_ns.saturating_sub(now));
        if let Some(r) = running.as_mut() {
            if let Ok(Some(status)) = r.child.try_wait() {
                eprintln!(
                    "electctl run: command exited ({status}) after {:?}",
                    r.started.elapsed()
                );
                if r.started.elapsed() > Duration::from_secs(10) {
                    backoff = Duration::from_millis(100);
                }
                next_start = Instant::now() + backoff;
                backoff = (backoff * 2).min(Duration::from_secs(10));
                running = None;
            }
        }
        if let Some(r) = running.as_mut() {
            // A re-election of this server (new term, lease kept) does not stop the
            // command: only the lease clock and the role decide.
            if stopping || lease.is_none() || left <= stop_ns {
                if r.term_sent.is_none() {
                    eprintln!(
                        "electctl run: stopping the command of term {} (lease {} ms left)",
                        r.term,
                        left / 1_000_000
                    );
                    signal_group(&r.child, libc::SIGTERM);
                    r.term_sent = Some(Instant::now());
                }
                let overdue = r.term_sent.is_some_and(|t| t.elapsed() >= opts.grace);
                if overdue || left <= margin_ns {
                    signal_group(&r.child, libc::SIGKILL);
                    let _ = r.child.wait();
                    running = None;
                }
            }
        } else if stopping {
            return 0;
        } else if let Some(l) = lease.filter(|_| left > stop_ns && Instant::now() >= next_start) {
            let mut cmd = Command::new(&opts.argv[0]);
            cmd.args(&opts.argv[1..])
                .env("ELECTD_TERM", l.term.to_string())
                .env("ELECTD_ROLE", "leader")
                .process_group(0);
            match cmd.spawn() {
                Ok(child) => {
                    eprintln!(
                        "electctl run: leader in term {}: started pid {}",
                        l.term,
                        child.id()
                    );
                    running = Some(Running {
                        child,
                        term: l.term,
                        started: Instant::now(),
                        term_sent: None,
                    });
                }
                Err(e) => {
                    eprintln!("electctl run: cannot start {}: {e}", opts.argv[0]);
                    next_start = Instant::now() + backoff;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        }
        // Sleep one poll interval, but wake in time for a SIGKILL deadline.
        let mut nap = opts.poll;
        if running.is_some() && left > margin_ns {
            nap = nap.min(Duration::from_nanos(left - margin_ns));
        }
        std::thread::sleep(nap.max(Duration::from_millis(1)));
    }
}

//! What one check run came to (SPEC section 13): success or a typed [`Failure`], the
//! first line of its output, and the counters of the metrics. Plain values: the
//! runner produces them, the verdict counts them, the simulator can make them up.

use std::fmt;
use std::time::Duration;

/// Why a check run failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// It exited with this non-zero status.
    Exit(i32),
    /// It was killed by this signal (not by us).
    Signal(i32),
    /// It outlived `check-timeout`; its process group was killed.
    Timeout(Duration),
    /// It could not be started (not found, not executable, ...), or a killed check
    /// could not even be reaped.
    Exec(String),
}

impl Failure {
    /// The metrics label: `exit`, `signal`, `timeout` or `exec`.
    pub fn reason(&self) -> &'static str {
        match self {
            Failure::Exit(126 | 127) | Failure::Exec(_) => "exec",
            Failure::Exit(_) => "exit",
            Failure::Signal(_) => "signal",
            Failure::Timeout(_) => "timeout",
        }
    }

    /// Index into [`CheckCounters::failures`].
    pub fn index(&self) -> usize {
        REASONS
            .iter()
            .position(|r| *r == self.reason())
            .expect("every reason is listed")
    }
}

/// The failure reasons, in the order of [`CheckCounters::failures`].
pub const REASONS: [&str; 4] = ["exit", "signal", "timeout", "exec"];

/// A readable name for the signals a check is likely to die of.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => return format!("signal {sig}"),
    };
    format!("signal {sig} ({name})")
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Exit(126) => write!(f, "exit status 126 (cannot execute)"),
            Failure::Exit(127) => write!(f, "exit status 127 (command not found)"),
            Failure::Exit(c) => write!(f, "exit status {c}"),
            Failure::Signal(s) => write!(f, "killed by {}", signal_name(*s)),
            Failure::Timeout(t) => write!(
                f,
                "timed out after {} ms (check-timeout): its process group was killed",
                t.as_millis()
            ),
            Failure::Exec(e) => write!(f, "cannot execute: {e}"),
        }
    }
}

/// One check run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Ok for exit status 0.
    pub result: Result<(), Failure>,
    /// The first line of its output (stdout and stderr together), at most
    /// [`OUTPUT_BYTES`](super::OUTPUT_BYTES) bytes, control characters replaced.
    pub output: String,
    /// How long it ran.
    pub took: Duration,
}

impl Outcome {
    /// "exit status 3; output: broker unreachable", for the logs and `status`.
    pub fn describe(&self) -> String {
        let what = match &self.result {
            Ok(()) => "exit status 0".to_string(),
            Err(f) => f.to_string(),
        };
        if self.output.is_empty() {
            what
        } else {
            format!("{what}; output: {}", self.output)
        }
    }
}

/// Counters for metrics.
#[derive(Clone, Debug, Default)]
pub struct CheckCounters {
    /// Check runs finished.
    pub runs: u64,
    /// Failures by reason, in the order of [`REASONS`].
    pub failures: [u64; 4],
}

impl CheckCounters {
    /// Counts one finished run, and its failure by reason.
    pub fn count(&mut self, o: &Outcome) {
        self.runs += 1;
        if let Err(f) = &o.result {
            self.failures[f.index()] += 1;
        }
    }
}

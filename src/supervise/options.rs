//! `run`'s settings: what the supervisor is given, and the bounds of its options.

use std::path::PathBuf;
use std::time::Duration;

/// The largest `--max-restarts`.
pub const MAX_RESTARTS: u32 = 1000;
/// `--restart-window` when only `--max-restarts` is given.
pub const DEFAULT_RESTART_WINDOW: Duration = Duration::from_secs(60);
/// The longest `--restart-window`.
pub const MAX_RESTART_WINDOW: Duration = Duration::from_secs(86_400);
/// The longest `--grace`, and the largest grace the daemon accepts in `supervise` (a
/// day: far above any lease, so a grace this long could never fit one anyway).
pub const MAX_GRACE: Duration = Duration::from_secs(86_400);

/// The supervisor's settings.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The daemon's control socket.
    pub socket: PathBuf,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Reconnect interval (a registered `run` never asks the daemon again: every change
    /// is pushed).
    pub poll: Duration,
    /// The command and its arguments.
    pub argv: Vec<String>,
    /// `--max-restarts N --restart-window D`: N exits within D make this server
    /// unhealthy.
    pub restarts: Option<(u32, Duration)>,
    /// `--group GROUP`: the election group whose lease the command follows (None: the
    /// daemon's only group, or `default`).
    pub group: Option<String>,
}

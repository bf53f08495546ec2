//! The daemon: one thread, one mio loop driving the core, the UDP transport, the
//! control socket and signals (SPEC sections 9 to 12).
//!
//! Every wakeup: read a bounded batch from each ready source, feed the host
//! (`crate::host`: every group's core, the datagram path and the flush), then carry
//! out what it asks (its state-file write goes to the writer thread; what the cores
//! queued after it is sent once the thread reports it durable), then answer a bounded
//! batch of control requests and tell watchers and supervisors about changes. The poll
//! timeout is the host's next deadline. The loop never waits on the disk or on the log sink
//! (SPEC section 12): state writes and log lines have threads of their own.
//!
//! The core's `now` is CLOCK_BOOTTIME (`time::boot_now`, SPEC section 8): leases keep
//! running through a suspend. Hook timeouts, the watchdog and log rate limits are not
//! leases and use `Instant`.
//!
//! Planned handoffs (SPEC section 6, Resign): on `Event::Resigning` the daemon tells
//! every supervisor (`electctl run`, registered with `supervise`) at once, and calls
//! `Node::handle_released` only when each has confirmed that its command exited; a
//! supervisor that left unconfirmed is no confirmation, and the core's own deadline
//! lets the RESIGN go at the lease end. SIGTERM and SIGINT take the same path and the
//! daemon exits once both RESIGNs are out and its hooks have finished (`stop`: at most
//! `hook-timeout` later; the `on-follower` that the resign started often stops the
//! processor).
//!
//! Health (SPEC section 13): the core is told one bool, the AND of the check's verdict
//! (`health::Checks`, run on its own thread, results through a `mio::Waker`) and of
//! every supervisor's report (`electctl run --max-restarts`). The core decides the
//! handovers; they take the same planned-handoff path. `drain` and `undrain` are
//! answered only once the state file holds the new drain.
//!
//! The loop lives here; the rest hangs off it, one concern per file: `group` (one
//! election group's view, hooks, check and handoff), `flush` (driving the host: its
//! events, its write to the writer thread, its datagrams), `net` (UDP reads and
//! sends), `handoff`, `health`,
//! `metrics`
//! (counters and the Prometheus text), `status` (status line, STATUS=, supervisor
//! lines, change reports), `requests` (control-socket answers), `reload` (SIGHUP and
//! `reload`), `signals` (the signalfd), `stop` (the hooks a stop waits for).

mod flush;
mod group;
mod handoff;
mod health;
mod metrics;
mod net;
mod reload;
mod requests;
mod signals;
mod status;
mod stop;

use group::Group;
use handoff::Handoff;
use metrics::Metrics;
use reload::bind_metrics;
use signals::signal_fd;
pub use signals::{block_signals, unblock_signals};
use status::View;

use crate::auth;
use crate::config::{Config, Transport as Mode};
use crate::control::{Control, NOT_LEADER, Passed, RELOAD_REFUSED, Request, Scope, error_line};
use crate::health::{Checks, Verdict};
use crate::hooks::Hooks;
use crate::http::Http;

use crate::host::{Host, HostConfig, Notice, StopState};
use crate::node::{Durable, Event, Handover, Node, Role, Sabotage};
use crate::notify::Notifier;
use crate::store::{Found, Identity, Store, StoreError};
use crate::time::{Time, boot_now};
use crate::transport::{RECV_BUF, Transport};
use log::{debug, error, info, warn};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::fmt::Write as _;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

const UDP_UNICAST: Token = Token(0);
const UDP_GROUP: Token = Token(1);
const SIGNALS: Token = Token(2);
const CONTROL: Token = Token(3);
/// The check runner's waker; far above the control clients' tokens (CONTROL + 1..).
const HEALTH: Token = Token(1 << 20);
/// The metrics listener (`metrics-listen`); its connections take the tokens after it.
const HTTP: Token = Token(1 << 16);
/// Datagrams read from one socket per wakeup before other sources get their turn.
const UDP_BUDGET: usize = 256;
/// The longest a wait may last while something is swept by time (idle or lingering
/// control clients, metrics connections, a state write that may turn slow).
const MAX_WAIT: Duration = Duration::from_secs(1);
/// The longest a wait may last when nothing is swept by time: the host's deadline (a
/// follower's hold, a leader's next LEAD) and the signals bound it well before this.
/// Waking every `MAX_WAIT` anyway cost an idle follower at heartbeat 1 s a second
/// wakeup between LEADs about half the time (the LEAD came just after the second was
/// up; issue 25).
const REST_WAIT: Duration = Duration::from_secs(60);
/// The longest reason of a refused reload kept for `status` (characters).
const MAX_REFUSAL: usize = 400;
/// The longest part of it shown in systemd's STATUS= line (characters).
const MAX_REFUSAL_STATUS: usize = 120;

/// The environment variable that breaks the daemon on purpose for negative controls.
pub const SABOTAGE_VAR: &str = "ELECTD_TEST_SABOTAGE";

/// Reads `ELECTD_TEST_SABOTAGE`: unset means none; `resign_early` sends the RESIGN of a
/// planned handoff without waiting for supervisors (a deliberately unsafe build, for
/// an end-to-end test's negative control); anything else is refused.
pub fn sabotage_from_env() -> Result<Sabotage, String> {
    let mut s = Sabotage::default();
    match std::env::var(SABOTAGE_VAR) {
        Err(std::env::VarError::NotPresent) => {}
        Ok(v) if v == "resign_early" => s.resign_early = true,
        Ok(v) => {
            return Err(format!(
                "{SABOTAGE_VAR}='{v}' is not a known sabotage (only 'resign_early', for tests)"
            ));
        }
        Err(e) => return Err(format!("{SABOTAGE_VAR}: {e}")),
    }
    Ok(s)
}

fn random_seed() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most 8 bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 8, 0) };
    if n == 8 {
        u64::from_ne_bytes(b)
    } else {
        boot_now().0 ^ u64::from(std::process::id()).rotate_left(40)
    }
}

/// Why the daemon could not start or had to stop (exit status 1: systemd restarts
/// it; [`Fatal::Foreign`] 78), by what failed; the text says what and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fatal {
    /// The state file: it cannot be created, locked, read, held to its limits or
    /// written (SPEC sections 4 and 12); nothing that depended on it has left.
    State(String),
    /// The state file is another server's or another cluster's
    /// ([`crate::store::StoreError::Foreign`]), refused before anything is sent. Only
    /// an operator can fix it, so the daemon exits 78 (EX_CONFIG), which the units do
    /// not restart.
    Foreign(String),
    /// The configuration cannot run against what is here (the core refuses it).
    Config(String),
    /// The operating system refused a resource: a socket, the poller, the signal fd,
    /// a thread, the notify socket.
    System(String),
}

impl std::fmt::Display for Fatal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fatal::State(s) | Fatal::Foreign(s) | Fatal::Config(s) | Fatal::System(s) => {
                f.write_str(s)
            }
        }
    }
}

/// The running daemon.
pub struct Daemon {
    cfg: Config,
    id_override: Option<u16>,
    cli_log_level: Option<log::LevelFilter>,
    poll: Poll,
    /// The election groups' runtimes (hooks, checks, views), in configuration order (a
    /// group's index is its wire id); their cores are in `host`.
    groups: Vec<Group>,
    /// The sans-IO shell: every group's core, the datagram path, the flush, the write
    /// in flight.
    host: Host,
    transport: Transport,
    control: Control,
    /// Holds the state file's lock (flock) while the daemon runs; the writer thread
    /// writes it.
    _store: Store,
    signals: i32,
    metrics: Metrics,
    udp_more: [bool; 2],
    /// What recvmmsg(2) fills (`net.rs`), made at the first read and reused: taken out
    /// for a read and put back after it.
    batch: Option<Box<net::Batch>>,
    /// The UDP sockets are deregistered: the host said its datagrams may wait, so they
    /// are read at every wakeup before the timers (`net.rs`, issue 25).
    udp_deferred: bool,
    /// A group's role, leader, term, health or drain changed since the all-groups
    /// watchers were last told (one line per loop iteration, not per flush).
    all_dirty: bool,
    started: Instant,
    notifier: Notifier,
    next_watchdog: Option<Instant>,
    /// Why the last reload (SIGHUP or `reload`) was refused; None once one succeeds.
    /// The refused file is still on disk: the next restart would load it.
    config_refused: Option<String>,
    /// `metrics-listen`: Prometheus over HTTP (SPEC section 16), if configured.
    http: Option<Http>,
    /// The state file's writer thread: the loop never waits on the disk (SPEC 12).
    writer: crate::store::Writer,
    /// Since when the writer thread has had the host's write, and whether its
    /// slowness was logged (one write at a time).
    write_since: Option<(Instant, bool)>,
    /// `drain`/`undrain` requests applied and answered once their write is durable.
    pending_drains: Vec<requests::PendingDrain>,
    /// Until when a stop that is otherwise over waits for hooks (`stop`), once set.
    hooks_bound: Option<Instant>,
}

/// Says what the start made of the state file it found, once it has been rewritten
/// as this server's (version 5, under the configured cluster name).
fn log_found(cfg: &Config, found: &Found, state_cluster: Option<&str>) {
    let path = cfg.state.display();
    match found {
        Found::Unnamed(v) => info!(
            "state file {path} upgraded from version {v} to 5: it now names server {} of cluster '{}'",
            cfg.id, cfg.cluster
        ),
        Found::Renamed(old) => warn!(
            "state file {path} of cluster '{old}' taken over as cluster '{}' (--state-cluster {old}): its votes are kept; --state-cluster is no longer needed",
            cfg.cluster
        ),
        Found::Nothing | Found::Own => {
            if let Some(old) = state_cluster {
                info!(
                    "--state-cluster {old}: state file {path} is not of cluster '{old}', nothing to take over; the option is no longer needed"
                );
            }
        }
    }
}

impl Daemon {
    /// Loads the state, binds every socket and builds the core. Nothing runs yet.
    /// `state_cluster` (`--state-cluster`): the cluster's former name, under which this
    /// server's state file may still be written.
    pub fn start(
        cfg: Config,
        id_override: Option<u16>,
        cli_log_level: Option<log::LevelFilter>,
        state_cluster: Option<&str>,
    ) -> Result<Daemon, Fatal> {
        // systemd's StateDirectory and RuntimeDirectory make these in production; for
        // a local cluster (conf/local-3.conf) the daemon makes them, private.
        for dir in [cfg.state.parent(), cfg.socket.parent()]
            .into_iter()
            .flatten()
        {
            if !dir.as_os_str().is_empty() && !dir.exists() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o750)
                    .create(dir)
                    .map_err(|e| Fatal::State(format!("cannot create {}: {e}", dir.display())))?;
            }
        }
        let this = Identity {
            id: cfg.id,
            cluster: cfg.cluster.clone(),
        };
        let mut store = Store::new(&cfg.state, this);
        store.lock().map_err(|e| Fatal::State(e.to_string()))?;
        // Refused here, before any socket is open, if it is another server's file.
        let loaded = store.load_as(state_cluster).map_err(|e| match e {
            StoreError::Foreign { .. } => Fatal::Foreign(e.to_string()),
            _ => Fatal::State(e.to_string()),
        })?;
        let (mut kept, mut extra) = (loaded.groups, loaded.extra);
        let keys = auth::load_keys(cfg.key_file.as_deref(), cfg.key_file_next.as_deref())
            .map_err(Fatal::Config)?;
        // A new boot number, on disk before anything is sent: counters never repeat.
        extra.boot = extra
            .boot
            .checked_add(1)
            .ok_or_else(|| Fatal::State("boot counter exhausted".into()))?;
        store
            .save(&kept, &extra)
            .map_err(|e| Fatal::State(e.to_string()))?;
        log_found(&cfg, &loaded.found, state_cluster);
        // Host names are resolved here, once (SPEC section 16); a reload never does.
        let addrs = cfg.resolve().map_err(|e| Fatal::Config(e.to_string()))?;
        let mut transport =
            Transport::open(&cfg, &addrs).map_err(|e| Fatal::System(format!("UDP: {e}")))?;
        let mut control = Control::bind(&cfg.socket, cfg.socket_mode, CONTROL.0)
            .map_err(|e| Fatal::System(format!("control socket: {e}")))?;
        let signals = signal_fd().map_err(|e| Fatal::System(format!("signals: {e}")))?;
        let poll = Poll::new().map_err(|e| Fatal::System(format!("poll: {e}")))?;
        let reg = poll.registry();
        let fail = |e: io::Error| Fatal::System(format!("poll register: {e}"));
        reg.register(&mut transport.unicast, UDP_UNICAST, Interest::READABLE)
            .map_err(fail)?;
        if let Some(g) = transport.group.as_mut() {
            reg.register(g, UDP_GROUP, Interest::READABLE)
                .map_err(fail)?;
        }
        reg.register(&mut SourceFd(&signals), SIGNALS, Interest::READABLE)
            .map_err(fail)?;
        control.register(reg, CONTROL).map_err(fail)?;
        let http = bind_metrics(cfg.metrics_listen, reg).map_err(Fatal::System)?;
        let now = boot_now();
        let sabotage = sabotage_from_env().map_err(Fatal::Config)?;
        if sabotage.resign_early {
            warn!(
                "{SABOTAGE_VAR}=resign_early: this daemon is DELIBERATELY UNSAFE: a planned handoff releases the followers before local commands have stopped (for tests only)"
            );
        }
        let waker = Arc::new(
            mio::Waker::new(poll.registry(), HEALTH)
                .map_err(|e| Fatal::System(format!("poll waker: {e}")))?,
        );
        let new = cfg
            .groups
            .iter()
            .filter(|g| !kept.contains_key(&g.name))
            .count();
        if kept.len() + new > crate::store::MAX_STATE_GROUPS {
            // The file could not be read back: refuse now, not at the next start.
            return Err(Fatal::State(format!(
                "state file {}: it holds {} groups and the configuration adds {new}, more than the {} a state file may hold (groups no longer configured are kept so they never vote twice in a term); reuse group names, or move the groups that are gone for good out of the file",
                cfg.state.display(),
                kept.len(),
                crate::store::MAX_STATE_GROUPS
            )));
        }
        let mut groups = Vec::with_capacity(cfg.groups.len());
        let mut cores = Vec::with_capacity(cfg.groups.len());
        for g in 0..cfg.groups.len() {
            let durable = kept.remove(&cfg.groups[g].name).unwrap_or_default();
            let (group, node) = Group::start(&cfg, g, durable, &sabotage, &waker, now)?;
            cores.push((group.name.clone(), node, durable));
            groups.push(group);
        }
        // The configuration's warnings were logged by main before this start (once:
        // both logged them, and every warning of a start appeared twice).
        info!(
            "electd {} started: server {} ({}) of cluster '{}', {} servers, {}, {}, state {}",
            env!("CARGO_PKG_VERSION"),
            cfg.id,
            cfg.name_of(cfg.id),
            cfg.cluster,
            cfg.servers.len(),
            match &cfg.transport {
                Mode::Unicast => "unicast".to_string(),
                Mode::Multicast {
                    group, interface, ..
                } => format!("multicast {group} on {interface}"),
            },
            if cfg.has_groups() {
                format!("{} election groups", groups.len())
            } else {
                format!("term {}", cores[0].2.term)
            },
            cfg.state.display()
        );
        let several = cfg.has_groups();
        for ((g, spec), (_, node, durable)) in groups.iter().zip(&cfg.groups).zip(&cores) {
            let tag = g.tag(several);
            if several {
                info!(
                    "{tag}term {}, preference {}",
                    durable.term,
                    if spec.order.is_empty() {
                        "by server priority".to_string()
                    } else {
                        spec.order
                            .iter()
                            .map(u16::to_string)
                            .collect::<Vec<_>>()
                            .join(" ")
                    }
                );
            }
            if node.drained() {
                warn!(
                    "{tag}this server is drained (state file): it will not lead until 'electctl undrain'"
                );
            }
            if let Some(c) = &spec.check {
                info!(
                    "{tag}health check: {} every {:?} (timeout {:?}, fall {}, rise {}); unhealthy until it passes",
                    c.argv.join(" "),
                    c.interval,
                    c.timeout,
                    c.fall,
                    c.rise
                );
            }
        }
        if !kept.is_empty() {
            info!(
                "the state file keeps the state of groups no longer configured: {}",
                kept.keys().cloned().collect::<Vec<_>>().join(", ")
            );
        }
        let notifier =
            Notifier::from_env().map_err(|e| Fatal::System(format!("NOTIFY_SOCKET: {e}")))?;
        // Its results are taken every wakeup, like the checks', through the one waker.
        let wake = waker.clone();
        let writer = store
            .writer(Box::new(move || {
                let _ = wake.wake();
            }))
            .map_err(|e| Fatal::System(format!("state writer thread: {e}")))?;
        let unicast = matches!(cfg.transport, Mode::Unicast);
        let sources = unicast.then(|| {
            cfg.servers
                .iter()
                .filter_map(|s| transport.peer_addr(s.id).map(|a| (s.id, a)))
                .collect()
        });
        let host_cfg = HostConfig {
            id: cfg.id,
            fingerprint: cfg.fingerprint(),
            max_hold: cfg.max_hold,
            sources,
            unicast,
            several: cfg.has_groups(),
            rtt: cfg.rtt,
        };
        let mut host = Host::new(host_cfg, cores, kept, extra, keys);
        for (g, spec) in cfg.groups.iter().enumerate() {
            host.set_check(now, g, spec.check.as_ref().map(crate::health::limits));
        }
        Ok(Daemon {
            cfg,
            id_override,
            cli_log_level,
            poll,
            groups,
            host,
            transport,
            control,
            _store: store,
            signals,
            metrics: Metrics::default(),
            udp_more: [false; 2],
            batch: None,
            udp_deferred: false,
            all_dirty: false,
            started: Instant::now(),
            next_watchdog: notifier.watchdog_interval().map(|i| Instant::now() + i),
            notifier,
            config_refused: None,
            http,
            pending_drains: Vec::new(),
            writer,
            write_since: None,
            hooks_bound: None,
        })
    }

    /// Runs until SIGTERM or SIGINT (after resigning) or a fatal error.
    pub fn run(&mut self) -> Result<(), Fatal> {
        let mut events = Events::with_capacity(256);
        // Sockets are bound and the state is loaded: systemd may start what depends on us.
        self.notifier.send("READY=1");
        self.notifier.send(&self.status_text());
        loop {
            // Where the iteration's inputs have all been handled: the host's answer now
            // holds until the next wakeup. A read made here (the sockets taken back)
            // is carried out by a full iteration before any wait: its supervisor lines
            // and watcher reports go out with the control flush below.
            // One clock read for the deferral's answer and the deadline: nothing runs
            // between them but a read when the answer flips, and then the wait is zero.
            let now = boot_now();
            let read_now = self.apply_deferral(now)?;
            let busy = read_now
                || self.udp_more.iter().any(|&m| m)
                || self.control.has_more()
                || self.http.as_ref().is_some_and(Http::has_more);
            let deadline = self.host.next_deadline(now);
            let cap = if self.sweeps_due() {
                MAX_WAIT
            } else {
                REST_WAIT
            };
            let mut timeout = deadline.saturating_since(now).min(cap);
            // The monotonic clock is read only when a hook runs or a watchdog is due:
            // at rest neither is (issue 25).
            let mut others = self
                .groups
                .iter()
                .map(|g| g.hooks.deadline())
                .chain([self.next_watchdog])
                .flatten()
                .peekable();
            if others.peek().is_some() {
                let instant = Instant::now();
                for d in others {
                    timeout = timeout.min(d.saturating_duration_since(instant));
                }
            }
            if busy {
                timeout = Duration::ZERO;
            }
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Fatal::System(format!("poll: {e}")));
            }
            for ev in events.iter() {
                match ev.token() {
                    UDP_UNICAST => self.read_udp(0, false)?,
                    UDP_GROUP => self.read_udp(1, false)?,
                    SIGNALS => self.on_signals()?,
                    CONTROL => self.control.accept(self.poll.registry(), Instant::now()),
                    // Check and state-write results are taken below, every wakeup.
                    HEALTH => {}
                    t if self.control.owns(t) => {
                        if ev.is_readable() || ev.is_read_closed() {
                            self.control.readable(t, Instant::now());
                        }
                    }
                    HTTP => {
                        if let Some(h) = self.http.as_mut() {
                            h.accept(self.poll.registry(), Instant::now());
                        }
                    }
                    t if self.http.as_ref().is_some_and(|h| h.owns(t)) => {
                        if let Some(h) = self.http.as_mut() {
                            h.readable(t, Instant::now());
                        }
                    }
                    t => debug!("event for unknown token {t:?}"),
                }
            }
            if self.udp_deferred {
                // Before the timers: the ACKs of the last LEAD are taken just before
                // the next one leaves (issue 25), and leave with them in one flush
                // (`on_timeouts` below).
                self.read_udp_all(true)?;
            } else {
                for which in 0..2 {
                    if self.udp_more[which]
                        && !events
                            .iter()
                            .any(|e| e.token() == [UDP_UNICAST, UDP_GROUP][which])
                    {
                        self.read_udp(which, false)?;
                    }
                }
            }
            self.take_write_result()?;
            self.on_timeouts()?;
            // After the timers: a successor chosen at the end of a drained leader's
            // wait (`Timer::UnfitWait`) is named in the answer at once.
            self.answer_drains();
            // Bounded: the rest stays buffered for the next wakeup (finding 7). No
            // client, no request (and no clock read: issue 25).
            if self.control.clients() > 0 {
                for (slot, (req, passed)) in self.control.take_requests(Instant::now()) {
                    self.answer(slot, req, passed)?;
                    // Heartbeats first: a LEAD due while answering leaves before the next.
                    self.on_timeouts()?;
                }
            }
            self.serve_http()?;
            self.take_check_results()?;
            self.flush_control();
            if self.control.has_departed() {
                // Freed by that flush: the host hears of it now, not at the next
                // wakeup (a RESIGN it held, an unhealthy report it made).
                self.flush_node()?;
                self.flush_control();
            }
            if let Some(h) = self.http.as_mut() {
                h.flush(self.poll.registry(), Instant::now());
            }
            for g in &mut self.groups {
                // Nothing to reap or start (and no clock to read) while none runs or
                // waits.
                if g.hooks.busy() {
                    g.hooks.poll(Instant::now());
                }
            }
            if let Some(next) = self.next_watchdog {
                // Sent from the loop itself: a wedged loop stops petting, and systemd acts.
                if Instant::now() >= next {
                    self.notifier.send("WATCHDOG=1");
                    let interval = self.notifier.watchdog_interval().unwrap_or(MAX_WAIT);
                    self.next_watchdog = Some(Instant::now() + interval);
                }
            }
            if self.host.stopping() {
                // A group won while stopping (its round began before this server
                // claimed unfit) is handed over too.
                self.stop_groups()?;
                // Never before the RESIGN; at the latest the lease end plus a heartbeat.
                // A RESIGN held behind a write leaves once it lands (or the bound passes).
                // Then hooks still running or queued finish, within hook-timeout.
                match self.stop_state(boot_now()) {
                    StopState::Done => {
                        info!("stopped");
                        return Ok(());
                    }
                    StopState::BoundPassed => {
                        warn!("stopped before the second RESIGN left");
                        return Ok(());
                    }
                    StopState::Waiting(_) | StopState::Running => {}
                }
            }
        }
    }

    /// True when something of the loop is swept by time rather than by an event, so
    /// the wait must end within `MAX_WAIT`: a control client that may be dropped as
    /// idle or is lingering, a metrics connection, a state write that may be slow (its
    /// warning). Supervisors and watchers are never dropped as idle.
    fn sweeps_due(&self) -> bool {
        self.control.sweeps_due()
            || self.http.as_ref().is_some_and(|h| h.clients() > 0)
            || self.write_since.is_some()
    }

    /// Answers a bounded batch of `metrics-listen` requests, running the core's timers
    /// between two answers as for control requests: a LEAD never waits for a batch.
    fn serve_http(&mut self) -> Result<(), Fatal> {
        let Some(h) = self.http.as_mut() else {
            return Ok(());
        };
        for (slot, reply) in h.take_requests(self.poll.registry(), Instant::now()) {
            // The control socket's `metrics` answer, from the same function.
            let body = reply.wants_metrics().then(|| self.metrics_text());
            if let Some(h) = self.http.as_mut() {
                h.answer(slot, &reply, body.as_deref(), Instant::now());
            }
            self.on_timeouts()?;
        }
        Ok(())
    }

    /// The group a request names; without a name, the only group there is (`default`
    /// without group lines). With several groups a name is needed.
    pub(super) fn group_index(&self, name: Option<&str>) -> Result<usize, String> {
        let names = || {
            self.groups
                .iter()
                .map(|g| g.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match name {
            None if self.groups.len() == 1 => Ok(0),
            None => Err(format!(
                "this server runs several election groups; name one ({})",
                names()
            )),
            Some(name) => self
                .cfg
                .group_index(name)
                .ok_or_else(|| format!("no group '{name}' (this server's groups: {})", names())),
        }
    }

    /// The groups a request applies to: the one it names; without a name, the only
    /// group of a file without `group` lines, or every group of one with them.
    pub(super) fn groups_of(&self, name: Option<&str>) -> Result<Vec<usize>, String> {
        match name {
            None if self.cfg.has_groups() => Ok((0..self.groups.len()).collect()),
            n => self.group_index(n).map(|g| vec![g]),
        }
    }
}

/// `text` on one line (control characters become '?'; sd_notify lines end at a
/// newline) and at most `max` characters, with "..." when cut.
fn one_line(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .take(max)
        .collect();
    if text.chars().count() > max {
        out.push_str("...");
    }
    out
}

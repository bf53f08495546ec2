//! The daemon: one thread, one mio loop driving the core, the UDP transport, the
//! control socket and signals (SPEC sections 9 to 12).
//!
//! Every wakeup: read a bounded batch from each ready source, feed the core, then drain
//! the core's outputs (a Persist is written and confirmed before anything after it is
//! sent), then answer a bounded batch of control requests and tell watchers and
//! supervisors about changes. The poll timeout is the core's next deadline.
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
//! daemon exits once both RESIGNs are out.
//!
//! Health (SPEC section 13): the core is told one bool, the AND of the check's verdict
//! (`health::Checks`, run on its own thread, results through a `mio::Waker`) and of
//! every supervisor's report (`electctl run --max-restarts`). The core decides the
//! handovers; they take the same planned-handoff path. `drain` and `undrain` are
//! answered only once the state file holds the new drain.

use crate::auth::{self, Keys, ReplayWindow};
use crate::config::{Config, Transport as Mode};
use crate::control::{Control, NOT_LEADER, RELOAD_REFUSED, Request, Scope, error_line, json_str};
use crate::health::{Checks, REASONS, Verdict};
use crate::hooks::Hooks;
use crate::http::Http;

use crate::node::{Durable, Event, Handover, Node, Output, Reject, Role, Sabotage};
use crate::notify::Notifier;
use crate::store::{Extra, Store};
use crate::time::{Time, boot_now};
use crate::transport::{RECV_BUF, Transport};
use crate::wire::{self, Kind};
use log::{debug, error, info, warn};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::collections::{BTreeMap, HashMap};
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
/// The longest a wait may last even with no deadline (idle clients are swept).
const MAX_WAIT: Duration = Duration::from_secs(1);
/// The longest reason of a refused reload kept for `status` (characters).
const MAX_REFUSAL: usize = 400;
/// The longest part of it shown in systemd's STATUS= line (characters).
const MAX_REFUSAL_STATUS: usize = 120;

/// The environment variable that breaks the daemon on purpose for negative controls.
pub const SABOTAGE_VAR: &str = "ELECTD_TEST_SABOTAGE";

/// The election groups this daemon runs (one, `default`, until groups land).
const GROUPS: usize = 1;

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

/// The server `yield ID` may name: one in the list that may lead and is not this one.
fn yield_target(cfg: &Config, id: u64) -> Result<u16, String> {
    let Some(s) = u16::try_from(id).ok().and_then(|i| cfg.server(i)) else {
        return Err(format!("yield: no server {id} in the server list"));
    };
    if s.id == cfg.id {
        return Err(format!("yield: server {id} is this server; name another"));
    }
    if s.witness {
        return Err(format!("yield: server {id} is a witness and never leads"));
    }
    Ok(s.id)
}

/// Binds `metrics-listen` (None: off) and registers it under `HTTP`.
fn bind_metrics(
    addr: Option<std::net::SocketAddr>,
    reg: &mio::Registry,
) -> Result<Option<Http>, String> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let mut h = Http::bind(addr, HTTP.0)
        .map_err(|e| format!("metrics-listen {addr}: cannot listen: {e}"))?;
    h.register(reg, HTTP)
        .map_err(|e| format!("metrics-listen {addr}: poll register: {e}"))?;
    info!("metrics on http://{}/metrics", h.addr());
    Ok(Some(h))
}

/// The signals the daemon takes through its signalfd.
const SIGNALS_HANDLED: [i32; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGCHLD];

fn handled_mask() -> libc::sigset_t {
    // SAFETY: sigemptyset and sigaddset initialise and fill a sigset we own.
    unsafe {
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut mask);
        for s in SIGNALS_HANDLED {
            libc::sigaddset(&mut mask, s);
        }
        mask
    }
}

fn set_handled(how: libc::c_int) -> io::Result<()> {
    let mask = handled_mask();
    // SAFETY: the mask applies to the calling thread; threads started later inherit it.
    let rc = unsafe { libc::pthread_sigmask(how, &mask, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Blocks SIGTERM, SIGINT, SIGHUP and SIGCHLD. `electd` calls it first thing in main,
/// before reading the configuration, binding or loading the state: a signal that
/// arrives meanwhile (`systemctl reload` racing the start) stays pending instead of
/// killing the daemon, and the signalfd reports it once the loop runs (SIGHUP then
/// reloads, SIGTERM stops cleanly). Children get an empty mask (std resets it).
pub fn block_signals() -> io::Result<()> {
    set_handled(libc::SIG_BLOCK)
}

/// Undoes [`block_signals`], for a run that ends without the loop (`--check-config`):
/// an ordinary short command that SIGTERM or Ctrl-C must stop.
pub fn unblock_signals() -> io::Result<()> {
    set_handled(libc::SIG_UNBLOCK)
}

/// Blocks the handled signals (again: [`block_signals`] normally did already) and
/// returns a signalfd that reports them, pending ones included.
fn signal_fd() -> io::Result<i32> {
    block_signals()?;
    let mask = handled_mask();
    // SAFETY: signalfd reads the mask we own and returns a new descriptor or -1.
    unsafe {
        let fd = libc::signalfd(-1, &mask, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(fd)
    }
}

fn read_signals(fd: i32) -> Vec<i32> {
    let mut out = Vec::new();
    loop {
        // SAFETY: signalfd_siginfo is plain data; read fills at most one of them.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        let n = unsafe { libc::read(fd, (&mut info as *mut libc::signalfd_siginfo).cast(), size) };
        if n as usize != size {
            break;
        }
        out.push(info.ssi_signo as i32);
    }
    out
}

/// What applications see; a change is reported to watchers and logged.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct View {
    role: Role,
    leader: Option<u16>,
    term: u64,
    /// The end of this server's lease: watchers see each renewal, so a process on this
    /// host knows exactly until when this server may act as leader.
    lease_until: Option<Time>,
    /// `ok`, `failing` or `unknown` (SPEC section 13).
    health: Verdict,
    /// `electctl drain`.
    drained: bool,
}

/// Counters for `metrics` beyond the core's.
#[derive(Debug, Default)]
struct Metrics {
    received: [u64; 5],
    sent: [u64; 5],
    sent_bytes: u64,
    received_bytes: u64,
    dropped: BTreeMap<&'static str, u64>,
    send_errors: u64,
    state_writes: u64,
    role_changes: u64,
    /// Planned handoffs begun.
    handoffs: u64,
    /// Planned handoffs whose RESIGN waited for supervisors (not sent at once).
    handoffs_waited: u64,
    /// How long the last handoff's RESIGN waited, in ms.
    last_handoff_wait_ms: u64,
    /// Changes of `health` (ok, failing, unknown).
    health_changes: u64,
}

/// A planned handoff under way: when it began and why its RESIGN left.
#[derive(Copy, Clone, Debug)]
struct Handoff {
    term: u64,
    began: Time,
    until: Time,
    /// Set when the daemon released the RESIGN: every supervisor had confirmed.
    released: Option<&'static str>,
}

/// Why the daemon stopped abnormally.
#[derive(Debug)]
pub struct Fatal(pub String);

impl std::fmt::Display for Fatal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The running daemon.
pub struct Daemon {
    cfg: Config,
    id_override: Option<u16>,
    cli_log_level: Option<log::LevelFilter>,
    poll: Poll,
    node: Node,
    transport: Transport,
    control: Control,
    store: Store,
    signals: i32,
    metrics: Metrics,
    view: View,
    /// Rate limit of warnings per (sender, reason): one a minute.
    warned: HashMap<(u16, &'static str), Instant>,
    last_debug_drop: Option<Instant>,
    udp_more: [bool; 2],
    /// SIGTERM or SIGINT: the latest moment to exit (boot clock), after the RESIGN.
    stopping: Option<Time>,
    handoff: Option<Handoff>,
    started: Instant,
    notifier: Notifier,
    next_watchdog: Option<Instant>,
    hooks: Hooks,
    keys: Option<Keys>,
    replay: ReplayWindow,
    durable: Durable,
    extra: Extra,
    send_seq: u32,
    checks: Checks,
    /// The health the core was last told of (the view's may change first).
    health: Verdict,
    /// The successor named by the latest handover begun (for the answer to `drain`).
    last_handover_to: Option<u16>,
    /// Why the last reload (SIGHUP or `reload`) was refused; None once one succeeds.
    /// The refused file is still on disk: the next restart would load it.
    config_refused: Option<String>,
    /// `metrics-listen`: Prometheus over HTTP (SPEC section 16), if configured.
    http: Option<Http>,
}

impl Daemon {
    /// Loads the state, binds every socket and builds the core. Nothing runs yet.
    pub fn start(
        cfg: Config,
        id_override: Option<u16>,
        cli_log_level: Option<log::LevelFilter>,
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
                    .map_err(|e| Fatal(format!("cannot create {}: {e}", dir.display())))?;
            }
        }
        let mut store = Store::new(&cfg.state);
        store.lock().map_err(|e| Fatal(e.to_string()))?;
        let (durable, mut extra) = store.load().map_err(|e| Fatal(e.to_string()))?;
        let keys = auth::load_keys(cfg.key_file.as_deref(), cfg.key_file_next.as_deref())
            .map_err(Fatal)?;
        // A new boot number, on disk before anything is sent: counters never repeat.
        extra.boot = extra
            .boot
            .checked_add(1)
            .ok_or_else(|| Fatal("boot counter exhausted".into()))?;
        store
            .save(&durable, &extra)
            .map_err(|e| Fatal(e.to_string()))?;
        let mut replay = ReplayWindow::default();
        for (&id, &boot) in &extra.peer_boots {
            replay.floor(id, boot);
        }
        // Host names are resolved here, once (SPEC section 16); a reload never does.
        let addrs = cfg.resolve().map_err(|e| Fatal(e.to_string()))?;
        let mut transport =
            Transport::open(&cfg, &addrs).map_err(|e| Fatal(format!("UDP: {e}")))?;
        let mut control = Control::bind(&cfg.socket, cfg.socket_mode, CONTROL.0)
            .map_err(|e| Fatal(format!("control socket: {e}")))?;
        let signals = signal_fd().map_err(|e| Fatal(format!("signals: {e}")))?;
        let poll = Poll::new().map_err(|e| Fatal(format!("poll: {e}")))?;
        let reg = poll.registry();
        let fail = |e: io::Error| Fatal(format!("poll register: {e}"));
        reg.register(&mut transport.unicast, UDP_UNICAST, Interest::READABLE)
            .map_err(fail)?;
        if let Some(g) = transport.group.as_mut() {
            reg.register(g, UDP_GROUP, Interest::READABLE)
                .map_err(fail)?;
        }
        reg.register(&mut SourceFd(&signals), SIGNALS, Interest::READABLE)
            .map_err(fail)?;
        control.register(reg, CONTROL).map_err(fail)?;
        let http = bind_metrics(cfg.metrics_listen, reg).map_err(Fatal)?;
        let now = boot_now();
        let mut node_cfg = cfg.node_config(random_seed());
        node_cfg.sabotage = sabotage_from_env().map_err(Fatal)?;
        if node_cfg.sabotage.resign_early {
            warn!(
                "{SABOTAGE_VAR}=resign_early: this daemon is DELIBERATELY UNSAFE: a planned handoff releases the followers before local commands have stopped (for tests only)"
            );
        }
        let mut node = Node::new(node_cfg, durable, now).map_err(|e| Fatal(e.to_string()))?;
        if cfg.check.is_some() {
            // SPEC section 13: a server with a check starts unhealthy.
            node.set_health(now, false);
        }
        for w in cfg.warnings() {
            warn!("{w}");
        }
        let waker = mio::Waker::new(poll.registry(), HEALTH)
            .map_err(|e| Fatal(format!("poll waker: {e}")))?;
        // After signal_fd: the runner thread inherits the mask, so signals still reach
        // the signalfd and never the thread.
        let checks = Checks::start(cfg.check.as_ref(), Arc::new(waker), cfg.id)
            .map_err(|e| Fatal(format!("check runner: {e}")))?;
        info!(
            "electd {} started: server {} ({}) of cluster '{}', {} servers, {}, term {}, state {}",
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
            durable.term,
            cfg.state.display()
        );
        if node.drained() {
            warn!("this server is drained (state file): it will not lead until 'electctl undrain'");
        }
        if let Some(c) = &cfg.check {
            info!(
                "health check: {} every {:?} (timeout {:?}, fall {}, rise {}); unhealthy until it passes",
                c.argv.join(" "),
                c.interval,
                c.timeout,
                c.fall,
                c.rise
            );
        }
        let view = View {
            role: Role::Follower,
            leader: None,
            term: durable.term,
            lease_until: None,
            health: checks.verdict(),
            drained: node.drained(),
        };
        let notifier = Notifier::from_env().map_err(|e| Fatal(format!("NOTIFY_SOCKET: {e}")))?;
        let hooks = Hooks::new(
            cfg.id,
            cfg.on_leader.clone(),
            cfg.on_follower.clone(),
            cfg.hook_timeout,
        );
        Ok(Daemon {
            cfg,
            id_override,
            cli_log_level,
            poll,
            node,
            transport,
            control,
            store,
            signals,
            metrics: Metrics::default(),
            view,
            warned: HashMap::new(),
            last_debug_drop: None,
            udp_more: [false; 2],
            stopping: None,
            handoff: None,
            started: Instant::now(),
            next_watchdog: notifier.watchdog_interval().map(|i| Instant::now() + i),
            notifier,
            hooks,
            keys,
            replay,
            durable,
            extra,
            send_seq: 0,
            health: checks.verdict(),
            checks,
            last_handover_to: None,
            config_refused: None,
            http,
        })
    }

    /// Runs until SIGTERM or SIGINT (after resigning) or a fatal error.
    pub fn run(&mut self) -> Result<(), Fatal> {
        let mut events = Events::with_capacity(256);
        // Sockets are bound and the state is loaded: systemd may start what depends on us.
        self.notifier.send("READY=1");
        self.notifier.send(&self.status_text());
        loop {
            let now = boot_now();
            let busy = self.udp_more.iter().any(|&m| m)
                || self.control.has_more()
                || self.http.as_ref().is_some_and(Http::has_more);
            let mut deadline = self.node.next_deadline();
            if self.node.resign_pending() {
                // A supervisor that left unconfirmed may hold a lease shorter than ours.
                let departed = Time(self.control.departed_until_ns(0));
                if departed > now {
                    deadline = deadline.min(departed);
                }
            }
            if let Some(bound) = self.stopping {
                deadline = deadline.min(bound);
            }
            let mut timeout = deadline.saturating_since(now).min(MAX_WAIT);
            let instant = Instant::now();
            for d in [self.hooks.deadline(), self.next_watchdog]
                .into_iter()
                .flatten()
            {
                timeout = timeout.min(d.saturating_duration_since(instant));
            }
            if busy {
                timeout = Duration::ZERO;
            }
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Fatal(format!("poll: {e}")));
            }
            for ev in events.iter() {
                match ev.token() {
                    UDP_UNICAST => self.read_udp(0)?,
                    UDP_GROUP => self.read_udp(1)?,
                    SIGNALS => self.on_signals()?,
                    CONTROL => self.control.accept(self.poll.registry(), Instant::now()),
                    // Results are taken below, every wakeup.
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
            for which in 0..2 {
                if self.udp_more[which]
                    && !events
                        .iter()
                        .any(|e| e.token() == [UDP_UNICAST, UDP_GROUP][which])
                {
                    self.read_udp(which)?;
                }
            }
            self.node.handle_timeout(boot_now());
            self.flush_node()?;
            // Bounded: the rest stays buffered for the next wakeup (finding 7).
            for (slot, req) in self.control.take_requests(Instant::now()) {
                self.answer(slot, req)?;
                // Heartbeats first: a LEAD due while answering leaves before the next.
                self.node.handle_timeout(boot_now());
                self.flush_node()?;
            }
            self.serve_http()?;
            self.check_release()?;
            self.checks.drain();
            self.update_health()?;
            self.control.flush(self.poll.registry(), Instant::now());
            if let Some(h) = self.http.as_mut() {
                h.flush(self.poll.registry(), Instant::now());
            }
            // A supervisor freed by the flush takes its health report with it.
            if self.update_health()? {
                self.control.flush(self.poll.registry(), Instant::now());
            }
            self.hooks.poll(Instant::now());
            if let Some(next) = self.next_watchdog {
                // Sent from the loop itself: a wedged loop stops petting, and systemd acts.
                if Instant::now() >= next {
                    self.notifier.send("WATCHDOG=1");
                    let interval = self.notifier.watchdog_interval().unwrap_or(MAX_WAIT);
                    self.next_watchdog = Some(Instant::now() + interval);
                }
            }
            if let Some(bound) = self.stopping {
                // Never before the RESIGN; at the latest the lease end plus a heartbeat.
                let now = boot_now();
                if self.node.resign_complete() {
                    info!("stopped");
                    return Ok(());
                }
                if now >= bound && !self.node.resign_pending() {
                    warn!("stopped before the second RESIGN left");
                    return Ok(());
                }
            }
        }
    }

    /// This server's health: the check's verdict and every supervisor's report. Cheap:
    /// it runs at every wakeup.
    fn verdict(&self) -> Verdict {
        if self.control.unhealthy_supervisors(0).next().is_some() {
            Verdict::Failing
        } else {
            self.checks.verdict()
        }
    }

    /// The verdict with the causes of anything but `ok`.
    fn health(&self) -> (Verdict, Option<String>) {
        let mut causes: Vec<String> = self.checks.cause().into_iter().collect();
        let mut v = self.checks.verdict();
        for (slot, why) in self.control.unhealthy_supervisors(0) {
            v = Verdict::Failing;
            causes.push(format!("electctl run on control client {slot}: {why}"));
        }
        (v, (!causes.is_empty()).then(|| causes.join("; ")))
    }

    /// Tells the core when the combined health changes, and logs it with its cause.
    /// Returns true on a change.
    fn update_health(&mut self) -> Result<bool, Fatal> {
        self.checks.set_leader(self.view.role == Role::Leader);
        if self.verdict() == self.health {
            return Ok(false);
        }
        let (v, cause) = self.health();
        let was = std::mem::replace(&mut self.health, v);
        self.metrics.health_changes += 1;
        let cause = cause.unwrap_or_default();
        match v {
            Verdict::Ok => info!("health ok (was {}): this server may lead", was.name()),
            Verdict::Failing if self.node.leads().is_some() => warn!(
                "health failing: {cause}; this leader hands over as soon as another server is known fit, and leads on meanwhile"
            ),
            Verdict::Failing => warn!("health failing: {cause}; this server may not lead"),
            Verdict::Unknown => info!("health unknown: {cause}"),
        }
        let healthy = v == Verdict::Ok;
        if healthy != self.node.healthy() {
            self.node.set_health(boot_now(), healthy);
        }
        // The view's health changes here, even when the core's bool does not.
        self.flush_node()?;
        Ok(true)
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
            self.node.handle_timeout(boot_now());
            self.flush_node()?;
        }
        Ok(())
    }

    /// During a planned handoff: releases the RESIGN once every supervisor is clear.
    fn check_release(&mut self) -> Result<(), Fatal> {
        if !self.node.resign_pending() || !self.control.supervisors_clear(0, boot_now().as_nanos())
        {
            return Ok(());
        }
        if let Some(h) = self.handoff.as_mut() {
            h.released = Some(if self.control.departed_until_ns(0) > h.began.as_nanos() {
                "every supervisor confirmed, and the lease known to a departed one ended"
            } else {
                "every supervisor confirmed"
            });
        }
        self.node.handle_released(boot_now());
        self.flush_node()
    }

    fn read_udp(&mut self, which: usize) -> Result<(), Fatal> {
        let mut buf = [0u8; RECV_BUF];
        self.udp_more[which] = true;
        for _ in 0..UDP_BUDGET {
            let sock = if which == 0 {
                Some(&self.transport.unicast)
            } else {
                self.transport.group.as_ref()
            };
            let Some(sock) = sock else { break };
            match sock.recv_from(&mut buf) {
                Ok((n, src)) => {
                    self.on_datagram(&buf[..n], src);
                    self.flush_node()?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.udp_more[which] = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // ICMP errors from earlier sends surface here; they are not fatal.
                    debug!("UDP receive: {e}");
                }
            }
        }
        Ok(())
    }

    fn drop_datagram(&mut self, reason: &'static str, detail: std::fmt::Arguments<'_>) {
        *self.metrics.dropped.entry(reason).or_insert(0) += 1;
        let now = Instant::now();
        if self
            .last_debug_drop
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            self.last_debug_drop = Some(now);
            debug!("dropped datagram ({reason}): {detail}");
        }
    }

    fn on_datagram(&mut self, bytes: &[u8], src: std::net::SocketAddr) {
        self.metrics.received_bytes += bytes.len() as u64;
        let decoded = match &self.keys {
            Some(k) => wire::decode_any(bytes, Some(&k.verifiers()), GROUPS),
            None => wire::decode_any(bytes, None, GROUPS),
        };
        let bundle = match decoded {
            Ok(b) => b,
            Err(e) => return self.drop_datagram(e.reason(), format_args!("{e} from {src}")),
        };
        if matches!(self.cfg.transport, Mode::Unicast) {
            let expected = self.transport.peer_addr(bundle.sender);
            if expected.is_some() && expected != Some(src) {
                return self.drop_datagram(
                    "source_mismatch",
                    format_args!("server {} sent from {src}", bundle.sender),
                );
            }
        }
        if let Some(counter) = bundle.counter.filter(|_| bundle.sender != self.cfg.id) {
            if !self.replay.accept(bundle.sender, counter) {
                return self.drop_datagram(
                    "replay",
                    format_args!("server {} counter {counter:#x} not new", bundle.sender),
                );
            }
            self.note_peer_boot(bundle.sender, (counter >> 32) as u32);
        }
        for e in &bundle.entries {
            self.on_message(&e.msg, src);
        }
    }

    /// One message of an accepted datagram, for the core.
    fn on_message(&mut self, msg: &wire::Message, src: std::net::SocketAddr) {
        let msg = *msg;
        match self.node.handle_datagram(boot_now(), &msg) {
            Ok(()) => self.metrics.received[msg.body.kind() as usize] += 1,
            Err(Reject::OwnEcho) => {
                *self.metrics.dropped.entry("own_echo").or_insert(0) += 1;
            }
            Err(Reject::Fingerprint) => {
                *self.metrics.dropped.entry("fingerprint").or_insert(0) += 1;
                if self.may_warn(msg.sender, "fingerprint") {
                    warn!(
                        "server {} runs with a different server list (fingerprint {:08x}, ours {:08x})",
                        msg.sender,
                        msg.fingerprint,
                        self.cfg.fingerprint()
                    );
                }
            }
            Err(r @ (Reject::TermLimit | Reject::HoldLimit)) => {
                // SPEC section 8: refused so one datagram cannot wedge the cluster; an
                // operator must hear of it (a bug or an attack), once a minute per sender.
                self.drop_datagram(r.reason(), format_args!("sender {} from {src}", msg.sender));
                if self.may_warn(msg.sender, r.reason()) {
                    warn!("{}", self.limit_warning(r, &msg));
                }
            }
            Err(r) => {
                self.drop_datagram(r.reason(), format_args!("sender {} from {src}", msg.sender))
            }
        }
    }

    /// True at most once a minute per (sender, reason): rate limit of warnings.
    fn may_warn(&mut self, sender: u16, reason: &'static str) -> bool {
        let now = Instant::now();
        let key = (sender, reason);
        let due = self
            .warned
            .get(&key)
            .is_none_or(|t| now.duration_since(*t) >= Duration::from_secs(60));
        if due && (self.warned.len() < 1024 || self.warned.contains_key(&key)) {
            self.warned.insert(key, now);
            return true;
        }
        false
    }

    /// "server 3 sent a LEAD with hold 4294967295 ms above max-hold 60000 ms: dropped".
    fn limit_warning(&self, r: Reject, msg: &wire::Message) -> String {
        let kind = msg.body.kind().name();
        match (r, msg.body) {
            (Reject::HoldLimit, wire::Body::Lead { hold_ms, .. }) => format!(
                "server {} sent a {kind} with hold {hold_ms} ms above max-hold {} ms: dropped",
                msg.sender,
                self.cfg.max_hold.as_millis()
            ),
            (_, wire::Body::Elect { last_term, .. }) => format!(
                "server {} sent an {kind} with term {} and last term {last_term}, at or above 2^62 or more than 2^40 above our term {}: dropped",
                msg.sender,
                msg.term,
                self.node.term()
            ),
            _ => format!(
                "server {} sent a {kind} with term {}, at or above 2^62 or more than 2^40 above our term {}: dropped",
                msg.sender,
                msg.term,
                self.node.term()
            ),
        }
    }

    /// Remembers a peer's newest boot on disk, so its earlier boots stay refused across
    /// our restarts. Rare: once per restart of a peer.
    fn note_peer_boot(&mut self, peer: u16, boot: u32) {
        if self.extra.peer_boots.get(&peer).is_none_or(|&b| boot > b)
            && self.extra.peer_boots.len() < 256
        {
            self.extra.peer_boots.insert(peer, boot);
            if let Err(e) = self.store.save(&self.durable, &self.extra) {
                warn!("cannot record server {peer}'s boot {boot}: {e}");
            }
        }
    }

    /// The next counter of a keyed datagram: boot number, then a sequence within it.
    fn next_counter(&mut self) -> Result<u64, Fatal> {
        self.send_seq = self.send_seq.wrapping_add(1);
        if self.send_seq == 0 {
            // 2^32 datagrams in one boot: take a new boot number, on disk first.
            self.extra.boot = self
                .extra
                .boot
                .checked_add(1)
                .ok_or_else(|| Fatal("boot counter exhausted".into()))?;
            self.store
                .save(&self.durable, &self.extra)
                .map_err(|e| Fatal(format!("cannot write the state: {e}")))?;
            self.send_seq = 1;
        }
        Ok(u64::from(self.extra.boot) << 32 | u64::from(self.send_seq))
    }

    /// Drains the core: sends, durable writes (confirmed before what follows), events.
    fn flush_node(&mut self) -> Result<(), Fatal> {
        while let Some(out) = self.node.poll_output() {
            match out {
                Output::Send { dest, msg } => {
                    // A bundle of one entry: with one election group, a flush seldom
                    // holds two messages for one destination.
                    let entry = [wire::Entry { group: 0, msg }];
                    let mut bytes = Vec::with_capacity(wire::MAX_BUNDLE_LEN);
                    match self.keys.clone() {
                        Some(k) => {
                            let counter = self.next_counter()?;
                            wire::encode_bundle(
                                msg.sender,
                                msg.fingerprint,
                                &entry,
                                Some((counter, &k.current)),
                                &mut bytes,
                            )
                        }
                        None => wire::encode_bundle(
                            msg.sender,
                            msg.fingerprint,
                            &entry,
                            None,
                            &mut bytes,
                        ),
                    };
                    let (sent, errors) = self.transport.send(dest, &bytes);
                    self.metrics.sent[msg.body.kind() as usize] += sent;
                    self.metrics.sent_bytes += sent * bytes.len() as u64;
                    for (to, e) in errors {
                        self.metrics.send_errors += 1;
                        debug!("send {} to {to}: {e}", msg.body.kind().name());
                    }
                }
                Output::Persist(state) => {
                    // Nothing that depends on this state may leave before it is on disk;
                    // if it cannot be written, stopping is the only safe answer.
                    self.store
                        .save(&state, &self.extra)
                        .map_err(|e| Fatal(format!("cannot write the state: {e}")))?;
                    self.durable = state;
                    self.metrics.state_writes += 1;
                    self.node.handle_persisted(boot_now(), state);
                }
                Output::Event(e) => match e {
                    Event::DualLeader { term, other } => {
                        error!("server {other} also led term {term}")
                    }
                    Event::Elected { term } => debug!("won the round of term {term}"),
                    Event::Resigning {
                        term,
                        until,
                        to,
                        reason,
                    } => self.on_resigning(term, until, to, reason),
                    Event::Resigned { term } => self.on_resigned(term),
                    Event::Voted { .. } | Event::SteppedDown { .. } => {}
                },
            }
        }
        self.report_changes();
        Ok(())
    }

    fn report_changes(&mut self) {
        let st = self.node.status(boot_now());
        let view = View {
            role: st.role,
            leader: st.leader,
            term: st.term,
            lease_until: st.lease_until,
            health: self.verdict(),
            drained: self.node.drained(),
        };
        if view == self.view {
            return;
        }
        let changed = (view.role, view.leader, view.term, view.health, view.drained)
            != (
                self.view.role,
                self.view.leader,
                self.view.term,
                self.view.health,
                self.view.drained,
            );
        if view.role != self.view.role {
            self.hooks
                .transition(view.role, view.leader, view.term, view.health.name());
        }
        if view.role != self.view.role || view.leader != self.view.leader {
            self.metrics.role_changes += 1;
            let leader = view.leader.map_or("none".to_string(), |l| {
                format!("{l} ({})", self.cfg.name_of(l))
            });
            info!(
                "role {}, term {}, leader {leader}",
                view.role.name(),
                view.term
            );
        }
        self.view = view;
        let line = self.status_line();
        self.control.broadcast(Scope::Group(0), &line);
        let (fields, until) = self.supervisor_fields();
        self.control.push_supervisors(0, &fields, until);
        if changed {
            self.notifier.send(&self.status_text());
        }
    }

    /// A planned handoff began: supervisors are told by the follower line pushed next;
    /// with none engaged the RESIGN leaves at once.
    fn on_resigning(&mut self, term: u64, until: Time, to: Option<u16>, reason: Handover) {
        let now = boot_now();
        self.metrics.handoffs += 1;
        self.last_handover_to = to;
        info!(
            "handoff of term {term} begins ({}){}",
            reason.name(),
            to.map_or(String::new(), |t| format!(
                ": the RESIGN names server {t} ({}) as successor",
                self.cfg.name_of(t)
            ))
        );
        let mut h = Handoff {
            term,
            began: now,
            until,
            released: None,
        };
        if self.control.supervisors_clear(0, now.as_nanos()) {
            h.released = Some("no supervisor held the lease");
            self.handoff = Some(h);
            self.node.handle_released(now);
        } else {
            info!(
                "handoff of term {term}: waiting for {} supervisor(s) to stop their commands, {} ms at most",
                self.control.supervisors(0),
                until.saturating_since(now).as_millis()
            );
            self.handoff = Some(h);
        }
    }

    /// The RESIGN left: logs how long it waited and why it ended.
    fn on_resigned(&mut self, term: u64) {
        let now = boot_now();
        let Some(h) = self.handoff.take().filter(|h| h.term == term) else {
            return;
        };
        let waited = now.saturating_since(h.began);
        let why = h.released.unwrap_or(if now >= h.until {
            "lease end: not every supervisor confirmed"
        } else {
            "sent without waiting"
        });
        if !matches!(why, "no supervisor held the lease" | "sent without waiting") {
            self.metrics.handoffs_waited += 1;
        }
        self.metrics.last_handoff_wait_ms = waited.as_millis() as u64;
        info!(
            "handoff of term {term}: RESIGN after {:.1} ms ({why})",
            waited.as_secs_f64() * 1e3
        );
    }

    /// The members of a supervisor line (without `n`, added per connection) and the
    /// lease end when this server leads. Durations in ns so `run` can check its options
    /// exactly; `lease_until_ns` and `now_ns` on CLOCK_BOOTTIME.
    fn supervisor_fields(&self) -> (String, Option<u64>) {
        let now = boot_now();
        let st = self.node.status(now);
        let until = st.lease_until.map(Time::as_nanos);
        let fields = format!(
            "\"id\":{},\"role\":\"{}\",\"leader\":{},\"term\":{},\"lease_until_ns\":{},\"now_ns\":{},\"lease_len_ns\":{},\"heartbeat_ns\":{},\"rtt_ns\":{},\"resigning\":{}",
            self.cfg.id,
            st.role.name(),
            st.leader.map_or("null".into(), |l| l.to_string()),
            st.term,
            until.map_or("null".into(), |u| u.to_string()),
            now.as_nanos(),
            crate::time::duration_nanos(self.node.lease_len()),
            crate::time::duration_nanos(self.node.heartbeat()),
            crate::time::duration_nanos(self.cfg.rtt),
            self.node.resign_pending()
        );
        (fields, until)
    }

    /// The STATUS= line for systemd: role, leader and term.
    fn status_text(&self) -> String {
        let v = self.view;
        let mut s = match (v.role, v.leader) {
            (Role::Leader, _) => format!("STATUS=leader, term {}", v.term),
            (Role::Follower, Some(l)) => format!(
                "STATUS=follower, leader {l} ({}), term {}",
                self.cfg.name_of(l),
                v.term
            ),
            (Role::Follower, None) => format!("STATUS=follower, no leader, term {}", v.term),
        };
        if v.health != Verdict::Ok {
            s.push_str(&format!(", health {}", v.health.name()));
        }
        if v.drained {
            s.push_str(", drained");
        }
        if let Some(why) = &self.config_refused {
            // The operator must know the file on disk is not what runs.
            write!(
                s,
                "; reload refused: {}; running the previous configuration, a restart would load the refused file",
                one_line(why, MAX_REFUSAL_STATUS)
            )
            .expect("write to String");
        }
        s
    }

    fn status_line(&self) -> String {
        let now = boot_now();
        let st = self.node.status(now);
        let mut s = format!(
            "{{\"id\":{},\"name\":{},\"role\":\"{}\",\"leader\":{},\"term\":{},",
            self.cfg.id,
            json_str(&self.cfg.name_of(self.cfg.id)),
            st.role.name(),
            st.leader.map_or("null".into(), |l| l.to_string()),
            st.term
        );
        match st.lease_until {
            Some(u) => write!(
                s,
                "\"lease_ms\":{},\"lease_until_ns\":{},",
                u.saturating_since(now).as_millis(),
                u.as_nanos()
            ),
            None => write!(s, "\"lease_ms\":null,\"lease_until_ns\":null,"),
        }
        .expect("write to String");
        let (health, cause) = self.health();
        write!(
            s,
            "\"elector\":\"{}\",\"voted_term\":{},\"healthy\":{},\"drained\":{},\"health\":\"{}\",\"health_cause\":{},\"config_refused\":{},\"now_ns\":{},\"peers\":[",
            st.elector.name(),
            st.voted_term,
            self.node.healthy(),
            self.node.drained(),
            health.name(),
            cause.as_deref().map_or("null".into(), json_str),
            self.config_refused.as_deref().map_or("null".into(), json_str),
            now.as_nanos()
        )
        .expect("write to String");
        for (i, (id, heard)) in self.node.peers().enumerate() {
            let ago = heard.map_or("null".into(), |t| {
                now.saturating_since(t).as_millis().to_string()
            });
            let fit = self
                .node
                .peer_fit(now, id)
                .map_or("null".into(), |f| f.to_string());
            write!(
                s,
                "{}{{\"id\":{id},\"heard_ms_ago\":{ago},\"healthy\":{fit}}}",
                if i > 0 { "," } else { "" }
            )
            .expect("write to String");
        }
        s.push_str("]}\n");
        s
    }

    fn metrics_text(&self) -> String {
        let now = boot_now();
        let st = self.node.status(now);
        let c = self.node.counters();
        let m = &self.metrics;
        let mut s = String::new();
        // Prometheus text format 0.0.4 (what Prometheus scrapes and `promtool check
        // metrics` parses): a counter's family is named with its _total suffix, like
        // its sample, and units are base units. The final `# EOF`, a comment in that
        // format, ends the answer on the control socket.
        let mut family = |kind: &str, name: &str, help: &str, v: String| {
            let total = if kind == "counter" { "_total" } else { "" };
            let _ = writeln!(
                s,
                "# HELP electd_{name}{total} {help}\n# TYPE electd_{name}{total} {kind}\nelectd_{name}{total} {v}"
            );
        };
        family(
            "gauge",
            "is_leader",
            "1 while this server holds a valid lease.",
            u8::from(st.role == Role::Leader).to_string(),
        );
        family("gauge", "term", "Highest term seen.", st.term.to_string());
        family(
            "gauge",
            "leader_id",
            "Known leader id, 0 if none.",
            st.leader.unwrap_or(0).to_string(),
        );
        family(
            "gauge",
            "voted_term",
            "Highest term voted in.",
            st.voted_term.to_string(),
        );
        family(
            "gauge",
            "control_clients",
            "Connected control socket clients.",
            self.control.clients().to_string(),
        );
        family(
            "gauge",
            "control_watchers",
            "Control socket clients watching.",
            self.control.watchers().to_string(),
        );
        family(
            "gauge",
            "uptime_seconds",
            "Seconds since start.",
            format!("{:.3}", self.started.elapsed().as_secs_f64()),
        );
        family(
            "counter",
            "leader_changes",
            "Changes of the known leader (as seen here).",
            c.leader_changes.to_string(),
        );
        family(
            "counter",
            "role_changes",
            "Changes of the reported role or leader.",
            m.role_changes.to_string(),
        );
        family(
            "counter",
            "elections",
            "Election rounds this server took part in.",
            c.rounds.to_string(),
        );
        family("counter", "votes", "Votes cast.", c.votes.to_string());
        family(
            "counter",
            "elected",
            "Rounds won (including re-elections).",
            c.elected.to_string(),
        );
        family(
            "counter",
            "dual_leader",
            "LEADs from another leader of our own term (must stay 0).",
            c.dual_leader.to_string(),
        );
        family(
            "gauge",
            "supervisors",
            "Supervisors (electctl run) registered on the control socket.",
            self.control.supervisors(0).to_string(),
        );
        family(
            "counter",
            "handoffs",
            "Planned handoffs begun (yield, SIGTERM, health, drain, preempt).",
            m.handoffs.to_string(),
        );
        family(
            "counter",
            "handoffs_waited",
            "Planned handoffs whose RESIGN waited for supervisors to stop their commands.",
            m.handoffs_waited.to_string(),
        );
        family(
            "gauge",
            "handoff_last_wait_seconds",
            "How long the last planned handoff's RESIGN waited, in seconds.",
            format!("{:.3}", m.last_handoff_wait_ms as f64 / 1e3),
        );
        family(
            "gauge",
            "healthy",
            "1 while this server is healthy (its check passes and no supervisor reports failing).",
            u8::from(self.node.healthy()).to_string(),
        );
        family(
            "gauge",
            "drained",
            "1 while this server is drained (electctl drain).",
            u8::from(self.node.drained()).to_string(),
        );
        family(
            "gauge",
            "config_refused",
            "1 while the last reload was refused: the running configuration is not the file's, and a restart would load the file.",
            u8::from(self.config_refused.is_some()).to_string(),
        );
        family(
            "counter",
            "health_changes",
            "Changes of health (ok, failing, unknown).",
            self.metrics.health_changes.to_string(),
        );
        family(
            "counter",
            "check_runs",
            "Health check runs finished.",
            self.checks.counters.runs.to_string(),
        );
        family(
            "counter",
            "successor_votes",
            "Rounds in which this server voted for the successor a RESIGN named.",
            c.successor_votes.to_string(),
        );
        family(
            "counter",
            "supervisors_departed_unconfirmed",
            "Supervisors that left without confirming the end of a lease they were told of.",
            self.control.counters.departed_unconfirmed.to_string(),
        );
        family(
            "counter",
            "state_writes",
            "Durable writes of the state file.",
            m.state_writes.to_string(),
        );
        family(
            "counter",
            "send_errors",
            "Datagrams the kernel refused to send.",
            m.send_errors.to_string(),
        );
        family(
            "counter",
            "hook_runs",
            "Hooks started.",
            self.hooks.runs.to_string(),
        );
        family(
            "counter",
            "hook_failures",
            "Hooks that failed, timed out or could not start.",
            self.hooks.failures.to_string(),
        );
        family(
            "counter",
            "control_requests",
            "Control socket requests answered.",
            self.control.counters.requests.to_string(),
        );
        family(
            "counter",
            "control_dropped",
            "Control clients dropped (limits).",
            (self.control.counters.dropped + self.control.counters.refused).to_string(),
        );
        let kinds = [Kind::Lead, Kind::Elect, Kind::Vote, Kind::Ack];
        let by_kind = |counts: &[u64; 5]| {
            kinds
                .iter()
                .map(|&k| ("kind", k.name(), counts[k as usize]))
                .collect::<Vec<_>>()
        };
        let dropped: Vec<_> = m.dropped.iter().map(|(r, v)| ("reason", *r, *v)).collect();
        let check_failures: Vec<_> = REASONS
            .iter()
            .zip(self.checks.counters.failures)
            .map(|(r, v)| ("reason", *r, v))
            .collect();
        let handovers: Vec<_> = [
            Handover::Yield,
            Handover::Health,
            Handover::Drain,
            Handover::Preempt,
        ]
        .iter()
        .map(|&h| ("reason", h.name(), c.handovers[h as usize]))
        .collect();
        for (name, help, rows) in [
            (
                "datagrams_received",
                "Valid datagrams received, by kind.",
                by_kind(&m.received),
            ),
            (
                "datagrams_sent",
                "Datagrams sent, by kind.",
                by_kind(&m.sent),
            ),
            (
                "datagrams_dropped",
                "Datagrams dropped, by reason.",
                dropped,
            ),
            (
                "check_failures",
                "Health check runs that failed, by reason (exit: non-zero status; exec: could not run, or status 126 or 127; signal; timeout).",
                check_failures,
            ),
            (
                "handovers",
                "Handovers this leader began, by reason (yield includes SIGTERM).",
                handovers,
            ),
        ] {
            let _ = writeln!(
                s,
                "# HELP electd_{name}_total {help}\n# TYPE electd_{name}_total counter"
            );
            for (label, value, v) in rows {
                let _ = writeln!(s, "electd_{name}_total{{{label}=\"{value}\"}} {v}");
            }
        }
        s.push_str(
            "# HELP electd_bytes_total Datagram bytes sent and received.\n# TYPE electd_bytes_total counter\n",
        );
        let _ = writeln!(
            s,
            "electd_bytes_total{{direction=\"sent\"}} {}",
            m.sent_bytes
        );
        let _ = writeln!(
            s,
            "electd_bytes_total{{direction=\"received\"}} {}",
            m.received_bytes
        );
        s.push_str("# HELP electd_peer_last_heard_seconds Seconds since each peer was last heard (absent: never).\n# TYPE electd_peer_last_heard_seconds gauge\n");
        for (id, heard) in self.node.peers() {
            if let Some(t) = heard {
                let _ = writeln!(
                    s,
                    "electd_peer_last_heard_seconds{{peer=\"{id}\"}} {:.3}",
                    now.saturating_since(t).as_secs_f64()
                );
            }
        }
        if let Some(h) = &self.http {
            h.write_metrics(&mut s);
        }
        s.push_str("# EOF\n");
        s
    }

    fn answer(&mut self, slot: usize, req: Request) -> Result<(), Fatal> {
        let line = match req {
            Request::Supervise(g) => {
                if let Err(e) = self.group_index(g.as_deref()) {
                    self.control.reply(slot, &error_line(&e));
                    return Ok(());
                }
                if let Err(e) = self.control.supervise(slot, 0) {
                    self.control.reply(slot, &error_line(&e));
                    return Ok(());
                }
                let (fields, until) = self.supervisor_fields();
                self.control.push_supervisor(slot, &fields, until);
                return Ok(());
            }
            Request::Released(n) => match self.control.confirm(slot, n) {
                Ok(()) => return Ok(()),
                Err(e) => error_line(&e),
            },
            Request::Leave => {
                self.control.leave(slot);
                return Ok(());
            }
            Request::Invalid(e) => error_line(&e),
            Request::Status(g) => match self.group_index(g.as_deref()) {
                Ok(_) => self.status_line(),
                Err(e) => error_line(&e),
            },
            Request::Watch(g) => match self.group_index(g.as_deref()) {
                Ok(i) => {
                    self.control.watch(slot, Scope::Group(i));
                    self.status_line()
                }
                Err(e) => error_line(&e),
            },
            Request::Ping => "{\"ok\":true}\n".into(),
            Request::Reload => self.reload_request(slot),
            Request::Metrics => self.metrics_text(),
            Request::Elect(Some(g))
            | Request::Drain(Some(g))
            | Request::Undrain(Some(g))
            | Request::Yield(Some(g), _)
                if self.group_index(Some(&g)).is_err() =>
            {
                error_line(&self.group_index(Some(&g)).unwrap_err())
            }
            Request::Elect(_) => {
                info!("election requested on the control socket");
                self.node.handle_elect(boot_now());
                self.flush_node()?;
                "{\"ok\":true}\n".into()
            }
            Request::Yield(_, None) => {
                if self.node.handle_yield(boot_now()) {
                    info!("leadership yielded on request");
                    self.flush_node()?;
                    "{\"ok\":true}\n".into()
                } else {
                    error_line(NOT_LEADER)
                }
            }
            Request::Yield(_, Some(id)) => self.yield_to(id)?,
            Request::Drain(_) => self.drain(true)?,
            Request::Undrain(_) => self.drain(false)?,
            Request::Health(report) => match self.control.set_supervisor_health(slot, report) {
                // Like `released`: a supervisor's stream holds numbered lines only.
                Ok(()) => return Ok(()),
                Err(e) => error_line(&e),
            },
            Request::Unknown(w) => error_line(&format!(
                "unknown command '{w}' (status, watch, elect, yield [ID], drain, undrain, metrics, ping, reload; supervisors: supervise, released N, health, leave)"
            )),
        };
        self.control.reply(slot, &line);
        Ok(())
    }

    /// The index of the election group a request names (None: the default group).
    fn group_index(&self, name: Option<&str>) -> Result<usize, String> {
        match name {
            None | Some("default") => Ok(0),
            Some(g) => Err(format!("no group '{g}' (this server's groups: default)")),
        }
    }

    /// `yield ID`: hand over to server `id` (SPEC section 14). A number that names no
    /// server, this server or a witness is an error; a server not known fit still gets
    /// the handover named, and the answer says that voters may fall back.
    fn yield_to(&mut self, id: u64) -> Result<String, Fatal> {
        let to = match yield_target(&self.cfg, id) {
            Ok(to) => to,
            Err(e) => return Ok(error_line(&e)),
        };
        let now = boot_now();
        let fit = self.node.peer_fit(now, to);
        if !self.node.handle_yield_to(now, Some(to)) {
            return Ok(error_line(NOT_LEADER));
        }
        info!(
            "leadership yielded on request to server {to} ({})",
            self.cfg.name_of(to)
        );
        self.flush_node()?;
        let note = match fit {
            Some(true) => String::new(),
            Some(false) => format!(
                ",\"note\":{}",
                json_str(&format!(
                    "server {to} last reported itself unfit (unhealthy or drained): voters choose it only if it claims eligibly, otherwise the usual choice"
                ))
            ),
            None => format!(
                ",\"note\":{}",
                json_str(&format!(
                    "server {to} has not been heard recently: voters choose it only if it claims eligibly, otherwise the usual choice"
                ))
            ),
        };
        Ok(format!(
            "{{\"ok\":true,\"to\":{to},\"to_fit\":{}{note}}}\n",
            fit.map_or("null".into(), |f| f.to_string())
        ))
    }

    /// `drain` and `undrain` (SPEC section 13): answered once the state file holds the
    /// new value (`flush_node` writes it before returning). A drained leader hands over
    /// only when another server is known fit; until then it leads on, and says so.
    fn drain(&mut self, drain: bool) -> Result<String, Fatal> {
        let now = boot_now();
        let changed = self.node.drained() != drain;
        let handoffs = self.metrics.handoffs;
        if changed {
            self.node.set_drained(now, drain);
            self.flush_node()?;
            if drain {
                warn!("drained on request: this server will not lead until 'electctl undrain'");
            } else {
                info!("undrained on request: this server may lead again");
            }
        }
        let handover = if !drain {
            "null".to_string()
        } else if self.metrics.handoffs > handoffs {
            let to = self.last_handover_to;
            format!(
                "\"started\",\"to\":{}",
                to.map_or("null".into(), |t| t.to_string())
            )
        } else if self.node.resign_pending() {
            "\"started\"".into()
        } else if self.node.leads().is_some() {
            json_str(
                "waiting: no other fit server known; this server leads on and hands over as soon as one is",
            )
        } else {
            "null".into()
        };
        Ok(format!(
            "{{\"ok\":true,\"drained\":{},\"changed\":{changed},\"role\":\"{}\",\"handover\":{handover}}}\n",
            self.node.drained(),
            self.node.status(boot_now()).role.name()
        ))
    }

    fn on_signals(&mut self) -> Result<(), Fatal> {
        for sig in read_signals(self.signals) {
            match sig {
                // Logged, and kept for `status`, by reload itself.
                libc::SIGHUP => {
                    let _ = self.reload();
                }
                libc::SIGCHLD => self.hooks.poll(Instant::now()),
                _ if self.stopping.is_none() => {
                    info!("signal {sig}: stopping");
                    self.notifier.send("STOPPING=1");
                    let now = boot_now();
                    if self.node.handle_yield(now) {
                        info!("resigning leadership before exit");
                    }
                    self.flush_node()?;
                    // The same wait as `yield`: supervisors first, then the RESIGN; the
                    // exit comes at the lease end plus a heartbeat at the latest.
                    let until = self.handoff.map_or(now, |h| h.until.max(now));
                    self.stopping = Some(until + self.node.heartbeat());
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// SIGHUP and the socket's `reload` (SPEC section 12): re-reads the file and applies
    /// it, or refuses it whole and keeps the running configuration. Either way the
    /// outcome is logged (a refusal at error level) and shown in `status` and systemd's
    /// STATUS= until the next reload: a refused file stays on disk, and the next restart
    /// would load it.
    fn reload(&mut self) -> Result<(), String> {
        let outcome = self.try_reload();
        match &outcome {
            Ok(()) => {
                if self.config_refused.take().is_some() {
                    info!("the configuration file is running again: the earlier refusal is over");
                }
            }
            Err(why) => {
                error!("{RELOAD_REFUSED}: {why}; the running configuration stays");
                self.config_refused = Some(one_line(why, MAX_REFUSAL));
            }
        }
        self.notifier.send(&self.status_text());
        outcome
    }

    /// The reload itself: everything is checked before anything is applied, so a
    /// refusal changes nothing. Applies timers, keys (rotation, not on or off), the
    /// check, `preempt-delay`, hooks and log level; refuses a change of the cluster
    /// name, server list, priorities, id, transport, socket, socket mode or state path.
    fn try_reload(&mut self) -> Result<(), String> {
        let new = Config::load(&self.cfg.path, self.id_override).map_err(|e| e.to_string())?;
        if new.fingerprint() != self.cfg.fingerprint() {
            return Err(
                "the cluster name or server list changed; restart every server with the new list"
                    .into(),
            );
        }
        if fixed_settings(&new) != fixed_settings(&self.cfg) {
            return Err(
                "id, transport, socket, socket-mode or state path changed; these need a restart"
                    .into(),
            );
        }
        if priorities(&new) != priorities(&self.cfg) {
            return Err("a server's priority changed; this needs a restart".into());
        }
        let keys = auth::load_keys(new.key_file.as_deref(), new.key_file_next.as_deref())?;
        if keys.is_some() != self.keys.is_some() {
            return Err("turning authentication on or off needs a restart of every server".into());
        }
        // Applied by rebinding (bound here, installed below): turning metrics on or
        // moving them must not need a restart, which would move the leadership. A
        // listener bound here and not installed closes when dropped on a refusal.
        let metrics = self.rebind_metrics(new.metrics_listen)?;
        let old = &self.cfg;
        let (hbt, rtt, k, drift, hold) = (
            old.heartbeat,
            old.rtt,
            old.missed_heartbeats,
            old.drift_ppm,
            old.max_hold,
        );
        self.node
            .set_timers(
                new.heartbeat,
                new.rtt,
                new.missed_heartbeats,
                new.drift_ppm,
                new.max_hold,
            )
            .map_err(|e| e.to_string())?;
        if let Err(e) = self.checks.reconfigure(new.check.as_ref()) {
            // Nothing was sent since: the running timers come back exactly.
            if let Err(back) = self.node.set_timers(hbt, rtt, k, drift, hold) {
                error!("reload: cannot restore the running timers: {back}");
            }
            return Err(format!("the check runner could not start: {e}"));
        }
        // From here on nothing can fail.
        if keys.is_some()
            && (new.key_file != self.cfg.key_file || new.key_file_next != self.cfg.key_file_next)
        {
            info!("keys reloaded");
        }
        self.keys = keys;
        for w in new.warnings() {
            warn!("{w}");
        }
        if new.preempt_delay != self.cfg.preempt_delay {
            info!(
                "preempt-delay {}",
                new.preempt_delay
                    .map_or("off".to_string(), |d| format!("{d:?}"))
            );
        }
        self.node.set_preempt_delay(boot_now(), new.preempt_delay);
        self.hooks.reconfigure(
            new.on_leader.clone(),
            new.on_follower.clone(),
            new.hook_timeout,
        );
        if self.cli_log_level.is_none() {
            if let Some(l) = new.log_level {
                log::set_max_level(l);
            }
        }
        if let Some(m) = metrics {
            if m.is_none() {
                info!("metrics-listen off: the metrics listener is closed");
            }
            // The old listener and its connections close here (scrapers reconnect).
            self.http = m;
        }
        info!(
            "configuration reloaded: heartbeat {:?}, rtt {:?}, missed-heartbeats {}",
            new.heartbeat, new.rtt, new.missed_heartbeats
        );
        self.cfg = new;
        Ok(())
    }

    /// A changed `metrics-listen` on reload: None when unchanged, else the listener to
    /// install (None: off). The new address is bound before the old one closes, so a
    /// refused reload leaves the running listener as it was.
    fn rebind_metrics(
        &self,
        addr: Option<std::net::SocketAddr>,
    ) -> Result<Option<Option<Http>>, String> {
        if addr == self.cfg.metrics_listen {
            return Ok(None);
        }
        bind_metrics(addr, self.poll.registry()).map(Some).map_err(|e| match &self.http {
            Some(old) => format!(
                "{e} (the running listener on {} stays; to move to an address that conflicts with it, reload with metrics-listen off first)",
                old.addr()
            ),
            None => e,
        })
    }

    /// The socket's `reload`: allowed to whoever may send the daemon SIGHUP (root and
    /// the daemon's own user, the unit's ExecReload), not to every member of the
    /// socket's group. Answers `{"ok":true,...}` or the refusal with `"refused":true`.
    fn reload_request(&mut self, slot: usize) -> String {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        match self.control.peer_uid(slot) {
            Some(uid) if uid == 0 || uid == me => {
                info!("reload requested on the control socket (uid {uid})");
            }
            other => {
                let who = other.map_or("an unknown user".to_string(), |u| format!("uid {u}"));
                warn!(
                    "reload refused to {who} on the control socket: only root and uid {me} may reload"
                );
                return error_line(&format!(
                    "reload: permission denied for {who}: only root and the daemon's user (uid {me}) may reload, as for SIGHUP"
                ));
            }
        }
        match self.reload() {
            Ok(()) => format!(
                "{{\"ok\":true,\"config\":{}}}\n",
                json_str(&self.cfg.path.display().to_string())
            ),
            Err(why) => format!(
                "{{\"error\":{},\"refused\":true}}\n",
                json_str(&format!("{RELOAD_REFUSED}: {why}"))
            ),
        }
    }
}

/// What a reload may not change (besides the fingerprint): id, transport, socket and
/// state. Changing them needs a restart.
fn fixed_settings(c: &Config) -> (u16, Mode, std::path::PathBuf, u32, std::path::PathBuf) {
    (
        c.id,
        c.transport.clone(),
        c.socket.clone(),
        c.socket_mode,
        c.state.clone(),
    )
}

/// The servers' priorities: the core takes them at start only.
fn priorities(c: &Config) -> Vec<(u16, u8)> {
    c.servers.iter().map(|s| (s.id, s.priority)).collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn yield_names_a_server_that_may_lead_and_is_not_this_one() {
        let cfg = Config::parse(
            "cluster c\nserver 1 10.0.0.1:7400\nserver 2 10.0.0.2:7400\nserver 3 10.0.0.3:7400 witness\nid 1\nunicast\n",
            Path::new("electd.conf"),
            None,
        )
        .unwrap();
        assert_eq!(yield_target(&cfg, 2), Ok(2));
        for (id, want) in [
            (0, "yield: no server 0 in the server list"),
            (999, "yield: no server 999 in the server list"),
            (4, "yield: no server 4 in the server list"),
            (
                u64::MAX,
                "yield: no server 18446744073709551615 in the server list",
            ),
            (65_538, "yield: no server 65538 in the server list"),
            (1, "yield: server 1 is this server; name another"),
            (3, "yield: server 3 is a witness and never leads"),
        ] {
            assert_eq!(yield_target(&cfg, id), Err(want.to_string()), "{id}");
        }
    }
}

//! Real electd clusters on loopback for the integration tests: every process is started
//! by the test and ended by it through its own handle; all traffic stays on 127.0.0.1
//! and one multicast group.
#![allow(dead_code)]

use electd::json::{self, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::UdpSocket;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Timing assertions are about the protocol, so the clusters run one at a time.
pub static SERIAL: Mutex<()> = Mutex::new(());

/// A count or seed a test takes from the environment variable `var` (runs to make, a
/// seed to replay), or `default` when it is unset or not a number.
pub fn env_num<T: std::str::FromStr>(var: &str, default: T) -> T {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A seed from `var` to replay a run, else a fresh one (the caller prints it).
pub fn env_seed(var: &str) -> u64 {
    env_num(var, boottime_ns() ^ u64::from(std::process::id()))
}

pub const HBT_MS: u64 = 100;
pub const RTT_MS: u64 = 20;

/// The factor every latency bound in the integration tests is multiplied by, so that a
/// loaded machine (a second `cargo test` beside this one on 2 cores) does not turn a
/// scheduling delay into a failure: `ELECTD_TEST_SLACK`, default 2.0. The bounds stay
/// below the regressions they guard against (each test says by how much).
pub fn slack() -> f64 {
    std::env::var("ELECTD_TEST_SLACK")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 1.0)
        .unwrap_or(2.0)
}

/// `d` times the slack factor.
pub fn slacked(d: Duration) -> Duration {
    d.mul_f64(slack())
}

/// Polls `f` every few milliseconds until it returns `Some`, at most `within` times the
/// slack factor; panics naming `what` past that. The bounded wait that replaces a fixed
/// sleep used as synchronisation.
pub fn wait_for<T>(what: &str, within: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let limit = slacked(within);
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t0.elapsed() < limit, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// True once `f` holds, polling at most `within` times the slack factor.
pub fn eventually(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let limit = slacked(within);
    let t0 = Instant::now();
    loop {
        if f() {
            return true;
        }
        if t0.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Now on this host's CLOCK_BOOTTIME, in nanoseconds: the one clock every process of a
/// test on this host shares, which keeps counting through a suspend (SPEC section 8).
pub fn boottime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; it is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// How a test cluster is built: `Cluster::build`.
#[derive(Clone, Debug)]
pub struct Opts {
    pub mode: Mode,
    /// Servers in the configured list.
    pub n: u16,
    /// Servers started (ids 1..=run); the others are only configured.
    pub run: u16,
    pub hbt_ms: u64,
    pub rtt_ms: u64,
    pub k: u32,
    /// Fixed ports for some servers (ids from 1): a test socket bound there plays them.
    pub ports: Vec<(u16, u16)>,
    /// Lines added to the config.
    pub extra: String,
    /// Environment of every daemon.
    pub env: Vec<(String, String)>,
}

impl Opts {
    pub fn new(mode: Mode, n: u16) -> Opts {
        Opts {
            mode,
            n,
            run: n,
            hbt_ms: HBT_MS,
            rtt_ms: RTT_MS,
            k: 3,
            ports: Vec::new(),
            extra: String::new(),
            env: Vec::new(),
        }
    }

    /// The failover bound of SPEC sections 7 and 8 (detection within K*HBT, then L1's
    /// 5*HBT + 8*RTT), before the slack factor.
    pub fn failover_bound(&self) -> Duration {
        Duration::from_millis(u64::from(self.k) * self.hbt_ms + 5 * self.hbt_ms + 8 * self.rtt_ms)
    }
}

#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Mode {
    Unicast,
    Multicast,
}

pub struct Cluster {
    pub dir: PathBuf,
    pub conf: PathBuf,
    pub n: u16,
    pub ports: Vec<u16>,
    procs: Vec<Option<Child>>,
    env: Vec<(String, String)>,
    netns: Option<String>,
    /// One namespace per server (chaos tests), overriding `netns`.
    hosts_ns: Vec<String>,
    /// A command that every daemon and `electctl run` is started through (its
    /// arguments, then the program): `unshare --time --boottime S --fork --kill-child`
    /// for a server up for years. Empty: started directly.
    pub prefix: Vec<String>,
}

pub fn free_udp_port() -> u16 {
    free_udp_ports(1)[0]
}

/// `n` distinct free UDP ports: every socket is held until all are picked (one at a
/// time, the kernel once handed the same port to two servers of a cluster, and CI
/// failed on "address ... is listed twice").
pub fn free_udp_ports(n: usize) -> Vec<u16> {
    let held: Vec<UdpSocket> = (0..n)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|s| s.local_addr().unwrap().port())
        .collect()
}

pub fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on a process this test started and has not reaped.
    unsafe { libc::kill(child.id() as i32, sig) };
}

impl Cluster {
    pub fn start(mode: Mode, n: u16) -> Cluster {
        Cluster::start_with(mode, n, "", &[])
    }

    /// A cluster whose config gets `extra` lines and whose daemons get `env`.
    pub fn start_with(mode: Mode, n: u16, extra: &str, env: &[(&str, &str)]) -> Cluster {
        let mut o = Opts::new(mode, n);
        o.extra = extra.to_string();
        o.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Cluster::build(&o)
    }

    /// A cluster as `o` describes it, its first `o.run` servers started.
    pub fn build(o: &Opts) -> Cluster {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (mode, n) = (o.mode, o.n);
        let dir = std::env::temp_dir().join(format!(
            "electd-cluster-{}-{k}-{:?}-{n}",
            std::process::id(),
            mode
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // One more for a multicast group's port: distinct from every server's.
        let free = free_udp_ports(usize::from(n) + 1);
        let ports: Vec<u16> = (1..=n)
            .map(|id| {
                o.ports
                    .iter()
                    .find(|p| p.0 == id)
                    .map_or(free[usize::from(id) - 1], |p| p.1)
            })
            .collect();
        let mut text = format!("cluster test-{}-{k}-{n}\n", std::process::id());
        for (i, p) in ports.iter().enumerate() {
            text += &format!("server {} 127.0.0.1:{p} name s{}\n", i + 1, i + 1);
        }
        match mode {
            Mode::Unicast => text += "unicast\n",
            Mode::Multicast => {
                let pid = std::process::id();
                text += &format!(
                    "multicast 239.255.{}.{}:{} interface lo ttl 1\n",
                    (pid >> 8) & 0xff,
                    (pid & 0xff).max(1),
                    free[usize::from(n)]
                );
            }
        }
        text += &format!(
            "heartbeat {}ms\nrtt {}ms\nmissed-heartbeats {}\nsocket {3}/{{id}}.sock\nstate {3}/{{id}}.state\n",
            o.hbt_ms,
            o.rtt_ms,
            o.k,
            dir.display()
        );
        text += &o.extra;
        let conf = dir.join("electd.conf");
        std::fs::write(&conf, text).unwrap();
        let mut c = Cluster {
            dir,
            conf,
            n,
            ports,
            procs: (0..n).map(|_| None).collect(),
            env: o.env.clone(),
            netns: None,
            hosts_ns: Vec::new(),
            prefix: Vec::new(),
        };
        for id in 1..=o.run.min(n) {
            c.spawn(id);
        }
        c
    }

    /// A unicast cluster whose daemons run inside network namespace `ns`.
    pub fn start_in(ns: &Netns, n: u16) -> Cluster {
        let mut c = Cluster::start_with(Mode::Unicast, 0, "", &[]);
        c.n = n;
        c.netns = Some(ns.name.clone());
        // Ports inside a fresh namespace are all free: use fixed ones.
        c.ports = (1..=n).map(|i| 7500 + i).collect();
        let mut text = format!("cluster ns-{}-{n}\n", std::process::id());
        for (i, p) in c.ports.iter().enumerate() {
            text += &format!("server {} 127.0.0.1:{p} name s{}\n", i + 1, i + 1);
        }
        text += &format!(
            "unicast\nheartbeat {HBT_MS}ms\nrtt {RTT_MS}ms\nmissed-heartbeats 3\nsocket {0}/{{id}}.sock\nstate {0}/{{id}}.state\n",
            c.dir.display()
        );
        std::fs::write(&c.conf, text).unwrap();
        c.procs = (0..n).map(|_| None).collect();
        for id in 1..=n {
            c.spawn(id);
        }
        c
    }

    /// A cluster of `n` servers with the config `text(dir)`, server `i` started in
    /// namespace `hosts_ns[i-1]`.
    pub fn launch(
        n: u16,
        hosts_ns: Vec<String>,
        text: impl FnOnce(&std::path::Path) -> String,
    ) -> Cluster {
        let mut c = Cluster::start_with(Mode::Unicast, 0, "", &[]);
        c.n = n;
        c.hosts_ns = hosts_ns;
        std::fs::write(&c.conf, text(&c.dir)).unwrap();
        c.procs = (0..n).map(|_| None).collect();
        for id in 1..=n {
            c.spawn(id);
        }
        c
    }

    /// The config file server `id` starts with: its own, once `set_server_conf` has
    /// written one, else the shared file.
    pub fn conf_of(&self, id: u16) -> PathBuf {
        let own = self.dir.join(format!("electd-{id}.conf"));
        if own.exists() { own } else { self.conf.clone() }
    }

    /// Gives server `id` a config file of its own: the shared file followed by `extra`
    /// (lines that differ per server, such as a `check` reading that server's flag file).
    /// It takes effect at the server's next `spawn`; the fingerprint does not change.
    pub fn set_server_conf(&self, id: u16, extra: &str) {
        let base = std::fs::read_to_string(&self.conf).unwrap();
        self.set_server_text(id, &(base + extra));
    }

    /// Gives server `id` a config file of its own holding `text` (for a per-server line
    /// that must stand before the `group` sections). Takes effect at its next `spawn`.
    pub fn set_server_text(&self, id: u16, text: &str) {
        std::fs::write(self.dir.join(format!("electd-{id}.conf")), text).unwrap();
    }

    pub fn spawn(&mut self, id: u16) {
        let log = std::fs::File::create(self.dir.join(format!("{id}.log"))).unwrap();
        self.spawn_with_stderr(id, log.into());
    }

    /// Starts server `id` with its stderr going to `stderr` (a pipe nobody reads, for a
    /// stalled log sink) instead of its log file.
    pub fn spawn_with_stderr(&mut self, id: u16, stderr: Stdio) {
        let log = stderr;
        let conf = self.conf_of(id);
        let ns = self
            .hosts_ns
            .get(usize::from(id) - 1)
            .or(self.netns.as_ref());
        let mut cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_electd")]);
                c
            }
            None => prefixed(&self.prefix, env!("CARGO_BIN_EXE_electd")),
        };
        let child = cmd
            .args([
                "--config",
                conf.to_str().unwrap(),
                "--id",
                &id.to_string(),
                "--log-level",
                "debug",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .spawn()
            .expect("start electd");
        self.procs[usize::from(id) - 1] = Some(child);
        let sock = self.sock(id);
        let deadline = Instant::now() + Duration::from_secs(5);
        while UnixStream::connect(&sock).is_err() {
            assert!(
                Instant::now() < deadline,
                "server {id} never opened its socket:\n{}",
                self.log(id)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn sock(&self, id: u16) -> PathBuf {
        self.dir.join(format!("{id}.sock"))
    }

    pub fn log(&self, id: u16) -> String {
        std::fs::read_to_string(self.dir.join(format!("{id}.log"))).unwrap_or_default()
    }

    pub fn request(&self, id: u16, cmd: &str) -> Option<String> {
        request_at(&self.sock(id), cmd)
    }

    pub fn status(&self, id: u16) -> Option<Value> {
        self.request(id, "status")
            .and_then(|l| json::parse(l.trim()).ok())
    }

    pub fn up(&self) -> Vec<u16> {
        (1..=self.n)
            .filter(|&id| self.procs[usize::from(id) - 1].is_some())
            .collect()
    }

    /// The (leader, term) every running server agrees on, once they do: a bounded wait
    /// of `within` times the slack factor.
    pub fn agreement(&self, within: Duration) -> (u16, u64) {
        self.agreement_in(None, within)
    }

    /// As `agreement`, in election group `group` (`status GROUP`).
    pub fn agreement_in(&self, group: Option<&str>, within: Duration) -> (u16, u64) {
        let cmd = group.map_or("status".to_string(), |g| format!("status {g}"));
        let deadline = Instant::now() + slacked(within);
        loop {
            let views: Vec<(u16, Option<Value>)> = self
                .up()
                .into_iter()
                .map(|id| {
                    let v = self
                        .request(id, &cmd)
                        .and_then(|l| json::parse(l.trim()).ok());
                    (id, v)
                })
                .collect();
            let leaders: Vec<u16> = views
                .iter()
                .filter(|(_, v)| {
                    v.as_ref()
                        .and_then(|v| v.get("role"))
                        .and_then(Value::as_str)
                        == Some("leader")
                })
                .map(|(id, _)| *id)
                .collect();
            if let [l] = leaders[..] {
                let term = views
                    .iter()
                    .find(|v| v.0 == l)
                    .and_then(|v| v.1.as_ref())
                    .and_then(|v| v.get("term"))
                    .and_then(Value::as_u64);
                let all = views.iter().all(|(_, v)| {
                    v.as_ref()
                        .and_then(|v| v.get("leader"))
                        .and_then(Value::as_u64)
                        == Some(u64::from(l))
                });
                if all {
                    return (l, term.unwrap());
                }
            }
            assert!(leaders.len() <= 1, "two servers report leader: {leaders:?}");
            if Instant::now() > deadline {
                panic!("no agreement within {within:?}: {views:?}\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Polls the running servers until one other than `old` reports a lease with a term
    /// above `term`; returns it and the time since `t0`. Panics past `limit` times the
    /// slack factor.
    pub fn new_leader_since(
        &self,
        old: u16,
        term: u64,
        t0: Instant,
        limit: Duration,
    ) -> (u16, Duration) {
        let limit = slacked(limit);
        loop {
            for id in self.up() {
                if id == old {
                    continue;
                }
                if let Some(v) = self.status(id) {
                    let t = v.get("term").and_then(Value::as_u64).unwrap_or(0);
                    if v.get("role").and_then(Value::as_str) == Some("leader") && t > term {
                        return (id, t0.elapsed());
                    }
                }
            }
            if t0.elapsed() > limit {
                panic!("no new leader within {limit:?}\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The running process of server `id`.
    pub fn child(&self, id: u16) -> &Child {
        self.procs[usize::from(id) - 1].as_ref().expect("running")
    }

    /// SIGKILL, and reap it.
    pub fn kill(&mut self, id: u16) {
        let mut child = self.procs[usize::from(id) - 1].take().expect("running");
        signal(&child, libc::SIGKILL);
        child.wait().unwrap();
    }

    /// SIGTERM; the caller waits for the exit.
    pub fn terminate(&mut self, id: u16) -> Child {
        let child = self.procs[usize::from(id) - 1].take().expect("running");
        signal(&child, libc::SIGTERM);
        child
    }

    pub fn metric(&self, id: u16, name: &str) -> u64 {
        let text = self.request(id, "metrics").unwrap_or_default();
        metric_value(&text, name).unwrap_or(0)
    }

    /// Datagrams dropped for any reason but a server's own multicast echo.
    pub fn dropped_total(&self, id: u16) -> u64 {
        let text = self.request(id, "metrics").unwrap_or_default();
        text.lines()
            .filter(|l| l.starts_with("electd_datagrams_dropped_total{") && !l.contains("own_echo"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    pub fn logs(&self) -> String {
        (1..=self.n)
            .map(|id| format!("--- server {id}\n{}", self.log(id)))
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in self.procs.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("logs kept in {}", self.dir.display());
        }
    }
}

/// Waits for `child` to exit, at most `within` times the slack factor; kills it past that.
pub fn wait_exit(mut child: Child, within: Duration) -> Option<i32> {
    let deadline = Instant::now() + slacked(within);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The output of `child` (spawned with piped stderr and/or stdout), waiting at most
/// `within` times the slack factor; past that it is killed, and the output is what it
/// wrote until then (its status then shows the signal).
pub fn output_within(child: Child, within: Duration) -> std::process::Output {
    let pid = child.id() as i32;
    let waiter = std::thread::spawn(move || child.wait_with_output());
    let limit = slacked(within);
    let t0 = Instant::now();
    while !waiter.is_finished() && t0.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(5));
    }
    if !waiter.is_finished() {
        // SAFETY: kill(2) on a child this test started and saw running a moment ago (the
        // waiter reaps it; the window for a reused pid is a few microseconds).
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    waiter.join().unwrap().unwrap()
}

/// Runs `cmd` (an `electctl` command line) with no stdin and piped output, at most 40
/// s: (exit code, stdout, stderr).
pub fn ctl_output(mut cmd: std::process::Command) -> (Option<i32>, String, String) {
    let child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = output_within(child, Duration::from_secs(40));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// `electctl --socket SOCK ARGS...` as this user: (exit code, stdout, stderr).
pub fn electctl_at(sock: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_electctl"));
    cmd.arg("--socket").arg(sock).args(args);
    ctl_output(cmd)
}

/// A time namespace whose boot and monotonic clocks run `offset` seconds ahead: a
/// server up for that long. Held by a `sleep` of its own (killed on drop, with the
/// `unshare` that started it); processes join it through `prefix()` (`nsenter`, which
/// execs the program, so its pid is the program's). None when this is not root or
/// util-linux cannot (CI must be able to).
pub struct TimeNs {
    holder: Child,
    member: u32,
}

impl TimeNs {
    pub fn create(offset: u64) -> Option<TimeNs> {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let off = offset.to_string();
        let holder = root
            .then(|| {
                Command::new("unshare")
                    .args(["--time", "--boottime", &off, "--monotonic", &off])
                    .args(["--fork", "--kill-child", "sleep", "100000"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .ok()
            })
            .flatten();
        let Some(holder) = holder else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root with util-linux's unshare and nsenter"
            );
            eprintln!("SKIPPED: a time namespace needs root and util-linux");
            return None;
        };
        let pid = holder.id();
        let mut ns = TimeNs { holder, member: 0 };
        let children = format!("/proc/{pid}/task/{pid}/children");
        ns.member = wait_for("the time namespace's sleep", Duration::from_secs(5), || {
            std::fs::read_to_string(&children)
                .ok()?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        });
        Some(ns)
    }

    /// The command that starts a program in this namespace (`Cluster::prefix`).
    pub fn prefix(&self) -> Vec<String> {
        vec![
            "nsenter".into(),
            format!("--time=/proc/{}/ns/time", self.member),
            "--".into(),
        ]
    }
}

impl Drop for TimeNs {
    fn drop(&mut self) {
        // --kill-child: the sleep goes with its unshare.
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// A network namespace of our own (unique per run, deleted on drop) with loopback up and
/// an nftables table for partitions. None when this is not root or tools are missing.
pub struct Netns {
    pub name: String,
}

/// Runs a command quietly; true if it succeeded.
/// Network namespaces named `PREFIX<pid>...` whose test process is gone: left by a
/// run that was killed before its guards could delete them.
pub fn stale_netns(prefix: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    out.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| {
            name.strip_prefix(prefix)
                .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|p| p.parse::<u32>().ok())
                .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
        })
        .map(str::to_string)
        .collect()
}

pub fn sh(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Feeds an nftables script to `nft -f -` inside namespace `ns`; true if it applied.
pub fn nft_in(ns: &str, script: &str) -> bool {
    let Ok(mut child) = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
    else {
        return false;
    };
    let wrote = child
        .stdin
        .take()
        .is_some_and(|mut i| i.write_all(script.as_bytes()).is_ok());
    child.wait().is_ok_and(|s| s.success()) && wrote
}

impl Netns {
    pub fn create(tag: &str) -> Option<Netns> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 || !sh(&["nft", "--version"]) {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root with nftables installed"
            );
            eprintln!("SKIPPED: network namespaces need root and nftables");
            return None;
        }
        let name = format!("electd-{tag}-{}", std::process::id());
        let _ = sh(&["ip", "netns", "del", &name]);
        assert!(sh(&["ip", "netns", "add", &name]), "ip netns add {name}");
        let ns = Netns { name };
        assert!(sh(&["ip", "-n", &ns.name, "link", "set", "lo", "up"]));
        let rules = "add table inet electd\nadd chain inet electd input { type filter hook input priority 0; }\n";
        assert!(ns.nft(rules), "nft table");
        Some(ns)
    }

    fn nft(&self, script: &str) -> bool {
        nft_in(&self.name, script)
    }

    /// Drops every datagram to or from `port` (a server's own port): it is cut off.
    pub fn isolate_port(&self, port: u16) {
        let r = format!(
            "add rule inet electd input udp dport {port} drop\nadd rule inet electd input udp sport {port} drop\n"
        );
        assert!(self.nft(&r), "nft rule");
    }

    /// Removes every partition rule.
    pub fn heal(&self) {
        assert!(self.nft("flush chain inet electd input\n"), "nft flush");
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = sh(&["ip", "netns", "del", &self.name]);
    }
}

/// The environment variable that turns a test binary into the wrapped command of
/// `electctl run` tests: it stamps start, liveness, the SIGTERM it got and its own exit
/// on CLOCK_BOOTTIME (one clock for every process on this host) into that file.
pub const CMD_LOG_VAR: &str = "ELECTD_TEST_CMD_LOG";
/// Which server's supervisor started the command (written in every stamp).
pub const CMD_HOST_VAR: &str = "ELECTD_TEST_CMD_HOST";
/// How long the command keeps running after SIGTERM before it exits by itself (ms).
pub const CMD_LINGER_VAR: &str = "ELECTD_TEST_CMD_LINGER_MS";
/// How often the command stamps that it is alive (ms, default 2).
pub const CMD_ALIVE_VAR: &str = "ELECTD_TEST_CMD_ALIVE_MS";

/// When SIGTERM arrived (boot clock ns), 0 before.
static CMD_TERM_AT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

extern "C" fn cmd_on_term(_: libc::c_int) {
    // clock_gettime is async-signal-safe; the first SIGTERM counts.
    let now = boottime_ns();
    let _ = CMD_TERM_AT.compare_exchange(
        0,
        now,
        std::sync::atomic::Ordering::SeqCst,
        std::sync::atomic::Ordering::SeqCst,
    );
}

fn cmd_stamp_at(log: &str, what: &str, now: u64) {
    let line = format!(
        "{what} {} {now} {} {}\n",
        std::process::id(),
        std::env::var("ELECTD_TERM").unwrap_or_default(),
        std::env::var(CMD_HOST_VAR).unwrap_or_else(|_| "0".into()),
    );
    // One short O_APPEND write per line: lines from several processes never interleave.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)
        .unwrap();
    f.write_all(line.as_bytes()).unwrap();
}

fn cmd_stamp(log: &str, what: &str) {
    cmd_stamp_at(log, what, boottime_ns());
}

fn env_ms(var: &str, default: u64) -> Duration {
    Duration::from_millis(
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}

/// Acts as the wrapped command if CMD_LOG_VAR is set (call it from a `#[test]`): stamps
/// `start`, then `alive` every few ms; on SIGTERM stamps `sigterm` (the moment it
/// arrived), keeps running for the linger, and stamps `stop` as it exits by itself. A
/// command killed by SIGKILL has no `stop`.
pub fn cmd_helper() {
    let Ok(log) = std::env::var(CMD_LOG_VAR) else {
        return;
    };
    // SAFETY: the handler only reads the clock and stores to an atomic.
    unsafe {
        libc::signal(
            libc::SIGTERM,
            cmd_on_term as *const () as libc::sighandler_t,
        )
    };
    let linger = env_ms(CMD_LINGER_VAR, 0);
    let alive = env_ms(CMD_ALIVE_VAR, 2);
    cmd_stamp(&log, "start");
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut termed: Option<Instant> = None;
    while Instant::now() < deadline {
        let at = CMD_TERM_AT.load(std::sync::atomic::Ordering::SeqCst);
        if at != 0 && termed.is_none() {
            cmd_stamp_at(&log, "sigterm", at);
            termed = Some(Instant::now());
        }
        if termed.is_some_and(|t| t.elapsed() >= linger) {
            break;
        }
        cmd_stamp(&log, "alive");
        std::thread::sleep(alive);
    }
    cmd_stamp(&log, "stop");
    std::process::exit(0);
}

/// One run of the wrapped command, on the boot clock (ns).
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub pid: u32,
    /// The server whose supervisor started it (CMD_HOST_VAR).
    pub host: u16,
    /// The term it was started in (ELECTD_TERM).
    pub term: u64,
    pub start: u64,
    /// Its exit stamp, or its last sign of life when it was killed.
    pub end: u64,
    /// It exited by itself (it stamped `stop`).
    pub stopped: bool,
    /// When it received SIGTERM.
    pub sigterm: Option<u64>,
}

impl Span {
    /// True while the command may have run at `t`: a killed command's end is known only
    /// to within one alive period, which is added.
    pub fn overlaps(&self, o: &Span, slop_ns: u64) -> bool {
        let end = |s: &Span| if s.stopped { s.end } else { s.end + slop_ns };
        self.start < end(o) && o.start < end(self)
    }
}

/// The runs recorded in a command log.
pub fn spans(log: &str) -> Vec<Span> {
    let mut by_pid: std::collections::BTreeMap<u32, Span> = Default::default();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let (Some(pid), Some(t)) = (
            f.get(1).and_then(|v| v.parse().ok()),
            f.get(2).and_then(|v| v.parse().ok()),
        ) else {
            continue;
        };
        let s = by_pid.entry(pid).or_insert(Span {
            pid,
            host: f.get(4).and_then(|v| v.parse().ok()).unwrap_or(0),
            term: f.get(3).and_then(|v| v.parse().ok()).unwrap_or(0),
            start: t,
            end: t,
            stopped: false,
            sigterm: None,
        });
        s.start = s.start.min(t);
        match f[0] {
            "sigterm" => s.sigterm = Some(t),
            _ => s.end = s.end.max(t),
        }
        s.stopped |= f[0] == "stop";
    }
    let mut v: Vec<Span> = by_pid.into_values().collect();
    v.sort_by_key(|s| s.start);
    v
}

/// Every pair of runs that overlapped on the boot clock, with the overlap in ns.
pub fn overlaps(spans: &[Span], slop_ns: u64) -> Vec<(Span, Span, u64)> {
    let mut out = Vec::new();
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            if a.overlaps(b, slop_ns) {
                let end = |s: &Span| if s.stopped { s.end } else { s.end + slop_ns };
                let o = end(a).min(end(b)) - a.start.max(b.start);
                out.push((*a, *b, o));
            }
        }
    }
    out
}

/// What the S5 checkers of tests/s5.rs and tests/stalls.rs found in a processor log.
pub struct StopReport {
    /// Every processor run.
    pub spans: Vec<Span>,
    /// Runs on two hosts at once, with the overlap in ns.
    pub overlaps: Vec<(Span, Span, u64)>,
    /// Planned stops whose processor was not given SIGTERM and its grace.
    pub graceless: Vec<String>,
}

/// Checks a processor log: no two runs overlap (beyond `slop_ns`), and at each planned
/// stop `(leader, at_ns, what)` the processor running on the leader was stopped by
/// SIGTERM and exited by itself, `linger_ms` after it (it was given its grace).
pub fn stop_report(
    log: &str,
    planned: &[(u16, u64, String)],
    linger_ms: u64,
    slop_ns: u64,
) -> StopReport {
    let spans = spans(log);
    let overlaps = overlaps(&spans, slop_ns);
    let mut graceless = Vec::new();
    for (leader, at_ns, what) in planned {
        // The processor that ran on the leader when the stop began.
        let Some(s) = spans
            .iter()
            .find(|s| s.host == *leader && s.start <= *at_ns && s.end >= *at_ns)
        else {
            graceless.push(format!("{what}: no processor was running on the leader"));
            continue;
        };
        let lingered = s.sigterm.map(|t| s.end.saturating_sub(t));
        // It exits by itself linger_ms after SIGTERM unless it was killed first.
        if !s.stopped || lingered.is_none_or(|l| l < (linger_ms - 1) * 1_000_000) {
            graceless.push(format!(
                "{what}: {s:?} (exited by itself: {}, ran {:?} ms after SIGTERM)",
                s.stopped,
                lingered.map(|l| l / 1_000_000)
            ));
        }
    }
    StopReport {
        spans,
        overlaps,
        graceless,
    }
}

impl StopReport {
    /// The runs, overlaps and graceless stops, for a failure message.
    pub fn describe(&self) -> String {
        let mut s = format!("{} processor runs\n", self.spans.len());
        for (a, b, o) in &self.overlaps {
            s += &format!(
                "overlap {:.1} ms: host {} pid {} term {} and host {} pid {} term {}\n",
                *o as f64 / 1e6,
                a.host,
                a.pid,
                a.term,
                b.host,
                b.pid,
                b.term
            );
        }
        for g in &self.graceless {
            s += &format!("no grace: {g}\n");
        }
        s
    }
}

/// `electctl run` supervisors this test started: stopped (SIGTERM, then SIGKILL after a
/// bounded wait) when dropped, so a failing test leaves none behind.
pub struct Supervisors(pub Vec<Child>);

impl Supervisors {
    /// SIGTERM to each, then a bounded wait for each exit.
    pub fn stop(&mut self) {
        for s in &self.0 {
            signal(s, libc::SIGTERM);
        }
        for s in self.0.drain(..) {
            let _ = wait_exit(s, Duration::from_secs(5));
        }
    }
}

impl Drop for Supervisors {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `electctl run` of this test binary's `cmd_helper` against server `id`'s socket.
pub fn supervise(c: &Cluster, id: u16, log: &str) -> Child {
    supervise_with(c, id, log, &["--grace", "50ms"], &[])
}

/// `electctl run ARGS -- cmd_helper` against server `id`'s socket, the command getting
/// `env` besides the log and host variables.
pub fn supervise_with(
    c: &Cluster,
    id: u16,
    log: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Child {
    supervise_cmd(c, id, log, args, env)
        .stderr(run_log(c, id))
        .spawn()
        .unwrap()
}

/// `program` started through `prefix` (`Cluster::prefix`), or directly.
fn prefixed(prefix: &[String], program: &str) -> Command {
    match prefix.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// The `electctl run` command of `supervise_with`, before its stderr is chosen and it
/// is spawned (tests/stalls.rs points stderr at a FIFO nobody reads).
pub fn supervise_cmd(
    c: &Cluster,
    id: u16,
    log: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Command {
    let mut cmd = prefixed(&c.prefix, env!("CARGO_BIN_EXE_electctl"));
    cmd.arg("--socket")
        .arg(c.sock(id))
        .arg("run")
        .args(args)
        .arg("--")
        .arg(std::env::current_exe().unwrap())
        .args(["cmd_helper", "--exact", "--nocapture", "--test-threads=1"])
        .env(CMD_LOG_VAR, log)
        .env(CMD_HOST_VAR, id.to_string())
        .envs(env.iter().copied())
        .stdout(Stdio::null());
    cmd
}

/// The log file of server `id`'s `electctl run` (appended to, so restarts keep it).
pub fn run_log(c: &Cluster, id: u16) -> std::fs::File {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(c.dir.join(format!("run-{id}.log")))
        .unwrap()
}

/// Asserts that electd refuses `conf`, with `--check-config` and at start alike: exit
/// status 1 (78 at start for a file it refuses) and a message containing `want`.
pub fn assert_refused(conf: &std::path::Path, want: &str) {
    assert_refused_in(None, conf, want)
}

/// A command that runs electd, inside network namespace `ns` when one is given.
pub fn electd_in(ns: Option<&str>) -> Command {
    match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_electd")]);
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_electd")),
    }
}

/// `assert_refused`, electd run inside network namespace `ns` when one is given.
pub fn assert_refused_in(ns: Option<&str>, conf: &std::path::Path, want: &str) {
    for extra in [&["--check-config"][..], &[]] {
        let out = electd_in(ns)
            .arg("--config")
            .arg(conf)
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        // At start, a file it refuses exits 78 (not restarted by the units), a host
        // problem (an interface, a name) 1; --check-config exits 1 for both.
        let codes: &[i32] = if extra.is_empty() { &[1, 78] } else { &[1] };
        assert!(
            out.status.code().is_some_and(|c| codes.contains(&c)),
            "{extra:?}: {:?}: {err}",
            out.status.code()
        );
        assert!(err.contains(want), "{extra:?}: wanted '{want}' in: {err}");
    }
}

/// The leader's LEADs as server 4 of a unicast cluster sees them: the test binds
/// server 4's configured address and never answers, so the leader sends it every LEAD.
pub struct LeadTap {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(Duration, usize)>,
}

impl LeadTap {
    pub fn start(sock: UdpSocket, leader: u16) -> LeadTap {
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            // From the start: a leader that stalls before its first LEAD counts too.
            let mut last = Instant::now();
            let (mut worst, mut count) = (Duration::ZERO, 0);
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok(n) = sock.recv(&mut buf) else {
                    continue;
                };
                let Ok(b) = electd::wire::decode_any(&buf[..n], None, 256) else {
                    continue;
                };
                let lead = b
                    .entries
                    .iter()
                    .any(|e| matches!(e.msg.body, electd::wire::Body::Lead { .. }));
                if b.sender != leader || !lead {
                    continue;
                }
                let now = Instant::now();
                worst = worst.max(now - last);
                last = now;
                count += 1;
            }
            // ... and so does one that has gone silent at the end.
            (worst.max(last.elapsed()), count)
        });
        LeadTap { stop, thread }
    }

    /// The worst gap between two LEADs and how many arrived.
    pub fn finish(self) -> (Duration, usize) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// The bound on the leader's heartbeat gaps under abuse of its sockets (SPEC 10):
/// HBT + (10 % of HBT + 10 ms) x the slack factor, 140 ms at HBT 100 ms.
pub fn gap_bound(hbt: Duration) -> Duration {
    hbt + (hbt / 10 + Duration::from_millis(10)).mul_f64(slack())
}

/// After an abuse that lasted `took`, with `tapped` = [`LeadTap::finish`]: the tap saw
/// the leader's heartbeats all along (90 % of one per HBT), no gap exceeded
/// [`gap_bound`], and the leader kept its seat and term. `what` names the abuse.
pub fn assert_kept_pace(
    c: &Cluster,
    o: &Opts,
    seat: (u16, u64),
    (worst, leads): (Duration, usize),
    took: Duration,
    what: &str,
) {
    let hbt = Duration::from_millis(o.hbt_ms);
    let bound = gap_bound(hbt);
    let expected = (took.as_millis() / hbt.as_millis()) as usize;
    assert!(
        leads + 2 >= expected * 9 / 10,
        "{leads} LEADs seen in {took:?}, ~{expected} sent"
    );
    assert!(
        worst <= bound,
        "heartbeat gap {worst:?} under {what}, bound {bound:?}"
    );
    assert_eq!(
        c.agreement(o.failover_bound()),
        seat,
        "the leader kept its seat and term"
    );
}

/// The value of sample `name` in a metrics text. A per-group family is labelled
/// `group`: a bare name means the `default` group's sample (`electd_term` is
/// `electd_term{group="default"}`), and a name with labels is completed the same way
/// (`electd_handovers_total{reason="yield"}`).
pub fn metric_value<T: std::str::FromStr>(text: &str, name: &str) -> Option<T> {
    let grouped = match name.split_once('{') {
        None => format!("{name}{{group=\"default\"}}"),
        Some((n, rest)) => format!("{n}{{group=\"default\",{rest}"),
    };
    [name, grouped.as_str()].iter().find_map(|n| {
        text.lines()
            .find_map(|l| l.strip_prefix(n)?.strip_prefix(' ')?.parse().ok())
    })
}

/// One request on the control socket at `sock`: its answer line (every line up to
/// `# EOF` for `metrics`), or None when the daemon does not answer within 2 s.
pub fn request_at(sock: &std::path::Path, cmd: &str) -> Option<String> {
    let mut s = UnixStream::connect(sock).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(format!("{cmd}\n").as_bytes()).ok()?;
    let mut r = BufReader::new(s);
    let mut out = String::new();
    loop {
        let mut l = String::new();
        if r.read_line(&mut l).ok()? == 0 {
            break;
        }
        out += &l;
        if cmd != "metrics" || l.trim_end() == "# EOF" {
            break;
        }
    }
    Some(out)
}

// ----- election groups (SPEC section 15): shared by tests/groups.rs and the bench -----

/// One group's view on one server.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupView {
    pub role: String,
    pub leader: Option<u64>,
    pub term: u64,
    pub lease_until_ns: Option<u64>,
}

/// Server `id`'s view of every group, with its `now_ns`.
pub fn views(c: &Cluster, id: u16) -> Option<(u64, BTreeMap<String, GroupView>)> {
    let v = json::parse(c.request(id, "status")?.trim()).ok()?;
    let now = v.get("now_ns")?.as_u64()?;
    let mut out = BTreeMap::new();
    for g in v.get("groups")?.as_array()? {
        out.insert(
            g.get("group")?.as_str()?.to_string(),
            GroupView {
                role: g.get("role")?.as_str()?.to_string(),
                leader: g.get("leader").and_then(Value::as_u64),
                term: g.get("term")?.as_u64()?,
                lease_until_ns: g.get("lease_until_ns").and_then(Value::as_u64),
            },
        );
    }
    Some((now, out))
}

/// Per group, the (leader, term) every running server agrees on, when they all do and
/// exactly one server reports the lease.
pub fn agreed(c: &Cluster) -> Option<BTreeMap<String, (u16, u64)>> {
    let all: Vec<(u16, BTreeMap<String, GroupView>)> = c
        .up()
        .into_iter()
        .map(|id| Some((id, views(c, id)?.1)))
        .collect::<Option<_>>()?;
    let names: Vec<String> = all.first()?.1.keys().cloned().collect();
    let mut out = BTreeMap::new();
    for name in names {
        let leaders: Vec<u16> = all
            .iter()
            .filter(|(_, v)| v[&name].role == "leader")
            .map(|(id, _)| *id)
            .collect();
        let [l] = leaders[..] else { return None };
        let term = all.iter().find(|(id, _)| *id == l)?.1[&name].term;
        if all
            .iter()
            .any(|(_, v)| v[&name].leader != Some(u64::from(l)) || v[&name].term != term)
        {
            return None;
        }
        out.insert(name, (l, term));
    }
    Some(out)
}

/// How many groups each running server leads.
pub fn counts(a: &BTreeMap<String, (u16, u64)>) -> BTreeMap<u16, usize> {
    let mut n = BTreeMap::new();
    for (l, _) in a.values() {
        *n.entry(*l).or_insert(0) += 1;
    }
    n
}

/// `group NAME` sections: each name with its optional `prefer` line.
pub fn groups_text(groups: &[(&str, Option<&str>)]) -> String {
    let mut s = String::new();
    for (name, prefer) in groups {
        s += &format!("group {name}\n");
        if let Some(p) = prefer {
            s += &format!("  prefer {p}\n");
        }
    }
    s
}

/// True while process `pid` runs: it has an entry in /proc that is not a zombie (one
/// dead but not yet reaped, by a parent that exited, say, counts as gone).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    })
}

/// The children of `pid` (from /proc), with their command lines.
pub fn children(pid: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        // The parent is the second field after the parenthesised name.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u32>().ok());
        if ppid == Some(pid) {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            out.push((p, String::from_utf8_lossy(&cmd).replace('\0', " ")));
        }
    }
    out
}

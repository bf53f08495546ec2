//! Cost at rest, electd beside keepalived (issue 25). Three servers, each daemon in a
//! network namespace of its own, all on one bridge (in a namespace of its own too), at
//! heartbeat 100 ms and 1 s; per daemon: CPU (schedstat of every thread), wakeups
//! (voluntary context switches of every thread), datagrams and IP bytes sent (nftables
//! counters in its namespace), syscalls per heartbeat by kind (`strace -c -f`), with
//! and without `electctl run` on every server; keepalived (VRRPv3, unicast peers, same
//! advert interval) measured in the same run, trials interleaved. Then a callgrind
//! profile of a leader and a follower at rest (instructions and allocations per
//! heartbeat), and the bytes of an idle LEAD and ACK as captured in a namespace.
//!
//! `BENCH_ONLY_IDLE=1 cargo bench --bench electd` runs only this part. Knobs:
//! `BENCH_IDLE_TRIALS` (default 5), `BENCH_IDLE_WINDOW_S` (the window at 100 ms, default
//! 10; 1 s gets twice as long), `BENCH_IDLE_STRACE_S` (default 5, twice at 1 s),
//! `BENCH_IDLE_HBT` (heartbeats in ms, default `100,1000`), `BENCH_IDLE_PROFILE=0`
//! (no callgrind), `BENCH_IDLE_PROFILE_HB` (heartbeats profiled, default 100),
//! `BENCH_IDLE_SHORT=1` (1 trial, 3 s windows, 2 s strace, 30 profiled heartbeats),
//! `BENCH_IDLE_ATTRIB=1` (then the attributed mode: every veth with threaded NAPI, so each
//! namespace's receive path runs in a thread of its own; `only` runs just that),
//! `BENCH_IDLE_ATTRIB_TRIALS` (default 2, 1 when short), `BENCH_IDLE_CONCURRENT` (`1`,
//! the default: then electd and keepalived in two more labs at the same time, measured
//! over the same windows; `only` runs just that; `0` not), `BENCH_IDLE_WINDOWS` (the
//! concurrent mode's trials, default 16, each a window without `run` and one with), `BENCH_IDLE_OUT` (where the
//! section is also written, whole, to paste: default target/bench-idle.md).
//!
//! Beside both runs the protocol floor (bench/floor.rs), in the same namespaces,
//! interleaved in the same trials: a sender on a timerfd sending to both others, which
//! only receive (VRRP's shape), and a sender with electd's leader's shape (one LEAD a
//! heartbeat to the others in turn, their ACKs read at the next heartbeat; since the
//! tenth round) whose two receivers answer each datagram with an ACK-sized one.
//!
//! Needs root, `ip` and `nft` (and `ethtool` for the attributed mode); prints NOT MEASURED for what it cannot measure (no
//! namespaces, no keepalived, no strace, no valgrind) and never fails for that. Every
//! namespace is named `eidle<pid>...` and deleted by a guard, on a panic too; the
//! processes it starts are ended by pid.

use crate::common::{self, request_at, sh, stale_netns};
use electd::json::{self, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ELECTD: &str = env!("CARGO_BIN_EXE_electd");
const ELECTCTL: &str = env!("CARGO_BIN_EXE_electctl");
const N: u16 = 3;
pub const PORT: u16 = 7400;
/// The keepalived virtual address's last byte (in the lab's 10.77.NET.0/24, as every
/// address here).
const VIP_HOST: u16 = 100;
const PREFIX: &str = "eidle";

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn short() -> bool {
    std::env::var_os("BENCH_IDLE_SHORT").is_some()
}

struct Knobs {
    trials: usize,
    /// Window at heartbeat 100 ms, seconds (scaled by hbt / 100 ms, at most x2).
    window_s: f64,
    strace_s: f64,
    hbts: Vec<u64>,
    profile: bool,
    profile_hb: u64,
    /// Also run the attributed mode (threaded NAPI on every veth).
    attrib: bool,
    /// Only the attributed mode (BENCH_IDLE_ATTRIB=only; for development).
    attrib_only: bool,
    attrib_trials: usize,
    /// The concurrent mode (BENCH_IDLE_CONCURRENT: `1`, the default, after the rest;
    /// `only`; `0` off).
    concurrent: bool,
    concurrent_only: bool,
    /// Trials of the concurrent mode (BENCH_IDLE_WINDOWS, default 16: two windows
    /// each, one without and one with `run`): enough for the verdict's sign test.
    windows: usize,
}

impl Knobs {
    fn get() -> Knobs {
        let s = short();
        Knobs {
            trials: env_u64("BENCH_IDLE_TRIALS", if s { 1 } else { 5 }) as usize,
            window_s: env_u64("BENCH_IDLE_WINDOW_S", if s { 3 } else { 10 }) as f64,
            strace_s: env_u64("BENCH_IDLE_STRACE_S", if s { 2 } else { 5 }) as f64,
            hbts: std::env::var("BENCH_IDLE_HBT")
                .ok()
                .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
                .unwrap_or_else(|| vec![100, 1000]),
            profile: std::env::var("BENCH_IDLE_PROFILE").map_or(true, |v| v != "0"),
            profile_hb: env_u64("BENCH_IDLE_PROFILE_HB", if s { 30 } else { 100 }),
            attrib: std::env::var("BENCH_IDLE_ATTRIB").is_ok_and(|v| v != "0"),
            attrib_only: std::env::var("BENCH_IDLE_ATTRIB").is_ok_and(|v| v == "only"),
            attrib_trials: env_u64("BENCH_IDLE_ATTRIB_TRIALS", if s { 1 } else { 2 }) as usize,
            concurrent: std::env::var("BENCH_IDLE_CONCURRENT").map_or(true, |v| v != "0"),
            concurrent_only: std::env::var("BENCH_IDLE_CONCURRENT").is_ok_and(|v| v == "only"),
            windows: env_u64("BENCH_IDLE_WINDOWS", if s { 1 } else { 16 }) as usize,
        }
    }

    fn window(&self, hbt_ms: u64) -> Duration {
        let scale = if hbt_ms > 100 { 2.0 } else { 1.0 };
        Duration::from_secs_f64(self.window_s * scale)
    }

    fn strace(&self, hbt_ms: u64) -> Duration {
        let scale = if hbt_ms > 100 { 2.0 } else { 1.0 };
        Duration::from_secs_f64(self.strace_s * scale)
    }
}

fn which(tool: &str) -> bool {
    sh(&["sh", "-c", &format!("command -v {tool}")])
}

// ----- the namespaces: a hub holding the bridge, one namespace per server ----------

/// The namespaces of this run, deleted when dropped (on a panic too).
struct Lab {
    /// The lab's network: 10.77.<net>.0/24 (two labs run at once in the concurrent mode).
    net: u8,
    hub: String,
    servers: Vec<String>,
    /// Threaded NAPI on every veth (the attributed mode).
    attrib: bool,
    /// Per server (attributed mode): the NAPI threads of its eth0 (its receive path)
    /// and of its peer veth on the hub (the bridge's work on what it sends).
    napi: Vec<(Vec<u32>, Vec<u32>)>,
}

/// The keepalived configuration of server `id` in lab `net` (see [`Lab::create`]):
/// VRRPv3, unicast to the two others, advert every `hbt_ms`, server 1 the highest
/// priority, the virtual address 10.77.NET.100. One text for the bench and for
/// bench/perf/lab.py, which reads it from [`KEEPALIVED_CONF_ARG`].
fn keepalived_conf(net: u8, id: u16, hbt_ms: u64) -> String {
    let addr = |id: u16| format!("10.77.{net}.{id}");
    let advert = if hbt_ms % 1000 == 0 {
        format!("{}", hbt_ms / 1000)
    } else {
        format!("{:.2}", hbt_ms as f64 / 1000.0)
    };
    let peers: String = (1..=N)
        .filter(|&p| p != id)
        .map(|p| format!("        {}\n", addr(p)))
        .collect();
    format!(
        "global_defs {{\n    router_id eidle{id}\n    vrrp_version 3\n    script_user root\n}}\n\
         vrrp_instance VI_1 {{\n    state BACKUP\n    interface eth0\n    virtual_router_id 77\n\
         \x20   priority {}\n    advert_int {advert}\n    garp_master_delay 0\n\
         \x20   unicast_src_ip {}\n    unicast_peer {{\n{peers}    }}\n\
         \x20   virtual_ipaddress {{\n        {}/{}\n    }}\n}}\n",
        200 - 50 * id,
        addr(id),
        addr(VIP_HOST),
        if net == 0 { 16 } else { 24 },
    )
}

/// `electd-bench --idle-keepalived-conf ID HBT_MS`: prints [`keepalived_conf`] of
/// server ID in lab 0 (10.77.0.0/16) and exits; 2 with a usage line on bad input.
pub const KEEPALIVED_CONF_ARG: &str = "--idle-keepalived-conf";

pub fn keepalived_conf_main(args: &[String]) -> ! {
    let id = args.first().and_then(|a| a.parse::<u16>().ok());
    let hbt = args.get(1).and_then(|a| a.parse::<u64>().ok());
    match (id, hbt) {
        (Some(id @ 1..=N), Some(hbt @ 1..)) => {
            print!("{}", keepalived_conf(0, id, hbt));
            std::process::exit(0)
        }
        _ => {
            eprintln!("usage: {KEEPALIVED_CONF_ARG} ID HBT_MS (ID 1..={N}, HBT_MS above 0)");
            std::process::exit(2)
        }
    }
}

impl Lab {
    fn ns(&self, id: u16) -> &str {
        &self.servers[usize::from(id) - 1]
    }

    fn addr(&self, id: u16) -> String {
        format!("10.77.{}.{id}", self.net)
    }

    /// keepalived's virtual address in this lab.
    fn vip(&self) -> String {
        self.addr(VIP_HOST)
    }

    /// The hub `eidle<pid>h` with bridge br0, servers `eidle<pid>s<id>` each with eth0
    /// (10.77.0.<id>/16) on it (lab `net` above 0: `eidle<pid>n<net>h`, `...s<id>`,
    /// 10.77.<net>.<id>/24), IPv6 off (no router or neighbour solicitations in the
    /// counts), and nftables counters of UDP and VRRP datagrams in and out of eth0.
    fn create(attrib: bool, net: u8) -> Result<Lab, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("needs root".into());
        }
        for tool in ["ip", "nft"] {
            if !which(tool) {
                return Err(format!("needs {tool}"));
            }
        }
        for stale in stale_netns(PREFIX) {
            let _ = sh(&["ip", "netns", "del", &stale]);
        }
        let pid = std::process::id();
        if attrib && !which("ethtool") {
            return Err("needs ethtool (`apt-get install ethtool`)".into());
        }
        let tag = if net == 0 {
            String::new()
        } else {
            format!("n{net}")
        };
        let mut lab = Lab {
            net,
            hub: format!("{PREFIX}{pid}{tag}h"),
            servers: Vec::new(),
            attrib,
            napi: Vec::new(),
        };
        let run = |args: &[&str]| -> Result<(), String> {
            if sh(args) {
                Ok(())
            } else {
                Err(format!("failed: {}", args.join(" ")))
            }
        };
        run(&["ip", "netns", "add", &lab.hub])?;
        let hub = lab.hub.clone();
        run(&["ip", "-n", &hub, "link", "set", "lo", "up"])?;
        run(&["ip", "-n", &hub, "link", "add", "br0", "type", "bridge"])?;
        run(&["ip", "-n", &hub, "link", "set", "br0", "up"])?;
        for id in 1..=N {
            let ns = format!("{PREFIX}{pid}{tag}s{id}");
            run(&["ip", "netns", "add", &ns])?;
            lab.servers.push(ns.clone());
            for sysctl in ["all", "default"] {
                let _ = sh(&[
                    "ip",
                    "netns",
                    "exec",
                    &ns,
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{sysctl}.disable_ipv6=1"),
                ]);
            }
            let v = format!("v{id}");
            run(&[
                "ip", "-n", &hub, "link", "add", &v, "type", "veth", "peer", "name", "eth0",
                "netns", &ns,
            ])?;
            run(&["ip", "-n", &hub, "link", "set", &v, "master", "br0", "up"])?;
            run(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
            run(&[
                "ip",
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/{}", lab.addr(id), if net == 0 { 16 } else { 24 }),
                "dev",
                "eth0",
            ])?;
            run(&["ip", "-n", &ns, "link", "set", "eth0", "up"])?;
            let rules = "add table inet eidle\n\
                add counter inet eidle udp_out\nadd counter inet eidle udp_in\n\
                add counter inet eidle vrrp_out\nadd counter inet eidle vrrp_in\n\
                add chain inet eidle out { type filter hook output priority 0; }\n\
                add chain inet eidle in { type filter hook input priority 0; }\n\
                add rule inet eidle out oifname \"eth0\" meta l4proto udp counter name udp_out\n\
                add rule inet eidle out oifname \"eth0\" meta l4proto 112 counter name vrrp_out\n\
                add rule inet eidle in iifname \"eth0\" meta l4proto udp counter name udp_in\n\
                add rule inet eidle in iifname \"eth0\" meta l4proto 112 counter name vrrp_in\n";
            if !common::nft_in(&ns, rules) {
                return Err(format!("nft counters in {ns}"));
            }
        }
        if attrib {
            for id in 1..=N {
                let ns = lab.ns(id).to_string();
                let own = threaded_napi(&ns, "eth0")?;
                let bridge = threaded_napi(&hub, &format!("v{id}"))?;
                lab.napi.push((own, bridge));
            }
        }
        Ok(lab)
    }

    /// Datagrams and IP bytes through eth0 of server `id` so far: (packets out, bytes
    /// out, packets in, bytes in), UDP and VRRP together.
    fn counters(&self, id: u16) -> [u64; 4] {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                self.ns(id),
                "nft",
                "list",
                "table",
                "inet",
                "eidle",
            ])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
            .unwrap_or_default();
        let mut by_name: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        let mut current: Option<String> = None;
        for line in out.lines() {
            let t: Vec<&str> = line.split_whitespace().collect();
            if t.first() == Some(&"counter") && t.len() >= 2 && t.last() == Some(&"{") {
                current = Some(t[1].to_string());
            } else if t.first() == Some(&"packets") && t.len() >= 4 {
                if let Some(name) = current.take() {
                    let p = t[1].parse().unwrap_or(0);
                    let b = t[3].parse().unwrap_or(0);
                    by_name.insert(name, (p, b));
                }
            }
        }
        let g = |n: &str| by_name.get(n).copied().unwrap_or((0, 0));
        let (uo, vo, ui, vi) = (g("udp_out"), g("vrrp_out"), g("udp_in"), g("vrrp_in"));
        [uo.0 + vo.0, uo.1 + vo.1, ui.0 + vi.0, ui.1 + vi.1]
    }

    /// True if `ip` (an address) is on eth0 of server `id`.
    fn has_addr(&self, id: u16, ip: &str) -> bool {
        Command::new("ip")
            .args(["-n", self.ns(id), "-4", "addr", "show", "dev", "eth0"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(&format!("{ip}/")))
    }
}

/// The threads whose name starts with `napi/`.
fn napi_threads() -> std::collections::BTreeSet<u32> {
    let mut out = std::collections::BTreeSet::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.starts_with("napi/") {
                out.insert(pid);
            }
        }
    }
    out
}

/// Turns on NAPI (GRO) and threaded NAPI on veth `dev` of namespace `ns`; the NAPI
/// threads that appeared (this device's: devices are set up one after the other).
fn threaded_napi(ns: &str, dev: &str) -> Result<Vec<u32>, String> {
    let before = napi_threads();
    // veth hands a datagram to the peer's NAPI only if GRO is on there and the sending
    // veth has no TSO (or the datagram is local and the peer forwards UDP GRO), see
    // veth_skb_is_eligible_for_gro(): hence tso off on every veth.
    let ok = sh(&[
        "ip", "netns", "exec", ns, "ethtool", "-K", dev, "gro", "on", "tso", "off",
    ]) && sh(&[
        "ip",
        "netns",
        "exec",
        ns,
        "sh",
        "-c",
        &format!("echo 1 > /sys/class/net/{dev}/threaded"),
    ]);
    if !ok {
        return Err(format!("threaded NAPI on {dev} in {ns}"));
    }
    let t0 = Instant::now();
    loop {
        let new: Vec<u32> = napi_threads().difference(&before).copied().collect();
        if !new.is_empty() {
            return Ok(new);
        }
        if t0.elapsed() > Duration::from_secs(2) {
            return Err(format!("no napi thread for {dev} in {ns}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in self.servers.iter().chain(std::iter::once(&self.hub)) {
            let _ = sh(&["ip", "netns", "del", ns]);
        }
    }
}

// ----- processes: accounting over a process tree, and guards that end them ----------

/// Every process whose ancestry leads to `root`, `root` included.
fn tree(root: u32) -> Vec<u32> {
    let mut parent: Vec<(u32, u32)> = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            parent.push((pid, ppid));
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parent.iter().filter(|x| x.1 == p).map(|x| x.0));
        i += 1;
    }
    out
}

/// CPU (ns on a CPU, from schedstat) and context switches (voluntary, involuntary) of
/// every thread of every process in `pids`.
#[derive(Clone, Copy, Default, Debug)]
struct Usage {
    cpu_ns: u64,
    vcsw: u64,
    ivcsw: u64,
}

impl std::ops::Sub for Usage {
    type Output = Usage;
    fn sub(self, o: Usage) -> Usage {
        Usage {
            cpu_ns: self.cpu_ns.saturating_sub(o.cpu_ns),
            vcsw: self.vcsw.saturating_sub(o.vcsw),
            ivcsw: self.ivcsw.saturating_sub(o.ivcsw),
        }
    }
}

fn usage(pids: &[u32]) -> Usage {
    let mut u = Usage::default();
    for pid in pids {
        let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in rd.flatten() {
            let p = t.path();
            let sched = std::fs::read_to_string(p.join("schedstat")).unwrap_or_default();
            u.cpu_ns += sched
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            let status = std::fs::read_to_string(p.join("status")).unwrap_or_default();
            for l in status.lines() {
                let v = || {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|v| v.parse::<u64>().ok())
                };
                if l.starts_with("voluntary_ctxt_switches:") {
                    u.vcsw += v().unwrap_or(0);
                } else if l.starts_with("nonvoluntary_ctxt_switches:") {
                    u.ivcsw += v().unwrap_or(0);
                }
            }
        }
    }
    u
}

fn alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

/// Processes this benchmark started (and their descendants): SIGTERM, a bounded wait,
/// then SIGKILL by pid, when dropped.
struct Procs(Vec<Child>);

impl Procs {
    fn stop(&mut self) {
        let mut all: Vec<u32> = Vec::new();
        for c in &self.0 {
            all.extend(tree(c.id()));
        }
        for c in &self.0 {
            common::signal(c, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        for mut c in self.0.drain(..) {
            loop {
                if c.try_wait().ok().flatten().is_some() {
                    break;
                }
                if Instant::now() > deadline {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        // Descendants left behind (a keepalived child whose parent was killed).
        for pid in all {
            if alive(pid) {
                // SAFETY: a process this benchmark started, directly or through a child.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        self.stop();
    }
}

fn tmpdir(tag: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("electd-idle-{}-{tag}-{k}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// A temp dir removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ----- the two systems ---------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum System {
    Electd,
    ElectdRun,
    /// The same, with the electd binary named by BENCH_IDLE_BEFORE (a build of an
    /// earlier commit): before and after in one run.
    Before,
    BeforeRun,
    Keepalived,
    /// The floor, receivers answering every datagram (bench/floor.rs).
    FloorAck,
    /// The floor, receivers silent.
    FloorQuiet,
}

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Electd => "electd",
            System::ElectdRun => "electd + `electctl run`",
            System::Before => "electd before",
            System::BeforeRun => "electd before + `electctl run`",
            System::Keepalived => "keepalived",
            System::FloorAck => "floor, receivers ACK",
            System::FloorQuiet => "floor, receivers silent",
        }
    }

    /// electd with `electctl run` on every server (the run tree's cost counted).
    fn runs(self) -> bool {
        matches!(self, System::ElectdRun | System::BeforeRun)
    }
}

/// The electd binary of the "before" rows (BENCH_IDLE_BEFORE), if set.
fn before_bin() -> Option<String> {
    std::env::var("BENCH_IDLE_BEFORE")
        .ok()
        .filter(|p| !p.is_empty())
}

/// The strace columns of a system's two roles.
fn strace_names(sys: System) -> (&'static str, &'static str) {
    match sys {
        System::Keepalived => ("keepalived master", "keepalived backup"),
        System::Electd => ("electd leader", "electd follower"),
        System::ElectdRun => ("electd leader (run)", "electd follower (run)"),
        System::Before => ("electd before leader", "electd before follower"),
        System::BeforeRun => ("electd before leader (run)", "electd before follower (run)"),
        System::FloorAck => ("floor sender (ACKs)", "floor receiver (ACK)"),
        System::FloorQuiet => ("floor sender (silent)", "floor receiver (silent)"),
    }
}

/// A running cluster of either system: its daemons and, for electd, its supervisors.
struct Running {
    dir: TempDir,
    daemons: Procs,
    sups: Procs,
    hbt_ms: u64,
}

/// The `--grace` of the benchmark's `electctl run`: 50 ms at heartbeats below 1 s
/// (with K = 3 and rtt 20 ms at heartbeat 100 ms, a grace of 54 ms or more keeps the
/// leader from reading at the heartbeat: grace + 20 ms must stay below lease - 2*HBT -
/// rtt), 100 ms (the default) from 1 s.
fn run_grace(hbt_ms: u64) -> u64 {
    if hbt_ms < 1000 { 50 } else { 100 }
}

fn rtt_ms(hbt_ms: u64) -> u64 {
    (hbt_ms / 5).clamp(1, 100)
}

impl Running {
    fn daemon_pid(&self, id: u16) -> u32 {
        self.daemons.0[usize::from(id) - 1].id()
    }

    fn sup_pid(&self, id: u16) -> Option<u32> {
        self.sups.0.get(usize::from(id) - 1).map(Child::id)
    }

    fn sock(&self, id: u16) -> PathBuf {
        self.dir.0.join(format!("{id}.sock"))
    }

    /// Three electd in the lab at heartbeat `hbt_ms`, log level info (the default), each
    /// under `wrap` (valgrind) when given; waits for agreement and lets it settle.
    fn electd(lab: &Lab, hbt_ms: u64, wrap: &[String], bin: &str) -> Result<Running, String> {
        let dir = TempDir(tmpdir("electd"));
        let mut text = format!("cluster idle-{}\n", std::process::id());
        for id in 1..=N {
            text += &format!("server {id} {}:{PORT} name s{id}\n", lab.addr(id));
        }
        text += &format!(
            "unicast\nheartbeat {hbt_ms}ms\nrtt {}ms\nmissed-heartbeats 3\nsocket {1}/{{id}}.sock\nstate {1}/{{id}}.state\n",
            rtt_ms(hbt_ms),
            dir.0.display()
        );
        let conf = dir.0.join("electd.conf");
        std::fs::write(&conf, text).map_err(|e| e.to_string())?;
        let mut daemons = Procs(Vec::new());
        for id in 1..=N {
            let log = std::fs::File::create(dir.0.join(format!("{id}.log")))
                .map_err(|e| e.to_string())?;
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", lab.ns(id)]);
            cmd.args(wrap.iter().map(|w| w.replace("{id}", &id.to_string())));
            cmd.arg(bin)
                .arg("--config")
                .arg(&conf)
                .args(["--id", &id.to_string(), "--log-level", "info"])
                .env_remove("RUST_LOG")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log);
            daemons
                .0
                .push(cmd.spawn().map_err(|e| format!("start electd: {e}"))?);
        }
        let r = Running {
            dir,
            daemons,
            sups: Procs(Vec::new()),
            hbt_ms,
        };
        let slow = if wrap.is_empty() { 1 } else { 10 };
        let leader = r
            .agreement(Duration::from_secs(20 * slow))
            .ok_or_else(|| format!("electd: no agreement at {hbt_ms} ms"))?;
        // Issue 25, sparse acknowledgements: a new leader asks every follower until
        // 16 heartbeats in a row were clean; measure the cluster at rest, once its
        // status says `"acks":"in_turn"` (a build without the field is at rest now).
        let t0 = Instant::now();
        let limit = Duration::from_millis(hbt_ms * 40 * slow);
        while t0.elapsed() < limit {
            let acks = request_at(&r.sock(leader), "status")
                .and_then(|s| json::parse(s.trim()).ok())
                .map(|v| v.get("acks").and_then(Value::as_str).map(str::to_string));
            let at_rest = match &acks {
                Some(Some(a)) => a == "in_turn",
                Some(None) => true,
                None => false,
            };
            if at_rest {
                break;
            }
            std::thread::sleep(Duration::from_millis(hbt_ms.min(100)));
        }
        std::thread::sleep(Duration::from_millis(2 * hbt_ms + 500));
        Ok(r)
    }

    /// The leader every electd reports, when they agree.
    fn electd_leader(&self) -> Option<u16> {
        let mut leaders = Vec::new();
        let mut views = Vec::new();
        for id in 1..=N {
            let v = json::parse(request_at(&self.sock(id), "status")?.trim()).ok()?;
            if v.get("role").and_then(Value::as_str) == Some("leader") {
                leaders.push(id);
            }
            views.push(v.get("leader").and_then(Value::as_u64));
        }
        let [l] = leaders[..] else { return None };
        views.iter().all(|v| *v == Some(u64::from(l))).then_some(l)
    }

    fn agreement(&self, within: Duration) -> Option<u16> {
        let t0 = Instant::now();
        loop {
            if let Some(l) = self.electd_leader() {
                return Some(l);
            }
            if t0.elapsed() > within {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `electctl run --grace G -- sleep infinity` against every server's socket, G
    /// from [`run_grace`].
    fn start_supervisors(&mut self) -> Result<(), String> {
        let grace = format!("{}ms", run_grace(self.hbt_ms));
        for id in 1..=N {
            let log = std::fs::File::create(self.dir.0.join(format!("run-{id}.log")))
                .map_err(|e| e.to_string())?;
            let c = Command::new(ELECTCTL)
                .arg("--socket")
                .arg(self.sock(id))
                .args(["run", "--grace", &grace, "--", "sleep", "infinity"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .map_err(|e| format!("electctl run: {e}"))?;
            self.sups.0.push(c);
        }
        std::thread::sleep(Duration::from_millis(2 * self.hbt_ms + 1000));
        Ok(())
    }

    /// Three keepalived 2.2 (VRRPv3, unicast peers, advert every `hbt_ms`), in the
    /// foreground, each with its own config and pid files in a temp dir; server 1 has
    /// the highest priority. Waits until exactly one holds the virtual address.
    fn keepalived(lab: &Lab, hbt_ms: u64) -> Result<Running, String> {
        let dir = TempDir(tmpdir("keepalived"));
        let mut daemons = Procs(Vec::new());
        for id in 1..=N {
            let conf = keepalived_conf(lab.net, id, hbt_ms);
            let d = &dir.0;
            let path = d.join(format!("keepalived-{id}.conf"));
            std::fs::write(&path, conf).map_err(|e| e.to_string())?;
            let log = std::fs::File::create(d.join(format!("keepalived-{id}.log")))
                .map_err(|e| e.to_string())?;
            let c = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    lab.ns(id),
                    "keepalived",
                    "-n",
                    "-l",
                    "-D",
                    "-P",
                ])
                .arg("-f")
                .arg(&path)
                .arg("-p")
                .arg(d.join(format!("keepalived-{id}.pid")))
                .arg("-r")
                .arg(d.join(format!("vrrp-{id}.pid")))
                .arg("-c")
                .arg(d.join(format!("checkers-{id}.pid")))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .map_err(|e| format!("start keepalived: {e}"))?;
            daemons.0.push(c);
        }
        let r = Running {
            dir,
            daemons,
            sups: Procs(Vec::new()),
            hbt_ms,
        };
        let t0 = Instant::now();
        while r.keepalived_master(lab).is_none() {
            if t0.elapsed() > Duration::from_millis(10 * hbt_ms + 5000) {
                let log =
                    std::fs::read_to_string(r.dir.0.join("keepalived-1.log")).unwrap_or_default();
                return Err(format!("keepalived: no master at {hbt_ms} ms:\n{log}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(2 * hbt_ms + 1000));
        Ok(r)
    }

    /// The floor (bench/floor.rs) in the lab: server 1 sends, the two others receive and,
    /// with `ack`, answer every datagram. Lets it settle as the others.
    fn floor(lab: &Lab, hbt_ms: u64, ack: bool) -> Result<Running, String> {
        let dir = TempDir(tmpdir("floor"));
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut daemons = Procs(Vec::new());
        for id in 1..=N {
            let role = match (id, ack) {
                // With ACKs: electd's leader's shape (one LEAD a heartbeat to the
                // followers in turn, the ACKs read at the next heartbeat).
                (1, true) => "leader",
                (1, false) => "sender",
                (_, true) => "ack",
                (_, false) => "quiet",
            };
            let log = std::fs::File::create(dir.0.join(format!("floor-{id}.log")))
                .map_err(|e| e.to_string())?;
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", lab.ns(id)]).arg(&exe).args([
                crate::floor::ARG,
                role,
                &hbt_ms.to_string(),
                &lab.addr(id),
            ]);
            if id == 1 {
                cmd.args((2..=N).map(|p| lab.addr(p)));
            }
            cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log);
            daemons
                .0
                .push(cmd.spawn().map_err(|e| format!("start floor: {e}"))?);
        }
        let mut r = Running {
            dir,
            daemons,
            sups: Procs(Vec::new()),
            hbt_ms,
        };
        std::thread::sleep(Duration::from_millis(2 * hbt_ms + 500));
        if r.floor_sender().is_none() {
            let log = std::fs::read_to_string(r.dir.0.join("floor-1.log")).unwrap_or_default();
            r.daemons.stop();
            return Err(format!("floor: a process exited at {hbt_ms} ms: {log}"));
        }
        Ok(r)
    }

    /// Server 1 while every floor process runs.
    fn floor_sender(&self) -> Option<u16> {
        self.daemons.0.iter().all(|c| alive(c.id())).then_some(1)
    }

    /// The one server holding the virtual address.
    fn keepalived_master(&self, lab: &Lab) -> Option<u16> {
        let vip = lab.vip();
        let holders: Vec<u16> = (1..=N).filter(|&id| lab.has_addr(id, &vip)).collect();
        match holders[..] {
            [m] => Some(m),
            _ => None,
        }
    }
}

// ----- one measurement window -------------------------------------------------------

/// One daemon's cost over a window: its own process tree, its supervisor's, traffic.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    daemon: Usage,
    sup: Usage,
    /// Attributed mode: the NAPI thread of the server's eth0, and of its hub veth.
    rx: Usage,
    sw: Usage,
    /// Datagrams and IP bytes sent, and received, through eth0.
    traffic: [u64; 4],
    secs: f64,
}

impl Sample {
    fn cpu_pct(&self, with_sup: bool) -> f64 {
        let ns = self.daemon.cpu_ns + if with_sup { self.sup.cpu_ns } else { 0 };
        ns as f64 / 1e9 / self.secs * 100.0
    }
    fn sup_cpu_pct(&self) -> f64 {
        self.sup.cpu_ns as f64 / 1e9 / self.secs * 100.0
    }
    fn wakeups(&self, with_sup: bool) -> f64 {
        (self.daemon.vcsw + if with_sup { self.sup.vcsw } else { 0 }) as f64 / self.secs
    }
    fn sup_wakeups(&self) -> f64 {
        self.sup.vcsw as f64 / self.secs
    }
    fn dgrams(&self) -> f64 {
        self.traffic[0] as f64 / self.secs
    }
    fn bytes(&self) -> f64 {
        self.traffic[1] as f64 / self.secs
    }
}

/// Per server: the pids of its daemon tree and supervisor tree.
fn pids_of(r: &Running, id: u16) -> (Vec<u32>, Vec<u32>) {
    (
        tree(r.daemon_pid(id)),
        r.sup_pid(id).map(tree).unwrap_or_default(),
    )
}

/// Measures every server over `window`: (leader or master, samples of servers 1..=N);
/// None when `leader` names none, or another one, at either end of the window.
fn measure(
    lab: &Lab,
    r: &Running,
    window: Duration,
    leader: &dyn Fn() -> Option<u16>,
) -> Option<(u16, Vec<Sample>)> {
    measure_at_once(&[(lab, r, leader)], window).pop().flatten()
}

/// Measures the clusters of `each` (a lab, what runs in it, who leads it) over one
/// and the same `window`: per cluster what [`measure`] gives.
#[allow(clippy::type_complexity)]
fn measure_at_once(
    each: &[(&Lab, &Running, &dyn Fn() -> Option<u16>)],
    window: Duration,
) -> Vec<Option<(u16, Vec<Sample>)>> {
    let napi = |lab: &Lab, id: u16| -> (Usage, Usage) {
        lab.napi
            .get(usize::from(id) - 1)
            .map(|(own, br)| (usage(own), usage(br)))
            .unwrap_or_default()
    };
    let l0: Vec<Option<u16>> = each.iter().map(|(_, _, leader)| leader()).collect();
    let before: Vec<Vec<_>> = each
        .iter()
        .map(|&(lab, r, _)| {
            (1..=N)
                .map(|id| {
                    let (d, s) = pids_of(r, id);
                    let n = napi(lab, id);
                    let (ud, us) = (usage(&d), usage(&s));
                    (d, s, ud, us, lab.counters(id), n)
                })
                .collect()
        })
        .collect();
    let t0 = Instant::now();
    std::thread::sleep(window);
    let after: Vec<Vec<_>> = each
        .iter()
        .zip(&before)
        .map(|(&(lab, _, _), b)| {
            b.iter()
                .enumerate()
                .map(|(i, b)| {
                    let id = i as u16 + 1;
                    (usage(&b.0), usage(&b.1), lab.counters(id), napi(lab, id))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let secs = t0.elapsed().as_secs_f64();
    each.iter()
        .zip(l0)
        .zip(before.iter().zip(after))
        .map(|((&(_, _, leader), l0), (before, after))| {
            let l0 = l0?;
            let l1 = leader()?;
            if l0 != l1 {
                eprintln!("bench idle: leader changed during the window ({l0} -> {l1})");
                return None;
            }
            let samples = before
                .iter()
                .zip(after)
                .map(|(b, a)| Sample {
                    daemon: a.0 - b.2,
                    sup: a.1 - b.3,
                    rx: a.3.0 - b.5.0,
                    sw: a.3.1 - b.5.1,
                    // Saturating: a failed read of the counters gives zeros, not a panic.
                    traffic: std::array::from_fn(|i| a.2[i].saturating_sub(b.4[i])),
                    secs,
                })
                .collect();
            Some((l0, samples))
        })
        .collect()
}

// ----- strace -------------------------------------------------------------------------

/// `strace -c -f` on `pids` for `window`: calls per syscall name.
fn strace_counts(pids: &[u32], window: Duration, out: &Path) -> Option<BTreeMap<String, u64>> {
    if pids.is_empty() {
        return None;
    }
    let mut cmd = Command::new("strace");
    cmd.args(["-c", "-f", "-qq", "-o"]).arg(out);
    for p in pids {
        cmd.args(["-p", &p.to_string()]);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    std::thread::sleep(window);
    common::signal(&child, libc::SIGINT);
    let _ = child.wait();
    let text = std::fs::read_to_string(out).ok()?;
    Some(parse_strace(&text))
}

fn parse_strace(text: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for l in text.lines() {
        let t: Vec<&str> = l.split_whitespace().collect();
        if t.len() < 5 || t[0].parse::<f64>().is_err() {
            continue;
        }
        let name = t[t.len() - 1];
        if name == "total" {
            continue;
        }
        if let Ok(calls) = t[3].parse::<u64>() {
            *m.entry(name.to_string()).or_insert(0) += calls;
        }
    }
    m
}

/// Syscalls per heartbeat of one role: (column name, calls per syscall per heartbeat).
type SyscallColumn = (String, BTreeMap<String, f64>);

/// Traces every process of `r` at once for `window`, each role into a column: leader
/// (or master) daemon, follower daemons (mean of both), and with supervisors their two
/// columns too.
fn strace_columns(
    r: &Running,
    leader: u16,
    window: Duration,
    sys: System,
) -> Result<Vec<SyscallColumn>, String> {
    let d = tmpdir("strace");
    let _guard = TempDir(d.clone());
    let hb = window.as_secs_f64() * 1000.0 / r.hbt_ms as f64;
    let mut jobs: Vec<(String, Vec<u32>, f64)> = Vec::new();
    let followers: Vec<u16> = (1..=N).filter(|&i| i != leader).collect();
    let (lname, fname) = strace_names(sys);
    jobs.push((lname.into(), tree(r.daemon_pid(leader)), 1.0));
    jobs.push((
        fname.into(),
        followers
            .iter()
            .flat_map(|&f| tree(r.daemon_pid(f)))
            .collect(),
        followers.len() as f64,
    ));
    if sys.runs() {
        jobs.push((
            format!("`electctl run` on {}", strace_names(sys).0),
            r.sup_pid(leader).map(tree).unwrap_or_default(),
            1.0,
        ));
        jobs.push((
            format!("`electctl run` on {}", strace_names(sys).1),
            followers
                .iter()
                .filter_map(|&f| r.sup_pid(f))
                .flat_map(tree)
                .collect(),
            followers.len() as f64,
        ));
    }
    // All at once, each strace in its own thread.
    let handles: Vec<_> = jobs
        .into_iter()
        .enumerate()
        .map(|(i, (name, pids, per))| {
            let out = d.join(format!("strace-{i}.txt"));
            std::thread::spawn(move || {
                strace_counts(&pids, window, &out).map(|m| {
                    (
                        name,
                        m.into_iter()
                            .map(|(k, v)| (k, v as f64 / per / hb))
                            .collect::<BTreeMap<_, _>>(),
                    )
                })
            })
        })
        .collect();
    let mut cols = Vec::new();
    for h in handles {
        match h.join() {
            Ok(Some(c)) => cols.push(c),
            _ => return Err("strace gave no summary".into()),
        }
    }
    Ok(cols)
}

// ----- the report ---------------------------------------------------------------------

/// Per (heartbeat, system): trials of (leader id, samples).
type Trials = BTreeMap<(u64, System), Vec<(u16, Vec<Sample>)>>;

fn med_range(mut v: Vec<f64>) -> (f64, f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    v.sort_by(f64::total_cmp);
    (median(&v), v[0], v[v.len() - 1])
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// The values of `f` for the leader (true) or the followers of every trial.
fn role_values(
    trials: &[(u16, Vec<Sample>)],
    leader: bool,
    f: &dyn Fn(&Sample) -> f64,
) -> Vec<f64> {
    let mut v = Vec::new();
    for (l, samples) in trials {
        for (i, s) in samples.iter().enumerate() {
            if (i as u16 + 1 == *l) == leader {
                v.push(f(s));
            }
        }
    }
    v
}

fn fmt_mr(v: Vec<f64>, prec: usize) -> String {
    let (m, lo, hi) = med_range(v);
    if m.is_nan() {
        return "-".into();
    }
    format!("{m:.prec$} ({lo:.prec$}-{hi:.prec$})")
}

/// What one mode of the lab measured: per (heartbeat, system) the trials, the strace
/// columns per heartbeat, and an idle LEAD and ACK as captured.
#[derive(Default)]
struct Measured {
    trials: Trials,
    /// The trial (0-based) of each entry of `trials`, in the same order: which
    /// measurements of two systems ran side by side, for the paired ratios.
    trial_no: BTreeMap<(u64, System), Vec<usize>>,
    sys_cols: BTreeMap<u64, Vec<SyscallColumn>>,
    capture: Option<(Vec<u8>, Vec<u8>)>,
}

impl Measured {
    /// Records trial `t`'s measurement of `sys` at `hbt`.
    fn record(&mut self, hbt: u64, sys: System, t: usize, s: (u16, Vec<Sample>)) {
        self.trials.entry((hbt, sys)).or_default().push(s);
        self.trial_no.entry((hbt, sys)).or_default().push(t);
    }

    /// Trial `t`'s measurement of `sys` at `hbt`, if it gave figures.
    fn in_trial(&self, hbt: u64, sys: System, t: usize) -> Option<&(u16, Vec<Sample>)> {
        let i = self
            .trial_no
            .get(&(hbt, sys))?
            .iter()
            .position(|&x| x == t)?;
        self.trials.get(&(hbt, sys))?.get(i)
    }
}

/// Every system of the comparison, in the order of the tables (the "before" rows
/// only when BENCH_IDLE_BEFORE names a binary).
fn systems() -> Vec<System> {
    let mut v = vec![System::Electd, System::ElectdRun];
    if before_bin().is_some() {
        v.extend([System::Before, System::BeforeRun]);
    }
    v.extend([System::Keepalived, System::FloorAck, System::FloorQuiet]);
    v
}

/// Runs `trials` trials of every system at every heartbeat in `lab`, interleaved
/// (electd, electd + run, keepalived, floor with ACKs, floor without, then again);
/// strace and the wire capture in trial 1 when `strace` is set.
fn run_trials(lab: &Lab, k: &Knobs, trials: usize, strace: bool, have_ka: bool) -> Measured {
    let mut m = Measured::default();
    let mode = if lab.attrib { "attributed" } else { "default" };
    for &hbt in &k.hbts {
        let window = k.window(hbt);
        for t in 0..trials {
            let traced = t == 0 && strace;
            // electd, then with `electctl run` on every server, on one cluster (and the
            // same for the "before" binary).
            let mut variants = vec![(ELECTD.to_string(), System::Electd, System::ElectdRun)];
            if let Some(b) = before_bin() {
                variants.push((b, System::Before, System::BeforeRun));
            }
            for (bin, plain, with_run) in variants {
                match Running::electd(lab, hbt, &[], &bin) {
                    Ok(mut r) => {
                        let lead = || r.electd_leader();
                        if let Some(s) = measure(lab, &r, window, &lead) {
                            m.record(hbt, plain, t, s);
                        }
                        if traced {
                            if m.capture.is_none() {
                                m.capture =
                                    r.electd_leader().and_then(|l| capture_lead_ack(lab, l));
                            }
                            trace_into(&mut m, &r, hbt, k, plain, r.electd_leader());
                        }
                        match r.start_supervisors() {
                            Ok(()) => {
                                let lead = || r.electd_leader();
                                if let Some(s) = measure(lab, &r, window, &lead) {
                                    m.record(hbt, with_run, t, s);
                                }
                                if traced {
                                    let l = r.electd_leader();
                                    trace_into(&mut m, &r, hbt, k, with_run, l);
                                }
                            }
                            Err(e) => eprintln!("bench idle: {e}"),
                        }
                        r.sups.stop();
                        r.daemons.stop();
                    }
                    Err(e) => eprintln!("bench idle: {e}"),
                }
            }
            if have_ka {
                match Running::keepalived(lab, hbt) {
                    Ok(mut r) => {
                        let lead = || r.keepalived_master(lab);
                        if let Some(s) = measure(lab, &r, window, &lead) {
                            m.record(hbt, System::Keepalived, t, s);
                        }
                        if traced {
                            let l = r.keepalived_master(lab);
                            trace_into(&mut m, &r, hbt, k, System::Keepalived, l);
                        }
                        r.daemons.stop();
                    }
                    Err(e) => eprintln!("bench idle: {e}"),
                }
            }
            for sys in [System::FloorAck, System::FloorQuiet] {
                match Running::floor(lab, hbt, sys == System::FloorAck) {
                    Ok(mut r) => {
                        let lead = || r.floor_sender();
                        if let Some(s) = measure(lab, &r, window, &lead) {
                            m.record(hbt, sys, t, s);
                        }
                        if traced {
                            trace_into(&mut m, &r, hbt, k, sys, r.floor_sender());
                        }
                        r.daemons.stop();
                    }
                    Err(e) => eprintln!("bench idle: {e}"),
                }
            }
            eprintln!(
                "bench idle ({mode}): heartbeat {hbt} ms, trial {} of {trials} done",
                t + 1
            );
        }
    }
    m
}

/// The concurrent mode: in each trial, electd in one lab and keepalived in a second,
/// running at the same time, are measured over one and the same window (electd
/// alone), then over a second (electd with `electctl run` on every server, keepalived
/// still running). The two labs take turns holding electd. A trial's ratio then
/// compares the two daemons under the same machine: another tenant, the frequency, or
/// the host's caches act on both at once. Trial `t`'s windows are recorded as trials
/// `2t` (electd, keepalived) and `2t + 1` (electd + run, keepalived), so
/// [`paired_cpu`] pairs each window's own figures.
fn run_concurrent(k: &Knobs) -> Result<Measured, String> {
    let labs = [Lab::create(false, 1)?, Lab::create(false, 2)?];
    let mut m = Measured::default();
    for &hbt in &k.hbts {
        let window = k.window(hbt);
        for t in 0..k.windows {
            let (le, lk) = (&labs[t % 2], &labs[1 - t % 2]);
            let mut ka = match Running::keepalived(lk, hbt) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("bench idle (concurrent): {e}");
                    continue;
                }
            };
            match Running::electd(le, hbt, &[], ELECTD) {
                Ok(mut r) => {
                    for (sys, no) in [(System::Electd, 2 * t), (System::ElectdRun, 2 * t + 1)] {
                        if sys == System::ElectdRun {
                            if let Err(e) = r.start_supervisors() {
                                eprintln!("bench idle (concurrent): {e}");
                                break;
                            }
                        }
                        let el = || r.electd_leader();
                        let kl = || ka.keepalived_master(lk);
                        let mut got = measure_at_once(&[(le, &r, &el), (lk, &ka, &kl)], window);
                        if let (Some(Some(b)), Some(Some(a))) = (got.pop(), got.pop()) {
                            m.record(hbt, sys, no, a);
                            m.record(hbt, System::Keepalived, no, b);
                        }
                    }
                    r.sups.stop();
                    r.daemons.stop();
                }
                Err(e) => eprintln!("bench idle (concurrent): {e}"),
            }
            ka.daemons.stop();
            eprintln!(
                "bench idle (concurrent): heartbeat {hbt} ms, trial {} of {} done",
                t + 1,
                k.windows
            );
        }
    }
    Ok(m)
}

/// The concurrent mode's section of the report (see [`run_concurrent`]).
fn concurrent(out: &mut String, k: &Knobs, have_ka: bool) {
    let _ = writeln!(
        out,
        "\n#### At once (BENCH_IDLE_CONCURRENT): electd and keepalived in two labs, measured over the same windows\n"
    );
    if !have_ka {
        let _ = writeln!(out, "NOT MEASURED (keepalived not installed).");
        return;
    }
    let _ = writeln!(
        out,
        "Two more labs as above (10.77.1.0/24 and 10.77.2.0/24, a bridge each). In each of {} trial(s) per heartbeat, electd runs in one lab and keepalived in the other at the same time; both are measured over one window (electd alone), then, with `electctl run` started on every electd server, over a second (keepalived still running). The labs take turns holding electd. A ratio of one window compares the two daemons under the same machine at the same moment: the sequential trials above measure them a minute apart, and this machine's cost of a heartbeat moves by a factor of two between such minutes. Window {:.0} s at heartbeat 100 ms, {:.0} s at 1 s.\n",
        k.windows,
        k.window(100).as_secs_f64(),
        k.window(1000).as_secs_f64(),
    );
    let m = match run_concurrent(k) {
        Ok(m) => m,
        Err(e) => {
            let _ = writeln!(out, "NOT MEASURED: network namespaces: {e}.");
            return;
        }
    };
    let _ = writeln!(
        out,
        "| heartbeat | system | role | CPU us per heartbeat, median (min-max) over windows |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- |");
    for &hbt in &k.hbts {
        for sys in [System::Electd, System::ElectdRun, System::Keepalived] {
            for leader in [true, false] {
                let cell = m
                    .trials
                    .get(&(hbt, sys))
                    .map_or("NOT MEASURED".into(), |tr| {
                        fmt_mr(
                            role_values(tr, leader, &|s| us_per_hb(s, sys.runs(), hbt)),
                            0,
                        )
                    });
                let _ = writeln!(
                    out,
                    "| {hbt} ms | {} | {} | {cell} |",
                    sys.name(),
                    role_name(sys, leader)
                );
            }
        }
    }
    let _ = writeln!(out, "\nCPU ratios paired by window:\n");
    let pairs = [
        (System::Electd, System::Keepalived),
        (System::ElectdRun, System::Keepalived),
    ];
    paired_table(out, k, &m, &pairs, "windows");
    let _ = writeln!(
        out,
        "\nIssue 25's criterion, from the windows measured at once (paired medians):\n"
    );
    verdict(out, k, &m, true, "windows");
}

/// strace of every process of `r` (leader `leader`), its columns added to `m`.
fn trace_into(
    m: &mut Measured,
    r: &Running,
    hbt: u64,
    k: &Knobs,
    sys: System,
    leader: Option<u16>,
) {
    let Some(l) = leader else {
        eprintln!("bench idle: strace of {} skipped: no leader", sys.name());
        return;
    };
    match strace_columns(r, l, k.strace(hbt), sys) {
        Ok(c) => m.sys_cols.entry(hbt).or_default().extend(c),
        Err(e) => eprintln!("bench idle: {e}"),
    }
}

fn role_name(sys: System, leader: bool) -> &'static str {
    match (sys, leader) {
        (System::Keepalived, true) => "master",
        (System::Keepalived, false) => "backup",
        (System::FloorAck | System::FloorQuiet, true) => "sender",
        (System::FloorAck | System::FloorQuiet, false) => "receiver",
        (_, true) => "leader",
        (_, false) => "follower",
    }
}

/// "leader / master" and the like: the roles of `a` and `b` a ratio row compares.
fn role_pair(a: System, b: System, leader: bool) -> String {
    format!("{} / {}", role_name(a, leader), role_name(b, leader))
}

/// How many paired ratios are at or below 1 (the numerator cost no more).
fn below_one(v: &[f64]) -> usize {
    v.iter().filter(|&&r| r <= 1.0).count()
}

/// The one-sided sign test's p-value: the chance of `k` or more of `n` paired ratios at
/// or below 1 if each were as likely above as below (the two daemons costing the same).
/// Small when electd is cheaper in more windows than a coin would give.
fn sign_p(k: usize, n: usize) -> f64 {
    // C(n, i) / 2^n summed over i >= k, in f64 (n is at most a few hundred windows).
    let mut c = 1.0f64; // C(n, 0)
    let mut tail = 0.0;
    for i in 0..=n {
        if i >= k {
            tail += c;
        }
        c = c * (n - i) as f64 / (i + 1) as f64;
    }
    tail / 2f64.powi(n as i32)
}

/// The significance the verdict's sign test asks for (see [`sign_p`]).
const SIGN_ALPHA: f64 = 0.05;

/// Why `sys` has no figures at `hbt`.
fn missing(sys: System, have_ka: bool) -> &'static str {
    if sys == System::Keepalived && !have_ka {
        "NOT MEASURED (keepalived not installed)"
    } else {
        "NOT MEASURED (no trial gave figures: start failed or the leader changed; see stderr)"
    }
}

/// CPU us per heartbeat of a sample's process tree (and its supervisor's if `sup`).
fn us_per_hb(s: &Sample, sup: bool, hbt: u64) -> f64 {
    s.cpu_pct(sup) / 100.0 * 1e6 * hbt as f64 / 1000.0
}

/// The strace column of `sys`'s leader or follower role at `hbt`: its total per
/// heartbeat (the daemon's; with `sup`, plus its `electctl run`'s).
fn syscalls_total(m: &Measured, hbt: u64, sys: System, leader: bool, sup: bool) -> Option<f64> {
    let cols = m.sys_cols.get(&hbt)?;
    let (l, f) = strace_names(sys);
    let name = if leader { l } else { f };
    let total = |n: &str| {
        cols.iter()
            .find(|c| c.0 == n)
            .map(|c| c.1.values().sum::<f64>())
    };
    let own = total(name)?;
    if !sup {
        return Some(own);
    }
    // The run tree's column of this system (named as `strace_columns` names it).
    let run = total(&format!("`electctl run` on {name}"))?;
    Some(own + run)
}

/// The main table: one row per (heartbeat, system, role), every row printed.
fn main_table(out: &mut String, k: &Knobs, m: &Measured, have_ka: bool) {
    let _ = writeln!(
        out,
        "| heartbeat | system | role | CPU % daemon | CPU % run | CPU % total | CPU us per heartbeat (total) | wakeups/s daemon | wakeups/s run | wakeups/s total | datagrams/s sent | IP bytes/s sent |"
    );
    let _ = writeln!(
        out,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for &hbt in &k.hbts {
        for sys in systems() {
            let tr = m.trials.get(&(hbt, sys));
            let run = sys.runs();
            for leader in [true, false] {
                let role = role_name(sys, leader);
                let Some(tr) = tr else {
                    let why = missing(sys, have_ka);
                    let _ = writeln!(
                        out,
                        "| {hbt} ms | {} | {role} | {why} | | | | | | | | |",
                        sys.name()
                    );
                    continue;
                };
                let v = |f: &dyn Fn(&Sample) -> f64| role_values(tr, leader, f);
                let dash = |s: String| if run { s } else { "-".to_string() };
                let _ = writeln!(
                    out,
                    "| {hbt} ms | {} | {role} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    sys.name(),
                    fmt_mr(v(&|s| s.cpu_pct(false)), 3),
                    dash(fmt_mr(v(&|s| s.sup_cpu_pct()), 3)),
                    fmt_mr(v(&|s| s.cpu_pct(true)), 3),
                    fmt_mr(v(&|s| us_per_hb(s, true, hbt)), 0),
                    fmt_mr(v(&|s| s.wakeups(false)), 1),
                    dash(fmt_mr(v(&|s| s.sup_wakeups()), 1)),
                    fmt_mr(v(&|s| s.wakeups(true)), 1),
                    fmt_mr(v(&|s| s.dgrams()), 1),
                    fmt_mr(v(&|s| s.bytes()), 0),
                );
            }
        }
    }
}

/// Ratios of medians, numerator system / denominator system, role by role; every row
/// printed, NOT MEASURED where either side has no figures.
fn ratio_table(out: &mut String, k: &Knobs, m: &Measured, pairs: &[(System, System)]) {
    let _ = writeln!(
        out,
        "| heartbeat | numerator | denominator | role | CPU | wakeups | datagrams | bytes |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- | --- |");
    for &hbt in &k.hbts {
        for &(a, b) in pairs {
            for leader in [true, false] {
                let role = role_pair(a, b, leader);
                let (Some(ta), Some(tb)) = (m.trials.get(&(hbt, a)), m.trials.get(&(hbt, b)))
                else {
                    let _ = writeln!(
                        out,
                        "| {hbt} ms | {} | {} | {role} | NOT MEASURED (no figures for {}) | | | |",
                        a.name(),
                        b.name(),
                        if m.trials.contains_key(&(hbt, a)) {
                            b.name()
                        } else {
                            a.name()
                        }
                    );
                    continue;
                };
                let run = a.runs();
                let ratio = |f: &dyn Fn(&Sample) -> f64| {
                    let x = med_range(role_values(ta, leader, f)).0;
                    let y = med_range(role_values(tb, leader, f)).0;
                    if y == 0.0 {
                        "inf".to_string()
                    } else {
                        format!("{:.2}", x / y)
                    }
                };
                let _ = writeln!(
                    out,
                    "| {hbt} ms | {} | {} | {role} | {} | {} | {} | {} |",
                    a.name(),
                    b.name(),
                    ratio(&|s| s.cpu_pct(run)),
                    ratio(&|s| s.wakeups(run)),
                    ratio(&|s| s.dgrams()),
                    ratio(&|s| s.bytes()),
                );
            }
        }
    }
}

/// The mean of `f` over the leader (true) or the followers of one trial.
fn role_mean(trial: &(u16, Vec<Sample>), leader: bool, f: &dyn Fn(&Sample) -> f64) -> Option<f64> {
    let v = role_values(std::slice::from_ref(trial), leader, f);
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The CPU ratios of `a` to `b` trial by trial, role `leader`: in each trial that gave
/// both figures, a's CPU (its run's included where it has one) over b's, the two
/// measured a minute apart at most on the same machine, so that what the machine did to
/// both (another tenant, the frequency, the host's cache) divides out.
fn paired_cpu(m: &Measured, hbt: u64, a: System, b: System, leader: bool) -> Vec<f64> {
    let trials = m.trial_no.get(&(hbt, a)).cloned().unwrap_or_default();
    let mut v = Vec::new();
    for t in trials {
        let (Some(ta), Some(tb)) = (m.in_trial(hbt, a, t), m.in_trial(hbt, b, t)) else {
            continue;
        };
        let x = role_mean(ta, leader, &|s| s.cpu_pct(a.runs()));
        let y = role_mean(tb, leader, &|s| s.cpu_pct(b.runs()));
        if let (Some(x), Some(y)) = (x, y) {
            if y > 0.0 {
                v.push(x / y);
            }
        }
    }
    v
}

/// Paired CPU ratios (see [`paired_cpu`]): median (min-max) over trials, and in how
/// many trials the numerator cost no more than the denominator. Every row printed,
/// NOT MEASURED where no trial gave both.
/// `unit` names what was paired: "trials" (sequential) or "windows" (at once).
fn paired_table(out: &mut String, k: &Knobs, m: &Measured, pairs: &[(System, System)], unit: &str) {
    let _ = writeln!(
        out,
        "| heartbeat | numerator | denominator | role | CPU ratio, paired: median (min-max) | {unit} at or below 1 |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
    for &hbt in &k.hbts {
        for &(a, b) in pairs {
            for leader in [true, false] {
                let role = role_pair(a, b, leader);
                let v = paired_cpu(m, hbt, a, b, leader);
                let cells = if v.is_empty() {
                    (
                        "NOT MEASURED (no trial gave both)".to_string(),
                        String::new(),
                    )
                } else {
                    (
                        fmt_mr(v.clone(), 2),
                        format!("{} of {}", below_one(&v), v.len()),
                    )
                };
                let _ = writeln!(
                    out,
                    "| {hbt} ms | {} | {} | {role} | {} | {} |",
                    a.name(),
                    b.name(),
                    cells.0,
                    cells.1
                );
            }
        }
    }
}

/// Issue 25's criterion, from the paired ratios: electd, alone and with `electctl run`
/// on every server, leader and followers, at every heartbeat measured, at or below
/// keepalived's master and backup (the paired median at most 1.00). One line per
/// check, then the verdict; NOT MEASURED without keepalived.
fn verdict(out: &mut String, k: &Knobs, m: &Measured, have_ka: bool, unit: &str) {
    // The sign test against values computed apart (sum of C(n, i) / 2^n, Python's
    // math.comb): 12 of 16 is the fewest that passes at 0.05, 11 of 16 does not.
    assert!((sign_p(12, 16) - 0.038_406_372_070_312_5).abs() < 1e-12);
    assert!((sign_p(11, 16) - 0.105_056_762_695_312_5).abs() < 1e-12);
    assert!(sign_p(0, 16) == 1.0 && (sign_p(4, 8) - 0.636_718_75).abs() < 1e-12);
    if !have_ka {
        let _ = writeln!(out, "Verdict: NOT MEASURED (keepalived not installed).");
        return;
    }
    let mut all = true;
    let mut shown = true;
    for &hbt in &k.hbts {
        for a in [System::Electd, System::ElectdRun] {
            for leader in [true, false] {
                let v = paired_cpu(m, hbt, a, System::Keepalived, leader);
                let role = role_pair(a, System::Keepalived, leader);
                let line = if v.is_empty() {
                    all = false;
                    shown = false;
                    "NOT MEASURED".to_string()
                } else {
                    let med = med_range(v.clone()).0;
                    let ok = med <= 1.0;
                    let p = sign_p(below_one(&v), v.len());
                    all &= ok;
                    shown &= ok && p <= SIGN_ALPHA;
                    format!(
                        "{med:.2} ({} of {} {unit} at or below 1, sign test p {}): {}",
                        below_one(&v),
                        v.len(),
                        fmt_p(p),
                        if !ok {
                            "ABOVE"
                        } else if p <= SIGN_ALPHA {
                            "at or below, shown"
                        } else {
                            "at or below, not shown (a coin could give it)"
                        }
                    )
                };
                let _ = writeln!(out, "- {hbt} ms, {}, {role}: {line}", a.name());
            }
        }
    }
    let hbts: Vec<String> = k.hbts.iter().map(|h| format!("{h} ms")).collect();
    let _ = writeln!(
        out,
        "\nVerdict (heartbeats {}): {}.",
        hbts.join(", "),
        if all {
            "electd at or below keepalived at every heartbeat and role, `electctl run` included (paired medians)"
        } else {
            "NOT at or below keepalived everywhere (see the lines above)"
        }
    );
    let sign = if shown {
        format!("shown: electd cheaper in more {unit} than chance would give, in every line")
    } else {
        "NOT shown in every line".to_string()
    };
    let _ = writeln!(
        out,
        "Sign test (one-sided, p at most {SIGN_ALPHA} in every line): {sign}."
    );
}

/// A p-value for the report: "< 0.001" below that (16 of 16 is 1.5e-5, not 0.000).
fn fmt_p(p: f64) -> String {
    if p < 0.001 {
        "< 0.001".into()
    } else {
        format!("= {p:.3}")
    }
}

/// One line per (heartbeat, role): CPU us per heartbeat / wakeups per second / system
/// calls per heartbeat of every system side by side.
fn summary_table(out: &mut String, k: &Knobs, m: &Measured) {
    let _ = write!(out, "| heartbeat | role |");
    for sys in systems() {
        let _ = write!(out, " {} |", sys.name());
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "|{}", " --- |".repeat(systems().len() + 2));
    for &hbt in &k.hbts {
        for leader in [true, false] {
            let _ = write!(
                out,
                "| {hbt} ms | {} |",
                if leader {
                    "leader / master / sender"
                } else {
                    "follower / backup / receiver"
                }
            );
            for sys in systems() {
                let run = sys.runs();
                let cell = match m.trials.get(&(hbt, sys)) {
                    None => "NOT MEASURED".to_string(),
                    Some(tr) => {
                        let cpu = med_range(role_values(tr, leader, &|s| us_per_hb(s, run, hbt))).0;
                        let wk = med_range(role_values(tr, leader, &|s| s.wakeups(run))).0;
                        let sc = syscalls_total(m, hbt, sys, leader, run)
                            .map_or("-".to_string(), |v| format!("{v:.2}"));
                        format!("{cpu:.0} / {wk:.1} / {sc}")
                    }
                };
                let _ = write!(out, " {cell} |");
            }
            let _ = writeln!(out);
        }
    }
}

/// The syscall tables, one per heartbeat.
fn syscall_tables(out: &mut String, k: &Knobs, m: &Measured) {
    for (hbt, cols) in &m.sys_cols {
        let _ = writeln!(
            out,
            "\nSyscalls per heartbeat at {hbt} ms (`strace -c -f -p PID...` for {:.0} s on every process at once, trial 1; per daemon, followers or receivers averaged):\n",
            k.strace(*hbt).as_secs_f64()
        );
        let names: std::collections::BTreeSet<&String> =
            cols.iter().flat_map(|c| c.1.keys()).collect();
        let _ = write!(out, "| syscall |");
        for c in cols {
            let _ = write!(out, " {} |", c.0);
        }
        let _ = writeln!(out);
        let _ = writeln!(out, "|{}", " --- |".repeat(cols.len() + 1));
        let mut rows: Vec<(&String, f64)> = names
            .iter()
            .map(|n| (*n, cols.iter().map(|c| c.1.get(*n).unwrap_or(&0.0)).sum()))
            .collect();
        rows.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (n, _) in rows {
            let _ = write!(out, "| {n} |");
            for c in cols {
                match c.1.get(n) {
                    Some(v) => {
                        let _ = write!(out, " {v:.2} |");
                    }
                    None => {
                        let _ = write!(out, " |");
                    }
                }
            }
            let _ = writeln!(out);
        }
        let _ = write!(out, "| **total** |");
        for c in cols {
            // `+ 0.0`: an empty column sums to -0.0 (the float sum's identity), printed "-0.00".
            let _ = write!(out, " **{:.2}** |", c.1.values().sum::<f64>() + 0.0);
        }
        let _ = writeln!(out);
    }
}

/// The attributed mode's table: per (heartbeat, system, role) the process tree's CPU,
/// its namespace's receive path (the NAPI thread of its eth0), their sum (what the role
/// would pay on a machine of its own), and the bridge's share (the NAPI thread of its
/// veth on the hub: the switch, nobody's on separate machines), us per heartbeat.
fn attrib_table(out: &mut String, k: &Knobs, m: &Measured, have_ka: bool) {
    let _ = writeln!(
        out,
        "| heartbeat | system | role | process (us/heartbeat) | own receive path: napi of its eth0 | process + own receive path | bridge: napi of its hub veth | wakeups/s process | wakeups/s napi eth0 |"
    );
    let _ = writeln!(
        out,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for &hbt in &k.hbts {
        for sys in systems() {
            let run = sys.runs();
            for leader in [true, false] {
                let role = role_name(sys, leader);
                let Some(tr) = m.trials.get(&(hbt, sys)) else {
                    let _ = writeln!(
                        out,
                        "| {hbt} ms | {} | {role} | {} | | | | | |",
                        sys.name(),
                        missing(sys, have_ka)
                    );
                    continue;
                };
                let per_hb = |u: &dyn Fn(&Sample) -> u64| {
                    fmt_mr(
                        role_values(tr, leader, &|s| {
                            u(s) as f64 / 1e3 / (s.secs * 1000.0 / hbt as f64)
                        }),
                        0,
                    )
                };
                let _ = writeln!(
                    out,
                    "| {hbt} ms | {} | {role} | {} | {} | {} | {} | {} | {} |",
                    sys.name(),
                    fmt_mr(role_values(tr, leader, &|s| us_per_hb(s, run, hbt)), 0),
                    per_hb(&|s| s.rx.cpu_ns),
                    per_hb(&|s| {
                        s.daemon.cpu_ns + if run { s.sup.cpu_ns } else { 0 } + s.rx.cpu_ns
                    }),
                    per_hb(&|s| s.sw.cpu_ns),
                    fmt_mr(role_values(tr, leader, &|s| s.wakeups(run)), 1),
                    fmt_mr(role_values(tr, leader, &|s| s.rx.vcsw as f64 / s.secs), 1),
                );
            }
        }
    }
}

/// Ratios of the attributed totals (process + own receive path), medians.
fn attrib_ratios(out: &mut String, k: &Knobs, m: &Measured, pairs: &[(System, System)]) {
    let _ = writeln!(
        out,
        "| heartbeat | numerator | denominator | role | process | process + own receive path |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
    for &hbt in &k.hbts {
        for &(a, b) in pairs {
            for leader in [true, false] {
                let role = role_pair(a, b, leader);
                let (Some(ta), Some(tb)) = (m.trials.get(&(hbt, a)), m.trials.get(&(hbt, b)))
                else {
                    let _ = writeln!(
                        out,
                        "| {hbt} ms | {} | {} | {role} | NOT MEASURED | |",
                        a.name(),
                        b.name()
                    );
                    continue;
                };
                let run = a.runs();
                let r = |f: &dyn Fn(&Sample, bool) -> f64| {
                    let x = med_range(role_values(ta, leader, &|s| f(s, run))).0;
                    let y = med_range(role_values(tb, leader, &|s| f(s, b.runs()))).0;
                    format!("{:.2}", x / y)
                };
                let _ = writeln!(
                    out,
                    "| {hbt} ms | {} | {} | {role} | {} | {} |",
                    a.name(),
                    b.name(),
                    r(&|s, sup| (s.daemon.cpu_ns + if sup { s.sup.cpu_ns } else { 0 }) as f64),
                    r(&|s, sup| {
                        (s.daemon.cpu_ns + if sup { s.sup.cpu_ns } else { 0 } + s.rx.cpu_ns) as f64
                    }),
                );
            }
        }
    }
}

/// The pairs of the ratio tables: electd against keepalived, electd against the floor
/// with ACKs (a protocol with one acknowledgement per heartbeat), keepalived against
/// the floor without (VRRP's shape).
/// With a "before" binary: after against before, and before against keepalived.
fn ratios() -> Vec<(System, System)> {
    let mut v = vec![
        (System::Electd, System::Keepalived),
        (System::ElectdRun, System::Keepalived),
    ];
    if before_bin().is_some() {
        v.extend([
            (System::Before, System::Keepalived),
            (System::BeforeRun, System::Keepalived),
            (System::Electd, System::Before),
            (System::ElectdRun, System::BeforeRun),
        ]);
    }
    v.extend([
        (System::Electd, System::FloorAck),
        (System::ElectdRun, System::FloorAck),
        (System::Keepalived, System::FloorQuiet),
        (System::FloorAck, System::FloorQuiet),
    ]);
    v
}

pub fn report(out: &mut String) {
    let k = Knobs::get();
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let load = |what: &str| {
        let l = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let l: Vec<&str> = l.split_whitespace().take(3).collect();
        format!("load average {what}: {}", l.join(" "))
    };
    let load0 = load("at the start");
    let start = out.len();
    let _ = writeln!(
        out,
        "\n### Cost at rest beside keepalived and the protocol floor (issue 25: 3 servers, unicast, one namespace per daemon on one bridge)\n"
    );
    let how = if k.concurrent_only {
        "only electd and keepalived measured at once (BENCH_IDLE_CONCURRENT=only: the section below)".to_string()
    } else {
        format!(
            "{} trial(s) per row, interleaved (electd, electd + `electctl run`, keepalived, floor with ACKs, floor without, then again)",
            k.trials
        )
    };
    let _ = writeln!(
        out,
        "Measured {date}, {load0}; {how}; window {:.0} s at heartbeat 100 ms, {:.0} s at 1 s. Machine: {}.\n",
        k.window(100).as_secs_f64(),
        k.window(1000).as_secs_f64(),
        crate::machine(),
    );
    let have_ka = which("keepalived");
    let have_strace = which("strace");
    let version = if have_ka {
        Command::new("keepalived")
            .arg("--version")
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .unwrap_or_default()
    } else {
        String::new()
    };
    if k.concurrent_only {
        concurrent(out, &k, have_ka);
        let _ = writeln!(out, "\n{}, {}.", load0, load("at the end"));
        write_section(&out[start..]);
        return;
    }
    if k.attrib_only {
        attributed(out, &k, have_ka);
        let _ = writeln!(out, "\n{}, {}.", load0, load("at the end"));
        return;
    }
    let lab = match Lab::create(false, 0) {
        Ok(l) => l,
        Err(e) => {
            let _ = writeln!(out, "NOT MEASURED: network namespaces: {e}.");
            return;
        }
    };
    let m = run_trials(&lab, &k, k.trials, have_strace, have_ka);
    if let Some(b) = before_bin() {
        let _ = writeln!(
            out,
            "electd before: `{b}` (BENCH_IDLE_BEFORE: a build of an earlier commit), run exactly as electd, in the same trials.\n"
        );
    }
    if have_ka {
        let _ = writeln!(
            out,
            "keepalived: {version}, VRRPv3 (`vrrp_version 3`), `unicast_peer` (the two others), `advert_int` = the heartbeat, priorities 150/100/50, one virtual address, `garp_master_delay 0`, run as `keepalived -n -l -D -P -f CONF -p PID -r PID -c PID` in each namespace.\n"
        );
    } else {
        let _ = writeln!(
            out,
            "keepalived: NOT MEASURED (not installed: `apt-get install keepalived`).\n"
        );
    }
    let _ = writeln!(
        out,
        "Floor (bench/floor.rs, a hidden mode of this bench binary), no other work than its system calls. `floor, receivers silent` (VRRP's shape): server 1 wakes on a periodic timerfd every heartbeat, reads it and sends {} bytes (an idle LEAD's UDP payload) with one sendto to each of the two others, which wait in epoll_wait, read with recvfrom until EAGAIN and send nothing. `floor, receivers ACK` (electd's shape at rest, since the tenth round of issue 25): server 1 wakes once a heartbeat on epoll_wait's timeout (its socket is not in the epoll set), reads what waits with one recvmmsg of up to 8, and sends the LEAD to one of the others, in turn, with one sendto: three system calls a heartbeat, as electd's leader; each other answers every datagram with one sendto of {} bytes (an idle ACK's) to its sender. What any protocol with electd's shape of traffic, or VRRP's, costs in this lab.\n",
        crate::floor::LEAD_LEN,
        crate::floor::ACK_LEN
    );
    let _ = writeln!(
        out,
        "Per daemon, median (min-max) over trials; a follower row pools both followers of every trial. CPU: schedstat of every thread of the process tree, % of one core; wakeups: voluntary context switches of every thread; datagrams and bytes: sent through the namespace's eth0 (nftables counters, UDP or VRRP, IP bytes: headers included). `run`: `electctl run --grace G -- sleep infinity` on every server (its tree: electctl and, on the leader, `sleep`), G = 50 ms at heartbeat 100 ms (the largest grace with which a leader may read at the heartbeat there is 54 ms: docs/PROTOCOL.md, \"Stop timers\"), 100 ms at 1 s.\n"
    );
    main_table(out, &k, &m, have_ka);
    let _ = writeln!(
        out,
        "\nSide by side, per role: CPU us per heartbeat (median) / wakeups per second / system calls per heartbeat (strace, trial 1; `+ run`: daemon and run tree together).\n"
    );
    summary_table(out, &k, &m);
    let _ = writeln!(
        out,
        "\nRatios of medians (role by role: leader, master and sender; follower, backup and receiver; the run's cost included in the `+ run` rows). A keepalived backup and a silent receiver send nothing, so their datagram and byte ratios are infinite.\n"
    );
    ratio_table(out, &k, &m, &ratios());
    let _ = writeln!(
        out,
        "\nCPU ratios paired by trial: in each trial, the numerator's CPU over the denominator's, measured in that trial a minute apart at most (the `+ run` systems with their run), followers averaged within the trial; the median of those ratios over the trials, and in how many trials the numerator cost no more. What the machine did to a trial as a whole divides out, which the ratio of medians above does not do.\n"
    );
    paired_table(out, &k, &m, &ratios(), "trials");
    let _ = writeln!(
        out,
        "\nIssue 25's criterion, from the paired medians (electd, and electd with `electctl run` on every server, CPU at rest at or below keepalived's, role by role):\n"
    );
    verdict(out, &k, &m, have_ka, "trials");
    if !have_strace {
        let _ = writeln!(out, "\nSyscalls: NOT MEASURED (strace not installed).");
    }
    syscall_tables(out, &k, &m);
    match &m.capture {
        Some((lead, ack)) => {
            crate::wire_layout::wire_layout(out, "LEAD (leader to a follower)", lead);
            crate::wire_layout::wire_layout(out, "ACK (a follower to the leader)", ack);
        }
        None => {
            let _ = writeln!(out, "\nWire capture: NOT MEASURED.");
        }
    }
    if k.profile {
        profile(out, &lab, &k);
    }
    drop(lab);
    if k.attrib {
        attributed(out, &k, have_ka);
    }
    if k.concurrent {
        concurrent(out, &k, have_ka);
    }
    let _ = writeln!(out, "\n{}, {}.", load0, load("at the end"));
    write_section(&out[start..]);
}

/// The section as printed, to paste whole (BENCH_IDLE_OUT, default target/bench-idle.md).
fn write_section(text: &str) {
    let path = std::env::var("BENCH_IDLE_OUT").unwrap_or_else(|_| "target/bench-idle.md".into());
    match std::fs::write(&path, text) {
        Ok(()) => eprintln!("bench idle: report written to {path}"),
        Err(e) => eprintln!("bench idle: cannot write {path}: {e}"),
    }
}

/// The attributed mode (BENCH_IDLE_ATTRIB=1): the same systems in a lab whose veths run
/// their receive path in threads of their own (threaded NAPI), so that a sender no
/// longer pays, in its own context, the bridge and the receiver's IP and UDP receive.
fn attributed(out: &mut String, k: &Knobs, have_ka: bool) {
    let trials = k.attrib_trials;
    let _ = writeln!(
        out,
        "\n#### Attributed mode (BENCH_IDLE_ATTRIB=1): each namespace's receive path in a thread of its own\n"
    );
    let lab = match Lab::create(true, 0) {
        Ok(l) => l,
        Err(e) => {
            let _ = writeln!(out, "NOT MEASURED: attributed lab: {e}.");
            return;
        }
    };
    let _ = writeln!(
        out,
        "A new lab, the same as above but for every veth (each server's eth0 and its peer on the hub's bridge): `ethtool -K DEV gro on` (veth then receives through NAPI instead of the backlog of the CPU that sent) and `echo 1 > /sys/class/net/DEV/threaded` (that NAPI polls in a kernel thread `napi/DEV-ID`, not in the softirq of whoever raised it). A datagram sent by server A is then handed at A's veth to the NAPI thread of A's peer on the hub (the bridge: forwarding, then the veth to B), which hands it to the NAPI thread of B's eth0 (B's IP and UDP receive, and the wakeup of B's process). The sender pays its transmit path and one thread wakeup, as it would pay its transmit path and a doorbell on a NIC. The NAPI threads' schedstat is read with the processes': `own receive path` is the thread of the server's eth0 (on separate machines the receiver's softirq), `bridge` the thread of its hub veth (a switch: on nobody's CPU). {trials} trial(s) per row, interleaved as above; no strace (the system calls do not change), no callgrind.\n"
    );
    let m = run_trials(&lab, k, trials, false, have_ka);
    attrib_table(out, k, &m, have_ka);
    let _ = writeln!(
        out,
        "\nRatios of medians in the attributed mode: the process alone, and the process with its own receive path.\n"
    );
    attrib_ratios(out, k, &m, &ratios());
}

// ----- the bytes of an idle LEAD and ACK -------------------------------------------

/// The first UDP datagram from port 7400 seen by a raw socket in namespace `ns` whose
/// payload decodes to a one-entry bundle satisfying `want`: the whole IP packet.
fn capture_in(ns: &str, want: fn(&electd::wire::Bundle) -> bool) -> Option<Vec<u8>> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(&path).ok()?;
        // SAFETY: setns on this thread only (a thread of our own, ended below), with a
        // namespace file we opened; socket/setsockopt/recv write into buffers we own.
        unsafe {
            if libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                return None;
            }
            let s = libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_UDP);
            if s < 0 {
                return None;
            }
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 200_000,
            };
            libc::setsockopt(
                s,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as u32,
            );
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut buf = [0u8; 2048];
            let mut got = None;
            while Instant::now() < deadline {
                let n = libc::recv(s, buf.as_mut_ptr().cast(), buf.len(), 0);
                if n <= 28 {
                    continue;
                }
                let p = &buf[..n as usize];
                let ihl = usize::from(p[0] & 0x0f) * 4;
                if p.len() < ihl + 8 || u16::from_be_bytes([p[ihl], p[ihl + 1]]) != PORT {
                    continue;
                }
                let payload = &p[ihl + 8..];
                if electd::wire::decode_any(payload, None, 1).is_ok_and(|b| want(&b)) {
                    got = Some(p.to_vec());
                    break;
                }
            }
            libc::close(s);
            got
        }
    })
    .join()
    .ok()
    .flatten()
}

fn is_kind(b: &electd::wire::Bundle, k: electd::wire::Kind) -> bool {
    b.entries.len() == 1 && b.entries[0].msg.body.kind() == k
}

/// An idle LEAD (captured on a follower) and ACK (captured on the leader).
fn capture_lead_ack(lab: &Lab, leader: u16) -> Option<(Vec<u8>, Vec<u8>)> {
    let follower = (1..=N).find(|&i| i != leader)?;
    let lead = capture_in(lab.ns(follower), |b| is_kind(b, electd::wire::Kind::Lead))?;
    let ack = capture_in(lab.ns(leader), |b| is_kind(b, electd::wire::Kind::Ack))?;
    Some((lead, ack))
}

// ----- callgrind ------------------------------------------------------------------------

/// Parses a callgrind output file: total Ir and calls to malloc, calloc and realloc.
fn callgrind_totals(text: &str) -> (u64, u64) {
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut total = 0;
    let mut allocs = 0;
    let mut cfn: Option<String> = None;
    for l in text.lines() {
        if let Some(v) = l
            .strip_prefix("summary:")
            .or_else(|| l.strip_prefix("totals:"))
        {
            total = total.max(
                v.split_whitespace()
                    .next()
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(0),
            );
        } else if let Some(rest) = l.strip_prefix("cfn=").or_else(|| l.strip_prefix("fn=")) {
            // "(id) name" defines a compressed name, "(id)" alone refers to it.
            let is_call = l.starts_with("cfn=");
            let name = match rest.split_once(' ') {
                Some((id, name)) => {
                    names.insert(id.to_string(), name.to_string());
                    name.to_string()
                }
                None => names.get(rest).cloned().unwrap_or_default(),
            };
            cfn = is_call.then_some(name);
        } else if let Some(rest) = l.strip_prefix("calls=") {
            if let Some(name) = cfn.take() {
                if matches!(name.as_str(), "malloc" | "calloc" | "realloc") {
                    allocs += rest
                        .split_whitespace()
                        .next()
                        .and_then(|x| x.parse::<u64>().ok())
                        .unwrap_or(0);
                }
            }
        }
    }
    (total, allocs)
}

/// The frames every cost passes through on its way to the event loop (startup, main).
fn is_startup_frame(f: &str) -> bool {
    f.starts_with("std::rt::")
        || f.starts_with("std::sys::backtrace::")
        || f.starts_with("__libc_start")
        || f.starts_with("0x")
        || matches!(f, "(below main)" | "main" | "electd::main" | "electd::run")
}

/// The top `n` functions by inclusive (or self) cost: (Ir, name). callgrind_annotate
/// splits a function by the source file of its inlined lines; the parts are summed
/// (self) or the largest taken (inclusive: a recursive or re-entered function would
/// count twice), and the startup frames above the event loop are left out.
fn callgrind_top(file: &Path, n: usize, inclusive: bool) -> Vec<(u64, String)> {
    let out = Command::new("callgrind_annotate")
        .arg(format!(
            "--inclusive={}",
            if inclusive { "yes" } else { "no" }
        ))
        .args(["--threshold=100", "--auto=no"])
        .arg(file)
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    let mut by_fn: BTreeMap<String, u64> = BTreeMap::new();
    for l in out.lines() {
        let t = l.trim_start();
        let Some((num, rest)) = t.split_once(' ') else {
            continue;
        };
        let Ok(ir) = num.replace(',', "").parse::<u64>() else {
            continue;
        };
        // "1,234 (12.34%)  file:function [object]"
        let rest = rest.trim_start();
        let rest = rest
            .strip_prefix('(')
            .and_then(|r| r.split_once(')'))
            .map_or(rest, |(_, r)| r)
            .trim();
        if rest.contains("PROGRAM TOTALS") || rest.is_empty() {
            continue;
        }
        let func = rest.split_once(':').map_or(rest, |(_, f)| f);
        let func = func.split(" [").next().unwrap_or(func).trim();
        if is_startup_frame(func) {
            continue;
        }
        let e = by_fn.entry(func.to_string()).or_insert(0);
        *e = if inclusive { (*e).max(ir) } else { *e + ir };
    }
    let mut v: Vec<(u64, String)> = by_fn.into_iter().map(|(f, ir)| (ir, f)).collect();
    v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    v.truncate(n);
    v
}

fn callgrind_control(args: &[&str], pid: u32) -> bool {
    Command::new("callgrind_control")
        .args(args)
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The newest dump of server `id` in `dir` (callgrind writes `cg-<id>.out.<n>` on each
/// `callgrind_control -d`).
fn newest_dump(dir: &Path, id: u16) -> Option<PathBuf> {
    let base = format!("cg-{id}.out.");
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let n: u32 = name.strip_prefix(&base)?.parse().ok()?;
            Some((n, e.path()))
        })
        .max()
        .map(|x| x.1)
}

fn profile(out: &mut String, lab: &Lab, k: &Knobs) {
    let hbt = 100u64;
    let hb = k.profile_hb;
    let _ = writeln!(
        out,
        "\n### Where the cycles go at rest (callgrind, heartbeat 100 ms, {hb} heartbeats)\n"
    );
    if !which("valgrind") || !which("callgrind_control") {
        let _ = writeln!(out, "NOT MEASURED: valgrind (callgrind) is not installed.");
        return;
    }
    let cgdir = TempDir(tmpdir("callgrind"));
    let wrap = vec![
        "valgrind".to_string(),
        "--tool=callgrind".to_string(),
        format!("--callgrind-out-file={}/cg-{{id}}.out", cgdir.0.display()),
    ];
    let mut r = match Running::electd(lab, hbt, &wrap, ELECTD) {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(out, "NOT MEASURED: {e}");
            return;
        }
    };
    std::thread::sleep(Duration::from_secs(2));
    let _ = writeln!(
        out,
        "Every daemon of a 3-server cluster runs under `valgrind --tool=callgrind`; once they agree and have settled, `callgrind_control -z PID` zeroes the counters, and `callgrind_control -d PID` dumps them {hb} heartbeats later. Instructions (Ir) count the same on a loaded machine. Allocations: calls to malloc, calloc and realloc in the window; datagrams: sent and received by that daemon (nftables counters).\n"
    );
    for phase in ["alone", "with `electctl run` on every server"] {
        if phase != "alone" && r.start_supervisors().is_err() {
            break;
        }
        let Some(leader) = r.electd_leader() else {
            let _ = writeln!(out, "NOT MEASURED ({phase}): no agreement under valgrind.");
            break;
        };
        let follower = (1..=N).find(|&i| i != leader).expect("a follower");
        let ids = [leader, follower];
        let c0: Vec<_> = ids.iter().map(|&i| lab.counters(i)).collect();
        for &i in &ids {
            callgrind_control(&["-z"], r.daemon_pid(i));
        }
        std::thread::sleep(Duration::from_millis(hbt * hb));
        for &i in &ids {
            callgrind_control(&["-d"], r.daemon_pid(i));
        }
        let c1: Vec<_> = ids.iter().map(|&i| lab.counters(i)).collect();
        let still = r.electd_leader() == Some(leader);
        let _ = writeln!(
            out,
            "\n#### {phase}{}\n",
            if still {
                ""
            } else {
                " (the leader changed during the window: figures unreliable)"
            }
        );
        let _ = writeln!(
            out,
            "| daemon | Ir per heartbeat | datagrams per heartbeat (sent + received) | Ir per datagram | allocations per heartbeat | allocations per datagram |"
        );
        let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
        let mut tops = Vec::new();
        for (j, &i) in ids.iter().enumerate() {
            let role = if j == 0 { "leader" } else { "follower" };
            let Some(file) = newest_dump(&cgdir.0, i) else {
                let _ = writeln!(out, "| {role} | NOT MEASURED (no dump) | | | | |");
                continue;
            };
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let (ir, allocs) = callgrind_totals(&text);
            let dg = (c1[j][0].saturating_sub(c0[j][0]) + c1[j][2].saturating_sub(c0[j][2])) as f64;
            let per = |x: f64| x / hb as f64;
            let _ = writeln!(
                out,
                "| {role} | {:.0} | {:.2} | {:.0} | {:.1} | {:.2} |",
                per(ir as f64),
                per(dg),
                ir as f64 / dg.max(1.0),
                per(allocs as f64),
                allocs as f64 / dg.max(1.0)
            );
            // Keep the dump for the table below under a stable name.
            let keep = cgdir.0.join(format!(
                "{role}-{}.out",
                phase.split(' ').next().unwrap_or("")
            ));
            let _ = std::fs::rename(&file, &keep);
            tops.push((
                role,
                ir,
                callgrind_top(&keep, 15, true),
                callgrind_top(&keep, 10, false),
            ));
        }
        for (role, ir, incl, own) in tops {
            for (what, top) in [("inclusive", incl), ("self", own)] {
                let _ = writeln!(
                    out,
                    "\nTop {} functions by {what} cost, {role} ({phase}); Ir per heartbeat and share of the total:\n",
                    top.len()
                );
                let _ = writeln!(out, "| Ir per heartbeat | % | function |");
                let _ = writeln!(out, "| --- | --- | --- |");
                for (fir, f) in top {
                    let f = f.replace('|', "\\|");
                    let f = if f.chars().count() > 140 {
                        format!("{}...", f.chars().take(137).collect::<String>())
                    } else {
                        f
                    };
                    let _ = writeln!(
                        out,
                        "| {:.0} | {:.1} | `{f}` |",
                        fir as f64 / hb as f64,
                        fir as f64 / ir.max(1) as f64 * 100.0
                    );
                }
            }
        }
    }
    r.sups.stop();
    r.daemons.stop();
    if std::env::var_os("BENCH_IDLE_KEEP_CALLGRIND").is_some() {
        let keep = std::env::temp_dir().join(format!("electd-callgrind-{}", std::process::id()));
        let _ = std::fs::rename(&cgdir.0, &keep);
        let _ = writeln!(out, "\nDumps kept in {}.", keep.display());
    }
}

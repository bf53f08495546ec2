//! The Debian package under a real systemd (issue 13, SPEC sections 12 and 16).
//!
//! Three Debian bookworm containers (systemd-nspawn, booted, on a private bridge of
//! their own with addresses in 10.77.0.0/16) each install the .deb that `cargo deb`
//! makes from this run's release binaries, and run one server: the first through
//! electd.service with `id 1` in its file, the others through the template
//! electd@ID.service with a file without `id` (server 2's socket line has `{id}`,
//! server 3's is the shipped fixed one, which its reload finds all the same). The test checks what an
//! operator relies on: installing enables nothing; the units come up READY with a
//! STATUS line and exactly one leader; `systemctl reload` applies new timers without a
//! change of role, and fails (non-zero) when the server list changed; the watchdog
//! restarts a SIGSTOPped leader while the others elect a new one; a processor under
//! `electctl run` in its own unit (the package's example unit, enabled, as a dynamic
//! user in the electd group) hands over on `systemctl restart` of the leader's
//! electd, with no two processors ever running at once (their timestamps share the
//! host's clock); the online `systemd-analyze security` exposure stays low; and the
//! package's upgrade, remove and purge do what pkg/deb says.
//!
//! `readme_operator_commands_under_systemd` boots one more container and runs the new
//! operator's first commands as README.md's "Production" section gives them (read
//! from README.md): `apt install` of the .deb (not `dpkg -i`), `--check-config` as
//! root and as the user electd (and a broken file: exit 1, its line named),
//! `systemctl enable --now`, `sudo electctl status`, the denial README quotes for a
//! user outside the group electd, and the answer once that user joined it.
//! `install_script_for_real_under_systemd` runs README's `sudo systemd/install.sh` in
//! another, without the package (its other tests use `--destdir` only): the user, the
//! directories and the units, nothing enabled; the unit runs its binary; a second run
//! restarts the running unit; `--uninstall` stops, disables and removes, keeping the
//! file and the state. `readme_polkit_rule_lets_hooks_start_and_stop_a_unit` runs
//! README's polkit rule and `systemctl --no-block` hooks under electd's unit: a unit
//! follows the lease through two yields, and a rule for another unit is refused.
//! `readme_health_check_under_systemd`, `readme_consumer_units_under_systemd` and
//! `readme_group_units_under_systemd` run README's worked example of health checks
//! (its `consumer-healthy` script as electd.service's check, its consumer unit with
//! `--max-restarts`) and the units of its election groups, as README.md gives them,
//! on three servers each: what tests/health.rs can only run with stubs.
//! `stop_lets_the_on_follower_hook_finish_under_systemd` stops a leader's unit and
//! requires its slow `on-follower` hook to have finished (the shipped TimeoutStopSec).
//!
//! Needs root, systemd-nspawn (systemd-container), debootstrap, nsenter, ip and
//! cargo-deb, and runs from `cargo test --release`. The rootfs is made once by
//! debootstrap from Debian's package registry and cached outside the repository, in
//! $ELECTD_TEST_CACHE (default /var/cache/electd-test), keyed by suite and package
//! list; each container runs on an overlay of it. A machine where the containers
//! cannot run fails with the reason: a skip would hide a broken package. Developers
//! without root set ELECTD_SKIP_SYSTEMD_TEST=1 to skip it, loudly.

mod debpkg;

use electd::json::{self, Value};
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const SKIP_ENV: &str = "ELECTD_SKIP_SYSTEMD_TEST";
/// The container tests of this file share a run directory, a zone and the package's
/// build directory (named after the process): one at a time.
static CONTAINERS: std::sync::Mutex<()> = std::sync::Mutex::new(());
const CACHE_ENV: &str = "ELECTD_TEST_CACHE";
const MIRROR_ENV: &str = "ELECTD_TEST_DEBIAN_MIRROR";
const SUITE: &str = "bookworm";
/// What debootstrap adds to minbase: an init, a bus for systemctl and systemd-analyze,
/// ip for a person debugging a kept container, adduser, which the package depends
/// on (`dpkg -i` installs no dependency), and sudo, for README's commands as README
/// gives them (`readme_operator_commands_under_systemd`).
const PACKAGES: [&str; 6] = [
    "adduser",
    "dbus",
    "iproute2",
    "sudo",
    "systemd",
    "systemd-sysv",
];
/// Installed with apt in the made rootfs, after debootstrap: polkitd, for README's
/// polkit rule (`readme_polkit_rule_lets_hooks_start_and_stop_a_unit`). debootstrap's
/// own `--include` fails on it (its postinst wants a running bus and /proc); apt in
/// the chroot completes it, warning only that nothing runs. netcat-openbsd and curl,
/// which README's health check `consumer-healthy` runs
/// (`readme_health_check_under_systemd`).
const LATER_PACKAGES: [&str; 3] = ["polkitd", "netcat-openbsd", "curl"];
/// Host tools and the Debian packages that provide them.
const TOOLS: [(&str, &str); 7] = [
    ("systemd-nspawn", "systemd-container"),
    ("debootstrap", "debootstrap"),
    ("nsenter", "util-linux"),
    ("mount", "mount"),
    ("ip", "iproute2"),
    ("dpkg-deb", "dpkg"),
    ("timeout", "coreutils"),
];
/// A marker written last into a finished rootfs: a half-made one is never used.
const COMPLETE: &str = ".electd-test-complete";

const HEARTBEAT_MS: u64 = 300;
const HEARTBEAT2_MS: u64 = 500;
const SUBNET: &str = "10.77.13";
/// The watchdog period the test sets by a drop-in (the units ship 10s).
const WATCHDOG_S: u64 = 3;
/// The bound on the online exposure score (bookworm's systemd 252 rates the units 1.1).
const MAX_EXPOSURE: f64 = 1.5;

/// The processor unit the package ships as an example (issue 23, item 1).
const PROCESSOR_EXAMPLE: &str = "/usr/share/doc/electd/examples/electd-processor.service";
/// The bound issue 23 sets on the example's exposure score.
const MAX_PROCESSOR_EXPOSURE: f64 = 3.0;

/// Elapsed time for the log: the phases' durations are part of what this test reports.
struct Clock(Instant);

impl Clock {
    fn say(&self, what: &str) {
        eprintln!("[{:6.1}s] {what}", self.0.elapsed().as_secs_f64());
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs a host command (bounded by the caller's choice of program or by `timeout`).
fn host(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

fn host_ok(cmd: &mut Command) -> String {
    let o = host(cmd);
    assert!(o.status.success(), "{cmd:?} failed: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// Polls `f` every `every` until it returns Some, or panics with `what` after `limit`.
fn wait_for<T>(
    limit: Duration,
    every: Duration,
    what: &str,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out after {limit:?}: {what}");
        std::thread::sleep(every);
    }
}

/// The Debian rootfs, made by debootstrap once and kept in the cache.
fn rootfs(clock: &Clock) -> PathBuf {
    let cache = std::env::var_os(CACHE_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/electd-test"));
    let dir = cache.join(format!(
        "{SUITE}_minbase_{}_then_{}",
        PACKAGES.join("_"),
        LATER_PACKAGES.join("_")
    ));
    if dir.join(COMPLETE).is_file() {
        clock.say(&format!("rootfs from the cache: {}", dir.display()));
        return dir;
    }
    fs::create_dir_all(&cache).unwrap_or_else(|e| panic!("{}: {e}", cache.display()));
    let tmp = cache.join(format!(".tmp-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    let mirror =
        std::env::var(MIRROR_ENV).unwrap_or_else(|_| "http://deb.debian.org/debian".into());
    clock.say(&format!(
        "debootstrap {SUITE} from {mirror} into {} (cold cache: about a minute)",
        tmp.display()
    ));
    let log = cache.join(format!(".debootstrap-{}.log", std::process::id()));
    let o = host(
        Command::new("timeout")
            .args([
                "900",
                "nice",
                "-n",
                "10",
                "debootstrap",
                "--variant=minbase",
            ])
            .arg(format!("--include={}", PACKAGES.join(",")))
            .arg(SUITE)
            .arg(&tmp)
            .arg(&mirror),
    );
    let _ = fs::write(&log, text(&o));
    if !o.status.success() {
        let t = text(&o);
        let tail: Vec<&str> = t.lines().rev().take(30).collect();
        let _ = fs::remove_dir_all(&tmp);
        panic!(
            "debootstrap failed ({}; log {}): the containers need a Debian rootfs from \
             the Debian package registry:\n{}",
            o.status,
            log.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    // The later packages, with apt in the chroot (the host's resolver for the
    // download, removed after; no service may start: policy-rc.d says no).
    let resolv = tmp.join("etc/resolv.conf");
    let had_resolv = resolv.exists();
    if !had_resolv {
        let _ = fs::copy("/etc/resolv.conf", &resolv);
    }
    let policy = tmp.join("usr/sbin/policy-rc.d");
    fs::write(&policy, "#!/bin/sh\nexit 101\n").unwrap();
    host_ok(Command::new("chmod").arg("755").arg(&policy));
    let o = host(
        Command::new("timeout")
            .arg("600")
            .arg("chroot")
            .arg(&tmp)
            .args(["sh", "-c"])
            .arg(format!(
                "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
                 --no-install-recommends {} && apt-get clean && dpkg-query -W -f '${{Status}}\\n' {}",
                LATER_PACKAGES.join(" "),
                LATER_PACKAGES.join(" ")
            )),
    );
    let _ = fs::remove_file(&policy);
    if !had_resolv {
        let _ = fs::remove_file(&resolv);
    }
    let said = text(&o);
    if !o.status.success()
        || said
            .lines()
            .filter(|l| *l == "install ok installed")
            .count()
            != LATER_PACKAGES.len()
    {
        let _ = fs::remove_dir_all(&tmp);
        panic!(
            "apt-get install {} in the new rootfs failed ({}): {said}",
            LATER_PACKAGES.join(" "),
            o.status
        );
    }
    // Every container gets a machine id of its own at boot.
    fs::write(tmp.join("etc/machine-id"), "").unwrap();
    fs::write(
        tmp.join(COMPLETE),
        format!(
            "{SUITE} {} then {}\n",
            PACKAGES.join(" "),
            LATER_PACKAGES.join(" ")
        ),
    )
    .unwrap();
    if dir.exists() && !dir.join(COMPLETE).is_file() {
        // A rootfs without the marker was left half-made (or by hand): replace it.
        let _ = fs::remove_dir_all(&dir);
    }
    if fs::rename(&tmp, &dir).is_err() {
        // Another run finished first: use its copy.
        let _ = fs::remove_dir_all(&tmp);
        assert!(
            dir.join(COMPLETE).is_file(),
            "cannot move the rootfs to {}",
            dir.display()
        );
    }
    let _ = fs::remove_file(&log);
    clock.say("rootfs made and cached");
    dir
}

/// One booted container running one electd server.
struct Machine {
    id: u8,
    name: String,
    dir: PathBuf,
    nspawn: Option<Child>,
    /// The container's PID 1 (its systemd) in the host's PID namespace.
    pid1: i32,
    mounted: bool,
    unit: String,
    socket: String,
}

impl Machine {
    fn root(&self) -> PathBuf {
        self.dir.join("root")
    }

    fn addr(&self) -> String {
        format!("{SUBNET}.{}", self.id)
    }

    /// `sh -c script` inside the container (every namespace of its PID 1), bounded.
    fn run(&self, script: &str) -> Output {
        host(
            Command::new("timeout")
                .args(["-k", "5", "60", "nsenter", "-a", "-t"])
                .arg(self.pid1.to_string())
                .args(["/bin/sh", "-c", script])
                .env_clear()
                .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
                .env("LANG", "C")
                .env("SYSTEMD_COLORS", "0"),
        )
    }

    /// Like run, and the script must succeed; its standard output.
    fn ok(&self, script: &str) -> String {
        let o = self.run(script);
        assert!(
            o.status.success(),
            "{}: `{script}` failed ({}): {}",
            self.name,
            o.status,
            text(&o)
        );
        String::from_utf8_lossy(&o.stdout).to_string()
    }

    /// A file inside the container, written from the host through the overlay.
    fn write(&self, path: &str, content: &str) {
        let p = self.root().join(path.trim_start_matches('/'));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, content).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    }

    fn read(&self, path: &str) -> String {
        let p = self.root().join(path.trim_start_matches('/'));
        fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    fn exists(&self, path: &str) -> bool {
        self.root().join(path.trim_start_matches('/')).exists()
    }

    /// `systemctl show -p NAME --value UNIT`.
    fn prop(&self, unit: &str, name: &str) -> String {
        self.ok(&format!("systemctl show -p {name} --value {unit}"))
            .trim()
            .to_string()
    }

    /// This server's `status` line, or None while its socket does not answer.
    fn status(&self) -> Option<Value> {
        self.status_of("")
    }

    /// This server's `status GROUP` line (`""`: the only group), or None while its
    /// socket does not answer.
    fn status_of(&self, group: &str) -> Option<Value> {
        let o = self.run(&format!(
            "electctl --socket {} status {group} --json",
            self.socket
        ));
        if !o.status.success() {
            return None;
        }
        json::parse(String::from_utf8_lossy(&o.stdout).trim()).ok()
    }

    fn journal(&self, unit: &str) -> String {
        let o = self.run(&format!("journalctl --no-pager -o cat -u {unit}"));
        String::from_utf8_lossy(&o.stdout).to_string()
    }

    fn main_pid(&self) -> u32 {
        self.prop(&self.unit, "MainPID").parse().unwrap()
    }
}

/// The containers of one run and everything they need; Drop tears all of it down,
/// also when the test fails.
struct Cluster {
    clock: Clock,
    zone: String,
    dir: PathBuf,
    machines: Vec<Machine>,
}

impl Cluster {
    fn new(clock: Clock) -> Cluster {
        // A name of our own for this run: zones (bridge vz-NAME) and veths (vb-NAME)
        // are interface names, at most 15 bytes.
        let tag = format!("e{:05x}", std::process::id() & 0xf_ffff);
        reap_stale_runs(&clock);
        let dir = work_root().join(format!("{RUN_PREFIX}{tag}"));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("shared")).unwrap();
        fs::create_dir_all(dir.join("deb")).unwrap();
        fs::create_dir_all(dir.join("checkout")).unwrap();
        fs::write(dir.join("owner"), std::process::id().to_string()).unwrap();
        Cluster {
            clock,
            zone: tag,
            dir,
            machines: Vec::new(),
        }
    }

    fn boot(&mut self, rootfs: &Path, n: u8) {
        for id in 1..=n {
            let name = format!("{}n{id}", self.zone);
            let dir = self.dir.join(&name);
            for d in ["upper", "work", "root"] {
                fs::create_dir_all(dir.join(d)).unwrap();
            }
            let mut m = Machine {
                id,
                name: name.clone(),
                dir: dir.clone(),
                nspawn: None,
                pid1: 0,
                mounted: false,
                unit: if id == 1 {
                    "electd.service".into()
                } else {
                    format!("electd@{id}.service")
                },
                // Server 3 runs the template with the shipped `socket` line (no {id}):
                // its reload must find it all the same (issue 23, item 6).
                socket: if id == 2 {
                    format!("/run/electd/electd-{id}.sock")
                } else {
                    "/run/electd/electd.sock".into()
                },
            };
            host_ok(
                Command::new("mount")
                    .args(["-t", "overlay", "overlay", "-o"])
                    .arg(format!(
                        "lowerdir={},upperdir={},workdir={}",
                        rootfs.display(),
                        dir.join("upper").display(),
                        dir.join("work").display()
                    ))
                    .arg(dir.join("root")),
            );
            m.mounted = true;
            let log = fs::File::create(dir.join("boot.log")).unwrap();
            // Each container in a cgroup of its own (see `own_cgroup`), entered by the
            // shell that then becomes systemd-nspawn.
            let mut cmd = match own_cgroup(&name) {
                Some(join) => {
                    let mut c = Command::new("sh");
                    c.args(["-c", &format!("{join} && exec \"$0\" \"$@\"")])
                        .arg("systemd-nspawn");
                    c
                }
                None => Command::new("systemd-nspawn"),
            };
            let child = cmd
                .arg("-D")
                .arg(dir.join("root"))
                .args(["-b", "--register=no", "--keep-unit", "--console=read-only"])
                .arg(format!("--machine={name}"))
                .arg(format!("--network-zone={}", self.zone))
                .arg(format!(
                    "--bind={}:/shared",
                    self.dir.join("shared").display()
                ))
                .arg(format!("--bind-ro={}:/deb", self.dir.join("deb").display()))
                .arg(format!(
                    "--bind-ro={}:/checkout",
                    self.dir.join("checkout").display()
                ))
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start systemd-nspawn: {e}"));
            let _ = fs::write(dir.join("nspawn.pid"), child.id().to_string());
            m.nspawn = Some(child);
            self.machines.push(m);
        }
        for i in 0..self.machines.len() {
            let pid1 = self.find_pid1(i);
            self.machines[i].pid1 = pid1;
            let _ = fs::write(self.machines[i].dir.join("pid1"), pid1.to_string());
        }
        for m in &self.machines {
            // Until its systemd listens, systemctl cannot connect; then --wait blocks
            // until the boot is over.
            let o = wait_for(
                Duration::from_secs(60),
                Duration::from_millis(200),
                &format!("{}: systemd to answer systemctl", m.name),
                || {
                    // "offline" (or "unknown"): asked before the container's systemd
                    // took connections (a fresh-clone CI run once asked 1 s in); ask again.
                    let o = m.run("timeout 120 systemctl is-system-running --wait");
                    let state = String::from_utf8_lossy(&o.stdout).trim().to_string();
                    (!state.is_empty() && state != "offline" && state != "unknown").then_some(o)
                },
            );
            let state = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if state != "running" {
                // degraded: a unit of the image failed (the host's cgroup v1 can cause
                // that); electd's units are what this test is about, so say which.
                let failed = m.run("systemctl --failed --no-legend --plain");
                assert!(
                    state == "degraded",
                    "{} did not boot ({state}): {}\n{}",
                    m.name,
                    text(&o),
                    self.boot_log(m)
                );
                eprintln!("{}: degraded: {}", m.name, text(&failed).trim());
            }
        }
        self.clock.say(&format!("{n} container(s) booted"));
        // The bridge is ours (named after this run); the containers' ends get addresses.
        host_ok(Command::new("ip").args(["link", "set", &format!("vz-{}", self.zone), "up"]));
        for m in &self.machines {
            let pid = m.pid1.to_string();
            host_ok(
                Command::new("nsenter")
                    .args(["-n", "-t", &pid, "ip", "addr", "add"])
                    .arg(format!("{}/16", m.addr()))
                    .args(["dev", "host0"]),
            );
            host_ok(
                Command::new("nsenter")
                    .args(["-n", "-t", &pid, "ip", "link", "set", "host0", "up"]),
            );
        }
    }

    /// The container's systemd: the child of systemd-nspawn once it runs systemd.
    fn find_pid1(&mut self, i: usize) -> i32 {
        let ns = self.machines[i].nspawn.as_ref().unwrap().id() as i32;
        let name = self.machines[i].name.clone();
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(pid) = children(ns).into_iter().find(|&p| {
                fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "systemd")
            }) {
                return pid;
            }
            if let Ok(Some(st)) = self.machines[i].nspawn.as_mut().unwrap().try_wait() {
                panic!(
                    "systemd-nspawn for {name} exited ({st}):\n{}",
                    self.boot_log(&self.machines[i])
                );
            }
            assert!(
                Instant::now() < end,
                "{name}: no systemd under systemd-nspawn after 30s:\n{}",
                self.boot_log(&self.machines[i])
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn boot_log(&self, m: &Machine) -> String {
        let t = fs::read_to_string(m.dir.join("boot.log")).unwrap_or_default();
        let lines: Vec<&str> = t.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    fn proc_log(&self) -> String {
        self.log_of("proc")
    }

    /// The shared log `/shared/NAME.log` of PROC_SH's processors.
    fn log_of(&self, name: &str) -> String {
        fs::read_to_string(self.dir.join(format!("shared/{name}.log"))).unwrap_or_default()
    }

    /// PROC_SH in /shared, and its logs `/shared/NAME.log` for each of `logs`, empty and
    /// writable by the processors' dynamic users.
    fn share_processor(&self, logs: &[&str]) {
        use std::os::unix::fs::PermissionsExt;
        fs::write(self.dir.join("shared/proc.sh"), PROC_SH).unwrap();
        for name in logs {
            let log = self.dir.join(format!("shared/{name}.log"));
            fs::write(&log, "").unwrap();
            fs::set_permissions(&log, fs::Permissions::from_mode(0o666)).unwrap();
        }
    }

    /// Polls every server until exactly one leads and all agree on it and its term.
    fn settle(&self, limit: Duration) -> (u8, u64) {
        self.settle_group(limit, "")
    }

    /// `settle` in election group `group` (`""`: the only group).
    fn settle_group(&self, limit: Duration, group: &str) -> (u8, u64) {
        let end = Instant::now() + limit;
        loop {
            let st: Vec<Option<Value>> = self.machines.iter().map(|m| m.status_of(group)).collect();
            let last = format!("{st:?}");
            let leaders: Vec<u8> = self
                .machines
                .iter()
                .zip(&st)
                .filter(|(_, s)| {
                    s.as_ref()
                        .and_then(|s| s.get("role")?.as_str().map(str::to_string))
                        .as_deref()
                        == Some("leader")
                })
                .map(|(m, _)| m.id)
                .collect();
            if let ([l], Some(all)) = (
                leaders.as_slice(),
                st.iter().cloned().collect::<Option<Vec<Value>>>(),
            ) {
                let term = all[0].get("term").and_then(Value::as_u64);
                let agree = all.iter().all(|s| {
                    s.get("leader").and_then(Value::as_u64) == Some(u64::from(*l))
                        && s.get("term").and_then(Value::as_u64) == term
                });
                if agree {
                    return (*l, term.unwrap());
                }
            }
            assert!(
                Instant::now() < end,
                "no single agreed leader within {limit:?} (servers that never hear each other: \
                 does the host's firewall drop bridged traffic? net.bridge.bridge-nf-call-iptables \
                 with a FORWARD policy of DROP does): {last}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The agreed leader of `group` once it is another server than `old` (after `why`).
    fn next_leader(&self, old: u8, group: &str, why: &str) -> u8 {
        wait_for(
            Duration::from_secs(30),
            Duration::from_millis(200),
            &format!("a leader other than {old} after {why}"),
            || {
                let (l, _) = self.settle_group(Duration::from_secs(30), group);
                (l != old).then_some(l)
            },
        )
    }

    fn machine(&self, id: u8) -> &Machine {
        &self.machines[usize::from(id - 1)]
    }
}

/// Each run's directory in the temporary directory: electd-systemd-TAG.
const RUN_PREFIX: &str = "electd-systemd-";

fn alive(pid: i32) -> bool {
    pid > 0 && unsafe { libc::kill(pid, 0) } == 0
}

fn comm(pid: i32) -> String {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn pid_file(p: &Path) -> Option<i32> {
    fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// The hierarchies where systemd tracks processes on a host whose PID 1 is not
/// systemd: the compat `name=systemd` one (cgroup v1) and, on a hybrid host, the
/// cgroup2 mount it uses first.
const SYSTEMD_CGROUPS: [&str; 2] = ["/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"];

/// A cgroup of its own for container `name`, made in every hierarchy of
/// `SYSTEMD_CGROUPS` that exists; returns the shell line that moves the calling shell
/// into all of them. With `--keep-unit`, systemd-nspawn puts the container in
/// `payload` and itself in `supervisor` under its caller's cgroup and removes them
/// when it exits: three containers started from one test process (the root cgroup)
/// shared those two cgroups, raced over them and failed to start ("Failed to attach
/// ... to compat systemd cgroup //payload").
fn own_cgroup(name: &str) -> Option<String> {
    let mut join = Vec::new();
    for root in SYSTEMD_CGROUPS {
        if !Path::new(root).join("cgroup.procs").exists() {
            continue;
        }
        let cg = Path::new(root).join(format!("{RUN_PREFIX}{name}"));
        fs::create_dir_all(&cg).ok()?;
        join.push(format!("echo $$ > '{}/cgroup.procs'", cg.display()));
    }
    (!join.is_empty()).then(|| join.join(" && "))
}

/// Removes the cgroups `own_cgroup` made whose run is over (`tag`: one run's, or None
/// for every run's), leaves first; a cgroup that still holds a process stays.
fn remove_cgroups(tag: Option<&str>) {
    fn rm_tree(p: &Path) {
        for e in fs::read_dir(p).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                rm_tree(&e.path());
            }
        }
        let _ = fs::remove_dir(p);
    }
    for root in SYSTEMD_CGROUPS {
        for e in fs::read_dir(root).into_iter().flatten().flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            let Some(rest) = n.strip_prefix(RUN_PREFIX) else {
                continue;
            };
            if tag.is_none_or(|t| rest.starts_with(t)) {
                rm_tree(&e.path());
            }
        }
    }
}

/// What an earlier run left when its test process was killed before Drop could run
/// (a CI timeout, a ^C): its containers, overlay mounts, bridge and directory. Only
/// runs whose owner process is gone are touched, and only processes that still are
/// the systemd-nspawn and systemd that run recorded.
fn reap_stale_runs(clock: &Clock) {
    let Ok(entries) = fs::read_dir(work_root()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(tag) = name.strip_prefix(RUN_PREFIX).map(str::to_string) else {
            continue;
        };
        let dir = e.path();
        match pid_file(&dir.join("owner")) {
            Some(owner) if alive(owner) => continue,
            Some(_) => {}
            // Being made right now by another run, or older debris.
            None if dir
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().unwrap_or_default() < Duration::from_secs(60)) =>
            {
                continue;
            }
            None => {}
        }
        clock.say(&format!("cleaning up a killed run: {}", dir.display()));
        for m in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let md = m.path();
            for (file, prog) in [("nspawn.pid", "systemd-nspawn"), ("pid1", "systemd")] {
                if let Some(pid) = pid_file(&md.join(file)).filter(|&p| comm(p) == prog) {
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            if md.join("root").is_dir() {
                let _ = Command::new("umount")
                    .arg("-l")
                    .arg(md.join("root"))
                    .output();
            }
        }
        let _ = Command::new("ip")
            .args(["link", "del", &format!("vz-{tag}")])
            .output();
        let _ = fs::remove_dir_all(&dir);
        remove_cgroups(Some(&tag));
    }
}

/// The pids whose parent is `parent`.
fn children(parent: i32) -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            // /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces.
            fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
                s.rsplit_once(") ")
                    .and_then(|(_, rest)| rest.split(' ').nth(1)?.parse::<i32>().ok())
                    == Some(parent)
            })
        })
        .collect()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for m in &self.machines {
                if m.pid1 > 0 {
                    let j = m.run("journalctl --no-pager -n 60 -u 'electd*'");
                    eprintln!("--- {} journal (electd units):\n{}", m.name, text(&j));
                }
                eprintln!("--- {} boot log (tail):\n{}", m.name, self.boot_log(m));
            }
            let p = self.proc_log();
            let tail: Vec<&str> = p.lines().filter(|l| !l.contains(" T ")).collect();
            eprintln!("--- processor starts and ends:\n{}", tail.join("\n"));
        }
        // Ask every container to shut down (nspawn turns SIGTERM into a poweroff) ...
        for m in &self.machines {
            if let Some(c) = &m.nspawn {
                unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            }
        }
        let end = Instant::now() + Duration::from_secs(15);
        for m in &mut self.machines {
            if let Some(mut c) = m.nspawn.take() {
                while Instant::now() < end && matches!(c.try_wait(), Ok(None)) {
                    std::thread::sleep(Duration::from_millis(50));
                }
                if matches!(c.try_wait(), Ok(None)) {
                    // ... and kill what did not: PID 1 takes its whole namespace along.
                    eprintln!("{}: no clean shutdown within 15s; killing it", m.name);
                    if m.pid1 > 0 {
                        unsafe { libc::kill(m.pid1, libc::SIGKILL) };
                    }
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
            if m.mounted {
                let root = m.dir.join("root");
                let ok = Command::new("umount")
                    .arg(&root)
                    .status()
                    .is_ok_and(|s| s.success());
                if !ok {
                    let _ = Command::new("umount").arg("-l").arg(&root).status();
                }
                m.mounted = false;
            }
        }
        // systemd-nspawn removes the zone's bridge with its last container; make sure.
        let bridge = format!("vz-{}", self.zone);
        if Path::new("/sys/class/net").join(&bridge).exists() {
            let _ = Command::new("ip").args(["link", "del", &bridge]).status();
        }
        if std::env::var_os("ELECTD_KEEP_SYSTEMD_TEST").is_none() {
            let _ = fs::remove_dir_all(&self.dir);
        }
        remove_cgroups(Some(&self.zone));
        self.clock.say("containers torn down");
    }
}

/// Why this test cannot run here, for the failure message; None when it can.
fn missing_prerequisites() -> Option<String> {
    if unsafe { libc::geteuid() } != 0 {
        return Some(format!(
            "it needs root (to mount, boot containers with systemd-nspawn and make a \
             bridge); run cargo test --release as root, or set {SKIP_ENV}=1 to skip it"
        ));
    }
    let missing: Vec<&str> = TOOLS
        .iter()
        .filter(|(tool, _)| !have(tool))
        .map(|(_, pkg)| *pkg)
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "missing host tools: apt-get install {}",
            missing.join(" ")
        ));
    }
    debpkg::unavailable()
}

/// One run of a processor (`electctl run`) as it logged itself on the shared file.
#[derive(Debug, Clone)]
struct ProcRun {
    id: u8,
    term: u64,
    start: u128,
    /// Its `E` line (a clean stop on SIGTERM), else its last tick.
    end: u128,
    stopped: bool,
}

/// Lines: "ID S NS TERM" at start, "ID T NS" every 50 ms, "ID E NS" on SIGTERM, "ID X
/// NS" on a crash.
fn proc_runs(log: &str) -> Vec<ProcRun> {
    let mut done = Vec::new();
    let mut open: Vec<Option<ProcRun>> = vec![None; 4];
    for line in log.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (Some(id), Some(ns)) = (
            w.first()
                .and_then(|v| v.parse::<u8>().ok())
                .filter(|i| (1..=3).contains(i)),
            w.get(2).and_then(|v| v.parse::<u128>().ok()),
        ) else {
            continue;
        };
        let slot = &mut open[usize::from(id)];
        match w[1] {
            "S" => {
                if let Some(r) = slot.take() {
                    done.push(r);
                }
                let term = w.get(3).and_then(|v| v.parse().ok()).unwrap_or(0);
                *slot = Some(ProcRun {
                    id,
                    term,
                    start: ns,
                    end: ns,
                    stopped: false,
                });
            }
            "T" => {
                if let Some(r) = slot.as_mut() {
                    r.end = r.end.max(ns);
                }
            }
            "E" | "X" => {
                if let Some(mut r) = slot.take() {
                    r.end = r.end.max(ns);
                    r.stopped = w[1] == "E";
                    done.push(r);
                }
            }
            _ => {}
        }
    }
    done.extend(open.into_iter().flatten());
    done.sort_by_key(|r| r.start);
    done
}

/// No two processors ran at once, and each new leadership's term is higher (S5, S3).
fn assert_no_overlap(runs: &[ProcRun]) {
    if let Err(e) = overlap(runs) {
        panic!("{e}");
    }
}

/// In start order, each run's successor starts after it ended: then no two overlap.
fn overlap(runs: &[ProcRun]) -> Result<(), String> {
    for w in runs.windows(2) {
        if w[1].start <= w[0].end {
            return Err(format!(
                "two processors ran at once: {:?} and {:?}",
                w[0], w[1]
            ));
        }
        if w[1].id != w[0].id && w[1].term <= w[0].term {
            return Err(format!("terms did not grow: {:?} then {:?}", w[0], w[1]));
        }
    }
    Ok(())
}

fn config(id: Option<u8>, socket: &str, heartbeat_ms: u64) -> String {
    let mut c = String::from("cluster systemd-test\n");
    for i in 1..=3 {
        c.push_str(&format!("server {i} {SUBNET}.{i}:7400 name n{i}\n"));
    }
    if let Some(id) = id {
        c.push_str(&format!("id {id}\n"));
    }
    c.push_str(&format!(
        "unicast\nheartbeat {heartbeat_ms}ms\nrtt 100ms\nmissed-heartbeats 3\nsocket {socket}\nstate /var/lib/electd/{{id}}.state\n"
    ));
    c
}

/// The processor: logs its start (with the term electctl run hands it), a tick every
/// 50 ms, and its stop on SIGTERM, to a file every container shares (`proc.log`, or
/// `NAME.log` for the processor of election group NAME, its second argument). It
/// crashes (exit 1, an `X` line) at once and at every start while `/shared/crash.ID`
/// exists: a consumer that cannot run (`readme_consumer_units_under_systemd`).
const PROC_SH: &str = r#"#!/bin/sh
f=/shared/${2:-proc}.log
echo "$1 S $(date +%s%N) $ELECTD_TERM" >> $f
trap 'echo "$1 E $(date +%s%N)" >> $f; exit 0' TERM
while [ ! -e /shared/crash.$1 ]; do echo "$1 T $(date +%s%N)" >> $f; sleep 0.05; done
echo "$1 X $(date +%s%N)" >> $f
exit 1
"#;

fn lease_samples(m: &Machine, n: usize) -> Vec<u64> {
    (0..n)
        .filter_map(|_| {
            std::thread::sleep(Duration::from_millis(100));
            m.status()?.get("lease_ms")?.as_u64()
        })
        .collect()
}

fn exposure(m: &Machine, unit: &str) -> f64 {
    debpkg::exposure_score(&m.ok(&format!("systemd-analyze security {unit} 2>&1")))
}

/// Where the containers' overlays live: /var/tmp, on disk, whatever TMPDIR says. With
/// the overlay on a tmpfs (CI points TMPDIR at /dev/shm) the containers' systemd never
/// came up ("offline").
fn work_root() -> PathBuf {
    PathBuf::from("/var/tmp")
}

/// The start of each container test: None (and a loud line) when the developer's
/// SKIP_ENV skips it; a panic naming what is missing when it cannot run (a skip would
/// hide a broken package); else the lock that keeps the container tests one at a time.
fn container_test(what: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    if std::env::var_os(SKIP_ENV).is_some() {
        eprintln!(
            "\n********\nSKIPPED: {what} (tests/systemd_deb.rs) did NOT run because \
             {SKIP_ENV} is set. CI runs it.\n********\n"
        );
        return None;
    }
    if let Some(why) = missing_prerequisites() {
        panic!("the systemd container test cannot run: {why}");
    }
    Some(CONTAINERS.lock().unwrap_or_else(|e| e.into_inner()))
}

/// N booted containers with this run's .deb built and visible in each at the path
/// returned (not installed).
fn booted_with_deb(n: u8) -> (Cluster, String) {
    let clock = Clock(Instant::now());
    let fs_root = rootfs(&clock);
    let mut c = Cluster::new(clock);
    let deb = debpkg::build(&c.dir.join("deb")).unwrap_or_else(|e| panic!("{e}"));
    let deb_in = format!("/deb/{}", deb.file_name().unwrap().to_string_lossy());
    c.clock.say(&format!("built {}", deb.display()));
    c.boot(&fs_root, n);
    (c, deb_in)
}

/// README.md's text with its lines joined: prose wraps anywhere.
fn prose(readme: &str) -> String {
    readme.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn debian_package_under_systemd() {
    let Some(_one) = container_test("the Debian package under systemd") else {
        return;
    };
    let (c, deb_in) = booted_with_deb(3);

    // Installing creates the user and directories and enables nothing.
    for m in &c.machines {
        m.ok(&format!("dpkg -i {deb_in}"));
    }
    let m1 = c.machine(1);
    assert!(
        m1.ok("getent passwd electd")
            .contains(":/var/lib/electd:/usr/sbin/nologin")
    );
    assert_eq!(
        m1.ok("stat -c '%U:%G %a' /var/lib/electd").trim(),
        "electd:electd 750"
    );
    for unit in ["electd.service", "electd@1.service"] {
        assert_eq!(m1.prop(unit, "UnitFileState"), "disabled", "{unit}");
        assert_eq!(m1.prop(unit, "ActiveState"), "inactive", "{unit}");
    }
    assert!(
        m1.ok("ls /etc/systemd/system/multi-user.target.wants/")
            .lines()
            .all(|l| !l.starts_with("electd"))
    );
    assert!(m1.exists("/usr/share/man/man8/electd.8.gz"));
    c.clock
        .say("package installed on 3; nothing enabled or started");

    // The operator's files: server 1 names its id, 2 and 3 share one without it.
    c.share_processor(&["proc"]);
    for m in &c.machines {
        let conf = match m.id {
            1 => config(Some(1), &m.socket, HEARTBEAT_MS),
            2 => config(None, "/run/electd/electd-{id}.sock", HEARTBEAT_MS),
            _ => config(None, &m.socket, HEARTBEAT_MS),
        };
        m.write("/etc/electd/electd.conf", &conf);
        // A shorter watchdog for the test, and no core file from its SIGABRT.
        let dropin = if m.id == 1 {
            "electd.service.d"
        } else {
            "electd@.service.d"
        };
        m.write(
            &format!("/etc/systemd/system/{dropin}/test.conf"),
            &format!("[Service]\nWatchdogSec={WATCHDOG_S}s\nLimitCORE=0\n"),
        );
        // The processor in a unit of its own: the example the package ships, made into
        // a unit as README says (the template's unit name and socket on 2 and 3), with
        // the test's processor, a grace that fits its short lease, and its log.
        m.write(
            "/usr/local/bin/processor",
            &format!("#!/bin/sh\nexec /bin/sh /shared/proc.sh {}\n", m.id),
        );
        m.ok("chmod 755 /usr/local/bin/processor");
        let socket = if m.id == 1 {
            String::new()
        } else {
            format!("--id {} ", m.id)
        };
        m.ok(&format!(
            "sed -e 's/electd\\.service/{u}/g' -e 's#/usr/bin/electctl run --grace 1s#/usr/bin/electctl {socket}run --grace 300ms#' \
             {PROCESSOR_EXAMPLE} > /etc/systemd/system/electd-proc.service",
            u = m.unit,
        ));
        m.write(
            "/etc/systemd/system/electd-proc.service.d/test.conf",
            "[Service]\nReadWritePaths=/shared\nRestartSec=200ms\n",
        );
        m.ok("systemctl daemon-reload");
    }
    for m in &c.machines {
        // Type=notify: this returns once the daemon said READY=1.
        m.ok(&format!("systemctl enable --now {}", m.unit));
    }
    for m in &c.machines {
        assert_eq!(m.prop(&m.unit, "ActiveState"), "active", "{}", m.name);
        assert_eq!(m.prop(&m.unit, "SubState"), "running", "{}", m.name);
        assert_eq!(m.prop(&m.unit, "WatchdogUSec"), format!("{WATCHDOG_S}s"));
    }
    let (leader, term) = c.settle(Duration::from_secs(30));
    for m in &c.machines {
        let st = m.prop(&m.unit, "StatusText");
        let want = if m.id == leader {
            format!("leader, term {term}")
        } else {
            format!("follower, leader {leader} (n{leader}), term {term}")
        };
        assert!(
            st.starts_with(&want),
            "{}: STATUS={st}, want {want}",
            m.name
        );
    }
    c.clock.say(&format!(
        "3 units active, READY; leader {leader}, term {term}"
    ));
    // Enabled, the example is wanted by electd's unit; it runs as a dynamic user in
    // the electd group, which may use the control socket.
    for m in &c.machines {
        m.ok("systemctl enable --now electd-proc.service");
        assert!(
            m.run(&format!(
                "test -L /etc/systemd/system/{}.wants/electd-proc.service",
                m.unit
            ))
            .status
            .success(),
            "{}: enabling the example did not tie it to {}",
            m.name,
            m.unit
        );
    }
    wait_for(
        Duration::from_secs(10),
        Duration::from_millis(100),
        "the leader's processor to start",
        || {
            proc_runs(&c.proc_log())
                .iter()
                .any(|r| r.id == leader)
                .then_some(())
        },
    );

    // Reload with new timers: applied, no change of role or term.
    let before = lease_samples(c.machine(leader), 8);
    let old_max = HEARTBEAT_MS * 3 * 98 / 100;
    assert!(
        before.iter().all(|&l| l <= old_max),
        "lease_ms {before:?} above {old_max}"
    );
    for m in &c.machines {
        let conf = m.read("/etc/electd/electd.conf");
        m.write(
            "/etc/electd/electd.conf",
            &conf.replace(
                &format!("heartbeat {HEARTBEAT_MS}ms"),
                &format!("heartbeat {HEARTBEAT2_MS}ms"),
            ),
        );
        m.ok(&format!("systemctl reload {}", m.unit));
        assert!(
            m.journal(&m.unit).contains(&format!(
                "configuration reloaded: heartbeat {HEARTBEAT2_MS}ms"
            )),
            "{}: no reload in the journal",
            m.name
        );
    }
    assert_eq!(
        c.settle(Duration::from_secs(10)),
        (leader, term),
        "a reload changed the leadership"
    );
    let after = lease_samples(c.machine(leader), 15);
    assert!(
        after.iter().any(|&l| l > old_max + 100),
        "the leader's lease_ms {after:?} never showed the new heartbeat"
    );
    c.clock.say(&format!(
        "reload: heartbeat {HEARTBEAT2_MS}ms applied, leader {leader} term {term} kept"
    ));

    // A reload the daemon refuses (a new server list) fails systemctl reload.
    let lm = c.machine(leader);
    let good = lm.read("/etc/electd/electd.conf");
    let pid = lm.main_pid();
    lm.write(
        "/etc/electd/electd.conf",
        &good.replace(
            "server 3 ",
            &format!("server 4 {SUBNET}.4:7400 name n4\nserver 3 "),
        ),
    );
    let o = lm.run(&format!("systemctl reload {}", lm.unit));
    assert!(
        !o.status.success(),
        "systemctl reload accepted a new server list: {}",
        text(&o)
    );
    let st = lm.prop(&lm.unit, "StatusText");
    assert!(st.contains("reload refused"), "STATUS={st}");
    let s = lm.status().expect("status");
    assert!(
        s.get("config_refused")
            .and_then(Value::as_str)
            .is_some_and(|w| w.contains("server list")),
        "{s:?}"
    );
    assert!(
        lm.journal(&lm.unit).contains("server list"),
        "the refusal is not in the journal"
    );
    assert_eq!(lm.main_pid(), pid, "a refused reload restarted the daemon");
    assert_eq!(lm.prop(&lm.unit, "ActiveState"), "active");
    lm.write("/etc/electd/electd.conf", &good);
    lm.ok(&format!("systemctl reload {}", lm.unit));
    assert!(
        lm.status()
            .expect("status")
            .get("config_refused")
            .is_some_and(Value::is_null)
    );
    assert_eq!(c.settle(Duration::from_secs(10)), (leader, term));
    c.clock.say(&format!(
        "refused reload: exit {:?}, daemon kept its configuration",
        o.status.code()
    ));

    // The `socket` line changed: the daemon keeps the socket it started with. The
    // unit's `electctl reload` reads the new path from the file; it must fail, and the
    // daemon, told through MAINPID under the unit's sandbox, must refuse the change
    // where the operator looks (config_refused names the socket).
    let moved = good.replace("\nsocket /run/electd/", "\nsocket /run/electd/moved-");
    assert_ne!(moved, good, "no socket line to move");
    lm.write("/etc/electd/electd.conf", &moved);
    let o = lm.run(&format!("systemctl reload {}", lm.unit));
    assert!(
        !o.status.success(),
        "systemctl reload accepted a new socket: {}",
        text(&o)
    );
    let t0 = Instant::now();
    let refused = loop {
        let s = lm.status().expect("status on the socket it started with");
        let r = s
            .get("config_refused")
            .and_then(Value::as_str)
            .is_some_and(|w| w.contains("socket"));
        // Bounded: the SIGHUP is handled within a heartbeat or two.
        if r || t0.elapsed() > Duration::from_secs(5) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        refused,
        "the changed socket was not refused by the daemon: {}",
        lm.journal(&lm.unit)
    );
    assert_eq!(lm.main_pid(), pid, "a refused reload restarted the daemon");
    lm.write("/etc/electd/electd.conf", &good);
    lm.ok(&format!("systemctl reload {}", lm.unit));
    assert_eq!(c.settle(Duration::from_secs(10)), (leader, term));
    c.clock
        .say("socket line moved: the unit's reload reached the daemon, which refused it");

    // The watchdog restarts a frozen leader; the others elect meanwhile.
    let lm = c.machine(leader);
    let pid = lm.main_pid();
    let restarts: u32 = lm.prop(&lm.unit, "NRestarts").parse().unwrap();
    lm.ok(&format!("kill -STOP {pid}"));
    let frozen = Instant::now();
    let (new_leader, new_term) = wait_for(
        Duration::from_secs(20),
        Duration::from_millis(100),
        "a new leader while the old one is frozen",
        || {
            c.machines.iter().filter(|m| m.id != leader).find_map(|m| {
                let s = m.status()?;
                if s.get("role")?.as_str()? != "leader" {
                    return None;
                }
                Some((m.id, s.get("term")?.as_u64()?))
            })
        },
    );
    let elected_after = frozen.elapsed();
    // The frozen server must still be down (or restarting): the election did not wait for it.
    let back_then = lm.prop(&lm.unit, "MainPID");
    assert!(
        back_then == pid.to_string() || back_then == "0",
        "restarted before the others elected"
    );
    wait_for(
        Duration::from_secs(30),
        Duration::from_millis(200),
        "the watchdog to restart the frozen daemon",
        || {
            let n: u32 = lm.prop(&lm.unit, "NRestarts").parse().ok()?;
            (n > restarts && lm.prop(&lm.unit, "ActiveState") == "active" && lm.main_pid() != pid)
                .then_some(())
        },
    );
    let restarted_after = frozen.elapsed();
    assert!(
        lm.journal(&lm.unit).contains("Watchdog timeout"),
        "no watchdog in the journal"
    );
    assert!(new_term > term);
    assert_eq!(
        c.settle(Duration::from_secs(20)).0,
        new_leader,
        "leadership moved back"
    );
    c.clock.say(&format!(
        "watchdog: leader {leader} frozen; {new_leader} elected after {elected_after:?}; \
         {leader} restarted by the watchdog after {restarted_after:?}"
    ));

    // A planned handoff: systemctl restart of the leader's electd stops its processor
    // before another server's starts. First let the restarted server's startup quiet
    // period (K x HBT) pass, or the round after the RESIGN would wait for it.
    std::thread::sleep(Duration::from_millis(3 * HEARTBEAT2_MS + 500));
    let (leader, _) = c.settle(Duration::from_secs(10));
    let lm = c.machine(leader);
    let t = Instant::now();
    lm.ok(&format!("systemctl restart {}", lm.unit));
    let restart_took = t.elapsed();
    let (next, _) = c.settle(Duration::from_secs(20));
    assert_ne!(next, leader, "the restarted leader was re-elected");
    let runs = wait_for(
        Duration::from_secs(10),
        Duration::from_millis(100),
        "the next leader's processor",
        || {
            let runs = proc_runs(&c.proc_log());
            let last = runs.last()?;
            (last.id == next).then_some(runs)
        },
    );
    let n = runs.len();
    let (old, new) = (&runs[n - 2], &runs[n - 1]);
    assert_eq!(old.id, leader, "{runs:?}");
    assert!(
        old.stopped,
        "the old leader's processor did not stop on SIGTERM: {old:?}"
    );
    let gap_ms = (new.start - old.end) as f64 / 1e6;
    c.clock.say(&format!(
        "handover on systemctl restart ({restart_took:?}): processor {leader} stopped, {next} started {gap_ms:.1} ms later"
    ));
    let runs = proc_runs(&c.proc_log());
    assert!(runs.len() >= 3, "too few processor runs: {runs:?}");
    assert_no_overlap(&runs);
    c.clock
        .say(&format!("{} processor runs, none overlapping", runs.len()));

    // The online exposure score of both units, and of the processor example.
    let e1 = exposure(c.machine(1), "electd.service");
    let e2 = exposure(c.machine(2), "electd@2.service");
    let ep = exposure(c.machine(1), "electd-proc.service");
    c.clock.say(&format!(
        "systemd-analyze security: electd.service {e1}, electd@2.service {e2}, \
         the processor example {ep}"
    ));
    assert!(
        e1 <= MAX_EXPOSURE && e2 <= MAX_EXPOSURE,
        "exposure {e1} / {e2} above {MAX_EXPOSURE}"
    );
    assert!(
        ep <= MAX_PROCESSOR_EXPOSURE,
        "processor example: exposure {ep}"
    );

    // A restart with a file the daemon refuses (issue 23, item 5): the unit fails once,
    // with one journal line that names the file's line, and is not restarted (exit
    // status 78, RestartPreventExitStatus=); fixed, it starts again.
    let (leader, _) = c.settle(Duration::from_secs(10));
    let g = c.machines.iter().find(|m| m.id != leader).unwrap();
    let good = g.read("/etc/electd/electd.conf");
    let lines = good.lines().count();
    g.write(
        "/etc/electd/electd.conf",
        &format!("{good}frobnicate yes\n"),
    );
    let o = g.run(&format!("systemctl restart {}", g.unit));
    assert!(!o.status.success(), "restart with a bad file: {}", text(&o));
    let restarts = g.prop(&g.unit, "NRestarts");
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(g.prop(&g.unit, "ActiveState"), "failed", "{}", g.name);
    assert_eq!(g.prop(&g.unit, "ExecMainStatus"), "78");
    assert_eq!(g.prop(&g.unit, "NRestarts"), restarts, "it was restarted");
    let journal = g.journal(&g.unit);
    let said: Vec<&str> = journal
        .lines()
        .filter(|l| l.contains("frobnicate"))
        .collect();
    assert!(
        said.len() == 1 && said[0].contains(&format!("electd.conf:{}", lines + 1)),
        "want one line naming the file's line: {said:?}"
    );
    g.write("/etc/electd/electd.conf", &good);
    g.ok(&format!("systemctl start {}", g.unit));
    c.settle(Duration::from_secs(20));
    c.clock.say(&format!(
        "server {}: a restart with a bad file failed once (status 78, not restarted), one journal line",
        g.id
    ));

    // The package's own life on a follower: an upgrade (a reinstall) restarts the
    // running unit and starts nothing else, remove stops it and keeps config and
    // state, purge removes them and keeps the user.
    let (leader, _) = c.settle(Duration::from_secs(10));
    let f = c
        .machines
        .iter()
        .find(|m| m.id != leader && m.id != 1)
        .unwrap();
    let pid = f.main_pid();
    f.ok(&format!("dpkg -i {deb_in}"));
    assert_eq!(f.prop(&f.unit, "ActiveState"), "active");
    assert_ne!(f.main_pid(), pid, "the upgrade did not restart {}", f.unit);
    assert_eq!(
        f.prop("electd.service", "ActiveState"),
        "inactive",
        "the upgrade started electd.service"
    );
    assert_eq!(f.prop("electd.service", "UnitFileState"), "disabled");
    assert_eq!(f.prop("electd-proc.service", "ActiveState"), "active");
    c.settle(Duration::from_secs(20));
    let state = format!("/var/lib/electd/{}.state", f.id);
    let link = format!("/etc/systemd/system/multi-user.target.wants/{}", f.unit);
    f.ok("dpkg -r electd");
    assert_eq!(f.prop(&f.unit, "ActiveState"), "inactive");
    assert!(!f.exists("/usr/sbin/electd"));
    for kept in ["/etc/electd/electd.conf", state.as_str(), link.as_str()] {
        assert!(
            f.root()
                .join(kept.trim_start_matches('/'))
                .symlink_metadata()
                .is_ok(),
            "remove deleted {kept}"
        );
    }
    // A reinstall after a remove runs as before (README, "Install"; issue 23, item 9):
    // the enabled unit starts again, and nothing else does.
    f.ok(&format!("dpkg -i {deb_in}"));
    assert_eq!(
        f.prop(&f.unit, "ActiveState"),
        "active",
        "a reinstall after remove left {} stopped",
        f.unit
    );
    assert_eq!(f.prop("electd.service", "ActiveState"), "inactive");
    c.settle(Duration::from_secs(20));
    f.ok("dpkg -r electd");
    f.ok("dpkg -P electd");
    for gone in ["/etc/electd", "/var/lib/electd", link.as_str()] {
        assert!(
            f.root()
                .join(gone.trim_start_matches('/'))
                .symlink_metadata()
                .is_err(),
            "purge left {gone}"
        );
    }
    f.ok("getent passwd electd");
    c.clock.say(&format!(
        "server {}: upgrade restarted it, remove stopped it, a reinstall started it again, purge cleaned up",
        f.id
    ));
}

/// The overlap checker fails on an overlap (so its silence in the test means something)
/// and accepts a clean handover.
#[test]
fn processor_overlap_checker_catches_overlap() {
    let clean = "1 S 100 1\n1 T 150\n1 E 200\n2 S 210 2\n2 T 260\n";
    let runs = proc_runs(clean);
    assert_eq!(runs.len(), 2);
    assert!(runs[0].stopped && !runs[1].stopped);
    assert_no_overlap(&runs);
    // A crash (X) ends a run, not stopped by SIGTERM.
    let crashed = proc_runs("1 S 100 1\n1 X 120\n1 S 130 1\n1 X 140\n2 S 150 2\n");
    assert_eq!(crashed.len(), 3);
    assert!(crashed.iter().all(|r| !r.stopped));
    assert_no_overlap(&crashed);
    for bad in [
        // 2 starts while 1 still ticks.
        "1 S 100 1\n1 T 150\n2 S 160 2\n1 T 200\n1 E 210\n",
        // 1 was killed (no E line) after its last tick, and 2 started before that tick.
        "1 S 100 1\n2 S 140 2\n1 T 150\n",
        // 2 starts before 1's crash.
        "1 S 100 1\n2 S 140 2\n1 X 150\n",
        // A new leader with an old term.
        "1 S 100 3\n1 E 200\n2 S 210 3\n",
    ] {
        assert!(overlap(&proc_runs(bad)).is_err(), "not caught: {bad:?}");
    }
}

/// The lines of README.md's fenced block that follows the line holding `after`.
fn readme_block(readme: &str, after: &str) -> Vec<String> {
    let mut lines = readme.lines().skip_while(|l| !l.contains(after));
    assert!(
        lines.next().is_some(),
        "README.md has no line with '{after}'"
    );
    // The opening fence may name a language (```sh).
    let mut lines = lines.skip_while(|l| !l.trim().starts_with("```")).skip(1);
    let block: Vec<String> = lines
        .by_ref()
        .take_while(|l| l.trim() != "```")
        .map(str::to_string)
        .collect();
    assert!(!block.is_empty(), "README.md: no block after '{after}'");
    block
}

/// The command of a README block that starts with `start` (its comment cut off).
fn readme_command(block: &[String], start: &str) -> String {
    block
        .iter()
        .find(|l| l.trim_start().starts_with(start))
        .map(|l| l.split('#').next().unwrap().trim().to_string())
        .unwrap_or_else(|| panic!("README.md's block has no '{start}' line: {block:?}"))
}

/// The new operator's first commands, as README.md's "Production" section gives them,
/// run on a booted Debian container: the package installed with apt (not dpkg), the
/// file checked with `--check-config` as root and as the user electd, the unit
/// enabled, `electctl status` with sudo, refused to a user outside the group electd
/// with the words README quotes, and allowed once that user is in the group. The
/// commands are read from README.md, so a README edit that breaks one fails here.
#[test]
fn readme_operator_commands_under_systemd() {
    let Some(_one) = container_test("README's commands under systemd") else {
        return;
    };
    let readme = fs::read_to_string("README.md").unwrap();
    let install = readme_block(&readme, "**Debian and Ubuntu: the package.**");
    let apt = readme_command(&install, "sudo apt install ./target/debian/");
    let then = readme_block(
        &readme,
        "**Then**, write the same server list on every server",
    );
    let check = readme_command(&then, "sudo electd --check-config");
    let enable = readme_command(&then, "sudo systemctl enable --now electd");
    let status = readme_command(&then, "sudo electctl status");
    // The check as the daemon's user, and joining the socket's group, from README's text.
    let prose = prose(&readme);
    let as_user = "sudo -u electd electd --check-config";
    assert!(
        prose.contains(&format!("`{as_user}`")),
        "README.md lacks `{as_user}`"
    );
    let join = "sudo usermod -aG electd $USER";
    assert!(
        prose.contains(&format!("`{join}`")),
        "README.md lacks `{join}`"
    );
    let denial = "permission denied ... run as root or as a member of the socket's group 'electd'";
    assert!(
        prose.contains(denial),
        "README.md lacks the denial it quotes"
    );

    let (c, _) = booted_with_deb(1);
    let m = c.machine(1);

    // apt, not dpkg: it must find the dependencies (adduser) installed and need no
    // network (the container has none). README runs it from the checkout.
    m.ok("mkdir -p /root/checkout/target/debian && cp /deb/electd_*.deb /root/checkout/target/debian/");
    let o = m.run(&format!(
        "cd /root/checkout && DEBIAN_FRONTEND=noninteractive {apt} </dev/null"
    ));
    assert!(
        o.status.success(),
        "`{apt}` failed ({}): {}",
        o.status,
        text(&o)
    );
    assert!(m.exists("/usr/sbin/electd") && m.exists("/usr/bin/electctl"));
    assert_eq!(
        m.ok("dpkg-query -W -f '${Status}' electd").trim(),
        "install ok installed"
    );
    c.clock.say(&format!("`{apt}`: installed"));

    // The operator's file (sudoedit in README), then the checks as README gives them.
    m.write(
        "/etc/electd/electd.conf",
        &config(Some(1), &m.socket, HEARTBEAT_MS),
    );
    let said = m.ok(&check);
    assert!(said.contains("server 1"), "`{check}` said: {said}");
    let said = m.ok(as_user);
    assert!(said.contains("server 1"), "`{as_user}` said: {said}");
    // A broken file: the check exits 1 and names the line, as README says.
    m.write("/etc/electd/broken.conf", "cluster x\nserver 1 nowhere\n");
    let o = m.run("sudo -u electd electd --check-config --config /etc/electd/broken.conf");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("broken.conf:2:"), "{}", text(&o));
    c.clock
        .say("--check-config: as root, as electd, and a broken file (exit 1)");

    m.ok(&enable);
    assert_eq!(m.prop("electd.service", "ActiveState"), "active");
    assert_eq!(m.prop("electd.service", "UnitFileState"), "enabled");
    let said = m.ok(&status);
    assert!(said.contains("term"), "`{status}` said: {said}");
    c.clock
        .say(&format!("`{enable}`, `{status}`: active, answered"));

    // A user outside the group electd is refused, in README's words; in the group
    // (a new login), it is answered.
    m.ok("useradd -m op");
    let as_op = "runuser -l op -c 'electctl status'";
    let o = m.run(as_op);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let words: Vec<&str> = denial.split(" ... ").collect();
    for w in &words {
        assert!(text(&o).contains(w), "the denial lacks '{w}': {}", text(&o));
    }
    m.ok(&format!("export USER=op; {join}"));
    let said = m.ok(as_op);
    assert!(said.contains("term"), "op in the group: {said}");
    c.clock
        .say("a user outside the group: refused as README says; in it: answered");
}

/// README's other install, `install.sh` from a checkout, for real (its other tests use
/// `--destdir` only): on a booted Debian container without the package, the command
/// README gives (read from README.md) creates the user and directories and installs
/// the units without enabling them; the unit then runs `/usr/local/sbin/electd`;
/// a second run restarts the running unit (try-restart: a new MainPID); `--uninstall`
/// stops and disables it and removes the binaries, keeping the file and the state.
#[test]
fn install_script_for_real_under_systemd() {
    let Some(_one) = container_test("install.sh under systemd") else {
        return;
    };
    let readme = fs::read_to_string("README.md").unwrap();
    let block = readme_block(&readme, "**Elsewhere: install.sh**");
    let install = readme_command(&block, "sudo systemd/install.sh");
    let clock = Clock(Instant::now());
    let fs_root = rootfs(&clock);
    let mut c = Cluster::new(clock);
    // The checkout as install.sh reads it, with this run's binaries where its build
    // would put them (the test's target directory may be elsewhere).
    let tree = c.dir.join("checkout");
    for d in [
        "systemd",
        "conf",
        "docs/man/man1",
        "docs/man/man5",
        "docs/man/man8",
        "target/release",
    ] {
        fs::create_dir_all(tree.join(d)).unwrap();
    }
    for f in [
        "systemd/install.sh",
        "systemd/electd.service",
        "systemd/electd@.service",
        "systemd/electd.sysusers",
        "systemd/electd.tmpfiles",
        "conf/electd.conf",
        "docs/man/man1/electctl.1",
        "docs/man/man5/electd.conf.5",
        "docs/man/man8/electd.8",
    ] {
        fs::copy(f, tree.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
    fs::copy(
        env!("CARGO_BIN_EXE_electd"),
        tree.join("target/release/electd"),
    )
    .unwrap();
    fs::copy(
        env!("CARGO_BIN_EXE_electctl"),
        tree.join("target/release/electctl"),
    )
    .unwrap();
    c.boot(&fs_root, 1);
    let m = c.machine(1);
    let electctl = "/usr/local/bin/electctl";

    assert!(
        m.run("getent passwd electd").stdout.is_empty(),
        "the rootfs has user electd"
    );
    let said = m.ok(&format!("cd /checkout && {install} 2>&1"));
    assert!(said.contains("/usr/local/bin/electctl"), "{said}");
    assert!(m.ok("getent passwd electd").contains("electd"));
    assert_eq!(
        m.ok("stat -c '%U:%G' /var/lib/electd").trim(),
        "electd:electd",
        "tmpfiles did not create the state directory"
    );
    assert!(
        m.read("/etc/systemd/system/electd.service")
            .contains("ExecStart=/usr/local/sbin/electd"),
        "the unit does not run install.sh's binary"
    );
    assert_eq!(m.prop("electd.service", "UnitFileState"), "disabled");
    assert!(m.exists("/etc/electd/electd.conf"));
    c.clock.say(&format!(
        "`{install}`: user, directories, units; nothing enabled"
    ));

    m.write(
        "/etc/electd/electd.conf",
        &config(Some(1), &m.socket, HEARTBEAT_MS),
    );
    m.ok("/usr/local/sbin/electd --check-config");
    m.ok("systemctl enable --now electd");
    assert_eq!(m.prop("electd.service", "ActiveState"), "active");
    assert!(m.ok(&format!("{electctl} status")).contains("term"));
    let before = m.main_pid();
    let said = m.ok(&format!("cd /checkout && {install} 2>&1"));
    assert!(said.contains("Restarted: electd.service"), "{said}");
    assert_eq!(m.prop("electd.service", "ActiveState"), "active");
    let after = m.main_pid();
    assert!(
        after != before && after != 0,
        "MainPID {before} -> {after}: not restarted"
    );
    c.clock
        .say("enabled and running; a second install.sh restarted it");

    let said = m.ok(&format!("cd /checkout && {install} --uninstall 2>&1"));
    assert!(said.contains("electd removed"), "{said}");
    assert_eq!(m.prop("electd.service", "ActiveState"), "inactive");
    for gone in [
        "/usr/local/sbin/electd",
        "/usr/local/bin/electctl",
        "/etc/systemd/system/electd.service",
    ] {
        assert!(!m.exists(gone), "{gone} left after --uninstall");
    }
    assert!(m.exists("/etc/electd/electd.conf") && m.exists("/var/lib/electd/1.state"));
    assert!(
        !m.ok("ls /etc/systemd/system/multi-user.target.wants/")
            .contains("electd"),
        "--uninstall left the unit enabled"
    );
    c.clock
        .say("--uninstall: stopped, disabled, removed; the file and the state kept");
}

/// README's "Starting and stopping a unit from a hook", as README gives it: its polkit
/// rule in `/etc/polkit-1/rules.d/50-electd.rules` and the hooks
/// `on-leader /usr/bin/systemctl --no-block start myproc.service` and
/// `on-follower ... stop ...`, under electd's own unit (user electd,
/// NoNewPrivileges=yes). Three servers; first a rule for another unit (the control: the
/// leader's hook is refused and myproc.service stays stopped), then README's rule:
/// each `electctl yield` starts myproc.service on the new leader and stops it on the
/// old one.
#[test]
fn readme_polkit_rule_lets_hooks_start_and_stop_a_unit() {
    let Some(_one) = container_test("README's polkit rule under systemd") else {
        return;
    };
    let readme = fs::read_to_string("README.md").unwrap();
    let rule = readme_block(
        &readme,
        "the `electd` user manage that one unit through polkit",
    )
    .join("\n");
    assert!(
        rule.contains("polkit.addRule"),
        "README's polkit block: {rule}"
    );
    let prose = prose(&readme);
    let on_leader = "on-leader /usr/bin/systemctl --no-block start myproc.service";
    let on_follower = "on-follower /usr/bin/systemctl --no-block stop myproc.service";
    for hook in [on_leader, on_follower] {
        assert!(
            prose.contains(&format!("`{hook}`")),
            "README.md lacks `{hook}`"
        );
    }
    let (c, deb_in) = booted_with_deb(3);
    let rules = "/etc/polkit-1/rules.d/50-electd.rules";
    for m in &c.machines {
        m.ok(&format!("dpkg -i {deb_in}"));
        m.write(
            "/etc/systemd/system/myproc.service",
            "[Unit]\nDescription=the test's processor\n[Service]\nExecStart=/bin/sleep infinity\n",
        );
        // The control first: the same rule for another unit.
        m.write(rules, &rule.replace("myproc.service", "otherproc.service"));
        m.write(
            "/etc/electd/electd.conf",
            &format!(
                "{}{on_leader}\n{on_follower}\n",
                config(Some(m.id), &m.socket, HEARTBEAT_MS)
            ),
        );
        m.ok("systemctl daemon-reload && systemctl enable --now electd.service");
    }
    let (l1, _) = c.settle(Duration::from_secs(30));
    let m1 = c.machine(l1);
    let refused = wait_for(
        Duration::from_secs(20),
        Duration::from_millis(200),
        "the leader's on-leader hook to end",
        || {
            let j = m1.journal("electd.service");
            j.lines()
                .find(|l| {
                    l.contains("hook on-leader") && (l.contains("failed") || l.contains("finished"))
                })
                .map(str::to_string)
        },
    );
    assert!(
        refused.contains("failed"),
        "the control: the hook was not refused: {refused}"
    );
    assert_eq!(m1.prop("myproc.service", "ActiveState"), "inactive");
    c.clock.say(&format!(
        "a rule for another unit: server {l1}'s hook refused ({refused})"
    ));

    // README's rule. polkitd rereads its rules directory on a change, but when is its
    // business: a restart of a running polkitd (it ran for the refused hook) makes it
    // read them now, and one not running reads them when next activated.
    for m in &c.machines {
        m.write(rules, &rule);
        m.ok("systemctl try-restart polkit.service");
    }
    let active = |m: &Machine| m.prop("myproc.service", "ActiveState") == "active";
    let mut leader = l1;
    for round in 0..2 {
        let old = c.machine(leader);
        old.ok(&format!("electctl --socket {} yield", old.socket));
        let new = c.next_leader(leader, "", "yield");
        let m = c.machine(new);
        wait_for(
            Duration::from_secs(20),
            Duration::from_millis(200),
            &format!("myproc.service active on the new leader {new}"),
            || active(m).then_some(()),
        );
        if round > 0 {
            // It ran there (started in the previous round): on-follower stops it.
            wait_for(
                Duration::from_secs(20),
                Duration::from_millis(200),
                &format!("myproc.service stopped on the old leader {leader}"),
                || (!active(old)).then_some(()),
            );
        }
        for o in c.machines.iter().filter(|o| o.id != new) {
            assert!(!active(o), "myproc.service active on follower {}", o.id);
        }
        c.clock
            .say(&format!("yield: {leader} -> {new}; myproc.service follows"));
        leader = new;
    }
}

/// README's check, as its `check` line names it.
const CONSUMER_HEALTHY: &str = "/usr/local/bin/consumer-healthy";
/// Where README's `consumer-healthy` looks for the broker, and where the test puts it:
/// a listener on each container's own loopback, so that one server can lose it alone.
const README_BROKER: &str = "mq.internal:5672";
const TEST_BROKER: &str = "127.0.0.1:7672";
/// README's spool, and the directory the test gives the check instead.
const README_SPOOL: &str = "/var/spool/orders";
const TEST_SPOOL: &str = "/srv/orders-spool";
/// The check's timers: small, so that a verdict takes about a second.
const CHECK_TIMERS: &str =
    "check-interval 500ms\ncheck-timeout 500ms\ncheck-fall 2\ncheck-rise 2\n";
/// The heartbeat under README's consumer units: their `--grace 1s` must fit the lease
/// a steady leader has left (lease - heartbeat - rtt: 1258 ms here), or `run` refuses.
const CONSUMER_HEARTBEAT_MS: u64 = 700;

/// README's `consumer-healthy` (its ```sh block), from README.md, with the test's
/// broker and spool for README's: nothing else of it changed.
fn readme_consumer_healthy(readme: &str) -> String {
    let block = readme_block(readme, "**A worked example: a message consumer.**");
    assert!(
        block[0] == "#!/bin/sh" && block[1].starts_with(&format!("# {CONSUMER_HEALTHY}")),
        "README's consumer-healthy block: {block:?}"
    );
    let (host, port) = README_BROKER.split_once(':').unwrap();
    let (test_host, test_port) = TEST_BROKER.split_once(':').unwrap();
    let mut script = block.join("\n") + "\n";
    for (from, to) in [
        (format!("{host} {port}"), format!("{test_host} {test_port}")),
        (README_BROKER.to_string(), TEST_BROKER.to_string()),
        (README_SPOOL.to_string(), TEST_SPOOL.to_string()),
    ] {
        assert!(
            script.contains(&from),
            "README's consumer-healthy lacks '{from}'"
        );
        script = script.replace(&from, &to);
    }
    script
}

/// A listener on `addr` in `m`, by socket activation (so it listens without a gap
/// between connections): each connection gets `reply`, and is closed once the client
/// closes it. (Closed with the request unread, the socket would be reset, and curl
/// could lose the reply: status 56 for any status line.) `systemctl stop NAME.socket`
/// ends it, `start` brings it back.
fn listen(m: &Machine, name: &str, addr: &str, reply: &str) {
    let file = format!("/etc/{name}.reply");
    m.write(&file, reply);
    m.write(
        &format!("/etc/systemd/system/{name}.socket"),
        &format!("[Socket]\nListenStream={addr}\nAccept=yes\n"),
    );
    m.write(
        &format!("/etc/systemd/system/{name}@.service"),
        &format!(
            "[Service]\nExecStart=/bin/sh -c 'cat {file} && exec cat >/dev/null'\n\
             StandardInput=socket\nStandardOutput=socket\n"
        ),
    );
    m.ok(&format!(
        "systemctl daemon-reload && systemctl start {name}.socket"
    ));
}

/// Waits until `m`'s `health` in `group` is `want` with a `health_cause` holding
/// `cause` (`""`: any); its status.
fn wait_health(m: &Machine, group: &str, want: &str, cause: &str) -> Value {
    wait_for(
        Duration::from_secs(20),
        Duration::from_millis(100),
        &format!("server {}: health {want} ({cause})", m.id),
        || {
            let s = m.status_of(group)?;
            let why = s.get("health_cause")?.as_str().unwrap_or_default();
            (s.get("health")?.as_str()? == want && why.contains(cause)).then_some(s)
        },
    )
}

/// A counter of `m`'s `electctl metrics` (the first sample of `name`).
fn metric(m: &Machine, name: &str) -> f64 {
    let out = m.ok(&format!("electctl --socket {} metrics", m.socket));
    out.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in metrics: {out}"))
}

/// README's health check, `consumer-healthy`, taken from README.md (the broker and the
/// spool moved to the test's), as the `check` of electd.service on three servers,
/// under the unit's sandbox (user electd, ProtectProc=invisible, ...): all healthy
/// with the broker listening; the leader's broker stopped, it hands over and reports
/// `failing` with the script's first line as the cause; on the new leader a
/// /healthz answering 500 makes it hand over ("/healthz fails"), and nothing
/// listening there (curl's status 7) keeps the next leader healthy.
#[test]
fn readme_health_check_under_systemd() {
    let Some(_one) = container_test("README's health check under systemd") else {
        return;
    };
    let readme = fs::read_to_string("README.md").unwrap();
    let script = readme_consumer_healthy(&readme);
    let lines: Vec<String> = readme.lines().map(str::to_string).collect();
    let check = readme_command(&lines, &format!("check {CONSUMER_HEALTHY}"));
    let (c, deb_in) = booted_with_deb(3);
    for m in &c.machines {
        m.ok(&format!("dpkg -i {deb_in}"));
        m.write(CONSUMER_HEALTHY, &script);
        m.ok(&format!(
            "chmod 755 {CONSUMER_HEALTHY} && mkdir -p {TEST_SPOOL}"
        ));
        listen(m, "broker", TEST_BROKER, "");
        m.write(
            "/etc/electd/electd.conf",
            &format!(
                "{}{check}\n{CHECK_TIMERS}",
                config(Some(m.id), &m.socket, HEARTBEAT_MS)
            ),
        );
        m.ok("systemctl enable --now electd.service");
    }
    let (leader, _) = c.settle(Duration::from_secs(30));
    for m in &c.machines {
        wait_health(m, "", "ok", "");
    }
    c.clock.say(&format!(
        "README's consumer-healthy passes on 3 servers under electd.service; leader {leader}"
    ));

    // README's own broker name resolves nowhere here (no DNS in the containers): the
    // script's line must still be the first one printed, the one the daemon logs as
    // the cause (nc's own error line came first before README sent it to /dev/null).
    let m1 = &c.machines[0];
    let (th, tp) = TEST_BROKER.split_once(':').unwrap();
    let (rh, rp) = README_BROKER.split_once(':').unwrap();
    let as_readme = script
        .replace(&format!("{th} {tp}"), &format!("{rh} {rp}"))
        .replace(TEST_BROKER, README_BROKER);
    m1.write("/usr/local/bin/readme-broker-healthy", &as_readme);
    let out = m1.ok(&format!(
        "getent hosts {rh} && exit 9; chmod 755 /usr/local/bin/readme-broker-healthy; \
         ELECTD_ROLE=follower /usr/local/bin/readme-broker-healthy 2>&1; echo \"rc=$?\""
    ));
    assert_eq!(
        out.lines().next(),
        Some(format!("broker {README_BROKER} unreachable").as_str()),
        "README's script with a broker name that does not resolve printed: {out:?}"
    );
    assert!(out.contains("rc=1"), "{out}");

    // The broker gone from the leader: it hands over and says why, in the script's words.
    let lm = c.machine(leader);
    lm.ok("systemctl stop broker.socket");
    let next = c.next_leader(leader, "", "its broker stopped");
    let unreachable = format!("broker {TEST_BROKER} unreachable");
    let st = wait_health(lm, "", "failing", &unreachable);
    c.clock.say(&format!(
        "broker stopped on {leader}: handed over to {next}; its cause: {}",
        st.get("health_cause").and_then(Value::as_str).unwrap()
    ));
    lm.ok("systemctl start broker.socket");
    wait_health(lm, "", "ok", "");

    // The leader's own branch: a /healthz that answers 500 makes it hand over.
    let nm = c.machine(next);
    listen(
        nm,
        "healthz",
        "127.0.0.1:9090",
        "HTTP/1.0 500 x\r\nContent-Length: 0\r\n\r\n",
    );
    let third = c.next_leader(next, "", "its /healthz answered 500");
    let said = wait_for(
        Duration::from_secs(10),
        Duration::from_millis(200),
        &format!("server {next}'s journal to say why it failed"),
        || {
            let j = nm.journal("electd.service");
            j.lines()
                .find(|l| {
                    l.contains("health failing") && l.contains("/healthz fails (curl status 22)")
                })
                .map(str::to_string)
        },
    );
    nm.ok("systemctl stop healthz.socket");
    c.clock.say(&format!(
        "/healthz 500 on {next}: handed over to {third}: {said}"
    ));

    // Nothing listening on /healthz (curl's status 7): the leader stays healthy and
    // leads on through many more checks than check-fall.
    let tm = c.machine(third);
    let o = tm.run("curl -fsS -m 0.4 -o /dev/null http://127.0.0.1:9090/healthz");
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    let runs = metric(tm, "electd_check_runs_total");
    let end = Instant::now() + Duration::from_secs(4);
    while Instant::now() < end {
        let s = tm.status().expect("status");
        assert!(
            s.get("role").and_then(Value::as_str) == Some("leader")
                && s.get("health").and_then(Value::as_str) == Some("ok"),
            "the leader without /healthz: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let ran = metric(tm, "electd_check_runs_total") - runs;
    assert!(ran >= 4.0, "the leader's check ran {ran} times in 4 s");
    c.clock.say(&format!(
        "nothing on /healthz (curl status 7): {third} leads on, healthy, through {ran} checks"
    ));
}

/// The package on `m`, electd.service with the test's file plus `conf`, and each of
/// `units` (name, text, the consumer its ExecStart runs, its log) enabled as written,
/// its consumer PROC_SH writing to `/shared/LOG.log`.
fn install_consumers(m: &Machine, deb_in: &str, conf: &str, units: &[(&str, &str, &str, &str)]) {
    m.ok(&format!("dpkg -i {deb_in}"));
    m.write(
        "/etc/electd/electd.conf",
        &format!(
            "{}{conf}",
            config(Some(m.id), &m.socket, CONSUMER_HEARTBEAT_MS)
        ),
    );
    let mut names = Vec::new();
    for (name, unit, consumer, log) in units {
        m.write(
            consumer,
            &format!("#!/bin/sh\nexec /bin/sh /shared/proc.sh {} {log}\n", m.id),
        );
        m.ok(&format!("chmod 755 {consumer}"));
        m.write(&format!("/etc/systemd/system/{name}"), unit);
        // The test's log is the one thing added to README's unit.
        m.write(
            &format!("/etc/systemd/system/{name}.d/test.conf"),
            "[Service]\nReadWritePaths=/shared\n",
        );
        names.push(*name);
    }
    m.ok(&format!(
        "systemctl daemon-reload && systemctl enable --now electd.service && systemctl enable --now {}",
        names.join(" ")
    ));
}

/// Waits until the newest run in `/shared/LOG.log` is `leader`'s, then checks that no
/// two runs overlapped (and terms grew); the runs.
fn consumer_on(c: &Cluster, log: &str, leader: u8) -> Vec<ProcRun> {
    let runs = wait_for(
        Duration::from_secs(20),
        Duration::from_millis(100),
        &format!("{log}: a consumer on the leader {leader}"),
        || {
            let runs = proc_runs(&c.log_of(log));
            (runs.last()?.id == leader).then_some(runs)
        },
    );
    assert_no_overlap(&runs);
    runs
}

/// README's consumer unit (`electctl run --grace 1s --max-restarts 3 --restart-window 1m
/// -- /usr/local/bin/orders-consumer`, a dynamic user in the group electd, tied to
/// electd.service), taken from README.md and enabled on three servers: the consumer
/// runs on the leader only; made to exit at once at every start there, its third exit
/// within the window makes the leader report `failing` ("3 exits within 60s") and hand
/// over, and the new leader's consumer runs, never two at once.
#[test]
fn readme_consumer_units_under_systemd() {
    let Some(_one) = container_test("README's consumer unit under systemd") else {
        return;
    };
    let readme = fs::read_to_string("README.md").unwrap();
    let unit = readme_block(&readme, "and the consumer's unit:").join("\n") + "\n";
    let consumer = "/usr/local/bin/orders-consumer";
    for line in [
        format!(
            "ExecStart=/usr/bin/electctl run --grace 1s --max-restarts 3 --restart-window 1m -- {consumer}"
        ),
        "DynamicUser=yes".into(),
        "SupplementaryGroups=electd".into(),
        "Requires=electd.service".into(),
        "After=electd.service".into(),
        "WantedBy=electd.service".into(),
    ] {
        assert!(
            unit.lines().any(|l| l == line),
            "README's consumer unit lacks {line}: {unit}"
        );
    }
    let exits = "3 exits within 60s";
    assert!(
        prose(&readme).contains(&format!("`health failing {exits}`")),
        "README.md lacks `health failing {exits}`"
    );
    let (c, deb_in) = booted_with_deb(3);
    c.share_processor(&["proc"]);
    let name = "orders-consumer.service";
    for m in &c.machines {
        install_consumers(m, &deb_in, "", &[(name, &unit, consumer, "proc")]);
    }
    let (leader, _) = c.settle(Duration::from_secs(30));
    consumer_on(&c, "proc", leader);
    // Long enough for a follower's consumer to have started, had it been let.
    std::thread::sleep(Duration::from_secs(2));
    let runs = proc_runs(&c.proc_log());
    assert!(
        runs.iter().all(|r| r.id == leader),
        "a consumer ran off the leader {leader}: {runs:?}"
    );
    c.clock.say(&format!(
        "README's consumer unit on 3 servers: the consumer runs on the leader {leader} only"
    ));

    // The leader's consumer exits at once, at every start: the third exit hands over.
    fs::write(c.dir.join(format!("shared/crash.{leader}")), "").unwrap();
    let next = c.next_leader(leader, "", "its consumer exited 3 times");
    let st = wait_health(c.machine(leader), "", "failing", exits);
    let runs = consumer_on(&c, "proc", next);
    let crashes = c
        .proc_log()
        .lines()
        .filter(|l| l.starts_with(&format!("{leader} X ")))
        .count();
    assert!(
        crashes >= 3,
        "{crashes} exits before the handover: {runs:?}"
    );
    c.clock.say(&format!(
        "{crashes} exits on {leader}: handed over to {next}, whose consumer runs; cause: {}",
        st.get("health_cause").and_then(Value::as_str).unwrap()
    ));
}

/// README's units of "Election groups" (`electctl run --group orders --grace 1s ...`,
/// and payments' alike), taken from README.md, on three servers whose file has two
/// `group` lines (and `balance on`): each group's consumer runs only where its
/// group's lease is held, and a yield of orders moves its consumer alone.
#[test]
fn readme_group_units_under_systemd() {
    let Some(_one) = container_test("README's group units under systemd") else {
        return;
    };
    let readme = fs::read_to_string("README.md").unwrap();
    let orders =
        readme_block(&readme, "One unit per processor, enabled on every server").join("\n") + "\n";
    assert!(
        orders.contains(
            "ExecStart=/usr/bin/electctl run --group orders --grace 1s -- /usr/local/bin/orders-consumer"
        ),
        "README's group unit: {orders}"
    );
    // README: "payments.service and audit.service alike".
    let payments = orders.replace("orders", "payments");
    let (c, deb_in) = booted_with_deb(3);
    c.share_processor(&["orders", "payments"]);
    let units = [
        (
            "orders.service",
            orders.as_str(),
            "/usr/local/bin/orders-consumer",
            "orders",
        ),
        (
            "payments.service",
            payments.as_str(),
            "/usr/local/bin/payments-consumer",
            "payments",
        ),
    ];
    for m in &c.machines {
        install_consumers(
            m,
            &deb_in,
            "balance on\ngroup orders\ngroup payments\n",
            &units,
        );
    }
    let mut leaders = Vec::new();
    for (_, _, _, group) in units {
        let (l, _) = c.settle_group(Duration::from_secs(30), group);
        consumer_on(&c, group, l);
        leaders.push(l);
    }
    std::thread::sleep(Duration::from_secs(2));
    for ((_, _, _, group), l) in units.iter().zip(&leaders) {
        let runs = proc_runs(&c.log_of(group));
        assert!(
            runs.iter().all(|r| r.id == *l),
            "{group}'s consumer ran off its leader {l}: {runs:?}"
        );
    }
    assert_ne!(
        leaders[0], leaders[1],
        "balance on put both groups on one server"
    );
    c.clock.say(&format!(
        "two groups: orders' consumer on {} only, payments' on {} only",
        leaders[0], leaders[1]
    ));

    // A yield of orders moves orders' consumer, and payments' stays where it is.
    let before = proc_runs(&c.log_of("payments"));
    let om = c.machine(leaders[0]);
    om.ok(&format!("electctl --socket {} yield orders", om.socket));
    let next = c.next_leader(leaders[0], "orders", "yield orders");
    consumer_on(&c, "orders", next);
    assert_eq!(
        c.settle_group(Duration::from_secs(10), "payments").0,
        leaders[1]
    );
    let after = proc_runs(&c.log_of("payments"));
    assert!(
        after.len() == before.len() && after.iter().all(|r| r.id == leaders[1]),
        "payments' consumer moved with orders: {before:?} then {after:?}"
    );
    c.clock.say(&format!(
        "yield orders: its consumer moved {} -> {next}; payments' stayed on {}",
        leaders[0], leaders[1]
    ));
}

/// README "Signals" and "Hooks": `systemctl stop electd` on a leader lets the
/// `on-follower` hook its resignation starts finish (the hook that stops the processor's
/// unit, say), up to `hook-timeout`, before the daemon exits and the unit's stop kills
/// what is left of its control group; the shipped `TimeoutStopSec` leaves room for it.
/// One server alone (a cluster of one leads at once), its hook a script that takes 3 s
/// and then writes a file. Before electd waited for hooks, the stop returned at once and
/// the hook died with the control group: no file.
#[test]
fn stop_lets_the_on_follower_hook_finish_under_systemd() {
    let Some(_one) = container_test("the on-follower hook at systemctl stop") else {
        return;
    };
    let (c, deb_in) = booted_with_deb(1);
    let m = &c.machines[0];
    m.ok(&format!("dpkg -i {deb_in}"));
    let one: String = config(Some(1), &m.socket, HEARTBEAT_MS)
        .lines()
        .filter(|l| !l.starts_with("server 2 ") && !l.starts_with("server 3 "))
        .map(|l| format!("{l}\n"))
        .collect();
    m.write(
        "/usr/local/bin/slow-on-follower",
        "#!/bin/sh\nsleep 3\necho \"$ELECTD_ROLE $ELECTD_TERM\" > /var/lib/electd/hook-done\n",
    );
    m.ok("chmod 755 /usr/local/bin/slow-on-follower");
    m.write(
        "/etc/electd/electd.conf",
        &format!("{one}on-follower /usr/local/bin/slow-on-follower\nhook-timeout 8s\n"),
    );
    m.ok("systemctl enable --now electd.service");
    let (leader, term) = c.settle(Duration::from_secs(30));
    assert_eq!(leader, 1);
    let t0 = Instant::now();
    m.ok("systemctl stop electd.service");
    let took = t0.elapsed();
    let done = m.run("cat /var/lib/electd/hook-done");
    let journal = m.journal("electd.service");
    assert!(
        done.status.success() && text(&done).trim() == format!("follower {term}"),
        "the on-follower hook did not finish before the unit stopped ({took:?}): {}\n{journal}",
        text(&done)
    );
    assert!(
        journal.contains("stopping: waiting for hook on-follower"),
        "{journal}"
    );
    c.clock.say(&format!(
        "systemctl stop took {took:?}; the on-follower hook (3 s) finished first"
    ));
}

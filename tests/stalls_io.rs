//! The event loop never waits on the disk or the log (SPEC section 12, issue 21), on
//! real daemons: a leader whose state file system is frozen (`fsfreeze` of a loop
//! mount) while a write is due, and a leader whose stderr is a full pipe that nobody
//! reads. Across a 4-second stall of either, the leader keeps the lease of a group
//! that needs no write (same term, role leader in every answer) and `status` answers
//! promptly; a stalled log sink costs dropped lines, counted and reported once the
//! sink takes writes again.
//!
//! The frozen-disk test needs root, a loop device and util-linux/e2fsprogs (`mkfs.ext4`,
//! `mount`, `fsfreeze`); without them it is skipped with a message, and fails under
//! `CI=1`. Figures (median and largest status latency during the stall) are printed.

mod common;

use common::{Cluster, Mode, Opts, SERIAL, agreed, groups_text, request_at, sh, wait_for};
use electd::json;
use std::io::{BufRead, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long each stall lasts.
const STALL: Duration = Duration::from_secs(4);
/// The pause between two status requests during a stall.
const STATUS_EVERY: Duration = Duration::from_millis(20);
/// The bounds on status latency during a stall: the median must stay at the 10 ms of
/// the issue; the largest gets room for a loaded 2-core machine (other tests run beside
/// this one). A loop that waits on the stall misses either by seconds.
const MEDIAN_BOUND: Duration = Duration::from_millis(10);
const MAX_BOUND: Duration = Duration::from_millis(50);

/// Two groups, both preferring server 1 (which leads both after a cold start): `a`
/// is watched, `b` is the one the test makes write (or log).
fn opts() -> Opts {
    let mut o = Opts::new(Mode::Unicast, 3);
    o.run = 0;
    o.extra = groups_text(&[("a", Some("1 2 3")), ("b", Some("1 2 3"))]);
    o
}

/// Waits until server 1 leads both groups (handed over to it where another server
/// won the cold start); returns group a's term.
fn server_1_leads_both(c: &Cluster) -> u64 {
    let first = wait_for("a leader in each group", Duration::from_secs(10), || {
        agreed(c)
    });
    for (g, (leader, _)) in &first {
        if *leader != 1 {
            let a = c.request(*leader, &format!("yield {g} 1"));
            assert!(
                a.as_deref().is_some_and(|l| l.contains("\"ok\":true")),
                "yield {g} 1 on server {leader}: {a:?}"
            );
        }
    }
    wait_for(
        "server 1 to lead both groups",
        Duration::from_secs(10),
        || {
            let a = agreed(c)?;
            (a.get("a")?.0 == 1 && a.get("b")?.0 == 1).then(|| a["a"].1)
        },
    )
}

/// What the sampler saw of group `a` on server 1 during a stall.
struct Samples {
    latencies: Vec<Duration>,
    /// Answers that were missing or did not report (leader, term).
    bad: Vec<String>,
}

impl Samples {
    fn median(&self) -> Duration {
        let mut l = self.latencies.clone();
        l.sort();
        l.get(l.len() / 2).copied().unwrap_or(Duration::MAX)
    }

    fn max(&self) -> Duration {
        self.latencies
            .iter()
            .copied()
            .max()
            .unwrap_or(Duration::MAX)
    }

    fn check(&self, what: &str) {
        eprintln!(
            "{what}: {} status answers, median {:?}, max {:?}, {} not leader of the same term",
            self.latencies.len(),
            self.median(),
            self.max(),
            self.bad.len()
        );
        assert!(
            self.bad.is_empty(),
            "{what}: the leader lost its lease or did not answer: {:?}",
            &self.bad[..self.bad.len().min(10)]
        );
        assert!(self.latencies.len() >= 50, "{what}: too few answers");
        assert!(
            self.median() <= MEDIAN_BOUND && self.max() <= MAX_BOUND,
            "{what}: status answered in median {:?}, max {:?} (bounds {MEDIAN_BOUND:?}, {MAX_BOUND:?})",
            self.median(),
            self.max()
        );
    }
}

/// Asks server 1 for group a's status every `STATUS_EVERY` for `STALL`, running `also`
/// before each request; records each answer's latency and whether it still reports
/// leader of `term`.
fn sample(sock: &Path, term: u64, mut also: impl FnMut()) -> Samples {
    let mut s = Samples {
        latencies: Vec::new(),
        bad: Vec::new(),
    };
    let t0 = Instant::now();
    while t0.elapsed() < STALL {
        also();
        let at = Instant::now();
        let answer = request_at(sock, "status a");
        let took = at.elapsed();
        s.latencies.push(took);
        let v = answer.and_then(|l| json::parse(l.trim()).ok());
        let role = v
            .as_ref()
            .and_then(|v| v.get("role")?.as_str().map(String::from));
        let t = v.as_ref().and_then(|v| v.get("term")?.as_u64());
        if role.as_deref() != Some("leader") || t != Some(term) {
            s.bad.push(format!(
                "at {:?}: role {role:?} term {t:?} after {took:?}",
                t0.elapsed()
            ));
        }
        std::thread::sleep(STATUS_EVERY);
    }
    s
}

/// True when `tool --version` (or `--help`) runs.
fn has(tool: &str) -> bool {
    sh(&[tool, "--version"]) || sh(&[tool, "--help"]) || sh(&[tool, "-V"])
}

/// Skips (outside CI) or fails (CI) when this host cannot run the frozen-disk test.
fn require(ok: bool, what: &str) -> bool {
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root with loop devices, mkfs.ext4 and fsfreeze: {what}"
        );
        eprintln!("skipped: {what}");
    }
    ok
}

/// A loop-mounted ext4 file system in a directory of its own: unmounted and removed
/// when dropped (after every daemon using it has gone: declare it before the cluster).
struct LoopMount {
    dir: PathBuf,
    mnt: PathBuf,
    mounted: bool,
}

impl LoopMount {
    fn create() -> Option<LoopMount> {
        let dir = std::env::temp_dir().join(format!("electd-stall-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).ok()?;
        let mut m = LoopMount {
            mnt: dir.join("mnt"),
            dir,
            mounted: false,
        };
        std::fs::create_dir_all(&m.mnt).ok()?;
        let img = m.dir.join("disk.img");
        let img = img.to_str()?;
        let ok = sh(&["truncate", "-s", "32M", img])
            && sh(&["mkfs.ext4", "-q", "-F", img])
            && sh(&["mount", "-o", "loop", img, m.mnt.to_str()?]);
        m.mounted = ok;
        ok.then_some(m)
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        if self.mounted {
            let mnt = self.mnt.to_str().unwrap_or_default();
            let _ = sh(&["fsfreeze", "-u", mnt]);
            if !sh(&["umount", mnt]) {
                let _ = sh(&["umount", "-l", mnt]);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Thaws a frozen file system when dropped: declared after the cluster, so it runs
/// before the daemons are killed (a process waiting on a frozen file system cannot
/// die until it thaws).
struct Thaw(PathBuf);

impl Drop for Thaw {
    fn drop(&mut self) {
        let _ = sh(&["fsfreeze", "-u", self.0.to_str().unwrap_or_default()]);
    }
}

/// Reads the answer to the `drain` sent on `drainer` (within 10 s, the disk thawed):
/// it must say drained.
fn drain_answered(drainer: &std::os::unix::net::UnixStream) {
    drainer.set_nonblocking(false).unwrap();
    drainer
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = String::new();
    let _ = std::io::BufReader::new(drainer).read_line(&mut answer);
    assert!(
        answer.contains("\"ok\":true") && answer.contains("\"drained\":true"),
        "the drain's answer after the thaw: {answer:?}"
    );
}

/// A loop-mounted disk and a cluster (`opts`) whose server 1 keeps its state (and
/// lock) file on it, every server running; None (skipped, or failed under CI) when
/// this host cannot freeze a disk. Drop the cluster before the disk.
fn cluster_with_server_1_on_a_loop_mount() -> Option<(LoopMount, Cluster)> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !require(root, "the frozen-disk test needs root (mount, fsfreeze)") {
        return None;
    }
    let tools = ["mkfs.ext4", "fsfreeze", "mount", "umount", "truncate"];
    if let Some(t) = tools.iter().find(|t| !has(t)) {
        require(false, &format!("the frozen-disk test needs {t}"));
        return None;
    }
    let Some(disk) = LoopMount::create() else {
        require(false, "cannot make and loop-mount an ext4 image here");
        return None;
    };
    let mut c = Cluster::build(&opts());
    let text = std::fs::read_to_string(&c.conf).unwrap();
    let state = format!("state {}/{{id}}.state", c.dir.display());
    assert!(text.contains(&state), "{text}");
    c.set_server_text(
        1,
        &text.replace(
            &state,
            &format!("state {}/{{id}}.state", disk.mnt.display()),
        ),
    );
    for id in 1..=3 {
        c.spawn(id);
    }
    Some((disk, c))
}

/// Issue 21, item 4: a leader whose state file system is frozen for 4 s while a write
/// is due (`elect b` on its socket makes it vote in a new term of group b, which needs
/// the state file) keeps group a's lease (role leader, same term, in every answer) and
/// answers `status` within the bounds; once thawed, the write lands. Group b itself
/// needs that write (its vote, then its new term), so it may lose its seat meanwhile:
/// a stalled disk delays only what needs a write.
///
/// Fails on the code before the state writer thread: the loop waited in the fsync, no
/// status was answered for seconds and group a's lease ended.
#[test]
fn a_frozen_state_disk_keeps_the_lease_and_status_answers() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some((disk, c)) = cluster_with_server_1_on_a_loop_mount() else {
        return;
    };
    let term_a = server_1_leads_both(&c);
    let term_b = agreed(&c).unwrap()["b"].1;
    let sock = c.sock(1);
    let mnt = disk.mnt.to_str().unwrap().to_string();
    let writes = || c.metric(1, "electd_state_writes_total");
    let before = writes();
    assert!(sh(&["fsfreeze", "-f", &mnt]), "fsfreeze -f {mnt}");
    let thaw = Thaw(disk.mnt.clone());
    let mut asked = false;
    let mut drainer: Option<std::os::unix::net::UnixStream> = None;
    let samples = sample(&sock, term_a, || {
        if !asked {
            asked = true;
            let a = request_at(&sock, "elect b");
            assert!(
                a.as_deref().is_some_and(|l| l.contains("\"ok\":true")),
                "elect b: {a:?}"
            );
            // A drain is answered only once it is on disk, and the loop must not wait
            // for that: the status samples go on being answered meanwhile.
            let mut d = std::os::unix::net::UnixStream::connect(&sock).unwrap();
            d.write_all(b"drain b\n").unwrap();
            drainer = Some(d);
        }
    });
    let mut drainer = drainer.expect("drain sent");
    drainer.set_nonblocking(true).unwrap();
    let mut early = [0u8; 256];
    let answered_early = match drainer.read(&mut early) {
        Ok(n) => Some(String::from_utf8_lossy(&early[..n]).to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
        Err(e) => panic!("drain connection: {e}"),
    };
    assert_eq!(
        answered_early, None,
        "a drain must not be answered while its write cannot land"
    );
    // The write that `elect b` asked for was still in flight at the end of the stall.
    let during = writes();
    let age = common::metric_value::<f64>(
        &request_at(&sock, "metrics").unwrap_or_default(),
        "electd_state_write_seconds",
    );
    assert!(
        age.is_some_and(|a| a >= 3.0),
        "electd_state_write_seconds at the end of the stall: {age:?}"
    );
    drop(thaw);
    samples.check("state disk frozen 4 s");
    // Once the write lands, the held answer comes.
    drain_answered(&drainer);
    assert_eq!(during, before, "no state write can finish on a frozen disk");
    // The write that waited lands: group b's round completes in a new term.
    wait_for(
        "group b's round after the thaw",
        Duration::from_secs(10),
        || {
            let a = agreed(&c)?;
            (a.get("b")?.1 > term_b && a.get("a")? == &(1, term_a)).then_some(())
        },
    );
    let after = wait_for(
        "the write to land after the thaw",
        Duration::from_secs(5),
        || Some(writes()).filter(|&w| w > before),
    );
    eprintln!("state writes: {before} before the freeze, {during} at its end, {after} after");
    drop(c);
    drop(disk);
}

/// README: "a stalled state disk delays only votes, new terms and `drain` answers; a
/// sitting leader keeps its lease, a drained one still hands over". Server 1 leads
/// both groups; its state file system is frozen, then it is drained. It hands both
/// groups over as planned (`electd_handovers_total{reason="drain"}`) while the disk is
/// still frozen, each to a server of the group's order, and answers the drain only once
/// the disk thaws.
///
/// Fails on the code where the drain's write held every datagram behind it: the
/// drained leader's heartbeats stopped with the write, its leases ran out, the others
/// elected without a handover, and the counter stayed at 0 until the thaw.
#[test]
fn a_drained_leader_on_a_frozen_disk_still_hands_over() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some((disk, c)) = cluster_with_server_1_on_a_loop_mount() else {
        return;
    };
    server_1_leads_both(&c);
    let sock = c.sock(1);
    let mnt = disk.mnt.to_str().unwrap().to_string();
    let drain_handovers = |g: &str| {
        common::metric_value::<u64>(
            &request_at(&sock, "metrics").unwrap_or_default(),
            &format!("electd_handovers_total{{group=\"{g}\",reason=\"drain\"}}"),
        )
    };
    assert_eq!(drain_handovers("a"), Some(0));
    let writes_before = c.metric(1, "electd_state_writes_total");
    assert!(sh(&["fsfreeze", "-f", &mnt]), "fsfreeze -f {mnt}");
    let thaw = Thaw(disk.mnt.clone());
    let frozen_at = Instant::now();
    let mut drainer = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    drainer.write_all(b"drain\n").unwrap();
    // Within the freeze (4 s, and the lease at the cluster's heartbeat is far shorter):
    // both groups led by server 2, the next in their order, each after a planned
    // handover.
    let moved = wait_for(
        "both groups handed over while the disk is frozen",
        Duration::from_secs(3),
        || {
            let a = agreed(&c)?;
            let planned = ["a", "b"].iter().all(|g| drain_handovers(g) == Some(1));
            (a.values().all(|(l, _)| *l == 2) && planned).then_some(a)
        },
    );
    let took = frozen_at.elapsed();
    assert!(took < STALL, "handed over after {took:?}, past the freeze");
    assert_eq!(
        c.metric(1, "electd_state_writes_total"),
        writes_before,
        "no write can land on a frozen disk: the handover did not wait for one"
    );
    drainer.set_nonblocking(true).unwrap();
    let mut early = [0u8; 256];
    assert!(
        matches!(drainer.read(&mut early), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a drain must not be answered while its write cannot land"
    );
    eprintln!("drained on a frozen disk: handed over in {took:?}: {moved:?}");
    std::thread::sleep(STALL.saturating_sub(frozen_at.elapsed()));
    drop(thaw);
    drain_answered(&drainer);
    drop(c);
    drop(disk);
}

/// A reload to longer timers (heartbeat 100 ms to 300 ms: the hold grows from 300 ms to
/// 900 ms) on every server while the leader's state disk is frozen: the longer hold
/// must be on disk before a LEAD carries it, so the leader keeps its running timers and
/// the hold on its disk until the write can land, and keeps both leases all along (role
/// leader, same term, in every `status` of the freeze). Once thawed, the new heartbeat
/// is in force on it.
///
/// Fails on the code that put a reload's timers in force at once: the first LEAD with
/// the longer hold waited for the write and held every later datagram, and both leases
/// lapsed within a second of the reload.
#[test]
fn a_reload_to_longer_timers_on_a_frozen_disk_keeps_the_lease() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some((disk, c)) = cluster_with_server_1_on_a_loop_mount() else {
        return;
    };
    let term_a = server_1_leads_both(&c);
    let sock = c.sock(1);
    let mnt = disk.mnt.to_str().unwrap().to_string();
    let longer = |id: u16| {
        let text = std::fs::read_to_string(c.conf_of(id)).unwrap();
        let from = format!("heartbeat {}ms\n", common::HBT_MS);
        assert!(text.contains(&from), "{text}");
        text.replace(&from, "heartbeat 300ms\n")
    };
    let (own, shared) = (longer(1), longer(2));
    // The lease left, as `status a` says it: at most the lease of a heartbeat of 100 ms
    // (294 ms) under the running timers; up to 882 ms under the new ones.
    let lease_ms = || {
        let v = request_at(&sock, "status a").and_then(|l| json::parse(l.trim()).ok());
        v.and_then(|v| v.get("lease_ms")?.as_u64())
    };
    let longest = |over: Duration| {
        let t0 = Instant::now();
        let mut most = 0;
        while t0.elapsed() < over {
            most = most.max(lease_ms().unwrap_or(0));
            std::thread::sleep(STATUS_EVERY);
        }
        most
    };
    assert!(
        longest(Duration::from_millis(500)) <= 300,
        "a lease of the running timers"
    );
    assert!(sh(&["fsfreeze", "-f", &mnt]), "fsfreeze -f {mnt}");
    let thaw = Thaw(disk.mnt.clone());
    let mut reloaded = false;
    let samples = sample(&sock, term_a, || {
        if !reloaded {
            reloaded = true;
            c.set_server_text(1, &own);
            std::fs::write(&c.conf, &shared).unwrap();
            for id in 1..=3 {
                common::signal(c.child(id), libc::SIGHUP);
            }
        }
    });
    let kept = longest(Duration::from_millis(500));
    // An operator sees the timers wait (`electd_timers_waiting`), and for how long the
    // write has hung (`electd_state_write_seconds`).
    let waiting = |v: &str| {
        request_at(&sock, "metrics")
            .unwrap_or_default()
            .lines()
            .any(|l| l == format!("electd_timers_waiting{{group=\"a\"}} {v}"))
    };
    let waiting_frozen = waiting("1");
    let log = std::fs::read_to_string(c.dir.join("1.log")).unwrap_or_default();
    drop(thaw);
    assert!(
        waiting_frozen,
        "electd_timers_waiting{{group=\"a\"}} was not 1 while the longer timers waited for the frozen disk"
    );
    assert!(
        log.contains("(in force once their longer hold is written to the state file)"),
        "the reload's log line does not say the new timers wait for the disk"
    );
    assert!(
        samples.bad.is_empty(),
        "the leader lost its lease after a reload on a frozen disk: {:?}",
        &samples.bad[..samples.bad.len().min(5)]
    );
    assert!(
        kept <= 300,
        "a lease of {kept} ms at the end of the freeze: the longer timers were in force \
         before their hold could be written"
    );
    wait_for(
        "a lease of the new timers after the thaw",
        Duration::from_secs(5),
        || (lease_ms().unwrap_or(0) > 400).then_some(()),
    );
    assert!(
        waiting("0"),
        "electd_timers_waiting{{group=\"a\"}} not back to 0 with the new timers in force"
    );
    assert_eq!(
        agreed(&c).unwrap()["a"],
        (1, term_a),
        "same leader, same term"
    );
    eprintln!(
        "reload on a frozen disk: {} status answers, every one leader of term {term_a}",
        samples.latencies.len()
    );
    drop(c);
    drop(disk);
}

/// A FIFO whose read end the test holds: drained by a thread while `reading`, left
/// full otherwise.
struct Sink {
    reading: Arc<AtomicBool>,
    got: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The test's own write end, to fill the pipe.
    filler: std::fs::File,
}

impl Sink {
    fn open(path: &Path) -> (Sink, std::fs::File) {
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a path string we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        let mut reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .unwrap();
        // With a reader open, opening for writing does not block.
        let daemon_end = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        let filler = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .unwrap();
        let reading = Arc::new(AtomicBool::new(true));
        let got = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (r2, g2, s2) = (reading.clone(), got.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            // Bounded: at most 10 minutes.
            let deadline = Instant::now() + Duration::from_secs(600);
            while !s2.load(Ordering::SeqCst) && Instant::now() < deadline {
                if !r2.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                }
                match reader.read(&mut buf) {
                    Ok(n) if n > 0 => g2.lock().unwrap().extend_from_slice(&buf[..n]),
                    _ => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        let sink = Sink {
            reading,
            got,
            stop,
            thread: Some(thread),
            filler,
        };
        (sink, daemon_end)
    }

    /// Stops reading and fills the pipe to the brim; returns the bytes written.
    fn stall(&mut self) -> usize {
        self.reading.store(false, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(20));
        let block = vec![b'#'; 4096];
        let mut n = 0;
        // Bounded: a pipe holds at most 1 MiB by default (64 KiB here).
        for _ in 0..1024 {
            match self.filler.write(&block) {
                Ok(k) if k > 0 => n += k,
                _ => break,
            }
        }
        // The last partial page, byte by byte.
        for _ in 0..4096 {
            match self.filler.write(b"#") {
                Ok(1) => n += 1,
                _ => break,
            }
        }
        n
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.got.lock().unwrap()).into_owned()
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Issue 21, item 4: a leader whose stderr is a full pipe that nobody reads, at log
/// level debug, for 4 s: it hands group b over on `yield b` and is asked `elect b`
/// over and over (each logs a line), yet keeps group a's lease (role leader, same
/// term, in every answer), answers `status` within the bounds and every request; once
/// the pipe is read again, a line says how many lines were dropped, and the metric
/// `electd_log_lines_dropped_total` counts them.
///
/// Fails on the code before the log writer thread: the first line logged blocked the
/// loop until the pipe was read.
#[test]
fn a_stalled_log_sink_keeps_the_lease_and_reports_dropped_lines() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = Cluster::build(&opts());
    let (mut sink, daemon_end) = Sink::open(&c.dir.join("1.fifo"));
    c.spawn_with_stderr(1, Stdio::from(daemon_end));
    for id in 2..=3 {
        c.spawn(id);
    }
    let term_a = server_1_leads_both(&c);
    let sock = c.sock(1);
    let filled = sink.stall();
    assert!(filled >= 4096, "filled only {filled} bytes");
    let mut n = 0u32;
    let mut unanswered = Vec::new();
    let samples = sample(&sock, term_a, || {
        // Each request logs at least one line; 20 per status sample outrun any queue.
        let cmd = if n == 0 { "yield b" } else { "elect b" };
        let burst = if n == 0 { 1 } else { 20 };
        for _ in 0..burst {
            let at = Instant::now();
            let a = request_at(&sock, cmd);
            if !a.as_deref().is_some_and(|l| l.contains("\"ok\":true")) {
                unanswered.push(format!("{cmd}: {a:?} after {:?}", at.elapsed()));
            }
        }
        n += 1;
    });
    sink.reading.store(true, Ordering::SeqCst);
    samples.check("log sink stalled 4 s");
    assert!(
        unanswered.is_empty(),
        "requests not answered during the stall: {:?}",
        &unanswered[..unanswered.len().min(5)]
    );
    let line = wait_for(
        "a line saying how many log lines were dropped",
        Duration::from_secs(5),
        || {
            sink.text()
                .lines()
                .find(|l| l.contains("log lines dropped"))
                .map(String::from)
        },
    );
    eprintln!("after the stall: {line}");
    let reported: u64 = line
        .split(" log lines dropped")
        .next()
        .and_then(|h| h.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let dropped = common::metric_value::<u64>(
        &request_at(&sock, "metrics").unwrap_or_default(),
        "electd_log_lines_dropped_total",
    )
    .unwrap_or(0);
    assert!(
        reported > 0 && reported <= dropped,
        "reported {reported}, electd_log_lines_dropped_total {dropped}: {line}"
    );
    // Group b may still be settling after the rounds `elect b` opened.
    let a = wait_for("agreement in both groups", Duration::from_secs(5), || {
        agreed(&c)
    });
    assert_eq!(a["a"], (1, term_a), "group a kept its leader and term");
}

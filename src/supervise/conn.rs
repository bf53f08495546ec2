//! The connection to the daemon and its line protocol: the `supervise` request, the
//! numbered lines pushed back and what the supervisor makes of them, the `released N`
//! confirmations and the `health` reports (SPEC 11, 13).

use super::lease::{Timers, check_grace, stop_at};
use super::timers::StopTimers;
use super::{RunOptions, Supervisor};
use crate::json::{self, Value};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The longest line accepted from the daemon.
const MAX_LINE: usize = 4096;

/// The request that registers a supervisor (of a group's lease, when one is named).
/// It carries the grace (`grace_ms=N`), so the daemon can refuse a reload that would
/// leave it no room in the lease (SPEC 11).
fn supervise_request(opts: &RunOptions) -> String {
    let grace_ms = opts.grace.as_millis();
    let grace = if OLD_DAEMON.load(Ordering::Relaxed) {
        String::new()
    } else {
        format!(" grace_ms={grace_ms}")
    };
    match &opts.group {
        Some(g) => format!("supervise {g}{grace}\n"),
        None => format!("supervise{grace}\n"),
    }
}

/// The daemon is older than `grace_ms` (it answered that `grace_ms=N` is no group, or
/// that `supervise` takes one argument): register without it. Such a daemon cannot
/// refuse a reload for the grace, but `run` still checks the grace against every line
/// and reports unhealthy when it no longer fits. One process, one daemon: a flag.
static OLD_DAEMON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The daemon refused the stop timers passed with `supervise` (or the environment says
/// not to pass them: `ELECTCTL_RUN_NO_TIMERS=1`, hidden, for tests of the fallback):
/// register without them, and arm them here from each line. One process, one daemon.
static NO_TIMERS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The start of the daemon's refusal of the descriptors passed with `supervise`.
const TIMERS_REFUSED: &str = "electd: supervise: stop timers refused";

/// True when the stop timers are to be passed with `supervise`.
fn pass_timers() -> bool {
    !NO_TIMERS.load(Ordering::Relaxed)
        && std::env::var_os("ELECTCTL_RUN_NO_TIMERS").is_none_or(|v| v != "1")
}

/// Writes `text` on `stream` with the descriptors `fds` attached (SCM_RIGHTS, one
/// sendmsg: they arrive with the first byte of the line); the rest of a short write
/// after. Blocking (the stream has a write timeout). Public for tests that pass other
/// descriptors.
pub fn send_with_fds(stream: &mut UnixStream, text: &[u8], fds: &[i32]) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd_bytes = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
    // u64 words: the control buffer must be aligned for cmsghdr.
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: text.as_ptr() as *mut libc::c_void,
        iov_len: text.len(),
    };
    // SAFETY: an all-zero msghdr is valid; the fields set below point into locals that
    // outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: the control buffer holds CMSG_SPACE(fd_bytes) bytes: one header and the
    // descriptors fit, so CMSG_FIRSTHDR is non-null and CMSG_DATA has room for them.
    let n = unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(c), fd_bytes);
        libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL)
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    stream.write_all(&text[n as usize..])
}

/// True for an older daemon's refusal of the `grace_ms=N` argument.
fn refuses_grace(error: &str) -> bool {
    (error.contains("'grace_ms=") && error.contains("is not a group name"))
        || error.ends_with("usage: supervise [GROUP]")
}

/// The start of the daemon's answer to a `supervise` naming a group it does not run:
/// no later answer can change it (the group list cannot be reloaded), so run exits.
pub const NO_SUCH_GROUP: &str = "electd: no group";

/// One numbered line from the daemon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// Its number on this connection.
    pub n: u64,
    /// The daemon's current term.
    pub term: u64,
    /// The lease end (CLOCK_BOOTTIME ns) while this server leads; None otherwise.
    pub lease_until_ns: Option<u64>,
    /// The daemon's timers.
    pub timers: Timers,
    /// The election group the line is about (absent from older daemons' lines).
    pub group: Option<String>,
    /// The server that leads, as this server knows it (None: none known).
    pub leader_id: Option<u64>,
    /// The daemon holds this supervisor's stop timers and arms them at every renewal
    /// (`"timers":true`): renewals come through them, not as lines.
    pub daemon_arms: bool,
}

/// Parses a supervisor line; Err for anything else (an `{"error":..}` line included).
pub fn parse_line(text: &str) -> Result<Line, String> {
    let v = json::parse(text.trim()).map_err(|e| format!("unreadable line from electd: {e}"))?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        return Err(format!("electd: {e}"));
    }
    let num = |k: &str| {
        v.get(k)
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("line from electd without '{k}': {}", text.trim()))
    };
    let leader = v.get("role").and_then(Value::as_str) == Some("leader");
    let until = v.get("lease_until_ns").and_then(Value::as_u64);
    Ok(Line {
        group: v.get("group").and_then(Value::as_str).map(str::to_string),
        leader_id: v.get("leader").and_then(Value::as_u64),
        daemon_arms: v.get("timers") == Some(&Value::Bool(true)),
        n: num("n")?,
        term: num("term")?,
        lease_until_ns: if leader { until } else { None },
        timers: Timers {
            lease_len: Duration::from_nanos(num("lease_len_ns")?),
            heartbeat: Duration::from_nanos(num("heartbeat_ns")?),
            rtt: Duration::from_nanos(num("rtt_ns")?),
        },
    })
}

/// The connection to the daemon. Once registered, `run` never asks again (issue 25):
/// nothing it needs comes only from an answer.
///
/// - Every change of what a line says is pushed at once (role, leader, term, the
///   daemon's timers including the round-trip bound, a handoff, and each renewal the
///   supervisor needs: on its stop timers, or as a line once their SIGTERM instant came).
/// - A daemon that dies or restarts closes the connection (the kernel closes its
///   descriptors): `run` reads EOF, stops as on a planned stop, and reconnects every
///   `--poll`; the registration, grace and health report go again on the new one.
/// - The daemon never closes a supervising connection as idle (the control socket's
///   idle timeout and eviction skip supervisors), and a slow reader is dropped, which
///   is a close as above.
/// - A daemon that is alive but hung (stopped, frozen) sends nothing and answers
///   nothing: an ask would have gone unanswered too (no answer was ever awaited). Its
///   lease end is enforced here and by the enforcer from the stop timers last armed
///   (S5), and a follower's `run` runs nothing until a line says this server leads.
///
/// The 10 s ask (`IDLE_ASK`, before issue 25's fifth round) cost a follower's `run` and
/// its daemon a wakeup and an answer every 10 s for none of these.
pub(super) struct Conn {
    pub(super) stream: UnixStream,
    inbuf: Vec<u8>,
    /// The highest non-leader line not yet confirmed.
    to_confirm: Option<u64>,
    /// The number of the last leader line read (0: none).
    last_leader_n: u64,
    /// The number of the last line confirmed (`released N`).
    confirmed_n: u64,
    /// What this connection was told is failing (`health failing REASON`), if anything.
    reported: Option<String>,
    /// A line said the daemon holds the stop timers (logged once per connection).
    daemon_arms: bool,
}

impl Conn {
    /// Connects and registers, passing the stop timers unless the daemon refused them.
    pub(super) fn open(opts: &RunOptions, timers: &StopTimers) -> Result<Conn, String> {
        let mut stream = UnixStream::connect(&opts.socket)
            .map_err(|e| crate::control::connect_error(&opts.socket, &e))?;
        let req = supervise_request(opts);
        stream
            .set_write_timeout(Some(Duration::from_secs(1)))
            .and_then(|_| {
                if pass_timers() {
                    send_with_fds(&mut stream, req.as_bytes(), &[timers.fd()])
                } else {
                    stream.write_all(req.as_bytes())
                }
            })
            .and_then(|_| stream.set_nonblocking(true))
            .map_err(|e| format!("{}: {e}", opts.socket.display()))?;
        Ok(Conn {
            stream,
            inbuf: Vec::new(),
            to_confirm: None,
            last_leader_n: 0,
            confirmed_n: 0,
            reported: None,
            daemon_arms: false,
        })
    }

    pub(super) fn send(&mut self, text: &str) -> Result<(), String> {
        // Short lines on a local socket: the buffer never fills with this traffic.
        self.stream
            .write_all(text.as_bytes())
            .map_err(|e| format!("write to electd: {e}"))
    }

    /// Reads what arrived; Err when the connection is gone or talks nonsense.
    fn read_lines(&mut self) -> Result<Vec<String>, String> {
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Err("electd closed the connection".into()),
                Ok(n) => {
                    self.inbuf.extend_from_slice(&buf[..n]);
                    if n < buf.len() {
                        // All there was: the rest, if any comes, wakes ppoll again
                        // (no read that only returns EAGAIN).
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read from electd: {e}")),
            }
            if self.inbuf.len() > 16 * MAX_LINE {
                break;
            }
        }
        let mut lines = Vec::new();
        while let Some(p) = self.inbuf.iter().position(|&b| b == b'\n') {
            let l: Vec<u8> = self.inbuf.drain(..=p).collect();
            lines.push(String::from_utf8_lossy(&l).into_owned());
        }
        if self.inbuf.len() > MAX_LINE {
            return Err(format!("a line from electd longer than {MAX_LINE} bytes"));
        }
        Ok(lines)
    }
}

impl Supervisor<'_> {
    /// Tells the daemon when --max-restarts turns the command failing or healthy.
    pub(super) fn report_health(&mut self) {
        let now = Instant::now();
        let restarts = self.restarts.as_mut().map(|w| (w.failing(now), w.clone()));
        let Some(c) = self.conn.as_mut() else { return };
        // A grace that no longer fits weighs most: nothing can run here at all.
        let want = match (&self.unfit, &restarts) {
            (Some(why), _) => Some(why.clone()),
            (None, Some((true, w))) => Some(w.describe()),
            _ => None,
        };
        if want == c.reported {
            return;
        }
        if let Some((failing, w)) = &restarts {
            let was = c.reported.as_deref() == Some(w.describe().as_str());
            if *failing && !was && self.unfit.is_none() {
                say!(
                    "the command exited {} times within {:?}: reporting this server unhealthy to electd",
                    w.n,
                    w.window
                );
            } else if !failing && was {
                say!(
                    "no exit for {:?}: reporting this server healthy again",
                    w.window
                );
            }
        }
        let line = match &want {
            Some(why) => format!("health failing {why}\n"),
            None => "health ok\n".to_string(),
        };
        match c.send(&line) {
            Ok(()) => c.reported = want,
            Err(e) => self.lost(e),
        }
    }

    pub(super) fn read_daemon(&mut self) -> Result<(), i32> {
        let Some(c) = self.conn.as_mut() else {
            return Ok(());
        };
        let quiet = self.ready.is_some_and(|r| !r.conn);
        let lines = match if quiet {
            Ok(Vec::new())
        } else {
            c.read_lines()
        } {
            Ok(l) => l,
            Err(e) => {
                self.lost(e);
                return Ok(());
            }
        };
        for text in lines {
            match parse_line(&text) {
                Ok(l) => self.on_line(l)?,
                Err(e) if refuses_grace(&e) && !OLD_DAEMON.load(Ordering::Relaxed) => {
                    // A rolling upgrade: this `run` is newer than its daemon.
                    OLD_DAEMON.store(true, Ordering::Relaxed);
                    say!(
                        "electd is older than this electctl (it does not take grace_ms): registering without it; upgrade electd so that a reload can check --grace"
                    );
                    if let Some(c) = self.conn.as_mut() {
                        if let Err(e) = c.send(&supervise_request(self.opts)) {
                            self.lost(e);
                            return Ok(());
                        }
                    }
                }
                Err(e) if e.starts_with(TIMERS_REFUSED) && !NO_TIMERS.load(Ordering::Relaxed) => {
                    // Renewals then come as lines, and this process arms the timers.
                    NO_TIMERS.store(true, Ordering::Relaxed);
                    say!("{e}: registering without them (each renewal then comes as a line)");
                    if let Some(c) = self.conn.as_mut() {
                        if let Err(e) = c.send(&supervise_request(self.opts)) {
                            self.lost(e);
                            return Ok(());
                        }
                    }
                }
                Err(e) if e.starts_with(NO_SUCH_GROUP) || e.contains("several election groups") => {
                    // The command never started on this connection: nothing to stop.
                    say!("{e}");
                    return Err(2);
                }
                Err(e) => self.error(e),
            }
        }
        Ok(())
    }

    fn on_line(&mut self, l: Line) -> Result<(), i32> {
        if self.checked != Some(l.timers) {
            match check_grace(self.opts.grace, &l.timers) {
                Err(e) if self.checked.is_none() => {
                    say!("{e}");
                    return Err(2);
                }
                Err(e) => {
                    // The daemon's lease got shorter (a restart with shorter timers,
                    // or a reload by a daemon that did not know the grace): nothing
                    // can run here, so say so where it counts, once, and loudly.
                    if self.unfit.is_none() {
                        say!(
                            "ERROR: this supervisor cannot work any more: {e}. Reporting this server unhealthy to electd so that the lease moves where a command can run"
                        );
                    }
                    self.unfit = Some(format!(
                        "electctl run --grace {}ms no longer fits the lease",
                        self.opts.grace.as_millis()
                    ));
                }
                Ok(()) => {
                    if self.unfit.take().is_some() {
                        say!("the grace fits the daemon's lease again: reporting healthy");
                    }
                }
            }
            self.checked = Some(l.timers);
        }
        let c = self.conn.as_mut().expect("lines come from a connection");
        if l.daemon_arms && !c.daemon_arms {
            c.daemon_arms = true;
            say!("electd holds the stop timers: it re-arms them at each renewal");
        }
        self.term = l.term;
        if l.group.is_some() {
            self.group = l.group;
        }
        match l.lease_until_ns {
            Some(u) => {
                self.leader = true;
                self.waiting = None;
                c.last_leader_n = l.n;
                // A daemon that holds the timers armed them before it wrote the line
                // (and re-arms them at each renewal): arming here from a line read late
                // would move them earlier than its newest lease end.
                if !l.daemon_arms {
                    if let Err(e) = self.timers.arm(stop_at(u, self.opts.grace)) {
                        self.error(format!("cannot arm the stop timers: {e}"));
                    }
                }
            }
            None => {
                // Planned stop or no lease: confirm once no command runs. The known
                // lease end stays: it still bounds the SIGKILL of a stopping command.
                self.leader = false;
                if self.waiting != Some((l.leader_id, l.term)) {
                    self.waiting = Some((l.leader_id, l.term));
                    // The group only when one was named (`--group`): the daemon calls
                    // the one group of a file without `group` lines `default`.
                    let group = self
                        .opts
                        .group
                        .as_deref()
                        .map_or(String::new(), |g| format!(" group {g}"));
                    match l.leader_id {
                        Some(id) => say!(
                            "waiting: server {id} leads{group} (term {}); the command starts when this server holds the lease",
                            l.term
                        ),
                        None => say!(
                            "waiting: no leader{group} known yet (term {}); the command starts when this server holds the lease",
                            l.term
                        ),
                    }
                }
                // Only a leader line since the last confirmation needs one (the
                // daemon counts a supervisor clear otherwise): an idle follower's
                // lines cost the daemon nothing more.
                if c.last_leader_n > c.confirmed_n {
                    c.to_confirm = Some(c.to_confirm.map_or(l.n, |p| p.max(l.n)));
                }
            }
        }
        Ok(())
    }

    /// Confirms the last non-leader line once no command runs.
    pub(super) fn confirm(&mut self) {
        if self.running.is_some() {
            return;
        }
        let Some(c) = self.conn.as_mut() else { return };
        let Some(n) = c.to_confirm.take() else { return };
        match c.send(&format!("released {n}\n")) {
            Ok(()) => c.confirmed_n = n,
            Err(e) => self.lost(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rolling upgrade: the answers of electd before `grace_ms` (82751f4) to this
    /// `run`'s request are recognised, and the request is then made without it.
    #[test]
    fn an_older_daemons_refusal_of_the_grace_is_recognised() {
        for old in [
            r#"{"error":"supervise: 'grace_ms=150' is not a group name ([a-z][a-z0-9_-]{0,31})"}"#,
            r#"{"error":"usage: supervise [GROUP]"}"#,
        ] {
            let e = parse_line(old).unwrap_err();
            assert!(refuses_grace(&e), "{e}");
        }
        for other in [
            r#"{"error":"no group 'orders' (this server's groups: a, b)"}"#,
            r#"{"error":"supervise: 'Orders' is not a group name ([a-z][a-z0-9_-]{0,31})"}"#,
        ] {
            assert!(!refuses_grace(&parse_line(other).unwrap_err()), "{other}");
        }
    }

    #[test]
    fn lines_parse_and_bad_lines_are_errors() {
        let l = parse_line(
            r#"{"n":3,"id":1,"role":"leader","leader":1,"term":7,"lease_until_ns":123,"now_ns":100,"lease_len_ns":294000000,"heartbeat_ns":100000000,"rtt_ns":20000000,"resigning":false}"#,
        )
        .unwrap();
        assert_eq!((l.n, l.term, l.lease_until_ns), (3, 7, Some(123)));
        let want = Timers {
            lease_len: Duration::from_millis(294),
            heartbeat: Duration::from_millis(100),
            rtt: Duration::from_millis(20),
        };
        assert_eq!(l.timers, want);
        // A follower line carries no lease, whatever it says.
        let f = parse_line(
            r#"{"n":4,"role":"follower","term":7,"lease_until_ns":5,"lease_len_ns":1,"heartbeat_ns":1,"rtt_ns":1}"#,
        )
        .unwrap();
        assert_eq!(f.lease_until_ns, None);
        assert!(
            parse_line(r#"{"error":"nope"}"#)
                .unwrap_err()
                .contains("nope")
        );
        assert!(parse_line(r#"{"role":"leader"}"#).is_err());
        assert!(parse_line("{{{").is_err());
        assert!(parse_line("").is_err());
    }
}

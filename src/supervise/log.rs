//! `electctl run`'s log lines on stderr, written so that a sink that stops reading (a
//! pipe nobody drains, a stuck journald) never blocks the supervisor (SPEC sections 8
//! S5 and 11: "`run` never blocks on its own logging").
//!
//! Lines wait in a bounded queue and are written only when the sink takes them without
//! blocking; lines that do not fit in the queue are dropped and counted, and one line
//! says how many once the sink takes writes again. How a write is kept from blocking
//! depends on what stderr is, because the command shares run's stderr and must not have
//! its own writes turned non-blocking under it:
//!
//! - a socket (journald's stream): `send(MSG_DONTWAIT)`, which leaves the shared file
//!   flags alone;
//! - a pipe or FIFO: a description of its own, opened through `/proc/self/fd/2` with
//!   `O_NONBLOCK`, so only run's writes are non-blocking; a write of at most
//!   `PIPE_BUF` bytes is then all or nothing;
//! - anything else (a file, a terminal, /dev/null): `poll(POLLOUT)` with a zero timeout
//!   before each write of at most `PIPE_BUF` bytes. A regular file on a stalled disk can
//!   still block here: give run a pipe or the journal when that matters (README).

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

/// The most lines held while the sink does not take them.
const MAX_QUEUED: usize = 256;
/// The most bytes one write hands the sink: a pipe write this small is atomic.
const MAX_WRITE: usize = libc::PIPE_BUF;
/// The longest line kept (longer ones are cut).
const MAX_LINE: usize = 2048;

enum Sink {
    /// stderr is a socket: send with MSG_DONTWAIT.
    Socket,
    /// stderr is a pipe: a non-blocking description of our own.
    Own(OwnedFd),
    /// Anything else: poll for POLLOUT before each write.
    Polled,
}

struct Log {
    sink: Sink,
    queue: VecDeque<Vec<u8>>,
    /// Bytes of the front line already written.
    offset: usize,
    dropped: u64,
}

static LOG: Mutex<Option<Log>> = Mutex::new(None);

fn sink() -> Sink {
    // SAFETY: fstat on fd 2 into a zeroed struct we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(2, &mut st) } != 0 {
        return Sink::Polled;
    }
    match st.st_mode & libc::S_IFMT {
        libc::S_IFSOCK => Sink::Socket,
        libc::S_IFIFO => {
            // SAFETY: open(2) with a NUL-terminated path; the result is ours.
            let fd = unsafe {
                libc::open(
                    c"/proc/self/fd/2".as_ptr(),
                    libc::O_WRONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
                )
            };
            if fd >= 0 {
                // SAFETY: a fresh descriptor nothing else owns.
                Sink::Own(unsafe { OwnedFd::from_raw_fd(fd) })
            } else {
                Sink::Polled
            }
        }
        _ => Sink::Polled,
    }
}

/// Sets the sink up from what stderr is now; call once before the first line.
pub fn init() {
    let mut g = LOG.lock().unwrap_or_else(|e| e.into_inner());
    *g = Some(Log {
        sink: sink(),
        queue: VecDeque::new(),
        offset: 0,
        dropped: 0,
    });
}

/// Queues `electctl run: MSG` and writes what the sink takes now. Never blocks.
pub fn say(msg: &str) {
    let mut g = LOG.lock().unwrap_or_else(|e| e.into_inner());
    let Some(log) = g.as_mut() else {
        // Not set up (unit tests): stderr as usual.
        drop(g);
        eprintln!("electctl run: {msg}");
        return;
    };
    let mut line = format!("electctl run: {msg}");
    if line.len() > MAX_LINE {
        let mut cut = MAX_LINE;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
    }
    line.push('\n');
    log.push(line.into_bytes());
}

/// Writes what the sink takes now; returns the descriptor to wait on for POLLOUT
/// while lines are left.
pub fn flush() -> Option<RawFd> {
    let mut g = LOG.lock().unwrap_or_else(|e| e.into_inner());
    let log = g.as_mut()?;
    log.flush();
    (!log.queue.is_empty()).then(|| log.fd())
}

/// The lines dropped and not yet reported.
pub fn dropped() -> u64 {
    let g = LOG.lock().unwrap_or_else(|e| e.into_inner());
    g.as_ref().map_or(0, |l| l.dropped)
}

impl Log {
    fn fd(&self) -> RawFd {
        match &self.sink {
            Sink::Own(fd) => fd.as_raw_fd(),
            _ => 2,
        }
    }

    /// One write of at most MAX_WRITE bytes that cannot block; the bytes taken, or
    /// None when the sink takes nothing now.
    fn write_some(&self, bytes: &[u8]) -> Option<usize> {
        let bytes = &bytes[..bytes.len().min(MAX_WRITE)];
        let n = match &self.sink {
            // SAFETY: send(2) from a live buffer on fd 2; MSG_NOSIGNAL: no SIGPIPE.
            Sink::Socket => unsafe {
                libc::send(
                    2,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            },
            // SAFETY: write(2) from a live buffer on our own non-blocking descriptor.
            Sink::Own(fd) => unsafe {
                libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len())
            },
            Sink::Polled => {
                let mut p = libc::pollfd {
                    fd: 2,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: poll(2) on one pollfd we own, zero timeout.
                if unsafe { libc::poll(&mut p, 1, 0) } != 1 || p.revents & libc::POLLOUT == 0 {
                    return None;
                }
                // SAFETY: write(2) from a live buffer on fd 2.
                unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) }
            }
        };
        (n > 0).then_some(n as usize)
    }

    /// Queues one line (or counts it dropped) and writes what the sink takes now.
    fn push(&mut self, line: Vec<u8>) {
        if self.queue.len() >= MAX_QUEUED {
            self.dropped += 1;
        } else {
            self.queue.push_back(line);
        }
        self.flush();
    }

    fn flush(&mut self) {
        // Bounded: each pass writes or stops; the queue holds at most MAX_QUEUED + 1.
        for _ in 0..4 * MAX_QUEUED {
            let Some(front) = self.queue.front() else {
                if self.dropped == 0 {
                    return;
                }
                let line = format!(
                    "electctl run: {} log lines dropped: stderr did not take writes\n",
                    self.dropped
                );
                self.dropped = 0;
                self.queue.push_back(line.into_bytes());
                continue;
            };
            let Some(n) = self.write_some(&front[self.offset..]) else {
                return;
            };
            self.offset += n;
            if self.offset >= front.len() {
                self.queue.pop_front();
                self.offset = 0;
            }
        }
    }
}

/// Before `run` exits: gives stderr up to `within` to take the lines left, never more.
pub fn finish(within: std::time::Duration) {
    let t0 = std::time::Instant::now();
    // Bounded by `within`: each pass waits at most what is left of it.
    while let Some(fd) = flush() {
        let left = within.saturating_sub(t0.elapsed());
        if left.is_zero() {
            return;
        }
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: poll(2) on one pollfd we own.
        unsafe { libc::poll(&mut p, 1, left.as_millis().max(1) as i32) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`; both are ours.
        unsafe {
            assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK), 0);
            (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
        }
    }

    fn read_all(fd: &OwnedFd) -> String {
        let mut out = Vec::new();
        let mut buf = [0u8; 65536];
        loop {
            // SAFETY: read(2) into a local buffer from our non-blocking read end.
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            out.extend_from_slice(&buf[..n as usize]);
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// A sink that takes nothing: lines queue up to the bound, the rest are counted,
    /// nothing blocks; once it takes writes the queue drains and one line reports the
    /// drops.
    #[test]
    fn a_full_sink_drops_and_counts_and_reports_once_it_recovers() {
        let (r, w) = pipe();
        let filler = [b'x'; 4096];
        // SAFETY: writes from a live buffer to our non-blocking write end until full.
        while unsafe { libc::write(w.as_raw_fd(), filler.as_ptr().cast(), filler.len()) } > 0 {}
        let mut log = Log {
            sink: Sink::Own(w),
            queue: VecDeque::new(),
            offset: 0,
            dropped: 0,
        };
        for i in 0..MAX_QUEUED + 44 {
            log.push(format!("line {i}\n").into_bytes());
        }
        assert_eq!((log.queue.len(), log.dropped), (MAX_QUEUED, 44));
        let stale = read_all(&r);
        assert!(
            stale.bytes().all(|b| b == b'x'),
            "nothing of ours was written"
        );
        log.flush();
        let text = read_all(&r);
        assert!(text.starts_with("line 0\n"), "{text}");
        assert!(
            text.contains(&format!("line {}\n", MAX_QUEUED - 1)),
            "{text}"
        );
        assert!(!text.contains(&format!("line {}\n", MAX_QUEUED)), "{text}");
        assert!(
            text.ends_with("electctl run: 44 log lines dropped: stderr did not take writes\n"),
            "{text}"
        );
        assert!(log.queue.is_empty() && log.dropped == 0);
    }
}

//! The log sink (SPEC section 12): log lines go through a bounded queue that one
//! thread drains to stderr, so no other thread ever waits on a log write.
//!
//! journald stuck behind a slow disk, or `2>&1 | tee` with a stuck consumer, leaves
//! stderr a full pipe; a write to it blocks. Only the writer thread may block there.
//! Every other thread hands its formatted line to the queue and goes on: when the queue
//! is full, the line is dropped and counted (`electd_log_lines_dropped_total`), and
//! once the sink takes writes again the writer logs how many were dropped.
//!
//! The formatting, levels and filters stay env_logger's (`electd` gives env_logger a
//! [`QueueWriter`] as its target): one record is one `write` of one whole line.
//! [`flush`] waits, for a bounded time, until what was queued has been written: the
//! last lines before an exit ("stopping on error: ...", "stopped") are not lost when
//! the sink works.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The most lines waiting to be written; later ones are dropped.
pub const MAX_LINES: usize = 1024;
/// The most bytes waiting to be written; later lines are dropped.
pub const MAX_BYTES: usize = 256 * 1024;

/// The writer thread's name.
pub const THREAD_NAME: &str = "log-writer";

/// Lines dropped since the start because the queue was full.
static DROPPED_TOTAL: AtomicU64 = AtomicU64::new(0);
static SINK: OnceLock<Arc<Shared>> = OnceLock::new();

/// Lines dropped since the start because the log sink did not take them in time.
pub fn dropped_total() -> u64 {
    DROPPED_TOTAL.load(Ordering::Relaxed)
}

#[derive(Default)]
struct Queue {
    lines: VecDeque<Vec<u8>>,
    bytes: usize,
    /// Dropped since the last report line.
    unreported: u64,
    /// The writer holds lines it took from the queue and has not written yet.
    writing: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when a line is queued (the writer waits on it).
    queued: Condvar,
    /// Signalled when the writer has written everything it took (`flush` waits on it).
    written: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic while holding it cannot leave the queue inconsistent: keep going.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The writer env_logger formats into: each `write` queues one line, never blocking
/// on the sink.
pub struct QueueWriter {
    shared: Arc<Shared>,
}

thread_local! {
    /// True on the writer thread: its report of dropped lines is never dropped itself
    /// (the queue may have filled again while it waited on the sink).
    static IS_WRITER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Write for QueueWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut q = self.shared.lock();
        let full = q.lines.len() >= MAX_LINES || q.bytes + buf.len() > MAX_BYTES;
        if full && !IS_WRITER.with(std::cell::Cell::get) {
            q.unreported += 1;
            DROPPED_TOTAL.fetch_add(1, Ordering::Relaxed);
        } else {
            q.bytes += buf.len();
            q.lines.push_back(buf.to_vec());
            self.shared.queued.notify_one();
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Starts the writer thread that drains the queue into `out` (stderr in the daemon)
/// and returns the writer to give env_logger. Called once; later calls share the
/// first sink.
pub fn start(out: impl Write + Send + 'static) -> io::Result<QueueWriter> {
    if let Some(shared) = SINK.get() {
        return Ok(QueueWriter {
            shared: shared.clone(),
        });
    }
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue::default()),
        queued: Condvar::new(),
        written: Condvar::new(),
    });
    let s2 = shared.clone();
    std::thread::Builder::new()
        .name(THREAD_NAME.into())
        .spawn(move || drain(&s2, out))?;
    let shared = SINK.get_or_init(|| shared).clone();
    Ok(QueueWriter { shared })
}

/// The writer thread: takes every queued line, writes them (blocking as long as the
/// sink does), and once a write succeeded after drops, logs how many were dropped.
fn drain(shared: &Shared, mut out: impl Write) {
    IS_WRITER.with(|w| w.set(true));
    let mut batch: Vec<u8> = Vec::with_capacity(64 * 1024);
    loop {
        let lines = {
            let mut q = shared.lock();
            q.writing = false;
            shared.written.notify_all();
            while q.lines.is_empty() {
                q = shared.queued.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            q.writing = true;
            q.bytes = 0;
            std::mem::take(&mut q.lines)
        };
        batch.clear();
        for l in &lines {
            batch.extend_from_slice(l);
        }
        // An error (stderr closed) loses these lines as a full pipe would not: nothing
        // better can be done with them, and the loop must not spin on it.
        let ok = out.write_all(&batch).and_then(|()| out.flush()).is_ok();
        let unreported = std::mem::take(&mut shared.lock().unreported);
        if ok && unreported > 0 {
            // Through the logger itself: the line gets the format and journald
            // priority every other line gets, and takes its place in the queue.
            log::warn!(
                "{unreported} log lines dropped: the log sink (stderr) did not take them in time ({} since the start)",
                dropped_total()
            );
        } else if unreported > 0 {
            shared.lock().unreported += unreported;
        }
    }
}

/// Waits until every line queued so far has been written, at most `within`; returns
/// false when the sink did not take them in time (or no sink was started).
pub fn flush(within: Duration) -> bool {
    let Some(shared) = SINK.get() else {
        return true;
    };
    let deadline = Instant::now() + within;
    let mut q = shared.lock();
    while !q.lines.is_empty() || q.writing {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        q = shared
            .written
            .wait_timeout(q, left)
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A sink that takes nothing until the test opens it, then keeps what it got.
    struct Gated {
        open: mpsc::Receiver<()>,
        opened: bool,
        got: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Gated {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if !self.opened {
                let _ = self.open.recv();
                self.opened = true;
            }
            self.got.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stalled_sink_drops_and_counts_past_the_bound_and_flush_waits_boundedly() {
        let (open, gate) = mpsc::channel();
        let got = Arc::new(Mutex::new(Vec::new()));
        let mut w = start(Gated {
            open: gate,
            opened: false,
            got: got.clone(),
        })
        .unwrap();
        // The writer takes the first line and blocks in the sink with it.
        w.write_all(b"first\n").unwrap();
        let t0 = Instant::now();
        while !SINK.get().unwrap().lock().writing {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "writer never started"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // Every later write returns at once: MAX_LINES are queued, 10 are dropped.
        let t1 = Instant::now();
        for i in 0..MAX_LINES + 10 {
            w.write_all(format!("line {i}\n").as_bytes()).unwrap();
        }
        assert!(
            t1.elapsed() < Duration::from_secs(1),
            "a write waited on the sink"
        );
        assert_eq!(dropped_total(), 10);
        assert!(!flush(Duration::from_millis(50)), "the sink is stalled");
        open.send(()).unwrap();
        assert!(flush(Duration::from_secs(5)), "the sink took everything");
        let text = String::from_utf8(got.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 1 + MAX_LINES);
        assert!(text.starts_with("first\nline 0\n"));
        assert!(text.ends_with(&format!("line {}\n", MAX_LINES - 1)));
    }
}

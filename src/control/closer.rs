//! Descriptors received on the control socket that the daemon does not keep are closed
//! on a thread of their own, never on the event loop: the last close of a passed TCP
//! socket with SO_LINGER and unsent data blocks in close(2) for the linger time,
//! O_NONBLOCK or not, and a blocked loop misses heartbeats (S2's lease, L2's seat).
//!
//! Bounded, and it never blocks the loop: batches go to the closer thread through a
//! bounded channel; when it is full (the thread is stuck in a close), they wait in a
//! list the loop retries at each wakeup. While more than [`CLOSE_BACKLOG`] descriptors
//! wait to be closed the control socket reads no client (`Control::read_client`), so
//! the kernel keeps whatever else clients send: the list holds at most
//! `CLOSE_BACKLOG + SCM_MAX_FD + MAX_PARKED` descriptors (one more read's worth, and the
//! batches waiting for their lines), never the process's descriptor table. The stop
//! timers the daemon keeps are timerfds, checked before they are taken; their close
//! never blocks, so they are closed where they are dropped.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, OnceLock};

/// Descriptors waiting to be closed above which no control client is read.
pub const CLOSE_BACKLOG: usize = 64;
/// Batches the closer thread's channel holds.
const CHANNEL_BATCHES: usize = 16;

struct Closer {
    tx: SyncSender<Vec<OwnedFd>>,
    /// Batches the channel had no room for, oldest first.
    waiting: Mutex<Vec<Vec<OwnedFd>>>,
    /// True while `waiting` holds a batch (set and cleared under its lock): [`retry`],
    /// called at every wakeup, reads this flag rather than take the lock (issue 25,
    /// cost at rest: the lock's two atomic operations and their cold lines, every
    /// heartbeat, for a list that is nearly always empty).
    pending: AtomicBool,
    /// Descriptors handed over and not yet closed.
    backlog: Arc<AtomicUsize>,
}

static CLOSER: OnceLock<Option<Closer>> = OnceLock::new();

fn closer() -> Option<&'static Closer> {
    CLOSER
        .get_or_init(|| {
            let (tx, rx) = sync_channel::<Vec<OwnedFd>>(CHANNEL_BATCHES);
            let backlog = Arc::new(AtomicUsize::new(0));
            let count = backlog.clone();
            let spawned = std::thread::Builder::new()
                .name("electd-closer".into())
                .spawn(move || {
                    for batch in rx {
                        let n = batch.len();
                        drop(batch);
                        count.fetch_sub(n, Ordering::Relaxed);
                    }
                });
            match spawned {
                Ok(_) => Some(Closer {
                    tx,
                    waiting: Mutex::new(Vec::new()),
                    pending: AtomicBool::new(false),
                    backlog,
                }),
                Err(e) => {
                    log::error!("cannot start the descriptor closer thread: {e}");
                    None
                }
            }
        })
        .as_ref()
}

/// Starts the closer thread (else it starts with the first descriptors to close).
pub fn start() {
    let _ = closer();
}

/// Hands `fds` to the closer thread; never blocks, never closes here (but for the
/// last resort of a closer thread that could not be started).
pub fn close_later(fds: Vec<OwnedFd>) {
    if fds.is_empty() {
        return;
    }
    let Some(c) = closer() else {
        drop(fds);
        return;
    };
    c.backlog.fetch_add(fds.len(), Ordering::Relaxed);
    let mut waiting = c.waiting.lock().unwrap_or_else(|e| e.into_inner());
    waiting.push(fds);
    send_waiting(c, &mut waiting);
}

fn send_waiting(c: &Closer, waiting: &mut Vec<Vec<OwnedFd>>) {
    while !waiting.is_empty() {
        let batch = waiting.remove(0);
        match c.tx.try_send(batch) {
            Ok(()) => {}
            Err(TrySendError::Full(batch)) | Err(TrySendError::Disconnected(batch)) => {
                waiting.insert(0, batch);
                break;
            }
        }
    }
    c.pending.store(!waiting.is_empty(), Ordering::Relaxed);
}

/// Sends the batches waiting for room in the channel (at each wakeup).
pub fn retry() {
    if let Some(c) = CLOSER.get().and_then(Option::as_ref) {
        retry_on(c);
    }
}

fn retry_on(c: &Closer) {
    if c.pending.load(Ordering::Relaxed) {
        let mut waiting = c.waiting.lock().unwrap_or_else(|e| e.into_inner());
        send_waiting(c, &mut waiting);
    }
}

/// Descriptors handed over and not yet closed.
pub fn backlog() -> usize {
    CLOSER
        .get()
        .and_then(Option::as_ref)
        .map_or(0, |c| c.backlog.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, FromRawFd};

    #[test]
    fn closes_what_it_is_handed_off_the_calling_thread() {
        let mut p = [0i32; 2];
        // SAFETY: pipe2 writes two descriptors.
        assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: fresh descriptors, ours.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
        close_later(vec![w]);
        let mut b = [0u8; 1];
        // SAFETY: read(2) into a local byte; EOF once the closer closed the write end.
        let n = unsafe { libc::read(r.as_raw_fd(), b.as_mut_ptr().cast(), 1) };
        assert_eq!(n, 0);
        retry();
    }

    /// Batches the channel has no room for wait, and leave at the first retry after
    /// room is made: the flag that lets a retry skip the lock is set while any waits.
    #[test]
    fn batches_that_find_the_channel_full_wait_for_a_retry() {
        let (tx, rx) = sync_channel::<Vec<OwnedFd>>(1);
        let c = Closer {
            tx,
            waiting: Mutex::new(Vec::new()),
            pending: AtomicBool::new(false),
            backlog: Arc::new(AtomicUsize::new(0)),
        };
        let fd = || {
            // SAFETY: eventfd(2) with valid flags.
            let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
            assert!(raw >= 0, "eventfd: {}", std::io::Error::last_os_error());
            // SAFETY: a fresh descriptor, ours alone.
            unsafe { OwnedFd::from_raw_fd(raw) }
        };
        for _ in 0..3 {
            let mut w = c.waiting.lock().unwrap();
            w.push(vec![fd()]);
            send_waiting(&c, &mut w);
        }
        assert_eq!(
            c.waiting.lock().unwrap().len(),
            2,
            "one batch in the channel"
        );
        assert!(c.pending.load(Ordering::Relaxed));
        retry_on(&c);
        assert_eq!(c.waiting.lock().unwrap().len(), 2, "still no room");
        assert_eq!(rx.try_recv().map(|b| b.len()).ok(), Some(1));
        retry_on(&c);
        assert_eq!(c.waiting.lock().unwrap().len(), 1);
        assert!(c.pending.load(Ordering::Relaxed), "one still waits");
        assert!(rx.try_recv().is_ok());
        retry_on(&c);
        assert!(c.waiting.lock().unwrap().is_empty());
        assert!(
            !c.pending.load(Ordering::Relaxed),
            "none waits: retries skip the lock"
        );
        assert!(rx.try_recv().is_ok());
        assert!(rx.try_recv().is_err(), "three batches in all");
    }
}

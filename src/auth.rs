//! Authenticated datagrams (SPEC section 10): key files and replay protection.
//!
//! A key file holds a shared secret of at least 32 bytes (trailing white space is
//! ignored, so `openssl rand -hex 32 > key` works) and must not be readable by others.
//! `key-file-next` is accepted when receiving while `key-file` signs what is sent, so a
//! key is rotated without downtime. Every keyed datagram carries a counter whose high
//! 32 bits are the sender's boot number (on disk, raised at every start before anything
//! is sent) and whose low 32 bits count its datagrams; a receiver drops any counter not
//! above the last it accepted from that sender.

use crate::wire::Key;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The shortest secret accepted.
pub const MIN_KEY_BYTES: usize = 32;

/// The keys in use: one to sign and verify, one more to verify during a rotation.
#[derive(Clone, Debug)]
pub struct Keys {
    /// Signs every datagram sent; verifies received ones.
    pub current: Key,
    /// Also verifies received datagrams.
    pub next: Option<Key>,
}

impl Keys {
    /// The keys a received datagram may be tagged with.
    pub fn verifiers(&self) -> Vec<&Key> {
        std::iter::once(&self.current)
            .chain(self.next.as_ref())
            .collect()
    }
}

/// Reads one key file, refusing one that is short or readable by others.
pub fn load_key(path: &Path) -> Result<Key, String> {
    let name = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("key file {name}: {e}"))?;
    if meta.is_dir() {
        return Err(format!(
            "key file {name} is a directory: key-file names a file holding the secret"
        ));
    }
    if meta.permissions().mode() & 0o004 != 0 {
        return Err(format!(
            "key file {name} is readable by others; run: chmod o-rwx {name}"
        ));
    }
    if meta.len() > 4096 {
        return Err(format!("key file {name} is larger than 4096 bytes"));
    }
    // Opened without blocking and checked on the open file: a reload reads the key
    // files on the event loop, and a FIFO put in one's place would block `open()` until
    // a writer came (the loop stops heartbeating); a device would read without end.
    let read = || -> std::io::Result<Vec<u8>> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?;
        if !f.metadata()?.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        let mut bytes = Vec::new();
        f.take(4097).read_to_end(&mut bytes)?;
        if bytes.len() > 4096 {
            return Err(std::io::Error::other("larger than 4096 bytes"));
        }
        Ok(bytes)
    };
    let bytes = read().map_err(|e| {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            let me = crate::access::current();
            format!(
                "key file {name}: {e}; this process runs as user {} (uid {}): make the file readable by it, for example: chown root:GROUP {name} && chmod 0640 {name} with GROUP a group of that user",
                me.name, me.uid
            )
        } else {
            format!("key file {name}: {e}")
        }
    })?;
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    if end < MIN_KEY_BYTES {
        return Err(format!(
            "key file {name} holds {end} bytes; at least {MIN_KEY_BYTES} are needed"
        ));
    }
    Ok(Key::new(&bytes[..end]))
}

/// Loads `key-file` and `key-file-next`, if configured.
pub fn load_keys(current: Option<&Path>, next: Option<&Path>) -> Result<Option<Keys>, String> {
    match (current, next) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err("key-file-next needs key-file".into()),
        (Some(c), n) => Ok(Some(Keys {
            current: load_key(c)?,
            next: n.map(load_key).transpose()?,
        })),
    }
}

/// How many counters below the highest accepted one are still accepted once, so two
/// datagrams of one flush (a bundle split at 1,200 bytes, one per destination) that
/// the network reorders both count. As DTLS and IPsec do it.
pub const REPLAY_WINDOW: u64 = 64;

/// Per sender, the highest counter accepted and which of the `REPLAY_WINDOW` counters
/// below it were accepted: every counter is accepted at most once, and one older than
/// the window never (SPEC section 10).
#[derive(Clone, Debug)]
pub struct ReplayWindow {
    last: Vec<u64>,
    /// Bit i: counter `last - 1 - i` was accepted (or is below a floor).
    seen: Vec<u64>,
}

impl Default for ReplayWindow {
    fn default() -> ReplayWindow {
        ReplayWindow {
            last: vec![0; 256],
            seen: vec![u64::MAX; 256],
        }
    }
}

impl ReplayWindow {
    /// Accepts `counter` from `sender` once: above the highest accepted, or within
    /// the window below it and not accepted before.
    pub fn accept(&mut self, sender: u16, counter: u64) -> bool {
        let i = usize::from(sender);
        let (Some(last), Some(seen)) = (self.last.get_mut(i), self.seen.get_mut(i)) else {
            return false;
        };
        if counter > *last {
            let shift = counter - *last;
            *seen = match shift {
                1..=63 => (*seen << shift) | (1 << (shift - 1)),
                64 => 1 << 63,
                _ => 0,
            };
            *last = counter;
            return true;
        }
        let d = *last - counter;
        if d == 0 || d > REPLAY_WINDOW {
            return false;
        }
        let bit = 1u64 << (d - 1);
        if *seen & bit != 0 {
            return false;
        }
        *seen |= bit;
        true
    }

    /// Refuses anything from boots of `sender` before `boot` (known from the state file).
    pub fn floor(&mut self, sender: u16, boot: u32) {
        let i = usize::from(sender);
        let floor = (u64::from(boot) << 32).saturating_sub(1);
        if let (Some(last), Some(seen)) = (self.last.get_mut(i), self.seen.get_mut(i)) {
            if floor > *last {
                *last = floor;
                // Nothing at or below the floor: the whole window counts as seen.
                *seen = u64::MAX;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_window_accepts_only_newer_counters() {
        let mut w = ReplayWindow::default();
        assert!(w.accept(3, 5 << 32 | 1));
        assert!(!w.accept(3, 5 << 32 | 1), "the same counter twice");
        assert!(w.accept(3, 5 << 32 | 9));
        assert!(
            w.accept(3, 5 << 32 | 2),
            "reordered within the window: once"
        );
        assert!(!w.accept(3, 5 << 32 | 2), "and only once");
        assert!(!w.accept(3, 5 << 32 | 1), "accepted before");
        assert!(!w.accept(3, 5 << 32 | 9), "the highest, again");
        assert!(w.accept(3, 5 << 32 | 100));
        assert!(w.accept(3, 5 << 32 | 36), "64 below the highest");
        assert!(!w.accept(3, 5 << 32 | 35), "65 below: outside the window");
        assert!(w.accept(3, 5 << 32 | 164), "a jump of exactly 64");
        assert!(!w.accept(3, 5 << 32 | 100), "the old highest, now bit 63");
        assert!(w.accept(3, 5 << 32 | 101));
        assert!(w.accept(3, 6 << 32 | 1), "a new boot");
        assert!(!w.accept(3, 5 << 32 | 164), "the last boot, far behind");
        assert!(w.accept(4, 1), "senders are independent");
        w.floor(7, 9);
        assert!(!w.accept(7, 8 << 32 | 100), "a boot before the floor");
        assert!(!w.accept(7, (9 << 32) - 2), "just below the floor");
        assert!(w.accept(7, 9 << 32));
        // Every counter at most once, whatever the order (a bounded exhaustive check).
        let mut w = ReplayWindow::default();
        let mut rng = crate::rng::SplitMix64::new(7);
        let mut accepted = std::collections::BTreeSet::new();
        for _ in 0..20_000 {
            let c = 1 + rng.below(3_000);
            if w.accept(1, c) {
                assert!(accepted.insert(c), "counter {c} accepted twice");
            }
        }
    }

    #[test]
    fn key_files_are_checked() {
        let dir = std::env::temp_dir().join(format!("electd-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("k");
        let set = |body: &[u8], mode: u32| {
            std::fs::write(&p, body).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        set(&[b'a'; 64], 0o640);
        assert!(load_key(&p).is_ok());
        set(&[b'a'; 64], 0o644);
        assert!(load_key(&p).unwrap_err().contains("readable by others"));
        set(b"short\n", 0o600);
        assert!(load_key(&p).unwrap_err().contains("at least 32"));
        // A FIFO in the key file's place is refused at once, not waited on (a reload
        // reads key files on the event loop).
        let fifo = dir.join("fifo");
        let _ = std::fs::remove_file(&fifo);
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path in this test's directory.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = load_key(&fifo).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        set(&[b'a'; 32], 0o600);
        assert!(load_keys(None, Some(&p)).is_err());
        assert!(
            load_keys(Some(&p), Some(&p))
                .unwrap()
                .unwrap()
                .next
                .is_some()
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}

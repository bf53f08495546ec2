//! The state file (SPEC section 4): term, voted_term, voted_for, the highest term led
//! and the hold promise.
//!
//! Text, so an operator can read it, with a CRC-32 line so a torn or edited file is
//! detected. Written atomically: a temporary file in the same directory, fsync, rename
//! over the old one, fsync of the directory. A missing file is a first start; an
//! unreadable or corrupt one is an error that stops the daemon, never a silent reset.
//!
//! While a daemon runs, it holds an exclusive `flock` on `<state>.lock` (the state file
//! itself is replaced by rename, so it cannot carry the lock); the lock file holds the
//! holder's pid, so a second daemon refuses to start naming the file and the holder.

use crate::node::Durable;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Why the state file could not be used.
#[derive(Debug)]
pub enum StoreError {
    /// The file exists but cannot be read or written.
    Io(PathBuf, io::Error),
    /// The file's content is not a valid state.
    Corrupt(PathBuf, String),
    /// Another daemon holds the state file's lock (the holder is named).
    Locked(PathBuf, String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Io(p, e) => write!(f, "state file {}: {e}", p.display()),
            StoreError::Corrupt(p, why) => write!(
                f,
                "state file {} is corrupt ({why}); refusing to start, since a reset could make this server vote twice in a term. Inspect it, and delete it only if this server's votes are known to be irrelevant",
                p.display()
            ),
            StoreError::Locked(p, holder) => write!(
                f,
                "state file {} is in use by another electd ({holder}); two daemons on one state file could vote twice in a term",
                p.display()
            ),
        }
    }
}

impl std::error::Error for StoreError {}

/// The state file of one server.
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    /// The open lock file while this process holds the lock.
    lock: Option<File>,
}

/// What the daemon keeps beside the core's state: its boot number (the high half of
/// every keyed datagram's counter) and, per peer, the newest boot it has seen (so
/// datagrams of a peer's earlier boots are refused even after this server restarts).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extra {
    /// This server's boot number, raised at every start before anything is sent.
    pub boot: u32,
    /// Per peer id, the newest boot number seen in an authenticated datagram.
    pub peer_boots: std::collections::BTreeMap<u16, u32>,
}

fn body(d: &Durable, x: &Extra) -> String {
    let peers: Vec<String> = x
        .peer_boots
        .iter()
        .map(|(id, b)| format!(" {id}:{b}"))
        .collect();
    format!(
        "electd-state 3\nterm {}\nvoted_term {}\nvoted_for {}\nled_term {}\nhold_ms {}\ndrained {}\nboot {}\npeer_boots{}\n",
        d.term,
        d.voted_term,
        d.voted_for,
        d.led_term,
        d.hold_ms,
        u8::from(d.drained),
        x.boot,
        peers.concat()
    )
}

fn parse(text: &str) -> Result<(Durable, Extra), String> {
    let (content, crc_line) = match text.rfind("crc ") {
        Some(i) => text.split_at(i),
        None => return Err("no crc line".into()),
    };
    let crc = u32::from_str_radix(crc_line.trim_start_matches("crc ").trim_end(), 16)
        .map_err(|_| "bad crc line")?;
    if crc32fast::hash(content.as_bytes()) != crc {
        return Err("checksum mismatch".into());
    }
    let mut lines = content.lines();
    let version = match lines.next() {
        Some("electd-state 1") => 1,
        Some("electd-state 2") => 2,
        Some("electd-state 3") => 3,
        _ => return Err("unknown header".into()),
    };
    let mut field = |name: &str| -> Result<u64, String> {
        let line = lines.next().ok_or(format!("missing {name}"))?;
        let v = line
            .strip_prefix(name)
            .and_then(|r| r.strip_prefix(' '))
            .ok_or(format!("expected {name}"))?;
        v.parse().map_err(|_| format!("bad {name}"))
    };
    let term = field("term")?;
    let voted_term = field("voted_term")?;
    let voted_for = u16::try_from(field("voted_for")?).map_err(|_| "bad voted_for")?;
    let d = if version == 1 {
        // Version 1 did not record the terms led: assume every term up to the current
        // one was, so an upgraded server never leads one of them again.
        Durable {
            term,
            voted_term,
            voted_for,
            led_term: term,
            hold_ms: u32::try_from(field("max_hold_ms")?).map_err(|_| "bad max_hold_ms")?,
            drained: false,
        }
    } else {
        Durable {
            term,
            voted_term,
            voted_for,
            led_term: field("led_term")?,
            hold_ms: u32::try_from(field("hold_ms")?).map_err(|_| "bad hold_ms")?,
            // Version 2 had no drain.
            drained: version >= 3
                && match field("drained")? {
                    0 => false,
                    1 => true,
                    _ => return Err("bad drained".into()),
                },
        }
    };
    if d.voted_term > d.term {
        return Err("voted_term above term".into());
    }
    if d.term >= crate::node::MAX_TERM || d.led_term >= crate::node::MAX_TERM {
        return Err("term at or above the limit 2^62".into());
    }
    let mut x = Extra::default();
    for line in lines {
        if let Some(v) = line.strip_prefix("boot ") {
            x.boot = v.parse().map_err(|_| "bad boot")?;
        } else if let Some(v) = line.strip_prefix("peer_boots") {
            for pair in v.split_whitespace() {
                let (id, b) = pair.split_once(':').ok_or("bad peer_boots")?;
                x.peer_boots.insert(
                    id.parse().map_err(|_| "bad peer id")?,
                    b.parse().map_err(|_| "bad peer boot")?,
                );
            }
        } else {
            return Err(format!("unexpected line '{line}'"));
        }
    }
    Ok((d, x))
}

impl Store {
    /// A store at `path` (nothing is touched yet).
    pub fn new(path: &Path) -> Store {
        Store {
            path: path.to_path_buf(),
            lock: None,
        }
    }

    /// The lock file beside the state file.
    pub fn lock_path(&self) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(".lock");
        self.path.with_file_name(name)
    }

    /// Takes the exclusive lock that says a daemon runs on this state file, held until
    /// the store is dropped (or the process dies). Two daemons on one state file could
    /// each vote once in a term, which is two votes: the second refuses to start.
    pub fn lock(&mut self) -> Result<(), StoreError> {
        use std::io::{Read, Seek};
        use std::os::fd::AsRawFd;
        let lock_path = self.lock_path();
        let io = |e| StoreError::Io(lock_path.clone(), e);
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(io)?;
        // SAFETY: flock on a descriptor we own; LOCK_NB never blocks.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut holder = String::new();
                let _ = f.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(StoreError::Locked(
                    self.path.clone(),
                    if holder.is_empty() {
                        "another process".into()
                    } else {
                        format!("pid {holder}")
                    },
                ));
            }
            return Err(StoreError::Io(lock_path, e));
        }
        f.set_len(0).map_err(io)?;
        f.rewind().map_err(io)?;
        f.write_all(format!("{}\n", std::process::id()).as_bytes())
            .map_err(io)?;
        self.lock = Some(f);
        Ok(())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the state; a missing file is a first start (all zero).
    pub fn load(&self) -> Result<(Durable, Extra), StoreError> {
        let text = match fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Default::default()),
            Err(e) => return Err(StoreError::Io(self.path.clone(), e)),
        };
        let text = String::from_utf8(text)
            .map_err(|_| StoreError::Corrupt(self.path.clone(), "not text".into()))?;
        parse(&text).map_err(|why| StoreError::Corrupt(self.path.clone(), why))
    }

    /// Writes the state durably: temporary file, fsync, rename, fsync of the directory.
    pub fn save(&self, d: &Durable, x: &Extra) -> Result<(), StoreError> {
        let io = |e| StoreError::Io(self.path.clone(), e);
        let dir = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let mut tmp_name = self.path.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(".tmp");
        let tmp = dir.join(tmp_name);
        let content = body(d, x);
        let text = format!("{content}crc {:08x}\n", crc32fast::hash(content.as_bytes()));
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(io)?;
        f.write_all(text.as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        drop(f);
        fs::rename(&tmp, &self.path).map_err(io)?;
        File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("electd-store-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn round_trip_and_first_start() {
        let dir = tmpdir("rt");
        let s = Store::new(&dir.join("1.state"));
        assert_eq!(
            s.load().unwrap(),
            Default::default(),
            "missing file is a first start"
        );
        let d = Durable {
            term: 9,
            voted_term: 8,
            voted_for: 3,
            led_term: 7,
            hold_ms: 3000,
            drained: true,
        };
        let mut x = Extra {
            boot: 4,
            ..Extra::default()
        };
        x.peer_boots.insert(2, 7);
        x.peer_boots.insert(3, 1);
        s.save(&d, &x).unwrap();
        assert_eq!(s.load().unwrap(), (d, x.clone()));
        s.save(&Durable { term: 10, ..d }, &Extra::default())
            .unwrap();
        assert_eq!(s.load().unwrap().0.term, 10);
        // A file written before boot numbers existed still loads.
        let old = "electd-state 1\nterm 3\nvoted_term 3\nvoted_for 1\nmax_hold_ms 300\n";
        fs::write(
            s.path(),
            format!("{old}crc {:08x}\n", crc32fast::hash(old.as_bytes())),
        )
        .unwrap();
        let (d1, _) = s.load().unwrap();
        assert_eq!(
            (d1.term, d1.led_term, d1.hold_ms),
            (3, 3, 300),
            "a version 1 file: every term so far counts as led"
        );
        // A version 2 file loads undrained.
        let v2 = "electd-state 2\nterm 4\nvoted_term 4\nvoted_for 2\nled_term 3\nhold_ms 300\nboot 2\npeer_boots\n";
        fs::write(
            s.path(),
            format!("{v2}crc {:08x}\n", crc32fast::hash(v2.as_bytes())),
        )
        .unwrap();
        let (d2, x2) = s.load().unwrap();
        assert_eq!(
            (d2.term, d2.led_term, d2.drained, x2.boot),
            (4, 3, false, 2)
        );
        assert!(!dir.join("1.state.tmp").exists());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_second_lock_is_refused_naming_the_file_and_holder() {
        let dir = tmpdir("lock");
        let p = dir.join("3.state");
        let mut a = Store::new(&p);
        a.lock().unwrap();
        let mut b = Store::new(&p);
        let e = b.lock().unwrap_err().to_string();
        assert!(
            e.contains(&p.display().to_string())
                && e.contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
        drop(a);
        b.lock().expect("free again once the holder is gone");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn corruption_is_an_error_naming_the_file() {
        let dir = tmpdir("bad");
        let p = dir.join("2.state");
        let s = Store::new(&p);
        s.save(
            &Durable {
                term: 5,
                voted_term: 5,
                voted_for: 1,
                led_term: 5,
                hold_ms: 1,
                drained: false,
            },
            &Extra::default(),
        )
        .unwrap();
        let good = fs::read_to_string(&p).unwrap();
        for bad in [
            good.replace("term 5", "term 6"),
            good.replace("drained 0", "drained 2"),
            good[..good.len() - 5].to_string(),
            String::new(),
            "\u{0}\u{1}".into(),
        ] {
            fs::write(&p, &bad).unwrap();
            let e = s.load().unwrap_err().to_string();
            assert!(
                e.contains(&p.display().to_string()) && e.contains("corrupt"),
                "{e}"
            );
        }
        fs::remove_dir_all(dir).unwrap();
    }
}

//! The state file (SPEC sections 4 and 15): per election group, term, voted_term,
//! voted_for, the highest term led, the hold promise and the drain; the daemon's boot
//! number and its peers' newest boots. One file for every group.
//!
//! Text, so an operator can read it, with a CRC-32 line so a torn or edited file is
//! detected. Since version 5 it names its owner (`id` and `cluster` lines): a file of
//! another server or cluster (a cloned disk, a backup restored on the wrong host, a
//! `state` path without `{id}`) is refused, since its votes are not this server's. Written atomically: a temporary file in the same directory, fsync, rename
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
use std::sync::mpsc;

/// Why the state file could not be used.
#[derive(Debug)]
pub enum StoreError {
    /// The file exists but cannot be read or written.
    Io(PathBuf, io::Error),
    /// The file's content is not a valid state.
    Corrupt(PathBuf, String),
    /// Another daemon holds the state file's lock (the holder is named).
    Locked(PathBuf, String),
    /// The file belongs to another server or another cluster: the file's owner, then
    /// this server. Taking its votes as this server's could vote twice in a term (S4).
    Foreign {
        /// The state file.
        path: PathBuf,
        /// Whose file it is, as it says.
        file: Identity,
        /// This server.
        this: Identity,
    },
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
            StoreError::Foreign { path, file, this } if file.id != this.id => write!(
                f,
                "state file {} belongs to {file}, this is {this}: on another server's file this server would take that server's votes as its own and could vote twice in a term; restore this server's own state file, or give every server a file of its own (a `state` path with {{id}}); no option overrides this",
                path.display()
            ),
            StoreError::Foreign { path, file, this } => write!(
                f,
                "state file {} belongs to {file}, this is {this}: a file of another cluster holds votes cast there, not here; restore this server's own state file, or, if this cluster was renamed from '{}', start once with --state-cluster {} to keep its votes under the new name (do not delete the file: a server without its votes could vote twice in a term)",
                path.display(),
                file.cluster,
                file.cluster
            ),
        }
    }
}

impl std::error::Error for StoreError {}

/// Whose state a file holds (version 5 on): a server's id and its cluster's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The server's id (1..=255).
    pub id: u16,
    /// The cluster's name (`cluster` in the configuration: one word).
    pub cluster: String,
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "server {} of cluster '{}'", self.id, self.cluster)
    }
}

/// What [`Store::load_as`] found on disk, besides the state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// No file: a first start.
    Nothing,
    /// A file of version 1 to 4, which names no owner: taken as this server's, and
    /// rewritten as version 5 at the next write.
    Unnamed(u8),
    /// This server's own file.
    Own,
    /// This server's file under the cluster's former name (`--state-cluster`): taken
    /// over, and written under the new name at the next write.
    Renamed(String),
}

/// A state file's content and what it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loaded {
    /// Every group's durable state.
    pub groups: GroupStates,
    /// The boot numbers.
    pub extra: Extra,
    /// Whose the file was, and its version if it named nobody.
    pub found: Found,
}

/// The state file of one server.
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    /// This server: written in every version-5 file, and checked against what a file
    /// says at load.
    this: Identity,
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

/// The most groups a state file holds (configured ones and ones kept after they were
/// removed from the configuration), so a file cannot grow without bound.
pub const MAX_STATE_GROUPS: usize = 1024;

/// Every election group's durable state, by group name (SPEC section 15: one file).
/// Groups no longer configured are kept: a group removed and added back must not vote
/// twice in a term it voted in before.
pub type GroupStates = std::collections::BTreeMap<String, Durable>;

fn durable_lines(d: &Durable) -> String {
    format!(
        "term {}\nvoted_term {}\nvoted_for {}\nled_term {}\nhold_ms {}\ndrained {}\n",
        d.term,
        d.voted_term,
        d.voted_for,
        d.led_term,
        d.hold_ms,
        u8::from(d.drained),
    )
}

fn body(this: &Identity, groups: &GroupStates, x: &Extra) -> String {
    let peers: Vec<String> = x
        .peer_boots
        .iter()
        .map(|(id, b)| format!(" {id}:{b}"))
        .collect();
    let mut out = format!("electd-state 5\nid {}\ncluster {}\n", this.id, this.cluster);
    for (name, d) in groups {
        out.push_str(&format!("group {name}\n{}", durable_lines(d)));
    }
    out.push_str(&format!("boot {}\npeer_boots{}\n", x.boot, peers.concat()));
    out
}

/// Reads the fields of one durable state, in order, from `lines`. `version` 1 had no
/// led_term (every term so far counts as led) and called the hold `max_hold_ms`;
/// version 2 had no drain.
fn parse_durable<'a>(
    lines: &mut impl Iterator<Item = &'a str>,
    version: u8,
) -> Result<Durable, String> {
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
    // A server id (0: nobody); anything above 255 names no server and would index past
    // the core's id table.
    let voted_for = u16::try_from(field("voted_for")?)
        .ok()
        .filter(|&v| v <= 255)
        .ok_or("bad voted_for")?;
    let d = if version == 1 {
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
    Ok(d)
}

/// A state file's content, as it says.
struct Parsed {
    version: u8,
    /// Whose file it is: None before version 5.
    owner: Option<Identity>,
    groups: GroupStates,
    extra: Extra,
}

/// Reads the `id` and `cluster` lines of a version-5 file, right after its header, in
/// this order; each once, each well formed.
fn parse_owner<'a>(lines: &mut impl Iterator<Item = &'a str>) -> Result<Identity, String> {
    let id_line = lines.next().ok_or("missing id line")?;
    let id = id_line
        .strip_prefix("id ")
        .ok_or_else(|| format!("missing id line (found '{id_line}')"))?;
    // Canonical decimal only ("id 03" or "id +3" was not written by electd).
    let id = id
        .parse::<u16>()
        .ok()
        .filter(|i| (1..=255).contains(i) && i.to_string() == id)
        .ok_or_else(|| format!("bad id line '{id_line}'"))?;
    let cluster_line = lines.next().ok_or("missing cluster line")?;
    if cluster_line.starts_with("id ") {
        return Err(format!("id line given twice ('{cluster_line}')"));
    }
    let cluster = cluster_line
        .strip_prefix("cluster ")
        .ok_or_else(|| format!("missing cluster line (found '{cluster_line}')"))?;
    // A configuration's cluster name is one word (SPEC 9).
    if cluster.is_empty() || cluster.chars().any(char::is_whitespace) {
        return Err(format!("bad cluster line '{cluster_line}'"));
    }
    Ok(Identity {
        id,
        cluster: cluster.to_string(),
    })
}

fn parse(text: &str) -> Result<Parsed, String> {
    let (content, crc_line) = match text.rfind("crc ") {
        Some(i) => text.split_at(i),
        None => return Err("no crc line".into()),
    };
    let crc = u32::from_str_radix(crc_line.trim_start_matches("crc ").trim_end(), 16)
        .map_err(|_| "bad crc line")?;
    if crc32fast::hash(content.as_bytes()) != crc {
        return Err("checksum mismatch".into());
    }
    let mut lines = content.lines().peekable();
    let version = match lines.next() {
        Some("electd-state 1") => 1,
        Some("electd-state 2") => 2,
        Some("electd-state 3") => 3,
        Some("electd-state 4") => 4,
        Some("electd-state 5") => 5,
        _ => return Err("unknown header".into()),
    };
    let owner = if version >= 5 {
        Some(parse_owner(&mut lines)?)
    } else {
        None
    };
    let mut groups = GroupStates::new();
    if version < 4 {
        // Before election groups: the one state is the `default` group's.
        let d = parse_durable(&mut lines, version)?;
        groups.insert(crate::config::DEFAULT_GROUP.to_string(), d);
    }
    while let Some(name) = lines.peek().and_then(|l| l.strip_prefix("group ")) {
        let name = name.to_string();
        lines.next();
        if !crate::control::valid_group_name(&name) {
            return Err(format!("bad group name '{name}'"));
        }
        let d = parse_durable(&mut lines, version).map_err(|e| format!("group {name}: {e}"))?;
        if groups.insert(name.clone(), d).is_some() {
            return Err(format!("group {name} given twice"));
        }
        if groups.len() > MAX_STATE_GROUPS {
            return Err(format!("more than {MAX_STATE_GROUPS} groups"));
        }
    }
    let mut x = Extra::default();
    // Each once: a second line would silently replace the first (a boot number that
    // goes back reuses datagram counters). Every version since 2 writes both.
    let (mut boot_seen, mut peers_seen) = (false, false);
    for line in lines {
        if let Some(v) = line.strip_prefix("boot ") {
            if std::mem::replace(&mut boot_seen, true) {
                return Err(format!("boot line given twice ('{line}')"));
            }
            x.boot = v.parse().map_err(|_| "bad boot")?;
        } else if let Some(v) = line
            .strip_prefix("peer_boots")
            .filter(|v| v.is_empty() || v.starts_with(' '))
        {
            if std::mem::replace(&mut peers_seen, true) {
                return Err(format!("peer_boots line given twice ('{line}')"));
            }
            for pair in v.split_whitespace() {
                let (id, b) = pair.split_once(':').ok_or("bad peer_boots")?;
                let id: u16 = id.parse().map_err(|_| "bad peer id")?;
                let b = b.parse().map_err(|_| "bad peer boot")?;
                if x.peer_boots.insert(id, b).is_some() {
                    return Err(format!("peer {id} given twice in peer_boots"));
                }
            }
        } else if version >= 5 && (line.starts_with("id ") || line.starts_with("cluster ")) {
            // Once only, right after the header.
            return Err(format!(
                "id or cluster line out of place (given twice?): '{line}'"
            ));
        } else {
            return Err(format!("unexpected line '{line}'"));
        }
    }
    if version >= 2 && !boot_seen {
        return Err("missing boot line".into());
    }
    if version >= 2 && !peers_seen {
        return Err("missing peer_boots line".into());
    }
    Ok(Parsed {
        version,
        owner,
        groups,
        extra: x,
    })
}

impl Store {
    /// The store at `path` of server `this` (nothing is touched yet).
    pub fn new(path: &Path, this: Identity) -> Store {
        Store {
            path: path.to_path_buf(),
            this,
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

    /// Reads every group's state; a missing file is a first start (no group has any).
    /// A file of another server or cluster is refused ([`StoreError::Foreign`]).
    pub fn load(&self) -> Result<(GroupStates, Extra), StoreError> {
        self.load_as(None).map(|l| (l.groups, l.extra))
    }

    /// [`Store::load`], and what was found. With `renamed_from`, a file of this server
    /// under that former cluster name is taken too (`--state-cluster`: a deliberate
    /// rename must not make the operator delete the file and its votes). No option
    /// takes a file of another server id.
    pub fn load_as(&self, renamed_from: Option<&str>) -> Result<Loaded, StoreError> {
        let text = match read_regular(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Loaded {
                    groups: GroupStates::new(),
                    extra: Extra::default(),
                    found: Found::Nothing,
                });
            }
            Err(e) => return Err(StoreError::Io(self.path.clone(), e)),
        };
        let text = String::from_utf8(text)
            .map_err(|_| StoreError::Corrupt(self.path.clone(), "not text".into()))?;
        let p = parse(&text).map_err(|why| StoreError::Corrupt(self.path.clone(), why))?;
        let found = match p.owner {
            None => Found::Unnamed(p.version),
            Some(o) if o == self.this => Found::Own,
            Some(o) if o.id == self.this.id && Some(o.cluster.as_str()) == renamed_from => {
                Found::Renamed(o.cluster)
            }
            Some(o) => {
                return Err(StoreError::Foreign {
                    path: self.path.clone(),
                    file: o,
                    this: self.this.clone(),
                });
            }
        };
        Ok(Loaded {
            groups: p.groups,
            extra: p.extra,
            found,
        })
    }

    /// Writes every group's state durably: temporary file, fsync, rename, fsync of the
    /// directory. Never while a [`Writer`] on the same file has a write in flight.
    pub fn save(&self, groups: &GroupStates, x: &Extra) -> Result<(), StoreError> {
        write_file(&self.path, &self.this, groups, x)
    }

    /// Starts the writer thread of this file; `wake` is called after each write (the
    /// daemon's `mio::Waker`).
    pub fn writer(&self, wake: Box<dyn Fn() + Send>) -> io::Result<Writer> {
        Writer::start(self.path.clone(), self.this.clone(), wake)
    }
}

/// The state file's writer thread (SPEC sections 4 and 12): the event loop hands it a
/// snapshot and goes on; the thread writes it (temporary file, fsync, rename, fsync of
/// the directory), reports the result and wakes the loop, which only then confirms the
/// write to the cores that asked. One write at a time: the caller submits the next
/// only after it has taken the result of the last.
pub struct Writer {
    jobs: mpsc::SyncSender<(GroupStates, Extra)>,
    results: mpsc::Receiver<Result<(), StoreError>>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Writer")
    }
}

impl Writer {
    fn start(path: PathBuf, this: Identity, wake: Box<dyn Fn() + Send>) -> io::Result<Writer> {
        let (jobs, job_rx) = mpsc::sync_channel::<(GroupStates, Extra)>(1);
        let (result_tx, results) = mpsc::channel();
        std::thread::Builder::new()
            .name("state-writer".into())
            .spawn(move || {
                while let Ok((groups, x)) = job_rx.recv() {
                    if result_tx
                        .send(write_file(&path, &this, &groups, &x))
                        .is_err()
                    {
                        break;
                    }
                    wake();
                }
            })?;
        Ok(Writer { jobs, results })
    }

    /// Hands a snapshot to the thread; never blocks (one write in flight at most).
    pub fn submit(&self, groups: GroupStates, x: Extra) -> Result<(), String> {
        self.jobs.try_send((groups, x)).map_err(|e| match e {
            mpsc::TrySendError::Full(_) => {
                "a state write was submitted while another was in flight".to_string()
            }
            mpsc::TrySendError::Disconnected(_) => {
                "the state writer thread has stopped".to_string()
            }
        })
    }

    /// The result of the write in flight, if it has finished; never blocks.
    pub fn try_result(&self) -> Option<Result<(), String>> {
        match self.results.try_recv() {
            Ok(r) => Some(r.map_err(|e| e.to_string())),
            Err(mpsc::TryRecvError::Empty) => None,
            Err(mpsc::TryRecvError::Disconnected) => {
                Some(Err("the state writer thread has stopped".into()))
            }
        }
    }

    /// Waits for the result of the write in flight (rare paths only: `drain`, a new
    /// boot number).
    pub fn wait_result(&self) -> Result<(), String> {
        match self.results.recv() {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err("the state writer thread has stopped".into()),
        }
    }
}

/// The content of the regular file at `path`. Opened without blocking and checked
/// before any read: a FIFO in its place would block the start until a writer came.
fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let t = f.metadata()?.file_type();
    if !t.is_file() {
        let what = if t.is_fifo() {
            "a FIFO"
        } else if t.is_dir() {
            "a directory"
        } else if t.is_socket() {
            "a socket"
        } else {
            "a device"
        };
        return Err(io::Error::other(format!("not a regular file ({what})")));
    }
    let mut b = Vec::new();
    f.read_to_end(&mut b)?;
    Ok(b)
}

/// Writes every group's state to `path` durably, as server `this`'s: temporary file,
/// fsync, rename, fsync of the directory.
fn write_file(
    path: &Path,
    this: &Identity,
    groups: &GroupStates,
    x: &Extra,
) -> Result<(), StoreError> {
    let io = |e| StoreError::Io(path.to_path_buf(), e);
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = dir.join(tmp_name);
    let content = body(this, groups, x);
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
    fs::rename(&tmp, path).map_err(io)?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
    Ok(())
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

    /// The server the tests' stores belong to.
    fn me() -> Identity {
        Identity {
            id: 1,
            cluster: "orders-eu".into(),
        }
    }

    fn one(d: Durable) -> GroupStates {
        GroupStates::from([(crate::config::DEFAULT_GROUP.to_string(), d)])
    }

    fn write_signed(p: &Path, content: &str) {
        fs::write(
            p,
            format!("{content}crc {:08x}\n", crc32fast::hash(content.as_bytes())),
        )
        .unwrap();
    }

    #[test]
    fn round_trip_and_first_start() {
        let dir = tmpdir("rt");
        let s = Store::new(&dir.join("1.state"), me());
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
        s.save(&one(d), &x).unwrap();
        assert_eq!(s.load().unwrap(), (one(d), x.clone()));
        s.save(&one(Durable { term: 10, ..d }), &Extra::default())
            .unwrap();
        assert_eq!(s.load().unwrap().0["default"].term, 10);
        // A file written before boot numbers existed still loads, as the default group.
        write_signed(
            s.path(),
            "electd-state 1\nterm 3\nvoted_term 3\nvoted_for 1\nmax_hold_ms 300\n",
        );
        let (g1, _) = s.load().unwrap();
        let d1 = g1["default"];
        assert_eq!(
            (d1.term, d1.led_term, d1.hold_ms),
            (3, 3, 300),
            "a version 1 file: every term so far counts as led"
        );
        // A version 2 file loads undrained.
        write_signed(
            s.path(),
            "electd-state 2\nterm 4\nvoted_term 4\nvoted_for 2\nled_term 3\nhold_ms 300\nboot 2\npeer_boots\n",
        );
        let (g2, x2) = s.load().unwrap();
        let d2 = g2["default"];
        assert_eq!(
            (d2.term, d2.led_term, d2.drained, x2.boot),
            (4, 3, false, 2)
        );
        // A version 3 file (the last before groups) loads as the default group, drain kept.
        write_signed(
            s.path(),
            "electd-state 3\nterm 5\nvoted_term 5\nvoted_for 2\nled_term 4\nhold_ms 300\ndrained 1\nboot 3\npeer_boots 2:1\n",
        );
        let (g3, x3) = s.load().unwrap();
        assert_eq!(g3.len(), 1);
        assert_eq!((g3["default"].term, g3["default"].drained), (5, true));
        assert_eq!(x3.peer_boots.get(&2), Some(&1));
        assert!(!dir.join("1.state.tmp").exists());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn every_group_round_trips_in_one_file() {
        let dir = tmpdir("groups");
        let s = Store::new(&dir.join("1.state"), me());
        let mut g = GroupStates::new();
        for (i, name) in ["orders", "payments", "audit-2", "old_gone"]
            .iter()
            .enumerate()
        {
            let t = i as u64 + 1;
            g.insert(
                name.to_string(),
                Durable {
                    term: t * 10,
                    voted_term: t * 10,
                    voted_for: t as u16,
                    led_term: t,
                    hold_ms: 300 * t as u32,
                    drained: i % 2 == 0,
                },
            );
        }
        let x = Extra {
            boot: 9,
            ..Extra::default()
        };
        s.save(&g, &x).unwrap();
        assert_eq!(s.load().unwrap(), (g.clone(), x));
        let text = fs::read_to_string(s.path()).unwrap();
        assert!(
            text.starts_with("electd-state 5\nid 1\ncluster orders-eu\ngroup audit-2\nterm 30\n"),
            "{text}"
        );
        // A group twice, a bad name, a missing field: corrupt, never a silent reset.
        let body = text.rsplit_once("crc ").unwrap().0;
        for bad in [
            body.replace("group payments", "group orders"),
            body.replace("group payments", "group Payments"),
            body.replace("led_term 2\n", ""),
            body.replace("voted_for 2\n", "voted_for 256\n"),
        ] {
            write_signed(s.path(), &bad);
            let e = s.load().unwrap_err().to_string();
            assert!(e.contains("corrupt"), "{e}");
        }
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_writer_thread_writes_reports_and_wakes() {
        let dir = tmpdir("writer");
        let s = Store::new(&dir.join("1.state"), me());
        let woken = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let w2 = woken.clone();
        let w = s
            .writer(Box::new(move || {
                w2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }))
            .unwrap();
        let d = Durable {
            term: 4,
            voted_term: 4,
            voted_for: 2,
            led_term: 3,
            hold_ms: 300,
            drained: false,
        };
        let x = Extra {
            boot: 2,
            ..Extra::default()
        };
        w.submit(one(d), x.clone()).unwrap();
        assert_eq!(w.wait_result(), Ok(()));
        // The thread wakes the loop right after it reports.
        let t0 = std::time::Instant::now();
        while woken.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(5),
                "never woken"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(s.load().unwrap(), (one(d), x.clone()));
        assert!(w.try_result().is_none(), "one result per write");
        // A failed write is reported, not lost: the daemon stops on it.
        let gone = Store::new(&dir.join("missing-dir").join("1.state"), me());
        let wg = gone.writer(Box::new(|| {})).unwrap();
        wg.submit(one(d), x).unwrap();
        let e = wg.wait_result().unwrap_err();
        assert!(e.contains("missing-dir"), "{e}");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_second_lock_is_refused_naming_the_file_and_holder() {
        let dir = tmpdir("lock");
        let p = dir.join("3.state");
        let mut a = Store::new(&p, me());
        a.lock().unwrap();
        let mut b = Store::new(&p, me());
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
        let s = Store::new(&p, me());
        s.save(
            &one(Durable {
                term: 5,
                voted_term: 5,
                voted_for: 1,
                led_term: 5,
                hold_ms: 1,
                drained: false,
            }),
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

    fn a_state(term: u64) -> Durable {
        Durable {
            term,
            voted_term: term,
            voted_for: 2,
            led_term: term - 1,
            hold_ms: 300,
            drained: false,
        }
    }

    #[test]
    fn version_5_names_the_server_and_cluster_and_round_trips() {
        let dir = tmpdir("v5");
        let s = Store::new(&dir.join("1.state"), me());
        let mut x = Extra {
            boot: 3,
            ..Extra::default()
        };
        x.peer_boots.insert(2, 5);
        s.save(&one(a_state(7)), &x).unwrap();
        let text = fs::read_to_string(s.path()).unwrap();
        assert!(
            text.starts_with("electd-state 5\nid 1\ncluster orders-eu\ngroup default\n"),
            "{text}"
        );
        let l = s.load_as(None).unwrap();
        assert_eq!(
            (l.groups, l.extra, l.found),
            (one(a_state(7)), x.clone(), Found::Own)
        );
        // The writer thread writes the owner too.
        let w = s.writer(Box::new(|| {})).unwrap();
        w.submit(one(a_state(8)), x).unwrap();
        assert_eq!(w.wait_result(), Ok(()));
        assert_eq!(s.load_as(None).unwrap().found, Found::Own);
        assert!(
            fs::read_to_string(s.path())
                .unwrap()
                .starts_with("electd-state 5\nid 1\ncluster orders-eu\n")
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn versions_1_to_4_load_unnamed_and_are_rewritten_as_5() {
        let dir = tmpdir("v4");
        let s = Store::new(&dir.join("1.state"), me());
        assert_eq!(s.load_as(None).unwrap().found, Found::Nothing);
        for (v, body) in [
            (
                1,
                "electd-state 1\nterm 3\nvoted_term 3\nvoted_for 1\nmax_hold_ms 300\n",
            ),
            (
                2,
                "electd-state 2\nterm 4\nvoted_term 4\nvoted_for 2\nled_term 3\nhold_ms 300\nboot 2\npeer_boots\n",
            ),
            (
                3,
                "electd-state 3\nterm 5\nvoted_term 5\nvoted_for 2\nled_term 4\nhold_ms 300\ndrained 1\nboot 3\npeer_boots 2:1\n",
            ),
            // As the release before version 5 wrote it.
            (
                4,
                "electd-state 4\ngroup default\nterm 6\nvoted_term 6\nvoted_for 2\nled_term 5\nhold_ms 300\ndrained 0\ngroup orders\nterm 2\nvoted_term 2\nvoted_for 3\nled_term 0\nhold_ms 300\ndrained 0\nboot 4\npeer_boots 2:3 3:1\n",
            ),
        ] {
            write_signed(s.path(), body);
            let l = s.load_as(None).unwrap();
            assert_eq!(l.found, Found::Unnamed(v));
            assert_eq!(l.groups["default"].term, v as u64 + 2, "version {v}");
            // Written back as version 5, of this server, the state unchanged.
            s.save(&l.groups, &l.extra).unwrap();
            let again = s.load_as(None).unwrap();
            assert_eq!(
                (again.groups, again.extra, again.found),
                (l.groups, l.extra, Found::Own)
            );
        }
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_file_of_another_server_or_cluster_is_refused_naming_both() {
        let dir = tmpdir("foreign");
        let p = dir.join("1.state");
        let theirs = |id: u16, cluster: &str| {
            Store::new(
                &p,
                Identity {
                    id,
                    cluster: cluster.into(),
                },
            )
        };
        theirs(3, "orders-eu")
            .save(&one(a_state(9)), &Extra::default())
            .unwrap();
        let s = Store::new(&p, me());
        let e = s.load().unwrap_err();
        assert!(matches!(e, StoreError::Foreign { .. }), "{e:?}");
        let e = e.to_string();
        assert!(
            e.contains(&p.display().to_string())
                && e.contains("belongs to server 3 of cluster 'orders-eu'")
                && e.contains("this is server 1 of cluster 'orders-eu'")
                && e.contains("vote twice in a term")
                && !e.contains("--state-cluster"),
            "{e}"
        );
        // No option takes another server's file, even under the former name.
        assert!(s.load_as(Some("orders-eu")).is_err());
        // Another cluster, same id: refused, naming both names and the way out.
        theirs(1, "orders-us")
            .save(&one(a_state(9)), &Extra::default())
            .unwrap();
        let e = s.load().unwrap_err().to_string();
        assert!(
            e.contains("belongs to server 1 of cluster 'orders-us'")
                && e.contains("this is server 1 of cluster 'orders-eu'")
                && e.contains("--state-cluster orders-us"),
            "{e}"
        );
        assert!(s.load_as(Some("orders-xx")).is_err(), "another former name");
        // --state-cluster orders-us takes it; written back under the new name.
        let l = s.load_as(Some("orders-us")).unwrap();
        assert_eq!(l.found, Found::Renamed("orders-us".into()));
        assert_eq!(l.groups, one(a_state(9)));
        s.save(&l.groups, &l.extra).unwrap();
        assert_eq!(s.load_as(Some("orders-us")).unwrap().found, Found::Own);
        // Both differ: the id is what it is refused for.
        theirs(2, "payments")
            .save(&one(a_state(9)), &Extra::default())
            .unwrap();
        let e = s.load_as(Some("payments")).unwrap_err().to_string();
        assert!(
            e.contains("server 2 of cluster 'payments'") && e.contains("no option overrides"),
            "{e}"
        );
        assert_eq!(
            fs::read_to_string(&p).unwrap().lines().nth(1),
            Some("id 2"),
            "a refused file is left as it was"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn garbled_identity_lines_are_corrupt_naming_the_line() {
        let dir = tmpdir("garbled");
        let s = Store::new(&dir.join("1.state"), me());
        s.save(&one(a_state(4)), &Extra::default()).unwrap();
        let text = fs::read_to_string(s.path()).unwrap();
        let good = text.rsplit_once("crc ").unwrap().0;
        for (bad, why) in [
            (good.replace("id 1\n", ""), "missing id line"),
            (
                good.replace("id 1\n", "id 1\nid 1\n"),
                "id line given twice",
            ),
            (
                good.replace("cluster orders-eu\n", ""),
                "missing cluster line",
            ),
            (
                good.replace(
                    "cluster orders-eu\n",
                    "cluster orders-eu\ncluster orders-eu\n",
                ),
                "out of place",
            ),
            (good.replace("boot ", "id 1\nboot "), "out of place"),
            (good.replace("id 1\n", "id 0\n"), "bad id line 'id 0'"),
            (good.replace("id 1\n", "id 256\n"), "bad id line"),
            (good.replace("id 1\n", "id 01\n"), "bad id line"),
            (good.replace("id 1\n", "id +1\n"), "bad id line"),
            (good.replace("id 1\n", "id one\n"), "bad id line"),
            (good.replace("id 1\n", "id\n"), "missing id line"),
            (
                good.replace("cluster orders-eu", "cluster "),
                "bad cluster line",
            ),
            (
                good.replace("cluster orders-eu", "cluster a b"),
                "bad cluster line",
            ),
            (
                good.replace("cluster orders-eu", "clusters x"),
                "missing cluster line",
            ),
            (
                good.replace("id 1\ncluster orders-eu\n", "cluster orders-eu\nid 1\n"),
                "missing id line",
            ),
        ] {
            write_signed(s.path(), &bad);
            let e = s.load().unwrap_err();
            assert!(matches!(e, StoreError::Corrupt(..)), "{bad}: {e:?}");
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
        // An owner's lines in a version-4 file are not read as one.
        write_signed(s.path(), &good.replace("electd-state 5", "electd-state 4"));
        let e = s.load().unwrap_err().to_string();
        assert!(e.contains("corrupt") && e.contains("id 1"), "{e}");
        fs::remove_dir_all(dir).unwrap();
    }

    /// review (state2): every cluster name the configuration takes (one token of
    /// non-whitespace: Unicode, control characters, `crc`-like text, very long) is
    /// written and read back as the same owner, so no start writes a file the next
    /// start refuses as corrupt or as another cluster's.
    #[test]
    fn odd_and_long_cluster_names_round_trip() {
        let dir = tmpdir("oddnames");
        let long = "x".repeat(100_000);
        for cluster in [
            "crc",
            "crc:00000000",
            "électeur-ß",
            "a\u{1c}b",
            "a\u{0}b",
            "group",
            "id",
            "🗳",
            long.as_str(),
        ] {
            let this = Identity {
                id: 255,
                cluster: cluster.into(),
            };
            let s = Store::new(&dir.join("255.state"), this.clone());
            s.save(&one(a_state(5)), &Extra::default()).unwrap();
            let l = s.load_as(None).unwrap();
            assert_eq!((l.found, l.groups), (Found::Own, one(a_state(5))));
            // And another server's reader refuses it naming it whole.
            let other = Store::new(
                s.path(),
                Identity {
                    id: 255,
                    cluster: "orders-eu".into(),
                },
            );
            match other.load_as(None) {
                Err(StoreError::Foreign { file, .. }) => assert_eq!(file, this),
                e => panic!("{e:?}"),
            }
        }
        fs::remove_dir_all(dir).unwrap();
    }

    /// review (state2): a FIFO in the state file's place (a mistyped `state` path, a
    /// test harness's leftover) made the start block in its read until a writer came,
    /// with no message: a start under systemd then hangs to its start timeout. Refused
    /// at once, naming the file, like a reload refuses a FIFO as a key file.
    #[test]
    fn a_fifo_in_the_state_files_place_is_refused_not_read() {
        let dir = tmpdir("fifo");
        let p = dir.join("1.state");
        let c = std::ffi::CString::new(p.display().to_string()).unwrap();
        // SAFETY: mkfifo(3) on a NUL-terminated path this test owns.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = mpsc::channel();
        let s = Store::new(&p, me());
        std::thread::spawn(move || {
            let _ = tx.send(s.load().map(|_| ()).map_err(|e| e.to_string()));
        });
        let got = rx.recv_timeout(std::time::Duration::from_secs(3));
        if got.is_err() {
            // Let the blocked read go (a writer opens and closes the FIFO).
            let _ = OpenOptions::new().write(true).open(&p);
        }
        let e = got.expect("the load blocked on the FIFO").unwrap_err();
        assert!(
            e.contains(&p.display().to_string()) && e.contains("not a regular file"),
            "{e}"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    /// review (state2): the boot lines were the one part of the file read loosely: a
    /// second `boot` or `peer_boots` line silently replaced the first, a peer given
    /// twice kept its last boot, and a version-2-on file without them loaded as boot 0.
    /// A hand edit (README's downgrade steps are one) that leaves such a file must stop
    /// the daemon like any other corrupt file: a boot number that goes back reuses
    /// datagram counters, and peers that remember the newer boot drop this server's
    /// datagrams.
    #[test]
    fn boot_lines_are_given_once_each_and_peers_once() {
        let dir = tmpdir("bootlines");
        let s = Store::new(&dir.join("1.state"), me());
        let mut x = Extra {
            boot: 12,
            ..Extra::default()
        };
        x.peer_boots.insert(2, 11);
        s.save(&one(a_state(4)), &x).unwrap();
        let text = fs::read_to_string(s.path()).unwrap();
        let good = text.rsplit_once("crc ").unwrap().0;
        assert!(good.ends_with("boot 12\npeer_boots 2:11\n"), "{good}");
        for (bad, why) in [
            (good.replace("boot 12\n", "boot 12\nboot 3\n"), "boot"),
            (
                good.replace("peer_boots 2:11\n", "peer_boots 2:11\npeer_boots 2:1\n"),
                "peer_boots",
            ),
            (
                good.replace("peer_boots 2:11", "peer_boots 2:11 2:1"),
                "peer 2",
            ),
            (good.replace("boot 12\n", ""), "missing boot"),
            (good.replace("peer_boots 2:11\n", ""), "missing peer_boots"),
            (
                good.replace("peer_boots 2:11", "peer_boots2:11"),
                "peer_boots",
            ),
        ] {
            write_signed(s.path(), &bad);
            let e = s.load().unwrap_err();
            assert!(matches!(e, StoreError::Corrupt(..)), "{bad}: {e:?}");
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
        // Version 1 files were written both with and without boot lines: both load.
        for v1 in [
            "electd-state 1\nterm 3\nvoted_term 3\nvoted_for 1\nmax_hold_ms 300\n",
            "electd-state 1\nterm 3\nvoted_term 3\nvoted_for 1\nmax_hold_ms 300\nboot 2\npeer_boots 2:1\n",
        ] {
            write_signed(s.path(), v1);
            s.load().expect(v1);
        }
        fs::remove_dir_all(dir).unwrap();
    }

    /// Mutations of a valid file, CRC fixed or not: an error or a state, never a panic.
    #[test]
    fn mutated_files_never_panic() {
        let me = me();
        let mut g = one(a_state(12));
        g.insert("orders".into(), a_state(3));
        let mut x = Extra {
            boot: 7,
            ..Extra::default()
        };
        x.peer_boots.insert(2, 9);
        let good = body(&me, &g, &x);
        let mut rng = crate::rng::SplitMix64::new(0x5eed_5747);
        let alphabet = b"0123456789 \n:-_abcdefghijklmnopqrstuvwxyz\0\xff";
        let (mut loaded, mut refused) = (0, 0);
        for _ in 0..20_000 {
            let mut bytes = good.clone().into_bytes();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len() as u64 + 1) as usize;
                match rng.below(3) {
                    0 if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    1 if at < bytes.len() => {
                        bytes[at] = alphabet[rng.below(alphabet.len() as u64) as usize];
                    }
                    _ => bytes.insert(at, alphabet[rng.below(alphabet.len() as u64) as usize]),
                }
            }
            // Mostly re-signed, so the parser past the CRC is what is exercised.
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let signed = if rng.below(8) == 0 {
                text
            } else {
                format!("{text}crc {:08x}\n", crc32fast::hash(text.as_bytes()))
            };
            match parse(&signed) {
                Ok(p) => {
                    loaded += 1;
                    assert!(p.groups.len() <= MAX_STATE_GROUPS);
                }
                Err(_) => refused += 1,
            }
        }
        assert!(
            loaded > 0 && refused > 0,
            "{loaded} loaded, {refused} refused"
        );
    }

    /// README's example file is a valid file of server 3 of orders-eu, and its example
    /// refusal is the one electd gives.
    #[test]
    fn the_readme_example_file_and_refusal_are_what_electd_reads_and_says() {
        let readme = include_str!("../README.md");
        let start = readme
            .find("electd-state 5\nid 3\n")
            .expect("README example");
        let end = start + readme[start..].find("\n```").unwrap() + 1;
        let p = parse(&readme[start..end]).expect("README's example file parses");
        assert_eq!(
            p.owner,
            Some(Identity {
                id: 3,
                cluster: "orders-eu".into()
            })
        );
        let refusal = StoreError::Foreign {
            path: "/var/lib/electd/3.state".into(),
            file: Identity {
                id: 1,
                cluster: "orders-eu".into(),
            },
            this: Identity {
                id: 3,
                cluster: "orders-eu".into(),
            },
        };
        assert!(
            readme.contains(&format!("cannot start: {refusal}\n")),
            "README quotes: {refusal}"
        );
    }
}

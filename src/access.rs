//! Whether the daemon's user can read a file: `electd --check-config`'s key-file check
//! (SPEC sections 9 and 10).
//!
//! Run as the user the unit runs as (`ExecStartPre`), opening the file is the check,
//! and [`crate::auth::load_keys`] does it. Run as root for another user (`--as-user`,
//! or the `electd` user by default), root's own open proves nothing: [`readable_as`]
//! forks a child that takes on that user's uid, gid and groups and opens the file, so
//! modes, owners, ACLs and every directory on the way count exactly as they will for
//! the daemon.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// The user the packaged unit runs as (`User=electd`).
pub const DAEMON_USER: &str = "electd";

/// A user account: what a process needs to act as it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// The login name.
    pub name: String,
    /// The user id.
    pub uid: u32,
    /// The primary group id.
    pub gid: u32,
}

/// Looks up user `name` in the password database; Ok(None) if there is none.
pub fn lookup(name: &str) -> Result<Option<User>, String> {
    let cname = CString::new(name).map_err(|_| format!("user name '{name}' holds a NUL"))?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: passwd is plain data that getpwnam_r fills, pointing into `buf`, which
    // outlives every read below.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwnam_r(
            cname.as_ptr(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut out,
        );
        if rc != 0 {
            return Err(format!(
                "cannot look up user '{name}': {}",
                std::io::Error::from_raw_os_error(rc)
            ));
        }
        if out.is_null() {
            return Ok(None);
        }
        Ok(Some(User {
            name: CStr::from_ptr(pw.pw_name).to_string_lossy().into_owned(),
            uid: pw.pw_uid,
            gid: pw.pw_gid,
        }))
    }
}

/// The user this process runs as (its effective uid), named if the database knows it.
pub fn current() -> User {
    // SAFETY: geteuid and getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: as in `lookup`.
    let name = unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out);
        (rc == 0 && !out.is_null())
            .then(|| CStr::from_ptr(pw.pw_name).to_string_lossy().into_owned())
    };
    User {
        name: name.unwrap_or_else(|| format!("uid {uid}")),
        uid,
        gid,
    }
}

/// The groups of `user` (primary and supplementary), as a login would have them.
fn groups(user: &User) -> Result<Vec<libc::gid_t>, String> {
    let cname = CString::new(user.name.as_str()).map_err(|_| "user name holds a NUL")?;
    let mut n: libc::c_int = 64;
    for _ in 0..8 {
        let mut list = vec![0 as libc::gid_t; n as usize];
        let want = n;
        // SAFETY: getgrouplist writes at most `n` ids into `list` and sets `n`.
        let rc = unsafe { libc::getgrouplist(cname.as_ptr(), user.gid, list.as_mut_ptr(), &mut n) };
        if rc >= 0 {
            list.truncate(n.max(0) as usize);
            return Ok(list);
        }
        // Too small: `n` now holds the size needed (glibc); grow at least twofold.
        n = n.max(want.saturating_mul(2)).min(65_536);
    }
    Err(format!("cannot list the groups of user {}", user.name))
}

/// Checks that `user` can open `path` for reading, from a process running as root: a
/// child switches to the user's uid, gid and groups and opens it. The error names the
/// owner and mode and how to fix them.
pub fn readable_as(path: &Path, user: &User) -> Result<(), String> {
    can_as(path, user, Can::Read).map_err(|e| {
        format!(
            "key file {} is not readable by user {} (uid {}): {e}",
            path.display(),
            user.name,
            user.uid
        )
    })
}

/// What `can_as` checks that a user can do with a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Can {
    /// Open it for reading (a key file, the configuration).
    Read,
    /// Execute it (a check command).
    Run,
}

/// Checks that `user` can read or run `path`, from a process running as root, as
/// `readable_as` does; the error is the system's reason, the owner and mode, and a fix.
pub fn can_as(path: &Path, user: &User, can: Can) -> Result<(), String> {
    let groups = groups(user)?;
    let cpath = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} holds a NUL", path.display()))?;
    // Exit statuses of the child besides an errno (1..=133 on Linux).
    const SWITCH_FAILED: i32 = 250;
    // SAFETY: fork in a process with one thread (--check-config starts none); the
    // child calls only async-signal-safe functions on data prepared before the fork,
    // and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: see above; every pointer is to data owned by the parent's copy.
        unsafe {
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                || libc::setgid(user.gid) != 0
                || libc::setuid(user.uid) != 0
            {
                libc::_exit(SWITCH_FAILED);
            }
            let ok = match can {
                Can::Read => libc::open(cpath.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) >= 0,
                Can::Run => libc::access(cpath.as_ptr(), libc::X_OK) == 0,
            };
            if !ok {
                let errno = *libc::__errno_location();
                libc::_exit(errno.clamp(1, SWITCH_FAILED - 1));
            }
            libc::_exit(0);
        }
    }
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: waits for the child we just forked.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("waitpid: {e}"));
        }
    }
    let who = format!("user {} (uid {})", user.name, user.uid);
    if !libc::WIFEXITED(status) {
        return Err(format!(
            "checking {} as {who}: the check died",
            path.display()
        ));
    }
    match libc::WEXITSTATUS(status) {
        0 => Ok(()),
        SWITCH_FAILED => Err(format!("cannot act as {who} to check {}", path.display())),
        errno => Err(format!(
            "{}{}",
            std::io::Error::from_raw_os_error(errno),
            remedy(path, user, can)
        )),
    }
}

/// "; it is owned by root:root with mode 0600; to let user electd read it: ...".
fn remedy(path: &Path, user: &User, can: Can) -> String {
    let Ok(m) = std::fs::metadata(path) else {
        return String::new();
    };
    let p = path.display();
    let group = group_name(user.gid).unwrap_or_else(|| user.gid.to_string());
    let (verb, mode) = match can {
        Can::Read => ("read it (and no one else)", "0640"),
        Can::Run => ("run it", "0750"),
    };
    format!(
        "; it is owned by uid {} gid {} with mode {:04o}; to let {} {verb}: chown root:{group} {p} && chmod {mode} {p}",
        m.uid(),
        m.gid(),
        m.permissions().mode() & 0o7777,
        user.name
    )
}

/// The name of group `gid`, if it has one.
pub fn group_name(gid: u32) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: as in `lookup`, for the group database.
    unsafe {
        let mut grp: libc::group = std::mem::zeroed();
        let mut out: *mut libc::group = std::ptr::null_mut();
        let rc = libc::getgrgid_r(gid, &mut grp, buf.as_mut_ptr(), buf.len(), &mut out);
        (rc == 0 && !out.is_null())
            .then(|| CStr::from_ptr(grp.gr_name).to_string_lossy().into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_looked_up_by_name() {
        let root = lookup("root").unwrap().expect("every system has root");
        assert_eq!((root.uid, root.gid), (0, 0));
        assert_eq!(lookup("no-such-user-electd-test").unwrap(), None);
        assert!(lookup("a\0b").is_err());
        let me = current();
        // SAFETY: geteuid has no preconditions.
        assert_eq!(me.uid, unsafe { libc::geteuid() });
    }
}

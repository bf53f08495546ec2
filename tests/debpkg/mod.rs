//! The Debian package for the packaging tests: `cargo deb --no-build` over the release
//! binaries that cargo built for this very test run, so the package holds the code
//! under test (never a stale build).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// How CI (and a developer) gets the packager: a build tool, not a dependency.
pub const INSTALL_CARGO_DEB: &str = "cargo install cargo-deb --locked";

/// The file name `cargo deb` gives the package of this crate on this machine.
pub fn deb_name() -> String {
    format!("electd_{}_{}.deb", env!("CARGO_PKG_VERSION"), dpkg_arch())
}

fn dpkg_arch() -> String {
    Command::new("dpkg")
        .arg("--print-architecture")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "amd64".into())
}

/// Why no package can be built here, or None: cargo-deb is missing, or the binaries
/// of this run are not the release ones that `cargo deb --no-build` packages.
pub fn unavailable() -> Option<String> {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_electd"));
    if bin.parent().and_then(Path::file_name) != Some("release".as_ref()) {
        return Some(format!(
            "the package is made from the release binaries, and this run built {}: \
             run the test with cargo test --release",
            bin.display()
        ));
    }
    let cargo_deb = Command::new(env!("CARGO"))
        .args(["deb", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !cargo_deb {
        return Some(format!("cargo-deb is not installed: {INSTALL_CARGO_DEB}"));
    }
    None
}

/// Builds the package into `out` (fast compression: the contents are what is tested)
/// and returns its path.
pub fn build(out: &Path) -> Result<PathBuf, String> {
    if let Some(why) = unavailable() {
        return Err(why);
    }
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let o = Command::new(env!("CARGO"))
        .args(["deb", "--no-build", "--fast", "--output"])
        .arg(out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map_err(|e| format!("cargo deb: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "cargo deb --no-build failed:\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    let deb = out.join(deb_name());
    if !deb.is_file() {
        return Err(format!(
            "cargo deb did not write {} (it said: {})",
            deb.display(),
            String::from_utf8_lossy(&o.stdout).trim()
        ));
    }
    Ok(deb)
}

/// The score of `systemd-analyze security UNIT`'s "Overall exposure level for UNIT:
/// 1.1 OK" line in `out`; panics, showing `out`, when there is none.
pub fn exposure_score(out: &str) -> f64 {
    let line = out
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or_else(|| panic!("no exposure level in:\n{out}"));
    line.split(": ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{line}"))
}

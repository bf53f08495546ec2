//! The profile-guided build (issue 25; .cargo/config.toml, pgo/rustc-wrapper,
//! BENCHMARKS.md "Cost at rest, twelfth round"): optimised builds get `-Cprofile-use` with
//! the profile's absolute path, other builds nothing, and the profile is an indexed
//! LLVM profile. A wrapper that dropped an argument, added the flag to a debug build
//! or lost the profile would fail here (and a missing profile fails every release
//! build outright).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the wrapper with `echo` as the compiler: returns the arguments it would run.
fn wrapped(args: &[&str], pgo: Option<&str>) -> Vec<String> {
    let mut c = Command::new(root().join("pgo/rustc-wrapper"));
    c.arg("echo").args(args);
    c.env_remove("ELECTD_PGO");
    if let Some(v) = pgo {
        c.env("ELECTD_PGO", v);
    }
    let out = c.output().expect("run pgo/rustc-wrapper");
    assert!(out.status.success(), "wrapper failed: {out:?}");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[test]
fn optimised_builds_get_the_profile_by_its_absolute_path() {
    let args = ["--crate-name", "electd", "-C", "opt-level=3", "-C", "lto"];
    let got = wrapped(&args, None);
    let profile = root().join("pgo/electd.profdata");
    let profile = profile.canonicalize().expect("pgo/electd.profdata exists");
    assert_eq!(got.len(), args.len() + 1, "{got:?}");
    assert_eq!(got[..args.len()], args, "the arguments, in order");
    let path = got[args.len()]
        .strip_prefix("-Cprofile-use=")
        .expect("-Cprofile-use= last");
    assert!(Path::new(path).is_absolute(), "{path}");
    // The same file, however the checkout's path is spelled (symbolic links).
    let given = Path::new(path)
        .canonicalize()
        .expect("the path given exists");
    assert_eq!(given, profile);
}

#[test]
fn other_builds_and_an_opt_out_get_nothing() {
    for args in [
        &["--crate-name", "electd", "-C", "opt-level=2"][..],
        &["--crate-name", "electd", "-C", "opt-level=0"][..],
        &["-", "--crate-name", "___", "--print=file-names"][..],
        &["-vV"][..],
    ] {
        assert_eq!(wrapped(args, None), args, "{args:?}");
    }
    let release = ["--crate-name", "electd", "-C", "opt-level=3"];
    assert_eq!(wrapped(&release, Some("0")), release);
    assert_eq!(wrapped(&release, Some("1")).len(), release.len() + 1);
}

#[test]
fn the_profile_is_an_indexed_llvm_profile_and_cargo_uses_the_wrapper() {
    let bytes = std::fs::read(root().join("pgo/electd.profdata")).expect("read the profile");
    // llvm/ProfileData/InstrProf.h: IndexedInstrProf::Magic, little-endian.
    let magic = 0x8169_666f_7270_6cff_u64.to_le_bytes();
    assert!(bytes.len() > 1024, "profile of {} bytes", bytes.len());
    assert_eq!(bytes[..8], magic, "not an indexed LLVM profile");
    let config = std::fs::read_to_string(root().join(".cargo/config.toml")).expect("config");
    assert!(
        config
            .lines()
            .any(|l| l.trim() == r#"rustc-wrapper = "pgo/rustc-wrapper""#),
        ".cargo/config.toml does not name the wrapper"
    );
}

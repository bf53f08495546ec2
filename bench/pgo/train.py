#!/usr/bin/env python3
"""Regenerates pgo/electd.profdata, the profile every release build of electd is
optimised with (.cargo/config.toml: `-Cprofile-use`; issue 25, BENCHMARKS.md "Cost at
rest, twelfth round").

  python3 bench/pgo/train.py [OUT]        (OUT: default pgo/electd.profdata)

1. Builds electd and electctl instrumented (`-Cprofile-generate`) into a target
   directory of its own (ELECTD_PGO=0: the wrapper does not give that build the old
   profile).
2. Runs the workload the profile is for, a cluster at rest: three daemons on loopback
   (unicast, heartbeat 100 ms), `electctl run --grace 50ms -- sleep infinity` on each,
   SECS seconds (default 20) once the leader asks in turn; then every `run` and daemon
   is stopped with SIGTERM (the leader hands over on the way out). What never runs
   there (elections after the first, failover, reloads) is laid out as cold: it is
   slower by nanoseconds, which no timer of the protocol can see.
3. Merges the raw profile with llvm-profdata (LLVM_PROFDATA, else the first of
   llvm-profdata-22 .. -19 and llvm-profdata that reads it; Debian: apt-get install
   llvm-19), sparse, into OUT.

Regenerate after changing a path a daemon at rest runs: functions whose code changed
lose their profile and are laid out as without it (a release build warns "function
control flow change detected (hash mismatch)" for each), so a stale profile costs
speed, never correctness. Cargo does not track the profile: this script touches the
crate's sources so the next build of electd uses the new one (its dependencies keep
the old until `cargo clean`). `bench/perf/footprint.py` shows the effect (code lines
and pages a heartbeat)."""
import glob, os, shutil, subprocess as sp, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "perf"))
import cluster3  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "pgo", "electd.profdata")
SECS = cluster3.env_num("SECS", 20.0, 1, 3600)


def profdata_tools():
    env = os.environ.get("LLVM_PROFDATA")
    if env:
        return [env]
    names = [f"llvm-profdata-{v}" for v in range(22, 18, -1)] + ["llvm-profdata"]
    return [p for p in (shutil.which(n) for n in names) if p]


def main():
    tools = profdata_tools()
    if not tools:
        sys.exit("train.py: no llvm-profdata found (apt-get install llvm-19, or set LLVM_PROFDATA)")
    work = tempfile.mkdtemp(prefix="electd-pgo-")
    procs, runs = [], []
    try:
        raw = os.path.join(work, "raw")
        target = os.path.join(work, "target")
        env = dict(os.environ, CARGO_TARGET_DIR=target, ELECTD_PGO="0",
                   RUSTFLAGS=f"-Cprofile-generate={raw}")
        sp.run(["cargo", "build", "--release", "--bin", "electd", "--bin", "electctl"],
               cwd=ROOT, env=env, check=True)
        # The build scripts wrote profiles of their own: only the daemons' count.
        shutil.rmtree(raw, ignore_errors=True)
        bins = os.path.join(target, "release")
        d = os.path.join(work, "cluster")
        os.mkdir(d)
        conf = cluster3.write_conf(d, "pgo", 47300 + os.getpid() % 500 * 3, 100)
        for i in (1, 2, 3):
            cluster3.start(bins, conf, d, i, procs)
        if not cluster3.wait_leader_in_turn(d, 200):
            sys.exit("train.py: no leader asking in turn within 20 s")
        for i in (1, 2, 3):
            runs.append(sp.Popen(
                [f"{bins}/electctl", "--socket", f"{d}/{i}.sock", "run", "--grace", "50ms",
                 "--", "sleep", "infinity"],
                stdin=sp.DEVNULL, stdout=sp.DEVNULL, stderr=open(f"{d}/run-{i}.log", "w")))
        time.sleep(SECS)
        cluster3.stop(runs)
        runs = []
        cluster3.stop(procs)
        procs = []
        profiles = glob.glob(os.path.join(raw, "*.profraw"))
        if not profiles:
            sys.exit("train.py: the daemons wrote no profile")
        os.makedirs(os.path.dirname(OUT), exist_ok=True)
        errors = []
        for tool in tools:
            r = sp.run([tool, "merge", "--sparse", "-o", OUT] + profiles,
                       capture_output=True, text=True)
            if r.returncode == 0:
                print(f"train.py: {OUT} from {len(profiles)} raw profile(s) with {tool}")
                # Cargo does not see the profile change: the next build must.
                for f in ("src/lib.rs", "src/bin/electd.rs", "src/bin/electctl.rs"):
                    os.utime(os.path.join(ROOT, f))
                return
            errors.append(f"{tool}: {r.stderr.strip()}")
        sys.exit("train.py: no llvm-profdata read the profile:\n" + "\n".join(errors))
    finally:
        cluster3.stop(runs)
        cluster3.stop(procs)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

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
   SECS seconds (default 20) once the leader asks in turn and WARM seconds (default 3)
   have passed; then every `run` and daemon is stopped with SIGTERM (the leader hands
   over on the way out). Only the rest is counted: each process's counters are zeroed
   (through /proc/PID/mem, the addresses from the binary's `__llvm_prf_cnts` section)
   when the SECS begin, read when they end, and written over the raw profile the
   process leaves at its exit. What never runs at rest (start-up, elections,
   failover, reloads, the stop) is laid out as cold, out of the rest path's lines
   and pages: it is slower by nanoseconds, which no timer of the protocol can see.
   Counted from start-up, the start and the election ran too: their blocks sat
   between the rest's (leader 480 code lines a heartbeat, follower 411; rest only:
   452 and 394, `bench/perf/footprint.py`). Needs the right to write the memory of
   the processes it starts: `kernel.yama.ptrace_scope` at most 1, or 2 as root
   (checked before the build, with a message naming the setting).
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
import glob, os, shutil, struct, subprocess as sp, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "perf"))
import cluster3  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "pgo", "electd.profdata")
SECS = cluster3.env_num("SECS", 20.0, 1, 3600)
WARM = cluster3.env_num("WARM", 3.0, 0, 600)


def profdata_tools():
    env = os.environ.get("LLVM_PROFDATA")
    if env:
        return [env]
    names = [f"llvm-profdata-{v}" for v in range(22, 18, -1)] + ["llvm-profdata"]
    return [p for p in (shutil.which(n) for n in names) if p]


def elf_section(path, name):
    """(address, size) of section `name` in the ELF64 little-endian file at path."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            sys.exit(f"train.py: {path} is not a 64-bit little-endian ELF file")
        shoff, = struct.unpack_from("<Q", head, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        hdr = lambda i: struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize)
        strtab = hdr(shstrndx)
        f.seek(strtab[4])
        names = f.read(strtab[5])
        for i in range(shnum):
            h = hdr(i)
            if names[h[0]:names.index(b"\0", h[0])].decode() == name:
                return h[3], h[5]
    sys.exit(f"train.py: {path} has no section {name} (not built with -Cprofile-generate?)")


def load_address(pid, binary):
    """Where process pid has `binary` (a PIE) mapped, or None when it does not (it
    runs another program, or has exited). A forked child that did not exec has it."""
    real = os.path.realpath(binary)
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and parts[5] == real and int(parts[2], 16) == 0:
                    return int(parts[0].split("-")[0], 16)
    except OSError:
        pass
    return None


def counters_at(pid, binary):
    """The address and size of the profile counters in process pid."""
    base = load_address(pid, binary)
    if base is None:
        sys.exit(f"train.py: process {pid} has exited or does not run {binary}")
    addr, size = elf_section(binary, "__llvm_prf_cnts")
    return base + addr, size


def children(pid):
    """The ids of the processes whose parent is pid (from /proc/*/stat)."""
    out = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        # The command may hold spaces and parentheses: the fields follow the last ')'.
        if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
            out.append(int(e))
    return out


def reset_counters(pid, binary):
    """Zeroes process pid's profile counters, as __llvm_profile_reset_counters would:
    what ran before (start-up, the election) is not in the profile."""
    addr, size = counters_at(pid, binary)
    with open(f"/proc/{pid}/mem", "r+b", buffering=0) as m:
        m.seek(addr)
        m.write(bytes(size))


def read_counters(pid, binary):
    addr, size = counters_at(pid, binary)
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as m:
        m.seek(addr)
        return m.read(size)


def patch_raw(path, binary, counters):
    """Writes `counters` over the counters of the raw profile at path (raw format
    versions 8 to 10: a header of u64 fields, binary ids, the data records, padding,
    then the counters), so the profile holds the rest only, not the stop."""
    data_size = elf_section(binary, "__llvm_prf_data")[1]
    with open(path, "r+b") as f:
        head = f.read(16 * 8)
        magic, version, ids, ndata, pad_before, ncounters = struct.unpack_from("<6Q", head)
        # The header's u64 fields by version: 8 has 11, 9 adds the bitmap's three, 10
        # the vtables' two (compiler-rt's InstrProfData.inc, INSTR_PROF_RAW_HEADER).
        fields = {8: 11, 9: 14, 10: 16}.get(version & 0xFFFFFFFF)
        if magic != 0xFF6C70726F667281 or fields is None:
            sys.exit(f"train.py: {path}: not a raw profile of a known version ({version:#x})")
        if ncounters * 8 != len(counters):
            sys.exit(f"train.py: {path}: {ncounters} counters, the process had {len(counters) // 8}")
        header = fields * 8
        at = header + ids + data_size + pad_before
        f.seek(at)
        final = f.read(len(counters))
        # Counters only grow: the ones written at exit are at least the snapshot's,
        # which also shows the offset is the counters' (the check of this layout).
        n = len(counters) // 8
        if len(final) != len(counters) or any(
                a < b for a, b in zip(struct.unpack(f"<{n}Q", final), struct.unpack(f"<{n}Q", counters))):
            sys.exit(f"train.py: {path}: the counters at offset {at} are not the process's")
        f.seek(at)
        f.write(counters)


def may_write_children_memory(scope_file="/proc/sys/kernel/yama/ptrace_scope", euid=None):
    """None when this process may write the memory of the processes it starts (Yama's
    ptrace_scope at most 1, or 2 as root, or no Yama), else why not: checked before the
    four-minute build, not at the first write after it."""
    euid = os.geteuid() if euid is None else euid
    try:
        with open(scope_file) as f:
            scope = int(f.read().strip())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        return f"cannot read {scope_file}: {e}"
    if scope <= 1 or (scope == 2 and euid == 0):
        return None
    if scope == 2:
        return ("kernel.yama.ptrace_scope is 2: only root may write the memory of the daemons "
                "this starts (their counters are zeroed at rest); run as root, or set it to 1")
    return (f"kernel.yama.ptrace_scope is {scope}: no process, root included, may write the memory "
            "of the daemons this starts (their counters are zeroed at rest); it needs 1 or 2 "
            "(3 lasts until a reboot)")


def main():
    tools = profdata_tools()
    if not tools:
        sys.exit("train.py: no llvm-profdata found (apt-get install llvm-19, or set LLVM_PROFDATA)")
    why = may_write_children_memory()
    if why:
        sys.exit(f"train.py: {why}")
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
        # One raw profile a process (not merged online, rustc's default): each is
        # trimmed to the rest below.
        os.environ["LLVM_PROFILE_FILE"] = os.path.join(raw, "%p.profraw")
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
        # Counted from here: every `run` has registered and the writes of the election
        # are behind; start-up and the election are left out of the profile, so the
        # optimiser moves them out of the rest path's way.
        time.sleep(WARM)
        taken = [(p.pid, f"{bins}/electd") for p in procs] + \
                [(p.pid, f"{bins}/electctl") for p in runs]
        # The leader's `run` has forked its enforcer (electctl, no exec), which writes
        # a raw profile of its own; the command (`sleep`) is not instrumented.
        taken += [(c, f"{bins}/electctl") for p in runs for c in children(p.pid)
                  if load_address(c, f"{bins}/electctl") is not None]
        for pid, binary in taken:
            reset_counters(pid, binary)
        time.sleep(SECS)
        # The stop is not the rest either: the counters as they are now replace those
        # each process writes at its exit.
        snap = [(pid, binary, read_counters(pid, binary)) for pid, binary in taken]
        cluster3.stop(runs)
        runs = []
        cluster3.stop(procs)
        procs = []
        profiles = glob.glob(os.path.join(raw, "*.profraw"))
        patched = []
        for pid, binary, counters in snap:
            mine = [p for p in profiles if os.path.basename(p) == f"{pid}.profraw"]
            if len(mine) != 1:
                sys.exit(f"train.py: process {pid} wrote {len(mine)} raw profiles")
            patch_raw(mine[0], binary, counters)
            patched.append(mine[0])
        # Any other raw profile is of a process that started after the counting began
        # (none at rest): not the rest.
        left = sorted(set(profiles) - set(patched))
        if left:
            print(f"train.py: left out, not of a process at rest: {left}")
        profiles = patched
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

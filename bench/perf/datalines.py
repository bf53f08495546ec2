#!/usr/bin/env python3
"""Data footprint of a heartbeat at rest (issue 25, tenth round): the distinct 64-byte
data lines a daemon loads or stores, the companion of footprint.py's code lines. Runs a
3-server cluster on loopback (127.0.0.1, ports PORT..PORT+2) with the daemon of ROLE
(leader: id 1, the highest priority; follower: id 3) under `valgrind --tool=lackey
--trace-mem=yes`, lets it settle, then keeps only the accesses of the last SECS of the
trace (read from its end: at rest every heartbeat touches much the same lines, so the
union over the window is about one heartbeat's set) and prints the distinct lines by
mapping (/proc/PID/maps of the valgrind process, read before it is stopped), with the
4 KiB pages they fall in (a page touched after a long sleep may cost a TLB miss and a
page walk however few of its lines are touched): stack,
heap, the binary's own data and tables, libc.

  python3 bench/perf/datalines.py BIN_DIR [leader|follower]

Env: SECS (5), SETTLE (15 s after the leader asks in turn), HBT (100, ms), PORT (7641).
Every process it starts is stopped by its id; its files go to a temporary directory,
removed at exit (the trace of a long window is hundreds of MB)."""
import atexit, bisect, collections, os, re, shutil, subprocess as sp, sys, tempfile, time

import cluster3

BIN, ROLE, me = cluster3.args()
SECS = cluster3.env_num("SECS", 5.0, 1, 3600)
SETTLE = cluster3.env_num("SETTLE", 15.0, 0, 3600)
HBT = cluster3.env_num("HBT", 100, 10, 60000, int)
PORT = cluster3.env_num("PORT", 7641, 1024, 65533, int)
RUNS = cluster3.env_num("RUNS", 0, 0, 10000, int)
d = tempfile.mkdtemp(prefix="electd-datalines-")
atexit.register(shutil.rmtree, d, True)  # removed however the script ends
# Under lackey server 1 is slow and may lose the first round: preempt-delay hands the
# lead back to it (priority 200) once it has been eligible that long.
conf = cluster3.write_conf(d, f"datalines-{os.getpid()}", PORT, HBT, f"preempt-delay {3 * HBT}ms\n")
trace = f"{d}/lackey.out"
procs = []


def start(i, wrap):
    lackey = ["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-file={trace}"]
    return cluster3.start(BIN, conf, d, i, procs, lackey if wrap else ())


maps = []
base = 0
try:
    lk = start(me, True)
    time.sleep(3)
    for i in (1, 2, 3):
        if i != me:
            start(i, False)
    if not cluster3.wait_leader_in_turn(d, 1200):
        sys.exit("server 1 did not lead with acknowledgements in turn within 120 s")
    time.sleep(SETTLE)
    size0 = os.path.getsize(trace)
    time.sleep(SECS)
    size1 = os.path.getsize(trace)
    for l in open(f"/proc/{lk.pid}/maps"):
        p = l.split()
        lo, hi = (int(x, 16) for x in p[0].split("-"))
        maps.append((lo, hi, p[5] if len(p) > 5 else "[anon]"))
        if len(p) > 5 and p[5].endswith("/electd") and int(p[2], 16) == 0:
            base = lo
finally:
    cluster3.stop(procs)

maps.sort()
starts = [m[0] for m in maps]


def region(a):
    i = bisect.bisect_right(starts, a) - 1
    if i >= 0 and maps[i][0] <= a < maps[i][1]:
        name = os.path.basename(maps[i][2])
        if name.startswith("["):
            # Anonymous: under valgrind the client's stack and heap both are; told
            # apart by their mapping (the stack's is the one with the highest lines).
            return f"{name} {maps[i][0]:#x}-{maps[i][1]:#x}"
        return name
    return "[unmapped]"


lines = collections.defaultdict(set)
# Which instruction (the last "I" before it) touched each data line, for RUNS.
by_instr = collections.defaultdict(collections.Counter)
last_i = 0
code = set()
with open(trace, "rb") as f:
    f.seek(size0)
    f.readline()  # a partial line
    for raw in f.read(size1 - size0).splitlines():
        l = raw.decode(errors="replace")
        if len(l) < 3 or "," not in l:
            continue
        kind = l[:2].strip()
        try:
            a = int(l[2:].split(",")[0].strip(), 16)
        except ValueError:
            continue
        if kind == "I":
            code.add(a >> 6)
            last_i = a
        elif kind in ("L", "S", "M"):
            lines[a >> 6].add(kind)
            by_instr[a >> 6][last_i] += 1
by = collections.Counter()
for ln in lines:
    by[region(ln << 6)] += 1
hb = SECS * 1000 / HBT
print(f"{ROLE}: window {SECS} s (~{hb:.0f} heartbeats): {len(lines)} distinct data lines, {len(code)} distinct code lines (all objects)")
pages = collections.defaultdict(set)
for ln in lines:
    pages[region(ln << 6)].add(ln >> 6)
print(f"  data pages (4 KiB): {sum(len(p) for p in pages.values())}")
for k, v in by.most_common():
    print(f"  {v:6d} lines {len(pages[k]):4d} pages  {k}")

if RUNS:
    # Contiguous runs of touched lines per mapping (an object, or neighbours).
    for name in [k for k, _ in by.most_common()]:
        ls = sorted(ln for ln in lines if region(ln << 6) == name)
        runs = []
        for ln in ls:
            if runs and ln - runs[-1][1] <= 1:
                runs[-1][1] = ln
            else:
                runs.append([ln, ln])
        print(f"{name}: {len(ls)} lines in {len(runs)} runs")
        for a, b in sorted(runs, key=lambda r: r[0] - r[1])[:RUNS]:
            who = collections.Counter()
            for ln in range(a, b + 1):
                who.update(by_instr[ln])
            top = [i for i, _ in who.most_common(4)]
            print(f"  {(a << 6):#x} +{b - a + 1} lines, touched by:")
            for i in top:
                # The inlined frames of this crate, innermost first.
                out = sp.run(["addr2line", "-i", "-f", "-C", "-e", f"{BIN}/electd", hex(i - base)],
                             capture_output=True, text=True).stdout.splitlines()
                own = [re.sub(r"<impl [^>]*>::", "", f)[:60] for f, l in zip(out[0::2], out[1::2])
                       if "/src/" in l and "/rustc/" not in l and "/.cargo/" not in l]
                print(f"    {who[i]:6d} accesses: " + (" < ".join(own[:4]) or out[0][:60] if out else "?"))

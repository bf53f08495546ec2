#!/usr/bin/env python3
"""Code footprint of a heartbeat at rest (issue 25, sixth round): instructions are cheap,
cold lines and pages are not. Runs a 3-server cluster on loopback (127.0.0.1, ports
PORT..PORT+2), the daemon of ROLE (leader: id 1, which has the highest priority;
follower: id 3) under `valgrind --tool=callgrind --dump-instr=yes`, zeroes the counters
once the cluster has settled, dumps them SECS later, and prints per heartbeat: the
instructions (Ir), the distinct 64-byte code lines and 4 KiB code pages executed in
the window (the union over the window: the same every heartbeat at rest), and the
functions executed, with their self Ir per heartbeat and their size in the binary.

  python3 bench/perf/footprint.py BIN_DIR [leader|follower]

BIN_DIR holds electd and electctl. Env: SECS (10), SETTLE (10 s after the leader asks in turn), HBT (100, ms),
PORT (7611), TOP (25: functions listed, by Ir and by code lines touched), CG_KEEP (a path: the
callgrind dump is copied there), ATTEMPTS (3: windows taken before giving up when server 1
was re-elected during one; callgrind slows it about 50 times).
Needs valgrind and binutils (nm). Deterministic: a build gives the same figures every
run, so two builds compare without a quiet machine. Every process it starts is
stopped by its id; the state and sockets go to a temporary directory, removed at exit."""
import atexit, collections, os, re, shutil, subprocess as sp, sys, tempfile, time

import cluster3

BIN, ROLE, me = cluster3.args()
SECS = cluster3.env_num("SECS", 10.0, 1, 3600)
SETTLE = cluster3.env_num("SETTLE", 10.0, 0, 3600)
HBT = cluster3.env_num("HBT", 100, 10, 60000, int)
PORT = cluster3.env_num("PORT", 7611, 1024, 65533, int)
ATTEMPTS = cluster3.env_num("ATTEMPTS", 3, 1, 20, int)
d = tempfile.mkdtemp(prefix="electd-footprint-")
# Removed at exit, a refused run too (the dump is read before; CG_KEEP keeps a copy).
atexit.register(shutil.rmtree, d, True)
conf = cluster3.write_conf(d, f"footprint-{os.getpid()}", PORT, HBT)
out = f"{d}/cg.out"
procs = []


def start(i, wrap):
    cg = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-instr=yes", "--demangle=no",
          f"--callgrind-out-file={out}"]
    return cluster3.start(BIN, conf, d, i, procs, cg if wrap else ())


try:
    cg = start(me, True)
    time.sleep(2)
    for i in (1, 2, 3):
        if i != me:
            start(i, False)
    if not cluster3.wait_leader_in_turn(d, 300):
        sys.exit("server 1 did not lead with acknowledgements in turn within 30 s")
    time.sleep(SETTLE)  # past the writes and lines that follow an election
    # Switching instrumentation on retranslates the code: slow enough for the leader
    # to lose its lease under callgrind. Count only from a zero after it has recovered.
    sp.run(["callgrind_control", "-i", "on", str(cg.pid)], stdout=sp.DEVNULL, check=True)
    time.sleep(SETTLE)
    # The window counts only if server 1 led one term throughout: under callgrind a
    # leader can lose its seat, and the counts would then be a follower's. The dump
    # itself stalls it past its lease: it leads again in the same term once it
    # recovers (a new term means another server was elected meanwhile). Such a window
    # is thrown away and another taken, ATTEMPTS in all (the first's dump is kept by
    # number, so only the last is read).
    for attempt in range(1, ATTEMPTS + 1):
        before = cluster3.status(d, 1, 10)
        time.sleep(1)  # past that request's close, which is no heartbeat's work
        sp.run(["callgrind_control", "-z", str(cg.pid)], stdout=sp.DEVNULL, check=True)
        time.sleep(SECS)
        sp.run(["callgrind_control", "-d", str(cg.pid)], stdout=sp.DEVNULL, check=True)
        for _ in range(50):
            after = cluster3.status(d, 1, 10)
            if after.get("role") == "leader" or after.get("term") != before.get("term"):
                break
            time.sleep(0.1)
        held = [(s.get("role"), s.get("term")) for s in (before, after)]
        if held[0][0] == "leader" and held[0] == held[1]:
            break
        print(f"window {attempt} of {ATTEMPTS} thrown away: server 1 did not lead one term "
              f"through it (role, term: {held})", file=sys.stderr)
        if attempt == ATTEMPTS:
            sys.exit(f"server 1 did not lead one term through any of {ATTEMPTS} windows: run again")
        time.sleep(SETTLE)  # past the writes and lines of that election
    time.sleep(1)
finally:
    cluster3.stop(procs)

dump = [f for f in os.listdir(d) if f.startswith("cg.out.")]
if not dump:
    sys.exit("no callgrind dump")
text = open(f"{d}/{max(dump, key=lambda f: int(f.rsplit('.', 1)[1]))}").read()
if os.environ.get("CG_KEEP"):
    # The dump itself, for callgrind_annotate (--inclusive=yes: where each call's cost goes).
    with open(os.environ["CG_KEEP"], "w") as f:
        f.write(text)
if "positions: instr line" not in text:
    sys.exit("unexpected callgrind positions (want: instr line)")
hb = SECS * 1000 / HBT
# Parse positions (instr, compressed relative), object and function names, self costs.
names = {}
fnames = {}
obj = None
fn = None
addr = 0
lines = collections.defaultdict(set)
addrs = collections.defaultdict(set)
fn_lines = collections.defaultdict(set)
addrs = collections.defaultdict(set)
self_ir = collections.Counter()
total = 0
after_calls = False
for l in text.splitlines():
    if l.startswith("ob="):
        m = re.match(r"ob=\((\d+)\)(?: (.*))?", l)
        if m.group(2):
            names[m.group(1)] = m.group(2)
        obj = names.get(m.group(1), "?")
        continue
    if l.startswith(("cfn=", "fn=")):
        m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", l)
        if m.group(2):
            fnames[m.group(1)] = m.group(2)
        if l.startswith("fn="):
            fn = fnames.get(m.group(1))
        continue
    if l.startswith("calls="):
        after_calls = True
        continue
    # "positions: instr line": an address, a line, then the cost.
    m = re.match(r"^(0x[0-9a-f]+|[+-]\d+|\*)\s+(?:\d+|[+-]\d+|\*)\s+(\d+)$", l)
    if not m:
        continue
    a = m.group(1)
    if a.startswith("0x"):
        addr = int(a, 16)
    elif a[0] in "+-":
        addr += int(a)
    lines[obj].add(addr >> 6)
    addrs[obj].add(addr)
    fn_lines[fn].add(addr >> 6)
    if after_calls:
        after_calls = False  # the call's inclusive cost, not this function's
        continue
    self_ir[fn] += int(m.group(2))
    total += int(m.group(2))
all_lines = set().union(*lines.values()) if lines else set()
if os.environ.get("LINES_OUT"):
    # Every executed instruction address of the binary, one a line (for addr2line).
    with open(os.environ["LINES_OUT"], "w") as f:
        for k, v in addrs.items():
            if k and os.path.basename(k) == "electd":
                f.writelines(f"{a:#x}\n" for a in sorted(v))
pages = {a >> 6 for a in all_lines}
sizes = {}
for l in sp.run(["nm", "-S", f"{BIN}/electd"], capture_output=True, text=True).stdout.splitlines():
    p = l.split()
    if len(p) == 4:
        sizes[p[3]] = int(p[1], 16)
print(f"{ROLE}: {total / hb:.0f} Ir per heartbeat; {len(all_lines)} code lines "
      f"({len(all_lines) * 64 // 1024} KiB) in {len(pages)} pages; "
      + ", ".join(f"{os.path.basename(k or '?')} {len(v)} lines" for k, v in lines.items()))
body = sum(sizes.get(n, 0) for n in self_ir)
print(f"{len(self_ir)} functions executed, {body} bytes of their bodies in the binary")
TOP = cluster3.env_num("TOP", 25, 1, 10000, int)
for n, c in self_ir.most_common(TOP):
    print(f"  {c / hb:7.0f} Ir  {sizes.get(n, 0):6d} B  {re.sub(r'17h[0-9a-f]{16}E$', '', n or '?')[:110]}")
# The same functions by the code lines they touch (a line shared by two is counted in
# both): what a cold wakeup pays for, if the cost follows the lines.
print(f"by code lines touched (of {len(all_lines)}):")
for n, ls in sorted(fn_lines.items(), key=lambda kv: -len(kv[1]))[:TOP]:
    print(f"  {len(ls):5d} lines  {self_ir[n] / hb:7.0f} Ir  {re.sub(r'17h[0-9a-f]{16}E$', '', n or '?')[:110]}")

#!/usr/bin/env python3
"""Where a daemon at rest spends its CPU, kernel against its own code (issue 25, eleventh
round): runs the 3-server loopback cluster of footprint.py (cluster3.py), reads the CPU
of ROLE's daemon (leader: id 1, the preferred server; follower: id 3) from schedstat
over WINDOW seconds, then samples it with `perf record -e cpu-clock -c PERIOD -g` for
SECS seconds and prints: the share of the samples by object (the kernel, electd, libc,
the vDSO), the share under each system call's libc wrapper (children: the kernel work
of the call included), and the TOP symbols by self share. Each share is also given as
us a heartbeat: the share times the CPU measured without perf, an estimate (sampling
at every PERIOD ns of CPU is not exact, and a symbol's samples include some skew).

  python3 bench/perf/sample.py BIN_DIR [leader|follower]

Env: HBT (100, ms), PORT (7661), WINDOW (20), SECS (30), PERIOD (5000, ns), TOP (30).
Needs root (perf on another process) and perf. Every process it starts is stopped by
its id; the state and sockets go to a temporary directory, perf's data to one in
/dev/shm (both removed at the end)."""
import atexit, os, re, shutil, subprocess as sp, sys, tempfile, time

import cluster3

BIN, ROLE, me = cluster3.args()
HBT = cluster3.env_num("HBT", 100, 10, 60000, int)
PORT = cluster3.env_num("PORT", 7661, 1024, 65533, int)
WINDOW = cluster3.env_num("WINDOW", 20.0, 1, 3600)
SECS = cluster3.env_num("SECS", 30.0, 1, 3600)
PERIOD = str(cluster3.env_num("PERIOD", 5000, 100, 10**9, int))
TOP = cluster3.env_num("TOP", 30, 1, 10000, int)
d = tempfile.mkdtemp(prefix="electd-sample-")
atexit.register(shutil.rmtree, d, True)  # removed however the script ends
# perf's data goes to memory: written to a disk, its block I/O completions run as
# softirqs on whatever task they interrupt, the daemon's samples included (a first
# try put 40-48 % of the leader's samples in handle_softirqs and the mq-deadline
# completion).
shm = tempfile.mkdtemp(prefix="electd-sample-", dir="/dev/shm") if os.path.isdir("/dev/shm") else d
if shm != d:
    # Removed however the script ends (a reader that closes the pipe early included).
    atexit.register(shutil.rmtree, shm, True)
conf = cluster3.write_conf(d, f"sample-{os.getpid()}", PORT, HBT)
procs = []


def cpu_ns(pid):
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        total += int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0])
    return total


try:
    for i in (1, 2, 3):
        cluster3.start(BIN, conf, d, i, procs)
    if not cluster3.wait_leader_in_turn(d, 300):
        sys.exit("server 1 did not lead with acknowledgements in turn within 30 s")
    time.sleep(5)
    pid = procs[me - 1].pid
    a = cpu_ns(pid)
    time.sleep(WINDOW)
    us_hb = (cpu_ns(pid) - a) / 1e3 / (WINDOW * 1000 / HBT)
    sp.run(["perf", "record", "-q", "-e", "cpu-clock", "-c", PERIOD, "-g", "-p", str(pid), "-o",
            f"{shm}/perf.data", "--", "sleep", str(SECS)], check=True)
finally:
    cluster3.stop(procs)


def report(*args):
    out = sp.run(["perf", "report", "-i", f"{shm}/perf.data", "--stdio", "-g", "none"] + list(args),
                 capture_output=True, text=True).stdout
    rows = []
    for l in out.splitlines():
        m = re.match(r"^\s+([\d.]+)%\s+(?:([\d.]+)%\s+)?(.*)$", l)
        if m:
            rows.append((float(m.group(1)), m.group(3).strip()))
    return rows


print(f"{ROLE}: {us_hb:.1f} us a heartbeat without perf (schedstat, {WINDOW:.0f} s at {HBT} ms); "
      f"shares of {SECS:.0f} s of cpu-clock samples every {PERIOD} ns")
print("by object:")
for share, name in report("--no-children", "--sort", "dso"):
    print(f"  {share:6.2f} %  {share * us_hb / 100:6.1f} us  {name}")
print("under each system call (children: its kernel work included):")
for share, name in report("--children", "--sort", "sym"):
    if re.search(r"\[\.\] (__libc_sendto|__recvmmsg|epoll_wait|__sendmmsg|__libc_recvfrom|timerfd_settime)$", name):
        print(f"  {share:6.2f} %  {share * us_hb / 100:6.1f} us  {name}")
print(f"top {TOP} symbols by self share ([k] kernel, [.] user):")
for share, name in report("--no-children", "--sort", "sym")[:TOP]:
    print(f"  {share:6.2f} %  {share * us_hb / 100:6.1f} us  {name[:110]}")

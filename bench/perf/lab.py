#!/usr/bin/env python3
"""Ad-hoc lab of issue 25's third round (BENCHMARKS.md, "Floor and attribution"): the
bench's three namespaces on a bridge, without the bench. Needs root, ip, ethtool, perf.

  python3 bench/perf/lab.py BENCH_BIN ELECTD EXP [OUT]

BENCH_BIN: the bench binary (target/release/deps/electd-HASH, the one with --idle-floor);
ELECTD: target/release/electd. EXP:
  attrib  the floor sender with silent, no, and ACKing receivers, default lab against
          threaded NAPI on every veth (ROUNDS, SECS): CPU us/heartbeat and wakeups/s of
          the processes, the napi/ threads and ksoftirqd.
  perf2   perf record -e cpu-clock -c PERIOD -g of an electd follower, then of a floor
          receiver that ACKs (ROUNDS, SECS, PERIOD ns, default 10000), into OUT/perf2;
          categories.py FILE sorts the samples by where they fell.
  trace   perf record of raw_syscalls:sys_enter/sys_exit and the context switches of an
          electd follower, then of a floor receiver that ACKs (ROUNDS, SECS): on-CPU
          time per heartbeat in user code and in each system call, from every event.
          HBT (ms, default 100) sets the heartbeat. ROLE=leader traces the leader against the floor leader (ACK) and sender (ACK and silent),
          and keepalived's master (its VRRP child) when keepalived is installed.
  ab      A/B of electd builds (ELECTD: comma-separated binaries), interleaved rounds
          (ROUNDS, SECS, HBT): CPU us per heartbeat of the leader and the followers.
Namespaces eflr<pid>h / eflr<pid>s<id>, 10.77.0.<id>/16, deleted at exit."""
import os, subprocess as sp, sys, time, glob, atexit, signal

PID = os.getpid()
P = f"eflr{PID}"
BENCH = sys.argv[1]          # bench binary with --idle-floor
ELECTD = sys.argv[2]
EXP = sys.argv[3]
OUT = sys.argv[4] if len(sys.argv) > 4 else "/tmp/flab"
procs = []
nss = []

def sh(*a, check=True):
    r = sp.run(a, stdout=sp.PIPE, stderr=sp.PIPE, text=True)
    if check and r.returncode != 0:
        raise SystemExit(f"failed {a}: {r.stderr}")
    return r.stdout

def cleanup():
    for p in procs:
        try: p.terminate(); p.wait(3)
        except Exception:
            try: p.kill()
            except Exception: pass
    for ns in nss:
        sh("ip", "netns", "del", ns, check=False)
atexit.register(cleanup)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))

def napi_threads():
    out = set()
    for d in glob.glob("/proc/[0-9]*/comm"):
        try:
            if open(d).read().startswith("napi/"): out.add(int(d.split("/")[2]))
        except OSError: pass
    return out

def lab(attrib):
    for ns in list(nss):
        sh("ip", "netns", "del", ns, check=False); nss.remove(ns)
    hub = P + "h"; sh("ip", "netns", "add", hub); nss.append(hub)
    sh("ip", "-n", hub, "link", "set", "lo", "up")
    sh("ip", "-n", hub, "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", hub, "link", "set", "br0", "up")
    napi = {}
    for i in (1, 2, 3):
        ns = f"{P}s{i}"; sh("ip", "netns", "add", ns); nss.append(ns)
        for x in ("all", "default"):
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{x}.disable_ipv6=1")
        sh("ip", "-n", hub, "link", "add", f"v{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "-n", hub, "link", "set", f"v{i}", "master", "br0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "addr", "add", f"10.77.0.{i}/16", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
    if attrib:
        for i in (1, 2, 3):
            for ns, dev, key in ((f"{P}s{i}", "eth0", f"eth0@{i}"), (hub, f"v{i}", f"v{i}")):
                b = napi_threads()
                sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "gro", "on", "tso", "off")
                sh("ip", "netns", "exec", ns, "sh", "-c", f"echo 1 > /sys/class/net/{dev}/threaded")
                time.sleep(0.05)
                napi[key] = sorted(napi_threads() - b)
    return napi

def status_of(d, i):
    """The `status` answer of server i, whose socket is d/i.sock."""
    import json, socket
    s = socket.socket(socket.AF_UNIX); s.connect(f"{d}/{i}.sock"); s.sendall(b"status\n")
    buf = b""
    while not buf.endswith(b"\n"): buf += s.recv(4096)
    s.close(); return json.loads(buf)

def ns(i): return f"{P}s{i}"

def start(cmd, i):
    p = sp.Popen(["ip", "netns", "exec", ns(i)] + cmd, stdin=sp.DEVNULL, stdout=sp.DEVNULL, stderr=sp.DEVNULL)
    procs.append(p); return p

def cluster(electd, d, hbt):
    """Starts a 3-server electd cluster (one per namespace, 10.77.0.1-3, unicast, heartbeat
    hbt ms) with its config, sockets and fresh state in d; returns the processes."""
    conf = f"{d}/electd.conf"
    text = f"cluster flab-{PID}\n" + "".join(f"server {i} 10.77.0.{i}:7400 name s{i}\n" for i in (1, 2, 3))
    text += f"unicast\nheartbeat {hbt}ms\nrtt 20ms\nmissed-heartbeats 3\nsocket {d}/{{id}}.sock\nstate {d}/{{id}}.state\n"
    open(conf, "w").write(text)
    for f in glob.glob(f"{d}/*.state"): os.remove(f)
    return [start([electd, "--config", conf, "--id", str(i), "--log-level", "info"], i) for i in (1, 2, 3)]

def stop(ps):
    for p in ps:
        p.terminate()
    for p in ps:
        try: p.wait(3)
        except Exception: p.kill()
        procs.remove(p)

def cpu(tids):
    t = 0; v = 0
    for tid in tids:
        for task in glob.glob(f"/proc/{tid}/task/*"):
            try:
                t += int(open(task + "/schedstat").read().split()[0])
                for l in open(task + "/status"):
                    if l.startswith("voluntary_ctxt_switches"): v += int(l.split()[1])
            except OSError: pass
    return t, v

def ksoftirqd():
    return [int(d.split("/")[2]) for d in glob.glob("/proc/[0-9]*/comm")
            if open(d).read().startswith("ksoftirqd/")]

def window(groups, secs):
    b = {k: cpu(v) for k, v in groups.items()}
    t0 = time.time(); time.sleep(secs); dt = time.time() - t0
    a = {k: cpu(v) for k, v in groups.items()}
    return {k: ((a[k][0] - b[k][0]) / 1e3 / (dt * 10), (a[k][1] - b[k][1]) / dt) for k in groups}  # us/hb at 100ms, wakeups/s

def floor(role_rx, hbt=100, sender="sender"):
    ps = [start([BENCH, "--idle-floor", sender, str(hbt), "10.77.0.1", "10.77.0.2", "10.77.0.3"], 1)]
    if role_rx:
        for i in (2, 3):
            ps.append(start([BENCH, "--idle-floor", role_rx, str(hbt), f"10.77.0.{i}"], i))
    time.sleep(0.7)
    return ps

def keepalived(d, hbt=100):
    """Three keepalived as bench/idle.rs starts them (VRRPv3, unicast peers, advert every
    hbt ms, server 1 the highest priority; the configuration is the bench binary's own,
    from `--idle-keepalived-conf`), config and pid files in d. Returns the processes and
    the pid of server 1's VRRP child (the one that sends the adverts), once it holds the
    virtual address 10.77.0.100."""
    ps = []
    for i in (1, 2, 3):
        conf = sh(BENCH, "--idle-keepalived-conf", str(i), str(hbt))
        open(f"{d}/keepalived-{i}.conf", "w").write(conf)
        ps.append(start(["keepalived", "-n", "-l", "-D", "-P", "-f", f"{d}/keepalived-{i}.conf",
                         "-p", f"{d}/keepalived-{i}.pid", "-r", f"{d}/vrrp-{i}.pid",
                         "-c", f"{d}/checkers-{i}.pid"], i))
    for _ in range(100):
        time.sleep(0.1)
        if "10.77.0.100/" in sh("ip", "-n", ns(1), "addr", "show", "dev", "eth0", check=False):
            break
    else:
        raise SystemExit("keepalived: server 1 never held 10.77.0.100")
    time.sleep(1.2)
    vrrp = int(open(f"{d}/vrrp-1.pid").read().split()[0])
    return ps, vrrp

def fmt(r):
    return " ".join(f"{k}={v[0]:.0f}us/{v[1]:.1f}w" for k, v in r.items())

if EXP == "attrib":
    secs = float(os.environ.get("SECS", "15")); rounds = int(os.environ.get("ROUNDS", "3"))
    for rnd in range(rounds):
        for attrib in (False, True):
            napi = lab(attrib)
            for rx in ("quiet", None, "ack"):
                ps = floor(rx)
                g = {"sender": [ps[0].pid]}
                if rx: g["rx2"] = [ps[1].pid]; g["rx3"] = [ps[2].pid]
                for k, v in napi.items(): g["napi_" + k] = v
                g["ksoftirqd"] = ksoftirqd()
                r = window(g, secs)
                print(f"round {rnd} attrib={int(attrib)} receivers={rx}: {fmt(r)}", flush=True)
                stop(ps)
elif EXP == "perf":
    secs = os.environ.get("SECS", "60")
    attrib = os.environ.get("ATTRIB", "0") == "1"
    napi = lab(attrib)
    d = f"{OUT}/perf-{'attrib' if attrib else 'default'}"
    os.makedirs(d, exist_ok=True)
    # electd cluster
    ps = cluster(ELECTD, d, 100)
    time.sleep(4)
    status = lambda i: status_of(d, i)
    roles = {i: status(i).get("role") for i in (1, 2, 3)}
    print("electd roles", roles, flush=True)
    fol = [i for i in (1, 2, 3) if roles[i] == "follower"][0]
    lead = [i for i in (1, 2, 3) if roles[i] == "leader"][0]
    for tag, pid in (("electd-follower", ps[fol - 1].pid), ("electd-leader", ps[lead - 1].pid)):
        pass
    fpid = ps[fol - 1].pid
    b = cpu([fpid])
    sh("perf", "record", "-q", "-e", "cpu-clock", "-F", "50000", "-g", "-p", str(fpid), "-o", f"{d}/electd-follower.data", "--", "sleep", secs)
    a = cpu([fpid])
    print(f"electd follower pid {fpid}: {(a[0]-b[0])/1e3/(float(secs)*10):.0f} us/hb under perf", flush=True)
    stop(ps)
    ps = floor("ack")
    rpid = ps[1].pid
    b = cpu([rpid])
    sh("perf", "record", "-q", "-e", "cpu-clock", "-F", "50000", "-g", "-p", str(rpid), "-o", f"{d}/floor-receiver.data", "--", "sleep", secs)
    a = cpu([rpid])
    print(f"floor ack receiver pid {rpid}: {(a[0]-b[0])/1e3/(float(secs)*10):.0f} us/hb under perf", flush=True)
    stop(ps)
    ps = floor("quiet")
    spid = ps[0].pid
    b = cpu([spid])
    sh("perf", "record", "-q", "-e", "cpu-clock", "-F", "50000", "-g", "-p", str(spid), "-o", f"{d}/floor-sender.data", "--", "sleep", str(float(secs) / 2))
    a = cpu([spid])
    print(f"floor quiet sender pid {spid}: {(a[0]-b[0])/1e3/(float(secs)/2*10):.0f} us/hb under perf", flush=True)
    stop(ps)

elif EXP == "perf2":
    secs = os.environ.get("SECS", "40"); rounds = int(os.environ.get("ROUNDS", "2")); freq = os.environ.get("FREQ", "25000")
    napi = lab(False)
    d = f"{OUT}/perf2"
    os.makedirs(d, exist_ok=True)
    status = lambda i: status_of(d, i)
    for rnd in range(rounds):
        ps = cluster(ELECTD, d, 100)
        time.sleep(4)
        roles = {i: status(i).get("role") for i in (1, 2, 3)}
        fol = [i for i in (1, 2, 3) if roles[i] == "follower"][0]
        fpid = ps[fol - 1].pid
        r = window({"f": [fpid]}, 20)
        sh("perf", "record", "-q", "-e", "cpu-clock", "-c", os.environ.get("PERIOD", "10000"), "-g", "-p", str(fpid), "-o", f"{d}/electd-follower-{rnd}.data", "--", "sleep", secs)
        roles2 = {i: status(i).get("role") for i in (1, 2, 3)}
        print(f"round {rnd} electd follower: {r['f'][0]:.0f} us/hb {r['f'][1]:.1f} w/s without perf; roles before {roles} after {roles2}", flush=True)
        stop(ps)
        ps = floor("ack")
        rpid = ps[1].pid
        r = window({"f": [rpid]}, 20)
        sh("perf", "record", "-q", "-e", "cpu-clock", "-c", os.environ.get("PERIOD", "10000"), "-g", "-p", str(rpid), "-o", f"{d}/floor-receiver-{rnd}.data", "--", "sleep", secs)
        print(f"round {rnd} floor ack receiver: {r['f'][0]:.0f} us/hb {r['f'][1]:.1f} w/s without perf", flush=True)
        stop(ps)
elif EXP == "ab":
    # A/B of electd builds: ELECTD is a comma-separated list of binaries; each round runs
    # each build in turn (interleaved) as a 3-server cluster at heartbeat 100 ms (HBT ms),
    # waits until the leader asks in turn, and reads schedstat over SECS: CPU us per
    # heartbeat of the leader and of the followers (mean of the two), then the medians.
    import statistics
    secs = float(os.environ.get("SECS", "15")); rounds = int(os.environ.get("ROUNDS", "3"))
    hbt = int(os.environ.get("HBT", "100"))
    lab(False)
    d = f"{OUT}/ab"
    os.makedirs(d, exist_ok=True)
    bins = ELECTD.split(",")
    status = lambda i: status_of(d, i)
    res = {b: {"leader": [], "follower": []} for b in bins}
    for rnd in range(rounds):
        for b in bins:
            ps = cluster(b, d, hbt)
            ldr = None
            # Bounded: the leader asks in turn after 16 clean heartbeats (SPARSE_AFTER),
            # plus the election: 20 s at 100 ms, 200 s at 1 s.
            for _ in range(200 * max(1, hbt // 100)):
                time.sleep(0.1)
                try:
                    st = {i: status(i) for i in (1, 2, 3)}
                except OSError:
                    continue
                l = [i for i in st if st[i].get("role") == "leader"]
                if l and st[l[0]].get("acks", "in_turn") in ("in_turn",):
                    ldr = l[0]; break
                if l and "acks" not in st[l[0]]:
                    ldr = l[0]; time.sleep(2); break
            if ldr is None:
                print(f"{b}: no leader asking in turn", flush=True); stop(ps); continue
            time.sleep(1)
            groups = {i: [ps[i - 1].pid] for i in (1, 2, 3)}
            r = window(groups, secs)
            scale = 100.0 / hbt
            lead = r[ldr][0] / scale
            fol = statistics.mean(r[i][0] / scale for i in (1, 2, 3) if i != ldr)
            res[b]["leader"].append(lead); res[b]["follower"].append(fol)
            print(f"round {rnd} {b}: leader {lead:.1f} us/hb, follower {fol:.1f} us/hb", flush=True)
            stop(ps)
    for b in bins:
        print(f"median {b}: leader {statistics.median(res[b]['leader']):.1f} follower {statistics.median(res[b]['follower']):.1f} (rounds {len(res[b]['leader'])})", flush=True)
elif EXP == "trace":
    # User against kernel time per system call, from tracepoints (raw_syscalls of one
    # pid, and its context switches, recorded by perf): every event, no sampling.
    secs = float(os.environ.get("SECS", "30")); rounds = int(os.environ.get("ROUNDS", "2"))
    hbt = int(os.environ.get("HBT", "100"))
    lab(False)
    d = f"{OUT}/trace"
    os.makedirs(d, exist_ok=True)
    import collections, re
    NR = {7: "poll", 0: "read", 1: "write", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg",
          232: "epoll_wait", 281: "epoll_pwait", 299: "recvmmsg", 307: "sendmmsg", 228: "clock_gettime", 286: "timerfd_settime"}
    status = lambda i: status_of(d, i)
    def trace(pid, secs):
        f = f"{d}/trace-{pid}.data"
        b = cpu([pid])
        sh("perf", "record", "-q", "-e", "raw_syscalls:sys_enter,raw_syscalls:sys_exit", "--switch-events",
           "-p", str(pid), "-o", f, "--", "sleep", str(secs))
        a = cpu([pid])
        text = sh("perf", "script", "-i", f, "-F", "time,event,trace", "--show-switch-events")
        return text, (a[0] - b[0]) / 1e3 / (secs * 1000 / hbt)
    def parse(text, pid):
        on = True; last = None; mode = "?"
        acc = collections.Counter(); calls = collections.Counter()
        for l in text.splitlines():
            m = re.search(r"(\d+\.\d+):\s+(PERF_RECORD_SWITCH\S*|raw_syscalls:sys_enter|raw_syscalls:sys_exit):?\s*(.*)", l)
            if not m: continue
            t = float(m.group(1)); ev = m.group(2); rest = m.group(3)
            if ev.startswith("PERF_RECORD_SWITCH"):
                if "OUT" in rest or "OUT" in ev:
                    if on and last is not None: acc[mode] += t - last
                    on = False
                else:
                    on = True; last = t
                continue
            if on and last is not None: acc[mode] += t - last
            last = t; on = True
            n = int(re.search(r"NR (\d+)", rest).group(1))
            if "enter" in ev:
                mode = "kernel: " + NR.get(n, str(n)); calls[NR.get(n, str(n))] += 1
            else:
                mode = "user"
        return acc, calls
    for rnd in range(rounds):
        ps = cluster(ELECTD, d, hbt)
        time.sleep(max(4, 8 * hbt / 1000))
        roles = {i: status(i).get("role") for i in (1, 2, 3)}
        role = os.environ.get("ROLE", "follower")
        runs = []
        if role == "leader":
            time.sleep(max(2, 20 * hbt / 1000))  # sparse acknowledgements start after 16 clean heartbeats
            ldr = [i for i in (1, 2, 3) if roles[i] == "leader"][0]
            lpid = ps[ldr - 1].pid
            runs.append(("electd leader", lpid) + trace(lpid, secs))
            stop(ps)
            # The floor of electd's leader's shape (role `leader`: one wakeup, one recvmmsg,
            # one LEAD in turn), then the VRRP-shaped sender with ACKing and quiet receivers.
            for tx, rx in (("leader", "ack"), ("sender", "ack"), ("sender", "quiet")):
                ps = floor(rx, hbt, sender=tx)
                runs.append((f"floor {tx} ({rx})", ps[0].pid) + trace(ps[0].pid, secs))
                stop(ps)
            # keepalived's master, in the same lab (its VRRP child, which sends).
            if sh("sh", "-c", "command -v keepalived", check=False).strip():
                ps, vrrp = keepalived(d, hbt)
                runs.append(("keepalived master (vrrp child)", vrrp) + trace(vrrp, secs))
                stop(ps)
                for f in glob.glob(f"{d}/*.pid"): os.remove(f)
        else:
            fol = [i for i in (1, 2, 3) if roles[i] == "follower"][0]
            fpid = ps[fol - 1].pid
            runs.append(("electd follower", fpid) + trace(fpid, secs))
            stop(ps)
            ps = floor("ack", hbt)
            runs.append(("floor receiver (ACK)", ps[1].pid) + trace(ps[1].pid, secs))
            stop(ps)
        for name, pid, text, us in runs:
            acc, calls = parse(text, pid)
            hb = secs * 1000 / hbt
            tot = sum(acc.values()) * 1e6 / hb
            print(f"round {rnd} {name}: schedstat {us:.1f} us/hb; traced on-CPU {tot:.1f} us/hb: " +
                  ", ".join(f"{k} {v * 1e6 / hb:.1f}" for k, v in acc.most_common()) +
                  " | calls/hb: " + ", ".join(f"{k} {v / hb:.2f}" for k, v in calls.most_common()), flush=True)

"""The 3-server loopback cluster that footprint.py, datalines.py and sample.py measure
one daemon of: its config, the start of a daemon (under valgrind if asked), a status
request, the wait for a leader asking in turn, and the stop of every process started
(by its id)."""
import json, os, socket, subprocess as sp, sys, time


def fail(msg):
    """Bad input: the message on stderr, exit status 2, nothing started."""
    print(f"{os.path.basename(sys.argv[0])}: {msg}", file=sys.stderr)
    sys.exit(2)


def args():
    """BIN_DIR and ROLE from `TOOL BIN_DIR [leader|follower]`, checked, with the id of
    ROLE's server (leader: 1, the preferred server; follower: 3)."""
    if not 2 <= len(sys.argv) <= 3:
        fail("usage: BIN_DIR [leader|follower] (BIN_DIR holds electd and electctl)")
    bin_dir, role = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "leader")
    if role not in ("leader", "follower"):
        fail(f"ROLE {role!r} is neither leader nor follower")
    for b in ("electd", "electctl"):
        if not os.access(os.path.join(bin_dir, b), os.X_OK):
            fail(f"{bin_dir}/{b} is missing or not executable")
    return bin_dir, role, (1 if role == "leader" else 3)


def env_num(name, default, lo, hi, kind=float):
    """The number in environment variable `name` (default when unset), within lo..hi."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        v = kind(raw)
    except ValueError:
        fail(f"{name}={raw!r} is not a number")
    if not lo <= v <= hi:
        fail(f"{name}={raw} is not within {lo}..{hi}")
    return v


def write_conf(d, name, port, hbt, extra=""):
    """Writes d/c.conf: servers 1-3 on 127.0.0.1:PORT.., server 1 at priority 200."""
    conf = f"{d}/c.conf"
    with open(conf, "w") as f:
        f.write(f"cluster {name}\n")
        for i in (1, 2, 3):
            f.write(f"server {i} 127.0.0.1:{port + i - 1} name s{i}" + (" priority 200" if i == 1 else "") + "\n")
        # RTT (ms, 20 by default): a slower tool (lackey) on a busy machine needs more,
        # or server 1 misses every round it is handed and never leads.
        rtt = env_num("RTT", 20, 1, 60000, int)
        f.write(f"unicast\nheartbeat {hbt}ms\nrtt {rtt}ms\nmissed-heartbeats 3\n{extra}"
                f"socket {d}/{{id}}.sock\nstate {d}/{{id}}.state\n")
    return conf


def start(bin_dir, conf, d, i, procs, wrap=()):
    """Starts server i's electd from bin_dir, under the command `wrap` if one is given
    (valgrind and its options), its output to d/i.log; appends it to procs."""
    cmd = list(wrap) + [f"{bin_dir}/electd", "--config", conf, "--id", str(i)]
    p = sp.Popen(cmd, stdin=sp.DEVNULL, stdout=open(f"{d}/{i}.log", "w"), stderr=sp.STDOUT)
    procs.append(p)
    return p


def status(d, i, timeout=2):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(f"{d}/{i}.sock")
    s.sendall(b"status\n")
    buf = b""
    while not buf.endswith(b"\n"):
        buf += s.recv(4096)
    s.close()
    return json.loads(buf)


def wait_leader_in_turn(d, tries):
    """True once server 1 leads with acknowledgements in turn (tries x 100 ms at most)."""
    for _ in range(tries):
        time.sleep(0.1)
        try:
            st = status(d, 1, 5)
        except (OSError, ValueError):
            continue
        if st.get("role") == "leader" and st.get("acks") == "in_turn":
            return True
    return False


def stop(procs):
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(10)
        except sp.TimeoutExpired:
            p.kill()

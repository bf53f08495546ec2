"""The 3-server loopback cluster that footprint.py, datalines.py and sample.py measure
one daemon of: its config, the start of a daemon (under valgrind if asked), a status
request, the wait for a leader asking in turn, and the stop of every process started
(by its id)."""
import json, socket, subprocess as sp, time


def write_conf(d, name, port, hbt, extra=""):
    """Writes d/c.conf: servers 1-3 on 127.0.0.1:PORT.., server 1 at priority 200."""
    conf = f"{d}/c.conf"
    with open(conf, "w") as f:
        f.write(f"cluster {name}\n")
        for i in (1, 2, 3):
            f.write(f"server {i} 127.0.0.1:{port + i - 1} name s{i}" + (" priority 200" if i == 1 else "") + "\n")
        f.write(f"unicast\nheartbeat {hbt}ms\nrtt 20ms\nmissed-heartbeats 3\n{extra}"
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

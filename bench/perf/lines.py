#!/usr/bin/env python3
"""Where the code lines of a heartbeat at rest are (issue 25, tenth round): reads the
instruction addresses footprint.py wrote (LINES_OUT=FILE), maps each through addr2line
(inlined frames included) and counts the distinct 64-byte code lines by the innermost
function of this crate that the instruction belongs to (or, with no frame of ours, by
the outermost frame), and optionally by our source line. Deterministic, like
footprint.py: two builds compare without a quiet machine.

  LINES_OUT=/tmp/a.txt python3 bench/perf/footprint.py target/release leader
  python3 bench/perf/lines.py /tmp/a.txt target/release/electd [TOP_FUNCTIONS [TOP_SOURCE_LINES]]

Needs binutils (addr2line) and a binary with debug info (the release profile has it)."""
import collections
import re
import subprocess
import sys

addrs = [l.strip() for l in open(sys.argv[1]) if l.strip()]
binary = sys.argv[2]
top = int(sys.argv[3]) if len(sys.argv) > 3 else 60
top_src = int(sys.argv[4]) if len(sys.argv) > 4 else 0
out = subprocess.run(["addr2line", "-a", "-i", "-f", "-C", "-e", binary] + addrs,
                     capture_output=True, text=True, check=True).stdout.splitlines()
chains = {}
cur = None
i = 0
while i < len(out):
    if out[i].startswith("0x"):
        cur = int(out[i], 16)
        chains[cur] = []
        i += 1
        continue
    chains[cur].append((out[i], out[i + 1]))
    i += 2


def short(f):
    f = re.sub(r"<impl [^>]*>::", "", f)
    return re.sub(r"::\{\{closure\}\}", "{c}", f)[:80]


def ours(loc):
    return "/src/" in loc and "/rustc/" not in loc and "/.cargo/" not in loc


by_fn = collections.defaultdict(set)
by_src = collections.defaultdict(set)
for a, chain in chains.items():
    own = [(f, l) for f, l in chain if ours(l)]
    if own:
        by_fn[short(own[0][0])].add(a >> 6)
        by_src[re.sub(r"^.*?/src/", "src/", own[0][1]).split(" ")[0]].add(a >> 6)
    elif chain:
        by_fn["[not ours] " + short(chain[-1][0])].add(a >> 6)
print(f"{len(addrs)} instructions, {len({a >> 6 for a in chains})} distinct code lines")
print("lines  innermost function of this crate")
for k, v in sorted(by_fn.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:top]:
    print(f"{len(v):5d}  {k}")
if top_src:
    print("lines  source line")
    for k, v in sorted(by_src.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:top_src]:
        print(f"{len(v):5d}  {k}")

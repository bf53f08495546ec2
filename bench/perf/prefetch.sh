#!/bin/sh
# The A/B of bench/perf/prefetch.c (issue 25, eighteenth round): the same electd with
# epoll_wait(2) wrapped, without (A) and with (B) a prefetch of every code line the
# leader's heartbeat at rest touches (footprint.py's list, taken first from this
# binary), as 3-server clusters in bench/perf/lab.py's namespaces, interleaved rounds.
#   sh bench/perf/prefetch.sh BENCH_BIN BIN_DIR
# BIN_DIR holds electd and electctl (target/release). Env passed on to lab.py: HBT (ms,
# default here 1000), SECS (30), ROUNDS (6). Needs root, ip, valgrind, binutils, a C
# compiler. Writes to a temporary directory, removed at exit.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 BENCH_BIN BIN_DIR" >&2; exit 2; }
bench=$1 bindir=$(realpath "$2")
[ -x "$bindir/electd" ] || { echo "$0: no electd in $bindir" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
d=$(mktemp -d /tmp/electd-prefetch.XXXXXX)
trap 'rm -rf "$d"' EXIT
cc -O2 -shared -fPIC -o "$d/pf.so" "$here/prefetch.c" -ldl
SECS=6 LINES_OUT="$d/addrs" python3 "$here/footprint.py" "$bindir" leader >/dev/null
python3 -c 'import sys
ls = sorted({int(l, 16) >> 6 << 6 for l in open(sys.argv[1]) if l.strip()})
open(sys.argv[2], "w").write("".join("%x\n" % x for x in ls))
print("%d code lines to prefetch" % len(ls))' "$d/addrs" "$d/lines"
printf '#!/bin/sh\nLD_PRELOAD=%s/pf.so exec %s "$@"\n' "$d" "$bindir/electd" > "$d/electd-a"
printf '#!/bin/sh\nPF_LINES=%s/lines LD_PRELOAD=%s/pf.so exec %s "$@"\n' "$d" "$d" "$bindir/electd" > "$d/electd-b"
chmod +x "$d/electd-a" "$d/electd-b"
HBT=${HBT:-1000} SECS=${SECS:-30} ROUNDS=${ROUNDS:-6} \
  python3 "$here/lab.py" "$bench" "$d/electd-a,$d/electd-b" ab "$d/lab"

#!/bin/sh
# The A/B of bench/perf/coldlines.c (issue 25, seventeenth round): the same electd with
# sendto(2) wrapped, without (A) and with (B) LINES extra cold code lines before each
# send, as 3-server clusters in bench/perf/lab.py's namespaces, interleaved rounds.
#   sh bench/perf/coldlines.sh BENCH_BIN ELECTD [LINES]
# Env passed on to lab.py: HBT (ms, default here 1000), SECS (30), ROUNDS (6).
# Needs root, ip, a C compiler. Writes to a temporary directory, removed at exit.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 BENCH_BIN ELECTD [LINES]" >&2; exit 2; }
bench=$1 electd=$(realpath "$2") lines=${3:-200}
case $lines in ''|*[!0-9]*) echo "$0: LINES must be a number" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
d=$(mktemp -d /tmp/electd-coldlines.XXXXXX)
trap 'rm -rf "$d"' EXIT
cc -O2 -shared -fPIC -o "$d/a.so" "$here/coldlines.c" -ldl
cc -O2 -shared -fPIC -DCHAIN="\"$lines\"" -o "$d/b.so" "$here/coldlines.c" -ldl
for v in a b; do
  printf '#!/bin/sh\nLD_PRELOAD=%s/%s.so exec %s "$@"\n' "$d" "$v" "$electd" > "$d/electd-$v"
  chmod +x "$d/electd-$v"
done
HBT=${HBT:-1000} SECS=${SECS:-30} ROUNDS=${ROUNDS:-6} \
  python3 "$here/lab.py" "$bench" "$d/electd-a,$d/electd-b" ab "$d/lab"

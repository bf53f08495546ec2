#!/usr/bin/env bash
# Runs a three-server electd cluster on this machine (conf/local-3.conf).
#   conf/local-3.sh          build, start three servers, show who leads
#   conf/local-3.sh status   show every server's view
#   conf/local-3.sh stop     stop them (SIGTERM: the leader resigns first)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=/tmp/electd-local
bin=target/release
status() {
  for id in 1 2 3; do
    printf '%s: ' "$id"
    "$bin/electctl" --socket "$dir/$id.sock" status --json 2>&1 || true
  done
}
case "${1:-start}" in
  start)
    cargo build --release --quiet
    mkdir -p "$dir"
    for id in 1 2 3; do
      if [ -f "$dir/$id.pid" ] && kill -0 "$(cat "$dir/$id.pid")" 2>/dev/null; then
        echo "server $id already runs (pid $(cat "$dir/$id.pid"))"; continue
      fi
      "$bin/electd" --config conf/local-3.conf --id "$id" 2>"$dir/$id.log" &
      echo $! > "$dir/$id.pid"
    done
    for _ in $(seq 50); do
      leader=$("$bin/electctl" --socket "$dir/1.sock" leader 2>/dev/null || true)
      [ -n "$leader" ] && [ "$leader" != none ] && break
      sleep 0.1
    done
    status
    echo
    echo "leader: ${leader:-none}. Try:"
    echo "  $bin/electctl --socket $dir/2.sock watch                        # follow changes"
    echo "  kill -9 \$(cat $dir/\$($bin/electctl --socket $dir/2.sock leader).pid)   # crash the leader"
    echo "  $0 status | $0 stop                                            # logs: $dir/N.log"
    ;;
  status) status ;;
  stop)
    for id in 1 2 3; do
      [ -f "$dir/$id.pid" ] && kill "$(cat "$dir/$id.pid")" 2>/dev/null || true
      rm -f "$dir/$id.pid"
    done
    ;;
  *) echo "usage: $0 [start|status|stop]" >&2; exit 2 ;;
esac

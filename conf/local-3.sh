#!/usr/bin/env bash
# Runs a three-server electd cluster on this machine (conf/local-3.conf).
#   conf/local-3.sh              build, start three servers, show who leads
#   conf/local-3.sh status       show every server's view
#   conf/local-3.sh watch        follow changes through a server that does not lead
#                                (a watcher on the leader's socket dies with it)
#   conf/local-3.sh kill-leader  crash the leader (SIGKILL): watch the failover
#   conf/local-3.sh stop         stop them (SIGTERM: the leader resigns first)
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
# The leader as the running servers see it (empty while none is known).
leader() {
  for id in 1 2 3; do
    l=$("$bin/electctl" --socket "$dir/$id.sock" leader 2>/dev/null || true)
    if [ -n "$l" ] && [ "$l" != none ]; then echo "$l"; return; fi
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
      # No terminal or pipe of ours: `conf/local-3.sh | grep ...` ends when we do.
      "$bin/electd" --config conf/local-3.conf --id "$id" </dev/null >"$dir/$id.log" 2>&1 &
      echo $! > "$dir/$id.pid"
    done
    for _ in $(seq 50); do
      l=$(leader)
      [ -n "$l" ] && break
      sleep 0.1
    done
    status
    echo
    echo "leader: ${l:-none}. Try, in another terminal:"
    echo "  $0 watch          # follow changes (through a server that does not lead)"
    echo "then here:"
    echo "  $0 kill-leader    # crash the leader: a new one within about 0.3 s"
    echo "  $0 status | $0 stop       # logs: $dir/N.log"
    ;;
  status) status ;;
  watch)
    l=$(leader)
    for id in 1 2 3; do
      if [ "$id" != "$l" ] && [ -S "$dir/$id.sock" ]; then
        echo "watching through server $id (the leader is ${l:-unknown})" >&2
        exec "$bin/electctl" --socket "$dir/$id.sock" watch
      fi
    done
    echo "no server runs: $0 first" >&2; exit 1
    ;;
  kill-leader)
    l=$(leader)
    [ -n "$l" ] || { echo "no leader known" >&2; exit 1; }
    kill -9 "$(cat "$dir/$l.pid")"
    echo "killed server $l (SIGKILL)"
    ;;
  stop)
    for id in 1 2 3; do
      [ -f "$dir/$id.pid" ] && kill "$(cat "$dir/$id.pid")" 2>/dev/null || true
      rm -f "$dir/$id.pid"
    done
    ;;
  *) echo "usage: $0 [start|status|watch|kill-leader|stop]" >&2; exit 2 ;;
esac

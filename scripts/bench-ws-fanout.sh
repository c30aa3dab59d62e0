#!/usr/bin/env bash
# WebSocket publish/subscribe fan-out: one message to SUBSCRIBERS members of a chat room.
# UCP is bin/example_ws_chat (ucp::ws::PubSub across its two worker loops: the members'
# connections land on both); the peer is Node's `ws` broadcasting the same way
# (bench/peers/node_ws_fanout.js). The load is bin/ws_fanout_client: SUBSCRIBERS connections
# join /chat/bench, one more publishes SIZE-byte texts, each once every subscriber has all but
# the last WINDOW. The figure is messages delivered per server-CPU-second (utime + stime of the
# server process from /proc over the measured interval), beside deliveries per second. Each
# cell runs RUNS times with the servers interleaved (ucp node ucp node ...); the report gives
# medians and the ratio of the medians.
#
#   scripts/bench-ws-fanout.sh                       # 10,000 subscribers, 64 B, 3 runs
#   RUNS=1 DURATION=2 SUBSCRIBERS=200 scripts/bench-ws-fanout.sh     # a smoke run
#
# Environment: RUNS [3], DURATION [10] s measured per run (after WARMUP [2] s), SUBSCRIBERS
# [10000], SIZES ["64"], WINDOW [4], SERVERS ["ucp node"], SERVER_CPUS [0-1] (UCP's two workers
# and Node's one thread alike), CLIENT_CPUS [0-1], CLIENT_THREADS [2], UCP_BIN_DIR [bin], OUT
# [bench/results/<date>-ws-fanout.md]. Needs bin/example_ws_chat and bin/ws_fanout_client
# (cmake --build build/release --target example_ws_chat ws_fanout_client) and node with the ws
# module (scripts/install-deps.sh interop). Run it on an otherwise idle machine.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${UCP_BIN_DIR:-bin}
RUNS=${RUNS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
SUBSCRIBERS=${SUBSCRIBERS:-10000}
SIZES=${SIZES:-64}
WINDOW=${WINDOW:-4}
SERVERS=${SERVERS:-ucp node}
SERVER_CPUS=${SERVER_CPUS:-0-1}
CLIENT_CPUS=${CLIENT_CPUS:-0-1}
CLIENT_THREADS=${CLIENT_THREADS:-2}
OUT=${OUT:-bench/results/$(date +%Y-%m-%d)-ws-fanout.md}
export NODE_PATH="$ROOT/build/npm/node_modules:/usr/share/nodejs"

die() {
  echo "bench-ws-fanout: $*" >&2
  exit 1
}
for tool in example_ws_chat ws_fanout_client; do
  [ -x "$BIN/$tool" ] || die "$BIN/$tool not found (cmake --build build/release --target $tool)"
done
command -v taskset >/dev/null || die "taskset not found (util-linux)"
if [[ " $SERVERS " == *" node "* ]]; then
  node -e "require('ws')" 2>/dev/null || die "node cannot load ws (scripts/install-deps.sh interop)"
fi
# Each side holds SUBSCRIBERS sockets.
ulimit -n $((SUBSCRIBERS * 2 + 1024)) 2>/dev/null || die "ulimit -n $((SUBSCRIBERS * 2 + 1024)) refused"

WORK=$(mktemp -d)
SERVER_PID=
stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  for _ in $(seq 1 200); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.05; done
  kill -KILL "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
}
trap 'stop_server; rm -rf "$WORK"' EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# start_server NAME: starts it on a free port pinned to SERVER_CPUS; sets SERVER_PID and PORT.
start_server() {
  local name=$1
  PORT=$(free_port)
  case $name in
    ucp)
      taskset -c "$SERVER_CPUS" "$BIN/example_ws_chat" --set server.port="$PORT" \
        --set server.thread_num=2 --set server.max_connections=$((SUBSCRIBERS + 100)) \
        --set log.console=true >"$WORK/server.log" 2>&1 &
      ;;
    node)
      taskset -c "$SERVER_CPUS" node bench/peers/node_ws_fanout.js "$PORT" >"$WORK/server.log" 2>&1 &
      ;;
    *) die "unknown server $name" ;;
  esac
  SERVER_PID=$!
  for _ in $(seq 1 200); do
    ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q LISTEN && return 0
    sleep 0.05
  done
  die "$name did not start: $(tail -3 "$WORK/server.log")"
}

echo "bench-ws-fanout: $RUNS runs x ${DURATION} s (+${WARMUP} s warm-up), $SUBSCRIBERS subscribers," \
  "sizes $SIZES, window $WINDOW, servers $SERVERS, server cpus $SERVER_CPUS, client cpus" \
  "$CLIENT_CPUS, $(nproc) CPUs, kernel $(uname -r)" >&2
: >"$WORK/results"
for size in $SIZES; do
  for run in $(seq "$RUNS"); do
    for server in $SERVERS; do
      start_server "$server"
      line=$(timeout $((DURATION * 3 + 120)) taskset -c "$CLIENT_CPUS" "$BIN/ws_fanout_client" \
        -h 127.0.0.1 -p "$PORT" -c "$SUBSCRIBERS" -s "$size" -d "$DURATION" -w "$WARMUP" \
        -t "$CLIENT_THREADS" --window "$WINDOW" --server-pid "$SERVER_PID" \
        2>"$WORK/client.err" | grep '^result' || true)
      stop_server
      [ -n "$line" ] || line="result delivered=0 errors=-1"
      echo "$size $server $run $line" >>"$WORK/results"
      echo "  $size B to $SUBSCRIBERS subscribers, $server run $run: $line" >&2
    done
  done
done

mkdir -p "$(dirname "$OUT")"
python3 - "$WORK/results" "$RUNS" "$DURATION" "$SERVERS" "$SUBSCRIBERS" >"$OUT" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    size, server, run, _, *fields = line.split()
    values = dict(f.split("=", 1) for f in fields)
    rows.setdefault((int(size), server), []).append(values)
servers = sys.argv[4].split()
names = {"ucp": "UCP (PubSub, 2 workers)", "node": "Node ws"}
def med(vs, key):
    xs = [float(v[key]) for v in vs if key in v and float(v.get("delivered", 0)) > 0]
    return statistics.median(xs) if xs else float("nan")
print(f"Fan-out to {sys.argv[5]} subscribers. Runs per cell: {sys.argv[2]}, {sys.argv[3]} s "
      "each; medians. Figure: messages delivered per server-CPU-second.\n")
print("| size | server | published/s | delivered/s | server CPU % | delivered/CPU-s | errors |")
print("|---:|---|---:|---:|---:|---:|---:|")
for (size, server), vs in sorted(rows.items(), key=lambda kv: (kv[0][0], servers.index(kv[0][1]))):
    secs = med(vs, "seconds")
    errors = sum(int(v.get("errors", 0)) for v in vs)
    print(f"| {size} | {names[server]} | {med(vs, 'published') / secs:.0f} "
          f"| {med(vs, 'deliveries_per_s'):.0f} | {100 * med(vs, 'server_cpu_s') / secs:.0f} "
          f"| {med(vs, 'deliveries_per_server_cpu_s'):.0f} | {errors} |")
print()
print("| size | UCP / Node delivered/CPU-s | UCP / Node delivered/s |")
print("|---:|---:|---:|")
for size in sorted({s for s, _ in rows}):
    def m(server, key):
        return med(rows.get((size, server), []), key)
    def ratio(a, b):
        return f"{a / b:.2f}x" if b and b == b and a == a else "n/a"
    print(f"| {size} | {ratio(m('ucp', 'deliveries_per_server_cpu_s'), m('node', 'deliveries_per_server_cpu_s'))} "
          f"| {ratio(m('ucp', 'deliveries_per_s'), m('node', 'deliveries_per_s'))} |")
PY
echo "bench-ws-fanout: report in $OUT" >&2
cat "$OUT"

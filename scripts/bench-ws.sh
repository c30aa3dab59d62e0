#!/usr/bin/env bash
# WebSocket echo: UCP (bin/proactor_test, server.protocol = websocket) beside a Boost.Beast
# coroutine server (bin/beast_ws_echo) and a Node `ws` server (bench/peers/node_ws_echo.js),
# in the same run. The load is UCP's own WebSocket client (bin/ws_bench_client): CONNS
# connections each keep one binary message of SIZE bytes in flight. Server pinned to one CPU,
# client to the other; the figure is messages per server-CPU-second (utime + stime of the
# server process from /proc over the measured interval), with p99 round-trip latency. Each
# cell runs RUNS times with the servers interleaved (ucp beast node ucp beast node ...), so that
# drift in the machine's load hits all alike; the report gives medians and the ratios of the
# medians.
#
#   scripts/bench-ws.sh                         # 64 B and 4 KiB x 100 and 1000 conns, 3 runs
#   RUNS=5 DURATION=10 SIZES="64" CONNS_LIST="100" scripts/bench-ws.sh
#
# Environment: RUNS [3], DURATION [5] s measured per run (after WARMUP [1] s), SIZES ["64
# 4096"], CONNS_LIST ["100 1000"], SERVERS ["ucp beast node"], SERVER_CPUS [0], CLIENT_CPUS [1],
# CLIENT_THREADS [1], UCP_BIN_DIR [bin], OUT [bench/results/<date>-ws.md]. Needs
# bin/proactor_test, bin/ws_bench_client and bin/beast_ws_echo (cmake -DUCP_BENCH=ON, then
# --target proactor_test ws_bench_client beast_ws_echo), node with the ws module
# (scripts/install-deps.sh interop). Run it on an otherwise idle machine.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${UCP_BIN_DIR:-bin}
RUNS=${RUNS:-3}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
SIZES=${SIZES:-64 4096}
CONNS_LIST=${CONNS_LIST:-100 1000}
SERVERS=${SERVERS:-ucp beast node}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
CLIENT_THREADS=${CLIENT_THREADS:-1}
OUT=${OUT:-bench/results/$(date +%Y-%m-%d)-ws.md}
export NODE_PATH="$ROOT/build/npm/node_modules:/usr/share/nodejs"

die() {
  echo "bench-ws: $*" >&2
  exit 1
}
for tool in proactor_test ws_bench_client beast_ws_echo; do
  [ -x "$BIN/$tool" ] || die "$BIN/$tool not found (cmake -DUCP_BENCH=ON; cmake --build build/release --target $tool)"
done
command -v taskset >/dev/null || die "taskset not found (util-linux)"
if [[ " $SERVERS " == *" node "* ]]; then
  node -e "require('ws')" 2>/dev/null || die "node cannot load ws (scripts/install-deps.sh interop)"
fi
ulimit -n 65536 2>/dev/null || true

WORK=$(mktemp -d)
SERVER_PID=
stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.05; done
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
      taskset -c "$SERVER_CPUS" "$BIN/proactor_test" config/ucp.conf --set server.port="$PORT" \
        --set server.ip=127.0.0.1 --set server.protocol=websocket --set server.thread_num=1 \
        --set server.read_timeout_ms=0 --set log.console=true --set log.file= \
        >"$WORK/server.log" 2>&1 &
      ;;
    beast) taskset -c "$SERVER_CPUS" "$BIN/beast_ws_echo" -p "$PORT" >"$WORK/server.log" 2>&1 & ;;
    node)
      taskset -c "$SERVER_CPUS" node bench/peers/node_ws_echo.js "$PORT" >"$WORK/server.log" 2>&1 &
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

echo "bench-ws: $RUNS runs x ${DURATION} s (+${WARMUP} s warm-up), sizes $SIZES, conns $CONNS_LIST," \
  "servers $SERVERS, server cpus $SERVER_CPUS, client cpus $CLIENT_CPUS, $(nproc) CPUs," \
  "kernel $(uname -r)" >&2
: >"$WORK/results"
for size in $SIZES; do
  for conns in $CONNS_LIST; do
    for run in $(seq "$RUNS"); do
      for server in $SERVERS; do
        start_server "$server"
        line=$(timeout $((DURATION * 3 + 60)) taskset -c "$CLIENT_CPUS" "$BIN/ws_bench_client" -h 127.0.0.1 -p "$PORT" -c "$conns" \
          -s "$size" -d "$DURATION" -w "$WARMUP" -t "$CLIENT_THREADS" --server-pid "$SERVER_PID" \
          2>"$WORK/client.err" | grep '^result' || true)
        stop_server
        [ -n "$line" ] || line="result messages=0 errors=-1"
        echo "$size $conns $server $run $line" >>"$WORK/results"
        echo "  $size B x $conns conns, $server run $run: $line" >&2
      done
    done
  done
done

mkdir -p "$(dirname "$OUT")"
python3 - "$WORK/results" "$RUNS" "$DURATION" "$SERVERS" >"$OUT" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    size, conns, server, run, _, *fields = line.split()
    values = dict(f.split("=", 1) for f in fields)
    rows.setdefault((int(size), int(conns), server), []).append(values)
servers = sys.argv[4].split()
names = {"ucp": "UCP", "beast": "Boost.Beast", "node": "Node ws"}
def med(vs, key):
    xs = [float(v[key]) for v in vs if key in v and float(v.get("messages", 0)) > 0]
    return statistics.median(xs) if xs else float("nan")
print(f"Runs per cell: {sys.argv[2]}, {sys.argv[3]} s each; medians. Figure: messages per "
      "server-CPU-second (msgs/CPU-s); p99 round-trip in microseconds.\n")
print("| size | conns | server | msgs/s | server CPU % | msgs/CPU-s | p99 µs | errors |")
print("|---:|---:|---|---:|---:|---:|---:|---:|")
for (size, conns, server), vs in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1], servers.index(kv[0][2]))):
    secs = med(vs, "seconds")
    cpu = med(vs, "server_cpu_s")
    errors = sum(int(v.get("errors", 0)) for v in vs)
    print(f"| {size} | {conns} | {names[server]} | {med(vs, 'msgs_per_s'):.0f} | {100 * cpu / secs:.0f} "
          f"| {med(vs, 'msgs_per_server_cpu_s'):.0f} | {med(vs, 'p99_us'):.0f} | {errors} |")
print()
print("| size | conns | UCP / Beast msgs/CPU-s | UCP / Node msgs/CPU-s | p99 UCP / Beast | p99 UCP / Node |")
print("|---:|---:|---:|---:|---:|---:|")
for size, conns in sorted({(s, c) for s, c, _ in rows}):
    def m(server, key):
        return med(rows.get((size, conns, server), []), key)
    def ratio(a, b):
        return f"{a / b:.2f}x" if b and b == b and a == a else "n/a"
    print(f"| {size} | {conns} | {ratio(m('ucp', 'msgs_per_server_cpu_s'), m('beast', 'msgs_per_server_cpu_s'))} "
          f"| {ratio(m('ucp', 'msgs_per_server_cpu_s'), m('node', 'msgs_per_server_cpu_s'))} "
          f"| {ratio(m('ucp', 'p99_us'), m('beast', 'p99_us'))} | {ratio(m('ucp', 'p99_us'), m('node', 'p99_us'))} |")
PY
echo "bench-ws: report in $OUT" >&2
cat "$OUT"

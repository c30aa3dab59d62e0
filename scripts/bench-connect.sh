#!/usr/bin/env bash
# Client-side connection churn: UCP's TcpClient (bin/bench_client --churn) against Boost.Asio's
# async_connect (bin/asio_connect), one client thread each, against the same bin/proactor_test
# echo server. Each cycle is the same for both: connect, write SIZE bytes, read and compare
# their echo, close with RST. Runs alternate UCP Asio UCP Asio ... so that drift in the
# machine's load hits both alike; the figure is connections per client-CPU-second (the client is
# what is compared; the server is shared), with the medians and the UCP/Asio ratio.
#
#   scripts/bench-connect.sh                  # 3 pairs of 5 s runs, 32 slots, 64 B, io_uring
#   RUNS=5 DURATION=10 CONNS=64 MODE=epoll scripts/bench-connect.sh
#
# Environment: RUNS [3] pairs, DURATION [5] s per run, CONNS [32] connection slots, SIZE [64]
# bytes echoed per connection, MODE [uring] bench_client's backend (uring: --uring; epoll: the
# default mode), THREAD_NUM [1] server workers, SERVER_CPUS [0] and CLIENT_CPUS [1] (taskset
# lists), NICE [-10 as root, else 0] (server and clients, as benchmark.sh), UCP_BIN_DIR [bin]. Needs bin/proactor_test, bin/bench_client and bin/asio_connect
# (cmake -DUCP_BENCH=ON, then --target proactor_test bench_client asio_connect). Run it on an
# otherwise idle machine: other load makes the numbers noise.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${UCP_BIN_DIR:-bin}
RUNS=${RUNS:-3}
DURATION=${DURATION:-5}
CONNS=${CONNS:-32}
SIZE=${SIZE:-64}
MODE=${MODE:-uring}
THREAD_NUM=${THREAD_NUM:-1}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
if [ "$(id -u)" -eq 0 ]; then NICE=${NICE:--10}; else NICE=${NICE:-0}; fi

die() {
  echo "bench-connect: $*" >&2
  exit 1
}
for tool in proactor_test bench_client asio_connect; do
  [ -x "$BIN/$tool" ] || die "$BIN/$tool not found (cmake -DUCP_BENCH=ON; cmake --build build/release --target $tool)"
done
case $MODE in
  uring) MODE_FLAG=(--uring) ;;
  epoll) MODE_FLAG=() ;;
  *) die "MODE must be uring or epoll" ;;
esac
command -v taskset >/dev/null || die "taskset not found (util-linux)"
command -v python3 >/dev/null || die "python3 not found"

. scripts/lib/bench-common.sh  # pinned, stop_server, cpu_ticks (the working directory is the root)

WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill -TERM "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

pinned "$SERVER_CPUS" "$BIN/proactor_test" config/ucp.conf --set server.port=0 \
  --set server.ip=127.0.0.1 --set server.thread_num="$THREAD_NUM" --set log.console=true \
  --set log.file= --set log.level=INFO >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
PORT=
for _ in $(seq 100); do
  PORT=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' "$WORK/server.log" | head -1)
  [ -n "$PORT" ] && break
  sleep 0.05
done
[ -n "$PORT" ] || die "the server did not start: $(tail -3 "$WORK/server.log")"

# run_one CLIENT RUN: one client run; appends "CLIENT RUN JSON" to the results.
run_one() {
  local client=$1 run=$2 json
  if [ "$client" = ucp ]; then
    json=$(pinned "$CLIENT_CPUS" "$BIN/bench_client" -h 127.0.0.1 -p "$PORT" -c "$CONNS" \
      -s "$SIZE" -d "$DURATION" --churn --json "${MODE_FLAG[@]}" 2>"$WORK/$client-$run.err") ||
      echo "bench-connect: ucp run $run: bench_client reported errors" >&2
  else
    json=$(pinned "$CLIENT_CPUS" "$BIN/asio_connect" -h 127.0.0.1 -p "$PORT" -c "$CONNS" \
      -s "$SIZE" -d "$DURATION" --json 2>"$WORK/$client-$run.err") ||
      echo "bench-connect: asio run $run: asio_connect reported errors" >&2
  fi
  [ -n "$json" ] || die "$client run $run: no result: $(tail -3 "$WORK/$client-$run.err")"
  echo "$client $run $json" >>"$WORK/results"
  echo "  $client run $run: $(echo "$json" | python3 -c 'import json, sys
r = json.load(sys.stdin)
n = r.get("requests", r.get("connections", 0))
print("%.0f conn/s, %.0f per client-CPU-s, errors %d" % (r["conns_per_s"], n / r["client_cpu_s"] if r["client_cpu_s"] > 0 else 0, r["errors"]))')" >&2
}

echo "bench-connect: $RUNS pairs x ${DURATION} s, $CONNS slots, $SIZE B, bench_client on $MODE," \
  "server cpus $SERVER_CPUS, client cpus $CLIENT_CPUS, nice $NICE, kernel $(uname -r)" >&2
for run in $(seq "$RUNS"); do
  run_one ucp "$run"
  run_one asio "$run"
done

python3 - "$WORK/results" "$MODE" <<'EOF'
import json, statistics, sys
rows = []
for line in open(sys.argv[1]):
    client, run, text = line.split(" ", 2)
    rows.append((client, int(run), json.loads(text)))
def count(r):
    return r.get("requests", r.get("connections", 0))
def per_cpu(r):
    return count(r) / r["client_cpu_s"] if r["client_cpu_s"] > 0 else float("nan")
names = {"ucp": f"UCP TcpClient ({sys.argv[2]})", "asio": "Boost.Asio async_connect"}
print("| run | client | conn/s | client CPU s | conn per client-CPU-s | errors |")
print("|---|---|---:|---:|---:|---:|")
for client, run, r in rows:
    print(f"| {run} | {names[client]} | {r['conns_per_s']:.0f} | {r['client_cpu_s']:.2f} "
          f"| {per_cpu(r):.0f} | {r['errors']} |")
med = {}
for client in ("ucp", "asio"):
    rs = [r for c, _, r in rows if c == client]
    med[client] = (statistics.median(r["conns_per_s"] for r in rs),
                   statistics.median(per_cpu(r) for r in rs))
print()
print("| median | conn/s | conn per client-CPU-s |")
print("|---|---:|---:|")
for client in ("ucp", "asio"):
    print(f"| {names[client]} | {med[client][0]:.0f} | {med[client][1]:.0f} |")
u, a = med["ucp"], med["asio"]
print(f"| UCP / Asio | {u[0] / a[0]:.2f}x | {u[1] / a[1]:.2f}x |")
EOF

#!/usr/bin/env bash
# Paired comparison of the two ways the main loop hands accepted connections to workers:
#   eventfd   event_loop.msg_ring_handoff = false: task queue (MpscQueue) + the worker's eventfd
#   msg_ring  event_loop.msg_ring_handoff = true:  IORING_OP_MSG_RING from ring to ring
# The hand-off runs once per connection, so the load is connection churn (bench_client --churn:
# connect, one echo, close, again). Runs alternate A B A B ... so that drift in the machine's
# load hits both alike; the table gives every run, the medians and the msg_ring/eventfd ratio.
#
#   scripts/bench-handoff.sh                  # 3 pairs of 5 s runs, 32 slots, 64 B
#   RUNS=5 DURATION=10 CONNS=64 scripts/bench-handoff.sh
#
# Environment: RUNS [3] pairs, DURATION [5] s per run, WARMUP [1] s unmeasured, CONNS [32]
# connection slots, SIZE [64] bytes echoed per connection, THREAD_NUM [1] server workers,
# CLIENT_THREADS [1], SERVER_CPUS [0] and CLIENT_CPUS [1] (taskset lists), UCP_BIN_DIR [bin].
# Needs bin/proactor_test and bin/bench_client (cmake --build ... --target proactor_test
# bench_client). Run it on an otherwise idle machine: other load makes the numbers noise.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${UCP_BIN_DIR:-bin}
RUNS=${RUNS:-3}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
CONNS=${CONNS:-32}
SIZE=${SIZE:-64}
THREAD_NUM=${THREAD_NUM:-1}
CLIENT_THREADS=${CLIENT_THREADS:-1}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}

die() {
  echo "bench-handoff: $*" >&2
  exit 1
}
for tool in proactor_test bench_client; do
  [ -x "$BIN/$tool" ] || die "$BIN/$tool not found (build it: cmake --build build/release --target $tool)"
done
command -v taskset >/dev/null || die "taskset not found (util-linux)"
command -v python3 >/dev/null || die "python3 not found"

WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill -TERM "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# run_one MODE RUN: one server + one bench_client run; appends "MODE RUN JSON" to results.
run_one() {
  local mode=$1 run=$2 msg_ring=false log="$WORK/server-$1-$2.log"
  [ "$mode" = msg_ring ] && msg_ring=true
  taskset -c "$SERVER_CPUS" "$BIN/proactor_test" config/ucp.conf --set server.port=0 \
    --set server.ip=127.0.0.1 --set server.thread_num="$THREAD_NUM" \
    --set event_loop.msg_ring_handoff="$msg_ring" --set log.console=true --set log.file= \
    --set log.level=INFO >"$log" 2>&1 &
  SERVER_PID=$!
  local port=
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' "$log" | head -1)
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || die "$mode: the server did not start: $(tail -3 "$log")"
  if [ "$mode" = msg_ring ]; then
    for _ in $(seq 40); do grep -q 'hand-off: IORING_OP_MSG_RING\|WARN' "$log" && break; sleep 0.05; done
    grep -q 'hand-off: IORING_OP_MSG_RING' "$log" ||
      die "msg_ring: the server did not enable the msg_ring hand-off: $(grep WARN "$log" | tail -1)"
  fi
  local json
  json=$(taskset -c "$CLIENT_CPUS" "$BIN/bench_client" -h 127.0.0.1 -p "$port" -c "$CONNS" \
    -s "$SIZE" -d "$DURATION" -w "$WARMUP" -t "$CLIENT_THREADS" --churn --json \
    --server-pid "$SERVER_PID" 2>"$WORK/client-$mode-$run.err") ||
    echo "bench-handoff: $mode run $run: bench_client reported errors" >&2
  kill -TERM "$SERVER_PID"
  wait "$SERVER_PID" || die "$mode: the server exited with $?"
  SERVER_PID=
  [ -n "$json" ] || die "$mode run $run: no result: $(tail -3 "$WORK/client-$mode-$run.err")"
  echo "$mode $run $json" >>"$WORK/results"
  echo "  $mode run $run: $(echo "$json" | python3 -c 'import json, sys
r = json.load(sys.stdin)
print("%.0f conn/s, p99 %.0f us, errors %d" % (r["conns_per_s"], r["p99_us"], r["errors"]))')" >&2
}

echo "bench-handoff: $RUNS pairs x ${DURATION} s, $CONNS slots, $SIZE B, server workers" \
  "$THREAD_NUM, server cpus $SERVER_CPUS, client cpus $CLIENT_CPUS, kernel $(uname -r)" >&2
for run in $(seq "$RUNS"); do
  run_one eventfd "$run"
  run_one msg_ring "$run"
done

python3 - "$WORK/results" <<'EOF'
import json, statistics, sys
rows = []
for line in open(sys.argv[1]):
    mode, run, text = line.split(" ", 2)
    rows.append((mode, int(run), json.loads(text)))
def per_cpu(r):
    return r["requests"] / r["server_cpu_s"] if r["server_cpu_s"] > 0 else float("nan")
print("| run | hand-off | conn/s | p50 us | p99 us | conn per server-CPU-s | errors |")
print("|---|---|---:|---:|---:|---:|---:|")
for mode, run, r in rows:
    print(f"| {run} | {mode} | {r['conns_per_s']:.0f} | {r['p50_us']:.1f} | {r['p99_us']:.1f} "
          f"| {per_cpu(r):.0f} | {r['errors']} |")
med = {}
for mode in ("eventfd", "msg_ring"):
    rs = [r for m, _, r in rows if m == mode]
    med[mode] = {k: statistics.median(f(r) for r in rs) for k, f in
                 (("rate", lambda r: r["conns_per_s"]), ("p50", lambda r: r["p50_us"]),
                  ("p99", lambda r: r["p99_us"]), ("cpu", per_cpu))}
print()
print("| median | conn/s | p50 us | p99 us | conn per server-CPU-s |")
print("|---|---:|---:|---:|---:|")
for mode in ("eventfd", "msg_ring"):
    m = med[mode]
    print(f"| {mode} | {m['rate']:.0f} | {m['p50']:.1f} | {m['p99']:.1f} | {m['cpu']:.0f} |")
e, m = med["eventfd"], med["msg_ring"]
print(f"| msg_ring / eventfd | {m['rate'] / e['rate']:.2f}x | {m['p50'] / e['p50']:.2f}x "
      f"| {m['p99'] / e['p99']:.2f}x | {m['cpu'] / e['cpu']:.2f}x |")
EOF

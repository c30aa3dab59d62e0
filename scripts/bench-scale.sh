#!/usr/bin/env bash
# Scaling out on one host: who accepts, and how many processes share the port.
#   main-1w       one process, the main loop accepts and hands off to 1 worker (the default)
#   perworker-1w  one process, server.acceptors = per_worker: the 1 worker accepts itself
#   main-2w       one process, main loop + 2 workers, round-robin hand-off
#   perworker-2w  one process, 2 workers each on its own SO_REUSEPORT socket
#   2proc-1w      two processes x 1 worker on one port (server.reuse_port + per_worker), the
#                 multi-process mode nginx ships (worker processes, listen ... reuseport)
# Three workloads: connection churn (bench_client --churn: connect, one echo, close, again),
# which runs the accept path once per connection; the steady echo pingpong over long-lived
# connections, which never touches it; and http, the same long-lived connections sending
# keep-alive GET / to server.protocol = http (bench_client --http /). The modes alternate
# within every round so that drift in the machine's load hits all alike; the tables give every
# run, the medians, and each mode's ratio to main-1w computed per round, then the median.
#
#   scripts/bench-scale.sh                           # 3 rounds of 5 s runs, three workloads
#   RUNS=5 WORKLOADS=churn MODES="main-2w 2proc-1w" scripts/bench-scale.sh
#
# Environment: RUNS [3] rounds, DURATION [5] s per run, WARMUP [1] s unmeasured, MODES [all
# five above], WORKLOADS ["churn pingpong http"], CHURN_CONNS [32] slots, CHURN_SIZE [64]
# bytes, PINGPONG_CONNS [100] (http too), PINGPONG_SIZE [256] bytes, CLIENT_THREADS [1],
# SERVER_CPUS [0] and CLIENT_CPUS [1] (taskset lists; every server process gets SERVER_CPUS),
# NICE [-10 as root, else 0] (server and client, each in its own session as benchmark.sh
# does, so that the nice level holds under autogroup scheduling), BACKEND [auto], UCP_BIN_DIR
# [bin], OUT [unset: a file to write the report to as well].
# The per-CPU figure is per CPU-second of all server processes together (bench_client
# --server-pid, repeated). "main %" is the share of that CPU time (user + system, warm-up
# included) spent by the processes' main threads (ucp-main): the acceptor and the hand-off
# with acceptors = main; only signals and the stats line with per_worker (docs/scaling.md).
# Needs bin/proactor_test and bin/bench_client (cmake --build ... --target proactor_test
# bench_client). An otherwise idle machine gives the steadiest numbers.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${UCP_BIN_DIR:-bin}
RUNS=${RUNS:-3}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
MODES=${MODES:-main-1w perworker-1w main-2w perworker-2w 2proc-1w}
WORKLOADS=${WORKLOADS:-churn pingpong http}
CHURN_CONNS=${CHURN_CONNS:-32}
CHURN_SIZE=${CHURN_SIZE:-64}
PINGPONG_CONNS=${PINGPONG_CONNS:-100}
PINGPONG_SIZE=${PINGPONG_SIZE:-256}
CLIENT_THREADS=${CLIENT_THREADS:-1}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
BACKEND=${BACKEND:-auto}
if [ "$(id -u)" -eq 0 ]; then NICE=${NICE:--10}; else NICE=${NICE:-0}; fi

die() {
  echo "bench-scale: $*" >&2
  exit 1
}
for tool in proactor_test bench_client; do
  [ -x "$BIN/$tool" ] || die "$BIN/$tool not found (build it: cmake --build build/release --target $tool)"
done
command -v taskset >/dev/null || die "taskset not found (util-linux)"
command -v python3 >/dev/null || die "python3 not found"

. scripts/lib/bench-common.sh  # pinned, stop_server, cpu_ticks (the working directory is the root)

WORK=$(mktemp -d)
SERVER_PIDS=()
cleanup() {
  local pid
  for pid in "${SERVER_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${SERVER_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# start_server LOG PORT OVERRIDE...: one proactor_test on SERVER_CPUS; sets PORT to its port.
# (Not called in a subshell: SERVER_PIDS must keep the pid.)
start_server() {
  local log=$1 port=$2
  shift 2
  : >"$log"  # exists before the server (in a subshell) opens it
  (pinned "$SERVER_CPUS" "$BIN/proactor_test" config/ucp.conf --set server.ip=127.0.0.1 \
    --set server.port="$port" --set server.read_timeout_ms=0 --set log.console=true \
    --set log.file= --set log.level=INFO --set event_loop.backend="$BACKEND" "$@" >"$log" 2>&1) &
  SERVER_PIDS+=($!)
  local found=
  for _ in $(seq 100); do
    found=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' "$log" | head -1)
    [ -n "$found" ] && break
    sleep 0.05
  done
  [ -n "$found" ] || die "the server did not start: $(tail -3 "$log")"
  PORT=$found
}

# main_and_all_ticks: CPU ticks of the servers' main threads, then of the whole servers.
main_and_all_ticks() {
  local pid main=0 all=0
  for pid in "${SERVER_PIDS[@]}"; do
    main=$((main + $(awk '{print $14 + $15}' "/proc/$pid/task/$pid/stat")))
    all=$((all + $(cpu_ticks "$pid")))
  done
  echo "$main $all"
}

stop_servers() {
  local pid status=0
  for pid in "${SERVER_PIDS[@]}"; do kill -TERM "$pid"; done
  for pid in "${SERVER_PIDS[@]}"; do wait "$pid" || status=$?; done
  SERVER_PIDS=()
  [ "$status" = 0 ] || die "a server exited with $status"
}

# run_one WORKLOAD MODE RUN: the servers of MODE, one bench_client run; appends a result line.
run_one() {
  local workload=$1 mode=$2 run=$3 port log="$WORK/server-$1-$2-$3"
  local per_worker=(--set server.acceptors=per_worker) proto=(--set server.protocol=echo)
  [ "$workload" = http ] && proto=(--set server.protocol=http)
  case $mode in
    main-1w) start_server "$log.a" 0 "${proto[@]}" --set server.thread_num=1 ;;
    perworker-1w) start_server "$log.a" 0 "${proto[@]}" --set server.thread_num=1 "${per_worker[@]}" ;;
    main-2w) start_server "$log.a" 0 "${proto[@]}" --set server.thread_num=2 ;;
    perworker-2w) start_server "$log.a" 0 "${proto[@]}" --set server.thread_num=2 "${per_worker[@]}" ;;
    2proc-1w)
      start_server "$log.a" 0 "${proto[@]}" --set server.thread_num=1 "${per_worker[@]}" --set server.reuse_port=true
      start_server "$log.b" "$PORT" "${proto[@]}" --set server.thread_num=1 "${per_worker[@]}" --set server.reuse_port=true ;;
    *) die "unknown mode $mode" ;;
  esac
  port=$PORT
  local pids=() pid
  for pid in "${SERVER_PIDS[@]}"; do pids+=(--server-pid "$pid"); done
  local args=(-h 127.0.0.1 -p "$port" -d "$DURATION" -w "$WARMUP" -t "$CLIENT_THREADS" --json "${pids[@]}")
  if [ "$workload" = churn ]; then
    args+=(-c "$CHURN_CONNS" -s "$CHURN_SIZE" --churn)
  elif [ "$workload" = http ]; then
    args+=(-c "$PINGPONG_CONNS" -s "$PINGPONG_SIZE" --http /)
  else
    args+=(-c "$PINGPONG_CONNS" -s "$PINGPONG_SIZE")
  fi
  local json main_before all_before main_after all_after
  read -r main_before all_before < <(main_and_all_ticks)
  json=$(pinned "$CLIENT_CPUS" "$BIN/bench_client" "${args[@]}" 2>"$WORK/client-$workload-$mode-$run.err") ||
    echo "bench-scale: $workload $mode run $run: bench_client reported errors" >&2
  read -r main_after all_after < <(main_and_all_ticks)
  stop_servers
  [ -n "$json" ] || die "$workload $mode run $run: no result: $(tail -3 "$WORK/client-$workload-$mode-$run.err")"
  local main_share=nan
  [ "$all_after" -gt "$all_before" ] &&
    main_share=$(((main_after - main_before) * 1000 / (all_after - all_before)))
  echo "$workload $mode $run $main_share $json" >>"$WORK/results"
  echo "  $workload $mode run $run: $(echo "$json" | python3 -c 'import json, sys
r = json.load(sys.stdin)
per_cpu = r["requests"] / r["server_cpu_s"] if r["server_cpu_s"] > 0 else float("nan")
print("%.0f/s, %.0f per server-CPU-s, p99 %.0f us, errors %d" % (r["qps"], per_cpu, r["p99_us"], r["errors"]))')" >&2
}

echo "bench-scale: $RUNS rounds x ${DURATION} s (+${WARMUP} s warm-up), modes: $MODES;" \
  "churn $CHURN_CONNS slots x $CHURN_SIZE B, pingpong $PINGPONG_CONNS conns x $PINGPONG_SIZE B," \
  "http $PINGPONG_CONNS conns x GET /;" \
  "server cpus $SERVER_CPUS, client cpus $CLIENT_CPUS, nice $NICE, backend $BACKEND, kernel $(uname -r)," \
  "load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for run in $(seq "$RUNS"); do
  for workload in $WORKLOADS; do
    for mode in $MODES; do run_one "$workload" "$mode" "$run"; done
  done
done

report() {
  python3 - "$WORK/results" <<'EOF'
import json, statistics, sys
rows = []
for line in open(sys.argv[1]):
    workload, mode, run, share, text = line.split(" ", 4)
    r = json.loads(text)
    r["main_share"] = float(share) / 10 if share != "nan" else float("nan")
    rows.append((workload, mode, int(run), r))
def per_cpu(r):
    return r["requests"] / r["server_cpu_s"] if r["server_cpu_s"] > 0 else float("nan")
for workload in dict.fromkeys(w for w, _, _, _ in rows):
    unit = "conn" if workload == "churn" else "req"
    modes = list(dict.fromkeys(m for w, m, _, _ in rows if w == workload))
    print(f"#### {workload}\n")
    print(f"| run | mode | {unit}/s | {unit} per server-CPU-s | main % | p50 us | p99 us | errors |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for w, mode, run, r in rows:
        if w != workload:
            continue
        print(f"| {run} | {mode} | {r['qps']:.0f} | {per_cpu(r):.0f} | {r['main_share']:.1f} | {r['p50_us']:.1f} "
              f"| {r['p99_us']:.1f} | {r['errors']} |")
    base = modes[0]
    by = {(m, run): r for w, m, run, r in rows if w == workload}
    print(f"\n| median | {unit}/s | {unit} per server-CPU-s | main % | p99 us | {unit}/s vs {base} "
          f"| per-CPU vs {base} |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for mode in modes:
        rs = [r for (m, _), r in by.items() if m == mode]
        runs = [run for (m, run) in by if m == mode and (base, run) in by]
        rate_ratio = statistics.median(by[(mode, k)]["qps"] / by[(base, k)]["qps"] for k in runs)
        cpu_ratio = statistics.median(per_cpu(by[(mode, k)]) / per_cpu(by[(base, k)]) for k in runs)
        print(f"| {mode} | {statistics.median(r['qps'] for r in rs):.0f} "
              f"| {statistics.median(per_cpu(r) for r in rs):.0f} "
              f"| {statistics.median(r['main_share'] for r in rs):.1f} "
              f"| {statistics.median(r['p99_us'] for r in rs):.1f} | {rate_ratio:.2f}x "
              f"| {cpu_ratio:.2f}x |")
    print()
EOF
}
if [ -n "${OUT:-}" ]; then report | tee "$OUT"; else report; fi

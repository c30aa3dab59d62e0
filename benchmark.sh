#!/usr/bin/env bash
# ./benchmark.sh: UCP side by side with its peers on this machine, as medians and ratios.
#
#   (a) echo sweep: bin/bench_client pingpong (verified) against bin/proactor_test (protocol=echo)
#       and the peers epoll_echo (the baseline), asio_echo and uring_bare_echo (the ceiling),
#       message sizes x connection counts;
#   (b) HTTP sweep: wrk -t1 --latency against bin/proactor_test (protocol=http) and nginx.
# The servers alternate A B C D in every run round, each started fresh, pinned to
# BENCH_SERVER_CPUS, with the client pinned to BENCH_CLIENT_CPUS. Per run: QPS, p99, and
# requests per server-CPU-second (utime+stime of the server from /proc/PID/stat over the
# measured interval), plus the user-space share utime/(utime+stime). The report gives medians
# over the runs and ratios vs epoll_echo (echo) and nginx (HTTP), each ratio computed per paired
# run, then the median. With perf, a separate pass counts syscalls per request.
#
# Output: bench/results/<date>-<host>.md and PNG plots beside it; raw logs in
# bench/results/raw/<date>-<host>-<time>/ (git-ignored).
#
# Environment (defaults in brackets):
#   UCP_BIN_DIR [bin]          where bench_client, proactor_test and the peers are
#   BENCH_SIZES ["64 256 4096 16384"]   BENCH_CONNS ["10 100 1000 10000"]
#   BENCH_HTTP_CONNS ["10 100 1000"]    BENCH_SECONDS [5]   BENCH_RUNS [3]
#   BENCH_SERVERS ["ucp epoll_echo asio_echo uring_bare_echo"]   BENCH_HTTP_SERVERS ["ucp nginx"]
#     (HTTP servers may include uring_bare_http: uring_bare_echo -m http, the canned-answer ceiling)
#   BENCH_ECHO [1]  BENCH_HTTP [1]  BENCH_SYSCALLS [1: when perf can count syscalls]
#   BENCH_SERVER_CPUS [0]  BENCH_CLIENT_CPUS [1]  BENCH_CLIENT_THREADS [1]  BENCH_DEPTH [1]
#   BENCH_WARMUP [1]: seconds of full load before each measured interval (not counted)
#   BENCH_CLIENT_MODE [epoll]: bench_client on epoll (one send per syscall, arrivals spread
#     like independent clients) or uring (--uring: every connection's sends in one
#     io_uring_enter, a cheaper client but synchronized bursts that flatter batching servers)
#   BENCH_NICE [-10 as root, else 0]: nice level of server and client
#   BENCH_NO_BUILD [unset]: do not configure and build first (make bench has built already)
#   BENCH_TAG [unset]: report name suffix (bench/results/<date>-<host>-<tag>.md)
# UCP variants for the tuning matrix: a server named ucp+SECTION.KEY=VALUE[+...] is
# proactor_test with those --set overrides, e.g.
#   BENCH_SERVERS="ucp ucp+event_loop.sqpoll=true epoll_echo" BENCH_TAG=sqpoll ./benchmark.sh
# Another build of UCP in the same run (a before/after comparison): ucp@DIR is DIR/proactor_test
# (DIR: that build's bin directory; DIR/../config/ucp.conf is its config when present), and
# takes +SECTION.KEY=VALUE overrides the same way, e.g.
#   BENCH_SERVERS="ucp@/work/before/bin ucp epoll_echo" BENCH_TAG=before-after ./benchmark.sh
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD

BIN=${UCP_BIN_DIR:-$ROOT/bin}
SIZES=${BENCH_SIZES:-64 256 4096 16384}
CONNS=${BENCH_CONNS:-10 100 1000 10000}
HTTP_CONNS=${BENCH_HTTP_CONNS:-10 100 1000}
DURATION=${BENCH_SECONDS:-5}
RUNS=${BENCH_RUNS:-3}
SERVERS=${BENCH_SERVERS:-ucp epoll_echo asio_echo uring_bare_echo}
HTTP_SERVERS=${BENCH_HTTP_SERVERS:-ucp nginx}
DO_ECHO=${BENCH_ECHO:-1}
DO_HTTP=${BENCH_HTTP:-1}
DO_SYSCALLS=${BENCH_SYSCALLS:-1}
SERVER_CPUS=${BENCH_SERVER_CPUS:-0}
CLIENT_CPUS=${BENCH_CLIENT_CPUS:-1}
CLIENT_THREADS=${BENCH_CLIENT_THREADS:-1}
DEPTH=${BENCH_DEPTH:-1}
WARMUP=${BENCH_WARMUP:-1}
CLIENT_MODE=${BENCH_CLIENT_MODE:-epoll}
case $CLIENT_MODE in
  epoll) CLIENT_MODE_FLAG=() ;;
  uring) CLIENT_MODE_FLAG=(--uring) ;;
  *) echo "benchmark.sh: BENCH_CLIENT_MODE must be epoll or uring" >&2; exit 2 ;;
esac
# Server and client run at a higher priority (root only) so that other work on this machine
# takes less of their cores; all servers get the same treatment.
if [ "$(id -u)" -eq 0 ]; then NICE=${BENCH_NICE:--10}; else NICE=${BENCH_NICE:-0}; fi
NGINX=${NGINX:-/usr/sbin/nginx}
UCP_FLAGS=(--set server.protocol=PROTOCOL --set server.thread_num=1 --set log.console=false
  --set log.file= --set server.read_timeout_ms=0)

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf 'benchmark.sh: %s\n' "$*" >&2; exit 1; }

# ---- build (make bench has built already; MAKELEVEL tells us we run under make) ----------------
if [ -z "${MAKELEVEL:-}" ] && [ -z "${BENCH_NO_BUILD:-}" ] && [ -z "${UCP_BIN_DIR:-}" ]; then
  log "building (cmake Release, UCP_BENCH=ON) into build/release and bin/"
  if ! { cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DUCP_WERROR=ON -DUCP_BENCH=ON \
         >/dev/null && cmake --build build/release -j "$(nproc)"; }; then
    log "WARNING: the build failed; benchmarking the binaries already in $BIN"
  fi
fi
[ -x "$BIN/bench_client" ] || die "$BIN/bench_client not found (make bench, or UCP_BIN_DIR=...)"
command -v python3 >/dev/null || die "python3 is needed for free ports and the report"
command -v taskset >/dev/null || die "taskset (util-linux) is needed"

# ---- machine ----------------------------------------------------------------------------------
HOST=$(hostname -s 2>/dev/null || hostname)
DAY=$(date +%Y-%m-%d)
STAMP="$DAY-$HOST${BENCH_TAG:+-$BENCH_TAG}"
RESULTS=$ROOT/bench/results
RAW=$RESULTS/raw/$STAMP-$(date +%H%M%S)
mkdir -p "$RAW"
DATA=$RAW/runs.tsv
SYSCALLS=$RAW/syscalls.tsv
: >"$DATA"
: >"$SYSCALLS"
CPU_MODEL=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
CPU_COUNT=$(nproc)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
KERNEL=$(uname -r)
LIBURING=$(pkg-config --modversion liburing 2>/dev/null || dpkg-query -W -f='${Version}' liburing-dev 2>/dev/null || echo unknown)

ucp_available=1
if [ ! -x "$BIN/proactor_test" ]; then
  ucp_available=0
  log "SKIP ucp: $BIN/proactor_test does not exist yet; running the peers only"
fi
available() {  # available NAME: true when the server can run here
  case $1 in
    ucp | ucp+*) [ "$ucp_available" = 1 ] ;;
    ucp@*) local dir=${1#ucp@}; [ -x "${dir%%+*}/proactor_test" ] ;;
    nginx) [ -x "$NGINX" ] ;;
    uring_bare_http) [ -x "$BIN/uring_bare_echo" ] ;;
    *) [ -x "$BIN/$1" ] ;;
  esac
}
pick() {  # pick LIST: the servers of LIST that can run, with one line for each that cannot
  local out="" s
  for s in $1; do
    if available "$s"; then out="$out $s"; elif [ "$s" != ucp ]; then log "SKIP $s: not built/installed" >&2; fi
  done
  echo "$out"
}

if [ "$DO_SYSCALLS" = 1 ]; then
  if ! perf stat -x, -e raw_syscalls:sys_enter true >/dev/null 2>&1; then
    log "perf cannot count syscall tracepoints here (perf_event_paranoid, container?): no syscall pass"
    DO_SYSCALLS=0
  fi
fi

# ---- servers ----------------------------------------------------------------------------------
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

. scripts/lib/bench-common.sh  # pinned, stop_server (the working directory is the root)

SERVER_PID=""
PORT=""
# start_server NAME PROTOCOL: starts NAME pinned to the server CPUs on a free port and waits
# until it listens. Sets SERVER_PID and PORT.
start_server() {
  local name=$1 protocol=$2 logfile="$RAW/server-${1//\//_}.log" i
  PORT=$(free_port)
  local -a cmd
  case $name in
    ucp | ucp+*)
      local -a overrides=() parts=()
      local part
      IFS=+ read -ra parts <<<"${name#ucp}"
      for part in "${parts[@]}"; do [ -n "$part" ] && overrides+=(--set "$part"); done
      cmd=("$BIN/proactor_test" --set "server.port=$PORT" "${UCP_FLAGS[@]/PROTOCOL/$protocol}" "${overrides[@]}") ;;
    ucp@*)
      local -a at_overrides=() at_parts=()
      local at_part at_spec=${name#ucp@}
      IFS=+ read -ra at_parts <<<"${at_spec#*+}"
      [ "$at_spec" = "${at_spec%%+*}" ] && at_parts=()
      for at_part in "${at_parts[@]}"; do [ -n "$at_part" ] && at_overrides+=(--set "$at_part"); done
      # That build's own config file when it has one (its keys are what its binary knows).
      local -a at_config=()
      [ -f "${at_spec%%+*}/../config/ucp.conf" ] && at_config=("${at_spec%%+*}/../config/ucp.conf")
      cmd=("${at_spec%%+*}/proactor_test" "${at_config[@]}" --set "server.port=$PORT" "${UCP_FLAGS[@]/PROTOCOL/$protocol}" "${at_overrides[@]}") ;;
    nginx)
      local prefix=$RAW/nginx
      mkdir -p "$prefix"
      sed -e "s#@PORT@#$PORT#g" -e "s#@PREFIX@#$prefix#g" bench/peers/nginx.conf.in >"$prefix/nginx.conf"
      cmd=("$NGINX" -p "$prefix" -c "$prefix/nginx.conf") ;;
    uring_bare_http) cmd=("$BIN/uring_bare_echo" -p "$PORT" -m http) ;;
    *) cmd=("$BIN/$name" -p "$PORT") ;;
  esac
  pinned "$SERVER_CPUS" "${cmd[@]}" >>"$logfile" 2>&1 &
  SERVER_PID=$!
  [ -n "${BENCH_DEBUG:-}" ] && log "server $name: pid $SERVER_PID ($(cat /proc/$SERVER_PID/comm 2>/dev/null)), autogroup $(cat /proc/$SERVER_PID/autogroup 2>/dev/null)"
  for i in $(seq 1 200); do  # 10 s at most
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      wait "$SERVER_PID" 2>/dev/null || true
      SERVER_PID=""
      log "ERROR: $name exited at start-up (log: $logfile):"
      tail -3 "$logfile" | sed 's/^/    /'
      return 1
    fi
    if ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q LISTEN; then return 0; fi
    sleep 0.05
  done
  stop_server
  log "ERROR: $name did not listen on port $PORT within 10 s (log: $logfile)"
  return 1
}

# failed_run KIND NAME SIZE CONNS RUN: records a run whose server did not start as an error.
failed_run() {
  printf '%s\t%s\t%s\t%s\t%s\t0\t0\t0\t0\t1\t0\t0\t-1\t-1\t-1\n' "$@" >>"$DATA"
}

trap 'stop_server' EXIT
trap 'log "interrupted"; exit 130' INT TERM

cpu_times() {  # cpu_times PID: "utime stime" in clock ticks, all threads
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo "0 0"; return; }
  stat=${stat##*) }
  # shellcheck disable=SC2086
  set -- $stat
  echo "${12} ${13}"
}
TICKS=$(getconf CLK_TCK)

# ---- one measured run -------------------------------------------------------------------------
# echo_run NAME SIZE CONNS RUN: one bench_client run; appends a row to runs.tsv.
# Columns: kind server size conns run qps p50 p99 p999 errors requests seconds
#          server_cpu_s server_user_s client_cpu_s
echo_run() {
  local name=$1 size=$2 conns=$3 run=$4 json rc=0
  start_server "$name" echo || { failed_run echo "$name" "$size" "$conns" "$run"; return 0; }
  json=$(pinned "$CLIENT_CPUS" "$BIN/bench_client" -h 127.0.0.1 -p "$PORT" -c "$conns" -s "$size" \
    -d "$DURATION" -w "$WARMUP" -P "$DEPTH" -t "$CLIENT_THREADS" "${CLIENT_MODE_FLAG[@]}" \
    --json --server-pid "$SERVER_PID" \
    2>>"$RAW/client-${name//\//_}-$size-$conns-$run.log") || rc=$?
  stop_server
  echo "$json" >>"$RAW/client-${name//\//_}-$size-$conns-$run.log"
  python3 - "$json" "$name" "$size" "$conns" "$run" "$rc" >>"$DATA" <<'EOF'
import json, sys
raw, name, size, conns, run, rc = sys.argv[1:]
try:
    j = json.loads(raw.strip().splitlines()[-1])
except Exception:
    j = {"qps": 0, "p50_us": 0, "p99_us": 0, "p999_us": 0, "errors": 1, "requests": 0,
         "seconds": 0, "server_cpu_s": -1, "server_utime_s": -1, "client_cpu_s": -1}
errors = j["errors"] + (1 if rc != "0" and j["errors"] == 0 else 0)
print("\t".join(str(x) for x in ["echo", name, size, conns, run, j["qps"], j["p50_us"], j["p99_us"],
      j["p999_us"], errors, j["requests"], j["seconds"], j["server_cpu_s"], j["server_utime_s"],
      j["client_cpu_s"]]))
EOF
  tail -1 "$DATA" | awk -F'\t' -v n="$name" '{ rps = ($13 > 0) ? $11 / $13 : 0;
    printf "    %-16s %9.0f req/s  p99 %8.1f us  %9.0f req/CPU-s  server CPU %3.0f%%  user %4.1f%%  client CPU %3.0f%%  errors %d\n",
      n, $6, $8, rps, ($12 > 0) ? 100 * $13 / $12 : 0, ($13 > 0) ? 100 * $14 / $13 : 0,
      ($12 > 0) ? 100 * $15 / $12 : 0, $10 }'
}

# http_run NAME CONNS RUN: one wrk run; the server CPU is sampled around it.
http_run() {
  local name=$1 conns=$2 run=$3 out before after start end
  start_server "$name" http || { failed_run http "$name" 0 "$conns" "$run"; return 0; }
  if [ "$WARMUP" -gt 0 ]; then  # wrk has no warm-up of its own: a short unmeasured run
    (pinned "$CLIENT_CPUS" wrk -t1 -c"$conns" -d"${WARMUP}s" "http://127.0.0.1:$PORT/" >/dev/null 2>&1) || true
  fi
  before=$(cpu_times "$SERVER_PID")
  start=$(date +%s.%N)
  out=$(pinned "$CLIENT_CPUS" wrk -t1 -c"$conns" -d"${DURATION}s" --latency "http://127.0.0.1:$PORT/" 2>&1) || true
  end=$(date +%s.%N)
  after=$(cpu_times "$SERVER_PID")
  stop_server
  echo "$out" >"$RAW/wrk-${name//\//_}-$conns-$run.log"
  python3 - "$name" "$conns" "$run" "$before" "$after" "$TICKS" "$start" "$end" "$RAW/wrk-${name//\//_}-$conns-$run.log" >>"$DATA" <<'EOF'
import re, sys
name, conns, run, before, after, ticks, start, end, path = sys.argv[1:]
text = open(path).read()
def us(v, unit):
    return float(v) * {"us": 1, "ms": 1e3, "s": 1e6}[unit]
def pct(p):
    m = re.search(r"^\s+%s%%\s+([\d.]+)(us|ms|s)\s*$" % p, text, re.M)
    return us(*m.groups()) if m else 0
m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s)", text)
requests = int(m.group(1)) if m else 0
seconds = us(m.group(2), m.group(3)) / 1e6 if m else 0
qps = requests / seconds if seconds else 0
errors = 0
m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
if m: errors += sum(int(x) for x in m.groups())
m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
if m: errors += int(m.group(1))
if requests == 0: errors += 1
b = [int(x) for x in before.split()]; a = [int(x) for x in after.split()]
t = float(ticks)
cpu = (a[0] + a[1] - b[0] - b[1]) / t
user = (a[0] - b[0]) / t
print("\t".join(str(x) for x in ["http", name, 0, conns, run, qps, pct(50), pct(99), pct(99.9),
      errors, requests, float(end) - float(start), cpu, user, -1]))
EOF
  tail -1 "$DATA" | awk -F'\t' -v n="$name" '{ rps = ($13 > 0) ? $11 / $13 : 0;
    printf "    %-16s %9.0f req/s  p99 %8.1f us  %9.0f req/CPU-s  server CPU %3.0f%%  user %4.1f%%  errors %d\n",
      n, $6, $8, rps, ($12 > 0) ? 100 * $13 / $12 : 0, ($13 > 0) ? 100 * $14 / $13 : 0, $10 }'
}

# syscall_pass KIND NAME SIZE CONNS: perf counts the server's syscalls over the middle of a run
# (after the ramp, before the end); per request = count / (perf's seconds x the run's QPS).
syscall_pass() {
  local kind=$1 name=$2 size=$3 conns=$4 d client_pid perf_pid out qps i
  d=$(( DURATION < 4 ? 4 : DURATION ))
  start_server "$name" "$kind" || return 0
  local clog=$RAW/syscalls-client-$kind-${name//\//_}-$size-$conns.log perf_out=$RAW/syscalls-perf-$kind-${name//\//_}-$size-$conns.csv
  if [ "$kind" = echo ]; then
    pinned "$CLIENT_CPUS" "$BIN/bench_client" -h 127.0.0.1 -p "$PORT" -c "$conns" -s "$size" \
      -d "$d" -w "$WARMUP" -P "$DEPTH" -t "$CLIENT_THREADS" "${CLIENT_MODE_FLAG[@]}" --json \
      >"$clog" 2>&1 &
    client_pid=$!
    for i in $(seq 1 1200); do  # the first progress line ends the ramp; 120 s at most
      grep -q '^\[' "$clog" 2>/dev/null && break
      kill -0 "$client_pid" 2>/dev/null || break
      sleep 0.1
    done
  else
    pinned "$CLIENT_CPUS" wrk -t1 -c"$conns" -d"${d}s" "http://127.0.0.1:$PORT/" >"$clog" 2>&1 &
    client_pid=$!
    sleep 1
  fi
  perf stat -x, -e raw_syscalls:sys_enter -e syscalls:sys_enter_io_uring_enter -p "$SERVER_PID" \
    -o "$perf_out" -- sleep $(( d - 2 )) >/dev/null 2>&1 || true
  wait "$client_pid" 2>/dev/null || true
  stop_server
  python3 - "$kind" "$name" "$size" "$conns" "$clog" "$perf_out" "$(( d - 2 ))" >>"$SYSCALLS" <<'EOF'
import json, re, sys
kind, name, size, conns, clog, perf_out, window = sys.argv[1:]
text = open(clog).read()
if kind == "echo":
    lines = [l for l in text.splitlines() if l.startswith("{")]
    qps = json.loads(lines[-1])["qps"] if lines else 0
else:
    m = re.search(r"Requests/sec:\s+([\d.]+)", text)
    qps = float(m.group(1)) if m else 0
counts = {}
for line in open(perf_out):  # -x, lines: count,unit,event,... (counted while `sleep window` ran)
    f = line.strip().split(",")
    if len(f) > 2 and f[0].isdigit():
        counts[f[2]] = float(f[0])
seconds = float(window)
reqs = qps * seconds if seconds else 0
def per(k):
    return counts.get(k, 0) / reqs if reqs else 0
print("\t".join(str(x) for x in [kind, name, size, conns, qps, seconds,
      per("raw_syscalls:sys_enter"), per("syscalls:sys_enter_io_uring_enter")]))
EOF
  tail -1 "$SYSCALLS" | awk -F'\t' -v n="$name" '{ printf "    %-16s syscalls/request %.3f (io_uring_enter %.3f)\n", n, $7, $8 }'
}

# ---- the sweeps ---------------------------------------------------------------------------------
ECHO_SERVERS=$(pick "$SERVERS")
HTTP_PEERS=$(pick "$HTTP_SERVERS")
if ! command -v wrk >/dev/null; then log "SKIP HTTP sweep: wrk is not installed"; DO_HTTP=0; fi
n_sizes=$(wc -w <<<"$SIZES"); n_conns=$(wc -w <<<"$CONNS"); n_echo=$(wc -w <<<"$ECHO_SERVERS")
n_http=$(wc -w <<<"$HTTP_PEERS"); n_hconns=$(wc -w <<<"$HTTP_CONNS")
total=0
[ "$DO_ECHO" = 1 ] && total=$(( total + n_sizes * n_conns * n_echo * RUNS ))
[ "$DO_HTTP" = 1 ] && total=$(( total + n_hconns * n_http * RUNS ))
log "machine: $CPU_MODEL, $CPU_COUNT CPUs, kernel $KERNEL, liburing $LIBURING"
log "$total measured runs of ${DURATION} s (+ ramp and start-up each): about $(( total * (DURATION + WARMUP + 2) / 60 + 1 )) min; raw logs in $RAW"
done_runs=0
progress() {
  done_runs=$(( done_runs + 1 ))
  log "[$done_runs/$total] $*"
}

if [ "$DO_ECHO" = 1 ] && [ -n "${ECHO_SERVERS// /}" ]; then
  for size in $SIZES; do
    for conns in $CONNS; do
      for run in $(seq 1 "$RUNS"); do
        for name in $ECHO_SERVERS; do  # A B C D, A B C D, ...: drift hits every server alike
          progress "echo ${size} B x ${conns} connections, run $run/$RUNS: $name"
          echo_run "$name" "$size" "$conns" "$run"
        done
      done
      if [ "$DO_SYSCALLS" = 1 ]; then
        for name in $ECHO_SERVERS; do
          log "  syscall count: echo $size B x $conns: $name"
          syscall_pass echo "$name" "$size" "$conns"
        done
      fi
    done
  done
fi

if [ "$DO_HTTP" = 1 ] && [ -n "${HTTP_PEERS// /}" ]; then
  for conns in $HTTP_CONNS; do
    for run in $(seq 1 "$RUNS"); do
      for name in $HTTP_PEERS; do
        progress "http x ${conns} connections, run $run/$RUNS: $name"
        http_run "$name" "$conns" "$run"
      done
    done
    if [ "$DO_SYSCALLS" = 1 ]; then
      for name in $HTTP_PEERS; do
        log "  syscall count: http x $conns: $name"
        syscall_pass http "$name" 0 "$conns"
      done
    fi
  done
fi

# ---- report -------------------------------------------------------------------------------------
REPORT=$RESULTS/$STAMP.md
CONFIG_USED="proactor_test config/ucp.conf --set server.port=<free port> ${UCP_FLAGS[*]}"
python3 - "$DATA" "$SYSCALLS" "$REPORT" "$RESULTS" "$STAMP" <<EOF
import collections, os, statistics, subprocess, sys
data_path, sys_path, report, results, stamp = sys.argv[1:]
meta = {
    "cpu": """$CPU_MODEL""", "count": "$CPU_COUNT", "kernel": "$KERNEL", "liburing": "$LIBURING",
    "duration": "$DURATION", "runs": "$RUNS", "server_cpus": "$SERVER_CPUS",
    "client_cpus": "$CLIENT_CPUS", "client_threads": "$CLIENT_THREADS", "depth": "$DEPTH", "nice": "$NICE", "warmup": "$WARMUP", "client_mode": "$CLIENT_MODE",
    "config": """$CONFIG_USED""".replace("PROTOCOL", "echo|http"), "host": "$HOST",
    "ucp": "$ucp_available" == "1", "commit": """$(git rev-parse --short HEAD 2>/dev/null || echo unknown)""",
    "compiler": """$(c++ --version 2>/dev/null | head -1)""",
    "load_start": "$LOAD_START", "load_end": "$(cut -d' ' -f1-3 /proc/loadavg)",
    "command": """BENCH_CLIENT_MODE=$CLIENT_MODE BENCH_SIZES="$SIZES" BENCH_CONNS="$CONNS" BENCH_HTTP_CONNS="$HTTP_CONNS" BENCH_SECONDS=$DURATION BENCH_RUNS=$RUNS ./benchmark.sh""",
}
F = ["kind", "server", "size", "conns", "run", "qps", "p50", "p99", "p999", "errors", "requests",
     "seconds", "cpu", "user", "client_cpu"]
rows = []
for line in open(data_path):
    f = line.rstrip("\n").split("\t")
    if len(f) != len(F): continue
    r = dict(zip(F, f))
    for k in F[2:]:
        r[k] = float(r[k])
    r["rps"] = r["requests"] / r["cpu"] if r["cpu"] > 0 else 0.0
    r["user_share"] = r["user"] / r["cpu"] if r["cpu"] > 0 else 0.0
    r["server_util"] = r["cpu"] / r["seconds"] if r["seconds"] > 0 else 0.0
    r["client_util"] = r["client_cpu"] / r["seconds"] if r["seconds"] > 0 and r["client_cpu"] >= 0 else -1
    rows.append(r)
sysrows = collections.defaultdict(dict)
for line in open(sys_path):
    f = line.rstrip("\n").split("\t")
    if len(f) == 8:
        sysrows[(f[0], int(float(f[2])), int(float(f[3])))][f[1]] = (float(f[6]), float(f[7]))

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None

def fmt(x, spec=".0f"):
    return "–" if x is None else format(x, spec)

by = collections.defaultdict(dict)   # (kind, size, conns) -> server -> {run: row}
for r in rows:
    by[(r["kind"], int(r["size"]), int(r["conns"]))].setdefault(r["server"], {})[int(r["run"])] = r

def ratio(point, server, base, key, invert=False):
    a, b = by[point].get(server, {}), by[point].get(base, {})
    rs = []
    for run in a:
        if run in b and a[run][key] > 0 and b[run][key] > 0:
            rs.append(b[run][key] / a[run][key] if invert else a[run][key] / b[run][key])
    return med(rs)

out = []
w = out.append
w(f"# UCP benchmark report: {stamp}\n")
w("## Machine and configuration\n")
w(f"- CPU: {meta['cpu']}, {meta['count']} CPUs; kernel {meta['kernel']}; liburing {meta['liburing']}; {meta['compiler']}")
w(f"- Commit {meta['commit']}. Server pinned to CPU(s) {meta['server_cpus']}, client to CPU(s) {meta['client_cpus']} (taskset), both at nice {meta['nice']}; loopback 127.0.0.1.")
w(f"- {meta['runs']} runs of {meta['duration']} s per point after {meta['warmup']} s of unmeasured warm-up load, servers alternating in each run round, each started fresh.")
w(f"- Echo client: bench_client on {meta['client_mode']}, {meta['client_threads']} thread(s), depth {meta['depth']}, every echoed byte verified.  HTTP client: wrk -t1 --latency.")
if meta["ucp"]:
    w(f"- UCP: {meta['config']}")
    try:  # the file the overrides apply to, without its comments
        lines = [l.split(" ;")[0].split(" #")[0].rstrip() for l in open("config/ucp.conf")]
        lines = [l for l in lines if l.strip() and not l.lstrip().startswith(("#", ";"))]
        tick = chr(96)  # a backquote (this text is an unquoted here-document)
        w("  config/ucp.conf: " + tick + " ".join(l.strip().replace(" ", "") for l in lines) + tick)
    except OSError:
        w("  (config/ucp.conf not found: built-in defaults)")
else:
    w("- UCP: **not measured** (bin/proactor_test did not exist when this ran).")
w(f"- Load average (1/5/15 min) at start: {meta['load_start']}; at end: {meta['load_end']}.")
w(f"- Reproduce: {meta['command']}")
w("")
w("Figures: medians over the runs. *req/CPU-s* = requests / (server utime+stime over the measured interval, /proc/PID/stat), "
  "the robust figure when the client rather than the server is the bottleneck. *user* = utime/(utime+stime). "
  "Ratios are computed per paired run (same round), then the median. *srv CPU* = server CPU-seconds per second "
  "(below ~90 % the server was not saturated: client-bound or latency-bound). "
  "This machine has few cores and other work may run beside the benchmark: treat differences under ~5 % as noise.\n")

def table(kind, base, sizes):
    for size in sizes:
        points = sorted(p for p in by if p[0] == kind and p[1] == size)
        if not points: continue
        servers = []
        for p in points:
            for s in by[p]:
                if s not in servers: servers.append(s)
        title = f"Echo {size} B" if kind == "echo" else "HTTP (wrk -t1, keep-alive GET)"
        w(f"## {title}\n")
        w(f"| conns | server | QPS | p99 µs | req/CPU-s | srv CPU | client CPU | user | req/CPU-s vs {base} | QPS vs {base} | p99 vs {base} | syscalls/req (io_uring_enter) | errors |")
        w("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for p in points:
            for s in servers:
                runs = list(by[p].get(s, {}).values())
                if not runs: continue
                sc = sysrows.get((kind, size, p[2]), {}).get(s)
                cu = med([r["client_util"] for r in runs if r["client_util"] >= 0])
                w("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                    p[2], s, fmt(med([r["qps"] for r in runs])), fmt(med([r["p99"] for r in runs]), ".1f"),
                    fmt(med([r["rps"] for r in runs])), fmt(100 * med([r["server_util"] for r in runs]), ".0f") + " %",
                    (fmt(100 * cu, ".0f") + " %") if cu is not None else "–",
                    fmt(100 * med([r["user_share"] for r in runs]), ".1f") + " %",
                    "1" if s == base else fmt(ratio(p, s, base, "rps"), ".3f"),
                    "1" if s == base else fmt(ratio(p, s, base, "qps"), ".3f"),
                    "1" if s == base else fmt(ratio(p, s, base, "p99"), ".2f"),
                    f"{sc[0]:.2f} ({sc[1]:.2f})" if sc else "–",
                    int(sum(r["errors"] for r in runs))))
        w("")
        plot(kind, size, points, servers)

plots = []
def plot(kind, size, points, servers):
    name = f"{stamp}-{kind}" + (f"-{size}" if kind == "echo" else "")
    dat = os.path.join(results, "raw", f"{name}.dat")
    png = os.path.join(results, f"{name}.png")
    with open(dat, "w") as f:
        for s in servers:
            f.write(f"# {s}\n")
            for p in points:
                runs = list(by[p].get(s, {}).values())
                if runs:
                    f.write(f"{p[2]} {med([r['qps'] for r in runs])} {med([r['p99'] for r in runs])} {med([r['rps'] for r in runs])}\n")
            f.write("\n\n")
    title = f"echo {size} B" if kind == "echo" else "HTTP wrk -t1"
    try:  # scripts/plot-bench.py draws it (and redraws plots from a report's tables)
        subprocess.run(["python3", "scripts/plot-bench.py", dat, png, f"{title} ({stamp})", *servers],
                       text=True, check=True, capture_output=True)
        plots.append(os.path.basename(png))
        w(f"![{title}]({os.path.basename(png)})\n")
    except Exception as e:
        w(f"(plot skipped: {e})\n")

table("echo", "epoll_echo", sorted({p[1] for p in by if p[0] == "echo"}))
table("http", "nginx", [0])
if not rows:
    w("No runs were recorded.")
open(report, "w").write("\n".join(out) + "\n")
print(report)
for p in plots: print(os.path.join(results, p))
EOF
log "report: $REPORT"

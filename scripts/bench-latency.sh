#!/usr/bin/env bash
# Tail latency at a fixed rate: UCP beside its peers, open loop, coordinated omission corrected.
#
#   1. The rate: epoll_echo's maximum (closed loop: bench_client at CONNS connections, SIZE-byte
#      echo, MAX_RUNS runs, the median requests per second), server on SERVER_CPUS, client on
#      CLIENT_CPUS. MAX_RATE=N skips the measurement.
#   2. At each of LOADS percent of it, bench_client --rate against every server of
#      ECHO_SERVERS (256 B echo) and HTTP_SERVERS (keep-alive GET /), ROUNDS rounds with the
#      servers alternating in each (A B C, A B C, ...: drift hits all alike), each started
#      fresh. Every run writes its latency distribution (.hgrm).
#   3. bench/results/<date>-<host>-latency.md: per server and rate the medians over the rounds
#      of p50, p90, p99, p99.9, p99.99, max, the achieved rate, the client's own pacing
#      delay, the server's and client's run-queue wait (runnable while another task held
#      the CPU) and their CPUs' steal time (the hypervisor's): the machine's share of the tail;
#      and the range of p99.9 over the rounds; ratios of p99 and p99.9 to epoll_echo and asio_echo (echo) or nginx (HTTP),
#      computed per round, then the median. One PNG per kind and rate with every server's
#      latency-by-percentile curve (scripts/plot-latency.py; the round whose p99.9 is the
#      median).
#
#   scripts/bench-latency.sh                            # the full run (about 25 minutes)
#   DURATION=1 WARMUP=0 ROUNDS=1 MAX_RUNS=1 MAX_DURATION=1 CONNS=100 scripts/bench-latency.sh
#
# Servers: ucp (bin/proactor_test), ucp+SECTION.KEY=VALUE[+...] (the same with --set
# overrides; dropped with a line when this proactor_test refuses the key), epoll_echo,
# asio_echo, uring_bare_echo, uring_bare_echo+spin=US (the bare loop busy-polling for US µs
# before each sleep: the ceiling of ucp+event_loop.busy_poll_us=US); HTTP: ucp, nginx, uring_bare_http (uring_bare_echo -m http).
#
# Environment (defaults in brackets): DURATION [10] s measured per run after WARMUP [2] s;
# ROUNDS [3]; LOADS ["50 80"] percent; CONNS [1000]; SIZE [256]; MAX_RATE [measured];
# MAX_RUNS [3] x MAX_DURATION [5] s; ECHO_SERVERS ["ucp ucp+event_loop.busy_poll_us=50
# epoll_echo asio_echo uring_bare_echo"]; HTTP_SERVERS ["ucp nginx uring_bare_http"] (empty:
# no HTTP); SERVER_CPUS [0]; CLIENT_CPUS [1]; CLIENT_THREADS [1]; CLIENT_FLAGS [--busy-poll:
# the client spins on its own CPU, so that neither a due time nor an answer waits for a
# wake-up]; NICE [-10 as root, else 0]; UCP_BIN_DIR [bin]; NGINX [/usr/sbin/nginx]; OUT
# [bench/results/<date>-<host>-latency.md]. Needs the binaries of make bench (-DUCP_BENCH=ON),
# python3, gnuplot (scripts/install-deps.sh bench). Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

BIN=${UCP_BIN_DIR:-$ROOT/bin}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-3}
LOADS=${LOADS:-50 80}
CONNS=${CONNS:-1000}
SIZE=${SIZE:-256}
MAX_RUNS=${MAX_RUNS:-3}
MAX_DURATION=${MAX_DURATION:-5}
ECHO_SERVERS=${ECHO_SERVERS-ucp ucp+event_loop.busy_poll_us=50 epoll_echo asio_echo uring_bare_echo}
HTTP_SERVERS=${HTTP_SERVERS-ucp nginx uring_bare_http}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
CLIENT_THREADS=${CLIENT_THREADS:-1}
CLIENT_FLAGS=${CLIENT_FLAGS---busy-poll}
NGINX=${NGINX:-/usr/sbin/nginx}
if [ "$(id -u)" -eq 0 ]; then NICE=${NICE:--10}; else NICE=${NICE:-0}; fi
HOST=$(hostname -s 2>/dev/null || hostname)
STAMP=$(date +%Y-%m-%d)-$HOST-latency
OUT=${OUT:-bench/results/$STAMP.md}
RAW=bench/results/raw/$STAMP-$(date +%H%M%S)
UCP_FLAGS=(--set server.thread_num=1 --set log.console=false --set log.file=
  --set server.read_timeout_ms=0)

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'bench-latency: %s\n' "$*" >&2; exit 1; }

[ -x "$BIN/bench_client" ] || die "$BIN/bench_client not found (make bench, or UCP_BIN_DIR=...)"
command -v python3 >/dev/null || die "python3 is needed"
command -v taskset >/dev/null || die "taskset (util-linux) is needed"
command -v gnuplot >/dev/null || log "gnuplot not found: no plots (scripts/install-deps.sh bench)"
mkdir -p "$RAW" "$(dirname "$OUT")"
RUNS=$RAW/runs.tsv
: >"$RUNS"
ulimit -n 65536 2>/dev/null || true

. scripts/lib/bench-common.sh  # pinned, stop_server (SERVER_PID)
trap 'stop_server' EXIT
trap 'log "interrupted"; exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# start_server NAME KIND: NAME on a free port, pinned to SERVER_CPUS, listening; sets PORT and
# SERVER_PID. Fails (with the log's last lines) when it exits or does not listen within 10 s.
start_server() {
  local name=$1 kind=$2 logfile="$RAW/server-$1.log" cmd=() part parts=()
  PORT=$(free_port)
  case $name in
    ucp | ucp+*)
      IFS=+ read -ra parts <<<"${name#ucp}"
      cmd=("$BIN/proactor_test" --set "server.port=$PORT" --set "server.protocol=$kind"
        "${UCP_FLAGS[@]}")
      for part in "${parts[@]}"; do [ -n "$part" ] && cmd+=(--set "$part"); done ;;
    nginx)
      local prefix=$RAW/nginx
      mkdir -p "$prefix"
      sed -e "s#@PORT@#$PORT#g" -e "s#@PREFIX@#$ROOT/$prefix#g" bench/peers/nginx.conf.in \
        >"$prefix/nginx.conf"
      cmd=("$NGINX" -p "$ROOT/$prefix" -c "$ROOT/$prefix/nginx.conf") ;;
    uring_bare_http) cmd=("$BIN/uring_bare_echo" -p "$PORT" -m http) ;;
    uring_bare_echo+spin=*) cmd=("$BIN/uring_bare_echo" -p "$PORT" -s "${name#uring_bare_echo+spin=}") ;;
    *) cmd=("$BIN/$name" -p "$PORT") ;;
  esac
  pinned "$SERVER_CPUS" "${cmd[@]}" >>"$logfile" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 200); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      wait "$SERVER_PID" 2>/dev/null || true
      SERVER_PID=
      log "ERROR: $name exited at start-up: $(tail -2 "$logfile" | tr '\n' ' ')"
      return 1
    fi
    ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q LISTEN && return 0
    sleep 0.05
  done
  stop_server
  log "ERROR: $name did not listen on port $PORT within 10 s"
  return 1
}

available() {  # available NAME KIND: whether NAME can run here
  case $1 in
    ucp) [ -x "$BIN/proactor_test" ] ;;
    ucp+*)
      [ -x "$BIN/proactor_test" ] || return 1
      # A key this proactor_test does not know makes it exit at start-up.
      if start_server "$1" "$2" 2>/dev/null; then stop_server; return 0; fi
      return 1 ;;
    nginx) [ -x "$NGINX" ] ;;
    uring_bare_http | uring_bare_echo+spin=*) [ -x "$BIN/uring_bare_echo" ] ;;
    *) [ -x "$BIN/$1" ] ;;
  esac
}
pick() {  # pick KIND LIST: the servers of LIST that can run
  local kind=$1 s out=""
  for s in $2; do
    if available "$s" "$kind"; then out="$out $s"; else log "SKIP $s ($kind): not built, not installed or refused"; fi
  done
  echo "$out"
}

# ---- 1. the rate ---------------------------------------------------------------------------
log "machine: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs, kernel $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -z "${MAX_RATE:-}" ]; then
  [ -x "$BIN/epoll_echo" ] || die "$BIN/epoll_echo not found: build with -DUCP_BENCH=ON or set MAX_RATE"
  rates=()
  for run in $(seq "$MAX_RUNS"); do
    start_server epoll_echo echo || die "epoll_echo did not start"
    json=$(pinned "$CLIENT_CPUS" "$BIN/bench_client" -h 127.0.0.1 -p "$PORT" -c "$CONNS" \
      -s "$SIZE" -d "$MAX_DURATION" -w "$WARMUP" -t "$CLIENT_THREADS" --json \
      2>>"$RAW/max-rate.log" | tail -1) || true
    stop_server
    echo "$json" >>"$RAW/max-rate.log"
    qps=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["qps"])' "$json" 2>/dev/null || echo 0)
    log "  epoll_echo closed loop, run $run/$MAX_RUNS: $qps req/s"
    rates+=("$qps")
  done
  MAX_RATE=$(printf '%s\n' "${rates[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
fi
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$MAX_RATE" ||
  die "no maximum rate measured (see $RAW/max-rate.log)"
log "epoll_echo's maximum rate: $MAX_RATE req/s (closed loop, $CONNS connections, $SIZE B)"

# ---- 2. the open-loop runs -------------------------------------------------------------------
ECHO_LIST=$(pick echo "$ECHO_SERVERS")
HTTP_LIST=$(pick http "$HTTP_SERVERS")
total=$(( ($(wc -w <<<"$ECHO_LIST") + $(wc -w <<<"$HTTP_LIST")) * $(wc -w <<<"$LOADS") * ROUNDS ))
log "$total runs of $DURATION s (+ $WARMUP s warm-up, ramp and start-up each); raw results in $RAW"
done_runs=0

# one_run KIND NAME LOAD ROUND: a bench_client --rate run; appends its JSON to runs.tsv.
one_run() {
  local kind=$1 name=$2 load=$3 round=$4 rate json hgrm rc=0 extra=()
  rate=$(python3 -c 'import sys; print(round(float(sys.argv[1]) * float(sys.argv[2]) / 100))' "$MAX_RATE" "$load")
  hgrm=$RAW/$kind-$load-$name-$round.hgrm
  [ "$kind" = http ] && extra=(--http /)
  done_runs=$((done_runs + 1))
  if ! start_server "$name" "$kind"; then
    printf '%s\t%s\t%s\t%s\t%s\n' "$kind" "$load" "$name" "$round" '{"failed":true}' >>"$RUNS"
    return 0
  fi
  # shellcheck disable=SC2086  # CLIENT_FLAGS is a list of flags
  json=$(pinned "$CLIENT_CPUS" "$BIN/bench_client" -h 127.0.0.1 -p "$PORT" -c "$CONNS" \
    -s "$SIZE" -d "$DURATION" -w "$WARMUP" -t "$CLIENT_THREADS" --rate "$rate" "${extra[@]}" \
    $CLIENT_FLAGS --json --hgrm "$hgrm" --server-pid "$SERVER_PID" \
    2>>"$RAW/client-$kind-$load-$name-$round.log" | tail -1) || rc=$?
  stop_server
  [ -n "$json" ] || json='{"failed":true}'
  printf '%s\t%s\t%s\t%s\t%s\n' "$kind" "$load" "$name" "$round" "$json" >>"$RUNS"
  python3 - "$json" "$done_runs/$total $kind $load% ($rate req/s) round $round: $name" "$rc" <<'EOF' >&2
import json, sys
raw, what, rc = sys.argv[1:]
try:
    j = json.loads(raw)
    print(f"  [{what}] p50 {j['p50_us']:.1f}  p99 {j['p99_us']:.1f}  p99.9 {j['p999_us']:.1f}  "
          f"max {j['max_us']:.1f} us  achieved {j['achieved_rate']:.0f}/s  pacing p99 "
          f"{j['pacing_p99_us']:.1f} us  run-queue wait server {1e3 * j.get('server_runqueue_wait_s', -1) / j['seconds']:.1f} "
          f"client {1e3 * j.get('client_runqueue_wait_s', -1) / j['seconds']:.1f} ms/s  steal server "
          f"{1e3 * j.get('server_cpus_steal_s', -1) / j['seconds']:.1f} client "
          f"{1e3 * j.get('client_cpus_steal_s', -1) / j['seconds']:.1f} ms/s"
          f"{'' if j['schedule_kept'] else '  SCHEDULE NOT KEPT'}"
          f"{'' if rc == '0' else '  exit ' + rc}")
except Exception:
    print(f"  [{what}] FAILED (exit {rc})")
EOF
}

for kind in echo http; do
  list=$ECHO_LIST
  [ "$kind" = http ] && list=$HTTP_LIST
  [ -n "${list// /}" ] || continue
  for load in $LOADS; do
    for round in $(seq "$ROUNDS"); do
      for name in $list; do one_run "$kind" "$name" "$load" "$round"; done
    done
  done
done

# ---- 3. the report ---------------------------------------------------------------------------
COMMAND="MAX_RATE=${MAX_RATE} DURATION=$DURATION WARMUP=$WARMUP ROUNDS=$ROUNDS LOADS=\"$LOADS\" CONNS=$CONNS SIZE=$SIZE CLIENT_FLAGS=\"$CLIENT_FLAGS\" scripts/bench-latency.sh"
python3 - "$RUNS" "$OUT" "$RAW" "$MAX_RATE" <<EOF
import collections, json, os, statistics, subprocess, sys
runs_path, out_path, raw, max_rate = sys.argv[1:]
meta = {
    "cpu": """$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)""",
    "cpus": "$(nproc)", "kernel": "$(uname -r)", "commit": "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)",
    "load": "$(cut -d' ' -f1-3 /proc/loadavg)", "command": """$COMMAND""",
}
runs = collections.defaultdict(lambda: collections.defaultdict(dict))  # (kind, load) -> server -> round -> json
order = collections.defaultdict(list)
for line in open(runs_path):
    kind, load, name, rnd, raw_json = line.rstrip("\n").split("\t", 4)
    try:
        j = json.loads(raw_json)
    except ValueError:
        j = {"failed": True}
    runs[(kind, int(load))][name][int(rnd)] = j
    if name not in order[(kind, int(load))]:
        order[(kind, int(load))].append(name)

def ok(j):
    return not j.get("failed") and "p99_us" in j

def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None

def fmt(v, spec=".1f"):
    return "–" if v is None else format(v, spec)

def paired_ratio(a, b, key):
    rs = [a[r][key] / b[r][key] for r in a if r in b and ok(a[r]) and ok(b[r]) and b[r][key] > 0]
    return med(rs)

out = []
w = out.append
w(f"# Latency at a fixed rate: {os.path.basename(out_path)[:-3]}\n")
w(f"- {meta['cpu']}, {meta['cpus']} CPUs, kernel {meta['kernel']}, commit {meta['commit']}; load average at the end {meta['load']}.")
w(f"- Rates: percentages of epoll_echo's maximum, **{float(max_rate):.0f} req/s** (closed loop, $CONNS connections, $SIZE B echo, median of $MAX_RUNS runs of $MAX_DURATION s).")
w(f"- Open loop: bench_client --rate on $CONNS connections, $SIZE B echo or keep-alive GET /; each request's latency from its due time (coordinated omission corrected); $DURATION s measured after $WARMUP s of warm-up; $ROUNDS rounds, servers alternating; client flags: \`$CLIENT_FLAGS\` ($CLIENT_THREADS thread). Server on CPU $SERVER_CPUS, client on CPU $CLIENT_CPUS, nice $NICE.")
w(f"- Reproduce: \`{meta['command']}\`")
w("")
w("Figures are medians over the rounds (µs). *pacing p99*: the client's own delay before its sends (it should be small beside the latencies); *server CPU*, *client CPU*: CPU-seconds per second of each over the run (a busy-polling client shows 100 %). *p99.9 range*: the lowest and highest p99.9 of the rounds (a spread wider than the gap between two servers means the machine, not the server, decided that gap). *run-queue wait*: milliseconds per second of the measured interval that the process's threads were runnable while another task held their CPU (/proc/PID/task/*/schedstat): the machine's share of the tail, which an otherwise idle machine keeps near 0. *steal*: milliseconds per second that the hypervisor ran something else on the server's and the client's (virtual) CPUs; a stall that shows in neither is the program's own. *kept*: rounds in which every request due was answered and the answers reached the rate. Ratios are per round, then the median; below 1 is better for the server named.\n")

for (kind, load) in sorted(runs):
    servers = order[(kind, load)]
    by = runs[(kind, load)]
    rate = float(max_rate) * load / 100
    w(f"## {'Echo $SIZE B' if kind == 'echo' else 'HTTP GET /'} at {load} % ({rate:.0f} req/s)\n")
    w("| server | achieved req/s | p50 | p90 | p99 | p99.9 | p99.9 range | p99.99 | max | pacing p99 | server CPU | client CPU | server run-queue wait | client run-queue wait | steal server / client CPUs | kept | errors |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in servers:
        good = [j for j in by[s].values() if ok(j)]
        cpu = med([j["server_cpu_s"] / j["wall_s"] for j in good if j.get("server_cpu_s", -1) >= 0 and j["wall_s"] > 0])
        client = med([j["client_cpu_s"] / j["wall_s"] for j in good if j["wall_s"] > 0])
        waits = {side: med([j[f"{side}_runqueue_wait_s"] * 1e3 / j["seconds"] for j in good
                            if j.get(f"{side}_runqueue_wait_s", -1) >= 0 and j["seconds"] > 0])
                 for side in ("server", "client")}
        steal = {side: med([j[f"{side}_cpus_steal_s"] * 1e3 / j["seconds"] for j in good
                            if j.get(f"{side}_cpus_steal_s", -1) >= 0 and j["seconds"] > 0])
                 for side in ("server", "client")}
        p999s = [j["p999_us"] for j in good]
        w("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} | {} |".format(
            s, fmt(med([j["achieved_rate"] for j in good]), ".0f"),
            *[fmt(med([j[k] for j in good])) for k in ("p50_us", "p90_us", "p99_us", "p999_us")],
            f"{min(p999s):.0f}–{max(p999s):.0f}" if p999s else "–",
            *[fmt(med([j[k] for j in good])) for k in ("p9999_us", "max_us", "pacing_p99_us")],
            "–" if cpu is None else f"{100 * cpu:.0f} %", "–" if client is None else f"{100 * client:.0f} %",
            *["–" if waits[side] is None else f"{waits[side]:.1f} ms/s" for side in ("server", "client")],
            " / ".join("–" if steal[side] is None else f"{steal[side]:.1f}" for side in ("server", "client")) + " ms/s",
            sum(1 for j in good if j["schedule_kept"]), len(by[s]),
            sum(int(j.get("errors", 0)) + int(j.get("unanswered", 0)) for j in good) + sum(1 for j in by[s].values() if not ok(j))))
    w("")
    bases = ["epoll_echo", "asio_echo"] if kind == "echo" else ["nginx"]
    bases = [b for b in bases if b in by]
    if bases:
        head = " | ".join(f"{k} / {b}" for b in bases for k in ("p99", "p99.9"))
        w(f"| server | {head} |")
        w("|---|" + "---:|" * (2 * len(bases)))
        for s in servers:
            if s in bases and len(bases) == 1: continue
            cells = [fmt(paired_ratio(by[s], by[b], k), ".2f") for b in bases for k in ("p99_us", "p999_us")]
            w(f"| {s} | " + " | ".join(cells) + " |")
        w("")
    # Busy polling against the same server without it (ucp+...busy_poll_us=N / ucp,
    # uring_bare_echo+spin=N / uring_bare_echo): the bare loop's pair is the ceiling of UCP's.
    pairs = [(s, "ucp" if s.startswith("ucp") else "uring_bare_echo") for s in servers
             if ("busy_poll_us" in s and s.startswith("ucp+")) or s.startswith("uring_bare_echo+spin=")]
    pairs = [(s, b) for s, b in pairs if b in by]
    if pairs:
        w("| busy-polling server / the same without | p99 | p99.9 | server CPU |")
        w("|---|---:|---:|---:|")
        for s, b in pairs:
            def cpu_of(name):
                return med([j["server_cpu_s"] / j["wall_s"] for j in by[name].values()
                            if ok(j) and j.get("server_cpu_s", -1) >= 0 and j["wall_s"] > 0])
            cs, cb = cpu_of(s), cpu_of(b)
            w(f"| {s} / {b} | {fmt(paired_ratio(by[s], by[b], 'p99_us'), '.2f')} | "
              f"{fmt(paired_ratio(by[s], by[b], 'p999_us'), '.2f')} | "
              f"{'–' if cs is None else f'{100 * cs:.0f} %'} / {'–' if cb is None else f'{100 * cb:.0f} %'} |")
        w("")
    # The plot: each server's round whose p99.9 is the median of its rounds.
    files = []
    for s in servers:
        good = sorted(((j["p999_us"], r) for r, j in by[s].items() if ok(j)))
        if not good: continue
        r = good[(len(good) - 1) // 2][1]
        path = os.path.join(raw, f"{kind}-{load}-{s}-{r}.hgrm")
        if os.path.exists(path): files.append(f"{path}={s}")
    png = out_path[:-3] + f"-{kind}-{load}.png"
    title = f"{'echo $SIZE B' if kind == 'echo' else 'HTTP GET /'}, {rate:.0f} req/s ({load} % of epoll_echo's max), $CONNS connections, open loop"
    if files:
        result = subprocess.run(["python3", "scripts/plot-latency.py", "-o", png, "-t", title, *files],
                                capture_output=True, text=True)
        if result.returncode == 0:
            w(f"![{title}]({os.path.basename(png)})\n")
        else:
            w(f"(plot failed: {result.stderr.strip()})\n")
open(out_path, "w").write("\n".join(out) + "\n")
print(out_path)
EOF
log "report: $OUT"

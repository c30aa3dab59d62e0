#!/usr/bin/env bash
# The gateway: bin/ucp_gateway on one worker beside HAProxy 2.6 (nbthread 1) and nginx (one
# worker), in the same run, in both of its modes:
#   - tcp: UCP (mode = tcp), HAProxy mode tcp, nginx stream and the ceiling, a bare io_uring
#     relay (bin/uring_bare_relay: multishot recv into a buffer ring, the same buffer sent on the
#     other socket, one submit per iteration, DEFER_TASKRUN; no balancing, no timers), each
#     relaying to one UCP echo upstream (bin/proactor_test);
#   - http: UCP (mode = http), HAProxy mode http (http-reuse always) and nginx proxy_pass with a
#     keepalive upstream pool, each in front of one HTTP upstream (bin/proactor_test,
#     protocol = http: 200 OK per request), driven by wrk with keep-alive connections; UCP's pool
#     (upstream keepalive) and nginx's (keepalive) both keep HTTP_KEEPALIVE idle connections.
#
# Proxy pinned to PROXY_CPUS, client (bin/bench_client) and upstream to CLIENT_CPUS. Figures:
#   - 256 B pingpong at each of CONNS_LIST: requests per proxy-CPU-second (utime + stime of the
#     proxy process over the measured interval) and p99;
#   - bulk: BULK_CONNS connections echoing BULK_SIZE-byte messages through the proxy: bytes
#     relayed (both ways) per proxy-CPU-second;
#   - idle memory: the proxy's RSS growth per relayed connection pair with IDLE_CONNS idle
#     connections open through it (each made one round trip, so both sides exist);
#   - http: wrk -t1 --latency with each of HTTP_CONNS_LIST keep-alive connections: requests per
#     proxy-CPU-second and p99.
# Each cell runs RUNS times with the proxies interleaved (ucp bare haproxy nginx ucp ...), so
# that drift in the machine's load hits all alike; the report gives medians and the ratios of
# the medians (UCP / HAProxy, UCP / nginx, and UCP / bare: the share of the ceiling).
#
#   scripts/bench-gateway.sh                                  # the full set, 3 runs each
#   RUNS=1 DURATION=1 WARMUP=0 IDLE_CONNS=200 scripts/bench-gateway.sh   # a smoke run
#   MODES=http scripts/bench-gateway.sh                       # the HTTP mode only
#
# Environment: RUNS [3], DURATION [5] s measured per run (after WARMUP [1] s), SIZE [256],
# BUFFER_SIZE [16384] (the receive buffers of UCP and of the bare relay: bytes per send),
# PIPE_SIZE [1048576] (for the proxy `splice`, not run by default: the bare relay splicing
# through a pipe per socket instead, PROXIES="ucp bare splice haproxy nginx"),
# CONNS_LIST ["100 1000"], BULK_SIZE [1048576], BULK_CONNS [4], IDLE_CONNS [4000], PROXIES
# ["ucp bare haproxy nginx"], MODES ["tcp http"], HTTP_CONNS_LIST ["100 1000"], HTTP_PROXIES
# ["ucp bare haproxy nginx"; bare there is the HTTP mode's ceiling, a byte relay with a connection
# per client], HTTP_KEEPALIVE [1024], PROXY_CPUS [0], CLIENT_CPUS [1], NICE [0],
# UCP_BIN_DIR [bin], OUT [bench/results/<date>-gateway.md]. Needs bin/bench_client,
# bin/proactor_test, bin/ucp_gateway and bin/uring_bare_relay (cmake -DUCP_BENCH=ON, then
# --target bench_client proactor_test ucp_gateway uring_bare_relay), wrk, haproxy, nginx and its
# stream module (scripts/install-deps.sh test bench). Run it on an otherwise idle machine.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${UCP_BIN_DIR:-bin}
RUNS=${RUNS:-3}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
SIZE=${SIZE:-256}
CONNS_LIST=${CONNS_LIST:-100 1000}
BULK_SIZE=${BULK_SIZE:-1048576}
BULK_CONNS=${BULK_CONNS:-4}
IDLE_CONNS=${IDLE_CONNS:-4000}
PROXIES=${PROXIES:-ucp bare haproxy nginx}
MODES=${MODES:-tcp http}
HTTP_CONNS_LIST=${HTTP_CONNS_LIST:-100 1000}
HTTP_PROXIES=${HTTP_PROXIES:-ucp bare haproxy nginx}
HTTP_KEEPALIVE=${HTTP_KEEPALIVE:-1024}
PROXY_CPUS=${PROXY_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
NICE=${NICE:-0}
BUFFER_SIZE=${BUFFER_SIZE:-16384}
PIPE_SIZE=${PIPE_SIZE:-1048576}
OUT=${OUT:-bench/results/$(date +%Y-%m-%d)-gateway.md}
NGINX_STREAM_MODULE=${NGINX_STREAM_MODULE:-/usr/lib/nginx/modules/ngx_stream_module.so}
# shellcheck source=lib/bench-common.sh
source scripts/lib/bench-common.sh

die() {
  echo "bench-gateway: $*" >&2
  exit 1
}
for tool in bench_client proactor_test ucp_gateway uring_bare_relay; do
  [ -x "$BIN/$tool" ] || die "$BIN/$tool not found (cmake -DUCP_BENCH=ON; cmake --build build/release --target $tool)"
done
command -v taskset >/dev/null || die "taskset not found (util-linux)"
if [[ " $MODES " == *" http "* ]]; then
  command -v wrk >/dev/null || die "wrk not found (scripts/install-deps.sh bench)"
fi
if [[ " $PROXIES $HTTP_PROXIES " == *" haproxy "* ]]; then
  command -v haproxy >/dev/null || die "haproxy not found (scripts/install-deps.sh test)"
fi
if [[ " $PROXIES $HTTP_PROXIES " == *" nginx "* ]]; then
  command -v nginx >/dev/null || die "nginx not found (scripts/install-deps.sh bench)"
  [ -f "$NGINX_STREAM_MODULE" ] || die "$NGINX_STREAM_MODULE not found (apt-get install libnginx-mod-stream)"
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

WORK=$(mktemp -d)
UPSTREAM_PID=
HTTP_UPSTREAM_PID=
stop_upstream() {
  for pid in $UPSTREAM_PID $HTTP_UPSTREAM_PID; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  UPSTREAM_PID=
  HTTP_UPSTREAM_PID=
}
trap 'stop_server; stop_upstream; rm -rf "$WORK"' EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
wait_listening() {  # PORT NAME LOG
  for _ in $(seq 1 200); do
    ss -Hltn "sport = :$1" 2>/dev/null | grep -q LISTEN && return 0
    sleep 0.05
  done
  die "$2 did not start: $(tail -3 "$3")"
}

# The echo upstream, beside the client: one UCP worker, no read timeout.
UPSTREAM=$(free_port)
(pinned "$CLIENT_CPUS" "$BIN/proactor_test" config/ucp.conf --set server.port="$UPSTREAM" \
  --set server.ip=127.0.0.1 --set server.thread_num=1 --set server.read_timeout_ms=0 \
  --set server.max_connections=100000 --set log.console=true --set log.file= \
  >"$WORK/upstream.log" 2>&1) &
UPSTREAM_PID=$!
wait_listening "$UPSTREAM" upstream "$WORK/upstream.log"
# The HTTP upstream: the same, answering 200 OK to every request (keep-alive).
HTTP_UPSTREAM=$(free_port)
(pinned "$CLIENT_CPUS" "$BIN/proactor_test" config/ucp.conf --set server.port="$HTTP_UPSTREAM" \
  --set server.ip=127.0.0.1 --set server.thread_num=1 --set server.read_timeout_ms=0 \
  --set server.protocol=http --set server.max_connections=100000 --set log.console=true \
  --set log.file= >"$WORK/http-upstream.log" 2>&1) &
HTTP_UPSTREAM_PID=$!
wait_listening "$HTTP_UPSTREAM" "http upstream" "$WORK/http-upstream.log"

# ucp_gateway_config MODE UPSTREAM_PORT: bin/ucp_gateway's config, one worker on PORT.
ucp_gateway_config() {
  printf '%s\n' "[server]" "ip = 127.0.0.1" "port = $PORT" "thread_num = 1" \
    "max_connections = 100000" "shutdown_timeout_ms = 1000" "[event_loop]" \
    "provided_buffer_size = $BUFFER_SIZE" "[log]" "console = true" "file =" "level = WARN" \
    "[gateway]" "mode = $1" "upstream = app" "[upstream.app]" "servers = 127.0.0.1:$2" \
    "keepalive = $HTTP_KEEPALIVE"
}

# start_proxy NAME: starts it on a free port pinned to PROXY_CPUS; sets SERVER_PID and PORT.
start_proxy() {
  local name=$1
  PORT=$(free_port)
  case $name in
    ucp)
      ucp_gateway_config tcp "$UPSTREAM" >"$WORK/gateway.conf"
      (pinned "$PROXY_CPUS" "$BIN/ucp_gateway" "$WORK/gateway.conf" >"$WORK/proxy.log" 2>&1) &
      ;;
    bare)
      (pinned "$PROXY_CPUS" "$BIN/uring_bare_relay" -p "$PORT" -u "$UPSTREAM" -b "$BUFFER_SIZE" \
        >"$WORK/proxy.log" 2>&1) &
      ;;
    splice)
      (pinned "$PROXY_CPUS" "$BIN/uring_bare_relay" -p "$PORT" -u "$UPSTREAM" -s "$PIPE_SIZE" \
        >"$WORK/proxy.log" 2>&1) &
      ;;
    haproxy)
      sed -e "s/@PORT@/$PORT/g" -e "s/@UPSTREAM@/$UPSTREAM/g" bench/peers/haproxy-tcp.cfg.in \
        >"$WORK/haproxy.cfg"
      (pinned "$PROXY_CPUS" haproxy -db -f "$WORK/haproxy.cfg" >"$WORK/proxy.log" 2>&1) &
      ;;
    nginx)
      rm -rf "$WORK/nginx" && mkdir -p "$WORK/nginx"
      sed -e "s/@PORT@/$PORT/g" -e "s/@UPSTREAM@/$UPSTREAM/g" -e "s|@PREFIX@|$WORK/nginx|g" \
        -e "s|@MODULE@|$NGINX_STREAM_MODULE|g" bench/peers/nginx-stream.conf.in \
        >"$WORK/nginx/nginx.conf"
      (pinned "$PROXY_CPUS" nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" \
        >"$WORK/proxy.log" 2>&1) &
      ;;
    *) die "unknown proxy $name" ;;
  esac
  SERVER_PID=$!
  wait_listening "$PORT" "$name" "$WORK/proxy.log"
}

# start_http_proxy NAME: the HTTP-mode proxy on a free port pinned to PROXY_CPUS; sets
# SERVER_PID and PORT.
start_http_proxy() {
  local name=$1
  PORT=$(free_port)
  case $name in
    ucp)
      ucp_gateway_config http "$HTTP_UPSTREAM" >"$WORK/gateway.conf"
      (pinned "$PROXY_CPUS" "$BIN/ucp_gateway" "$WORK/gateway.conf" >"$WORK/proxy.log" 2>&1) &
      ;;
    bare)
      # The ceiling of an HTTP proxy: the same four socket operations per request (receive
      # from the client, send upstream, receive the answer, send it back) with no parsing, no
      # rewriting and no pool: each client connection relayed to its own upstream connection.
      (pinned "$PROXY_CPUS" "$BIN/uring_bare_relay" -p "$PORT" -u "$HTTP_UPSTREAM" -b "$BUFFER_SIZE" \
        >"$WORK/proxy.log" 2>&1) &
      ;;
    haproxy)
      sed -e "s/@PORT@/$PORT/g" -e "s/@UPSTREAM@/$HTTP_UPSTREAM/g" bench/peers/haproxy-http.cfg.in \
        >"$WORK/haproxy.cfg"
      (pinned "$PROXY_CPUS" haproxy -db -f "$WORK/haproxy.cfg" >"$WORK/proxy.log" 2>&1) &
      ;;
    nginx)
      rm -rf "$WORK/nginx" && mkdir -p "$WORK/nginx"
      sed -e "s/@PORT@/$PORT/g" -e "s/@UPSTREAM@/$HTTP_UPSTREAM/g" -e "s|@PREFIX@|$WORK/nginx|g" \
        -e "s/@KEEPALIVE@/$HTTP_KEEPALIVE/g" bench/peers/nginx-http-proxy.conf.in \
        >"$WORK/nginx/nginx.conf"
      (pinned "$PROXY_CPUS" nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" \
        >"$WORK/proxy.log" 2>&1) &
      ;;
    *) die "unknown HTTP proxy $name" ;;
  esac
  SERVER_PID=$!
  wait_listening "$PORT" "$name" "$WORK/proxy.log"
}

# run_http NAME CONNS RUN: one wrk run through the HTTP proxy (after a WARMUP-second one), the
# proxy's CPU time sampled over the measured run.
run_http() {
  local name=$1 conns=$2 run=$3 out before after json
  start_http_proxy "$name"
  if [ "$WARMUP" != 0 ]; then
    (pinned "$CLIENT_CPUS" wrk -t1 -c"$conns" -d"${WARMUP}s" "http://127.0.0.1:$PORT/") \
      >/dev/null 2>&1 || true
  fi
  before=$(cpu_ticks "$SERVER_PID")
  out=$( (pinned "$CLIENT_CPUS" wrk -t1 -c"$conns" -d"${DURATION}s" --latency \
    "http://127.0.0.1:$PORT/") 2>&1) || true
  after=$(cpu_ticks "$SERVER_PID")
  stop_server
  json=$(wrk_json "$out" "$before" "$after" "$DURATION")
  echo "http $name $conns 0 $run $json" >>"$WORK/results"
  python3 - "$json" "http $name $conns conns run $run" >&2 <<'PY'
import json, sys
j = json.loads(sys.argv[1])
cpu = j.get("server_cpu_s", -1)
print(f"  {sys.argv[2]}: {j['qps']:.0f} req/s, p99 {j['p99_us']:.0f} us, "
      f"{j['requests'] / cpu if cpu > 0 else 0:.0f} req/proxy-CPU-s, errors {j['errors']:.0f}")
PY
}

# run_load KIND NAME CONNS MESSAGE_SIZE RUN: one bench_client run through the proxy.
run_load() {
  local kind=$1 name=$2 conns=$3 size=$4 run=$5 json
  start_proxy "$name"
  json=$( (pinned "$CLIENT_CPUS" "$BIN/bench_client" -h 127.0.0.1 -p "$PORT" -c "$conns" \
    -s "$size" -d "$DURATION" -w "$WARMUP" --json --server-pid "$SERVER_PID") \
    2>>"$WORK/client.log" | tail -1) || true
  stop_server
  [ -n "$json" ] || json='{"qps":0,"p99_us":0,"errors":1,"requests":0,"seconds":0,"server_cpu_s":-1}'
  echo "$kind $name $conns $size $run $json" >>"$WORK/results"
  python3 - "$json" "$kind $name $conns x $size B run $run" >&2 <<'PY'
import json, sys
j = json.loads(sys.argv[1])
cpu = j.get("server_cpu_s", -1)
print(f"  {sys.argv[2]}: {j['qps']:.0f} req/s, p99 {j['p99_us']:.0f} us, "
      f"{j['requests'] / cpu if cpu > 0 else 0:.0f} req/proxy-CPU-s, errors {j['errors']}")
PY
}

# idle_memory NAME RUN: RSS growth of the proxy per idle relayed pair.
idle_memory() {
  local name=$1 run=$2 before after
  start_proxy "$name"
  before=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status")
  mkfifo "$WORK/hold"
  python3 - "$PORT" "$IDLE_CONNS" "$WORK/hold" <<'PY' &
import socket, sys
port, count, hold = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
conns = []
for i in range(count):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"x")
    assert s.recv(1) == b"x"  # one round trip: the upstream side exists too
    conns.append(s)
print("ready", flush=True)
open(hold).read()  # until the script has measured
PY
  local holder=$!
  for _ in $(seq 1 600); do
    [ "$(ss -Htn state established "dport = :$PORT" 2>/dev/null | wc -l)" -ge "$IDLE_CONNS" ] && break
    sleep 0.1
  done
  sleep 1
  after=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status")
  echo >"$WORK/hold"
  wait "$holder" 2>/dev/null || true
  rm -f "$WORK/hold"
  stop_server
  echo "idle $name $IDLE_CONNS 0 $run {\"before_kb\":$before,\"after_kb\":$after}" >>"$WORK/results"
  echo "  idle $name run $run: RSS $before -> $after KiB with $IDLE_CONNS pairs" >&2
}

echo "bench-gateway: modes $MODES; $RUNS runs x ${DURATION} s (+${WARMUP} s warm-up); tcp:" \
  "$SIZE B pingpong at $CONNS_LIST conns, bulk $BULK_CONNS x $BULK_SIZE B, $IDLE_CONNS idle" \
  "pairs, proxies $PROXIES; http: $HTTP_CONNS_LIST conns, proxies $HTTP_PROXIES, keepalive" \
  "$HTTP_KEEPALIVE; proxy cpus $PROXY_CPUS, client+upstream cpus $CLIENT_CPUS, $(nproc) CPUs," \
  "kernel $(uname -r)" >&2
: >"$WORK/results"
for run in $(seq "$RUNS"); do
  if [[ " $MODES " == *" tcp "* ]]; then
    for conns in $CONNS_LIST; do
      for proxy in $PROXIES; do run_load pingpong "$proxy" "$conns" "$SIZE" "$run"; done
    done
    for proxy in $PROXIES; do run_load bulk "$proxy" "$BULK_CONNS" "$BULK_SIZE" "$run"; done
    for proxy in $PROXIES; do idle_memory "$proxy" "$run"; done
  fi
  if [[ " $MODES " == *" http "* ]]; then
    for conns in $HTTP_CONNS_LIST; do
      for proxy in $HTTP_PROXIES; do run_http "$proxy" "$conns" "$run"; done
    done
  fi
done

mkdir -p "$(dirname "$OUT")"
python3 - "$WORK/results" "$RUNS" "$DURATION" "$PROXIES" "$HTTP_PROXIES" >"$OUT" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    kind, proxy, conns, size, run, raw = line.split(" ", 5)
    rows.setdefault((kind, proxy, int(conns), int(size)), []).append(json.loads(raw))
proxies = sys.argv[4].split()
http_proxies = sys.argv[5].split()
names = {"ucp": "UCP gateway", "bare": "bare io_uring relay", "haproxy": "HAProxy 2.6 (tcp)",
         "nginx": "nginx stream", "splice": "bare io_uring relay, splice"}
http_names = {"ucp": "UCP gateway (http)", "haproxy": "HAProxy 2.6 (mode http)",
              "bare": "bare io_uring relay (ceiling: no parsing, connection per client)",
              "nginx": "nginx proxy_pass + keepalive"}
def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")
def per_cpu(j, scale=1.0):
    cpu = j.get("server_cpu_s", -1)
    return j["requests"] * scale / cpu if cpu and cpu > 0 and j["requests"] > 0 else float("nan")
def ratio(a, b):
    return f"{a / b:.2f}x" if a == a and b == b and b else "n/a"
print(f"Runs per cell: {sys.argv[2]}, {sys.argv[3]} s each; medians. Proxy on its own CPU, "
      "client and echo upstream on the other.\n")
print("## 256 B pingpong: requests per proxy-CPU-second\n")
print("| conns | proxy | req/s | proxy CPU % | req/CPU-s | p99 µs | errors |")
print("|---:|---|---:|---:|---:|---:|---:|")
cells = sorted({(c, s) for k, _, c, s in rows if k == "pingpong"})
for conns, size in cells:
    for p in proxies:
        vs = rows.get(("pingpong", p, conns, size), [])
        if not vs: continue
        cpu = med([100 * j["server_cpu_s"] / j["seconds"] for j in vs if j.get("seconds", 0) > 0])
        print(f"| {conns} | {names[p]} | {med([j['qps'] for j in vs]):.0f} | {cpu:.0f} | "
              f"{med([per_cpu(j) for j in vs]):.0f} | {med([j['p99_us'] for j in vs]):.0f} | "
              f"{sum(j.get('errors', 0) for j in vs)} |")
print()
print("| conns | UCP / HAProxy req/CPU-s | UCP / nginx req/CPU-s | UCP / bare (ceiling share) | p99 UCP / HAProxy | p99 UCP / nginx |")
print("|---:|---:|---:|---:|---:|---:|")
for conns, size in cells:
    def m(p, f):
        return med([f(j) for j in rows.get(("pingpong", p, conns, size), [])])
    rate = lambda p: m(p, per_cpu)
    p99 = lambda p: m(p, lambda j: j["p99_us"])
    print(f"| {conns} | {ratio(rate('ucp'), rate('haproxy'))} | {ratio(rate('ucp'), rate('nginx'))} | "
          f"{ratio(rate('ucp'), rate('bare'))} | {ratio(p99('ucp'), p99('haproxy'))} | "
          f"{ratio(p99('ucp'), p99('nginx'))} |")
print("\n## Bulk: bytes relayed per proxy-CPU-second (each message crosses the proxy twice)\n")
print("| conns x size | proxy | MB/s relayed | proxy CPU % | MB per CPU-s | vs UCP |")
print("|---|---|---:|---:|---:|---:|")
bulk = sorted({(c, s) for k, _, c, s in rows if k == "bulk"})
for conns, size in bulk:
    ucp = med([per_cpu(j, 2 * size) for j in rows.get(("bulk", "ucp", conns, size), [])])
    for p in proxies:
        vs = rows.get(("bulk", p, conns, size), [])
        if not vs: continue
        rate = med([per_cpu(j, 2 * size) for j in vs])
        cpu = med([100 * j["server_cpu_s"] / j["seconds"] for j in vs if j.get("seconds", 0) > 0])
        mbs = med([j["qps"] * 2 * size / 1e6 for j in vs])
        print(f"| {conns} x {size} B | {names[p]} | {mbs:.0f} | {cpu:.0f} | {rate / 1e6:.0f} | "
              f"{ratio(ucp, rate)} |")
print("\n## Idle memory per relayed connection pair (proxy RSS growth / pairs)\n")
print("| proxy | pairs | RSS before KiB | RSS with them KiB | KiB per pair |")
print("|---|---:|---:|---:|---:|")
for p in proxies:
    vs = [v for (k, q, _, _), v in rows.items() if k == "idle" and q == p]
    if not vs: continue
    vs = vs[0]
    pairs = [c for (k, q, c, _) in rows if k == "idle" and q == p][0]
    before = med([j["before_kb"] for j in vs]); after = med([j["after_kb"] for j in vs])
    print(f"| {names[p]} | {pairs} | {before:.0f} | {after:.0f} | {(after - before) / pairs:.2f} |")
http = sorted({c for k, _, c, _ in rows if k == "http"})
if http:
    print("\n## HTTP reverse proxy: requests per proxy-CPU-second (keep-alive clients, pooled "
          "upstream connections)\n")
    print("| conns | proxy | req/s | proxy CPU % | req/CPU-s | p99 µs | errors |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for conns in http:
        for p in http_proxies:
            vs = rows.get(("http", p, conns, 0), [])
            if not vs: continue
            cpu = med([100 * j["server_cpu_s"] / j["seconds"] for j in vs if j.get("seconds", 0) > 0])
            print(f"| {conns} | {http_names[p]} | {med([j['qps'] for j in vs]):.0f} | {cpu:.0f} | "
                  f"{med([per_cpu(j) for j in vs]):.0f} | {med([j['p99_us'] for j in vs]):.0f} | "
                  f"{sum(j.get('errors', 0) for j in vs):.0f} |")
    print()
    print("| conns | UCP / HAProxy req/CPU-s | UCP / nginx req/CPU-s | UCP / bare relay (ceiling share) | bare relay / nginx (the ceiling's ratio) | p99 UCP / HAProxy | p99 UCP / nginx |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for conns in http:
        def mh(p, f):
            return med([f(j) for j in rows.get(("http", p, conns, 0), [])])
        hrate = lambda p: mh(p, per_cpu)
        hp99 = lambda p: mh(p, lambda j: j["p99_us"])
        print(f"| {conns} | {ratio(hrate('ucp'), hrate('haproxy'))} | {ratio(hrate('ucp'), hrate('nginx'))} | "
              f"{ratio(hrate('ucp'), hrate('bare'))} | {ratio(hrate('bare'), hrate('nginx'))} | "
              f"{ratio(hp99('ucp'), hp99('haproxy'))} | {ratio(hp99('ucp'), hp99('nginx'))} |")
PY
echo "bench-gateway: report in $OUT" >&2
cat "$OUT"

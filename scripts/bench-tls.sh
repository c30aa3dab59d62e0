#!/usr/bin/env bash
# TLS: bin/http_server over HTTPS beside nginx (one worker, the same OpenSSL), in the same run.
# Both serve TLS 1.3 only with the same self-signed ECDSA P-256 certificate (made with openssl
# into a scratch directory), X25519 first, the same TLS 1.3 suites in the same order, session
# tickets on (nginx also `ssl_session_cache shared:SSL:10m`: bench/peers/nginx-https.conf.in);
# the tiny answer is bin/http_server's GET /healthz ("ok") and nginx's `return 200 "ok"`.
# Server pinned to SERVER_CPUS (one worker: server.thread_num = 1, nginx worker_processes 1,
# master_process off), every client to CLIENT_CPUS. Parts (PARTS):
#   - keepalive: CONNS keep-alive connections at each of CONNS_LIST against UCP and nginx, each
#     over plain HTTP and HTTPS, closed loop: requests per server-CPU-second (utime + stime of
#     the server over the measured run, /proc/PID/stat) and p99, from two clients (KA_CLIENTS):
#     `wrk -t1 -c CONNS --latency` (after a WARMUP-second wrk run), whose measured run makes its
#     own CONNS handshakes as it starts, so they count in it; and `bin/bench_client --http
#     /healthz [--tls]`, which handshakes every connection and answers one request on each
#     before the clock starts (no handshake in the measured interval).
#   - handshake: HS_CLIENTS concurrent `openssl s_time -new` (a full handshake, one GET and a
#     close per connection) and `openssl s_time -reuse` (the same, resuming the first
#     connection's session: a TLS 1.3 ticket) for HS_SECONDS: handshakes per server-CPU-second.
#     Each connection's letter in s_time's output tells whether it resumed ('r') or not ('*'),
#     and UCP's /metrics (ucp_tls_handshakes_total, ucp_tls_resumed_total) counts the server's
#     side. The ceiling beside it is OpenSSL's own cost of the handshake's public-key operations,
#     measured by `openssl speed` on SERVER_CPUS: a full handshake signs once (ECDSA P-256) and
#     makes two X25519 scalar multiplications (key share, shared secret), a resumed one
#     (psk_dhe_ke) the two X25519 ones. With bin/tls_micro (cmake -DUCP_BENCH=ON), also the
#     engine's whole server CPU per full and resumed handshake in memory (no I/O), and per
#     small record pair (one seal, one open of 64 B: what a keep-alive request adds over TLS),
#     the ceilings of the handshake and keep-alive figures.
#   - storm: STORM_CONNS established keep-alive HTTPS connections (bin/bench_client --tls --http
#     /healthz, open loop at STORM_RATE requests/s: latency from each request's due time) with
#     and without a handshake storm beside them: `h2load --h1 -r` opening STORM_HS_RATE new
#     connections per second (one GET each, full handshakes) on the same worker. STORM_HS_RATE
#     defaults to half of UCP's full handshakes per server-CPU-second measured in this run (the
#     handshake part), the same rate for both servers. Figures: p99 (and p99.9) of the
#     established connections, storm / quiet, UCP / nginx.
#   - wss: WebSocket echo over TLS, UCP (bin/proactor_test, server.protocol = websocket, [tls])
#     beside Boost.Beast over beast::ssl_stream (bin/beast_wss_echo, the same TLS set-up), driven
#     by bin/ws_bench_client --tls (every connection keeps one binary message of each of
#     WSS_SIZES bytes in flight; handshakes before the clock): messages per server-CPU-second.
#   - instr: user-space instructions per keep-alive request (valgrind's callgrind, the counters
#     zeroed after a warm-up and dumped after INSTR_SECONDS of bin/bench_client --http /healthz
#     [--tls] on INSTR_CONNS connections), UCP (epoll backend: callgrind cannot run io_uring)
#     and nginx, each over HTTP and HTTPS: what TLS adds to a request, free of the machine's
#     noise (INSTR_RUNS times; the kernel's share is not in it).
#   - idle: IDLE_CONNS idle connections (each made one keep-alive GET, over TLS or plain), the
#     server's RSS growth per connection (VmRSS of /proc/PID/status, as scripts/idle-memory.sh).
# Each cell runs RUNS times with the servers interleaved (ucp nginx ucp ...), so that drift in
# the machine's load hits all alike (the idle part IDLE_RUNS times: memory does not drift with
# the load); the report gives medians and the ratios of the medians.
#
#   scripts/bench-tls.sh                        # everything, 3 runs each
#   SMOKE=1 scripts/bench-tls.sh                # a smoke run: 1 run, 1 s cells, 100 conns
#   PARTS="handshake storm" scripts/bench-tls.sh
#   PARTS=wss WSS_SIZES=64 scripts/bench-tls.sh
#
# Environment: RUNS [3], DURATION [5] s measured per run (after WARMUP [1] s), CONNS_LIST
# ["100 1000"], KA_CLIENTS ["wrk bench_client"], KA_SERVERS ["ucp-plain ucp-https nginx-plain
# nginx-https"], HS_SECONDS [DURATION], HS_CLIENTS [2], STORM_CONNS [100], STORM_RATE [2000]
# requests/s, STORM_HS_RATE [half the measured capacity; 1000 without the handshake part],
# WSS_SIZES ["64 4096"], WSS_CONNS_LIST [CONNS_LIST], INSTR_SECONDS [3], INSTR_CONNS [10],
# INSTR_RUNS [1], IDLE_CONNS [5000], IDLE_RUNS [1], PARTS ["keepalive handshake storm wss instr
# idle"], SERVER_CPUS [0], CLIENT_CPUS [1], NICE [0], UCP_BIN_DIR [bin], OUT
# [bench/results/<date>-tls.md], SMOKE [0] (1: RUNS=1 DURATION=1 WARMUP=0 CONNS_LIST=100
# IDLE_CONNS=200 unless set). Needs bin/http_server and bin/bench_client (cmake --build
# build/release --target http_server bench_client), wrk, h2load, openssl and nginx
# (scripts/install-deps.sh bench); the wss part bin/proactor_test, bin/ws_bench_client and
# bin/beast_wss_echo (cmake -DUCP_BENCH=ON, Boost); the instr part valgrind. Run it on an
# otherwise idle machine.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${UCP_BIN_DIR:-bin}
SMOKE=${SMOKE:-0}
if [ "$SMOKE" = 1 ]; then
  RUNS=${RUNS:-1} DURATION=${DURATION:-1} WARMUP=${WARMUP:-0} CONNS_LIST=${CONNS_LIST:-100}
  IDLE_CONNS=${IDLE_CONNS:-200}
fi
RUNS=${RUNS:-3}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
CONNS_LIST=${CONNS_LIST:-100 1000}
KA_SERVERS=${KA_SERVERS:-ucp-plain ucp-https nginx-plain nginx-https}
KA_CLIENTS=${KA_CLIENTS:-wrk bench_client}
HS_SECONDS=${HS_SECONDS:-$DURATION}
HS_CLIENTS=${HS_CLIENTS:-2}
STORM_CONNS=${STORM_CONNS:-100}
STORM_RATE=${STORM_RATE:-2000}
STORM_HS_RATE=${STORM_HS_RATE:-}
IDLE_CONNS=${IDLE_CONNS:-5000}
IDLE_RUNS=${IDLE_RUNS:-1}
WSS_SIZES=${WSS_SIZES:-64 4096}
WSS_CONNS_LIST=${WSS_CONNS_LIST:-$CONNS_LIST}
INSTR_SECONDS=${INSTR_SECONDS:-3}
INSTR_CONNS=${INSTR_CONNS:-10}
INSTR_RUNS=${INSTR_RUNS:-1}
PARTS=${PARTS:-keepalive handshake storm wss instr idle}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
NICE=${NICE:-0}
OUT=${OUT:-bench/results/$(date +%Y-%m-%d)-tls.md}
# shellcheck source=lib/bench-common.sh
source scripts/lib/bench-common.sh

die() {
  echo "bench-tls: $*" >&2
  exit 1
}
for tool in http_server bench_client; do
  [ -x "$BIN/$tool" ] || die "$BIN/$tool not found (cmake --build build/release --target $tool)"
done
if [[ " $PARTS " == *" wss "* ]]; then
  for tool in proactor_test ws_bench_client beast_wss_echo; do
    [ -x "$BIN/$tool" ] || die "$BIN/$tool not found (cmake -DUCP_BENCH=ON; cmake --build build/release --target $tool)"
  done
fi
if [[ " $PARTS " == *" instr "* ]]; then
  for tool in valgrind callgrind_control; do
    command -v "$tool" >/dev/null || die "$tool not found (scripts/install-deps.sh memcheck)"
  done
fi
for tool in taskset wrk h2load openssl nginx curl python3; do
  command -v "$tool" >/dev/null || die "$tool not found (scripts/install-deps.sh bench)"
done
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

WORK=$(mktemp -d)
trap 'stop_server; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/www"
echo ok >"$WORK/www/index.html"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout "$WORK/key.pem" \
  -out "$WORK/cert.pem" 2>"$WORK/openssl.log" || die "openssl req failed: $(cat "$WORK/openssl.log")"

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

# start_server NAME: ucp-plain, ucp-https, nginx-plain or nginx-https on a free port pinned to
# SERVER_CPUS; sets SERVER_PID, PORT and URL (the tiny answer's URL).
start_server() {
  local name=$1 tls_port
  PORT=$(free_port)
  case $name in
    ucp-plain | ucp-https)
      local tls=()
      if [ "$name" = ucp-https ]; then
        tls=(--set tls.enable=true --set tls.certificate="$WORK/cert.pem"
          --set tls.private_key="$WORK/key.pem" --set tls.min_version=1.3)
      fi
      (pinned "$SERVER_CPUS" "$BIN/http_server" config/ucp.conf --set server.ip=127.0.0.1 \
        --set server.port="$PORT" --set server.thread_num=1 --set server.read_timeout_ms=0 \
        --set server.max_connections=200000 --set http.root="$WORK/www" --set log.console=true \
        --set log.file= --set log.level=WARN "${tls[@]}" >"$WORK/server.log" 2>&1) &
      SERVER_PID=$!
      wait_listening "$PORT" "$name" "$WORK/server.log"
      ;;
    nginx-plain | nginx-https)
      tls_port=$(free_port)
      rm -rf "$WORK/nginx" && mkdir -p "$WORK/nginx"
      sed -e "s/@PORT@/$PORT/g" -e "s/@TLS_PORT@/$tls_port/g" -e "s|@PREFIX@|$WORK/nginx|g" \
        -e "s|@CERT@|$WORK/cert.pem|g" -e "s|@KEY@|$WORK/key.pem|g" \
        bench/peers/nginx-https.conf.in >"$WORK/nginx/nginx.conf"
      (pinned "$SERVER_CPUS" nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" \
        >"$WORK/server.log" 2>&1) &
      SERVER_PID=$!
      wait_listening "$tls_port" "$name" "$WORK/server.log"
      [ "$name" = nginx-https ] && PORT=$tls_port
      ;;
    ucp-wss)
      (pinned "$SERVER_CPUS" "$BIN/proactor_test" config/ucp.conf --set server.ip=127.0.0.1 \
        --set server.port="$PORT" --set server.protocol=websocket --set server.thread_num=1 \
        --set server.read_timeout_ms=0 --set server.max_connections=200000 --set log.console=true \
        --set log.file= --set log.level=WARN --set tls.enable=true \
        --set tls.certificate="$WORK/cert.pem" --set tls.private_key="$WORK/key.pem" \
        --set tls.min_version=1.3 >"$WORK/server.log" 2>&1) &
      SERVER_PID=$!
      wait_listening "$PORT" "$name" "$WORK/server.log"
      ;;
    beast-wss)
      (pinned "$SERVER_CPUS" "$BIN/beast_wss_echo" -p "$PORT" -c "$WORK/cert.pem" \
        -k "$WORK/key.pem" >"$WORK/server.log" 2>&1) &
      SERVER_PID=$!
      wait_listening "$PORT" "$name" "$WORK/server.log"
      ;;
    *) die "unknown server $name" ;;
  esac
  URL=http://127.0.0.1:$PORT/healthz
  [[ $name == *-https ]] && URL=https://127.0.0.1:$PORT/healthz
  return 0
}

# client_errors JSON: the client log's last lines on stderr when the run counted errors.
client_errors() {
  [[ $1 == *'"errors":0,'* ]] || tail -n 3 "$WORK/client.log" | sed 's/^/    client: /' >&2
}

# ucp_tls_counts: "HANDSHAKES_OK RESUMED" from UCP's /metrics (its own request is one more).
ucp_tls_counts() {
  curl -sk --max-time 10 "https://127.0.0.1:$PORT/metrics" | awk '
    /^ucp_tls_handshakes_total\{.*result="ok"/ { ok += $2 }
    /^ucp_tls_resumed_total\{/ { resumed += $2 }
    END { printf "%d %d\n", ok, resumed }'
}

# run_keepalive_bench_client NAME CONNS RUN: one bench_client run (closed loop, one request in
# flight per connection), the server's CPU time sampled by bench_client over the measured run.
run_keepalive_bench_client() {
  local name=$1 conns=$2 run=$3 json tls=()
  start_server "$name"
  [[ $name == *-https ]] && tls=(--tls)
  json=$( (pinned "$CLIENT_CPUS" "$BIN/bench_client" -h 127.0.0.1 -p "$PORT" "${tls[@]}" \
    --http /healthz -c "$conns" -d "$DURATION" -w "$WARMUP" --json --server-pid "$SERVER_PID") \
    2>>"$WORK/client.log" | tail -1) || true
  stop_server
  [ -n "$json" ] || json='{"qps":0,"p99_us":0,"errors":1,"requests":0,"seconds":0,"server_cpu_s":-1}'
  client_errors "$json"
  echo "ka-bench_client $name $conns $run $json" >>"$WORK/results"
  python3 - "$json" "keepalive bench_client $name $conns conns run $run" >&2 <<'PY'
import json, sys
j = json.loads(sys.argv[1])
cpu = j.get("server_cpu_s", -1)
print(f"  {sys.argv[2]}: {j['qps']:.0f} req/s, p99 {j['p99_us']:.0f} us, "
      f"{j['requests'] / cpu if cpu > 0 else 0:.0f} req/server-CPU-s, errors {j['errors']:.0f}")
PY
}

# run_keepalive_wrk NAME CONNS RUN: one wrk run (after a WARMUP-second one), the server's CPU
# time sampled over the measured run.
run_keepalive_wrk() {
  local name=$1 conns=$2 run=$3 out before after json
  start_server "$name"
  if [ "$WARMUP" != 0 ]; then
    (pinned "$CLIENT_CPUS" wrk -t1 -c"$conns" -d"${WARMUP}s" "$URL") >/dev/null 2>&1 || true
  fi
  before=$(cpu_ticks "$SERVER_PID")
  out=$( (pinned "$CLIENT_CPUS" wrk -t1 -c"$conns" -d"${DURATION}s" --latency "$URL") 2>&1) || true
  after=$(cpu_ticks "$SERVER_PID")
  stop_server
  json=$(wrk_json "$out" "$before" "$after" "$DURATION")
  echo "ka-wrk $name $conns $run $json" >>"$WORK/results"
  python3 - "$json" "keepalive wrk $name $conns conns run $run" >&2 <<'PY'
import json, sys
j = json.loads(sys.argv[1])
cpu = j.get("server_cpu_s", -1)
print(f"  {sys.argv[2]}: {j['qps']:.0f} req/s, p99 {j['p99_us']:.0f} us, "
      f"{j['requests'] / cpu if cpu > 0 else 0:.0f} req/server-CPU-s, errors {j['errors']:.0f}")
PY
}

# run_handshakes NAME MODE RUN: HS_CLIENTS concurrent `openssl s_time -MODE` (new: full
# handshakes, reuse: resumed) for HS_SECONDS; the server's CPU time over them.
run_handshakes() {
  local name=$1 mode=$2 run=$3 before after counts_before="0 0" counts_after="0 0" pids=() i json
  start_server "$name"
  [[ $name == ucp-* ]] && counts_before=$(ucp_tls_counts)
  before=$(cpu_ticks "$SERVER_PID")
  local start_ns end_ns
  start_ns=$(date +%s%N)
  for i in $(seq "$HS_CLIENTS"); do
    (pinned "$CLIENT_CPUS" openssl s_time -connect "127.0.0.1:$PORT" "-$mode" -time "$HS_SECONDS" \
      -www /healthz >"$WORK/s_time.$i" 2>&1) &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || true; done
  end_ns=$(date +%s%N)
  after=$(cpu_ticks "$SERVER_PID")
  [[ $name == ucp-* ]] && counts_after=$(ucp_tls_counts)
  stop_server
  json=$(python3 - "$WORK" "$HS_CLIENTS" "$before" "$after" "$(getconf CLK_TCK)" \
    "$(((end_ns - start_ns) / 1000000))" "$counts_before" "$counts_after" <<'PY'
import json, re, sys
work, clients = sys.argv[1], int(sys.argv[2])
before, after, hz, ms = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
b_ok, b_res = map(int, sys.argv[7].split()); a_ok, a_res = map(int, sys.argv[8].split())
full = resumed = 0
for i in range(1, clients + 1):
    text = open(f"{work}/s_time.{i}").read()
    # One letter per connection: 'r' resumed, '*' a full TLS 1.3 handshake.
    for line in text.splitlines():
        if re.fullmatch(r"[r*]+", line.strip() or "-"):
            full += line.count("*"); resumed += line.count("r")
print(json.dumps({"full": full, "resumed": resumed, "seconds": ms / 1000,
                  "server_cpu_s": (after - before) / hz,
                  "server_ok": a_ok - b_ok - 1 if a_ok else -1,  # minus the first /metrics GET
                  "server_resumed": a_res - b_res if a_ok else -1}))
PY
)
  echo "hs-$mode $name 0 $run $json" >>"$WORK/results"
  python3 - "$json" "handshake $mode $name run $run" >&2 <<'PY'
import json, sys
j = json.loads(sys.argv[1])
n = j["full"] + j["resumed"]; cpu = j["server_cpu_s"]
print(f"  {sys.argv[2]}: {n / j['seconds']:.0f} handshakes/s ({j['full']} full, {j['resumed']} "
      f"resumed; server counted ok {j['server_ok']}, resumed {j['server_resumed']}), "
      f"{n / cpu if cpu > 0 else 0:.0f} per server-CPU-s")
PY
}

# crypto_ceiling RUN: `openssl speed` of the handshake's public-key operations on SERVER_CPUS.
crypto_ceiling() {
  local run=$1 out
  out=$( (pinned "$SERVER_CPUS" openssl speed -seconds 1 ecdsap256 ecdhx25519) 2>/dev/null) || true
  python3 - "$out" "$run" >>"$WORK/results" <<'PY'
import json, re, sys
out = sys.argv[1]
sign = re.search(r"^\s*256 bits ecdsa \(nistp256\)\s+\S+s\s+\S+s\s+([\d.]+)", out, re.M)
x = re.search(r"^\s*253 bits ecdh \(X25519\)\s+\S+s\s+([\d.]+)", out, re.M)
print(f"ceiling openssl 0 {sys.argv[2]} " + json.dumps(
    {"sign_per_s": float(sign.group(1)) if sign else 0.0,
     "x25519_per_s": float(x.group(1)) if x else 0.0}))
PY
  tail -1 "$WORK/results" | sed 's/^/  /' >&2
  [ -x "$BIN/tls_micro" ] || return 0
  out=$( (pinned "$SERVER_CPUS" "$BIN/tls_micro" --benchmark_format=json --benchmark_min_time=0.5 \
    --benchmark_filter='FullTls13_EcdsaP256_X25519|ResumedTls13_X25519|records/Tls13/64$') \
    2>/dev/null) || true
  python3 - "$out" "$run" >>"$WORK/results" <<'PY'
import json, sys
try:
    found = {b["name"]: b for b in json.loads(sys.argv[1])["benchmarks"]}
except (ValueError, KeyError):
    found = {}
def get(prefix, key):
    for name, b in found.items():
        if name.startswith(prefix): return float(b.get(key, 0))
    return 0.0
print(f"ceiling tls_micro 0 {sys.argv[2]} " + json.dumps(
    {"full_us": get("handshakes/FullTls13_EcdsaP256_X25519", "server_us"),
     "resumed_us": get("handshakes/ResumedTls13_X25519", "server_us"),
     "record_pair_us": get("records/Tls13/64", "cpu_time") / 1000}))
PY
  tail -1 "$WORK/results" | sed 's/^/  /' >&2
}

# run_storm NAME RUN: the established connections' latency, quiet and during the storm.
run_storm() {
  local name=$1 run=$2 json storm_pid total per_period hs_before="0 0" hs_after="0 0"
  start_server "$name"
  for phase in quiet storm; do
    storm_pid=
    if [ "$phase" = storm ]; then
      # STORM_HS_RATE new connections per second in 100 ms periods, from 1 s before the
      # measured connections ramp until about 2 s after they stop.
      per_period=$(((STORM_HS_RATE + 5) / 10))
      [ "$per_period" -ge 1 ] || per_period=1
      total=$((per_period * 10 * (WARMUP + DURATION + 3)))
      [[ $name == ucp-* ]] && hs_before=$(ucp_tls_counts)
      (pinned "$CLIENT_CPUS" h2load --h1 -n "$total" -c "$total" -r "$per_period" \
        --rate-period 100ms "$URL" >"$WORK/h2load.log" 2>&1) &
      storm_pid=$!
      sleep 1
    fi
    json=$( (pinned "$CLIENT_CPUS" "$BIN/bench_client" -h 127.0.0.1 -p "$PORT" --tls --http /healthz \
      -c "$STORM_CONNS" --rate "$STORM_RATE" -d "$DURATION" -w "$WARMUP" --json \
      --server-pid "$SERVER_PID") 2>>"$WORK/client.log" | tail -1) || true
    [ -n "$json" ] || json='{"p99_us":0,"p999_us":0,"errors":1,"server_cpu_s":-1,"seconds":0}'
    client_errors "$json"
    local storm_json='{}'
    if [ -n "$storm_pid" ]; then
      for _ in $(seq 1 $((10 * (WARMUP + DURATION + 30)))); do
        kill -0 "$storm_pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -TERM "$storm_pid" 2>/dev/null || true
      wait "$storm_pid" 2>/dev/null || true
      [[ $name == ucp-* ]] && hs_after=$(ucp_tls_counts)
      storm_json=$(python3 - "$WORK/h2load.log" "$hs_before" "$hs_after" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", text)
took = re.search(r"finished in ([\d.]+)(ms|s)", text)
seconds = float(took.group(1)) / (1000 if took.group(2) == "ms" else 1) if took else 0
b_ok, b_res = map(int, sys.argv[2].split()); a_ok, a_res = map(int, sys.argv[3].split())
print(json.dumps({"storm_conns": int(done.group(2)) if done else 0, "storm_s": seconds,
                  "storm_server_full": (a_ok - b_ok - 1) - (a_res - b_res) if a_ok else -1,
                  "storm_server_resumed": a_res - b_res if a_ok else -1}))
PY
)
    fi
    json=$(python3 -c 'import json, sys
a = json.loads(sys.argv[1]); a.update(json.loads(sys.argv[2])); print(json.dumps(a))' \
      "$json" "$storm_json")
    echo "storm-$phase $name 0 $run $json" >>"$WORK/results"
    python3 - "$json" "storm $name $phase run $run" >&2 <<'PY'
import json, sys
j = json.loads(sys.argv[1])
extra = ""
if j.get("storm_s"):
    extra = f", storm {j['storm_conns'] / j['storm_s']:.0f} handshakes/s"
print(f"  {sys.argv[2]}: p99 {j['p99_us']:.0f} us, p99.9 {j.get('p999_us', 0):.0f} us, server CPU "
      f"{100 * j['server_cpu_s'] / j['seconds'] if j.get('seconds') else 0:.0f} %{extra}, "
      f"errors {j.get('errors', 0)}")
PY
  done
  stop_server
}

# run_wss NAME SIZE CONNS RUN: one ws_bench_client --tls run against the WSS echo server.
run_wss() {
  local name=$1 size=$2 conns=$3 run=$4 line json
  start_server "$name"
  line=$( (pinned "$CLIENT_CPUS" timeout $((WARMUP + DURATION + 90)) "$BIN/ws_bench_client" \
    -h 127.0.0.1 -p "$PORT" -c "$conns" -s "$size" -d "$DURATION" -w "$WARMUP" --tls \
    --server-pid "$SERVER_PID") 2>>"$WORK/client.log" | grep '^result' || true)
  stop_server
  [ -n "$line" ] || line="result messages=0 errors=-1"
  json=$(python3 -c 'import json, sys
print(json.dumps({k: float(v) for k, v in (f.split("=", 1) for f in sys.argv[1].split()[1:])}))' \
    "$line")
  echo "wss-$size $name $conns $run $json" >>"$WORK/results"
  echo "  wss $size B x $conns conns, $name run $run: $line" >&2
}

# instructions NAME RUN: the server under callgrind; its user-space instructions per request.
instructions() {
  local name=$1 run=$2 tls=() json requests total
  PORT=$(free_port)
  rm -f "$WORK"/callgrind.*
  local grind=(valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.%p")
  case $name in
    ucp-plain | ucp-https)
      local keys=()
      if [ "$name" = ucp-https ]; then
        keys=(--set tls.enable=true --set tls.certificate="$WORK/cert.pem"
          --set tls.private_key="$WORK/key.pem" --set tls.min_version=1.3)
      fi
      (pinned "$SERVER_CPUS" "${grind[@]}" "$BIN/http_server" config/ucp.conf \
        --set server.ip=127.0.0.1 --set server.port="$PORT" --set server.thread_num=1 \
        --set server.read_timeout_ms=0 --set event_loop.backend=epoll --set http.root="$WORK/www" \
        --set log.console=true --set log.file= --set log.level=WARN "${keys[@]}" \
        >"$WORK/server.log" 2>&1) &
      SERVER_PID=$!
      ;;
    nginx-plain | nginx-https)
      local tls_port
      tls_port=$(free_port)
      rm -rf "$WORK/nginx" && mkdir -p "$WORK/nginx"
      sed -e "s/@PORT@/$PORT/g" -e "s/@TLS_PORT@/$tls_port/g" -e "s|@PREFIX@|$WORK/nginx|g" \
        -e "s|@CERT@|$WORK/cert.pem|g" -e "s|@KEY@|$WORK/key.pem|g" \
        bench/peers/nginx-https.conf.in >"$WORK/nginx/nginx.conf"
      (pinned "$SERVER_CPUS" "${grind[@]}" nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" \
        >"$WORK/server.log" 2>&1) &
      SERVER_PID=$!
      [ "$name" = nginx-https ] && PORT=$tls_port
      ;;
  esac
  for _ in $(seq 1 600); do
    ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q LISTEN && break
    sleep 0.1
  done
  [[ $name == *-https ]] && tls=(--tls)
  (pinned "$CLIENT_CPUS" "$BIN/bench_client" -h 127.0.0.1 -p "$PORT" "${tls[@]}" --http /healthz \
    -c "$INSTR_CONNS" -d 1 --json) >/dev/null 2>>"$WORK/client.log" || true
  callgrind_control -z "$SERVER_PID" >/dev/null 2>&1 || true
  json=$( (pinned "$CLIENT_CPUS" "$BIN/bench_client" -h 127.0.0.1 -p "$PORT" "${tls[@]}" \
    --http /healthz -c "$INSTR_CONNS" -d "$INSTR_SECONDS" --json) 2>>"$WORK/client.log" | tail -1) || true
  callgrind_control -d "$SERVER_PID" >/dev/null 2>&1 || true
  stop_server
  requests=$(python3 -c 'import json, sys; print(int(json.loads(sys.argv[1] or "{}").get("requests", 0)))' "$json")
  total=$(awk '/^(summary|totals):/ {print $2; exit}' "$WORK"/callgrind.*.1 2>/dev/null || true)
  echo "instr $name 0 $run {\"requests\":$requests,\"instructions\":${total:-0}}" >>"$WORK/results"
  echo "  instr $name run $run: ${total:-?} instructions for $requests requests" >&2
}

# idle_memory NAME RUN: the server's RSS growth per idle connection (one GET made on each).
idle_memory() {
  local name=$1 run=$2 before after holder
  start_server "$name"
  # A server listens before it has finished starting (nginx goes on touching its memory after
  # listen(): its "before" read at once was 24 to 36 MiB, by the machine's load): the figure
  # before the connections is taken once it holds still, 3 readings 0.2 s apart (5 s at most).
  local last=-1 same=0
  for _ in $(seq 1 25); do
    before=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status")
    if [ "$before" = "$last" ]; then same=$((same + 1)); else same=0; fi
    [ "$same" -ge 2 ] && break
    last=$before
    sleep 0.2
  done
  rm -f "$WORK/ready" && mkfifo "$WORK/hold"
  (pinned "$CLIENT_CPUS" python3 - "$PORT" "$IDLE_CONNS" "$WORK/hold" "$WORK/ready" \
    "${URL%%:*}" <<'PY'
import socket, ssl, sys
port, count, hold, ready, scheme = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
context = ssl.create_default_context()
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
conns = []
for i in range(count):
    s = socket.create_connection(("127.0.0.1", port))
    if scheme == "https":
        s = context.wrap_socket(s, server_hostname="localhost")
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    answer = b""
    while not answer.endswith(b"ok"):
        chunk = s.recv(4096)
        if not chunk: sys.exit(f"connection {i} closed")
        answer += chunk
    conns.append(s)
open(ready, "w").write("ready\n")
open(hold).read()  # until the script has measured
PY
  ) 2>>"$WORK/client.log" &
  holder=$!
  for _ in $(seq 1 1200); do
    [ -s "$WORK/ready" ] && break
    kill -0 "$holder" 2>/dev/null || break
    sleep 0.1
  done
  sleep 1
  after=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status")
  [ -s "$WORK/ready" ] || after=-1
  echo >"$WORK/hold" &
  local opener=$!
  wait "$holder" 2>/dev/null || true
  kill "$opener" 2>/dev/null || true
  wait "$opener" 2>/dev/null || true
  rm -f "$WORK/hold"
  stop_server
  echo "idle $name $IDLE_CONNS $run {\"before_kb\":$before,\"after_kb\":$after}" >>"$WORK/results"
  echo "  idle $name run $run: RSS $before -> $after KiB with $IDLE_CONNS connections" >&2
}

# The median of UCP's full handshakes per server-CPU-second so far.
handshake_capacity() {
  python3 - "$WORK/results" <<'PY'
import json, statistics, sys
xs = []
for line in open(sys.argv[1]):
    kind, name, _, _, raw = line.split(" ", 4)
    if kind == "hs-new" and name == "ucp-https":
        j = json.loads(raw)
        if j["server_cpu_s"] > 0: xs.append((j["full"] + j["resumed"]) / j["server_cpu_s"])
print(f"{statistics.median(xs):.0f}" if xs else "")
PY
}

echo "bench-tls: parts $PARTS; $RUNS runs x ${DURATION} s (+${WARMUP} s warm-up); keep-alive at" \
  "$CONNS_LIST conns ($KA_SERVERS); handshakes $HS_CLIENTS x s_time for ${HS_SECONDS} s;" \
  "storm: $STORM_CONNS conns at $STORM_RATE req/s; $IDLE_CONNS idle; server cpus $SERVER_CPUS," \
  "client cpus $CLIENT_CPUS, $(nproc) CPUs, kernel $(uname -r), $(openssl version)" >&2
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
: >"$WORK/results"
if [[ " $PARTS " == *" keepalive "* ]]; then
  for run in $(seq "$RUNS"); do
    for conns in $CONNS_LIST; do
      for client in $KA_CLIENTS; do
        for server in $KA_SERVERS; do "run_keepalive_$client" "$server" "$conns" "$run"; done
      done
    done
  done
fi
if [[ " $PARTS " == *" handshake "* ]]; then
  for run in $(seq "$RUNS"); do
    crypto_ceiling "$run"
    for mode in new reuse; do
      for server in ucp-https nginx-https; do run_handshakes "$server" "$mode" "$run"; done
    done
  done
fi
if [[ " $PARTS " == *" storm "* ]]; then
  if [ -z "$STORM_HS_RATE" ]; then
    capacity=$(handshake_capacity)
    STORM_HS_RATE=$((${capacity:-2000} / 2))
  fi
  echo "bench-tls: storm at $STORM_HS_RATE new connections/s" >&2
  for run in $(seq "$RUNS"); do
    for server in ucp-https nginx-https; do run_storm "$server" "$run"; done
  done
fi
if [[ " $PARTS " == *" wss "* ]]; then
  for run in $(seq "$RUNS"); do
    for size in $WSS_SIZES; do
      for conns in $WSS_CONNS_LIST; do
        for server in ucp-wss beast-wss; do run_wss "$server" "$size" "$conns" "$run"; done
      done
    done
  done
fi
if [[ " $PARTS " == *" instr "* ]]; then
  for run in $(seq "$INSTR_RUNS"); do
    for server in ucp-plain ucp-https nginx-plain nginx-https; do instructions "$server" "$run"; done
  done
fi
if [[ " $PARTS " == *" idle "* ]]; then
  for run in $(seq "$IDLE_RUNS"); do
    for server in ucp-https nginx-https ucp-plain nginx-plain; do idle_memory "$server" "$run"; done
  done
fi

mkdir -p "$(dirname "$OUT")"
{
  echo "# TLS: UCP beside nginx (and Boost.Beast for WSS), $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "scripts/bench-tls.sh (PARTS=\"$PARTS\" RUNS=$RUNS DURATION=$DURATION WARMUP=$WARMUP" \
    "CONNS_LIST=\"$CONNS_LIST\" WSS_CONNS_LIST=\"$WSS_CONNS_LIST\" IDLE_CONNS=$IDLE_CONNS)," \
    "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) CPUs, kernel" \
    "$(uname -r), $(openssl version | cut -d' ' -f1-2), nginx $(nginx -v 2>&1 | sed 's|.*/||')." \
    "Load average (1, 5, 15 min) $LOAD_START at the start, $(cut -d' ' -f1-3 /proc/loadavg) at" \
    "the end."
  echo
} >"$OUT"
python3 - "$WORK/results" "$RUNS" "$DURATION" "$HS_SECONDS" "$HS_CLIENTS" "$STORM_CONNS" \
  "$STORM_RATE" "${STORM_HS_RATE:-0}" "$KA_SERVERS" >>"$OUT" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    kind, name, conns, run, raw = line.split(" ", 4)
    rows.setdefault((kind, name, int(conns)), []).append(json.loads(raw))
runs, duration, hs_seconds, hs_clients = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
storm_conns, storm_rate, storm_hs_rate = sys.argv[6], sys.argv[7], sys.argv[8]
ka_servers = sys.argv[9].split()
names = {"ucp-plain": "UCP http_server, HTTP", "ucp-https": "UCP http_server, HTTPS",
         "nginx-plain": "nginx, HTTP", "nginx-https": "nginx, HTTPS"}
def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")
def per_cpu(n, j):
    cpu = j.get("server_cpu_s", -1)
    return n / cpu if cpu and cpu > 0 and n > 0 else float("nan")
def ratio(a, b):
    return f"{a / b:.2f}x" if a == a and b == b and b else "n/a"
def cpu_pct(vs):
    return med([100 * j["server_cpu_s"] / j["seconds"] for j in vs if j.get("seconds", 0) > 0])
print(f"Runs per cell: {runs}; medians. Server (one worker) on its own CPU, every client on the "
      "other. TLS 1.3, ECDSA P-256 certificate, X25519, the same OpenSSL; nginx with "
      "ssl_session_cache and tickets.\n")
ka_titles = {"ka-wrk": "wrk -t1; the measured run includes its connections' handshakes",
             "ka-bench_client": "bin/bench_client --http /healthz [--tls], closed loop; the "
                                "handshakes before the measured interval"}
for kind in ("ka-wrk", "ka-bench_client"):
    ka = sorted({c for k, _, c in rows if k == kind})
    if not ka: continue
    print(f"## HTTPS keep-alive, tiny response ({ka_titles[kind]}; {duration} s): requests per "
          "server-CPU-second\n")
    print("| conns | server | req/s | server CPU % | req/CPU-s | p99 µs | errors |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for c in ka:
        for s in ka_servers:
            vs = rows.get((kind, s, c), [])
            if not vs: continue
            print(f"| {c} | {names[s]} | {med([j['qps'] for j in vs]):.0f} | {cpu_pct(vs):.0f} | "
                  f"{med([per_cpu(j['requests'], j) for j in vs]):.0f} | "
                  f"{med([j['p99_us'] for j in vs]):.0f} | {sum(j['errors'] for j in vs):.0f} |")
    print()
    print("| conns | UCP / nginx HTTPS req/CPU-s (target >= 1.0x) | UCP HTTPS / UCP HTTP (TLS cost: target >= 0.85x) | nginx HTTPS / nginx HTTP | UCP / nginx HTTP req/CPU-s | p99 UCP / nginx HTTPS |")
    print("|---:|---:|---:|---:|---:|---:|")
    for c in ka:
        r = lambda s: med([per_cpu(j["requests"], j) for j in rows.get((kind, s, c), [])])
        p = lambda s: med([j["p99_us"] for j in rows.get((kind, s, c), [])])
        print(f"| {c} | {ratio(r('ucp-https'), r('nginx-https'))} | {ratio(r('ucp-https'), r('ucp-plain'))} | "
              f"{ratio(r('nginx-https'), r('nginx-plain'))} | {ratio(r('ucp-plain'), r('nginx-plain'))} | "
              f"{ratio(p('ucp-https'), p('nginx-https'))} |")
    engine = rows.get(("ceiling", "tls_micro", 0), [])
    pair = med([j["record_pair_us"] for j in engine if j["record_pair_us"] > 0])
    if pair == pair:
        print(f"\nCeiling: a keep-alive request over TLS adds at least one record opened and one "
              f"sealed; bin/tls_micro (records/Tls13/64, in memory, the same run) puts that at "
              f"{pair:.2f} µs of CPU. Added to UCP's plaintext cost per request here, the best "
              "HTTPS could do:\n")
        print("| conns | UCP HTTP µs/request | + record pair = HTTPS ceiling req/CPU-s | ceiling / HTTP (best TLS cost) | UCP HTTPS / ceiling |")
        print("|---:|---:|---:|---:|---:|")
        for c in ka:
            plain = med([per_cpu(j["requests"], j) for j in rows.get((kind, "ucp-plain", c), [])])
            tls = med([per_cpu(j["requests"], j) for j in rows.get((kind, "ucp-https", c), [])])
            if plain != plain: continue
            best = 1e6 / (1e6 / plain + pair)
            print(f"| {c} | {1e6 / plain:.2f} | {best:.0f} | {ratio(best, plain)} | {ratio(tls, best)} |")
    print()
hs = [k for k in ("hs-new", "hs-reuse") if any(key[0] == k for key in rows)]
if hs:
    print(f"\n## Handshakes per server-CPU-second ({hs_clients} concurrent `openssl s_time -new` / "
          f"`-reuse`, {hs_seconds} s, one GET per connection)\n")
    print("| handshake | server | connections/s | server CPU % | per server-CPU-s | s_time: full / resumed | UCP /metrics: full / resumed |")
    print("|---|---|---:|---:|---:|---:|---:|")
    rate = {}
    for k in hs:
        label = "full" if k == "hs-new" else "resumed"
        for s in ("ucp-https", "nginx-https"):
            vs = rows.get((k, s, 0), [])
            if not vs: continue
            rate[(k, s)] = med([per_cpu(j["full"] + j["resumed"], j) for j in vs])
            conn_s = med([(j["full"] + j["resumed"]) / j["seconds"] for j in vs if j["seconds"] > 0])
            full = sum(j["full"] for j in vs); res = sum(j["resumed"] for j in vs)
            srv = "n/a"
            if s.startswith("ucp") and all(j["server_ok"] >= 0 for j in vs):
                ok = sum(j["server_ok"] for j in vs); sres = sum(j["server_resumed"] for j in vs)
                srv = f"{ok - sres} / {sres}"
            print(f"| {label} | {names[s]} | {conn_s:.0f} | {cpu_pct(vs):.0f} | {rate[(k, s)]:.0f} | "
                  f"{full} / {res} | {srv} |")
    ceil = rows.get(("ceiling", "openssl", 0), [])
    sign = med([j["sign_per_s"] for j in ceil]); x = med([j["x25519_per_s"] for j in ceil])
    full_ceiling = 1 / (1 / sign + 2 / x) if sign and x else float("nan")
    res_ceiling = x / 2 if x else float("nan")
    engine = rows.get(("ceiling", "tls_micro", 0), [])
    engine_full = med([1e6 / j["full_us"] for j in engine if j["full_us"] > 0])
    engine_res = med([1e6 / j["resumed_us"] for j in engine if j["resumed_us"] > 0])
    print()
    print("| handshake | UCP / nginx (target >= 1.0x) | OpenSSL public-key ceiling per CPU-s | UCP / that | nginx / that | engine in memory (tls_micro) per CPU-s | UCP / that | nginx / that |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for k, c, e in (("hs-new", full_ceiling, engine_full), ("hs-reuse", res_ceiling, engine_res)):
        if (k, "ucp-https") not in rate: continue
        u = rate[(k, "ucp-https")]; n = rate.get((k, "nginx-https"), float("nan"))
        print(f"| {'full' if k == 'hs-new' else 'resumed'} | {ratio(u, n)} | {c:.0f} | "
              f"{ratio(u, c)} | {ratio(n, c)} | {e:.0f} | {ratio(u, e)} | {ratio(n, e)} |")
    if ceil:
        print(f"\nCeiling: `openssl speed ecdsap256 ecdhx25519` on the server's CPU: {sign:.0f} "
              f"ECDSA P-256 signs/s, {x:.0f} X25519 derives/s; a full TLS 1.3 handshake costs the "
              "server one sign and two X25519 multiplications (its key share, the shared "
              "secret), a resumed one (psk_dhe_ke) the two multiplications. Everything else "
              "(HKDF, record layer, certificate message, the HTTP request, the socket calls) is "
              "above that.")
    if engine:
        print(f"\nEngine in memory: bin/tls_micro on the server's CPU, the server's CPU time in "
              f"UCP's TLS engine (OpenSSL through memory, no socket) per full TLS 1.3 handshake "
              f"{med([j['full_us'] for j in engine]):.0f} µs, per resumed one "
              f"{med([j['resumed_us'] for j in engine]):.0f} µs: what a handshake costs before "
              "any I/O, accept, HTTP request or close.")
st = [s for s in ("ucp-https", "nginx-https") if ("storm-quiet", s, 0) in rows]
if st:
    print(f"\n## Handshake storm: keep-alive latency on established connections of the same worker\n")
    print(f"{storm_conns} established HTTPS connections, bench_client --tls --http /healthz, open "
          f"loop at {storm_rate} requests/s ({duration} s, latency from each request's due time), "
          f"quiet and while `h2load --h1 -r` opens {storm_hs_rate} new connections/s (full "
          "handshakes, one GET each; about half of UCP's measured full-handshake capacity per "
          "server-CPU-second), the same rate for both servers. Client-limited: bench_client's "
          "own pacing delay (p99) was over a tenth of the p99 it measured, so the client's CPU, "
          "shared with h2load, is part of that figure.\n")
    print("| server | p99 µs quiet | p99 µs storm | storm / quiet (target <= 2x) | p99.9 µs quiet | p99.9 µs storm | server CPU % quiet / storm | storm connections/s (h2load) | UCP /metrics in the storm phase: full / resumed handshakes (with the measured connections) | runs the client called client-limited, quiet / storm | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    p99 = {}
    for s in st:
        # A run whose client failed (a handshake timed out in the ramp) measured nothing: it
        # counts in the errors column, not in the medians.
        qa = rows[("storm-quiet", s, 0)]; wa = rows.get(("storm-storm", s, 0), [])
        q = [j for j in qa if j.get("errors", 0) == 0] or qa
        w = [j for j in wa if j.get("errors", 0) == 0] or wa
        p99[s] = (med([j["p99_us"] for j in q]), med([j["p99_us"] for j in w]))
        hs_s = med([j["storm_conns"] / j["storm_s"] for j in w if j.get("storm_s")])
        full = "n/a"
        if w and all(j.get("storm_server_full", -1) >= 0 for j in w):
            full = (f"{sum(j['storm_server_full'] for j in w)} / "
                    f"{sum(j['storm_server_resumed'] for j in w)} (h2load: {sum(j['storm_conns'] for j in w)})")
        print(f"| {names[s]} | {p99[s][0]:.0f} | {p99[s][1]:.0f} | {ratio(p99[s][1], p99[s][0])} | "
              f"{med([j.get('p999_us', 0) for j in q]):.0f} | {med([j.get('p999_us', 0) for j in w]):.0f} | "
              f"{cpu_pct(q):.0f} / {cpu_pct(w):.0f} | {hs_s:.0f} | {full} | "
              f"{sum(bool(j.get('client_limited')) for j in q)} / "
              f"{sum(bool(j.get('client_limited')) for j in w)} | "
              f"{sum(j.get('errors', 0) for j in qa + wa)} in {sum(j.get('errors', 0) > 0 for j in qa + wa)} runs |")
    if len(p99) == 2:
        print(f"\nStorm p99 UCP / nginx (target <= 1.0x): "
              f"{ratio(p99['ucp-https'][1], p99['nginx-https'][1])}.")
wss = sorted({(int(k[4:]), c) for k, _, c in rows if k.startswith("wss-")})
if wss:
    print(f"\n## WSS echo: messages per server-CPU-second (bin/ws_bench_client --tls, one binary "
          f"message in flight per connection, {duration} s)\n")
    print("| size | conns | server | msgs/s | server CPU % | msgs/CPU-s | p99 µs | errors |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|")
    wnames = {"ucp-wss": "UCP proactor_test (websocket, TLS)", "beast-wss": "Boost.Beast over ssl_stream"}
    def wm(size, conns, s, key):
        return med([j.get(key, float("nan")) for j in rows.get((f"wss-{size}", s, conns), [])
                    if j.get("messages", 0) > 0])
    for size, conns in wss:
        for s in ("ucp-wss", "beast-wss"):
            vs = rows.get((f"wss-{size}", s, conns), [])
            if not vs: continue
            cpu = wm(size, conns, s, "server_cpu_s"); secs = wm(size, conns, s, "seconds")
            print(f"| {size} | {conns} | {wnames[s]} | {wm(size, conns, s, 'msgs_per_s'):.0f} | "
                  f"{100 * cpu / secs if secs == secs and secs else float('nan'):.0f} | "
                  f"{wm(size, conns, s, 'msgs_per_server_cpu_s'):.0f} | {wm(size, conns, s, 'p99_us'):.0f} | "
                  f"{sum(int(j.get('errors', 0)) for j in vs)} |")
    print()
    print("| size | conns | UCP / Beast msgs/CPU-s (target >= 1.3x) | p99 UCP / Beast |")
    print("|---:|---:|---:|---:|")
    for size, conns in wss:
        print(f"| {size} | {conns} | {ratio(wm(size, conns, 'ucp-wss', 'msgs_per_server_cpu_s'), wm(size, conns, 'beast-wss', 'msgs_per_server_cpu_s'))} | "
              f"{ratio(wm(size, conns, 'ucp-wss', 'p99_us'), wm(size, conns, 'beast-wss', 'p99_us'))} |")
instr = [s for s in ("ucp-plain", "ucp-https", "nginx-plain", "nginx-https") if ("instr", s, 0) in rows]
if instr:
    print("\n## User-space instructions per keep-alive request (callgrind; UCP on the epoll backend)\n")
    print("| server | instructions per request | runs |")
    print("|---|---:|---:|")
    ipr = {}
    for s in instr:
        vs = [j for j in rows[("instr", s, 0)] if j["requests"] > 0 and j["instructions"] > 0]
        ipr[s] = med([j["instructions"] / j["requests"] for j in vs])
        print(f"| {names[s]} | {ipr[s]:.0f} | {len(vs)} |")
    if len(ipr) == 4:
        print(f"\nWhat TLS adds per request: UCP {ipr['ucp-https'] - ipr['ucp-plain']:.0f}, nginx "
              f"{ipr['nginx-https'] - ipr['nginx-plain']:.0f} instructions; UCP / nginx: HTTP "
              f"{ratio(ipr['ucp-plain'], ipr['nginx-plain'])}, HTTPS "
              f"{ratio(ipr['ucp-https'], ipr['nginx-https'])}.")
idle = [s for s in ("ucp-https", "nginx-https", "ucp-plain", "nginx-plain") if any(k == "idle" and n == s for k, n, _ in rows)]
if idle:
    print("\n## Idle connection memory (server RSS growth / connections, each made one keep-alive GET)\n")
    print("| server | conns | RSS before KiB | RSS with them KiB | KiB per connection |")
    print("|---|---:|---:|---:|---:|")
    per = {}
    for s in idle:
        (c, vs), = [(c, v) for (k, n, c), v in rows.items() if k == "idle" and n == s]
        vs = [j for j in vs if j["after_kb"] >= 0]
        if not vs: continue
        b = med([j["before_kb"] for j in vs]); a = med([j["after_kb"] for j in vs])
        per[s] = med([(j["after_kb"] - j["before_kb"]) / c for j in vs])
        print(f"| {names[s]} | {c} | {b:.0f} | {a:.0f} | {per[s]:.2f} |")
    if "ucp-https" in per and "nginx-https" in per:
        print(f"\nPer idle TLS connection, UCP / nginx (target <= 1.0x): "
              f"{ratio(per['ucp-https'], per['nginx-https'])}.")
PY
echo "bench-tls: report in $OUT" >&2
cat "$OUT"

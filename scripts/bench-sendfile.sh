#!/usr/bin/env bash
# Static files through bin/http_server against nginx with `sendfile on`: a 4 KiB file at 100 and
# 1,000 connections and a 1 MiB file at 10 connections, wrk -t1 on its own CPU, the server
# pinned to another. Two figures per run, and each server's ratio to nginx on both:
#   - requests per second, what wrk saw: the throughput a user reproduces. With one wrk thread
#     the client can be the limit (then both servers show about its rate, and the ratio says
#     little but that);
#   - requests per server-CPU-second (utime + stime of the server's process, its io-wq workers
#     included, from /proc/PID/stat over the run): what a request costs the server, whoever
#     the limit is. The two differ when a server does not fill its core.
# For the 1 MiB file also bytes per server-CPU-second. Servers alternate within each round;
# medians over the rounds and the ratios to nginx per round, medians of those.
#
# nginx runs as its documentation and Debian's package leave it for this workload: one worker,
# `sendfile on`, `tcp_nopush` off (nginx's default: with it on, every response costs two more
# setsockopt(TCP_CORK) calls, which at 4 KiB makes nginx slower and the ratio larger), no
# open_file_cache, access log off, keep-alive without a request limit.
#
#   scripts/bench-sendfile.sh                       # 3 rounds of 5 s per server and workload
#   ROUNDS=5 DURATION=10 SERVERS="ucp nginx" scripts/bench-sendfile.sh
#   NGINX_NOPUSH=on scripts/bench-sendfile.sh        # nginx as the figures before 2026-11-26
#
# SERVERS names what runs: ucp (bin/http_server as built), nginx, any NAME=ENV=VALUE, which
# runs bin/http_server with that environment variable (for A/B runs of one binary), and any
# NAME@DIR, which runs DIR/http_server with DIR/../config/ucp.conf when present (for A/B runs
# of two builds, e.g. "old@/tmp/old ucp"),
# and nginx-cache (nginx with open_file_cache on).
# Environment: ROUNDS [3], DURATION [5] s, SERVERS ["ucp nginx"], SERVER_CPUS [0], CLIENT_CPUS
# [1; "any": wrk not pinned], WRK_THREADS [1], NGINX_NOPUSH [off], NICE [-10 as root, else 0],
# UCP_BIN_DIR [bin], NGINX [/usr/sbin/nginx], WRK [wrk].
# Needs bin/http_server, wrk and nginx (scripts/install-deps.sh bench). Run it on an otherwise
# idle machine: other load makes the numbers noise.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${UCP_BIN_DIR:-bin}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
SERVERS=${SERVERS:-ucp nginx}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
WRK_THREADS=${WRK_THREADS:-1}
NGINX_NOPUSH=${NGINX_NOPUSH:-off}
NGINX=${NGINX:-/usr/sbin/nginx}
WRK=${WRK:-wrk}
if [ "$(id -u)" -eq 0 ]; then NICE=${NICE:--10}; else NICE=${NICE:-0}; fi
WORKLOADS=${WORKLOADS:-"4k.bin:100 4k.bin:1000 1m.bin:10"}

die() {
  echo "bench-sendfile: $*" >&2
  exit 1
}
[ -x "$BIN/http_server" ] || die "$BIN/http_server not found (cmake --build build/release --target http_server)"
command -v "$WRK" >/dev/null || die "wrk not found (scripts/install-deps.sh bench)"
command -v taskset >/dev/null || die "taskset not found (util-linux)"
command -v python3 >/dev/null || die "python3 not found"
case " $SERVERS " in *" nginx "*) [ -x "$NGINX" ] || die "nginx not found ($NGINX)" ;; esac

. scripts/lib/bench-common.sh  # pinned, stop_server, cpu_ticks (the working directory is the root)

# client CMD...: runs CMD (wrk) on CLIENT_CPUS, or wherever the scheduler puts it with "any".
# Call it only in a subshell: it execs.
client() {
  if [ "$CLIENT_CPUS" = any ]; then
    exec "$@"
  fi
  pinned "$CLIENT_CPUS" "$@"
}

WORK=$(mktemp -d)
cleanup() {
  stop_server
  rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/www"
head -c 4096 /dev/urandom >"$WORK/www/4k.bin"
head -c 1048576 /dev/urandom >"$WORK/www/1m.bin"
for size in 16 64 256; do head -c $((size * 1024)) /dev/urandom >"$WORK/www/${size}k.bin"; done

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_server NAME: starts it on a free port; sets SERVER_PID and PORT.
start_server() {
  local name=$1
  PORT=$(free_port)
  case $name in
    nginx | nginx-cache)
      # nginx-cache: nginx with its open_file_cache on (descriptors and sizes kept for 1 s,
      # as bin/http_server keeps them), an extra peer; ratios are to plain nginx.
      local prefix=$WORK/$name cache=""
      [ "$name" = nginx-cache ] && cache="open_file_cache max=1000 inactive=20s; open_file_cache_valid 1s;"
      mkdir -p "$prefix"
      sed -e "s#@PORT@#$PORT#g" -e "s#@PREFIX@#$prefix#g" bench/peers/nginx.conf.in |
        python3 -c 'import sys; t=sys.stdin.read(); print(t.replace(
"""        location / {
            default_type text/plain;
            return 200 "Hello, World!\\n";
        }""", """        sendfile on;
        tcp_nopush '"$NGINX_NOPUSH"';
        '"$cache"'
        root '"$WORK/www"';"""))' >"$prefix/nginx.conf"
      (pinned "$SERVER_CPUS" "$NGINX" -p "$prefix" -c "$prefix/nginx.conf") >"$WORK/$name.log" 2>&1 &
      ;;
    *)
      local env_setting=() binary=$ROOT/$BIN/http_server config=$ROOT/config/ucp.conf
      case $name in
        # Another build: its own config file when it has one (its keys are what it knows).
        *@*) binary=${name#*@}/http_server
             [ -f "${name#*@}/../config/ucp.conf" ] && config=${name#*@}/../config/ucp.conf ;;
        *=*) env_setting=("${name#*=}") ;;
      esac
      [ -x "$binary" ] || die "$binary not found"
      (cd "$WORK" && pinned "$SERVER_CPUS" env "${env_setting[@]}" "$binary" \
        "$config" --set server.ip=127.0.0.1 --set server.port="$PORT" \
        --set http.root="$WORK/www" --set log.file= --set log.console=true \
        --set log.level=WARN --set server.thread_num=1) >"$WORK/${name%%[=@]*}.log" 2>&1 &
      ;;
  esac
  SERVER_PID=$!
  for _ in $(seq 100); do
    if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$PORT),0.2)" 2>/dev/null; then
      return 0
    fi
    sleep 0.05
  done
  die "$name did not start: $(tail -3 "$WORK/${name%%[=@]*}.log")"
}


# run_one NAME FILE CONNS ROUND: one wrk run; appends a result line.
run_one() {
  local name=$1 file=$2 conns=$3 round=$4
  start_server "$name"
  # warm the page cache and the server's caches
  (client "$WRK" -t1 -c10 -d1s "http://127.0.0.1:$PORT/$file") >/dev/null 2>&1 || true
  local before after out
  before=$(cpu_ticks "$SERVER_PID")
  out=$( (client "$WRK" -t"$WRK_THREADS" -c"$conns" -d"${DURATION}s" \
    "http://127.0.0.1:$PORT/$file") 2>&1)
  after=$(cpu_ticks "$SERVER_PID")
  stop_server
  local rps
  rps=$(echo "$out" | sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p')
  local errors
  errors=$(echo "$out" | sed -n 's/.*Non-2xx or 3xx responses: *\([0-9]*\).*/\1/p')
  echo "$name $file $conns $round ${rps:-0} $((after - before)) ${errors:-0}" >>"$WORK/results"
  printf '  %-28s %-7s c=%-5s round %s: %10s req/s, server CPU %5.2f s%s\n' "$name" "$file" \
    "$conns" "$round" "${rps:-?}" "$(echo "($after - $before) / $(getconf CLK_TCK)" | bc -l)" \
    "$([ "${errors:-0}" != 0 ] && echo ", $errors non-2xx")"
}

echo "bench-sendfile: $ROUNDS round(s) x ${DURATION}s, servers: $SERVERS; server CPU $SERVER_CPUS," \
  "wrk -t$WRK_THREADS on CPU $CLIENT_CPUS; nginx: 1 worker, sendfile on, tcp_nopush $NGINX_NOPUSH"
for round in $(seq "$ROUNDS"); do
  for workload in $WORKLOADS; do
    file=${workload%%:*}
    conns=${workload##*:}
    for name in $SERVERS; do run_one "$name" "$file" "$conns" "$round"; done
  done
done

python3 - "$WORK/results" "$DURATION" "$(getconf CLK_TCK)" <<'EOF'
import statistics, sys
path, duration, hz = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
sizes = {"4k.bin": 4096, "16k.bin": 16384, "64k.bin": 65536, "256k.bin": 262144,
         "1m.bin": 1048576}
runs = {}
for line in open(path):
    name, file, conns, rnd, rps, ticks, errors = line.split()
    cpu = float(ticks) / hz
    rps = float(rps)
    per_cpu = rps * duration / cpu if cpu > 0 else 0.0
    runs.setdefault((file, conns), {}).setdefault(name, {})[rnd] = (rps, per_cpu, cpu / duration)

def ratio(rounds, base, index):
    ratios = [rounds[r][index] / base[r][index] for r in rounds if r in base and base[r][index] > 0]
    return f"{statistics.median(ratios):.2f}x" if ratios else "-"

print()
print("medians over rounds; ratios to nginx are medians of per-round ratios; CPU: the server's")
print(f"  {'file':7s} {'conns':>6s} {'server':28s} {'req/s':>10s} {'ratio':>6s} {'CPU':>5s}"
      f" {'req/CPU-s':>10s} {'ratio':>6s}")
for (file, conns), by_name in runs.items():
    base = by_name.get("nginx", {})
    for name, rounds in by_name.items():
        rps = statistics.median(v[0] for v in rounds.values())
        per_cpu = statistics.median(v[1] for v in rounds.values())
        busy = statistics.median(v[2] for v in rounds.values())
        r1 = ratio(rounds, base, 0) if name != "nginx" and base else ""
        r2 = ratio(rounds, base, 1) if name != "nginx" and base else ""
        extra = f"  {per_cpu * sizes[file] / 2**30:.2f} GiB/CPU-s" if file in sizes else ""
        print(f"  {file:7s} {conns:>6s} {name:28s} {rps:10,.0f} {r1:>6s} {busy:5.0%}"
              f" {per_cpu:10,.0f} {r2:>6s}{extra}")
EOF

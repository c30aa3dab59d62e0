#!/usr/bin/env bash
# make soak: a long mixed run that must not grow. Two servers (protocol echo and protocol http)
# take, for SOAK_SECONDS (default 600):
#   - steady echo load     bin/bench_client, 32 connections, 512 B messages, every byte verified
#   - steady HTTP load     wrk, 32 keep-alive connections (a curl loop when wrk is missing)
#   - connection churn     bin/test_client normal+abort in a loop (new connections, RSTs mid-
#                          transfer) and one-request HTTP connections with Connection: close
# Each server's RSS (VmRSS) and open fd count are sampled every second into a CSV, plotted to a
# PNG with gnuplot when it is installed. Fails if either server's RSS grows by more than 5%
# between the end of the first minute (or half the run, if shorter) and the end, if its fd
# count at the end exceeds the count at that point plus the connections the load holds, if a
# load generator reports an error, or if a server dies or does not exit 0 on SIGTERM.
#
# Environment: SOAK_SECONDS (default 600), BIN_DIR (default bin), CONFIG (default
# config/ucp.conf), SOAK_OUT (default build/soak), SOAK_RSS_GROWTH_PCT (default 5).
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_TOTAL=${SOAK_SECONDS:-600}
BIN_DIR=${BIN_DIR:-bin}
CONFIG=${CONFIG:-config/ucp.conf}
OUT=${SOAK_OUT:-build/soak}
GROWTH_PCT=${SOAK_RSS_GROWTH_PCT:-5}
CONNS=32
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/ucp-soak.XXXXXX)
CSV="$OUT/soak-$STAMP.csv"
PNG="$OUT/soak-$STAMP.png"
PIDS=()  # every process this script starts, stopped by pid at exit

say() { echo "soak: $*"; }
cleanup() {
  local pid
  for pid in "${PIDS[@]+"${PIDS[@]}"}"; do
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

[[ "$SECONDS_TOTAL" =~ ^[0-9]+$ ]] && [ "$SECONDS_TOTAL" -ge 10 ] ||
  { say "SOAK_SECONDS must be a number >= 10"; exit 2; }
for f in proactor_test bench_client test_client; do
  [ -x "$BIN_DIR/$f" ] || { say "$BIN_DIR/$f is missing: run 'make build' first"; exit 2; }
done

# start_server NAME PROTOCOL: sets <NAME>_PID and <NAME>_PORT.
start_server() {
  local name=$1 protocol=$2 port="" i
  "$BIN_DIR/proactor_test" "$CONFIG" --set server.port=0 --set server.ip=127.0.0.1 \
    --set server.protocol="$protocol" --set log.console=true --set log.level=WARN \
    --set log.file="$WORK/$name.log" --set server.read_timeout_ms=5000 \
    >"$WORK/$name.out" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  # log.level=WARN hides the INFO "listening on" line: read the port from /proc instead.
  for i in $(seq 100); do
    port=$(listening_port "$pid")
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || { say "$name server exited:"; cat "$WORK/$name.out"; exit 1; }
    sleep 0.1
  done
  [ -n "$port" ] || { say "$name server is not listening after 10 s"; exit 1; }
  printf -v "${name}_PID" '%s' "$pid"
  printf -v "${name}_PORT" '%s' "$port"
  say "$name server pid $pid on 127.0.0.1:$port"
}

# The TCP port a process listens on, from its socket inodes and /proc/net/tcp (state 0A).
listening_port() {
  local pid=$1 inodes
  inodes=$(ls -l "/proc/$pid/fd" 2>/dev/null | sed -n 's/.*socket:\[\([0-9]*\)\]/\1/p' | tr '\n' '|')
  [ -n "$inodes" ] || return 0
  local hex
  hex=$(awk -v inodes="|$inodes" '$4 == "0A" && index(inodes, "|" $10 "|") { split($2, a, ":"); print a[2]; exit }' /proc/net/tcp)
  [ -z "$hex" ] || echo $((16#$hex))
}

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
fd_count() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }

start_server echo echo
start_server http http

say "running for $SECONDS_TOTAL s; samples in $CSV"
"$BIN_DIR/bench_client" -h 127.0.0.1 -p "$echo_PORT" -c $CONNS -s 512 -d "$SECONDS_TOTAL" -t 1 \
  >"$WORK/bench_client.out" 2>&1 &
BENCH_PID=$!
PIDS+=("$BENCH_PID")
if command -v wrk >/dev/null; then
  wrk -t 1 -c $CONNS -d "${SECONDS_TOTAL}s" "http://127.0.0.1:$http_PORT/" >"$WORK/wrk.out" 2>&1 &
else
  (end=$((SECONDS + SECONDS_TOTAL)); while [ $SECONDS -lt $end ]; do
     curl -s -o /dev/null "http://127.0.0.1:$http_PORT/?[1-100]" || exit 1; done) >"$WORK/wrk.out" 2>&1 &
fi
HTTP_LOAD_PID=$!
PIDS+=("$HTTP_LOAD_PID")
# Churn: new echo connections (byte-checked, some reset mid-transfer) and one-shot HTTP ones.
(end=$((SECONDS + SECONDS_TOTAL - 2)); failures=0
 while [ $SECONDS -lt $end ]; do
   "$BIN_DIR/test_client" normal abort --port "$echo_PORT" >>"$WORK/churn.out" 2>&1 || failures=$((failures + 1))
   for _ in $(seq 20); do
     curl -s -o /dev/null -w '%{http_code}\n' -H 'Connection: close' "http://127.0.0.1:$http_PORT/" >>"$WORK/churn_http.out" 2>&1 || true
   done
 done
 echo "churn failures: $failures" >>"$WORK/churn.out"
 [ $failures -eq 0 ]) &
CHURN_PID=$!
PIDS+=("$CHURN_PID")

echo "t_s,echo_rss_kb,echo_fds,http_rss_kb,http_fds" >"$CSV"
start=$SECONDS
for ((t = 1; t <= SECONDS_TOTAL; t++)); do
  while [ $SECONDS -lt $((start + t)) ]; do sleep 0.1; done
  for pid in "$echo_PID" "$http_PID"; do
    kill -0 "$pid" 2>/dev/null || { say "FAIL: server pid $pid died at t=$t s"; exit 1; }
  done
  echo "$t,$(rss_kb "$echo_PID"),$(fd_count "$echo_PID"),$(rss_kb "$http_PID"),$(fd_count "$http_PID")" >>"$CSV"
  if ((t % 60 == 0)); then say "t=$t s: $(tail -1 "$CSV")"; fi
done

reasons=()
wait "$BENCH_PID" || reasons+=("bench_client failed: $(tail -3 "$WORK/bench_client.out" | tr '\n' ' ')")
wait "$CHURN_PID" || reasons+=("churn: $(grep -c FAIL "$WORK/churn.out" || true) test_client FAIL lines: $(grep -m3 FAIL "$WORK/churn.out" | tr '\n' ' ')")
wait "$HTTP_LOAD_PID" || reasons+=("HTTP load generator failed: $(tail -3 "$WORK/wrk.out" | tr '\n' ' ')")
if grep -q 'Socket errors\|Non-2xx' "$WORK/wrk.out" 2>/dev/null; then
  reasons+=("wrk: $(grep 'Socket errors\|Non-2xx' "$WORK/wrk.out" | tr '\n' ' ')")
fi
bad_http=$(grep -vc '^200$' "$WORK/churn_http.out" 2>/dev/null || true)
[ "${bad_http:-0}" = 0 ] || reasons+=("$bad_http one-shot HTTP requests did not get 200")
sleep 2  # connections of the load close

# Growth between the end of minute 1 (or mid-run for short runs) and the end.
base_t=$((SECONDS_TOTAL >= 120 ? 60 : SECONDS_TOTAL / 2))
for spec in "echo:2:3" "http:4:5"; do
  IFS=: read -r name rss_col fd_col <<<"$spec"
  read -r base_rss base_fds < <(awk -F, -v t="$base_t" -v r="$rss_col" -v f="$fd_col" '$1 == t { print $r, $f }' "$CSV")
  read -r end_rss end_fds < <(tail -1 "$CSV" | awk -F, -v r="$rss_col" -v f="$fd_col" '{ print $r, $f }')
  growth=$(awk -v a="$base_rss" -v b="$end_rss" 'BEGIN { printf "%.2f", (a > 0 ? (b - a) * 100 / a : 0) }')
  say "$name: RSS ${base_rss} KiB at t=${base_t} s -> ${end_rss} KiB at the end (${growth}%), fds ${base_fds} -> ${end_fds}"
  if awk -v g="$growth" -v lim="$GROWTH_PCT" 'BEGIN { exit !(g > lim) }'; then
    reasons+=("$name server RSS grew ${growth}% (limit ${GROWTH_PCT}%)")
  fi
  idle_fds=$(fd_count "$([ "$name" = echo ] && echo "$echo_PID" || echo "$http_PID")")
  say "$name: fds after the load stopped: $idle_fds"
  if [ "$idle_fds" -gt "$((base_fds))" ]; then
    reasons+=("$name server holds $idle_fds fds after the load, ${base_fds} under load at t=${base_t} s")
  fi
done

for name in echo http; do
  pid_var="${name}_PID"
  pid=${!pid_var}
  kill -TERM "$pid"
  status=""
  for _ in $(seq 150); do
    if ! kill -0 "$pid" 2>/dev/null; then status=0; wait "$pid" || status=$?; break; fi
    sleep 0.1
  done
  [ "$status" = 0 ] || reasons+=("$name server exit status ${status:-'still running 15 s after SIGTERM'}")
done

if command -v gnuplot >/dev/null; then
  gnuplot <<EOF || say "gnuplot failed; the CSV is complete"
set terminal pngcairo size 1200,700 noenhanced
set output "$PNG"
set datafile separator ","
set title "UCP soak $STAMP: RSS and open fds, ${SECONDS_TOTAL} s of echo + http + churn"
set xlabel "seconds"
set ylabel "RSS (KiB)"
set y2label "open fds"
set yrange [0:*]
set y2range [0:*]
set ytics nomirror
set y2tics
set key outside bottom center horizontal
plot "$CSV" every ::1 using 1:2 with lines lw 2 title "echo RSS", \
     "$CSV" every ::1 using 1:4 with lines lw 2 title "http RSS", \
     "$CSV" every ::1 using 1:3 axes x1y2 with lines title "echo fds", \
     "$CSV" every ::1 using 1:5 axes x1y2 with lines title "http fds"
EOF
  [ -f "$PNG" ] && say "plot: $PNG"
fi
grep -h 'total\|error' "$WORK/bench_client.out" | tail -3 | sed 's/^/soak: bench_client: /' || true
grep -h 'Requests/sec\|requests in' "$WORK/wrk.out" | sed 's/^/soak: wrk: /' || true
say "churn: $(grep -c '^PASS' "$WORK/churn.out" || true) test_client PASS lines, $(wc -l <"$WORK/churn_http.out") one-shot HTTP connections"

if [ ${#reasons[@]} -ne 0 ]; then
  for r in "${reasons[@]}"; do say "FAIL: $r"; done
  exit 1
fi
say "PASS (RSS growth within ${GROWTH_PCT}%, no fd growth, no load error, clean exits; $CSV)"

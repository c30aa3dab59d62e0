#!/usr/bin/env bash
# Instructions per request of the HTTP and echo paths, for before/after comparisons of a change on a
# shared or noisy machine (CPU time is noise there; instruction counts are not): the server runs
# under valgrind's callgrind on the epoll backend with one worker, wrk drives it for DURATION
# seconds after a warm-up, and the counters cover exactly that window (callgrind_control -z,
# then -d). User-space instructions only (the kernel's share is the same before and after a
# change of the library's code); callgrind cannot run io_uring, hence epoll, which runs the same
# HTTP code.
#
# Usage: scripts/bench-instructions.sh [BIN_DIR...]    (default: bin)
#   KINDS="plaintext file"   plaintext: bin/proactor_test server.protocol = http;
#                            file: bin/http_server, one 1 KiB file (its cache hits);
#                            echo: bin/proactor_test echoing 256 B messages, driven by
#                            bin/bench_client (pingpong) instead of wrk;
#                            gateway: bin/ucp_gateway mode = http (one keep-alive upstream
#                            pool) in front of bin/proactor_test protocol = http, which runs
#                            outside valgrind (the gateway's instructions only);
#                            churn: the echo server, bench_client --churn (CONNS slots each
#                            connect, echo 64 B, close): instructions per connection
#   DURATION=5 CONNS=10 ROUNDS=2 THREADS=1 (server.thread_num) ACCEPTORS=main (server.acceptors)
# Every thread is counted apart (--separate-threads): after the total, one line per thread
# that ran at least 0.1 % of it; thread 1 is ucp-main (the acceptor and hand-off with
# ACCEPTORS=main), the worker loops follow. docs/scaling.md uses THREADS=2 and churn.
# Example, a change against main built elsewhere:
#   scripts/bench-instructions.sh /path/to/main/bin bin
# Prints one line per binary directory, kind and round: requests, instructions, per request.
#
# Valgrind 3.19 (Debian 12) does not know openat2, which the static files use: a preload shim
# (compiled into build/bench-instructions/) turns it into openat for the measurement.
set -euo pipefail
cd "$(dirname "$0")/.."
KINDS=${KINDS:-"plaintext file"}
DURATION=${DURATION:-5}
CONNS=${CONNS:-10}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-1}
ACCEPTORS=${ACCEPTORS:-main}
dirs=("$@")
[ ${#dirs[@]} -eq 0 ] && dirs=(bin)
for tool in valgrind callgrind_control wrk curl cc python3; do
  command -v "$tool" >/dev/null || { echo "bench-instructions: $tool is missing" >&2; exit 2; }
done

work=build/bench-instructions
mkdir -p "$work"
shim=$work/openat2-shim.so
if [ ! -e "$shim" ]; then
  cat >"$work/openat2-shim.c" <<'EOF'
// Measurement only: valgrind 3.19 rejects openat2; forward it as openat (no RESOLVE_*).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <sys/syscall.h>
long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (int i = 0; i < 6; ++i) a[i] = va_arg(ap, long);
  va_end(ap);
  if (number == SYS_openat2) {
    const struct open_how* how = (const struct open_how*)a[2];
    return openat((int)a[0], (const char*)a[1], (int)how->flags, (int)how->mode);
  }
  static long (*real)(long, ...);
  if (!real) real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
  return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
EOF
  cc -O2 -shared -fPIC "$work/openat2-shim.c" -o "$shim" -ldl
fi
: >"$work/empty.conf"
mkdir -p "$work/www"
head -c 1024 /dev/zero | tr '\0' 'a' >"$work/www/small.txt"

server_pid=
upstream_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  [ -n "$upstream_pid" ] && kill "$upstream_pid" 2>/dev/null || true
}
trap cleanup EXIT

measure() {  # DIR KIND ROUND
  local dir=$1 kind=$2 round=$3 port url out reqs dump ir
  port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  local common=(--set server.ip=127.0.0.1 --set server.port="$port" --set server.thread_num="$THREADS"
                --set server.acceptors="$ACCEPTORS"
                --set log.file= --set log.level=WARN --set log.console=false
                --set event_loop.backend=epoll)
  local prog
  if [ "$kind" = plaintext ]; then
    prog=("$dir/proactor_test" "$work/empty.conf" "${common[@]}" --set server.protocol=http)
    url=http://127.0.0.1:$port/
  elif [ "$kind" = echo ] || [ "$kind" = churn ]; then
    prog=("$dir/proactor_test" "$work/empty.conf" "${common[@]}")
    url=
  elif [ "$kind" = gateway ]; then
    local upstream
    upstream=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
    "$dir/proactor_test" "$work/empty.conf" --set server.ip=127.0.0.1 \
      --set server.port="$upstream" --set server.thread_num=1 --set server.read_timeout_ms=0 \
      --set server.protocol=http --set log.file= --set log.level=WARN --set log.console=false \
      >"$work/upstream.log" 2>&1 &
    upstream_pid=$!
    printf '%s\n' "[gateway]" "mode = http" "upstream = app" "[upstream.app]" \
      "servers = 127.0.0.1:$upstream" "keepalive = 1024" >"$work/gateway.conf"
    prog=("$dir/ucp_gateway" "$work/gateway.conf" "${common[@]}")
    url=http://127.0.0.1:$port/
  else
    prog=("$dir/http_server" "$work/empty.conf" "${common[@]}" --set http.root="$work/www")
    url=http://127.0.0.1:$port/small.txt
  fi
  rm -f "$work"/callgrind.out*
  LD_PRELOAD=$PWD/$shim valgrind --tool=callgrind --separate-threads=yes \
    --callgrind-out-file="$work/callgrind.out" \
    "${prog[@]}" >"$work/server.log" 2>&1 &
  server_pid=$!
  if [ "$kind" = echo ] || [ "$kind" = churn ]; then
    local echo_client=("$dir/bench_client" -h 127.0.0.1 -p "$port" -c "$CONNS" -s 256 --epoll)
    [ "$kind" = churn ] && echo_client=("$dir/bench_client" -h 127.0.0.1 -p "$port" -c "$CONNS" -s 64 --epoll --churn)
    for _ in $(seq 300); do "${echo_client[@]}" -d 1 >/dev/null 2>&1 && break; sleep 0.1; done
    "${echo_client[@]}" -d 2 >/dev/null
    callgrind_control -z "$server_pid" >/dev/null
    out=$("${echo_client[@]}" -d "$DURATION" 2>/dev/null)
    callgrind_control -d "$server_pid" >/dev/null
    reqs=$(awk '/^(requests|connections) [0-9]+ in/{print $2}' <<<"$out")
  else
    for _ in $(seq 300); do curl -fs -o /dev/null "$url" && break; sleep 0.1; done
    if ! curl -fs -o /dev/null "$url"; then
      echo "bench-instructions: $kind server of $dir does not answer 200 (see $work/server.log)" >&2
      exit 1
    fi
    wrk -t1 -c"$CONNS" -d2s "$url" >/dev/null
    callgrind_control -z "$server_pid" >/dev/null
    out=$(wrk -t1 -c"$CONNS" -d"${DURATION}s" "$url")
    callgrind_control -d "$server_pid" >/dev/null
    reqs=$(awk '/requests in/{print $1}' <<<"$out")
  fi
  sleep 0.5
  kill -TERM "$server_pid"; wait "$server_pid" || true; server_pid=
  if [ -n "$upstream_pid" ]; then
    kill -TERM "$upstream_pid"; wait "$upstream_pid" || true; upstream_pid=
  fi
  # The dump after the reset: one file per thread, callgrind.out.1-NN (NN: the thread).
  local file thread_ir threads=() ir=0
  for file in "$work"/callgrind.out.1-*; do
    thread_ir=$(awk '/^summary:|^totals:/{print $2; exit}' "$file")
    [ -n "$thread_ir" ] || continue
    threads+=("${file##*-} $thread_ir")
    ir=$((ir + thread_ir))
  done
  local unit=requests
  [ "$kind" = churn ] && unit=connections
  printf '%-30s %-9s round %s: %8s %s %12s instructions %6s per %s\n' \
    "$dir" "$kind" "$round" "$reqs" "$unit" "$ir" "$((ir / reqs))" "${unit%s}"
  local entry
  for entry in "${threads[@]}"; do
    set -- $entry
    [ "$(($2 * 1000))" -ge "$ir" ] || continue
    printf '%-30s %-9s   thread %d: %12s instructions %6s per %s\n' \
      "" "" "$((10#$1))" "$2" "$(($2 / reqs))" "${unit%s}"
  done
}

for kind in $KINDS; do
  for round in $(seq "$ROUNDS"); do
    for dir in "${dirs[@]}"; do measure "$dir" "$kind" "$round"; done
  done
done

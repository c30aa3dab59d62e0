#!/usr/bin/env bash
# make memcheck (docs/design.md, section 5): the server under a leak checker while
# `bin/test_client all` runs, then SIGTERM, on both backends:
#
#   epoll     bin/proactor_test under the seed's valgrind command
#             (valgrind --leak-check=full --show-leak-kinds=all)
#   io_uring  the same under valgrind when valgrind can run an io_uring program; valgrind 3.19
#             (Debian 12) cannot: it keeps its global thread lock while a thread waits in
#             io_uring_enter(2), so in a multi-threaded io_uring program every other thread
#             stops for good (axboe/liburing#657). A 20-line probe (one thread waits for a CQE,
#             the other submits it) tells; when it hangs, the io_uring run uses LeakSanitizer
#             (the server built with -DUCP_SANITIZE=address in build/asan) instead.
#
# Each run fails unless it reports 0 bytes definitely and indirectly lost and no error, the
# server exits cleanly and every test_client case passes; both are reported, and the script
# fails if either does.
#
# Environment: MEMCHECK_TOOL=auto|valgrind|lsan (default auto: both runs as above; valgrind:
# valgrind only, the io_uring run too if the probe passes; lsan: LeakSanitizer on io_uring
# only), BIN_DIR (default bin), CONFIG (default config/ucp.conf), KEEP=1 keeps the work
# directory.
# Exit status: 0 clean, 1 leaks, errors or a failed case, 2 the check could not run.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOL=${MEMCHECK_TOOL:-auto}
BIN_DIR=${BIN_DIR:-bin}
CONFIG=${CONFIG:-config/ucp.conf}
READ_TIMEOUT_MS=2000
WORK=$(mktemp -d /tmp/ucp-memcheck.XXXXXX)
SERVER_PID=""

say() { echo "memcheck: $*"; }
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then kill -KILL "$SERVER_PID" || true; fi
  if [ "${KEEP:-0}" = 1 ]; then say "work files kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

for f in "$BIN_DIR/proactor_test" "$BIN_DIR/test_client"; do
  [ -x "$f" ] || { say "$f is missing: run 'make build' first"; exit 2; }
done

# Prints 0 when valgrind runs a two-thread io_uring wait/submit program to the end, 1 when it
# hangs, 2 when the probe cannot be built.
probe_valgrind() {
  cat > "$WORK/probe.c" <<'EOF'
#include <liburing.h>
#include <pthread.h>
#include <unistd.h>
static struct io_uring ring;
static void* waiter(void* arg) {
  struct io_uring_cqe* cqe;
  (void)arg;
  io_uring_wait_cqe(&ring, &cqe); /* blocks in io_uring_enter */
  return 0;
}
int main(void) {
  pthread_t thread;
  if (io_uring_queue_init(8, &ring, 0) != 0) return 3;
  pthread_create(&thread, 0, waiter, 0);
  usleep(200000);
  io_uring_prep_nop(io_uring_get_sqe(&ring)); /* wakes the waiter */
  io_uring_submit(&ring);
  pthread_join(thread, 0);
  return 0;
}
EOF
  if ! cc -O1 -o "$WORK/probe" "$WORK/probe.c" -luring -lpthread 2>"$WORK/probe.err"; then
    echo 2
    return
  fi
  valgrind -q "$WORK/probe" >/dev/null 2>&1 &
  local pid=$! i
  for i in $(seq 150); do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" && echo 0 || echo 1
      return
    fi
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  echo 1
}

# Starts "$@" (the server command) in the background; sets SERVER_PID and PORT.
start_server() {
  "$@" "$CONFIG" --set server.port=0 --set server.ip=127.0.0.1 --set log.console=true \
    --set log.file="$WORK/server.log" --set log.flush_interval_ms=50 \
    --set server.read_timeout_ms=$READ_TIMEOUT_MS --set server.shutdown_timeout_ms=10000 \
    >"$WORK/server.out" 2>&1 &
  SERVER_PID=$!
  local i
  for i in $(seq 1200); do  # 120 s: valgrind starts slowly
    PORT=$(grep -o 'listening on [0-9.]*:[0-9]*' "$WORK/server.out" 2>/dev/null | head -1 | sed 's/.*://') || true
    [ -n "${PORT:-}" ] && return 0
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      say "the server exited before listening:"; tail -20 "$WORK/server.out"; exit 2
    fi
    sleep 0.1
  done
  say "no 'listening on' line within 120 s:"; tail -20 "$WORK/server.out"; exit 2
}

# Runs the client cases, then SIGTERM; sets CLIENT_STATUS and SERVER_STATUS.
exercise_and_stop() {
  say "server pid $SERVER_PID on port $PORT; running test_client all"
  CLIENT_STATUS=0
  "$BIN_DIR/test_client" all --port "$PORT" --read-timeout-ms $READ_TIMEOUT_MS || CLIENT_STATUS=$?
  kill -TERM "$SERVER_PID"
  local i
  SERVER_STATUS=""
  for i in $(seq 1200); do  # the leak check at exit takes a while under valgrind
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      SERVER_STATUS=0
      wait "$SERVER_PID" || SERVER_STATUS=$?
      break
    fi
    sleep 0.1
  done
  if [ -z "$SERVER_STATUS" ]; then
    say "the server did not exit within 120 s of SIGTERM: killed"
    kill -KILL "$SERVER_PID" || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_STATUS=killed
  fi
  SERVER_PID=""
}

RESULTS=()
FAILED=0

# Records one run's outcome: $1 = what ran, $2 = its figures; the rest are failure reasons.
record() {
  local what=$1 figures=$2
  shift 2
  if [ $# -eq 0 ]; then
    RESULTS+=("PASS  $what: $figures, clean exit, all test_client cases passed")
    return
  fi
  FAILED=1
  KEEP=1
  local reason
  for reason in "$@"; do RESULTS+=("FAIL  $what: $reason"); done
}

# The seed's valgrind command around bin/proactor_test on backend $1.
run_valgrind() {
  local backend=$1 log="$WORK/valgrind-$1.log"
  say "valgrind $(valgrind --version | sed 's/valgrind-//') --leak-check=full --show-leak-kinds=all, $backend backend"
  start_server valgrind --leak-check=full --show-leak-kinds=all --log-file="$log" \
    "$BIN_DIR/proactor_test" --set event_loop.backend="$backend"
  exercise_and_stop
  local definite indirect errors reasons=()
  definite=$(sed -n 's/.*definitely lost: \([0-9,]*\) bytes.*/\1/p' "$log" | tr -d , | tail -1)
  indirect=$(sed -n 's/.*indirectly lost: \([0-9,]*\) bytes.*/\1/p' "$log" | tr -d , | tail -1)
  errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9,]*\) errors.*/\1/p' "$log" | tr -d , | tail -1)
  if grep -q 'All heap blocks were freed' "$log"; then definite=0; indirect=0; fi
  [ "${definite:-x}" = 0 ] || reasons+=("definitely lost: ${definite:-no summary} bytes")
  [ "${indirect:-x}" = 0 ] || reasons+=("indirectly lost: ${indirect:-no summary} bytes")
  [ "${errors:-x}" = 0 ] || reasons+=("valgrind errors: ${errors:-no summary}")
  [ "$SERVER_STATUS" = 0 ] || reasons+=("server exit status $SERVER_STATUS")
  [ "$CLIENT_STATUS" = 0 ] || reasons+=("test_client exit status $CLIENT_STATUS")
  if [ ${#reasons[@]} -ne 0 ]; then
    grep -A12 'definitely lost in\|indirectly lost in\|Invalid\|uninitialised' "$log" | head -60 || true
  fi
  record "valgrind ($backend)" \
    "definitely lost ${definite:-?} B, indirectly lost ${indirect:-?} B, ${errors:-?} errors ($(grep -o 'total heap usage: .*' "$log" | head -1))" \
    "${reasons[@]+"${reasons[@]}"}"
}

run_lsan() {
  say "building the AddressSanitizer server (build/asan) for LeakSanitizer, io_uring backend"
  cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUCP_SANITIZE=address \
    -DUCP_WERROR=${WERROR:-ON} >/dev/null
  cmake --build build/asan -j "$(nproc)" --target proactor_test >/dev/null
  export ASAN_OPTIONS=detect_leaks=1:exitcode=23 LSAN_OPTIONS=report_objects=0
  start_server build/asan/bin/proactor_test --set event_loop.backend=io_uring
  exercise_and_stop
  local reasons=()
  if grep -q 'ERROR: LeakSanitizer' "$WORK/server.out"; then
    reasons+=("$(grep 'SUMMARY: AddressSanitizer' "$WORK/server.out" | head -1)")
    grep -A8 'Direct leak\|Indirect leak' "$WORK/server.out" | head -60 || true
  fi
  if grep -q 'ERROR: AddressSanitizer\|runtime error:' "$WORK/server.out"; then
    reasons+=("sanitizer error: $(grep -m1 'ERROR: AddressSanitizer\|runtime error:' "$WORK/server.out")")
  fi
  [ "$SERVER_STATUS" = 0 ] || reasons+=("server exit status $SERVER_STATUS")
  [ "$CLIENT_STATUS" = 0 ] || reasons+=("test_client exit status $CLIENT_STATUS")
  cp "$WORK/server.out" "$WORK/lsan-io_uring.out"
  record "LeakSanitizer (io_uring)" "no leak and no ASan/UBSan error reported" \
    "${reasons[@]+"${reasons[@]}"}"
}

need_valgrind() {
  command -v valgrind >/dev/null || { say "valgrind is not installed (scripts/install-deps.sh memcheck)"; exit 2; }
}

# The io_uring run: valgrind when it can run io_uring programs, else LeakSanitizer (unless
# only valgrind was asked for).
run_io_uring() {
  local probe
  probe=$(probe_valgrind)
  if [ "$probe" = 0 ]; then
    run_valgrind io_uring
    return
  fi
  if [ "$probe" = 2 ]; then
    say "cannot build the io_uring probe (cc, liburing-dev): $(head -1 "$WORK/probe.err")"
  else
    say "valgrind $(valgrind --version | sed 's/valgrind-//') cannot run a multi-threaded io_uring program:"
    say "  it holds its global lock while a thread waits in io_uring_enter(2), so every other"
    say "  thread stops and the process hangs (the probe did; see axboe/liburing#657)."
  fi
  if [ "$TOOL" = valgrind ]; then
    RESULTS+=("SKIP  valgrind (io_uring): valgrind cannot run io_uring programs here")
    return
  fi
  say "the io_uring backend is checked with LeakSanitizer instead"
  run_lsan
}

case "$TOOL" in
  auto | valgrind)
    need_valgrind
    run_valgrind epoll
    run_io_uring
    ;;
  lsan) run_lsan ;;
  *) say "MEMCHECK_TOOL must be auto, valgrind or lsan"; exit 2 ;;
esac

say "summary:"
for line in "${RESULTS[@]}"; do say "  $line"; done
if [ "$FAILED" != 0 ]; then
  say "FAIL (server logs and reports in $WORK)"
  exit 1
fi
say "PASS"

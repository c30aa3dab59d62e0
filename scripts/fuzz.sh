#!/usr/bin/env bash
# Runs the libFuzzer harnesses, side by side, for a bounded time each: scripts/fuzz.sh SECONDS
#   make test-fuzz   (part of make test: 25 s each)     make fuzz   (FUZZ_SECONDS, default 600)
# Harnesses: http_request (the HTTP request path), ws_frame (the WebSocket frame reader),
# tls_server (the server side of the TLS engine).
# The corpus grows in build/fuzz/corpus/<harness> (the seeds in tests/fuzz/corpus stay as
# they are); a crash, leak or broken invariant leaves its input in build/fuzz/artifacts/
# and the exit status is non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TOTAL=${1:-25}
BIN=build/fuzz/bin
mkdir -p build/fuzz/artifacts
status=0
declare -A DICT=([http_request]=http.dict [ws_frame]=ws.dict [tls_server]=tls.dict)
declare -A PID=()
# The harnesses run side by side: each is one single-threaded process, so one after another
# they would leave a core idle for the whole run.
for harness in http_request ws_frame tls_server; do
  work=build/fuzz/corpus/$harness
  mkdir -p "$work"
  echo "fuzz: $harness for ${SECONDS_TOTAL}s"
  ASAN_OPTIONS=detect_leaks=1 "$BIN/${harness}_fuzz" -max_total_time="$SECONDS_TOTAL" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -dict="tests/fuzz/${DICT[$harness]}" \
    -artifact_prefix=build/fuzz/artifacts/ "$work" "tests/fuzz/corpus/$harness" \
    >build/fuzz/$harness.log 2>&1 &
  PID[$harness]=$!
done
for harness in http_request ws_frame tls_server; do
  if ! wait "${PID[$harness]}"; then
    echo "fuzz: $harness FAILED (input in build/fuzz/artifacts/):" >&2
    grep -E "invariant|ERROR|SUMMARY" build/fuzz/$harness.log | head -5 >&2
    status=1
  fi
  echo "fuzz: $harness: $(grep -E "^Done|stat::number_of_executed_units" build/fuzz/$harness.log | tail -1)"
done
exit $status

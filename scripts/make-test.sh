#!/usr/bin/env bash
# make test after `make build test-deps`: the release suite, the whole suite under ASan+UBSan,
# the `threads` tests under TSan and a short fuzz run, each pass as its own make target does
# it (test-release, test-asan, test-tsan, test-fuzz), overlapped.
#
# A pass's tests mostly wait on sockets and timers and leave the CPU half idle, while each
# tree's compilation is CPU-bound. So while one pass's tests run, the next tree compiles in
# the background at the lowest CPU priority (SCHED_IDLE, or nice 19 where that is refused):
# the tests get the CPU whenever they want it, the compiler takes the rest. The background
# build writes build/<tree>-build.log, shown if it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}

background_pid=""
background_log=""
stop_background() {
  if [ -n "$background_pid" ]; then kill -- "-$background_pid" 2>/dev/null || true; fi
}
trap stop_background EXIT

# The lowest CPU priority there is: SCHED_IDLE runs only on a CPU nothing else wants.
idle_priority=(nice -n 19)
if chrt --idle 0 true 2>/dev/null; then idle_priority=(chrt --idle 0 nice -n 19); fi

# start_build TARGET TREE: `make TARGET` in its own process group at the lowest priority.
start_build() {
  background_log=build/$2-build.log
  echo "make-test: building the $2 tree in the background ($background_log)"
  setsid "${idle_priority[@]}" "$make" --no-print-directory "$1" >"$background_log" 2>&1 &
  background_pid=$!
}

finish_build() {
  local status=0
  wait "$background_pid" || status=$?
  background_pid=""
  if [ "$status" -ne 0 ]; then
    echo "make-test: the background build failed ($background_log):" >&2
    tail -n 60 "$background_log" >&2
    exit "$status"
  fi
}

start_build asan-build asan
"$make" --no-print-directory ctest-release
finish_build
start_build tsan-build tsan
"$make" --no-print-directory ctest-asan
finish_build
start_build fuzz-build fuzz
"$make" --no-print-directory ctest-tsan
finish_build
"$make" --no-print-directory run-fuzz-short

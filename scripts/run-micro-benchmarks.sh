#!/usr/bin/env bash
# Runs the micro-benchmarks `make bench` built: every bin/*_micro (Google Benchmark) and
# bin/log_bench when present; none of them is required. Output goes to the terminal and to
# bench/results/raw/micro-<date>-<host>-<time>/ (git-ignored); the exit status is non-zero
# when one of them fails.
#
# Environment: UCP_BIN_DIR [bin], BENCH_MICRO_ARGS (extra arguments for every *_micro, e.g.
# --benchmark_filter=MpscQueue), BENCH_MICRO_MIN_TIME [0.5] (seconds per benchmark).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${UCP_BIN_DIR:-$PWD/bin}
MIN_TIME=${BENCH_MICRO_MIN_TIME:-0.5}
OUT=bench/results/raw/micro-$(date +%Y-%m-%d)-$(hostname -s 2>/dev/null || hostname)-$(date +%H%M%S)

shopt -s nullglob
micros=("$BIN"/*_micro)
[ -x "$BIN/log_bench" ] && micros+=("$BIN/log_bench")
if [ ${#micros[@]} -eq 0 ]; then
  echo "run-micro-benchmarks: no micro-benchmarks in $BIN (bin/*_micro, bin/log_bench); nothing to run"
  exit 0
fi
mkdir -p "$OUT"

failed=0
for exe in "${micros[@]}"; do
  [ -x "$exe" ] || continue
  name=$(basename "$exe")
  echo "== $name"
  args=()
  if [[ $name == *_micro ]]; then
    # shellcheck disable=SC2206  # BENCH_MICRO_ARGS is a list of flags
    args=(--benchmark_min_time="$MIN_TIME" --benchmark_out="$OUT/$name.json"
      --benchmark_out_format=json ${BENCH_MICRO_ARGS:-})
  fi
  if ! "$exe" "${args[@]}" 2>&1 | tee "$OUT/$name.txt"; then
    echo "run-micro-benchmarks: $name FAILED" >&2
    failed=1
  fi
done
echo "run-micro-benchmarks: results in $OUT"
exit $failed

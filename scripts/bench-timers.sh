#!/usr/bin/env bash
# scripts/bench-timers.sh: the cost of a loop timer, UCP beside Boost.Asio and beside one
# IORING_OP_TIMEOUT per timer, in the same run (the measurement behind UCP's timer design).
#
# Each round runs every program once, alternating, pinned to BENCH_SERVER_CPUS: 1,000,000
# timers (TIMERS) due uniformly over 100 ms (SPREAD_MS) are armed, then the loop runs until all
# fired. Per program: CPU nanoseconds per timer (user+system of the process over arm+fire) and
# resident bytes per pending timer; the report gives medians over ROUNDS and the ratio of UCP
# to Asio, per round then the median.
#
# Environment: UCP_BIN_DIR [bin]  TIMERS [1000000]  SPREAD_MS [100]  ROUNDS [5]
#              BENCH_SERVER_CPUS [0]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${UCP_BIN_DIR:-bin}
TIMERS=${TIMERS:-1000000}
SPREAD_MS=${SPREAD_MS:-100}
ROUNDS=${ROUNDS:-5}
CPUS=${BENCH_SERVER_CPUS:-0}
for program in ucp_timers asio_timers uring_timers; do
  [ -x "$BIN/$program" ] || { echo "bench-timers: $BIN/$program missing (make bench)" >&2; exit 1; }
done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for round in $(seq "$ROUNDS"); do
  for run in "ucp_timers callback" "asio_timers callback" "ucp_timers coroutine" \
             "asio_timers coroutine" "uring_timers"; do
    # shellcheck disable=SC2086
    line=$(taskset -c "$CPUS" "$BIN"/$run -n "$TIMERS" -s "$SPREAD_MS")
    echo "round=$round $line" | tee -a "$out"
  done
done
python3 - "$out" <<'PY'
import re, statistics, sys
rows = [dict(kv.split("=") for kv in line.split()) for line in open(sys.argv[1])]
modes = sorted({r["mode"] for r in rows})
def median(mode, key):
    return statistics.median(float(r[key]) for r in rows if r["mode"] == mode)
print("\n| timers (1,000,000, due over 100 ms) | CPU ns per timer (median) | bytes per pending timer |")
print("|---|---:|---:|")
for mode in modes:
    print(f"| {mode} | {median(mode, 'ns_per_timer'):.0f} | {median(mode, 'bytes_per_pending_timer'):.0f} |")
def ratio(a, b):
    per_round = {}
    for r in rows:
        per_round.setdefault(r["round"], {})[r["mode"]] = float(r["ns_per_timer"])
    return statistics.median(v[a] / v[b] for v in per_round.values() if a in v and b in v)
print(f"\nUCP/Asio CPU per timer: callbacks {ratio('ucp-callback', 'asio-callback'):.2f}x, "
      f"coroutines {ratio('ucp-coroutine', 'asio-coroutine'):.2f}x; "
      f"IORING_OP_TIMEOUT per timer / UCP heap: {ratio('uring-timeout-op', 'ucp-callback'):.2f}x")
PY

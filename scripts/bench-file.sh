#!/usr/bin/env bash
# Random 4 KiB reads at queue depth 32, from the page cache and with O_DIRECT: bin/file_read_bench
# (ucp::File on one loop, 32 coroutines with one read in flight each) against
# `fio --ioengine=io_uring --iodepth=32` and bin/pread_threads (four threads blocking in
# pread), in the same run. The figure is reads per CPU-second: reads done over the user +
# system CPU time of the whole program (its threads and io_uring workers included; from
# getrusage(RUSAGE_CHILDREN) around it), and the ratios of UCP to each. Every program runs
# pinned to the same CPUS. Programs alternate within each round; medians over rounds.
#
#   scripts/bench-file.sh                           # 3 rounds of 5 s, a 1 GiB file
#   ROUNDS=1 DURATION=5 scripts/bench-file.sh
#
# Environment: ROUNDS [3], DURATION [5] s, FILE_MB [1024] (the file, made once under
# DIR [build/bench-file]; page-cache runs read it into memory first), DEPTH [32], THREADS [4]
# pread threads, CPUS [0], MODES ["cache direct"], PROGRAMS ["ucp fio pread"], BACKEND
# [io_uring] for ucp, UCP_BIN_DIR [bin]. Needs bin/file_read_bench and bin/pread_threads
# (cmake -DUCP_BENCH=ON) and fio (scripts/install-deps.sh bench). O_DIRECT needs a file system
# that takes it (not tmpfs). Run it on an otherwise idle machine.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${UCP_BIN_DIR:-bin}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
FILE_MB=${FILE_MB:-1024}
DIR=${DIR:-build/bench-file}
DEPTH=${DEPTH:-32}
THREADS=${THREADS:-4}
CPUS=${CPUS:-0}
MODES=${MODES:-cache direct}
PROGRAMS=${PROGRAMS:-ucp fio pread}
BACKEND=${BACKEND:-io_uring}

die() {
  echo "bench-file: $*" >&2
  exit 1
}
for tool in file_read_bench pread_threads; do
  [ -x "$BIN/$tool" ] || die "$BIN/$tool not found (cmake -DUCP_BENCH=ON; cmake --build build/release --target $tool)"
done
command -v fio >/dev/null || die "fio not found (scripts/install-deps.sh bench)"
command -v taskset >/dev/null || die "taskset not found (util-linux)"
command -v python3 >/dev/null || die "python3 not found"

mkdir -p "$DIR"
FILE=$DIR/random-${FILE_MB}m.bin
if [ ! -f "$FILE" ] || [ "$(stat -c %s "$FILE")" -ne $((FILE_MB * 1048576)) ]; then
  echo "bench-file: writing $FILE ($FILE_MB MiB)"
  head -c $((FILE_MB * 1048576)) /dev/urandom >"$FILE"
  sync "$FILE"
fi
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT

# measure NAME MODE ROUND CMD...: runs CMD pinned, reads its reads count, appends a line.
measure() {
  local name=$1 mode=$2 round=$3
  shift 3
  python3 - "$name" "$mode" "$round" "$RESULTS" "$@" <<'PY'
import json, os, re, resource, subprocess, sys
name, mode, rnd, results, cmd = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
before = resource.getrusage(resource.RUSAGE_CHILDREN)
out = subprocess.run(cmd, capture_output=True, text=True)
after = resource.getrusage(resource.RUSAGE_CHILDREN)
if out.returncode != 0:
    sys.exit(f"{name} failed ({out.returncode}): {out.stderr.strip()[-300:]}")
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
if name == "fio":
    job = json.loads(out.stdout[out.stdout.index("{"):])["jobs"][0]
    reads, seconds = job["read"]["total_ios"], job["read"]["runtime"] / 1000.0
else:
    m = re.search(r"reads (\d+) seconds ([0-9.]+)", out.stdout)
    reads, seconds = int(m.group(1)), float(m.group(2))
with open(results, "a") as f:
    f.write(f"{name} {mode} {rnd} {reads} {seconds} {cpu}\n")
print(f"  {name:6s} {mode:6s} round {rnd}: {reads / seconds:10,.0f} reads/s, CPU {cpu:5.2f} s, "
      f"{reads / cpu:12,.0f} reads per CPU-second")
PY
}

echo "bench-file: $ROUNDS round(s) x ${DURATION}s, $FILE, 4 KiB random reads, depth $DEPTH, $THREADS pread threads, CPUs $CPUS"
for round in $(seq "$ROUNDS"); do
  for mode in $MODES; do
    direct=0
    [ "$mode" = direct ] && direct=1
    [ "$mode" = cache ] && cat "$FILE" >/dev/null # into the page cache
    for program in $PROGRAMS; do
      case $program in
        ucp)
          measure ucp "$mode" "$round" taskset -c "$CPUS" "$BIN/file_read_bench" -f "$FILE" \
            -q "$DEPTH" -b 4096 -d "$DURATION" -o "$direct" -e "$BACKEND"
          ;;
        fio)
          # --invalidate=0: keep the page cache for the cached runs.
          measure fio "$mode" "$round" taskset -c "$CPUS" fio --name=randread \
            --filename="$FILE" --ioengine=io_uring --iodepth="$DEPTH" --rw=randread --bs=4k \
            --direct="$direct" --invalidate=0 --time_based --runtime="$DURATION" \
            --numjobs=1 --output-format=json
          ;;
        pread)
          measure pread "$mode" "$round" taskset -c "$CPUS" "$BIN/pread_threads" -f "$FILE" \
            -t "$THREADS" -b 4096 -d "$DURATION" -o "$direct"
          ;;
        *) die "unknown program $program (ucp, fio, pread)" ;;
      esac
    done
  done
done

python3 - "$RESULTS" <<'PY'
import statistics, sys
per_cpu = {}
for line in open(sys.argv[1]):
    name, mode, rnd, reads, seconds, cpu = line.split()
    per_cpu.setdefault(mode, {}).setdefault(name, {})[rnd] = float(reads) / float(cpu)
print()
print("reads per CPU-second (median over rounds); ratios: median of per-round ratios")
for mode, by_name in per_cpu.items():
    for name, rounds in by_name.items():
        print(f"  {mode:6s} {name:6s} {statistics.median(rounds.values()):12,.0f}")
    if "ucp" in by_name:
        for peer, rounds in by_name.items():
            if peer == "ucp":
                continue
            ratios = [by_name["ucp"][r] / rounds[r] for r in by_name["ucp"] if rounds.get(r)]
            print(f"  {mode:6s} ucp / {peer}: {statistics.median(ratios):.2f}x")
PY

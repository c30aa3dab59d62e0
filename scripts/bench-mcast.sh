#!/usr/bin/env bash
# Multicast receive, SIZE-byte datagrams to one IPv4 group over loopback: bin/ucp_mcast_recv
# (a UdpSocket joined to the group, each datagram handed to an on_datagram() handler from the
# loop's receive buffers: io_uring multishot recvmsg on BACKEND io_uring; receiver `ucp`, or
# `ucpbatch` for a coroutine's receive_batch() instead) against bin/epoll_mcast_recv (a plain epoll loop
# joined to the same group, recvmmsg batches of 64) and bin/uring_bare_mcast_recv (the io_uring
# ceiling: a bare multishot recvmsg into a provided-buffer ring, no abstraction; receiver
# `bare`), one receiver at a time, pinned to SERVER_CPUS. SENDERS bin/mcast_send processes pinned to CLIENT_CPUS send sequence-numbered
# datagrams (a stream each); each receiver checks the numbers and counts the missing ones (gaps).
#
# Part 1, flat out: the senders send as fast as they can for DURATION seconds. The figure is
# datagrams received per receiver-CPU-second (utime + stime of the receiver process over the
# load, from /proc/PID/stat). Receivers alternate within each round; medians over ROUNDS, and
# the median of the per-round ratios UCP / recvmmsg loop (the goal: >= 1.0x), the bare io_uring
# receiver / recvmmsg loop (what io_uring itself gives) and UCP / the bare io_uring receiver.
# Part 2, loss: the senders paced together at LOSS_FRACTION (0.5) of the recvmmsg loop's
# part-1 figure (or at RATE datagrams/s); the datagrams each receiver missed (the goal: 0) and
# the rate the senders reached, and the datagrams per receiver-CPU-second at that one rate. A
# receiver takes more datagrams per wake-up the faster they come, so part 1's figure follows
# the rate the sender reached in each run; part 2 at a rate every run reaches (RATE) compares
# the receivers' CPU per datagram under the same arrivals. FLAT=0 skips part 1 (RATE needed). Each run starts with WARMUP seconds of warm-up traffic that the
# receivers count apart.
#
# Over loopback the kernel's receive path up to the socket queue (IP, UDP, the copy into the
# queue) runs in the sender's softirq, on CLIENT_CPUS: the receiver's CPU is what it spends
# taking datagrams out of its socket, the part UCP and the plain loop do differently. One
# sender on one core may not keep a receiver busy; SENDERS on more CLIENT_CPUS do.
#
#   scripts/bench-mcast.sh                              # 3 rounds of 5 s each part
#   ROUNDS=1 DURATION=2 WARMUP=0.5 OUT=/tmp/mcast.md scripts/bench-mcast.sh
#
# Environment: ROUNDS [3], DURATION [5] s, WARMUP [1] s, SIZE [256] bytes, SENDERS [1],
# RECEIVERS ["ucp bare mmsg", also ucpbatch; `ucp:N`, `ucpbatch:N` or `bare:N` gives that receiver N receive buffers of 4 KiB
# instead of its default, 4,096 and 256], BACKEND [io_uring] for ucp, LOSS_FRACTION [0.5], RATE [from part 1]
# for part 2, GROUP [239.255.77.1], SERVER_CPUS [0], CLIENT_CPUS [1], NICE [-10 as root, else
# 0], UCP_BIN_DIR [bin], OUT [bench/results/<date>-mcast.md], the Markdown report. Needs
# bin/ucp_mcast_recv, bin/epoll_mcast_recv, bin/uring_bare_mcast_recv and bin/mcast_send (cmake
# -DUCP_BENCH=ON; --target ucp_mcast_recv epoll_mcast_recv uring_bare_mcast_recv mcast_send). Run it on an otherwise idle machine: other load
# makes the numbers noise.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${UCP_BIN_DIR:-bin}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
SIZE=${SIZE:-256}
SENDERS=${SENDERS:-1}
RECEIVERS=${RECEIVERS:-ucp bare mmsg}
BACKEND=${BACKEND:-io_uring}
LOSS_FRACTION=${LOSS_FRACTION:-0.5}
RATE=${RATE:-}
RATE_GIVEN=$RATE
FLAT=${FLAT:-1}
FLAT_GIVEN=${FLAT/#1/}
GROUP=${GROUP:-239.255.77.1}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
OUT=${OUT:-bench/results/$(date +%F)-mcast.md}
if [ "$(id -u)" -eq 0 ]; then NICE=${NICE:--10}; else NICE=${NICE:-0}; fi

die() {
  echo "bench-mcast: $*" >&2
  exit 1
}
for tool in ucp_mcast_recv epoll_mcast_recv uring_bare_mcast_recv mcast_send; do
  [ -x "$BIN/$tool" ] || die "$BIN/$tool not found (cmake -DUCP_BENCH=ON; cmake --build build/release --target $tool)"
done
command -v taskset >/dev/null || die "taskset not found (util-linux)"
command -v python3 >/dev/null || die "python3 not found"
if [ "$SENDERS" -lt 1 ] || [ "$SENDERS" -gt 255 ]; then die "SENDERS must be 1..255"; fi

. scripts/lib/bench-common.sh  # pinned, stop_server, cpu_ticks (the working directory is the root)

WORK=$(mktemp -d)
SENDER_PIDS=()
cleanup() {
  for pid in "${SENDER_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  stop_server
  rm -rf "$WORK"
}
trap cleanup EXIT

free_udp_port() {
  python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0",0)); print(s.getsockname()[1])'
}

# start_receiver NAME: joined to GROUP on a free port; sets SERVER_PID and PORT once it says so.
start_receiver() {
  local name=$1
  local buffers=()
  [[ $name == *:* ]] && buffers=(-n "${name#*:}")
  PORT=$(free_udp_port)
  case ${name%%:*} in
    ucp)
      (pinned "$SERVER_CPUS" "$ROOT/$BIN/ucp_mcast_recv" -g "$GROUP" -p "$PORT" -B "$BACKEND" "${buffers[@]}") \
        >"$WORK/$name.log" 2>&1 &
      ;;
    ucpbatch)
      (pinned "$SERVER_CPUS" "$ROOT/$BIN/ucp_mcast_recv" -g "$GROUP" -p "$PORT" -B "$BACKEND" -m batch "${buffers[@]}") \
        >"$WORK/$name.log" 2>&1 &
      ;;
    mmsg)
      (pinned "$SERVER_CPUS" "$ROOT/$BIN/epoll_mcast_recv" -g "$GROUP" -p "$PORT") \
        >"$WORK/$name.log" 2>&1 &
      ;;
    bare)
      (pinned "$SERVER_CPUS" "$ROOT/$BIN/uring_bare_mcast_recv" -g "$GROUP" -p "$PORT" "${buffers[@]}") \
        >"$WORK/$name.log" 2>&1 &
      ;;
    *) die "unknown receiver $name (ucp, ucpbatch, mmsg, bare)" ;;
  esac
  SERVER_PID=$!
  for _ in $(seq 100); do
    grep -q '^joined' "$WORK/$name.log" 2>/dev/null && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.05
  done
  die "$name did not join $GROUP: $(tail -3 "$WORK/$name.log")"
}

# send RATE SECONDS [-z]: SENDERS senders, stream i each, RATE/SENDERS a second each (0: flat
# out); waits for them. Sets SENT, REFUSED and SEND_RATE (all senders together).
send() {
  local rate=$1 seconds=$2 extra=${3:-} each i
  each=$(python3 -c "print($rate / $SENDERS)")
  SENDER_PIDS=()
  for i in $(seq 0 $((SENDERS - 1))); do
    # shellcheck disable=SC2086  # extra is empty or -z
    (pinned "$CLIENT_CPUS" "$BIN/mcast_send" -g "$GROUP" -p "$PORT" -s "$SIZE" -r "$each" \
      -d "$seconds" -t "$i" $extra) >"$WORK/send.$i" 2>&1 &
    SENDER_PIDS+=($!)
  done
  for i in "${!SENDER_PIDS[@]}"; do
    wait "${SENDER_PIDS[$i]}" || die "mcast_send: $(cat "$WORK/send.$i")"
  done
  SENDER_PIDS=()
  read -r SENT REFUSED SEND_RATE < <(cat "$WORK"/send.* | awk '{s += $2; r += $4; q += $8}
    END {printf "%d %d %.0f\n", s, r, q}')
  rm -f "$WORK"/send.*
}

# run_one PART NAME ROUND RATE: one receiver, warm-up, then DURATION seconds at RATE.
run_one() {
  local part=$1 name=$2 round=$3 rate=$4
  start_receiver "$name"
  send "$rate" "$WARMUP" -z
  sleep 0.3  # the warm-up drained
  local before after line
  before=$(cpu_ticks "$SERVER_PID")
  send "$rate" "$DURATION"
  sleep 0.3  # what is queued is received
  after=$(cpu_ticks "$SERVER_PID")
  stop_server
  line=$(grep '^received' "$WORK/$name.log") || die "$name reported nothing: $(tail -3 "$WORK/$name.log")"
  # received N gaps G missing M late L warmup W short B seconds S wakeups K [...]
  local fields
  read -r -a fields <<<"$line"
  local received=${fields[1]} gaps=${fields[3]} missing=${fields[5]} late=${fields[7]}
  local warmup=${fields[9]} wakeups=${fields[15]}
  echo "$part $name $round $rate $received $gaps $missing $late $SENT $REFUSED $SEND_RATE $((after - before)) $warmup $wakeups" \
    >>"$WORK/results"
  printf '  %-5s %-4s round %s: %10s received (%s missing in %s gaps), %10s sent (%s/s), receiver CPU %5.2f s\n' \
    "$part" "$name" "$round" "$received" "$missing" "$gaps" "$SENT" "$SEND_RATE" \
    "$(echo "($after - $before) / $(getconf CLK_TCK)" | bc -l)"
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
echo "bench-mcast: $ROUNDS round(s) x ${DURATION}s per part, ${SIZE} B to $GROUP, $SENDERS sender(s); receivers: $RECEIVERS (ucp on $BACKEND); receiver CPU $SERVER_CPUS, sender CPU $CLIENT_CPUS"
if [ "$FLAT" != 0 ]; then
  echo "part 1: flat out"
  for round in $(seq "$ROUNDS"); do
    for name in $RECEIVERS; do run_one flat "$name" "$round" 0; done
  done
else
  [ -n "$RATE" ] || die "FLAT=0 needs RATE"
  : >"$WORK/results"
fi

if [ -z "$RATE" ]; then
  RATE=$(python3 - "$WORK/results" "$(getconf CLK_TCK)" "$LOSS_FRACTION" <<'PY'
import statistics, sys
hz, fraction = float(sys.argv[2]), float(sys.argv[3])
rates = [float(f[4]) / (float(f[11]) / hz) for f in map(str.split, open(sys.argv[1]))
         if f[0] == "flat" and f[1] == "mmsg" and float(f[11]) > 0]
print(f"{fraction * statistics.median(rates):.0f}" if rates else "")
PY
)
  [ -n "$RATE" ] || die "part 2 needs the recvmmsg loop's part-1 figure (RECEIVERS with mmsg) or RATE"
fi
echo "part 2: loss at $RATE datagrams/s"
for round in $(seq "$ROUNDS"); do
  for name in $RECEIVERS; do run_one loss "$name" "$round" "$RATE"; done
done

mkdir -p "$(dirname "$OUT")"
python3 - "$WORK/results" "$(getconf CLK_TCK)" "$OUT" <<PY
import statistics, sys
path, hz, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
rows = [line.split() for line in open(path)]
names = {"ucp": "UCP (ucp_mcast_recv, on_datagram handler, $BACKEND)",
         "ucpbatch": "UCP (ucp_mcast_recv -m batch, receive_batch, $BACKEND)", "mmsg": "recvmmsg loop (epoll_mcast_recv)",
         "bare": "bare io_uring receiver (uring_bare_mcast_recv)"}
lines = []
w = lines.append
w("# Multicast receive: UCP against a plain recvmmsg loop")
w("")
w("\`\`\`")
w("ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP SIZE=$SIZE SENDERS=$SENDERS RECEIVERS=\"$RECEIVERS\" BACKEND=$BACKEND \\\\")
w("  SERVER_CPUS=$SERVER_CPUS CLIENT_CPUS=$CLIENT_CPUS LOSS_FRACTION=$LOSS_FRACTION${RATE_GIVEN:+ RATE=$RATE_GIVEN}${FLAT_GIVEN:+ FLAT=$FLAT_GIVEN} scripts/bench-mcast.sh")
w("\`\`\`")
w("")
w("$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), "
  "kernel $(uname -r), $(nproc) CPU(s): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'). "
  "$SIZE-byte datagrams to $GROUP over lo; receiver pinned to CPU $SERVER_CPUS, "
  "$SENDERS sender(s) to CPU $CLIENT_CPUS; ${DURATION} s per run after ${WARMUP} s of warm-up. "
  "Load average before: $LOAD_BEFORE; after: $(cut -d' ' -f1-3 /proc/loadavg).")
w("")
w("## Part 1: flat out, datagrams per receiver-CPU-second")
w("")
w("| receiver | round | received | missing | sent/s | receiver CPU s | per CPU-second | per wake-up |")
w("|---|---|---:|---:|---:|---:|---:|---:|")
per_cpu = {}
for part, name, rnd, rate, received, gaps, missing, late, sent, refused, send_rate, ticks, warmup, wakeups in rows:
    if part != "flat":
        continue
    cpu = float(ticks) / hz
    value = float(received) / cpu if cpu > 0 else 0.0
    per_cpu.setdefault(name, {})[rnd] = value
    per_wakeup = (int(received) + int(warmup)) / int(wakeups) if int(wakeups) else 0.0
    w(f"| {name} | {rnd} | {int(received):,} | {int(missing):,} | {float(send_rate):,.0f} | {cpu:.2f} | {value:,.0f} | {per_wakeup:,.1f} |")
w("")
summary = []
for name, rounds in per_cpu.items():
    summary.append(f"- {names.get(name, name)}: **{statistics.median(rounds.values()):,.0f}** datagrams per CPU-second (median)")
def paired_median(a, b, table):
    """The median of the per-round ratios a / b in table, or None when no round has both."""
    if a not in table or b not in table:
        return None
    ratios = [table[a][r] / table[b][r] for r in table[a]
              if r in table[b] and table[b][r] > 0]
    return statistics.median(ratios) if ratios else None
for a, b, what, why in (
        ("ucp", "mmsg", "UCP / recvmmsg loop", "median of per-round ratios; the goal is >= 1.0x"),
        ("ucpbatch", "mmsg", "UCP receive_batch / recvmmsg loop", "median of per-round ratios"),
        ("bare", "mmsg", "the io_uring ceiling / recvmmsg loop", "median of per-round ratios"),
        ("ucp", "bare", "UCP / the io_uring ceiling", "UCP's share of what a bare io_uring receiver does")):
    ratio = paired_median(a, b, per_cpu)
    if ratio is not None:
        summary.append(f"- {what}: **{ratio:.2f}x** ({why})")
lines += summary
w("")
w("Per wake-up: datagrams (warm-up included) per time the receiver came back from waiting "
  "(ucp: io_uring_enter or epoll_wait calls of its loop; bare: waits after which completions "
  "were there; mmsg: epoll_wait calls that found the "
  "socket readable). Missing: lost while the receiver could not keep up or was not running.")
w("")
w("## Part 2: loss at $RATE datagrams/s ($LOSS_FRACTION of the recvmmsg loop's figure unless RATE was given)")
w("")
w("| receiver | round | sent | sent/s | received | missing (gaps) | sent - received | refused by the sender's kernel | receiver CPU s | per CPU-second |")
w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
lost, reached = {}, []
paced = {}
for part, name, rnd, rate, received, gaps, missing, late, sent, refused, send_rate, ticks, warmup, wakeups in rows:
    if part != "loss":
        continue
    lost[name] = lost.get(name, 0) + max(int(missing), int(sent) - int(received))
    reached.append(float(send_rate) / float(rate))
    cpu = float(ticks) / hz
    value = float(received) / cpu if cpu > 0 else 0.0
    paced.setdefault(name, {})[rnd] = value
    w(f"| {name} | {rnd} | {int(sent):,} | {float(send_rate):,.0f} | {int(received):,} | {int(missing):,} ({gaps}) | {int(sent) - int(received):,} | {refused} | {cpu:.2f} | {value:,.0f} |")
w("")
paced_summary = []
for name, rounds in paced.items():
    paced_summary.append(f"- At the paced rate, {names.get(name, name)}: **{statistics.median(rounds.values()):,.0f}** datagrams per CPU-second (median)")
for a, b, what in (("ucp", "mmsg", "UCP / recvmmsg loop"), ("ucpbatch", "mmsg", "UCP receive_batch / recvmmsg loop"),
                   ("bare", "mmsg", "the io_uring ceiling / recvmmsg loop"), ("ucp", "bare", "UCP / the io_uring ceiling")):
    ratio = paired_median(a, b, paced)
    if ratio is not None:
        paced_summary.append(f"- At the paced rate, {what}: **{ratio:.2f}x** (median of per-round ratios)")
lines += paced_summary
summary += paced_summary
for name, count in lost.items():
    w(f"- {names.get(name, name)}: {'**0 lost**' if count == 0 else f'**{count:,} lost**'} over the rounds")
if reached and min(reached) < 0.95:
    w(f"- The senders reached only {min(reached):.0%} of $RATE datagrams/s in some run: the loss "
      "figure holds for the rate they reached (more SENDERS on more CLIENT_CPUS send faster).")
text = "\n".join(lines) + "\n"
open(out, "w").write(text)
print()
print("\n".join(summary))
for name, count in lost.items():
    print(f"- loss at $RATE/s, {names.get(name, name)}: {count}")
print(f"report: {out}")
PY

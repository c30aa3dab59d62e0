#!/usr/bin/env bash
# User-space instructions per datagram of UCP's multicast receive, deterministically: callgrind
# cannot run io_uring, so bin/ucp_mcast_recv runs on the epoll backend (recvmmsg into the loop's
# receive buffers; above the backend, the path is the one io_uring uses; MODE handler is
# on_datagram(), MODE batch receive_batch()) under valgrind --tool=callgrind, collecting inside EventLoop::run() only, while
# bin/mcast_send (pinned to CPU 1) sends RATE datagrams a second of 256 bytes for DURATION s to
# 239.255.77.1 over loopback. Prints the instructions (Ir) collected, the datagrams received and
# Ir per datagram, then callgrind_annotate's top functions. Valgrind is slow: the receiver
# misses part of the traffic (the figure is per datagram received, so that does not matter).
# A light load: fine beside other work, unlike scripts/bench-mcast.sh.
#
#   scripts/callgrind-mcast.sh                     # RATE 50000, DURATION 3
#   UCP_BIN_DIR=/tmp/old-bin scripts/callgrind-mcast.sh
#
# Environment: RATE [50000], DURATION [3] (whole seconds), MODE [handler] or batch,
# UCP_BIN_DIR [bin], OUT [a temporary directory, kept: callgrind.out there].
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${UCP_BIN_DIR:-bin}
RATE=${RATE:-50000}
DURATION=${DURATION:-3}
MODE=${MODE:-handler}
OUT=${OUT:-$(mktemp -d)}
for tool in ucp_mcast_recv mcast_send; do
  [ -x "$BIN/$tool" ] || { echo "callgrind-mcast: $BIN/$tool not found (cmake -DUCP_BENCH=ON)" >&2; exit 1; }
done
command -v valgrind >/dev/null || { echo "callgrind-mcast: valgrind not found" >&2; exit 1; }

PORT=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0",0)); print(s.getsockname()[1])')
taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out" \
  --collect-atstart=no --toggle-collect='ucp::EventLoop::run()' \
  "$BIN/ucp_mcast_recv" -g 239.255.77.1 -p "$PORT" -B epoll -m "$MODE" -d "$((DURATION + 5))" \
  >"$OUT/recv.log" 2>"$OUT/valgrind.log" &
RECEIVER=$!
trap 'kill -TERM "$RECEIVER" 2>/dev/null || true' EXIT
for _ in $(seq 300); do
  grep -q '^joined' "$OUT/recv.log" 2>/dev/null && break
  kill -0 "$RECEIVER" 2>/dev/null || break
  sleep 0.1
done
grep -q '^joined' "$OUT/recv.log" || { echo "callgrind-mcast: the receiver did not join" >&2; exit 1; }
sleep 0.5
taskset -c 1 "$BIN/mcast_send" -g 239.255.77.1 -p "$PORT" -s 256 -r "$RATE" -d "$DURATION"
wait "$RECEIVER"
trap - EXIT
cat "$OUT/recv.log"
IR=$(callgrind_annotate "$OUT/callgrind.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
RECEIVED=$(awk '/^received/ {print $2}' "$OUT/recv.log")
python3 -c "print('Ir $IR received $RECEIVED Ir/datagram %.1f' % ($IR / max($RECEIVED, 1)))"
callgrind_annotate --inclusive=no "$OUT/callgrind.out" 2>/dev/null | sed -n '/file:function/,$p' | head -16

#!/usr/bin/env bash
# UDP echo, 256-byte datagrams: bin/proactor_test --set server.protocol=udp_echo against two
# plain epoll loops (bin/epoll_udp_echo: -m mmsg, recvmmsg/sendmmsg batches of 64; -m plain,
# recvfrom/sendto per datagram), in the same run. One server thread pinned to SERVER_CPUS,
# bin/udp_load (CLIENTS connected sockets, WINDOW datagrams in flight each) pinned to
# CLIENT_CPUS. The figure is echoed datagrams per server-CPU-second (utime + stime of the
# server process over the load, from /proc/PID/stat). Servers alternate within each round;
# medians over the rounds, and the ratios of UCP to each peer per round, medians of those.
#
#   scripts/bench-udp.sh                            # 3 rounds of 5 s
#   ROUNDS=1 DURATION=5 scripts/bench-udp.sh
#
# Environment: ROUNDS [3], DURATION [5] s, SIZE [256] bytes, CLIENTS [100], WINDOW [4],
# SERVERS ["ucp mmsg plain"], BACKEND [io_uring] for ucp, SERVER_CPUS [0], CLIENT_CPUS [1],
# NICE [-10 as root, else 0], UCP_BIN_DIR [bin]. Needs bin/proactor_test, bin/epoll_udp_echo
# and bin/udp_load (cmake -DUCP_BENCH=ON; --target proactor_test epoll_udp_echo udp_load). Run
# it on an otherwise idle machine: other load makes the numbers noise.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${UCP_BIN_DIR:-bin}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
SIZE=${SIZE:-256}
CLIENTS=${CLIENTS:-100}
WINDOW=${WINDOW:-4}
SERVERS=${SERVERS:-ucp mmsg plain}
BACKEND=${BACKEND:-io_uring}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
if [ "$(id -u)" -eq 0 ]; then NICE=${NICE:--10}; else NICE=${NICE:-0}; fi

die() {
  echo "bench-udp: $*" >&2
  exit 1
}
for tool in proactor_test epoll_udp_echo udp_load; do
  [ -x "$BIN/$tool" ] || die "$BIN/$tool not found (cmake -DUCP_BENCH=ON; cmake --build build/release --target $tool)"
done
command -v taskset >/dev/null || die "taskset not found (util-linux)"
command -v python3 >/dev/null || die "python3 not found"

. scripts/lib/bench-common.sh  # pinned, stop_server, cpu_ticks (the working directory is the root)

WORK=$(mktemp -d)
cleanup() {
  stop_server
  rm -rf "$WORK"
}
trap cleanup EXIT

free_udp_port() {
  python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_server NAME: on a free port; sets SERVER_PID and PORT once a datagram comes back.
start_server() {
  local name=$1
  PORT=$(free_udp_port)
  case $name in
    ucp)
      (pinned "$SERVER_CPUS" "$ROOT/$BIN/proactor_test" "$ROOT/config/ucp.conf" \
        --set server.protocol=udp_echo --set server.ip=127.0.0.1 --set server.port="$PORT" \
        --set server.thread_num=1 --set event_loop.backend="$BACKEND" --set log.file= \
        --set log.console=true --set log.level=WARN) >"$WORK/$name.log" 2>&1 &
      ;;
    mmsg | plain)
      (pinned "$SERVER_CPUS" "$ROOT/$BIN/epoll_udp_echo" -p "$PORT" -m "$name") \
        >"$WORK/$name.log" 2>&1 &
      ;;
    *) die "unknown server $name (ucp, mmsg, plain)" ;;
  esac
  SERVER_PID=$!
  python3 - "$PORT" <<'PY' || die "$name did not answer: $(tail -3 "$WORK/$name.log")"
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.1)
for _ in range(100):
    s.sendto(b"ping", ("127.0.0.1", int(sys.argv[1])))
    try:
        if s.recv(16) == b"ping":
            sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
PY
}


run_one() {
  local name=$1 round=$2
  start_server "$name"
  (pinned "$CLIENT_CPUS" "$BIN/udp_load" -p "$PORT" -c "$CLIENTS" -w "$WINDOW" -s "$SIZE" -d 1) \
    >/dev/null 2>&1 || true # warm-up
  local before after out
  before=$(cpu_ticks "$SERVER_PID")
  out=$( (pinned "$CLIENT_CPUS" "$BIN/udp_load" -p "$PORT" -c "$CLIENTS" -w "$WINDOW" \
    -s "$SIZE" -d "$DURATION") 2>&1) || die "udp_load against $name: $out"
  after=$(cpu_ticks "$SERVER_PID")
  stop_server
  local echoes seconds refills
  echoes=$(echo "$out" | awk '{print $2}')
  refills=$(echo "$out" | awk '{print $4}')
  seconds=$(echo "$out" | awk '{print $8}')
  echo "$name $round $echoes $seconds $((after - before)) $refills" >>"$WORK/results"
  printf '  %-6s round %s: %10s echoes in %ss (%8.0f/s), server CPU %5.2f s, %s window refills\n' \
    "$name" "$round" "$echoes" "$seconds" "$(echo "$echoes / $seconds" | bc -l)" \
    "$(echo "($after - $before) / $(getconf CLK_TCK)" | bc -l)" "$refills"
}

echo "bench-udp: $ROUNDS round(s) x ${DURATION}s, ${SIZE} B, $CLIENTS clients x $WINDOW in flight; servers: $SERVERS (ucp on $BACKEND); server CPU $SERVER_CPUS, client CPU $CLIENT_CPUS"
for round in $(seq "$ROUNDS"); do
  for name in $SERVERS; do run_one "$name" "$round"; done
done

python3 - "$WORK/results" "$(getconf CLK_TCK)" <<'PY'
import statistics, sys
path, hz = sys.argv[1], float(sys.argv[2])
per_cpu = {}
for line in open(path):
    name, rnd, echoes, seconds, ticks, refills = line.split()
    cpu = float(ticks) / hz
    per_cpu.setdefault(name, {})[rnd] = float(echoes) / cpu if cpu > 0 else 0.0
print()
print("echoed datagrams per server-CPU-second (median over rounds)")
for name, rounds in per_cpu.items():
    print(f"  {name:6s} {statistics.median(rounds.values()):12,.0f}")
if "ucp" in per_cpu:
    for peer in per_cpu:
        if peer == "ucp":
            continue
        ratios = [per_cpu["ucp"][r] / per_cpu[peer][r] for r in per_cpu["ucp"]
                  if r in per_cpu[peer] and per_cpu[peer][r] > 0]
        if ratios:
            print(f"  ucp / {peer}: {statistics.median(ratios):.2f}x (median of per-round ratios)")
PY

#!/usr/bin/env bash
# scripts/idle-memory.sh: user-space memory per idle connection, UCP beside its peers.
#
# For each server: start it fresh, open N connections to it, make one round trip on each
# (an echo of 64 bytes, one keep-alive HTTP GET, or a WebSocket upgrade and the echo of one
# 64-byte binary message), then leave all N idle and read the
# server's resident memory (VmRSS of /proc/PID/status). Per connection = (RSS with N idle
# connections - RSS before them) / N. Kernel socket memory is not in RSS and is the same for
# every server; what differs is what the server itself keeps per connection.
#
#   scripts/idle-memory.sh                 # N = 10000: ucp echo, ucp http, http_server, epoll_echo, nginx
#   IDLE_CONNS=2000 IDLE_SERVERS="ucp-echo nginx" scripts/idle-memory.sh
#   IDLE_SERVERS=ucp-ws scripts/idle-memory.sh    # proactor_test protocol = websocket
#
# Environment: UCP_BIN_DIR [bin], IDLE_CONNS [10000], IDLE_SERVERS
# ["ucp-echo ucp-http http_server epoll_echo asio_echo nginx"], NGINX [/usr/sbin/nginx].
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${UCP_BIN_DIR:-$ROOT/bin}
CONNS=${IDLE_CONNS:-10000}
SERVERS=${IDLE_SERVERS:-ucp-echo ucp-http http_server epoll_echo asio_echo nginx}
NGINX=${NGINX:-/usr/sbin/nginx}
SCRATCH=$(mktemp -d /tmp/ucp-idle-memory.XXXXXX)
ulimit -n $((CONNS + 1024)) 2>/dev/null || { echo "idle-memory.sh: cannot raise the fd limit to $((CONNS + 1024))" >&2; exit 1; }

SERVER_PID=""
stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  for _ in $(seq 1 200); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.05; done
  kill -KILL "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}
trap 'stop_server; rm -rf "$SCRATCH"' EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

printf '%-12s %8s %14s %16s %s\n' server conns "RSS growth" "per connection" note
for server in $SERVERS; do
  port=$(free_port)
  protocol=echo
  case $server in
    ucp-echo | ucp-http | ucp-ws)
      protocol=${server#ucp-}
      [ "$protocol" = ws ] && protocol=websocket
      [ -x "$BIN/proactor_test" ] || { echo "$server: $BIN/proactor_test missing" >&2; continue; }
      "$BIN/proactor_test" config/ucp.conf --set "server.port=$port" --set "server.protocol=$protocol" \
        --set server.thread_num=1 --set server.read_timeout_ms=0 --set log.console=false \
        --set log.file= >"$SCRATCH/$server.log" 2>&1 &
      ;;
    http_server)
      protocol=http
      [ -x "$BIN/http_server" ] || { echo "$server: $BIN/http_server missing" >&2; continue; }
      "$BIN/http_server" config/ucp.conf --set "server.port=$port" --set server.thread_num=1 \
        --set http.root="$SCRATCH" --set log.console=false --set log.file= >"$SCRATCH/$server.log" 2>&1 &
      ;;
    nginx)
      protocol=http
      [ -x "$NGINX" ] || { echo "nginx: $NGINX missing" >&2; continue; }
      mkdir -p "$SCRATCH/nginx"
      sed -e "s#@PORT@#$port#g" -e "s#@PREFIX@#$SCRATCH/nginx#g" bench/peers/nginx.conf.in \
        | sed -e "s#worker_rlimit_nofile 20000#worker_rlimit_nofile $((CONNS + 1024))#" \
              -e "s#worker_connections 16384#worker_connections $((CONNS + 512))#" >"$SCRATCH/nginx/nginx.conf"
      "$NGINX" -p "$SCRATCH/nginx" -c "$SCRATCH/nginx/nginx.conf" >"$SCRATCH/nginx.log" 2>&1 &
      ;;
    *)
      [ -x "$BIN/$server" ] || { echo "$server: $BIN/$server missing" >&2; continue; }
      "$BIN/$server" -p "$port" >"$SCRATCH/$server.log" 2>&1 &
      ;;
  esac
  SERVER_PID=$!
  for _ in $(seq 1 200); do
    ss -Hltn "sport = :$port" 2>/dev/null | grep -q LISTEN && break
    sleep 0.05
  done
  # Warm-up: connections with one round trip each, so pools, rings and lazy state exist
  # before the baseline is read. UCP maps its 4096 provided buffers at start and a buffer
  # becomes resident when the kernel first receives into it (round the ring): the warm-up
  # uses each of them once, or their first use would count as per-connection memory.
  python3 - "$port" 4200 "$protocol" hold=0 <"/dev/null" >/dev/null
  sleep 0.3
  before=$(rss_kb "$SERVER_PID")
  python3 - "$port" "$CONNS" "$protocol" hold=1 "$SERVER_PID" "$before" "$server" <<'EOF'
import socket, sys, time
port, n, protocol, hold = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "hold=1"
request = (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n" if protocol == "http" else b"x" * 64)
upgrade = (b"GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
# One masked binary frame of 64 bytes (mask key 0: the payload goes as it is); its echo is 66.
frame = b"\x82\xc0\x00\x00\x00\x00" + b"x" * 64
def recv_until(s, done):
    got = b""
    while not done(got):
        more = s.recv(4096)
        if not more: return None
        got += more
    return got
socks, failed = [], 0
for i in range(n):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        if protocol == "websocket":
            head = recv_until(s, lambda g: b"\r\n\r\n" in g) if s.sendall(upgrade) is None else None
            tail = head.split(b"\r\n\r\n", 1)[1] if head and head.startswith(b"HTTP/1.1 101") else None
            got = None if tail is None else recv_until(s, lambda g: len(g) >= 66) if s.sendall(frame) is None else None
            if tail is not None and len(tail) >= 66: got = tail
        else:
            s.sendall(request)
            got = s.recv(4096)
        if not got: failed += 1
        socks.append(s)
    except OSError:
        failed += 1
if hold:
    pid, before, name = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
    time.sleep(0.5)
    after = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS:"))
    growth = after - before
    per = growth * 1024 / max(len(socks), 1)
    note = f"{failed} failed" if failed else ""
    print(f"{name:<12} {len(socks):>8} {growth:>11} KiB {per:>12.0f} B   {note}")
for s in socks:
    s.close()
EOF
  stop_server
done

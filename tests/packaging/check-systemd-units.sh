#!/usr/bin/env bash
# Checks deploy/ucp-echo.service and deploy/ucp-echo.socket (ctest: deploy_systemd_units).
#   1. `systemd-analyze verify` on both units, with ExecStart pointed at the freshly built
#      bin/proactor_test (verify insists that the binary exists); any complaint fails.
#   2. When systemd-socket-activate is present: the unit's own ExecStart command line runs under
#      it (a listening socket passed as fd 3, LISTEN_FDS/LISTEN_PID as systemd sets them) and
#      bin/test_client checks the echo; SIGTERM must end it with exit 0.
# Exit 77 (ctest: skipped) with one line saying why when systemd-analyze is missing.
#
#   tests/packaging/check-systemd-units.sh UCP_SOURCE BIN_DIR
set -euo pipefail
source_dir=$1
bin_dir=$(cd "$2" && pwd)

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "SKIP: systemd-analyze is not installed (Debian package systemd); units not verified"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/ucp-units-XXXXXX")
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid"; fi
  rm -rf "$work"
}
trap cleanup EXIT

sed "s#/usr/local/bin/proactor_test#$bin_dir/proactor_test#" "$source_dir/deploy/ucp-echo.service" \
  >"$work/ucp-echo.service"
cp "$source_dir/deploy/ucp-echo.socket" "$work/"
if ! (cd "$work" && systemd-analyze verify ./ucp-echo.socket ./ucp-echo.service) >"$work/verify.log" 2>&1 ||
   [ -s "$work/verify.log" ]; then
  echo "systemd-analyze verify complains:" >&2
  cat "$work/verify.log" >&2
  exit 1
fi
echo "systemd-analyze verify: ucp-echo.socket and ucp-echo.service are clean"

if ! command -v systemd-socket-activate >/dev/null 2>&1; then
  echo "systemd-socket-activate is missing: socket-activated start not exercised here"
  exit 0
fi
# The unit's command line, with the repository's config instead of /etc/ucp/ucp.conf.
exec_start=$(sed -n 's/^ExecStart=//p' "$work/ucp-echo.service")
exec_start=${exec_start//\/etc\/ucp\/ucp.conf/$source_dir\/config\/ucp.conf}
# systemd-socket-activate takes no port 0: try a few random high ports. Like systemd, it
# listens first and starts the server when the first connection arrives.
port=""
for _ in 1 2 3 4 5; do
  candidate=$((20000 + RANDOM % 40000))
  : >"$work/server.out"  # exists before the background job opens it
  # shellcheck disable=SC2086
  systemd-socket-activate -l "127.0.0.1:$candidate" $exec_start >>"$work/server.out" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do  # at most 10 s for its "Listening on" line
    if grep -q "Listening on 127.0.0.1:$candidate" "$work/server.out"; then
      port=$candidate
      break
    fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$port" ] && break
  if kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid"; fi
  wait "$server_pid" || true
  server_pid=""
  grep -q "Address already in use" "$work/server.out" || break
done
[ -n "$port" ] || { echo "systemd-socket-activate did not listen:" >&2; cat "$work/server.out" >&2; exit 1; }
"$bin_dir/test_client" normal --port "$port"  # its first connection starts the server
grep -q "listening on 127.0.0.1:$port (socket passed by the service manager)" "$work/server.out" ||
  { echo "the server did not adopt the passed socket:" >&2; cat "$work/server.out" >&2; exit 1; }
kill -TERM "$server_pid"
status=0
for _ in $(seq 1 100); do
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
wait "$server_pid" || status=$?
server_pid=""
[ "$status" -eq 0 ] || { echo "exit $status after SIGTERM:" >&2; cat "$work/server.out" >&2; exit 1; }
echo "socket-activated start through systemd-socket-activate: echo byte-exact, exit 0 on SIGTERM"

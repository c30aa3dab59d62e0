# scripts/lib/bench-common.sh: helpers the benchmark scripts share. Sourced, not run.
#
# Expects NICE (the nice level for pinned processes, 0 for none) to be set before pinned() runs.

# pinned CPUS CMD...: runs CMD on CPUS at nice level NICE, in its own session so that the
# nice level holds under autogroup scheduling. Call it in a subshell: it execs.
pinned() {
  local cpus=$1
  shift
  if [ "$NICE" != 0 ]; then
    exec setsid sh -c 'echo "$0" >/proc/self/autogroup 2>/dev/null; exec "$@"' "$NICE" \
      nice -n "$NICE" taskset -c "$cpus" "$@"
  else
    exec taskset -c "$cpus" "$@"
  fi
}

# stop_server: stops the process SERVER_PID names (TERM, up to 5 s, then KILL) and clears it.
SERVER_PID=
stop_server() {
  if [ -n "$SERVER_PID" ]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
  fi
}

# cpu_ticks PID: user + system clock ticks the process has used (/proc/PID/stat).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# scripts/lib/bench-common.sh: helpers the benchmark scripts share. Sourced, not run.
#
# Expects NICE (the nice level for pinned processes, 0 for none) to be set before pinned() runs.

# pinned CPUS CMD...: runs CMD on CPUS at nice level NICE. With autogroup scheduling (the
# default), nice acts only inside a session, so a non-zero NICE also gives CMD its own session
# (setsid) whose autogroup gets the same nice. setsid does not fork here (a subshell is no
# group leader) and sh execs: the PID of the background job is the PID of CMD. Call it only
# in a subshell (`pinned ... &` or `$(pinned ...)`): it execs.
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

# stop_server: stops the process SERVER_PID names (TERM, up to 10 s, then KILL with a warning)
# and clears it.
SERVER_PID=
stop_server() {
  if [ -n "$SERVER_PID" ]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 200); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.05; done
    if kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "WARNING: server $SERVER_PID ignored SIGTERM for 10 s; killing it" >&2
      kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
  fi
}

# cpu_ticks PID: user + system clock ticks the process has used (/proc/PID/stat).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

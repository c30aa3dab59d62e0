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

# wrk_json WRK_OUTPUT CPU_TICKS_BEFORE CPU_TICKS_AFTER SECONDS: one JSON line of a wrk --latency
# run: qps, p99_us, requests, seconds, server_cpu_s (from the server's ticks), errors (non-2xx
# responses and socket errors).
wrk_json() {
  python3 - "$1" "$2" "$3" "$(getconf CLK_TCK)" "$4" <<'PY'
import json, re, sys
out, before, after = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
hz, seconds = int(sys.argv[4]), float(sys.argv[5])
def number(pattern):
    m = re.search(pattern, out)
    return float(m.group(1)) if m else 0.0
def latency_us(label):
    m = re.search(r"^\s*" + label + r"\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)] if m else 0.0
errors = number(r"Non-2xx or 3xx responses: (\d+)") + sum(
    float(x) for x in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
print(json.dumps({"qps": number(r"Requests/sec:\s+([\d.]+)"), "p99_us": latency_us("99%"),
                  "requests": number(r"(\d+) requests in"), "seconds": seconds,
                  "server_cpu_s": (after - before) / hz, "errors": errors}))
PY
}

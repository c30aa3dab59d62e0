#!/usr/bin/env bash
# Writes deploy/seccomp-io_uring.json: Docker's default seccomp profile with the three io_uring
# system calls (io_uring_setup, io_uring_enter, io_uring_register) allowed, and nothing else
# changed. The base is the default.json that Debian 12 ships in golang-github-docker-docker-dev
# (profiles/seccomp/default.json of Docker 20.10); the package is downloaded, not installed.
#
#   deploy/make-seccomp-profile.sh [BASE_JSON]    (BASE_JSON: use this default.json instead)
#
# Docker Engine 25 and later dropped the io_uring calls from its built-in default, so there a
# container needs `--security-opt seccomp=deploy/seccomp-io_uring.json` to use io_uring.
set -euo pipefail
cd "$(dirname "$0")/.."

base=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$base" ]; then
  (cd "$work" && apt-get download -q golang-github-docker-docker-dev >/dev/null 2>&1) ||
    { echo "apt-get download golang-github-docker-docker-dev failed (apt-get update first?)" >&2; exit 1; }
  dpkg-deb -x "$work"/golang-github-docker-docker-dev_*.deb "$work/pkg"
  base=$work/pkg/usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json
  echo "base: $(basename "$work"/golang-github-docker-docker-dev_*.deb)"
fi

python3 - "$base" deploy/seccomp-io_uring.json <<'PY'
import json, sys
base, out = sys.argv[1], sys.argv[2]
profile = json.load(open(base))
wanted = ["io_uring_enter", "io_uring_register", "io_uring_setup"]
# The unconditional allow rule: SCMP_ACT_ALLOW with no argument filter and no include/exclude.
def unconditional(rule):
    return (rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("args")
            and not rule.get("includes") and not rule.get("excludes"))
rule = next(r for r in profile["syscalls"] if unconditional(r))
added = [name for name in wanted if name not in rule["names"]]
for name in added:  # keep the base's order: insert before the first name that sorts after it
    at = next((i for i, n in enumerate(rule["names"]) if n > name), len(rule["names"]))
    rule["names"].insert(at, name)
with open(out, "w") as f:
    json.dump(profile, f, indent="\t")
    f.write("\n")
print(f"{out}: {len(rule['names'])} unconditionally allowed calls; added: {', '.join(added) or 'none (already allowed by this base)'}")
PY

#!/usr/bin/env bash
# Checks deploy/seccomp-io_uring.json (ctest: deploy_seccomp_profile): valid JSON in Docker's
# profile format, everything not listed refused (defaultAction SCMP_ACT_ERRNO), and
# io_uring_setup, io_uring_enter and io_uring_register allowed unconditionally. When Debian's
# copy of Docker's default profile is installed (golang-github-docker-docker-dev), the file
# must equal it apart from those three calls (deploy/make-seccomp-profile.sh writes it so).
#
#   tests/packaging/check-seccomp-profile.sh UCP_SOURCE
set -euo pipefail
profile=$1/deploy/seccomp-io_uring.json
debian=/usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json

python3 - "$profile" "$debian" <<'PY'
import json, os, sys
path, debian = sys.argv[1], sys.argv[2]
profile = json.load(open(path))
uring = {"io_uring_setup", "io_uring_enter", "io_uring_register"}
assert profile["defaultAction"] == "SCMP_ACT_ERRNO", "defaultAction must refuse what is not listed"
assert any(a["architecture"] == "SCMP_ARCH_X86_64" for a in profile["archMap"]), "x86-64 missing"
unconditional = [r for r in profile["syscalls"] if r["action"] == "SCMP_ACT_ALLOW"
                 and not r.get("args") and not r.get("includes") and not r.get("excludes")]
allowed = set().union(*(set(r["names"]) for r in unconditional))
missing = uring - allowed
assert not missing, f"not allowed unconditionally: {sorted(missing)}"
# Docker's default allows the ordinary calls of a network server; a truncated file would not.
for name in ["accept4", "epoll_wait", "read", "sendmsg", "recvmsg", "socket", "mmap", "futex"]:
    assert name in allowed or any(name in r["names"] for r in profile["syscalls"]), name
print(f"{path}: {len(allowed)} calls allowed unconditionally, io_uring_* among them")
if os.path.exists(debian):
    base = json.load(open(debian))
    strip = lambda p: [dict(r, names=[n for n in r["names"] if n not in uring]) for r in p["syscalls"]]
    assert strip(base) == strip(profile) and base["archMap"] == profile["archMap"], \
        f"{path} differs from {debian} beyond the io_uring calls"
    print(f"equal to {debian} apart from the io_uring calls")
PY

#!/usr/bin/env bash
# Installs the Debian packages a make target needs, and nothing when they are all present.
# Usage: scripts/install-deps.sh GROUP...
#   build     what compiling the library and the binaries needs (deploy/Dockerfile's build stage)
#   core      build + what configuring the whole tree needs (GoogleTest, python3): every make target
#   runtime   the shared libraries the binaries load (deploy/Dockerfile's runtime stage; Debian 12
#             names, checked against the built binaries by tests/packaging/check-dockerfile.py)
#   test interop bench memcheck format: the other make targets
# Never touches apt when every package of the requested groups is installed already.
# interop also needs Node's `ws` module (the WebSocket interop tests and the Node bench peer):
# when node cannot load it, it is installed with npm into build/npm (NODE_PATH=build/npm/
# node_modules); a failure there is a warning, and those tests skip saying why.
set -euo pipefail

packages_for() {
  case "$1" in
    build) echo "cmake g++ make pkg-config liburing-dev libfmt-dev node-llhttp zlib1g-dev libssl-dev" ;;
    core) echo "$(packages_for build) python3 libgtest-dev libgmock-dev openssl" ;;
    runtime) echo "liburing2 libfmt9 zlib1g libssl3" ;;
    # prometheus: promtool; nlohmann-json3-dev: Json_test (ucp/http/Json.h is optional, header only)
    test) echo "curl clang libclang-rt-14-dev haproxy prometheus wrk nlohmann-json3-dev" ;;
    interop) echo "libboost-dev testssl.sh" ;;  # + nodejs, npm and ws below; testssl: TestSsl_test
    bench) echo "libbenchmark-dev libconcurrentqueue-dev libspdlog-dev libboost-dev wrk nginx-light libnginx-mod-stream haproxy gnuplot-nox linux-perf python3 fio bc nghttp2-client" ;;
    memcheck) echo "valgrind" ;;
    format) echo "clang-format-16" ;;
    *) echo "install-deps: unknown group '$1'" >&2; exit 2 ;;
  esac
}

# Node's ws for the interop group: npm is the registry's ordinary client.
node_ws() {
  local root
  root=$(cd "$(dirname "$0")/.." && pwd)
  NODE_PATH="$root/build/npm/node_modules:/usr/share/nodejs" node -e "require('ws')" 2>/dev/null && return 0
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    if [ "$(id -u)" -eq 0 ]; then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm ||
        echo "install-deps: nodejs/npm could not be installed" >&2
    fi
  fi
  if command -v npm >/dev/null; then
    npm install --no-save --no-audit --no-fund --prefix "$root/build/npm" ws@8 >/dev/null 2>&1 ||
      echo "install-deps: npm install ws failed: the Node interop tests will skip" >&2
  else
    echo "install-deps: npm missing: the Node interop tests will skip" >&2
  fi
}
for group in "$@"; do
  if [ "$group" = interop ]; then node_ws; fi
done

missing=()
for group in "$@"; do
  for pkg in $(packages_for "$group"); do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root, or: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"

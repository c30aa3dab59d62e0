#!/usr/bin/env bash
# Installs the Debian packages a make target needs, and nothing when they are all present.
# Usage: scripts/install-deps.sh GROUP...   (groups: core test bench memcheck format)
# Never touches apt when every package of the requested groups is installed already.
set -euo pipefail

packages_for() {
  case "$1" in
    core) echo "cmake g++ make pkg-config python3 liburing-dev libfmt-dev libgtest-dev libgmock-dev node-llhttp zlib1g-dev" ;;
    test) echo "curl clang libclang-rt-14-dev" ;;
    bench) echo "libbenchmark-dev libspdlog-dev libboost-dev wrk nginx-light gnuplot-nox linux-perf python3" ;;
    memcheck) echo "valgrind" ;;
    format) echo "clang-format-16" ;;
    *) echo "install-deps: unknown group '$1'" >&2; exit 2 ;;
  esac
}

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

#!/usr/bin/env bash
# Builds tests/consumer (an echo server that uses UCP) one way, runs it and checks it with
# bin/test_client. ctest runs each mode as consumer_<mode> (tests/packaging/CMakeLists.txt).
#
#   tests/consumer/run.sh MODE UCP_SOURCE UCP_BUILD TEST_CLIENT
#
#   find_package      cmake --install UCP_BUILD into a scratch prefix; find_package(ucp)
#   pkg-config        the same install; c++ with `pkg-config --cflags ucp` and `--libs ucp`
#   add_subdirectory  add_subdirectory(UCP_SOURCE) with BUILD_SHARED_LIBS=ON: also checks the
#                     SONAMEs and that the shared libraries export the ucp namespace only
#   fetchcontent      FetchContent from an archive of UCP_SOURCE, as from a release tarball, with
#                     BUILD_SHARED_LIBS=ON and the same checks as add_subdirectory
#
# ctest runs find_package, pkg-config and fetchcontent. FetchContent_MakeAvailable is
# add_subdirectory of the unpacked sources, so fetchcontent proves what add_subdirectory does
# (and that the archive is complete) with one compilation of UCP instead of two, the most
# expensive step of the packaging tests; add_subdirectory stays here to be run by hand.
#
# Exit 0 when the consumer builds, echoes byte-exact and stops cleanly on SIGTERM.
set -euo pipefail

mode=$1
source_dir=$(cd "$2" && pwd)
build_dir=$(cd "$3" && pwd)
test_client=$4
consumer_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ucp-consumer-$mode-XXXXXX")
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid"; fi
  rm -rf "$work"
}
trap cleanup EXIT
jobs=${UCP_CONSUMER_JOBS:-2}

step() { echo "consumer[$mode]: $*"; }

install_ucp() {
  step "cmake --install into $work/prefix"
  cmake --install "$build_dir" --prefix "$work/prefix" >"$work/install.log"
}

# An unoptimised build type: the consumer checks linking and behaviour, not speed.
configure_and_build() {
  step "cmake -DUCP_CONSUMER_MODE=$mode $*"
  cmake -S "$consumer_dir" -B "$work/build" -DCMAKE_BUILD_TYPE= -DUCP_CONSUMER_MODE="$mode" "$@" \
    >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
  cmake --build "$work/build" -j "$jobs" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
  binary=$work/build/consumer_echo
}

# UCP built as a subproject with shared libraries (in UCP_BUILD_DIR from the sources in
# UCP_SOURCE_DIR): SONAMEs, exports, the consumer linking them, and nothing written into the
# sources.
check_shared_build() {
  local ucp_build=$1 ucp_source=$2 soversion layer library soname expected foreign
  # Before 1.0 the SOVERSION is MAJOR.MINOR of project(ucp VERSION ...).
  soversion=$(sed -n 's/^project(ucp VERSION \([0-9]*\.[0-9]*\).*/\1/p' "$ucp_source/CMakeLists.txt")
  for layer in log memory metrics coro io net tls http ws app; do
    library=$(find "$ucp_build" -name "libucp_$layer.so" | head -n 1)
    soname=$(readelf -d "$library" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    expected=libucp_$layer.so.$soversion
    [ "$soname" = "$expected" ] || { echo "$library: SONAME '$soname', expected '$expected'" >&2; exit 1; }
    # Every exported definition involves namespace ucp (cmake/ucp.map).
    foreign=$(nm -D --defined-only "$library" | awk '{print $3}' | grep -v '3ucp' || true)
    [ -z "$foreign" ] || { echo "$library exports non-UCP symbols:" >&2; echo "$foreign" | head >&2; exit 1; }
  done
  step "SONAMEs libucp_<layer>.so.MAJOR.MINOR, exports limited to namespace ucp"
  readelf -d "$binary" | grep -q 'NEEDED.*libucp_net\.so' ||
    { echo "consumer_echo does not link libucp_net.so" >&2; exit 1; }
  [ -z "$(find "$ucp_source/bin" -newer "$work/configure.log" -type f 2>/dev/null)" ] ||
    { echo "the subproject build wrote into $ucp_source/bin" >&2; exit 1; }
}

case "$mode" in
  find_package)
    install_ucp
    configure_and_build -DCMAKE_PREFIX_PATH="$work/prefix"
    ;;
  pkg-config)
    install_ucp
    export PKG_CONFIG_PATH=$work/prefix/lib/pkgconfig
    step "pkg-config --modversion ucp: $(pkg-config --modversion ucp)"
    # As people type it: the flags say C++20, and the plain --libs links the default (static)
    # libraries with everything they use.
    cflags=$(pkg-config --cflags ucp)
    case " $cflags " in *" -std=c++20 "*) ;; *) echo "Cflags lack -std=c++20: $cflags" >&2; exit 1 ;; esac
    step "c++ main.cpp $cflags $(pkg-config --libs ucp)"
    # shellcheck disable=SC2046
    c++ "$consumer_dir/main.cpp" -o "$work/consumer_echo" $(pkg-config --cflags ucp) \
      $(pkg-config --libs ucp)
    binary=$work/consumer_echo
    ;;
  add_subdirectory)
    configure_and_build -DUCP_SOURCE="$source_dir" -DBUILD_SHARED_LIBS=ON
    check_shared_build "$work/build/ucp" "$source_dir"
    ;;
  fetchcontent)
    step "archive of $source_dir"
    tar -C "$source_dir" --exclude=./build --exclude=./bin --exclude=./.git --exclude=./logs \
      --exclude=./bench/results -czf "$work/ucp.tar.gz" .
    configure_and_build -DUCP_ARCHIVE="$work/ucp.tar.gz" -DBUILD_SHARED_LIBS=ON
    check_shared_build "$work/build/_deps/ucp-build" "$work/build/_deps/ucp-src"
    ;;
  *)
    echo "usage: $0 {find_package|pkg-config|add_subdirectory|fetchcontent} UCP_SOURCE UCP_BUILD TEST_CLIENT" >&2
    exit 2
    ;;
esac

# As a subproject UCP must not add its tests, tools or examples to the consumer's build.
if [ -d "$work/build" ] && [ -n "$(find "$work/build" -type f \( -name proactor_test -o -name '*_test' -o -name 'example_*' \) | head -n 1)" ]; then
  echo "UCP as a subproject built its tests, tools or examples" >&2
  exit 1
fi

step "run $binary"
: >"$work/server.out"  # exists before the background job opens it: the loop below reads it
"$binary" >>"$work/server.out" 2>&1 &
server_pid=$!
port=""
for _ in $(seq 1 100); do  # at most 10 s for the "listening on" line
  port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/server.out")
  [ -n "$port" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$port" ] || { echo "consumer_echo did not start:" >&2; cat "$work/server.out" >&2; exit 1; }
step "$(head -n 1 "$work/server.out")"

"$test_client" normal --port "$port"

kill -TERM "$server_pid"
for _ in $(seq 1 100); do  # at most 10 s for a graceful stop
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$server_pid" 2>/dev/null; then
  echo "consumer_echo still running 10 s after SIGTERM" >&2
  exit 1
fi
status=0
wait "$server_pid" || status=$?
server_pid=""
[ "$status" -eq 0 ] || { echo "consumer_echo exited $status" >&2; cat "$work/server.out" >&2; exit 1; }
step "PASS: built, echoed byte-exact, stopped cleanly"

#!/usr/bin/env bash
# Builds deploy/Dockerfile and runs the image with deploy/seccomp-io_uring.json (ctest:
# deploy_docker): the server must come up on io_uring as a non-root user, echo byte-exact
# through the published port, and exit 0 on `docker stop`. Exit 77 (ctest: skipped) with one
# line saying why when no Docker engine answers.
#
#   tests/packaging/check-docker.sh UCP_SOURCE TEST_CLIENT
set -euo pipefail
source_dir=$(cd "$1" && pwd)
test_client=$2

if ! command -v docker >/dev/null 2>&1; then
  echo "SKIP: docker is not installed: deploy/Dockerfile not built here"
  exit 77
fi
if ! docker info >/dev/null 2>&1; then
  echo "SKIP: no Docker engine answers (docker info failed): deploy/Dockerfile not built here"
  exit 77
fi

tag=ucp-echo-test:$$
container=""
cleanup() {
  if [ -n "$container" ]; then docker rm -f "$container" >/dev/null 2>&1 || true; fi
  docker rmi -f "$tag" >/dev/null 2>&1 || true
}
trap cleanup EXIT

docker build -q -f "$source_dir/deploy/Dockerfile" -t "$tag" "$source_dir" >/dev/null
container=$(docker run -d --security-opt "seccomp=$source_dir/deploy/seccomp-io_uring.json" \
  -p 127.0.0.1::8888 "$tag")
port=$(docker port "$container" 8888/tcp | sed -n '1s/.*:\([0-9]*\)$/\1/p')
[ -n "$port" ] || { echo "no published port" >&2; exit 1; }
for _ in $(seq 1 100); do  # at most 10 s for the "listening on" line
  docker logs "$container" 2>&1 | grep -q "listening on" && break
  sleep 0.1
done
logs=$(docker logs "$container" 2>&1)
echo "$logs" | grep -q "listening on" || { echo "server did not start:" >&2; echo "$logs" >&2; exit 1; }
echo "$logs" | grep -q " io_uring: " || { echo "not running on io_uring:" >&2; echo "$logs" >&2; exit 1; }
user=$(docker exec "$container" id -u)
[ "$user" != 0 ] || { echo "the server runs as root" >&2; exit 1; }

"$test_client" normal --port "$port"

docker stop -t 10 "$container" >/dev/null
status=$(docker wait "$container")
[ "$status" = 0 ] || { echo "exit $status after docker stop:" >&2; docker logs "$container" >&2; exit 1; }
echo "docker: built, io_uring with the seccomp profile, uid $user, echo byte-exact, exit 0 on stop"

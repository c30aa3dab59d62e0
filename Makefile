# UCP top-level entry points. Each target installs what is missing (apt, when root),
# configures and builds, then does its job. See README.md.
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
CONFIG ?= config/ucp.conf
FUZZ_SECONDS ?= 600
WERROR ?= ON

.PHONY: all deps test-deps configure build run run-http run-https test test-release test-asan test-tsan test-fuzz asan-build tsan-build fuzz-build fuzz ctest-release ctest-asan ctest-tsan run-fuzz-short bench memcheck soak format format-check clean

all: build

deps:
	@scripts/install-deps.sh core

# What the tests use besides the build: curl (HTTP clients in the integration tests), clang
# and its runtime libraries (libFuzzer), haproxy (deploy/haproxy.cfg in Balancer_test), promtool
# (Debian's prometheus package: Registry_test checks the metrics exposition with it),
# nlohmann/json (Json_test: the optional JSON helpers of ucp/http/Json.h), Boost
# (the Beast WebSocket client) and Node's ws (npm, into build/npm) for the WebSocket interop tests.
test-deps:
	@scripts/install-deps.sh core test interop

configure: deps
	@cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DUCP_WERROR=$(WERROR) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build build/release -j $(JOBS)

# Builds what it runs and nothing else (no test, no tool, no example).
run: configure
	@cmake --build build/release -j $(JOBS) --target proactor_test
	bin/proactor_test $(CONFIG)

# bin/http_server on port 8888, serving www/ (created with a small index.html if absent).
run-http: configure
	@cmake --build build/release -j $(JOBS) --target http_server
	@mkdir -p www
	@[ -e www/index.html ] || printf '<!doctype html>\n<title>UCP</title>\n<h1>It works</h1>\n<p>Served by bin/http_server from www/.</p>\n' >www/index.html
	bin/http_server $(CONFIG)

# bin/http_server over HTTPS on port 8443 (and WSS on /ws/echo), with a self-signed ECDSA P-256
# certificate for localhost made once under build/https/:
#   curl --cacert build/https/cert.pem https://localhost:8443/
HTTPS_DIR := build/https
run-https: configure
	@cmake --build build/release -j $(JOBS) --target http_server
	@mkdir -p www $(HTTPS_DIR)
	@[ -e www/index.html ] || printf '<!doctype html>\n<title>UCP</title>\n<h1>It works</h1>\n<p>Served by bin/http_server from www/.</p>\n' >www/index.html
	@[ -e $(HTTPS_DIR)/cert.pem ] && [ -e $(HTTPS_DIR)/key.pem ] || \
	  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
	    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
	    -keyout $(HTTPS_DIR)/key.pem -out $(HTTPS_DIR)/cert.pem
	bin/http_server $(CONFIG) --set server.port=8443 --set tls.enable=true \
	  --set tls.certificate=$(HTTPS_DIR)/cert.pem --set tls.private_key=$(HTTPS_DIR)/key.pem

# Unit + integration tests on the release build, the whole suite again under
# AddressSanitizer + UBSan (LeakSanitizer on), the cross-thread tests under TSan, and a short
# run of the fuzzers. scripts/make-test.sh runs the same passes as test-release, test-asan,
# test-tsan and test-fuzz below, overlapped: while one pass's tests run (they mostly wait on
# sockets), the next tree compiles at the lowest CPU priority (SCHED_IDLE).
test: build test-deps
	@scripts/make-test.sh
	@echo "make test: all passes green"

test-release: build test-deps
	@$(MAKE) --no-print-directory ctest-release
test-asan: asan-build
	@$(MAKE) --no-print-directory ctest-asan
test-tsan: tsan-build
	@$(MAKE) --no-print-directory ctest-tsan
test-fuzz: fuzz-build
	@$(MAKE) --no-print-directory run-fuzz-short

# The sanitizer trees: -Og -g1 (line tables), not RelWithDebInfo's -O2 -g. Compiling with
# ASan+UBSan at -O2 -g costs about three times as much CPU as at -Og -g1, and the reports
# keep their file:line frames; the release tree is the one that tests the optimised code.
SANITIZER_FLAGS = -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-Og -g1 -DNDEBUG" \
                  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-Og -g1 -DNDEBUG"

asan-build: test-deps
	@cmake -S . -B build/asan $(SANITIZER_FLAGS) -DUCP_SANITIZE=address -DUCP_WERROR=$(WERROR) $(CMAKE_FLAGS) >/dev/null
	@cmake --build build/asan -j $(JOBS)

# Builds the `threads`-labelled tests and what they link, nothing else (ucp_threads_tests).
tsan-build: deps
	@cmake -S . -B build/tsan $(SANITIZER_FLAGS) -DUCP_SANITIZE=thread -DUCP_WERROR=$(WERROR) $(CMAKE_FLAGS) >/dev/null
	@cmake --build build/tsan -j $(JOBS) --target ucp_threads_tests

# The libFuzzer harnesses (clang, ASan+UBSan): a short run in make test, a long one in make
# fuzz. -O1 with line tables, as libFuzzer's documentation builds them (about 10 % less
# compile CPU than RelWithDebInfo's -O2 -g); a crash still names file:line.
fuzz-build: test-deps
	@cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
	  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DUCP_SANITIZE=address -DUCP_FUZZ=ON -DUCP_WERROR=$(WERROR) $(CMAKE_FLAGS) >/dev/null
	@cmake --build build/fuzz -j $(JOBS) --target http_request_fuzz ws_frame_fuzz tls_server_fuzz

fuzz: fuzz-build
	scripts/fuzz.sh $(FUZZ_SECONDS)

# The test runs alone, on trees already built (make test's pipeline calls them).
ctest-release:
	cd build/release && ctest --output-on-failure -j $(JOBS) --timeout 300
ctest-asan:
	cd build/asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) --timeout 600
ctest-tsan:
	cd build/tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ctest --output-on-failure -L threads -j $(JOBS) --timeout 600
run-fuzz-short:
	scripts/fuzz.sh 25

bench: deps
	@scripts/install-deps.sh bench
	@cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DUCP_WERROR=$(WERROR) -DUCP_BENCH=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build build/release -j $(JOBS)
	scripts/run-micro-benchmarks.sh
	./benchmark.sh

memcheck: build
	@scripts/install-deps.sh memcheck
	scripts/memcheck.sh

soak: build
	scripts/soak.sh

format:
	@scripts/install-deps.sh format
	git ls-files '*.h' '*.cpp' | xargs clang-format-16 -i

format-check:
	@scripts/install-deps.sh format
	git ls-files '*.h' '*.cpp' | xargs clang-format-16 --dry-run --Werror

clean:
	rm -rf build bin

// asio_connect: the Boost.Asio C++20 coroutine client side of connection churn, as an Asio user
// writes it: the peer bench_client --churn (UCP's TcpClient) is compared with.
//
//   asio_connect -h HOST -p PORT -c SLOTS -s SIZE -d SECONDS [--json]
//
// One io_context on one thread (concurrency hint 1); each of SLOTS coroutines (co_spawn +
// use_awaitable) cycles like a bench_client --churn slot: async_connect to a numeric address,
// async_write of a SIZE-byte message, async_read of its echo (compared byte for byte), close
// with SO_LINGER 0 (RST: no TIME_WAIT port left behind), again at once. Errors come back through
// redirect_error, not exceptions. Prints connections per second and the process's CPU time, so
// that connections per client-CPU-second can be compared (scripts/bench-connect.sh).

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <sys/resource.h>

namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Run {
  tcp::endpoint server;
  size_t size = 64;
  Clock::time_point end;
  uint64_t connections = 0;
  uint64_t errors = 0;
};

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

/// The message of slot `slot`, cycle `cycle`: bytes that differ per slot and cycle.
void fill(std::vector<char>& message, uint64_t slot, uint64_t cycle) {
  uint64_t x = slot * 0x9E3779B97F4A7C15ull + cycle;
  for (char& c : message) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    c = static_cast<char>(x * 0x2545F4914F6CDD1Dull >> 56);
  }
}

awaitable<void> slot(Run& run, uint64_t id) {
  auto executor = co_await asio::this_coro::executor;
  std::vector<char> message(run.size);
  std::vector<char> echo(run.size);
  asio::steady_timer backoff(executor);
  for (uint64_t cycle = 0; Clock::now() < run.end; ++cycle) {
    boost::system::error_code ec;
    tcp::socket socket(executor);
    co_await socket.async_connect(run.server, asio::redirect_error(use_awaitable, ec));
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);
      socket.set_option(asio::socket_base::linger(true, 0), ec);
      fill(message, id, cycle);
      co_await asio::async_write(socket, asio::buffer(message),
                                 asio::redirect_error(use_awaitable, ec));
    }
    if (!ec) {
      co_await asio::async_read(socket, asio::buffer(echo),
                                asio::redirect_error(use_awaitable, ec));
    }
    if (!ec && echo != message) ec = asio::error::invalid_argument;
    socket.close(ec);  // linger 0: RST
    if (!ec) {
      if (Clock::now() < run.end) ++run.connections;
      continue;
    }
    if (Clock::now() >= run.end) break;
    ++run.errors;
    backoff.expires_after(std::chrono::milliseconds(10));  // no spin on a refusing server
    co_await backoff.async_wait(asio::redirect_error(use_awaitable, ec));
  }
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: asio_connect -h HOST -p PORT -c SLOTS -s SIZE -d SECONDS [--json]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  long port = 0;
  long slots = 32;
  long size = 64;
  long seconds = 5;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--json") {
      json = true;
      continue;
    }
    if (i + 1 >= argc) usage();
    const char* value = argv[++i];
    if (flag == "-h") {
      host = value;
    } else if (flag == "-p") {
      port = std::strtol(value, nullptr, 10);
    } else if (flag == "-c") {
      slots = std::strtol(value, nullptr, 10);
    } else if (flag == "-s") {
      size = std::strtol(value, nullptr, 10);
    } else if (flag == "-d") {
      seconds = std::strtol(value, nullptr, 10);
    } else {
      usage();
    }
  }
  if (port <= 0 || port > 65535 || slots <= 0 || size <= 0 || seconds <= 0) usage();
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) {
    std::fprintf(stderr, "asio_connect: -h takes a numeric address: %s\n", host.c_str());
    return 2;
  }

  asio::io_context context(1);
  Run run;
  run.server = tcp::endpoint(address, static_cast<unsigned short>(port));
  run.size = static_cast<size_t>(size);
  const double cpu_before = cpu_seconds();
  const auto start = Clock::now();
  run.end = start + std::chrono::seconds(seconds);
  for (long i = 0; i < slots; ++i) {
    asio::co_spawn(context, slot(run, static_cast<uint64_t>(i)), asio::detached);
  }
  context.run();
  const double elapsed =
      std::chrono::duration<double>(std::min(Clock::now(), run.end) - start).count();
  const double cpu = cpu_seconds() - cpu_before;
  const double rate = static_cast<double>(run.connections) / elapsed;
  if (json) {
    std::printf("{\"mode\":\"asio_connect\",\"conns_per_s\":%.1f,\"connections\":%" PRIu64
                ",\"errors\":%" PRIu64 ",\"seconds\":%.3f,\"client_cpu_s\":%.3f}\n",
                rate, run.connections, run.errors, elapsed, cpu);
  } else {
    std::printf("connections %" PRIu64 " in %.2f s: %.0f conn/s (each: connect, one echo, close)\n",
                run.connections, elapsed, rate);
    std::printf("errors %" PRIu64 "\n", run.errors);
    std::printf("client cpu %.2f s: %.0f connections per client-CPU-second\n", cpu,
                cpu > 0 ? static_cast<double>(run.connections) / cpu : 0.0);
  }
  return run.errors == 0 ? 0 : 1;
}

// test_client: the functional test client for an echo server (docs/design.md, "Binaries").
//
//   test_client {all|normal|slow|idle|abort|concurrent} [--host H] [--port P]
//               [--read-timeout-ms N]
//   test_client --version
//
// Cases:
//   normal      one connection per size from 1 B to 1 MiB: send, read back, compare every byte
//   slow        1 byte at a time, a few ms apart (well inside the read timeout): all echoed back
//   idle        connect, one round trip, then silence: the server must close between 0.5x and 2x
//               --read-timeout-ms (default 5000; 0 = the server has no timeout, case skipped)
//   abort       a client resets (SO_LINGER {1, 0} close) in the middle of a large transfer,
//               several times; a new client is then served byte-exact
//   concurrent  50 connections x 1000 round trips of varying sizes, all byte-exact
// Prints one "PASS name (details)" or "FAIL name: reason" line per case ("SKIP name (why)" for
// a case the server's configuration makes meaningless). Every wait is bounded by poll(2)
// timeouts. Exit status: 0 all passed, 1 any FAIL, 2 bad usage.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include "ucp/version.h"

#include "LoopbackClient.h"

namespace {

using ucp::UniqueFd;
using namespace std::chrono_literals;
namespace t = ucp::test;

struct Options {
  std::string host = "127.0.0.1";
  uint16_t port = 8888;
  int64_t read_timeout_ms = 5000;
  std::vector<std::string> cases;
};

/// The outcome of one case: passed (with details), failed (with the reason) or skipped.
struct Outcome {
  enum class Kind { kPass, kFail, kSkip };
  Kind kind;
  std::string text;
  static Outcome pass(std::string details) { return {Kind::kPass, std::move(details)}; }
  static Outcome fail(std::string reason) { return {Kind::kFail, std::move(reason)}; }
  static Outcome skip(std::string why) { return {Kind::kSkip, std::move(why)}; }
};

std::string describe(std::error_code ec) {
  if (ec == std::errc::connection_aborted) return "connection closed by the server (EOF)";
  if (ec == std::errc::timed_out) return "timed out";
  if (ec == std::errc::illegal_byte_sequence) return "echoed bytes differ from the bytes sent";
  return ec.message();
}

std::string human_bytes(size_t n) {
  if (n >= (1u << 20) && n % (1u << 20) == 0) return std::to_string(n >> 20) + " MiB";
  if (n >= 1024 && n % 1024 == 0) return std::to_string(n >> 10) + " KiB";
  return std::to_string(n) + " B";
}

int64_t elapsed_ms(t::Clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t::Clock::now() - since).count();
}

// ---------------------------------------------------------------------------------------------
// normal: byte-exact echo of every size class the server's buffers care about (below, at and
// above one read buffer, several buffers, 1 MiB), each on a fresh connection.

Outcome run_normal(const Options& options) {
  constexpr size_t kSizes[] = {1,     2,     7,     100,   1000,   4095,    4096,    4097,
                               16384, 65535, 65536, 65537, 262144, 1000000, 1u << 20};
  size_t total = 0;
  std::vector<char> out;
  std::vector<char> in;
  for (size_t i = 0; i < std::size(kSizes); ++i) {
    const size_t size = kSizes[i];
    auto fd = t::connect_tcp(options.host, options.port);
    if (!fd) return Outcome::fail("connect: " + describe(fd.error()));
    out.resize(size);
    in.assign(size, 0);
    t::fill_pattern(out, i + 1);
    if (auto done = t::exchange(fd->get(), out, in, 20000); !done) {
      return Outcome::fail(human_bytes(size) + " message: " + describe(done.error()));
    }
    if (const size_t at = t::first_pattern_mismatch(in, i + 1); at != std::string::npos) {
      return Outcome::fail(human_bytes(size) + " message: byte " + std::to_string(at) +
                           " differs from the byte sent");
    }
    total += size;
  }
  // The same connection carries several messages back to back, too.
  auto fd = t::connect_tcp(options.host, options.port);
  if (!fd) return Outcome::fail("connect: " + describe(fd.error()));
  for (uint64_t round = 0; round < 100; ++round) {
    const size_t size = 1 + (round * 997) % 8192;
    out.resize(size);
    in.resize(size);
    t::fill_pattern(out, 1000 + round);
    if (auto done = t::echo_round_trip(fd->get(), out, in); !done) {
      return Outcome::fail("round trip " + std::to_string(round) +
                           " on one connection: " + describe(done.error()));
    }
    total += size;
  }
  return Outcome::pass(std::to_string(std::size(kSizes)) + " sizes 1 B..1 MiB + 100 round trips " +
                       "on one connection, " + std::to_string(total) + " bytes byte-exact");
}

// ---------------------------------------------------------------------------------------------
// slow: one byte per write, kSlowGap apart, reading echoes as they come.

Outcome run_slow(const Options& options) {
  constexpr size_t kBytes = 200;
  constexpr auto kSlowGap = 5ms;
  auto fd = t::connect_tcp(options.host, options.port);
  if (!fd) return Outcome::fail("connect: " + describe(fd.error()));
  std::vector<char> out(kBytes);
  std::vector<char> in(kBytes);
  t::fill_pattern(out, 77);
  size_t got = 0;
  const auto start = t::Clock::now();
  for (size_t i = 0; i < kBytes; ++i) {
    if (auto sent = t::send_all(fd->get(), std::span<const char>(&out[i], 1)); !sent) {
      return Outcome::fail("byte " + std::to_string(i) + ": " + describe(sent.error()));
    }
    std::this_thread::sleep_for(kSlowGap);
    // Collect whatever has been echoed so far without waiting.
    while (got < kBytes) {
      auto n = t::recv_some(fd->get(), std::span<char>(in).subspan(got), 0);
      if (!n) {
        if (n.error() == std::errc::timed_out) break;
        return Outcome::fail("after " + std::to_string(i + 1) + " bytes: " + describe(n.error()));
      }
      if (*n == 0) {
        return Outcome::fail("server closed the connection after " + std::to_string(i + 1) +
                             " bytes sent one at a time");
      }
      got += *n;
    }
  }
  if (got < kBytes) {
    if (auto rest = t::recv_exact(fd->get(), std::span<char>(in).subspan(got), 5000); !rest) {
      return Outcome::fail("waiting for the last " + std::to_string(kBytes - got) +
                           " echoed bytes: " + describe(rest.error()));
    }
  }
  if (const size_t at = t::first_pattern_mismatch(in, 77); at != std::string::npos) {
    return Outcome::fail("byte " + std::to_string(at) + " differs from the byte sent");
  }
  return Outcome::pass(std::to_string(kBytes) + " single-byte writes " +
                       std::to_string(kSlowGap.count()) + " ms apart in " +
                       std::to_string(elapsed_ms(start)) + " ms, all echoed in order");
}

// ---------------------------------------------------------------------------------------------
// idle: after one round trip the client goes silent; the server must close near the timeout.

Outcome run_idle(const Options& options) {
  if (options.read_timeout_ms == 0) {
    return Outcome::skip("--read-timeout-ms 0: the server has no idle timeout to check");
  }
  auto fd = t::connect_tcp(options.host, options.port);
  if (!fd) return Outcome::fail("connect: " + describe(fd.error()));
  char out[16];
  char in[16];
  t::fill_pattern(out, 5);
  if (auto done = t::echo_round_trip(fd->get(), out, in); !done) {
    return Outcome::fail("first round trip: " + describe(done.error()));
  }
  const auto idle_since = t::Clock::now();
  const int64_t low_ms = options.read_timeout_ms / 2;
  const int64_t high_ms = options.read_timeout_ms * 2;
  auto closed = t::drain_until_closed(fd->get(), high_ms + 1000);
  const int64_t waited_ms = elapsed_ms(idle_since);
  if (!closed) {
    if (closed.error() == std::errc::timed_out) {
      return Outcome::fail("still open after " + std::to_string(waited_ms) +
                           " ms idle (read_timeout_ms " + std::to_string(options.read_timeout_ms) +
                           ")");
    }
    return Outcome::fail("while idle: " + describe(closed.error()));
  }
  if (*closed != 0) {
    return Outcome::fail("server sent " + std::to_string(*closed) + " unexpected bytes");
  }
  const std::string window = "[" + std::to_string(low_ms) + ", " + std::to_string(high_ms) + "] ms";
  if (waited_ms < low_ms || waited_ms > high_ms) {
    return Outcome::fail("closed after " + std::to_string(waited_ms) + " ms idle, outside " +
                         window);
  }
  return Outcome::pass("closed after " + std::to_string(waited_ms) + " ms idle, read_timeout_ms " +
                       std::to_string(options.read_timeout_ms) + ", window " + window);
}

// ---------------------------------------------------------------------------------------------
// abort: RST in the middle of a large transfer, then a new client must be served.

Outcome run_abort(const Options& options) {
  constexpr int kAborts = 5;
  constexpr size_t kTransfer = 8u << 20;  // far more than both sides' socket buffers hold
  std::vector<char> out(kTransfer);
  t::fill_pattern(out, 9);
  std::vector<char> in(256 * 1024);
  size_t total_sent = 0;
  for (int round = 0; round < kAborts; ++round) {
    auto fd = t::connect_tcp(options.host, options.port);
    if (!fd)
      return Outcome::fail("connect (round " + std::to_string(round) +
                           "): " + describe(fd.error()));
    // Push until the pipe is full in both directions (the server is mid-write to us), reading
    // only a little, then reset.
    size_t sent = 0;
    const t::Deadline deadline(3000);
    while (sent < kTransfer && !deadline.expired()) {
      auto ready = t::wait_for(fd->get(), POLLOUT, t::Deadline(200));
      if (!ready) break;  // the server stopped reading: back-pressure reached
      const ssize_t n = ::send(fd->get(), out.data() + sent,
                               std::min<size_t>(65536, kTransfer - sent), MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    if (sent == 0) return Outcome::fail("round " + std::to_string(round) + ": could not send");
    auto head = t::recv_some(fd->get(), std::span<char>(in).first(1000), 2000);
    if (!head || *head == 0) {
      return Outcome::fail("round " + std::to_string(round) + ": nothing echoed after " +
                           std::to_string(sent) + " bytes sent");
    }
    t::set_reset_on_close(fd->get());
    fd->reset();
    total_sent += sent;
  }
  // A fresh client is served, byte-exact.
  auto fd = t::connect_tcp(options.host, options.port);
  if (!fd) return Outcome::fail("connect after the resets: " + describe(fd.error()));
  std::span<const char> probe(out.data(), 65536);
  if (auto done = t::echo_round_trip(fd->get(), probe, in); !done) {
    return Outcome::fail("64 KiB round trip after the resets: " + describe(done.error()));
  }
  return Outcome::pass(std::to_string(kAborts) + " RST closes mid-transfer (" +
                       std::to_string(total_sent / kAborts / 1024) +
                       " KiB in flight each on average); next client served byte-exact");
}

// ---------------------------------------------------------------------------------------------
// concurrent: kConnections sockets in one poll loop, each in lockstep send -> echo -> compare.

Outcome run_concurrent(const Options& options) {
  constexpr size_t kConnections = 50;
  constexpr uint64_t kRounds = 1000;
  constexpr size_t kMaxMessage = 512;
  struct Conn {
    UniqueFd fd;
    uint64_t round = 0;
    uint64_t offset = 0;  // stream offset of the current message
    size_t size = 0;
    size_t sent = 0;
    size_t got = 0;
    char out[kMaxMessage];
    char in[kMaxMessage];
  };
  auto begin_message = [](Conn& c, size_t index) {
    c.size = 1 + (c.round * 131 + index * 17) % kMaxMessage;
    c.sent = 0;
    c.got = 0;
    t::fill_pattern(std::span<char>(c.out, c.size), 100 + index, c.offset);
  };
  std::vector<Conn> conns(kConnections);
  for (size_t i = 0; i < kConnections; ++i) {
    auto fd = t::connect_tcp(options.host, options.port);
    if (!fd) return Outcome::fail("connect #" + std::to_string(i) + ": " + describe(fd.error()));
    conns[i].fd = std::move(*fd);
    begin_message(conns[i], i);
  }
  std::vector<pollfd> fds(kConnections);
  size_t finished = 0;
  uint64_t bytes = 0;
  const auto start = t::Clock::now();
  const t::Deadline deadline(120000);
  while (finished < kConnections) {
    for (size_t i = 0; i < kConnections; ++i) {
      const Conn& c = conns[i];
      fds[i].fd = c.round < kRounds ? c.fd.get() : -1;
      fds[i].events = static_cast<short>(c.sent < c.size ? POLLOUT : POLLIN);
      fds[i].revents = 0;
    }
    const int ready = ::poll(fds.data(), fds.size(), std::min(deadline.remaining_ms(), 10000));
    if (ready == 0) {
      return Outcome::fail(std::to_string(kConnections - finished) +
                           " connections got no progress for 10 s (" + std::to_string(finished) +
                           " finished)");
    }
    if (ready < 0) continue;
    for (size_t i = 0; i < kConnections; ++i) {
      Conn& c = conns[i];
      if (fds[i].revents == 0) continue;
      if (c.sent < c.size) {
        const ssize_t n = ::send(c.fd.get(), c.out + c.sent, c.size - c.sent, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN) {
          return Outcome::fail("connection " + std::to_string(i) +
                               " send: " + std::strerror(errno));
        }
        if (n > 0) c.sent += static_cast<size_t>(n);
        continue;
      }
      const ssize_t n = ::recv(c.fd.get(), c.in + c.got, c.size - c.got, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN)) {
        return Outcome::fail("connection " + std::to_string(i) + " round " +
                             std::to_string(c.round) + ": " +
                             (n == 0 ? std::string("closed by the server") : std::strerror(errno)));
      }
      if (n < 0) continue;
      c.got += static_cast<size_t>(n);
      if (c.got < c.size) continue;
      if (std::memcmp(c.in, c.out, c.size) != 0) {
        return Outcome::fail("connection " + std::to_string(i) + " round " +
                             std::to_string(c.round) + ": echoed bytes differ");
      }
      bytes += c.size;
      c.offset += c.size;
      if (++c.round == kRounds) {
        ++finished;
      } else {
        begin_message(c, i);
      }
    }
  }
  return Outcome::pass(std::to_string(kConnections) + " connections x " + std::to_string(kRounds) +
                       " round trips, " + std::to_string(bytes) + " bytes byte-exact in " +
                       std::to_string(elapsed_ms(start)) + " ms");
}

// ---------------------------------------------------------------------------------------------

int usage(const char* why) {
  std::fprintf(stderr,
               "test_client: %s\nusage: test_client {all|normal|slow|idle|abort|concurrent} "
               "[--host H] [--port P] [--read-timeout-ms N]\n"
               "       test_client --version\n",
               why);
  return 2;
}

std::optional<int64_t> parse_number(std::string_view text, int64_t max) {
  if (text.empty() || text.size() > 12) return std::nullopt;
  int64_t value = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return std::nullopt;
    value = value * 10 + (ch - '0');
  }
  if (value > max) return std::nullopt;
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);  // belt and braces: every send already uses MSG_NOSIGNAL
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--host" && has_value) {
      options.host = argv[++i];
    } else if (arg == "--port" && has_value) {
      auto port = parse_number(argv[++i], 65535);
      if (!port || *port == 0) return usage("--port needs a number 1..65535");
      options.port = static_cast<uint16_t>(*port);
    } else if (arg == "--read-timeout-ms" && has_value) {
      auto timeout = parse_number(argv[++i], 86'400'000);
      if (!timeout) return usage("--read-timeout-ms needs a number 0..86400000");
      options.read_timeout_ms = *timeout;
    } else if (arg == "-h" || arg == "--help") {
      return usage("functional checks against an echo server");
    } else if (arg == "--version") {
      std::printf("test_client (UCP) %s\n", UCP_VERSION_STRING);
      return 0;
    } else if (!arg.empty() && arg[0] != '-') {
      options.cases.emplace_back(arg);
    } else {
      return usage(("unknown or incomplete option: " + std::string(arg)).c_str());
    }
  }
  if (options.cases.empty()) return usage("name a case");

  using Runner = std::function<Outcome(const Options&)>;
  const std::vector<std::pair<std::string, Runner>> all = {{"normal", run_normal},
                                                           {"slow", run_slow},
                                                           {"idle", run_idle},
                                                           {"abort", run_abort},
                                                           {"concurrent", run_concurrent}};
  std::vector<std::pair<std::string, Runner>> selected;
  for (const auto& name : options.cases) {
    if (name == "all") {
      selected.insert(selected.end(), all.begin(), all.end());
      continue;
    }
    auto it = std::find_if(all.begin(), all.end(), [&](const auto& c) { return c.first == name; });
    if (it == all.end()) return usage(("unknown case: " + name).c_str());
    selected.push_back(*it);
  }

  int failures = 0;
  for (const auto& [name, runner] : selected) {
    const Outcome outcome = runner(options);
    switch (outcome.kind) {
      case Outcome::Kind::kPass:
        std::printf("PASS %s (%s)\n", name.c_str(), outcome.text.c_str());
        break;
      case Outcome::Kind::kSkip:
        std::printf("SKIP %s (%s)\n", name.c_str(), outcome.text.c_str());
        break;
      case Outcome::Kind::kFail:
        std::printf("FAIL %s: %s\n", name.c_str(), outcome.text.c_str());
        ++failures;
        break;
    }
    std::fflush(stdout);
  }
  return failures == 0 ? 0 : 1;
}

#include "ucp/config/Config.h"

// A small ini parser of our own rather than libinih: every error, semantic ones included,
// must name FILE:LINE and section.key; keys are typed with ranges; duplicates are refused;
// and --set overrides go through exactly the same validation. docs/config.md says more.

#include <algorithm>
#include <bit>
#include <cassert>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ucp/base/UniqueFd.h"

namespace ucp {
namespace {

/// What the parser throws from deep inside; load() and parse() turn it into their Error, so
/// no exception leaves the config API.
class Invalid : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

constexpr std::string_view kWhitespace = " \t\r\n\v\f";

std::string_view trim(std::string_view text) {
  auto first = text.find_first_not_of(kWhitespace);
  if (first == std::string_view::npos) return {};
  auto last = text.find_last_not_of(kWhitespace);
  return text.substr(first, last - first + 1);
}

// A comment starts at '#' or ';' at the start of the (trimmed) line or after whitespace, so
// `port = 80 ; why` is 80 while `file = logs/a;b.log` keeps its ';'.
std::string_view strip_comment(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '#' && text[i] != ';') continue;
    if (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t') return trim(text.substr(0, i));
  }
  return text;
}

// Built with append(): GCC 12 reports a false -Wrestrict on `"literal" + std::string`.
std::string quoted(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  return out.append(1, '"').append(text).append(1, '"');
}

// "512.0 MiB": bytes for people; the exact figure goes beside it where it matters.
std::string human_bytes(uint64_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  return text;
}

std::string range_text(uint64_t min, uint64_t max) {
  std::string out = "[";
  return out.append(std::to_string(min)).append(", ").append(std::to_string(max)).append("]");
}

// Stores a key's value into the Config, or returns what is wrong with it (empty: fine).
using Apply = std::function<std::string(Config&, std::string_view value)>;
// The key's value in a Config, as the file would spell it.
using Show = std::function<std::string(const Config&)>;

struct Key {
  std::string_view section;
  std::string_view name;
  Apply apply;
  Show show;
};

// `Owner` is the section's type or a base of it (LogConfig's fields from LogOptions).
template <class Section, class Owner, class T>
Show shown(Section Config::*section, T Owner::*field) {
  return [=](const Config& config) -> std::string {
    const T& value = (config.*section).*field;
    if constexpr (std::is_same_v<T, bool>) {
      return value ? "true" : "false";
    } else if constexpr (std::is_same_v<T, std::string>) {
      return value;
    } else if constexpr (std::is_same_v<T, LogLevel>) {
      return std::string(to_string(value));
    } else if constexpr (std::is_same_v<T, QueueFullPolicy>) {
      return value == QueueFullPolicy::kBlock ? "block" : "drop";
    } else {
      return std::to_string(value);
    }
  };
}

enum class Shape : uint8_t { kAny, kPowerOfTwo };

// Decimal digits only: no sign, no hex, no unit suffix (units live in the key's name).
std::string parse_unsigned(std::string_view value, uint64_t min, uint64_t max, Shape shape,
                           uint64_t& out) {
  if (value.empty()) return "empty value (expected an integer in " + range_text(min, max) + ")";
  if (value.front() == '-') {
    return quoted(value) + " is negative (expected an integer in " + range_text(min, max) + ")";
  }
  if (value.find_first_not_of("0123456789") != std::string_view::npos) {
    return quoted(value) + " is not an unsigned integer";
  }
  uint64_t number = 0;
  auto parsed = std::from_chars(value.data(), value.data() + value.size(), number);
  // All digits, so from_chars can only fail with result_out_of_range.
  if (parsed.ec != std::errc() || number < min || number > max) {
    return std::string(value) + " is out of range " + range_text(min, max);
  }
  if (shape == Shape::kPowerOfTwo && !std::has_single_bit(number)) {
    return std::to_string(number) +
           " is not a power of two (nearest: " + std::to_string(std::bit_floor(number)) + " or " +
           std::to_string(std::bit_ceil(number)) + ")";
  }
  out = number;
  return {};
}

template <class Section, class Owner, class T>
Apply unsigned_key(Section Config::*section, T Owner::*field, uint64_t min, uint64_t max,
                   Shape shape = Shape::kAny) {
  assert(max <= std::numeric_limits<T>::max());
  return [=](Config& config, std::string_view value) {
    uint64_t number = 0;
    auto error = parse_unsigned(value, min, max, shape, number);
    if (error.empty()) (config.*section).*field = static_cast<T>(number);
    return error;
  };
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

template <class Section, class Owner>
Apply bool_key(Section Config::*section, bool Owner::*field) {
  return [=](Config& config, std::string_view value) -> std::string {
    auto word = lower(value);
    bool result;
    if (word == "true" || word == "on" || word == "yes" || word == "1") {
      result = true;
    } else if (word == "false" || word == "off" || word == "no" || word == "0") {
      result = false;
    } else {
      return quoted(value) + " is not a boolean (use true/false, on/off, yes/no or 1/0)";
    }
    (config.*section).*field = result;
    return {};
  };
}

enum class Empty : uint8_t { kAllowed, kRefused };

template <class Section, class Owner>
Apply string_key(Section Config::*section, std::string Owner::*field, Empty empty) {
  return [=](Config& config, std::string_view value) -> std::string {
    if (value.empty() && empty == Empty::kRefused) return "empty value";
    (config.*section).*field = std::string(value);
    return {};
  };
}

// http.index: a file name, never a path.
std::string set_index(Config& config, std::string_view value) {
  if (value.empty()) return "empty value";
  if (value.find('/') != std::string_view::npos || value == "." || value == "..") {
    return quoted(value) + " is not a file name (no '/')";
  }
  config.http.index = std::string(value);
  return {};
}

// The one table of keys: section, name, type, range. Adding a key is one line here, one
// field in Config.h, one line in config/ucp.conf and one row in docs/config.md.
const std::vector<Key>& keys() {
  using S = ServerConfig;
  using E = EventLoopConfig;
  using L = LogConfig;
  using H = HttpConfig;
  constexpr auto kServer = &Config::server;
  constexpr auto kLoop = &Config::event_loop;
  constexpr auto kLog = &Config::log;
  constexpr auto kHttp = &Config::http;
  constexpr auto kPow2 = Shape::kPowerOfTwo;
  static const std::vector<Key> table = {
      {"server", "name", string_key(kServer, &S::name, Empty::kRefused), shown(kServer, &S::name)},
      {"server", "ip",
       [](Config& config, std::string_view value) -> std::string {
         if (value.empty()) return "empty value (expected an IP address such as 0.0.0.0 or ::)";
         std::string text(value);
         in6_addr address{};  // large enough for either family
         if (inet_pton(AF_INET, text.c_str(), &address) != 1 &&
             inet_pton(AF_INET6, text.c_str(), &address) != 1) {
           return quoted(value) +
                  " is not a numeric IPv4 or IPv6 address (e.g. 0.0.0.0, 127.0.0.1, :: or ::1)";
         }
         config.server.ip = std::move(text);
         return {};
       },
       shown(kServer, &S::ip)},
      {"server", "port", unsigned_key(kServer, &S::port, 0, 65535), shown(kServer, &S::port)},
      {"server", "thread_num", unsigned_key(kServer, &S::thread_num, 0, 1024),
       shown(kServer, &S::thread_num)},
      {"server", "read_timeout_ms", unsigned_key(kServer, &S::read_timeout_ms, 0, 86400000),
       shown(kServer, &S::read_timeout_ms)},
      {"server", "protocol",
       [](Config& config, std::string_view value) -> std::string {
         if (value != "echo" && value != "http" && value != "udp_echo" && value != "websocket") {
           return quoted(value) + " is not a protocol (use echo, http, udp_echo or websocket)";
         }
         config.server.protocol = std::string(value);
         return {};
       },
       shown(kServer, &S::protocol)},
      {"server", "max_connections", unsigned_key(kServer, &S::max_connections, 1, 16777216),
       shown(kServer, &S::max_connections)},
      {"server", "backlog", unsigned_key(kServer, &S::backlog, 1, 65535),
       shown(kServer, &S::backlog)},
      {"server", "reuse_port", bool_key(kServer, &S::reuse_port), shown(kServer, &S::reuse_port)},
      {"server", "acceptors",
       [](Config& config, std::string_view value) -> std::string {
         if (value != "main" && value != "per_worker") {
           return quoted(value) + " is not an acceptor mode (use main or per_worker)";
         }
         config.server.acceptors = std::string(value);
         return {};
       },
       shown(kServer, &S::acceptors)},
      {"server", "tcp_nodelay", bool_key(kServer, &S::tcp_nodelay),
       shown(kServer, &S::tcp_nodelay)},
      {"server", "shutdown_timeout_ms", unsigned_key(kServer, &S::shutdown_timeout_ms, 0, 3600000),
       shown(kServer, &S::shutdown_timeout_ms)},
      {"server", "max_output_bytes", unsigned_key(kServer, &S::max_output_bytes, 1024, 4294967296),
       shown(kServer, &S::max_output_bytes)},
      {"server", "write_timeout_ms", unsigned_key(kServer, &S::write_timeout_ms, 0, 86400000),
       shown(kServer, &S::write_timeout_ms)},
      {"server", "max_request_bytes", unsigned_key(kServer, &S::max_request_bytes, 1024, 16777216),
       shown(kServer, &S::max_request_bytes)},
      {"server", "udp_recv_buffer_bytes",
       unsigned_key(kServer, &S::udp_recv_buffer_bytes, 0, 1073741824),
       shown(kServer, &S::udp_recv_buffer_bytes)},

      {"event_loop", "backend",
       [](Config& config, std::string_view value) -> std::string {
         if (value != "auto" && value != "io_uring" && value != "epoll") {
           return quoted(value) + " is not a backend (use auto, io_uring or epoll)";
         }
         config.event_loop.backend = std::string(value);
         return {};
       },
       shown(kLoop, &E::backend)},
      {"event_loop", "ring_entries", unsigned_key(kLoop, &E::ring_entries, 8, 32768, kPow2),
       shown(kLoop, &E::ring_entries)},
      {"event_loop", "sqpoll", bool_key(kLoop, &E::sqpoll), shown(kLoop, &E::sqpoll)},
      {"event_loop", "sqpoll_idle_ms", unsigned_key(kLoop, &E::sqpoll_idle_ms, 0, 60000),
       shown(kLoop, &E::sqpoll_idle_ms)},
      {"event_loop", "registered_buffers_count",
       unsigned_key(kLoop, &E::registered_buffers_count, 0, 16384),
       shown(kLoop, &E::registered_buffers_count)},
      {"event_loop", "registered_buffer_size",
       unsigned_key(kLoop, &E::registered_buffer_size, 64, 1048576),
       shown(kLoop, &E::registered_buffer_size)},
      {"event_loop", "pending_queue_capacity",
       unsigned_key(kLoop, &E::pending_queue_capacity, 0, 16777216),
       shown(kLoop, &E::pending_queue_capacity)},
      {"event_loop", "multishot_recv", bool_key(kLoop, &E::multishot_recv),
       shown(kLoop, &E::multishot_recv)},
      {"event_loop", "provided_buffers_count",
       unsigned_key(kLoop, &E::provided_buffers_count, 1, 32768, kPow2),
       shown(kLoop, &E::provided_buffers_count)},
      {"event_loop", "provided_buffer_size",
       unsigned_key(kLoop, &E::provided_buffer_size, 64, 1048576),
       shown(kLoop, &E::provided_buffer_size)},
      {"event_loop", "defer_taskrun", bool_key(kLoop, &E::defer_taskrun),
       shown(kLoop, &E::defer_taskrun)},
      {"event_loop", "cqe_batch", unsigned_key(kLoop, &E::cqe_batch, 0, 65536),
       shown(kLoop, &E::cqe_batch)},
      {"event_loop", "msg_ring_handoff", bool_key(kLoop, &E::msg_ring_handoff),
       shown(kLoop, &E::msg_ring_handoff)},

      {"log", "level",
       [](Config& config, std::string_view value) -> std::string {
         auto level = parse_log_level(value);
         if (!level) {
           return quoted(value) + " is not a log level (use TRACE, DEBUG, INFO, WARN, ERROR " +
                  "or FATAL)";
         }
         config.log.level = *level;
         return {};
       },
       shown(kLog, &L::level)},
      {"log", "file", string_key(kLog, &L::file, Empty::kAllowed), shown(kLog, &L::file)},
      {"log", "max_size", unsigned_key(kLog, &L::max_size, 0, 1099511627776),
       shown(kLog, &L::max_size)},
      {"log", "max_files", unsigned_key(kLog, &L::max_files, 0, 1000), shown(kLog, &L::max_files)},
      {"log", "daily", bool_key(kLog, &L::daily), shown(kLog, &L::daily)},
      {"log", "async", bool_key(kLog, &L::async), shown(kLog, &L::async)},
      {"log", "console", bool_key(kLog, &L::console), shown(kLog, &L::console)},
      {"log", "flush_interval_ms", unsigned_key(kLog, &L::flush_interval_ms, 1, 60000),
       shown(kLog, &L::flush_interval_ms)},
      {"log", "queue_capacity", unsigned_key(kLog, &L::queue_capacity, 16, 16777216),
       shown(kLog, &L::queue_capacity)},
      {"log", "queue_full_policy",
       [](Config& config, std::string_view value) -> std::string {
         if (value == "block") {
           config.log.queue_full_policy = QueueFullPolicy::kBlock;
         } else if (value == "drop") {
           config.log.queue_full_policy = QueueFullPolicy::kDrop;
         } else {
           return quoted(value) + " is not a policy (use block or drop)";
         }
         return {};
       },
       shown(kLog, &L::queue_full_policy)},
      {"log", "stats_interval_ms", unsigned_key(kLog, &L::stats_interval_ms, 0, 86400000),
       shown(kLog, &L::stats_interval_ms)},

      {"http", "root", string_key(kHttp, &H::root, Empty::kRefused), shown(kHttp, &H::root)},
      {"http", "index", set_index, shown(kHttp, &H::index)},
      {"http", "max_request_line_bytes",
       unsigned_key(kHttp, &H::max_request_line_bytes, 256, 1048576),
       shown(kHttp, &H::max_request_line_bytes)},
      {"http", "max_header_bytes", unsigned_key(kHttp, &H::max_header_bytes, 1024, 16777216),
       shown(kHttp, &H::max_header_bytes)},
      {"http", "max_body_bytes", unsigned_key(kHttp, &H::max_body_bytes, 0, 1073741824),
       shown(kHttp, &H::max_body_bytes)},
      {"http", "header_timeout_ms", unsigned_key(kHttp, &H::header_timeout_ms, 0, 3600000),
       shown(kHttp, &H::header_timeout_ms)},
      {"http", "keepalive_timeout_ms", unsigned_key(kHttp, &H::keepalive_timeout_ms, 0, 86400000),
       shown(kHttp, &H::keepalive_timeout_ms)},
      {"http", "send_timeout_ms", unsigned_key(kHttp, &H::send_timeout_ms, 0, 86400000),
       shown(kHttp, &H::send_timeout_ms)},
  };
  return table;
}

bool is_section(std::string_view name) {
  return name == "server" || name == "event_loop" || name == "log" || name == "http";
}

// The keys whose values decide the memory a server allocates at start (Config::startup_bytes).
constexpr std::pair<std::string_view, std::string_view> kStartupMemoryKeys[] = {
    {"server", "thread_num"},
    {"event_loop", "multishot_recv"},
    {"event_loop", "provided_buffers_count"},
    {"event_loop", "provided_buffer_size"},
    {"event_loop", "registered_buffers_count"},
    {"event_loop", "registered_buffer_size"},
    {"event_loop", "ring_entries"},
    {"log", "async"},
    {"log", "queue_capacity"},
};
constexpr std::pair<std::string_view, std::string_view> kConnectionMemoryKeys[] = {
    {"server", "max_output_bytes"},
    {"server", "max_request_bytes"},
};

// Fills one Config from ini text and then from overrides, throwing the first error; then
// checks what the whole configuration asks of the machine.
class Parser {
 public:
  Parser(Config& config, std::string_view source) : config_(config), source_(source) {}

  void apply_overrides(const std::vector<std::string>& overrides) {
    for (size_t i = 0; i < overrides.size(); ++i) apply_override(overrides[i], i + 1);
  }

  // Checks across keys, against the machine. A failure names the key set last among those
  // involved (the one that tipped the total), at the line that set it.
  void check_machine(const MachineLimits& machine) const {
    if (machine.memory_bytes == 0) return;
    const uint64_t budget = machine.memory_bytes / 2;
    const std::string memory =
        human_bytes(machine.memory_bytes) + " (" + std::to_string(machine.memory_bytes) + " bytes)";
    const ServerConfig& server = config_.server;
    const uint64_t per_connection =
        server.max_output_bytes + 2 * uint64_t{server.max_request_bytes};
    if (per_connection > budget) {
      fail_across(kConnectionMemoryKeys,
                  "one connection may hold max_output_bytes + 2 x max_request_bytes = " +
                      human_bytes(per_connection) + " (" + std::to_string(per_connection) +
                      " bytes), more than half of this machine's memory, " + memory +
                      "; lower server.max_output_bytes or server.max_request_bytes");
    }
    const uint64_t total = config_.startup_bytes(machine);
    if (total > budget) {
      fail_across(kStartupMemoryKeys, "start-up memory " + describe_startup(machine) + " = " +
                                          human_bytes(total) + " (" + std::to_string(total) +
                                          " bytes) is more than half of this machine's memory, " +
                                          memory + "; lower " + startup_knobs());
    }
  }

  void parse_text(std::string_view text, std::string_view origin) {
    origin_ = origin;
    if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 BOM
    size_t start = 0;
    for (size_t line_number = 1;; ++line_number) {
      auto end = text.find('\n', start);  // npos: the last line; substr() clamps the length
      parse_line(text.substr(start, end - start), line_number);
      if (end == std::string_view::npos) break;
      start = end + 1;
    }
  }

  void apply_override(std::string_view text, size_t index) {
    origin_ = kOverrideOrigin;
    auto equals = text.find('=');
    if (equals == std::string_view::npos) fail(index, "missing '=' in " + quoted(text));
    auto name = trim(text.substr(0, equals));
    auto dot = name.find('.');
    if (dot == std::string_view::npos) {
      fail(index, "missing section in " + quoted(text) + " (expected section.key=value)");
    }
    auto section = trim(name.substr(0, dot));
    if (!is_section(section)) fail(index, "unknown section [" + std::string(section) + "]");
    // Overrides may repeat a key: the last one wins, as on any command line.
    apply(find(section, trim(name.substr(dot + 1)), index), trim(text.substr(equals + 1)), index);
  }

 private:
  void parse_line(std::string_view raw, size_t line_number) {
    auto line = strip_comment(trim(raw));
    if (line.empty()) return;
    if (line.front() == '[') {
      auto close = line.find(']');
      if (close == std::string_view::npos) fail(line_number, "missing ']' in " + quoted(line));
      auto name = trim(line.substr(1, close - 1));
      auto rest = trim(line.substr(close + 1));
      if (!rest.empty() && rest.front() != '#' && rest.front() != ';') {
        fail(line_number, "unexpected " + quoted(rest) + " after [" + std::string(name) + "]");
      }
      if (name.empty()) fail(line_number, "empty section name []");
      if (!is_section(name)) fail(line_number, "unknown section [" + std::string(name) + "]");
      section_ = std::string(name);
      return;
    }
    auto equals = line.find('=');
    if (equals == std::string_view::npos) fail(line_number, "missing '=' in " + quoted(line));
    auto name = trim(line.substr(0, equals));
    if (name.empty()) fail(line_number, "missing key before '=' in " + quoted(line));
    if (section_.empty()) {
      fail(line_number, std::string(name) +
                            ": key outside any section (put it under [server], [event_loop], "
                            "[log] or [http])");
    }
    const Key& key = find(section_, name, line_number);
    auto [first, inserted] = first_line_.emplace(&key, line_number);
    if (!inserted) {
      fail(line_number, section_ + "." + std::string(name) + ": duplicate key (first set on line " +
                            std::to_string(first->second) + ")");
    }
    apply(key, trim(line.substr(equals + 1)), line_number);
  }

  // "1 worker x 16.6 MiB (4096 x 4096 B provided buffers, 4096-entry ring) + 16.1 MiB
  // (65536-record log queue, accepting ring)"
  std::string describe_startup(const MachineLimits& machine) const {
    const EventLoopConfig loop = config_.worker_loop();
    const uint32_t workers = config_.worker_count(machine);
    std::string parts;
    auto add = [&parts](const std::string& part) {
      if (!parts.empty()) parts += ", ";
      parts += part;
    };
    if (loop.multishot_recv) {
      add(std::to_string(loop.provided_buffers_count) + " x " +
          std::to_string(loop.provided_buffer_size) + " B provided buffers");
    }
    if (loop.registered_buffers_count > 0) {
      add(std::to_string(loop.registered_buffers_count) + " x " +
          std::to_string(loop.registered_buffer_size) + " B registered buffers");
    }
    add(std::to_string(loop.ring_entries) + "-entry ring");
    std::string text = std::to_string(workers) + (workers == 1 ? " worker x " : " workers x ") +
                       human_bytes(config_.worker_startup_bytes()) + " (" + parts + ") + " +
                       human_bytes(config_.shared_startup_bytes()) + " (";
    if (config_.log.async) {
      text += std::to_string(config_.log.queue_capacity) + "-record log queue, ";
    }
    return text + "accepting ring)";
  }

  // The keys worth lowering, in the order of the description.
  std::string startup_knobs() const {
    const EventLoopConfig& loop = config_.event_loop;
    std::string knobs = "server.thread_num";
    if (loop.multishot_recv) knobs += ", event_loop.provided_buffers_count, provided_buffer_size";
    if (loop.registered_buffers_count > 0) {
      knobs += ", event_loop.registered_buffers_count, registered_buffer_size";
    }
    knobs += ", event_loop.ring_entries";
    if (config_.log.async) knobs += ", log.queue_capacity";
    return knobs;
  }

  template <size_t N>
  [[noreturn]] void fail_across(const std::pair<std::string_view, std::string_view> (&names)[N],
                                const std::string& what) const {
    const Key* last = nullptr;
    for (const auto& [section, name] : names) {
      for (const Key& key : keys()) {
        if (key.section != section || key.name != name) continue;
        auto it = set_at_.find(&key);
        if (it != set_at_.end() && (last == nullptr || it->second.order > set_at_.at(last).order)) {
          last = &key;
        }
      }
    }
    if (last == nullptr) throw Invalid(std::string(source_) + ": " + what);  // all defaults
    const SetAt& where = set_at_.at(last);
    throw Invalid(where.origin + ":" + std::to_string(where.line) + ": " +
                  std::string(last->section) + "." + std::string(last->name) + ": " + what);
  }

  const Key& find(std::string_view section, std::string_view name, size_t line_number) const {
    for (const Key& key : keys()) {
      if (key.section == section && key.name == name) return key;
    }
    fail(line_number, std::string(section) + "." + std::string(name) + ": unknown key");
  }

  void apply(const Key& key, std::string_view value, size_t line_number) {
    if (auto error = key.apply(config_, value); !error.empty()) {
      fail(line_number,
           std::string(key.section) + "." + std::string(key.name) + ": " + std::move(error));
    }
    set_at_[&key] = SetAt{std::string(origin_), line_number, ++applied_};
  }

  [[noreturn]] void fail(size_t line_number, const std::string& what) const {
    throw Invalid(std::string(origin_) + ":" + std::to_string(line_number) + ": " + what);
  }

  static constexpr std::string_view kOverrideOrigin = "--set";

  struct SetAt {
    std::string origin;  // the file, or "--set"
    size_t line = 0;     // of the file, or the override's number
    size_t order = 0;    // later settings have higher numbers
  };

  Config& config_;
  std::string_view source_;  // the file (or "--set" with no file): names errors of defaults
  std::string_view origin_;
  std::string section_;                      // current [section]; empty before the first
  std::map<const Key*, size_t> first_line_;  // key -> line of the file that set it
  std::map<const Key*, SetAt> set_at_;       // key -> where it was set last
  size_t applied_ = 0;
};

std::string error_text(int error) {
  return std::error_code(error, std::system_category()).message();
}

std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file or directory";
}

std::string too_large(const std::string& path, const std::string& size) {
  return path + ": " + size + " bytes is larger than the " + std::to_string(Config::kMaxFileBytes) +
         "-byte limit for a config file";
}

// Reads a config file whole, refusing anything that is not a regular file of sane size
// before reading it: /dev/zero would otherwise be read until memory runs out, and a FIFO
// would block the start for good.
std::string read_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) throw Invalid(path + ": cannot open: " + error_text(errno));
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    throw Invalid(path + ": cannot read: " + error_text(errno));
  }
  if (!S_ISREG(info.st_mode)) {
    throw Invalid(path + ": not a regular file (" + file_kind(info.st_mode) +
                  "); give the path of an ini file");
  }
  if (static_cast<uint64_t>(info.st_size) > Config::kMaxFileBytes) {
    throw Invalid(too_large(path, std::to_string(info.st_size)));
  }
  // One byte more than the limit: a file that grew since fstat is still caught.
  std::string text(static_cast<size_t>(info.st_size) + 1, '\0');
  size_t size = 0;
  for (;;) {
    if (size == text.size()) {
      if (text.size() > Config::kMaxFileBytes) {
        throw Invalid(too_large(path, "over " + std::to_string(Config::kMaxFileBytes)));
      }
      text.resize(std::min<size_t>(text.size() * 2, Config::kMaxFileBytes + 1));
    }
    ssize_t n = ::read(fd.get(), text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Invalid(path + ": cannot read: " + error_text(errno));
    if (n == 0) break;
    size += static_cast<size_t>(n);
  }
  text.resize(size);
  return text;
}

}  // namespace

MachineLimits MachineLimits::current() {
  MachineLimits machine;
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) {
    machine.memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  }
  machine.cpus = std::max(1u, std::thread::hardware_concurrency());
  return machine;
}

namespace {

// What an io_uring maps per SQ entry: a 64-byte SQE, a 4-byte SQ index, and 4 CQEs of 16
// bytes (the CQ has 4x the SQ's entries: src/io/IoUring.cpp).
constexpr uint64_t kRingBytesPerEntry = 64 + 4 + 4 * 16;
constexpr uint64_t kAcceptRingEntries = 1024;   // the accepting loop's ring is capped there
constexpr uint64_t kBufferRingEntryBytes = 16;  // struct io_uring_buf, one per provided buffer

}  // namespace

std::vector<ConfigChange> Config::changes(const Config& from, const Config& to) {
  std::vector<ConfigChange> out;
  for (const Key& key : keys()) {
    std::string before = key.show(from);
    std::string after = key.show(to);
    if (before == after) continue;
    out.push_back({std::string(key.section) + "." + std::string(key.name), std::move(before),
                   std::move(after)});
  }
  return out;
}

uint32_t Config::worker_count(const MachineLimits& machine) const noexcept {
  return server.thread_num == 0 ? machine.cpus : server.thread_num;
}

EventLoopConfig Config::worker_loop() const noexcept {
  EventLoopConfig loop = event_loop;
  if (server.protocol == "udp_echo" && loop.provided_buffer_size < kUdpEchoBufferBytes) {
    loop.provided_buffer_size = kUdpEchoBufferBytes;
    loop.provided_buffers_count = std::min(loop.provided_buffers_count, kUdpEchoBuffers);
  }
  return loop;
}

uint64_t Config::worker_startup_bytes() const noexcept {
  const EventLoopConfig loop = worker_loop();
  uint64_t bytes = uint64_t{loop.ring_entries} * kRingBytesPerEntry;
  if (loop.multishot_recv) {
    bytes +=
        uint64_t{loop.provided_buffers_count} * (loop.provided_buffer_size + kBufferRingEntryBytes);
  }
  bytes += uint64_t{loop.registered_buffers_count} * loop.registered_buffer_size;
  return bytes;
}

uint64_t Config::shared_startup_bytes() const noexcept {
  uint64_t bytes =
      std::min<uint64_t>(event_loop.ring_entries, kAcceptRingEntries) * kRingBytesPerEntry;
  if (log.async) bytes += std::bit_ceil(uint64_t{log.queue_capacity}) * Logger::kQueueSlotBytes;
  return bytes;
}

uint64_t Config::startup_bytes(const MachineLimits& machine) const noexcept {
  return uint64_t{worker_count(machine)} * worker_startup_bytes() + shared_startup_bytes();
}

Result<Config, Error> Config::load(const std::string& path,
                                   const std::vector<std::string>& overrides,
                                   const MachineLimits& machine) {
  Config config;
  try {
    Parser parser(config, path.empty() ? std::string_view("--set") : std::string_view(path));
    if (!path.empty()) {
      const std::string text = read_file(path);
      parser.parse_text(text, path);
    }
    parser.apply_overrides(overrides);
    parser.check_machine(machine);
  } catch (const Invalid& e) {
    return Unexpected{Error(e.what())};
  }
  return config;
}

Result<Config, Error> Config::parse(const std::string& text, const std::string& origin,
                                    const std::vector<std::string>& overrides,
                                    const MachineLimits& machine) {
  Config config;
  try {
    Parser parser(config, origin);
    parser.parse_text(text, origin);
    parser.apply_overrides(overrides);
    parser.check_machine(machine);
  } catch (const Invalid& e) {
    return Unexpected{Error(e.what())};
  }
  return config;
}

}  // namespace ucp

#include "ucp/config/Config.h"

// A small ini parser of our own rather than libinih: every error, semantic ones included,
// must name FILE:LINE and section.key; keys are typed with ranges; duplicates are refused;
// and --set overrides go through exactly the same validation. docs/config.md says more.

#include <bit>
#include <cassert>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string_view>
#include <system_error>

#include <arpa/inet.h>

namespace ucp {
namespace {

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

std::string range_text(uint64_t min, uint64_t max) {
  std::string out = "[";
  return out.append(std::to_string(min)).append(", ").append(std::to_string(max)).append("]");
}

// Stores a key's value into the Config, or returns what is wrong with it (empty: fine).
using Apply = std::function<std::string(Config&, std::string_view value)>;

struct Key {
  std::string_view section;
  std::string_view name;
  Apply apply;
};

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

template <class Section, class T>
Apply unsigned_key(Section Config::*section, T Section::*field, uint64_t min, uint64_t max,
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

template <class Section>
Apply bool_key(Section Config::*section, bool Section::*field) {
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

template <class Section>
Apply string_key(Section Config::*section, std::string Section::*field, Empty empty) {
  return [=](Config& config, std::string_view value) -> std::string {
    if (value.empty() && empty == Empty::kRefused) return "empty value";
    (config.*section).*field = std::string(value);
    return {};
  };
}

// The one table of keys: section, name, type, range. Adding a key is one line here, one
// field in Config.h, one line in config/ucp.conf and one row in docs/config.md.
const std::vector<Key>& keys() {
  using S = ServerConfig;
  using E = EventLoopConfig;
  using L = LogOptions;
  using H = HttpConfig;
  constexpr auto kServer = &Config::server;
  constexpr auto kLoop = &Config::event_loop;
  constexpr auto kLog = &Config::log;
  constexpr auto kHttp = &Config::http;
  constexpr auto kPow2 = Shape::kPowerOfTwo;
  static const std::vector<Key> table = {
      {"server", "name", string_key(kServer, &S::name, Empty::kRefused)},
      {"server", "ip",
       [](Config& config, std::string_view value) -> std::string {
         in_addr address{};
         if (value.empty()) return "empty value (expected an IPv4 address such as 0.0.0.0)";
         if (inet_pton(AF_INET, std::string(value).c_str(), &address) != 1) {
           return quoted(value) + " is not an IPv4 address (e.g. 0.0.0.0 or 127.0.0.1)";
         }
         config.server.ip = std::string(value);
         return {};
       }},
      {"server", "port", unsigned_key(kServer, &S::port, 0, 65535)},
      {"server", "thread_num", unsigned_key(kServer, &S::thread_num, 0, 1024)},
      {"server", "read_timeout_ms", unsigned_key(kServer, &S::read_timeout_ms, 0, 86400000)},
      {"server", "protocol",
       [](Config& config, std::string_view value) -> std::string {
         if (value != "echo" && value != "http") {
           return quoted(value) + " is not a protocol (use echo or http)";
         }
         config.server.protocol = std::string(value);
         return {};
       }},
      {"server", "max_connections", unsigned_key(kServer, &S::max_connections, 1, 16777216)},
      {"server", "backlog", unsigned_key(kServer, &S::backlog, 1, 65535)},
      {"server", "reuse_port", bool_key(kServer, &S::reuse_port)},
      {"server", "tcp_nodelay", bool_key(kServer, &S::tcp_nodelay)},
      {"server", "shutdown_timeout_ms", unsigned_key(kServer, &S::shutdown_timeout_ms, 0, 3600000)},
      {"server", "max_output_bytes", unsigned_key(kServer, &S::max_output_bytes, 1024, 4294967296)},
      {"server", "max_request_bytes", unsigned_key(kServer, &S::max_request_bytes, 1024, 16777216)},

      {"event_loop", "ring_entries", unsigned_key(kLoop, &E::ring_entries, 8, 32768, kPow2)},
      {"event_loop", "sqpoll", bool_key(kLoop, &E::sqpoll)},
      {"event_loop", "sqpoll_idle_ms", unsigned_key(kLoop, &E::sqpoll_idle_ms, 0, 60000)},
      {"event_loop", "registered_buffers_count",
       unsigned_key(kLoop, &E::registered_buffers_count, 0, 16384)},
      {"event_loop", "registered_buffer_size",
       unsigned_key(kLoop, &E::registered_buffer_size, 64, 1048576)},
      {"event_loop", "pending_queue_capacity",
       unsigned_key(kLoop, &E::pending_queue_capacity, 0, 16777216)},
      {"event_loop", "multishot_recv", bool_key(kLoop, &E::multishot_recv)},
      {"event_loop", "provided_buffers_count",
       unsigned_key(kLoop, &E::provided_buffers_count, 1, 32768, kPow2)},
      {"event_loop", "provided_buffer_size",
       unsigned_key(kLoop, &E::provided_buffer_size, 64, 1048576)},
      {"event_loop", "defer_taskrun", bool_key(kLoop, &E::defer_taskrun)},
      {"event_loop", "cqe_batch", unsigned_key(kLoop, &E::cqe_batch, 0, 65536)},
      {"event_loop", "msg_ring_handoff", bool_key(kLoop, &E::msg_ring_handoff)},

      {"log", "level",
       [](Config& config, std::string_view value) -> std::string {
         auto level = parse_log_level(value);
         if (!level) {
           return quoted(value) + " is not a log level (use TRACE, DEBUG, INFO, WARN, ERROR " +
                  "or FATAL)";
         }
         config.log.level = *level;
         return {};
       }},
      {"log", "file", string_key(kLog, &L::file, Empty::kAllowed)},
      {"log", "max_size", unsigned_key(kLog, &L::max_size, 0, 1099511627776)},
      {"log", "max_files", unsigned_key(kLog, &L::max_files, 0, 1000)},
      {"log", "daily", bool_key(kLog, &L::daily)},
      {"log", "async", bool_key(kLog, &L::async)},
      {"log", "console", bool_key(kLog, &L::console)},
      {"log", "flush_interval_ms", unsigned_key(kLog, &L::flush_interval_ms, 1, 60000)},
      {"log", "queue_capacity", unsigned_key(kLog, &L::queue_capacity, 16, 16777216)},
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
       }},

      {"http", "root", string_key(kHttp, &H::root, Empty::kRefused)},
      {"http", "index",
       [](Config& config, std::string_view value) -> std::string {
         if (value.empty()) return "empty value";
         if (value.find('/') != std::string_view::npos || value == "." || value == "..") {
           return quoted(value) + " is not a file name (no '/')";
         }
         config.http.index = std::string(value);
         return {};
       }},
      {"http", "max_request_line_bytes",
       unsigned_key(kHttp, &H::max_request_line_bytes, 256, 1048576)},
      {"http", "max_header_bytes", unsigned_key(kHttp, &H::max_header_bytes, 1024, 16777216)},
      {"http", "max_body_bytes", unsigned_key(kHttp, &H::max_body_bytes, 0, 1073741824)},
      {"http", "header_timeout_ms", unsigned_key(kHttp, &H::header_timeout_ms, 0, 3600000)},
      {"http", "keepalive_timeout_ms", unsigned_key(kHttp, &H::keepalive_timeout_ms, 0, 86400000)},
      {"http", "send_timeout_ms", unsigned_key(kHttp, &H::send_timeout_ms, 0, 86400000)},
  };
  return table;
}

bool is_section(std::string_view name) {
  return name == "server" || name == "event_loop" || name == "log" || name == "http";
}

// Fills one Config from ini text and then from overrides, throwing the first error.
class Parser {
 public:
  explicit Parser(Config& config) : config_(config) {}

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
    origin_ = "--set";
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
  }

  [[noreturn]] void fail(size_t line_number, const std::string& what) const {
    throw ConfigError(std::string(origin_) + ":" + std::to_string(line_number) + ": " + what);
  }

  Config& config_;
  std::string_view origin_;
  std::string section_;                      // current [section]; empty before the first
  std::map<const Key*, size_t> first_line_;  // key -> line of the file that set it
};

std::string error_text(int error) {
  return std::error_code(error, std::system_category()).message();
}

struct FileCloser {
  void operator()(std::FILE* file) const noexcept { std::fclose(file); }
};

std::string read_file(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    int error = errno;
    throw ConfigError(path + ": cannot open: " + error_text(error));
  }
  std::string text;
  char chunk[16384];
  for (;;) {
    size_t n = std::fread(chunk, 1, sizeof chunk, file.get());
    text.append(chunk, n);
    if (n < sizeof chunk) break;
  }
  if (std::ferror(file.get())) {
    int error = errno;  // fread set it; capture before anything else can
    throw ConfigError(path + ": cannot read: " + error_text(error));
  }
  return text;
}

void apply_overrides(Config& config, const std::vector<std::string>& overrides) {
  Parser parser(config);
  for (size_t i = 0; i < overrides.size(); ++i) parser.apply_override(overrides[i], i + 1);
}

}  // namespace

Config Config::load(const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty()) {
    Config config;
    apply_overrides(config, overrides);
    return config;
  }
  return parse(read_file(path), path, overrides);
}

Config Config::parse(const std::string& text, const std::string& origin,
                     const std::vector<std::string>& overrides) {
  Config config;
  Parser(config).parse_text(text, origin);
  apply_overrides(config, overrides);
  return config;
}

}  // namespace ucp

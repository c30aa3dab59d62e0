#pragma once
// Config: the values an ini file (and --set overrides) gave the keys of a ConfigSchema, each
// with where it was set. Loading refuses unknown sections and keys (with a "did you mean"
// hint), malformed lines, duplicate keys, invalid values and settings the machine cannot
// have, and reports every problem it finds, one line each, in the order of the file:
//
//   ucp.conf:7: server.port: 70000 is out of range [0, 65535]
//   ucp.conf:9: server.colour: unknown key (did you mean server.color?)
//   --set:1: event_loop.ring_entries: 100 is not a power of two (nearest: 64 or 128)
//
//   auto config = ucp::app::Config::load(schema, "ucp.conf", {"server.port=9000"});
//   if (!config) { for (auto& line : config.error().problems) ...; exit 2; }
//   uint16_t port = config->get<uint16_t>("server.port");
//   for (const std::string& name : config->instances("upstream"))
//     auto servers = config->get<std::vector<std::string>>("upstream." + name + ".servers");
//
// Format (docs/config.md): [section] headers (a section may be opened again), key = value
// (trimmed; no quoting), comments from '#' or ';' at the start of a line or after whitespace,
// a UTF-8 byte-order mark and \r\n accepted, each key at most once per file. --set
// "section.key=value" overrides apply after the file (the last of repeated ones wins) and are
// checked alike.
//
// get<T> converts to T: bool (flag), std::string (text, choice), std::vector<std::string>
// (list), std::chrono::milliseconds (duration), or an integer type (integer, size, duration
// in milliseconds) whose range holds the key's declared range. A key that is not declared, or
// a T that does not fit, is a programming error: std::logic_error naming the key.
//
// Thread contract: a plain value; build it on one thread, then read it from any.

#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ucp/app/ConfigSchema.h"
#include "ucp/base/Result.h"

namespace ucp::app {

/// The machine a configuration is checked against.
struct MachineLimits {
  uint64_t memory_bytes = 0;  // physical memory; 0 = unknown (no memory checks)
  uint32_t cpus = 1;          // what server.thread_num = 0 stands for

  /// This machine: physical pages x page size, and std::thread::hardware_concurrency().
  static MachineLimits current();
};

/// Where a key got its value.
struct ConfigOrigin {
  std::string source;  // the file, or "--set"; empty: the default
  size_t line = 0;     // in the file, or the override's number
  size_t order = 0;    // later settings have higher numbers; 0: the default

  bool is_default() const noexcept { return order == 0; }
  /// "ucp.conf:7", "--set:2" or "default".
  std::string describe() const;
};

/// One key whose value differs between two configurations (Config::changes).
struct ConfigChange {
  std::string key;  // "section.key"
  std::string from;
  std::string to;  // values as a config file spells them; "(none)" for an absent instance
};

/// Why a configuration did not load: every problem, one line each, in the order found (at
/// most kMaxProblems, then one line counting the rest).
struct ConfigError {
  static constexpr size_t kMaxProblems = 20;
  std::vector<std::string> problems;

  /// The lines joined with `separator` ("\n" for stderr, "; " for one log line).
  std::string message(std::string_view separator = "\n") const;
};

/// The values of one configuration: a plain value, copied freely; it points into the schema
/// that loaded it, which must outlive it. Build on one thread, then read from any.
class Config {
 public:
  /// The largest config file `load` reads: a config is a few KiB; anything larger is a wrong
  /// path (a log, a device), refused before it is read.
  static constexpr uint64_t kMaxFileBytes = 1024 * 1024;

  /// Every key at its default (what an empty file gives).
  explicit Config(const ConfigSchema& schema);

  /// Reads `path` (a regular file of at most kMaxFileBytes; empty: no file, only defaults),
  /// applies `overrides` ("section.key=value" as given to --set), then runs the schema's
  /// checks against `machine`. File errors are one line: "FILE: cannot open: <reason>",
  /// "FILE: not a regular file (a directory); ...", "FILE: N bytes is larger than ...".
  static Result<Config, ConfigError> load(const ConfigSchema& schema, const std::string& path,
                                          const std::vector<std::string>& overrides = {},
                                          const MachineLimits& machine = MachineLimits::current());
  /// Parses ini text; `origin` names it in the messages.
  static Result<Config, ConfigError> parse(const ConfigSchema& schema, std::string_view text,
                                           const std::string& origin,
                                           const std::vector<std::string>& overrides = {},
                                           const MachineLimits& machine = MachineLimits::current());

  template <class T>
  T get(std::string_view key) const;

  /// The names of the family's sections, in the order they first appear ([upstream.a] -> "a").
  std::vector<std::string> instances(std::string_view family) const;
  /// Where "section.key" was set (is_default() when it was not).
  const ConfigOrigin& origin(std::string_view key) const;
  /// "section.key" as a config file spells its value.
  std::string show(std::string_view key) const;
  /// The file (or "--set" when there was none) the configuration came from.
  const std::string& source() const noexcept { return source_; }
  const ConfigSchema& schema() const noexcept { return *schema_; }

  /// Takes from `fresh` (same schema) the values of the keys declared reloadable, and the
  /// instances of the families whose keys all are: what a server runs with after a SIGHUP.
  void take_reloadable(const Config& fresh);

  /// The keys whose values differ from `from` to `to` (same schema), in the schema's order,
  /// family instances included (one present in only one of them shows "(none)").
  static std::vector<ConfigChange> changes(const Config& from, const Config& to);

 private:
  friend class ConfigParser;
  struct Entry {
    const KeySchema* key = nullptr;
    ConfigValue value;
    ConfigOrigin origin;
  };

  const Entry& entry(std::string_view key) const;
  [[noreturn]] static void wrong_type(std::string_view key, std::string_view wanted);
  template <class T>
  static void check_fits(const Entry& entry, std::string_view key);

  const ConfigSchema* schema_;
  std::string source_;
  std::map<std::string, Entry, std::less<>> entries_;
  // Family -> instance names, in order of appearance.
  std::map<std::string, std::vector<std::string>, std::less<>> instances_;
};

/// What a cross-key check (ConfigSchema::check) reports through.
class ConfigProblems {
 public:
  ConfigProblems(const Config& config, const MachineLimits& machine,
                 std::vector<std::string>& out) noexcept
      : config_(config), machine_(machine), out_(out) {}

  const MachineLimits& machine() const noexcept { return machine_; }
  /// Reports `what` against the key set last among `keys` (the one that tipped the balance),
  /// at the line that set it: "FILE:LINE: section.key: what". When none of them was set, the
  /// message names the source only: "FILE: what".
  void fail(std::initializer_list<std::string_view> keys, const std::string& what);
  void fail(const std::vector<std::string>& keys, const std::string& what);

 private:
  const Config& config_;
  const MachineLimits& machine_;
  std::vector<std::string>& out_;
};

// ---- get<T> ----

template <class T>
void Config::check_fits(const Entry& entry, std::string_view key) {
  const KeySchema& schema = *entry.key;
  // The declared range must fit T whatever the value: a wrong T fails on first use, not on
  // the first file that sets a large value.
  using Limits = std::numeric_limits<T>;
  bool low_fits = schema.min() >= 0;
  if constexpr (std::is_signed_v<T>) {
    low_fits = low_fits || schema.min() >= static_cast<int64_t>(Limits::min());
  }
  const bool high_fits = schema.max() <= static_cast<uint64_t>(Limits::max());
  if (!low_fits || !high_fits) wrong_type(key, "an integer type that holds its declared range");
}

template <class T>
T Config::get(std::string_view key) const {
  const Entry& e = entry(key);
  const KeyType type = e.key->type();
  if constexpr (std::is_same_v<T, bool>) {
    if (type != KeyType::kFlag) wrong_type(key, "bool");
    return std::get<bool>(e.value);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (type != KeyType::kText && type != KeyType::kChoice) wrong_type(key, "std::string");
    return std::get<std::string>(e.value);
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    if (type != KeyType::kList) wrong_type(key, "std::vector<std::string>");
    return std::get<std::vector<std::string>>(e.value);
  } else if constexpr (std::is_same_v<T, std::chrono::milliseconds>) {
    if (type != KeyType::kDuration) wrong_type(key, "std::chrono::milliseconds");
    return std::chrono::milliseconds(static_cast<int64_t>(std::get<uint64_t>(e.value)));
  } else {
    static_assert(std::is_integral_v<T>,
                  "get<T>: bool, an integer type, std::string, "
                  "std::vector<std::string> or std::chrono::milliseconds");
    if (type == KeyType::kInteger) {
      check_fits<T>(e, key);
      return static_cast<T>(std::get<int64_t>(e.value));
    }
    if (type == KeyType::kSize || type == KeyType::kDuration) {
      check_fits<T>(e, key);
      return static_cast<T>(std::get<uint64_t>(e.value));
    }
    wrong_type(key, "an integer type");
  }
}

}  // namespace ucp::app

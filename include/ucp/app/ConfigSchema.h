#pragma once
// ConfigSchema: the keys a program's ini file may set, each declared once with its type,
// default, constraints and help text. The library declares its own sections ([server],
// [event_loop], [log], [http]: ucp/app/ServerSections.h); a program adds its own sections, or
// keys to a library section, before it loads a file (Config::load, or Application::setup):
//
//   ucp::app::ConfigSchema schema;
//   auto& hello = schema.section("hello", "what GET /hello answers");
//   hello.text("greeting", "Hello", "the word before the name").non_empty();
//   hello.duration("delay_ms", 0ms, 0ms, 10s, "wait this long before answering");
//   auto& upstream = schema.family("upstream", "a group of servers: [upstream.NAME]");
//   upstream.list("servers", {}, "HOST:PORT, ...").required();
//
// Key types and what a file may write for them:
//   flag      true/false, on/off, yes/no, 1/0 (any case)
//   integer   decimal, with a range (a negative value only where the range allows one);
//             power_of_two() refuses other values with the two nearest in the message
//   size      bytes: 65536, or with a binary suffix 64K, 64KiB, 4M, 4MiB, 1G, 1GiB, 1T
//   duration  milliseconds: 5000, or 5000ms, 5s, 2m, 1h
//   text      the rest of the line (non_empty() refuses an empty one)
//   choice    one of a fixed set of words (ignore_case() accepts any case)
//   list      comma-separated items, each trimmed (empty value: no items)
// check() adds a test of the value (text, choice) or of each item (list) that says in a few
// words what is wrong with it, or returns "" when it is fine.
//
// A *family* is any number of sections with a common prefix and one key set: [upstream.a],
// [upstream.b]... (NAME: letters, digits, '_' and '-'). Its keys are spelled
// upstream.a.servers on the command line and in Config::get.
//
// Checks across keys (check(...)) run once every key has a valid value; a failure names the
// key set last among those it involves, at the line that set it (ConfigProblems).
//
// Thread contract: declare everything on one thread before loading; a declared schema is
// read-only, and any thread may then load with it. A Config points into the schema that
// loaded it, which must outlive it (Application owns both).

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ucp::app {

class Config;
class ConfigProblems;

/// A value of a key: bool (flag), int64_t (integer), uint64_t (size in bytes, duration in
/// milliseconds), std::string (text, choice), std::vector<std::string> (list).
using ConfigValue = std::variant<bool, int64_t, uint64_t, std::string, std::vector<std::string>>;

enum class KeyType : uint8_t { kFlag, kInteger, kSize, kDuration, kText, kChoice, kList };

/// One declared key. Made by SectionSchema; its constraint setters return the key so that
/// they chain after the declaration.
class KeySchema {
 public:
  /// What is wrong with a value (or one list item) in a few words; "" when it is fine.
  using Check = std::function<std::string(std::string_view value)>;

  KeySchema(std::string name, KeyType type, ConfigValue default_value, std::string help);

  KeySchema& power_of_two();  // integer
  KeySchema& non_empty();     // text, list
  KeySchema& ignore_case();   // choice: stored as declared
  KeySchema& noun(
      std::string noun);          // choice, with its article: "\"x\" is not <noun> (use a or b)"
  KeySchema& check(Check check);  // text, choice, each list item
  KeySchema& reloadable();        // SIGHUP applies it (Application::on_reload)
  KeySchema& required();          // no usable default: the file must set it
  /// Replaces the default (e.g. an example's port). Throws std::invalid_argument if `text`
  /// is not a valid value: a program's own defaults must pass its own rules.
  KeySchema& default_to(std::string_view text);

  const std::string& name() const noexcept { return name_; }
  KeyType type() const noexcept { return type_; }
  const std::string& help() const noexcept { return help_; }
  const ConfigValue& default_value() const noexcept { return default_; }
  int64_t min() const noexcept { return min_; }
  uint64_t max() const noexcept { return max_; }
  const std::vector<std::string>& choices() const noexcept { return choices_; }
  bool is_reloadable() const noexcept { return reloadable_; }
  bool is_required() const noexcept { return required_; }

  /// Parses `text` (already trimmed) into `out`; returns what is wrong, or "" when it is a
  /// valid value (then `out` holds it).
  std::string parse(std::string_view text, ConfigValue& out) const;
  /// `value` as a config file spells it.
  std::string show(const ConfigValue& value) const;
  /// "integer 0..65535", "true|false", "duration 0..86400000 ms"...: for --help.
  std::string type_text() const;

 private:
  friend class SectionSchema;
  std::string parse_number(std::string_view text, ConfigValue& out) const;
  std::string parse_integer(std::string_view text, ConfigValue& out) const;
  std::string parse_scaled(std::string_view text, ConfigValue& out) const;

  std::string name_;
  KeyType type_;
  ConfigValue default_;
  std::string help_;
  int64_t min_ = 0;
  uint64_t max_ = 0;
  std::vector<std::string> choices_;
  std::string noun_;
  std::vector<Check> checks_;
  bool power_of_two_ = false;
  bool non_empty_ = false;
  bool ignore_case_ = false;
  bool reloadable_ = false;
  bool required_ = false;
};

/// One [section], or the key set of a family of sections. Made by ConfigSchema.
class SectionSchema {
 public:
  using Milliseconds = std::chrono::milliseconds;

  SectionSchema(std::string name, std::string help, bool family);

  KeySchema& flag(std::string name, bool default_value, std::string help);
  KeySchema& integer(std::string name, int64_t default_value, int64_t min, int64_t max,
                     std::string help);
  KeySchema& size(std::string name, uint64_t default_value, uint64_t min, uint64_t max,
                  std::string help);
  KeySchema& duration(std::string name, Milliseconds default_value, Milliseconds min,
                      Milliseconds max, std::string help);
  KeySchema& text(std::string name, std::string default_value, std::string help);
  KeySchema& choice(std::string name, std::string default_value, std::vector<std::string> choices,
                    std::string help);
  KeySchema& list(std::string name, std::vector<std::string> default_value, std::string help);

  const std::string& name() const noexcept { return name_; }
  const std::string& help() const noexcept { return help_; }
  /// A family: sections named name().NAME.
  bool is_family() const noexcept { return family_; }
  /// The key, or null.
  const KeySchema* find(std::string_view key) const noexcept;
  KeySchema* find(std::string_view key) noexcept;
  /// In the order of declaration (stable addresses).
  const std::deque<KeySchema>& keys() const noexcept { return keys_; }

 private:
  friend class ConfigSchema;
  KeySchema& add(KeySchema key);

  std::string name_;
  std::string help_;
  bool family_;
  std::deque<KeySchema> keys_;
};

/// The whole set of sections, families and cross-key checks of a program.
class ConfigSchema {
 public:
  /// A test across keys, run on a configuration whose every key is valid; it reports through
  /// `problems` (which also holds the machine the configuration must fit).
  using Check = std::function<void(const Config& config, ConfigProblems& problems)>;

  ConfigSchema() = default;
  ConfigSchema(const ConfigSchema&) = delete;
  ConfigSchema& operator=(const ConfigSchema&) = delete;

  /// The section [name], made on first use (a program may add keys to a library section).
  /// `help`, when not empty, replaces the section's description.
  SectionSchema& section(std::string_view name, std::string help = {});
  /// The family of sections [prefix.NAME], made on first use.
  SectionSchema& family(std::string_view prefix, std::string help = {});
  void check(Check check);

  /// The section or family `name` names ("server", or "upstream" for [upstream.a]), or null.
  const SectionSchema* find_section(std::string_view name) const noexcept;
  /// The key "section.key" (for a family: "prefix.NAME.key"), or null.
  const KeySchema* find_key(std::string_view full_name) const noexcept;
  KeySchema* find_key(std::string_view full_name) noexcept;
  /// Sets defaults, each written as for --set: {"server.port=9000", "log.file="} (a program's
  /// own defaults for library keys; a file or --set still wins). Throws std::invalid_argument
  /// for an unknown key or an invalid value.
  void set_defaults(std::initializer_list<std::string_view> settings);

  /// Sections then families, in the order of declaration.
  const std::deque<SectionSchema>& sections() const noexcept { return sections_; }
  const std::vector<Check>& checks() const noexcept { return checks_; }

  /// Every section and key with its type, default and help: the text --help prints.
  std::string describe() const;

 private:
  std::deque<SectionSchema> sections_;
  std::vector<Check> checks_;
};

}  // namespace ucp::app

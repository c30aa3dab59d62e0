#pragma once
// ConfigParser: fills a Config from ini text and --set overrides, collecting every problem
// instead of stopping at the first, then checks required keys and runs the schema's checks
// across keys. Private to src/app; Config::load and Config::parse are its only users.
//
// A small parser of our own rather than libinih: every error, semantic ones included, must
// name FILE:LINE and section.key; keys are typed with ranges; duplicates are refused; --set
// overrides go through exactly the same validation; unknown names get a "did you mean".

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ucp/app/Config.h"

namespace ucp::app {

/// Fills one Config (owned by the caller) on the calling thread; used once per load.
class ConfigParser {
 public:
  /// Problems go to `problems`, one line each.
  ConfigParser(Config& config, std::vector<std::string>& problems) noexcept
      : config_(config), problems_(problems) {}

  void parse_text(std::string_view text, std::string_view origin);
  /// One "section.key=value" override, the `index`-th (from 1).
  void apply_override(std::string_view text, size_t index);
  /// After the text and the overrides: required keys, then (only when every value so far is
  /// valid) the schema's checks across keys.
  void finish(const MachineLimits& machine);

 private:
  void parse_line(std::string_view raw, size_t line);
  void open_section(std::string_view name, size_t line);
  /// The section of `name` ("server", "upstream.a"), made on first use for a family instance;
  /// empty: unknown (reported).
  std::string resolve_section(std::string_view name, size_t line);
  void set(const std::string& section, std::string_view key, std::string_view value, size_t line,
           bool from_file);
  void report(size_t line, const std::string& what);
  std::string unknown_section_hint(std::string_view name) const;
  std::string unknown_key_hint(const std::string& section, std::string_view key) const;

  Config& config_;
  std::vector<std::string>& problems_;
  std::string origin_;
  std::string section_;    // the current [section]; empty before the first
  bool skipping_ = false;  // inside an unknown section: its keys are not reported
  size_t applied_ = 0;     // settings so far, for ConfigOrigin::order
  std::map<std::string, size_t> first_line_;  // "section.key" -> line of the file that set it
  std::set<std::string> attempted_;           // keys given a value, valid or not
  std::map<std::string, std::string> instance_origin_;  // "upstream.a" -> "FILE:LINE" first seen
};

/// The optimal string alignment distance (Levenshtein plus adjacent transpositions): how many
/// single-character edits turn `a` into `b`.
size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `word` if it is close enough to be a typo of it (about a third of
/// its letters at most), else "".
std::string closest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace ucp::app

#include "ConfigParser.h"

#include <algorithm>

namespace ucp::app {
namespace {

constexpr std::string_view kWhitespace = " \t\r\n\v\f";
constexpr std::string_view kOverrideOrigin = "--set";

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(kWhitespace);
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(kWhitespace);
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

bool valid_instance_name(std::string_view name) {
  return !name.empty() && name.find_first_not_of(
                              "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
                              std::string_view::npos;
}

// "[server], [event_loop], [log] or [upstream.NAME]"
std::string section_list(const ConfigSchema& schema) {
  std::vector<std::string> names;
  for (const SectionSchema& s : schema.sections()) {
    names.push_back("[" + s.name() + (s.is_family() ? ".NAME]" : "]"));
  }
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

}  // namespace

size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic-programming table: the transposition looks two rows back.
  std::vector<size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  const size_t allowed = std::max<size_t>(1, word.size() / 3);
  std::string best;
  size_t best_distance = allowed + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

void ConfigParser::parse_text(std::string_view text, std::string_view origin) {
  origin_ = origin;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 BOM
  size_t start = 0;
  for (size_t line = 1;; ++line) {
    const auto end = text.find('\n', start);  // npos: the last line; substr() clamps the length
    parse_line(text.substr(start, end - start), line);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  section_.clear();
  skipping_ = false;
}

void ConfigParser::parse_line(std::string_view raw, size_t line) {
  const auto text = strip_comment(trim(raw));
  if (text.empty()) return;
  if (text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) {
      report(line, "missing ']' in " + quoted(text));
      section_.clear();
      skipping_ = true;  // its keys would only repeat the problem
      return;
    }
    const auto name = trim(text.substr(1, close - 1));
    const auto rest = trim(text.substr(close + 1));
    if (!rest.empty() && rest.front() != '#' && rest.front() != ';') {
      report(line, "unexpected " + quoted(rest) + " after [" + std::string(name) + "]");
    }
    open_section(name, line);
    return;
  }
  const auto equals = text.find('=');
  if (equals == std::string_view::npos) {
    report(line, "missing '=' in " + quoted(text));
    return;
  }
  const auto name = trim(text.substr(0, equals));
  if (name.empty()) {
    report(line, "missing key before '=' in " + quoted(text));
    return;
  }
  if (skipping_) return;
  if (section_.empty()) {
    std::vector<std::string> owners;
    for (const SectionSchema& s : config_.schema().sections()) {
      if (s.find(name) != nullptr)
        owners.push_back("[" + s.name() + (s.is_family() ? ".NAME]" : "]"));
    }
    const std::string where = owners.empty() ? "put it under " + section_list(config_.schema())
                                             : "it belongs under " + owners.front();
    report(line, std::string(name) + ": key outside any section (" + where + ")");
    return;
  }
  set(section_, name, trim(text.substr(equals + 1)), line, true);
}

void ConfigParser::open_section(std::string_view name, size_t line) {
  section_.clear();
  skipping_ = true;
  if (name.empty()) {
    report(line, "empty section name []");
    return;
  }
  section_ = resolve_section(name, line);
  skipping_ = section_.empty();
}

std::string ConfigParser::resolve_section(std::string_view name, size_t line) {
  const ConfigSchema& schema = config_.schema();
  if (const SectionSchema* plain = schema.find_section(name)) {
    if (!plain->is_family()) return std::string(name);
    report(line, "[" + std::string(name) + "] needs a name: [" + std::string(name) + ".NAME]");
    return {};
  }
  const size_t dot = name.find('.');
  const SectionSchema* family =
      dot == std::string_view::npos ? nullptr : schema.find_section(name.substr(0, dot));
  if (family == nullptr || !family->is_family()) {
    report(line, "unknown section [" + std::string(name) + "]" + unknown_section_hint(name));
    return {};
  }
  const std::string_view instance = name.substr(dot + 1);
  if (!valid_instance_name(instance)) {
    report(line, quoted(instance) + " is not a name for [" + family->name() +
                     ".NAME] (letters, digits, '_' and '-')");
    return {};
  }
  const std::string full(name);
  if (instance_origin_.emplace(full, origin_ + ":" + std::to_string(line)).second) {
    config_.instances_[family->name()].emplace_back(instance);
    for (const KeySchema& key : family->keys()) {
      config_.entries_[full + "." + key.name()] = Config::Entry{&key, key.default_value(), {}};
    }
  }
  return full;
}

void ConfigParser::set(const std::string& section, std::string_view key, std::string_view value,
                       size_t line, bool from_file) {
  const std::string full = section + "." + std::string(key);
  auto entry = config_.entries_.find(full);
  if (entry == config_.entries_.end()) {
    report(line, full + ": unknown key" + unknown_key_hint(section, key));
    return;
  }
  if (from_file) {
    // Overrides may repeat a key: the last one wins, as on any command line. A file may not.
    auto [first, inserted] = first_line_.emplace(full, line);
    if (!inserted) {
      report(line,
             full + ": duplicate key (first set on line " + std::to_string(first->second) + ")");
      return;
    }
  }
  attempted_.insert(full);
  ConfigValue parsed;
  if (auto error = entry->second.key->parse(value, parsed); !error.empty()) {
    report(line, full + ": " + error);
    return;
  }
  entry->second.value = std::move(parsed);
  entry->second.origin = ConfigOrigin{origin_, line, ++applied_};
}

void ConfigParser::apply_override(std::string_view text, size_t index) {
  origin_ = kOverrideOrigin;
  const auto equals = text.find('=');
  if (equals == std::string_view::npos) {
    report(index, "missing '=' in " + quoted(text));
    return;
  }
  const auto name = trim(text.substr(0, equals));
  const auto dot = name.rfind('.');
  if (dot == std::string_view::npos) {
    report(index, "missing section in " + quoted(text) + " (expected section.key=value)");
    return;
  }
  const std::string section = resolve_section(trim(name.substr(0, dot)), index);
  if (section.empty()) return;
  set(section, trim(name.substr(dot + 1)), trim(text.substr(equals + 1)), index, false);
}

void ConfigParser::finish(const MachineLimits& machine) {
  for (const auto& [name, entry] : config_.entries_) {
    if (!entry.key->is_required() || !entry.origin.is_default() || attempted_.contains(name)) {
      continue;  // set, or given a value whose problem is reported already
    }
    const size_t dot = name.rfind('.');
    const auto instance = instance_origin_.find(name.substr(0, dot));
    // An instance's key is reported at the line that opened the instance.
    const std::string where =
        instance != instance_origin_.end() ? instance->second : config_.source_;
    problems_.push_back(where + ": " + name + ": required key missing");
  }
  if (!problems_.empty()) return;  // checks across keys need every value to be valid
  ConfigProblems problems(config_, machine, problems_);
  for (const ConfigSchema::Check& check : config_.schema().checks()) check(config_, problems);
}

void ConfigParser::report(size_t line, const std::string& what) {
  problems_.push_back(origin_ + ":" + std::to_string(line) + ": " + what);
}

std::string ConfigParser::unknown_section_hint(std::string_view name) const {
  const ConfigSchema& schema = config_.schema();
  std::vector<std::string> plain;
  std::vector<std::string> families;
  for (const SectionSchema& s : schema.sections()) {
    (s.is_family() ? families : plain).push_back(s.name());
  }
  const size_t dot = name.find('.');
  if (dot != std::string_view::npos) {  // [upstrem.a]: a misspelt family
    if (auto family = closest(name.substr(0, dot), families); !family.empty()) {
      return " (did you mean [" + family + std::string(name.substr(dot)) + "]?)";
    }
  }
  if (auto section = closest(name, plain); !section.empty()) {
    return " (did you mean [" + section + "]?)";
  }
  if (auto family = closest(name, families); !family.empty()) {
    return " (did you mean [" + family + ".NAME]?)";
  }
  return " (known: " + section_list(schema) + ")";
}

std::string ConfigParser::unknown_key_hint(const std::string& section, std::string_view key) const {
  const ConfigSchema& schema = config_.schema();
  const size_t dot = section.find('.');
  const SectionSchema* own =
      schema.find_section(dot == std::string::npos ? std::string_view(section)
                                                   : std::string_view(section).substr(0, dot));
  if (own != nullptr) {
    std::vector<std::string> names;
    for (const KeySchema& k : own->keys()) names.push_back(k.name());
    if (auto near = closest(key, names); !near.empty()) {
      return " (did you mean " + section + "." + near + "?)";
    }
  }
  for (const SectionSchema& s : schema.sections()) {  // the right key in the wrong section
    if (&s == own || s.find(key) == nullptr) continue;
    return s.is_family() ? " (it is a key of [" + s.name() + ".NAME])"
                         : " (did you mean " + s.name() + "." + std::string(key) + "?)";
  }
  return {};
}

}  // namespace ucp::app

#include "ucp/app/ConfigSchema.h"

// The value syntax of each key type, and the words of its error messages. Every message says
// what was given and what is expected, in a few words after "section.key: ".

#include <algorithm>
#include <bit>
#include <charconv>
#include <limits>
#include <span>
#include <stdexcept>

namespace ucp::app {
namespace {

constexpr std::string_view kWhitespace = " \t\r\n\v\f";

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(kWhitespace);
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(kWhitespace);
  return text.substr(first, last - first + 1);
}

// Built with append(): GCC 12 reports a false -Wrestrict on `"literal" + std::string`.
std::string quoted(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  return out.append(1, '"').append(text).append(1, '"');
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string range_text(int64_t min, uint64_t max) {
  std::string out = "[";
  return out.append(std::to_string(min)).append(", ").append(std::to_string(max)).append("]");
}

bool all_digits(std::string_view text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

// "a, b or c"
std::string alternatives(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " or " : ", ";
    out += words[i];
  }
  return out;
}

struct Unit {
  std::string_view name;  // lower case
  uint64_t factor;
};

constexpr Unit kSizeUnits[] = {{"", 1},
                               {"b", 1},
                               {"k", uint64_t{1} << 10},
                               {"kib", uint64_t{1} << 10},
                               {"m", uint64_t{1} << 20},
                               {"mib", uint64_t{1} << 20},
                               {"g", uint64_t{1} << 30},
                               {"gib", uint64_t{1} << 30},
                               {"t", uint64_t{1} << 40},
                               {"tib", uint64_t{1} << 40}};
constexpr Unit kDurationUnits[] = {
    {"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60 * 1000}, {"h", 60 * 60 * 1000}};

}  // namespace

// ---- KeySchema ----

KeySchema::KeySchema(std::string name, KeyType type, ConfigValue default_value, std::string help)
    : name_(std::move(name)),
      type_(type),
      default_(std::move(default_value)),
      help_(std::move(help)) {}

KeySchema& KeySchema::power_of_two() {
  power_of_two_ = true;
  return *this;
}
KeySchema& KeySchema::non_empty() {
  non_empty_ = true;
  return *this;
}
KeySchema& KeySchema::ignore_case() {
  ignore_case_ = true;
  return *this;
}
KeySchema& KeySchema::noun(std::string noun) {
  noun_ = std::move(noun);
  return *this;
}
KeySchema& KeySchema::check(Check check) {
  checks_.push_back(std::move(check));
  return *this;
}
KeySchema& KeySchema::reloadable() {
  reloadable_ = true;
  return *this;
}
KeySchema& KeySchema::required() {
  required_ = true;
  return *this;
}

KeySchema& KeySchema::default_to(std::string_view text) {
  ConfigValue value;
  if (auto error = parse(trim(text), value); !error.empty()) {
    throw std::invalid_argument("default of " + name_ + ": " + error);
  }
  default_ = std::move(value);
  return *this;
}

std::string KeySchema::parse(std::string_view text, ConfigValue& out) const {
  switch (type_) {
    case KeyType::kFlag: {
      const std::string word = lower(text);
      if (word == "true" || word == "on" || word == "yes" || word == "1") {
        out = true;
      } else if (word == "false" || word == "off" || word == "no" || word == "0") {
        out = false;
      } else {
        return quoted(text) + " is not a boolean (use true/false, on/off, yes/no or 1/0)";
      }
      return {};
    }
    case KeyType::kInteger:
      return parse_integer(text, out);
    case KeyType::kSize:
    case KeyType::kDuration:
      return parse_scaled(text, out);
    case KeyType::kText:
      if (non_empty_ && text.empty()) return "empty value";
      for (const Check& check : checks_) {
        if (auto error = check(text); !error.empty()) return error;
      }
      out = std::string(text);
      return {};
    case KeyType::kChoice: {
      const auto match = std::find_if(choices_.begin(), choices_.end(), [&](const auto& c) {
        return ignore_case_ ? lower(c) == lower(text) : c == text;
      });
      if (match == choices_.end()) {
        return quoted(text) + " is not " + (noun_.empty() ? "one of " : noun_ + " (use ") +
               alternatives(choices_) + (noun_.empty() ? "" : ")");
      }
      for (const Check& check : checks_) {
        if (auto error = check(*match); !error.empty()) return error;
      }
      out = *match;
      return {};
    }
    case KeyType::kList: {
      std::vector<std::string> items;
      if (!text.empty()) {
        for (size_t start = 0;;) {
          const size_t comma = text.find(',', start);
          const std::string_view item = trim(text.substr(start, comma - start));
          if (item.empty()) return "empty item in " + quoted(text);
          for (const Check& check : checks_) {
            if (auto error = check(item); !error.empty()) return error;
          }
          items.emplace_back(item);
          if (comma == std::string_view::npos) break;
          start = comma + 1;
        }
      }
      if (non_empty_ && items.empty()) return "empty value";
      out = std::move(items);
      return {};
    }
  }
  return "unsupported key type";
}

std::string KeySchema::parse_integer(std::string_view text, ConfigValue& out) const {
  const bool signed_range = min_ < 0;
  const std::string expected = "(expected an integer in " + range_text(min_, max_) + ")";
  if (text.empty()) return "empty value " + expected;
  if (text.front() == '-' && !signed_range) return quoted(text) + " is negative " + expected;
  const std::string_view digits = text.front() == '-' ? text.substr(1) : text;
  if (!all_digits(digits)) {
    return quoted(text) + (signed_range ? " is not an integer" : " is not an unsigned integer");
  }
  uint64_t magnitude = 0;
  const auto parsed = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude);
  // All digits, so from_chars can only fail with result_out_of_range.
  const bool negative = text.front() == '-' && magnitude != 0;
  const bool in_range =
      parsed.ec == std::errc() &&
      (negative ? magnitude <= uint64_t{0} - static_cast<uint64_t>(min_) &&
                      magnitude <= (uint64_t{1} << 63)
                : magnitude <= max_ && (min_ <= 0 || magnitude >= static_cast<uint64_t>(min_)));
  if (!in_range) return std::string(text) + " is out of range " + range_text(min_, max_);
  if (power_of_two_ && !std::has_single_bit(magnitude)) {
    return std::to_string(magnitude) +
           " is not a power of two (nearest: " + std::to_string(std::bit_floor(magnitude)) +
           " or " + std::to_string(std::bit_ceil(magnitude)) + ")";
  }
  out = negative ? static_cast<int64_t>(uint64_t{0} - magnitude) : static_cast<int64_t>(magnitude);
  return {};
}

std::string KeySchema::parse_scaled(std::string_view text, ConfigValue& out) const {
  const bool size = type_ == KeyType::kSize;
  const std::string expected = size ? "(expected a size in " + range_text(min_, max_) + " bytes)"
                                    : "(expected a duration in " + range_text(min_, max_) + " ms)";
  if (text.empty()) return "empty value " + expected;
  if (text.front() == '-') return quoted(text) + " is negative " + expected;
  const size_t digits_end = std::min(text.find_first_not_of("0123456789"), text.size());
  const std::string unit = lower(trim(text.substr(digits_end)));
  const Unit* found = nullptr;
  for (const Unit& candidate :
       size ? std::span<const Unit>(kSizeUnits) : std::span<const Unit>(kDurationUnits)) {
    if (candidate.name == unit) found = &candidate;
  }
  if (digits_end == 0 || found == nullptr) {
    return quoted(text) + (size ? " is not a size (bytes, or a number with K, M, G or T: 64K, 4MiB)"
                                : " is not a duration (milliseconds, or a number with ms, s, m "
                                  "or h: 250ms, 5s, 2m)");
  }
  uint64_t number = 0;
  const auto parsed = std::from_chars(text.data(), text.data() + digits_end, number);
  const bool overflow =
      parsed.ec != std::errc() || number > std::numeric_limits<uint64_t>::max() / found->factor;
  const uint64_t value = overflow ? 0 : number * found->factor;
  if (overflow || value > max_ || value < static_cast<uint64_t>(min_)) {
    std::string shown(text);
    if (!overflow && found->factor != 1) {
      shown += " (" + std::to_string(value) + (size ? " bytes)" : " ms)");
    }
    return shown + " is out of range " + range_text(min_, max_);
  }
  if (power_of_two_ && !std::has_single_bit(value)) {
    return std::to_string(value) +
           " is not a power of two (nearest: " + std::to_string(std::bit_floor(value)) + " or " +
           std::to_string(std::bit_ceil(value)) + ")";
  }
  out = value;
  return {};
}

std::string KeySchema::show(const ConfigValue& value) const {
  switch (type_) {
    case KeyType::kFlag:
      return std::get<bool>(value) ? "true" : "false";
    case KeyType::kInteger:
      return std::to_string(std::get<int64_t>(value));
    case KeyType::kSize:
    case KeyType::kDuration:
      return std::to_string(std::get<uint64_t>(value));
    case KeyType::kText:
    case KeyType::kChoice:
      return std::get<std::string>(value);
    case KeyType::kList: {
      std::string out;
      for (const std::string& item : std::get<std::vector<std::string>>(value)) {
        if (!out.empty()) out += ", ";
        out += item;
      }
      return out;
    }
  }
  return {};
}

std::string KeySchema::type_text() const {
  const std::string range = std::to_string(min_) + ".." + std::to_string(max_);
  switch (type_) {
    case KeyType::kFlag:
      return "true|false";
    case KeyType::kInteger:
      return (power_of_two_ ? "power of two " : "integer ") + range;
    case KeyType::kSize:
      return "size " + range + " bytes (or 64K, 4MiB, 1G)";
    case KeyType::kDuration:
      return "duration " + range + " ms (or 250ms, 5s, 2m, 1h)";
    case KeyType::kText:
      return non_empty_ ? "text, not empty" : "text";
    case KeyType::kChoice: {
      std::string out;
      for (const std::string& choice : choices_) {
        if (!out.empty()) out += '|';
        out += choice;
      }
      return ignore_case_ ? out + " (any case)" : out;
    }
    case KeyType::kList:
      return non_empty_ ? "comma-separated list, not empty" : "comma-separated list";
  }
  return {};
}

// ---- SectionSchema ----

SectionSchema::SectionSchema(std::string name, std::string help, bool family)
    : name_(std::move(name)), help_(std::move(help)), family_(family) {}

KeySchema& SectionSchema::add(KeySchema key) {
  const bool valid =
      !key.name_.empty() &&
      key.name_.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
  if (!valid) throw std::logic_error("config key name '" + key.name_ + "': use a-z, 0-9 and _");
  if (find(key.name_) != nullptr) {
    throw std::logic_error("config key " + name_ + "." + key.name_ + " declared twice");
  }
  keys_.push_back(std::move(key));
  return keys_.back();
}

KeySchema& SectionSchema::flag(std::string name, bool default_value, std::string help) {
  KeySchema key(std::move(name), KeyType::kFlag, default_value, std::move(help));
  key.max_ = 1;
  return add(std::move(key));
}

KeySchema& SectionSchema::integer(std::string name, int64_t default_value, int64_t min, int64_t max,
                                  std::string help) {
  KeySchema key(std::move(name), KeyType::kInteger, default_value, std::move(help));
  key.min_ = min;
  key.max_ = static_cast<uint64_t>(std::max<int64_t>(max, 0));
  return add(std::move(key));
}

KeySchema& SectionSchema::size(std::string name, uint64_t default_value, uint64_t min, uint64_t max,
                               std::string help) {
  KeySchema key(std::move(name), KeyType::kSize, default_value, std::move(help));
  key.min_ = static_cast<int64_t>(min);
  key.max_ = max;
  return add(std::move(key));
}

KeySchema& SectionSchema::duration(std::string name, Milliseconds default_value, Milliseconds min,
                                   Milliseconds max, std::string help) {
  KeySchema key(std::move(name), KeyType::kDuration, static_cast<uint64_t>(default_value.count()),
                std::move(help));
  key.min_ = min.count();
  key.max_ = static_cast<uint64_t>(max.count());
  return add(std::move(key));
}

KeySchema& SectionSchema::text(std::string name, std::string default_value, std::string help) {
  return add(KeySchema(std::move(name), KeyType::kText, std::move(default_value), std::move(help)));
}

KeySchema& SectionSchema::choice(std::string name, std::string default_value,
                                 std::vector<std::string> choices, std::string help) {
  KeySchema key(std::move(name), KeyType::kChoice, std::move(default_value), std::move(help));
  key.choices_ = std::move(choices);
  return add(std::move(key));
}

KeySchema& SectionSchema::list(std::string name, std::vector<std::string> default_value,
                               std::string help) {
  return add(KeySchema(std::move(name), KeyType::kList, std::move(default_value), std::move(help)));
}

const KeySchema* SectionSchema::find(std::string_view key) const noexcept {
  for (const KeySchema& k : keys_) {
    if (k.name() == key) return &k;
  }
  return nullptr;
}

KeySchema* SectionSchema::find(std::string_view key) noexcept {
  for (KeySchema& k : keys_) {
    if (k.name() == key) return &k;
  }
  return nullptr;
}

// ---- ConfigSchema ----

namespace {

void check_section_name(std::string_view name) {
  const bool valid =
      !name.empty() &&
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string_view::npos;
  if (!valid) {
    throw std::logic_error("config section name '" + std::string(name) + "': use a-z, 0-9 and _");
  }
}

}  // namespace

SectionSchema& ConfigSchema::section(std::string_view name, std::string help) {
  for (SectionSchema& s : sections_) {
    if (s.name() != name) continue;
    if (s.is_family()) throw std::logic_error("[" + std::string(name) + "] is a family");
    if (!help.empty()) s.help_ = std::move(help);
    return s;
  }
  check_section_name(name);
  // push_back only: a deque keeps the addresses of the sections declared before.
  sections_.emplace_back(std::string(name), std::move(help), false);
  return sections_.back();
}

SectionSchema& ConfigSchema::family(std::string_view prefix, std::string help) {
  for (SectionSchema& s : sections_) {
    if (s.name() != prefix) continue;
    if (!s.is_family()) throw std::logic_error("[" + std::string(prefix) + "] is a section");
    if (!help.empty()) s.help_ = std::move(help);
    return s;
  }
  check_section_name(prefix);
  sections_.emplace_back(std::string(prefix), std::move(help), true);
  return sections_.back();
}

void ConfigSchema::check(Check check) { checks_.push_back(std::move(check)); }

const SectionSchema* ConfigSchema::find_section(std::string_view name) const noexcept {
  for (const SectionSchema& s : sections_) {
    if (s.name() == name) return &s;
  }
  return nullptr;
}

const KeySchema* ConfigSchema::find_key(std::string_view full_name) const noexcept {
  return const_cast<ConfigSchema*>(this)->find_key(full_name);
}

KeySchema* ConfigSchema::find_key(std::string_view full_name) noexcept {
  const size_t dot = full_name.rfind('.');
  if (dot == std::string_view::npos) return nullptr;
  const std::string_view section = full_name.substr(0, dot);
  const std::string_view key = full_name.substr(dot + 1);
  auto find = [this](std::string_view name) -> SectionSchema* {
    for (SectionSchema& s : sections_) {
      if (s.name() == name) return &s;
    }
    return nullptr;
  };
  if (SectionSchema* plain = find(section); plain && !plain->is_family()) return plain->find(key);
  const size_t prefix_end = section.find('.');
  if (prefix_end == std::string_view::npos) return nullptr;
  SectionSchema* family = find(section.substr(0, prefix_end));
  return family && family->is_family() ? family->find(key) : nullptr;
}

void ConfigSchema::set_defaults(std::initializer_list<std::string_view> settings) {
  for (const std::string_view setting : settings) {
    const size_t equals = setting.find('=');
    const std::string_view name = trim(setting.substr(0, equals));
    KeySchema* key = equals == std::string_view::npos ? nullptr : find_key(name);
    if (key == nullptr) {
      throw std::invalid_argument("default \"" + std::string(setting) +
                                  "\": expected section.key=value of a declared key");
    }
    key->default_to(setting.substr(equals + 1));
  }
}

namespace {

// `text` in lines of at most `width` characters, each after `indent`.
std::string wrapped(std::string_view text, std::string_view indent, size_t width) {
  std::string out;
  size_t column = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(start, end - start);
    if (column > 0 && column + 1 + word.size() > width) {
      out += '\n';
      column = 0;
    }
    if (column == 0) {
      out.append(indent);
    } else {
      out += ' ';
      ++column;
    }
    out.append(word);
    column += word.size();
    start = end + 1;
  }
  return out + "\n";
}

}  // namespace

std::string ConfigSchema::describe() const {
  std::string out;
  for (const SectionSchema& section : sections_) {
    out += section.is_family() ? "\n[" + section.name() + ".NAME]" : "\n[" + section.name() + "]";
    if (!section.help().empty()) out += "  " + section.help();
    out += '\n';
    for (const KeySchema& key : section.keys()) {
      const std::string value = key.is_required() ? "(required)" : key.show(key.default_value());
      std::string line = "  " + key.name() + (value.empty() ? " =" : " = " + value);
      line.resize(std::max<size_t>(line.size() + 2, 36), ' ');
      out +=
          line + "(" + key.type_text() + (key.is_reloadable() ? "; SIGHUP applies it" : "") + ")\n";
      if (!key.help().empty()) out += wrapped(key.help(), "      ", 88);
    }
  }
  return out;
}

}  // namespace ucp::app

#include "ucp/app/Config.h"

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ucp/base/UniqueFd.h"

#include "ConfigParser.h"

namespace ucp::app {
namespace {

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
// would block the start for good. Returns what is wrong, or "" (then `text` holds the file).
std::string read_file(const std::string& path, std::string& text) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) return path + ": cannot open: " + error_text(errno);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) return path + ": cannot read: " + error_text(errno);
  if (!S_ISREG(info.st_mode)) {
    return path + ": not a regular file (" + file_kind(info.st_mode) +
           "); give the path of an ini file";
  }
  if (static_cast<uint64_t>(info.st_size) > Config::kMaxFileBytes) {
    return too_large(path, std::to_string(info.st_size));
  }
  // One byte more than the limit: a file that grew since fstat is still caught.
  text.assign(static_cast<size_t>(info.st_size) + 1, '\0');
  size_t size = 0;
  for (;;) {
    if (size == text.size()) {
      if (text.size() > Config::kMaxFileBytes) {
        return too_large(path, "over " + std::to_string(Config::kMaxFileBytes));
      }
      text.resize(std::min<size_t>(text.size() * 2, Config::kMaxFileBytes + 1));
    }
    const ssize_t n = ::read(fd.get(), text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return path + ": cannot read: " + error_text(errno);
    if (n == 0) break;
    size += static_cast<size_t>(n);
  }
  text.resize(size);
  return {};
}

ConfigError capped(std::vector<std::string> problems) {
  ConfigError error;
  if (problems.size() > ConfigError::kMaxProblems) {
    const size_t more = problems.size() - ConfigError::kMaxProblems;
    problems.resize(ConfigError::kMaxProblems);
    problems.push_back("... and " + std::to_string(more) + " more problem(s)");
  }
  error.problems = std::move(problems);
  return error;
}

}  // namespace

MachineLimits MachineLimits::current() {
  MachineLimits machine;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) {
    machine.memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  }
  machine.cpus = std::max(1u, std::thread::hardware_concurrency());
  return machine;
}

std::string ConfigOrigin::describe() const {
  return is_default() ? std::string("default") : source + ":" + std::to_string(line);
}

std::string ConfigError::message(std::string_view separator) const {
  std::string out;
  for (const std::string& problem : problems) {
    if (!out.empty()) out.append(separator);
    out += problem;
  }
  return out;
}

Config::Config(const ConfigSchema& schema) : schema_(&schema) {
  for (const SectionSchema& section : schema.sections()) {
    if (section.is_family()) continue;
    for (const KeySchema& key : section.keys()) {
      entries_[section.name() + "." + key.name()] = Entry{&key, key.default_value(), {}};
    }
  }
}

Result<Config, ConfigError> Config::load(const ConfigSchema& schema, const std::string& path,
                                         const std::vector<std::string>& overrides,
                                         const MachineLimits& machine) {
  Config config(schema);
  config.source_ = path.empty() ? "--set" : path;
  std::vector<std::string> problems;
  ConfigParser parser(config, problems);
  if (!path.empty()) {
    std::string text;
    if (auto error = read_file(path, text); !error.empty()) {
      return Unexpected{ConfigError{{std::move(error)}}};
    }
    parser.parse_text(text, path);
  }
  for (size_t i = 0; i < overrides.size(); ++i) parser.apply_override(overrides[i], i + 1);
  parser.finish(machine);
  if (!problems.empty()) return Unexpected{capped(std::move(problems))};
  return config;
}

Result<Config, ConfigError> Config::parse(const ConfigSchema& schema, std::string_view text,
                                          const std::string& origin,
                                          const std::vector<std::string>& overrides,
                                          const MachineLimits& machine) {
  Config config(schema);
  config.source_ = origin;
  std::vector<std::string> problems;
  ConfigParser parser(config, problems);
  parser.parse_text(text, origin);
  for (size_t i = 0; i < overrides.size(); ++i) parser.apply_override(overrides[i], i + 1);
  parser.finish(machine);
  if (!problems.empty()) return Unexpected{capped(std::move(problems))};
  return config;
}

const Config::Entry& Config::entry(std::string_view key) const {
  auto found = entries_.find(key);
  if (found == entries_.end()) {
    throw std::logic_error("config key " + std::string(key) + " is not declared" +
                           (schema_->find_key(key) != nullptr ? " (a family instance not in the "
                                                                "file: see instances())"
                                                              : ""));
  }
  return found->second;
}

void Config::wrong_type(std::string_view key, std::string_view wanted) {
  throw std::logic_error("config key " + std::string(key) + " read as " + std::string(wanted) +
                         ", which its declared type does not give");
}

std::vector<std::string> Config::instances(std::string_view family) const {
  auto found = instances_.find(family);
  return found == instances_.end() ? std::vector<std::string>{} : found->second;
}

const ConfigOrigin& Config::origin(std::string_view key) const { return entry(key).origin; }

std::string Config::show(std::string_view key) const {
  const Entry& e = entry(key);
  return e.key->show(e.value);
}

void Config::take_reloadable(const Config& fresh) {
  for (auto& [name, entry] : entries_) {
    if (!entry.key->is_reloadable()) continue;
    if (auto theirs = fresh.entries_.find(name); theirs != fresh.entries_.end()) {
      entry = theirs->second;
    }
  }
  for (const SectionSchema& section : schema_->sections()) {
    const bool whole = std::all_of(section.keys().begin(), section.keys().end(),
                                   [](const KeySchema& k) { return k.is_reloadable(); });
    if (!section.is_family() || !whole) continue;
    // The instances come and go with the file: drop ours, take the fresh ones.
    const std::string prefix = section.name() + ".";
    std::erase_if(entries_, [&](const auto& e) { return e.first.rfind(prefix, 0) == 0; });
    for (const auto& [name, entry] : fresh.entries_) {
      if (name.rfind(prefix, 0) == 0) entries_[name] = entry;
    }
    instances_[section.name()] = fresh.instances(section.name());
  }
}

std::vector<ConfigChange> Config::changes(const Config& from, const Config& to) {
  std::vector<ConfigChange> out;
  auto compare = [&](const std::string& prefix, const SectionSchema& section) {
    for (const KeySchema& key : section.keys()) {
      const std::string name = prefix + "." + key.name();
      std::string before = from.show(name);
      std::string after = to.show(name);
      if (before != after) out.push_back({name, std::move(before), std::move(after)});
    }
  };
  for (const SectionSchema& section : from.schema().sections()) {
    if (!section.is_family()) {
      compare(section.name(), section);
      continue;
    }
    std::vector<std::string> names = from.instances(section.name());
    for (const std::string& name : to.instances(section.name())) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    const auto before = from.instances(section.name());
    const auto after = to.instances(section.name());
    for (const std::string& name : names) {
      const bool was = std::find(before.begin(), before.end(), name) != before.end();
      const bool is = std::find(after.begin(), after.end(), name) != after.end();
      const std::string prefix = section.name() + "." + name;
      if (was && is) {
        compare(prefix, section);
      } else {
        out.push_back({"[" + prefix + "]", was ? "present" : "(none)", is ? "present" : "(none)"});
      }
    }
  }
  return out;
}

void ConfigProblems::fail(std::initializer_list<std::string_view> keys, const std::string& what) {
  fail(std::vector<std::string>(keys.begin(), keys.end()), what);
}

void ConfigProblems::fail(const std::vector<std::string>& keys, const std::string& what) {
  const std::string* last = nullptr;
  const ConfigOrigin* last_origin = nullptr;
  for (const std::string& key : keys) {
    const ConfigOrigin& origin = config_.origin(key);
    if (origin.is_default()) continue;
    if (last_origin == nullptr || origin.order > last_origin->order) {
      last = &key;
      last_origin = &origin;
    }
  }
  if (last == nullptr) {  // all at their defaults: the defaults themselves do not fit
    out_.push_back(config_.source() + ": " + what);
    return;
  }
  out_.push_back(last_origin->describe() + ": " + *last + ": " + what);
}

}  // namespace ucp::app

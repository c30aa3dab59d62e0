#include "ucp/net/CpuAffinity.h"

#include <cerrno>
#include <charconv>

#include <pthread.h>
#include <sched.h>

namespace ucp {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// A CPU number: decimal digits only, below CPU_SETSIZE (what sched_setaffinity can name).
bool parse_cpu(std::string_view text, int& cpu) {
  if (text.empty() || text.size() > 5) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  std::from_chars(text.data(), text.data() + text.size(), cpu);
  return cpu < CPU_SETSIZE;
}

}  // namespace

Result<CpuAffinity, Error> CpuAffinity::parse(std::string_view text) {
  CpuAffinity affinity;
  text = trim(text);
  if (text.empty()) return affinity;
  if (text == "auto") {
    affinity.mode = Mode::kAuto;
    return affinity;
  }
  const auto bad = [](std::string_view item, const std::string& why) {
    return Unexpected{Error("\"" + std::string(item) + "\" " + why +
                            " (expected auto, or CPU numbers and ranges such as 0,2,4-7)")};
  };
  const std::string limit = "is not a CPU number from 0 to " + std::to_string(CPU_SETSIZE - 1);
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    if (item.empty()) return bad(text, "has an empty item");
    const size_t dash = item.find('-');
    int first = 0;
    int last = 0;
    if (dash == std::string_view::npos) {
      if (!parse_cpu(item, first)) return bad(item, limit);
      last = first;
    } else {
      const std::string_view low = trim(item.substr(0, dash));
      const std::string_view high = trim(item.substr(dash + 1));
      if (!parse_cpu(low, first)) return bad(low, limit);
      if (!parse_cpu(high, last)) return bad(high, limit);
      if (last < first) return bad(item, "is an empty range");
    }
    for (int cpu = first; cpu <= last; ++cpu) affinity.cpus.push_back(cpu);
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
  }
  affinity.mode = Mode::kList;
  return affinity;
}

int CpuAffinity::worker_cpu(size_t index, const std::vector<int>& allowed) const noexcept {
  switch (mode) {
    case Mode::kNone:
      return -1;
    case Mode::kAuto:
      return allowed.empty() ? -1 : allowed[index % allowed.size()];
    case Mode::kList:
      return cpus.empty() ? -1 : cpus[index % cpus.size()];
  }
  return -1;
}

int CpuAffinity::main_cpu(size_t workers, const std::vector<int>& allowed) const noexcept {
  if (mode != Mode::kAuto || allowed.empty()) return -1;
  return allowed[workers % allowed.size()];
}

std::string CpuAffinity::to_string() const {
  switch (mode) {
    case Mode::kNone:
      return {};
    case Mode::kAuto:
      return "auto";
    case Mode::kList:
      break;
  }
  std::string text;
  for (int cpu : cpus) {
    if (!text.empty()) text += ',';
    text += std::to_string(cpu);
  }
  return text;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

Result<void> pin_current_thread(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return Unexpected{error_from_errno(EINVAL)};
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (::sched_setaffinity(0, sizeof set, &set) != 0) return Unexpected{error_from_errno(errno)};
  return {};
}

void name_current_thread(const std::string& name) {
  // The kernel refuses names of more than 15 bytes (ERANGE): keep the first 15.
  const std::string shown = name.substr(0, 15);
  (void)::pthread_setname_np(::pthread_self(), shown.c_str());
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!text.empty()) text += ',';
    text += std::to_string(cpus[i]);
    if (j > i) text += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return text;
}

}  // namespace ucp

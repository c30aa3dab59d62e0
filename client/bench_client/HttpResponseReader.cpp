#include "HttpResponseReader.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace bench {
namespace {

bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view text) noexcept {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace

HttpResponseReader::Progress HttpResponseReader::feed(std::span<const char> bytes) {
  Progress progress;
  size_t at = 0;
  while (at < bytes.size()) {
    const std::string_view rest(bytes.data() + at, bytes.size() - at);
    switch (state_) {
      case State::kHead: {
        // Search from 3 bytes before what is new: the blank line may straddle two pieces.
        const size_t from = line_.size() < 3 ? 0 : line_.size() - 3;
        const size_t old = line_.size();
        line_.append(rest.substr(0, std::min(rest.size(), kMaxHeadBytes + 4 - old)));
        const size_t end = line_.find("\r\n\r\n", from);
        if (end == std::string::npos) {
          if (line_.size() > kMaxHeadBytes) {
            progress.error = "a response head longer than 64 KiB";
            return progress;
          }
          at = bytes.size();
          break;
        }
        at += end + 4 - old;
        line_.resize(end + 2);  // the head, each line ending in CRLF
        if (!start_body(progress)) return progress;
        break;
      }
      case State::kBody: {
        const auto take = static_cast<size_t>(std::min<uint64_t>(remaining_, rest.size()));
        remaining_ -= take;
        at += take;
        if (remaining_ == 0) finish(progress);
        break;
      }
      case State::kChunkSize:
      case State::kTrailer: {
        const size_t end = rest.find('\n');
        line_.append(rest.substr(0, end == std::string_view::npos ? rest.size() : end + 1));
        if (line_.size() > 8192) {
          progress.error = "a chunk-size or trailer line longer than 8 KiB";
          return progress;
        }
        if (end == std::string_view::npos) {
          at = bytes.size();
          break;
        }
        at += end + 1;
        std::string_view line(line_);
        line.remove_suffix(line.size() >= 2 && line[line.size() - 2] == '\r' ? 2 : 1);
        if (state_ == State::kTrailer) {
          if (line.empty()) finish(progress);  // the blank line after the trailers
          line_.clear();
          break;
        }
        const std::string_view digits = trim(line.substr(0, line.find(';')));
        uint64_t size = 0;
        const auto [end_of_number, why] =
            std::from_chars(digits.data(), digits.data() + digits.size(), size, 16);
        if (digits.empty() || why != std::errc{} ||
            end_of_number != digits.data() + digits.size()) {
          progress.error = "a malformed chunk size";
          return progress;
        }
        line_.clear();
        remaining_ = size;
        state_ = size == 0 ? State::kTrailer : State::kChunkData;
        break;
      }
      case State::kChunkData: {
        const auto take = static_cast<size_t>(std::min<uint64_t>(remaining_, rest.size()));
        remaining_ -= take;
        at += take;
        if (remaining_ == 0) {
          remaining_ = 2;
          state_ = State::kChunkEnd;
        }
        break;
      }
      case State::kChunkEnd: {
        const char expected = remaining_ == 2 ? '\r' : '\n';
        if (rest.front() != expected) {
          progress.error = "a chunk not followed by CRLF";
          return progress;
        }
        ++at;
        if (--remaining_ == 0) state_ = State::kChunkSize;
        break;
      }
    }
  }
  return progress;
}

bool HttpResponseReader::start_body(Progress& progress) {
  const std::string_view head(line_);
  // Status line: HTTP/1.x NNN reason
  if (!head.starts_with("HTTP/1.") || head.size() < 12 || head[8] != ' ') {
    progress.error = "not an HTTP/1.x status line";
    return false;
  }
  int status = 0;
  const auto parsed = std::from_chars(head.data() + 9, head.data() + 12, status);
  if (parsed.ec != std::errc{} || parsed.ptr != head.data() + 12 || status < 100) {
    progress.error = "a malformed status code";
    return false;
  }
  bool chunked = false;
  bool have_length = false;
  uint64_t length = 0;
  size_t start = head.find("\r\n") + 2;
  while (start < head.size()) {
    const size_t end = head.find("\r\n", start);
    const std::string_view field = head.substr(start, end - start);
    start = end + 2;
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = field.substr(0, colon);
    const std::string_view value = trim(field.substr(colon + 1));
    if (iequals(name, "content-length")) {
      const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
      if (ec != std::errc{} || p != value.data() + value.size()) {
        progress.error = "a malformed Content-Length";
        return false;
      }
      have_length = true;
    } else if (iequals(name, "transfer-encoding")) {
      // Chunked when it is the last coding applied.
      const size_t comma = value.rfind(',');
      chunked = iequals(trim(comma == std::string_view::npos ? value : value.substr(comma + 1)),
                        "chunked");
    }
  }
  line_.clear();
  status_ = status;
  if (status < 200) {  // interim (100 Continue, ...): another head follows
    state_ = State::kHead;
    return true;
  }
  if (status == 204 || status == 304) {
    finish(progress);
    return true;
  }
  if (chunked) {
    state_ = State::kChunkSize;
    return true;
  }
  if (!have_length) {
    progress.error =
        "a response with neither Content-Length nor chunked coding (a body "
        "that ends with the connection cannot be timed on keep-alive)";
    return false;
  }
  remaining_ = length;
  state_ = State::kBody;
  if (length == 0) finish(progress);
  return true;
}

void HttpResponseReader::finish(Progress& progress) {
  ++progress.responses;
  if (status_ >= 400) ++progress.unsuccessful;
  state_ = State::kHead;
  line_.clear();
}

}  // namespace bench

#include "Deflate.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include <zlib.h>

namespace ucp::ws::detail {
namespace {

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const char x = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] + 32) : a[i];
    const char y = b[i] >= 'A' && b[i] <= 'Z' ? static_cast<char>(b[i] + 32) : b[i];
    if (x != y) return false;
  }
  return true;
}

constexpr std::string_view kExtensionName = "permessage-deflate";
constexpr std::byte kTail[4] = {std::byte{0x00}, std::byte{0x00}, std::byte{0xFF}, std::byte{0xFF}};

bool is_token_char(char c) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_space(char c) noexcept { return c == ' ' || c == '\t'; }

/// A window size parameter: a plain decimal 8..15.
bool parse_window_bits(std::string_view text, uint8_t& out) noexcept {
  unsigned value = 0;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  if (result.ec != std::errc() || result.ptr != text.data() + text.size() || text.empty()) {
    return false;
  }
  if (value < 8 || value > 15) return false;
  out = static_cast<uint8_t>(value);
  return true;
}

/// The four parameters of an offer or a response, each at most once.
struct DeflateParameters {
  bool server_no_context_takeover = false;
  bool client_no_context_takeover = false;
  bool has_server_max_window_bits = false;
  bool has_client_max_window_bits = false;
  bool client_max_window_bits_has_value = false;
  uint8_t server_max_window_bits = 15;
  uint8_t client_max_window_bits = 15;

  /// False for an unknown, repeated or invalid parameter. A value-less client_max_window_bits
  /// is valid only in an offer.
  bool read(const Extension& extension, bool offer) noexcept {
    for (const ExtensionParam& p : extension.params) {
      if (p.name == "server_no_context_takeover") {
        if (p.has_value || server_no_context_takeover) return false;
        server_no_context_takeover = true;
      } else if (p.name == "client_no_context_takeover") {
        if (p.has_value || client_no_context_takeover) return false;
        client_no_context_takeover = true;
      } else if (p.name == "server_max_window_bits") {
        if (!p.has_value || has_server_max_window_bits) return false;
        if (!parse_window_bits(p.value, server_max_window_bits)) return false;
        has_server_max_window_bits = true;
      } else if (p.name == "client_max_window_bits") {
        if (has_client_max_window_bits) return false;
        has_client_max_window_bits = true;
        if (p.has_value) {
          if (!parse_window_bits(p.value, client_max_window_bits)) return false;
          client_max_window_bits_has_value = true;
        } else if (!offer) {
          return false;
        }
      } else {
        return false;
      }
    }
    return true;
  }
};

uint8_t clamp_window(uint8_t bits) noexcept { return std::clamp<uint8_t>(bits, 9, 15); }

/// DeflateState::context_bytes of the calling thread's live connections.
size_t& thread_context_bytes() noexcept {
  thread_local size_t bytes = 0;
  return bytes;
}

// ---- per-thread caches of zlib streams used for one message at a time ----

template <class Stream>
class StreamCache {
 public:
  static constexpr size_t kKeep = 16;
  ~StreamCache() {
    for (Stream* s : free_) Stream::destroy(s);
  }
  template <class Match>
  Stream* take(Match match) {
    for (size_t i = free_.size(); i-- > 0;) {
      if (match(*free_[i])) {
        Stream* s = free_[i];
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        return s;
      }
    }
    return nullptr;
  }
  void give(Stream* s) noexcept {
    if (free_.size() < kKeep) {
      try {
        free_.push_back(s);
        return;
      } catch (const std::bad_alloc&) {
      }
    }
    Stream::destroy(s);
  }

 private:
  std::vector<Stream*> free_;
};

}  // namespace

// ---- Sec-WebSocket-Extensions ----

bool parse_extensions(std::string_view header, std::vector<Extension>& out) {
  size_t i = 0;
  const size_t n = header.size();
  auto skip_space = [&] {
    while (i < n && is_space(header[i])) ++i;
  };
  auto token = [&]() -> std::string_view {
    const size_t start = i;
    while (i < n && is_token_char(header[i])) ++i;
    return header.substr(start, i - start);
  };
  for (;;) {
    skip_space();
    if (i < n && header[i] == ',') {  // empty list elements are allowed (RFC 9110 §5.6.1)
      ++i;
      continue;
    }
    if (i == n) return true;
    Extension extension;
    extension.name = token();
    if (extension.name.empty()) return false;
    skip_space();
    while (i < n && header[i] == ';') {
      ++i;
      skip_space();
      ExtensionParam param;
      param.name = token();
      if (param.name.empty()) return false;
      skip_space();
      if (i < n && header[i] == '=') {
        ++i;
        skip_space();
        param.has_value = true;
        if (i < n && header[i] == '"') {
          const size_t start = ++i;
          while (i < n && header[i] != '"') {
            if (header[i] == '\\') return false;  // no escapes in a token value (§9.1)
            ++i;
          }
          if (i == n) return false;
          param.value = header.substr(start, i - start);
          ++i;
          for (const char c : param.value) {
            if (!is_token_char(c)) return false;
          }
        } else {
          param.value = token();
        }
        if (param.value.empty()) return false;
        skip_space();
      }
      extension.params.push_back(param);
    }
    out.push_back(std::move(extension));
    if (i == n) return true;
    if (header[i] != ',') return false;
    ++i;
  }
}

// ---- negotiation ----

bool accept_deflate_offer(std::span<const Extension> offers, const DeflateOptions& options,
                          DeflateParams& agreed, std::string& response) {
  for (const Extension& offer : offers) {
    if (!iequals(offer.name, kExtensionName)) continue;
    DeflateParameters asked;
    if (!asked.read(offer, true)) continue;  // declined (RFC 7692 §5); maybe the next one
    DeflateParams p;
    p.server_no_context_takeover = asked.server_no_context_takeover || options.no_context_takeover;
    p.client_no_context_takeover =
        asked.client_no_context_takeover || options.peer_no_context_takeover;
    const uint8_t own = clamp_window(options.window_bits);
    const int mem_level = std::clamp<int>(options.mem_level, 1, 9);
    // A server_max_window_bits of 8 is accepted: zlib cannot compress with it, so this side
    // then sends everything uncompressed (Deflater::usable), which the extension allows.
    p.server_max_window_bits =
        asked.has_server_max_window_bits ? std::min(asked.server_max_window_bits, own) : own;
    const bool say_server_window = asked.has_server_max_window_bits || own < 15;
    bool say_client_window = false;
    if (asked.has_client_max_window_bits) {
      p.client_max_window_bits =
          std::min(asked.client_max_window_bits, clamp_window(options.peer_window_bits));
      say_client_window = asked.client_max_window_bits_has_value || p.client_max_window_bits < 15;
    }
    // A client must accept no context takeover in either direction (RFC 7692 §7.1.1): past
    // the thread's budget, this connection keeps nothing between messages.
    if (kept_context_bytes() + context_bytes(p, mem_level, true) > options.max_context_bytes) {
      p.server_no_context_takeover = true;
      p.client_no_context_takeover = true;
    }
    response.assign(kExtensionName);
    if (p.server_no_context_takeover) response += "; server_no_context_takeover";
    if (p.client_no_context_takeover) response += "; client_no_context_takeover";
    if (say_server_window) {
      response += "; server_max_window_bits=";
      response += std::to_string(p.server_max_window_bits);
    }
    if (say_client_window) {
      response += "; client_max_window_bits=";
      response += std::to_string(p.client_max_window_bits);
    }
    agreed = p;
    return true;
  }
  return false;
}

std::string deflate_offer(const DeflateOptions& options) {
  std::string offer(kExtensionName);
  const uint8_t own = clamp_window(options.window_bits);
  offer += "; client_max_window_bits";
  if (own < 15) offer += "=" + std::to_string(own);
  if (const uint8_t peer = clamp_window(options.peer_window_bits); peer < 15) {
    offer += "; server_max_window_bits=" + std::to_string(peer);
  }
  if (options.no_context_takeover) offer += "; client_no_context_takeover";
  if (options.peer_no_context_takeover) offer += "; server_no_context_takeover";
  return offer;
}

bool accept_deflate_response(const Extension& response, const DeflateOptions& options,
                             DeflateParams& agreed) {
  if (!iequals(response.name, kExtensionName)) return false;
  DeflateParameters answer;
  if (!answer.read(response, false)) return false;
  const uint8_t own = clamp_window(options.window_bits);
  const uint8_t peer = clamp_window(options.peer_window_bits);
  if (options.peer_no_context_takeover && !answer.server_no_context_takeover) return false;
  if (answer.has_server_max_window_bits && peer < 15 && answer.server_max_window_bits > peer) {
    return false;
  }
  if (answer.has_client_max_window_bits && answer.client_max_window_bits > own) return false;
  DeflateParams p;
  p.server_no_context_takeover = answer.server_no_context_takeover;
  p.client_no_context_takeover = answer.client_no_context_takeover || options.no_context_takeover;
  p.server_max_window_bits = answer.has_server_max_window_bits ? answer.server_max_window_bits : 15;
  p.client_max_window_bits =
      answer.has_client_max_window_bits ? std::min(answer.client_max_window_bits, own) : own;
  agreed = p;
  return true;
}

// ---- Inflater ----

struct Inflater::Stream {
  z_stream z{};
  uint8_t window_bits = 15;

  static Stream* create(uint8_t window_bits) noexcept {
    auto* s = new (std::nothrow) Stream;
    if (s == nullptr) return nullptr;
    s->window_bits = window_bits;
    if (inflateInit2(&s->z, -static_cast<int>(window_bits)) != Z_OK) {
      delete s;
      return nullptr;
    }
    return s;
  }
  static void destroy(Stream* s) noexcept {
    inflateEnd(&s->z);
    delete s;
  }
};

namespace {
StreamCache<Inflater::Stream>& inflate_cache() {
  thread_local StreamCache<Inflater::Stream> cache;
  return cache;
}
}  // namespace

Inflater::Inflater(uint8_t window_bits, bool reset_each_message, uint32_t max_ratio) noexcept
    : max_ratio_(max_ratio),
      // A peer told 8 may still use 9 (zlib cannot compress with 8): inflate with at least 9.
      window_bits_(clamp_window(window_bits)),
      reset_each_message_(reset_each_message) {}

Inflater::~Inflater() {
  if (stream_ != nullptr) Stream::destroy(stream_);
}

Inflater::Status Inflater::run(std::span<const std::byte> in, MessageBuffer& out,
                               uint64_t limit) noexcept {
  if (stream_ == nullptr) {
    if (reset_each_message_) {
      const uint8_t bits = window_bits_;
      stream_ = inflate_cache().take([bits](const Stream& s) { return s.window_bits == bits; });
    }
    if (stream_ == nullptr) stream_ = Stream::create(window_bits_);
    if (stream_ == nullptr) return Status::kNoMemory;
  }
  z_stream& z = stream_->z;
  // zlib's next_in is not const in the API it compiles against; it does not write through it.
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  for (;;) {
    if (out.size() > limit) return Status::kTooBig;
    // Room for one byte past the limit, so that passing it shows.
    const uint64_t allowed = limit + 1 - out.size();
    const size_t want = static_cast<size_t>(
        std::min<uint64_t>(allowed, std::max<size_t>({out.size(), in.size() * 2, size_t{1024}})));
    if (out.spare().empty() && !out.reserve_more(want)) return Status::kNoMemory;
    std::span<std::byte> room = out.spare();
    if (room.size() > allowed) room = room.first(static_cast<size_t>(allowed));
    z.next_out = reinterpret_cast<Bytef*>(room.data());
    z.avail_out = static_cast<uInt>(std::min<size_t>(room.size(), UINT32_MAX));
    const int rc = ::inflate(&z, Z_SYNC_FLUSH);
    out.commit(room.size() - z.avail_out);
    if (out.size() > limit) return Status::kTooBig;
    if (rc == Z_STREAM_END) {
      // The sender ended a deflate stream inside the message (BFINAL): what follows starts a
      // new one.
      if (inflateReset(&z) != Z_OK) return Status::kBadData;
      if (z.avail_in == 0) return Status::kOk;
      continue;
    }
    if (rc == Z_BUF_ERROR) {
      if (z.avail_in == 0) return Status::kOk;  // needs more input
      if (z.avail_out == 0) continue;           // needs more room
      return Status::kBadData;
    }
    if (rc != Z_OK) return Status::kBadData;
    if (z.avail_in == 0 && z.avail_out > 0) return Status::kOk;
  }
}

Inflater::Status Inflater::run_bounded(std::span<const std::byte> in, MessageBuffer& out,
                                       uint64_t limit) noexcept {
  if (max_ratio_ == 0) return run(in, out, limit);
  // The credit starts as a burst of `limit` (a first message of any ratio passes) and grows
  // by max_ratio per compressed byte, never above the burst.
  if (!credit_started_) {
    credit_ = limit;
    credit_started_ = true;
  }
  const uint64_t earned = uint64_t{max_ratio_} * in.size();
  credit_ = std::min(credit_, limit);
  credit_ = earned >= limit - credit_ ? limit : credit_ + earned;
  const uint64_t bound = std::min(limit, out.size() + credit_);
  const size_t before = out.size();
  const Status status = run(in, out, bound);
  credit_ -= std::min<uint64_t>(credit_, out.size() - before);
  if (status == Status::kTooBig && bound < limit) return Status::kInflatesTooFar;
  return status;
}

Inflater::Status Inflater::inflate(std::span<const std::byte> in, MessageBuffer& out,
                                   uint64_t limit) noexcept {
  if (in.empty()) return Status::kOk;
  const Status status = run_bounded(in, out, limit);
  if (status != Status::kOk) end_message(true);
  return status;
}

Inflater::Status Inflater::finish(MessageBuffer& out, uint64_t limit) noexcept {
  const Status status = run_bounded(kTail, out, limit);
  end_message(status != Status::kOk);
  return status;
}

void Inflater::end_message(bool failed) noexcept {
  if (stream_ == nullptr) return;
  if (failed) {
    // Its state is unusable; the connection is failing anyway.
    Stream::destroy(std::exchange(stream_, nullptr));
    return;
  }
  if (!reset_each_message_) return;  // context takeover: the window carries over
  if (inflateReset(&stream_->z) != Z_OK) {
    Stream::destroy(std::exchange(stream_, nullptr));
    return;
  }
  inflate_cache().give(std::exchange(stream_, nullptr));
}

// ---- Deflater ----

struct Deflater::Stream {
  z_stream z{};
  int level = 6;
  int mem_level = 8;
  uint8_t window_bits = 15;

  static Stream* create(int level, uint8_t window_bits, int mem_level) noexcept {
    auto* s = new (std::nothrow) Stream;
    if (s == nullptr) return nullptr;
    s->level = level;
    s->mem_level = mem_level;
    s->window_bits = window_bits;
    if (deflateInit2(&s->z, level, Z_DEFLATED, -static_cast<int>(window_bits), mem_level,
                     Z_DEFAULT_STRATEGY) != Z_OK) {
      delete s;
      return nullptr;
    }
    return s;
  }
  static void destroy(Stream* s) noexcept {
    deflateEnd(&s->z);
    delete s;
  }
};

namespace {
StreamCache<Deflater::Stream>& deflate_cache() {
  thread_local StreamCache<Deflater::Stream> cache;
  return cache;
}
}  // namespace

Deflater::Deflater(uint8_t window_bits, bool reset_each_message, int level, int mem_level) noexcept
    : level_(std::clamp(level, 1, 9)),
      mem_level_(std::clamp(mem_level, 1, 9)),
      window_bits_(window_bits),
      reset_each_message_(reset_each_message) {}

Deflater::~Deflater() {
  if (stream_ != nullptr) Stream::destroy(stream_);
}

bool Deflater::compress(std::span<const std::byte> in, MessageBuffer& out) noexcept {
  if (!usable()) return false;
  if (stream_ == nullptr) {
    if (reset_each_message_) {
      stream_ = deflate_cache().take([this](const Stream& s) {
        return s.window_bits == window_bits_ && s.level == level_ && s.mem_level == mem_level_;
      });
    }
    if (stream_ == nullptr) stream_ = Stream::create(level_, window_bits_, mem_level_);
    if (stream_ == nullptr) return false;
  }
  z_stream& z = stream_->z;
  out.clear();
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  bool ok = true;
  do {
    if (!out.reserve_more(std::max<size_t>(in.size() / 2 + 64, 256))) {
      ok = false;
      break;
    }
    std::span<std::byte> room = out.spare();
    z.next_out = reinterpret_cast<Bytef*>(room.data());
    z.avail_out = static_cast<uInt>(std::min<size_t>(room.size(), UINT32_MAX));
    const int rc = ::deflate(&z, Z_SYNC_FLUSH);
    out.commit(room.size() - z.avail_out);
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      ok = false;
      break;
    }
  } while (z.avail_out == 0 || z.avail_in > 0);
  if (ok) {
    // A sync flush ends with an empty stored block, 00 00 FF FF: the receiver adds it back.
    const auto bytes = out.bytes();
    if (bytes.size() >= 4 && std::memcmp(bytes.data() + bytes.size() - 4, kTail, 4) == 0) {
      out.drop_back(4);
    }
    if (out.empty()) {
      const std::byte empty_block{0x00};  // RFC 7692 §7.2.3.6: an empty message
      ok = out.append({&empty_block, 1});
    }
  }
  if (!ok || !reset_each_message_) {
    if (!ok) Stream::destroy(std::exchange(stream_, nullptr));
    return ok;
  }
  if (deflateReset(&z) != Z_OK) {
    Stream::destroy(std::exchange(stream_, nullptr));
  } else {
    deflate_cache().give(std::exchange(stream_, nullptr));
  }
  return true;
}

// ---- DeflateState ----

DeflateState::DeflateState(const DeflateParams& agreed, const DeflateOptions& options,
                           bool server) noexcept
    : params(agreed),
      inflater(server ? agreed.client_max_window_bits : agreed.server_max_window_bits,
               server ? agreed.client_no_context_takeover : agreed.server_no_context_takeover,
               options.max_inflate_ratio),
      deflater(server ? agreed.server_max_window_bits : agreed.client_max_window_bits,
               server ? agreed.server_no_context_takeover : agreed.client_no_context_takeover,
               options.level, options.mem_level),
      min_message_bytes(options.min_message_bytes),
      context_bytes(
          detail::context_bytes(agreed, std::clamp<int>(options.mem_level, 1, 9), server)) {
  thread_context_bytes() += context_bytes;
}

DeflateState::~DeflateState() { thread_context_bytes() -= context_bytes; }

size_t context_bytes(const DeflateParams& params, int mem_level, bool server) noexcept {
  const bool keep_inflater =
      server ? !params.client_no_context_takeover : !params.server_no_context_takeover;
  const bool keep_deflater =
      server ? !params.server_no_context_takeover : !params.client_no_context_takeover;
  const uint8_t in_bits = server ? params.client_max_window_bits : params.server_max_window_bits;
  const uint8_t out_bits = server ? params.server_max_window_bits : params.client_max_window_bits;
  size_t bytes = 0;
  if (keep_inflater) bytes += 7 * 1024 + (size_t{1} << clamp_window(in_bits));
  if (keep_deflater && out_bits >= 9) {
    bytes += (size_t{1} << (out_bits + 2)) + (size_t{1} << (mem_level + 9)) + 6 * 1024;
  }
  return bytes;
}

size_t kept_context_bytes() noexcept { return thread_context_bytes(); }

}  // namespace ucp::ws::detail

#include "ucp/http/RequestId.h"

#include <cstdint>
#include <random>
#include <utility>

#include "ucp/http/Request.h"
#include "ucp/http/Response.h"

namespace ucp::http {
namespace {

constexpr size_t kGeneratedBytes = 32;

bool id_char(char c) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '.':
    case '_':
    case '~':
    case ':':
    case '/':
    case '+':
    case '=':
    case '@':
    case '-':
      return true;
    default:
      return false;
  }
}

void write_hex(char* out, uint64_t value) noexcept {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 15; i >= 0; --i) {
    out[i] = kHex[value & 15];
    value >>= 4;
  }
}

/// Per thread: a random prefix drawn once (std::random_device: getrandom), then a counter.
struct IdSource {
  uint64_t prefix;
  uint64_t counter;
  IdSource() {
    std::random_device device;
    prefix = (uint64_t{device()} << 32) | device();
    counter = (uint64_t{device()} << 32) | device();
  }
};

}  // namespace

bool valid_request_id(std::string_view id) noexcept {
  if (id.empty() || id.size() > Request::kMaxIdBytes) return false;
  for (const char c : id) {
    if (!id_char(c)) return false;
  }
  return true;
}

std::string_view generate_request_id(char* out) noexcept {
  thread_local IdSource source;
  write_hex(out, source.prefix);
  write_hex(out + 16, ++source.counter);
  return {out, kGeneratedBytes};
}

Middleware request_id(RequestIdOptions options) {
  static_assert(kGeneratedBytes <= Request::kMaxIdBytes);
  return [options = std::move(options)](Request& request, Response& response, Next next) -> Task<> {
    const std::string_view incoming =
        options.trust_incoming ? request.header(options.header) : std::string_view();
    if (valid_request_id(incoming)) {
      request.set_id(incoming);
    } else {
      char generated[kGeneratedBytes];
      request.set_id(generate_request_id(generated));
    }
    // Before the handler, so that a stream's head carries it too.
    if (options.echo) response.set_header(options.header, request.id());
    co_await next();
    // A handler that started over (reset()) loses it: put it back if the head is still ours.
    if (options.echo && !response.head_sent() && response.header(options.header).empty()) {
      response.set_header(options.header, request.id());
    }
  };
}

}  // namespace ucp::http

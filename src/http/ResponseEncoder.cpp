#include "ResponseEncoder.h"

#include <charconv>

#include "ucp/http/Status.h"

namespace ucp::http::detail {

void OutBuffer::append_spilling(std::string_view text) {
  if (!spilled_) {
    spill_.reserve(size_ + text.size() + kInlineBytes);
    spill_.assign(inline_, size_);
    spilled_ = true;
  }
  spill_.append(text);
}

void OutBuffer::append_decimal(uint64_t value) {
  char digits[24];
  const auto result = std::to_chars(digits, digits + sizeof digits, value);
  append({digits, static_cast<size_t>(result.ptr - digits)});
}

void OutBuffer::append_hex(uint64_t value) {
  char digits[24];
  const auto result = std::to_chars(digits, digits + sizeof digits, value, 16);
  append({digits, static_cast<size_t>(result.ptr - digits)});
}

void encode_head(const HeadFields& head, OutBuffer& out) {
  const int status = valid_status(head.status) ? head.status : 500;
  out.append("HTTP/1.1 ");
  out.append_decimal(static_cast<uint64_t>(status));
  out.append(" ");
  out.append(reason_phrase(status));
  out.append("\r\n");
  if (!head.custom_server && !head.server_name.empty()) {
    out.append("Server: ");
    out.append(head.server_name);
    out.append("\r\n");
  }
  if (!head.custom_date) {
    out.append("Date: ");
    out.append(head.date);
    out.append("\r\n");
  }
  for (const Header& field : head.headers) {
    out.append(field.name);
    out.append(": ");
    out.append(field.value);
    out.append("\r\n");
  }
  switch (head.framing) {
    case Framing::kLength:
      out.append("Content-Length: ");
      out.append_decimal(head.content_length);
      out.append("\r\n");
      break;
    case Framing::kChunked:
      out.append("Transfer-Encoding: chunked\r\n");
      break;
    case Framing::kNone:
    case Framing::kUntilClose:
      break;
  }
  if (head.upgrade) {
    out.append("Connection: Upgrade\r\n");
  } else if (!head.keep_alive) {
    out.append("Connection: close\r\n");
  } else if (head.version_minor == 0) {
    out.append("Connection: keep-alive\r\n");
  }
  out.append("\r\n");
}

}  // namespace ucp::http::detail

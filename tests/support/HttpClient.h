#pragma once
// HttpClient: reads HTTP/1.1 responses off a raw loopback socket for tests, strictly enough
// to catch a malformed answer: status line, header fields, and a body framed by
// Content-Length, chunked coding (decoded; trailers dropped) or the close.
//
//   std::string pending;                       // bytes of later responses stay here
//   auto reply = read_response(fd, pending, 5000);
//   ASSERT_TRUE(reply) << reply.error().message();
//   EXPECT_EQ(reply->status, 200);
//   EXPECT_EQ(reply->header("content-type"), "text/plain");
//
// Header-only; every wait is bounded (LoopbackClient.h).

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "LoopbackClient.h"

namespace ucp::test {

struct HttpReply {
  int status = 0;
  std::string head;  // status line and fields, without the final CRLF CRLF
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased
  std::string body;
  bool chunked = false;
  bool until_close = false;  // the body ended with the connection

  /// The first header named `name` (lowercase), or "".
  std::string header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n == name) return v;
    }
    return {};
  }
  bool has_header(std::string_view name) const {
    for (const auto& h : headers) {
      if (h.first == name) return true;
    }
    return false;
  }
  /// The response without its Date field: two answers at different seconds compare equal.
  std::string without_date() const {
    std::string text;
    for (const auto& [n, v] : headers) {
      if (n != "date") text += n + ": " + v + "\n";
    }
    return std::to_string(status) + "\n" + text + "\n" + body;
  }
};

namespace detail {

/// Appends received bytes to `pending` until it holds `want` bytes; false on EOF or error.
inline Result<void> fill(int fd, std::string& pending, size_t want, const Deadline& deadline) {
  char buffer[65536];
  while (pending.size() < want) {
    auto n = recv_some(fd, buffer, deadline.remaining_ms());
    if (!n) return Unexpected{n.error()};
    if (*n == 0) return Unexpected{std::errc::connection_aborted};
    pending.append(buffer, *n);
  }
  return {};
}

/// Waits until `pending` contains `marker`; returns its position.
inline Result<size_t> fill_until(int fd, std::string& pending, std::string_view marker,
                                 const Deadline& deadline, size_t from = 0) {
  char buffer[65536];
  for (;;) {
    if (const size_t at = pending.find(marker, from); at != std::string::npos) return at;
    auto n = recv_some(fd, buffer, deadline.remaining_ms());
    if (!n) return Unexpected{n.error()};
    if (*n == 0) return Unexpected{std::errc::connection_aborted};
    pending.append(buffer, *n);
  }
}

inline std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace detail

/// Reads one response. `no_body`: it answers HEAD (or is known to carry none).
inline Result<HttpReply> read_response(int fd, std::string& pending, int64_t timeout_ms,
                                       bool no_body = false) {
  const Deadline deadline(timeout_ms);
  auto end = detail::fill_until(fd, pending, "\r\n\r\n", deadline);
  if (!end) return Unexpected{end.error()};
  HttpReply reply;
  reply.head = pending.substr(0, *end);
  pending.erase(0, *end + 4);
  if (reply.head.rfind("HTTP/1.1 ", 0) != 0 || reply.head.size() < 12) {
    return Unexpected{std::errc::illegal_byte_sequence};
  }
  reply.status = std::atoi(reply.head.c_str() + 9);
  size_t line = reply.head.find("\r\n");
  while (line != std::string::npos) {
    const size_t next = reply.head.find("\r\n", line + 2);
    const std::string field = reply.head.substr(
        line + 2, next == std::string::npos ? std::string::npos : next - line - 2);
    const size_t colon = field.find(':');
    if (colon == std::string::npos || colon == 0)
      return Unexpected{std::errc::illegal_byte_sequence};
    size_t value = colon + 1;
    while (value < field.size() && field[value] == ' ') ++value;
    reply.headers.emplace_back(detail::lower(field.substr(0, colon)), field.substr(value));
    line = next;
  }
  const bool bodiless = no_body || (reply.status >= 100 && reply.status < 200) ||
                        reply.status == 204 || reply.status == 304;
  if (bodiless) return reply;
  if (reply.has_header("content-length")) {
    const size_t length = std::strtoull(reply.header("content-length").c_str(), nullptr, 10);
    if (auto ok = detail::fill(fd, pending, length, deadline); !ok) return Unexpected{ok.error()};
    reply.body = pending.substr(0, length);
    pending.erase(0, length);
    return reply;
  }
  if (detail::lower(reply.header("transfer-encoding")) == "chunked") {
    reply.chunked = true;
    for (;;) {
      auto size_end = detail::fill_until(fd, pending, "\r\n", deadline);
      if (!size_end) return Unexpected{size_end.error()};
      const size_t size = std::strtoull(pending.substr(0, *size_end).c_str(), nullptr, 16);
      pending.erase(0, *size_end + 2);
      if (size == 0) {  // trailers, then an empty line
        for (;;) {
          auto trailer_end = detail::fill_until(fd, pending, "\r\n", deadline);
          if (!trailer_end) return Unexpected{trailer_end.error()};
          const bool last = *trailer_end == 0;
          pending.erase(0, *trailer_end + 2);
          if (last) return reply;
        }
      }
      if (auto ok = detail::fill(fd, pending, size + 2, deadline); !ok)
        return Unexpected{ok.error()};
      if (pending.compare(size, 2, "\r\n") != 0)
        return Unexpected{std::errc::illegal_byte_sequence};
      reply.body += pending.substr(0, size);
      pending.erase(0, size + 2);
    }
  }
  // Delimited by the close.
  reply.until_close = true;
  char buffer[65536];
  for (;;) {
    auto n = recv_some(fd, buffer, deadline.remaining_ms());
    if (!n) return Unexpected{n.error()};
    if (*n == 0) break;
    pending.append(buffer, *n);
  }
  reply.body = std::move(pending);
  pending.clear();
  return reply;
}

/// Sends `request` on a fresh connection to `port` and reads one response.
inline Result<HttpReply> http_exchange(uint16_t port, std::string_view request,
                                       int64_t timeout_ms = 5000, bool no_body = false) {
  auto fd = connect_loopback(port, timeout_ms);
  if (!fd) return Unexpected{fd.error()};
  if (auto sent = send_text(fd->get(), request, timeout_ms); !sent) return Unexpected{sent.error()};
  std::string pending;
  return read_response(fd->get(), pending, timeout_ms, no_body);
}

}  // namespace ucp::test

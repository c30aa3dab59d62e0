#pragma once
// HttpReply: a minimal HTTP/1.1 response reader for loopback tests. It frames responses by
// Content-Length (and reports chunked or unframed bodies as garbled), so a test can count
// and check the answers a server sends on one connection.

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "LoopbackClient.h"

namespace ucp::test {

/// What came back for one request: a response, the connection's end, or neither in time.
struct Reply {
  enum class Kind { kResponse, kClosed, kTimedOut, kGarbled };
  Kind kind = Kind::kTimedOut;
  int status = 0;
  std::string head;  // status line and headers
  std::string body;
  std::string detail;
};

inline std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

/// Reads one HTTP response (head and Content-Length body) from `fd`; bytes beyond it stay in
/// `pending` for the next call.
inline Reply read_reply(int fd, std::string& pending, int64_t timeout_ms) {
  const Deadline deadline(timeout_ms);
  char buffer[16384];
  auto fill = [&]() -> Reply {
    auto n = recv_some(fd, buffer, deadline.remaining_ms());
    Reply r;
    if (!n) {
      r.kind = n.error() == std::errc::timed_out ? Reply::Kind::kTimedOut : Reply::Kind::kClosed;
      r.detail = n.error().message();
      return r;
    }
    if (*n == 0) {
      r.kind = Reply::Kind::kClosed;
      r.detail = "EOF";
      return r;
    }
    pending.append(buffer, *n);
    r.kind = Reply::Kind::kResponse;
    return r;
  };
  size_t head_end;
  while ((head_end = pending.find("\r\n\r\n")) == std::string::npos) {
    Reply r = fill();
    if (r.kind == Reply::Kind::kResponse) continue;
    if (!pending.empty() && r.kind == Reply::Kind::kClosed) {
      r.kind = Reply::Kind::kGarbled;
      r.detail = "connection ended inside a response head: " + pending.substr(0, 200);
    }
    return r;
  }
  Reply reply;
  reply.head = pending.substr(0, head_end);
  if (reply.head.rfind("HTTP/1.", 0) != 0 || reply.head.size() < 12) {
    reply.kind = Reply::Kind::kGarbled;
    reply.detail = "not a status line: " + reply.head.substr(0, 200);
    return reply;
  }
  reply.status = std::atoi(reply.head.c_str() + 9);
  size_t body = 0;
  const std::string head = lowercase(reply.head);
  if (const size_t at = head.find("\r\ncontent-length:"); at != std::string::npos) {
    body = static_cast<size_t>(std::strtoull(head.c_str() + at + 17, nullptr, 10));
  } else if (head.find("\r\ntransfer-encoding:") != std::string::npos) {
    reply.kind = Reply::Kind::kGarbled;
    reply.detail = "chunked response: this reader frames Content-Length bodies only";
    return reply;
  }
  while (pending.size() < head_end + 4 + body) {
    Reply r = fill();
    if (r.kind != Reply::Kind::kResponse) {
      r.kind = Reply::Kind::kGarbled;
      r.detail = "body cut short: " + r.detail;
      return r;
    }
  }
  reply.body = pending.substr(head_end + 4, body);
  pending.erase(0, head_end + 4 + body);
  reply.kind = Reply::Kind::kResponse;
  return reply;
}

}  // namespace ucp::test

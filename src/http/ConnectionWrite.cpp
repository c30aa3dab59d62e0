// How an HTTP connection writes its answers: the response head (written once for finished
// responses and streams), the errors the server answers itself, file bodies (read through the
// ring, or sent from the page cache), and Response::write for streams.

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include <linux/sockios.h>
#include <sys/ioctl.h>

#include "ucp/http/HttpDate.h"
#include "ucp/http/Status.h"
#include "ucp/io/Operations.h"
#include "ucp/io/WithTimeout.h"
#include "ucp/log/Logger.h"

#include "ServerCore.h"

namespace ucp::http::detail {
namespace {

constexpr std::string_view kCrlf = "\r\n";

constexpr size_t kFileChunkBytes = 128 * 1024;
static_assert(MemoryPool::kMaxBlockSize <= kSmallFileBytes);
/// File bodies larger than this go from the page cache to the socket without passing through
/// user memory (io::send_file). Measured with scripts/bench-sendfile.sh (docs/http.md): the
/// send-file operation is as fast at 64 KiB, 1.3x at 256 KiB and 2.2x at 1 MiB; below 64 KiB
/// one read into a buffer wins (at 4 KiB by 1.45x).
constexpr uint64_t kSendFileAboveBytes = 64 * 1024;

/// Read buffers for file bodies, kept per thread so a file response allocates nothing.
class ChunkCache {
 public:
  std::unique_ptr<char[]> take() {
    if (free_.empty()) return std::unique_ptr<char[]>(new char[kFileChunkBytes]);
    auto chunk = std::move(free_.back());
    free_.pop_back();
    return chunk;
  }
  void give(std::unique_ptr<char[]> chunk) {
    if (free_.size() < kKeep) free_.push_back(std::move(chunk));
  }

 private:
  static constexpr size_t kKeep = 16;  // 2 MiB per thread at most
  std::vector<std::unique_ptr<char[]>> free_;
};

ChunkCache& chunk_cache() {
  thread_local ChunkCache cache;
  return cache;
}

}  // namespace

// The head of a response, its framing and the keep-alive decision in one place: a finished
// response announces its body's length; a stream announces the length it was given, else is
// chunked (HTTP/1.1) or ends with the connection (HTTP/1.0, which has no chunked coding).
void Connection::prepare_head(const Request& request, Response& response, bool streaming) noexcept {
  const int status = valid_status(response.status()) ? response.status() : 500;
  uint64_t length = 0;
  if (status_has_no_body(status)) {
    framing_ = Framing::kNone;
  } else if (!streaming) {
    framing_ = Framing::kLength;
    length = response.body_kind() == Response::BodyKind::kFile ? response.file_length()
                                                               : response.body().size();
  } else if (response.stream_length_ != Response::kUnknownLength) {
    framing_ = Framing::kLength;
    length = response.stream_length_;
  } else if (request.version_minor() >= 1) {
    framing_ = Framing::kChunked;
  } else {
    framing_ = Framing::kUntilClose;  // HTTP/1.0 has no chunked coding: the close ends it
    keep_alive_ = false;
  }
  keep_alive_ = keep_alive_ && !response.close_requested();
  OutBuffer& out = session_->out;
  out.clear();
  encode_head({.status = status,
               .headers = response.headers(),
               .custom_date = response.custom_date_,
               .custom_server = response.custom_server_,
               .framing = framing_,
               .content_length = length,
               .keep_alive = keep_alive_,
               .version_minor = request.version_minor(),
               .server_name = core_.options.server_name,
               .date = cached_http_date()},
              out);
}

void Connection::start_stream(Response& response) noexcept {
  response.head_sent_ = true;
  prepare_head(session_->parser.request(), response, true);
}
Task<> Connection::send_error(int status, std::string_view reason) {
  LOG_DEBUG("http {}: {} ({})", tcp_.peer().to_string(), status, reason);
  if (!session_) session_.reset(Session::acquire(core_.limits));
  OutBuffer& out = session_->out;
  out.clear();
  const std::string_view phrase = reason_phrase(status);
  const Header type{"Content-Type", "text/plain"};
  encode_head({.status = status,
               .headers = {&type, 1},
               .framing = Framing::kLength,
               .content_length = phrase.size() + 1,
               .keep_alive = false,
               .server_name = core_.options.server_name,
               .date = cached_http_date()},
              out);
  out.append(phrase);
  out.append("\n");
  slot_->count_response(status);
  (void)co_await send(out.view());
}

// ---- bodies ----

Task<Result<void>> Connection::send_file(int fd, uint64_t offset, uint64_t length) {
  // Around the output queue the bytes would skip TLS: an HTTPS body goes through it.
  if (length > kSendFileAboveBytes && tcp_.tls() == nullptr) {
    co_return co_await send_file_direct(fd, offset, length);
  }
  // A small file is read into a pool block (the usual static file: no malloc, no page
  // fault); a larger one in 128 KiB pieces through a buffer kept per thread.
  ChunkCache& cache = chunk_cache();
  const bool small = length <= MemoryPool::kMaxBlockSize;
  std::unique_ptr<char[]> chunk;
  char* buffer = nullptr;
  size_t capacity = 0;
  if (small) {
    capacity = static_cast<size_t>(length);
    buffer = static_cast<char*>(MemoryPool::allocate(capacity == 0 ? 1 : capacity));
  } else {
    chunk = cache.take();
    buffer = chunk.get();
    capacity = kFileChunkBytes;
  }
  Result<void> result;
  while (length > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(length, capacity));
    auto n =
        co_await io::read(tcp_.loop(), fd, std::as_writable_bytes(std::span(buffer, want)), offset);
    if (!n || *n == 0) {
      // Unreadable, or shorter than announced (truncated while we sent it): the client
      // cannot be told but by closing.
      result = Unexpected{n ? make_error_code(std::errc::io_error) : n.error()};
      break;
    }
    const std::string_view bytes(buffer, *n);
    // A small file is queued as a copy (no waiting); a large one is sent piece by piece
    // straight from the read buffer, the next read starting once the kernel has the piece.
    const bool whole = *n == length && *n <= kSmallFileBytes;
    if (auto sent = co_await send(bytes, !whole); !sent) {
      result = sent;
      break;
    }
    offset += *n;
    length -= *n;
  }
  if (small) {
    MemoryPool::deallocate(buffer);
  } else {
    cache.give(std::move(chunk));
  }
  co_return result;
}

namespace {
/// Bytes the socket holds that the peer has not acknowledged (SIOCOUTQ); -1 when unknown.
int64_t unacknowledged_bytes(int fd) noexcept {
  int bytes = 0;
  return ::ioctl(fd, SIOCOUTQ, &bytes) == 0 ? bytes : -1;
}
}  // namespace

// The head (and whatever else is queued) reaches the kernel first: the file's bytes go to the
// socket around the output queue. The send timeout keeps its meaning, a peer that takes no byte
// for that long: each window ends by cancelling the operation (io_uring discards what was still
// in its pipe), and the next starts from where it stopped if the window saw progress. Progress
// is bytes the socket took, or, when its buffer stayed full (the kernel makes room only once
// a third of it has drained), fewer bytes waiting for the peer's acknowledgement.
Task<Result<void>> Connection::send_file_direct(int fd, uint64_t offset, uint64_t length) {
  if (auto flushed = co_await tcp_.all_sent(); !flushed) co_return flushed;
  const std::chrono::milliseconds window(core_.options.send_timeout_ms);
  int64_t unacknowledged = unacknowledged_bytes(tcp_.fd());
  while (length > 0) {
    io::SendFileOp op(tcp_.loop(), tcp_.fd(), fd, offset, length);
    Result<uint64_t> sent = window.count() > 0 ? co_await with_timeout(op, window) : co_await op;
    tcp_.count_sent_around(op.sent());  // the connection's and the server's byte counters
    offset += op.sent();
    length -= op.sent();
    if (sent) {
      // Shorter than announced (truncated while we sent it): the client can be told only by
      // closing.
      if (length > 0) co_return Unexpected{make_error_code(std::errc::io_error)};
      break;
    }
    if (sent.error() != std::errc::timed_out) co_return Unexpected{sent.error()};
    const int64_t waiting = unacknowledged_bytes(tcp_.fd());
    const bool progress = op.sent() > 0 || (waiting >= 0 && waiting < unacknowledged);
    unacknowledged = waiting;
    if (!progress) co_return Unexpected{sent.error()};
  }
  co_return Result<void>{};
}

}  // namespace ucp::http::detail

namespace ucp::http {

Task<Result<void>> Response::write(std::string_view bytes) {
  detail::Connection* c = connection_;
  if (c == nullptr) co_return Unexpected{make_error_code(std::errc::not_connected)};
  if (!head_sent_) {
    c->start_stream(*this);
    if (auto sent = co_await c->send(c->session().out.view()); !sent) co_return sent;
  }
  if (c->head_only() || c->framing() == detail::Framing::kNone || bytes.empty())
    co_return Result<void>{};
  if (c->framing() == detail::Framing::kLength) {
    if (bytes.size() > stream_length_ - stream_sent_) {
      co_return Unexpected{make_error_code(std::errc::message_size)};
    }
    stream_sent_ += bytes.size();
    co_return co_await c->send(bytes);
  }
  stream_sent_ += bytes.size();
  if (c->framing() == detail::Framing::kUntilClose) co_return co_await c->send(bytes);
  // One chunk: size line, data, CRLF; small ones in one copy.
  detail::OutBuffer& out = c->session().out;
  out.clear();
  out.append_hex(bytes.size());
  out.append(detail::kCrlf);
  if (bytes.size() + detail::kCrlf.size() <= out.inline_room()) {
    out.append(bytes);
    out.append(detail::kCrlf);
    co_return co_await c->send(out.view());
  }
  if (auto sent = co_await c->send(out.view()); !sent) co_return sent;
  if (auto sent = co_await c->send(bytes); !sent) co_return sent;
  co_return co_await c->send(detail::kCrlf);
}

}  // namespace ucp::http

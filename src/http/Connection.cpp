// One HTTP/1.1 connection: the coroutine TcpServer runs for it, request handling, response
// writing, timeouts and the lingering close.
//
// The coroutine's own frame is what an idle keep-alive connection costs, so it holds only
// the Connection (two timers, counters) and the receive in progress. Parser, request,
// response and output buffer (Session) come from the loop's pool when a request starts and
// go back when the connection is idle again; each received buffer is handled by process(),
// whose frame lives only that long.

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <new>
#include <utility>

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "ucp/http/HttpDate.h"
#include "ucp/http/Status.h"
#include "ucp/io/Operations.h"
#include "ucp/io/WithTimeout.h"
#include "ucp/log/Logger.h"

#include "ServerCore.h"

namespace ucp::http::detail {
namespace {

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr std::string_view kLastChunk = "0\r\n\r\n";
constexpr std::string_view kCrlf = "\r\n";

/// File bodies up to this size are read in one piece and queued with the other answers of
/// the same read; larger ones go out piece by piece, each sent from the read buffer.
constexpr size_t kSmallFileBytes = 16 * 1024;
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

/// Sessions of connections gone idle, for the next connection of this thread that has a
/// request. Bounded in count, and a session holding large buffers is not kept.
class SessionCache {
 public:
  static constexpr size_t kKeep = 64;
  static constexpr size_t kMaxHeldBytes = 16 * 1024;

  ~SessionCache() {
    for (Session* session : free_) PoolDeleter{}(session);
  }
  Session* take(const ParserLimits& limits) {
    while (!free_.empty()) {
      Session* session = free_.back();
      free_.pop_back();
      if (session->parser.limits() == limits) return session;
      PoolDeleter{}(session);  // another server's: built for other limits
    }
    return make_pooled<Session>(limits).release();
  }
  void give(Session* session) noexcept {
    if (free_.size() < kKeep && session->parser.reusable() &&
        session->parser.held_bytes() <= kMaxHeldBytes) {
      session->parser.rewind();
      session->response.reset();
      session->out.clear();
      free_.push_back(session);  // capacity reserved up front: cannot throw
      return;
    }
    PoolDeleter{}(session);
  }
  SessionCache() { free_.reserve(kKeep); }

 private:
  std::vector<Session*> free_;
};

SessionCache& session_cache() {
  thread_local SessionCache cache;
  return cache;
}

Task<> not_routed(Response& response, Router::MethodSet allowed) {
  if (allowed != 0) {
    response.set_status(405);
    response.add_header("Allow", Router::allow_header(allowed));
  } else {
    response.set_status(404);
  }
  response.set_content_type("text/plain");
  response.set_body(allowed != 0 ? "Method Not Allowed\n" : "Not Found\n");
  co_return;
}

}  // namespace

Session* Session::acquire(const ParserLimits& limits) { return session_cache().take(limits); }

void Session::release(Session* session) noexcept { session_cache().give(session); }

// ---- the connection coroutine ----

namespace {

/// The switched protocol's coroutine, or none if it could not be made (logged).
Task<> make_switched(TcpConnection& tcp, Upgrade& upgrade) noexcept {
  try {
    return upgrade.handler(tcp, upgrade.received);
  } catch (const std::exception& e) {
    LOG_ERROR("http {}: the handler of the switched protocol failed: {}", tcp.peer().to_string(),
              e.what());
  } catch (...) {
    LOG_ERROR("http {}: the handler of the switched protocol failed", tcp.peer().to_string());
  }
  return {};
}

}  // namespace

/// The switched protocol, in serve()'s frame: its coroutine, started by the constructor (up to
/// its first suspension) so that the Upgrade record can go at once when its UpgradeKeep allows,
/// and then the counters' marks in a record of their own (16 bytes instead of the Upgrade's
/// 128). serve() awaits it, then finish() logs what it threw and brings the worker's counters
/// up to date; no exception handling in serve()'s frame.
class ServerCore::Switched {
 public:
  Switched(TcpConnection& tcp, std::unique_ptr<Upgrade>& upgrade) noexcept {
    Task<> task = make_switched(tcp, *upgrade);
    handler_ = task.release();
    if (handler_) handler_.resume();  // no continuation yet: it stops at its first suspension
    if (upgrade->keep == UpgradeKeep::kUntilStarted) {
      marks_.reset(new (std::nothrow) Marks{upgrade->counted_read, upgrade->counted_written});
      if (marks_) upgrade.reset();  // else the record stays, marks and all
    }
  }
  Switched(const Switched&) = delete;
  Switched& operator=(const Switched&) = delete;
  ~Switched() {
    if (handler_) handler_.destroy();  // before the Upgrade record, which it may refer to
  }
  bool await_ready() const noexcept { return !handler_ || handler_.done(); }
  void await_suspend(std::coroutine_handle<> caller) noexcept {
    handler_.promise().continuation = caller;  // its end resumes serve()
  }
  void await_resume() const noexcept {}

  /// `upgrade`: the record, if it was kept.
  void finish(TcpConnection& tcp, WorkerSlot& slot, const Upgrade* upgrade) noexcept {
    if (handler_ && handler_.promise().exception) {
      try {
        std::rethrow_exception(handler_.promise().exception);
      } catch (const std::exception& e) {
        LOG_ERROR("http {}: the handler of the switched protocol failed: {}",
                  tcp.peer().to_string(), e.what());
      } catch (...) {
        LOG_ERROR("http {}: the handler of the switched protocol failed", tcp.peer().to_string());
      }
    }
    const Marks marks = marks_ ? *marks_ : Marks{upgrade->counted_read, upgrade->counted_written};
    WorkerSlot::add(slot.bytes_received, tcp.bytes_read() - marks.counted_read);
    WorkerSlot::add(slot.bytes_sent, tcp.bytes_written() - marks.counted_written);
    WorkerSlot::subtract(slot.connections_open, 1);
  }

 private:
  struct Marks {
    uint64_t counted_read;
    uint64_t counted_written;
  };
  Task<>::Handle handler_;
  std::unique_ptr<Marks> marks_;
};

// serve() is what an idle keep-alive connection holds beside serve_http(), and an upgraded
// one beside its new protocol's coroutine, so it keeps nothing else in its frame.
Task<> ServerCore::serve(TcpConnection& tcp) {
  std::unique_ptr<Upgrade> upgrade;
  co_await serve_http(tcp, upgrade);
  // Without an upgrade TcpServer closes the connection next, after what is queued.
  if (!upgrade) co_return;
  Switched switched(tcp, upgrade);
  co_await switched;
  switched.finish(tcp, *slot_for(tcp.loop()), upgrade.get());
}

Task<> ServerCore::serve_http(TcpConnection& tcp, std::unique_ptr<Upgrade>& upgrade) {
  Connection connection(*this, tcp);
  for (;;) {
    connection.arm_read_timer();
    auto data = co_await tcp.receive();
    connection.cancel_read_timer();
    if (!data) {
      co_await connection.read_failed(data.error());
      break;
    }
    if (data->empty()) break;  // the peer closed its side: every answer is queued already
    const auto outcome = co_await connection.process(std::move(*data));
    if (outcome == Connection::Outcome::kKeepGoing) continue;
    if (outcome == Connection::Outcome::kLinger) co_await connection.linger();
    if (outcome == Connection::Outcome::kUpgrade) upgrade = connection.take_upgrade();
    break;
  }
}

Connection::Connection(ServerCore& core, TcpConnection& tcp) noexcept
    : core_(core),
      tcp_(tcp),
      slot_(core.slot_for(tcp.loop())),
      read_timer_(tcp.loop(), this, &on_read_timer) {
  // Every read deadline is the layer's own (read_timer_); the write deadline is the
  // connection's: a client that stops reading its answers is cut off.
  tcp.set_write_timeout_ms(core.options.send_timeout_ms);
  WorkerSlot::add(slot_->connections_open, 1);
  WorkerSlot::add(slot_->connections_accepted, 1);
}

Connection::~Connection() {
  account();
  // A connection that switched protocols is still open: serve() counts it out when it ends.
  if (!upgrading_) WorkerSlot::subtract(slot_->connections_open, 1);
}

std::unique_ptr<Upgrade> Connection::take_upgrade() noexcept {
  account();
  upgrade_->counted_read = counted_read_;
  upgrade_->counted_written = counted_written_;
  return std::move(upgrade_);
}

void Connection::account() noexcept {
  WorkerSlot::add(slot_->bytes_received, tcp_.bytes_read() - counted_read_);
  WorkerSlot::add(slot_->bytes_sent, tcp_.bytes_written() - counted_written_);
  counted_read_ = tcp_.bytes_read();
  counted_written_ = tcp_.bytes_written();
}

// ---- timeouts ----

void Connection::arm_read_timer() noexcept {
  const HttpOptions& o = core_.options;
  uint32_t ms = 0;
  if (!session_ || !session_->parser.in_message()) {
    waiting_ = served_ == 0 ? Waiting::kFirst : Waiting::kIdle;
    ms = served_ == 0 ? o.header_timeout_ms : o.keepalive_timeout_ms;
  } else if (!session_->parser.in_body()) {
    // The head has a deadline from its first byte, however it trickles in (slowloris).
    waiting_ = Waiting::kHead;
    if (o.header_timeout_ms > 0) {
      const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(tcp_.loop().now() -
                                                                                 request_started_)
                               .count();
      ms = elapsed < o.header_timeout_ms ? static_cast<uint32_t>(o.header_timeout_ms - elapsed) : 1;
    }
  } else {
    waiting_ = Waiting::kBody;
    ms = o.body_timeout_ms;
  }
  read_timer_.start(ms);
}

void Connection::on_read_timer(void* self) noexcept {
  auto& c = *static_cast<Connection*>(self);
  c.read_timed_out_ = true;
  c.tcp_.stop_reading();  // the pending receive() ends with operation_canceled
}

Task<> Connection::read_failed(std::error_code error) {
  // Timed out inside a request: say so (408). Idle, cancelled by a graceful stop, reset by
  // the peer...: just close.
  LOG_DEBUG("http {}: read ended: {}{}", tcp_.peer().to_string(), error.message(),
            read_timed_out_ ? " (timeout)" : "");
  if (read_timed_out_ && (waiting_ == Waiting::kHead || waiting_ == Waiting::kBody)) {
    co_await send_error(408, "request timeout");
    tcp_.shutdown_write();
  }
  session_.reset();
}

Task<> Connection::linger() {
  session_.reset();
  tcp_.shutdown_write();  // FIN after the queued answers
  waiting_ = Waiting::kLinger;
  read_timer_.start(core_.options.linger_timeout_ms);
  for (;;) {
    auto data = co_await tcp_.receive();
    if (!data || data->empty()) break;  // what arrives before the FIN is dropped
  }
  read_timer_.cancel();
}

// ---- requests ----

Task<Connection::Outcome> Connection::process(BufferLease data) {
  if (!session_) session_.reset(Session::acquire(core_.limits));
  session_->response.connection_ = this;
  RequestParser& parser = session_->parser;
  std::string_view input(data.chars(), data.size());
  Outcome outcome = Outcome::kKeepGoing;
  bool began_here = false;  // the request left unfinished started in this input
  for (;;) {
    began_here = !parser.in_message();
    const auto event = parser.feed(input);
    if (event == RequestParser::Event::kNeedMore) break;
    if (event == RequestParser::Event::kError) {
      co_await send_error(parser.error_status(), parser.error_reason());
      co_return Outcome::kLinger;
    }
    const bool keep = co_await respond();
    ++served_;
    if (upgrading_) {
      // The rest of this read belongs to the new protocol, and so does the connection.
      upgrade_->received = std::move(data);
      upgrade_->received.consume(static_cast<size_t>(input.data() - upgrade_->received.chars()));
      read_timer_.cancel();
      session_.reset();
      co_return Outcome::kUpgrade;
    }
    if (!keep) {
      // Bytes after a request that ends the connection are not requests we answer; read
      // them away before closing rather than reset the answer away.
      outcome = input.empty() ? Outcome::kClose : Outcome::kLinger;
      break;
    }
    parser.next();
  }
  if (outcome == Outcome::kKeepGoing && parser.in_message()) {
    if (began_here) request_started_ = tcp_.loop().now();  // header_timeout_ms runs
    // The rest of a request comes with a later read: keep what it refers to, not `data`.
    if (!parser.detach_input()) {
      LOG_WARN("http {}: no memory for an unfinished request", tcp_.peer().to_string());
      co_return Outcome::kClose;
    }
    if (parser.wants_continue()) {
      parser.continue_sent();
      if (!co_await send(kContinue)) co_return Outcome::kClose;
    }
  }
  account();
  if (outcome == Outcome::kKeepGoing && !parser.in_message()) session_.reset();  // idle
  co_return outcome;
}

Task<bool> Connection::respond() {
  Session& s = *session_;
  Request& request = s.parser.request();
  Response& response = s.response;
  response.reset();
  request.peer_ = &tcp_.peer();
  request.tls_ = tcp_.tls();
  head_only_ = request.method() == Method::kHead;
  framing_ = Framing::kNone;
  keep_alive_ = request.keep_alive() && !core_.draining.load(std::memory_order_relaxed);
  const Router::Match match = core_.router.match(request);
  bool failed = false;
  try {
    if (!core_.middleware.empty()) {
      co_await Next(core_, 0, request, response, match.handler, match.allowed)();
    } else if (match.handler != nullptr) {
      co_await (*match.handler)(request, response);
    } else {
      co_await not_routed(response, match.allowed);
    }
  } catch (const std::exception& e) {
    LOG_ERROR("http {} {}: handler failed: {}", request.method_name(), request.target(), e.what());
    failed = true;
  } catch (...) {
    LOG_ERROR("http {} {}: handler failed", request.method_name(), request.target());
    failed = true;
  }
  if (response.head_sent()) {
    // A stream: its head is out; end the body, or the connection if the body cannot end.
    slot_->count_response(response.status());
    if (failed) co_return false;  // the body cannot be ended properly: close
    if (framing_ == Framing::kChunked && !head_only_) {
      co_return static_cast<bool>(co_await send(kLastChunk)) && keep_alive_;
    }
    if (framing_ == Framing::kLength && !head_only_ &&
        response.stream_sent_ != response.stream_length_) {
      co_return false;  // fewer bytes than announced: only the close can tell the client
    }
    co_return keep_alive_;
  }
  if (response.switching_protocols() && response.status() != 101) {
    response.upgrade_ = {};  // a middleware answered instead: an ordinary response
  }
  if (!failed && response.status() == 101) {
    if (response.switching_protocols()) co_return co_await switch_protocols(request, response);
    LOG_ERROR("http {} {}: a 101 answer without switch_protocols()", request.method_name(),
              request.target());
    failed = true;
  }
  if (failed) {
    response.reset();
    response.set_status(500);
    response.set_content_type("text/plain");
    response.set_body("Internal Server Error\n");
  }
  prepare_head(request, response);
  slot_->count_response(response.status());
  OutBuffer& out = s.out;
  const bool send_body = !head_only_ && framing_ != Framing::kNone;
  if (response.body_kind() == Response::BodyKind::kFile && send_body) {
    if (!co_await send(out.view())) co_return false;
    const int fd = response.file_.get();
    if (!co_await send_file(fd, response.file_offset(), response.file_length())) co_return false;
    response.file_.reset();
    co_return keep_alive_;
  }
  const std::string_view body = send_body ? response.body() : std::string_view();
  if (body.size() <= out.inline_room()) {
    out.append(body);  // head and body in one copy into the output queue
    if (!co_await send(out.view())) co_return false;
  } else {
    if (!co_await send(out.view())) co_return false;
    // A large body is sent from where it is (request or response memory, alive until
    // this returns) instead of being copied into the queue.
    if (!co_await send(body, body.size() > kSmallFileBytes)) co_return false;
  }
  co_return keep_alive_;
}

Task<bool> Connection::switch_protocols(Request& request, Response& response) {
  framing_ = Framing::kNone;
  OutBuffer& out = session_->out;
  out.clear();
  encode_head({.status = 101,
               .headers = response.headers(),
               .custom_date = response.custom_date_,
               .custom_server = response.custom_server_,
               .upgrade = true,
               .version_minor = request.version_minor(),
               .server_name = core_.options.server_name,
               .date = cached_http_date()},
              out);
  slot_->count_response(101);
  if (!co_await send(out.view())) co_return false;
  upgrade_ = std::make_unique<Upgrade>();
  upgrade_->handler = std::move(response.upgrade_);
  upgrade_->keep = response.upgrade_keep_;
  upgrading_ = true;
  co_return true;
}

void Connection::prepare_head(Request& request, Response& response) noexcept {
  const int status = valid_status(response.status()) ? response.status() : 500;
  uint64_t length = 0;
  if (status_has_no_body(status)) {
    framing_ = Framing::kNone;
  } else {
    framing_ = Framing::kLength;
    length = response.body_kind() == Response::BodyKind::kFile ? response.file_length()
                                                               : response.body().size();
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
  Request& request = session_->parser.request();
  const int status = valid_status(response.status()) ? response.status() : 500;
  uint64_t length = 0;
  if (status_has_no_body(status)) {
    framing_ = Framing::kNone;
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
  response.head_sent_ = true;
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

// ---- the middleware chain ----

Task<> Next::operator()() {
  // Not a coroutine: it returns the next stage's task, so a chain costs one frame per
  // middleware and one for the handler, nothing for the links between them.
  if (index_ < core_.middleware.size()) {
    return core_.middleware[index_](
        request_, response_, Next(core_, index_ + 1, request_, response_, handler_, allowed_));
  }
  if (handler_ != nullptr) return (*handler_)(request_, response_);
  return detail::not_routed(response_, allowed_);
}

Middleware access_log(LogLevel level) {
  return [level](Request& request, Response& response, Next next) -> Task<> {
    if (!Logger::enabled(level)) {  // no clock read while the level is off
      co_await next();
      co_return;
    }
    const auto start = std::chrono::steady_clock::now();
    co_await next();
    const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::steady_clock::now() - start)
                            .count();
    UCP_LOG_AT(level, "{} {} {} {} {}us", request.peer() ? request.peer()->to_string() : "-",
               request.method_name(), request.target(), response.status(), micros);
  };
}

}  // namespace ucp::http

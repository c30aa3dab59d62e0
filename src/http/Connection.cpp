// One HTTP/1.1 connection: the coroutine TcpServer runs for it, reading and answering
// requests, the read timeouts and the lingering close. Writing responses (heads, bodies, files,
// streams) is in ConnectionWrite.cpp, the pooled Session in Session.cpp, the middleware chain
// in Middleware.cpp.
//
// The coroutine's own frame is what an idle keep-alive connection costs, so it holds only
// the Connection (two timers, counters) and the receive in progress. Parser, request,
// response and output buffer (Session) come from the loop's pool when a request starts and
// go back when the connection is idle again; each received buffer is handled by process(),
// whose frame lives only that long.

#include <chrono>
#include <exception>
#include <new>
#include <utility>

#include "ucp/http/HttpDate.h"
#include "ucp/log/Logger.h"

#include "ServerCore.h"

namespace ucp::http::detail {
namespace {

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace

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
  // The lease, rather than receive()'s awaiter and result each holding one, and process()
  // taking it by reference keep this frame, held by every idle connection, in the pool's
  // 384-byte class (ConnectionMemory_test). process() empties the lease before any idle wait.
  BufferLease received;
  for (;;) {
    connection.arm_read_timer();
    const auto lent = co_await tcp.receive_into(received);
    connection.cancel_read_timer();
    if (!lent) {
      if (connection.read_failed(lent.error())) co_await connection.time_out_request();
      break;
    }
    if (*lent == 0) break;  // the peer closed its side: every answer is queued already
    const auto outcome = co_await connection.process(received);
    if (outcome == Connection::Outcome::kKeepGoing) continue;
    if (outcome == Connection::Outcome::kLinger) co_await connection.linger();
    if (outcome == Connection::Outcome::kUpgrade) upgrade = connection.take_upgrade();
    break;
  }
}

Connection::Connection(ServerCore& core, TcpConnection& tcp) noexcept
    : TimerNode(hook<&Connection::on_read_timer>),
      core_(core),
      tcp_(tcp),
      slot_(core.slot_for(tcp.loop())) {
  // Every read deadline is the layer's own (the timer base); the write deadline is the
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
  start_read_timer(ms);
}

void Connection::start_read_timer(uint32_t ms) noexcept {
  if (ms == 0) {
    cancel_read_timer();
  } else {
    tcp_.loop().add_timer(*this, tcp_.loop().now() + std::chrono::milliseconds(ms));
  }
}

void Connection::on_read_timer() noexcept {
  read_timed_out_ = true;
  tcp_.stop_reading();  // the pending receive() ends with operation_canceled
}

bool Connection::read_failed(std::error_code error) {
  // Timed out inside a request: say so (408). Idle, cancelled by a graceful stop, reset by
  // the peer...: just close.
  LOG_DEBUG("http {}: read ended: {}{}", tcp_.peer().to_string(), error.message(),
            read_timed_out_ ? " (timeout)" : "");
  if (read_timed_out_ && (waiting_ == Waiting::kHead || waiting_ == Waiting::kBody)) return true;
  session_.reset();
  return false;
}

Task<> Connection::time_out_request() {
  co_await send_error(408, "request timeout");
  tcp_.shutdown_write();
  session_.reset();
}

Task<> Connection::linger() {
  session_.reset();
  tcp_.shutdown_write();  // FIN after the queued answers
  waiting_ = Waiting::kLinger;
  start_read_timer(core_.options.linger_timeout_ms);
  for (;;) {
    auto data = co_await tcp_.receive();
    if (!data || data->empty()) break;  // what arrives before the FIN is dropped
  }
  cancel_read_timer();
}

// ---- requests ----

Task<Connection::Outcome> Connection::process(BufferLease& received) {
  BufferLease data = std::move(received);  // released with this frame, as before
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
    RequestMetrics* const metrics = core_.request_metrics;
    const auto started = metrics != nullptr ? std::chrono::steady_clock::now()
                                            : std::chrono::steady_clock::time_point{};
    const bool keep = co_await respond();
    if (metrics != nullptr) record_request(*metrics, started);
    ++served_;
    if (upgrading_) {
      // The rest of this read belongs to the new protocol, and so does the connection.
      upgrade_->received = std::move(data);
      upgrade_->received.consume(static_cast<size_t>(input.data() - upgrade_->received.chars()));
      cancel_read_timer();
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

void Connection::record_request(RequestMetrics& metrics,
                                std::chrono::steady_clock::time_point started) noexcept {
  Session& s = *session_;
  const uint32_t route = s.route == Router::kNoRoute ? metrics.unmatched_route() : s.route;
  metrics.record(static_cast<size_t>(slot_ - core_.slots.get()), route, s.parser.request().method(),
                 s.response.status(), std::chrono::steady_clock::now() - started);
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
  s.route = match.route;
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
  prepare_head(request, response, false);
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

}  // namespace ucp::http::detail

#pragma once
// WebSocket (RFC 6455) on a TcpConnection: whole messages in, whole messages out, with the
// control frames, the close handshake and the protocol's rules taken care of.
//
//   // Server: a route that upgrades (ucp/ws/Accept.h), one coroutine per connection.
//   router.get("/echo", ucp::ws::upgrade(options, [](ucp::ws::WebSocket& ws) -> ucp::Task<> {
//     while (auto message = co_await ws.receive()) {         // text or binary, reassembled
//       if (!co_await ws.send(message->kind, message->data)) break;
//     }
//   }));  // returning closes (1000); a peer's close or a protocol violation ends receive()
//
//   // Client: ws:// and wss:// URLs on TcpClient.
//   auto ws = co_await ucp::ws::WebSocket::connect(loop, "ws://127.0.0.1:8080/echo");
//   co_await ws->send_text("hello");
//   auto reply = co_await ws->receive();
//   co_await ws->close();
//
// Receiving. receive() returns the next whole message: fragments are reassembled, text is
// checked to be UTF-8 as it arrives (the first invalid byte fails the connection), pings are
// answered with pongs, and a close frame is answered and ends the connection. The message's
// bytes are valid until the next receive() (or the end of the connection): a message that
// arrived in one read is a view into the buffer the loop lent for it, unmasked in place, not a
// copy. Every violation of RFC 6455 fails the connection with its status code (1002 protocol
// error, 1007 invalid payload, 1009 too big): the close frame is sent, the TCP connection shut
// down, receive() reports the error, and everything the connection held is freed.
//
// Sending. send() frames `data` as one message. Small payloads are copied with their header
// into the connection's output queue and send() completes at once; larger ones are sent from
// the caller's memory behind a copied header, and send() completes once the kernel has them.
// Either way `data` may be reused when send() returns. Output is bounded by the connection's
// queue (server.max_output_bytes): a send waits while the peer is behind.
//
// Threads. A WebSocket belongs to its connection's loop: receive(), send(), ping() and close()
// on that loop's thread only. One coroutine receives at a time; several may send (frames never
// interleave). To send from another loop, post to this one (EventLoop::post) or give each
// connection a Channel that a coroutine on its loop drains: examples/ws_chat.cpp shows it.
// Pings are answered, and keep-alive pings sent, while a receive() is pending (the usual read
// loop), since that is when the connection is read.
//
// Memory: between messages a connection holds no buffer (the loop lends one per read), no
// zlib state without context takeover, and its coroutine frames. docs/websocket.md lists what
// is refused and why, the limits and the timeouts.

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "ucp/base/Result.h"
#include "ucp/base/UniqueFunction.h"
#include "ucp/coro/Task.h"
#include "ucp/io/BufferLease.h"
#include "ucp/io/Timer.h"
#include "ucp/net/TcpClient.h"
#include "ucp/net/TcpConnection.h"
#include "ucp/ws/Protocol.h"

namespace ucp::ws {

namespace detail {
struct Accepted;
struct Negotiated;
struct ServerStart;
struct WebSocketExtras;
class FrameReader;
}  // namespace detail

/// The keep-alive ping, its answer and the close handshake run on the timer the WebSocket is.
class WebSocket : private TimerNode {
 public:
  class ReceiveAwaiter;
  class SendAwaiter;
  /// What runs a server connection (ucp/ws/Accept.h).
  using Handler = UniqueFunction<Task<>(WebSocket&)>;

  /// Opens a client connection: `url` is ws://host[:port][/path][?query] (port 80 by
  /// default) or wss://... (TLS, port 443 by default: tcp.tls, or when it is null a context
  /// trusting the system's CAs, and the host's name verified). Resolves and connects with
  /// TcpClient (`tcp` options), sends the upgrade request and checks the answer, all within
  /// options.handshake_timeout_ms. Errors: Errc::kBadUrl, Errc::kHandshakeFailed, and those of
  /// TcpClient::connect (TLS: tls::Errc::kCertificateVerifyFailed...). The WebSocket owns its
  /// connection; dropping it without close() closes the connection in the background.
  static Task<Result<std::unique_ptr<WebSocket>>> connect(EventLoop& loop, std::string url,
                                                          Options options = {},
                                                          ClientOptions tcp = {});

  WebSocket(const WebSocket&) = delete;
  WebSocket& operator=(const WebSocket&) = delete;
  ~WebSocket();

  /// The next whole message, or why there is none: Errc::kClosed (close_code() says how),
  /// kProtocolError, kInvalidPayload, kMessageTooBig, kPingTimeout, kBusy, or a transport error
  /// (connection_reset, timed_out: the peer took no output for the write timeout...).
  /// Cancellable (with_timeout, with_stop): a cancelled receive reports operation_canceled and
  /// a message in progress stays in progress.
  ReceiveAwaiter receive() noexcept { return ReceiveAwaiter(*this); }
  /// Sends `data` as one message (compressed when permessage-deflate is on and it is at least
  /// deflate.min_message_bytes). After the close handshake started: Errc::kClosed.
  SendAwaiter send(MessageKind kind, std::span<const std::byte> data) noexcept {
    return SendAwaiter(*this, kind, data);
  }
  SendAwaiter send_text(std::string_view text) noexcept {
    return send(MessageKind::kText, std::as_bytes(std::span(text.data(), text.size())));
  }
  SendAwaiter send_binary(std::span<const std::byte> data) noexcept {
    return send(MessageKind::kBinary, data);
  }
  /// A ping with up to 125 bytes of payload (more: invalid_argument). The peer's pong counts as
  /// liveness for the keep-alive.
  Task<Result<void>> ping(std::span<const std::byte> payload = {});
  /// Starts the close handshake: a close frame with `code` (1000-1003, 1007-1014, 3000-4999)
  /// and `reason` (UTF-8, up to 123 bytes; else invalid_argument). Unless another coroutine is
  /// in receive() (which then ends with Errc::kClosed), it waits, discarding messages, for the
  /// peer's close frame and the end of the connection, bounded by close_timeout_ms.
  Task<Result<void>> close(uint16_t code = close_code::kNormal, std::string_view reason = {});

  /// No close frame sent or received, no failure.
  bool is_open() const noexcept { return state_ == State::kOpen; }
  /// How it ended: the peer's close code (1005: its close frame had none), ours when we failed
  /// the connection (1002, 1007, 1009) or closed it, 1006 when it ended without a close frame;
  /// 0 while open.
  uint16_t close_code() const noexcept { return close_code_; }
  /// The reason in the peer's close frame, if any (valid UTF-8).
  std::string_view close_reason() const noexcept;
  /// The subprotocol both sides agreed on, or "".
  std::string_view subprotocol() const noexcept;
  /// permessage-deflate was negotiated on this connection.
  bool compressed() const noexcept;
  TcpConnection& connection() noexcept { return tcp_; }
  EventLoop& loop() noexcept { return tcp_.loop(); }

  /// Awaiter of receive().
  class [[nodiscard]] ReceiveAwaiter {
   public:
    explicit ReceiveAwaiter(WebSocket& ws) noexcept : ws_(ws) {}
    bool await_ready() noexcept;
    std::coroutine_handle<> await_suspend(std::coroutine_handle<> caller) noexcept;
    Result<Message> await_resume() noexcept;
    EventLoop& loop() const noexcept { return ws_.tcp_.loop(); }
    void cancel() noexcept { ws_.cancel_receive(); }

   private:
    /// Refused without suspending, and why (kTerminal: the WebSocket's terminal error).
    enum class Early : uint8_t { kNone, kBusy, kTerminal, kNoMemory };
    WebSocket& ws_;
    Early early_ = Early::kNone;
  };

  /// Awaiter of send(): nothing to wait for while the frame fits the output queue. It lives in
  /// the sending coroutine's frame (every idle connection's handler holds one), so the ways a
  /// send can go share their room: the payload until the way is chosen, then the outcome
  /// (done at once), the payload's write_all() (sent from the caller's memory) or the
  /// coroutine of a frame that has to wait its turn, be masked or be compressed.
  class [[nodiscard]] SendAwaiter {
   public:
    SendAwaiter(WebSocket& ws, MessageKind kind, std::span<const std::byte> data) noexcept
        : ws_(ws), kind_(kind), data_(data) {}
    SendAwaiter(const SendAwaiter&) = delete;
    SendAwaiter& operator=(const SendAwaiter&) = delete;
    ~SendAwaiter();
    bool await_ready() noexcept;
    bool await_suspend(std::coroutine_handle<> caller) noexcept;
    Result<void> await_resume() noexcept;

   private:
    enum class Path : uint8_t {
      kPending,   // data_: not yet sent (await_suspend takes the slow way)
      kDone,      // error_: the outcome
      kBorrowed,  // borrowed_
      kSlow,      // slow_
    };
    bool done(std::error_code error) noexcept;
    WebSocket& ws_;
    MessageKind kind_;
    Path path_ = Path::kPending;
    bool header_out_ = false;  // the slow path starts after a header that is already queued
    union {
      std::span<const std::byte> data_;
      std::error_code error_;
      TcpConnection::WriteAwaiter borrowed_;
      Task<Result<void>> slow_;
    };
  };

 private:
  friend struct detail::Accepted;
  enum class Role : uint8_t { kServer, kClient };
  enum class State : uint8_t {
    kOpen,
    kClosing,  // our close frame is out: waiting for the peer's
    kClosed,   // both close frames, a failure, or the end of the connection
  };
  class Park;
  class Read;
  class Sent;
  class FrameLock;
  class Sender;
  class SendersDone;

  WebSocket(TcpConnection& tcp, const Options& options, Role role, BufferLease received,
            const detail::Negotiated& negotiated,
            std::unique_ptr<detail::WebSocketExtras> extras) noexcept;

  /// A server connection after its 101: the WebSocket lives in this coroutine's frame, which
  /// runs the handler and reads the connection for it; returns once the handler has returned
  /// and the close handshake is over.
  static Task<> serve(const detail::ServerStart& start);
  /// The reading side: parks between receive() calls and reads until it has something for
  /// the receiver. A server's run (`client` null) also runs the handler; a client's is started
  /// by its first receive() and owned by the WebSocket. Its frame is what every connection
  /// keeps, so it holds nothing but the server's WebSocket and the awaiters of its three
  /// suspensions: the decisions are advance()'s, the control frames control_task()'s.
  static Task<> run(WebSocket* client, const detail::ServerStart* start);
  /// What run() does next.
  enum class Step : uint8_t {
    kPark,         // wait for the next receive() (or start the handler)
    kRead,         // read the connection into input_
    kClose,        // our close frame: close_code_ (the handler returned, or the server stops)
    kPing,         // a keep-alive ping
    kPong,         // the answer to the peer's ping
    kAnswerClose,  // the answer to the peer's close frame
    kFail,         // the close frame that fails the connection (the reader's error)
    kGoingAway,    // our close frame when the server stops
    kFinish,       // linger, and wait for the other senders: the end
  };
  /// Where advance() goes on from.
  enum class Phase : uint8_t {
    kTop,             // park, unless finishing
    kParked,          // back from the park
    kEndOrRead,       // done if finishing and closed, else read for the receiver
    kRead,            // the read loop: flags first, then parse
    kParse,           // parse what input_ holds
    kAfterClose,      // the answer to a close frame is out
    kAfterFail,       // the failing close frame is out
    kGoingAway,       // the server stops: our close frame (1001)
    kAfterGoingAway,  // and it is out
    kDeliver,         // the receiver gets what delivery_ says
  };
  /// What receive() gets when it does not get a message.
  enum class Delivery : uint8_t { kMessage, kTerminal, kCanceled };
  /// Advances run()'s state without suspending, up to the next thing to await.
  Step advance() noexcept;
  /// After the read advance() asked for.
  void after_read(Result<size_t> read) noexcept;
  /// The control frame (or the end) that `step` sends; run() awaits it.
  Task<Result<void>> control_task(Step step);
  /// Lingers if shut down, then waits for the last Sender.
  Task<Result<void>> finish();
  Task<Result<void>> send_slow(MessageKind kind, std::span<const std::byte> data, bool header_out);
  /// A control frame (ping, pong, close), in its turn with the data frames.
  Task<Result<void>> send_control(uint8_t opcode, std::span<const std::byte> payload);
  /// Our close frame (state kClosing): `code` (none for 1005) and up to 123 bytes of `reason`.
  Task<Result<void>> send_close(uint16_t code, std::string_view reason);
  static std::coroutine_handle<Task<>::promise_type> start_handler(WebSocket& ws,
                                                                   Handler& handler) noexcept;
  /// After the handler returned: 1000, or 1011 (logged) if it threw.
  static uint16_t handler_outcome(WebSocket& ws) noexcept;
  static void log_failure(WebSocket& ws, uint16_t code, const char* reason) noexcept;
  void keep_close_reason(std::string_view reason) noexcept;
  /// After the close handshake or a failure: FIN behind what is queued. The handler learns
  /// the end at once; linger() runs once it has returned.
  void shut_down() noexcept;
  /// What the peer still sends is read and dropped until it closes too (bounded by
  /// close_timeout_ms), so that closing the socket does not reset our last frames away.
  Task<> linger();
  void end(uint16_t code, std::error_code why) noexcept;
  void cancel_receive() noexcept;
  friend HookAccess;
  void on_timer() noexcept;
  void arm_timer(uint32_t ms) noexcept;
  void note_activity() noexcept;
  detail::FrameReader& reader() noexcept;

  // Laid out without padding: the WebSocket is most of what an idle connection holds.
  TcpConnection& tcp_;
  const Options& options_;
  BufferLease input_;  // received and not yet parsed (from input_offset_)
  uint32_t input_offset_ = 0;
  uint16_t close_code_ = 0;
  uint16_t senders_ = 0;                              // frames being written by other coroutines
  std::coroutine_handle<> runner_;                    // run(), parked between receives
  std::coroutine_handle<> receiver_;                  // the coroutine waiting in receive()
  std::coroutine_handle<Task<>::promise_type> user_;  // server: the handler run() runs
  TcpConnection::ReadAwaiter* reading_ = nullptr;     // run()'s read in flight
  std::error_code terminal_;                          // why the connection ended
  std::unique_ptr<detail::WebSocketExtras>
      extras_;                 // only when used: deflate, client, close reason
  void* lock_tail_ = nullptr;  // FrameLock: senders waiting for a frame written in pieces
  std::coroutine_handle<> senders_done_;  // run(), waiting for the senders before the end
  uint8_t subprotocol_;                   // index into options_.subprotocols, or kNoSubprotocol
  Role role_;
  State state_ = State::kOpen;
  Phase phase_ = Phase::kTop;
  Delivery delivery_ = Delivery::kMessage;
  bool sending_ = false;         // a frame is being written in pieces: others wait their turn
  bool delivery_ready_ = false;  // receiver_ gets the reader's message (or what delivery_ says)
  bool user_started_ = false;
  bool ping_due_ = false;  // the keep-alive timer fired: send a ping
  bool ping_outstanding_ = false;
  bool timer_expired_ = false;  // the ping's answer or the peer's close frame is late
  bool cancel_requested_ = false;
  bool lingering_ = false;  // shut down: wait for the peer's FIN before closing the socket
  bool finishing_ = false;  // run(): the handler has returned (or there is none): close
  // The frame reader, in place (its type is private to the library).
  static constexpr size_t kReaderBytes = 136;
  alignas(8) std::byte reader_storage_[kReaderBytes];
};

}  // namespace ucp::ws

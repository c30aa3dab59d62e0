#pragma once
// Framing: the messages of a TCP byte stream. A BufferedReader reads a fixed count of bytes, a
// line (anything up to a delimiter) or a length-prefixed frame, however the bytes fell into
// reads; write_frame() sends a frame. What a gateway to an exchange writes first:
//
//   ucp::BufferedReader reader(conn);                        // keeps what it read past a message
//   auto line = co_await reader.read_until("\r\n", 8192);    // "LOGON bob\r\n", delimiter included
//   auto header = co_await reader.read_exact(16);            // 16 bytes
//   const ucp::FrameFormat format{ucp::LengthPrefix::kBig32, 1 << 20};
//   auto frame = co_await reader.read_frame(format);         // a payload of at most 1 MiB
//   co_await ucp::write_frame(conn, format, payload);        // its 4-byte length, then it
//
// - What a read returns (a view of the reader's buffer) is valid until the next call on the
//   reader. A message that the bytes already read hold comes back without suspending and
//   without a coroutine frame: a burst of messages in one read costs one read.
// - Errors are values: FramingErrc::kEndOfStream (the peer closed between two messages: a clean
//   end), kTruncated (it closed inside one), kTooLong (a line or frame over its maximum: the
//   bytes stay unread, and the stream is best closed); the stream's own (timed_out after its
//   read timeout, connection_reset, operation_canceled...).
// - Cancellable like the connection's reads: with_timeout(reader.read_frame(format), 5s) ends
//   with timed_out, and the bytes read so far stay in the reader for the next call.
// - Any stream with TcpConnection's read(), write_all() and loop() works (ByteStream).
//
// Memory: the reader's buffer is allocated at its first read (read_size bytes) and grows to the
// largest message it had to hold, never past the maximum asked for (plus one read).
//
// Thread contract: the stream's loop thread only; one call at a time on a reader.

#include <algorithm>
#include <array>
#include <concepts>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include "ucp/base/Result.h"
#include "ucp/coro/Task.h"
#include "ucp/io/EventLoop.h"
#include "ucp/net/Buffer.h"
#include "ucp/net/TcpConnection.h"

namespace ucp {

enum class FramingErrc : int {
  kEndOfStream = 1,  // the peer closed between two messages
  kTruncated,        // the peer closed inside a message
  kTooLong,          // a line or frame longer than its maximum
};

const std::error_category& framing_category() noexcept;
inline std::error_code make_error_code(FramingErrc e) noexcept {
  return {static_cast<int>(e), framing_category()};
}

}  // namespace ucp

template <>
struct std::is_error_code_enum<ucp::FramingErrc> : std::true_type {};

namespace ucp {

/// A byte stream the framing reads and writes: TcpConnection, or a connection with its API.
template <class S>
concept ByteStream = requires(S& s, std::span<std::byte> in, std::span<const std::byte> out) {
  s.read(in);        // awaitable, Result<size_t>, 0 = the peer closed; cancellable
  s.write_all(out);  // awaitable, Result<void>
  { s.loop() } -> std::convertible_to<EventLoop&>;
};

/// The length in front of each frame: big-endian, counting the payload only.
enum class LengthPrefix : uint8_t { kBig16 = 2, kBig32 = 4 };

struct FrameFormat {
  LengthPrefix prefix = LengthPrefix::kBig32;
  uint32_t max_payload = 1024 * 1024;  // a longer frame is kTooLong (read or written)
};

/// What a BufferedReader call returns: the result at once when the buffered bytes hold it, else
/// the coroutine that reads until they do. A cancellable awaiter (with_timeout, with_stop).
template <class T>
class [[nodiscard]] ReadyOr {
 public:
  using Cancel = void (*)(void*) noexcept;

  explicit ReadyOr(Result<T> now) noexcept : now_(std::move(now)) {}
  ReadyOr(Task<Result<T>> later, EventLoop& loop, void* reader, Cancel cancel_read) noexcept
      : later_(std::move(later)), loop_(&loop), reader_(reader), cancel_(cancel_read) {}

  bool await_ready() const noexcept { return now_.has_value(); }
  bool await_suspend(std::coroutine_handle<> caller) noexcept {
    return later_.await_suspend(caller);
  }
  Result<T> await_resume() { return now_ ? std::move(*now_) : later_.await_resume(); }

  EventLoop& loop() const noexcept { return *loop_; }
  void cancel() noexcept {
    if (cancel_ != nullptr) cancel_(reader_);
  }

 private:
  std::optional<Result<T>> now_;
  Task<Result<T>> later_;
  EventLoop* loop_ = nullptr;
  void* reader_ = nullptr;
  Cancel cancel_ = nullptr;
};

namespace detail {

/// The big-endian length at the front of `bytes` (which holds at least the prefix).
uint32_t decode_length(LengthPrefix prefix, std::span<const std::byte> bytes) noexcept;
/// Writes `length` big-endian into `out`; returns the prefix's size.
size_t encode_length(LengthPrefix prefix, uint32_t length, std::span<std::byte, 4> out) noexcept;
/// Where `delimiter` starts in `bytes` at or after `from`, or npos.
size_t find_delimiter(std::string_view bytes, std::string_view delimiter, size_t from) noexcept;

}  // namespace detail

/// Reads messages off a stream it does not own (the stream must outlive it). What it read past
/// a message stays in its buffer for the next call; reading the stream directly in between
/// would skip those bytes.
template <ByteStream Stream = TcpConnection>
class BufferedReader {
 public:
  using Bytes = std::span<const std::byte>;

  /// `read_size`: the room each read of the stream asks for at least.
  explicit BufferedReader(Stream& stream, size_t read_size = 4096) noexcept
      : stream_(stream), read_size_(std::max<size_t>(read_size, 64)) {}
  BufferedReader(const BufferedReader&) = delete;
  BufferedReader& operator=(const BufferedReader&) = delete;

  /// Exactly `count` bytes (kTooLong past kMaxExactBytes: read those into a buffer of yours).
  ReadyOr<Bytes> read_exact(size_t count) {
    begin_call();
    if (count > kMaxExactBytes) {
      return ReadyOr<Bytes>(Unexpected{make_error_code(FramingErrc::kTooLong)});
    }
    if (buffer_.readable_bytes() >= count) return ReadyOr<Bytes>(take(count));
    return later(fill_exact(count));
  }
  /// Exactly out.size() bytes into `out`: what is buffered first, the rest straight from the
  /// stream.
  ReadyOr<void> read_exact(std::span<std::byte> out) {
    begin_call();
    const size_t buffered = std::min(out.size(), buffer_.readable_bytes());
    std::copy_n(buffer_.readable().begin(), buffered, out.begin());
    buffer_.consume(buffered);
    if (buffered == out.size()) return ReadyOr<void>(Result<void>{});
    return later(read_rest(out.subspan(buffered), buffered > 0));
  }
  /// Everything up to and including the first `delimiter` (not empty), at most `max_bytes` in
  /// all (kTooLong when that many bytes hold no delimiter).
  ReadyOr<std::string_view> read_until(std::string_view delimiter, size_t max_bytes) {
    begin_call();
    searched_ = 0;
    if (auto found = find_line(delimiter, max_bytes)) {
      return ReadyOr<std::string_view>(std::move(*found));
    }
    return later(fill_until(delimiter, max_bytes));
  }
  /// The payload of the next frame: its length prefix, then that many bytes.
  ReadyOr<Bytes> read_frame(FrameFormat format) {
    begin_call();
    if (auto found = find_frame(format)) return ReadyOr<Bytes>(std::move(*found));
    return later(fill_frame(format));
  }

  /// The bytes read from the stream that no call has returned yet.
  Bytes buffered() const noexcept { return buffer_.readable().subspan(pending_consume_); }
  Stream& stream() noexcept { return stream_; }

  /// read_exact(count) holds the bytes in the reader's buffer up to this many.
  static constexpr size_t kMaxExactBytes = 64 * 1024 * 1024;

 private:
  template <class T>
  ReadyOr<T> later(Task<Result<T>> task) {
    return ReadyOr<T>(std::move(task), stream_.loop(), this, &BufferedReader::cancel_read);
  }
  static void cancel_read(void* self) noexcept {
    auto& reader = *static_cast<BufferedReader*>(self);
    if (reader.cancel_ != nullptr) reader.cancel_(reader.reading_);
  }

  /// The bytes a previous call returned are given up only now: its view lived until here.
  void begin_call() noexcept { buffer_.consume(std::exchange(pending_consume_, 0)); }
  Bytes take(size_t count) noexcept {
    pending_consume_ = count;
    return buffer_.readable().first(count);
  }
  std::error_code end_error() const noexcept {
    return buffer_.readable_bytes() == 0 ? make_error_code(FramingErrc::kEndOfStream)
                                         : make_error_code(FramingErrc::kTruncated);
  }

  std::optional<Result<std::string_view>> find_line(std::string_view delimiter, size_t max_bytes) {
    if (delimiter.empty()) return Result<std::string_view>(Unexpected{std::errc::invalid_argument});
    const std::string_view text = buffer_.view();
    const size_t at = detail::find_delimiter(text.substr(0, max_bytes), delimiter, searched_);
    if (at != std::string_view::npos) {
      pending_consume_ = at + delimiter.size();
      return Result<std::string_view>(text.substr(0, pending_consume_));
    }
    if (text.size() >= max_bytes) {
      return Result<std::string_view>(Unexpected{make_error_code(FramingErrc::kTooLong)});
    }
    // A delimiter may yet start in the last delimiter.size() - 1 bytes.
    searched_ = text.size() >= delimiter.size() ? text.size() - delimiter.size() + 1 : 0;
    return std::nullopt;
  }
  std::optional<Result<Bytes>> find_frame(const FrameFormat& format) {
    const size_t prefix = static_cast<size_t>(format.prefix);
    if (buffer_.readable_bytes() < prefix) return std::nullopt;
    const uint32_t length = detail::decode_length(format.prefix, buffer_.readable());
    if (length > format.max_payload) {
      return Result<Bytes>(Unexpected{make_error_code(FramingErrc::kTooLong)});
    }
    if (buffer_.readable_bytes() < prefix + length) return std::nullopt;
    pending_consume_ = prefix + length;
    return Result<Bytes>(buffer_.readable().subspan(prefix, length));
  }

  /// One read of the stream into the buffer, asking for `wanted` bytes of room at least.
  /// Ok(false): the peer closed.
  Task<Result<bool>> fill(size_t wanted) {
    if (!buffer_.ensure_writable(std::max(wanted, read_size_))) {
      co_return Unexpected{make_error_code(FramingErrc::kTooLong)};
    }
    auto read = stream_.read(buffer_.writable());
    reading_ = &read;
    cancel_ = [](void* op) noexcept { static_cast<decltype(read)*>(op)->cancel(); };
    auto n = co_await read;
    cancel_ = nullptr;
    if (!n) co_return Unexpected{n.error()};
    buffer_.commit(*n);
    co_return *n > 0;
  }
  Task<Result<Bytes>> fill_exact(size_t count) {
    while (buffer_.readable_bytes() < count) {
      auto more = co_await fill(count - buffer_.readable_bytes());
      if (!more) co_return Unexpected{more.error()};
      if (!*more) co_return Unexpected{end_error()};
    }
    co_return take(count);
  }
  Task<Result<void>> read_rest(std::span<std::byte> out, bool started) {
    while (!out.empty()) {
      auto read = stream_.read(out);
      reading_ = &read;
      cancel_ = [](void* op) noexcept { static_cast<decltype(read)*>(op)->cancel(); };
      auto n = co_await read;
      cancel_ = nullptr;
      if (!n) co_return Unexpected{n.error()};
      if (*n == 0) {
        co_return Unexpected{
            make_error_code(started ? FramingErrc::kTruncated : FramingErrc::kEndOfStream)};
      }
      started = true;
      out = out.subspan(*n);
    }
    co_return Result<void>{};
  }
  Task<Result<std::string_view>> fill_until(std::string_view delimiter, size_t max_bytes) {
    for (;;) {
      auto more = co_await fill(1);  // the buffer stays within max_bytes + one read
      if (!more) co_return Unexpected{more.error()};
      if (!*more) co_return Unexpected{end_error()};
      if (auto found = find_line(delimiter, max_bytes)) co_return std::move(*found);
    }
  }
  Task<Result<Bytes>> fill_frame(FrameFormat format) {
    for (;;) {
      const size_t prefix = static_cast<size_t>(format.prefix);
      size_t missing = prefix - std::min(prefix, buffer_.readable_bytes());
      if (missing == 0) {
        missing = prefix + detail::decode_length(format.prefix, buffer_.readable()) -
                  buffer_.readable_bytes();
      }
      auto more = co_await fill(missing);
      if (!more) co_return Unexpected{more.error()};
      if (!*more) co_return Unexpected{end_error()};
      if (auto found = find_frame(format)) co_return std::move(*found);
    }
  }

  Stream& stream_;
  size_t read_size_;
  Buffer buffer_{kMaxExactBytes + 64 * 1024 * 1024, 0};
  size_t pending_consume_ = 0;  // bytes the last call returned: consumed at the next
  size_t searched_ = 0;         // read_until: where the delimiter may start, past what was seen
  void* reading_ = nullptr;     // the stream read in flight, for cancel()
  void (*cancel_)(void*) noexcept = nullptr;
};

/// Sends `payload` as one frame: its length prefix, then its bytes (kTooLong over
/// format.max_payload or the prefix's range, and nothing is sent). On a TcpConnection the
/// prefix is copied into the output queue and the payload sent from the caller's memory, in one
/// send; it returns once the kernel has them.
template <ByteStream Stream>
Task<Result<void>> write_frame(Stream& stream, FrameFormat format,
                               std::span<const std::byte> payload) {
  const uint64_t limit = format.prefix == LengthPrefix::kBig16
                             ? std::min<uint64_t>(format.max_payload, 0xffff)
                             : format.max_payload;
  if (payload.size() > limit) co_return Unexpected{make_error_code(FramingErrc::kTooLong)};
  std::array<std::byte, 4> header;
  const size_t size =
      detail::encode_length(format.prefix, static_cast<uint32_t>(payload.size()), header);
  const std::span<const std::byte> prefix(header.data(), size);
  if constexpr (requires { stream.write(prefix); }) {
    if (auto queued = co_await stream.write(prefix); !queued) co_return queued;
  } else {
    if (auto sent = co_await stream.write_all(prefix); !sent) co_return sent;
  }
  co_return co_await stream.write_all(payload);
}

template <ByteStream Stream>
Task<Result<void>> write_frame(Stream& stream, FrameFormat format, std::string_view payload) {
  return write_frame(stream, format, std::as_bytes(std::span(payload.data(), payload.size())));
}

}  // namespace ucp

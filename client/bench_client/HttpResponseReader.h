#pragma once
// HttpResponseReader: finds where each HTTP/1.1 response on a keep-alive connection ends, as
// bytes arrive in whatever pieces the socket delivers them: the head up to its blank line,
// then a body framed by Content-Length or by chunked transfer coding (chunk extensions and
// trailers skipped). bench_client's --http mode counts a request as answered when its
// response has ended. Interim 1xx responses are skipped; 204 and 304 have no body. Bodies
// are not kept, heads only while they are being read.
//
// One reader per connection, on the connection's loop thread.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace bench {

class HttpResponseReader {
 public:
  /// What one feed() found.
  struct Progress {
    uint64_t responses = 0;       // responses that ended within these bytes
    uint64_t unsuccessful = 0;    // of them, with a status outside 2xx and 3xx
    const char* error = nullptr;  // set: not HTTP the reader can frame (the rest is unread)
  };

  /// Consumes `bytes` (any split of the stream).
  Progress feed(std::span<const char> bytes);
  /// True between responses (nothing of one has arrived yet).
  bool idle() const noexcept { return state_ == State::kHead && line_.empty(); }

  static constexpr size_t kMaxHeadBytes = 64 * 1024;

 private:
  enum class State : uint8_t { kHead, kBody, kChunkSize, kChunkData, kChunkEnd, kTrailer };

  /// Sets up the body of the response whose head is line_; false (and `error`) when the
  /// head cannot be framed.
  bool start_body(Progress& progress);
  void finish(Progress& progress);

  State state_ = State::kHead;
  std::string line_;        // the head being read, or the chunk-size / trailer line
  uint64_t remaining_ = 0;  // body or chunk bytes still to come, or CRLF bytes after a chunk
  int status_ = 0;
};

}  // namespace bench

#include "Protocols.h"

#include <chrono>
#include <string_view>

#include "ucp/http/HttpRequestParser.h"
#include "ucp/net/Buffer.h"

namespace ucp::app {

Task<> echo(TcpConnection& connection) {
  // receive() lends the loop's buffer: an idle connection's frame holds no buffer, and the
  // echo goes out from the very memory the kernel received into.
  for (;;) {
    auto data = co_await connection.receive();
    if (!data || data->empty()) co_return;  // error, timeout or peer closed
    if (!co_await connection.write_all(data->bytes())) co_return;
  }
}

namespace {

constexpr std::string_view kKeepAliveResponse =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";
constexpr std::string_view kCloseResponse =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nConnection: close"
    "\r\n\r\nHello, World!";

std::string_view error_response(http::ParseStatus status) {
  switch (status) {
    case http::ParseStatus::kHeaderTooLarge:
      return "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: "
             "close\r\n\r\n";
    case http::ParseStatus::kBodyTooLarge:
      return "HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    case http::ParseStatus::kNotImplemented:
      return "HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    case http::ParseStatus::kIncomplete:  // the head did not arrive in time
      return "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    default:
      return "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  }
}

// Milliseconds on the loop's clock (never 0, which marks "no partial request").
uint64_t now_ms(TcpConnection& connection) {
  auto since_epoch = connection.loop().now().time_since_epoch();
  return static_cast<uint64_t>(
             std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count()) +
         1;
}

}  // namespace

Task<> http_pingpong(TcpConnection& connection, size_t max_request_bytes) {
  // Requests are parsed straight from the buffer receive() lends; only the unfinished tail
  // of a request waits in `partial`, which holds no memory until that happens. An idle
  // keep-alive connection therefore keeps no buffer at all.
  Buffer partial(max_request_bytes * 2, /*initial_size=*/0);
  // read_timeout_ms restarts with every read, so a head trickling in a byte at a time
  // (slowloris) would never time out: the whole request must arrive within one timeout.
  const uint32_t head_timeout_ms = connection.read_timeout_ms();
  uint64_t request_started_ms = 0;  // 0: no partial request buffered
  for (;;) {
    auto data = co_await connection.receive();
    if (!data || data->empty()) co_return;  // a half-closed peer got every answer already
    std::string_view input(data->chars(), data->size());
    if (partial.readable_bytes() > 0) {               // the rest of a request that began earlier
      if (!partial.append(data->bytes())) co_return;  // cannot make progress
      data->reset();
      input = partial.view();
    }
    // Answer every complete request in the input (pipelining). write() only queues the
    // answer, without suspending: the answers to this read leave together in one send, and
    // the next read overlaps with it. A peer that never reads makes write() wait at
    // max_output_bytes. After close_after, returning is enough: close() sends what is queued.
    bool close_after = false;
    bool answered = false;
    size_t consumed = 0;
    for (;;) {
      http::Request request;
      auto status = http::parse_request(input.substr(consumed), max_request_bytes,
                                        max_request_bytes, request);
      if (status == http::ParseStatus::kIncomplete) break;
      answered = true;
      if (status != http::ParseStatus::kComplete) {
        if (!co_await connection.write(error_response(status))) co_return;
        close_after = true;
        break;
      }
      consumed += request.total_bytes;
      if (!co_await connection.write(request.keep_alive ? kKeepAliveResponse : kCloseResponse)) {
        co_return;
      }
      if (!request.keep_alive) {
        close_after = true;
        break;
      }
    }
    if (close_after) co_return;
    // Keep the unfinished tail (if any) for the next read; the lease goes back now.
    if (partial.readable_bytes() > 0) {
      partial.consume(consumed);
      if (partial.readable_bytes() == 0) partial = Buffer(partial.max_size(), 0);  // free it
    } else if (consumed < input.size()) {
      if (!partial.append(input.substr(consumed))) co_return;
    }
    data->reset();
    if (partial.readable_bytes() == 0) {
      request_started_ms = 0;
    } else if (request_started_ms == 0 || answered) {
      request_started_ms = now_ms(connection);  // a new partial request starts now
    } else if (head_timeout_ms > 0 && now_ms(connection) - request_started_ms > head_timeout_ms) {
      (void)co_await connection.write(error_response(http::ParseStatus::kIncomplete));  // 408
      co_return;
    }
    if (partial.readable_bytes() >= partial.max_size()) co_return;  // cannot make progress
  }
}

}  // namespace ucp::app

#include "Protocols.h"

#include <algorithm>
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
  // Requests are parsed straight from the buffer receive() lends; only an unfinished request
  // is copied, into `partial`, which holds no memory until that happens (an idle keep-alive
  // connection keeps no buffer at all). `partial` holds one request and nothing behind it:
  // the largest the limits allow is a head of max_request_bytes and a body of as much, so it
  // always fits, however many requests arrive with its last bytes.
  Buffer partial(max_request_bytes * 2, /*initial_size=*/0);
  // read_timeout_ms restarts with every read, so a head trickling in a byte at a time
  // (slowloris) would never time out: the whole request must arrive within one timeout.
  const uint32_t head_timeout_ms = connection.read_timeout_ms();
  uint64_t request_started_ms = 0;  // 0: no partial request buffered
  // write() only queues an answer, without suspending: the answers to one read leave together
  // in one send, and the next read overlaps with it. A peer that never reads makes write()
  // wait at max_output_bytes. After the last answer, returning is enough: close() sends what
  // is queued.
  auto answer = [&connection](http::ParseStatus status, const http::Request& request) {
    if (status != http::ParseStatus::kComplete) return connection.write(error_response(status));
    return connection.write(request.keep_alive ? kKeepAliveResponse : kCloseResponse);
  };
  for (;;) {
    auto data = co_await connection.receive();
    if (!data || data->empty()) co_return;  // a half-closed peer got every answer already
    std::string_view input(data->chars(), data->size());
    bool answered = false;
    if (partial.readable_bytes() > 0) {
      // Finish the buffered request first. Copy only what fits behind it (all it can still
      // need), then go on parsing the rest of the input where it lies.
      const size_t buffered = partial.readable_bytes();
      const size_t copied = std::min(input.size(), partial.max_size() - buffered);
      (void)partial.append(input.substr(0, copied));  // fits: partial never passes max_size
      http::Request request;
      auto status =
          http::parse_request(partial.view(), max_request_bytes, max_request_bytes, request);
      if (status == http::ParseStatus::kIncomplete && copied < input.size()) {
        // A full buffer that still holds no whole request cannot be within the limits (the
        // parser reports 431 or 413 first); refuse it rather than stall.
        status = http::ParseStatus::kHeaderTooLarge;
      }
      if (status == http::ParseStatus::kIncomplete) {
        input = {};
      } else {
        answered = true;
        if (!co_await answer(status, request)) co_return;
        if (status != http::ParseStatus::kComplete || !request.keep_alive) co_return;
        // The request ended inside this input (it was unfinished before it): the rest of the
        // input starts right after it.
        input.remove_prefix(request.total_bytes - buffered);
        partial = Buffer(partial.max_size(), 0);  // free it
      }
    }
    // Answer every complete request left in the input (pipelining).
    for (;;) {
      http::Request request;
      auto status = http::parse_request(input, max_request_bytes, max_request_bytes, request);
      if (status == http::ParseStatus::kIncomplete) break;
      answered = true;
      if (!co_await answer(status, request)) co_return;
      if (status != http::ParseStatus::kComplete || !request.keep_alive) co_return;
      input.remove_prefix(request.total_bytes);
    }
    // What is left is the start of one request within the limits (else the parser would
    // have refused it): keep it for the next read. The lease goes back now.
    if (partial.readable_bytes() == 0 && !input.empty()) (void)partial.append(input);
    data->reset();
    if (partial.readable_bytes() == 0) {
      request_started_ms = 0;
    } else if (request_started_ms == 0 || answered) {
      request_started_ms = now_ms(connection);  // a new partial request starts now
    } else if (head_timeout_ms > 0 && now_ms(connection) - request_started_ms > head_timeout_ms) {
      (void)co_await connection.write(error_response(http::ParseStatus::kIncomplete));  // 408
      co_return;
    }
  }
}

}  // namespace ucp::app

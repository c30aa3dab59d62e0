#pragma once
// AccessLog: a middleware that writes one line per request, in a format of your choice, to the
// logger (at a level) or to a function of yours.
//
//   server.use(http::access_log());                       // the default line, at INFO
//
//   auto format = http::AccessLogFormat::parse(http::AccessLogFormat::kCombined);
//   if (!format) { /* format.error().message names the unknown field */ }
//   server.use(http::access_log({.format = *format, .level = LogLevel::kInfo}));
//
// A format is text with `{field}` placeholders (`{{` and `}}` are braces):
//
//   {peer} 192.0.2.7:50312     {peer_ip} 192.0.2.7      {method} GET     {target} /a?b=1
//   {path} /a                  {query} b=1              {protocol} HTTP/1.1
//   {host} the Host            {status} 200             {bytes} body bytes of the response
//   {duration_us} 1234         {duration_ms} 1.234      {user_agent}     {referer}
//   {request_id} req.id() (the request_id() middleware, RequestId.h)
//   {time} 2026-11-26T10:00:00.123Z (UTC)       {time_local} [26/Nov/2026:10:00:00 +0000]
//   {header:NAME} any request header
//
// Values made of request bytes are escaped (control bytes, bytes above 0x7E, '"' and '\' as
// \xHH), so a line is always one line and a quoted field stays quoted; an empty value is "-".
//
// What the figures mean: the middleware measures from when it is called to when the rest of
// the chain has returned: the handler's time, a stream's writes included (install it first,
// so that it runs outermost). {bytes} is the body the response carries (a file's length, a
// stream's bytes written; 0 for HEAD, 304 and 204), not the head.
//
// Cost: while the level is disabled (and no sink is given), one branch per request: no clock
// read. Otherwise two clock reads and the line's formatting into a per-thread buffer.
//
// Thread contract: the middleware runs on every worker thread at once; a sink is called on
// them concurrently.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ucp/base/Result.h"
#include "ucp/http/Middleware.h"
#include "ucp/log/Logger.h"

namespace ucp::http {

class Request;
class Response;

class AccessLogFormat {
 public:
  /// What access_log() writes unless told otherwise.
  static constexpr std::string_view kDefault =
      "{peer} {method} {target} {status} {bytes} {duration_us}us \"{user_agent}\" {request_id}";
  /// The "combined" format of Apache and nginx, which log tools read.
  static constexpr std::string_view kCombined =
      "{peer_ip} - - {time_local} \"{method} {target} {protocol}\" {status} {bytes} "
      "\"{referer}\" \"{user_agent}\"";

  /// kDefault.
  AccessLogFormat();
  /// Error: an unknown field or an unclosed brace; the message names it and lists the fields.
  static Result<AccessLogFormat, Error> parse(std::string_view format);

  /// Appends the line for `request` answered by `response` in `duration` (no newline).
  void append(std::string& out, const Request& request, const Response& response,
              std::chrono::nanoseconds duration) const;

 private:
  enum class Field : uint8_t {
    kLiteral,
    kPeer,
    kPeerIp,
    kMethod,
    kTarget,
    kPath,
    kQuery,
    kProtocol,
    kHost,
    kStatus,
    kBytes,
    kDurationUs,
    kDurationMs,
    kUserAgent,
    kReferer,
    kRequestId,
    kTime,
    kTimeLocal,
    kHeader,
  };
  struct Piece {
    Field field;
    std::string text;  // the literal, or the header's name
  };
  struct Empty {};
  explicit AccessLogFormat(Empty) {}
  std::vector<Piece> pieces_;
};

struct AccessLogOptions {
  AccessLogFormat format{};
  /// The logger's level for the lines (nothing is formatted while it is disabled).
  LogLevel level = LogLevel::kInfo;
  /// Where the lines go instead of the logger, if set: called on the worker threads,
  /// concurrently, with each line (no newline), whatever the log level.
  std::function<void(std::string_view line)> sink{};
};

/// The access log middleware.
Middleware access_log(AccessLogOptions options);
/// The default format at `level`.
Middleware access_log(LogLevel level = LogLevel::kInfo);

/// The bytes of body `response` carries for `request` (what {bytes} logs).
uint64_t response_body_bytes(const Request& request, const Response& response) noexcept;

}  // namespace ucp::http

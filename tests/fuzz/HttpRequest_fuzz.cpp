// libFuzzer harness over the request path without sockets: RequestParser (llhttp strict and
// our checks, limits, the tail copy of requests that arrive in pieces), Router matching,
// response encoding, and the path and date helpers a static-file handler applies to what
// the parser gives it.
//
// Input: byte 0 chooses the limits and how the rest is cut into pieces; the rest is the
// byte stream of one connection. Each piece is fed from a heap buffer of its own that is
// freed right after the parser let go of it (detach_input), so a request view left pointing
// into an earlier piece is a heap-use-after-free under ASan. The same stream is also fed
// whole: both runs must produce the same requests and refuse (or not) alike (differential
// check), except for the chunk-framing flood rule, whose byte count depends on where the
// reads end.
//
//   make fuzz            # FUZZ_SECONDS (default 600) with the seed corpus
//   build/fuzz/bin/http_request_fuzz -dict=tests/fuzz/http.dict tests/fuzz/corpus/http_request

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "ucp/http/HttpDate.h"
#include "ucp/http/Preconditions.h"
#include "ucp/http/Query.h"
#include "ucp/http/Response.h"
#include "ucp/http/Router.h"
#include "ucp/http/Url.h"

#include "RequestParser.h"
#include "ResponseEncoder.h"

namespace {

using namespace ucp::http;
using namespace ucp::http::detail;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "invariant broken: %s\n", what);
  std::abort();
}

Handler nothing() {
  return [](Request&, Response&) -> ucp::Task<> { co_return; };
}

const Router& router() {
  static const Router instance = [] {
    Router r;
    r.get("/", nothing());
    r.get("/users/{id}", nothing());
    r.put("/users/{id}", nothing());
    r.get("/users/{id}/posts/{post}", nothing());
    r.post("/echo", nothing());
    r.get("/static/*", nothing());
    r.get("/*", nothing());
    return r;
  }();
  return instance;
}

/// Everything a request says, copied: the outcome of one run, compared across runs.
std::string summarize(Request& request) {
  std::string text;
  text.append(request.method_name()).append(" ").append(request.target()).append("|");
  text.append(request.path()).append("|").append(request.query()).append("|");
  text.append(request.host()).append("|").append(request.keep_alive() ? "k" : "c");
  for (const Header& h : request.headers())
    text.append(h.name).append(":").append(h.value).append(";");
  text.append("|");
  for (const Header& h : request.trailers())
    text.append(h.name).append(":").append(h.value).append(";");
  text.append("|").append(std::to_string(request.body().size())).append(":");
  text.append(request.body());
  return text;
}

/// What a server does with a parsed request, minus the I/O.
void exercise(Request& request) {
  const Router::Match match = const_cast<Router&>(router()).match(request);
  if (match.handler == nullptr && match.allowed != 0) (void)Router::allow_header(match.allowed);
  (void)request.param("id");
  (void)request.param("*");
  std::string decoded;
  std::string normalized;
  if (percent_decode(request.path(), decoded) && normalize_path(decoded, normalized)) {
    if (normalized.empty() || normalized.front() != '/') fail("normalized path not absolute");
    if (normalized.find("/../") != std::string::npos) fail("dot segment left in normalized path");
  }
  std::time_t t = 0;
  if (parse_http_date(request.header("if-modified-since"), t)) {
    char text[kHttpDateLength];
    format_http_date(t, text);
  }
  // The query and the conditional fields, as the conveniences read them.
  const Query query(request.query());
  size_t decoded_bytes = 0;
  for (const auto [name, value] : query) decoded_bytes += name.size() + value.size();
  if (decoded_bytes > request.query().size()) fail("a decoded query grew");
  const Validators validators{.etag = "\"5f-10\"", .last_modified = 1'700'000'000};
  const int precondition = evaluate_preconditions(request, validators);
  if (precondition != 0 && precondition != 304 && precondition != 412) fail("odd precondition");
  ByteRange range;
  const uint64_t size = request.body().size();
  if (evaluate_range(request, validators, size, range) == RangeDecision::kPartial &&
      (range.length == 0 || range.offset + range.length > size)) {
    fail("a range outside the representation");
  }
  Response response;
  response.set_status(200 + static_cast<int>(request.body().size() % 400));
  // Validated by the parser: no CR, LF or NUL in either (add_header refuses them).
  if (!response.add_header("X-Method", request.method_name()) ||
      !response.add_header("X-Host", request.host())) {
    fail("parser let CR/LF/NUL into a method or a Host");
  }
  response.set_body(request.body());
  OutBuffer out;
  encode_head({.status = response.status(),
               .headers = response.headers(),
               .framing = Framing::kLength,
               .content_length = request.body().size(),
               .keep_alive = request.keep_alive(),
               .version_minor = request.version_minor(),
               .server_name = "ucp",
               .date = "Thu, 01 Jan 1970 00:00:00 GMT"},
              out);
  const std::string_view head = out.view();
  if (head.size() < 4 || head.substr(head.size() - 4) != "\r\n\r\n") fail("head not terminated");
}

struct Run {
  std::vector<std::string> requests;
  int error = 0;
  bool framing_rule = false;  // the error came from the chunk-framing flood rule
};

Run parse(const uint8_t* data, size_t size, const std::vector<size_t>& cuts,
          const ParserLimits& limits) {
  Run run;
  RequestParser parser(limits);
  size_t begin = 0;
  for (size_t cut : cuts) {
    const size_t length = cut - begin;
    auto piece = std::make_unique<char[]>(length == 0 ? 1 : length);
    std::memcpy(piece.get(), data + begin, length);
    begin = cut;
    std::string_view input(piece.get(), length);
    bool stop = false;
    while (!stop) {
      const auto event = parser.feed(input);
      if (event == RequestParser::Event::kNeedMore) break;
      if (event == RequestParser::Event::kError) {
        run.error = parser.error_status();
        run.framing_rule = parser.error_reason().find("framing") != std::string_view::npos;
        if (run.error < 400 || run.error > 599) fail("error status outside 4xx/5xx");
        return run;
      }
      Request& request = parser.request();
      run.requests.push_back(summarize(request));
      exercise(request);
      if (!request.keep_alive()) stop = true;  // the server closes after this one
      parser.next();
    }
    if (stop) return run;
    if (!parser.detach_input()) fail("detach_input failed");
    const size_t bound = limits.max_request_line_bytes + 2 * size_t{limits.max_header_bytes} +
                         2 * limits.max_body_bytes + 1024;
    if (parser.held_bytes() > bound) fail("held bytes beyond the limits");
    // `piece` is freed here: nothing may point into it any more.
  }
  (void)size;
  return run;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  ++data;
  --size;
  ParserLimits limits;
  if ((mode & 1) != 0) {  // small limits, so that the fuzzer reaches 413/414/431 cheaply
    limits.max_request_line_bytes = 64;
    limits.max_header_bytes = 256;
    limits.max_body_bytes = 128;
  }
  // Cut points from a small generator seeded by `mode`: pieces of 1 to 64 bytes, or
  // (mode & 2) single bytes.
  std::vector<size_t> cuts;
  uint32_t state = mode * 2654435761u + 1;
  for (size_t at = 0; at < size;) {
    state = state * 1103515245u + 12345u;
    const size_t step = (mode & 2) != 0 ? 1 : 1 + (state >> 16) % 64;
    at = at + step < size ? at + step : size;
    cuts.push_back(at);
  }
  const Run whole = parse(data, size, {size}, limits);
  const Run pieces = parse(data, size, cuts, limits);
  if (!whole.framing_rule && !pieces.framing_rule) {
    // Which limit or syntax rule trips first may depend on where reads end (a target that is
    // both too long and malformed: 414 or 400), but never whether a request is refused.
    if (whole.requests != pieces.requests) fail("split input gave other requests");
    if ((whole.error == 0) != (pieces.error == 0)) fail("split input changed acceptance");
  }
  return 0;
}

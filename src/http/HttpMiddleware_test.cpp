// The library's middleware over real loopback connections: response compression (negotiated
// by q-values, skipped where it must be, inflated back by zlib here) and CORS (preflights,
// allowed and refused origins, credentials, Vary).

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <zlib.h>

#include "ucp/http/Compression.h"
#include "ucp/http/Cors.h"
#include "ucp/http/HttpServer.h"

#include "HttpTestServer.h"

namespace ucp::http {
namespace {

using test::ask;
using test::ask_once;
using test::HttpTestServer;

/// `data` inflated: windowBits 15 + 32 reads both the gzip and the zlib format.
std::string inflate(const std::string& data, bool gzip) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, gzip ? 15 + 16 : 15), Z_OK);
  std::string out(1 << 20, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(out.size() - z.avail_out);
  inflateEnd(&z);
  return out;
}

std::string page() {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "<p>line " + std::to_string(i) + " of a page</p>\n";
  return text;
}

void compressed_routes(HttpServer& server) {
  server.use(compression({.min_bytes = 256, .level = 6, .extra_types = {"application/x-log"}}));
  auto& r = server.router();
  r.get("/page", [](Request&, Response& res) -> Task<> {
    res.add_header("ETag", "\"v1\"");
    co_return res.html(page());
  });
  r.get("/small", [](Request&, Response& res) -> Task<> { co_return res.text("tiny"); });
  r.get("/png",
        [](Request&, Response& res) -> Task<> { co_return res.content(page(), "image/png"); });
  r.get("/log", [](Request&, Response& res) -> Task<> {
    co_return res.content(page(), "application/x-log");
  });
  r.get("/problem", [](Request&, Response& res) -> Task<> {
    co_return res.content("{\"detail\":\"" + std::string(400, 'a') + "\"}",
                          "application/problem+json", 422);
  });
  r.get("/secret", [](Request&, Response& res) -> Task<> {
    res.add_header("Cache-Control", "private, no-transform");
    co_return res.html(page());
  });
  r.get("/encoded", [](Request&, Response& res) -> Task<> {
    res.add_header("Content-Encoding", "br");
    co_return res.content(page(), "text/plain");
  });
  r.get("/random", [](Request&, Response& res) -> Task<> {
    std::string noise(4096, '\0');
    uint32_t x = 12345;
    for (char& c : noise) {
      x = x * 1103515245 + 12345;
      c = static_cast<char>(x >> 24);
    }
    co_return res.content(std::move(noise), "text/plain");
  });
  r.get("/stream", [](Request&, Response& res) -> Task<> {
    res.set_content_type("text/plain");
    (void)co_await res.write(page());
  });
}

TEST(Compression, GzipOrDeflateByQValues) {
  HttpTestServer s(compressed_routes);
  const std::string expected = page();
  auto gz =
      ask_once(s.port(), "GET /page HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip, deflate\r\n\r\n");
  EXPECT_EQ(gz.header("content-encoding"), "gzip");
  EXPECT_EQ(gz.header("vary"), "Accept-Encoding");
  EXPECT_EQ(gz.header("etag"), "W/\"v1\"");  // another representation: weak
  EXPECT_LT(gz.body.size(), expected.size() / 3);
  EXPECT_EQ(gz.header("content-length"), std::to_string(gz.body.size()));
  EXPECT_EQ(inflate(gz.body, true), expected);
  // deflate preferred by q, "*" standing in, gzip refused with q=0.
  auto df = ask_once(
      s.port(), "GET /page HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip;q=0.5, deflate\r\n\r\n");
  EXPECT_EQ(df.header("content-encoding"), "deflate");
  EXPECT_EQ(inflate(df.body, false), expected);
  auto star =
      ask_once(s.port(), "GET /page HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip;q=0, *\r\n\r\n");
  EXPECT_EQ(star.header("content-encoding"), "deflate");
  for (const char* refused : {"identity", "gzip;q=0, deflate;q=0", "br", "*;q=0", ""}) {
    auto plain = ask_once(
        s.port(),
        std::string("GET /page HTTP/1.1\r\nHost: a\r\n") +
            (*refused ? std::string("Accept-Encoding: ") + refused + "\r\n" : std::string()) +
            "\r\n");
    EXPECT_FALSE(plain.has_header("content-encoding")) << refused;
    EXPECT_EQ(plain.header("vary"), "Accept-Encoding") << refused;  // it could have been
    EXPECT_EQ(plain.header("etag"), "\"v1\"");
    EXPECT_EQ(plain.body, expected);
  }
  // HEAD: the same head as GET, the compressed length included.
  auto head =
      ask_once(s.port(), "HEAD /page HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip\r\n\r\n", true);
  EXPECT_EQ(head.header("content-encoding"), "gzip");
  EXPECT_EQ(head.header("content-length"), gz.header("content-length"));
}

TEST(Compression, SkipsWhatMustNotOrNeedNotBeCompressed) {
  HttpTestServer s(compressed_routes);
  const std::string accept = "Host: a\r\nAccept-Encoding: gzip\r\n\r\n";
  auto small = ask_once(s.port(), "GET /small HTTP/1.1\r\n" + accept);
  EXPECT_FALSE(small.has_header("content-encoding"));
  EXPECT_FALSE(small.has_header("vary"));  // never a candidate
  auto png = ask_once(s.port(), "GET /png HTTP/1.1\r\n" + accept);
  EXPECT_FALSE(png.has_header("content-encoding"));
  auto secret = ask_once(s.port(), "GET /secret HTTP/1.1\r\n" + accept);
  EXPECT_FALSE(secret.has_header("content-encoding"));  // no-transform: the BREACH opt-out
  auto encoded = ask_once(s.port(), "GET /encoded HTTP/1.1\r\n" + accept);
  EXPECT_EQ(encoded.header("content-encoding"), "br");  // already encoded: left alone
  EXPECT_EQ(encoded.body, page());
  auto random = ask_once(s.port(), "GET /random HTTP/1.1\r\n" + accept);
  EXPECT_FALSE(random.has_header("content-encoding"));  // would not shrink
  EXPECT_EQ(random.body.size(), 4096u);
  auto stream = ask_once(s.port(), "GET /stream HTTP/1.1\r\n" + accept);
  EXPECT_FALSE(stream.has_header("content-encoding"));  // streams go as written
  EXPECT_EQ(stream.body, page());
  auto extra = ask_once(s.port(), "GET /log HTTP/1.1\r\n" + accept);
  EXPECT_EQ(extra.header("content-encoding"), "gzip");  // extra_types
  auto problem = ask_once(s.port(), "GET /problem HTTP/1.1\r\n" + accept);
  EXPECT_EQ(problem.status, 422);
  EXPECT_EQ(problem.header("content-encoding"), "gzip");  // a +json type, any status
  auto missing = ask_once(s.port(), "GET /nope HTTP/1.1\r\n" + accept);
  EXPECT_EQ(missing.status, 404);
  EXPECT_FALSE(missing.has_header("content-encoding"));
}

TEST(Compression, ChoosesByTheRules) {
  EXPECT_EQ(choose_coding("gzip"), ContentCoding::kGzip);
  EXPECT_EQ(choose_coding("x-gzip"), ContentCoding::kGzip);
  EXPECT_EQ(choose_coding("deflate, gzip"), ContentCoding::kGzip);  // a tie: gzip
  EXPECT_EQ(choose_coding("deflate;q=1, gzip;q=0.999"), ContentCoding::kDeflate);
  EXPECT_EQ(choose_coding("GZIP;Q=0.5"), ContentCoding::kGzip);
  EXPECT_EQ(choose_coding("gzip;q=2"), ContentCoding::kIdentity);  // malformed q: 0
  EXPECT_EQ(choose_coding("gzip;q=0.0001"), ContentCoding::kIdentity);
  EXPECT_EQ(choose_coding(" , gzip ; q=0.3 ,"), ContentCoding::kGzip);
  EXPECT_EQ(choose_coding("*"), ContentCoding::kGzip);
  EXPECT_EQ(choose_coding("*", false, true), ContentCoding::kDeflate);
  EXPECT_EQ(choose_coding("gzip", false, true), ContentCoding::kIdentity);
  EXPECT_EQ(choose_coding(""), ContentCoding::kIdentity);
  EXPECT_TRUE(compressible_type("text/css; charset=utf-8"));
  EXPECT_TRUE(compressible_type("Application/JSON"));
  EXPECT_TRUE(compressible_type("application/vnd.api+json"));
  EXPECT_FALSE(compressible_type("image/jpeg"));
  EXPECT_FALSE(compressible_type("application/octet-stream"));
  EXPECT_FALSE(compressible_type(""));
}

void cors_routes(HttpServer& server, CorsOptions options) {
  server.use(cors(std::move(options)));
  server.router().get("/data", [](Request&, Response& res) -> Task<> {
    res.add_header("X-Total", "3");
    co_return res.text("data");
  });
  server.router().post("/data",
                       [](Request&, Response& res) -> Task<> { co_return res.text("posted"); });
}

std::string preflight(std::string_view origin, std::string_view method,
                      std::string_view headers = {}) {
  std::string request = "OPTIONS /data HTTP/1.1\r\nHost: api\r\nOrigin: " + std::string(origin) +
                        "\r\nAccess-Control-Request-Method: " + std::string(method) + "\r\n";
  if (!headers.empty()) {
    request += "Access-Control-Request-Headers: " + std::string(headers) + "\r\n";
  }
  return request + "\r\n";
}

TEST(Cors, PreflightsAreAnsweredOrRefused) {
  HttpTestServer s([](HttpServer& server) {
    cors_routes(server, {.allowed_origins = {"https://app.example.com", "https://*.example.org"},
                         .allowed_headers = {"Content-Type", "X-Token"},
                         .exposed_headers = {"X-Total"},
                         .allow_credentials = true,
                         .max_age_seconds = 300});
  });
  auto ok =
      ask_once(s.port(), preflight("https://app.example.com", "POST", "content-type,x-token"));
  EXPECT_EQ(ok.status, 204);
  EXPECT_EQ(ok.header("access-control-allow-origin"), "https://app.example.com");
  EXPECT_EQ(ok.header("access-control-allow-credentials"), "true");
  EXPECT_EQ(ok.header("access-control-allow-methods"), "GET, HEAD, POST, PUT, PATCH, DELETE");
  EXPECT_EQ(ok.header("access-control-allow-headers"), "Content-Type, X-Token");
  EXPECT_EQ(ok.header("access-control-max-age"), "300");
  EXPECT_EQ(ok.header("vary"),
            "Origin, Access-Control-Request-Method, Access-Control-Request-Headers");
  // A subdomain of the wildcard, any depth; not the domain itself, not another scheme.
  EXPECT_EQ(ask_once(s.port(), preflight("https://a.b.example.org", "GET")).status, 204);
  for (const char* origin : {"https://example.org", "http://a.example.org", "https://evil.com",
                             "https://app.example.com.evil.com", "null"}) {
    auto refused = ask_once(s.port(), preflight(origin, "GET"));
    EXPECT_EQ(refused.status, 403) << origin;
    EXPECT_EQ(refused.body, "CORS: origin not allowed\n") << origin;
    EXPECT_FALSE(refused.has_header("access-control-allow-origin")) << origin;
  }
  auto method = ask_once(s.port(), preflight("https://app.example.com", "TRACE"));
  EXPECT_EQ(method.status, 403);
  EXPECT_EQ(method.body, "CORS: method not allowed\n");
  auto header = ask_once(s.port(), preflight("https://app.example.com", "GET", "x-token, x-other"));
  EXPECT_EQ(header.status, 403);
  EXPECT_EQ(header.body, "CORS: request header not allowed\n");
}

TEST(Cors, ActualRequestsCarryTheGrantsOnlyForAllowedOrigins) {
  HttpTestServer s([](HttpServer& server) {
    cors_routes(server, {.allowed_origins = {"https://app.example.com"},
                         .exposed_headers = {"X-Total"},
                         .allow_credentials = true});
  });
  auto allowed = ask_once(
      s.port(), "GET /data HTTP/1.1\r\nHost: api\r\nOrigin: https://APP.example.com\r\n\r\n");
  EXPECT_EQ(allowed.body, "data");
  EXPECT_EQ(allowed.header("access-control-allow-origin"), "https://APP.example.com");
  EXPECT_EQ(allowed.header("access-control-allow-credentials"), "true");
  EXPECT_EQ(allowed.header("access-control-expose-headers"), "X-Total");
  EXPECT_EQ(allowed.header("vary"), "Origin");
  auto other =
      ask_once(s.port(), "GET /data HTTP/1.1\r\nHost: api\r\nOrigin: https://evil.com\r\n\r\n");
  EXPECT_EQ(other.body, "data");  // handled: the browser is the one that keeps it from the page
  EXPECT_FALSE(other.has_header("access-control-allow-origin"));
  EXPECT_EQ(other.header("vary"), "Origin");
  auto same_origin = ask_once(s.port(), "GET /data HTTP/1.1\r\nHost: api\r\n\r\n");
  EXPECT_FALSE(same_origin.has_header("access-control-allow-origin"));
  EXPECT_FALSE(same_origin.has_header("vary"));
  // A plain OPTIONS (no Access-Control-Request-Method) is no preflight: the router answers.
  auto options = ask_once(
      s.port(), "OPTIONS /data HTTP/1.1\r\nHost: api\r\nOrigin: https://app.example.com\r\n\r\n");
  EXPECT_EQ(options.status, 405);
}

TEST(Cors, AnyOriginWithAndWithoutCredentials) {
  HttpTestServer open([](HttpServer& server) {
    cors_routes(server, {.allowed_origins = {"*"}, .allowed_headers = {"*"}});
  });
  auto any =
      ask_once(open.port(), "GET /data HTTP/1.1\r\nHost: api\r\nOrigin: https://x.test\r\n\r\n");
  EXPECT_EQ(any.header("access-control-allow-origin"), "*");
  EXPECT_FALSE(any.has_header("vary"));  // the same answer for every origin
  auto pre = ask_once(open.port(), preflight("https://x.test", "PUT", "x-anything"));
  EXPECT_EQ(pre.status, 204);
  EXPECT_EQ(pre.header("access-control-allow-headers"), "x-anything");
  EXPECT_EQ(ask_once(open.port(), preflight("null", "GET")).status, 403);  // only if listed

  HttpTestServer credentialed([](HttpServer& server) {
    cors_routes(server, {.allowed_origins = {"*"}, .allow_credentials = true});
  });
  auto echoed = ask_once(credentialed.port(),
                         "GET /data HTTP/1.1\r\nHost: api\r\nOrigin: https://x.test\r\n\r\n");
  EXPECT_EQ(echoed.header("access-control-allow-origin"), "https://x.test");  // never "*"
  EXPECT_EQ(echoed.header("vary"), "Origin");
}

TEST(Cors, OriginRules) {
  const std::vector<std::string> allowed = {"https://a.test", "https://*.b.test", "null"};
  EXPECT_TRUE(cors_origin_allowed(allowed, "https://a.test"));
  EXPECT_TRUE(cors_origin_allowed(allowed, "HTTPS://A.TEST"));
  EXPECT_FALSE(cors_origin_allowed(allowed, "https://a.test:8443"));
  EXPECT_TRUE(cors_origin_allowed(allowed, "https://x.b.test"));
  EXPECT_FALSE(cors_origin_allowed(allowed, "https://x.b.test:8443"));
  EXPECT_FALSE(cors_origin_allowed(allowed, "https://.b.test"));
  EXPECT_FALSE(cors_origin_allowed(allowed, "https://x@y.b.test"));
  EXPECT_TRUE(cors_origin_allowed(allowed, "null"));
  EXPECT_FALSE(cors_origin_allowed(allowed, ""));
}

}  // namespace
}  // namespace ucp::http

// bin/http_server end to end: static files (MIME types, validators, 304, Range, directory
// index, traversal and symlink escapes), POST /echo, /healthz, /metrics, limits, timeouts,
// exit codes and signals. curl is the client where a real client fits (Range, 304,
// 100-continue); raw sockets elsewhere. Every test starts its own server on a free port.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "Command.h"
#include "HttpClient.h"
#include "LoopbackClient.h"
#include "Promtool.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

/// A scratch document root with a few files, removed at the end.
class DocumentRoot {
 public:
  DocumentRoot() {
    char name[] = "/tmp/ucp-www-XXXXXX";
    dir_ = ::mkdtemp(name);
    write("outside-secret", "secret");  // next to the root, not in it
    write("root/index.html", "<h1>index</h1>\n");
    write("root/style.css", "body { color: red }\n");
    write("root/data.unknownext", "raw");
    write("root/sub/page.txt", "a page\n");
    fs::create_directories(dir_ + "/root/empty");
    std::string big(2 * 1024 * 1024 + 333, '\0');
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 % 251);
    write("root/big.bin", big);
    fs::create_symlink(dir_ + "/outside-secret", dir_ + "/root/escape-absolute");
    fs::create_symlink("../outside-secret", dir_ + "/root/escape-relative");
    fs::create_symlink("sub/page.txt", dir_ + "/root/inside-link");
  }
  ~DocumentRoot() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  std::string root() const { return dir_ + "/root"; }
  std::string big() const {
    std::ifstream in(dir_ + "/root/big.bin", std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

 private:
  void write(const std::string& relative, const std::string& text) {
    fs::create_directories(fs::path(dir_ + "/" + relative).parent_path());
    std::ofstream(dir_ + "/" + relative, std::ios::binary) << text;
  }
  std::string dir_;
};

ServerProcess::Options http_server(const DocumentRoot& www, std::vector<std::string> more = {}) {
  ServerProcess::Options options;
  options.binary = UCP_BIN_DIR "/http_server";
  options.overrides = {"http.root=" + www.root(), "server.thread_num=2"};
  for (auto& o : more) options.overrides.push_back(std::move(o));
  return options;
}

std::string url(const ServerProcess& server, const std::string& path) {
  return "http://127.0.0.1:" + std::to_string(server.port()) + path;
}

/// GET (or any request) on a fresh connection, raw.
HttpReply get(const ServerProcess& server, const std::string& path,
              const std::string& extra_headers = "", bool head = false) {
  const std::string request = std::string(head ? "HEAD " : "GET ") + path +
                              " HTTP/1.1\r\nHost: t\r\n" + extra_headers + "\r\n";
  auto reply = http_exchange(server.port(), request, 10000, head);
  EXPECT_TRUE(reply) << path << ": " << reply.error().message();
  return reply ? *reply : HttpReply{};
}

/// A string literal with the NUL bytes inside it (std::string(const char*) would stop there).
template <size_t N>
std::string with_nul(const char (&text)[N]) {
  return std::string(text, N - 1);
}

#define UCP_NEED_CURL() \
  if (!have_program("curl")) GTEST_SKIP() << "curl not installed (make test installs it)"

class HttpServerBinary : public ::testing::Test {
 protected:
  void SetUp() override { ::signal(SIGPIPE, SIG_IGN); }
  DocumentRoot www_;
};

TEST_F(HttpServerBinary, ServesFilesWithTypesAndValidators) {
  ServerProcess server(http_server(www_));
  UCP_START_SERVER(server);
  auto index = get(server, "/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.body, "<h1>index</h1>\n");
  EXPECT_EQ(index.header("content-type"), "text/html");
  EXPECT_FALSE(index.header("etag").empty());
  EXPECT_FALSE(index.header("last-modified").empty());
  EXPECT_EQ(index.header("server"), "ucp");
  EXPECT_FALSE(index.header("date").empty());
  EXPECT_EQ(get(server, "/style.css").header("content-type"), "text/css");
  EXPECT_EQ(get(server, "/data.unknownext").header("content-type"), "application/octet-stream");
  EXPECT_EQ(get(server, "/sub/page.txt").body, "a page\n");
  auto head = get(server, "/style.css", "", true);
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("content-length"), "20");
  EXPECT_TRUE(head.body.empty());
  auto big = get(server, "/big.bin");
  EXPECT_EQ(big.body.size(), www_.big().size());
  EXPECT_TRUE(big.body == www_.big()) << "2 MiB file corrupted";
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// Files are kept for a second per worker (small ones with their bytes, larger ones open): a
// file replaced on disk is served new shortly after, never a mix of old metadata and new bytes.
TEST_F(HttpServerBinary, ServesAChangedFileSoonAfter) {
  ServerProcess server(http_server(www_, {"server.thread_num=1"}));
  UCP_START_SERVER(server);
  EXPECT_EQ(get(server, "/sub/page.txt").body, "a page\n");
  {
    std::ofstream out(www_.root() + "/sub/page.txt.new", std::ios::binary);
    out << "a longer, rewritten page\n";
  }
  fs::rename(www_.root() + "/sub/page.txt.new", www_.root() + "/sub/page.txt");
  std::string body;
  for (int i = 0; i < 100 && body != "a longer, rewritten page\n"; ++i) {
    auto reply = get(server, "/sub/page.txt");
    ASSERT_EQ(reply.status, 200);
    body = reply.body;
    ASSERT_TRUE(body == "a page\n" || body == "a longer, rewritten page\n") << body;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(body, "a longer, rewritten page\n");
  fs::remove(www_.root() + "/sub/page.txt");
  int status = 200;
  for (int i = 0; i < 100 && status == 200; ++i) {
    status = get(server, "/sub/page.txt").status;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(status, 404);
  EXPECT_TRUE(server.stop(SIGTERM).clean());
}

// A small file's bytes are kept with its validators: rewritten in place (same inode, new size),
// each answer is the old bytes with the old ETag and length or the new with the new, never
// one file's bytes under the other's headers.
TEST_F(HttpServerBinary, AnswersAFileRewrittenInPlaceConsistently) {
  ServerProcess server(http_server(www_, {"server.thread_num=1"}));
  UCP_START_SERVER(server);
  const std::string old_body = "a page\n";
  const std::string new_body = "a page rewritten in place, longer\n";
  auto first = get(server, "/sub/page.txt");
  ASSERT_EQ(first.body, old_body);
  const std::string old_tag = first.header("etag");
  {
    std::ofstream out(www_.root() + "/sub/page.txt", std::ios::binary | std::ios::trunc);
    out << new_body;
  }
  std::string body;
  for (int i = 0; i < 100 && body != new_body; ++i) {
    auto reply = get(server, "/sub/page.txt");
    ASSERT_EQ(reply.status, 200);
    body = reply.body;
    ASSERT_EQ(reply.header("content-length"), std::to_string(body.size()));
    if (body == old_body) {
      EXPECT_EQ(reply.header("etag"), old_tag);
    } else {
      ASSERT_EQ(body, new_body);
      EXPECT_NE(reply.header("etag"), old_tag);
    }
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(body, new_body);
  EXPECT_TRUE(server.stop(SIGTERM).clean());
}

TEST_F(HttpServerBinary, AnswersDirectoriesWithIndexRedirectOr404) {
  ServerProcess server(http_server(www_));
  UCP_START_SERVER(server);
  auto redirect = get(server, "/sub?x=1");
  EXPECT_EQ(redirect.status, 301);
  EXPECT_EQ(redirect.header("location"), "/sub/?x=1");
  EXPECT_EQ(get(server, "/sub/").status, 404);  // no index.html there
  EXPECT_EQ(get(server, "/empty/").status, 404);
  EXPECT_EQ(get(server, "/missing.html").status, 404);
  EXPECT_TRUE(server.stop(SIGTERM).clean());
}

TEST_F(HttpServerBinary, RefusesEveryEscapeFromTheRoot) {
  ServerProcess server(http_server(www_));
  UCP_START_SERVER(server);
  for (const char* path : {"/../outside-secret", "/%2e%2e/outside-secret",
                           "/sub/%2E%2E/%2e%2e/outside-secret", "/sub/..%2f..%2foutside-secret",
                           "/escape-absolute", "/escape-relative", "/%2e%2e%2foutside-secret"}) {
    auto reply = get(server, path);
    EXPECT_TRUE(reply.status == 403 || reply.status == 404) << path << ": " << reply.status;
    EXPECT_EQ(reply.body.find("secret"), std::string::npos) << path;
  }
  EXPECT_EQ(get(server, "/%252e%252e/outside-secret").status, 404);  // decoded once only
  EXPECT_EQ(get(server, "/inside-link").body, "a page\n");  // a symlink within the root is fine
  EXPECT_EQ(get(server, "/sub/../style.css").status, 200);  // dot segments inside the root
  EXPECT_TRUE(server.stop(SIGTERM).clean());
}

TEST_F(HttpServerBinary, AnswersConditionalAndRangeRequestsToCurl) {
  UCP_NEED_CURL();
  ServerProcess server(http_server(www_));
  UCP_START_SERVER(server);
  const std::string etag = get(server, "/style.css").header("etag");
  ASSERT_FALSE(etag.empty());
  auto code = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {"curl", "-s",           "-o",         "/dev/null",
                                     "-w",   "%{http_code}", "--max-time", "10"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv, 15000).output;
  };
  EXPECT_EQ(code({"-H", "If-None-Match: " + etag, url(server, "/style.css")}), "304");
  EXPECT_EQ(code({"-H", "If-None-Match: \"other\", W/" + etag, url(server, "/style.css")}), "304");
  EXPECT_EQ(code({"-H", "If-None-Match: \"other\"", url(server, "/style.css")}), "200");
  EXPECT_EQ(code({"-z", "Fri, 01 Jan 2100 00:00:00 GMT", url(server, "/style.css")}), "304");
  EXPECT_EQ(code({"-z", "Thu, 01 Jan 1970 00:00:00 GMT", url(server, "/style.css")}), "200");
  // Range: curl -r, the body and Content-Range checked.
  auto range = run_command(
      {"curl", "-s", "-i", "--max-time", "10", "-r", "5-9", url(server, "/style.css")}, 15000);
  EXPECT_NE(range.output.find("HTTP/1.1 206"), std::string::npos) << range.output;
  EXPECT_NE(range.output.find("Content-Range: bytes 5-9/20"), std::string::npos) << range.output;
  EXPECT_EQ(range.output.substr(range.output.size() - 5), "{ col");
  auto suffix =
      run_command({"curl", "-s", "--max-time", "10", "-r", "-6", url(server, "/style.css")}, 15000);
  EXPECT_EQ(suffix.output, "red }\n");
  auto big_tail = run_command(
      {"curl", "-s", "--max-time", "10", "-r", "2097152-", url(server, "/big.bin")}, 15000);
  EXPECT_TRUE(big_tail.output == www_.big().substr(2097152));
  auto unsatisfiable = run_command(
      {"curl", "-s", "-i", "--max-time", "10", "-r", "100-200", url(server, "/style.css")}, 15000);
  EXPECT_NE(unsatisfiable.output.find("HTTP/1.1 416"), std::string::npos);
  EXPECT_NE(unsatisfiable.output.find("Content-Range: bytes */20"), std::string::npos);
  // Several ranges: the whole file (allowed by RFC 9110); an outdated If-Range too.
  EXPECT_EQ(code({"-r", "0-1,3-4", url(server, "/style.css")}), "200");
  EXPECT_EQ(code({"-r", "0-1", "-H", "If-Range: \"stale\"", url(server, "/style.css")}), "200");
  EXPECT_EQ(code({"-r", "0-1", "-H", "If-Range: " + etag, url(server, "/style.css")}), "206");
  EXPECT_TRUE(server.stop(SIGTERM).clean());
}

TEST_F(HttpServerBinary, EchoesPostsIncludingAfter100Continue) {
  UCP_NEED_CURL();
  ServerProcess server(http_server(www_));
  UCP_START_SERVER(server);
  auto echo =
      http_exchange(server.port(),
                    "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-thing\r\n"
                    "Content-Length: 5\r\n\r\nhello");
  ASSERT_TRUE(echo);
  EXPECT_EQ(echo->status, 200);
  EXPECT_EQ(echo->body, "hello");
  EXPECT_EQ(echo->header("content-type"), "application/x-thing");
  const std::string body(3000, 'q');
  auto curl =
      run_command({"curl", "-s", "-v", "--max-time", "10", "-H", "Expect: 100-continue", "-H",
                   "Content-Type: text/x-curl", "--data-binary", body, url(server, "/echo")},
                  15000);
  EXPECT_EQ(curl.exit_code, 0) << curl.output;
  EXPECT_NE(curl.output.find("< HTTP/1.1 100 Continue"), std::string::npos) << curl.output;
  EXPECT_NE(curl.output.find("< HTTP/1.1 200 OK"), std::string::npos);
  EXPECT_NE(curl.output.find("< Content-Type: text/x-curl"), std::string::npos);
  EXPECT_NE(curl.output.find(body), std::string::npos);
  // Chunked upload (curl sends Transfer-Encoding: chunked when told to).
  auto chunked = run_command({"curl", "-s", "--max-time", "10", "-H", "Transfer-Encoding: chunked",
                              "--data-binary", "chunky", url(server, "/echo")},
                             15000);
  EXPECT_EQ(chunked.output, "chunky");
  EXPECT_TRUE(server.stop(SIGTERM).clean());
}

TEST_F(HttpServerBinary, ReportsHealthAndPerWorkerMetrics) {
  ServerProcess server(http_server(www_));
  UCP_START_SERVER(server);
  auto health = get(server, "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok");
  get(server, "/missing");
  auto metrics = get(server, "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.header("content-type").rfind("text/plain; version=0.0.4", 0), 0u);
  for (const char* series :
       {"# TYPE ucp_connections_open gauge", "ucp_connections_open{worker=\"0\"}",
        "ucp_connections_open{worker=\"1\"}", "# TYPE ucp_connections_accepted_total counter",
        "ucp_connections_accepted_total{worker=\"0\"}",
        "ucp_http_requests_total{worker=\"0\",class=\"2xx\"}",
        "ucp_http_requests_total{worker=\"1\",class=\"4xx\"}",
        "ucp_http_requests_total{worker=\"0\",class=\"3xx\"}",
        "ucp_http_requests_total{worker=\"0\",class=\"5xx\"}",
        "ucp_bytes_received_total{worker=\"0\"}", "ucp_bytes_sent_total{worker=\"1\"}"}) {
    EXPECT_NE(metrics.body.find(series), std::string::npos) << series << "\n" << metrics.body;
  }
  // Sum over workers: 1 (healthz) + 0 (this one is not counted yet) 2xx, 1 4xx.
  auto sum = [&](const std::string& prefix) {
    uint64_t total = 0;
    for (size_t at = metrics.body.find(prefix); at != std::string::npos;
         at = metrics.body.find(prefix, at + 1)) {
      const size_t space = metrics.body.find(' ', at);
      total += std::strtoull(metrics.body.c_str() + space + 1, nullptr, 10);
    }
    return total;
  };
  EXPECT_EQ(sum("ucp_http_requests_total{worker=\"0\",class=\"4xx\"}") +
                sum("ucp_http_requests_total{worker=\"1\",class=\"4xx\"}"),
            1u);
  EXPECT_GE(sum("ucp_connections_accepted_total{"), 3u);
  // And what a production scrape expects besides: durations by route and code, the loops',
  // the WebSocket echo's, the process's, the build's; promtool accepts all of it.
  for (const char* series :
       {"ucp_http_request_duration_seconds_count{route=\"/healthz\",method=\"GET\",code=\"200\"} "
        "1\n",
        "ucp_http_request_duration_seconds_count{route=\"/*\",method=\"GET\",code=\"404\"} 1\n",
        "ucp_http_request_duration_seconds_bucket{route=\"/healthz\",method=\"GET\",code=\"200\","
        "le=\"+Inf\"} 1\n",
        "# TYPE ucp_loop_submit_calls_total counter",
        "ucp_loop_info{worker=\"main\",backend=", "ucp_websocket_connections_total 0\n",
        "ucp_websocket_messages_received_total 0\n", "# TYPE process_cpu_seconds_total counter",
        "process_open_fds ", "ucp_build_info{version=\""}) {
    EXPECT_NE(metrics.body.find(series), std::string::npos) << series << "\n" << metrics.body;
  }
  if (test::promtool_installed()) {
    const auto [code, said] = test::promtool(metrics.body);
    EXPECT_EQ(code, 0) << said << "\n--- exposition ---\n" << metrics.body;
    EXPECT_EQ(said, "") << metrics.body;
  }
  EXPECT_TRUE(server.stop(SIGTERM).clean());
}

TEST_F(HttpServerBinary, AppliesTheConfiguredLimitsAndTimeouts) {
  ServerProcess server(http_server(
      www_,
      {"http.max_request_line_bytes=256", "http.max_header_bytes=1024", "http.max_body_bytes=100",
       "http.header_timeout_ms=300", "http.keepalive_timeout_ms=300"}));
  UCP_START_SERVER(server);
  EXPECT_EQ(get(server, "/" + std::string(300, 'a')).status, 414);
  EXPECT_EQ(get(server, "/", "X-Big: " + std::string(1100, 'b') + "\r\n").status, 431);
  auto big_body =
      http_exchange(server.port(), "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 101\r\n\r\n");
  ASSERT_TRUE(big_body);
  EXPECT_EQ(big_body->status, 413);
  auto slow = connect_loopback(server.port());
  ASSERT_TRUE(slow);
  ASSERT_TRUE(send_text(slow->get(), "GET / HTTP/1.1\r\nHost: t\r\n"));
  std::string pending;
  auto timeout = read_response(slow->get(), pending, 5000);
  ASSERT_TRUE(timeout);
  EXPECT_EQ(timeout->status, 408);
  auto idle = connect_loopback(server.port());
  ASSERT_TRUE(idle);
  ASSERT_TRUE(send_text(idle->get(), "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  pending.clear();
  ASSERT_TRUE(read_response(idle->get(), pending, 5000));
  auto rest = drain_until_closed(idle->get(), 5000);  // keepalive_timeout_ms later
  ASSERT_TRUE(rest) << rest.error().message();
  EXPECT_EQ(*rest, 0u);
  EXPECT_TRUE(server.stop(SIGTERM).clean());
}

// A client that asks for a large file and stops reading is closed after send_timeout_ms:
// its connection disappears from ucp_connections_open. The file is larger than the socket
// buffers (tcp_wmem allows 4 MiB by default), so the server does have to wait for it.
TEST_F(HttpServerBinary, ClosesAClientThatStopsReading) {
  const std::string huge = www_.root() + "/huge.bin";
  std::ofstream(huge).close();
  fs::resize_file(huge, 64 * 1024 * 1024);  // sparse: reads as zeros, costs no disk
  ServerProcess server(http_server(
      www_, {"http.send_timeout_ms=300", "server.thread_num=1", "server.max_output_bytes=65536"}));
  UCP_START_SERVER(server);
  auto stuck = connect_loopback(server.port());
  ASSERT_TRUE(stuck);
  set_receive_buffer(stuck->get(), 4096);
  ASSERT_TRUE(send_text(stuck->get(), "GET /huge.bin HTTP/1.1\r\nHost: t\r\n\r\n"));
  bool closed = false;
  for (int i = 0; i < 200 && !closed; ++i) {
    std::this_thread::sleep_for(50ms);
    const auto metrics = get(server, "/metrics");
    closed = metrics.body.find("ucp_connections_open{worker=\"0\"} 1\n") != std::string::npos;
  }
  EXPECT_TRUE(closed) << "the stalled connection is still open";
  EXPECT_TRUE(server.stop(SIGTERM).clean());
}

// Every framing vector of the smuggling lists: 400, "Connection: close", then the close;
// never a second request out of the ambiguous bytes (the trailing GET /smuggled is never
// answered).
TEST_F(HttpServerBinary, RefusesEveryAmbiguousFramingWith400AndCloses) {
  ServerProcess server(http_server(www_));
  UCP_START_SERVER(server);
  const std::string post = "POST /echo HTTP/1.1\r\nHost: t\r\n";
  const std::string te = post + "Transfer-Encoding: chunked\r\n\r\n";
  const std::vector<std::pair<std::string, std::string>> vectors = {
      {"CL+TE", post + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
      {"TE+CL", post + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"},
      {"TE empty", post + "Transfer-Encoding:\r\n\r\n"},
      {"TE pigeons", post + "Transfer-Encoding: pigeons\r\n\r\n"},
      {"TE identity", post + "Transfer-Encoding: identity\r\n\r\n"},
      {"TE gzip, chunked", post + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"},
      {"TE chunked, gzip", post + "Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n"},
      {"two TE lines", post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"},
      {"TE en-dash", post + "Transfer-Encoding: ch\xe2\x80\x93nked\r\n\r\n0\r\n\r\n"},
      {"differing CL", post + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"},
      {"CL 42, 42", post + "Content-Length: 3, 3\r\n\r\nabc"},
      {"CL x", post + "Content-Length: x\r\n\r\n"},
      {"CL +5", post + "Content-Length: +5\r\n\r\nhello"},
      {"CL -1", post + "Content-Length: -1\r\n\r\n"},
      {"CL 0x10", post + "Content-Length: 0x10\r\n\r\n"},
      {"CL 1_0", post + "Content-Length: 1_0\r\n\r\n"},
      {"CL overflow", post + "Content-Length: 99999999999999999999999\r\n\r\n"},
      {"chunk 123x", te + "123x\r\n"},
      {"chunk Z", te + "Z\r\n"},
      {"chunk 2 foo", te + "2 foo\r\nab\r\n0\r\n\r\n"},
      {"chunk 0_2e", te + "0_2e\r\n\r\n"},
      {"chunk > 16 digits", te + "10000000000000001\r\na\r\n"},
      {"chunk bare LF", te + "1\na\n0\n\n"},
      {"CR in chunk-ext", te + "1;a=b\rc\r\na\r\n0\r\n\r\n"},
      {"bare LF", "GET / HTTP/1.1\nHost: t\n\n"},
      {"bare CR", "GET / HTTP/1.1\rHost: t\r\n\r\n"},
      {"obs-fold", "GET / HTTP/1.1\r\nHost: t\r\nX-A: a\r\n  folded\r\n\r\n"},
      {"space before colon", "GET / HTTP/1.1\r\nHost : t\r\n\r\n"},
      {"space before first header", "GET / HTTP/1.1\r\n Host: t\r\n\r\n"},
      {"NUL in value", with_nul("GET / HTTP/1.1\r\nHost: t\r\nX: a\0b\r\n\r\n")},
      {"CR in value", "GET / HTTP/1.1\r\nHost: t\r\nX: a\rb\r\n\r\n"},
      {"8-bit in name", "GET / HTTP/1.1\r\nHost: t\r\nX\xff: a\r\n\r\n"},
      {"HTTP/1.32", "GET / HTTP/1.32\r\nHost: t\r\n\r\n"},
      {"junk method", "G<T / HTTP/1.1\r\nHost: t\r\n\r\n"},
      {"missing Host", "GET / HTTP/1.1\r\n\r\n"},
      {"duplicate Host", "GET / HTTP/1.1\r\nHost: t\r\nHost: u\r\n\r\n"},
      {"NUL in target", with_nul("GET /a\0b HTTP/1.1\r\nHost: t\r\n\r\n")},
      {"control byte in target", "GET /a\x01b HTTP/1.1\r\nHost: t\r\n\r\n"},
  };
  const std::string smuggled = "GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n";
  for (const auto& [name, bytes] : vectors) {
    auto fd = connect_loopback(server.port());
    ASSERT_TRUE(fd);
    (void)send_text(fd->get(), bytes + smuggled);
    std::string pending;
    auto reply = read_response(fd->get(), pending, 5000);
    ASSERT_TRUE(reply) << name << ": " << reply.error().message();
    EXPECT_EQ(reply->status, 400) << name;
    EXPECT_EQ(reply->header("connection"), "close") << name;
    auto rest = drain_until_closed(fd->get(), 5000);
    ASSERT_TRUE(rest) << name << ": not closed";
    EXPECT_EQ(pending.size() + *rest, 0u) << name << ": more than one answer";
  }
  // Not ambiguous, so served: field names are case-insensitive and the space after ':' is
  // optional (a server that missed these would disagree with a proxy about the body).
  for (const std::string name : {"tRANSFER-ENCODING: chunked", "Transfer-Encoding:chunked"}) {
    auto reply = http_exchange(server.port(), post + name + "\r\n\r\n2\r\nok\r\n0\r\n\r\n");
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 200) << name;
    EXPECT_EQ(reply->body, "ok") << name;
  }
  // HTTP/1.0 with Transfer-Encoding: answered, then closed (RFC 9112 §6.1).
  auto old = connect_loopback(server.port());
  ASSERT_TRUE(old);
  ASSERT_TRUE(
      send_text(old->get(),
                "POST /echo HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked"
                "\r\n\r\n2\r\nhi\r\n0\r\n\r\n" +
                    smuggled));
  std::string pending;
  auto answered = read_response(old->get(), pending, 5000);
  ASSERT_TRUE(answered);
  EXPECT_EQ(answered->body, "hi");
  EXPECT_EQ(answered->header("connection"), "close");
  EXPECT_TRUE(drain_until_closed(old->get(), 5000));
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// Pipelined requests split at every byte offset: the answers are the same as unsplit.
TEST_F(HttpServerBinary, AnswersPipelinedRequestsAlikeWhereverTheyAreSplit) {
  ServerProcess server(http_server(www_, {"server.thread_num=1"}));
  UCP_START_SERVER(server);
  const std::string batch =
      "GET /style.css HTTP/1.1\r\nHost: t\r\n\r\n"
      "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Type: a/b\r\nContent-Length: 4\r\n\r\nbody"
      "HEAD /sub/page.txt HTTP/1.1\r\nHost: t\r\n\r\n"
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
      "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
  auto answers = [&](size_t split) {
    std::string all;
    auto fd = connect_loopback(server.port());
    if (!fd) return std::string("connect failed");
    (void)send_text(fd->get(), std::string_view(batch).substr(0, split));
    if (split < batch.size()) {
      std::this_thread::sleep_for(1ms);
      (void)send_text(fd->get(), std::string_view(batch).substr(split));
    }
    std::string pending;
    for (int i = 0; i < 5; ++i) {
      auto reply = read_response(fd->get(), pending, 5000, i == 2);
      if (!reply) return "answer " + std::to_string(i) + ": " + reply.error().message();
      all += reply->without_date() + "\n--\n";
    }
    return all;
  };
  const std::string whole = answers(batch.size());
  ASSERT_NE(whole.find("body"), std::string::npos) << whole;
  for (size_t split = 1; split < batch.size(); ++split) {
    ASSERT_EQ(answers(split), whole) << "split at " << split;
  }
  EXPECT_TRUE(server.stop(SIGTERM).clean());
}

TEST_F(HttpServerBinary, ExitsWithTheDocumentedCodes) {
  {
    ServerProcess server(http_server(www_, {"http.index=a/b"}));
    if (!server.binary_exists()) GTEST_SKIP() << "http_server not built";
    EXPECT_FALSE(server.start());
    ASSERT_TRUE(server.wait_exit(5000));
    EXPECT_EQ(server.exit_status()->code, 2) << server.output_tail();
  }
  {
    ServerProcess server(http_server(www_, {"http.root=/nonexistent/ucp-root"}));
    EXPECT_FALSE(server.start());
    ASSERT_TRUE(server.wait_exit(5000));
    EXPECT_EQ(server.exit_status()->code, 2) << server.output_tail();
    EXPECT_NE(server.output().find("http.root"), std::string::npos);
  }
  ServerProcess first(http_server(www_));
  UCP_START_SERVER(first);
  ServerProcess second(http_server(www_, {"server.port=" + std::to_string(first.port())}));
  EXPECT_FALSE(second.start());
  ASSERT_TRUE(second.wait_exit(5000));
  EXPECT_EQ(second.exit_status()->code, 1) << second.output_tail();
  EXPECT_TRUE(first.stop(SIGINT).clean()) << first.output_tail();
}

}  // namespace
}  // namespace ucp::test

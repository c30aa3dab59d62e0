// bin/http_server against what a hostile client tries, on io_uring and on epoll: redirects
// built from the request, folds after empty values, chunk extensions and odd versions,
// descriptor exhaustion and a crawl under a low descriptor limit, files changed or deleted
// while the server knows them, empty-file ranges, and the counters /metrics shows.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "BackendProbe.h"
#include "HttpClient.h"
#include "LoopbackClient.h"
#include "ScratchDir.h"
#include "ServerProcess.h"
#include "WsRawClient.h"

namespace ucp::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

/// A scratch document root, removed at the end.
class Root : public test::ScratchDir {
 public:
  Root() : ScratchDir("ucp-hostile-www") {}
};

/// The server's open descriptors, and how many of them name a deleted file.
struct Descriptors {
  size_t open = 0;
  size_t deleted = 0;
};

Descriptors descriptors_of(pid_t pid) {
  Descriptors d;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    ++d.open;
    std::error_code ignored;
    const std::string target = fs::read_symlink(entry.path(), ignored).string();
    if (target.find("(deleted)") != std::string::npos) ++d.deleted;
  }
  return d;
}

/// Sum of every sample of the series whose name and labels start with `prefix`.
uint64_t metric_sum(const std::string& body, const std::string& prefix) {
  uint64_t total = 0;
  for (size_t at = body.find(prefix); at != std::string::npos; at = body.find(prefix, at + 1)) {
    if (at > 0 && body[at - 1] != '\n') continue;
    const size_t space = body.find(' ', at);
    total += std::strtoull(body.c_str() + space + 1, nullptr, 10);
  }
  return total;
}

class HttpServerHostile : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    UCP_SKIP_UNLESS_NAMED_BACKEND_USABLE(GetParam());
    ::signal(SIGPIPE, SIG_IGN);
  }
  ServerProcess::Options options(std::vector<std::string> more = {}) const {
    ServerProcess::Options o;
    o.binary = UCP_BIN_DIR "/http_server";
    o.overrides = {"http.root=" + root_.path(), "server.thread_num=2",
                   "event_loop.backend=" + GetParam()};
    for (auto& m : more) o.overrides.push_back(std::move(m));
    return o;
  }
  HttpReply get(const ServerProcess& server, const std::string& target,
                const std::string& extra_headers = "") const {
    auto reply =
        http_exchange(server.port(),
                      "GET " + target + " HTTP/1.1\r\nHost: t\r\n" + extra_headers + "\r\n", 10000);
    EXPECT_TRUE(reply) << target << ": " << reply.error().message();
    return reply ? *reply : HttpReply{};
  }
  /// Sends `request` in the given pieces (a pause between them, so that they arrive in
  /// separate reads) and reads the one answer.
  Result<HttpReply> exchange_in_pieces(const ServerProcess& server,
                                       const std::vector<std::string>& pieces) const {
    auto fd = connect_loopback(server.port());
    if (!fd) return Unexpected{fd.error()};
    for (const std::string& piece : pieces) {
      if (auto sent = send_text(fd->get(), piece); !sent) return Unexpected{sent.error()};
      std::this_thread::sleep_for(20ms);
    }
    std::string pending;
    return read_response(fd->get(), pending, 10000);
  }

  Root root_;
};

INSTANTIATE_TEST_SUITE_P(Backends, HttpServerHostile, kBackendNames,
                         [](const auto& param_info) { return param_info.param; });

// The redirect of a directory path without its slash names the normalized path, percent-
// encoded: never the request's bytes, which browsers would read as another host ("//h/..",
// "/\h/.." after a normalization that removed them).
TEST_P(HttpServerHostile, RedirectsToTheNormalizedPathNeverToAnotherHost) {
  root_.write("sub/index.html", "sub\n");
  root_.write("a\\b/index.html", "backslash\n");
  root_.write("sp ace/index.html", "space\n");
  ServerProcess server(options());
  UCP_START_SERVER(server);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"//evil.example/..//sub", "/sub/"},
      {"//evil.example/../sub", "/sub/"},
      {"//evil.example/%2e%2e//sub", "/sub/"},
      {"//evil.example/%2E%2E/sub", "/sub/"},
      {"/\\evil.example/../sub", "/sub/"},
      {"/%5Cevil.example/../sub", "/sub/"},
      {"/./sub", "/sub/"},
      {"/sub/../sub", "/sub/"},
      {"//evil.example/..//sub?a=1&b=%2F", "/sub/?a=1&b=%2F"},
      {"/sub?x=\\y", "/sub/?x=%5Cy"},
      {"/a%5Cb", "/a%5Cb/"},
      {"/sp%20ace", "/sp%20ace/"},
  };
  for (const auto& [target, location] : cases) {
    const HttpReply reply = get(server, target);
    EXPECT_EQ(reply.status, 301) << target;
    EXPECT_EQ(reply.header("location"), location) << target;
  }
  EXPECT_EQ(get(server, "/a%5Cb/").body, "backslash\n");
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// A fold after an empty value made the folded text the value (llhttp skips it silently): a
// front end that refuses the fold, or reads the continuation as a field of its own, frames
// the request differently. Each spelling is refused, whole and split across reads.
TEST_P(HttpServerHostile, RefusesFoldsAfterEmptyValuesWith400) {
  root_.write("f.txt", "file\n");
  ServerProcess server(options());
  UCP_START_SERVER(server);
  const std::string body = "3\r\nabc\r\n0\r\n\r\n";
  const std::vector<std::string> heads = {
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding:\r\n chunked\r\n\r\n" + body,
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding:\r\n\tchunked\r\n\r\n" + body,
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: \r\n chunked\r\n\r\n" + body,
      "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length:\r\n 3\r\n\r\nabc",
      "GET /f.txt HTTP/1.1\r\nHost:\r\n t\r\n\r\n",
      "GET /f.txt HTTP/1.1\r\nHost: t\r\nConnection:\r\n close\r\n\r\n",
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n"
      "X-Trailer:\r\n folded\r\n\r\n",
  };
  for (const std::string& request : heads) {
    auto whole = exchange_in_pieces(server, {request});
    ASSERT_TRUE(whole) << request << whole.error().message();
    EXPECT_EQ(whole->status, 400) << request;
    EXPECT_EQ(whole->header("connection"), "close") << request;
    const size_t fold = request.find(":\r\n") + 3;  // split right before the continuation
    auto split = exchange_in_pieces(server, {request.substr(0, fold), request.substr(fold)});
    ASSERT_TRUE(split) << request << split.error().message();
    EXPECT_EQ(split->status, 400) << "split: " << request;
  }
  EXPECT_EQ(get(server, "/f.txt").status, 200);  // and the server goes on
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// Chunk extensions in the RFC 9112 grammar, an empty field name, HTTP/1.2 and an HTTP/0.9
// request line.
TEST_P(HttpServerHostile, ReadsRequestsByTheRfcNotByLlhttpsLimits) {
  root_.write("f.txt", "file\n");
  ServerProcess server(options({"http.header_timeout_ms=60000"}));
  UCP_START_SERVER(server);
  const std::string post = "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const char* line : {"3 ; a=b", "3;a=\"x\\\"y\"", "3;a=b;c=\"d e\""}) {
    auto reply = exchange_in_pieces(server, {post + line + "\r\nabc\r\n0\r\n\r\n"});
    ASSERT_TRUE(reply) << line;
    EXPECT_EQ(reply->status, 200) << line;
    EXPECT_EQ(reply->body, "abc") << line;
  }
  auto empty_name = exchange_in_pieces(server, {post + "3;=x\r\nabc\r\n0\r\n\r\n"});
  ASSERT_TRUE(empty_name);
  EXPECT_EQ(empty_name->status, 400);
  auto empty_field = exchange_in_pieces(server, {"GET /f.txt HTTP/1.1\r\nHost: t\r\n: 1\r\n\r\n"});
  ASSERT_TRUE(empty_field);
  EXPECT_EQ(empty_field->status, 400);
  auto minor2 = exchange_in_pieces(server, {"GET /f.txt HTTP/1.2\r\nHost: t\r\n\r\n"});
  ASSERT_TRUE(minor2);
  EXPECT_EQ(minor2->status, 200);
  EXPECT_EQ(minor2->body, "file\n");
  // Answered at the end of the line (before: after the 60 s header timeout, with a 408).
  for (const char* line : {"GET /\r\n", "GET /f.txt\n"}) {
    auto http09 = exchange_in_pieces(server, {line});
    ASSERT_TRUE(http09) << line << ": " << http09.error().message();
    EXPECT_EQ(http09->status, 400) << line;
  }
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// RFC 9110 §14.1.2: on an empty representation a suffix range is satisfiable; the answer is
// the whole (empty) file.
TEST_P(HttpServerHostile, AnswersASuffixRangeOfAnEmptyFileWith200) {
  root_.write("empty.txt", "");
  ServerProcess server(options());
  UCP_START_SERVER(server);
  const HttpReply suffix = get(server, "/empty.txt", "Range: bytes=-5\r\n");
  EXPECT_EQ(suffix.status, 200);
  EXPECT_EQ(suffix.header("content-length"), "0");
  EXPECT_EQ(get(server, "/empty.txt", "Range: bytes=0-\r\n").status, 416);
  EXPECT_EQ(get(server, "/empty.txt", "Range: bytes=-0\r\n").status, 416);
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// A file rewritten right after it was served is served new at once, small (kept in memory)
// and large (sent from the file) alike: new bytes and a new ETag, never a 304 on the old one.
TEST_P(HttpServerHostile, ServesAChangedFileAtTheNextRequest) {
  const std::string large_old(100 * 1024, 'o');
  const std::string large_new(100 * 1024 + 1, 'n');
  root_.write("small.txt", "old\n");
  root_.write("large.bin", large_old);
  ServerProcess server(options({"server.thread_num=1"}));
  UCP_START_SERVER(server);
  for (int round = 0; round < 3; ++round) {
    const HttpReply small = get(server, "/small.txt");
    const HttpReply large = get(server, "/large.bin");
    ASSERT_EQ(small.status, 200);
    ASSERT_EQ(large.status, 200);
    const std::string small_body = round % 2 == 0 ? "new contents\n" : "old\n";
    root_.rewrite("small.txt", small_body);
    root_.rewrite("large.bin", round % 2 == 0 ? large_new : large_old);
    const HttpReply small_again =
        get(server, "/small.txt", "If-None-Match: " + small.header("etag") + "\r\n");
    EXPECT_EQ(small_again.status, 200) << "round " << round;
    EXPECT_EQ(small_again.body, small_body) << "round " << round;
    EXPECT_NE(small_again.header("etag"), small.header("etag")) << "round " << round;
    const HttpReply large_again =
        get(server, "/large.bin", "If-None-Match: " + large.header("etag") + "\r\n");
    EXPECT_EQ(large_again.status, 200) << "round " << round;
    EXPECT_EQ(large_again.body.size(), (round % 2 == 0 ? large_new : large_old).size());
    EXPECT_NE(large_again.header("etag"), large.header("etag")) << "round " << round;
  }
  // Replaced by a rename, within the same second.
  const HttpReply before = get(server, "/small.txt");
  root_.write("small.txt.tmp", "renamed into place\n");
  fs::rename(root_.path() + "/small.txt.tmp", root_.path() + "/small.txt");
  EXPECT_EQ(get(server, "/small.txt").body, "renamed into place\n");
  EXPECT_FALSE(before.body.empty());
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// A deleted file's descriptor goes with it: the server keeps no file open once its answer is
// sent, so the disk space is released at once.
TEST_P(HttpServerHostile, KeepsNoDeletedFileOpen) {
  root_.write("big.bin", std::string(4 * 1024 * 1024, 'b'));
  root_.write("mid.bin", std::string(40 * 1024, 'm'));
  ServerProcess server(options());
  UCP_START_SERVER(server);
  for (int i = 0; i < 4; ++i) {  // both workers, twice
    EXPECT_EQ(get(server, "/big.bin").body.size(), 4u * 1024 * 1024);
    EXPECT_EQ(get(server, "/mid.bin").body.size(), 40u * 1024);
  }
  fs::remove(root_.path() + "/big.bin");
  fs::remove(root_.path() + "/mid.bin");
  Descriptors now = descriptors_of(server.pid());
  for (int i = 0; i < 100 && now.deleted > 0; ++i) {  // an answer may still be finishing
    std::this_thread::sleep_for(20ms);
    now = descriptors_of(server.pid());
  }
  EXPECT_EQ(now.deleted, 0u);
  EXPECT_EQ(get(server, "/big.bin").status, 404);
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// A crawl of many distinct files under a low descriptor limit: the idle server holds about
// as many descriptors as before it, and new clients are served.
TEST_P(HttpServerHostile, CrawlUnderALowDescriptorLimitLeavesNoDescriptorsBehind) {
  constexpr int kFiles = 300;
  for (int i = 0; i < kFiles; ++i) {
    root_.write("crawl/" + std::to_string(i) + ".bin", std::string(20 * 1024, 'c'));
  }
  ServerProcess::Options o = options({"server.thread_num=4"});
  o.nofile_limit = 160;
  ServerProcess server(o);
  UCP_START_SERVER(server);
  ASSERT_EQ(get(server, "/crawl/0.bin").status, 200);
  const Descriptors before = descriptors_of(server.pid());
  // Several keep-alive connections, so that every worker sees part of the crawl.
  for (int c = 0; c < 8; ++c) {
    auto fd = connect_loopback(server.port());
    ASSERT_TRUE(fd);
    std::string pending;
    for (int i = c; i < kFiles; i += 8) {
      ASSERT_TRUE(send_text(
          fd->get(), "GET /crawl/" + std::to_string(i) + ".bin HTTP/1.1\r\nHost: t\r\n\r\n"));
      auto reply = read_response(fd->get(), pending, 10000);
      ASSERT_TRUE(reply) << i;
      ASSERT_EQ(reply->status, 200) << i;
    }
  }
  const Descriptors after = descriptors_of(server.pid());
  std::printf("[ figure   ] descriptors before %zu, after a crawl of %d files: %zu\n", before.open,
              kFiles, after.open);
  EXPECT_LE(after.open, before.open + 4);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(get(server, "/crawl/" + std::to_string(i) + ".bin").status, 200) << i;
  }
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// Out of descriptors is the server's failure: 503 (not 403), logged, counted as 5xx.
TEST_P(HttpServerHostile, AnswersOutOfDescriptorsWith503AndCountsIt) {
  root_.write("f.txt", "file\n");
  ServerProcess::Options o = options({"server.thread_num=1"});
  o.nofile_limit = 64;
  ServerProcess server(o);
  UCP_START_SERVER(server);
  auto first = connect_loopback(server.port());
  ASSERT_TRUE(first);
  std::string pending;
  ASSERT_TRUE(send_text(first->get(), "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  ASSERT_TRUE(read_response(first->get(), pending, 10000));
  // Connections until the server cannot accept more (the rest wait in the listen queue).
  std::vector<UniqueFd> hogs;
  for (int i = 0; i < 80; ++i) {
    auto fd = connect_loopback(server.port());
    ASSERT_TRUE(fd) << i;
    hogs.push_back(std::move(*fd));
  }
  // Exhausted: at the limit (descriptors inherited above it count too) and no longer growing.
  size_t open = 0;
  for (int i = 0, steady = 0; i < 400 && steady < 10; ++i) {
    std::this_thread::sleep_for(10ms);
    const size_t now = descriptors_of(server.pid()).open;
    steady = now >= 64 && now == open ? steady + 1 : 0;
    open = now;
  }
  ASSERT_GE(open, 64u);
  ASSERT_TRUE(send_text(first->get(), "GET /f.txt HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto exhausted = read_response(first->get(), pending, 10000);
  ASSERT_TRUE(exhausted) << exhausted.error().message();
  EXPECT_EQ(exhausted->status, 503);
  hogs.clear();  // descriptors come back
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(send_text(first->get(), "GET /f.txt HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto served = read_response(first->get(), pending, 10000);
  ASSERT_TRUE(served);
  EXPECT_EQ(served->status, 200);
  ASSERT_TRUE(send_text(first->get(), "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto metrics = read_response(first->get(), pending, 10000);
  ASSERT_TRUE(metrics);
  EXPECT_GE(metric_sum(metrics->body, "ucp_http_requests_total{worker=\"0\",class=\"5xx\"}"), 1u);
  EXPECT_EQ(metric_sum(metrics->body, "ucp_http_requests_total{worker=\"0\",class=\"4xx\"}"), 0u);
  first->reset();
  const ExitStatus status = server.stop(SIGTERM);
  EXPECT_TRUE(status.clean());
  std::ifstream log(server.output_path());
  const std::string output((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(output.find("descriptors"), std::string::npos) << output;
}

// ucp_bytes_sent_total counts file bodies the send-file operation sent; a 101 is counted in
// class="1xx", and the four classes of before are all still there.
TEST_P(HttpServerHostile, CountsFileBodiesAndSwitchesInTheMetrics) {
  root_.write("big.bin", std::string(8 * 1024 * 1024, 'x'));
  ServerProcess server(options({"server.thread_num=1"}));
  UCP_START_SERVER(server);
  EXPECT_EQ(get(server, "/big.bin").body.size(), 8u * 1024 * 1024);
  {
    auto ws = WsRawClient::open(server.port(), "/ws/echo");
    ASSERT_TRUE(ws) << ws.error().message();
  }
  std::this_thread::sleep_for(100ms);  // the WebSocket connection's end is counted
  const HttpReply metrics = get(server, "/metrics");
  EXPECT_GE(metric_sum(metrics.body, "ucp_bytes_sent_total{"), 8u * 1024 * 1024);
  EXPECT_EQ(metric_sum(metrics.body, "ucp_http_requests_total{worker=\"0\",class=\"1xx\"}"), 1u);
  for (const char* c : {"2xx", "3xx", "4xx", "5xx"}) {
    EXPECT_NE(
        metrics.body.find("ucp_http_requests_total{worker=\"0\",class=\"" + std::string(c) + "\"}"),
        std::string::npos)
        << c;
  }
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

}  // namespace
}  // namespace ucp::test

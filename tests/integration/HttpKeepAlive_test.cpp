// Keep-alive and pipelining against bin/proactor_test (server.protocol = http) where the
// connection's receive pauses under load: large bodies, head blocks split across writes,
// thousands of pipelined requests, and a client that reads its answers slowly. Pausing the
// receive (back-pressure) must never end the connection or lose a request.
//
// Every test starts its own server on a free loopback port; every wait is bounded.

#include <atomic>
#include <chrono>
#include <csignal>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/socket.h>

#include "BackendProbe.h"
#include "HttpReply.h"
#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view kGet = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";

struct Variant {
  const char* name;
  std::vector<std::string> overrides;
};

void PrintTo(const Variant& variant, std::ostream* out) { *out << variant.name; }

class HttpKeepAlive : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    for (const auto& o : GetParam().overrides) {
      if (o == "event_loop.backend=io_uring")
        UCP_SKIP_UNLESS_NAMED_BACKEND_USABLE(std::string("io_uring"));
    }
    ::signal(SIGPIPE, SIG_IGN);
    std::vector<std::string> overrides = {"server.protocol=http", "server.read_timeout_ms=10000"};
    for (const auto& o : GetParam().overrides) overrides.push_back(o);
    server_ = std::make_unique<ServerProcess>(overrides);
    ASSERT_TRUE(server_->start()) << server_->error();
  }
  void TearDown() override {
    if (server_) {
      EXPECT_EQ(server_->stop(SIGTERM).describe(), "exit 0") << server_->output_tail();
    }
  }

  UniqueFd connect() {
    auto fd = connect_loopback(server_->port());
    EXPECT_TRUE(fd) << fd.error().message();
    return fd ? std::move(*fd) : UniqueFd();
  }

  std::unique_ptr<ServerProcess> server_;
};

INSTANTIATE_TEST_SUITE_P(
    Loops, HttpKeepAlive,
    ::testing::Values(
        Variant{"OneWorker", {"server.thread_num=1", "event_loop.backend=io_uring"}},
        Variant{"TwoWorkers", {"server.thread_num=2", "event_loop.backend=io_uring"}},
        Variant{"SingleShotReads",
                {"event_loop.multishot_recv=false", "event_loop.backend=io_uring"}},
        Variant{"EpollOneWorker", {"server.thread_num=1", "event_loop.backend=epoll"}},
        Variant{"EpollTwoWorkers", {"server.thread_num=2", "event_loop.backend=epoll"}},
        Variant{"EpollSingleShotReads",
                {"event_loop.multishot_recv=false", "event_loop.backend=epoll"}}),
    [](const auto& variant) { return std::string(variant.param.name); });

// Answers `count` pipelined requests read from `fd`; returns how many were 200.
int count_ok_replies(int fd, std::string& pending, int count, int64_t timeout_ms = 20000) {
  int ok = 0;
  for (int i = 0; i < count; ++i) {
    Reply r = read_reply(fd, pending, timeout_ms);
    if (r.kind != Reply::Kind::kResponse) {
      ADD_FAILURE() << "reply " << i << " of " << count << ": " << r.detail;
      break;
    }
    if (r.status == 200) ++ok;
  }
  return ok;
}

TEST_P(HttpKeepAlive, LargeBodyIsAnsweredAndTheConnectionServesTheNextRequest) {
  for (size_t body : {40'000u, 50'000u, 60'000u}) {
    UniqueFd fd = connect();
    std::string request =
        "POST /upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: " + std::to_string(body) +
        "\r\n\r\n" + std::string(body, 'b');
    ASSERT_TRUE(send_text(fd.get(), request));
    std::string pending;
    EXPECT_EQ(count_ok_replies(fd.get(), pending, 1), 1) << body << " byte body";
    ASSERT_TRUE(send_text(fd.get(), kGet));
    EXPECT_EQ(count_ok_replies(fd.get(), pending, 1), 1) << "next request after " << body;
  }
}

TEST_P(HttpKeepAlive, HeaderBlockSplitBeforeItsBlankLineIsAnswered) {
  for (size_t filler : {30'000u, 45'000u, 60'000u}) {
    UniqueFd fd = connect();
    std::string head =
        "GET / HTTP/1.1\r\nHost: localhost\r\nX-Filler: " + std::string(filler, 'f') + "\r\n";
    ASSERT_TRUE(send_text(fd.get(), head));
    std::this_thread::sleep_for(50ms);  // the server has read all of it before the end arrives
    ASSERT_TRUE(send_text(fd.get(), "\r\n"));
    std::string pending;
    EXPECT_EQ(count_ok_replies(fd.get(), pending, 1), 1) << filler << " byte header";
  }
}

TEST_P(HttpKeepAlive, TwentyThousandPipelinedRequestsInOneWriteAreAllAnswered) {
  constexpr int kRequests = 20000;
  UniqueFd fd = connect();
  std::string all;
  all.reserve(kGet.size() * kRequests);
  for (int i = 0; i < kRequests; ++i) all += kGet;
  // Send from another thread while this one reads: the answers (about 1.6 MB) outgrow the
  // socket buffers long before the requests are all written.
  std::atomic<bool> sent{false};
  std::thread sender([&] { sent = static_cast<bool>(send_text(fd.get(), all, 30000)); });
  std::string pending;
  int ok = count_ok_replies(fd.get(), pending, kRequests);
  sender.join();
  EXPECT_TRUE(sent.load());
  EXPECT_EQ(ok, kRequests);
}

TEST_P(HttpKeepAlive, PipeliningClientThatReadsSlowlyGetsEveryAnswerInOrder) {
  constexpr int kRequests = 5000;
  UniqueFd fd = connect();
  std::string all;
  for (int i = 0; i < kRequests; ++i) {
    all += "GET /" + std::to_string(i) + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
  }
  std::atomic<bool> sent{false};
  std::thread sender([&] { sent = static_cast<bool>(send_text(fd.get(), all, 30000)); });
  std::string pending;
  int ok = 0;
  for (int i = 0; i < kRequests; ++i) {
    if (i % 250 == 0) std::this_thread::sleep_for(30ms);  // a slow reader: answers pile up
    Reply r = read_reply(fd.get(), pending, 20000);
    if (r.kind != Reply::Kind::kResponse) {
      ADD_FAILURE() << "reply " << i << ": " << r.detail;
      break;
    }
    ok += r.status == 200;
  }
  sender.join();
  EXPECT_TRUE(sent.load());
  EXPECT_EQ(ok, kRequests);
}

}  // namespace
}  // namespace ucp::test

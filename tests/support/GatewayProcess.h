#pragma once
// Test fixtures for bin/ucp_gateway as a process: the gateway with a config written for the
// test (listening on a free port, /metrics on another), bin/http_server upstreams each serving
// a document root that names it (GET /who), and reading a Prometheus exposition.
//
//   HttpUpstream a("a"), b("b");                  // bin/http_server on free ports
//   auto gateway = start_gateway("[gateway]\nupstream = app\n[upstream.app]\nservers = " +
//                                a.address() + ", " + b.address() + "\n");
//   auto who = http_get(gateway->port(), "/who");    // "a" or "b"
//   uint64_t n = metric(scrape(admin), "ucp_upstream_requests_total{upstream=\"app\"}");
//
// Header-only; no UCP library.

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "ExternalProcess.h"
#include "HttpClient.h"
#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {

inline const std::string kGatewayBinary = UCP_BIN_DIR "/ucp_gateway";

/// A scratch directory, removed with the object (kept with UCP_KEEP_SERVER_LOGS).
class ScratchDir {
 public:
  explicit ScratchDir(const char* prefix = "/tmp/ucp-gw-XXXXXX") {
    std::string name = prefix;
    dir_ = ::mkdtemp(name.data());
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    if (std::getenv("UCP_KEEP_SERVER_LOGS") != nullptr) return;
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  const std::string& path() const { return dir_; }
  std::string write(const std::string& relative, const std::string& text) const {
    const std::string file = dir_ + "/" + relative;
    std::filesystem::create_directories(std::filesystem::path(file).parent_path());
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }

 private:
  std::string dir_;
};

/// bin/http_server on a free port, its document root holding `who` (its name) and whatever
/// files the test adds with root().write().
class HttpUpstream {
 public:
  explicit HttpUpstream(std::string name, std::vector<std::string> overrides = {})
      : name_(std::move(name)) {
    root_.write("who", name_);
    ServerProcess::Options options;
    options.binary = UCP_BIN_DIR "/http_server";
    options.overrides = {"http.root=" + root_.path(), "server.thread_num=1",
                         "http.max_body_bytes=64M"};
    for (auto& o : overrides) options.overrides.push_back(std::move(o));
    process_ = std::make_unique<ServerProcess>(options);
    started_ = process_->start();
  }
  bool started() const { return started_; }
  std::string error() const { return process_->error(); }
  uint16_t port() const { return process_->port(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port()); }
  ServerProcess& process() { return *process_; }
  const ScratchDir& root() const { return root_; }

 private:
  std::string name_;
  ScratchDir root_{"/tmp/ucp-gw-www-XXXXXX"};
  std::unique_ptr<ServerProcess> process_;
  bool started_ = false;
};

/// bin/ucp_gateway with `sections` after a [server] and [log] of the test's (127.0.0.1, port
/// 0, one worker, console log), and `overrides` as --set.
inline std::unique_ptr<ServerProcess> start_gateway(const ScratchDir& dir,
                                                    const std::string& sections,
                                                    std::vector<std::string> overrides = {},
                                                    rlim_t nofile = 0) {
  const std::string config =
      dir.write("gateway.conf",
                "[server]\nip = 127.0.0.1\nport = 0\nthread_num = 1\n"
                "shutdown_timeout_ms = 5000\n[log]\nconsole = true\nlevel = INFO\nfile =\n"
                "flush_interval_ms = 20\n" +
                    sections);
  ServerProcess::Options options;
  options.binary = kGatewayBinary;
  options.config_path = config;
  options.overrides = std::move(overrides);
  // The suites run once per backend (ctest's NAME_epoll sets UCP_TEST_BACKEND=epoll).
  if (const char* backend = std::getenv("UCP_TEST_BACKEND")) {
    options.overrides.push_back(std::string("event_loop.backend=") + backend);
  }
  options.nofile_limit = nofile;
  auto gateway = std::make_unique<ServerProcess>(options);
  if (gateway->binary_exists()) {
    EXPECT_TRUE(gateway->start()) << gateway->error();
  }
  return gateway;
}

/// A non-blocking connection to 127.0.0.1:`port` from `source_ip` (any 127/8 address works
/// on loopback: distinct client addresses for the hash balance).
inline Result<UniqueFd> connect_from(const std::string& source_ip, uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in source{};
  source.sin_family = AF_INET;
  ::inet_pton(AF_INET, source_ip.c_str(), &source.sin_addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&source), sizeof source) != 0) {
    return Unexpected{last_error()};
  }
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(port);
  target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&target), sizeof target) != 0) {
    return Unexpected{last_error()};
  }
  ::fcntl(fd.get(), F_SETFL, O_NONBLOCK);
  return fd;
}

/// One GET on a new connection; the body, or "status N" for another status than 200, or
/// "error: ..." when no answer came.
inline std::string http_get(uint16_t port, const std::string& path,
                            const std::string& host = "gw.test") {
  auto reply = http_exchange(
      port, "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n", 10000);
  if (!reply) return "error: " + reply.error().message();
  if (reply->status != 200) return "status " + std::to_string(reply->status);
  return reply->body;
}

/// The exposition /metrics answers on `port`.
inline std::string scrape(uint16_t port) {
  auto reply =
      http_exchange(port, "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 10000);
  return reply && reply->status == 200 ? reply->body : std::string();
}

/// The value of the sample `series` (name and labels exactly as written) in `exposition`, or
/// -1 when it is not there.
inline double metric(const std::string& exposition, const std::string& series) {
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return -1;
}

}  // namespace ucp::test

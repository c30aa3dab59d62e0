#include "ucp/proxy/HealthCheck.h"

#include <array>
#include <chrono>
#include <string_view>

#include "ucp/io/WithTimeout.h"
#include "ucp/net/TcpClient.h"
#include "ucp/proxy/ProxyProtocol.h"

namespace ucp::proxy {
namespace {

constexpr size_t kMaxStatusLine = 1024;

// "HTTP/1.x NNN ...": the status, or 0 when the line is not a status line.
int status_of(std::string_view line) {
  if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[8] != ' ') return 0;
  int status = 0;
  for (size_t i = 9; i < 12; ++i) {
    if (line[i] < '0' || line[i] > '9') return 0;
    status = status * 10 + (line[i] - '0');
  }
  return status;
}

std::string describe(std::error_code error) {
  if (error == std::errc::timed_out) return "timed out";
  return error.message();
}

}  // namespace

Task<HealthCheckResult> check_server(EventLoop& loop, InetAddress address, std::string host,
                                     HealthCheckOptions health, uint32_t timeout_ms,
                                     ProxyProtocolVersion proxy_protocol) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  ClientOptions options;
  options.connect_timeout_ms = timeout_ms;
  options.output.close_flush_timeout_ms = timeout_ms;
  auto connected = co_await TcpClient::connect(loop, address, options);
  if (!connected) co_return HealthCheckResult{false, describe(connected.error())};
  TcpConnection& connection = **connected;
  HealthCheckResult result;
  std::string request;
  if (proxy_protocol == ProxyProtocolVersion::kV1) {
    std::array<char, kProxyV1MaxBytes> line;
    const auto local = InetAddress::local_of(connection.fd()).value_or(InetAddress{});
    request.append(line.data(), encode_proxy_v1(local, address, line));
  } else if (proxy_protocol == ProxyProtocolVersion::kV2) {
    std::array<std::byte, kProxyV2MaxEncoded> block;
    const size_t n = encode_proxy_v2_local(block);
    request.append(reinterpret_cast<const char*>(block.data()), n);
  }
  if (health.kind != HealthCheckKind::kHttp) {
    // A tcp check passes with the connect; the PROXY header, if any, goes out before the close.
    if (!request.empty()) (void)co_await connection.write_all(request);
    result.passed = true;
    co_await connection.close();
    co_return result;
  }
  request += "GET " + health.path + " HTTP/1.1\r\nHost: " + host +
             "\r\nUser-Agent: ucp-health-check\r\nConnection: close\r\n\r\n";
  if (auto sent = co_await with_deadline(connection.write_all(request), deadline); !sent) {
    result.detail = describe(sent.error());
  } else {
    std::string answer;
    std::array<char, 512> buffer;
    while (answer.find("\r\n") == std::string::npos && answer.size() < kMaxStatusLine) {
      auto n = co_await with_deadline(connection.read(buffer), deadline);
      if (!n) {
        result.detail = describe(n.error());
        break;
      }
      if (*n == 0) {
        result.detail = "closed before answering";
        break;
      }
      answer.append(buffer.data(), *n);
    }
    if (result.detail.empty()) {
      const int status = status_of(answer.substr(0, answer.find("\r\n")));
      result.passed = status >= 200 && status <= 299;
      if (status == 0) {
        result.detail = "no HTTP status line";
      } else if (!result.passed) {
        result.detail = "status " + std::to_string(status);
      }
    }
  }
  co_await connection.close();
  co_return result;
}

}  // namespace ucp::proxy

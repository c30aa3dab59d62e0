#include "ucp/net/ReconnectingClient.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "ucp/io/Operations.h"
#include "ucp/io/WithTimeout.h"

namespace ucp {

ReconnectingClient::ReconnectingClient(EventLoop& loop, std::string host, uint16_t port,
                                       ReconnectOptions options)
    : loop_(loop),
      host_(std::move(host)),
      port_(port),
      options_(std::move(options)),
      random_(std::random_device{}()),
      delay_(options_.initial_delay) {
  options_.client.stop = options_.stop;  // a stop also ends an attempt under way
  options_.jitter = std::clamp(options_.jitter, 0.0, 1.0);
  options_.multiplier = std::max(options_.multiplier, 1.0);
}

std::chrono::milliseconds ReconnectingClient::next_wait() {
  const std::chrono::milliseconds base = delay_;
  const auto grown = static_cast<double>(delay_.count()) * options_.multiplier;
  delay_ =
      std::min(options_.max_delay, std::chrono::milliseconds(static_cast<int64_t>(std::min(
                                       grown, static_cast<double>(options_.max_delay.count())))));
  const double cut = options_.jitter * std::uniform_real_distribution<double>(0.0, 1.0)(random_);
  return std::chrono::milliseconds(
      static_cast<int64_t>(static_cast<double>(base.count()) * (1.0 - cut)));
}

Task<Result<ClientConnection>> ReconnectingClient::connect() {
  std::optional<std::chrono::milliseconds> wait;
  if (connections_ > 0) {  // the connection handed out last has ended
    if (Clock::now() - connected_at_ >= options_.healthy_after) {
      delay_ = options_.initial_delay;  // it proved the server healthy: start over, at once
    } else {
      wait = next_wait();  // accepted and dropped early: back off as after a failure
    }
  }
  uint32_t failed_in_a_row = 0;
  for (;;) {
    if (options_.stop.stop_requested()) co_return Unexpected{std::errc::operation_canceled};
    if (wait) {
      auto slept = co_await with_stop(io::sleep_for(loop_, *wait), options_.stop);
      if (!slept) co_return Unexpected{slept.error()};
    }
    auto conn = co_await TcpClient::connect(loop_, host_, port_, options_.client);
    if (conn) {
      ++connections_;
      connected_at_ = Clock::now();
      co_return std::move(*conn);
    }
    if (conn.error() == std::errc::operation_canceled) co_return Unexpected{conn.error()};
    ++failures_;
    if (options_.max_attempts != 0 && ++failed_in_a_row >= options_.max_attempts) {
      co_return Unexpected{conn.error()};
    }
    wait = next_wait();
    if (on_retry_) on_retry_(conn.error(), *wait);
  }
}

}  // namespace ucp

#include "RingHandOff.h"

#include <string>

#include "ucp/io/Operations.h"
#include "ucp/io/detail/LoopAccess.h"
#include "ucp/log/Logger.h"
#include "ucp/net/TcpServer.h"

namespace ucp::detail {

namespace {
// Sent once to every worker before the first connection: fds are never negative.
constexpr int32_t kProbe = -1;
constexpr auto kProbeTimeout = std::chrono::milliseconds(2000);
}  // namespace

/// One accepted fd on its way to a worker (main loop thread): its message, and the hand-off
/// that its outcome goes back to (a slot is an allocation of its own).
struct RingHandOff::Slot : detail::RingMessage {
  explicit Slot(RingHandOff& owner) noexcept : RingMessage(hook<&Slot::on_sent>), hand_off(owner) {}
  void on_sent(Result<void> delivered) noexcept { hand_off.on_sent(*this, delivered); }
  RingHandOff& hand_off;
  size_t worker = 0;
  int fd = -1;  // still ours until the main ring's completion confirms delivery
  Slot* next_free = nullptr;
};

RingHandOff::RingHandOff(EventLoop& main_loop, std::vector<EventLoop*> workers, TcpServer& server)
    : main_loop_(main_loop), workers_(std::move(workers)), server_(server) {
  for (size_t i = 0; i < workers_.size(); ++i) {
    EventLoop* loop = workers_[i];
    // The handler belongs to the worker's thread: install it there.
    loop->post([this, loop, i] {
      detail::LoopAccess::set_message_handler(*loop,
                                              [this, i](int32_t value) { receive(i, value); });
    });
  }
}

RingHandOff::~RingHandOff() = default;

Task<> RingHandOff::probe(const bool& stopping) {
  auto deadline = std::chrono::steady_clock::now() + kProbeTimeout;
  size_t sent = 0;
  std::error_code failure;
  while (sent < workers_.size() && !stopping && std::chrono::steady_clock::now() < deadline) {
    auto result = co_await detail::send_message(main_loop_, *workers_[sent], kProbe);
    if (result) {
      ++sent;
    } else if (result.error() == std::errc::connection_refused) {
      co_await io::sleep_for(main_loop_, std::chrono::milliseconds(1));  // handler not set yet
    } else {
      failure = result.error();
      break;
    }
  }
  while (!failure && probes_received_.load() < workers_.size() && !stopping &&
         std::chrono::steady_clock::now() < deadline) {
    co_await io::sleep_for(main_loop_, std::chrono::milliseconds(1));
  }
  if (stopping) co_return;
  if (!failure && probes_received_.load() == workers_.size()) {
    LOG_INFO("hand-off: IORING_OP_MSG_RING into {} worker rings", workers_.size());
    co_return;
  }
  active_ = false;
  LOG_WARN("msg_ring_handoff: {}; handing connections to workers through the task queue + eventfd",
           failure ? "a probe message failed (" + failure.message() + ")"
                   : "a worker did not receive a probe message within " +
                         std::to_string(kProbeTimeout.count()) + " ms");
}

bool RingHandOff::send(size_t index, UniqueFd& fd) {
  if (!active_) return false;
  Slot* slot = free_;
  if (slot != nullptr) {
    free_ = slot->next_free;
  } else {
    slots_.push_back(std::make_unique<Slot>(*this));
    slot = slots_.back().get();
  }
  if (auto sent = slot->send(main_loop_, *workers_[index], fd.get()); !sent) {
    // Nothing left (no submission room, or the worker is stopping): the fd is untouched.
    LOG_DEBUG("msg_ring hand-off refused ({}): using the task queue", sent.error().message());
    slot->next_free = free_;
    free_ = slot;
    return false;
  }
  slot->worker = index;
  slot->fd = fd.release();
  return true;
}

void RingHandOff::on_sent(Slot& slot, Result<void> delivered) noexcept {
  const size_t worker = slot.worker;
  int fd = std::exchange(slot.fd, -1);
  slot.next_free = free_;
  free_ = &slot;
  if (delivered) {  // the worker owns the fd now (and may have closed it already)
    delivered_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // Not delivered, so the fd is still ours: this connection goes another way.
  if (delivered.error() == std::errc::value_too_large) {  // EOVERFLOW: the worker's CQ is full
    auto now = std::chrono::steady_clock::now();
    if (now - last_warning_ >= std::chrono::seconds(1)) {
      last_warning_ = now;
      LOG_WARN("msg_ring hand-off: a worker's completion queue is full; using the task queue");
    }
  } else if (active_) {
    active_ = false;
    LOG_WARN(
        "msg_ring hand-off failed ({}); handing connections to workers through the task "
        "queue + eventfd from now on",
        delivered.error().message());
  }
  server_.fall_back_from_ring(worker, UniqueFd(fd));
}

void RingHandOff::receive(size_t index, int32_t value) {
  if (value == kProbe) {
    probes_received_.fetch_add(1);
    return;
  }
  server_.deliver_from_ring(index, UniqueFd(value), workers_[index]->io_closed());
}

}  // namespace ucp::detail

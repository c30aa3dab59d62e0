#pragma once
// BufferStack: the epoll backend's receive buffers (see ReceiveBuffers). No kernel picks a
// buffer here: when a multishot receive finds its socket readable, the backend takes the top
// of a free stack, receives into it and names it in the completion. LIFO, so the buffers in
// use are the ones touched last (still in cache) and a lightly loaded loop keeps cycling
// through a handful of them.
//
// Thread contract: the owning loop's thread only.

#include <cstdint>
#include <memory>
#include <vector>

#include "ucp/base/Result.h"

#include "../ReceiveBuffers.h"

namespace ucp::detail {

class BufferStack final : public ReceiveBuffers {
 public:
  /// `count` is rounded up to a power of two, as the io_uring ring requires, so that both
  /// backends hold the same pool for the same configuration.
  static Result<std::unique_ptr<BufferStack>> create(uint32_t count, uint32_t buffer_size);

  /// The id of a free buffer, or -1 when every provided buffer is out.
  int32_t take() noexcept {
    if (free_.empty()) return -1;
    const uint16_t id = free_.back();
    free_.pop_back();
    return id;
  }
  /// A taken buffer that received nothing goes back on top.
  void put_back(uint16_t id) noexcept { free_.push_back(id); }
  size_t free_count() const noexcept { return free_.size(); }

 private:
  BufferStack() = default;
  void provide(uint32_t first, uint32_t n) noexcept override;
  void give_back(uint16_t id) noexcept override { free_.push_back(id); }

  std::vector<uint16_t> free_;  // capacity reserved for the whole pool: never reallocates
};

}  // namespace ucp::detail

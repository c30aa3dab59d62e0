#pragma once
// LoopCounters: what a loop and its backend count (EventLoop::stats()), kept so that any thread
// may read them while the loop counts. Private to src/io.

#include <atomic>
#include <cstdint>

#include "ucp/io/EventLoop.h"

namespace ucp::detail {

/// The loop's counters (LoopStats), written by the loop's thread only and read from any
/// thread: each is a relaxed load and store (plain moves on x86, no locked instruction), so
/// that a scrape on another thread (EventLoop::stats) reads whole values.
struct LoopCounters {
  class Cell {
   public:
    Cell& operator++() noexcept { return *this += 1; }
    Cell& operator+=(uint64_t n) noexcept {
      value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
      return *this;
    }
    uint64_t get() const noexcept { return value_.load(std::memory_order_relaxed); }

   private:
    std::atomic<uint64_t> value_{0};
  };
  Cell submit_calls;
  Cell operations_submitted;
  Cell completion_overflows;
  Cell deferred_submissions;
  Cell rejected_submissions;
  Cell busy_retries;
  Cell busy_polls;
  Cell busy_poll_hits;

  LoopStats snapshot() const noexcept {
    return {submit_calls.get(),         operations_submitted.get(), completion_overflows.get(),
            deferred_submissions.get(), rejected_submissions.get(), busy_retries.get(),
            busy_polls.get(),           busy_poll_hits.get()};
  }
};

}  // namespace ucp::detail

#include "ucp/net/EventLoopThreadPool.h"

#include <future>

#include "ucp/log/Logger.h"

namespace ucp {

EventLoopThreadPool::EventLoopThreadPool(size_t threads, const LoopOptions& options,
                                         const EventLoop* share_with)
    : thread_count_(threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : threads),
      options_(options),
      share_with_(share_with) {}

EventLoopThreadPool::~EventLoopThreadPool() {
  stop_all();
  join();
}

std::string EventLoopThreadPool::start(std::string* warnings) {
  loops_.resize(thread_count_);
  for (size_t i = 0; i < thread_count_; ++i) {
    std::promise<std::string> ready;
    auto created = ready.get_future();
    // The loop is created on its own thread: with SINGLE_ISSUER that thread is the only
    // submitter, and the ring's memory is first touched where it will be used.
    threads_.emplace_back([this, i, &ready] {
      std::string notes;
      auto loop = EventLoop::create(options_, &notes, share_with_);
      if (!loop) {
        ready.set_value("worker " + std::to_string(i) + ": " +
                        EventLoop::describe_setup_error(loop.error(), options_));
        return;
      }
      loops_[i] = std::move(*loop);
      EventLoop* self = loops_[i].get();
      ready.set_value(i == 0 ? notes : std::string());  // each worker warns alike: say it once
      self->run();
    });
    std::string result = created.get();
    if (!loops_[i]) {
      stop_all();
      join();
      return result;
    }
    if (warnings) *warnings += result;
  }
  return {};
}

EventLoop& EventLoopThreadPool::next_loop() noexcept {
  EventLoop& loop = *loops_[next_];
  next_ = (next_ + 1) % loops_.size();
  return loop;
}

void EventLoopThreadPool::stop_all() noexcept {
  for (auto& loop : loops_) {
    if (loop) loop->stop();
  }
}

void EventLoopThreadPool::join() noexcept {
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

}  // namespace ucp

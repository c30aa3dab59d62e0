#include "ucp/net/EventLoopThreadPool.h"

#include <future>
#include <new>
#include <system_error>

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

Result<void, Error> EventLoopThreadPool::start(std::string* warnings) {
  loops_.resize(thread_count_);
  for (size_t i = 0; i < thread_count_; ++i) {
    // Every failure names the worker and server.thread_num: under an address-space or thread
    // limit, the count of workers is what decides whether the next one can start.
    const std::string which = "worker " + std::to_string(i + 1) + " of " +
                              std::to_string(thread_count_) + " (server.thread_num): ";
    std::promise<std::string> ready;
    auto created = ready.get_future();
    // The loop is created on its own thread: with SINGLE_ISSUER that thread is the only
    // submitter, and the ring's memory is first touched where it will be used.
    try {
      threads_.emplace_back([this, i, &ready, &which] {
        std::string notes;
        std::string failure;
        try {
          auto loop = EventLoop::create(options_, &notes, share_with_);
          if (loop) {
            loops_[i] = std::move(*loop);
          } else {
            failure = EventLoop::describe_setup_error(loop.error(), options_);
          }
        } catch (const std::bad_alloc&) {  // a set-up allocation the process cannot have
          failure = "out of memory while setting up its loop";
        }
        if (!loops_[i]) {
          ready.set_value(which + failure);
          return;
        }
        EventLoop* self = loops_[i].get();
        ready.set_value(i == 0 ? notes : std::string());  // each worker warns alike: say it once
        self->run();
      });
    } catch (const std::system_error& e) {  // no thread: RLIMIT_NPROC, or no room for a stack
      stop_all();
      join();
      return Unexpected{Error(which + "cannot start its thread: " + e.code().message() +
                                  " (threads count against RLIMIT_NPROC and their stacks "
                                  "against RLIMIT_AS); lower server.thread_num",
                              e.code())};
    }
    std::string result = created.get();
    if (!loops_[i]) {
      stop_all();
      join();
      return Unexpected{Error(std::move(result))};
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

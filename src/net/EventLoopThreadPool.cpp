#include "ucp/net/EventLoopThreadPool.h"

#include <future>
#include <new>
#include <system_error>

#include "ucp/log/Logger.h"

namespace ucp {

EventLoopThreadPool::EventLoopThreadPool(size_t threads, const LoopOptions& options,
                                         const EventLoop* share_with, CpuAffinity affinity)
    : thread_count_(threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : threads),
      options_(options),
      share_with_(share_with),
      affinity_(std::move(affinity)) {}

EventLoopThreadPool::~EventLoopThreadPool() {
  stop_all();
  join();
}

Result<void, Error> EventLoopThreadPool::start(std::string* warnings) {
  loops_.resize(thread_count_);
  // Read before any thread of ours is pinned: "auto" spreads over what the process was given.
  allowed_cpus_ = allowed_cpus();
  // Every worker sets its loop up at the same time: a ring with registered buffers takes tens
  // of milliseconds (the kernel pins its pages), and one after the other 16 of them took
  // seconds. Each says when it is done (its message: warnings, or why it failed).
  std::vector<std::promise<std::string>> ready(thread_count_);
  std::vector<std::future<std::string>> created;
  created.reserve(thread_count_);
  auto which = [this](size_t i) {
    // Every failure names the worker and server.thread_num: under an address-space or thread
    // limit, the count of workers is what decides whether the next one can start.
    return "worker " + std::to_string(i + 1) + " of " + std::to_string(thread_count_) +
           " (server.thread_num): ";
  };
  std::string failure;
  std::error_code failure_code;
  for (size_t i = 0; i < thread_count_; ++i) {
    created.push_back(ready[i].get_future());
    // The loop is created on its own thread: with SINGLE_ISSUER that thread is the only
    // submitter, and the ring's memory is first touched where it will be used.
    try {
      threads_.emplace_back([this, i, promise = &ready[i]] {
        name_current_thread("ucp-worker-" + std::to_string(i));
        std::string notes;
        std::string error;
        const int cpu = worker_cpu(i);
        if (auto pinned = cpu >= 0 ? pin_current_thread(cpu) : Result<void>{}; !pinned) {
          error = "cannot run on CPU " + std::to_string(cpu) +
                  " (server.cpu_affinity = " + affinity_.to_string() +
                  "): " + pinned.error().message() + "; this process may run on CPUs " +
                  format_cpu_list(allowed_cpus_);
        } else {
          try {
            auto loop = EventLoop::create(options_, &notes, share_with_);
            if (loop) {
              loops_[i] = std::move(*loop);
            } else {
              error = EventLoop::describe_setup_error(loop.error(), options_);
            }
          } catch (const std::bad_alloc&) {  // a set-up allocation the process cannot have
            error = "out of memory while setting up its loop";
          }
        }
        if (!loops_[i]) {
          promise->set_value(std::move(error));
          return;
        }
        EventLoop* self = loops_[i].get();
        promise->set_value(std::move(notes));
        self->run();
      });
    } catch (const std::system_error& e) {  // no thread: RLIMIT_NPROC, or no room for a stack
      failure = which(i) + "cannot start its thread: " + e.code().message() +
                " (threads count against RLIMIT_NPROC and their stacks against RLIMIT_AS); "
                "lower server.thread_num";
      failure_code = e.code();
      created.pop_back();
      break;
    }
  }
  // Every started thread answers before any loop is stopped: stop_all() reads loops_.
  std::string notes;
  for (size_t i = 0; i < created.size(); ++i) {
    std::string message = created[i].get();
    if (!loops_[i]) {
      if (failure.empty()) failure = which(i) + message;
    } else if (notes.empty()) {
      notes = std::move(message);  // each worker warns alike: say it once
    }
  }
  if (!failure.empty()) {
    stop_all();
    join();
    return Unexpected{Error(std::move(failure), failure_code)};
  }
  if (warnings) *warnings += notes;
  return {};
}

int EventLoopThreadPool::worker_cpu(size_t index) const noexcept {
  return affinity_.worker_cpu(index, allowed_cpus_);
}

int EventLoopThreadPool::main_cpu() const noexcept {
  return affinity_.main_cpu(thread_count_, allowed_cpus_);
}

void EventLoopThreadPool::place_main_thread() const {
  name_current_thread("ucp-main");
  if (const int cpu = main_cpu(); cpu >= 0) {
    if (auto pinned = pin_current_thread(cpu); !pinned) {
      LOG_WARN("server.cpu_affinity: cannot run the main loop on CPU {}: {}; it runs unpinned", cpu,
               pinned.error().message());
    }
  }
}

std::string EventLoopThreadPool::describe_placement() const {
  const auto where = [](int cpu) { return cpu >= 0 ? "CPU " + std::to_string(cpu) : "any CPU"; };
  std::string text = "threads ucp-main (" + where(main_cpu()) + "), ucp-worker-0";
  if (thread_count_ > 1) text += ".." + std::to_string(thread_count_ - 1);
  if (!affinity_.pinned()) return text + " (any CPU)";
  std::vector<int> cpus;
  for (size_t i = 0; i < thread_count_; ++i) cpus.push_back(worker_cpu(i));
  std::string list;
  for (int cpu : cpus) list += (list.empty() ? "" : ",") + std::to_string(cpu);
  return text + (thread_count_ > 1 ? " (CPUs " : " (CPU ") + list +
         "), cpu_affinity=" + affinity_.to_string();
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

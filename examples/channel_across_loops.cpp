// A Channel between loops: two producer loops (threads) send numbered jobs, one consumer loop
// sums them. The channel is bounded (8 jobs), so fast producers wait for the consumer; each
// waiter is resumed on its own loop. The last producer closes the channel; the consumer drains
// what is left, then sees kClosed.
// Usage: bin/example_channel_across_loops

#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "ucp/io/Channel.h"

namespace {

struct Job {
  int producer;
  int number;
};

ucp::Task<> produce(ucp::EventLoop& loop, ucp::Channel<Job>& jobs, int id,
                    std::atomic<int>& producers_left) {
  for (int n = 1; n <= 1000; ++n) {
    if (!co_await jobs.send(loop, Job{id, n})) break;  // closed: stop producing
  }
  if (producers_left.fetch_sub(1) == 1) jobs.close();  // the last one out closes
  loop.stop();
}

ucp::Task<> consume(ucp::EventLoop& loop, ucp::Channel<Job>& jobs) {
  long sum = 0;
  int count = 0;
  while (auto job = co_await jobs.receive(loop)) {  // resumes here, on the consumer's loop
    sum += job->number;
    ++count;
  }
  std::printf("consumed %d jobs, sum %ld (expected %d jobs, sum %ld)\n", count, sum, 2000,
              2L * 1000 * 1001 / 2);
  loop.stop();
}

}  // namespace

int main() {
  ucp::Channel<Job> jobs(8);
  std::atomic<int> producers_left{2};
  std::vector<std::unique_ptr<ucp::EventLoop>> loops;
  for (int i = 0; i < 3; ++i) {
    auto loop = ucp::EventLoop::create(ucp::LoopOptions{});
    if (!loop) {
      std::fprintf(stderr, "%s\n", loop.error().message().c_str());
      return 1;
    }
    loops.push_back(std::move(*loop));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    ucp::EventLoop& loop = *loops[static_cast<size_t>(i)];
    // post: the coroutine starts on the loop's own thread, once it runs.
    loop.post([&loop, &jobs, &producers_left, i] {
      loop.spawn(i == 0 ? consume(loop, jobs) : produce(loop, jobs, i, producers_left));
    });
    threads.emplace_back([&loop] { loop.run(); });
  }
  for (auto& thread : threads) thread.join();
}

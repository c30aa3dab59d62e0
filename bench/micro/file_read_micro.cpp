// 4 KiB page-cache reads through the event loop: what the epoll backend's two ways of doing
// file I/O cost. epoll cannot wait for a regular file, so a read is either done in the loop
// thread with preadv2(RWF_NOWAIT) (a page-cache hit completes; a miss says EAGAIN) or handed
// to a worker thread that does the blocking pread and wakes the loop through an eventfd.
// io_uring (its own async read) is the reference.
//
//   bin/file_read_micro [--benchmark_filter=epoll]
//
// Depth 1: one read at a time (latency); depth 16: sixteen in flight (throughput). Wall time:
// the workers spend CPU on threads of their own.

#include <array>
#include <cstdlib>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include "ucp/io/EventLoop.h"
#include "ucp/io/Operations.h"
#include "ucp/io/detail/LoopAccess.h"

#include "io/epoll/EpollBackend.h"

namespace {

using ucp::BackendKind;
using ucp::EventLoop;
using ucp::Task;

constexpr size_t kBlock = 4096;
constexpr size_t kFileBytes = 1 << 20;  // 256 blocks, all in the page cache

enum class Mode { kIoUring, kEpollNowait, kEpollWorkers };

struct Reader {
  EventLoop& loop;
  int fd;
  int pending = 0;
  std::coroutine_handle<> waiter;
  bool failed = false;
};

Task<> read_one(Reader& reader, uint64_t offset) {
  std::array<std::byte, kBlock> buffer;
  auto n = co_await ucp::io::read(reader.loop, reader.fd, buffer, offset);
  if (!n || *n != kBlock) reader.failed = true;
  if (--reader.pending == 0 && reader.waiter)
    reader.loop.schedule(std::exchange(reader.waiter, {}));
}

struct AllRead {
  Reader& reader;
  bool await_ready() const noexcept { return reader.pending == 0; }
  void await_suspend(std::coroutine_handle<> caller) noexcept { reader.waiter = caller; }
  void await_resume() const noexcept {}
};

Task<> run_reads(benchmark::State& state, Reader& reader, int depth) {
  uint64_t block = 0;
  for (auto _ : state) {
    reader.pending = depth;
    for (int i = 0; i < depth; ++i) {
      reader.loop.spawn(read_one(reader, (block++ % (kFileBytes / kBlock)) * kBlock));
    }
    co_await AllRead{reader};
  }
  reader.loop.stop();
}

void BM_Read4KiB(benchmark::State& state, Mode mode) {
  const int depth = static_cast<int>(state.range(0));
  ucp::LoopOptions options;
  options.backend = mode == Mode::kIoUring ? BackendKind::kIoUring : BackendKind::kEpoll;
  auto created = EventLoop::create(options);
  if (!created) {
    state.SkipWithError("cannot create the loop");
    return;
  }
  EventLoop& loop = **created;
  if (mode == Mode::kEpollWorkers) {
    static_cast<ucp::detail::EpollBackend&>(ucp::detail::LoopAccess::backend(loop))
        .set_file_nowait(false);
  }
  char path[] = "/tmp/ucp-file-micro-XXXXXX";
  const int fd = ::mkstemp(path);
  ::unlink(path);
  std::vector<char> data(kFileBytes, 'x');
  if (fd < 0 || ::pwrite(fd, data.data(), data.size(), 0) != static_cast<ssize_t>(kFileBytes)) {
    state.SkipWithError("cannot write the file");
    return;
  }
  Reader reader{loop, fd, 0, {}, false};
  loop.spawn(run_reads(state, reader, depth));
  loop.run();
  ::close(fd);
  if (reader.failed) state.SkipWithError("a read failed");
  state.SetItemsProcessed(state.iterations() * depth);
  state.SetBytesProcessed(state.iterations() * depth * static_cast<int64_t>(kBlock));
}

BENCHMARK_CAPTURE(BM_Read4KiB, io_uring, Mode::kIoUring)->Arg(1)->Arg(16)->UseRealTime();
BENCHMARK_CAPTURE(BM_Read4KiB, epoll_nowait_in_loop, Mode::kEpollNowait)
    ->Arg(1)
    ->Arg(16)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Read4KiB, epoll_worker_threads, Mode::kEpollWorkers)
    ->Arg(1)
    ->Arg(16)
    ->UseRealTime();

}  // namespace

// file_read_bench: random block reads through ucp::File on one loop at a fixed queue depth
// (scripts/bench-file.sh), the UCP side of the comparison with fio and pread threads.
//
//   file_read_bench -f FILE [-q DEPTH] [-b BLOCK] [-d SECONDS] [-o 0|1] [-e io_uring|epoll]
//
// DEPTH coroutines (32) each keep one read in flight: co_await file.read(buffer, offset) at a
// block-aligned offset from its own xorshift generator, so the loop always has DEPTH reads
// outstanding, as fio's iodepth. -o 1 opens with O_DIRECT (AlignedBuffer). At the end one
// line:  reads N seconds S

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ucp/io/File.h"
#include "ucp/memory/AlignedBuffer.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Run {
  uint64_t blocks = 0;
  size_t block = 4096;
  Clock::time_point end;
  uint64_t reads = 0;
  size_t running = 0;
  bool failed = false;
};

uint64_t next(uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

ucp::Task<> reader(ucp::EventLoop& loop, ucp::File& file, Run& run, uint64_t seed) {
  auto buffer = ucp::AlignedBuffer::allocate(run.block, 4096);
  if (!buffer) {
    run.failed = true;
  } else {
    uint64_t state = 0x9E3779B97F4A7C15ull * (seed + 1);
    // The clock is read every 64 reads: a steady_clock read per 4 KiB page-cache hit would
    // be a visible part of the cost.
    for (uint64_t mine = 0; (mine & 63) != 0 || Clock::now() < run.end; ++mine) {
      const uint64_t offset = (next(state) % run.blocks) * run.block;
      auto n = co_await file.read(buffer->bytes().first(run.block), offset);
      if (!n || *n != run.block) {
        run.failed = true;
        break;
      }
      ++run.reads;
    }
  }
  if (--run.running == 0) loop.stop();
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  size_t depth = 32;
  Run run;
  double seconds = 5;
  bool direct = false;
  ucp::LoopOptions options;
  options.ring_entries = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    const std::string_view value = argv[i + 1];
    if (flag == "-f") path = value;
    if (flag == "-q") depth = static_cast<size_t>(std::atoi(argv[i + 1]));
    if (flag == "-b") run.block = static_cast<size_t>(std::atoi(argv[i + 1]));
    if (flag == "-d") seconds = std::atof(argv[i + 1]);
    if (flag == "-o") direct = std::atoi(argv[i + 1]) != 0;
    if (flag == "-e") {
      options.backend = value == "epoll" ? ucp::BackendKind::kEpoll : ucp::BackendKind::kIoUring;
    }
  }
  if (path.empty() || depth == 0 || run.block == 0 || run.block % 512 != 0) {
    std::fprintf(
        stderr,
        "usage: %s -f FILE [-q DEPTH] [-b BLOCK] [-d SECONDS] [-o 0|1] [-e io_uring|epoll]\n",
        argv[0]);
    return 2;
  }
  auto loop = ucp::EventLoop::create(options);
  if (!loop) {
    std::fprintf(stderr, "%s\n", loop.error().message().c_str());
    return 1;
  }
  std::optional<ucp::File> opened;
  const auto start = Clock::now();
  loop->spawn([](ucp::EventLoop& l, std::string p, bool d, std::optional<ucp::File>& out, Run& r,
                 size_t q, double s) -> ucp::Task<> {
    auto f = co_await ucp::File::open(l, p, O_RDONLY | (d ? O_DIRECT : 0));
    auto size = f ? f->size() : ucp::Result<uint64_t>(0);
    if (!f || !size || *size < r.block) {
      std::fprintf(stderr, "%s: %s\n", p.c_str(),
                   f ? "shorter than one block" : f.error().message().c_str());
      r.failed = true;
      l.stop();
      co_return;
    }
    out.emplace(std::move(*f));
    r.blocks = *size / r.block;
    r.end = Clock::now() +
            std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
    r.running = q;
    for (size_t i = 0; i < q; ++i) l.spawn(reader(l, *out, r, i));
  }(**loop, path, direct, opened, run, depth, seconds));
  loop->run();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("reads %llu seconds %.3f\n", static_cast<unsigned long long>(run.reads), elapsed);
  return run.failed ? 1 : 0;
}

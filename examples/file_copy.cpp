// Copies a file on one loop without blocking it: eight 64 KiB reads in flight at once (one
// submission), each piece written at its own offset, then fsync, so the copy is on disk when
// it says so. Errors (a missing file, a full disk) come back as values.
// Usage: bin/example_file_copy FROM TO

#include <array>
#include <cstdio>
#include <vector>

#include "ucp/io/File.h"

namespace {

constexpr size_t kPiece = 64 * 1024;
constexpr size_t kInFlight = 8;

ucp::Task<int> copy(ucp::EventLoop& loop, const char* from_path, const char* to_path) {
  auto from = co_await ucp::File::open(loop, from_path, O_RDONLY);
  if (!from) {
    std::fprintf(stderr, "%s: %s\n", from_path, from.error().message().c_str());
    co_return 1;
  }
  auto to = co_await ucp::File::open(loop, to_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!to) {
    std::fprintf(stderr, "%s: %s\n", to_path, to.error().message().c_str());
    co_return 1;
  }
  std::vector<std::byte> buffer(kPiece * kInFlight);
  std::array<ucp::ReadRequest, kInFlight> reads;
  uint64_t offset = 0;
  for (bool more = true; more;) {
    for (size_t i = 0; i < kInFlight; ++i) {
      reads[i].set(std::span(buffer).subspan(i * kPiece, kPiece), offset + i * kPiece);
    }
    co_await from->read_batch(reads);  // resumes when all eight have completed
    for (const ucp::ReadRequest& read : reads) {
      auto n = read.result();
      if (!n) {
        std::fprintf(stderr, "read: %s\n", n.error().message().c_str());
        co_return 1;
      }
      // Reads of a regular file are short only at its end.
      if (auto written = co_await to->write_all(read.buffer().first(*n), read.offset()); !written) {
        std::fprintf(stderr, "write: %s\n", written.error().message().c_str());
        co_return 1;
      }
      if (*n < kPiece) more = false;
    }
    offset += kPiece * kInFlight;
  }
  if (auto synced = co_await to->fsync(); !synced) {
    std::fprintf(stderr, "fsync: %s\n", synced.error().message().c_str());
    co_return 1;
  }
  std::printf("copied %llu bytes\n", static_cast<unsigned long long>(*to->size()));
  (void)co_await from->close();
  co_return (co_await to->close()) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s FROM TO\n", argv[0]);
    return 2;
  }
  auto loop = ucp::EventLoop::create(ucp::LoopOptions{});
  if (!loop) {
    std::fprintf(stderr, "%s\n", loop.error().message().c_str());
    return 1;
  }
  int status = 1;
  loop->spawn([](ucp::EventLoop& l, const char* from, const char* to, int& out) -> ucp::Task<> {
    out = co_await copy(l, from, to);
    l.stop();
  }(**loop, argv[1], argv[2], status));
  loop->run();
  return status;
}

// pread_threads: random 4 KiB reads by THREADS threads, each blocking in pread(2), the classic
// thread-pool file reader UCP's File is measured against (scripts/bench-file.sh).
//
//   pread_threads -f FILE [-t THREADS] [-b BLOCK] [-d SECONDS] [-o 0|1]
//
// -o 1 opens with O_DIRECT (buffers aligned to 4096). Each thread draws block-aligned offsets
// from its own xorshift generator. At the end one line:  reads N seconds S

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;

uint64_t next(uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  size_t threads = 4, block = 4096;
  double seconds = 5;
  bool direct = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (flag == "-f") path = argv[i + 1];
    if (flag == "-t") threads = static_cast<size_t>(std::atoi(argv[i + 1]));
    if (flag == "-b") block = static_cast<size_t>(std::atoi(argv[i + 1]));
    if (flag == "-d") seconds = std::atof(argv[i + 1]);
    if (flag == "-o") direct = std::atoi(argv[i + 1]) != 0;
  }
  if (path.empty() || threads == 0 || block == 0 || block % 512 != 0) {
    std::fprintf(stderr, "usage: %s -f FILE [-t THREADS] [-b BLOCK] [-d SECONDS] [-o 0|1]\n",
                 argv[0]);
    return 2;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < block) {
    std::perror(path.c_str());
    return 1;
  }
  const uint64_t blocks = static_cast<uint64_t>(st.st_size) / block;
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(seconds));
  std::atomic<uint64_t> total{0};
  std::atomic<bool> failed{false};
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      void* buffer = nullptr;
      if (::posix_memalign(&buffer, 4096, block) != 0) return;
      uint64_t state = 0x9E3779B97F4A7C15ull * (t + 1);
      uint64_t reads = 0;
      // The clock is read every 64 reads, as the other programs do.
      while ((reads & 63) != 0 || Clock::now() < end) {
        const auto offset = static_cast<off_t>((next(state) % blocks) * block);
        if (::pread(fd, buffer, block, offset) != static_cast<ssize_t>(block)) {
          failed = true;
          break;
        }
        ++reads;
      }
      total += reads;
      std::free(buffer);
    });
  }
  for (auto& thread : pool) thread.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("reads %llu seconds %.3f\n", static_cast<unsigned long long>(total.load()), elapsed);
  ::close(fd);
  return failed ? 1 : 0;
}

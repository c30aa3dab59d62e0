// ucp::File over real files in a temporary directory, on both backends: the same results from
// io_uring and from epoll (page-cache reads in the loop, the rest on its file workers).

#include "ucp/io/File.h"

#include <array>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ucp/memory/AlignedBuffer.h"

#include "Backends.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;

struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/ucp-file-XXXXXX";
    if (::mkdtemp(name) != nullptr) path = name;
  }
  ~TempDir() {
    if (!path.empty()) (void)std::system(("rm -rf '" + path + "'").c_str());
  }
};

std::string pattern(size_t size, size_t seed = 0) {
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i)
    out[i] = static_cast<char>((i * 131 + seed * 7 + i / 4096) % 251);
  return out;
}

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::string text_of(std::span<const std::byte> bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

class FileTest : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    UCP_SKIP_UNLESS_BACKEND_USABLE(GetParam());
    ASSERT_FALSE(dir_.path.empty());
    LoopOptions options;
    options.backend = GetParam();
    options.ring_entries = 256;
    auto loop = EventLoop::create(options);
    ASSERT_TRUE(loop) << loop.error().message();
    loop_ = std::move(*loop);
  }

  // Runs `body` to its end on the loop (bounded: the loop stops after 20 s regardless).
  void run(Task<> body) {
    bool finished = false;
    loop_->spawn([](EventLoop& l, Task<> inner, bool& done) -> Task<> {
      co_await std::move(inner);
      done = true;
      l.stop();
    }(*loop_, std::move(body), finished));
    if (!finished) {
      loop_->spawn([](EventLoop& l) -> Task<> {
        co_await io::sleep_for(l, 20s);
        l.stop();
      }(*loop_));
      loop_->run();
    }
    EXPECT_TRUE(finished) << "the test body did not finish";
    EXPECT_EQ(loop_->in_flight(), 0u);
  }

  std::string path(const std::string& name) const { return dir_.path + "/" + name; }

  TempDir dir_;
  std::unique_ptr<EventLoop> loop_;
};

INSTANTIATE_TEST_SUITE_P(Backends, FileTest, test::kAllBackends, test::backend_name);

TEST_P(FileTest, WritesSyncsAndReadsBack) {
  const std::string data = pattern(100000);
  std::string back;
  Result<uint64_t> size = 0;
  run([](EventLoop& l, std::string p, const std::string& d, std::string& out,
         Result<uint64_t>& length) -> Task<> {
    auto file = co_await File::open(l, p, O_CREAT | O_RDWR | O_TRUNC, 0600);
    EXPECT_TRUE(file) << file.error().message();
    if (!file) co_return;
    EXPECT_TRUE(co_await file->write_all(bytes_of(d), 0));
    EXPECT_TRUE(co_await file->fsync());
    EXPECT_TRUE(co_await file->fdatasync());
    length = file->size();
    std::vector<std::byte> buffer(d.size());
    auto n = co_await file->read_exact(buffer, 0);
    EXPECT_TRUE(n);
    if (n) out = text_of(std::span(buffer.data(), *n));
    EXPECT_TRUE(co_await file->close());
    EXPECT_FALSE(file->is_open());
  }(*loop_, path("data"), data, back, size));
  ASSERT_TRUE(size);
  EXPECT_EQ(*size, data.size());
  EXPECT_TRUE(back == data);
}

TEST_P(FileTest, ReadsAreShortAtTheEndOfTheFileAndReadExactStopsThere) {
  const std::string data = pattern(10000, 1);
  struct Outcome {
    Result<size_t> tail = 0, at_end = 1, past_end = 1, exact = 0;
    std::string exact_bytes;
  } o;
  run([](EventLoop& l, std::string p, const std::string& d, Outcome& out) -> Task<> {
    auto file = co_await File::open(l, p, O_CREAT | O_RDWR | O_TRUNC);
    if (!file) co_return;
    EXPECT_TRUE(co_await file->write_all(bytes_of(d), 0));
    std::array<std::byte, 4096> block;
    out.tail = co_await file->read(block, 8192);
    out.at_end = co_await file->read(block, 10000);
    out.past_end = co_await file->read(block, 50000);
    std::vector<std::byte> big(16384);
    out.exact = co_await file->read_exact(big, 0);
    if (out.exact) out.exact_bytes = text_of(std::span(big.data(), *out.exact));
    (void)co_await file->close();
  }(*loop_, path("short"), data, o));
  ASSERT_TRUE(o.tail && o.at_end && o.past_end && o.exact);
  EXPECT_EQ(*o.tail, 10000u - 8192u);
  EXPECT_EQ(*o.at_end, 0u);
  EXPECT_EQ(*o.past_end, 0u);
  EXPECT_EQ(*o.exact, data.size());
  EXPECT_TRUE(o.exact_bytes == data);
}

// A write that meets the file size limit (RLIMIT_FSIZE) is short: write() says how much went in,
// write_all() goes on and then reports file_too_large as a value, and the bytes that fit are
// in the file. The limit is the process's, so io_uring's workers and epoll's file threads obey
// it too; SIGXFSZ is ignored for the test, as a server would.
TEST_P(FileTest, ShortWritesAtTheSizeLimitAreCountedAndTheRestIsAnError) {
  constexpr rlim_t kLimit = 50000;
  const std::string data = pattern(100000, 4);
  struct Outcome {
    Result<size_t> straddling = 0;
    Result<void> all;
    std::string back;
  } o;
  rlimit before{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &before), 0);
  if (before.rlim_cur != RLIM_INFINITY && before.rlim_cur < kLimit) GTEST_SKIP() << "low limit";
  auto* previous_handler = ::signal(SIGXFSZ, SIG_IGN);
  rlimit limited{kLimit, before.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  run([](EventLoop& l, std::string p, const std::string& d, Outcome& out) -> Task<> {
    auto file = co_await File::open(l, p, O_CREAT | O_RDWR | O_TRUNC);
    if (!file) co_return;
    out.straddling = co_await file->write(bytes_of(d).subspan(0, 20000), 40000);
    out.all = co_await file->write_all(bytes_of(d), 0);
    std::vector<std::byte> buffer(d.size());
    auto n = co_await file->read_exact(buffer, 0);
    if (n) out.back = text_of(std::span(buffer.data(), *n));
    (void)co_await file->close();
  }(*loop_, path("limited"), data, o));
  ::setrlimit(RLIMIT_FSIZE, &before);
  ::signal(SIGXFSZ, previous_handler);
  ASSERT_TRUE(o.straddling) << o.straddling.error().message();
  EXPECT_EQ(*o.straddling, kLimit - 40000);
  ASSERT_FALSE(o.all);
  EXPECT_EQ(o.all.error(), std::errc::file_too_large);
  EXPECT_EQ(o.back.size(), kLimit);
  EXPECT_TRUE(o.back == data.substr(0, kLimit));
}

TEST_P(FileTest, OpenFailuresAreErrorValues) {
  Result<File> missing = Unexpected{std::errc::io_error};
  Result<File> exists = Unexpected{std::errc::io_error};
  Result<File> directory = Unexpected{std::errc::io_error};
  run([](EventLoop& l, std::string dir, Result<File>& a, Result<File>& b,
         Result<File>& c) -> Task<> {
    a = co_await File::open(l, dir + "/none/such", O_RDONLY);
    auto made = co_await File::open(l, dir + "/once", O_CREAT | O_EXCL | O_WRONLY);
    EXPECT_TRUE(made);
    if (made) (void)co_await made->close();
    b = co_await File::open(l, dir + "/once", O_CREAT | O_EXCL | O_WRONLY);
    c = co_await File::open(l, dir, O_WRONLY);
  }(*loop_, dir_.path, missing, exists, directory));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), std::errc::no_such_file_or_directory);
  ASSERT_FALSE(exists);
  EXPECT_EQ(exists.error(), std::errc::file_exists);
  ASSERT_FALSE(directory);
  EXPECT_EQ(directory.error(), std::errc::is_a_directory);
}

// Many reads in flight from one coroutine (one submission), and many coroutines reading at once:
// every block comes back with its own bytes.
TEST_P(FileTest, ManyConcurrentReadsEachGetTheirOwnBytes) {
  constexpr size_t kBlock = 4096, kBlocks = 256;
  const std::string data = pattern(kBlock * kBlocks, 2);
  size_t batch_mismatches = 1, coroutine_mismatches = 1, reads_done = 0;
  run([](EventLoop& l, std::string p, const std::string& d, size_t& batch_bad, size_t& coro_bad,
         size_t& done) -> Task<> {
    auto file = co_await File::open(l, p, O_CREAT | O_RDWR | O_TRUNC);
    if (!file) co_return;
    EXPECT_TRUE(co_await file->write_all(bytes_of(d), 0));
    // One batch of 64 reads at scattered offsets, the last one past the end.
    constexpr size_t kBatch = 64;
    std::vector<std::byte> buffers(kBatch * kBlock);
    std::array<ReadRequest, kBatch> requests;
    for (size_t i = 0; i < kBatch; ++i) {
      const size_t block = (i * 97) % kBlocks;
      requests[i].set(std::span(buffers.data() + i * kBlock, kBlock),
                      i + 1 == kBatch ? d.size() + 100 : block * kBlock);
    }
    co_await file->read_batch(requests);
    batch_bad = 0;
    for (size_t i = 0; i + 1 < kBatch; ++i) {
      auto n = requests[i].result();
      const size_t block = (i * 97) % kBlocks;
      if (!n || *n != kBlock ||
          text_of(std::span(buffers.data() + i * kBlock, kBlock)) !=
              d.substr(block * kBlock, kBlock)) {
        ++batch_bad;
      }
    }
    auto last = requests[kBatch - 1].result();
    EXPECT_TRUE(last && *last == 0);
    // 32 coroutines, 32 reads each.
    coro_bad = 0;
    for (size_t c = 0; c < 32; ++c) {
      l.spawn(
          [](File& f, const std::string& all, size_t seed, size_t& bad, size_t& count) -> Task<> {
            std::array<std::byte, kBlock> block;
            for (size_t i = 0; i < 32; ++i) {
              const size_t index = (seed * 31 + i * 17) % kBlocks;
              auto n = co_await f.read(block, index * kBlock);
              if (!n || *n != kBlock || text_of(block) != all.substr(index * kBlock, kBlock)) ++bad;
              ++count;
            }
          }(*file, d, c, coro_bad, done));
    }
    for (int i = 0; i < 10000 && done < 32 * 32; ++i) co_await io::sleep_for(l, 1ms);
    (void)co_await file->close();
  }(*loop_, path("many"), data, batch_mismatches, coroutine_mismatches, reads_done));
  EXPECT_EQ(batch_mismatches, 0u);
  EXPECT_EQ(reads_done, 32u * 32u);
  EXPECT_EQ(coroutine_mismatches, 0u);
}

// O_DIRECT: aligned I/O works; a misaligned offset or length, or a buffer address the device
// cannot take, is refused with invalid_argument (the kernel's EINVAL), never a crash or a
// silent buffered read.
TEST_P(FileTest, DirectIoNeedsAlignmentAndSaysSoWithInvalidArgument) {
  const std::string data = pattern(64 * 1024, 3);
  struct Outcome {
    bool refused_at_open = false;
    std::string open_error;
    size_t alignment = 0;
    Result<size_t> aligned = 0;
    std::string aligned_bytes;
    Result<size_t> bad_address = 0, bad_offset = 0, bad_length = 0;
    Result<void> aligned_write = Unexpected{std::errc::io_error};
  } o;
  run([](EventLoop& l, std::string p, const std::string& d, Outcome& out) -> Task<> {
    {
      auto plain = co_await File::open(l, p, O_CREAT | O_RDWR | O_TRUNC);
      if (!plain) co_return;
      EXPECT_TRUE(co_await plain->write_all(bytes_of(d), 0));
      EXPECT_TRUE(co_await plain->fsync());
      (void)co_await plain->close();
    }
    auto file = co_await File::open(l, p, O_RDWR | O_DIRECT);
    if (!file) {
      out.refused_at_open = file.error() == std::errc::invalid_argument;
      out.open_error = file.error().message();
      co_return;
    }
    out.alignment = file->direct_alignment();
    const size_t a = out.alignment;
    auto buffer = AlignedBuffer::allocate(16384 + a, 4096);
    if (!buffer) co_return;
    out.aligned = co_await file->read(buffer->bytes().subspan(0, 4 * a), a);
    if (out.aligned) out.aligned_bytes = text_of(buffer->bytes().subspan(0, *out.aligned));
    // Across pages: the kernel checks a buffer address against the device's DMA alignment, and
    // may take a misaligned one that stays inside one page.
    out.bad_address = co_await file->read(buffer->bytes().subspan(1, 16384), 0);
    out.bad_offset = co_await file->read(buffer->bytes().subspan(0, 2 * a), 1);
    out.bad_length = co_await file->read(buffer->bytes().subspan(0, a + 1), 0);
    out.aligned_write = co_await file->write_all(buffer->bytes().subspan(0, a), 8 * a);
    (void)co_await file->close();
  }(*loop_, path("direct"), data, o));
  if (o.refused_at_open) {
    GTEST_SKIP() << "the file system of " << dir_.path << " refuses O_DIRECT (" << o.open_error
                 << "; tmpfs does)";
  }
  ASSERT_GT(o.alignment, 0u);
  ASSERT_TRUE(o.aligned) << o.aligned.error().message();
  EXPECT_EQ(*o.aligned, 4 * o.alignment);
  EXPECT_TRUE(o.aligned_bytes == data.substr(o.alignment, 4 * o.alignment));
  const std::pair<const char*, const Result<size_t>*> refused[] = {
      {"buffer address", &o.bad_address}, {"offset", &o.bad_offset}, {"length", &o.bad_length}};
  for (const auto& [what, r] : refused) {
    SCOPED_TRACE(std::string("misaligned ") + what);
    ASSERT_FALSE(*r) << "read " << **r << " bytes";
    EXPECT_EQ(r->error(), std::errc::invalid_argument);
  }
  EXPECT_TRUE(o.aligned_write);
}

TEST(AlignedBuffer, IsAlignedRoundedAndRefusesOddAlignments) {
  auto buffer = AlignedBuffer::allocate(5000, 4096);
  ASSERT_TRUE(buffer);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % 4096, 0u);
  EXPECT_EQ(buffer->size(), 8192u);
  AlignedBuffer moved = std::move(*buffer);
  EXPECT_EQ(moved.size(), 8192u);
  EXPECT_EQ(buffer->data(), nullptr);
  auto odd = AlignedBuffer::allocate(100, 3000);
  ASSERT_FALSE(odd);
  EXPECT_EQ(odd.error(), std::errc::invalid_argument);
}

}  // namespace
}  // namespace ucp

#include "ucp/memory/MemoryPool.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ucp {
namespace {

TEST(MemoryPool, ReusesFreedBlockOfTheSameClass) {
  void* first = MemoryPool::allocate(100);
  MemoryPool::deallocate(first);
  void* second = MemoryPool::allocate(90);  // same 128-byte class
  EXPECT_EQ(first, second);
  MemoryPool::deallocate(second);
}

TEST(MemoryPool, BlocksAreAlignedAndDoNotOverlapAcrossSizes) {
  struct Span {
    uintptr_t begin, end;
  };
  std::vector<Span> spans;
  std::vector<void*> blocks;
  for (size_t size : {1, 17, 48, 100, 200, 500, 1000, 2000, 4000, 5000, 10000}) {
    for (int i = 0; i < 50; ++i) {
      void* p = MemoryPool::allocate(size);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % alignof(std::max_align_t), 0u) << size;
      std::memset(p, 0xab, size);  // ASan flags any write past the block
      spans.push_back({reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + size});
      blocks.push_back(p);
    }
  }
  std::sort(spans.begin(), spans.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].end, spans[i].begin);
  for (void* p : blocks) MemoryPool::deallocate(p);
}

TEST(MemoryPool, ServesFourKibPayloadsFromThePool) {
  auto before = MemoryPool::thread_stats();
  void* page = MemoryPool::allocate(4096);
  EXPECT_EQ(MemoryPool::thread_stats().outstanding, before.outstanding + 1);
  void* largest = MemoryPool::allocate(MemoryPool::kMaxBlockSize);
  EXPECT_EQ(MemoryPool::thread_stats().outstanding, before.outstanding + 2);
  MemoryPool::deallocate(page);
  MemoryPool::deallocate(largest);
}

// bytes_in_use counts whole blocks (header included) of the size class a request lands in:
// 100 bytes + the 16-byte header take a 128-byte block, 1,000 + 16 a 1,024-byte one.
TEST(MemoryPool, CountsTheBytesOfTheBlocksInUse) {
  const size_t before = MemoryPool::thread_stats().bytes_in_use;
  void* small = MemoryPool::allocate(100);
  EXPECT_EQ(MemoryPool::thread_stats().bytes_in_use, before + 128);
  void* frame = MemoryPool::allocate(1000);
  EXPECT_EQ(MemoryPool::thread_stats().bytes_in_use, before + 128 + 1024);
  MemoryPool::deallocate(small);
  EXPECT_EQ(MemoryPool::thread_stats().bytes_in_use, before + 1024);
  MemoryPool::deallocate(frame);
  EXPECT_EQ(MemoryPool::thread_stats().bytes_in_use, before);
}

TEST(MemoryPool, LargeRequestsFallBackToTheHeap) {
  auto before = MemoryPool::thread_stats();
  void* big = MemoryPool::allocate(MemoryPool::kMaxBlockSize * 4);
  std::memset(big, 1, MemoryPool::kMaxBlockSize * 4);
  EXPECT_EQ(MemoryPool::thread_stats().outstanding, before.outstanding);
  MemoryPool::deallocate(big);
}

TEST(MemoryPool, PooledObjectsRunConstructorsAndDestructors) {
  static int destroyed = 0;
  struct Probe {
    int value;
    explicit Probe(int v) : value(v) {}
    ~Probe() { ++destroyed; }
  };
  {
    auto probe = make_pooled<Probe>(41);
    EXPECT_EQ(probe->value, 41);
  }
  EXPECT_EQ(destroyed, 1);
}

TEST(MemoryPool, BlocksFreedOnAnotherThreadComeBackToTheOwner) {
  std::vector<void*> blocks;
  for (int i = 0; i < 1000; ++i) blocks.push_back(MemoryPool::allocate(64));
  std::thread other([&blocks] {
    for (void* p : blocks) MemoryPool::deallocate(p);
  });
  other.join();
  // The owner reuses remote-freed blocks once its local free list runs dry.
  std::vector<void*> again;
  for (int i = 0; i < 2000; ++i) again.push_back(MemoryPool::allocate(64));
  size_t reused = 0;
  for (void* p : again) reused += std::count(blocks.begin(), blocks.end(), p) ? 1 : 0;
  EXPECT_EQ(reused, blocks.size());
  for (void* p : again) MemoryPool::deallocate(p);
}

TEST(MemoryPool, BlocksOutlivingTheirThreadAreFreedSafely) {
  std::vector<void*> blocks;
  std::thread owner([&blocks] {
    for (int i = 0; i < 100; ++i) blocks.push_back(MemoryPool::allocate(256));
  });
  owner.join();  // the owner's pool retires with 100 blocks alive
  for (void* p : blocks) MemoryPool::deallocate(p);  // the last one frees the pool (LSan checks)
}

}  // namespace
}  // namespace ucp

// pool_micro: ucp::MemoryPool against glibc malloc/free and new/delete.
//
// Two shapes, for request sizes 64, 256, 1024 and 4096 bytes:
//   Pair   allocate then free one block: the hot path of a coroutine frame or IoContext
//          that lives for one operation (free-list pop + push; glibc serves it from tcache).
//   Batch  allocate kBatch blocks, keep them all alive, then free them in allocation
//          order: the shape of many connections in flight at once.
// `per_pair` is time per allocate+free pair. Single thread: the pool's cross-thread
// (remote) free path is not measured here.
//
// Keep in mind when reading the numbers: the pool puts a 16-byte header in front of each
// block and rounds up to a power of two, so a 64-byte request uses the 128-byte class and a
// 4096-byte request (4112 with the header) exceeds kMaxBlockSize and goes to operator new.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include <benchmark/benchmark.h>

#include "ucp/memory/MemoryPool.h"

namespace ucp {
namespace {

constexpr size_t kBatch = 1000;

struct Pool {
  static void* allocate(size_t size) { return MemoryPool::allocate(size); }
  static void deallocate(void* pointer, size_t) noexcept { MemoryPool::deallocate(pointer); }
};

struct Malloc {
  static void* allocate(size_t size) { return std::malloc(size); }
  static void deallocate(void* pointer, size_t) noexcept { std::free(pointer); }
};

// Plain `new T[]`/`delete[]` of bytes, as code without a pool would write it.
struct NewDelete {
  static void* allocate(size_t size) { return new std::byte[size]; }
  static void deallocate(void* pointer, size_t) noexcept {
    delete[] static_cast<std::byte*>(pointer);
  }
};

void set_per_pair_counters(benchmark::State& state, uint64_t pairs) {
  state.SetItemsProcessed(static_cast<int64_t>(pairs));
  state.counters["per_pair"] = benchmark::Counter(
      static_cast<double>(pairs), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

template <class Allocator>
void BM_Pair(benchmark::State& state) {
  const auto size = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* block = Allocator::allocate(size);
    benchmark::DoNotOptimize(block);  // escapes: the compiler may not elide the pair
    Allocator::deallocate(block, size);
  }
  set_per_pair_counters(state, static_cast<uint64_t>(state.iterations()));
}

template <class Allocator>
void BM_Batch(benchmark::State& state) {
  const auto size = static_cast<size_t>(state.range(0));
  std::array<void*, kBatch> blocks{};
  for (auto _ : state) {
    for (void*& block : blocks) {
      block = Allocator::allocate(size);
      // Touch each block once, as a real user would: the pool writes its header anyway.
      *static_cast<unsigned char*>(block) = 1;
    }
    benchmark::DoNotOptimize(blocks.data());
    benchmark::ClobberMemory();
    for (void* block : blocks) Allocator::deallocate(block, size);
  }
  set_per_pair_counters(state, static_cast<uint64_t>(state.iterations()) * kBatch);
}

void sizes(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgName("bytes");
  for (int64_t size : {64, 256, 1024, 4096}) benchmark->Arg(size);
}

BENCHMARK_TEMPLATE(BM_Pair, Pool)->Apply(sizes);
BENCHMARK_TEMPLATE(BM_Pair, Malloc)->Apply(sizes);
BENCHMARK_TEMPLATE(BM_Pair, NewDelete)->Apply(sizes);
BENCHMARK_TEMPLATE(BM_Batch, Pool)->Apply(sizes);
BENCHMARK_TEMPLATE(BM_Batch, Malloc)->Apply(sizes);
BENCHMARK_TEMPLATE(BM_Batch, NewDelete)->Apply(sizes);

}  // namespace
}  // namespace ucp

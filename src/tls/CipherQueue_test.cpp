#include "ucp/tls/detail/CipherQueue.h"

#include <string>

#include <gtest/gtest.h>

#include "TestCertificates.h"

namespace ucp::tls::detail {
namespace {

std::span<const std::byte> bytes(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

std::string unsent(const CipherQueue& queue) {
  iovec buffers[64];
  const size_t count = queue.gather(buffers);
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    out.append(static_cast<const char*>(buffers[i].iov_base), buffers[i].iov_len);
  }
  return out;
}

std::string pattern(size_t size, char seed) {
  std::string text(size, '\0');
  for (size_t i = 0; i < size; ++i) text[i] = static_cast<char>(seed + i % 31);
  return text;
}

TEST(CipherQueue, AppendsAcrossBlocksAndGathersInOrder) {
  CipherQueue queue;
  EXPECT_TRUE(queue.empty());
  const std::string a = pattern(1000, 'a');
  const std::string b = pattern(2 * CipherQueue::kBlockBytes + 10, 'A');
  queue.append(bytes(a));
  queue.append(bytes(b));
  EXPECT_EQ(queue.size(), a.size() + b.size());
  iovec buffers[8];
  EXPECT_EQ(queue.gather(buffers), 3u) << "three blocks";
  EXPECT_EQ(unsent(queue), a + b);
  iovec one[1];
  EXPECT_EQ(queue.gather(one), 1u) << "as many as there is room for";
  EXPECT_EQ(one[0].iov_len, CipherQueue::kBlockBytes);
}

TEST(CipherQueue, ConsumeDropsSentBytesAndEmptiedBlocks) {
  CipherQueue queue;
  const std::string text = pattern(CipherQueue::kBlockBytes + 500, 'x');
  queue.append(bytes(text));
  queue.consume(100);
  EXPECT_EQ(unsent(queue), text.substr(100));
  queue.consume(CipherQueue::kBlockBytes - 100);  // exactly the first block
  iovec buffers[4];
  EXPECT_EQ(queue.gather(buffers), 1u);
  EXPECT_EQ(unsent(queue), text.substr(CipherQueue::kBlockBytes));
  // Appending while the front is partly sent goes behind it.
  queue.consume(200);
  queue.append(bytes("tail"));
  EXPECT_EQ(unsent(queue), text.substr(CipherQueue::kBlockBytes + 200) + "tail");
  queue.consume(queue.size() + 1000);  // more than there is: everything
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.gather(buffers), 0u);
  queue.append(bytes("again"));
  EXPECT_EQ(unsent(queue), "again");
}

TEST(CipherQueue, AMovedQueueKeepsItsBytes) {
  CipherQueue queue;
  queue.append(bytes("moved bytes"));
  queue.consume(6);
  CipherQueue other(std::move(queue));
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(unsent(other), "bytes");
  CipherQueue third;
  third.append(bytes("dropped"));
  third = std::move(other);
  EXPECT_EQ(unsent(third), "bytes");
}

TEST(CipherQueue, DrainedQueuesHoldNoMemoryBeyondTheThreadsFewCachedBlocks) {
  // Warm the thread's cache, then cycle many queues through it: the heap must not grow.
  {
    CipherQueue warm[CipherQueue::kCachedBlocksPerThread];
    for (auto& queue : warm) queue.append(bytes(pattern(100, 'w')));
  }
  const size_t before = test::live_heap_bytes();
  for (int round = 0; round < 1000; ++round) {
    CipherQueue queue;
    queue.append(bytes(pattern(3000, 'r')));
    queue.consume(queue.size());
  }
  EXPECT_LT(test::live_heap_bytes(), before + 4096);
}

}  // namespace
}  // namespace ucp::tls::detail

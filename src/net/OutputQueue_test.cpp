#include "ucp/net/detail/OutputQueue.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/memory/MemoryPool.h"

namespace ucp::detail {
namespace {

std::span<const std::byte> bytes(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

// The bytes one send would offer (gather() into 64 buffers), in send order.
std::string unsent(const OutputQueue& queue) {
  iovec buffers[64];
  size_t count = queue.gather(buffers);
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    out.append(static_cast<const char*>(buffers[i].iov_base), buffers[i].iov_len);
  }
  return out;
}

OutputSegment borrowed(const std::string& text, SegmentKind kind) {
  OutputSegment segment;
  segment.data = bytes(text).data();
  segment.size = text.size();
  segment.kind = kind;
  return segment;
}

std::vector<OutputSegment*> as_vector(OutputSegment* list) {
  std::vector<OutputSegment*> out;
  for (; list != nullptr; list = list->next) out.push_back(list);
  return out;
}

TEST(OutputQueue, SmallCopiesShareAFewChunksAndGatherInOrder) {
  OutputQueue queue;
  std::string expected;
  for (int i = 0; i < 10000; ++i) {
    std::string piece(1, static_cast<char>('a' + i % 26));
    queue.append_copy(bytes(piece));
    expected += piece;
  }
  EXPECT_EQ(queue.size(), 10000u);
  EXPECT_EQ(queue.copied_bytes(), 10000u);
  iovec buffers[16];
  size_t count = queue.gather(buffers);
  EXPECT_LE(count, 8u) << "10000 one-byte writes should fill a few doubling chunks";
  EXPECT_EQ(unsent(queue), expected);
}

TEST(OutputQueue, ConsumeFreesChunksAndReturnsFinishedSpansOldestFirst) {
  const long long outstanding_before = MemoryPool::thread_stats().outstanding;
  OutputQueue queue;
  std::string a = "AAAA", b = "BBBBBB";
  OutputSegment first = borrowed(a, SegmentKind::kBorrowed);
  OutputSegment second = borrowed(b, SegmentKind::kAdoptable);
  queue.append_copy(bytes("12"));
  queue.append_borrowed(first);
  queue.append_copy(bytes("345"));
  queue.append_borrowed(second);
  EXPECT_EQ(unsent(queue), "12AAAA345BBBBBB");
  EXPECT_EQ(queue.size(), 15u);
  EXPECT_EQ(queue.copied_bytes(), 5u);

  EXPECT_EQ(queue.consume(3), nullptr);  // "12" and one byte of the first span
  EXPECT_EQ(unsent(queue), "AAA345BBBBBB");
  EXPECT_EQ(as_vector(queue.consume(4)), std::vector<OutputSegment*>{&first});
  EXPECT_EQ(unsent(queue), "45BBBBBB");
  EXPECT_EQ(as_vector(queue.consume(8)), std::vector<OutputSegment*>{&second});
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.size(), 0u);
  EXPECT_EQ(queue.copied_bytes(), 0u);
  EXPECT_EQ(MemoryPool::thread_stats().outstanding, outstanding_before);
}

TEST(OutputQueue, AdoptCopiesWaitingWritesInPlaceAndLeavesWriteAllSpans) {
  OutputQueue queue;
  std::string first = "cdef", all = "gh", second(20000, 'x');
  OutputSegment adoptable_first = borrowed(first, SegmentKind::kAdoptable);
  OutputSegment write_all = borrowed(all, SegmentKind::kBorrowed);
  OutputSegment adoptable_second = borrowed(second, SegmentKind::kAdoptable);
  queue.append_copy(bytes("ab"));
  queue.append_borrowed(adoptable_first);
  queue.append_borrowed(write_all);
  queue.append_borrowed(adoptable_second);
  EXPECT_EQ(as_vector(queue.adopt_waiting()),
            (std::vector<OutputSegment*>{&adoptable_first, &adoptable_second}));
  // The writers may now reuse their memory: the queue holds copies.
  first.assign(first.size(), '?');
  second.assign(second.size(), '?');
  queue.append_copy(bytes("z"));
  EXPECT_EQ(queue.size(), 2 + 4 + 2 + 20000 + 1u);
  EXPECT_EQ(queue.copied_bytes(), 2 + 4 + 20000 + 1u);
  std::string expected = "abcdefgh" + std::string(20000, 'x') + "z";
  std::string got;
  while (!queue.empty()) {  // as successive sends would take it
    std::string front = unsent(queue);
    got += front;
    for (OutputSegment* done = queue.consume(front.size()); done; done = done->next) {
      EXPECT_EQ(done, &write_all);
    }
  }
  EXPECT_EQ(got, expected);
}

TEST(OutputQueue, ClearReturnsBorrowedSpansAndFreesEveryChunk) {
  const long long outstanding_before = MemoryPool::thread_stats().outstanding;
  {
    OutputQueue queue;
    std::string big(1 << 20, 'q'), span = "span";
    OutputSegment segment = borrowed(span, SegmentKind::kBorrowed);
    queue.append_copy(bytes(big));
    queue.append_borrowed(segment);
    queue.append_copy(bytes(big));
    EXPECT_GT(MemoryPool::thread_stats().outstanding, outstanding_before);
    EXPECT_EQ(as_vector(queue.clear()), std::vector<OutputSegment*>{&segment});
    EXPECT_TRUE(queue.empty());
    EXPECT_EQ(MemoryPool::thread_stats().outstanding, outstanding_before);
    queue.append_copy(bytes(big));  // the destructor frees what is left
  }
  EXPECT_EQ(MemoryPool::thread_stats().outstanding, outstanding_before);
}

TEST(OutputQueue, ShortSendsOfAMebibyteDeliverEveryByteOnce) {
  OutputQueue queue;
  std::string data(1 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 4096);
  for (size_t offset = 0; offset < data.size(); offset += 1000) {
    queue.append_copy(bytes(data.substr(offset, 1000)));
  }
  std::string got;
  size_t step = 1;
  while (!queue.empty()) {
    std::string front = unsent(queue);
    size_t taken = std::min(front.size(), step);  // the kernel takes what fits
    got += front.substr(0, taken);
    EXPECT_EQ(queue.consume(taken), nullptr);
    step = step * 3 + 1;
    if (step > 50000) step = 1;
  }
  EXPECT_TRUE(got == data);
}

}  // namespace
}  // namespace ucp::detail

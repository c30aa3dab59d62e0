#include "ucp/net/Buffer.h"

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

namespace ucp {
namespace {

TEST(Buffer, AppendsConsumesAndViews) {
  Buffer buffer;
  EXPECT_TRUE(buffer.append("hello "));
  EXPECT_TRUE(buffer.append("world"));
  EXPECT_EQ(buffer.view(), "hello world");
  buffer.consume(6);
  EXPECT_EQ(buffer.view(), "world");
  buffer.consume(100);
  EXPECT_EQ(buffer.readable_bytes(), 0u);
}

TEST(Buffer, PrependsALengthHeaderCheaply) {
  Buffer buffer;
  ASSERT_TRUE(buffer.append("payload"));
  uint32_t length = 7;
  ASSERT_TRUE(buffer.prepend(std::as_bytes(std::span(&length, 1))));
  EXPECT_EQ(buffer.readable_bytes(), 11u);
  EXPECT_FALSE(buffer.prepend(std::as_bytes(std::span(&length, 2))));  // only 4 bytes left
}

TEST(Buffer, MovesReadableBytesFrontBeforeGrowing) {
  Buffer buffer(1 << 20, 64);
  ASSERT_TRUE(buffer.append(std::string(60, 'a')));
  buffer.consume(50);
  auto capacity_before =
      buffer.writable_bytes() + buffer.readable_bytes() + buffer.prependable_bytes();
  ASSERT_TRUE(buffer.append(std::string(40, 'b')));  // fits after sliding 10 bytes forward
  EXPECT_EQ(buffer.writable_bytes() + buffer.readable_bytes() + buffer.prependable_bytes(),
            capacity_before);
  EXPECT_EQ(buffer.view(), std::string(10, 'a') + std::string(40, 'b'));
}

TEST(Buffer, GrowsButNeverPastItsMaximum) {
  Buffer buffer(1000, 16);
  EXPECT_TRUE(buffer.append(std::string(900, 'x')));
  EXPECT_FALSE(buffer.append(std::string(200, 'y')));  // would pass 1000
  EXPECT_EQ(buffer.readable_bytes(), 900u);            // nothing half-appended
  EXPECT_TRUE(buffer.append(std::string(100, 'z')));
  EXPECT_EQ(buffer.readable_bytes(), 1000u);
}

TEST(Buffer, WritableRegionCommit) {
  Buffer buffer;
  ASSERT_TRUE(buffer.ensure_writable(5000));
  auto region = buffer.writable();
  ASSERT_GE(region.size(), 5000u);
  region[0] = std::byte{'q'};
  buffer.commit(1);
  EXPECT_EQ(buffer.view(), "q");
}

}  // namespace
}  // namespace ucp

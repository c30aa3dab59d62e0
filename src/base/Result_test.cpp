#include "ucp/base/Result.h"

#include <string>

#include <gtest/gtest.h>

#include "ucp/base/UniqueFd.h"

namespace ucp {
namespace {

TEST(Result, HoldsValueOrError) {
  Result<std::string> ok = std::string("hi");
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, "hi");
  EXPECT_EQ(ok->size(), 2u);
  EXPECT_FALSE(ok.error());

  Result<std::string> failed = Unexpected{std::errc::timed_out};
  EXPECT_FALSE(failed);
  EXPECT_EQ(failed.error(), std::errc::timed_out);
  EXPECT_EQ(failed.value_or("fallback"), "fallback");
}

TEST(Result, ConvertsKernelResults) {
  auto bytes = bytes_from_cqe(42);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(*bytes, 42u);
  EXPECT_EQ(bytes_from_cqe(-ECONNRESET).error(), std::errc::connection_reset);
  EXPECT_TRUE(void_from_cqe(0));
  EXPECT_EQ(void_from_cqe(-EPIPE).error(), std::errc::broken_pipe);
}

TEST(UniqueFd, ClosesOnDestructionAndAssignment) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  {
    UniqueFd read_end(fds[0]);
    UniqueFd write_end(fds[1]);
    UniqueFd moved = std::move(write_end);
    EXPECT_FALSE(write_end.valid());
    EXPECT_EQ(moved.get(), fds[1]);
    moved = UniqueFd();  // closes fds[1]
    EXPECT_FALSE(moved.valid());
    char c;
    EXPECT_EQ(::read(read_end.get(), &c, 1), 0);  // EOF: the write end is closed
  }
  EXPECT_EQ(::close(fds[0]), -1);  // already closed by ~UniqueFd
}

}  // namespace
}  // namespace ucp

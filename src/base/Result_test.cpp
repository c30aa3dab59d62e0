#include "ucp/base/Result.h"

#include <memory>
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

struct Counter {
  int count = 0;
  int next() { return ++count; }
};

// A factory's Result<std::unique_ptr<T>> is used as the T: -> goes through the owner.
TEST(Result, ArrowReachesTheObjectAPointerLikeValueOwns) {
  Result<std::unique_ptr<Counter>> made = std::make_unique<Counter>();
  ASSERT_TRUE(made);
  EXPECT_EQ(made->next(), 1);
  EXPECT_EQ(made->count, 1);
  const auto& seen = made;
  EXPECT_EQ(seen->count, 1);
  std::unique_ptr<Counter> owner = std::move(*made);  // * is still the owner
  EXPECT_EQ(owner->count, 1);

  Result<std::string> text = std::string("abc");  // any other T: -> is the value's own
  EXPECT_EQ(text->size(), 3u);
}

TEST(Result, ConvertsKernelResults) {
  auto bytes = bytes_from_cqe(42);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(*bytes, 42u);
  EXPECT_EQ(bytes_from_cqe(-ECONNRESET).error(), std::errc::connection_reset);
  EXPECT_TRUE(void_from_cqe(0));
  EXPECT_EQ(void_from_cqe(-EPIPE).error(), std::errc::broken_pipe);
}

TEST(Result, CarriesAReadableErrorForSetUp) {
  Result<void, Error> ok;
  EXPECT_TRUE(ok);
  EXPECT_TRUE(ok.error().message.empty());

  Result<void, Error> failed =
      Unexpected{Error("cannot listen on 127.0.0.1:80: permission denied",
                       std::make_error_code(std::errc::permission_denied))};
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().message, "cannot listen on 127.0.0.1:80: permission denied");
  EXPECT_EQ(failed.error().code, std::errc::permission_denied);

  Result<int, Error> parsed = Unexpected{Error("ucp.conf:3: server.port: 70000 is out of range")};
  ASSERT_FALSE(parsed);
  EXPECT_FALSE(parsed.error().code) << "no error code behind a parse error";
  EXPECT_EQ(parsed.value_or(8888), 8888);
  Result<int, Error> value = 80;
  EXPECT_EQ(*value, 80);
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

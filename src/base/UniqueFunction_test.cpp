#include "ucp/base/UniqueFunction.h"

#include <array>
#include <memory>

#include <gtest/gtest.h>

namespace ucp {
namespace {

TEST(UniqueFunction, CallsSmallAndLargeMoveOnlyTargets) {
  auto owned = std::make_unique<int>(5);
  UniqueFunction<int(int)> small = [p = std::move(owned)](int x) { return *p + x; };
  EXPECT_EQ(small(1), 6);

  std::array<int, 64> big{};
  big[63] = 9;
  UniqueFunction<int(int)> large = [big, p = std::make_unique<int>(1)](int x) {
    return big[63] + *p + x;
  };
  UniqueFunction<int(int)> moved = std::move(large);
  EXPECT_FALSE(large);
  EXPECT_EQ(moved(0), 10);
  moved = std::move(small);
  EXPECT_EQ(moved(2), 7);
}

}  // namespace
}  // namespace ucp

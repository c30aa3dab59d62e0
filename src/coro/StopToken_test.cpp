// StopSource / StopToken / StopCallback: registration order, running once, unregistering,
// callbacks that destroy themselves or register others, tokens that cannot stop.

#include "ucp/coro/StopToken.h"

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

namespace ucp {
namespace {

TEST(StopToken, CallbacksRunOnceNewestFirstOnRequestStop) {
  StopSource source;
  std::vector<int> order;
  StopCallback first(source.token(), [&] { order.push_back(1); });
  StopCallback second(source.token(), [&] { order.push_back(2); });
  EXPECT_FALSE(source.token().stop_requested());
  EXPECT_TRUE(source.request_stop());
  EXPECT_FALSE(source.request_stop());  // only the first request counts
  EXPECT_EQ(order, (std::vector<int>{2, 1}));
  EXPECT_TRUE(source.token().stop_requested());
}

TEST(StopToken, ACallbackRegisteredAfterTheStopRunsAtOnce) {
  StopSource source;
  source.request_stop();
  int runs = 0;
  StopCallback late(source.token(), [&] { ++runs; });
  EXPECT_EQ(runs, 1);
}

TEST(StopToken, DestroyedCallbacksNeverRun) {
  StopSource source;
  int runs = 0;
  {
    StopCallback gone(source.token(), [&] { ++runs; });
  }
  auto kept =
      std::make_unique<StopCallback<std::function<void()>>>(source.token(), [&] { runs += 10; });
  source.request_stop();
  EXPECT_EQ(runs, 10);
}

TEST(StopToken, CallbacksMayDestroyOtherCallbacksAndStopOtherSources) {
  StopSource outer, inner;
  int inner_runs = 0;
  StopCallback relay(outer.token(), [&] { inner.request_stop(); });  // composed sources
  StopCallback on_inner(inner.token(), [&] { ++inner_runs; });
  std::optional<StopCallback<std::function<void()>>> victim;
  int victim_runs = 0;
  victim.emplace(outer.token(), [&] { ++victim_runs; });
  StopCallback killer(outer.token(), [&] { victim.reset(); });  // registered last: runs first
  outer.request_stop();
  EXPECT_EQ(inner_runs, 1);
  EXPECT_EQ(victim_runs, 0);
  EXPECT_TRUE(inner.stop_requested());
}

TEST(StopToken, DefaultTokenCannotStop) {
  StopToken token;
  EXPECT_FALSE(token.stop_possible());
  EXPECT_FALSE(token.stop_requested());
  int runs = 0;
  StopCallback never(token, [&] { ++runs; });
  EXPECT_EQ(runs, 0);
}

TEST(StopToken, CallbacksOutlivingTheirSourceAreHarmless) {
  auto source = std::make_unique<StopSource>();
  int runs = 0;
  StopCallback survivor(source->token(), [&] { ++runs; });
  source.reset();  // the callback's destructor must not touch the dead source
  EXPECT_EQ(runs, 0);
}

}  // namespace
}  // namespace ucp

#include "ucp/tls/TicketKeyRing.h"

#include <gtest/gtest.h>

namespace ucp::tls {
namespace {

uint64_t now = 0;
uint64_t test_clock() noexcept { return now; }

TEST(TicketKeyRing, RotatesLazilyAndOpensThePreviousKeyForOneInterval) {
  now = 5000;
  auto ring = TicketKeyRing::create(60, &test_clock);
  ASSERT_TRUE(ring);
  EXPECT_EQ(ring->rotation_s(), 60u);
  EXPECT_EQ(ring->keys_made(), 1u);
  const auto first = ring->sealing_key();
  TicketKeyRing::Key opened;
  bool current = false;
  ASSERT_TRUE(ring->opening_key(first.name.data(), opened, current));
  EXPECT_TRUE(current);
  EXPECT_EQ(opened.aes_key, first.aes_key);

  now += 59;
  EXPECT_EQ(ring->sealing_key().name, first.name) << "not due yet";
  now += 1;
  const auto second = ring->sealing_key();
  EXPECT_NE(second.name, first.name);
  EXPECT_NE(second.hmac_key, first.hmac_key);
  EXPECT_EQ(ring->keys_made(), 2u);
  ASSERT_TRUE(ring->opening_key(first.name.data(), opened, current));
  EXPECT_FALSE(current) << "the previous key: tickets under it are re-issued";
  EXPECT_EQ(opened.hmac_key, first.hmac_key);

  now += 60;  // opening alone also rotates
  EXPECT_FALSE(ring->opening_key(first.name.data(), opened, current));
  ASSERT_TRUE(ring->opening_key(second.name.data(), opened, current));
  EXPECT_FALSE(current);
  EXPECT_EQ(ring->keys_made(), 3u);
}

TEST(TicketKeyRing, AfterTwoIdleIntervalsNoOldKeyOpens) {
  now = 100;
  auto ring = TicketKeyRing::create(10, &test_clock);
  const auto first = ring->sealing_key();
  now += 25;  // no ticket sealed or opened for two intervals and more
  TicketKeyRing::Key opened;
  bool current = false;
  EXPECT_FALSE(ring->opening_key(first.name.data(), opened, current));
  EXPECT_EQ(ring->keys_made(), 2u);
}

TEST(TicketKeyRing, ExplicitRotationKeepsOnePreviousKey) {
  now = 0;
  auto ring = TicketKeyRing::create(3600, &test_clock);
  const auto a = ring->sealing_key();
  ring->rotate();
  const auto b = ring->sealing_key();
  TicketKeyRing::Key opened;
  bool current = true;
  EXPECT_TRUE(ring->opening_key(a.name.data(), opened, current));
  EXPECT_FALSE(current);
  ring->rotate();
  EXPECT_FALSE(ring->opening_key(a.name.data(), opened, current));
  EXPECT_TRUE(ring->opening_key(b.name.data(), opened, current));
  const unsigned char unknown[TicketKeyRing::kNameBytes] = {};
  EXPECT_FALSE(ring->opening_key(unknown, opened, current));
}

}  // namespace
}  // namespace ucp::tls

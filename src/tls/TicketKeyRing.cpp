#include "ucp/tls/TicketKeyRing.h"

#include <cstring>
#include <ctime>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "ucp/log/Logger.h"

namespace ucp::tls {
namespace {

uint64_t monotonic_seconds() noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return static_cast<uint64_t>(now.tv_sec);
}

bool fill_random(TicketKeyRing::Key& key) noexcept {
  return RAND_bytes(key.name.data(), static_cast<int>(key.name.size())) == 1 &&
         RAND_bytes(key.hmac_key.data(), static_cast<int>(key.hmac_key.size())) == 1 &&
         RAND_bytes(key.aes_key.data(), static_cast<int>(key.aes_key.size())) == 1;
}

}  // namespace

std::shared_ptr<TicketKeyRing> TicketKeyRing::create(uint32_t rotation_s, Clock clock) {
  auto ring = std::make_shared<TicketKeyRing>(Token{}, rotation_s, clock);
  std::lock_guard lock(ring->mutex_);
  if (!fill_random(ring->current_)) return nullptr;
  ring->current_since_ = ring->clock_();
  ring->keys_made_ = 1;
  return ring;
}

TicketKeyRing::TicketKeyRing(Token, uint32_t rotation_s, Clock clock) noexcept
    : clock_(clock != nullptr ? clock : &monotonic_seconds),
      rotation_s_(rotation_s == 0 ? 1 : rotation_s) {}

TicketKeyRing::~TicketKeyRing() {
  OPENSSL_cleanse(&current_, sizeof current_);
  OPENSSL_cleanse(&previous_, sizeof previous_);
}

void TicketKeyRing::rotate() {
  std::lock_guard lock(mutex_);
  make_current_locked(clock_());
}

uint64_t TicketKeyRing::keys_made() const {
  std::lock_guard lock(mutex_);
  return keys_made_;
}

TicketKeyRing::Key TicketKeyRing::sealing_key() {
  std::lock_guard lock(mutex_);
  rotate_if_due_locked(clock_());
  return current_;
}

bool TicketKeyRing::opening_key(const unsigned char* name, Key& key, bool& current) {
  std::lock_guard lock(mutex_);
  rotate_if_due_locked(clock_());
  if (std::memcmp(name, current_.name.data(), kNameBytes) == 0) {
    key = current_;
    current = true;
    return true;
  }
  if (have_previous_ && std::memcmp(name, previous_.name.data(), kNameBytes) == 0) {
    key = previous_;
    current = false;
    return true;
  }
  return false;
}

void TicketKeyRing::rotate_if_due_locked(uint64_t now) {
  if (now - current_since_ < rotation_s_) return;
  // Two intervals or more since the current key was made (no ticket sealed or opened for
  // that long): its tickets are past their overlap too, so no key survives.
  const bool current_too_old = now - current_since_ >= 2 * uint64_t{rotation_s_};
  make_current_locked(now);
  if (current_too_old) {
    have_previous_ = false;
    OPENSSL_cleanse(&previous_, sizeof previous_);
  }
}

void TicketKeyRing::make_current_locked(uint64_t now) {
  Key fresh;
  if (!fill_random(fresh)) {
    // Keep sealing with the current key rather than stop issuing tickets.
    LOG_ERROR("TLS: no random bytes for a new session ticket key; the current key stays");
    return;
  }
  previous_ = current_;
  have_previous_ = true;
  current_ = fresh;
  OPENSSL_cleanse(&fresh, sizeof fresh);
  current_since_ = now;
  ++keys_made_;
}

}  // namespace ucp::tls

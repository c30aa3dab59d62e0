#pragma once
// TicketKeyRing: the keys that encrypt TLS session tickets (RFC 5077, and TLS 1.3's
// stateless tickets), shared by every TlsContext that should resume the others' tickets.
//
//   time ->  |-- key A current --|-- key B current --|-- key C current --|
//   tickets sealed with A resume |  (renewed with B)  |  full handshake
//
// A new key becomes current every `rotation_s` seconds: tickets are sealed with the current
// key and opened with the current or the previous one (then re-issued under the current),
// so a ticket resumes for at least one interval and at most two. Rotation is lazy: the first
// ticket sealed or opened after the interval replaces the key, so no timer is needed.
//
// Thread contract: every method may be called from any thread (the workers' handshakes run
// the callbacks concurrently); a mutex guards the two keys, taken once per ticket sealed or
// opened, that is once per handshake at most.

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>

namespace ucp::tls {

class TicketKeyRing {
  struct Token {  // the constructor is public for make_shared; only create() calls it
    explicit Token() = default;
  };

 public:
  static constexpr size_t kNameBytes = 16;
  /// Seconds on a monotonic clock; tests pass a clock of their own.
  using Clock = uint64_t (*)() noexcept;

  /// A ring with a fresh random current key and no previous one.
  static std::shared_ptr<TicketKeyRing> create(uint32_t rotation_s, Clock clock = nullptr);
  TicketKeyRing(Token, uint32_t rotation_s, Clock clock) noexcept;
  TicketKeyRing(const TicketKeyRing&) = delete;
  TicketKeyRing& operator=(const TicketKeyRing&) = delete;
  ~TicketKeyRing();

  /// Makes a fresh key current now; the current one becomes the previous one.
  void rotate();
  uint32_t rotation_s() const noexcept { return rotation_s_; }
  /// How many keys have been made so far (1 after create).
  uint64_t keys_made() const;

  struct Key {
    std::array<unsigned char, kNameBytes> name{};
    std::array<unsigned char, 32> hmac_key{};
    std::array<unsigned char, 32> aes_key{};
  };
  /// For the ticket callback: the key to seal a new ticket with (rotating first when due).
  Key sealing_key();
  /// For the ticket callback: the key named `name` if it may still open tickets; `current`
  /// says whether it is the current key (a ticket under the previous one is re-issued).
  bool opening_key(const unsigned char* name, Key& key, bool& current);

 private:
  void rotate_if_due_locked(uint64_t now);
  void make_current_locked(uint64_t now);

  mutable std::mutex mutex_;
  Clock clock_;
  uint32_t rotation_s_;
  Key current_{};
  Key previous_{};
  bool have_previous_ = false;
  uint64_t current_since_ = 0;  // clock_() when current_ was made
  uint64_t keys_made_ = 0;
};

}  // namespace ucp::tls

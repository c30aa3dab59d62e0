#pragma once
// CipherQueue: the ciphertext a TlsSession has produced and its connection has not sent yet,
// in blocks whose addresses never change, so a send may read the front while the session
// appends behind it:
//
//   head (front_ bytes sent)                                   tail (used of capacity)
//    [block: | sent | unsent ] -> [block: | unsent ] -> [block: | unsent | room ] -> null
//
// A block holds kBlockBytes (a full TLS record and then some); emptied blocks go back at
// once, to a small per-thread cache that the next flush on that thread takes them from, so
// an idle session holds no block and a busy thread does not call malloc per flush (the cache
// is freed when the thread ends).
//
// Thread contract: one thread at a time (the session's).

#include <cstddef>
#include <span>

#include <sys/uio.h>

namespace ucp::tls::detail {

class CipherQueue {
 public:
  /// Payload bytes per block: one 16 KiB record with its header, padding and tag fits.
  static constexpr size_t kBlockBytes = 17 * 1024;
  /// Emptied blocks each thread keeps for reuse.
  static constexpr size_t kCachedBlocksPerThread = 4;

  CipherQueue() noexcept = default;
  CipherQueue(CipherQueue&& other) noexcept;
  CipherQueue& operator=(CipherQueue&& other) noexcept;
  CipherQueue(const CipherQueue&) = delete;
  CipherQueue& operator=(const CipherQueue&) = delete;
  ~CipherQueue() { clear(); }

  bool empty() const noexcept { return size_ == 0; }
  size_t size() const noexcept { return size_; }
  /// Appends `bytes` behind what is queued (std::bad_alloc if the heap is exhausted).
  void append(std::span<const std::byte> bytes);
  /// Fills `buffers` with the unsent bytes, front first, one per block; returns how many.
  size_t gather(std::span<iovec> buffers) const noexcept;
  /// Drops `bytes` sent bytes from the front (at most size()); emptied blocks are released.
  void consume(size_t bytes) noexcept;
  /// Drops everything.
  void clear() noexcept;

 private:
  struct Block;
  struct BlockCache;
  static BlockCache& thread_cache() noexcept;
  static Block* new_block();
  static void release_block(Block* block) noexcept;

  Block* head_ = nullptr;
  Block* tail_ = nullptr;
  size_t front_ = 0;  // bytes of head_ already sent
  size_t size_ = 0;   // unsent bytes
};

}  // namespace ucp::tls::detail

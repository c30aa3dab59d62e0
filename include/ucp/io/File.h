#pragma once
// File: a file opened and used through an EventLoop, so that a coroutine reading or writing it
// never blocks the loop's thread. io_uring does the work on the ring (OPENAT, READ, WRITE,
// FSYNC, CLOSE); the epoll backend tries a read or write with RWF_NOWAIT in the loop (a page
// cache hit) and hands what would wait for the disk, and open, fsync and O_DIRECT I/O, to its
// file worker threads.
//
//   auto file = co_await ucp::File::open(loop, "/var/data/blob", O_RDONLY);
//   if (!file) co_return;                                   // error_code: ENOENT, EACCES...
//   std::vector<std::byte> head(4096);
//   auto n = co_await file->read_exact(head, 0);            // loops over short reads; < 4096 only
//   at EOF co_await file->close();
//
// Reads and writes are positional (pread/pwrite: no file position is shared between coroutines)
// and may be short, as read(2) is: read() returns what one call gave (0 at the end of the
// file); read_exact() and write_all() loop. read_batch() puts many reads in flight at once from
// one coroutine and resumes it when all have completed.
//
// O_DIRECT (bypassing the page cache): buffers, offsets and lengths must be multiples of
// direct_alignment() (AlignedBuffer allocates such memory); a misaligned one fails with
// invalid_argument (the kernel's EINVAL, on both backends; the kernel checks buffer addresses
// against the device's own DMA alignment, so it takes some that direct_alignment() would not).
// Some file systems (tmpfs) refuse O_DIRECT at open with invalid_argument.
//
// Owner: whoever holds the File (move-only). Close it with `co_await close()`; a File destroyed
// still open closes its fd directly (close(2) on a regular file does not wait for the disk).
// Thread contract: the loop's thread only, and no operation may be in flight at destruction.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include <fcntl.h>
#include <sys/types.h>

#include "ucp/base/Result.h"
#include "ucp/base/UniqueFd.h"
#include "ucp/coro/Task.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/Operations.h"
#include "ucp/io/detail/Operation.h"

namespace ucp {

namespace detail {
struct ReadBatch;
}

/// One read of File::read_batch: where to read from and into, then its result. Holds the
/// operation itself, so a batch needs no allocation: keep the array alive until the batch
/// resumes.
class ReadRequest {
 public:
  ReadRequest() noexcept = default;
  ReadRequest(std::span<std::byte> buffer, uint64_t offset) noexcept
      : buffer_(buffer), offset_(offset) {}
  ReadRequest(const ReadRequest&) = delete;
  ReadRequest& operator=(const ReadRequest&) = delete;

  void set(std::span<std::byte> buffer, uint64_t offset) noexcept {
    buffer_ = buffer;
    offset_ = offset;
  }
  std::span<std::byte> buffer() const noexcept { return buffer_; }
  uint64_t offset() const noexcept { return offset_; }
  /// Bytes read (fewer at the end of the file) or the error, once the batch has resumed.
  Result<size_t> result() const noexcept { return bytes_from_cqe(op_.result); }

 private:
  friend class File;
  struct Read : detail::Operation {
    detail::ReadBatch* batch = nullptr;  // the read_batch() call it is part of
  };
  std::span<std::byte> buffer_;
  uint64_t offset_ = 0;
  Read op_;
};

class File {
 public:
  /// Opens `path` with open(2)'s `flags` (O_CLOEXEC is always added) and `mode` for O_CREAT.
  static Task<Result<File>> open(EventLoop& loop, std::string path, int flags, mode_t mode = 0644);

  /// Adopts an open fd (a file, or a block device).
  File(EventLoop& loop, UniqueFd fd) noexcept;
  File(File&& other) noexcept = default;
  File& operator=(File&& other) noexcept = default;
  ~File() = default;

  /// One positional read: may be short; 0 at the end of the file.
  io::ReadOp read(std::span<std::byte> buffer, uint64_t offset) noexcept {
    return io::ReadOp(*loop_, fd_.get(), buffer, offset);
  }
  /// One positional write: may be short.
  io::WriteOp write(std::span<const std::byte> data, uint64_t offset) noexcept {
    return io::WriteOp(*loop_, fd_.get(), data, offset);
  }
  /// Reads until `buffer` is full or the file ends: the value is the bytes read, fewer than
  /// buffer.size() only at the end of the file.
  Task<Result<size_t>> read_exact(std::span<std::byte> buffer, uint64_t offset);
  /// Writes all of `data` at `offset`, looping over short writes.
  Task<Result<void>> write_all(std::span<const std::byte> data, uint64_t offset);
  /// Starts every read of `requests` at once (one submission) and resumes when the last has
  /// completed; each request then holds its own result (reads are not retried when short).
  /// Reads the loop could not take (its queues full) hold resource_unavailable_try_again.
  Task<> read_batch(std::span<ReadRequest> requests);

  io::FsyncOp fsync() noexcept { return io::FsyncOp(*loop_, fd_.get(), false); }
  io::FsyncOp fdatasync() noexcept { return io::FsyncOp(*loop_, fd_.get(), true); }
  /// Closes the fd through the loop; the File is then closed whatever the result.
  Task<Result<void>> close();

  /// The file's size now (fstat: metadata, answered from memory).
  Result<uint64_t> size() const noexcept;
  /// The alignment O_DIRECT needs of buffer addresses, offsets and lengths on this file: what
  /// statx(STATX_DIOALIGN) says (Linux 6.1+), else 4096, which every device accepts.
  size_t direct_alignment() const noexcept;
  bool is_open() const noexcept { return static_cast<bool>(fd_); }
  int fd() const noexcept { return fd_.get(); }
  EventLoop& loop() const noexcept { return *loop_; }

 private:
  EventLoop* loop_;
  UniqueFd fd_;
};

}  // namespace ucp

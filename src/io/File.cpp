#include "ucp/io/File.h"

#include <algorithm>
#include <cerrno>
#include <climits>

#include <sys/stat.h>

#include "ucp/io/detail/LoopAccess.h"

namespace ucp {

/// One read_batch() call: its reads in flight, and the coroutine waiting for the last.
struct detail::ReadBatch {
  size_t outstanding = 0;
  std::coroutine_handle<> waiter;
};

namespace {

struct BatchDone {
  size_t& outstanding;
  std::coroutine_handle<>& waiter;
  bool await_ready() const noexcept { return outstanding == 0; }
  void await_suspend(std::coroutine_handle<> caller) noexcept { waiter = caller; }
  void await_resume() const noexcept {}
};

}  // namespace

File::File(EventLoop& loop, UniqueFd fd) noexcept : loop_(&loop), fd_(std::move(fd)) {}

Task<Result<File>> File::open(EventLoop& loop, std::string path, int flags, mode_t mode) {
  auto fd = co_await io::openat(loop, AT_FDCWD, path.c_str(), flags, mode);
  if (!fd) co_return Unexpected{fd.error()};
  co_return File(loop, std::move(*fd));
}

Task<Result<size_t>> File::read_exact(std::span<std::byte> buffer, uint64_t offset) {
  size_t done = 0;
  while (done < buffer.size()) {
    auto n = co_await read(buffer.subspan(done), offset + done);
    if (!n) co_return Unexpected{n.error()};
    if (*n == 0) break;  // the end of the file
    done += *n;
  }
  co_return done;
}

Task<Result<void>> File::write_all(std::span<const std::byte> data, uint64_t offset) {
  size_t done = 0;
  while (done < data.size()) {
    auto n = co_await write(data.subspan(done), offset + done);
    if (!n) co_return Unexpected{n.error()};
    if (*n == 0) co_return Unexpected{std::errc::io_error};  // nothing written: no progress
    done += *n;
  }
  co_return Result<void>{};
}

Task<> File::read_batch(std::span<ReadRequest> requests) {
  detail::ReadBatch batch;
  auto on_read = [](detail::IoContext& context, int32_t res, uint32_t) noexcept {
    auto& op = static_cast<ReadRequest::Read&>(context);
    op.result = res;
    detail::ReadBatch& owner = *op.batch;
    return --owner.outstanding == 0 ? owner.waiter : std::coroutine_handle<>();
  };
  for (ReadRequest& request : requests) {
    ReadRequest::Read& op = request.op_;
    op.code = detail::OpCode::kRead;
    op.fd = fd_.get();
    op.data = request.buffer_.data();
    op.size = static_cast<uint32_t>(std::min<size_t>(request.buffer_.size(), UINT32_MAX));
    op.offset = request.offset_;
    op.batch = &batch;
    op.on_complete = on_read;
    op.result = 0;
    if (op.size == 0) {
      op.result = -EINVAL;  // as ReadOp: 0 must mean the end of the file
      continue;
    }
    if (detail::LoopAccess::submit(*loop_, op)) ++batch.outstanding;  // refused: op.result says why
  }
  co_await BatchDone{batch.outstanding, batch.waiter};
}

Task<Result<void>> File::close() {
  if (!fd_) co_return Unexpected{std::errc::bad_file_descriptor};
  co_return co_await io::close(*loop_, fd_.release());
}

Result<uint64_t> File::size() const noexcept {
  struct stat status {};
  if (::fstat(fd_.get(), &status) != 0) return Unexpected{error_from_errno(errno)};
  return static_cast<uint64_t>(status.st_size);
}

size_t File::direct_alignment() const noexcept {
  constexpr size_t kSafe = 4096;
  struct statx status {};
  if (::statx(fd_.get(), "", AT_EMPTY_PATH, STATX_DIOALIGN, &status) != 0 ||
      !(status.stx_mask & STATX_DIOALIGN)) {
    return kSafe;
  }
  const uint32_t memory_alignment = status.stx_dio_mem_align;
  const uint32_t offset_alignment = status.stx_dio_offset_align;
  if (memory_alignment == 0 || offset_alignment == 0) return kSafe;  // no O_DIRECT here
  return std::max<size_t>(memory_alignment, offset_alignment);
}

}  // namespace ucp

// Regular files and block devices on the epoll backend, which epoll cannot watch: RWF_NOWAIT
// first (a page-cache hit completes at once), then the FileWorkers threads.

#include <cerrno>

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "EpollBackend.h"
#include "EpollState.h"

namespace ucp::detail {

using namespace epoll;  // EpollState.h

// Regular files are always "ready" to epoll, so readiness says nothing about the disk. A page
// cache hit completes here at once (RWF_NOWAIT); what would wait goes to the worker threads.
void EpollBackend::start_file(Operation& op) noexcept {
  // O_DIRECT: RWF_NOWAIT only refuses to wait for locks; the read itself would still block the
  // loop until the device answers. Straight to the workers.
  const int status_flags = file_nowait_ ? ::fcntl(op.fd, F_GETFL) : -1;
  if (file_nowait_ && status_flags >= 0 && !(status_flags & O_DIRECT)) {
    iovec vector{op.data, op.size};
    const off_t offset = op.offset == kCurrentPosition ? -1 : static_cast<off_t>(op.offset);
    ssize_t n;
    do {
      n = op.code == OpCode::kRead ? ::preadv2(op.fd, &vector, 1, offset, RWF_NOWAIT)
                                   : ::pwritev2(op.fd, &vector, 1, offset, RWF_NOWAIT);
    } while (n < 0 && errno == EINTR);
    if (n >= 0) {
      complete(op, static_cast<int32_t>(n));
      return;
    }
    // EAGAIN: it would wait; EOPNOTSUPP/EINVAL/ENOSYS: no RWF_NOWAIT here (the workers report
    // a real EINVAL again). Anything else is the answer.
    const int error = errno;
    if (!would_block(error) && error != EOPNOTSUPP && error != EINVAL && error != ENOSYS) {
      complete(op, -error);
      return;
    }
  }
  // The job gets its own reference to the file: closing op.fd meanwhile cannot make it read
  // another file that reused the number.
  const int job_fd = ::fcntl(op.fd, F_DUPFD_CLOEXEC, 0);
  if (job_fd >= 0 && start_file_workers()) {
    set_state(op, kInWorkers);
    if (workers_.push(op, UniqueFd(job_fd))) return;
  } else if (job_fd >= 0) {
    ::close(job_fd);
  }
  // No fd or no thread to spare: better a short wait for the disk than a failed read.
  complete(op, FileWorkers::run(op, op.fd));
}

// openat, fsync, fdatasync: no form of them returns instead of waiting for the disk.
void EpollBackend::start_file_call(Operation& op) noexcept {
  UniqueFd job_fd;
  if (op.fd >= 0) {  // the directory, or the file to sync: the job keeps its own reference
    job_fd = UniqueFd(::fcntl(op.fd, F_DUPFD_CLOEXEC, 0));
    if (!job_fd) {
      complete(op, -errno);
      return;
    }
  }
  if (start_file_workers()) {
    set_state(op, kInWorkers);
    if (workers_.push(op, std::move(job_fd))) return;
  }
  complete(op, FileWorkers::run(op, job_fd ? job_fd.get() : op.fd));
}

bool EpollBackend::start_file_workers() noexcept {
  if (workers_registered_) return true;
  auto notifier = workers_.open_notifier();
  if (!notifier) return false;
  epoll_event event{};
  event.events = EPOLLIN | EPOLLET;
  event.data.u64 = kWorkersTag;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, *notifier, &event) != 0) return false;
  workers_registered_ = true;
  return true;
}

void EpollBackend::on_files_done() noexcept {
  files_done_.clear();
  workers_.take_done(files_done_);
  for (const FileWorkers::Done& done : files_done_) complete(*done.op, done.res);
}

}  // namespace ucp::detail

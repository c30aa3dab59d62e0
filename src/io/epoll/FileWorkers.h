#pragma once
// FileWorkers: the epoll backend's threads for file I/O that readiness cannot express. A
// regular file is always "ready" for epoll (epoll_ctl refuses it with EPERM), yet a read may
// wait for the disk; so a read or write the backend could not finish at once (RWF_NOWAIT said
// EAGAIN) runs here, on one of a few threads, and its result comes back to the loop. So do
// the file calls that have no non-blocking form at all: openat(2), fsync(2), fdatasync(2).
//
// A job works on its own dup() of the fd, so the file stays open until the job ends even if
// the application closes its fd (and the number is reused) meanwhile, as io_uring holds its
// own reference to the file. Results go into a list under the mutex; the first one of a batch
// writes an eventfd that the backend watches in its epoll set, and the loop takes the whole
// list at once. The threads start with the first job: a loop that never touches a file has
// none.
//
// Thread contract: push/remove/take_done/start on the owning loop's thread; the workers are
// internal. The destructor joins them (jobs not yet started are dropped; their fds closed).

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <sys/types.h>
#include <unistd.h>

#include "ucp/base/Result.h"
#include "ucp/base/UniqueFd.h"
#include "ucp/io/detail/Operation.h"

namespace ucp::detail {

class FileWorkers {
 public:
  struct Done {
    Operation* op;
    int32_t res;
  };

  explicit FileWorkers(size_t threads) noexcept : thread_count_(threads) {}
  FileWorkers(const FileWorkers&) = delete;
  FileWorkers& operator=(const FileWorkers&) = delete;
  ~FileWorkers();

  /// Creates the eventfd results are announced on (non-blocking); the caller adds it to its
  /// epoll set. The threads start with the first push().
  Result<int> open_notifier();
  /// Queues `op` (kRead, kWrite, kOpenAt, kFsync) to run on `fd`, which the job owns (empty:
  /// op.fd itself, e.g. AT_FDCWD for kOpenAt). False when no thread can be started: nothing
  /// was queued then and `fd` is closed.
  bool push(Operation& op, UniqueFd fd);
  /// Takes `op` back if no worker has started it. True: it will not run.
  bool remove(Operation& op) noexcept;
  /// Takes back every job not yet started on `fd` (the caller's fd number) into `out`.
  void remove_fd(int fd, std::vector<Operation*>& out);
  /// Takes back every job not yet started.
  void remove_all(std::vector<Operation*>& out);
  /// Moves the finished jobs into `out` (after clearing the notifier's count).
  void take_done(std::vector<Done>& out);

  size_t thread_count() const noexcept { return thread_count_; }
  bool started() const noexcept { return !threads_.empty(); }
  int notifier() const noexcept { return notifier_.get(); }

  /// The blocking call itself (also the loop's fallback when no thread starts).
  static int32_t run(const Operation& op, int fd) noexcept;
  /// The system call of a kRead or kWrite on `fd`: at op.offset, or at the file position
  /// (kCurrentPosition). -1 with errno on failure, EINTR included. The backend's readiness
  /// path (pipes, eventfds) and run() both make it here.
  static ssize_t read_or_write(const Operation& op, int fd) noexcept {
    if (op.code == OpCode::kRead) {
      return op.offset == kCurrentPosition
                 ? ::read(fd, op.data, op.size)
                 : ::pread(fd, op.data, op.size, static_cast<off_t>(op.offset));
    }
    return op.offset == kCurrentPosition
               ? ::write(fd, op.data, op.size)
               : ::pwrite(fd, op.data, op.size, static_cast<off_t>(op.offset));
  }

 private:
  struct Job {
    Operation* op;
    int user_fd;
    UniqueFd fd;
  };
  void work() noexcept;

  const size_t thread_count_;
  UniqueFd notifier_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> queue_;   // guarded by mutex_
  std::vector<Done> done_;  // guarded by mutex_
  bool stopping_ = false;   // guarded by mutex_
  std::vector<std::thread> threads_;
};

}  // namespace ucp::detail

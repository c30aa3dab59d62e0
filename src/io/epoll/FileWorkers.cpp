#include "FileWorkers.h"

#include <cerrno>
#include <system_error>

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace ucp::detail {

FileWorkers::~FileWorkers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    queue_.clear();  // jobs not yet started: their fds close here
  }
  wake_.notify_all();
  for (auto& thread : threads_) thread.join();
}

Result<int> FileWorkers::open_notifier() {
  int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return Unexpected{error_from_errno(errno)};
  notifier_ = UniqueFd(fd);
  return fd;
}

bool FileWorkers::push(Operation& op, UniqueFd fd) {
  if (threads_.empty()) {
    try {
      for (size_t i = 0; i < thread_count_; ++i) threads_.emplace_back([this] { work(); });
    } catch (const std::system_error&) {
      if (threads_.empty()) return false;  // run with the threads that did start
    }
  }
  const int user_fd = op.fd;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(Job{&op, user_fd, std::move(fd)});
  }
  wake_.notify_one();
  return true;
}

bool FileWorkers::remove(Operation& op) noexcept {
  std::lock_guard lock(mutex_);
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->op == &op) {
      queue_.erase(it);
      return true;
    }
  }
  return false;
}

void FileWorkers::remove_fd(int fd, std::vector<Operation*>& out) {
  std::lock_guard lock(mutex_);
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->user_fd == fd) {
      out.push_back(it->op);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
}

void FileWorkers::remove_all(std::vector<Operation*>& out) {
  std::lock_guard lock(mutex_);
  for (auto& job : queue_) out.push_back(job.op);
  queue_.clear();
}

void FileWorkers::take_done(std::vector<Done>& out) {
  uint64_t count;
  [[maybe_unused]] ssize_t n = ::read(notifier_.get(), &count, sizeof count);
  std::lock_guard lock(mutex_);
  out.insert(out.end(), done_.begin(), done_.end());
  done_.clear();
}

int32_t FileWorkers::run(const Operation& op, int fd) noexcept {
  ssize_t n;
  do {
    switch (op.code) {
      case OpCode::kRead:
      case OpCode::kWrite:
        n = read_or_write(op, fd);
        break;
      case OpCode::kOpenAt:
        n = ::openat(fd, static_cast<const char*>(op.data), static_cast<int>(op.size),
                     static_cast<mode_t>(op.offset));
        break;
      case OpCode::kFsync:
        n = (op.size & kFsyncDataOnly) ? ::fdatasync(fd) : ::fsync(fd);
        break;
      default:
        n = -1;
        errno = EINVAL;
        break;
    }
  } while (n < 0 && errno == EINTR);
  return n < 0 ? -errno : static_cast<int32_t>(n);
}

void FileWorkers::work() noexcept {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    const int32_t res = run(*job.op, job.fd ? job.fd.get() : job.user_fd);
    job.fd.reset();
    lock.lock();
    // Only the first result of a batch writes the eventfd: the loop takes them all at once.
    const bool announce = done_.empty();
    done_.push_back(Done{job.op, res});
    if (announce) {
      uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(notifier_.get(), &one, sizeof one);
    }
  }
}

}  // namespace ucp::detail

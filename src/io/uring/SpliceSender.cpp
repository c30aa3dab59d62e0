#include "SpliceSender.h"

#include <algorithm>
#include <cerrno>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "ucp/io/EventLoop.h"

#include "../Sigpipe.h"

namespace ucp::detail {

namespace {
constexpr size_t kIdleJobs = 64;
constexpr unsigned kFillFlags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
constexpr unsigned kDrainFlags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
}  // namespace

SpliceSender::~SpliceSender() = default;

Result<SpliceSender::Pipe> SpliceSender::take_pipe() noexcept {
  if (!idle_pipes_.empty()) {
    Pipe pipe = std::move(idle_pipes_.back());
    idle_pipes_.pop_back();
    return pipe;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return Unexpected{error_from_errno(errno)};
  Pipe pipe{UniqueFd(fds[0]), UniqueFd(fds[1]), 0};
  // A bigger pipe moves a large file in fewer pairs; refused (pipe-max-size, the per-user pipe
  // budget) it keeps the default.
  (void)::fcntl(fds[1], F_SETPIPE_SZ, kPipeBytes);
  const int capacity = ::fcntl(fds[1], F_GETPIPE_SZ);
  pipe.capacity = capacity > 0 ? static_cast<uint32_t>(capacity) : 4096;
  return pipe;
}

void SpliceSender::give_pipe(Pipe pipe) noexcept {
  if (idle_pipes_.size() < kIdlePipes) idle_pipes_.push_back(std::move(pipe));
}

bool SpliceSender::start(Operation& op) noexcept {
  ignore_default_sigpipe();  // a splice into a reset socket raises SIGPIPE, like write(2)
  // Non-blocking, so that a full socket answers EAGAIN (the job then polls) instead of holding
  // an io-wq worker until the peer reads.
  const int flags = ::fcntl(op.fd, F_GETFL);
  if (flags < 0 || (!(flags & O_NONBLOCK) && ::fcntl(op.fd, F_SETFL, flags | O_NONBLOCK) != 0)) {
    op.result = -errno;
    return false;
  }
  auto pipe = take_pipe();
  if (!pipe) {
    op.result = -pipe.error().value();
    return false;
  }
  std::unique_ptr<Job> owned;
  if (!idle_jobs_.empty()) {
    owned = std::move(idle_jobs_.back());
    idle_jobs_.pop_back();
  } else {
    owned = std::make_unique<Job>();
    owned->sender = this;
  }
  Job& job = *owned;
  job.op = &op;
  job.pipe = std::move(*pipe);
  job.offset = op.offset;
  job.to_fill = op.size;
  job.in_pipe = 0;
  job.sent = 0;
  job.end_of_file = op.size == 0;
  job.cancelled = false;
  if (op.size == 0 || !submit_pair(job, Pair::kFillDrain)) {
    op.result = op.size == 0 ? 0 : -EAGAIN;
    give_pipe(std::move(job.pipe));
    idle_jobs_.push_back(std::move(owned));
    return false;
  }
  op.aux = owned.release();  // back into idle_jobs_ in finish()
  return true;
}

bool SpliceSender::submit_pair(Job& job, Pair pair) noexcept {
  io_uring_sqe* sqes[2];
  if (!ring_.acquire(sqes, 2)) return false;
  const int socket = job.op->fd;
  uint32_t drain_bytes;
  if (pair == Pair::kFillDrain) {
    job.chunk = std::min(job.to_fill, job.pipe.capacity);
    io_uring_prep_splice(sqes[0], job.op->source_fd, static_cast<int64_t>(job.offset),
                         job.pipe.write.get(), -1, job.chunk, kFillFlags);
    drain_bytes = job.chunk;
  } else {
    io_uring_prep_poll_add(sqes[0], socket, POLLOUT);
    drain_bytes = job.in_pipe;
  }
  sqes[0]->flags |= IOSQE_IO_LINK;
  io_uring_sqe_set_data(sqes[0], static_cast<IoContext*>(&job.first()));
  io_uring_prep_splice(sqes[1], job.pipe.read.get(), -1, socket, -1, drain_bytes, kDrainFlags);
  io_uring_sqe_set_data(sqes[1], static_cast<IoContext*>(&job.second()));
  job.pair = pair;
  job.first().pending = job.second().pending = true;
  job.outstanding = 2;
  return true;
}

std::coroutine_handle<> SpliceSender::Job::step_done(Step& step, int32_t res) noexcept {
  step.result = res;
  step.pending = false;
  if (--outstanding > 0) return {};
  return sender->advance(*this);
}

std::coroutine_handle<> SpliceSender::advance(Job& job) noexcept {
  const int32_t first = job.first().result;
  const int32_t drained = job.second().result;
  bool link_broken = false;  // the first of the pair ended short: the kernel cancelled the drain
  if (job.pair == Pair::kFillDrain) {
    if (first < 0) return finish(job, first);
    if (first == 0) job.end_of_file = true;
    const auto filled = static_cast<uint32_t>(first);
    job.in_pipe += filled;
    job.to_fill -= filled;
    job.offset += filled;
    link_broken = filled < job.chunk;
  } else if (first < 0) {
    return finish(job, first);
  }
  if (drained > 0) {
    job.in_pipe -= static_cast<uint32_t>(drained);
    job.sent += static_cast<uint32_t>(drained);
  } else if (drained == -ECANCELED && link_broken) {
    // Not a cancel of ours: the short fill broke the link. Drain what it put in.
  } else if (drained == 0 && job.in_pipe > 0) {
    return finish(job, -EPIPE);  // the socket took nothing of a non-empty pipe
  } else if (drained < 0 && drained != -EAGAIN) {
    return finish(job, drained);
  }
  if (job.cancelled || owner_.io_closed()) return finish(job, -ECANCELED);
  if (job.in_pipe > 0) {
    if (!submit_pair(job, Pair::kPollDrain)) return finish(job, -EAGAIN);
    return {};
  }
  if (job.to_fill > 0 && !job.end_of_file) {
    if (!submit_pair(job, Pair::kFillDrain)) return finish(job, -EAGAIN);
    return {};
  }
  return finish(job, 0);
}

// `res` is the error that ended the job, or 0; the operation reports the bytes sent if any.
namespace {
int32_t job_result(uint32_t sent, int32_t error) noexcept {
  return sent > 0 ? static_cast<int32_t>(sent) : error;
}
}  // namespace

std::coroutine_handle<> SpliceSender::finish(Job& job, int32_t res) noexcept {
  Operation& op = *job.op;
  const int32_t result = job_result(job.sent, res);
  if (job.in_pipe == 0) give_pipe(std::move(job.pipe));
  job.pipe = Pipe{};  // holding bytes nobody will send: closed here
  job.op = nullptr;
  op.aux = nullptr;
  std::unique_ptr<Job> owned(&job);
  if (idle_jobs_.size() < kIdleJobs) idle_jobs_.push_back(std::move(owned));
  return op.on_complete(op, result, 0);
}

void SpliceSender::cancel(Operation& op) noexcept {
  auto* job = static_cast<Job*>(op.aux);
  if (job == nullptr || job->op != &op) return;
  job->cancelled = true;
  for (Step* step : {&job->first(), &job->second()}) {
    if (!step->pending) continue;
    io_uring_sqe* sqe;
    if (!ring_.acquire(&sqe, 1)) return;  // out of room: the job runs its course
    io_uring_prep_cancel(sqe, step, 0);
    io_uring_sqe_set_data(sqe, nullptr);
  }
}

}  // namespace ucp::detail

#include "IoUring.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ucp/log/Logger.h"

namespace ucp::detail {
namespace {

int try_setup(unsigned entries, io_uring_params& params, io_uring& ring) {
  return io_uring_queue_init_params(entries, &ring, &params);
}

}  // namespace

std::string UringFeatures::describe() const {
  std::string out;
  auto add = [&out](const char* name, bool on) {
    if (!out.empty()) out += ' ';
    out += name;
    out += on ? "=on" : "=off";
  };
  add("single_issuer", single_issuer);
  add("defer_taskrun", defer_taskrun);
  add("coop_taskrun", coop_taskrun);
  add("sqpoll", sqpoll);
  if (sqpoll) out += " sqpoll_cpu=" + (sqpoll_cpu >= 0 ? std::to_string(sqpoll_cpu) : "any");
  add("nodrop", nodrop);
  add("multishot_accept", multishot_accept);
  add("multishot_recv", multishot_recv);
  add("cancel_fd", cancel_fd);
  add("msg_ring", msg_ring);
  add("send_zc", send_zc);
  return out;
}

Result<std::unique_ptr<IoUring>> IoUring::create(const LoopOptions& options, int share_with_fd,
                                                 LoopStats& stats, std::string& warnings) {
  std::unique_ptr<IoUring> self(new IoUring(stats));
  unsigned entries = std::max(options.ring_entries, 2u);

  // Flags are only detectable by trying (EINVAL): start with everything asked for, then
  // drop the optional ones in order of how much they are worth.
  unsigned base = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP | IORING_SETUP_SUBMIT_ALL |
                  IORING_SETUP_R_DISABLED;  // enabled on the loop thread: SINGLE_ISSUER owner
  bool want_sqpoll = options.sqpoll;
  bool want_defer = options.defer_taskrun && !want_sqpoll;  // DEFER_TASKRUN excludes SQPOLL
  struct Attempt {
    unsigned flags;
    bool defer, single, coop;
  };
  std::vector<Attempt> attempts;
  if (want_defer) {
    attempts.push_back(
        {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, true, true, false});
  }
  attempts.push_back({IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN, false, true, true});
  attempts.push_back({IORING_SETUP_COOP_TASKRUN, false, false, true});
  attempts.push_back({0, false, false, false});

  // SQ_AFF pins the poller to event_loop.sqpoll_cpu; only the ring that creates the poller
  // uses it (the others attach to that one).
  int sq_cpu = want_sqpoll ? options.sqpoll_cpu : -1;
  if (!want_sqpoll && options.sqpoll_cpu >= 0) {
    warnings += "sqpoll_cpu: set to " + std::to_string(options.sqpoll_cpu) +
                " but sqpoll is off, so there is no SQPOLL thread to pin; ignored\n";
  }
  bool sqpoll = want_sqpoll;
  int last_error = 0;
  for (;;) {
    for (const Attempt& attempt : attempts) {
      io_uring_params params{};
      params.flags = base | attempt.flags;
      // A CQ of at least twice the SQ keeps overflow rare (multishot operations post several
      // CQEs per SQE); 4x costs little locked memory.
      params.cq_entries = entries * 4;
      if (sqpoll) {
        params.flags |= IORING_SETUP_SQPOLL;
        params.sq_thread_idle = options.sqpoll_idle_ms;
        if (sq_cpu >= 0) {
          params.flags |= IORING_SETUP_SQ_AFF;
          params.sq_thread_cpu = static_cast<uint32_t>(sq_cpu);
        }
        if (share_with_fd >= 0) {
          params.flags |= IORING_SETUP_ATTACH_WQ;
          params.wq_fd = static_cast<uint32_t>(share_with_fd);
        }
      }
      int ret = try_setup(entries, params, self->ring_);
      if (ret == 0) {
        self->initialized_ = true;
        auto& f = self->features_;
        f.defer_taskrun = attempt.defer;
        f.single_issuer = attempt.single;
        f.coop_taskrun = attempt.coop;
        f.sqpoll = sqpoll;
        f.sqpoll_cpu = sqpoll ? sq_cpu : -1;
        f.nodrop = params.features & IORING_FEAT_NODROP;
        f.ext_arg = params.features & IORING_FEAT_EXT_ARG;
        break;
      }
      last_error = -ret;
      if (ret != -EINVAL) break;  // EPERM/ENOSYS/ENOMEM are not about flags
    }
    if (self->initialized_) break;
    if (sqpoll && sq_cpu >= 0 && last_error == EINVAL) {
      // The kernel takes only an online CPU of this process's cpuset.
      warnings += "sqpoll_cpu: the kernel refused CPU " + std::to_string(sq_cpu) +
                  " for the SQPOLL thread (offline, or outside this process's cpuset); the "
                  "thread is not pinned\n";
      sq_cpu = -1;
      continue;
    }
    if (sqpoll && last_error == EPERM) {
      warnings += "sqpoll: the kernel refused IORING_SETUP_SQPOLL (" +
                  std::string(std::strerror(last_error)) +
                  "; it needs CAP_SYS_NICE before 5.13); running without it\n";
      sqpoll = false;
      continue;
    }
    break;
  }
  if (!self->initialized_) return Unexpected{error_from_errno(last_error)};
  if (options.defer_taskrun && !want_sqpoll && !self->features_.defer_taskrun) {
    warnings +=
        "defer_taskrun: the kernel lacks IORING_SETUP_DEFER_TASKRUN (6.1+); using "
        "COOP_TASKRUN\n";
  }

  if (io_uring_probe* probe = io_uring_get_probe_ring(&self->ring_)) {
    auto& f = self->features_;
    // Opcodes stand in for the features that arrived in the same kernel release.
    bool has_socket = io_uring_opcode_supported(probe, IORING_OP_SOCKET);  // 5.19
    f.multishot_accept = has_socket;
    f.cancel_fd = has_socket;
    f.msg_ring = io_uring_opcode_supported(probe, IORING_OP_MSG_RING);
    f.send_zc = io_uring_opcode_supported(probe, IORING_OP_SEND_ZC);  // 6.0
    f.multishot_recv = f.send_zc;
    io_uring_free_probe(probe);
  }
  self->pending_capacity_ = options.pending_queue_capacity;
  return self;
}

IoUring::~IoUring() {
  if (initialized_) io_uring_queue_exit(&ring_);
}

Result<std::unique_ptr<FixedBuffers>> IoUring::register_buffers(uint32_t count, uint32_t size) {
  size_t bytes = size_t{count} * size;
  void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  if (mapped == MAP_FAILED) return Unexpected{error_from_errno(errno)};
  auto storage = static_cast<std::byte*>(mapped);
  std::vector<iovec> vectors(count);
  for (uint32_t i = 0; i < count; ++i) vectors[i] = {storage + size_t{i} * size, size};
  if (int ret = io_uring_register_buffers(&ring_, vectors.data(), count); ret < 0) {
    ::munmap(mapped, bytes);
    return Unexpected{error_from_errno(-ret)};
  }
  return std::make_unique<FixedBuffers>(storage, bytes, count, size);
}

std::string describe_registration_error(std::error_code error, uint32_t count, uint32_t size) {
  std::string what = "registered buffers: cannot register " + std::to_string(count) + " x " +
                     std::to_string(size) + " = " + std::to_string(uint64_t{count} * size) +
                     " bytes";
  if (error.value() == ENOMEM) {
    rlimit limit{};
    ::getrlimit(RLIMIT_MEMLOCK, &limit);
    std::string current =
        limit.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(limit.rlim_cur) + " bytes";
    return what + ": over the locked-memory limit (RLIMIT_MEMLOCK = " + current +
           "); raise `ulimit -l` or lower event_loop.registered_buffers_count; running without "
           "registered buffers";
  }
  return what + ": " + error.message() + "; running without registered buffers";
}

bool IoUring::register_napi_busy_poll(uint32_t usecs) noexcept {
  // liburing 2.3 predates IORING_REGISTER_NAPI (kernel 6.9): the opcode and the argument's
  // layout, from the kernel's uapi header, are stable ABI.
  constexpr unsigned kRegisterNapi = 27;
  struct NapiArgument {
    uint32_t busy_poll_to;  // microseconds
    uint8_t prefer_busy_poll;
    uint8_t pad[3];
    uint64_t reserved;
  } argument{usecs, 0, {}, 0};
  static_assert(sizeof(NapiArgument) == 16);
  return ::syscall(__NR_io_uring_register, ring_.ring_fd, kRegisterNapi, &argument, 1) == 0;
}

Result<void> IoUring::enable() {
  // liburing 2.3 declares io_uring_enable_rings but does not export it: call the kernel.
  long ret =
      ::syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
  if (ret < 0) return Unexpected{error_from_errno(errno)};
  // A registered ring fd spares io_uring_enter the fd lookup and reference count on every
  // call. It is per thread, hence here on the loop thread; without it (old kernel) the
  // ordinary fd keeps working.
  (void)io_uring_register_ring_fd(&ring_);
  return {};
}

bool IoUring::acquire(io_uring_sqe** out, unsigned n) {
  // Order matters (a linked chain, or a send queued behind another): once anything waits
  // in the pending queue, later SQEs wait behind it.
  if (pending_.empty() && io_uring_sq_space_left(&ring_) >= n) {
    for (unsigned i = 0; i < n; ++i) {
      out[i] = io_uring_get_sqe(&ring_);
      std::memset(out[i], 0, sizeof(io_uring_sqe));
    }
    in_flight_ += n;
    return true;
  }
  if (pending_.size() + n > pending_capacity_) {
    ++stats_.rejected_submissions;
    return false;
  }
  for (unsigned i = 0; i < n; ++i) {
    out[i] = &pending_.emplace_back();  // deque: earlier references stay valid
    std::memset(out[i], 0, sizeof(io_uring_sqe));
  }
  stats_.deferred_submissions += n;
  in_flight_ += n;
  return true;
}

void IoUring::flush_pending() {
  while (!pending_.empty()) {
    // A linked chain goes into the SQ whole, or not at all this round.
    unsigned chain = 1;
    while (chain <= pending_.size() && (pending_[chain - 1].flags & IOSQE_IO_LINK)) ++chain;
    chain = std::min<unsigned>(chain, static_cast<unsigned>(pending_.size()));
    if (io_uring_sq_space_left(&ring_) < chain) return;
    for (unsigned i = 0; i < chain; ++i) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      std::memcpy(sqe, &pending_.front(), sizeof(io_uring_sqe));
      pending_.pop_front();
    }
  }
}

void IoUring::submit_and_wait(unsigned wait_nr, std::chrono::nanoseconds timeout) {
  // More SQEs waiting than the SQ holds: hand the kernel one SQ-full at a time until the
  // pending queue is empty, so none of them waits behind a blocking wait below.
  flush_pending();
  while (!pending_.empty()) {
    int ret = io_uring_submit(&ring_);
    ++stats_.submit_calls;
    if (ret <= 0) break;  // -EBUSY/-EAGAIN: reap first; the rest goes next iteration
    stats_.operations_submitted += static_cast<unsigned>(ret);
    size_t before = pending_.size();
    flush_pending();
    if (pending_.size() == before) break;  // the SQ did not drain (SQPOLL still consuming)
  }
  if (!pending_.empty()) wait_nr = 0;  // never sleep while work is still queued here
  for (int attempt = 0; attempt < 64; ++attempt) {
    unsigned ready = io_uring_sq_ready(&ring_);
    // Nothing to submit and no wait: done, unless completions wait for this thread to enter
    // the kernel (DEFER_TASKRUN runs them only then; COOP_TASKRUN posts them at the next
    // entry, which a busy-polling loop must not leave to the next timer interrupt).
    if (ready == 0 && wait_nr == 0 && !features_.defer_taskrun && !features_.coop_taskrun) return;
    int ret;
    if (wait_nr == 0) {
      ret = io_uring_submit_and_get_events(&ring_);
    } else if (timeout.count() < 0) {
      ret = io_uring_submit_and_wait(&ring_, wait_nr);
    } else {
      // With IORING_FEAT_EXT_ARG the timeout rides along with the wait: no timeout SQE.
      __kernel_timespec limit{timeout.count() / 1000000000, timeout.count() % 1000000000};
      io_uring_cqe* cqe;
      ret = io_uring_submit_and_wait_timeout(&ring_, &cqe, wait_nr, &limit, nullptr);
      if (ret == -ETIME) ret = 0;
    }
    ++stats_.submit_calls;
    if (ret >= 0) {
      stats_.operations_submitted += static_cast<unsigned>(ret);
      return;
    }
    if (ret == -EINTR) continue;
    if (ret == -EBUSY || ret == -EAGAIN) {
      // The CQ (or its overflow list) is full: the caller must reap before the kernel
      // takes more. Returning lets the loop drain; the SQEs stay queued for next time.
      ++stats_.busy_retries;
      return;
    }
    LOG_ERROR("io_uring_enter failed: {}", std::strerror(-ret));
    return;
  }
}

namespace {

// " (RLIMIT_AS = 3221225472 bytes)" when the address space is limited, else "".
std::string address_space_note() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return {};
  return " (RLIMIT_AS = " + std::to_string(limit.rlim_cur) + " bytes)";
}

}  // namespace

std::string describe_setup_error(std::error_code error, const LoopOptions& options) {
  if (error == SetupError::kReceiveBuffers) {
    return "event_loop.provided_buffer_size: cannot map " +
           std::to_string(options.provided_buffers_count) + " x " +
           std::to_string(options.provided_buffer_size) + " = " +
           std::to_string(uint64_t{options.provided_buffers_count} * options.provided_buffer_size) +
           " bytes of receive buffers: out of memory or address space" + address_space_note() +
           "; lower event_loop.provided_buffers_count or provided_buffer_size";
  }
  // EPERM, ENOSYS and EINVAL mean io_uring is unavailable on this host: BackendSelection
  // explains those. What is left are limits of this process.
  switch (error.value()) {
    case ENOMEM: {
      // Kernels before 5.12 charge rings to RLIMIT_MEMLOCK; mapping them into the process
      // counts against RLIMIT_AS.
      rlimit limit{};
      ::getrlimit(RLIMIT_MEMLOCK, &limit);
      return "event_loop.ring_entries: cannot set up an io_uring of " +
             std::to_string(options.ring_entries) +
             " entries: out of locked memory (RLIMIT_MEMLOCK = " + std::to_string(limit.rlim_cur) +
             " bytes) or address space" + address_space_note() +
             "; raise `ulimit -l` / `ulimit -v` or lower event_loop.ring_entries";
    }
    case EMFILE:
    case ENFILE:
      return "cannot set up an io_uring: out of file descriptors (" + error.message() + ")";
    default:
      return "cannot set up an io_uring: " + error.message();
  }
}

}  // namespace ucp::detail

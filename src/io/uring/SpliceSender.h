#pragma once
// SpliceSender: OpCode::kSendFile on io_uring. File bytes go to the socket through a pipe with
// IORING_OP_SPLICE, never through user memory:
//
//   fill:  splice(file @ offset -> pipe, chunk) --IOSQE_IO_LINK--> drain: splice(pipe -> socket)
//   the pipe still holds bytes (socket full, or a short fill broke the link):
//          POLL_ADD(socket, POLLOUT)            --IOSQE_IO_LINK--> drain: splice(pipe -> socket)
//   the pipe is empty and bytes remain: the next fill + drain
//
// Each pair is one submission; the next one is prepared from the second CQE of the last. The
// operation completes once the pipe is empty again, with the bytes sent, 0 at the end of the
// file, or -errno when nothing was sent. Pipes come from a small per-loop pool; a pipe left
// holding bytes (an error or a cancel half-way) is closed, never reused.
//
// io_uring runs every splice in its io-wq workers, never inline, so each pair costs a worker
// hand-off: docs/benchmarks.md weighs that against read + send. The socket is made
// non-blocking (once per operation, F_GETFL) so that a slow peer parks the operation on the
// poll instead of blocking a worker, and the splice flags are SPLICE_F_NONBLOCK on the pipe
// side so that nothing ever waits for a pipe.
//
// Thread contract: the owning loop's thread only.

#include <cstdint>
#include <memory>
#include <vector>

#include "ucp/base/UniqueFd.h"
#include "ucp/io/detail/IoContext.h"
#include "ucp/io/detail/Operation.h"

#include "IoUring.h"

namespace ucp::detail {

class SpliceSender {
 public:
  /// Pipe capacity asked for (F_SETPIPE_SZ); the kernel may give less.
  static constexpr int kPipeBytes = 256 * 1024;
  /// Idle pipes kept for the next operations; more are closed when returned.
  static constexpr size_t kIdlePipes = 16;

  SpliceSender(IoUring& ring, EventLoop& owner) noexcept : ring_(ring), owner_(owner) {}
  SpliceSender(const SpliceSender&) = delete;
  SpliceSender& operator=(const SpliceSender&) = delete;
  ~SpliceSender();

  /// Prepares the first fill + drain. False with op.result set when it cannot start (no pipe:
  /// EMFILE and the like; no submission room: EAGAIN); nothing is in flight then.
  bool start(Operation& op) noexcept;
  void cancel(Operation& op) noexcept;

 private:
  struct Pipe {
    UniqueFd read;
    UniqueFd write;
    uint32_t capacity = 0;
  };
  // The two completion contexts of a job (its bases, told apart by type).
  struct Step : IoContext {
    bool pending = false;
  };
  struct FirstStep : Step {};   // fill or poll
  struct SecondStep : Step {};  // drain
  enum class Pair : uint8_t { kFillDrain, kPollDrain };
  struct Job : FirstStep, SecondStep {
    Job() noexcept {
      FirstStep::on_complete = hook<&Job::first_done, FirstStep>;
      SecondStep::on_complete = hook<&Job::second_done, SecondStep>;
    }
    std::coroutine_handle<> first_done(int32_t res, uint32_t) noexcept {
      return step_done(first(), res);
    }
    std::coroutine_handle<> second_done(int32_t res, uint32_t) noexcept {
      return step_done(second(), res);
    }
    std::coroutine_handle<> step_done(Step& step, int32_t res) noexcept;
    Step& first() noexcept { return static_cast<FirstStep&>(*this); }
    Step& second() noexcept { return static_cast<SecondStep&>(*this); }

    SpliceSender* sender = nullptr;
    Operation* op = nullptr;
    Pipe pipe;
    uint64_t offset = 0;   // next file byte to fill from
    uint32_t to_fill = 0;  // file bytes not yet in the pipe
    uint32_t in_pipe = 0;  // filled, not yet sent
    uint32_t sent = 0;
    uint32_t chunk = 0;  // what the fill in flight asked for
    Pair pair = Pair::kFillDrain;
    uint8_t outstanding = 0;  // CQEs of the pair still due
    bool end_of_file = false;
    bool cancelled = false;
  };

  Result<Pipe> take_pipe() noexcept;
  void give_pipe(Pipe pipe) noexcept;
  bool submit_pair(Job& job, Pair pair) noexcept;
  std::coroutine_handle<> advance(Job& job) noexcept;
  std::coroutine_handle<> finish(Job& job, int32_t res) noexcept;

  IoUring& ring_;
  EventLoop& owner_;
  std::vector<Pipe> idle_pipes_;
  std::vector<std::unique_ptr<Job>> idle_jobs_;
};

}  // namespace ucp::detail

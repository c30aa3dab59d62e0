#pragma once
// The functions of MultishotReceive (io/detail/MultishotReceive.h), included by the two files
// that instantiate it: MultishotRecv.cpp and MultishotRecvMsg.cpp.

#include <cerrno>

#include "ucp/io/detail/LoopAccess.h"
#include "ucp/io/detail/MultishotReceive.h"

#include "ReceiveBuffers.h"

namespace ucp::detail {

template <class Derived, class Entry>
MultishotReceive<Derived, Entry>::MultishotReceive(EventLoop& loop, int socket,
                                                   OpCode kind) noexcept
    : loop_(loop), buffers_(LoopAccess::receive_buffers(loop)) {
  receive().code = kind;
  receive().fd = socket;
  receive().on_complete = hook<&MultishotReceive::on_receive>;
}

template <class Derived, class Entry>
bool MultishotReceive<Derived, Entry>::wait(std::coroutine_handle<> reader) noexcept {
  if (has_news()) return false;
  waiter_ = reader;
  if (state_ == State::kIdle && !start()) {
    waiter_ = {};
    return false;  // error_ says why
  }
  // kArmed: data will come. kPausing: the pause's last completion resumes the receive.
  // kFallback: its completion brings the news.
  return true;
}

template <class Derived, class Entry>
bool MultishotReceive<Derived, Entry>::start() noexcept {
  if (stopped_) {
    error_ = -ECANCELED;
    return false;
  }
  if (pool_dry_) {
    pool_dry_ = false;
    if (!self().start_fallback()) return false;  // error_ says why
    state_ = State::kFallback;
    return true;
  }
  if (!LoopAccess::submit(loop_, receive())) {
    error_ = receive().result;
    return false;
  }
  state_ = State::kArmed;
  return true;
}

template <class Derived, class Entry>
void MultishotReceive<Derived, Entry>::stop_receiving() noexcept {
  stopped_ = true;
  if (state_ == State::kArmed || state_ == State::kPausing) LoopAccess::cancel(loop_, receive());
  if (state_ == State::kFallback) LoopAccess::cancel(loop_, self().fallback_op());
}

template <class Derived, class Entry>
std::coroutine_handle<> MultishotReceive<Derived, Entry>::on_receive(int32_t res,
                                                                     uint32_t completion) noexcept {
  if (self().take(res, completion)) {
    buffers_->note_taken();
    ++queued_;
    if (queued_ >= Derived::kMaxQueued && state_ == State::kArmed) {
      state_ = State::kPausing;  // back-pressure: resumed when the reader waits again
      ++pauses_;
      LoopAccess::cancel(loop_, receive());
    }
  } else if (res == -ENOBUFS) {
    pool_dry_ = true;  // the loop's buffers ran out; not an error of this socket
    self().ran_dry();
  } else if (res == -ECANCELED && (state_ == State::kPausing || stopped_)) {
    // Our own pause or stop: not news for the reader.
  } else if (res < 0) {
    error_ = res;
  }
  if (!(completion & kCompletionMore)) {
    state_ = State::kIdle;
    // Ended with nothing to report (a pause whose cancel completed after the reader had
    // drained the queue and begun to wait again; a dry pool; the kernel stopping the receive
    // for its own reasons): the reader must never see that. Receive again, keep it waiting.
    if (waiter_ && !has_news() && start()) return {};
    became_idle();
  }
  return news();
}

}  // namespace ucp::detail

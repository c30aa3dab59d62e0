#include "ucp/io/detail/MultishotRecvMsg.h"

#include <cassert>
#include <cerrno>
#include <cstring>

#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/LoopAccess.h"

#include "MultishotReceive.ipp"
#include "ReceiveBuffers.h"

namespace ucp::detail {

template class MultishotReceive<MultishotRecvMsg, DatagramEntry>;

namespace {

// The source address of a datagram into `out`: `length` bytes of it, the rest of `out.source`
// zeroed, as in a ReceivedDatagram made afresh (a memset of the tail, not a 128-byte
// sockaddr_storage built and copied).
void set_source(ReceivedDatagram& out, const void* source, socklen_t length) noexcept {
  auto* bytes = reinterpret_cast<std::byte*>(&out.source);
  if (length > sizeof out.source) length = sizeof out.source;
  if (length > 0) std::memcpy(bytes, source, length);
  std::memset(bytes + length, 0, sizeof out.source - length);
  out.source_length = length;
}

}  // namespace

MultishotRecvMsg::MultishotRecvMsg(EventLoop& loop, int socket) noexcept
    : MultishotReceive(loop, socket, OpCode::kRecvMsgMultishot) {
  shape_.msg_namelen = kDatagramNameBytes;
  receive().data = &shape_;
  Operation& fallback = fallback_op();
  fallback.code = OpCode::kRecvMsg;
  fallback.fd = socket;
  fallback.data = &fallback_message_;
  fallback.on_complete = hook<&MultishotRecvMsg::on_fallback, FallbackRecvMsg>;
}

MultishotRecvMsg::~MultishotRecvMsg() {
  assert(!busy());
  for_each_queued([this](const DatagramEntry& entry) { recycle(entry); });
}

bool MultishotRecvMsg::fits(EventLoop& loop, uint32_t max_payload) noexcept {
  const ReceiveBuffers* buffers = detail::LoopAccess::receive_buffers(loop);
  return loop.capabilities().multishot_receive && buffers != nullptr &&
         buffers->buffer_size() >= uint64_t{kDatagramHeadroom} + max_payload;
}

void MultishotRecvMsg::recycle(const DatagramEntry& entry) noexcept {
  if (entry.buffer_id == kPoolEntry) {
    fallback_datagram_.data.reset();
  } else {
    buffers_->recycle(entry.buffer_id);
  }
}

// A handler gives each buffer back within its completion, so buffers it holds never pile up
// and the loop's usual growth (ReceiveBuffers::note_taken) never sees a need: a dry pool is
// the sign that a burst needs more of them at once.
void MultishotRecvMsg::ran_dry() noexcept {
  ++dry_runs_;
  if (handler_) buffers_->ran_dry();
}

int32_t MultishotRecvMsg::take_error() noexcept { return std::exchange(error_, 0); }

bool MultishotRecvMsg::take(int32_t res, uint32_t completion) {
  if (!(completion & kCompletionBuffer)) return false;
  if (handler_) {
    deliver(buffer_id_of(completion), static_cast<uint32_t>(res));
    return false;  // nothing queued
  }
  push({buffer_id_of(completion), static_cast<uint32_t>(res)});
  return true;
}

bool MultishotRecvMsg::deliver_to(Handler handler, ErrorHandler on_error) noexcept {
  assert(!has_waiter());
  handler_ = std::move(handler);
  on_error_ = std::move(on_error);
  // Started before the queue is handed over, so that the receive is busy() while the handler
  // runs: one that destroys its socket then leaves this object to the socket's reaper. (Armed
  // or pausing already: it runs on, or ends and idle() starts it again.)
  if (state_ == State::kIdle && !stopped_ && !start()) {
    handler_ = {};
    on_error_ = {};
    return false;
  }
  // What a reader left queued goes first, in order of arrival: nothing newer has been taken in.
  ReceivedDatagram datagram;
  while (has_data()) {
    pop_into(datagram);
    if (!stopped_) {
      handler_({datagram.data.bytes(), reinterpret_cast<const sockaddr*>(&datagram.source),
                datagram.source_length, datagram.truncated});
    }
    datagram.data.reset();
  }
  if (error_ != 0 && !stopped_) tell_error();
  return true;
}

void MultishotRecvMsg::deliver(uint16_t buffer_id, uint32_t used) noexcept {
  std::byte* buffer = buffers_->buffer(buffer_id);
  if (!stopped_) {
    // A view that does not parse cannot happen with a kernel that keeps its layout; it is
    // dropped, never read past its data.
    if (const auto view = parse_datagram(buffer, used, kDatagramNameBytes)) {
      if (view->truncated) ++truncated_;
      handler_({view->payload, view->source, view->source_length, view->truncated});
    }
  }
  buffers_->recycle_unheld(buffer_id);  // the handler may have stopped us: buffers_ still live
}

void MultishotRecvMsg::deliver_fallback() noexcept {
  ReceivedDatagram& d = fallback_datagram_;
  if (!stopped_) {
    if (d.truncated) ++truncated_;
    handler_({d.data.bytes(), reinterpret_cast<const sockaddr*>(&d.source), d.source_length,
              d.truncated});
  }
  d.data.reset();
  d.truncated = false;
  d.source_length = 0;
}

void MultishotRecvMsg::tell_error() noexcept {
  const int32_t error = std::exchange(error_, 0);
  if (on_error_) on_error_(error_from_errno(-error));
}

// The handler's receive never rests while it is not stopped: an error it ended with is told,
// and it starts again (after a dry pool: the fallback's one receive, then multishot again).
void MultishotRecvMsg::idle() noexcept {
  if (!handler_ || stopped_) return;
  if (error_ != 0) tell_error();
  if (stopped_ || state_ != State::kIdle) return;  // the error handler stopped or restarted us
  if (!start()) tell_error();                      // cannot receive any more: said once
}

bool MultishotRecvMsg::start_fallback() noexcept {
  // The same room a loop buffer gives, so that both paths cut a datagram alike.
  const uint32_t room = buffers_->buffer_size() - kDatagramHeadroom;
  if (fallback_datagram_.data.source() == BufferLease::Source::kNone) {
    fallback_datagram_.data = BufferLease::from_pool(room);
  }
  auto bytes = fallback_datagram_.data.writable();
  fallback_vector_ = {bytes.data(), bytes.size()};
  fallback_message_ = msghdr{};
  fallback_message_.msg_name = &fallback_datagram_.source;
  fallback_message_.msg_namelen = sizeof fallback_datagram_.source;
  fallback_message_.msg_iov = &fallback_vector_;
  fallback_message_.msg_iovlen = 1;
  if (!detail::LoopAccess::submit(loop_, fallback_op())) {
    error_ = fallback_op().result;
    fallback_datagram_.data.reset();
    return false;
  }
  return true;
}

void MultishotRecvMsg::stop() noexcept {
  if (waiter_) {  // a reader waiting hears of it now, with operation_canceled
    if (error_ == 0) error_ = -ECANCELED;
    loop_.schedule(std::exchange(waiter_, {}));
  }
  stop_receiving();
}

std::coroutine_handle<> MultishotRecvMsg::on_fallback(int32_t res, uint32_t) noexcept {
  if (res >= 0) {
    ReceivedDatagram& d = fallback_datagram_;
    d.data.set_size(static_cast<size_t>(res));
    d.source_length = fallback_message_.msg_namelen;
    d.truncated = (fallback_message_.msg_flags & MSG_TRUNC) != 0;
    if (handler_) {
      deliver_fallback();
    } else {
      push({kPoolEntry, static_cast<uint32_t>(res)});
      ++queued_;
    }
  } else {
    fallback_datagram_.data.reset();
    if (!(res == -ECANCELED && stopped_)) error_ = res;
  }
  return fallback_done();
}

void MultishotRecvMsg::pop_into(ReceivedDatagram& out) noexcept {
  const DatagramEntry entry = front();
  pop_front();
  if (entry.buffer_id == kPoolEntry) {
    ReceivedDatagram& d = fallback_datagram_;
    out.data = std::move(d.data);
    set_source(out, &d.source, d.source_length);
    out.truncated = std::exchange(d.truncated, false);
    d.source_length = 0;
    if (out.truncated) ++truncated_;
    return;
  }
  std::byte* buffer = buffers_->buffer(entry.buffer_id);
  const auto view = parse_datagram(buffer, entry.used, kDatagramNameBytes);
  if (!view) {  // cannot happen with a kernel that keeps its layout; never read past the data
    out.data = BufferLease::from_receive_buffer(*buffers_, entry.buffer_id, buffer, 0);
    set_source(out, nullptr, 0);
    out.truncated = false;
    return;
  }
  out.data = BufferLease::from_receive_buffer(*buffers_, entry.buffer_id, view->payload.data(),
                                              static_cast<uint32_t>(view->payload.size()));
  set_source(out, view->source, view->source_length);
  out.truncated = view->truncated;
  if (out.truncated) ++truncated_;
}

}  // namespace ucp::detail

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
    detail::LoopAccess::receive_buffers(loop_)->recycle(entry.buffer_id);
  }
}

int32_t MultishotRecvMsg::take_error() noexcept { return std::exchange(error_, 0); }

bool MultishotRecvMsg::take(int32_t res, uint32_t completion) {
  if (!(completion & kCompletionBuffer)) return false;
  push({buffer_id_of(completion), static_cast<uint32_t>(res)});
  return true;
}

bool MultishotRecvMsg::start_fallback() noexcept {
  // The same room a loop buffer gives, so that both paths cut a datagram alike.
  const uint32_t room =
      detail::LoopAccess::receive_buffers(loop_)->buffer_size() - kDatagramHeadroom;
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
    push({kPoolEntry, static_cast<uint32_t>(res)});
    ++queued_;
  } else {
    fallback_datagram_.data.reset();
    if (!(res == -ECANCELED && stopped_)) error_ = res;
  }
  return fallback_done();
}

ReceivedDatagram MultishotRecvMsg::pop() noexcept {
  const DatagramEntry entry = front();
  pop_front();
  if (entry.buffer_id == kPoolEntry) {
    ReceivedDatagram out = std::move(fallback_datagram_);
    fallback_datagram_ = ReceivedDatagram{};
    if (out.truncated) ++truncated_;
    return out;
  }
  std::byte* buffer = detail::LoopAccess::receive_buffers(loop_)->buffer(entry.buffer_id);
  ReceivedDatagram out;
  const auto view = parse_datagram(buffer, entry.used, kDatagramNameBytes);
  if (!view) {  // cannot happen with a kernel that keeps its layout; never read past the data
    out.data = BufferLease::from_receive_buffer(loop_, entry.buffer_id, buffer, 0);
    return out;
  }
  out.data = BufferLease::from_receive_buffer(loop_, entry.buffer_id, view->payload.data(),
                                              static_cast<uint32_t>(view->payload.size()));
  if (view->source != nullptr) {
    std::memcpy(&out.source, view->source, view->source_length);
    out.source_length = view->source_length;
  }
  out.truncated = view->truncated;
  if (out.truncated) ++truncated_;
  return out;
}

}  // namespace ucp::detail

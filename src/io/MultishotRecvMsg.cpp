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

int32_t MultishotRecvMsg::take_error() noexcept { return std::exchange(error_, 0); }

bool MultishotRecvMsg::take(int32_t res, uint32_t completion) {
  if (!(completion & kCompletionBuffer)) return false;
  push({buffer_id_of(completion), static_cast<uint32_t>(res)});
  return true;
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
    push({kPoolEntry, static_cast<uint32_t>(res)});
    ++queued_;
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

#include "ucp/net/UdpSocket.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>

#include <netinet/in.h>
#include <sys/socket.h>

#include "ucp/io/Operations.h"

namespace ucp {

namespace {

struct StreamWait {
  io::MultishotRecvMsg& stream;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> caller) noexcept { return stream.wait(caller); }
  void await_resume() const noexcept {}
};

// One round of send_batch(): its sendmsg operations and the coroutine waiting for all of them.
struct SendRound {
  size_t outstanding = 0;
  std::coroutine_handle<> waiter;
};

struct SendSlot : io::Operation {
  msghdr message{};
  iovec vector{};
  SendRound* round = nullptr;
};

std::coroutine_handle<> on_slot_sent(IoContext& context, int32_t res, uint32_t) noexcept {
  auto& slot = static_cast<SendSlot&>(context);
  slot.result = res;
  return --slot.round->outstanding == 0 ? slot.round->waiter : std::coroutine_handle<>();
}

struct RoundDone {
  SendRound& round;
  bool await_ready() const noexcept { return round.outstanding == 0; }
  void await_suspend(std::coroutine_handle<> caller) noexcept { round.waiter = caller; }
  void await_resume() const noexcept {}
};

// SO_RCVBUF, then SO_RCVBUFFORCE (which may pass net.core.rmem_max, given CAP_NET_ADMIN) when
// the first gave less.
void set_receive_buffer(int fd, uint32_t bytes) noexcept {
  const int value = static_cast<int>(std::min<uint32_t>(bytes, INT_MAX / 2));
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &value, sizeof value);
  int got = 0;
  socklen_t length = sizeof got;
  if (::getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &got, &length) == 0 && got / 2 < value) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &value, sizeof value);
  }
}

// A socket closed by its destructor while its receive was still in flight: the stream and
// the fd live on here until the last completion has come back.
Task<> reap(EventLoop& loop, std::unique_ptr<io::MultishotRecvMsg> stream, UniqueFd fd) {
  while (stream->busy()) co_await io::sleep_for(loop, std::chrono::milliseconds(1));
  loop.detach(fd.get());
}

}  // namespace

UdpSocket::UdpSocket(EventLoop& loop, UniqueFd fd, const UdpOptions& options)
    : loop_(loop), fd_(std::move(fd)), max_datagram_bytes_(options.max_datagram_bytes) {}

UdpSocket::~UdpSocket() {
  if (closed_ || !fd_) return;
  if (stream_ && stream_->busy()) {
    stream_->stop();
    loop_.spawn(reap(loop_, std::move(stream_), std::move(fd_)));
    return;
  }
  loop_.detach(fd_.get());
}

Result<std::unique_ptr<UdpSocket>> UdpSocket::bind(EventLoop& loop, const InetAddress& local,
                                                   const UdpOptions& options) {
  return create(loop, local.family(), &local, options);
}

Result<std::unique_ptr<UdpSocket>> UdpSocket::open(EventLoop& loop, int family,
                                                   const UdpOptions& options) {
  return create(loop, family, nullptr, options);
}

Result<std::unique_ptr<UdpSocket>> UdpSocket::create(EventLoop& loop, int family,
                                                     const InetAddress* local,
                                                     const UdpOptions& options) {
  if (options.max_datagram_bytes == 0) return Unexpected{std::errc::invalid_argument};
  UniqueFd fd(::socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP));
  if (!fd) return Unexpected{error_from_errno(errno)};
  const int on = 1;
  if (options.reuse_port && ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) {
    return Unexpected{error_from_errno(errno)};
  }
  if (options.receive_buffer_bytes > 0) set_receive_buffer(fd.get(), options.receive_buffer_bytes);
  if (local != nullptr && ::bind(fd.get(), local->get(), local->length()) != 0) {
    return Unexpected{error_from_errno(errno)};
  }
  std::unique_ptr<UdpSocket> self(new UdpSocket(loop, std::move(fd), options));
  if (auto address = InetAddress::local_of(self->fd_.get())) self->local_ = *address;
  loop.attach(self->fd_.get());
  if (io::MultishotRecvMsg::fits(loop, options.max_datagram_bytes)) {
    self->stream_ = std::make_unique<io::MultishotRecvMsg>(loop, self->fd_.get());
  }
  return self;
}

Result<void> UdpSocket::connect(const InetAddress& peer) noexcept {
  if (::connect(fd_.get(), peer.get(), peer.length()) != 0) {
    return Unexpected{error_from_errno(errno)};
  }
  if (auto address = InetAddress::local_of(fd_.get())) local_ = *address;
  return {};
}

uint32_t UdpSocket::receive_buffer_bytes() const noexcept {
  int bytes = 0;
  socklen_t length = sizeof bytes;
  if (::getsockopt(fd_.get(), SOL_SOCKET, SO_RCVBUF, &bytes, &length) != 0) return 0;
  return static_cast<uint32_t>(bytes / 2);
}

uint64_t UdpSocket::truncated() const noexcept {
  return truncated_ + (stream_ ? stream_->truncated() : 0);
}

Task<Result<size_t>> UdpSocket::receive_batch(std::span<io::ReceivedDatagram> out) {
  if (out.empty()) co_return Unexpected{std::errc::invalid_argument};
  if (closed_) co_return Unexpected{std::errc::operation_canceled};
  if (!stream_) {
    auto n = co_await receive_one(out[0]);
    if (!n) co_return Unexpected{n.error()};
    co_return size_t{1};
  }
  while (!stream_->has_data()) {
    if (const int32_t error = stream_->take_error(); error != 0) {
      co_return Unexpected{error_from_errno(-error)};
    }
    co_await StreamWait{*stream_};
  }
  size_t n = 0;
  while (n < out.size() && stream_->has_data()) out[n++] = stream_->pop();
  co_return n;
}

Task<Result<size_t>> UdpSocket::receive_one(io::ReceivedDatagram& out) {
  out = io::ReceivedDatagram{};
  out.data = io::BufferLease::from_pool(max_datagram_bytes_);
  const auto room = out.data.writable();
  iovec vector{room.data(), room.size()};
  msghdr message{};
  message.msg_name = &out.source;
  message.msg_namelen = sizeof out.source;
  message.msg_iov = &vector;
  message.msg_iovlen = 1;
  io::RecvMsgOp op(loop_, fd_.get(), message);
  pending_receive_ = &op;
  auto n = co_await op;
  pending_receive_ = nullptr;
  if (!n) {
    out.data.reset();
    co_return Unexpected{n.error()};
  }
  out.data.set_size(*n);
  out.source_length = message.msg_namelen;
  out.truncated = (message.msg_flags & MSG_TRUNC) != 0;
  if (out.truncated) ++truncated_;
  co_return *n;
}

Task<Result<ReceivedFrom>> UdpSocket::recv_from(std::span<std::byte> buffer) {
  if (closed_) co_return Unexpected{std::errc::operation_canceled};
  if (!stream_) co_return co_await receive_into(buffer);
  io::ReceivedDatagram datagram;
  auto n = co_await receive_batch(std::span(&datagram, 1));
  if (!n) co_return Unexpected{n.error()};
  ReceivedFrom out;
  out.size = std::min(datagram.data.size(), buffer.size());
  std::memcpy(buffer.data(), datagram.data.bytes().data(), out.size);
  out.from =
      InetAddress(reinterpret_cast<const sockaddr*>(&datagram.source), datagram.source_length);
  out.truncated = datagram.truncated || datagram.data.size() > buffer.size();
  co_return out;
}

// Straight into the caller's buffer: no copy, one recvmsg.
Task<Result<ReceivedFrom>> UdpSocket::receive_into(std::span<std::byte> buffer) {
  sockaddr_storage source{};
  iovec vector{buffer.data(), buffer.size()};
  msghdr message{};
  message.msg_name = &source;
  message.msg_namelen = sizeof source;
  message.msg_iov = &vector;
  message.msg_iovlen = 1;
  io::RecvMsgOp op(loop_, fd_.get(), message);
  pending_receive_ = &op;
  auto n = co_await op;
  pending_receive_ = nullptr;
  if (!n) co_return Unexpected{n.error()};
  ReceivedFrom out;
  out.size = *n;
  out.from = InetAddress(reinterpret_cast<const sockaddr*>(&source), message.msg_namelen);
  out.truncated = (message.msg_flags & MSG_TRUNC) != 0;
  if (out.truncated) ++truncated_;
  co_return out;
}

Task<Result<size_t>> UdpSocket::send_to(std::span<const std::byte> data, const InetAddress& to) {
  iovec vector{const_cast<std::byte*>(data.data()), data.size()};
  msghdr message{};
  message.msg_name = const_cast<sockaddr*>(to.get());
  message.msg_namelen = to.length();
  message.msg_iov = &vector;
  message.msg_iovlen = 1;
  co_return co_await io::sendmsg(loop_, fd_.get(), message);
}

Task<Result<size_t>> UdpSocket::send(std::span<const std::byte> data) {
  iovec vector{const_cast<std::byte*>(data.data()), data.size()};
  msghdr message{};
  message.msg_iov = &vector;
  message.msg_iovlen = 1;
  co_return co_await io::sendmsg(loop_, fd_.get(), message);
}

Task<Result<size_t>> UdpSocket::send_batch(std::span<const OutgoingDatagram> datagrams) {
  std::array<SendSlot, kSendRound> slots;
  size_t sent = 0;
  int32_t first_error = 0;
  for (size_t begin = 0; begin < datagrams.size(); begin += kSendRound) {
    const size_t count = std::min(kSendRound, datagrams.size() - begin);
    SendRound round;
    for (size_t i = 0; i < count; ++i) {
      const OutgoingDatagram& datagram = datagrams[begin + i];
      SendSlot& slot = slots[i];
      slot.code = io::OpCode::kSendMsg;
      slot.fd = fd_.get();
      slot.vector = {const_cast<std::byte*>(datagram.data.data()), datagram.data.size()};
      slot.message = msghdr{};
      slot.message.msg_name = const_cast<sockaddr*>(datagram.to);
      slot.message.msg_namelen = datagram.to_length;
      slot.message.msg_iov = &slot.vector;
      slot.message.msg_iovlen = 1;
      slot.data = &slot.message;
      slot.round = &round;
      slot.on_complete = &on_slot_sent;
      slot.result = 0;
      if (loop_.submit(slot)) ++round.outstanding;  // refused: slot.result says why
    }
    co_await RoundDone{round};
    for (size_t i = 0; i < count; ++i) {
      if (slots[i].result >= 0) {
        ++sent;
      } else {
        ++send_failures_;
        if (first_error == 0) first_error = slots[i].result;
      }
    }
  }
  if (sent == 0 && first_error != 0) co_return Unexpected{error_from_errno(-first_error)};
  co_return sent;
}

Task<> UdpSocket::close() {
  if (closed_ || !fd_) co_return;
  closed_ = true;
  if (pending_receive_ != nullptr) pending_receive_->cancel();
  // The receive's coroutine resumes (operation_canceled) before the fd goes.
  while (pending_receive_ != nullptr) co_await io::sleep_for(loop_, std::chrono::milliseconds(1));
  if (stream_) {
    stream_->stop();
    while (stream_->busy()) co_await io::sleep_for(loop_, std::chrono::milliseconds(1));
  }
  (void)co_await io::close(loop_, fd_.release());
}

}  // namespace ucp

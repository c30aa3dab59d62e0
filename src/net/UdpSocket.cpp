#include "ucp/net/UdpSocket.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include "ucp/io/Operations.h"
#include "ucp/io/detail/LoopAccess.h"
#include "ucp/net/UdpMetrics.h"

namespace ucp {

namespace {

struct StreamWait {
  detail::MultishotRecvMsg& stream;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> caller) noexcept { return stream.wait(caller); }
  void await_resume() const noexcept {}
};

// One round of send_batch(): its sendmsg operations and the coroutine waiting for all of them.
struct SendRound {
  size_t outstanding = 0;
  std::coroutine_handle<> waiter;
};

// The control message of a UDP_SEGMENT (GSO) send: a cmsghdr, then the size of each datagram
// the kernel cuts the payload into (the last may be shorter); CMSG_SPACE(sizeof(uint16_t)).
struct SegmentControl {
  alignas(cmsghdr) std::byte bytes[sizeof(cmsghdr) + 8];

  void set(uint16_t segment_bytes) noexcept {
    cmsghdr header{};
    header.cmsg_len = sizeof(cmsghdr) + sizeof segment_bytes;  // CMSG_LEN
    header.cmsg_level = SOL_UDP;
    header.cmsg_type = UDP_SEGMENT;
    std::memcpy(bytes, &header, sizeof header);
    std::memcpy(bytes + sizeof header, &segment_bytes, sizeof segment_bytes);
  }
};

struct SendSlot : detail::Operation {
  msghdr message{};
  SendRound* round = nullptr;
  uint32_t first = 0;      // its first datagram, as an index into the round
  uint32_t datagrams = 0;  // more than one: a segmented send
  SegmentControl control;
};

std::coroutine_handle<> on_slot_sent(detail::IoContext& context, int32_t res, uint32_t) noexcept {
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

// Datagrams longer than this are never segmented: each segment must fit the path's MTU, and
// 1,452 bytes fits a 1,500-byte one over IPv6 (IPv4 would allow 1,472).
constexpr size_t kMaxSegmentBytes = 1452;
static_assert(UdpSocket::kSendRound <= 64, "UDP_SEGMENT takes at most 64 segments per send");

bool same_destination(const OutgoingDatagram& a, const OutgoingDatagram& b) noexcept {
  if (a.to == nullptr || b.to == nullptr) return a.to == b.to;
  return a.to_length == b.to_length && std::memcmp(a.to, b.to, a.to_length) == 0;
}

// How many datagrams from the first of `next` can go as one segmented send: to one
// destination, each but the last as long as the first, the last no longer (the kernel cuts
// the payload every first-size bytes, so the datagrams arrive exactly as they were).
size_t segment_run(std::span<const OutgoingDatagram> next) noexcept {
  const size_t segment = next[0].data.size();
  if (segment == 0 || segment > kMaxSegmentBytes) return 1;
  size_t n = 1;
  while (n < next.size() && next[n - 1].data.size() == segment && !next[n].data.empty() &&
         next[n].data.size() <= segment && same_destination(next[0], next[n])) {
    ++n;
  }
  return n;
}

// Errors of a segmented send that say the path cannot take one (a route MTU below the segment,
// a device or socket setting without UDP checksum offload, an old kernel), not that the
// datagrams are bad: they go again one by one.
bool segmenting_refused(int32_t result) noexcept {
  return result == -EINVAL || result == -EMSGSIZE || result == -EIO || result == -EOPNOTSUPP ||
         result == -ENOPROTOOPT;
}

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
Task<> reap(EventLoop& loop, std::unique_ptr<detail::MultishotRecvMsg> stream, UniqueFd fd) {
  while (stream->busy()) co_await io::sleep_for(loop, std::chrono::milliseconds(1));
  detail::LoopAccess::detach(loop, fd.get());
}

}  // namespace

UdpSocket::UdpSocket(EventLoop& loop, UniqueFd fd, const UdpOptions& options)
    : loop_(loop),
      fd_(std::move(fd)),
      max_datagram_bytes_(options.max_datagram_bytes),
      metrics_(options.metrics),
      metrics_shard_(metrics_ ? metrics_->shard_of(loop) : 0),
      segment_sends_(options.segment_sends) {}

UdpSocket::~UdpSocket() {
  if (closed_ || !fd_) return;
  if (stream_ && stream_->busy()) {
    stream_->stop();
    loop_.spawn(reap(loop_, std::move(stream_), std::move(fd_)));
    return;
  }
  detail::LoopAccess::detach(loop_, fd_.get());
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
  // Only the groups this socket joins itself (Multicast.cpp): kernels without the IPv6 option
  // (before 4.20) refuse it, and there is nothing better to do.
  const int off = 0;
  if (family == AF_INET6) {
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_MULTICAST_ALL, &off, sizeof off);
  } else {
    ::setsockopt(fd.get(), IPPROTO_IP, IP_MULTICAST_ALL, &off, sizeof off);
  }
  if (local != nullptr && ::bind(fd.get(), local->get(), local->length()) != 0) {
    return Unexpected{error_from_errno(errno)};
  }
  std::unique_ptr<UdpSocket> self(new UdpSocket(loop, std::move(fd), options));
  if (auto address = InetAddress::local_of(self->fd_.get())) self->local_ = *address;
  detail::LoopAccess::attach(loop, self->fd_.get());
  if (detail::MultishotRecvMsg::fits(loop, options.max_datagram_bytes)) {
    self->stream_ = std::make_unique<detail::MultishotRecvMsg>(loop, self->fd_.get());
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

Result<void> UdpSocket::deliver_to(DatagramHandler handler, ReceiveErrorHandler on_error) {
  if (closed_ || !fd_) return Unexpected{std::errc::operation_canceled};
  if (!handler) return Unexpected{std::errc::invalid_argument};
  if (!stream_) return Unexpected{std::errc::operation_not_supported};
  if (stream_->delivering() || stream_->has_waiter() || pending_receive_ != nullptr) {
    return Unexpected{std::errc::device_or_resource_busy};
  }
  if (metrics_ != nullptr) {
    on_error = [metrics = metrics_, shard = metrics_shard_,
                inner = std::move(on_error)](std::error_code error) mutable {
      if (error != std::errc::operation_canceled) metrics->receive_failed(shard);
      if (inner) inner(error);
    };
  }
  if (!stream_->deliver_to(std::move(handler), std::move(on_error))) {
    return Unexpected{error_from_errno(-stream_->take_error())};
  }
  return {};
}

void UdpSocket::count_datagram(UdpMetrics& metrics, size_t shard,
                               const DatagramRef& datagram) noexcept {
  metrics.received(shard, 1, datagram.data.size(), datagram.truncated ? 1 : 0);
}

Task<Result<size_t>> UdpSocket::receive_batch(std::span<ReceivedDatagram> out) {
  if (out.empty()) co_return Unexpected{std::errc::invalid_argument};
  if (closed_) co_return Unexpected{std::errc::operation_canceled};
  if (stream_ && stream_->delivering()) co_return Unexpected{std::errc::device_or_resource_busy};
  if (!stream_) {
    auto n = co_await receive_one(out[0]);
    if (!n) co_return Unexpected{n.error()};
    co_return size_t{1};
  }
  while (!stream_->has_data()) {
    if (const int32_t error = stream_->take_error(); error != 0) {
      if (metrics_) count_receive_error(error_from_errno(-error));
      co_return Unexpected{error_from_errno(-error)};
    }
    co_await StreamWait{*stream_};
  }
  size_t n = 0;
  while (n < out.size() && stream_->has_data()) stream_->pop_into(out[n++]);
  if (metrics_) count_received(out.first(n));
  co_return n;
}

Task<Result<size_t>> UdpSocket::receive_one(ReceivedDatagram& out) {
  out = ReceivedDatagram{};
  out.data = BufferLease::from_pool(max_datagram_bytes_);
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
    if (metrics_) count_receive_error(n.error());
    co_return Unexpected{n.error()};
  }
  out.data.set_size(*n);
  out.source_length = message.msg_namelen;
  out.truncated = (message.msg_flags & MSG_TRUNC) != 0;
  if (out.truncated) ++truncated_;
  if (metrics_) metrics_->received(metrics_shard_, 1, *n, out.truncated ? 1 : 0);
  co_return *n;
}

Task<Result<ReceivedFrom>> UdpSocket::recv_from(std::span<std::byte> buffer) {
  if (closed_) co_return Unexpected{std::errc::operation_canceled};
  if (stream_ && stream_->delivering()) co_return Unexpected{std::errc::device_or_resource_busy};
  if (!stream_) co_return co_await receive_into(buffer);
  ReceivedDatagram datagram;
  auto n = co_await receive_batch(std::span(&datagram, 1));
  if (!n) co_return Unexpected{n.error()};
  ReceivedFrom out;
  out.size = std::min(datagram.data.size(), buffer.size());
  std::memcpy(buffer.data(), datagram.data.bytes().data(), out.size);
  out.from =
      InetAddress(reinterpret_cast<const sockaddr*>(&datagram.source), datagram.source_length);
  out.truncated = datagram.truncated || datagram.data.size() > buffer.size();
  // receive_batch() counted the datagram; what the caller's buffer cut is counted here.
  if (metrics_ && out.truncated && !datagram.truncated) metrics_->received(metrics_shard_, 0, 0, 1);
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
  if (!n) {
    if (metrics_) count_receive_error(n.error());
    co_return Unexpected{n.error()};
  }
  ReceivedFrom out;
  out.size = *n;
  out.from = InetAddress(reinterpret_cast<const sockaddr*>(&source), message.msg_namelen);
  out.truncated = (message.msg_flags & MSG_TRUNC) != 0;
  if (out.truncated) ++truncated_;
  if (metrics_) metrics_->received(metrics_shard_, 1, *n, out.truncated ? 1 : 0);
  co_return out;
}

Task<Result<size_t>> UdpSocket::send_to(std::span<const std::byte> data, const InetAddress& to) {
  iovec vector{const_cast<std::byte*>(data.data()), data.size()};
  msghdr message{};
  message.msg_name = const_cast<sockaddr*>(to.get());
  message.msg_namelen = to.length();
  message.msg_iov = &vector;
  message.msg_iovlen = 1;
  auto sent = co_await io::sendmsg(loop_, fd_.get(), message);
  if (metrics_) count_sent(sent);
  co_return sent;
}

Task<Result<size_t>> UdpSocket::send(std::span<const std::byte> data) {
  iovec vector{const_cast<std::byte*>(data.data()), data.size()};
  msghdr message{};
  message.msg_iov = &vector;
  message.msg_iovlen = 1;
  auto sent = co_await io::sendmsg(loop_, fd_.get(), message);
  if (metrics_) count_sent(sent);
  co_return sent;
}

namespace {

// send_batch()'s slots, constructed as they are used: a batch of a few datagrams (the common
// case of an echo) need not initialise all kSendRound of them.
union SendSlots {
  SendSlots() noexcept {}
  SendSlot at[UdpSocket::kSendRound];
};
static_assert(std::is_trivially_destructible_v<SendSlot>);

// Puts datagrams [index, index + count) of the round in flight as one sendmsg (count > 1: a
// UDP_SEGMENT send of `vectors[index..]`, cut every first.data.size() bytes), in the slot
// constructed at `storage`.
void start_send(EventLoop& loop, int fd, SendSlot* storage, const OutgoingDatagram& first,
                iovec* vectors, uint32_t index, uint32_t count, SendRound& round) noexcept {
  SendSlot& slot = *::new (storage) SendSlot;
  slot.code = detail::OpCode::kSendMsg;
  slot.fd = fd;
  slot.message.msg_name = const_cast<sockaddr*>(first.to);
  slot.message.msg_namelen = first.to_length;
  slot.message.msg_iov = vectors + index;
  slot.message.msg_iovlen = count;
  if (count > 1) {
    slot.control.set(static_cast<uint16_t>(first.data.size()));
    slot.message.msg_control = slot.control.bytes;
    slot.message.msg_controllen = sizeof slot.control.bytes;
  }
  slot.data = &slot.message;
  slot.round = &round;
  slot.first = index;
  slot.datagrams = count;
  slot.on_complete = &on_slot_sent;
  if (detail::LoopAccess::submit(loop, slot)) ++round.outstanding;  // refused: slot.result says why
}

}  // namespace

Task<Result<size_t>> UdpSocket::send_batch(std::span<const OutgoingDatagram> datagrams) {
  SendSlots slots;
  std::array<iovec, kSendRound> vectors;
  std::array<std::pair<uint32_t, uint32_t>, kSendRound> refused;  // (first, count) to resend
  size_t sent = 0;
  int32_t first_error = 0;
  for (size_t begin = 0; begin < datagrams.size(); begin += kSendRound) {
    const auto part = datagrams.subspan(begin, std::min(kSendRound, datagrams.size() - begin));
    for (size_t i = 0; i < part.size(); ++i) {
      vectors[i] = {const_cast<std::byte*>(part[i].data.data()), part[i].data.size()};
    }
    SendRound round;
    size_t used = 0;
    for (size_t i = 0; i < part.size();) {
      const size_t run = segment_sends_ ? segment_run(part.subspan(i)) : 1;
      start_send(loop_, fd_.get(), &slots.at[used++], part[i], vectors.data(),
                 static_cast<uint32_t>(i), static_cast<uint32_t>(run), round);
      i += run;
    }
    // Then again for the datagrams of segmented sends the path refused, one by one.
    while (used > 0) {
      co_await RoundDone{round};
      size_t refusals = 0;
      for (size_t s = 0; s < used; ++s) {
        const SendSlot& slot = slots.at[s];
        if (slot.result >= 0) {
          sent += slot.datagrams;
          if (slot.datagrams > 1) ++segmented_sends_;
          if (metrics_) {
            metrics_->sent(metrics_shard_, slot.datagrams, static_cast<uint64_t>(slot.result));
            if (slot.datagrams > 1) metrics_->segmented(metrics_shard_);
          }
        } else if (slot.datagrams > 1 && segmenting_refused(slot.result)) {
          segment_sends_ = false;
          refused[refusals++] = {slot.first, slot.datagrams};
        } else {
          send_failures_ += slot.datagrams;
          if (metrics_) metrics_->send_failed(metrics_shard_, slot.datagrams);
          if (first_error == 0) first_error = slot.result;
        }
      }
      used = 0;
      for (size_t r = 0; r < refusals; ++r) {
        for (uint32_t i = refused[r].first; i < refused[r].first + refused[r].second; ++i) {
          start_send(loop_, fd_.get(), &slots.at[used++], part[i], vectors.data(), i, 1, round);
        }
      }
    }
  }
  if (sent == 0 && first_error != 0) co_return Unexpected{error_from_errno(-first_error)};
  co_return sent;
}

void UdpSocket::count_received(std::span<const ReceivedDatagram> datagrams) noexcept {
  uint64_t bytes = 0;
  uint64_t cut = 0;
  for (const ReceivedDatagram& datagram : datagrams) {
    bytes += datagram.data.size();
    cut += datagram.truncated ? 1 : 0;
  }
  metrics_->received(metrics_shard_, datagrams.size(), bytes, cut);
}

void UdpSocket::count_receive_error(std::error_code error) noexcept {
  if (error != std::errc::operation_canceled) metrics_->receive_failed(metrics_shard_);
}

void UdpSocket::count_sent(const Result<size_t>& sent) noexcept {
  if (sent) {
    metrics_->sent(metrics_shard_, 1, *sent);
  } else {
    metrics_->send_failed(metrics_shard_, 1);
  }
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

#pragma once
// UdpSocket: a UDP socket on an EventLoop, with coroutine sends and receives, one datagram at a
// time or in batches.
//
//   auto socket = ucp::UdpSocket::bind(loop, *ucp::InetAddress::parse("0.0.0.0", 5353));
//   std::array<ucp::ReceivedDatagram, 64> batch;
//   std::array<ucp::OutgoingDatagram, 64> replies;
//   for (;;) {                                           // an echo
//     auto n = co_await socket->receive_batch(batch); // >= 1 datagram, payloads lent
//     if (!n) break;
//     for (size_t i = 0; i < *n; ++i) replies[i] = {batch[i].data.bytes(), batch[i].source};
//     co_await socket->send_batch(std::span(replies).first(*n));  // one submission
//   }
//
// Receiving: where the loop has receive buffers that hold the largest datagram this socket
// accepts (UdpOptions::max_datagram_bytes plus 48 bytes in front of each payload), one
// long-lived multishot receive fills them, a datagram per buffer, and receive_batch() hands out
// as many as have arrived without copying (io_uring: multishot recvmsg; epoll: recvmmsg). Else
// each receive is one recvmsg into a pool block (receive_batch) or the caller's buffer
// (recv_from). multishot() says which. A datagram longer than the room is cut and flagged
// `truncated` (MSG_TRUNC), never mistaken for a whole one.
//
// The cheapest receive is no receive call at all: on_datagram(handler) hands each datagram to
// `handler` from its completion, in the loop's completion pass (no batch, no coroutine resumed,
// no lease; its buffer goes back to the loop as soon as the handler returns):
//
//   socket->on_datagram([&book](const ucp::DatagramRef& d) { book.apply(d.data); });
//
// The handler runs on the loop's thread, must not block or throw, and may close or destroy the
// socket (what is still in flight is then dropped unseen). It takes the socket's receives over
// for good: receive_batch() and recv_from() are refused from then on. It needs the multishot
// receive (multishot(): loop buffers that hold max_datagram_bytes + 48); errors go to the error
// handler, and the receive goes on after them.
//
// Sending: send_batch() puts every datagram in flight at once (io_uring: one sendmsg SQE each,
// one submission; epoll: one sendmmsg); send_to() sends one. Neither raises SIGPIPE. Datagrams
// to one destination of one size, back to back in a batch (an echo answering a client's burst),
// share one sendmsg as a UDP_SEGMENT (GSO) send (UdpOptions::segment_sends).
//
// Multicast (ucp/net/Multicast.h): join() and leave() a group, any-source or source-specific,
// on an interface; its datagrams then arrive like any others (through the multishot receive
// where there is one). A socket hears only the groups it joined itself: Linux would otherwise
// hand a socket bound to the wildcard address the groups every other socket on the host joined
// on its port (IP_MULTICAST_ALL, turned off here). Sending to a group: set_multicast_interface,
// set_multicast_loopback (local receivers hear what this socket sends; on by default),
// set_multicast_hops (TTL, 1 by default: the local network only).
//
// Errors are values. An unconnected socket hears nothing of ICMP errors; a connected one
// reports e.g. connection_refused once, on a receive, and goes on receiving after it.
//
// Metrics (ucp/net/UdpMetrics.h): UdpOptions::metrics counts datagrams, bytes, truncations and
// errors each way into ucp_udp_* families for a Prometheus scrape.
//
// Overload: datagrams the socket buffer (UdpOptions::receive_buffer_bytes, SO_RCVBUF) cannot
// hold are dropped by the kernel, as UDP does; nothing in UCP grows without bound.
//
// Owner: whoever holds the unique_ptr. close() stops the receive, waits for what is in flight
// and closes the fd through the loop; a socket destroyed open leaves that to a coroutine on its
// loop. Thread contract: the loop's thread only. Leases from receive_batch() must be dropped
// before the loop ends.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include "ucp/base/Result.h"
#include "ucp/base/UniqueFd.h"
#include "ucp/base/UniqueFunction.h"
#include "ucp/coro/Task.h"
#include "ucp/io/Datagram.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/MultishotRecvMsg.h"
#include "ucp/io/detail/Operation.h"
#include "ucp/net/InetAddress.h"
#include "ucp/net/Multicast.h"

namespace ucp {

namespace io {
class RecvMsgOp;
}
class UdpMetrics;

struct UdpOptions {
  /// SO_RCVBUF in bytes (0: the kernel's default). The kernel caps it at net.core.rmem_max
  /// unless the process may use SO_RCVBUFFORCE; receive_buffer_bytes() says what it got.
  uint32_t receive_buffer_bytes = 0;
  /// SO_REUSEPORT: several sockets (one per loop) on one port; the kernel spreads the senders.
  bool reuse_port = false;
  /// The largest datagram received whole (65,527 over IPv6, 65,507 over IPv4).
  uint32_t max_datagram_bytes = kMaxUdpPayload;
  /// send_batch() sends a run of datagrams to one destination, each as long as the first (the
  /// last may be shorter, none over 1,452 bytes), as one UDP_SEGMENT (GSO) send: one trip
  /// through the kernel's UDP/IP output path for the run, the same datagrams on the wire. A
  /// path that refuses it turns it off for the socket (the datagrams go again one by one).
  bool segment_sends = true;
  /// Where the socket counts its traffic (ucp/net/UdpMetrics.h); null: nowhere, at the cost of
  /// one branch per receive or send. It must outlive the socket.
  UdpMetrics* metrics = nullptr;
};

/// One datagram for send_batch(): its bytes, and where to (null: the connected peer).
struct OutgoingDatagram {
  std::span<const std::byte> data;
  const sockaddr* to = nullptr;
  socklen_t to_length = 0;

  OutgoingDatagram() noexcept = default;
  OutgoingDatagram(std::span<const std::byte> bytes) noexcept : data(bytes) {}
  OutgoingDatagram(std::span<const std::byte> bytes, const InetAddress& address) noexcept
      : data(bytes), to(address.get()), to_length(address.length()) {}
  OutgoingDatagram(std::span<const std::byte> bytes, const sockaddr_storage& address,
                   socklen_t length) noexcept
      : data(bytes), to(reinterpret_cast<const sockaddr*>(&address)), to_length(length) {}
};

/// What recv_from() received into the caller's buffer.
struct ReceivedFrom {
  size_t size = 0;  // bytes in the buffer
  InetAddress from;
  bool truncated = false;  // the datagram was longer than the buffer: its end was lost
};

class UdpSocket {
 public:
  /// Datagrams put in flight together by send_batch() (a longer span goes in rounds).
  static constexpr size_t kSendRound = 32;

  /// A socket bound to `local` (port 0: any free port; local_address() names it).
  static Result<std::unique_ptr<UdpSocket>> bind(EventLoop& loop, const InetAddress& local,
                                                 const UdpOptions& options = {});
  /// An unbound socket of `family` (AF_INET, AF_INET6): the first send binds a free port.
  static Result<std::unique_ptr<UdpSocket>> open(EventLoop& loop, int family,
                                                 const UdpOptions& options = {});

  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;
  ~UdpSocket();

  /// connect(2): the default destination of send() and send_batch() without an address; only
  /// datagrams from `peer` are received from then on.
  Result<void> connect(const InetAddress& peer) noexcept;

  /// Joins `group` (its family must be this socket's): datagrams sent to it on this socket's
  /// port arrive here once the socket is bound to the wildcard address or to the group. Joining
  /// a group twice is EADDRINUSE; an interface that does not exist ENODEV or EADDRNOTAVAIL.
  Result<void> join(const MulticastGroup& group);
  /// Leaves a group joined with the same membership (group, source, interface).
  Result<void> leave(const MulticastGroup& group);
  /// The interface datagrams to a group leave by (see Multicast.h); empty: the kernel's choice.
  Result<void> set_multicast_interface(std::string_view interface);
  /// Whether receivers on this host hear the datagrams this socket sends to a group.
  Result<void> set_multicast_loopback(bool on);
  /// The TTL (IPv4) or hop limit (IPv6) of datagrams to a group, 0..255.
  Result<void> set_multicast_hops(int hops);

  using DatagramHandler = UniqueFunction<void(const DatagramRef&)>;
  using ReceiveErrorHandler = UniqueFunction<void(std::error_code)>;

  /// From now on hands every datagram to `handler` as it arrives (see the file comment);
  /// datagrams already received go to it first, before this returns. `on_error` hears each
  /// receive error (a connected socket's connection_refused); the receive goes on after it.
  /// Errors: operation_not_supported without the multishot receive; device_or_resource_busy
  /// while a receive waits or a handler is set already; operation_canceled once closed.
  template <class F>
    requires std::is_invocable_v<F&, const DatagramRef&>
  Result<void> on_datagram(F handler, ReceiveErrorHandler on_error = {}) {
    if (metrics_ == nullptr) return deliver_to(std::move(handler), std::move(on_error));
    // Counted here, inside the one handler the stream calls: no second indirect call.
    return deliver_to(
        [metrics = metrics_, shard = metrics_shard_,
         inner = std::move(handler)](const DatagramRef& datagram) mutable {
          count_datagram(*metrics, shard, datagram);
          inner(datagram);
        },
        std::move(on_error));
  }

  /// Waits for one datagram and copies it into `buffer`.
  Task<Result<ReceivedFrom>> recv_from(std::span<std::byte> buffer);
  /// Waits for at least one datagram, then fills `out` with as many as have arrived (lent:
  /// each lease holds a loop buffer or a pool block until dropped). The value is how many.
  Task<Result<size_t>> receive_batch(std::span<ReceivedDatagram> out);

  Task<Result<size_t>> send_to(std::span<const std::byte> data, const InetAddress& to);
  /// To the connected peer.
  Task<Result<size_t>> send(std::span<const std::byte> data);
  /// Sends every datagram, kSendRound at a time in one submission each. The value is how many
  /// the kernel took; one it refused is lost, as on the network, and counted in
  /// send_failures(). The first error when it took none.
  Task<Result<size_t>> send_batch(std::span<const OutgoingDatagram> datagrams);

  /// Stops receiving (a receive waiting resumes with operation_canceled), waits for what is in
  /// flight, closes the fd through the loop.
  Task<> close();

  const InetAddress& local_address() const noexcept { return local_; }
  /// The receive buffer the kernel gave (SO_RCVBUF as read back, halved: the kernel doubles
  /// what it is asked for to cover its bookkeeping).
  uint32_t receive_buffer_bytes() const noexcept;
  /// Receives come from the loop's receive buffers (see the file comment).
  bool multishot() const noexcept { return stream_ != nullptr; }
  uint64_t truncated() const noexcept;
  /// Times the loop's receive buffers ran out under this socket (it then received one datagram
  /// into a pool block and went on); 0 without loop buffers.
  uint64_t loop_buffers_ran_out() const noexcept { return stream_ ? stream_->dry_runs() : 0; }
  uint64_t send_failures() const noexcept { return send_failures_; }
  /// Sends send_batch() made as one UDP_SEGMENT send of several datagrams (see UdpOptions).
  uint64_t segmented_sends() const noexcept { return segmented_sends_; }
  /// Whether send_batch() still segments (UdpOptions::segment_sends, until a path refused).
  bool segmenting() const noexcept { return segment_sends_; }
  int fd() const noexcept { return fd_.get(); }
  EventLoop& loop() const noexcept { return loop_; }

 private:
  UdpSocket(EventLoop& loop, UniqueFd fd, const UdpOptions& options);
  static Result<std::unique_ptr<UdpSocket>> create(EventLoop& loop, int family,
                                                   const InetAddress* local,
                                                   const UdpOptions& options);
  Result<void> deliver_to(DatagramHandler handler, ReceiveErrorHandler on_error);
  static void count_datagram(UdpMetrics& metrics, size_t shard, const DatagramRef& d) noexcept;
  Task<Result<size_t>> receive_one(ReceivedDatagram& out);
  Task<Result<ReceivedFrom>> receive_into(std::span<std::byte> buffer);
  // Counting into metrics_ (only when it is set).
  void count_received(std::span<const ReceivedDatagram> datagrams) noexcept;
  void count_receive_error(std::error_code error) noexcept;
  void count_sent(const Result<size_t>& sent) noexcept;

  EventLoop& loop_;
  UniqueFd fd_;
  InetAddress local_;
  uint32_t max_datagram_bytes_;
  std::unique_ptr<detail::MultishotRecvMsg> stream_;
  io::RecvMsgOp* pending_receive_ = nullptr;  // a single recvmsg in flight (no stream)
  uint64_t truncated_ = 0;                    // single-recvmsg path
  uint64_t send_failures_ = 0;
  uint64_t segmented_sends_ = 0;
  UdpMetrics* metrics_;
  size_t metrics_shard_ = 0;  // the loop's shard of *metrics_
  bool segment_sends_;
  bool closed_ = false;
};

}  // namespace ucp

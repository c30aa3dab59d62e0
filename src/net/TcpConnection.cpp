#include "ucp/net/TcpConnection.h"

#include <cassert>

#include <sys/socket.h>

#include "ucp/io/Operations.h"
#include "ucp/io/detail/LoopAccess.h"

#include "TlsConnection.h"

namespace ucp {

TcpConnection::TcpConnection(EventLoop& loop, UniqueFd fd, InetAddress peer,
                             uint32_t read_timeout_ms, OutputLimits output_limits) noexcept
    : StreamReader(loop, fd.get(), read_timeout_ms,
                   hook<&TcpConnection::on_side_idle, detail::StreamReader>),
      StreamWriter(loop, fd.get(), output_limits, hook<&TcpConnection::on_output_event>),
      fd_(std::move(fd)),
      peer_(peer) {
  detail::LoopAccess::attach(loop, fd_.get());
}

TcpConnection::~TcpConnection() {
  // Freeing a connection with an operation in flight would let the kernel write into freed
  // memory: close() must have run (or nothing was ever started).
  assert(idle());
  writer().abandon();
  if (fd_) detail::LoopAccess::detach(loop(), fd_.get());
}

const tls::TlsSession* TcpConnection::tls() const noexcept {
  if (!reader().encrypted()) return nullptr;
  return &static_cast<const detail::TlsConnection*>(this)->session();
}

void TcpConnection::on_side_idle() noexcept {
  if (drain_waiter_ && idle()) loop().schedule(std::exchange(drain_waiter_, {}));
}

void TcpConnection::on_output_event(detail::StreamWriter::Event event) noexcept {
  if (event == detail::StreamWriter::Event::kIdle) {
    on_side_idle();
    return;
  }
  // The output timed out: a peer that stops taking its output is gone for us; its reads end too.
  reader().stop(std::errc::timed_out);
}

Task<> TcpConnection::close() {
  if (state_ != State::kOpen) co_return;
  state_ = State::kClosing;
  reader().stop();
  // Queued output first (a handler may write() and return at once), as long as the peer
  // keeps taking it; writers still suspended get their bytes sent too.
  co_await writer().close_and_flush();
  if (!idle()) {
    // Shut the socket down, cancel everything on the fd, and wait for every completion
    // before the fd number is freed.
    ::shutdown(fd_.get(), SHUT_RDWR);
    (void)co_await io::cancel_fd(loop(), fd_.get());
    co_await DrainAwaiter{*this};
  }
  writer().abandon();  // nothing in flight now: writers get their memory back
  (void)co_await io::close(loop(), fd_.release());
  state_ = State::kClosed;
}

}  // namespace ucp

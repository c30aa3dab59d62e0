#include "ucp/net/TcpConnection.h"

#include <cassert>

#include <sys/socket.h>

#include "ucp/io/Operations.h"
#include "ucp/io/detail/LoopAccess.h"

#include "TlsConnection.h"

namespace ucp {

TcpConnection::TcpConnection(EventLoop& loop, UniqueFd fd, InetAddress peer,
                             uint32_t read_timeout_ms, OutputLimits output_limits) noexcept
    : fd_(std::move(fd)),
      peer_(peer),
      reader_(loop, fd_.get(), read_timeout_ms, this, &on_side_idle),
      writer_(loop, fd_.get(), output_limits, this, &on_output_event) {
  detail::LoopAccess::attach(loop, fd_.get());
}

TcpConnection::~TcpConnection() {
  // Freeing a connection with an operation in flight would let the kernel write into freed
  // memory: close() must have run (or nothing was ever started).
  assert(idle());
  writer_.abandon();
  if (fd_) detail::LoopAccess::detach(loop(), fd_.get());
}

const tls::TlsSession* TcpConnection::tls() const noexcept {
  if (!reader_.encrypted()) return nullptr;
  return &static_cast<const detail::TlsConnection*>(this)->session();
}

void TcpConnection::on_side_idle(void* self) noexcept {
  auto& c = *static_cast<TcpConnection*>(self);
  if (c.drain_waiter_ && c.idle()) c.loop().schedule(std::exchange(c.drain_waiter_, {}));
}

void TcpConnection::on_output_event(void* self, detail::StreamWriter::Event event) noexcept {
  if (event == detail::StreamWriter::Event::kIdle) {
    on_side_idle(self);
    return;
  }
  // The output timed out: a peer that stops taking its output is gone for us; its reads end too.
  static_cast<TcpConnection*>(self)->reader_.stop(std::errc::timed_out);
}

Task<> TcpConnection::close() {
  if (state_ != State::kOpen) co_return;
  state_ = State::kClosing;
  reader_.stop();
  // Queued output first (a handler may write() and return at once), as long as the peer
  // keeps taking it; writers still suspended get their bytes sent too.
  co_await writer_.close_and_flush();
  if (!idle()) {
    // Shut the socket down, cancel everything on the fd, and wait for every completion
    // before the fd number is freed.
    ::shutdown(fd_.get(), SHUT_RDWR);
    (void)co_await io::cancel_fd(loop(), fd_.get());
    co_await DrainAwaiter{*this};
  }
  writer_.abandon();  // nothing in flight now: writers get their memory back
  (void)co_await io::close(loop(), fd_.release());
  state_ = State::kClosed;
}

}  // namespace ucp

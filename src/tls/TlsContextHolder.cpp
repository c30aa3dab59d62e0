#include "ucp/tls/TlsContextHolder.h"

#include <utility>

#include "ucp/tls/TicketKeyRing.h"

namespace ucp::tls {

Result<void, Error> TlsContextHolder::load(TlsOptions options) {
  std::lock_guard reloading(reload_mutex_);
  if (options.session_tickets && !options.ticket_keys) {
    options.ticket_keys = TicketKeyRing::create(options.ticket_key_rotation_s);
    if (!options.ticket_keys) return Unexpected{Error("TLS: cannot make session ticket keys")};
  }
  auto context = TlsContext::server(options);
  if (!context) return Unexpected{context.error()};
  {
    std::lock_guard lock(mutex_);
    options_ = std::move(options);
    current_ = std::move(*context);
  }
  generation_.fetch_add(1, std::memory_order_acq_rel);
  return {};
}

Result<void, Error> TlsContextHolder::reload() {
  // Files are read and parsed outside mutex_: current() never waits for a reload.
  std::lock_guard reloading(reload_mutex_);
  TlsOptions options;
  {
    std::lock_guard lock(mutex_);
    if (!current_) return Unexpected{Error("TLS: reload before the first load")};
    options = options_;
  }
  auto context = TlsContext::server(options);
  if (!context) return Unexpected{context.error()};
  {
    std::lock_guard lock(mutex_);
    current_ = std::move(*context);  // the old one lives on in its sessions
  }
  generation_.fetch_add(1, std::memory_order_acq_rel);
  return {};
}

Result<void, Error> TlsContextHolder::reload(TlsOptions options) {
  std::lock_guard reloading(reload_mutex_);
  {
    std::lock_guard lock(mutex_);
    if (!current_) return Unexpected{Error("TLS: reload before the first load")};
    if (options.session_tickets && !options.ticket_keys) options.ticket_keys = options_.ticket_keys;
  }
  if (options.session_tickets && !options.ticket_keys) {  // tickets were off until now
    options.ticket_keys = TicketKeyRing::create(options.ticket_key_rotation_s);
    if (!options.ticket_keys) return Unexpected{Error("TLS: cannot make session ticket keys")};
  }
  auto context = TlsContext::server(options);
  if (!context) return Unexpected{context.error()};
  {
    std::lock_guard lock(mutex_);
    options_ = std::move(options);
    current_ = std::move(*context);
  }
  generation_.fetch_add(1, std::memory_order_acq_rel);
  return {};
}

std::shared_ptr<const TlsContext> TlsContextHolder::current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

}  // namespace ucp::tls

#pragma once
// TlsContextHolder: the server context in use, replaceable while the server runs (SIGHUP
// reloads the certificate, key and client CA files).
//
//   TlsContextHolder holder;
//   if (auto loaded = holder.load(options); !loaded) { ... exit 2 ... }
//   // per new connection, on a worker:
//   auto session = TlsSession::accept(*holder.current());
//   // on SIGHUP, from any thread:
//   if (auto reloaded = holder.reload(); !reloaded) LOG_ERROR("{}", reloaded.error().message);
//
// reload() builds a new context from the same options (reading the files again); only when
// that succeeds does it replace the current one, so a bad new file keeps the old context and
// returns the error. New sessions get the new context; sessions made from the old one go on
// with it (each session holds a reference), and it is freed with the last of them. The ticket
// keys carry over: tickets issued before the reload still resume.
//
// Thread contract: every method may be called from any thread. current() takes a mutex and
// copies a shared_ptr; a worker that wants neither per connection keeps its own copy and
// refreshes it when generation() has changed (one atomic load).

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "ucp/base/Result.h"
#include "ucp/tls/TlsContext.h"
#include "ucp/tls/TlsOptions.h"

namespace ucp::tls {

class TlsContextHolder {
 public:
  TlsContextHolder() = default;
  TlsContextHolder(const TlsContextHolder&) = delete;
  TlsContextHolder& operator=(const TlsContextHolder&) = delete;

  /// Builds the first context (also makes the ticket key ring when tickets are on and the
  /// options bring none, so that reloads keep it).
  Result<void, Error> load(TlsOptions options);
  /// Builds a context from the options again and makes it current; on failure the current
  /// one stays and the error says why.
  Result<void, Error> reload();
  /// The same with new options (other file names, say), keeping the ticket keys: tickets
  /// issued before still resume.
  Result<void, Error> reload(TlsOptions options);
  /// The current context; null before load() succeeded.
  std::shared_ptr<const TlsContext> current() const;
  /// Incremented by every successful load() and reload().
  uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }

 private:
  std::mutex reload_mutex_;   // one load or reload at a time
  mutable std::mutex mutex_;  // options_ and current_
  TlsOptions options_;
  std::shared_ptr<const TlsContext> current_;
  std::atomic<uint64_t> generation_{0};
};

}  // namespace ucp::tls

#pragma once
// Resolver: host names to addresses without blocking a loop. getaddrinfo(3) runs on a small
// pool of resolver threads (as Asio's resolver does); the answer comes back to the awaiting
// coroutine's own loop through EventLoop::post.
//
//   auto addresses = co_await ucp::Resolver::shared().resolve(loop, "example.com", 443);
//   if (!addresses) ...       // e.g. addresses.error() == ucp::ResolveErrc::kHostNotFound
//   for (const ucp::InetAddress& a : *addresses) ...   // in getaddrinfo's order
//
// Why threads and not glibc's getaddrinfo_a(3): its only loop-friendly notification,
// SIGEV_THREAD, starts a thread per answer. A "localhost" lookup cost the process about 20 µs of
// CPU through a pool thread against about 43 µs through getaddrinfo_a (bin/resolver_micro;
// docs/client.md).
//
// Bounded: the pool starts threads as lookups wait, up to `threads`, and at most
// `queue_capacity` lookups wait for one; past that resolve() fails at once with
// resource_unavailable_try_again. A lookup cannot be interrupted (getaddrinfo has no cancel):
// cancelling the awaiter (it is a cancellable awaiter: with_timeout, with_stop) resumes the
// coroutine at once with operation_canceled, and the thread drops the answer when it comes. The
// lookup's state is shared by the thread and the loop and freed by whichever lets go last, so a
// cancelled awaiter, or one destroyed with its stopped loop, leaves nothing the thread could
// write into or post to.
//
// Thread contract: resolve() and its awaiter on the awaiting coroutine's loop thread; one
// Resolver serves every loop. It must outlive the lookups it runs; shared() lives until exit,
// and its destructor waits for lookups in progress (a name server that does not answer can
// hold the exit up for its timeout).

#include <condition_variable>
#include <coroutine>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

#include <netdb.h>
#include <sys/socket.h>

#include "ucp/base/Result.h"
#include "ucp/io/EventLoop.h"
#include "ucp/net/InetAddress.h"

namespace ucp {

/// getaddrinfo's EAI_* failures as error codes of resolve_category(); message() is
/// gai_strerror's. (EAI_SYSTEM is reported as the errno it stands for, in system_category.)
enum class ResolveErrc : int {
  kHostNotFound = EAI_NONAME,  // no such name (NXDOMAIN, not in /etc/hosts)
  kNoAddress = EAI_NODATA,     // the name exists but has no address of the family asked for
  kTryAgain = EAI_AGAIN,       // temporary: the name server did not answer in time
  kFailed = EAI_FAIL,          // permanent name server failure
  kFamily = EAI_FAMILY,        // the address family is not supported
  kOutOfMemory = EAI_MEMORY,
};

const std::error_category& resolve_category() noexcept;
inline std::error_code make_error_code(ResolveErrc e) noexcept {
  return {static_cast<int>(e), resolve_category()};
}
/// The error_code for getaddrinfo's return value `status` (non-zero); `saved_errno` is errno
/// right after the call, used for EAI_SYSTEM.
std::error_code resolve_error(int status, int saved_errno) noexcept;

struct ResolverOptions {
  uint32_t threads = 2;           // at most this many lookups run at once
  uint32_t queue_capacity = 256;  // lookups waiting for a thread; beyond: refused
  /// The lookup itself (tests replace it); empty = getaddrinfo(3). Runs on a resolver thread;
  /// returns 0 or an EAI_* code (EAI_SYSTEM with errno set).
  std::function<int(const std::string& host, uint16_t port, int family,
                    std::vector<InetAddress>& out)>
      lookup;
};

class Resolver {
 public:
  using Addresses = std::vector<InetAddress>;
  struct Lookup;

  explicit Resolver(ResolverOptions options = {});
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;
  /// Stops the threads after their current lookup; lookups still queued end operation_canceled.
  ~Resolver();

  /// The process-wide resolver (2 threads, started on first use), which TcpClient uses.
  static Resolver& shared();

  /// One lookup: every TCP address of `host` (family AF_UNSPEC, AF_INET or AF_INET6) with
  /// `port` filled in. Cancellable (loop(), cancel()).
  class [[nodiscard]] ResolveAwaiter {
   public:
    ResolveAwaiter(Resolver& resolver, EventLoop& loop, std::string host, uint16_t port,
                   int family) noexcept;
    ResolveAwaiter(const ResolveAwaiter&) = delete;
    ResolveAwaiter& operator=(const ResolveAwaiter&) = delete;
    ~ResolveAwaiter();

    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> caller);
    Result<Addresses> await_resume();
    void cancel() noexcept;
    EventLoop& loop() const noexcept { return loop_; }

   private:
    friend class Resolver;
    enum class State : uint8_t { kIdle, kWaiting, kAnswered, kCancelled };
    void let_go() noexcept;

    Resolver& resolver_;
    EventLoop& loop_;
    std::string host_;
    uint16_t port_;
    int family_;
    Lookup* lookup_ = nullptr;  // shared with the resolver thread; one reference is ours
    std::coroutine_handle<> caller_;
    std::error_code refused_;  // resolve() failed before any thread saw it
    State state_ = State::kIdle;
  };

  ResolveAwaiter resolve(EventLoop& loop, std::string host, uint16_t port,
                         int family = AF_UNSPEC) noexcept {
    return {*this, loop, std::move(host), port, family};
  }

  /// Lookups waiting for a thread (any thread; for tests and metrics).
  size_t queued() const;
  /// Threads started so far.
  size_t threads_started() const;

 private:
  bool enqueue(Lookup* lookup);
  void work();
  static void deliver(Lookup* lookup) noexcept;
  static void release(Lookup* lookup) noexcept;
  static void hand_back(Lookup* lookup) noexcept;

  ResolverOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Lookup*> queue_;
  std::vector<std::thread> threads_;
  size_t idle_threads_ = 0;
  bool stopping_ = false;
};

}  // namespace ucp

template <>
struct std::is_error_code_enum<ucp::ResolveErrc> : std::true_type {};

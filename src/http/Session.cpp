// Session: what a connection holds while it handles requests, taken from and given back to a
// per-thread cache of idle sessions.

#include <vector>

#include "ServerCore.h"

namespace ucp::http::detail {
namespace {

/// Sessions of connections gone idle, for the next connection of this thread that has a
/// request. Bounded in count, and a session holding large buffers is not kept.
class SessionCache {
 public:
  static constexpr size_t kKeep = 64;
  static constexpr size_t kMaxHeldBytes = 16 * 1024;

  ~SessionCache() {
    for (Session* session : free_) PoolDeleter{}(session);
  }
  Session* take(const ParserLimits& limits) {
    while (!free_.empty()) {
      Session* session = free_.back();
      free_.pop_back();
      if (session->parser.limits() == limits) return session;
      PoolDeleter{}(session);  // another server's: built for other limits
    }
    return make_pooled<Session>(limits).release();
  }
  void give(Session* session) noexcept {
    if (free_.size() < kKeep && session->parser.reusable() &&
        session->parser.held_bytes() <= kMaxHeldBytes) {
      session->parser.rewind();
      session->response.reset();
      session->out.clear();
      free_.push_back(session);  // capacity reserved up front: cannot throw
      return;
    }
    PoolDeleter{}(session);
  }
  SessionCache() { free_.reserve(kKeep); }

 private:
  std::vector<Session*> free_;
};

SessionCache& session_cache() {
  thread_local SessionCache cache;
  return cache;
}

}  // namespace

Session* Session::acquire(const ParserLimits& limits) { return session_cache().take(limits); }

void Session::release(Session* session) noexcept { session_cache().give(session); }

}  // namespace ucp::http::detail

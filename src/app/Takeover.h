#pragma once
// Takeover: a new server process takes the listening sockets over from the running one, so
// that a restart (a new binary, a new config) refuses no connection: the listening sockets
// never close, and connections waiting in their accept queue are accepted by whichever
// process accepts next. As HAProxy's `-x` and Envoy's hot restart do it, over a unix socket:
//
//   old (TakeoverListener, on its main loop)      new (TakeoverClient, before it serves)
//   waits on server.takeover_socket               connect(PATH)
//                                          <----  "UCP-TAKEOVER 1 <pid> <program>"
//   peer's uid must be ours (or root)
//   "SOCKETS <pid> <n>" + n fds (SCM_RIGHTS) ---->  starts its server on them
//                                          <----  "READY"
//   stops listening on PATH (unlinks it)
//   "DRAINING"                             ---->  listens on its own server.takeover_socket
//   stops accepting, drains, exits 0              serves
//
// SOCK_SEQPACKET: each message arrives whole with its fds; more than kFdsPerMessage fds go in
// further "MORE <n>" messages. If the new process fails before READY (its config, its rings),
// it closes the connection and the old one goes on serving as if nothing had happened.
//
// Private to src/app: Application drives both sides.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "ucp/base/Result.h"
#include "ucp/base/UniqueFd.h"
#include "ucp/base/UniqueFunction.h"
#include "ucp/coro/Task.h"
#include "ucp/io/EventLoop.h"

namespace ucp::app {

/// The new process's side. Blocking calls with a timeout each: it runs before the server.
class TakeoverClient {
 public:
  /// How long each step may wait for the running server.
  static constexpr int kStepTimeoutMs = 10000;

  /// Connects to the running server at `path` and receives its listening sockets.
  static Result<TakeoverClient, Error> connect(const std::string& path, std::string_view program);

  /// The sockets received (marked close-on-exec); the caller takes them.
  std::vector<UniqueFd>& sockets() noexcept { return sockets_; }
  pid_t old_pid() const noexcept { return old_pid_; }
  const std::string& path() const noexcept { return path_; }

  /// Tells the old server that this one serves now; returns once it has stopped listening on
  /// the takeover socket (and so stops accepting and drains). Closes the connection.
  Result<void, Error> confirm();

 private:
  TakeoverClient() = default;
  std::string path_;
  UniqueFd connection_;
  pid_t old_pid_ = 0;
  std::vector<UniqueFd> sockets_;
};

/// The running server's side: a unix socket at server.takeover_socket, served on the main
/// loop. Main loop thread only (after listen()).
class TakeoverListener {
 public:
  /// What a successor takes, and what to do once it serves.
  struct Handover {
    UniqueFunction<std::vector<int>()> sockets;  // empty: refuse ("cannot hand over")
    UniqueFunction<std::string()> refusal;       // non-empty: refuse with this reason
    UniqueFunction<void(pid_t successor)> handed_over;
  };

  /// Listens at `path` ("@NAME": the abstract namespace). A file left by a server that is
  /// gone is replaced; a live server there is an error.
  static Result<std::unique_ptr<TakeoverListener>, Error> listen(EventLoop& loop,
                                                                 const std::string& path);
  ~TakeoverListener();

  /// Serves successors one at a time until one takes over or the loop stops.
  Task<> serve(Handover handover);
  /// Stops listening and removes the path (idempotent).
  void close() noexcept;

 private:
  TakeoverListener(EventLoop& loop, std::string path, UniqueFd fd);
  Task<bool> hand_over(UniqueFd connection, Handover& handover);

  EventLoop& loop_;
  std::string path_;
  UniqueFd fd_;
};

}  // namespace ucp::app

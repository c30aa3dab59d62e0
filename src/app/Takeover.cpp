#include "Takeover.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <span>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ucp/io/Operations.h"
#include "ucp/io/detail/LoopAccess.h"
#include "ucp/log/Logger.h"

namespace ucp::app {
namespace {

constexpr std::string_view kHello = "UCP-TAKEOVER 1";
// SCM_MAX_FD is 253 in Linux; a server with more listening sockets (per-worker acceptors on
// many cores) sends them in several messages.
constexpr size_t kFdsPerMessage = 250;
constexpr size_t kMaxMessage = 512;
constexpr uint32_t kHelloTimeoutMs = 5000;

std::string errno_text(int error) {
  return std::error_code(error, std::system_category()).message();
}

// sockaddr_un for a path, or for the abstract name after a leading '@'.
socklen_t make_address(const std::string& path, sockaddr_un& address) {
  std::memset(&address, 0, sizeof address);
  address.sun_family = AF_UNIX;
  const size_t length = std::min(path.size(), sizeof address.sun_path - 1);
  std::memcpy(address.sun_path, path.data(), length);
  if (!path.empty() && path.front() == '@') {
    address.sun_path[0] = '\0';
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length);
  }
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length + 1);
}

bool abstract(const std::string& path) { return !path.empty() && path.front() == '@'; }

// One message with up to kFdsPerMessage fds. MSG_DONTWAIT: an empty SEQPACKET socket takes a
// small message at once, and the loop thread must never block on a peer.
bool send_with_fds(int socket, std::string_view text, std::span<const int> fds) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * std::max<size_t>(fds.size(), 1)));
  if (!fds.empty()) {
    message.msg_control = control.data();
    message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  }
  return ::sendmsg(socket, &message, MSG_NOSIGNAL | MSG_DONTWAIT) ==
         static_cast<ssize_t>(text.size());
}

// One message, and the fds that came with it (close-on-exec). Blocking, bounded by the
// socket's SO_RCVTIMEO.
Result<std::string, Error> receive_with_fds(int socket, std::vector<UniqueFd>& fds) {
  char buffer[kMaxMessage];
  iovec iov{buffer, sizeof buffer};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFdsPerMessage)];
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  for (cmsghdr* h = CMSG_FIRSTHDR(&message); h != nullptr; h = CMSG_NXTHDR(&message, h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
      fds.emplace_back(fd);
    }
  }
  if (n < 0) {
    return Unexpected{Error(errno == EAGAIN
                                ? std::string("no answer within ") +
                                      std::to_string(TakeoverClient::kStepTimeoutMs) + " ms"
                                : errno_text(errno))};
  }
  if (n == 0) return Unexpected{Error("the running server closed the connection")};
  if ((message.msg_flags & MSG_CTRUNC) != 0) return Unexpected{Error("too many sockets at once")};
  return std::string(buffer, static_cast<size_t>(n));
}

}  // namespace

// ---- the new process ----

Result<TakeoverClient, Error> TakeoverClient::connect(const std::string& path,
                                                      std::string_view program) {
  TakeoverClient client;
  client.path_ = path;
  client.connection_ = UniqueFd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!client.connection_) return Unexpected{Error("socket: " + errno_text(errno))};
  const timeval timeout{kStepTimeoutMs / 1000, 0};
  ::setsockopt(client.connection_.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(client.connection_.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_un address;
  const socklen_t length = make_address(path, address);
  if (::connect(client.connection_.get(), reinterpret_cast<sockaddr*>(&address), length) != 0) {
    const int error = errno;
    return Unexpected{
        Error("connect: " + errno_text(error) +
              (error == ENOENT || error == ECONNREFUSED
                   ? " (no server waits there: is its server.takeover_socket this path?)"
                   : ""))};
  }
  const std::string hello =
      std::string(kHello) + " " + std::to_string(::getpid()) + " " + std::string(program);
  if (::send(client.connection_.get(), hello.data(), hello.size(), MSG_NOSIGNAL) < 0) {
    return Unexpected{Error("send: " + errno_text(errno))};
  }
  auto answer = receive_with_fds(client.connection_.get(), client.sockets_);
  if (!answer) return Unexpected{answer.error()};
  if (answer->rfind("REFUSED ", 0) == 0) {
    return Unexpected{Error("the running server refused: " + answer->substr(8))};
  }
  long pid = 0;
  size_t count = 0;
  if (std::sscanf(answer->c_str(), "SOCKETS %ld %zu", &pid, &count) != 2 || pid <= 0) {
    return Unexpected{Error("unexpected answer \"" + *answer + "\"")};
  }
  client.old_pid_ = static_cast<pid_t>(pid);
  while (client.sockets_.size() < count) {
    auto more = receive_with_fds(client.connection_.get(), client.sockets_);
    if (!more) return Unexpected{more.error()};
  }
  if (client.sockets_.size() != count || count == 0) {
    return Unexpected{Error("expected " + std::to_string(count) + " sockets, received " +
                            std::to_string(client.sockets_.size()))};
  }
  return client;
}

Result<void, Error> TakeoverClient::confirm() {
  constexpr std::string_view kReady = "READY";
  if (::send(connection_.get(), kReady.data(), kReady.size(), MSG_NOSIGNAL) < 0) {
    return Unexpected{Error("send: " + errno_text(errno))};
  }
  std::vector<UniqueFd> none;
  auto answer = receive_with_fds(connection_.get(), none);
  connection_.reset();
  if (!answer) return Unexpected{answer.error()};
  if (*answer != "DRAINING") return Unexpected{Error("unexpected answer \"" + *answer + "\"")};
  return {};
}

// ---- the running server ----

TakeoverListener::TakeoverListener(EventLoop& loop, std::string path, UniqueFd fd)
    : loop_(loop), path_(std::move(path)), fd_(std::move(fd)) {
  detail::LoopAccess::attach(loop_, fd_.get());
}

TakeoverListener::~TakeoverListener() { close(); }

Result<std::unique_ptr<TakeoverListener>, Error> TakeoverListener::listen(EventLoop& loop,
                                                                          const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return Unexpected{Error("socket: " + errno_text(errno))};
  sockaddr_un address;
  const socklen_t length = make_address(path, address);
  if (!abstract(path)) {
    // A file left behind by a server that is gone is replaced; one a server listens on is not.
    struct stat info {};
    if (::lstat(path.c_str(), &info) == 0) {
      if (!S_ISSOCK(info.st_mode)) return Unexpected{Error("it exists and is not a socket")};
      UniqueFd probe(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
      if (probe && ::connect(probe.get(), reinterpret_cast<sockaddr*>(&address), length) == 0) {
        return Unexpected{Error("a running server waits there (start this one with --takeover " +
                                path + " to replace it)")};
      }
      ::unlink(path.c_str());
    }
  }
  // Only this user may connect (the peer's uid is checked as well).
  const mode_t old_mask = ::umask(0077);
  const int bound = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), length);
  const int bind_error = errno;
  ::umask(old_mask);
  if (bound != 0) {
    return Unexpected{Error(errno_text(bind_error) +
                            (bind_error == EADDRINUSE ? " (a running server waits there)" : ""))};
  }
  if (::listen(fd.get(), 4) != 0) return Unexpected{Error("listen: " + errno_text(errno))};
  return std::unique_ptr<TakeoverListener>(new TakeoverListener(loop, path, std::move(fd)));
}

void TakeoverListener::close() noexcept {
  if (!fd_) return;
  detail::LoopAccess::detach(loop_, fd_.get());
  fd_.reset();
  if (!abstract(path_)) ::unlink(path_.c_str());
}

Task<> TakeoverListener::serve(Handover handover) {
  while (fd_) {
    auto accepted = co_await io::accept(loop_, fd_.get());
    if (!accepted) {
      if (accepted.error() == std::errc::operation_canceled || !fd_) co_return;  // stopping
      LOG_WARN("takeover socket {}: accept: {}", path_, accepted.error().message());
      co_await io::sleep_for(loop_, std::chrono::milliseconds(100));
      continue;
    }
    if (co_await hand_over(std::move(accepted->fd), handover)) co_return;
  }
}

Task<bool> TakeoverListener::hand_over(UniqueFd connection, Handover& handover) {
  ucred peer{};
  socklen_t peer_length = sizeof peer;
  if (::getsockopt(connection.get(), SOL_SOCKET, SO_PEERCRED, &peer, &peer_length) != 0 ||
      (peer.uid != ::geteuid() && peer.uid != 0)) {
    LOG_WARN("takeover socket {}: refused pid {} of uid {} (only uid {} may take over)", path_,
             peer.pid, peer.uid, ::geteuid());
    co_return false;
  }
  char buffer[kMaxMessage];
  auto hello = co_await io::recv(loop_, connection.get(), std::as_writable_bytes(std::span(buffer)),
                                 kHelloTimeoutMs);
  const std::string text = hello ? std::string(buffer, *hello) : std::string();
  if (text.rfind(kHello, 0) != 0) {
    LOG_WARN("takeover socket {}: pid {} sent no takeover request", path_, peer.pid);
    co_return false;
  }
  // "UCP-TAKEOVER 1 <pid> <program>": the program names the successor in the log.
  const size_t program_at = text.find(' ', kHello.size() + 1);
  const std::string who =
      "pid " + std::to_string(peer.pid) +
      (program_at == std::string::npos ? "" : " (" + text.substr(program_at + 1) + ")");
  std::string refusal = handover.refusal ? handover.refusal() : std::string();
  const std::vector<int> fds = refusal.empty() ? handover.sockets() : std::vector<int>();
  if (refusal.empty() && fds.empty()) refusal = "this server has no listening socket to hand over";
  if (!refusal.empty()) {
    LOG_WARN("takeover: refused {}: {}", who, refusal);
    (void)send_with_fds(connection.get(), "REFUSED " + refusal, {});
    co_return false;
  }
  LOG_INFO("takeover: {} asks for the {} listening socket(s)", who, fds.size());
  bool sent = true;
  for (size_t first = 0; first < fds.size() && sent; first += kFdsPerMessage) {
    const size_t count = std::min(kFdsPerMessage, fds.size() - first);
    const std::string text_part =
        first == 0 ? "SOCKETS " + std::to_string(::getpid()) + " " + std::to_string(fds.size())
                   : "MORE " + std::to_string(count);
    sent = send_with_fds(connection.get(), text_part, std::span(fds).subspan(first, count));
  }
  if (!sent) {
    LOG_WARN("takeover: sending the sockets to {} failed: {}", who, errno_text(errno));
    co_return false;
  }
  // The successor starts its server now, however long that takes; it closes the connection if
  // it cannot, and this server goes on.
  auto ready =
      co_await io::recv(loop_, connection.get(), std::as_writable_bytes(std::span(buffer)));
  if (!ready || std::string_view(buffer, *ready) != "READY") {
    if (ready || ready.error() != std::errc::operation_canceled) {
      LOG_WARN("takeover: {} did not start serving ({}); this server goes on", who,
               ready ? (*ready == 0 ? "it closed the connection" : "unexpected answer")
                     : ready.error().message());
    }
    co_return false;
  }
  close();  // the successor listens on the path next
  (void)send_with_fds(connection.get(), "DRAINING", {});
  handover.handed_over(peer.pid);
  co_return true;
}

}  // namespace ucp::app

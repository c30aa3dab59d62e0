#include "ucp/net/Resolver.h"

#include <atomic>
#include <cerrno>
#include <cstring>

#include <arpa/inet.h>

namespace ucp {

namespace {

class ResolveCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "resolve"; }
  std::string message(int status) const override { return ::gai_strerror(status); }
  std::error_condition default_error_condition(int status) const noexcept override {
    if (status == EAI_MEMORY) return std::errc::not_enough_memory;
    return {status, *this};
  }
};

int getaddrinfo_lookup(const std::string& host, uint16_t port, int family,
                       std::vector<InetAddress>& out) {
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  // No AI_ADDRCONFIG: it ignores loopback, so "localhost" would lose ::1 on a host whose only
  // IPv6 address is ::1. An address that cannot be reached fails fast and the next is tried.
  addrinfo* list = nullptr;
  const int status = ::getaddrinfo(host.c_str(), nullptr, &hints, &list);
  if (status != 0) return status;
  for (const addrinfo* entry = list; entry != nullptr; entry = entry->ai_next) {
    if (entry->ai_family != AF_INET && entry->ai_family != AF_INET6) continue;
    sockaddr_storage storage{};
    std::memcpy(&storage, entry->ai_addr, std::min<size_t>(entry->ai_addrlen, sizeof storage));
    if (entry->ai_family == AF_INET) {
      reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
    } else {
      reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
    }
    InetAddress address(storage);
    bool seen = false;  // several entries for one address (e.g. from /etc/hosts): try it once
    for (const InetAddress& known : out) seen = seen || known == address;
    if (!seen) out.push_back(address);
  }
  ::freeaddrinfo(list);
  return out.empty() ? EAI_NODATA : 0;
}

}  // namespace

const std::error_category& resolve_category() noexcept {
  static const ResolveCategory category;
  return category;
}

std::error_code resolve_error(int status, int saved_errno) noexcept {
  if (status == EAI_SYSTEM) return error_from_errno(saved_errno != 0 ? saved_errno : EIO);
  return {status, resolve_category()};
}

// One lookup, shared by the awaiter (loop thread) and the resolver thread. Two references:
// the awaiter's, and the thread's, which travels to the loop inside the posted delivery. Fields
// are grouped by who may touch them when.
struct Resolver::Lookup {
  // Written before queuing; read by the thread.
  std::string host;
  uint16_t port = 0;
  int family = AF_UNSPEC;
  // Written by the thread (or the destructor of the Resolver) before the delivery is posted;
  // read on the loop thread after it ran (the post orders the two).
  std::error_code error;
  Addresses addresses;
  // The loop to post the answer to; null once nobody waits for it. Under `mutex`, so that the
  // thread never posts to a loop whose awaiter has let go (the loop may be gone by then).
  std::mutex mutex;
  EventLoop* loop = nullptr;
  std::atomic<bool> abandoned{false};  // the thread may skip a lookup nobody waits for
  std::atomic<int> references{2};
  // Loop thread only: the awaiter still waiting for the answer, or null.
  ResolveAwaiter* awaiter = nullptr;
};

namespace {

/// What the resolver thread posts to the loop: the thread's reference to the lookup. A
/// delivery destroyed without running (its loop was destroyed) still lets go of it.
struct Delivery {
  Resolver::Lookup* lookup;
  void (*deliver)(Resolver::Lookup*) noexcept;
  void (*release)(Resolver::Lookup*) noexcept;
  Delivery(Resolver::Lookup* l, void (*d)(Resolver::Lookup*) noexcept,
           void (*r)(Resolver::Lookup*) noexcept) noexcept
      : lookup(l), deliver(d), release(r) {}
  Delivery(Delivery&& other) noexcept
      : lookup(std::exchange(other.lookup, nullptr)),
        deliver(other.deliver),
        release(other.release) {}
  Delivery(const Delivery&) = delete;
  Delivery& operator=(const Delivery&) = delete;
  Delivery& operator=(Delivery&&) = delete;
  ~Delivery() {
    if (lookup != nullptr) release(lookup);
  }
  void operator()() noexcept { deliver(std::exchange(lookup, nullptr)); }
};

}  // namespace

Resolver::Resolver(ResolverOptions options) : options_(std::move(options)) {
  if (options_.threads == 0) options_.threads = 1;
  if (!options_.lookup) options_.lookup = &getaddrinfo_lookup;
}

Resolver::~Resolver() {
  std::deque<Lookup*> left;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    left.swap(queue_);
  }
  wake_.notify_all();
  for (auto& thread : threads_) thread.join();
  for (Lookup* lookup : left) {
    lookup->error = std::make_error_code(std::errc::operation_canceled);
    hand_back(lookup);
  }
}

Resolver& Resolver::shared() {
  static Resolver resolver;
  return resolver;
}

size_t Resolver::queued() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

size_t Resolver::threads_started() const {
  std::lock_guard lock(mutex_);
  return threads_.size();
}

bool Resolver::enqueue(Lookup* lookup) {
  std::lock_guard lock(mutex_);
  if (stopping_ || queue_.size() >= options_.queue_capacity) return false;
  queue_.push_back(lookup);
  // A thread per waiting lookup, up to the limit: one name costs one thread, not the pool.
  if (idle_threads_ < queue_.size() && threads_.size() < options_.threads) {
    threads_.emplace_back([this] { work(); });
  }
  wake_.notify_one();
  return true;
}

void Resolver::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    ++idle_threads_;
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --idle_threads_;
    if (stopping_) return;
    Lookup* lookup = queue_.front();
    queue_.pop_front();
    lock.unlock();
    if (lookup->abandoned.load(std::memory_order_acquire)) {
      lookup->error = std::make_error_code(std::errc::operation_canceled);
    } else {
      errno = 0;
      const int status =
          options_.lookup(lookup->host, lookup->port, lookup->family, lookup->addresses);
      if (status != 0) lookup->error = resolve_error(status, errno);
    }
    hand_back(lookup);
    lock.lock();
  }
}

void Resolver::hand_back(Lookup* lookup) noexcept {
  std::unique_lock lock(lookup->mutex);
  if (lookup->loop == nullptr) {  // nobody waits: do not touch a loop that may be gone
    lock.unlock();
    release(lookup);
    return;
  }
  // Posting under the lock: the awaiter cannot let go of the loop (and the loop cannot be
  // destroyed by its owner, who must first stop it) while the task is being queued.
  lookup->loop->post(Delivery(lookup, &deliver, &release));
}

void Resolver::deliver(Lookup* lookup) noexcept {
  ResolveAwaiter* awaiter = lookup->awaiter;
  if (awaiter != nullptr && awaiter->state_ == ResolveAwaiter::State::kWaiting) {
    awaiter->state_ = ResolveAwaiter::State::kAnswered;
    awaiter->loop_.schedule(awaiter->caller_);
  }
  release(lookup);
}

void Resolver::release(Lookup* lookup) noexcept {
  if (lookup->references.fetch_sub(1, std::memory_order_acq_rel) == 1) delete lookup;
}

// ---- the awaiter ----

Resolver::ResolveAwaiter::ResolveAwaiter(Resolver& resolver, EventLoop& loop, std::string host,
                                         uint16_t port, int family) noexcept
    : resolver_(resolver), loop_(loop), host_(std::move(host)), port_(port), family_(family) {}

Resolver::ResolveAwaiter::~ResolveAwaiter() { let_go(); }

bool Resolver::ResolveAwaiter::await_suspend(std::coroutine_handle<> caller) {
  auto* lookup = new Lookup;
  lookup->host = std::move(host_);
  lookup->port = port_;
  lookup->family = family_;
  lookup->loop = &loop_;
  lookup->awaiter = this;
  if (!resolver_.enqueue(lookup)) {
    delete lookup;  // no thread ever saw it
    refused_ = std::make_error_code(std::errc::resource_unavailable_try_again);
    return false;
  }
  lookup_ = lookup;
  caller_ = caller;
  state_ = State::kWaiting;
  return true;
}

Result<Resolver::Addresses> Resolver::ResolveAwaiter::await_resume() {
  if (refused_) return Unexpected{refused_};
  if (state_ == State::kCancelled) {
    let_go();
    return Unexpected{std::errc::operation_canceled};
  }
  // Answered: the thread wrote the answer before posting it, and no longer touches it.
  std::error_code error = lookup_->error;
  Addresses addresses = std::move(lookup_->addresses);
  let_go();
  if (error) return Unexpected{error};
  return addresses;
}

void Resolver::ResolveAwaiter::cancel() noexcept {
  if (state_ != State::kWaiting) return;  // answered already: the answer stands
  state_ = State::kCancelled;
  loop_.schedule(caller_);
}

void Resolver::ResolveAwaiter::let_go() noexcept {
  Lookup* lookup = std::exchange(lookup_, nullptr);
  if (lookup == nullptr) return;
  lookup->awaiter = nullptr;
  lookup->abandoned.store(true, std::memory_order_release);
  {
    std::lock_guard lock(lookup->mutex);
    lookup->loop = nullptr;
  }
  release(lookup);
}

}  // namespace ucp

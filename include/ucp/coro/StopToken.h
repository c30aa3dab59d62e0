#pragma once
// StopSource / StopToken / StopCallback: cooperative cancellation for coroutines of one loop,
// shaped like std::stop_source / std::stop_token / std::stop_callback.
//
//   ucp::StopSource stop;
//   loop.spawn(fetch(conn, stop.token()));   // fetch passes the token to what it awaits
//   ...
//   stop.request_stop();                     // every awaiter registered on it is cancelled
//
// An awaiter given a token registers a StopCallback while it is suspended; request_stop() runs
// the callbacks, each of which asks its operation to end early (the awaiter's cancel()). The
// awaiter then resumes with operation_canceled once the operation's completion has arrived,
// so a cancelled operation never leaves the kernel writing into a buffer its owner has freed.
// Sources compose: a StopCallback on one token can request_stop() another source (a request's
// deadline and its connection's shutdown, say).
//
// Unlike std::stop_token this is single-threaded and allocation-free (callbacks are intrusive
// nodes): a source, its tokens and callbacks belong to one loop. To cancel from another thread,
// post the request_stop() to that loop. The source must outlive its tokens' use.

#include <utility>

namespace ucp {

class StopSource;
class StopCallbackBase;

class StopToken {
 public:
  StopToken() noexcept = default;
  bool stop_requested() const noexcept;
  /// False for a default-constructed token: nothing can ever stop it.
  bool stop_possible() const noexcept { return source_ != nullptr; }

 private:
  friend class StopSource;
  friend class StopCallbackBase;
  explicit StopToken(StopSource* source) noexcept : source_(source) {}
  StopSource* source_ = nullptr;
};

class StopSource {
 public:
  StopSource() noexcept = default;
  StopSource(const StopSource&) = delete;
  StopSource& operator=(const StopSource&) = delete;
  ~StopSource();

  StopToken token() noexcept { return StopToken(this); }
  bool stop_requested() const noexcept { return stopped_; }
  /// Runs every registered callback once, newest first. False if stop was requested before.
  bool request_stop() noexcept;

 private:
  friend class StopCallbackBase;
  StopCallbackBase* head_ = nullptr;
  bool stopped_ = false;
};

class StopCallbackBase {
 public:
  StopCallbackBase(const StopCallbackBase&) = delete;
  StopCallbackBase& operator=(const StopCallbackBase&) = delete;

 protected:
  using Invoke = void (*)(StopCallbackBase&) noexcept;
  explicit StopCallbackBase(Invoke invoke) noexcept : invoke_(invoke) {}
  ~StopCallbackBase();
  /// Registers on the token's source, or runs the callback now if it has been stopped.
  void attach(StopToken token) noexcept;
  /// Unregisters (the callback will not run). Idempotent.
  void detach() noexcept;

 private:
  friend class StopSource;
  StopSource* source_ = nullptr;  // null once unregistered (or never registered)
  StopCallbackBase* prev_ = nullptr;
  StopCallbackBase* next_ = nullptr;
  Invoke invoke_;
};

/// Runs `callback` when the token's source requests stop; at once (in the constructor) if it
/// already has. Unregistered by its destructor.
template <class Callback>
class StopCallback : public StopCallbackBase {
 public:
  StopCallback(StopToken token, Callback callback) noexcept
      : StopCallbackBase(&invoke), callback_(std::move(callback)) {
    attach(token);  // only now: it may run the callback at once
  }

 private:
  static void invoke(StopCallbackBase& base) noexcept {
    static_cast<StopCallback&>(base).callback_();
  }
  Callback callback_;
};

template <class Callback>
StopCallback(StopToken, Callback) -> StopCallback<Callback>;

// ---- inline definitions ----

inline bool StopToken::stop_requested() const noexcept {
  return source_ != nullptr && source_->stop_requested();
}

inline void StopCallbackBase::attach(StopToken token) noexcept {
  StopSource* source = token.source_;
  if (source == nullptr) return;
  if (source->stopped_) {
    invoke_(*this);
    return;
  }
  source_ = source;
  next_ = source->head_;
  if (next_ != nullptr) next_->prev_ = this;
  source->head_ = this;
}

inline StopCallbackBase::~StopCallbackBase() { detach(); }

inline void StopCallbackBase::detach() noexcept {
  if (source_ == nullptr) return;
  if (prev_ != nullptr) {
    prev_->next_ = next_;
  } else if (source_->head_ == this) {
    source_->head_ = next_;
  }
  if (next_ != nullptr) next_->prev_ = prev_;
  source_ = nullptr;
  prev_ = next_ = nullptr;
}

inline StopSource::~StopSource() {
  // Callbacks outliving their source must not reach back into it.
  for (StopCallbackBase* node = head_; node != nullptr; node = node->next_) node->source_ = nullptr;
}

inline bool StopSource::request_stop() noexcept {
  if (stopped_) return false;
  stopped_ = true;
  // Unlink each callback before running it: it may destroy itself or register others.
  while (head_ != nullptr) {
    StopCallbackBase* node = head_;
    head_ = node->next_;
    if (head_ != nullptr) head_->prev_ = nullptr;
    node->source_ = nullptr;
    node->prev_ = node->next_ = nullptr;
    node->invoke_(*node);
  }
  return true;
}

}  // namespace ucp

#include "ucp/log/Logger.h"

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ucp/base/BoundedMpscQueue.h"

#include "ConsoleSink.h"
#include "Futex.h"
#include "LogFile.h"
#include "LogRecord.h"
#include "RecordFormatter.h"

namespace ucp {
namespace {

using detail::ConsoleSink;
using detail::DeferredFormat;
using detail::futex_wait;
using detail::futex_wake;
using detail::LogFile;
using detail::LogRecord;
using detail::RecordFormatter;

constexpr int64_t kNsPerMs = 1000000;
constexpr uint32_t kMaxQueue = 1u << 24;   // what [log] queue_capacity allows: 4 GiB of slots
constexpr size_t kMaxBatch = 4096;         // records per drain round before checking for flushes
constexpr int64_t kFullWaitNs = kNsPerMs;  // re-check a full queue at least this often
constexpr int64_t kFlushWaitNs = 10 * kNsPerMs;  // an ERROR re-checks its flush this often
constexpr int64_t kNapNs = kNsPerMs;             // the consumer's sleep while records keep coming
constexpr int kNapsBeforeSleep = 10;             // empty naps before it sleeps until woken
// The consumer's sleep state, as producers see it.
constexpr uint8_t kAwake = 0;
constexpr uint8_t kNapping = 1;   // wakes by itself within kNapNs
constexpr uint8_t kSleeping = 2;  // wakes when a producer wakes it, or when a flush is due

int32_t current_tid() noexcept {
  thread_local const auto tid = static_cast<int32_t>(::syscall(SYS_gettid));
  return tid;
}

int64_t now_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);  // vDSO: no system call
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t steady_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::atomic<uint64_t> g_dropped_total{0};

// Before init and after shutdown: synchronous, to stderr.
void write_fallback(LogLevel level, const char* file, int line, std::string_view bytes,
                    DeferredFormat format);

// The sinks and the formatter: what one writer (background thread, or the sync-mode lock
// holder) owns. The file and the console are sinks like the program's own; they are also kept
// by type for the background thread's timing (the console is flushed as soon as the queue is
// empty, the file at the flush interval).
class Sinks {
 public:
  Sinks(const LogOptions& options, std::shared_ptr<LogFile> file,
        std::shared_ptr<ConsoleSink> console)
      : file_(std::move(file)),
        console_(std::move(console)),
        formatter_(options.format, options.time_format) {
    if (file_) all_.push_back(file_);
    if (console_) all_.push_back(console_);
    for (const auto& sink : options.sinks) {
      if (sink) all_.push_back(sink);
    }
  }

  // `bytes` is the message, or the blob that `format` turns into it.
  void emit(int64_t time_ns, LogLevel level, int32_t tid, const char* file, int32_t line,
            std::string_view bytes, DeferredFormat format) {
    line_.clear();
    formatter_.append_prefix(time_ns, level, tid, file, line, line_);
    const size_t message_at = line_.size();
    std::string_view message = bytes;
    if (json()) {  // the message is escaped: expanded apart first
      if (format != nullptr) {
        message_.clear();
        message = expand(format, bytes, message_);
      }
      formatter_.append_message(message, line_);
    } else if (format != nullptr) {
      expand(format, bytes, line_);  // straight after the prefix: no copy
    } else {
      formatter_.append_message(bytes, line_);
    }
    const size_t message_end = line_.size();
    formatter_.finish(line_);
    if (!json()) message = std::string_view(line_.data() + message_at, message_end - message_at);
    const LogEntry entry{time_ns,
                         level,
                         tid,
                         formatter_.file_name(),
                         line,
                         message,
                         std::string_view(line_.data(), line_.size())};
    for (const auto& sink : all_) sink->write(entry);
  }
  void flush() {
    for (const auto& sink : all_) sink->flush();
  }
  void flush_console() {
    if (console_) console_->flush();
  }
  void reopen() {
    for (const auto& sink : all_) sink->reopen();
  }
  bool file_has_buffered() const noexcept { return file_ && file_->has_buffered(); }
  // Writes what is left and closes the file (a reader waiting for EOF gets it now).
  void close() {
    flush();
    all_.clear();
    file_.reset();
    console_.reset();
  }

 private:
  bool json() const noexcept { return formatter_.level_offset() == 0; }
  // Appends the message a deferred record's blob holds to `out`; returns it.
  static std::string_view expand(DeferredFormat format, std::string_view blob,
                                 fmt::memory_buffer& out) {
    const size_t start = out.size();
    try {
      format(blob, out);
    } catch (const std::exception& e) {
      // Only a runtime format string can get here (compile-time ones are checked).
      out.resize(start);
      fmt::format_to(fmt::appender(out), "[log format error: {}]", e.what());
    }
    return {out.data() + start, out.size() - start};
  }

  std::shared_ptr<LogFile> file_;
  std::shared_ptr<ConsoleSink> console_;
  std::vector<std::shared_ptr<LogSink>> all_;
  RecordFormatter formatter_;
  fmt::memory_buffer line_;
  fmt::memory_buffer message_;  // JSON: a deferred message before it is escaped
};

// One init's worth of logger: the queue, the sinks and (async) the background thread.
class Backend {
 public:
  Backend(const LogOptions& options, std::shared_ptr<LogFile> file,
          std::shared_ptr<ConsoleSink> console)
      : options_(options),
        sinks_(options, std::move(file), std::move(console)),
        queue_(options.async ? options.queue_capacity : 2) {
    if (options_.async) {
      thread_ = std::thread([this] {
        ::pthread_setname_np(::pthread_self(), "ucp-log");  // for top -H, perf, gdb
        run();
      });
    }
  }
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  ~Backend() { stop(); }

  // Any thread.
  // `bytes` is the message, or (if `format` is set) a blob that format() turns into it.
  void submit(LogLevel level, const char* file, int line, std::string_view bytes,
              DeferredFormat format) {
    int64_t time_ns = now_ns();
    int32_t tid = current_tid();
    if (finished_.load(std::memory_order_acquire)) {
      // Logged while shutdown() ran (the contract says: stop logging first). The queue has
      // no reader any more; the stderr fallback at least shows the record.
      write_fallback(level, file, line, bytes, format);
      return;
    }
    if (!options_.async) {
      std::lock_guard lock(sync_mutex_);
      sinks_.emit(time_ns, level, tid, file, line, bytes, format);
      sinks_.flush();  // sync mode: the record is in the file when the call returns
      return;
    }
    std::unique_ptr<char[]> heap;  // allocated before claiming: a claimed slot must not throw
    if (bytes.size() > Logger::kInlineMessageSize) {
      heap = std::make_unique<char[]>(bytes.size());
      std::memcpy(heap.get(), bytes.data(), bytes.size());
    }
    auto fill = [&](LogRecord& record) noexcept {
      record.time_ns = time_ns;
      record.file = file;
      record.line = line;
      record.tid = tid;
      record.level = level;
      record.format = format;
      record.size = static_cast<uint32_t>(bytes.size());
      if (heap) {
        record.heap = std::move(heap);
      } else {
        std::memcpy(record.inline_bytes, bytes.data(), bytes.size());
      }
    };
    size_t position = 0;
    if (!queue_.try_push_with(fill, &position)) {
      if (options_.queue_full_policy == QueueFullPolicy::kDrop && level < LogLevel::kError) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        g_dropped_total.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      push_waiting(fill, position);
    }
    if (level >= LogLevel::kError) {
      wait_written(position);
      return;
    }
    // A napping consumer wakes by itself within kNapNs; waking it costs a system call on
    // this thread, so only a backlog that could fill the queue during a nap is worth one.
    // Relaxed: a wake-up missed in the race with the consumer falling asleep costs at most
    // its sleep timeout (<= flush_interval_ms), which the flush contract allows anyway.
    auto state = sleep_state_.load(std::memory_order_relaxed);
    if (state == kSleeping ||
        (state == kNapping && position - queue_.popped_count() >= wake_backlog_)) {
      wake_consumer();
    }
  }

  // Any thread. Async: queues a reopen request behind every record logged so far (it is never
  // dropped, whatever the queue-full policy); sync: reopens at once under the writer's lock.
  void reopen() {
    if (finished_.load(std::memory_order_acquire)) return;
    if (!options_.async) {
      std::lock_guard lock(sync_mutex_);
      sinks_.reopen();
      return;
    }
    auto fill = [](LogRecord& record) noexcept {
      record.format = &detail::reopen_request;
      record.size = 0;
      record.file = __FILE__;
    };
    size_t position = 0;
    if (!queue_.try_push_with(fill, &position)) push_waiting(fill, position);
    wake_consumer();
  }

  // The thread that calls it: drains the queue, writes everything, joins the thread.
  void stop() {
    if (thread_.joinable()) {
      stopping_.store(true, std::memory_order_seq_cst);
      wake_epoch_.fetch_add(1, std::memory_order_seq_cst);
      futex_wake(wake_epoch_);
      thread_.join();
    }
    std::lock_guard lock(sync_mutex_);
    sinks_.close();
  }

 private:
  template <class Fill>
  void push_waiting(Fill& fill, size_t& position) {
    for (int attempt = 0;; ++attempt) {
      wake_consumer();
      if (attempt < 8) {
        std::this_thread::yield();  // the consumer usually frees a batch within a time slice
      } else {
        space_waiters_.fetch_add(1, std::memory_order_seq_cst);
        uint32_t epoch = space_epoch_.load(std::memory_order_seq_cst);
        bool pushed = queue_.try_push_with(fill, &position);
        if (!pushed) futex_wait(space_epoch_, epoch, kFullWaitNs);
        space_waiters_.fetch_sub(1, std::memory_order_relaxed);
        if (pushed) return;
      }
      if (queue_.try_push_with(fill, &position)) return;
      if (finished_.load(std::memory_order_acquire)) return;  // nobody will free a slot
    }
  }

  void wait_written(size_t position) {
    flush_waiters_.fetch_add(1, std::memory_order_seq_cst);
    wake_consumer();
    while (written_count_.load(std::memory_order_acquire) <= position &&
           !finished_.load(std::memory_order_acquire)) {
      uint32_t epoch = written_epoch_.load(std::memory_order_seq_cst);
      if (written_count_.load(std::memory_order_seq_cst) > position) break;
      futex_wait(written_epoch_, epoch, kFlushWaitNs);
    }
    flush_waiters_.fetch_sub(1, std::memory_order_relaxed);
  }

  void wake_consumer() {
    if (sleep_state_.exchange(kAwake, std::memory_order_seq_cst) != kAwake) {
      wake_epoch_.fetch_add(1, std::memory_order_seq_cst);
      futex_wake(wake_epoch_, 1);
    }
  }

  // Background thread.
  void run() {
    const int64_t interval_ns = std::max<int64_t>(1, options_.flush_interval_ms) * kNsPerMs;
    int64_t next_flush_ns = steady_ns() + interval_ns;
    int idle_naps = 0;
    size_t popped_since_nap = 0;
    for (;;) {
      size_t popped = 0;
      bool urgent = false;
      while (popped < kMaxBatch && queue_.try_pop_with([&](LogRecord& record) {
        if (record.format == &detail::reopen_request) {
          sinks_.reopen();
          return;
        }
        sinks_.emit(record.time_ns, record.level, record.tid, record.file, record.line,
                    record.bytes(), record.format);
        urgent = urgent || record.level >= LogLevel::kError;
        record.heap.reset();
      })) {
        ++popped;
      }
      popped_since_nap += popped;
      if (popped > 0 && space_waiters_.load(std::memory_order_seq_cst) > 0) {
        space_epoch_.fetch_add(1, std::memory_order_seq_cst);
        futex_wake(space_epoch_);
      }
      report_drops();
      int64_t now = steady_ns();
      if (urgent || now >= next_flush_ns || flush_waiters_.load(std::memory_order_seq_cst) > 0) {
        flush_all();
        next_flush_ns = now + interval_ns;
      }
      if (popped == kMaxBatch) continue;
      if (queue_.claimed_unread()) {
        if (popped == 0) std::this_thread::yield();  // a producer is filling the head slot
        continue;
      }
      if (stopping_.load(std::memory_order_acquire)) {
        if (queue_.claimed_unread()) continue;
        report_drops();
        flush_all();
        finished_.store(true, std::memory_order_seq_cst);
        wake_waiters();  // anyone still waiting must not wait for us any longer
        return;
      }
      // Queue empty: show the console lines now. While records keep coming, nap for
      // kNapNs (producers do not wake a napping consumer: that would cost them a system
      // call); after kNapsBeforeSleep empty naps, sleep until a producer wakes us or the
      // next flush is due.
      sinks_.flush_console();
      idle_naps = popped_since_nap > 0 ? 0 : idle_naps + 1;
      popped_since_nap = 0;
      bool deep = idle_naps > kNapsBeforeSleep;
      uint32_t epoch = wake_epoch_.load(std::memory_order_seq_cst);
      sleep_state_.store(deep ? kSleeping : kNapping, std::memory_order_seq_cst);
      if (queue_.claimed_unread() || stopping_.load(std::memory_order_seq_cst)) {
        sleep_state_.store(kAwake, std::memory_order_relaxed);
        continue;
      }
      int64_t timeout_ns = sinks_.file_has_buffered() ? next_flush_ns - now : interval_ns;
      if (!deep) timeout_ns = std::min(timeout_ns, kNapNs);
      futex_wait(wake_epoch_, epoch, std::max<int64_t>(timeout_ns, 1));
      sleep_state_.store(kAwake, std::memory_order_relaxed);
    }
  }

  void flush_all() {
    sinks_.flush();
    written_count_.store(queue_.popped_count(), std::memory_order_seq_cst);
    if (flush_waiters_.load(std::memory_order_seq_cst) > 0) {
      written_epoch_.fetch_add(1, std::memory_order_seq_cst);
      futex_wake(written_epoch_);
    }
  }

  void wake_waiters() {
    written_epoch_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(written_epoch_);
    space_epoch_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(space_epoch_);
  }

  void report_drops() {
    uint64_t dropped = dropped_.load(std::memory_order_relaxed);
    if (dropped == reported_drops_) return;
    auto text = fmt::format("log queue full: dropped {} records (total {})",
                            dropped - reported_drops_, dropped);
    reported_drops_ = dropped;
    sinks_.emit(now_ns(), LogLevel::kWarn, current_tid(), __FILE__, __LINE__, text, nullptr);
  }

  const LogOptions options_;
  Sinks sinks_;            // background thread (async) or sync_mutex_ holder (sync)
  std::mutex sync_mutex_;  // sync mode only
  BoundedMpscQueue<LogRecord> queue_;
  const size_t wake_backlog_ = std::max<size_t>(1, queue_.capacity() / 4);
  std::thread thread_;
  uint64_t reported_drops_ = 0;  // background thread

  // Read by producers on every record, written by the consumer when it naps or sleeps.
  alignas(64) std::atomic<uint8_t> sleep_state_{kAwake};
  std::atomic<uint64_t> dropped_{0};  // producers add, the background thread reports
  // Sleep/wake words. Each is a futex; a waiter re-checks its condition after reading it.
  alignas(64) std::atomic<uint32_t> wake_epoch_{0};  // consumer sleeps here
  std::atomic<uint32_t> space_epoch_{0};             // producers wait for a free slot
  std::atomic<uint32_t> written_epoch_{0};           // ERROR/FATAL wait for their write
  std::atomic<uint32_t> space_waiters_{0};
  std::atomic<uint32_t> flush_waiters_{0};
  std::atomic<size_t> written_count_{0};  // records written to the sinks so far
  std::atomic<bool> stopping_{false};
  std::atomic<bool> finished_{false};  // the background thread has written its last record
};

std::mutex g_lifecycle_mutex;  // serialises init and shutdown
std::atomic<Backend*> g_backend{nullptr};
// The last shut-down backend is kept (stopped): a thread that loaded the pointer just
// before shutdown may still be inside submit(). It is freed at the next shutdown or at
// exit, long after any such call has returned (a stopped backend never makes one wait).
std::unique_ptr<Backend> g_retired;
std::unique_ptr<Backend> g_current;
bool g_atexit_registered = false;

// Caller holds g_lifecycle_mutex.
void retire_locked() noexcept {
  if (!g_current) return;
  g_backend.store(nullptr, std::memory_order_seq_cst);  // new records go to stderr
  g_current->stop();
  g_retired = std::move(g_current);
}

// Before init and after shutdown: synchronous, to stderr.
std::mutex g_fallback_mutex;

void write_fallback(LogLevel level, const char* file, int line, std::string_view bytes,
                    DeferredFormat format) {
  static RecordFormatter formatter;
  static fmt::memory_buffer message;
  static fmt::memory_buffer text;
  std::lock_guard lock(g_fallback_mutex);
  if (format != nullptr) {
    message.clear();
    try {
      format(bytes, message);
    } catch (const std::exception& e) {
      message.clear();
      fmt::format_to(fmt::appender(message), "[log format error: {}]", e.what());
    }
    bytes = std::string_view(message.data(), message.size());
  }
  text.clear();
  formatter.format(now_ns(), level, current_tid(), file, line, bytes, text);
  detail::write_fully(STDERR_FILENO, text.data(), text.size());
}

}  // namespace

std::string_view to_string(LogLevel level) noexcept {
  constexpr std::string_view kNames[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"};
  return kNames[static_cast<size_t>(level)];
}

std::optional<LogLevel> parse_log_level(std::string_view text) noexcept {
  for (int i = 0; i <= static_cast<int>(LogLevel::kFatal); ++i) {
    auto name = to_string(static_cast<LogLevel>(i));
    if (name.size() != text.size()) continue;
    bool same = true;
    for (size_t k = 0; k < name.size(); ++k) {
      char c = text[k];
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      same = same && c == name[k];
    }
    if (same) return static_cast<LogLevel>(i);
  }
  return std::nullopt;
}

Result<void, Error> Logger::init(const LogOptions& options) {
  if (options.async && (options.queue_capacity == 0 || options.queue_capacity > kMaxQueue)) {
    return Unexpected{Error(fmt::format("log queue_capacity must be in 1..{}", kMaxQueue))};
  }
  std::shared_ptr<LogFile> file;
  if (!options.file.empty()) {
    std::string error;
    file = LogFile::open(options.file, options.max_size, options.max_files, error, options.daily);
    if (!file) return Unexpected{Error(std::move(error))};
  }
  std::shared_ptr<ConsoleSink> console;
  if (options.console) {
    const bool journal = options.journald == JournalPrefix::kOn ||
                         (options.journald == JournalPrefix::kAuto && detail::stdout_is_journal());
    console = std::make_shared<ConsoleSink>(
        STDOUT_FILENO, RecordFormatter(options.format, options.time_format).level_offset(),
        journal);
  }

  std::lock_guard lock(g_lifecycle_mutex);
  retire_locked();  // a second init replaces the first
  try {
    g_current = std::make_unique<Backend>(options, std::move(file), std::move(console));
  } catch (const std::bad_alloc&) {  // the queue is allocated (and touched) whole, here
    const uint64_t slots = std::bit_ceil(uint64_t{options.queue_capacity});
    return Unexpected{Error(fmt::format(
        "log.queue_capacity: cannot allocate the log queue, {} records x {} B = {} bytes: out "
        "of memory or address space; lower log.queue_capacity",
        slots, kQueueSlotBytes, slots * kQueueSlotBytes))};
  } catch (const std::system_error& e) {
    return Unexpected{
        Error(std::string("cannot start the logger's thread: ") + e.what(), e.code())};
  }
  set_level(options.level);
  g_backend.store(g_current.get(), std::memory_order_release);
  if (!g_atexit_registered) {
    // A clean exit that forgets shutdown() still writes everything.
    g_atexit_registered = std::atexit([] { Logger::shutdown(); }) == 0;
  }
  return {};
}

void Logger::shutdown() noexcept {
  std::lock_guard lock(g_lifecycle_mutex);
  retire_locked();
}

uint64_t Logger::dropped() noexcept { return g_dropped_total.load(std::memory_order_relaxed); }

void Logger::reopen() {
  Backend* backend = g_backend.load(std::memory_order_acquire);
  if (backend != nullptr) backend->reopen();
}

namespace {

void write_any(LogLevel level, const char* file, int line, std::string_view bytes,
               DeferredFormat format) {
  Backend* backend = g_backend.load(std::memory_order_acquire);
  if (backend != nullptr) {
    backend->submit(level, file, line, bytes, format);
  } else {
    write_fallback(level, file, line, bytes, format);
  }
  if (level == LogLevel::kFatal) std::abort();  // the record is written: see submit()
}

}  // namespace

void Logger::write(LogLevel level, const char* file, int line, std::string_view message) {
  write_any(level, file, line, message, nullptr);
}

void Logger::write_deferred(LogLevel level, const char* file, int line,
                            void (*format)(std::string_view blob, fmt::memory_buffer& out),
                            std::string_view blob) {
  write_any(level, file, line, blob, format);
}

}  // namespace ucp

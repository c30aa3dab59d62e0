#pragma once
// LogRecord: one queued record, filled in place by the logging thread and read in place by
// the background thread. It holds the raw fields; the background thread formats the line
// (and, for a deferred record, the message), so the call site pays only for copying.
//
// Layout (with the queue's 8-byte sequence number in front, one cell = 256 bytes, 4 lines):
//   | seq 8 | time_ns 8 | file 8 | heap 8 | format 8 | size 4 | line 4 | tid 4 | level 1 |
//   | inline bytes (the message, or the blob if `format` is set): 200 bytes               |

#include <cstdint>
#include <memory>
#include <string_view>

#include "ucp/log/Logger.h"

namespace ucp::detail {

using DeferredFormat = void (*)(std::string_view blob, fmt::memory_buffer& out);

/// A record whose `format` is this function carries no message: it asks the background
/// thread to reopen the log file at that point of the stream (Logger::reopen), so every
/// record queued before it goes to the old file and every one after it to the new file.
inline void reopen_request(std::string_view, fmt::memory_buffer&) {}

struct LogRecord {
  int64_t time_ns = 0;              // CLOCK_REALTIME at the call
  const char* file = nullptr;       // __FILE__: a string literal, lives forever
  std::unique_ptr<char[]> heap;     // set when the bytes do not fit inline
  DeferredFormat format = nullptr;  // set: the bytes are a blob that format() turns into text
  uint32_t size = 0;                // bytes
  int32_t line = 0;
  int32_t tid = 0;
  LogLevel level = LogLevel::kInfo;
  char inline_bytes[Logger::kInlineMessageSize];

  /// The message, or the blob of a deferred record.
  std::string_view bytes() const noexcept { return {heap ? heap.get() : inline_bytes, size}; }
};

static_assert(sizeof(LogRecord) + sizeof(uint64_t) <= Logger::kQueueSlotBytes,
              "a queue cell should stay 4 lines (and what Logger::kQueueSlotBytes says)");

}  // namespace ucp::detail

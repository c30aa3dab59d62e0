#pragma once
// LogRecord: one queued record, filled in place by the logging thread and read in place by
// the background thread. It holds the raw fields; the background thread formats the line,
// so the call site pays only for the message itself.
//
// Layout (with the queue's 8-byte sequence number in front, one cell = 256 bytes, 4 lines):
//   | seq 8 | time_ns 8 | file 8 | heap 8 | size 4 | line 4 | tid 4 | level 1 | pad 3 |
//   | inline message: kInlineMessageSize = 200 bytes                                    |

#include <cstdint>
#include <memory>
#include <string_view>

#include "ucp/log/Logger.h"

namespace ucp::log_detail {

struct LogRecord {
  int64_t time_ns = 0;           // CLOCK_REALTIME at the call
  const char* file = nullptr;    // __FILE__: a string literal, lives forever
  std::unique_ptr<char[]> heap;  // set when the message does not fit inline
  uint32_t size = 0;             // message bytes
  int32_t line = 0;
  int32_t tid = 0;
  LogLevel level = LogLevel::kInfo;
  char inline_message[Logger::kInlineMessageSize];

  std::string_view message() const noexcept { return {heap ? heap.get() : inline_message, size}; }
};

static_assert(sizeof(LogRecord) + sizeof(uint64_t) <= 256, "a queue cell should stay 4 lines");

}  // namespace ucp::log_detail

#pragma once
// FrameReader: RFC 6455 frames in, whole messages and control frames out, without I/O. The
// WebSocket feeds it what the connection receives; the fuzzer feeds it anything.
//
//   for (;;) {
//     auto event = reader.next(input);  // parses from the front of `input`, unmasking in place
//     if (event == Event::kNeedMore) break;  // all of `input` consumed (partial state kept)
//     ...                                    // kMessage, kPing, kPong, kClose, kError
//   }
//
// No copy on the common path: a message that is one frame wholly inside `input` is unmasked
// where it lies and handed out as a view into `input`. A message split across inputs or
// fragments, and an inflated one, is assembled in a MessageBuffer. A frame header cut by the end
// of an input is kept in the reader (14 bytes at most); a control frame cut so goes into the
// assembly buffer's spare room, behind the message in progress.
//
// Every rule a server (or client) must enforce is checked here, in arrival order, and the first
// violation is kError with its close code: 1002 for framing (RSV bits without an extension that
// defines them, reserved opcodes, an unmasked frame from a client or a masked one from a server,
// a fragmented or oversized control frame, a continuation without a message or a new message in
// the middle of one, a length not in its shortest form or with the top bit set, a close frame of
// one byte or with a code no one may send), 1007 for payloads (text that is not UTF-8, checked
// as the bytes arrive; a close reason that is not UTF-8; compressed data that does not inflate),
// 1009 for size (a frame above max_frame_bytes, a message above max_message_bytes, counted
// before its payload is read, and inflated messages as they inflate). After kError or kClose
// the reader takes nothing more.
//
// Thread contract: one thread at a time.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "Frame.h"
#include "MessageBuffer.h"
#include "Utf8Validator.h"

namespace ucp::ws::detail {

class Inflater;

class FrameReader {
 public:
  enum class Event : uint8_t { kNeedMore, kMessage, kPing, kPong, kClose, kError };
  struct Limits {
    uint64_t max_message_bytes = 1024 * 1024;
    uint64_t max_frame_bytes = 1024 * 1024;
  };

  /// `expect_masked`: frames must be masked (a server reading a client) or must not be (a
  /// client reading a server).
  FrameReader(bool expect_masked, Limits limits) noexcept;
  FrameReader(const FrameReader&) = delete;
  FrameReader& operator=(const FrameReader&) = delete;
  ~FrameReader();

  /// permessage-deflate was negotiated: RSV1 on a message's first frame means compressed, and
  /// `inflater` inflates it (it must outlive the reader).
  void enable_inflate(Inflater* inflater) noexcept { inflater_ = inflater; }

  /// Parses from the front of `input` and removes what it consumed. The payload bytes consumed
  /// are unmasked in place. After kMessage, message() may point into `input`: keep it intact
  /// until done with the message.
  Event next(std::span<std::byte>& input) noexcept;

  // After kMessage: the message (valid until the next call).
  bool message_is_text() const noexcept { return message_text_; }
  std::span<const std::byte> message() const noexcept { return out_; }
  // After kPing / kPong: the payload (valid until the next call).
  std::span<const std::byte> control_payload() const noexcept { return out_; }
  // After kClose: the code (1005 when the frame had none) and the reason (valid UTF-8).
  uint16_t close_code() const noexcept { return close_code_; }
  std::string_view close_reason() const noexcept {
    return {reinterpret_cast<const char*>(out_.data()), out_.size()};
  }
  // After kError: the close code to fail the connection with, and what was wrong.
  uint16_t error_code() const noexcept { return error_code_; }
  const char* error_reason() const noexcept { return error_reason_; }

  /// Nothing half-read: no partial frame, no message in progress.
  bool between_messages() const noexcept {
    return header_length_ == 0 && !in_frame_ && !in_message_;
  }
  /// Gives back the assembly buffer (between messages: an idle connection holds none).
  void release_buffers() noexcept;

 private:
  Event fail(uint16_t code, const char* reason) noexcept;
  /// Decodes the header in `bytes` (complete: `needed` bytes) and checks it.
  Event start_frame(const std::byte* bytes) noexcept;
  Event control_frame(std::span<const std::byte> payload) noexcept;
  /// Takes `piece` (unmasked) of the current data frame's payload.
  bool take_payload(std::span<std::byte> piece) noexcept;
  Event finish_message() noexcept;
  static size_t header_size(const std::byte* first_two) noexcept;

  // Laid out without padding: the reader lives in every connection's WebSocket.
  Limits limits_;
  Inflater* inflater_ = nullptr;
  MessageBuffer assembly_;
  // The output of the last event: a message, a control payload or a close reason.
  std::span<const std::byte> out_;
  const char* error_reason_ = "";
  // The frame being read.
  uint64_t remaining_ = 0;      // payload bytes of the current frame not yet consumed
  uint64_t message_bytes_ = 0;  // the message so far (wire bytes; inflated ones are limited apart)
  size_t validated_ = 0;        // inflated text: bytes of assembly_ already checked as UTF-8
  std::byte mask_[4] = {};
  uint32_t mask_phase_ = 0;
  uint16_t close_code_ = 0;
  uint16_t error_code_ = 0;
  Utf8Validator utf8_;
  Opcode opcode_ = Opcode::kContinuation;
  bool fin_ = false;
  bool in_frame_ = false;    // a header was read, its payload is being read
  bool in_message_ = false;  // a fragmented data message is in progress
  bool message_text_ = false;
  bool compressed_ = false;  // the message in progress is compressed
  bool expect_masked_;
  bool done_ = false;           // after kClose or kError: nothing more
  uint8_t header_length_ = 0;   // bytes of a header cut by the end of an input
  uint8_t control_length_ = 0;  // bytes of a control payload cut by the end of an input
  bool assembled_out_ = false;  // the last message was handed out of assembly_
  std::byte header_[kMaxFrameHeaderBytes] = {};
};

}  // namespace ucp::ws::detail

#include "FrameReader.h"

#include <algorithm>
#include <cstring>

#include "ucp/ws/Protocol.h"

#include "Deflate.h"

namespace ucp::ws::detail {

FrameReader::FrameReader(bool expect_masked, Limits limits) noexcept
    : limits_(limits), expect_masked_(expect_masked) {}

FrameReader::~FrameReader() = default;

void FrameReader::release_buffers() noexcept {
  if (between_messages()) assembly_.release();
}

FrameReader::Event FrameReader::fail(uint16_t code, const char* reason) noexcept {
  error_code_ = code;
  error_reason_ = reason;
  done_ = true;
  return Event::kError;
}

size_t FrameReader::header_size(const std::byte* first_two) noexcept {
  const auto b1 = static_cast<uint8_t>(first_two[1]);
  size_t size = 2;
  if ((b1 & 0x7F) == 126) size += 2;
  if ((b1 & 0x7F) == 127) size += 8;
  if ((b1 & 0x80) != 0) size += 4;
  return size;
}

FrameReader::Event FrameReader::start_frame(const std::byte* bytes) noexcept {
  const auto b0 = static_cast<uint8_t>(bytes[0]);
  const auto b1 = static_cast<uint8_t>(bytes[1]);
  const bool fin = (b0 & 0x80) != 0;
  const bool rsv1 = (b0 & 0x40) != 0;
  const uint8_t op = b0 & 0x0F;
  const bool masked = (b1 & 0x80) != 0;
  if ((b0 & 0x30) != 0) return fail(close_code::kProtocolError, "RSV2 or RSV3 set");
  if (op > 0xA || (op > 0x2 && op < 0x8))
    return fail(close_code::kProtocolError, "reserved opcode");
  if (masked != expect_masked_) {
    return fail(close_code::kProtocolError,
                expect_masked_ ? "unmasked frame from a client" : "masked frame from a server");
  }
  uint64_t length = b1 & 0x7F;
  size_t at = 2;
  if (length == 126) {
    length = uint64_t{static_cast<uint8_t>(bytes[2])} << 8 | static_cast<uint8_t>(bytes[3]);
    at = 4;
    if (length < 126) return fail(close_code::kProtocolError, "length not in its shortest form");
  } else if (length == 127) {
    length = 0;
    for (int i = 0; i < 8; ++i) length = length << 8 | static_cast<uint8_t>(bytes[2 + i]);
    at = 10;
    if ((length >> 63) != 0) return fail(close_code::kProtocolError, "length with its top bit set");
    if (length <= 0xFFFF)
      return fail(close_code::kProtocolError, "length not in its shortest form");
  }
  const auto opcode = static_cast<Opcode>(op);
  if (is_control(opcode)) {
    if (!fin) return fail(close_code::kProtocolError, "fragmented control frame");
    if (length > kMaxControlPayload) {
      return fail(close_code::kProtocolError, "control frame above 125 bytes");
    }
    if (rsv1) return fail(close_code::kProtocolError, "RSV1 on a control frame");
    if (opcode == Opcode::kClose && length == 1) {
      return fail(close_code::kProtocolError, "close frame of one byte");
    }
  } else {
    if (opcode == Opcode::kContinuation) {
      if (!in_message_) return fail(close_code::kProtocolError, "continuation without a message");
      if (rsv1) return fail(close_code::kProtocolError, "RSV1 on a continuation frame");
    } else {
      if (in_message_) {
        return fail(close_code::kProtocolError, "new message inside a fragmented one");
      }
      if (rsv1 && inflater_ == nullptr) {
        return fail(close_code::kProtocolError, "RSV1 without permessage-deflate");
      }
      in_message_ = true;
      message_text_ = opcode == Opcode::kText;
      compressed_ = rsv1;
      message_bytes_ = 0;
      validated_ = 0;
      utf8_.reset();
      assembly_.clear();
    }
    // Sizes are refused before a byte of the payload is read.
    if (length > limits_.max_frame_bytes) {
      return fail(close_code::kMessageTooBig, "frame above max_frame_bytes");
    }
    message_bytes_ += length;
    if (message_bytes_ > limits_.max_message_bytes) {
      return fail(close_code::kMessageTooBig, "message above max_message_bytes");
    }
  }
  if (masked) std::memcpy(mask_, bytes + at, 4);
  mask_phase_ = 0;
  remaining_ = length;
  opcode_ = opcode;
  fin_ = fin;
  in_frame_ = true;
  return Event::kNeedMore;  // the header is good: on to the payload
}

FrameReader::Event FrameReader::control_frame(std::span<const std::byte> payload) noexcept {
  in_frame_ = false;
  switch (opcode_) {
    case Opcode::kPing:
      out_ = payload;
      return Event::kPing;
    case Opcode::kPong:
      out_ = payload;
      return Event::kPong;
    default:
      break;
  }
  // Close: nothing is read after it.
  done_ = true;
  if (payload.empty()) {
    close_code_ = close_code::kNoStatus;
    out_ = {};
    return Event::kClose;
  }
  const uint16_t code = static_cast<uint16_t>(uint16_t{static_cast<uint8_t>(payload[0])} << 8 |
                                              static_cast<uint8_t>(payload[1]));
  if (!valid_close_code(code)) return fail(close_code::kProtocolError, "invalid close code");
  if (!Utf8Validator::valid(payload.subspan(2))) {
    return fail(close_code::kInvalidPayload, "close reason is not UTF-8");
  }
  close_code_ = code;
  out_ = payload.subspan(2);
  return Event::kClose;
}

bool FrameReader::take_payload(std::span<std::byte> piece) noexcept {
  if (compressed_) {
    switch (inflater_->inflate(piece, assembly_, limits_.max_message_bytes)) {
      case Inflater::Status::kOk:
        break;
      case Inflater::Status::kTooBig:
        fail(close_code::kMessageTooBig, "inflated message above max_message_bytes");
        return false;
      case Inflater::Status::kInflatesTooFar:
        fail(close_code::kMessageTooBig, "compressed data inflating past max_inflate_ratio");
        return false;
      case Inflater::Status::kBadData:
        fail(close_code::kInvalidPayload, "compressed data that does not inflate");
        return false;
      case Inflater::Status::kNoMemory:
        fail(close_code::kInternalError, "out of memory");
        return false;
    }
    if (message_text_) {
      if (!utf8_.feed(assembly_.bytes().subspan(validated_))) {
        fail(close_code::kInvalidPayload, "text is not UTF-8");
        return false;
      }
      validated_ = assembly_.size();
    }
    return true;
  }
  // Fail fast: the piece is checked before it is kept, however early in the message it is.
  if (message_text_ && !utf8_.feed(piece)) {
    fail(close_code::kInvalidPayload, "text is not UTF-8");
    return false;
  }
  if (!assembly_.append(piece)) {
    fail(close_code::kInternalError, "out of memory");
    return false;
  }
  return true;
}

FrameReader::Event FrameReader::finish_message() noexcept {
  in_message_ = false;
  if (compressed_) {
    switch (inflater_->finish(assembly_, limits_.max_message_bytes)) {
      case Inflater::Status::kOk:
        break;
      case Inflater::Status::kTooBig:
        return fail(close_code::kMessageTooBig, "inflated message above max_message_bytes");
      case Inflater::Status::kInflatesTooFar:
        return fail(close_code::kMessageTooBig, "compressed data inflating past max_inflate_ratio");
      case Inflater::Status::kBadData:
        return fail(close_code::kInvalidPayload, "compressed data that does not inflate");
      case Inflater::Status::kNoMemory:
        return fail(close_code::kInternalError, "out of memory");
    }
    if (message_text_ && !utf8_.feed(assembly_.bytes().subspan(validated_))) {
      return fail(close_code::kInvalidPayload, "text is not UTF-8");
    }
  }
  if (message_text_ && !utf8_.complete()) {
    return fail(close_code::kInvalidPayload, "text ends inside a UTF-8 sequence");
  }
  out_ = assembly_.bytes();
  assembled_out_ = true;
  return Event::kMessage;
}

FrameReader::Event FrameReader::next(std::span<std::byte>& input) noexcept {
  out_ = {};
  if (assembled_out_) {  // the last message was handed out of assembly_: done with it now
    assembled_out_ = false;
    assembly_.clear();
  }
  if (done_) {
    input = {};
    return Event::kNeedMore;
  }
  for (;;) {
    if (!in_frame_) {
      // The header: straight from the input when it is all there, else gathered.
      if (header_length_ == 0 && input.size() >= 2 && input.size() >= header_size(input.data())) {
        const size_t size = header_size(input.data());
        const Event e = start_frame(input.data());
        if (e == Event::kError) return e;
        input = input.subspan(size);
      } else {
        size_t need = header_length_ < 2 ? 2 : header_size(header_);
        while (header_length_ < need) {
          if (input.empty()) return Event::kNeedMore;
          header_[header_length_++] = input.front();
          input = input.subspan(1);
          if (header_length_ == 2) need = header_size(header_);
        }
        header_length_ = 0;
        const Event e = start_frame(header_);
        if (e == Event::kError) return e;
      }
    }
    if (is_control(opcode_)) {
      if (control_length_ == 0 && input.size() >= remaining_) {
        const auto payload = input.first(static_cast<size_t>(remaining_));
        if (expect_masked_) apply_mask(payload, mask_, mask_phase_);
        input = input.subspan(payload.size());
        remaining_ = 0;
        return control_frame(payload);
      }
      // Cut by the end of the input: gathered in the assembly buffer's spare room, behind the
      // message in progress (whose next bytes only come after this frame).
      if (control_length_ == 0 && !assembly_.reserve_more(kMaxControlPayload)) {
        return fail(close_code::kInternalError, "out of memory");
      }
      const size_t n = std::min<size_t>(static_cast<size_t>(remaining_), input.size());
      const auto piece = input.first(n);
      if (expect_masked_) apply_mask(piece, mask_, mask_phase_);
      std::memcpy(assembly_.spare().data() + control_length_, piece.data(), n);
      control_length_ = static_cast<uint8_t>(control_length_ + n);
      remaining_ -= n;
      input = input.subspan(n);
      if (remaining_ > 0) return Event::kNeedMore;
      const auto payload = assembly_.spare().first(control_length_);
      control_length_ = 0;
      return control_frame(payload);
    }
    // A data frame. The common case: a whole message in one frame, all of it in the input.
    // (A first frame whose payload is untouched: remaining_ is still the whole message.)
    if (opcode_ != Opcode::kContinuation && fin_ && !compressed_ && remaining_ == message_bytes_ &&
        input.size() >= remaining_) {
      const auto payload = input.first(static_cast<size_t>(remaining_));
      if (expect_masked_) apply_mask(payload, mask_, mask_phase_);
      input = input.subspan(payload.size());
      remaining_ = 0;
      in_frame_ = false;
      in_message_ = false;
      if (message_text_ && !Utf8Validator::valid(payload)) {
        return fail(close_code::kInvalidPayload, "text is not UTF-8");
      }
      out_ = payload;
      return Event::kMessage;
    }
    const size_t n = std::min<size_t>(static_cast<size_t>(remaining_), input.size());
    if (n > 0) {
      const auto piece = input.first(n);
      if (expect_masked_) apply_mask(piece, mask_, mask_phase_);
      if (!take_payload(piece)) return Event::kError;
      input = input.subspan(n);
      remaining_ -= n;
    }
    if (remaining_ > 0) return Event::kNeedMore;
    in_frame_ = false;
    if (fin_) return finish_message();
  }
}

}  // namespace ucp::ws::detail

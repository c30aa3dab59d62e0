// libFuzzer harness over the WebSocket frame reader without sockets: FrameReader (RFC 6455
// framing rules, the masking rules of both roles, UTF-8 checked as bytes arrive, the limits)
// and the permessage-deflate inflater behind it.
//
// Input: byte 0 chooses the role (server: frames must be masked; client: must not be),
// whether permessage-deflate is on, small or large limits and how the rest is cut into
// pieces; the rest is the byte stream of one connection. Each piece is fed from a heap buffer
// of its own, freed right after the reader let go of it, so a view left pointing into an
// earlier piece is a heap-use-after-free under ASan. Every event is checked against what the
// reader promises: messages within the limit, text that is UTF-8, control payloads of at most
// 125 bytes, close codes one may send (or 1005), and nothing after a close or an error.
//
//   make fuzz            # FUZZ_SECONDS (default 600) for every harness
//   build/fuzz/bin/ws_frame_fuzz -dict=tests/fuzz/ws.dict tests/fuzz/corpus/ws_frame

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>

#include "ucp/ws/Protocol.h"

#include "Deflate.h"
#include "Frame.h"
#include "FrameReader.h"
#include "Utf8Validator.h"

namespace {

using ucp::ws::detail::FrameReader;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "invariant broken: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t control = data[0];
  const bool server = (control & 0x01) != 0;
  const bool deflate = (control & 0x02) != 0;
  const bool small_limits = (control & 0x04) != 0;
  const size_t piece_size = size_t{1} << ((control >> 3) & 0x7);  // 1..128 bytes a read
  const bool whole = (control & 0x40) != 0;                       // or all of it at once
  const FrameReader::Limits limits =
      small_limits ? FrameReader::Limits{300, 200} : FrameReader::Limits{1 << 20, 1 << 20};

  ucp::ws::detail::Inflater inflater(15, (control & 0x80) != 0);
  FrameReader reader(server, limits);
  if (deflate) reader.enable_inflate(&inflater);

  std::span<const uint8_t> stream(data + 1, size - 1);
  bool ended = false;
  while (!stream.empty()) {
    const size_t take = whole ? stream.size() : std::min(piece_size, stream.size());
    auto piece = std::make_unique<std::byte[]>(take);
    std::memcpy(piece.get(), stream.data(), take);
    stream = stream.subspan(take);
    std::span<std::byte> input(piece.get(), take);
    for (;;) {
      const auto event = reader.next(input);
      if (event == FrameReader::Event::kNeedMore) {
        if (!input.empty()) fail("kNeedMore with input left");
        break;
      }
      if (ended) fail("an event after a close or an error");
      switch (event) {
        case FrameReader::Event::kMessage: {
          const auto message = reader.message();
          if (message.size() > limits.max_message_bytes) fail("message above the limit");
          if (reader.message_is_text() && !ucp::ws::detail::Utf8Validator::valid(message)) {
            fail("text message that is not UTF-8");
          }
          volatile std::byte sink{};  // touch every byte: a stale view is caught by ASan
          for (const std::byte b : message) sink = sink ^ b;
          break;
        }
        case FrameReader::Event::kPing:
        case FrameReader::Event::kPong:
          if (reader.control_payload().size() > ucp::ws::detail::kMaxControlPayload) {
            fail("control payload above 125 bytes");
          }
          break;
        case FrameReader::Event::kClose: {
          const uint16_t code = reader.close_code();
          if (code != ucp::ws::close_code::kNoStatus && !ucp::ws::detail::valid_close_code(code)) {
            fail("close code no one may send");
          }
          const auto reason = reader.close_reason();
          if (!ucp::ws::detail::Utf8Validator::valid(
                  std::as_bytes(std::span(reason.data(), reason.size())))) {
            fail("close reason that is not UTF-8");
          }
          ended = true;
          break;
        }
        case FrameReader::Event::kError: {
          const uint16_t code = reader.error_code();
          if (code != 1002 && code != 1007 && code != 1009) fail("error with an unknown code");
          ended = true;
          break;
        }
        case FrameReader::Event::kNeedMore:
          break;
      }
      if (ended) break;
    }
    if (ended) break;
    reader.release_buffers();  // as the connection does between reads
  }
  return 0;
}

// FrameReader: every RFC 6455 rule a server enforces on what it reads, with the close code it
// fails with; messages split at every byte; fragments with control frames between them;
// permessage-deflate (inflating, its limits).

#include "FrameReader.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <zlib.h>

#include "Deflate.h"

namespace ucp::ws::detail {
namespace {

using Event = FrameReader::Event;
using Bytes = std::vector<std::byte>;

constexpr uint8_t kFin = 0x80;
constexpr uint8_t kRsv1 = 0x40;

/// One frame as a client sends it (masked with a fixed key) or a server (unmasked).
/// `length_bytes` forces the extended length form: 0 = shortest, 2 or 8.
Bytes frame(uint8_t first, std::string_view payload, bool masked = true, int length_bytes = 0) {
  Bytes out;
  out.push_back(std::byte{first});
  const uint8_t mask_bit = masked ? 0x80 : 0;
  const uint64_t n = payload.size();
  if (length_bytes == 0) length_bytes = n < 126 ? 0 : (n <= 0xFFFF ? 2 : 8);
  if (length_bytes == 0) {
    out.push_back(std::byte{static_cast<uint8_t>(mask_bit | n)});
  } else if (length_bytes == 2) {
    out.push_back(std::byte{static_cast<uint8_t>(mask_bit | 126)});
    out.push_back(std::byte{static_cast<uint8_t>(n >> 8)});
    out.push_back(std::byte{static_cast<uint8_t>(n)});
  } else {
    out.push_back(std::byte{static_cast<uint8_t>(mask_bit | 127)});
    for (int i = 7; i >= 0; --i) out.push_back(std::byte{static_cast<uint8_t>(n >> (8 * i))});
  }
  const uint8_t key[4] = {0x37, 0xFA, 0x21, 0x3D};
  if (masked) {
    for (uint8_t k : key) out.push_back(std::byte{k});
  }
  for (size_t i = 0; i < payload.size(); ++i) {
    const auto b = static_cast<uint8_t>(payload[i]);
    out.push_back(std::byte{static_cast<uint8_t>(masked ? b ^ key[i % 4] : b)});
  }
  return out;
}

Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string text(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

/// Long payloads as "<N bytes of 'c'>" (or a checksum when they are not one repeated byte), so
/// that a failure prints a readable line.
std::string shown(const std::string& payload) {
  if (payload.size() <= 40) return payload;
  if (payload.find_first_not_of(payload[0]) == std::string::npos) {
    return "<" + std::to_string(payload.size()) + " x '" + payload[0] + "'>";
  }
  uint64_t sum = 1469598103934665603ULL;
  for (char c : payload) sum = (sum ^ static_cast<uint8_t>(c)) * 1099511628211ULL;
  return "<" + std::to_string(payload.size()) + " bytes #" + std::to_string(sum % 100000) + ">";
}

/// What a reader makes of `wire`, fed in pieces of `cut` bytes (0: all at once): one line per
/// event, "text:<payload>", "binary:<payload>", "ping:...", "pong:...", "close:<code>:<reason>",
/// "error:<code>".
std::vector<std::string> read_all(const Bytes& wire, size_t cut = 0, bool server = true,
                                  FrameReader::Limits limits = {}, Inflater* inflater = nullptr) {
  FrameReader reader(server, limits);
  if (inflater != nullptr) reader.enable_inflate(inflater);
  std::vector<std::string> events;
  Bytes copy = wire;
  size_t at = 0;
  do {
    const size_t n = cut == 0 ? copy.size() - at : std::min(cut, copy.size() - at);
    std::span<std::byte> input(copy.data() + at, n);
    at += n;
    for (;;) {
      const Event e = reader.next(input);
      if (e == Event::kNeedMore) break;
      switch (e) {
        case Event::kMessage:
          events.push_back((reader.message_is_text() ? "text:" : "binary:") +
                           shown(text(reader.message())));
          break;
        case Event::kPing:
          events.push_back("ping:" + shown(text(reader.control_payload())));
          break;
        case Event::kPong:
          events.push_back("pong:" + text(reader.control_payload()));
          break;
        case Event::kClose:
          events.push_back("close:" + std::to_string(reader.close_code()) + ":" +
                           std::string(reader.close_reason()));
          break;
        case Event::kError:
          events.push_back("error:" + std::to_string(reader.error_code()));
          return events;
        default:
          break;
      }
    }
  } while (at < copy.size());
  return events;
}

using Events = std::vector<std::string>;

TEST(FrameReader, HandsAWholeFrameOutWithoutCopying) {
  Bytes wire = frame(kFin | 0x1, "Hello");
  FrameReader reader(true, {});
  std::span<std::byte> input(wire);
  ASSERT_EQ(reader.next(input), Event::kMessage);
  EXPECT_EQ(text(reader.message()), "Hello");
  // The message lies in the input, unmasked in place.
  EXPECT_EQ(reinterpret_cast<const void*>(reader.message().data()),
            reinterpret_cast<const void*>(wire.data() + 6));
  EXPECT_TRUE(input.empty());
  EXPECT_TRUE(reader.between_messages());
}

TEST(FrameReader, ReadsTheSameSplitAtEveryByte) {
  const std::string big(70000, 'z');  // 8-byte length form
  const Bytes wire = frame(kFin | 0x1, "first") + frame(0x2, "frag") + frame(kFin | 0x9, "p") +
                     frame(kFin | 0x0, "ment") + frame(kFin | 0x2, std::string(300, 'b')) +
                     frame(kFin | 0x2, big) + frame(kFin | 0xA, "") +
                     frame(kFin | 0x8,
                           "\x03\xE8"
                           "bye");
  const Events expected = {
      "text:first",           "ping:p", "binary:fragment", "binary:" + shown(std::string(300, 'b')),
      "binary:" + shown(big), "pong:",  "close:1000:bye"};
  EXPECT_EQ(read_all(wire), expected);
  for (size_t cut : {1u, 2u, 3u, 5u, 7u, 13u, 100u, 4096u}) {
    EXPECT_EQ(read_all(wire, cut), expected) << "pieces of " << cut;
  }
}

TEST(FrameReader, ReadsUnmaskedFramesAsAClient) {
  const Bytes wire = frame(kFin | 0x1, "from the server", false);
  EXPECT_EQ(read_all(wire, 0, false), (Events{"text:from the server"}));
  EXPECT_EQ(read_all(frame(kFin | 0x1, "masked", true), 0, false), (Events{"error:1002"}));
}

TEST(FrameReader, RefusesAnUnmaskedFrameFromAClient) {
  EXPECT_EQ(read_all(frame(kFin | 0x1, "x", false)), (Events{"error:1002"}));
}

TEST(FrameReader, RefusesReservedBitsAndOpcodes) {
  EXPECT_EQ(read_all(frame(kFin | 0x20 | 0x1, "x")), (Events{"error:1002"}));   // RSV2
  EXPECT_EQ(read_all(frame(kFin | 0x10 | 0x1, "x")), (Events{"error:1002"}));   // RSV3
  EXPECT_EQ(read_all(frame(kFin | kRsv1 | 0x1, "x")), (Events{"error:1002"}));  // no extension
  for (uint8_t op : {3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF}) {
    EXPECT_EQ(read_all(frame(static_cast<uint8_t>(kFin | op), "")), (Events{"error:1002"}))
        << int(op);
  }
}

TEST(FrameReader, RefusesBadControlFrames) {
  EXPECT_EQ(read_all(frame(kFin | 0x9, std::string(126, 'p'))), (Events{"error:1002"}));
  EXPECT_EQ(read_all(frame(kFin | 0x9, std::string(125, 'p'))),
            (Events{"ping:" + shown(std::string(125, 'p'))}));
  EXPECT_EQ(read_all(frame(0x9, "not final")), (Events{"error:1002"}));
  EXPECT_EQ(read_all(frame(kFin | kRsv1 | 0xA, "")), (Events{"error:1002"}));
  // A control frame may come between fragments, also cut into pieces.
  const Bytes wire = frame(0x1, "a") + frame(kFin | 0x9, "ping!") + frame(kFin | 0x0, "b");
  EXPECT_EQ(read_all(wire, 1), (Events{"ping:ping!", "text:ab"}));
}

TEST(FrameReader, RefusesContinuationsOutOfPlace) {
  EXPECT_EQ(read_all(frame(kFin | 0x0, "orphan")), (Events{"error:1002"}));
  EXPECT_EQ(read_all(frame(0x1, "a") + frame(kFin | 0x1, "b")), (Events{"error:1002"}));
  EXPECT_EQ(read_all(frame(0x2, "a") + frame(kFin | 0x2, "b")), (Events{"error:1002"}));
}

TEST(FrameReader, RefusesLengthsNotInTheirShortestForm) {
  EXPECT_EQ(read_all(frame(kFin | 0x2, std::string(100, 'x'), true, 2)), (Events{"error:1002"}));
  EXPECT_EQ(read_all(frame(kFin | 0x2, std::string(1000, 'x'), true, 8)), (Events{"error:1002"}));
  Bytes top_bit = {std::byte{0x82}, std::byte{0xFF}, std::byte{0x80}, std::byte{0}, std::byte{0},
                   std::byte{0},    std::byte{0},    std::byte{0},    std::byte{0}, std::byte{1},
                   std::byte{0},    std::byte{0},    std::byte{0},    std::byte{0}};
  EXPECT_EQ(read_all(top_bit), (Events{"error:1002"}));
}

TEST(FrameReader, ChecksCloseFrames) {
  EXPECT_EQ(read_all(frame(kFin | 0x8, "")), (Events{"close:1005:"}));
  EXPECT_EQ(read_all(frame(kFin | 0x8, "\x03")), (Events{"error:1002"}));
  EXPECT_EQ(read_all(frame(kFin | 0x8, std::string("\x03\xED", 2))),
            (Events{"error:1002"}));  // 1005
  EXPECT_EQ(read_all(frame(kFin | 0x8, std::string("\x03\xEE", 2))),
            (Events{"error:1002"}));  // 1006
  EXPECT_EQ(read_all(frame(kFin | 0x8, std::string("\x03\xE7", 2))),
            (Events{"error:1002"}));  // 999
  EXPECT_EQ(read_all(frame(kFin | 0x8, std::string("\x0B\xB8", 2))), (Events{"close:3000:"}));
  EXPECT_EQ(read_all(frame(kFin | 0x8, "\x03\xE9\xCE\xBA")), (Events{"close:1001:\xCE\xBA"}));
  EXPECT_EQ(read_all(frame(kFin | 0x8, "\x03\xE8\xCE")), (Events{"error:1007"}));  // cut UTF-8
  // Nothing is read after a close frame.
  EXPECT_EQ(read_all(frame(kFin | 0x8, "") + frame(kFin | 0x1, "late")), (Events{"close:1005:"}));
}

TEST(FrameReader, RefusesTextThatIsNotUtf8) {
  EXPECT_EQ(read_all(frame(kFin | 0x1, "ok \xC0\xAF")), (Events{"error:1007"}));
  EXPECT_EQ(read_all(frame(kFin | 0x2, "\xC0\xAF")), (Events{"binary:\xC0\xAF"}));  // binary: any
  // A character split across fragments is fine; a message ending inside one is not.
  EXPECT_EQ(read_all(frame(0x1, "\xCE") + frame(kFin | 0x0, "\xBA")), (Events{"text:\xCE\xBA"}));
  EXPECT_EQ(read_all(frame(kFin | 0x1, "\xCE")), (Events{"error:1007"}));
  EXPECT_EQ(read_all(frame(0x1, "a") + frame(kFin | 0x0, "\xCE")), (Events{"error:1007"}));
}

TEST(FrameReader, FailsFastOnTheFirstBadByte) {
  // A long text frame whose bad byte comes early: the reader fails as soon as the piece holding
  // it arrives, long before the frame (or the message) is complete.
  const std::string payload =
      "valid start \xF4\x90 and then 10000 more bytes" + std::string(10000, 'x');
  const Bytes wire = frame(kFin | 0x1, payload);
  FrameReader reader(true, {});
  Bytes copy = wire;
  std::span<std::byte> input(copy.data(), 30);  // header (8) + 22 bytes: the F4 90 is in there
  EXPECT_EQ(reader.next(input), Event::kError);
  EXPECT_EQ(reader.error_code(), 1007);
  // Also in the first fragment of a fragmented message.
  const Bytes fragments = frame(0x1, "bad \xFF") + frame(kFin | 0x0, "never read");
  FrameReader second(true, {});
  Bytes c2 = fragments;
  std::span<std::byte> first_fragment(c2.data(), 11);
  EXPECT_EQ(second.next(first_fragment), Event::kError);
}

TEST(FrameReader, RefusesSizesBeforeReadingThePayload) {
  FrameReader::Limits limits{.max_message_bytes = 1000, .max_frame_bytes = 600};
  // Only the header of a frame above the limit: refused at once.
  const Bytes big = frame(kFin | 0x2, std::string(601, 'x'));
  EXPECT_EQ(read_all(Bytes(big.begin(), big.begin() + 8), 0, true, limits), (Events{"error:1009"}));
  EXPECT_EQ(read_all(frame(kFin | 0x2, std::string(600, 'x')), 0, true, limits).size(), 1u);
  // Fragments adding up past the message limit.
  const Bytes parts = frame(0x2, std::string(500, 'a')) + frame(0x0, std::string(400, 'b')) +
                      frame(kFin | 0x0, std::string(101, 'c'));
  EXPECT_EQ(read_all(parts, 0, true, limits), (Events{"error:1009"}));
  const Bytes fits = frame(0x2, std::string(500, 'a')) + frame(kFin | 0x0, std::string(500, 'b'));
  EXPECT_EQ(read_all(fits, 0, true, limits),
            (Events{"binary:" + shown(std::string(500, 'a') + std::string(500, 'b'))}));
}

TEST(FrameReader, TakesNothingAfterAnError) {
  FrameReader reader(true, {});
  Bytes wire = frame(kFin | 0x3, "") + frame(kFin | 0x1, "after");
  std::span<std::byte> input(wire);
  EXPECT_EQ(reader.next(input), Event::kError);
  EXPECT_EQ(reader.next(input), Event::kNeedMore);
  EXPECT_TRUE(input.empty());
}

// ---- permessage-deflate ----

/// Raw deflate with a sync flush and without the 00 00 FF FF tail, as RFC 7692 sends it.
std::string raw_deflate(std::string_view in) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
  std::string out(in.size() + 1024, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  ::deflate(&z, Z_SYNC_FLUSH);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  EXPECT_EQ(out.substr(out.size() - 4), std::string("\0\0\xFF\xFF", 4));
  out.resize(out.size() - 4);
  return out;
}

TEST(FrameReader, InflatesCompressedMessages) {
  Inflater inflater(15, false);
  const std::string text_message = "hello hello hello hello, compressed";
  const std::string compressed = raw_deflate(text_message);
  EXPECT_EQ(read_all(frame(kFin | kRsv1 | 0x1, compressed), 0, true, {}, &inflater),
            (Events{"text:" + shown(text_message)}));
  // Fragmented: RSV1 on the first frame only; pieces of 1 byte.
  Inflater second(15, true);
  const std::string payload(5000, 'q');
  const std::string c = raw_deflate(payload);
  const Bytes wire = frame(kRsv1 | 0x2, c.substr(0, c.size() / 2)) +
                     frame(kFin | 0x0, c.substr(c.size() / 2)) +
                     frame(kFin | 0x2, "plain");  // uncompressed messages stay possible
  EXPECT_EQ(read_all(wire, 1, true, {}, &second),
            (Events{"binary:" + shown(payload), "binary:plain"}));
  // RSV1 on a continuation frame is a protocol error.
  Inflater third(15, false);
  EXPECT_EQ(read_all(frame(kRsv1 | 0x2, c) + frame(kFin | kRsv1 | 0x0, ""), 0, true, {}, &third),
            (Events{"error:1002"}));
}

TEST(FrameReader, LimitsWhatInflates) {
  // 1 MiB of zeros compresses to about a kilobyte: the inflated size is what counts.
  const std::string bomb = raw_deflate(std::string(1 << 20, '\0'));
  Inflater inflater(15, false);
  FrameReader::Limits limits{.max_message_bytes = 64 * 1024, .max_frame_bytes = 64 * 1024};
  EXPECT_LT(bomb.size(), limits.max_frame_bytes);
  EXPECT_EQ(read_all(frame(kFin | kRsv1 | 0x2, bomb), 0, true, limits, &inflater),
            (Events{"error:1009"}));
  Inflater garbage_inflater(15, false);
  EXPECT_EQ(read_all(frame(kFin | kRsv1 | 0x2, "\xFF\xFF\xFF\xFF garbage"), 0, true, {},
                     &garbage_inflater),
            (Events{"error:1007"}));
  Inflater text_inflater(15, false);
  EXPECT_EQ(
      read_all(frame(kFin | kRsv1 | 0x1, raw_deflate("bad \xC0\xAF")), 0, true, {}, &text_inflater),
      (Events{"error:1007"}));
}

TEST(FrameReader, KeepsTheWindowAcrossMessagesWithContextTakeover) {
  // One compressor for two messages: the second refers back to the first.
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
  auto next = [&z](std::string_view in) {
    std::string out(in.size() + 256, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    ::deflate(&z, Z_SYNC_FLUSH);
    out.resize(out.size() - z.avail_out - 4);
    return out;
  };
  const std::string message = "a sentence that repeats, a sentence that repeats";
  const std::string first = next(message);
  const std::string second = next(message);  // (sequenced: operands of + are not)
  EXPECT_LT(second.size(), first.size());
  const Bytes wire = frame(kFin | kRsv1 | 0x1, first) + frame(kFin | kRsv1 | 0x1, second);
  deflateEnd(&z);
  Inflater inflater(15, false);
  EXPECT_EQ(read_all(wire, 0, true, {}, &inflater),
            (Events{"text:" + shown(message), "text:" + shown(message)}));
  Inflater inflater3(15, false);
  EXPECT_EQ(read_all(wire, 3, true, {}, &inflater3),
            (Events{"text:" + shown(message), "text:" + shown(message)}));
}

}  // namespace
}  // namespace ucp::ws::detail

// The WebSocket building blocks without I/O: SHA-1 and base64 for the handshake, the UTF-8
// validator, masking and the frame header encoder, close codes.

#include "Frame.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "Base64.h"
#include "Sha1.h"
#include "Utf8Validator.h"

namespace ucp::ws::detail {
namespace {

std::string hex(const Sha1Digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : d) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

std::span<const std::byte> bytes_of(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

TEST(Sha1, MatchesTheFipsVectors) {
  EXPECT_EQ(hex(sha1("")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(hex(sha1("abc")), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(hex(sha1("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  EXPECT_EQ(hex(sha1(std::string(1000000, 'a'))), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
  // Lengths around the padding boundary (55, 56, 63, 64 bytes).
  EXPECT_EQ(hex(sha1(std::string(55, 'x'))), "cef734ba81a024479e09eb5a75b6ddae62e6abf1");
  EXPECT_EQ(hex(sha1(std::string(56, 'x'))), "901305367c259952f4e7af8323f480d59f81335b");
  EXPECT_EQ(hex(sha1(std::string(63, 'x'))), "0ddc4e0cccd9a12850deb5abb0853a4425559fec");
  EXPECT_EQ(hex(sha1(std::string(64, 'x'))), "bb2fa3ee7afb9f54c6dfb5d021f14b1ffe40c163");
  EXPECT_EQ(hex(sha1(std::string(65, 'x'))), "78c741ddc482e4cdf8c474a0876347a0905b6233");
}

TEST(Base64, EncodesWithPadding) {
  auto enc = [](std::string_view s) {
    return base64_encode({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  };
  EXPECT_EQ(enc(""), "");
  EXPECT_EQ(enc("f"), "Zg==");
  EXPECT_EQ(enc("fo"), "Zm8=");
  EXPECT_EQ(enc("foo"), "Zm9v");
  EXPECT_EQ(enc("foobar"), "Zm9vYmFy");
}

TEST(Handshake, AcceptKeyOfTheRfcExample) {
  // RFC 6455 §1.3: key "dGhlIHNhbXBsZSBub25jZQ==" -> "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".
  const auto digest =
      sha1(std::string("dGhlIHNhbXBsZSBub25jZQ==") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
  EXPECT_EQ(base64_encode(digest), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

TEST(Base64, RecognisesAWebSocketKey) {
  EXPECT_TRUE(valid_websocket_key("dGhlIHNhbXBsZSBub25jZQ=="));
  EXPECT_FALSE(valid_websocket_key("dGhlIHNhbXBsZSBub25jZQ="));    // 23 characters
  EXPECT_FALSE(valid_websocket_key("dGhlIHNhbXBsZSBub25jZQ==="));  // 25
  EXPECT_FALSE(valid_websocket_key("dGhlIHNhbXBsZSBub25jZQAA"));   // no padding: 18 bytes
  EXPECT_FALSE(valid_websocket_key("dGhlIHNhbXBsZSBub25j*Q=="));   // not the alphabet
  EXPECT_FALSE(valid_websocket_key(""));
}

TEST(Utf8Validator, AcceptsWellFormedText) {
  EXPECT_TRUE(Utf8Validator::valid(bytes_of("")));
  EXPECT_TRUE(Utf8Validator::valid(bytes_of("plain ASCII, longer than eight bytes")));
  EXPECT_TRUE(Utf8Validator::valid(bytes_of("κόσμε")));
  EXPECT_TRUE(Utf8Validator::valid(bytes_of("\xF0\x90\x80\x80 \xF4\x8F\xBF\xBF \xEF\xBF\xBF")));
  EXPECT_TRUE(Utf8Validator::valid(bytes_of("\xED\x9F\xBF")));  // U+D7FF, just below surrogates
}

TEST(Utf8Validator, RefusesWhatTable37Excludes) {
  for (const char* bad : {
           "\x80",              // stray continuation
           "\xC0\xAF",          // overlong '/'
           "\xC1\xBF",          // overlong
           "\xE0\x80\xAF",      // overlong 3-byte
           "\xED\xA0\x80",      // surrogate U+D800
           "\xED\xBF\xBF",      // surrogate U+DFFF
           "\xF0\x80\x80\xAF",  // overlong 4-byte
           "\xF4\x90\x80\x80",  // above U+10FFFF
           "\xF5\x80\x80\x80",  // F5..FF never appear
           "\xFE", "\xFF",
           "a\xC3",  // ends inside a sequence
       }) {
    EXPECT_FALSE(Utf8Validator::valid(bytes_of(bad))) << bad;
  }
}

TEST(Utf8Validator, FailsAtTheFirstBadByteAcrossPieces) {
  // "κόσμε" then an invalid byte, fed one byte at a time: every prefix before the bad byte is
  // fine (possibly incomplete), the bad byte fails at once.
  const std::string text = "\xCE\xBA\xE1\xBD\xB9\xCF\x83\xCE\xBC\xCE\xB5\xED\xA0\x80more";
  Utf8Validator v;
  size_t failed_at = text.size();
  for (size_t i = 0; i < text.size(); ++i) {
    if (!v.feed(bytes_of(std::string_view(text).substr(i, 1)))) {
      failed_at = i;
      break;
    }
  }
  EXPECT_EQ(failed_at, 12u);  // the A0 after ED: a surrogate, known at its second byte
  // An impossible code point is refused at its second byte, before the sequence completes.
  Utf8Validator w;
  EXPECT_TRUE(w.feed(bytes_of("\xF4")));
  EXPECT_FALSE(w.complete());
  EXPECT_FALSE(w.feed(bytes_of("\x90")));
  EXPECT_TRUE(w.failed());
}

TEST(Frame, MasksInPiecesLikeInOneGo) {
  std::vector<std::byte> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 31 + 7);
  const std::byte key[4] = {std::byte{0x12}, std::byte{0x34}, std::byte{0x56}, std::byte{0x78}};
  std::vector<std::byte> whole = data;
  uint32_t phase = 0;
  apply_mask(whole, key, phase);
  for (size_t i = 0; i < data.size(); ++i) {
    ASSERT_EQ(whole[i], data[i] ^ key[i % 4]) << i;
  }
  for (size_t cut : {1u, 3u, 5u, 9u, 17u}) {
    std::vector<std::byte> pieces = data;
    uint32_t p = 0;
    for (size_t at = 0; at < pieces.size(); at += cut) {
      apply_mask(std::span(pieces).subspan(at, std::min(cut, pieces.size() - at)), key, p);
    }
    EXPECT_EQ(pieces, whole) << "cut " << cut;
  }
}

TEST(Frame, EncodesLengthsInTheirShortestForm) {
  std::byte out[kMaxFrameHeaderBytes];
  EXPECT_EQ(encode_frame_header(out, Opcode::kText, true, false, 125, nullptr), 2u);
  EXPECT_EQ(out[0], std::byte{0x81});
  EXPECT_EQ(out[1], std::byte{125});
  EXPECT_EQ(encode_frame_header(out, Opcode::kBinary, false, true, 126, nullptr), 4u);
  EXPECT_EQ(out[0], std::byte{0x42});
  EXPECT_EQ(out[1], std::byte{126});
  EXPECT_EQ(out[2], std::byte{0});
  EXPECT_EQ(out[3], std::byte{126});
  EXPECT_EQ(encode_frame_header(out, Opcode::kBinary, true, false, 65535, nullptr), 4u);
  EXPECT_EQ(encode_frame_header(out, Opcode::kBinary, true, false, 65536, nullptr), 10u);
  EXPECT_EQ(out[1], std::byte{127});
  EXPECT_EQ(out[7], std::byte{1});
  const std::byte key[4] = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
  EXPECT_EQ(encode_frame_header(out, Opcode::kPing, true, false, 0, key), 6u);
  EXPECT_EQ(out[1], std::byte{0x80});
  EXPECT_EQ(std::memcmp(out + 2, key, 4), 0);
}

TEST(Frame, KnowsWhichCloseCodesMayBeSent) {
  for (uint16_t ok : {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000,
                      3999, 4000, 4999}) {
    EXPECT_TRUE(valid_close_code(ok)) << ok;
  }
  for (uint16_t bad : {0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535}) {
    EXPECT_FALSE(valid_close_code(bad)) << bad;
  }
}

}  // namespace
}  // namespace ucp::ws::detail

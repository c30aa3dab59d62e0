// permessage-deflate on its own (RFC 7692): the Sec-WebSocket-Extensions grammar, both sides of
// the parameter negotiation, the compressor and the inflater with their limits, and what
// connections keep for context takeover. The connection-level cases (frames with RSV1,
// negotiated handshakes, the idle memory) are in FrameReader_test, WebSocket_test and
// WebSocketDeflate_test.

#include "Deflate.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "MessageBuffer.h"

namespace ucp::ws::detail {
namespace {

std::span<const std::byte> bytes_of(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::string text_of(const MessageBuffer& buffer) {
  const auto b = buffer.bytes();
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

/// Some text that compresses, different for each `seed`.
std::string sample(size_t size, int seed) {
  std::string out;
  while (out.size() < size) {
    out += "message " + std::to_string(seed) + " line " + std::to_string(out.size() % 97) + "; ";
  }
  out.resize(size);
  return out;
}

/// Letters that compress only by their alphabet, different for each `seed`.
std::string noise(size_t size, uint32_t seed) {
  std::string out(size, 'a');
  for (char& c : out) {
    seed = seed * 1664525u + 1013904223u;
    c = static_cast<char>('a' + (seed >> 24) % 26);
  }
  return out;
}

/// Inflates one whole compressed message, fed `piece` bytes at a time (0: all at once).
Inflater::Status inflate_message(Inflater& inflater, const MessageBuffer& compressed,
                                 MessageBuffer& out, uint64_t limit, size_t piece = 0) {
  const auto in = compressed.bytes();
  const size_t step = piece == 0 ? in.size() : piece;
  for (size_t at = 0; at < in.size(); at += step) {
    const auto status =
        inflater.inflate(in.subspan(at, std::min(step, in.size() - at)), out, limit);
    if (status != Inflater::Status::kOk) return status;
  }
  return inflater.finish(out, limit);
}

// ---- the header grammar ----

TEST(Deflate, ParsesExtensionListsWithParametersAndQuotedValues) {
  std::vector<Extension> list;
  ASSERT_TRUE(parse_extensions(
      "permessage-deflate; client_max_window_bits; server_max_window_bits=\"10\" ,, "
      "x-other;a=b",
      list));
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "permessage-deflate");
  ASSERT_EQ(list[0].params.size(), 2u);
  EXPECT_EQ(list[0].params[0].name, "client_max_window_bits");
  EXPECT_FALSE(list[0].params[0].has_value);
  EXPECT_EQ(list[0].params[1].name, "server_max_window_bits");
  EXPECT_TRUE(list[0].params[1].has_value);
  EXPECT_EQ(list[0].params[1].value, "10");  // without its quotes
  EXPECT_EQ(list[1].name, "x-other");
  EXPECT_EQ(list[1].params[0].value, "b");
}

TEST(Deflate, RefusesMalformedExtensionLists) {
  for (const char* bad :
       {"permessage-deflate;", "permessage-deflate; a=", "; a", "a b", "permessage-deflate; a=\"1",
        "permessage-deflate; a=\"x\\y\"", "permessage-deflate; a=\"x y\""}) {
    std::vector<Extension> list;
    EXPECT_FALSE(parse_extensions(bad, list)) << bad;
  }
  std::vector<Extension> none;
  EXPECT_TRUE(parse_extensions("", none));
  EXPECT_TRUE(none.empty());
}

// ---- negotiation ----

bool offer_of(std::string_view header, std::vector<Extension>& out) {
  out.clear();
  return parse_extensions(header, out);
}

TEST(Deflate, ServerAcceptsTheFirstOfferItCanAndSaysWhatItAgreed) {
  DeflateOptions options;
  options.no_context_takeover = false;
  options.peer_no_context_takeover = false;
  options.peer_window_bits = 12;
  std::vector<Extension> offers;
  // The first offer has an unknown parameter: declined, the second is taken.
  ASSERT_TRUE(
      offer_of("permessage-deflate; x_unknown, permessage-deflate; client_max_window_bits; "
               "server_max_window_bits=10",
               offers));
  DeflateParams agreed;
  std::string response;
  ASSERT_TRUE(accept_deflate_offer(offers, options, agreed, response));
  EXPECT_EQ(response, "permessage-deflate; server_max_window_bits=10; client_max_window_bits=12");
  EXPECT_FALSE(agreed.server_no_context_takeover);
  EXPECT_FALSE(agreed.client_no_context_takeover);
  EXPECT_EQ(agreed.server_max_window_bits, 10);
  EXPECT_EQ(agreed.client_max_window_bits, 12);
}

TEST(Deflate, ServerDeclinesRepeatedOrInvalidParameters) {
  const DeflateOptions options;
  for (const char* bad :
       {"permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; server_max_window_bits",
        "permessage-deflate; client_max_window_bits=7",
        "permessage-deflate; server_no_context_takeover=1", "x-webkit-deflate-frame"}) {
    std::vector<Extension> offers;
    ASSERT_TRUE(offer_of(bad, offers)) << bad;
    DeflateParams agreed;
    std::string response;
    EXPECT_FALSE(accept_deflate_offer(offers, options, agreed, response)) << bad;
  }
}

TEST(Deflate, ClientOfferAndTheServersAnswerAgreeOnBothSides) {
  DeflateOptions client;
  client.window_bits = 11;
  client.peer_window_bits = 13;
  const std::string offer = deflate_offer(client);
  EXPECT_EQ(offer,
            "permessage-deflate; client_max_window_bits=11; server_max_window_bits=13; "
            "client_no_context_takeover; server_no_context_takeover");
  std::vector<Extension> offers;
  ASSERT_TRUE(offer_of(offer, offers));
  DeflateParams server_side;
  std::string response;
  ASSERT_TRUE(accept_deflate_offer(offers, DeflateOptions{}, server_side, response));
  std::vector<Extension> answer;
  ASSERT_TRUE(offer_of(response, answer));
  ASSERT_EQ(answer.size(), 1u);
  DeflateParams client_side;
  ASSERT_TRUE(accept_deflate_response(answer[0], client, client_side));
  EXPECT_EQ(client_side.server_max_window_bits, server_side.server_max_window_bits);
  EXPECT_EQ(client_side.client_max_window_bits, server_side.client_max_window_bits);
  EXPECT_EQ(client_side.server_no_context_takeover, server_side.server_no_context_takeover);
  EXPECT_EQ(client_side.client_no_context_takeover, server_side.client_no_context_takeover);
  EXPECT_EQ(server_side.server_max_window_bits, 13);
  EXPECT_EQ(server_side.client_max_window_bits, 11);
}

TEST(Deflate, ClientRefusesAnswersItDidNotAskFor) {
  DeflateOptions client;  // asks for server_no_context_takeover
  client.window_bits = 11;
  client.peer_window_bits = 13;
  for (const char* bad : {"permessage-deflate",
                          "permessage-deflate; server_no_context_takeover; "
                          "server_max_window_bits=14",
                          "permessage-deflate; server_no_context_takeover; "
                          "client_max_window_bits=12",
                          "permessage-deflate; server_no_context_takeover; client_max_window_bits",
                          "permessage-deflate; server_no_context_takeover; x=1", "other"}) {
    std::vector<Extension> answer;
    ASSERT_TRUE(offer_of(bad, answer)) << bad;
    DeflateParams agreed;
    EXPECT_FALSE(accept_deflate_response(answer[0], client, agreed)) << bad;
  }
}

// ---- compressing and inflating ----

TEST(Deflate, MessagesSurviveTheRoundTripWithAndWithoutContextTakeover) {
  for (bool reset_each_message : {true, false}) {
    SCOPED_TRACE(reset_each_message ? "no context takeover" : "context takeover");
    Deflater deflater(15, reset_each_message, 6, 8);
    Inflater inflater(15, reset_each_message);
    ASSERT_TRUE(deflater.usable());
    for (int i = 0; i < 4; ++i) {
      const std::string message = sample(3000 + static_cast<size_t>(i) * 500, i % 2);
      MessageBuffer compressed;
      ASSERT_TRUE(deflater.compress(bytes_of(message), compressed));
      EXPECT_LT(compressed.size(), message.size());
      // The trailing 00 00 FF FF is left out on the wire.
      const auto c = compressed.bytes();
      ASSERT_GE(c.size(), 4u);
      EXPECT_NE(std::memcmp(c.data() + c.size() - 4, "\0\0\xFF\xFF", 4), 0);
      MessageBuffer inflated;
      ASSERT_EQ(inflate_message(inflater, compressed, inflated, 1 << 20, i == 1 ? 1 : 0),
                Inflater::Status::kOk);
      EXPECT_EQ(text_of(inflated), message);
    }
  }
}

TEST(Deflate, ContextTakeoverCompressesARepeatedMessageSmaller) {
  const std::string message = noise(4000, 7);
  Deflater fresh(15, true, 6, 8);
  Deflater keeping(15, false, 6, 8);
  MessageBuffer a, b;
  ASSERT_TRUE(fresh.compress(bytes_of(message), a));
  ASSERT_TRUE(fresh.compress(bytes_of(message), b));
  EXPECT_EQ(a.size(), b.size());  // each message alone
  MessageBuffer first, second;
  ASSERT_TRUE(keeping.compress(bytes_of(message), first));
  ASSERT_TRUE(keeping.compress(bytes_of(message), second));
  EXPECT_LT(second.size(), first.size() / 4);  // the window still holds the first
  Inflater inflater(15, false);
  MessageBuffer out1, out2;
  ASSERT_EQ(inflate_message(inflater, first, out1, 1 << 20), Inflater::Status::kOk);
  ASSERT_EQ(inflate_message(inflater, second, out2, 1 << 20), Inflater::Status::kOk);
  EXPECT_EQ(text_of(out2), message);
}

TEST(Deflate, AnEmptyMessageIsOneEmptyBlock) {
  Deflater deflater(15, true, 6, 8);
  MessageBuffer compressed;
  ASSERT_TRUE(deflater.compress({}, compressed));
  ASSERT_GE(compressed.size(), 1u);
  Inflater inflater(15, true);
  MessageBuffer out;
  EXPECT_EQ(inflate_message(inflater, compressed, out, 1024), Inflater::Status::kOk);
  EXPECT_TRUE(out.empty());
}

TEST(Deflate, AWindowOfEightBitsSendsUncompressed) {
  Deflater deflater(8, true, 6, 8);
  EXPECT_FALSE(deflater.usable());
  MessageBuffer out;
  EXPECT_FALSE(deflater.compress(bytes_of("anything"), out));
}

TEST(Deflate, InflatingStopsAtTheLimitTheRatioAndBadData) {
  Deflater deflater(15, true, 9, 8);
  const std::string zeros(200000, '\0');  // inflates about 1000 times
  MessageBuffer bomb;
  ASSERT_TRUE(deflater.compress(bytes_of(zeros), bomb));
  {
    Inflater inflater(15, true);  // no ratio bound: only the size limit
    MessageBuffer out;
    EXPECT_EQ(inflate_message(inflater, bomb, out, 100000), Inflater::Status::kTooBig);
    EXPECT_LE(out.size(), 100001u);
    MessageBuffer whole;
    Inflater again(15, true);
    EXPECT_EQ(inflate_message(again, bomb, whole, zeros.size()), Inflater::Status::kOk);
    EXPECT_EQ(whole.size(), zeros.size());
  }
  {
    // A burst of `limit` passes once; the next such message has earned only 32x its bytes.
    Inflater inflater(15, true, 32);
    MessageBuffer first;
    EXPECT_EQ(inflate_message(inflater, bomb, first, zeros.size()), Inflater::Status::kOk);
    MessageBuffer second;
    EXPECT_EQ(inflate_message(inflater, bomb, second, zeros.size()),
              Inflater::Status::kInflatesTooFar);
  }
  {
    Inflater inflater(15, true);
    MessageBuffer out;
    const std::string garbage = "\xFF\xFF\xFF\xFF not deflate at all";
    EXPECT_EQ(inflater.inflate(bytes_of(garbage), out, 1 << 20), Inflater::Status::kBadData);
  }
}

// ---- what connections keep ----

TEST(Deflate, ContextTakeoverIsCountedPerThreadAndBoundedAtNegotiation) {
  DeflateParams keep_both;
  keep_both.server_max_window_bits = 15;
  keep_both.client_max_window_bits = 15;
  DeflateParams keep_none = keep_both;
  keep_none.server_no_context_takeover = keep_none.client_no_context_takeover = true;
  // zlib's figures: 7 KiB + 2^15 inflating, 2^17 + 2^17 + 6 KiB compressing (mem_level 8).
  const size_t both = context_bytes(keep_both, 8, true);
  EXPECT_EQ(both, 7 * 1024 + (1u << 15) + (1u << 17) + (1u << 17) + 6 * 1024);
  EXPECT_EQ(context_bytes(keep_none, 8, true), 0u);

  DeflateOptions options;
  options.no_context_takeover = false;
  options.peer_no_context_takeover = false;
  const size_t before = kept_context_bytes();
  {
    auto first = std::make_unique<DeflateState>(keep_both, options, true);
    EXPECT_EQ(kept_context_bytes(), before + both);
    EXPECT_EQ(first->context_bytes, both);
    // With the budget nearly spent, the next offer is answered with no context takeover.
    options.max_context_bytes = kept_context_bytes() + both / 2;
    std::vector<Extension> offers;
    ASSERT_TRUE(offer_of("permessage-deflate", offers));
    DeflateParams agreed;
    std::string response;
    ASSERT_TRUE(accept_deflate_offer(offers, options, agreed, response));
    EXPECT_TRUE(agreed.server_no_context_takeover);
    EXPECT_TRUE(agreed.client_no_context_takeover);
    EXPECT_EQ(response,
              "permessage-deflate; server_no_context_takeover; client_no_context_takeover");
  }
  EXPECT_EQ(kept_context_bytes(), before);  // given back with the connection
}

}  // namespace
}  // namespace ucp::ws::detail

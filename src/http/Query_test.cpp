// Query strings and urlencoded forms: decoding ('+', %XX, malformed escapes kept), repeated
// names, order, empty pairs, integers; and that a moved or copied Query still reads right.

#include "ucp/http/Query.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/http/Url.h"

namespace ucp::http {
namespace {

using Views = std::vector<std::string_view>;

TEST(Query, DecodesPlusAndEscapes) {
  const Query query("q=my+room&name=caf%C3%A9&sum=1%2B1%3D2&amp=%26");
  EXPECT_EQ(query.get("q"), "my room");
  EXPECT_EQ(query.get("name"), "caf\xC3\xA9");
  EXPECT_EQ(query.get("sum"), "1+1=2");
  EXPECT_EQ(query.get("amp"), "&");
  EXPECT_EQ(query.size(), 4u);
}

TEST(Query, KeepsRepeatedNamesInOrder) {
  const Query query("tag=a&x=1&tag=b&tag=");
  EXPECT_EQ(query.all("tag"), (Views{"a", "b", ""}));
  EXPECT_EQ(query.get("tag"), "a");  // the first
  std::vector<std::pair<std::string_view, std::string_view>> seen;
  for (const auto [name, value] : query) seen.emplace_back(name, value);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[1].first, "x");
  EXPECT_EQ(seen[3].second, "");
}

TEST(Query, EmptyPairsNamesWithoutValuesAndAbsentNames) {
  const Query query("&&flag&=v&a=1&&");
  EXPECT_EQ(query.size(), 3u);
  EXPECT_TRUE(query.has("flag"));
  EXPECT_EQ(query.find("flag"), std::optional<std::string_view>(""));
  EXPECT_EQ(query.get(""), "v");  // a pair with an empty name, as browsers keep it
  EXPECT_FALSE(query.has("missing"));
  EXPECT_EQ(query.get("missing", "default"), "default");
  EXPECT_TRUE(Query("").empty());
  EXPECT_TRUE(Query("&").empty());
}

TEST(Query, MalformedEscapesStayAsTheyAre) {
  // The WHATWG form parser: a '%' that starts no valid escape is an ordinary byte.
  const Query query("a=%zz&b=100%&c=%4&d=%%41&e=%00");
  EXPECT_EQ(query.get("a"), "%zz");
  EXPECT_EQ(query.get("b"), "100%");
  EXPECT_EQ(query.get("c"), "%4");
  EXPECT_EQ(query.get("d"), "%A");
  EXPECT_EQ(query.get("e"), std::string_view("\0", 1));  // a byte like any other here
}

TEST(Query, OnlyTheFirstEqualsSplits) {
  const Query query("expr=a=b&k%3Dx=v");
  EXPECT_EQ(query.get("expr"), "a=b");
  EXPECT_EQ(query.get("k=x"), "v");  // an encoded '=' belongs to the name
}

TEST(Query, Integers) {
  const Query query("page=2&neg=-12&big=99999999999999999999&word=two&empty=&plus=%2B3");
  EXPECT_EQ(query.get_int("page"), 2);
  EXPECT_EQ(query.get_int("neg"), -12);
  EXPECT_EQ(query.get_int("big"), std::nullopt);  // out of range
  EXPECT_EQ(query.get_int("word"), std::nullopt);
  EXPECT_EQ(query.get_int("empty"), std::nullopt);
  EXPECT_EQ(query.get_int("plus"), std::nullopt);  // "+3" is not a plain integer
  EXPECT_EQ(query.get_int("missing").value_or(1), 1);
}

TEST(Query, CopiesAndMovesKeepTheirValues) {
  // Short values sit in the string's inline buffer, which a move copies: offsets survive it.
  Query original("a=1&b=2");
  Query copy = original;
  Query moved = std::move(original);
  EXPECT_EQ(copy.get("b"), "2");
  EXPECT_EQ(moved.get("a"), "1");
  std::vector<Query> many;
  for (int i = 0; i < 20; ++i) many.emplace_back("k=" + std::to_string(i));
  EXPECT_EQ(many[0].get("k"), "0");
  EXPECT_EQ(many[19].get("k"), "19");
}

TEST(FormDecode, AppendsDecodedBytes) {
  std::string out = "x";
  form_decode("a+b%20c%zz", out);
  EXPECT_EQ(out, "xa b c%zz");
}

}  // namespace
}  // namespace ucp::http

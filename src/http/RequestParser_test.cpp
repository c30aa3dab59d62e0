// RequestParser: framing, the RFC 9112 checks on top of llhttp, limits, and requests that
// arrive in pieces (split at every byte, with the input released between pieces).

#include "RequestParser.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ucp::http::detail {
namespace {

/// What one request parsed into, copied out so that it outlives the input.
struct Parsed {
  std::string method;
  std::string target;
  std::string path;
  std::string query;
  std::string host;
  std::string headers;   // "name=value;" for each header field
  std::string trailers;  // likewise
  std::string body;
  bool keep_alive = true;
  int minor = 1;
  int error = 0;  // the status of a kError

  bool operator==(const Parsed&) const = default;
};

std::ostream& operator<<(std::ostream& out, const Parsed& p) {
  return out << "{" << p.method << " " << p.target << " err=" << p.error << " hdr=" << p.headers
             << " body=" << p.body << " keep=" << p.keep_alive << "}";
}

Parsed copy_out(const Request& r) {
  Parsed p;
  p.method = r.method_name();
  p.target = r.target();
  p.path = r.path();
  p.query = r.query();
  p.host = r.host();
  for (const Header& h : r.headers())
    p.headers += std::string(h.name) + "=" + std::string(h.value) + ";";
  for (const Header& h : r.trailers())
    p.trailers += std::string(h.name) + "=" + std::string(h.value) + ";";
  p.body = r.body();
  p.keep_alive = r.keep_alive();
  p.minor = r.version_minor();
  return p;
}

/// Feeds `pieces` one after the other, each in a buffer of its own that is overwritten
/// after detach_input() (as a released receive buffer would be), and collects every
/// request and the error, if any.
std::vector<Parsed> parse_pieces(const std::vector<std::string>& pieces, ParserLimits limits = {}) {
  RequestParser parser(limits);
  std::vector<Parsed> out;
  for (const std::string& piece : pieces) {
    auto buffer = std::make_unique<char[]>(piece.size() + 1);
    std::copy(piece.begin(), piece.end(), buffer.get());
    std::string_view input(buffer.get(), piece.size());
    for (;;) {
      const auto event = parser.feed(input);
      if (event == RequestParser::Event::kNeedMore) break;
      if (event == RequestParser::Event::kError) {
        Parsed p;
        p.error = parser.error_status();
        out.push_back(p);
        return out;
      }
      out.push_back(copy_out(parser.request()));
      parser.next();
    }
    EXPECT_TRUE(parser.detach_input());
    std::fill(buffer.get(), buffer.get() + piece.size(), '#');  // the released buffer
  }
  return out;
}

std::vector<Parsed> parse(const std::string& text, ParserLimits limits = {}) {
  return parse_pieces({text}, limits);
}

int error_of(const std::string& text, ParserLimits limits = {}) {
  auto all = parse(text, limits);
  return all.empty() ? 0 : all.back().error;
}

TEST(RequestParser, ParsesARequestAsViewsIntoTheInput) {
  const std::string text =
      "GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: example.com\r\nX-Trail:  v  \r\nAccept: */*\r\n\r\n";
  RequestParser parser(ParserLimits{});
  std::string_view input(text);
  ASSERT_EQ(parser.feed(input), RequestParser::Event::kRequest);
  EXPECT_TRUE(input.empty());
  const Request& r = parser.request();
  EXPECT_EQ(r.method(), Method::kGet);
  EXPECT_EQ(r.target(), "/a/b?x=1&y=2");
  EXPECT_EQ(r.path(), "/a/b");
  EXPECT_EQ(r.query(), "x=1&y=2");
  EXPECT_EQ(r.host(), "example.com");
  EXPECT_EQ(r.header("x-trail"), "v");  // case-insensitive; whitespace trimmed
  EXPECT_EQ(r.header("ACCEPT"), "*/*");
  EXPECT_FALSE(r.has_header("Cookie"));
  EXPECT_TRUE(r.keep_alive());
  // No copy: the strings point into the input.
  EXPECT_GE(r.target().data(), text.data());
  EXPECT_LT(r.target().data(), text.data() + text.size());
  EXPECT_EQ(parser.held_bytes(), 0u);
}

TEST(RequestParser, AnswersPipelinedRequestsOneByOne) {
  const std::string one = "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n";
  const std::string two = "POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
  const std::string three = "GET /3 HTTP/1.1\r\nHost: a\r\n\r\n";
  auto all = parse(one + two + three);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].target, "/1");
  EXPECT_EQ(all[1].target, "/2");
  EXPECT_EQ(all[1].body, "hello");
  EXPECT_EQ(all[2].target, "/3");
}

TEST(RequestParser, IgnoresEmptyLinesBeforeARequestLine) {
  auto all =
      parse("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].error, 0);
  EXPECT_EQ(all[1].target, "/2");
}

// Pipelined requests of every kind, split into two inputs at every offset and into
// one-byte inputs: the same requests come out.
TEST(RequestParser, GivesTheSameRequestsWhereverTheInputIsSplit) {
  const std::string text =
      "GET /first?q=1 HTTP/1.1\r\nHost: a.example\r\nX-Long-Header-Name: some value here\r\n\r\n"
      "POST /form HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\n"
      "hello world"
      "POST /chunks HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=\"v\"\r\nhello\r\n6\r\n world\r\n0\r\nX-Checksum: 42\r\n\r\n"
      "GET /last HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
  const auto whole = parse(text);
  ASSERT_EQ(whole.size(), 4u);
  EXPECT_EQ(whole[1].body, "hello world");
  EXPECT_EQ(whole[2].body, "hello world");
  EXPECT_EQ(whole[2].trailers, "X-Checksum=42;");
  EXPECT_TRUE(whole[3].keep_alive);
  for (size_t split = 1; split < text.size(); ++split) {
    const auto pieces = parse_pieces({text.substr(0, split), text.substr(split)});
    ASSERT_EQ(pieces, whole) << "split at " << split;
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  EXPECT_EQ(parse_pieces(bytes), whole);
}

TEST(RequestParser, RefusesObsFoldEvenWhenSplitAcrossInputs) {
  const std::string text = "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\r\n b\r\n\r\n";
  EXPECT_EQ(error_of(text), 400);
  for (size_t split = 1; split < text.size(); ++split) {
    const auto pieces = parse_pieces({text.substr(0, split), text.substr(split)});
    ASSERT_FALSE(pieces.empty());
    EXPECT_EQ(pieces.back().error, 400) << "split at " << split;
  }
}

/// The status of the last request parsed from `pieces` (0: a request, no error).
int last_error(const std::vector<std::string>& pieces) {
  const auto all = parse_pieces(pieces);
  return all.empty() ? -1 : all.back().error;
}

// llhttp skips a fold that follows an empty value without a callback, so the folded text
// became the field's value: "Transfer-Encoding:\r\n chunked" made the body chunked for us and
// invalid for a front end that refuses the fold (or reads " chunked" as a field of its own).
TEST(RequestParser, RefusesObsFoldAfterAnEmptyValueInEverySpelling) {
  const std::vector<std::string> folds = {":\r\n ", ":\r\n\t", ": \r\n ", ":\t\r\n\t", ":  \r\n  "};
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"Transfer-Encoding", "chunked"}, {"Content-Length", "3"}, {"Host", "a"},
      {"Connection", "close"},          {"X-Any", "value"},
  };
  for (const auto& [name, value] : fields) {
    for (const std::string& fold : folds) {
      std::string head = "POST / HTTP/1.1\r\n";
      if (name != "Host") head += "Host: a\r\n";
      const std::string text = head + name + fold + value + "\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
      EXPECT_EQ(error_of(text), 400) << text;
      for (size_t split = 1; split < text.size(); ++split) {
        ASSERT_EQ(last_error({text.substr(0, split), text.substr(split)}), 400)
            << text << " split at " << split;
      }
    }
  }
  // A fold whose continuation is only whitespace is a fold too.
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\n \r\n\r\n"), 400);
  // Trailers, folded the same way.
  const std::string chunked =
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n";
  EXPECT_EQ(error_of(chunked + "T:\r\n x\r\n\r\n"), 400);
  EXPECT_EQ(error_of(chunked + "T: \r\n\tx\r\n\r\n"), 400);
  const std::string trailer_fold = chunked + "T:\r\n x\r\n\r\n";
  for (size_t split = 1; split < trailer_fold.size(); ++split) {
    ASSERT_EQ(last_error({trailer_fold.substr(0, split), trailer_fold.substr(split)}), 400)
        << "split at " << split;
  }
  std::vector<std::string> bytes;
  for (char c : trailer_fold) bytes.emplace_back(1, c);
  EXPECT_EQ(last_error(bytes), 400);
  // Empty values that are not folds stay valid, before another field, the end of the head
  // (a body that starts with a space included) and in trailers.
  auto empty = parse("POST / HTTP/1.1\r\nHost: a\r\nX-E:\r\nX-F: \r\nContent-Length: 2\r\n\r\n x");
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_EQ(empty[0].error, 0);
  EXPECT_EQ(empty[0].headers, "Host=a;X-E=;X-F=;Content-Length=2;");
  EXPECT_EQ(empty[0].body, " x");
  auto last = parse("GET / HTTP/1.1\r\nHost: a\r\nX-E:\r\n\r\n");
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].error, 0);
  auto trailer = parse(chunked + "T:\r\nU: u\r\n\r\n");
  ASSERT_EQ(trailer.size(), 1u);
  EXPECT_EQ(trailer[0].error, 0);
  EXPECT_EQ(trailer[0].trailers, "T=;U=u;");
}

// RFC 9112 §5.1: field-name = token, one or more characters.
TEST(RequestParser, RefusesAnEmptyFieldName) {
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\n: 1\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: a\r\n:\r\n\r\n"), 400);
  EXPECT_EQ(error_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "0\r\n: x\r\n\r\n"),
            400);
  const std::string text = "GET / HTTP/1.1\r\nHost: a\r\n: 1\r\n\r\n";
  for (size_t split = 1; split < text.size(); ++split) {
    ASSERT_EQ(last_error({text.substr(0, split), text.substr(split)}), 400) << split;
  }
}

// RFC 9110 §2.5: a request with a higher minor version than ours is processed as the highest
// we speak.
TEST(RequestParser, ProcessesHigherHttp1MinorVersionsAsHttp11) {
  for (const char* version : {"1.2", "1.9"}) {
    auto all = parse(std::string("GET /x HTTP/") + version + "\r\nHost: a\r\n\r\n");
    ASSERT_EQ(all.size(), 1u) << version;
    EXPECT_EQ(all[0].error, 0) << version;
    EXPECT_EQ(all[0].minor, 1) << version;
    EXPECT_TRUE(all[0].keep_alive) << version;
  }
  EXPECT_EQ(error_of("GET / HTTP/1.2\r\n\r\n"), 400);  // an HTTP/1.1 request needs Host
  EXPECT_EQ(error_of("GET / HTTP/1.10\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/0.9\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/3.0\r\nHost: a\r\n\r\n"), 505);
}

// An HTTP/0.9 request line ends with its CRLF: refused then, not after a header block that
// never comes (the client waited for the header timeout and a 408).
TEST(RequestParser, RefusesAnHttp09RequestLineAtItsEnd) {
  for (const std::vector<std::string>& pieces :
       std::vector<std::vector<std::string>>{{"GET /\r\n"},
                                             {"GET /\n"},
                                             {"GET /", "\r\n"},
                                             {"GET /", "\n"},
                                             {"GET /\r", "\n"},
                                             {"GET /a?b\r\n"},
                                             {"G", "E", "T", " ", "/", "\n", "H"}}) {
    RequestParser parser(ParserLimits{});
    RequestParser::Event event = RequestParser::Event::kNeedMore;
    std::vector<std::string> kept = pieces;
    for (std::string& piece : kept) {
      std::string_view input(piece);
      event = parser.feed(input);
      if (event == RequestParser::Event::kError) break;
      ASSERT_TRUE(parser.detach_input());
    }
    EXPECT_EQ(event, RequestParser::Event::kError) << pieces.front();
    EXPECT_EQ(parser.error_status(), 400);
  }
}

// Chunk extensions (RFC 9112 §7.1.1): BWS around ';' and '=', token or quoted-string values
// with quoted-pairs, several per chunk. llhttp 8.1 refuses some valid ones and accepts an
// empty name; the layer reads the grammar itself.
TEST(RequestParser, ReadsTheChunkExtensionGrammar) {
  const std::string head = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::vector<std::string> valid = {
      "3 ; a=b",      "3;a=\"x\\\"y\"",      "3;a=b;c=\"d e\"", "3\t;\ta\t=\tb",
      "3;a;b=c;d",    "3 ;a ;b= c",          "3;a=\"\"",        "3;a=\"\\\\\"",
      "3;n=\"\x80\"", "3;!#$%&'*+-.^_`|~=1", "3;a=\"q;r=s\"",   "003;a=b"};
  for (const std::string& line : valid) {
    const std::string text = head + line + "\r\nabc\r\n0;z=1\r\n\r\n";
    auto all = parse(text);
    ASSERT_EQ(all.size(), 1u) << line;
    EXPECT_EQ(all[0].error, 0) << line;
    EXPECT_EQ(all[0].body, "abc") << line;
    for (size_t split = 1; split < text.size(); ++split) {
      const auto pieces = parse_pieces({text.substr(0, split), text.substr(split)});
      ASSERT_EQ(pieces.size(), 1u) << line << " split at " << split;
      ASSERT_EQ(pieces[0].body, "abc") << line << " split at " << split;
    }
  }
  const std::vector<std::string> invalid = {
      "3;=x",   "3;",      "3; ",          "3;a=",           "3;a=\"x",
      "3;a b",  "3;a=b c", "3;a=\"\x01\"", "3;a=\"x\"y",     "3;a=\"\\\x01\"",
      "3 ",     "3;a ",    "3;a=b ",       "3;;a",           "3;a==b",
      "3;a=b;", "3 x",     "3;a\"b\"",     "3;a=\"x\"\"y\"", "3;a=\x80"};
  for (const std::string& line : invalid) {
    const std::string text = head + line + "\r\nabc\r\n0\r\n\r\n";
    EXPECT_EQ(error_of(text), 400) << line;
    for (size_t split = 1; split < text.size(); ++split) {
      ASSERT_EQ(last_error({text.substr(0, split), text.substr(split)}), 400)
          << line << " split at " << split;
    }
  }
  // Extensions on the last chunk follow the same grammar.
  EXPECT_EQ(error_of(head + "0;=x\r\n\r\n"), 400);
  auto last = parse(head + "0 ; a = \"b\"\r\n\r\n");
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].error, 0);
}

TEST(RequestParser, RequiresExactlyOneValidHostInHttp11) {
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"), 0);
  EXPECT_EQ(error_of("GET / HTTP/1.0\r\n\r\n"), 0);           // HTTP/1.0 may omit it
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost:\r\n\r\n"), 0);  // empty is allowed (§3.2)
}

TEST(RequestParser, ReadsConnectionAsATokenList) {
  auto keep = [](const std::string& head) {
    auto all = parse(head + "\r\n");
    EXPECT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].error, 0) << head;
    return all[0].keep_alive;
  };
  EXPECT_TRUE(keep("GET / HTTP/1.1\r\nHost: a\r\n"));
  EXPECT_FALSE(keep("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"));
  EXPECT_FALSE(keep("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, CLOSE\r\n"));
  EXPECT_FALSE(keep("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo\r\nConnection: bar,close\r\n"));
  EXPECT_TRUE(keep("GET / HTTP/1.1\r\nHost: a\r\nConnection: closed\r\n"));
  EXPECT_FALSE(keep("GET / HTTP/1.0\r\n"));
  EXPECT_TRUE(keep("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n"));
  EXPECT_FALSE(keep("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n"));
}

TEST(RequestParser, ClosesAfterAnHttp10RequestWithTransferEncoding) {
  auto all = parse(
      "POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\n0\r\n\r\n");
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].body, "abc");
  EXPECT_FALSE(all[0].keep_alive);
}

TEST(RequestParser, ReadsRequestTargetForms) {
  auto abs = parse("GET http://other.example:8080/p/q?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_EQ(abs.size(), 1u);
  EXPECT_EQ(abs[0].path, "/p/q");
  EXPECT_EQ(abs[0].query, "x=1");
  EXPECT_EQ(abs[0].host, "other.example:8080");  // the target's authority wins (§3.2.2)
  auto bare = parse("GET http://h HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_EQ(bare.size(), 1u);
  EXPECT_EQ(bare[0].path, "/");
  auto star = parse("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_EQ(star.size(), 1u);
  EXPECT_EQ(star[0].path, "*");
  EXPECT_EQ(error_of("GET * HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
}

TEST(RequestParser, RefusesControlBytesAndNulInTheTarget) {
  for (const char c : {'\0', '\x01', '\t', '\x1f', '\x7f'}) {
    std::string text = "GET /a";
    text += c;
    text += "b HTTP/1.1\r\nHost: a\r\n\r\n";
    EXPECT_EQ(error_of(text), 400) << static_cast<int>(c);
  }
}

TEST(RequestParser, MapsVersionsAndMethods) {
  EXPECT_EQ(error_of("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 505);
  EXPECT_EQ(error_of("GET / HTTP/3.1\r\nHost: a\r\n\r\n"), 505);
  EXPECT_EQ(error_of("GET / HTTP/1.32\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET /\r\nHost: a\r\n\r\n"), 400);  // no version (HTTP/0.9)
  EXPECT_EQ(error_of("G ET / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(error_of("CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n"), 501);
  auto other = parse("PROPFIND /x HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].method, "PROPFIND");
}

TEST(RequestParser, AnswersAnUpgradeRequestAsPlainHttpAndGoesOn) {
  auto all = parse(
      "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
      "GET /next HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].target, "/next");
}

TEST(RequestParser, HandlesExpect) {
  RequestParser parser(ParserLimits{});
  std::string head =
      "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n";
  std::string_view input(head);
  EXPECT_EQ(parser.feed(input), RequestParser::Event::kNeedMore);
  EXPECT_TRUE(parser.in_body());
  EXPECT_TRUE(parser.wants_continue());
  parser.continue_sent();
  EXPECT_FALSE(parser.wants_continue());
  EXPECT_EQ(error_of("POST / HTTP/1.1\r\nHost: a\r\nExpect: teapot\r\nContent-Length: 1\r\n\r\nx"),
            417);
  // No body, nothing to continue with.
  RequestParser empty(ParserLimits{});
  std::string get = "GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n";
  std::string_view get_input(get);
  EXPECT_EQ(empty.feed(get_input), RequestParser::Event::kRequest);
  EXPECT_FALSE(empty.wants_continue());
}

TEST(RequestParser, DechunksBodiesWithExtensionsAndTrailers) {
  auto all = parse(
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3;name=\"quoted value\"\r\nabc\r\n4;flag\r\ndefg\r\n0\r\nT1: one\r\nT2: two\r\n\r\n");
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].error, 0);
  EXPECT_EQ(all[0].body, "abcdefg");
  EXPECT_EQ(all[0].trailers, "T1=one;T2=two;");
}

// The framing vectors every HTTP/1.1 server must refuse (400), with the llhttp-accepted ones
// (empty or non-chunked Transfer-Encoding, obs-fold...) caught by our own checks.
TEST(RequestParser, RefusesAmbiguousFraming) {
  const std::string post = "POST / HTTP/1.1\r\nHost: a\r\n";
  const std::vector<std::pair<const char*, std::string>> vectors = {
      {"CL+TE", post + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
      {"TE+CL", post + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"},
      {"TE pigeons", post + "Transfer-Encoding: pigeons\r\n\r\n"},
      {"TE identity", post + "Transfer-Encoding: identity\r\n\r\nabc"},
      {"TE empty", post + "Transfer-Encoding:\r\n\r\nabc"},
      {"TE gzip, chunked", post + "Transfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
      {"TE chunked, gzip", post + "Transfer-Encoding: chunked, gzip\r\n\r\n"},
      {"TE twice", post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"},
      {"TE obfuscated", post + "Transfer-Encoding: ch\xe2\x80\x93nked\r\n\r\n"},
      {"TE with space before colon", post + "Transfer-Encoding : chunked\r\n\r\n"},
      {"duplicate CL", post + "Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc"},
      {"differing CL", post + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"},
      {"CL list", post + "Content-Length: 3, 3\r\n\r\nabc"},
      {"CL x", post + "Content-Length: x\r\n\r\n"},
      {"CL +5", post + "Content-Length: +5\r\n\r\nhello"},
      {"CL -1", post + "Content-Length: -1\r\n\r\n"},
      {"CL 0x10", post + "Content-Length: 0x10\r\n\r\n"},
      {"CL 1_0", post + "Content-Length: 1_0\r\n\r\n"},
      {"CL overflow", post + "Content-Length: 99999999999999999999999\r\n\r\n"},
      {"chunk 123x", post + "Transfer-Encoding: chunked\r\n\r\n3x\r\nabc\r\n0\r\n\r\n"},
      {"chunk Z", post + "Transfer-Encoding: chunked\r\n\r\nZ\r\n"},
      {"chunk 2 foo", post + "Transfer-Encoding: chunked\r\n\r\n2 foo\r\nab\r\n0\r\n\r\n"},
      {"chunk 0_2e", post + "Transfer-Encoding: chunked\r\n\r\n0_2e\r\n"},
      {"chunk > 16 hex digits", post + "Transfer-Encoding: chunked\r\n\r\n10000000000000003\r\n"},
      {"chunk bare LF", post + "Transfer-Encoding: chunked\r\n\r\n3\nabc\n0\n\n"},
      {"CR in chunk extension", post + "Transfer-Encoding: chunked\r\n\r\n3;a=b\rc\r\nabc\r\n"},
      {"chunk data too long", post + "Transfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n"},
      {"bare LF", "GET / HTTP/1.1\nHost: a\n\n"},
      {"bare CR", "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n"},
      {"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n"},
      {"space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n"},
      {"space before first header", "GET / HTTP/1.1\r\n Host: a\r\n\r\n"},
      {"NUL in value", std::string("GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n", 29)},
      {"LF in value", "GET / HTTP/1.1\r\nHost: a\r\nX: a\nb\r\n\r\n"},
      {"8-bit header name", "GET / HTTP/1.1\r\nHost: a\r\nX\x80: a\r\n\r\n"},
      {"header without colon", "GET / HTTP/1.1\r\nHost a\r\n\r\n"},
      {"junk method", "G(T / HTTP/1.1\r\nHost: a\r\n\r\n"},
  };
  for (const auto& [name, text] : vectors) {
    EXPECT_EQ(error_of(text), 400) << name;
  }
}

TEST(RequestParser, EnforcesTheLimitsPerRequest) {
  ParserLimits limits;
  limits.max_request_line_bytes = 64;
  limits.max_header_bytes = 128;
  limits.max_body_bytes = 16;
  EXPECT_EQ(error_of("GET /" + std::string(60, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n", limits), 414);
  EXPECT_EQ(error_of("GET /" + std::string(1000, 'a'), limits), 414);  // no end in sight
  EXPECT_EQ(
      error_of("GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(130, 'b') + "\r\n\r\n", limits),
      431);
  EXPECT_EQ(error_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 17\r\n\r\n", limits), 413);
  EXPECT_EQ(error_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "9\r\n123456789\r\n9\r\n123456789\r\n0\r\n\r\n",
                     limits),
            413);
  std::string many = "GET / HTTP/1.1\r\nHost: a\r\n";
  for (size_t i = 0; i < Request::kMaxHeaders; ++i) many += "X: v\r\n";
  EXPECT_EQ(error_of(many + "\r\n"), 431);
  // Many small pipelined requests, together far above every limit, are each within them.
  std::string pipeline;
  for (int i = 0; i < 100; ++i)
    pipeline += "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 8\r\n\r\n12345678";
  auto all = parse(pipeline, limits);
  ASSERT_EQ(all.size(), 100u);
  EXPECT_EQ(all.back().error, 0);
  // A refused request comes after the valid ones before it.
  auto mixed = parse("GET /ok HTTP/1.1\r\nHost: a\r\n\r\nGET /" + std::string(100, 'a') +
                         " HTTP/1.1\r\nHost: a\r\n\r\n",
                     limits);
  ASSERT_EQ(mixed.size(), 2u);
  EXPECT_EQ(mixed[0].target, "/ok");
  EXPECT_EQ(mixed[1].error, 414);
}

TEST(RequestParser, RefusesChunkExtensionAndFramingFloods) {
  std::string big_extension =
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1;x=";
  big_extension += std::string(RequestParser::kMaxChunkExtensionBytes + 10, 'e');
  EXPECT_EQ(error_of(big_extension), 400);
  std::string tiny = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 20000; ++i) tiny += "1\r\na\r\n";
  EXPECT_EQ(error_of(tiny), 400);
  std::string zeros = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  std::vector<std::string> pieces = {zeros};
  for (int i = 0; i < 100; ++i) pieces.push_back(std::string(4096, '0'));
  auto all = parse_pieces(pieces);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.back().error, 400);
}

TEST(RequestParser, KeepsOnlyWhatAnUnfinishedRequestNeeds) {
  RequestParser parser(ParserLimits{});
  std::string first = "GET /x HTTP/1.1\r\nHost: a\r\nX-Part: abc";
  std::string_view input(first);
  ASSERT_EQ(parser.feed(input), RequestParser::Event::kNeedMore);
  ASSERT_TRUE(parser.detach_input());
  EXPECT_GT(parser.held_bytes(), 0u);
  EXPECT_LE(parser.held_bytes(), 1024u);
  first.assign(first.size(), '#');
  std::string second = "def\r\n\r\n";
  std::string_view rest(second);
  ASSERT_EQ(parser.feed(rest), RequestParser::Event::kRequest);
  EXPECT_EQ(parser.request().header("x-part"), "abcdef");
  EXPECT_EQ(parser.request().target(), "/x");
}

TEST(RequestParser, StopsAfterAnError) {
  RequestParser parser(ParserLimits{});
  std::string bad = "GET / HTTP/1.1\r\nHost a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
  std::string_view input(bad);
  EXPECT_EQ(parser.feed(input), RequestParser::Event::kError);
  std::string good = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
  std::string_view more(good);
  EXPECT_EQ(parser.feed(more), RequestParser::Event::kError);
}

// ---- streaming ----

/// Like parse_pieces, in streaming mode: the head is copied out at kHead (and checked again
/// at kRequest, after the inputs it came in were released), the body gathered from the pieces.
std::vector<Parsed> stream_pieces(const std::vector<std::string>& pieces,
                                  ParserLimits limits = {}) {
  RequestParser parser(limits);
  parser.set_streaming(true);
  std::vector<Parsed> out;
  Parsed current;
  bool in_request = false;
  for (const std::string& piece : pieces) {
    auto buffer = std::make_unique<char[]>(piece.size() + 1);
    std::copy(piece.begin(), piece.end(), buffer.get());
    std::string_view input(buffer.get(), piece.size());
    for (;;) {
      const auto event = parser.feed(input);
      if (event == RequestParser::Event::kNeedMore) break;
      if (event == RequestParser::Event::kError) {
        Parsed p;
        p.error = parser.error_status();
        out.push_back(p);
        return out;
      }
      if (event == RequestParser::Event::kHead) {
        EXPECT_FALSE(in_request);
        current = copy_out(parser.request());
        in_request = true;
      } else if (event == RequestParser::Event::kBody) {
        EXPECT_TRUE(in_request);
        EXPECT_FALSE(parser.body_piece().empty());
        current.body += parser.body_piece();
      } else {
        EXPECT_TRUE(in_request) << "kRequest without kHead";
        Parsed end = copy_out(parser.request());  // the head's views survived the detaches
        EXPECT_EQ(end.target, current.target);
        EXPECT_EQ(end.path, current.path);
        EXPECT_EQ(end.host, current.host);
        EXPECT_EQ(end.headers, current.headers);
        EXPECT_EQ(end.body, "");  // nothing is kept
        current.trailers = end.trailers;
        out.push_back(current);
        in_request = false;
        parser.next();
      }
    }
    EXPECT_TRUE(parser.detach_input());
    std::fill(buffer.get(), buffer.get() + piece.size(), '#');
    EXPECT_LE(parser.held_bytes(), 2048u);  // the head at most, never the body
  }
  return out;
}

TEST(RequestParserStreaming, GivesTheHeadThenTheBodyInPiecesAtEverySplit) {
  const std::string text =
      "POST /up/load?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world"
      "PUT /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n"
      "GET /after HTTP/1.1\r\nHost: h\r\n\r\n";
  const auto whole = stream_pieces({text});
  ASSERT_EQ(whole.size(), 3u);
  EXPECT_EQ(whole[0].path, "/up/load");
  EXPECT_EQ(whole[0].query, "x=1");
  EXPECT_EQ(whole[0].body, "hello world");
  EXPECT_EQ(whole[1].body, "hello world");
  EXPECT_EQ(whole[1].trailers, "X-T=1;");
  EXPECT_EQ(whole[2].path, "/after");
  EXPECT_EQ(whole[2].body, "");
  for (size_t cut = 1; cut < text.size(); ++cut) {
    EXPECT_EQ(stream_pieces({text.substr(0, cut), text.substr(cut)}), whole) << "cut at " << cut;
  }
  std::vector<std::string> bytes;
  for (const char c : text) bytes.emplace_back(1, c);
  EXPECT_EQ(stream_pieces(bytes), whole);
}

TEST(RequestParserStreaming, AHeadWithoutBodyEndsWithoutMoreInput) {
  RequestParser parser(ParserLimits{});
  parser.set_streaming(true);
  std::string text = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
  std::string_view input = text;
  EXPECT_EQ(parser.feed(input), RequestParser::Event::kHead);
  EXPECT_TRUE(input.empty());
  EXPECT_EQ(parser.feed(input), RequestParser::Event::kRequest);
}

int last_error(const std::vector<Parsed>& parsed) {
  return parsed.empty() ? 0 : parsed.back().error;
}

TEST(RequestParserStreaming, LimitsAndRefusalsStillApply) {
  ParserLimits limits;
  limits.max_body_bytes = 10;
  EXPECT_EQ(last_error(stream_pieces({"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n"},
                                     limits)),
            413);
  const auto chunked = stream_pieces({"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
                                      "chunked\r\n\r\n8\r\n12345678\r\n8\r\n12345678\r\n"},
                                     limits);
  EXPECT_EQ(last_error(chunked), 413);
  EXPECT_EQ(last_error(stream_pieces({"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n"
                                      "Transfer-Encoding: chunked\r\n\r\n"})),
            400);
}
}  // namespace
}  // namespace ucp::http::detail

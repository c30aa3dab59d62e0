#include "ucp/http/Status.h"

#include <array>

#include "ResponseEncoder.h"

namespace ucp::http {
namespace {

struct Registered {
  int status;
  std::string_view line;  // the phrase and a newline: also a short body (detail::reason_line)
};

// The IANA HTTP Status Code Registry (RFC 9110 §15 and the RFCs it points to), without the
// codes it lists as unused (306, 418).
constexpr Registered kRegistry[] = {
    {100, "Continue\n"},
    {101, "Switching Protocols\n"},
    {102, "Processing\n"},
    {103, "Early Hints\n"},
    {200, "OK\n"},
    {201, "Created\n"},
    {202, "Accepted\n"},
    {203, "Non-Authoritative Information\n"},
    {204, "No Content\n"},
    {205, "Reset Content\n"},
    {206, "Partial Content\n"},
    {207, "Multi-Status\n"},
    {208, "Already Reported\n"},
    {226, "IM Used\n"},
    {300, "Multiple Choices\n"},
    {301, "Moved Permanently\n"},
    {302, "Found\n"},
    {303, "See Other\n"},
    {304, "Not Modified\n"},
    {305, "Use Proxy\n"},
    {307, "Temporary Redirect\n"},
    {308, "Permanent Redirect\n"},
    {400, "Bad Request\n"},
    {401, "Unauthorized\n"},
    {402, "Payment Required\n"},
    {403, "Forbidden\n"},
    {404, "Not Found\n"},
    {405, "Method Not Allowed\n"},
    {406, "Not Acceptable\n"},
    {407, "Proxy Authentication Required\n"},
    {408, "Request Timeout\n"},
    {409, "Conflict\n"},
    {410, "Gone\n"},
    {411, "Length Required\n"},
    {412, "Precondition Failed\n"},
    {413, "Content Too Large\n"},
    {414, "URI Too Long\n"},
    {415, "Unsupported Media Type\n"},
    {416, "Range Not Satisfiable\n"},
    {417, "Expectation Failed\n"},
    {421, "Misdirected Request\n"},
    {422, "Unprocessable Content\n"},
    {423, "Locked\n"},
    {424, "Failed Dependency\n"},
    {425, "Too Early\n"},
    {426, "Upgrade Required\n"},
    {428, "Precondition Required\n"},
    {429, "Too Many Requests\n"},
    {431, "Request Header Fields Too Large\n"},
    {451, "Unavailable For Legal Reasons\n"},
    {500, "Internal Server Error\n"},
    {501, "Not Implemented\n"},
    {502, "Bad Gateway\n"},
    {503, "Service Unavailable\n"},
    {504, "Gateway Timeout\n"},
    {505, "HTTP Version Not Supported\n"},
    {506, "Variant Also Negotiates\n"},
    {507, "Insufficient Storage\n"},
    {508, "Loop Detected\n"},
    {510, "Not Extended\n"},
    {511, "Network Authentication Required\n"},
};

constexpr int kFirst = 100;
constexpr int kLast = 599;

// Indexed by status - 100: one load per call, for the status line of every response.
constexpr auto kPhrases = [] {
  std::array<std::string_view, kLast - kFirst + 1> table{};
  for (const Registered& entry : kRegistry)
    table[static_cast<size_t>(entry.status - kFirst)] = entry.line;
  return table;
}();

}  // namespace

std::string_view detail::reason_line(int status) noexcept {
  if (status < kFirst || status > kLast) return {};
  return kPhrases[static_cast<size_t>(status - kFirst)];
}

std::string_view reason_phrase(int status) noexcept {
  const std::string_view line = detail::reason_line(status);
  return line.substr(0, line.empty() ? 0 : line.size() - 1);
}

}  // namespace ucp::http

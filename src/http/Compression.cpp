#include "ucp/http/Compression.h"

#include <algorithm>
#include <memory>
#include <utility>

#include <zlib.h>

#include "ucp/http/Request.h"
#include "ucp/http/Response.h"
#include "ucp/http/Status.h"

#include "TokenList.h"

namespace ucp::http {
namespace {

/// A q-value ("1", "0.5", "0.125"; RFC 9110 §12.4.2) in thousandths; -1 when malformed.
int parse_qvalue(std::string_view text) noexcept {
  if (text.empty() || (text[0] != '0' && text[0] != '1')) return -1;
  const int whole = text[0] - '0';
  if (text.size() == 1) return whole * 1000;
  if (text[1] != '.' || text.size() > 5) return -1;
  int thousandths = 0;
  int scale = 100;
  for (const char c : text.substr(2)) {
    if (c < '0' || c > '9') return -1;
    thousandths += (c - '0') * scale;
    scale /= 10;
  }
  if (whole == 1 && thousandths != 0) return -1;
  return whole * 1000 + thousandths;
}

/// "gzip;q=0.5" -> ("gzip", 500); no q: 1000. A malformed q counts as 0 (not acceptable).
std::pair<std::string_view, int> coding_and_weight(std::string_view element) noexcept {
  const size_t semicolon = element.find(';');
  const std::string_view coding = detail::trim_ows(element.substr(0, semicolon));
  int weight = 1000;
  std::string_view params =
      semicolon == std::string_view::npos ? std::string_view() : element.substr(semicolon + 1);
  while (!params.empty()) {
    const size_t next = params.find(';');
    const std::string_view param = detail::trim_ows(params.substr(0, next));
    if (param.size() >= 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=') {
      weight = std::max(parse_qvalue(param.substr(2)), 0);
    }
    if (next == std::string_view::npos) break;
    params.remove_prefix(next + 1);
  }
  return {coding, weight};
}

bool starts_with_icase(std::string_view text, std::string_view prefix) noexcept {
  return text.size() >= prefix.size() && iequals(text.substr(0, prefix.size()), prefix);
}

/// The media type of a Content-Type value, without parameters: "text/html".
std::string_view media_type(std::string_view content_type) noexcept {
  return detail::trim_ows(content_type.substr(0, content_type.find(';')));
}

/// One deflate stream per thread and coding, reset for each response (deflateInit2 allocates
/// about 256 KiB: once per thread, not per response).
class Deflaters {
 public:
  ~Deflaters() {
    for (Slot& slot : slots_) {
      if (slot.ready) deflateEnd(&slot.z);
    }
  }
  /// `in` compressed into `out`; false when zlib failed (no memory) or the result would not
  /// be smaller than `in`.
  bool compress(ContentCoding coding, int level, std::string_view in, std::string& out) {
    Slot& slot = slots_[coding == ContentCoding::kGzip ? 0 : 1];
    if (!slot.ready) {
      // windowBits 15 + 16: the gzip wrapper; 15: the zlib wrapper ("deflate" in HTTP).
      const int window = coding == ContentCoding::kGzip ? 15 + 16 : 15;
      slot.z = z_stream{};
      if (deflateInit2(&slot.z, level, Z_DEFLATED, window, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        return false;
      }
      slot.ready = true;
      slot.level = level;
    } else if (deflateReset(&slot.z) != Z_OK) {
      return false;
    } else if (slot.level != level) {
      if (deflateParams(&slot.z, level, Z_DEFAULT_STRATEGY) != Z_OK) return false;
      slot.level = level;
    }
    // Worth it only if smaller: give zlib exactly that much room, and a full buffer means no.
    out.resize(in.size() - 1);
    slot.z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    slot.z.avail_in = static_cast<uInt>(in.size());
    slot.z.next_out = reinterpret_cast<Bytef*>(out.data());
    slot.z.avail_out = static_cast<uInt>(out.size());
    const int status = deflate(&slot.z, Z_FINISH);
    if (status != Z_STREAM_END) return false;  // Z_OK or Z_BUF_ERROR: it did not fit
    out.resize(out.size() - slot.z.avail_out);
    return true;
  }

 private:
  struct Slot {
    z_stream z{};
    bool ready = false;
    int level = 0;
  };
  Slot slots_[2];
};

Deflaters& deflaters() {
  thread_local Deflaters cache;
  return cache;
}

struct Settings {
  CompressionOptions options;
};

bool eligible(const Settings& settings, const Response& response) {
  const Response::BodyKind kind = response.body_kind();
  if (response.head_sent()) return false;
  if (kind != Response::BodyKind::kBorrowed && kind != Response::BodyKind::kOwned) return false;
  const int status = response.status();
  if (status_has_no_body(status) || status == 206) return false;
  if (response.body().size() < settings.options.min_bytes || response.body().size() < 2) {
    return false;
  }
  if (!response.header("content-encoding").empty()) return false;
  if (detail::has_element(response.header("cache-control"), "no-transform")) return false;
  const std::string_view type = media_type(response.header("content-type"));
  if (compressible_type(type)) return true;
  for (const std::string& extra : settings.options.extra_types) {
    if (iequals(extra, type)) return true;
  }
  return false;
}

}  // namespace

ContentCoding choose_coding(std::string_view accept_encoding, bool gzip, bool deflate) noexcept {
  // Weights of gzip, deflate and "*" as the header gives them; -1 = not named.
  int gzip_weight = -1;
  int deflate_weight = -1;
  int any_weight = -1;
  detail::for_each_element(accept_encoding, [&](std::string_view element) {
    const auto [coding, weight] = coding_and_weight(element);
    if (iequals(coding, "gzip") || iequals(coding, "x-gzip")) {
      gzip_weight = std::max(gzip_weight, weight);
    } else if (iequals(coding, "deflate")) {
      deflate_weight = std::max(deflate_weight, weight);
    } else if (coding == "*") {
      any_weight = std::max(any_weight, weight);
    }
    return true;
  });
  // "*" matches the codings the header does not name (§12.5.3).
  if (gzip_weight < 0) gzip_weight = any_weight;
  if (deflate_weight < 0) deflate_weight = any_weight;
  if (!gzip) gzip_weight = -1;
  if (!deflate) deflate_weight = -1;
  if (gzip_weight > 0 && gzip_weight >= deflate_weight) return ContentCoding::kGzip;
  if (deflate_weight > 0) return ContentCoding::kDeflate;
  return ContentCoding::kIdentity;
}

bool compressible_type(std::string_view content_type) noexcept {
  const std::string_view type = media_type(content_type);
  if (starts_with_icase(type, "text/")) return true;
  constexpr std::string_view kTypes[] = {
      "application/json",       "application/javascript",
      "application/xml",        "application/wasm",
      "image/svg+xml",          "application/x-javascript",
      "application/ecmascript", "application/manifest+json",
      "application/x-ndjson",
  };
  for (const std::string_view known : kTypes) {
    if (iequals(type, known)) return true;
  }
  // Structured syntax suffixes (RFC 6839): application/problem+json, application/atom+xml.
  const size_t plus = type.rfind('+');
  if (plus != std::string_view::npos) {
    const std::string_view suffix = type.substr(plus);
    return iequals(suffix, "+json") || iequals(suffix, "+xml");
  }
  return false;
}

Middleware compression(CompressionOptions options) {
  if (options.level < 1 || options.level > 9) options.level = Z_DEFAULT_COMPRESSION;
  auto settings = std::make_shared<const Settings>(Settings{std::move(options)});
  return [settings](Request& request, Response& response, Next next) -> Task<> {
    co_await next();
    if (!eligible(*settings, response)) co_return;
    response.add_vary("Accept-Encoding");
    const CompressionOptions& o = settings->options;
    const ContentCoding coding =
        choose_coding(request.header("accept-encoding"), o.gzip, o.deflate);
    if (coding == ContentCoding::kIdentity) co_return;
    std::string compressed;
    if (!deflaters().compress(coding, o.level, response.body(), compressed)) co_return;
    const std::string_view tag = response.header("etag");
    if (!tag.empty() && tag.front() == '"') response.set_header("ETag", "W/" + std::string(tag));
    response.set_header("Content-Encoding", coding == ContentCoding::kGzip ? "gzip" : "deflate");
    response.body_buffer() = std::move(compressed);
  };
}

}  // namespace ucp::http

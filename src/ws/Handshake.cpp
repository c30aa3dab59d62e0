#include "Handshake.h"

#include "Base64.h"
#include "Sha1.h"

namespace ucp::ws::detail {

std::string accept_key(std::string_view key) {
  std::string text(key);
  text += "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  return base64_encode(sha1(text));
}

bool has_token(std::string_view list, std::string_view token) noexcept {
  bool found = false;
  for_each_token(list, [&](std::string_view item) {
    if (item.size() != token.size()) return true;
    for (size_t i = 0; i < item.size(); ++i) {
      const char a = item[i] >= 'A' && item[i] <= 'Z' ? static_cast<char>(item[i] + 32) : item[i];
      const char b =
          token[i] >= 'A' && token[i] <= 'Z' ? static_cast<char>(token[i] + 32) : token[i];
      if (a != b) return true;
    }
    found = true;
    return false;
  });
  return found;
}

}  // namespace ucp::ws::detail

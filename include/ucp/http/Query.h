#pragma once
// Query: the parameters of a query string, or of an application/x-www-form-urlencoded body,
// decoded as browsers encode them (the WHATWG URL standard's form parser): pairs split on
// '&', name and value on the first '=', '+' is a space, %XX is the byte XX, a malformed
// escape ("%zz", a lone '%') stays as it is. A name may repeat; order is kept.
//
//   http::Query query(request.query());           // "q=my+room&tag=a&tag=b&page=2"
//   std::string_view q = query.get("q");          // "my room"
//   std::vector<std::string_view> tags = query.all("tag");   // {"a", "b"}
//   int64_t page = query.get_int("page").value_or(1);        // 2
//   for (auto [name, value] : query) { ... }
//
//   http::Query form(request.body());             // an HTML form posted as urlencoded
//
// A Query owns its decoded bytes (one string for all of them): it stays valid after the
// request is gone, and the views it hands out live as long as the Query (and it is not
// modified: it cannot be). Copying and moving keep the views' meaning.
//
// Thread contract: none (a value).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ucp::http {

class Query {
 public:
  struct Param {
    std::string_view name;
    std::string_view value;
  };

  Query() = default;
  /// Parses `text`: a query without its '?', or a urlencoded body. Empty pairs ("a=1&&b=2")
  /// are skipped; a pair without '=' has an empty value.
  explicit Query(std::string_view text);

  /// The value of the first parameter named `name` (exact, case-sensitive), or `fallback`.
  std::string_view get(std::string_view name, std::string_view fallback = {}) const noexcept;
  /// The value of the first parameter named `name`, or nullopt when there is none.
  std::optional<std::string_view> find(std::string_view name) const noexcept;
  bool has(std::string_view name) const noexcept { return find(name).has_value(); }
  /// Every value of `name`, in order.
  std::vector<std::string_view> all(std::string_view name) const;
  /// The first value of `name` as a decimal integer ("-12"), or nullopt when it is absent,
  /// not a number, or out of range.
  std::optional<int64_t> get_int(std::string_view name) const noexcept;

  size_t size() const noexcept { return spans_.size(); }
  bool empty() const noexcept { return spans_.empty(); }
  /// The i-th parameter (i < size()), in the order of the text.
  Param operator[](size_t i) const noexcept;

  class Iterator {
   public:
    using value_type = Param;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    Param operator*() const noexcept { return (*query_)[index_]; }
    Iterator& operator++() noexcept {
      ++index_;
      return *this;
    }
    Iterator operator++(int) noexcept {
      Iterator before = *this;
      ++index_;
      return before;
    }
    bool operator==(const Iterator&) const noexcept = default;

   private:
    friend class Query;
    Iterator(const Query* query, size_t index) noexcept : query_(query), index_(index) {}
    const Query* query_ = nullptr;
    size_t index_ = 0;
  };
  Iterator begin() const noexcept { return {this, 0}; }
  Iterator end() const noexcept { return {this, spans_.size()}; }

 private:
  // Offsets into decoded_, not views, so that a moved Query (a short string moves its bytes)
  // still reads right.
  struct Span {
    uint32_t name_at;
    uint32_t name_size;
    uint32_t value_at;
    uint32_t value_size;
  };
  std::string decoded_;
  std::vector<Span> spans_;
};

}  // namespace ucp::http

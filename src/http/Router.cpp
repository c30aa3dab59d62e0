#include "ucp/http/Router.h"

#include <array>
#include <stdexcept>
#include <vector>

namespace ucp::http {

// A trie over path segments. Each node may hold a handler per method for paths that end
// there, and (in `wildcard`) handlers for paths that continue past it.
struct Router::Node {
  struct Handlers {
    // Matching is const and runs on every worker; calling a handler is not const.
    mutable std::array<Handler, kMethodCount> by_method;
    MethodSet methods = 0;
    uint32_t route = kNoRoute;  // the pattern's number, given with its first method
  };
  std::string segment;  // literal children: their segment
  std::vector<std::unique_ptr<Node>> literals;
  std::unique_ptr<Node> parameter;
  std::string parameter_name;
  Handlers here;
  std::unique_ptr<Handlers> wildcard;  // a trailing `*` after this node's segment
};

namespace {

constexpr Router::MethodSet bit(Method method) noexcept {
  return static_cast<Router::MethodSet>(1u << static_cast<unsigned>(method));
}

bool valid_parameter_name(std::string_view name) noexcept {
  if (name.empty()) return false;
  for (const char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

/// The next segment of `path` (which starts after a '/'), and the rest after its '/'.
std::string_view take_segment(std::string_view& rest, bool& more) noexcept {
  const size_t slash = rest.find('/');
  const std::string_view segment = rest.substr(0, slash);
  more = slash != std::string_view::npos;
  rest = more ? rest.substr(slash + 1) : std::string_view();
  return segment;
}

struct Search {
  Method method = Method::kGet;
  uint32_t params = 0;
  uint32_t route = Router::kNoRoute;
  Router::MethodSet allowed = 0;
  std::string_view names[Request::kMaxParams];
  std::string_view values[Request::kMaxParams];

  void push(std::string_view name, std::string_view value) noexcept {
    names[params] = name;
    values[params] = value;
    ++params;
  }
};

Handler* pick(const Router::Node::Handlers& handlers, Search& search) noexcept {
  Router::MethodSet methods = handlers.methods;
  if ((methods & bit(Method::kGet)) != 0) methods |= bit(Method::kHead);
  search.allowed |= methods;
  const auto index = static_cast<size_t>(search.method);
  if ((handlers.methods & bit(search.method)) != 0) {
    search.route = handlers.route;
    return &handlers.by_method[index];
  }
  if (search.method == Method::kHead && (handlers.methods & bit(Method::kGet)) != 0) {
    search.route = handlers.route;
    return &handlers.by_method[static_cast<size_t>(Method::kGet)];
  }
  return nullptr;
}

// Depth-first: literal, then parameter, then wildcard, so the most specific route wins and
// a less specific one is still found when the specific one lacks the method.
Handler* find(const Router::Node& node, std::string_view rest, bool at_end, Search& search) {
  if (at_end) {
    if (Handler* h = pick(node.here, search)) return h;
    return nullptr;
  }
  bool more = false;
  std::string_view after = rest;
  const std::string_view segment = take_segment(after, more);
  for (const auto& child : node.literals) {
    if (child->segment == segment) {
      if (Handler* h = find(*child, after, !more, search)) return h;
      break;
    }
  }
  if (node.parameter && !segment.empty() && search.params < Request::kMaxParams) {
    const uint32_t saved = search.params;
    search.push(node.parameter->parameter_name, segment);
    if (Handler* h = find(*node.parameter, after, !more, search)) return h;
    search.params = saved;
  }
  if (node.wildcard && search.params < Request::kMaxParams) {
    if (Handler* h = pick(*node.wildcard, search)) {
      search.push("*", rest);
      return h;
    }
  }
  return nullptr;
}

}  // namespace

Router::Router() : root_(std::make_unique<Node>()) {}
Router::Router(Router&&) noexcept = default;
Router& Router::operator=(Router&&) noexcept = default;
Router::~Router() = default;

bool Router::empty() const noexcept {
  return root_->literals.empty() && !root_->parameter && !root_->wildcard;
}

Router& Router::add_route(Method method, std::string_view pattern, Handler handler) {
  const std::string shown(pattern);
  if (pattern.empty() || pattern.front() != '/') {
    throw std::invalid_argument("route pattern must start with '/': " + shown);
  }
  if (method == Method::kOther || method == Method::kConnect) {
    throw std::invalid_argument("no routes for this method: " + shown);
  }
  Node* node = root_.get();
  std::string_view rest = pattern.substr(1);
  std::vector<std::string_view> names;
  Node::Handlers* target = nullptr;
  for (bool more = true; more;) {
    const std::string_view segment = take_segment(rest, more);
    if (segment == "*") {
      if (more) throw std::invalid_argument("'*' must be the last segment: " + shown);
      if (names.size() + 1 > Request::kMaxParams) {
        throw std::invalid_argument("more than Request::kMaxParams parameters: " + shown);
      }
      if (!node->wildcard) node->wildcard = std::make_unique<Node::Handlers>();
      target = node->wildcard.get();
      break;
    }
    if (!segment.empty() && segment.front() == '{') {
      const std::string_view name = segment.substr(1, segment.size() - 2);
      if (segment.back() != '}' || !valid_parameter_name(name)) {
        throw std::invalid_argument("parameter must be {name} with [A-Za-z0-9_]: " + shown);
      }
      for (std::string_view seen : names) {
        if (seen == name) throw std::invalid_argument("parameter named twice: " + shown);
      }
      names.push_back(name);
      if (names.size() > Request::kMaxParams) {
        throw std::invalid_argument("more than Request::kMaxParams parameters: " + shown);
      }
      if (!node->parameter) {
        node->parameter = std::make_unique<Node>();
        node->parameter->parameter_name = std::string(name);
      } else if (node->parameter->parameter_name != name) {
        throw std::invalid_argument("parameter {" + std::string(name) +
                                    "} where another route has {" +
                                    node->parameter->parameter_name + "}: " + shown);
      }
      node = node->parameter.get();
    } else {
      if (segment.find_first_of("{}*") != std::string_view::npos) {
        throw std::invalid_argument("'{', '}' or '*' inside a literal segment: " + shown);
      }
      Node* next = nullptr;
      for (auto& child : node->literals) {
        if (child->segment == segment) next = child.get();
      }
      if (next == nullptr) {
        node->literals.push_back(std::make_unique<Node>());
        next = node->literals.back().get();
        next->segment = std::string(segment);
      }
      node = next;
    }
    target = &node->here;
  }
  if ((target->methods & bit(method)) != 0) {
    throw std::invalid_argument("route defined twice: " + std::string(to_string(method)) + " " +
                                shown);
  }
  target->by_method[static_cast<size_t>(method)] = std::move(handler);
  target->methods = static_cast<MethodSet>(target->methods | bit(method));
  if (target->route == kNoRoute) {
    target->route = static_cast<uint32_t>(routes_.size());
    routes_.push_back(shown);
  }
  return *this;
}

Router::Match Router::match(Request& request) const noexcept {
  Search search;
  search.method = request.method();
  Match result;
  const std::string_view path = request.path();
  if (!path.empty() && path.front() == '/') {
    // "/" is the literal segment "" below the root, as "/a/" is "" below "a".
    result.handler = find(*root_, path.substr(1), false, search);
  }
  request.param_count_ = result.handler != nullptr ? search.params : 0;
  for (uint32_t i = 0; i < request.param_count_; ++i) {
    request.params_[i] = {search.names[i], search.values[i]};
  }
  if (result.handler == nullptr) {
    result.allowed = search.allowed;
  } else {
    result.route = search.route;
  }
  return result;
}

std::string Router::allow_header(MethodSet methods) {
  std::string text;
  for (size_t i = 0; i < kMethodCount; ++i) {
    if ((methods & (1u << i)) == 0) continue;
    if (!text.empty()) text += ", ";
    text += to_string(static_cast<Method>(i));
  }
  return text;
}

}  // namespace ucp::http

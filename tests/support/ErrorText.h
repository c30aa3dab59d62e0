#pragma once
// Test adapter: the message of a failed Result, or "" when it holds a value, so that gtest
// prints the reason in `ASSERT_EQ(error_text(server.start()), "")`.

#include <string>

#include "ucp/base/Result.h"

namespace ucp::test {

template <class T>
std::string error_text(const Result<T, Error>& result) {
  return result ? std::string() : result.error().message;
}

}  // namespace ucp::test

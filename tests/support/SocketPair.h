#pragma once
// A connected AF_UNIX stream socket pair for tests of the I/O layer: both ends owned, closed
// at the end of the scope. Not attached to any loop.

#include <gtest/gtest.h>
#include <sys/socket.h>

#include "ucp/base/UniqueFd.h"

namespace ucp::test {

struct SocketPair {
  UniqueFd a, b;
  SocketPair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    a = UniqueFd(fds[0]);
    b = UniqueFd(fds[1]);
  }
};

}  // namespace ucp::test

#include "ucp/tls/KernelTls.h"

#include <cstdio>

#include <gtest/gtest.h>

namespace ucp::tls {
namespace {

TEST(KernelTls, TheProbeAnswersWithAReasonWhenUnavailable) {
  const KernelTlsProbe probe = probe_kernel_tls();
  if (probe.available) {
    EXPECT_FALSE(probe.error);
  } else {
    ASSERT_TRUE(probe.error);
    // ENOENT: no tls module. Anything else means the loopback pair itself failed.
    EXPECT_EQ(probe.error, std::errc::no_such_file_or_directory) << probe.error.message();
  }
  std::printf("kTLS: %s\n", probe.available ? "available" : probe.error.message().c_str());
}

}  // namespace
}  // namespace ucp::tls

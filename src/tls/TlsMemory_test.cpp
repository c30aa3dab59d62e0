// What TLS sessions hold on the heap: an idle established session keeps no record buffers
// (after the handshake, and after release_buffers() once busy),
// and failed handshakes leave nothing behind. Counted with the allocator (mallinfo2, or the
// sanitizer's allocator), never with a clock.

#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/tls/TlsContext.h"
#include "ucp/tls/TlsSession.h"

#include "TestCertificates.h"
#include "TlsLink.h"

namespace ucp::tls {
namespace {

const test::TestPki& pki() { return test::TestPki::get(); }

std::shared_ptr<const TlsContext> server_context() {
  TlsOptions options;
  options.certificates = {{pki().ecdsa.certificate, pki().ecdsa.private_key}};
  return *TlsContext::server(options);
}

std::shared_ptr<const TlsContext> client_context(const std::string& ca_file,
                                                 TlsVersion version = TlsVersion::k1_3) {
  TlsClientOptions options;
  options.ca_file = ca_file;
  options.alpn = {"http/1.1"};
  options.max_version = version;
  return *TlsContext::client(options);
}

// Established pairs whose every byte in flight has been read, as idle connections are.
std::vector<test::TlsLink> idle_links(const TlsContext& client, const TlsContext& server,
                                      size_t count) {
  std::vector<test::TlsLink> links;
  links.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    links.emplace_back(*TlsSession::connect(client, "localhost"), *TlsSession::accept(server));
    auto& l = links.back();
    EXPECT_TRUE(l.handshake().ok());
    l.receive(l.client);  // TLS 1.3 tickets
    EXPECT_TRUE(l.to_client.empty() && l.to_server.empty());
    // What a TlsConnection does once the connection is quiet.
    EXPECT_TRUE(l.client.release_buffers());
    EXPECT_TRUE(l.server.release_buffers());
    l.to_client.shrink_to_fit();
    l.to_server.shrink_to_fit();
  }
  return links;
}

class IdleSessions : public ::testing::TestWithParam<TlsVersion> {};

TEST_P(IdleSessions, HoldNoRecordBuffersAndReturnToTheirSizeAfterTraffic) {
  constexpr size_t kSessions = 200;
  auto server = server_context();
  auto client = client_context(pki().ca_file, GetParam());
  idle_links(*client, *server, 4);  // OpenSSL's one-time tables, the thread caches

  const size_t empty = test::live_heap_bytes();
  auto links = idle_links(*client, *server, kSessions);
  const size_t with_both = test::live_heap_bytes();

  // Traffic through every session, a full 16 KiB record each way, then idle again.
  const std::string request(16384, 'q');
  for (auto& l : links) {
    ASSERT_FALSE(l.send(l.client, request));
    ASSERT_EQ(l.receive(l.server).text.size(), request.size());
    ASSERT_FALSE(l.send(l.server, request));
    ASSERT_EQ(l.receive(l.client).text.size(), request.size());
    l.to_client.shrink_to_fit();
    l.to_server.shrink_to_fit();
  }
  const size_t busy = test::live_heap_bytes();
  // Their holder releases the record buffers once the connection is quiet (TlsConnection).
  for (auto& l : links) {
    EXPECT_TRUE(l.client.release_buffers());
    EXPECT_TRUE(l.server.release_buffers());
  }
  const size_t after_traffic = test::live_heap_bytes();

  // The servers' share: drop the clients (and the links' strings, empty by now).
  std::vector<TlsSession> servers;
  servers.reserve(kSessions);
  for (auto& l : links) servers.push_back(std::move(l.server));
  const size_t links_bytes = links.capacity() * sizeof(test::TlsLink);
  links.clear();
  links.shrink_to_fit();
  const size_t servers_only = test::live_heap_bytes();

  const double per_pair = double(with_both - empty) / kSessions;
  const double per_server =
      double(servers_only - empty - servers.capacity() * sizeof(TlsSession)) / kSessions;
  const double per_client = per_pair - per_server - double(links_bytes) / kSessions;
  std::printf(
      "TLS %s idle: %.0f bytes per server session, %.0f per client session "
      "(heap, OpenSSL's share included; after 16 KiB each way: %+.0f per pair busy, %+.0f "
      "released)\n",
      GetParam() == TlsVersion::k1_3 ? "1.3" : "1.2", per_server, per_client,
      (double(busy) - double(with_both)) / kSessions,
      (double(after_traffic) - double(with_both)) / kSessions);
  // About 14 KiB (server) and 20 KiB (client, with its tickets) of OpenSSL state; a record
  // buffer is 16.5 KiB more, which a session that kept one would show.
  EXPECT_LT(per_server, 20 * 1024.0);
  EXPECT_LT(per_client, 28 * 1024.0);
  EXPECT_LT(double(after_traffic), double(with_both) + kSessions * 256.0)
      << "buffers released once quiet";
}

INSTANTIATE_TEST_SUITE_P(Versions, IdleSessions,
                         ::testing::Values(TlsVersion::k1_2, TlsVersion::k1_3),
                         [](const ::testing::TestParamInfo<TlsVersion>& version) {
                           return version.param == TlsVersion::k1_2 ? "Tls12" : "Tls13";
                         });

// Each handshake fails certificate verification on the client (the server's CA is not the
// one it trusts), and the server then fails on the client's alert.
void failed_handshakes(const TlsContext& client, const TlsContext& server, int count) {
  for (int i = 0; i < count; ++i) {
    test::TlsLink l(*TlsSession::connect(client, "localhost"), *TlsSession::accept(server));
    auto outcome = l.handshake();
    ASSERT_EQ(outcome.client, Errc::kCertificateVerifyFailed) << outcome.client.message();
    ASSERT_EQ(outcome.server, Errc::kHandshakeFailed) << outcome.server.message();
  }
}

TEST(FailedHandshakes, TenThousandLeaveTheHeapWhereItWas) {
  auto server = server_context();
  auto client = client_context(pki().other_ca->certificate_file());
  // OpenSSL fills caches of its own over the first few hundred handshakes.
  failed_handshakes(*client, *server, 1000);
  const size_t before = test::live_heap_bytes();
  failed_handshakes(*client, *server, 10000);
  const size_t after = test::live_heap_bytes();
  std::printf("10,000 failed handshakes: heap %+lld bytes\n",
              static_cast<long long>(after) - static_cast<long long>(before));
  EXPECT_LT(after, before + 32 * 1024) << "a leak of even 4 bytes per handshake shows";
}

}  // namespace
}  // namespace ucp::tls

// Worker threads making sessions from one holder while another thread reloads the context
// and rotates the ticket keys, as SIGHUP and the rotation interval do in a server (run under
// ThreadSanitizer in `make test`).

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/tls/TicketKeyRing.h"
#include "ucp/tls/TlsContextHolder.h"
#include "ucp/tls/TlsCounters.h"
#include "ucp/tls/TlsSession.h"
#include "ucp/tls/TlsSessionCache.h"

#include "TestCertificates.h"
#include "TlsLink.h"

namespace ucp::tls {
namespace {

TEST(TlsThreads, HandshakesGoOnWhileTheContextReloadsAndTheKeysRotate) {
  const auto& pki = test::TestPki::get();
  TlsOptions options;
  options.certificates = {{pki.ecdsa.certificate, pki.ecdsa.private_key}};
  TlsContextHolder holder;
  ASSERT_TRUE(holder.load(options));
  const auto ring = holder.current()->ticket_keys();
  TlsClientOptions client_options;
  client_options.ca_file = pki.ca_file;
  auto client = TlsContext::client(client_options);
  ASSERT_TRUE(client);
  TlsSessionCache shared_cache;  // clients on every thread resume each other's sessions

  constexpr int kWorkers = 3;
  constexpr int kHandshakesPerWorker = 150;
  std::atomic<int> workers_done{0};
  std::vector<TlsCounters> counters(kWorkers);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      // A worker keeps its own copy of the context, refreshed when the generation moves.
      uint64_t generation = holder.generation();
      auto context = holder.current();
      for (int i = 0; i < kHandshakesPerWorker; ++i) {
        if (holder.generation() != generation) {
          generation = holder.generation();
          context = holder.current();
        }
        auto server = TlsSession::accept(*context);
        auto session = TlsSession::connect(**client, "localhost", &shared_cache);
        if (!server || !session) {
          counters[w].record_failure(make_error_code(Errc::kInternal));
          continue;
        }
        test::TlsLink l(std::move(*session), std::move(*server));
        auto outcome = l.handshake();
        if (!outcome.ok()) {
          counters[w].record_failure(outcome.server ? outcome.server : outcome.client);
          continue;
        }
        counters[w].record(l.server);
        l.receive(l.client);  // TLS 1.3 tickets, into the shared cache
        if (l.send(l.client, "ping") || l.receive(l.server).text != "ping") {
          counters[w].record_failure(make_error_code(Errc::kProtocolError));
        }
      }
      workers_done.fetch_add(1);
    });
  }
  int reloads = 0;
  while (workers_done.load() < kWorkers) {
    ASSERT_TRUE(holder.reload());
    ring->rotate();
    ++reloads;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (auto& worker : workers) worker.join();

  TlsCounters total;
  for (const auto& c : counters) total += c;
  EXPECT_EQ(total.handshakes_ok, uint64_t{kWorkers * kHandshakesPerWorker});
  EXPECT_EQ(total.handshakes_failed_total(), 0u);
  EXPECT_GT(total.resumed, 0u) << "tickets from one thread resumed on others";
  EXPECT_GT(reloads, 0);
  EXPECT_EQ(holder.generation(), uint64_t(reloads) + 1);
}

}  // namespace
}  // namespace ucp::tls

// tls_micro: what the TLS engine costs a server worker, in memory (no sockets, no loop), so
// that the connection layer can bound the handshake work it does per loop iteration.
//
//   Full...         a new client: ECDHE (X25519 or P-256) plus the certificate's signature
//                   (ECDSA P-256 or RSA 2048), TLS 1.3 or 1.2, with the server's tickets
//   Resumed...      a returning client with a ticket: TLS 1.3 still does ECDHE (psk_dhe_ke),
//                   TLS 1.2 does none
//   records         sealing on the server and opening on the client, one write of N bytes
//
// The handshake time reported is the server's thread CPU time in its handshake() calls only
// (UseManualTime); the client's work is not counted. `server_us` repeats it in microseconds.
// The clients offer X25519 then P-256 (a TLS 1.2 client must list P-256 to accept a P-256
// ECDSA certificate), except in the P256 case, which offers P-256 only.

#include <ctime>
#include <memory>
#include <string>

#include <benchmark/benchmark.h>

#include "ucp/tls/TlsContext.h"
#include "ucp/tls/TlsSession.h"
#include "ucp/tls/TlsSessionCache.h"

#include "TestCertificates.h"
#include "TlsLink.h"

namespace ucp::tls {
namespace {

double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return double(now.tv_sec) + double(now.tv_nsec) * 1e-9;
}

enum class Certificate { kEcdsaP256, kRsa2048 };

struct Setup {
  std::shared_ptr<const TlsContext> server;
  std::shared_ptr<const TlsContext> client;
};

Setup make_setup(Certificate certificate, TlsVersion version, const char* group) {
  const auto& pki = test::TestPki::get();
  const auto& leaf = certificate == Certificate::kEcdsaP256 ? pki.ecdsa : pki.rsa;
  TlsOptions server_options;
  server_options.certificates = {{leaf.certificate, leaf.private_key}};
  TlsClientOptions client_options;
  client_options.ca_file = pki.ca_file;
  client_options.alpn = {"http/1.1"};
  client_options.max_version = version;
  client_options.groups = group;
  return {*TlsContext::server(server_options), *TlsContext::client(client_options)};
}

// One handshake; returns the server's CPU seconds in handshake().
double timed_handshake(const Setup& setup, TlsSessionCache* cache, bool& ok) {
  test::TlsLink l(*TlsSession::connect(*setup.client, "localhost", cache),
                  *TlsSession::accept(*setup.server));
  double server_seconds = 0;
  ok = false;
  for (int round = 0; round < 8 && !(l.client.established() && l.server.established()); ++round) {
    auto client_step = l.client.handshake(test::as_bytes(l.to_client));
    if (!client_step) return server_seconds;
    l.to_client.erase(0, client_step->consumed);
    l.flush();
    if (!l.server.established()) {
      const double start = thread_cpu_seconds();
      auto server_step = l.server.handshake(test::as_bytes(l.to_server));
      server_seconds += thread_cpu_seconds() - start;
      if (!server_step) return server_seconds;
      l.to_server.erase(0, server_step->consumed);
    }
    l.flush();
  }
  l.receive(l.client);  // TLS 1.3 tickets into the cache
  ok = l.client.established() && l.server.established();
  return server_seconds;
}

void handshakes(benchmark::State& state, Certificate certificate, TlsVersion version,
                const char* group, bool resume) {
  const Setup setup = make_setup(certificate, version, group);
  TlsSessionCache cache;
  bool ok = true;
  if (resume) timed_handshake(setup, &cache, ok);
  double total = 0;
  for (auto _ : state) {
    const double seconds = timed_handshake(setup, resume ? &cache : nullptr, ok);
    if (!ok) {
      state.SkipWithError("handshake failed");
      break;
    }
    total += seconds;
    state.SetIterationTime(seconds);
  }
  state.counters["server_us"] =
      benchmark::Counter(total * 1e6 / double(state.iterations()), benchmark::Counter::kDefaults);
}

void records(benchmark::State& state, TlsVersion version) {
  const Setup setup = make_setup(Certificate::kEcdsaP256, version, "X25519:P-256");
  test::TlsLink l(*TlsSession::connect(*setup.client, "localhost"),
                  *TlsSession::accept(*setup.server));
  l.handshake();
  l.receive(l.client);
  const std::string message(static_cast<size_t>(state.range(0)), 'x');
  std::string plaintext(message.size() + 1024, '\0');
  for (auto _ : state) {
    auto written = l.server.write(test::as_bytes(message));
    l.flush();
    auto step =
        l.client.read(test::as_bytes(l.to_client), std::as_writable_bytes(std::span(plaintext)));
    if (!written || !step || step->plaintext != message.size()) {
      state.SkipWithError("record lost");
      break;
    }
    l.to_client.erase(0, step->consumed);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}

BENCHMARK_CAPTURE(handshakes, FullTls13_EcdsaP256_X25519, Certificate::kEcdsaP256, TlsVersion::k1_3,
                  "X25519:P-256", false)
    ->UseManualTime();
BENCHMARK_CAPTURE(handshakes, FullTls13_EcdsaP256_P256, Certificate::kEcdsaP256, TlsVersion::k1_3,
                  "P-256", false)
    ->UseManualTime();
BENCHMARK_CAPTURE(handshakes, FullTls13_Rsa2048_X25519, Certificate::kRsa2048, TlsVersion::k1_3,
                  "X25519:P-256", false)
    ->UseManualTime();
BENCHMARK_CAPTURE(handshakes, FullTls12_EcdsaP256_X25519, Certificate::kEcdsaP256, TlsVersion::k1_2,
                  "X25519:P-256", false)
    ->UseManualTime();
BENCHMARK_CAPTURE(handshakes, ResumedTls13_X25519, Certificate::kEcdsaP256, TlsVersion::k1_3,
                  "X25519:P-256", true)
    ->UseManualTime();
BENCHMARK_CAPTURE(handshakes, ResumedTls12, Certificate::kEcdsaP256, TlsVersion::k1_2,
                  "X25519:P-256", true)
    ->UseManualTime();
BENCHMARK_CAPTURE(records, Tls13, TlsVersion::k1_3)->Arg(64)->Arg(4096)->Arg(16384);
BENCHMARK_CAPTURE(records, Tls12, TlsVersion::k1_2)->Arg(64)->Arg(16384);

}  // namespace
}  // namespace ucp::tls

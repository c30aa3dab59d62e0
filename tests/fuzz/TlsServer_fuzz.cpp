// libFuzzer harness over the server side of the TLS engine: what a hostile client sends,
// from the first byte (ClientHello, records, alerts), into TlsSession::handshake() and, once
// established, read(), as a connection layer feeds it.
//
// Input: the byte stream of one connection. It is fed twice to fresh sessions: whole, and
// cut into pieces (sizes from the input's length) each copied into a heap buffer of its own
// that is freed right after the call, the unconsumed rest handed to keep(): a session that
// kept a pointer into a piece is a heap-use-after-free under ASan. Both runs must end alike
// (differential check), and every call keeps the engine's promises (consumed <= given,
// plaintext <= room, a failure sticks). Then the transport's EOF.
//
// OpenSSL itself is the system's library, not instrumented: coverage guides the fuzzer
// through UCP's code and the shape of the inputs, not through libssl's branches (OpenSSL's
// own fuzzers cover those). The seeds are real ClientHellos (tests/fuzz/TlsSeeds.cpp).
//
//   make fuzz            # FUZZ_SECONDS (default 600) with the seed corpus
//   build/fuzz/bin/tls_server_fuzz -dict=tests/fuzz/tls.dict tests/fuzz/corpus/tls_server

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "ucp/tls/TlsContext.h"
#include "ucp/tls/TlsSession.h"

#include "TestCertificates.h"

namespace {

using namespace ucp::tls;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "invariant broken: %s\n", what);
  std::abort();
}

const TlsContext& server_context() {
  static const std::shared_ptr<const TlsContext> context = [] {
    const auto& pki = ucp::test::TestPki::get();
    TlsOptions options;
    options.certificates = {{pki.ecdsa.certificate, pki.ecdsa.private_key},
                            {pki.rsa.certificate, pki.rsa.private_key}};
    options.alpn = {"h2", "http/1.1"};
    options.client_ca = pki.ca_file;
    options.verify_client = VerifyClient::kOptional;
    auto built = TlsContext::server(options);
    if (!built) fail("server context");
    return *built;
  }();
  return *context;
}

struct Outcome {
  bool established = false;
  bool failed = false;
  Errc reason{};
};

// One call with `piece`; returns the bytes it consumed. Drops the output as a send would.
size_t feed(TlsSession& session, std::span<const std::byte> piece) {
  std::byte plaintext[1024];
  size_t consumed = 0;
  if (!session.established()) {
    auto step = session.handshake(piece);
    if (!step) {
      if (!session.failed() || session.failure() != step.error()) fail("handshake failure sticks");
      return piece.size();
    }
    consumed = step->consumed;
  } else {
    auto step = session.read(piece, plaintext);
    if (!step) {
      if (!session.failed()) fail("read failure sticks");
      return piece.size();
    }
    if (step->plaintext > sizeof plaintext) fail("plaintext past the buffer");
    consumed = step->consumed;
  }
  if (consumed > piece.size()) fail("consumed more than given");
  iovec buffers[8];
  while (session.has_output()) {
    const size_t count = session.gather_output(buffers);
    size_t bytes = 0;
    for (size_t i = 0; i < count; ++i) bytes += buffers[i].iov_len;
    if (bytes == 0) fail("output without bytes");
    session.consume_output(bytes);
  }
  return consumed;
}

Outcome finish(TlsSession& session) {
  // Whatever is kept, then the EOF: a session left waiting must end, never hang or pass.
  for (int i = 0; i < 64 && !session.failed() && session.has_buffered_input(); ++i)
    feed(session, {});
  session.peer_eof();
  feed(session, {});
  if (!session.failed() && !session.peer_closed()) feed(session, {});
  if (!session.failed() && !session.peer_closed()) fail("an EOF without close_notify passed");
  return {session.established(), session.failed(), reason_of(session.failure())};
}

Outcome run_whole(std::span<const std::byte> input) {
  auto session = TlsSession::accept(server_context());
  if (!session) fail("accept");
  // The rest of a call is passed again, as a caller keeping its buffer would.
  for (int i = 0; i < 64 && !input.empty() && !session->failed(); ++i) {
    const size_t consumed = feed(*session, input);
    if (consumed == 0 && !session->established()) break;
    input = input.subspan(consumed);
  }
  if (!input.empty() && !session->failed()) session->keep(input);
  return finish(*session);
}

Outcome run_pieces(std::span<const std::byte> input) {
  auto session = TlsSession::accept(server_context());
  if (!session) fail("accept");
  const size_t piece_size = 1 + input.size() % 97;
  while (!input.empty() && !session->failed()) {
    const size_t n = std::min(piece_size, input.size());
    auto piece = std::make_unique<std::byte[]>(n);
    std::memcpy(piece.get(), input.data(), n);
    const std::span<const std::byte> view(piece.get(), n);
    const size_t consumed = feed(*session, view);
    if (consumed < n && !session->failed()) session->keep(view.subspan(consumed));
    piece.reset();  // a pointer kept into it would now dangle
    input = input.subspan(n);
  }
  return finish(*session);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  const Outcome whole = run_whole(input);
  const Outcome pieces = run_pieces(input);
  if (whole.established != pieces.established || whole.failed != pieces.failed ||
      whole.reason != pieces.reason) {
    std::fprintf(stderr, "whole: established %d failed %d reason %d; pieces: %d %d %d\n",
                 whole.established, whole.failed, static_cast<int>(whole.reason),
                 pieces.established, pieces.failed, static_cast<int>(pieces.reason));
    fail("the same bytes in pieces ended differently");
  }
  return 0;
}

#pragma once
// TlsLink: a client and a server TlsSession talking through memory, for tests of the engine
// and its benchmarks. What one side outputs is appended to the other side's input string;
// the helpers drive handshakes and move plaintext, consuming exactly what a session took.
//
//   ucp::test::TlsLink link(std::move(*client), std::move(*server));
//   auto outcome = link.handshake();           // both established, or each side's error
//   link.send(link.client, "ping");            // seal, then move the records across
//   EXPECT_EQ(link.receive(link.server).text, "ping");

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "ucp/tls/TlsSession.h"

namespace ucp::test {

inline std::span<const std::byte> as_bytes(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

/// Everything `session` has to send, removed from its output.
inline std::string take_output(tls::TlsSession& session) {
  std::string out;
  iovec buffers[64];
  while (session.has_output()) {
    const size_t count = session.gather_output(buffers);
    size_t bytes = 0;
    for (size_t i = 0; i < count; ++i) {
      out.append(static_cast<const char*>(buffers[i].iov_base), buffers[i].iov_len);
      bytes += buffers[i].iov_len;
    }
    session.consume_output(bytes);
  }
  return out;
}

struct HandshakeOutcome {
  std::error_code client;
  std::error_code server;
  bool ok() const { return !client && !server; }
};

struct Received {
  std::string text;
  bool peer_closed = false;
  std::error_code error;
};

struct TlsLink {
  tls::TlsSession client;
  tls::TlsSession server;
  std::string to_client;  // ciphertext the server sent that the client has not consumed
  std::string to_server;

  TlsLink(tls::TlsSession c, tls::TlsSession s) : client(std::move(c)), server(std::move(s)) {}

  std::string& input_of(const tls::TlsSession& session) {
    return &session == &client ? to_client : to_server;
  }
  std::string& output_of(const tls::TlsSession& session) {
    return &session == &client ? to_server : to_client;
  }
  /// Moves both sides' output into the other's input; returns the bytes moved.
  size_t flush() {
    std::string from_client = take_output(client);
    std::string from_server = take_output(server);
    to_server += from_client;
    to_client += from_server;
    return from_client.size() + from_server.size();
  }

  /// Runs both handshakes until each side is established or has failed, or nothing moves.
  HandshakeOutcome handshake() {
    HandshakeOutcome outcome;
    for (int round = 0; round < 32; ++round) {
      size_t moved = step(client, outcome.client);
      moved += flush();
      moved += step(server, outcome.server);
      moved += flush();
      const bool client_done = client.established() || outcome.client;
      const bool server_done = server.established() || outcome.server;
      if (client_done && server_done) break;
      if (moved == 0 && round > 0) break;  // each waits for the other
    }
    return outcome;
  }

  /// Seals `text` on `from` and moves the records to the other side.
  std::error_code send(tls::TlsSession& from, std::string_view text) {
    auto written = from.write(as_bytes(text));
    flush();
    return written ? std::error_code() : written.error();
  }

  /// Reads on `to` everything its input holds (in reads of `chunk` bytes).
  Received receive(tls::TlsSession& to, size_t chunk = 65536) {
    Received out;
    std::string& input = input_of(to);
    std::string buffer(chunk, '\0');
    for (;;) {
      auto step = to.read(as_bytes(input), std::as_writable_bytes(std::span(buffer)));
      if (!step) {
        out.error = step.error();
        break;
      }
      input.erase(0, step->consumed);
      out.text.append(buffer.data(), step->plaintext);
      out.peer_closed = step->peer_closed;
      if (step->peer_closed || step->plaintext == 0) break;
    }
    flush();
    return out;
  }

 private:
  // One handshake call with all of the session's input; returns the bytes it consumed.
  size_t step(tls::TlsSession& session, std::error_code& error) {
    if (error || session.established()) return 0;
    std::string& input = input_of(session);
    auto result = session.handshake(as_bytes(input));
    if (!result) {
      error = result.error();
      return 0;
    }
    input.erase(0, result->consumed);
    return result->consumed;
  }
};

}  // namespace ucp::test

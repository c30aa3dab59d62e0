// A forgotten co_await does nothing: the write is never made, the timer never waited for. Every
// awaiter of the library is [[nodiscard]], so each line marked MISTAKE is a warning, an error
// under -Werror (tests/compile/ExpectDiagnostic.cmake compiles this file both ways).

#include <chrono>
#include <span>

#include "ucp/io/Operations.h"
#include "ucp/io/WithTimeout.h"
#include "ucp/net/TcpConnection.h"
#include "ucp/ws/WebSocket.h"

using namespace std::chrono_literals;

ucp::Task<> session(ucp::TcpConnection& conn) {
  const char hello[] = "hello\n";
  char buffer[64];
#ifdef UCP_CORRECT
  (void)co_await conn.write_all(std::span(hello));
  (void)co_await conn.write(std::span(hello));
  (void)co_await conn.read(buffer);
  (void)co_await conn.receive();
  (void)co_await conn.all_sent();
  (void)co_await ucp::io::sleep_for(conn.loop(), 10ms);
  (void)co_await ucp::with_timeout(conn.read(buffer), 1s);
#else
  conn.write_all(std::span(hello));          // MISTAKE
  conn.write(std::span(hello));              // MISTAKE
  conn.read(buffer);                         // MISTAKE
  conn.receive();                            // MISTAKE
  conn.all_sent();                           // MISTAKE
  ucp::io::sleep_for(conn.loop(), 10ms);     // MISTAKE
  ucp::with_timeout(conn.read(buffer), 1s);  // MISTAKE
#endif
}

ucp::Task<> chat(ucp::ws::WebSocket& ws) {
#ifdef UCP_CORRECT
  (void)co_await ws.send_text("hi");
  (void)co_await ws.receive();
  (void)co_await ws.close();
#else
  ws.send_text("hi");                        // MISTAKE
  ws.receive();                              // MISTAKE
  ws.close();                                // MISTAKE
  co_return;
#endif
}

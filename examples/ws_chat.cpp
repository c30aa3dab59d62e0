// A WebSocket chat across two worker loops: every text a member of a room sends goes to every
// member of that room (ws://127.0.0.1:9081/chat/{room}), whichever worker loop holds them.
// ucp::ws::PubSub carries each message across the loops; a member who leaves simply stops
// receiving, and one too slow to keep up is closed (1013) instead of holding memory.
// Try, in two terminals (npm install ws):
//   node -e "const W=require('ws');const w=new W('ws://127.0.0.1:9081/chat/lobby');
//   w.on('message',m=>console.log(String(m)));process.stdin.on('data',d=>w.send(String(d)))"
// Ctrl-C stops it gracefully (members get 1001 Going Away); --set and --help are the runtime's.

#include <string>

#include "ucp/app/Application.h"
#include "ucp/ws/Accept.h"
#include "ucp/ws/PubSub.h"

using ucp::Task;
using ucp::ws::WebSocket;

Task<> member(WebSocket& ws, ucp::ws::PubSub& rooms, std::string room) {
  auto joined = rooms.subscribe(ws, room);  // left when this returns
  (void)co_await ws.send_text("joined " + room);
  while (auto message = co_await ws.receive()) {
    if (message->is_text()) rooms.publish(room, message->text());  // to both loops
  }
}  // returning closes the connection (1000) once the close handshake is done

int main(int argc, char** argv) {
  ucp::app::Application app("example_ws_chat");
  app.schema().set_defaults(
      {"server.ip=127.0.0.1", "server.port=9081", "server.thread_num=2", "log.file="});
  if (auto exit_code = app.setup(argc, argv)) return *exit_code;
  ucp::ws::PubSub rooms;     // before the server: it outlives the connections
  ucp::ws::Options options;  // keep-alive: drop members that vanished
  options.ping_interval_ms = 30000;
  ucp::http::HttpServer server(app.server_options(), app.loop_options(), app.http_options());
  server.router().get(
      "/chat/{room}", [&](ucp::http::Request& req, ucp::http::Response& res) -> Task<> {
        std::string room = req.decoded_param("room").value_or("");  // "my%20room": "my room"
        ucp::ws::accept(req, res, options,
                        [&rooms, room](WebSocket& ws) { return member(ws, rooms, room); });
        co_return;
      });
  return app.serve(server, "ws_chat");
}

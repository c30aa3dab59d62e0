// A WebSocket chat room: every text message a member sends goes to every other member of the
// room it joined (ws://127.0.0.1:9081/chat/{room}). One worker loop holds the rooms, so no
// locks; with several workers, give each loop its rooms (or a Channel per member across
// loops, as examples/channel_across_loops.cpp does). Build: bin/example_ws_chat. Try, in two
// terminals:   node -e "const W=require('ws');const w=new W('ws://127.0.0.1:9081/chat/lobby');
//   w.on('message',m=>console.log(String(m)));process.stdin.on('data',d=>w.send(String(d)))"
// Ctrl-C stops it gracefully (members get 1001 Going Away); signals, --set and --help are the
// runtime's (ucp/app/Application.h).

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ucp/app/Application.h"
#include "ucp/http/HttpServer.h"
#include "ucp/ws/Accept.h"
#include "ucp/ws/WebSocket.h"

using ucp::Task;
using ucp::ws::WebSocket;

struct Member {
  WebSocket& ws;
  bool gone = false;  // left: skip it (a broadcast may hold it a little longer)
};
using Room = std::vector<std::shared_ptr<Member>>;

Task<> chat(WebSocket& ws, Room& room) {
  auto me = std::make_shared<Member>(Member{ws});
  room.push_back(me);
  while (auto message = co_await ws.receive()) {
    if (!message->is_text()) continue;
    const std::string text(message->text());  // receive() reuses its buffer: keep a copy
    for (auto member : Room(room)) {          // a copy: members may leave while we send
      if (member != me && !member->gone) co_await member->ws.send_text(text);
    }
  }
  me->gone = true;
  std::erase(room, me);
}  // returning closes the connection (1000) once the close handshake is done

int main(int argc, char** argv) {
  ucp::app::Application app("example_ws_chat");
  // One loop: the rooms below are touched by it alone, whatever a config file says.
  app.schema().set_defaults({"server.ip=127.0.0.1", "server.port=9081", "log.file="});
  if (auto exit_code = app.setup(argc, argv)) return *exit_code;
  ucp::ServerOptions options = app.server_options();
  options.thread_num = 1;
  ucp::http::HttpServer server(options, app.loop_options(), app.http_options());
  std::map<std::string, Room> rooms;
  ucp::ws::Options ws_options;
  ws_options.ping_interval_ms = 30000;  // keep-alive: drop members that vanished
  server.router().get(
      "/chat/{room}", [&](ucp::http::Request& req, ucp::http::Response& res) -> Task<> {
        Room& room = rooms[std::string(req.param("room"))];  // 400/426 unless a valid upgrade:
        ucp::ws::accept(req, res, ws_options, [&room](WebSocket& ws) { return chat(ws, room); });
        co_return;
      });
  return app.serve(server, "ws_chat");
}

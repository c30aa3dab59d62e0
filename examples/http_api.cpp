// A small HTTP API: a key-value store of JSON documents, served by two worker loops.
//   curl -X PUT -H 'Content-Type: application/json' -d '{"qty":5}' 127.0.0.1:9082/items/apple
//   curl 127.0.0.1:9082/items/apple        {"qty":5}
//   curl 127.0.0.1:9082/items              ["apple"]
//   curl -X DELETE 127.0.0.1:9082/items/apple
// Routes with (percent-decoded) parameters, JSON bodies read and written with nlohmann/json
// (ucp/http/Json.h), a status per outcome, one lock for the store the workers share. The
// runtime (ucp/app/Application.h) gives it --set, --help, signals and the exit codes.

#include <map>
#include <mutex>
#include <string>

#include "ucp/app/Application.h"
#include "ucp/http/Json.h"

using ucp::http::Request;
using ucp::http::Response;
namespace http = ucp::http;

int main(int argc, char** argv) {
  ucp::app::Application app("example_http_api");
  app.schema().set_defaults({"server.port=9082", "server.thread_num=2", "log.file="});
  if (auto exit_code = app.setup(argc, argv)) return *exit_code;
  std::mutex mutex;  // the two workers share the store
  std::map<std::string, http::Json> items;
  http::HttpServer server(app.server_options(), app.loop_options(), app.http_options());
  auto& api = server.router();
  auto key = [](Request& req) { return req.decoded_param("key").value_or(""); };  // "my%20x"
  api.get("/items", [&](Request&, Response& res) -> ucp::Task<> {
    std::lock_guard lock(mutex);
    http::Json keys = http::Json::array();
    for (const auto& item : items) keys.push_back(item.first);
    co_return http::json(res, keys);
  });
  api.get("/items/{key}", [&](Request& req, Response& res) -> ucp::Task<> {
    std::lock_guard lock(mutex);
    auto item = items.find(key(req));
    if (item == items.end()) co_return res.reply(404);
    co_return http::json(res, item->second);
  });
  api.put("/items/{key}", [&](Request& req, Response& res) -> ucp::Task<> {
    if (!http::is_json(req)) co_return res.reply(415);
    auto body = http::read_json(req);
    if (!body) co_return res.text(body.error().message + "\n", 400);
    std::lock_guard lock(mutex);
    auto [item, created] = items.insert_or_assign(key(req), std::move(*body));
    res.reply(created ? 201 : 204);
  });
  api.del("/items/{key}", [&](Request& req, Response& res) -> ucp::Task<> {
    std::lock_guard lock(mutex);
    co_return res.reply(items.erase(key(req)) > 0 ? 204 : 404);
  });
  return app.serve(server);
}

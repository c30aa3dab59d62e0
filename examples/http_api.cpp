// A small HTTP API: a key-value store of JSON documents, served by two worker loops.
//   curl -X PUT -H 'Content-Type: application/json' -d '{"qty":5}' 127.0.0.1:9082/items/apple
//   curl 127.0.0.1:9082/items/apple        {"qty":5}
//   curl 127.0.0.1:9082/items              ["apple"]
//   curl -X DELETE 127.0.0.1:9082/items/apple
// Routes with parameters, a status per outcome, one lock for the store the workers share; the
// runtime (ucp/app/Application.h) gives it --set, --help, signals and the exit codes.

#include <map>
#include <mutex>
#include <string>

#include "ucp/app/Application.h"

using ucp::Task;
using ucp::http::Request;
using ucp::http::Response;

int main(int argc, char** argv) {
  ucp::app::Application app("example_http_api");
  app.schema().set_defaults(
      {"server.ip=127.0.0.1", "server.port=9082", "server.thread_num=2", "log.file="});
  if (auto exit_code = app.setup(argc, argv)) return *exit_code;
  std::mutex mutex;  // the two workers share the store
  std::map<std::string, std::string, std::less<>> items;
  ucp::http::HttpServer server(app.server_options(), app.loop_options(), app.http_options());
  auto& api = server.router();
  api.get("/items", [&](Request&, Response& res) -> Task<> {
    std::string list = "[";
    std::lock_guard lock(mutex);
    for (const auto& [key, value] : items) list += (list.size() > 1 ? ",\"" : "\"") + key + "\"";
    res.set_content_type("application/json");
    res.body_buffer() = list + "]";
    co_return;
  });
  api.get("/items/{key}", [&](Request& req, Response& res) -> Task<> {
    std::lock_guard lock(mutex);
    auto item = items.find(req.param("key"));
    if (item == items.end()) co_return res.set_status(404);
    res.set_content_type("application/json");
    res.body_buffer() = item->second;
  });
  api.put("/items/{key}", [&](Request& req, Response& res) -> Task<> {
    if (!req.header("content-type").starts_with("application/json")) co_return res.set_status(415);
    std::lock_guard lock(mutex);
    const bool created = items.insert_or_assign(std::string(req.param("key")), req.body()).second;
    res.set_status(created ? 201 : 204);
  });
  api.del("/items/{key}", [&](Request& req, Response& res) -> Task<> {
    std::lock_guard lock(mutex);
    res.set_status(items.erase(std::string(req.param("key"))) > 0 ? 204 : 404);
    co_return;
  });
  return app.serve(server);
}

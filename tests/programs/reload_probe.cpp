// A server on the application runtime with a key its reload hook applies ([probe] word, GET /
// answers it) and a value the hook refuses ("refuse"): ReloadHook_test drives it with SIGHUP.

#include <atomic>
#include <memory>
#include <string>

#include "ucp/app/Application.h"
#include "ucp/http/HttpServer.h"

int main(int argc, char** argv) {
  ucp::app::Application app("reload_probe");
  app.schema().section("probe").text("word", "first", "what GET / answers").reloadable();
  if (auto exit_code = app.setup(argc, argv)) return *exit_code;
  // Workers read it per request while the main loop's hook replaces it.
  std::atomic<std::shared_ptr<const std::string>> word(
      std::make_shared<const std::string>(app.config().get<std::string>("probe.word")));
  app.on_reload([&](const ucp::app::Config& fresh) -> ucp::Result<void, ucp::Error> {
    std::string next = fresh.get<std::string>("probe.word");
    if (next == "refuse") return ucp::Unexpected{ucp::Error("probe.word: \"refuse\" is refused")};
    word.store(std::make_shared<const std::string>(std::move(next)));
    return {};
  });
  ucp::http::HttpServer server(app.server_options(), app.loop_options(), app.http_options());
  server.router().get("/", [&](ucp::http::Request&, ucp::http::Response& res) -> ucp::Task<> {
    res.set_body(*word.load());
    co_return;
  });
  return app.serve(server);
}

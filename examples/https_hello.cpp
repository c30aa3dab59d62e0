// HTTPS in a few lines: an HTTP/1.1 server with [tls] on. The runtime (ucp/app/Application.h)
// reads and checks the certificate and key (exit 2 naming the file if one is wrong), serves
// TLS 1.2 and 1.3 with ALPN http/1.1, and reads the files again on SIGHUP. Try (`make
// run-https` does the same with bin/http_server):
//   openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30
//     -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1
//     -keyout key.pem -out cert.pem                          (one command, on one line)
//   bin/example_https_hello --set tls.certificate=cert.pem --set tls.private_key=key.pem
//   curl --cacert cert.pem https://localhost:9443/hello/world
// Ctrl-C stops it gracefully.

#include <string>

#include "ucp/app/Application.h"
#include "ucp/http/HttpServer.h"
#include "ucp/tls/TlsSession.h"

using ucp::Task;
using ucp::http::Request;
using ucp::http::Response;

int main(int argc, char** argv) {
  ucp::app::Application app("example_https_hello");
  app.schema().set_defaults({"server.ip=127.0.0.1", "server.port=9443", "server.thread_num=2",
                             "log.file=", "tls.enable=true"});
  if (auto exit_code = app.setup(argc, argv)) return *exit_code;

  ucp::http::HttpServer server(app.server_options(), app.loop_options(), app.http_options());
  server.router().get("/hello/{name}", [](Request& req, Response& res) -> Task<> {
    std::string body = "Hello, " + std::string(req.param("name")) + "!\n";
    if (const ucp::tls::TlsSession* tls = req.tls()) {  // null with --set tls.enable=false
      body += std::string(tls->version()) + " " + std::string(tls->cipher()) + " ALPN " +
              std::string(tls->alpn().empty() ? "none" : tls->alpn()) + "\n";
    }
    res.text(std::move(body));
    co_return;
  });
  return app.serve(server);
}

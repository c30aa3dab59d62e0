// An HTTP client: GET a URL and stream the body to stdout as it arrives (never whole in
// memory), then GET it again on the same keep-alive connection. Errors are values: a refused
// connect, a timeout, a malformed answer each print one line.
// Usage: bin/example_http_fetch [URL] [--follow] [--cacert FILE]
//   (default http://127.0.0.1:8888/: bin/http_server; --follow follows up to 5 redirects;
//   https:// URLs are verified against the system's CAs, or only FILE's with --cacert)

#include <cstdio>
#include <string>
#include <string_view>

#include "ucp/http/Client.h"
#include "ucp/tls/TlsContext.h"

namespace {

ucp::Task<bool> fetch(ucp::http::Client& client, const std::string& url) {
  auto response = co_await client.get(url);
  if (!response) {  // connection_refused, timed_out, ClientErrc::kMalformedResponse, ...
    std::fprintf(stderr, "GET %s: %s\n", url.c_str(), response.error().message().c_str());
    co_return false;
  }
  std::fprintf(stderr, "%d %.*s from %s\n", response->status(),
               static_cast<int>(response->reason().size()), response->reason().data(),
               response->url().c_str());
  for (;;) {
    auto piece = co_await response->read();  // a view into the received buffer
    if (!piece) {
      std::fprintf(stderr, "body: %s\n", piece.error().message().c_str());
      co_return false;
    }
    if (piece->empty()) co_return true;  // the end: the connection goes back to the pool
    std::fwrite(piece->data(), 1, piece->size(), stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string url = "http://127.0.0.1:8888/";
  ucp::http::ClientOptions options;
  options.timeout_ms = 5000;  // each wait for the server's bytes
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--follow") {
      options.max_redirects = 5;
    } else if (std::string_view(argv[i]) == "--cacert" && i + 1 < argc) {
      ucp::tls::TlsClientOptions tls_options;
      tls_options.ca_file = argv[++i];
      auto tls = ucp::http::Client::tls_context(tls_options);
      if (!tls) {
        std::fprintf(stderr, "%s\n", tls.error().message.c_str());
        return 2;
      }
      options.tls = *tls;
    } else {
      url = argv[i];
    }
  }
  const ucp::LoopOptions loop_options;
  auto loop = ucp::EventLoop::create(loop_options);
  if (!loop) {
    std::fprintf(stderr, "%s\n",
                 ucp::EventLoop::describe_setup_error(loop.error(), loop_options).c_str());
    return 1;
  }
  int status = 1;
  (*loop)->spawn([](ucp::EventLoop& l, ucp::http::ClientOptions o, std::string u,
                    int& exit_code) -> ucp::Task<> {
    ucp::http::Client client(l, o);
    if (co_await fetch(client, u) && co_await fetch(client, u)) exit_code = 0;
    std::fprintf(stderr, "%llu connection(s) for two requests\n",
                 static_cast<unsigned long long>(client.connections_made()));
    l.stop();
  }(**loop, options, url, status));
  (*loop)->run();
  return status;
}

#pragma once
// The library's own config sections, what every UCP server has: [server] (the listening
// socket, workers, connection limits, graceful stop, takeover), [event_loop] (LoopOptions),
// [log] (LogOptions and the stats line), [http] (HttpOptions) and [tls] (TlsOptions: every
// file it names is loaded and checked with the configuration). Declared with their
// defaults, ranges and help (docs/config.md has the table), and mapped onto the options of
// the layers in one call:
//
//   ucp::app::ConfigSchema schema;
//   ucp::app::declare_server_sections(schema);
//   auto config = ucp::app::Config::load(schema, path, overrides);
//   const ucp::app::ServerSettings s = ucp::app::server_settings(*config);
//   ucp::http::HttpServer server(s.server, s.loop, s.http);
//
// Application does this for a program; keys that only one program has (a static-file root, a
// protocol switch) are that program's to declare.
//
// Another layer's section is added here: declare its keys in declare_server_sections, give
// ServerSettings a field with that layer's options, fill it in server_settings, and list the
// keys in docs/config.md (BinaryKeys_test checks the table).
//
// Beyond the ranges, the start-up memory (every worker's buffers and ring, the log queue)
// must fit in half of the machine's physical memory; a configuration that does not is refused
// when it loads, naming the key set last among those that decide it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "ucp/app/Config.h"
#include "ucp/app/ConfigSchema.h"
#include "ucp/http/HttpServer.h"
#include "ucp/io/EventLoop.h"
#include "ucp/log/LogOptions.h"
#include "ucp/net/TcpServer.h"
#include "ucp/tls/TlsOptions.h"

namespace ucp::app {

/// Changes the loop options a configuration gives before they are used and checked (a
/// program whose workers need larger receive buffers than configured raises them here).
using LoopAdjustment = std::function<void(const Config& config, LoopOptions& loop)>;

/// Declares [server], [event_loop], [log], [http] and [tls], the start-up memory check and the
/// TLS files' check. The
/// check applies `*adjust` when it is set at load time (null: no adjustment).
void declare_server_sections(ConfigSchema& schema, const LoopAdjustment* adjust = nullptr);

/// What the library's sections say, as the options of the layers they configure.
struct ServerSettings {
  std::string name;        // server.name: shown in the start-up line
  ServerOptions server;    // [server], plus event_loop.msg_ring_handoff
  LoopOptions loop;        // [event_loop] (no provided buffers without multishot_recv)
  http::HttpOptions http;  // [http], with body reads bounded by server.read_timeout_ms
  LogOptions log;          // [log]
  std::chrono::milliseconds stats_interval{0};  // log.stats_interval_ms; 0 = no stats line
  std::string takeover_socket;                  // server.takeover_socket; empty = none
  std::optional<tls::TlsOptions> tls;           // [tls] with enable = true; else none
};

ServerSettings server_settings(const Config& config);

/// [tls] as TlsOptions (also at each SIGHUP: the file names may change); none when
/// tls.enable is false.
std::optional<tls::TlsOptions> tls_options(const Config& config);

/// What a server maps at start (docs/config.md, "Start-up memory").
struct StartupMemory {
  uint32_t workers = 0;
  uint64_t per_worker = 0;  // provided buffers and their ring, registered buffers, io_uring
  uint64_t shared = 0;      // the log queue and the accepting loop's io_uring
  uint64_t total() const noexcept { return workers * per_worker + shared; }
};

StartupMemory startup_memory(const ServerOptions& server, const LoopOptions& loop,
                             const LogOptions& log, const MachineLimits& machine);

/// "512.0 MiB": bytes for people; the exact figure goes beside it where it matters.
std::string human_bytes(uint64_t bytes);

}  // namespace ucp::app

// The library's sections: the seed's example loads verbatim, every key maps onto the layers'
// options, the messages of today's binaries, the file limits, and the start-up memory check.

#include "ucp/app/ServerSections.h"

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/app/Config.h"
#include "ucp/net/CpuAffinity.h"

#include "TestCertificates.h"

namespace ucp::app {
namespace {

// The original example configuration (docs/design.md, section 7), byte for byte: it must
// load unchanged.
constexpr char kSpecExample[] = R"ini([server]
name = TcpServer
ip = 0.0.0.0
port = 8888
thread_num = 16          ; worker threads; 0 = one per CPU
read_timeout_ms = 5000   ; idle read timeout, 0 = none
[event_loop]
ring_entries = 32768
sqpoll = true
sqpoll_idle_ms = 50
registered_buffers_count = 16384
registered_buffer_size = 4096
pending_queue_capacity = 65536   ; SQEs waiting when the SQ is full
[log]
level = INFO             ; TRACE DEBUG INFO WARN ERROR FATAL
file = logs/server.log
max_size = 104857600     ; bytes per file before rolling
max_files = 10
async = true
console = true
flush_interval_ms = 1000
)ini";

constexpr uint64_t kGiB = uint64_t{1} << 30;

class Sections : public ::testing::Test {
 protected:
  void SetUp() override { declare_server_sections(schema_); }

  Result<Config, ConfigError> parse(const std::string& text,
                                    const std::vector<std::string>& overrides = {},
                                    const MachineLimits& machine = MachineLimits{64 * kGiB, 2}) {
    return Config::parse(schema_, text, "ucp.conf", overrides, machine);
  }
  Config must(const std::string& text, const std::vector<std::string>& overrides = {}) {
    auto parsed = parse(text, overrides);
    if (!parsed) {
      ADD_FAILURE() << parsed.error().message();
      return Config(schema_);
    }
    return std::move(*parsed);
  }
  ServerSettings settings(const std::string& text, const std::vector<std::string>& overrides = {}) {
    return server_settings(must(text, overrides));
  }
  std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
    auto parsed = parse(text, overrides);
    return parsed ? "" : parsed.error().message();
  }
  std::string error_on(const MachineLimits& machine, const std::string& text,
                       const std::vector<std::string>& overrides = {}) {
    auto parsed = parse(text, overrides, machine);
    return parsed ? "" : parsed.error().message();
  }
  std::string load_error(const std::string& path) {
    auto loaded = Config::load(schema_, path);
    return loaded ? "" : loaded.error().message();
  }
  static std::string write_temp_file(const std::string& name, const std::string& text) {
    std::string path = testing::TempDir() + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  ConfigSchema schema_;
};

TEST_F(Sections, SpecExampleLoadsVerbatim) {
  const ServerSettings s = settings(kSpecExample);
  EXPECT_EQ(s.name, "TcpServer");
  EXPECT_EQ(s.server.ip, "0.0.0.0");
  EXPECT_EQ(s.server.port, 8888);
  EXPECT_EQ(s.server.thread_num, 16u);
  EXPECT_EQ(s.server.read_timeout_ms, 5000u);
  EXPECT_EQ(s.loop.ring_entries, 32768u);
  EXPECT_TRUE(s.loop.sqpoll);
  EXPECT_EQ(s.loop.sqpoll_idle_ms, 50u);
  EXPECT_EQ(s.loop.registered_buffers_count, 16384u);
  EXPECT_EQ(s.loop.registered_buffer_size, 4096u);
  EXPECT_EQ(s.loop.pending_queue_capacity, 65536u);
  EXPECT_EQ(s.log.level, LogLevel::kInfo);
  EXPECT_EQ(s.log.file, "logs/server.log");
  EXPECT_EQ(s.log.max_size, 104857600u);
  EXPECT_EQ(s.log.max_files, 10u);
  EXPECT_TRUE(s.log.async);
  EXPECT_TRUE(s.log.console);
  EXPECT_EQ(s.log.flush_interval_ms, 1000u);
  auto loaded = Config::load(schema_, write_temp_file("spec_example.conf", kSpecExample), {},
                             MachineLimits{64 * kGiB, 2});
  ASSERT_TRUE(loaded) << loaded.error().message();
  EXPECT_EQ(loaded->get<uint32_t>("event_loop.ring_entries"), 32768u);
}

// The defaults a file gives are the defaults the layers' option structs have (base/Defaults.h):
// a program that builds its options by hand and one that reads an empty file agree.
TEST_F(Sections, DefaultsAreTheOptionStructsDefaults) {
  for (const char* text :
       {"", "\n# only a comment\n; another\n", "[server]\n[event_loop]\n[log]\n[http]\n"}) {
    const ServerSettings s = settings(text);
    const ServerOptions server;
    EXPECT_EQ(s.name, "TcpServer");
    EXPECT_EQ(s.server.ip, server.ip);
    EXPECT_EQ(s.server.port, server.port);
    EXPECT_EQ(s.server.thread_num, server.thread_num);
    EXPECT_EQ(s.server.read_timeout_ms, server.read_timeout_ms);
    EXPECT_EQ(s.server.max_connections, server.max_connections);
    EXPECT_EQ(s.server.listen.backlog, server.listen.backlog);
    EXPECT_EQ(s.server.listen.reuse_port, server.listen.reuse_port);
    EXPECT_EQ(s.server.acceptors, server.acceptors);
    EXPECT_EQ(s.server.tcp_nodelay, server.tcp_nodelay);
    EXPECT_EQ(s.server.shutdown_timeout_ms, server.shutdown_timeout_ms);
    EXPECT_EQ(s.server.msg_ring_handoff, server.msg_ring_handoff);
    EXPECT_EQ(s.server.max_output_bytes, server.max_output_bytes);
    EXPECT_EQ(s.server.write_timeout_ms, server.write_timeout_ms);
    EXPECT_EQ(s.server.cpu_affinity.mode, server.cpu_affinity.mode);
    const LoopOptions loop;
    EXPECT_EQ(s.loop.sqpoll_cpu, loop.sqpoll_cpu);
    EXPECT_EQ(s.loop.busy_poll_us, loop.busy_poll_us);
    EXPECT_EQ(s.loop.backend, loop.backend);
    EXPECT_EQ(s.loop.ring_entries, loop.ring_entries);
    EXPECT_EQ(s.loop.sqpoll, loop.sqpoll);
    EXPECT_EQ(s.loop.sqpoll_idle_ms, loop.sqpoll_idle_ms);
    EXPECT_EQ(s.loop.pending_queue_capacity, loop.pending_queue_capacity);
    EXPECT_EQ(s.loop.defer_taskrun, loop.defer_taskrun);
    // A bare LoopOptions leaves the receive buffers to the loop's purpose (a TcpServer's
    // workers get kProvidedBuffersCount); a config gives every server loop that count.
    EXPECT_FALSE(loop.provided_buffers_count.has_value());
    EXPECT_EQ(s.loop.provided_buffers_count, defaults::kProvidedBuffersCount);
    EXPECT_EQ(s.loop.provided_buffer_size, loop.provided_buffer_size);
    EXPECT_EQ(s.loop.registered_buffers_count, loop.registered_buffers_count);
    EXPECT_EQ(s.loop.registered_buffer_size, loop.registered_buffer_size);
    EXPECT_EQ(s.loop.cqe_batch, loop.cqe_batch);
    const LogOptions log;
    EXPECT_EQ(s.log.level, log.level);
    EXPECT_EQ(s.log.file, log.file);
    EXPECT_EQ(s.log.max_size, log.max_size);
    EXPECT_EQ(s.log.max_files, log.max_files);
    EXPECT_EQ(s.log.daily, log.daily);
    EXPECT_EQ(s.log.async, log.async);
    EXPECT_EQ(s.log.console, log.console);
    EXPECT_EQ(s.log.flush_interval_ms, log.flush_interval_ms);
    EXPECT_EQ(s.log.queue_capacity, log.queue_capacity);
    EXPECT_EQ(s.log.queue_full_policy, log.queue_full_policy);
    EXPECT_EQ(s.log.format, log.format);
    EXPECT_EQ(s.log.time_format, log.time_format);
    EXPECT_EQ(s.log.journald, log.journald);
    EXPECT_EQ(s.stats_interval.count(), 0);
    EXPECT_EQ(s.takeover_socket, "");
    const http::HttpOptions http;
    EXPECT_EQ(s.http.max_request_line_bytes, http.max_request_line_bytes);
    EXPECT_EQ(s.http.max_header_bytes, http.max_header_bytes);
    EXPECT_EQ(s.http.max_body_bytes, http.max_body_bytes);
    EXPECT_EQ(s.http.header_timeout_ms, http.header_timeout_ms);
    EXPECT_EQ(s.http.keepalive_timeout_ms, http.keepalive_timeout_ms);
    EXPECT_EQ(s.http.send_timeout_ms, http.send_timeout_ms);
    EXPECT_EQ(s.http.body_timeout_ms, s.server.read_timeout_ms);
  }
}

// A server on the library's defaults keeps a quiet long-lived session: a FIX session beats
// every 30 s, an IM client pings every 25 s, MQTT every 60 s (its broker waits 1.5 times
// that). The idle timeout must outlast a beat or more missed, here and through the config.
TEST_F(Sections, LibraryDefaultsKeepQuietSessionsOpen) {
  constexpr uint32_t kMqttKeepAliveGraceMs = 90000;
  EXPECT_GT(ServerOptions{}.read_timeout_ms, kMqttKeepAliveGraceMs);
  EXPECT_GT(settings("").server.read_timeout_ms, kMqttKeepAliveGraceMs);
  // HTTP connections have no read timeout (the [http] ones apply); an idle keep-alive
  // connection outlasts a 30 s poll, and a WebSocket has no idle timeout of its own.
  EXPECT_EQ(settings("").http.keepalive_timeout_ms, defaults::kKeepaliveTimeoutMs);
  EXPECT_GT(defaults::kKeepaliveTimeoutMs, 60000u);
}

TEST_F(Sections, EveryKeyMapsOntoItsOption) {
  const auto& pki = test::TestPki::get();
  const int cpu = allowed_cpus().back();  // a CPU this process may use: the check wants one
  const Config config = must(R"ini(
[server]
name = Edge
ip = 127.0.0.1
port = 0
thread_num = 0
read_timeout_ms = 0
max_connections = 7
backlog = 128
reuse_port = yes
acceptors = per_worker
tcp_nodelay = no
shutdown_timeout_ms = 250
max_output_bytes = 4294967296
write_timeout_ms = 86400000
takeover_socket = @ucp-test
cpu_affinity = auto
[event_loop]
backend = epoll
ring_entries = 8
sqpoll = on
sqpoll_idle_ms = 0
busy_poll_us = 1000000
registered_buffers_count = 16384
registered_buffer_size = 64
pending_queue_capacity = 0
multishot_recv = off
provided_buffers_count = 1
provided_buffer_size = 1048576
defer_taskrun = false
cqe_batch = 7
msg_ring_handoff = true
[log]
level = trace
file =
max_size = 0
max_files = 0
daily = true
async = false
console = false
flush_interval_ms = 1
queue_capacity = 16
queue_full_policy = drop
format = json
time_format = utc
journald = on
stats_interval_ms = 86400000
[http]
max_request_line_bytes = 256
max_header_bytes = 16777216
max_body_bytes = 0
header_timeout_ms = 0
keepalive_timeout_ms = 86400000
send_timeout_ms = 1
[tls]
enable = true
certificate = )ini" + pki.ecdsa.certificate +
                                 R"ini(
private_key = )ini" + pki.ecdsa.private_key +
                                 R"ini(
sni_certificates = )ini" + pki.rsa.certificate +
                                 " " + pki.rsa.private_key + R"ini(
min_version = 1.3
alpn = h2, http/1.1
session_tickets = false
client_ca = )ini" + pki.ca_file +
                                 R"ini(
verify_client = require
handshake_timeout_ms = 1
)ini",
                             {"event_loop.sqpoll_cpu=" + std::to_string(cpu)});
  const ServerSettings s = server_settings(config);
  EXPECT_EQ(s.name, "Edge");
  EXPECT_EQ(s.server.ip, "127.0.0.1");
  EXPECT_EQ(s.server.port, 0);
  EXPECT_EQ(s.server.thread_num, 0u);
  EXPECT_EQ(s.server.read_timeout_ms, 0u);
  EXPECT_EQ(s.server.max_connections, 7u);
  EXPECT_EQ(s.server.listen.backlog, 128u);
  EXPECT_TRUE(s.server.listen.reuse_port);
  EXPECT_EQ(s.server.acceptors, Acceptors::kPerWorker);
  EXPECT_FALSE(s.server.tcp_nodelay);
  EXPECT_EQ(s.server.shutdown_timeout_ms, 250u);
  EXPECT_EQ(s.server.max_output_bytes, 4294967296u);
  EXPECT_EQ(s.server.write_timeout_ms, 86400000u);
  EXPECT_EQ(s.takeover_socket, "@ucp-test");
  EXPECT_EQ(s.server.cpu_affinity.mode, CpuAffinity::Mode::kAuto);
  EXPECT_EQ(s.loop.backend, BackendKind::kEpoll);
  EXPECT_EQ(s.loop.sqpoll_cpu, cpu);
  EXPECT_EQ(s.loop.busy_poll_us, 1000000u);
  EXPECT_EQ(s.loop.ring_entries, 8u);
  EXPECT_TRUE(s.loop.sqpoll);
  EXPECT_EQ(s.loop.sqpoll_idle_ms, 0u);
  EXPECT_EQ(s.loop.registered_buffers_count, 16384u);
  EXPECT_EQ(s.loop.registered_buffer_size, 64u);
  EXPECT_EQ(s.loop.pending_queue_capacity, 0u);
  EXPECT_EQ(s.loop.provided_buffers_count, 0u);  // multishot_recv = off
  EXPECT_EQ(s.loop.provided_buffer_size, 1048576u);
  EXPECT_FALSE(s.loop.defer_taskrun);
  EXPECT_EQ(s.loop.cqe_batch, 7u);
  EXPECT_TRUE(s.server.msg_ring_handoff);
  EXPECT_EQ(s.log.level, LogLevel::kTrace);
  EXPECT_EQ(s.log.file, "");
  EXPECT_EQ(s.log.max_size, 0u);
  EXPECT_EQ(s.log.max_files, 0u);
  EXPECT_TRUE(s.log.daily);
  EXPECT_FALSE(s.log.async);
  EXPECT_FALSE(s.log.console);
  EXPECT_EQ(s.log.flush_interval_ms, 1u);
  EXPECT_EQ(s.log.queue_capacity, 16u);
  EXPECT_EQ(s.log.queue_full_policy, QueueFullPolicy::kDrop);
  EXPECT_EQ(s.log.format, LogFormat::kJson);
  EXPECT_EQ(s.log.time_format, LogTimeFormat::kUtc);
  EXPECT_EQ(s.log.journald, JournalPrefix::kOn);
  EXPECT_EQ(s.stats_interval.count(), 86400000);
  EXPECT_EQ(s.http.max_request_line_bytes, 256u);
  EXPECT_EQ(s.http.max_header_bytes, 16777216u);
  EXPECT_EQ(s.http.max_body_bytes, 0u);
  EXPECT_EQ(s.http.header_timeout_ms, 0u);
  EXPECT_EQ(s.http.keepalive_timeout_ms, 86400000u);
  EXPECT_EQ(s.http.send_timeout_ms, 1u);
  ASSERT_TRUE(s.tls);
  ASSERT_EQ(s.tls->certificates.size(), 2u);
  EXPECT_EQ(s.tls->certificates[0].certificate, pki.ecdsa.certificate);
  EXPECT_EQ(s.tls->certificates[0].private_key, pki.ecdsa.private_key);
  EXPECT_EQ(s.tls->certificates[1].certificate, pki.rsa.certificate);
  EXPECT_EQ(s.tls->certificates[1].private_key, pki.rsa.private_key);
  EXPECT_EQ(s.tls->min_version, tls::TlsVersion::k1_3);
  EXPECT_EQ(s.tls->alpn, (std::vector<std::string>{"h2", "http/1.1"}));
  EXPECT_FALSE(s.tls->session_tickets);
  EXPECT_EQ(s.tls->client_ca, pki.ca_file);
  EXPECT_EQ(s.tls->verify_client, tls::VerifyClient::kRequire);
  EXPECT_EQ(s.tls->handshake_timeout_ms, 1u);
  // Every key differs from its default here, so every key is listed as a change.
  size_t keys = 0;
  for (const SectionSchema& section : schema_.sections()) keys += section.keys().size();
  EXPECT_EQ(Config::changes(Config(schema_), config).size(), keys);
  EXPECT_EQ(keys, 60u);
}

TEST_F(Sections, ValuesAreWrittenAsBefore) {
  const ServerSettings s = settings(
      "[server] ; the server\n"
      "port = 80 ; a comment\n"
      "thread_num = 3 # another\n"
      "name = a b\t; inner space kept\n"
      "[log]# no space needed after a header\n"
      "file = logs/a#b;c.log   ; '#' and ';' inside a value stay\n"
      "level = WARN\t# a tab before the comment is enough\n");
  EXPECT_EQ(s.server.port, 80);
  EXPECT_EQ(s.server.thread_num, 3u);
  EXPECT_EQ(s.name, "a b");
  EXPECT_EQ(s.log.file, "logs/a#b;c.log");
  EXPECT_EQ(s.log.level, LogLevel::kWarn);
  const ServerSettings t = settings(
      "\xEF\xBB\xBF  [ server ]  \r\n\tport\t=\t81\t\r\n   name=x   \r\nip    =    127.0.0.1\r\n"
      "   \t  \r\n    ; indented comment\r\n[log]\r\nlevel = debug\r\n[server]\r\nbacklog = 5");
  EXPECT_EQ(t.server.port, 81);
  EXPECT_EQ(t.name, "x");
  EXPECT_EQ(t.server.ip, "127.0.0.1");
  EXPECT_EQ(t.log.level, LogLevel::kDebug);
  EXPECT_EQ(t.server.listen.backlog, 5u);  // a reopened section, a last line without newline
  for (const char* ip : {"::1", "::", "fe80::1", "2001:db8::42", "::ffff:127.0.0.1"}) {
    EXPECT_EQ(settings(std::string("[server]\nip = ") + ip + "\n").server.ip, ip);
  }
  for (auto [text, level] :
       std::vector<std::pair<std::string, LogLevel>>{{"TRACE", LogLevel::kTrace},
                                                     {"debug", LogLevel::kDebug},
                                                     {"Info", LogLevel::kInfo},
                                                     {"WARN", LogLevel::kWarn},
                                                     {"ERROR", LogLevel::kError},
                                                     {"FATAL", LogLevel::kFatal}}) {
    EXPECT_EQ(settings("[log]\nlevel = " + text).log.level, level) << text;
  }
}

// The messages the binaries have always given, key by key (with hints where a name is
// unknown).
TEST_F(Sections, ErrorsNameFileLineKeyAndProblem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[server]\n\n\n\n\n\nport = 70000\n",
       "ucp.conf:7: server.port: 70000 is out of range [0, 65535]"},
      {"# c\n\n[foo]\n",
       "ucp.conf:3: unknown section [foo] (known: [server], [event_loop], [log], [http] or [tls])"},
      {"[server]\n[Server]\n", "ucp.conf:2: unknown section [Server] (did you mean [server]?)"},
      {"[server]\nport = 1\n\n\n\n\n\n\ncolour = red\n", "ucp.conf:9: server.colour: unknown key"},
      {"[log]\nport = 1\n", "ucp.conf:2: log.port: unknown key (did you mean server.port?)"},
      {"[server]\nthread_nm = 1\n",
       "ucp.conf:2: server.thread_nm: unknown key (did you mean server.thread_num?)"},
      {"port = 80\n", "ucp.conf:1: port: key outside any section (it belongs under [server])"},
      {"[server]\n\n\n\nport = 1\n[log]\n\n\n\n\n[server]\nport = 2\n",
       "ucp.conf:12: server.port: duplicate key (first set on line 5)"},
      {"[server]\nport = 80;x\n", "ucp.conf:2: server.port: \"80;x\" is not an unsigned integer"},
      {"[server]\nport = -1\n",
       "ucp.conf:2: server.port: \"-1\" is negative (expected an integer in [0, 65535])"},
      {"[server]\nport = +1\n", "ucp.conf:2: server.port: \"+1\" is not an unsigned integer"},
      {"[server]\nport = 0x50\n", "ucp.conf:2: server.port: \"0x50\" is not an unsigned integer"},
      {"[server]\nport =\n",
       "ucp.conf:2: server.port: empty value (expected an integer in [0, 65535])"},
      {"[server]\nport = 99999999999999999999999\n",
       "ucp.conf:2: server.port: 99999999999999999999999 is out of range [0, 65535]"},
      {"[log]\nmax_size = 18446744073709551616\n",
       "ucp.conf:2: log.max_size: 18446744073709551616 is out of range [0, 1099511627776]"},
      {"[server]\nthread_num = 1025\n",
       "ucp.conf:2: server.thread_num: 1025 is out of range [0, 1024]"},
      {"[server]\nread_timeout_ms = 86400001\n",
       "ucp.conf:2: server.read_timeout_ms: 86400001 is out of range [0, 86400000]"},
      {"[server]\nmax_connections = 0\n",
       "ucp.conf:2: server.max_connections: 0 is out of range [1, 16777216]"},
      {"[event_loop]\nring_entries = 1000\n",
       "ucp.conf:2: event_loop.ring_entries: 1000 is not a power of two (nearest: 512 or 1024)"},
      {"[event_loop]\nring_entries = 65536\n",
       "ucp.conf:2: event_loop.ring_entries: 65536 is out of range [8, 32768]"},
      {"[event_loop]\nprovided_buffers_count = 3\n",
       "ucp.conf:2: event_loop.provided_buffers_count: 3 is not a power of two (nearest: 2 or "
       "4)"},
      {"[event_loop]\nregistered_buffer_size = 63\n",
       "ucp.conf:2: event_loop.registered_buffer_size: 63 is out of range [64, 1048576]"},
      {"[log]\nflush_interval_ms = 0\n",
       "ucp.conf:2: log.flush_interval_ms: 0 is out of range [1, 60000]"},
      {"[server]\nacceptors = workers\n",
       "ucp.conf:2: server.acceptors: \"workers\" is not an acceptor mode (use main or "
       "per_worker)"},
      {"[event_loop]\nbackend = EPOLL\n",
       "ucp.conf:2: event_loop.backend: \"EPOLL\" is not a backend (use auto, io_uring or "
       "epoll)"},
      {"[log]\nqueue_full_policy = wait\n",
       "ucp.conf:2: log.queue_full_policy: \"wait\" is not a policy (use block or drop)"},
      {"[log]\nformat = logfmt\n",
       "ucp.conf:2: log.format: \"logfmt\" is not a log format (use text or json)"},
      {"[log]\ntime_format = rfc3339\n",
       "ucp.conf:2: log.time_format: \"rfc3339\" is not a time format (use local, iso8601 or "
       "utc)"},
      {"[log]\nlevel = VERBOSE\n",
       "ucp.conf:2: log.level: \"VERBOSE\" is not a log level (use TRACE, DEBUG, INFO, WARN, "
       "ERROR or FATAL)"},
      {"[event_loop]\nsqpoll = 2\n",
       "ucp.conf:2: event_loop.sqpoll: \"2\" is not a boolean (use true/false, on/off, yes/no or "
       "1/0)"},
      {"[server]\nip = 1.2.3\n",
       "ucp.conf:2: server.ip: \"1.2.3\" is not a numeric IPv4 or IPv6 address (e.g. 0.0.0.0, "
       "127.0.0.1, :: or ::1)"},
      {"[server]\nip = [::1]\n",
       "ucp.conf:2: server.ip: \"[::1]\" is not a numeric IPv4 or IPv6 address (e.g. 0.0.0.0, "
       "127.0.0.1, :: or ::1)"},
      {"[server]\nip =\n",
       "ucp.conf:2: server.ip: empty value (expected an IP address such as 0.0.0.0 or ::)"},
      {"[server]\nname = ; nothing\n", "ucp.conf:2: server.name: empty value"},
      {"[server]\ntakeover_socket = /" + std::string(200, 'x') + "\n",
       "ucp.conf:2: server.takeover_socket: 201 characters is longer than a unix socket path may "
       "be (107)"},
      {"[http]\nmax_body_bytes = 1073741825\n",
       "ucp.conf:2: http.max_body_bytes: 1073741825 is out of range [0, 1073741824]"},
      {"[http]\nkeepalive_timeout_ms = -5\n",
       "ucp.conf:2: http.keepalive_timeout_ms: \"-5\" is negative (expected a duration in [0, "
       "86400000] ms)"},
      {"[http]\nsend_timeout_ms = soon\n",
       "ucp.conf:2: http.send_timeout_ms: \"soon\" is not a duration (milliseconds, or a number "
       "with ms, s, m or h: 250ms, 5s, 2m)"},
  };
  for (const auto& [text, message] : cases) EXPECT_EQ(error_of(text), message) << text;
  // Each problem of a file, not only the first.
  EXPECT_EQ(
      error_of("[server]\nport = x\n[foo]\n", {"log.level=loud"}),
      "ucp.conf:2: server.port: \"x\" is not an unsigned integer\n"
      "ucp.conf:3: unknown section [foo] (known: [server], [event_loop], [log], [http] or [tls])\n"
      "--set:1: log.level: \"loud\" is not a log level (use TRACE, DEBUG, INFO, WARN, "
      "ERROR or FATAL)");
}

TEST_F(Sections, ConfigFilesAreRefusedBeforeTheyAreRead) {
  std::string path = testing::TempDir() + "does-not-exist.conf";
  EXPECT_EQ(load_error(path), path + ": cannot open: No such file or directory");
  EXPECT_EQ(
      load_error(testing::TempDir()),
      testing::TempDir() + ": not a regular file (a directory); give the path of an ini file");
  // /dev/zero never ends: reading it whole would take all the memory there is.
  EXPECT_EQ(load_error("/dev/zero"),
            "/dev/zero: not a regular file (a character device); give the path of an ini file");
  std::string at_limit = "[server]\nport = 81\n";
  at_limit += "#" + std::string(Config::kMaxFileBytes - at_limit.size() - 2, 'x') + "\n";
  ASSERT_EQ(at_limit.size(), Config::kMaxFileBytes);
  path = write_temp_file("at-limit.conf", at_limit);
  auto loaded = Config::load(schema_, path, {}, MachineLimits{64 * kGiB, 2});
  ASSERT_TRUE(loaded) << loaded.error().message();
  EXPECT_EQ(loaded->get<uint16_t>("server.port"), 81);
  path = write_temp_file("over-limit.conf", at_limit + "\n");
  EXPECT_EQ(load_error(path),
            path + ": 1048577 bytes is larger than the 1048576-byte limit for a config file");
  path = write_temp_file("bad.conf", "[server]\nport = 70000\n");
  EXPECT_EQ(load_error(path), path + ":2: server.port: 70000 is out of range [0, 65535]");
}

TEST_F(Sections, OverridesWinOverTheFile) {
  const std::string path =
      write_temp_file("overridden.conf", "[server]\nport = 80\nthread_num = 2\n");
  auto loaded = Config::load(schema_, path,
                             {"server.port=90", " log.level = error ", "server.port=91",
                              "event_loop.sqpoll=on", "log.file="},
                             MachineLimits{64 * kGiB, 2});
  ASSERT_TRUE(loaded) << loaded.error().message();
  const ServerSettings s = server_settings(*loaded);
  EXPECT_EQ(s.server.port, 91);  // repeated overrides: the last wins
  EXPECT_EQ(s.server.thread_num, 2u);
  EXPECT_EQ(s.log.level, LogLevel::kError);
  EXPECT_TRUE(s.loop.sqpoll);
  EXPECT_EQ(s.log.file, "");
  auto defaults_only = Config::load(schema_, "", {"server.port=9000"}, MachineLimits{64 * kGiB, 2});
  ASSERT_TRUE(defaults_only);
  EXPECT_EQ(defaults_only->source(), "--set");
  EXPECT_EQ(server_settings(*defaults_only).server.port, 9000);
}

TEST_F(Sections, StartupMemoryFiguresFollowTheSettings) {
  const MachineLimits two_cpus{64 * kGiB, 2};
  ServerSettings s = settings("");  // 4096 x 4096 B provided buffers, a 4096-entry ring
  StartupMemory m = startup_memory(s.server, s.loop, s.log, two_cpus);
  EXPECT_EQ(m.workers, 1u);
  EXPECT_EQ(m.per_worker, 4096u * (4096 + 16) + 4096u * 132);
  EXPECT_EQ(m.shared, 1024u * 132 + 65536u * 256);
  s.server.thread_num = 0;  // one worker per CPU
  m = startup_memory(s.server, s.loop, s.log, two_cpus);
  EXPECT_EQ(m.total(), 2 * m.per_worker + m.shared);
  s = settings("[event_loop]\nmultishot_recv = false\n[log]\nasync = false\n");
  m = startup_memory(s.server, s.loop, s.log, two_cpus);
  EXPECT_EQ(m.per_worker, 4096u * 132);
  EXPECT_EQ(m.shared, 1024u * 132);
}

TEST_F(Sections, ProvidedBuffersBeyondHalfTheMachineAreRefusedWithTheFigure) {
  // 32,768 x 1 MiB = 32 GiB of provided buffers on a 48 GiB machine.
  const MachineLimits machine{48 * kGiB, 2};
  EXPECT_EQ(error_on(machine,
                     "[event_loop]\nprovided_buffers_count = 32768\nprovided_buffer_size = "
                     "1048576\n"),
            "ucp.conf:3: event_loop.provided_buffer_size: start-up memory 1 worker x 32.0 GiB "
            "(32768 x 1048576 B provided buffers, 4096-entry ring) + 16.1 MiB (65536-record "
            "log queue, accepting ring) = 32.0 GiB (34377715712 bytes) is more than half of "
            "this machine's memory, 48.0 GiB (51539607552 bytes); lower server.thread_num, "
            "event_loop.provided_buffers_count, provided_buffer_size, event_loop.ring_entries, "
            "log.queue_capacity");
  // Half of it fits; without multishot receive the provided buffers are never allocated.
  EXPECT_EQ(error_on(machine,
                     "[event_loop]\nprovided_buffers_count = 16384\nprovided_buffer_size = 1M\n"),
            "");
  EXPECT_EQ(error_on(machine,
                     "[event_loop]\nprovided_buffers_count = 32768\n"
                     "provided_buffer_size = 1048576\nmultishot_recv = false\n"),
            "");
}

TEST_F(Sections, StartupMemoryNamesTheKeySetLast) {
  // About 16.6 MiB per worker by default: 1,000 workers need 16 GiB.
  const MachineLimits small{16 * kGiB, 2};
  const std::string error = error_on(small, "[server]\nthread_num = 1000\n");
  EXPECT_EQ(
      error.rfind("ucp.conf:2: server.thread_num: start-up memory 1000 workers x 16.6 MiB", 0), 0u)
      << error;
  EXPECT_EQ(error_on(small, "[server]\nthread_num = 400\n"), "");
  EXPECT_NE(error_on(MachineLimits{16 * kGiB, 1000}, "[server]\nthread_num = 0\n"), "");
  const MachineLimits machine{8 * kGiB, 2};
  const std::string file =
      "[server]\nthread_num = 64\n[event_loop]\nprovided_buffer_size = 65536\n";
  EXPECT_EQ(error_on(machine, file).rfind("ucp.conf:4: event_loop.provided_buffer_size: ", 0), 0u)
      << error_on(machine, file);
  EXPECT_EQ(error_on(machine, file, {"log.level=INFO", "server.thread_num=63"})
                .rfind("--set:2: server.thread_num: start-up memory 63 workers", 0),
            0u);
  // Nothing set at all: the defaults themselves are too much for the machine.
  EXPECT_EQ(
      error_on(MachineLimits{32u << 20, 1}, "").rfind("ucp.conf: start-up memory 1 worker", 0), 0u)
      << error_on(MachineLimits{32u << 20, 1}, "");
  EXPECT_EQ(error_on(MachineLimits{0, 1}, file), "");  // an unknown machine is not checked
  // The log queue: 16,777,216 records x 256 B = 4 GiB, allocated when the logger starts.
  EXPECT_EQ(error_on(MachineLimits{6 * kGiB, 1}, "[log]\nqueue_capacity = 16777216\n")
                .rfind("ucp.conf:2: log.queue_capacity: start-up memory 1 worker x 16.6 MiB", 0),
            0u);
  EXPECT_EQ(
      error_on(MachineLimits{6 * kGiB, 1}, "[log]\nqueue_capacity = 16777216\nasync = false\n"),
      "");
}

TEST_F(Sections, TheProgramsLoopAdjustmentCountsInTheMemoryCheck) {
  ConfigSchema schema;
  LoopAdjustment adjust = [](const Config&, LoopOptions& loop) {
    loop.provided_buffer_size = 1 << 20;
  };
  declare_server_sections(schema, &adjust);
  // 4096 x 1 MiB once adjusted: 4 GiB, over half of 6 GiB; unadjusted 16 MiB would fit.
  EXPECT_FALSE(Config::parse(schema, "", "ucp.conf", {}, MachineLimits{6 * kGiB, 1}));
  EXPECT_TRUE(Config::parse(schema_, "", "ucp.conf", {}, MachineLimits{6 * kGiB, 1}));
}

TEST(MachineLimits, ThisMachineIsDescribed) {
  const MachineLimits machine = MachineLimits::current();
  EXPECT_GT(machine.memory_bytes, 0u);
  EXPECT_GE(machine.cpus, 1u);
}

// [tls]: every file is loaded with the configuration; a problem names its key and file.
TEST_F(Sections, TlsFilesAreCheckedAtLoadAndNamedByKey) {
  const auto& pki = test::TestPki::get();
  const std::string good = "[tls]\nenable = true\ncertificate = " + pki.ecdsa.certificate +
                           "\nprivate_key = " + pki.ecdsa.private_key + "\n";
  EXPECT_EQ(error_of(good), "");
  EXPECT_FALSE(settings("").tls);  // off by default
  EXPECT_EQ(error_of("[tls]\nenable = true\n"),
            "ucp.conf:2: tls.enable: tls.enable = true needs tls.certificate and "
            "tls.private_key (PEM files)");
  EXPECT_EQ(error_of(good, {"tls.certificate=/nonexistent/cert.pem"}),
            "--set:1: tls.certificate: certificate file /nonexistent/cert.pem: No such file or "
            "directory");
  EXPECT_EQ(error_of(good, {"tls.private_key=" + pki.rsa.private_key}),
            "--set:1: tls.private_key: private key file " + pki.rsa.private_key +
                " does not match certificate file " + pki.ecdsa.certificate);
  EXPECT_EQ(error_of(good + "client_ca = /nonexistent/ca.pem\nverify_client = require\n"),
            "ucp.conf:5: tls.client_ca: client CA file /nonexistent/ca.pem: No such file or "
            "directory");
  EXPECT_EQ(error_of(good + "sni_certificates = " + pki.rsa.certificate + "\n"),
            "ucp.conf:5: tls.sni_certificates: \"" + pki.rsa.certificate +
                "\" is not CERTIFICATE_FILE KEY_FILE");
  EXPECT_EQ(error_of(good + "min_version = 1.1\n"),
            "ucp.conf:5: tls.min_version: \"1.1\" is not a TLS version (use 1.2 or 1.3)");
  // Files are not looked at while TLS is off.
  EXPECT_EQ(error_of("[tls]\ncertificate = /nonexistent/cert.pem\n"), "");
}

}  // namespace
}  // namespace ucp::app

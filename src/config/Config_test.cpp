#include "ucp/config/Config.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace ucp {
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

// The configuration `result` holds; a failure is a test failure (and the defaults).
Config must(Result<Config, Error> result) {
  if (!result) {
    ADD_FAILURE() << result.error().message;
    return Config{};
  }
  return std::move(*result);
}

// The error message of parsing `text` (origin "ucp.conf"), or "" if it parses.
std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  auto parsed = Config::parse(text, "ucp.conf", overrides);
  return parsed ? "" : parsed.error().message;
}

std::string load_error(const std::string& path) {
  auto loaded = Config::load(path);
  return loaded ? "" : loaded.error().message;
}

void expect_default_log(const LogConfig& log) {
  LogConfig defaults;
  EXPECT_EQ(log.stats_interval_ms, defaults.stats_interval_ms);
  EXPECT_EQ(log.level, defaults.level);
  EXPECT_EQ(log.file, defaults.file);
  EXPECT_EQ(log.max_size, defaults.max_size);
  EXPECT_EQ(log.max_files, defaults.max_files);
  EXPECT_EQ(log.daily, defaults.daily);
  EXPECT_EQ(log.async, defaults.async);
  EXPECT_EQ(log.console, defaults.console);
  EXPECT_EQ(log.flush_interval_ms, defaults.flush_interval_ms);
  EXPECT_EQ(log.queue_capacity, defaults.queue_capacity);
  EXPECT_EQ(log.queue_full_policy, defaults.queue_full_policy);
}

void expect_defaults(const Config& config) {
  EXPECT_EQ(config.server, ServerConfig{});
  EXPECT_EQ(config.event_loop, EventLoopConfig{});
  expect_default_log(config.log);
  EXPECT_EQ(config.http, HttpConfig{});
}

std::string write_temp_file(const std::string& name, const std::string& text) {
  std::string path = testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(Config, SpecExampleLoadsVerbatim) {
  Config config = must(Config::parse(kSpecExample, "spec"));
  EXPECT_EQ(config.server.name, "TcpServer");
  EXPECT_EQ(config.server.ip, "0.0.0.0");
  EXPECT_EQ(config.server.port, 8888);
  EXPECT_EQ(config.server.thread_num, 16u);
  EXPECT_EQ(config.server.read_timeout_ms, 5000u);
  EXPECT_EQ(config.event_loop.ring_entries, 32768u);
  EXPECT_TRUE(config.event_loop.sqpoll);
  EXPECT_EQ(config.event_loop.sqpoll_idle_ms, 50u);
  EXPECT_EQ(config.event_loop.registered_buffers_count, 16384u);
  EXPECT_EQ(config.event_loop.registered_buffer_size, 4096u);
  EXPECT_EQ(config.event_loop.pending_queue_capacity, 65536u);
  EXPECT_EQ(config.log.level, LogLevel::kInfo);
  EXPECT_EQ(config.log.file, "logs/server.log");
  EXPECT_EQ(config.log.max_size, 104857600u);
  EXPECT_EQ(config.log.max_files, 10u);
  EXPECT_TRUE(config.log.async);
  EXPECT_TRUE(config.log.console);
  EXPECT_EQ(config.log.flush_interval_ms, 1000u);
}

TEST(Config, SpecExampleLoadsFromAFile) {
  Config config = must(Config::load(write_temp_file("spec_example.conf", kSpecExample)));
  EXPECT_EQ(config.server.thread_num, 16u);
  EXPECT_EQ(config.event_loop.ring_entries, 32768u);
}

TEST(Config, EmptyTextGivesDefaults) {
  expect_defaults(must(Config::parse("", "empty.conf")));
  expect_defaults(must(Config::parse("\n\n  \n# only a comment\n; another\n", "blank.conf")));
  expect_defaults(must(Config::parse("[server]\n[event_loop]\n[log]\n[http]\n", "headers.conf")));
}

TEST(Config, EmptyFileGivesDefaults) {
  expect_defaults(must(Config::load(write_temp_file("empty.conf", ""))));
}

TEST(Config, EmptyPathGivesDefaultsPlusOverrides) {
  expect_defaults(must(Config::load("")));
  Config config = must(Config::load("", {"server.port=9000", "log.level=debug"}));
  EXPECT_EQ(config.server.port, 9000);
  EXPECT_EQ(config.log.level, LogLevel::kDebug);
  EXPECT_EQ(config.event_loop, EventLoopConfig{});
}

TEST(Config, ShippedConfigLoadsWithSmallMachineDefaults) {
  Config config = must(Config::load(UCP_SOURCE_DIR "/config/ucp.conf"));
  EXPECT_EQ(config.server.thread_num, 1u);
  EXPECT_EQ(config.server.port, 8888);
  EXPECT_EQ(config.server.protocol, "echo");
  EXPECT_EQ(config.event_loop.backend, "auto");
  EXPECT_EQ(config.event_loop.ring_entries, 4096u);
  EXPECT_FALSE(config.event_loop.sqpoll);
  EXPECT_EQ(config.event_loop.registered_buffers_count, 0u);
  EXPECT_TRUE(config.event_loop.multishot_recv);
  EXPECT_TRUE(config.event_loop.defer_taskrun);
  EXPECT_EQ(config.log.file, "logs/server.log");
  EXPECT_TRUE(config.log.console);
  EXPECT_EQ(config.log.level, LogLevel::kInfo);
  // The shipped file states every default explicitly: it must agree with the code.
  expect_defaults(config);
}

// docs/config.md's key tables state every default: written out as a config file, their
// default column must give exactly Config{} (and every key there must exist).
TEST(Config, DocumentedDefaultsAreTheCodeDefaults) {
  std::ifstream file(UCP_SOURCE_DIR "/docs/config.md");
  ASSERT_TRUE(file) << "docs/config.md not found";
  std::string ini;
  std::string line;
  size_t keys = 0;
  while (std::getline(file, line)) {
    // A section's table follows its heading: #### `[server]`
    if (line.rfind("#### `[", 0) == 0) {
      ini += line.substr(6, line.find(']') - 5) + "\n";
      continue;
    }
    // | `key` | `default` | range | meaning |
    if (line.rfind("| `", 0) != 0) continue;
    const size_t key_end = line.find('`', 3);
    const size_t value_begin = line.find("| `", key_end);
    ASSERT_NE(value_begin, std::string::npos) << line;
    const size_t value_end = line.find('`', value_begin + 3);
    ini += line.substr(3, key_end - 3) + " = " +
           line.substr(value_begin + 3, value_end - value_begin - 3) + "\n";
    ++keys;
  }
  EXPECT_GE(keys, 40u) << "the key tables were not found in docs/config.md";
  auto documented = Config::parse(ini, "docs/config.md");
  ASSERT_TRUE(documented) << documented.error().message << "\n" << ini;
  expect_defaults(*documented);
}

TEST(Config, ShippedConfigNamesEveryKey) {
  std::ifstream file(UCP_SOURCE_DIR "/config/ucp.conf");
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  // Each key appears once at the start of a line: a duplicate would fail to load, and a key
  // in this list missing from the file fails here.
  for (const char* key : {"name",
                          "ip",
                          "port",
                          "thread_num",
                          "read_timeout_ms",
                          "protocol",
                          "max_connections",
                          "backlog",
                          "reuse_port",
                          "acceptors",
                          "tcp_nodelay",
                          "shutdown_timeout_ms",
                          "max_output_bytes",
                          "write_timeout_ms",
                          "max_request_bytes",
                          "udp_recv_buffer_bytes",
                          "backend",
                          "ring_entries",
                          "sqpoll",
                          "sqpoll_idle_ms",
                          "registered_buffers_count",
                          "registered_buffer_size",
                          "pending_queue_capacity",
                          "multishot_recv",
                          "provided_buffers_count",
                          "provided_buffer_size",
                          "defer_taskrun",
                          "msg_ring_handoff",
                          "level",
                          "file",
                          "max_size",
                          "max_files",
                          "daily",
                          "async",
                          "console",
                          "flush_interval_ms",
                          "queue_capacity",
                          "queue_full_policy",
                          "stats_interval_ms",
                          "root",
                          "index",
                          "max_request_line_bytes",
                          "max_header_bytes",
                          "max_body_bytes",
                          "header_timeout_ms",
                          "keepalive_timeout_ms",
                          "send_timeout_ms"}) {
    std::string line = "\n";  // append(): `"lit" + std::string` trips GCC 12's -Wrestrict
    EXPECT_NE(text.find(line.append(key).append(" = ")), std::string::npos) << key;
  }
}

TEST(Config, EveryKeyIsSettable) {
  Config config = must(Config::parse(R"ini(
[server]
name = Edge
ip = 127.0.0.1
port = 0
thread_num = 0
read_timeout_ms = 0
protocol = http
max_connections = 7
backlog = 128
reuse_port = yes
acceptors = per_worker
tcp_nodelay = no
shutdown_timeout_ms = 250
max_output_bytes = 4294967296
write_timeout_ms = 86400000
max_request_bytes = 8192
udp_recv_buffer_bytes = 0
[event_loop]
backend = epoll
ring_entries = 8
sqpoll = on
sqpoll_idle_ms = 0
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
stats_interval_ms = 86400000
[http]
root = /srv/www
index = default.htm
max_request_line_bytes = 256
max_header_bytes = 16777216
max_body_bytes = 0
header_timeout_ms = 0
keepalive_timeout_ms = 86400000
send_timeout_ms = 1
)ini",
                                     "all.conf"));
  const ServerConfig& s = config.server;
  EXPECT_EQ(s.name, "Edge");
  EXPECT_EQ(s.ip, "127.0.0.1");
  EXPECT_EQ(s.port, 0);
  EXPECT_EQ(s.thread_num, 0u);
  EXPECT_EQ(s.read_timeout_ms, 0u);
  EXPECT_EQ(s.protocol, "http");
  EXPECT_EQ(s.max_connections, 7u);
  EXPECT_EQ(s.backlog, 128u);
  EXPECT_TRUE(s.reuse_port);
  EXPECT_EQ(s.acceptors, "per_worker");
  EXPECT_FALSE(s.tcp_nodelay);
  EXPECT_EQ(s.shutdown_timeout_ms, 250u);
  EXPECT_EQ(s.max_output_bytes, 4294967296u);
  EXPECT_EQ(s.write_timeout_ms, 86400000u);
  EXPECT_EQ(s.max_request_bytes, 8192u);
  EXPECT_EQ(s.udp_recv_buffer_bytes, 0u);
  const EventLoopConfig& e = config.event_loop;
  EXPECT_EQ(e.backend, "epoll");
  EXPECT_EQ(e.ring_entries, 8u);
  EXPECT_TRUE(e.sqpoll);
  EXPECT_EQ(e.sqpoll_idle_ms, 0u);
  EXPECT_EQ(e.registered_buffers_count, 16384u);
  EXPECT_EQ(e.registered_buffer_size, 64u);
  EXPECT_EQ(e.pending_queue_capacity, 0u);
  EXPECT_FALSE(e.multishot_recv);
  EXPECT_EQ(e.provided_buffers_count, 1u);
  EXPECT_EQ(e.provided_buffer_size, 1048576u);
  EXPECT_FALSE(e.defer_taskrun);
  EXPECT_EQ(e.cqe_batch, 7u);
  EXPECT_TRUE(e.msg_ring_handoff);
  const LogConfig& l = config.log;
  EXPECT_EQ(l.level, LogLevel::kTrace);
  EXPECT_EQ(l.file, "");
  EXPECT_EQ(l.max_size, 0u);
  EXPECT_EQ(l.max_files, 0u);
  EXPECT_TRUE(l.daily);
  EXPECT_FALSE(l.async);
  EXPECT_FALSE(l.console);
  EXPECT_EQ(l.flush_interval_ms, 1u);
  EXPECT_EQ(l.queue_capacity, 16u);
  EXPECT_EQ(l.queue_full_policy, QueueFullPolicy::kDrop);
  EXPECT_EQ(l.stats_interval_ms, 86400000u);
  const HttpConfig& h = config.http;
  EXPECT_EQ(h.root, "/srv/www");
  EXPECT_EQ(h.index, "default.htm");
  EXPECT_EQ(h.max_request_line_bytes, 256u);
  EXPECT_EQ(h.max_header_bytes, 16777216u);
  EXPECT_EQ(h.max_body_bytes, 0u);
  EXPECT_EQ(h.header_timeout_ms, 0u);
  EXPECT_EQ(h.keepalive_timeout_ms, 86400000u);
  EXPECT_EQ(h.send_timeout_ms, 1u);
  // Every key differs from its default here, so every key is listed as a change.
  EXPECT_EQ(Config::changes(Config{}, config).size(), 48u);
}

TEST(Config, ChangesListEachDifferingKeyWithBothValues) {
  EXPECT_TRUE(Config::changes(Config{}, Config{}).empty());
  Config before;
  Config after = must(
      Config::parse("[log]\nlevel = warn\n[server]\nip = ::1\nreuse_port = yes\n", "ucp.conf"));
  after.log.queue_full_policy = QueueFullPolicy::kDrop;
  auto changes = Config::changes(before, after);
  ASSERT_EQ(changes.size(), 4u);
  EXPECT_EQ(changes[0].key, "server.ip");
  EXPECT_EQ(changes[0].from, "0.0.0.0");
  EXPECT_EQ(changes[0].to, "::1");
  EXPECT_EQ(changes[1].key, "server.reuse_port");
  EXPECT_EQ(changes[1].to, "true");
  EXPECT_EQ(changes[2].key, "log.level");
  EXPECT_EQ(changes[2].from, "INFO");
  EXPECT_EQ(changes[2].to, "WARN");
  EXPECT_EQ(changes[3].key, "log.queue_full_policy");
  EXPECT_EQ(changes[3].to, "drop");
}

TEST(Config, HttpDefaultsAreTheDocumentedOnes) {
  const HttpConfig h;
  EXPECT_EQ(h.root, "www");
  EXPECT_EQ(h.index, "index.html");
  EXPECT_EQ(h.max_request_line_bytes, 8192u);
  EXPECT_EQ(h.max_header_bytes, 16384u);
  EXPECT_EQ(h.max_body_bytes, 1048576u);
  EXPECT_EQ(h.header_timeout_ms, 10000u);
  EXPECT_EQ(h.keepalive_timeout_ms, 75000u);
  EXPECT_EQ(h.send_timeout_ms, 60000u);
}

TEST(Config, InlineCommentsEndTheValue) {
  Config config =
      must(Config::parse("[server] ; the server\n"
                         "port = 80 ; a comment\n"
                         "thread_num = 3 # another\n"
                         "name = a b\t; inner space kept\n"
                         "[log]# no space needed after a header\n"
                         "file = logs/a#b;c.log   ; '#' and ';' inside a value stay\n"
                         "level = WARN\t# a tab before the comment is enough\n",
                         "ucp.conf"));
  EXPECT_EQ(config.server.port, 80);
  EXPECT_EQ(config.server.thread_num, 3u);
  EXPECT_EQ(config.server.name, "a b");
  EXPECT_EQ(config.log.file, "logs/a#b;c.log");
  EXPECT_EQ(config.log.level, LogLevel::kWarn);
}

TEST(Config, InlineCommentWithoutSpaceIsPartOfTheValue) {
  EXPECT_EQ(error_of("[server]\nport = 80;x\n"),
            "ucp.conf:2: server.port: \"80;x\" is not an unsigned integer");
}

TEST(Config, WhitespaceIsTrimmedEverywhere) {
  Config config =
      must(Config::parse("\xEF\xBB\xBF"  // a UTF-8 byte order mark, as some editors write
                         "  [ server ]  \r\n"
                         "\tport\t=\t81\t\r\n"
                         "   name=x   \r\n"
                         "ip    =    127.0.0.1\r\n"
                         "   \t  \r\n"
                         "    ; indented comment\r\n",
                         "ucp.conf"));
  EXPECT_EQ(config.server.port, 81);
  EXPECT_EQ(config.server.name, "x");
  EXPECT_EQ(config.server.ip, "127.0.0.1");
}

TEST(Config, BooleansAcceptCommonSpellings) {
  for (auto [text, value] : std::vector<std::pair<std::string, bool>>{{"true", true},
                                                                      {"false", false},
                                                                      {"on", true},
                                                                      {"off", false},
                                                                      {"yes", true},
                                                                      {"no", false},
                                                                      {"1", true},
                                                                      {"0", false},
                                                                      {"TRUE", true},
                                                                      {"Off", false},
                                                                      {"Yes", true}}) {
    Config config = must(Config::parse("[event_loop]\nsqpoll = " + text + "\n", "ucp.conf"));
    EXPECT_EQ(config.event_loop.sqpoll, value) << text;
  }
  EXPECT_EQ(error_of("[event_loop]\nsqpoll = maybe\n"),
            "ucp.conf:2: event_loop.sqpoll: \"maybe\" is not a boolean "
            "(use true/false, on/off, yes/no or 1/0)");
  EXPECT_EQ(error_of("[event_loop]\nsqpoll = 2\n"),
            "ucp.conf:2: event_loop.sqpoll: \"2\" is not a boolean "
            "(use true/false, on/off, yes/no or 1/0)");
}

TEST(Config, LogLevelsUseTheLoggerNames) {
  for (auto [text, level] :
       std::vector<std::pair<std::string, LogLevel>>{{"TRACE", LogLevel::kTrace},
                                                     {"debug", LogLevel::kDebug},
                                                     {"Info", LogLevel::kInfo},
                                                     {"WARN", LogLevel::kWarn},
                                                     {"ERROR", LogLevel::kError},
                                                     {"FATAL", LogLevel::kFatal}}) {
    EXPECT_EQ(must(Config::parse("[log]\nlevel = " + text, "ucp.conf")).log.level, level) << text;
  }
}

TEST(Config, SectionsMayBeReopened) {
  Config config = must(
      Config::parse("[server]\nport = 1\n[log]\nlevel = ERROR\n[server]\nname = n\n", "ucp.conf"));
  EXPECT_EQ(config.server.port, 1);
  EXPECT_EQ(config.server.name, "n");
}

TEST(Config, LastLineWithoutNewlineIsRead) {
  EXPECT_EQ(must(Config::parse("[server]\nport = 82", "ucp.conf")).server.port, 82);
}

// Every error class, with its exact one-line message.
TEST(Config, ErrorsNameFileLineKeyAndProblem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // Structure.
      {"[server]\n\n\n\n\n\nport = 70000\n",
       "ucp.conf:7: server.port: 70000 is out of range [0, 65535]"},
      {"# c\n\n[foo]\n", "ucp.conf:3: unknown section [foo]"},
      {"[server]\n[Server]\n", "ucp.conf:2: unknown section [Server]"},
      {"[server\n", "ucp.conf:1: missing ']' in \"[server\""},
      {"[]\n", "ucp.conf:1: empty section name []"},
      {"[server] port = 1\n", "ucp.conf:1: unexpected \"port = 1\" after [server]"},
      {"[server]\nport = 1\n\n\n\n\n\n\ncolour = red\n", "ucp.conf:9: server.colour: unknown key"},
      {"[log]\nport = 1\n", "ucp.conf:2: log.port: unknown key"},
      {"[server]\n\n\nport 80\n", "ucp.conf:4: missing '=' in \"port 80\""},
      {"[server]\nport 80   ; comment not shown\n", "ucp.conf:2: missing '=' in \"port 80\""},
      {"[server]\n = 80\n", "ucp.conf:2: missing key before '=' in \"= 80\""},
      {"port = 80\n",
       "ucp.conf:1: port: key outside any section (put it under [server], [event_loop], [log] "
       "or [http])"},
      {"[server]\n\n\n\nport = 1\n[log]\n\n\n\n\n[server]\nport = 2\n",
       "ucp.conf:12: server.port: duplicate key (first set on line 5)"},
      {"[server]\nport = 1\nport = 1\n",
       "ucp.conf:3: server.port: duplicate key (first set on "
       "line 2)"},
      // Numbers.
      {"[server]\nport = 12abc\n", "ucp.conf:2: server.port: \"12abc\" is not an unsigned integer"},
      {"[server]\nport = -1\n",
       "ucp.conf:2: server.port: \"-1\" is negative (expected an integer in [0, 65535])"},
      {"[server]\nport = +1\n", "ucp.conf:2: server.port: \"+1\" is not an unsigned integer"},
      {"[server]\nport = 0x50\n", "ucp.conf:2: server.port: \"0x50\" is not an unsigned integer"},
      {"[server]\nport = 8 0\n", "ucp.conf:2: server.port: \"8 0\" is not an unsigned integer"},
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
      {"[event_loop]\nring_entries = 4\n",
       "ucp.conf:2: event_loop.ring_entries: 4 is out of range [8, 32768]"},
      {"[event_loop]\nring_entries = 65536\n",
       "ucp.conf:2: event_loop.ring_entries: 65536 is out of range [8, 32768]"},
      {"[event_loop]\nprovided_buffers_count = 3\n",
       "ucp.conf:2: event_loop.provided_buffers_count: 3 is not a power of two (nearest: 2 or "
       "4)"},
      {"[event_loop]\nsqpoll_idle_ms = 60001\n",
       "ucp.conf:2: event_loop.sqpoll_idle_ms: 60001 is out of range [0, 60000]"},
      {"[event_loop]\nregistered_buffers_count = 16385\n",
       "ucp.conf:2: event_loop.registered_buffers_count: 16385 is out of range [0, 16384]"},
      {"[event_loop]\nregistered_buffer_size = 63\n",
       "ucp.conf:2: event_loop.registered_buffer_size: 63 is out of range [64, 1048576]"},
      {"[event_loop]\nprovided_buffer_size = 1048577\n",
       "ucp.conf:2: event_loop.provided_buffer_size: 1048577 is out of range [64, 1048576]"},
      {"[event_loop]\npending_queue_capacity = 16777217\n",
       "ucp.conf:2: event_loop.pending_queue_capacity: 16777217 is out of range [0, 16777216]"},
      {"[log]\nmax_files = 1001\n", "ucp.conf:2: log.max_files: 1001 is out of range [0, 1000]"},
      {"[log]\nflush_interval_ms = 0\n",
       "ucp.conf:2: log.flush_interval_ms: 0 is out of range [1, 60000]"},
      {"[log]\nqueue_capacity = 15\n",
       "ucp.conf:2: log.queue_capacity: 15 is out of range [16, 16777216]"},
      // Words.
      {"[server]\nprotocol = ftp\n",
       "ucp.conf:2: server.protocol: \"ftp\" is not a protocol (use echo, http, udp_echo or "
       "websocket)"},
      {"[server]\nprotocol = HTTP\n",
       "ucp.conf:2: server.protocol: \"HTTP\" is not a protocol (use echo, http, udp_echo or "
       "websocket)"},
      {"[server]\nacceptors = workers\n",
       "ucp.conf:2: server.acceptors: \"workers\" is not an acceptor mode (use main or "
       "per_worker)"},
      {"[log]\nstats_interval_ms = 86400001\n",
       "ucp.conf:2: log.stats_interval_ms: 86400001 is out of range [0, 86400000]"},
      {"[event_loop]\nbackend = uring\n",
       "ucp.conf:2: event_loop.backend: \"uring\" is not a backend (use auto, io_uring or "
       "epoll)"},
      {"[event_loop]\nbackend = EPOLL\n",
       "ucp.conf:2: event_loop.backend: \"EPOLL\" is not a backend (use auto, io_uring or "
       "epoll)"},
      {"[log]\nqueue_full_policy = wait\n",
       "ucp.conf:2: log.queue_full_policy: \"wait\" is not a policy (use block or drop)"},
      {"[log]\nlevel = VERBOSE\n",
       "ucp.conf:2: log.level: \"VERBOSE\" is not a log level (use TRACE, DEBUG, INFO, WARN, "
       "ERROR or FATAL)"},
      {"[server]\nip = 1.2.3\n",
       "ucp.conf:2: server.ip: \"1.2.3\" is not a numeric IPv4 or IPv6 address (e.g. 0.0.0.0, "
       "127.0.0.1, :: or ::1)"},
      {"[server]\nip = ::g\n",
       "ucp.conf:2: server.ip: \"::g\" is not a numeric IPv4 or IPv6 address (e.g. 0.0.0.0, "
       "127.0.0.1, :: or ::1)"},
      {"[server]\nip = [::1]\n",
       "ucp.conf:2: server.ip: \"[::1]\" is not a numeric IPv4 or IPv6 address (e.g. 0.0.0.0, "
       "127.0.0.1, :: or ::1)"},
      {"[server]\nip = localhost\n",
       "ucp.conf:2: server.ip: \"localhost\" is not a numeric IPv4 or IPv6 address (e.g. "
       "0.0.0.0, 127.0.0.1, :: or ::1)"},
      {"[server]\nip =\n",
       "ucp.conf:2: server.ip: empty value (expected an IP address such as 0.0.0.0 or ::)"},
      {"[server]\nname = ; nothing\n", "ucp.conf:2: server.name: empty value"},
      {"[http]\nroot =\n", "ucp.conf:2: http.root: empty value"},
      {"[http]\nindex = a/b.html\n",
       "ucp.conf:2: http.index: \"a/b.html\" is not a file name (no '/')"},
      {"[http]\nmax_request_line_bytes = 255\n",
       "ucp.conf:2: http.max_request_line_bytes: 255 is out of range [256, 1048576]"},
      {"[http]\nmax_header_bytes = 1023\n",
       "ucp.conf:2: http.max_header_bytes: 1023 is out of range [1024, 16777216]"},
      {"[http]\nmax_body_bytes = 1073741825\n",
       "ucp.conf:2: http.max_body_bytes: 1073741825 is out of range [0, 1073741824]"},
      {"[http]\nheader_timeout_ms = 3600001\n",
       "ucp.conf:2: http.header_timeout_ms: 3600001 is out of range [0, 3600000]"},
      {"[http]\nkeepalive_timeout_ms = -5\n",
       "ucp.conf:2: http.keepalive_timeout_ms: \"-5\" is negative (expected an integer in [0, "
       "86400000])"},
      {"[http]\nsend_timeout_ms = soon\n",
       "ucp.conf:2: http.send_timeout_ms: \"soon\" is not an unsigned integer"},
      {"[http]\nport = 80\n", "ucp.conf:2: http.port: unknown key"},
  };
  for (const auto& [text, message] : cases) EXPECT_EQ(error_of(text), message) << text;
}

TEST(Config, FirstErrorWins) {
  EXPECT_EQ(error_of("[server]\nport = x\n[foo]\n"),
            "ucp.conf:2: server.port: \"x\" is not an unsigned integer");
}

TEST(Config, MissingFileCannotBeOpened) {
  std::string path = testing::TempDir() + "does-not-exist.conf";
  EXPECT_EQ(load_error(path), path + ": cannot open: No such file or directory");
}

TEST(Config, DirectoryIsNotAConfigFile) {
  std::string path = testing::TempDir();
  EXPECT_EQ(load_error(path),
            path + ": not a regular file (a directory); give the path of an ini file");
}

TEST(Config, DeviceIsRefusedBeforeAnythingIsRead) {
  // /dev/zero never ends: reading it whole would take all the memory there is.
  EXPECT_EQ(load_error("/dev/zero"),
            "/dev/zero: not a regular file (a character device); give the path of an ini file");
  EXPECT_EQ(load_error("/dev/null"),
            "/dev/null: not a regular file (a character device); give the path of an ini file");
}

TEST(Config, FileUpToTheSizeLimitLoadsAndOneByteMoreIsRefused) {
  // Comments only: valid, just large. The limit is on bytes, not on what they say.
  std::string at_limit = "[server]\nport = 81\n";
  at_limit += "#" + std::string(Config::kMaxFileBytes - at_limit.size() - 2, 'x') + "\n";
  ASSERT_EQ(at_limit.size(), Config::kMaxFileBytes);
  std::string path = write_temp_file("at-limit.conf", at_limit);
  EXPECT_EQ(must(Config::load(path)).server.port, 81);
  path = write_temp_file("over-limit.conf", at_limit + "\n");
  EXPECT_EQ(load_error(path),
            path + ": 1048577 bytes is larger than the 1048576-byte limit for a config file");
}

TEST(Config, IpAcceptsIpv6Addresses) {
  for (const char* ip : {"::1", "::", "fe80::1", "2001:db8::42", "::ffff:127.0.0.1"}) {
    Config config = must(Config::parse(std::string("[server]\nip = ") + ip + "\n", "ucp.conf"));
    EXPECT_EQ(config.server.ip, ip);
  }
  EXPECT_EQ(must(Config::parse("", "ucp.conf", {"server.ip=::1"})).server.ip, "::1");
}

TEST(Config, FileErrorsNameThePath) {
  std::string path = write_temp_file("bad.conf", "[server]\nport = 70000\n");
  EXPECT_EQ(load_error(path), path + ":2: server.port: 70000 is out of range [0, 65535]");
}

TEST(Config, OverridesWinOverTheFile) {
  std::string path = write_temp_file("overridden.conf", "[server]\nport = 80\nthread_num = 2\n");
  Config config = must(Config::load(path, {"server.port=90", " log.level = error ",
                                           "server.port=91", "event_loop.sqpoll=on", "log.file="}));
  EXPECT_EQ(config.server.port, 91);  // repeated overrides: the last wins
  EXPECT_EQ(config.server.thread_num, 2u);
  EXPECT_EQ(config.log.level, LogLevel::kError);
  EXPECT_TRUE(config.event_loop.sqpoll);
  EXPECT_EQ(config.log.file, "");
}

TEST(Config, OverrideValuesAreTakenLiterally) {
  Config config = must(Config::parse("", "ucp.conf", {"server.name=a ; b", "log.file=x=y"}));
  EXPECT_EQ(config.server.name, "a ; b");
  EXPECT_EQ(config.log.file, "x=y");
}

TEST(Config, OverridesAreValidatedLikeTheFile) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"server.port=70000"}, "--set:1: server.port: 70000 is out of range [0, 65535]"},
      {{"server.port=1", "server.port=12abc"},
       "--set:2: server.port: \"12abc\" is not an unsigned integer"},
      {{"server.port"}, "--set:1: missing '=' in \"server.port\""},
      {{"port=80"}, "--set:1: missing section in \"port=80\" (expected section.key=value)"},
      {{"log.level=INFO", "foo.bar=1"}, "--set:2: unknown section [foo]"},
      {{"server.colour=red"}, "--set:1: server.colour: unknown key"},
      {{"event_loop.ring_entries=100"},
       "--set:1: event_loop.ring_entries: 100 is not a power of two (nearest: 64 or 128)"},
      {{"log.async=perhaps"},
       "--set:1: log.async: \"perhaps\" is not a boolean (use true/false, on/off, yes/no or "
       "1/0)"},
  };
  for (const auto& [overrides, message] : cases) {
    EXPECT_EQ(error_of("[server]\nport = 80\n", overrides), message) << overrides.back();
  }
}

TEST(Config, FileErrorsComeBeforeOverrideErrors) {
  EXPECT_EQ(error_of("[foo]\n", {"bad"}), "ucp.conf:1: unknown section [foo]");
}

constexpr uint64_t kGiB = uint64_t{1} << 30;

// The error message of parsing `text` on `machine`, or "" if it parses.
std::string error_on(const MachineLimits& machine, const std::string& text,
                     const std::vector<std::string>& overrides = {}) {
  auto parsed = Config::parse(text, "ucp.conf", overrides, machine);
  return parsed ? "" : parsed.error().message;
}

TEST(Config, StartupMemoryFiguresFollowTheSettings) {
  const MachineLimits two_cpus{64 * kGiB, 2};
  Config config;  // the defaults: 4096 x 4096 B provided buffers, a 4096-entry ring
  EXPECT_EQ(config.worker_startup_bytes(), 4096u * (4096 + 16) + 4096u * 132);
  EXPECT_EQ(config.shared_startup_bytes(), 1024u * 132 + 65536u * 256);
  EXPECT_EQ(config.worker_count(two_cpus), 1u);
  config.server.thread_num = 0;  // one worker per CPU
  EXPECT_EQ(config.worker_count(two_cpus), 2u);
  EXPECT_EQ(config.startup_bytes(two_cpus),
            2 * config.worker_startup_bytes() + config.shared_startup_bytes());
  config.event_loop.multishot_recv = false;  // no provided buffers without multishot receive
  config.event_loop.registered_buffers_count = 16;
  EXPECT_EQ(config.worker_startup_bytes(), 16u * 4096 + 4096u * 132);
  config.log.async = false;  // no queue
  config.log.queue_capacity = 1000;
  EXPECT_EQ(config.shared_startup_bytes(), 1024u * 132);
  config.log.async = true;  // the queue rounds its capacity up to a power of two
  EXPECT_EQ(config.shared_startup_bytes(), 1024u * 132 + 1024u * 256);
}

// udp_echo needs a whole datagram per receive buffer: its workers run with 69,632-byte
// buffers (at most 1,024 of them) unless the configured ones are larger, and the start-up
// memory says so.
TEST(Config, UdpEchoWorkersGetBuffersThatHoldAWholeDatagram) {
  Config config = must(Config::parse("[server]\nprotocol = udp_echo\n", "ucp.conf"));
  EXPECT_EQ(config.server.udp_recv_buffer_bytes, 4194304u);
  EventLoopConfig loop = config.worker_loop();
  EXPECT_EQ(loop.provided_buffer_size, Config::kUdpEchoBufferBytes);
  EXPECT_EQ(loop.provided_buffers_count, Config::kUdpEchoBuffers);
  EXPECT_EQ(config.worker_startup_bytes(), 1024u * (69632 + 16) + 4096u * 132);
  config.event_loop.provided_buffers_count = 64;  // fewer: kept
  EXPECT_EQ(config.worker_loop().provided_buffers_count, 64u);
  config.event_loop.provided_buffer_size = 131072;  // larger: kept
  EXPECT_EQ(config.worker_loop().provided_buffer_size, 131072u);
  config.server.protocol = "echo";  // the TCP protocols run with the configured buffers
  config.event_loop.provided_buffer_size = 4096;
  EXPECT_EQ(config.worker_loop().provided_buffer_size, 4096u);
  EXPECT_FALSE(Config::parse("[server]\nudp_recv_buffer_bytes = 1073741825\n", "ucp.conf"));
}

TEST(Config, ProvidedBuffersBeyondHalfTheMachineAreRefusedWithTheFigure) {
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
                     "[event_loop]\nprovided_buffers_count = 16384\n"
                     "provided_buffer_size = 1048576\n"),
            "");
  EXPECT_EQ(error_on(machine,
                     "[event_loop]\nprovided_buffers_count = 32768\n"
                     "provided_buffer_size = 1048576\nmultishot_recv = false\n"),
            "");
}

TEST(Config, ThousandWorkersWithDefaultBuffersAreRefusedOnASmallMachine) {
  // About 16.6 MiB per worker by default: 1,000 workers need 16 GiB.
  const MachineLimits machine{16 * kGiB, 2};
  const std::string error = error_on(machine, "[server]\nthread_num = 1000\n");
  EXPECT_EQ(
      error.rfind("ucp.conf:2: server.thread_num: start-up memory 1000 workers x 16.6 MiB", 0), 0u)
      << error;
  EXPECT_EQ(error_on(machine, "[server]\nthread_num = 400\n"), "");
  // thread_num = 0 is one worker per CPU.
  EXPECT_NE(error_on(MachineLimits{16 * kGiB, 1000}, "[server]\nthread_num = 0\n"), "");
  EXPECT_EQ(error_on(MachineLimits{16 * kGiB, 64}, "[server]\nthread_num = 0\n"), "");
}

TEST(Config, RegisteredBuffersThatWouldPinHalfTheMachineAreRefused) {
  // 16,384 x 1 MiB = 16 GiB pinned at start, as root without any RLIMIT_MEMLOCK.
  const MachineLimits machine{24 * kGiB, 2};
  const std::string error = error_on(machine,
                                     "[event_loop]\nregistered_buffers_count = 16384\n"
                                     "registered_buffer_size = 1048576\n");
  EXPECT_EQ(error.rfind("ucp.conf:3: event_loop.registered_buffer_size: start-up memory 1 worker "
                        "x 16.0 GiB (4096 x 4096 B provided buffers, 16384 x 1048576 B registered "
                        "buffers, 4096-entry ring)",
                        0),
            0u)
      << error;
}

TEST(Config, CrossKeyErrorsNameTheKeySetLast) {
  const MachineLimits machine{8 * kGiB, 2};
  const std::string file =
      "[server]\nthread_num = 64\n[event_loop]\nprovided_buffer_size = 65536\n";
  // 64 workers x 256 MiB: the file's last key tipped it.
  EXPECT_EQ(error_on(machine, file).rfind("ucp.conf:4: event_loop.provided_buffer_size: ", 0), 0u)
      << error_on(machine, file);
  // An override is later than any line of the file.
  EXPECT_EQ(error_on(machine, file, {"log.level=INFO", "server.thread_num=63"})
                .rfind("--set:2: server.thread_num: start-up memory 63 workers", 0),
            0u);
  // Nothing set at all: the defaults themselves are too much for the machine.
  EXPECT_EQ(
      error_on(MachineLimits{32u << 20, 1}, "").rfind("ucp.conf: start-up memory 1 worker", 0), 0u)
      << error_on(MachineLimits{32u << 20, 1}, "");
  // An unknown machine (memory 0) is not checked.
  EXPECT_EQ(error_on(MachineLimits{0, 1}, file), "");
}

TEST(Config, LogQueueCountsTowardsStartupMemory) {
  // 16,777,216 records x 256 B = 4 GiB, allocated when the logger starts.
  const MachineLimits machine{6 * kGiB, 1};
  EXPECT_EQ(error_on(machine, "[log]\nqueue_capacity = 16777216\n")
                .rfind("ucp.conf:2: log.queue_capacity: start-up memory 1 worker x 16.6 MiB", 0),
            0u)
      << error_on(machine, "[log]\nqueue_capacity = 16777216\n");
  EXPECT_EQ(error_on(machine, "[log]\nqueue_capacity = 16777216\nasync = false\n"), "");
}

TEST(Config, OneConnectionsWorstCaseMustFitInHalfTheMachine) {
  const MachineLimits machine{6 * kGiB, 1};
  EXPECT_EQ(error_on(machine, "[server]\nmax_output_bytes = 4294967296\n"),
            "ucp.conf:2: server.max_output_bytes: one connection may hold max_output_bytes + 2 x "
            "max_request_bytes = 4.0 GiB (4295098368 bytes), more than half of this machine's "
            "memory, 6.0 GiB (6442450944 bytes); lower server.max_output_bytes or "
            "server.max_request_bytes");
  EXPECT_EQ(error_on(machine, "[server]\nmax_output_bytes = 2147483648\n"), "");
}

TEST(Config, ThisMachineIsDescribed) {
  const MachineLimits machine = MachineLimits::current();
  EXPECT_GT(machine.memory_bytes, 0u);
  EXPECT_GE(machine.cpus, 1u);
}

}  // namespace
}  // namespace ucp

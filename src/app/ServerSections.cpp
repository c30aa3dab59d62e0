#include "ucp/app/ServerSections.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <string_view>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/un.h>

#include "ucp/base/Defaults.h"
#include "ucp/log/Logger.h"
#include "ucp/net/CpuAffinity.h"
#include "ucp/tls/TlsContext.h"

namespace ucp::app {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kOneDay{86400000};
constexpr milliseconds kOneHour{3600000};

// What an io_uring maps per SQ entry: a 64-byte SQE, a 4-byte SQ index, and 4 CQEs of 16
// bytes (the CQ has 4x the SQ's entries: src/io/IoUring.cpp).
constexpr uint64_t kRingBytesPerEntry = 64 + 4 + 4 * 16;
constexpr uint64_t kAcceptRingEntries = 1024;   // the accepting loop's ring is capped there
constexpr uint64_t kBufferRingEntryBytes = 16;  // struct io_uring_buf, one per provided buffer

std::string check_ip(std::string_view value) {
  if (value.empty()) return "empty value (expected an IP address such as 0.0.0.0 or ::)";
  const std::string text(value);
  in6_addr address{};  // large enough for either family
  if (inet_pton(AF_INET, text.c_str(), &address) != 1 &&
      inet_pton(AF_INET6, text.c_str(), &address) != 1) {
    return "\"" + text +
           "\" is not a numeric IPv4 or IPv6 address (e.g. 0.0.0.0, 127.0.0.1, :: or ::1)";
  }
  return {};
}

std::string check_socket_path(std::string_view value) {
  if (value.size() >= sizeof(sockaddr_un::sun_path)) {
    return std::to_string(value.size()) + " characters is longer than a unix socket path may be (" +
           std::to_string(sizeof(sockaddr_un::sun_path) - 1) + ")";
  }
  return {};
}

void declare_server(ConfigSchema& schema) {
  auto& s = schema.section("server", "the listening socket, worker loops and connection limits");
  s.text("name", "TcpServer", "shown in the logs").non_empty();
  s.text("ip", defaults::kIp,
         "numeric IPv4 or IPv6 address to listen on: 0.0.0.0 every IPv4 interface, :: every "
         "interface, ::1 IPv6 loopback")
      .check(check_ip);
  s.integer("port", defaults::kPort, 0, 65535,
            "TCP port; 0 = any free port (the \"listening on\" line names it)");
  s.integer("thread_num", defaults::kThreadNum, 0, 1024, "worker loops; 0 = one per CPU");
  s.duration("read_timeout_ms", milliseconds(defaults::kReadTimeoutMs), {}, kOneDay,
             "close a connection that sends nothing this long; 0 = never (HTTP: each read of a "
             "request body)");
  s.integer("max_connections", defaults::kMaxConnections, 1, 16777216,
            "beyond it new connections are closed at once");
  s.integer("backlog", defaults::kBacklog, 1, 65535,
            "listen(2) queue; the kernel caps it at net.core.somaxconn");
  s.flag("reuse_port", defaults::kReusePort,
         "SO_REUSEPORT: several processes may share the port (the kernel spreads connections)");
  s.choice("acceptors", "main", {"main", "per_worker"},
           "main: the main loop accepts and hands connections to the workers | per_worker: each "
           "worker accepts on its own SO_REUSEPORT socket")
      .noun("an acceptor mode");
  s.flag("tcp_nodelay", defaults::kTcpNoDelay, "TCP_NODELAY on accepted sockets");
  s.duration("shutdown_timeout_ms", milliseconds(defaults::kShutdownTimeoutMs), {}, kOneHour,
             "graceful stop (SIGINT/SIGTERM, a takeover): time connections get to finish");
  s.size("max_output_bytes", defaults::kMaxOutputBytes, 1024, 4294967296,
         "queued output per connection before write() waits");
  s.duration("write_timeout_ms", milliseconds(defaults::kWriteTimeoutMs), {}, kOneDay,
             "close a connection whose peer takes no output this long; 0 = never (HTTP: "
             "http.send_timeout_ms)");
  s.text("cpu_affinity", defaults::kCpuAffinity,
         "pin the threads: empty = no | auto = worker N on CPU N mod nproc, the main loop on the "
         "next | a CPU list such as 0,2,4-7, one per worker in order (the main loop unpinned)")
      .check([](std::string_view value) {
        auto parsed = CpuAffinity::parse(value);
        return parsed ? std::string() : parsed.error().message;
      });
  s.text("takeover_socket", "",
         "unix socket where the running server hands its listening sockets to a successor "
         "started with --takeover PATH; empty = none; @NAME = abstract")
      .check(check_socket_path);
}

void declare_event_loop(ConfigSchema& schema) {
  auto& e = schema.section("event_loop", "the event loops (io_uring or epoll) of every thread");
  e.choice("backend", "auto", {"auto", "io_uring", "epoll"},
           "auto: io_uring, or epoll where io_uring is blocked (one WARN saying why)")
      .noun("a backend");
  e.integer("ring_entries", defaults::kRingEntries, 8, 32768,
            "SQ entries per ring (the CQ gets four times as many)")
      .power_of_two();
  e.flag("sqpoll", defaults::kSqpoll, "IORING_SETUP_SQPOLL: a kernel thread polls the SQ");
  e.duration("sqpoll_idle_ms", milliseconds(defaults::kSqpollIdleMs), {}, milliseconds(60000),
             "with sqpoll: the poller sleeps after this idle time (0 = the kernel's 1 s)");
  e.integer("sqpoll_cpu", defaults::kSqpollCpu, -1, CPU_SETSIZE - 1,
            "with sqpoll: the CPU the SQPOLL thread runs on (IORING_SETUP_SQ_AFF); -1 = any");
  e.integer("busy_poll_us", defaults::kBusyPollUs, 0, 1000000,
            "spin this long looking for completions before a loop sleeps (and NAPI busy poll "
            "where the kernel has it); 0 = off. Costs CPU time: a loop that hears from a client "
            "more often than this never sleeps");
  e.integer("registered_buffers_count", defaults::kRegisteredBuffersCount, 0, 16384,
            "fixed buffers per worker ring (READ/WRITE_FIXED); 0 = off");
  e.size("registered_buffer_size", defaults::kRegisteredBufferSize, 64, 1048576,
         "bytes per registered buffer");
  e.integer("pending_queue_capacity", defaults::kPendingQueueCapacity, 0, 16777216,
            "operations held in user space while the SQ is full");
  e.flag("multishot_recv", defaults::kMultishotRecv,
         "multishot receive into a provided buffer ring, where the kernel has it");
  e.integer("provided_buffers_count", defaults::kProvidedBuffersCount, 1, 32768,
            "buffers in each loop's provided ring")
      .power_of_two();
  e.size("provided_buffer_size", defaults::kProvidedBufferSize, 64, 1048576,
         "bytes per provided buffer (mapped at start, resident as used)");
  e.flag("defer_taskrun", defaults::kDeferTaskrun,
         "IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN, where the kernel has them");
  e.integer("cqe_batch", defaults::kCqeBatch, 0, 65536,
            "completions handled per loop iteration; 0 = all that are ready");
  e.flag("msg_ring_handoff", defaults::kMsgRingHandOff,
         "hand accepted sockets to workers with IORING_OP_MSG_RING instead of the task queue");
}

void declare_log(ConfigSchema& schema) {
  const LogOptions d;
  auto& l = schema.section("log", "the logger");
  l.choice("level", "INFO", {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"},
           "lowest level written")
      .ignore_case()
      .noun("a log level")
      .reloadable();
  l.text("file", d.file, "log file, relative to the working directory; empty = none");
  l.size("max_size", d.max_size, 0, 1099511627776, "bytes per file before rolling; 0 = never");
  l.integer("max_files", d.max_files, 0, 1000, "rolled files kept besides the live one");
  l.flag("daily", d.daily, "also roll at local midnight");
  l.flag("async", d.async, "a background thread writes; false: the caller writes and waits");
  l.flag("console", d.console, "also print to stdout (colour only on a terminal)");
  l.duration("flush_interval_ms", milliseconds(d.flush_interval_ms), milliseconds(1),
             milliseconds(60000), "longest a record waits in memory before it is flushed");
  l.integer("queue_capacity", d.queue_capacity, 16, 16777216,
            "records waiting for the background thread (256 bytes each, allocated at start)");
  l.choice("queue_full_policy", "block", {"block", "drop"},
           "when that queue is full: block the caller | drop the record")
      .noun("a policy");
  l.choice("format", "text", {"text", "json"},
           "text: one line per record | json: one JSON object per line (time, level, tid, file, "
           "line, message)")
      .noun("a log format");
  l.choice("time_format", "local", {"local", "iso8601", "utc"},
           "local: 2026-11-23 10:55:49.123456 | iso8601: local time with its UTC offset, "
           "2026-11-23T10:55:49.123456+01:00 | utc: 2026-11-23T09:55:49.123456Z")
      .noun("a time format");
  l.choice("journald", "auto", {"auto", "on", "off"},
           "start each console line with its syslog priority (<6>) for systemd's journal; auto: "
           "when stdout is the journal (JOURNAL_STREAM)")
      .noun("a journald setting");
  l.duration("stats_interval_ms", {}, {}, kOneDay,
             "one stats line at INFO this often (connections, bytes, requests); 0 = none");
}

void declare_http(ConfigSchema& schema) {
  auto& h = schema.section("http", "the HTTP/1.1 layer's limits and timeouts");
  h.size("max_request_line_bytes", defaults::kMaxRequestLineBytes, 256, 1048576,
         "method + target + version; longer: 414");
  h.size("max_header_bytes", defaults::kMaxHeaderBytes, 1024, 16777216,
         "header fields; larger (or more than 100 fields): 431");
  h.size("max_body_bytes", defaults::kMaxBodyBytes, 0, 1073741824,
         "request body, held in memory; larger: 413");
  h.duration("header_timeout_ms", milliseconds(defaults::kHeaderTimeoutMs), {}, kOneHour,
             "first byte of a request to the end of its head; later: 408 and close; 0 = none");
  h.duration("keepalive_timeout_ms", milliseconds(defaults::kKeepaliveTimeoutMs), {}, kOneDay,
             "close an idle keep-alive connection; 0 = never");
  h.duration("send_timeout_ms", milliseconds(defaults::kSendTimeoutMs), {}, kOneDay,
             "close a connection whose peer reads nothing this long; 0 = never");
}

// Every key but `enable` is reloadable: a SIGHUP builds the context for new connections from
// the whole section (Application::reload_tls), so each of them takes effect at once.
void declare_tls(ConfigSchema& schema) {
  auto& t = schema.section("tls", "TLS on server.port: HTTPS, WSS, TLS echo (docs/tls.md)");
  t.flag("enable", false,
         "the port speaks TLS only; certificate and private_key are then required");
  t.text("certificate", "", "PEM file: the certificate chain, leaf first (SIGHUP reloads it)")
      .reloadable();
  t.text("private_key", "", "PEM file: the certificate's private key, not encrypted").reloadable();
  t.list("sni_certificates", {},
         "more certificates, chosen by the client's SNI name among their DNS names: "
         "CERTIFICATE_FILE KEY_FILE, ...")
      .check([](std::string_view item) -> std::string {
        const size_t space = item.find(' ');
        if (space == std::string_view::npos || item.find_first_not_of(' ', space) == item.npos) {
          return "\"" + std::string(item) + "\" is not CERTIFICATE_FILE KEY_FILE";
        }
        return {};
      })
      .reloadable();
  t.choice("min_version", "1.2", {"1.2", "1.3"},
           "oldest TLS version offered (1.0, 1.1 and SSL never are)")
      .noun("a TLS version")
      .reloadable();
  t.list("alpn", {"http/1.1"},
         "ALPN protocols offered, preferred first; empty = no ALPN (a client offering none of "
         "them is refused)")
      .reloadable();
  t.flag("session_tickets", true,
         "resumption by session tickets (keys in memory, rotated hourly, shared by the workers)")
      .reloadable();
  t.text("client_ca", "",
         "PEM file of the CAs client certificates must chain to; empty = none asked (SIGHUP "
         "reloads it)")
      .reloadable();
  t.choice("verify_client", "none", {"none", "optional", "require"},
           "client certificates: none asked | optional (an invalid one is refused) | require")
      .noun("a verify mode")
      .reloadable();
  t.duration("handshake_timeout_ms", milliseconds(10000), milliseconds(1), kOneHour,
             "a handshake that takes longer fails and the connection closes")
      .reloadable();
}

// The configuration key a TLS context error is about: its message names the file first.
std::string_view tls_key_of(const std::string& message, const tls::TlsOptions& options) {
  const auto starts = [&message](const std::string& prefix) {
    return message.compare(0, prefix.size(), prefix) == 0;
  };
  const auto& main = options.certificates.front();
  if (starts("private key file " + main.private_key + " ")) return "tls.private_key";
  if (starts("private key file " + main.private_key + ":")) return "tls.private_key";
  if (starts("certificate file " + main.certificate + ":")) return "tls.certificate";
  if (starts("client CA file")) return "tls.client_ca";
  if (starts("private key file") || starts("certificate file")) return "tls.sni_certificates";
  if (starts("TLS verify_client")) return "tls.verify_client";
  if (starts("TLS alpn")) return "tls.alpn";
  return "tls.enable";
}

// Every file [tls] names is read and checked at load (and at each SIGHUP): a missing or
// unreadable file, or a key that does not match its certificate, refuses the configuration.
void check_tls(const Config& config, ConfigProblems& problems) {
  auto options = tls_options(config);
  if (!options) return;  // off
  if (options->certificates.front().certificate.empty() ||
      options->certificates.front().private_key.empty()) {
    problems.fail({"tls.enable", "tls.certificate", "tls.private_key"},
                  "tls.enable = true needs tls.certificate and tls.private_key (PEM files)");
    return;
  }
  if (auto context = tls::TlsContext::server(*options); !context) {
    const std::string key(tls_key_of(context.error().message, *options));
    problems.fail({key}, context.error().message);
  }
}

LoopOptions loop_options(const Config& c) {
  LoopOptions o;
  const std::string backend = c.get<std::string>("event_loop.backend");
  o.backend = backend == "io_uring" ? BackendKind::kIoUring
              : backend == "epoll"  ? BackendKind::kEpoll
                                    : BackendKind::kAuto;
  o.ring_entries = c.get<uint32_t>("event_loop.ring_entries");
  o.sqpoll = c.get<bool>("event_loop.sqpoll");
  o.sqpoll_idle_ms = c.get<uint32_t>("event_loop.sqpoll_idle_ms");
  o.sqpoll_cpu = c.get<int32_t>("event_loop.sqpoll_cpu");
  o.busy_poll_us = c.get<uint32_t>("event_loop.busy_poll_us");
  o.pending_queue_capacity = c.get<uint32_t>("event_loop.pending_queue_capacity");
  o.defer_taskrun = c.get<bool>("event_loop.defer_taskrun");
  o.provided_buffers_count = c.get<bool>("event_loop.multishot_recv")
                                 ? c.get<uint32_t>("event_loop.provided_buffers_count")
                                 : 0;
  o.provided_buffer_size = c.get<uint32_t>("event_loop.provided_buffer_size");
  o.registered_buffers_count = c.get<uint32_t>("event_loop.registered_buffers_count");
  o.registered_buffer_size = c.get<uint32_t>("event_loop.registered_buffer_size");
  o.cqe_batch = c.get<uint32_t>("event_loop.cqe_batch");
  return o;
}

ServerOptions server_options(const Config& c) {
  ServerOptions o;
  o.ip = c.get<std::string>("server.ip");
  o.port = c.get<uint16_t>("server.port");
  o.thread_num = c.get<uint32_t>("server.thread_num");
  o.read_timeout_ms = c.get<uint32_t>("server.read_timeout_ms");
  o.max_connections = c.get<uint32_t>("server.max_connections");
  o.listen.backlog = c.get<uint32_t>("server.backlog");
  o.listen.reuse_port = c.get<bool>("server.reuse_port");
  o.acceptors = c.get<std::string>("server.acceptors") == "per_worker" ? Acceptors::kPerWorker
                                                                       : Acceptors::kMain;
  o.tcp_nodelay = c.get<bool>("server.tcp_nodelay");
  o.shutdown_timeout_ms = c.get<uint32_t>("server.shutdown_timeout_ms");
  o.msg_ring_handoff = c.get<bool>("event_loop.msg_ring_handoff");  // kept in [event_loop]
  o.max_output_bytes = c.get<uint64_t>("server.max_output_bytes");
  o.write_timeout_ms = c.get<uint32_t>("server.write_timeout_ms");
  o.cpu_affinity =
      CpuAffinity::parse(c.get<std::string>("server.cpu_affinity")).value_or(CpuAffinity{});
  return o;
}

LogOptions log_options(const Config& c) {
  LogOptions o;
  o.level = parse_log_level(c.get<std::string>("log.level")).value_or(LogLevel::kInfo);
  o.file = c.get<std::string>("log.file");
  o.max_size = c.get<uint64_t>("log.max_size");
  o.max_files = c.get<uint32_t>("log.max_files");
  o.daily = c.get<bool>("log.daily");
  o.async = c.get<bool>("log.async");
  o.console = c.get<bool>("log.console");
  o.flush_interval_ms = c.get<uint32_t>("log.flush_interval_ms");
  o.queue_capacity = c.get<uint32_t>("log.queue_capacity");
  o.queue_full_policy = c.get<std::string>("log.queue_full_policy") == "drop"
                            ? QueueFullPolicy::kDrop
                            : QueueFullPolicy::kBlock;
  o.format = c.get<std::string>("log.format") == "json" ? LogFormat::kJson : LogFormat::kText;
  const std::string time_format = c.get<std::string>("log.time_format");
  o.time_format = time_format == "iso8601" ? LogTimeFormat::kIso8601
                  : time_format == "utc"   ? LogTimeFormat::kUtc
                                           : LogTimeFormat::kLocal;
  const std::string journald = c.get<std::string>("log.journald");
  o.journald = journald == "on"    ? JournalPrefix::kOn
               : journald == "off" ? JournalPrefix::kOff
                                   : JournalPrefix::kAuto;
  return o;
}

http::HttpOptions http_options(const Config& c) {
  http::HttpOptions o;
  o.max_request_line_bytes = c.get<uint32_t>("http.max_request_line_bytes");
  o.max_header_bytes = c.get<uint32_t>("http.max_header_bytes");
  o.max_body_bytes = c.get<uint64_t>("http.max_body_bytes");
  o.header_timeout_ms = c.get<uint32_t>("http.header_timeout_ms");
  o.keepalive_timeout_ms = c.get<uint32_t>("http.keepalive_timeout_ms");
  o.send_timeout_ms = c.get<uint32_t>("http.send_timeout_ms");
  o.body_timeout_ms = c.get<uint32_t>("server.read_timeout_ms");  // each read of a request body
  return o;
}

// "1 worker x 16.6 MiB (4096 x 4096 B provided buffers, 4096-entry ring) + 16.1 MiB
// (65536-record log queue, accepting ring)"
std::string describe_startup(const StartupMemory& memory, const LoopOptions& loop,
                             const LogOptions& log) {
  std::string parts;
  auto add = [&parts](const std::string& part) {
    if (!parts.empty()) parts += ", ";
    parts += part;
  };
  if (const uint32_t count = loop.provided_buffers_count.value_or(0); count > 0) {
    add(std::to_string(count) + " x " + std::to_string(loop.provided_buffer_size) +
        " B provided buffers");
  }
  if (loop.registered_buffers_count > 0) {
    add(std::to_string(loop.registered_buffers_count) + " x " +
        std::to_string(loop.registered_buffer_size) + " B registered buffers");
  }
  add(std::to_string(loop.ring_entries) + "-entry ring");
  std::string text =
      std::to_string(memory.workers) + (memory.workers == 1 ? " worker x " : " workers x ") +
      human_bytes(memory.per_worker) + " (" + parts + ") + " + human_bytes(memory.shared) + " (";
  if (log.async) text += std::to_string(log.queue_capacity) + "-record log queue, ";
  return text + "accepting ring)";
}

// The keys worth lowering, in the order of the description.
std::string startup_knobs(const LoopOptions& loop, const LogOptions& log) {
  std::string knobs = "server.thread_num";
  if (loop.provided_buffers_count.value_or(0) > 0) {
    knobs += ", event_loop.provided_buffers_count, provided_buffer_size";
  }
  if (loop.registered_buffers_count > 0) {
    knobs += ", event_loop.registered_buffers_count, registered_buffer_size";
  }
  knobs += ", event_loop.ring_entries";
  if (log.async) knobs += ", log.queue_capacity";
  return knobs;
}

// Checks what the whole configuration asks of the machine. A failure names the key set last
// among those involved (the one that tipped the total), at the line that set it.
void check_startup_memory(const Config& config, ConfigProblems& problems,
                          const LoopAdjustment* adjust) {
  const MachineLimits& machine = problems.machine();
  if (machine.memory_bytes == 0) return;
  const ServerSettings settings = server_settings(config);
  LoopOptions loop = settings.loop;
  if (adjust != nullptr && *adjust) (*adjust)(config, loop);
  const StartupMemory memory = startup_memory(settings.server, loop, settings.log, machine);
  const uint64_t budget = machine.memory_bytes / 2;
  if (memory.total() <= budget) return;
  problems.fail({"server.thread_num", "event_loop.multishot_recv",
                 "event_loop.provided_buffers_count", "event_loop.provided_buffer_size",
                 "event_loop.registered_buffers_count", "event_loop.registered_buffer_size",
                 "event_loop.ring_entries", "log.async", "log.queue_capacity"},
                "start-up memory " + describe_startup(memory, loop, settings.log) + " = " +
                    human_bytes(memory.total()) + " (" + std::to_string(memory.total()) +
                    " bytes) is more than half of this machine's memory, " +
                    human_bytes(machine.memory_bytes) + " (" +
                    std::to_string(machine.memory_bytes) + " bytes); lower " +
                    startup_knobs(loop, settings.log));
}

// The CPUs server.cpu_affinity and event_loop.sqpoll_cpu name must be ones this process may
// run on: a typo is refused with the file and line instead of failing later at start-up.
void check_cpus(const Config& config, ConfigProblems& problems) {
  const std::vector<int> allowed = allowed_cpus();
  if (allowed.empty()) return;  // unknown: the start-up says it
  const auto usable = [&allowed](int cpu) {
    return std::find(allowed.begin(), allowed.end(), cpu) != allowed.end();
  };
  const auto refuse = [&](std::string_view key, int cpu) {
    problems.fail({key}, "CPU " + std::to_string(cpu) + " is not one this process may run on (" +
                             format_cpu_list(allowed) + ")");
  };
  const auto affinity = CpuAffinity::parse(config.get<std::string>("server.cpu_affinity"));
  if (affinity) {
    for (int cpu : affinity->cpus) {
      if (!usable(cpu)) {
        refuse("server.cpu_affinity", cpu);
        break;
      }
    }
  }
  const auto sqpoll_cpu = config.get<int32_t>("event_loop.sqpoll_cpu");
  if (sqpoll_cpu >= 0 && !usable(sqpoll_cpu)) refuse("event_loop.sqpoll_cpu", sqpoll_cpu);
}

}  // namespace

std::optional<tls::TlsOptions> tls_options(const Config& c) {
  if (!c.get<bool>("tls.enable")) return std::nullopt;
  tls::TlsOptions o;
  o.certificates.push_back(
      {c.get<std::string>("tls.certificate"), c.get<std::string>("tls.private_key")});
  for (const std::string& pair : c.get<std::vector<std::string>>("tls.sni_certificates")) {
    const size_t space = pair.find(' ');
    const size_t key = pair.find_first_not_of(' ', space);
    o.certificates.push_back({pair.substr(0, space), pair.substr(key)});
  }
  o.min_version = c.get<std::string>("tls.min_version") == "1.3" ? tls::TlsVersion::k1_3
                                                                 : tls::TlsVersion::k1_2;
  o.alpn = c.get<std::vector<std::string>>("tls.alpn");
  o.session_tickets = c.get<bool>("tls.session_tickets");
  o.client_ca = c.get<std::string>("tls.client_ca");
  const std::string verify = c.get<std::string>("tls.verify_client");
  o.verify_client = verify == "require"    ? tls::VerifyClient::kRequire
                    : verify == "optional" ? tls::VerifyClient::kOptional
                                           : tls::VerifyClient::kNone;
  o.handshake_timeout_ms = c.get<uint32_t>("tls.handshake_timeout_ms");
  return o;
}

std::string human_bytes(uint64_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  return text;
}

void declare_server_sections(ConfigSchema& schema, const LoopAdjustment* adjust) {
  declare_server(schema);
  declare_event_loop(schema);
  declare_log(schema);
  declare_http(schema);
  declare_tls(schema);
  schema.check([adjust](const Config& config, ConfigProblems& problems) {
    check_startup_memory(config, problems, adjust);
  });
  schema.check(check_tls);
  schema.check(check_cpus);
}

ServerSettings server_settings(const Config& config) {
  ServerSettings s;
  s.name = config.get<std::string>("server.name");
  s.server = server_options(config);
  s.loop = loop_options(config);
  s.http = http_options(config);
  s.log = log_options(config);
  s.stats_interval = config.get<milliseconds>("log.stats_interval_ms");
  s.takeover_socket = config.get<std::string>("server.takeover_socket");
  s.tls = tls_options(config);
  return s;
}

StartupMemory startup_memory(const ServerOptions& server, const LoopOptions& loop,
                             const LogOptions& log, const MachineLimits& machine) {
  StartupMemory memory;
  memory.workers = server.thread_num == 0 ? machine.cpus : server.thread_num;
  memory.per_worker = uint64_t{loop.ring_entries} * kRingBytesPerEntry;
  memory.per_worker += uint64_t{loop.provided_buffers_count.value_or(0)} *
                       (loop.provided_buffer_size + kBufferRingEntryBytes);
  memory.per_worker += uint64_t{loop.registered_buffers_count} * loop.registered_buffer_size;
  memory.shared = std::min<uint64_t>(loop.ring_entries, kAcceptRingEntries) * kRingBytesPerEntry;
  if (log.async)
    memory.shared += std::bit_ceil(uint64_t{log.queue_capacity}) * Logger::kQueueSlotBytes;
  return memory;
}

}  // namespace ucp::app

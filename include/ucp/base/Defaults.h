#pragma once
// The default of every setting that exists twice: once as a library option struct
// (ServerOptions, ListenOptions, OutputLimits, LoopOptions, HttpOptions) and once as a config
// key ([server], [event_loop], [http] in ucp/app/ServerSections.h). Both initialise from here,
// so a program that fills the structs and a server that reads a config file cannot drift
// apart; config/ucp.conf and the key tables in docs/config.md are checked against the
// declarations by BinaryKeys_test. The numbers live in base because the option structs sit
// in the layers below the one that declares the keys.

#include <cstdint>

namespace ucp::defaults {

// [server] / ServerOptions, ListenOptions, OutputLimits
inline constexpr const char* kIp = "0.0.0.0";
inline constexpr uint16_t kPort = 8888;
inline constexpr uint32_t kThreadNum = 1;  // worker loops; 0 = one per CPU
inline constexpr uint32_t kReadTimeoutMs = 5000;
inline constexpr uint32_t kMaxConnections = 100000;
inline constexpr uint32_t kBacklog = 4096;
inline constexpr bool kReusePort = false;  // it lets a second live server bind the same port
inline constexpr bool kTcpNoDelay = true;
inline constexpr uint32_t kShutdownTimeoutMs = 5000;
inline constexpr uint64_t kMaxOutputBytes = 4 * 1024 * 1024;
// A peer that takes no output for a minute is closed, as kSendTimeoutMs does for HTTP;
// 0 = a peer may stop reading for ever.
inline constexpr uint32_t kWriteTimeoutMs = 60000;
inline constexpr bool kMsgRingHandOff = false;  // measured no faster than the task queue
// Where the server's threads run: empty = wherever the kernel schedules them, "auto" = worker N
// on the N-th CPU the process may use, or a CPU list (ucp/net/CpuAffinity.h).
inline constexpr const char* kCpuAffinity = "";

// [event_loop] / LoopOptions
inline constexpr uint32_t kRingEntries = 4096;
inline constexpr bool kSqpoll = false;
inline constexpr uint32_t kSqpollIdleMs = 50;
inline constexpr int32_t kSqpollCpu = -1;  // -1 = the SQPOLL thread is not pinned
// Spin this long looking for completions before the loop sleeps; 0 = sleep at once. Off by
// default: a spinning loop keeps its CPU busy while requests keep coming.
inline constexpr uint32_t kBusyPollUs = 0;
inline constexpr uint32_t kPendingQueueCapacity = 65536;
inline constexpr bool kDeferTaskrun = true;
inline constexpr bool kMultishotRecv = true;
// The binaries give each loop this many receive buffers. A bare LoopOptions has none (0):
// a loop a library user makes for a client or a timer maps no buffer memory unless asked.
inline constexpr uint32_t kProvidedBuffersCount = 4096;
inline constexpr uint32_t kProvidedBufferSize = 4096;
inline constexpr uint32_t kRegisteredBuffersCount = 0;
inline constexpr uint32_t kRegisteredBufferSize = 4096;
inline constexpr uint32_t kCqeBatch = 0;  // 0 = every completion that is ready

// [http] / HttpOptions
inline constexpr uint32_t kMaxRequestLineBytes = 8192;
inline constexpr uint32_t kMaxHeaderBytes = 16384;
inline constexpr uint64_t kMaxBodyBytes = 1024 * 1024;
inline constexpr uint32_t kHeaderTimeoutMs = 10000;
inline constexpr uint32_t kKeepaliveTimeoutMs = 75000;
inline constexpr uint32_t kSendTimeoutMs = 60000;

// [gateway] / proxy::TcpProxyOptions, [upstream.NAME] / proxy::UpstreamGroupOptions
inline constexpr uint32_t kUpstreamConnectTimeoutMs = 3000;
inline constexpr uint32_t kUpstreamIdleTimeoutMs = 60000;
inline constexpr uint32_t kUpstreamTotalTimeoutMs =
    0;                                            // 0 = a relayed connection may last for ever
inline constexpr uint32_t kUpstreamMaxFails = 3;  // 0 = no passive health
inline constexpr uint32_t kUpstreamFailTimeoutMs = 10000;
inline constexpr uint32_t kUpstreamConnectTries = 3;  // servers tried per client connection
inline constexpr uint32_t kHealthIntervalMs = 2000;
inline constexpr uint32_t kHealthRise = 2;  // passes that bring a failing server back (HAProxy's)
inline constexpr uint32_t kHealthFall = 3;  // failures that take a server out (HAProxy's)
inline constexpr uint32_t kUpstreamResolveIntervalMs = 30000;
inline constexpr uint32_t kUpstreamKeepalive = 32;
inline constexpr uint32_t kProxyHeaderTimeoutMs = 3000;  // PROXY protocol header from a balancer

}  // namespace ucp::defaults

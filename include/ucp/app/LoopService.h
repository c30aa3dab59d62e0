#pragma once
// LoopService: a program that is one event loop running one coroutine (a UDP service, a
// client, a job) served by Application like a server, so that it gets the same signals,
// log set-up and exit codes without a line of signal code:
//
//   ucp::app::LoopService service(app.loop_options(), [&](ucp::EventLoop& loop) {
//     return serve_udp(loop, address);  // Task<>; returning ends the program (exit 0)
//   });
//   return app.serve(service, "udp_echo");
//
// A stop signal stops the loop: every operation the coroutine awaits ends with
// operation_canceled (later ones are refused alike), and a coroutine still suspended when
// the loop has reaped everything is destroyed. The coroutine logs its own "listening on" line
// (the runtime does not know what it binds).
//
// Thread contract: as Service (ucp/app/Service.h); the body runs on the loop's thread.

#include <memory>
#include <string>

#include "ucp/app/Service.h"
#include "ucp/base/UniqueFunction.h"
#include "ucp/coro/Task.h"
#include "ucp/io/EventLoop.h"

namespace ucp::app {

/// A Service made of one loop and one coroutine; owned by the program (see above).
class LoopService final : public Service {
 public:
  using Body = UniqueFunction<Task<>(EventLoop& loop)>;

  LoopService(const LoopOptions& options, Body body) : options_(options), body_(std::move(body)) {}

  Result<void, Error> start(std::string* warnings) override;
  void run() override;
  void stop() noexcept override { loop_->stop(); }
  void stop_now() noexcept override { loop_->stop(); }
  EventLoop& main_loop() noexcept override { return *loop_; }
  std::string listening() const override { return {}; }
  std::string describe_loops() const override { return loop_->describe(); }

 private:
  LoopOptions options_;
  Body body_;
  std::unique_ptr<EventLoop> loop_;
};

}  // namespace ucp::app

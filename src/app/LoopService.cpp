#include "ucp/app/LoopService.h"

#include "ucp/net/CpuAffinity.h"

namespace ucp::app {

Result<void, Error> LoopService::start(std::string* warnings) {
  auto loop = EventLoop::create(options_, warnings);
  if (!loop) {
    return Unexpected{Error(EventLoop::describe_setup_error(loop.error(), options_), loop.error())};
  }
  loop_ = std::move(*loop);
  return {};
}

void LoopService::run() {
  name_current_thread("ucp-main");  // the program's one loop is its main loop
  loop_->spawn([](EventLoop& loop, Body& body) -> Task<> {
    co_await body(loop);
    loop.stop();  // the body is done: so is the program
  }(*loop_, body_));
  loop_->run();
}

}  // namespace ucp::app

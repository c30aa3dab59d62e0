#pragma once
// Whether Node can run the `ws` WebSocket package for the interop tests: node itself, and ws
// from NODE_PATH (build/npm, where scripts/install-deps.sh interop puts it), installed with npm
// on first use when it is missing. Header-only; no UCP library.

#include <cstdlib>
#include <string>

#include "Command.h"

namespace ucp::test {

inline const std::string kNodePath = UCP_SOURCE_DIR "/build/npm/node_modules:/usr/share/nodejs";

/// Empty when node can load `ws` (after an npm install if needed); otherwise why not. Sets
/// NODE_PATH for the node processes the test starts.
inline std::string node_ws_unavailable() {
  static const std::string reason = [] {
    if (!have_program("node")) return std::string("node is not installed (apt-get install nodejs)");
    ::setenv("NODE_PATH", kNodePath.c_str(), 1);
    auto probe = [] { return run_command({"node", "-e", "require('ws')"}, 20000).exit_code == 0; };
    if (probe()) return std::string();
    if (!have_program("npm"))
      return std::string("the ws module is missing and npm is not installed");
    auto installed = run_command({"npm", "install", "--no-save", "--no-audit", "--no-fund",
                                  "--prefix", UCP_SOURCE_DIR "/build/npm", "ws@8"},
                                 180000);
    if (probe()) return std::string();
    return "npm install ws failed: " + installed.output.substr(0, 400);
  }();
  return reason;
}

}  // namespace ucp::test

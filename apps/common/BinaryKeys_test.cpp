// The binaries' keys beside the library's: config/ucp.conf and the key tables of
// docs/config.md name every key with its default, and load; the binaries' own messages.

#include "BinaryKeys.h"

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/app/Config.h"
#include "ucp/app/ServerSections.h"

namespace ucp::app {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

class BinaryKeys : public ::testing::Test {
 protected:
  void SetUp() override {
    declare_server_sections(schema_);
    declare_binary_keys(schema_);
  }
  std::string error_on(const MachineLimits& machine, const std::string& text) {
    auto parsed = Config::parse(schema_, text, "ucp.conf", {}, machine);
    return parsed ? "" : parsed.error().message();
  }
  std::string error_of(const std::string& text) {
    return error_on(MachineLimits{64 * kGiB, 2}, text);
  }

  ConfigSchema schema_;
};

// The shipped file states every default explicitly: it must agree with the code, key by key.
TEST_F(BinaryKeys, ShippedConfigStatesEveryKeyAtItsDefault) {
  auto loaded =
      Config::load(schema_, UCP_SOURCE_DIR "/config/ucp.conf", {}, MachineLimits{64 * kGiB, 2});
  ASSERT_TRUE(loaded) << loaded.error().message();
  EXPECT_TRUE(Config::changes(Config(schema_), *loaded).empty());
  for (const SectionSchema& section : schema_.sections()) {
    for (const KeySchema& key : section.keys()) {
      EXPECT_FALSE(loaded->origin(section.name() + "." + key.name()).is_default())
          << section.name() << "." << key.name() << " is missing from config/ucp.conf";
    }
  }
  EXPECT_EQ(loaded->get<std::string>("server.protocol"), "echo");
}

// docs/config.md's key tables state every default: written out as a config file, their
// default column must give exactly the code's defaults, and every key must be there.
TEST_F(BinaryKeys, DocumentedDefaultsAreTheCodeDefaults) {
  std::ifstream file(UCP_SOURCE_DIR "/docs/config.md");
  ASSERT_TRUE(file) << "docs/config.md not found";
  std::string ini;
  std::string line;
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
  }
  auto documented = Config::parse(schema_, ini, "docs/config.md", {}, MachineLimits{64 * kGiB, 2});
  ASSERT_TRUE(documented) << documented.error().message() << "\n" << ini;
  EXPECT_TRUE(Config::changes(Config(schema_), *documented).empty());
  for (const SectionSchema& section : schema_.sections()) {
    for (const KeySchema& key : section.keys()) {
      EXPECT_FALSE(documented->origin(section.name() + "." + key.name()).is_default())
          << section.name() << "." << key.name() << " has no row in docs/config.md";
    }
  }
}

TEST_F(BinaryKeys, TheirValuesAreCheckedInEveryBinary) {
  EXPECT_EQ(error_of("[server]\nprotocol = HTTP\n"),
            "ucp.conf:2: server.protocol: \"HTTP\" is not a protocol (use echo, http, udp_echo or "
            "websocket)");
  EXPECT_EQ(error_of("[http]\nroot =\n"), "ucp.conf:2: http.root: empty value");
  EXPECT_EQ(error_of("[http]\nindex = a/b.html\n"),
            "ucp.conf:2: http.index: \"a/b.html\" is not a file name (no '/')");
  EXPECT_EQ(error_of("[server]\nudp_recv_buffer_bytes = 1073741825\n"),
            "ucp.conf:2: server.udp_recv_buffer_bytes: 1073741825 is out of range [0, "
            "1073741824]");
  EXPECT_EQ(error_of("[server]\nprotcol = http\n"),
            "ucp.conf:2: server.protcol: unknown key (did you mean server.protocol?)");
}

TEST_F(BinaryKeys, OneConnectionsWorstCaseMustFitInHalfTheMachine) {
  const MachineLimits machine{6 * kGiB, 1};
  EXPECT_EQ(error_on(machine, "[server]\nmax_output_bytes = 4294967296\n"),
            "ucp.conf:2: server.max_output_bytes: one connection may hold max_output_bytes + 2 x "
            "max_request_bytes = 4.0 GiB (4295098368 bytes), more than half of this machine's "
            "memory, 6.0 GiB (6442450944 bytes); lower server.max_output_bytes or "
            "server.max_request_bytes");
  EXPECT_EQ(error_on(machine, "[server]\nmax_output_bytes = 2147483648\n"), "");
}

}  // namespace
}  // namespace ucp::app

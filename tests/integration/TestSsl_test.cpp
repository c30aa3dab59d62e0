// testssl.sh against bin/http_server over HTTPS with an ECDSA P-256 certificate (label
// `interop`): the protocols, the standard cipher categories, the server's cipher order and
// the vulnerability checks (`--fast --protocols --std --server-preference --vulnerable`), read
// back from its JSON file. Fails on any finding rated HIGH or CRITICAL and on a protocol older
// than TLS 1.2 offered. Skipped when testssl (or openssl) is not installed. The full default
// run and its result are in docs/tls.md.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "Command.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

namespace fs = std::filesystem;

/// One object of testssl's JSON file (the flat format: one finding per object).
struct Finding {
  std::string id;
  std::string severity;
  std::string finding;
};

/// The value of `"key" : "value"` inside `object`, or empty.
std::string field(const std::string& object, const std::string& key) {
  const size_t at = object.find("\"" + key + "\"");
  if (at == std::string::npos) return {};
  const size_t colon = object.find(':', at);
  const size_t open = object.find('"', colon);
  if (colon == std::string::npos || open == std::string::npos) return {};
  std::string value;
  for (size_t i = open + 1; i < object.size() && object[i] != '"'; ++i) {
    if (object[i] == '\\' && i + 1 < object.size()) ++i;
    value += object[i];
  }
  return value;
}

std::vector<Finding> read_findings(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  std::vector<Finding> findings;
  for (size_t open = json.find('{'); open != std::string::npos; open = json.find('{', open + 1)) {
    const size_t close = json.find('}', open);
    if (close == std::string::npos) break;
    const std::string object = json.substr(open, close - open);
    if (auto id = field(object, "id"); !id.empty()) {
      findings.push_back({id, field(object, "severity"), field(object, "finding")});
    }
  }
  return findings;
}

class TestSsl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_program("testssl")) GTEST_SKIP() << "testssl is not installed (testssl.sh)";
    if (!have_program("openssl")) GTEST_SKIP() << "openssl is not installed";
    char name[] = "/tmp/ucp-testssl-XXXXXX";
    dir_ = ::mkdtemp(name);
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty() && std::getenv("UCP_KEEP_SERVER_LOGS") == nullptr) {
      fs::remove_all(dir_, ignored);
    }
  }
  std::string dir_;
};

TEST_F(TestSsl, FindsNothingHighAndNoProtocolBelowTls12) {
  ASSERT_EQ(run_command({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                         "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj",
                         "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                         "-keyout", dir_ + "/key.pem", "-out", dir_ + "/cert.pem"},
                        20000)
                .exit_code,
            0);
  std::ofstream(dir_ + "/index.html") << "hello\n";
  ServerProcess::Options options;
  options.binary = UCP_BIN_DIR "/http_server";
  options.overrides = {"tls.enable=true", "tls.certificate=" + dir_ + "/cert.pem",
                       "tls.private_key=" + dir_ + "/key.pem", "http.root=" + dir_};
  ServerProcess server(options);
  UCP_START_SERVER(server);

  const std::string json = dir_ + "/testssl.json";
  // --warnings off: no questions asked (testssl would wait for an answer). --fast halves the
  // time (about 30 s instead of 60 on a busy 2-core machine) and drops only the NPN check and
  // RC4 by sockets (the LOW cipher category still covers RC4).
  auto run = run_command({"testssl", "--quiet", "--color", "0", "--warnings", "off", "--fast",
                          "--protocols", "--std", "--server-preference", "--vulnerable",
                          "--jsonfile", json, "127.0.0.1:" + std::to_string(server.port())},
                         170000);
  ASSERT_NE(run.exit_code, -1) << "testssl did not end within 170 s:\n" << run.output;
  const std::vector<Finding> findings = read_findings(json);
  ASSERT_GT(findings.size(), 20u) << run.output;

  size_t protocols = 0;
  for (const Finding& f : findings) {
    EXPECT_NE(f.severity, "HIGH") << f.id << ": " << f.finding;
    EXPECT_NE(f.severity, "CRITICAL") << f.id << ": " << f.finding;
    if (f.id == "SSLv2" || f.id == "SSLv3" || f.id == "TLS1" || f.id == "TLS1_1") {
      ++protocols;
      EXPECT_EQ(f.finding.rfind("not offered", 0), 0u) << f.id << ": " << f.finding;
    }
    if (f.id == "TLS1_2" || f.id == "TLS1_3") {
      ++protocols;
      EXPECT_EQ(f.finding.rfind("offered", 0), 0u) << f.id << ": " << f.finding;
    }
  }
  EXPECT_EQ(protocols, 6u) << run.output;
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

}  // namespace
}  // namespace ucp::test

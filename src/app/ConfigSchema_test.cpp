// The ini engine on a schema of its own: key types and their syntax, every error reported
// with FILE:LINE and a hint, families of sections, required keys, checks across keys, typed
// access, --help text, reload bookkeeping.

#include "ucp/app/ConfigSchema.h"

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/app/Config.h"

#include "ConfigParser.h"

namespace ucp::app {
namespace {

using namespace std::chrono_literals;

/// A schema with one key of every type, a family, and a check across keys.
class Schema : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& s = schema_.section("svc", "a service");
    s.flag("enabled", true, "on or off");
    s.integer("workers", 4, 1, 64, "worker count");
    s.integer("offset", -1, -10, 10, "a signed value");
    s.integer("ring", 256, 8, 4096, "ring entries").power_of_two();
    s.size("buffer_bytes", 4096, 64, 1 << 20, "bytes per buffer");
    s.duration("timeout_ms", 5s, 0ms, 24h, "idle timeout");
    s.text("name", "svc", "shown in logs").non_empty();
    s.text("note", "", "anything");
    s.choice("mode", "fast", {"fast", "safe"}, "how").noun("a mode");
    s.choice("level", "INFO", {"DEBUG", "INFO"}, "log level").ignore_case().reloadable();
    s.list("peers", {"a", "b"}, "who").check([](std::string_view item) -> std::string {
      return item.find(':') == std::string_view::npos ? ""
                                                      : "\"" + std::string(item) + "\" has a ':'";
    });
    auto& upstream = schema_.family("upstream", "a group of servers");
    upstream.list("servers", {}, "HOST:PORT, ...").required().non_empty().reloadable();
    upstream.choice("balance", "round_robin", {"round_robin", "hash"}, "how").reloadable();
    schema_.check([](const Config& config, ConfigProblems& problems) {
      if (config.get<uint32_t>("svc.workers") > config.get<uint32_t>("svc.ring")) {
        problems.fail({"svc.workers", "svc.ring"}, "more workers than ring entries");
      }
    });
  }

  Result<Config, ConfigError> parse(const std::string& text,
                                    const std::vector<std::string>& overrides = {}) {
    return Config::parse(schema_, text, "t.conf", overrides, MachineLimits{0, 1});
  }
  /// The problems of parsing `text`, joined by " | "; "" when it parses.
  std::string problems(const std::string& text, const std::vector<std::string>& overrides = {}) {
    auto parsed = parse(text, overrides);
    return parsed ? "" : parsed.error().message(" | ");
  }
  Config must(const std::string& text, const std::vector<std::string>& overrides = {}) {
    auto parsed = parse(text, overrides);
    if (!parsed) {
      ADD_FAILURE() << parsed.error().message();
      return Config(schema_);
    }
    return std::move(*parsed);
  }

  ConfigSchema schema_;
};

TEST_F(Schema, DefaultsComeFromTheDeclarations) {
  const Config c = must("");
  EXPECT_TRUE(c.get<bool>("svc.enabled"));
  EXPECT_EQ(c.get<int>("svc.workers"), 4);
  EXPECT_EQ(c.get<int>("svc.offset"), -1);
  EXPECT_EQ(c.get<uint64_t>("svc.buffer_bytes"), 4096u);
  EXPECT_EQ(c.get<std::chrono::milliseconds>("svc.timeout_ms"), 5s);
  EXPECT_EQ(c.get<uint32_t>("svc.timeout_ms"), 5000u);
  EXPECT_EQ(c.get<std::string>("svc.name"), "svc");
  EXPECT_EQ(c.get<std::string>("svc.mode"), "fast");
  EXPECT_EQ(c.get<std::vector<std::string>>("svc.peers"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(c.origin("svc.workers").is_default());
  EXPECT_TRUE(c.instances("upstream").empty());
}

TEST_F(Schema, EveryTypeParsesItsSyntax) {
  const Config c = must(R"ini(
[svc]
enabled = Off
workers = 64
offset = -10
ring = 4096
buffer_bytes = 1MiB
timeout_ms = 2m
name = a b   ; comment
note =
mode = safe
level = debug
peers = x ,y,  z
)ini");
  EXPECT_FALSE(c.get<bool>("svc.enabled"));
  EXPECT_EQ(c.get<int64_t>("svc.workers"), 64);
  EXPECT_EQ(c.get<int8_t>("svc.offset"), -10);
  EXPECT_EQ(c.get<uint16_t>("svc.ring"), 4096);
  EXPECT_EQ(c.get<uint32_t>("svc.buffer_bytes"), 1u << 20);
  EXPECT_EQ(c.get<std::chrono::milliseconds>("svc.timeout_ms"), 120s);
  EXPECT_EQ(c.get<std::string>("svc.name"), "a b");
  EXPECT_EQ(c.get<std::string>("svc.note"), "");
  EXPECT_EQ(c.get<std::string>("svc.level"), "DEBUG");  // stored as declared
  EXPECT_EQ(c.get<std::vector<std::string>>("svc.peers"),
            (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(c.origin("svc.ring").describe(), "t.conf:6");
  EXPECT_EQ(c.show("svc.peers"), "x, y, z");
}

TEST_F(Schema, SizesAndDurationsTakeUnits) {
  const std::vector<std::pair<std::string, uint64_t>> sizes = {
      {"64", 64},     {"64B", 64},        {"1k", 1024},   {"1K", 1024},
      {"2KiB", 2048}, {"1 MiB", 1 << 20}, {"1m", 1 << 20}};
  for (const auto& [text, bytes] : sizes) {
    EXPECT_EQ(must("[svc]\nbuffer_bytes = " + text + "\n").get<uint64_t>("svc.buffer_bytes"), bytes)
        << text;
  }
  const std::vector<std::pair<std::string, uint64_t>> durations = {
      {"0", 0},       {"250", 250},    {"250ms", 250},   {"5s", 5000},
      {"2m", 120000}, {"1h", 3600000}, {"24h", 86400000}};
  for (const auto& [text, ms] : durations) {
    EXPECT_EQ(must("[svc]\ntimeout_ms = " + text + "\n").get<uint64_t>("svc.timeout_ms"), ms)
        << text;
  }
}

TEST_F(Schema, EveryProblemIsReportedWithFileLineKeyAndWhatIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[svc]\nworkers = 65\n", "t.conf:2: svc.workers: 65 is out of range [1, 64]"},
      {"[svc]\nworkers = -1\n",
       "t.conf:2: svc.workers: \"-1\" is negative (expected an integer in [1, 64])"},
      {"[svc]\nworkers = 4x\n", "t.conf:2: svc.workers: \"4x\" is not an unsigned integer"},
      {"[svc]\nworkers =\n", "t.conf:2: svc.workers: empty value (expected an integer in [1, 64])"},
      {"[svc]\noffset = -11\n", "t.conf:2: svc.offset: -11 is out of range [-10, 10]"},
      {"[svc]\noffset = --1\n", "t.conf:2: svc.offset: \"--1\" is not an integer"},
      {"[svc]\nring = 1000\n",
       "t.conf:2: svc.ring: 1000 is not a power of two (nearest: 512 or 1024)"},
      {"[svc]\nbuffer_bytes = 2MiB\n",
       "t.conf:2: svc.buffer_bytes: 2MiB (2097152 bytes) is out of range [64, 1048576]"},
      {"[svc]\nbuffer_bytes = 4KB\n",
       "t.conf:2: svc.buffer_bytes: \"4KB\" is not a size (bytes, or a number with K, M, G or T: "
       "64K, 4MiB)"},
      {"[svc]\nbuffer_bytes = -4\n",
       "t.conf:2: svc.buffer_bytes: \"-4\" is negative (expected a size in [64, 1048576] bytes)"},
      {"[svc]\ntimeout_ms = 25h\n",
       "t.conf:2: svc.timeout_ms: 25h (90000000 ms) is out of range [0, 86400000]"},
      {"[svc]\ntimeout_ms = soon\n",
       "t.conf:2: svc.timeout_ms: \"soon\" is not a duration (milliseconds, or a number with ms, "
       "s, m or h: 250ms, 5s, 2m)"},
      {"[svc]\ntimeout_ms = 99999999999999999999999\n",
       "t.conf:2: svc.timeout_ms: 99999999999999999999999 is out of range [0, 86400000]"},
      {"[svc]\nenabled = maybe\n",
       "t.conf:2: svc.enabled: \"maybe\" is not a boolean (use true/false, on/off, yes/no or 1/0)"},
      {"[svc]\nname =\n", "t.conf:2: svc.name: empty value"},
      {"[svc]\nmode = Fast\n", "t.conf:2: svc.mode: \"Fast\" is not a mode (use fast or safe)"},
      {"[svc]\npeers = a,,b\n", "t.conf:2: svc.peers: empty item in \"a,,b\""},
      {"[svc]\npeers = a:1\n", "t.conf:2: svc.peers: \"a:1\" has a ':'"},
      {"[svc\n", "t.conf:1: missing ']' in \"[svc\""},
      {"[]\n", "t.conf:1: empty section name []"},
      {"[svc] x = 1\n", "t.conf:1: unexpected \"x = 1\" after [svc]"},
      {"[svc]\nworkers 4\n", "t.conf:2: missing '=' in \"workers 4\""},
      {"[svc]\n = 4\n", "t.conf:2: missing key before '=' in \"= 4\""},
      {"[svc]\nworkers = 1\nworkers = 2\n",
       "t.conf:3: svc.workers: duplicate key (first set on line 2)"},
  };
  for (const auto& [text, message] : cases) EXPECT_EQ(problems(text), message) << text;
}

TEST_F(Schema, UnknownNamesGetAHint) {
  EXPECT_EQ(problems("[svc]\nworkrs = 2\n"),
            "t.conf:2: svc.workrs: unknown key (did you mean svc.workers?)");
  EXPECT_EQ(problems("[svc]\ncolour = red\n"), "t.conf:2: svc.colour: unknown key");
  EXPECT_EQ(problems("[upstream.a]\nservers = x\nworkers = 1\n"),
            "t.conf:3: upstream.a.workers: unknown key (did you mean svc.workers?)");
  EXPECT_EQ(problems("[svc]\nbalance = hash\n"),
            "t.conf:2: svc.balance: unknown key (it is a key of [upstream.NAME])");
  EXPECT_EQ(problems("[Svc]\nworkers = 1\n"),
            "t.conf:1: unknown section [Svc] (did you mean [svc]?)");
  EXPECT_EQ(problems("[upstrem.a]\n"),
            "t.conf:1: unknown section [upstrem.a] (did you mean [upstream.a]?)");
  EXPECT_EQ(problems("[foo]\n"),
            "t.conf:1: unknown section [foo] (known: [svc] or [upstream.NAME])");
  EXPECT_EQ(problems("workers = 1\n"),
            "t.conf:1: workers: key outside any section (it belongs under [svc])");
  EXPECT_EQ(problems("colour = 1\n"),
            "t.conf:1: colour: key outside any section (put it under [svc] or [upstream.NAME])");
}

TEST_F(Schema, AllProblemsAreReportedNotOnlyTheFirst) {
  // The keys of an unknown section are not reported one by one: the section already is.
  EXPECT_EQ(
      problems("[svc]\nworkers = x\n[foo]\na = 1\nb = 2\n[svc]\nring = 1000\n", {"svc.mode=slow"}),
      "t.conf:2: svc.workers: \"x\" is not an unsigned integer | "
      "t.conf:3: unknown section [foo] (known: [svc] or [upstream.NAME]) | "
      "t.conf:7: svc.ring: 1000 is not a power of two (nearest: 512 or 1024) | "
      "--set:1: svc.mode: \"slow\" is not a mode (use fast or safe)");
  // A runaway file is cut short: kMaxProblems lines and one that counts the rest.
  std::string text = "[svc]\n";
  for (int i = 0; i < 50; ++i) text += "bad" + std::to_string(i) + " = 1\n";
  auto parsed = parse(text);
  ASSERT_FALSE(parsed);
  ASSERT_EQ(parsed.error().problems.size(), ConfigError::kMaxProblems + 1);
  EXPECT_EQ(parsed.error().problems.back(), "... and 30 more problem(s)");
}

TEST_F(Schema, OverridesAreCheckedLikeTheFileAndTheLastWins) {
  const Config c =
      must("[svc]\nworkers = 2\n", {"svc.workers=3", " svc.workers = 5 ", "svc.name=a ; b"});
  EXPECT_EQ(c.get<int>("svc.workers"), 5);
  EXPECT_EQ(c.get<std::string>("svc.name"), "a ; b");  // taken literally
  EXPECT_EQ(c.origin("svc.workers").describe(), "--set:2");
  EXPECT_EQ(problems("", {"svc.workers"}), "--set:1: missing '=' in \"svc.workers\"");
  EXPECT_EQ(problems("", {"workers=1"}),
            "--set:1: missing section in \"workers=1\" (expected section.key=value)");
  EXPECT_EQ(problems("", {"svc.zzz=1"}), "--set:1: svc.zzz: unknown key");
  EXPECT_EQ(problems("", {"sv.workers=1"}), "--set:1: unknown section [sv] (did you mean [svc]?)");
}

TEST_F(Schema, FamiliesHoldAnyNumberOfSectionsWithOneKeySet) {
  const Config c = must(R"ini(
[upstream.api]
servers = 10.0.0.1:80, 10.0.0.2:80
[upstream.static-files]
servers = 10.0.1.1:80
balance = hash
)ini",
                        {"upstream.extra.servers=127.0.0.1:9"});
  EXPECT_EQ(c.instances("upstream"), (std::vector<std::string>{"api", "static-files", "extra"}));
  EXPECT_EQ(c.get<std::vector<std::string>>("upstream.api.servers").size(), 2u);
  EXPECT_EQ(c.get<std::string>("upstream.api.balance"), "round_robin");
  EXPECT_EQ(c.get<std::string>("upstream.static-files.balance"), "hash");
  EXPECT_EQ(c.origin("upstream.extra.servers").describe(), "--set:1");
  EXPECT_THROW((void)c.get<std::string>("upstream.other.balance"), std::logic_error);

  EXPECT_EQ(problems("[upstream]\n"), "t.conf:1: [upstream] needs a name: [upstream.NAME]");
  EXPECT_EQ(problems("[upstream.a b]\n"),
            "t.conf:1: \"a b\" is not a name for [upstream.NAME] (letters, digits, '_' and '-')");
  EXPECT_EQ(problems("\n[upstream.a]\nbalance = hash\n"),
            "t.conf:2: upstream.a.servers: required key missing");
  EXPECT_EQ(problems("[upstream.a]\nservers =\n"), "t.conf:2: upstream.a.servers: empty value");
}

TEST_F(Schema, ChecksAcrossKeysNameTheKeySetLast) {
  EXPECT_EQ(problems("[svc]\nring = 8\nworkers = 9\n"),
            "t.conf:3: svc.workers: more workers than ring entries");
  EXPECT_EQ(problems("[svc]\nworkers = 9\nring = 8\n"),
            "t.conf:3: svc.ring: more workers than ring entries");
  EXPECT_EQ(problems("[svc]\nworkers = 9\nring = 8\n", {"svc.workers=10"}),
            "--set:1: svc.workers: more workers than ring entries");
  // Checks run only on a configuration whose every value is valid.
  EXPECT_EQ(problems("[svc]\nring = 8\nworkers = 9\nmode = x\n"),
            "t.conf:4: svc.mode: \"x\" is not a mode (use fast or safe)");
}

TEST_F(Schema, ReadingAKeyAsTheWrongTypeIsAProgrammingError) {
  const Config c = must("");
  EXPECT_THROW((void)c.get<bool>("svc.workers"), std::logic_error);
  EXPECT_THROW((void)c.get<std::string>("svc.workers"), std::logic_error);
  EXPECT_THROW((void)c.get<int>("svc.name"), std::logic_error);
  EXPECT_THROW((void)c.get<uint32_t>("svc.offset"), std::logic_error);  // may be negative
  EXPECT_THROW((void)c.get<uint8_t>("svc.ring"), std::logic_error);     // up to 4096
  EXPECT_THROW((void)c.get<int>("svc.nope"), std::logic_error);
  EXPECT_EQ(c.get<uint16_t>("svc.ring"), 256);
}

TEST_F(Schema, ProgramDefaultsPassTheKeysOwnRules) {
  schema_.set_defaults({"svc.workers=8", " svc.timeout_ms = 1s "});
  const Config c = must("");
  EXPECT_EQ(c.get<int>("svc.workers"), 8);
  EXPECT_EQ(c.get<uint32_t>("svc.timeout_ms"), 1000u);
  EXPECT_THROW(schema_.set_defaults({"svc.workers=100"}), std::invalid_argument);
  EXPECT_THROW(schema_.set_defaults({"svc.nope=1"}), std::invalid_argument);
  EXPECT_THROW(schema_.set_defaults({"svc.workers"}), std::invalid_argument);
  EXPECT_THROW(schema_.section("svc").integer("workers", 1, 0, 2, ""), std::logic_error);
  EXPECT_THROW(schema_.section("Bad"), std::logic_error);
  EXPECT_THROW(schema_.section("upstream"), std::logic_error);  // a family
}

TEST_F(Schema, HelpListsEveryKeyWithTypeDefaultAndMeaning) {
  const std::string help = schema_.describe();
  for (const char* line :
       {"[svc]  a service\n",
        "  workers = 4                       (integer 1..64)\n      worker count\n",
        "  ring = 256                        (power of two 8..4096)\n      ring entries\n",
        "  timeout_ms = 5000                 (duration 0..86400000 ms (or 250ms, 5s, 2m, 1h))\n",
        "  level = INFO                      (DEBUG|INFO (any case); SIGHUP applies it)\n",
        "  note =                            (text)\n", "  peers = a, b",
        "[upstream.NAME]  a group of servers\n",
        "  servers = (required)              (comma-separated list, not empty; SIGHUP applies "
        "it)\n"}) {
    EXPECT_NE(help.find(line), std::string::npos) << line << "\n---\n" << help;
  }
}

TEST_F(Schema, ChangesAndReloadableKeysFollowTheFile) {
  const Config before = must("[svc]\nworkers = 2\nlevel = INFO\n[upstream.a]\nservers = x\n");
  const Config after = must(
      "[svc]\nworkers = 3\nlevel = DEBUG\n[upstream.a]\nservers = y\n[upstream.b]\nservers = z\n");
  const auto changes = Config::changes(before, after);
  ASSERT_EQ(changes.size(), 4u);
  EXPECT_EQ(changes[0].key, "svc.workers");
  EXPECT_EQ(changes[0].from, "2");
  EXPECT_EQ(changes[0].to, "3");
  EXPECT_EQ(changes[1].key, "svc.level");
  EXPECT_EQ(changes[2].key, "upstream.a.servers");
  EXPECT_EQ(changes[3].key, "[upstream.b]");
  EXPECT_EQ(changes[3].from, "(none)");
  // What a server runs with after a reload: the reloadable keys, and whole reloadable families.
  Config running = before;
  running.take_reloadable(after);
  EXPECT_EQ(running.get<int>("svc.workers"), 2);
  EXPECT_EQ(running.get<std::string>("svc.level"), "DEBUG");
  EXPECT_EQ(running.instances("upstream"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Config::changes(running, after).size(), 1u);  // svc.workers: at the next start
}

TEST(EditDistance, CountsSingleEditsAndTranspositions) {
  EXPECT_EQ(edit_distance("port", "port"), 0u);
  EXPECT_EQ(edit_distance("prot", "port"), 1u);
  EXPECT_EQ(edit_distance("colour", "color"), 1u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(closest("thread_nm", {"thread_num", "port"}), "thread_num");
  EXPECT_EQ(closest("xyz", {"thread_num", "port"}), "");
}

}  // namespace
}  // namespace ucp::app

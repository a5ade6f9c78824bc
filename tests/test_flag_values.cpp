// Flag values read as the user wrote them: decimal integers, no empty value or list item, the value quoted and the flag named in every message, CLI11's parse errors as one line.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli/cli.hpp"
#include "cli_run.hpp"
#include "output/error_json.hpp"
#include "flags/flag_values.hpp"
#include "cli/gpu_runner.hpp"
#include "mlaplan/gpu_check/bench.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/cache/layout.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/model/topology.hpp"
#include "mlaplan/gpu_check/verify.hpp"
#include "temp_dir.hpp"

namespace {

using testing_cli::Run;
using testing_cli::run;
std::string cfg(const std::string& rel) { return testing_cli::config_file(rel); }
const std::string kV41 = cfg("deepseek-v4.1-flash.json");
const std::string kMissing = cfg("does-not-exist.json");

/// The one line a usage error prints.
std::string error_line(const std::string& message) { return "mla-plan: error: " + message + "\n"; }

/// A usage error: exit 1, nothing on stdout (with --json among the arguments, the error document
/// of the same message), exactly `message` as the one line on stderr.
void require_usage(const std::vector<std::string>& args, const std::string& message) {
  std::string shown;
  for (const auto& a : args) shown += "[" + a + "] ";
  INFO(shown);
  const Run r = run(args);
  CHECK(r.code == 1);
  if (mlaplan::cli::error_json::json_requested(args)) {
    const auto doc = nlohmann::json::parse(r.out, nullptr, false);
    REQUIRE(doc.is_object());
    CHECK(doc["exit_code"] == 1);
    CHECK(doc["error"]["message"] == message);
  } else {
    CHECK(r.out.empty());
  }
  CHECK(r.err == error_line(message));
}

/// The parse stage alone (no file is read): the command it chose and its options.
std::tuple<mlaplan::cli::ParsedCli, std::string> parse(const std::vector<std::string>& args) {
  mlaplan::cli::CommandLine command_line;
  std::ostringstream out, err;
  mlaplan::cli::ParsedCli p = command_line.parse(args, out, err);
  CHECK(out.str().empty());
  return {std::move(p), err.str()};
}

std::vector<std::string> schedule_with(const std::vector<std::string>& more) {
  std::vector<std::string> a = {"schedule", "--kernel", "sm90-sparse"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

// ------------------------------------------------------------------ A: numbers mean what they say

TEST_CASE("flag values: integers are decimal", "[cli][flag-values]") {
  // Leading zeros are decimal (CLI11 2.1 read "010" as octal 8).
  const Run r = run({kV41, "--tp", "8", "--batch", "010", "--context-len", "0100", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("batch").at("context_lens") == nlohmann::json(std::vector<int>(10, 100)));

  auto [sched, sched_err] = parse({"schedule", "--kernel", "sm90-sparse", "--num-sms", "0132", "--h-q", "064",
                                   "--lengths", "010,0,-0", "--s-q", "02"});
  CHECK(sched_err.empty());
  REQUIRE(sched.is("schedule"));
  CHECK(sched.get<mlaplan::cli::ScheduleOptions>("schedule").input.num_sms == 132);
  CHECK(sched.get<mlaplan::cli::ScheduleOptions>("schedule").input.h_q == 64);
  CHECK(sched.get<mlaplan::cli::ScheduleOptions>("schedule").input.s_q == 2);
  CHECK(sched.get<mlaplan::cli::ScheduleOptions>("schedule").input.lengths == std::vector<std::int32_t>{10, 0, 0});

  // Every other spelling is rejected, quoted as given, with the allowed range.
  for (const std::string bad :
       {"0x40", "0X40", "", " 8", "8 ", "+8", "1e3", "8.0", "8,", "0b101", "1_000", "8k", "-", "\xd9\xa3", "8\n"}) {
    require_usage({kV41, "--batch", bad},
                  "--batch: " + mlaplan::quoted(bad) + " is not a decimal integer; allowed 1..65536");
  }
  require_usage({kV41, "--batch", "8\n"}, "--batch: '8\\n' is not a decimal integer; allowed 1..65536");
  // Past int64, either way: the value as typed, not a clamped one.
  require_usage({kV41, "--batch", "18446744073709551616"},
                "--batch: '18446744073709551616' is out of range; allowed 1..65536");
  require_usage({kV41, "--batch", "9223372036854775808"},
                "--batch: '9223372036854775808' is out of range; allowed 1..65536");
  require_usage({kV41, "--batch", "-9223372036854775809"},
                "--batch: '-9223372036854775809' is out of range; allowed 1..65536");
  // A '-' is read, so a negative value gets the range.
  require_usage({kV41, "--spec-tokens", "-1"}, "--spec-tokens: '-1' is out of range; allowed 0..64");
  require_usage({kV41, "--batch=-5"}, "--batch: '-5' is out of range; allowed 1..65536");
  // In range after leading zeros, out of range as typed.
  require_usage({kV41, "--batch", "000000"}, "--batch: '000000' is out of range; allowed 1..65536");
  // Control bytes are escaped, long values cut.
  require_usage({kV41, "--batch", "1\x1b[31m"}, "--batch: '1\\x1b[31m' is not a decimal integer; allowed 1..65536");
  const std::string digits(200, '9');
  require_usage({kV41, "--batch", digits},
                "--batch: '" + digits.substr(0, 80) + "'... (200 bytes) is out of range; allowed 1..65536");
}

TEST_CASE("flag values: every integer flag of every subcommand", "[cli][flag-values]") {
  struct Flag {
    std::vector<std::string> command;  ///< the subcommand and what it needs before the flag
    std::string flag;                  ///< as given
    std::string name;                  ///< as the message names it
    std::string allowed;
  };
  const std::string positions = "1..max_model_len minus --spec-tokens";
  const std::string i64 = std::to_string(std::numeric_limits<std::int64_t>::max());
  const std::string u64 = std::to_string(std::numeric_limits<std::uint64_t>::max());
  const std::string i32 = std::to_string(std::numeric_limits<int>::max());
  std::vector<Flag> flags;
  for (const std::string sub : {"plan", "report", "check"}) {
    std::vector<std::string> c = {sub, kMissing};
    if (sub == "report") c.insert(c.end(), {"-o", "x.svg"});
    flags.push_back({c, "--num-sms", "--num-sms", "1..1024"});
    flags.push_back({c, "--block-size", "--block-size", "1..1048576"});
    flags.push_back(
        {c, "--max-model-len", "--max-model-len", "1..the config's max_position_embeddings, at most 17179869184"});
    flags.push_back({c, "--max-num-batched-tokens", "--max-num-batched-tokens", "1..16777216"});
    // A flag with an alias is named as typed, either way.
    for (const std::string pp : {"--pp", "--pipeline-parallel-size"})
      flags.push_back({c, pp, pp, "1..4096, at most the config's backbone layers"});
    for (const std::string dcp : {"--dcp", "--decode-context-parallel-size"}) flags.push_back({c, dcp, dcp, "1..4096"});
    if (sub == "check") {
      // check takes lists of TP and DP sizes (its --matrix runs each).
      for (const std::string dp : {"--dp", "--data-parallel-size"}) flags.push_back({c, dp, dp + "[0]", "1..4096"});
      for (const std::string tp : {"--tp", "--tensor-parallel-size"}) flags.push_back({c, tp, tp + "[0]", "1..4096"});
      flags.push_back({c, "--min-concurrency", "--min-concurrency", "0.." + i64});
    } else {
      for (const std::string dp : {"--dp", "--data-parallel-size"}) flags.push_back({c, dp, dp, "1..4096"});
      for (const std::string tp : {"--tp", "--tensor-parallel-size"}) flags.push_back({c, tp, tp, "1..4096"});
      flags.push_back({c, "--batch", "--batch", "1..65536"});
      flags.push_back({c, "--context-len", "--context-len", positions});
      flags.push_back({c, "--context-lens", "--context-lens[0]", positions});
      flags.push_back({c, "--spec-tokens", "--spec-tokens", "0..64"});
    }
  }
  const std::vector<std::string> verify = {"verify", kMissing};
  flags.push_back({verify, "--device", "--device", "0.." + i32 + ", a comma-separated list of them, or all"});
  flags.push_back({verify, "--seed", "--seed", "0.." + u64});
  flags.push_back({verify, "--iterations", "--iterations", "1..10000"});
  for (const std::string tp : {"--tp", "--tensor-parallel-size"}) flags.push_back({verify, tp, tp, "1..4096"});
  for (const std::string dp : {"--dp", "--data-parallel-size"}) flags.push_back({verify, dp, dp, "1..4096"});
  flags.push_back({verify, "--batch", "--batch", "1..65536"});
  flags.push_back({verify, "--context-lens", "--context-lens[0]", positions});
  flags.push_back({verify, "--spec-tokens", "--spec-tokens", "0..64"});
  const std::vector<std::string> bench = {"bench", kMissing};
  flags.push_back({bench, "--device", "--device", "0.." + i32});
  flags.push_back({bench, "--seed", "--seed", "0.." + u64});
  flags.push_back({bench, "--replays", "--replays", "1..10000"});
  flags.push_back({bench, "--warmup", "--warmup", "0..1000"});
  for (const std::string tp : {"--tp", "--tensor-parallel-size"}) flags.push_back({bench, tp, tp, "1..4096"});
  flags.push_back({bench, "--batch", "--batch[0]", "1..4096"});
  const std::vector<std::string> sched = {"schedule", "--kernel", "sm90-sparse"};
  flags.push_back({sched, "--num-sms", "--num-sms", "1..4096"});
  flags.push_back({sched, "--h-q", "--h-q", "1..4096"});
  flags.push_back({sched, "--s-q", "--s-q", "1..4096"});
  flags.push_back({sched, "--h-k", "--h-k", "1..4096"});
  flags.push_back({sched, "--lengths", "--lengths[0]", "0..268435456"});
  flags.push_back({sched, "--extra-lengths", "--extra-lengths[0]", "0..268435456"});

  // The sizes vLLM reads with human_readable_int take its syntax (a suffix, spaces around).
  const std::vector<std::string> sizes = {"--max-model-len", "--max-num-batched-tokens"};
  for (const auto& f : flags) {
    INFO(f.command.front() << " " << f.flag);
    const bool size = std::find(sizes.begin(), sizes.end(), f.flag) != sizes.end();
    // Checked while parsing, before any file is opened (the config does not exist) or any
    // required flag is missed.
    for (const std::string bad : {"0x10", "", "+1", "1 "}) {
      if (size && bad == "1 ") continue;  // vLLM strips the value
      auto a = f.command;
      a.insert(a.end(), {f.flag, bad});
      const bool list = f.name.back() == ']';
      require_usage(
          a, bad.empty() && list ? f.name + ": empty item in ''; every item is a decimal integer, allowed " + f.allowed
             : size ? f.name + ": " + mlaplan::quoted(bad) + " is not a decimal integer or size; allowed " + f.allowed +
                          " (a size may end in k, m, g, t: 10^3.. or K, M, G, T: 2^10..)"
                    : f.name + ": " + mlaplan::quoted(bad) + " is not a decimal integer; allowed " + f.allowed);
    }
    auto a = f.command;
    a.insert(a.end(), {f.flag, "99999999999999999999"});
    require_usage(a, f.name + ": '99999999999999999999' is out of range; allowed " + f.allowed);
  }
}

TEST_CASE("flag values: numbers are decimal, empty values are errors", "[cli][flag-values]") {
  // Accepted: the forms std::from_chars reads as decimal.
  for (const std::string ok : {"0.5", ".5", "5e-1", "0.50", "5E-1", "1"}) {
    INFO(ok);
    auto [p, err] = parse({kMissing, "--gpu-memory-utilization", ok});
    CHECK(err.empty());
    REQUIRE(p.is("plan"));
    CHECK(p.get<mlaplan::cli::PlanOptions>("plan").fit.budget.gpu_memory_utilization == Approx(std::stod(ok)));
  }
  struct Flag {
    std::vector<std::string> command;
    std::string flag, allowed;
  };
  const std::vector<Flag> flags = {
      {{kMissing}, "--gpu-memory-utilization", "above 0 up to 1"},
      {{kMissing}, "--gpu-memory-gib", "2^-30 (1 byte) up to 1048576 GiB"},
      {{"report", kMissing, "-o", "x.html"}, "--weights-gib", "0 up to 1048576 GiB"},
      {{"check", kMissing}, "--reserved-gib", "0 up to 1048576 GiB"},
      {{kMissing}, "--kv-budget-gib", "2^-30 (1 byte) up to 1048576 GiB"},
      {{"check", kMissing}, "--max-global-bytes-per-token", "0 up to 1e18"},
  };
  for (const auto& f : flags) {
    INFO(f.flag);
    for (const std::string bad : {"", "0x1p-1", "0X1P-1", "+0.5", " 0.5", "0.5 ", "0,5", "1/2", "0.5GiB", "e5"}) {
      auto a = f.command;
      a.insert(a.end(), {f.flag, bad});
      require_usage(a, f.flag + ": " + mlaplan::quoted(bad) + " is not a decimal number; allowed " + f.allowed);
    }
    // Infinity, NaN and what does not fit a double are outside every range.
    for (const std::string bad : {"inf", "-inf", "nan", "NaN", "infinity", "1e400", "-1"}) {
      auto a = f.command;
      a.insert(a.end(), {f.flag, bad});
      require_usage(a, f.flag + ": '" + bad + "' is out of range; allowed " + f.allowed);
    }
  }
  // The empty value is an error, never the default.
  require_usage({kV41, "--context-len", ""},
                "--context-len: '' is not a decimal integer; allowed 1..max_model_len "
                "minus --spec-tokens");
  require_usage({kV41, "--batch="},
                "plan: --batch needs a value (a decimal integer); run 'mla-plan plan --help' for "
                "the flags");
}

TEST_CASE("flag values: an empty list item is an error naming the item", "[cli][flag-values]") {
  const std::string ctx = "every item is a decimal integer, allowed 1..max_model_len minus --spec-tokens";
  require_usage({kV41, "--context-lens", "1,,3"}, "--context-lens[1]: empty item in '1,,3'; " + ctx);
  require_usage({kV41, "--context-lens", "1,2,"}, "--context-lens[2]: empty item in '1,2,'; " + ctx);
  require_usage({kV41, "--context-lens", ",1"}, "--context-lens[0]: empty item in ',1'; " + ctx);
  require_usage({kV41, "--context-lens", ""}, "--context-lens[0]: empty item in ''; " + ctx);
  require_usage({kV41, "--context-lens", "1,0x2"},
                "--context-lens[1]: '0x2' is not a decimal integer; allowed 1..max_model_len minus --spec-tokens");
  require_usage({kV41, "--context-lens", "1, 2"},
                "--context-lens[1]: ' 2' is not a decimal integer; allowed 1..max_model_len minus --spec-tokens");
  require_usage({"check", kMissing, "--matrix", "--tp", "1,,2"},
                "--tp[1]: empty item in '1,,2'; every item is a decimal integer, allowed 1..4096");
  require_usage({"check", kMissing, "--matrix", "--tp", "1,8192"}, "--tp[1]: '8192' is out of range; allowed 1..4096");
  require_usage({"check", kMissing, "--matrix", "--tensor-parallel-size", "1,8192"},
                "--tensor-parallel-size[1]: '8192' is out of range; allowed 1..4096");
  require_usage(schedule_with({"--num-sms", "132", "--h-q", "64", "--lengths", "4,x"}),
                "--lengths[1]: 'x' is not a decimal integer; allowed 0..268435456");
  require_usage(schedule_with({"--num-sms", "132", "--h-q", "64", "--lengths", "4,5", "--extra-lengths", "4,"}),
                "--extra-lengths[1]: empty item in '4,'; every item is a decimal integer, allowed 0..268435456");
  require_usage({"bench", kV41, "--batch", "1,,8"},
                "--batch[1]: empty item in '1,,8'; every item is a decimal integer, allowed 1..4096");
  require_usage({"bench", kV41, "--layer-type", "c1a,"},
                "--layer-type[1]: empty item in 'c1a,'; give the items separated by single commas, none empty");
  require_usage({"verify", kV41, "--kv-cache-dtype", ",fp8"},
                "--kv-cache-dtype[0]: empty item in ',fp8'; give the items separated by single commas, none empty");
  // A list is one argument; its items are all kept.
  auto [p, err] = parse({kMissing, "--context-lens", "1,2,3"});
  CHECK(err.empty());
  CHECK(p.get<mlaplan::cli::PlanOptions>("plan").batch.options.context_lens == std::vector<std::int64_t>{1, 2, 3});
}

TEST_CASE("flag values: the helpers", "[cli][flag-values]") {
  using namespace mlaplan::cli;
  const IntRange r{1, 10, {}};
  CHECK(parse_int_value("--x", "007", r) == 7);
  CHECK(parse_int_value("--x", "-0", IntRange{0, 1, {}}) == 0);
  CHECK_THROWS_WITH(parse_int_value("--x", "11", r), "--x: '11' is out of range; allowed 1..10");
  CHECK_THROWS_WITH(parse_int_value("--x", "1.", r), "--x: '1.' is not a decimal integer; allowed 1..10");
  CHECK(parse_uint64_value("--seed", "18446744073709551615") == std::numeric_limits<std::uint64_t>::max());
  CHECK(parse_uint64_value("--seed", "-0") == 0);
  CHECK_THROWS_WITH(parse_uint64_value("--seed", "-1"),
                    "--seed: '-1' is out of range; allowed 0..18446744073709551615");
  CHECK(parse_real_value("--u", "1e-3", RealRange{0, 1, true, {}}) == Approx(0.001));
  CHECK_THROWS_WITH(parse_real_value("--u", "0", RealRange{0, 1, true, {}}),
                    "--u: '0' is out of range; allowed above 0 up to 1");
  CHECK(parse_real_value("--w", "0", RealRange{0, 1, false, "GiB"}) == 0.0);
  CHECK(split_list_value("--l", "a,b") == std::vector<std::string>{"a", "b"});
  CHECK_THROWS_WITH(split_list_value("--l", "a,,b"),
                    "--l[1]: empty item in 'a,,b'; give the items separated by single commas, none empty");
  CHECK(parse_int_list_value("--l", "3,01", r) == std::vector<std::int64_t>{3, 1});
  CHECK_THROWS_AS(parse_int_list_value("--l", "3,", r), mlaplan::Error);
  CHECK(IntRange{1, 4, "1..N"}.text() == "1..N");
}

TEST_CASE("flag values: a check that fails on a default names the flags given", "[cli][flag-values]") {
  // --context-len was not given; --spec-tokens cannot fit --max-model-len, and the range is never empty.
  require_usage({kV41, "--max-model-len", "1", "--spec-tokens", "1"},
                "--spec-tokens: '1' is out of range for --max-model-len 1; allowed 0..0 (a request's context token "
                "and its speculative tokens lie within max_model_len)");
  require_usage({kV41, "--max-model-len", "4", "--spec-tokens", "7", "--batch", "2"},
                "--spec-tokens: '7' is out of range for --max-model-len 4; allowed 0..3 (a request's context token "
                "and its speculative tokens lie within max_model_len)");
  // max_model_len defaulted: said so.
  require_usage({kV41, "--context-len", "1048576", "--spec-tokens", "2"},
                "--context-len: '1048576' is out of range; allowed 1..1048574 (the default max_model_len 1048576, "
                "the config's max_position_embeddings, minus --spec-tokens 2)");
  require_usage({kV41, "--context-lens", "5,101", "--max-model-len", "100"},
                "--context-lens[1]: '101' is out of range; allowed 1..100 (--max-model-len 100)");
  // The defaulted --context-len adapts to --max-model-len and --spec-tokens: no error.
  const Run ok = run({kV41, "--tp", "8", "--max-model-len", "2", "--spec-tokens", "1", "--batch", "3", "--json"});
  CHECK(ok.code == 0);
  CHECK(nlohmann::json::parse(ok.out).at("batch").at("context_lens") == nlohmann::json({1, 1, 1}));
}

TEST_CASE("flag values: every number flag of every subcommand names the flag typed and quotes the value typed",
          "[cli][flag-values]") {
  // The flags come from each subcommand's --help, so a new number flag (or alias) is covered too.
  const std::vector<std::vector<std::string>> commands = {
      {"plan", kMissing},   {"check", kMissing}, {"report", kMissing, "-o", "x.svg"},
      {"verify", kMissing}, {"bench", kMissing}, {"schedule", "--kernel", "sm90-sparse"}};
  const std::vector<std::string> number_types = {"INT", "NUMBER", "INT,...", "INT,...|@FILE", "N|N,N,...|all"};
  int names_checked = 0;
  for (const auto& command : commands) {
    const Run help = run({command.front(), "--help"});
    REQUIRE(help.code == 0);
    std::istringstream lines(help.out);
    for (std::string line; std::getline(lines, line);) {
      // "  --tensor-parallel-size,--tp INT  TP size ..."
      const auto first = line.find_first_not_of(' ');
      if (first == std::string::npos || line.compare(first, 1, "-") != 0) continue;
      const auto space = line.find(' ', first);
      if (space == std::string::npos) continue;
      const auto type_end = line.find(' ', space + 1);
      const std::string type =
          line.substr(space + 1, type_end == std::string::npos ? std::string::npos : type_end - space - 1);
      if (std::find(number_types.begin(), number_types.end(), type) == number_types.end()) continue;
      std::vector<std::string> names;
      std::istringstream split(line.substr(first, space - first));
      for (std::string n; std::getline(split, n, ',');) names.push_back(n);
      for (const auto& name : names) {
        INFO(command.front() << " " << name << " (" << type << ")");
        auto a = command;
        a.insert(a.end(), {name, "0x10"});
        const Run r = run(a);
        CHECK(r.code == 1);
        // A list names its item; --device N (one index, no comma) is named as itself.
        const bool list = type.rfind("INT,", 0) == 0;
        CHECK_THAT(r.err, Catch::StartsWith("mla-plan: error: " + name + (list ? "[0]" : "") + ": '0x10' is not a"));
        // Out of range as typed, leading zeros and all (never a reformatted value).
        a.back() = type == "NUMBER" ? "0001e999" : "000099999999999999999999";
        const Run big = run(a);
        CHECK(big.code == 1);
        CHECK_THAT(big.err, Catch::StartsWith("mla-plan: error: " + name + (list ? "[0]" : "") + ": '" + a.back() +
                                              "' is out of range; allowed "));
        ++names_checked;
      }
    }
  }
  CHECK(names_checked > 60);
}

TEST_CASE("flag values: a size in GiB that would become 0 bytes is refused as typed, under its own name",
          "[cli][flag-values]") {
  // Each GiB flag above 0 becomes bytes further on (--kv-budget-gib: --kv-cache-memory-bytes, the
  // host tier's bytes, the GPU's memory): 1e-10 GiB is 0.1 bytes.
  for (const std::string flag : {"--kv-budget-gib", "--kv-offloading-size", "--gpu-memory-gib"}) {
    INFO(flag);
    for (const std::string tiny : {"1e-10", "0.0000000001", "9.3132257461547e-10", "4.7e-10"}) {
      require_usage({kV41, "--tp", "8", flag, tiny},
                    flag + ": '" + tiny + "' is out of range; allowed 2^-30 (1 byte) up to 1048576 GiB");
    }
    // 2^-30 GiB, one byte, is the smallest allowed (as far as the flag's own check goes).
    auto [p, err] = parse({kMissing, flag, "9.313225746154785e-10"});
    CHECK(err.empty());
    CHECK(p.is("plan"));
  }
  // A tiny host tier runs: no blame on another flag, no reformatted value.
  const Run host = run({kV41, "--tp", "8", "--kv-offloading-size", "9.313225746154785e-10"});
  CHECK(host.err.find("0.000000") == std::string::npos);
  // The sizes that may be 0 take a value under a byte (it is 0 bytes).
  for (const std::string flag : {"--weights-gib", "--reserved-gib", "--load-overhead-gib", "--activation-gib",
                                 "--non-torch-gib", "--cudagraph-gib"}) {
    auto [p, err] = parse({kMissing, flag, "1e-10"});
    CHECK(err.empty());
  }
  // Two flags for the same bytes: both named as typed, no value rewritten.
  require_usage({kV41, "--kv-budget-gib", "0.50", "--kv-cache-memory-bytes", "5"},
                "--kv-budget-gib and --kv-cache-memory-bytes both set the KV-cache bytes per GPU; give one");
}

TEST_CASE("flag values: checks made once the config is read name the flag and quote the value as typed",
          "[cli][flag-values]") {
  require_usage({kV41, "--max-model-len", "1", "--spec-tokens", "01"},
                "--spec-tokens: '01' is out of range for --max-model-len 1; allowed 0..0 (a request's context token "
                "and its speculative tokens lie within max_model_len)");
  require_usage({kV41, "--context-lens", "5,0101", "--max-model-len", "100"},
                "--context-lens[1]: '0101' is out of range; allowed 1..100 (--max-model-len 100)");
  require_usage({kV41, "--context-len", "02000000"},
                "--context-len: '02000000' is out of range; allowed 1..1048576 (the default max_model_len 1048576, "
                "the config's max_position_embeddings)");
  // The pipeline's bound is the config's backbone layers: an alias and leading zeros, as typed.
  for (const std::string pp : {"--pp", "--pipeline-parallel-size"}) {
    require_usage({kV41, pp, "041"},
                  pp + ": '041' is out of range; allowed 1..40 (a stage needs at least one of the 40 backbone layers)");
    require_usage({"report", kV41, "-o", "x.svg", pp + "=41"},
                  pp + ": '41' is out of range; allowed 1..40 (a stage needs at least one of the 40 backbone layers)");
  }
  // check's list of TP sizes outside --matrix.
  require_usage({"check", kV41, "--tp", "1,2"}, "--tp takes several values only with --matrix");
  require_usage({"check", kV41, "--tensor-parallel-size", "1,2"},
                "--tensor-parallel-size takes several values only with --matrix");
}

TEST_CASE("flag values: as_typed() turns a message's subject back to what was typed", "[cli][flag-values]") {
  using mlaplan::cli::as_typed;
  using mlaplan::cli::TypedFlag;
  const std::vector<TypedFlag> typed = {{"--tensor-parallel-size", "--tp", "08", true},
                                        {"--context-lens", "--context-lens", "1,007,x", true},
                                        {"--gpu-memory-gib", "--gpu-memory-gib", "1e-10", false}};
  CHECK(as_typed("--tensor-parallel-size: '8' is out of range", typed) == "--tp: '08' is out of range");
  CHECK(as_typed("plan: --tensor-parallel-size needs a value", typed) == "plan: --tp needs a value");
  CHECK(as_typed("--tensor-parallel-size takes several values", typed) == "--tp takes several values");
  CHECK(as_typed("--context-lens[1]: '7' is out of range", typed) == "--context-lens[1]: '007' is out of range");
  // Not the typed item's value, an item that is not a number, an index past the list: as it was.
  CHECK(as_typed("--context-lens[0]: '7' is out of range", typed) == "--context-lens[0]: '7' is out of range");
  CHECK(as_typed("--context-lens[2]: '0' is out of range", typed) == "--context-lens[2]: '0' is out of range");
  CHECK(as_typed("--context-lens[9]: '7' is out of range", typed) == "--context-lens[9]: '7' is out of range");
  // A number flag's value is not rewritten (its checks quote the typed text), a longer name is not this one.
  CHECK(as_typed("--gpu-memory-gib: '0' is odd", typed) == "--gpu-memory-gib: '0' is odd");
  CHECK(as_typed("--tensor-parallel-sizes: '8'", typed) == "--tensor-parallel-sizes: '8'");
  // The subject only: a flag named later in the message stays as it is.
  CHECK(as_typed("--batch: '3' is too many for --tensor-parallel-size 8", typed) ==
        "--batch: '3' is too many for --tensor-parallel-size 8");
  CHECK(as_typed("config.json: --tensor-parallel-size: '8'", typed) == "config.json: --tensor-parallel-size: '8'");
}

// ------------------------------------------------------------------ B: flags before the GPU

TEST_CASE("flag values: verify and bench check every flag before looking for a GPU", "[cli][flag-values][gpu]") {
  // This suite runs without CUDA or a GPU (exit 6); on a GPU machine the valid runs exit 0 or run.
  const auto valid = [](const std::vector<std::string>& args) {
    const Run r = run(args);
    INFO(r.err);
    CHECK(r.code != 1);
    if (r.code != 0) CHECK(r.code == 6);
  };
  require_usage({"bench", kV41, "--layer-type", "dsa"},
                "--layer-type[0]: the config has no dsa layer; allowed: c1a, c2a, swaonly (the types it has)");
  require_usage({"bench", cfg("deepseek-v3.2.json"), "--layer-type", "dsa,c1a"},
                "--layer-type[1]: the config has no c1a layer; allowed: dsa (the types it has)");
  require_usage({"bench", kV41, "--layer-type", "c9a"},
                "--layer-type[0]: 'c9a' is not a layer type; allowed: swaonly, c1a, c2a, c4a, c128a, dsa");
  require_usage({"bench", kV41, "--batch", "1,4097"}, "--batch[1]: '4097' is out of range; allowed 1..4096");
  require_usage({"bench", kV41, "--kv-cache-dtype", "int4"},
                "--kv-cache-dtype: 'int4' is not a kv-cache dtype of the sparse-MLA backend; supported: auto, fp8, "
                "fp8_ds_mla, nvfp4_ds_mla");
  valid({"bench", kV41, "--layer-type", "c1a,swaonly", "--batch", "1"});

  require_usage({"verify", kV41, "--batch", "257"},
                "verify: the batch has 257 decode tokens (--batch 257); allowed 1..256 for verification (the host "
                "reference recomputes every one)");
  require_usage({"verify", kV41, "--batch", "129", "--spec-tokens", "1"},
                "verify: the batch has 258 decode tokens (--batch 129 x (1 + --spec-tokens 1)); allowed 1..256 for "
                "verification (the host reference recomputes every one)");
  require_usage({"verify", kV41, "--context-lens", "1,2000000"},
                "--context-lens[1]: '2000000' is out of range; allowed 1..1048576 (the default max_model_len "
                "1048576, the config's max_position_embeddings)");
  // verify takes every value vLLM does (what it becomes depends on --attention-backend).
  require_usage({"verify", kV41, "--kv-cache-dtype", "fp8,bf16"},
                "--kv-cache-dtype: 'bf16' is not a kv-cache dtype; allowed: auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2, "
                "fp8_ds_mla, nvfp4_ds_mla");
  valid({"verify", kV41, "--batch", "128", "--spec-tokens", "1"});
  valid({"verify", kV41, "--batch", "256"});
  valid({"verify", kV41, "--batch", "4", "--decode-mode", "all", "--device", "0,0"});
  valid({"verify", kV41, "--batch", "4", "--decode-mode", "cluster_split", "--device", "all"});
  // An invalid config is still exit 2 first.
  CHECK(run({"verify", kMissing, "--batch", "257"}).code == 2);
  CHECK(run({"bench", kMissing, "--layer-type", "dsa"}).code == 2);
}

TEST_CASE("verify and bench reach a GPU only through the runner, after every check", "[cli][flag-values][gpu]") {
  using namespace mlaplan::cli;
  // The CLI library has no kernels (mla-plan-cuda sets the runner): exit 6 after the checks.
  Run r = run({"verify", kV41, "--batch", "8"});
  CHECK(r.code == 6);
  CHECK(r.out.empty());
  CHECK(r.err == error_line("this mla-plan was built without CUDA: verify needs the project's kernels (install the "
                            "CUDA toolkit and rebuild; see README)"));
  // The plain mla-plan of a build with the kernels, whose mla-plan-cuda is not built: what to build.
  struct Restore {
    ~Restore() {
      set_kernels_executable(std::nullopt);
      set_gpu_runner(nullptr);
    }
  } restore;
  set_kernels_executable(KernelsExecutable{"/b/app/mla-plan-cuda", "No such file or directory", "/b"});
  r = run({"bench", kV41, "--replays", "3"});
  CHECK(r.code == 6);
  CHECK(r.err == error_line("bench runs the project's CUDA kernels, which are built into mla-plan-cuda next to this "
                            "mla-plan: '/b/app/mla-plan-cuda' cannot be run (No such file or directory); build it "
                            "with `cmake --build /b --target mla-plan-cuda` (scripts/test.sh builds every target)"));
  CHECK(run({"bench", kV41, "--replays", "0"}).code == 1);  // the checks come first
  set_kernels_executable(std::nullopt);

  // A runner gets the checked options: called once per valid run, never for a refused one.
  static int verify_calls = 0, bench_calls = 0;
  static const GpuRunner fake{[](const VerifyCliOptions& opt, const mlaplan::ModelConfig&, const mlaplan::Topology&,
                                 mlaplan::VerifyOptions& vo, std::int64_t ranks, std::ostream& out, std::ostream&) {
                                ++verify_calls;
                                out << "verify " << opt.config << " requests " << vo.batch.batch.value_or(0)
                                    << " ranks " << ranks << "\n";
                                return 5;
                              },
                              [](const BenchCliOptions&, const mlaplan::ModelConfig&, const mlaplan::Topology&,
                                 mlaplan::BenchOptions& bo, std::ostream& out, std::ostream&) {
                                ++bench_calls;
                                out << "bench replays " << bo.run.replays << "\n";
                                return 0;
                              }};
  set_gpu_runner(&fake);
  r = run({"verify", kV41, "--batch", "8", "--tp", "2", "--dp", "2"});
  CHECK(r.code == 5);
  CHECK(r.out == "verify " + kV41 + " requests 8 ranks 4\n");
  r = run({"bench", kV41, "--replays", "3"});
  CHECK(r.code == 0);
  CHECK(r.out == "bench replays 3\n");
  CHECK(run({"verify", kV41, "--batch", "257"}).code == 1);
  CHECK(run({"bench", kMissing}).code == 2);
  CHECK(verify_calls == 1);
  CHECK(bench_calls == 1);
}

TEST_CASE("flag values: verify's --decode-mode and --device", "[cli][flag-values]") {
  const std::string modes = "allowed: planned, all, split_kv, one_pass, cluster_split";
  require_usage({"verify", kMissing, "--decode-mode", "one-pass"},
                "--decode-mode: 'one-pass' is not allowed; " + modes + "; did you mean 'one_pass'?");
  require_usage({"verify", kMissing, "--decode-mode", "cluster"},
                "--decode-mode: 'cluster' is not allowed; " + modes + "; did you mean 'cluster_split'?");
  require_usage({"verify", kMissing, "--decode-mode", "xyz"}, "--decode-mode: 'xyz' is not allowed; " + modes);
  require_usage({"verify", kMissing, "--decode-mode", "all", "--decode-mode", "planned"},
                "--decode-mode given twice ('all' and 'planned'); give it once");

  const std::string devices =
      "allowed 0.." + std::to_string(std::numeric_limits<int>::max()) + ", a comma-separated list of them, or all";
  require_usage({"verify", kMissing, "--device", "al"},
                "--device: 'al' is not a decimal integer; " + devices + "; did you mean 'all'?");
  require_usage({"verify", kMissing, "--device", "ALL"},
                "--device: 'ALL' is not a decimal integer; " + devices + "; did you mean 'all'?");
  require_usage({"verify", kMissing, "--device", "0,x"}, "--device[1]: 'x' is not a decimal integer; " + devices);
  require_usage({"verify", kMissing, "--device", "0,-1"}, "--device[1]: '-1' is out of range; " + devices);
  require_usage({"verify", kMissing, "--device", "0,,1"},
                "--device[1]: empty item in '0,,1'; give the items separated by single commas, none empty");
  require_usage({"verify", kMissing, "--device", "all,0"},
                "--device[0]: 'all' stands alone (--device all); " + devices);
  require_usage({"verify", kMissing, "--device", "0", "--device", "1"},
                "--device given twice ('0' and '1'); give it once");

  auto [p, err] = parse({"verify", kMissing, "--device", "0,0,1", "--decode-mode", "all"});
  CHECK(err.empty());
  REQUIRE(p.is("verify"));
  CHECK_FALSE(p.get<mlaplan::cli::VerifyCliOptions>("verify").device.all);
  CHECK(p.get<mlaplan::cli::VerifyCliOptions>("verify").device.indices == std::vector<int>{0, 0, 1});
  CHECK(p.get<mlaplan::cli::VerifyCliOptions>("verify").decode_mode == "all");
  auto [q, qerr] = parse({"verify", kMissing, "--device", "all"});
  CHECK(qerr.empty());
  CHECK(q.get<mlaplan::cli::VerifyCliOptions>("verify").device.all);
  CHECK(q.get<mlaplan::cli::VerifyCliOptions>("verify").decode_mode == "planned");
  auto [d, derr] = parse({"verify", kMissing});
  CHECK(d.get<mlaplan::cli::VerifyCliOptions>("verify").device.indices == std::vector<int>{0});
  CHECK_FALSE(d.get<mlaplan::cli::VerifyCliOptions>("verify").device.all);
}

// ------------------------------------------------------------------ C: one line per parse error

TEST_CASE("flag values: CLI11's parse errors are one line naming what is wrong", "[cli][flag-values][parse]") {
  // Unknown flags: the subcommand, the flag, a near name or the command that has it.
  require_usage({kV41, "--foo"}, "plan: unknown flag '--foo'; run 'mla-plan plan --help' for the flags");
  require_usage({kV41, "--tensor-parallel", "8"},
                "plan: unknown flag '--tensor-parallel' (did you mean '--tensor-parallel-size'?); run 'mla-plan plan "
                "--help' for the flags");
  require_usage({"check", kV41, "--tp", "8", "--tensor-paralel-size", "4"},
                "check: unknown flag '--tensor-paralel-size' (did you mean '--tensor-parallel-size'?); run 'mla-plan "
                "check --help' for the flags");
  // The nearest flags by prefix, by a few edits (a swap is one), by the flag inside the word.
  require_usage({kV41, "--bacth", "8"},
                "plan: unknown flag '--bacth' (did you mean '--batch'?); run 'mla-plan plan --help' for the flags");
  require_usage(
      {kV41, "--batch-size", "8"},
      "plan: unknown flag '--batch-size' (did you mean '--batch'?); run 'mla-plan plan --help' for the flags");
  require_usage({kV41, "--max-model-length=4096"},
                "plan: unknown flag '--max-model-length=4096' (did you mean '--max-model-len'?); run 'mla-plan plan "
                "--help' for the flags");
  require_usage({kV41, "--TP", "8"},
                "plan: unknown flag '--TP' (did you mean '--tp'?); run 'mla-plan plan --help' for "
                "the flags");
  require_usage({kV41, "--context", "8"},
                "plan: unknown flag '--context' (did you mean '--context-len' or '--context-lens'?); run 'mla-plan "
                "plan --help' for the flags");
  // Four flags start with --kv (--kv-offloading-size too): more than three equally near, none named.
  require_usage({kV41, "--kv", "fp8"}, "plan: unknown flag '--kv'; run 'mla-plan plan --help' for the flags");
  require_usage({kV41, "--kv-cache", "fp8"},
                "plan: unknown flag '--kv-cache' (did you mean '--kv-cache-dtype' or '--kv-cache-memory-bytes'?); "
                "run 'mla-plan plan --help' for the flags");
  // Six flags start with --max (SGLang's --max-running-requests, --max-prefill-tokens and
  // --max-total-tokens too): none named; --max-n leaves vLLM's two.
  require_usage({kV41, "--max", "8"}, "plan: unknown flag '--max'; run 'mla-plan plan --help' for the flags");
  require_usage({kV41, "--max-num", "8"},
                "plan: unknown flag '--max-num' (did you mean '--max-num-seqs' or '--max-num-batched-tokens'?); run "
                "'mla-plan plan --help' for the flags");
  require_usage({kV41, "--lengths", "3"},
                "plan: unknown flag '--lengths' (a flag of schedule); run 'mla-plan plan --help' for the flags");
  require_usage({kV41, "-o", "x.svg"},
                "plan: unknown flag '-o' (a flag of report); run 'mla-plan plan --help' for the flags");
  require_usage({"gpus", "--foo=1"}, "gpus: unknown flag '--foo=1'; run 'mla-plan gpus --help' for the flags");
  // A misspelt required flag is reported as unknown, not as missing.
  require_usage(schedule_with({"--num-sm", "132", "--h-q", "64", "--lengths", "1"}),
                "schedule: unknown flag '--num-sm' (did you mean '--num-sms'?); run 'mla-plan schedule --help' for "
                "the flags");
  // Unexpected positional arguments.
  require_usage({kV41, "b.json"}, "plan: unexpected argument 'b.json': CONFIG is already '" + kV41 +
                                      "' and plan takes one; run 'mla-plan plan --help' for the flags");
  require_usage({kV41, "--context-lens", "1", "2"},
                "plan: unexpected argument '2': CONFIG is already '" + kV41 +
                    "' and plan takes one (--context-lens takes one argument, its items separated by commas); run "
                    "'mla-plan plan --help' for the flags");
  require_usage({"formats", "x"},
                "formats: unexpected argument 'x': formats takes flags only; run 'mla-plan formats "
                "--help' for the flags");
  require_usage(schedule_with({"--num-sms", "132", "--h-q", "64", "--lengths", "1", "7"}),
                "schedule: unexpected argument '7': schedule takes flags only (--lengths takes one argument, its "
                "items separated by commas); run 'mla-plan schedule --help' for the flags");
  // A flag without its value.
  require_usage({kV41, "--batch"},
                "plan: --batch needs a value (a decimal integer); run 'mla-plan plan --help' for "
                "the flags");
  require_usage({kV41, "--gpu-memory-utilization"},
                "plan: --gpu-memory-utilization needs a value (a decimal number); run 'mla-plan plan --help' for the "
                "flags");
  // A fraction given as a percent says which fraction it means (1.5 is no percent: no hint).
  require_usage({kV41, "--gpu-memory-utilization", "92"},
                "--gpu-memory-utilization: '92' is out of range; allowed above 0 up to 1 (a fraction, not a percent: "
                "0.92 is 92%)");
  require_usage({kV41, "--gpu-memory-utilization", "1.5"},
                "--gpu-memory-utilization: '1.5' is out of range; allowed above 0 up to 1");
  // The argument after a flag is its value, whatever it looks like.
  require_usage({kV41, "--gpu-memory-utilization", "--json"},
                "--gpu-memory-utilization: '--json' is not a decimal number; allowed above 0 up to 1");
  require_usage({"check", kV41, "--format"},
                "check: --format needs a value (one of text, json, github, markdown); run 'mla-plan check --help' for "
                "the flags");
  require_usage({"bench", kV41, "--batch"},
                "bench: --batch needs a value (decimal integers separated by commas); run 'mla-plan bench --help' for "
                "the flags");
  require_usage({"report", kV41, "-o"}, "report: -o needs a value; run 'mla-plan report --help' for the flags");
  require_usage({"report", kV41, "--output"},
                "report: --output needs a value; run 'mla-plan report --help' for the flags");
  require_usage({kV41, "--tp"},
                "plan: --tp needs a value (a decimal integer); run 'mla-plan plan --help' for the flags");
  // Given twice: named with both values, whatever their kind.
  require_usage({kV41, "--batch", "8", "--batch", "16"}, "--batch given twice ('8' and '16'); give it once");
  require_usage({kV41, "--gpu", "h200", "--gpu", "b200", "--gpu", "h100"},
                "--gpu given 3 times ('h200', 'b200' and 'h100'); give it once");
  require_usage({"check", kV41, "--matrix", "--tp", "1,2", "--tp", "4"},
                "--tp given twice ('1,2' and '4'); give it once");
  // Under both names: both named, in the order typed.
  require_usage({"verify", kV41, "--tp", "1", "--tensor-parallel-size", "2"},
                "--tp / --tensor-parallel-size given twice ('1' and '2'); give it once");
  require_usage(schedule_with({"--num-sms", "132", "--h-q", "64", "--lengths", "1", "--lengths", "2"}),
                "--lengths given twice ('1' and '2'); give it once");
  // Required arguments.
  require_usage({"plan"},
                "plan: CONFIG is required (config.json, a model directory, a Hugging Face cache directory, or "
                "ORG/NAME in the local Hugging Face cache); run 'mla-plan plan --help' for the flags");
  require_usage({"schedule", "--kernel", "sm90-sparse"},
                "schedule: --num-sms, --h-q and --lengths are required; run 'mla-plan schedule --help' for the flags");
  require_usage({"report", kV41},
                "report: --output is required (the report file: FILE.svg (one drawing) or FILE.html (drawings and "
                "tables)); run 'mla-plan report --help' for the flags");
  require_usage({},
                "a command or a CONFIG is required: mla-plan CONFIG [flags], or mla-plan COMMAND with COMMAND "
                "one of plan, check, schedule, verify, bench, report, gpus, formats; run 'mla-plan --help' for "
                "usage");
  // Values outside a set.
  require_usage({kV41, "--format", "xml"}, "--format: 'xml' is not allowed; allowed: text, json, markdown");
  require_usage({"check", kV41, "--format", "xml"},
                "--format: 'xml' is not allowed; allowed: text, json, github, markdown");
  require_usage({"check", kV41, "--guard-accounting", "Rows\x1b"},
                "--guard-accounting: 'Rows\\x1b' is not allowed; allowed: rows, pages; did you mean 'rows'?");
  // vLLM's sets ignore case (--kv-cache-dtype, --attention-backend); a value outside a set names
  // the nearest: the same ignoring case, the one it begins or lies inside, a few edits.
  const std::string kv = "allowed: auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2, fp8_ds_mla, nvfp4_ds_mla";
  CHECK(run({kV41, "--tp", "8", "--kv-cache-dtype", "FP8", "--json"}).code == 0);
  CHECK(run({kV41, "--tp", "8", "--attention-backend", "flashmla_sparse_dsv41", "--json"}).code == 0);
  require_usage({kV41, "--kv-cache-dtype", "nvfp4"},
                "--kv-cache-dtype: 'nvfp4' is not a kv-cache dtype; " + kv + "; did you mean 'nvfp4_ds_mla'?");
  require_usage({kV41, "--kv-cache-dtype", "NVFP4"},
                "--kv-cache-dtype: 'NVFP4' is not a kv-cache dtype; " + kv + "; did you mean 'nvfp4_ds_mla'?");
  require_usage({kV41, "--kv-cache-dtype", "e5m2"},
                "--kv-cache-dtype: 'e5m2' is not a kv-cache dtype; " + kv + "; did you mean 'fp8_e5m2'?");
  require_usage({kV41, "--kv-cache-dtype", "ds_mla"}, "--kv-cache-dtype: 'ds_mla' is not a kv-cache dtype; " + kv +
                                                          "; did you mean 'fp8_ds_mla' or 'nvfp4_ds_mla'?");
  require_usage({kV41, "--kv-cache-dtype", "fp8_sd_mla"},
                "--kv-cache-dtype: 'fp8_sd_mla' is not a kv-cache dtype; " + kv + "; did you mean 'fp8_ds_mla'?");
  require_usage({kV41, "--kv-cache-dtype", "int8"}, "--kv-cache-dtype: 'int8' is not a kv-cache dtype; " + kv);
  // More than three equally near (fp8, fp8_e4m3, fp8_e5m2, fp8_ds_mla): none, the list says them.
  require_usage({kV41, "--kv-cache-dtype", "fp"}, "--kv-cache-dtype: 'fp' is not a kv-cache dtype; " + kv);
  require_usage({kV41, "--format", "JSON"},
                "--format: 'JSON' is not allowed; allowed: text, json, markdown; did you mean 'json'?");
  require_usage({kV41, "--engram", "off"},
                "--engram: 'off' is not allowed; allowed: gpu, offload; did you mean 'offload'?");
  require_usage({"verify", kMissing, "--decode-mode", "split-kv"},
                "--decode-mode: 'split-kv' is not allowed; allowed: planned, all, split_kv, one_pass, cluster_split; "
                "did you mean 'split_kv'?");
  // A switch given a value.
  require_usage({kV41, "--json=maybe"}, "plan: --json takes no value ('maybe' given); give --json alone");
  // Unknown commands: a first word near a command's name that names no file.
  const std::string commands =
      ", and no file or directory of that name; the commands: plan, check, schedule, verify, bench, report, gpus, "
      "formats, or mla-plan CONFIG for plan; run 'mla-plan --help' for usage";
  require_usage({"chek", kV41}, "unknown command 'chek' (did you mean 'check'?)" + commands);
  require_usage({"plna", kV41}, "unknown command 'plna' (did you mean 'plan'?)" + commands);
  require_usage({"plna"}, "unknown command 'plna' (did you mean 'plan'?)" + commands);
  require_usage({"Plan", kV41, "--tp", "8"}, "unknown command 'Plan' (did you mean 'plan'?)" + commands);
  require_usage({"schedul", "--kernel", "sm90-sparse"},
                "unknown command 'schedul' (did you mean 'schedule'?)" + commands);
  require_usage({"plan1", "--foo"}, "unknown command 'plan1' (did you mean 'plan'?)" + commands);
  // (not "gpu": a CUDA build's test directory holds a gpu/ folder, which is then a config path)
  require_usage({"gpsu"}, "unknown command 'gpsu' (did you mean 'gpus'?)" + commands);
  // A first flag near mla-plan's own (and none of plan's, which `mla-plan --tp 8 CONFIG` runs).
  require_usage({"--verison"}, "unknown flag '--verison' (did you mean '--version'?); run 'mla-plan --help' for usage");
  require_usage({"--hepl"}, "unknown flag '--hepl' (did you mean '--help'?); run 'mla-plan --help' for usage");
  require_usage({"--foo", kV41}, "plan: unknown flag '--foo'; run 'mla-plan plan --help' for the flags");
  CHECK(run({"--tp", "8", kV41, "--json"}).code == 0);
  // ... but a word far from every command, or one that looks like a path, is a config.
  CHECK(run({"my-model"}).err == error_line("cannot read 'my-model': no such file or directory"));
  CHECK(run({"plan.json"}).err == error_line("cannot read 'plan.json': no such file or directory"));
  CHECK(run({kMissing}).code == 2);
}

TEST_CASE("flag values: a first word near a command that names a file is that config", "[cli][flag-values][parse]") {
  // The word is looked up where it is given: in the working directory, here a scratch one.
  testing_files::TempDir dir;
  std::filesystem::copy_file(kV41, dir / "plna");
  std::filesystem::create_directory(dir / "chek");
  std::filesystem::create_symlink("missing.json", dir / "bnech");
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path);
  const Run plna = run({"plna", "--tp", "8"});
  const Run chek = run({"chek"});
  const Run bnech = run({"bnech"});
  std::filesystem::current_path(cwd);
  CHECK(plna.code == 0);
  CHECK(plna.err.empty());
  CHECK_THAT(plna.out, Catch::StartsWith("mla-plan: plna\n"));
  CHECK(chek.code == 2);
  CHECK(chek.err == error_line("directory 'chek' holds no config.json"));
  CHECK(bnech.code == 2);
  CHECK(bnech.err == error_line("cannot read 'bnech': no such file or directory (a symbolic link to a missing file)"));
}

TEST_CASE("flag values: a parse that fails leaves a kept command line as a new one", "[cli][flag-values][parse]") {
  mlaplan::cli::CommandLine kept;
  const std::vector<std::vector<std::string>> inputs = {{kV41, "--batch", "8", "--batch", "9"},
                                                        {kV41, "--batch", "0x8"},
                                                        {kV41, "--foo"},
                                                        {"schedule"},
                                                        {kV41, "--batch", "8"},
                                                        {kV41, "--context-lens", "1,,2"}};
  for (const auto& args : inputs) {
    std::ostringstream kept_out, kept_err, new_out, new_err;
    const auto& a = kept.parse(args, kept_out, kept_err);
    const int kept_code = a.exit_code;
    const auto kept_command = a.command;
    mlaplan::cli::CommandLine fresh;
    const auto& b = fresh.parse(args, new_out, new_err);
    CHECK(kept_code == b.exit_code);
    CHECK(kept_command == b.command);
    CHECK(kept_err.str() == new_err.str());
  }
}

TEST_CASE("flag values: the checks verify and bench run before a device", "[cli][flag-values][gpu]") {
  const auto c = mlaplan::load_config(kV41);
  const auto topo = mlaplan::build_topology(c);
  mlaplan::LayoutOptions lo;
  CHECK_NOTHROW(mlaplan::check_layout_flags(c, topo, lo));
  lo.tensor_parallel_size = 0;
  CHECK_THROWS_WITH(mlaplan::check_layout_flags(c, topo, lo),
                    "--tensor-parallel-size: '0' is out of range; allowed 1..4096");
  lo.tensor_parallel_size = 1;
  lo.kv_cache_dtype = "int8";
  CHECK_THROWS_WITH(mlaplan::check_layout_flags(c, topo, lo),
                    Catch::StartsWith("--kv-cache-dtype: 'int8' is not a kv-cache dtype"));

  mlaplan::VerifyOptions vo;
  CHECK_NOTHROW(mlaplan::check_verify_options(c, topo, vo));  // the default mix of 37 requests
  vo.layout.pipeline_parallel_size = 41;
  CHECK_THROWS_WITH(mlaplan::check_verify_options(c, topo, vo),
                    "--pipeline-parallel-size: '41' is out of range; allowed 1..40 (a stage needs at least one of the "
                    "40 backbone layers)");
  vo.layout.pipeline_parallel_size = 1;
  vo.batch.context_lens.assign(300, 5);
  CHECK_THROWS_WITH(mlaplan::check_verify_options(c, topo, vo),
                    "verify: the batch has 300 decode tokens (300 requests of --context-lens); allowed 1..256 for "
                    "verification (the host reference recomputes every one)");
  vo.batch.context_lens.clear();
  vo.timing_iterations = 0;
  CHECK_THROWS_WITH(mlaplan::check_verify_options(c, topo, vo), "--iterations: '0' is out of range; allowed 1..10000");

  mlaplan::BenchOptions bo;
  CHECK_NOTHROW(mlaplan::check_bench_flags(c, topo, bo));
  bo.types = {mlaplan::LayerType::c1a, mlaplan::LayerType::c128a};
  CHECK_THROWS_WITH(mlaplan::check_bench_flags(c, topo, bo),
                    "--layer-type[1]: the config has no c128a layer; allowed: c1a, c2a, swaonly (the types it has)");
  bo.types.clear();
  bo.layout.tensor_parallel_size = 5000;
  CHECK_THROWS_WITH(mlaplan::check_bench_flags(c, topo, bo),
                    "--tensor-parallel-size: '5000' is out of range; allowed 1..4096");
}

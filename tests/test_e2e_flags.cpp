// End-to-end tests of the binary: flag values (decimal integers, empty values, quoted values, the flag named, one-line parse errors, flags checked before the GPU).

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "e2e_run.hpp"

using e2e::cfg;
using e2e::run;

namespace {

/// The binary's exit 1: nothing on stdout, `message` as the one line on stderr.
void require_usage(const std::vector<std::string>& args, const std::string& message) {
  std::string shown;
  for (const auto& a : args) shown += "[" + a + "] ";
  INFO(shown);
  const auto r = run(args);
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "mla-plan: error: " + message + "\n");
}

const std::string kV41 = cfg("deepseek-v4.1-flash.json");

}  // namespace

TEST_CASE("e2e flags: integers are decimal, numbers are decimal, values are quoted as given", "[e2e][flag-values]") {
  const auto r = run({kV41, "--tp", "8", "--batch", "010", "--json"});
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out).at("batch").at("decode_tokens") == 10);
  require_usage({kV41, "--batch", "0x40"}, "--batch: '0x40' is not a decimal integer; allowed 1..65536");
  require_usage({kV41, "--batch", ""}, "--batch: '' is not a decimal integer; allowed 1..65536");
  require_usage({kV41, "--batch", "18446744073709551616"},
                "--batch: '18446744073709551616' is out of range; allowed 1..65536");
  require_usage({kV41, "--context-len", "4096\t"},
                "--context-len: '4096\\t' is not a decimal integer; allowed 1..max_model_len minus --spec-tokens");
  require_usage({kV41, "--gpu-memory-utilization", ""},
                "--gpu-memory-utilization: '' is not a decimal number; allowed above 0 up to 1");
  require_usage({kV41, "--gpu-memory-utilization", "0x1p-1"},
                "--gpu-memory-utilization: '0x1p-1' is not a decimal number; allowed above 0 up to 1");
  require_usage({kV41, "--kv-budget-gib", "nan"},
                "--kv-budget-gib: 'nan' is out of range; allowed 2^-30 (1 byte) up to 1048576 GiB");
  require_usage({kV41, "--context-lens", "1,,3"},
                "--context-lens[1]: empty item in '1,,3'; every item is a decimal integer, allowed 1..max_model_len "
                "minus --spec-tokens");
  require_usage({"check", kV41, "--matrix", "--tensor-parallel-size", "1,2,"},
                "--tensor-parallel-size[2]: empty item in '1,2,'; every item is a decimal integer, allowed 1..4096");
  require_usage({"schedule", "--kernel", "sm90-sparse", "--num-sms", "0x84", "--h-q", "64", "--lengths", "1"},
                "--num-sms: '0x84' is not a decimal integer; allowed 1..4096");
  require_usage({kV41, "--max-model-len", "1", "--spec-tokens", "1"},
                "--spec-tokens: '1' is out of range for --max-model-len 1; allowed 0..0 (a request's context token "
                "and its speculative tokens lie within max_model_len)");
}

TEST_CASE("e2e flags: verify and bench reject bad flags before looking for a GPU", "[e2e][flag-values][gpu]") {
  require_usage({"bench", kV41, "--layer-type", "dsa"},
                "--layer-type[0]: the config has no dsa layer; allowed: c1a, c2a, swaonly (the types it has)");
  require_usage({"verify", kV41, "--batch", "257"},
                "verify: the batch has 257 decode tokens (--batch 257); allowed 1..256 for verification (the host "
                "reference recomputes every one)");
  require_usage({"verify", kV41, "--iterations", "0"}, "--iterations: '0' is out of range; allowed 1..10000");
  require_usage({"bench", kV41, "--warmup", "1001"}, "--warmup: '1001' is out of range; allowed 0..1000");
  // Valid flags reach the GPU: exit 6 here (no CUDA, no device), a run on a GPU machine.
  const auto ok = run({"verify", kV41, "--batch", "256"});
  if (ok.code != 0) {
    CHECK(ok.code == 6);
    CHECK(ok.out.empty());
  }
}

TEST_CASE("e2e flags: a parse error is one line naming the subcommand, the flag and the value", "[e2e][flag-values]") {
  require_usage({kV41, "--foo"}, "plan: unknown flag '--foo'; run 'mla-plan plan --help' for the flags");
  require_usage({kV41, "--tensor-parallel", "8"},
                "plan: unknown flag '--tensor-parallel' (did you mean '--tensor-parallel-size'?); run 'mla-plan plan "
                "--help' for the flags");
  require_usage({"check", kV41, "--format", "xml"},
                "--format: 'xml' is not allowed; allowed: text, json, github, markdown");
  require_usage({"verify", kV41, "--seed", "1", "--seed", "2"}, "--seed given twice ('1' and '2'); give it once");
  require_usage({"bench", kV41, "--replays"},
                "bench: --replays needs a value (a decimal integer); run 'mla-plan bench --help' for the flags");
  require_usage({"schedule", "--kernel", "sm90-sparse", "--h-q", "64"},
                "schedule: --num-sms and --lengths are required; run 'mla-plan schedule --help' for the flags");
  require_usage({"gpus", "extra"},
                "gpus: unexpected argument 'extra': gpus takes flags only; run 'mla-plan gpus "
                "--help' for the flags");
  require_usage({},
                "a command or a CONFIG is required: mla-plan CONFIG [flags], or mla-plan COMMAND with COMMAND "
                "one of plan, check, schedule, verify, bench, report, gpus, formats; run 'mla-plan --help' for "
                "usage");
}

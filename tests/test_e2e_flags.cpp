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
  // A device list of the wrong length for the layout's ranks, before any device is looked up.
  require_usage({"verify", kV41, "--tp", "2", "--dp", "2", "--device", "0,0,0"},
                "--device lists 3 devices, but TP 2 x DP 2 has 4 ranks; list one device per rank (an index may "
                "repeat), or one device to run rank 0");
  // The default batch decodes 1 + --spec-tokens tokens per request, as the layout plans them.
  require_usage({"verify", kV41, "--spec-tokens", "7"},
                "verify: the batch has 296 decode tokens (the default mix of 37 requests x (1 + --spec-tokens 7)); "
                "allowed 1..256 for verification (the host reference recomputes every one)");
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

TEST_CASE("e2e: the plain mla-plan hands verify and bench over to mla-plan-cuda next to it", "[e2e][gpu]") {
  namespace fs = std::filesystem;
  // A copy of the binary alone in a directory of its own, then with a stand-in mla-plan-cuda that
  // prints what it was given (its arguments, its standard input) and exits 42.
  const fs::path dir = e2e::scratch() / "hand-over";
  fs::remove_all(dir);
  fs::create_directories(dir);
  e2e::RunOptions alone;
  alone.binary = (dir / "mla-plan").string();
  fs::copy_file(MLAPLAN_BINARY, alone.binary);

  SECTION("without mla-plan-cuda: the checks, then exit 6 saying what to build") {
    const auto v = run({"verify", kV41, "--batch", "8"}, alone);
    CHECK(v.code == 6);
    CHECK(v.out.empty());
#ifdef MLAPLAN_KERNELS_CONFIGURED
    CHECK(v.err ==
          "mla-plan: error: verify runs the project's CUDA kernels, which are built into mla-plan-cuda next "
          "to this mla-plan: '" +
              (dir / "mla-plan-cuda").string() +
              "' cannot be run (No such file or directory); build it with `cmake --build " MLAPLAN_BUILD_DIR
              " --target mla-plan-cuda` (scripts/test.sh builds every target)\n");
#else
    CHECK(v.err ==
          "mla-plan: error: this mla-plan was built without CUDA: verify needs the project's kernels (install the "
          "CUDA toolkit and rebuild; see README)\n");
#endif
    const auto b = run({"bench", kV41, "--batch", "8"}, alone);
    CHECK(b.code == 6);
    CHECK_THAT(b.err, Catch::StartsWith("mla-plan: error: ") && Catch::Contains("bench"));
    // A bad flag is still the usage error it is, a bad config exit 2.
    CHECK(run({"verify", kV41, "--iterations", "0"}, alone).code == 1);
    CHECK(run({"bench", cfg("does-not-exist.json")}, alone).code == 2);
  }

  SECTION("with mla-plan-cuda: verify and bench run there, with the same arguments and standard input") {
    const fs::path fake = dir / "mla-plan-cuda";
    { std::ofstream(fake) << "#!/bin/sh\necho \"mla-plan-cuda: $*\"\ncat\nexit 42\n"; }
    fs::permissions(fake, fs::perms::owner_all);
    e2e::RunOptions with_stdin = alone;
    with_stdin.stdin_path = e2e::write_file("hand-over-lens.txt", "5\n6\n").string();
    const auto v = run({"verify", kV41, "--context-lens", "@-"}, with_stdin);
    CHECK(v.code == 42);
    CHECK(v.out == "mla-plan-cuda: verify " + kV41 + " --context-lens @-\n5\n6\n");
    CHECK(v.err.empty());
    const auto b = run({"bench", kV41, "--replays", "3"}, alone);
    CHECK(b.code == 42);
    CHECK(b.out == "mla-plan-cuda: bench " + kV41 + " --replays 3\n");
    // What the parse refuses is refused here: nothing is handed over.
    const auto bad = run({"verify", kV41, "--iterations", "0"}, alone);
    CHECK(bad.code == 1);
    CHECK(bad.out.empty());
    CHECK(bad.err == "mla-plan: error: --iterations: '0' is out of range; allowed 1..10000\n");
    // Other commands never leave the plain binary.
    CHECK(run({"gpus"}, alone).code == 0);
  }

  SECTION("an mla-plan-cuda that cannot run, or that hands the command back: exit 6 naming why") {
    const fs::path fake = dir / "mla-plan-cuda";
    { std::ofstream(fake) << "not a program\n"; }
    fs::permissions(fake, fs::perms::owner_read | fs::perms::owner_write);
    auto v = run({"verify", kV41}, alone);
    CHECK(v.code == 6);
    CHECK_THAT(v.err, Catch::Contains("mla-plan-cuda' cannot be run (Permission denied)"));
    // A copy of the plain mla-plan under that name does not hand it over again (no loop).
    fs::remove(fake);
    fs::copy_file(MLAPLAN_BINARY, fake);
    e2e::RunOptions timed = alone;
    timed.timeout_s = 20;
    v = run({"verify", kV41}, timed);
    CHECK_FALSE(v.timed_out);
    CHECK(v.code == 6);
    CHECK_THAT(v.err, Catch::Contains("cannot be run (it is not mla-plan-cuda: it handed the command back)"));
  }
  fs::remove_all(dir);
}

TEST_CASE("e2e: an SGLang command line reads SGLang's environment", "[e2e][sglang-serve]") {
  e2e::RunOptions env;
  env.env_extra = {"SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE=1", "SGLANG_SWA_EVICTION_INTERVAL=256"};
  const auto r =
      run({"python3", "-m", "sglang.launch_server", "--model-path", kV41, "--tp", "4", "--gpu", "h200"}, env);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("\n  python -m sglang.launch_server: read from the environment as SGLang reads it: "
                                    "SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE=1 (--engram offload), "
                                    "SGLANG_SWA_EVICTION_INTERVAL=256 (--swa-eviction-interval 256)\n"));
  // The launch command SGLang is given back carries them.
  CHECK_THAT(r.out, Catch::Contains("SGLang launch: SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE=1 "
                                    "SGLANG_SWA_EVICTION_INTERVAL=256 python3 -m sglang.launch_server"));
  require_usage({"sglang", "serve", kV41, "--enable-dp", "--tp", "2"},
                "sglang serve: --enable-dp is ambiguous (SGLang's argparse takes a unique prefix): could match "
                "--enable-dp-attention, --enable-dp-lm-head");
}

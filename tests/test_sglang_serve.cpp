// An SGLang command line read as SGLang's argparse reads it (docs/launch.md, "An SGLang command
// line goes in"): `mla-plan sglang serve ...` and `mla-plan python -m sglang.launch_server ...`,
// each flag's mla-plan flag, the parallel layout's arithmetic, abbreviations, the errors, the
// environment, and the plan that comes out.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "cli/sglang_args.hpp"
#include "cli_run.hpp"
#include "mlaplan/base/error.hpp"

namespace {

using mlaplan::cli::OwnFlags;
using mlaplan::cli::SglangForm;
using mlaplan::cli::SglangServeInput;
using mlaplan::cli::translate_sglang_serve;
using nlohmann::json;
using testing_cli::Run;
using testing_cli::run;
using Args = std::vector<std::string>;

const std::string kV41 = testing_cli::config_file("deepseek-v4.1-flash.json");

/// A few of plan's own flags, and an environment that holds `env` ("NAME=value" each).
OwnFlags own_flags(std::vector<std::string> env = {}) {
  OwnFlags own;
  own.is_flag = [](std::string_view n) {
    return n == "--gpu" || n == "--json" || n == "--engine" || n == "--engram" || n == "--swa-eviction-interval" ||
           n == "--weights-gib";
  };
  own.takes_value = [](std::string_view n) { return n != "--json"; };
  own.names = {"--gpu", "--json", "--engine", "--engram", "--swa-eviction-interval", "--weights-gib"};
  own.getenv = [env = std::move(env)](const char* name) -> const char* {
    for (const auto& e : env) {
      const auto eq = e.find('=');
      if (e.compare(0, eq, name) == 0 && eq == std::string_view(name).size()) return e.c_str() + eq + 1;
    }
    return nullptr;
  };
  return own;
}

SglangServeInput translate(const Args& args, std::vector<std::string> env = {}) {
  return translate_sglang_serve(args, own_flags(std::move(env)));
}

/// The usage error the words give, its message containing `part`.
void refused(const Args& args, const std::string& part, SglangForm form = SglangForm::serve) {
  std::string shown;
  for (const auto& a : args) shown += "[" + a + "] ";
  INFO(shown);
  try {
    (void)translate_sglang_serve(args, own_flags(), form);
    FAIL("no error");
  } catch (const mlaplan::Error& e) {
    CHECK(e.kind() == mlaplan::ErrorKind::usage);
    CHECK_THAT(e.what(), Catch::Contains(part));
  }
}

json plan_json(Args args) {
  args.push_back("--json");
  const Run r = run(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

std::vector<std::string> finding_messages(const json& j, const std::string& id) {
  std::vector<std::string> out;
  for (const auto& f : j.at("findings")) {
    if (f.at("id") == id) out.push_back(f.at("message").get<std::string>());
  }
  return out;
}

}  // namespace

TEST_CASE("sglang serve: each SGLang flag becomes its mla-plan flag", "[launch][sglang-serve]") {
  const auto in = translate({kV41,
                             "--tp",
                             "8",
                             "--context-length",
                             "65536",
                             "--kv-cache-dtype",
                             "fp8_e4m3",
                             "--mem-fraction-static",
                             "0.85",
                             "--max-running-requests",
                             "64",
                             "--chunked-prefill-size",
                             "4096",
                             "--max-prefill-tokens",
                             "8192",
                             "--max-total-tokens",
                             "100000",
                             "--swa-full-tokens-ratio",
                             "0.5",
                             "--swa-prefix-tails",
                             "16",
                             "--cuda-graph-max-bs",
                             "32",
                             "--page-size",
                             "256",
                             "--disable-radix-cache",
                             "--disable-cuda-graph",
                             "--disable-overlap-schedule",
                             "--enable-two-batch-overlap",
                             "--enable-hisparse",
                             "--moe-a2a-backend",
                             "deepep",
                             "--speculative-algorithm",
                             "DSPARK",
                             "--speculative-num-draft-tokens",
                             "6",
                             "--speculative-num-steps",
                             "3",
                             "--speculative-eagle-topk",
                             "1",
                             "--speculative-dspark-block-size",
                             "5",
                             "--pp-size",
                             "2"});
  CHECK(in.prog == "sglang serve");
  CHECK(in.plan_args == Args{kV41,
                             "--engine",
                             "sglang",
                             "--tensor-parallel-size",
                             "8",
                             "--chunked-prefill-size",
                             "4096",
                             "--cuda-graph-max-bs",
                             "32",
                             "--max-model-len",
                             "65536",
                             "--max-prefill-tokens",
                             "8192",
                             "--max-running-requests",
                             "64",
                             "--max-total-tokens",
                             "100000",
                             "--mem-fraction-static",
                             "0.85",
                             "--moe-a2a-backend",
                             "deepep",
                             "--page-size",
                             "256",
                             "--pipeline-parallel-size",
                             "2",
                             "--sglang-kv-cache-dtype",
                             "fp8_e4m3",
                             "--speculative-algorithm",
                             "DSPARK",
                             "--speculative-dspark-block-size",
                             "5",
                             "--speculative-eagle-topk",
                             "1",
                             "--speculative-num-draft-tokens",
                             "6",
                             "--speculative-num-steps",
                             "3",
                             "--swa-full-tokens-ratio",
                             "0.5",
                             "--swa-prefix-tails",
                             "16",
                             "--disable-cuda-graph",
                             "--disable-overlap-schedule",
                             "--disable-radix-cache",
                             "--enable-hisparse",
                             "--enable-two-batch-overlap"});
  CHECK(in.ignored.empty());
  CHECK(in.not_modelled.empty());
  // The long aliases, --flag=value, --model as MODEL, --pp, the model's own names.
  CHECK(translate({"--model=" + kV41, "--tensor-parallel-size=4", "--pipeline-parallel-size", "2", "--dtype",
                   "bfloat16", "--revision", "main", "--language-only"})
            .plan_args == Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "4", "--dtype", "bfloat16",
                               "--pipeline-parallel-size", "2", "--revision", "main", "--language-model-only"});
  CHECK(translate({"--model-path", kV41, "--pp", "2"}).plan_args ==
        Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "1", "--pipeline-parallel-size", "2"});
  // The last of a repeated flag wins, as argparse's store action does.
  CHECK(translate({kV41, "--tp", "2", "--tp", "4"}).plan_args ==
        Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "4"});
  // mla-plan's own flags mixed in; --engine given is kept.
  CHECK(translate({kV41, "--tp", "4", "--gpu=h200", "--engine", "all", "--json"}).plan_args ==
        Args{kV41, "--tensor-parallel-size", "4", "--gpu", "h200", "--engine", "all", "--json"});
  // A value SGLang's argparse refuses.
  refused({kV41, "--kv-cache-dtype", "fp8"}, "--kv-cache-dtype 'fp8' is not one of SGLang's choices");
  refused({kV41, "--tp", "four"}, "--tp: invalid int value: 'four'");
  refused({kV41, "--mem-fraction-static", "high"}, "--mem-fraction-static: invalid float value: 'high'");
  refused({kV41, "--context-length", "0"}, "--context-length 0 is not a context length");
  refused({kV41, "--config", "server.yaml"}, "mla-plan does not read it");
}

TEST_CASE("sglang serve: --tp-size, --dp-size and DP attention as mla-plan's layout", "[launch][sglang-serve]") {
  // DP attention: the N workers split the W ranks of --tp-size.
  CHECK(translate({kV41, "--tp-size", "8", "--dp-size", "4", "--enable-dp-attention"}).plan_args ==
        Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "2", "--data-parallel-size", "4",
             "--enable-dp-attention"});
  CHECK(translate({kV41, "--tp", "8", "--dp", "8", "--enable-dp-attention"}).plan_args ==
        Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "1", "--data-parallel-size", "8",
             "--enable-dp-attention"});
  // Without it: N replicas of a W-rank server.
  CHECK(translate({kV41, "--tp-size", "4", "--data-parallel-size", "2"}).plan_args ==
        Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "4", "--data-parallel-size", "2"});
  refused({kV41, "--tp", "6", "--dp", "4", "--enable-dp-attention"}, "--tp-size 6 is not a multiple of --dp-size 4");
  refused({kV41, "--tp", "0"}, "--tp 0 is not a parallel size");
  // --ep-size: 1 (nothing), the world size (expert parallel), nothing else.
  CHECK(translate({kV41, "--tp", "8", "--ep", "1"}).plan_args ==
        Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "8"});
  CHECK(translate({kV41, "--tp", "8", "--ep-size", "8"}).plan_args ==
        Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "8", "--enable-expert-parallel"});
  CHECK(translate({kV41, "--tp", "8", "--dp", "2", "--enable-dp-attention", "--expert-parallel-size", "8"}).plan_args ==
        Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "4", "--data-parallel-size", "2",
             "--enable-dp-attention", "--enable-expert-parallel"});
  refused({kV41, "--tp", "8", "--ep", "4"}, "not modelled: --ep-size must be 1 or --tp-size (8)");
  refused({kV41, "--ep", "2"}, "not modelled: --ep-size must be 1 or --tp-size (1)");
  // The plan of it: SGLang's world size and workers (the Engram tables on the host: mla-plan's
  // own --engram mixed in).
  const Run r = run({"sglang", "serve", kV41, "--tp", "8", "--dp", "8", "--enable-dp-attention", "--ep", "8", "--gpu",
                     "h200", "--engram", "offload"});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("layout: TP 8, DP attention 8, EP 8; attention TP 1; 8 workers"));
}

TEST_CASE("sglang serve: a unique prefix is the flag, an ambiguous one an error", "[launch][sglang-serve]") {
  CHECK(translate({kV41, "--mem-frac", "0.8", "--context-len=4096", "--disable-radix", "--max-running", "16"})
            .plan_args == Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "1", "--max-model-len", "4096",
                               "--max-running-requests", "16", "--mem-fraction-static", "0.8",
                               "--disable-radix-cache"});
  refused({kV41, "--enable-dp", "--tp", "2"},
          "--enable-dp is ambiguous (SGLang's argparse takes a unique prefix): could match --enable-dp-attention, "
          "--enable-dp-lm-head");
  refused({kV41, "--speculative-num", "3"}, "could match --speculative-num-steps, --speculative-num-draft-tokens");
  // mla-plan's own flags are taken whole, never as a prefix of SGLang's (--gpu, not --gpu-id-step).
  CHECK(translate({kV41, "--gpu", "h200"}).plan_args ==
        Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "1", "--gpu", "h200"});
}

TEST_CASE("sglang serve: unknown flags, missing values and MODEL are usage errors", "[launch][sglang-serve]") {
  const auto bad = [](Args args, const std::string& message) {
    std::string shown;
    for (const auto& a : args) shown += "[" + a + "] ";
    INFO(shown);
    const Run r = run(args);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "mla-plan: error: " + message + "\n");
  };
  bad({"sglang", "serve", kV41, "--max-runing-requests", "8"},
      "sglang serve: unknown flag --max-runing-requests (neither SGLang's nor mla-plan's); did you mean "
      "'--max-running-requests'?");
  bad({"sglang", "serve", kV41, "--tp_size", "8"},
      "sglang serve: unknown flag --tp_size (SGLang's flags are spelled with dashes, not underscores); did you mean "
      "'--tp-size'?");
  bad({"sglang", "serve", "--tp", "8"},
      "sglang serve: no MODEL (--model-path MODEL, or MODEL as the first word: a model directory, a config.json or a "
      "Hugging Face repo id ORG/NAME)");
  bad({"python", "-m", "sglang.launch_server", "--tp", "8"},
      "python -m sglang.launch_server: no MODEL (--model-path MODEL: a model directory, a config.json or a Hugging "
      "Face repo id ORG/NAME)");
  bad({"sglang", "serve", kV41, "--disable-radix-cache=1"},
      "sglang serve: --disable-radix-cache takes no value (SGLang's --disable-radix-cache is a switch; got '1')");
  bad({"sglang", "serve", kV41, "--disable-radix=true"},
      "sglang serve: --disable-radix-cache takes no value (SGLang's --disable-radix-cache is a switch; got 'true')");
  bad({"sglang", "serve", kV41, "--tp"}, "sglang serve: --tp needs a value (argparse: expected one argument)");
  bad({"sglang", "serve", kV41, "--tp", "--dp", "2"},
      "sglang serve: --tp needs a value (argparse: expected one argument)");
  bad({"sglang", "serve", kV41, "--tp", "2", "extra"},
      "sglang serve: unrecognized argument 'extra' (MODEL goes first, `sglang serve MODEL ...`, or as --model-path "
      "MODEL)");
  bad({"python", "-m", "sglang.launch_server", kV41},
      "python -m sglang.launch_server: unrecognized argument '" + kV41 + "' (MODEL is --model-path MODEL)");
  bad({"sglang", "bench", kV41},
      "mla-plan sglang: only `sglang serve [MODEL] [SGLang flags]` is understood, not 'bench'");
  bad({"python", "-m", "vllm.entrypoints.openai.api_server"},
      "mla-plan python: only `python -m sglang.launch_server [SGLang flags]` is understood, not "
      "'-m vllm.entrypoints.openai.api_server'");
  bad({"python3"}, "mla-plan python3: only `python3 -m sglang.launch_server [SGLang flags]` is understood");
  // A negative number is a value, as argparse takes it: chunked prefill off (-1), planned as SGLang
  // sizes it (activations by max_prefill_tokens, the SWA pool in ratio mode).
  const auto in = translate({kV41, "--chunked-prefill-size", "-1"});
  CHECK(in.plan_args ==
        Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "1", "--chunked-prefill-size", "-1"});
  CHECK(in.not_modelled.empty());
  CHECK(translate({kV41, "--chunked-prefill-size=-5"}).plan_args ==
        Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "1", "--chunked-prefill-size", "-1"});
  // --help: the usage of both forms and plan's flags.
  for (const Args& help : {Args{"sglang", "serve", "--help"}, Args{"python3", "-m", "sglang.launch_server", "-h"}}) {
    const Run h = run(help);
    CHECK(h.code == 0);
    CHECK_THAT(h.out, Catch::StartsWith("Usage: mla-plan sglang serve [MODEL] [SGLang flags] [mla-plan plan flags]\n"
                                        "   or: mla-plan python -m sglang.launch_server --model-path MODEL") &&
                          Catch::Contains("--sglang-version"));
  }
}

TEST_CASE("sglang serve: flags that change nothing or are not modelled are listed", "[launch][sglang-serve]") {
  const auto in = translate({kV41,
                             "--host",
                             "0.0.0.0",
                             "--port",
                             "30000",
                             "--trust-remote-code",
                             "--host",
                             "::",
                             "--served-model-name",
                             "dsv41",
                             "--cuda-graph-bs",
                             "1",
                             "2",
                             "4",
                             "8",
                             "--quantization",
                             "fp8",
                             "--dsv4-attn-backend",
                             "trtllm",
                             "--enable-hierarchical-cache",
                             "--hicache-ratio",
                             "2",
                             "--disaggregation-mode",
                             "decode",
                             "--cpu-offload-gb",
                             "0",
                             "--disaggregation-mode=null",
                             "--log-level",
                             "warning",
                             "--enable-metrics"});
  CHECK(in.ignored == Args{"--host", "--port", "--trust-remote-code", "--served-model-name", "--cpu-offload-gb",
                           "--disaggregation-mode", "--log-level", "--enable-metrics"});
  CHECK(in.not_modelled ==
        Args{"--cuda-graph-bs 1 2 4 8 (changes the CUDA graphs captured (SGLang's list up to --cuda-graph-max-bs))",
             "--quantization fp8 (changes the weights' storage (a quantization other than the checkpoint's))",
             "--dsv4-attn-backend trtllm (changes the KV bytes per token (the trtllm backend's cache layout))",
             "--enable-hierarchical-cache (changes the KV pools (a host tier: hierarchical cache))",
             "--hicache-ratio 2 (changes the host KV tier of the hierarchical cache)",
             "--disaggregation-mode decode (changes the pools of a prefill-only or decode-only server)"});
  CHECK(translate({kV41, "--dsv4-attn-backend", "auto"}).ignored == Args{"--dsv4-attn-backend"});
  // In the plan: findings, and the lines under "SGLang launch:".
  const Args cmd = {"sglang", "serve",  kV41,      "--tp",   "4",     "--max-running-requests",
                    "32",     "--host", "0.0.0.0", "--port", "30000", "--quantization",
                    "fp8",    "--gpu",  "h200"};
  const Run r = run(cmd);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto launch = r.out.find("\nSGLang launch: ");
  REQUIRE(launch != std::string::npos);
  CHECK_THAT(r.out.substr(launch),
             Catch::Contains("\n  sglang serve: accepted and ignored (they change nothing mla-plan computes): --host, "
                             "--port\n") &&
                 Catch::Contains("\n  sglang serve: --quantization fp8 (changes the weights' storage (a quantization "
                                 "other than the checkpoint's)); mla-plan does not model it: the numbers are without "
                                 "it\n"));
  Args json_cmd = cmd;
  json_cmd.push_back("--json");
  const auto j = plan_json(json_cmd);
  CHECK(finding_messages(j, "sglang.ignored") ==
        Args{"sglang serve: accepted and ignored (they change nothing mla-plan computes): --host, --port"});
  CHECK(finding_messages(j, "sglang.not_modelled").size() == 1);
}

TEST_CASE("sglang serve: SGLang's environment variables become mla-plan's flags", "[launch][sglang-serve]") {
  auto in = translate({kV41, "--tp", "4"}, {"SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE=1"});
  CHECK(in.plan_args == Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "4", "--engram", "offload"});
  CHECK(in.from_environment == Args{"SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE=1 (--engram offload)"});
  in = translate({kV41}, {"SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE=False", "SGLANG_SWA_EVICTION_INTERVAL=256"});
  CHECK(in.plan_args == Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "1", "--engram", "gpu",
                             "--swa-eviction-interval", "256"});
  CHECK(in.from_environment == Args{"SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE=False (--engram gpu)",
                                    "SGLANG_SWA_EVICTION_INTERVAL=256 (--swa-eviction-interval 256)"});
  // A flag given wins over the environment.
  in = translate({kV41, "--engram", "gpu", "--swa-eviction-interval", "64"},
                 {"SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE=1", "SGLANG_SWA_EVICTION_INTERVAL=256"});
  CHECK(in.plan_args == Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "1", "--engram", "gpu",
                             "--swa-eviction-interval", "64"});
  CHECK(in.from_environment.empty());
  try {
    (void)translate({kV41}, {"SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE=maybe"});
    FAIL("no error");
  } catch (const mlaplan::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE: 'maybe' is not a boolean"));
  }
}

TEST_CASE("sglang serve: python -m sglang.launch_server is the same command line", "[launch][sglang-serve]") {
  const Args flags = {"--tp", "4", "--max-running-requests", "32", "--gpu", "h200"};
  Args a = {"sglang", "serve", kV41};
  a.insert(a.end(), flags.begin(), flags.end());
  Args b = {"python3", "-m", "sglang.launch_server", "--model-path", kV41};
  b.insert(b.end(), flags.begin(), flags.end());
  Args c = {"python", "-m", "sglang.launch_server", "--model", kV41};
  c.insert(c.end(), flags.begin(), flags.end());
  const Run ra = run(a);
  const Run rb = run(b);
  const Run rc = run(c);
  INFO(ra.err + rb.err + rc.err);
  REQUIRE(ra.code == 0);
  CHECK(rb.code == 0);
  CHECK(rb.out == ra.out);
  CHECK(rc.out == ra.out);
  const auto in = translate_sglang_serve({"--model-path", kV41}, own_flags(), SglangForm::launch_server);
  CHECK(in.prog == "python -m sglang.launch_server");
  CHECK(in.plan_args == Args{kV41, "--engine", "sglang", "--tensor-parallel-size", "1"});
  refused({kV41, "--tp", "2"}, "unrecognized argument", SglangForm::launch_server);
  refused({"--model-path", kV41, "--model-type", "llm"}, "unknown flag --model-type", SglangForm::launch_server);
  CHECK(translate({kV41, "--model-type", "llm"}).ignored == Args{"--model-type"});
  refused({kV41, "--model-type", "diffusion"}, "mla-plan plans language models");
}

TEST_CASE("sglang serve: the S4 command line plans SGLang's pools", "[launch][sglang-serve]") {
  // DSpark block 5, 32 running requests, 4K chunks on four H200s: the SWA pool SGLang sizes.
  const Run r = run({"sglang", "serve", "--model-path", kV41, "--tp", "4", "--speculative-algorithm", "DSPARK",
                     "--speculative-dspark-block-size", "5", "--max-running-requests", "32", "--chunked-prefill-size",
                     "4096", "--gpu", "h200"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("SGLang (G3 configurator") && Catch::Contains("swa_tokens=94976"));
  // The same plan as mla-plan's own flags give it.
  const Run p = run({kV41, "--engine", "sglang", "--tensor-parallel-size", "4", "--speculative-algorithm", "DSPARK",
                     "--speculative-dspark-block-size", "5", "--max-running-requests", "32", "--chunked-prefill-size",
                     "4096", "--gpu", "h200"});
  CHECK(p.code == 0);
  CHECK(p.out == r.out);
}

// The CLI in process: argument handling, exit codes and the JSON contract of `plan`.

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli/cli.hpp"
#include "cli_run.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/version.hpp"
#include "temp_dir.hpp"

namespace {

using testing_cli::Run;
using testing_cli::run;
std::string cfg(const std::string& rel) { return testing_cli::config_file(rel); }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("help and version", "[cli]") {
  auto h = run({"--help"});
  CHECK(h.code == 0);
  CHECK_THAT(h.out, Catch::Contains("plan"));
  CHECK_THAT(h.out, Catch::Contains("Exit codes"));
  auto v = run({"--version"});
  CHECK(v.code == 0);
  CHECK_THAT(v.out, Catch::StartsWith("mla-plan "));
  auto ph = run({"plan", "--help"});
  CHECK(ph.code == 0);
  CHECK_THAT(ph.out, Catch::Contains("--json"));
}

TEST_CASE("every --json output starts with schema and tool_version, the version --version prints", "[cli][json]") {
  const auto version = run({"--version"});
  REQUIRE(version.code == 0);
  CHECK(version.out == std::string("mla-plan ") + mlaplan::kVersion + "\n");
  const std::string head =
      std::string("{\n  \"schema\": \"mla-plan/3\",\n  \"tool_version\": \"") + mlaplan::kVersion + "\",\n";
  const std::vector<std::vector<std::string>> commands = {
      {cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--json"},
      {"plan", cfg("deepseek-v3.2.json"), "--format", "json"},
      {"check", cfg("deepseek-v4-flash.json"), cfg("deepseek-v3.2.json"), "--tp", "8", "--json"},
      {"check", "does-not-exist.json", "--format", "json"},
      {"schedule", "--kernel", "sm90-dense", "--num-sms", "132", "--h-q", "128", "--lengths", "100", "--json"},
      {"gpus", "--json"},
      {"formats", "--json"},
  };
  for (const auto& args : commands) {
    INFO(args[0] << " " << args[1]);
    const auto r = run(args);
    CHECK_THAT(r.out, Catch::StartsWith(head));
    const auto j = nlohmann::ordered_json::parse(r.out);
    CHECK(j.at("tool_version") == mlaplan::kVersion);
  }
}

TEST_CASE("usage errors exit 1", "[cli]") {
  auto none = run({});
  CHECK(none.code == 1);
  CHECK_THAT(none.err, Catch::StartsWith("mla-plan: error: "));
  auto flag = run({cfg("deepseek-v4.1-flash.json"), "--no-such-flag"});
  CHECK(flag.code == 1);
  CHECK_THAT(flag.err, Catch::Contains("--no-such-flag"));
  auto missing_arg = run({"plan"});
  CHECK(missing_arg.code == 1);
  CHECK_THAT(missing_arg.err, Catch::Contains("CONFIG is required"));
}

TEST_CASE("the parse stage checks flags before any file and runs nothing", "[cli][parse]") {
  mlaplan::cli::CommandLine command_line;  // one for every parse below, as a fuzz target keeps it
  const auto parse = [&command_line](const std::vector<std::string>& args) {
    std::ostringstream out, err;
    mlaplan::cli::ParsedCli p = command_line.parse(args, out, err);
    return std::tuple(std::move(p), out.str(), err.str());
  };
  const std::string missing = cfg("does-not-exist.json");

  // A command ready to run: nothing written, no file read yet; execute_cli reads it.
  auto [plan, plan_out, plan_err] = parse({missing, "--json", "--batch", "8"});
  CHECK(plan.is("plan"));
  CHECK(plan.exit_code == 0);
  CHECK(plan.get<mlaplan::cli::PlanOptions>("plan").config == missing);
  CHECK(plan.get<mlaplan::cli::PlanOptions>("plan").batch.options.batch == 8);
  CHECK((plan_out.empty() && plan_err.empty()));
  std::ostringstream out, err;
  CHECK(mlaplan::cli::execute_cli(plan, out, err) == 2);
  CHECK(err.str() == "mla-plan: error: cannot read '" + missing + "': no such file or directory\n");
  // A later parse starts from the defaults.
  auto [again, again_out, again_err] = parse({missing});
  CHECK(again.is("plan"));
  CHECK(!again.get<mlaplan::cli::PlanOptions>("plan").json);
  CHECK(!again.get<mlaplan::cli::PlanOptions>("plan").batch.options.batch);

  // Help, version and usage errors end the run in the parse stage.
  auto [help, help_out, help_err] = parse({"--help"});
  CHECK((help.command == nullptr && help.exit_code == 0));
  CHECK_THAT(help_out, Catch::Contains("Exit codes"));
  auto [none, none_out, none_err] = parse({});
  CHECK((none.command == nullptr && none.exit_code == 1));
  CHECK_THAT(none_err, Catch::StartsWith("mla-plan: error: "));

  // The flag values checked before a file is opened.
  auto [sched, sched_out, sched_err] =
      parse({"schedule", "--kernel", "sm90-sparse", "--num-sms", "0", "--h-q", "64", "--lengths", "4"});
  CHECK((sched.command == nullptr && sched.exit_code == 1 && sched_out.empty()));
  CHECK(sched_err == "mla-plan: error: --num-sms: '0' is out of range; allowed 1..4096\n");
  auto [sched_ok, sched_ok_out, sched_ok_err] =
      parse({"schedule", "--kernel", "sm90-sparse", "--num-sms", "132", "--h-q", "64", "--lengths", "4,5"});
  CHECK(sched_ok.is("schedule"));
  CHECK(sched_ok.get<mlaplan::cli::ScheduleOptions>("schedule").input.lengths == std::vector<std::int32_t>{4, 5});

  auto [tps, tps_out, tps_err] = parse({"check", missing, "--tp", "1,2"});
  CHECK((tps.command == nullptr && tps.exit_code == 1));
  CHECK(tps_err == "mla-plan: error: --tp takes several values only with --matrix\n");
  auto [matrix, matrix_out, matrix_err] = parse({"check", missing, "--tp", "1,2", "--matrix"});
  CHECK((matrix.is("check") && matrix_err.empty()));

  auto [pdf, pdf_out, pdf_err] = parse({"report", missing, "-o", "report.pdf"});
  CHECK((pdf.command == nullptr && pdf.exit_code == 1));
  CHECK_THAT(pdf_err, Catch::Contains("the extension '.pdf'"));
  auto [svg, svg_out, svg_err] = parse({"report", missing, "-o", "report.svg"});
  CHECK((svg.is("report") && svg_err.empty()));
}

TEST_CASE("invalid config exits 2 with the file and JSON path", "[cli]") {
  auto r = run({cfg("does-not-exist.json")});
  CHECK(r.code == 2);
  CHECK(r.err == "mla-plan: error: cannot read '" + cfg("does-not-exist.json") + "': no such file or directory\n");
  CHECK(r.out.empty());
}

TEST_CASE("plan --json carries the contract keys", "[cli]") {
  // `mla-plan CONFIG` and `mla-plan plan CONFIG` are the same.
  auto a = run({cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--json"});
  auto b = run({"plan", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--json"});
  REQUIRE(a.code == 0);
  CHECK(a.out == b.out);
  const auto j = nlohmann::json::parse(a.out);
  CHECK(j.at("schema") == "mla-plan/3");
  CHECK(j.at("config") == cfg("deepseek-v4.1-flash.json"));
  CHECK(j.at("model").at("family") == "deepseek_v41");
  CHECK(j.at("model").at("num_hidden_layers") == 40);
  CHECK(j.at("model").at("num_draft_layers") == 3);
  CHECK(j.at("model").at("num_attention_heads") == 64);
  CHECK(j.at("model").at("head_dim") == 512);
  CHECK(j.at("model").at("sliding_window") == 128);
  CHECK(j.at("model").at("index_topk") == 512);
  REQUIRE(j.at("layers").size() == 43);
  const auto& l2 = j.at("layers").at(2);
  CHECK(l2.at("index") == 2);
  CHECK(l2.at("compress_ratio") == 2);
  CHECK(l2.at("type") == "c2a");
  CHECK(l2.at("draft") == false);
  CHECK(l2.at("is_kv_source") == true);
  CHECK(l2.at("is_index_source") == true);
  CHECK(l2.at("kv_source") == 2);
  CHECK(j.at("layers").at(0).at("kv_source").is_null());
  CHECK(j.at("layers").at(5).at("kv_source") == 2);
  CHECK(j.at("layers").at(42).at("draft") == true);
  CHECK(j.at("layer_types") == nlohmann::json::array({"c1a", "c2a", "swaonly"}));
  CHECK(j.at("warnings").is_array());
  CHECK(j.at("findings").is_array());
}

TEST_CASE("plan text: the deployer's screen first, the detail under --details", "[cli]") {
  const std::string v41 = cfg("deepseek-v4.1-flash.json");
  auto r = run({v41, "--tp", "8"});
  REQUIRE(r.code == 0);
  // The sections in order: the answer, the layers in words, the caches, the decode in words.
  std::size_t at = 0;
  for (const std::string section :
       {"\nfit: FITS on 8 x h200", "\nlayer types (one decode plan each):\n", "\nlayers:\n",
        "\ncaches: fp8_ds_mla rows (--kv-cache-dtype auto), pages of 64 tokens, for "
        "FLASHMLA_SPARSE_DSV41\n",
        "  per token of history: 1,790 B in rows (DeepSeek's accounting), 1,827 B in pages",
        "\ndecode of 64 requests x 4,096 tokens (b = 64 decode tokens), the default batch: vLLM "
        "runs FlashMLA split-KV sparse decode, one tile-scheduler plan per layer type\n",
        "  swaonly (5 layers): 64 of 132 SM partitions busy; each request in one partition, "
        "nothing to merge\n",
        "\nmore with --details: "}) {
    const auto p = r.out.find(section, at);
    INFO(section);
    REQUIRE(p != std::string::npos);
    at = p;
  }
  // Not on the first screen: the scheduler's words, the project's kernel modes, the tables.
  for (const std::string detail :
       {"partitions: ", "payload", "balance", "mla-plan decode:", "cluster_split", "CTAs", "kernel shapes (heads",
        "cache objects:", "page pools (", "\nnotes:\n", "sources:"}) {
    INFO(detail);
    CHECK(r.out.find(detail) == std::string::npos);
  }
  // --details keeps every section, with grouped numbers and grammar.
  auto d = run({v41, "--tp", "8", "--details"});
  REQUIRE(d.code == 0);
  for (const std::string detail :
       {"kernel shapes (heads: per rank -> what the kernel runs):", "\ncache objects:\n",
        "page pools (caches of equal page size share one): ", "19,008 B pages", "\nnotes:\n",
        "    partitions: 132 (64 used, 68 idle)", "(at most 1 partial per request)", "    mla-plan decode: "}) {
    INFO(detail);
    CHECK(d.out.find(detail) != std::string::npos);
  }
  CHECK(d.out.find("more with --details") == std::string::npos);
  // What the engine runs, per backend: the fused path on B200, FlashInfer on SM120.
  auto b200 = run({v41, "--tp", "8", "--gpu", "b200", "--vllm-version", "0.30"});  // 0.30's fused FlashMLA
  REQUIRE(b200.code == 0);
  CHECK_THAT(b200.out, Catch::Contains("the default batch: vLLM runs "));
  CHECK_THAT(b200.out, Catch::Contains("these plans serve its split-KV fallback)\n"));
  auto sm120 = run({v41, "--tp", "8", "--gpu", "rtx-pro-6000"});
  REQUIRE(sm120.code == 0);
  CHECK_THAT(sm120.out,
             Catch::Contains("the default batch: vLLM runs FlashInfer SM120 sparse MLA decode over fp8_ds_mla "
                             "pages of 64 rows\n  (the engine's backend plans its own work: "));
}

TEST_CASE("plan text output names groups and sources", "[cli]") {
  auto r = run({cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--details"});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("layers 2-7: c2a, read layer 2's cache"));
  CHECK_THAT(r.out, Catch::Contains("layers 20-39: c1a, read layer 20's cache, top-k from 20, 24, 28, 32, 36"));
  CHECK_THAT(r.out, Catch::Contains("layers 40-42: swaonly, draft (DSpark), window only"));
  CHECK_THAT(r.out, Catch::Contains("index sources: 2, 8, 14, 20 (publishing); 24, 28, 32, 36 (reindex)"));
  CHECK_THAT(r.out, Catch::Contains("candidate source: 20"));
  auto v4 = run({cfg("deepseek-v4-flash.json"), "--tp", "2"});
  REQUIRE(v4.code == 0);
  CHECK_THAT(v4.out, Catch::Contains("layers 2-42 (every 2nd, 21 layers): c4a"));
  CHECK_THAT(v4.out, Catch::Contains("layers 3-41 (every 2nd, 20 layers): c128a"));
  CHECK_THAT(v4.out, Catch::Contains("layer 43: swaonly, draft (MTP), window only"));
  // V4-Flash-0731: compress_ratios counts 3 DSpark stages (num_nextn_predict_layers says 1).
  const testing_files::TempDir dir;
  auto j = nlohmann::ordered_json::parse(slurp(cfg("deepseek-v4-flash.json")));
  j["compress_ratios"].push_back(0);
  j["compress_ratios"].push_back(0);
  j["dspark_block_size"] = 5;
  const auto r0731 = run({dir.write("v4-flash-0731.json", j.dump()), "--tp", "4", "--spec-tokens", "5"});
  REQUIRE(r0731.code == 0);
  CHECK_THAT(r0731.out, Catch::Contains("43 layers + 3 draft, ") &&
                            Catch::Contains("layers 43-45: swaonly, draft (DSpark), window only") &&
                            Catch::Contains("swaonly  5 layers (2 + 3 draft)") && !Catch::Contains("ignored"));
}

TEST_CASE("plan text: the attention backend, its kernel shapes and what the decode schedules serve", "[cli][backend]") {
  const std::string v41 = cfg("deepseek-v4.1-flash.json");
  // RTX PRO 6000: FlashInfer's SM120 class, which plans its own decode work.
  auto sm120 = run({v41, "--tp", "8", "--gpu", "rtx-pro-6000", "--spec-tokens", "5", "--details"});
  REQUIRE(sm120.code == 0);
  CHECK_THAT(sm120.out,
             Catch::Contains("max_model_len 1,048,576\n"
                             "attention backend: FLASHINFER_MLA_SPARSE_DSV41 (SM120 class)\n"
                             "  chosen: vLLM's default on sm120\n"
                             "  decode path: FlashInfer SM120 sparse MLA decode over fp8_ds_mla pages of 64 rows\n"
                             "  kernels: FlashInfer SM120 DSV4 sparse MLA decode, FlashInfer SM120 DSV4 sparse MLA "
                             "prefill\n"
                             "  kernel shapes (heads: per rank -> what the kernel runs):\n"
                             "    phase    layer types      heads   d_qk  topk (+ extra)  page rows  status\n"
                             "    decode   swaonly          8 -> 8   512  128             64         available\n"
                             "    decode   c2a, c1a         8 -> 8   512  128 + 512       64 + 64    available\n"
                             "    decode   swaonly (draft)  8 -> 8   512  192             64         unknown\n"
                             "      note: (h_q 8, topk 192): FlashInfer <= 0.6.18 dispatches a fixed (heads, "
                             "topk) table"));
  CHECK_THAT(sm120.out,
             Catch::Contains("      fix: use FlashInfer 0.7.0 or later\n"
                             "    prefill  swaonly          8 -> 8   512  128             64         available\n"));
  CHECK_THAT(sm120.out, Catch::Contains("\nparallelism: TP 8 "));
  CHECK_THAT(sm120.out, Catch::Contains("\ndecode schedules: none; the engine's backend plans its own work: "
                                        "FLASHINFER_MLA_SPARSE_DSV41 (SM120 class) takes no FlashMLA tile plans\n"));
  CHECK_THAT(sm120.out, !Catch::Contains("no FlashMLA sparse decode kernel"));
  // B200: the fused FlashMLA path; the plans shown serve its split-KV fallback.
  auto b200 = run({v41, "--tp", "8", "--gpu", "b200", "--spec-tokens", "5", "--details", "--vllm-version", "0.30"});
  REQUIRE(b200.code == 0);
  CHECK_THAT(b200.out,
             Catch::Contains("\nattention backend: FLASHMLA_SPARSE_DSV41 (fused)\n  chosen: vLLM's default on sm100, "
                             "fused because"));
  CHECK_THAT(b200.out,
             Catch::Contains("    decode   c1a              8 -> 64   512  128 + 512       32 + 128   available\n"));
  CHECK_THAT(b200.out,
             Catch::Contains("the default batch:\n  note: FLASHMLA_SPARSE_DSV41 (fused) decodes with its fused "
                             "kernel, which needs no tile plan: these plans serve its split-KV fallback\n"
                             "  c1a (20 layers): kernel sm100-head64"));
  // H200: split-KV FlashMLA, which decodes with the plans shown: no remark.
  auto h200 = run({v41, "--tp", "8", "--details"});
  REQUIRE(h200.code == 0);
  CHECK_THAT(h200.out, Catch::Contains(
                           "\nattention backend: FLASHMLA_SPARSE_DSV41\n  chosen: vLLM's default on sm90\n"
                           "  decode path: FlashMLA split-KV sparse decode, one tile-scheduler plan per layer type\n"));
  CHECK_THAT(h200.out, Catch::Contains("the default batch:\n  c1a (20 layers): kernel sm90-sparse"));
  CHECK_THAT(h200.out, !Catch::Contains("split-KV fallback"));
  // A shape that is missing: its note and fix under its row.
  auto flat = run({cfg("small/v41-8layer-flat.json"), "--details"});
  CHECK(flat.code == 3);
  CHECK_THAT(flat.out,
             Catch::Contains("         missing\n      note: topk 8 is not a multiple of 64 (the sparse decode "
                             "kernel reads blocks of 64)\n      fix: "));
  // A refused arch: the closest entry, said to be refused.
  auto a100 = run({v41, "--tp", "8", "--gpu", "a100", "--details"});
  CHECK(a100.code == 3);
  CHECK_THAT(a100.out,
             Catch::Contains("attention backend: FLASHMLA_SPARSE_DSV41 (refused: backend.arch; the closest entry "
                             "is shown)\n"));
  // The table's lines stay within the width of the cache-objects table.
  for (const auto* out : {&sm120.out, &b200.out, &h200.out}) {
    bool in_table = false;
    for (const auto& line : lines_of(*out)) {
      if (line.rfind("    phase ", 0) == 0) in_table = true;
      else if (line.rfind("    ", 0) != 0) in_table = false;
      if (in_table && line.rfind("      ", 0) != 0) CHECK(line.size() <= 100);
    }
  }
  // Markdown: the backend and the same table.
  auto md = run({v41, "--tp", "8", "--gpu", "rtx-pro-6000", "--spec-tokens", "5", "--format", "markdown"});
  REQUIRE(md.code == 0);
  CHECK_THAT(md.out,
             Catch::Contains("**Attention backend**: `FLASHINFER_MLA_SPARSE_DSV41 (SM120 class)` (vLLM's default on "
                             "sm120)  \n"));
  CHECK_THAT(md.out,
             Catch::Contains("| phase | kernel | layer types | heads per rank -&gt; kernel | d\\_qk | topk (+ extra) "
                             "| page rows | status |\n"));
  CHECK_THAT(md.out,
             Catch::Contains("| decode | FlashInfer SM120 DSV4 sparse MLA decode | swaonly (draft) | 8 -&gt; 8 | 512 | "
                             "192 | 64 | **unknown**: (h\\_q 8, topk 192)"));
  CHECK_THAT(md.out, Catch::Contains("**Decode schedules**: none; the engine's backend plans its own work"));
}

TEST_CASE("schedule direct mode: the worked example", "[cli][schedule]") {
  auto r = run({"schedule", "--kernel", "sm90-sparse", "--num-sms", "132", "--h-q", "128", "--lengths",
                "2048,2048,2048", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("schema") == "mla-plan/3");
  REQUIRE(j.at("schedules").size() == 1);
  const auto& s = j.at("schedules")[0];
  CHECK(s.at("layer_type").is_null());
  CHECK(s.at("kernel") == "sm90-sparse");
  CHECK(s.at("num_sm_parts") == 66);
  CHECK(s.at("fixed_overhead") == 5);
  CHECK(s.at("block") == 64);
  CHECK(s.at("payload") == 7);
  CHECK(s.at("num_splits") == nlohmann::json::array({0, 16, 32, 48}));
  CHECK(s.at("records").size() == 66);
  CHECK(s.at("records")[0] == nlohmann::json::array({0, 0, 0, 2, 0, 1, 1, 0}));
  CHECK(s.at("records")[47] == nlohmann::json::array({2, 2, 30, 32, 15, 1, 1, 0}));
  CHECK(s.at("idle_partitions") == 18);
  CHECK(s.at("splits_per_request") == nlohmann::json::array({16, 16, 16}));
}

TEST_CASE("schedule direct mode: text output and rejections", "[cli][schedule]") {
  auto text = run({"schedule", "--kernel", "sm90-sparse", "--num-sms", "132", "--h-q", "64", "--lengths", "128,0,77",
                   "--extra-lengths", "512,0,3", "--show-records"});
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Catch::Contains("partitions: 132"));
  CHECK_THAT(text.out, Catch::Contains("begin_req"));
  CHECK_THAT(text.out, Catch::Contains("(idle)"));

  auto bad_kernel = run({"schedule", "--kernel", "sm80", "--num-sms", "132", "--h-q", "64", "--lengths", "1"});
  CHECK(bad_kernel.code == 1);
  CHECK(bad_kernel.err ==
        "mla-plan: error: --kernel: 'sm80' is not a known decode kernel; allowed: sm90-sparse, "
        "sm100-head64, sm100-head128, sm90-dense\n");
  auto mismatch = run({"schedule", "--kernel", "sm90-sparse", "--num-sms", "132", "--h-q", "64", "--lengths", "1,2",
                       "--extra-lengths", "3"});
  CHECK(mismatch.code == 1);
  CHECK(mismatch.err == "mla-plan: error: --extra-lengths has 1 entries but --lengths has 2; give one per request\n");
  auto negative = run({"schedule", "--kernel", "sm90-sparse", "--num-sms", "132", "--h-q", "64", "--lengths", "4,-1"});
  CHECK(negative.code == 1);
  CHECK(negative.err == "mla-plan: error: --lengths[1]: '-1' is out of range; allowed 0..268435456\n");
  auto sms = run({"schedule", "--kernel", "sm90-sparse", "--num-sms", "0", "--h-q", "64", "--lengths", "4"});
  CHECK(sms.code == 1);
  CHECK(sms.err == "mla-plan: error: --num-sms: '0' is out of range; allowed 1..4096\n");
  auto not_number = run({"schedule", "--kernel", "sm90-sparse", "--num-sms", "many", "--h-q", "64", "--lengths", "4"});
  CHECK(not_number.code == 1);
  CHECK_THAT(not_number.err, Catch::StartsWith("mla-plan: error: "));
}

TEST_CASE("check: many files, a failure never stops the others, the most severe code wins", "[cli][check]") {
  const auto bad = std::string(MLAPLAN_SOURCE_DIR) + "/no-such-config.json";
  // --tp 8: the bundled configs fit (the small one fails on its own, unsupported at any TP).
  auto r = run({"check", cfg("deepseek-v4.1-flash.json"), bad, cfg("small/v41-8layer-flat.json"),
                cfg("deepseek-v3.2.json"), "--tp", "8"});
  CHECK(r.code == 2);  // 2 (invalid) and 3 (unsupported): the invalid config is not hidden
  CHECK_THAT(r.out, Catch::Contains("PASS " + cfg("deepseek-v4.1-flash.json")));
  CHECK_THAT(r.out, Catch::Contains("FAIL " + bad + " (exit 2)"));
  CHECK_THAT(r.out, Catch::Contains("FAIL " + cfg("small/v41-8layer-flat.json") + " (exit 3)"));
  CHECK_THAT(r.out, Catch::Contains("PASS " + cfg("deepseek-v3.2.json")));
  CHECK_THAT(r.out, Catch::Contains("2 of 4 configs passed"));

  auto only_invalid = run({"check", cfg("deepseek-v4.1-flash.json"), bad, "--tp", "8"});
  CHECK(only_invalid.code == 2);
  auto all_good = run({"check", cfg("deepseek-v4.1-flash.json"), cfg("deepseek-v4-flash.json"), "--tp", "8"});
  CHECK(all_good.code == 0);
  // On one GPU they do not fit: 2 (invalid) still decides the run, 4 stays the file's own.
  auto one_gpu = run({"check", cfg("deepseek-v4.1-flash.json"), bad, "--tp", "1"});
  CHECK(one_gpu.code == 2);
  CHECK_THAT(one_gpu.out, Catch::Contains("FAIL " + cfg("deepseek-v4.1-flash.json") + " (exit 4)"));
  CHECK_THAT(one_gpu.out, Catch::Contains("error [fit.does_not_fit]: does not fit: weights need 278.70 GiB per GPU"));
}

TEST_CASE("check --format json", "[cli][check]") {
  auto r = run({"check", cfg("deepseek-v4.1-flash.json"), cfg("small/v41-6layer-reindex.json"), "--tp", "8", "--format",
                "json"});
  CHECK(r.code == 3);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("schema") == "mla-plan/3");
  CHECK(j.at("exit_code") == 3);
  REQUIRE(j.at("files").size() == 2);
  CHECK(j.at("files")[0].at("status") == "pass");
  CHECK(j.at("files")[0].at("global_bytes_per_token").at("rows") == 1790.0);
  CHECK(j.at("files")[0].at("gpu_kv_cache_tokens") == 32823353);
  CHECK(j.at("files")[0].at("max_model_len") == 1048576);
  CHECK(j.at("files")[0].at("maximum_concurrency").get<double>() == Approx(31.30).margin(0.005));
  CHECK(j.at("files")[0].at("weights_bytes_per_gpu") == 50934067136);
  CHECK(j.at("files")[1].at("status") == "fail");
  CHECK(j.at("files")[1].at("exit_code") == 3);
  bool dtype = false;
  for (const auto& f : j.at("files")[1].at("findings")) {
    if (f.at("id") == "backend.model_dtype") {
      dtype = true;
      CHECK(f.at("fix") == "serve with --dtype bfloat16");
    }
  }
  CHECK(dtype);
  CHECK(run({"check", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--json"}).out ==
        run({"check", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--format", "json"}).out);
}

TEST_CASE("check --format github: one annotation per finding", "[cli][check]") {
  // --tp 8 for V4.1-Flash to fit (it passes: no annotation); the small config has 4 heads, so TP 8
  // adds its own errors to the three of its shape. A finding about a field of the config points at
  // the line and column of its value (the config's lines 6, 7, 11, 17, 18); the others at the file.
  auto r = run(
      {"check", cfg("small/v41-8layer-flat.json"), cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--format", "github"});
  CHECK(r.code == 3);
  const std::string flat = cfg("small/v41-8layer-flat.json");
  const std::vector<std::string> expected = {
      // The config gives no num_nextn_predict_layers: a structural guess, a warning at the file.
      "::warning file=" + flat +
          ",title=mla-plan config.structural_default::assumed num_nextn_predict_layers = 3, the "
          "transformers default",
      "::error file=" + flat +
          ",line=7,col=15,title=mla-plan backend.head_size::head size 16 (qk_rope_head_dim 4) is not "
          "supported by the sparse-MLA backend; supported: 512 (448 NoPE + 64 RoPE)",
      "::error file=" + flat +
          ",line=18,col=21,title=mla-plan backend.topk_width::sliding_window 8 is not a multiple of 64; the "
          "FlashMLA sparse decode kernel reads index widths in blocks of 64",
      "::error file=" + flat +
          ",line=17,col=17,title=mla-plan backend.topk_width::index_topk 5 is not a multiple of 64; the "
          "FlashMLA sparse decode kernel reads index widths in blocks of 64",
      "::error file=" + flat +
          ",line=6,col=26,title=mla-plan backend.tensor_parallel::Total number of attention heads "
          "(4) must be divisible by tensor parallel size (8); TP sizes that divide it: 1, 2, 4 (fix: use "
          "--tensor-parallel-size 1, 2, 4)",
      "::warning file=" + flat +
          ",title=mla-plan weights.expert_dtype::no expert_dtype: routed experts are taken as stored like "
          "the other linear layers",
      "::error file=" + flat +
          ",line=11,col=15,title=mla-plan placement.tensor_parallel::--tensor-parallel-size 8 is above "
          "o_groups 2: wo_a runs o_groups / TP output groups per rank, which must be a whole number of at "
          "least 1; allowed: 1, 2 (fix: use --tensor-parallel-size 1, 2 (and --data-parallel-size for more "
          "GPUs: DP attention keeps every head on each rank))",
  };
  CHECK(lines_of(r.out) == expected);
  // As many annotations as check --json has findings.
  auto j = nlohmann::json::parse(
      run({"check", cfg("small/v41-8layer-flat.json"), cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--json"}).out);
  CHECK(j.at("files")[0].at("findings").size() == 7);
  CHECK(j.at("files")[1].at("findings").empty());
  // What passed goes to the log (stderr) with its numbers, before the summary.
  CHECK(r.err == "mla-plan check: PASS " + cfg("deepseek-v4.1-flash.json") +
                     "  [deepseek_v41 on h200, fp8_ds_mla, TP 8] 31.30x requests of 1,048,576 tokens, 66.01 GiB to "
                     "spare\nmla-plan check: 1 passed, 1 failed\n");
}

TEST_CASE("check --format github: line= and col= of a finding's value, in the config.json read", "[cli][check]") {
  const testing_files::TempDir dir;
  // A bad value at a known line: index_topk 5 on line 3 (its value at column 17).
  auto j = nlohmann::ordered_json::parse(slurp(cfg("small/v41-8layer-flat.json")));
  j.erase("index_topk");
  std::string text = j.dump(2);  // model_type first, on line 2
  text.insert(text.find("\n  \"vocab_size\"") + 1, "  \"index_topk\": 5,\n");
  std::filesystem::create_directories(dir.path / "model");
  const std::string file = dir.write("model/config.json", text);
  REQUIRE(text.substr(0, 73) ==
          "{\n  \"model_type\": \"deepseek_v41\",\n  \"index_topk\": 5,\n  \"vocab_size\": 48,\n");
  const std::string topk =
      ",title=mla-plan backend.topk_width::index_topk 5 is not a multiple of 64; the FlashMLA sparse decode kernel "
      "reads index widths in blocks of 64";
  const auto annotations = [](const std::string& path) {
    return lines_of(run({"check", path, "--tp", "2", "--format", "github"}).out);
  };
  const auto with_file = annotations(file);
  CHECK(std::count(with_file.begin(), with_file.end(), "::error file=" + file + ",line=3,col=17" + topk) == 1);
  // A directory: the annotations with a line name its config.json; the others the directory.
  const auto with_dir = annotations(dir / "model");
  CHECK(with_dir.size() == with_file.size());
  CHECK(std::count(with_dir.begin(), with_dir.end(), "::error file=" + file + ",line=3,col=17" + topk) == 1);
  CHECK(std::count(with_dir.begin(), with_dir.end(),
                   "::warning file=" + dir / "model" +
                       ",title=mla-plan weights.expert_dtype::no expert_dtype: routed experts are taken as stored like "
                       "the other linear layers") == 1);

  // A finding whose pointer is not in the file (the rule names sliding_window; the config spells
  // it window_size): no line.
  auto alias = nlohmann::ordered_json::parse(slurp(cfg("small/v41-8layer-flat.json")));
  alias.erase("sliding_window");
  const std::string aliased = dir.write("alias.json", alias.dump(2));
  const auto with_alias = annotations(aliased);
  CHECK(std::count(with_alias.begin(), with_alias.end(),
                   "::error file=" + aliased +
                       ",title=mla-plan backend.topk_width::sliding_window 8 is not a multiple of 64; the FlashMLA "
                       "sparse decode kernel reads index widths in blocks of 64") == 1);

  // A JSON parse error: the line and column the parser names, in a directory's config.json too.
  std::filesystem::create_directories(dir.path / "broken");
  const std::string broken =
      dir.write("broken/config.json", "{\n  \"model_type\": \"deepseek_v41\",\n  \"index_topk\": 5,,\n}\n");
  const std::string parse_error = ",title=mla-plan config.invalid::" + broken +
                                  ": not valid JSON: parse error at line 3, column 19: syntax error while parsing "
                                  "object key - unexpected ','; expected string literal";
  CHECK(annotations(broken) == std::vector<std::string>{"::error file=" + broken + ",line=3,col=19" + parse_error});
  CHECK(annotations(dir / "broken") ==
        std::vector<std::string>{"::error file=" + broken + ",line=3,col=19" + parse_error});
  // Errors of a config without a place in it: the file as given, no line.
  const std::string missing = dir / "missing.json";
  CHECK(annotations(missing) ==
        std::vector<std::string>{"::error file=" + missing + ",title=mla-plan config.invalid::cannot read '" + missing +
                                 "': no such file or directory"});
  const std::string empty = dir.write("empty.json", "  \n");
  CHECK(annotations(empty) ==
        std::vector<std::string>{"::error file=" + empty + ",title=mla-plan config.invalid::" + empty +
                                 ": the file is empty; expected a JSON object (a model "
                                 "config.json)"});
}

TEST_CASE("check guards: bytes per token and concurrency", "[cli][check]") {
  auto ok = run({"check", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--max-global-bytes-per-token", "1827"});
  CHECK(ok.code == 0);
  auto over = run({"check", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--max-global-bytes-per-token", "1800"});
  CHECK(over.code == 4);
  CHECK_THAT(over.out, Catch::Contains("global bytes per token 1827 (pages accounting) exceeds the limit 1800"));
  auto rows = run({"check", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--max-global-bytes-per-token", "1800",
                   "--guard-accounting", "rows"});
  CHECK(rows.code == 0);
  auto conc = run({"check", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--min-concurrency", "1000"});
  CHECK(conc.code == 4);
  CHECK_THAT(conc.out, Catch::Contains("error [guard.concurrency]: vLLM's maximum concurrency for 1,048,576 tokens per "
                                       "request on h200 is 31.30x, below the minimum 1000"));
  // vLLM's 31.30x: 28 passes, 29 does not.
  CHECK(run({"check", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--min-concurrency", "28"}).code == 0);
  CHECK(run({"check", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--min-concurrency", "32"}).code == 4);
  // 2 (invalid) beats 3 (unsupported) and 4 (guard)
  auto mixed = run({"check", cfg("deepseek-v4.1-flash.json"), cfg("small/v41-8layer-flat.json"), "nope.json",
                    "--min-concurrency", "1000"});
  CHECK(mixed.code == 2);
  auto guarded = run({"check", cfg("deepseek-v4.1-flash.json"), cfg("small/v41-8layer-flat.json"), "--tp", "8",
                      "--min-concurrency", "1000"});
  CHECK(guarded.code == 3);  // 3 (cannot run) beats 4 (a guard)
}

TEST_CASE("check --matrix", "[cli][check]") {
  auto r = run({"check", cfg("deepseek-v4.1-flash.json"), "--matrix", "--tensor-parallel-size", "1,8", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& cells = j.at("files")[0].at("matrix");
  CHECK(cells.size() == mlaplan::gpu_presets().size() * 2 * 2);
  auto cell = [&](const std::string& gpu, const std::string& dtype, int tp) {
    for (const auto& c : cells) {
      if (c.at("gpu") == gpu && c.at("kv_cache_dtype") == dtype && c.at("tensor_parallel_size") == tp) return c;
    }
    FAIL("no cell " << gpu << " " << dtype << " " << tp);
    return nlohmann::json();
  };
  // One H200 does not hold V4.1-Flash's weights; eight do.
  CHECK(cell("h200", "fp8_ds_mla", 1).at("supported") == false);
  CHECK(cell("h200", "fp8_ds_mla", 1).at("exit_code") == 4);
  CHECK(cell("h200", "fp8_ds_mla", 1).at("reason") ==
        "does not fit: weights 278.70 GiB per GPU leave nothing (short by 162.99 GiB) for the KV cache; one request "
        "of 1048576 tokens needs 2.18 GiB");
  CHECK(cell("h200", "fp8_ds_mla", 8).at("supported") == true);
  CHECK(cell("h200", "fp8_ds_mla", 8).at("data_parallel_size") == 1);
  CHECK(cell("h200", "fp8_ds_mla", 8).at("maximum_concurrency").get<double>() == Approx(31.30).margin(0.005));
  CHECK(cell("h200", "fp8_ds_mla", 8).at("weights_bytes_per_gpu") == 50934067136);
  CHECK(cell("h200", "nvfp4_ds_mla", 8).at("supported") == false);
  CHECK_THAT(cell("h200", "nvfp4_ds_mla", 8).at("reason").get<std::string>(),
             Catch::StartsWith("nvfp4_ds_mla needs SM100"));
  CHECK(cell("b200", "nvfp4_ds_mla", 8).at("supported") == true);
  CHECK(cell("a100", "fp8_ds_mla", 8).at("supported") == false);
  CHECK(cell("rtx5090", "fp8_ds_mla", 8).at("supported") == false);
  CHECK(cell("gb10", "fp8_ds_mla", 8).at("supported") == true);  // FlashInfer's SM120 class
  CHECK(cell("gb10", "nvfp4_ds_mla", 8).at("supported") == false);
  // The backend vLLM runs in each cell; none where it refuses the arch.
  CHECK(cell("h200", "fp8_ds_mla", 8).at("backend") == "flashmla_sparse_dsv41");
  // vLLM 0.31 (the newest modelled) runs mega attention on SM100 where it is available.
  CHECK(cell("b200", "fp8_ds_mla", 8).at("backend") == "flashmla_mega_attn_dsv41");
  CHECK(cell("b200", "nvfp4_ds_mla", 8).at("backend") == "flashmla_mega_attn_dsv41");
  CHECK(cell("rtx-pro-6000", "fp8_ds_mla", 8).at("backend") == "flashinfer_mla_sparse_sm120");
  CHECK(cell("gb10", "fp8_ds_mla", 1).at("backend") == "flashinfer_mla_sparse_sm120");
  CHECK(cell("a100", "fp8_ds_mla", 8).at("backend").is_null());
  // Reasons: each distinct one once in the file's `reasons`, cells refer to it by reason_id.
  const auto& reasons = j.at("files")[0].at("reasons");
  REQUIRE(reasons.is_array());
  std::set<std::string> distinct;
  std::set<std::size_t> used;
  for (const auto& c : cells) {
    if (c.at("supported") == true) {
      CHECK(c.at("reason") == "");
      CHECK(c.at("reason_id").is_null());
      continue;
    }
    const auto id = c.at("reason_id").get<std::size_t>();
    REQUIRE(id < reasons.size());
    CHECK(reasons.at(id) == c.at("reason"));
    distinct.insert(c.at("reason").get<std::string>());
    used.insert(id);
  }
  CHECK(distinct.size() == reasons.size());  // no reason twice
  CHECK(used.size() == reasons.size());      // none unused
  // The a100 cells share one reason (the arch), so do nvfp4 on h200 at TP 1 and 8.
  CHECK(cell("a100", "fp8_ds_mla", 1).at("reason_id") == cell("a100", "nvfp4_ds_mla", 8).at("reason_id"));
  CHECK(cell("h200", "nvfp4_ds_mla", 1).at("reason_id") == cell("h200", "nvfp4_ds_mla", 8).at("reason_id"));
  // The first reason is the first failing cell's (h100 at TP 1).
  CHECK(cell("h100", "fp8_ds_mla", 1).at("reason_id") == 0);

  auto text = run({"check", cfg("deepseek-v4-flash.json"), "--matrix", "--tp", "1,8"});
  CHECK(text.code == 0);
  CHECK_THAT(text.out, Catch::Contains(
                           "  gpu            kv dtype         TP   DP GPUs  backend                                    "
                           "result\n"));
  CHECK_THAT(text.out, Catch::Contains(
                           "  h200           fp8_ds_mla        8    1    8  FLASHMLA_SPARSE_DSV4                       "
                           "yes fits: 9.70x requests of 1048576 tokens, weights 19.24 GiB per GPU\n"));
  CHECK_THAT(text.out, !Catch::Contains("nvfp4_ds_mla"));  // V4.0 has no nvfp4 cells
  // Cells name their reason by number; the legend below the table holds each reason once.
  const std::string h200_tp1 =
      "does not fit: weights 145.30 GiB per GPU leave nothing (short by 28.37 GiB) for the KV "
      "cache; one request of 1048576 tokens needs 10.06 GiB";
  const auto lines = lines_of(text.out);
  std::string h200_ref;
  std::vector<std::string> legend;
  bool in_legend = false;
  for (const auto& line : lines) {
    if (line.rfind("  h200           fp8_ds_mla        1    1    1  FLASHMLA_SPARSE_DSV4 ", 0) == 0) {
      const auto at = line.find("no  [");
      REQUIRE(at != std::string::npos);
      h200_ref = line.substr(at + 4);
    }
    if (line == "  reasons:") in_legend = true;
    else if (in_legend && line.rfind("  [", 0) == 0) legend.push_back(line.substr(2));
    else in_legend = false;
  }
  REQUIRE(!legend.empty());
  for (std::size_t i = 0; i < legend.size(); ++i) {
    CHECK_THAT(legend[i], Catch::StartsWith("[" + std::to_string(i + 1) + "] "));  // numbered 1, 2, ...
  }
  CHECK(h200_ref == "[4]");  // h100, h100-pcie and h100-nvl TP 1 are [1] to [3]
  CHECK(std::find(legend.begin(), legend.end(), h200_ref + " " + h200_tp1) != legend.end());
  // A reason shared by many cells (a100's arch: 2 cells) is printed once.
  const std::string a100 = "FlashMLA Sparse is only supported on Hopper and Blackwell DC devices; target a100 is";
  std::size_t count = 0;
  for (auto p = text.out.find(a100); p != std::string::npos; p = text.out.find(a100, p + 1)) ++count;
  CHECK(count == 1);
  CHECK_THAT(text.out, Catch::Contains("  a100           fp8_ds_mla        8    1    8  -  "));
  CHECK_THAT(
      text.out,
      Catch::Contains("  rtx-pro-6000   fp8_ds_mla        8    1    8  FLASHINFER_MLA_SPARSE_DSV4 (SM120 class)   "));
  CHECK_THAT(text.out, Catch::Contains("  b200           fp8_ds_mla        8    1    8  FLASHMLA_SPARSE_DSV4 "));
  auto several_tp = run({"check", cfg("deepseek-v4.1-flash.json"), "--tensor-parallel-size", "1,2"});
  CHECK(several_tp.code == 1);
}

TEST_CASE("plan shows the decode mode of every layer type", "[cli][decode]") {
  // 16 requests: 16 CTAs of 10 blocks are too few for 132 SMs -> split (the 2-block window type:
  // one pass at any batch); 64 requests -> 2-CTA clusters for the 10-block types; 128 requests ->
  // one pass.
  auto small = run({cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--batch", "16", "--context-len", "4096", "--json"});
  REQUIRE(small.code == 0);
  auto js = nlohmann::json::parse(small.out);
  REQUIRE(js.at("schedules").size() == 3);
  for (const auto& s : js.at("schedules")) {
    const bool window_only = s.at("topk").get<int>() + s.at("extra_topk").get<int>() <= 128;
    CHECK(s.at("decode_mode") == (window_only ? "one_pass" : "split_kv"));
    CHECK(s.at("decode_cluster_ctas") == 1);
    CHECK_FALSE(s.at("decode_mode_reason").get<std::string>().empty());
  }
  auto mid = run({cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--batch", "64", "--context-len", "4096", "--json"});
  REQUIRE(mid.code == 0);
  int clustered = 0;
  const auto jm = nlohmann::json::parse(mid.out);
  for (const auto& s : jm.at("schedules")) {
    if (s.at("topk").get<int>() + s.at("extra_topk").get<int>() == 640) {
      CHECK(s.at("decode_mode") == "cluster_split");
      CHECK(s.at("decode_cluster_ctas") == 2);
      ++clustered;
    } else {
      CHECK(s.at("decode_mode") == "one_pass");
    }
  }
  CHECK(clustered >= 1);
  auto big = run({cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--batch", "128", "--context-len", "4096", "--json"});
  REQUIRE(big.code == 0);
  const auto jb = nlohmann::json::parse(big.out);
  for (const auto& s : jb.at("schedules")) CHECK(s.at("decode_mode") == "one_pass");
  auto text =
      run({cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--batch", "128", "--context-len", "4096", "--details"});
  CHECK_THAT(text.out, Catch::Contains("mla-plan decode: one_pass (128 CTAs x 10 blocks >= 132 SMs x (10 - 5)"));
  // V4.0's c128a attends every compressed entry (8192 + 128 rows at 1M tokens): always split.
  auto v4 = run({cfg("deepseek-v4-flash.json"), "--tp", "2", "--batch", "256", "--json"});
  REQUIRE(v4.code == 0);
  const auto j4 = nlohmann::json::parse(v4.out);
  for (const auto& s : j4.at("schedules")) {
    if (s.at("layer_type") == "c128a") CHECK(s.at("decode_mode") == "split_kv");
  }
  auto md = run({cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--format", "markdown"});
  CHECK_THAT(md.out, Catch::Contains("| mla-plan decode |"));
}

TEST_CASE("bench: flags are checked before the GPU, without one, exit 6", "[cli][bench]") {
  auto r = run({"bench", cfg("deepseek-v4.1-flash.json"), "--batch", "1,8"});
  // This suite runs where there is no GPU (CI); on a GPU machine bench runs and exits 0.
  if (r.code != 0) {
    CHECK(r.code == 6);
    CHECK_THAT(r.err, Catch::Contains("bench"));
  }
  CHECK(run({"bench", cfg("deepseek-v4.1-flash.json"), "--batch", "0"}).code == 1);
  CHECK(run({"bench", cfg("deepseek-v4.1-flash.json"), "--batch", "4097"}).code == 1);
  CHECK(run({"bench", cfg("deepseek-v4.1-flash.json"), "--layer-type", "c7a"}).code == 1);
  CHECK(run({"bench", cfg("deepseek-v4.1-flash.json"), "--replays", "0"}).code == 1);
  CHECK(run({"bench", cfg("deepseek-v4.1-flash.json"), "--kv-cache-dtype", "int4"}).code == 1);
  CHECK(run({"bench", cfg("missing.json")}).code == 2);
}

TEST_CASE("JSON output stays valid when a path, flag value or message is not UTF-8", "[cli][bad-input]") {
  // Inputs from fuzz/regressions/cli: each exited 70 (a JSON type error) before.
  const std::string bad_bytes = "\xff\xfe";
  auto path = run({"check", "--json", bad_bytes});
  CHECK(path.code == 2);
  const auto pj = nlohmann::json::parse(path.out);
  CHECK(pj.at("files")[0].at("config") == "\xef\xbf\xbd\xef\xbf\xbd");  // U+FFFD for each bad byte
  CHECK(pj.at("files")[0].at("status") == "fail");

  auto dtype = run({"plan", cfg("deepseek-v4.1-flash.json"), "--json", "--dtype", "\xff"});
  CHECK(dtype.code == 1);  // not one of vLLM's dtypes
  CHECK(nlohmann::json::parse(dtype.out).at("exit_code") == 1);

  // A config that is not UTF-8: the parser's message quotes the bad bytes.
  const auto file = std::filesystem::temp_directory_path() / "mlaplan-test-cli-utf8.json";
  std::ofstream(file, std::ios::binary) << "{\"model_type\": \"deepseek_v41\", \"x\": \"\xc3\x28\"}";
  auto content = run({"check", "--json", file.string()});
  CHECK(content.code == 2);
  const auto cj = nlohmann::json::parse(content.out);
  CHECK_THAT(cj.at("files")[0].at("findings")[0].at("message").get<std::string>(),
             Catch::Contains("ill-formed UTF-8 byte"));
  auto matrix = run({"check", "--json", "--matrix", file.string()});
  CHECK(matrix.code == 2);
  CHECK(nlohmann::json::parse(matrix.out).at("files")[0].at("exit_code") == 2);
  std::filesystem::remove(file);
}

TEST_CASE("subcommands: one table gives the help, the suggestions and the dispatch", "[cli]") {
  const auto table = mlaplan::cli::command_table();
  const auto names = mlaplan::cli::command_names();
  REQUIRE(names.size() == table.size());
  CHECK(names == std::vector<std::string>{"plan", "check", "schedule", "verify", "bench", "report", "gpus", "formats"});
  const auto help = run({"--help"});
  CHECK(help.code == 0);
  std::set<std::string_view> commands;
  for (const auto& row : table) {
    INFO(row.name);
    CHECK(row.setup != nullptr);
    CHECK(row.run != nullptr);
    CHECK(row.make_options != nullptr);
    CHECK(row.reset_options != nullptr);
    CHECK(row.runs_kernels == (row.name == "verify" || row.name == "bench"));
    CHECK(commands.insert(row.name).second);  // one row per command
    // Listed in the help with its summary, and its own help runs.
    CHECK_THAT(help.out, Catch::Contains("  " + std::string(row.name)) &&
                             Catch::Contains(std::string(row.summary).substr(0, 40)));
    const auto own = run({std::string(row.name), "--help"});
    CHECK(own.code == 0);
    CHECK_THAT(own.out, Catch::StartsWith(std::string(row.summary).substr(0, 40)));
    // A one-letter slip of its name is suggested from the same table.
    const std::string slip = std::string(row.name).substr(0, row.name.size() - 1) + "q";
    const auto typo = run({slip});
    CHECK(typo.code == 1);
    CHECK_THAT(typo.err, Catch::Contains("did you mean '" + std::string(row.name) + "'"));
  }
  // The dispatch: gpus and formats run from their rows.
  CHECK(run({"gpus"}).code == 0);
  CHECK(run({"formats", "--json"}).code == 0);
}

TEST_CASE("check: the prefix-cache and host-offload guards", "[cli][kv_tiers]") {
  const std::string v41 = cfg("deepseek-v4.1-flash.json");
  // V4.1-Flash at TP8: hits in multiples of 64, so 65 tokens is the shortest prompt that hits.
  auto hit = run({"check", v41, "--tp", "8", "--prefix-hit-prompt-len", "64"});
  CHECK(hit.code == 4);
  CHECK_THAT(hit.out, Catch::Contains("error [guard.prefix_hit]: a prompt of 64 tokens never hits vLLM's prefix cache: "
                                      "the shortest that can is 65 tokens"));
  CHECK(run({"check", v41, "--tp", "8", "--prefix-hit-prompt-len", "65"}).code == 0);
  // With DSpark drafts the draft's block-32 group drops one block: 97.
  CHECK(run({"check", v41, "--tp", "8", "--spec-tokens", "3", "--prefix-hit-prompt-len", "96"}).code == 4);
  CHECK(run({"check", v41, "--tp", "8", "--spec-tokens", "3", "--prefix-hit-prompt-len", "97"}).code == 0);
  // The host tier: V4.1's ring group is refused by the connector (exit 3 with the flag); the guard
  // fails without a budget. V4-Flash at TP8: 100 GiB hold 3,428,096 tokens.
  auto ring = run({"check", v41, "--tp", "8", "--kv-offloading-size", "100"});
  CHECK(ring.code == 3);
  CHECK_THAT(ring.out, Catch::Contains("tokens_per_block=8 not divisible by tokens_per_hash=32"));
  CHECK(run({"check", v41, "--tp", "8", "--min-offload-tokens", "1"}).code == 4);
  const std::string v4 = cfg("deepseek-v4-flash.json");
  CHECK(run({"check", v4, "--tp", "8", "--kv-offloading-size", "100", "--min-offload-tokens", "3428096"}).code == 0);
  auto few = run({"check", v4, "--tp", "8", "--kv-offloading-size", "100", "--min-offload-tokens", "3428097"});
  CHECK(few.code == 4);
  CHECK_THAT(few.out, Catch::Contains("error [guard.offload_tokens]: --kv-offloading-size 100 holds 3,428,096 tokens"));
  // Bad values name the flag (exit 1); an interval vLLM refuses is exit 3.
  auto neg = run({"check", v41, "--prefix-cache-retention-interval", "-1"});
  CHECK(neg.code == 1);
  CHECK_THAT(neg.err, Catch::Contains("--prefix-cache-retention-interval: '-1' is out of range"));
  CHECK(run({"check", v41, "--kv-offloading-size", "0"}).code == 1);
  CHECK(run({"check", v41, "--tp", "8", "--prefix-cache-retention-interval", "100"}).code == 3);
  CHECK(run({"check", v41, "--tp", "8", "--prefix-cache-retention-interval", "4096"}).code == 0);
}

// Every documented limit (include/mlaplan/base/limits.hpp, docs/robustness.md) tested at the limit,
// where the input is accepted, works and completes quickly, and one past it, where it is rejected
// with a one-line message naming the flag or field, the value and the allowed range, and the
// right exit code (1 for a flag, 2 for a config field).

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "cli_run.hpp"
#include "heap_counter.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/cache/decode.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/cache/layout.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/cache/scheduler.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/topology.hpp"
#include "mlaplan/gpu_check/verify.hpp"
#include "report/report.hpp"
#include "temp_dir.hpp"

using namespace mlaplan;
namespace fs = std::filesystem;
using json = nlohmann::json;

using testing_files::TempDir;

namespace {

using testing_cli::Run;
using testing_cli::run;

// What "completes quickly" means here: a bound on the heap work of a command (heap_counter.hpp),
// not on its wall-clock time, so that it holds on a loaded machine. The measured figures are far
// below (docs/robustness.md); the bounds only catch a limit that lets the work explode (a cost
// that grows with the product of two sizes). Not counted in sanitizer builds.
constexpr std::uint64_t kQuickAllocations = 40'000'000;
constexpr std::uint64_t kQuickPeakBytes = std::uint64_t{512} << 20;

void require_quick(const heap_counter::Totals& t) {
  if (!heap_counter::counting()) return;
  CHECK(t.allocations < kQuickAllocations);
  CHECK(t.peak_bytes < kQuickPeakBytes);
}

/// Accepted: exit 0, 3 (a backend rule on the target) or 4 (does not fit), never a usage or
/// config error, and quick.
void require_accepted(const Run& r) {
  INFO(r.err);
  CHECK((r.code == 0 || r.code == 3 || r.code == 4));
  require_quick(r.heap);
}

/// Rejected with exactly one error line holding `message`.
void require_rejected(const Run& r, int code, const std::string& message) {
  CHECK(r.code == code);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::StartsWith("mla-plan: error: ") && Catch::Contains(message));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

std::string cfg(const std::string& rel) { return testing_cli::config_file(rel); }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string ints(std::int64_t n, std::int64_t value, char sep = ',') {
  std::string s;
  s.reserve(static_cast<std::size_t>(n) * 3);
  for (std::int64_t i = 0; i < n; ++i) {
    if (i) s += sep;
    s += std::to_string(value);
  }
  return s;
}

/// A V4.0 config of n backbone and d draft layers (ratios 0, 0, then 4 and 128 alternating).
std::string v4_config(std::int64_t n, std::int64_t d, std::int64_t extra_zero_entries = 0) {
  json r = json::array();
  for (std::int64_t i = 0; i < n; ++i) r.push_back(i < 2 ? 0 : (i % 2 == 0 ? 4 : 128));
  for (std::int64_t i = 0; i < d + extra_zero_entries; ++i) r.push_back(0);
  return json{
      {"model_type", "deepseek_v4"}, {"num_hidden_layers", n}, {"num_nextn_predict_layers", d}, {"compress_ratios", r}}
      .dump();
}

std::string flat_config(const std::string& family, std::int64_t n, std::int64_t d) {
  if (family == "deepseek_v4") return v4_config(n, d);
  return json{{"model_type", family == "deepseek_v41" ? "deepseek_v41_text" : family},
              {"num_hidden_layers", n},
              {"num_nextn_predict_layers", d}}
      .dump();
}

std::string config_error(const std::string& text) {
  try {
    parse_config(text, "t.json");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::invalid_config);
    return e.what();
  }
  FAIL("accepted");
  return {};
}

template <class F>
std::string error_of(F&& f, ErrorKind kind) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(static_cast<int>(e.kind()) == static_cast<int>(kind));
    return e.what();
  }
  FAIL("no error");
  return {};
}

}  // namespace

// ------------------------------------------------------------------ config (exit 2)

TEST_CASE("limits: config file size", "[limits][config]") {
  TempDir dir;
  const std::string base = slurp(cfg("deepseek-v4.1-flash.json"));
  const auto max = static_cast<std::size_t>(ConfigLimits::max_file_bytes);
  REQUIRE(base.size() < max);
  // A real config padded with whitespace to exactly the limit: read, planned.
  const auto at = dir.write("at.json", base + std::string(max - base.size(), ' '));
  REQUIRE(fs::file_size(at) == max);
  const auto ok = run({at, "--tp", "8"});
  require_accepted(ok);
  CHECK(ok.code == 0);
  CHECK_THAT(ok.out, Catch::Contains("layers 2-7: c2a"));
  // One byte more: rejected before parsing.
  const auto past = dir.write("past.json", base + std::string(max - base.size() + 1, ' '));
  require_rejected(run({past}), 2, "'" + past + "' is larger than 1 MiB (1048576 bytes, ConfigLimits::max_file_bytes)");
}

TEST_CASE("limits: JSON nesting of a config", "[limits][config]") {
  // The top-level object is level 1; "extra" holds the rest.
  auto nested = [](int depth) {
    return R"({"model_type": "deepseek_v41", "extra": )" + std::string(static_cast<std::size_t>(depth - 1), '[') +
           std::string(static_cast<std::size_t>(depth - 1), ']') + "}";
  };
  CHECK(parse_config(nested(ConfigLimits::max_nesting_depth), "t.json").num_hidden_layers == 40);
  CHECK(config_error(nested(ConfigLimits::max_nesting_depth + 1)) ==
        "t.json: JSON nested deeper than 64 levels (line 1); a model config is at most a few levels deep");
}

TEST_CASE("limits: backbone and draft layers, every family", "[limits][config]") {
  TempDir dir;
  for (const std::string family : {"deepseek_v41", "deepseek_v4", "deepseek_v32"}) {
    INFO(family);
    const auto at =
        dir.write(family + "-max.json", flat_config(family, ConfigLimits::max_layers, ConfigLimits::max_draft_layers));
    const auto c = load_config(at);
    CHECK(c.num_hidden_layers == 4096);
    CHECK(c.total_layers() == 4096 + 64);
    // One layout (--tp 1): the limits are the layers'; the search of one node plans this config
    // 264 more times (about 2 s in a release build, long under the sanitizers).
    const auto r = run({at, "--tp", "1"});
    require_accepted(r);
    CHECK_THAT(r.out, Catch::Contains("layer types"));
    // One pipeline stage per layer: every per-stage sum stays linear in the layers. V4.1's sharing
    // groups are cut (exit 3): the refusal quotes kMessageMaxItems stages and counts the rest.
    const auto cut = run({at, "--pipeline-parallel-size", "4096"});
    require_accepted(cut);
    if (family == "deepseek_v41") {
      CHECK(cut.code == 3);
      CHECK(std::count(cut.err.begin(), cut.err.end(), '\n') == 1);
      CHECK(cut.err.size() < 1000);
      CHECK_THAT(cut.err, Catch::Contains("Stages hold layers 0-0, 1-1, 2-2, ") &&
                              Catch::Contains(", 15-15, ... (4080 more) (draft layers 4096-4159 with the last stage)"));
      std::istringstream lines(cut.out);
      std::size_t longest = 0;
      for (std::string line; std::getline(lines, line);) longest = std::max(longest, line.size());
      CHECK(longest < 1000);
    }
    require_rejected(run({at, "--pipeline-parallel-size", "4097"}), 1,
                     "--pipeline-parallel-size: '4097' is out of range; allowed 1..4096");

    const auto more = dir.write(family + "-layers.json", flat_config(family, ConfigLimits::max_layers + 1, 0));
    require_rejected(run({more}), 2, "/num_hidden_layers: num_hidden_layers = 4097 is out of range; allowed 1..4096");
    const auto drafts = dir.write(family + "-drafts.json", flat_config(family, 8, ConfigLimits::max_draft_layers + 1));
    require_rejected(run({drafts}), 2,
                     "/num_nextn_predict_layers: num_nextn_predict_layers = 65 is out of range; allowed 0..64");
  }
  // The report of the largest config, both kinds.
  const auto at = dir.path / "deepseek_v41-max.json";
  for (const std::string ext : {".svg", ".html"}) {
    const auto out = (dir.path / ("max" + ext)).string();
    const auto r = run({"report", at.string(), "--tp", "1", "-o", out});
    require_accepted(r);
    CHECK(fs::file_size(out) < 8u << 20);
  }
}

TEST_CASE("limits: entries of a per-layer list", "[limits][config]") {
  // compress_ratios entries past the backbone count the draft layers (draft_layer_count): the
  // list holds at most 4096 + 64 entries, and one more is a draft layer past the limit. The list
  // length is bounded before any entry is read.
  const auto n = ConfigLimits::max_layers, d = ConfigLimits::max_draft_layers;
  const auto at = parse_config(v4_config(n, 0, d), "t.json");
  CHECK(at.compress_ratios.size() == 4096 + 64);
  CHECK(at.num_draft_layers == 64);
  CHECK(config_error(v4_config(n, 0, d + 1)) ==
        "t.json: /compress_ratios: compress_ratios has 4161 entries for num_hidden_layers = 4096: 65 draft layers "
        "(every entry past the backbone is one); allowed up to 64 draft layers");
  CHECK(config_error(v4_config(n, d, ConfigLimits::max_list_entries - n - d)) ==
        "t.json: /compress_ratios: compress_ratios has 8192 entries for num_hidden_layers = 4096: 4096 draft layers "
        "(every entry past the backbone is one); allowed up to 64 draft layers");
  CHECK(config_error(v4_config(n, d, ConfigLimits::max_list_entries - n - d + 1)) ==
        "t.json: /compress_ratios: compress_ratios has 8193 entries; at most 8192 are accepted");

  auto layer_types = [](std::int64_t entries) {
    json t = json::array();
    for (std::int64_t i = 0; i < entries; ++i) t.push_back(i < 4 ? "compressed_sparse_attention" : "sliding_attention");
    return json{
        {"model_type", "deepseek_v4"}, {"num_hidden_layers", 4}, {"num_nextn_predict_layers", 0}, {"layer_types", t}}
        .dump();
  };
  CHECK(parse_config(layer_types(ConfigLimits::max_list_entries), "t.json").compress_ratios.size() == 4);
  CHECK(config_error(layer_types(ConfigLimits::max_list_entries + 1)) ==
        "t.json: /layer_types: layer_types has 8193 entries; at most 8192 are accepted");
}

TEST_CASE("limits: config values (heads, head dims, window, top-k, positions)", "[limits][config]") {
  TempDir dir;
  struct Field {
    std::string family, key;
    std::int64_t lo, hi;
  };
  const std::vector<Field> fields = {
      {"deepseek_v41_text", "num_attention_heads", 1, ConfigLimits::max_heads},
      {"deepseek_v41_text", "index_n_heads", 1, ConfigLimits::max_heads},
      {"deepseek_v41_text", "head_dim", 1, ConfigLimits::max_head_dim},
      {"deepseek_v41_text", "index_head_dim", 1, ConfigLimits::max_head_dim},
      {"deepseek_v41_text", "sliding_window", 1, ConfigLimits::max_window},
      {"deepseek_v41_text", "index_topk", 1, ConfigLimits::max_topk},
      {"deepseek_v41_text", "max_position_embeddings", 1, ConfigLimits::max_positions},
      {"deepseek_v32", "kv_lora_rank", 1, ConfigLimits::max_head_dim},
      {"deepseek_v32", "index_topk", 1, ConfigLimits::max_topk},
      {"deepseek_v32", "max_position_embeddings", 1, ConfigLimits::max_positions},
  };
  for (const auto& f : fields) {
    INFO(f.family << " " << f.key);
    json c = {{"model_type", f.family}, {"num_hidden_layers", 8}, {f.key, f.hi}};
    const auto path = dir.write("at.json", c.dump());
    // At the limit: read and planned (a window or top-k this wide is a backend violation, exit 3;
    // positions this many do not fit a GPU, exit 4).
    require_accepted(run({path}));
    require_accepted(run({path, "--json"}));
    c[f.key] = f.hi + 1;
    CHECK(config_error(c.dump()) == "t.json: /" + f.key + ": " + f.key + " = " + std::to_string(f.hi + 1) +
                                        " is out of range; allowed " + std::to_string(f.lo) + ".." +
                                        std::to_string(f.hi));
  }
}

TEST_CASE("limits: the longest context, at max_position_embeddings = 2^34", "[limits][config][batch]") {
  TempDir dir;
  const auto max = std::to_string(ConfigLimits::max_positions);
  for (const std::string family : {"deepseek_v4", "deepseek_v41_text", "deepseek_v32"}) {
    INFO(family);
    json c = {
        {"model_type", family}, {"num_hidden_layers", 5}, {"max_position_embeddings", ConfigLimits::max_positions}};
    if (family == "deepseek_v4") c["compress_ratios"] = {0, 4, 128, 4, 128, 0};
    const auto path = dir.write(family + ".json", c.dump());
    const auto longest = std::to_string(ConfigLimits::max_positions - BatchLimits::max_spec_tokens);
    const auto r = run(
        {path, "--max-model-len", max, "--context-len", longest, "--batch", "1008", "--spec-tokens", "64", "--json"});
    require_accepted(r);
    const auto j = json::parse(r.out);
    CHECK(j.at("batch").at("decode_tokens") == 1008 * 65);
    CHECK(j.at("layout").at("max_model_len") == ConfigLimits::max_positions);
    require_rejected(run({path, "--max-model-len", std::to_string(ConfigLimits::max_positions + 1)}), 1,
                     "--max-model-len: '17179869185' is out of range; allowed 1..the config's "
                     "max_position_embeddings, at most 17179869184");
    require_rejected(
        run({path, "--max-model-len", max, "--context-len", std::to_string(ConfigLimits::max_positions - 63),
             "--spec-tokens", "64"}),
        1,
        "--context-len: '17179869121' is out of range; allowed 1..17179869120 (--max-model-len 17179869184, minus "
        "--spec-tokens 64)");
  }
}

// ------------------------------------------------------------------ batch flags (exit 1)

TEST_CASE("limits: batch flags of plan", "[limits][batch]") {
  const auto c = cfg("deepseek-v4.1-flash.json");
  SECTION("--batch") {
    const auto r = run({c, "--tp", "8", "--batch", "65536", "--context-len", "4096"});
    require_accepted(r);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("b = 65,536 decode tokens"));
    require_rejected(run({c, "--tp", "8", "--batch", "65537"}), 1,
                     "--batch: '65537' is out of range; allowed 1..65536");
    require_rejected(run({c, "--tp", "8", "--batch", "0"}), 1, "--batch: '0' is out of range; allowed 1..65536");
  }
  SECTION("entries of --context-lens") {
    const auto r = run({c, "--tp", "8", "--context-lens", ints(BatchLimits::max_requests, 1000), "--json"});
    require_accepted(r);
    CHECK(json::parse(r.out).at("batch").at("context_lens").size() == 65536);
    require_rejected(run({c, "--tp", "8", "--context-lens", ints(BatchLimits::max_requests + 1, 1000)}), 1,
                     "--context-lens has 65537 requests; allowed 1..65536");
  }
  SECTION("decode tokens: requests x (1 + --spec-tokens)") {
    require_accepted(run({c, "--tp", "8", "--batch", "1024", "--spec-tokens", "63"}));
    require_rejected(run({c, "--tp", "8", "--batch", "1025", "--spec-tokens", "63"}), 1,
                     "the batch has 65600 decode tokens (1025 requests x (1 + --spec-tokens 63)); allowed 1..65536");
  }
  SECTION("--spec-tokens") {
    require_accepted(run({c, "--tp", "8", "--batch", "8", "--spec-tokens", "64"}));
    require_rejected(run({c, "--tp", "8", "--batch", "8", "--spec-tokens", "65"}), 1,
                     "--spec-tokens: '65' is out of range; allowed 0..64");
  }
  SECTION("--context-len and each --context-lens entry, up to max_model_len") {
    require_accepted(run({c, "--tp", "8", "--batch", "2", "--context-len", "1048576"}));
    require_rejected(run({c, "--tp", "8", "--batch", "2", "--context-len", "1048577"}), 1,
                     "--context-len: '1048577' is out of range; allowed 1..1048576 (the default max_model_len 1048576, "
                     "the config's max_position_embeddings)");
    require_accepted(run({c, "--tp", "8", "--context-lens", "1,1048576,7"}));
    require_rejected(run({c, "--tp", "8", "--context-lens", "1,1048577,7"}), 1,
                     "--context-lens[1]: '1048577' is out of range; allowed 1..1048576 (the default max_model_len "
                     "1048576, the config's max_position_embeddings)");
  }
  SECTION("the report of the largest batch stays small") {
    TempDir dir;
    const auto out = (dir.path / "batch.svg").string();
    const auto r = run({"report", c, "--tp", "8", "--batch", "65536", "-o", out});
    require_accepted(r);
    CHECK(fs::file_size(out) < 2u << 20);  // one bar per partition, whatever the batch
    const auto html = (dir.path / "batch.html").string();
    require_accepted(run({"report", c, "--tp", "8", "--batch", "65536", "-o", html}));
    CHECK(fs::file_size(html) < 2u << 20);
  }
}

// ------------------------------------------------------------------ layout, target, capacity flags (exit 1)

TEST_CASE("limits: layout flags", "[limits][layout]") {
  const auto c = cfg("deepseek-v4.1-flash.json");
  const auto v32 = cfg("deepseek-v3.2.json");
  struct Flag {
    std::string config, flag;
    std::int64_t hi;
    std::string message;
  };
  const std::vector<Flag> flags = {
      {c, "--max-model-len", 1048576,
       "--max-model-len: '1048577' is out of range; allowed 1..1048576 (the model's "
       "max_position_embeddings is 1048576)"},
      {c, "--block-size", LayoutLimits::max_block_size, "--block-size: '1048577' is out of range; allowed 1..1048576"},
      {c, "--max-num-batched-tokens", LayoutLimits::max_in_flight_tokens,
       "--max-num-batched-tokens: '16777217' is out of range; allowed 1..16777216"},
      {c, "--tensor-parallel-size", LayoutLimits::max_parallel_size,
       "--tensor-parallel-size: '4097' is out of range; allowed 1..4096"},
      {c, "--data-parallel-size", LayoutLimits::max_parallel_size,
       "--data-parallel-size: '4097' is out of range; allowed 1..4096"},
      {v32, "--pipeline-parallel-size", 61,
       "--pipeline-parallel-size: '62' is out of range; allowed 1..61 (a stage needs at least one of "
       "the 61 backbone layers)"},
  };
  for (const auto& f : flags) {
    INFO(f.flag);
    require_accepted(run({f.config, f.flag, std::to_string(f.hi)}));
    require_accepted(run({f.config, f.flag, std::to_string(f.hi), "--json"}));
    require_rejected(run({f.config, f.flag, std::to_string(f.hi + 1)}), 1, f.message);
  }
}

TEST_CASE("limits: target and capacity flags", "[limits][layout]") {
  const auto c = cfg("deepseek-v4.1-flash.json");
  require_accepted(run({c, "--num-sms", "1024"}));
  require_rejected(run({c, "--num-sms", "1025"}), 1, "--num-sms: '1025' is out of range; allowed 1..1024");
  require_accepted(run({c, "--num-sms", "1024", "--batch", "65536"}));
  require_accepted(run({c, "--gpu-memory-gib", "1048576"}));
  require_rejected(run({c, "--gpu-memory-gib", "1048577"}), 1,
                   "--gpu-memory-gib: '1048577' is out of range; allowed 2^-30 (1 byte) up to 1048576 GiB");
  require_accepted(run({c, "--kv-budget-gib", "1048576"}));
  require_rejected(run({c, "--kv-budget-gib", "1048577"}), 1,
                   "--kv-budget-gib: '1048577' is out of range; allowed 2^-30 (1 byte) up to 1048576 GiB");
  for (const std::string flag : {"--weights-gib", "--reserved-gib"}) {
    const auto r = run({c, flag, "1048576"});
    require_accepted(r);
    CHECK(r.code == 4);  // more than the GPU has: the budget is negative, nothing fits
    require_rejected(run({c, flag, "1048577"}), 1, flag + ": '1048577' is out of range; allowed 0 up to 1048576 GiB");
  }
  require_accepted(run({c, "--gpu-memory-utilization", "1"}));
  require_rejected(run({c, "--gpu-memory-utilization", "1.001"}), 1,
                   "--gpu-memory-utilization: '1.001' is out of range; allowed above 0 up to 1");
}

TEST_CASE("limits: 64-bit products at the extremes stay exact, past them they are rejected", "[limits][layout]") {
  // The largest config at 2^34 tokens, 2^24 in-flight tokens, 64 speculative tokens, DP 4096 and a
  // 1 PiB budget: every byte count is still exact in int64.
  auto text = json::parse(v4_config(ConfigLimits::max_layers, ConfigLimits::max_draft_layers));
  text["max_position_embeddings"] = ConfigLimits::max_positions;
  const auto big = parse_config(text.dump(), "t.json");
  const auto topo = build_topology(big);
  LayoutOptions o;
  o.max_model_len = ConfigLimits::max_positions;
  o.in_flight_tokens = LayoutLimits::max_in_flight_tokens;
  o.num_speculative_tokens = BatchLimits::max_spec_tokens;
  o.data_parallel_size = LayoutLimits::max_parallel_size;
  const auto L = plan_layout(big, topo, resolve_target({}), o, Strictness::lenient);
  const auto one = request_bytes(L, -1, ConfigLimits::max_positions);
  CHECK(one > 0);
  CHECK(one == L.accounting.total_pages);
  // Past int64: a usage error naming what overflows, never a wrapped number.
  CHECK(error_of([&] { (void)request_bytes(L, -1, std::int64_t{1} << 62); }, ErrorKind::usage) ==
        "the KV cache of a 4611686018427387904-token request overflows 64-bit byte counts");
  CHECK(error_of(
            [&] { (void)checked_mul(std::int64_t{1} << 40, std::int64_t{1} << 30, "batch bytes", ErrorKind::usage); },
            ErrorKind::usage) == "batch bytes overflows 64-bit arithmetic (1099511627776 x 1073741824)");
}

// ------------------------------------------------------------------ schedule (exit 1)

TEST_CASE("limits: schedule direct mode", "[limits][schedule]") {
  const std::vector<std::string> base = {"schedule", "--kernel", "sm90-sparse", "--num-sms", "132", "--h-q", "64"};
  auto with = [&](std::vector<std::string> extra) {
    auto a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return run(a);
  };
  const auto max = ScheduleLimits::max_cli_requests;
  const auto r = with({"--lengths", ints(max, 2048), "--extra-lengths", ints(max, 512), "--json"});
  require_accepted(r);
  CHECK(json::parse(r.out).at("schedules")[0].at("blocks").size() == 65536);
  require_rejected(with({"--lengths", ints(max + 1, 2048)}), 1, "--lengths has 65537 requests; allowed 1..65536");

  require_accepted(with({"--lengths", "268435456,0", "--extra-lengths", "268435456,268435456"}));
  require_rejected(with({"--lengths", "268435457"}), 1,
                   "--lengths[0]: '268435457' is out of range; allowed 0..268435456");
  require_rejected(with({"--lengths", "1", "--extra-lengths", "268435457"}), 1,
                   "--extra-lengths[0]: '268435457' is out of range; allowed 0..268435456");

  auto dense = [](const std::string& flag, const std::string& value) {
    std::vector<std::string> a = {"schedule", "--kernel", "sm90-dense", "--num-sms", "132",   "--h-q",
                                  "4096",     "--h-k",    "1",          "--lengths", "4096,1"};
    for (std::size_t i = 0; i + 1 < a.size(); ++i) {
      if (a[i] == flag) a[i + 1] = value;
    }
    if (flag == "--s-q") a.insert(a.end(), {flag, value});
    return run(a);
  };
  for (const std::string flag : {"--num-sms", "--h-q", "--s-q"}) {
    INFO(flag);
    require_accepted(dense(flag, "4096"));
    require_rejected(dense(flag, "4097"), 1, flag + ": '4097' is out of range; allowed 1..4096");
  }
  {
    auto a = std::vector<std::string>{"schedule", "--kernel", "sm90-dense", "--num-sms", "132", "--h-q",
                                      "4096",     "--h-k",    "4096",       "--lengths", "1"};
    require_accepted(run(a));
    a[8] = "4097";
    require_rejected(run(a), 1, "--h-k: '4097' is out of range; allowed 1..4096");
  }
  // The library scheduler: s_q has the same bound.
  SchedInput in;
  in.kernel = SchedKernel::sm90_dense;
  in.h_q = 64;
  in.lengths = {1};
  in.s_q = static_cast<std::int32_t>(ScheduleLimits::max_s_q);
  CHECK(plan_schedule(in).batch == 1);
  in.s_q += 1;
  CHECK(error_of([&] { (void)plan_schedule(in); }, ErrorKind::usage) == "s_q = 4097: must be between 1 and 4096");
}

// ------------------------------------------------------------------ check (exit 1)

TEST_CASE("limits: check", "[limits][check]") {
  const auto real = cfg("deepseek-v4.1-flash.json");
  const auto missing = cfg("no-such-config.json");
  SECTION("configs in one run") {
    std::vector<std::string> a = {"check", real};
    a.insert(a.end(), static_cast<std::size_t>(CheckLimits::max_configs - 1), missing);
    a.insert(a.end(), {"--tp", "8"});
    const auto r = run(a);
    require_accepted(run({"check", real, "--tp", "8"}));
    CHECK(r.code == 2);  // every missing file is invalid; none is a usage error
    CHECK_THAT(r.out, Catch::Contains("1 of 4096 configs passed"));
    require_quick(r.heap);
    a.insert(a.end() - 2, missing);
    require_rejected(run(a), 1, "CONFIG: 4097 configs given; allowed 1..4096 in one run");
  }
  SECTION("--tensor-parallel-size values and matrix rows") {
    const std::string tps16 = "1,2,4,8,16,32,64,128,256,512,1024,2048,4096,1,2,4";
    const auto r = run({"check", real, "--matrix", "--tensor-parallel-size", tps16, "--json"});
    require_accepted(r);
    CHECK(json::parse(r.out).at("files")[0].at("matrix").size() == gpu_presets().size() * 2 * 16);
    require_rejected(run({"check", real, "--matrix", "--tensor-parallel-size", tps16 + ",8"}), 1,
                     "--tensor-parallel-size has 17 values; allowed 1..16");
    require_rejected(run({"check", real, "--matrix", "--tensor-parallel-size", "1,4097"}), 1,
                     "--tensor-parallel-size[1]: '4097' is out of range; allowed 1..4096");
    // 64 configs x 16 TP sizes = 1024 rows (one real config, the rest missing).
    std::vector<std::string> a = {"check", real};
    a.insert(a.end(), 63, missing);
    a.insert(a.end(), {"--matrix", "--tensor-parallel-size", tps16});
    const auto rows = run(a);
    CHECK(rows.code == 2);
    require_quick(rows.heap);
    a.insert(a.begin() + 1, missing);
    require_rejected(
        run(a), 1,
        "--matrix: 65 configs x 16 TP sizes x 1 DP sizes = 1040 rows; allowed 1..1024 (each row plans every GPU preset "
        "and kv dtype)");
  }
  SECTION("matrix layer rows") {
    // The layers of the configs x TP sizes: two configs of 4032 + 64 layers at 16 TP sizes are
    // exactly the limit. One config never reaches it (4160 layers x 16 TP sizes = 66560).
    TempDir dir;
    const auto at = dir.write("at.json", flat_config("deepseek_v41", 4032, 64));
    const auto past = dir.write("past.json", flat_config("deepseek_v41", 4033, 64));
    const std::string tps16 = "1,2,4,8,16,32,64,128,256,512,1024,2048,4096,1,2,4";
    REQUIRE(2 * 4096 * 16 == CheckLimits::max_matrix_layer_rows);
    REQUIRE((ConfigLimits::max_layers + ConfigLimits::max_draft_layers) * CheckLimits::max_tp_sizes <
            CheckLimits::max_matrix_layer_rows);
    const auto r = run({"check", at, missing, at, "--matrix", "--tensor-parallel-size", tps16, "--json"});
    CHECK(r.code == 2);  // the missing file, which has no layers to plan
    require_quick(r.heap);
    const auto files = json::parse(r.out).at("files");
    REQUIRE(files.size() == 3);
    CHECK(files[2].at("matrix").size() == gpu_presets().size() * 2 * 16);
    // Past it: rejected before anything is printed, naming the configs, the total and what to split.
    require_rejected(run({"check", at, missing, past, "--matrix", "--tensor-parallel-size", tps16}), 1,
                     "--matrix: 8193 layers (backbone + draft) in the first 3 configs (up to '" + past +
                         "') x 16 TP sizes = 131088 layer rows; allowed up to 131072 in one run (each layer row is "
                         "planned on every GPU preset and kv dtype): split the configs over several runs or give "
                         "fewer TP sizes");
    std::vector<std::string> many = {"check"};
    many.insert(many.end(), 33, at);
    many.push_back("--matrix");
    require_rejected(run(many), 1,
                     "--matrix: 135168 layers (backbone + draft) in the first 33 configs (up to '" + at +
                         "') x 1 TP size = 135168 layer rows; allowed up to 131072");
  }
  SECTION("--max-global-bytes-per-token") {
    require_accepted(run({"check", real, "--max-global-bytes-per-token", "1e18"}));
    for (const std::string bad : {"1.5e18", "-1", "nan", "inf"}) {
      INFO(bad);
      const auto r = run({"check", real, "--max-global-bytes-per-token", bad});
      CHECK(r.code == 1);
      CHECK(r.err ==
            "mla-plan: error: --max-global-bytes-per-token: '" + bad + "' is out of range; allowed 0 up to 1e18\n");
    }
  }
}

// ------------------------------------------------------------------ verify

TEST_CASE("limits: verify flags are checked before any GPU is needed", "[limits][verify]") {
  const auto c = cfg("deepseek-v4.1-flash.json");
  const auto ok = run({"verify", c, "--iterations", "10000"});
  CHECK(ok.code != 1);  // 6 without CUDA or a GPU; a run on a GPU machine
  require_rejected(run({"verify", c, "--iterations", "10001"}), 1,
                   "--iterations: \'10001\' is out of range; allowed 1..10000");
  require_rejected(run({"verify", c, "--iterations", "0"}), 1, "--iterations: \'0\' is out of range; allowed 1..10000");
  const auto dtype = run({"verify", c, "--kv-cache-dtype", "fp8,bf16"});
  CHECK(dtype.code == 1);
  CHECK_THAT(dtype.err, Catch::Contains("bf16"));
  // A DP layout needs a request per DP rank (checked before any GPU is looked for).
  require_rejected(run({"verify", c, "--data-parallel-size", "4", "--context-lens", "100,200"}), 1,
                   "verify: --data-parallel-size 4 needs at least 4 requests, one per DP rank (the batch has 2)");
  const auto dp_ok = run({"verify", c, "--tp", "2", "--dp", "2", "--context-lens", "100,200"});
  CHECK(dp_ok.code != 1);
}

TEST_CASE("limits: verify problem sizes", "[limits][verify]") {
  // One layer type (window only), so one cell: each problem of the largest batch holds
  // b x h_q x 512 values several times over in host memory.
  const auto c = parse_config(R"({"model_type": "deepseek_v41_text", "num_hidden_layers": 4,
                                  "num_nextn_predict_layers": 0, "compress_ratios": [0, 0, 0, 0]})",
                              "swa.json");
  const auto topo = build_topology(c);
  TargetRequest tr;
  tr.gpu = "h200";
  const auto target = resolve_target(tr);
  auto dev = make_host_verify_device();
  VerifyOptions o;
  o.kv_cache_dtypes = {"fp8_ds_mla"};
  o.timing_iterations = 1;
  o.batch.batch = VerifyLimits::max_decode_tokens;
  o.batch.context_len = 1;
  const heap_counter::Scope verify_heap;
  const auto r = run_verify(c, topo, target, *dev, o);
  const auto verify_work = verify_heap.totals();
  CHECK(r.exit_code == 0);
  REQUIRE(r.cells.size() == 1);
  CHECK(r.cells[0].status == VerifyStatus::pass);
  CHECK(r.cells[0].b == 256);
  require_quick(verify_work);
  o.batch.batch = VerifyLimits::max_decode_tokens + 1;
  CHECK(error_of([&] { (void)run_verify(c, topo, target, *dev, o); }, ErrorKind::usage) ==
        "verify: the batch has 257 decode tokens (--batch 257); allowed 1..256 for verification (the host "
        "reference recomputes every one)");

  // Per cache: index slots (b x topk) and attended rows (sum of min(length, topk)).
  LayerTypeSchedule s;
  s.topk = VerifyLimits::max_index_slots;
  s.input.lengths = {1};
  check_verify_size(s);
  s.topk += 1;
  CHECK(error_of([&] { check_verify_size(s); }, ErrorKind::unsupported) ==
        "the main cache is too large to verify on the host: b 1 x topk 16777217 = 16777217 index slots; allowed "
        "up to 16777216 (give a smaller batch)");
  s.topk = 1024;
  s.input.lengths.assign(128, 1024);  // 2^17 attended rows
  check_verify_size(s);
  s.input.lengths.push_back(1);
  CHECK(error_of([&] { check_verify_size(s); }, ErrorKind::unsupported) ==
        "the main cache is too large to verify on the host: 131073 attended rows; allowed up to 131072 (give a "
        "smaller --batch or shorter --context-len)");
  s.input.lengths.assign(129, 1);
  s.input.has_extra = true;
  s.extra_topk = 2048;
  s.input.extra_lengths.assign(128, 1024);
  s.input.extra_lengths.push_back(0);
  check_verify_size(s);
  s.input.extra_lengths.back() = 1;
  CHECK_THAT(error_of([&] { check_verify_size(s); }, ErrorKind::unsupported),
             Catch::StartsWith("the extra cache is too large to verify on the host: 131073 attended rows"));
  s.input.lengths.assign(static_cast<std::size_t>(VerifyLimits::max_decode_tokens + 1), 1);
  CHECK(error_of([&] { check_verify_size(s); }, ErrorKind::usage) == "verify: b = 257 decode tokens; allowed 1..256");
}

// ------------------------------------------------------------------ report result files (exit 2)

TEST_CASE("limits: report result files and what the report shows of them", "[limits][report]") {
  TempDir dir;
  const auto c = cfg("deepseek-v4.1-flash.json");
  const std::string small = R"({"schema": "mla-plan/1", "matrix": [{"layer_type": "c1a", "status": "PASS"}]})";
  const auto max = static_cast<std::size_t>(ResultLimits::max_file_bytes);
  const auto at = dir.write("at.json", small + std::string(max - small.size(), ' '));
  REQUIRE(fs::file_size(at) == max);
  const auto out = (dir.path / "r.svg").string();
  require_accepted(run({"report", c, "-o", out, "--verify-json", at}));
  const auto past = dir.write("past.json", small + std::string(max - small.size() + 1, ' '));
  require_rejected(run({"report", c, "-o", out, "--verify-json", past}), 2,
                   "--verify-json: '" + past + "' is larger than 4 MiB (4194304 bytes, the limit for result files)");

  // Nesting: 64 levels read, 65 rejected.
  auto nested = [](int depth) {
    return R"({"x": )" + std::string(static_cast<std::size_t>(depth - 1), '[') +
           std::string(static_cast<std::size_t>(depth - 1), ']') + "}";
  };
  CHECK(cli::parse_result_json(nested(ResultLimits::max_nesting_depth), "--bench-json", "B", "b.json").tables.empty());
  CHECK(error_of(
            [&] {
              (void)cli::parse_result_json(nested(ResultLimits::max_nesting_depth + 1), "--bench-json", "B", "b.json");
            },
            ErrorKind::invalid_config) ==
        "--bench-json: 'b.json' nests deeper than 64 levels (line 1); expected the JSON output of mla-plan");

  // A dense file at the size limit, a row with more keys than the column limit first: read
  // quickly, at most max_columns columns and max_html_rows rows kept, every row counted.
  json wide;
  for (int k = 0; k < ResultLimits::max_columns + 6; ++k) wide["k" + std::to_string(k)] = k;
  std::string dense = R"({"rows": [)" + wide.dump();
  const std::string row_text = R"({"k0": 1, "status": "pass"})";
  std::int64_t rows = 1;
  while (dense.size() + row_text.size() + 3 <= max) {
    dense += "," + row_text;
    ++rows;
  }
  dense += "]}";
  dense += std::string(max - dense.size(), ' ');
  REQUIRE(rows > ReportLimits::max_html_rows);
  const auto dense_path = dir.write("dense.json", dense);
  const heap_counter::Scope read_heap;
  const auto f = cli::read_result_json("--verify-json", "V", dense_path);
  require_quick(read_heap.totals());
  REQUIRE(f.tables.size() == 1);
  CHECK(static_cast<std::int64_t>(f.tables[0].columns.size()) == ResultLimits::max_columns);
  CHECK(static_cast<std::int64_t>(f.tables[0].rows.size()) == ReportLimits::max_html_rows);
  CHECK(f.tables[0].total_rows == rows);
  const auto html = (dir.path / "r.html").string();
  const auto h = run({"report", c, "-o", html, "--verify-json", dense_path});
  require_accepted(h);
  const auto page = slurp(html);
  CHECK_THAT(page, Catch::Contains(std::to_string(rows - ReportLimits::max_html_rows) +
                                   " more rows (the report lists the first 10000)"));
  CHECK(page.size() < 16u << 20);
  const auto svg = (dir.path / "d.svg").string();
  require_accepted(run({"report", c, "-o", svg, "--verify-json", dense_path}));
  CHECK_THAT(slurp(svg), Catch::Contains(std::to_string(rows - ReportLimits::max_svg_rows) + " more rows"));
}

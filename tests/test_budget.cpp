// vLLM's start-up budget of one GPU, term by term: the runtime's memory figure, ceil(total x
// utilisation), each term's source and its override, --kv-cache-memory-bytes, --enforce-eager, the
// two V4-Flash TP4 load logs against the derived weights plus the load-overhead term, and bad values.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "mlaplan/engine/vllm/budget.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/engine/vllm/placement.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/weights.hpp"

using namespace mlaplan;

namespace {

std::string src(const std::string& rel) { return std::string(MLAPLAN_SOURCE_DIR) + "/" + rel; }
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
double gib(std::int64_t b) { return static_cast<double>(b) / kGiB; }

BudgetShape shape_of(std::int64_t weights, std::int64_t tp = 1) {
  BudgetShape s;
  s.weights_bytes = weights;
  s.weights_how = "test";
  s.layers = 43;
  s.local_heads = 64 / tp;
  s.tensor_parallel_size = tp;
  s.max_num_batched_tokens = 8192;
  s.max_num_seqs = 1024;
  return s;
}

}  // namespace

TEST_CASE("budget: requested is ceil(runtime total x 0.92) and every term is named", "[budget]") {
  const auto cfg = load_config(src("configs/deepseek-v4-flash.json"));
  const Target h200 = resolve_target(TargetRequest{std::string("h200"), {}, {}, {}});
  REQUIRE(h200.runtime_memory_bytes == 150'109'880'320);
  const Budget b = plan_budget(cfg, h200, shape_of(20LL << 30), BudgetOptions{});
  CHECK(b.total_bytes == 150'109'880'320);
  CHECK(b.total_source == TermSource::measured);
  CHECK(b.gpu_memory_utilization == 0.92);
  CHECK(b.utilization_default);
  // ceil(150,109,880,320 x 0.92) = ceil(138,101,089,894.4)
  CHECK(b.requested_bytes == 138'101'089'895);
  std::vector<std::string> ids;
  std::int64_t sum = 0;
  for (const auto& t : b.terms) {
    ids.push_back(t.id);
    sum += t.bytes;
    CHECK_FALSE(t.how.empty());
    CHECK_FALSE(t.flag.empty());
  }
  CHECK(ids == std::vector<std::string>{"weights", "load_overhead", "activation_peak", "non_torch", "cudagraph"});
  CHECK(b.non_kv_bytes == sum);
  CHECK(b.available_bytes == b.requested_bytes - sum);
  CHECK(b.term("weights")->bytes == (20LL << 30));
  CHECK(b.term("weights")->source == TermSource::derived);
  CHECK(b.term("activation_peak")->source == TermSource::estimated);
  // The V2 model runner (the newest release's) takes no CUDA-graph estimate before the KV cache.
  CHECK(b.term("cudagraph")->source == TermSource::derived);
  CHECK(b.term("cudagraph")->bytes == 0);
  CHECK_THAT(b.term("cudagraph")->how, Catch::Contains("V2 model runner"));
  BudgetShape v1 = shape_of(20LL << 30);
  v1.model_runner_v2 = false;
  const Budget b1 = plan_budget(cfg, h200, v1, BudgetOptions{});
  CHECK(b1.term("cudagraph")->source == TermSource::estimated);
  CHECK(b1.term("cudagraph")->bytes > 0);
  CHECK(b.term("reserved") == nullptr);
}

TEST_CASE("budget: every preset's total is the runtime's, an upper bound where only nvidia-smi's is known",
          "[budget]") {
  const auto cfg = load_config(src("configs/deepseek-v4-flash.json"));
  for (const auto& p : gpu_presets()) {
    INFO(p.id);
    const Target t = resolve_target(TargetRequest{std::string(p.id), {}, {}, {}});
    const Budget b = plan_budget(cfg, t, shape_of(0), BudgetOptions{});
    CHECK(b.total_bytes == p.runtime_memory_bytes);
    CHECK(b.total_bytes < (p.memory_gib << 30));
    CHECK(b.total_how == p.runtime_memory_source);
    const bool bound = is_upper_bound(p.runtime_basis);
    CHECK(b.total_upper_bound == bound);
    CHECK(b.total_source ==
          (bound || p.runtime_basis == MemoryBasis::fixture ? TermSource::estimated : TermSource::measured));
    bool said = false;
    for (const auto& f : b.findings) said = said || f.id == "budget.memory_upper_bound";
    CHECK(said == bound);
  }
  // The H800: only nvidia-smi's 81,559 MiB is known; the finding names --gpu-memory-gib.
  const Target h800 = resolve_target(TargetRequest{std::string("h800"), {}, {}, {}});
  const Budget b = plan_budget(cfg, h800, shape_of(0), BudgetOptions{});
  CHECK(b.total_bytes == (81'559LL << 20));
  REQUIRE(b.findings.size() == 2);
  CHECK(b.findings[0].id == "budget.memory_upper_bound");
  CHECK_THAT(b.findings[0].message, Catch::Contains("nvidia-smi's total 79.65 GiB"));
  CHECK_THAT(b.findings[0].fix, Catch::Contains("--gpu-memory-gib"));
  // weights of 0 are never silent
  CHECK(b.findings[1].id == "budget.weights_unknown");
  // The user's figure is given, and no longer a bound.
  const Target given = resolve_target(TargetRequest{std::string("h800"), {}, {}, 79.2});
  CHECK_FALSE(given.memory_upper_bound());
  const Budget g = plan_budget(cfg, given, shape_of(1), BudgetOptions{});
  CHECK(g.total_bytes == std::llround(79.2 * kGiB));
  CHECK(g.total_source == TermSource::given);
  CHECK(g.total_how == "--gpu-memory-gib");
  CHECK_FALSE(g.total_upper_bound);
}

TEST_CASE("budget: a total the user passes is given, never estimated", "[budget]") {
  const auto cfg = load_config(src("configs/deepseek-v4-flash.json"));
  // A custom target from --arch, --num-sms and --gpu-memory-gib: there is no vendor figure to estimate from.
  const Target custom = resolve_target(TargetRequest{{}, std::string("sm90"), 132, 80.0});
  REQUIRE(custom.source == TargetSource::custom);
  const Budget c = plan_budget(cfg, custom, shape_of(1), BudgetOptions{});
  CHECK(c.total_bytes == (80LL << 30));
  CHECK(c.total_source == TermSource::given);
  CHECK(c.total_how == "--gpu-memory-gib");
  // The preset's own vendor figure passed as --gpu-memory-gib is the user's too (not the measured runtime total).
  const Target h100 = resolve_target(TargetRequest{std::string("h100"), {}, {}, {}});
  const Target same = resolve_target(TargetRequest{std::string("h100"), {}, {}, 80.0});
  CHECK(same.memory_bytes == h100.memory_bytes);
  const Budget s = plan_budget(cfg, same, shape_of(1), BudgetOptions{});
  CHECK(s.total_source == TermSource::given);
  const Target h200 = resolve_target(TargetRequest{std::string("h200"), {}, {}, 139.8});
  CHECK(plan_budget(cfg, h200, shape_of(1), BudgetOptions{}).total_source == TermSource::given);
  // Every budget term the user passes is given (the terms' flags, the KV cache itself).
  BudgetOptions o;
  o.weights_gib = 10;
  for (const auto& t : plan_budget(cfg, custom, shape_of(1), o).terms) {
    if (t.id == "weights") CHECK(t.source == TermSource::given);
  }
}

TEST_CASE("budget: every term has an override, --enforce-eager drops the graphs", "[budget]") {
  const auto cfg = load_config(src("configs/deepseek-v4-flash.json"));
  const Target h200 = resolve_target(TargetRequest{std::string("h200"), {}, {}, {}});
  BudgetOptions o;
  o.gpu_memory_utilization = 0.5;
  o.weights_gib = 10;
  o.load_overhead_gib = 1;
  o.activation_gib = 2;
  o.non_torch_gib = 0.5;
  o.cudagraph_gib = 0.25;
  o.reserved_gib = 3;
  const Budget b = plan_budget(cfg, h200, shape_of(99), o);
  CHECK(b.requested_bytes == 75'054'940'160);
  for (const auto& t : b.terms) CHECK(t.source == TermSource::given);
  CHECK(b.non_kv_bytes == static_cast<std::int64_t>(16.75 * kGiB));
  CHECK(b.available_bytes == b.requested_bytes - b.non_kv_bytes);
  CHECK(b.term("reserved")->bytes == (3LL << 30));

  BudgetOptions eager;
  eager.enforce_eager = true;
  BudgetShape v1 = shape_of(1LL << 30);
  v1.model_runner_v2 = false;  // the V1 runner takes the graphs' estimate off the budget
  const Budget e = plan_budget(cfg, h200, v1, eager);
  const Budget d = plan_budget(cfg, h200, v1, BudgetOptions{});
  CHECK(e.term("cudagraph")->bytes == 0);
  CHECK(d.term("cudagraph")->bytes > 0);
  CHECK(e.available_bytes - d.available_bytes == d.term("cudagraph")->bytes);

  BudgetOptions kv;
  kv.kv_cache_memory_bytes = 12345;
  const Budget k = plan_budget(cfg, h200, shape_of(1), kv);
  CHECK(k.explicit_kv_bytes);
  CHECK(k.available_bytes == 12345);
}

TEST_CASE("budget: bad values name the flag", "[budget]") {
  const auto cfg = load_config(src("configs/deepseek-v4-flash.json"));
  const Target h200 = resolve_target(TargetRequest{std::string("h200"), {}, {}, {}});
  BudgetOptions o;
  o.gpu_memory_utilization = 1.5;
  CHECK_THROWS_WITH(plan_budget(cfg, h200, shape_of(1), o), Catch::Contains("--gpu-memory-utilization"));
  BudgetOptions n;
  n.activation_gib = -1;
  CHECK_THROWS_AS(plan_budget(cfg, h200, shape_of(1), n), Error);
  BudgetOptions k;
  k.kv_cache_memory_bytes = 0;
  CHECK_THROWS_WITH(plan_budget(cfg, h200, shape_of(1), k), Catch::Contains("--kv-cache-memory-bytes"));
}

TEST_CASE("budget: the two V4-Flash TP4 load logs are the derived weights plus the overhead term", "[budget]") {
  // docs/fit.md section 3: vLLM printed "Model loading took 37.96 GiB" and "38.09 GiB" (two MoE
  // backends) for V4-Flash at TP4, EP on, without the MTP stage.
  const auto cfg = load_config(src("configs/deepseek-v4-flash.json"));
  const auto w = compute_weights(cfg, {false});
  ParallelLayout pl;
  pl.tensor_parallel_size = 4;
  pl.enable_expert_parallel = true;
  const auto p = place_weights(cfg, w, pl);
  REQUIRE(p.stages.size() == 1);
  CHECK(gib(p.stages[0].total_bytes) == Approx(37.25).margin(0.01));
  const Target h200 = resolve_target(TargetRequest{std::string("h200"), {}, {}, {}});
  const Budget b = plan_budget(cfg, h200, shape_of(p.stages[0].total_bytes, 4), BudgetOptions{});
  const double loaded = gib(b.term("weights")->bytes + b.term("load_overhead")->bytes);
  for (double logged : {37.96, 38.09}) {
    INFO(logged);
    CHECK(std::abs(loaded - logged) <= 0.07);
  }
}

TEST_CASE("budget: the activation estimate follows the shapes", "[budget]") {
  const auto cfg = load_config(src("configs/deepseek-v4-flash.json"));
  BudgetShape s = shape_of(0);
  // H 4096, 4 mHC streams, heads 64 x 512, q_lora 1024, 8 x 1024 output groups, top-6 of MI 2048:
  // 8192 x (4 x 4096 x 6 + (1024 + 65536 + 8192) x 2 + 6 x (6144 + 4096) x 2), scaled per model
  // runner (V2 0.60, V1 1.45); the sampler's 1024 x 129,280 x 8; on the V2 runner the indexer's
  // fp8 logits of 8192 x max_model_len.
  const double raw = 8192.0 * (4 * 4096 * 6 + (1024 + 65536 + 8192) * 2 + 6 * (6144 + 4096) * 2);
  const std::int64_t sampler = 1024LL * 129280 * 8;
  ActivationParts p = estimate_activation(cfg, s);
  CHECK(p.shapes == std::llround(raw * 0.60));
  CHECK(p.sampler == sampler);
  CHECK(p.indexer == 0);  // no max_model_len given
  CHECK(estimate_activation_bytes(cfg, s) == p.shapes + p.sampler);
  s.max_model_len = 262'144;
  CHECK(estimate_activation(cfg, s).indexer == 8192LL * 262'144);
  s.model_runner_v2 = false;
  p = estimate_activation(cfg, s);
  CHECK(p.shapes == std::llround(raw * 1.45));
  CHECK(p.indexer == 0);  // the V1 runner tiles the indexer's logits (prefill.hpp)
  s.last_stage = false;
  CHECK(estimate_activation(cfg, s).sampler == 0);
  s.max_num_batched_tokens = 4096;
  CHECK(estimate_activation(cfg, s).shapes <= p.shapes / 2 + 1);
  // DP x EP: a rank's experts take every DP rank's tokens.
  BudgetShape dp = shape_of(0);
  dp.data_parallel_size = 8;
  dp.expert_parallel_size = 8;
  CHECK(estimate_activation(cfg, dp).shapes > estimate_activation(cfg, shape_of(0)).shapes * 3);
}

TEST_CASE("budget: non-torch memory and the V1 runner's CUDA-graph estimate follow the layout", "[budget]") {
  const auto cfg = load_config(src("configs/deepseek-v4-flash.json"));
  const auto v41 = load_config(src("configs/deepseek-v4.1-flash.json"));
  BudgetShape s = shape_of(0);
  CHECK(gib(estimate_non_torch_bytes(cfg, s)) == Approx(0.23).margin(1e-6));  // one GPU (a v0.26.0 B300 log)
  s.tensor_parallel_size = 8;
  CHECK(gib(estimate_non_torch_bytes(cfg, s)) == Approx(0.91).margin(1e-6));  // TP 8 (a 0.31 H100 log)
  CHECK(gib(estimate_non_torch_bytes(v41, s)) == Approx(1.91).margin(1e-6));  // V4.1 on the same run
  s.tensor_parallel_size = 1;
  s.data_parallel_size = 8;
  s.expert_parallel_size = 8;
  s.max_num_batched_tokens = 16384;
  CHECK(gib(estimate_non_torch_bytes(v41, s)) == Approx(6.11).margin(1e-6));  // DP 8 x EP 8 (the 0909 image)
  // Largest capture size: 2 x max_num_seqs x (1 + K), at most 512 (the v0.25.0 log: 64 x 3 x 2 = 384).
  BudgetShape g = shape_of(0);
  g.max_num_seqs = 64;
  g.num_speculative_tokens = 2;
  CHECK(largest_capture_size(g) == 384);
  g.layers = 44;
  CHECK(gib(estimate_cudagraph_bytes(cfg, g)) == Approx(1.58).margin(0.01));  // printed 1.58
  g.max_num_seqs = 4;
  CHECK(largest_capture_size(g) == 24);
  CHECK(gib(estimate_cudagraph_bytes(cfg, g)) == Approx(0.55).margin(0.01));  // printed 0.55 (v0.21.1rc1)
  g.max_num_seqs = 1024;
  CHECK(largest_capture_size(g) == 512);
}

TEST_CASE("vLLM releases: every modelled release's rules, and --vllm-version's spellings", "[budget][release]") {
  using G = VllmKvGeneration;
  struct Row {
    const char* version;
    G planner;
    bool pinned, v2, v41, mega, triton, merged;
  };
  const Row rows[] = {
      {"0.25.0", G::packed_buckets, true, false, false, false, false, false},
      {"0.25.1", G::packed_buckets, true, false, false, false, false, false},
      {"0.26.0", G::packed_buckets, false, false, false, false, false, false},
      {"0.27.0", G::packed_buckets, false, false, false, false, false, false},
      {"0.27.1", G::packed_buckets, false, false, false, false, false, false},
      {"0.28.0", G::packed_buckets, false, false, false, false, false, false},
      {"0.29.0", G::generic_packed, false, true, false, false, false, true},
      {"0.30.0", G::generic_packed, true, true, true, false, false, true},
      {"0.31.0", G::generic_packed, true, true, true, true, true, true},
  };
  REQUIRE(vllm_releases().size() == std::size(rows));
  for (std::size_t i = 0; i < std::size(rows); ++i) {
    const Row& w = rows[i];
    const VllmRelease& r = vllm_releases()[i];
    INFO(w.version);
    CHECK(r.version == w.version);
    CHECK(&find_vllm_release(w.version) == &r);
    CHECK(r.planner == w.planner);
    CHECK(r.planner_pinned == w.pinned);
    CHECK(r.model_runner_v2 == w.v2);
    CHECK(r.supports_v41 == w.v41);
    CHECK(r.v41_mega_attention_default == w.mega);
    CHECK(r.v41_triton_sm90 == w.triton);
    CHECK(r.merged_kv_line == w.merged);
    CHECK(r.reserve_counts_batches == (w.planner == G::generic_packed));
    CHECK(r.gpu_memory_utilization == 0.92);
    CHECK(r.cudagraph_profiling);
    CHECK(r.async_default);
    CHECK_FALSE(r.async_off_with_pp);
    CHECK_FALSE(r.sources.empty());
    if (!w.pinned) CHECK_THAT(std::string(r.unpinned), Catch::Contains("not pinned"));
  }
  CHECK(&newest_vllm_release() == &vllm_releases().back());
  CHECK(find_vllm_release("0.27").version == "0.27.1");
  CHECK(find_vllm_release("0.25").version == "0.25.1");
  CHECK(find_vllm_release("v0.31.0").version == "0.31.0");
  CHECK(find_vllm_release("V0.30").version == "0.30.0");
  for (const char* bad : {"0.24", "0.30.1", "0.32", "abc", "0.30.0.1", "", "0..30", "1"}) {
    INFO(bad);
    try {
      find_vllm_release(bad);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::usage);
      CHECK_THAT(std::string(e.what()),
                 Catch::StartsWith("--vllm-version: ") && Catch::Contains("Modelled releases: " + vllm_release_list()));
    }
  }
  // The default utilization and the runner reach the budget.
  const auto cfg = load_config(src("configs/deepseek-v4-flash.json"));
  const Target h200 = resolve_target(TargetRequest{std::string("h200"), {}, {}, {}});
  BudgetShape s = shape_of(20LL << 30);
  s.release = &find_vllm_release("0.25.0");
  s.model_runner_v2 = false;
  const Budget b = plan_budget(cfg, h200, s, BudgetOptions{});
  CHECK(b.gpu_memory_utilization == 0.92);
  CHECK(b.term("cudagraph")->source == TermSource::estimated);
}

TEST_CASE("budget: on unified memory (GB10) vLLM needs the requested memory free on the host", "[budget]") {
  const auto cfg = load_config(src("configs/deepseek-v4-flash.json"));
  auto findings_of = [&](const char* gpu, BudgetOptions o) {
    const Target t = resolve_target(TargetRequest{std::string(gpu), {}, {}, {}});
    std::vector<std::string> ids;
    for (const auto& f : plan_budget(cfg, t, shape_of(1LL << 30), o).findings) ids.push_back(f.id);
    return ids;
  };
  const auto gb10 = findings_of("gb10", BudgetOptions{});
  CHECK(std::find(gb10.begin(), gb10.end(), "budget.unified_memory") != gb10.end());
  const auto h200 = findings_of("h200", BudgetOptions{});
  CHECK(std::find(h200.begin(), h200.end(), "budget.unified_memory") == h200.end());
  BudgetOptions kv;
  kv.kv_cache_memory_bytes = 1LL << 30;  // no utilization asked of the host
  const auto given = findings_of("gb10", kv);
  CHECK(std::find(given.begin(), given.end(), "budget.unified_memory") == given.end());
}

// The cost of one `check --matrix` cell on the largest V4.1 config (tests/test_limits.cpp builds
// it the same way: 4096 backbone layers, every compressed layer its own cache source with ratios
// 2 and 1 alternating, 64 draft layers), and of the steps a cell runs: the layout, vLLM's KV-cache
// specs and groups, the placement of the checkpoint's weights. A matrix run is cells x this.
// The checkpoint's weights are computed once per config (BM_weights), as `check --matrix` does.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>

#include "mlaplan/model/config.hpp"
#include "mlaplan/cache/layout.hpp"
#include "mlaplan/engine/vllm/placement.hpp"
#include "mlaplan/plan/plan.hpp"
#include "mlaplan/plan/search.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/topology.hpp"
#include "mlaplan/engine/vllm/vllm_kv.hpp"
#include "mlaplan/model/weights.hpp"

namespace {

std::string largest_v41() {
  constexpr std::int64_t n = 4096, d = 64;
  std::string r;
  for (std::int64_t i = 0; i < n + d; ++i) {
    if (i) r += ", ";
    r += i >= n || i < 2 ? "0" : (i % 2 == 0 ? "2" : "1");
  }
  return R"({"model_type": "deepseek_v41_text", "num_hidden_layers": 4096, "num_nextn_predict_layers": 64, )"
         R"("compress_ratios": [)" +
         r + "]}";
}

struct Fixture {
  mlaplan::ModelConfig cfg = mlaplan::parse_config(largest_v41(), "largest-v41.json");
  mlaplan::Topology topo = mlaplan::build_topology(cfg);
  std::shared_ptr<const mlaplan::WeightsReport> weights =
      std::make_shared<const mlaplan::WeightsReport>(mlaplan::compute_weights(cfg, {false}));
  std::shared_ptr<const std::vector<mlaplan::ShardKind>> kinds =
      std::make_shared<const std::vector<mlaplan::ShardKind>>(
          mlaplan::shard_kinds(*weights, mlaplan::EngramPlacement::gpu));
  mlaplan::Target target = mlaplan::resolve_target({std::string("h200"), {}, {}, {}});
  mlaplan::PlanRequest cell() const {
    mlaplan::PlanRequest r;
    r.target.gpu = "h200";
    r.schedules = false;
    r.suggestions = false;
    r.weights = weights;
    r.weights_how = "derived from config.json";
    r.shard_kinds = kinds;
    return r;
  }
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

// One matrix cell: make_plan_on with the weights given, no schedules, no suggestions.
void BM_matrix_cell(benchmark::State& state) {
  const Fixture& f = fixture();
  const mlaplan::PlanRequest req = f.cell();
  for (auto _ : state) {
    mlaplan::Plan p = mlaplan::make_plan_on(f.cfg, f.topo, req);
    benchmark::DoNotOptimize(p.exit_code);
  }
}

// The same cell as `check --matrix` runs it: the placement shared with the config's other cells
// of the layout (PlacementMemo), so it is made once.
void BM_matrix_cell_shared_placement(benchmark::State& state) {
  const Fixture& f = fixture();
  mlaplan::PlanRequest req = f.cell();
  req.placements = std::make_shared<mlaplan::PlacementMemo>();
  for (auto _ : state) {
    mlaplan::Plan p = mlaplan::make_plan_on(f.cfg, f.topo, req);
    benchmark::DoNotOptimize(p.exit_code);
  }
}

void BM_plan_layout(benchmark::State& state) {
  const Fixture& f = fixture();
  for (auto _ : state) {
    mlaplan::Layout l = mlaplan::plan_layout(f.cfg, f.topo, f.target, {}, mlaplan::Strictness::lenient);
    benchmark::DoNotOptimize(l.objects.data());
  }
}

void BM_vllm_kv_configs(benchmark::State& state) {
  const Fixture& f = fixture();
  const mlaplan::Layout l = mlaplan::plan_layout(f.cfg, f.topo, f.target, {}, mlaplan::Strictness::lenient);
  for (auto _ : state) {
    std::vector<mlaplan::VllmKvConfig> k = mlaplan::vllm_kv_configs(f.cfg, f.topo, l, {});
    benchmark::DoNotOptimize(k.data());
  }
}

// One pipeline stage per layer (--pipeline-parallel-size 4096): the stages share the model's KV
// grouping instead of each holding a copy of it (4,098 groups here), and V4.1's refusal of the
// cut finds the pipeline sizes that work in one pass. The plan as `mla-plan CONFIG --pp 4096` makes it.
void BM_plan_pp4096(benchmark::State& state) {
  const Fixture& f = fixture();
  mlaplan::PlanRequest req;
  req.target.gpu = "h200";
  req.layout.pipeline_parallel_size = 4096;
  for (auto _ : state) {
    mlaplan::Plan p = mlaplan::make_plan_on(f.cfg, f.topo, req);
    benchmark::DoNotOptimize(p.exit_code);
  }
}

void BM_vllm_kv_configs_pp4096(benchmark::State& state) {
  const Fixture& f = fixture();
  mlaplan::LayoutOptions o;
  o.pipeline_parallel_size = 4096;
  const mlaplan::Layout l = mlaplan::plan_layout(f.cfg, f.topo, f.target, o, mlaplan::Strictness::lenient);
  for (auto _ : state) {
    std::vector<mlaplan::VllmKvConfig> k = mlaplan::vllm_kv_configs(f.cfg, f.topo, l, {});
    benchmark::DoNotOptimize(k.data());
  }
}

void BM_place_weights(benchmark::State& state) {
  const Fixture& f = fixture();
  for (auto _ : state) {
    mlaplan::Placement p = mlaplan::place_weights(f.cfg, *f.weights, {}, *f.kinds);
    benchmark::DoNotOptimize(p.max_rank_bytes);
  }
}

void BM_weights(benchmark::State& state) {
  const Fixture& f = fixture();
  for (auto _ : state) {
    mlaplan::WeightsReport w = mlaplan::compute_weights(f.cfg, {false});
    benchmark::DoNotOptimize(w.groups.data());
  }
}

}  // namespace

/// The layout search of `mla-plan CONFIG --gpus N` on a bundled config (docs/launch.md, "Speed"):
/// range(0) the config (0 V4.1-Flash, 1 V4-Flash, 2 V3.2), range(1) the GPUs. Reads config.json
/// once; each iteration searches (the checkpoint's weights from config.json included) and plans
/// the best, as answer_question() does without the sweep.
void BM_search(benchmark::State& state) {
  static const char* const kConfigs[] = {"deepseek-v4.1-flash.json", "deepseek-v4-flash.json", "deepseek-v3.2.json"};
  const mlaplan::ModelConfig cfg =
      mlaplan::load_config(std::string(MLAPLAN_SOURCE_DIR) + "/configs/" + kConfigs[state.range(0)]);
  mlaplan::PlanQuestion q;
  mlaplan::SearchOptions so;
  so.gpus = state.range(1);
  q.search = so;
  q.extras = false;
  for (auto _ : state) {
    auto p = mlaplan::answer_question(cfg, mlaplan::PlanRequest{}, q);
    benchmark::DoNotOptimize(p);
  }
  state.SetLabel(std::string(kConfigs[state.range(0)]) + ", " + std::to_string(state.range(1)) + " GPUs");
}

BENCHMARK(BM_matrix_cell)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_search)->ArgsProduct({{0, 1, 2}, {8, 64}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_matrix_cell_shared_placement)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_layout)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_vllm_kv_configs)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_pp4096)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_vllm_kv_configs_pp4096)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_place_weights)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_weights)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();

// check --matrix as a library call (include/mlaplan/plan/matrix.hpp).
#include "mlaplan/plan/matrix.hpp"

#include <memory>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/engine/vllm/placement.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/topology.hpp"

namespace mlaplan {

ConfigMatrix plan_matrix(const ModelConfig& cfg, const PlanRequest& base, const std::vector<MatrixLayout>& layouts) {
  return plan_matrix(cfg, base, layouts, MatrixScope{});
}

ConfigMatrix plan_matrix(const ModelConfig& cfg, const PlanRequest& base, const std::vector<MatrixLayout>& layouts,
                         const MatrixScope& scope) {
  std::vector<std::string> gpus;
  for (const auto& g : scope.gpus) gpus.emplace_back(find_gpu_preset(g).id);
  if (gpus.empty()) {
    for (const auto& g : gpu_presets()) gpus.emplace_back(g.id);
  }
  std::vector<std::string> dtypes = scope.kv_cache_dtypes;
  if (dtypes.empty()) {
    dtypes.emplace_back("fp8_ds_mla");
    if (cfg.family == Family::deepseek_v41) dtypes.emplace_back("nvfp4_ds_mla");
  }
  ConfigMatrix m;
  // The topology depends on the config alone: built once for every cell (an error in it is each
  // cell's result, as when every cell built its own).
  std::optional<Topology> topology;
  std::optional<Error> topology_error;
  PlanWeights checkpoint;
  std::shared_ptr<const std::vector<ShardKind>> kinds;
  // The placement depends on the layout alone: made once per TP x DP for every GPU and kv dtype.
  const auto placements = std::make_shared<PlacementMemo>();
  try {
    topology = build_topology(cfg);
    // The checkpoint's weights depend on the config alone: read (and classified) once for every cell.
    checkpoint = load_plan_weights(cfg, base);
    kinds = std::make_shared<const std::vector<ShardKind>>(shard_kinds(*checkpoint.report, base.layout.engram));
  } catch (const Error& e) {
    topology_error = e;
  }
  for (const auto& g : gpus) {
    for (const std::string& dtype : dtypes) {
      for (const auto& l : layouts) {
        MatrixCell c;
        c.gpu = g;
        c.kv_cache_dtype = dtype;
        c.tensor_parallel_size = l.tensor_parallel_size;
        c.data_parallel_size = l.data_parallel_size;
        c.gpus = l.tensor_parallel_size * l.data_parallel_size * base.layout.pipeline_parallel_size;
        try {
          if (topology_error) throw *topology_error;
          PlanRequest req = base;
          req.target = TargetRequest{};
          req.target.gpu = g;
          req.resolved_target.reset();
          req.layout.kv_cache_dtype = dtype;
          req.layout.tensor_parallel_size = l.tensor_parallel_size;
          req.layout.data_parallel_size = l.data_parallel_size;
          req.guards = PlanGuards{};
          req.suggestions = false;
          req.schedules = false;
          req.weights = checkpoint.report;
          req.weights_source = checkpoint.source;
          req.weights_how = checkpoint.how;
          req.shard_kinds = kinds;
          req.placements = placements;
          const auto r = make_plan_on(cfg, *topology, req);
          c.exit_code = r.exit_code;
          if (r.layout && !backend_refusal(r)) c.backend = r.layout->backend;  // refused: vLLM runs none
          c.supported = r.exit_code == 0 && r.fit && r.fit->decided;
          if (r.fit) {
            c.maximum_concurrency = r.fit->total_concurrency;
            c.weights_bytes_per_gpu = r.fit->placement.max_rank_bytes;
          }
          if (c.supported) {
            c.result = "fits: " + format_fixed(c.maximum_concurrency, 2) + "x requests of " +
                       std::to_string(r.layout->max_model_len) + " tokens, weights " +
                       format_gib(c.weights_bytes_per_gpu) + " per GPU";
          } else if (r.fit && r.fit->placement.ok() && r.exit_code == exit_code(ErrorKind::does_not_fit)) {
            const std::int64_t avail = r.fit->vllm.available_bytes;
            c.result = "does not fit: weights " + format_gib(c.weights_bytes_per_gpu) + " per GPU leave " +
                       (avail > 0 ? format_gib(avail) : "nothing (short by " + format_gib(-avail) + ")") +
                       " for the KV cache; one request of " + std::to_string(r.layout->max_model_len) +
                       " tokens needs " + format_gib(r.fit->vllm.needed_bytes);
          } else if (r.fit && !r.fit->decided && r.exit_code == 0) {
            c.result = r.fit->verdict;
          } else {
            c.result = r.exit_message;
          }
        } catch (const Error& e) {
          c.exit_code = exit_code(e.kind());
          c.result = e.what();
        }
        m.cells.push_back(std::move(c));
      }
    }
  }
  if (checkpoint.incomplete) {
    m.incomplete = checkpoint.incomplete->finding();
    m.exit_code = exit_code(ErrorKind::invalid_config);
  }
  return m;
}

}  // namespace mlaplan

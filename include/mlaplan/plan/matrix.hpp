#pragma once
// `check --matrix` as a library call: one config planned on every GPU preset x kv-cache dtype x
// parallel layout, each cell as make_plan_on() plans it (the fit with vLLM's numbers, no guard,
// no suggestion), with the work that depends on the config alone done once: the topology, the
// checkpoint's weights and their shard kinds, and each layout's placement (shared by every GPU
// and dtype of that layout through a PlacementMemo). The CLI renders the cells (app/commands/cmd_check.cpp).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mlaplan/rules/backends.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/plan/plan.hpp"
#include "mlaplan/rules/rules.hpp"

namespace mlaplan {

/// One parallel layout of the matrix.
struct MatrixLayout {
  std::int64_t tensor_parallel_size = 1;
  std::int64_t data_parallel_size = 1;
};

/// One cell: a GPU preset, a kv-cache dtype and a layout.
struct MatrixCell {
  std::string gpu;             ///< the preset's id
  std::string kv_cache_dtype;  ///< fp8_ds_mla, or nvfp4_ds_mla (V4.1 only)
  std::int64_t tensor_parallel_size = 1;
  std::int64_t data_parallel_size = 1;
  std::int64_t gpus = 1;             ///< TP x DP x PP: the GPUs the cell's layout takes
  std::optional<BackendId> backend;  ///< the backend vLLM runs; none when it refuses every one or planning failed
  bool supported = false;            ///< planned with exit 0 and a decided fit
  int exit_code = 0;                 ///< the plan's, or the error's
  double maximum_concurrency = 0;    ///< the fit's total concurrency (all DP ranks)
  std::int64_t weights_bytes_per_gpu = 0;
  std::string result;  ///< supported: "fits: ..."; otherwise why not (the plan's words or the error's message)
};

/// One config's matrix.
struct ConfigMatrix {
  std::vector<MatrixCell> cells;  ///< GPU presets in order, then dtypes, then layouts
  /// An incomplete checkpoint: the cells are planned with the config's weights, and the config
  /// fails (exit 2) with this finding, as plan and check do.
  std::optional<Finding> incomplete;
  int exit_code = 0;  ///< 2 for an incomplete checkpoint, else 0 (a cell's code is the cell's)
};

/// The matrix of `config` over the GPU presets (gpu_presets() order), the kv-cache dtypes its
/// family's FlashMLA backends store (fp8_ds_mla; nvfp4_ds_mla for V4.1) and `layouts`. `base` is
/// the request every cell starts from; each cell replaces its target (the preset alone), its kv
/// dtype, TP and DP, and plans without guards or suggestions. Throws nothing for a cell: an
/// error is that cell's result.
ConfigMatrix plan_matrix(const ModelConfig& config, const PlanRequest& base, const std::vector<MatrixLayout>& layouts);

/// What a matrix covers beyond its layouts: the GPU presets (empty: every preset, in
/// gpu_presets() order) and the kv-cache dtypes (empty: the ones the family's FlashMLA backends
/// store).
struct MatrixScope {
  std::vector<std::string> gpus;
  std::vector<std::string> kv_cache_dtypes;
};
/// plan_matrix() over `scope` (check --matrix --gpu h200,b200 --kv-cache-dtype fp8_ds_mla).
/// Error(usage) for a GPU that is not a preset.
ConfigMatrix plan_matrix(const ModelConfig& config, const PlanRequest& base, const std::vector<MatrixLayout>& layouts,
                         const MatrixScope& scope);

}  // namespace mlaplan

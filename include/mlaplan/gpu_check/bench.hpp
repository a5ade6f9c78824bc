#pragma once
// `mla-plan bench`: the project's sparse decode timed on the local GPU for each layer type of a
// config (docs/perf.md, docs/cli.md). The shapes come from the planned layout (row formats, rows
// per page, index widths, query heads per rank); the timing itself is a device's job, an
// interface here so that the orchestration and the arithmetic are testable without a GPU.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mlaplan/model/config.hpp"
#include "mlaplan/cache/decode_mode.hpp"
#include "mlaplan/hardware/formats.hpp"
#include "mlaplan/cache/layout.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/rules/rules.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/topology.hpp"

namespace mlaplan {

/// One timed shape: every request attends its full widths (topk + extra_topk distinct rows), the
/// convention of FlashMLA's published decode times.
struct BenchShape {
  LayerType type = LayerType::swaonly;
  std::int64_t num_layers = 0;  ///< layers of the config with this type
  std::int32_t b = 1;           ///< requests (one query token each)
  std::int32_t s_q = 1;
  /// The heads the kernel runs: what the backend runs (decode_heads()): padded to 64 or 128, or
  /// 8 / 16 unpadded (TRITON_MLA_SPARSE_DSV41, mla-plan's small-head kernel).
  std::int32_t h_q = 64;
  /// For 8 or 16 local heads, the other head count bench also times the shape at
  /// (DecodeHeads::compare_h_q: 64 where h_q is unpadded, the local heads where h_q pads them); 0: none.
  std::int32_t compare_h_q = 0;
  RowFormatId main_format = RowFormatId::fp8_ds_mla_v4;
  std::int32_t main_page = 0;  ///< rows per page
  std::int32_t topk = 0;
  bool has_extra = false;
  RowFormatId extra_format = RowFormatId::fp8_ds_mla_v4;
  std::int32_t extra_page = 0;
  std::int32_t extra_topk = 0;
  DecodeModeChoice mode;    ///< the plan the kernels run (choose_decode_mode)
  double flops = 0;         ///< 2 h_q b s_q (topk + extra_topk) (d_qk + 512)
  double bytes = 0;         ///< rows x row bytes x b s_q + q (d_qk) + out (512), bf16
  std::string unsupported;  ///< "" when the project's kernels cover the formats
};

/// The two ceilings of the floor, measured by the same run as the timings.
struct BenchCeilings {
  double copy_gbps = 0;  ///< device copy, bytes read + written per second / 1e9
  std::string copy_how;
  double matmul_tflops = 0;  ///< 0 when it could not be measured
  std::string matmul_how;
};

struct BenchRunOptions {
  std::int32_t replays = 60;  ///< timed CUDA-graph replays (median reported)
  std::int32_t warmup = 5;
  std::uint64_t seed = 2026;
};

/// What a device measures for one shape.
struct BenchTiming {
  double us_per_call = 0;         ///< median: scheduler (split_kv) + decode + combine (split_kv)
  double us_decode = 0;           ///< median: decode + combine, no scheduler
  double min_us = 0;              ///< minimum of the decode + combine replays
  std::int32_t num_sm_parts = 0;  ///< partitions of the split_kv plan
  /// Requests the split_kv plan splits (planned with kSplitKvFixedOverhead, not FlashMLA's 5).
  std::int32_t split_requests = 0;
};

/// Something that times the kernels: the CUDA device (kernels/), or a fake in tests.
class BenchDevice {
 public:
  virtual ~BenchDevice() = default;
  virtual BenchCeilings ceilings() = 0;
  /// "" when the device can run the shape, else why not.
  virtual std::string unsupported_reason(const BenchShape& shape) const = 0;
  virtual BenchTiming time(const BenchShape& shape, const BenchRunOptions& options) = 0;
};

/// The same shape timed at the other head count (BenchShape::compare_h_q): the local 8 or 16
/// heads unpadded on the small-head kernel against them padded to 64.
struct BenchHeadsComparison {
  BenchShape shape;  ///< the row's shape at compare_h_q (its flops, bytes and mode for those heads)
  bool ran = false;
  std::string reason;  ///< why it did not run
  BenchTiming timing;
  std::int32_t unpadded_h_q = 0;  ///< 8 or 16
  std::int32_t padded_h_q = 0;    ///< 64
  double unpadded_us = 0;         ///< us_per_call of the unpadded shape (0: not timed)
  double padded_us = 0;           ///< us_per_call of the padded shape (0: not timed)
  /// unpadded_us / padded_us: the share of the padded time the unpadded kernel takes (0: either
  /// was not timed).
  double unpadded_over_padded = 0;
};

/// One line of the result.
struct BenchRow {
  BenchShape shape;
  bool ran = false;
  std::string reason;  ///< why it did not run
  BenchTiming timing;
  double tflops = 0;          ///< flops / us_per_call
  double gbps = 0;            ///< bytes / us_per_call
  double bytes_floor_us = 0;  ///< bytes at the measured copy rate
  double flop_floor_us = 0;   ///< flops at the measured matmul rate (0: rate unknown)
  double floor_us = 0;        ///< the larger of the two
  double floor_fraction = 0;  ///< floor_us / us_per_call
  /// The shape at the other head count, where the local heads are 8 or 16 (run_bench() times it
  /// after the row).
  std::optional<BenchHeadsComparison> heads;
};

struct BenchOptions {
  std::string kv_cache_dtype = "auto";
  std::vector<std::int64_t> batches = {1, 8, 32, 64, 128, 256};
  std::vector<LayerType> types;      ///< empty: every type of the config
  LayoutOptions layout;              ///< TP etc.; kv_cache_dtype is set from the field above
  std::optional<std::string> dtype;  ///< model dtype for the rules
  bool force = false;                ///< time even what the backend rules reject
  BenchRunOptions run;
  std::function<void(const std::string&)> progress;
};

struct BenchReport {
  Target target;
  std::string kv_cache_dtype;  ///< resolved
  std::vector<RuleResult> rules;
  bool forced = false;  ///< the rules reject the combination; timed under --force
  BenchCeilings ceilings;
  std::vector<BenchRow> rows;
  int exit_code = 0;  ///< 0 something ran; 3 nothing could run
  std::string exit_message;
};

/// Error(usage) naming the flag when --batch is empty, has more than max_batch_sizes entries or
/// an entry outside 1..max_batch.
void check_bench_batches(const std::vector<std::int64_t>& batches);
/// check_bench_batches, plus --replays and --warmup in range.
void check_bench_options(const BenchOptions& options);
/// Error(usage) for a --layer-type the config lacks, naming the types it has.
void check_bench_layer_types(const Topology& topo, const std::vector<LayerType>& types);
/// Every flag value of bench that needs no device: check_bench_options(), the layer types
/// (check_bench_layer_types()), the kv dtype and the layout flags (check_layout_flags()). The CLI
/// runs it before it looks for a GPU; run_bench() runs it first too.
void check_bench_flags(const ModelConfig& cfg, const Topology& topo, const BenchOptions& options);

/// The shapes of every layer type present (or of `types`) x `batches` over a planned layout.
/// Error(usage) for batch sizes outside 1..BenchLimits::max_batch or a type the config lacks.
std::vector<BenchShape> bench_shapes(const ModelConfig& cfg, const Topology& topo, const Layout& layout,
                                     const std::vector<std::int64_t>& batches, const std::vector<LayerType>& types);

/// Fills a row's rates and floors from its shape, timing and the ceilings.
void finish_bench_row(BenchRow& row, const BenchCeilings& ceilings);

/// `shape` at `h_q` query heads: the same widths and caches, flops, bytes and the decode mode
/// (choose_decode_mode on `num_sms`) recomputed for h_q, compare_h_q cleared.
BenchShape bench_shape_with_heads(const BenchShape& shape, std::int32_t h_q, std::int64_t num_sms);

/// Fills the comparison's unpadded / padded times and their ratio from the row's timing and the
/// comparison's (the row is unpadded when its h_q is 8 or 16).
void finish_bench_heads(const BenchRow& row, BenchHeadsComparison& heads);

/// Plans the layout, evaluates the rules, measures the ceilings and times every shape.
BenchReport run_bench(const ModelConfig& cfg, const Topology& topo, const Target& target, BenchDevice& device,
                      const BenchOptions& options);

}  // namespace mlaplan

#pragma once
// On-GPU verification of a config (docs/verify.md): for each kv dtype and layer type, a decode
// problem over exactly the planned layout (row formats, rows per page, padded page strides) and
// the planned tile-scheduler inputs, built here on the host with random data; a device runs the
// quantize, scheduler and decode kernels on it; the results are judged against the host
// quantizer, the host scheduler and the host reference. The device is an interface, so the
// orchestration is testable without a GPU.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mlaplan/config.hpp"
#include "mlaplan/decode.hpp"
#include "mlaplan/formats.hpp"
#include "mlaplan/layout.hpp"
#include "mlaplan/reference.hpp"
#include "mlaplan/rules.hpp"
#include "mlaplan/scheduler.hpp"
#include "mlaplan/target.hpp"
#include "mlaplan/topology.hpp"

namespace mlaplan {

/// One paged cache of a verification problem, held on the host.
struct VerifyCache {
  RowFormatId format = RowFormatId::fp8_ds_mla_v4;
  std::int32_t page_block_size = 0;      ///< rows per page (the layout's)
  std::int64_t page_stride = 0;          ///< padded page bytes (the layout's)
  std::int64_t num_pages = 0;
  std::vector<std::uint16_t> latents;    ///< [rows written, 512] bf16 bit patterns
  std::vector<std::int64_t> slots;       ///< [rows written] global row ids
  std::vector<std::uint8_t> expected;    ///< host quantizer's pages: 0xFF, then the rows at `slots`
};

/// Everything one decode check needs, on the host (shapes of the kernels' DecodeParams).
struct VerifyProblem {
  std::int32_t b = 0;
  std::int32_t s_q = 1;
  std::int32_t h_q = 64;
  std::vector<std::uint16_t> q;          ///< [b, s_q, h_q, 512] bf16
  VerifyCache main;
  std::vector<std::int32_t> indices;     ///< [b, s_q, topk]
  std::int32_t topk = 0;
  std::vector<std::int32_t> topk_length; ///< [b]
  bool has_extra = false;
  VerifyCache extra;
  std::vector<std::int32_t> extra_indices;      ///< [b, s_q, extra_topk]
  std::int32_t extra_topk = 0;
  std::vector<std::int32_t> extra_topk_length;  ///< [b]
  std::vector<float> attn_sink;          ///< [h_q]
  float softmax_scale = 0.044194173824159216f;
  SchedInput sched_input;                ///< what the GPU scheduler is given
  SchedPlan host_plan;                   ///< the host plan it must equal
  std::int32_t timing_iterations = 20;
};

/// What a device returns for a problem.
struct VerifyRun {
  std::vector<std::uint8_t> main_bytes;   ///< the main cache after the quantize kernel
  std::vector<std::uint8_t> extra_bytes;
  std::vector<std::int32_t> records;      ///< [P * 8] from the GPU scheduler
  std::vector<std::int32_t> num_splits;   ///< [b + 1]
  std::vector<std::uint16_t> out;         ///< [b, s_q, h_q, 512] bf16
  std::vector<float> lse;                 ///< [b, s_q, h_q]
  double decode_us = 0;                   ///< median time of decode + combine
};

/// Something that runs the kernels: the CUDA device (kernels/), or a fake in tests.
class VerifyDevice {
 public:
  virtual ~VerifyDevice() = default;
  /// Runs quantize, scheduler, decode + combine. Throws mlaplan::Error on a device fault
  /// (verify_failed with the CUDA error name, no_gpu when the device is gone).
  virtual VerifyRun run(const VerifyProblem& problem) = 0;
  /// Whether the device's kernels handle this (main, extra) format pair; "" if yes, else why not.
  virtual std::string unsupported_reason(const VerifyProblem& problem) const = 0;
};

enum class VerifyStatus { pass, fail, unsupported };
std::string_view to_string(VerifyStatus s);

/// One cell of the matrix: a kv dtype x layer type x h_q.
struct VerifyCell {
  std::string kv_cache_dtype;
  LayerType type = LayerType::swaonly;
  std::int32_t h_q = 0;
  VerifyStatus status = VerifyStatus::unsupported;
  bool forced = false;                   ///< ran although the backend rules reject it (--force)
  std::string reason;                    ///< why unsupported / failed; "" on pass
  // what ran
  std::string main_format, extra_format;
  std::int32_t main_page = 0, extra_page = 0;
  std::int64_t main_stride = 0, extra_stride = 0;
  std::int32_t topk = 0, extra_topk = 0;
  std::int32_t b = 0;
  std::string kernel;                    ///< scheduler kernel of the plan
  // results
  bool ran = false;
  bool quantize_match = false;
  std::int64_t quantize_first_diff = -1; ///< first differing byte, -1 if equal
  bool schedule_match = false;
  std::string schedule_message;
  DecodeComparison decode;
  double decode_us = 0;
};

struct VerifyOptions {
  std::vector<std::string> kv_cache_dtypes;  ///< empty: every dtype the backend lists for the family
  BatchOptions batch;                        ///< empty: the default mix
  LayoutOptions layout;                      ///< TP etc.; kv_cache_dtype is set per cell
  std::optional<std::string> dtype;          ///< model dtype for the rules
  bool force = false;
  std::uint64_t seed = 20261130;
  std::int32_t timing_iterations = 20;
  /// Progress lines ("verify: fp8_ds_mla c1a ...") while kernels run; may be empty.
  std::function<void(const std::string&)> progress;
};

struct VerifyReport {
  Target target;
  std::vector<RuleResult> rules;         ///< the rules with the default kv dtype
  std::vector<VerifyCell> cells;
  DecodeBatch batch;
  int exit_code = 0;                     ///< 0 all supported pass, 3 nothing can run, 5 a failure
  std::string exit_message;
};

/// Every kv dtype the backend lists for a family (resolved names): V4.1 fp8_ds_mla, nvfp4_ds_mla;
/// V4.0 fp8_ds_mla; V3.2 fp8_ds_mla.
std::vector<std::string> backend_kv_dtypes(Family family);

/// The default batch mix: 37 requests (not a multiple of any partition count) with context
/// lengths from 1 to 65536 (capped by max_model_len), short, window-edge and long ones.
BatchOptions default_verify_batch(std::int64_t max_model_len);

/// Checks that the problem of `schedule` stays inside VerifyLimits' host-memory bounds: Error(usage)
/// past max_decode_tokens, Error(unsupported) past max_index_slots or max_attended_rows (per cache),
/// each naming the value and the limit. build_verify_problem() calls it before allocating anything.
void check_verify_size(const LayerTypeSchedule& schedule);

/// Builds the decode problem of one layer type over a planned layout (random data from `seed`).
/// Throws Error(unsupported) when the layout has no decode for the type (e.g. no kernel) or the
/// problem is past VerifyLimits.
VerifyProblem build_verify_problem(const ModelConfig& cfg, const Topology& topo, const Layout& layout,
                                   const LayerTypeSchedule& schedule, std::uint64_t seed,
                                   std::int32_t timing_iterations);

/// Judges a device's run against the problem's host expectations.
void judge_verify_run(const VerifyProblem& problem, const VerifyRun& run, VerifyCell& cell);

/// Every option of run_verify() that needs no device: timing_iterations, the layout flags
/// (check_layout_flags()), the kv dtypes, the batch against max_model_len (make_decode_batch())
/// and VerifyLimits' decode tokens. Error(usage) naming the flag. The CLI runs it before it looks
/// for a GPU; run_verify() runs it first too.
void check_verify_options(const ModelConfig& cfg, const Topology& topo, const VerifyOptions& options);

/// Runs the whole verification on `target` with `device`.
VerifyReport run_verify(const ModelConfig& cfg, const Topology& topo, const Target& target, VerifyDevice& device,
                        const VerifyOptions& options);

/// A device that runs everything on the host (host quantizer, host scheduler, host reference):
/// for tests of the orchestration. `perturb` may alter a run (to test the FAIL paths).
std::unique_ptr<VerifyDevice> make_host_verify_device(std::function<void(VerifyRun&)> perturb = {});

}  // namespace mlaplan

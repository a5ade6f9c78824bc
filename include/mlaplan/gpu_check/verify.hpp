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
#include <string_view>
#include <vector>

#include "mlaplan/model/config.hpp"
#include "mlaplan/cache/decode.hpp"
#include "mlaplan/cache/decode_mode.hpp"
#include "mlaplan/hardware/formats.hpp"
#include "mlaplan/cache/layout.hpp"
#include "mlaplan/gpu_check/engine_probe.hpp"
#include "mlaplan/gpu_check/reference.hpp"
#include "mlaplan/rules/rules.hpp"
#include "mlaplan/cache/scheduler.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/topology.hpp"

namespace mlaplan {

/// One paged cache of a verification problem, held on the host.
struct VerifyCache {
  RowFormatId format = RowFormatId::fp8_ds_mla_v4;
  std::int32_t page_block_size = 0;  ///< rows per page (the layout's)
  std::int64_t page_stride = 0;      ///< padded page bytes (the layout's)
  std::int64_t num_pages = 0;
  std::vector<std::uint16_t> latents;  ///< [rows written, row dims] bf16 bit patterns (576 for fp8_ds_mla_v32)
  std::vector<std::int64_t> slots;     ///< [rows written] global row ids
  std::vector<std::uint8_t> expected;  ///< host quantizer's pages: 0xFF, then the rows at `slots`
};

/// Everything one decode check needs, on the host (shapes of the kernels' DecodeParams).
struct VerifyProblem {
  std::int32_t b = 0;
  std::int32_t s_q = 1;
  std::int32_t h_q = 64;
  std::int32_t d_qk = 512;       ///< the rows' dims: 512, or 576 (V3.2's 656-byte rows)
  std::vector<std::uint16_t> q;  ///< [b, s_q, h_q, d_qk] bf16
  VerifyCache main;
  std::vector<std::int32_t> indices;  ///< [b, s_q, topk]
  std::int32_t topk = 0;
  std::vector<std::int32_t> topk_length;  ///< [b]
  bool has_extra = false;
  VerifyCache extra;
  std::vector<std::int32_t> extra_indices;  ///< [b, s_q, extra_topk]
  std::int32_t extra_topk = 0;
  std::vector<std::int32_t> extra_topk_length;  ///< [b]
  std::vector<float> attn_sink;                 ///< [h_q]
  float softmax_scale = 0.044194173824159216f;
  SchedInput sched_input;  ///< what the GPU scheduler is given
  SchedPlan host_plan;     ///< the host plan it must equal (in every mode)
  std::int32_t timing_iterations = 20;
  /// How the decode runs: the planner's choice for the batch (LayerTypeSchedule::mode), or the
  /// mode --decode-mode asks for. The scheduler runs and is compared whatever the mode.
  DecodeMode mode = DecodeMode::split_kv;
};

/// How a decode call ran, as the device reported it (the kernels' DecodeLaunch in plain fields:
/// the core has no CUDA).
struct VerifyLaunch {
  bool reported = false;                   ///< false: the device said nothing (nothing ran)
  DecodeMode mode = DecodeMode::split_kv;  ///< as run: cluster_split runs as one_pass where no cluster fits
  std::string kernel;                      ///< "generic", "sm90_ws" (the fake device: "host")
  std::uint32_t grid_x = 1, grid_y = 1, grid_z = 1;
  std::uint32_t cluster_x = 1;  ///< cluster_split's CTAs per request (clusters along x)
  std::uint32_t cluster_z = 1;  ///< 2: the 2-CTA pair (clusters along z)
  std::uint32_t block = 0;      ///< threads per CTA
  bool pair = false;            ///< the 2-CTA pair sharing the dequantisation (h_q 128)
  bool pdl = false;             ///< programmatic dependent launch after the scheduler
  bool combine = false;         ///< the combine kernel ran after (split_kv)
  std::string fallback;         ///< "" or what was asked, could not run here, and what ran
  std::string description;      ///< DecodeLaunch::describe()
};

/// What a device returns for a problem.
struct VerifyRun {
  std::vector<std::uint8_t> main_bytes;  ///< the main cache after the quantize kernel
  std::vector<std::uint8_t> extra_bytes;
  std::vector<std::int32_t> records;     ///< [P * 8] from the GPU scheduler
  std::vector<std::int32_t> num_splits;  ///< [b + 1]
  std::vector<std::uint16_t> out;        ///< [b, s_q, h_q, 512] bf16
  std::vector<float> lse;                ///< [b, s_q, h_q]
  double decode_us = 0;                  ///< median time of decode + combine
  VerifyLaunch launch;                   ///< the decode launch that ran (the timed runs run the same)
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

/// One cell of the matrix: a kv dtype x layer type x h_q x decode mode.
struct VerifyCell {
  std::string kv_cache_dtype;
  LayerType type = LayerType::swaonly;
  std::int32_t h_q = 0;
  VerifyStatus status = VerifyStatus::unsupported;
  bool forced = false;  ///< ran although the backend rules reject it (--force)
  std::string reason;   ///< why unsupported / failed; "" on pass
  // what ran
  std::string main_format, extra_format;
  std::int32_t main_page = 0, extra_page = 0;
  std::int64_t main_stride = 0, extra_stride = 0;
  std::int32_t topk = 0, extra_topk = 0;
  std::int32_t b = 0;
  std::string kernel;                      ///< scheduler kernel of the plan
  std::optional<DecodeMode> planned_mode;  ///< the planner's choice for the batch; nullopt: no plan
  std::string planned_reason;              ///< why (DecodeModeChoice::reason)
  std::optional<DecodeMode> mode;          ///< the mode asked of the device; nullopt: planned, and no plan
  VerifyLaunch launch;                     ///< what ran (launch.mode: the mode as run), when ran
  // results
  bool ran = false;
  bool quantize_match = false;
  std::int64_t quantize_first_diff = -1;  ///< first differing byte, -1 if equal
  bool schedule_match = false;
  std::string schedule_message;
  DecodeComparison decode;
  double decode_us = 0;
  /// verify --engine-kernels: the engine's op on this cell's bytes (run once per problem: the
  /// cells of one layer type in several modes share it). Absent without --engine-kernels, or where
  /// mla-plan's own kernels did not run the cell.
  std::optional<EngineCellResult> engine;
};

struct VerifyOptions {
  std::vector<std::string> kv_cache_dtypes;  ///< empty: every dtype the backend lists for the family
  BatchOptions batch;                        ///< empty: the default mix
  LayoutOptions layout;                      ///< TP etc.; kv_cache_dtype is set per cell
  std::optional<std::string> dtype;          ///< model dtype for the rules
  bool force = false;
  std::uint64_t seed = 20261130;
  std::int32_t timing_iterations = 20;
  /// The decode modes each cell runs in: empty (--decode-mode planned) the planner's choice per
  /// layer type; else one cell per mode listed (--decode-mode all: split_kv, one_pass, cluster_split).
  std::vector<DecodeMode> decode_modes;
  /// Progress lines ("verify: fp8_ds_mla c1a ...") while kernels run; may be empty.
  std::function<void(const std::string&)> progress;
  /// --engine-kernels: also run the engine's own op on every cell's bytes through the probe
  /// (engine_probe.hpp); its device_index is set per device by run_verify_device(s).
  std::optional<EngineProbeOptions> engine;
};

struct VerifyReport {
  Target target;
  std::vector<RuleResult> rules;  ///< the rules with the default kv dtype
  std::vector<VerifyCell> cells;
  DecodeBatch batch;
  /// 0 all supported pass, 3 nothing can run, 5 a failure; with --engine-kernels combined with
  /// the engine's results (engine_exit_code(): 5 a failure, 6 the engine's kernels cannot run here)
  int exit_code = 0;
  std::string exit_message;
};

/// Every kv dtype the backend lists for a family (resolved names): V4.1 fp8_ds_mla, nvfp4_ds_mla;
/// V4.0 fp8_ds_mla; V3.2 fp8_ds_mla.
std::vector<std::string> backend_kv_dtypes(Family family);

/// The default batch mix: 37 requests (not a multiple of any partition count) with context
/// lengths from 1 to 65536 (capped by max_model_len - K, so that the last speculative position
/// stays inside the model), short, window-edge and long ones, each decoding 1 + K tokens with
/// K = `spec_tokens` (--spec-tokens: the same K as the layout's, as plan's default batch has).
BatchOptions default_verify_batch(std::int64_t max_model_len, std::int64_t spec_tokens = 0);

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

/// The fp64 host reference of a problem's decode, over the host-dequantised caches.
RefDecodeOutput verify_reference(const VerifyProblem& problem);

/// Judges a device's run against the problem's host expectations (the reference computed here,
/// or given: one problem run in several modes is judged against one reference).
void judge_verify_run(const VerifyProblem& problem, const VerifyRun& run, VerifyCell& cell);
void judge_verify_run(const VerifyProblem& problem, const VerifyRun& run, const RefDecodeOutput& reference,
                      VerifyCell& cell);

/// The modes of --decode-mode VALUE: "planned" none (the planner's), "all" the three, or the one
/// named. Error(usage) naming --decode-mode, the value, the allowed values and the nearest one.
std::vector<DecodeMode> parse_verify_decode_modes(std::string_view value);
/// The values --decode-mode takes: planned, all, split_kv, one_pass, cluster_split.
const std::vector<std::string>& verify_decode_mode_values();

/// Every option of run_verify() that needs no device: timing_iterations, the layout flags
/// (check_layout_flags()), the kv dtypes, the batch against max_model_len (make_decode_batch())
/// and VerifyLimits' decode tokens. Error(usage) naming the flag. The CLI runs it before it looks
/// for a GPU; run_verify() runs it first too.
void check_verify_options(const ModelConfig& cfg, const Topology& topo, const VerifyOptions& options);

/// Runs the whole verification on `target` with `device`.
VerifyReport run_verify(const ModelConfig& cfg, const Topology& topo, const Target& target, VerifyDevice& device,
                        const VerifyOptions& options);

/// One GPU rank of a TP x DP layout (options.layout's tensor_parallel_size x data_parallel_size):
/// rank = dp_rank x TP + tp_rank, as vLLM numbers the ranks of DP attention.
struct VerifyRank {
  std::int64_t rank = 0;
  std::int64_t tp_rank = 0;
  std::int64_t dp_rank = 0;
  std::int64_t ranks = 1;    ///< TP x DP
  std::string text() const;  ///< "rank 3 of 8 (TP rank 1, DP rank 1)"
};

/// TP x DP of the options' layout (each >= 1, checked).
std::int64_t verify_rank_count(const VerifyOptions& options);

/// What rank `rank` of the layout runs: the same layout, so the same query heads per rank after
/// TP and their padding and the same replicated caches; its DP rank's share of the batch under DP
/// attention (requests i with i % DP == dp_rank, in their order: the batch as given, or the
/// default mix); and the seed advanced by the rank, so that every rank draws its own inputs.
/// Error(usage) for a rank outside 0 .. TP x DP - 1, or a batch with fewer requests than DP ranks
/// (naming both).
VerifyOptions verify_rank_options(const ModelConfig& cfg, const VerifyOptions& options, std::int64_t rank);
VerifyRank verify_rank(const VerifyOptions& options, std::int64_t rank);  ///< Error(usage) as above

/// One device of `verify --device all|0,1|0,0`: what it is, and how to open it.
struct VerifyDeviceEntry {
  int index = 0;
  std::string name;   ///< e.g. "NVIDIA H200"
  std::string label;  ///< how progress lines and messages name it: "device 0" ("device 0 #2" when listed again)
  Target target;      ///< the planning target of the device
  /// The rank of the layout this device runs (verify_rank_options); none: the whole batch, as on
  /// one GPU.
  std::optional<std::int64_t> rank;
  /// Opens the device's VerifyDevice; called on the device's own thread (a CUDA device's current
  /// device is per thread). May throw.
  std::function<std::unique_ptr<VerifyDevice>()> open;
};

/// What one device of run_verify_devices() gave.
struct VerifyDeviceReport {
  int index = 0;
  std::string name;
  std::string label;
  std::optional<VerifyRank> rank;  ///< the rank it ran, when it ran one
  VerifyReport report;             ///< its cells; empty when `error` is set
  std::string error;               ///< "" or what escaped: opening the device or run_verify threw
  int exit_code = 0;               ///< report.exit_code, or the error's exit code
  std::string exit_message;        ///< "" or the reason of a non-zero exit code
  double seconds = 0;              ///< wall time of the device's thread
};

struct VerifyMultiReport {
  std::vector<VerifyDeviceReport> devices;  ///< in the order they were listed
  int exit_code = 0;                        ///< the worst of the devices' (combine_exit_codes)
  std::string exit_message;                 ///< of the first device with that code, prefixed by its label
};

/// Runs run_verify() on every listed device at once, one thread per entry (a device listed twice
/// gets two threads and two VerifyDevice objects). check_verify_options() runs first, on the
/// calling thread (a bad option throws Error(usage) before any thread starts). An Error (or any
/// exception) in one thread is that device's result; the others still report. Progress lines
/// are prefixed with the entry's label and delivered whole, one at a time (a mutex).
VerifyMultiReport run_verify_devices(const ModelConfig& cfg, const Topology& topo,
                                     const std::vector<VerifyDeviceEntry>& devices, const VerifyOptions& options);
/// One device on this thread, as verify runs on one GPU: the report run_verify_devices() gives of
/// `device` alone, except that its progress lines are not prefixed with its label and an Error
/// (opening the device, a bad rank, run_verify()'s) escapes to the caller instead of becoming the
/// device's failure.
VerifyMultiReport run_verify_device(const ModelConfig& cfg, const Topology& topo, const VerifyDeviceEntry& device,
                                    const VerifyOptions& options);

/// A device that runs everything on the host (host quantizer, host scheduler, host reference):
/// for tests of the orchestration. `perturb` may alter a run (to test the FAIL paths). It reports
/// a launch of kernel "host" in the mode asked; with `cluster_kernel` false it has no cluster
/// kernel and runs cluster_split as one_pass, with the fallback said (as the generic kernel does).
std::unique_ptr<VerifyDevice> make_host_verify_device(std::function<void(VerifyRun&)> perturb = {},
                                                      bool cluster_kernel = true);

}  // namespace mlaplan

#pragma once
// Host-callable API of mla-plan's own CUDA kernels (docs/kernels.md). No CUDA types here: plain
// pointers, integers and structs, so the CLI and the tests can call the kernels without including
// CUDA headers. Every pointer in a params struct is a DEVICE pointer unless its comment says
// otherwise; its shape is in the comment. Errors are thrown as mlaplan::Error:
//   no_gpu        - no CUDA device, driver too old, unsupported architecture
//   usage         - a params struct that violates the documented shapes or limits
//   unsupported   - a combination the dispatch tables do not list
//   verify_failed - a CUDA call failed (the message names the call, the CUDA error and file:line)

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/cache/decode_mode.hpp"

namespace mlaplan::kernels {

// ------------------------------------------------------------------------------------------------
// Device checks

/// Number of CUDA devices; 0 when there is none or no usable driver (never throws).
int device_count();

/// Why the kernels cannot run on this machine, each cause apart (verify and bench say which).
enum class DeviceProblem {
  none,            ///< at least one CUDA device
  no_driver,       ///< no NVIDIA driver (the runtime reports driver version 0)
  driver_too_old,  ///< a driver older than this build's CUDA runtime
  no_device,       ///< a driver, but no CUDA device
  other,           ///< another CUDA error while counting the devices (DeviceProbe::detail)
};

/// What this machine's CUDA driver and runtime say, asked once (never throws).
struct DeviceProbe {
  DeviceProblem problem = DeviceProblem::none;
  int driver_version = 0;   ///< cudaDriverGetVersion: 13000 for CUDA 13.0; 0 without a driver
  int runtime_version = 0;  ///< cudaRuntimeGetVersion of this build
  int count = 0;            ///< CUDA devices
  std::string detail;       ///< the CUDA error of the device count, if any ("cudaErrorNoDevice: ...")
};
DeviceProbe probe_devices();

/// The one sentence for a probe's problem ("" for none), for `command` (verify, bench). Pure.
std::string device_problem_message(const DeviceProbe& probe, std::string_view command);

/// The sentence for a device whose compute capability no compiled kernel targets. Pure.
std::string unsupported_device_message(int index, std::string_view name, int cc_major, int cc_minor);

/// What the CLI prints about a device.
struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  std::int64_t global_mem_bytes = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t smem_per_block_optin = 0;  ///< largest dynamic shared memory a block can opt into
  int driver_version = 0;                 ///< e.g. 13000 for CUDA 13.0
  int runtime_version = 0;
};

/// Properties of device `index`. Throws no_gpu when it does not exist.
DeviceInfo device_info(int index = 0);

/// Throws no_gpu unless device `index` exists and is one the kernels were built for
/// (compute capability 9.0 -> sm_90a, 10.0 -> sm_100a).
void require_supported_device(int index = 0);

/// Reads and clears the CUDA runtime's last error: "" when there is none, else "<name>: <text>".
std::string last_error_string();

/// Waits for all work on the device; throws verify_failed if any of it failed.
void synchronize();

/// A plain device allocation (cudaMalloc), freed on destruction. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t size() const { return bytes_; }

  /// Host -> device copy of `bytes` (<= size()) to offset 0. Synchronous.
  void upload(const void* host, std::size_t bytes);
  /// Device -> host copy of `bytes` (<= size()) from offset 0. Synchronous.
  void download(void* host, std::size_t bytes) const;
  /// Sets every byte to `value` (cudaMemset), e.g. 0xFF to poison with NaN-like bit patterns.
  void fill_bytes(std::uint8_t value);

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Uploads a vector into a new device buffer.
template <class T>
DeviceBuffer to_device(const std::vector<T>& v) {
  DeviceBuffer b(v.size() * sizeof(T) == 0 ? sizeof(T) : v.size() * sizeof(T));
  if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
  return b;
}

/// Downloads `n` elements of a device buffer.
template <class T>
std::vector<T> to_host(const DeviceBuffer& b, std::size_t n) {
  std::vector<T> v(n);
  if (n != 0) b.download(v.data(), n * sizeof(T));
  return v;
}

// ------------------------------------------------------------------------------------------------
// KV row formats (docs/layouts.md)

enum class RowFormat {
  fp8_ds_mla_584,  ///< V4 layout, page-striped: N x 576 data rows, then N x 8 scale rows
  v41_fp8_528,     ///< 512 x e4m3 + 16 x UE8M0 (one per 32 dims), per row
  v41_fp4_288,     ///< 512 x e2m1 (256 B) + 32 x e4m3 scales (one per 16 dims), per row
  fp8_ds_mla_656,  ///< V3.2: 512 x e4m3 + 4 x fp32 scales (one per 128 dims) + 64 x bf16 RoPE; 576 dims
  bf16_1024,       ///< plain bf16, 512 dims (FlashInfer's bf16 cache)
  fp8_pt_512,      ///< plain e4m3, 512 dims, one per-tensor scale (FlashInfer's fp8 cache; CacheView::scale)
};

/// "fp8_ds_mla_584", "v41_fp8_528", "v41_fp4_288", "fp8_ds_mla_656", "bf16_1024", "fp8_pt_512".
std::string_view to_string(RowFormat f);
/// Bytes of one row (584, 528, 288, 656, 1024, 512).
int row_bytes(RowFormat f);
/// Values a row holds: 576 for fp8_ds_mla_656, else 512.
int row_dims(RowFormat f);
/// Alignment the page stride must be a multiple of (576, 512, 256, 1, 512, 512).
int page_alignment(RowFormat f);
/// round_up(page_block_size * row_bytes, page_alignment): the padded page stride.
std::int64_t padded_page_stride(RowFormat f, int page_block_size);

/// A paged KV cache on the device.
struct CacheView {
  RowFormat format = RowFormat::fp8_ds_mla_584;
  const std::uint8_t* data = nullptr;  ///< [num_pages, page_stride_bytes]
  int page_block_size = 64;            ///< rows per page
  std::int64_t page_stride_bytes = 0;  ///< >= page_block_size * row_bytes, multiple of 16
  std::int64_t num_pages = 0;          ///< row ids >= num_pages * page_block_size are treated as -1
  float scale = 1.0f;                  ///< fp8_pt_512: value = code x scale (finite, > 0); unused otherwise
};

// ------------------------------------------------------------------------------------------------
// Quantize: bf16 latents -> rows of a format at given slots

struct QuantizeParams {
  RowFormat format = RowFormat::fp8_ds_mla_584;
  const std::uint16_t* latent = nullptr;  ///< [n, row_dims(format)] bf16 bit patterns (576 for fp8_ds_mla_656)
  const std::int64_t* slots = nullptr;    ///< [n] global row ids (page * page_block_size + offset); -1 skips
  std::int64_t n = 0;
  std::uint8_t* cache = nullptr;  ///< [num_pages, page_stride_bytes]
  int page_block_size = 64;
  std::int64_t page_stride_bytes = 0;
  std::int64_t num_pages = 0;  ///< slots past num_pages * page_block_size are skipped
  float scale = 1.0f;          ///< fp8_pt_512: code = e4m3(x / scale) (finite, > 0)
  void* stream = nullptr;      ///< cudaStream_t, null = default stream
};

/// Writes every row's bytes (pad bytes of the 584 layout written 0). The bytes equal the host
/// quantizer's (mlaplan/hardware/quant.hpp) bit for bit.
void quantize(const QuantizeParams& p);

/// The device's check of the e4m3 -> bf16 conversion the small-head sm_90a decode producers use (integer
/// byte moves and a bf16 multiply) against the float path the other kernels use: every e4m3 code
/// pair times every UE8M0 scale byte, bit for bit, NaN codes through the NaN test.
struct ConversionCheck {
  std::int64_t checked = 0;     ///< values compared (256 scales x 65536 code pairs x 2)
  std::int64_t mismatches = 0;  ///< 0: the two paths agree on this device
  int first_scale = -1;         ///< the lowest mismatch's scale byte, -1: none
  int first_codes = -1;         ///< ... and its code pair (first code in the low byte)
};
ConversionCheck check_e4m3_conversion();

// ------------------------------------------------------------------------------------------------
// GPU tile scheduler (docs/scheduler.md), same records as mlaplan::plan_schedule

/// The per-request overhead O, in 64-row blocks, that mla-plan's own split_kv launches (bench) give
/// the tile scheduler: what starting a request costs these kernels (its Q, its epilogue, its
/// partial), measured on the H200 by sweeping O (docs/perf-history.md "v10": O 1 was fastest or
/// within noise of it on every row swept). FlashMLA's scheduler, which `plan` and `verify` use,
/// takes 5 for its sm90 kernel (src/cache/scheduler.cpp).
inline constexpr std::int32_t kSplitKvFixedOverhead = 1;

struct ScheduleParams {
  std::int32_t b = 0;
  std::int32_t topk = 0;                      ///< used when topk_length is null
  const std::int32_t* topk_length = nullptr;  ///< [b] or null
  bool has_extra = false;
  std::int32_t extra_topk = 0;                      ///< used when extra_topk_length is null
  const std::int32_t* extra_topk_length = nullptr;  ///< [b] or null
  std::int32_t num_sm_parts = 0;                    ///< P
  std::int32_t fixed_overhead = 5;                  ///< O (FlashMLA's sm90 value; see kSplitKvFixedOverhead)
  std::int32_t block = 64;                          ///< B
  std::int32_t* records = nullptr;                  ///< [num_sm_parts, 8] output
  std::int32_t* num_splits = nullptr;               ///< [b + 1] output
  void* stream = nullptr;
};

/// Computes the plan on the device with one warp; every record equals mlaplan::plan_schedule's,
/// idle partitions included (begin_req = b, end_req = b - 1, begin_block = n_0 - 1 as FlashMLA
/// writes it; the decode kernel skips them).
void schedule(const ScheduleParams& p);

/// Partition count of the SM90 sparse decode kernel: max(num_sms / s_q / (h_q / 64), 1).
std::int32_t sm90_num_sm_parts(std::int32_t num_sms, std::int32_t s_q, std::int32_t h_q);

/// The query-head counts the small-head kernel runs unpadded: the core's definition
/// (mlaplan/cache/decode_mode.hpp), which the planner uses too.
using mlaplan::small_head_count;

/// split_kv's partition count for mla-plan's own kernels: sm90_num_sm_parts for h_q 64 / 128; for
/// the small-head kernel (h_q 8 / 16, one CTA per SM covering every head) max(num_sms / s_q, 1).
std::int32_t decode_num_sm_parts(std::int32_t num_sms, std::int32_t s_q, std::int32_t h_q);

// ------------------------------------------------------------------------------------------------
// Sparse-MLA decode (d_v 512; d_qk 512, or 576 for V3.2's 656-byte rows) with split-KV and combine

/// Largest partition count the decode accepts (a sanity bound on plans; the combine itself takes
/// any number of partials per request).
inline constexpr std::int32_t kMaxSmParts = 1024;

/// How a decode call spreads the work over the GPU, and the host heuristic that picks it, live in
/// the core (mlaplan/cache/decode_mode.hpp) so that `plan` shows the decision without a CUDA build.
using mlaplan::decode_plan_mode;
using mlaplan::DecodeMode;
using mlaplan::kOnePassMaxRows;
using mlaplan::to_string;

/// The decode kernels: the portable one (every format pair, every arch, h_q 64 / 128), the
/// warp-specialised sm_90a one (fp8_ds_mla 584, alone or with a 584 extra cache, compute
/// capability 9.0, h_q 64 / 128) and the small-head one (h_q 8 / 16 unpadded; fp8_ds_mla 584 alone
/// or with a 584 extra cache, fp8_ds_mla 656; every arch).
/// generic: the portable 64-head kernel; sm90_ws: the warp-specialised 64-head kernel (sm_90a, 584
/// rows); small_heads: the portable small-head kernel (h_q 8 / 16 unpadded); small_heads_sm90: the
/// warp-specialised small-head kernel (sm_90a, 584 rows); small_heads_lean: the row-split small-head
/// kernel (584 rows, split_kv at small batches: each request cut into pieces of index positions,
/// one CTA each, every arch).
enum class DecodeKernel { generic, sm90_ws, small_heads, small_heads_sm90, small_heads_lean };
/// "generic", "sm90_ws", "small_heads", "small_heads_sm90", "small_heads_lean"
std::string_view to_string(DecodeKernel k);
/// The kernel of that name (to_string's), or nullopt for any other text.
std::optional<DecodeKernel> decode_kernel_named(std::string_view name);
inline constexpr std::string_view kDecodeKernelNames =
    "generic, sm90_ws, small_heads, small_heads_sm90 or small_heads_lean";

/// A kernel a benchmark forces on every call (MLAPLAN_BENCH_KERNEL, MLAPLAN_SXS_KERNEL) as it
/// applies to a call in `mode`: small_heads_lean has split_kv only, so the other modes run as
/// dispatched (nullopt); any other kernel applies as given.
std::optional<DecodeKernel> forced_kernel_for_mode(std::optional<DecodeKernel> forced, DecodeMode mode);

/// An explicit choice of path, for tests and benchmarks; callers leave it default and the rule of
/// plan_decode_launch() decides.
struct DecodeForce {
  std::optional<DecodeKernel> kernel;  ///< generic: the portable kernel on sm_90a too
  int pair = 0;                        ///< h_q 128 on sm90_ws: 1 the 2-CTA pair, -1 one CTA per 64 heads, 0 the rule
  int cluster_ctas = 0;                ///< cluster_split's CTAs per request (1, 2, 4, 8), 0 the rule
  bool no_pdl = false;                 ///< split_kv: an ordinary launch instead of the programmatic one
};

struct DecodeParams {
  DecodeMode mode = DecodeMode::split_kv;  ///< one_pass: the plan and scratch fields are unused
  DecodeForce force;                       ///< tests only

  std::int32_t b = 0;
  std::int32_t s_q = 1;
  std::int32_t h_q = 64;             ///< 64 or 128; 8 or 16 where the variant has a small-head kernel
  std::int32_t d_qk = 512;           ///< row_dims of the caches: 512, or 576 (fp8_ds_mla_656: V = the first 512)
  const std::uint16_t* q = nullptr;  ///< [b, s_q, h_q, d_qk] bf16

  CacheView main;                             ///< main (window) cache
  const std::int32_t* indices = nullptr;      ///< [b, s_q, topk] global row ids or -1
  std::int32_t topk = 0;                      ///< >= 1
  const std::int32_t* topk_length = nullptr;  ///< [b] or null (= topk)

  bool has_extra = false;
  CacheView extra;                              ///< extra (compressed) cache
  const std::int32_t* extra_indices = nullptr;  ///< [b, s_q, extra_topk]
  std::int32_t extra_topk = 0;
  const std::int32_t* extra_topk_length = nullptr;  ///< [b] or null (= extra_topk)

  const float* attn_sink = nullptr;             ///< [h_q] or null
  float softmax_scale = 0.044194173824159216f;  ///< 1/sqrt(512)

  // split_kv only (may be null / 0 in one_pass):
  const std::int32_t* sched_records = nullptr;  ///< [num_sm_parts, 8] (schedule() or the host plan)
  const std::int32_t* num_splits = nullptr;     ///< [b + 1]
  std::int32_t num_sm_parts = 0;

  std::uint16_t* out = nullptr;  ///< [b, s_q, h_q, 512] bf16, 16-byte aligned
  float* lse = nullptr;          ///< [b, s_q, h_q] natural log
  float* o_accum = nullptr;      ///< [b + num_sm_parts, s_q, h_q, 512] fp32 scratch (split_kv): each partial
                                 ///< normalised by its own sum; 16-byte aligned
  float* lse_accum = nullptr;    ///< [b + num_sm_parts, s_q, h_q] fp32 scratch, log2 (split_kv)
  void* stream = nullptr;
};

/// Elements (fp32, both) of the o_accum / lse_accum scratch a call needs.
std::int64_t o_accum_elems(std::int32_t b, std::int32_t s_q, std::int32_t h_q, std::int32_t num_sm_parts);
std::int64_t lse_accum_elems(std::int32_t b, std::int32_t s_q, std::int32_t h_q, std::int32_t num_sm_parts);

/// The (main format, extra format) pairs with a compiled kernel.
struct DecodeVariant {
  RowFormat main;
  bool has_extra;
  RowFormat extra;           ///< meaningful when has_extra
  bool small_heads = false;  ///< h_q 8 and 16 run unpadded (the small-head kernel)
};
const std::vector<DecodeVariant>& supported_decode_variants();

/// Index into supported_decode_variants() of the kernel for `p`; throws unsupported (listing the
/// supported pairs) when there is none.
std::size_t select_decode_variant(const DecodeParams& p);

/// Grid and block of the decode and combine kernels (host heuristics, testable without a GPU).
struct LaunchDims {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned cluster_x = 1;  ///< cluster_split on sm_90a: the CTAs that share a request (clusters along x)
  unsigned cluster_z = 1;  ///< the 2-CTA pair on sm_90a: the two 64-head CTAs of a request (clusters along z)
  unsigned block = 1;
  std::size_t smem_bytes = 0;
};

/// What a launch decision depends on of the device.
struct DecodeDevice {
  int cc_major = 0;
  int cc_minor = 0;
  int num_sms = 0;
  /// Whether the clusters of the sm90_ws kernel (with an extra cache or not) that a grid of `d`
  /// (d.cluster_x x 1 x d.cluster_z CTAs each) needs can be resident at once (an occupancy query on
  /// a real device); null: they all fit.
  std::function<bool(const LaunchDims& d, bool has_extra)> clusters_fit;
};
/// The current device (cudaGetDevice) with its occupancy query; Error no_gpu without one.
DecodeDevice current_decode_device();

/// The whole launch of one decode call, decided in one place (plan_decode_launch) and reported as
/// it ran (sparse_decode returns it).
struct DecodeLaunch {
  DecodeMode asked = DecodeMode::split_kv;  ///< DecodeParams::mode
  DecodeMode mode = DecodeMode::split_kv;   ///< as run: cluster_split runs as one_pass where no cluster fits
  DecodeKernel kernel = DecodeKernel::generic;
  LaunchDims dims;       ///< of the decode kernel
  bool pair = false;     ///< 2-CTA clusters along z sharing the dequantisation
  bool pdl = false;      ///< programmatic dependent launch after the scheduler
  bool combine = false;  ///< the combine kernel runs after (split_kv)
  int pieces = 0;        ///< small_heads_lean: CTAs (partials) per request; its combine merges them
  std::string fallback;  ///< "" or what was asked and could not run here, and what ran
  /// "sm90_ws cluster_split, grid 128x1x1, cluster 4, 384 threads, 216 KiB" style, for reports.
  std::string describe() const;
};

/// The row-split small-head kernel's pieces (CTAs, partials) per request for `p`: min(16, (b +
/// num_sm_parts) / b, ceil((topk + extra_topk) / 16)), at least 1, or 0 where it does not run (not
/// split_kv, not h_q 8 / 16, rows other than fp8_ds_mla_584, b or num_sm_parts below 1).
int lean_pieces(const DecodeParams& p);
/// Index positions per piece at or below which the row-split kernel is the default split_kv path of
/// the small-head shapes (docs/kernels.md "The row-split small-head kernel").
inline constexpr std::int64_t kLeanDefaultMaxRows = 64;
/// Whether plan_decode_launch picks the row-split kernel for `p` (with lean_pieces(p) == pieces)
/// when no kernel is forced.
bool lean_by_default(const DecodeParams& p, int pieces);

/// The decision: kernel (sm90_ws on compute capability 9.0 for the 584 pairs, else generic),
/// grid, cluster_split's CTAs per request (cluster_split_ctas, halved until the clusters fit; one
/// CTA per request, as one_pass, when none fits or the kernel has no clusters), the 2-CTA pair at
/// h_q 128 (when a CTA has at least two blocks on average and the pairs fit), PDL, the combine.
/// Host only: testable with any DecodeDevice. Throws like check_decode_params.
DecodeLaunch plan_decode_launch(const DecodeParams& p, const DecodeDevice& device);
LaunchDims combine_launch_dims(const DecodeParams& p);

/// Throws usage when a params struct breaks a documented shape or limit (null pointers, h_q not
/// 64/128 (or 8/16 where the variant has a small-head kernel; unsupported for one without), page strides too small or not a multiple of 16, num_sm_parts out of range).
void check_decode_params(const DecodeParams& p);

/// Launches plan_decode_launch(p, current_decode_device()): the decode kernel, then (split_kv) the
/// combine kernel. Asynchronous on p.stream; launch errors are checked immediately. Returns the
/// launch that ran.
DecodeLaunch sparse_decode(const DecodeParams& p);

}  // namespace mlaplan::kernels

#pragma once
// Timing helpers for the project's sparse decode (docs/perf.md): what `mlaplan_kernel_bench`
// prints and what a `bench` command can call. No CUDA types here. Every function needs a
// supported device (throws no_gpu otherwise, like the rest of kernels.hpp).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "mlaplan_kernels/kernels.hpp"

namespace mlaplan::kernels {

/// One decode shape: random latents quantised into paged caches, every attended row distinct
/// (a random permutation of the cache rows), full lengths, random bf16 q.
struct DecodeBenchShape {
  std::int32_t b = 1;
  std::int32_t s_q = 1;
  std::int32_t h_q = 64;
  RowFormat main_format = RowFormat::fp8_ds_mla_584;
  std::int32_t main_page = 64;
  std::int32_t topk = 128;
  bool has_extra = true;
  RowFormat extra_format = RowFormat::fp8_ds_mla_584;
  std::int32_t extra_page = 64;
  std::int32_t extra_topk = 512;
  /// Variable lengths instead of full ones: request r's topk_length uniform in [0, topk] and its
  /// extra length in [0, extra_topk], both 0 for every r % 9 == 4, and each valid index -1 with
  /// probability 1/17 (the variable-length rows of the side-by-side measurement, docs/perf.md).
  bool variable_lengths = false;
};

struct DecodeBenchOptions {
  int replays = 60;                      ///< timed graph replays (median and minimum reported)
  int warmup = 5;                        ///< untimed replays first
  std::size_t flush_bytes = 256u << 20;  ///< memset before every replay to flush the L2 (0: none)
  std::uint64_t seed = 2026;
  bool time_other_mode = false;        ///< also time the plans decode_plan_mode() did not pick
  bool time_with_scheduler = false;    ///< also time scheduler + decode + combine (split_kv)
  std::int32_t num_sm_parts = 0;       ///< split_kv's partition count P; 0: sm90_num_sm_parts of the device
  std::int32_t fixed_overhead = -1;    ///< split_kv's per-request overhead O in blocks; -1: kSplitKvFixedOverhead
  std::optional<DecodeKernel> kernel;  ///< forced for every timed call (DecodeForce::kernel); none: the dispatch's
};

struct DecodeBenchResult {
  DecodeMode mode = DecodeMode::split_kv;  ///< choose_decode_mode()'s choice (over the lengths), the one timed
  std::int32_t num_sm_parts = 0;           ///< P of the split_kv plan
  std::int32_t split_requests = 0;         ///< requests the split_kv plan splits (overhead kSplitKvFixedOverhead)
  double median_us = 0;                    ///< one call: decode (+ combine in split_kv)
  double min_us = 0;
  double mode_median_us[3] = {-1, -1, -1};  ///< per DecodeMode (split_kv, one_pass, cluster_split); -1: not timed
  double with_scheduler_median_us = -1;     ///< scheduler kernel + the call, when time_with_scheduler
                                            ///< (split_kv; one_pass launches no scheduler: = median_us)
  double flops = 0;                         ///< 2 h_q s_q rows (512 + 512), rows = the attended rows of all requests
  double bytes = 0;                         ///< rows x row bytes + q + out (bf16)
};

/// Builds the shape's inputs on device 0, captures one call (the plan of decode_plan_mode) in a
/// CUDA graph and times its replays with CUDA events, the L2 flushed before each.
DecodeBenchResult bench_decode(const DecodeBenchShape& shape, const DecodeBenchOptions& opt = {});

/// Device-to-device copy bandwidth in GB/s ((bytes read + bytes written) / median time of
/// `replays` cudaMemcpyAsync of `bytes`): the bandwidth ceiling of docs/perf.md's floor.
double measure_copy_gbps(std::size_t bytes = std::size_t(1) << 30, int replays = 20);

/// The matmul-rate ceiling of the floor: a bf16 n x n x n product (fp32 accumulation) through
/// cuBLAS, loaded at run time (libcublas.so.13, libcublas.so): the project links no BLAS.
struct MatmulCeiling {
  double tflops = 0;  ///< 0 when not measured
  std::string how;    ///< what was measured, or why nothing was
};
MatmulCeiling measure_matmul_tflops(int n = 8192, int replays = 10);

}  // namespace mlaplan::kernels

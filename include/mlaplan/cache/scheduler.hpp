#pragma once
// Host implementation of FlashMLA's decode tile scheduler (docs/scheduler.md).
// The records and num_splits must equal what FlashMLA computes for the same inputs, bit for bit.

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace mlaplan {

/// The four decode kernels whose scheduler parameters we know.
enum class SchedKernel { sm90_sparse, sm100_head64, sm100_head128, sm90_dense };

/// "sm90-sparse", "sm100-head64", "sm100-head128", "sm90-dense".
std::string_view to_string(SchedKernel k);
/// Parses the names above; nullopt for anything else.
std::optional<SchedKernel> parse_sched_kernel(std::string_view name);

/// Per-kernel constants: number of SM partitions, fixed per-request overhead, block size.
struct SchedParams {
  std::int32_t num_sm_parts = 0;
  std::int32_t fixed_overhead = 0;
  std::int32_t block = 0;
};

/// Inputs of one plan. `lengths` has one entry per decode token (b = lengths.size()).
struct SchedInput {
  SchedKernel kernel = SchedKernel::sm90_sparse;
  std::int32_t num_sms = 132;
  std::int32_t s_q = 1;
  std::int32_t h_q = 64;                    ///< query heads (64 or 128; sm90-sparse also 8 or 16)
  std::int32_t h_k = 1;                     ///< KV heads (dense kernel only)
  std::vector<std::int32_t> lengths;        ///< topk_length (sparse) or sequence length (dense), [b]
  bool has_extra = false;                   ///< an extra (compressed) cache is present
  std::vector<std::int32_t> extra_lengths;  ///< extra_topk_length, [b] when has_extra
};

/// One partition's record: [begin_req, end_req, begin_block, end_block (exclusive), begin_split,
/// first_split, last_split, pad]. pad is always 0.
using SchedRecord = std::array<std::int32_t, 8>;

/// A plan plus the derived facts a user wants.
struct SchedPlan {
  SchedKernel kernel = SchedKernel::sm90_sparse;
  SchedParams params;
  std::int64_t batch = 0;                ///< b
  std::int64_t payload = 0;              ///< per-partition quota (blocks + overheads)
  std::vector<SchedRecord> records;      ///< [num_sm_parts]
  std::vector<std::int32_t> num_splits;  ///< [b + 1], prefix sums of partials per request
  std::vector<std::int32_t> blocks;      ///< n_i, blocks of each request [b]
  // derived
  std::int32_t idle_partitions = 0;           ///< partitions with begin_req >= b
  std::int32_t split_requests = 0;            ///< requests split over more than one partition
  std::int32_t max_splits = 0;                ///< most partials of one request
  std::int64_t total_partials = 0;            ///< num_splits[b]
  std::int64_t min_blocks_per_partition = 0;  ///< over non-idle partitions
  std::int64_t max_blocks_per_partition = 0;
  std::int64_t accum_bytes = 0;  ///< fp32 o_accum + lse_accum for [b + P] partials
};

/// Constants of `kernel` for this GPU and shape (tile-scheduler parameters table). sm90-sparse
/// takes h_q 64 or 128 (FlashMLA's), and 8 or 16 for mla-plan's small-head kernel, whose CTA covers
/// every head: num_sms / s_q partitions, as for 64 heads (which is also what FlashMLA plans for
/// 8 or 16 heads padded to 64).
SchedParams sched_params(SchedKernel kernel, std::int32_t num_sms, std::int32_t s_q, std::int32_t h_q,
                         std::int32_t h_k = 1);

/// Computes the plan. Throws mlaplan::Error (usage) for invalid inputs (negative lengths, h_q not
/// accepted by the kernel, extra_lengths of the wrong size, sizes past the documented limits).
SchedPlan plan_schedule(const SchedInput& in);

}  // namespace mlaplan

// Host implementation of the decode tile scheduler (docs/scheduler.md).
//
// The plan divides a decode batch over a fixed number of SM partitions: each partition gets a
// quota ("payload") of KV blocks plus a fixed overhead per request piece it touches, and the
// partitions are filled greedily in order. The result must equal FlashMLA's own plan bit for bit
// (tests/data/flashmla-sched-vectors.json holds plans measured on an H200), and the GPU scheduler
// kernel in kernels/ must equal this one.
//
// Limits (mlaplan::ScheduleLimits, enforced below with usage errors; they keep every record field
// and num_splits entry inside int32 and the sweep inside int64):
//   1 <= b <= 1,048,576           decode tokens in one plan
//   0 <= length <= 2^28           each lengths[i] and extra_lengths[i]
//   1 <= num_sms <= 4096
//   1 <= h_q <= 4096              (the sparse kernels further restrict it to 64 / 128; sm90-sparse
//                                 also takes 8 / 16, mla-plan's small-head kernel)
//   1 <= s_q <= 4096, h_k >= 1    (h_k only matters for the dense kernel, where h_k <= h_q)
// With these limits n_i <= 2^23 + 1 fits int32, num_splits[b] <= b + P - 1 fits int32, and the
// block total (up to ~2^43) needs int64. The upstream scheduler sums the total in int32, so for
// totals past 2^31 (far beyond any real batch) there is no reference to agree with; we stay exact.

#include "mlaplan/cache/scheduler.hpp"

#include <algorithm>
#include <string>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/limits.hpp"

namespace mlaplan {

namespace {

constexpr std::int64_t kMaxBatch = ScheduleLimits::max_batch;
constexpr std::int64_t kMaxLength = ScheduleLimits::max_length;
constexpr std::int64_t kMaxSms = ScheduleLimits::max_num_sms;
constexpr std::int64_t kMaxHeads = ScheduleLimits::max_heads;
constexpr std::int64_t kMaxSq = ScheduleLimits::max_s_q;
// fp32 elements per partial: o_accum holds the 512-wide value row, lse_accum one scalar.
constexpr std::int64_t kAccumFloatsPerRow = 512 + 1;

bool is_sparse(SchedKernel k) { return k != SchedKernel::sm90_dense; }

bool length_ok(std::int32_t v) { return v >= 0 && v <= kMaxLength; }

// Out of line: the per-request loop stays small and only pays for a compare.
[[noreturn, gnu::cold, gnu::noinline]] void length_error(const char* array, std::size_t i, std::int32_t v) {
  const std::string what = std::string(array) + "[" + std::to_string(i) + "] = " + std::to_string(v);
  if (v < 0) throw_usage(what + ": a length must be >= 0");
  throw_usage(what + ": a length must be <= " + std::to_string(kMaxLength));
}

}  // namespace

std::string_view to_string(SchedKernel k) {
  switch (k) {
    case SchedKernel::sm90_sparse: return "sm90-sparse";
    case SchedKernel::sm100_head64: return "sm100-head64";
    case SchedKernel::sm100_head128: return "sm100-head128";
    case SchedKernel::sm90_dense: return "sm90-dense";
  }
  return "unknown";
}

std::optional<SchedKernel> parse_sched_kernel(std::string_view name) {
  for (SchedKernel k :
       {SchedKernel::sm90_sparse, SchedKernel::sm100_head64, SchedKernel::sm100_head128, SchedKernel::sm90_dense}) {
    if (name == to_string(k)) return k;
  }
  return std::nullopt;
}

SchedParams sched_params(SchedKernel kernel, std::int32_t num_sms, std::int32_t s_q, std::int32_t h_q,
                         std::int32_t h_k) {
  const std::string kname(to_string(kernel));
  if (num_sms < 1 || num_sms > kMaxSms) {
    throw_usage("num_sms = " + std::to_string(num_sms) + ": must be between 1 and " + std::to_string(kMaxSms));
  }
  if (s_q < 1 || s_q > kMaxSq) {
    throw_usage("s_q = " + std::to_string(s_q) + ": must be between 1 and " + std::to_string(kMaxSq));
  }
  if (h_q < 1 || h_q > kMaxHeads) {
    throw_usage("h_q = " + std::to_string(h_q) + ": must be between 1 and " + std::to_string(kMaxHeads));
  }

  SchedParams p;
  p.block = 64;
  std::int32_t parts = 0;
  switch (kernel) {
    case SchedKernel::sm90_sparse:
      if (h_q != 64 && h_q != 128 && h_q != 8 && h_q != 16) {
        throw_usage("h_q = " + std::to_string(h_q) + ": " + kname +
                    " accepts h_q 64 or 128 (and 8 or 16: mla-plan's small-head kernel)");
      }
      p.fixed_overhead = 5;
      // The small-head kernel's CTA covers all its 8 or 16 heads: one head slice, as at 64.
      parts = num_sms / s_q / std::max(h_q / 64, 1);
      break;
    case SchedKernel::sm100_head64:
      if (h_q != 64) throw_usage("h_q = " + std::to_string(h_q) + ": " + kname + " accepts only h_q 64");
      p.fixed_overhead = 5;
      parts = num_sms / s_q;
      break;
    case SchedKernel::sm100_head128:
      if (h_q != 128) throw_usage("h_q = " + std::to_string(h_q) + ": " + kname + " accepts only h_q 128");
      p.fixed_overhead = 3;
      parts = num_sms / s_q / 2;
      break;
    case SchedKernel::sm90_dense: {
      if (h_k < 1 || h_k > h_q) {
        throw_usage("h_k = " + std::to_string(h_k) + ": " + kname +
                    " needs 1 <= h_k <= h_q (h_q = " + std::to_string(h_q) + ")");
      }
      if (h_q % h_k != 0) {
        throw_usage("h_q = " + std::to_string(h_q) + ": " + kname +
                    " needs h_q to be a multiple of h_k (h_k = " + std::to_string(h_k) + ")");
      }
      p.fixed_overhead = 5;
      // Query rows per KV head (all s_q positions folded in), tiled by 64 rows per partition.
      const std::int64_t rows_per_kv_head = std::int64_t{s_q} * h_q / h_k;
      const std::int64_t row_tiles = ceil_div(rows_per_kv_head, 64);
      parts = static_cast<std::int32_t>(num_sms / h_k / row_tiles);
      break;
    }
    default: throw_usage("unknown scheduler kernel " + std::to_string(static_cast<int>(kernel)));
  }
  p.num_sm_parts = std::max(parts, std::int32_t{1});
  return p;
}

SchedPlan plan_schedule(const SchedInput& in) {
  const SchedParams prm = sched_params(in.kernel, in.num_sms, in.s_q, in.h_q, in.h_k);
  const std::string kname(to_string(in.kernel));

  // ---- validate the per-request inputs ----
  const std::size_t b = in.lengths.size();
  if (b == 0) {
    throw_usage("b = 0: lengths must hold between 1 and " + std::to_string(kMaxBatch) + " entries");
  }
  if (static_cast<std::int64_t>(b) > kMaxBatch) {
    throw_usage("b = " + std::to_string(b) + ": at most " + std::to_string(kMaxBatch) +
                " requests are supported in one plan");
  }
  if (in.has_extra) {
    if (!is_sparse(in.kernel)) throw_usage("has_extra = true: " + kname + " has no extra cache");
    if (in.extra_lengths.size() != b) {
      throw_usage("extra_lengths has " + std::to_string(in.extra_lengths.size()) +
                  " entries: it must have one per request (b = " + std::to_string(b) + ")");
    }
  } else if (!in.extra_lengths.empty()) {
    throw_usage("extra_lengths has " + std::to_string(in.extra_lengths.size()) +
                " entries but has_extra = false: leave it empty or set has_extra");
  }

  SchedPlan plan;
  plan.kernel = in.kernel;
  plan.params = prm;
  plan.batch = static_cast<std::int64_t>(b);

  const std::int64_t B = prm.block;
  const std::int64_t O = prm.fixed_overhead;
  const std::int32_t P = prm.num_sm_parts;

  // ---- 1. blocks per request (validating each length), 2. quota ----
  plan.blocks.resize(b);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < b; ++i) {
    if (!length_ok(in.lengths[i])) length_error("lengths", i, in.lengths[i]);
    if (in.has_extra && !length_ok(in.extra_lengths[i])) length_error("extra_lengths", i, in.extra_lengths[i]);
    std::int64_t n = 0;
    if (is_sparse(in.kernel)) {
      // A request with no valid entries still costs one (fully masked) block.
      std::int64_t len = std::max<std::int64_t>(in.lengths[i], 1);
      if (in.has_extra) len = ceil_div(len, B) * B + in.extra_lengths[i];
      n = (len - 1) / B + 1;
    } else {
      n = in.lengths[i] == 0 ? 1 : ceil_div(in.lengths[i], B);
    }
    plan.blocks[i] = static_cast<std::int32_t>(n);
    total += n + O;  // <= 2^20 * (2^23 + 6): no overflow possible in int64
  }
  plan.payload = ceil_div(total, P) + O;

  // ---- 3. the sweep: O(b + P), each inner iteration either finishes a request or stops ----
  plan.records.assign(static_cast<std::size_t>(P), SchedRecord{});
  plan.num_splits.assign(b + 1, 0);
  const std::int64_t nb = static_cast<std::int64_t>(b);
  std::int64_t r = 0;     // current request
  std::int64_t blk = 0;   // its next block
  std::int64_t sidx = 0;  // partials of r already emitted
  std::int64_t cum = 0;   // partials of all finished requests
  std::int64_t min_blocks = -1;
  std::int64_t max_blocks = 0;
  for (std::int32_t p = 0; p < P; ++p) {
    const std::int64_t begin_req = r;
    const std::int64_t begin_block = blk;
    const std::int64_t begin_split = sidx;
    bool first_split = blk != 0;
    std::int64_t rem = plan.payload;
    std::int64_t taken = 0;  // blocks (not overheads) this partition processes
    while (r < nb) {
      const std::int64_t need = plan.blocks[static_cast<std::size_t>(r)] - blk;
      if (rem >= need + O) {  // the rest of request r fits: it ends in this partition
        const auto parts = static_cast<std::int32_t>(sidx + 1);
        cum += parts;
        plan.num_splits[static_cast<std::size_t>(r + 1)] = static_cast<std::int32_t>(cum);
        if (parts > 1) ++plan.split_requests;
        plan.max_splits = std::max(plan.max_splits, parts);
        rem -= need + O;
        taken += need;
        ++r;
        blk = 0;
        sidx = 0;
        continue;
      }
      if (rem - O > 0) {  // take what the quota allows; the request continues in p + 1
        blk += rem - O;
        taken += rem - O;
        ++sidx;
      }
      break;
    }

    SchedRecord& rec = plan.records[static_cast<std::size_t>(p)];
    if (begin_req >= nb) {
      // Idle partition. Following the sweep literally it would be [b, b-1, 0, n_{b-1}, 0, 0, 0, 0].
      // FlashMLA's scheduler reads its per-request array one element past the end here and, as
      // measured on an H200 (every idle partition of the golden file, 20 batches where the value
      // is non-zero), stores n_0 - 1 as begin_block. We reproduce that so host, GPU kernel and
      // FlashMLA agree on every int of the plan; kernels must skip idle partitions
      // (begin_req >= b) and never read their block range.
      rec = {static_cast<std::int32_t>(nb),
             static_cast<std::int32_t>(nb - 1),
             plan.blocks[0] - 1,
             plan.blocks[b - 1],
             0,
             0,
             0,
             0};
      ++plan.idle_partitions;
      continue;
    }

    const std::int64_t end_req = blk > 0 ? r : r - 1;
    const std::int64_t end_block = blk > 0 ? blk : plan.blocks[static_cast<std::size_t>(r - 1)];
    bool last_split = end_block != plan.blocks[static_cast<std::size_t>(end_req)];
    if (begin_req == end_req) {
      // A single request piece: it is split if it is either end of a split request.
      first_split = last_split = first_split || last_split;
    }
    rec = {static_cast<std::int32_t>(begin_req),
           static_cast<std::int32_t>(end_req),
           static_cast<std::int32_t>(begin_block),
           static_cast<std::int32_t>(end_block),
           static_cast<std::int32_t>(begin_split),
           first_split ? 1 : 0,
           last_split ? 1 : 0,
           0};
    min_blocks = min_blocks < 0 ? taken : std::min(min_blocks, taken);
    max_blocks = std::max(max_blocks, taken);
  }
  if (r != nb || blk != 0 || sidx != 0) {
    throw_internal("tile scheduler sweep ended at request " + std::to_string(r) + ", block " + std::to_string(blk) +
                   " (b = " + std::to_string(nb) + ")");
  }

  // ---- derived facts ----
  plan.total_partials = plan.num_splits[b];
  plan.min_blocks_per_partition = min_blocks;  // b >= 1, so partition 0 is never idle
  plan.max_blocks_per_partition = max_blocks;
  // o_accum fp32 [b + P, s_q, h_q, 512] + lse_accum fp32 [b + P, s_q, h_q].
  std::int64_t rows = checked_add(nb, P, "accumulator rows", ErrorKind::usage);
  rows = checked_mul(rows, in.s_q, "accumulator rows", ErrorKind::usage);
  rows = checked_mul(rows, in.h_q, "accumulator rows", ErrorKind::usage);
  plan.accum_bytes = checked_mul(checked_mul(rows, kAccumFloatsPerRow, "accumulator size", ErrorKind::usage), 4,
                                 "accumulator bytes", ErrorKind::usage);
  return plan;
}

}  // namespace mlaplan

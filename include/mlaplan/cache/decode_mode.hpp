#pragma once
// How mla-plan's sparse decode kernels run a decode step (split-KV or one pass per request) and
// the host heuristic that decides it. Plain C++17 so that the CUDA sources can include it too.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mlaplan {

/// How mla-plan's sparse decode kernels spread one decode step over the GPU.
///   split_kv - one CTA per tile-scheduler partition (grid num_sm_parts x s_q x h_q / 64; the
///              small-head kernel's CTA covers all its 8 or 16 heads): each CTA walks the requests
///              and 64-row blocks of its record; split requests are merged by a combine kernel.
///   one_pass - one CTA per request (grid b x s_q x h_q / 64, or b x s_q for the small-head
///              kernel), which it attends in one pass: no plan, no partials, no combine kernel.
///   cluster_split - a thread-block cluster of C CTAs per request (cluster_split_ctas), each over a
///              contiguous part of its blocks; the C partial rows are merged through distributed
///              shared memory (sm_90a): no plan, no partials in global memory, no combine
///              kernel. Where no cluster kernel exists (other GPUs) it runs as one_pass.
enum class DecodeMode { split_kv, one_pass, cluster_split };

/// "split_kv", "one_pass", "cluster_split".
std::string_view to_string(DecodeMode m);

/// Rows a request may attend for the one-pass plan: at most 10 blocks of 64 (the V4.1 decode
/// shape: window 128 + extra top-k 512), so one request per CTA stays balanced.
inline constexpr std::int32_t kOnePassMaxRows = 640;

/// The query-head counts mla-plan's small-head decode kernel runs unpadded, one CTA covering every
/// head (kernels/src/small): 8 and 16, V4 / V4.1 at TP 8 / TP 4 and V3.2 at TP 8. The kernels'
/// dispatch uses this one.
constexpr bool small_head_count(std::int64_t h_q) { return h_q == 8 || h_q == 16; }

/// The query heads per rank mla-plan's decode kernels run for a layout (what `verify` runs and
/// `bench` times), and the other head count `bench` also times the same shape at.
struct DecodeHeads {
  /// The heads the backend's kernel runs: the local 8 or 16 unpadded where the backend runs them
  /// so (TRITON_MLA_SPARSE_DSV41: the small-head kernel), else padded (64 or 128); 0: none.
  std::int64_t h_q = 0;
  /// For 8 or 16 local heads, the other form of the same shape: 64 where h_q is unpadded, the
  /// local heads where the backend pads them to 64; 0 otherwise.
  std::int64_t compare_h_q = 0;
};

/// decode_heads(query heads per rank, the head count the backend's kernel runs them in:
/// padded_heads(), LayoutParallel::padded_query_heads, 0 when none). Pure: what verify and bench
/// run follows the resolved backend.
DecodeHeads decode_heads(std::int64_t local_heads, std::int64_t backend_heads);

/// The 64-row blocks a decode request of the given top-k sizes is walked in: ceil(topk / 64) main
/// blocks (at least one) plus ceil(extra_topk / 64) extra ones. Sizes must be >= 0.
constexpr std::int64_t decode_request_blocks(std::int64_t topk, bool has_extra, std::int64_t extra_topk) {
  return (topk > 64 ? (topk + 63) / 64 : 1) + (has_extra ? (extra_topk + 63) / 64 : 0);
}

/// What split-KV costs whatever the batch, in block times of one CTA: the partials' round trip
/// through global memory (fp32) and the combine kernel after the last block, against one pass in
/// a single wave of CTAs (b x s_q x CTAs per request <= num_sms). Fitted to the crossovers measured
/// with fp32 partials on the H100 on 2026-12-06 (docs/perf-history.md "v14": full lengths, one pass
/// faster from 72 CTAs of 10 blocks; variable lengths, split-KV faster at 545 blocks spread, one
/// pass at 672; the small-head kernel, split-KV faster at 640).
inline constexpr std::int64_t kSplitKvFixedBlocks = 5;
/// The same against one pass in more than one wave. There the list schedule of
/// one_pass_block_times() underestimates one pass (a second wave starts late on every SM it
/// reaches), which this smaller constant absorbs: fitted to the same measurements (h_q 64 variable
/// b 150: split-KV 48 us, one pass 64 us at a modelled 11 block times against 819 spread blocks).
inline constexpr std::int64_t kSplitKvFixedBlocksWaves = 3;

/// The most CTAs that share a request in cluster_split. 8 would be a legal cluster, but measured on
/// the H200 (docs/perf-history.md "v9") the exchange of fp32 partial rows through distributed shared
/// memory then costs more than split-KV's combine kernel.
inline constexpr std::int64_t kClusterSplitMaxCtas = 4;

/// Clusters of 4 CTAs (one CTA per SM, 225 KiB of shared memory each) an H200 holds at once:
/// cudaOccupancyMaxActiveClusters measured 30 on its 132 SMs (a cluster lives inside one GPC, and
/// the GPCs' SM counts leave SMs over), not 132 / 4 = 33 (docs/perf-history.md "v9").
inline constexpr std::int64_t kResidentClustersOf4 = 30;
inline constexpr std::int64_t kResidentClustersOf4Sms = 132;

/// Clusters of c CTAs (one per SM) resident at once on num_sms SMs, as the planner estimates it:
/// num_sms / c for c <= 2; for c >= 4 the H200's measured 30 clusters of 4 per 132 SMs, scaled by
/// the SM count (an estimate on other GPUs: the launch asks the device and halves C where they do
/// not fit) and divided by c / 4. Error(internal) for num_sms or c < 1.
std::int64_t resident_clusters(std::int64_t num_sms, std::int64_t c);

/// cluster_split's CTAs per request for `ctas` (b x s_q x h_q / 64) request slices of n_blocks
/// 64-row blocks on num_sms SMs: the largest power of two C <= kClusterSplitMaxCtas with
/// ctas <= resident_clusters(num_sms, C) and C <= n_blocks (1: no cluster). Inputs must be
/// >= 0 / >= 1. (The launch takes half as many where the device cannot hold every cluster at once.)
std::int64_t cluster_split_ctas(std::int64_t ctas, std::int64_t n_blocks, std::int64_t num_sms);

/// The decision and, for people, why.
struct DecodeModeChoice {
  DecodeMode mode = DecodeMode::split_kv;
  std::string reason;
  std::int64_t cluster_ctas = 1;  ///< cluster_split: CTAs per request (cluster_split_ctas); else 1
};

/// The plan for a decode shape, for requests of at most kOnePassMaxRows rows (topk + extra_topk;
/// longer ones: split_kv), with ctas = b * s_q * h_q / 64 and n_blocks the 64-row blocks of a
/// request (10 for the V4.1 shape), by the crossovers measured on the H200 (docs/perf-history.md
/// "v10") and the H100 ("v14"):
/// - one_pass for b 0 and one-block requests;
/// - cluster_split when C = cluster_split_ctas(...) >= 2, a cluster CTA attends at least two
///   blocks fewer than the request has, and split-KV would give each SM at least 5/6 of a cluster
///   CTA's blocks: 6 * ctas * n_blocks >= 5 * num_sms * ceil(n_blocks / C) (V4.1 on 132 SMs: ctas
///   55 .. 66, C 2);
/// - one_pass when split-KV would give each SM at least one pass's block times less its fixed cost
///   (kSplitKvFixedBlocks in one wave, kSplitKvFixedBlocksWaves beyond): V4.1 ctas >= 66;
///   requests of at most 5 blocks in one wave: always;
/// - split_kv otherwise (V4.1: ctas < 55).
/// Error(usage) for negative sizes, s_q or num_sms < 1, h_q other than 8, 16 or >= 64 (h_q 8 / 16:
/// the small-head kernel, one CTA per request or partition covering every head, no cluster form).
DecodeModeChoice choose_decode_mode(std::int64_t b, std::int64_t s_q, std::int64_t h_q, std::int64_t topk,
                                    bool has_extra, std::int64_t extra_topk, std::int64_t num_sms);

/// What a batch's requests attend by their lengths, counted as the kernels walk them: request i has
/// ceil(max(length_i, 1) / 64) main blocks plus ceil(extra_length_i / 64) extra ones.
struct DecodeWork {
  std::int64_t total_blocks = 0;  ///< over the batch (one query token each)
  std::int64_t max_blocks = 0;    ///< of the longest request
  /// Each request's blocks, in batch order (decode_work() fills it); empty: every request has
  /// max_blocks (the widths).
  std::vector<std::int64_t> blocks;
};

/// One pass's duration in block times: the CTAs (request-major within each of the
/// s_q x h_q / 64 slices, as the grid launches them) taken in order by whichever of the num_sms SMs
/// frees first, one CTA per SM at a time. One wave (b x s_q x h_q / 64 <= num_sms) lasts as long
/// as the longest request; more CTAs than SMs need more waves, which split-KV does not.
std::int64_t one_pass_block_times(const DecodeWork& work, std::int64_t b, std::int64_t s_q, std::int64_t h_q,
                                  std::int64_t num_sms);

/// DecodeWork of a batch: `lengths` [b] clamped to topk, `extra_lengths` [b] (empty without an
/// extra cache) clamped to extra_topk; negative lengths count as 0.
DecodeWork decode_work(const std::int32_t* lengths, std::int64_t b, std::int64_t topk,
                       const std::int32_t* extra_lengths, std::int64_t extra_topk);

/// The rule above over the lengths' work (`work`): a cluster CTA of the longest request attends
/// ceil(work.max_blocks / C) blocks, one pass lasts as long as the longest request
/// (work.max_blocks in place of n_blocks), and split-KV spreads work.total_blocks x s_q x h_q / 64
/// blocks (in place of ctas x n_blocks). The cluster's C stays that of the widths. Measured on the
/// H200 with lengths drawn uniformly below the widths: split-KV beats both other modes at b 37
/// (h_q 64 and 128) and b 60 (h_q 128), where the widths say cluster_split or one_pass
/// (docs/perf.md). Full lengths give the same choice as the widths alone.
DecodeModeChoice choose_decode_mode(std::int64_t b, std::int64_t s_q, std::int64_t h_q, std::int64_t topk,
                                    bool has_extra, std::int64_t extra_topk, std::int64_t num_sms,
                                    const DecodeWork& work);

/// choose_decode_mode(...).mode.
DecodeMode decode_plan_mode(std::int64_t b, std::int64_t s_q, std::int64_t h_q, std::int64_t topk, bool has_extra,
                            std::int64_t extra_topk, std::int64_t num_sms);

}  // namespace mlaplan

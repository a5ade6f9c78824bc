#include "mlaplan/cache/decode.hpp"

#include <algorithm>
#include <functional>
#include <queue>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/number_format.hpp"

namespace mlaplan {

namespace {

std::int32_t as_i32(std::int64_t v) {
  if (v < 0 || v > (std::int64_t{1} << 30)) throw_internal("decode plan value out of range: " + std::to_string(v));
  return static_cast<std::int32_t>(v);
}

/// "max_model_len 100", "--max-model-len 100", "the default max_model_len 1048576, the config's
/// max_position_embeddings".
std::string max_model_len_text(std::int64_t max_model_len, MaxModelLenSource source) {
  const std::string n = std::to_string(max_model_len);
  switch (source) {
    case MaxModelLenSource::flag: return "--max-model-len " + n;
    case MaxModelLenSource::config_default:
      return "the default max_model_len " + n + ", the config's max_position_embeddings";
    case MaxModelLenSource::value: break;
  }
  return "max_model_len " + n;
}

}  // namespace

DecodeBatch make_decode_batch(const BatchOptions& o, std::int64_t max_model_len, MaxModelLenSource source) {
  DecodeBatch b;
  if (o.spec_tokens < 0 || o.spec_tokens > BatchLimits::max_spec_tokens) {
    throw_usage("--spec-tokens: '" + std::to_string(o.spec_tokens) + "' is out of range; allowed 0.." +
                std::to_string(BatchLimits::max_spec_tokens));
  }
  const std::string mml = max_model_len_text(max_model_len, source);
  // A request's decode positions L - 1 .. L - 1 + K lie below max_model_len with L >= 1: K < max_model_len.
  if (o.spec_tokens >= max_model_len) {
    throw_usage("--spec-tokens: '" + std::to_string(o.spec_tokens) + "' is out of range for " + mml + "; allowed 0.." +
                std::to_string(std::max<std::int64_t>(0, max_model_len - 1)) +
                " (a request's context token and its speculative tokens lie within max_model_len)");
  }
  b.spec_tokens = o.spec_tokens;
  if (!o.context_lens.empty()) {
    if (o.batch || o.context_len) {
      throw_usage("--context-lens lists every request; it cannot be combined with --batch or --context-len");
    }
    b.context_lens = o.context_lens;
  } else {
    const std::int64_t n = o.batch.value_or(kDefaultBatch);
    const std::int64_t len = o.context_len.value_or(std::min(kDefaultContextLen, max_model_len - o.spec_tokens));
    b.defaulted = !o.batch && !o.context_len;
    if (n < 1 || n > BatchLimits::max_requests) {
      throw_usage("--batch: '" + std::to_string(n) + "' is out of range; allowed 1.." +
                  std::to_string(BatchLimits::max_requests));
    }
    b.context_lens.assign(static_cast<std::size_t>(n), len);
  }
  if (static_cast<std::int64_t>(b.context_lens.size()) > BatchLimits::max_requests) {
    throw_usage((o.context_lens_source.empty() ? std::string("--context-lens") : o.context_lens_source) + " has " +
                std::to_string(b.context_lens.size()) + " requests; allowed 1.." +
                std::to_string(BatchLimits::max_requests));
  }
  const std::string flag = o.context_lens.empty() ? "--context-len" : "--context-lens";
  for (std::size_t i = 0; i < b.context_lens.size(); ++i) {
    const auto len = b.context_lens[i];
    const std::string what = o.context_lens.empty() ? flag
                             : !o.context_lens_source.empty() && i < o.context_lens_lines.size()
                                 ? o.context_lens_source + ": line " + std::to_string(o.context_lens_lines[i])
                                 : flag + "[" + std::to_string(i) + "]";
    if (len < 1 || checked_add(len, o.spec_tokens, "context length") > max_model_len) {
      const std::string spec = source == MaxModelLenSource::value
                                   ? " minus " + std::to_string(o.spec_tokens) + " speculative tokens"
                                   : ", minus --spec-tokens " + std::to_string(o.spec_tokens);
      throw_usage(what + ": '" + std::to_string(len) + "' is out of range; allowed 1.." +
                  std::to_string(max_model_len - o.spec_tokens) + " (" + mml + (o.spec_tokens ? spec : "") + ")");
    }
  }
  const auto tokens = checked_mul(static_cast<std::int64_t>(b.context_lens.size()), 1 + o.spec_tokens, "decode tokens",
                                  ErrorKind::usage);
  if (tokens > BatchLimits::max_decode_tokens) {
    throw_usage("the batch has " + std::to_string(tokens) + " decode tokens (" + std::to_string(b.context_lens.size()) +
                " requests x (1 + --spec-tokens " + std::to_string(o.spec_tokens) + ")); allowed 1.." +
                std::to_string(BatchLimits::max_decode_tokens));
  }
  b.positions.reserve(static_cast<std::size_t>(tokens));
  for (auto len : b.context_lens) {
    for (std::int64_t k = 0; k <= o.spec_tokens; ++k) b.positions.push_back(len - 1 + k);
  }
  const bool uniform = std::all_of(b.context_lens.begin(), b.context_lens.end(),
                                   [&](std::int64_t v) { return v == b.context_lens.front(); });
  const auto n = static_cast<std::int64_t>(b.context_lens.size());
  b.description = format_grouped(n) + " request" + (n == 1 ? "" : "s");
  if (uniform) {
    b.description += " x " + format_grouped(b.context_lens.front()) + " tokens";
  } else {
    const auto [mn, mx] = std::minmax_element(b.context_lens.begin(), b.context_lens.end());
    b.description += ", " + format_grouped(*mn) + "-" + format_grouped(*mx) + " tokens";
  }
  if (o.spec_tokens) b.description += ", 1 + " + std::to_string(o.spec_tokens) + " speculative tokens each";
  b.description += " (b = " + format_grouped(tokens) + " decode tokens)";
  if (b.defaulted) b.description += ", the default batch";
  return b;
}

DecodeHeads decode_heads(std::int64_t local_heads, std::int64_t backend_heads) {
  DecodeHeads h;
  if (local_heads < 1 || backend_heads < local_heads) return h;
  h.h_q = backend_heads;
  if (small_head_count(local_heads)) {
    if (backend_heads == local_heads) h.compare_h_q = 64;  // unpadded: also the padded shape
    if (backend_heads == 64) h.compare_h_q = local_heads;  // padded: also the unpadded one
  }
  return h;
}

std::optional<SchedKernel> decode_kernel_for(const ComputeCapability& cc, std::int64_t padded_heads) {
  // 8 or 16 heads unpadded: mla-plan's small-head kernel, on the partitions of sm90-sparse.
  if (small_head_count(padded_heads)) return cc.major == 9 ? std::optional(SchedKernel::sm90_sparse) : std::nullopt;
  if (padded_heads != 64 && padded_heads != 128) return std::nullopt;
  if (cc.major == 9) return SchedKernel::sm90_sparse;
  if (cc.major == 10) return padded_heads == 64 ? SchedKernel::sm100_head64 : SchedKernel::sm100_head128;
  return std::nullopt;
}

std::string_view to_string(DecodeMode m) {
  switch (m) {
    case DecodeMode::split_kv: return "split_kv";
    case DecodeMode::one_pass: return "one_pass";
    case DecodeMode::cluster_split: return "cluster_split";
  }
  return "unknown";
}

std::int64_t resident_clusters(std::int64_t num_sms, std::int64_t c) {
  if (num_sms < 1 || c < 1) throw_internal("resident_clusters: num_sms and c must be >= 1");
  if (c <= 2) return num_sms / c;
  // Clusters of 4 or more are held back by the GPCs (a cluster lives in one): the H200's 132 SMs
  // hold 30 clusters of 4 (cudaOccupancyMaxActiveClusters, 225 KiB per CTA), not 33.
  return num_sms * kResidentClustersOf4 / kResidentClustersOf4Sms / (c / 4);
}

std::int64_t cluster_split_ctas(std::int64_t ctas, std::int64_t n_blocks, std::int64_t num_sms) {
  std::int64_t c = 1;
  while (2 * c <= kClusterSplitMaxCtas && 2 * c <= n_blocks && ctas <= resident_clusters(num_sms, 2 * c)) c *= 2;
  return c;
}

DecodeWork decode_work(const std::int32_t* lengths, std::int64_t b, std::int64_t topk,
                       const std::int32_t* extra_lengths, std::int64_t extra_topk) {
  DecodeWork w;
  for (std::int64_t i = 0; i < b; ++i) {
    const std::int64_t len = std::clamp<std::int64_t>(lengths[i], 0, topk);
    std::int64_t blocks = (std::max<std::int64_t>(len, 1) + 63) / 64;
    if (extra_lengths != nullptr) blocks += (std::clamp<std::int64_t>(extra_lengths[i], 0, extra_topk) + 63) / 64;
    w.total_blocks = checked_add(w.total_blocks, blocks, "decode blocks");
    w.max_blocks = std::max(w.max_blocks, blocks);
    w.blocks.push_back(blocks);
  }
  return w;
}

std::int64_t one_pass_block_times(const DecodeWork& work, std::int64_t b, std::int64_t s_q, std::int64_t h_q,
                                  std::int64_t num_sms) {
  if (b <= 0) return 0;
  const std::int64_t slices = checked_mul(s_q, std::max<std::int64_t>(h_q / 64, 1), "decode CTAs");
  const std::int64_t ctas = checked_mul(b, slices, "decode CTAs");
  if (ctas <= num_sms) return work.max_blocks;
  if (work.blocks.empty() || static_cast<std::int64_t>(work.blocks.size()) != b) {
    if (work.total_blocks == checked_mul(b, work.max_blocks, "decode blocks")) {
      // The widths: every CTA as long as the longest request, in whole waves.
      return checked_mul((ctas + num_sms - 1) / num_sms, work.max_blocks, "decode blocks");
    }
    // Lengths without their order: the least it can last.
    const std::int64_t spread = checked_mul(work.total_blocks, slices, "decode blocks");
    return std::max(work.max_blocks, (spread + num_sms - 1) / num_sms);
  }
  // List scheduling in launch order: each CTA goes to the SM that frees first.
  std::priority_queue<std::int64_t, std::vector<std::int64_t>, std::greater<>> free_at;
  for (std::int64_t i = 0; i < num_sms; ++i) free_at.push(0);
  std::int64_t end = 0;
  for (std::int64_t slice = 0; slice < slices; ++slice) {
    for (const std::int64_t blocks : work.blocks) {
      const std::int64_t start = free_at.top();
      free_at.pop();
      const std::int64_t done = start + blocks;
      end = std::max(end, done);
      free_at.push(done);
    }
  }
  return end;
}

DecodeModeChoice choose_decode_mode(std::int64_t b, std::int64_t s_q, std::int64_t h_q, std::int64_t topk,
                                    bool has_extra, std::int64_t extra_topk, std::int64_t num_sms) {
  const std::int64_t n =
      b >= 0 && topk >= 0 && (!has_extra || extra_topk >= 0) ? decode_request_blocks(topk, has_extra, extra_topk) : 0;
  return choose_decode_mode(b, s_q, h_q, topk, has_extra, extra_topk, num_sms,
                            DecodeWork{b > 0 ? checked_mul(b, n, "decode blocks") : 0, n, {}});
}

DecodeModeChoice choose_decode_mode(std::int64_t b, std::int64_t s_q, std::int64_t h_q, std::int64_t topk,
                                    bool has_extra, std::int64_t extra_topk, std::int64_t num_sms,
                                    const DecodeWork& work) {
  const bool small_heads = small_head_count(h_q);
  if (b < 0 || s_q < 1 || (h_q < 64 && !small_heads) || topk < 0 || num_sms < 1 || (has_extra && extra_topk < 0)) {
    throw Error(ErrorKind::usage,
                "decode plan: b, topk, extra_topk >= 0 and s_q, num_sms >= 1, h_q 8, 16 or >= 64 required (got b " +
                    std::to_string(b) + ", s_q " + std::to_string(s_q) + ", h_q " + std::to_string(h_q) + ", topk " +
                    std::to_string(topk) + ", extra_topk " + std::to_string(extra_topk) + ", num_sms " +
                    std::to_string(num_sms) + ")");
  }
  if (b == 0) return {DecodeMode::one_pass, "empty batch"};
  const std::int64_t rows = checked_add(topk, has_extra ? extra_topk : 0, "decode rows per request");
  if (rows > kOnePassMaxRows) {
    return {DecodeMode::split_kv, "a request attends up to " + std::to_string(rows) + " rows (one pass takes at most " +
                                      std::to_string(kOnePassMaxRows) + ")"};
  }
  // One pass costs as many block times as the longest request has blocks; split-KV spreads the
  // requests' blocks over the SMs (the scheduler charges each request one more block, the cost of
  // starting it) and then pays for the partials and the combine kernel; a cluster of C CTAs per
  // request (docs/perf-history.md "v9") attends ceil(blocks / C) blocks per CTA and merges the C
  // partial rows through distributed shared memory. The thresholds are the crossovers measured on
  // the H200 with the sm_90a kernels for the V4.1 shape (docs/perf-history.md "v10"): cluster_split
  // once split-KV would give each SM at least 5/6 of a cluster CTA's blocks (55 of the 64-head
  // CTAs with C 2; C 4 fits 30 clusters, too few), one pass once it would give each SM at least
  // the longest request's blocks less kSplitKvFixedBlocks, what split-KV pays whatever the batch
  // (93 CTAs x 10 blocks; measured: split-KV faster at 80, one pass at 96).
  const std::int64_t n_blocks = decode_request_blocks(topk, has_extra, extra_topk);
  // A CTA covers 64 heads (the 64-head kernels), or all of them (the small-head kernel).
  const std::int64_t slices = std::max<std::int64_t>(h_q / 64, 1);
  const std::int64_t ctas = checked_mul(checked_mul(b, s_q, "decode CTAs"), slices, "decode CTAs");
  if (n_blocks == 1) return {DecodeMode::one_pass, "a request is one 64-row block: nothing to split"};
  const std::string counts = std::to_string(ctas) + " CTAs x " + std::to_string(n_blocks) + " blocks";
  // The small-head kernel has no cluster form.
  const std::int64_t c = small_heads ? 1 : cluster_split_ctas(ctas, n_blocks, num_sms);
  const std::int64_t per_cta = (n_blocks + c - 1) / c;
  // By the lengths: the blocks split-KV would spread, and a cluster CTA of the longest request.
  const bool by_lengths = work.total_blocks != checked_mul(b, n_blocks, "decode blocks") || work.max_blocks != n_blocks;
  const std::int64_t longest = std::max<std::int64_t>(work.max_blocks, 1);
  const std::int64_t per_cta_work = (longest + c - 1) / c;
  const std::int64_t spread =
      checked_mul(checked_mul(work.total_blocks, s_q, "decode blocks"), slices, "decode blocks");
  const std::string work_counts = by_lengths ? std::to_string(spread) + " blocks by the lengths (longest request " +
                                                   std::to_string(work.max_blocks) + ")"
                                             : counts;
  // (The merge costs about one or two blocks' time: a cluster must save at least two blocks.)
  if (c >= 2 && n_blocks - per_cta >= 2 &&
      checked_mul(spread, 6, "decode blocks") >= checked_mul(num_sms, 5 * per_cta_work, "decode blocks")) {
    DecodeModeChoice ch{DecodeMode::cluster_split, work_counts + " >= 5/6 x " + std::to_string(num_sms) + " SMs x " +
                                                       std::to_string(per_cta_work) + ": " + std::to_string(c) +
                                                       " CTAs per request as one cluster, " + std::to_string(per_cta) +
                                                       " blocks each, partial rows merged in distributed shared " +
                                                       "memory, no combine"};
    ch.cluster_ctas = c;
    return ch;
  }
  // One pass lasts as long as its waves of CTAs: the longest request in one wave, more when there
  // are more CTAs than SMs (one_pass_block_times).
  const std::int64_t one_pass = one_pass_block_times(work, b, s_q, h_q, num_sms);
  const std::string waves = one_pass > longest
                                ? " (one pass: " + std::to_string(ctas) + " CTAs on " + std::to_string(num_sms) +
                                      " SMs last " + std::to_string(one_pass) + " block times, more than one wave)"
                                : "";
  // Split-KV's fixed cost against one wave of one-pass CTAs, and against more (decode_mode.hpp).
  const std::int64_t fixed = ctas <= num_sms ? kSplitKvFixedBlocks : kSplitKvFixedBlocksWaves;
  const std::string sms_waves =
      std::to_string(num_sms) + " SMs x (" + std::to_string(one_pass) + " - " + std::to_string(fixed) + ")";
  if (spread >= checked_mul(num_sms, one_pass - fixed, "decode blocks")) {
    return {DecodeMode::one_pass,
            work_counts + " >= " + sms_waves + waves + ": each request in one pass by one CTA, no combine"};
  }
  return {DecodeMode::split_kv,
          work_counts + " < " + sms_waves + waves + ": the scheduler spreads the blocks, combine merges"};
}

DecodeMode decode_plan_mode(std::int64_t b, std::int64_t s_q, std::int64_t h_q, std::int64_t topk, bool has_extra,
                            std::int64_t extra_topk, std::int64_t num_sms) {
  return choose_decode_mode(b, s_q, h_q, topk, has_extra, extra_topk, num_sms).mode;
}

std::vector<LayerTypeSchedule> plan_decode_schedules(const ModelConfig& cfg, const Topology& topo, const Layout& layout,
                                                     const DecodeBatch& batch) {
  std::vector<LayerTypeSchedule> out;
  // The heads the backend's kernel runs: padded to 64 / 128, or 8 / 16 unpadded.
  const auto heads = decode_heads(layout.parallel.local_query_heads, layout.parallel.padded_query_heads).h_q;
  const auto kernel = decode_kernel_for(layout.target.cc, heads);
  if (!kernel) return out;
  for (auto type : topo.types_present) {
    LayerTypeSchedule s;
    s.type = type;
    s.num_layers = topo.count(type);
    s.input.kernel = *kernel;
    s.input.num_sms = as_i32(layout.target.num_sms);
    s.input.s_q = 1;
    s.input.h_q = as_i32(heads);
    int ratio = 0;
    for (const auto& l : topo.layers) {
      if (l.type == type) {
        ratio = l.compress_ratio;
        break;
      }
    }
    if (type == LayerType::dsa) {
      // V3.2: the latent cache is the main cache, indexed by the top-k of the whole history; vLLM
      // passes no per-token lengths, so every token counts the full index width.
      s.topk = cfg.index_topk;
      s.page_block_size = layout.block_size;
      s.note = "no topk_length: every token counts index_topk";
      s.input.lengths.assign(batch.positions.size(), as_i32(s.topk));
    } else {
      s.topk = cfg.sliding_window;
      s.page_block_size = layout.window_block_size;
      s.input.lengths.reserve(batch.positions.size());
      for (auto pos : batch.positions) s.input.lengths.push_back(as_i32(std::min(pos + 1, cfg.sliding_window)));
      if (type != LayerType::swaonly) {
        s.input.has_extra = true;
        s.extra_page_block_size = layout.block_size / ratio;
        if (type == LayerType::c128a) {
          s.extra_topk = checked_round_up(ceil_div(layout.max_model_len, 128), 128, "c128a extra_topk");
          s.note = "extra_topk = round_up(cdiv(max_model_len, 128), 128); every compressed entry is attended";
          for (auto pos : batch.positions) s.input.extra_lengths.push_back(as_i32((pos + 1) / 128));
        } else {
          s.extra_topk = cfg.index_topk;
          for (auto pos : batch.positions) {
            s.input.extra_lengths.push_back(as_i32(std::min(cfg.index_topk, (pos + 1) / ratio)));
          }
        }
      }
    }
    s.plan = plan_schedule(s.input);
    const auto b = static_cast<std::int64_t>(s.input.lengths.size());
    s.mode = choose_decode_mode(b, s.input.s_q, s.input.h_q, s.topk, s.input.has_extra, s.extra_topk, s.input.num_sms,
                                decode_work(s.input.lengths.data(), b, s.topk,
                                            s.input.has_extra ? s.input.extra_lengths.data() : nullptr, s.extra_topk));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace mlaplan

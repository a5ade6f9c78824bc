// SGLang's start-up arithmetic for DeepSeek V4 / V4.1 (sglang.hpp). Each rule names the SGLang
// source it follows; docs/sglang.md has the same with the logs it was checked on.
#include "mlaplan/engine/sglang/sglang.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan {

namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;
constexpr double kGiB = static_cast<double>(std::int64_t{1} << 30);

/// What the CUDA context, NCCL's communicators and torch take before the weights load, against
/// torch's total, the midpoint of two logs: 1.43 GiB on an H20 at TP8 (2026-05-15: 93.58 GiB free
/// before loading of torch's 95.01) and 1.64-1.75 GiB on an H200 at TP8 (V4-Pro FP8,
/// SemiAnalysisAI/InferenceX issue 2128: 12.25 GiB free after loading against a minimum viable
/// fraction of 0.9113, so 138.05-138.16 GiB before loading of 139.80).
constexpr double kPreLoadOverheadGib = 1.58;
/// What loading takes beyond the checkpoint's bytes placed on the rank (allocator slack, kernel
/// workspaces), the midpoint of two logs: 2.19 GiB (the H20 log's ranks lost 36.55 GiB loading
/// V4-Flash-Base at TP8, whose FP8 experts placed at TP8 come to 34.36) and 1.75 GiB (V4.1-Flash
/// at TP4 x EP4 on H200 with the Engram tables on the GPU loaded 119.83 GiB against 118.08 placed:
/// ai-dynamo/dynamo pull request 15169).
constexpr double kLoadGrowthGib = 1.97;

std::string py_float(double v) { return format_shortest(v); }
std::string gb2(double bytes) { return format_fixed(bytes / kGiB, 2); }

/// The ratio-mode configurator's (G1, G2) "<prefix> memory calculation: ..." line; G2 adds its
/// fixed c128 state.
std::string ratio_mode_calculation_line(std::string_view prefix, double bpft, double available_bytes,
                                        std::optional<std::int64_t> c128_state_fixed, std::int64_t full) {
  return std::string(prefix) + " memory calculation: bytes_per_full_token=" + format_fixed(bpft, 2) +
         ", available_bytes=" + gb2(available_bytes) + " GB" +
         (c128_state_fixed ? ", c128_state_fixed=" + gb2(static_cast<double>(*c128_state_fixed)) + " GB" : "") +
         ", full_token=" + std::to_string(full);
}

std::int64_t ceil_align(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

/// Bytes per row of a paged pool whose page holds `rows` rows: DeepSeekV4SingleKVPool pads every
/// page to a multiple of 576 bytes.
double paged_row_bytes(std::int64_t rows, std::int64_t row_bytes) {
  return static_cast<double>(ceil_div(rows * row_bytes, 576) * 576) / static_cast<double>(rows);
}

std::string arch_of(const ModelConfig& cfg) {
  return cfg.family == Family::deepseek_v41 ? "DeepseekV41ForCausalLM" : "DeepseekV4ForCausalLM";
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

/// speculative_num_draft_tokens as SGLang resolves it (0: no speculative decoding). DSpark
/// verifies its block plus one token (the only count that reproduces the S4 log's SWA pool);
/// EAGLE / NEXTN default to 3 steps of top-1, 4 tokens.
std::int64_t draft_tokens_of(const ModelConfig& cfg, const SglangOptions& o) {
  if (o.speculative_algorithm.empty()) return 0;
  if (o.speculative_num_draft_tokens) return *o.speculative_num_draft_tokens;
  if (upper(o.speculative_algorithm) == "DSPARK") {
    const std::int64_t block =
        o.speculative_dspark_block_size.value_or(cfg.dspark_block_size > 0 ? cfg.dspark_block_size : 5);
    return block + 1;
  }
  return o.speculative_num_steps.value_or(3) * o.speculative_eagle_topk.value_or(1) + 1;
}

/// get_alloc_len_per_decode: max(steps x top-k, draft tokens).
std::int64_t alloc_len_of(const SglangOptions& o, std::int64_t draft) {
  const std::int64_t steps = o.speculative_num_steps.value_or(0) * o.speculative_eagle_topk.value_or(1);
  return std::max(steps, draft);
}

/// The refusal SGLang's DeepSeek V4 hook raises for these flags, or "".
std::string refusal_of(const ModelConfig& cfg, const SglangGeneration& g, const SglangInput& in, const SglangOptions& o,
                       std::int64_t attn_tp) {
  const std::string arch = arch_of(cfg);
  const std::string algo = upper(o.speculative_algorithm);
  if (cfg.family == Family::deepseek_v41) {
    if (!g.supports_v41) {
      return "SGLang builds of the " + std::string(g.id) + " configurator (" + std::string(g.period) +
             ") have no DeepseekV41ForCausalLM: V4.1 is served from the G3 generation on";
    }
    auto feature = [](const std::string& what) {
      return "DeepSeek-V4.1 does not support " + what + " yet; disable it to serve this model.";
    };
    if (!algo.empty() && algo != "DSPARK") return feature("speculative decoding other than DSpark");
    if (o.enable_hisparse) return feature("HiSparse");
    if (o.enable_two_batch_overlap) return feature("two-batch overlap");
    if (in.pp_size > 1) return feature("pipeline parallelism");
  } else {
    if (!algo.empty()) {
      const bool eagle = algo == "EAGLE" || algo == "NEXTN";  // NEXTN is EAGLE with the model's MTP layers
      if (!eagle && algo != "DSPARK") return "Only EAGLE and DSPARK speculative algorithms are supported for " + arch;
      if (eagle && o.speculative_eagle_topk.value_or(1) != 1) {
        return "Only EAGLE speculative algorithm with topk == 1 is supported for " + arch;
      }
    }
  }
  if (cfg.num_attention_heads % attn_tp != 0 ||
      (cfg.checkpoint.o_groups > 0 && cfg.checkpoint.o_groups % attn_tp != 0)) {
    return "DeepSeekV4 requires the effective attention TP size to divide both num_attention_heads=" +
           std::to_string(cfg.num_attention_heads) + " and o_groups=" + std::to_string(cfg.checkpoint.o_groups) +
           " (attention TP size " + std::to_string(attn_tp) + ")";
  }
  return {};
}

struct Counts {
  std::int64_t layers = 0;             ///< L
  std::map<int, std::int64_t> owners;  ///< ratio -> layers owning that ratio's storage (or entries, G1/G2)
  std::int64_t of(int r) const {
    const auto it = owners.find(r);
    return it == owners.end() ? 0 : it->second;
  }
};

/// The layers the generation counts.
Counts count_layers(const ModelConfig& cfg, const Topology& topo, const SglangGeneration& g) {
  Counts c;
  const auto n = static_cast<std::size_t>(cfg.num_hidden_layers);
  if (g.layers_include_draft) {
    // G1: every compress_ratios entry, the MTP entry included.
    c.layers = static_cast<std::int64_t>(cfg.compress_ratios.size());
    for (int r : cfg.compress_ratios) ++c.owners[r];
  } else if (!g.owners_and_cap_mode) {
    // G2: the stage's slice of compress_ratios (one stage: the backbone).
    c.layers = static_cast<std::int64_t>(std::min(n, cfg.compress_ratios.size()));
    for (std::size_t i = 0; i < static_cast<std::size_t>(c.layers); ++i) ++c.owners[cfg.compress_ratios[i]];
  } else {
    // G3: collect_sources_by_ratio: the backbone layers that own compressed storage.
    c.layers = static_cast<std::int64_t>(std::min(n, cfg.compress_ratios.size()));
    for (const Layer& l : topo.layers) {
      if (l.draft || l.index >= cfg.num_hidden_layers || l.compress_ratio == 0 || !l.is_kv_source) continue;
      ++c.owners[l.compress_ratio];
    }
  }
  c.owners.erase(0);
  return c;
}

}  // namespace

SglangFraction sglang_default_fraction(std::int64_t gpu_mem_mib, std::int64_t tp, std::int64_t pp, std::int64_t dp,
                                       const SglangOptions& o) {
  // memory_hook.py, handle_gpu_memory_settings: the capacity buckets.
  const double gib = static_cast<double>(gpu_mem_mib) / 1024.0;
  std::int64_t chunk = 4096, max_bs = 160;
  if (gpu_mem_mib <= 0) {
    chunk = 4096;
    max_bs = 160;
  } else if (gib < 20) {
    chunk = 2048;
    max_bs = 8;
  } else if (gib < 35) {
    chunk = 4096;
    max_bs = tp < 4 ? 48 : 160;
  } else if (gib < 60) {
    chunk = 4096;
    max_bs = tp < 4 ? 32 : 160;
  } else if (gib < 160) {
    chunk = 8192;
    max_bs = tp < 4 ? 256 : 512;
  } else {
    chunk = 16384;
    max_bs = 512;
  }
  SglangFraction f;
  f.chunked_prefill_size = o.chunked_prefill_size.value_or(chunk);
  f.cuda_graph_max_bs = o.cuda_graph_max_bs.value_or(max_bs);
  auto term = [&](const std::string& id, const std::string& what, double mib, const std::string& how) {
    f.terms.push_back(
        {id, what, static_cast<std::int64_t>(std::llround(mib * static_cast<double>(kMiB))), "derived", how});
    return mib;
  };
  double reserve = 0;
  reserve += term("base", "base reserve", 512, "memory_hook.py: 512 MiB");
  // With chunked prefill off (-1 or 0) the activations scale with max_prefill_tokens.
  const bool chunked = f.chunked_prefill_size > 0;
  const std::int64_t act =
      std::max<std::int64_t>(chunked ? f.chunked_prefill_size : o.max_prefill_tokens.value_or(16384), 2048);
  reserve += term("activation", "activations", 1.5 * static_cast<double>(act),
                  std::string(chunked ? "1.5 MiB x max(chunked_prefill_size, 2048)"
                                      : "1.5 MiB x max(max_prefill_tokens, 2048) (chunked prefill off)") +
                      " = 1.5 x " + format_grouped(act));
  reserve += term("parallel", "TP x PP", static_cast<double>(tp * pp) / 8.0 * 1024.0,
                  "TP x PP / 8 x 1024 MiB = " + std::to_string(tp) + " x " + std::to_string(pp) + " / 8 x 1024");
  // reserve_for_graph_mb: the decode graphs' term goes with --disable-cuda-graph, the DP-attention
  // term does not (it is counted whenever DP attention is on, off PD prefill nodes), and
  // --disable-cuda-graph turns the prefill graphs off too in the builds whose cuda-graph-mode
  // resolver maps it to both phases (the newest; an earlier resolver mapped it to decode only).
  if (!o.disable_cuda_graph) {
    reserve += term("decode_graphs", "decode CUDA graphs", 2.0 * static_cast<double>(f.cuda_graph_max_bs),
                    "2 MiB x cuda_graph_max_bs " + std::to_string(f.cuda_graph_max_bs));
  }
  if (o.enable_dp_attention && dp > 1) {
    double mib = 3.0 * static_cast<double>(f.cuda_graph_max_bs * dp);
    if (f.cuda_graph_max_bs > 300) mib += 1.5 * static_cast<double>(f.cuda_graph_max_bs * dp);
    reserve += term("dp_attention_graphs", "DP-attention graph buffers", mib,
                    "3 MiB x max_bs x DP" +
                        std::string(f.cuda_graph_max_bs > 300 ? " + 1.5 MiB x max_bs x DP (max_bs > 300)" : "") +
                        (o.disable_cuda_graph ? " (counted with --disable-cuda-graph too)" : ""));
  }
  if (!o.disable_cuda_graph && !o.disable_piecewise_cuda_graph) {
    reserve += term("prefill_graphs", "prefill CUDA graphs", 1536,
                    "1,536 MiB for an MLA-type backend with prefill graphs on (assumed for the dsv4 backend: read "
                    "server_args in the log to confirm)");
  }
  if (gib > 60 && reserve < 10240) {
    term("floor", "floor of 10 GiB above 60 GiB", 10240 - reserve, "reserve = max(reserve, 10,240 MiB) above 60 GiB");
    reserve = 10240;
  }
  if (o.moe_a2a_backend == "deepep" && !o.disable_cuda_graph) {
    reserve += term("deepep", "DeepEP with decode graphs", 2048, "2,048 MiB with --moe-a2a-backend deepep");
  }
  f.reserve_mib = static_cast<std::int64_t>(std::llround(reserve));
  if (gpu_mem_mib <= 0) {
    f.fraction = 0.95;
  } else {
    const double g = static_cast<double>(gpu_mem_mib);
    f.fraction = std::round((g - reserve) / g * 1000.0) / 1000.0;
  }
  return f;
}

void sglang_configure_pools(const ModelConfig& cfg, const Topology& topo, const SglangGeneration& g,
                            const SglangOptions& o, std::int64_t budget_bytes, SglangFit& fit) {
  const Counts c = count_layers(cfg, topo, g);
  const std::int64_t rope = cfg.qk_rope_head_dim;
  const std::int64_t nope = cfg.head_dim - rope;
  const std::int64_t kv_bytes = nope + 2 * rope + 8;  // 584: one FlashMLA-layout latent row
  const std::int64_t idx = cfg.index_head_dim;
  const std::int64_t idx_fp8 = idx + idx / 128 * 4;  // 132
  const std::int64_t idx_fp4 = idx / 2 + idx / 32;   // 68
  const std::int64_t head = cfg.head_dim;            // 512
  const std::int64_t c4_state = 2 * 2 * head * 4;    // fp32 (kv, score) x overlap
  const std::int64_t c4_idx_state = 2 * 2 * idx * 4;
  const std::int64_t c128_state = 2 * head * 4;
  const std::int64_t window = cfg.sliding_window;
  const std::int64_t page = fit.page_size;
  const bool spec = fit.draft_tokens > 0;
  const std::int64_t mrr = fit.requested_running_requests / fit.attn_dp_size;  // per worker
  const std::int64_t L = c.layers;
  const std::int64_t L4 = c.of(4), L128 = c.of(128), L2 = c.of(2), L1 = c.of(1);
  fit.layers = L;
  fit.layers_c4 = L4;
  fit.layers_c128 = L128;
  fit.layers_c2 = L2;
  fit.layers_c1 = L1;
  fit.ring_c4 = L4 > 0 ? (spec ? 16 : 8) : 0;
  fit.ring_c128 = L128 > 0 ? (spec ? 256 : 128) : 0;
  fit.ring_c2 =
      L2 > 0 ? (spec ? (std::int64_t{1} << std::bit_width(static_cast<std::uint64_t>(fit.draft_tokens + 1))) : 2) : 0;
  if (spec && g.asserts_ring_draft_tokens) {
    // _assert_ring_serves_draft_tokens: a verify batch writes its whole draft tail into the c4 and
    // c128 state rings; get_compress_state_write_pad: ring - window + 2 (window 8 for c4, 128 for
    // c128), 10 and 130 draft tokens with the speculative rings.
    for (const auto& [ratio, ring, layers] :
         {std::tuple<std::int64_t, std::int64_t, std::int64_t>{4, fit.ring_c4, L4}, {128, fit.ring_c128, L128}}) {
      if (layers == 0) continue;
      const std::int64_t window = ratio == 4 ? 8 : ratio;
      const std::int64_t most = ring > window ? ring - window + 2 : 0;
      if (fit.draft_tokens > most) {
        fit.error = "AssertionError: speculative_num_draft_tokens=" + std::to_string(fit.draft_tokens) +
                    " exceeds what the c" + std::to_string(ratio) +
                    " compress state ring can keep resident (ring_size=" + std::to_string(ring) + " serves at most " +
                    std::to_string(most) +
                    " draft tokens). Lower the draft count, or grow the ring in get_compress_state_ring_size().";
        return;
      }
    }
  }
  fit.swa_ratio = o.swa_full_tokens_ratio.value_or(0.1);
  const double r = fit.swa_ratio;
  const std::string P = std::string(g.log_prefix);
  const std::int64_t slots = mrr + 1;  // _get_num_req_slots
  fit.sizing_running_requests = mrr;

  auto c128_fixed = [&]() -> std::int64_t {
    if (L128 == 0 || !g.c128_state_fixed) return 0;
    const std::int64_t rows = ceil_align(slots * fit.ring_c128 + fit.ring_c128 + 1, 128);
    return checked_mul(checked_mul(rows, c128_state, "c128 state"), L128, "c128 state");
  };

  std::int64_t full = 0;
  if (!g.owners_and_cap_mode) {
    // G1 / G2: ratio mode; the state terms divide by the window (swa_page_size).
    const double ring4_w =
        static_cast<double>(fit.ring_c4 > 0 ? fit.ring_c4 : (spec ? 16 : 8)) / static_cast<double>(window);
    const double ring128_w = static_cast<double>(spec ? 256 : 128) / static_cast<double>(window);
    double bpft = r * static_cast<double>(kv_bytes * L) +
                  static_cast<double>(kv_bytes) / 4.0 * static_cast<double>(L4) +
                  static_cast<double>(kv_bytes) / 128.0 * static_cast<double>(L128) +
                  static_cast<double>(idx_fp8) / 4.0 * static_cast<double>(L4) +
                  r * ring4_w * static_cast<double>(c4_state) * static_cast<double>(L4) +
                  r * ring4_w * static_cast<double>(c4_idx_state) * static_cast<double>(L4);
    if (!g.c128_state_fixed) bpft += r * ring128_w * static_cast<double>(c128_state) * static_cast<double>(L128);
    double budget = static_cast<double>(budget_bytes);
    if (spec) {
      if (g.spec_scales_budget) {
        budget *= static_cast<double>(L) / static_cast<double>(L + 1);
      } else {
        bpft *= static_cast<double>(L + 1) / static_cast<double>(L);
      }
    }
    fit.bytes_per_full_token = bpft;
    fit.c128_state_fixed = c128_fixed();
    fit.fixed_bytes = fit.c128_state_fixed;
    const double for_tokens = std::max(budget - static_cast<double>(fit.fixed_bytes), 0.0);
    full = static_cast<std::int64_t>(for_tokens / bpft);
    full = full / page * page;
    fit.swa_mode = o.swa_full_tokens_ratio ? "ratio (explicit)" : "ratio (default)";
    fit.pools.full = full;
    fit.pools.swa = static_cast<std::int64_t>(static_cast<double>(full) * r) / page * page;
    fit.pools.c4 = full / 4;
    fit.pools.c128 = full / 128;
    fit.pools.c4_state = fit.pools.swa / window * (spec ? 16 : 8);
    fit.pools.c128_state = g.c128_state_fixed ? 0 : fit.pools.swa / window * (spec ? 256 : 128);
    if (g.prints_memory_profiling) {
      // printed by the caller (it knows the budget's inputs)
    }
    fit.log_lines.push_back(ratio_mode_calculation_line(
        P, bpft, static_cast<double>(budget_bytes),
        g.c128_state_fixed ? std::optional<std::int64_t>(fit.c128_state_fixed) : std::nullopt, full));
  } else {
    // G3: coefficient plus bias.
    const double swa_row = paged_row_bytes(page, kv_bytes);
    const double c4_row = paged_row_bytes(page / 4, kv_bytes);
    const double c128_row = paged_row_bytes(std::max<std::int64_t>(page / 128, 1), kv_bytes);
    double per_swa = swa_row * static_cast<double>(L) + static_cast<double>(fit.ring_c4) / static_cast<double>(page) *
                                                            static_cast<double>(c4_state + c4_idx_state) *
                                                            static_cast<double>(L4);
    // Cap mode: the operator did not pass --swa-full-tokens-ratio, the request cap is known (V4
    // always sets it) and chunked prefill is on.
    const bool cap_mode = !o.swa_full_tokens_ratio && fit.chunk_per_rank > 0 && window > 0;
    if (cap_mode) {
      const std::int64_t draft = spec ? fit.draft_tokens : 1;
      std::int64_t decode_alloc = page;
      if (spec)
        decode_alloc =
            o.disable_overlap_schedule ? alloc_len_of(o, fit.draft_tokens) : 2 * alloc_len_of(o, fit.draft_tokens);
      fit.swa_per_request = window + o.swa_eviction_interval * draft + page + decode_alloc;
      const std::int64_t chunks = o.disable_overlap_schedule ? 1 : 2;
      fit.swa_request_cap = fit.swa_per_request * mrr + chunks * fit.chunk_per_rank + page;
      fit.swa_prefix_tails = o.swa_prefix_tails.value_or(o.disable_radix_cache ? 0 : 4 * mrr);
      fit.swa_cap_tokens = ceil_align(fit.swa_request_cap + fit.swa_prefix_tails * (window + page), page);
      fit.swa_mode = "cap";
    } else {
      fit.swa_mode = o.swa_full_tokens_ratio ? "ratio (explicit)" : "ratio (default)";
    }
    double bpft = cap_mode ? 0.0 : r * per_swa;
    for (const auto& [ratio, layers] : c.owners) {
      double per = 0;
      if (ratio == 1 || ratio == 2) {
        per = static_cast<double>(kv_bytes + idx_fp4) / static_cast<double>(ratio);
      } else if (ratio == 4) {
        per = c4_row / 4.0 + static_cast<double>(idx_fp8) / 4.0;
      } else if (ratio == 128) {
        per = c128_row / 128.0;
      }
      bpft += per * static_cast<double>(layers);
    }
    if (spec) {
      const double infl = static_cast<double>(L + 1) / static_cast<double>(L);
      bpft *= infl;
      per_swa *= infl;
    }
    fit.bytes_per_full_token = bpft;
    fit.bytes_per_swa_token = per_swa;
    fit.c128_state_fixed = c128_fixed();
    if (L2 > 0) {
      const std::int64_t rows = ceil_align(slots * fit.ring_c2 + fit.ring_c2 + 1, 2);
      fit.c2_state_fixed = checked_mul(checked_mul(rows, 2 * head * 4, "ratio-2 state"), L2, "ratio-2 state");
    }
    fit.swa_fixed = cap_mode ? static_cast<std::int64_t>(static_cast<double>(fit.swa_cap_tokens) * per_swa) : 0;
    fit.fixed_bytes = fit.c128_state_fixed + fit.c2_state_fixed + fit.swa_fixed;
    const double for_tokens = std::max(static_cast<double>(budget_bytes - fit.fixed_bytes), 0.0);
    full = static_cast<std::int64_t>(for_tokens / bpft);
    if (full <= 0 && cap_mode) {
      fit.error = "RuntimeError: The DSV4 SWA pool cap (" + std::to_string(fit.swa_cap_tokens) + " tokens, " +
                  gb2(static_cast<double>(fit.swa_fixed)) +
                  " GB) leaves no room for the full KV pool within the available " +
                  gb2(static_cast<double>(budget_bytes)) +
                  " GB. Reduce --max-running-requests, lower --swa-prefix-tails or SGLANG_SWA_EVICTION_INTERVAL, or "
                  "increase --mem-fraction-static.";
      return;
    }
    full = full / page * page;
    fit.pools.full = full;
    fit.pools.swa =
        cap_mode ? fit.swa_cap_tokens : static_cast<std::int64_t>(static_cast<double>(full) * r) / page * page;
    if (cap_mode) {
      fit.log_lines.push_back("DSV4 SWA sizing: mode=cap, swa_tokens=" + std::to_string(fit.pools.swa) +
                              ", request_cap+headroom=" + std::to_string(fit.swa_cap_tokens) +
                              ", prefix_tails=" + std::to_string(fit.swa_prefix_tails));
    } else {
      if (window + page >= fit.pools.swa) {
        fit.error = "ValueError: SWA pool (" + std::to_string(fit.pools.swa) +
                    " tokens) cannot hold even one request: the prefill admission floor is sliding_window_size (" +
                    std::to_string(window) + ") + page_size (" + std::to_string(page) +
                    "). Increase --swa-full-tokens-ratio or the total KV budget.";
        return;
      }
      fit.log_lines.push_back("DSV4 SWA sizing: mode=" + fit.swa_mode + ", swa_tokens=" +
                              std::to_string(fit.pools.swa) + ", swa_full_tokens_ratio=" + py_float(r));
    }
    fit.pools.c4 = full / 4;
    fit.pools.c128 = full / 128;
    fit.pools.c4_state = fit.pools.swa / page * fit.ring_c4;
    fit.pools.c128_state = 0;
    fit.log_lines.push_back(
        "DSV4 memory calculation: unified=False, unified_fp8=False, dspark_draft_bf16=False, bytes_per_full_token=" +
        format_fixed(bpft, 2) + ", available_bytes=" + gb2(static_cast<double>(budget_bytes)) +
        " GB, c128_state_fixed=" + gb2(static_cast<double>(fit.c128_state_fixed)) + " GB, c2_state_fixed=" +
        gb2(static_cast<double>(fit.c2_state_fixed)) + " GB, swa_fixed=" + gb2(static_cast<double>(fit.swa_fixed)) +
        " GB, swa_ring_fixed=0.00 GB, c4_state_fixed=0.00 GB, full_token=" + std::to_string(full));
  }
  fit.log_lines.push_back(
      P + " pool sizes: full=" + std::to_string(fit.pools.full) + ", swa=" + std::to_string(fit.pools.swa) +
      ", c4=" + std::to_string(fit.pools.c4) + ", c128=" + std::to_string(fit.pools.c128) +
      ", c4_state=" + std::to_string(fit.pools.c4_state) + ", c128_state=" + std::to_string(fit.pools.c128_state));
  if (full <= 0) {
    // MemoryPoolConfig.__post_init__ (older builds print the first sentence only).
    fit.error = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.";
    if (g.c128_state_fixed) fit.error += " Current value: mem_fraction_static=" + py_float(fit.mem_fraction_static);
  }
}

namespace {

/// The budget of a fraction (the mixin's _profile_available_bytes).
std::int64_t budget_of(std::int64_t available, std::int64_t pre, double fraction) {
  const double rest = static_cast<double>(available) / kGiB - static_cast<double>(pre) / kGiB * (1.0 - fraction);
  return static_cast<std::int64_t>(rest * kGiB);
}

}  // namespace

namespace {
SglangFit fit_of(const ModelConfig& cfg, const Topology& topo, const Target& target, const SglangInput& in,
                 const SglangOptions& o);
}  // namespace

SglangFit sglang_fit(const ModelConfig& cfg, const Topology& topo, const Target& target, const SglangInput& in,
                     const SglangOptions& o) {
  SglangFit fit = fit_of(cfg, topo, target, in, o);
  if (fit.fits || fit.refused || !fit.decided) return fit;
  // What would start instead, each found by SGLang's own arithmetic.
  auto starts = [&](const SglangOptions& alt, bool whole_request) {
    const SglangFit f = fit_of(cfg, topo, target, in, alt);
    return f.fits && f.left_after_pools_bytes >= 0 && (!whole_request || f.pools.full >= f.context_len);
  };
  const double from = fit.mem_fraction_static;
  for (const bool whole : {true, false}) {
    std::optional<double> found;
    for (int milli = static_cast<int>(std::floor(from * 1000.0)) + 1; milli <= 990; ++milli) {
      SglangOptions alt = o;
      alt.mem_fraction_static = milli / 1000.0;
      if (starts(alt, whole)) {
        found = milli / 1000.0;
        break;
      }
    }
    if (found) {
      fit.suggestions.push_back(
          "--mem-fraction-static " + format_shortest(*found) +
          (whole ? " (the pool then holds one request of context_len " + format_grouped(fit.context_len) + ")"
                 : " (starts; the pool holds less than one request of context_len)"));
      fit.suggestion_flags.push_back({"--mem-fraction-static", format_shortest(*found)});
      break;
    }
  }
  if (fit.swa_mode == "cap" && fit.budget_bytes > 0) {
    for (std::int64_t n = fit.requested_running_requests / 2; n >= fit.attn_dp_size && n >= 1; n /= 2) {
      SglangOptions alt = o;
      alt.max_running_requests = n;
      if (starts(alt, false)) {
        fit.suggestions.push_back("--max-running-requests " + std::to_string(n));
        fit.suggestion_flags.push_back({"--max-running-requests", std::to_string(n)});
        break;
      }
    }
    if (fit.swa_prefix_tails > 0) {
      SglangOptions alt = o;
      alt.swa_prefix_tails = 0;
      if (starts(alt, false)) {
        fit.suggestions.push_back("--swa-prefix-tails 0 (no cached prefix tails kept addressable)");
        fit.suggestion_flags.push_back({"--swa-prefix-tails", "0"});
      }
    }
  }
  if (cfg.family == Family::deepseek_v41 && !o.engram_host_table && in.engram_bytes > 0 && !in.weights_given) {
    SglangInput host = in;
    host.weights_bytes -= in.engram_bytes;
    host.engram_bytes = 0;
    SglangOptions alt = o;
    alt.engram_host_table = true;
    const SglangFit f = fit_of(cfg, topo, target, host, alt);
    if (f.fits && f.left_after_pools_bytes >= 0) {
      fit.suggestions.push_back(
          "the Engram tables in host memory (SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE=1, mla-plan "
          "--engram offload): " +
          format_gib(in.engram_bytes) + " less per GPU, max_total_num_tokens " + format_grouped(f.pools.full));
      fit.suggestion_flags.push_back({"--engram", "offload"});
    }
  }
  return fit;
}

namespace {

SglangFit fit_of(const ModelConfig& cfg, const Topology& topo, const Target& target, const SglangInput& in,
                 const SglangOptions& o) {
  if (cfg.family == Family::deepseek_v32) {
    throw_usage(
        "--engine sglang: mla-plan models SGLang's DeepSeek V4 / V4.1 pools (DSV4PoolConfigurator); V3.2's "
        "pool is not modelled");
  }
  const SglangGeneration& g = find_sglang_generation(o.generation);
  SglangFit fit;
  fit.generation = &g;
  fit.architecture = arch_of(cfg);
  fit.context_len = in.context_len > 0 ? in.context_len : cfg.max_position_embeddings;
  fit.attn_dp_size = o.enable_dp_attention ? in.dp_size : 1;
  fit.workers = in.dp_size;
  fit.attn_tp_size = o.enable_dp_attention ? in.tp_size / std::max<std::int64_t>(in.dp_size, 1) : in.tp_size;
  if (o.enable_dp_attention && (in.dp_size < 1 || in.tp_size % in.dp_size != 0)) {
    throw_usage("--enable-dp-attention: --tp-size " + std::to_string(in.tp_size) + " is not a multiple of --dp-size " +
                std::to_string(in.dp_size));
  }
  fit.draft_tokens = draft_tokens_of(cfg, o);
  if (in.pp_size > 1) {
    // G2 / G3 slice compress_ratios to each stage (get_pp_indices) and keep the smallest pool over
    // the stages; mla-plan prices the whole backbone on every GPU.
    fit.warnings.push_back(
        "--pp-size " + std::to_string(in.pp_size) +
        ": SGLang sizes each pipeline stage's pools from its own slice of compress_ratios (get_pp_indices) and "
        "keeps the smallest over the stages; mla-plan prices every backbone layer on each GPU (not modelled "
        "per stage), so its token counts are a lower bound, up to " +
        std::to_string(in.pp_size) + " times below SGLang's");
  }

  // The GPU's capacity as memory_hook reads it: torch's total, MiB.
  const std::int64_t total = target.runtime_memory_bytes > 0 ? target.runtime_memory_bytes : target.memory_bytes;
  fit.gpu_mem_mib = total / kMiB;

  // server_args: the capacity defaults and the fraction.
  const SglangFraction frac = sglang_default_fraction(fit.gpu_mem_mib, in.tp_size, in.pp_size, in.dp_size, o);
  fit.chunked_prefill_size = frac.chunked_prefill_size;
  fit.cuda_graph_max_bs = frac.cuda_graph_max_bs;
  // server_args divides by the DP size with Python's floor division (-1 // 8 is -1: still off).
  fit.chunk_per_rank = fit.chunked_prefill_size;
  if (o.enable_dp_attention && in.dp_size > 1) {
    fit.chunk_per_rank = fit.chunked_prefill_size >= 0 ? fit.chunked_prefill_size / in.dp_size : -1;
  }
  fit.max_prefill_tokens = o.max_prefill_tokens.value_or(16384);
  fit.fraction_default = !o.mem_fraction_static.has_value();
  fit.mem_fraction_static = o.mem_fraction_static.value_or(frac.fraction);
  if (fit.fraction_default) {
    fit.reserve = frac.terms;
    fit.reserve_mib = frac.reserve_mib;
  }

  // The V4 overrides (arg_groups/model_overrides/deepseek_v4.py, deepseek_v4_hook.py).
  fit.page_size = 256;
  fit.overrides.push_back("Use dsv4 attention backend for " + fit.architecture + ", setting page_size to 256.");
  if (o.page_size && *o.page_size != 256) {
    fit.notes.push_back("--page-size " + std::to_string(*o.page_size) +
                        " is replaced: the dsv4 attention backend sets page_size to 256 on CUDA");
  }
  if (cfg.family == Family::deepseek_v4 && !o.swa_full_tokens_ratio) {
    fit.overrides.push_back("Setting swa_full_tokens_ratio to 0.1 for " + fit.architecture + ".");
  }
  fit.requested_running_requests = o.max_running_requests.value_or(256);
  if (!o.max_running_requests)
    fit.overrides.push_back("Setting max_running_requests to 256 for " + fit.architecture + ".");
  if (o.kv_cache_dtype == "bf16" || o.kv_cache_dtype == "bfloat16") {
    fit.warnings.push_back(
        "--kv-cache-dtype " + o.kv_cache_dtype +
        ": SGLang's V4 pool stores uint8 rows; recent builds fail an assertion on a bfloat16 pool "
        "(sgl-project/sglang issues 33194, 25118), builds of May 2026 ran it and priced 584-byte rows");
  }
  if (fit.requested_running_requests < fit.attn_dp_size) {
    fit.notes.push_back("--max-running-requests " + std::to_string(fit.requested_running_requests) +
                        " is below the DP size: a worker gets 0 (raise it to at least one per worker)");
  }

  fit.refusal = refusal_of(cfg, g, in, o, std::max<std::int64_t>(fit.attn_tp_size, 1));
  if (!fit.refusal.empty()) {
    fit.refused = true;
    fit.decided = false;
    fit.verdict = "refused: " + fit.refusal;
    return fit;
  }

  // The budget (model_runner_kv_cache_mixin.py, _profile_available_bytes).
  const std::int64_t pre = o.free_before_load_gib ? static_cast<std::int64_t>(*o.free_before_load_gib * kGiB)
                                                  : total - static_cast<std::int64_t>(kPreLoadOverheadGib * kGiB);
  fit.free_before_load_bytes = pre;
  fit.terms.push_back({"free_before_load", "free memory before loading (pre_model_load_memory)", pre,
                       o.free_before_load_gib ? "given" : "estimated",
                       o.free_before_load_gib
                           ? "--free-before-load-gib"
                           : "the GPU's " + format_gib(total) + " less " + format_fixed(kPreLoadOverheadGib, 2) +
                                 " GiB of CUDA context and communicators (two logs: 1.43 GiB on H20 TP8, 1.64-1.75 on "
                                 "H200 TP8)"});
  fit.terms.push_back(
      {"weights", "weights this rank loads", in.weights_bytes, in.weights_given ? "given" : "derived", in.weights_how});
  const double growth_gib = in.load_overhead_gib.value_or(kLoadGrowthGib);
  const auto growth = static_cast<std::int64_t>(growth_gib * kGiB);
  fit.terms.push_back({"load_growth", "what loading takes beyond the weights", growth,
                       in.load_overhead_gib ? "given" : "estimated",
                       in.load_overhead_gib ? "--load-overhead-gib"
                                            : "midpoint of two logs: 2.19 GiB (V4-Flash-Base, H20 TP8) and 1.75 GiB "
                                              "(V4.1-Flash, H200 TP4 x EP4, Engram tables on the GPU)"});
  fit.available_after_load_bytes = pre - in.weights_bytes - growth;
  fit.terms.push_back({"available_after_load", "free after loading (available_now)", fit.available_after_load_bytes,
                       "derived", "free before loading - weights - growth"});
  fit.outside_budget_bytes = static_cast<std::int64_t>(static_cast<double>(pre) * (1.0 - fit.mem_fraction_static));
  fit.terms.push_back({"outside_budget", "kept outside the static share", fit.outside_budget_bytes, "derived",
                       "free before loading x (1 - mem_fraction_static " + py_float(fit.mem_fraction_static) + ")"});
  fit.budget_bytes = budget_of(fit.available_after_load_bytes, pre, fit.mem_fraction_static);
  fit.min_viable_fraction =
      pre > 0 ? 1.0 - static_cast<double>(fit.available_after_load_bytes) / static_cast<double>(pre) : 1.0;
  fit.decided = in.weights_known || in.weights_given;

  fit.log_lines.push_back("Load weight begin. avail mem=" + gb2(static_cast<double>(pre)) + " GB");
  for (const auto& line : fit.overrides) (void)line;
  if (g.prints_memory_profiling) {
    fit.log_lines.push_back(
        "Memory profiling: available_gpu_memory=" + gb2(static_cast<double>(fit.available_after_load_bytes)) +
        " GB, total_gpu_memory=" + gb2(static_cast<double>(pre)) + " GB, mem_fraction_static=" +
        py_float(fit.mem_fraction_static) + ", rest_memory=" + gb2(static_cast<double>(fit.budget_bytes)) + " GB");
  }
  if (fit.available_after_load_bytes < 0) {
    // The weights do not load: CUDA runs out of memory before SGLang budgets anything.
    fit.error = "the weights do not load: " + format_gib(in.weights_bytes + growth) +
                " per GPU (weights and load-time growth) against " + format_gib(pre) +
                " free before loading (CUDA out of memory while loading)";
  } else if (fit.budget_bytes <= 0) {
    const double y = fit.min_viable_fraction;
    const double x = std::ceil(y * 1000.0) / 1000.0;
    fit.error = "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=" +
                py_float(fit.mem_fraction_static) + ". Raise --mem-fraction-static above " + format_fixed(x, 3) +
                " (minimum viable = 1 - available/pre = " + format_fixed(y, 4) +
                "). If using speculative decoding, draft weights are now counted.";
  } else {
    sglang_configure_pools(cfg, topo, g, o, fit.budget_bytes, fit);
  }

  if (fit.error.empty()) {
    // Token constraints (_apply_token_constraints): --max-total-tokens below the profiled count
    // re-runs the sizing on the constraint path.
    if (o.max_total_tokens) {
      if (*o.max_total_tokens < fit.pools.full) {
        fit.profiled_full = fit.pools.full;
        std::int64_t full = *o.max_total_tokens / fit.page_size * fit.page_size;
        if (!g.c128_state_fixed) {
          // G1's resolve: the pools again from int(cap x bytes_per_full_token) bytes (its float
          // rounding can give one page less than the cap), a second "memory calculation" line,
          // then the one "pool sizes" line.
          const double bpft = fit.bytes_per_full_token;
          const auto bytes = static_cast<std::int64_t>(static_cast<double>(*o.max_total_tokens) * bpft);
          full = static_cast<std::int64_t>(static_cast<double>(bytes) / bpft) / fit.page_size * fit.page_size;
          if (!fit.log_lines.empty() && fit.log_lines.back().find(" pool sizes: ") != std::string::npos) {
            fit.log_lines.pop_back();
          }
          fit.log_lines.push_back(
              ratio_mode_calculation_line(g.log_prefix, bpft, static_cast<double>(bytes), std::nullopt, full));
        }
        const double r = fit.swa_ratio;
        fit.pools.full = full;
        if (fit.swa_mode != "cap")
          fit.pools.swa = static_cast<std::int64_t>(static_cast<double>(full) * r) / fit.page_size * fit.page_size;
        fit.pools.c4 = full / 4;
        fit.pools.c128 = full / 128;
        const std::int64_t divisor = g.owners_and_cap_mode ? fit.page_size : cfg.sliding_window;
        fit.pools.c4_state = fit.pools.swa / divisor *
                             (fit.ring_c4 > 0 ? fit.ring_c4 : (fit.draft_tokens > 0 ? 16 : 8)) *
                             (fit.layers_c4 > 0 ? 1 : 0);
        if (!g.c128_state_fixed) {
          // G1 sizes the c128 state pool from the SWA pool too (G2 and G3 make it a fixed term).
          fit.pools.c128_state =
              fit.layers_c128 > 0 ? fit.pools.swa / cfg.sliding_window * (fit.draft_tokens > 0 ? 256 : 128) : 0;
        }
        fit.log_lines.push_back(std::string(g.log_prefix) + " pool sizes: full=" + std::to_string(fit.pools.full) +
                                ", swa=" + std::to_string(fit.pools.swa) + ", c4=" + std::to_string(fit.pools.c4) +
                                ", c128=" + std::to_string(fit.pools.c128) +
                                ", c4_state=" + std::to_string(fit.pools.c4_state) +
                                ", c128_state=" + std::to_string(fit.pools.c128_state));
        if (full <= 0) fit.error = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.";
      } else {
        fit.warnings.push_back("max_total_tokens=" + std::to_string(*o.max_total_tokens) +
                               " is larger than the profiled value " + std::to_string(fit.pools.full) +
                               ". Use the profiled value instead.");
      }
    }
  }
  if (!fit.error.empty()) {
    fit.fits = false;
    fit.verdict = (fit.decided ? "does not start: " : "not decided (the weights are not all known): ") + fit.error;
    return fit;
  }

  // resolve_max_num_reqs: V4 always sets the request cap.
  const std::int64_t per_worker = fit.requested_running_requests / fit.attn_dp_size;
  fit.max_running_requests = std::min(per_worker, fit.pools.full / 2);
  if (fit.max_running_requests < per_worker) {
    fit.running_requests_reduced = true;
    fit.warnings.push_back("max_running_requests was reduced from the requested " + std::to_string(per_worker) +
                           " to " + std::to_string(fit.max_running_requests) +
                           " (per dp worker) due to the available KV cache capacity.");
  }
  // finalize_with_max_running_requests (G2, G3); G1 sized the c128 state from the SWA pool.
  fit.pools.c128_state_final = !g.c128_state_fixed   ? fit.pools.c128_state
                               : fit.layers_c128 > 0 ? (fit.max_running_requests + 1) * fit.ring_c128
                                                     : 0;
  fit.request_table_bytes =
      checked_mul(checked_mul(fit.max_running_requests + 1, fit.context_len, "request table"), 4, "request table");
  fit.left_after_pools_bytes = fit.outside_budget_bytes - fit.request_table_bytes;
  if (fit.left_after_pools_bytes < 0) {
    fit.warnings.push_back("the request table (" + format_gib(fit.request_table_bytes) + ": (" +
                           std::to_string(fit.max_running_requests) + " + 1) x context_len " +
                           format_grouped(fit.context_len) + " x 4 B) exceeds the " +
                           format_gib(fit.outside_budget_bytes) +
                           " that --mem-fraction-static leaves outside the pools: SGLang runs out of memory allocating "
                           "it or capturing graphs");
  } else if (static_cast<double>(fit.left_after_pools_bytes) < 2.0 * kGiB && !o.disable_cuda_graph) {
    fit.warnings.push_back(
        "after the pools and the request table " + format_gib(fit.left_after_pools_bytes) +
        " are left for CUDA graphs and activations (the H20 log's graphs took 1.93 GiB at max_bs 320)");
  }
  fit.requests_at_context = static_cast<double>(fit.pools.full) / static_cast<double>(fit.context_len);
  const std::int64_t admission = cfg.sliding_window + fit.page_size;
  fit.swa_requests = admission > 0 ? fit.pools.swa / admission : 0;
  fit.total_tokens = checked_mul(fit.pools.full, fit.workers, "tokens");
  fit.total_requests_at_context = fit.requests_at_context * static_cast<double>(fit.workers);
  fit.log_lines.push_back("max_total_num_tokens=" + std::to_string(fit.pools.full) +
                          ", chunked_prefill_size=" + std::to_string(fit.chunk_per_rank) +
                          ", max_prefill_tokens=" + std::to_string(fit.max_prefill_tokens) +
                          ", max_running_requests=" + std::to_string(fit.max_running_requests) + ", context_len=" +
                          std::to_string(fit.context_len) + ", available_gpu_mem=(after CUDA graphs: not modelled)");
  fit.fits = fit.decided;
  if (!fit.decided) {
    fit.verdict =
        "not decided: the weights are not all known; pass the model directory with its safetensors files, "
        "or --weights-gib";
  } else {
    fit.verdict = "starts: max_total_num_tokens=" + format_grouped(fit.pools.full) + " per worker (" +
                  format_fixed(fit.requests_at_context, 2) + " requests of context_len " +
                  format_grouped(fit.context_len) +
                  "), max_running_requests=" + std::to_string(fit.max_running_requests) +
                  (fit.workers > 1 ? ", " + std::to_string(fit.workers) + " workers" : std::string());
  }
  return fit;
}

}  // namespace

}  // namespace mlaplan

#include "mlaplan/rules/rules.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

#include "mlaplan/base/text.hpp"
#include "mlaplan/rules/head_padding.hpp"

namespace mlaplan {

const std::vector<RuleInfo>& rule_catalogue() {
  static const std::vector<RuleInfo> rules = {
      {"backend.attention_backend", "--attention-backend names a backend vLLM runs for the family"},
      {"backend.arch",
       "a backend of the family runs on the compute capability (FlashMLA: 9.x, 10.x; FlashInfer: 10.x, 12.x)"},
      {"backend.fused_attention", "the fused FlashMLA path: SM100, 8 heads per o_group, a FlashMLA kv layout"},
      {"backend.kv_cache_dtype", "the chosen backend stores the --kv-cache-dtype (what auto becomes depends on it)"},
      {"backend.indexer_cache_dtype", "fp8 or fp4 (fp4 for V4/V4.1 only)"},
      {"backend.block_size",
       "the backend's kernel block size: V4.1 64 on SM90, 128 otherwise (SM120: 64 states a page); V4.0 256; V3.2 64"},
      {"backend.tensor_parallel", "the TP size divides the query heads"},
      {"backend.query_heads", "the query heads per rank pad to a head count the backend's kernel has"},
      {"backend.pipeline_cut", "V4.1: no pipeline stage cut inside a KV-sharing group"},
      {"backend.dcp_tensor_parallel", "decode context parallelism: the DCP size divides the TP size"},
      {"backend.dcp_indexer_compression",
       "decode context parallelism: vLLM's sparse indexer refuses a compressed indexer cache (V4.0, V4.1)"},
      {"backend.dcp_interleave",
       "decode context parallelism: vLLM's sparse indexer takes cp_kv_cache_interleave_size 1"},
      {"spec.no_draft_layers", "speculative tokens need draft layers in the config"},
      {"spec.mtp_tokens", "MTP: num_speculative_tokens at most n_predict, or a multiple of it"},
      {"spec.dspark_block_size", "DSpark: num_speculative_tokens at least dspark_block_size (versions disagree)"},
      {"spec.dspark_parallel", "DSpark: no pipeline parallelism and no decode context parallelism"},
      {"backend.model_dtype", "the model runs in bfloat16"},
      {"backend.head_size", "head size 512 (V4/V4.1: 448 NoPE + 64 RoPE); 576 for V3.2 (512 latent + 64 RoPE)"},
      {"backend.kv_heads", "one shared KV latent (num_key_value_heads 1)"},
      {"backend.topk_width", "the decode kernel's index widths (window, index_topk) are multiples of 64"},
      {"kernel.head_padding",
       "query heads per rank padded to the kernel's head count: the idle share, and for 8 or 16 heads what running "
       "them unpadded saves where it was measured on the GPU"},
      {"kernel.shape", "every kernel instantiation the layout needs exists for the backend on the target"},
  };
  return rules;
}

namespace {

LayoutCheck make_check(std::string id, Severity sev, ErrorKind kind, std::string message, std::string fix = {},
                       std::string path = {}) {
  LayoutCheck c;
  c.finding.id = std::move(id);
  c.finding.severity = sev;
  c.finding.message = std::move(message);
  c.finding.fix = std::move(fix);
  c.finding.path = std::move(path);
  c.kind = kind;
  return c;
}
LayoutCheck usage_check(std::string id, std::string message) {
  return make_check(std::move(id), Severity::error, ErrorKind::usage, std::move(message));
}
LayoutCheck unsupported_check(std::string id, std::string message, std::string fix = {}, std::string path = {}) {
  return make_check(std::move(id), Severity::error, ErrorKind::unsupported, std::move(message), std::move(fix),
                    std::move(path));
}
LayoutCheck warning_check(std::string id, std::string message, std::string fix = {}, std::string path = {}) {
  return make_check(std::move(id), Severity::warning, ErrorKind::unsupported, std::move(message), std::move(fix),
                    std::move(path));
}
LayoutCheck info_check(std::string id, std::string message, std::string fix = {}, std::string path = {}) {
  return make_check(std::move(id), Severity::info, ErrorKind::usage, std::move(message), std::move(fix),
                    std::move(path));
}

/// A list of sizes or layers in a message: bounded (join_bounded, kMessageMaxItems).
std::string join(const std::vector<std::int64_t>& v) { return join_bounded(v); }

std::string fraction(std::int64_t num, std::int64_t den) {
  const std::int64_t g = std::gcd(num, den);
  return std::to_string(num / g) + "/" + std::to_string(den / g);
}

// The value of a range-checked integer flag, or a usage check naming it.
bool in_range(std::vector<LayoutCheck>& checks, std::string_view flag, std::int64_t v, std::int64_t lo, std::int64_t hi,
              std::string_view why = {}) {
  if (v >= lo && v <= hi) return true;
  std::string msg = std::string(flag) + ": '" + std::to_string(v) + "' is out of range; allowed " + std::to_string(lo) +
                    ".." + std::to_string(hi);
  if (!why.empty()) msg += " (" + std::string(why) + ")";
  std::string id = "layout." + std::string(flag.substr(2));
  std::replace(id.begin(), id.end(), '-', '_');
  checks.push_back(usage_check(std::move(id), msg));
  return false;
}

// Stage of each layer (backbone by partition, draft layers on the last stage).
std::vector<std::int64_t> stage_of_layers(const Topology& topo, const std::vector<std::int64_t>& partition) {
  std::vector<std::int64_t> stage(topo.layers.size(), static_cast<std::int64_t>(partition.size()) - 1);
  std::size_t layer = 0;
  for (std::size_t s = 0; s < partition.size(); ++s) {
    for (std::int64_t k = 0; k < partition[s] && layer < topo.layers.size(); ++k, ++layer) {
      stage[layer] = static_cast<std::int64_t>(s);
    }
  }
  for (std::size_t i = 0; i < topo.layers.size(); ++i) {
    if (topo.layers[i].draft) stage[i] = static_cast<std::int64_t>(partition.size()) - 1;
  }
  return stage;
}

struct PpViolation {
  std::int64_t layer = 0;
  std::int64_t source = 0;
  std::string what;
};

// The pairs a pipeline cut must not separate, in layer order: each backbone layer with its KV
// source, its index source and the candidate source it is constrained by. fn(layer, source, what)
// returns true to stop.
template <class Fn>
void for_each_sharing_pair(const Topology& topo, Fn&& fn) {
  const auto cand = topo.candidate_source();
  for (const Layer& l : topo.layers) {
    if (l.draft) continue;
    if (l.kv_source && *l.kv_source != l.index &&
        fn(l.index, *l.kv_source, "reads the compressed KV and indexer-key caches of its KV source")) {
      return;
    }
    if (l.index_source && *l.index_source != l.index &&
        fn(l.index, *l.index_source, "reuses the top-k indices of its index source")) {
      return;
    }
    if (cand && l.is_index_source && l.index > *cand &&
        fn(l.index, *cand, "is constrained by the candidate blocks of the candidate source")) {
      return;
    }
  }
}

// The first backbone layer whose KV source, index source or candidate source sits on another stage.
std::optional<PpViolation> first_pp_violation(const Topology& topo, const std::vector<std::int64_t>& stage) {
  std::optional<PpViolation> v;
  for_each_sharing_pair(topo, [&](std::int64_t layer, std::int64_t source, const char* what) {
    if (stage[static_cast<std::size_t>(layer)] == stage[static_cast<std::size_t>(source)]) return false;
    v = PpViolation{layer, source, what};
    return true;
  });
  return v;
}

// The stage starts that would cut a sharing group: cut[b] when a stage starting at backbone layer b
// (0 < b < n) separates a backbone layer from its KV source, index source or candidate source (a
// draft layer sits on the last stage, as the last backbone layer does). The pairs of
// for_each_sharing_pair, in one pass: every pipeline size is then checked in O(its stages).
std::vector<bool> forbidden_cuts(const Topology& topo, std::int64_t n) {
  std::vector<std::int64_t> diff(static_cast<std::size_t>(n) + 1, 0);
  auto pair = [&](std::int64_t a, std::int64_t b) {
    a = std::min(a, n - 1);
    b = std::min(b, n - 1);
    const std::int64_t lo = std::min(a, b), hi = std::max(a, b);
    if (lo < 0 || lo == hi) return;
    ++diff[static_cast<std::size_t>(lo + 1)];
    --diff[static_cast<std::size_t>(hi + 1)];
  };
  for_each_sharing_pair(topo, [&](std::int64_t layer, std::int64_t source, const char*) {
    pair(layer, source);
    return false;
  });
  std::vector<bool> cut(static_cast<std::size_t>(n), false);
  std::int64_t open = 0;
  for (std::int64_t b = 0; b < n; ++b) {
    open += diff[static_cast<std::size_t>(b)];
    cut[static_cast<std::size_t>(b)] = open > 0;
  }
  return cut;
}

/// Whether pipeline_partition(n, pp) starts a stage at a forbidden cut.
bool partition_cuts(const std::vector<std::int64_t>& partition, const std::vector<bool>& cut) {
  std::size_t start = 0;
  for (std::size_t s = 0; s + 1 < partition.size(); ++s) {
    start += static_cast<std::size_t>(partition[s]);
    if (start < cut.size() && cut[start]) return true;
  }
  return false;
}

/// "0-9, 10-19, ..." : the layers of each stage, at most kMessageMaxItems stages quoted.
std::string stage_ranges(const std::vector<std::int64_t>& partition, std::int64_t drafts, std::int64_t backbone) {
  std::vector<std::int64_t> firsts(partition.size(), 0);
  for (std::size_t i = 1; i < partition.size(); ++i) firsts[i] = firsts[i - 1] + partition[i - 1];
  std::string s = join_bounded(partition.size(), [&](std::size_t i) {
    return std::to_string(firsts[i]) + "-" + std::to_string(firsts[i] + partition[i] - 1);
  });
  if (drafts > 0) {
    s += " (draft layers " + std::to_string(backbone) + "-" + std::to_string(backbone + drafts - 1) +
         " with the last stage)";
  }
  return s;
}

// The kv-cache values the backend stores on this arch, for a fix.
std::string accepted_kv_values(BackendId b, int cc_major) {
  std::string s;
  for (auto v : kv_cache_dtype_values()) {
    if (resolve_kv_cache_dtype(b, v, cc_major).layout) s += (s.empty() ? "" : ", ") + std::string(v);
  }
  return s;
}

bool is_flashmla(BackendId b) {
  return b == BackendId::flashmla_sparse_dsv41 || b == BackendId::flashmla_sparse_dsv41_fused ||
         b == BackendId::flashmla_sparse_dsv4 || b == BackendId::flashmla_sparse ||
         b == BackendId::flashmla_mega_attn_dsv41;
}

}  // namespace

std::string_view to_string(DraftMethod m) {
  switch (m) {
    case DraftMethod::none: return "none";
    case DraftMethod::mtp: return "mtp";
    case DraftMethod::dspark: return "dspark";
  }
  return "?";
}

DraftMethod draft_method(const ModelConfig& cfg) {
  if (cfg.num_draft_layers <= 0) return DraftMethod::none;
  // V4.1's draft layers are DSpark stages; V4.0 re-releases with dspark_block_size carry DSpark too.
  return dspark_drafts(cfg) ? DraftMethod::dspark : DraftMethod::mtp;
}

bool multi_module_mtp(const ModelConfig& cfg, std::int64_t num_speculative_tokens) {
  // vllm/config/speculative.py use_multi_module_mtp: method "mtp" and min(n_predict, K) > 1.
  return draft_method(cfg) == DraftMethod::mtp && std::min(cfg.num_draft_layers, num_speculative_tokens) > 1;
}

std::int64_t prefill_lookahead_tokens(const ModelConfig& cfg, std::int64_t num_speculative_tokens) {
  if (num_speculative_tokens <= 0 || draft_method(cfg) == DraftMethod::none) return 0;
  // vllm/v1/worker/gpu/model_runner.py: multi-module MTP reads the next K prefill tokens, every
  // other drafter only the next one.
  return multi_module_mtp(cfg, num_speculative_tokens) ? num_speculative_tokens : 1;
}

std::int64_t extra_retained_tokens(const ModelConfig& cfg, std::int64_t num_speculative_tokens) {
  // vllm/v1/core/kv_cache_planning.py get_kv_cache_configs.
  return std::max<std::int64_t>(0, prefill_lookahead_tokens(cfg, num_speculative_tokens) - 1);
}

std::int64_t dspark_window_width(std::int64_t window, std::int64_t n) {
  const std::int64_t w = std::max<std::int64_t>(window, 0) + std::max<std::int64_t>(n, 0);
  return ceil_div(w, 64) * 64;
}

LayoutResolution resolve_layout_options(const ModelConfig& cfg, const Topology& topo, const Target& target,
                                        const LayoutOptions& o) {
  LayoutResolution out;
  auto& checks = out.checks;
  auto& r = out.options;
  const std::string family = std::string(to_string(cfg.family));
  const std::string p = cfg.field_prefix;

  // ---- flag values (usage) ----
  std::string kv_value;
  try {
    kv_value = canonical_kv_cache_dtype(o.kv_cache_dtype);
  } catch (const Error& e) {
    checks.push_back(usage_check("layout.kv_cache_dtype", e.what()));
    r.usable = false;
  }
  try {
    r.idx = parse_indexer_cache_dtype(o.indexer_cache_dtype);
  } catch (const Error& e) {
    checks.push_back(usage_check("layout.indexer_cache_dtype", e.what()));
    r.usable = false;
  }
  const auto P = LayoutLimits::max_parallel_size;
  r.usable &= in_range(checks, "--tensor-parallel-size", o.tensor_parallel_size, 1, P);
  r.usable &= in_range(checks, "--data-parallel-size", o.data_parallel_size, 1, P);
  r.usable &=
      in_range(checks, "--pipeline-parallel-size", o.pipeline_parallel_size, 1, std::min(P, cfg.num_hidden_layers),
               "a stage needs at least one of the " + std::to_string(cfg.num_hidden_layers) + " backbone layers");
  r.usable &= in_range(checks, "--decode-context-parallel-size", o.decode_context_parallel_size, 1, P);
  r.usable &=
      in_range(checks, "--cp-kv-cache-interleave-size", o.cp_kv_cache_interleave_size, 1, LayoutLimits::max_block_size);
  r.usable &= in_range(checks, "--spec-tokens", o.num_speculative_tokens, 0, LayoutLimits::max_speculative_tokens);
  if (o.block_size) r.usable &= in_range(checks, "--block-size", *o.block_size, 1, LayoutLimits::max_block_size);
  if (o.max_model_len) {
    r.usable &= in_range(checks, "--max-model-len", *o.max_model_len, 1, cfg.max_position_embeddings,
                         "the model's max_position_embeddings is " + std::to_string(cfg.max_position_embeddings));
  }
  if (o.in_flight_tokens) {
    r.usable &=
        in_range(checks, "--max-num-batched-tokens", *o.in_flight_tokens, 1, LayoutLimits::max_in_flight_tokens);
  }
  if (r.usable) {
    try {
      r.backend = choose_backend(cfg, target, o.attention_backend, o.fused_attention, kv_value, o.tensor_parallel_size,
                                 o.release);
    } catch (const Error& e) {
      checks.push_back(usage_check("layout.attention_backend", e.what()));
      r.usable = false;
    }
  }
  if (!r.usable) return out;

  r.kv_cache_dtype_requested = o.kv_cache_dtype;
  r.include_draft_layers = o.include_draft_layers;
  r.parallel.tensor_parallel_size = o.tensor_parallel_size;
  r.parallel.pipeline_parallel_size = o.pipeline_parallel_size;
  r.parallel.data_parallel_size = o.data_parallel_size;
  r.parallel.decode_context_parallel_size = o.decode_context_parallel_size;
  r.parallel.enable_expert_parallel = o.enable_expert_parallel;
  r.parallel.engram = o.engram;
  r.parallel.language_model_only = o.language_model_only;
  // vLLM loads the draft stages only with a speculative config.
  r.parallel.load_draft_stages = o.num_speculative_tokens > 0 && o.include_draft_layers && cfg.num_draft_layers > 0;
  r.spec = o.num_speculative_tokens;
  r.mml_default = !o.max_model_len;
  r.mml = o.max_model_len.value_or(cfg.max_position_embeddings);
  if (r.mml_default) {
    checks.push_back(info_check("layout.max_model_len",
                                "max_model_len " + std::to_string(r.mml) + ": the config's max_position_embeddings"));
  }
  r.in_flight_default = !o.in_flight_tokens;
  r.in_flight = o.in_flight_tokens.value_or(default_in_flight_tokens(target, o.release));
  if (r.in_flight_default && cfg.family != Family::deepseek_v32) {
    checks.push_back(info_check(
        "layout.in_flight_tokens",
        "window pages sized for " + std::to_string(r.in_flight) +
            " in-flight tokens per request (vLLM's default max_num_batched_tokens "
            "for its OpenAI server on " +
            target.name +
            (o.release.batch_tier_160gib && vllm_160gib_gpu(target) ? ": the >= 160 GiB tier of vLLM 0.28 and later"
                                                                    : "") +
            ")"));
  }

  // ---- the backend (unsupported) ----
  const ComputeCapability& cc = target.cc;
  const std::string tgt = "target " + target.id + " is " + cc.sm() + " (compute capability " + cc.str() + ")";
  const BackendId b = r.backend.id;
  if (!r.backend.refusal.empty()) {
    checks.push_back(unsupported_check(r.backend.refusal_id, r.backend.refusal, r.backend.fix));
  } else {
    checks.push_back(info_check("layout.attention_backend", "attention backend " + backend_title(b, cfg.family) + " (" +
                                                                r.backend.how +
                                                                "): " + std::string(backend_info(b).decode_path)));
  }
  if (!r.backend.fused_off_reason.empty() &&
      ((o.fused_attention == FusedAttention::auto_ && cc.major == 10) || o.release.v41_mega_attention_default)) {
    checks.push_back(info_check("backend.fused_attention", r.backend.fused_off_reason));
  }

  // kv-cache dtype as the backend resolves it.
  const auto kvr = resolve_kv_cache_dtype(b, kv_value, cc.major);
  if (kvr.layout) {
    r.kv = *kvr.layout;
    if (kv_value != to_string(r.kv) && r.backend.refusal.empty()) {
      checks.push_back(info_check("layout.kv_cache_dtype", "--kv-cache-dtype " + kv_value + " resolves to " +
                                                               std::string(to_string(r.kv)) + " on " +
                                                               backend_title(b, cfg.family)));
    }
  } else {
    // A lenient plan shows the layout the value has where the family stores it, else auto's.
    r.kv = *resolve_kv_cache_dtype(b, "auto", cc.major).layout;
    bool found = false;
    for (const auto& other : backend_catalogue()) {
      if (found || std::find(other.families.begin(), other.families.end(), cfg.family) == other.families.end())
        continue;
      for (int m : other.cc_majors) {
        if (const auto l = resolve_kv_cache_dtype(other.id, kv_value, m).layout; l && !found) {
          r.kv = *l;
          found = true;
        }
      }
    }
    std::string msg = kvr.refusal;
    std::string fix = "use --kv-cache-dtype " + accepted_kv_values(b, cc.major);
    if (kv_value == "nvfp4_ds_mla" && cfg.family == Family::deepseek_v41 && is_flashmla(b) && cc.major != 10) {
      msg = "nvfp4_ds_mla needs SM100 (FlashMLA V4.1 fp8/fp4 sparse decode); " + tgt;
      fix = "use --kv-cache-dtype fp8_ds_mla, or a compute capability 10.x GPU (--gpu b200)";
    } else if (kv_value == "nvfp4_ds_mla" && b == BackendId::flashmla_sparse_dsv41 &&
               o.release.v41_mega_attention_default) {
      // vLLM 0.31: mega attention is the layer that stores nvfp4_ds_mla.
      fix = r.backend.mega_declined.empty()
                ? "use --attention-backend FLASHMLA_MEGA_ATTN_DSV41 (it stores nvfp4_ds_mla), or --kv-cache-dtype "
                  "fp8_ds_mla"
                : "use --kv-cache-dtype fp8_ds_mla (FLASHMLA_MEGA_ATTN_DSV41, which stores nvfp4_ds_mla, declined: " +
                      r.backend.mega_declined + ")";
    } else if (kv_value == "nvfp4_ds_mla" && b == BackendId::flashmla_sparse_dsv41) {
      // Unset, the flag only helps where the fused path has the model's shape; when it is off for
      // another reason (heads per o_group) say that instead.
      fix = o.fused_attention == FusedAttention::off || r.backend.fused_off_reason.empty()
                ? "leave --dsv4-fused-attention unset (the fused path stores nvfp4_ds_mla), or use --kv-cache-dtype "
                  "fp8_ds_mla"
                : "use --kv-cache-dtype fp8_ds_mla (" + r.backend.fused_off_reason + ")";
    } else {
      msg += " (--kv-cache-dtype " + kv_value + " on " + backend_title(b, cfg.family) + ")";
    }
    checks.push_back(unsupported_check("backend.kv_cache_dtype", msg, fix));
  }
  if (r.idx == IndexerCacheDtype::fp4 && cfg.family == Family::deepseek_v32) {
    checks.push_back(unsupported_check("backend.indexer_cache_dtype",
                                       "--indexer-cache-dtype fp4 is a DeepSeek V4/V4.1 option; deepseek_v32 "
                                       "keeps its indexer keys in fp8 (132 bytes per row)",
                                       "use --indexer-cache-dtype fp8"));
  }

  // Block size.
  const auto allowed = backend_block_sizes(b, cfg.family, cc);
  r.page_states = fixed_page_states(b, cfg.family);
  r.window_block = backend_window_block(b, cfg.family);
  r.block = allowed.front();
  r.block_default = !o.block_size;
  const std::string b_title = backend_title(b, cfg.family);
  if (o.block_size) {
    if (std::find(allowed.begin(), allowed.end(), *o.block_size) != allowed.end()) {
      if (r.page_states == 0) r.block = *o.block_size;
    } else {
      const std::string bs = std::to_string(*o.block_size);
      checks.push_back(unsupported_check("backend.block_size",
                                         "No common block size for " + bs + " between kv_manager=[" + bs +
                                             "] and backend=[" + join(allowed) + "] (--block-size: " + b_title +
                                             " for " + family + " on " + cc.sm() + " uses " + join(allowed) + ")",
                                         "omit --block-size"));
    }
  } else {
    checks.push_back(info_check(
        "layout.block_size",
        r.page_states > 0
            ? "pages of " + std::to_string(r.page_states) + " states: block " + std::to_string(r.page_states) +
                  " at ratio 1, " + std::to_string(2 * r.page_states) + " at ratio 2, window pages of " +
                  std::to_string(r.window_block) + " tokens (" + b_title + "'s kernels on " + cc.sm() + ")"
            : "block size " + std::to_string(r.block) + ": " + b_title + "'s kernel block size for " + family + " on " +
                  cc.sm()));
  }

  // Tensor parallelism: the latent is shared, so TP splits query heads only.
  const std::int64_t heads = cfg.num_attention_heads;
  if (heads % r.parallel.tensor_parallel_size != 0) {
    std::vector<std::int64_t> divisors;
    for (std::int64_t t = 1; t <= heads && t <= P; ++t) {
      if (heads % t == 0) divisors.push_back(t);
    }
    checks.push_back(unsupported_check(
        "backend.tensor_parallel",
        "Total number of attention heads (" + std::to_string(heads) + ") must be divisible by tensor parallel size (" +
            std::to_string(r.parallel.tensor_parallel_size) + "); TP sizes that divide it: " + join(divisors),
        "use --tensor-parallel-size " + join(divisors), p + "/num_attention_heads"));
  } else {
    r.parallel.local_query_heads = heads / r.parallel.tensor_parallel_size;
    if (const auto padded = padded_heads(b, r.parallel.local_query_heads)) {
      r.parallel.padded_query_heads = *padded;
      if (r.parallel.padded_query_heads > r.parallel.local_query_heads) {
        const std::int64_t local = r.parallel.local_query_heads;
        const std::int64_t idle = r.parallel.padded_query_heads - local;
        std::string msg = "TP " + std::to_string(r.parallel.tensor_parallel_size) + ": " + std::to_string(local) +
                          " of " + std::to_string(heads) + " query heads per rank run in a " +
                          std::to_string(r.parallel.padded_query_heads) + "-head kernel (" + std::to_string(idle) +
                          " idle, " + fraction(idle, r.parallel.padded_query_heads) + " of the attention math) on " +
                          b_title;
        std::string fix =
            "DP attention (--data-parallel-size) keeps all " + std::to_string(heads) + " heads on each rank";
        // 8 or 16 heads padded to 64 over fp8_ds_mla rows: what running them unpadded saves, as
        // measured on this GPU (mla-plan's small-head kernel against the padded one; never estimated).
        if ((local == 8 || local == 16) && r.parallel.padded_query_heads == 64 && r.kv == KvCacheDtype::fp8_ds_mla) {
          msg += "; unpadded: " + head_padding_measured_text(target, cfg.family, local, r.parallel.tensor_parallel_size,
                                                             head_padding_measurements());
          // vLLM 0.31's opt-in SM90 backend runs them unpadded (DeepseekV41TritonSparseAttention's
          // validate_config: capability 9.0, 8 or 16 local heads, 512D heads with 64D RoPE, KV auto,
          // fp8 or fp8_ds_mla).
          if (b == BackendId::flashmla_sparse_dsv41 && o.release.v41_triton_sm90 && cc.major == 9 && cc.minor == 0 &&
              cfg.head_dim == 512 && cfg.qk_rope_head_dim == 64 &&
              (kv_value == "auto" || kv_value == "fp8" || kv_value == "fp8_ds_mla")) {
            const std::string release =
                o.release.version.empty() ? std::string("this vLLM release") : "vLLM " + std::string(o.release.version);
            msg += " (TRITON_MLA_SPARSE_DSV41 runs " + std::to_string(local) + " heads unpadded on " + release +
                   " with its own Triton kernel, which these times do not measure)";
            fix += ", or use --attention-backend TRITON_MLA_SPARSE_DSV41 (" + release + " runs the " +
                   std::to_string(local) + " heads unpadded on SM90)";
          }
        }
        checks.push_back(info_check("kernel.head_padding", msg, fix, p + "/num_attention_heads"));
      }
    } else if (backend_info(b).exact_heads) {
      // The kernel runs the local heads as they are: only its head counts, no padding.
      const auto& pads = backend_info(b).head_paddings;
      std::vector<std::int64_t> tps;
      for (std::int64_t t = 1; t <= heads && t <= P; ++t) {
        if (heads % t == 0 && std::find(pads.begin(), pads.end(), heads / t) != pads.end()) tps.push_back(t);
      }
      checks.push_back(unsupported_check("backend.query_heads",
                                         std::string(backend_info(b).head_refusal) + " (--tensor-parallel-size " +
                                             std::to_string(r.parallel.tensor_parallel_size) + " leaves " +
                                             std::to_string(r.parallel.local_query_heads) + " query heads per rank; " +
                                             b_title + " runs " + join(pads) + " heads unpadded)",
                                         tps.empty() ? std::string{} : "use --tensor-parallel-size " + join(tps),
                                         p + "/num_attention_heads"));
    } else {
      const auto& pads = backend_info(b).head_paddings;
      std::int64_t min_tp = 0;
      for (std::int64_t t = 1; t <= heads && t <= P; ++t) {
        if (heads % t == 0 && heads / t <= pads.back()) {
          min_tp = t;
          break;
        }
      }
      checks.push_back(unsupported_check(
          "backend.query_heads",
          replace_all(backend_info(b).head_refusal, "{n}", std::to_string(r.parallel.local_query_heads)) +
              " --tensor-parallel-size " + std::to_string(r.parallel.tensor_parallel_size) + " leaves " +
              std::to_string(r.parallel.local_query_heads) + " query heads per rank (at most " +
              std::to_string(pads.back()) + "; fewer are padded to " + join(pads) + ")",
          min_tp > 0 ? "use --tensor-parallel-size " + std::to_string(min_tp) + " or more" : std::string{},
          p + "/num_attention_heads"));
    }
  }

  // Pipeline parallelism: a V4.1 sharing group must stay on one stage.
  r.partition = pipeline_partition(cfg.num_hidden_layers, r.parallel.pipeline_parallel_size);
  r.stage_of_layer = stage_of_layers(topo, r.partition);
  if (const auto v = first_pp_violation(topo, r.stage_of_layer)) {
    const auto& stage = r.stage_of_layer;
    std::vector<std::int64_t> working;
    const std::vector<bool> cut = forbidden_cuts(topo, cfg.num_hidden_layers);
    for (std::int64_t pp = 1; pp <= cfg.num_hidden_layers && pp <= P; ++pp) {
      if (!partition_cuts(pipeline_partition(cfg.num_hidden_layers, pp), cut)) working.push_back(pp);
    }
    const std::int64_t drafts = o.include_draft_layers ? cfg.num_draft_layers : 0;
    checks.push_back(unsupported_check(
        "backend.pipeline_cut",
        "--pipeline-parallel-size " + std::to_string(r.parallel.pipeline_parallel_size) +
            " cuts a DeepSeek V4.1 sharing group: layer " + std::to_string(v->layer) + " (stage " +
            std::to_string(stage[static_cast<std::size_t>(v->layer)]) + ") " + v->what + ", layer " +
            std::to_string(v->source) + " (stage " + std::to_string(stage[static_cast<std::size_t>(v->source)]) +
            "); PP splits inside a v4.1 kv-sharing group are not supported. Stages hold layers " +
            stage_ranges(r.partition, drafts, cfg.num_hidden_layers) + ". Pipeline sizes that work: " + join(working),
        "use --pipeline-parallel-size " + join(working)));
  }

  // ---- speculative decoding ----
  const DraftMethod method = draft_method(cfg);
  if (r.spec > 0) {
    const std::string n = std::to_string(r.spec);
    switch (method) {
      case DraftMethod::none:
        checks.push_back(
            warning_check("spec.no_draft_layers",
                          "--spec-tokens " + n +
                              " but the config has no draft layers (num_nextn_predict_layers 0): the draft "
                              "model is a separate checkpoint whose weights and caches are not counted here",
                          "plan the draft model's config too", p + "/num_nextn_predict_layers"));
        break;
      case DraftMethod::mtp: {
        const std::int64_t k = cfg.num_draft_layers;
        if (r.spec > k && r.spec % k != 0) {
          std::vector<std::int64_t> ok;
          for (std::int64_t x = 1; x <= k; ++x) ok.push_back(x);
          for (std::int64_t x = 2 * k; x <= std::max<std::int64_t>(r.spec + k, 4 * k) && ok.size() < 8; x += k) {
            ok.push_back(x);
          }
          checks.push_back(unsupported_check(
              "spec.mtp_tokens",
              "num_speculative_tokens:" + n + " must be divisible by n_predict=" + std::to_string(k) +
                  " (--spec-tokens " + n + ": vLLM reuses the " + std::to_string(k) + " MTP stage(s) in whole rounds)",
              "use --spec-tokens " + join(ok) + ", ...", p + "/num_nextn_predict_layers"));
        }
        break;
      }
      case DraftMethod::dspark: {
        const std::string blk = std::to_string(cfg.dspark_block_size);
        if (cfg.dspark_block_size > 0 && r.spec < cfg.dspark_block_size) {
          checks.push_back(warning_check(
              "spec.dspark_block_size",
              "--spec-tokens " + n + " is below dspark_block_size " + blk +
                  ". vLLM versions disagree: one refuses it (\"DSpark requires num_speculative_tokens >= "
                  "dspark_block_size (" +
                  blk + "); got " + n + ". Smaller values produce incorrect output.\"), later ones dropped the check",
              "use --spec-tokens " + blk, p + "/dspark_block_size"));
        } else if (cfg.dspark_block_size > 0 && r.spec % cfg.dspark_block_size != 0) {
          checks.push_back(warning_check(
              "spec.dspark_block_size",
              "--spec-tokens " + n + " is not a multiple of dspark_block_size " + blk +
                  ". vLLM versions disagree: the newest takes n_predict from dspark_block_size and refuses it "
                  "(\"num_speculative_tokens:" +
                  n + " must be divisible by n_predict=" + blk +
                  "\"); earlier ones run it (one deployment measured 4.4% acceptance at 7 against 34.7% at 5 with "
                  "block 5)",
              "use --spec-tokens " + blk, p + "/dspark_block_size"));
        }
        if (r.parallel.pipeline_parallel_size > 1) {
          checks.push_back(unsupported_check("spec.dspark_parallel",
                                             "DSpark does not support pipeline parallelism (PP > 1). "
                                             "(--pipeline-parallel-size " +
                                                 std::to_string(r.parallel.pipeline_parallel_size) +
                                                 " with --spec-tokens " + n + ")",
                                             "use --pipeline-parallel-size 1, or --spec-tokens 0"));
        }
        if (r.parallel.decode_context_parallel_size > 1) {
          checks.push_back(unsupported_check("spec.dspark_parallel",
                                             "DSpark does not support decode context parallelism (DCP > 1). "
                                             "(--decode-context-parallel-size " +
                                                 std::to_string(r.parallel.decode_context_parallel_size) +
                                                 " with --spec-tokens " + n + ")",
                                             "use --decode-context-parallel-size 1, or --spec-tokens 0"));
        }
        break;
      }
    }
  }
  if (r.parallel.decode_context_parallel_size > 1) {
    const std::string d = std::to_string(r.parallel.decode_context_parallel_size);
    const std::string flag = "--decode-context-parallel-size " + d;
    // vllm/distributed/parallel_state.py initialize_model_parallel: DCP reuses the TP group's GPUs,
    // split into tp_size // dcp_size groups of dcp_size ranks.
    if (r.parallel.tensor_parallel_size % r.parallel.decode_context_parallel_size != 0) {
      std::vector<std::int64_t> ok;
      for (std::int64_t v = 1; v <= r.parallel.tensor_parallel_size; ++v) {
        if (r.parallel.tensor_parallel_size % v == 0) ok.push_back(v);
      }
      checks.push_back(unsupported_check(
          "backend.dcp_tensor_parallel",
          flag + " with --tensor-parallel-size " + std::to_string(r.parallel.tensor_parallel_size) +
              ": vLLM builds each DCP group from the ranks of one TP group (tp_size // dcp_size groups), so the "
              "DCP size must divide the TP size",
          "use --decode-context-parallel-size " + join(ok)));
    }
    // vllm/v1/attention/backends/mla/indexer.py DeepseekV32IndexerMetadataBuilder.__init__.
    std::int64_t ratio = 0;
    std::int64_t layer = -1;
    for (const auto& l : topo.layers) {
      const std::int64_t lr = cfg.family == Family::deepseek_v4 ? (l.type == LayerType::c4a ? 4 : 0)
                              : cfg.family == Family::deepseek_v41 && l.is_index_source ? l.compress_ratio
                                                                                        : 0;
      if (lr > 1) {
        ratio = lr;
        layer = l.index;
        break;
      }
    }
    if (ratio > 1) {
      checks.push_back(unsupported_check(
          "backend.dcp_indexer_compression",
          flag + ": vLLM refuses it: \"DCP is not supported with sparse indexer KV compression (compress_ratio=" +
              std::to_string(ratio) + ").\" (layer " + std::to_string(layer) +
              "'s indexer; vllm/v1/attention/backends/mla/indexer.py, DeepseekV32IndexerMetadataBuilder)",
          "use --decode-context-parallel-size 1 (or DP attention: --data-parallel-size with "
          "--enable-expert-parallel)"));
    }
    if (o.cp_kv_cache_interleave_size > 1) {
      checks.push_back(unsupported_check(
          "backend.dcp_interleave",
          flag + " with --cp-kv-cache-interleave-size " + std::to_string(o.cp_kv_cache_interleave_size) +
              ": vLLM refuses it: \"DCP sparse indexer currently supports only cp_kv_cache_interleave_size=1 (got " +
              std::to_string(o.cp_kv_cache_interleave_size) + ").\" (vllm/v1/attention/backends/mla/indexer.py)",
          "use --cp-kv-cache-interleave-size 1"));
    }
  }
  return out;
}

// ---------------------------------------------------------------- kernel shapes

std::string_view to_string(ShapeStatus s) {
  switch (s) {
    case ShapeStatus::available: return "available";
    case ShapeStatus::missing: return "missing";
    case ShapeStatus::unknown: return "unknown";
  }
  return "?";
}

namespace {

// The FlashInfer SM120 decode widths every published dispatch table has (flashinfer <= 0.6.18 ships
// a fixed (heads, topk) table; 0.7.0 takes any width above a minimum).
bool sm120_common_width(std::int64_t topk) { return topk == 128 || topk == 512 || topk == 1024; }

void judge(KernelShape& s, BackendId b, const ModelConfig& cfg, const Target& target) {
  const std::string heads = std::to_string(s.local_heads);
  if (s.kernel_heads == 0) {
    s.status = ShapeStatus::missing;
    s.note = heads + " query heads per rank: no " + backend_title(b, cfg.family) + " kernel has that many";
    s.fix = "a larger --tensor-parallel-size";
    return;
  }
  switch (b) {
    case BackendId::flashmla_sparse_dsv41:
    case BackendId::flashmla_sparse_dsv4:
    case BackendId::flashmla_sparse: {
      const std::int64_t b_topk = s.kernel_heads == 128 ? 128 : 64;
      if (s.phase == "decode" && s.topk % 64 != 0) {
        s.status = ShapeStatus::missing;
        s.note =
            "topk " + std::to_string(s.topk) + " is not a multiple of 64 (the sparse decode kernel reads blocks of 64)";
      } else if (s.phase == "decode" && s.extra_topk % b_topk != 0) {
        s.status = ShapeStatus::missing;
        s.note = "extra_topk " + std::to_string(s.extra_topk) + " % B_TOPK " + std::to_string(b_topk) +
                 " != 0 (FlashMLA asserts extra_topk % B_TOPK == 0 for h_q " + std::to_string(s.kernel_heads) + ")";
      } else if (s.phase == "prefill" && s.topk % (target.cc.major == 9 ? 128 : 64) != 0) {
        s.status = ShapeStatus::missing;
        s.note = "prefill topk " + std::to_string(s.topk) + " is not a multiple of " +
                 std::string(target.cc.major == 9 ? "128 (SM90 sparse prefill)" : "64");
      }
      if (s.status == ShapeStatus::missing)
        s.fix = "--attention-backend of another family, or a config whose widths fit";
      return;
    }
    case BackendId::flashmla_sparse_dsv41_fused:
      if (cfg.checkpoint.o_groups <= 0 || cfg.num_attention_heads / cfg.checkpoint.o_groups != 8) {
        s.status = ShapeStatus::missing;
        s.note = "the fused kernel needs 8 heads per o_group";
        s.fix = "--dsv4-fused-attention false";
      }
      return;
    case BackendId::flashinfer_mla_sparse_dsv41:
      s.note = "FlashInfer >= 0.6.14 has sparse MLA for h_q 8, 16, 32, 64 and 128";
      return;
    case BackendId::flashmla_mega_attn_dsv41:
      // Its availability (8 heads per local wo_a group) is decided with the choice.
      return;
    case BackendId::triton_mla_sparse_dsv41:
      s.note = "Triton kernels compiled for the shape at start-up (BLOCK_H 16)";
      if (s.phase == "decode") {
        s.note += "; the " + std::to_string(s.kernel_heads) +
                  " heads unpadded: mla-plan's small-head kernels (small_heads_sm90; small_heads_lean for split_kv at "
                  "small batches) run this shape in verify and bench";
      }
      return;
    case BackendId::flashinfer_mla_sparse_sm120:
      if (s.page_rows != kSm120PageStates) {
        s.status = ShapeStatus::missing;
        s.note = "FlashInfer's SM120 DSV4 sparse-MLA kernels take pages of 64 rows only; this cache has " +
                 std::to_string(s.page_rows);
        s.fix = "omit --block-size";
      } else if (!sm120_common_width(s.topk)) {
        // vLLM's start-up check asks FlashInfer for (padded heads, main width) only
        // (has_flashinfer_sparse_mla_sm120_config); the extra segment's width is a runtime length.
        s.status = ShapeStatus::unknown;
        s.note = "(h_q " + std::to_string(s.kernel_heads) + ", topk " + std::to_string(s.topk) +
                 "): FlashInfer <= 0.6.18 dispatches a fixed (heads, topk) table (128, 512 and 1024; 192 and 256 "
                 "added later, flashinfer#4380); 0.7.0 takes any width";
        s.fix = "use FlashInfer 0.7.0 or later";
      }
      return;
  }
}

}  // namespace

std::vector<KernelShape> kernel_shapes(const ModelConfig& cfg, const Topology& topo, const Target& target,
                                       const ResolvedLayoutOptions& r) {
  std::vector<KernelShape> out;
  // A backend vLLM refuses launches nothing: there are no shapes to judge.
  if (!r.usable || r.parallel.local_query_heads <= 0 || !r.backend.refusal.empty()) return out;
  const BackendId b = r.backend.id;
  const bool v32 = cfg.family == Family::deepseek_v32;
  const std::string kv = std::string(to_string(r.kv));
  const std::int64_t window = v32 ? 0 : cfg.sliding_window;
  const bool drafts = r.spec > 0 && cfg.num_draft_layers > 0;
  const DraftMethod method = draft_method(cfg);
  const std::string kname = [&]() -> std::string {
    switch (b) {
      case BackendId::flashmla_sparse_dsv41:
      case BackendId::flashmla_sparse_dsv4:
      case BackendId::flashmla_sparse: return "FlashMLA sparse " + target.cc.sm();
      case BackendId::flashmla_sparse_dsv41_fused: return "FlashMLA fused sparse sm100";
      case BackendId::flashinfer_mla_sparse_dsv41: return "FlashInfer TRTLLM-gen sparse MLA";
      case BackendId::flashinfer_mla_sparse_sm120: return "FlashInfer SM120 DSV4 sparse MLA";
      case BackendId::flashmla_mega_attn_dsv41: return "FlashMLA mega attention sm100";
      case BackendId::triton_mla_sparse_dsv41: return "Triton small-head sparse sm90";
    }
    return "?";
  }();

  // One decode shape per (layer type, draft), equal shapes merged.
  std::map<std::tuple<bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t>, std::size_t> seen;
  // Shapes are judged once each: a config of thousands of layers has a handful of shapes.
  auto add = [&](KernelShape s, LayerType type) {
    const auto key = std::make_tuple(s.phase == "prefill", s.topk, s.extra_topk, s.page_rows, s.extra_page_rows);
    if (auto it = seen.find(key); it != seen.end()) {
      auto& e = out[it->second];
      if (std::find(e.layer_types.begin(), e.layer_types.end(), type) == e.layer_types.end())
        e.layer_types.push_back(type);
      e.draft = e.draft && s.draft;
      return;
    }
    judge(s, b, cfg, target);
    s.layer_types.push_back(type);
    seen.emplace(key, out.size());
    out.push_back(std::move(s));
  };

  // The distinct (draft, type, ratio) of the layers, in order: a config of thousands of layers
  // has a handful.
  struct Kind {
    bool draft;
    LayerType type;
    int compress_ratio;
  };
  std::vector<Kind> kinds;
  for (const Layer& l : topo.layers) {
    const bool known = std::any_of(kinds.begin(), kinds.end(), [&](const Kind& k) {
      return k.draft == l.draft && k.type == l.type && k.compress_ratio == l.compress_ratio;
    });
    if (!known) kinds.push_back(Kind{l.draft, l.type, l.compress_ratio});
  }
  for (int pass = 0; pass < 2; ++pass) {
    const bool prefill = pass == 1;
    for (const Kind& l : kinds) {
      // Draft layers: their decode (verification) step; their prefill is the backbone's shapes.
      if (l.draft && (!drafts || prefill)) continue;
      KernelShape s;
      s.phase = prefill ? "prefill" : "decode";
      s.kernel = kname + (prefill ? " prefill" : " decode");
      s.draft = l.draft;
      s.local_heads = r.parallel.local_query_heads;
      s.kernel_heads = r.parallel.padded_query_heads;
      s.d_qk = cfg.head_dim;
      s.d_v = v32 ? cfg.kv_lora_rank : cfg.head_dim;
      s.kv_layout = kv;
      const std::int64_t ratio = std::max(1, l.compress_ratio);
      if (v32) {
        s.topk = cfg.index_topk;
        s.page_rows = r.block;
        s.note = "the latent cache indexed by index_topk";
      } else {
        s.topk = window;
        s.page_rows = r.window_block;
        if (l.draft && method == DraftMethod::dspark) {
          s.topk = dspark_window_width(window, r.spec);
          s.note = "DSpark window width cdiv(" + std::to_string(window) + " + " + std::to_string(r.spec) +
                   ", 64) x 64 (non-causal)";
        }
        if (l.type != LayerType::swaonly) {
          s.extra_page_rows = r.global_block(ratio) / ratio;
          s.extra_topk = l.type == LayerType::c128a ? ceil_div(ceil_div(r.mml, 128), 128) * 128 : cfg.index_topk;
        }
      }
      if (prefill && b == BackendId::flashinfer_mla_sparse_sm120) {
        // The SM120 class prefills through its decode kernel (vLLM's _forward_prefill calls
        // trtllm_batch_decode_sparse_mla_dsv4 with the window and the extra indices apart): the
        // decode widths and pages.
        s.note = "prefill runs the SM120 decode kernel: window and extra indices apart, as in decode";
      } else if (prefill) {
        // The prefill kernel reads one combined index list: window and extra widths, padded to 128.
        s.topk = v32 ? cfg.index_topk : ceil_div(s.topk + s.extra_topk, 128) * 128;
        s.extra_topk = 0;
        s.extra_page_rows = 0;
        s.note = v32 ? "index_topk over the latent cache" : "round_up(window + extra widths, 128), one combined list";
      }
      add(std::move(s), l.type);
    }
  }
  return out;
}

std::vector<KernelShape> kernel_shapes(const ModelConfig& cfg, const Topology& topo, const Target& target,
                                       const LayoutOptions& options) {
  return kernel_shapes(cfg, topo, target, resolve_layout_options(cfg, topo, target, options).options);
}

// ---------------------------------------------------------------- all rules

namespace {

RuleResult error(std::string id, std::string message, std::string fix = {}, std::string path = {}) {
  return RuleResult{Finding{std::move(id), Severity::error, std::move(message), std::move(path), std::move(fix)},
                    ErrorKind::unsupported};
}

RuleResult info(std::string id, std::string message, std::string path = {}) {
  return RuleResult{Finding{std::move(id), Severity::info, std::move(message), std::move(path), {}},
                    ErrorKind::unsupported};
}

}  // namespace

RulesVerdict judge_request(const ModelConfig& cfg, const Topology& topo, const Target& target,
                           const RuleOptions& options) {
  RulesVerdict verdict;
  std::vector<RuleResult>& out = verdict.results;
  const std::string p = cfg.field_prefix;

  // Model dtype.
  // --dtype auto (vLLM's default) runs the config's dtype.
  const std::string dtype = options.dtype && *options.dtype != "auto" ? *options.dtype : cfg.dtype;
  const bool given = options.dtype && *options.dtype != "auto";
  if (dtype.empty()) {
    out.push_back(
        info("backend.model_dtype", "the config names no dtype; the sparse-MLA backend runs the model in bfloat16"));
  } else if (dtype != "bfloat16" && dtype != "bf16") {
    out.push_back(error("backend.model_dtype",
                        "model dtype " + mlaplan::quoted(dtype) +
                            " is not supported by the sparse-MLA backend; supported: bfloat16" +
                            (given ? " (--dtype)" : " (the config's dtype)"),
                        "serve with --dtype bfloat16", given ? std::string() : p + "/dtype"));
  }

  // Head size.
  if (cfg.family == Family::deepseek_v32) {
    if (cfg.head_dim != 576) {
      out.push_back(error("backend.head_size",
                          "head size " + std::to_string(cfg.head_dim) + " (kv_lora_rank " +
                              std::to_string(cfg.kv_lora_rank) + " + qk_rope_head_dim " +
                              std::to_string(cfg.qk_rope_head_dim) +
                              ") is not supported by the FlashMLA sparse backend; supported: 576 (512 + 64)",
                          {}, p + "/kv_lora_rank"));
    }
  } else if (cfg.head_dim != 512 || cfg.qk_rope_head_dim != 64) {
    out.push_back(error("backend.head_size",
                        "head size " + std::to_string(cfg.head_dim) + " (qk_rope_head_dim " +
                            std::to_string(cfg.qk_rope_head_dim) +
                            ") is not supported by the sparse-MLA backend; supported: 512 (448 NoPE + 64 RoPE)",
                        {}, p + "/head_dim"));
  }
  if (cfg.family != Family::deepseek_v32 && cfg.num_key_value_heads != 1) {
    out.push_back(error("backend.kv_heads",
                        "num_key_value_heads " + std::to_string(cfg.num_key_value_heads) +
                            " is not supported: the sparse-MLA backend keeps one KV latent shared by all heads "
                            "(num_key_value_heads 1)",
                        {}, p + "/num_key_value_heads"));
  }

  // Index widths the decode kernel reads in blocks of 64.
  auto width = [&](std::string_view field, std::int64_t v) {
    if (v % 64 != 0) {
      out.push_back(error("backend.topk_width",
                          std::string(field) + " " + std::to_string(v) +
                              " is not a multiple of 64; the FlashMLA sparse decode kernel reads index widths in "
                              "blocks of 64",
                          {}, p + "/" + std::string(field)));
    }
  };
  if (cfg.family != Family::deepseek_v32) width("sliding_window", cfg.sliding_window);
  const bool has_topk_layers = std::any_of(topo.layers.begin(), topo.layers.end(), [](const Layer& l) {
    return l.type == LayerType::c1a || l.type == LayerType::c2a || l.type == LayerType::c4a || l.type == LayerType::dsa;
  });
  if (has_topk_layers) width("index_topk", cfg.index_topk);

  // Flags, backend, parallel layout, speculative decoding.
  verdict.resolution = resolve_layout_options(cfg, topo, target, options.layout);
  const LayoutResolution& resolution = verdict.resolution;
  const bool usable = resolution.options.usable;
  for (const auto& c : resolution.checks) out.push_back(RuleResult{c.finding, c.kind});
  if (usable && resolution.options.backend.id == BackendId::triton_mla_sparse_dsv41) {
    // The Triton backend's validate_config says these in its own words.
    for (auto& x : out) {
      if (x.finding.severity != Severity::error) continue;
      if (x.finding.id == "backend.head_size") {
        x.finding.message += " (TRITON_MLA_SPARSE_DSV41 requires 512D heads and 64D RoPE)";
      } else if (x.finding.id == "backend.model_dtype") {
        x.finding.message += " (TRITON_MLA_SPARSE_DSV41 requires BF16 queries)";
      }
    }
  }

  // Kernel shapes: a missing one is an error; an unknown one a warning. Only where no other rule
  // failed (a refused backend, a head size or width the backend cannot take says so already).
  const bool erred =
      std::any_of(out.begin(), out.end(), [](const RuleResult& x) { return x.finding.severity == Severity::error; });
  std::vector<KernelShape> all_shapes = kernel_shapes(cfg, topo, target, resolution.options);
  if (usable && !erred) {
    for (const auto& s : all_shapes) {
      if (s.status == ShapeStatus::available) continue;
      std::string types;
      for (auto t : s.layer_types) types += (types.empty() ? "" : ", ") + std::string(to_string(t));
      const std::string what = s.phase + " " + types + (s.draft ? " (draft)" : "") + ": h_q " +
                               std::to_string(s.kernel_heads) + ", topk " + std::to_string(s.topk) +
                               (s.extra_topk > 0 ? " + extra " + std::to_string(s.extra_topk) : std::string()) +
                               ", page " + std::to_string(s.page_rows) + " rows on " + s.kernel;
      RuleResult rr{Finding{"kernel.shape",
                            s.status == ShapeStatus::missing ? Severity::error : Severity::warning,
                            what + ": " + s.note,
                            {},
                            s.fix},
                    ErrorKind::unsupported};
      out.push_back(std::move(rr));
    }
  }
  verdict.shapes = std::move(all_shapes);
  return verdict;
}

std::vector<RuleResult> evaluate_rules(const ModelConfig& cfg, const Topology& topo, const Target& target,
                                       const RuleOptions& options, std::vector<KernelShape>* shapes) {
  RulesVerdict verdict = judge_request(cfg, topo, target, options);
  if (shapes != nullptr) *shapes = std::move(verdict.shapes);
  return std::move(verdict.results);
}

int rules_exit_code(const std::vector<RuleResult>& results) {
  int code = 0;
  for (const auto& r : results) {
    if (r.finding.severity == Severity::error) code = combine_exit_codes(code, exit_code(r.kind));
  }
  return code;
}

void check_layout_flags(const ModelConfig& cfg, const Topology& topo, const LayoutOptions& options) {
  // The flag checks do not look at the target: any one will do.
  throw_first_usage_error(resolve_layout_options(cfg, topo, resolve_target(TargetRequest{}), options).checks);
}

}  // namespace mlaplan

#include "mlaplan/rules.hpp"

#include <algorithm>

#include "mlaplan/text.hpp"

namespace mlaplan {

const std::vector<RuleInfo>& rule_catalogue() {
  static const std::vector<RuleInfo> rules = {
      {"backend.model_dtype", "the model runs in bfloat16"},
      {"backend.head_size", "head size 512 (V4/V4.1: 448 NoPE + 64 RoPE); 576 for V3.2 (512 latent + 64 RoPE)"},
      {"backend.kv_heads", "one shared KV latent (num_key_value_heads 1)"},
      {"backend.topk_width", "the decode kernel's index widths (window, index_topk) are multiples of 64"},
      {"backend.arch", "compute capability 9.x (Hopper) or 10.x (Blackwell datacentre)"},
      {"backend.kv_cache_dtype", "auto, fp8, fp8_ds_mla; nvfp4_ds_mla on compute capability 10.x for V4.1 only"},
      {"backend.indexer_cache_dtype", "fp8 or fp4 (fp4 for V4/V4.1 only)"},
      {"backend.block_size", "the kernel block size of the arch: 64 on SM90, 128 otherwise (V4.1); 256 (V4.0); 64 (V3.2)"},
      {"backend.tensor_parallel", "the TP size divides the query heads"},
      {"backend.query_heads", "at most 128 query heads per rank, padded to 64 or 128"},
      {"backend.pipeline_cut", "V4.1: no pipeline stage cut inside a KV-sharing group"},
  };
  return rules;
}

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

std::vector<RuleResult> evaluate_rules(const ModelConfig& cfg, const Topology& topo, const Target& target,
                                       const RuleOptions& options) {
  std::vector<RuleResult> out;
  const std::string family(to_string(cfg.family));
  const std::string p = cfg.field_prefix;

  // Model dtype.
  const std::string dtype = options.dtype.value_or(cfg.dtype);
  if (dtype.empty()) {
    out.push_back(info("backend.model_dtype",
                       "the config names no dtype; the sparse-MLA backend runs the model in bfloat16"));
  } else if (dtype != "bfloat16" && dtype != "bf16") {
    out.push_back(error("backend.model_dtype",
                        "model dtype " + mlaplan::quoted(dtype) + " is not supported by the sparse-MLA backend; supported: bfloat16" +
                            (options.dtype ? " (--dtype)" : " (the config's dtype)"),
                        "serve with --dtype bfloat16", options.dtype ? std::string() : p + "/dtype"));
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

  // Arch, dtypes, block size, heads, pipeline: the layout's checks.
  for (auto& c : check_layout(cfg, topo, target, options.layout)) {
    out.push_back(RuleResult{std::move(c.finding), c.kind});
  }
  return out;
}

int rules_exit_code(const std::vector<RuleResult>& results) {
  int code = 0;
  for (const auto& r : results) {
    if (r.finding.severity == Severity::error) code = combine_exit_codes(code, exit_code(r.kind));
  }
  return code;
}

}  // namespace mlaplan

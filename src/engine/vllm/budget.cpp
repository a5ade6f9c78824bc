// vLLM's start-up budget of one GPU. Terms and sources: docs/fit.md section 3
// (vllm/v1/worker/gpu_worker.py, vllm/utils/mem_utils.py, one V4-Flash TP2 start-up
// log and two V4-Flash TP4 load logs).

#include "mlaplan/engine/vllm/budget.hpp"

#include <algorithm>
#include <cmath>

#include "mlaplan/base/error.hpp"
#include "mlaplan/cache/layout.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/base/number_format.hpp"

namespace mlaplan {

namespace {

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

/// "Model loading took X GiB" ran above the derived per-GPU bytes in two V4-Flash TP4 logs:
/// 37.96 and 38.09 GiB against 37.25 (+0.71, +0.84 GiB, two MoE backends). The midpoint is used.
constexpr double kLoadOverheadGib = 0.775;

// The CUDA-graph estimate of the V1 model runner ("Estimated CUDA graph memory"), per layer: a
// fixed part and a part per token of the largest capture size. Fitted on two V1 logs of 44
// layers: 1.58 GiB with captures up to 384 tokens (v0.25.0, 2 x RTX PRO 6000) and 0.55 GiB up to
// 24 (v0.21.1rc1, 2 x GB10); the V2 runner's "(estimated)" pool of a 43-layer V4-Flash at TP 8
// (captures up to 128) is 0.82 GiB, this model 0.83.
constexpr double kCudagraphGibPerLayer = 0.0109;
constexpr double kCudagraphGibPerLayerToken = 6.5e-5;
/// vLLM's default largest capture size: 2 x max_num_seqs x (1 + speculative tokens), at most 512
/// (vllm/config/compilation.py, as the v0.25.0 log's 384 = 64 x 3 x 2 shows).
constexpr std::int64_t kMaxCaptureSize = 512;

// Non-torch memory the profile run adds (cuBLAS workspaces, NCCL and all-reduce buffers, the
// all-to-all buffers of expert parallelism over DP). The V2 runner prints it ("GiB for non-torch
// memory", or consumed minus "Model loading took"): 0.23 GiB on one B300 (v0.26.0), 0.91 at TP 8
// with EP on 8 x H100 (V4-Flash), 1.91 for V4.1-Flash on the same run (its Engram mappings), 6.11
// at DP 8 x EP 8 on B300 with 16,384 batched tokens (V4.1-Flash, the 0909 image).
constexpr double kNonTorchGibBase = 0.23;
constexpr double kNonTorchGibCollectives = 0.68;
constexpr double kNonTorchGibAllToAllPer16k = 4.20;
constexpr double kNonTorchGibEngram = 1.0;

// The profile run's activation peak beyond the sampler and the indexer's logits buffer: the
// shape model of estimate_activation() scaled per model runner (docs/fit.md "The terms, per
// release"). V2: the peaks the V2 runner prints less sampler and indexer buffer, over the shape
// model: 1.50 / 2.83 (one B300, V4-Flash, 8,192 tokens), 1.08 / 1.84 (TP 8 x EP 8 on H100),
// 1.83 / 2.20 (V4.1-Flash, the same run), 10.7 / 18.0 (V4.1-Flash DP 8 x EP 8, 16,384 tokens,
// the MoE workspaces counted for every DP rank's tokens): 0.60 (computed less printed: +0.19,
// +0.03, -0.51, +2.4 GiB). V1: the v0.25.0 log (2 x RTX PRO 6000, 4,096 tokens): what its
// requested memory leaves after this model's weights, load overhead, CUDA graphs and the printed
// KV cache (2.61 GiB), less 0.91 of non-torch and 0.06 of sampler, over its shape model (1.13):
// 1.45 (one log of the modelled releases; a v0.21.1rc1 GB10 log at 8,192 tokens spent 1.9 GiB less
// than this model gives).
constexpr double kActivationScaleV1 = 1.45;
constexpr double kActivationScaleV2 = 0.60;

std::int64_t mul(std::int64_t a, std::int64_t b) { return checked_mul(a, b, "the activation estimate"); }
std::int64_t add(std::int64_t a, std::int64_t b) { return checked_add(a, b, "the memory budget"); }

std::int64_t gib_bytes(double gib) { return static_cast<std::int64_t>(std::llround(gib * static_cast<double>(kGiB))); }

BudgetTerm given_term(std::string id, std::string label, double gib, std::string flag) {
  BudgetTerm t;
  t.id = std::move(id);
  t.label = std::move(label);
  t.bytes = gib_to_bytes(gib, flag, TargetLimits::max_memory_gib, true);
  t.source = TermSource::given;
  t.how = flag + " " + format_general(gib);
  t.flag = std::move(flag);
  return t;
}

}  // namespace

std::string_view to_string(TermSource s) {
  switch (s) {
    case TermSource::measured: return "measured";
    case TermSource::derived: return "derived";
    case TermSource::estimated: return "estimated";
    case TermSource::given: return "given";
  }
  return "?";
}

const BudgetTerm* Budget::term(std::string_view id) const {
  for (const auto& t : terms) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

std::int64_t Budget::weights_bytes() const {
  const BudgetTerm* t = term("weights");
  return t ? t->bytes : 0;
}

std::int64_t Budget::overhead_bytes() const { return non_kv_bytes - weights_bytes(); }

std::int64_t default_max_num_seqs(const Target& target) { return vllm_large_gpu(target) ? 1024 : 256; }

std::int64_t largest_capture_size(const BudgetShape& s) {
  const std::int64_t per_seq = 1 + std::max<std::int64_t>(0, s.num_speculative_tokens);
  const std::int64_t seqs = std::max<std::int64_t>(1, s.max_num_seqs);
  return std::min(kMaxCaptureSize, 2 * std::min(seqs, kMaxCaptureSize) * per_seq);
}

std::int64_t estimate_cudagraph_bytes(const ModelConfig&, const BudgetShape& s) {
  const double layers = static_cast<double>(std::max<std::int64_t>(1, s.layers));
  const double gib =
      layers * (kCudagraphGibPerLayer + kCudagraphGibPerLayerToken * static_cast<double>(largest_capture_size(s)));
  return gib_bytes(gib);
}

static std::string cudagraph_how(const BudgetShape& s) {
  return "captures up to " + std::to_string(largest_capture_size(s)) +
         " tokens (2 x max_num_seqs x (1 + speculative tokens), at most 512) over " + std::to_string(s.layers) +
         " layers; fitted on two V1 logs (1.58 GiB at 384 tokens, 0.55 GiB at 24, 44 layers)";
}

ActivationParts estimate_activation(const ModelConfig& cfg, const BudgetShape& s) {
  const CheckpointFields& c = cfg.checkpoint;
  const std::int64_t T = std::max<std::int64_t>(1, s.max_num_batched_tokens);
  const std::int64_t H = std::max<std::int64_t>(1, c.hidden_size);
  const std::int64_t streams = std::max<std::int64_t>(1, c.hc_mult);  // mHC keeps hc_mult residual streams
  const std::int64_t tp = std::max<std::int64_t>(1, s.tensor_parallel_size);
  constexpr std::int64_t bf16 = 2;
  // Hidden states: the residual streams in, out and the mixing buffer of a layer.
  const std::int64_t hidden = mul(mul(mul(T, streams), H), 3 * bf16);
  // Attention of the local heads: the q low-rank activation, q and the attention output
  // (heads x head_dim each), and the grouped output projection's low-rank activation.
  const std::int64_t o_local = c.o_groups > 0 ? c.o_groups / std::min(tp, c.o_groups) * c.o_lora_rank : 0;
  const std::int64_t attn_cols = add(add(c.q_lora_rank, mul(2, mul(s.local_heads, cfg.head_dim))), o_local);
  const std::int64_t attention = mul(mul(T, attn_cols), bf16);
  // MoE: every token's top-k experts: gate/up (2 x MI), the activation (MI) and the down output (H).
  const std::int64_t moe_cols = add(mul(3, c.moe_intermediate_size), H);
  std::int64_t moe = mul(mul(mul(T, std::max<std::int64_t>(1, c.num_experts_per_tok)), moe_cols), bf16);
  // Expert parallelism over DP ranks: a rank's experts take the tokens of every DP rank.
  if (s.data_parallel_size > 1 && s.expert_parallel_size > 1) moe = mul(moe, s.data_parallel_size);
  ActivationParts p;
  const double scale = s.model_runner_v2 ? kActivationScaleV2 : kActivationScaleV1;
  p.shapes = static_cast<std::int64_t>(std::llround(static_cast<double>(add(add(hidden, attention), moe)) * scale));
  // Sampler (last stage): fp32 logits and probabilities of max_num_seqs rows over the vocabulary.
  const std::int64_t rows = std::min(T, std::max<std::int64_t>(1, s.max_num_seqs));
  p.sampler = s.last_stage ? mul(mul(rows, c.vocab_size), 2 * 4) : 0;
  // The V2 runner's profile holds the sparse indexer's fp8 logits of the batch against the whole
  // context, [max_num_batched_tokens, max_model_len] bytes (V4 and V4.1: the 0909 image's two runs
  // at max_model_len 1M and 4,096 differ by 15.84 GiB = 16,384 x 1,044,480 B).
  if (s.model_runner_v2 && cfg.index_topk > 0 && s.max_model_len > 0) p.indexer = mul(T, s.max_model_len);
  return p;
}

std::int64_t estimate_activation_bytes(const ModelConfig& cfg, const BudgetShape& s) {
  const ActivationParts p = estimate_activation(cfg, s);
  return add(add(p.shapes, p.sampler), p.indexer);
}

std::int64_t estimate_non_torch_bytes(const ModelConfig& cfg, const BudgetShape& s) {
  double gib = kNonTorchGibBase;
  if (s.tensor_parallel_size * s.data_parallel_size > 1) gib += kNonTorchGibCollectives;
  if (s.data_parallel_size > 1 && s.expert_parallel_size > 1) {
    gib += kNonTorchGibAllToAllPer16k * static_cast<double>(s.max_num_batched_tokens) / 16384.0;
  }
  if (!cfg.checkpoint.engram_layer_ids.empty()) gib += kNonTorchGibEngram;
  return gib_bytes(gib);
}

Budget plan_budget(const ModelConfig& cfg, const Target& target, const BudgetShape& shape, const BudgetOptions& o) {
  Budget b;
  // ---- the total and what vLLM requests of it ----
  if (target.memory_given || target.memory_overridden || target.runtime_memory_bytes <= 0) {
    // The user's figure (--gpu-memory-gib) stands for the total, whatever the preset says.
    b.total_bytes = target.memory_bytes;
    b.total_source = TermSource::given;
    b.total_how = "--gpu-memory-gib";
  } else {
    b.total_bytes = target.runtime_memory_bytes;
    b.total_how = target.runtime_memory_source;
    switch (target.runtime_basis) {
      case MemoryBasis::runtime_bytes:
      case MemoryBasis::runtime_mib_floor:
      case MemoryBasis::runtime_gib: b.total_source = TermSource::measured; break;
      case MemoryBasis::fixture:
      case MemoryBasis::nvidia_smi:
      case MemoryBasis::vendor: b.total_source = TermSource::estimated; break;
    }
    if (target.memory_upper_bound()) {
      b.total_upper_bound = true;
      b.findings.push_back(
          Finding{"budget.memory_upper_bound", Severity::warning,
                  "the CUDA runtime's total for " + target.id + " is not known: " +
                      std::string(target.runtime_basis == MemoryBasis::nvidia_smi ? "nvidia-smi's" : "the vendor's") +
                      " total " + format_gib(b.total_bytes) +
                      " stands in, and the runtime reports less; the KV cache and the fit are upper bounds",
                  "", "pass --gpu-memory-gib with the total torch.cuda.mem_get_info() reports on the GPU"});
    }
  }
  if (o.gpu_memory_utilization) {
    const double u = *o.gpu_memory_utilization;
    if (!(u > 0.0) || !(u <= 1.0)) {
      throw_usage("--gpu-memory-utilization: '" + format_general(u) + "' is out of range; allowed above 0 up to 1");
    }
    b.gpu_memory_utilization = u;
    b.utilization_default = false;
  }
  if (!o.gpu_memory_utilization) b.gpu_memory_utilization = shape.release->gpu_memory_utilization;
  b.requested_bytes = static_cast<std::int64_t>(
      std::ceil(static_cast<long double>(b.total_bytes) * static_cast<long double>(b.gpu_memory_utilization)));

  // ---- what is taken before the KV cache ----
  if (o.weights_gib) {
    b.terms.push_back(given_term("weights", "weights", *o.weights_gib, "--weights-gib"));
  } else {
    BudgetTerm t{"weights", "weights", shape.weights_bytes, shape.weights_source, shape.weights_how, "--weights-gib"};
    b.terms.push_back(std::move(t));
  }
  if (o.load_overhead_gib) {
    b.terms.push_back(given_term("load_overhead", "load overhead", *o.load_overhead_gib, "--load-overhead-gib"));
  } else {
    b.terms.push_back(BudgetTerm{"load_overhead", "load overhead", gib_bytes(kLoadOverheadGib), TermSource::estimated,
                                 "vLLM's \"Model loading took\" ran 0.71 and 0.84 GiB above the derived bytes in two "
                                 "V4-Flash TP4 logs; their midpoint",
                                 "--load-overhead-gib"});
  }
  if (o.activation_gib) {
    b.terms.push_back(given_term("activation_peak", "activation peak", *o.activation_gib, "--activation-gib"));
  } else {
    const ActivationParts a = estimate_activation(cfg, shape);
    std::string how = "profile run of " + std::to_string(shape.max_num_batched_tokens) +
                      " tokens: " + format_gib(a.shapes) + " hidden streams, local attention, top-k expert workspaces";
    if (a.sampler > 0) {
      how += ", " + format_gib(a.sampler) + " sampler logits of " +
             std::to_string(std::min(shape.max_num_batched_tokens, shape.max_num_seqs)) + " rows";
    }
    if (a.indexer > 0) {
      how += ", " + format_gib(a.indexer) + " indexer logits (" + std::to_string(shape.max_num_batched_tokens) +
             " x max_model_len " + std::to_string(shape.max_model_len) + ", fp8)";
    }
    how += shape.model_runner_v2
               ? "; shapes x 0.60, fitted on four V2-runner logs (computed - printed: -0.5 to +2.4 GiB)"
               : "; shapes x 1.45, fitted on the v0.25.0 case-A log";
    b.terms.push_back(BudgetTerm{"activation_peak", "activation peak", add(add(a.shapes, a.sampler), a.indexer),
                                 TermSource::estimated, how, "--activation-gib"});
  }
  if (o.non_torch_gib) {
    b.terms.push_back(given_term("non_torch", "non-torch memory", *o.non_torch_gib, "--non-torch-gib"));
  } else {
    const bool multi = shape.tensor_parallel_size * shape.data_parallel_size > 1;
    std::string how = multi ? "cuBLAS workspaces, NCCL and all-reduce buffers" : "cuBLAS workspaces (one GPU)";
    if (shape.data_parallel_size > 1 && shape.expert_parallel_size > 1) how += ", DP x EP all-to-all buffers";
    if (!cfg.checkpoint.engram_layer_ids.empty()) how += ", Engram's host-table mappings";
    how += "; each part fitted on one V2-runner log (0.23, 0.91, 1.91, 6.11 GiB printed)";
    b.terms.push_back(BudgetTerm{"non_torch", "non-torch memory", estimate_non_torch_bytes(cfg, shape),
                                 TermSource::estimated, how, "--non-torch-gib"});
  }
  if (o.cudagraph_gib) {
    b.terms.push_back(given_term("cudagraph", "CUDA graphs", *o.cudagraph_gib, "--cudagraph-gib"));
  } else if (o.enforce_eager) {
    b.terms.push_back(
        BudgetTerm{"cudagraph", "CUDA graphs", 0, TermSource::given, "--enforce-eager: no graphs", "--cudagraph-gib"});
  } else {
    const std::int64_t graphs = estimate_cudagraph_bytes(cfg, shape);
    if (shape.model_runner_v2 || !shape.release->cudagraph_profiling) {
      b.terms.push_back(BudgetTerm{"cudagraph", "CUDA graphs", 0, TermSource::derived,
                                   std::string(shape.model_runner_v2 ? "the V2 model runner" : "this release") +
                                       " takes no CUDA-graph estimate before the KV cache; its graphs (about " +
                                       format_gib(graphs) + ") come out of the memory outside --gpu-memory-utilization",
                                   "--cudagraph-gib"});
    } else {
      b.terms.push_back(BudgetTerm{
          "cudagraph", "CUDA graphs", graphs, TermSource::estimated,
          "vLLM's CUDA-graph memory estimate (V1 model runner, on by default since v0.21): " + cudagraph_how(shape),
          "--cudagraph-gib"});
    }
  }
  if (o.reserved_gib) {
    b.terms.push_back(given_term("reserved", "reserved", *o.reserved_gib, "--reserved-gib"));
  }
  for (const auto& t : b.terms) b.non_kv_bytes = add(b.non_kv_bytes, t.bytes);

  if (o.kv_cache_memory_bytes) {
    if (*o.kv_cache_memory_bytes <= 0) {
      throw_usage("--kv-cache-memory-bytes: '" + std::to_string(*o.kv_cache_memory_bytes) +
                  "' is out of range; allowed 1 and above");
    }
    b.explicit_kv_bytes = true;
    b.available_bytes = *o.kv_cache_memory_bytes;
    if (o.gpu_memory_utilization) {
      b.findings.push_back(Finding{"budget.kv_cache_memory_bytes", Severity::warning,
                                   "--kv-cache-memory-bytes is the KV cache itself: vLLM ignores "
                                   "--gpu-memory-utilization with it",
                                   "", ""});
    }
  } else {
    b.available_bytes = b.requested_bytes - b.non_kv_bytes;
  }
  if (target.unified_memory && !o.kv_cache_memory_bytes) {
    // GB10: CUDA's free memory is the host's available RAM; vLLM refuses to start when it is below
    // what it requests ("Free memory on device ... is less than desired GPU memory utilization").
    b.findings.push_back(Finding{
        "budget.unified_memory", Severity::warning,
        "unified memory: vLLM starts only if the free memory CUDA reports (the host's available RAM) is at least "
        "the requested " +
            format_gib(b.requested_bytes) + " (" + format_fixed(b.gpu_memory_utilization, 2) + " x " +
            format_gib(b.total_bytes) + "); DGX OS hosts have shown 101 to 114 GiB free of 121.69 GiB",
        "", "check the free memory before starting (free -g) and set --gpu-memory-utilization below free / total"});
  }
  if (!o.weights_gib && shape.weights_bytes == 0) {
    b.findings.push_back(Finding{"budget.weights_unknown", Severity::warning,
                                 "the weights are not known (" + shape.weights_how +
                                     "): they are counted as 0 GiB; pass --weights-gib or the model directory",
                                 "", "--weights-gib"});
  }
  return b;
}

}  // namespace mlaplan

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
/// One V4-Flash TP2 start-up log (96 GB cards, max_num_batched_tokens 4096, 2 draft tokens):
/// "CUDA graph memory" estimate 1.58 GiB for 43 layers + 1 MTP stage.
constexpr double kCudagraphGibPerLog = 1.58;
constexpr std::int64_t kCudagraphLayersPerLog = 44;
/// Non-torch memory the profile run adds (NCCL and custom all-reduce buffers, cuBLAS workspaces):
/// with the activation estimate below it makes the 2.9 GiB of that log.
constexpr double kNonTorchGibMultiRank = 0.7;
constexpr double kNonTorchGibSingle = 0.25;

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

std::int64_t estimate_activation_bytes(const ModelConfig& cfg, const BudgetShape& s) {
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
  const std::int64_t moe = mul(mul(mul(T, std::max<std::int64_t>(1, c.num_experts_per_tok)), moe_cols), bf16);
  // Sampler (last stage): fp32 logits and probabilities of max_num_seqs rows over the vocabulary.
  const std::int64_t rows = std::min(T, std::max<std::int64_t>(1, s.max_num_seqs));
  const std::int64_t sampler = s.last_stage ? mul(mul(rows, c.vocab_size), 2 * 4) : 0;
  return add(add(add(hidden, attention), moe), sampler);
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
    b.terms.push_back(BudgetTerm{
        "activation_peak", "activation peak", estimate_activation_bytes(cfg, shape), TermSource::estimated,
        "profile run of " + std::to_string(shape.max_num_batched_tokens) +
            " tokens: hidden streams, local attention, top-k expert workspaces" +
            (shape.last_stage ? ", sampler logits of " +
                                    std::to_string(std::min(shape.max_num_batched_tokens, shape.max_num_seqs)) + " rows"
                              : std::string()),
        "--activation-gib"});
  }
  if (o.non_torch_gib) {
    b.terms.push_back(given_term("non_torch", "non-torch memory", *o.non_torch_gib, "--non-torch-gib"));
  } else {
    const bool multi = shape.tensor_parallel_size * shape.data_parallel_size > 1;
    b.terms.push_back(BudgetTerm{"non_torch", "non-torch memory",
                                 gib_bytes(multi ? kNonTorchGibMultiRank : kNonTorchGibSingle), TermSource::estimated,
                                 multi ? "NCCL and all-reduce buffers, cuBLAS workspaces (calibrated on one V4-Flash "
                                         "TP2 log)"
                                       : "cuBLAS workspaces, no collective buffers (one GPU)",
                                 "--non-torch-gib"});
  }
  if (o.cudagraph_gib) {
    b.terms.push_back(given_term("cudagraph", "CUDA graphs", *o.cudagraph_gib, "--cudagraph-gib"));
  } else if (o.enforce_eager) {
    b.terms.push_back(
        BudgetTerm{"cudagraph", "CUDA graphs", 0, TermSource::given, "--enforce-eager: no graphs", "--cudagraph-gib"});
  } else {
    const std::int64_t layers = std::max<std::int64_t>(1, shape.layers);
    b.terms.push_back(BudgetTerm{
        "cudagraph", "CUDA graphs",
        static_cast<std::int64_t>(
            std::llround(kCudagraphGibPerLog * static_cast<double>(kGiB) * static_cast<double>(layers) /
                         static_cast<double>(kCudagraphLayersPerLog))),
        TermSource::estimated,
        "vLLM's CUDA-graph memory estimate (on by default since v0.21), scaled by layers from one V4-Flash TP2 log "
        "(1.58 GiB for 44 layers); " +
            std::to_string(layers) + " layers here",
        "--cudagraph-gib"});
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
  if (!o.weights_gib && shape.weights_bytes == 0) {
    b.findings.push_back(Finding{"budget.weights_unknown", Severity::warning,
                                 "the weights are not known (" + shape.weights_how +
                                     "): they are counted as 0 GiB; pass --weights-gib or the model directory",
                                 "", "--weights-gib"});
  }
  return b;
}

}  // namespace mlaplan

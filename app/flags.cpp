#include "flags.hpp"

#include <CLI/CLI.hpp>

#include "flag_values.hpp"
#include "mlaplan/limits.hpp"

namespace mlaplan::cli {

namespace {

const RealRange kMemoryGib{0.0, TargetLimits::max_memory_gib, true, "GiB"};
const RealRange kMemoryGibOrZero{0.0, TargetLimits::max_memory_gib, false, "GiB"};

}  // namespace

IntRange parallel_size_range() { return IntRange{1, LayoutLimits::max_parallel_size, {}}; }

void bind_target_flags(CLI::App& sub, TargetFlags& f) {
  sub.add_option("--gpu", f.gpu, "target GPU preset (mla-plan gpus lists them; default h200)")->group("Target");
  sub.add_option("--arch", f.arch, "compute capability of another GPU: sm90, sm100, sm103, sm120, 9.0 ...")
      ->group("Target");
  add_int_option(sub, "--num-sms", f.num_sms, "number of SMs (overrides the preset)",
                 IntRange{1, TargetLimits::max_num_sms, {}})
      ->group("Target");
  add_real_option(sub, "--gpu-memory-gib", f.memory_gib, "GPU memory in GiB (overrides the preset)", kMemoryGib)
      ->group("Target");
}

LayoutOptions LayoutFlags::resolved(std::int64_t spec_tokens) const {
  LayoutOptions o = options;
  o.include_draft_layers = !no_draft_layers;
  o.num_speculative_tokens = spec_tokens;
  return o;
}

void bind_layout_flags(CLI::App& sub, LayoutFlags& f, bool with_kv_dtype) {
  if (with_kv_dtype) {
    sub.add_option("--kv-cache-dtype", f.options.kv_cache_dtype,
                   "auto | fp8 | fp8_ds_mla | nvfp4_ds_mla (default auto = fp8_ds_mla)")
        ->group("Layout");
  }
  sub.add_option("--indexer-cache-dtype", f.options.indexer_cache_dtype, "fp8 | fp4 (default fp8)")->group("Layout");
  add_int_option(sub, "--block-size", f.options.block_size,
                 "tokens per page of the global caches (default: the backend's for the arch)",
                 IntRange{1, LayoutLimits::max_block_size, {}})
      ->group("Layout");
  add_int_option(sub, "--max-model-len", f.options.max_model_len,
                 "longest request (default: the config's max_position_embeddings)",
                 IntRange{1, ConfigLimits::max_positions,
                          "1..the config's max_position_embeddings, at most " +
                              std::to_string(ConfigLimits::max_positions)})
      ->group("Layout");
  add_int_option(sub, "--max-num-batched-tokens", f.options.in_flight_tokens,
                 "tokens one request may schedule in a step; sizes the window pages (default: vLLM's)",
                 IntRange{1, LayoutLimits::max_in_flight_tokens, {}})
      ->group("Layout");
  sub.add_flag("--no-draft-layers", f.no_draft_layers, "plan without the draft (MTP / DSpark) layers' caches")
      ->group("Layout");
  add_int_option(sub, "--tensor-parallel-size,--tp", f.options.tensor_parallel_size, "TP size (default 1)",
                 parallel_size_range())
      ->group("Parallelism");
  add_int_option(sub, "--pipeline-parallel-size,--pp", f.options.pipeline_parallel_size, "PP size (default 1)",
                 IntRange{1, LayoutLimits::max_parallel_size,
                          "1.." + std::to_string(LayoutLimits::max_parallel_size) +
                              ", at most the config's backbone layers"})
      ->group("Parallelism");
  add_int_option(sub, "--data-parallel-size,--dp", f.options.data_parallel_size, "DP size (default 1)",
                 parallel_size_range())
      ->group("Parallelism");
}

void bind_capacity_flags(CLI::App& sub, CapacityFlags& f) {
  add_real_option(sub, "--gpu-memory-utilization", f.options.gpu_memory_utilization,
                  "fraction of GPU memory for the engine (default 0.9)", RealRange{0.0, 1.0, true, {}})
      ->group("Capacity");
  add_real_option(sub, "--weights-gib", f.options.weights_gib, "model weights per GPU, GiB (default 0)",
                  kMemoryGibOrZero)
      ->group("Capacity");
  add_real_option(sub, "--reserved-gib", f.options.reserved_gib, "other reserved memory per GPU, GiB (default 0)",
                  kMemoryGibOrZero)
      ->group("Capacity");
  add_real_option(sub, "--kv-budget-gib", f.options.kv_budget_gib, "the KV-cache budget per GPU itself, GiB",
                  kMemoryGib)
      ->group("Capacity");
}

void bind_batch_flags(CLI::App& sub, BatchFlags& f) {
  const IntRange context{1, ConfigLimits::max_positions, "1..max_model_len minus --spec-tokens"};
  add_int_option(sub, "--batch", f.options.batch, "requests in the decode step (default 64)",
                 IntRange{1, BatchLimits::max_requests, {}})
      ->group("Batch");
  add_int_option(sub, "--context-len", f.options.context_len, "context length of every request (default 4096)",
                 context)
      ->group("Batch");
  add_int_list_option(sub, "--context-lens", f.options.context_lens, "per-request context lengths, comma-separated",
                      context)
      ->group("Batch");
  add_int_option(sub, "--spec-tokens", f.options.spec_tokens,
                 "speculative tokens per request: each contributes 1 + K decode tokens",
                 IntRange{0, BatchLimits::max_spec_tokens, {}})
      ->group("Batch");
}

}  // namespace mlaplan::cli

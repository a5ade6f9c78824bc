#include "flags.hpp"

#include <CLI/CLI.hpp>

namespace mlaplan::cli {

void bind_target_flags(CLI::App& sub, TargetFlags& f) {
  sub.add_option("--gpu", f.gpu, "target GPU preset (mla-plan gpus lists them; default h200)")->group("Target");
  sub.add_option("--arch", f.arch, "compute capability of another GPU: sm90, sm100, sm103, sm120, 9.0 ...")
      ->group("Target");
  sub.add_option("--num-sms", f.num_sms, "number of SMs (overrides the preset)")->group("Target");
  sub.add_option("--gpu-memory-gib", f.memory_gib, "GPU memory in GiB (overrides the preset)")->group("Target");
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
  sub.add_option("--block-size", f.options.block_size,
                 "tokens per page of the global caches (default: the backend's for the arch)")
      ->group("Layout");
  sub.add_option("--max-model-len", f.options.max_model_len,
                 "longest request (default: the config's max_position_embeddings)")
      ->group("Layout");
  sub.add_option("--max-num-batched-tokens", f.options.in_flight_tokens,
                 "tokens one request may schedule in a step; sizes the window pages (default: vLLM's)")
      ->group("Layout");
  sub.add_flag("--no-draft-layers", f.no_draft_layers, "plan without the draft (MTP / DSpark) layers' caches")
      ->group("Layout");
  sub.add_option("--tensor-parallel-size,--tp", f.options.tensor_parallel_size, "TP size (default 1)")
      ->group("Parallelism");
  sub.add_option("--pipeline-parallel-size,--pp", f.options.pipeline_parallel_size, "PP size (default 1)")
      ->group("Parallelism");
  sub.add_option("--data-parallel-size,--dp", f.options.data_parallel_size, "DP size (default 1)")
      ->group("Parallelism");
}

void bind_capacity_flags(CLI::App& sub, CapacityFlags& f) {
  sub.add_option("--gpu-memory-utilization", f.options.gpu_memory_utilization,
                 "fraction of GPU memory for the engine (default 0.9)")
      ->group("Capacity");
  sub.add_option("--weights-gib", f.options.weights_gib, "model weights per GPU, GiB (default 0)")->group("Capacity");
  sub.add_option("--reserved-gib", f.options.reserved_gib, "other reserved memory per GPU, GiB (default 0)")
      ->group("Capacity");
  sub.add_option("--kv-budget-gib", f.options.kv_budget_gib, "the KV-cache budget per GPU itself, GiB")
      ->group("Capacity");
}

void bind_batch_flags(CLI::App& sub, BatchFlags& f) {
  sub.add_option("--batch", f.options.batch, "requests in the decode step (default 64)")->group("Batch");
  sub.add_option("--context-len", f.options.context_len, "context length of every request (default 4096)")
      ->group("Batch");
  sub.add_option("--context-lens", f.options.context_lens, "per-request context lengths, comma-separated")
      ->delimiter(',')
      ->group("Batch");
  sub.add_option("--spec-tokens", f.options.spec_tokens,
                 "speculative tokens per request: each contributes 1 + K decode tokens")
      ->group("Batch");
}

}  // namespace mlaplan::cli

#include "flags/flags.hpp"

#include <CLI/CLI.hpp>

#include "flags/flag_values.hpp"
#include <unistd.h>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/input_file.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan::cli {

namespace {

// A size above 0: at least one byte once converted (2^-30 GiB), so that no value typed becomes 0
// bytes further on (--kv-budget-gib 1e-10 is refused as itself, not as --kv-cache-memory-bytes 0).
const RealRange kMemoryGib{0.0, TargetLimits::max_memory_gib, true, "GiB", true};
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
  o.fused_attention = fused_attention == "true"    ? FusedAttention::on
                      : fused_attention == "false" ? FusedAttention::off
                                                   : FusedAttention::auto_;
  return o;
}

void bind_layout_flags(CLI::App& sub, LayoutFlags& f, bool with_kv_dtype) {
  if (with_kv_dtype) {
    sub.add_option("--kv-cache-dtype", f.options.kv_cache_dtype,
                   "auto | bfloat16 | fp8 | fp8_e4m3 | fp8_e5m2 | fp8_ds_mla | nvfp4_ds_mla (default auto: what the "
                   "backend stores, fp8_ds_mla on FlashMLA)")
        ->group("Layout");
  }
  sub.add_option("--attention-backend", f.options.attention_backend,
                 "vLLM's backend name, e.g. FLASHMLA_SPARSE_DSV41, FLASHINFER_MLA_SPARSE_DSV41 (default: vLLM's "
                 "choice for the GPU)")
      ->group("Layout");
  sub.add_option("--dsv4-fused-attention", f.fused_attention,
                 "auto | true | false: vLLM's attention_config.dsv4_fused_attention (V4.1 on SM100; default auto)")
      ->check(one_of({"auto", "true", "false"}))
      ->group("Layout");
  sub.add_option("--indexer-cache-dtype", f.options.indexer_cache_dtype, "fp8 | fp4 (default fp8)")->group("Layout");
  add_int_option(sub, "--block-size", f.options.block_size,
                 "tokens per page of the global caches (default: the backend's for the arch)",
                 IntRange{1, LayoutLimits::max_block_size, {}})
      ->group("Layout");
  add_size_option(
      sub, "--max-model-len", f.options.max_model_len,
      "longest request, in vLLM's syntax (32768, 128k = 128000, 128K = 131072); auto: the longest that fits and "
      "serves --min-concurrency requests (default: the config's max_position_embeddings)",
      IntRange{1, ConfigLimits::max_positions,
               "1..the config's max_position_embeddings, at most " + std::to_string(ConfigLimits::max_positions)},
      &f.max_model_len_auto)
      ->group("Layout");
  add_size_option(sub, "--max-num-batched-tokens", f.options.in_flight_tokens,
                  "tokens one request may schedule in a step; sizes the window pages (default: vLLM's)",
                  IntRange{1, LayoutLimits::max_in_flight_tokens, {}})
      ->group("Layout");
  sub.add_flag("--no-draft-layers", f.no_draft_layers, "plan without the draft (MTP / DSpark) layers' caches")
      ->group("Layout");
  add_int_option(sub, "--tensor-parallel-size,--tp", f.options.tensor_parallel_size, "TP size (default 1)",
                 parallel_size_range())
      ->group("Parallelism");
  add_int_option(
      sub, "--pipeline-parallel-size,--pp", f.options.pipeline_parallel_size, "PP size (default 1)",
      IntRange{1, LayoutLimits::max_parallel_size,
               "1.." + std::to_string(LayoutLimits::max_parallel_size) + ", at most the config's backbone layers"})
      ->group("Parallelism");
  add_int_option(sub, "--data-parallel-size,--dp", f.options.data_parallel_size, "DP size (default 1)",
                 parallel_size_range())
      ->group("Parallelism");
  add_int_option(sub, "--decode-context-parallel-size,--dcp", f.options.decode_context_parallel_size,
                 "DCP size: full caches sharded over DCP ranks of each TP group (default 1)", parallel_size_range())
      ->group("Parallelism");
  add_int_option(sub, "--cp-kv-cache-interleave-size", f.options.cp_kv_cache_interleave_size,
                 "tokens a DCP rank stores in a row (vLLM's; default 1)", IntRange{1, LayoutLimits::max_block_size, {}})
      ->group("Parallelism");
}

void bind_layout_given(CLI::App& sub, LayoutGiven& given) {
  sub.parse_complete_callback([&sub, &given] {
    const auto count = [&sub](const char* name) {
      const CLI::Option* o = sub.get_option_no_throw(name);
      return o != nullptr && o->count() > 0;
    };
    given.tensor_parallel = count("--tensor-parallel-size");
    given.pipeline_parallel = count("--pipeline-parallel-size");
    given.data_parallel = count("--data-parallel-size");
    given.context_parallel = count("--decode-context-parallel-size");
    given.expert_parallel = count("--enable-expert-parallel");
    given.engram = count("--engram");
  });
}

BudgetOptions FitFlags::resolved_budget() const {
  BudgetOptions b = budget;
  if (kv_budget_gib) {
    if (b.kv_cache_memory_bytes) {
      throw_usage("--kv-budget-gib and --kv-cache-memory-bytes both set the KV-cache bytes per GPU; give one");
    }
    b.kv_cache_memory_bytes = gib_to_bytes(*kv_budget_gib, "--kv-budget-gib");
  }
  return b;
}

PrefillOptions FitFlags::resolved_prefill() const {
  PrefillOptions p;
  p.tiling = parse_indexer_tiling(indexer_tiling);
  p.logits_budget_mib = indexer_logits_budget_mib;
  return p;
}

DeployOptions FitFlags::resolved_deploy() const {
  DeployOptions d = deploy;
  if (no_async_scheduling) d.async_scheduling = false;
  if (async_scheduling) d.async_scheduling = true;
  d.read_checkpoint_files = !no_checkpoint_files;
  d.prefix_caching = !no_prefix_caching;
  return d;
}

void FitFlags::apply_to(LayoutOptions& layout) const {
  layout.enable_expert_parallel = enable_expert_parallel;
  layout.engram = engram == "offload" ? EngramPlacement::offload : EngramPlacement::gpu;
  layout.language_model_only = language_model_only;
}

void bind_fit_flags(CLI::App& sub, FitFlags& f) {
  add_real_option(sub, "--gpu-memory-utilization", f.budget.gpu_memory_utilization,
                  "fraction of each GPU's total memory vLLM may use (default: the release's, 0.92)",
                  RealRange{0.0, 1.0, true, {}})
      ->group("Fit");
  add_size_option(sub, "--kv-cache-memory-bytes", f.budget.kv_cache_memory_bytes,
                  "the KV cache per GPU itself, bytes: no budget is computed (vLLM's flag)",
                  IntRange{1, std::int64_t{1} << 50, {}})
      ->group("Fit");
  add_real_option(sub, "--kv-budget-gib", f.kv_budget_gib, "--kv-cache-memory-bytes in GiB", kMemoryGib)->group("Fit");
  add_real_option(sub, "--weights-gib", f.budget.weights_gib,
                  "weights per GPU, GiB (default: the checkpoint's, placed for the layout)", kMemoryGibOrZero)
      ->group("Fit");
  add_real_option(sub, "--load-overhead-gib", f.budget.load_overhead_gib,
                  "what loading takes beyond the weights, GiB (default: measured on V4-Flash, 0.78)", kMemoryGibOrZero)
      ->group("Fit");
  add_real_option(sub, "--activation-gib", f.budget.activation_gib,
                  "the profile run's activation peak, GiB (default: estimated from the shapes)", kMemoryGibOrZero)
      ->group("Fit");
  add_real_option(sub, "--non-torch-gib", f.budget.non_torch_gib,
                  "non-torch memory (NCCL, cuBLAS), GiB (default: estimated)", kMemoryGibOrZero)
      ->group("Fit");
  add_real_option(sub, "--cudagraph-gib", f.budget.cudagraph_gib,
                  "the CUDA-graph pool, GiB (default: estimated; 0 with --enforce-eager)", kMemoryGibOrZero)
      ->group("Fit");
  add_real_option(sub, "--reserved-gib", f.budget.reserved_gib, "anything else taken per GPU, GiB (default 0)",
                  kMemoryGibOrZero)
      ->group("Fit");
  sub.add_flag("--enforce-eager", f.budget.enforce_eager, "no CUDA graphs (vLLM's flag)")->group("Fit");
  sub.add_flag("--enable-expert-parallel", f.enable_expert_parallel,
               "experts over TP x DP ranks (vLLM's flag; EP = TP x DP)")
      ->group("Parallelism");
  sub.add_option("--engram", f.engram,
                 "gpu | offload: where V4.1's Engram tables live (default offload: vLLM's VLLM_PLE_CPU_OFFLOAD "
                 "defaults to host memory in every release with V4.1)")
      ->check(one_of({"gpu", "offload"}))
      ->group("Fit");
  add_int_option(sub, "--max-num-seqs", f.deploy.max_num_seqs,
                 "requests per step; sizes the sampler's profile (default: vLLM's for the GPU)",
                 IntRange{1, BatchLimits::max_requests, {}})
      ->group("Fit");
  auto* no_async = sub.add_flag("--no-async-scheduling", f.no_async_scheduling,
                                "one batch in flight: halves the sliding-window reserve (default: the release's, on)")
                       ->group("Fit");
  sub.add_flag("--async-scheduling", f.async_scheduling, "async scheduling on (vLLM's default)")
      ->excludes(no_async)
      ->group("Fit");
  sub.add_option(
         "--vllm-version", f.deploy.vllm_version,
         "the vLLM release whose rules apply: X.Y or X.Y.Z, one of " + vllm_release_list() + " (default: the newest)")
      ->check([](const std::string& v) {
        find_vllm_release(v);  // Error(usage) naming the value and the releases
        return std::string();
      })
      ->group("Fit");
  add_int_option(sub, "--prefix-cache-retention-interval", f.deploy.prefix_cache_retention_interval,
                 "tokens between the sliding-window checkpoints the prefix cache keeps; 0 only the replay "
                 "boundary (vLLM's flag and default); a multiple of the scheduler block",
                 IntRange{0, ConfigLimits::max_positions, {}})
      ->group("Fit");
  add_real_option(sub, "--kv-offloading-size", f.deploy.kv_offloading_size_gib,
                  "GiB of host memory for vLLM's native KV offloading connector, over the engine's workers (vLLM's "
                  "flag); sizes the host tier",
                  kMemoryGib)
      ->group("Fit");
  sub.add_option("--indexer-tiling", f.indexer_tiling,
                 "rows | none: how the sparse indexer tiles a prefill chunk's scores (default rows, vLLM's; none: "
                 "the whole chunk at once)")
      ->check(one_of({"rows", "none"}))
      ->group("Prefill");
  add_int_option(sub, "--indexer-logits-budget-mib", f.indexer_logits_budget_mib,
                 "fp32 scores one row tile holds, MiB (default 512, vLLM's VLLM_SPARSE_INDEXER_MAX_LOGITS_MB)",
                 IntRange{1, std::int64_t{1} << 20, {}})
      ->group("Prefill");
  sub.add_flag("--no-enable-prefix-caching", f.no_prefix_caching,
               "vLLM without prefix caching: the same KV memory, no prefix-cache tier (vLLM's flag)")
      ->group("Fit");
  sub.add_flag("--language-model-only", f.language_model_only,
               "serve text only: vLLM does not load the vision tower (vLLM's flag)")
      ->group("Fit");
  sub.add_option(
         "--revision", f.revision,
         "the branch, tag or commit of a Hugging Face repo id MODEL in the local cache (vLLM's flag; default main)")
      ->group("Model");
  sub.add_option("--download-dir", f.download_dir,
                 "the Hugging Face cache to look in instead of HF_HUB_CACHE / HF_HOME's (vLLM's flag)")
      ->group("Model");
  sub.add_option("--hf-overrides", f.hf_overrides,
                 "a JSON object merged into config.json before it is read (vLLM's flag)")
      ->group("Model");
  sub.add_flag("--no-checkpoint-files", f.no_checkpoint_files,
               "derive the weights from config.json even when the directory has safetensors files")
      ->group("Fit");
}

void BatchFlags::read_files() {
  if (!context_lens_file) return;
  const std::string file = *context_lens_file;
  context_lens_file.reset();
  const InputFileRules rules{"--context-lens: ", BatchLimits::max_context_lens_file_bytes,
                             "BatchLimits::max_context_lens_file_bytes",
                             "65,536 lengths, the most a batch has, take under 1 MiB"};
  const bool stdin_file = file == "-";
  const std::string text =
      stdin_file ? read_input_stream(STDIN_FILENO, "standard input", rules) : read_input_file(file, rules);
  // Named as the user wrote it, unquoted (as the flag and its value are): "--context-lens @lens.txt".
  options.context_lens_source = "--context-lens @" + printable(file, kQuotedPathMaxBytes);
  const IntRange context{1, ConfigLimits::max_positions, "1..max_model_len minus --spec-tokens"};
  options.context_lens = parse_int_list_text(options.context_lens_source, text, context, BatchLimits::max_requests,
                                             options.context_lens_lines);
}

void bind_batch_flags(CLI::App& sub, BatchFlags& f) {
  const IntRange context{1, ConfigLimits::max_positions, "1..max_model_len minus --spec-tokens"};
  add_int_option(sub, "--batch", f.options.batch, "requests in the decode step (default 64)",
                 IntRange{1, BatchLimits::max_requests, {}})
      ->group("Batch");
  add_int_option(sub, "--context-len", f.options.context_len, "context length of every request (default 4096)", context)
      ->group("Batch");
  add_int_list_or_file_option(sub, "--context-lens", f.options.context_lens, f.context_lens_file,
                              "per-request context lengths, comma-separated; or @FILE (one per line and/or "
                              "comma-separated), @- for standard input",
                              context)
      ->group("Batch");
  add_int_option(sub, "--spec-tokens", f.options.spec_tokens,
                 "speculative tokens per request: each contributes 1 + K decode tokens",
                 IntRange{0, BatchLimits::max_spec_tokens, {}})
      ->group("Batch");
}

void bind_engine_flags(CLI::App& sub, EngineFlags& f) {
  sub.add_option("--engine", f.engine,
                 "vllm | sglang | all: whose start-up to answer as (default vllm; all: both side by side)")
      ->check(one_of({"vllm", "sglang", "all"}))
      ->group("Engine");
  sub.add_option("--sglang-version", f.sglang.generation,
                 "the SGLang pool-configurator generation whose rules apply: " + sglang_generation_list() +
                     " (default: the newest; docs/sglang.md)")
      ->check([](const std::string& v) {
        find_sglang_generation(v);  // Error(usage) naming the value and the generations
        return std::string();
      })
      ->group("SGLang");
  add_real_option(sub, "--mem-fraction-static", f.sglang.mem_fraction_static,
                  "SGLang: the static share of the free memory before loading (default: SGLang's, from the GPU's "
                  "memory and the reserve)",
                  RealRange{0.0, 1.0, true, {}})
      ->group("SGLang");
  const IntRange tokens{1, ConfigLimits::max_positions * 64, {}};
  add_int_option(sub, "--max-running-requests", f.sglang.max_running_requests,
                 "SGLang: running requests over the DP workers (default 256 for DeepSeek V4)",
                 IntRange{1, BatchLimits::max_requests, {}})
      ->group("SGLang");
  add_int_option(sub, "--chunked-prefill-size", f.sglang.chunked_prefill_size,
                 "SGLang: tokens per prefill chunk, engine-wide (default by GPU memory: 8192 on 80-160 GB); -1 or 0: "
                 "chunked prefill off",
                 IntRange{-1, tokens.hi, "-1 or 0 (chunked prefill off), or 1.." + std::to_string(tokens.hi)})
      ->group("SGLang");
  add_int_option(sub, "--max-prefill-tokens", f.sglang.max_prefill_tokens,
                 "SGLang: tokens of one prefill batch (default 16384)", tokens)
      ->group("SGLang");
  add_int_option(sub, "--max-total-tokens", f.sglang.max_total_tokens,
                 "SGLang: caps the full pool's tokens (above the profiled count: ignored, as SGLang warns)", tokens)
      ->group("SGLang");
  add_real_option(sub, "--swa-full-tokens-ratio", f.sglang.swa_full_tokens_ratio,
                  "SGLang: size the SWA pool as this share of the full pool (ratio mode; default: cap mode)",
                  RealRange{0.0, 1.0, true, {}})
      ->group("SGLang");
  add_int_option(sub, "--swa-prefix-tails", f.sglang.swa_prefix_tails,
                 "SGLang: cached prefix tails the SWA pool keeps addressable per worker (default 4 x running "
                 "requests; 0 with --disable-radix-cache)",
                 IntRange{0, BatchLimits::max_requests * 64, {}})
      ->group("SGLang");
  add_int_option(sub, "--cuda-graph-max-bs", f.sglang.cuda_graph_max_bs,
                 "SGLang: the largest decode batch captured (default by GPU memory and TP)",
                 IntRange{1, BatchLimits::max_requests, {}})
      ->group("SGLang");
  add_int_option(sub, "--page-size", f.sglang.page_size,
                 "SGLang's --page-size (the dsv4 attention backend sets 256 on CUDA)", IntRange{1, 1 << 20, {}})
      ->group("SGLang");
  sub.add_option("--sglang-kv-cache-dtype", f.sglang.kv_cache_dtype,
                 "SGLang's --kv-cache-dtype: auto | fp8_e4m3 | fp8_e5m2 | bf16 | bfloat16 | fp4_e2m1 (default auto: "
                 "fp8_e4m3 for DeepSeek V4)")
      ->check(one_of({"auto", "fp8_e4m3", "fp8_e5m2", "bf16", "bfloat16", "fp4_e2m1"}))
      ->group("SGLang");
  sub.add_flag("--disable-radix-cache", f.sglang.disable_radix_cache, "SGLang: no prefix reuse (no prefix tails)")
      ->group("SGLang");
  sub.add_flag("--disable-cuda-graph", f.sglang.disable_cuda_graph,
               "SGLang: no CUDA graphs (decode and prefill: their reserve terms go, DP attention's stays)")
      ->group("SGLang");
  sub.add_flag("--disable-piecewise-cuda-graph", f.sglang.disable_piecewise_cuda_graph,
               "SGLang: no prefill (piecewise) CUDA graphs: their 1,536 MiB reserve term goes")
      ->group("SGLang");
  sub.add_flag("--disable-overlap-schedule", f.sglang.disable_overlap_schedule,
               "SGLang: no overlap scheduling (one prefill chunk in flight)")
      ->group("SGLang");
  sub.add_flag("--enable-dp-attention", f.sglang.enable_dp_attention,
               "SGLang: attention data-parallel over --data-parallel-size workers (each its own pools)")
      ->group("SGLang");
  sub.add_flag("--enable-two-batch-overlap", f.sglang.enable_two_batch_overlap, "SGLang's two-batch overlap")
      ->group("SGLang");
  sub.add_flag("--enable-hisparse", f.sglang.enable_hisparse, "SGLang's HiSparse (c4 pool partly on the host)")
      ->group("SGLang");
  sub.add_option("--moe-a2a-backend", f.sglang.moe_a2a_backend,
                 "SGLang's MoE all-to-all backend: none | deepep | mooncake | ... (deepep reserves 2 GiB more)")
      ->group("SGLang");
  sub.add_option("--speculative-algorithm", f.sglang.speculative_algorithm,
                 "SGLang: EAGLE | EAGLE3 | NEXTN | DSPARK | STANDALONE | NGRAM (default none)")
      ->group("SGLang");
  const IntRange small{1, 64, {}};
  add_int_option(sub, "--speculative-num-draft-tokens", f.sglang.speculative_num_draft_tokens,
                 "SGLang: draft tokens verified per step", small)
      ->group("SGLang");
  add_int_option(sub, "--speculative-num-steps", f.sglang.speculative_num_steps, "SGLang: EAGLE draft steps", small)
      ->group("SGLang");
  add_int_option(sub, "--speculative-eagle-topk", f.sglang.speculative_eagle_topk, "SGLang: EAGLE top-k", small)
      ->group("SGLang");
  add_int_option(sub, "--speculative-dspark-block-size", f.sglang.speculative_dspark_block_size,
                 "SGLang: the DSpark block (draft tokens = block + 1)", small)
      ->group("SGLang");
  add_int_option(sub, "--swa-eviction-interval", f.sglang.swa_eviction_interval,
                 "SGLang's SGLANG_SWA_EVICTION_INTERVAL (default 128)", IntRange{1, 1 << 20, {}})
      ->group("SGLang");
  add_real_option(sub, "--free-before-load-gib", f.sglang.free_before_load_gib,
                  "SGLang: the free memory before loading, GiB, as its log prints (\"Load weight begin. avail mem\"); "
                  "default: the GPU's total less an estimate",
                  kMemoryGib)
      ->group("SGLang");
}

}  // namespace mlaplan::cli

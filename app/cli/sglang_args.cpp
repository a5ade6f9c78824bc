// `mla-plan sglang serve ...` and `mla-plan python -m sglang.launch_server ...`
// (app/cli/sglang_args.hpp). SGLang's flags and their parsing are read from
// SGLang's python/sglang/srt/server_args.py (ServerArgs, add_cli_args: argparse with
// allow_abbrev, dashes only, store_true switches), python/sglang/cli/serve.py (MODEL as the first
// word, --model-type) and its "Server Arguments" documentation page; docs/launch.md lists what each
// flag becomes.
#include "cli/sglang_args.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <map>
#include <optional>
#include <string_view>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/suggest.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan::cli {

// A named namespace, not an anonymous one: the CLI library may be compiled as unity sources
// (MLAPLAN_UNITY_BUILD), where vllm_args.cpp's own Kind, Flag and kFlags share the translation unit.
namespace sglang_serve_impl {

enum class Kind {
  model,             ///< --model-path: MODEL
  tp,                ///< --tp-size: the world size W of one server
  dp,                ///< --dp-size: N attention-DP workers or N replicas
  ep,                ///< --ep-size: 1 or W
  dp_attention,      ///< --enable-dp-attention
  kv_dtype,          ///< --kv-cache-dtype: --sglang-kv-cache-dtype, SGLang's choices
  map,               ///< a value, given to mla-plan's `target` flag
  map_bool,          ///< a switch: mla-plan's `target` switch
  ignore,            ///< a value that changes nothing the plan computes
  ignore_bool,       ///< a switch that changes nothing the plan computes
  ignore_multi,      ///< one or more values (nargs "+" / "*") that change nothing the plan computes
  ignore_optional,   ///< an optional value (nargs "?") that changes nothing the plan computes
  unmodelled,        ///< a value that changes memory in a way mla-plan does not model (`target`: its default)
  unmodelled_bool,   ///< a switch that changes memory in a way mla-plan does not model
  unmodelled_multi,  ///< one or more values that change memory in a way mla-plan does not model
  refused,           ///< a flag mla-plan cannot follow (`why`: the message)
};

/// What argparse's `type` makes of the value (checked here, so that the message names SGLang's flag).
enum class Val { text, integer, real };

struct Flag {
  std::string_view names;  ///< "--tp-size,--tensor-parallel-size,--tp": SGLang's own name first
  Kind kind;
  std::string_view target = {};
  std::string_view why = {};  ///< refused: the message; unmodelled: what it changes
  Val val = Val::text;
};

// clang-format off
const Flag kFlags[] = {
    // Model and tokenizer
    {"--model-path,--model", Kind::model},
    {"--context-length", Kind::map, "--max-model-len", {}, Val::integer},
    {"--dtype", Kind::map, "--dtype"},
    {"--revision", Kind::map, "--revision"},
    {"--download-dir", Kind::map, "--download-dir"},
    {"--json-model-override-args", Kind::map, "--hf-overrides"},
    {"--language-only", Kind::map_bool, "--language-model-only"},
    {"--encoder-only", Kind::unmodelled_bool, {}, "the weights (the multimodal encoder alone)"},
    {"--tokenizer-path", Kind::ignore}, {"--tokenizer-mode", Kind::ignore}, {"--tokenizer-worker-num", Kind::ignore},
    {"--skip-tokenizer-init", Kind::ignore_bool}, {"--load-format", Kind::ignore},
    {"--model-loader-extra-config", Kind::ignore}, {"--trust-remote-code", Kind::ignore_bool},
    {"--is-embedding", Kind::ignore_bool}, {"--enable-multimodal", Kind::ignore_bool}, {"--model-impl", Kind::ignore},
    {"--preferred-sampling-params", Kind::ignore},
    // HTTP server
    {"--host", Kind::ignore}, {"--port", Kind::ignore}, {"--fastapi-root-path", Kind::ignore},
    {"--grpc-mode", Kind::ignore_bool}, {"--skip-server-warmup", Kind::ignore_bool}, {"--warmups", Kind::ignore},
    {"--nccl-port", Kind::ignore}, {"--checkpoint-engine-wait-weights-before-ready", Kind::ignore_bool},
    // Quantization and data type
    {"--kv-cache-dtype", Kind::kv_dtype},
    {"--quantization", Kind::unmodelled, {}, "the weights' storage (a quantization other than the checkpoint's)"},
    {"--modelopt-quant", Kind::unmodelled, {}, "the weights' storage (a ModelOpt quantization)"},
    {"--quantize-and-serve", Kind::unmodelled_bool, {}, "the weights' storage (quantized at start-up)"},
    {"--torchao-config", Kind::unmodelled, "", "the weights' storage (a torchao quantization)"},
    {"--quantization-param-path", Kind::ignore}, {"--enable-fp32-lm-head", Kind::ignore_bool},
    {"--modelopt-checkpoint-restore-path", Kind::ignore}, {"--modelopt-checkpoint-save-path", Kind::ignore},
    {"--modelopt-export-path", Kind::ignore}, {"--rl-quant-profile", Kind::ignore},
    {"--enable-quant-communications", Kind::ignore_bool},
    // Memory and scheduling
    {"--mem-fraction-static", Kind::map, "--mem-fraction-static", {}, Val::real},
    {"--max-running-requests", Kind::map, "--max-running-requests", {}, Val::integer},
    {"--max-total-tokens", Kind::map, "--max-total-tokens", {}, Val::integer},
    {"--chunked-prefill-size", Kind::map, "--chunked-prefill-size", {}, Val::integer},
    {"--max-prefill-tokens", Kind::map, "--max-prefill-tokens", {}, Val::integer},
    {"--page-size", Kind::map, "--page-size", {}, Val::integer},
    {"--swa-full-tokens-ratio", Kind::map, "--swa-full-tokens-ratio", {}, Val::real},
    {"--swa-prefix-tails", Kind::map, "--swa-prefix-tails", {}, Val::integer},
    {"--disable-hybrid-swa-memory", Kind::unmodelled_bool, {}, "the SWA pools (full-length caches instead)"},
    {"--max-queued-requests", Kind::ignore}, {"--prefill-max-requests", Kind::ignore},
    {"--enable-dynamic-chunking", Kind::ignore_bool}, {"--schedule-policy", Kind::ignore},
    {"--enable-priority-scheduling", Kind::ignore_bool}, {"--abort-on-priority-when-disabled", Kind::ignore_bool},
    {"--schedule-low-priority-values-first", Kind::ignore_bool},
    {"--priority-scheduling-preemption-threshold", Kind::ignore}, {"--schedule-conservativeness", Kind::ignore},
    {"--radix-eviction-policy", Kind::ignore}, {"--enable-prefill-delayer", Kind::ignore_bool},
    {"--prefill-delayer-max-delay-passes", Kind::ignore}, {"--prefill-delayer-token-usage-low-watermark", Kind::ignore},
    {"--prefill-delayer-queue-min-ratio", Kind::ignore}, {"--prefill-delayer-max-delay-ms", Kind::ignore},
    {"--prefill-delayer-forward-passes-buckets", Kind::ignore_multi},
    {"--prefill-delayer-wait-seconds-buckets", Kind::ignore_multi},
    // Runtime options: the parallel layout
    {"--tp-size,--tensor-parallel-size,--tp", Kind::tp, {}, {}, Val::integer},
    {"--pp-size,--pipeline-parallel-size,--pp", Kind::map, "--pipeline-parallel-size", {}, Val::integer},
    {"--attn-cp-size,--attention-context-parallel-size", Kind::unmodelled, "1", "attention context parallelism"},
    {"--dcp-size,--decode-context-parallel-size", Kind::unmodelled, "1", "SGLang's decode context parallelism"},
    {"--moe-dp-size,--moe-data-parallel-size", Kind::unmodelled, "1", "the MoE layers' data parallelism"},
    {"--pp-max-micro-batch-size", Kind::ignore}, {"--pp-async-batch-depth", Kind::ignore},
    {"--device", Kind::ignore}, {"--stream-interval", Kind::ignore}, {"--incremental-streaming-output", Kind::ignore_bool},
    {"--random-seed", Kind::ignore}, {"--constrained-json-whitespace-pattern", Kind::ignore},
    {"--constrained-json-disable-any-whitespace", Kind::ignore_bool}, {"--watchdog-timeout", Kind::ignore},
    {"--soft-watchdog-timeout", Kind::ignore}, {"--dist-timeout", Kind::ignore},
    {"--model-checksum", Kind::ignore_optional}, {"--base-gpu-id", Kind::ignore}, {"--gpu-id-step", Kind::ignore},
    {"--sleep-on-idle", Kind::ignore_bool}, {"--custom-sigquit-handler", Kind::ignore},
    // Logging and metrics
    {"--log-level", Kind::ignore}, {"--log-level-http", Kind::ignore}, {"--log-requests", Kind::ignore_bool},
    {"--log-requests-level", Kind::ignore}, {"--log-requests-format", Kind::ignore},
    {"--log-requests-target", Kind::ignore_multi}, {"--uvicorn-access-log-exclude-prefixes", Kind::ignore_multi},
    {"--crash-dump-folder", Kind::ignore}, {"--show-time-cost", Kind::ignore_bool},
    {"--enable-metrics", Kind::ignore_bool}, {"--enable-mfu-metrics", Kind::ignore_bool},
    {"--enable-metrics-for-all-schedulers", Kind::ignore_bool},
    {"--tokenizer-metrics-custom-labels-header", Kind::ignore},
    {"--tokenizer-metrics-allowed-custom-labels", Kind::ignore_multi},
    {"--bucket-time-to-first-token", Kind::ignore_multi}, {"--bucket-inter-token-latency", Kind::ignore_multi},
    {"--bucket-e2e-request-latency", Kind::ignore_multi}, {"--collect-tokens-histogram", Kind::ignore_bool},
    {"--prompt-tokens-buckets", Kind::ignore_multi}, {"--generation-tokens-buckets", Kind::ignore_multi},
    {"--gc-warning-threshold-secs", Kind::ignore}, {"--decode-log-interval", Kind::ignore},
    {"--enable-request-time-stats-logging", Kind::ignore_bool}, {"--kv-events-config", Kind::ignore},
    {"--enable-trace", Kind::ignore_bool}, {"--otlp-traces-endpoint", Kind::ignore},
    {"--export-metrics-to-file", Kind::ignore_bool}, {"--export-metrics-to-file-dir", Kind::ignore},
    // API
    {"--api-key", Kind::ignore}, {"--admin-api-key", Kind::ignore}, {"--served-model-name", Kind::ignore},
    {"--weight-version", Kind::ignore}, {"--chat-template", Kind::ignore}, {"--hf-chat-template-name", Kind::ignore},
    {"--completion-template", Kind::ignore}, {"--file-storage-path", Kind::ignore},
    {"--enable-cache-report", Kind::ignore_bool}, {"--reasoning-parser", Kind::ignore},
    {"--tool-call-parser", Kind::ignore}, {"--tool-server", Kind::ignore}, {"--sampling-defaults", Kind::ignore},
    // Data parallelism and multi-node serving
    {"--dp-size,--data-parallel-size,--dp", Kind::dp, {}, {}, Val::integer},
    {"--load-balance-method", Kind::ignore},
    {"--dist-init-addr,--nccl-init-addr", Kind::ignore}, {"--nnodes", Kind::ignore}, {"--node-rank", Kind::ignore},
    // LoRA
    {"--enable-lora", Kind::unmodelled_bool, {}, "LoRA adapters' weights and memory pool"},
    {"--lora-paths", Kind::unmodelled_multi, {}, "LoRA adapters' weights and memory pool"},
    {"--enable-lora-overlap-loading", Kind::ignore_bool}, {"--max-lora-rank", Kind::ignore},
    {"--lora-target-modules", Kind::ignore_multi}, {"--max-loras-per-batch", Kind::ignore},
    {"--max-loaded-loras", Kind::ignore}, {"--lora-eviction-policy", Kind::ignore}, {"--lora-backend", Kind::ignore},
    {"--max-lora-chunk-size", Kind::ignore}, {"--lora-drain-wait-threshold", Kind::ignore},
    // Kernel backends
    {"--dsv4-attn-backend", Kind::unmodelled, {}, "the KV bytes per token (the trtllm backend's cache layout)"},
    {"--attention-backend", Kind::ignore}, {"--prefill-attention-backend", Kind::ignore},
    {"--decode-attention-backend", Kind::ignore}, {"--sampling-backend", Kind::ignore},
    {"--grammar-backend", Kind::ignore}, {"--mm-attention-backend", Kind::ignore},
    {"--dsa-prefill-backend,--nsa-prefill-backend", Kind::ignore},
    {"--dsa-decode-backend,--nsa-decode-backend", Kind::ignore}, {"--fp8-gemm-backend", Kind::ignore},
    {"--fp4-gemm-backend", Kind::ignore}, {"--disable-flashinfer-autotune", Kind::ignore_bool},
    {"--moe-runner-backend", Kind::ignore},
    // Speculative decoding
    {"--speculative-algorithm", Kind::map, "--speculative-algorithm"},
    {"--speculative-num-steps", Kind::map, "--speculative-num-steps", {}, Val::integer},
    {"--speculative-eagle-topk", Kind::map, "--speculative-eagle-topk", {}, Val::integer},
    {"--speculative-num-draft-tokens", Kind::map, "--speculative-num-draft-tokens", {}, Val::integer},
    {"--speculative-dspark-block-size", Kind::map, "--speculative-dspark-block-size", {}, Val::integer},
    {"--speculative-draft-model-path,--speculative-draft-model", Kind::unmodelled, {},
     "the weights and caches of a separate draft model"},
    {"--speculative-draft-model-revision", Kind::ignore}, {"--speculative-draft-load-format", Kind::ignore},
    {"--speculative-accept-threshold-single", Kind::ignore}, {"--speculative-accept-threshold-acc", Kind::ignore},
    {"--speculative-token-map", Kind::ignore}, {"--speculative-attention-mode", Kind::ignore},
    {"--speculative-draft-attention-backend", Kind::ignore}, {"--speculative-moe-runner-backend", Kind::ignore},
    {"--speculative-moe-a2a-backend", Kind::ignore}, {"--speculative-draft-model-quantization", Kind::ignore},
    {"--speculative-ngram-min-bfs-breadth", Kind::ignore}, {"--speculative-ngram-max-bfs-breadth", Kind::ignore},
    {"--speculative-ngram-match-type", Kind::ignore}, {"--speculative-ngram-max-trie-depth", Kind::ignore},
    {"--speculative-ngram-capacity", Kind::ignore}, {"--enable-multi-layer-eagle", Kind::ignore_bool},
    // MoE
    {"--ep-size,--expert-parallel-size,--ep", Kind::ep, {}, {}, Val::integer},
    {"--moe-a2a-backend", Kind::map, "--moe-a2a-backend"},
    {"--ep-num-redundant-experts", Kind::unmodelled, "0", "the experts' weights (redundant experts)"},
    {"--moe-dense-tp-size", Kind::unmodelled, {}, "the dense MLP layers' weights per GPU"},
    {"--flashinfer-mxfp4-moe-precision", Kind::ignore}, {"--enable-flashinfer-allreduce-fusion", Kind::ignore_bool},
    {"--enable-aiter-allreduce-fusion", Kind::ignore_bool}, {"--deepep-mode", Kind::ignore},
    {"--deepep-dispatcher-output-dtype", Kind::ignore}, {"--enable-fused-grouped-gemm-combine", Kind::ignore_bool},
    {"--ep-dispatch-algorithm", Kind::ignore}, {"--init-expert-location", Kind::ignore},
    {"--enable-eplb", Kind::ignore_bool}, {"--eplb-algorithm", Kind::ignore},
    {"--eplb-rebalance-num-iterations", Kind::ignore}, {"--eplb-rebalance-layers-per-chunk", Kind::ignore},
    {"--eplb-min-rebalancing-utilization-threshold", Kind::ignore},
    {"--expert-distribution-recorder-mode", Kind::ignore}, {"--expert-distribution-recorder-buffer-size", Kind::ignore},
    {"--enable-expert-distribution-metrics", Kind::ignore_bool}, {"--deepep-config", Kind::ignore},
    {"--elastic-ep-backend", Kind::ignore}, {"--enable-elastic-expert-backup", Kind::ignore_bool},
    {"--mooncake-ib-device", Kind::ignore}, {"--enable-deepep-waterfill", Kind::ignore_bool},
    {"--elastic-ep-rejoin", Kind::ignore_bool},
    // Mamba cache (no Mamba layers in the models mla-plan plans)
    {"--max-mamba-cache-size", Kind::ignore}, {"--mamba-ssm-dtype", Kind::ignore},
    {"--mamba-full-memory-ratio", Kind::ignore}, {"--mamba-scheduler-strategy", Kind::ignore},
    {"--mamba-track-interval", Kind::ignore},
    // Hierarchical cache, LMCache, HiSparse
    {"--enable-hierarchical-cache", Kind::unmodelled_bool, {}, "the KV pools (a host tier: hierarchical cache)"},
    {"--hicache-ratio", Kind::unmodelled, {}, "the host KV tier of the hierarchical cache"},
    {"--hicache-size", Kind::unmodelled, "0", "the host KV tier of the hierarchical cache"},
    {"--hicache-write-policy", Kind::ignore}, {"--hicache-io-backend", Kind::ignore},
    {"--hicache-mem-layout", Kind::ignore}, {"--hicache-storage-backend", Kind::ignore},
    {"--hicache-storage-prefetch-policy", Kind::ignore}, {"--hicache-storage-backend-extra-config", Kind::ignore},
    {"--hierarchical-sparse-attention-extra-config", Kind::ignore},
    {"--enable-lmcache", Kind::unmodelled_bool, {}, "the KV pools (a host tier: LMCache)"},
    {"--enable-hisparse", Kind::map_bool, "--enable-hisparse"},
    {"--enable-encoder-swa-bounded-replay", Kind::unmodelled_bool, {}, "the SWA pool (the encoder's bounded replay)"},
    // KTransformers, diffusion LLMs
    {"--kt-num-gpu-experts", Kind::unmodelled, {}, "the experts on the GPU (KTransformers: the rest on the CPU)"},
    {"--kt-weight-path", Kind::ignore}, {"--kt-method", Kind::ignore}, {"--kt-cpuinfer", Kind::ignore},
    {"--kt-threadpool-count", Kind::ignore}, {"--kt-max-deferred-experts-per-token", Kind::ignore},
    {"--dllm-algorithm", Kind::ignore}, {"--dllm-algorithm-config", Kind::ignore},
    // Offloading
    {"--cpu-offload-gb", Kind::unmodelled, "0", "the weights on the GPU (part of them offloaded to the host)"},
    {"--offload-group-size", Kind::unmodelled, "-1", "the weights on the GPU (layers offloaded to the host)"},
    {"--offload-num-in-group", Kind::ignore}, {"--offload-prefetch-step", Kind::ignore}, {"--offload-mode", Kind::ignore},
    {"--multi-item-scoring-delimiter", Kind::ignore},
    // Optimization and debug options
    {"--disable-radix-cache", Kind::map_bool, "--disable-radix-cache"},
    {"--disable-cuda-graph", Kind::map_bool, "--disable-cuda-graph"},
    {"--disable-overlap-schedule", Kind::map_bool, "--disable-overlap-schedule"},
    {"--enable-two-batch-overlap", Kind::map_bool, "--enable-two-batch-overlap"},
    {"--enable-dp-attention", Kind::dp_attention},
    {"--cuda-graph-max-bs", Kind::map, "--cuda-graph-max-bs", {}, Val::integer},
    {"--cuda-graph-bs", Kind::unmodelled_multi, {}, "the CUDA graphs captured (SGLang's list up to --cuda-graph-max-bs)"},
    {"--enable-dsa-prefill-context-parallel,--enable-nsa-prefill-context-parallel", Kind::unmodelled_bool, {},
     "prefill context parallelism"},
    {"--dsa-prefill-cp-mode,--nsa-prefill-cp-mode", Kind::ignore},
    {"--disable-cuda-graph-padding", Kind::ignore_bool}, {"--enable-profile-cuda-graph", Kind::ignore_bool},
    {"--enable-cudagraph-gc", Kind::ignore_bool}, {"--enable-layerwise-nvtx-marker", Kind::ignore_bool},
    {"--enable-nccl-nvls", Kind::ignore_bool}, {"--enable-symm-mem", Kind::ignore_bool},
    {"--disable-flashinfer-cutlass-moe-fp4-allgather", Kind::ignore_bool},
    {"--enable-tokenizer-batch-encode", Kind::ignore_bool}, {"--disable-tokenizer-batch-decode", Kind::ignore_bool},
    {"--disable-outlines-disk-cache", Kind::ignore_bool}, {"--disable-custom-all-reduce", Kind::ignore_bool},
    {"--enable-mscclpp", Kind::ignore_bool}, {"--enable-torch-symm-mem", Kind::ignore_bool},
    {"--enable-mixed-chunk", Kind::ignore_bool}, {"--enable-dp-lm-head", Kind::ignore_bool},
    {"--enable-single-batch-overlap", Kind::ignore_bool}, {"--tbo-token-distribution-threshold", Kind::ignore},
    {"--enable-torch-compile", Kind::ignore_bool}, {"--enable-torch-compile-debug-mode", Kind::ignore_bool},
    {"--torch-compile-max-bs", Kind::ignore},
    {"--disable-piecewise-cuda-graph", Kind::map_bool, "--disable-piecewise-cuda-graph"},
    {"--enforce-piecewise-cuda-graph", Kind::ignore_bool}, {"--piecewise-cuda-graph-tokens", Kind::ignore},
    {"--piecewise-cuda-graph-compiler", Kind::ignore}, {"--piecewise-cuda-graph-max-tokens", Kind::ignore},
    {"--enable-nan-detection", Kind::ignore_bool}, {"--enable-p2p-check", Kind::ignore_bool},
    {"--triton-attention-reduce-in-fp32", Kind::ignore_bool}, {"--triton-attention-num-kv-splits", Kind::ignore},
    {"--triton-attention-split-tile-size", Kind::ignore}, {"--num-continuous-decode-steps", Kind::ignore},
    {"--delete-ckpt-after-loading", Kind::ignore_bool}, {"--enable-memory-saver", Kind::ignore_bool},
    {"--enable-weights-cpu-backup", Kind::ignore_bool}, {"--enable-draft-weights-cpu-backup", Kind::ignore_bool},
    {"--allow-auto-truncate", Kind::ignore_bool}, {"--enable-custom-logit-processor", Kind::ignore_bool},
    {"--flashinfer-mla-disable-ragged", Kind::ignore_bool}, {"--disable-shared-experts-fusion", Kind::ignore_bool},
    {"--disable-chunked-prefix-cache", Kind::ignore_bool}, {"--disable-fast-image-processor", Kind::ignore_bool},
    {"--keep-mm-feature-on-device", Kind::ignore_bool}, {"--enable-return-hidden-states", Kind::ignore_bool},
    {"--enable-return-routed-experts", Kind::ignore_bool}, {"--scheduler-recv-interval", Kind::ignore},
    {"--numa-node", Kind::ignore_multi}, {"--enable-deterministic-inference", Kind::ignore_bool},
    {"--rl-on-policy-target", Kind::ignore}, {"--enable-attn-tp-input-scattered", Kind::ignore_bool},
    {"--enable-fused-qk-norm-rope", Kind::ignore_bool}, {"--enable-precise-embedding-interpolation", Kind::ignore_bool},
    {"--enable-dynamic-batch-tokenizer", Kind::ignore_bool}, {"--dynamic-batch-tokenizer-batch-size", Kind::ignore},
    {"--dynamic-batch-tokenizer-batch-timeout", Kind::ignore},
    {"--debug-tensor-dump-output-folder", Kind::ignore}, {"--debug-tensor-dump-layers", Kind::ignore},
    {"--debug-tensor-dump-input-file", Kind::ignore}, {"--debug-tensor-dump-inject", Kind::ignore},
    // PD disaggregation, encoder disaggregation
    {"--disaggregation-mode", Kind::unmodelled, "null", "the pools of a prefill-only or decode-only server"},
    {"--disaggregation-transfer-backend", Kind::ignore}, {"--disaggregation-bootstrap-port", Kind::ignore},
    {"--disaggregation-ib-device", Kind::ignore}, {"--disaggregation-decode-enable-offload-kvcache", Kind::ignore_bool},
    {"--num-reserved-decode-tokens", Kind::ignore}, {"--disaggregation-decode-polling-interval", Kind::ignore},
    {"--encoder-transfer-backend", Kind::ignore}, {"--encoder-urls", Kind::ignore},
    // Weight loading
    {"--custom-weight-loader", Kind::ignore_multi}, {"--weight-loader-disable-mmap", Kind::ignore_bool},
    {"--weight-loader-prefetch-checkpoints", Kind::ignore_bool}, {"--weight-loader-prefetch-num-threads", Kind::ignore},
    {"--remote-instance-weight-loader-seed-instance-ip", Kind::ignore},
    {"--remote-instance-weight-loader-seed-instance-service-port", Kind::ignore},
    {"--remote-instance-weight-loader-send-weights-group-ports", Kind::ignore},
    {"--remote-instance-weight-loader-backend", Kind::ignore},
    {"--remote-instance-weight-loader-start-seed-via-transfer-engine", Kind::ignore_bool},
    // PD multiplexing, multimodal, decryption, hooks
    {"--enable-pdmux", Kind::ignore_bool}, {"--pdmux-config-path", Kind::ignore}, {"--sm-group-num", Kind::ignore},
    {"--mm-max-concurrent-calls", Kind::ignore}, {"--mm-per-request-timeout", Kind::ignore},
    {"--enable-broadcast-mm-inputs-process", Kind::ignore_bool}, {"--mm-process-config", Kind::ignore},
    {"--mm-enable-dp-encoder", Kind::ignore_bool}, {"--limit-mm-data-per-request", Kind::ignore},
    {"--enable-mm-global-cache", Kind::ignore_bool}, {"--decrypted-config-file", Kind::ignore},
    {"--decrypted-draft-config-file", Kind::ignore}, {"--enable-prefix-mm-cache", Kind::ignore_bool},
    {"--forward-hooks", Kind::ignore}, {"--msprobe-dump-config", Kind::ignore},
    // The configuration file
    {"--config", Kind::refused, {}, "SGLang reads more flags from the YAML file; mla-plan does not read it: give its flags on the command line"},
};
// clang-format on

/// SGLang's --kv-cache-dtype choices.
const std::vector<std::string> kKvDtypes = {"auto", "fp8_e4m3", "fp8_e5m2", "bf16", "bfloat16", "fp4_e2m1"};

std::vector<std::string> split_names(std::string_view names) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= names.size()) {
    const auto comma = names.find(',', start);
    out.emplace_back(names.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

bool is_switch(Kind k) {
  return k == Kind::dp_attention || k == Kind::map_bool || k == Kind::ignore_bool || k == Kind::unmodelled_bool;
}

/// The flag of that exact name.
const Flag* find_flag(const std::string& name) {
  for (const auto& f : kFlags) {
    for (const auto& n : split_names(f.names)) {
      if (n == name) return &f;
    }
  }
  return nullptr;
}

/// argparse's allow_abbrev: the long names that `name` begins.
std::vector<std::string> prefix_matches(const std::string& name) {
  std::vector<std::string> out;
  for (const auto& f : kFlags) {
    for (const auto& n : split_names(f.names)) {
      if (n.rfind(name, 0) == 0) out.push_back(n);
    }
  }
  return out;
}

/// argparse's _negative_number_matcher ('^-\d+$|^-\d*\.\d+$'): a word that is a value, not a flag.
bool is_negative_number(const std::string& w) {
  if (w.size() < 2 || w[0] != '-') return false;
  const auto dot = w.find('.');
  const auto digits = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
  };
  if (dot == std::string::npos) return digits(std::string_view(w).substr(1));
  const std::string_view after = std::string_view(w).substr(dot + 1);
  return digits(std::string_view(w).substr(1, dot - 1)) && !after.empty() && digits(after);
}

/// Whether argparse takes `w` as the value of an option rather than as the next option.
bool is_value_word(const std::string& w) { return w.empty() || w[0] != '-' || w == "-" || is_negative_number(w); }

class Translator {
 public:
  Translator(const OwnFlags& own, SglangForm form) : own_(own), form_(form) {
    in_.prog = form == SglangForm::serve ? "sglang serve" : "python -m sglang.launch_server";
  }

  SglangServeInput run(const std::vector<std::string>& args) {
    in_.argv = args;
    for (std::size_t i = 0; i < args.size(); ++i) {
      std::string word = args[i];
      if (is_value_word(word)) {
        // `sglang serve MODEL ...`: the first word only (serve.py's _normalize_positional_model_path).
        if (i == 0 && form_ == SglangForm::serve && !word.empty()) {
          model_ = word;
          continue;
        }
        throw_usage(in_.prog + ": unrecognized argument " + mlaplan::quoted(word) +
                    (form_ == SglangForm::serve
                         ? " (MODEL goes first, `sglang serve MODEL ...`, or as --model-path MODEL)"
                         : " (MODEL is --model-path MODEL)"));
      }
      if (word == "--") {
        throw_usage(in_.prog + ": '--' ends SGLang's flags, and SGLang takes no positional argument after it");
      }
      std::optional<std::string> inline_value;
      if (const auto eq = word.find('='); eq != std::string::npos && word.rfind("--", 0) == 0) {
        inline_value = word.substr(eq + 1);
        word = word.substr(0, eq);
      }
      const auto value = [&](const std::string& name) -> std::string {
        if (inline_value) return *inline_value;
        if (i + 1 >= args.size() || !is_value_word(args[i + 1])) {
          throw_usage(in_.prog + ": " + name + " needs a value (argparse: expected one argument)");
        }
        return args[++i];
      };
      // `sglang serve --model-type llm|auto` (serve.py reads it before argparse).
      if (form_ == SglangForm::serve && word == "--model-type") {
        const std::string v = value(word);
        if (v != "auto" && v != "llm") {
          throw_usage(in_.prog + ": --model-type " + mlaplan::quoted(v) +
                      ": mla-plan plans language models (--model-type llm or auto)");
        }
        ignored(word);
        continue;
      }
      const Flag* f = find_flag(word);
      if (f == nullptr && word.rfind("--", 0) == 0 && !own_.is_flag(word)) {
        const auto m = prefix_matches(word);
        if (m.size() == 1) {
          word = m.front();
          f = find_flag(word);
        } else if (m.size() > 1) {
          std::string list;
          for (std::size_t k = 0; k < m.size() && k < 6; ++k) list += (k ? ", " : "") + m[k];
          if (m.size() > 6) list += ", ...";
          throw_usage(in_.prog + ": " + word + " is ambiguous (SGLang's argparse takes a unique prefix): could match " +
                      list);
        }
      }
      if (f == nullptr) {
        if (own_.is_flag(word)) {
          own_args_.push_back(word);
          if (own_.takes_value(word)) own_args_.push_back(value(word));
          else if (inline_value) own_args_.back() += "=" + *inline_value;
          continue;
        }
        unknown(word);
      }
      const std::string canonical = split_names(f->names).front();
      if (is_switch(f->kind) && inline_value) {
        throw_usage(in_.prog + ": " + word + " takes no value (SGLang's " + canonical + " is a switch; got " +
                    mlaplan::quoted(*inline_value) + ")");
      }
      switch (f->kind) {
        case Kind::model: model_ = value(word); break;
        case Kind::tp: tp_ = positive(word, value(word)); break;
        case Kind::dp: dp_ = positive(word, value(word)); break;
        case Kind::ep: ep_ = positive(word, value(word)); break;
        case Kind::dp_attention: dp_attention_ = true; break;
        case Kind::kv_dtype: {
          const std::string v = value(word);
          if (std::find(kKvDtypes.begin(), kKvDtypes.end(), v) == kKvDtypes.end()) {
            throw_usage(in_.prog + ": " + word + " " + mlaplan::quoted(v) +
                        " is not one of SGLang's choices: auto, fp8_e4m3, fp8_e5m2, bf16, bfloat16, fp4_e2m1" +
                        did_you_mean_suffix(v, kKvDtypes));
          }
          set("--sglang-kv-cache-dtype", v);
          break;
        }
        case Kind::map: {
          std::string v = checked(word, value(word), f->val);
          if (canonical == "--context-length" && std::stoll(v) < 1) {
            throw_usage(in_.prog + ": " + word + " " + v + " is not a context length (at least 1)");
          }
          if (canonical == "--chunked-prefill-size" && std::stoll(v) < 0) v = "-1";  // any negative: off
          if (canonical == "--json-model-override-args" && (v.empty() || v == "{}")) break;
          set(std::string(f->target), v);
          break;
        }
        case Kind::map_bool: switches_[std::string(f->target)] = true; break;
        case Kind::ignore:
          (void)value(word);
          ignored(word);
          break;
        case Kind::ignore_bool: ignored(word); break;
        case Kind::ignore_optional:
          if (!inline_value && i + 1 < args.size() && is_value_word(args[i + 1])) ++i;
          ignored(word);
          break;
        case Kind::ignore_multi:
          (void)values(word, inline_value, args, i);
          ignored(word);
          break;
        case Kind::unmodelled: {
          const std::string v = value(word);
          if (canonical == "--dsv4-attn-backend" && v != "trtllm") {  // the dsv4 backend's layout is modelled
            ignored(word);
            break;
          }
          if (!f->target.empty() && v == f->target) {  // the flag's default: changes nothing
            ignored(word);
            break;
          }
          not_modelled(word + " " + v, std::string(f->why));
          break;
        }
        case Kind::unmodelled_bool: not_modelled(word, std::string(f->why)); break;
        case Kind::unmodelled_multi:
          not_modelled(word + " " + values(word, inline_value, args, i), std::string(f->why));
          break;
        case Kind::refused: throw_usage(in_.prog + ": " + word + ": " + std::string(f->why));
      }
    }
    if (!model_) {
      throw_usage(in_.prog + ": no MODEL (--model-path MODEL" +
                  std::string(form_ == SglangForm::serve ? ", or MODEL as the first word" : "") +
                  ": a model directory, a config.json or a Hugging Face repo id ORG/NAME)");
    }
    in_.plan_args.push_back(*model_);
    if (!given("--engine")) in_.plan_args.insert(in_.plan_args.end(), {"--engine", "sglang"});
    layout();
    for (const auto& [flag, v] : mapped_) in_.plan_args.insert(in_.plan_args.end(), {flag, v});
    for (const auto& [flag, on] : switches_) {
      if (on) in_.plan_args.push_back(flag);
    }
    in_.plan_args.insert(in_.plan_args.end(), own_args_.begin(), own_args_.end());
    from_environment();
    return in_;
  }

 private:
  /// --tp-size W, --dp-size N, --ep-size E, --enable-dp-attention as mla-plan's layout flags.
  void layout() {
    const std::int64_t w = tp_.value_or(1);
    const std::int64_t n = dp_.value_or(1);
    const std::int64_t e = ep_.value_or(1);
    if (dp_attention_) {
      if (w % n != 0) {
        throw_usage(in_.prog + ": --tp-size " + std::to_string(w) + " is not a multiple of --dp-size " +
                    std::to_string(n) + " (with --enable-dp-attention the " + std::to_string(n) +
                    " attention workers split the " + std::to_string(w) + " ranks of --tp-size)");
      }
      in_.plan_args.insert(in_.plan_args.end(), {"--tensor-parallel-size", std::to_string(w / n),
                                                 "--data-parallel-size", std::to_string(n), "--enable-dp-attention"});
    } else {
      // One layout, as SGLang starts it (TP 1 unless given): never the search of a node.
      in_.plan_args.insert(in_.plan_args.end(), {"--tensor-parallel-size", std::to_string(w)});
      if (n != 1) in_.plan_args.insert(in_.plan_args.end(), {"--data-parallel-size", std::to_string(n)});
    }
    if (e != 1) {
      if (e != w) {
        throw_usage(in_.prog + ": --ep-size " + std::to_string(e) +
                    " is not modelled: --ep-size must be 1 or --tp-size (" + std::to_string(w) + ")");
      }
      in_.plan_args.push_back("--enable-expert-parallel");
    }
  }

  /// The value as argparse's `type` reads it (int(), float()), as mla-plan's flag takes it.
  std::string checked(const std::string& word, const std::string& v, Val val) const {
    if (val == Val::integer) return std::to_string(integer(word, v));
    if (val == Val::real) {
      char* end = nullptr;
      const char* s = v.c_str();
      (void)std::strtod(s, &end);
      if (v.empty() || end != s + v.size() || std::isspace(static_cast<unsigned char>(v[0])) != 0) {
        throw_usage(in_.prog + ": " + word + ": invalid float value: " + mlaplan::quoted(v));
      }
    }
    return v;
  }

  std::int64_t integer(const std::string& word, const std::string& v) const {
    std::string_view s = v;
    if (!s.empty() && s.front() == '+') s.remove_prefix(1);
    std::int64_t n = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size()) {
      throw_usage(in_.prog + ": " + word + ": invalid int value: " + mlaplan::quoted(v));
    }
    return n;
  }

  std::int64_t positive(const std::string& word, const std::string& v) const {
    const std::int64_t n = integer(word, v);
    if (n < 1 || n > (std::int64_t{1} << 20)) {
      throw_usage(in_.prog + ": " + word + " " + v + " is not a parallel size (1 to 1048576)");
    }
    return n;
  }

  /// nargs "+": the values up to the next flag, at least one.
  std::string values(const std::string& word, const std::optional<std::string>& inline_value,
                     const std::vector<std::string>& args, std::size_t& i) const {
    if (inline_value) return *inline_value;
    if (i + 1 >= args.size() || !is_value_word(args[i + 1])) {
      throw_usage(in_.prog + ": " + word + " needs a value (argparse: expected at least one argument)");
    }
    std::string out;
    while (i + 1 < args.size() && is_value_word(args[i + 1])) out += (out.empty() ? "" : " ") + args[++i];
    return out;
  }

  void set(const std::string& flag, const std::string& v) { mapped_[flag] = v; }

  bool given(const std::string& flag) const {
    return std::find(own_args_.begin(), own_args_.end(), flag) != own_args_.end();
  }

  /// What SGLang reads from the environment, where the command line does not say it.
  void from_environment() {
    if (!own_.getenv) return;
    if (const char* v = own_.getenv("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE");
        v != nullptr && *v != '\0' && !given("--engram")) {
      std::string t = v;
      for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (t != "1" && t != "true" && t != "0" && t != "false") {
        throw_usage("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE: " + mlaplan::quoted(v) +
                    " is not a boolean; allowed 1, true, 0, false");
      }
      const bool offload = t == "1" || t == "true";
      in_.plan_args.insert(in_.plan_args.end(), {"--engram", offload ? "offload" : "gpu"});
      in_.from_environment.push_back(std::string("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE=") + v + " (--engram " +
                                     (offload ? "offload" : "gpu") + ")");
    }
    if (const char* v = own_.getenv("SGLANG_SWA_EVICTION_INTERVAL");
        v != nullptr && *v != '\0' && !given("--swa-eviction-interval")) {
      in_.plan_args.insert(in_.plan_args.end(), {"--swa-eviction-interval", v});
      in_.from_environment.push_back(std::string("SGLANG_SWA_EVICTION_INTERVAL=") + v + " (--swa-eviction-interval " +
                                     v + ")");
    }
  }

  void ignored(const std::string& word) {
    if (std::find(in_.ignored.begin(), in_.ignored.end(), word) == in_.ignored.end()) in_.ignored.push_back(word);
  }
  void not_modelled(const std::string& what, const std::string& why) {
    in_.not_modelled.push_back(what + " (changes " + why + ")");
  }

  [[noreturn]] void unknown(const std::string& word) const {
    std::vector<std::string> names = sglang_flag_names();
    // argparse takes no underscores: --tp_size is not --tp-size.
    if (word.rfind("--", 0) == 0 && word.find('_') != std::string::npos) {
      std::string dashed = word;
      std::replace(dashed.begin() + 2, dashed.end(), '_', '-');
      if (find_flag(dashed) != nullptr || own_.is_flag(dashed)) {
        throw_usage(in_.prog + ": unknown flag " + word + " (SGLang's flags are spelled with dashes, not " +
                    "underscores); did you mean '" + dashed + "'?");
      }
    }
    names.insert(names.end(), own_.names.begin(), own_.names.end());
    throw_usage(in_.prog + ": unknown flag " + word + " (neither SGLang's nor mla-plan's)" +
                did_you_mean_suffix(word, names));
  }

  const OwnFlags& own_;
  SglangForm form_;
  SglangServeInput in_;
  std::optional<std::string> model_;
  std::optional<std::int64_t> tp_, dp_, ep_;
  bool dp_attention_ = false;
  std::map<std::string, std::string> mapped_;
  std::map<std::string, bool> switches_;
  std::vector<std::string> own_args_;
};

}  // namespace sglang_serve_impl

std::vector<std::string> sglang_flag_names() {
  std::vector<std::string> out;
  for (const auto& f : sglang_serve_impl::kFlags) {
    for (const auto& n : sglang_serve_impl::split_names(f.names)) out.push_back(n);
  }
  return out;
}

SglangServeInput translate_sglang_serve(const std::vector<std::string>& args, const OwnFlags& own, SglangForm form) {
  return sglang_serve_impl::Translator(own, form).run(args);
}

}  // namespace mlaplan::cli

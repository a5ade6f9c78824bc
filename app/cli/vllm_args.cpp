// `mla-plan vllm serve ...` (app/cli/vllm_args.hpp). vLLM's flags and their parsing are read from
// vllm/engine/arg_utils.py (EngineArgs.add_cli_args), vllm/entrypoints/openai/cli_args.py
// (FrontendArgs, make_arg_parser) and vllm/utils/argparse_utils.py (FlexibleArgumentParser,
// human_readable_int); docs/launch.md lists what each flag becomes.
#include "cli/vllm_args.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "flags/flag_values.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/base/suggest.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan::cli {

namespace {

using json = nlohmann::json;

enum class Kind {
  map,           ///< a value, given to mla-plan's `target` flag as it is
  map_bool,      ///< --x: `target` (if any); --no-x: `no_target` (if any)
  ignore,        ///< a value that changes nothing the plan computes
  ignore_bool,   ///< a switch (and its --no- form) that changes nothing the plan computes
  ignore_multi,  ///< one or more values (nargs "+") that change nothing the plan computes
  unmodelled,    ///< a value that changes memory in a way mla-plan does not model (`target`: its default)
  unmodelled_bool,
  unmodelled_multi,
  speculative,   ///< --speculative-config JSON
  compilation,   ///< --compilation-config JSON
  attention,     ///< --attention-config JSON
  kv_transfer,   ///< --kv-transfer-config JSON
  hf_overrides,  ///< --hf-overrides JSON
  refused,       ///< a flag the modelled vLLM release refuses, or one mla-plan cannot follow
};

struct Flag {
  std::string_view names;  ///< "--tensor-parallel-size,-tp": the long name first
  Kind kind;
  std::string_view target = {};
  std::string_view no_target = {};
  std::string_view why = {};  ///< refused: the message; unmodelled: what it changes
};

// clang-format off
const Flag kFlags[] = {
    // Parallel layout (ParallelConfig)
    {"--tensor-parallel-size,-tp", Kind::map, "--tensor-parallel-size"},
    {"--pipeline-parallel-size,-pp", Kind::map, "--pipeline-parallel-size"},
    {"--data-parallel-size,-dp", Kind::map, "--data-parallel-size"},
    {"--decode-context-parallel-size,-dcp", Kind::map, "--decode-context-parallel-size"},
    {"--cp-kv-cache-interleave-size", Kind::map, "--cp-kv-cache-interleave-size"},
    {"--dcp-kv-cache-interleave-size", Kind::map, "--cp-kv-cache-interleave-size"},
    {"--enable-expert-parallel,-ep", Kind::map_bool, "--enable-expert-parallel"},
    {"--data-parallel-size-local,-dpl", Kind::ignore},
    {"--prefill-context-parallel-size,-pcp", Kind::unmodelled, "1", {}, "prefill context parallelism"},
    {"--data-parallel-rank,-dpn", Kind::ignore}, {"--data-parallel-start-rank,-dpr", Kind::ignore},
    {"--data-parallel-address,-dpa", Kind::ignore}, {"--data-parallel-rpc-port,-dpp", Kind::ignore},
    {"--data-parallel-backend,-dpb", Kind::ignore},
    {"--data-parallel-hybrid-lb,-dph", Kind::ignore_bool}, {"--data-parallel-external-lb,-dpe", Kind::ignore_bool},
    {"--nnodes,-n", Kind::ignore}, {"--node-rank,-r", Kind::ignore}, {"--master-addr", Kind::ignore},
    {"--master-port", Kind::ignore}, {"--distributed-executor-backend", Kind::ignore},
    {"--distributed-timeout-seconds", Kind::ignore}, {"--max-parallel-loading-workers", Kind::ignore},
    {"--worker-cls", Kind::ignore}, {"--worker-extension-cls", Kind::ignore}, {"--all2all-backend", Kind::ignore},
    {"--dcp-comm-backend", Kind::ignore}, {"--expert-placement-strategy", Kind::ignore},
    {"--enable-eplb", Kind::unmodelled_bool, {}, {}, "redundant experts of the expert-parallel load balancer"},
    {"--eplb-config", Kind::unmodelled, {}, {}, "redundant experts of the expert-parallel load balancer"},
    {"--disable-custom-all-reduce", Kind::ignore_bool}, {"--ray-workers-use-nsight", Kind::ignore_bool},
    {"--enable-dbo", Kind::ignore_bool}, {"--disable-nccl-for-dp-synchronization", Kind::ignore_bool},
    {"--enable-ep-weight-filter", Kind::ignore_bool}, {"--enable-elastic-ep", Kind::ignore_bool},
    {"--ubatch-size", Kind::ignore}, {"--dbo-decode-token-threshold", Kind::ignore},
    {"--dbo-prefill-token-threshold", Kind::ignore}, {"--numa-bind", Kind::ignore_bool},
    {"--numa-bind-nodes", Kind::ignore_multi}, {"--numa-bind-cpus", Kind::ignore_multi},
    // The model (ModelConfig, LoadConfig)
    {"--max-model-len", Kind::map, "--max-model-len"},
    {"--dtype", Kind::map, "--dtype"},
    {"--revision", Kind::map, "--revision"},
    {"--download-dir", Kind::map, "--download-dir"},
    {"--hf-overrides", Kind::hf_overrides},
    {"--enforce-eager", Kind::map_bool, "--enforce-eager"},
    {"--quantization,-q", Kind::unmodelled, {}, {}, "the weights' storage (a quantization other than the checkpoint's)"},
    {"--disable-sliding-window", Kind::unmodelled_bool, {}, {}, "the sliding-window caches (full-length instead)"},
    {"--trust-remote-code", Kind::ignore_bool}, {"--tokenizer", Kind::ignore}, {"--tokenizer-mode", Kind::ignore},
    {"--seed", Kind::ignore}, {"--hf-config-path", Kind::ignore}, {"--code-revision", Kind::ignore},
    {"--tokenizer-revision", Kind::ignore}, {"--config-format", Kind::ignore}, {"--generation-config", Kind::ignore},
    {"--model-impl", Kind::ignore}, {"--override-generation-config", Kind::ignore}, {"--max-logprobs", Kind::ignore},
    {"--logprobs-mode", Kind::ignore}, {"--served-model-name", Kind::ignore_multi}, {"--hf-token", Kind::ignore},
    {"--runner", Kind::ignore}, {"--convert", Kind::ignore}, {"--allowed-local-media-path", Kind::ignore},
    {"--allowed-media-domains", Kind::ignore_multi}, {"--override-attention-dtype", Kind::ignore},
    {"--io-processor-plugin", Kind::ignore}, {"--logits-processors", Kind::ignore_multi},
    {"--renderer-num-workers", Kind::ignore}, {"--pooler-config", Kind::ignore},
    {"--disable-cascade-attn", Kind::ignore_bool}, {"--skip-tokenizer-init", Kind::ignore_bool},
    {"--enable-prompt-embeds", Kind::ignore_bool}, {"--enable-sleep-mode", Kind::ignore_bool},
    {"--allow-deprecated-quantization", Kind::ignore_bool}, {"--enable-return-routed-experts", Kind::ignore_bool},
    {"--load-format", Kind::ignore}, {"--safetensors-load-strategy", Kind::ignore},
    {"--model-loader-extra-config", Kind::ignore}, {"--pt-load-map-location", Kind::ignore},
    {"--ignore-patterns", Kind::ignore_multi}, {"--use-tqdm-on-load", Kind::ignore_bool},
    {"--safetensors-prefetch-block-size", Kind::ignore},
    // Attention
    {"--attention-backend", Kind::map, "--attention-backend"},
    {"--attention-config,-ac", Kind::attention},
    {"--engram-config", Kind::attention},  // a JSON object as well: apply_json reads it by name
    {"--moe-backend", Kind::ignore}, {"--mamba-backend", Kind::ignore}, {"--ir-op-priority", Kind::ignore},
    {"--enable-flashinfer-autotune", Kind::ignore_bool}, {"--gdn-prefill-backend", Kind::ignore},
    // The KV cache (CacheConfig)
    {"--block-size", Kind::map, "--block-size"},
    {"--gpu-memory-utilization", Kind::map, "--gpu-memory-utilization"},
    {"--kv-cache-memory-bytes", Kind::map, "--kv-cache-memory-bytes"},
    {"--kv-cache-dtype", Kind::map, "--kv-cache-dtype"},
    {"--enable-prefix-caching", Kind::map_bool, {}, "--no-enable-prefix-caching"},
    {"--prefix-cache-retention-interval", Kind::map, "--prefix-cache-retention-interval"},
    {"--kv-offloading-size", Kind::map, "--kv-offloading-size"},
    {"--kv-offloading-backend", Kind::map, "--kv-offloading-backend"},
    {"--prefix-caching-hash-algo", Kind::ignore},
    {"--cpu-offload-gb", Kind::unmodelled, "0", {}, "the weights on the GPU (part of them offloaded to the host)"},
    {"--calculate-kv-scales", Kind::ignore_bool}, {"--kv-sharing-fast-prefill", Kind::ignore_bool},
    {"--num-gpu-blocks-override", Kind::unmodelled, {}, {}, "the number of KV-cache blocks"},
    {"--kv-cache-dtype-skip-layers", Kind::unmodelled_multi, {}, {}, "the KV-cache dtype of some layers"},
    {"--mamba-block-size", Kind::ignore}, {"--mamba-cache-dtype", Kind::ignore},
    {"--mamba-ssm-cache-dtype", Kind::ignore}, {"--mamba-cache-mode", Kind::ignore},
    {"--swap-space", Kind::refused, {}, {}, "vLLM removed --swap-space in 0.18.0; vLLM 0.30 refuses it as an unrecognized argument"},
    {"--offload-backend", Kind::unmodelled, {}, {}, "the weights on the GPU (offloaded)"},
    {"--cpu-offload-params", Kind::unmodelled_multi, {}, {}, "the weights on the GPU (offloaded)"},
    {"--offload-group-size", Kind::unmodelled, {}, {}, "the weights on the GPU (offloaded)"},
    {"--offload-num-in-group", Kind::unmodelled, {}, {}, "the weights on the GPU (offloaded)"},
    {"--offload-prefetch-step", Kind::unmodelled, {}, {}, "the weights on the GPU (offloaded)"},
    {"--offload-params", Kind::unmodelled_multi, {}, {}, "the weights on the GPU (offloaded)"},
    // Multimodal
    {"--language-model-only", Kind::map_bool, "--language-model-only"},
    {"--limit-mm-per-prompt", Kind::ignore}, {"--media-io-kwargs", Kind::ignore}, {"--mm-processor-kwargs", Kind::ignore},
    {"--mm-processor-cache-type", Kind::ignore}, {"--mm-shm-cache-max-object-size-mb", Kind::ignore},
    {"--mm-encoder-tp-mode", Kind::ignore}, {"--mm-encoder-attn-backend", Kind::ignore},
    {"--video-pruning-rate", Kind::ignore}, {"--mm-encoder-attn-dtype", Kind::ignore},
    {"--mm-encoder-fp8-scale-path", Kind::ignore}, {"--mm-encoder-fp8-scale-save-path", Kind::ignore},
    {"--mm-encoder-fp8-scale-save-margin", Kind::ignore}, {"--mm-processor-cache-gb", Kind::ignore},
    {"--enable-mm-embeds", Kind::ignore_bool}, {"--mm-encoder-only", Kind::ignore_bool},
    {"--interleave-mm-strings", Kind::ignore_bool}, {"--skip-mm-profiling", Kind::ignore_bool},
    {"--mm-tensor-ipc", Kind::ignore_bool},
    // LoRA
    {"--enable-lora", Kind::unmodelled_bool, {}, {}, "LoRA adapters' weights and workspaces"},
    {"--max-loras", Kind::ignore}, {"--max-lora-rank", Kind::ignore}, {"--lora-dtype", Kind::ignore},
    {"--max-cpu-loras", Kind::ignore}, {"--default-mm-loras", Kind::ignore}, {"--lora-target-modules", Kind::ignore_multi},
    {"--fully-sharded-loras", Kind::ignore_bool}, {"--enable-tower-connector-lora", Kind::ignore_bool},
    {"--specialize-active-lora", Kind::ignore_bool},
    // Observability
    {"--show-hidden-metrics-for-version", Kind::ignore}, {"--otlp-traces-endpoint", Kind::ignore},
    {"--collect-detailed-traces", Kind::ignore}, {"--kv-cache-metrics-sample", Kind::ignore},
    {"--kv-cache-metrics", Kind::ignore_bool}, {"--cudagraph-metrics", Kind::ignore_bool},
    {"--enable-layerwise-nvtx-tracing", Kind::ignore_bool}, {"--enable-mfu-metrics", Kind::ignore_bool},
    {"--enable-logging-iteration-details", Kind::ignore_bool},
    // The scheduler (SchedulerConfig)
    {"--max-num-batched-tokens", Kind::map, "--max-num-batched-tokens"},
    {"--max-num-seqs", Kind::map, "--max-num-seqs"},
    {"--async-scheduling", Kind::map_bool, "--async-scheduling", "--no-async-scheduling"},
    {"--disable-hybrid-kv-cache-manager", Kind::unmodelled_bool, {}, {}, "the KV-cache groups (one spec per layer)"},
    {"--max-num-partial-prefills", Kind::ignore}, {"--max-long-partial-prefills", Kind::ignore},
    {"--long-prefill-token-threshold", Kind::ignore}, {"--scheduling-policy", Kind::ignore},
    {"--scheduler-cls", Kind::ignore}, {"--stream-interval", Kind::ignore}, {"--max-num-scheduled-tokens", Kind::ignore},
    {"--enable-chunked-prefill", Kind::ignore_bool}, {"--disable-chunked-mm-input", Kind::ignore_bool},
    {"--scheduler-reserve-full-isl", Kind::ignore_bool},
    // CUDA graphs and compilation
    {"--compilation-config,-cc", Kind::compilation},
    {"--cudagraph-capture-sizes", Kind::unmodelled_multi, {}, {}, "the CUDA-graph pool (estimated for vLLM's default sizes)"},
    {"--max-cudagraph-capture-size", Kind::unmodelled, {}, {}, "the CUDA-graph pool (estimated for vLLM's default sizes)"},
    {"--optimization-level", Kind::ignore}, {"--performance-mode", Kind::ignore},
    // JSON-valued configs
    {"--speculative-config,-sc", Kind::speculative},
    {"--kv-transfer-config", Kind::kv_transfer},
    {"--kv-events-config", Kind::ignore}, {"--ec-transfer-config", Kind::ignore},
    {"--structured-outputs-config", Kind::ignore}, {"--profiler-config", Kind::ignore},
    {"--reasoning-config", Kind::ignore}, {"--kernel-config", Kind::ignore}, {"--additional-config", Kind::ignore},
    {"--weight-transfer-config", Kind::ignore}, {"--reasoning-parser", Kind::ignore},
    {"--reasoning-parser-plugin", Kind::ignore},
    // The engine's process and logging
    {"--disable-log-stats", Kind::ignore_bool}, {"--aggregate-engine-logging", Kind::ignore_bool},
    {"--fail-on-environ-validation", Kind::ignore_bool}, {"--enable-log-requests", Kind::ignore_bool},
    {"--disable-log-requests", Kind::ignore_bool}, {"--headless", Kind::ignore_bool}, {"--grpc", Kind::ignore_bool},
    {"--shutdown-timeout", Kind::ignore}, {"--api-server-count,-asc", Kind::ignore},
    {"--config", Kind::refused, {}, {}, "vLLM reads more flags from the YAML file; mla-plan does not read it: give its flags on the command line"},
    // The API server (FrontendArgs)
    {"--host", Kind::ignore}, {"--uds", Kind::ignore}, {"--port", Kind::ignore}, {"--uvicorn-log-level", Kind::ignore},
    {"--disable-access-log-for-endpoints", Kind::ignore}, {"--allowed-origins", Kind::ignore},
    {"--allowed-methods", Kind::ignore}, {"--allowed-headers", Kind::ignore}, {"--chat-template", Kind::ignore},
    {"--chat-template-content-format", Kind::ignore}, {"--default-chat-template-kwargs", Kind::ignore},
    {"--response-role", Kind::ignore}, {"--ssl-keyfile", Kind::ignore}, {"--ssl-certfile", Kind::ignore},
    {"--ssl-ca-certs", Kind::ignore}, {"--ssl-ciphers", Kind::ignore}, {"--root-path", Kind::ignore},
    {"--ssl-cert-reqs", Kind::ignore}, {"--middleware", Kind::ignore}, {"--tool-call-parser", Kind::ignore},
    {"--tool-parser-plugin", Kind::ignore}, {"--tool-server", Kind::ignore}, {"--max-log-len", Kind::ignore},
    {"--log-config-file", Kind::ignore}, {"--h11-max-incomplete-event-size", Kind::ignore},
    {"--h11-max-header-count", Kind::ignore}, {"--fingerprint-mode", Kind::ignore},
    {"--fingerprint-value", Kind::ignore}, {"--cohere-format", Kind::ignore},
    {"--data-parallel-supervisor-port", Kind::ignore}, {"--api-key", Kind::ignore_multi},
    {"--lora-modules", Kind::ignore_multi}, {"--disable-uvicorn-access-log", Kind::ignore_bool},
    {"--allow-credentials", Kind::ignore_bool}, {"--trust-request-chat-template", Kind::ignore_bool},
    {"--enable-ssl-refresh", Kind::ignore_bool}, {"--return-tokens-as-token-ids", Kind::ignore_bool},
    {"--enable-request-id-headers", Kind::ignore_bool}, {"--disable-frontend-multiprocessing", Kind::ignore_bool},
    {"--enable-auto-tool-choice", Kind::ignore_bool}, {"--exclude-tools-when-tool-choice-none", Kind::ignore_bool},
    {"--disable-fastapi-docs", Kind::ignore_bool}, {"--enable-prompt-tokens-details", Kind::ignore_bool},
    {"--enable-server-load-tracking", Kind::ignore_bool}, {"--enable-force-include-usage", Kind::ignore_bool},
    {"--enable-tokenizer-info-endpoint", Kind::ignore_bool}, {"--tokens-only", Kind::ignore_bool},
    {"--enable-log-outputs", Kind::ignore_bool}, {"--enable-log-deltas", Kind::ignore_bool},
    {"--log-error-stack", Kind::ignore_bool}, {"--enable-per-request-metrics", Kind::ignore_bool},
    {"--cohere-is-reasoning-model", Kind::ignore_bool}, {"--enable-offline-docs", Kind::ignore_bool},
    {"--enable-flash-late-interaction", Kind::ignore_bool},
};
// clang-format on

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

bool takes_bool(Kind k) { return k == Kind::map_bool || k == Kind::ignore_bool || k == Kind::unmodelled_bool; }

/// The flag `name` is ("--x", "-tp", or "--no-x" of a boolean flag), with `negated` set for --no-x.
const Flag* find_flag(const std::string& name, bool& negated) {
  negated = false;
  for (const auto& f : kFlags) {
    for (const auto& n : split_names(f.names)) {
      if (n == name) return &f;
      if (takes_bool(f.kind) && n.rfind("--", 0) == 0 && name == "--no-" + n.substr(2)) {
        negated = true;
        return &f;
      }
    }
  }
  return nullptr;
}

/// argparse's allow_abbrev: the one long name (of vLLM's, with --no- forms) that `name` begins.
std::vector<std::string> prefix_matches(const std::string& name) {
  std::vector<std::string> out;
  for (const auto& f : kFlags) {
    for (const auto& n : split_names(f.names)) {
      if (n.rfind("--", 0) != 0) continue;
      if (n.rfind(name, 0) == 0) out.push_back(n);
      if (takes_bool(f.kind)) {
        const std::string no = "--no-" + n.substr(2);
        if (no.rfind(name, 0) == 0) out.push_back(no);
      }
    }
  }
  return out;
}

/// A dotted value as FlexibleArgumentParser reads it: JSON, else a human-readable integer, else
/// the text itself.
json dotted_value(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception&) {}
  try {
    return parse_size_value(
        "value", text,
        IntRange{std::numeric_limits<std::int64_t>::min() / 2, std::numeric_limits<std::int64_t>::max() / 2, {}});
  } catch (const Error&) {}
  return text;
}

json parse_object(const std::string& flag, const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw_usage(flag + ": " + mlaplan::quoted(text) + " is not JSON (" + e.what() + "); vLLM refuses it");
  }
  if (!j.is_object()) throw_usage(flag + ": " + mlaplan::quoted(text) + " is not a JSON object; vLLM refuses it");
  return j;
}

std::string json_int_text(const std::string& where, const json& v) {
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_number_unsigned()) return std::to_string(v.get<std::uint64_t>());
  throw_usage(where + ": " + mlaplan::quoted(v.dump()) + " is not an integer");
}

/// A JSON config's boolean as vLLM's pydantic config takes it: true / false, or the text of a
/// dotted flag ("--attention-config.x=True"): true / True / 1, false / False / 0.
std::optional<bool> boolean_of(const json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "true" || s == "True" || s == "1") return true;
    if (s == "false" || s == "False" || s == "0") return false;
  }
  return std::nullopt;
}

class Translator {
 public:
  explicit Translator(const OwnFlags& own) : own_(own) {}

  VllmServeInput run(const std::vector<std::string>& raw) {
    in_.argv = raw;
    std::vector<std::string> args = normalise(raw);
    std::optional<std::string> model;
    std::map<std::string, json> json_values;  // full JSON values by flag, then dotted keys merged over
    for (std::size_t i = 0; i < args.size(); ++i) {
      std::string word = args[i];
      if (word.empty() || word[0] != '-' || word == "-") {
        if (model)
          throw_usage("vllm serve: a second MODEL " + mlaplan::quoted(word) + " (MODEL is " + mlaplan::quoted(*model) +
                      ")");
        model = word;
        continue;
      }
      if (word == "--") {
        for (++i; i < args.size(); ++i) {
          if (model) throw_usage("vllm serve: a second MODEL " + mlaplan::quoted(args[i]));
          model = args[i];
        }
        break;
      }
      std::optional<std::string> inline_value;
      // argparse splits "NAME=VALUE" for a short name too ("-tp=8", "-cc.cudagraph_mode=NONE").
      if (const auto eq = word.find('='); eq != std::string::npos && eq > 1) {
        inline_value = word.substr(eq + 1);
        word = word.substr(0, eq);
      }
      const auto value = [&](const std::string& name) -> std::string {
        if (inline_value) return *inline_value;
        if (i + 1 >= args.size()) throw_usage("vllm serve: " + name + " needs a value");
        return args[++i];
      };
      // Dotted JSON keys: --speculative-config.num_speculative_tokens 2
      if (const auto dot = word.find('.'); dot != std::string::npos) {
        std::string base = word.substr(0, dot);
        bool neg = false;
        const Flag* f = find_flag(base, neg);
        if (f == nullptr ||
            !(f->kind == Kind::speculative || f->kind == Kind::compilation || f->kind == Kind::attention ||
              f->kind == Kind::kv_transfer || f->kind == Kind::hf_overrides || f->kind == Kind::ignore)) {
          unknown(word);
        }
        std::string key = word.substr(dot + 1);
        const bool append = !key.empty() && key.back() == '+';
        if (append) key.pop_back();
        const std::string v = value(word);
        json& root = dotted_[split_names(f->names).front()];
        json* node = &root;
        std::size_t start = 0;
        while (true) {
          const auto d = key.find('.', start);
          const std::string part = key.substr(start, d == std::string::npos ? std::string::npos : d - start);
          if (part.empty()) throw_usage("vllm serve: " + mlaplan::quoted(word) + " has an empty key");
          if (d == std::string::npos) {
            if (append) {
              json list = json::array();
              std::size_t s = 0;
              while (s <= v.size()) {
                const auto c = v.find(',', s);
                list.push_back(dotted_value(v.substr(s, c == std::string::npos ? std::string::npos : c - s)));
                if (c == std::string::npos) break;
                s = c + 1;
              }
              json& slot = (*node)[part];
              if (!slot.is_array()) slot = json::array();
              for (auto& x : list) slot.push_back(x);
            } else {
              (*node)[part] = dotted_value(v);
            }
            break;
          }
          node = &(*node)[part];
          if (!node->is_object()) *node = json::object();
          start = d + 1;
        }
        continue;
      }
      bool negated = false;
      const Flag* f = find_flag(word, negated);
      if (f == nullptr && word.rfind("--", 0) == 0 && !own_.is_flag(word)) {
        const auto m = prefix_matches(word);
        if (m.size() == 1) {
          word = m.front();
          f = find_flag(word, negated);
        } else if (m.size() > 1) {
          std::string list;
          for (std::size_t k = 0; k < m.size() && k < 6; ++k) list += (k ? ", " : "") + m[k];
          throw_usage("vllm serve: " + word + " is ambiguous (vLLM takes a unique prefix): " + list);
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
      if (takes_bool(f->kind) && inline_value) {
        throw_usage("vllm serve: " + word + " takes no value (vLLM's " + canonical + " is a switch; got " +
                    mlaplan::quoted(*inline_value) + ")");
      }
      switch (f->kind) {
        case Kind::map: {
          const std::string v = value(word);
          if (canonical == "--attention-backend" && (v == "auto" || v == "None" || v.empty())) break;
          if (canonical == "--kv-offloading-backend") {
            if (v != "native") {
              not_modelled(word + " " + v, "a KV offloading backend other than vLLM's native connector");
            }
            break;
          }
          if (canonical == "--prefix-cache-retention-interval" && v == "auto") {
            // vLLM's automatic retention (int | "auto"): its interval is not modelled.
            not_modelled(word + " auto",
                         "how long the prefix cache keeps a prompt's blocks (vLLM's automatic interval)");
            break;
          }
          set(std::string(f->target), {v});
          break;
        }
        case Kind::map_bool: {
          const std::string_view t = negated ? f->no_target : f->target;
          switches_[canonical] = std::string(t);
          break;
        }
        case Kind::ignore:
          (void)value(word);
          ignored(word);
          break;
        case Kind::ignore_bool:
          if (canonical == "--enable-chunked-prefill" && negated) {
            // Chunked prefill off: vLLM's batch budget becomes max(max_model_len, its default) and an
            // explicit one below max_model_len is refused (SchedulerConfig); not modelled.
            not_modelled(word,
                         "the tokens of one step (max_num_batched_tokens: at least max_model_len without "
                         "chunked prefill), the profile run and the sliding-window reserve");
            break;
          }
          ignored(word);
          break;
        case Kind::ignore_multi:
          if (inline_value) {
            (void)value(word);
          } else {
            if (i + 1 >= args.size() || args[i + 1].rfind("-", 0) == 0)
              throw_usage("vllm serve: " + word + " needs a value");
            while (i + 1 < args.size() && args[i + 1].rfind("-", 0) != 0) ++i;
          }
          ignored(word);
          break;
        case Kind::unmodelled: {
          const std::string v = value(word);
          if (!f->target.empty() && v == f->target) {  // the flag's default: changes nothing
            ignored(word);
            break;
          }
          not_modelled(word + " " + v, std::string(f->why));
          break;
        }
        case Kind::unmodelled_bool:
          if (negated) {
            ignored(word);
          } else {
            not_modelled(word, std::string(f->why));
          }
          break;
        case Kind::unmodelled_multi: {
          std::string vals;
          if (inline_value) {
            vals = value(word);
          } else {
            if (i + 1 >= args.size() || args[i + 1].rfind("-", 0) == 0)
              throw_usage("vllm serve: " + word + " needs a value");
            while (i + 1 < args.size() && args[i + 1].rfind("-", 0) != 0) vals += (vals.empty() ? "" : " ") + args[++i];
          }
          not_modelled(word + " " + vals, std::string(f->why));
          break;
        }
        case Kind::speculative:
        case Kind::compilation:
        case Kind::attention:
        case Kind::kv_transfer:
        case Kind::hf_overrides: {
          const std::string v = value(word);
          if (f->kind == Kind::speculative && (v.empty() || v == "None" || v == "null")) {
            json_values.erase(canonical);
            break;
          }
          json_values[canonical] = parse_object(word, v);
          raw_json_[canonical] = v;
          break;
        }
        case Kind::refused: throw_usage("vllm serve: " + word + ": " + std::string(f->why));
      }
    }
    if (!model)
      throw_usage("vllm serve: no MODEL (a model directory, a config.json or a Hugging Face repo id ORG/NAME)");
    // Dotted keys are appended by vLLM after the command line: they replace a full JSON value.
    for (auto& [flag, obj] : dotted_) {
      json_values[flag] = obj;
      raw_json_.erase(flag);
    }
    for (const auto& [flag, obj] : json_values) apply_json(flag, obj);
    in_.plan_args.push_back(*model);
    for (const auto& [flag, values] : mapped_) {
      in_.plan_args.push_back(flag);
      in_.plan_args.insert(in_.plan_args.end(), values.begin(), values.end());
    }
    for (const auto& [flag, target] : switches_) {
      (void)flag;
      if (!target.empty()) in_.plan_args.push_back(target);
    }
    in_.plan_args.insert(in_.plan_args.end(), own_args_.begin(), own_args_.end());
    from_environment();
    return in_;
  }

 private:
  /// FlexibleArgumentParser's rewriting: --model X to MODEL, '_' to '-' in a long flag's name
  /// (up to the first '.' or '='), -O<n> / -O=<n> / -O <n> to --optimization-level.
  std::vector<std::string> normalise(const std::vector<std::string>& raw) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      std::string w = raw[i];
      if (w.rfind("--", 0) == 0) {
        const auto end = w.find_first_of(".=");
        std::replace(w.begin() + 2, end == std::string::npos ? w.end() : w.begin() + static_cast<std::ptrdiff_t>(end),
                     '_', '-');
      }
      if (w == "--model" || w.rfind("--model=", 0) == 0) {
        std::string m;
        if (w == "--model") {
          if (i + 1 >= raw.size()) throw_usage("vllm serve: --model needs a value");
          m = raw[++i];
        } else {
          m = w.substr(8);
        }
        out.insert(out.begin(), m);
        continue;
      }
      if (w.rfind("-O", 0) == 0 && w.rfind("--", 0) != 0) {
        out.push_back("--optimization-level");
        if (w.size() > 2) {
          out.push_back(w[2] == '=' ? w.substr(3) : w.substr(2));
        }
        continue;
      }
      out.push_back(std::move(w));
    }
    return out;
  }

  void set(const std::string& flag, std::vector<std::string> values) { mapped_[flag] = std::move(values); }

  /// What vLLM reads from the environment, where the command line does not say it.
  void from_environment() {
    if (!own_.getenv) return;
    // A flag the command line gives (mla-plan's own, or one a vLLM flag set) wins over the environment.
    const auto given = [this](const std::string& flag) {
      return std::find(own_args_.begin(), own_args_.end(), flag) != own_args_.end() || mapped_.count(flag) != 0;
    };
    if (const char* v = own_.getenv("VLLM_PLE_CPU_OFFLOAD"); v != nullptr && *v != '\0' && !given("--engram")) {
      std::string t = v;
      for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (t != "1" && t != "true" && t != "0" && t != "false") {
        throw_usage("VLLM_PLE_CPU_OFFLOAD: " + mlaplan::quoted(v) + " is not a boolean; allowed 1, true, 0, false");
      }
      const bool offload = t == "1" || t == "true";
      in_.plan_args.insert(in_.plan_args.end(), {"--engram", offload ? "offload" : "gpu"});
      in_.from_environment.push_back(std::string("VLLM_PLE_CPU_OFFLOAD=") + v + " (--engram " +
                                     (offload ? "offload" : "gpu") + ")");
    }
    if (const char* v = own_.getenv("VLLM_SPARSE_INDEXER_MAX_LOGITS_MB");
        v != nullptr && *v != '\0' && !given("--indexer-logits-budget-mib")) {
      in_.plan_args.insert(in_.plan_args.end(), {"--indexer-logits-budget-mib", v});
      in_.from_environment.push_back(std::string("VLLM_SPARSE_INDEXER_MAX_LOGITS_MB=") + v);
    }
  }

  void ignored(const std::string& word) {
    if (std::find(in_.ignored.begin(), in_.ignored.end(), word) == in_.ignored.end()) in_.ignored.push_back(word);
  }
  void not_modelled(const std::string& what, const std::string& why) {
    in_.not_modelled.push_back(what + " (changes " + why + ")");
  }

  [[noreturn]] void unknown(const std::string& word) {
    std::vector<std::string> names = vllm_flag_names();
    names.insert(names.end(), own_.names.begin(), own_.names.end());
    throw_usage("vllm serve: unknown flag " + word + " (neither vLLM's nor mla-plan's)" +
                did_you_mean_suffix(word, names));
  }

  void apply_json(const std::string& flag, const json& j) {
    if (flag == "--speculative-config") {
      if (j.contains("method") && !j["method"].is_null()) {
        if (!j["method"].is_string())
          throw_usage(flag + ": method " + mlaplan::quoted(j["method"].dump()) + " is not a string");
        in_.spec_method = j["method"].get<std::string>();
      }
      if (j.contains("model") && !j["model"].is_null()) {
        not_modelled(flag + " model " + j["model"].dump(), "the weights and caches of a separate draft model");
      }
      if (!j.contains("num_speculative_tokens")) {
        throw_usage(flag + ": no num_speculative_tokens (mla-plan needs it: the draft config's default is not read)");
      }
      const std::string k = json_int_text(flag + ": num_speculative_tokens", j["num_speculative_tokens"]);
      set("--spec-tokens", {k});
      for (const auto& [key, v] : j.items()) {
        if (key == "method" || key == "num_speculative_tokens" || key == "model") continue;
        (void)v;
        ignored(flag + "." + key);
      }
    } else if (flag == "--compilation-config") {
      for (const auto& [key, v] : j.items()) {
        if (key == "cudagraph_mode") {
          if (!v.is_string()) throw_usage(flag + ": cudagraph_mode " + mlaplan::quoted(v.dump()) + " is not a string");
          std::string mode = v.get<std::string>();
          for (auto& c : mode) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
          const std::vector<std::string> modes = {"NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY",
                                                  "FULL_AND_PIECEWISE"};
          if (std::find(modes.begin(), modes.end(), mode) == modes.end()) {
            throw_usage(flag + ": cudagraph_mode " + mlaplan::quoted(v.get<std::string>()) +
                        " is not a mode; allowed NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE" +
                        did_you_mean_suffix(mode, modes));
          }
          if (mode == "NONE") {
            // No CUDA graphs: the memory --enforce-eager plans (vLLM's enforce_eager sets this mode).
            switches_["--enforce-eager"] = "--enforce-eager";
            ignored(flag + ".cudagraph_mode NONE (planned as --enforce-eager: no CUDA-graph pool)");
          } else if (mode != "FULL_AND_PIECEWISE") {
            not_modelled(flag + " cudagraph_mode " + mode, "the CUDA-graph pool (estimated for FULL_AND_PIECEWISE)");
          }
        } else if (key == "cudagraph_capture_sizes" || key == "max_cudagraph_capture_size") {
          not_modelled(flag + " " + key + " " + v.dump(), "the CUDA-graph pool (estimated for vLLM's default sizes)");
        } else {
          ignored(flag + "." + key);
        }
      }
    } else if (flag == "--attention-config") {
      auto boolean = [&](const std::string& key, const json& v) {
        const auto b = boolean_of(v);
        if (!b) throw_usage(flag + ": " + key + " " + mlaplan::quoted(v.dump()) + " is not true or false");
        return *b;
      };
      for (const auto& [key, v] : j.items()) {
        if (key == "backend") {
          if (v.is_null()) continue;
          if (!v.is_string()) throw_usage(flag + ": backend " + mlaplan::quoted(v.dump()) + " is not a string");
          if (v.get<std::string>() != "auto") set("--attention-backend", {v.get<std::string>()});
        } else if (key == "dsv4_fused_attention") {
          if (v.is_null()) continue;
          set("--dsv4-fused-attention", {boolean(key, v) ? "true" : "false"});
        } else if (key == "use_fp4_indexer_cache") {
          // DeepSeek V4's switch for the 68-byte MXFP4 indexer keys (config/attention.py; default
          // False: the 132-byte FP8 keys).
          if (v.is_null()) continue;
          set("--indexer-cache-dtype", {boolean(key, v) ? "fp4" : "fp8"});
        } else if (key == "indexer_kv_dtype") {
          // The newer generic field: mxfp4 is the same 68-byte keys, fp8 the default 132-byte ones.
          if (v.is_null()) continue;
          if (!v.is_string())
            throw_usage(flag + ": indexer_kv_dtype " + mlaplan::quoted(v.dump()) + " is not a string");
          const std::string d = v.get<std::string>();
          if (d == "mxfp4" || d == "fp8") {
            set("--indexer-cache-dtype", {d == "mxfp4" ? "fp4" : "fp8"});
          } else {
            not_modelled(flag + " indexer_kv_dtype " + d,
                         "the indexer key rows (mla-plan models fp8 and mxfp4: 132 and 68 bytes)");
          }
        } else {
          ignored(flag + "." + key);
        }
      }
    } else if (flag == "--engram-config") {
      // V4.1's Engram tables: cpu_offload places them (VLLM_PLE_CPU_OFFLOAD's default when unset).
      for (const auto& [key, v] : j.items()) {
        if (key == "cpu_offload") {
          if (v.is_null()) continue;
          const auto offload = boolean_of(v);
          if (!offload) throw_usage(flag + ": cpu_offload " + mlaplan::quoted(v.dump()) + " is not true or false");
          set("--engram", {*offload ? "offload" : "gpu"});
        } else {
          not_modelled(flag + "." + key + " " + v.dump(), "how the Engram tables are shared or prefetched");
        }
      }
    } else if (flag == "--kv-transfer-config") {
      const std::string connector = j.contains("kv_connector") && j["kv_connector"].is_string()
                                        ? j["kv_connector"].get<std::string>()
                                        : std::string();
      if (connector != "OffloadingConnector") {
        not_modelled(flag + " kv_connector " + (connector.empty() ? std::string("(none)") : connector),
                     "where KV blocks live (only vLLM's native OffloadingConnector is modelled)");
        return;
      }
      const json extra = j.contains("kv_connector_extra_config") ? j["kv_connector_extra_config"] : json::object();
      if (extra.contains("cpu_bytes_to_use")) {
        const std::string b = json_int_text(flag + ": cpu_bytes_to_use", extra["cpu_bytes_to_use"]);
        const double gib = static_cast<double>(std::stoll(b)) / 1073741824.0;
        set("--kv-offloading-size", {format_shortest(gib)});
      } else {
        not_modelled(flag + " " + j.dump(), "the host tier (mla-plan reads cpu_bytes_to_use)");
      }
    } else if (flag == "--hf-overrides") {
      // As given (the launch command repeats it), or the dotted keys' object.
      if (!j.empty()) set("--hf-overrides", {raw_json_.count(flag) ? raw_json_[flag] : j.dump()});
    }
  }

  const OwnFlags& own_;
  VllmServeInput in_;
  std::map<std::string, std::vector<std::string>> mapped_;
  std::map<std::string, std::string> switches_;
  std::map<std::string, json> dotted_;
  std::map<std::string, std::string> raw_json_;  ///< a JSON flag's value as typed (not dotted)
  std::vector<std::string> own_args_;
};

}  // namespace

std::vector<std::string> vllm_flag_names() {
  std::vector<std::string> out;
  for (const auto& f : kFlags) {
    for (const auto& n : split_names(f.names)) out.push_back(n);
  }
  return out;
}

VllmServeInput translate_vllm_serve(const std::vector<std::string>& args, const OwnFlags& own) {
  return Translator(own).run(args);
}

}  // namespace mlaplan::cli

#include "mlaplan/plan/launch.hpp"

#include <string_view>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/engine/vllm/release.hpp"
#include "mlaplan/rules/backends.hpp"

namespace mlaplan {

namespace {

bool shell_plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_-./:=,@%+").find(c) != std::string_view::npos;
}

std::string json_string(std::string_view s) {
  std::string o = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

class Builder {
 public:
  void flag(std::string name) { flags_.push_back(CommandFlag{std::move(name), {}}); }
  void flag(std::string name, std::string value) { flags_.push_back(CommandFlag{std::move(name), {std::move(value)}}); }
  void own(std::string name) { own_.push_back(std::move(name)); }
  void own(std::string name, std::string value) {
    own_.push_back(std::move(name));
    own_.push_back(std::move(value));
  }
  std::vector<CommandFlag> flags_;
  std::vector<std::string> own_;
};

}  // namespace

std::vector<std::string> flags_argv(const std::vector<CommandFlag>& flags) {
  std::vector<std::string> argv;
  for (const auto& f : flags) {
    argv.push_back(f.name);
    argv.insert(argv.end(), f.values.begin(), f.values.end());
  }
  return argv;
}

std::string shell_quote(const std::string& word) {
  bool plain = !word.empty();
  for (const char c : word) plain = plain && shell_plain(c);
  if (plain) return word;
  std::string o = "'";
  for (const char c : word) {
    if (c == '\'') {
      o += "'\\''";
    } else {
      o += c;
    }
  }
  return o + "'";
}

std::string LaunchCommand::text() const {
  std::string o;
  for (const auto& e : env) o += shell_quote(e) + " ";
  for (std::size_t i = 0; i < argv.size(); ++i) o += (i ? " " : "") + shell_quote(argv[i]);
  return o;
}

std::string launch_model(const ModelConfig& config) {
  // A repo id as given (or found from a cache directory): vLLM resolves it through the same cache.
  return config.hf_repo_id.empty() ? config.source : config.hf_repo_id;
}

LaunchCommand vllm_launch_command(const ModelConfig& cfg, const Plan& plan, const PlanRequest& req) {
  if (!plan.layout) throw_internal("vllm_launch_command: a plan without a layout");
  const Layout& L = *plan.layout;
  const VllmRelease& release = vllm_release_or_newest(req.deploy.vllm_version);  // its defaults are left out
  const ParallelLayout& pl = L.parallel;
  LaunchCommand c;
  Builder b;
  const auto num = [](std::int64_t v) { return std::to_string(v); };
  const auto real = [](double v) { return format_shortest(v); };

  // The parallel layout (vLLM's defaults: 1, expert parallel off).
  if (pl.tensor_parallel_size != 1) b.flag("--tensor-parallel-size", num(pl.tensor_parallel_size));
  if (pl.pipeline_parallel_size != 1) b.flag("--pipeline-parallel-size", num(pl.pipeline_parallel_size));
  if (pl.data_parallel_size != 1) b.flag("--data-parallel-size", num(pl.data_parallel_size));
  if (pl.decode_context_parallel_size != 1) {
    b.flag("--decode-context-parallel-size", num(pl.decode_context_parallel_size));
    if (req.layout.cp_kv_cache_interleave_size != 1) {
      b.flag("--cp-kv-cache-interleave-size", num(req.layout.cp_kv_cache_interleave_size));
    }
  }
  if (pl.enable_expert_parallel) b.flag("--enable-expert-parallel");

  // The model's lengths and the scheduler (defaults: the config's max_position_embeddings, the
  // GPU's max_num_batched_tokens and max_num_seqs).
  if (L.max_model_len != L.max_position_embeddings) b.flag("--max-model-len", num(L.max_model_len));
  if (!L.in_flight_tokens_default &&
      L.in_flight_tokens != default_in_flight_tokens(L.target, backend_release_rules(release))) {
    b.flag("--max-num-batched-tokens", num(L.in_flight_tokens));
  }
  if (req.deploy.max_num_seqs && *req.deploy.max_num_seqs != default_max_num_seqs(L.target)) {
    b.flag("--max-num-seqs", num(*req.deploy.max_num_seqs));
  }
  if (req.dtype) b.flag("--dtype", *req.dtype);

  // The cache and the backend.
  if (req.layout.kv_cache_dtype != "auto") b.flag("--kv-cache-dtype", req.layout.kv_cache_dtype);
  if (req.layout.block_size) b.flag("--block-size", num(*req.layout.block_size));
  if (req.layout.attention_backend) b.flag("--attention-backend", *req.layout.attention_backend);
  // --attention-config: the fused FlashMLA path and DeepSeek V4's MXFP4 indexer keys
  // (use_fp4_indexer_cache, config/attention.py) when they are not the defaults.
  std::string attention_config;
  if (req.layout.fused_attention != FusedAttention::auto_) {
    attention_config += std::string("\"dsv4_fused_attention\": ") +
                        (req.layout.fused_attention == FusedAttention::on ? "true" : "false");
  }
  if (req.layout.indexer_cache_dtype == "fp4") {
    attention_config += std::string(attention_config.empty() ? "" : ", ") + "\"use_fp4_indexer_cache\": true";
  }
  if (!attention_config.empty()) b.flag("--attention-config", "{" + attention_config + "}");

  // Speculative decoding: the config's own drafter.
  const std::int64_t k = req.batch.spec_tokens;
  if (k > 0) {
    const DraftMethod m = draft_method(cfg);
    if (m != DraftMethod::none) {
      b.flag("--speculative-config",
             "{\"method\": " + json_string(to_string(m)) + ", \"num_speculative_tokens\": " + num(k) + "}");
    } else {
      b.own("--spec-tokens", num(k));
      c.notes.push_back("--spec-tokens " + num(k) +
                        ": the config has no draft layers, so vLLM would need a separate draft model; the plan "
                        "counts only the speculative tokens of each decode step");
    }
    if (!req.layout.include_draft_layers && m != DraftMethod::none) b.own("--no-draft-layers");
  }

  // vLLM's memory budget.
  if (req.budget.gpu_memory_utilization && *req.budget.gpu_memory_utilization != release.gpu_memory_utilization) {
    b.flag("--gpu-memory-utilization", real(*req.budget.gpu_memory_utilization));
  }
  if (req.budget.kv_cache_memory_bytes) b.flag("--kv-cache-memory-bytes", num(*req.budget.kv_cache_memory_bytes));
  if (req.budget.enforce_eager) b.flag("--enforce-eager");
  if (req.deploy.async_scheduling && *req.deploy.async_scheduling != release.async_default) {
    b.flag(*req.deploy.async_scheduling ? "--async-scheduling" : "--no-async-scheduling");
  }
  if (req.deploy.prefix_cache_retention_interval != 0) {
    b.flag("--prefix-cache-retention-interval", num(req.deploy.prefix_cache_retention_interval));
  }
  if (req.deploy.kv_offloading_size_gib) b.flag("--kv-offloading-size", real(*req.deploy.kv_offloading_size_gib));
  if (!req.deploy.prefix_caching) b.flag("--no-enable-prefix-caching");
  if (req.layout.language_model_only) b.flag("--language-model-only");

  // Engram's tables: vLLM reads their placement from the environment.
  if (!cfg.checkpoint.engram_layer_ids.empty()) {
    const bool offload = pl.engram == EngramPlacement::offload;
    c.env.push_back(std::string("VLLM_PLE_CPU_OFFLOAD=") + (offload ? "1" : "0"));
    b.own("--engram", offload ? "offload" : "gpu");  // mla-plan's assumption, whatever the environment says
    c.notes.push_back(std::string("Engram tables ") + (offload ? "in host memory" : "on the GPU") +
                      ": vLLM reads VLLM_PLE_CPU_OFFLOAD (host memory by default; the command sets it so that the "
                      "placement does not depend on the image); newer builds also take --engram-config "
                      "'{\"cpu_offload\": true|false}'");
  }

  // What describes the machine and the estimates, not the engine: mla-plan's own flags.
  const TargetRequest& t = req.target;
  if (t.gpu) b.own("--gpu", *t.gpu);  // the default (h200) needs none
  if (t.arch) b.own("--arch", *t.arch);
  if (t.num_sms) b.own("--num-sms", num(*t.num_sms));
  if (t.memory_gib) b.own("--gpu-memory-gib", real(*t.memory_gib));
  const std::pair<const char*, const std::optional<double>*> terms[] = {
      {"--weights-gib", &req.budget.weights_gib},       {"--load-overhead-gib", &req.budget.load_overhead_gib},
      {"--activation-gib", &req.budget.activation_gib}, {"--non-torch-gib", &req.budget.non_torch_gib},
      {"--cudagraph-gib", &req.budget.cudagraph_gib},   {"--reserved-gib", &req.budget.reserved_gib}};
  for (const auto& [name, value] : terms) {
    if (*value) b.own(name, real(**value));
  }
  if (!req.deploy.read_checkpoint_files) b.own("--no-checkpoint-files");
  if (req.prefill.tiling != IndexerTiling::rows) b.own("--indexer-tiling", "none");
  if (req.prefill.logits_budget_mib != kVllmIndexerLogitsBudgetMib) {
    c.env.push_back("VLLM_SPARSE_INDEXER_MAX_LOGITS_MB=" + num(req.prefill.logits_budget_mib));
    b.own("--indexer-logits-budget-mib", num(req.prefill.logits_budget_mib));
  }
  if (req.batch.batch) b.own("--batch", num(*req.batch.batch));
  if (req.batch.context_len) b.own("--context-len", num(*req.batch.context_len));
  if (!req.batch.context_lens.empty()) {
    std::string list;
    for (const auto v : req.batch.context_lens) list += (list.empty() ? "" : ",") + num(v);
    b.own("--context-lens", list);
  }

  const std::string model = launch_model(cfg);
  if (!cfg.hf_revision.empty() && cfg.hf_revision != "main") b.flag("--revision", cfg.hf_revision);
  if (cfg.download_dir) b.flag("--download-dir", *cfg.download_dir);
  if (cfg.hf_overrides) b.flag("--hf-overrides", *cfg.hf_overrides);
  if (cfg.hf_repo_id.empty() && cfg.model_dir.empty()) {
    c.notes.push_back("MODEL: mla-plan read the config file " + cfg.source +
                      "; vLLM takes the model directory or its Hugging Face repo id in its place");
  }
  c.flags = std::move(b.flags_);
  c.mla_plan_flags = std::move(b.own_);
  c.argv = {"vllm", "serve", model};
  const auto rest = flags_argv(c.flags);
  c.argv.insert(c.argv.end(), rest.begin(), rest.end());
  return c;
}

LaunchCommand sglang_launch_command(const ModelConfig& config, const Plan& plan, const PlanRequest& request) {
  if (!plan.sglang || !plan.sglang_input) throw_internal("sglang_launch_command: no SGLang fit");
  const SglangFit& fit = *plan.sglang;
  const SglangInput& in = *plan.sglang_input;
  const SglangOptions& o = request.sglang;
  LaunchCommand l;
  if (o.engram_host_table && config.family == Family::deepseek_v41)
    l.env.push_back("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE=1");
  if (o.swa_eviction_interval != 128) {
    l.env.push_back("SGLANG_SWA_EVICTION_INTERVAL=" + std::to_string(o.swa_eviction_interval));
  }
  auto add = [&](const std::string& flag, std::vector<std::string> values = {}) {
    l.flags.push_back(CommandFlag{flag, std::move(values)});
  };
  add("--tp-size", {std::to_string(in.tp_size)});
  if (in.dp_size > 1) add("--dp-size", {std::to_string(in.dp_size)});
  if (o.enable_dp_attention) add("--enable-dp-attention");
  if (in.ep_size > 1) add("--ep-size", {std::to_string(in.ep_size)});
  if (in.pp_size > 1) add("--pp-size", {std::to_string(in.pp_size)});
  add("--mem-fraction-static", {format_shortest(fit.mem_fraction_static)});
  if (fit.context_len != config.max_position_embeddings) add("--context-length", {std::to_string(fit.context_len)});
  add("--max-running-requests", {std::to_string(fit.requested_running_requests)});
  if (o.chunked_prefill_size) add("--chunked-prefill-size", {std::to_string(*o.chunked_prefill_size)});
  if (o.max_prefill_tokens) add("--max-prefill-tokens", {std::to_string(*o.max_prefill_tokens)});
  if (o.cuda_graph_max_bs) add("--cuda-graph-max-bs", {std::to_string(*o.cuda_graph_max_bs)});
  if (o.max_total_tokens) add("--max-total-tokens", {std::to_string(*o.max_total_tokens)});
  if (o.swa_full_tokens_ratio) add("--swa-full-tokens-ratio", {format_shortest(*o.swa_full_tokens_ratio)});
  if (o.swa_prefix_tails) add("--swa-prefix-tails", {std::to_string(*o.swa_prefix_tails)});
  if (o.kv_cache_dtype != "auto") add("--kv-cache-dtype", {o.kv_cache_dtype});
  if (o.disable_radix_cache) add("--disable-radix-cache");
  if (o.disable_cuda_graph) add("--disable-cuda-graph");
  if (o.disable_piecewise_cuda_graph && !o.disable_cuda_graph) add("--disable-piecewise-cuda-graph");
  if (o.disable_overlap_schedule) add("--disable-overlap-schedule");
  if (o.enable_two_batch_overlap) add("--enable-two-batch-overlap");
  if (o.enable_hisparse) add("--enable-hisparse");
  if (o.moe_a2a_backend != "none") add("--moe-a2a-backend", {o.moe_a2a_backend});
  if (!o.speculative_algorithm.empty()) {
    add("--speculative-algorithm", {o.speculative_algorithm});
    if (o.speculative_dspark_block_size) {
      add("--speculative-dspark-block-size", {std::to_string(*o.speculative_dspark_block_size)});
    }
    if (o.speculative_num_steps) add("--speculative-num-steps", {std::to_string(*o.speculative_num_steps)});
    if (o.speculative_eagle_topk) add("--speculative-eagle-topk", {std::to_string(*o.speculative_eagle_topk)});
    if (o.speculative_num_draft_tokens) {
      add("--speculative-num-draft-tokens", {std::to_string(*o.speculative_num_draft_tokens)});
    }
  }
  l.argv = {"python3", "-m", "sglang.launch_server", "--model-path", launch_model(config)};
  const auto rest = flags_argv(l.flags);
  l.argv.insert(l.argv.end(), rest.begin(), rest.end());
  if (plan.target.id != "custom" && plan.target.id != "detected") {
    l.mla_plan_flags = {"--gpu", plan.target.id};
  }
  if (fit.fraction_default) {
    l.notes.push_back("--mem-fraction-static " + format_shortest(fit.mem_fraction_static) +
                      " is SGLang's own default on this GPU, written out so that a change of the reserve rules "
                      "does not move it");
  }
  return l;
}

}  // namespace mlaplan

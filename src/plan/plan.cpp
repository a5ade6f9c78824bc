// make_plan(): the whole pipeline of one config (include/mlaplan/plan/plan.hpp). The fit answer is
// docs/fit.md; the layout docs/layout-accounting.md; the schedules docs/scheduler.md.

#include "mlaplan/plan/plan.hpp"

#include <algorithm>
#include <functional>
#include <cmath>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/model/safetensors.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan {

namespace {

/// The largest deployment "what would fit" searches (per pipeline stage): 32 nodes of 8 GPUs.
constexpr std::int64_t kMaxSuggestedGpus = 256;

}  // namespace

Finding IncompleteCheckpoint::finding() const {
  return Finding{"checkpoint.incomplete", Severity::error,
                 "the checkpoint in " + quoted(dir, kQuotedPathMaxBytes) + " is incomplete: " + reason +
                     "; its files are not used as the weights (the fit takes the weights derived from config.json)",
                 "", "finish the download, or plan from config.json alone with --no-checkpoint-files"};
}

PlanWeights load_plan_weights(const ModelConfig& cfg, const PlanRequest& req) {
  PlanWeights w;
  if (req.weights) {
    w.report = req.weights;
    w.source = req.weights_source;
    w.how = req.weights_how;
    w.incomplete = req.incomplete_checkpoint;
    if (req.budget.weights_gib) {
      w.source = WeightsSource::flag;
      w.how = "--weights-gib " + format_general(*req.budget.weights_gib);
    }
    return w;
  }
  WeightsOptions wo;
  wo.list_tensors = false;
  WeightsReport derived = compute_weights(cfg, wo);
  const auto from_config = [&] {
    w.source = WeightsSource::config;
    w.how = derived.known ? (derived.estimated()
                                 ? "derived from config.json (some parts estimated: " + derived.estimated_reason() + ")"
                                 : "derived from config.json")
                          : "config.json names a scheme not known: " + derived.reason;
    w.report = std::make_shared<const WeightsReport>(std::move(derived));
  };
  if (req.deploy.read_checkpoint_files && has_checkpoint_files(cfg.model_dir)) {
    const CheckpointFiles files = read_checkpoint_files(cfg.model_dir);
    FileWeights fw = weights_from_files(cfg, files, derived);
    std::string incomplete = files.incomplete_reason();
    if (incomplete.empty()) incomplete = fw.shortfall_reason();
    if (incomplete.empty()) {
      w.report = std::make_shared<const WeightsReport>(std::move(fw.report));
      fw.report = WeightsReport{};  // the report lives in Fit::weights; FileWeights keeps the comparison
      w.source = WeightsSource::files;
      w.how = std::to_string(files.files.size()) + " safetensors header" + (files.files.size() == 1 ? "" : "s") +
              " in " + cfg.model_dir;
      w.files = std::move(fw);
    } else {
      // A partial download is not the checkpoint: the config's contract stands in for it.
      auto ic = std::make_shared<IncompleteCheckpoint>();
      ic->dir = cfg.model_dir;
      ic->reason = std::move(incomplete);
      ic->missing = files.missing;
      ic->missing_count = files.missing_count;
      ic->expected_files = files.expected_files;
      ic->missing_tensors = files.missing_tensors;
      ic->files = static_cast<std::int64_t>(files.files.size());
      ic->files_tensors = static_cast<std::int64_t>(files.tensors.size());
      ic->files_bytes = files.tensor_bytes;
      ic->index_total_size = files.index_total_size;
      ic->contract_exact_main_bytes = fw.contract_exact_main_bytes;
      from_config();
      w.how += "; the checkpoint in " + cfg.model_dir + " is incomplete (" +
               (files.complete()
                    ? std::string("tensors missing")
                    : std::to_string(files.missing_count) + " of " +
                          std::to_string(std::max(files.expected_files, files.missing_count)) + " shards missing") +
               "), its files are not used";
      w.incomplete = std::move(ic);
    }
  } else {
    from_config();
  }
  if (req.budget.weights_gib) {
    w.source = WeightsSource::flag;
    w.how = "--weights-gib " + format_general(*req.budget.weights_gib);
  }
  return w;
}

namespace {

/// The layers a stage's GPUs run: its backbone layers, and the draft stages on the last one.
std::int64_t stage_layers(const RankWeights& rw, const Layout& L, const ModelConfig& cfg, bool speculative) {
  std::int64_t n = rw.last_layer - rw.first_layer + 1;
  if (speculative && rw.stage + 1 == static_cast<std::int64_t>(L.parallel.stages.size())) n += cfg.num_draft_layers;
  return n;
}

/// The margin's stated uncertainty (docs/fit.md, "The margin"): an estimated budget term may be off
/// by half of itself (real logs put the activation and non-torch terms 1-3 GiB away from the
/// estimate at 4-16K batched tokens), and a GPU total that is the vendor's figure by 5% of the
/// requested memory (runtime totals fall 1-8% below the vendor's: ../shared/docs/gpu-memory.md).
constexpr long double kEstimateUncertainty = 0.5L;
constexpr long double kTotalUncertainty = 0.05L;
/// A weight part derived from config.json on an uncertain rule (docs/weights.md: a tensor's shape
/// or dtype read from a related checkpoint) by a tenth of itself.
constexpr long double kWeightPartUncertainty = 0.1L;

/// The release of --vllm-version (the newest when not given).
const VllmRelease& plan_release(const PlanRequest& req) { return vllm_release_or_newest(req.deploy.vllm_version); }

/// The V2 model runner: the release's default for DeepSeek's MoE models, or forced by DSpark
/// speculation (which only the V2 runner runs).
bool runs_v2(const ModelConfig& cfg, const Layout& L, const VllmRelease& release) {
  const bool dspark = L.num_speculative_tokens > 0 && draft_method(cfg) == DraftMethod::dspark;
  return release.model_runner_v2 || dspark;
}

struct FitCore {
  Placement placement;
  std::vector<StageFit> stages;
  VllmKvNumbers vllm;
  bool fits = false;
  std::string error_message;
};

FitCore fit_core(const ModelConfig& cfg, const Layout& L, const WeightsReport& weights,
                 const std::vector<ShardKind>& kinds, const ParallelLayout& pl, const std::vector<VllmKvConfig>& kvs,
                 const PlanRequest& req, const std::string& weights_how, TermSource weights_source) {
  FitCore c;
  const VllmRelease& release = plan_release(req);
  const bool model_runner_v2 = runs_v2(cfg, L, release);
  const bool memo = req.placements && req.weights.get() == &weights && req.shard_kinds &&
                    req.shard_kinds->size() == weights.groups.size() && req.shard_kinds.get() == &kinds;
  c.placement = memo ? req.placements->place(cfg, weights, pl, kinds) : place_weights(cfg, weights, pl, kinds);
  // The kernel head count is the backend's (placement pads for FlashMLA).
  c.placement.padded_query_heads = padded_heads(L.backend, c.placement.local_query_heads).value_or(0);
  std::vector<std::int64_t> avail;
  const std::int64_t nst = static_cast<std::int64_t>(c.placement.stages.size());
  for (std::int64_t s = 0; s < nst; ++s) {
    StageFit sf;
    sf.weights = c.placement.stages[static_cast<std::size_t>(s)];
    BudgetShape sh;
    sh.weights_bytes = sf.weights.total_bytes;
    sh.weights_source = weights_source;
    sh.weights_how = weights_how + ", placed for TP " + std::to_string(pl.tensor_parallel_size) + " x DP " +
                     std::to_string(pl.data_parallel_size) +
                     (pl.pipeline_parallel_size > 1 ? " x PP " + std::to_string(pl.pipeline_parallel_size) : "") +
                     (pl.expert_parallel_size() > 1 ? ", EP " + std::to_string(pl.expert_parallel_size()) : "");
    sh.layers = stage_layers(sf.weights, L, cfg, pl.load_draft_stages);
    sh.local_heads = c.placement.local_query_heads;
    sh.tensor_parallel_size = pl.tensor_parallel_size;
    sh.data_parallel_size = pl.data_parallel_size;
    sh.max_num_batched_tokens = L.in_flight_tokens;
    sh.max_num_seqs = req.deploy.max_num_seqs.value_or(default_max_num_seqs(L.target));
    sh.num_speculative_tokens = L.num_speculative_tokens;
    sh.last_stage = s + 1 == nst;
    sh.expert_parallel_size = pl.expert_parallel_size();
    sh.max_model_len = L.max_model_len;
    sh.release = &release;
    sh.model_runner_v2 = model_runner_v2;
    sf.budget = plan_budget(cfg, L.target, sh, req.budget);
    sf.kv = kvs[static_cast<std::size_t>(s)];
    avail.push_back(sf.budget.available_bytes);
    c.stages.push_back(std::move(sf));
  }
  c.vllm = vllm_kv_numbers(kvs, avail);
  c.fits = c.placement.ok() && c.vllm.fits;
  c.error_message = c.vllm.error_message;
  // vLLM takes --kv-cache-memory-bytes as given; the allocation fails when it and the rest exceed the GPU.
  for (const auto& st : c.stages) {
    const Budget& b = st.budget;
    if (!c.fits || !b.explicit_kv_bytes) continue;
    const std::int64_t used = checked_add(b.non_kv_bytes, b.available_bytes, "the memory budget");
    if (used > b.total_bytes) {
      c.fits = false;
      c.error_message = "--kv-cache-memory-bytes " + std::to_string(b.available_bytes) + " (" +
                        format_gib(b.available_bytes) + ") with " + format_gib(b.non_kv_bytes) +
                        " of weights and start-up overheads needs " + format_gib(used) + " per GPU" +
                        (c.stages.size() > 1 ? " on stage " + std::to_string(st.weights.stage) : "") +
                        ", more than the " + format_gib(b.total_bytes) + " of " + L.target.id +
                        " (vLLM does not check this; the allocation would fail)";
    }
  }
  return c;
}

std::vector<std::string> layout_flag_args(const ParallelLayout& pl) {
  std::vector<std::string> a = {"--tp", std::to_string(pl.tensor_parallel_size)};
  if (pl.data_parallel_size > 1) a.insert(a.end(), {"--dp", std::to_string(pl.data_parallel_size)});
  if (pl.pipeline_parallel_size > 1) a.insert(a.end(), {"--pp", std::to_string(pl.pipeline_parallel_size)});
  if (pl.enable_expert_parallel) a.emplace_back("--enable-expert-parallel");
  if (pl.engram == EngramPlacement::gpu) a.insert(a.end(), {"--engram", "gpu"});
  return a;
}

std::string joined(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

/// What would fit instead, when the request does not.
/// What would fit instead, when the request does not: the words, and each one's flags in `flags`.
std::vector<std::string> suggestions(const ModelConfig& cfg, const Layout& L, const WeightsReport& weights,
                                     const std::vector<ShardKind>& kinds, const ParallelLayout& given,
                                     const std::vector<VllmKvConfig>& kvs, const FitCore& core, const PlanRequest& req,
                                     const std::string& how, TermSource wsrc,
                                     std::vector<std::vector<std::string>>& flags) {
  std::vector<std::string> out;
  // 1. The largest max_model_len this budget holds.
  if (core.placement.ok() && core.vllm.estimated_max_model_len > 0 &&
      core.vllm.estimated_max_model_len < L.max_model_len) {
    out.push_back("--max-model-len " + std::to_string(core.vllm.estimated_max_model_len) +
                  " (the longest vLLM would accept on this layout)");
    flags.push_back({"--max-model-len", std::to_string(core.vllm.estimated_max_model_len)});
  }
  // 2. The gpu_memory_utilization that would hold one request of max_model_len.
  if (core.placement.ok() && !req.budget.kv_cache_memory_bytes) {
    const auto& lim = core.stages[static_cast<std::size_t>(core.vllm.limiting_stage)];
    const auto& kv = lim.kv;
    const long double need =
        static_cast<long double>(lim.budget.non_kv_bytes) +
        static_cast<long double>(kv.blocks_per_request + 1) * static_cast<long double>(kv.bytes_per_block);
    const long double u = need / static_cast<long double>(lim.budget.total_bytes);
    const double up = std::ceil(static_cast<double>(u) * 100.0) / 100.0;
    if (up <= 1.0 && up > lim.budget.gpu_memory_utilization) {
      out.push_back("--gpu-memory-utilization " + format_fixed(up, 2) + " (needs " +
                    format_gib(static_cast<std::int64_t>(need)) + " of " + format_gib(lim.budget.total_bytes) + ")");
      flags.push_back({"--gpu-memory-utilization", format_fixed(up, 2)});
    }
  }
  // 3. The fewest GPUs of this kind that hold it at this max_model_len (expert parallel on,
  // the pipeline size kept: it decides the KV layout of every stage).
  // A GPU of the largest stage holds at least the stage average, which is at least
  // (R + (S + E) / GPUs per stage) / PP: a count whose bound exceeds what vLLM requests is skipped
  // without placing anything, and once R / PP alone exceeds it no count can help.
  const std::int64_t heads = cfg.num_attention_heads;
  const Placement& p0 = core.placement;
  const long double requested = static_cast<long double>(core.stages.front().budget.requested_bytes);
  const long double pp = static_cast<long double>(given.pipeline_parallel_size);
  const long double R = static_cast<long double>(p0.replicated_bytes);
  const long double SE = static_cast<long double>(p0.tensor_bytes) + static_cast<long double>(p0.expert_bytes);
  const bool explicit_kv = core.stages.front().budget.explicit_kv_bytes;
  for (std::int64_t gpus = given.pipeline_parallel_size; gpus <= kMaxSuggestedGpus * given.pipeline_parallel_size;
       gpus *= 2) {
    const std::int64_t per_pp = gpus / given.pipeline_parallel_size;
    if (!explicit_kv && !req.budget.weights_gib) {
      if (R / pp > requested) break;
      if ((R + SE / static_cast<long double>(per_pp)) / pp > requested) continue;
    }
    std::optional<ParallelLayout> best;
    double best_conc = -1.0;
    for (std::int64_t tp = 1; tp <= per_pp; tp *= 2) {
      if (heads % tp != 0) continue;
      ParallelLayout pl = given;
      pl.tensor_parallel_size = tp;
      pl.data_parallel_size = per_pp / tp;
      pl.enable_expert_parallel = pl.tensor_parallel_size * pl.data_parallel_size > 1;
      pl.local_query_heads = heads / tp;
      // A TP whose heads per rank the backend does not run (backend.query_heads) is no fix.
      const auto padded = padded_heads(L.backend, pl.local_query_heads);
      if (!padded) continue;
      pl.padded_query_heads = *padded;
      if (pl.tensor_parallel_size == given.tensor_parallel_size && pl.data_parallel_size == given.data_parallel_size &&
          pl.enable_expert_parallel == given.enable_expert_parallel) {
        continue;
      }
      FitCore c;
      try {
        c = fit_core(cfg, L, weights, kinds, pl, kvs, req, how, wsrc);
      } catch (const Error&) {
        continue;
      }
      if (!c.fits) continue;
      const double conc = c.vllm.concurrency * static_cast<double>(pl.data_parallel_size);
      if (conc > best_conc) {
        best_conc = conc;
        best = pl;
      }
    }
    if (best) {
      out.push_back(joined(layout_flag_args(*best)) + " (" + std::to_string(best->gpus()) + " GPUs: the fewest " +
                    L.target.id + " that hold it, " + format_fixed(best_conc, 2) + "x concurrency)");
      flags.push_back(layout_flag_args(*best));
      break;
    }
  }
  return out;
}

/// "65,536 requests x 100,000 tokens", "3 requests of 100-4,096 tokens", with " + 2 speculative
/// tokens each".
std::string batch_words(const DecodeBatch& b) {
  const auto& lens = b.context_lens;
  const auto [mn, mx] = std::minmax_element(lens.begin(), lens.end());
  const auto n = static_cast<std::int64_t>(lens.size());
  std::string s = format_grouped(n) + (n == 1 ? " request" : " requests");
  s += *mn == *mx ? " x " + format_grouped(*mn) + " tokens"
                  : " of " + format_grouped(*mn) + "-" + format_grouped(*mx) + " tokens";
  if (b.spec_tokens > 0) {
    s += " + " + std::to_string(b.spec_tokens) +
         (b.spec_tokens == 1 ? " speculative token each" : " speculative tokens each");
  }
  return s;
}

/// The warning fit.decode_batch for a batch that does not fit (guard.decode_batch, an error, with
/// --require-batch-fits).
Finding decode_batch_finding(const Plan& p, const BatchKvFit& bf, bool guard) {
  const Fit& f = *p.fit;
  const auto& lens = p.batch.context_lens;
  const bool uniform = std::all_of(lens.begin(), lens.end(), [&](std::int64_t v) { return v == lens.front(); });
  std::string msg =
      std::string(p.batch.defaulted ? "the default decode batch, " : "the decode batch, ") + batch_words(p.batch) +
      " (" + format_grouped(bf.tokens) + " tokens of history), does not fit " +
      (f.engines > 1
           ? "one engine's GPU KV cache (each of the " + std::to_string(f.engines) + " DP engines has its own)"
           : std::string("the GPU KV cache")) +
      ": it needs " + format_grouped(bf.blocks) + " blocks at once and the cache has " +
      format_grouped(bf.usable_blocks) + " (vLLM's GPU KV cache size: " + format_grouped(bf.cache_tokens) +
      " tokens, for requests of " + format_grouped(f.vllm.max_model_len) + " tokens); ";
  std::string fix;
  if (uniform) {
    msg += format_grouped(bf.requests_that_fit) + (bf.requests_that_fit == 1 ? " request" : " requests") + " of " +
           format_grouped(lens.front()) + " tokens fit at once";
    fix = "--batch " + std::to_string(bf.requests_that_fit) +
          " or fewer, shorter requests, or a larger KV cache (more GPUs, --gpu-memory-utilization)";
  } else {
    msg += format_grouped(bf.requests_that_fit) + " of its " + format_grouped(bf.requests) +
           " requests fit at once, the shortest first";
    fix = "at most " + std::to_string(bf.requests_that_fit) +
          " of these requests in --context-lens, shorter requests, or a larger KV cache (more GPUs, "
          "--gpu-memory-utilization)";
  }
  return Finding{guard ? "guard.decode_batch" : "fit.decode_batch", guard ? Severity::error : Severity::warning, msg,
                 "", fix};
}

/// The prefill transient of every stage's GPUs, when the fit has a KV cache to compare with.
std::optional<PrefillFit> plan_prefill(const ModelConfig& cfg, const Topology& topo, const Fit& f, const Layout& L,
                                       const PlanRequest& req) {
  if (!f.decided || !f.fits || !f.placement.ok() || f.stages.empty()) return std::nullopt;
  std::vector<PrefillStage> stages;
  const auto nst = static_cast<std::int64_t>(f.stages.size());
  for (std::int64_t s = 0; s < nst; ++s) {
    const StageFit& st = f.stages[static_cast<std::size_t>(s)];
    PrefillStage ps;
    ps.stage = st.weights.stage;
    ps.shape = indexer_workspace_shape(cfg, topo, req.prefill, L.parallel.decode_context_parallel_size,
                                       st.weights.first_layer, st.weights.last_layer, f.speculative && s + 1 == nst);
    ps.total_bytes = st.budget.total_bytes;
    ps.requested_bytes = st.budget.requested_bytes;
    const std::int64_t kv = checked_mul(f.vllm.num_blocks, st.kv.bytes_per_block, "the KV cache");
    ps.budgeted_bytes = checked_add(st.budget.non_kv_bytes, kv, "the memory budget");
    stages.push_back(std::move(ps));
  }
  return fit_prefill(stages, L.in_flight_tokens, L.max_model_len);
}

/// The warning fit.prefill_transient (guard.prefill_transient, an error, with --require-prefill-fits).
Finding prefill_finding(const PrefillFit& pf, bool guard) {
  std::string msg =
      "the sparse indexer's transient prefill workspace at max_model_len " + format_grouped(pf.max_model_len) + " is " +
      format_gib(pf.peak_bytes) + " per GPU (" + format_grouped(std::min(pf.chunk_tokens, pf.max_model_len)) +
      "-token chunk x " + format_grouped(pf.entries) + " entries, layer " + std::to_string(pf.peak_layer) + "; " +
      pf.engine + "), more than the " + format_gib(pf.headroom_bytes) +
      " the budget leaves of the GPU; the longest prompt that fits is " + format_grouped(pf.longest_prompt) + " tokens";
  std::string fix = pf.safe_chunk > 0
                        ? "--max-num-batched-tokens " + std::to_string(pf.safe_chunk) + " or fewer, --max-model-len " +
                              std::to_string(pf.longest_prompt) + ", or a lower --gpu-memory-utilization"
                        : "--max-model-len " + std::to_string(pf.longest_prompt) +
                              " or a lower --gpu-memory-utilization (one row of scores is wider "
                              "than the headroom: no chunk size helps)";
  return Finding{guard ? "guard.prefill_transient" : "fit.prefill_transient",
                 guard ? Severity::error : Severity::warning, msg, "", fix};
}

/// How a guard's failure is recorded: its finding (an error), exit 4 unless a worse code is set.
using GuardFail = std::function<void(Finding)>;

/// One guard of `check` (PlanGuards): the flag that sets it, whether the request gives it, and its
/// test of the plan. A new guard is one entry here plus its PlanGuards field and its flag.
struct GuardEntry {
  std::string_view flag;
  bool (*given)(const PlanGuards& g);
  void (*check)(Plan& p, const PlanGuards& g, const GuardFail& fail);
};

const GuardEntry kGuards[] = {
    {"--max-global-bytes-per-token", [](const PlanGuards& g) { return g.max_global_bytes_per_token.has_value(); },
     [](Plan& p, const PlanGuards& g, const GuardFail& fail) {
       const auto& a = p.layout->accounting;
       const auto& measured = g.guard_rows ? a.global_rows : a.global_pages;
       if (measured.value() > *g.max_global_bytes_per_token) {
         fail(Finding{"guard.global_bytes_per_token",
                      Severity::error,
                      "global bytes per token " + measured.str() + " (" + (g.guard_rows ? "rows" : "pages") +
                          " accounting) exceeds the limit " + format_general(*g.max_global_bytes_per_token),
                      {},
                      {}});
       }
     }},
    {"--require-batch-fits", [](const PlanGuards& g) { return g.batch_fits; },
     [](Plan& p, const PlanGuards&, const GuardFail& fail) {
       if (!p.fit) return;
       if (!p.fit->decided) {
         fail(Finding{"guard.decode_batch",
                      Severity::error,
                      "--require-batch-fits cannot be checked: " + p.fit->verdict,
                      {},
                      {}});
       } else if (p.batch_fit && !p.batch_fit->fits) {
         // The warning becomes the guard's error.
         auto& fs = p.findings;
         fs.erase(std::remove_if(fs.begin(), fs.end(), [](const Finding& f) { return f.id == "fit.decode_batch"; }),
                  fs.end());
         fail(decode_batch_finding(p, *p.batch_fit, true));
       }
     }},
    {"--prefix-hit-prompt-len", [](const PlanGuards& g) { return g.prefix_hit_prompt_len.has_value(); },
     [](Plan& p, const PlanGuards& g, const GuardFail& fail) {
       if (!p.fit) return;
       const std::int64_t n = *g.prefix_hit_prompt_len;
       if (!p.fit->prefix_cache) {
         fail(Finding{
             "guard.prefix_hit",
             Severity::error,
             "--prefix-hit-prompt-len " + std::to_string(n) + " cannot be checked: the layout has no KV-cache group",
             {},
             {}});
       } else if (const PrefixCachePlan& pc = *p.fit->prefix_cache; pc.rule.min_hit_prompt_len > n) {
         const PrefixHitRule& r = pc.rule;
         fail(Finding{
             "guard.prefix_hit",
             Severity::error,
             "a prompt of " + format_grouped(n) + " tokens never hits vLLM's prefix cache: the shortest that can is " +
                 format_grouped(r.min_hit_prompt_len) + " tokens (hits are multiples of the scheduler block, " +
                 format_grouped(r.scheduler_block_size) + " tokens" +
                 (r.eagle_drop_tokens > 0 ? ", and the draft's group matches " + format_grouped(r.eagle_drop_tokens) +
                                                " tokens past the hit and drops them"
                                          : std::string()) +
                 "; the last token is always recomputed)",
             {},
             "a smaller --block-size where the backend takes one, or no speculative decoding"});
       }
     }},
    {"--min-offload-tokens", [](const PlanGuards& g) { return g.min_offload_tokens.has_value(); },
     [](Plan& p, const PlanGuards& g, const GuardFail& fail) {
       if (!p.fit) return;
       const std::int64_t n = *g.min_offload_tokens;
       const auto& ho = p.fit->host_offload;
       const std::string flag = "--min-offload-tokens " + std::to_string(n);
       if (!ho || !ho->size_gib) {
         fail(Finding{"guard.offload_tokens",
                      Severity::error,
                      flag + " cannot be checked: no host tier (give --kv-offloading-size GiB)",
                      {},
                      "--kv-offloading-size"});
       } else if (!ho->refusal.empty()) {
         fail(Finding{"guard.offload_tokens",
                      Severity::error,
                      flag + ": vLLM's offloading connector refuses this layout (" + ho->refusal + ")",
                      {},
                      {}});
       } else if (!ho->tokens_held) {
         fail(Finding{
             "guard.offload_tokens",
             Severity::error,
             flag + " cannot be checked: the layout has no full-attention group whose history the host tier holds",
             {},
             {}});
       } else if (*ho->tokens_held < n) {
         fail(Finding{"guard.offload_tokens",
                      Severity::error,
                      "--kv-offloading-size " + format_general(*ho->size_gib) + " holds " +
                          format_grouped(*ho->tokens_held) + " tokens of history (" + format_grouped(*ho->host_slots) +
                          " host blocks of " + format_grouped(ho->slot_bytes) + " B), below the minimum " +
                          format_grouped(n),
                      {},
                      "a larger --kv-offloading-size"});
       }
     }},
    {"--require-prefill-fits", [](const PlanGuards& g) { return g.prefill_fits; },
     [](Plan& p, const PlanGuards&, const GuardFail& fail) {
       if (!p.fit) return;
       if (!p.fit->decided || !p.fit->fits) {
         fail(Finding{"guard.prefill_transient",
                      Severity::error,
                      "--require-prefill-fits cannot be checked: " + p.fit->verdict,
                      {},
                      {}});
       } else if (p.prefill && !p.prefill->fits) {
         auto& fs = p.findings;
         fs.erase(
             std::remove_if(fs.begin(), fs.end(), [](const Finding& f) { return f.id == "fit.prefill_transient"; }),
             fs.end());
         fail(prefill_finding(*p.prefill, true));
       }
     }},
    {"--require-prompt-len", [](const PlanGuards& g) { return g.prompt_len.has_value(); },
     [](Plan& p, const PlanGuards& g, const GuardFail& fail) {
       if (!p.fit) return;
       const std::int64_t n = *g.prompt_len;
       const std::string flag = "--require-prompt-len " + std::to_string(n);
       if (!p.fit->decided || !p.fit->fits) {
         fail(Finding{"guard.prompt_len", Severity::error, flag + " cannot be checked: " + p.fit->verdict, {}, {}});
       } else if (n > p.layout->max_model_len) {
         fail(Finding{"guard.prompt_len",
                      Severity::error,
                      flag + ": the prompt is longer than max_model_len " + format_grouped(p.layout->max_model_len) +
                          " (vLLM refuses it)",
                      {},
                      "--max-model-len " + std::to_string(n)});
       } else if (p.prefill) {
         const PrefillFit& pf = *p.prefill;
         const std::int64_t peak = indexer_transient(pf.shape, n, pf.chunk_tokens);
         if (peak > pf.headroom_bytes) {
           fail(Finding{
               "guard.prompt_len",
               Severity::error,
               flag + ": the sparse indexer's transient prefill workspace of a " + format_grouped(n) +
                   "-token prompt is " + format_gib(peak) + " per GPU, more than the " + format_gib(pf.headroom_bytes) +
                   " the budget leaves (" + pf.engine + "); the longest prompt that fits is " +
                   format_grouped(pf.longest_prompt) + " tokens",
               {},
               pf.safe_chunk > 0 ? "--max-num-batched-tokens " + std::to_string(pf.safe_chunk) + " or fewer" : ""});
         }
       }
     }},
    {"--min-concurrency", [](const PlanGuards& g) { return g.min_concurrency.has_value(); },
     [](Plan& p, const PlanGuards& g, const GuardFail& fail) {
       if (!p.fit) return;
       const Fit& f = *p.fit;
       if (!f.decided) {
         fail(Finding{"guard.concurrency",
                      Severity::error,
                      "--min-concurrency " + format_general(static_cast<double>(*g.min_concurrency)) +
                          " cannot be checked: " + f.verdict,
                      {},
                      {}});
       } else if (!(f.total_concurrency >= static_cast<double>(*g.min_concurrency))) {
         fail(Finding{"guard.concurrency",
                      Severity::error,
                      "vLLM's maximum concurrency for " + format_grouped(p.layout->max_model_len) +
                          " tokens per request on " + p.target.id + " is " + format_fixed(f.total_concurrency, 2) +
                          "x" + (f.engines > 1 ? " (" + std::to_string(f.engines) + " engines)" : "") +
                          ", below the minimum " + format_general(static_cast<double>(*g.min_concurrency)),
                      {},
                      {}});
       }
     }},
    {"--require-margin-gib", [](const PlanGuards& g) { return g.margin_gib.has_value(); },
     [](Plan& p, const PlanGuards& g, const GuardFail& fail) {
       if (!p.fit) return;
       const Fit& f = *p.fit;
       const std::string flag = "--require-margin-gib " + format_general(*g.margin_gib);
       if (!f.margin) {
         fail(Finding{"guard.margin", Severity::error, flag + " cannot be checked: " + f.verdict, {}, {}});
       } else if (static_cast<double>(f.margin->spare_bytes) < *g.margin_gib * 1073741824.0) {
         fail(Finding{"guard.margin",
                      Severity::error,
                      flag + ": the fit has " + format_gib(f.margin->spare_bytes) +
                          " to spare on the limiting GPU (its estimated terms sum to " +
                          format_gib(f.margin->estimated_bytes) + ", uncertain by about " +
                          format_gib(f.margin->uncertainty_bytes) + ")",
                      {},
                      "a smaller --max-model-len, or more GPUs"});
       }
     }},
};

}  // namespace

std::vector<std::string> given_guard_flags(const PlanGuards& g) {
  std::vector<std::string> flags;
  for (const auto& guard : kGuards) {
    if (guard.given(g)) flags.emplace_back(guard.flag);
  }
  if (g.guard_rows) flags.emplace_back("--guard-accounting");
  return flags;
}

namespace {

void apply_guards(Plan& p, const PlanGuards& g) {
  if (!p.layout) return;
  const GuardFail fail = [&](Finding f) {
    if (p.exit_code == 0) p.exit_message = f.message;
    p.findings.push_back(std::move(f));
    p.exit_code = combine_exit_codes(p.exit_code, exit_code(ErrorKind::does_not_fit));
  };
  for (const auto& guard : kGuards) {
    if (guard.given(g)) guard.check(p, g, fail);
  }
}

/// SGLang's start-up for the plan's GPUs and layout (--engine sglang | all): the weights placed as
/// SGLang loads them (Engram on the GPU unless its host table is on, replicas without DP attention
/// each a whole TP group, no MXFP4 padding: SGLang's SM90 MXFP4 path runs Marlin where vLLM's
/// kernels pad), then sglang_fit().
void plan_sglang(Plan& p, const ModelConfig& config, const Topology& topology, const PlanRequest& req) {
  const SglangOptions& o = req.sglang;
  const ParallelLayout& vl = p.layout->parallel;
  SglangInput in;
  in.dp_size = vl.data_parallel_size;
  in.tp_size = o.enable_dp_attention ? checked_mul(vl.tensor_parallel_size, vl.data_parallel_size, "--tp-size")
                                     : vl.tensor_parallel_size;
  in.pp_size = vl.pipeline_parallel_size;
  in.ep_size = vl.enable_expert_parallel ? in.tp_size : 1;
  in.context_len = p.layout->max_model_len;
  in.load_overhead_gib = req.budget.load_overhead_gib;
  const WeightsReport& weights = *p.fit->weights;
  in.weights_known = weights.known;
  if (req.budget.weights_gib) {
    in.weights_bytes = static_cast<std::int64_t>(*req.budget.weights_gib * static_cast<double>(std::int64_t{1} << 30));
    in.weights_given = true;
    in.weights_how = "--weights-gib";
  } else {
    ParallelLayout sl = vl;
    sl.engram = o.engram_host_table ? EngramPlacement::offload : EngramPlacement::gpu;
    if (!o.enable_dp_attention) sl.data_parallel_size = 1;  // replicas: each a whole TP group
    const Placement placed = place_weights(config, weights, sl, shard_kinds(weights, sl.engram));
    std::int64_t most = 0;
    for (const RankWeights& r : placed.stages) most = std::max(most, r.total_bytes - r.expert_padding_bytes);
    in.weights_bytes = most;
    for (const RankWeights& r : placed.stages) {
      in.engram_bytes = std::max(in.engram_bytes, r.part_bytes[static_cast<std::size_t>(WeightPart::engram)]);
    }
    in.weights_how = p.fit->weights_how + ", placed for SGLang's TP " + std::to_string(in.tp_size) +
                     (o.enable_dp_attention ? " with DP attention " + std::to_string(in.dp_size) : std::string()) +
                     (config.family == Family::deepseek_v41
                          ? (o.engram_host_table ? ", Engram tables on the host" : ", Engram tables on the GPU")
                          : std::string()) +
                     (sl.load_draft_stages ? ", draft weights included" : std::string());
  }
  p.sglang_input = in;
  p.sglang = sglang_fit(config, topology, p.target, in, o);
}

void plan_into(Plan& p, const ModelConfig& config, const Topology& topology, const PlanRequest& req) {
  p.target = req.resolved_target ? *req.resolved_target : resolve_target(req.target);
  LayoutOptions layout_options = req.layout;
  layout_options.num_speculative_tokens = req.batch.spec_tokens;
  // The release decides which backends vLLM has and picks by default (release.hpp).
  layout_options.release = backend_release_rules(plan_release(req));
  // The request is resolved once: the rules' resolution is what the layout, the placement, the
  // budget and the fit are built from. A usage error stops the plan here and nowhere else.
  RulesVerdict verdict = judge_request(config, topology, p.target, RuleOptions{req.dtype, layout_options});
  throw_first_usage_error(verdict.results);
  p.rules = std::move(verdict.results);
  p.kernel_shapes = std::move(verdict.shapes);
  p.findings = config.findings;
  for (const auto& rr : p.rules) p.findings.push_back(rr.finding);

  p.layout = plan_layout(config, topology, p.target, verdict.resolution);
  PlanWeights w = load_plan_weights(config, req);
  // A target no backend of the family runs on: vLLM stops before it budgets memory. No fit, and no
  // "would fit" on more of the same GPU (so none is searched for).
  const auto no_backend = std::find_if(p.rules.begin(), p.rules.end(), [](const RuleResult& rr) {
    return rr.finding.severity == Severity::error && rr.finding.id == "backend.arch";
  });
  // A rule that refuses the configuration leaves no fit to improve on: no "would fit" is searched.
  const bool rules_refuse = std::any_of(p.rules.begin(), p.rules.end(),
                                        [](const RuleResult& rr) { return rr.finding.severity == Severity::error; });
  PlanRequest fit_req = req;
  if (rules_refuse) fit_req.suggestions = false;
  p.fit = plan_fit(config, topology, *p.layout, std::move(w.report), w.source, w.how, fit_req);
  if (no_backend != p.rules.end()) {
    Fit& f = *p.fit;
    f.decided = false;
    f.fits = false;
    f.no_backend = true;
    f.verdict = "not decided: no attention backend runs this model on " + p.target.id + " (" +
                no_backend->finding.message + ")";
    f.error_message = f.verdict;
  }
  // The engine's pages: each window sized for the reserve its KV planner keeps (R).
  if (!p.fit->stages.empty() && p.fit->stages.front().kv.retained_tokens > 0) {
    account_for_engine(*p.layout, p.fit->stages.front().kv.retained_tokens);
  }
  if (w.files) p.fit->files = std::move(w.files);
  p.fit->incomplete_checkpoint = w.incomplete;
  const WeightsReport& wr = *p.fit->weights;
  // What the checkpoint's files say is shown whole (its source, totals, skipped files); of the
  // contract only what is not a note.
  for (const auto& f : wr.findings) {
    if (f.severity != Severity::info || p.fit->weights_source == WeightsSource::files) p.findings.push_back(f);
  }
  if (!wr.known && !req.budget.weights_gib) {
    p.findings.push_back(
        Finding{"weights.unknown", Severity::warning,
                "weights: " + wr.reason + "; pass the model directory with its safetensors files, or --weights-gib", "",
                "--weights-gib"});
  }
  for (const auto& f : p.fit->placement.findings) p.findings.push_back(f);
  if (const auto& m = p.fit->margin; m && m->borderline) {
    p.findings.push_back(Finding{"fit.borderline", Severity::warning,
                                 "borderline fit: " + format_gib(m->spare_bytes) +
                                     " to spare on the limiting GPU, less than the " +
                                     format_gib(m->uncertainty_bytes) + " its estimated terms (" +
                                     format_gib(m->estimated_bytes) + ") may be off by; vLLM may refuse to start",
                                 "",
                                 "measure the terms (--activation-gib, --non-torch-gib, --cudagraph-gib from a "
                                 "start-up log), or leave more room"});
  }
  if (!p.fit->stages.empty()) {  // every stage's budget says the same of its options
    for (const auto& f : p.fit->stages.front().budget.findings) p.findings.push_back(f);
  }
  // vLLM refuses to start on these (KVCacheCoordinator.__init__, the offloading connector's config).
  std::vector<Finding> tier_refusals;
  if (const auto& pc = p.fit->prefix_cache; pc && p.fit->prefix_caching) {
    for (const auto& m : pc->refusals) {
      tier_refusals.push_back(Finding{
          "prefix_cache.refused", Severity::error, "vLLM refuses to start: " + m, "",
          "--prefix-cache-retention-interval 0, or a multiple of " + std::to_string(pc->rule.scheduler_block_size)});
    }
  }
  if (const auto& ho = p.fit->host_offload; ho && ho->size_gib && !ho->refusal.empty()) {
    tier_refusals.push_back(
        Finding{"offload.hash_block", Severity::error,
                "--kv-offloading-size " + format_general(*ho->size_gib) +
                    ": vLLM's offloading connector refuses KV-cache group " + std::to_string(*ho->refused_group) +
                    " (of groups 0.." + std::to_string(ho->groups.size() - 1) +
                    ") at start-up (AssertionError: " + ho->refusal + ")",
                "", "leave out --kv-offloading-size: vLLM's offloading connector does not take this model's groups"});
  }
  if (!p.fit->release_refusal.empty()) {
    tier_refusals.insert(tier_refusals.begin(),
                         Finding{"engine.vllm_version", Severity::error, p.fit->release_refusal, "",
                                 "--vllm-version 0.30.0 or later (" + vllm_release_list() + ")"});
  }
  for (const auto& f : tier_refusals) p.findings.push_back(f);

  // The exit decision: backend rules, then the layout rules of placement, then vLLM's start-up
  // checks of the KV tiers; the fit decides only when none of them refuses.
  int refusal_code = rules_exit_code(p.rules);
  std::string refusal;
  for (const auto& rr : p.rules) {
    if (rr.finding.severity == Severity::error) {
      refusal = rr.finding.message + (rr.finding.fix.empty() ? "" : " (fix: " + rr.finding.fix + ")");
      break;
    }
  }
  if (refusal_code == 0) {
    for (const auto& f : p.fit->placement.findings) {
      if (f.severity == Severity::error) {
        refusal_code = exit_code(ErrorKind::unsupported);
        refusal = f.message;
        break;
      }
    }
  }
  if (refusal_code == 0 && !tier_refusals.empty()) {
    refusal_code = exit_code(ErrorKind::unsupported);
    refusal = tier_refusals.front().message;
  }
  if (refusal_code != 0) {
    // A refusal is not a fit: vLLM does not start, so there is no verdict on its memory (text,
    // JSON, check and the report read these fields).
    Fit& f = *p.fit;
    f.refused = true;
    f.refusal = refusal;
    f.fits = false;
    f.decided = false;
    if (!f.no_backend) f.verdict = "refused: " + refusal;
    f.error_message = f.verdict;
    f.suggestions.clear();
    f.suggestion_flags.clear();
    f.margin.reset();  // no memory verdict: no margin to it
  }

  // A fit-only plan (a search candidate, a sweep point) has no decode batch: it is judged by its fit.
  if (!req.fit_only) {
    p.batch = make_decode_batch(
        req.batch, p.layout->max_model_len,
        p.layout->max_model_len_default ? MaxModelLenSource::config_default : MaxModelLenSource::flag);
  }
  // FlashMLA's tile plans, where the backend runs FlashMLA (the fused path keeps them for its
  // split-KV fallback); FlashInfer's kernels plan their own work.
  const BackendId backend = p.layout->backend;
  const bool flashmla = backend_info(backend).tile_plans || backend == BackendId::flashmla_sparse_dsv41_fused;
  if (req.schedules && flashmla) p.schedules = plan_decode_schedules(config, topology, *p.layout, p.batch);
  // The batch against the KV cache, where the fit says how large the cache is.
  if (!req.fit_only) p.batch_fit = fit_decode_batch(*p.fit, p.batch);
  if (p.batch_fit && !p.batch_fit->fits) p.findings.push_back(decode_batch_finding(p, *p.batch_fit, false));
  // The indexer's transient prefill peak against what the budget leaves of each GPU.
  if (!req.fit_only) p.prefill = plan_prefill(config, topology, *p.fit, *p.layout, req);
  if (p.prefill && !p.prefill->fits) p.findings.push_back(prefill_finding(*p.prefill, false));
  if (p.fit->context_parallel) {
    for (const auto& rr : p.rules) {
      if (rr.finding.severity == Severity::error && rr.finding.id.rfind("backend.dcp_", 0) == 0) {
        p.fit->context_parallel->refused = true;
        p.fit->context_parallel->refusal = rr.finding.message;
        break;
      }
    }
  }

  // The exit decision: the refusal above, else the fit.
  p.exit_code = refusal_code;
  p.exit_message = refusal;
  if (p.exit_code == 0 && !p.fit->fits && p.fit->decided) {
    p.exit_code = exit_code(ErrorKind::does_not_fit);
    p.exit_message = p.fit->error_message;
    // The error that decides the exit is a finding too (text, JSON, report, check).
    std::string fix;
    for (std::size_t i = 0; i < p.fit->suggestions.size(); ++i) fix += (i ? "; or " : "") + p.fit->suggestions[i];
    p.findings.push_back(Finding{"fit.does_not_fit", Severity::error, p.fit->verdict, "", fix});
    if (!p.fit->suggestions.empty()) {
      p.exit_message += " Would fit: ";
      for (std::size_t i = 0; i < p.fit->suggestions.size(); ++i) {
        p.exit_message += (i ? "; or " : "") + p.fit->suggestions[i];
      }
      p.exit_message += ".";
    }
  }
  apply_guards(p, req.guards);
  p.engine = req.engine;
  if (req.engine != EngineChoice::vllm) {
    plan_sglang(p, config, topology, req);
    const SglangFit& sg = *p.sglang;
    for (const auto& warn : sg.warnings) {
      p.findings.push_back(Finding{"sglang.warning", Severity::warning, "SGLang: " + warn, "", ""});
    }
    int code = 0;
    std::string message;
    if (sg.refused) {
      code = exit_code(ErrorKind::unsupported);
      message = "SGLang refuses: " + sg.refusal;
      // What SGLang serves instead.
      std::string fix;
      if (sg.refusal.find("pipeline parallelism") != std::string::npos) {
        fix = "the same GPUs without pipeline parallelism: --tp-size " +
              std::to_string(p.sglang_input->tp_size * p.sglang_input->pp_size) +
              " (or DP attention: --enable-dp-attention --dp-size N)";
      } else if (sg.refusal.find("other than DSpark") != std::string::npos) {
        fix = "--speculative-algorithm DSPARK (V4.1's own drafter), or no speculative decoding";
      } else if (sg.refusal.find("Only EAGLE") != std::string::npos) {
        fix = "--speculative-algorithm EAGLE with --speculative-eagle-topk 1, or DSPARK";
      } else if (sg.refusal.find("attention TP size") != std::string::npos) {
        fix = "a TP size that divides " + std::to_string(config.num_attention_heads) + " heads and " +
              std::to_string(config.checkpoint.o_groups) + " o_groups, or DP attention (--enable-dp-attention)";
      } else if (sg.refusal.find("no DeepseekV41ForCausalLM") != std::string::npos) {
        fix = "--sglang-version G3";
      } else if (sg.refusal.find("two-batch overlap") != std::string::npos) {
        fix = "leave out --enable-two-batch-overlap";
      } else if (sg.refusal.find("HiSparse") != std::string::npos) {
        fix = "leave out --enable-hisparse";
      }
      p.findings.push_back(Finding{"sglang.refused", Severity::error, message, "", fix});
    } else if (!sg.fits && sg.decided) {
      code = exit_code(ErrorKind::does_not_fit);
      message = "SGLang does not start: " + sg.error;
      std::string fix;
      for (std::size_t i = 0; i < sg.suggestions.size(); ++i) fix += (i ? "; or " : "") + sg.suggestions[i];
      p.findings.push_back(Finding{"sglang.does_not_fit", Severity::error, message, "", fix});
    }
    if (req.engine == EngineChoice::sglang) {
      // SGLang's answer decides; vLLM's refusals and fit do not apply to it.
      std::erase_if(p.findings, [](const Finding& f) {
        return f.severity == Severity::error && f.id.rfind("sglang.", 0) != 0 && f.id.rfind("config.", 0) != 0 &&
               f.id.rfind("checkpoint.", 0) != 0;
      });
      p.exit_code = code;
      p.exit_message = message;
    } else if (p.exit_code == 0 && code != 0) {
      p.exit_code = code;
      p.exit_message = message;
    }
  }
  // An incomplete checkpoint is an input that is not whole: exit 2, which outranks 3 and 4
  // (exit_code_severity); the plan above, made with the config's weights, is still printed.
  if (const auto& ic = p.fit->incomplete_checkpoint) {
    Finding f = ic->finding();
    const int code = exit_code(ErrorKind::invalid_config);
    if (combine_exit_codes(p.exit_code, code) == code) {
      p.exit_code = code;
      p.exit_message = f.message + " (fix: " + f.fix + ")";
    }
    p.findings.push_back(std::move(f));
  }
}

}  // namespace

const Placement& PlacementMemo::place(const ModelConfig& cfg, const WeightsReport& weights,
                                      const ParallelLayout& layout, const std::vector<ShardKind>& kinds) {
  if (weights_ == nullptr) {
    weights_ = &weights;
    kinds_ = &kinds;
  } else if (weights_ != &weights || kinds_ != &kinds) {
    throw_internal("PlacementMemo: asked for the placement of other weights");
  }
  auto same = [&layout](const ParallelLayout& p) {
    return p.tensor_parallel_size == layout.tensor_parallel_size && p.data_parallel_size == layout.data_parallel_size &&
           p.pipeline_parallel_size == layout.pipeline_parallel_size &&
           p.enable_expert_parallel == layout.enable_expert_parallel &&
           p.load_draft_stages == layout.load_draft_stages && p.engram == layout.engram &&
           p.language_model_only == layout.language_model_only;
  };
  for (const auto& [p, placed] : placed_) {
    if (same(p)) return placed;
  }
  placed_.emplace_back(layout, place_weights(cfg, weights, layout, kinds));
  return placed_.back().second;
}

std::string_view to_string(EngineChoice e) {
  switch (e) {
    case EngineChoice::vllm: return "vllm";
    case EngineChoice::sglang: return "sglang";
    case EngineChoice::all: return "all";
  }
  return "?";
}

EngineChoice parse_engine_choice(std::string_view text) {
  if (text == "vllm") return EngineChoice::vllm;
  if (text == "sglang") return EngineChoice::sglang;
  if (text == "all") return EngineChoice::all;
  throw_usage("--engine: " + quoted(text) + " is not an engine; allowed: vllm, sglang, all");
}

std::string_view to_string(WeightsSource s) {
  switch (s) {
    case WeightsSource::config: return "config";
    case WeightsSource::files: return "files";
    case WeightsSource::flag: return "flag";
  }
  return "?";
}

Fit plan_fit(const ModelConfig& cfg, const Topology& topo, const Layout& L,
             std::shared_ptr<const WeightsReport> weights_ptr, WeightsSource source, const std::string& weights_how,
             const PlanRequest& req) {
  if (!weights_ptr) throw_internal("plan_fit: no weights");
  const WeightsReport& weights = *weights_ptr;
  Fit f;
  f.weights_source = source;
  f.weights_how = weights_how;
  const VllmRelease& release = plan_release(req);
  f.release = &release;
  f.model_runner_v2 = runs_v2(cfg, L, release);
  f.async_default = !req.deploy.async_scheduling.has_value();
  f.async_scheduling = req.deploy.async_scheduling.value_or(
      release.async_default && !(release.async_off_with_pp && L.parallel.pipeline_parallel_size > 1));
  {
    // VllmConfig.max_concurrent_batches: 2 with async scheduling, 1 without; under pipeline
    // parallelism the pipeline depth, plus one with async scheduling on the V2 runner.
    const std::int64_t pp = L.parallel.pipeline_parallel_size;
    f.batches_in_flight =
        pp > 1 ? pp + (f.async_scheduling && f.model_runner_v2 ? 1 : 0) : (f.async_scheduling ? 2 : 1);
  }
  if (!release.supports_v41 && cfg.family == Family::deepseek_v41) {
    f.release_refusal = "vLLM " + std::string(release.version) +
                        " has no DeepSeek V4.1 model: its definitions are in vLLM 0.30.0 and later (the "
                        "deepseekv41-flash-0909 image before it)";
  }
  f.speculative = L.num_speculative_tokens > 0 && L.include_draft_layers && cfg.num_draft_layers > 0;
  // The layout's parallel layout, as the rules resolved it.
  const ParallelLayout& pl = L.parallel;
  if (pl.load_draft_stages != f.speculative) throw_internal("plan_fit: draft stages and speculative decoding disagree");

  VllmKvOptions ko;
  ko.speculative_decoding = f.speculative;
  ko.async_scheduling = f.async_scheduling;
  ko.batches_in_flight = f.batches_in_flight;
  // A release without V4.1 is refused (release_refusal); its numbers are what 0.30's planner needs.
  ko.generation = f.release_refusal.empty() ? release.planner : VllmKvGeneration::generic_packed;
  ko.max_num_batched_tokens = L.in_flight_tokens;
  // get_kv_cache_configs: every sliding-window spec retains max(0, num_prefill_lookahead_tokens - 1)
  // extra tokens, K - 1 for multi-module MTP and none for DSpark (extra_retained_tokens()).
  if (f.speculative) ko.extra_retained_tokens = extra_retained_tokens(cfg, L.num_speculative_tokens);
  const std::int64_t dcp = pl.decode_context_parallel_size;
  ko.decode_context_parallel_size = dcp;
  const std::vector<VllmKvConfig> kvs = vllm_kv_configs(cfg, topo, L, ko);
  const TermSource wsrc = source == WeightsSource::config && (weights.estimated() || !weights.known)
                              ? TermSource::estimated
                              : TermSource::derived;
  std::vector<ShardKind> own_kinds;
  const bool given_kinds = req.shard_kinds && req.shard_kinds->size() == weights.groups.size();
  if (!given_kinds) own_kinds = shard_kinds(weights, pl.engram);
  const std::vector<ShardKind>& kinds = given_kinds ? *req.shard_kinds : own_kinds;
  FitCore core = fit_core(cfg, L, weights, kinds, pl, kvs, req, weights_how, wsrc);
  if (!release.planner_pinned && f.release_refusal.empty() && !req.fit_only) {
    // Not pinned to this release: the other generation's numbers for the same budget.
    VllmKvOptions other = ko;
    other.generation = ko.generation == VllmKvGeneration::packed_buckets ? VllmKvGeneration::generic_packed
                                                                         : VllmKvGeneration::packed_buckets;
    try {
      std::vector<std::int64_t> avail;
      for (const auto& st : core.stages) avail.push_back(st.budget.available_bytes);
      if (!avail.empty()) f.other_generation = vllm_kv_numbers(vllm_kv_configs(cfg, topo, L, other), avail);
    } catch (const Error&) {
      // The other generation does not take this model (packed buckets refuse V4.1's rings).
    }
  }
  f.engines = pl.data_parallel_size;
  f.total_concurrency = core.vllm.concurrency * static_cast<double>(f.engines);
  f.total_kv_tokens = checked_mul(core.vllm.gpu_kv_cache_tokens, f.engines, "GPU KV cache size");
  // Weights not all known (and not given) decide nothing: the numbers count only what is known.
  f.decided = weights.known || req.budget.weights_gib.has_value();
  f.fits = f.decided && core.fits;
  f.error_message = core.error_message;
  // The weights of the fullest GPU alone beyond its memory: vLLM never gets to the KV cache.
  if (core.placement.ok() && !core.stages.empty() && !req.budget.kv_cache_memory_bytes) {
    const Budget& b0 = core.stages.front().budget;
    const std::int64_t w = core.placement.max_rank_bytes;
    if (w > b0.total_bytes && b0.total_bytes > 0) {
      f.weights_exceed_gpu = true;
      f.error_message = "weights need " + format_gib(w) + " per GPU, " +
                        format_fixed(static_cast<double>(w) / static_cast<double>(b0.total_bytes), 2) + " x the " +
                        format_gib(b0.total_bytes) + " of " + L.target.id +
                        "; vLLM fails while loading the weights (CUDA out of memory)";
    }
  }
  if (f.decided && core.fits && !core.stages.empty()) {
    // The margin, on the limiting stage's GPUs (fit_margin(): docs/fit.md, "The margin").
    const Budget& b = core.stages[static_cast<std::size_t>(core.vllm.limiting_stage)].budget;
    FitMargin m;
    m.spare_bytes = core.vllm.available_bytes - core.vllm.needed_bytes;
    long double uncertain = 0;
    const RankWeights& rank = core.stages[static_cast<std::size_t>(core.vllm.limiting_stage)].weights;
    for (const auto& t : b.terms) {
      if (t.source != TermSource::estimated) continue;
      m.estimated_bytes = checked_add(m.estimated_bytes, t.bytes, "estimated terms");
      if (t.id != "weights") {
        uncertain += kEstimateUncertainty * static_cast<long double>(t.bytes);
        continue;
      }
      // The weights: only their estimated parts on this GPU are uncertain.
      for (std::size_t i = 0; i < rank.part_bytes.size(); ++i) {
        if (weights.main_parts[i].estimated || weights.draft_parts[i].estimated) {
          uncertain += kWeightPartUncertainty * static_cast<long double>(rank.part_bytes[i]);
        }
      }
    }
    if (b.total_source == TermSource::estimated && !b.explicit_kv_bytes) {
      uncertain += kTotalUncertainty * static_cast<long double>(b.requested_bytes);
    }
    m.uncertainty_bytes = static_cast<std::int64_t>(uncertain);
    m.borderline = m.spare_bytes < m.uncertainty_bytes;
    f.margin = m;
  }
  if (!f.decided) {
    f.margin.reset();  // no verdict: no margin to it
    f.verdict = "not decided: the weights are not all known (" + weights.reason +
                "); pass the model directory with its safetensors files, or --weights-gib";
    f.error_message = f.verdict;
  } else if (!core.placement.ok()) {
    f.verdict = "the layout is rejected: see the placement errors";
  } else if (f.fits) {
    f.verdict =
        "fits: " + format_fixed(core.vllm.concurrency, 2) + "x concurrency at max_model_len " +
        format_grouped(L.max_model_len) + " per engine" +
        (f.engines > 1 ? " (" + std::to_string(f.engines) + " engines: " + format_fixed(f.total_concurrency, 2) + "x)"
                       : std::string());
  } else {
    f.verdict = "does not fit: " + f.error_message;
  }
  if (f.decided && !f.fits && req.suggestions) {
    f.suggestions = suggestions(cfg, L, weights, kinds, pl, kvs, core, req, weights_how, wsrc, f.suggestion_flags);
  }
  // The tiers beyond the GPU's working set: the prefix cache and the host offload tier
  // (kv_tiers.hpp), over the same groups.
  f.prefix_caching = req.deploy.prefix_caching;
  if (!kvs.empty() && kvs.front().group_count() > 0) {
    PrefixCacheOptions po;
    po.speculative = f.speculative;
    po.num_speculative_tokens = L.num_speculative_tokens;
    po.multi_module_draft = f.speculative && multi_module_mtp(cfg, L.num_speculative_tokens);
    po.retention_interval = req.deploy.prefix_cache_retention_interval;
    f.prefix_cache = plan_prefix_cache(kvs, po);
    if (f.prefix_caching && f.decided && core.vllm.num_blocks > 0 && f.prefix_cache->cached_blocks_per_prompt > 0) {
      f.prefix_prompts_cached = core.vllm.num_blocks / f.prefix_cache->cached_blocks_per_prompt;
    }
  }
  if (!kvs.empty() && kvs.front().group_count() > 0) {
    f.host_offload = plan_host_offload(kvs, pl.tensor_parallel_size, req.deploy.kv_offloading_size_gib);
  }
  if (dcp > 1 && !req.fit_only) {
    // The same GPUs three ways: the KV cache replicated by plain TP, sharded by DCP, or split by
    // requests over DP attention engines (TP 1, experts over all of them).
    ContextParallelFit cp;
    cp.decode_context_parallel_size = dcp;
    cp.interleave_size = req.layout.cp_kv_cache_interleave_size;
    VllmKvOptions plain = ko;
    plain.decode_context_parallel_size = 1;
    const std::vector<VllmKvConfig> kvs_plain = vllm_kv_configs(cfg, topo, L, plain);
    auto option = [&](std::string label, const ParallelLayout& p, std::int64_t d, const std::vector<VllmKvConfig>& k,
                      const FitCore* given) {
      KvParallelOption o;
      o.label = std::move(label);
      o.tensor_parallel_size = p.tensor_parallel_size;
      o.data_parallel_size = p.data_parallel_size;
      o.decode_context_parallel_size = d;
      o.engines = p.data_parallel_size;
      FitCore c;
      try {
        c = given ? *given : fit_core(cfg, L, weights, kinds, p, k, req, weights_how, wsrc);
      } catch (const Error& e) {
        o.note = e.what();
        return o;
      }
      if (!c.placement.ok()) {
        for (const auto& x : c.placement.findings) {
          if (x.severity == Severity::error) {
            o.note = x.message;
            break;
          }
        }
        return o;
      }
      o.computed = true;
      o.fits = c.fits;
      const VllmKvConfig& kv = k.front();
      o.blocks_per_request = kv.blocks_per_request;
      o.request_bytes = checked_mul(kv.bytes_per_block, kv.blocks_per_request, "KV bytes per request");
      o.num_blocks = c.vllm.num_blocks;
      o.concurrency = c.vllm.concurrency;
      o.total_concurrency = c.vllm.concurrency * static_cast<double>(o.engines);
      if (!c.fits) o.note = c.error_message;
      return o;
    };
    const std::string tp = std::to_string(pl.tensor_parallel_size);
    const std::string dps = pl.data_parallel_size > 1 ? " x DP " + std::to_string(pl.data_parallel_size) : "";
    cp.options.push_back(option("TP " + tp + dps + " (the cache whole on every rank)", pl, 1, kvs_plain, nullptr));
    cp.options.push_back(
        option("TP " + tp + dps + " x DCP " + std::to_string(dcp) + " (full caches sharded over the DCP group)", pl,
               dcp, kvs, &core));
    ParallelLayout dp_attention = pl;
    dp_attention.tensor_parallel_size = 1;
    dp_attention.data_parallel_size = checked_mul(pl.tensor_parallel_size, pl.data_parallel_size, "DP size");
    dp_attention.enable_expert_parallel = dp_attention.data_parallel_size > 1;
    dp_attention.local_query_heads = cfg.num_attention_heads;
    dp_attention.padded_query_heads = padded_heads(L.backend, cfg.num_attention_heads).value_or(0);
    cp.options.push_back(option("DP attention: DP " + std::to_string(dp_attention.data_parallel_size) + ", TP 1, EP " +
                                    std::to_string(dp_attention.expert_parallel_size()) +
                                    " (each engine its own requests)",
                                dp_attention, 1, kvs_plain, nullptr));
    f.context_parallel = std::move(cp);
  }
  f.placement = std::move(core.placement);
  f.stages = std::move(core.stages);
  f.vllm = std::move(core.vllm);
  f.weights = std::move(weights_ptr);
  return f;
}

std::optional<BatchKvFit> fit_decode_batch(const Fit& f, const DecodeBatch& batch) {
  if (!f.decided || !f.fits || !f.placement.ok() || f.stages.empty() || f.vllm.num_blocks < 1) return std::nullopt;
  // The scheduler's blocks per request are the whole model's groups (the concurrency vLLM logs
  // counts them so): the first stage's list.
  const VllmKvConfig& kv = f.stages.front().kv;
  BatchKvFit bf;
  bf.requests = static_cast<std::int64_t>(batch.context_lens.size());
  bf.usable_blocks = f.vllm.num_blocks - 1;
  bf.cache_tokens = f.vllm.gpu_kv_cache_tokens;
  std::vector<std::int64_t> per_request;
  per_request.reserve(batch.context_lens.size());
  std::int64_t last_len = -1, last_blocks = 0;
  for (const std::int64_t len : batch.context_lens) {
    const std::int64_t tokens = checked_add(len, batch.spec_tokens, "decode batch tokens");
    if (tokens != last_len) {  // a uniform batch computes its request's blocks once
      last_len = tokens;
      last_blocks = kv.decode_request_blocks(tokens, 1 + batch.spec_tokens);
    }
    per_request.push_back(last_blocks);
    bf.tokens = checked_add(bf.tokens, tokens, "decode batch tokens");
    bf.blocks = checked_add(bf.blocks, last_blocks, "decode batch blocks");
  }
  bf.fits = bf.blocks <= bf.usable_blocks;
  if (bf.fits) {
    bf.requests_that_fit = bf.requests;
  } else {
    std::sort(per_request.begin(), per_request.end());
    std::int64_t used = 0;
    for (const std::int64_t b : per_request) {
      if (used + b > bf.usable_blocks) break;
      used += b;
      ++bf.requests_that_fit;
    }
  }
  return bf;
}

Plan make_plan(ModelConfig config, const PlanRequest& request) {
  Plan p;
  p.config = std::move(config);
  p.topology = build_topology(p.config);
  plan_into(p, p.config, p.topology, request);
  return p;
}

Plan make_plan(const std::string& path, const PlanRequest& request) { return make_plan(load_config(path), request); }

Plan make_plan_on(const ModelConfig& config, const Topology& topology, const PlanRequest& request) {
  Plan p;
  plan_into(p, config, topology, request);
  return p;
}

const Finding* backend_refusal(const Plan& plan) {
  for (const auto& f : plan.findings) {
    if (f.severity == Severity::error && (f.id == "backend.arch" || f.id == "backend.attention_backend")) return &f;
  }
  return nullptr;
}

}  // namespace mlaplan

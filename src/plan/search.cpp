// The layout search (include/mlaplan/plan/search.hpp, docs/launch.md).
#include "mlaplan/plan/search.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/base/suggest.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/engine/vllm/placement.hpp"
#include "mlaplan/plan/launch.hpp"
#include "mlaplan/rules/backends.hpp"
#include "mlaplan/model/topology.hpp"
#include "mlaplan/base/number_format.hpp"

namespace mlaplan {

namespace {

/// 1, 2, 4, ... up to `hi`, and `hi` itself; with `every`, 1..hi.
std::vector<std::int64_t> sizes_up_to(std::int64_t hi, bool every) {
  std::vector<std::int64_t> v;
  if (every) {
    for (std::int64_t i = 1; i <= hi; ++i) v.push_back(i);
    return v;
  }
  for (std::int64_t i = 1; i <= hi; i *= 2) v.push_back(i);
  if (v.empty() || v.back() != hi) v.push_back(hi);
  return v;
}

struct Shared {
  PlanWeights checkpoint;
  std::shared_ptr<const std::vector<ShardKind>> kinds[2];
  std::shared_ptr<PlacementMemo> memo[2];
};

/// The plan of `req` as the search judges it.
void judge(const ModelConfig& cfg, const Topology& topo, SearchCandidate& c) {
  // SGLang runs DP over one server's GPUs as DP attention (the layout's DP with its MoE over all
  // ranks); replicas behind a router are the same TP layout run twice.
  if (c.request.engine == EngineChoice::sglang && c.request.layout.data_parallel_size > 1) {
    c.request.sglang.enable_dp_attention = true;
  }
  try {
    const Plan p = make_plan_on(cfg, topo, c.request);
    c.exit_code = p.exit_code;
    if (c.request.engine == EngineChoice::sglang && p.sglang && p.sglang_input) {
      // SGLang's answer: requests of context_len its pools hold at once, capped by its request cap.
      const SglangFit& sg = *p.sglang;
      c.fits = p.exit_code == 0 && sg.fits;
      c.weights_bytes_per_gpu = p.sglang_input->weights_bytes;
      c.total_concurrency = sg.served_requests();
      if (p.layout) {
        c.max_model_len = p.layout->max_model_len;
        c.backend = "SGLang dsv4";
      }
      if (p.layout && p.layout->parallel.decode_context_parallel_size > 1) {
        c.fits = false;
        c.exit_code = exit_code(ErrorKind::unsupported);
        c.reason = "SGLang: decode context parallelism is not modelled";
      } else if (!c.fits) {
        c.reason = !p.exit_message.empty() ? p.exit_message : sg.verdict;
      }
      return;
    }
    c.fits = p.exit_code == 0 && p.fit && p.fit->decided && p.fit->fits;
    if (p.fit) {
      c.total_concurrency = p.fit->total_concurrency;
      c.weights_bytes_per_gpu = p.fit->placement.max_rank_bytes;
    }
    if (p.layout) {
      c.max_model_len = p.layout->max_model_len;
      c.backend = backend_title(p.layout->backend, cfg.family);
    }
    if (!c.fits) {
      if (p.fit && p.fit->placement.ok() && p.exit_code == exit_code(ErrorKind::does_not_fit) &&
          !p.fit->weights_exceed_gpu && p.layout) {
        const std::int64_t avail = p.fit->vllm.available_bytes;
        c.reason = "does not fit: weights " + format_gib(c.weights_bytes_per_gpu) + " per GPU leave " +
                   (avail > 0 ? format_gib(avail) : "nothing (short by " + format_gib(-avail) + ")") +
                   " for the KV cache; one request of " + format_grouped(p.layout->max_model_len) + " tokens needs " +
                   format_gib(p.fit->vllm.needed_bytes);
      } else if (p.fit && p.fit->weights_exceed_gpu) {
        c.reason = "does not fit: " + p.fit->error_message;
      } else {
        c.reason = !p.exit_message.empty() ? p.exit_message : p.fit ? p.fit->verdict : "no layout";
      }
    }
  } catch (const Error& e) {
    c.exit_code = exit_code(e.kind());
    c.fits = false;
    c.reason = e.what();
  }
}

bool serves(const ModelConfig& cfg, const Topology& topo, PlanRequest req, std::int64_t len,
            std::int64_t min_concurrency) {
  req.layout.max_model_len = len;
  req.guards = PlanGuards{};
  req.suggestions = false;
  req.schedules = false;
  req.fit_only = true;
  SearchCandidate c;
  c.request = std::move(req);
  judge(cfg, topo, c);
  return c.fits && c.total_concurrency >= static_cast<double>(min_concurrency);
}

}  // namespace

std::string_view to_string(SearchObjective o) {
  switch (o) {
    case SearchObjective::concurrency: return "concurrency";
    case SearchObjective::context: return "context";
    case SearchObjective::gpus: return "gpus";
  }
  return "?";
}

SearchObjective parse_search_objective(std::string_view text) {
  if (text == "concurrency") return SearchObjective::concurrency;
  if (text == "context") return SearchObjective::context;
  if (text == "gpus") return SearchObjective::gpus;
  throw_usage("--objective: " + quoted(text) + " is not an objective; allowed: concurrency, context, gpus" +
              did_you_mean_suffix(text, {"concurrency", "context", "gpus"}));
}

std::string SearchCandidate::label() const {
  std::string s = "TP " + std::to_string(tensor_parallel_size);
  if (data_parallel_size > 1) s += " x DP " + std::to_string(data_parallel_size);
  if (pipeline_parallel_size > 1) s += " x PP " + std::to_string(pipeline_parallel_size);
  if (decode_context_parallel_size > 1) s += " x DCP " + std::to_string(decode_context_parallel_size);
  if (expert_parallel) s += ", EP";
  if (engram == EngramPlacement::gpu) s += ", Engram on GPU";
  if (kv_cache_dtype != "auto") s += ", " + kv_cache_dtype;
  if (!attention_backend.empty()) s += ", " + attention_backend;
  return s;
}

std::string SearchCandidate::family() const {
  std::string s = "TP " + std::to_string(tensor_parallel_size);
  if (pipeline_parallel_size > 1) s += " with PP";
  if (expert_parallel) s += ", EP";
  if (engram == EngramPlacement::gpu) s += ", Engram on GPU";
  if (kv_cache_dtype != "auto") s += ", " + kv_cache_dtype;
  return s;
}

std::optional<std::int64_t> longest_context(const ModelConfig& cfg, const Topology& topo, const PlanRequest& req,
                                            std::int64_t min_concurrency) {
  std::int64_t hi = cfg.max_position_embeddings;
  if (hi < 1) return std::nullopt;
  if (serves(cfg, topo, req, hi, min_concurrency)) return hi;
  if (!serves(cfg, topo, req, 1, min_concurrency)) return std::nullopt;
  std::int64_t lo = 1;  // serves; hi does not
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (serves(cfg, topo, req, mid, min_concurrency) ? lo : hi) = mid;
  }
  return lo;
}

SearchResult search_layouts(const ModelConfig& cfg, const Topology& topo, const PlanRequest& base,
                            const SearchOptions& opt) {
  if (opt.gpus < 1 || opt.gpus > LayoutLimits::max_parallel_size) {
    throw_usage("--gpus: " + std::to_string(opt.gpus) + " is out of range; allowed 1.." +
                std::to_string(LayoutLimits::max_parallel_size));
  }
  SearchResult out;
  out.options = opt;
  Shared sh;
  sh.checkpoint = load_plan_weights(cfg, base);
  const bool engram_tables = !cfg.checkpoint.engram_layer_ids.empty();
  for (const EngramPlacement e : {EngramPlacement::gpu, EngramPlacement::offload}) {
    const std::size_t i = e == EngramPlacement::gpu ? 0 : 1;
    sh.kinds[i] = std::make_shared<const std::vector<ShardKind>>(shard_kinds(*sh.checkpoint.report, e));
    sh.memo[i] = std::make_shared<PlacementMemo>();
  }

  const LayoutOptions& given = base.layout;
  std::vector<std::int64_t> tps;
  if (opt.fixed.tensor_parallel) {
    tps = {given.tensor_parallel_size};
  } else {
    for (std::int64_t t = 1; t <= opt.gpus; ++t) {
      if (cfg.num_attention_heads % t == 0) tps.push_back(t);
    }
  }
  std::vector<EngramPlacement> engrams = {given.engram};
  if (!opt.fixed.engram && engram_tables) engrams = {EngramPlacement::gpu, EngramPlacement::offload};
  std::vector<std::string> dtypes = {given.kv_cache_dtype};
  if (!opt.fixed.kv_cache_dtype && cfg.family == Family::deepseek_v41) dtypes = {"auto", "nvfp4_ds_mla"};
  const bool every_dp = opt.objective == SearchObjective::gpus;
  // The attention backends: vLLM's choice ("") and every other backend of the family that runs
  // on the GPU's compute capability (vLLM's --attention-backend) in the vLLM release of the
  // request (given.release).
  std::vector<std::string> backends = {given.attention_backend.value_or("")};
  const BackendReleaseRules release = backend_release_rules(vllm_release_or_newest(base.deploy.vllm_version));
  if (!opt.fixed.attention_backend && !given.attention_backend) {
    const Target t = base.resolved_target ? *base.resolved_target : resolve_target(base.target);
    for (const auto& b : backend_catalogue()) {
      if (std::find(b.families.begin(), b.families.end(), cfg.family) == b.families.end()) continue;
      if (std::find(b.cc_majors.begin(), b.cc_majors.end(), t.cc.major) == b.cc_majors.end()) continue;
      const std::string name(backend_vllm_name(b.id, cfg.family));
      if (!release_has_backend_name(name, release)) continue;
      if (std::find(backends.begin(), backends.end(), name) == backends.end()) backends.push_back(name);
    }
  }

  const bool sglang = base.engine == EngineChoice::sglang;
  if (sglang) {
    // SGLang's layouts: its Engram placement is its host-table switch, its KV format the dsv4
    // backend's, and it has no decode context parallelism: one of each.
    engrams = {base.sglang.engram_host_table ? EngramPlacement::offload : EngramPlacement::gpu};
    dtypes = {given.kv_cache_dtype};
    backends = {""};
  }
  std::vector<SearchCandidate> all;
  for (const std::int64_t tp : tps) {
    std::vector<std::int64_t> pps;
    if (opt.fixed.pipeline_parallel) {
      pps = {given.pipeline_parallel_size};
    } else {
      for (std::int64_t p = 1; tp * p <= opt.gpus && p <= cfg.num_hidden_layers; p *= 2) pps.push_back(p);
    }
    for (const std::int64_t pp : pps) {
      if (tp * pp > opt.gpus) continue;
      const std::vector<std::int64_t> dps = opt.fixed.data_parallel
                                                ? std::vector<std::int64_t>{given.data_parallel_size}
                                                : sizes_up_to(opt.gpus / (tp * pp), every_dp);
      for (const std::int64_t dp : dps) {
        if (tp * pp * dp > opt.gpus) continue;
        std::vector<bool> eps = {given.enable_expert_parallel};
        if (!opt.fixed.expert_parallel) eps = tp * dp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false};
        // Decode context parallel shards the full caches over ranks of the TP group: 1, and every
        // power of two that divides TP (vLLM's rules refuse what the backend does not take).
        std::vector<std::int64_t> dcps = {given.decode_context_parallel_size};
        if (!opt.fixed.context_parallel || sglang) {
          dcps = {1};
          for (std::int64_t d = 2; d <= tp && !sglang; d *= 2) {
            if (tp % d == 0) dcps.push_back(d);
          }
        }
        for (const bool ep : eps) {
          for (const std::int64_t dcp : dcps) {
            for (const EngramPlacement e : engrams) {
              for (const std::string& dtype : dtypes) {
                for (const std::string& backend : backends) {
                  SearchCandidate c;
                  c.tensor_parallel_size = tp;
                  c.pipeline_parallel_size = pp;
                  c.data_parallel_size = dp;
                  c.decode_context_parallel_size = dcp;
                  c.expert_parallel = ep;
                  c.engram = e;
                  c.kv_cache_dtype = dtype;
                  c.attention_backend = backend;
                  c.gpus = tp * pp * dp;
                  PlanRequest& r = c.request;
                  r = base;
                  r.layout.tensor_parallel_size = tp;
                  r.layout.pipeline_parallel_size = pp;
                  r.layout.data_parallel_size = dp;
                  r.layout.decode_context_parallel_size = dcp;
                  r.layout.enable_expert_parallel = ep;
                  r.layout.engram = e;
                  r.layout.kv_cache_dtype = dtype;
                  r.layout.attention_backend = backend.empty() ? std::nullopt : std::optional<std::string>(backend);
                  r.guards = PlanGuards{};
                  r.suggestions = false;
                  r.schedules = false;
                  r.fit_only = true;
                  const std::size_t i = e == EngramPlacement::gpu ? 0 : 1;
                  r.weights = sh.checkpoint.report;
                  r.weights_source = sh.checkpoint.source;
                  r.weights_how = sh.checkpoint.how;
                  r.incomplete_checkpoint = sh.checkpoint.incomplete;
                  r.shard_kinds = sh.kinds[i];
                  r.placements = sh.memo[i];
                  judge(cfg, topo, c);
                  if (opt.objective == SearchObjective::context && c.exit_code != exit_code(ErrorKind::unsupported)) {
                    if (const auto len = longest_context(cfg, topo, c.request, opt.min_concurrency)) {
                      c.request.layout.max_model_len = *len;
                      judge(cfg, topo, c);
                    }
                  }
                  ++out.planned;
                  // A backend named that is the one vLLM chooses anyway plans the same layout again.
                  const bool repeat = !backend.empty() && !all.empty() && all.back().attention_backend.empty() &&
                                      c.backend == all.back().backend && c.exit_code == all.back().exit_code &&
                                      c.total_concurrency == all.back().total_concurrency;
                  if (!repeat) all.push_back(std::move(c));
                }
              }
            }
          }
        }
      }
    }
  }

  // The rejected families: along each dimension in turn (the kv dtype, the pipeline size, the
  // Engram placement, the tensor size, expert parallel), a value none of whose layouts fits is one
  // line, with the reason of its layout of the most GPUs and the least weights on each; its
  // layouts are then left out of the dimensions after it.
  std::vector<const SearchCandidate*> left;
  for (const auto& c : all) left.push_back(&c);
  struct Dimension {
    std::string (*value)(const SearchCandidate&);
  };
  const Dimension dims[] = {
      {[](const SearchCandidate& c) { return "--kv-cache-dtype " + c.kv_cache_dtype; }},
      {[](const SearchCandidate& c) {
        return c.attention_backend.empty() ? std::string("vLLM's backend")
                                           : "--attention-backend " + c.attention_backend;
      }},
      {[](const SearchCandidate& c) { return "PP " + std::to_string(c.pipeline_parallel_size); }},
      {[](const SearchCandidate& c) { return "DCP " + std::to_string(c.decode_context_parallel_size); }},
      {[](const SearchCandidate& c) {
        return std::string(c.engram == EngramPlacement::offload ? "Engram in host memory" : "Engram on the GPU");
      }},
      {[](const SearchCandidate& c) { return "TP " + std::to_string(c.tensor_parallel_size); }},
      {[](const SearchCandidate& c) {
        return std::string(c.expert_parallel ? "expert parallel" : "no expert parallel");
      }},
  };
  for (const auto& d : dims) {
    std::map<std::string, std::vector<const SearchCandidate*>> by;
    std::vector<std::string> order;
    for (const auto* c : left) {
      const std::string v = d.value(*c);
      if (!by.count(v)) order.push_back(v);
      by[v].push_back(c);
    }
    if (by.size() < 2 && !left.empty() && std::any_of(left.begin(), left.end(), [](auto* c) { return c->fits; })) {
      continue;  // one value that fits somewhere: nothing to reject here
    }
    for (const auto& v : order) {
      const auto& members = by[v];
      if (std::any_of(members.begin(), members.end(), [](auto* c) { return c->fits; })) continue;
      const SearchCandidate* rep = members.front();
      for (const auto* c : members) {
        if (c->gpus > rep->gpus || (c->gpus == rep->gpus && c->weights_bytes_per_gpu < rep->weights_bytes_per_gpu))
          rep = c;
      }
      out.rejected.push_back(
          RejectedFamily{v, static_cast<std::int64_t>(members.size()), rep->label() + ": " + rep->reason});
      left.erase(std::remove_if(left.begin(), left.end(), [&](const SearchCandidate* c) { return d.value(*c) == v; }),
                 left.end());
    }
  }
  for (auto& c : all) {
    if (c.fits) out.ranked.push_back(std::move(c));
  }
  const SearchObjective o = opt.objective;
  std::stable_sort(out.ranked.begin(), out.ranked.end(), [o](const SearchCandidate& a, const SearchCandidate& b) {
    if (o == SearchObjective::gpus && a.gpus != b.gpus) return a.gpus < b.gpus;
    if (o == SearchObjective::context && a.max_model_len != b.max_model_len) return a.max_model_len > b.max_model_len;
    if (a.total_concurrency != b.total_concurrency) return a.total_concurrency > b.total_concurrency;
    return a.gpus < b.gpus;
  });
  out.target = base.resolved_target ? base.resolved_target->id : resolve_target(base.target).id;
  return out;
}

namespace {

/// The concurrency of `req` with one change, as the sensitivity notes compare it.
std::optional<Plan::Sensitivity> sensitivity_of(const ModelConfig& cfg, const Topology& topo, PlanRequest req,
                                                std::vector<std::string> flags, double base) {
  SearchCandidate c;
  req.guards = PlanGuards{};
  req.suggestions = false;
  req.schedules = false;
  req.fit_only = true;
  c.request = std::move(req);
  judge(cfg, topo, c);
  if (c.exit_code == exit_code(ErrorKind::unsupported) || c.exit_code == exit_code(ErrorKind::usage))
    return std::nullopt;
  Plan::Sensitivity s;
  s.flags = std::move(flags);
  s.fits = c.fits;
  s.total_concurrency = c.fits ? c.total_concurrency : 0.0;
  s.change = base > 0 ? s.total_concurrency / base - 1.0 : 0.0;
  if (!(std::abs(s.change) > 0.10)) return std::nullopt;
  return s;
}

}  // namespace

Plan answer_question(const ModelConfig& cfg, const PlanRequest& request, const PlanQuestion& q) {
  const Topology topo = build_topology(cfg);
  PlanRequest chosen = request;
  std::shared_ptr<const SearchResult> searched;
  if (q.search) {
    SearchOptions so = *q.search;
    if (q.max_model_len_auto) {
      so.objective = SearchObjective::context;
      so.min_concurrency = q.min_concurrency;
    }
    auto res = std::make_shared<SearchResult>(search_layouts(cfg, topo, request, so));
    const SearchCandidate* pick = res->ranked.empty() ? nullptr : &res->ranked.front();
    if (pick) {
      chosen = pick->request;
    } else {
      // Nothing fits: the plan of the layout of every GPU with the least weights on each, which
      // says how far it is and what would fit.
      // The largest TP the heads divide, DP over the rest, experts over all of them: the least
      // weights per GPU of plain TP x DP on those GPUs.
      const std::int64_t g = so.gpus;
      std::int64_t tp = 1;
      while (tp * 2 <= g && cfg.num_attention_heads % (tp * 2) == 0) tp *= 2;
      chosen.layout.tensor_parallel_size = so.fixed.tensor_parallel ? request.layout.tensor_parallel_size : tp;
      if (!so.fixed.data_parallel) chosen.layout.data_parallel_size = std::max<std::int64_t>(1, g / tp);
      if (!so.fixed.expert_parallel) {
        chosen.layout.enable_expert_parallel =
            chosen.layout.tensor_parallel_size * chosen.layout.data_parallel_size > 1;
      }
    }
    chosen.guards = request.guards;
    chosen.suggestions = request.suggestions;
    chosen.schedules = request.schedules;
    chosen.fit_only = request.fit_only;
    searched = std::move(res);
  }
  std::optional<std::int64_t> auto_len;
  if (q.max_model_len_auto) {
    if (searched && !searched->ranked.empty()) {
      auto_len = chosen.layout.max_model_len;
    } else {
      auto_len = longest_context(cfg, topo, chosen, q.min_concurrency);
      if (auto_len) chosen.layout.max_model_len = *auto_len;
    }
  }
  Plan p = make_plan(cfg, chosen);
  p.search = searched;
  p.search_why = q.search_why;
  if (q.max_model_len_auto) {
    p.auto_max_model_len = auto_len;
    p.auto_min_concurrency = q.min_concurrency;
    if (!auto_len) {
      p.findings.push_back(Finding{"fit.max_model_len_auto", Severity::error,
                                   "--max-model-len auto: no max_model_len serves " +
                                       std::to_string(q.min_concurrency) + " request(s) at once on this layout",
                                   "", "more GPUs, or a smaller --min-concurrency"});
      p.exit_code = combine_exit_codes(p.exit_code, exit_code(ErrorKind::does_not_fit));
      if (p.exit_message.empty()) p.exit_message = p.findings.back().message;
    }
  }
  // A layout named by hand that does not fit: the best layout of as many GPUs, when one fits
  // (the fewest-GPUs suggestion of plan_fit() keeps the named layout's other choices).
  if (!q.search && p.exit_code == exit_code(ErrorKind::does_not_fit) && p.fit && p.fit->decided && !p.fit->fits &&
      !p.fit->refused && p.layout) {
    SearchOptions so;
    so.gpus = p.layout->parallel.gpus();
    so.fixed.kv_cache_dtype = request.layout.kv_cache_dtype != "auto";
    const SearchResult same = search_layouts(cfg, topo, request, so);
    if (!same.ranked.empty()) {
      const SearchCandidate& best = same.ranked.front();
      std::vector<std::string> flags = {"--tp", std::to_string(best.tensor_parallel_size)};
      if (best.data_parallel_size > 1) flags.insert(flags.end(), {"--dp", std::to_string(best.data_parallel_size)});
      if (best.pipeline_parallel_size > 1) {
        flags.insert(flags.end(), {"--pp", std::to_string(best.pipeline_parallel_size)});
      }
      if (best.decode_context_parallel_size > 1) {
        flags.insert(flags.end(), {"--dcp", std::to_string(best.decode_context_parallel_size)});
      }
      if (best.expert_parallel) flags.emplace_back("--enable-expert-parallel");
      if (best.engram == EngramPlacement::gpu && !cfg.checkpoint.engram_layer_ids.empty())
        flags.insert(flags.end(), {"--engram", "gpu"});
      if (best.kv_cache_dtype != request.layout.kv_cache_dtype) {
        flags.insert(flags.end(), {"--kv-cache-dtype", best.kv_cache_dtype});
      }
      if (!best.attention_backend.empty()) flags.insert(flags.end(), {"--attention-backend", best.attention_backend});
      std::string words;
      for (const auto& w : flags) words += (words.empty() ? "" : " ") + w;
      const std::string text = words + " (" + std::to_string(best.gpus) + " GPUs: the best layout of " +
                               std::to_string(so.gpus) + " " + same.target + ", " +
                               format_fixed(best.total_concurrency, 2) + "x concurrency)";
      p.fit->suggestions.push_back(text);
      p.fit->suggestion_flags.push_back(flags);
      for (auto& f : p.findings) {
        if (f.id == "fit.does_not_fit") f.fix += (f.fix.empty() ? "" : "; or ") + text;
      }
      const auto would = p.exit_message.find(" Would fit: ");
      if (would != std::string::npos && !p.exit_message.empty() && p.exit_message.back() == '.') {
        p.exit_message.pop_back();
        p.exit_message += "; or " + text + ".";
      } else if (would == std::string::npos) {
        p.exit_message += " Would fit: " + text + ".";
      }
    }
  }
  // SGLang does not start on a layout named by hand: the best SGLang layout of as many GPUs.
  if (!q.search && request.engine == EngineChoice::sglang && p.sglang && p.sglang->decided && !p.sglang->fits &&
      !p.sglang->refused && p.layout) {
    SearchOptions so;
    so.gpus = p.layout->parallel.gpus();
    SearchResult same = search_layouts(cfg, topo, request, so);
    // None of as many GPUs: the fewest that hold it (doubling, up to 64).
    for (std::int64_t g = so.gpus * 2; same.ranked.empty() && g <= 64; g *= 2) {
      so.gpus = g;
      same = search_layouts(cfg, topo, request, so);
    }
    if (!same.ranked.empty()) {
      const SearchCandidate& best = same.ranked.front();
      const std::int64_t world = best.tensor_parallel_size * best.data_parallel_size;
      std::vector<std::string> flags = {"--tp", std::to_string(best.tensor_parallel_size)};
      if (best.data_parallel_size > 1) {
        flags.insert(flags.end(), {"--dp", std::to_string(best.data_parallel_size), "--enable-dp-attention"});
      }
      if (best.expert_parallel) flags.emplace_back("--enable-expert-parallel");
      const std::string text = "SGLang --tp-size " + std::to_string(world) +
                               (best.data_parallel_size > 1
                                    ? " --dp-size " + std::to_string(best.data_parallel_size) + " --enable-dp-attention"
                                    : std::string()) +
                               (best.expert_parallel ? " --ep-size " + std::to_string(world) : std::string()) + " (" +
                               std::to_string(best.gpus) + " GPUs: the best SGLang layout of " +
                               std::to_string(so.gpus) + " " + same.target + ", " +
                               format_fixed(best.total_concurrency, 2) + " requests of max_model_len)";
      p.sglang->suggestions.push_back(text);
      p.sglang->suggestion_flags.push_back(flags);
      for (auto& f : p.findings) {
        if (f.id == "sglang.does_not_fit") f.fix += (f.fix.empty() ? "" : "; or ") + text;
      }
    }
  }
  p.launch = std::make_shared<const LaunchCommand>(vllm_launch_command(p.config, p, chosen));
  if (p.sglang && p.sglang_input) {
    p.sglang_launch = std::make_shared<const LaunchCommand>(sglang_launch_command(p.config, p, chosen));
  }
  if (q.extras && p.layout && p.fit && p.fit->decided && p.exit_code != exit_code(ErrorKind::unsupported)) {
    // The plans below differ from `chosen` in max_model_len or a scheduler flag only: the
    // checkpoint's weights are read once and the layout's placement is made once for all of them.
    if (!chosen.weights) {
      const PlanWeights w = load_plan_weights(cfg, chosen);
      chosen.weights = w.report;
      chosen.weights_source = w.source;
      chosen.weights_how = w.how;
      chosen.incomplete_checkpoint = w.incomplete;
      chosen.shard_kinds = std::make_shared<const std::vector<ShardKind>>(shard_kinds(*w.report, chosen.layout.engram));
      chosen.placements = std::make_shared<PlacementMemo>();
    }
    // The context sweep: powers of two from 4K to the config's limit, and the plan's own length.
    std::vector<std::int64_t> lens;
    for (std::int64_t l = 4096; l < cfg.max_position_embeddings; l *= 2) lens.push_back(l);
    lens.push_back(cfg.max_position_embeddings);
    if (std::find(lens.begin(), lens.end(), p.layout->max_model_len) == lens.end())
      lens.push_back(p.layout->max_model_len);
    std::sort(lens.begin(), lens.end());
    for (const std::int64_t l : lens) {
      SearchCandidate c;
      c.request = chosen;
      c.request.layout.max_model_len = l;
      c.request.guards = PlanGuards{};
      c.request.suggestions = false;
      c.request.schedules = false;
      c.request.fit_only = true;
      judge(cfg, topo, c);
      p.context_sweep.push_back(Plan::ContextPoint{l, c.fits, c.fits ? c.total_concurrency : 0.0});
    }
    // The flags the answer is sensitive to.
    const Layout& L = *p.layout;
    if (chosen.engine == EngineChoice::sglang) {
      // SGLang's own flags, against SGLang's answer.
      const SglangFit* sg = p.sglang ? &*p.sglang : nullptr;
      const double base = sg && sg->fits ? sg->served_requests() : 0.0;
      if (base > 0) {
        for (const double d : {-0.02, 0.02}) {
          const double f = std::round((sg->mem_fraction_static + d) * 1000.0) / 1000.0;
          if (f <= 0.0 || f >= 1.0) continue;
          PlanRequest r = chosen;
          r.layout.max_model_len = L.max_model_len;
          r.sglang.mem_fraction_static = f;
          if (auto s = sensitivity_of(cfg, topo, r, {"--mem-fraction-static", format_shortest(f)}, base)) {
            p.sensitivity.push_back(*s);
          }
        }
        for (const std::int64_t n : {std::int64_t{64}, std::int64_t{128}, std::int64_t{256}, std::int64_t{512}}) {
          if (n == sg->requested_running_requests) continue;
          PlanRequest r = chosen;
          r.layout.max_model_len = L.max_model_len;
          r.sglang.max_running_requests = n;
          if (auto s = sensitivity_of(cfg, topo, r, {"--max-running-requests", std::to_string(n)}, base)) {
            p.sensitivity.push_back(*s);
          }
        }
      }
      return p;
    }
    const double base = p.fit->fits ? p.fit->total_concurrency : 0.0;
    if (base > 0) {
      for (const std::int64_t t : {std::int64_t{2048}, std::int64_t{4096}, std::int64_t{8192}, std::int64_t{16384}}) {
        if (t == L.in_flight_tokens) continue;
        PlanRequest r = chosen;
        r.layout.max_model_len = L.max_model_len;
        r.layout.in_flight_tokens = t;
        if (auto s = sensitivity_of(cfg, topo, r, {"--max-num-batched-tokens", std::to_string(t)}, base)) {
          p.sensitivity.push_back(*s);
        }
      }
      {
        PlanRequest r = chosen;
        r.layout.max_model_len = L.max_model_len;
        const bool on = p.fit ? p.fit->async_scheduling : chosen.deploy.async_scheduling.value_or(true);
        r.deploy.async_scheduling = !on;
        const std::vector<std::string> f = {on ? "--no-async-scheduling" : "--async-scheduling"};
        if (auto s = sensitivity_of(cfg, topo, r, f, base)) p.sensitivity.push_back(*s);
      }
      for (const std::int64_t n : {std::int64_t{64}, std::int64_t{256}, std::int64_t{1024}}) {
        const std::int64_t current = chosen.deploy.max_num_seqs.value_or(default_max_num_seqs(L.target));
        if (n == current) continue;
        PlanRequest r = chosen;
        r.layout.max_model_len = L.max_model_len;
        r.deploy.max_num_seqs = n;
        if (auto s = sensitivity_of(cfg, topo, r, {"--max-num-seqs", std::to_string(n)}, base))
          p.sensitivity.push_back(*s);
      }
      for (const std::string d : {"fp8_ds_mla", "nvfp4_ds_mla"}) {
        if (to_string(L.kv_cache_dtype) == d) continue;
        if (d == "nvfp4_ds_mla" && cfg.family != Family::deepseek_v41) continue;
        PlanRequest r = chosen;
        r.layout.max_model_len = L.max_model_len;
        r.layout.kv_cache_dtype = d;
        if (auto s = sensitivity_of(cfg, topo, r, {"--kv-cache-dtype", d}, base)) p.sensitivity.push_back(*s);
      }
    }
  }
  return p;
}

}  // namespace mlaplan

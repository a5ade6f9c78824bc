// The deployer's answer around a plan (include/mlaplan/plan/search.hpp, launch.hpp): the layout
// search, the `vllm serve` command, the max_model_len sweep and the flags the answer is sensitive
// to, in the text output of `plan` and in its --json keys "search", "launch", "context_sweep" and
// "sensitivity". docs/launch.md explains them.

#include <locale>
#include <sstream>

#include "cli/commands.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/plan/launch.hpp"
#include "mlaplan/plan/search.hpp"
#include "output/json_out.hpp"

namespace mlaplan::cli {

namespace {

std::string words(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& w : argv) s += (s.empty() ? "" : " ") + shell_quote(w);
  return s;
}

std::string candidate_line(const SearchCandidate& c, SearchObjective o) {
  std::string s = c.label() + " (" + std::to_string(c.gpus) + " GPU" + (c.gpus == 1 ? "" : "s") +
                  "): " + format_fixed(c.total_concurrency, 2) + "x";
  if (o == SearchObjective::context) s += " at max_model_len " + format_grouped(c.max_model_len);
  s += ", weights " + format_gib(c.weights_bytes_per_gpu) + " per GPU";
  return s;
}

ojson candidate_json(const SearchCandidate& c) {
  return {{"label", c.label()},
          {"gpus", c.gpus},
          {"tensor_parallel_size", c.tensor_parallel_size},
          {"data_parallel_size", c.data_parallel_size},
          {"pipeline_parallel_size", c.pipeline_parallel_size},
          {"decode_context_parallel_size", c.decode_context_parallel_size},
          {"enable_expert_parallel", c.expert_parallel},
          {"engram", std::string(to_string(c.engram))},
          {"kv_cache_dtype", c.kv_cache_dtype},
          {"attention_backend", c.attention_backend.empty() ? ojson(nullptr) : ojson(c.attention_backend)},
          {"backend", c.backend},
          {"max_model_len", c.max_model_len},
          {"total_concurrency", c.total_concurrency},
          {"weights_bytes_per_gpu", c.weights_bytes_per_gpu}};
}

}  // namespace

std::string render_search_text(const PlanResult& r) {
  if (!r.search) return {};
  const SearchResult& s = *r.search;
  std::ostringstream o;
  o.imbue(std::locale::classic());
  o << "\nsearch: " << s.options.gpus << " x " << s.target << " (" << printable(r.search_why) << "), ranked by "
    << to_string(s.options.objective);
  if (s.options.objective == SearchObjective::context) o << " at " << s.options.min_concurrency << " requests at once";
  o << ": " << s.planned << " layouts planned, " << s.ranked.size() << " fit\n";
  if (s.ranked.empty()) {
    o << "  none fits: the plan below is of every GPU as TP x DP with expert parallel, to show how far it is\n";
  } else {
    o << "  best: " << candidate_line(s.ranked.front(), s.options.objective) << "\n";
    const std::size_t n = std::min<std::size_t>(s.ranked.size(), static_cast<std::size_t>(s.options.runners_up) + 1);
    for (std::size_t i = 1; i < n; ++i) o << "  then: " << candidate_line(s.ranked[i], s.options.objective) << "\n";
    if (s.ranked.size() > n) o << "  (" << s.ranked.size() - n << " more fit: --json lists them)\n";
  }
  for (const auto& f : s.rejected) {
    o << "  rejected: " << f.family << " (" << f.layouts << " layout" << (f.layouts == 1 ? "" : "s")
      << "): " << printable(f.reason) << "\n";
  }
  return o.str();
}

std::string render_launch_text(const PlanResult& r) {
  if (!r.launch) return {};
  const LaunchCommand& c = *r.launch;
  std::ostringstream o;
  o << "\nlaunch: " << printable(c.text()) << "\n";
  if (!c.mla_plan_flags.empty()) {
    o << "  mla-plan's assumptions beyond vLLM's flags: " << printable(words(c.mla_plan_flags)) << "\n";
  }
  for (const auto& n : c.notes) o << "  note: " << printable(n) << "\n";
  for (const auto& f : r.findings) {
    if (f.id == "vllm.ignored" || f.id == "vllm.not_modelled" || f.id == "vllm.environment") {
      o << "  " << printable(f.message) << "\n";
    }
  }
  if (r.fit) {
    for (std::size_t i = 0; i < r.fit->suggestion_flags.size(); ++i) {
      o << "  would fit: mla-plan " << printable(words(r.fit->suggestion_flags[i])) << " ...\n";
    }
  }
  return o.str();
}

std::string render_sweep_text(const PlanResult& r, bool details) {
  std::ostringstream o;
  o.imbue(std::locale::classic());
  if (r.auto_max_model_len) {
    o << "\nmax_model_len auto: " << format_grouped(*r.auto_max_model_len) << " tokens, the longest that serves "
      << r.auto_min_concurrency << " request" << (r.auto_min_concurrency == 1 ? "" : "s") << " at once\n";
  }
  if (!r.sensitivity.empty()) o << "\nsensitivity (one flag changed, where the concurrency moves by more than 10%):\n";
  for (const auto& s : r.sensitivity) {
    o << "  with " << printable(words(s.flags)) << ": "
      << (s.fits ? format_fixed(s.total_concurrency, 2) + "x" : std::string("it does not fit")) << " ("
      << (s.change >= 0 ? "+" : "") << format_fixed(s.change * 100.0, 0) << "%)\n";
  }
  if (details && !r.context_sweep.empty()) {
    o << "\nmax_model_len against concurrency on this layout:\n";
    for (const auto& p : r.context_sweep) {
      o << "  " << format_grouped(p.max_model_len) << ": "
        << (p.fits ? format_fixed(p.total_concurrency, 2) + "x" : std::string("does not fit")) << "\n";
    }
  }
  return o.str();
}

ojson search_json(const PlanResult& r) {
  if (!r.search) return nullptr;
  const SearchResult& s = *r.search;
  ojson ranked = ojson::array();
  for (const auto& c : s.ranked) ranked.push_back(candidate_json(c));
  ojson rejected = ojson::array();
  for (const auto& f : s.rejected) {
    rejected.push_back({{"family", f.family}, {"layouts", f.layouts}, {"reason", f.reason}});
  }
  return {{"why", r.search_why},
          {"gpus", s.options.gpus},
          {"target", s.target},
          {"objective", std::string(to_string(s.options.objective))},
          {"min_concurrency", s.options.min_concurrency},
          {"planned", s.planned},
          {"ranked", std::move(ranked)},
          {"rejected", std::move(rejected)}};
}

ojson launch_command_json(const LaunchCommand& c);  // render_sglang.cpp

ojson launch_json(const PlanResult& r) { return r.launch ? launch_command_json(*r.launch) : ojson(nullptr); }

ojson sweep_json(const PlanResult& r) {
  ojson a = ojson::array();
  for (const auto& p : r.context_sweep) {
    a.push_back({{"max_model_len", p.max_model_len}, {"fits", p.fits}, {"total_concurrency", p.total_concurrency}});
  }
  return a;
}

ojson sensitivity_json(const PlanResult& r) {
  ojson a = ojson::array();
  for (const auto& s : r.sensitivity) {
    a.push_back(
        {{"flags", s.flags}, {"fits", s.fits}, {"total_concurrency", s.total_concurrency}, {"change", s.change}});
  }
  return a;
}

}  // namespace mlaplan::cli

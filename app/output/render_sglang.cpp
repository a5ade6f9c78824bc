// The SGLang section of `plan` (--engine sglang | all): SGLang's start-up term by term, the pools,
// the lines SGLang prints, its launch command; with --engine all, both engines side by side.
#include <locale>
#include <sstream>

#include "cli/commands.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/plan/launch.hpp"
#include "output/json_out.hpp"
#include "output/output.hpp"

namespace mlaplan::cli {

namespace sglang_text {

std::string gib(std::int64_t bytes) { return format_gib(bytes); }

std::string words_of(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& w : v) out += (out.empty() ? "" : " ") + shell_quote(w);
  return out;
}

/// What an SGLang command line (`mla-plan sglang serve ...`) left out or read from the
/// environment: the findings sglang.ignored, sglang.not_modelled and sglang.environment.
std::string serve_lines(const PlanResult& r) {
  std::string out;
  for (const auto& f : r.findings) {
    if (f.id == "sglang.ignored" || f.id == "sglang.not_modelled" || f.id == "sglang.environment") {
      out += "  " + printable(f.message) + "\n";
    }
  }
  return out;
}

}  // namespace sglang_text

std::string render_sglang_text(const PlanResult& r, bool details) {
  if (!r.sglang) return {};
  const SglangFit& s = *r.sglang;
  std::ostringstream o;
  o.imbue(std::locale::classic());
  o << "\nSGLang (" << s.generation->id << " configurator, " << s.generation->period << "): " << printable(s.verdict)
    << "\n";
  if (r.sglang_input) {
    const SglangInput& in = *r.sglang_input;
    o << "  layout: TP " << in.tp_size;
    if (in.dp_size > 1) o << (s.attn_dp_size > 1 ? ", DP attention " : ", DP replicas ") << in.dp_size;
    if (in.ep_size > 1) o << ", EP " << in.ep_size;
    if (in.pp_size > 1) o << ", PP " << in.pp_size;
    o << "; attention TP " << s.attn_tp_size << "; " << s.workers << " worker" << (s.workers == 1 ? "" : "s")
      << " with its own pools\n";
  }
  o << "  mem_fraction_static " << format_shortest(s.mem_fraction_static)
    << (s.fraction_default ? " (SGLang's default on " + std::to_string(s.gpu_mem_mib) + " MiB: reserve " +
                                 format_grouped(s.reserve_mib) + " MiB)"
                           : std::string(" (given)"))
    << "; chunked_prefill_size " << s.chunked_prefill_size
    << (s.chunk_per_rank != s.chunked_prefill_size ? " (" + std::to_string(s.chunk_per_rank) + " per rank)" : "")
    << "; cuda_graph_max_bs " << s.cuda_graph_max_bs << "; page_size " << s.page_size << "\n";
  if (s.fraction_default && details) {
    for (const auto& t : s.reserve) {
      o << "    reserve " << printable(t.what) << ": " << format_fixed(static_cast<double>(t.bytes) / 1048576.0, 1)
        << " MiB (" << printable(t.how) << ")\n";
    }
  }
  if (s.refused) {
    o << sglang_text::serve_lines(r);
    return o.str();
  }
  o << "  budget per GPU:\n";
  for (const auto& t : s.terms) {
    o << "    " << printable(t.what) << ": " << sglang_text::gib(t.bytes) << " (" << t.source;
    if (details && !t.how.empty()) o << ": " << printable(t.how);
    o << ")\n";
  }
  o << "    KV budget (rest_memory): "
    << (s.budget_bytes > 0 ? sglang_text::gib(s.budget_bytes) : "none (" + sglang_text::gib(s.budget_bytes) + ")")
    << " = free after loading - free before loading x (1 - " << format_shortest(s.mem_fraction_static)
    << "); minimum viable fraction " << format_fixed(s.min_viable_fraction, 4) << "\n";
  if (s.layers > 0) {
    o << "  pools: L " << s.layers;
    if (s.layers_c4) o << ", c4 " << s.layers_c4;
    if (s.layers_c128) o << ", c128 " << s.layers_c128;
    if (s.layers_c2) o << ", ratio-2 " << s.layers_c2;
    if (s.layers_c1) o << ", ratio-1 " << s.layers_c1;
    o << (s.generation->owners_and_cap_mode ? " (owner layers)" : " (compress_ratios entries)")
      << "; bytes per full token " << format_fixed(s.bytes_per_full_token, 2);
    if (s.bytes_per_swa_token > 0) o << ", per SWA slot " << format_fixed(s.bytes_per_swa_token, 2);
    o << "; SWA " << s.swa_mode;
    if (s.swa_mode == "cap") {
      o << ": " << format_grouped(s.swa_cap_tokens) << " slots = request cap " << format_grouped(s.swa_request_cap)
        << " (" << s.swa_per_request << " per request x " << s.sizing_running_requests << ") + " << s.swa_prefix_tails
        << " prefix tails, page-aligned";
    }
    o << "\n";
    o << "    fixed: c128 state " << sglang_text::gib(s.c128_state_fixed) << ", ratio-2 state "
      << sglang_text::gib(s.c2_state_fixed) << ", SWA " << sglang_text::gib(s.swa_fixed) << "\n";
  }
  if (s.fits || !s.error.empty()) {
    if (s.pools.full > 0) {
      o << "    full " << format_grouped(s.pools.full) << " tokens, swa " << format_grouped(s.pools.swa) << ", c4 "
        << format_grouped(s.pools.c4) << ", c128 " << format_grouped(s.pools.c128) << ", c4_state "
        << format_grouped(s.pools.c4_state) << ", c128_state " << format_grouped(s.pools.c128_state_final)
        << " (after the request cap)\n";
    }
  }
  if (s.fits) {
    o << "  max_running_requests " << s.max_running_requests << " per worker"
      << (s.running_requests_reduced ? " (reduced by the KV capacity)" : "") << "; request table "
      << sglang_text::gib(s.request_table_bytes) << " outside the pools; " << sglang_text::gib(s.left_after_pools_bytes)
      << " left for CUDA graphs and activations\n";
    o << "  capacity: " << format_fixed(s.requests_at_context, 2) << " requests of context_len "
      << format_grouped(s.context_len) << " per worker in the full pool; the SWA pool admits " << s.swa_requests
      << " running requests' windows";
    if (s.workers > 1) {
      o << "; " << s.workers << " workers: " << format_grouped(s.total_tokens) << " tokens, "
        << format_fixed(s.total_requests_at_context, 2) << " requests";
    }
    o << "\n";
  }
  if (!s.error.empty()) o << "  SGLang's error: " << printable(s.error) << "\n";
  for (const auto& sug : s.suggestions) o << "  would start: " << printable(sug) << "\n";
  o << "  SGLang prints:\n";
  for (const auto& line : s.overrides) o << "    " << printable(line) << "\n";
  for (const auto& line : s.log_lines) o << "    " << printable(line) << "\n";
  for (const auto& n : s.notes) o << "  note: " << printable(n) << "\n";
  if (r.sglang_launch) {
    o << "\nSGLang launch: " << printable(r.sglang_launch->text()) << "\n";
    if (!r.sglang_launch->mla_plan_flags.empty()) {
      o << "  mla-plan's assumptions beyond SGLang's flags: "
        << printable(sglang_text::words_of(r.sglang_launch->mla_plan_flags)) << "\n";
    }
    for (const auto& n : r.sglang_launch->notes) o << "  note: " << printable(n) << "\n";
  }
  o << sglang_text::serve_lines(r);  // under "SGLang launch:", as vllm serve's under "launch:"
  return o.str();
}

/// --engine all: one line per engine.
std::string render_engines_text(const PlanResult& r) {
  if (r.engine != EngineChoice::all || !r.sglang || !r.fit) return {};
  std::ostringstream o;
  o.imbue(std::locale::classic());
  const Fit& f = *r.fit;
  const SglangFit& s = *r.sglang;
  o << "\nengines side by side (" << r.target.id << ", max_model_len "
    << (r.layout ? format_grouped(r.layout->max_model_len) : std::string("?")) << "):\n";
  o << "  vLLM " << f.release->version << ": ";
  if (f.refused || !f.decided) {
    o << printable(f.verdict) << "\n";
  } else {
    o << "KV " << format_gib(f.vllm.available_bytes) << " per GPU, " << format_grouped(f.total_kv_tokens) << " tokens, "
      << format_fixed(f.total_concurrency, 2) << "x concurrency" << (f.fits ? "" : " (does not fit)") << "\n";
  }
  o << "  SGLang " << s.generation->id << ": ";
  if (s.refused || !s.decided) {
    o << printable(s.verdict) << "\n";
  } else if (!s.fits) {
    o << "does not start: " << printable(s.error) << "\n";
  } else {
    o << "KV " << format_gib(s.budget_bytes) << " per GPU, " << format_grouped(s.total_tokens) << " tokens, "
      << format_fixed(s.total_requests_at_context, 2) << " requests of max_model_len, max_running_requests "
      << s.max_running_requests * s.workers << "\n";
  }
  return o.str();
}

ojson launch_command_json(const LaunchCommand& c) {
  ojson flags = ojson::array();
  for (const auto& f : c.flags) flags.push_back({{"name", f.name}, {"values", f.values}});
  return {{"env", c.env},     {"argv", c.argv},     {"flags", std::move(flags)}, {"mla_plan_flags", c.mla_plan_flags},
          {"notes", c.notes}, {"command", c.text()}};
}

ojson sglang_json(const PlanResult& r) {
  if (!r.sglang) return nullptr;
  const SglangFit& s = *r.sglang;
  auto terms = [](const std::vector<SglangTerm>& v) {
    ojson a = ojson::array();
    for (const auto& t : v) {
      a.push_back({{"id", t.id}, {"what", t.what}, {"bytes", t.bytes}, {"source", t.source}, {"how", t.how}});
    }
    return a;
  };
  ojson j;
  j["generation"] = {{"id", std::string(s.generation->id)},
                     {"period", std::string(s.generation->period)},
                     {"source", std::string(s.generation->source)}};
  j["architecture"] = s.architecture;
  j["refused"] = s.refused;
  j["refusal"] = s.refusal;
  j["decided"] = s.decided;
  j["fits"] = s.fits;
  j["error"] = s.error;
  j["verdict"] = s.verdict;
  if (r.sglang_input) {
    const SglangInput& in = *r.sglang_input;
    j["layout"] = {{"tp_size", in.tp_size}, {"dp_size", in.dp_size},          {"pp_size", in.pp_size},
                   {"ep_size", in.ep_size}, {"attn_tp_size", s.attn_tp_size}, {"attn_dp_size", s.attn_dp_size},
                   {"workers", s.workers},  {"context_len", s.context_len}};
  } else {
    j["layout"] = nullptr;
  }
  j["server_args"] = {{"mem_fraction_static", s.mem_fraction_static},
                      {"mem_fraction_static_default", s.fraction_default},
                      {"gpu_mem_mib", s.gpu_mem_mib},
                      {"reserve_mib", s.reserve_mib},
                      {"reserve", terms(s.reserve)},
                      {"chunked_prefill_size", s.chunked_prefill_size},
                      {"chunk_per_rank", s.chunk_per_rank},
                      {"max_prefill_tokens", s.max_prefill_tokens},
                      {"cuda_graph_max_bs", s.cuda_graph_max_bs},
                      {"page_size", s.page_size},
                      {"max_running_requests_requested", s.requested_running_requests},
                      {"speculative_num_draft_tokens", s.draft_tokens}};
  j["budget"] = {{"terms", terms(s.terms)},
                 {"free_before_load_bytes", s.free_before_load_bytes},
                 {"available_after_load_bytes", s.available_after_load_bytes},
                 {"budget_bytes", s.budget_bytes},
                 {"min_viable_fraction", s.min_viable_fraction}};
  j["pools"] = {{"layers", s.layers},
                {"layers_c4", s.layers_c4},
                {"layers_c128", s.layers_c128},
                {"layers_c2", s.layers_c2},
                {"layers_c1", s.layers_c1},
                {"bytes_per_full_token", s.bytes_per_full_token},
                {"bytes_per_swa_token", s.bytes_per_swa_token},
                {"swa_mode", s.swa_mode},
                {"swa_full_tokens_ratio", s.swa_ratio},
                {"swa_cap_tokens", s.swa_cap_tokens},
                {"swa_request_cap", s.swa_request_cap},
                {"swa_prefix_tails", s.swa_prefix_tails},
                {"c128_state_fixed_bytes", s.c128_state_fixed},
                {"c2_state_fixed_bytes", s.c2_state_fixed},
                {"swa_fixed_bytes", s.swa_fixed},
                {"full", s.pools.full},
                {"swa", s.pools.swa},
                {"c4", s.pools.c4},
                {"c128", s.pools.c128},
                {"c4_state", s.pools.c4_state},
                {"c128_state", s.pools.c128_state_final},
                {"profiled_full", s.profiled_full ? ojson(*s.profiled_full) : ojson(nullptr)}};
  j["max_total_num_tokens"] = s.pools.full;
  j["max_running_requests"] = s.max_running_requests;
  j["running_requests_reduced"] = s.running_requests_reduced;
  j["request_table_bytes"] = s.request_table_bytes;
  j["left_after_pools_bytes"] = s.left_after_pools_bytes;
  j["requests_at_context"] = s.requests_at_context;
  j["swa_requests"] = s.swa_requests;
  j["total_tokens"] = s.total_tokens;
  j["total_requests_at_context"] = s.total_requests_at_context;
  j["log_lines"] = s.overrides;
  for (const auto& l : s.log_lines) j["log_lines"].push_back(l);
  j["warnings"] = s.warnings;
  j["notes"] = s.notes;
  j["suggestions"] = s.suggestions;
  j["suggestion_flags"] = s.suggestion_flags;
  j["launch"] = r.sglang_launch ? launch_command_json(*r.sglang_launch) : ojson(nullptr);
  return j;
}

}  // namespace mlaplan::cli

// Human-readable output of `plan`. Free-form (scripts use --json), but stable enough to read in
// a terminal or a CI log.

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <locale>
#include <sstream>

#include "output/backend_text.hpp"
#include "report/palette.hpp"
#include "cli/commands.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan::cli {

namespace {

/// "vLLM 0.31.0 (the newest modelled), KV planner ..., V2 model runner, async scheduling on (the
/// release's default), 2 batches in flight"
std::string release_line(const Fit& f) {
  const VllmRelease& r = *f.release;
  std::string s =
      "vLLM " + std::string(r.version) +
      (&r == &newest_vllm_release() ? " (the newest modelled; --vllm-version picks another)" : "") +
      ", KV planner: " + std::string(kv_planner_title(r.planner)) +
      (r.planner_pinned ? "" : " (not pinned to this release)") + ", " + (f.model_runner_v2 ? "V2" : "V1") +
      " model runner, async scheduling " + (f.async_scheduling ? "on" : "off") +
      (f.async_default ? " (the release's default)" : " (--async-scheduling flag)") + ", " +
      std::to_string(f.batches_in_flight) + " batch" + (f.batches_in_flight == 1 ? "" : "es") + " in flight" +
      (r.reserve_counts_batches ? "" : " (this planner reserves one batch of the window whatever the count)");
  return s;
}

std::string join(const std::vector<std::int64_t>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  return s.empty() ? "none" : s;
}

std::string layer_label(std::int64_t a, std::int64_t b) {
  return a == b ? "layer " + std::to_string(a) : "layers " + std::to_string(a) + "-" + std::to_string(b);
}

/// "layers 0-1", "layers 2-42 (every 2nd, 21 layers)", or a list of ranges.
std::string describe_set(const std::vector<std::int64_t>& ids) {
  const auto n = static_cast<std::int64_t>(ids.size());
  if (n == 1) return "layer " + std::to_string(ids[0]);
  const auto step = ids[1] - ids[0];
  bool progression = true;
  for (std::int64_t i = 1; i < n; ++i)
    progression = progression && ids[static_cast<std::size_t>(i)] - ids[static_cast<std::size_t>(i - 1)] == step;
  if (progression && step == 1) return layer_label(ids.front(), ids.back());
  if (progression) {
    return layer_label(ids.front(), ids.back()) + " (every " + std::to_string(step) +
           (step == 2   ? "nd"
            : step == 3 ? "rd"
                        : "th") +
           ", " + std::to_string(n) + " layers)";
  }
  std::string s = "layers ";
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (i) s += ", ";
    s += ids[i] == ids[j] ? std::to_string(ids[i]) : std::to_string(ids[i]) + "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return s + " (" + std::to_string(n) + " layers)";
}

std::string type_meaning(LayerType t) {
  switch (t) {
    case LayerType::swaonly: return "window only";
    case LayerType::c1a: return "window + full-length compressed cache (top-k)";
    case LayerType::c2a: return "window + ratio-2 compressed cache (top-k)";
    case LayerType::c4a: return "window + ratio-4 compressed cache (top-k, own indexer)";
    case LayerType::c128a: return "window + all ratio-128 compressed entries";
    case LayerType::dsa: return "top-k sparse over the whole latent history";
  }
  return "?";
}

}  // namespace

std::string human_bytes(std::int64_t b);
std::string render_schedule_summary(const ScheduleEntry& e, bool show_records);
std::string render_layout_text(const PlanResult& r);
std::string render_backend_text(const PlanResult& r);
std::string render_fit_text(const PlanResult& r);
std::string render_search_text(const PlanResult& r);
std::string render_launch_text(const PlanResult& r);
std::string render_sweep_text(const PlanResult& r, bool details);
std::string render_kv_tiers_text(const PlanResult& r, bool details);
std::string render_cache_summary(const PlanResult& r);
std::string render_decode_summary(const PlanResult& r);
std::string render_prefill_text(const PlanResult& r, bool details);
std::string render_context_parallel_text(const PlanResult& r, bool details);
std::string render_sglang_text(const PlanResult& r, bool details);
std::string render_engines_text(const PlanResult& r);

std::string render_log_check_text(const PlanResult& r) {
  if (!r.log_check) return {};
  const LogCheck& c = *r.log_check;
  std::ostringstream o;
  o.imbue(std::locale::classic());
  o << "\nstart-up log " << printable(c.file, kQuotedPathMaxBytes)
    << (c.vllm_version.empty()                   ? ""
        : c.vllm_version.rfind("SGLang", 0) == 0 ? " (" + printable(c.vllm_version) + ")"
                                                 : " (vLLM " + printable(c.vllm_version) + ")")
    << (c.model_runner_v2 ? ", V2 model runner" : "") << ", against the model's plan of the same flags:\n";
  char line[512];
  std::snprintf(line, sizeof line, "  %-58s %14s %14s  %s\n", "", "this plan", "the log", "");
  o << line;
  for (const auto& x : c.rows) {
    auto fmt = [&](const std::optional<double>& v) -> std::string {
      if (!v) return "-";
      if (x.unit == "tokens" || x.unit == "requests") return format_grouped(static_cast<std::int64_t>(*v));
      if (x.unit == "B") return format_fixed(*v, 2) + " B";
      if (x.unit.empty()) return format_shortest(*v);
      return format_fixed(*v, 2) + (x.unit == "x" ? "x" : " GiB");
    };
    std::snprintf(line, sizeof line, "  %-58s %14s %14s  %s\n", x.what.c_str(), fmt(x.planned).c_str(),
                  fmt(x.logged).c_str(), x.disagrees ? "DISAGREES" : (x.planned && x.logged ? "agrees" : ""));
    o << line;
  }
  for (const auto& a : c.applied) o << "  measured, used in the plan above: " << printable(a) << "\n";
  for (const auto& n : c.notes) o << "  note: " << printable(n) << "\n";
  return o.str();
}

std::string render_plan_text(const PlanResult& r, bool show_records) { return render_plan_text(r, show_records, true); }

std::string render_plan_text(const PlanResult& r, bool show_records, bool details) {
  details = details || show_records;
  const auto& c = r.config;
  const auto& t = r.topology;
  std::ostringstream o;
  o.imbue(std::locale::classic());  // no digit grouping from the global locale
  o << "mla-plan: " << printable(c.source, kQuotedPathMaxBytes) << "\n";
  o << "model: " << family_title(c.family) << " (" << to_string(c.family)
    << (c.composite ? ", composite: attention fields under text_config" : "") << ")\n";
  o << "  " << c.num_hidden_layers << " layers + " << c.num_draft_layers << " draft, " << c.num_attention_heads
    << " query heads, head_dim " << c.head_dim;
  if (c.sliding_window > 0) o << ", window " << c.sliding_window;
  o << ", index_topk " << c.index_topk << ", max positions " << format_grouped(c.max_position_embeddings);
  if (!c.dtype.empty()) o << ", dtype " << printable(c.dtype, kQuotedMaxBytes);
  o << "\n";
  o << render_search_text(r);
  if (r.engine == EngineChoice::sglang) {
    // SGLang's answer replaces vLLM's fit, tiers and launch command.
    o << render_sglang_text(r, details);
    o << render_log_check_text(r);
  } else {
    o << render_engines_text(r);
    o << render_fit_text(r);
    o << render_log_check_text(r);
    o << render_prefill_text(r, details);
    o << render_context_parallel_text(r, details);
    o << render_kv_tiers_text(r, details);
    o << render_launch_text(r);
    o << render_sglang_text(r, details);
  }
  o << render_sweep_text(r, details);
  o << "\n";

  o << "layer types (one decode plan each):\n";
  for (auto type : t.types_present) {
    const auto n = t.count(type);
    const auto d = t.count_draft(type);
    o << "  " << to_string(type) << "  " << n << " layer" << (n == 1 ? "" : "s");
    if (d > 0) o << " (" << (n - d) << " + " << d << " draft)";
    o << "  - " << type_meaning(type) << "\n";
  }

  o << "\nlayers:\n";
  if (c.family == Family::deepseek_v41) {
    for (const auto& run : t.runs) {
      o << "  " << layer_label(run.first, run.last) << ": " << to_string(run.type);
      if (run.draft) o << ", draft (DSpark)";
      if (run.kv_source) {
        o << ", read layer " << *run.kv_source << "'s cache";
        if (!run.index_sources.empty()) o << ", top-k from " << join(run.index_sources);
      } else {
        o << ", window only";
      }
      o << "\n";
    }
  } else {
    // V4.0 / V3.2: every compressed layer owns its cache; group by type and draft flag and
    // describe each group's layer set compactly (V4.0 alternates c4a and c128a).
    std::vector<std::pair<std::pair<LayerType, bool>, std::vector<std::int64_t>>> groups;
    for (const auto& l : t.layers) {
      auto key = std::make_pair(l.type, l.draft);
      auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
      if (it == groups.end()) {
        groups.push_back({key, {}});
        it = std::prev(groups.end());
      }
      it->second.push_back(l.index);
    }
    for (const auto& [key, ids] : groups) {
      o << "  " << describe_set(ids) << ": " << to_string(key.first);
      if (key.second) o << (t.dspark_drafts ? ", draft (DSpark)" : ", draft (MTP)");
      if (key.first == LayerType::swaonly) o << ", window only";
      else if (key.first == LayerType::c4a) o << ", each owns its compressed cache and indexer";
      else if (key.first == LayerType::c128a) o << ", each owns its compressed cache";
      else o << ", each owns its latent and indexer cache";
      o << "\n";
    }
  }

  if (details && c.family == Family::deepseek_v41) {
    std::vector<std::int64_t> publishing;
    for (auto id : t.index_sources()) {
      if (!t.layers[static_cast<std::size_t>(id)].is_reindex) publishing.push_back(id);
    }
    o << "\nsources:\n";
    o << "  KV sources: " << join(t.kv_sources()) << "\n";
    o << "  index sources: " << join(publishing) << " (publishing)";
    if (!t.reindex_layers().empty()) o << "; " << join(t.reindex_layers()) << " (reindex)";
    o << "\n";
    if (auto cs = t.candidate_source()) {
      o << "  candidate source: " << *cs << " (top " << c.candidate_topk_blocks << " blocks of "
        << c.candidate_block_size << " = " << c.candidate_topk_blocks * c.candidate_block_size << " positions)\n";
    } else {
      o << "  candidate source: none (disabled)\n";
    }
  } else if (details && c.family == Family::deepseek_v4) {
    o << "\nsources:\n";
    o << "  compressed-cache owners: " << t.kv_sources().size() << " layers; indexers: " << t.index_sources().size()
      << " (c4a)\n";
  }

  if (!details) {
    // The deployer's screen: the caches and the decode in words; the rest under --details.
    o << render_cache_summary(r) << render_decode_summary(r);
  } else {
    o << render_layout_text(r);
  }
  const std::string remark = schedules_remark(r);
  if (details && !r.schedules.empty()) {
    o << "\ndecode schedules for " << r.batch.description << ":\n";
    if (!remark.empty()) o << "  note: " << remark << "\n";
    for (const auto& s : r.schedules) {
      ScheduleEntry e{std::string(to_string(s.type)) + " (" + std::to_string(s.num_layers) + " layer" +
                          (s.num_layers == 1 ? "" : "s") + ")",
                      s.input, s.plan};
      o << render_schedule_summary(e, show_records);
      o << "    inputs: topk " << s.topk << " (page " << s.page_block_size << ")";
      if (s.extra_topk > 0) o << " + extra_topk " << s.extra_topk << " (page " << s.extra_page_block_size << ")";
      if (!s.note.empty()) o << "; " << s.note;
      o << "\n";
      o << "    mla-plan decode: " << to_string(s.mode.mode) << " (" << s.mode.reason << ")\n";
    }
  } else if (details && r.layout) {
    o << "\ndecode schedules: none; " << remark << "\n";
  }
  std::vector<const Finding*> problems, notes;
  for (const auto& f : r.findings) (f.severity == Severity::info ? notes : problems).push_back(&f);
  if (!problems.empty()) {
    o << "\nfindings:\n";
    for (const auto* f : problems) {
      o << "  " << to_string(f->severity) << " [" << f->id << "]: " << printable(f->message) << "\n";
      if (!f->fix.empty()) o << "    fix: " << printable(f->fix) << "\n";
    }
  }
  if (details && !notes.empty()) {
    o << "\nnotes:\n";
    for (const auto* f : notes) o << "  " << printable(f->message) << "\n";
  }
  if (!details) {
    o << "\nmore with --details: the target and parallelism, the attention backend's kernel shapes, every cache object "
         "and page pool, the tile-scheduler plans and the project's kernel modes, and "
      << notes.size() << " note" << (notes.size() == 1 ? "" : "s") << " (defaults applied, how values were chosen)\n";
  }
  return o.str();
}

}  // namespace mlaplan::cli

namespace mlaplan::cli {

std::string human_bytes(std::int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return format_fixed(v, u == 0 ? 0 : 2) + " " + units[u];
}

std::string render_schedule_summary(const ScheduleEntry& e, bool show_records) {
  const auto& p = e.plan;
  std::ostringstream o;
  o.imbue(std::locale::classic());  // no digit grouping from the global locale
  const auto parts = p.params.num_sm_parts;
  o << "  " << (e.layer_type.empty() ? std::string("schedule") : e.layer_type) << ": kernel " << to_string(p.kernel)
    << ", b " << p.batch << ", h_q " << e.input.h_q << ", s_q " << e.input.s_q
    << (e.input.has_extra ? ", with extra cache" : "") << "\n";
  o << "    partitions: " << parts << " (" << (parts - p.idle_partitions) << " used, " << p.idle_partitions
    << " idle), payload " << p.payload << " (block " << p.params.block << ", overhead " << p.params.fixed_overhead
    << ")\n";
  o << "    blocks per used partition: " << p.min_blocks_per_partition << "-" << p.max_blocks_per_partition;
  if (p.max_blocks_per_partition > 0) {
    o << " (balance " << (100 * p.min_blocks_per_partition / p.max_blocks_per_partition) << "%)";
  }
  o << "\n";
  o << "    splits: " << p.split_requests << " of " << p.batch << " requests split (at most " << p.max_splits
    << (p.max_splits == 1 ? " partial" : " partials") << " per request), " << p.total_partials << " partial"
    << (p.total_partials == 1 ? "" : "s") << " in all; FlashMLA's fp32 accumulators " << human_bytes(p.accum_bytes)
    << "\n";
  if (show_records) {
    o << "    part  begin_req  end_req  begin_block  end_block  begin_split  first_split  last_split\n";
    for (std::size_t i = 0; i < p.records.size(); ++i) {
      const auto& r = p.records[i];
      char line[160];
      std::snprintf(line, sizeof line, "    %4zu  %9d  %7d  %11d  %9d  %11d  %11d  %10d%s\n", i, r[0], r[1], r[2], r[3],
                    r[4], r[5], r[6], r[0] >= p.batch ? "  (idle)" : "");
      o << line;
    }
    o << "    num_splits: [";
    for (std::size_t i = 0; i < p.num_splits.size(); ++i) o << (i ? ", " : "") << p.num_splits[i];
    o << "]\n";
  }
  return o.str();
}

std::string render_schedules_text(const std::vector<ScheduleEntry>& entries, bool show_records) {
  std::ostringstream o;
  o.imbue(std::locale::classic());  // no digit grouping from the global locale
  o << "decode schedules (FlashMLA tile scheduler):\n";
  for (const auto& e : entries) o << render_schedule_summary(e, show_records);
  return o.str();
}

}  // namespace mlaplan::cli

namespace mlaplan::cli {

namespace {

std::string fixed(double v, int digits) { return format_fixed(v, digits); }

}  // namespace

/// The attention backend: its title, how it was chosen, its decode path, the kernels it launches
/// and one row per kernel shape (a note and a fix under each shape that is not available).
std::string render_backend_text(const PlanResult& r) {
  if (!r.layout) return {};
  const Layout& l = *r.layout;
  const BackendInfo& b = backend_info(l.backend);
  std::ostringstream o;
  o.imbue(std::locale::classic());  // no digit grouping from the global locale
  o << "attention backend: " << backend_heading(r) << "\n";
  if (!l.backend_how.empty()) o << "  chosen: " << printable(l.backend_how) << "\n";
  o << "  decode path: " << b.decode_path << "\n";
  if (r.kernel_shapes.empty()) return o.str();
  std::vector<std::string> kernels;
  for (const auto& s : r.kernel_shapes) {
    if (std::find(kernels.begin(), kernels.end(), s.kernel) == kernels.end()) kernels.push_back(s.kernel);
  }
  o << "  kernels:";
  for (std::size_t i = 0; i < kernels.size(); ++i) o << (i ? ", " : " ") << printable(kernels[i]);
  o << "\n  kernel shapes (heads: per rank -> what the kernel runs):\n";
  // Column widths from the longest cell (layer types and widths vary by family).
  int types_w = 11, heads_w = 5, topk_w = 14, pages_w = 9;
  for (const auto& s : r.kernel_shapes) {
    types_w = std::max(types_w, static_cast<int>(shape_layer_types(s).size()));
    heads_w = std::max(heads_w, static_cast<int>(shape_heads(s).size()));
    topk_w = std::max(topk_w, static_cast<int>(shape_topk(s).size()));
    pages_w = std::max(pages_w, static_cast<int>(shape_page_rows(s).size()));
  }
  char line[512];
  std::snprintf(line, sizeof line, "    %-7s  %-*s  %-*s  %4s  %-*s  %-*s  %s\n", "phase", types_w, "layer types",
                heads_w, "heads", "d_qk", topk_w, "topk (+ extra)", pages_w, "page rows", "status");
  o << line;
  for (const auto& s : r.kernel_shapes) {
    std::snprintf(line, sizeof line, "    %-7s  %-*s  %-*s  %4lld  %-*s  %-*s  %s\n", printable(s.phase).c_str(),
                  types_w, shape_layer_types(s).c_str(), heads_w, shape_heads(s).c_str(),
                  static_cast<long long>(s.d_qk), topk_w, shape_topk(s).c_str(), pages_w, shape_page_rows(s).c_str(),
                  std::string(to_string(s.status)).c_str());
    o << line;
    if (s.status != ShapeStatus::available) {
      if (!s.note.empty()) o << "      note: " << printable(s.note) << "\n";
      if (!s.fix.empty()) o << "      fix: " << printable(s.fix) << "\n";
    }
  }
  return o.str();
}

/// "1827.25" -> "1,827.25": digit groups in the integer part of an exact decimal.
std::string grouped_decimal(const std::string& d) {
  const auto dot = d.find('.');
  const std::string whole = d.substr(0, dot);
  std::string out;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    if (i > 0 && (whole.size() - i) % 3 == 0 && std::isdigit(static_cast<unsigned char>(whole[i - 1]))) out += ',';
    out += whole[i];
  }
  return out + (dot == std::string::npos ? std::string() : d.substr(dot));
}

/// The caches for a deployer: what the KV cache stores and what one token and one request cost.
std::string render_cache_summary(const PlanResult& r) {
  std::ostringstream o;
  o.imbue(std::locale::classic());
  if (!r.layout) return "\ncaches: none (no layout)\n";
  const auto& l = *r.layout;
  const auto& a = l.accounting;
  o << "\ncaches: " << to_string(l.kv_cache_dtype) << " rows";
  if (l.kv_cache_dtype_requested != to_string(l.kv_cache_dtype))
    o << " (--kv-cache-dtype " << l.kv_cache_dtype_requested << ")";
  o << ", pages of " << l.block_size << " tokens, for " << backend_heading(r) << "\n";
  o << "  per token of history: " << grouped_decimal(a.global_rows.str()) << " B in rows (DeepSeek's accounting), "
    << grouped_decimal(a.global_pages.str()) << " B in pages (the engine's)\n";
  o << "  per request, bounded (windows, compressor states): " << human_bytes(a.per_request_rows) << " in rows, "
    << human_bytes(a.per_request_pages) << " in pages\n";
  o << "  one request of max_model_len " << format_grouped(l.max_model_len) << " tokens: " << format_gib(a.total_rows)
    << " in rows, " << format_gib(a.total_pages) << " in pages\n";
  return o.str();
}

/// The decode step for a deployer: what the engine runs for this backend and GPU, and per layer
/// type how the FlashMLA tile scheduler spreads the batch (when the backend takes its plans).
std::string render_decode_summary(const PlanResult& r) {
  std::ostringstream o;
  o.imbue(std::locale::classic());
  if (!r.layout) return {};
  const BackendInfo& b = backend_info(r.layout->backend);
  o << "\ndecode of " << r.batch.description << ": vLLM runs " << b.decode_path << "\n";
  if (!b.tile_plans && r.schedules.empty()) {
    o << "  (" << schedules_remark(r) << ")\n";
    return o.str();
  }
  if (r.schedules.empty()) {
    o << "  " << schedules_remark(r) << "\n";
    return o.str();
  }
  if (!b.tile_plans) o << "  (" << schedules_remark(r) << ")\n";
  for (const auto& s : r.schedules) {
    const auto& p = s.plan;
    const auto parts = p.params.num_sm_parts;
    o << "  " << to_string(s.type) << " (" << s.num_layers << (s.num_layers == 1 ? " layer" : " layers")
      << "): " << format_grouped(parts - p.idle_partitions) << " of " << format_grouped(parts)
      << " SM partitions busy; ";
    if (p.split_requests == 0) {
      o << "each request in one partition, nothing to merge\n";
    } else {
      o << format_grouped(p.split_requests) << " of " << format_grouped(p.batch)
        << (p.batch == 1 ? " request" : " requests") << " split over several partitions, their "
        << format_grouped(p.total_partials) << " partial results merged by a combine kernel\n";
    }
  }
  return o.str();
}

std::string render_layout_text(const PlanResult& r) {
  std::ostringstream o;
  o.imbue(std::locale::classic());  // no digit grouping from the global locale
  const auto& t = r.target;
  o << "\ntarget: " << t.id << " (" << t.name << ", " << t.cc.sm() << ", " << t.num_sms << " SMs, "
    << format_gib(t.memory_bytes);
  if (t.runtime_memory_bytes > 0 && t.runtime_memory_bytes != t.memory_bytes) {
    o << " nominal, " << format_gib(t.runtime_memory_bytes) << " as the CUDA runtime reports it";
  }
  o << ")";
  if (t.default_used) o << ", the default: choose with --gpu or --arch";
  o << "\n";
  if (!r.layout) return o.str();
  const auto& l = *r.layout;
  o << "kv cache: " << to_string(l.kv_cache_dtype);
  if (l.kv_cache_dtype_requested != to_string(l.kv_cache_dtype)) o << " (from " << l.kv_cache_dtype_requested << ")";
  o << ", indexer " << to_string(l.indexer_cache_dtype) << ", block " << l.block_size;
  if (l.window_block_size > 0) o << ", window block " << l.window_block_size;
  o << ", max_model_len " << format_grouped(l.max_model_len) << "\n";
  o << render_backend_text(r);
  const auto& p = l.parallel;
  o << "parallelism: TP " << p.tensor_parallel_size << " (" << p.local_query_heads << " query heads per rank";
  // 8 or 16 heads the backend runs as they are (TRITON_MLA_SPARSE_DSV41, FlashInfer): not padded.
  if (p.padded_query_heads > 0 && p.padded_query_heads == p.local_query_heads && p.padded_query_heads < 64) {
    o << ", unpadded";
  } else if (p.padded_query_heads > 0) {
    o << ", padded to " << p.padded_query_heads;
  }
  o << "), PP " << p.pipeline_parallel_size << ", DP " << p.data_parallel_size << "\n";

  // Cache objects grouped by what they are.
  struct Row {
    std::string kind, format, scope;
    std::int64_t ratio, rows, tokens, unpadded, page;
    std::int64_t count = 0, draft = 0;
  };
  std::vector<Row> rows;
  for (const auto& obj : l.objects) {
    Row key{std::string(to_string(obj.kind)),
            obj.format_name,
            std::string(to_string(obj.scope)),
            obj.compress_ratio,
            obj.rows_per_page,
            obj.tokens_per_page,
            obj.unpadded_page_bytes,
            obj.page_bytes};
    auto it = std::find_if(rows.begin(), rows.end(), [&](const Row& x) {
      return x.kind == key.kind && x.format == key.format && x.ratio == key.ratio && x.page == key.page &&
             x.rows == key.rows && x.scope == key.scope;
    });
    if (it == rows.end()) {
      rows.push_back(key);
      it = std::prev(rows.end());
    }
    ++it->count;
    if (obj.draft) ++it->draft;
  }
  o << "\ncache objects:\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-17s %-16s %5s %6s %9s %11s %18s %13s\n", "kind", "format", "ratio", "count",
                "rows/page", "tokens/page", "page B (unpadded)", "B/token");
  o << line;
  for (const auto& x : rows) {
    std::string count = std::to_string(x.count);
    if (x.draft) count += "*";
    std::string per_token = x.scope == "global" && x.tokens > 0
                                ? fixed(static_cast<double>(x.page) / static_cast<double>(x.tokens), 2)
                                : std::string("per request");
    std::snprintf(line, sizeof line, "  %-17s %-16s %5lld %6s %9lld %11lld %9s (%7s) %13s\n", x.kind.c_str(),
                  x.format.c_str(), static_cast<long long>(x.ratio), count.c_str(), static_cast<long long>(x.rows),
                  static_cast<long long>(x.tokens), format_grouped(x.page).c_str(), format_grouped(x.unpadded).c_str(),
                  per_token.c_str());
    o << line;
  }
  if (std::any_of(rows.begin(), rows.end(), [](const Row& x) { return x.draft > 0; })) {
    o << "  (* includes draft layers' caches)\n";
  }
  o << "page pools (caches of equal page size share one): ";
  for (std::size_t i = 0; i < l.groups.size(); ++i) {
    const auto& g = l.groups[i];
    o << (i ? ", " : "") << g.objects.size() << " cache" << (g.objects.size() == 1 ? "" : "s") << " of "
      << format_grouped(g.page_bytes) << " B pages";
  }
  o << "\n";
  // The accounting, as on the first screen.
  o << render_cache_summary(r);
  return o.str();
}

}  // namespace mlaplan::cli

namespace mlaplan::cli {

namespace {

std::string part_title(WeightPart p) {
  std::string s(to_string(p));
  for (auto& c : s) {
    if (c == '_') c = ' ';
  }
  return s;
}

}  // namespace

std::string render_fit_text(const PlanResult& r) {
  if (!r.fit || !r.layout) return {};
  const Fit& f = *r.fit;
  const Layout& L = *r.layout;
  const auto& pl = f.placement.layout;
  std::ostringstream o;
  o.imbue(std::locale::classic());
  // The refusal that decides the exit is the placement's own (LAYOUT REJECTED) or a rule's (REFUSED,
  // with the placement's rejections, if any, under it), as JSON, markdown and the report say.
  const bool placement_refusal =
      f.refused && !f.placement.ok() &&
      std::any_of(f.placement.findings.begin(), f.placement.findings.end(),
                  [&](const Finding& x) { return x.severity == Severity::error && x.message == f.refusal; });
  o << "\nfit: "
    << (f.refused          ? (f.placement.ok() || !placement_refusal ? "REFUSED" : "LAYOUT REJECTED")
        : !f.decided       ? "NOT DECIDED"
        : f.fits           ? "FITS"
        : f.placement.ok() ? "DOES NOT FIT"
                           : "LAYOUT REJECTED")
    << " on " << pl.gpus() << " x " << r.target.id << " (TP " << pl.tensor_parallel_size << " x DP "
    << pl.data_parallel_size << " x PP " << pl.pipeline_parallel_size << ", expert parallel "
    << (pl.enable_expert_parallel ? "on, EP " + std::to_string(pl.expert_parallel_size()) : std::string("off"))
    << "), as vLLM " << f.release->version << " computes it at start-up\n";
  if (f.refused && !f.placement.ok()) {
    if (!placement_refusal) o << "  " << printable(f.verdict) << "\n";
    for (const auto& x : f.placement.findings) {
      if (x.severity == Severity::error) o << "  rejected: " << printable(x.message) << "\n";
    }
  } else if (f.refused || !f.decided) {
    o << "  " << printable(f.verdict) << "\n"
      << (f.refused ? "  (vLLM does not start: the numbers below are what the layout would need)\n"
                    : "  (the numbers below count only the tensors whose storage is known)\n");
  } else if (f.placement.ok()) {
    if (f.vllm.fits) {
      std::string lines = f.vllm.log_line;  // v0.25's two lines: one under the other
      for (std::size_t at = 0; (at = lines.find('\n', at)) != std::string::npos; at += 15)
        lines.insert(at + 1, 14, ' ');
      o << "  vLLM prints: " << lines << "\n";
      if (f.engines > 1) {
        o << "  " << f.engines << " DP engines, each its own KV cache: " << format_fixed(f.total_concurrency, 2)
          << "x requests of " << format_grouped(L.max_model_len) << " tokens, " << format_grouped(f.total_kv_tokens)
          << " tokens in all\n";
      }
      if (!f.fits) o << "  but: " << printable(f.error_message) << "\n";
      if (const auto& bf = r.batch_fit) {
        o << "  decode batch: " << format_grouped(bf->requests) << (bf->requests == 1 ? " request, " : " requests, ")
          << format_grouped(bf->tokens) << " tokens of history, need " << format_grouped(bf->blocks) << " of the "
          << format_grouped(bf->usable_blocks) << " blocks" << (f.engines > 1 ? " of one engine" : "") << ": "
          << (bf->fits ? std::string("fits")
                       : "DOES NOT FIT (" + format_grouped(bf->requests_that_fit) +
                             " of them fit at once; fit.decode_batch)")
          << "\n";
      }
    } else if (f.weights_exceed_gpu) {
      o << "  " << printable(f.error_message) << "\n";
    } else {
      o << "  vLLM raises: " << printable(f.vllm.error_message) << "\n";
    }
    if (const auto& m = f.margin) {
      o << "  margin: " << format_gib(m->spare_bytes) << " to spare on the limiting GPU beside "
        << format_gib(m->estimated_bytes) << " of estimated terms, uncertain by about "
        << format_gib(m->uncertainty_bytes) << (m->borderline ? ": BORDERLINE (fit.borderline)" : "") << "\n";
    }
    for (const auto& s : f.suggestions) o << "  would fit: " << printable(s) << "\n";
  } else {
    for (const auto& x : f.placement.findings) {
      if (x.severity == Severity::error) o << "  rejected: " << printable(x.message) << "\n";
    }
  }
  const std::int64_t ckpt = f.weights->total_bytes();
  o << "  weights: " << format_grouped(ckpt) << " B (" << format_gib(ckpt) << ") in the checkpoint"
    << (f.weights->known ? "" : " so far") << ", " << printable(f.weights_how);
  o << "\n    parameters: " << format_fixed(static_cast<double>(f.weights->main.params) / 1e9, 2)
    << " B in the main model, " << format_fixed(static_cast<double>(f.weights->active_params) / 1e9, 2)
    << " B active per token";
  if (const auto pub = published_params(r.config)) {
    o << "; published for " << pub->model << ": " << format_general(pub->total_billions) << "B / "
      << format_general(pub->active_billions) << "B (" << pub->source << ")";
  }
  o << "\n";
  if (f.files && f.files->mismatch_count > 0) {
    o << "    the files and the config-derived contract disagree in " << f.files->mismatch_count << " place"
      << (f.files->mismatch_count == 1 ? "" : "s") << ":";
    for (const auto& m : f.files->mismatches) {
      o << "\n      " << printable(m.tensor, kQuotedMaxBytes) << ": " << m.what;
      if (!m.contract.empty() || !m.files.empty())
        o << " (contract " << (m.contract.empty() ? "-" : m.contract) << ", files " << (m.files.empty() ? "-" : m.files)
          << ")";
    }
    o << "\n";
  }
  if (!f.speculative && r.config.num_draft_layers > 0) {
    o << "    draft stages not loaded (vLLM loads them with a speculative config: --spec-tokens K)\n";
  }
  for (const auto& st : f.stages) {
    const RankWeights& w = st.weights;
    const Budget& b = st.budget;
    o << "  per GPU";
    if (f.stages.size() > 1) o << " of stage " << w.stage << " (layers " << w.first_layer << "-" << w.last_layer << ")";
    o << ": weights " << format_gib(w.total_bytes) << " = replicated " << format_gib(w.replicated_bytes)
      << " + TP-sharded " << format_gib(w.tensor_bytes) << " + experts " << format_gib(w.expert_bytes);
    if (w.experts_per_rank > 0) o << " (" << w.experts_per_rank << " experts per layer)";
    if (w.host_bytes > 0) o << "; " << format_gib(w.host_bytes) << " offloaded to the host";
    o << "\n    by part:";
    bool first = true;
    for (std::size_t i = 0; i < kWeightPartCount; ++i) {
      if (w.part_bytes[i] == 0) continue;
      const double g = static_cast<double>(w.part_bytes[i]) / 1073741824.0;
      o << (first ? " " : ", ") << part_title(static_cast<WeightPart>(i)) << " "
        << (g < 0.005 ? std::string("<0.01") : format_fixed(g, 2));
      first = false;
    }
    o << " (GiB)\n";
    char line[512];
    std::snprintf(line, sizeof line, "    %-22s %11s  %-9s %s\n", "total memory", format_gib(b.total_bytes).c_str(),
                  std::string(to_string(b.total_source)).c_str(), printable(b.total_how).c_str());
    o << line;
    if (b.explicit_kv_bytes) {
      std::snprintf(line, sizeof line, "    %-22s %11s  %-9s %s\n", "KV cache (given)",
                    format_gib(b.available_bytes).c_str(), "given", "--kv-cache-memory-bytes: no budget is computed");
      o << line;
    } else {
      const std::string req = "requested (x " + format_fixed(b.gpu_memory_utilization, 2) + ")";
      std::snprintf(line, sizeof line, "    %-22s %11s  %-9s %s\n", req.c_str(), format_gib(b.requested_bytes).c_str(),
                    b.utilization_default ? "default" : "given",
                    b.utilization_default
                        ? ("vLLM " + std::string(f.release->version) + "'s --gpu-memory-utilization").c_str()
                        : "--gpu-memory-utilization");
      o << line;
      for (const auto& t : b.terms) {
        const std::string label = "- " + t.label;
        std::snprintf(line, sizeof line, "    %-22s %11s  %-9s %s [%s]\n", label.c_str(), format_gib(t.bytes).c_str(),
                      std::string(to_string(t.source)).c_str(), printable(t.how).c_str(), t.flag.c_str());
        o << line;
      }
      std::snprintf(line, sizeof line, "    %-22s %11s  %-9s %s\n", "= KV cache", format_gib(b.available_bytes).c_str(),
                    "", "vLLM logs \"Available KV cache memory\"");
      o << line;
    }
    const VllmKvConfig& kv = st.kv;
    o << "    vLLM KV layout: " << kv.group_count() << " group" << (kv.group_count() == 1 ? "" : "s") << " of "
      << kv.specs.size() << " specs, " << format_grouped(kv.bytes_per_block) << " B per block, "
      << format_grouped(kv.blocks_per_request) << " blocks per request of " << format_grouped(L.max_model_len)
      << " tokens\n";
  }
  o << "  (" << release_line(f) << "; " << L.in_flight_tokens << " batched tokens)\n";
  if (f.other_generation) {
    o << "  the KV planner of vLLM " << f.release->version << " is not pinned; under the "
      << kv_planner_title(f.release->planner == KvPlannerGeneration::packed_buckets
                              ? KvPlannerGeneration::generic_packed
                              : KvPlannerGeneration::packed_buckets)
      << " vLLM would print: " << printable(f.other_generation->log_line) << "\n";
  }
  return o.str();
}

}  // namespace mlaplan::cli

namespace mlaplan::cli {

std::string render_prefill_text(const PlanResult& r, bool details) {
  if (!r.fit || !r.layout) return {};
  std::ostringstream o;
  o.imbue(std::locale::classic());
  const auto& p = r.prefill;
  if (!p) {
    if (r.fit->decided && r.fit->fits) return {};  // no indexer layer: no transient
    o << "  prefill workspace: not computed (the fit has no KV cache to compare it with)\n";
    return o.str();
  }
  const std::int64_t chunk = std::min(p->chunk_tokens, p->max_model_len);
  o << "  prefill workspace: the sparse indexer's transient at max_model_len " << format_grouped(p->max_model_len)
    << " is " << format_gib(p->peak_bytes) << " per GPU, " << format_gib(p->headroom_bytes) << " left: "
    << (p->fits
            ? std::string("fits")
            : "DOES NOT FIT (longest prompt " + format_grouped(p->longest_prompt) + " tokens; fit.prefill_transient)")
    << "\n";
  if (!details) {
    o << "    (" << p->engine << ")\n";
    return o.str();
  }
  const IndexerLayerShape* peak = nullptr;
  for (const auto& l : p->shape.layers) {
    if (l.layer == p->peak_layer) peak = &l;
  }
  o << "    modelled: " << p->engine << "; one indexer layer's scores alive at a time\n";
  for (const auto& l : p->shape.layers) {
    o << "    " << l.layers << " indexer layer" << (l.layers == 1 ? "" : "s") << " from layer " << l.layer
      << ": N = " << (l.compress_ratio == 1 ? std::string("L") : "floor(L / " + std::to_string(l.compress_ratio) + ")")
      << (p->shape.decode_context_parallel_size > 1 ? " / DCP " + std::to_string(p->shape.decode_context_parallel_size)
                                                    : std::string())
      << " entries, " << 4 + l.mask_bytes << " B per element (fp32 scores"
      << (l.mask_bytes > 0 ? " + " + std::to_string(l.mask_bytes) + " B of candidate masks, uncertain in vLLM" : "")
      << ")\n";
  }
  if (peak) {
    o << "    at max_model_len: " << format_grouped(chunk) << "-token chunk x " << format_grouped(p->entries)
      << " entries of layer " << p->peak_layer << " = " << format_grouped(p->peak_bytes) << " B ("
      << format_gib(p->peak_bytes) << "); the profile run saw " << format_gib(p->profile_bytes) << " at its "
      << format_grouped(chunk) << "-token context\n";
  }
  o << "    headroom: " << format_gib(p->total_bytes) << " GPU - " << format_gib(p->budgeted_bytes)
    << " budgeted (weights, start-up terms, the allocated KV cache) = " << format_gib(p->headroom_bytes) << " ("
    << format_grouped(p->budget_slack_bytes) << " B of it inside the requested fraction, the rest outside)\n";
  o << "    longest prompt that fits: " << format_grouped(p->longest_prompt) << " tokens; chunk that makes "
    << format_grouped(p->max_model_len) << " safe: "
    << (p->any_chunk        ? std::string("any (the tiles bound the peak)")
        : p->safe_chunk > 0 ? "--max-num-batched-tokens " + format_grouped(p->safe_chunk) + " or fewer"
                            : std::string("none (one row of scores is wider than the headroom)"))
    << "\n";
  return o.str();
}

std::string render_context_parallel_text(const PlanResult& r, bool details) {
  if (!r.fit || !r.fit->context_parallel) return {};
  const ContextParallelFit& cp = *r.fit->context_parallel;
  std::ostringstream o;
  o.imbue(std::locale::classic());
  o << "  decode context parallel " << cp.decode_context_parallel_size << ": "
    << (cp.refused ? "REFUSED by vLLM (the numbers are what the sharding would give)" : "per-rank KV cache") << "\n";
  for (const auto& x : cp.options) {
    o << "    " << x.label << ": ";
    if (!x.computed) {
      o << "not computed: " << printable(x.note) << "\n";
      continue;
    }
    o << format_gib(x.request_bytes) << " per rank for one request of " << format_grouped(r.layout->max_model_len)
      << " tokens, " << format_fixed(x.total_concurrency, 2) << "x concurrency"
      << (x.engines > 1 ? " (" + std::to_string(x.engines) + " engines)" : std::string())
      << (x.fits ? std::string() : std::string(", does not fit")) << "\n";
    if (details && !x.fits && !x.note.empty()) o << "      " << printable(x.note) << "\n";
  }
  if (details) {
    o << "    full caches hold cdiv(L, DCP) tokens per rank; window caches, compressor states and rings stay whole "
         "(docs/fit.md, decode context parallelism)\n";
  }
  return o.str();
}

}  // namespace mlaplan::cli

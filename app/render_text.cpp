// Human-readable output of `plan`. Free-form (scripts use --json), but stable enough to read in
// a terminal or a CI log.

#include <algorithm>
#include <sstream>

#include "commands.hpp"

namespace mlaplan::cli {

namespace {

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
  for (std::int64_t i = 1; i < n; ++i) progression = progression && ids[static_cast<std::size_t>(i)] - ids[static_cast<std::size_t>(i - 1)] == step;
  if (progression && step == 1) return layer_label(ids.front(), ids.back());
  if (progression) {
    return layer_label(ids.front(), ids.back()) + " (every " + std::to_string(step) +
           (step == 2 ? "nd" : step == 3 ? "rd" : "th") + ", " + std::to_string(n) + " layers)";
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

std::string family_title(Family f) {
  switch (f) {
    case Family::deepseek_v41: return "DeepSeek V4.1";
    case Family::deepseek_v4: return "DeepSeek V4.0";
    case Family::deepseek_v32: return "DeepSeek V3.2";
  }
  return "?";
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

std::string render_plan_text(const PlanResult& r) {
  const auto& c = r.config;
  const auto& t = r.topology;
  std::ostringstream o;
  o << "mla-plan: " << c.source << "\n";
  o << "model: " << family_title(c.family) << " (" << to_string(c.family)
    << (c.composite ? ", composite: attention fields under text_config" : "") << ")\n";
  o << "  " << c.num_hidden_layers << " layers + " << c.num_draft_layers << " draft, "
    << c.num_attention_heads << " query heads, head_dim " << c.head_dim;
  if (c.sliding_window > 0) o << ", window " << c.sliding_window;
  o << ", index_topk " << c.index_topk << ", max positions " << c.max_position_embeddings;
  if (!c.dtype.empty()) o << ", dtype " << c.dtype;
  o << "\n\n";

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
      if (key.second) o << ", draft (MTP)";
      if (key.first == LayerType::swaonly) o << ", window only";
      else if (key.first == LayerType::c4a) o << ", each owns its compressed cache and indexer";
      else if (key.first == LayerType::c128a) o << ", each owns its compressed cache";
      else o << ", each owns its latent and indexer cache";
      o << "\n";
    }
  }

  if (c.family == Family::deepseek_v41) {
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
        << c.candidate_block_size << " = " << c.candidate_topk_blocks * c.candidate_block_size
        << " positions)\n";
    } else {
      o << "  candidate source: none (disabled)\n";
    }
  } else if (c.family == Family::deepseek_v4) {
    o << "\nsources:\n";
    o << "  compressed-cache owners: " << t.kv_sources().size() << " layers; indexers: "
      << t.index_sources().size() << " (c4a)\n";
  }

  if (!c.findings.empty()) {
    o << "\nnotes:\n";
    for (const auto& f : c.findings) {
      o << "  " << (f.severity == Severity::warning ? "warning: " : f.severity == Severity::error ? "error: " : "")
        << f.message << "\n";
    }
  }
  return o.str();
}

}  // namespace mlaplan::cli

#include "mlaplan/model/topology.hpp"

#include <algorithm>

#include "mlaplan/base/error.hpp"

namespace mlaplan {

std::string_view to_string(LayerType t) {
  switch (t) {
    case LayerType::swaonly: return "swaonly";
    case LayerType::c1a: return "c1a";
    case LayerType::c2a: return "c2a";
    case LayerType::c4a: return "c4a";
    case LayerType::c128a: return "c128a";
    case LayerType::dsa: return "dsa";
  }
  return "?";
}

const std::vector<LayerType>& all_layer_types() {
  static const std::vector<LayerType> all = {LayerType::swaonly, LayerType::c1a,   LayerType::c2a,
                                             LayerType::c4a,     LayerType::c128a, LayerType::dsa};
  return all;
}

std::optional<LayerType> parse_layer_type(std::string_view name) {
  for (auto t : all_layer_types()) {
    if (to_string(t) == name) return t;
  }
  return std::nullopt;
}

LayerType layer_type_for(Family family, int r) {
  switch (family) {
    case Family::deepseek_v41:
      if (r == 0) return LayerType::swaonly;
      if (r == 1) return LayerType::c1a;
      if (r == 2) return LayerType::c2a;
      throw_config("Unsupported DeepSeek V4.1 compress_ratio=" + std::to_string(r) + "; expected 0, 1, or 2.");
    case Family::deepseek_v4:
      // vLLM clamps the ratio to at least 1: 0 and 1 both mean window only.
      if (r == 0 || r == 1) return LayerType::swaonly;
      if (r == 4) return LayerType::c4a;
      if (r == 128) return LayerType::c128a;
      throw_config("Unsupported DeepseekV4 compress_ratio=" + std::to_string(r) + "; expected 1, 4, or 128.");
    case Family::deepseek_v32: return LayerType::dsa;
  }
  throw_internal("unknown family");
}

std::int64_t Topology::count(LayerType t) const {
  return std::count_if(layers.begin(), layers.end(), [t](const Layer& l) { return l.type == t; });
}
std::int64_t Topology::count_draft(LayerType t) const {
  return std::count_if(layers.begin(), layers.end(), [t](const Layer& l) { return l.type == t && l.draft; });
}

namespace {
template <typename Pred>
std::vector<std::int64_t> select(const std::vector<Layer>& layers, Pred p) {
  std::vector<std::int64_t> out;
  for (const auto& l : layers) {
    if (p(l)) out.push_back(l.index);
  }
  return out;
}
}  // namespace

std::vector<std::int64_t> Topology::kv_sources() const {
  return select(layers, [](const Layer& l) { return l.is_kv_source; });
}
std::vector<std::int64_t> Topology::index_sources() const {
  return select(layers, [](const Layer& l) { return l.is_index_source; });
}
std::vector<std::int64_t> Topology::reindex_layers() const {
  return select(layers, [](const Layer& l) { return l.is_reindex; });
}
std::optional<std::int64_t> Topology::candidate_source() const {
  for (const auto& l : layers) {
    if (l.is_candidate_source) return l.index;
  }
  return std::nullopt;
}

Topology build_topology(const ModelConfig& cfg) {
  Topology topo;
  topo.family = cfg.family;
  topo.dspark_drafts = dspark_drafts(cfg);
  const auto total = cfg.total_layers();
  if (static_cast<std::int64_t>(cfg.compress_ratios.size()) != total) {
    throw_internal("compress_ratios has " + std::to_string(cfg.compress_ratios.size()) + " entries for " +
                   std::to_string(total) + " layers");
  }
  topo.layers.reserve(static_cast<std::size_t>(total));
  // Membership of the source lists by layer, so that the walk below is linear in the layers
  // (a search of each list per layer was quadratic: 4096 layers, 4096 sources).
  auto members = [total](const std::vector<std::int64_t>& ids) {
    std::vector<bool> m(static_cast<std::size_t>(total), false);
    for (auto id : ids) {
      if (id >= 0 && id < total) m[static_cast<std::size_t>(id)] = true;
    }
    return m;
  };
  const std::vector<bool> is_kv_listed = members(cfg.kv_source_layer_ids);
  const std::vector<bool> is_index_listed = members(cfg.index_source_layer_ids);
  std::int64_t kv_src = -1;
  std::int64_t idx_src = -1;
  for (std::int64_t i = 0; i < total; ++i) {
    Layer l;
    l.index = i;
    l.draft = i >= cfg.num_hidden_layers;
    l.compress_ratio = cfg.compress_ratios[static_cast<std::size_t>(i)];
    l.type = layer_type_for(cfg.family, l.compress_ratio);
    switch (cfg.family) {
      case Family::deepseek_v41:
        if (l.compress_ratio > 0 && !l.draft) {
          if (is_kv_listed[static_cast<std::size_t>(i)]) kv_src = i;
          if (is_index_listed[static_cast<std::size_t>(i)]) idx_src = i;
          l.is_kv_source = kv_src == i;
          l.is_index_source = idx_src == i;
          l.is_reindex = l.is_index_source && !l.is_kv_source;
          l.is_candidate_source = cfg.candidate_source_layer_id == i;
          l.owns_indexer_cache = l.is_kv_source;
          l.owns_compressor_state = l.is_kv_source && l.compress_ratio == 2;
          if (kv_src >= 0) l.kv_source = kv_src;
          if (idx_src >= 0) l.index_source = idx_src;
        }
        break;
      case Family::deepseek_v4:
        if (l.type == LayerType::c4a || l.type == LayerType::c128a) {
          l.is_kv_source = true;
          l.kv_source = i;
          l.owns_compressor_state = true;
          if (l.type == LayerType::c4a) {
            l.is_index_source = true;
            l.owns_indexer_cache = true;
            l.index_source = i;
          }
        }
        break;
      case Family::deepseek_v32:
        l.is_kv_source = true;
        l.kv_source = i;
        l.is_index_source = true;
        l.owns_indexer_cache = true;
        l.index_source = i;
        break;
    }
    topo.layers.push_back(l);
  }

  for (auto t : all_layer_types()) {
    if (topo.count(t) > 0) topo.types_present.push_back(t);
  }
  std::sort(topo.types_present.begin(), topo.types_present.end(),
            [](LayerType a, LayerType b) { return to_string(a) < to_string(b); });

  // Runs: consecutive layers sharing type, cache source and draft flag. For V4.0/V3.2 layers
  // that own their cache, a run groups consecutive owners of the same type.
  for (const auto& l : topo.layers) {
    const bool shared_source = cfg.family == Family::deepseek_v41;
    auto same = [&](const LayerRun& r) {
      if (r.type != l.type || r.draft != l.draft || r.last + 1 != l.index) return false;
      return shared_source ? r.kv_source == l.kv_source : true;
    };
    if (topo.runs.empty() || !same(topo.runs.back())) {
      LayerRun r;
      r.first = r.last = l.index;
      r.type = l.type;
      r.draft = l.draft;
      r.kv_source = shared_source ? l.kv_source : std::nullopt;
      topo.runs.push_back(r);
    }
    auto& r = topo.runs.back();
    r.last = l.index;
    if (shared_source && l.index_source && (r.index_sources.empty() || r.index_sources.back() != *l.index_source)) {
      r.index_sources.push_back(*l.index_source);
    }
  }
  return topo;
}

}  // namespace mlaplan

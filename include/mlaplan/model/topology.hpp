#pragma once
// Layer topology: what kind of attention each layer runs and which caches it owns or reads.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/model/config.hpp"

namespace mlaplan {

/// Attention type of a layer; one tile-scheduler plan per type present (names of vLLM's
/// sparse-SWA metadata builder).
enum class LayerType {
  swaonly,  ///< sliding window only
  c1a,      ///< V4.1: window + full-length compressed cache through top-k
  c2a,      ///< V4.1: window + ratio-2 compressed cache through top-k
  c4a,      ///< V4.0: window + ratio-4 compressed cache through top-k (own indexer)
  c128a,    ///< V4.0: window + all ratio-128 compressed entries (no indexer)
  dsa,      ///< V3.2: top-k sparse over the whole MLA latent history
};

std::string_view to_string(LayerType t);
std::optional<LayerType> parse_layer_type(std::string_view name);
/// All types in their canonical display order.
const std::vector<LayerType>& all_layer_types();

/// The layer type of a compress ratio in a family (V4.1: 0/1/2; V4.0: 0,1/4/128; V3.2: dsa).
LayerType layer_type_for(Family family, int compress_ratio);

struct Layer {
  std::int64_t index = 0;
  int compress_ratio = 0;
  LayerType type = LayerType::swaonly;
  bool draft = false;                  ///< MTP (V4.0, V3.2) or DSpark (V4.1) layer
  bool is_kv_source = false;           ///< owns (publishes) a compressed / latent cache
  bool is_index_source = false;        ///< runs the sparse indexer and publishes top-k indices
  bool is_reindex = false;             ///< V4.1: index source that owns no cache
  bool is_candidate_source = false;    ///< V4.1: its top blocks constrain later index sources
  bool owns_indexer_cache = false;     ///< owns an indexer-key cache
  bool owns_compressor_state = false;  ///< owns a compressor state ring (ratio-2 V4.1 sources, V4.0 compressed layers)
  std::optional<std::int64_t> kv_source;     ///< layer whose compressed cache it reads (itself for an owner)
  std::optional<std::int64_t> index_source;  ///< layer whose top-k indices it uses
};

/// A run of consecutive layers with the same type, cache source and draft flag.
struct LayerRun {
  std::int64_t first = 0;
  std::int64_t last = 0;
  LayerType type = LayerType::swaonly;
  bool draft = false;
  std::optional<std::int64_t> kv_source;
  std::vector<std::int64_t> index_sources;  ///< distinct index sources used inside the run, in order
};

struct Topology {
  Family family = Family::deepseek_v41;
  bool dspark_drafts = false;            ///< the draft layers are DSpark stages (dspark_drafts() of the config)
  std::vector<Layer> layers;             ///< backbone then draft layers
  std::vector<LayerType> types_present;  ///< sorted by name (one plan each)
  std::vector<LayerRun> runs;

  std::int64_t count(LayerType t) const;
  std::int64_t count_draft(LayerType t) const;
  std::vector<std::int64_t> kv_sources() const;
  std::vector<std::int64_t> index_sources() const;
  std::vector<std::int64_t> reindex_layers() const;
  std::optional<std::int64_t> candidate_source() const;
};

/// Builds the topology of a validated config.
Topology build_topology(const ModelConfig& cfg);

}  // namespace mlaplan

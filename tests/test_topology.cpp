// Layer topology: types, roles and sharing groups of the released and small configs.

#include <catch2/catch.hpp>
#include <string>

#include "mlaplan/model/config.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/model/topology.hpp"

using namespace mlaplan;

namespace {
Topology topo_of(const std::string& rel) {
  return build_topology(load_config(std::string(MLAPLAN_SOURCE_DIR) + "/" + rel));
}
std::vector<std::int64_t> ids(std::initializer_list<std::int64_t> v) { return v; }
}  // namespace

TEST_CASE("V4.1-Flash topology", "[topology]") {
  const auto t = topo_of("configs/deepseek-v4.1-flash.json");
  REQUIRE(t.layers.size() == 43);
  CHECK(t.count(LayerType::swaonly) == 5);
  CHECK(t.count_draft(LayerType::swaonly) == 3);
  CHECK(t.count(LayerType::c2a) == 18);
  CHECK(t.count(LayerType::c1a) == 20);
  CHECK(t.types_present == std::vector<LayerType>{LayerType::c1a, LayerType::c2a, LayerType::swaonly});
  CHECK(t.kv_sources() == ids({2, 8, 14, 20}));
  CHECK(t.index_sources() == ids({2, 8, 14, 20, 24, 28, 32, 36}));
  CHECK(t.reindex_layers() == ids({24, 28, 32, 36}));
  CHECK(t.candidate_source() == 20);
  for (std::int64_t i = 0; i < 43; ++i) {
    const auto& l = t.layers[static_cast<std::size_t>(i)];
    INFO("layer " << i);
    CHECK(l.index == i);
    CHECK(l.draft == (i >= 40));
    if (i < 2 || i >= 40) {
      CHECK(l.type == LayerType::swaonly);
      CHECK_FALSE(l.kv_source);
      CHECK_FALSE(l.index_source);
    } else if (i < 20) {
      CHECK(l.type == LayerType::c2a);
      CHECK(l.kv_source == (i < 8 ? 2 : i < 14 ? 8 : 14));
      CHECK(l.index_source == l.kv_source);
    } else {
      CHECK(l.type == LayerType::c1a);
      CHECK(l.kv_source == 20);
      CHECK(l.index_source == 20 + (i - 20) / 4 * 4);
    }
  }
  // Owners: the c2a sources own a compressor state ring; every source owns an indexer cache.
  CHECK(t.layers[2].owns_compressor_state);
  CHECK_FALSE(t.layers[20].owns_compressor_state);
  CHECK(t.layers[20].owns_indexer_cache);
  CHECK_FALSE(t.layers[24].owns_indexer_cache);
  CHECK(t.layers[24].is_reindex);
  CHECK(t.layers[24].index_source == 24);
  CHECK(t.layers[27].index_source == 24);
  CHECK(t.layers[39].index_source == 36);

  REQUIRE(t.runs.size() == 6);
  CHECK(t.runs[1].first == 2);
  CHECK(t.runs[1].last == 7);
  CHECK(t.runs[1].kv_source == 2);
  CHECK(t.runs[4].first == 20);
  CHECK(t.runs[4].last == 39);
  CHECK(t.runs[4].index_sources == ids({20, 24, 28, 32, 36}));
  CHECK(t.runs[5].draft);
  CHECK(t.runs[5].first == 40);
  CHECK(t.runs[5].last == 42);
}

TEST_CASE("V4-Flash topology", "[topology]") {
  const auto t = topo_of("configs/deepseek-v4-flash.json");
  REQUIRE(t.layers.size() == 44);
  CHECK(t.count(LayerType::c4a) == 21);
  CHECK(t.count(LayerType::c128a) == 20);
  CHECK(t.count(LayerType::swaonly) == 3);
  CHECK(t.types_present == std::vector<LayerType>{LayerType::c128a, LayerType::c4a, LayerType::swaonly});
  CHECK(t.layers[43].draft);
  for (const auto& l : t.layers) {
    INFO("layer " << l.index);
    CHECK(l.is_kv_source == (l.type != LayerType::swaonly));
    CHECK(l.owns_indexer_cache == (l.type == LayerType::c4a));
    CHECK(l.is_index_source == (l.type == LayerType::c4a));
    if (l.is_kv_source) CHECK(l.kv_source == l.index);
  }
}

TEST_CASE("V3.2 topology", "[topology]") {
  const auto t = topo_of("configs/deepseek-v3.2.json");
  REQUIRE(t.layers.size() == 62);
  CHECK(t.count(LayerType::dsa) == 62);
  CHECK(t.count_draft(LayerType::dsa) == 1);
  CHECK(t.types_present == std::vector<LayerType>{LayerType::dsa});
  CHECK(t.kv_sources().size() == 62);
}

TEST_CASE("small configs' topology", "[topology]") {
  SECTION("reindex layer owns no cache") {
    const auto t = topo_of("configs/small/v41-6layer-reindex.json");
    CHECK(t.kv_sources() == ids({2, 4}));
    CHECK(t.reindex_layers() == ids({5}));
    CHECK(t.layers[5].kv_source == 4);
    CHECK(t.layers[5].index_source == 5);
    CHECK_FALSE(t.layers[5].owns_indexer_cache);
    CHECK(t.candidate_source() == 4);
  }
  SECTION("flat 8-layer with draft layers") {
    const auto t = topo_of("configs/small/v41-8layer-flat.json");
    CHECK(t.layers.size() == 11);
    CHECK(t.count_draft(LayerType::swaonly) == 3);
    CHECK(t.reindex_layers() == ids({6}));
  }
  SECTION("V4 tester with layer_types") {
    const auto t = topo_of("configs/small/v4-2layer-layer-types.json");
    CHECK(t.layers[0].type == LayerType::c128a);
    CHECK(t.layers[1].type == LayerType::c4a);
  }
}

TEST_CASE("layer type names and the v4.0 ratio clamp", "[topology]") {
  for (auto type : all_layer_types()) CHECK(parse_layer_type(to_string(type)) == type);
  CHECK_FALSE(parse_layer_type("c3a"));
  CHECK(layer_type_for(Family::deepseek_v4, 1) == LayerType::swaonly);
  CHECK(layer_type_for(Family::deepseek_v41, 1) == LayerType::c1a);
  CHECK_THROWS_AS(layer_type_for(Family::deepseek_v41, 4), Error);
}

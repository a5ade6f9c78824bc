// The machine contract of `plan --json` (docs/cli.md). Names here are an interface: add fields
// freely, bump "schema" only for breaking changes.

#include <nlohmann/json.hpp>

#include "commands.hpp"

namespace mlaplan::cli {

using json = nlohmann::ordered_json;

namespace {

json opt_int(const std::optional<std::int64_t>& v) { return v ? json(*v) : json(nullptr); }

json model_json(const ModelConfig& c) {
  json m;
  m["family"] = std::string(to_string(c.family));
  m["model_type"] = c.model_type.empty() ? json(nullptr) : json(c.model_type);
  m["composite"] = c.composite;
  m["num_hidden_layers"] = c.num_hidden_layers;
  m["num_draft_layers"] = c.num_draft_layers;
  m["num_attention_heads"] = c.num_attention_heads;
  m["num_key_value_heads"] = c.num_key_value_heads;
  m["head_dim"] = c.head_dim;
  m["qk_rope_head_dim"] = c.qk_rope_head_dim;
  if (c.family == Family::deepseek_v32) m["kv_lora_rank"] = c.kv_lora_rank;
  m["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  m["index_topk"] = c.index_topk;
  m["index_n_heads"] = c.index_n_heads;
  m["index_head_dim"] = c.index_head_dim;
  m["max_position_embeddings"] = c.max_position_embeddings;
  m["dtype"] = c.dtype.empty() ? json(nullptr) : json(c.dtype);
  m["compress_ratios"] = c.compress_ratios;
  if (c.family == Family::deepseek_v41) {
    m["kv_source_layer_ids"] = c.kv_source_layer_ids;
    m["index_source_layer_ids"] = c.index_source_layer_ids;
    m["candidate_source_layer_id"] =
        c.candidate_source_layer_id >= 0 ? json(c.candidate_source_layer_id) : json(nullptr);
    m["candidate_topk_blocks"] = c.candidate_topk_blocks;
    m["candidate_block_size"] = c.candidate_block_size;
  }
  return m;
}

json layer_json(const Layer& l) {
  json j;
  j["index"] = l.index;
  j["compress_ratio"] = l.compress_ratio;
  j["type"] = std::string(to_string(l.type));
  j["draft"] = l.draft;
  j["is_kv_source"] = l.is_kv_source;
  j["is_index_source"] = l.is_index_source;
  j["is_reindex"] = l.is_reindex;
  j["is_candidate_source"] = l.is_candidate_source;
  j["kv_source"] = opt_int(l.kv_source);
  j["index_source"] = opt_int(l.index_source);
  j["owns_indexer_cache"] = l.owns_indexer_cache;
  j["owns_compressor_state"] = l.owns_compressor_state;
  return j;
}

}  // namespace

json findings_json(const std::vector<Finding>& findings) {
  json arr = json::array();
  for (const auto& f : findings) {
    json j;
    j["id"] = f.id;
    j["severity"] = std::string(to_string(f.severity));
    j["message"] = f.message;
    if (!f.path.empty()) j["path"] = f.path;
    if (!f.fix.empty()) j["fix"] = f.fix;
    arr.push_back(std::move(j));
  }
  return arr;
}

std::string render_plan_json(const PlanResult& r) {
  json j;
  j["schema"] = "mla-plan/1";
  j["config"] = r.config.source;
  j["model"] = model_json(r.config);
  json layers = json::array();
  for (const auto& l : r.topology.layers) layers.push_back(layer_json(l));
  j["layers"] = std::move(layers);
  json types = json::array();
  for (auto t : r.topology.types_present) types.push_back(std::string(to_string(t)));
  j["layer_types"] = std::move(types);
  json runs = json::array();
  for (const auto& run : r.topology.runs) {
    json x;
    x["first"] = run.first;
    x["last"] = run.last;
    x["type"] = std::string(to_string(run.type));
    x["draft"] = run.draft;
    x["kv_source"] = opt_int(run.kv_source);
    x["index_sources"] = run.index_sources;
    runs.push_back(std::move(x));
  }
  j["layer_runs"] = std::move(runs);
  j["findings"] = findings_json(r.config.findings);
  json warnings = json::array();
  for (const auto& f : r.config.findings) {
    if (f.severity == Severity::warning) warnings.push_back(f.message);
  }
  j["warnings"] = std::move(warnings);
  return j.dump(2) + "\n";
}

}  // namespace mlaplan::cli

// The machine contract of `plan --json` (docs/cli.md). Names here are an interface: add fields
// freely, bump "schema" only for breaking changes.

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "json_out.hpp"
#include "mlaplan/text.hpp"

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

json schedule_entry_json(const ScheduleEntry& e);

json target_json(const Target& t) {
  json j;
  j["name"] = t.id;
  j["display_name"] = t.name;
  j["compute_capability"] = t.cc.str();
  j["arch"] = t.cc.sm();
  j["num_sms"] = t.num_sms;
  j["memory_bytes"] = t.memory_bytes;
  j["source"] = std::string(to_string(t.source));
  j["default"] = t.default_used;
  j["overridden"] = t.overridden_fields();
  if (!t.note.empty()) j["note"] = t.note;
  return j;
}

json bpt_json(const BytesPerToken& b) { return json(b.value()); }

json layout_json(const Layout& l) {
  json j;
  j["block_size"] = l.block_size;
  j["window_block_size"] = l.window_block_size;
  j["indexer_cache_dtype"] = std::string(to_string(l.indexer_cache_dtype));
  j["max_model_len"] = l.max_model_len;
  j["in_flight_tokens"] = l.in_flight_tokens;
  j["num_speculative_tokens"] = l.num_speculative_tokens;
  j["include_draft_layers"] = l.include_draft_layers;
  json caches = json::array();
  for (const auto& o : l.objects) {
    json c;
    c["layer"] = o.layer;
    c["kind"] = std::string(to_string(o.kind));
    c["scope"] = std::string(to_string(o.scope));
    c["draft"] = o.draft;
    c["stage"] = o.stage;
    c["format"] = o.format_name;
    c["compress_ratio"] = o.compress_ratio;
    c["row_bytes"] = o.row_bytes;
    c["rows_per_page"] = o.rows_per_page;
    c["tokens_per_page"] = o.tokens_per_page;
    c["unpadded_page_bytes"] = o.unpadded_page_bytes;
    c["page_bytes"] = o.page_bytes;
    c["alignment"] = o.alignment;
    if (o.scope == CacheScope::per_request) c["window_tokens"] = o.window_tokens;
    if (o.ring) c["ring"] = true;
    caches.push_back(std::move(c));
  }
  j["caches"] = std::move(caches);
  json groups = json::array();
  for (const auto& g : l.groups) {
    json x;
    x["page_bytes"] = g.page_bytes;
    x["objects"] = g.objects;
    groups.push_back(std::move(x));
  }
  j["groups"] = std::move(groups);
  const auto& a = l.accounting;
  j["global_bytes_per_token"] = {{"rows", bpt_json(a.global_rows)}, {"pages", bpt_json(a.global_pages)},
                                 {"rows_exact", a.global_rows.str()}, {"pages_exact", a.global_pages.str()}};
  j["per_request_bytes"] = {{"rows", a.per_request_rows}, {"pages", a.per_request_pages}};
  j["request_bytes_at_max_model_len"] = {{"rows", a.total_rows}, {"pages", a.total_pages}};
  return j;
}

json parallel_json(const Parallelism& p) {
  json j;
  j["tensor_parallel_size"] = p.tensor_parallel_size;
  j["pipeline_parallel_size"] = p.pipeline_parallel_size;
  j["data_parallel_size"] = p.data_parallel_size;
  j["local_query_heads"] = p.local_query_heads;
  j["padded_query_heads"] = p.padded_query_heads;
  json stages = json::array();
  for (const auto& s : p.stages) {
    stages.push_back({{"index", s.index},
                      {"first_layer", s.first_layer},
                      {"last_layer", s.last_layer},
                      {"num_draft_layers", s.num_draft_layers},
                      {"global_bytes_per_token_pages", bpt_json(s.accounting.global_pages)},
                      {"per_request_bytes_pages", s.accounting.per_request_pages}});
  }
  j["stages"] = std::move(stages);
  return j;
}

json capacity_json(const Capacity& c) {
  json j;
  j["budget_bytes"] = c.budget_bytes;
  j["budget_formula"] = c.budget_formula;
  j["explicit_budget"] = c.explicit_budget;
  j["gpu_memory_utilization"] = c.gpu_memory_utilization;
  j["weights_bytes"] = c.weights_bytes;
  j["reserved_bytes"] = c.reserved_bytes;
  j["max_model_len"] = c.max_model_len;
  j["request_bytes"] = c.request_bytes;
  j["tokens_that_fit"] = c.tokens_unbounded ? json(nullptr) : json(c.tokens_that_fit);
  j["concurrency"] = c.concurrency_total;
  j["concurrency_per_dp_rank"] = c.concurrency_per_rank;
  j["longest_max_model_len"] = c.longest_max_model_len;
  j["fits"] = c.fits;
  if (!c.message.empty()) j["message"] = c.message;
  return j;
}

json finding_json(const Finding& f) {
  json j;
  j["id"] = f.id;
  j["severity"] = std::string(to_string(f.severity));
  j["message"] = f.message;
  if (!f.path.empty()) j["path"] = f.path;
  if (!f.fix.empty()) j["fix"] = f.fix;
  return j;
}

std::string dump_json(const json& j) {
  return json_printable(j.dump(2, ' ', false, json::error_handler_t::replace)) + "\n";
}

std::string dump_json_nested(const json& j, int depth) {
  // JSON strings hold no raw newline, so every newline of the dump is one between lines.
  const std::string text = json_printable(j.dump(2, ' ', false, json::error_handler_t::replace));
  const std::string indent(static_cast<std::size_t>(2 * depth), ' ');
  std::string o;
  o.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    o += c;
    if (c == '\n') o += indent;
  }
  return o;
}

json findings_json(const std::vector<Finding>& findings) {
  json arr = json::array();
  for (const auto& f : findings) arr.push_back(finding_json(f));
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
  j["target"] = target_json(r.target);
  if (r.layout) {
    j["kv_cache_dtype"] = std::string(to_string(r.layout->kv_cache_dtype));
    j["layout"] = layout_json(*r.layout);
    j["parallel"] = parallel_json(r.layout->parallel);
  }
  if (r.capacity) j["capacity"] = capacity_json(*r.capacity);
  j["batch"] = {{"context_lens", r.batch.context_lens},
                {"spec_tokens", r.batch.spec_tokens},
                {"decode_tokens", r.batch.positions.size()},
                {"default", r.batch.defaulted},
                {"description", r.batch.description}};
  json schedules = json::array();
  for (const auto& s : r.schedules) {
    ScheduleEntry e{std::string(to_string(s.type)), s.input, s.plan};
    json x = schedule_entry_json(e);
    x["num_layers"] = s.num_layers;
    x["topk"] = s.topk;
    x["page_block_size"] = s.page_block_size;
    x["extra_topk"] = s.extra_topk;
    x["extra_page_block_size"] = s.extra_page_block_size;
    if (!s.note.empty()) x["note"] = s.note;
    x["decode_mode"] = std::string(to_string(s.mode.mode));
    x["decode_mode_reason"] = s.mode.reason;
    x["decode_cluster_ctas"] = s.mode.cluster_ctas;
    schedules.push_back(std::move(x));
  }
  j["schedules"] = std::move(schedules);
  j["findings"] = findings_json(r.findings);
  j["exit_code"] = r.exit_code;
  json warnings = json::array();
  for (const auto& f : r.findings) {
    if (f.severity == Severity::warning) warnings.push_back(f.message);
  }
  j["warnings"] = std::move(warnings);
  return dump_json(j);
}

}  // namespace mlaplan::cli

namespace mlaplan::cli {

json schedule_entry_json(const ScheduleEntry& e) {
  const auto& p = e.plan;
  json j;
  j["layer_type"] = e.layer_type.empty() ? json(nullptr) : json(e.layer_type);
  j["kernel"] = std::string(to_string(p.kernel));
  j["num_sm_parts"] = p.params.num_sm_parts;
  j["fixed_overhead"] = p.params.fixed_overhead;
  j["block"] = p.params.block;
  j["payload"] = p.payload;
  j["batch"] = p.batch;
  j["num_sms"] = e.input.num_sms;
  j["s_q"] = e.input.s_q;
  j["h_q"] = e.input.h_q;
  j["has_extra"] = e.input.has_extra;
  j["records"] = p.records;
  j["num_splits"] = p.num_splits;
  j["blocks"] = p.blocks;
  json splits = json::array();
  for (std::size_t i = 0; i + 1 < p.num_splits.size(); ++i) splits.push_back(p.num_splits[i + 1] - p.num_splits[i]);
  j["splits_per_request"] = std::move(splits);
  j["idle_partitions"] = p.idle_partitions;
  j["split_requests"] = p.split_requests;
  j["max_splits"] = p.max_splits;
  j["total_partials"] = p.total_partials;
  j["min_blocks_per_partition"] = p.min_blocks_per_partition;
  j["max_blocks_per_partition"] = p.max_blocks_per_partition;
  j["accum_bytes"] = p.accum_bytes;
  return j;
}

std::string render_schedules_json(const std::vector<ScheduleEntry>& entries) {
  json j;
  j["schema"] = "mla-plan/1";
  json arr = json::array();
  for (const auto& e : entries) arr.push_back(schedule_entry_json(e));
  j["schedules"] = std::move(arr);
  return dump_json(j);
}

}  // namespace mlaplan::cli

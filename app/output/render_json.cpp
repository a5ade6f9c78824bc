// The machine contract of `plan --json` (docs/cli.md, schemas/plan.schema.json). Names here are an
// interface: add fields freely, bump "schema" only for breaking changes (and the schemas' $id).

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "output/json_out.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/version.hpp"

namespace mlaplan::cli {

const char* const kJsonSchema = "mla-plan/3";

ojson json_document() {
  ojson j;
  j["schema"] = kJsonSchema;
  j["tool_version"] = kVersion;
  return j;
}

std::string json_document_head() {
  const ojson head = json_document();
  std::string o = "{\n";
  for (const auto& [key, value] : head.items()) {
    o += "  " + dump_json_nested(ojson(key), 1) + ": " + dump_json_nested(value, 1) + ",\n";
  }
  return o;
}

/// {"prefix_cache", "host_offload", "groups"} of a fit, or null (app/output/render_kv_tiers.cpp).
ojson kv_tiers_json(const Fit& f);

namespace {

ojson opt_int(const std::optional<std::int64_t>& v) { return v ? ojson(*v) : ojson(nullptr); }

ojson model_json(const ModelConfig& c) {
  ojson m;
  m["family"] = std::string(to_string(c.family));
  m["model_type"] = c.model_type.empty() ? ojson(nullptr) : ojson(c.model_type);
  m["composite"] = c.composite;
  m["num_hidden_layers"] = c.num_hidden_layers;
  m["num_draft_layers"] = c.num_draft_layers;
  m["num_attention_heads"] = c.num_attention_heads;
  m["num_key_value_heads"] = c.num_key_value_heads;
  m["head_dim"] = c.head_dim;
  m["qk_rope_head_dim"] = c.qk_rope_head_dim;
  if (c.family == Family::deepseek_v32) m["kv_lora_rank"] = c.kv_lora_rank;
  m["sliding_window"] = c.sliding_window > 0 ? ojson(c.sliding_window) : ojson(nullptr);
  m["index_topk"] = c.index_topk;
  m["index_n_heads"] = c.index_n_heads;
  m["index_head_dim"] = c.index_head_dim;
  m["max_position_embeddings"] = c.max_position_embeddings;
  m["dtype"] = c.dtype.empty() ? ojson(nullptr) : ojson(c.dtype);
  m["compress_ratios"] = c.compress_ratios;
  if (c.family == Family::deepseek_v41) {
    m["kv_source_layer_ids"] = c.kv_source_layer_ids;
    m["index_source_layer_ids"] = c.index_source_layer_ids;
    m["candidate_source_layer_id"] =
        c.candidate_source_layer_id >= 0 ? ojson(c.candidate_source_layer_id) : ojson(nullptr);
    m["candidate_topk_blocks"] = c.candidate_topk_blocks;
    m["candidate_block_size"] = c.candidate_block_size;
  }
  return m;
}

ojson layer_json(const Layer& l) {
  ojson j;
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

ojson schedule_entry_json(const ScheduleEntry& e);

ojson target_json(const Target& t) {
  ojson j;
  j["name"] = t.id;
  j["display_name"] = t.name;
  j["compute_capability"] = t.cc.str();
  j["arch"] = t.cc.sm();
  j["num_sms"] = t.num_sms;
  j["memory_bytes"] = t.memory_bytes;
  j["source"] = std::string(to_string(t.source));
  j["default"] = t.default_used;
  j["overridden"] = t.overridden_fields();
  j["family"] = std::string(to_string(t.family));
  j["unified_memory"] = t.unified_memory;
  if (!t.note.empty()) j["note"] = t.note;
  return j;
}

ojson backend_json(const Layout& l) {
  const BackendInfo& b = backend_info(l.backend);
  ojson j;
  j["id"] = std::string(b.key);
  j["vllm_name"] = std::string(backend_vllm_name(l.backend, l.family));
  j["variant"] = std::string(b.variant);
  j["attention_class"] = std::string(b.attention_class);
  j["source"] = std::string(b.source);
  j["chosen"] = l.backend_how;
  j["decode_path"] = std::string(b.decode_path);
  j["tile_plans"] = b.tile_plans;
  return j;
}

ojson kernel_shape_json(const KernelShape& s) {
  ojson types = ojson::array();
  for (auto t : s.layer_types) types.push_back(std::string(to_string(t)));
  ojson j;
  j["phase"] = s.phase;
  j["kernel"] = s.kernel;
  j["layer_types"] = std::move(types);
  j["draft"] = s.draft;
  j["local_heads"] = s.local_heads;
  j["kernel_heads"] = s.kernel_heads;
  j["d_qk"] = s.d_qk;
  j["d_v"] = s.d_v;
  j["topk"] = s.topk;
  j["extra_topk"] = s.extra_topk;
  j["page_rows"] = s.page_rows;
  j["extra_page_rows"] = s.extra_page_rows;
  j["kv_layout"] = s.kv_layout;
  j["status"] = std::string(to_string(s.status));
  j["note"] = s.note;
  j["fix"] = s.fix;
  return j;
}

ojson bpt_json(const BytesPerToken& b) { return ojson(b.value()); }

ojson layout_json(const Layout& l) {
  ojson j;
  j["block_size"] = l.block_size;
  j["page_states"] = l.page_states;
  j["window_block_size"] = l.window_block_size;
  j["indexer_cache_dtype"] = std::string(to_string(l.indexer_cache_dtype));
  j["max_model_len"] = l.max_model_len;
  j["in_flight_tokens"] = l.in_flight_tokens;
  j["window_reserve_tokens"] = l.window_reserve_tokens;
  j["num_speculative_tokens"] = l.num_speculative_tokens;
  j["include_draft_layers"] = l.include_draft_layers;
  ojson caches = ojson::array();
  for (const auto& o : l.objects) {
    ojson c;
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
  ojson groups = ojson::array();
  for (const auto& g : l.groups) {
    ojson x;
    x["page_bytes"] = g.page_bytes;
    x["objects"] = g.objects;
    groups.push_back(std::move(x));
  }
  j["groups"] = std::move(groups);
  const auto& a = l.accounting;
  j["global_bytes_per_token"] = {{"rows", bpt_json(a.global_rows)},
                                 {"pages", bpt_json(a.global_pages)},
                                 {"rows_exact", a.global_rows.str()},
                                 {"pages_exact", a.global_pages.str()}};
  j["per_request_bytes"] = {{"rows", a.per_request_rows}, {"pages", a.per_request_pages}};
  j["request_bytes_at_max_model_len"] = {{"rows", a.total_rows}, {"pages", a.total_pages}};
  return j;
}

ojson parallel_json(const Parallelism& p) {
  ojson j;
  j["tensor_parallel_size"] = p.tensor_parallel_size;
  j["pipeline_parallel_size"] = p.pipeline_parallel_size;
  j["data_parallel_size"] = p.data_parallel_size;
  j["local_query_heads"] = p.local_query_heads;
  j["padded_query_heads"] = p.padded_query_heads;
  ojson stages = ojson::array();
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

ojson part_bytes_json(const std::array<std::int64_t, kWeightPartCount>& parts) {
  ojson j = ojson::object();
  for (std::size_t i = 0; i < kWeightPartCount; ++i) {
    if (parts[i] != 0) j[std::string(to_string(static_cast<WeightPart>(i)))] = parts[i];
  }
  return j;
}

ojson budget_json(const Budget& b) {
  ojson j;
  j["total_bytes"] = b.total_bytes;
  j["total_source"] = std::string(to_string(b.total_source));
  j["total_how"] = b.total_how;
  j["gpu_memory_utilization"] = b.gpu_memory_utilization;
  j["gpu_memory_utilization_default"] = b.utilization_default;
  j["requested_bytes"] = b.requested_bytes;
  j["explicit_kv_cache_memory_bytes"] = b.explicit_kv_bytes;
  ojson terms = ojson::array();
  for (const auto& t : b.terms) {
    terms.push_back({{"id", t.id},
                     {"bytes", t.bytes},
                     {"source", std::string(to_string(t.source))},
                     {"how", t.how},
                     {"flag", t.flag}});
  }
  j["terms"] = std::move(terms);
  j["non_kv_bytes"] = b.non_kv_bytes;
  j["available_kv_bytes"] = b.available_bytes;
  return j;
}

ojson vllm_kv_json(const VllmKvConfig& kv) {
  ojson j;
  j["planner"] = vllm_kv_planner_name(kv.generation);
  j["generation"] = to_string(kv.generation);
  j["bytes_per_block"] = kv.bytes_per_block;
  j["blocks_per_request"] = kv.blocks_per_request;
  j["retained_tokens"] = kv.retained_tokens;
  // The groups with a layer on this stage, each with its number in the grouping: every worker
  // keeps all group_count groups (an empty one reserves its blocks too), but listing the empty
  // ones on every stage would make the document stages x groups long (4096 stages of 4,098
  // groups: 2.6 GB).
  j["group_count"] = kv.group_count();
  ojson groups = ojson::array();
  for (const auto& g : kv.groups) {
    ojson specs = ojson::array();
    for (auto i : g.specs) {
      const auto& s = kv.specs[i];
      specs.push_back({{"layer", s.layer}, {"what", s.what}, {"draft", s.draft}, {"page_bytes", s.page_bytes}});
    }
    groups.push_back({{"index", g.index},
                      {"kind", std::string(to_string(g.kind))},
                      {"block_size", g.block_size},
                      {"bytes", g.bytes},
                      {"specs", std::move(specs)}});
  }
  j["groups"] = std::move(groups);
  return j;
}

ojson fit_json(const Fit& f) {
  ojson j;
  j["engine"] = "vLLM " + std::string(f.release->version);
  // The release and what it decided (release.hpp); "vllm" holds the numbers vLLM prints.
  {
    const VllmRelease& r = *f.release;
    ojson v;
    v["version"] = r.version;
    v["released"] = r.released;
    v["newest_modelled"] = &r == &newest_vllm_release();
    v["default_gpu_memory_utilization"] = r.gpu_memory_utilization;
    v["kv_planner"] = to_string(r.planner);
    v["kv_planner_pinned"] = r.planner_pinned;
    v["model_runner"] = f.model_runner_v2 ? "v2" : "v1";
    v["async_scheduling"] = f.async_scheduling;
    v["async_scheduling_default"] = f.async_default;
    v["batches_in_flight"] = f.batches_in_flight;
    v["cudagraph_profiling"] = r.cudagraph_profiling && !f.model_runner_v2;
    v["sources"] = r.sources;
    v["unpinned"] = r.unpinned;
    if (f.other_generation) {
      v["other_kv_planner"] = {{"kv_planner", to_string(r.planner == KvPlannerGeneration::packed_buckets
                                                            ? KvPlannerGeneration::generic_packed
                                                            : KvPlannerGeneration::packed_buckets)},
                               {"gpu_kv_cache_tokens", f.other_generation->gpu_kv_cache_tokens},
                               {"concurrency", f.other_generation->concurrency},
                               {"log_line", f.other_generation->log_line}};
    } else {
      v["other_kv_planner"] = nullptr;
    }
    j["vllm_release"] = std::move(v);
  }
  j["fits"] = f.fits;
  j["decided"] = f.decided;
  j["no_backend"] = f.no_backend;
  j["refused"] = f.refused;
  j["refusal"] = f.refused ? ojson(f.refusal) : ojson(nullptr);
  j["verdict"] = f.verdict;
  j["suggestions"] = f.suggestions;
  j["suggestion_flags"] = f.suggestion_flags;
  j["weights_exceed_gpu"] = f.weights_exceed_gpu;
  if (const auto& m = f.margin) {
    j["margin"] = {{"spare_bytes", m->spare_bytes},
                   {"estimated_bytes", m->estimated_bytes},
                   {"uncertainty_bytes", m->uncertainty_bytes},
                   {"borderline", m->borderline}};
  } else {
    j["margin"] = nullptr;
  }
  const auto& pl = f.placement.layout;
  j["layout"] = {{"tensor_parallel_size", pl.tensor_parallel_size},
                 {"data_parallel_size", pl.data_parallel_size},
                 {"pipeline_parallel_size", pl.pipeline_parallel_size},
                 {"enable_expert_parallel", pl.enable_expert_parallel},
                 {"expert_parallel_size", pl.expert_parallel_size()},
                 {"gpus", pl.gpus()},
                 {"engram", std::string(to_string(pl.engram))},
                 {"draft_stages_loaded", pl.load_draft_stages},
                 {"async_scheduling", f.async_scheduling}};
  ojson w;
  w["source"] = std::string(to_string(f.weights_source));
  w["how"] = f.weights_how;
  w["known"] = f.weights->known;
  if (!f.weights->known) w["reason"] = f.weights->reason;
  w["estimated"] = f.weights->estimated();
  if (f.weights->estimated()) w["estimated_parts"] = f.weights->estimated_reason();
  w["checkpoint_bytes"] = f.weights->total_bytes();
  w["main_bytes"] = f.weights->main.bytes;
  w["draft_bytes"] = f.weights->draft.bytes;
  w["tensors"] = f.weights->total_tensors();
  w["params"] = f.weights->main.params;
  w["active_params"] = f.weights->active_params;
  if (f.files) {
    ojson mm = ojson::array();
    for (const auto& m : f.files->mismatches) {
      mm.push_back({{"tensor", m.tensor}, {"what", m.what}, {"contract", m.contract}, {"files", m.files}});
    }
    w["mismatch_count"] = f.files->mismatch_count;
    w["mismatches"] = std::move(mm);
    w["contract_bytes"] = f.files->contract_bytes;
  }
  if (const auto& ic = f.incomplete_checkpoint) {
    ojson missing = ojson::array();
    for (const auto& m : ic->missing) {
      ojson e = {{"file", m.file}, {"why", m.why}};
      if (m.tensors >= 0) e["tensors"] = m.tensors;
      missing.push_back(std::move(e));
    }
    ojson c = {{"dir", ic->dir},
               {"reason", ic->reason},
               {"missing_count", ic->missing_count},
               {"expected_files", ic->expected_files},
               {"missing_tensors", ic->missing_tensors},
               {"missing", std::move(missing)},
               {"files", ic->files},
               {"files_tensors", ic->files_tensors},
               {"files_bytes", ic->files_bytes}};
    if (ic->index_total_size) c["index_total_size"] = *ic->index_total_size;
    c["contract_exact_main_bytes"] = ic->contract_exact_main_bytes;
    w["incomplete_checkpoint"] = std::move(c);
  }
  j["weights"] = std::move(w);
  j["replicated_bytes"] = f.placement.replicated_bytes;
  j["tensor_bytes"] = f.placement.tensor_bytes;
  j["expert_bytes"] = f.placement.expert_bytes;
  j["host_bytes"] = f.placement.host_bytes;
  j["local_query_heads"] = f.placement.local_query_heads;
  j["padded_query_heads"] = f.placement.padded_query_heads;
  ojson stages = ojson::array();
  for (const auto& st : f.stages) {
    const auto& rw = st.weights;
    stages.push_back({{"stage", rw.stage},
                      {"first_layer", rw.first_layer},
                      {"last_layer", rw.last_layer},
                      {"weights_bytes", rw.total_bytes},
                      {"replicated_bytes", rw.replicated_bytes},
                      {"tensor_bytes", rw.tensor_bytes},
                      {"expert_bytes", rw.expert_bytes},
                      {"host_bytes", rw.host_bytes},
                      {"experts_per_rank", rw.experts_per_rank},
                      {"part_bytes", part_bytes_json(rw.part_bytes)},
                      {"budget", budget_json(st.budget)},
                      {"vllm_kv", vllm_kv_json(st.kv)}});
  }
  j["stages"] = std::move(stages);
  const auto& v = f.vllm;
  j["vllm"] = {{"available_kv_bytes", v.available_bytes},
               {"num_blocks", v.num_blocks},
               {"limiting_stage", v.limiting_stage},
               {"max_model_len", v.max_model_len},
               {"maximum_concurrency", v.concurrency},
               {"gpu_kv_cache_tokens", v.gpu_kv_cache_tokens},
               {"needed_bytes", v.needed_bytes},
               {"estimated_max_model_len", v.estimated_max_model_len},
               // vLLM's KV arithmetic as computed; its verdict only where the plan has one (a refused
               // or undecided plan has none: fit.fits and fit.decided say so).
               {"fits", v.fits && f.decided},
               {"log_line", v.log_line},
               {"error_message", v.error_message}};
  j["engines"] = f.engines;
  j["total_concurrency"] = f.total_concurrency;
  j["total_gpu_kv_cache_tokens"] = f.total_kv_tokens;
  // The prefix cache and the host offload tier (app/output/render_kv_tiers.cpp).
  j["kv_tiers"] = kv_tiers_json(f);
  return j;
}

ojson finding_json(const Finding& f) {
  ojson j;
  j["id"] = f.id;
  j["severity"] = std::string(to_string(f.severity));
  j["message"] = f.message;
  if (!f.path.empty()) j["path"] = f.path;
  if (!f.fix.empty()) j["fix"] = f.fix;
  return j;
}

std::string dump_json(const ojson& j) {
  return json_printable(j.dump(2, ' ', false, ojson::error_handler_t::replace)) + "\n";
}

std::string dump_json_nested(const ojson& j, int depth) {
  // JSON strings hold no raw newline, so every newline of the dump is one between lines.
  const std::string text = json_printable(j.dump(2, ' ', false, ojson::error_handler_t::replace));
  const std::string indent(static_cast<std::size_t>(2 * depth), ' ');
  std::string o;
  o.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    o += c;
    if (c == '\n') o += indent;
  }
  return o;
}

ojson findings_json(const std::vector<Finding>& findings) {
  ojson arr = ojson::array();
  for (const auto& f : findings) arr.push_back(finding_json(f));
  return arr;
}

ojson search_json(const PlanResult& r);       // render_search.cpp
ojson launch_json(const PlanResult& r);       // render_search.cpp
ojson sweep_json(const PlanResult& r);        // render_search.cpp
ojson sensitivity_json(const PlanResult& r);  // render_search.cpp
ojson sglang_json(const PlanResult& r);       // render_sglang.cpp

std::string render_plan_json(const PlanResult& r) {
  ojson j = json_document();
  j["config"] = r.config.source;
  j["model"] = model_json(r.config);
  ojson layers = ojson::array();
  for (const auto& l : r.topology.layers) layers.push_back(layer_json(l));
  j["layers"] = std::move(layers);
  ojson types = ojson::array();
  for (auto t : r.topology.types_present) types.push_back(std::string(to_string(t)));
  j["layer_types"] = std::move(types);
  ojson runs = ojson::array();
  for (const auto& run : r.topology.runs) {
    ojson x;
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
    j["backend"] = backend_json(*r.layout);
    j["layout"] = layout_json(*r.layout);
    ojson shapes = ojson::array();
    for (const auto& s : r.kernel_shapes) shapes.push_back(kernel_shape_json(s));
    j["kernel_shapes"] = std::move(shapes);
    j["parallel"] = parallel_json(r.layout->parallel);
  }
  if (r.fit) {
    j["fit"] = fit_json(*r.fit);
    if (const auto pub = published_params(r.config)) {
      j["fit"]["weights"]["published"] = {{"model", std::string(pub->model)},
                                          {"total_params", pub->total_billions * 1e9},
                                          {"active_params", pub->active_billions * 1e9},
                                          {"source", std::string(pub->source)}};
    }
  }
  j["search"] = search_json(r);
  j["launch"] = launch_json(r);
  j["engine"] = std::string(to_string(r.engine));
  j["sglang"] = sglang_json(r);
  if (r.log_check) {
    const LogCheck& c = *r.log_check;
    ojson rows = ojson::array();
    for (const auto& x : c.rows) {
      rows.push_back({{"what", x.what},
                      {"unit", x.unit},
                      {"planned", x.planned ? ojson(*x.planned) : ojson(nullptr)},
                      {"logged", x.logged ? ojson(*x.logged) : ojson(nullptr)},
                      {"line", x.line},
                      {"disagrees", x.disagrees}});
    }
    j["log_check"] = {
        {"file", c.file},          {"vllm_version", c.vllm_version}, {"model_runner_v2", c.model_runner_v2},
        {"rows", std::move(rows)}, {"applied", c.applied},           {"notes", c.notes}};
  } else {
    j["log_check"] = nullptr;
  }
  j["max_model_len_auto"] =
      r.auto_max_model_len
          ? ojson({{"max_model_len", *r.auto_max_model_len}, {"min_concurrency", r.auto_min_concurrency}})
          : ojson(nullptr);
  j["context_sweep"] = sweep_json(r);
  j["sensitivity"] = sensitivity_json(r);
  j["batch"] = {{"context_lens", r.batch.context_lens},
                {"spec_tokens", r.batch.spec_tokens},
                {"decode_tokens", r.batch.positions.size()},
                {"default", r.batch.defaulted},
                {"description", r.batch.description}};
  // The batch against one engine's KV cache (fit.decode_batch); null where the fit does not say
  // how large the cache is.
  if (const auto& bf = r.batch_fit) {
    j["batch"]["kv_cache"] = {{"fits", bf->fits},
                              {"tokens", bf->tokens},
                              {"blocks", bf->blocks},
                              {"usable_blocks", bf->usable_blocks},
                              {"gpu_kv_cache_tokens", bf->cache_tokens},
                              {"requests_that_fit", bf->requests_that_fit}};
  } else {
    j["batch"]["kv_cache"] = nullptr;
  }
  // The sparse indexer's transient prefill workspace (docs/prefill.md); null where the fit has no
  // KV cache to compare it with or the model has no indexer.
  if (const auto& p = r.prefill) {
    ojson indexer_layers = ojson::array();
    for (const auto& l : p->shape.layers) {
      indexer_layers.push_back({{"first_layer", l.layer},
                                {"layers", l.layers},
                                {"compress_ratio", l.compress_ratio},
                                {"score_bytes", 4},
                                {"mask_bytes", l.mask_bytes}});
    }
    j["prefill"] = {{"tiling", std::string(to_string(p->shape.tiling))},
                    {"logits_budget_bytes", p->shape.logits_budget_bytes},
                    {"engine", p->engine},
                    {"decode_context_parallel_size", p->shape.decode_context_parallel_size},
                    {"indexer_layers", std::move(indexer_layers)},
                    {"stage", p->stage},
                    {"chunk_tokens", p->chunk_tokens},
                    {"max_model_len", p->max_model_len},
                    {"peak_layer", p->peak_layer},
                    {"entries", p->entries},
                    {"peak_bytes", p->peak_bytes},
                    {"profile_bytes", p->profile_bytes},
                    {"total_bytes", p->total_bytes},
                    {"budgeted_bytes", p->budgeted_bytes},
                    {"budget_slack_bytes", p->budget_slack_bytes},
                    {"headroom_bytes", p->headroom_bytes},
                    {"fits", p->fits},
                    {"longest_prompt", p->longest_prompt},
                    {"safe_chunk", p->safe_chunk},
                    {"any_chunk", p->any_chunk}};
  } else {
    j["prefill"] = nullptr;
  }
  // --decode-context-parallel-size > 1: the KV cache per rank next to plain TP and DP attention.
  if (r.fit && r.fit->context_parallel) {
    const ContextParallelFit& cp = *r.fit->context_parallel;
    ojson options = ojson::array();
    for (const auto& x : cp.options) {
      options.push_back({{"label", x.label},
                         {"tensor_parallel_size", x.tensor_parallel_size},
                         {"data_parallel_size", x.data_parallel_size},
                         {"decode_context_parallel_size", x.decode_context_parallel_size},
                         {"computed", x.computed},
                         {"fits", x.fits},
                         {"request_bytes", x.request_bytes},
                         {"blocks_per_request", x.blocks_per_request},
                         {"num_blocks", x.num_blocks},
                         {"concurrency", x.concurrency},
                         {"engines", x.engines},
                         {"total_concurrency", x.total_concurrency},
                         {"note", x.note}});
    }
    j["context_parallel"] = {{"decode_context_parallel_size", cp.decode_context_parallel_size},
                             {"interleave_size", cp.interleave_size},
                             {"refused", cp.refused},
                             {"refusal", cp.refusal},
                             {"options", std::move(options)}};
  } else {
    j["context_parallel"] = nullptr;
  }
  ojson schedules = ojson::array();
  for (const auto& s : r.schedules) {
    ScheduleEntry e{std::string(to_string(s.type)), s.input, s.plan};
    ojson x = schedule_entry_json(e);
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
  ojson warnings = ojson::array();
  for (const auto& f : r.findings) {
    if (f.severity == Severity::warning) warnings.push_back(f.message);
  }
  j["warnings"] = std::move(warnings);
  return dump_json(j);
}

}  // namespace mlaplan::cli

namespace mlaplan::cli {

ojson schedule_entry_json(const ScheduleEntry& e) {
  const auto& p = e.plan;
  ojson j;
  j["layer_type"] = e.layer_type.empty() ? ojson(nullptr) : ojson(e.layer_type);
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
  ojson splits = ojson::array();
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
  ojson j = json_document();
  ojson arr = ojson::array();
  for (const auto& e : entries) arr.push_back(schedule_entry_json(e));
  j["schedules"] = std::move(arr);
  return dump_json(j);
}

}  // namespace mlaplan::cli

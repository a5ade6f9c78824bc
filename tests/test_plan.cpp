// make_plan(): the library's whole pipeline. The fit answer (weights placed per GPU, vLLM's budget
// and its printed numbers) on the bundled configs, the exit decision, what would fit instead,
// weights from a model directory's safetensors headers, and the guards.

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "mlaplan/base/error.hpp"
#include "mlaplan/plan/matrix.hpp"
#include "mlaplan/plan/plan.hpp"
#include "mlaplan/rules/rules.hpp"
#include "mlaplan/model/weights.hpp"
#include "temp_dir.hpp"

using namespace mlaplan;

namespace {

std::string src(const std::string& rel) { return std::string(MLAPLAN_SOURCE_DIR) + "/" + rel; }
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
double gib(std::int64_t b) { return static_cast<double>(b) / kGiB; }

PlanRequest on_tp(std::int64_t tp, std::int64_t dp = 1, bool ep = false) {
  PlanRequest r;
  r.layout.tensor_parallel_size = tp;
  r.layout.data_parallel_size = dp;
  r.layout.enable_expert_parallel = ep;
  return r;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream o;
  o << in.rdbuf();
  return o.str();
}

/// configs/deepseek-v4-flash.json changed by `edit` (a parsed config.json).
template <class Edit>
ModelConfig v4_flash_with(Edit edit, const std::string& name = "t.json") {
  nlohmann::json j = nlohmann::json::parse(read_text(src("configs/deepseek-v4-flash.json")));
  edit(j);
  return parse_config(j.dump(), name);
}

/// The V4-Flash-0731 re-release as its config.json has it: the V4-Flash fields, compress_ratios of
/// 46 entries for 43 layers (three DSpark stages) while num_nextn_predict_layers says 1, and
/// dspark_block_size 5 at the top level.
ModelConfig v4_flash_0731() {
  return v4_flash_with(
      [](nlohmann::json& j) {
        j["compress_ratios"].push_back(0);
        j["compress_ratios"].push_back(0);
        j["dspark_block_size"] = 5;
      },
      "v4-flash-0731.json");
}

std::int64_t draft_layers_of(const Topology& t) {
  std::int64_t n = 0;
  for (const auto& l : t.layers) n += l.draft ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("make_plan: V4.1-Flash does not fit one H200, fits eight, and says what would", "[plan][fit]") {
  const Plan one = make_plan(src("configs/deepseek-v4.1-flash.json"), PlanRequest{});
  REQUIRE(one.fit);
  CHECK_FALSE(one.fit->fits);
  CHECK(one.exit_code == 4);
  CHECK(one.fit->weights->total_bytes() == 509'890'541'400);
  CHECK(one.fit->stages[0].budget.available_bytes < 0);
  CHECK(one.fit->weights_exceed_gpu);
  // Engram's tables in host memory (vLLM's default): 278.70 GiB of weights on the one GPU.
  CHECK_THAT(one.exit_message, Catch::StartsWith("weights need 278.70 GiB per GPU, 1.99 x the 139.80 GiB of h200; vLLM "
                                                 "fails while loading the weights"));
  REQUIRE_FALSE(one.fit->suggestions.empty());
  CHECK_THAT(one.fit->suggestions.back(), Catch::StartsWith("--tp 1 --dp 4 --enable-expert-parallel (4 GPUs"));

  const Plan eight = make_plan(src("configs/deepseek-v4.1-flash.json"), on_tp(8));
  REQUIRE(eight.fit);
  CHECK(eight.fit->fits);
  CHECK(eight.exit_code == 0);
  const auto& st = eight.fit->stages.at(0);
  CHECK(gib(st.weights.total_bytes) == Approx(47.44).margin(0.01));
  // available = requested - every term; num_blocks = available // bytes_per_block;
  // concurrency = num_blocks / blocks_per_request; tokens = int(concurrency x max_model_len).
  const auto& v = eight.fit->vllm;
  CHECK(v.available_bytes == st.budget.requested_bytes - st.budget.non_kv_bytes);
  CHECK(v.num_blocks == v.available_bytes / st.kv.bytes_per_block);
  CHECK(v.concurrency == Approx(static_cast<double>(v.num_blocks) / static_cast<double>(st.kv.blocks_per_request)));
  CHECK(v.gpu_kv_cache_tokens == static_cast<std::int64_t>(v.concurrency * 1048576.0));
  CHECK_THAT(v.log_line, Catch::StartsWith("GPU KV cache size: ") &&
                             Catch::Contains(" tokens, Maximum concurrency for 1,048,576 tokens per request: "));
  CHECK(eight.fit->suggestions.empty());
}

TEST_CASE("make_plan: a GPU no backend runs on has no fit and no would-fit", "[plan][fit]") {
  PlanRequest r = on_tp(8);
  r.target.gpu = "a100";
  const Plan p = make_plan(src("configs/deepseek-v4.1-flash.json"), r);
  REQUIRE(p.fit);
  CHECK(p.exit_code == 3);  // the backend rule decides the exit
  CHECK_FALSE(p.fit->decided);
  CHECK(p.fit->no_backend);
  CHECK_FALSE(p.fit->fits);
  CHECK(p.fit->suggestions.empty());
  CHECK_THAT(p.fit->verdict, Catch::StartsWith("not decided: no attention backend runs this model on a100 (FlashMLA "
                                               "Sparse is only supported on Hopper and Blackwell DC devices"));
  bool finding = false;
  for (const auto& f : p.findings) finding = finding || (f.id == "backend.arch" && f.severity == Severity::error);
  CHECK(finding);
  // A GPU it runs on: decided, as before.
  const Plan h = make_plan(src("configs/deepseek-v4.1-flash.json"), on_tp(8));
  CHECK(h.fit->decided);
  CHECK_FALSE(h.fit->no_backend);
}

TEST_CASE("make_plan: DP engines multiply the concurrency, EP divides the experts", "[plan][fit]") {
  const Plan p = make_plan(src("configs/deepseek-v4-flash.json"), on_tp(2, 4, true));
  REQUIRE(p.fit);
  CHECK(p.fit->fits);
  CHECK(p.fit->engines == 4);
  CHECK(p.fit->total_concurrency == Approx(p.fit->vllm.concurrency * 4));
  CHECK(p.fit->total_kv_tokens == p.fit->vllm.gpu_kv_cache_tokens * 4);
  CHECK(gib(p.fit->stages[0].weights.total_bytes) == Approx(21.87).margin(0.01));
  CHECK(p.fit->stages[0].weights.experts_per_rank == 256 / 8);
}

TEST_CASE("make_plan: async scheduling doubles the window reserve", "[plan][fit]") {
  PlanRequest sync = on_tp(8);
  sync.deploy.async_scheduling = false;
  const Plan a = make_plan(src("configs/deepseek-v4.1-flash.json"), on_tp(8));
  const Plan s = make_plan(src("configs/deepseek-v4.1-flash.json"), sync);
  CHECK(s.fit->stages[0].kv.blocks_per_request < a.fit->stages[0].kv.blocks_per_request);
  CHECK(s.fit->vllm.concurrency > a.fit->vllm.concurrency);
}

TEST_CASE("make_plan: speculative decoding loads the draft stages and their caches", "[plan][fit]") {
  PlanRequest spec = on_tp(2);
  spec.batch.spec_tokens = 1;
  const Plan plain = make_plan(src("configs/deepseek-v4-flash.json"), on_tp(2));
  const Plan draft = make_plan(src("configs/deepseek-v4-flash.json"), spec);
  CHECK_FALSE(plain.fit->speculative);
  CHECK(draft.fit->speculative);
  // docs/fit.md section 2: one MTP stage adds 0.159 GiB non-expert + 3.188 GiB of experts at TP1;
  // at TP2 the experts halve and the replicated part of the stage stays whole.
  const double added = gib(draft.fit->stages[0].weights.total_bytes - plain.fit->stages[0].weights.total_bytes);
  CHECK(added == Approx(3.188 / 2 + 0.159 / 2).margin(0.03));
  CHECK(draft.fit->stages[0].kv.specs.size() > plain.fit->stages[0].kv.specs.size());
}

TEST_CASE("make_plan: a rejected layout is exit 3 naming the flag", "[plan][fit]") {
  const Plan p = make_plan(src("configs/deepseek-v4-flash.json"), on_tp(16));
  CHECK(p.exit_code == 3);
  CHECK_THAT(p.exit_message, Catch::Contains("--tensor-parallel-size"));
  CHECK_FALSE(p.fit->fits);
}

TEST_CASE("make_plan: the longest max_model_len and the utilisation that would fit", "[plan][fit]") {
  // V4-Flash at TP2 on a 96 GiB GPU: weights 73.26 GiB leave little for the KV cache.
  PlanRequest r = on_tp(2);
  r.target.gpu = "h20";
  const Plan p = make_plan(src("configs/deepseek-v4-flash.json"), r);
  REQUIRE(p.fit);
  if (!p.fit->fits) {
    CHECK(p.exit_code == 4);
    CHECK_FALSE(p.fit->suggestions.empty());
    CHECK_THAT(p.exit_message, Catch::Contains("Would fit:"));
  }
  // A smaller budget on purpose: the KV cache is given, the check fails, the estimate is below L.
  PlanRequest k = on_tp(8);
  k.budget.kv_cache_memory_bytes = 1LL << 30;
  const Plan q = make_plan(src("configs/deepseek-v4.1-flash.json"), k);
  REQUIRE(q.fit);
  CHECK_FALSE(q.fit->fits);
  CHECK(q.fit->vllm.estimated_max_model_len > 0);
  CHECK(q.fit->vllm.estimated_max_model_len < 1048576);
  CHECK_THAT(q.exit_message, Catch::Contains("estimated maximum model length is " +
                                             std::to_string(q.fit->vllm.estimated_max_model_len)));
  bool longest = false;
  for (const auto& s : q.fit->suggestions)
    longest |= s.rfind("--max-model-len " + std::to_string(q.fit->vllm.estimated_max_model_len), 0) == 0;
  CHECK(longest);
  // --max-model-len at that estimate fits.
  PlanRequest at = k;
  at.layout.max_model_len = q.fit->vllm.estimated_max_model_len;
  CHECK(make_plan(src("configs/deepseek-v4.1-flash.json"), at).fit->fits);
  at.layout.max_model_len = q.fit->vllm.estimated_max_model_len + 64;
  CHECK_FALSE(make_plan(src("configs/deepseek-v4.1-flash.json"), at).fit->fits);
}

TEST_CASE("make_plan: the concurrency guard uses vLLM's number", "[plan][fit]") {
  PlanRequest r = on_tp(8);
  r.guards.min_concurrency = 1000;
  const Plan p = make_plan(src("configs/deepseek-v4.1-flash.json"), r);
  CHECK(p.exit_code == 4);
  bool found = false;
  for (const auto& f : p.findings) found |= f.id == "guard.concurrency";
  CHECK(found);
  r.guards.min_concurrency = 1;
  CHECK(make_plan(src("configs/deepseek-v4.1-flash.json"), r).exit_code == 0);
}

TEST_CASE("make_plan: a model directory with safetensors headers gives the weights", "[plan][fit]") {
  testing_files::TempDir dir;
  // config.json plus one shard of tensors the contract does not list in those shapes; with `big`
  // one more of 160 GB (a sparse data area), so that the files hold more than V4-Flash's contract.
  {
    std::ifstream in(src("configs/deepseek-v4-flash.json"));
    std::ofstream out(dir / "config.json");
    out << in.rdbuf();
  }
  const auto write_shard = [&](bool big) {
    std::string header =
        R"({"embed.weight":{"dtype":"BF16","shape":[129280,4096],"data_offsets":[0,1059061760]},)"
        R"("layers.0.ffn.experts.0.w1.weight":{"dtype":"I8","shape":[2048,2048],"data_offsets":[1059061760,1063256064]})";
    std::int64_t data = 1063256064;
    if (big) {
      header += R"(,"layers.0.ffn.experts.300.w1.weight":{"dtype":"U8","shape":[160000000000],)"
                R"("data_offsets":[1063256064,161063256064]})";
      data = 161063256064;
    }
    header += "}";
    std::ofstream out(dir / "model.safetensors", std::ios::binary | std::ios::trunc);
    std::uint64_t n = header.size();
    char len[8];
    std::memcpy(len, &n, 8);
    out.write(len, 8);
    out << header;
    out.seekp(static_cast<std::streamoff>(8 + header.size() + data - 1));
    out.put('\0');
  };
  write_shard(true);
  const Plan p = make_plan(dir.path.string(), on_tp(8));
  REQUIRE(p.fit);
  CHECK(p.fit->weights_source == WeightsSource::files);
  CHECK(p.fit->weights->total_bytes() == 161063256064);
  REQUIRE(p.fit->files);
  CHECK(p.fit->files->mismatch_count > 0);
  CHECK_FALSE(p.fit->incomplete_checkpoint);
  CHECK_THAT(p.fit->weights_how, Catch::Contains("1 safetensors header"));
  PlanRequest derived = on_tp(8);
  derived.deploy.read_checkpoint_files = false;
  const Plan d = make_plan(dir.path.string(), derived);
  CHECK(d.fit->weights_source == WeightsSource::config);
  CHECK(d.fit->weights->total_bytes() == 159'609'485'896);

  // Holding 1 GB of V4-Flash's 156 GB main model, the files are not the checkpoint: the config's
  // weights stand in, and the plan fails with checkpoint.incomplete.
  write_shard(false);
  const Plan partial = make_plan(dir.path.string(), on_tp(8));
  REQUIRE(partial.fit);
  CHECK(partial.fit->weights_source == WeightsSource::config);
  CHECK(partial.fit->weights->total_bytes() == 159'609'485'896);
  REQUIRE(partial.fit->incomplete_checkpoint);
  CHECK(partial.fit->incomplete_checkpoint->files_bytes == 1063256064);
  CHECK(partial.fit->incomplete_checkpoint->contract_exact_main_bytes == 156'015'698'140);
  CHECK(partial.exit_code == 2);
  CHECK_THAT(partial.exit_message, Catch::Contains("is incomplete: the files' main model holds 1063256064 B, less "
                                                   "than the 156015698140 B config.json's contract has"));
  CHECK(partial.fit->fits);  // the plan itself, with the config's weights
}

TEST_CASE("bytes_by_cache_kind: the kinds sum to the layout's accounting", "[plan][layout]") {
  for (const char* name :
       {"configs/deepseek-v4.1-flash.json", "configs/deepseek-v4-flash.json", "configs/deepseek-v3.2.json"}) {
    INFO(name);
    const Plan p = make_plan(src(name), on_tp(8));
    REQUIRE(p.layout);
    const auto kinds = bytes_by_cache_kind(*p.layout);
    double rows = 0, pages = 0;
    std::int64_t req_pages = 0, req_rows = 0;
    for (const auto& k : kinds) {
      rows += k.rows_per_token;
      pages += k.pages_per_token;
      req_pages += k.request_pages;
      req_rows += k.request_rows;
    }
    const auto& a = p.layout->accounting;
    CHECK(rows == Approx(a.global_rows.value()));
    CHECK(pages == Approx(a.global_pages.value()));
    CHECK(req_pages == a.total_pages);
    CHECK(std::llabs(req_rows - a.total_rows) <= 4);
    // Window caches grow with no history: no global bytes per token.
    CHECK(kinds[static_cast<std::size_t>(CacheKind::swa)].pages_per_token == 0);
  }
}

TEST_CASE("make_plan: one draft-layer count for the topology, the KV caches, the tiers and the weights",
          "[plan][fit][draft]") {
  const ModelConfig c = v4_flash_0731();
  CHECK(c.num_nextn_predict_layers == 1);
  CHECK(c.num_draft_layers == 3);
  CHECK(draft_method(c) == DraftMethod::dspark);
  const Topology t = build_topology(c);
  CHECK(draft_layers_of(t) == 3);
  CHECK(t.count_draft(LayerType::swaonly) == 3);

  PlanRequest r = on_tp(4);
  r.batch.spec_tokens = 5;
  const Plan p = make_plan_on(c, t, r);
  REQUIRE(p.fit);
  CHECK(p.fit->weights->draft_stages == 3);
  // Every draft layer registers its caches, and the prefix cache and host tier plan the same groups.
  const VllmKvConfig& kv = p.fit->stages.at(0).kv;
  std::set<std::int64_t> drafts;
  for (const auto& s : kv.specs) {
    if (s.draft) drafts.insert(s.layer);
  }
  CHECK(drafts == std::set<std::int64_t>{43, 44, 45});
  REQUIRE(p.fit->prefix_cache);
  std::int64_t specs = 0;
  for (const auto& g : p.fit->prefix_cache->groups) specs += g.specs;
  CHECK(specs == static_cast<std::int64_t>(kv.specs.size()));
  REQUIRE(p.fit->host_offload);
  CHECK(p.fit->host_offload->groups.size() == kv.groups.size());
  // Nothing says that some of its draft entries are ignored.
  for (const auto& f : p.findings) {
    INFO(f.id << ": " << f.message);
    CHECK(f.id != "config.extra_ratios");
    CHECK(f.message.find("ignored") == std::string::npos);
  }

  // The same count everywhere, for every bundled config, the re-release and a V4.1 list that
  // covers fewer draft layers than num_nextn_predict_layers declares (padded: the field counts).
  std::vector<ModelConfig> configs = {load_config(src("configs/deepseek-v4.1-flash.json")),
                                      load_config(src("configs/deepseek-v4-flash.json")),
                                      load_config(src("configs/deepseek-v3.2.json")), c};
  configs.push_back(
      parse_config(R"({"model_type": "deepseek_v41_text", "num_hidden_layers": 4, "num_nextn_predict_layers": 3, )"
                   R"("compress_ratios": [0, 2, 1, 1, 0]})",
                   "short-tail.json"));
  for (const auto& cfg : configs) {
    INFO(cfg.file);
    const WeightsReport w = compute_weights(cfg, {false});
    CHECK(w.draft_stages == cfg.num_draft_layers);
    CHECK(draft_layers_of(build_topology(cfg)) == cfg.num_draft_layers);
  }
  CHECK(configs.back().num_draft_layers == 3);
}

TEST_CASE("make_plan: the window reserve retains extra tokens for multi-module MTP only, never for DSpark",
          "[plan][fit][draft]") {
  // vLLM's get_kv_cache_configs gives every sliding-window spec max(0, num_prefill_lookahead_tokens
  // - 1) extra tokens; the lookahead is K for multi-module MTP and 1 for DSpark (docs/fit.md).
  auto reserve = [](const ModelConfig& cfg, std::int64_t tp, std::int64_t k) {
    PlanRequest r = on_tp(tp);
    r.batch.spec_tokens = k;
    const Plan p = make_plan(cfg, r);
    REQUIRE(p.fit);
    REQUIRE(p.fit->speculative == (k > 0));
    const VllmKvConfig& kv = p.fit->stages.at(0).kv;
    CHECK(kv.retained_tokens == kv.extra_retained_tokens + kv.batches_in_flight * 8192);
    return kv.extra_retained_tokens;
  };
  // V4.1-Flash with DSpark, 5 draft tokens, 8,192 batched tokens, async: R = 2 x 8,192 = 16,384
  // (a public start-up log reproduces only with R = 16,384 or 16,385).
  const ModelConfig v41 = load_config(src("configs/deepseek-v4.1-flash.json"));
  CHECK(reserve(v41, 8, 5) == 0);
  CHECK(reserve(v41, 8, 3) == 0);
  CHECK(extra_retained_tokens(v41, 5) == 0);
  CHECK(prefill_lookahead_tokens(v41, 5) == 1);
  {
    PlanRequest r = on_tp(8);
    r.batch.spec_tokens = 5;
    const Plan p = make_plan(v41, r);
    CHECK(p.fit->stages.at(0).kv.retained_tokens == 16384);
  }
  // V4-Flash-0731's DSpark stages: the same.
  CHECK(reserve(v4_flash_0731(), 4, 5) == 0);
  // Three MTP stages (no dspark_block_size): multi-module MTP once K > 1.
  const ModelConfig mtp3 = v4_flash_with([](nlohmann::json& j) {
    j["num_nextn_predict_layers"] = 3;
    j["compress_ratios"].push_back(0);
    j["compress_ratios"].push_back(0);
  });
  REQUIRE(draft_method(mtp3) == DraftMethod::mtp);
  CHECK(multi_module_mtp(mtp3, 3));
  CHECK_FALSE(multi_module_mtp(mtp3, 1));
  CHECK(reserve(mtp3, 4, 3) == 2);
  CHECK(reserve(mtp3, 4, 2) == 1);
  CHECK(reserve(mtp3, 4, 1) == 0);
  CHECK(prefill_lookahead_tokens(mtp3, 3) == 3);
  // One MTP stage reused for K tokens is single-module: no extra tokens.
  const ModelConfig v4 = load_config(src("configs/deepseek-v4-flash.json"));
  CHECK_FALSE(multi_module_mtp(v4, 3));
  CHECK(reserve(v4, 4, 3) == 0);
  CHECK(prefill_lookahead_tokens(v4, 0) == 0);
}

TEST_CASE("make_plan: placements shared between plans (check --matrix) give the plans made alone", "[plan][fit]") {
  const ModelConfig cfg = load_config(src("configs/deepseek-v4.1-flash.json"));
  const Topology topo = build_topology(cfg);
  const auto weights = std::make_shared<const WeightsReport>(compute_weights(cfg, {false}));
  const auto kinds = std::make_shared<const std::vector<ShardKind>>(shard_kinds(*weights, EngramPlacement::gpu));
  const auto memo = std::make_shared<PlacementMemo>();
  for (const std::string gpu : {"h200", "b200", "h20"}) {
    for (const std::int64_t tp : {1, 8, 4}) {
      INFO(gpu << " TP " << tp);
      PlanRequest r = on_tp(tp);
      r.target.gpu = gpu;
      r.weights = weights;
      r.shard_kinds = kinds;
      const Plan alone = make_plan_on(cfg, topo, r);
      r.placements = memo;
      const Plan shared = make_plan_on(cfg, topo, r);
      CHECK(shared.exit_code == alone.exit_code);
      CHECK(shared.fit->verdict == alone.fit->verdict);
      CHECK(shared.fit->placement.max_rank_bytes == alone.fit->placement.max_rank_bytes);
      CHECK(shared.fit->placement.findings.size() == alone.fit->placement.findings.size());
      CHECK(shared.fit->vllm.num_blocks == alone.fit->vllm.num_blocks);
      CHECK(shared.fit->total_concurrency == alone.fit->total_concurrency);
    }
  }
  // Bound to the weights it placed first.
  const WeightsReport other = compute_weights(cfg, {false});
  CHECK_THROWS_AS(memo->place(cfg, other, ParallelLayout{}, *kinds), Error);
}

TEST_CASE("plan_matrix: every preset x dtype x layout, each cell as make_plan_on plans it", "[plan][matrix]") {
  const ModelConfig cfg = load_config(src("configs/deepseek-v4.1-flash.json"));
  PlanRequest base;
  base.layout.max_model_len = 65536;
  const std::vector<MatrixLayout> layouts = {{8, 1}, {1, 8}};
  const ConfigMatrix m = plan_matrix(cfg, base, layouts);
  // V4.1 stores fp8_ds_mla and nvfp4_ds_mla: presets x 2 dtypes x 2 layouts, in that order.
  REQUIRE(m.cells.size() == gpu_presets().size() * 2 * layouts.size());
  CHECK(m.exit_code == 0);
  CHECK_FALSE(m.incomplete);
  CHECK(m.cells[0].gpu == std::string(gpu_presets()[0].id));
  CHECK(m.cells[0].kv_cache_dtype == "fp8_ds_mla");
  CHECK(m.cells[1].tensor_parallel_size == 1);
  CHECK(m.cells[1].data_parallel_size == 8);
  CHECK(m.cells[2].kv_cache_dtype == "nvfp4_ds_mla");
  std::size_t supported = 0;
  const Topology topo = build_topology(cfg);
  for (const MatrixCell& c : m.cells) {
    INFO(c.gpu << " " << c.kv_cache_dtype << " TP " << c.tensor_parallel_size << " DP " << c.data_parallel_size);
    CHECK(!c.result.empty());
    // The cell is the plan of that target, dtype and layout.
    PlanRequest req = base;
    req.target.gpu = c.gpu;
    req.layout.kv_cache_dtype = c.kv_cache_dtype;
    req.layout.tensor_parallel_size = c.tensor_parallel_size;
    req.layout.data_parallel_size = c.data_parallel_size;
    req.schedules = false;
    req.suggestions = false;
    const Plan p = make_plan_on(cfg, topo, req);
    CHECK(c.exit_code == p.exit_code);
    CHECK(c.supported == (p.exit_code == 0 && p.fit && p.fit->decided));
    if (p.fit) CHECK(c.maximum_concurrency == p.fit->total_concurrency);
    if (c.supported) {
      ++supported;
      CHECK(c.backend.has_value());
      CHECK(c.result.rfind("fits: ", 0) == 0);
    }
  }
  CHECK(supported > 0);
  CHECK(supported < m.cells.size());  // nvfp4_ds_mla needs SM100: refused on the Hopper presets
}

TEST_CASE("make_plan: the fewest-GPUs fix never proposes heads per rank the backend does not run", "[plan][fit]") {
  // V4.1 with 256 heads at TP 2 does not hold its weights on an H200; TP 1 would leave 256 heads per
  // rank, which FlashMLA refuses (backend.query_heads): the fix keeps TP 2 or more.
  auto j = nlohmann::json::parse(read_text(src("configs/deepseek-v4.1-flash.json")));
  j["text_config"]["num_attention_heads"] = 256;
  const ModelConfig cfg = parse_config(j.dump(), "h256.json");
  PlanRequest r = on_tp(2);
  r.target.gpu = "h200";
  const Plan p = make_plan(cfg, r);
  REQUIRE(p.fit);
  CHECK_FALSE(p.fit->fits);
  bool fewest = false;
  for (const auto& s : p.fit->suggestions) {
    INFO(s);
    if (s.find("the fewest") == std::string::npos) continue;
    fewest = true;
    CHECK(s.rfind("--tp 1 ", 0) == std::string::npos);
  }
  CHECK(fewest);
}

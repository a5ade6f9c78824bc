// make_plan(): the library's whole pipeline. The fit answer (weights placed per GPU, vLLM's budget
// and its printed numbers) on the bundled configs, the exit decision, what would fit instead,
// weights from a model directory's safetensors headers, and the guards.

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>

#include "mlaplan/error.hpp"
#include "mlaplan/plan.hpp"
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
  r.deploy.enable_expert_parallel = ep;
  return r;
}

}  // namespace

TEST_CASE("make_plan: V4.1-Flash does not fit one H200, fits eight, and says what would", "[plan][fit]") {
  const Plan one = make_plan(src("configs/deepseek-v4.1-flash.json"), PlanRequest{});
  REQUIRE(one.fit);
  CHECK_FALSE(one.fit->fits);
  CHECK(one.exit_code == 4);
  CHECK(one.fit->weights->total_bytes() == 509'890'541'400);
  CHECK(one.fit->stages[0].budget.available_bytes < 0);
  CHECK_THAT(one.exit_message, Catch::StartsWith("No available memory for the cache blocks"));
  REQUIRE_FALSE(one.fit->suggestions.empty());
  CHECK_THAT(one.fit->suggestions.back(), Catch::StartsWith("--tp 4 --enable-expert-parallel (4 GPUs"));

  const Plan eight = make_plan(src("configs/deepseek-v4.1-flash.json"), on_tp(8));
  REQUIRE(eight.fit);
  CHECK(eight.fit->fits);
  CHECK(eight.exit_code == 0);
  const auto& st = eight.fit->stages.at(0);
  CHECK(gib(st.weights.total_bytes) == Approx(59.83).margin(0.01));
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
  // deployment.md section 2: one MTP stage adds 0.159 GiB non-expert + 3.188 GiB of experts at TP1;
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

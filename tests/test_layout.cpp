// Tests of the GPU targets (src/hardware/target.cpp) and the KV-cache layout planner (src/cache/layout.cpp),
// docs/layout-accounting.md: DeepSeek's published bytes-per-token figures, the page sizes of
// the published page examples, cache objects and pools, capacity, parallelism, and every rejection path with its
// whole message.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "mlaplan/engine/vllm/release.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/hardware/formats.hpp"
#include "mlaplan/cache/layout.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/topology.hpp"

using namespace mlaplan;

namespace {

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

std::string config_text(const std::string& rel) {
  std::ifstream in(std::string(MLAPLAN_SOURCE_DIR) + "/" + rel);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct Model {
  ModelConfig cfg;
  Topology topo;
};

Model model_from_text(const std::string& text) {
  Model m{parse_config(text, "test"), {}};
  m.topo = build_topology(m.cfg);
  return m;
}

Model model(const std::string& rel) {
  Model m{load_config(std::string(MLAPLAN_SOURCE_DIR) + "/" + rel), {}};
  m.topo = build_topology(m.cfg);
  return m;
}

const Model& v41() {
  static const Model m = model("configs/deepseek-v4.1-flash.json");
  return m;
}
const Model& v40() {
  static const Model m = model("configs/deepseek-v4-flash.json");
  return m;
}
const Model& v32() {
  static const Model m = model("configs/deepseek-v3.2.json");
  return m;
}

Target gpu(const std::string& id) {
  TargetRequest r;
  r.gpu = id;
  return resolve_target(r);
}

Layout plan(const Model& m, const std::string& gpu_id, const LayoutOptions& o = {}, Strictness s = Strictness::strict) {
  return plan_layout(m.cfg, m.topo, gpu(gpu_id), o, s);
}

LayoutOptions nvfp4_fp4() {
  LayoutOptions o;
  o.kv_cache_dtype = "nvfp4_ds_mla";
  o.indexer_cache_dtype = "fp4";
  return o;
}

const CacheObject& object(const Layout& L, std::int64_t layer, CacheKind kind) {
  for (const auto& o : L.objects) {
    if (o.layer == layer && o.kind == kind) return o;
  }
  FAIL("no " << to_string(kind) << " object on layer " << layer);
  throw std::logic_error("unreachable");
}

std::size_t count(const Layout& L, CacheKind kind) {
  std::size_t n = 0;
  for (const auto& o : L.objects) n += o.kind == kind ? 1 : 0;
  return n;
}

template <class F>
void require_error(F&& f, ErrorKind kind, const std::string& message) {
  try {
    f();
    FAIL("no error; expected: " << message);
  } catch (const Error& e) {
    CHECK(e.kind() == kind);
    CHECK(std::string(e.what()) == message);
  }
}

}  // namespace

// =============================================================== targets

TEST_CASE("GPU presets: ids, figures and the default", "[target]") {
  // Every GPU people serve these models on, with its runtime total (what cudaMemGetInfo reports,
  // docs/gpu-memory sources in src/hardware/target.cpp) and what that figure is.
  struct Fig {
    const char* id;
    int major, minor;
    std::int64_t sms, gib;
    std::int64_t runtime;
    MemoryBasis basis;
  };
  using B = MemoryBasis;
  const Fig figs[] = {
      {"h100", 9, 0, 132, 80, 81'082LL << 20, B::runtime_mib_floor},
      {"h100-pcie", 9, 0, 114, 80, 81'008LL << 20, B::runtime_mib_floor},
      {"h100-nvl", 9, 0, 132, 94, 99'861'594'112, B::runtime_bytes},
      {"h200", 9, 0, 132, 141, 150'109'880'320, B::runtime_bytes},
      {"h200-nvl", 9, 0, 132, 141, 150'109'880'320, B::runtime_bytes},
      {"h20", 9, 0, 78, 96, 97'285LL << 20, B::runtime_mib_floor},
      {"h20-3e", 9, 0, 78, 141, 150'109'880'320, B::runtime_bytes},
      {"h800", 9, 0, 132, 80, 81'559LL << 20, B::nvidia_smi},
      {"a100", 8, 0, 108, 80, 84'987'740'160, B::runtime_bytes},
      {"a100-pcie", 8, 0, 108, 80, 84'974'239'744, B::runtime_bytes},
      {"l20", 8, 9, 92, 48, 47'803'596'800, B::runtime_bytes},
      {"l40s", 8, 9, 142, 48, 47'803'596'800, B::runtime_bytes},
      {"rtx4090", 8, 9, 128, 24, 25'254'407'700, B::runtime_gib},   // 23.52 GiB
      {"rtx5090", 12, 0, 170, 32, 33'672'543'601, B::runtime_gib},  // 31.36 GiB
      {"rtx-pro-6000", 12, 0, 188, 96, 97'250LL << 20, B::runtime_mib_floor},
      {"b200", 10, 0, 148, 180, 182'631LL << 20, B::runtime_mib_floor},
      {"b300", 10, 3, 148, 288, 287'429'948'867, B::runtime_gib},   // 267.69 GiB
      {"gb200", 10, 0, 148, 186, 197'901'355'581, B::runtime_gib},  // 184.31 GiB
      {"gb300", 10, 3, 148, 288, 296'889'614'336, B::runtime_gib},  // 276.50 GiB
      {"gh200", 9, 0, 132, 96, 101'468'602'368, B::runtime_bytes},
      {"gh200-144", 9, 0, 132, 144, 153'008'209'920, B::fixture},
      {"gb10", 12, 1, 48, 128, 130'663'006'208, B::runtime_bytes},
  };
  REQUIRE(gpu_presets().size() == std::size(figs));
  for (std::size_t i = 0; i < std::size(figs); ++i) CHECK(gpu_presets()[i].id == figs[i].id);
  for (const auto& f : figs) {
    INFO(f.id);
    const Target t = gpu(f.id);
    CHECK(t.id == f.id);
    CHECK(t.cc == ComputeCapability{f.major, f.minor});
    CHECK(t.num_sms == f.sms);
    CHECK(t.memory_bytes == f.gib * kGiB);
    CHECK(t.runtime_memory_bytes == f.runtime);
    CHECK(t.runtime_basis == f.basis);
    CHECK(t.memory_upper_bound() == (f.basis == B::nvidia_smi));
    CHECK_FALSE(t.runtime_memory_source.empty());
    CHECK(t.source == TargetSource::preset);
    CHECK_FALSE(t.default_used);
    CHECK(t.overridden_fields().empty());
  }
  CHECK(gpu("b300").note.find("unconfirmed") != std::string::npos);
  CHECK(gpu("a100").note.find("40 GB") != std::string::npos);

  const Target d = resolve_target({});
  CHECK(d.id == "h200");
  CHECK(d.default_used);
  CHECK(d.cc.str() == "9.0");
  CHECK(d.cc.sm() == "sm90");
  CHECK(to_string(d.source) == "preset");
}

TEST_CASE("GPU ids are matched loosely, unknown ids get a suggestion", "[target]") {
  CHECK(find_gpu_preset("H200").id == "h200");
  CHECK(find_gpu_preset("RTX_PRO_6000").id == "rtx-pro-6000");
  CHECK(find_gpu_preset("rtx pro 6000").id == "rtx-pro-6000");
  const std::string known =
      " Known ids: h100, h100-pcie, h100-nvl, h200, h200-nvl, h20, h20-3e, h800, a100, a100-pcie, l20, l40s, rtx4090, "
      "rtx5090, rtx-pro-6000, b200, b300, gb200, gb300, gh200, gh200-144, gb10 (or describe the GPU with --arch, "
      "--num-sms and --gpu-memory-gib)";
  // h100, h200, h800 and b300 are all one edit away: too many to choose from.
  require_error([] { find_gpu_preset("h300"); }, ErrorKind::usage, "--gpu: unknown GPU 'h300'." + known);
  require_error([] { find_gpu_preset("h2000"); }, ErrorKind::usage,
                "--gpu: unknown GPU 'h2000'; did you mean 'h200'?" + known);
  require_error([] { find_gpu_preset("b30"); }, ErrorKind::usage,
                "--gpu: unknown GPU 'b30'; did you mean 'b300'?" + known);
  require_error([] { find_gpu_preset("rtx"); }, ErrorKind::usage,
                "--gpu: unknown GPU 'rtx'; did you mean 'rtx4090', 'rtx5090' or 'rtx-pro-6000'?" + known);
  require_error([] { find_gpu_preset("h200-sxm"); }, ErrorKind::usage,
                "--gpu: unknown GPU 'h200-sxm'; did you mean 'h200'?" + known);
  require_error([] { find_gpu_preset("rtx-5090"); }, ErrorKind::usage,
                "--gpu: unknown GPU 'rtx-5090'; did you mean 'rtx5090'?" + known);
  require_error([] { find_gpu_preset("mi300x-accelerator"); }, ErrorKind::usage,
                "--gpu: unknown GPU 'mi300x-accelerator'." + known);
  require_error(
      [] {
        TargetRequest r;
        r.gpu = "tpu";
        resolve_target(r);
      },
      ErrorKind::usage, "--gpu: unknown GPU 'tpu'." + known);
}

TEST_CASE("arch spellings accepted by --arch", "[target]") {
  struct Case {
    const char* text;
    int major, minor;
  };
  const Case ok[] = {{"sm90", 9, 0},   {"sm_90", 9, 0},  {"sm90a", 9, 0}, {"SM100", 10, 0}, {"sm100f", 10, 0},
                     {"sm103", 10, 3}, {"sm120", 12, 0}, {"sm80", 8, 0},  {"sm89", 8, 9},   {"9.0", 9, 0},
                     {"10.3", 10, 3},  {"12.1", 12, 1},  {"8.6", 8, 6}};
  for (const auto& c : ok) {
    INFO(c.text);
    CHECK(parse_arch(c.text) == ComputeCapability{c.major, c.minor});
  }
  for (const auto& cc : known_archs()) CHECK(parse_arch(cc.sm()) == cc);
  const std::string allowed =
      "allowed: sm70, sm72, sm75, sm80, sm86, sm87, sm89, sm90, sm100, sm101, sm103, sm110, sm120, sm121 (also "
      "written as 9.0, sm_90 or sm90a)";
  for (const char* bad : {"sm95", "hopper", "", "sm", "9", "9.10", "sm1000", "sm9x", "10.", "compute_90", "9.5"}) {
    INFO(bad);
    require_error([&] { parse_arch(bad); }, ErrorKind::usage,
                  "--arch: '" + std::string(bad) + "' is not a known GPU architecture; " + allowed);
  }
}

TEST_CASE("resolve_target: custom --arch, overrides, bad values", "[target]") {
  {
    TargetRequest r;
    r.arch = "sm100";
    const Target t = resolve_target(r);
    CHECK(t.source == TargetSource::custom);
    CHECK(t.id == "custom");
    CHECK(t.name == "custom sm100 GPU");
    CHECK(t.cc == ComputeCapability{10, 0});
    CHECK(t.filled_from == "b200");
    CHECK(t.num_sms == gpu("b200").num_sms);
    CHECK(t.memory_bytes == gpu("b200").memory_bytes);
    CHECK(t.note ==
          "num_sms 148 and memory 180 GiB taken from the b200 preset (--arch without --gpu); 180 GB usable of 192 GB "
          "nominal HBM3e");
    CHECK_FALSE(t.default_used);
  }
  {
    TargetRequest r;
    r.arch = "9.0";
    r.num_sms = 78;
    const Target t = resolve_target(r);
    CHECK(t.num_sms == 78);
    CHECK(t.memory_bytes == gpu("h200").memory_bytes);
    CHECK(t.runtime_memory_bytes == gpu("h200").runtime_memory_bytes);
    CHECK(t.note ==
          "memory 141 GiB taken from the h200 preset (--arch without --gpu); in a pass-through VM the runtime reports "
          "139.72 GiB (--gpu-memory-gib 139.72)");
  }
  {
    TargetRequest r;
    r.arch = "sm86";
    r.num_sms = 84;
    r.memory_gib = 24;
    const Target t = resolve_target(r);
    CHECK(t.cc == ComputeCapability{8, 6});
    CHECK(t.num_sms == 84);
    CHECK(t.memory_bytes == 24 * kGiB);
    CHECK(t.filled_from.empty());
    CHECK(t.note.empty());
  }
  require_error(
      [] {
        TargetRequest r;
        r.arch = "sm86";
        r.num_sms = 84;
        resolve_target(r);
      },
      ErrorKind::usage,
      "--arch sm86 without --gpu needs --num-sms and --gpu-memory-gib: no preset has compute capability 8.6 "
      "(presets: h100, h100-pcie, h100-nvl, h200, h200-nvl, h20, h20-3e, h800, a100, a100-pcie, l20, l40s, rtx4090, "
      "rtx5090, rtx-pro-6000, b200, b300, gb200, gb300, gh200, gh200-144, gb10)");
  {
    TargetRequest r;
    r.gpu = "h100";
    r.num_sms = 114;
    r.memory_gib = 79.5;
    r.arch = "sm90a";  // same capability: not an override
    const Target t = resolve_target(r);
    CHECK(t.num_sms == 114);
    CHECK(t.memory_bytes == static_cast<std::int64_t>(79.5 * static_cast<double>(kGiB)));
    CHECK(t.overridden_fields() == std::vector<std::string>{"num_sms", "memory_bytes"});
  }
  {
    TargetRequest r;
    r.gpu = "b200";
    r.arch = "sm103";
    const Target t = resolve_target(r);
    CHECK(t.arch_overridden);
    CHECK(t.overridden_fields() == std::vector<std::string>{"compute_capability"});
  }
  {
    TargetRequest r;  // overrides of the default target keep default_used
    r.memory_gib = 100;
    const Target t = resolve_target(r);
    CHECK(t.default_used);
    CHECK(t.id == "h200");
    CHECK(t.memory_overridden);
  }
  for (std::int64_t sms : {std::int64_t{0}, std::int64_t{-3}, std::int64_t{1025}}) {
    require_error(
        [&] {
          TargetRequest r;
          r.num_sms = sms;
          resolve_target(r);
        },
        ErrorKind::usage, "--num-sms: '" + std::to_string(sms) + "' is out of range; allowed 1..1024");
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::pair<double, std::string> bad_mem[] = {
      {0.0, "0"}, {-1.0, "-1"}, {1e30, "1e+30"}, {nan, "nan"}, {inf, "inf"}};
  for (const auto& [v, text] : bad_mem) {
    require_error(
        [&] {
          TargetRequest r;
          r.gpu = "h200";
          r.memory_gib = v;
          resolve_target(r);
        },
        ErrorKind::usage, "--gpu-memory-gib: '" + text + "' is out of range; allowed 2^-30 (1 byte) up to 1048576 GiB");
  }
  const Target det = detected_target("NVIDIA H200", {9, 0}, 132, 150 * kGiB);
  CHECK(det.source == TargetSource::detected);
  CHECK(to_string(det.source) == "detected");
  require_error(
      [] {
        detected_target("x", {9, 0}, 0, kGiB);
      },
      ErrorKind::usage, "detected device SM count: '0' is out of range; allowed 1..1024");
}

// =============================================================== dtypes, defaults

TEST_CASE("kv and indexer cache dtypes", "[layout]") {
  CHECK(parse_kv_cache_dtype("auto") == KvCacheDtype::fp8_ds_mla);
  CHECK(parse_kv_cache_dtype("fp8") == KvCacheDtype::fp8_ds_mla);
  CHECK(parse_kv_cache_dtype("fp8_ds_mla") == KvCacheDtype::fp8_ds_mla);
  CHECK(parse_kv_cache_dtype("nvfp4_ds_mla") == KvCacheDtype::nvfp4_ds_mla);
  CHECK(parse_indexer_cache_dtype("fp8") == IndexerCacheDtype::fp8);
  CHECK(parse_indexer_cache_dtype("fp4") == IndexerCacheDtype::fp4);
  const std::string list = "supported: auto, fp8, fp8_ds_mla, nvfp4_ds_mla";
  require_error([] { parse_kv_cache_dtype("bfloat16"); }, ErrorKind::usage,
                "--kv-cache-dtype: 'bfloat16' is not a kv-cache dtype of the sparse-MLA backend; " + list +
                    " (FlashMLA doesn't support bfloat16)");
  require_error([] { parse_kv_cache_dtype("fp8_e5m2"); }, ErrorKind::usage,
                "--kv-cache-dtype: 'fp8_e5m2' is not a kv-cache dtype of the sparse-MLA backend; " + list +
                    " (FlashMLA doesn't support fp8_e5m2)");
  // vLLM's values ignoring case, as plan's --kv-cache-dtype.
  CHECK(parse_kv_cache_dtype("FP8") == KvCacheDtype::fp8_ds_mla);
  CHECK(parse_kv_cache_dtype("NvFp4_DS_MLA") == KvCacheDtype::nvfp4_ds_mla);
  require_error([] { parse_kv_cache_dtype("FP8_E5M2"); }, ErrorKind::usage,
                "--kv-cache-dtype: 'FP8_E5M2' is not a kv-cache dtype of the sparse-MLA backend; " + list +
                    " (FlashMLA doesn't support fp8_e5m2)");
  require_error([] { parse_kv_cache_dtype("fp8_dsmla"); }, ErrorKind::usage,
                "--kv-cache-dtype: 'fp8_dsmla' is not a kv-cache dtype of the sparse-MLA backend; " + list +
                    "; did you mean 'fp8_ds_mla'?");
  require_error([] { parse_kv_cache_dtype("nvfp4"); }, ErrorKind::usage,
                "--kv-cache-dtype: 'nvfp4' is not a kv-cache dtype of the sparse-MLA backend; " + list +
                    "; did you mean 'nvfp4_ds_mla'?");
  require_error([] { parse_indexer_cache_dtype("FP4"); }, ErrorKind::usage,
                "--indexer-cache-dtype: 'FP4' is not an indexer-cache dtype; supported: fp8, fp4; did you mean 'fp4'?");
  require_error([] { parse_indexer_cache_dtype("bf16"); }, ErrorKind::usage,
                "--indexer-cache-dtype: 'bf16' is not an indexer-cache dtype; supported: fp8, fp4");
  // Through the planner the usage error keeps its kind.
  LayoutOptions o;
  o.kv_cache_dtype = "int8";
  require_error([&] { plan(v41(), "h200", o); }, ErrorKind::usage,
                "--kv-cache-dtype: 'int8' is not a kv-cache dtype; allowed: auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2, "
                "fp8_ds_mla, nvfp4_ds_mla");
}

TEST_CASE("block sizes, windows, in-flight defaults, head padding, PP partition", "[layout]") {
  using B = BackendId;
  CHECK(backend_block_sizes(B::flashmla_sparse_dsv41, Family::deepseek_v41, {9, 0}) == std::vector<std::int64_t>{64});
  CHECK(backend_block_sizes(B::flashmla_sparse_dsv41, Family::deepseek_v41, {10, 0}) == std::vector<std::int64_t>{128});
  CHECK(backend_block_sizes(B::flashmla_sparse_dsv41_fused, Family::deepseek_v41, {10, 3}) ==
        std::vector<std::int64_t>{128});
  CHECK(backend_block_sizes(B::flashmla_sparse_dsv4, Family::deepseek_v4, {9, 0}) == std::vector<std::int64_t>{256});
  CHECK(backend_block_sizes(B::flashmla_sparse, Family::deepseek_v32, {10, 0}) == std::vector<std::int64_t>{64});
  CHECK(backend_block_sizes(B::flashinfer_mla_sparse_sm120, Family::deepseek_v41, {12, 0}) ==
        std::vector<std::int64_t>{64, 128});
  CHECK(backend_window_block(B::flashmla_sparse_dsv41, Family::deepseek_v41) == 32);
  CHECK(backend_window_block(B::flashinfer_mla_sparse_sm120, Family::deepseek_v41) == 64);
  CHECK(backend_window_block(B::flashmla_sparse_dsv4, Family::deepseek_v4) == 64);
  CHECK(backend_window_block(B::flashmla_sparse, Family::deepseek_v32) == 0);
  CHECK(plan(v41(), "h200").block_size == 64);
  CHECK(plan(v41(), "b200").block_size == 128);
  CHECK(plan(v41(), "b200").block_size_default);

  // vLLM's server default: 8192 on >= 70 GiB GPUs other than A100, else 2048; from 0.28.0 16384
  // on GPUs whose runtime total is at least 160 GiB.
  BackendReleaseRules r027, r028;
  r028.batch_tier_160gib = true;
  for (const auto& p : gpu_presets()) {
    INFO(p.id);
    const bool big = p.memory_gib >= 70 && std::string(p.id).find("a100") == std::string::npos;
    const Target t = gpu(std::string(p.id));
    const std::int64_t total = t.runtime_memory_bytes > 0 ? t.runtime_memory_bytes : t.memory_bytes;
    CHECK(default_in_flight_tokens(t, r027) == (big ? 8192 : 2048));
    CHECK(default_in_flight_tokens(t, r028) == (total >= (std::int64_t{160} << 30) ? 16384 : big ? 8192 : 2048));
  }
  CHECK(default_in_flight_tokens(gpu("b200"), r028) == 16384);
  CHECK(default_in_flight_tokens(gpu("h200"), r028) == 8192);
  CHECK(backend_release_rules(find_vllm_release("0.27.1")).batch_tier_160gib == false);
  CHECK(backend_release_rules(find_vllm_release("0.28.0")).batch_tier_160gib);
  CHECK(backend_release_rules(find_vllm_release("0.31.0")).batch_tier_160gib);

  for (std::int64_t h = 1; h <= 128; ++h) CHECK(padded_query_heads(h) == (h <= 64 ? 64 : 128));
  CHECK_FALSE(padded_query_heads(0));
  CHECK_FALSE(padded_query_heads(129));

  CHECK(pipeline_partition(40, 1) == std::vector<std::int64_t>{40});
  CHECK(pipeline_partition(40, 2) == std::vector<std::int64_t>{20, 20});
  CHECK(pipeline_partition(40, 3) == std::vector<std::int64_t>{13, 14, 13});
  CHECK(pipeline_partition(61, 4) == std::vector<std::int64_t>{15, 15, 16, 15});
  CHECK(pipeline_partition(43, 10) == std::vector<std::int64_t>{4, 4, 4, 4, 4, 4, 5, 5, 5, 4});
  for (std::int64_t n : {1, 7, 40, 43, 61}) {
    for (std::int64_t p = 1; p <= n; ++p) {
      const auto parts = pipeline_partition(n, p);
      std::int64_t sum = 0, lo = n, hi = 0;
      for (auto x : parts) {
        sum += x;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
      CHECK(sum == n);
      CHECK(hi - lo <= 1);
      CHECK(parts.back() == n / p);  // the last stage never takes an extra layer
    }
  }
}

// =============================================================== published figures

TEST_CASE("DeepSeek's published bytes per token come out exactly", "[layout]") {
  // V3.2: 656 + 132 fp8 indexer per layer, 61 layers.
  const Layout a = plan(v32(), "h200");
  CHECK(a.accounting.global_rows == BytesPerToken{48068, 1});
  CHECK(a.accounting.global_rows.str() == "48068");

  // V4-Flash: 584 main + 68 fp4 indexer.
  LayoutOptions fp4;
  fp4.indexer_cache_dtype = "fp4";
  const Layout b = plan(v40(), "h200", fp4);
  CHECK(b.accounting.global_rows == BytesPerToken{14057, 4});
  CHECK(b.accounting.global_rows.str() == "3514.25");
  CHECK(b.accounting.global_rows.value() == 3514.25);

  // V4.1-Flash: 288 fp4 main + 68 fp4 indexer (SM100 only).
  const Layout c = plan(v41(), "b200", nvfp4_fp4());
  CHECK(c.accounting.global_rows == BytesPerToken{890, 1});
  CHECK(c.accounting.global_rows.str() == "890");

  // The GB figures at 1,048,576 tokens (1 GB = 1e9 B): 50.4, 3.68, 0.93.
  // Truncated to the digits DeepSeek prints (3,685,000,192 B is "3.68 GB").
  auto digits = [](const Layout& L, double unit) {
    return static_cast<std::int64_t>(static_cast<double>(L.accounting.global_rows.times_ceil(1048576)) / unit);
  };
  CHECK(digits(a, 1e8) == 504);
  CHECK(digits(b, 1e7) == 368);
  CHECK(digits(c, 1e7) == 93);

  // With the default formats the same configs give (the published page examples and the JSON contract example):
  const Layout d = plan(v41(), "h200");
  CHECK(d.accounting.global_rows.str() == "1790");
  CHECK(d.accounting.global_pages.str() == "1827");
}

TEST_CASE("rows accounting is the sum of row / ratio over global owners", "[layout]") {
  for (const Model* m : {&v41(), &v40(), &v32()}) {
    const Layout L = plan(*m, "b200");
    std::int64_t num = 0;
    std::int64_t den = 128;  // every ratio divides 128
    for (const Layer& l : m->topo.layers) {
      if (l.draft || !l.is_kv_source) continue;
      const std::int64_t ratio = l.compress_ratio < 1 ? 1 : l.compress_ratio;
      const auto& f =
          row_format(m->cfg.family == Family::deepseek_v32 ? RowFormatId::fp8_ds_mla_v32 : RowFormatId::fp8_ds_mla_v4);
      num += f.row_bytes * (den / ratio);
      if (l.owns_indexer_cache) num += row_format(RowFormatId::indexer_fp8).row_bytes * (den / ratio);
    }
    CHECK(L.accounting.global_rows.value() == static_cast<double>(num) / static_cast<double>(den));
  }
}

// =============================================================== pages

TEST_CASE("V4.1 page sizes of the published examples", "[layout]") {
  // fp8_ds_mla on SM90 (block 64) and SM100 (block 128).
  const Layout h = plan(v41(), "h200");
  CHECK(object(h, 0, CacheKind::swa).unpadded_page_bytes == 18688);
  CHECK(object(h, 0, CacheKind::swa).page_bytes == 19008);
  CHECK(object(h, 20, CacheKind::compressed).page_bytes == 37440);
  CHECK(object(h, 2, CacheKind::compressed).page_bytes == 19008);
  CHECK(object(h, 20, CacheKind::indexer).page_bytes == 8640);
  CHECK(object(h, 2, CacheKind::indexer).page_bytes == 4608);
  const Layout b = plan(v41(), "b200");
  CHECK(object(b, 0, CacheKind::swa).page_bytes == 19008);
  CHECK(object(b, 20, CacheKind::compressed).page_bytes == 74880);
  CHECK(object(b, 2, CacheKind::compressed).page_bytes == 37440);
  // nvfp4_ds_mla (SM100).
  LayoutOptions n;
  n.kv_cache_dtype = "nvfp4_ds_mla";
  const Layout f = plan(v41(), "b200", n);
  CHECK(object(f, 0, CacheKind::swa).page_bytes == 16896);
  CHECK(object(f, 20, CacheKind::compressed).page_bytes == 36864);
  CHECK(object(f, 2, CacheKind::compressed).page_bytes == 18432);
  CHECK(object(f, 20, CacheKind::indexer).alignment == 512);
  CHECK(object(f, 2, CacheKind::compressed).format_name == "v41_fp4");
  CHECK(object(f, 0, CacheKind::swa).format_name == "v41_fp8");
  CHECK(object(h, 0, CacheKind::swa).format_name == "fp8_ds_mla_v4");

  // Rows and tokens per page: window 32/32; compressed and indexer B/ratio rows over B tokens.
  for (const Layout* L : {&h, &b, &f}) {
    for (const auto& o : L->objects) {
      INFO("layer " << o.layer << " " << to_string(o.kind));
      switch (o.kind) {
        case CacheKind::swa:
          CHECK(o.rows_per_page == 32);
          CHECK(o.tokens_per_page == 32);
          CHECK(o.scope == CacheScope::per_request);
          CHECK(o.window_tokens == 128);
          break;
        case CacheKind::compressed:
        case CacheKind::indexer:
          CHECK(o.tokens_per_page == L->block_size);
          CHECK(o.rows_per_page * o.compress_ratio == L->block_size);
          CHECK(o.scope == CacheScope::global);
          break;
        case CacheKind::compressor_state:
          CHECK(o.ring);
          CHECK(o.rows_per_page == 8);
          CHECK(o.row_bytes == 4096);
          CHECK(o.page_bytes == 8 * 4096);
          break;
      }
    }
  }
}

TEST_CASE("cache objects per layer", "[layout]") {
  SECTION("V4.1: a window on every layer, caches on the sources, rings on ratio-2 sources") {
    const Layout L = plan(v41(), "h200");
    CHECK(count(L, CacheKind::swa) == 43);
    CHECK(count(L, CacheKind::compressed) == 4);
    CHECK(count(L, CacheKind::indexer) == 4);
    CHECK(count(L, CacheKind::compressor_state) == 3);
    for (const auto& o : L.objects) {
      const Layer& l = v41().topo.layers[static_cast<std::size_t>(o.layer)];
      CHECK(o.draft == l.draft);
      if (o.kind != CacheKind::swa) CHECK(l.is_kv_source);
      if (o.kind == CacheKind::compressor_state) CHECK(l.compress_ratio == 2);
    }
    // The ring grows with speculative tokens: max(8, next_pow2(spec + 2)).
    LayoutOptions o;
    o.num_speculative_tokens = 7;
    CHECK(object(plan(v41(), "h200", o), 2, CacheKind::compressor_state).rows_per_page == 16);
    o.num_speculative_tokens = 6;
    CHECK(object(plan(v41(), "h200", o), 2, CacheKind::compressor_state).rows_per_page == 8);
    // Without draft layers the three DSpark windows go.
    o.include_draft_layers = false;
    CHECK(count(plan(v41(), "h200", o), CacheKind::swa) == 40);
  }
  SECTION("V4.0: window block 64, compressed block 256, indexer on c4a, two states on c4a") {
    const Layout L = plan(v40(), "h200");
    CHECK(L.block_size == 256);
    CHECK(count(L, CacheKind::swa) == 44);
    CHECK(count(L, CacheKind::compressed) == 41);
    CHECK(count(L, CacheKind::indexer) == 21);
    CHECK(count(L, CacheKind::compressor_state) == 41 + 21);
    const auto& w = object(L, 0, CacheKind::swa);
    CHECK(w.rows_per_page == 64);
    CHECK(w.page_bytes == 37440);
    const auto& c4 = object(L, 2, CacheKind::compressed);
    CHECK(c4.compress_ratio == 4);
    CHECK(c4.rows_per_page == 64);
    CHECK(c4.page_bytes == 37440);
    const auto& c128 = object(L, 3, CacheKind::compressed);
    CHECK(c128.rows_per_page == 2);
    CHECK(c128.unpadded_page_bytes == 2 * 584);
    CHECK(c128.page_bytes == 1728);
    CHECK(object(L, 2, CacheKind::indexer).page_bytes == 8640);
    // States: fp32 kv + score of coff x dims; coff 2 at ratio 4. Block 4 (c4) / 8 (c128), 576-aligned.
    std::vector<const CacheObject*> c4_states;
    for (const auto& o : L.objects) {
      if (o.layer == 2 && o.kind == CacheKind::compressor_state) c4_states.push_back(&o);
    }
    REQUIRE(c4_states.size() == 2);
    CHECK(c4_states[0]->row_bytes == 2 * 2 * 512 * 4);
    CHECK(c4_states[0]->rows_per_page == 4);
    CHECK(c4_states[0]->window_tokens == 8);
    CHECK(c4_states[0]->page_bytes == 32832);
    CHECK(c4_states[1]->row_bytes == 2 * 2 * 128 * 4);
    CHECK(c4_states[1]->page_bytes == 8640);
    const auto& s128 = object(L, 3, CacheKind::compressor_state);
    CHECK(s128.row_bytes == 2 * 512 * 4);
    CHECK(s128.rows_per_page == 8);
    CHECK(s128.window_tokens == 128);
    CHECK(s128.page_bytes == 32832);
    CHECK_FALSE(s128.ring);
  }
  SECTION("V3.2: a 656-byte latent row and a 132-byte indexer row per token on every layer") {
    const Layout L = plan(v32(), "h200");
    CHECK(L.objects.size() == 2 * 62);
    for (const auto& o : L.objects) {
      CHECK(o.scope == CacheScope::global);
      CHECK(o.rows_per_page == 64);
      CHECK(o.compress_ratio == 1);
      CHECK(o.row_bytes == (o.kind == CacheKind::compressed ? 656 : 132));
      CHECK(o.page_bytes == 64 * o.row_bytes);
    }
    CHECK(L.accounting.per_request_rows == 0);
    CHECK(L.accounting.per_request_pages == 0);
    // The MTP layer's caches are objects of the layout; the pages (the engine's) count them only
    // when vLLM loads the draft stage (a speculative config), DeepSeek's rows never.
    CHECK(L.accounting.global_pages.str() == std::to_string(61 * (656 + 132)));
    CHECK(L.accounting.global_rows.str() == std::to_string(61 * (656 + 132)));
    LayoutOptions spec;
    spec.num_speculative_tokens = 1;
    const Layout S = plan(v32(), "h200", spec);
    CHECK(S.parallel.load_draft_stages);
    CHECK(S.accounting.global_pages.str() == std::to_string(62 * (656 + 132)));
    CHECK(S.accounting.global_rows.str() == std::to_string(61 * (656 + 132)));
  }
}

TEST_CASE("page groups: objects of equal page size share a pool", "[layout]") {
  for (const Model* m : {&v41(), &v40(), &v32()}) {
    for (const char* g : {"h200", "b200"}) {
      const Layout L = plan(*m, g);
      std::set<std::size_t> seen;
      std::int64_t prev = 0;
      for (const auto& grp : L.groups) {
        CHECK(grp.page_bytes > prev);
        prev = grp.page_bytes;
        REQUIRE_FALSE(grp.objects.empty());
        for (auto i : grp.objects) {
          CHECK(L.objects[i].page_bytes == grp.page_bytes);
          CHECK(seen.insert(i).second);
        }
      }
      CHECK(seen.size() == L.objects.size());
    }
  }
  // V4.1 SM90 fp8: the windows and the ratio-2 compressed caches share the 19008-byte pool.
  const Layout L = plan(v41(), "h200");
  for (const auto& grp : L.groups) {
    if (grp.page_bytes != 19008) continue;
    std::size_t swa = 0, comp = 0;
    for (auto i : grp.objects) {
      swa += L.objects[i].kind == CacheKind::swa ? 1 : 0;
      comp += L.objects[i].kind == CacheKind::compressed ? 1 : 0;
    }
    CHECK(swa == 43);
    CHECK(comp == 3);
  }
}

TEST_CASE("properties over configs, targets and dtypes", "[layout]") {
  struct Case {
    const Model* m;
    const char* gpu;
    LayoutOptions o;
  };
  std::vector<Case> cases;
  for (const char* g : {"h200", "b200", "b300"}) {
    cases.push_back({&v41(), g, {}});
    cases.push_back({&v40(), g, {}});
    cases.push_back({&v32(), g, {}});
    LayoutOptions fp4;
    fp4.indexer_cache_dtype = "fp4";
    cases.push_back({&v41(), g, fp4});
    cases.push_back({&v40(), g, fp4});
  }
  cases.push_back({&v41(), "b200", nvfp4_fp4()});
  std::vector<Model> smalls;
  smalls.reserve(4);
  for (const char* small : {"configs/small/v41-5layer-derived-sources.json", "configs/small/v41-6layer-reindex.json",
                            "configs/small/v41-8layer-flat.json", "configs/small/v4-2layer-layer-types.json"}) {
    smalls.push_back(model(small));
    cases.push_back({&smalls.back(), "h200", {}});
  }
  for (const auto& c : cases) {
    INFO(to_string(c.m->cfg.family) << " on " << c.gpu << " kv " << c.o.kv_cache_dtype << " idx "
                                    << c.o.indexer_cache_dtype);
    const Layout L = plan(*c.m, c.gpu, c.o);
    for (const auto& o : L.objects) {
      CHECK(o.page_bytes % o.alignment == 0);
      CHECK(o.unpadded_page_bytes == o.rows_per_page * o.row_bytes);
      CHECK(o.page_bytes >= o.unpadded_page_bytes);
      CHECK(o.page_bytes - o.unpadded_page_bytes < o.alignment);
    }
    // Rows accounting <= pages accounting, globally and per request.
    CHECK(L.accounting.global_rows.value() <= L.accounting.global_pages.value());
    CHECK(L.accounting.per_request_rows <= L.accounting.per_request_pages);
    CHECK(L.accounting.total_rows <= L.accounting.total_pages);
    CHECK(L.accounting.total_pages == request_bytes(L, -1, L.max_model_len));
    // Stages partition the layout.
    BytesPerToken sum;
    std::int64_t req = 0;
    for (const auto& s : L.parallel.stages) {
      sum = BytesPerToken{
          sum.numerator * s.accounting.global_pages.denominator + s.accounting.global_pages.numerator * sum.denominator,
          sum.denominator * s.accounting.global_pages.denominator};
      req += s.accounting.total_pages;
    }
    CHECK(sum.value() == L.accounting.global_pages.value());
    CHECK(req == L.accounting.total_pages);
  }
}

// =============================================================== per-request accounting

TEST_CASE("per-request window pages follow vLLM's sliding-window bound", "[layout]") {
  auto cdiv = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  for (std::int64_t in_flight : {1, 4, 8192}) {
    for (std::int64_t mml : {1, 100, 4096, 1048576}) {
      INFO("in flight " << in_flight << ", max_model_len " << mml);
      LayoutOptions o;
      o.in_flight_tokens = in_flight;
      o.max_model_len = mml;
      const Layout a = plan(v41(), "h200", o);
      CHECK_FALSE(a.in_flight_tokens_default);
      const std::int64_t W = v41().cfg.sliding_window;
      const std::int64_t win_pages = cdiv(std::min(W - 1 + in_flight, mml), 32) + 1;
      const auto& w = object(a, 0, CacheKind::swa);
      const auto& ring = object(a, 2, CacheKind::compressor_state);
      // 40 backbone windows: the 3 draft layers' windows count only with their stages loaded.
      CHECK(a.accounting.per_request_pages == 40 * win_pages * w.page_bytes + 3 * ring.page_bytes);
      CHECK(a.accounting.per_request_rows == 43 * std::min(W, mml) * w.row_bytes + 3 * 8 * 4096);
      // V4.0's analogue uses its 64-token window block, and each state its own span and block.
      const Layout b = plan(v40(), "h200", o);
      std::int64_t expect = 0;
      for (const auto& ob : b.objects) {
        if (ob.scope != CacheScope::per_request || ob.draft) continue;
        expect += (cdiv(std::min(ob.window_tokens - 1 + in_flight, mml), ob.tokens_per_page) + 1) * ob.page_bytes;
      }
      CHECK(b.accounting.per_request_pages == expect);
      CHECK(object(b, 0, CacheKind::swa).tokens_per_page == 64);
      // Global pages: whole pages of the max_model_len.
      std::int64_t global = 0;
      for (const auto& ob : a.objects) {
        if (ob.scope == CacheScope::global && !ob.draft) global += cdiv(mml, ob.tokens_per_page) * ob.page_bytes;
      }
      CHECK(a.accounting.total_pages == global + a.accounting.per_request_pages);
      CHECK(a.accounting.total_rows == a.accounting.global_rows.times_ceil(mml) + a.accounting.per_request_rows);
    }
  }
}

// =============================================================== backend rules

TEST_CASE("backend rules reject with their messages", "[layout]") {
  SECTION("nvfp4_ds_mla needs SM100") {
    LayoutOptions o = nvfp4_fp4();
    require_error([&] { plan(v41(), "h200", o); }, ErrorKind::unsupported,
                  "nvfp4_ds_mla needs SM100 (FlashMLA V4.1 fp8/fp4 sparse decode); target h200 is sm90 (compute "
                  "capability 9.0)");
    CHECK_NOTHROW(plan(v41(), "b300", o));
    CHECK_NOTHROW(plan(v41(), "gb200", o));
  }
  SECTION("nvfp4_ds_mla is a V4.1 format") {
    LayoutOptions o;
    o.kv_cache_dtype = "nvfp4_ds_mla";
    require_error([&] { plan(v40(), "b200", o); }, ErrorKind::unsupported,
                  "nvfp4_ds_mla is the DeepSeek V4.1 KV cache format; DeepSeek V4.0 and V3.2 store fp8_ds_mla "
                  "(--kv-cache-dtype nvfp4_ds_mla on FLASHMLA_SPARSE_DSV4)");
    require_error([&] { plan(v32(), "b200", o); }, ErrorKind::unsupported,
                  "nvfp4_ds_mla is the DeepSeek V4.1 KV cache format; DeepSeek V4.0 and V3.2 store fp8_ds_mla "
                  "(--kv-cache-dtype nvfp4_ds_mla on FLASHMLA_SPARSE)");
  }
  SECTION("V3.2 has no fp4 indexer") {
    LayoutOptions o;
    o.indexer_cache_dtype = "fp4";
    require_error([&] { plan(v32(), "h200", o); }, ErrorKind::unsupported,
                  "--indexer-cache-dtype fp4 is a DeepSeek V4/V4.1 option; deepseek_v32 keeps its indexer keys in fp8 "
                  "(132 bytes per row)");
  }
  SECTION("only Hopper and Blackwell datacentre GPUs") {
    for (const char* g : {"a100", "l40s"}) {
      const Target t = gpu(g);
      require_error([&] { plan(v41(), g); }, ErrorKind::unsupported,
                    "FlashMLA Sparse is only supported on Hopper and Blackwell DC devices; target " + std::string(g) +
                        " is " + t.cc.sm() + " (compute capability " + t.cc.str() +
                        "), supported: 9.x (sm90) and 10.x (sm100, sm103); FlashInfer's sparse MLA backend of "
                        "DeepSeek V4 / V4.1 runs on 10.x and 12.x");
    }
    for (const char* g : {"rtx-pro-6000", "rtx5090"}) {
      const Target t = gpu(g);
      require_error([&] { plan(v32(), g); }, ErrorKind::unsupported,
                    "FlashMLA Sparse is only supported on Hopper and Blackwell DC devices; target " + std::string(g) +
                        " is " + t.cc.sm() + " (compute capability " + t.cc.str() +
                        "), supported: 9.x (sm90) and 10.x (sm100, sm103)");
      CHECK(plan(v41(), g).backend == BackendId::flashinfer_mla_sparse_sm120);
    }
  }
  SECTION("block size") {
    LayoutOptions o;
    o.block_size = 16;
    require_error([&] { plan(v41(), "h200", o); }, ErrorKind::unsupported,
                  "No common block size for 16 between kv_manager=[16] and backend=[64] (--block-size: "
                  "FLASHMLA_SPARSE_DSV41 for deepseek_v41 on sm90 uses 64)");
    o.block_size = 64;
    require_error([&] { plan(v41(), "b200", o); }, ErrorKind::unsupported,
                  "No common block size for 64 between kv_manager=[64] and backend=[128] (--block-size: "
                  "FLASHMLA_SPARSE_DSV41 (fused) for deepseek_v41 on sm100 uses 128)");
    CHECK_FALSE(plan(v41(), "h200", o).block_size_default);
    o.block_size = 64;
    require_error([&] { plan(v40(), "h200", o); }, ErrorKind::unsupported,
                  "No common block size for 64 between kv_manager=[64] and backend=[256] (--block-size: "
                  "FLASHMLA_SPARSE_DSV4 for deepseek_v4 on sm90 uses 256)");
    o.block_size = 0;
    require_error([&] { plan(v41(), "h200", o); }, ErrorKind::usage,
                  "--block-size: '0' is out of range; allowed 1..1048576");
  }
  SECTION("tensor parallelism: heads must divide and fit the decode kernel") {
    LayoutOptions o;
    o.tensor_parallel_size = 3;
    require_error([&] { plan(v41(), "h200", o); }, ErrorKind::unsupported,
                  "Total number of attention heads (64) must be divisible by tensor parallel size (3); TP sizes that "
                  "divide it: 1, 2, 4, 8, 16, 32, 64");
    for (std::int64_t tp : {1, 2, 4, 8, 16, 32, 64}) {
      o.tensor_parallel_size = tp;
      const Layout L = plan(v41(), "h200", o);
      CHECK(L.parallel.local_query_heads == 64 / tp);
      CHECK(L.parallel.padded_query_heads == 64);
    }
    o.tensor_parallel_size = 1;
    CHECK(plan(v32(), "h200", o).parallel.padded_query_heads == 128);
    o.tensor_parallel_size = 2;
    CHECK(plan(v32(), "h200", o).parallel.padded_query_heads == 64);
    std::string text = config_text("configs/deepseek-v3.2.json");
    const std::string from = "\"num_attention_heads\": 128";
    REQUIRE(text.find(from) != std::string::npos);
    text.replace(text.find(from), from.size(), "\"num_attention_heads\": 256");
    const Model wide = model_from_text(text);
    o.tensor_parallel_size = 1;
    require_error(
        [&] { plan(wide, "h200", o); }, ErrorKind::unsupported,
        "FlashMLA sparse does not support 256 heads (the decode kernel requires h_q in {64, 128}). "
        "--tensor-parallel-size 1 leaves 256 query heads per rank (at most 128; fewer are padded to 64, 128)");
    const auto checks = resolve_layout_options(wide.cfg, wide.topo, gpu("h200"), o).checks;
    bool found = false;
    for (const auto& c : checks) {
      if (c.finding.id == "backend.query_heads") {
        found = true;
        CHECK(c.finding.fix == "use --tensor-parallel-size 2 or more");
      }
    }
    CHECK(found);
    o.tensor_parallel_size = 2;
    CHECK(plan(wide, "h200", o).parallel.padded_query_heads == 128);
  }
  SECTION("flag values out of range are usage errors") {
    struct Bad {
      LayoutOptions o;
      std::string msg;
    };
    std::vector<Bad> bad(6);
    bad[0].o.tensor_parallel_size = 0;
    bad[0].msg = "--tensor-parallel-size: '0' is out of range; allowed 1..4096";
    bad[1].o.data_parallel_size = 5000;
    bad[1].msg = "--data-parallel-size: '5000' is out of range; allowed 1..4096";
    bad[2].o.pipeline_parallel_size = 41;
    bad[2].msg =
        "--pipeline-parallel-size: '41' is out of range; allowed 1..40 (a stage needs at least "
        "one of the 40 backbone layers)";
    bad[3].o.max_model_len = 2000000;
    bad[3].msg =
        "--max-model-len: '2000000' is out of range; allowed 1..1048576 (the model's "
        "max_position_embeddings is 1048576)";
    bad[4].o.num_speculative_tokens = -1;
    bad[4].msg = "--spec-tokens: '-1' is out of range; allowed 0..64";
    bad[5].o.in_flight_tokens = 0;
    bad[5].msg = "--max-num-batched-tokens: '0' is out of range; allowed 1..16777216";
    for (const auto& b : bad) require_error([&] { plan(v41(), "h200", b.o); }, ErrorKind::usage, b.msg);
  }
}

TEST_CASE("pipeline parallelism keeps V4.1 sharing groups on one stage", "[layout]") {
  // Released V4.1-Flash: groups 2-7, 8-13, 14-19 (ratio 2) and 20-39 (ratio 1; index sources 24..36
  // and the candidate source 20 inside it). PP 2 cuts before 20, a source: fine. Any other size cuts
  // a group.
  LayoutOptions o;
  o.pipeline_parallel_size = 2;
  const Layout L = plan(v41(), "h200", o);
  REQUIRE(L.parallel.stages.size() == 2);
  CHECK(L.parallel.stages[0].first_layer == 0);
  CHECK(L.parallel.stages[0].last_layer == 19);
  CHECK(L.parallel.stages[1].first_layer == 20);
  CHECK(L.parallel.stages[1].last_layer == 39);
  CHECK(L.parallel.stages[1].num_draft_layers == 3);
  for (const auto& ob : L.objects) CHECK(ob.stage == (ob.layer < 20 ? 0 : 1));
  // Stage 0 holds the three ratio-2 groups, stage 1 the ratio-1 group and the draft windows.
  CHECK(L.parallel.stages[0].accounting.global_rows.value() == 3 * (584.0 + 132.0) / 2);
  CHECK(L.parallel.stages[1].accounting.global_rows.value() == 584.0 + 132.0);

  o.pipeline_parallel_size = 3;
  require_error([&] { plan(v41(), "h200", o); }, ErrorKind::unsupported,
                "--pipeline-parallel-size 3 cuts a DeepSeek V4.1 sharing group: layer 13 (stage 1) reads the "
                "compressed KV and indexer-key caches of its KV source, layer 8 (stage 0); PP splits inside a v4.1 "
                "kv-sharing group are not supported. Stages hold layers 0-12, 13-26, 27-39 (draft layers 40-42 with "
                "the last stage). Pipeline sizes that work: 1, 2");
  o.pipeline_parallel_size = 4;
  require_error([&] { plan(v41(), "h200", o); }, ErrorKind::unsupported,
                "--pipeline-parallel-size 4 cuts a DeepSeek V4.1 sharing group: layer 10 (stage 1) reads the "
                "compressed KV and indexer-key caches of its KV source, layer 8 (stage 0); PP splits inside a v4.1 "
                "kv-sharing group are not supported. Stages hold layers 0-9, 10-19, 20-29, 30-39 (draft layers 40-42 "
                "with the last stage). Pipeline sizes that work: 1, 2");
  for (std::int64_t pp = 3; pp <= 40; ++pp) {
    o.pipeline_parallel_size = pp;
    INFO("PP " << pp);
    const auto checks = resolve_layout_options(v41().cfg, v41().topo, gpu("h200"), o).checks;
    std::size_t cuts = 0;
    for (const auto& c : checks) cuts += c.finding.id == "backend.pipeline_cut" ? 1 : 0;
    CHECK(cuts == 1);
  }
  // V4.0 and V3.2 share nothing across layers: every size works, and stages split the cache.
  for (std::int64_t pp : {2, 3, 7, 43}) {
    o.pipeline_parallel_size = pp;
    const Layout a = plan(v40(), "h200", o);
    CHECK(static_cast<std::int64_t>(a.parallel.stages.size()) == pp);
    CHECK(a.parallel.stages.back().num_draft_layers == 1);
  }
  o.pipeline_parallel_size = 4;
  const Layout v = plan(v32(), "h200", o);
  // PP 4 of 61: 15, 15, 16, 15 layers, the MTP layer on the last (its caches only with a speculative
  // config): stage 2 holds the most, and less than the whole model.
  CHECK(request_bytes(v, 3, v.max_model_len) == request_bytes(v, 1, v.max_model_len));
  CHECK(request_bytes(v, 2, v.max_model_len) > request_bytes(v, 3, v.max_model_len));
  CHECK(request_bytes(v, 2, v.max_model_len) < request_bytes(v, -1, v.max_model_len));
  o.num_speculative_tokens = 1;
  const Layout vs = plan(v32(), "h200", o);
  CHECK(request_bytes(vs, 2, vs.max_model_len) == request_bytes(vs, 3, vs.max_model_len));
  o.num_speculative_tokens = 0;
  // A reindex layer depends on its own KV source; a small config where a cut splits a group.
  const Model small = model("configs/small/v41-6layer-reindex.json");
  for (std::int64_t pp = 1; pp <= small.cfg.num_hidden_layers; ++pp) {
    o.pipeline_parallel_size = pp;
    const auto parts = pipeline_partition(small.cfg.num_hidden_layers, pp);
    std::vector<std::int64_t> stage;
    for (std::size_t s = 0; s < parts.size(); ++s)
      stage.insert(stage.end(), static_cast<std::size_t>(parts[s]), static_cast<std::int64_t>(s));
    bool split = false;
    for (const Layer& l : small.topo.layers) {
      if (l.draft) continue;
      auto st = [&](std::int64_t i) { return stage[static_cast<std::size_t>(i)]; };
      if (l.kv_source && st(*l.kv_source) != st(l.index)) split = true;
      if (l.index_source && st(*l.index_source) != st(l.index)) split = true;
    }
    INFO("PP " << pp);
    if (split) {
      CHECK_THROWS_AS(plan(small, "h200", o), Error);
    } else {
      CHECK_NOTHROW(plan(small, "h200", o));
    }
  }
}

TEST_CASE("a layout is built from a resolution as it is, nothing resolved again", "[layout]") {
  LayoutOptions o = nvfp4_fp4();
  o.block_size = 96;
  o.kv_cache_dtype = "FP8";
  o.include_draft_layers = false;
  const LayoutResolution r = resolve_layout_options(v41().cfg, v41().topo, gpu("h200"), o);
  REQUIRE(r.options.usable);
  const Layout L = plan_layout(v41().cfg, v41().topo, gpu("h200"), r);
  // What the resolution says, and the flag as given where the layout shows it.
  CHECK(L.block_size == r.options.block);
  CHECK(L.kv_cache_dtype == r.options.kv);
  CHECK(L.kv_cache_dtype_requested == "FP8");
  CHECK_FALSE(L.include_draft_layers);
  CHECK(L.checks.size() == r.checks.size());
  // The same as resolving inside plan_layout (lenient).
  const Layout M = plan(v41(), "h200", o, Strictness::lenient);
  CHECK(M.objects.size() == L.objects.size());
  CHECK(M.accounting.global_pages.str() == L.accounting.global_pages.str());

  // A resolution that is not usable is a caller's bug: make_plan throws its usage error first.
  o.tensor_parallel_size = 0;
  const LayoutResolution bad = resolve_layout_options(v41().cfg, v41().topo, gpu("h200"), o);
  REQUIRE_FALSE(bad.options.usable);
  require_error([&] { plan_layout(v41().cfg, v41().topo, gpu("h200"), bad); }, ErrorKind::internal,
                "plan_layout: a resolution that is not usable");
}

TEST_CASE("findings instead of exceptions: resolve_layout_options and lenient plans", "[layout]") {
  LayoutOptions o = nvfp4_fp4();
  o.block_size = 96;
  o.pipeline_parallel_size = 3;
  const auto checks = resolve_layout_options(v41().cfg, v41().topo, gpu("h200"), o).checks;
  std::vector<std::string> errors;
  for (const auto& c : checks) {
    if (c.finding.severity == Severity::error) {
      errors.push_back(c.finding.id);
      CHECK(c.kind == ErrorKind::unsupported);
      CHECK_FALSE(c.finding.message.empty());
    }
  }
  CHECK(errors == std::vector<std::string>{"backend.kv_cache_dtype", "backend.block_size", "backend.pipeline_cut"});
  require_error([&] { throw_on_error(checks); }, ErrorKind::unsupported,
                "nvfp4_ds_mla needs SM100 (FlashMLA V4.1 fp8/fp4 sparse decode); target h200 is sm90 (compute "
                "capability 9.0)");

  // Lenient: the layout is still planned (the rejected block size falls back to the default).
  const Layout L = plan(v41(), "h200", o, Strictness::lenient);
  CHECK(L.block_size == 64);
  CHECK(object(L, 20, CacheKind::compressed).page_bytes == 64 * 288);
  std::size_t recorded = 0;
  for (const auto& c : L.checks) recorded += c.finding.severity == Severity::error ? 1 : 0;
  CHECK(recorded == 3);

  // Usage errors still throw in lenient mode; resolve_layout_options reports them.
  o.tensor_parallel_size = -2;
  require_error([&] { plan(v41(), "h200", o, Strictness::lenient); }, ErrorKind::usage,
                "--tensor-parallel-size: '-2' is out of range; allowed 1..4096");
  const auto c2 = resolve_layout_options(v41().cfg, v41().topo, gpu("h200"), o).checks;
  REQUIRE_FALSE(c2.empty());
  CHECK(c2.front().finding.id == "layout.tensor_parallel_size");
  CHECK(c2.front().kind == ErrorKind::usage);

  // Infos record the defaults applied.
  const Layout d = plan(v41(), "h200");
  std::set<std::string> infos;
  for (const auto& c : d.checks) {
    CHECK(c.finding.severity == Severity::info);
    infos.insert(c.finding.id);
  }
  CHECK(infos == std::set<std::string>{"layout.attention_backend", "layout.kv_cache_dtype", "layout.block_size",
                                       "layout.max_model_len", "layout.in_flight_tokens"});
}

TEST_CASE("BytesPerToken prints exact decimals", "[layout]") {
  CHECK(BytesPerToken{14057, 4}.str() == "3514.25");
  CHECK(BytesPerToken{1, 128}.str() == "0.0078125");
  CHECK(BytesPerToken{890, 1}.str() == "890");
  CHECK(BytesPerToken{0, 1}.str() == "0");
  CHECK(BytesPerToken{14057, 4}.times_ceil(3) == 10543);
  CHECK(BytesPerToken{14057, 4}.times_ceil(4) == 14057);
}

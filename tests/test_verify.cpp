// verify's orchestration on the host: a fake device (host quantizer, scheduler and reference)
// must pass; a device that gets a byte, a record or an output wrong must fail with the reason.

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "mlaplan/base/error.hpp"
#include "mlaplan/gpu_check/verify.hpp"
#include "mlaplan/version.hpp"
#include "output/verify_output.hpp"
#include "rule_testing.hpp"

using namespace mlaplan;

namespace {

using testing_rules::gpu;
using testing_rules::released;

VerifyOptions small_batch() {
  VerifyOptions o;
  o.batch.context_lens = {1, 130, 700, 4000};
  o.timing_iterations = 1;
  return o;
}

const VerifyCell& cell(const VerifyReport& r, const std::string& dtype, LayerType t) {
  for (const auto& c : r.cells) {
    if (c.kv_cache_dtype == dtype && c.type == t) return c;
  }
  FAIL("no cell " << dtype << " " << to_string(t));
  return r.cells.front();
}

}  // namespace

TEST_CASE("verify on a faithful device: V4.1-Flash on H200", "[verify]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  auto dev = make_host_verify_device();
  std::vector<std::string> progress;
  auto opts = small_batch();
  opts.progress = [&](const std::string& s) { progress.push_back(s); };
  const auto r = run_verify(cfg, topo, gpu("h200"), *dev, opts);
  CHECK(r.exit_code == 0);
  REQUIRE(r.cells.size() == 6);  // 2 dtypes x 3 layer types
  for (auto t : {LayerType::c1a, LayerType::c2a, LayerType::swaonly}) {
    const auto& c = cell(r, "fp8_ds_mla", t);
    CHECK(c.status == VerifyStatus::pass);
    CHECK(c.quantize_match);
    CHECK(c.schedule_match);
    CHECK(c.decode.pass);
    CHECK(c.h_q == 64);
    CHECK(c.main_format == "fp8_ds_mla_v4");
    CHECK(c.main_page == 32);
    CHECK(c.main_stride == 19008);
    const auto& n = cell(r, "nvfp4_ds_mla", t);
    CHECK(n.status == VerifyStatus::unsupported);
    CHECK_THAT(n.reason, Catch::StartsWith("nvfp4_ds_mla needs SM100"));
  }
  CHECK(cell(r, "fp8_ds_mla", LayerType::c1a).extra_page == 64);
  CHECK(cell(r, "fp8_ds_mla", LayerType::c1a).extra_stride == 37440);
  CHECK(cell(r, "fp8_ds_mla", LayerType::c2a).extra_page == 32);
  CHECK(cell(r, "fp8_ds_mla", LayerType::c1a).extra_topk == 512);
  CHECK(progress.size() == 6);  // a start and a result line per cell that ran
}

TEST_CASE("verify --force runs what the rules reject, labelled", "[verify]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  auto dev = make_host_verify_device();
  auto opts = small_batch();
  opts.kv_cache_dtypes = {"nvfp4_ds_mla"};
  opts.force = true;
  const auto r = run_verify(cfg, topo, gpu("h200"), *dev, opts);
  CHECK(r.exit_code == 0);
  const auto& c = cell(r, "nvfp4_ds_mla", LayerType::c2a);
  CHECK(c.forced);
  CHECK(c.status == VerifyStatus::pass);
  CHECK(c.main_format == "v41_fp8");
  CHECK(c.main_stride == 16896);
  CHECK(c.extra_format == "v41_fp4");
}

TEST_CASE("verify catches wrong bytes, records and outputs", "[verify]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  auto opts = small_batch();
  opts.kv_cache_dtypes = {"fp8_ds_mla"};
  SECTION("a quantized byte") {
    auto dev = make_host_verify_device([](VerifyRun& r) { r.main_bytes[5] ^= 1; });
    const auto r = run_verify(cfg, topo, gpu("h200"), *dev, opts);
    CHECK(r.exit_code == 5);
    const auto& c = cell(r, "fp8_ds_mla", LayerType::swaonly);
    CHECK(c.status == VerifyStatus::fail);
    CHECK_FALSE(c.quantize_match);
    CHECK(c.quantize_first_diff == 5);
    CHECK_THAT(c.reason, Catch::Contains("quantize: main cache byte 5 differs from the host quantizer"));
  }
  SECTION("a scheduler record") {
    auto dev = make_host_verify_device([](VerifyRun& r) { r.records[3] += 1; });
    const auto r = run_verify(cfg, topo, gpu("h200"), *dev, opts);
    CHECK(r.exit_code == 5);
    CHECK_THAT(cell(r, "fp8_ds_mla", LayerType::c1a).reason, Catch::Contains("scheduler: record 0 field 3"));
  }
  SECTION("an output element") {
    auto dev = make_host_verify_device([](VerifyRun& r) {
      r.out[17] = 0x3F80; /* 1.0 */
    });
    const auto r = run_verify(cfg, topo, gpu("h200"), *dev, opts);
    CHECK(r.exit_code == 5);
    const auto& c = cell(r, "fp8_ds_mla", LayerType::c2a);
    CHECK_FALSE(c.decode.pass);
    CHECK_THAT(c.reason, Catch::Contains("decode: fail"));
    CHECK_THAT(r.exit_message, Catch::StartsWith("verification failed: fp8_ds_mla "));
  }
  SECTION("a device fault is a FAIL, not a crash") {
    auto dev = make_host_verify_device([](VerifyRun&) {
      throw Error(ErrorKind::verify_failed, "cudaMalloc(&p, n): cudaErrorMemoryAllocation (out of memory)");
    });
    const auto r = run_verify(cfg, topo, gpu("h200"), *dev, opts);
    CHECK(r.exit_code == 5);
    CHECK_THAT(cell(r, "fp8_ds_mla", LayerType::c1a).reason, Catch::Contains("cudaErrorMemoryAllocation"));
  }
}

TEST_CASE("verify: nothing runs where the rules reject the config", "[verify]") {
  auto dev = make_host_verify_device();
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto r = run_verify(cfg, build_topology(cfg), gpu("a100"), *dev, small_batch());
  CHECK(r.exit_code == 3);
  for (const auto& c : r.cells) {
    CHECK(c.status == VerifyStatus::unsupported);
    CHECK_THAT(c.reason, Catch::StartsWith("FlashMLA Sparse is only supported on Hopper and Blackwell DC devices"));
  }
}

TEST_CASE("verify: V3.2's 656-byte rows run as d_qk 576", "[verify]") {
  auto dev = make_host_verify_device();
  const auto v32 = released("deepseek-v3.2.json");
  const auto topo = build_topology(v32);
  const auto r32 = run_verify(v32, topo, gpu("h200"), *dev, small_batch());
  CHECK(r32.exit_code == 0);
  REQUIRE(r32.cells.size() == 1);
  CHECK(r32.cells[0].status == VerifyStatus::pass);
  CHECK(r32.cells[0].type == LayerType::dsa);
  CHECK(r32.cells[0].main_format == "fp8_ds_mla_v32");
  CHECK(r32.cells[0].topk == 2048);
  // The problem: q of 576 dims per head, 576-dim latents, V = their first 512 dims.
  const auto layout = plan_layout(v32, topo, gpu("h200"), LayoutOptions{});
  const auto batch = make_decode_batch(small_batch().batch, layout.max_model_len, MaxModelLenSource::config_default);
  const auto scheds = plan_decode_schedules(v32, topo, layout, batch);
  REQUIRE(scheds.size() == 1);
  const auto p = build_verify_problem(v32, topo, layout, scheds[0], 7, 1);
  CHECK(p.d_qk == 576);
  CHECK(p.q.size() == static_cast<std::size_t>(p.b) * p.h_q * 576);
  CHECK(p.main.latents.size() == p.main.slots.size() * 576);
  const auto ref = verify_reference(p);
  CHECK(ref.out.size() == static_cast<std::size_t>(p.b) * p.h_q * 512);
}

TEST_CASE("verify: the FlashInfer plain-row layouts get FlashMLA's plans for the project's kernels", "[verify]") {
  auto dev = make_host_verify_device();
  const auto cfg = released("deepseek-v4.1-flash.json");
  VerifyOptions o = small_batch();
  o.layout.attention_backend = "FLASHINFER_MLA_SPARSE_DSV41";
  o.force = true;  // SM10x's backend, run on this device's kernels
  for (const std::string dtype : {"bfloat16", "fp8"}) {
    o.kv_cache_dtypes = {dtype};
    const auto r = run_verify(cfg, build_topology(cfg), gpu("h200"), *dev, o);
    INFO(dtype << ": " << r.exit_message);
    REQUIRE_FALSE(r.cells.empty());
    for (const auto& c : r.cells) {
      INFO(to_string(c.type) << ": " << c.reason);
      CHECK(c.status == VerifyStatus::pass);
      CHECK(c.forced);
      CHECK(c.main_format == (dtype == "bfloat16" ? "bf16" : "fp8_per_tensor"));
    }
  }
}

TEST_CASE("verify problems follow the planned layout", "[verify]") {
  const auto cfg = released("deepseek-v4-flash.json");
  const auto topo = build_topology(cfg);
  TargetRequest tr;
  const auto target = resolve_target(tr);
  const auto layout = plan_layout(cfg, topo, target, LayoutOptions{});
  BatchOptions bo;
  bo.context_lens = {5, 300, 70000};
  const auto batch = make_decode_batch(bo, layout.max_model_len);
  const auto schedules = plan_decode_schedules(cfg, topo, layout, batch);
  REQUIRE(schedules.size() == 3);
  const auto p = build_verify_problem(cfg, topo, layout, schedules[0], 7, 1);  // c128a
  CHECK(p.b == 3);
  CHECK(p.main.page_block_size == 64);
  CHECK(p.extra.page_block_size == 2);
  CHECK(p.extra.page_stride == 1728);  // 2 x 584 = 1168 -> round_up to 576
  CHECK(p.extra_topk == 8192);
  CHECK(p.extra_topk_length == std::vector<std::int32_t>{0, 2, 546});
  CHECK(p.indices.size() == 3 * 128);
  // positions past a length point at rows that are never written
  for (std::size_t t = 5; t < 128; ++t) {
    const auto id = p.indices[t];
    CHECK(std::find(p.main.slots.begin(), p.main.slots.end(), id) == p.main.slots.end());
  }
  // never zeros
  CHECK(std::count(p.q.begin(), p.q.end(), std::uint16_t{0}) < static_cast<std::ptrdiff_t>(p.q.size() / 100));
}

// ------------------------------------------------------------------ decode modes

namespace {

/// Passes every call to a host device and records the problems' modes as they reach the device.
class Recording final : public VerifyDevice {
 public:
  explicit Recording(std::unique_ptr<VerifyDevice> inner) : inner_(std::move(inner)) {}
  VerifyRun run(const VerifyProblem& p) override {
    modes.push_back(p.mode);
    return inner_->run(p);
  }
  std::string unsupported_reason(const VerifyProblem& p) const override { return inner_->unsupported_reason(p); }
  std::vector<DecodeMode> modes;

 private:
  std::unique_ptr<VerifyDevice> inner_;
};

std::vector<const VerifyCell*> cells_of(const VerifyReport& r, const std::string& dtype, LayerType t) {
  std::vector<const VerifyCell*> out;
  for (const auto& c : r.cells) {
    if (c.kv_cache_dtype == dtype && c.type == t) out.push_back(&c);
  }
  return out;
}

const std::vector<DecodeMode> kAllModes = {DecodeMode::split_kv, DecodeMode::one_pass, DecodeMode::cluster_split};

}  // namespace

TEST_CASE("verify runs the planner's decode mode per cell", "[verify][decode-mode]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  Recording dev(make_host_verify_device());
  auto opts = small_batch();
  opts.kv_cache_dtypes = {"fp8_ds_mla"};
  // 60 requests on 132 SMs: the V4.1 shapes plan differently per layer type (choose_decode_mode).
  opts.batch.context_lens.assign(60, 3000);
  const auto r = run_verify(cfg, topo, gpu("h200"), dev, opts);
  CHECK(r.exit_code == 0);
  REQUIRE(r.cells.size() == 3);
  REQUIRE(dev.modes.size() == 3);
  std::set<DecodeMode> seen;
  for (std::size_t i = 0; i < r.cells.size(); ++i) {
    const auto& c = r.cells[i];
    INFO(to_string(c.type));
    const auto planned = choose_decode_mode(c.b, 1, c.h_q, c.topk, !c.extra_format.empty(), c.extra_topk, 132).mode;
    REQUIRE(c.planned_mode.has_value());
    CHECK(*c.planned_mode == planned);
    CHECK_FALSE(c.planned_reason.empty());
    REQUIRE(c.mode.has_value());
    CHECK(*c.mode == planned);
    CHECK(dev.modes[i] == planned);  // what reached the device
    CHECK(c.launch.reported);
    CHECK(c.launch.mode == planned);
    CHECK(c.launch.kernel == "host");
    CHECK(c.schedule_match);  // the scheduler is compared in every mode
    CHECK(c.status == VerifyStatus::pass);
    seen.insert(planned);
  }
  CHECK(seen.size() >= 2);  // not every cell split_kv
  CHECK(*cell(r, "fp8_ds_mla", LayerType::c1a).mode == DecodeMode::cluster_split);
  CHECK(*cell(r, "fp8_ds_mla", LayerType::swaonly).mode == DecodeMode::one_pass);
}

TEST_CASE("verify --decode-mode all: three cells per kv dtype and layer type", "[verify][decode-mode]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  Recording dev(make_host_verify_device());
  auto opts = small_batch();  // 4 requests: planned split_kv, one pass for the window-only type
  opts.decode_modes = parse_verify_decode_modes("all");
  CHECK(opts.decode_modes == kAllModes);
  const auto r = run_verify(cfg, topo, gpu("h200"), dev, opts);
  CHECK(r.exit_code == 0);
  REQUIRE(r.cells.size() == 18);  // 2 dtypes x 3 types x 3 modes
  CHECK(dev.modes.size() == 9);   // nvfp4 is rejected on SM90: its cells do not run
  for (auto t : {LayerType::c1a, LayerType::c2a, LayerType::swaonly}) {
    for (const std::string dtype : {"fp8_ds_mla", "nvfp4_ds_mla"}) {
      const auto cs = cells_of(r, dtype, t);
      REQUIRE(cs.size() == 3);
      for (std::size_t i = 0; i < 3; ++i) {
        REQUIRE(cs[i]->mode.has_value());
        CHECK(*cs[i]->mode == kAllModes[i]);  // labelled, in this order
      }
    }
    const auto cs = cells_of(r, "fp8_ds_mla", t);
    for (const auto* c : cs) {
      CHECK(c->status == VerifyStatus::pass);
      CHECK(c->schedule_match);
      CHECK(c->launch.mode == *c->mode);
      CHECK(c->planned_mode == (t == LayerType::swaonly ? DecodeMode::one_pass : DecodeMode::split_kv));
    }
    CHECK(cs[0]->launch.combine);
    CHECK(cs[0]->launch.grid_x == 132);  // split_kv: one CTA per partition
    CHECK_FALSE(cs[1]->launch.combine);
    CHECK(cs[1]->launch.grid_x == 4);  // one_pass: one CTA per request
    CHECK(cs[2]->launch.cluster_x >= 2);
    CHECK(cs[2]->launch.grid_x == 4 * cs[2]->launch.cluster_x);
    // The same problem in every mode: the same numbers.
    CHECK(cs[0]->decode.max_abs == cs[1]->decode.max_abs);
  }
  for (const auto* c : cells_of(r, "nvfp4_ds_mla", LayerType::c1a)) CHECK(c->status == VerifyStatus::unsupported);
  // A named mode runs that one.
  Recording one(make_host_verify_device());
  opts.decode_modes = parse_verify_decode_modes("one_pass");
  opts.kv_cache_dtypes = {"fp8_ds_mla"};
  const auto r1 = run_verify(cfg, topo, gpu("h200"), one, opts);
  REQUIRE(r1.cells.size() == 3);
  CHECK(one.modes == std::vector<DecodeMode>(3, DecodeMode::one_pass));
  CHECK(parse_verify_decode_modes("planned").empty());
  CHECK_THROWS_WITH(parse_verify_decode_modes("one-pass"),
                    "--decode-mode: 'one-pass' is not allowed; allowed: planned, all, split_kv, one_pass, "
                    "cluster_split; did you mean 'one_pass'?");
}

TEST_CASE("verify reports the fallback of a device without a cluster kernel", "[verify][decode-mode]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  auto dev = make_host_verify_device({}, /*cluster_kernel=*/false);
  auto opts = small_batch();
  opts.kv_cache_dtypes = {"fp8_ds_mla"};
  opts.decode_modes = {DecodeMode::cluster_split};
  std::vector<std::string> progress;
  opts.progress = [&](const std::string& s) { progress.push_back(s); };
  const auto r = run_verify(cfg, topo, gpu("h200"), *dev, opts);
  CHECK(r.exit_code == 0);
  REQUIRE(r.cells.size() == 3);
  for (const auto& c : r.cells) {
    CHECK(c.status == VerifyStatus::pass);
    CHECK(*c.mode == DecodeMode::cluster_split);   // asked
    CHECK(c.launch.mode == DecodeMode::one_pass);  // as run
    CHECK_THAT(c.launch.fallback, Catch::Contains("ran one_pass"));
  }
  REQUIRE(progress.size() == 6);
  CHECK_THAT(progress[0], Catch::Contains(", cluster_split: "));
  CHECK_THAT(progress[1], Catch::StartsWith("verify:   PASS (host one_pass, grid 4x1x1"));
  CHECK_THAT(progress[1], Catch::Contains("ran one_pass"));
}

// ------------------------------------------------------------------ several devices at once

namespace {

/// A host device whose first run waits (up to 20 s) until `expected` runs have started on all
/// devices sharing `started`: it sees them all only if they run at once.
class Rendezvous final : public VerifyDevice {
 public:
  Rendezvous(std::atomic<int>& started, int expected, std::atomic<bool>& all_met)
      : inner_(make_host_verify_device()), started_(started), expected_(expected), all_met_(all_met) {}
  VerifyRun run(const VerifyProblem& p) override {
    if (!waited_) {
      waited_ = true;
      ++started_;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (started_.load() < expected_ && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (started_.load() < expected_) all_met_ = false;
    }
    return inner_->run(p);
  }
  std::string unsupported_reason(const VerifyProblem& p) const override { return inner_->unsupported_reason(p); }

 private:
  std::unique_ptr<VerifyDevice> inner_;
  std::atomic<int>& started_;
  int expected_;
  std::atomic<bool>& all_met_;
  bool waited_ = false;
};

VerifyDeviceEntry entry(int index, const std::string& label, std::function<std::unique_ptr<VerifyDevice>()> open) {
  VerifyDeviceEntry e;
  e.index = index;
  e.name = "Fake H200";
  e.label = label;
  e.target = gpu("h200");
  e.open = std::move(open);
  return e;
}

}  // namespace

TEST_CASE("verify on several devices: one thread each, results in listed order, the worst exit code",
          "[verify][devices]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  auto opts = small_batch();
  opts.kv_cache_dtypes = {"fp8_ds_mla"};
  std::vector<std::string> progress;  // appended under the runner's mutex
  opts.progress = [&](const std::string& s) { progress.push_back(s); };
  std::atomic<int> started{0};
  std::atomic<bool> all_met{true};
  std::vector<VerifyDeviceEntry> devices;
  // Two devices that must meet: they run concurrently (as --device 0,0 runs two on one GPU).
  devices.push_back(entry(0, "device 0", [&] { return std::make_unique<Rendezvous>(started, 2, all_met); }));
  devices.push_back(entry(0, "device 0 #2", [&] { return std::make_unique<Rendezvous>(started, 2, all_met); }));
  // A device whose kernels fault: its cells FAIL (exit 5).
  devices.push_back(entry(1, "device 1", [] {
    return make_host_verify_device([](VerifyRun&) {
      throw Error(ErrorKind::verify_failed, "cudaErrorIllegalAddress (an illegal memory access)");
    });
  }));
  // A device that cannot be opened: its Error is its result (exit 6), the others still report.
  devices.push_back(entry(2, "device 2", []() -> std::unique_ptr<VerifyDevice> {
    throw Error(ErrorKind::no_gpu, "no CUDA device 2 (found 2)");
  }));
  const auto r = run_verify_devices(cfg, topo, devices, opts);
  REQUIRE(r.devices.size() == 4);
  CHECK(all_met);
  CHECK(r.devices[0].label == "device 0");
  CHECK(r.devices[1].label == "device 0 #2");
  CHECK(r.devices[2].label == "device 1");
  CHECK(r.devices[3].label == "device 2");
  for (int i : {0, 1}) {
    CHECK(r.devices[i].exit_code == 0);
    CHECK(r.devices[i].error.empty());
    CHECK(r.devices[i].report.cells.size() == 3);
    for (const auto& c : r.devices[i].report.cells) CHECK(c.status == VerifyStatus::pass);
    CHECK(r.devices[i].seconds > 0);
  }
  CHECK(r.devices[2].exit_code == 5);
  CHECK(r.devices[2].report.cells.size() == 3);
  CHECK_THAT(r.devices[2].report.cells[0].reason, Catch::Contains("cudaErrorIllegalAddress"));
  CHECK(r.devices[3].exit_code == 6);
  CHECK(r.devices[3].error == "no CUDA device 2 (found 2)");
  CHECK(r.devices[3].report.cells.empty());
  // 5 (a failure) is worse than 6 (no GPU): combine_exit_codes.
  CHECK(r.exit_code == 5);
  CHECK_THAT(r.exit_message, Catch::StartsWith("device 1: verification failed: fp8_ds_mla "));
  // Whole lines, each naming its device; 2 per cell that ran.
  CHECK(progress.size() == 18);
  for (const auto& line : progress) {
    const bool named = line.rfind("device 0: verify: ", 0) == 0 || line.rfind("device 0 #2: verify: ", 0) == 0 ||
                       line.rfind("device 1: verify: ", 0) == 0;
    CHECK(named);
  }

  SECTION("an exception escaping run_verify is that device's result") {
    std::vector<VerifyDeviceEntry> two;
    two.push_back(entry(0, "device 0", [] { return make_host_verify_device(); }));
    two.push_back(entry(1, "device 1", [] {
      return make_host_verify_device([](VerifyRun&) { throw Error(ErrorKind::internal, "bug"); });
    }));
    const auto r2 = run_verify_devices(cfg, topo, two, opts);
    REQUIRE(r2.devices.size() == 2);
    CHECK(r2.devices[0].exit_code == 0);
    CHECK(r2.devices[1].exit_code == 70);
    CHECK(r2.devices[1].error == "bug");
    CHECK(r2.exit_code == 70);
    CHECK(r2.exit_message == "device 1: bug");
  }
  SECTION("a bad option is a usage error before any thread") {
    opts.timing_iterations = 0;
    CHECK_THROWS_WITH(run_verify_devices(cfg, topo, devices, opts),
                      "--iterations: '0' is out of range; allowed 1..10000");
  }
}

TEST_CASE("verify on one device: on this thread, the report of the device alone, its Error escapes",
          "[verify][devices]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  auto opts = small_batch();
  opts.kv_cache_dtypes = {"fp8_ds_mla"};
  std::vector<std::string> progress;
  opts.progress = [&](const std::string& s) { progress.push_back(s); };
  const auto caller = std::this_thread::get_id();
  std::thread::id ran_on;
  const VerifyDeviceEntry one = entry(0, "device 0", [&] {
    ran_on = std::this_thread::get_id();
    return make_host_verify_device();
  });
  const auto r = run_verify_device(cfg, topo, one, opts);
  CHECK(ran_on == caller);
  REQUIRE(r.devices.size() == 1);
  CHECK(r.devices[0].label == "device 0");
  CHECK(r.devices[0].exit_code == 0);
  CHECK(r.devices[0].report.cells.size() == 3);
  for (const auto& c : r.devices[0].report.cells) CHECK(c.status == VerifyStatus::pass);
  CHECK(r.exit_code == 0);
  // The progress of one GPU, not prefixed with the device's label: 2 lines per cell.
  CHECK(progress.size() == 6);
  for (const auto& line : progress) CHECK(line.rfind("verify: ", 0) == 0);
  // The same cells as run_verify_devices() of the device alone.
  const auto alone = run_verify_devices(cfg, topo, {one}, opts);
  REQUIRE(alone.devices.size() == 1);
  CHECK(alone.devices[0].report.cells.size() == r.devices[0].report.cells.size());
  CHECK(alone.exit_code == r.exit_code);
  // A device that cannot be opened: its Error reaches the caller (the CLI's boundary says it).
  const VerifyDeviceEntry missing = entry(2, "device 2", []() -> std::unique_ptr<VerifyDevice> {
    throw Error(ErrorKind::no_gpu, "no CUDA device 2 (found 2)");
  });
  CHECK_THROWS_WITH(run_verify_device(cfg, topo, missing, opts), "no CUDA device 2 (found 2)");
}

TEST_CASE("verify of a TP x DP layout: each device one rank, its heads and its DP rank's requests",
          "[verify][devices][ranks]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  auto opts = small_batch();
  opts.kv_cache_dtypes = {"fp8_ds_mla"};
  opts.batch.context_lens = {1, 130, 700, 4000, 9000};
  opts.layout.tensor_parallel_size = 2;
  opts.layout.data_parallel_size = 2;
  CHECK(verify_rank_count(opts) == 4);
  // rank = dp_rank x TP + tp_rank; DP rank d takes requests d, d + 2, ...
  const VerifyRank r3 = verify_rank(opts, 3);
  CHECK(r3.tp_rank == 1);
  CHECK(r3.dp_rank == 1);
  CHECK(r3.text() == "rank 3 of 4 (TP rank 1, DP rank 1)");
  const auto o0 = verify_rank_options(cfg, opts, 0);
  const auto o1 = verify_rank_options(cfg, opts, 1);
  const auto o2 = verify_rank_options(cfg, opts, 2);
  CHECK(o0.batch.context_lens == std::vector<std::int64_t>{1, 700, 9000});
  CHECK(o1.batch.context_lens == o0.batch.context_lens);  // the same DP rank, the other TP rank
  CHECK(o2.batch.context_lens == std::vector<std::int64_t>{130, 4000});
  CHECK(o0.seed == opts.seed);
  CHECK(o1.seed != o0.seed);
  CHECK(o2.seed != o1.seed);
  CHECK(o2.layout.tensor_parallel_size == 2);
  // The default mix (37 requests) is what gets shared when no batch is given.
  auto no_batch = opts;
  no_batch.batch = BatchOptions{};
  no_batch.layout.data_parallel_size = 8;
  no_batch.layout.tensor_parallel_size = 1;
  CHECK(verify_rank_options(cfg, no_batch, 0).batch.context_lens.size() == 5);  // 37 = 4 x 8 + 5
  CHECK(verify_rank_options(cfg, no_batch, 7).batch.context_lens.size() == 4);
  // Errors name the values.
  CHECK_THROWS_WITH(verify_rank(opts, 4), "verify: rank 4 is outside the layout's ranks 0..3 (TP 2 x DP 2)");
  auto few = opts;
  few.layout.data_parallel_size = 8;
  CHECK_THROWS_WITH(verify_rank_options(cfg, few, 0),
                    "verify: --data-parallel-size 8 needs at least 8 requests, one per DP rank (the batch has 5)");

  // Four devices (host ones), all at once, each its rank: TP 2 gives 32 heads per rank, padded to
  // 64; one device's faulty kernels do not hide the others.
  std::vector<VerifyDeviceEntry> devices;
  for (int k = 0; k < 4; ++k) {
    VerifyDeviceEntry e;
    e.index = k;
    e.label = "device " + std::to_string(k) + " (rank " + std::to_string(k) + ")";
    e.target = gpu("h200");
    e.rank = k;
    if (k == 2) {
      e.open = [] { return make_host_verify_device([](VerifyRun& r) { r.out[3] = 0x3F80; }); };
    } else {
      e.open = [] { return make_host_verify_device(); };
    }
    devices.push_back(std::move(e));
  }
  const auto r = run_verify_devices(cfg, topo, devices, opts);
  REQUIRE(r.devices.size() == 4);
  for (int k = 0; k < 4; ++k) {
    const auto& d = r.devices[static_cast<std::size_t>(k)];
    INFO(d.label);
    REQUIRE(d.rank.has_value());
    CHECK(d.rank->rank == k);
    CHECK(d.rank->dp_rank == k / 2);
    CHECK(d.report.batch.context_lens.size() == (k / 2 == 0 ? 3u : 2u));
    REQUIRE(d.report.cells.size() == 3);
    for (const auto& c : d.report.cells) {
      CHECK(c.h_q == 64);  // 64 heads / TP 2 = 32, padded for the kernel
      CHECK(c.status == (k == 2 ? VerifyStatus::fail : VerifyStatus::pass));
    }
    CHECK(d.exit_code == (k == 2 ? 5 : 0));
  }
  CHECK(r.exit_code == 5);
  CHECK_THAT(r.exit_message, Catch::StartsWith("device 2 (rank 2): "));
  // Too few requests for the DP ranks: a usage error before any device runs.
  auto small = opts;
  small.batch.context_lens = {1};
  CHECK_THROWS_WITH(run_verify_devices(cfg, topo, devices, small),
                    "verify: --data-parallel-size 2 needs at least 2 requests, one per DP rank (the batch has 1)");
}

// ------------------------------------------------------------------ what verify prints

TEST_CASE("verify's matrix: the mode asked, as run, the launch and the fallback", "[verify][output]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  auto opts = small_batch();
  opts.kv_cache_dtypes = {"fp8_ds_mla"};
  opts.decode_modes = kAllModes;
  auto dev = make_host_verify_device({}, /*cluster_kernel=*/false);
  VerifyMultiReport one;
  VerifyDeviceReport d;
  d.label = "device 0";
  d.name = "Fake H200";
  d.report = run_verify(cfg, topo, gpu("h200"), *dev, opts);
  d.exit_code = d.report.exit_code;
  one.devices.push_back(d);
  const mlaplan::cli::VerifyGpuInfo g{0, "Fake H200", "sm_90", "9.0", 132, 141LL << 30, 13000, 13000};

  std::ostringstream text;
  mlaplan::cli::write_verify_text(text, "v41.json", {g}, one, "all");
  const std::string t = text.str();
  INFO(t);
  CHECK_THAT(t, Catch::StartsWith("mla-plan verify: v41.json on Fake H200 (sm_90, 132 SMs)\n"));
  CHECK_THAT(t, Catch::Contains("kv dtype      type      h_q mode           ran           result         max abs"));
  CHECK_THAT(t, Catch::Contains("time us  kernel  grid      cluster pair  layout / reason\n"));
  CHECK_THAT(t, Catch::Contains("fp8_ds_mla    c1a        64 split_kv+      split_kv      PASS"));
  CHECK_THAT(t, Catch::Contains("fp8_ds_mla    c1a        64 cluster_split  one_pass      PASS"));
  CHECK_THAT(t, Catch::Contains("host    4x1x1     -       -     fp8_ds_mla_v4/32 + fp8_ds_mla_v4/64; fallback: "));
  CHECK_THAT(t, Catch::Contains("host    132x1x1   -       -     "));
  CHECK_THAT(t, Catch::Contains(", + the planner's choice for this batch"));

  const auto j = nlohmann::json::parse(mlaplan::cli::verify_json("v41.json", {g}, one, "all"));
  CHECK(j.at("schema") == "mla-plan/3");
  CHECK(j.at("tool_version") == kVersion);
  CHECK(j.at("decode_mode") == "all");
  CHECK(j.at("device").at("name") == "Fake H200");
  const auto& m = j.at("matrix");
  REQUIRE(m.size() == 9);
  CHECK(m[2].at("decode_mode") == "cluster_split");
  CHECK(m[2].at("planned_mode") == "split_kv");
  CHECK(m[2].at("mode_ran") == "one_pass");
  CHECK(m[2].at("launch").at("kernel") == "host");
  CHECK(m[2].at("launch").at("grid") == nlohmann::json({4, 1, 1}));
  CHECK(m[2].at("launch").at("cluster") == nlohmann::json({1, 1, 1}));
  CHECK(m[2].at("launch").at("pair") == false);
  CHECK_THAT(m[2].at("launch").at("fallback").get<std::string>(), Catch::Contains("ran one_pass"));
  CHECK(m[0].at("launch").at("combine") == true);

  // Several devices: a section each, in listed order; one that failed says why.
  VerifyMultiReport two = one;
  VerifyDeviceReport bad;
  bad.index = 1;
  bad.label = "device 1";
  bad.name = "Fake H200";
  bad.error = "no CUDA device 1 (found 1)";
  bad.exit_code = 6;
  bad.exit_message = bad.error;
  two.devices.push_back(bad);
  two.exit_code = 6;
  two.exit_message = "device 1: " + bad.error;
  auto g1 = g;
  g1.index = 1;
  std::ostringstream text2;
  mlaplan::cli::write_verify_text(text2, "v41.json", {g, g1}, two, "all");
  const std::string t2 = text2.str();
  INFO(t2);
  CHECK_THAT(t2, Catch::StartsWith("mla-plan verify: v41.json on 2 devices, at once: device 0 Fake H200, device 1 Fake "
                                   "H200\n\ndevice 0: Fake H200 (sm_90, 132 SMs): exit 0, 9 cells (9 PASS) in "));
  CHECK_THAT(t2, Catch::Contains("\ndevice 1: Fake H200 (sm_90, 132 SMs): exit 6, error: no CUDA device 1 (found 1)"));
  CHECK(t2.find("device 0:") < t2.find("device 1:"));
  const auto j2 = nlohmann::json::parse(mlaplan::cli::verify_json("v41.json", {g, g1}, two, "all"));
  CHECK(j2.at("tool_version") == kVersion);
  REQUIRE(j2.at("devices").size() == 2);
  CHECK(j2.at("devices")[0].at("label") == "device 0");
  CHECK(j2.at("devices")[0].at("matrix").size() == 9);
  CHECK(j2.at("devices")[1].at("error") == "no CUDA device 1 (found 1)");
  CHECK(j2.at("devices")[1].at("exit_code") == 6);
  CHECK(j2.at("exit_code") == 6);
}

TEST_CASE("verify's default batch decodes the layout's speculative tokens", "[verify]") {
  // plan's default batch carries --spec-tokens; verify's default mix does too, capped so that the
  // last speculative position stays inside max_model_len.
  const BatchOptions d = default_verify_batch(1048576, 5);
  CHECK(d.spec_tokens == 5);
  CHECK(d.context_lens.size() == 37);
  CHECK(default_verify_batch(300, 5).context_lens.back() == 295);
  CHECK(default_verify_batch(300).context_lens.back() == 300);
  CHECK(default_verify_batch(300).spec_tokens == 0);

  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  auto dev = make_host_verify_device();
  VerifyOptions o;
  o.timing_iterations = 1;
  o.kv_cache_dtypes = {"fp8_ds_mla"};
  // Short contexts and 2 speculative tokens: the host reference's work grows with the decode
  // tokens times the keys each attends, and the batch's shape is what is checked.
  o.batch.spec_tokens = 2;
  o.layout.num_speculative_tokens = 2;
  o.layout.max_model_len = 64;
  const auto r = run_verify(cfg, topo, gpu("h200"), *dev, o);
  CHECK(r.exit_code == 0);
  CHECK(r.batch.spec_tokens == 2);
  CHECK(r.batch.context_lens.size() == 37);
  CHECK(r.batch.context_lens.back() == 62);
  CHECK(r.batch.positions.size() == 37 * 3);
  for (const auto& c : r.cells) CHECK(c.b == 37 * 3);
  // 37 x (1 + 7) decode tokens are past the verification limit: refused before any device runs.
  o.batch.spec_tokens = 7;
  o.layout.num_speculative_tokens = 7;
  CHECK_THROWS_WITH(check_verify_options(cfg, topo, o),
                    Catch::Contains("the default mix of 37 requests x (1 + --spec-tokens 7)"));
}

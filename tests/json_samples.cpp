// Writes the --json documents of verify and bench that a build without a GPU can make: their
// reports from the host verify device and a fake bench device, rendered by the functions the
// commands call (verify_json, bench_json). The schema test (tests/json_schema_test.py) validates
// them against schemas/verify.schema.json and schemas/bench.schema.json.
//
// Usage: mlaplan_json_samples OUT_DIR   (writes verify-*.json and bench-*.json there, one name a line on stdout)

#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "output/bench_output.hpp"
#include "fake_bench_device.hpp"
#include "mlaplan/gpu_check/bench.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/gpu_check/verify.hpp"
#include "output/verify_output.hpp"
#include "rule_testing.hpp"

using namespace mlaplan;

namespace {

std::filesystem::path out_dir;

using testing_rules::gpu;
using testing_rules::released;

void write(const std::string& name, const std::string& text) {
  std::ofstream out(out_dir / name, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + (out_dir / name).string());
  std::cout << name << "\n";
}

cli::VerifyGpuInfo verify_gpu(const Target& t, int index) {
  return {index, "Fake " + t.name, t.cc.sm(), t.cc.str(), t.num_sms, t.memory_bytes, 13000, 13000};
}

VerifyDeviceReport device_report(const VerifyReport& r, int index) {
  VerifyDeviceReport d;
  d.index = index;
  d.name = "Fake GPU";
  d.label = "device " + std::to_string(index);
  d.report = r;
  d.seconds = 1.5;
  d.exit_code = r.exit_code;
  d.exit_message = r.exit_message;
  return d;
}

/// One device's verify document of `config` on `target` with `device`.
void verify_one(const std::string& name, const std::string& config, const std::string& target, VerifyDevice& device,
                VerifyOptions options, const std::string& decode_mode) {
  const auto cfg = released(config);
  const auto topo = build_topology(cfg);
  const Target t = gpu(target);
  VerifyMultiReport multi;
  multi.devices.push_back(device_report(run_verify(cfg, topo, t, device, options), 0));
  multi.exit_code = multi.devices.front().exit_code;
  multi.exit_message = multi.devices.front().exit_message;
  write(name, cli::verify_json(config, {verify_gpu(t, 0)}, multi, decode_mode));
}

VerifyOptions small_batch() {
  VerifyOptions o;
  o.batch.context_lens = {1, 130, 700, 4000};
  o.timing_iterations = 1;
  return o;
}

void verify_samples() {
  const std::vector<DecodeMode> all = {DecodeMode::split_kv, DecodeMode::one_pass, DecodeMode::cluster_split};
  {
    // Every mode; nvfp4_ds_mla is unsupported on SM90 (cells that did not run).
    auto dev = make_host_verify_device({}, /*cluster_kernel=*/false);
    auto o = small_batch();
    o.decode_modes = all;
    verify_one("verify-v41-h200-all.json", "deepseek-v4.1-flash.json", "h200", *dev, o, "all");
  }
  {
    auto dev = make_host_verify_device();
    verify_one("verify-v4-b200-planned.json", "deepseek-v4-flash.json", "b200", *dev, small_batch(), "planned");
  }
  {
    auto dev = make_host_verify_device();
    // What the rules reject on SM90, run under --force; TP 8 pads the heads (a finding with a path and a fix).
    auto o = small_batch();
    o.force = true;
    o.kv_cache_dtypes = {"nvfp4_ds_mla"};
    o.layout.tensor_parallel_size = 8;
    verify_one("verify-v41-h200-forced.json", "deepseek-v4.1-flash.json", "h200", *dev, o, "planned");
  }
  {
    // A device that gets an output element wrong: FAIL cells, exit 5.
    auto dev = make_host_verify_device([](VerifyRun& r) { r.out[17] = 0x3F80; });
    auto o = small_batch();
    o.decode_modes = {DecodeMode::one_pass};
    verify_one("verify-v32-h200-fail.json", "deepseek-v3.2.json", "h200", *dev, o, "one_pass");
  }
  {
    // Several devices: one ran, one failed to open, one with no description of its GPU.
    const auto cfg = released("deepseek-v4.1-flash.json");
    const auto topo = build_topology(cfg);
    const Target t = gpu("h200");
    auto dev = make_host_verify_device();
    auto o = small_batch();
    o.kv_cache_dtypes = {"fp8_ds_mla"};
    // With the engine's kernels: the fake engine (tests/engine_probe/) has no kernel for the 8
    // unpadded heads of TP 8 on TRITON_MLA_SPARSE_DSV41; at TP 8 on FlashMLA (64 padded) it runs.
    o.engine = EngineProbeOptions{};
    o.engine->probe = std::string(MLAPLAN_SOURCE_DIR) + "/tools/engine_probe/mla_plan_engine_probe.py";
    o.engine->env = {
        {"MLAPLAN_ENGINE_PROBE_FAKE", std::string(MLAPLAN_SOURCE_DIR) + "/tests/engine_probe/fake_engine.py"},
        {"MLAPLAN_FAKE_ENGINE_MODE", "ok"}};
    o.layout.tensor_parallel_size = 8;
    VerifyMultiReport multi;
    multi.devices.push_back(device_report(run_verify(cfg, topo, t, *dev, o), 0));
    for (int index : {1, 2}) {
      VerifyDeviceReport bad;
      bad.index = index;
      bad.label = "device " + std::to_string(index);
      bad.name = "Fake GPU";
      bad.error = "no CUDA device " + std::to_string(index) + " (found 1)";
      bad.exit_code = 6;
      bad.exit_message = bad.error;
      bad.seconds = 0.1;
      multi.devices.push_back(bad);
    }
    multi.exit_code = 6;
    multi.exit_message = "device 1: no CUDA device 1 (found 1)";
    write("verify-devices.json",
          cli::verify_json("deepseek-v4.1-flash.json", {verify_gpu(t, 0), verify_gpu(t, 1)}, multi, "planned"));
  }
  {
    // TP 2 x DP 2: four host devices, each one rank (run_verify_devices), and one device alone
    // running rank 0.
    const auto cfg = released("deepseek-v4.1-flash.json");
    const auto topo = build_topology(cfg);
    const Target t = gpu("h200");
    auto o = small_batch();
    o.kv_cache_dtypes = {"fp8_ds_mla"};
    o.layout.tensor_parallel_size = 2;
    o.layout.data_parallel_size = 2;
    std::vector<VerifyDeviceEntry> entries;
    for (int k = 0; k < 4; ++k) {
      VerifyDeviceEntry e;
      e.index = 0;
      e.name = "Host verify device";
      e.label = "device 0 #" + std::to_string(k + 1) + " (rank " + std::to_string(k) + ")";
      e.target = t;
      e.rank = k;
      e.open = [] { return make_host_verify_device(); };
      entries.push_back(std::move(e));
    }
    const VerifyMultiReport multi = run_verify_devices(cfg, topo, entries, o);
    write("verify-ranks.json",
          cli::verify_json("deepseek-v4.1-flash.json",
                           {verify_gpu(t, 0), verify_gpu(t, 0), verify_gpu(t, 0), verify_gpu(t, 0)}, multi, "planned"));
    auto dev = make_host_verify_device();
    VerifyMultiReport one;
    one.devices.push_back(device_report(run_verify(cfg, topo, t, *dev, verify_rank_options(cfg, o, 0)), 0));
    one.devices.front().rank = verify_rank(o, 0);
    one.exit_code = one.devices.front().exit_code;
    write("verify-rank0.json", cli::verify_json("deepseek-v4.1-flash.json", {verify_gpu(t, 0)}, one, "planned"));
  }
  // --engine-kernels: the probe under python3 with the fake engine (tests/engine_probe/): a PASS
  // with a kept bundle, a FAIL, an absent case; the small-head cells the engine does not run.
  for (const char* mode : {"ok", "corrupt", "notorch"}) {
    auto dev = make_host_verify_device();
    auto o = small_batch();
    o.kv_cache_dtypes = {"fp8_ds_mla"};
    o.decode_modes = {DecodeMode::split_kv, DecodeMode::one_pass};
    EngineProbeOptions e;
    e.probe = std::string(MLAPLAN_SOURCE_DIR) + "/tools/engine_probe/mla_plan_engine_probe.py";
    e.env = {{"MLAPLAN_ENGINE_PROBE_FAKE", std::string(MLAPLAN_SOURCE_DIR) + "/tests/engine_probe/fake_engine.py"},
             {"MLAPLAN_FAKE_ENGINE_MODE", mode}};
    if (std::string(mode) == "ok") e.bundles_dir = (out_dir / "engine-bundles").string();
    o.engine = e;
    verify_one(std::string("verify-v41-h200-engine-") + mode + ".json", "deepseek-v4.1-flash.json", "h200", *dev, o,
               "all");
  }
  {
    auto dev = make_host_verify_device();
    auto o = small_batch();
    o.kv_cache_dtypes = {"fp8_ds_mla"};
    o.layout.tensor_parallel_size = 8;
    o.layout.attention_backend = "TRITON_MLA_SPARSE_DSV41";
    o.engine = EngineProbeOptions{};
    verify_one("verify-v41-h200-engine-not-run.json", "deepseek-v4.1-flash.json", "h200", *dev, o, "planned");
  }
}

void bench_one(const std::string& name, const std::string& config, const std::string& target,
               testing_devices::FakeBenchDevice& device, const BenchOptions& options) {
  const auto cfg = released(config);
  const auto topo = build_topology(cfg);
  const Target t = gpu(target);
  const BenchReport r = run_bench(cfg, topo, t, device, options);
  write(name, cli::bench_json(config, cli::BenchGpuInfo{0, "Fake " + t.name, t.cc.str(), t.num_sms, t.cc.sm()}, r,
                              options.run));
}

void bench_samples() {
  {
    testing_devices::FakeBenchDevice dev;
    BenchOptions o;
    o.batches = {1, 256};
    bench_one("bench-v41-h200.json", "deepseek-v4.1-flash.json", "h200", dev, o);
  }
  {
    testing_devices::FakeBenchDevice dev;
    BenchOptions o;
    o.batches = {8};
    o.layout.tensor_parallel_size = 8;
    bench_one("bench-v32-h200-tp8.json", "deepseek-v3.2.json", "h200", dev, o);
  }
  {
    // 8 heads per rank unpadded (TRITON_MLA_SPARSE_DSV41), with the padded 64 beside each row.
    testing_devices::FakeBenchDevice dev;
    BenchOptions o;
    o.batches = {1, 64};
    o.layout.tensor_parallel_size = 8;
    o.layout.attention_backend = "TRITON_MLA_SPARSE_DSV41";
    bench_one("bench-v41-h200-tp8-triton.json", "deepseek-v4.1-flash.json", "h200", dev, o);
  }
  {
    // Rows the device refuses: unsupported, exit 3.
    testing_devices::FakeBenchDevice dev;
    dev.refuse = "fp8_ds_mla_v4";
    BenchOptions o;
    o.batches = {8};
    bench_one("bench-v41-h200-refused.json", "deepseek-v4.1-flash.json", "h200", dev, o);
  }
  {
    // What the backend rules reject on SM90, nothing timed (exit 3), then timed under --force.
    testing_devices::FakeBenchDevice dev;
    BenchOptions o;
    o.kv_cache_dtype = "nvfp4_ds_mla";
    o.batches = {8};
    bench_one("bench-v41-h200-nvfp4.json", "deepseek-v4.1-flash.json", "h200", dev, o);
    o.force = true;
    bench_one("bench-v41-h200-nvfp4-forced.json", "deepseek-v4.1-flash.json", "h200", dev, o);
  }
  {
    testing_devices::FakeBenchDevice dev;
    BenchOptions o;
    o.batches = {1, 64};
    bench_one("bench-v4-b200.json", "deepseek-v4-flash.json", "b200", dev, o);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: mlaplan_json_samples OUT_DIR\n";
    return 2;
  }
  try {
    out_dir = argv[1];
    std::filesystem::create_directories(out_dir);
    verify_samples();
    bench_samples();
  } catch (const std::exception& e) {
    std::cerr << "mlaplan_json_samples: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

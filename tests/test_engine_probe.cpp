// verify --engine-kernels without a GPU: the host verify device runs mla-plan's side; the probe
// (tools/engine_probe/mla_plan_engine_probe.py) runs under python3 with a fake engine standing in
// for PyTorch and the op (tests/engine_probe/fake_engine.py), or a shell script stands in for the
// probe. Each case is its own result: PASS, FAIL (a corrupted output, a wrong plan), and every
// absent case, with the exit code docs/cli.md gives it.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/gpu_runner.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/gpu_check/engine_probe.hpp"
#include "mlaplan/gpu_check/verify.hpp"
#include "output/verify_output.hpp"
#include "rule_testing.hpp"
#include "temp_dir.hpp"

using namespace mlaplan;

namespace {

using testing_files::TempDir;
using testing_rules::gpu;
using testing_rules::released;

const std::string kProbe = std::string(MLAPLAN_SOURCE_DIR) + "/tools/engine_probe/mla_plan_engine_probe.py";
const std::string kFake = std::string(MLAPLAN_SOURCE_DIR) + "/tests/engine_probe/fake_engine.py";

EngineProbeOptions fake_engine(const std::string& mode, const std::string& bundles = {}) {
  EngineProbeOptions e;
  e.probe = kProbe;
  e.bundles_dir = bundles;
  e.timeout_s = 60;
  e.env = {{"MLAPLAN_ENGINE_PROBE_FAKE", kFake}, {"MLAPLAN_FAKE_ENGINE_MODE", mode}};
  return e;
}

VerifyOptions options(EngineProbeOptions e) {
  VerifyOptions o;
  o.batch.context_lens = {1, 130, 700, 4000};
  o.timing_iterations = 1;
  o.kv_cache_dtypes = {"fp8_ds_mla"};
  o.engine = std::move(e);
  return o;
}

VerifyReport run_v41(const VerifyOptions& o) {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  auto dev = make_host_verify_device();
  return run_verify(cfg, topo, gpu("h200"), *dev, o);
}

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

bool torch_importable() { return std::system("python3 -c 'import torch' >/dev/null 2>&1") == 0; }

}  // namespace

TEST_CASE("engine kernels: the fake engine returns mla-plan's bytes and plan: PASS", "[verify][engine]") {
  TempDir tmp;
  const auto r = run_v41(options(fake_engine("ok", tmp.path.string())));
  CHECK(r.exit_code == 0);
  REQUIRE(r.cells.size() == 3);
  for (const auto& c : r.cells) {
    REQUIRE(c.engine);
    const auto& e = *c.engine;
    INFO(e.message << " / " << e.probe_stderr);
    CHECK(e.status == EngineStatus::pass);
    CHECK(e.ran);
    CHECK(e.decode.pass);
    CHECK(e.metadata_returned);
    CHECK(e.metadata_match);
    CHECK(e.metadata_parts == static_cast<std::int64_t>(132));
    CHECK(e.op == "fake.sparse_decode_fwd");
    CHECK_THAT(e.schema, Catch::StartsWith("_flashmla_C::sparse_decode_fwd(Tensor q"));
    REQUIRE(e.graph_us);
    CHECK(*e.graph_us == 12.5);
    CHECK(*e.eager_us == 11.0);
    CHECK(e.device_capability == "9.0");
    CHECK_FALSE(e.bundle.empty());
  }
  // The bundle of c1a: the planned layout's pages and strides, every file the manifest names.
  const VerifyCell* c1a = nullptr;
  for (const auto& c : r.cells) {
    if (c.type == LayerType::c1a) c1a = &c;
  }
  REQUIRE(c1a);
  const std::filesystem::path dir = c1a->engine->bundle;
  const auto m = read_json(dir / "manifest.json");
  CHECK(m["schema"] == "mla-plan/engine-bundle/1");
  CHECK(m["op"] == "sparse_decode");
  CHECK(m["b"] == 4);
  CHECK(m["h_q"] == 64);
  CHECK(m["d_qk"] == 512);
  CHECK(m["d_v"] == 512);
  CHECK(m["main"]["format"] == "fp8_ds_mla_v4");
  CHECK(m["main"]["row_bytes"] == 584);
  CHECK(m["main"]["page_block_size"] == 32);
  CHECK(m["main"]["page_stride_bytes"] == 19008);
  CHECK(m["extra"]["page_block_size"] == 64);
  CHECK(m["extra"]["page_stride_bytes"] == 37440);
  CHECK(m["extra"]["topk"] == 512);
  CHECK(m["predicted"]["num_sm_parts"] == 132);
  CHECK(m["predicted"]["tile_scheduler_metadata"].size() == 132);
  CHECK(m["predicted"]["num_splits"].size() == 5);
  for (const auto& [name, f] : m["files"].items()) {
    INFO(name);
    CHECK(std::filesystem::file_size(dir / f["file"].get<std::string>()) == f["bytes"].get<std::uint64_t>());
  }
  CHECK(m["files"]["kv"]["shape"][1] == 19008);
  CHECK(m["files"]["q"]["shape"] == nlohmann::json::array({4, 1, 64, 512}));
  const auto res = read_json(dir / "result.json");
  CHECK(res["status"] == "ok");
  CHECK(std::filesystem::exists(dir / "out.bin"));
  CHECK(std::filesystem::exists(dir / "tile_scheduler_metadata.bin"));
}

TEST_CASE("engine kernels: a corrupted output or plan is a FAIL, exit 5", "[verify][engine]") {
  SECTION("an output element") {
    const auto r = run_v41(options(fake_engine("corrupt")));
    CHECK(r.exit_code == 5);
    const auto& e = *r.cells.front().engine;
    CHECK(e.status == EngineStatus::fail);
    CHECK_FALSE(e.decode.pass);
    CHECK_THAT(e.message, Catch::StartsWith("decode: fail"));
    CHECK(e.metadata_match);
    CHECK(r.cells.front().status == VerifyStatus::pass);  // mla-plan's own kernels still pass
    CHECK_THAT(r.exit_message, Catch::StartsWith("the engine's kernels: fp8_ds_mla "));
  }
  SECTION("a scheduler record") {
    const auto r = run_v41(options(fake_engine("badmeta")));
    CHECK(r.exit_code == 5);
    const auto& e = *r.cells.front().engine;
    CHECK(e.status == EngineStatus::fail);
    CHECK(e.decode.pass);
    CHECK_FALSE(e.metadata_match);
    CHECK_THAT(e.message, Catch::StartsWith("scheduler metadata: record 0 field 3: engine "));
  }
  SECTION("no metadata returned: judged on the output alone") {
    const auto r = run_v41(options(fake_engine("nometa")));
    CHECK(r.exit_code == 0);
    const auto& e = *r.cells.front().engine;
    CHECK(e.status == EngineStatus::pass);
    CHECK_FALSE(e.metadata_returned);
  }
}

TEST_CASE("engine kernels: each absent case is its own result, never a PASS", "[verify][engine]") {
  struct Case {
    const char* mode;
    EngineStatus status;
    int exit;
    const char* words;
  };
  for (const Case& k : {Case{"notorch", EngineStatus::no_torch, 6, "PyTorch is not importable"},
                        Case{"noengine", EngineStatus::no_engine, 6, "no engine op library found"},
                        Case{"oldgpu", EngineStatus::unsupported_gpu, 6, "compute capability 8.0"},
                        Case{"schema", EngineStatus::schema_mismatch, 6, "'page_table_version'"},
                        Case{"raise", EngineStatus::error, 5, "Expected h_q == 64"}}) {
    INFO(k.mode);
    const auto r = run_v41(options(fake_engine(k.mode)));
    CHECK(r.exit_code == k.exit);
    for (const auto& c : r.cells) {
      REQUIRE(c.engine);
      CHECK(c.engine->status == k.status);
      CHECK_THAT(c.engine->message, Catch::Contains(k.words));
      CHECK_FALSE(c.engine->ran);
      CHECK_FALSE(c.engine->looked_for.empty());
      CHECK_FALSE(c.engine->where.empty());
    }
    CHECK_THAT(r.exit_message, Catch::Contains(std::string(to_string(k.status))));
  }
}

TEST_CASE("engine kernels: no Python, no probe, a probe that crashes, hangs or lies", "[verify][engine]") {
  SECTION("no interpreter") {
    auto e = fake_engine("ok");
    e.python = "/nonexistent/bin/python3";
    const auto r = run_v41(options(e));
    CHECK(r.exit_code == 6);
    const auto& x = *r.cells.front().engine;
    CHECK(x.status == EngineStatus::no_python);
    CHECK_THAT(x.message,
               Catch::StartsWith("cannot run the Python interpreter '/nonexistent/bin/python3': No such file"));
    CHECK(x.looked_for == std::vector<std::string>{"/nonexistent/bin/python3"});
  }
  SECTION("no probe beside mla-plan") {
    auto e = fake_engine("ok");
    e.probe = "";
    e.probe_looked_in = "/opt/mla-plan/bin";
    const auto r = run_v41(options(e));
    CHECK(r.exit_code == 6);
    CHECK(r.cells.front().engine->status == EngineStatus::no_probe);
    CHECK_THAT(r.cells.front().engine->message, Catch::Contains("looked in /opt/mla-plan/bin"));
  }
  SECTION("the probe dies without a result") {
    const auto r = run_v41(options(fake_engine("crash")));
    CHECK(r.exit_code == 5);
    const auto& x = *r.cells.front().engine;
    CHECK(x.status == EngineStatus::error);
    CHECK_THAT(x.message, Catch::StartsWith("the probe wrote no result.json (exit code 139)"));
    CHECK_THAT(x.message, Catch::Contains("Segmentation fault (simulated)"));
  }
  SECTION("the probe hangs: killed at the timeout") {
    auto e = fake_engine("hang");
    e.timeout_s = 1;
    auto o = options(e);
    o.batch.context_lens = {1, 2};
    const auto r = run_v41(o);
    CHECK(r.exit_code == 5);
    CHECK(r.cells.front().engine->status == EngineStatus::error);
    CHECK(r.cells.front().engine->message == "the probe did not finish in 1 s and was killed");
    CHECK(r.cells.front().engine->probe_exit == -9);
  }
  SECTION("a shell script for a probe: ok without outputs") {
    TempDir tmp;
    const std::string script = tmp.write("probe.sh",
                                         "#!/bin/sh\n"
                                         "# stands in for the probe: mla-plan passes --bundle DIR\n"
                                         "printf '{\"schema\": \"mla-plan/engine-result/1\", \"status\": \"ok\", "
                                         "\"message\": \"ran\", \"outputs\": {}}' > \"$2/result.json\"\n");
    EngineProbeOptions e;
    e.python = "sh";
    e.probe = script;
    const auto r = run_v41(options(e));
    CHECK(r.exit_code == 5);
    CHECK(r.cells.front().engine->status == EngineStatus::error);
    CHECK(r.cells.front().engine->message == "the probe said ok, but result.json lists no out");
  }
  SECTION("a shell script for a probe: a status mla-plan does not know") {
    TempDir tmp;
    const std::string script = tmp.write("probe.sh",
                                         "#!/bin/sh\n"
                                         "printf '{\"schema\": \"mla-plan/engine-result/1\", \"status\": \"maybe\", "
                                         "\"message\": \"hm\"}' > \"$2/result.json\"\n");
    EngineProbeOptions e;
    e.python = "sh";
    e.probe = script;
    const auto r = run_v41(options(e));
    CHECK(r.cells.front().engine->status == EngineStatus::error);
    CHECK(r.cells.front().engine->message == "the probe's status 'maybe' is not one of mla-plan's: hm");
  }
  SECTION("the real probe on a machine without PyTorch") {
    if (torch_importable()) {
      SUCCEED("PyTorch is installed here");
      return;
    }
    EngineProbeOptions e;
    e.probe = kProbe;
    const auto r = run_v41(options(e));
    CHECK(r.exit_code == 6);
    const auto& x = *r.cells.front().engine;
    CHECK(x.status == EngineStatus::no_torch);
    CHECK_THAT(x.message, Catch::StartsWith("PyTorch is not importable by "));
    CHECK(x.looked_for == std::vector<std::string>{"torch (PyTorch with CUDA)"});
  }
}

TEST_CASE("engine kernels: cells the engine's op has no kernel for are NOT RUN, no effect", "[verify][engine]") {
  // TRITON_MLA_SPARSE_DSV41 at TP 8: 8 heads unpadded, which FlashMLA's op does not take.
  auto o = options(fake_engine("ok"));
  o.layout.attention_backend = "TRITON_MLA_SPARSE_DSV41";
  o.layout.tensor_parallel_size = 8;
  const auto r = run_v41(o);
  CHECK(r.exit_code == 0);
  for (const auto& c : r.cells) {
    REQUIRE(c.engine);
    CHECK(c.engine->status == EngineStatus::not_run);
    CHECK_THAT(c.engine->message, Catch::StartsWith("FlashMLA's sparse decode takes h_q 64 or 128"));
  }
  // V4.1's 528 + 288 rows: compute capability 10.x only.
  auto f = options(fake_engine("ok"));
  f.kv_cache_dtypes = {"nvfp4_ds_mla"};
  f.force = true;
  const auto rf = run_v41(f);
  CHECK(rf.exit_code == 0);
  CHECK_THAT(rf.cells.front().engine->message, Catch::Contains("on compute capability 10.x only; this GPU is 9.0"));
}

TEST_CASE("engine kernels: the text table and the JSON", "[verify][engine][output]") {
  const auto r = run_v41(options(fake_engine("ok")));
  VerifyMultiReport multi;
  VerifyDeviceReport d;
  d.label = "device 0";
  d.report = r;
  multi.devices.push_back(d);
  const cli::VerifyGpuInfo g{0, "Fake H200", "sm_90", "9.0", 132, 1, 13000, 13000};
  std::ostringstream text;
  cli::write_verify_text(text, "v41.json", {g}, multi, "planned");
  CHECK_THAT(text.str(), Catch::Contains("the engine's kernels on the same bytes: fake.sparse_decode_fwd 0.0-fake"));
  CHECK_THAT(text.str(), Catch::Contains("equal"));
  CHECK_THAT(text.str(), Catch::Contains("12.5"));
  const auto j = nlohmann::json::parse(cli::verify_json("v41.json", {g}, multi, "planned"));
  const auto& e = j["matrix"][0]["engine"];
  CHECK(e["status"] == "pass");
  CHECK(e["metadata"]["match"] == true);
  CHECK(e["engine_us"] == 12.5);
  CHECK(e["own_decode_us"] == 0.0);

  const auto absent = run_v41(options(fake_engine("notorch")));
  multi.devices.front().report = absent;
  std::ostringstream t2;
  cli::write_verify_text(t2, "v41.json", {g}, multi, "planned");
  CHECK_THAT(t2.str(), Catch::Contains("NO TORCH"));
  CHECK_THAT(t2.str(), Catch::Contains("looked for: torch (PyTorch with CUDA)"));
  const auto j2 = nlohmann::json::parse(cli::verify_json("v41.json", {g}, multi, "planned"));
  CHECK(j2["matrix"][0]["engine"]["status"] == "no_torch");
}

TEST_CASE("engine kernels: the flags", "[verify][engine][cli]") {
  cli::VerifyCliOptions opt;
  CHECK_FALSE(cli::verify_engine_options(opt, "/opt/bin"));
  opt.engine_paths = {"/x"};
  CHECK_THROWS_WITH(cli::verify_engine_options(opt, "/opt/bin"),
                    "--engine-path needs --engine-kernels (the engine's kernels are not run without it)");
  opt.engine_kernels = "";
  auto e = cli::verify_engine_options(opt, "/nonexistent-dir");
  REQUIRE(e);
  CHECK(e->python == "python3");
  CHECK(e->probe.empty());
  CHECK(e->probe_looked_in == "/nonexistent-dir");
  CHECK(e->engine_paths == std::vector<std::string>{"/x"});
  opt.engine_kernels = "/venv/bin/python";
  const std::string probe_dir = std::string(MLAPLAN_SOURCE_DIR) + "/tools/engine_probe";
  e = cli::verify_engine_options(opt, probe_dir);
  CHECK(e->python == "/venv/bin/python");
  CHECK(e->probe == probe_dir + "/mla_plan_engine_probe.py");
}

TEST_CASE("engine kernels: the probe runs on the device of the cell, and a bundle that cannot be written",
          "[verify][engine]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  TempDir tmp;
  VerifyDeviceEntry entry;
  entry.index = 3;
  entry.label = "device 3";
  entry.target = gpu("h200");
  entry.open = [] { return make_host_verify_device(); };
  const auto multi = run_verify_device(cfg, topo, entry, options(fake_engine("ok", tmp.path.string())));
  CHECK(multi.exit_code == 0);
  const auto& c = multi.devices.front().report.cells.front();
  REQUIRE(c.engine);
  CHECK(read_json(std::filesystem::path(c.engine->bundle) / "manifest.json")["device_index"] == 3);

  // --engine-bundles under a regular file: the cell's engine result is an error, the run goes on.
  const std::string file = tmp.write("not-a-dir", "x");
  const auto r = run_v41(options(fake_engine("ok", file)));
  CHECK(r.exit_code == 5);
  for (const auto& x : r.cells) {
    CHECK(x.status == VerifyStatus::pass);
    REQUIRE(x.engine);
    CHECK(x.engine->status == EngineStatus::error);
    CHECK_THAT(x.engine->message, Catch::StartsWith("cannot write the case bundle: "));
  }
}

TEST_CASE("engine kernels: the command line gives the runner the probe's options", "[verify][engine][cli]") {
  using namespace mlaplan::cli;
  static std::optional<EngineProbeOptions> seen;
  static int calls = 0;
  static const GpuRunner fake{[](const VerifyCliOptions&, const ModelConfig&, const Topology&, VerifyOptions& vo,
                                 std::int64_t, std::ostream&, std::ostream&) {
                                ++calls;
                                seen = vo.engine;
                                return 0;
                              },
                              nullptr};
  struct Restore {
    ~Restore() { set_gpu_runner(nullptr); }
  } restore;
  set_gpu_runner(&fake);
  const std::string config = std::string(MLAPLAN_SOURCE_DIR) + "/configs/deepseek-v4.1-flash.json";
  auto run = [](const std::vector<std::string>& args) {
    std::ostringstream out, err;
    const int code = run_cli(args, out, err);
    return std::make_pair(code, err.str());
  };
  CHECK(run({"verify", config}).first == 0);
  CHECK_FALSE(seen);
  CHECK(run({"verify", config, "--engine-kernels"}).first == 0);
  REQUIRE(seen);
  CHECK(seen->python == "python3");
  CHECK(seen->timeout_s == 600);
  CHECK(run({"verify", config, "--engine-kernels=/venv/bin/python", "--engine-path", "/a", "--engine-path", "/b",
             "--engine-route", "flash_mla", "--engine-timeout", "30"})
            .first == 0);
  REQUIRE(seen);
  CHECK(seen->python == "/venv/bin/python");
  CHECK(seen->engine_paths == std::vector<std::string>{"/a", "/b"});
  CHECK(seen->route == "flash_mla");
  CHECK(seen->timeout_s == 30);
  CHECK(run({"verify", config, "--engine-kernels", "/venv/bin/python"}).first == 0);
  CHECK(seen->python == "/venv/bin/python");
  const int before = calls;
  auto [code, err] = run({"verify", config, "--engine-bundles", "/tmp/x"});
  CHECK(code == 1);
  CHECK(err ==
        "mla-plan: error: --engine-bundles needs --engine-kernels (the engine's kernels are not run without it)\n");
  CHECK(run({"verify", config, "--engine-kernels", "--engine-timeout", "0"}).first == 1);
  CHECK(run({"verify", config, "--engine-kernels", "--engine-route", "sglang"}).first == 1);
  CHECK(calls == before);
}

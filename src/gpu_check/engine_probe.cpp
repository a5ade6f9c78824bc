#include "mlaplan/gpu_check/engine_probe.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "mlaplan/base/error.hpp"
#include "mlaplan/gpu_check/verify.hpp"
#include "mlaplan/hardware/quant.hpp"
#include "mlaplan/version.hpp"

extern char** environ;

namespace mlaplan {

namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

constexpr const char* kBundleSchema = "mla-plan/engine-bundle/1";
constexpr const char* kResultSchema = "mla-plan/engine-result/1";
constexpr int kDv = 512;

/// Writes `n` bytes to dir/name and returns the manifest's entry of the file.
ojson write_file(const fs::path& dir, const std::string& name, const std::string& file, const void* data, std::size_t n,
                 const char* dtype, std::vector<std::int64_t> shape) {
  std::ofstream f(dir / file, std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  f.close();
  if (!f) throw_output("cannot write " + (dir / file).string() + ": " + std::strerror(errno));
  (void)name;
  return {{"file", file}, {"offset", 0}, {"bytes", n}, {"dtype", dtype}, {"shape", shape}};
}

template <class T>
ojson write_vec(const fs::path& dir, const std::string& name, const std::string& file, const std::vector<T>& v,
                const char* dtype, std::vector<std::int64_t> shape) {
  // The host is little-endian (x86-64, aarch64): the bytes are the bundle's.
  static_assert(std::endian::native == std::endian::little, "the bundle is little-endian");
  return write_file(dir, name, file, v.data(), v.size() * sizeof(T), dtype, std::move(shape));
}

ojson cache_json(const VerifyCache& c, std::int32_t topk) {
  const auto& f = row_format(c.format);
  return {{"format", std::string(f.name)},
          {"row_bytes", f.row_bytes},
          {"dims", f.dims},
          {"page_block_size", c.page_block_size},
          {"page_stride_bytes", c.page_stride},
          {"num_pages", c.num_pages},
          {"topk", topk}};
}

std::optional<std::vector<char>> read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return std::nullopt;
  return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string tail_of(const fs::path& p, std::size_t max_bytes = 2000) {
  auto all = read_all(p);
  if (!all) return {};
  std::string s(all->begin(), all->end());
  if (s.size() > max_bytes) s = "..." + s.substr(s.size() - max_bytes);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

std::vector<std::string> strings_of(const ojson& j, const char* key) {
  std::vector<std::string> v;
  if (j.contains(key) && j[key].is_array()) {
    for (const auto& x : j[key]) {
      if (x.is_string()) v.push_back(x.get<std::string>());
    }
  }
  return v;
}

std::string string_of(const ojson& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

std::optional<double> number_of(const ojson& j, const char* key) {
  if (j.is_object() && j.contains(key) && j[key].is_number()) return j[key].get<double>();
  return std::nullopt;
}

/// The int32 / float / uint16 values of an output file the result lists; nullopt when absent or
/// of another size than `count`.
template <class T>
std::optional<std::vector<T>> read_output(const fs::path& dir, const ojson& outputs, const char* name,
                                          std::size_t count, std::string& why) {
  if (!outputs.contains(name)) {
    why = std::string("result.json lists no ") + name;
    return std::nullopt;
  }
  const std::string file = string_of(outputs[name], "file");
  auto bytes = read_all(dir / file);
  if (!bytes) {
    why = "cannot read " + (dir / file).string();
    return std::nullopt;
  }
  if (count != 0 && bytes->size() != count * sizeof(T)) {
    why = file + " holds " + std::to_string(bytes->size()) + " bytes, expected " + std::to_string(count * sizeof(T));
    return std::nullopt;
  }
  std::vector<T> v(bytes->size() / sizeof(T));
  std::memcpy(v.data(), bytes->data(), v.size() * sizeof(T));
  return v;
}

EngineStatus status_of_probe(const std::string& s) {
  if (s == "no_torch") return EngineStatus::no_torch;
  if (s == "no_engine") return EngineStatus::no_engine;
  if (s == "schema_mismatch") return EngineStatus::schema_mismatch;
  if (s == "unsupported_gpu") return EngineStatus::unsupported_gpu;
  if (s == "bad_bundle") return EngineStatus::bad_bundle;
  return EngineStatus::error;
}

std::atomic<int> bundle_counter{0};

}  // namespace

std::string_view to_string(EngineStatus s) {
  switch (s) {
    case EngineStatus::pass: return "PASS";
    case EngineStatus::fail: return "FAIL";
    case EngineStatus::not_run: return "NOT RUN";
    case EngineStatus::no_python: return "NO PYTHON";
    case EngineStatus::no_probe: return "NO PROBE";
    case EngineStatus::no_torch: return "NO TORCH";
    case EngineStatus::no_engine: return "NO ENGINE";
    case EngineStatus::schema_mismatch: return "SCHEMA MISMATCH";
    case EngineStatus::unsupported_gpu: return "UNSUPPORTED GPU";
    case EngineStatus::error: return "ERROR";
    case EngineStatus::bad_bundle: return "BAD BUNDLE";
  }
  return "?";
}

int engine_exit_code(EngineStatus s) {
  switch (s) {
    case EngineStatus::pass:
    case EngineStatus::not_run: return 0;
    case EngineStatus::fail:
    case EngineStatus::error: return exit_code(ErrorKind::verify_failed);
    case EngineStatus::bad_bundle: return exit_code(ErrorKind::internal);
    default: return exit_code(ErrorKind::no_gpu);
  }
}

const std::vector<std::string>& engine_probe_statuses() {
  static const std::vector<std::string> v = {
      "ok", "no_torch", "no_engine", "schema_mismatch", "unsupported_gpu", "bad_bundle", "error"};
  return v;
}

std::string engine_skip_reason(const VerifyProblem& p, const Target& target) {
  if (p.h_q != 64 && p.h_q != 128) {
    return "FlashMLA's sparse decode takes h_q 64 or 128; this cell runs " + std::to_string(p.h_q) +
           " heads unpadded (mla-plan's small-head kernel)";
  }
  const auto main = p.main.format;
  const auto extra = p.has_extra ? std::optional<RowFormatId>(p.extra.format) : std::nullopt;
  const bool v4 = main == RowFormatId::fp8_ds_mla_v4 && (!extra || *extra == RowFormatId::fp8_ds_mla_v4);
  const bool v32 = main == RowFormatId::fp8_ds_mla_v32 && !extra;
  const bool v41 =
      main == RowFormatId::v41_fp8 && (!extra || *extra == RowFormatId::v41_fp8 || *extra == RowFormatId::v41_fp4);
  const std::string pair =
      std::string(row_format(main).name) + (extra ? " + " + std::string(row_format(*extra).name) : std::string());
  if (v41 && target.cc.major != 10) {
    return "FlashMLA runs " + pair + " rows on compute capability 10.x only; this GPU is " + target.cc.str();
  }
  if (!v4 && !v32 && !v41) return "FlashMLA's sparse decode has no kernel for " + pair + " rows";
  return {};
}

void write_engine_bundle(const std::string& dir_name, const VerifyProblem& p, const VerifyRun& own,
                         const VerifyCell& cell, const EngineProbeOptions& o) {
  const fs::path dir(dir_name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw_output("cannot create the bundle directory " + dir.string() + ": " + ec.message());
  const std::int64_t b = p.b, s_q = p.s_q, h_q = p.h_q;
  ojson files;
  files["q"] = write_vec(dir, "q", "q.bin", p.q, "bfloat16", {b, s_q, h_q, p.d_qk});
  files["kv"] = write_vec(dir, "kv", "kv.bin", p.main.expected, "uint8", {p.main.num_pages, p.main.page_stride});
  files["indices"] = write_vec(dir, "indices", "indices.bin", p.indices, "int32", {b, s_q, p.topk});
  files["topk_length"] = write_vec(dir, "topk_length", "topk_length.bin", p.topk_length, "int32", {b});
  if (p.has_extra) {
    files["extra_kv"] =
        write_vec(dir, "extra_kv", "extra_kv.bin", p.extra.expected, "uint8", {p.extra.num_pages, p.extra.page_stride});
    files["extra_indices"] =
        write_vec(dir, "extra_indices", "extra_indices.bin", p.extra_indices, "int32", {b, s_q, p.extra_topk});
    files["extra_topk_length"] =
        write_vec(dir, "extra_topk_length", "extra_topk_length.bin", p.extra_topk_length, "int32", {b});
  }
  if (!p.attn_sink.empty())
    files["attn_sink"] = write_vec(dir, "attn_sink", "attn_sink.bin", p.attn_sink, "float32", {h_q});
  files["own_out"] = write_vec(dir, "own_out", "out.mla-plan.bin", own.out, "bfloat16", {b, s_q, h_q, kDv});
  files["own_lse"] = write_vec(dir, "own_lse", "lse.mla-plan.bin", own.lse, "float32", {b, s_q, h_q});

  ojson records = ojson::array();
  for (const auto& r : p.host_plan.records) records.push_back(r);
  ojson m;
  m["schema"] = kBundleSchema;
  m["producer"] = {{"tool", "mla-plan"}, {"version", kVersion}};
  m["op"] = "sparse_decode";
  m["compute"] =
      "for each request i, query token s and head h: softmax over the rows the first topk_length[i] entries of "
      "indices[i, s] select (-1: none) and the first extra_topk_length[i] of extra_indices[i, s] in the extra cache, "
      "of softmax_scale * q[i, s, h] . k (all d_qk dims), then out = sum of p * v (the row's first d_v dims), "
      "scaled by exp(lse) / (exp(lse) + exp(attn_sink[h])); lse = natural log of the sum of exp. Rows are "
      "dequantised from the pages as the format says (docs/layouts.md, `mla-plan formats`). Index = page * "
      "page_block_size + row.";
  m["device_index"] = o.device_index;
  m["cell"] = {{"kv_cache_dtype", cell.kv_cache_dtype},
               {"layer_type", std::string(to_string(cell.type))},
               {"h_q", cell.h_q},
               {"decode_mode", cell.mode ? std::string(to_string(*cell.mode)) : std::string()}};
  m["b"] = b;
  m["s_q"] = s_q;
  m["h_q"] = h_q;
  m["d_qk"] = p.d_qk;
  m["d_v"] = kDv;
  m["softmax_scale"] = p.softmax_scale;
  m["main"] = cache_json(p.main, p.topk);
  m["extra"] = p.has_extra ? cache_json(p.extra, p.extra_topk) : ojson(nullptr);
  m["block_table"] = nullptr;  // sparse decode: indices are global rows, no block table
  m["files"] = files;
  m["expected_outputs"] = {
      {"out", {{"file", "out.bin"}, {"dtype", "bfloat16"}, {"shape", {b, s_q, h_q, kDv}}}},
      {"lse", {{"file", "lse.bin"}, {"dtype", "float32"}, {"shape", {b, s_q, h_q}}}},
      {"tile_scheduler_metadata",
       {{"file", "tile_scheduler_metadata.bin"}, {"dtype", "int32"}, {"shape", {p.host_plan.records.size(), 8}}}},
      {"num_splits", {{"file", "num_splits.bin"}, {"dtype", "int32"}, {"shape", {b + 1}}}}};
  m["predicted"] = {{"kernel", std::string(to_string(p.host_plan.kernel))},
                    {"num_sm_parts", p.host_plan.params.num_sm_parts},
                    {"fixed_overhead", p.host_plan.params.fixed_overhead},
                    {"block", p.host_plan.params.block},
                    {"tile_scheduler_metadata", records},
                    {"num_splits", p.host_plan.num_splits}};
  m["tolerances"] = {
      {"abs", 1e-3}, {"rel", 2.01 / 128}, {"cos_diff", 5e-6}, {"lse_abs", 1e-6}, {"lse_rel", 8.01 / 65536}};
  m["timing"] = {{"graph", true},
                 {"replays", o.replays},
                 {"warmup", o.warmup},
                 {"flush_bytes", o.flush_bytes},
                 {"eager_iterations", o.eager_iterations}};
  m["own"] = {{"mode_ran", own.launch.reported ? std::string(to_string(own.launch.mode)) : std::string()},
              {"kernel", own.launch.kernel},
              {"decode_us", own.decode_us}};
  std::ofstream f(dir / "manifest.json", std::ios::binary);
  f << m.dump(1) << "\n";
  f.close();
  if (!f) throw_output("cannot write " + (dir / "manifest.json").string() + ": " + std::strerror(errno));
}

EngineCellResult read_engine_result(const std::string& dir_name, const VerifyProblem& p,
                                    const RefDecodeOutput& reference) {
  const fs::path dir(dir_name);
  EngineCellResult r;
  r.status = EngineStatus::error;
  auto text = read_all(dir / "result.json");
  if (!text) {
    r.message = "the probe wrote no result.json";
    return r;
  }
  ojson j = ojson::parse(text->begin(), text->end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    r.message = "the probe's result.json is not JSON";
    return r;
  }
  if (string_of(j, "schema") != kResultSchema) {
    r.message = "the probe's result.json has schema '" + string_of(j, "schema") + "', not " + kResultSchema;
    return r;
  }
  const std::string status = string_of(j, "status");
  r.message = string_of(j, "message");
  r.looked_for = strings_of(j, "looked_for");
  r.where = strings_of(j, "where");
  if (j.contains("engine") && j["engine"].is_object()) {
    const auto& e = j["engine"];
    r.route = string_of(e, "route");
    r.module = string_of(e, "module");
    r.file = string_of(e, "file");
    r.version = string_of(e, "version");
    r.op = string_of(e, "op");
    r.schema = string_of(e, "schema");
  }
  if (j.contains("device") && j["device"].is_object()) {
    r.device_name = string_of(j["device"], "name");
    r.device_capability = string_of(j["device"], "capability");
  }
  if (j.contains("versions") && j["versions"].is_object()) {
    r.python_version = string_of(j["versions"], "python");
    r.torch_version = string_of(j["versions"], "torch");
    r.cuda_version = string_of(j["versions"], "cuda");
  }
  if (status != "ok") {
    r.status = status_of_probe(status);
    if (r.status == EngineStatus::error && status != "error") {
      r.message = "the probe's status '" + status + "' is not one of mla-plan's: " + r.message;
    }
    return r;
  }
  if (j.contains("timing") && j["timing"].is_object()) {
    const auto& t = j["timing"];
    r.graph_us = number_of(t, "median_us");
    r.graph_min_us = number_of(t, "min_us");
    r.eager_us = number_of(t, "eager_median_us");
    r.timing_note = string_of(t, "graph_error");
  }
  const ojson outputs = j.contains("outputs") && j["outputs"].is_object() ? j["outputs"] : ojson::object();
  const std::size_t n_out = static_cast<std::size_t>(p.b) * static_cast<std::size_t>(p.s_q * p.h_q) * kDv;
  const std::size_t n_lse = static_cast<std::size_t>(p.b) * static_cast<std::size_t>(p.s_q * p.h_q);
  std::string why;
  const auto out = read_output<std::uint16_t>(dir, outputs, "out", n_out, why);
  const auto lse = out ? read_output<float>(dir, outputs, "lse", n_lse, why) : std::nullopt;
  if (!out || !lse) {
    r.message = "the probe said ok, but " + why;
    return r;
  }
  r.ran = true;
  std::vector<float> out_f(out->size());
  for (std::size_t i = 0; i < out_f.size(); ++i) out_f[i] = bf16_to_float((*out)[i]);
  r.decode = compare_decode(out_f, reference.out, *lse, reference.lse);
  // The scheduler metadata, when the op returned it: the plan mla-plan computed, record for record.
  if (outputs.contains("tile_scheduler_metadata") && outputs.contains("num_splits")) {
    std::string mwhy;
    const auto recs = read_output<std::int32_t>(dir, outputs, "tile_scheduler_metadata", 0, mwhy);
    const auto splits = read_output<std::int32_t>(dir, outputs, "num_splits", 0, mwhy);
    r.metadata_returned = true;
    if (!recs || !splits) {
      r.metadata_message = mwhy;
    } else {
      const auto& plan = p.host_plan;
      r.metadata_parts = static_cast<std::int64_t>(recs->size() / 8);
      if (recs->size() != plan.records.size() * 8) {
        r.metadata_message = "the engine planned " + std::to_string(r.metadata_parts) + " partitions, mla-plan " +
                             std::to_string(plan.records.size());
      }
      for (std::size_t part = 0; r.metadata_message.empty() && part < plan.records.size(); ++part) {
        for (std::size_t k = 0; k < 8; ++k) {
          if ((*recs)[part * 8 + k] != plan.records[part][k]) {
            r.metadata_message = "record " + std::to_string(part) + " field " + std::to_string(k) + ": engine " +
                                 std::to_string((*recs)[part * 8 + k]) + ", mla-plan " +
                                 std::to_string(plan.records[part][k]);
            break;
          }
        }
      }
      if (r.metadata_message.empty() && *splits != plan.num_splits) {
        for (std::size_t i = 0; i < std::max(splits->size(), plan.num_splits.size()); ++i) {
          const bool in_a = i < splits->size(), in_b = i < plan.num_splits.size();
          if (!in_a || !in_b || (*splits)[i] != plan.num_splits[i]) {
            r.metadata_message = "num_splits[" + std::to_string(i) + "]: engine " +
                                 (in_a ? std::to_string((*splits)[i]) : std::string("none")) + ", mla-plan " +
                                 (in_b ? std::to_string(plan.num_splits[i]) : std::string("none"));
            break;
          }
        }
      }
    }
    r.metadata_match = r.metadata_message.empty();
  }
  std::vector<std::string> problems;
  if (!r.decode.pass) problems.push_back("decode: " + r.decode.message);
  if (r.metadata_returned && !r.metadata_match) problems.push_back("scheduler metadata: " + r.metadata_message);
  r.status = problems.empty() ? EngineStatus::pass : EngineStatus::fail;
  if (!problems.empty()) {
    r.message.clear();
    for (const auto& x : problems) r.message += (r.message.empty() ? "" : "; ") + x;
  }
  return r;
}

ProbeProcess run_probe_process(const std::string& dir, const EngineProbeOptions& o) {
  ProbeProcess pr;
  std::vector<std::string> args = {o.python, o.probe, "--bundle", dir};
  for (const auto& e : o.engine_paths) {
    args.push_back("--engine-path");
    args.push_back(e);
  }
  if (!o.route.empty()) {
    args.push_back("--route");
    args.push_back(o.route);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // This process's environment, with the variables set here replacing any of the same name.
  std::vector<std::pair<std::string, std::string>> set = o.env;
  set.emplace_back("PYTHONDONTWRITEBYTECODE", "1");
  std::vector<std::string> env_store;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& kv : set) replaced = replaced || kv.first == name;
    if (!replaced) env_store.push_back(entry);
  }
  for (const auto& [k, v] : set) env_store.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);

  const std::string out_path = (fs::path(dir) / "probe.stdout.txt").string();
  const std::string err_path = (fs::path(dir) / "probe.stderr.txt").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, o.python.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    pr.start_error = std::strerror(rc);
    return pr;
  }
  pr.started = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(std::max(1, o.timeout_s));
  int status = 0;
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      pr.timed_out = true;
      kill(pid, SIGKILL);  // the probe this call started, by its pid
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) pr.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) pr.exit_code = -WTERMSIG(status);
  pr.stderr_tail = tail_of(err_path);
  return pr;
}

EngineCellResult run_engine_cell(const VerifyProblem& p, const VerifyRun& own, const VerifyCell& cell,
                                 const RefDecodeOutput& reference, const Target& target, const EngineProbeOptions& o) {
  EngineCellResult r;
  if (auto why = engine_skip_reason(p, target); !why.empty()) {
    r.status = EngineStatus::not_run;
    r.message = why;
    return r;
  }
  if (o.probe.empty() || !fs::is_regular_file(o.probe)) {
    r.status = EngineStatus::no_probe;
    r.looked_for = {"mla_plan_engine_probe.py"};
    r.where = {o.probe.empty() ? o.probe_looked_in : o.probe};
    r.message = "the engine probe mla_plan_engine_probe.py is not " +
                (o.probe.empty() ? "beside mla-plan (looked in " + o.probe_looked_in + ")" : "at " + o.probe) +
                "; it is installed with mla-plan (bin/) and copied next to the binary by the build";
    return r;
  }
  const int n = bundle_counter.fetch_add(1);
  char name[160];
  std::snprintf(name, sizeof name, "%03d-%s-%s-h%d", n, cell.kv_cache_dtype.c_str(),
                std::string(to_string(cell.type)).c_str(), static_cast<int>(p.h_q));
  fs::path dir;
  bool temporary = false;
  // A bundle that cannot be written (a full disk, a directory not writable) is this cell's error,
  // not a fault of the device's.
  try {
    if (!o.bundles_dir.empty()) {
      dir = fs::path(o.bundles_dir) / name;
      std::error_code ec;
      fs::remove_all(dir, ec);
    } else {
      std::string tmpl = (fs::temp_directory_path() / "mla-plan-engine-XXXXXX").string();
      if (!mkdtemp(tmpl.data())) {
        throw_output("cannot create a temporary directory " + tmpl + ": " + std::strerror(errno));
      }
      dir = fs::path(tmpl) / name;
      temporary = true;
    }
    write_engine_bundle(dir.string(), p, own, cell, o);
  } catch (const Error& e) {
    r.status = EngineStatus::error;
    r.message = std::string("cannot write the case bundle: ") + e.what();
    if (temporary) {
      std::error_code ec;
      fs::remove_all(dir.parent_path(), ec);
    }
    return r;
  } catch (const fs::filesystem_error& e) {
    r.status = EngineStatus::error;
    r.message = std::string("cannot write the case bundle: ") + e.what();
    return r;
  }
  const ProbeProcess pr = run_probe_process(dir.string(), o);
  if (!pr.started) {
    r.status = EngineStatus::no_python;
    r.looked_for = {o.python};
    const char* path = std::getenv("PATH");
    r.where = {o.python.find('/') != std::string::npos ? o.python : std::string("PATH=") + (path ? path : "")};
    r.message = "cannot run the Python interpreter '" + o.python + "': " + pr.start_error +
                " (name one with --engine-kernels PYTHON)";
  } else {
    r = read_engine_result(dir.string(), p, reference);
    r.probe_exit = pr.exit_code;
    r.probe_stderr = pr.stderr_tail;
    if (pr.timed_out) {
      r.status = EngineStatus::error;
      r.ran = false;
      r.message = "the probe did not finish in " + std::to_string(o.timeout_s) + " s and was killed";
    } else if (r.status == EngineStatus::error && r.message == "the probe wrote no result.json") {
      r.message += " (" +
                   (pr.exit_code < 0 ? "killed by signal " + std::to_string(-pr.exit_code)
                                     : "exit code " + std::to_string(pr.exit_code)) +
                   ")" + (pr.stderr_tail.empty() ? std::string() : "; its stderr ends: " + pr.stderr_tail);
    }
  }
  if (temporary) {
    std::error_code ec;
    fs::remove_all(dir.parent_path(), ec);
  } else {
    r.bundle = dir.string();
  }
  return r;
}

std::string find_engine_probe(const std::string& exe_dir) {
  const fs::path p = fs::path(exe_dir) / "mla_plan_engine_probe.py";
  std::error_code ec;
  return fs::is_regular_file(p, ec) ? p.string() : std::string();
}

}  // namespace mlaplan

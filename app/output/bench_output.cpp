// bench's --json document (bench_output.hpp, docs/cli.md).

#include "output/bench_output.hpp"

#include <nlohmann/json.hpp>
#include <vector>

#include "output/json_out.hpp"

namespace mlaplan::cli {

namespace {

using ojson = nlohmann::ordered_json;

ojson row_json(const BenchRow& r) {
  const auto& s = r.shape;
  ojson j = {{"layer_type", std::string(to_string(s.type))},
             {"num_layers", s.num_layers},
             {"h_q", s.h_q},
             {"b", s.b},
             {"s_q", s.s_q},
             {"topk", s.topk},
             {"extra_topk", s.extra_topk},
             {"main_format", std::string(row_format(s.main_format).name)},
             {"main_page", s.main_page},
             {"extra_format", s.has_extra ? ojson(std::string(row_format(s.extra_format).name)) : ojson(nullptr)},
             {"extra_page", s.has_extra ? ojson(s.extra_page) : ojson(nullptr)},
             {"decode_mode", s.unsupported.empty() ? ojson(std::string(to_string(s.mode.mode))) : ojson(nullptr)},
             {"status", r.ran ? "ran" : "unsupported"},
             {"reason", r.reason}};
  if (r.ran) {
    j["us_per_call"] = r.timing.us_per_call;
    j["us_decode"] = r.timing.us_decode;
    j["min_us"] = r.timing.min_us;
    j["tflops"] = r.tflops;
    j["gbps"] = r.gbps;
    j["flops"] = s.flops;
    j["bytes"] = s.bytes;
    j["bytes_floor_us"] = r.bytes_floor_us;
    j["flop_floor_us"] = r.flop_floor_us;
    j["floor_us"] = r.floor_us;
    j["floor_fraction"] = r.floor_fraction;
    j["num_sm_parts"] = r.timing.num_sm_parts;
    j["split_requests"] = r.timing.split_requests;
  }
  return j;
}

}  // namespace

std::string bench_json(const std::string& config, const BenchGpuInfo& gpu, const BenchReport& report,
                       const BenchRunOptions& run) {
  ojson j = json_document();
  j["config"] = config;
  j["device"] = {{"index", gpu.index},
                 {"name", gpu.name},
                 {"compute_capability", gpu.compute_capability},
                 {"num_sms", gpu.num_sms}};
  j["kv_cache_dtype"] = report.kv_cache_dtype;
  j["forced"] = report.forced;
  j["replays"] = run.replays;
  j["warmup"] = run.warmup;
  j["ceilings"] = {{"copy_gbps", report.ceilings.copy_gbps},
                   {"copy_how", report.ceilings.copy_how},
                   {"matmul_tflops", report.ceilings.matmul_tflops},
                   {"matmul_how", report.ceilings.matmul_how}};
  std::vector<Finding> findings;
  for (const auto& r : report.rules) findings.push_back(r.finding);
  j["findings"] = findings_json(findings);
  ojson rows = ojson::array();
  for (const auto& r : report.rows) rows.push_back(row_json(r));
  j["rows"] = std::move(rows);
  j["exit_code"] = report.exit_code;
  return dump_json(j);
}

}  // namespace mlaplan::cli

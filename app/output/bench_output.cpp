// bench's --json document (bench_output.hpp, docs/cli.md).

#include "output/bench_output.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "mlaplan/base/text.hpp"
#include "output/json_out.hpp"

namespace mlaplan::cli {

namespace {

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
  if (r.heads) {
    const auto& c = *r.heads;
    auto us = [](double v) { return v > 0 ? ojson(v) : ojson(nullptr); };
    j["heads_comparison"] = {
        {"h_q", c.shape.h_q},
        {"decode_mode",
         c.shape.unsupported.empty() ? ojson(std::string(to_string(c.shape.mode.mode))) : ojson(nullptr)},
        {"status", c.ran ? "ran" : "unsupported"},
        {"reason", c.reason},
        {"us_per_call", c.ran ? ojson(c.timing.us_per_call) : ojson(nullptr)},
        {"unpadded_h_q", c.unpadded_h_q},
        {"padded_h_q", c.padded_h_q},
        {"unpadded_us", us(c.unpadded_us)},
        {"padded_us", us(c.padded_us)},
        {"unpadded_over_padded", c.unpadded_over_padded > 0 ? ojson(c.unpadded_over_padded) : ojson(nullptr)}};
  } else {
    j["heads_comparison"] = nullptr;
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

namespace {

std::string fixed(double v, int digits) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

/// "unpadded 8 heads: 9.1 us, padded to 64: 20.2 us, 0.45x" (what did not run says why).
std::string heads_line(const BenchHeadsComparison& c) {
  auto us = [](double v) { return v > 0 ? fixed(v, 1) + " us" : std::string("not timed"); };
  std::string s = "unpadded " + std::to_string(c.unpadded_h_q) + " heads: " + us(c.unpadded_us) + ", padded to " +
                  std::to_string(c.padded_h_q) + ": " + us(c.padded_us);
  if (c.unpadded_over_padded > 0) s += ", " + fixed(c.unpadded_over_padded, 2) + "x";
  if (c.ran) s += " (h_q " + std::to_string(c.shape.h_q) + ": " + std::string(to_string(c.shape.mode.mode)) + ")";
  if (!c.ran && !c.reason.empty()) s += " (h_q " + std::to_string(c.shape.h_q) + ": " + c.reason + ")";
  return s;
}

}  // namespace

void write_bench_text(std::ostream& out, const std::string& config, const BenchGpuInfo& gpu, const BenchReport& report,
                      const BenchRunOptions& run) {
  out << "mla-plan bench: " << printable(config, kQuotedPathMaxBytes) << " on " << gpu.name << " (" << gpu.arch << ", "
      << gpu.num_sms << " SMs), kv " << report.kv_cache_dtype << (report.forced ? " (forced)" : "") << ", "
      << run.replays << " replays\n";
  for (const auto& r : report.rules) {
    if (r.finding.severity == Severity::info) continue;
    out << "  " << to_string(r.finding.severity) << " [" << r.finding.id << "]: " << printable(r.finding.message)
        << "\n";
  }
  const auto& c = report.ceilings;
  if (c.copy_gbps > 0) {
    out << "ceilings: copy " << fixed(c.copy_gbps, 0) << " GB/s (" << c.copy_how << "); matmul "
        << (c.matmul_tflops > 0 ? fixed(c.matmul_tflops, 1) + " TFLOP/s (" + c.matmul_how + ")" : c.matmul_how) << "\n";
  }
  char line[512];
  std::snprintf(line, sizeof line, "%-8s %6s %4s %5s %-9s %-13s %9s %9s %7s %7s %9s %8s\n", "type", "layers", "h_q",
                "b", "rows", "plan", "us/call", "decode us", "TFLOPS", "GB/s", "floor us", "of floor");
  out << line;
  for (const auto& r : report.rows) {
    const auto& s = r.shape;
    std::string rows = std::to_string(s.topk);
    if (s.has_extra) rows += '+' + std::to_string(s.extra_topk);  // (not "+" + ...: GCC 12's -Wrestrict at -O3)
    if (r.ran) {
      std::snprintf(line, sizeof line, "%-8s %6lld %4d %5d %-9s %-13s %9.1f %9.1f %7.1f %7.0f %9.2f %7.1f%%\n",
                    std::string(to_string(s.type)).c_str(), static_cast<long long>(s.num_layers), s.h_q, s.b,
                    rows.c_str(), std::string(to_string(s.mode.mode)).c_str(), r.timing.us_per_call, r.timing.us_decode,
                    r.tflops, r.gbps, r.floor_us, 100.0 * r.floor_fraction);
    } else {
      std::snprintf(line, sizeof line, "%-8s %6lld %4d %5d %-9s %-13s %9s  %s\n",
                    std::string(to_string(s.type)).c_str(), static_cast<long long>(s.num_layers), s.h_q, s.b,
                    rows.c_str(), "-", "-", r.reason.c_str());
    }
    out << line;
    if (r.heads) out << "  " << heads_line(*r.heads) << "\n";
  }
  out << "us/call: scheduler (split_kv) + decode + combine (split_kv) in one CUDA graph, L2 flushed before each "
         "replay, median; decode us: without the scheduler; floor: max(bytes / copy rate, FLOPs / matmul rate)"
      << (c.matmul_tflops > 0 ? "" : " (bytes only: no matmul rate)") << "\n";
  if (std::any_of(report.rows.begin(), report.rows.end(), [](const BenchRow& r) { return r.heads.has_value(); })) {
    out << "unpadded / padded: the row's shape also timed at the other head count (8 or 16 heads unpadded on "
           "mla-plan's small-head kernel, or padded to 64 as FlashMLA pads them); N x = unpadded us/call / padded "
           "us/call\n";
  }
}

}  // namespace mlaplan::cli

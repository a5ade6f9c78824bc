#pragma once
// What `mla-plan bench --json` prints (docs/cli.md). Plain data in, so the tests render the
// report of a fake device without CUDA.

#include <cstdint>
#include <iosfwd>
#include <string>

#include "mlaplan/gpu_check/bench.hpp"

namespace mlaplan::cli {

/// The device bench ran on, as its --json describes it.
struct BenchGpuInfo {
  int index = 0;
  std::string name;
  std::string compute_capability;  ///< "9.0"
  std::int64_t num_sms = 0;
  std::string arch;  ///< "sm90" (ComputeCapability::sm()), for the text
};

/// The --json document: {"schema", "tool_version", "config", "device", "kv_cache_dtype", "forced",
/// "replays", "warmup", "ceilings", "findings", "rows", "exit_code"}.
std::string bench_json(const std::string& config, const BenchGpuInfo& gpu, const BenchReport& report,
                       const BenchRunOptions& run);
/// The text bench prints: the device and kv dtype, the findings, the measured ceilings, then one
/// line per layer type (us per call, TFLOPS, GB/s, the floor and its fraction).
void write_bench_text(std::ostream& out, const std::string& config, const BenchGpuInfo& gpu, const BenchReport& report,
                      const BenchRunOptions& run);

}  // namespace mlaplan::cli

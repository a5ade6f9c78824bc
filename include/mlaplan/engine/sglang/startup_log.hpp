#pragma once
// A real SGLang start-up log of DeepSeek V4 / V4.1, read for the numbers the SGLang fit models
// (`plan --engine sglang --from-log FILE`): the free memory before and after loading (the least
// over the ranks, as SGLang's distributed query takes it), what loading took, the resolved
// server_args, the DSV4 configurator's lines of any generation and the summary line. docs/sglang.md,
// "A real log".

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlaplan {

struct SglangStartupLog {
  std::optional<double> free_before_load_gib;     ///< least "Load weight begin. avail mem=X GB"
  std::optional<double> free_after_load_gib;      ///< least "Load weight end. ... avail mem=X GB"
  std::optional<double> load_usage_gib;           ///< largest "Load weight end. ... mem usage=X GB"
  std::optional<double> profiled_available_gib;   ///< "Memory profiling: available_gpu_memory=" (G1 / G2)
  std::optional<double> profiled_total_gib;       ///< "... total_gpu_memory=" (the pre-load figure)
  std::optional<double> rest_gib;                 ///< "rest_memory="
  std::optional<double> bytes_per_full_token;     ///< "memory calculation: ... bytes_per_full_token="
  std::optional<double> available_bytes_gib;      ///< "... available_bytes=X GB"
  std::optional<long long> full_token;            ///< "... full_token="
  std::optional<long long> swa_tokens;            ///< "DSV4 pool sizes: ... swa=" (or the SWA sizing line)
  std::optional<long long> max_total_num_tokens;  ///< the summary line
  std::optional<long long> max_running_requests;  ///< the summary line
  std::optional<long long> context_len;           ///< the summary line
  /// The generation the configurator's lines say: "G1" (DSv4 spelling, no fixed terms), "G2"
  /// (c128_state_fixed only), "G3" (unified=...); "" when the log has none.
  std::string generation;
  std::map<std::string, std::string> server_args;  ///< server_args=ServerArgs(key=value, ...) as printed
  std::map<std::string, std::size_t> lines;        ///< the line of each figure above (by field name)
  std::vector<std::string> notes;                  ///< ranks that differ, what was not found
};

/// Reads `text`. Error(invalid_config) when it holds none of the lines above (not an SGLang log).
SglangStartupLog read_sglang_startup_log(std::string_view text);

}  // namespace mlaplan

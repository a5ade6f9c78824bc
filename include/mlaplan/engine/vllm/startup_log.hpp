#pragma once
// A reader of vLLM's start-up log: the memory and KV-cache numbers a real run printed (model
// loading, the CUDA-graph estimate, the KV pool, its tokens and concurrency, the final memory
// summary) and the non-default args it started with, so that a plan can be set against them
// (docs/fit.md, "Reading a start-up log"). The wordings of vLLM 0.21 to 0.31 are read, both model
// runners (V1 and V2), one- and two-line KV size lines, the 3- and 4-term summaries.
//
// The text is taken whole, already in memory: reading the file (its size limit, refusing a FIFO or
// a device) is the caller's job; the CLI reads it with read_input_file()
// (include/mlaplan/base/input_file.hpp). Lines may carry any prefix (`(Worker_TP0 pid=514) INFO
// 07-12 02:33:39 [gpu_worker.py:538] `, journald's `Aug 18 22:22:22 host vllm[123]: `), ANSI
// colour codes and CRLF line ends. The work is linear in the text's size, line by line.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlaplan {

/// A number read from the log and the 1-based line it came from.
struct VllmLogValue {
  double value = 0;
  std::size_t line = 0;
};

/// What a vLLM start-up log printed. Every field is empty when its line was not in the log (or
/// could not be read: then `notes` and `unreadable_lines` say so). When several workers print the
/// same line, the first is kept (a later, different value is a note), except "Available KV cache
/// memory": vLLM sizes the KV cache by the smallest worker's, so the minimum is kept.
struct VllmStartupLog {
  /// "vLLM API server version X" or "Initializing a V1 LLM engine (vX) ...".
  std::optional<std::string> vllm_version;
  /// "Model loading took X GiB memory and T seconds" (V1 runner, V2 runner at 0.31) or
  /// "Model loading took X GiB and T seconds" (V2 runner at 0.26).
  std::optional<VllmLogValue> model_loading_gib;
  /// "Estimated CUDA graph memory: X GiB total" (V1 runner only).
  std::optional<VllmLogValue> cudagraph_estimate_gib;
  /// "Profiling CUDA graph memory: PIECEWISE=42 (largest=384), FULL=26 (largest=192)".
  std::optional<std::int64_t> piecewise_sizes, piecewise_largest, full_sizes, full_largest;
  /// "Available KV cache memory: X GiB" (the minimum over the workers).
  std::optional<VllmLogValue> available_kv_gib;
  /// "GPU KV cache size: 1,993,100 tokens".
  std::optional<std::int64_t> gpu_kv_cache_tokens;
  /// L and C of "Maximum concurrency for L tokens per request: C.CCx".
  std::optional<std::int64_t> concurrency_tokens;
  std::optional<double> max_concurrency;
  /// The two lines above were one ("GPU KV cache size: N tokens, Maximum concurrency ...": the
  /// 0909 image, 0.30, 0.31).
  bool merged_kv_line = false;
  /// a and b of "Free memory on device (a/b GiB) on startup".
  std::optional<double> free_gib, total_gib;
  /// B of "... is equivalent to --gpu-memory-utilization=B without CUDA graph memory profiling".
  std::optional<double> equivalent_utilization;
  /// The final summary's "Actual usage is ...": the 4-term form ("W GiB for weight, P GiB for peak
  /// activation, N GiB for non-torch memory, and G GiB for CUDAGraph memory") sets weights_gib
  /// and non_torch_gib, the 3-term form ("C GiB for consumed memory (weights + non-torch), ...")
  /// sets consumed_gib; cudagraph_actual_gib is the summary's CUDAGraph term or the "(actual)"
  /// of "CUDA graph pool memory: a GiB (actual), e GiB (estimated)".
  std::optional<double> peak_activation_gib, non_torch_gib, weights_gib, consumed_gib, cudagraph_actual_gib;
  /// e of "CUDA graph pool memory: a GiB (actual), e GiB (estimated)".
  std::optional<double> cudagraph_pool_estimated_gib;
  /// "Using V2 Model Runner" was seen.
  bool model_runner_v2 = false;
  /// The dict after "non-default args: ", verbatim ("" when not printed).
  std::string non_default_args;
  /// Its keys: 'tensor_parallel_size': 2 -> "2", 'gpu_memory_utilization': 0.95 -> "0.95",
  /// 'kv_cache_dtype': 'fp8' -> "fp8", True/False/None -> "true"/"false"/"null", a dict or list
  /// -> its text with strings in double quotes and true/false/null ({"method": "mtp", ...}), any
  /// other value (AttentionConfig(...)) -> its text verbatim.
  std::map<std::string, std::string> args;
  /// Lines that look relevant but could not be read, values that differ between workers: each
  /// names its line ("line 17: ..."). At most kVllmLogMaxNotes, then one saying how many more.
  std::vector<std::string> notes;
  /// The 1-based lines that held a key phrase whose number could not be read (at most
  /// kVllmLogMaxNotes of them).
  std::vector<std::size_t> unreadable_lines;
};

/// The most notes (and unreadable lines) one log keeps.
inline constexpr std::size_t kVllmLogMaxNotes = 64;

/// Reads a vLLM start-up log. Never throws on an odd line; throws Error(invalid_config) only when
/// the text holds none of the lines "Model loading took", "Available KV cache memory", "GPU KV
/// cache size": "not a vLLM start-up log: none of the lines 'Model loading took', 'Available KV
/// cache memory', 'GPU KV cache size' was found".
VllmStartupLog read_vllm_startup_log(std::string_view text);

}  // namespace mlaplan

// read_vllm_startup_log(): real start-up lines of vLLM 0.21.1rc1, 0.23.0, 0.25.0, 0.26.0 (V2
// runner), the deepseekv41-flash-0909 image and 0.31.1rc1 (V2 runner), quoted verbatim from
// public logs (the sources are named above each excerpt), plus the odd inputs a reader must survive.

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mlaplan/base/error.hpp"
#include "mlaplan/engine/vllm/startup_log.hpp"

using namespace mlaplan;

namespace {

/// True when some note holds `part`.
bool has_note(const VllmStartupLog& log, const std::string& part) {
  for (const auto& n : log.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

/// The message of the Error read_vllm_startup_log() throws on `text`, or "no error".
std::string error_of(const std::string& text) {
  try {
    (void)read_vllm_startup_log(text);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::invalid_config);
    return e.what();
  }
  return "no error";
}

const std::string kNotALog =
    "not a vLLM start-up log: none of the lines 'Model loading took', 'Available KV cache memory', 'GPU KV cache "
    "size' was found";

// Case A: DeepSeek-V4-Flash on vLLM 0.25.0, 2 x RTX PRO 6000 Blackwell, TP 2 (a public full docker
// log, V1 runner). The non-default args dict is verbatim; its line's prefix is the APIServer's.
const std::string kCaseA =
    R"LOG((APIServer pid=57) INFO 07-12 02:33:20 [utils.py:299] non-default args: {'model_tag': 'deepseek-ai/DeepSeek-V4-Flash', 'enable_auto_tool_choice': True, 'tool_call_parser': 'deepseek_v4', 'host': '0.0.0.0', 'port': 15004, 'api_key': ['aabduh'], 'model': 'deepseek-ai/DeepSeek-V4-Flash', 'tokenizer_mode': 'deepseek_v4', 'trust_remote_code': True, 'max_model_len': 1048576, 'served_model_name': ['d4f'], 'reasoning_parser': 'deepseek_v4', 'tensor_parallel_size': 2, 'disable_custom_all_reduce': True, 'gpu_memory_utilization': 0.95, 'kv_cache_dtype': 'fp8', 'enable_prefix_caching': True, 'max_num_batched_tokens': 4096, 'max_num_seqs': 64, 'enable_chunked_prefill': True, 'async_scheduling': True, 'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 2}}
(APIServer pid=57) INFO 07-12 02:33:26 [scheduler.py:252] Chunked prefill is enabled with max_num_batched_tokens=4096.
(Worker_TP0 pid=514) INFO 07-12 02:33:58 [default_loader.py:430] Loading weights took 18.05 seconds
(Worker_TP0 pid=514) INFO 07-12 02:34:00 [gpu_model_runner.py:5306] Model loading took 75.64 GiB memory and 20.219445 seconds
(Worker_TP0 pid=514) INFO 07-12 02:34:56 [gpu_model_runner.py:6534] Profiling CUDA graph memory: PIECEWISE=42 (largest=384), FULL=26 (largest=192)
(Worker_TP0 pid=514) INFO 07-12 02:35:26 [gpu_model_runner.py:6639] Estimated CUDA graph memory: 1.58 GiB total
(Worker_TP0 pid=514) INFO 07-12 02:35:26 [gpu_worker.py:538] Available KV cache memory: 10.29 GiB
(Worker_TP0 pid=514) INFO 07-12 02:35:26 [gpu_worker.py:553] CUDA graph memory profiling is enabled (default since v0.21.0). The current --gpu-memory-utilization=0.9500 is equivalent to --gpu-memory-utilization=0.9334 without CUDA graph memory profiling. To maintain the same effective KV cache size as before, increase --gpu-memory-utilization to 0.9666. To disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.
(EngineCore pid=395) INFO 07-12 02:35:26 [kv_cache_utils.py:2146] GPU KV cache size: 1,993,100 tokens
(EngineCore pid=395) INFO 07-12 02:35:26 [kv_cache_utils.py:2147] Maximum concurrency for 1,048,576 tokens per request: 1.90x
(Worker_TP0 pid=514) INFO 07-12 02:36:12 [gpu_model_runner.py:6707] Graph capturing finished in 31 secs, took 1.73 GiB
(Worker_TP0 pid=514) INFO 07-12 02:36:12 [gpu_worker.py:771] CUDA graph pool memory: 1.73 GiB (actual), 1.58 GiB (estimated), difference: 0.15 GiB (8.7%).
(EngineCore pid=395) INFO 07-12 02:36:12 [core.py:344] init engine (profile, create kv cache, warmup model) took 132.64 s
)LOG";

// DeepSeek-V4-Flash-0731 on vLLM 0.26.0, 1 x B300, V2 model runner (a blog's full log): "Model
// loading took X GiB and T seconds" without "memory", the 4-term summary, two-line KV size.
const std::string kB300V2 = R"LOG((EngineCore pid=57666) INFO 08-06 20:48:41 [gpu_worker.py:378] Using V2 Model Runner
(EngineCore pid=57666) INFO 08-06 20:52:35 [model_runner.py:305] Model loading took 156.32 GiB and 233.014771 seconds
(EngineCore pid=57666) INFO 08-06 20:53:42 [gpu_worker.py:560] Available KV cache memory: 86.74 GiB
(EngineCore pid=57666) INFO 08-06 20:53:42 [kv_cache_utils.py:2177] GPU KV cache size: 913,657 tokens
(EngineCore pid=57666) INFO 08-06 20:53:42 [kv_cache_utils.py:2178] Maximum concurrency for 65,536 tokens per request: 13.94x
(EngineCore pid=57666) INFO 08-06 21:10:56 [model_runner.py:747] Graph capturing finished in 171 secs, took 3.06 GiB
(EngineCore pid=57666) INFO 08-06 21:10:56 [gpu_worker.py:857] Free memory on device (267.08/267.69 GiB) on startup. Desired GPU memory utilization is (0.92, 246.27 GiB). Actual usage is 156.32 GiB for weight, 2.99 GiB for peak activation, 0.23 GiB for non-torch memory, and 3.06 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=89686801859` (83.53 GiB) to fit into requested memory, or `--kv-cache-memory=112025012224` (104.33 GiB) to fully utilize gpu memory. Current kv cache memory in use is 86.74 GiB.
)LOG";

// DeepSeek-V4.1-Flash on vLLM 0.31.1rc1, 8 x H100, TP 8, V2 model runner (a public server log):
// the merged KV line, the pool line, the 3-term summary.
const std::string kH100V41 =
    R"LOG((APIServer pid=123457) INFO 10-07 21:12:11 [scheduler.py:308] Chunked prefill is enabled with max_num_batched_tokens=8192.
(Worker pid=124434) INFO 10-07 21:12:56 [gpu_worker.py:501] Using V2 Model Runner
(Worker_TP0_EP0 pid=124434) INFO 10-07 21:13:36 [model_runner.py:413] Model loading took 36.32 GiB memory and 39.902252 seconds
(Worker_TP0_EP0 pid=124434) INFO 10-07 21:13:59 [model_runner.py:1109] Graph capturing finished in 14 secs, took 1.01 GiB
(Worker_TP0_EP0 pid=124434) INFO 10-07 21:14:00 [gpu_worker.py:726] Available KV cache memory: 29.14 GiB
(Worker_TP0_EP0 pid=124434) INFO 10-07 21:14:00 [gpu_worker.py:741] CUDA graph memory profiling is enabled (default since v0.21.0). The current --gpu-memory-utilization=0.9000 is equivalent to --gpu-memory-utilization=0.8858 without CUDA graph memory profiling. To maintain the same effective KV cache size as before, increase --gpu-memory-utilization to 0.9142. To disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.
(EngineCore pid=124122) INFO 10-07 21:14:00 [kv_cache_utils.py:2481] GPU KV cache size: 9,092,381 tokens, Maximum concurrency for 262,144 tokens per request: 34.68x
(Worker_TP0_EP0 pid=124434) INFO 10-07 21:14:13 [model_runner.py:1109] Graph capturing finished in 10 secs, took 0.69 GiB
(Worker_TP0_EP0 pid=124434) INFO 10-07 21:14:13 [gpu_worker.py:933] CUDA graph pool memory: 0.69 GiB (actual), 1.13 GiB (estimated), difference: 0.44 GiB (63.5%).
(Worker_TP0_EP0 pid=124434) INFO 10-07 21:14:13 [gpu_worker.py:996] Free memory on device (77.01/79.18 GiB) on startup. Desired GPU memory utilization is (0.9, 71.26 GiB). Actual usage is 38.23 GiB for consumed memory (weights + non-torch), 3.89 GiB for peak activation, and 0.69 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=30395555431` (28.31 GiB) to fit into requested memory, or `--kv-cache-memory=36568496128` (34.06 GiB) to fully utilize gpu memory. Current kv cache memory in use is 29.14 GiB.
)LOG";

}  // namespace

TEST_CASE("startup log: case A, vLLM 0.25.0 V1 runner, two-line KV size", "[startup_log]") {
  const auto log = read_vllm_startup_log(kCaseA);
  REQUIRE(log.model_loading_gib);
  CHECK(log.model_loading_gib->value == 75.64);
  CHECK(log.model_loading_gib->line == 4);
  REQUIRE(log.cudagraph_estimate_gib);
  CHECK(log.cudagraph_estimate_gib->value == 1.58);
  CHECK(log.cudagraph_estimate_gib->line == 6);
  CHECK(log.piecewise_sizes == 42);
  CHECK(log.piecewise_largest == 384);
  CHECK(log.full_sizes == 26);
  CHECK(log.full_largest == 192);
  REQUIRE(log.available_kv_gib);
  CHECK(log.available_kv_gib->value == 10.29);
  CHECK(log.available_kv_gib->line == 7);
  CHECK(log.gpu_kv_cache_tokens == 1993100);
  CHECK(log.concurrency_tokens == 1048576);
  CHECK(log.max_concurrency == 1.90);
  CHECK_FALSE(log.merged_kv_line);
  CHECK(log.equivalent_utilization == 0.9334);
  CHECK(log.cudagraph_actual_gib == 1.73);
  CHECK(log.cudagraph_pool_estimated_gib == 1.58);
  CHECK_FALSE(log.model_runner_v2);
  CHECK_FALSE(log.free_gib);
  CHECK_FALSE(log.weights_gib);
  CHECK_FALSE(log.consumed_gib);
  CHECK_FALSE(log.vllm_version);
  CHECK(log.notes.empty());
  CHECK(log.unreadable_lines.empty());

  CHECK(log.non_default_args.starts_with("{'model_tag': 'deepseek-ai/DeepSeek-V4-Flash', "));
  CHECK(log.non_default_args.ends_with("'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 2}}"));
  CHECK(log.args.size() == 22);
  CHECK(log.args.at("tensor_parallel_size") == "2");
  CHECK(log.args.at("gpu_memory_utilization") == "0.95");
  CHECK(log.args.at("kv_cache_dtype") == "fp8");
  CHECK(log.args.at("max_model_len") == "1048576");
  CHECK(log.args.at("enable_prefix_caching") == "true");
  CHECK(log.args.at("host") == "0.0.0.0");
  CHECK(log.args.at("api_key") == "[\"aabduh\"]");
  CHECK(log.args.at("speculative_config") == "{\"method\": \"mtp\", \"num_speculative_tokens\": 2}");
}

TEST_CASE("startup log: vLLM 0.26.0 V2 runner, model loading without 'memory' and the 4-term summary",
          "[startup_log]") {
  const auto log = read_vllm_startup_log(kB300V2);
  CHECK(log.model_runner_v2);
  REQUIRE(log.model_loading_gib);
  CHECK(log.model_loading_gib->value == 156.32);
  CHECK(log.model_loading_gib->line == 2);
  REQUIRE(log.available_kv_gib);
  CHECK(log.available_kv_gib->value == 86.74);
  CHECK(log.gpu_kv_cache_tokens == 913657);
  CHECK(log.concurrency_tokens == 65536);
  CHECK(log.max_concurrency == 13.94);
  CHECK_FALSE(log.merged_kv_line);
  // The V2 runner prints no profiling, estimate or equivalence line.
  CHECK_FALSE(log.cudagraph_estimate_gib);
  CHECK_FALSE(log.piecewise_sizes);
  CHECK_FALSE(log.equivalent_utilization);
  CHECK(log.free_gib == 267.08);
  CHECK(log.total_gib == 267.69);
  CHECK(log.weights_gib == 156.32);
  CHECK(log.peak_activation_gib == 2.99);
  CHECK(log.non_torch_gib == 0.23);
  CHECK(log.cudagraph_actual_gib == 3.06);
  CHECK_FALSE(log.consumed_gib);
  CHECK(log.notes.empty());
}

TEST_CASE("startup log: vLLM 0.31.1rc1 V2 runner, merged KV line and the 3-term summary", "[startup_log]") {
  SECTION("DeepSeek-V4.1-Flash on 8 x H100") {
    const auto log = read_vllm_startup_log(kH100V41);
    CHECK(log.model_runner_v2);
    REQUIRE(log.model_loading_gib);
    CHECK(log.model_loading_gib->value == 36.32);
    REQUIRE(log.available_kv_gib);
    CHECK(log.available_kv_gib->value == 29.14);
    CHECK(log.available_kv_gib->line == 5);
    CHECK(log.equivalent_utilization == 0.8858);
    CHECK(log.merged_kv_line);
    CHECK(log.gpu_kv_cache_tokens == 9092381);
    CHECK(log.concurrency_tokens == 262144);
    CHECK(log.max_concurrency == 34.68);
    CHECK(log.cudagraph_pool_estimated_gib == 1.13);
    CHECK(log.cudagraph_actual_gib == 0.69);
    CHECK(log.free_gib == 77.01);
    CHECK(log.total_gib == 79.18);
    CHECK(log.consumed_gib == 38.23);
    CHECK(log.peak_activation_gib == 3.89);
    CHECK_FALSE(log.weights_gib);
    CHECK_FALSE(log.non_torch_gib);
    CHECK_FALSE(log.cudagraph_estimate_gib);
    CHECK(log.notes.empty());
  }
  SECTION("DeepSeek-V4-Flash-0731 on 8 x H100: model loading from another rank than the KV lines") {
    const std::string text = R"LOG((Worker pid=99686) INFO 10-07 20:42:28 [gpu_worker.py:501] Using V2 Model Runner
(Worker_TP4_EP4 pid=99690) INFO 10-07 20:42:44 [model_runner.py:413] Model loading took 19.79 GiB memory and 15.227719 seconds
(Worker_TP0_EP0 pid=99686) INFO 10-07 20:43:05 [model_runner.py:1109] Graph capturing finished in 14 secs, took 0.77 GiB
(Worker_TP0_EP0 pid=99686) INFO 10-07 20:43:06 [gpu_worker.py:726] Available KV cache memory: 47.43 GiB
(Worker_TP0_EP0 pid=99686) INFO 10-07 20:43:06 [gpu_worker.py:741] CUDA graph memory profiling is enabled (default since v0.21.0). The current --gpu-memory-utilization=0.9000 is equivalent to --gpu-memory-utilization=0.8897 without CUDA graph memory profiling. To maintain the same effective KV cache size as before, increase --gpu-memory-utilization to 0.9103. To disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.
)LOG";
    const auto log = read_vllm_startup_log(text);
    CHECK(log.model_runner_v2);
    CHECK(log.model_loading_gib->value == 19.79);
    CHECK(log.available_kv_gib->value == 47.43);
    CHECK(log.equivalent_utilization == 0.8897);
    CHECK_FALSE(log.gpu_kv_cache_tokens);
  }
  SECTION("the deepseekv41-flash-0909 image: merged line, a summary quoted without its free-memory part") {
    // Lines as a blog quoted them, prefixes stripped by its author.
    const std::string text =
        "GPU KV cache size: 5,066,461 tokens, Maximum concurrency for 4,096 tokens per request: 1236.93x\n"
        "Desired GPU memory utilization is (0.78, 208.8 GiB). Actual usage is 51.22 GiB for consumed memory "
        "(weights + non-torch), 27.7 GiB for peak activation, and 9.61 GiB for CUDAGraph memory. Current kv cache "
        "memory in use is 129.87 GiB.\n";
    const auto log = read_vllm_startup_log(text);
    CHECK(log.merged_kv_line);
    CHECK(log.gpu_kv_cache_tokens == 5066461);
    CHECK(log.concurrency_tokens == 4096);
    CHECK(log.max_concurrency == 1236.93);
    CHECK(log.consumed_gib == 51.22);
    CHECK(log.peak_activation_gib == 27.7);
    CHECK(log.cudagraph_actual_gib == 9.61);
    CHECK_FALSE(log.free_gib);
    CHECK_FALSE(log.model_loading_gib);
    CHECK(log.notes.empty());
  }
}

TEST_CASE("startup log: vLLM 0.21.1rc1 and 0.23.0 V1 runner lines", "[startup_log]") {
  SECTION("0.21.1rc1 on 2 x GB10, FULL sizes of MTP") {
    const std::string text =
        R"LOG((Worker_TP0 pid=57) INFO 06-21 07:20:09 [gpu_model_runner.py:5132] Model loading took 75.86 GiB memory and 184.202604 seconds
(Worker_TP0 pid=57) INFO 06-21 07:20:24 [gpu_model_runner.py:6290] Profiling CUDA graph memory: PIECEWISE=5 (largest=24), FULL=3 (largest=9)
(Worker_TP0 pid=57) INFO 06-21 07:20:29 [gpu_model_runner.py:6376] Estimated CUDA graph memory: 0.55 GiB total
(Worker_TP0 pid=57) INFO 06-21 07:20:29 [gpu_worker.py:466] Available KV cache memory: 18.65 GiB
(EngineCore pid=34) INFO 06-21 07:20:29 [kv_cache_utils.py:1733] GPU KV cache size: 1,001,650 tokens
(EngineCore pid=34) INFO 06-21 07:20:29 [kv_cache_utils.py:1734] Maximum concurrency for 200,000 tokens per request: 5.01x
(Worker_TP0 pid=57) INFO 06-21 07:20:47 [gpu_worker.py:619] CUDA graph pool memory: 0.34 GiB (actual), 0.55 GiB (estimated), difference: 0.21 GiB (62.0%).
)LOG";
    const auto log = read_vllm_startup_log(text);
    CHECK(log.model_loading_gib->value == 75.86);
    CHECK(log.piecewise_sizes == 5);
    CHECK(log.piecewise_largest == 24);
    CHECK(log.full_sizes == 3);
    CHECK(log.full_largest == 9);
    CHECK(log.cudagraph_estimate_gib->value == 0.55);
    CHECK(log.available_kv_gib->value == 18.65);
    CHECK(log.gpu_kv_cache_tokens == 1001650);
    CHECK(log.concurrency_tokens == 200000);
    CHECK(log.max_concurrency == 5.01);
    CHECK(log.cudagraph_actual_gib == 0.34);
    CHECK(log.cudagraph_pool_estimated_gib == 0.55);
    CHECK(log.notes.empty());
  }
  SECTION("0.23.0 on 2 x H200 NVL, prefixes stripped by the source") {
    const std::string text =
        "Loading weights took 36.95 seconds\n"
        "Model loading took 74.35 GiB memory and 42.924824 seconds\n"
        "Available KV cache memory: 29.07 GiB\n"
        "GPU KV cache size: 82,301 tokens\n"
        "Maximum concurrency for 4,096 tokens per request: 20.09x\n"
        "init engine (profile, create kv cache, warmup model) took 516.40 s\n";
    const auto log = read_vllm_startup_log(text);
    CHECK(log.model_loading_gib->value == 74.35);
    CHECK(log.model_loading_gib->line == 2);
    CHECK(log.available_kv_gib->value == 29.07);
    CHECK(log.gpu_kv_cache_tokens == 82301);
    CHECK(log.concurrency_tokens == 4096);
    CHECK(log.max_concurrency == 20.09);
  }
}

TEST_CASE("startup log: the version lines and a 4-term summary with whole numbers", "[startup_log]") {
  // Shaped as vLLM's api_server.py and its engine print them.
  const std::string text =
      "(APIServer pid=1) INFO 09-30 10:00:00 [api_server.py:1896] vLLM API server version 0.30.0\n"
      "INFO 09-30 10:00:05 [core.py:77] Initializing a V1 LLM engine (v0.30.0) with config: model='x'\n"
      // An InferenceX test fixture's line (integer GiB in the free-memory part).
      "(Worker_TP0 pid=1) Free memory on device (264/268 GiB) on startup. Actual usage is 205.08 GiB for weight, "
      "3.75 GiB for peak activation, 1.63 GiB for non-torch memory, and 0.14 GiB for CUDAGraph memory. Current kv "
      "cache memory in use is 43.85 GiB.\n"
      "GPU KV cache size: 17,076,237 tokens\n";
  const auto log = read_vllm_startup_log(text);
  CHECK(log.vllm_version == "0.30.0");
  CHECK(log.free_gib == 264);
  CHECK(log.total_gib == 268);
  CHECK(log.weights_gib == 205.08);
  CHECK(log.peak_activation_gib == 3.75);
  CHECK(log.non_torch_gib == 1.63);
  CHECK(log.cudagraph_actual_gib == 0.14);
  CHECK(log.gpu_kv_cache_tokens == 17076237);
  CHECK(log.notes.empty());

  const auto other = read_vllm_startup_log(
      "vLLM API server version 0.25.0\nInitializing a V1 LLM engine (v0.26.0) with config\n"
      "GPU KV cache size: 1 tokens\n");
  CHECK(other.vllm_version == "0.25.0");
  CHECK(has_note(other, "line 2: The vLLM version is '0.26.0' here, '0.25.0' on line 1; the first is kept"));
}

TEST_CASE("startup log: journald prefixes, ANSI colour codes and CRLF line ends", "[startup_log]") {
  SECTION("journald in front of vLLM's prefix (0.27.1 on 4 x RTX PRO 6000, a session transcript)") {
    const std::string text =
        R"LOG(Aug 18 22:22:14 sys0 vllm[188957]: (Worker_TP0 pid=188957) INFO 08-18 22:22:14 [mxfp4.py:626] Using 'MARLIN' Mxfp4 MoE backend.
Aug 18 22:22:22 sys0 vllm[188957]: (Worker_TP0 pid=188957) INFO 08-18 22:22:22 [gpu_model_runner.py:5405] Model loading took 37.96 GiB memory and 8.116200 seconds
Aug 18 22:22:22 sys0 vllm[188957]: (Worker_TP0 pid=188957) INFO 08-18 22:22:22 [interface.py:635] Setting kv cache block size to 256 for DEEPSEEK_SPARSE_SWA backend.
)LOG";
    const auto log = read_vllm_startup_log(text);
    REQUIRE(log.model_loading_gib);
    CHECK(log.model_loading_gib->value == 37.96);
    CHECK(log.model_loading_gib->line == 2);
    CHECK_FALSE(log.available_kv_gib);
  }
  SECTION("case A coloured as a terminal shows it, with CRLF line ends") {
    std::string text;
    std::size_t start = 0;
    while (start < kCaseA.size()) {
      const std::size_t nl = kCaseA.find('\n', start);
      std::string line = kCaseA.substr(start, nl - start);
      start = nl + 1;
      // vLLM colours the level and the source tag: "\x1b[32mINFO\x1b[0m ... \x1b[2m[gpu_worker.py:538]\x1b[0m".
      if (const auto p = line.find(" ["); p != std::string::npos) {
        line.insert(line.find("] ", p) + 1, "\x1b[0m");
        line.insert(p + 1, "\x1b[2m");
      }
      if (const auto p = line.find("INFO"); p != std::string::npos) line.replace(p, 4, "\x1b[32mINFO\x1b[0m");
      text += line + "\r\n";
    }
    const auto coloured = read_vllm_startup_log(text);
    const auto plain = read_vllm_startup_log(kCaseA);
    CHECK(coloured.model_loading_gib->value == 75.64);
    CHECK(coloured.model_loading_gib->line == 4);
    CHECK(coloured.available_kv_gib->value == 10.29);
    CHECK(coloured.gpu_kv_cache_tokens == 1993100);
    CHECK(coloured.max_concurrency == 1.90);
    CHECK(coloured.piecewise_largest == 384);
    CHECK(coloured.equivalent_utilization == 0.9334);
    CHECK(coloured.cudagraph_pool_estimated_gib == 1.58);
    CHECK(coloured.non_default_args == plain.non_default_args);
    CHECK(coloured.args == plain.args);
    CHECK(coloured.notes.empty());
  }
  SECTION("colour inside the number's phrase, a CR line end on the last line without a newline") {
    const auto log = read_vllm_startup_log(
        "\x1b[1;36m(Worker_TP1 pid=2)\x1b[0;0m Available KV cache \x1b[1mmemory: "
        "\x1b[0m10.29 GiB\r");
    REQUIRE(log.available_kv_gib);
    CHECK(log.available_kv_gib->value == 10.29);
  }
}

TEST_CASE("startup log: workers that differ keep the minimum available KV memory and say so", "[startup_log]") {
  const std::string text =
      "(Worker_TP0 pid=514) INFO 07-12 02:34:00 [gpu_model_runner.py:5306] Model loading took 75.64 GiB memory and "
      "20.2 seconds\n"
      "(Worker_TP1 pid=515) INFO 07-12 02:34:00 [gpu_model_runner.py:5306] Model loading took 75.64 GiB memory and "
      "20.5 seconds\n"
      "(Worker_TP0 pid=514) INFO 07-12 02:35:26 [gpu_worker.py:538] Available KV cache memory: 10.29 GiB\n"
      "(Worker_TP1 pid=515) INFO 07-12 02:35:26 [gpu_worker.py:538] Available KV cache memory: 9.87 GiB\n"
      "(Worker_TP2 pid=516) INFO 07-12 02:35:26 [gpu_worker.py:538] Available KV cache memory: 10.1 GiB\n"
      "(Worker_TP3 pid=517) INFO 07-12 02:34:00 [gpu_model_runner.py:5306] Model loading took 75.9 GiB memory and "
      "20.5 seconds\n";
  const auto log = read_vllm_startup_log(text);
  REQUIRE(log.available_kv_gib);
  CHECK(log.available_kv_gib->value == 9.87);
  CHECK(log.available_kv_gib->line == 4);
  CHECK(log.model_loading_gib->value == 75.64);
  CHECK(log.model_loading_gib->line == 1);
  REQUIRE(log.notes.size() == 3);
  CHECK(log.notes[0] ==
        "line 4: Available KV cache memory is 9.87 GiB here, 10.29 GiB on line 3 (another worker); the minimum, 9.87 "
        "GiB, is kept (vLLM sizes the KV cache by its smallest worker)");
  CHECK(log.notes[1].starts_with("line 5: Available KV cache memory is 10.1 GiB here, 9.87 GiB on line 4"));
  CHECK(log.notes[2] == "line 6: Model loading memory is 75.9 GiB here, 75.64 GiB on line 1; the first is kept");
  CHECK(log.unreadable_lines.empty());
}

TEST_CASE("startup log: a number that cannot be read is a note naming its line", "[startup_log]") {
  const std::string long_tail(500, 'z');
  const std::string text =
      "Model loading took 75.64 GiB memory and 20.2 seconds\n"
      "(Worker_TP0 pid=514) INFO [gpu_worker.py:538] Available KV cache memory: 1O.29 GiB\n"
      "GPU KV cache size: 1,99,3100 tokens " +
      long_tail +
      "\n"
      "Maximum concurrency for 1,048,576 tokens per request: many\n"
      "Profiling CUDA graph memory: PIECEWISE=4x2 (largest=384)\n"
      "Available KV cache memory: 10.29 GiB\n";
  const auto log = read_vllm_startup_log(text);
  CHECK(log.unreadable_lines == std::vector<std::size_t>{2, 3, 4, 5});
  REQUIRE(log.notes.size() == 4);
  CHECK(log.notes[0] ==
        "line 2: 'Available KV cache memory' with a number that could not be read: (Worker_TP0 pid=514) INFO "
        "[gpu_worker.py:538] Available KV cache memory: 1O.29 GiB");
  CHECK(
      log.notes[1].starts_with("line 3: 'GPU KV cache size' with a number that could not be read: GPU KV cache "
                               "size: 1,99,3100 tokens zzz"));
  CHECK(log.notes[1].size() < 300);  // the line is cut to 200 bytes
  CHECK(log.notes[1].find("(536 bytes)") != std::string::npos);
  CHECK(log.notes[2].starts_with("line 4: 'Maximum concurrency for'"));
  CHECK(log.notes[3].starts_with("line 5: 'Profiling CUDA graph memory'"));
  // The readable lines are still read; the unreadable ones leave their fields empty.
  CHECK(log.model_loading_gib->value == 75.64);
  REQUIRE(log.available_kv_gib);
  CHECK(log.available_kv_gib->value == 10.29);
  CHECK(log.available_kv_gib->line == 6);
  CHECK_FALSE(log.gpu_kv_cache_tokens);
  CHECK_FALSE(log.max_concurrency);
  CHECK_FALSE(log.piecewise_sizes);

  // A line with only the phrase: no number at all, and one past int64.
  const auto cut = read_vllm_startup_log("Model loading took\nGPU KV cache size: 99,999,999,999,999,999,999 tokens");
  CHECK(cut.unreadable_lines == std::vector<std::size_t>{1, 2});
  CHECK_FALSE(cut.model_loading_gib);
  CHECK_FALSE(cut.gpu_kv_cache_tokens);

  // A measured amount or a count below zero is unreadable; the KV budget may be negative (what the
  // profile left, printed before vLLM refuses to start).
  const auto neg = read_vllm_startup_log(
      "Model loading took -75.64 GiB memory and 20.2 seconds\nGPU KV cache size: -5 tokens\n"
      "Maximum concurrency for 1,048,576 tokens per request: -1.90x\nAvailable KV cache memory: -10.29 GiB\n");
  CHECK(neg.unreadable_lines == std::vector<std::size_t>{1, 2, 3});
  CHECK_FALSE(neg.model_loading_gib);
  CHECK_FALSE(neg.gpu_kv_cache_tokens);
  CHECK_FALSE(neg.max_concurrency);
  REQUIRE(neg.available_kv_gib);
  CHECK(neg.available_kv_gib->value == -10.29);
}

TEST_CASE("startup log: the non-default args dict", "[startup_log]") {
  SECTION("0.26.0's dict with a config object and a nested dict (the B300 blog's log)") {
    const std::string text =
        "non-default args: {'model_tag': '/MODELS/DeepSeek-V4-Flash-0731', 'enable_auto_tool_choice': True, "
        "'max_model_len': 65536, 'served_model_name': ['deepseek-v4-flash-0731'], 'enable_expert_parallel': True, "
        "'block_size': 256, 'kv_cache_dtype': 'fp8', 'speculative_config': {'method': 'dspark', "
        "'num_speculative_tokens': 7, 'draft_sample_method': 'greedy'}, 'attention_config': "
        "AttentionConfig(backend=None, backend_per_kind={}, flash_attn_version=None, use_fp4_indexer_cache=True, "
        "indexer_kv_dtype='bf16', flex_attn_kv_block_size=None)}\n"
        "Model loading took 156.32 GiB and 233.014771 seconds\n";
    const auto log = read_vllm_startup_log(text);
    CHECK(log.args.size() == 9);
    CHECK(log.args.at("block_size") == "256");
    CHECK(log.args.at("model_tag") == "/MODELS/DeepSeek-V4-Flash-0731");
    CHECK(log.args.at("served_model_name") == "[\"deepseek-v4-flash-0731\"]");
    CHECK(log.args.at("speculative_config") ==
          "{\"method\": \"dspark\", \"num_speculative_tokens\": 7, \"draft_sample_method\": \"greedy\"}");
    CHECK(log.args.at("attention_config") ==
          "AttentionConfig(backend=None, backend_per_kind={}, flash_attn_version=None, use_fp4_indexer_cache=True, "
          "indexer_kv_dtype='bf16', flex_attn_kv_block_size=None)");
    CHECK(log.notes.empty());
  }
  SECTION("strings with quotes, None and False, an empty dict") {
    const auto log = read_vllm_startup_log(
        R"(non-default args: {'chat_template': "it's", 'revision': None, 'enforce_eager': False, 'x': {'a': None}})"
        "\nGPU KV cache size: 1 tokens\n");
    CHECK(log.args.at("chat_template") == "it's");
    CHECK(log.args.at("revision") == "null");
    CHECK(log.args.at("enforce_eager") == "false");
    CHECK(log.args.at("x") == "{\"a\": null}");
    const auto none = read_vllm_startup_log("non-default args: {}\nGPU KV cache size: 1 tokens\n");
    CHECK(none.non_default_args == "{}");
    CHECK(none.args.empty());
  }
  SECTION("a dict cut short keeps the keys before the cut and says so") {
    const auto log = read_vllm_startup_log(
        "non-default args: {'tensor_parallel_size': 2, 'gpu_memory_utilization': 0.95, 'speculative_config': "
        "{'method': 'mt\nGPU KV cache size: 1 tokens\n");
    CHECK(log.args.size() == 2);
    CHECK(log.args.at("gpu_memory_utilization") == "0.95");
    REQUIRE(log.notes.size() == 1);
    CHECK(log.notes[0].starts_with("line 1: the non-default args are not a whole dict"));
  }
}

TEST_CASE("startup log: empty input and unrelated text are not a start-up log", "[startup_log]") {
  CHECK(error_of("") == kNotALog);
  CHECK(error_of("\n\r\n\n") == kNotALog);
  CHECK(error_of("{\"model_type\": \"deepseek_v4\"}\n") == kNotALog);
  CHECK(error_of(std::string("\0\x1b[\xff\xfe", 5)) == kNotALog);
  // vLLM's own error text names the available KV cache memory, in lower case: not a KV line.
  CHECK(error_of("(EngineCore pid=2739502) ERROR 06-03 14:24:40 [core.py:1165] ValueError: To serve at least one "
                 "request with the model's max seq len (30000), (6.66 GiB KV cache is needed, which is larger than "
                 "the available KV cache memory (5.44 GiB).") == kNotALog);
  // A log with only the other lines (the CUDA-graph estimate) is not one either.
  CHECK(error_of("Estimated CUDA graph memory: 1.58 GiB total\n") == kNotALog);
}

TEST_CASE("startup log: a large log is read line by line with bounded notes", "[startup_log]") {
  // 200,000 workers' lines, each a different available KV memory, and one 4 MiB line.
  std::string text;
  text.reserve(16 << 20);
  for (int i = 0; i < 200000; ++i)
    text += "(Worker_TP" + std::to_string(i) +
            " pid=1) INFO [gpu_worker.py:538] Available KV cache memory: " + std::to_string(100000 - (i % 1000)) +
            ".5 GiB\n";
  text += std::string(4 << 20, 'x') + " Model loading took \n";
  text += std::string(1 << 20, '\x1b') + "\n";
  const auto log = read_vllm_startup_log(text);
  REQUIRE(log.available_kv_gib);
  CHECK(log.available_kv_gib->value == 99001.5);
  CHECK(log.available_kv_gib->line == 1000);
  CHECK(log.notes.size() == kVllmLogMaxNotes + 1);
  CHECK(log.notes.back().ends_with("more notes left out (at most 64 are kept)"));
  CHECK(log.unreadable_lines.size() <= kVllmLogMaxNotes);
}

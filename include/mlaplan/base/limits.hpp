#pragma once
// Every limit mla-plan puts on user-controlled sizes, in one place (docs/robustness.md has the
// table with the reasons). Beyond a limit the input is rejected with one line naming the flag or
// field, the value and the allowed range: exit 1 for a flag (Error usage), exit 2 for a config
// field (Error invalid_config). Inside the limits a plan takes well under a second and a few
// hundred MB, and every size derived from them is computed in checked 64-bit arithmetic.

#include <cstdint>

namespace mlaplan {

/// Config files and fields (src/model/config.cpp; exit 2).
struct ConfigLimits {
  static constexpr std::int64_t max_file_bytes = 1LL << 20;  ///< 1 MiB (real configs are a few KiB)
  static constexpr int max_nesting_depth = 64;               ///< JSON nesting
  static constexpr std::int64_t max_layers = 4096;           ///< num_hidden_layers
  static constexpr std::int64_t max_draft_layers = 64;       ///< num_nextn_predict_layers
  static constexpr std::int64_t max_list_entries = 8192;     ///< any per-layer list
  static constexpr std::int64_t max_heads = 4096;            ///< num_attention_heads, index_n_heads
  static constexpr std::int64_t max_head_dim = 65536;
  static constexpr std::int64_t max_window = 1LL << 20;     ///< sliding_window
  static constexpr std::int64_t max_topk = 1LL << 24;       ///< index_topk
  static constexpr std::int64_t max_positions = 1LL << 34;  ///< max_position_embeddings
};

/// --num-sms, --gpu-memory-gib and the capacity flags in GiB (src/hardware/target.cpp, src/cache/layout.cpp; exit 1).
struct TargetLimits {
  static constexpr std::int64_t max_num_sms = 1024;
  static constexpr double max_memory_gib = 1048576.0;  ///< 1 PiB
};

/// Decode-batch flags of plan, report and verify (src/cache/decode.cpp; exit 1).
struct BatchLimits {
  static constexpr std::int64_t max_requests = 65536;       ///< --batch, entries of --context-lens
  static constexpr std::int64_t max_decode_tokens = 65536;  ///< requests x (1 + --spec-tokens)
  static constexpr std::int64_t max_spec_tokens = 64;       ///< --spec-tokens
  /// --context-lens @FILE (app/flags/flags.cpp; read errors exit 2): 65,536 lengths of up to 11 digits
  /// take under 1 MiB; the rest is room for whitespace and line ends of any layout.
  static constexpr std::int64_t max_context_lens_file_bytes = 64LL << 20;
};

/// Layout flags (src/cache/layout.cpp; exit 1). --max-model-len is bounded by the config's
/// max_position_embeddings (itself at most ConfigLimits::max_positions), --pipeline-parallel-size
/// also by num_hidden_layers.
struct LayoutLimits {
  static constexpr std::int64_t max_parallel_size = 4096;        ///< --tensor/pipeline/data-parallel-size
  static constexpr std::int64_t max_block_size = 1 << 20;        ///< --block-size
  static constexpr std::int64_t max_in_flight_tokens = 1 << 24;  ///< --max-num-batched-tokens
  static constexpr std::int64_t max_speculative_tokens = BatchLimits::max_spec_tokens;
};

/// The tile scheduler (src/cache/scheduler.cpp, the library's plan_schedule; Error usage). They keep
/// every record field and num_splits entry inside int32 and the sweep inside int64.
struct ScheduleLimits {
  static constexpr std::int64_t max_batch = 1'048'576;   ///< decode tokens in one plan
  static constexpr std::int64_t max_length = 1LL << 28;  ///< each length and extra length
  static constexpr std::int64_t max_num_sms = 4096;
  static constexpr std::int64_t max_heads = 4096;  ///< h_q, h_k
  static constexpr std::int64_t max_s_q = 4096;
  /// `mla-plan schedule --lengths`: the decode tokens of one step, as for plan.
  static constexpr std::int64_t max_cli_requests = BatchLimits::max_decode_tokens;
};

/// `mla-plan check` (app/commands/cmd_check.cpp; exit 1).
struct CheckLimits {
  static constexpr std::int64_t max_configs = 4096;           ///< CONFIG arguments of one run
  static constexpr std::int64_t max_tp_sizes = 16;            ///< values of --tensor-parallel-size with --matrix
  static constexpr std::int64_t max_matrix_rows = 1024;       ///< configs x TP sizes with --matrix
  static constexpr double max_global_bytes_per_token = 1e18;  ///< --max-global-bytes-per-token (0 up to this)
  /// With --matrix, the layers (backbone + draft) of the configs x TP sizes: each layer row is
  /// planned on 11 GPU presets x up to 2 kv dtypes, about 7 us of work for the costliest configs
  /// (every V4.1 layer its own cache source, every V4.0 layer c4a), so a run takes under a
  /// second. The largest config (4096 + 64 layers) at 16 TP sizes fits, and so do 1024 rows of
  /// the released configs (at most 62 layers).
  static constexpr std::int64_t max_matrix_layer_rows = 131072;
};

/// `mla-plan verify` (src/gpu_check/verify.cpp, app/commands/cmd_verify.cpp). A verification problem lives in host
/// memory (about 8 KiB per attended row and 1 MiB per decode token at h_q 128) and is checked by
/// the host reference, so it is kept far smaller than a plan's batch.
struct VerifyLimits {
  static constexpr std::int64_t max_decode_tokens = 256;        ///< b of each problem (exit 1)
  static constexpr std::int64_t max_index_slots = 1LL << 24;    ///< b x topk of one cache (cell unsupported)
  static constexpr std::int64_t max_attended_rows = 1LL << 17;  ///< sum of min(length, topk) (cell unsupported)
  static constexpr std::int64_t max_iterations = 10000;         ///< --iterations (exit 1)
};

/// --verify-json / --bench-json files of `mla-plan report` (app/commands/cmd_report.cpp; exit 2, an invalid input file).
struct ResultLimits {
  static constexpr std::int64_t max_file_bytes = 4LL << 20;  ///< 4 MiB (a verify --json file is a few KiB)
  static constexpr int max_nesting_depth = 64;
  static constexpr std::int64_t max_tables = 32;   ///< tables taken from one file (more are left out)
  static constexpr std::int64_t max_columns = 64;  ///< columns of one table (more are left out)
};

/// Checkpoint files read for their tensor list (src/model/safetensors.cpp; exit 2, an invalid input
/// file). Only headers and the index are read, never the tensor data.
struct CheckpointLimits {
  /// A safetensors header (the JSON after the 8-byte length): the safetensors library's own
  /// MAX_HEADER_SIZE. DeepSeek-V3's largest shard header is about 100 KB.
  static constexpr std::int64_t max_header_bytes = 100'000'000;
  /// model.safetensors.index.json: DeepSeek-V3's (91,000 tensors) is about 9 MB.
  static constexpr std::int64_t max_index_bytes = 64LL << 20;
  /// refs/main of a Hugging Face cache: a commit hash and a newline.
  static constexpr std::int64_t max_ref_bytes = 256;
  /// Hex digits of a commit hash in refs/main (SHA-1 has 40, SHA-256 64).
  static constexpr std::int64_t max_ref_hex_digits = 64;
  /// A --revision (a branch, a tag, refs/pr/N or a commit hash) looked up as refs/<revision>.
  static constexpr std::int64_t max_revision_bytes = 256;
  /// Files of a cache repository's refs/ looked at to list the refs that exist (an error message).
  static constexpr std::int64_t max_refs_walked = 1000;
  /// JSON nesting of a header or an index (both are 3 levels deep), scanned before parsing.
  static constexpr int max_nesting_depth = 64;
  /// Shard files of one checkpoint (DeepSeek-V3 has 163).
  static constexpr std::int64_t max_files = 65536;
  /// The headers of one checkpoint directory together (each 8 + N bytes), checked before each
  /// header is read: DeepSeek-V3's 163 shards have about 16 MB, 176 bytes a tensor; at that
  /// density max_total_tensors take 46 MB. (A single header is also bounded by max_header_bytes.)
  static constexpr std::int64_t max_total_header_bytes = 64LL << 20;
  /// Tensors of one checkpoint directory (every header's, and the index's weight_map entries),
  /// counted while each header is parsed: DeepSeek-V3 has 91,000, V4-Flash 69,187, V4.1-Flash
  /// 96,101. A tensor costs about 0.7 KB and 5 us (15 us through nlohmann::json) of reading,
  /// classifying and placing, so the limit keeps a directory within about 200 MB and a few seconds
  /// (docs/robustness.md, "At the limits").
  static constexpr std::int64_t max_total_tensors = 1LL << 18;
  /// JSON values (objects, arrays, strings, numbers, ...) a header or the index may hold for each
  /// tensor max_total_tensors leaves to it: a tensor entry of rank 4 has 10. Bounds what the
  /// general JSON parser holds at once (a header's __metadata__ is kept whole) whatever the text.
  static constexpr std::int64_t max_json_values_per_tensor = 16;
  /// Entries of a header's __metadata__ (string -> string): writers store a few ("format": "pt").
  static constexpr std::int64_t max_metadata_entries = 4096;
  /// Missing shards listed by name in a message or a report (all are counted).
  static constexpr std::int64_t max_missing_listed = 8;
};

/// What one report draws at most (app/report/report.cpp): the report's size stays bounded whatever the
/// batch or the result files (these cap the drawing, they reject nothing).
struct ReportLimits {
  static constexpr std::int64_t max_html_rows = 10000;  ///< rows of one result table in the HTML report
  static constexpr std::int64_t max_svg_rows = 60;      ///< rows of one result table in the SVG report
  /// Request pieces drawn one by one in a partition's bar; the whole requests between the first
  /// and the last piece of a fuller partition are drawn as one segment.
  static constexpr std::int64_t max_pieces_per_partition = 16;
};

/// mlaplan_kernel_bench arguments (kernels/bench/bench_decode.cpp; exit 1).
struct KernelBenchLimits {
  static constexpr int min_replays = 5;
  static constexpr int max_replays = 100000;
};

/// `mla-plan bench` flags (src/gpu_check/bench.cpp, app/commands/cmd_bench.cpp; exit 1). A shape of b requests holds
/// b x (topk + extra_topk) distinct cache rows on the GPU (V4.0's c128a at 1M tokens: 8,320 rows
/// of 584 B per request, 20 GB at b 4096) and its q and out.
struct BenchLimits {
  static constexpr std::int64_t max_batch = 4096;      ///< requests in one timed shape
  static constexpr std::int64_t max_batch_sizes = 32;  ///< entries of --batch
  static constexpr std::int64_t max_replays = 10000;
  static constexpr std::int64_t max_warmup = 1000;
};

}  // namespace mlaplan

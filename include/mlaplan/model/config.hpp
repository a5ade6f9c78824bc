#pragma once
// The model config as mla-plan understands it: one typed struct, filled by the reader in
// src/model/config.cpp (the only translation unit that parses JSON input) and validated right after
// parsing. The rules are those of docs/config.md.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/base/limits.hpp"  // ConfigLimits: beyond them a config is rejected (docs/robustness.md)
#include "mlaplan/model/hf_cache.hpp"

namespace mlaplan {

/// The model families mla-plan plans for.
enum class Family {
  deepseek_v41,  ///< V4.1 (V4.1-Flash): per-layer ratios 0/1/2, shared compressed caches
  deepseek_v4,   ///< V4.0 (V4-Flash, V4-Pro): per-layer ratios 0/4/128, each layer owns its cache
  deepseek_v32,  ///< V3.2: every layer sparse top-k over an MLA latent + indexer cache
};

std::string_view to_string(Family f);

/// Severity of a finding. Errors make a config invalid (or unsupported); warnings and infos don't.
enum class Severity { info, warning, error };
std::string_view to_string(Severity s);

/// One thing worth telling the user about a config: a default applied, a spelling normalised,
/// a suspicious value, a rule violated.
struct Finding {
  std::string id;  ///< stable identifier, e.g. "config.default", "backend.kv_cache_dtype"
  Severity severity = Severity::info;
  std::string message;  ///< names the value and what is allowed
  std::string path;     ///< JSON pointer into the config ("" when not about one field)
  std::string fix;      ///< a concrete fix, where one exists
};

/// The fields that say which tensors a checkpoint holds (src/model/weights.cpp, docs/weights.md). Read
/// with the same rules as the rest; a default assumed for one of them is recorded in `findings`
/// here, not in ModelConfig::findings (the planner's output does not change).
struct CheckpointFields {
  std::int64_t hidden_size = 0;
  std::int64_t vocab_size = 0;
  std::int64_t moe_intermediate_size = 0;
  std::int64_t intermediate_size = 0;  ///< V3.2 dense layers
  std::int64_t n_routed_experts = 0;
  std::int64_t n_shared_experts = 0;
  std::int64_t num_experts_per_tok = 0;
  std::int64_t q_lora_rank = 0;
  std::int64_t o_groups = 0;                  ///< V4 / V4.1
  std::int64_t o_lora_rank = 0;               ///< V4 / V4.1
  std::int64_t hc_mult = 0;                   ///< V4 / V4.1
  std::int64_t num_hash_layers = 0;           ///< V4 (V4.1: absent = 0)
  std::int64_t first_k_dense_replace = 0;     ///< V3.2
  std::int64_t qk_nope_head_dim = 0;          ///< V3.2
  std::int64_t v_head_dim = 0;                ///< V3.2
  std::int64_t compress_ratios_entries = -1;  ///< length of compress_ratios as written (-1: absent)
  /// V4.1 Engram tables
  std::vector<std::int64_t> engram_layer_ids;
  std::vector<std::int64_t> engram_num_embeddings;
  std::int64_t engram_head_dim = 0;
  std::int64_t dspark_n_routed_experts = 0;  ///< V4.1 draft stages' routed experts (0: absent)
  /// V4.1 vision tower (vision_config), when present
  bool has_vision = false;
  std::int64_t vision_layers = 0;
  std::int64_t vision_hidden_size = 0;
  std::int64_t vision_intermediate_size = 0;
  std::int64_t vision_patch_size = 0;
  std::int64_t vision_downsample_ratio = 0;
  /// quantization_config ("" / empty when absent)
  bool has_quantization_config = false;
  std::string quant_method;
  std::string fmt;
  std::string scale_fmt;
  std::string expert_dtype;          ///< top level (V4) or inside quantization_config (V4.1)
  std::string expert_dtype_pointer;  ///< where it was read ("" when absent)
  std::vector<std::int64_t> weight_block_size;
  std::vector<Finding> findings;  ///< defaults assumed for the fields above
};

/// A parsed and validated model config. Per-layer lists cover backbone + draft layers.
struct ModelConfig {
  std::string source;  ///< the path as the user gave it
  std::string file;    ///< the config.json that was read
  /// The model directory read (a Hugging Face cache repository resolved through refs/main); ""
  /// when a config file was given. Its safetensors headers, when present, give the weights.
  std::string model_dir;
  /// Set when the config was found through the Hugging Face cache (a repo id, a cache repository
  /// models--ORG--NAME or one of its snapshots); "" otherwise.
  std::string hf_repo_id;   ///< "ORG/NAME" ("" for a cache directory not named models--ORG--NAME)
  std::string hf_revision;  ///< the revision asked for ("main" by default; "" for a snapshot named)
  std::string hf_commit;    ///< the snapshot's commit (snapshots/<commit>)
  /// The model-source options it was read with (ModelSourceOptions): the launch command repeats them.
  std::optional<std::string> download_dir, hf_overrides;
  /// The JSON pointers whose values --hf-overrides replaced (a replaced object or array as one
  /// pointer): an error at or under one names the override, not the file's value.
  std::vector<std::string> hf_overridden_pointers;
  Family family = Family::deepseek_v41;
  std::string model_type;    ///< top-level model_type as written ("" if inferred)
  bool composite = false;    ///< V4.1 with the attention fields under text_config
  std::string field_prefix;  ///< "/text_config" for composite V4.1, else ""

  std::int64_t num_hidden_layers = 0;  ///< backbone layers (n)
  /// The draft layers (MTP stages of V4.0 and V3.2, DSpark stages of V4.1 and V4.0 with
  /// dspark_block_size): draft_layer_count() of the config, the one count the topology, the KV
  /// caches, the prefix cache, the host tier and the weights follow.
  std::int64_t num_draft_layers = 0;
  std::int64_t num_nextn_predict_layers = 0;  ///< as written (or its default); see draft_layer_count()
  std::int64_t dspark_block_size = 0;         ///< DSpark drafter block; 0: absent (V4.0 drafts are then MTP stages)
  std::int64_t num_attention_heads = 0;
  std::int64_t num_key_value_heads = 1;
  std::int64_t head_dim = 0;  ///< q/k head size the attention kernel sees (V3.2: kv_lora_rank + rope)
  std::int64_t qk_rope_head_dim = 64;
  std::int64_t kv_lora_rank = 0;    ///< V3.2 only
  std::int64_t sliding_window = 0;  ///< 0 when the family has none (V3.2)
  std::int64_t index_topk = 0;
  std::int64_t index_n_heads = 0;
  std::int64_t index_head_dim = 0;
  std::int64_t max_position_embeddings = 0;
  std::string dtype;  ///< model dtype ("bfloat16"), "" if the config names none

  /// Per layer (backbone then draft): 0/1/2 (V4.1), 0/1/4/128 (V4.0), 0 (V3.2, unused).
  std::vector<int> compress_ratios;
  /// V4.1 only: the sharing topology after defaults.
  std::vector<std::int64_t> kv_source_layer_ids;
  std::vector<std::int64_t> index_source_layer_ids;
  std::int64_t candidate_source_layer_id = -1;  ///< -1: disabled / not applicable
  std::int64_t candidate_topk_blocks = 0;
  std::int64_t candidate_block_size = 0;

  /// Defaults applied, spellings normalised, warnings: in the order they were found.
  std::vector<Finding> findings;

  /// What the checkpoint's tensors follow from (weights.hpp).
  CheckpointFields checkpoint;

  std::int64_t total_layers() const { return num_hidden_layers + num_draft_layers; }
};

/// The draft (MTP / DSpark) layers a checkpoint holds: when `compress_ratios` (or
/// `compress_rates`) as written has more entries than the backbone,
/// every entry past `num_hidden_layers` is a draft layer (V4-Flash-0731 writes 46 entries for 43
/// layers and holds 3 DSpark stages although its num_nextn_predict_layers says 1); otherwise
/// num_nextn_predict_layers. `ratio_entries` < 0: no list written. The reader sets
/// ModelConfig::num_draft_layers with it; docs/config.md.
std::int64_t draft_layer_count(std::int64_t num_hidden_layers, std::int64_t num_nextn_predict_layers,
                               std::int64_t ratio_entries);

/// Whether the config's draft layers are DSpark stages (V4.1's, and V4.0 re-releases that carry
/// dspark_block_size, such as V4-Flash-0731) rather than MTP stages; draft_method() of rules.hpp.
bool dspark_drafts(const ModelConfig& cfg);

/// Where load_config() looks for a model that is not a path on disk.
struct ModelSourceOptions {
  /// --revision: a branch, tag, pr/N or commit hash of a repo id or a cache repository (refs/<revision>).
  std::optional<std::string> revision;
  /// vLLM's --download-dir: the Hugging Face hub cache to search instead of the environment's.
  std::optional<std::string> download_dir;
  /// The environment that places the cache; unset: hf_env_from_process().
  std::optional<HfEnv> env;
  /// vLLM's --hf-overrides: a JSON object merged into config.json before it is read (objects
  /// merge key by key, any other value replaces).
  std::optional<std::string> hf_overrides;
};

/// What follows the file in an invalid-config message about a value --hf-overrides set
/// ("config.json (with --hf-overrides): /sliding_window: ..."): the file does not hold that value.
inline constexpr std::string_view kHfOverridesMark = " (with --hf-overrides)";

/// Reads CONFIG (a config.json or a directory holding one). Throws Error(invalid_config) with a
/// message naming the file, the JSON path, the bad value and the rule. load_config(path, {}).
ModelConfig load_config(const std::string& path);

/// Reads CONFIG: a path that exists is read as by load_config(path) (with opts.revision, a cache
/// repository models--ORG--NAME resolves through refs/<revision> instead of refs/main; any other
/// path with a revision is Error(usage)); a path that does not exist and reads as a repo id
/// ORG/NAME (looks_like_repo_id(), not ending in ".json") is resolved through the local Hugging
/// Face cache (resolve_hf_repo(); nothing is downloaded) and its snapshot read. The hf_* fields
/// of the result say what was resolved.
ModelConfig load_config(const std::string& path, const ModelSourceOptions& opts);

/// Parses config text already in memory. `source` names it in messages. `hf_overrides` (a JSON
/// object) is merged over it first; a value that is not a JSON object is Error(usage) naming
/// --hf-overrides.
ModelConfig parse_config(std::string_view text, const std::string& source,
                         const std::optional<std::string>& hf_overrides = std::nullopt);

struct InputFileRules;
/// How load_config() reads a config.json (read_input_file(): at most ConfigLimits::max_file_bytes).
const InputFileRules& config_file_rules();

}  // namespace mlaplan

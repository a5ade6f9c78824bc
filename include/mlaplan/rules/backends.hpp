#pragma once
// The attention backends vLLM can select for DeepSeek's sparse-MLA families, as data: one entry per
// backend (or attention class where one vLLM name runs different classes per arch), with the
// compute capabilities, kv-cache dtypes and what each becomes, row formats, kernel block sizes,
// head paddings and where vLLM defines it; vLLM's default choice per arch and the meaning of its
// --attention-backend values. The rules that refuse a combination live in rules.cpp and read this
// table; docs/rules.md is the same table for people, with the vLLM file of every fact.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/model/config.hpp"
#include "mlaplan/hardware/target.hpp"

namespace mlaplan {

/// One entry of the catalogue.
enum class BackendId {
  flashmla_sparse_dsv41,        ///< FLASHMLA_SPARSE_DSV41, split-KV FlashMLA with tile plans (V4.1)
  flashmla_sparse_dsv41_fused,  ///< FLASHMLA_SPARSE_DSV41 with attention_config.dsv4_fused_attention (V4.1, SM100)
  flashinfer_mla_sparse_dsv41,  ///< FLASHINFER_MLA_SPARSE_DSV41 on SM10x: TRTLLM-gen, plain rows (V4.1)
  flashinfer_mla_sparse_sm120,  ///< FLASHINFER_MLA_SPARSE_DSV41 / _DSV4 on SM12x: the SM120 class (V4, V4.1)
  flashmla_sparse_dsv4,         ///< FLASHMLA_SPARSE_DSV4 (V4.0)
  flashmla_sparse,              ///< FLASHMLA_SPARSE, vLLM's older FlashMLA sparse backend (V3.2)
  flashmla_mega_attn_dsv41,     ///< FLASHMLA_MEGA_ATTN_DSV41, FlashMLA's mega-attention kernel (V4.1, SM100; vLLM 0.31)
  triton_mla_sparse_dsv41,      ///< TRITON_MLA_SPARSE_DSV41, opt-in native-head Triton (V4.1, SM90; vLLM 0.31)
};
inline constexpr std::size_t kBackendCount = 8;

/// The kv-cache layout a backend stores after resolving --kv-cache-dtype.
enum class KvCacheDtype {
  fp8_ds_mla,    ///< 584-byte rows (V4/V4.1), 656-byte rows (V3.2)
  nvfp4_ds_mla,  ///< V4.1: 528-byte window rows, 288-byte compressed rows (FlashMLA fused, SM100)
  bfloat16,      ///< plain 1,024-byte bf16 rows (FlashInfer SM10x)
  fp8_e4m3,      ///< plain 512-byte e4m3 rows with one per-tensor scale (FlashInfer SM10x)
};
/// "fp8_ds_mla", "nvfp4_ds_mla", "bfloat16", "fp8_e4m3"
std::string_view to_string(KvCacheDtype d);

/// What one --kv-cache-dtype value does on one backend.
struct KvDtypeRule {
  std::string_view value;               ///< as given: "auto", "fp8", ...
  std::optional<KvCacheDtype> becomes;  ///< nothing: refused
  std::string_view refusal;             ///< vLLM's text when refused ("{d}" stands for the value)
  int only_cc_major = 0;                ///< accepted on this compute capability major only (0: any)
};

/// One backend.
struct BackendInfo {
  BackendId id;
  std::string_view key;              ///< stable id in output: "flashmla_sparse_dsv41_fused"
  std::string_view vllm_name;        ///< --attention-backend value (vLLM's enum name)
  std::string_view variant;          ///< what tells two entries of one name apart ("" when one)
  std::string_view attention_class;  ///< vLLM's attention class
  std::string_view source;           ///< the vLLM file it is read from
  std::vector<Family> families;
  std::vector<int> cc_majors;               ///< compute capability majors it runs on
  std::vector<KvDtypeRule> kv_dtypes;       ///< every value vLLM's --kv-cache-dtype takes, accepted or refused
  std::vector<std::int64_t> head_paddings;  ///< kernel head counts, ascending (local heads pad up)
  std::string_view head_refusal;            ///< vLLM's text for more local heads than the largest ("{n}": heads)
  std::string_view decode_path;             ///< for people: what runs a decode step
  bool tile_plans = false;                  ///< decode runs FlashMLA's split-KV kernel with tile-scheduler plans
  /// The kernel runs exactly the head_paddings counts, unpadded: other local head counts are
  /// refused (head_refusal) instead of padded up.
  bool exact_heads = false;
  /// The first modelled vLLM release whose selector takes the name ("" for every modelled one);
  /// BackendReleaseRules says whether the release in use has it.
  std::string_view first_release;
};

/// The catalogue, in BackendId order.
std::span<const BackendInfo> backend_catalogue();
const BackendInfo& backend_info(BackendId id);
/// "FLASHMLA_SPARSE_DSV41 (fused)" / "FLASHINFER_MLA_SPARSE_DSV41 (SM120 class)" / "FLASHMLA_SPARSE_DSV4";
/// with `family` deepseek_v4 the SM120 class is vLLM's FLASHINFER_MLA_SPARSE_DSV4.
std::string backend_title(BackendId id, std::optional<Family> family = std::nullopt);
/// vLLM's --attention-backend name of the entry for `family` (the SM120 class is
/// FLASHINFER_MLA_SPARSE_DSV4 for V4.0, FLASHINFER_MLA_SPARSE_DSV41 for V4.1).
std::string_view backend_vllm_name(BackendId id, std::optional<Family> family = std::nullopt);
/// The entry of `key` (BackendInfo::key), or nothing.
std::optional<BackendId> parse_backend_key(std::string_view key);

/// --kv-cache-dtype values vLLM accepts on its command line (cache_config's CacheDType) that these
/// backends take or refuse: auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2, fp8_ds_mla, nvfp4_ds_mla.
std::span<const std::string_view> kv_cache_dtype_values();
/// Error(usage) naming --kv-cache-dtype, the value, the values and the nearest one unless `value`
/// is one of kv_cache_dtype_values() (exact or differing in case: then the canonical spelling).
std::string canonical_kv_cache_dtype(std::string_view value);
/// What `value` (canonical) does on `backend` on compute capability major `cc_major`: the layout,
/// or the refusal with {d} filled in. Error(internal) for a value outside kv_cache_dtype_values().
struct KvResolution {
  std::optional<KvCacheDtype> layout;
  std::string refusal;
};
KvResolution resolve_kv_cache_dtype(BackendId backend, std::string_view value, int cc_major);

/// The head count the backend's kernel runs for `local_heads` query heads per rank: the smallest
/// head_paddings entry >= local_heads; nothing above the largest (or for local_heads < 1).
std::optional<std::int64_t> padded_heads(BackendId backend, std::int64_t local_heads);

/// Kernel block sizes (uncompressed tokens per page of the global caches) the backend accepts for
/// `family` on `cc`; for the SM120 class the pages hold kSm120PageStates states and the block of a
/// ratio-r cache is kSm120PageStates x r (see global_block_tokens).
std::vector<std::int64_t> backend_block_sizes(BackendId backend, Family family, const ComputeCapability& cc);
inline constexpr std::int64_t kSm120PageStates = 64;
/// Rows per page the backend fixes for every cache (the SM120 class: 64), 0 when pages follow the
/// block size.
std::int64_t fixed_page_states(BackendId backend, Family family);
/// Window-cache tokens per page: V4.1 32 (the SM120 class: 64), V4.0 64, V3.2 0 (no window).
std::int64_t backend_window_block(BackendId backend, Family family);

/// Every --attention-backend value mla-plan knows (with the ones vLLM refuses for a family, and
/// the ones only some releases have: BackendReleaseRules).
std::span<const std::string_view> attention_backend_values();

/// The facts of the vLLM release in use that change the backend choice (engine/vllm/release.hpp's
/// VllmRelease carries them; the rules take this copy so they need no engine header). The
/// defaults are the releases before 0.31: no FLASHMLA_MEGA_ATTN_DSV41, no TRITON_MLA_SPARSE_DSV41.
struct BackendReleaseRules {
  /// vLLM 0.31's V4.1 selector: FLASHMLA_MEGA_ATTN_DSV41 is a name and the SM100 default where
  /// it is available (else split-KV FlashMLA; the selector has no fused FlashMLA class).
  bool v41_mega_attention_default = false;
  /// TRITON_MLA_SPARSE_DSV41 (SM90, 8 or 16 local heads, opt-in) is a name.
  bool v41_triton_sm90 = false;
  /// vLLM >= 0.28.0's get_batch_defaults (vllm/engine/arg_utils.py): a tier for GPUs of at least
  /// 160 GiB whose OpenAI-server max_num_batched_tokens is 16384 (8192 on the 70 GiB tier).
  bool batch_tier_160gib = false;
  std::string_view version;  ///< "0.31.0", for messages only ("" when not known)
};
/// Whether `release` has the --attention-backend value `name` (upper case).
bool release_has_backend_name(std::string_view name, const BackendReleaseRules& release);

/// Why FLASHMLA_MEGA_ATTN_DSV41 declines the model at `tensor_parallel_size` on `cc` (its
/// is_available_for: compute capability 10.x; heads and o_groups divisible by TP; local heads a
/// multiple of 8 and exactly 8 per local wo_a group), "" when it is available: "TP16 on a
/// 64-head model leaves 4 heads per rank, ...".
std::string mega_attention_declines(const ModelConfig& cfg, const ComputeCapability& cc,
                                    std::int64_t tensor_parallel_size);
/// The kernel's heads per wo_a group (vLLM's WV_GROUP_SIZE).
inline constexpr std::int64_t kMegaAttentionGroupHeads = 8;

/// How the backend was chosen.
struct BackendChoice {
  BackendId id = BackendId::flashmla_sparse_dsv41;
  bool by_default = true;  ///< no --attention-backend: vLLM's default for the arch
  std::string how;         ///< for people: "vLLM's default on sm90" / "--attention-backend X on sm120"
  /// When vLLM refuses the request outright (a name that is not a backend of this family, a
  /// compute capability no backend of the family supports): its message, and the fix. `id` is then
  /// the closest entry, for a lenient plan.
  std::string refusal;
  std::string refusal_id;  ///< the finding id of the refusal: backend.attention_backend / backend.arch
  std::string fix;
  /// The fused FlashMLA path was asked for or resolved (attention_config.dsv4_fused_attention):
  /// the reason it is off when it is ("" when on or not applicable).
  std::string fused_off_reason;
  /// vLLM 0.31's default asked FLASHMLA_MEGA_ATTN_DSV41 first and it declined: why
  /// (mega_attention_declines()); "" otherwise.
  std::string mega_declined;
};

/// --dsv4-fused-attention: vLLM's attention_config.dsv4_fused_attention (None: auto).
enum class FusedAttention { auto_, on, off };

/// vLLM's choice (vllm/models/deepseek_v4_1/nvidia/model.py _select_dsv4_attn_cls, and the V4.0 / V3.2
/// backends' capability checks): the SM120 class on 12.x by default, FlashMLA elsewhere, fused on
/// SM100 when attention_config.dsv4_fused_attention allows it and the kernel has the model's
/// shape (8 heads per o_group, a FlashMLA kv layout). With `release`'s 0.31 selector, V4.1 on
/// 10.x defaults to FLASHMLA_MEGA_ATTN_DSV41 where it is available at `tensor_parallel_size`,
/// else to split-KV FlashMLA. `attention_backend` is vLLM's spelling (case-insensitive); an
/// unknown value, or one `release` does not have, is Error(usage) listing the values and the
/// nearest.
BackendChoice choose_backend(const ModelConfig& cfg, const Target& target,
                             const std::optional<std::string>& attention_backend, FusedAttention fused,
                             std::string_view kv_cache_dtype, std::int64_t tensor_parallel_size = 1,
                             const BackendReleaseRules& release = {});

}  // namespace mlaplan

// The modelled vLLM releases. Facts and sources: docs/vllm-releases.md (from vLLM's source, its
// pull requests and users' start-up logs; a row's `unpinned` says what was carried over).

#include "mlaplan/engine/vllm/release.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <vector>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/suggest.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan {
namespace {

using G = KvPlannerGeneration;

// Columns: version, released, default utilization, CUDA-graph profiling, async default, async off
// with PP, V2 model runner for DeepSeek's MoE models, planner, planner pinned, reserve counts batches, merged KV line, loading line says
// "memory", V4.1, V4.1 mega attention default on SM100, V4.1 Triton SM90, sources, unpinned.
constexpr std::string_view kSrc025 =
    "v0.25.0 start-up log (2 x RTX PRO 6000, V4-Flash TP 2): packed-bucket planner reproduced to the token, two "
    "KV lines; vllm/v1/core/kv_cache_utils.py _get_kv_cache_config_packed; vllm/config/cache.py (0.92 quoted for "
    "0.25.0)";
constexpr std::string_view kSrc030 =
    "v0.30.0 start-up log reproduced by vllm/v1/core/kv_cache_planning.py _get_packed_kv_cache_groups; "
    "vllm/config/cache.py line 101 (0.92) at v0.30.0; vllm/v1/kv_cache_interface.py (R with max_concurrent_batches); "
    "recipes: DeepSeek V4.1 needs >= 0.30.0";
constexpr std::string_view kSrc031 =
    "vllm/models/deepseek_v41/nvidia/model.py _select_dsv4_attn_cls (FLASHMLA_MEGA_ATTN_DSV41 first on 10.x, "
    "TRITON_MLA_SPARSE_DSV41 by name); flash_mla_mega_attn.py; triton_sparse.py; FlashInfer 0.7.0.post1 pin";

constexpr std::array<VllmRelease, 9> kReleases{{
    {"0.25.0", "early July 2026", 0.92, true, true, false, false, G::packed_buckets, true, false, false, true, false,
     false, false, kSrc025, "the 0.92 default is quoted by downstream images, not read at the tag"},
    {"0.25.1", "2026-07-13/15", 0.92, true, true, false, false, G::packed_buckets, true, false, false, true, false,
     false, false, kSrc025, "two bug fixes on 0.25.0; everything carried over from 0.25.0"},
    {"0.26.0", "by 2026-07-29", 0.92, true, true, false, false, G::packed_buckets, false, false, false, true, false,
     false, false, kSrc025,
     "the KV planner generation is not pinned (0.25's assumed, 0.30's computed beside it); the two-line KV output "
     "carried over from 0.25"},
    {"0.27.0", "by 2026-08-11", 0.92, true, true, false, false, G::packed_buckets, false, false, false, true, false,
     false, false, kSrc025,
     "the KV planner generation is not pinned (0.25's assumed, 0.30's computed beside it); 0.92 quoted for 0.27.1"},
    {"0.27.1", "by 2026-08-13", 0.92, true, true, false, false, G::packed_buckets, false, false, false, true, false,
     false, false, kSrc025,
     "the KV planner generation is not pinned (0.25's assumed, 0.30's computed beside it); 0.92 quoted for 0.27.1"},
    {"0.28.0", "by 2026-08-26", 0.92, true, true, false, false, G::packed_buckets, false, false, false, true, false,
     false, false, kSrc025,
     "the KV planner generation is not pinned (0.25's assumed, 0.30's computed beside it; a 0.28.1rc1 build came "
     "close to 0.30's)"},
    {"0.29.0", "by 2026-09-09", 0.92, true, true, false, true, G::generic_packed, false, true, true, true, false, false,
     false, kSrc030,
     "the KV planner generation is not pinned (0.30's assumed, 0.25's computed beside it); the one-line KV output, "
     "the loading line and the V2 model runner default (vLLM PR #53183, in 0.29 or 0.30) carried back from 0.30"},
    {"0.30.0", "2026-09-22", 0.92, true, true, false, true, G::generic_packed, true, true, true, true, true, false,
     false, kSrc030, "whether the fused FlashMLA path is on by default on SM100 is not pinned"},
    {"0.31.0", "2026-10-05", 0.92, true, true, false, true, G::generic_packed, true, true, true, true, true, true, true,
     kSrc031,
     "no KV planner or utilization change found after 0.30 (carried over); the first release whose V4.1 selector "
     "makes FLASHMLA_MEGA_ATTN_DSV41 the SM100 default and has TRITON_MLA_SPARSE_DSV41 (vLLM after 0.30, PR #56935) "
     "is not pinned: 0.31.0 is assumed"},
}};

bool parse_part(std::string_view s, int& out) {
  if (s.empty() || s.size() > 4) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

/// A modelled release's version as numbers: "0.28.0" -> {0, 28, 0}.
std::array<int, 3> release_parts(std::string_view v) {
  std::array<int, 3> have = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    const auto dot = v.find('.');
    parse_part(v.substr(0, dot), have[static_cast<std::size_t>(i)]);
    v.remove_prefix(dot == std::string_view::npos ? v.size() : dot + 1);
  }
  return have;
}

[[noreturn]] void refuse(std::string_view text, std::string_view why) {
  std::vector<std::string> names;
  for (const auto& r : kReleases) names.emplace_back(r.version);
  const std::string near = did_you_mean(suggest(std::string(text), names));
  throw_usage("--vllm-version: " + mlaplan::quoted(text) + " " + std::string(why) + (near.empty() ? "" : "; " + near) +
              ". Modelled releases: " + vllm_release_list() + " (X.Y picks the newest patch of X.Y)");
}

}  // namespace

std::string_view kv_planner_title(KvPlannerGeneration g) {
  switch (g) {
    case KvPlannerGeneration::packed_buckets: return "packed buckets (kv_cache_utils.py, the v0.25 generation)";
    case KvPlannerGeneration::generic_packed:
      return "packed KV-cache groups (kv_cache_planning.py, the v0.30 generation)";
  }
  return "?";
}

std::span<const VllmRelease> vllm_releases() { return kReleases; }

const VllmRelease& newest_vllm_release() { return kReleases.back(); }

BackendReleaseRules backend_release_rules(const VllmRelease& release) {
  BackendReleaseRules r;
  r.v41_mega_attention_default = release.v41_mega_attention_default;
  r.v41_triton_sm90 = release.v41_triton_sm90;
  // The >= 160 GiB tier of get_batch_defaults is in v0.28.0's arg_utils.py and not in v0.27.0's
  // (vllm-project/vllm at tags v0.27.0 / v0.28.0, "for GPUs like B200/B300 with >= 160GB memory,
  // use the largest defaults"); every modelled release from 0.28.0 on has it.
  const auto parts = release_parts(release.version);
  r.batch_tier_160gib = parts[0] > 0 || parts[1] >= 28;
  r.version = release.version;
  return r;
}

std::string vllm_release_list() {
  std::string s;
  for (const auto& r : kReleases) {
    if (!s.empty()) s += ", ";
    s += r.version;
  }
  return s;
}

const VllmRelease& find_vllm_release(std::string_view text) {
  std::string_view s = text;
  if (!s.empty() && (s.front() == 'v' || s.front() == 'V')) s.remove_prefix(1);
  std::vector<std::string_view> parts;
  while (true) {
    const auto dot = s.find('.');
    parts.push_back(s.substr(0, dot));
    if (dot == std::string_view::npos) break;
    s.remove_prefix(dot + 1);
  }
  if (parts.size() < 2 || parts.size() > 3) refuse(text, "is not a version X.Y or X.Y.Z");
  int want[3] = {0, 0, -1};
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (!parse_part(parts[i], want[i])) refuse(text, "is not a version X.Y or X.Y.Z");
  }
  const VllmRelease* best = nullptr;
  for (const auto& r : kReleases) {
    const auto have = release_parts(r.version);
    if (have[0] != want[0] || have[1] != want[1]) continue;
    if (want[2] >= 0 && have[2] != want[2]) continue;
    best = &r;  // oldest first: the last match is the newest patch
  }
  if (best == nullptr) refuse(text, "is not a modelled vLLM release");
  return *best;
}

const VllmRelease& vllm_release_or_newest(std::string_view text) {
  return text.empty() ? newest_vllm_release() : find_vllm_release(text);
}

}  // namespace mlaplan

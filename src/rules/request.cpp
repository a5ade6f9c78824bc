#include "mlaplan/rules/request.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "mlaplan/base/suggest.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan {

std::string_view to_string(IndexerCacheDtype d) {
  switch (d) {
    case IndexerCacheDtype::fp8: return "fp8";
    case IndexerCacheDtype::fp4: return "fp4";
  }
  return "?";
}

KvCacheDtype parse_kv_cache_dtype(std::string_view value) {
  // vLLM's values, matched ignoring case as plan's --kv-cache-dtype is (canonical_kv_cache_dtype()).
  std::string v(value);
  for (auto& c : v) c = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  if (v == "auto" || v == "fp8" || v == "fp8_ds_mla") return KvCacheDtype::fp8_ds_mla;
  if (v == "nvfp4_ds_mla") return KvCacheDtype::nvfp4_ds_mla;
  std::string msg = "--kv-cache-dtype: " + mlaplan::quoted(value) +
                    " is not a kv-cache dtype of the sparse-MLA backend; supported: auto, fp8, fp8_ds_mla, "
                    "nvfp4_ds_mla";
  if (v == "bfloat16" || v == "fp8_e5m2" || v == "fp8_e4m3" || v == "float16") {
    msg += " (FlashMLA doesn't support " + v + ")";
  } else {
    msg += did_you_mean_suffix(value, {"auto", "fp8", "fp8_ds_mla", "nvfp4_ds_mla"});
  }
  throw_usage(msg);
}

IndexerCacheDtype parse_indexer_cache_dtype(std::string_view value) {
  if (value == "fp8") return IndexerCacheDtype::fp8;
  if (value == "fp4") return IndexerCacheDtype::fp4;
  throw_usage("--indexer-cache-dtype: " + mlaplan::quoted(value) +
              " is not an indexer-cache dtype; supported: fp8, fp4" + did_you_mean_suffix(value, {"fp8", "fp4"}));
}

bool vllm_large_gpu(const Target& target) {
  std::string who = target.id + " " + target.name;
  std::transform(who.begin(), who.end(), who.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return target.memory_bytes >= (std::int64_t{70} << 30) && who.find("a100") == std::string::npos;
}

bool vllm_160gib_gpu(const Target& target) {
  const std::int64_t total = target.runtime_memory_bytes > 0 ? target.runtime_memory_bytes : target.memory_bytes;
  return total >= (std::int64_t{160} << 30);
}

std::int64_t default_in_flight_tokens(const Target& target, const BackendReleaseRules& release) {
  if (release.batch_tier_160gib && vllm_160gib_gpu(target)) return 16384;
  return vllm_large_gpu(target) ? 8192 : 2048;
}

std::optional<std::int64_t> padded_query_heads(std::int64_t local_heads) {
  if (local_heads < 1 || local_heads > 128) return std::nullopt;
  return local_heads <= 64 ? 64 : 128;
}

std::vector<std::int64_t> pipeline_partition(std::int64_t num_layers, std::int64_t pp) {
  if (pp < 1 || pp > num_layers) {
    throw_internal("pipeline_partition(" + std::to_string(num_layers) + ", " + std::to_string(pp) + ")");
  }
  std::vector<std::int64_t> parts(static_cast<std::size_t>(pp), num_layers / pp);
  const std::int64_t rem = num_layers % pp;
  for (std::int64_t i = 2; i < rem + 2; ++i) parts[static_cast<std::size_t>(pp - i)] += 1;
  return parts;
}

void throw_on_error(const std::vector<LayoutCheck>& checks) {
  for (const auto& c : checks) {
    if (c.finding.severity == Severity::error) throw Error(c.kind, c.finding.message);
  }
}

std::string_view to_string(EngramPlacement p) {
  switch (p) {
    case EngramPlacement::gpu: return "gpu";
    case EngramPlacement::offload: return "offload";
  }
  return "?";
}

std::int64_t ParallelLayout::gpus() const {
  return checked_mul(checked_mul(tensor_parallel_size, data_parallel_size, "GPUs of the layout", ErrorKind::usage),
                     pipeline_parallel_size, "GPUs of the layout", ErrorKind::usage);
}

std::int64_t ParallelLayout::expert_parallel_size() const {
  if (!enable_expert_parallel) return 1;
  return checked_mul(tensor_parallel_size, data_parallel_size, "expert-parallel size", ErrorKind::usage);
}

}  // namespace mlaplan

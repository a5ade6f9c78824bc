// SGLang's DeepSeek V4 pool-configurator generations (sglang.hpp), each with where its rules were
// read. docs/sglang.md, "Generations".
#include <algorithm>
#include <array>
#include <cctype>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/suggest.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/engine/sglang/sglang.hpp"

namespace mlaplan {

namespace {

// clang-format off
constexpr std::array<SglangGeneration, 3> kGenerations{{
    {"G1", "builds of about May 2026",
     "a May-2026-shaped python/sglang/srt/model_executor/pool_configurator.py; reproduces the 2026-05-15 V4-Flash-Base "
     "H20 log (bytes_per_full_token=15955.85)",
     /*layers_include_draft=*/true, /*c128_state_fixed=*/false, /*owners_and_cap_mode=*/false,
     /*spec_scales_budget=*/true, /*prints_memory_profiling=*/true, "DSv4", /*supports_v41=*/false,
     /*asserts_ring_draft_tokens=*/false},
    {"G2", "builds of about July to September 2026",
     "pool_configurator.py @003fca80 (DSV4PoolConfigurator: the PP stage's compress_ratios, the c128 state a fixed "
     "term, bytes per full token x (L+1)/L with speculative decoding)",
     false, true, false, false, true, "DSV4", false, true},
    {"G3", "builds of autumn 2026 (V4.1-aware)",
     "the newest pool_configurator.py read (collect_sources_by_ratio owners, 576-byte page padding, cap-mode SWA "
     "sizing with prefix tails, the ratio-2 state of V4.1)",
     false, true, true, false, false, "DSV4", true, true},
}};
// clang-format on

std::string normalized(std::string_view text) {
  std::string s;
  for (char c : text) s.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  if (s.rfind("SGLANG@", 0) == 0) s = s.substr(7);
  return s;
}

}  // namespace

std::span<const SglangGeneration> sglang_generations() { return kGenerations; }

const SglangGeneration& newest_sglang_generation() { return kGenerations.back(); }

std::string sglang_generation_list() {
  std::string out;
  for (const auto& g : kGenerations) {
    if (!out.empty()) out += ", ";
    out += g.id;
  }
  return out;
}

const SglangGeneration& find_sglang_generation(std::string_view text) {
  if (text.empty()) return newest_sglang_generation();
  const std::string want = normalized(text);
  for (const auto& g : kGenerations) {
    if (want == g.id) return g;
  }
  throw_usage("--sglang-version: " + quoted(text) +
              " is not a modelled SGLang generation; allowed: " + sglang_generation_list() +
              " (or sglang@G3); SGLang's release numbers do not name the configurator's rules, see docs/sglang.md");
}

}  // namespace mlaplan

#pragma once
// The one table of colours and names for families, layer types and cache kinds. The report (SVG, HTML) and
// the Markdown summary take type names, meanings and colours from here, so every output says
// "c2a" for the same thing and draws it in the same colour. Colours follow the Okabe-Ito
// colour-blind-safe set; `ink` is the text colour that reads on `fill`.

#include <array>
#include <string>
#include <string_view>

#include "mlaplan/cache/layout.hpp"
#include "mlaplan/model/topology.hpp"

namespace mlaplan::cli {

/// The family as the outputs title it: "DeepSeek V4.1", "DeepSeek V4.0", "DeepSeek V3.2".
inline std::string family_title(Family f) {
  switch (f) {
    case Family::deepseek_v41: return "DeepSeek V4.1";
    case Family::deepseek_v4: return "DeepSeek V4.0";
    case Family::deepseek_v32: return "DeepSeek V3.2";
  }
  return "?";
}

struct TypeStyle {
  LayerType type;
  std::string_view fill;
  std::string_view ink;
  std::string_view meaning;  ///< what a layer of this type attends to
};

inline constexpr std::array<TypeStyle, 6> kTypeStyles{{
    {LayerType::swaonly, "#c9d1d9", "#1f2328", "window only"},
    {LayerType::c1a, "#0072b2", "#ffffff", "window + full-length compressed cache (top-k)"},
    {LayerType::c2a, "#56b4e9", "#1f2328", "window + ratio-2 compressed cache (top-k)"},
    {LayerType::c4a, "#009e73", "#ffffff", "window + ratio-4 compressed cache (top-k, own indexer)"},
    {LayerType::c128a, "#e69f00", "#1f2328", "window + all ratio-128 compressed entries"},
    {LayerType::dsa, "#cc79a7", "#1f2328", "top-k sparse over the whole latent history"},
}};

inline const TypeStyle& type_style(LayerType t) {
  for (const auto& s : kTypeStyles) {
    if (s.type == t) return s;
  }
  return kTypeStyles[0];
}

/// The four things a request's KV cache is made of, as the memory picture splits it.
enum class CachePart { compressed, indexer, window, state };

struct CachePartStyle {
  CachePart part;
  std::string_view name;  ///< "compressed", "indexer", "window", "state"
  std::string_view fill;
  std::string_view meaning;  ///< short, for the legend
};

inline constexpr std::array<CachePartStyle, 4> kCachePartStyles{{
    {CachePart::compressed, "compressed", "#5e3c99", "KV / latent, global"},
    {CachePart::indexer, "indexer", "#d55e00", "indexer keys, global"},
    {CachePart::window, "window", "#8c8c8c", "sliding window, per request"},
    {CachePart::state, "state", "#a6761d", "compressor states, per request"},
}};

inline CachePart cache_part(CacheKind k) {
  switch (k) {
    case CacheKind::compressed: return CachePart::compressed;
    case CacheKind::indexer: return CachePart::indexer;
    case CacheKind::swa: return CachePart::window;
    case CacheKind::compressor_state: return CachePart::state;
  }
  return CachePart::compressed;
}

inline const CachePartStyle& cache_part_style(CachePart p) {
  for (const auto& s : kCachePartStyles) {
    if (s.part == p) return s;
  }
  return kCachePartStyles[0];
}

/// Severity colours of findings.
inline constexpr std::string_view kErrorColour = "#b42318";
inline constexpr std::string_view kWarningColour = "#b54708";
inline constexpr std::string_view kInfoColour = "#475467";
inline constexpr std::string_view kPassColour = "#067647";

}  // namespace mlaplan::cli

#pragma once
// The attention backend and its kernel shapes as words, shared by the text, Markdown and report
// outputs of `plan`, so every output names a shape's layer types, heads and widths the same way
// and says the same thing about the decode schedules a backend does or does not use.

#include <cstdint>
#include <string>

#include "mlaplan/rules/backends.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/plan/plan.hpp"
#include "mlaplan/rules/rules.hpp"

namespace mlaplan::cli {

using mlaplan::backend_refusal;  // include/mlaplan/plan/plan.hpp

/// The backend's title, with the refusal when vLLM refuses the request: "FLASHMLA_SPARSE_DSV41
/// (refused: backend.arch; the closest entry is shown)".
inline std::string backend_heading(const Plan& r) {
  if (!r.layout) return {};
  std::string s = backend_title(r.layout->backend, r.layout->family);
  if (const Finding* f = backend_refusal(r)) s += " (refused: " + f->id + "; the closest entry is shown)";
  return s;
}

/// "c2a, c1a", "swaonly (draft)".
inline std::string shape_layer_types(const KernelShape& s) {
  std::string o;
  for (std::size_t i = 0; i < s.layer_types.size(); ++i)
    o += (i ? ", " : "") + std::string(to_string(s.layer_types[i]));
  if (o.empty()) o = "-";
  return s.draft ? o + " (draft)" : o;
}

/// Heads per rank and what the kernel runs: "8 -> 64", "8 -> none".
inline std::string shape_heads(const KernelShape& s) {
  return std::to_string(s.local_heads) + " -> " + (s.kernel_heads > 0 ? std::to_string(s.kernel_heads) : "none");
}

/// The index widths: "128", "128 + 512" (main + extra).
inline std::string shape_topk(const KernelShape& s) {
  return std::to_string(s.topk) + (s.extra_topk > 0 ? " + " + std::to_string(s.extra_topk) : "");
}

/// Rows per page of the main and extra caches: "32", "32 + 64".
inline std::string shape_page_rows(const KernelShape& s) {
  return std::to_string(s.page_rows) + (s.extra_page_rows > 0 ? " + " + std::to_string(s.extra_page_rows) : "");
}

/// Why a plan with a layout shows no FlashMLA tile plans, or what the plans it shows serve when
/// the backend does not decode with them ("" when the backend decodes with the plans shown).
inline std::string schedules_remark(const Plan& r) {
  if (!r.layout) return {};
  const BackendInfo& b = backend_info(r.layout->backend);
  const std::string title = backend_title(r.layout->backend, r.layout->family);
  if (b.tile_plans) {
    return r.schedules.empty() ? "no FlashMLA sparse decode kernel for this target and head count" : std::string();
  }
  if (r.schedules.empty() && r.layout->backend == BackendId::triton_mla_sparse_dsv41) {
    // Its metadata builder asks FlashMLA's scheduler for an empty plan; the Triton kernel splits
    // the keys itself. A FlashMLA plan of the same step would describe nothing it runs.
    return title + " takes no FlashMLA tile plan: its metadata builder asks for an empty one and its Triton " +
           "kernel splits the keys itself, so no FlashMLA plan describes its decode";
  }
  if (r.schedules.empty()) {
    return "the engine's backend plans its own work: " + title + " takes no FlashMLA tile plans";
  }
  return title + " decodes with its fused kernel, which needs no tile plan: these plans serve its split-KV fallback";
}

}  // namespace mlaplan::cli

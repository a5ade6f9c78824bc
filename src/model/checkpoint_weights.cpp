// Weights from the checkpoint's files: every tensor of the safetensors headers, placed in the
// part, layer and draft stage the contract (compute_weights) gives its name, or else the part
// the name patterns of kRules give it; and the differences between the files and the contract.
// One pass over the files' tensors with hashed look-ups: an expert tensor's name is matched to
// its contract group by writing "{e}" for the number after ".experts.". docs/weights.md
// "From files".

#include "mlaplan/model/checkpoint_weights.hpp"

#include <algorithm>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan {

namespace {

using P = WeightPart;

// ------------------------------------------------------------------------------------------
// Name patterns

enum class Match { prefix, contains, suffix };

/// One name pattern, applied to the name past its location ("model.", "layers.N.", "mtp.K.").
struct Rule {
  Match how;
  std::string_view pattern;
  WeightPart part;
  bool stage_only = false;  ///< only under "mtp.K." (a draft stage's own tensors)
};

/// First match wins. The order matters: an expert's "gate" or "norm" is still an expert's, an
/// indexer's compressor is the indexer's, "hc_head_fn" is mHC, not the head.
constexpr Rule kRules[] = {
    {Match::prefix, "experts.", P::routed_experts},
    {Match::contains, ".experts.", P::routed_experts},
    {Match::contains, "shared_experts.", P::shared_experts},
    {Match::contains, "indexer.", P::indexer},
    {Match::contains, "compressor.", P::compressor},
    {Match::contains, "engram", P::engram},
    {Match::prefix, "vision", P::vision},
    {Match::prefix, "visual", P::vision},
    {Match::contains, ".vision", P::vision},
    {Match::contains, ".visual", P::vision},
    {Match::prefix, "hc_", P::mhc},
    {Match::prefix, "embed", P::embedding},
    {Match::prefix, "head.", P::head},
    {Match::prefix, "lm_head.", P::head},
    {Match::prefix, "shared_head.head.", P::head},
    {Match::prefix, "shared_head.", P::mtp},
    {Match::prefix, "e_proj.", P::mtp},
    {Match::prefix, "h_proj.", P::mtp},
    {Match::prefix, "eh_proj.", P::mtp},
    {Match::prefix, "enorm.", P::mtp},
    {Match::prefix, "hnorm.", P::mtp},
    {Match::prefix, "norm.", P::mtp, true},
    {Match::prefix, "gate.", P::router},
    {Match::contains, ".gate.", P::router},
    {Match::contains, "tid2eid", P::router},
    {Match::suffix, "e_score_correction_bias", P::router},
    {Match::prefix, "mlp.", P::dense_ffn},
    {Match::prefix, "ffn.", P::dense_ffn},
    {Match::prefix, "attn.", P::attention},
    {Match::prefix, "self_attn.", P::attention},
    {Match::contains, "norm", P::norms},
};

/// Suffixes of a quantisation scale (V4 ".scale", V3's ".weight_scale_inv").
constexpr std::string_view kScaleSuffixes[] = {".scale", ".weight_scale_inv", ".weight_scale"};

bool matches(const Rule& r, std::string_view s) {
  switch (r.how) {
    case Match::prefix: return s.substr(0, r.pattern.size()) == r.pattern;
    case Match::contains: return s.find(r.pattern) != std::string_view::npos;
    case Match::suffix: return s.size() >= r.pattern.size() && s.substr(s.size() - r.pattern.size()) == r.pattern;
  }
  return false;
}

/// A decimal number of 1 to 18 digits at the start of `s` followed by '.', without a leading
/// zero (so that one index has one spelling): its value and length, or -1.
std::pair<std::int64_t, std::size_t> leading_index(std::string_view s) {
  std::size_t n = 0;
  std::int64_t v = 0;
  // At most 18 digits are accumulated (below 10^18: no overflow); a 19th digit rejects the name.
  while (n < s.size() && n < 18 && s[n] >= '0' && s[n] <= '9') v = v * 10 + (s[n++] - '0');
  if (n == 0 || n >= s.size() || s[n] != '.' || (n > 1 && s[0] == '0')) return {-1, 0};
  return {v, n};
}

/// The expert tensor `name` with "{e}" for the number after ".experts.", and that number; or
/// {"", -1} when the name has no such number.
std::pair<std::string, std::int64_t> expert_key(std::string_view name) {
  static constexpr std::string_view kExperts = ".experts.";
  const auto at = name.find(kExperts);
  if (at == std::string_view::npos) return {"", -1};
  const std::size_t from = at + kExperts.size();
  const auto [index, len] = leading_index(name.substr(from));
  if (index < 0) return {"", -1};
  std::string key;
  key.reserve(name.size() + 3);
  key.append(name.substr(0, from)).append("{e}").append(name.substr(from + len));
  return {std::move(key), index};
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::int64_t elements_of(const std::vector<std::int64_t>& shape) {
  std::int64_t e = 1;
  for (auto d : shape) e = checked_mul(e, d, "elements of a tensor");
  return e;
}

// ------------------------------------------------------------------------------------------
// Mismatches: all counted, the first `max` by name kept (a bounded buffer, pruned as it fills).

class MismatchList {
 public:
  explicit MismatchList(std::size_t max) : max_(max) {}
  void add(std::string tensor, std::string what, std::string contract, std::string files) {
    ++count_;
    if (max_ == 0) return;
    v_.push_back(WeightsMismatch{std::move(tensor), std::move(what), std::move(contract), std::move(files)});
    if (v_.size() >= 2 * max_ + 64) prune();
  }
  std::vector<WeightsMismatch> take() {
    prune();
    std::sort(v_.begin(), v_.end(), less);
    return std::move(v_);
  }
  std::int64_t count() const { return count_; }

 private:
  static bool less(const WeightsMismatch& a, const WeightsMismatch& b) {
    return std::tie(a.tensor, a.what, a.files) < std::tie(b.tensor, b.what, b.files);
  }
  void prune() {
    if (v_.size() <= max_) return;
    std::nth_element(v_.begin(), v_.begin() + static_cast<std::ptrdiff_t>(max_), v_.end(), less);
    v_.resize(max_);
  }
  std::size_t max_;
  std::vector<WeightsMismatch> v_;
  std::int64_t count_ = 0;
};

/// The contract's groups by name, and which of their tensors the files hold.
struct ContractIndex {
  const std::vector<TensorGroup>& groups;
  std::unordered_map<std::string_view, std::size_t> by_name;
  std::vector<std::int64_t> matched;    ///< tensors of each group found in the files
  std::vector<std::vector<bool>> seen;  ///< of a "{e}" group: which indices (filled when first hit)

  explicit ContractIndex(const std::vector<TensorGroup>& g) : groups(g), matched(g.size(), 0), seen(g.size()) {
    by_name.reserve(g.size() * 2);
    for (std::size_t i = 0; i < g.size(); ++i) by_name.emplace(g[i].name, i);
  }
  /// The group of the file tensor `name` (expert index `index` when it matched through "{e}").
  const TensorGroup* find(const std::string& name, const std::string& key, std::int64_t index, std::size_t& at) {
    if (!key.empty()) {
      const auto it = by_name.find(key);
      if (it != by_name.end() && index < groups[it->second].count) {
        at = it->second;
        auto& s = seen[at];
        if (s.empty()) s.assign(static_cast<std::size_t>(groups[at].count), false);
        if (s[static_cast<std::size_t>(index)]) return nullptr;  // cannot happen: names are unique
        s[static_cast<std::size_t>(index)] = true;
        ++matched[at];
        return &groups[at];
      }
    }
    const auto it = by_name.find(name);
    if (it == by_name.end() || groups[it->second].name.find("{e}") != std::string::npos || matched[it->second] > 0) {
      return nullptr;
    }
    at = it->second;
    ++matched[at];
    return &groups[at];
  }
};

void add_to(PartTotals& t, const TensorInfo& x) {
  t.bytes = checked_add(t.bytes, x.bytes, "checkpoint bytes");
  if (x.scale) t.scale_bytes = checked_add(t.scale_bytes, x.bytes, "checkpoint bytes");
  t.tensors = checked_add(t.tensors, 1, "checkpoint tensors");
  t.params = checked_add(t.params, x.params, "checkpoint parameters");
}

/// floor(a x m / c) for a >= 0, 0 <= m <= c, c > 0, without overflowing a x m.
std::int64_t scaled(std::int64_t a, std::int64_t m, std::int64_t c) {
  return checked_mul(a / c, m, "active parameters") + (a % c) * m / c;
}

std::string first_names(const std::vector<std::string>& names, std::int64_t count) {
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i) s += (i > 0 ? ", " : "") + quoted(names[i]);
  if (count > static_cast<std::int64_t>(names.size())) s += ", ...";
  return s;
}

}  // namespace

NameClass classify_tensor_name(std::string_view name, std::int64_t num_hidden_layers, std::int64_t num_draft_stages) {
  NameClass c;
  std::string_view rest = name;
  if (rest.substr(0, 6) == "model.") rest.remove_prefix(6);
  bool stage = false;
  // Draft stage k is layer num_hidden_layers + k, for k below num_draft_stages.
  const auto place = [&](std::int64_t layer) {
    c.layer = layer;
    c.draft = layer >= num_hidden_layers;
    c.unplaceable = c.draft && layer - num_hidden_layers >= std::max<std::int64_t>(num_draft_stages, 0);
  };
  if (rest.substr(0, 7) == "layers.") {
    const auto [i, len] = leading_index(rest.substr(7));
    if (i >= 0) {
      place(i);
      rest.remove_prefix(7 + len + 1);
    }
  } else if (rest.substr(0, 4) == "mtp.") {
    const auto [k, len] = leading_index(rest.substr(4));
    if (k >= 0) {
      place(num_hidden_layers > INT64_MAX - k ? INT64_MAX : num_hidden_layers + k);
      c.draft = stage = true;
      rest.remove_prefix(4 + len + 1);
    }
  }
  for (const Rule& r : kRules) {
    if (r.stage_only && !stage) continue;
    if (matches(r, rest)) {
      c.part = r.part;
      break;
    }
  }
  for (auto s : kScaleSuffixes) {
    if (name.size() >= s.size() && name.substr(name.size() - s.size()) == s) c.scale = true;
  }
  return c;
}

FileWeights weights_from_files(const ModelConfig& cfg, const CheckpointFiles& files, const WeightsReport& derived,
                               std::size_t max_mismatches) {
  FileWeights out;
  WeightsReport& r = out.report;
  r.known = true;
  r.listed = true;
  out.contract_bytes = derived.total_bytes();
  out.compared = derived.known;
  const std::int64_t n_layers = cfg.num_hidden_layers;
  const std::int64_t top_k = cfg.checkpoint.num_experts_per_tok;
  const std::int64_t n_experts = cfg.checkpoint.n_routed_experts;

  static const std::vector<TensorGroup> kNoGroups;
  ContractIndex contract(derived.known ? derived.groups : kNoGroups);
  MismatchList mism(max_mismatches);
  std::vector<std::string> unclassified;
  std::vector<std::string> odd_dtypes;
  std::int64_t odd_dtype_count = 0;

  struct Expert {
    std::int64_t params = 0;  ///< summed over the files' tensors of the key (main model)
    std::int64_t count = 0;
  };
  std::unordered_map<std::string, Expert> active_experts;
  // Regrouping: the files' tensors of one "{e}" key become one group when they are alike and
  // their indices are 0..count-1.
  struct Regroup {
    std::size_t first = 0;
    std::int64_t count = 0;
    std::int64_t max_index = -1;
    bool alike = true;
  };
  std::unordered_map<std::string, Regroup> regroups;
  std::vector<std::string> keys(files.tensors.size());  // of r.tensors[i]: its "{e}" key, or ""
  std::set<std::int64_t> draft_layers;
  const std::int64_t n_stages = std::max(derived.draft_stages, cfg.num_draft_layers);
  std::vector<std::string> unplaceable;

  r.tensors.reserve(files.tensors.size());
  for (std::size_t ti = 0; ti < files.tensors.size(); ++ti) {
    const CheckpointTensor& f = files.tensors[ti];
    auto [key, index] = expert_key(f.name);
    TensorInfo t;
    t.name = f.name;
    t.shape = f.shape;
    t.bytes = f.bytes;
    const auto dt = parse_weight_dtype(f.dtype);
    if (!dt) {
      if (odd_dtypes.size() < 3) odd_dtypes.push_back(f.name + " (" + printable(f.dtype, 16) + ")");
      ++odd_dtype_count;
    }
    t.dtype = dt.value_or(WeightDtype::U8);
    const std::int64_t elements = elements_of(f.shape);
    std::size_t at = 0;
    const TensorGroup* g = contract.find(f.name, key, index, at);
    if (g) {
      t.part = g->part;
      t.layer = g->layer;
      t.draft = g->draft;
      t.scale = g->scale;
      const bool same_dtype = dt && *dt == g->dtype;
      const std::int64_t g_elements = elements_of(g->shape);
      if (g->scale) {
        t.params = 0;
      } else if (same_dtype && elements == g_elements) {
        t.params = g->params;
      } else if (same_dtype && g_elements > 0) {
        t.params = checked_mul(elements, std::max<std::int64_t>(1, g->params / g_elements), "parameters of a tensor");
      } else {
        t.params = elements;
      }
      if (!same_dtype) mism.add(f.name, "dtype", std::string(to_string(g->dtype)), printable(f.dtype, 16));
      if (f.shape != g->shape) mism.add(f.name, "shape", shape_text(g->shape), shape_text(f.shape));
      if (f.bytes != g->bytes) mism.add(f.name, "bytes", std::to_string(g->bytes), std::to_string(f.bytes));
    } else {
      const NameClass c = classify_tensor_name(f.name, n_layers, n_stages);
      if (c.unplaceable) {
        // A layer the model does not have: no stage holds it, so it is not placed (or counted).
        ++out.unplaceable_tensors;
        out.unplaceable_bytes = checked_add(out.unplaceable_bytes, f.bytes, "checkpoint bytes");
        out.files_bytes = checked_add(out.files_bytes, f.bytes, "checkpoint bytes");
        if (unplaceable.size() < 3) unplaceable.push_back(f.name);
        if (out.compared) mism.add(f.name, "not_in_contract", "", printable(f.dtype, 16) + " " + shape_text(f.shape));
        continue;
      }
      t.part = c.part;
      t.layer = c.layer;
      t.draft = c.draft;
      t.scale = c.scale;
      // An I8 routed-expert weight is packed FP4, as in the contract: 2 parameters a byte.
      t.params = c.scale ? 0
                         : (t.dtype == WeightDtype::I8 && c.part == P::routed_experts
                                ? checked_mul(elements, 2, "parameters of a tensor")
                                : elements);
      ++out.pattern_classified;
      if (unclassified.size() < 5) unclassified.push_back(f.name);
      if (out.compared) mism.add(f.name, "not_in_contract", "", printable(f.dtype, 16) + " " + shape_text(f.shape));
    }
    add_to((t.draft ? r.draft_parts : r.main_parts)[static_cast<std::size_t>(t.part)], t);
    add_to(t.draft ? r.draft : r.main, t);
    out.files_bytes = checked_add(out.files_bytes, t.bytes, "checkpoint bytes");
    if (t.draft) draft_layers.insert(t.layer);
    if (!t.draft && t.part != P::embedding && t.part != P::engram) {
      if (t.part == P::routed_experts && index >= 0) {
        Expert& e = active_experts[key];
        e.params = checked_add(e.params, t.params, "active parameters");
        ++e.count;
      } else if (t.part == P::routed_experts && n_experts > 0) {
        // One tensor holding every expert: top_k / n_routed_experts of it is active.
        r.active_params =
            checked_add(r.active_params, scaled(t.params, std::min(top_k, n_experts), n_experts), "active parameters");
      } else {
        r.active_params = checked_add(r.active_params, t.params, "active parameters");
      }
    }
    if (index >= 0) {
      auto [it, fresh] = regroups.try_emplace(key);
      Regroup& rg = it->second;
      if (fresh) {
        rg.first = r.tensors.size();
      } else {
        const TensorInfo& a = r.tensors[rg.first];
        rg.alike = rg.alike && a.dtype == t.dtype && a.shape == t.shape && a.bytes == t.bytes && a.params == t.params &&
                   a.part == t.part && a.layer == t.layer && a.draft == t.draft && a.scale == t.scale;
      }
      ++rg.count;
      rg.max_index = std::max(rg.max_index, index);
      keys[r.tensors.size()] = std::move(key);
    }
    r.tensors.push_back(std::move(t));
  }
  for (const auto& [key, e] : active_experts) {
    const std::int64_t active = std::min(e.count, std::max<std::int64_t>(top_k, 0));
    r.active_params = checked_add(r.active_params, scaled(e.params, active, e.count), "active parameters");
  }
  r.draft_stages = static_cast<std::int64_t>(draft_layers.size());

  // Groups: one per tensor, but one per "{e}" key whose tensors are alike and numbered 0..n-1.
  for (std::size_t i = 0; i < r.tensors.size(); ++i) {
    const TensorInfo& t = r.tensors[i];
    std::string name = t.name;
    std::int64_t count = 1;
    if (!keys[i].empty()) {
      const Regroup& rg = regroups.at(keys[i]);
      if (rg.alike && rg.max_index + 1 == rg.count) {
        if (rg.first != i) continue;
        name = keys[i];
        count = rg.count;
      }
    }
    r.groups.push_back(
        TensorGroup{std::move(name), t.dtype, t.shape, t.bytes, t.params, t.part, t.layer, t.draft, t.scale, count});
  }
  // Main model first, then the draft stages (as compute_weights lists them).
  std::stable_partition(r.tensors.begin(), r.tensors.end(), [](const TensorInfo& t) { return !t.draft; });
  std::stable_partition(r.groups.begin(), r.groups.end(), [](const TensorGroup& g) { return !g.draft; });

  // Contract tensors the files lack.
  if (out.compared) {
    for (std::size_t gi = 0; gi < derived.groups.size(); ++gi) {
      const TensorGroup& g = derived.groups[gi];
      if (contract.matched[gi] >= g.count) continue;
      const std::string desc = std::string(to_string(g.dtype)) + " " + shape_text(g.shape);
      const auto brace = g.name.find("{e}");
      out.missing_contract_tensors += g.count - contract.matched[gi];
      if (contract.matched[gi] == 0) {
        // A group wholly missing is one mismatch, named with "{e}".
        mism.add(g.name, "missing_in_files", g.count > 1 ? std::to_string(g.count) + " x " + desc : desc, "");
        continue;
      }
      const auto& seen = contract.seen[gi];
      for (std::int64_t e = 0; e < g.count; ++e) {
        if (seen[static_cast<std::size_t>(e)]) continue;
        mism.add(g.name.substr(0, brace) + std::to_string(e) + g.name.substr(brace + 3), "missing_in_files", desc, "");
      }
    }
  }
  out.mismatch_count = mism.count();
  out.mismatches = mism.take();
  if (derived.known) {
    // What any whole checkpoint of this config holds at least: the main model's exact parts.
    for (std::size_t p = 0; p < kWeightPartCount; ++p) {
      if (!derived.main_parts[p].estimated) {
        out.contract_exact_main_bytes =
            checked_add(out.contract_exact_main_bytes, derived.main_parts[p].bytes, "checkpoint bytes");
      }
    }
    out.short_of_contract = r.main.bytes < out.contract_exact_main_bytes;
  }

  // Findings.
  r.findings.push_back(Finding{
      "weights.files_source", Severity::info,
      "bytes from " + std::to_string(files.files.size()) + " safetensors headers in " +
          quoted(files.dir, kQuotedPathMaxBytes) + ": " + std::to_string(files.tensors.size()) + " tensors, " +
          std::to_string(out.files_bytes) + " B (the config's contract: " + std::to_string(out.contract_bytes) + " B)",
      "", ""});
  if (!derived.known) {
    r.findings.push_back(Finding{"weights.no_contract", Severity::info,
                                 "the config's tensor contract is not known (" + printable(derived.reason, 200) +
                                     "): every tensor is placed by its name and the files are not compared with it",
                                 "", ""});
  }
  if (out.mismatch_count > 0) {
    std::string first;
    for (std::size_t i = 0; i < out.mismatches.size() && i < 3; ++i) {
      const auto& m = out.mismatches[i];
      first += (i > 0 ? "; " : "") + quoted(m.tensor) + " " + m.what;
      if (m.what == "dtype" || m.what == "shape" || m.what == "bytes") {
        first += " (contract " + m.contract + ", files " + m.files + ")";
      }
    }
    r.findings.push_back(Finding{"weights.mismatch", Severity::warning,
                                 std::to_string(out.mismatch_count) +
                                     " differences between the files and the tensors config.json describes: " + first +
                                     (out.mismatch_count > 3 ? "; ..." : "") + " (the files' bytes are used)",
                                 "", "check that config.json is the one of this checkpoint"});
  }
  if (out.pattern_classified > 0) {
    r.findings.push_back(Finding{"weights.unclassified", Severity::info,
                                 std::to_string(out.pattern_classified) +
                                     " tensors placed by their names only (not in the contract): " +
                                     first_names(unclassified, out.pattern_classified),
                                 "", ""});
  }
  if (odd_dtype_count > 0) {
    std::string s;
    for (std::size_t i = 0; i < odd_dtypes.size(); ++i) s += (i > 0 ? ", " : "") + odd_dtypes[i];
    r.findings.push_back(Finding{"weights.dtype", Severity::warning,
                                 std::to_string(odd_dtype_count) + " tensors of a dtype not known, taken as U8: " + s,
                                 "", ""});
  }
  if (out.unplaceable_tensors > 0) {
    r.findings.push_back(Finding{"weights.unplaceable", Severity::warning,
                                 std::to_string(out.unplaceable_tensors) + " tensors (" +
                                     std::to_string(out.unplaceable_bytes) + " B) name a layer past the model's " +
                                     std::to_string(n_layers) + " layers and " + std::to_string(n_stages) +
                                     " draft stages: " + first_names(unplaceable, out.unplaceable_tensors) +
                                     "; no GPU holds them, and they are left out of the weights",
                                 "", "check that config.json is the one of this checkpoint"});
  }
  if (!files.findings.empty()) {
    std::string s;
    for (std::size_t i = 0; i < files.findings.size(); ++i) s += (i > 0 ? "; " : "") + printable(files.findings[i]);
    r.findings.push_back(Finding{"weights.total_size", Severity::warning, s, "",
                                 "check model.safetensors.index.json: its total_size is not its shards' sum"});
  }
  if (files.hidden_files_skipped > 0) {
    r.findings.push_back(Finding{"weights.hidden_files", Severity::info,
                                 std::to_string(files.hidden_files_skipped) +
                                     " *.safetensors files whose names start with '.' (macOS \"._\" files) are "
                                     "skipped, as the engines' \"*.safetensors\" glob skips them",
                                 "", ""});
  }
  return out;
}

std::string FileWeights::shortfall_reason() const {
  if (!short_of_contract) return "";
  return "the files' main model holds " + std::to_string(report.main.bytes) + " B, less than the " +
         std::to_string(contract_exact_main_bytes) +
         " B config.json's contract has in the parts whose rules are exact" +
         (missing_contract_tensors > 0
              ? "; " + std::to_string(missing_contract_tensors) + " of the contract's tensors are not in the files"
              : std::string()) +
         " (or config.json is not this checkpoint's)";
}

}  // namespace mlaplan

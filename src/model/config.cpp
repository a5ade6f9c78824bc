// Reads a model config.json into mlaplan::ModelConfig. The only translation unit that parses JSON
// input. Rules: docs/config.md (from transformers' DeepSeek V4/V4.1 config classes, vLLM's
// DeepSeek V4/V4.1 model code and DeepSeek's released configs).

#include "mlaplan/model/config.hpp"
#include "mlaplan/model/safetensors.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/input_file.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan {

using json = nlohmann::json;

std::string_view to_string(Family f) {
  switch (f) {
    case Family::deepseek_v41: return "deepseek_v41";
    case Family::deepseek_v4: return "deepseek_v4";
    case Family::deepseek_v32: return "deepseek_v32";
  }
  return "?";
}

std::string_view to_string(Severity s) {
  switch (s) {
    case Severity::info: return "info";
    case Severity::warning: return "warning";
    case Severity::error: return "error";
  }
  return "?";
}

namespace {

constexpr std::string_view kSupportedFamilies = "deepseek_v41 (also deepseek_v41_text), deepseek_v4, deepseek_v32";

/// The structural default of a V4.1 schedule is quoted whole up to the released 43 entries.
constexpr std::size_t kScheduleMaxItems = 48;

/// "[1, 3, 5]": a list of a config in a message, bounded (join_bounded, kMessageMaxItems).
std::string join_ints(const std::vector<std::int64_t>& v, std::size_t max_items = kMessageMaxItems) {
  return "[" + join_bounded(v, ", ", max_items) + "]";
}

/// A short, printable description of a JSON value for messages ("the string \"2\"", "2.5", "null").
std::string describe(const json& v) {
  // At most 40 bytes, cut at a character; then made printable (json::dump escapes the C0
  // controls but leaves line separators, bidirectional controls and the like as they are).
  auto clip = [](std::string s) {
    if (s.size() > 40) {
      std::size_t cut = 37;
      while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
      s = s.substr(0, cut) + "...";
    }
    return printable(s);
  };
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    case json::value_t::string: return "the string " + clip(v.dump(-1, ' ', false, json::error_handler_t::replace));
    case json::value_t::array: return "an array of " + std::to_string(v.size()) + " entries";
    case json::value_t::object: return "an object";
    case json::value_t::binary: return "binary data";
    default: return clip(v.dump(-1, ' ', false, json::error_handler_t::replace));
  }
}

/// A key as a JSON pointer token (RFC 6901: ~ and / escaped), printable: a key from the input
/// may hold any bytes, and a pointer is printed in messages.
std::string escape_pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return printable(out);
}

/// Rejects nesting deeper than the limit before the parser sees it (a 100,000-deep file must not
/// reach recursive code).
void check_nesting(std::string_view text, const std::string& source) {
  if (const auto past = find_nesting_past(text, ConfigLimits::max_nesting_depth)) {
    throw_config(source + ": JSON nested deeper than " + std::to_string(ConfigLimits::max_nesting_depth) +
                 " levels (line " + std::to_string(past->line) + "); a model config is at most a few levels deep");
  }
}

/// Reads fields of one JSON object (the top level, or text_config) with the config's rules on
/// types, ranges, aliases and defaults. Every message names the file and the JSON pointer.
class Section {
 public:
  Section(const json& obj, std::string prefix, ModelConfig& cfg) : obj_(obj), prefix_(std::move(prefix)), cfg_(cfg) {}

  const std::string& prefix() const { return prefix_; }
  std::string ptr(std::string_view key) const { return prefix_ + "/" + escape_pointer_token(key); }

  [[noreturn]] void fail(const std::string& pointer, const std::string& message) const {
    // A value --hf-overrides set is not the file's: the message says so (error_json.cpp then
    // reports no line or value of the file for it).
    const bool overridden =
        std::any_of(cfg_.hf_overridden_pointers.begin(), cfg_.hf_overridden_pointers.end(),
                    [&](const std::string& o) { return pointer == o || pointer.rfind(o + "/", 0) == 0; });
    throw_config(printable(cfg_.file) + (overridden ? std::string(kHfOverridesMark) : std::string()) + ": " +
                 (pointer.empty() ? std::string("/") : pointer) + ": " + message);
  }

  void note(std::string id, Severity sev, std::string message, std::string pointer = {}) {
    cfg_.findings.push_back(Finding{std::move(id), sev, std::move(message), std::move(pointer), {}});
  }

  /// Finds `key` or one of its other spellings. Records which spelling was used; two spellings
  /// with different values are an error.
  struct Found {
    const json* value = nullptr;
    std::string key;
    std::string pointer;
  };
  Found find(std::string_view key, std::initializer_list<std::string_view> aliases = {}) {
    Found f;
    if (auto it = obj_.find(std::string(key)); it != obj_.end()) {
      f = {&*it, std::string(key), ptr(key)};
    }
    for (auto alias : aliases) {
      auto it = obj_.find(std::string(alias));
      if (it == obj_.end()) continue;
      if (f.value) {
        if (*f.value != *it) {
          fail(ptr(alias), std::string(alias) + " = " + describe(*it) + " disagrees with " + f.key + " = " +
                               describe(*f.value) + "; they are two spellings of one field");
        }
        continue;
      }
      f = {&*it, std::string(alias), ptr(alias)};
      note("config.normalised", Severity::info, "read " + std::string(alias) + " as " + std::string(key), ptr(alias));
    }
    return f;
  }

  std::int64_t as_int(const json& v, const std::string& pointer, std::string_view name, std::int64_t lo,
                      std::int64_t hi) const {
    if (v.is_number_unsigned()) {
      auto u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          static_cast<std::int64_t>(u) > hi || static_cast<std::int64_t>(u) < lo) {
        fail(pointer, std::string(name) + " = " + std::to_string(u) + " is out of range; allowed " +
                          std::to_string(lo) + ".." + std::to_string(hi));
      }
      return static_cast<std::int64_t>(u);
    }
    if (v.is_number_integer()) {
      auto i = v.get<std::int64_t>();
      if (i < lo || i > hi) {
        fail(pointer, std::string(name) + " = " + std::to_string(i) + " is out of range; allowed " +
                          std::to_string(lo) + ".." + std::to_string(hi));
      }
      return i;
    }
    fail(pointer, std::string(name) + " must be an integer, got " + describe(v));
  }

  /// An integer field; when absent, `fallback` is used and reported as a default.
  std::int64_t int_field(std::string_view key, std::initializer_list<std::string_view> aliases, std::int64_t lo,
                         std::int64_t hi, std::optional<std::int64_t> fallback, std::string_view why) {
    Found f = find(key, aliases);
    if (!f.value) {
      if (!fallback) {
        fail(ptr(key),
             "missing; " + std::string(key) + " is required for " + std::string(to_string(cfg_.family)) + " configs");
      }
      // How many layers and draft layers there are is structure, not a tuning value: a guess of it
      // is a warning (config.structural_default), every other default a note.
      const bool structural = key == "num_hidden_layers" || key == "num_nextn_predict_layers";
      note(structural ? "config.structural_default" : "config.default", structural ? Severity::warning : Severity::info,
           "assumed " + std::string(key) + " = " + std::to_string(*fallback) + ", " + std::string(why), ptr(key));
      return *fallback;
    }
    return as_int(*f.value, f.pointer, f.key, lo, hi);
  }

  /// An optional list of integers; nullopt when absent. `null` is a type error, not absence.
  std::optional<std::vector<std::int64_t>> int_list(const Found& f, std::int64_t lo, std::int64_t hi) {
    if (!f.value) return std::nullopt;
    if (!f.value->is_array()) fail(f.pointer, f.key + " must be a list of integers, got " + describe(*f.value));
    if (static_cast<std::int64_t>(f.value->size()) > ConfigLimits::max_list_entries) {
      fail(f.pointer, f.key + " has " + std::to_string(f.value->size()) + " entries; at most " +
                          std::to_string(ConfigLimits::max_list_entries) + " are accepted");
    }
    std::vector<std::int64_t> out;
    out.reserve(f.value->size());
    for (std::size_t i = 0; i < f.value->size(); ++i) {
      const std::string p = f.pointer + "/" + std::to_string(i);
      const json& e = (*f.value)[i];
      if (!e.is_number_integer()) {
        fail(p, f.key + "[" + std::to_string(i) + "] must be an integer, got " + describe(e));
      }
      out.push_back(as_int(e, p, f.key + "[" + std::to_string(i) + "]", lo, hi));
    }
    return out;
  }

  std::optional<std::string> string_field(std::string_view key) {
    Found f = find(key);
    if (!f.value) return std::nullopt;
    if (!f.value->is_string()) fail(f.pointer, std::string(key) + " must be a string, got " + describe(*f.value));
    return f.value->get<std::string>();
  }

  bool has(std::string_view key) const { return obj_.contains(std::string(key)); }
  const json& obj() const { return obj_; }

 private:
  const json& obj_;
  std::string prefix_;
  ModelConfig& cfg_;
};

// ------------------------------------------------------------------------------------------
// Shared pieces

void read_dtype(Section& s, const json& top, ModelConfig& cfg) {
  for (const json* obj : {&s.obj(), &top}) {
    for (std::string_view key : {"dtype", "torch_dtype"}) {
      auto it = obj->find(std::string(key));
      if (it == obj->end() || it->is_null()) continue;
      if (!it->is_string()) {
        s.fail((obj == &top ? "" : s.prefix()) + "/" + std::string(key),
               std::string(key) + " must be a string such as \"bfloat16\", got " + describe(*it));
      }
      cfg.dtype = it->get<std::string>();
      return;
    }
  }
}

/// Reads the ratio list of V4/V4.1 under either spelling.
Section::Found find_ratios(Section& s) { return s.find("compress_ratios", {"compress_rates"}); }

/// Fits a ratio list to backbone + draft layers: shorter than the backbone is an error. A
/// compress_ratios list as written (`written`) longer than the backbone counts the draft layers
/// (draft_layer_count(), which sets cfg.num_draft_layers); a V4.0 layer_types read as the list
/// does not (the weights follow compress_ratios alone), and its entries past the draft layers are
/// accepted when they are all 0, with a warning. Missing draft entries are padded with 0. Draft
/// entries are window-only: a non-zero one within num_nextn_predict_layers is read as 0 with a
/// warning, one past it (a draft layer only the list declares) is an error.
void fit_ratio_list(Section& s, const std::string& pointer, std::vector<std::int64_t>& r, ModelConfig& cfg,
                    bool written) {
  const auto n = cfg.num_hidden_layers;
  const auto nextn = cfg.num_nextn_predict_layers;
  const auto len = static_cast<std::int64_t>(r.size());
  if (len < n) {
    s.fail(pointer, "compress_ratios has " + std::to_string(len) +
                        " entries; it needs one per layer, at least num_hidden_layers = " + std::to_string(n));
  }
  const std::int64_t drafts = written ? draft_layer_count(n, nextn, len) : nextn;
  const std::string counted = "compress_ratios has " + std::to_string(len) +
                              " entries for num_hidden_layers = " + std::to_string(n) + ": " + std::to_string(drafts) +
                              " draft layer" + (drafts == 1 ? "" : "s");
  if (drafts > ConfigLimits::max_draft_layers) {
    s.fail(pointer, counted + " (every entry past the backbone is one); allowed up to " +
                        std::to_string(ConfigLimits::max_draft_layers) + " draft layers");
  }
  if (drafts != nextn) {
    for (auto i = n + nextn; i < len; ++i) {
      const auto v = r[static_cast<std::size_t>(i)];
      if (v == 0) continue;
      s.fail(pointer + "/" + std::to_string(i), "compress_ratios[" + std::to_string(i) + "] = " + std::to_string(v) +
                                                    ": " + counted + " (num_nextn_predict_layers says " +
                                                    std::to_string(nextn) + "), so layer " + std::to_string(i) +
                                                    " is a draft layer, and draft layers are window-only: 0 expected");
    }
    s.note("config.draft_layers", Severity::info,
           counted + ", although num_nextn_predict_layers says " + std::to_string(nextn) +
               " (a re-release that ships more draft stages than it declares); the topology, the KV caches and "
               "the weights count " +
               std::to_string(drafts),
           pointer);
  }
  cfg.num_draft_layers = drafts;
  const auto total = cfg.total_layers();
  if (len > total) {  // only a layer_types list: compress_ratios counts its own draft layers
    if (!std::all_of(r.begin() + total, r.end(), [](std::int64_t v) { return v == 0; })) {
      s.fail(pointer, "compress_ratios has " + std::to_string(len) +
                          " entries; at most num_hidden_layers + num_nextn_predict_layers = " + std::to_string(n) +
                          " + " + std::to_string(nextn) + " = " + std::to_string(total) +
                          " (extra entries are accepted only when they are 0)");
    }
    s.note("config.extra_ratios", Severity::warning,
           "layer_types has " + std::to_string(len) + " entries for " + std::to_string(n) + " + " +
               std::to_string(nextn) + " layers; the " + std::to_string(len - total) +
               " extra entries are sliding_attention and ignored (compress_ratios, not layer_types, counts the "
               "draft layers)",
           pointer);
    r.resize(static_cast<std::size_t>(total));
  }
  if (len < total) {
    const auto pad = total - len;
    s.note("config.padded_ratios", Severity::info,
           "padded compress_ratios with " + std::to_string(pad) + " zero(s) for draft layers " + std::to_string(len) +
               "-" + std::to_string(total - 1),
           pointer);
    r.resize(static_cast<std::size_t>(total), 0);
  }
  for (auto i = n; i < total; ++i) {
    if (r[static_cast<std::size_t>(i)] != 0) {
      s.note("config.draft_ratio", Severity::warning,
             "draft layer " + std::to_string(i) + " has compress_ratio " +
                 std::to_string(r[static_cast<std::size_t>(i)]) + "; draft layers are window-only, treated as 0",
             pointer + "/" + std::to_string(i));
      r[static_cast<std::size_t>(i)] = 0;
    }
  }
}

/// dspark_block_size (V4.1-Flash, V4-Flash-0731 re-releases): the DSpark drafter's block, 1..64.
/// Optional: 0 when absent (V4.0 draft layers are then MTP stages; V4.1's are DSpark stages whose
/// block is not declared). A written 0 means the same: configs
/// without a drafter carry it (configs/small/v41-6layer-reindex.json; DeepSeek's reference code
/// sets dspark_block_size = 0 with n_mtp_layers = 0), so the range accepted is 0..64.
std::int64_t read_dspark_block_size(Section& s) {
  constexpr std::int64_t kMaxDsparkBlockSize = 64;
  auto f = s.find("dspark_block_size");
  return f.value ? s.as_int(*f.value, f.pointer, f.key, 0, kMaxDsparkBlockSize) : 0;
}

// ------------------------------------------------------------------------------------------
// V4.1

std::vector<std::int64_t> released_v41_schedule() {
  std::vector<std::int64_t> r = {0, 0};
  r.insert(r.end(), 18, 2);
  r.insert(r.end(), 20, 1);
  return r;
}

/// Validates an explicit source list: integers in [0, n), no duplicates; sorted if needed.
std::vector<std::int64_t> source_list(Section& s, const Section::Found& f, ModelConfig& cfg, std::string_view what) {
  const auto n = cfg.num_hidden_layers;
  auto list = *s.int_list(f, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto id = list[i];
    const std::string p = f.pointer + "/" + std::to_string(i);
    if (id < 0 || id >= n) {
      s.fail(p, f.key + "[" + std::to_string(i) + "] = " + std::to_string(id) +
                    " is not a backbone layer; allowed 0.." + std::to_string(n - 1));
    }
    const auto ratio = cfg.compress_ratios[static_cast<std::size_t>(id)];
    if (ratio == 0) {
      s.fail(p, f.key + "[" + std::to_string(i) + "] = " + std::to_string(id) + ": layer " + std::to_string(id) +
                    " has compress_ratio 0 (window only); " + std::string(what) + " must have compress_ratio 1 or 2");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (list[j] == id) {
        s.fail(p, f.key + "[" + std::to_string(i) + "] = " + std::to_string(id) + " repeats " + f.key + "[" +
                      std::to_string(j) + "]");
      }
    }
  }
  if (!std::is_sorted(list.begin(), list.end())) {
    std::sort(list.begin(), list.end());
    s.note("config.sorted", Severity::info, "sorted " + f.key + " to " + join_ints(list), f.pointer);
  }
  return list;
}

/// Nearest entry of sorted `ids` at or before `layer`, or -1.
std::int64_t nearest_at_or_before(const std::vector<std::int64_t>& ids, std::int64_t layer) {
  auto it = std::upper_bound(ids.begin(), ids.end(), layer);
  return it == ids.begin() ? -1 : *std::prev(it);
}

/// V4.1's layer_types (transformers derives it, and a saved config may hold it): per backbone
/// layer "shared_compressed_attention" at a KV source (the layer that owns the compressor and the
/// shared cache), "sliding_attention" elsewhere. It must agree with kv_source_layer_ids (given or
/// assumed); entries past num_hidden_layers (draft layers, window only) are "sliding_attention".
void check_v41_layer_types(Section& s, const ModelConfig& cfg, const std::string& kkey, const std::string& kptr) {
  auto lf = s.find("layer_types");
  if (!lf.value) return;
  constexpr std::string_view kShared = "shared_compressed_attention";
  constexpr std::string_view kSliding = "sliding_attention";
  if (!lf.value->is_array()) s.fail(lf.pointer, "layer_types must be a list of strings, got " + describe(*lf.value));
  const auto n = cfg.num_hidden_layers;
  const auto len = static_cast<std::int64_t>(lf.value->size());
  if (len < n || len > cfg.total_layers()) {
    s.fail(lf.pointer, "layer_types has " + std::to_string(len) +
                           " entries; it needs one per layer: num_hidden_layers = " + std::to_string(n) +
                           (cfg.num_draft_layers > 0
                                ? " (or up to " + std::to_string(cfg.total_layers()) + " with the draft layers)"
                                : std::string()));
  }
  for (std::int64_t i = 0; i < len; ++i) {
    const json& e = (*lf.value)[static_cast<std::size_t>(i)];
    const std::string p = lf.pointer + "/" + std::to_string(i);
    const std::string at = "layer_types[" + std::to_string(i) + "]";
    if (!e.is_string()) s.fail(p, at + " must be a string, got " + describe(e));
    const auto& name = e.get_ref<const std::string&>();
    if (name != kShared && name != kSliding) {
      s.fail(p, at + " = " + describe(e) + " is not a V4.1 layer type; allowed: " + std::string(kShared) +
                    " (a KV source), " + std::string(kSliding) + " (every other layer)");
    }
    const bool source = i < n && std::binary_search(cfg.kv_source_layer_ids.begin(), cfg.kv_source_layer_ids.end(), i);
    const std::string_view agrees = source ? kShared : kSliding;
    if (name == agrees) continue;
    const int ratio = cfg.compress_ratios[static_cast<std::size_t>(i)];
    const std::string layer = "layer " + std::to_string(i) + " (" + (i >= n ? "a draft layer, " : "") +
                              "compress_ratio " + std::to_string(ratio) + ")";
    s.fail(p, at + " = " + mlaplan::quoted(name) + " disagrees with " + kkey + " = " +
                  join_ints(cfg.kv_source_layer_ids) + " (" + kptr + "): " + layer + (source ? " is" : " is not") +
                  " a KV source; " + mlaplan::quoted(agrees) + " would agree (" + std::string(kShared) +
                  " at each KV source, " + std::string(kSliding) + " elsewhere)");
  }
}

void read_v41(Section& s, const json& top, ModelConfig& cfg) {
  cfg.num_hidden_layers =
      s.int_field("num_hidden_layers", {"n_layers"}, 1, ConfigLimits::max_layers, 40, "the transformers default");
  cfg.num_draft_layers = s.int_field("num_nextn_predict_layers", {"n_mtp_layers"}, 0, ConfigLimits::max_draft_layers, 3,
                                     "the transformers default");
  cfg.num_nextn_predict_layers = cfg.num_draft_layers;
  cfg.dspark_block_size = read_dspark_block_size(s);
  cfg.num_attention_heads =
      s.int_field("num_attention_heads", {"n_heads"}, 1, ConfigLimits::max_heads, 64, "the transformers default");
  cfg.num_key_value_heads = s.int_field("num_key_value_heads", {}, 1, ConfigLimits::max_heads, 1,
                                        "the transformers default (one shared latent)");
  cfg.head_dim = s.int_field("head_dim", {}, 1, ConfigLimits::max_head_dim, 512, "the transformers default");
  cfg.qk_rope_head_dim =
      s.int_field("qk_rope_head_dim", {"rope_head_dim"}, 0, ConfigLimits::max_head_dim, 64, "the transformers default");
  cfg.sliding_window =
      s.int_field("sliding_window", {"window_size"}, 1, ConfigLimits::max_window, 128, "the transformers default");
  cfg.index_topk = s.int_field("index_topk", {}, 1, ConfigLimits::max_topk, 512, "the transformers default");
  cfg.index_n_heads = s.int_field("index_n_heads", {}, 1, ConfigLimits::max_heads, 32, "the transformers default");
  cfg.index_head_dim =
      s.int_field("index_head_dim", {}, 1, ConfigLimits::max_head_dim, 128, "the transformers default");
  cfg.max_position_embeddings = s.int_field("max_position_embeddings", {}, 1, ConfigLimits::max_positions, 1048576,
                                            "the released DeepSeek-V4.1-Flash value");
  cfg.candidate_topk_blocks =
      s.int_field("candidate_topk_blocks", {}, 1, ConfigLimits::max_topk, 2048, "the transformers default");
  cfg.candidate_block_size =
      s.int_field("candidate_block_size", {}, 1, ConfigLimits::max_topk, 8, "the transformers default");
  if (cfg.qk_rope_head_dim > cfg.head_dim) {
    s.fail(s.ptr("qk_rope_head_dim"), "qk_rope_head_dim = " + std::to_string(cfg.qk_rope_head_dim) +
                                          " exceeds head_dim = " + std::to_string(cfg.head_dim));
  }
  read_dtype(s, top, cfg);
  if (auto rs = s.find("rope_scaling");
      rs.value && rs.value->is_object() && rs.value->contains("type") && !rs.value->contains("rope_type")) {
    s.note("config.normalised", Severity::info, "read rope_scaling.type as rope_scaling.rope_type",
           rs.pointer + "/type");
  }
  if (s.has("engram_pad_id") && !s.has("engram_pad_token_id")) {
    s.note("config.normalised", Severity::info, "read engram_pad_id as engram_pad_token_id", s.ptr("engram_pad_id"));
  }

  const auto n = cfg.num_hidden_layers;
  // compress_ratios
  auto rf = find_ratios(s);
  std::vector<std::int64_t> ratios;
  if (auto list = s.int_list(rf, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max())) {
    ratios = *list;
    for (std::size_t i = 0; i < ratios.size(); ++i) {
      if (ratios[i] != 0 && ratios[i] != 1 && ratios[i] != 2) {
        s.fail(rf.pointer + "/" + std::to_string(i), "layer " + std::to_string(i) +
                                                         ": Unsupported DeepSeek V4.1 compress_ratio=" +
                                                         std::to_string(ratios[i]) + "; expected 0, 1, or 2.");
      }
    }
    // DeepseekV41TextConfig refuses a list longer than backbone + draft layers (V4.0's re-releases
    // count extra entries as draft stages; a V4.1 config declares them in num_nextn_predict_layers).
    const std::int64_t most = n + cfg.num_nextn_predict_layers;
    if (static_cast<std::int64_t>(ratios.size()) > most) {
      s.fail(rf.pointer, "compress_ratios has " + std::to_string(ratios.size()) +
                             " entries; a DeepSeek V4.1 config allows at most num_hidden_layers + "
                             "num_nextn_predict_layers = " +
                             std::to_string(n) + " + " + std::to_string(cfg.num_nextn_predict_layers) + " = " +
                             std::to_string(most));
    }
    // So the list never counts V4.1's draft layers: num_nextn_predict_layers does, and a shorter
    // list is padded (the `written = false` reading).
    fit_ratio_list(s, rf.pointer, ratios, cfg, /*written=*/false);
  } else {
    if (n == 40) {
      ratios = released_v41_schedule();
    } else {
      ratios.assign(static_cast<std::size_t>(n), 1);
      const std::int64_t windows = std::min<std::int64_t>(2, n);
      const std::int64_t twos = std::min<std::int64_t>(ceil_div(std::max<std::int64_t>(n - 2, 0), 2), n - windows);
      for (std::int64_t i = 0; i < windows; ++i) ratios[static_cast<std::size_t>(i)] = 0;
      for (std::int64_t i = 0; i < twos; ++i) ratios[static_cast<std::size_t>(windows + i)] = 2;
    }
    s.note("config.structural_default", Severity::warning,
           "assumed compress_ratios = " + join_ints(ratios, kScheduleMaxItems) + ", the transformers default for " +
               std::to_string(n) + " layers",
           rf.pointer.empty() ? s.ptr("compress_ratios") : rf.pointer);
    ratios.resize(static_cast<std::size_t>(cfg.total_layers()), 0);
  }
  cfg.compress_ratios.assign(ratios.begin(), ratios.end());
  const auto released = released_v41_schedule();
  const bool released_backbone = std::equal(ratios.begin(), ratios.begin() + n, released.begin(), released.end());

  // kv_source_layer_ids
  auto kf = s.find("kv_source_layer_ids", {"kv_source_layers"});
  const std::string kptr = kf.value ? kf.pointer : s.ptr("kv_source_layer_ids");
  if (kf.value) {
    cfg.kv_source_layer_ids = source_list(s, kf, cfg, "a KV source");
  } else {
    if (released_backbone) {
      cfg.kv_source_layer_ids = {2, 8, 14, 20};
      s.note("config.structural_default", Severity::warning,
             "assumed kv_source_layer_ids = [2, 8, 14, 20], the released schedule's sources", kptr);
    } else {
      for (std::int64_t i = 0; i < n; ++i) {
        const int r = cfg.compress_ratios[static_cast<std::size_t>(i)];
        if (r > 0 && (i == 0 || cfg.compress_ratios[static_cast<std::size_t>(i - 1)] != r)) {
          cfg.kv_source_layer_ids.push_back(i);
        }
      }
      s.note("config.structural_default", Severity::warning,
             "assumed kv_source_layer_ids = " + join_ints(cfg.kv_source_layer_ids) +
                 ", the first layer of each run of equal non-zero ratios",
             kptr);
    }
  }
  // Every compressed layer reads the nearest source at or before it, with the same ratio.
  for (std::int64_t i = 0; i < n; ++i) {
    const int r = cfg.compress_ratios[static_cast<std::size_t>(i)];
    if (r == 0) continue;
    const auto src = nearest_at_or_before(cfg.kv_source_layer_ids, i);
    if (src < 0) {
      s.fail(kptr, "layer " + std::to_string(i) + " has compress_ratio " + std::to_string(r) +
                       " but no kv_source_layer_ids entry at or before it (kv_source_layer_ids = " +
                       join_ints(cfg.kv_source_layer_ids) + ")");
    }
    const int sr = cfg.compress_ratios[static_cast<std::size_t>(src)];
    if (sr != r) {
      s.fail(kptr, "layer " + std::to_string(i) + " has compress_ratio " + std::to_string(r) +
                       " but would read layer " + std::to_string(src) + "'s compressed cache, which has ratio " +
                       std::to_string(sr) + "; a KV-sharing group has one ratio: make layer " + std::to_string(i) +
                       " (or an earlier ratio-" + std::to_string(r) + " layer) a KV source");
    }
  }

  check_v41_layer_types(s, cfg, kf.value ? kf.key : std::string("kv_source_layer_ids"), kptr);

  // index_source_layer_ids
  auto xf = s.find("index_source_layer_ids", {"index_source_layers"});
  const std::string xptr = xf.value ? xf.pointer : s.ptr("index_source_layer_ids");
  if (xf.value) {
    cfg.index_source_layer_ids = source_list(s, xf, cfg, "an index source");
    for (std::size_t i = 0; i < cfg.index_source_layer_ids.size(); ++i) {
      const auto id = cfg.index_source_layer_ids[i];
      if (nearest_at_or_before(cfg.kv_source_layer_ids, id) < 0) {
        s.fail(xptr, "index source " + std::to_string(id) +
                         " has no kv_source_layer_ids entry at or before it; an index source scores against "
                         "the indexer keys of its KV source");
      }
    }
  } else {
    if (cfg.kv_source_layer_ids == std::vector<std::int64_t>{2, 8, 14, 20}) {
      cfg.index_source_layer_ids = {2, 8, 14, 20, 24, 28, 32, 36};
      s.note("config.structural_default", Severity::warning,
             "assumed index_source_layer_ids = [2, 8, 14, 20, 24, 28, 32, 36], the released sources", xptr);
      for (auto id : cfg.index_source_layer_ids) {
        if (id >= n || cfg.compress_ratios[static_cast<std::size_t>(id)] == 0) {
          s.fail(xptr, "the default index_source_layer_ids include layer " + std::to_string(id) +
                           ", which is not a compressed layer of this config; give index_source_layer_ids explicitly");
        }
      }
    } else {
      cfg.index_source_layer_ids = cfg.kv_source_layer_ids;
      s.note("config.structural_default", Severity::warning,
             "assumed index_source_layer_ids = kv_source_layer_ids = " + join_ints(cfg.index_source_layer_ids), xptr);
    }
  }
  for (auto src : cfg.kv_source_layer_ids) {
    if (!std::binary_search(cfg.index_source_layer_ids.begin(), cfg.index_source_layer_ids.end(), src)) {
      s.fail(xptr, "KV source " + std::to_string(src) +
                       " is not in index_source_layer_ids; the layers reading its cache would have no top-k "
                       "indices (index_source_layer_ids = " +
                       join_ints(cfg.index_source_layer_ids) + ")");
    }
  }

  // candidate_source_layer_id
  auto cf = s.find("candidate_source_layer_id", {"candidate_source_layer"});
  if (cf.value) {
    const auto c = s.as_int(*cf.value, cf.pointer, cf.key, std::numeric_limits<std::int64_t>::min(),
                            std::numeric_limits<std::int64_t>::max());
    if (c < 0) {
      cfg.candidate_source_layer_id = -1;
      s.note("config.candidate_disabled", Severity::info,
             "candidate_source_layer_id = " + std::to_string(c) + ": candidate selection disabled", cf.pointer);
    } else if (!std::binary_search(cfg.index_source_layer_ids.begin(), cfg.index_source_layer_ids.end(), c)) {
      s.fail(cf.pointer, "candidate_source_layer_id = " + std::to_string(c) +
                             " is not an index source; allowed: one of " + join_ints(cfg.index_source_layer_ids) +
                             ", or a negative value to disable");
    } else {
      cfg.candidate_source_layer_id = c;
    }
  } else {
    cfg.candidate_source_layer_id = cfg.kv_source_layer_ids.empty() ? -1 : cfg.kv_source_layer_ids.back();
    s.note(
        "config.structural_default", Severity::warning,
        "assumed candidate_source_layer_id = " + std::to_string(cfg.candidate_source_layer_id) + ", the last KV source",
        s.ptr("candidate_source_layer_id"));
  }
}

// ------------------------------------------------------------------------------------------
// V4.0

/// transformers' newer spelling of V4's compress_ratios: one attention type per layer.
struct V4LayerType {
  std::string_view name;
  std::int64_t ratio;
};
constexpr std::array<V4LayerType, 3> kV4LayerTypes = {{
    {"sliding_attention", 0},
    {"compressed_sparse_attention", 4},
    {"heavily_compressed_attention", 128},
}};
constexpr std::string_view kV4LayerTypeNames =
    "sliding_attention, compressed_sparse_attention, heavily_compressed_attention";

/// The layer_types name of a V4 compress ratio: 0 and 1 are both window only (vLLM clamps to 1).
std::string_view v4_layer_type_of(std::int64_t ratio) {
  if (ratio == 0 || ratio == 1) return kV4LayerTypes[0].name;
  for (const auto& t : kV4LayerTypes) {
    if (t.ratio == ratio) return t.name;
  }
  return {};
}

/// A V4 layer_types list as compress ratios: a list of strings, each a known type.
std::vector<std::int64_t> v4_layer_type_ratios(Section& s, const Section::Found& lf) {
  if (!lf.value->is_array()) s.fail(lf.pointer, "layer_types must be a list of strings, got " + describe(*lf.value));
  if (static_cast<std::int64_t>(lf.value->size()) > ConfigLimits::max_list_entries) {
    s.fail(lf.pointer, "layer_types has " + std::to_string(lf.value->size()) + " entries; at most " +
                           std::to_string(ConfigLimits::max_list_entries) + " are accepted");
  }
  std::vector<std::int64_t> ratios;
  ratios.reserve(lf.value->size());
  for (std::size_t i = 0; i < lf.value->size(); ++i) {
    const json& e = (*lf.value)[i];
    const std::string p = lf.pointer + "/" + std::to_string(i);
    if (!e.is_string()) s.fail(p, "layer_types[" + std::to_string(i) + "] must be a string, got " + describe(e));
    const auto& name = e.get_ref<const std::string&>();
    const auto it =
        std::find_if(kV4LayerTypes.begin(), kV4LayerTypes.end(), [&](const V4LayerType& t) { return t.name == name; });
    if (it == kV4LayerTypes.end()) {
      s.fail(p, "layer_types[" + std::to_string(i) + "] = " + describe(e) +
                    " is not a V4 layer type; allowed: " + std::string(kV4LayerTypeNames));
    }
    ratios.push_back(it->ratio);
  }
  return ratios;
}

/// compress_ratios (or compress_rates) and layer_types are two spellings of one schedule: entry
/// by entry they must name the same attention. Both cover the backbone; past num_hidden_layers
/// a missing entry means window only (fit_ratio_list pads with 0), so there an entry of the
/// longer list must be window only too.
void check_v4_layer_types_agree(Section& s, const Section::Found& rf, const std::vector<std::int64_t>& ratios,
                                const Section::Found& lf, const std::vector<std::int64_t>& typed, std::int64_t n) {
  const auto& names = *lf.value;
  const std::size_t common = std::min(ratios.size(), typed.size());
  for (std::size_t i = 0; i < common; ++i) {
    const std::string_view agrees = v4_layer_type_of(ratios[i]);
    if (agrees == names[i].get_ref<const std::string&>()) continue;
    const std::string idx = "[" + std::to_string(i) + "]";
    s.fail(lf.pointer + "/" + std::to_string(i),
           "layer_types" + idx + " = " + mlaplan::quoted(names[i].get_ref<const std::string&>()) + " (ratio " +
               std::to_string(typed[i]) + ") disagrees with " + rf.key + idx + " = " + std::to_string(ratios[i]) +
               " (" + rf.pointer + "/" + std::to_string(i) + "); they are two spellings of one schedule: " +
               mlaplan::quoted(agrees) + " would agree with " + rf.key + idx + " = " + std::to_string(ratios[i]));
  }
  const auto lt_len = static_cast<std::int64_t>(typed.size());
  const auto r_len = static_cast<std::int64_t>(ratios.size());
  if (r_len < n) return;  // fit_ratio_list says that compress_ratios is too short
  if (lt_len < n) {
    s.fail(lf.pointer,
           "layer_types has " + std::to_string(lt_len) + " entries and " + rf.key + " has " + std::to_string(r_len) +
               "; both need one per layer, at least num_hidden_layers = " + std::to_string(n) + " (layer " +
               std::to_string(lt_len) + " has " + rf.key + "[" + std::to_string(lt_len) +
               "] = " + std::to_string(ratios[static_cast<std::size_t>(lt_len)]) + " and no layer_types entry)");
  }
  for (std::size_t i = common; i < ratios.size(); ++i) {
    if (ratios[i] == 0 || ratios[i] == 1) continue;
    s.fail(rf.pointer + "/" + std::to_string(i),
           rf.key + "[" + std::to_string(i) + "] = " + std::to_string(ratios[i]) + " has no layer_types entry (" +
               lf.pointer + " has " + std::to_string(lt_len) + " entries; one missing past num_hidden_layers = " +
               std::to_string(n) + " means 'sliding_attention', ratio 0): give layer_types[" + std::to_string(i) +
               "] = " + mlaplan::quoted(v4_layer_type_of(ratios[i])) + " or " + rf.key + "[" + std::to_string(i) +
               "] = 0");
  }
  for (std::size_t i = common; i < typed.size(); ++i) {
    if (typed[i] == 0) continue;
    s.fail(lf.pointer + "/" + std::to_string(i),
           "layer_types[" + std::to_string(i) + "] = " + mlaplan::quoted(names[i].get_ref<const std::string&>()) +
               " has no " + rf.key + " entry (" + rf.pointer + " has " + std::to_string(r_len) +
               " entries; one missing past num_hidden_layers = " + std::to_string(n) +
               " means ratio 0, 'sliding_attention'): give " + rf.key + "[" + std::to_string(i) +
               "] = " + std::to_string(typed[i]) + " or layer_types[" + std::to_string(i) + "] = 'sliding_attention'");
  }
}

void read_v4(Section& s, const json& top, ModelConfig& cfg) {
  cfg.num_hidden_layers = s.int_field("num_hidden_layers", {"n_layers"}, 1, ConfigLimits::max_layers, std::nullopt, "");
  cfg.num_draft_layers = s.int_field("num_nextn_predict_layers", {"n_mtp_layers"}, 0, ConfigLimits::max_draft_layers, 1,
                                     "the DeepSeek-V4-Flash value");
  cfg.num_nextn_predict_layers = cfg.num_draft_layers;
  cfg.dspark_block_size = read_dspark_block_size(s);
  cfg.num_attention_heads =
      s.int_field("num_attention_heads", {"n_heads"}, 1, ConfigLimits::max_heads, 64, "the DeepSeek-V4-Flash value");
  cfg.num_key_value_heads = s.int_field("num_key_value_heads", {}, 1, ConfigLimits::max_heads, 1,
                                        "the DeepSeek-V4-Flash value (one shared latent)");
  cfg.head_dim = s.int_field("head_dim", {}, 1, ConfigLimits::max_head_dim, 512, "the DeepSeek-V4-Flash value");
  cfg.qk_rope_head_dim = s.int_field("qk_rope_head_dim", {"rope_head_dim"}, 0, ConfigLimits::max_head_dim, 64,
                                     "the DeepSeek-V4-Flash value");
  cfg.sliding_window =
      s.int_field("sliding_window", {"window_size"}, 1, ConfigLimits::max_window, 128, "the DeepSeek-V4-Flash value");
  cfg.index_topk = s.int_field("index_topk", {}, 1, ConfigLimits::max_topk, 512, "the DeepSeek-V4-Flash value");
  cfg.index_n_heads = s.int_field("index_n_heads", {}, 1, ConfigLimits::max_heads, 64, "the DeepSeek-V4-Flash value");
  cfg.index_head_dim =
      s.int_field("index_head_dim", {}, 1, ConfigLimits::max_head_dim, 128, "the DeepSeek-V4-Flash value");
  cfg.max_position_embeddings = s.int_field("max_position_embeddings", {}, 1, ConfigLimits::max_positions, 1048576,
                                            "the DeepSeek-V4-Flash value");
  read_dtype(s, top, cfg);
  if (auto rs = s.find("rope_scaling");
      rs.value && rs.value->is_object() && rs.value->contains("rope_type") && !rs.value->contains("type")) {
    s.note("config.normalised", Severity::info, "read rope_scaling.rope_type as rope_scaling.type",
           rs.pointer + "/rope_type");
  }

  auto rf = find_ratios(s);
  auto lf = s.find("layer_types");
  // layer_types is read (and checked) whenever it is there, also next to compress_ratios.
  std::optional<std::vector<std::int64_t>> typed;
  if (lf.value) typed = v4_layer_type_ratios(s, lf);
  std::vector<std::int64_t> ratios;
  std::string rptr = rf.pointer;
  bool written = false;  // compress_ratios given (else layer_types read as the list)
  if (auto list = s.int_list(rf, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max())) {
    ratios = *list;
    written = true;
  } else if (typed) {
    ratios = *typed;
    rptr = lf.pointer;
    s.note("config.normalised", Severity::info,
           "read layer_types as compress_ratios (sliding 0, compressed_sparse 4, heavily_compressed 128)", lf.pointer);
  } else {
    s.fail(s.ptr("compress_ratios"),
           "missing; a deepseek_v4 config needs compress_ratios (or layer_types) to say which layers compress");
  }
  for (std::size_t i = 0; i < ratios.size(); ++i) {
    const auto r = ratios[i];
    if (r != 0 && r != 1 && r != 4 && r != 128) {
      s.fail(rptr + "/" + std::to_string(i), "layer " + std::to_string(i) + ": Unsupported DeepseekV4 compress_ratio=" +
                                                 std::to_string(r) + "; expected 1, 4, or 128.");
    }
  }
  if (rf.value && typed) check_v4_layer_types_agree(s, rf, ratios, lf, *typed, cfg.num_hidden_layers);
  fit_ratio_list(s, rptr, ratios, cfg, written);
  cfg.compress_ratios.assign(ratios.begin(), ratios.end());
}

// ------------------------------------------------------------------------------------------
// V3.2

void read_v32(Section& s, const json& top, ModelConfig& cfg) {
  cfg.num_hidden_layers = s.int_field("num_hidden_layers", {"n_layers"}, 1, ConfigLimits::max_layers, std::nullopt, "");
  cfg.num_draft_layers = s.int_field("num_nextn_predict_layers", {"n_mtp_layers"}, 0, ConfigLimits::max_draft_layers, 1,
                                     "the DeepSeek-V3.2 value");
  cfg.num_nextn_predict_layers = cfg.num_draft_layers;
  cfg.num_attention_heads =
      s.int_field("num_attention_heads", {"n_heads"}, 1, ConfigLimits::max_heads, 128, "the DeepSeek-V3.2 value");
  cfg.kv_lora_rank = s.int_field("kv_lora_rank", {}, 1, ConfigLimits::max_head_dim, 512, "the DeepSeek-V3.2 value");
  cfg.qk_rope_head_dim =
      s.int_field("qk_rope_head_dim", {"rope_head_dim"}, 0, ConfigLimits::max_head_dim, 64, "the DeepSeek-V3.2 value");
  cfg.num_key_value_heads = 1;  // MLA: one latent shared by all heads, whatever the config says
  cfg.head_dim = cfg.kv_lora_rank + cfg.qk_rope_head_dim;
  cfg.sliding_window = 0;
  cfg.index_topk = s.int_field("index_topk", {}, 1, ConfigLimits::max_topk, 2048, "the DeepSeek-V3.2 value");
  cfg.index_n_heads = s.int_field("index_n_heads", {}, 1, ConfigLimits::max_heads, 64, "the DeepSeek-V3.2 value");
  cfg.index_head_dim = s.int_field("index_head_dim", {}, 1, ConfigLimits::max_head_dim, 128, "the DeepSeek-V3.2 value");
  cfg.max_position_embeddings =
      s.int_field("max_position_embeddings", {}, 1, ConfigLimits::max_positions, 163840, "the DeepSeek-V3.2 value");
  read_dtype(s, top, cfg);
  cfg.compress_ratios.assign(static_cast<std::size_t>(cfg.total_layers()), 0);
}

// ------------------------------------------------------------------------------------------
// Checkpoint fields (weights.hpp): what the tensor list follows from

/// Per family: the released model's value for a field, and the words that say so.
struct CheckpointDefaults {
  std::int64_t hidden, vocab, moe_inter, inter, experts, shared, top_k, q_lora, o_groups, o_lora, hc, hash, dense, nope,
      v_dim;
  const char* why;
};

CheckpointDefaults checkpoint_defaults(Family f) {
  switch (f) {
    case Family::deepseek_v4:
      return {4096, 129280, 2048, 0, 256, 1, 6, 1024, 8, 1024, 4, 3, 0, 0, 0, "the DeepSeek-V4-Flash value"};
    case Family::deepseek_v41:
      return {5120, 129280, 2304, 0, 384, 1, 6, 1280, 8, 1024, 4, 0, 0, 0, 0, "the released DeepSeek-V4.1-Flash value"};
    case Family::deepseek_v32:
      return {7168, 129280, 2048, 18432, 256, 1, 8, 1536, 0, 0, 0, 0, 3, 128, 128, "the DeepSeek-V3.2 value"};
  }
  return {};
}

void read_checkpoint_fields(Section& s, const json& top, ModelConfig& cfg) {
  const std::size_t before = cfg.findings.size();
  CheckpointFields& c = cfg.checkpoint;
  const CheckpointDefaults d = checkpoint_defaults(cfg.family);
  constexpr std::int64_t kDim = 1LL << 26;  // any width or vocabulary
  constexpr std::int64_t kExperts = 1LL << 20;
  c.hidden_size = s.int_field("hidden_size", {"dim"}, 1, kDim, d.hidden, d.why);
  c.vocab_size = s.int_field("vocab_size", {}, 1, kDim, d.vocab, d.why);
  c.moe_intermediate_size = s.int_field("moe_intermediate_size", {"moe_inter_dim"}, 1, kDim, d.moe_inter, d.why);
  c.n_routed_experts = s.int_field("n_routed_experts", {}, 1, kExperts, d.experts, d.why);
  c.n_shared_experts = s.int_field("n_shared_experts", {}, 0, kExperts, d.shared, d.why);
  c.num_experts_per_tok = s.int_field("num_experts_per_tok", {"n_activated_experts"}, 1, kExperts, d.top_k, d.why);
  if (c.num_experts_per_tok > c.n_routed_experts) {
    s.fail(s.ptr("num_experts_per_tok"), "num_experts_per_tok = " + std::to_string(c.num_experts_per_tok) +
                                             " exceeds n_routed_experts = " + std::to_string(c.n_routed_experts));
  }
  c.q_lora_rank = s.int_field("q_lora_rank", {}, 1, kDim, d.q_lora, d.why);
  if (cfg.family == Family::deepseek_v32) {
    c.intermediate_size = s.int_field("intermediate_size", {"inter_dim"}, 1, kDim, d.inter, d.why);
    c.first_k_dense_replace =
        s.int_field("first_k_dense_replace", {"n_dense_layers"}, 0, ConfigLimits::max_layers, d.dense, d.why);
    c.qk_nope_head_dim = s.int_field("qk_nope_head_dim", {}, 1, ConfigLimits::max_head_dim, d.nope, d.why);
    c.v_head_dim = s.int_field("v_head_dim", {}, 1, ConfigLimits::max_head_dim, d.v_dim, d.why);
  } else {
    c.o_groups = s.int_field("o_groups", {}, 1, ConfigLimits::max_heads, d.o_groups, d.why);
    c.o_lora_rank = s.int_field("o_lora_rank", {}, 1, kDim, d.o_lora, d.why);
    c.hc_mult = s.int_field("hc_mult", {}, 1, 64, d.hc, d.why);
    c.num_hash_layers = s.int_field("num_hash_layers", {"n_hash_layers"}, 0, ConfigLimits::max_layers, d.hash,
                                    cfg.family == Family::deepseek_v41 ? "V4.1 has no hash-routed layers" : d.why);
    if (cfg.num_attention_heads % c.o_groups != 0) {
      s.fail(s.ptr("o_groups"), "o_groups = " + std::to_string(c.o_groups) + " does not divide num_attention_heads = " +
                                    std::to_string(cfg.num_attention_heads));
    }
    if (auto rf = find_ratios(s); rf.value && rf.value->is_array()) {
      c.compress_ratios_entries = static_cast<std::int64_t>(rf.value->size());
    }
  }
  if (cfg.family == Family::deepseek_v41) {
    if (auto ids = s.int_list(s.find("engram_layer_ids"), 0, cfg.num_hidden_layers - 1)) c.engram_layer_ids = *ids;
    auto nf = s.find("engram_num_embeddings");
    if (auto rows = s.int_list(nf, 1, 1LL << 40)) c.engram_num_embeddings = *rows;
    if (c.engram_num_embeddings.size() != c.engram_layer_ids.size()) {
      s.fail(nf.value ? nf.pointer : s.ptr("engram_num_embeddings"),
             "engram_num_embeddings has " + std::to_string(c.engram_num_embeddings.size()) + " entries for " +
                 std::to_string(c.engram_layer_ids.size()) + " engram_layer_ids; one per layer");
    }
    if (auto df = s.find("dspark_n_routed_experts"); df.value) {
      c.dspark_n_routed_experts = s.as_int(*df.value, df.pointer, df.key, 1, kExperts);
    }
    if (!c.engram_layer_ids.empty()) {
      c.engram_head_dim = s.int_field("engram_head_dim", {}, 1, kDim, 256, d.why);
    }
    if (auto vit = top.find("vision_config"); vit != top.end() && !vit->is_null()) {
      if (!vit->is_object()) s.fail("/vision_config", "vision_config must be an object, got " + describe(*vit));
      Section v(*vit, "/vision_config", cfg);
      c.has_vision = true;
      c.vision_layers = v.int_field("num_hidden_layers", {}, 0, ConfigLimits::max_layers, 32, d.why);
      c.vision_hidden_size = v.int_field("hidden_size", {}, 1, kDim, 1024, d.why);
      c.vision_intermediate_size = v.int_field("intermediate_size", {}, 1, kDim, 2816, d.why);
      c.vision_patch_size = v.int_field("patch_size", {}, 1, 4096, 14, d.why);
      c.vision_downsample_ratio = v.int_field("downsample_ratio", {}, 1, 64, 3, d.why);
    }
  }
  // expert_dtype: top level (V4) or, for V4.1, inside quantization_config
  if (auto e = s.string_field("expert_dtype")) {
    c.expert_dtype = *e;
    c.expert_dtype_pointer = s.ptr("expert_dtype");
  }
  if (auto q = top.find("quantization_config"); q != top.end() && !q->is_null()) {
    if (!q->is_object()) s.fail("/quantization_config", "quantization_config must be an object, got " + describe(*q));
    Section qs(*q, "/quantization_config", cfg);
    c.has_quantization_config = true;
    c.quant_method = qs.string_field("quant_method").value_or("");
    c.fmt = qs.string_field("fmt").value_or("");
    c.scale_fmt = qs.string_field("scale_fmt").value_or("");
    if (auto e = qs.string_field("expert_dtype")) {
      if (!c.expert_dtype.empty() && c.expert_dtype != *e) {
        qs.fail(qs.ptr("expert_dtype"), "expert_dtype = \"" + printable(*e) + "\" disagrees with " +
                                            c.expert_dtype_pointer + " = \"" + printable(c.expert_dtype) + "\"");
      }
      c.expert_dtype = *e;
      c.expert_dtype_pointer = qs.ptr("expert_dtype");
    }
    auto bf = qs.find("weight_block_size");
    if (auto b = qs.int_list(bf, 1, 1LL << 20)) {
      if (b->size() != 2) {
        qs.fail(bf.pointer,
                "weight_block_size has " + std::to_string(b->size()) + " entries; expected [rows, columns]");
      }
      c.weight_block_size = *b;
    }
  }
  // The planner's findings stay as they were: these belong to the weights.
  c.findings.assign(cfg.findings.begin() + static_cast<std::ptrdiff_t>(before), cfg.findings.end());
  cfg.findings.resize(before);
}

/// Decides the family from model_type, or from DeepSeek's inference names when model_type is absent.
Family detect_family(const json& top, ModelConfig& cfg, const json*& section, std::string& prefix) {
  section = &top;
  prefix.clear();
  auto mt = top.find("model_type");
  if (mt == top.end()) {
    // DeepSeek's own inference/config.json carries no model_type.
    const bool inference_names = top.contains("n_layers") || top.contains("n_heads") || top.contains("dim");
    if (!inference_names) {
      throw_config(printable(cfg.file) +
                   ": /model_type: missing; supported families: " + std::string(kSupportedFamilies));
    }
    Family f = Family::deepseek_v32;
    if (top.contains("kv_source_layers") || top.contains("kv_source_layer_ids") ||
        top.contains("index_source_layers")) {
      f = Family::deepseek_v41;
    } else if (top.contains("compress_ratios")) {
      f = Family::deepseek_v4;
      const json& r = top["compress_ratios"];
      if (r.is_array()) {
        bool only_v41 = !r.empty();
        for (const auto& e : r) {
          if (!e.is_number_integer() || e.get<std::int64_t>() > 2) only_v41 = false;
        }
        if (only_v41) f = Family::deepseek_v41;
      }
    }
    cfg.findings.push_back(
        Finding{"config.inferred_family",
                Severity::info,
                "no model_type; read DeepSeek's inference config names as " + std::string(to_string(f)),
                "/model_type",
                {}});
    return f;
  }
  if (!mt->is_string()) {
    throw_config(printable(cfg.file) + ": /model_type: must be a string, got " + describe(*mt) +
                 "; supported families: " + std::string(kSupportedFamilies));
  }
  cfg.model_type = mt->get<std::string>();
  if (cfg.model_type == "deepseek_v41") {
    if (auto tc = top.find("text_config"); tc != top.end()) {
      if (!tc->is_object()) {
        throw_config(printable(cfg.file) + ": /text_config: must be an object, got " + describe(*tc));
      }
      cfg.composite = true;
      section = &*tc;
      prefix = "/text_config";
      if (auto tmt = tc->find("model_type"); tmt != tc->end()) {
        if (!tmt->is_string() || tmt->get<std::string>() != "deepseek_v41_text") {
          throw_config(printable(cfg.file) + ": /text_config/model_type: " + describe(*tmt) +
                       " inside a deepseek_v41 config; expected \"deepseek_v41_text\"");
        }
      }
    }
    return Family::deepseek_v41;
  }
  if (cfg.model_type == "deepseek_v41_text") return Family::deepseek_v41;
  if (cfg.model_type == "deepseek_v4") return Family::deepseek_v4;
  if (cfg.model_type == "deepseek_v32") return Family::deepseek_v32;
  std::string hint;
  for (std::string_view known : {"deepseek_v41", "deepseek_v41_text", "deepseek_v4", "deepseek_v32"}) {
    // "did you mean": same letters ignoring case, dots, dashes and underscores
    auto squash = [](std::string_view v) {
      std::string o;
      for (char c : v) {
        if (c == '_' || c == '-' || c == '.') continue;
        o += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      }
      return o;
    };
    if (squash(known) == squash(cfg.model_type)) hint = "; did you mean \"" + std::string(known) + "\"?";
  }
  throw_config(printable(cfg.file) + ": /model_type: " + describe(*mt) +
               " is not a supported model family; supported: " + std::string(kSupportedFamilies) + hint);
}

}  // namespace

std::int64_t draft_layer_count(std::int64_t num_hidden_layers, std::int64_t num_nextn_predict_layers,
                               std::int64_t ratio_entries) {
  return ratio_entries > num_hidden_layers ? ratio_entries - num_hidden_layers : num_nextn_predict_layers;
}

bool dspark_drafts(const ModelConfig& cfg) { return cfg.family == Family::deepseek_v41 || cfg.dspark_block_size > 0; }

const InputFileRules& config_file_rules() {
  static const InputFileRules rules{"", ConfigLimits::max_file_bytes, "ConfigLimits::max_file_bytes",
                                    "a model config.json is a few KiB"};
  return rules;
}

namespace {

void merge_overrides(json& into, const json& over, const std::string& at, std::vector<std::string>& replaced) {
  for (auto it = over.begin(); it != over.end(); ++it) {
    const std::string pointer = at + "/" + escape_pointer_token(it.key());
    if (it.value().is_object() && into.contains(it.key()) && into[it.key()].is_object()) {
      merge_overrides(into[it.key()], it.value(), pointer, replaced);
    } else {
      into[it.key()] = it.value();
      replaced.push_back(pointer);
    }
  }
}

}  // namespace

ModelConfig parse_config(std::string_view text, const std::string& source,
                         const std::optional<std::string>& hf_overrides) {
  ModelConfig cfg;
  cfg.source = source;
  cfg.file = source;
  const std::string where = printable(source);
  // Any NUL is invalid input: nlohmann's lexer takes a NUL for the end of the input (for C
  // strings), so "{...}\0garbage" would parse as "{...}" and the rest would never be looked at.
  if (const auto nul = find_nul_byte(text)) {
    throw_config(where + ": " + describe_nul_byte(*nul) +
                 "; a config.json is JSON text, which never holds a NUL byte (the whole file is read as JSON)");
  }
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    throw_config(where + ": the file is empty; expected a JSON object (a model config.json)");
  }
  check_nesting(text, where);
  json top;
  try {
    // The whole text is one JSON value: anything but whitespace after it is a parse error.
    top = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number too large for a double ("1e309")
    std::string what = e.what();
    if (auto pos = what.find("] "); what.rfind("[json.exception", 0) == 0 && pos != std::string::npos) {
      what = what.substr(pos + 2);
    }
    // The parser quotes the bytes it last read, which may be anything.
    throw_config(where + ": not valid JSON: " + printable(what, 240));
  }
  if (!top.is_object()) {
    throw_config(where + ": the top level is " + describe(top) + "; expected a JSON object (a model config.json)");
  }
  std::vector<std::string> overridden;
  if (hf_overrides) {
    json over;
    try {
      over = json::parse(*hf_overrides);
    } catch (const json::exception&) {
      throw_usage("--hf-overrides: " + mlaplan::quoted(*hf_overrides) + " is not JSON; allowed: a JSON object");
    }
    if (!over.is_object()) {
      throw_usage("--hf-overrides: " + mlaplan::quoted(*hf_overrides) + " is " + describe(over) +
                  "; allowed: a JSON object");
    }
    merge_overrides(top, over, "", cfg.hf_overridden_pointers);
    for (auto it = over.begin(); it != over.end(); ++it) overridden.push_back(it.key());
  }
  const json* section = nullptr;
  std::string prefix;
  cfg.family = detect_family(top, cfg, section, prefix);
  cfg.field_prefix = prefix;
  Section s(*section, prefix, cfg);
  switch (cfg.family) {
    case Family::deepseek_v41: read_v41(s, top, cfg); break;
    case Family::deepseek_v4: read_v4(s, top, cfg); break;
    case Family::deepseek_v32: read_v32(s, top, cfg); break;
  }
  read_checkpoint_fields(s, top, cfg);
  if (!overridden.empty()) {
    std::string keys;
    for (const auto& k : overridden) keys += (keys.empty() ? "" : ", ") + printable(k, 80);
    cfg.findings.push_back(Finding{"config.hf_overrides", Severity::info,
                                   "--hf-overrides replaced " + keys + " of " + where + " before it was read", "", ""});
  }
  return cfg;
}

ModelConfig load_config(const std::string& path) { return load_config(path, ModelSourceOptions{}); }

namespace {

/// The hf_* fields of `cfg` from a snapshot found through the cache.
void set_hf_fields(ModelConfig& cfg, const HfSnapshot& snap) {
  cfg.hf_repo_id = snap.repo_id;
  cfg.hf_revision = snap.revision;
  cfg.hf_commit = snap.commit;
}

/// A snapshot directory named as such (models--ORG--NAME/snapshots/<commit>): its repo id and commit.
void set_hf_fields_of_snapshot(ModelConfig& cfg, const std::string& dir) {
  std::filesystem::path p(dir);
  if (!p.has_filename()) p = p.parent_path();
  const std::filesystem::path parent = p.parent_path();
  if (parent.filename() != "snapshots") return;
  const std::string id = hf_repo_id_of_dir(parent.parent_path().string());
  if (id.empty()) return;
  cfg.hf_repo_id = id;
  cfg.hf_commit = p.filename().string();
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

}  // namespace

ModelConfig load_config(const std::string& path, const ModelSourceOptions& opts) {
  namespace fs = std::filesystem;
  if (path.empty()) throw_config("no config given: pass a config.json or a directory holding one");
  if (opts.revision) check_hf_revision(*opts.revision);
  std::error_code ec;
  std::string file = path;
  std::string dir;
  std::optional<HfSnapshot> snap;
  const bool on_disk =
      path.find('\0') != std::string::npos || fs::symlink_status(path, ec).type() != fs::file_type::not_found;
  if (!on_disk && looks_like_repo_id(path) && !ends_with(path, ".json")) {
    // Not a path: a repo id, found in the local Hugging Face cache (never downloaded).
    snap = resolve_hf_repo(path, opts.revision, opts.env ? *opts.env : hf_env_from_process(), opts.download_dir);
    dir = snap->snapshot_dir;
  } else if (fs::is_directory(path, ec)) {
    if (opts.revision) {
      // Only a cache repository has revisions: models--ORG--NAME, or a directory holding refs/.
      const bool cache_repo = !hf_repo_id_of_dir(path).empty() || fs::is_directory(fs::path(path) / "refs", ec);
      if (!cache_repo) {
        throw_usage("--revision applies to a Hugging Face repo id or cache directory (models--ORG--NAME); " +
                    mlaplan::quoted(path, kQuotedPathMaxBytes) + " is neither");
      }
      snap = resolve_hf_repo_dir(path, opts.revision);
      dir = snap->snapshot_dir;
    } else {
      dir = resolve_model_dir(path);  // a Hugging Face cache repository resolves through refs/main
    }
  } else if (opts.revision && on_disk) {
    throw_usage("--revision applies to a Hugging Face repo id or cache directory (models--ORG--NAME); " +
                mlaplan::quoted(path, kQuotedPathMaxBytes) + " is not a directory");
  }
  if (!dir.empty()) {
    file = (fs::path(dir) / "config.json").string();
    // Absent: not even a dangling link. Anything else there is read_input_file's to judge.
    if (fs::symlink_status(file, ec).type() == fs::file_type::not_found) {
      throw_config("directory " + mlaplan::quoted(path, kQuotedPathMaxBytes) + " holds no config.json");
    }
  }
  const std::string text = read_input_file(file, config_file_rules());
  ModelConfig cfg = parse_config(text, file, opts.hf_overrides);
  cfg.source = path;
  cfg.download_dir = opts.download_dir;
  cfg.hf_overrides = opts.hf_overrides;
  cfg.model_dir = dir;
  if (snap) {
    set_hf_fields(cfg, *snap);
  } else if (!dir.empty() && dir != path) {
    // A cache repository resolved through refs/main.
    cfg.hf_repo_id = hf_repo_id_of_dir(path);
    cfg.hf_revision = "main";
    cfg.hf_commit = fs::path(dir).filename().string();
  } else if (!dir.empty()) {
    set_hf_fields_of_snapshot(cfg, dir);
  }
  return cfg;
}

}  // namespace mlaplan

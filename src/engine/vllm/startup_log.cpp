// read_vllm_startup_log(): one pass over the lines, each searched for the key phrases; no regular
// expressions, no copy of a line unless it holds an ANSI escape (docs/fit.md, "Reading a start-up
// log").

#include "mlaplan/engine/vllm/startup_log.hpp"

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan {
namespace {

/// Bytes of a line a note quotes.
constexpr std::size_t kNoteLineMaxBytes = 200;
/// The longest run of digits read as one number (a longer one is not a number vLLM prints).
constexpr std::size_t kMaxNumberChars = 48;
/// The longest version string kept.
constexpr std::size_t kMaxVersionChars = 100;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

/// A number of the log at a position: an optional '-', digits with optional thousands
/// separators (',' and exactly three digits, Python's f"{n:,}"), an optional fraction.
struct Number {
  double value = 0;
  std::optional<std::int64_t> integer;  ///< set when it has no fraction and fits in int64
  std::size_t end = 0;                  ///< just past its last character
};

std::optional<Number> read_number(std::string_view s, std::size_t pos) {
  std::string clean;
  std::size_t i = pos;
  if (i < s.size() && s[i] == '-') {
    clean.push_back('-');
    ++i;
  }
  if (i >= s.size() || !is_digit(s[i])) return std::nullopt;
  bool fraction = false;
  while (i < s.size() && clean.size() <= kMaxNumberChars) {
    const char c = s[i];
    if (is_digit(c)) {
      clean.push_back(c);
      ++i;
    } else if (c == ',' && i + 3 < s.size() && is_digit(s[i + 1]) && is_digit(s[i + 2]) && is_digit(s[i + 3]) &&
               (i + 4 >= s.size() || !is_digit(s[i + 4]))) {
      ++i;  // a thousands separator
    } else {
      break;
    }
  }
  if (i < s.size() && s[i] == '.' && i + 1 < s.size() && is_digit(s[i + 1])) {
    fraction = true;
    clean.push_back('.');
    ++i;
    while (i < s.size() && is_digit(s[i]) && clean.size() <= kMaxNumberChars) clean.push_back(s[i++]);
  }
  if (clean.size() > kMaxNumberChars || (i < s.size() && is_digit(s[i]))) return std::nullopt;
  Number n;
  n.end = i;
  const char* first = clean.data();
  const char* last = clean.data() + clean.size();
  const auto [p, ec] = std::from_chars(first, last, n.value);
  if (ec != std::errc() || p != last) return std::nullopt;
  if (!fraction) {
    std::int64_t v = 0;
    const auto [q, ec2] = std::from_chars(first, last, v);
    if (ec2 == std::errc() && q == last) n.integer = v;
  }
  return n;
}

/// True when `s` holds `word` at `pos`; moves `pos` past it.
bool expect(std::string_view s, std::size_t& pos, std::string_view word) {
  if (pos > s.size() || s.substr(pos, word.size()) != word) return false;
  pos += word.size();
  return true;
}

/// A number at `pos` followed by `suffix`; moves `pos` past both. A negative number is unreadable
/// unless `signed_value` (an amount vLLM measured is never negative; only the KV budget, what is
/// left, can be).
std::optional<double> number_then(std::string_view s, std::size_t& pos, std::string_view suffix,
                                  bool signed_value = false) {
  const auto n = read_number(s, pos);
  if (!n || (n->value < 0 && !signed_value)) return std::nullopt;
  std::size_t at = n->end;
  if (!expect(s, at, suffix)) return std::nullopt;
  pos = at;
  return n->value;
}

/// An integer at `pos` followed by `suffix`; moves `pos` past both.
std::optional<std::int64_t> integer_then(std::string_view s, std::size_t& pos, std::string_view suffix) {
  const auto n = read_number(s, pos);
  if (!n || !n->integer || *n->integer < 0) return std::nullopt;  // counts are never negative
  std::size_t at = n->end;
  if (!expect(s, at, suffix)) return std::nullopt;
  pos = at;
  return *n->integer;
}

/// `line` without ANSI escape sequences (ESC '[' parameters and a final byte; a lone ESC).
std::string strip_ansi(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  std::size_t i = 0;
  while (i < line.size()) {
    if (line[i] != '\x1b') {
      out.push_back(line[i++]);
      continue;
    }
    ++i;
    if (i < line.size() && line[i] == '[') {
      ++i;
      while (i < line.size() &&
             (static_cast<unsigned char>(line[i]) < 0x40 || static_cast<unsigned char>(line[i]) > 0x7e))
        ++i;
      if (i < line.size()) ++i;  // the final byte ('m' for a colour)
    }
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/// A Python repr (a dict, a list) with its strings in double quotes and True/False/None as
/// true/false/null: {'method': 'mtp'} -> {"method": "mtp"}.
std::string jsonish(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  std::size_t i = 0;
  while (i < v.size()) {
    const char c = v[i];
    if (c == '\'') {
      out.push_back('"');
      ++i;
      while (i < v.size() && v[i] != '\'') {
        if (v[i] == '\\' && i + 1 < v.size()) {
          if (v[i + 1] == '\'') {
            out.push_back('\'');
          } else {
            out.push_back('\\');
            out.push_back(v[i + 1]);
          }
          i += 2;
          continue;
        }
        if (v[i] == '"') out.push_back('\\');
        out.push_back(v[i++]);
      }
      out.push_back('"');
      if (i < v.size()) ++i;
    } else if (c == '"') {
      out.push_back(v[i++]);
      while (i < v.size() && v[i] != '"') {
        if (v[i] == '\\' && i + 1 < v.size()) out.push_back(v[i++]);
        out.push_back(v[i++]);
      }
      if (i < v.size()) out.push_back(v[i++]);
    } else if (is_ident_char(c) && !is_digit(c)) {
      const std::size_t start = i;
      while (i < v.size() && is_ident_char(v[i])) ++i;
      const std::string_view word = v.substr(start, i - start);
      if (word == "True") {
        out += "true";
      } else if (word == "False") {
        out += "false";
      } else if (word == "None") {
        out += "null";
      } else {
        out += word;
      }
    } else {
      out.push_back(c);
      ++i;
    }
  }
  return out;
}

/// A quoted Python string starting at `pos` (' or "), unescaped; moves `pos` past its closing
/// quote. Empty when it has none.
std::optional<std::string> read_quoted(std::string_view s, std::size_t& pos) {
  if (pos >= s.size() || (s[pos] != '\'' && s[pos] != '"')) return std::nullopt;
  const char q = s[pos];
  std::string out;
  std::size_t i = pos + 1;
  while (i < s.size() && s[i] != q) {
    if (s[i] == '\\' && i + 1 < s.size()) ++i;
    out.push_back(s[i++]);
  }
  if (i >= s.size()) return std::nullopt;
  pos = i + 1;
  return out;
}

/// One value of the args dict as text (see VllmStartupLog::args).
std::string arg_value(std::string_view v) {
  if (v == "True") return "true";
  if (v == "False") return "false";
  if (v == "None") return "null";
  if (!v.empty() && (v.front() == '\'' || v.front() == '"')) {
    std::size_t at = 0;
    auto s = read_quoted(v, at);
    if (s && at == v.size()) return *s;
  }
  if (!v.empty() && (v.front() == '{' || v.front() == '[')) return jsonish(v);
  return std::string(v);
}

/// The keys of a Python dict repr into `out`. False when the text is not a whole dict (what was
/// read before the fault stays in `out`).
bool parse_args_dict(std::string_view d, std::map<std::string, std::string>& out) {
  std::size_t i = 0;
  const auto skip_ws = [&] {
    while (i < d.size() && (d[i] == ' ' || d[i] == '\t')) ++i;
  };
  skip_ws();
  if (i >= d.size() || d[i] != '{') return false;
  ++i;
  skip_ws();
  if (i < d.size() && d[i] == '}') return true;
  while (i < d.size()) {
    skip_ws();
    auto key = read_quoted(d, i);
    if (!key) return false;
    skip_ws();
    if (i >= d.size() || d[i] != ':') return false;
    ++i;
    skip_ws();
    const std::size_t start = i;
    int depth = 0;
    char in_string = 0;
    while (i < d.size()) {
      const char c = d[i];
      if (in_string != 0) {
        if (c == '\\') {
          i += 2;
          continue;
        }
        if (c == in_string) in_string = 0;
      } else if (c == '\'' || c == '"') {
        in_string = c;
      } else if (c == '(' || c == '[' || c == '{') {
        ++depth;
      } else if (c == ')' || c == ']' || c == '}') {
        if (depth == 0) break;
        --depth;
      } else if (c == ',' && depth == 0) {
        break;
      }
      ++i;
    }
    if (i >= d.size()) return false;  // no closing '}'
    out[std::move(*key)] = arg_value(trim(d.substr(start, i - start)));
    if (d[i] == '}') return true;
    if (d[i] != ',') return false;
    ++i;
  }
  return false;
}

std::string show(double v) { return format_shortest(v); }
std::string show(std::int64_t v) { return format_grouped(v); }
std::string show(const std::string& v) { return quoted(v); }

class Reader {
 public:
  void line(std::string_view s, std::size_t n) {
    n_ = n;
    s_ = s;
    if (s.find("Model loading took") != std::string_view::npos) model_loading();
    if (s.find("GiB total") != std::string_view::npos) cudagraph_estimate();
    if (s.find("Profiling CUDA graph memory:") != std::string_view::npos) cudagraph_profile();
    if (s.find("Available KV cache memory:") != std::string_view::npos) available_kv();
    const bool size_line = s.find("GPU KV cache size:") != std::string_view::npos;
    if (size_line) kv_size();
    const bool concurrency_line = s.find("Maximum concurrency for") != std::string_view::npos;
    if (concurrency_line) concurrency();
    if (size_line && concurrency_line) out_.merged_kv_line = true;
    if (s.find("Free memory on device (") != std::string_view::npos) free_memory();
    if (s.find("is equivalent to --gpu-memory-utilization=") != std::string_view::npos) equivalence();
    if (s.find("Actual usage is") != std::string_view::npos) summary();
    if (s.find("CUDA graph pool memory:") != std::string_view::npos) pool();
    if (s.find("Using V2 Model Runner") != std::string_view::npos) out_.model_runner_v2 = true;
    if (s.find("non-default args:") != std::string_view::npos) args();
    if (s.find("vLLM API server version ") != std::string_view::npos) version("vLLM API server version ", " \t");
    if (s.find("LLM engine (v") != std::string_view::npos) version("LLM engine (v", ")");
  }

  VllmStartupLog finish(bool& found) {
    found = found_;
    if (dropped_ > 0)
      out_.notes.push_back(std::to_string(dropped_) + " more notes left out (at most " +
                           std::to_string(kVllmLogMaxNotes) + " are kept)");
    return std::move(out_);
  }

 private:
  /// Just past `phrase` (which the line holds) and the spaces after it.
  std::size_t after(std::string_view phrase) const {
    std::size_t at = s_.find(phrase) + phrase.size();
    while (at < s_.size() && s_[at] == ' ') ++at;
    return at;
  }

  void note(const std::string& text) {
    if (out_.notes.size() < kVllmLogMaxNotes) {
      out_.notes.push_back("line " + std::to_string(n_) + ": " + text);
    } else {
      ++dropped_;
    }
  }

  void unreadable(std::string_view phrase) {
    note("'" + std::string(phrase) + "' with a number that could not be read: " + printable(s_, kNoteLineMaxBytes));
    if (out_.unreadable_lines.size() < kVllmLogMaxNotes) out_.unreadable_lines.push_back(n_);
  }

  /// Keeps the first value of `what`; a later different one is a note.
  template <class T>
  void keep_first(std::optional<T>& slot, const T& v, const std::string& what) {
    if (!slot) {
      slot = v;
      first_line_[what] = n_;
      return;
    }
    if (*slot != v)
      note(what + " is " + show(v) + " here, " + show(*slot) + " on line " + std::to_string(first_line_[what]) +
           "; the first is kept");
  }

  void keep_first(std::optional<VllmLogValue>& slot, double v, const std::string& what) {
    if (!slot) {
      slot = VllmLogValue{v, n_};
      return;
    }
    if (slot->value != v)
      note(what + " is " + show(v) + " GiB here, " + show(slot->value) + " GiB on line " + std::to_string(slot->line) +
           "; the first is kept");
  }

  void model_loading() {
    found_ = true;
    std::size_t at = after("Model loading took");
    const auto v = number_then(s_, at, " GiB");
    if (!v) return unreadable("Model loading took");
    keep_first(out_.model_loading_gib, *v, "Model loading memory");
  }

  void cudagraph_estimate() {
    static constexpr std::string_view kPhrase = "Estimated CUDA graph memory:";
    if (s_.find(kPhrase) == std::string_view::npos) return;
    std::size_t at = after(kPhrase);
    const auto v = number_then(s_, at, " GiB total");
    if (!v) return unreadable("Estimated CUDA graph memory");
    keep_first(out_.cudagraph_estimate_gib, *v, "Estimated CUDA graph memory");
  }

  /// "NAME=n (largest=s)" after the phrase; false when NAME= is there and unreadable.
  bool graph_mode(std::string_view name, std::optional<std::int64_t>& sizes, std::optional<std::int64_t>& largest,
                  bool& seen) {
    const std::size_t start = after("Profiling CUDA graph memory:");
    const std::size_t p = s_.find(name, start);
    if (p == std::string_view::npos) return true;
    seen = true;
    std::size_t at = p + name.size();
    const auto n = integer_then(s_, at, " (largest=");
    if (!n) return false;
    const auto l = integer_then(s_, at, ")");
    if (!l) return false;
    const std::string label(name.substr(0, name.size() - 1));
    keep_first(sizes, *n, "CUDA graph profiling " + label + " sizes");
    keep_first(largest, *l, "CUDA graph profiling " + label + " largest size");
    return true;
  }

  void cudagraph_profile() {
    bool seen = false;
    const bool ok = graph_mode("PIECEWISE=", out_.piecewise_sizes, out_.piecewise_largest, seen) &&
                    graph_mode("FULL=", out_.full_sizes, out_.full_largest, seen);
    if (!ok || !seen) unreadable("Profiling CUDA graph memory");
  }

  void available_kv() {
    found_ = true;
    std::size_t at = after("Available KV cache memory:");
    const auto v = number_then(s_, at, " GiB", /*signed_value=*/true);  // negative: nothing left
    if (!v) return unreadable("Available KV cache memory");
    auto& slot = out_.available_kv_gib;
    if (!slot) {
      slot = VllmLogValue{*v, n_};
      return;
    }
    if (slot->value == *v) return;
    const double was = slot->value;
    const std::size_t was_line = slot->line;
    if (*v < was) slot = VllmLogValue{*v, n_};
    note("Available KV cache memory is " + show(*v) + " GiB here, " + show(was) + " GiB on line " +
         std::to_string(was_line) + " (another worker); the minimum, " + show(slot->value) +
         " GiB, is kept (vLLM sizes the KV cache by its smallest worker)");
  }

  void kv_size() {
    found_ = true;
    std::size_t at = after("GPU KV cache size:");
    const auto v = integer_then(s_, at, " tokens");
    if (!v) return unreadable("GPU KV cache size");
    keep_first(out_.gpu_kv_cache_tokens, *v, "GPU KV cache size (tokens)");
  }

  void concurrency() {
    std::size_t at = after("Maximum concurrency for");
    const auto l = integer_then(s_, at, " tokens per request: ");
    if (!l) return unreadable("Maximum concurrency for");
    const auto c = number_then(s_, at, "x");
    if (!c) return unreadable("Maximum concurrency for");
    keep_first(out_.concurrency_tokens, *l, "Maximum concurrency's tokens per request");
    keep_first(out_.max_concurrency, *c, "Maximum concurrency");
  }

  void free_memory() {
    std::size_t at = after("Free memory on device (");
    const auto a = number_then(s_, at, "/");
    if (!a) return unreadable("Free memory on device");
    const auto b = number_then(s_, at, " GiB)");
    if (!b) return unreadable("Free memory on device");
    keep_first(out_.free_gib, *a, "Free memory on device");
    keep_first(out_.total_gib, *b, "Total memory on device");
  }

  void equivalence() {
    std::size_t at = after("is equivalent to --gpu-memory-utilization=");
    const auto v = number_then(s_, at, " without");
    if (!v) return unreadable("is equivalent to --gpu-memory-utilization");
    keep_first(out_.equivalent_utilization, *v, "The equivalent --gpu-memory-utilization");
  }

  void summary() {
    std::size_t at = after("Actual usage is");
    int terms = 0;
    for (int k = 0; k < 8; ++k) {
      expect(s_, at, "and ");
      const auto v = number_then(s_, at, " GiB for ");
      if (!v) break;
      const std::string_view rest = s_.substr(at);
      static constexpr std::string_view kConsumed = "consumed memory (weights + non-torch)";
      if (rest.starts_with(kConsumed)) {
        keep_first(out_.consumed_gib, *v, "The summary's consumed memory");
        at += kConsumed.size();
      } else if (rest.starts_with("weight")) {
        keep_first(out_.weights_gib, *v, "The summary's weight");
        at += 6;
        expect(s_, at, "s");
      } else if (rest.starts_with("peak activation")) {
        keep_first(out_.peak_activation_gib, *v, "The summary's peak activation");
        at += 15;
      } else if (rest.starts_with("non-torch memory")) {
        keep_first(out_.non_torch_gib, *v, "The summary's non-torch memory");
        at += 16;
      } else if (rest.starts_with("CUDAGraph memory")) {
        keep_first(out_.cudagraph_actual_gib, *v, "CUDA graph memory (actual)");
        at += 16;
      } else {
        note("a term of the memory summary not known: " + printable(rest.substr(0, 60), 60));
        const std::size_t comma = s_.find(',', at);
        if (comma == std::string_view::npos) break;
        at = comma;
      }
      ++terms;
      if (!expect(s_, at, ", ")) break;
    }
    if (terms == 0) unreadable("Actual usage is");
  }

  void pool() {
    std::size_t at = after("CUDA graph pool memory:");
    const auto a = number_then(s_, at, " GiB (actual), ");
    if (!a) return unreadable("CUDA graph pool memory");
    const auto e = number_then(s_, at, " GiB (estimated)");
    if (!e) return unreadable("CUDA graph pool memory");
    keep_first(out_.cudagraph_actual_gib, *a, "CUDA graph memory (actual)");
    keep_first(out_.cudagraph_pool_estimated_gib, *e, "CUDA graph pool memory (estimated)");
  }

  void args() {
    const std::string_view dict = trim(s_.substr(after("non-default args:")));
    if (!args_seen_) {
      args_seen_ = true;
      args_line_ = n_;
      out_.non_default_args = std::string(dict);
      if (!parse_args_dict(dict, out_.args))
        note("the non-default args are not a whole dict (the keys before the fault are kept): " +
             printable(s_, kNoteLineMaxBytes));
      return;
    }
    if (dict != out_.non_default_args)
      note("a second, different non-default args line; the one of line " + std::to_string(args_line_) + " is kept");
  }

  void version(std::string_view phrase, std::string_view stop) {
    const std::size_t at = after(phrase);
    std::size_t end = s_.find_first_of(stop, at);
    if (end == std::string_view::npos) end = s_.size();
    const std::string_view v = s_.substr(at, end - at);
    if (v.empty() || v.size() > kMaxVersionChars || !is_digit(v.front())) return;
    keep_first(out_.vllm_version, std::string(v), "The vLLM version");
  }

  VllmStartupLog out_;
  std::string_view s_;
  std::size_t n_ = 0;
  bool found_ = false;
  bool args_seen_ = false;
  std::size_t args_line_ = 0;
  std::size_t dropped_ = 0;
  std::map<std::string, std::size_t> first_line_;
};

}  // namespace

VllmStartupLog read_vllm_startup_log(std::string_view text) {
  Reader reader;
  std::size_t pos = 0;
  std::size_t number = 0;
  std::string cleaned;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\x1b') != std::string_view::npos) {
      cleaned = strip_ansi(line);
      line = cleaned;
    }
    reader.line(line, number);
  }
  bool found = false;
  VllmStartupLog out = reader.finish(found);
  if (!found)
    throw_config(
        "not a vLLM start-up log: none of the lines 'Model loading took', 'Available KV cache memory', 'GPU KV "
        "cache size' was found");
  return out;
}

}  // namespace mlaplan

// read_sglang_startup_log(): one pass over the lines; each line is searched for the phrases SGLang
// prints (docs/sglang.md, "A real log"), and a figure is the number after "key=".

#include "mlaplan/engine/sglang/startup_log.hpp"

#include <algorithm>
#include <charconv>
#include <system_error>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan {
namespace {

/// The number after `key` in `line` (digits, '.', a leading '-'), or none.
std::optional<double> number_after(std::string_view line, std::string_view key) {
  const auto at = line.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  std::size_t i = at + key.size();
  std::size_t j = i;
  if (j < line.size() && line[j] == '-') ++j;
  while (j < line.size() && ((line[j] >= '0' && line[j] <= '9') || line[j] == '.')) ++j;
  if (j == i || j - i > 40) return std::nullopt;
  double v = 0;
  const auto [p, ec] = std::from_chars(line.data() + i, line.data() + j, v);
  if (ec != std::errc() || p != line.data() + j) return std::nullopt;
  return v;
}

std::optional<long long> integer_after(std::string_view line, std::string_view key) {
  const auto v = number_after(line, key);
  if (!v || *v < 0 || *v > 9.0e15 || *v != static_cast<double>(static_cast<long long>(*v))) return std::nullopt;
  return static_cast<long long>(*v);
}

/// server_args=ServerArgs(k=v, k='v', ...): the top-level pairs (values with brackets or quotes
/// kept whole).
std::map<std::string, std::string> parse_server_args(std::string_view line) {
  std::map<std::string, std::string> out;
  const auto at = line.find("ServerArgs(");
  if (at == std::string_view::npos) return out;
  std::string_view s = line.substr(at + 11);
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == ',')) ++i;
    const std::size_t eq = s.find('=', i);
    if (eq == std::string_view::npos) break;
    const std::string key(s.substr(i, eq - i));
    std::size_t j = eq + 1;
    int depth = 0;
    char quote = 0;
    while (j < s.size()) {
      const char c = s[j];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '(' || c == '[' || c == '{') {
        ++depth;
      } else if (c == ')' || c == ']' || c == '}') {
        if (depth == 0) break;
        --depth;
      } else if (c == ',' && depth == 0) {
        break;
      }
      ++j;
    }
    std::string value(s.substr(eq + 1, j - eq - 1));
    if (value.size() >= 2 && (value.front() == '\'' || value.front() == '"') && value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    if (!key.empty() && key.find(' ') == std::string::npos) out[key] = value;
    if (j >= s.size() || s[j] == ')') break;
    i = j + 1;
  }
  return out;
}

}  // namespace

SglangStartupLog read_sglang_startup_log(std::string_view text) {
  SglangStartupLog log;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  std::optional<double> begin_max;
  bool any = false;
  auto keep_min = [](std::optional<double>& into, double v) { into = into ? std::min(*into, v) : v; };
  auto keep_max = [](std::optional<double>& into, double v) { into = into ? std::max(*into, v) : v; };
  auto mark = [&](const char* field) {
    log.lines.emplace(field, line_no);
    any = true;
  };
  while (pos <= text.size()) {
    const auto nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find("Load weight begin.") != std::string_view::npos) {
      if (const auto v = number_after(line, "avail mem=")) {
        keep_min(log.free_before_load_gib, *v);
        keep_max(begin_max, *v);
        mark("free_before_load");
      }
    } else if (line.find("Load weight end.") != std::string_view::npos) {
      if (const auto v = number_after(line, "avail mem=")) {
        keep_min(log.free_after_load_gib, *v);
        mark("free_after_load");
      }
      if (const auto v = number_after(line, "mem usage=")) {
        keep_max(log.load_usage_gib, *v);
        mark("load_usage");
      }
    } else if (line.find("Memory profiling:") != std::string_view::npos ||
               line.find("memory profiling: post_model_load_memory=") != std::string_view::npos) {
      const auto a = number_after(line, "available_gpu_memory=");
      const auto p = number_after(line, "total_gpu_memory=");
      log.profiled_available_gib = a ? a : number_after(line, "post_model_load_memory=");
      log.profiled_total_gib = p ? p : number_after(line, "pre_model_load_memory=");
      log.rest_gib = number_after(line, "rest_memory=");
      if (const auto f = number_after(line, "mem_fraction_static=")) {
        log.server_args.emplace("mem_fraction_static", std::to_string(*f));
      }
      mark("profiling");
    } else if (line.find("memory calculation:") != std::string_view::npos &&
               (line.find("DSV4") != std::string_view::npos || line.find("DSv4") != std::string_view::npos)) {
      log.bytes_per_full_token = number_after(line, "bytes_per_full_token=");
      log.available_bytes_gib = number_after(line, "available_bytes=");
      log.full_token = integer_after(line, "full_token=");
      log.generation = line.find("unified=") != std::string_view::npos            ? "G3"
                       : line.find("c128_state_fixed=") != std::string_view::npos ? "G2"
                                                                                  : "G1";
      mark("memory_calculation");
    } else if (line.find("pool sizes: full=") != std::string_view::npos) {
      log.swa_tokens = integer_after(line, "swa=");
      mark("pool_sizes");
    } else if (line.find("max_total_num_tokens=") != std::string_view::npos) {
      log.max_total_num_tokens = integer_after(line, "max_total_num_tokens=");
      log.max_running_requests = integer_after(line, "max_running_requests=");
      log.context_len = integer_after(line, "context_len=");
      mark("summary");
    } else if (line.find("server_args=ServerArgs(") != std::string_view::npos) {
      for (auto& [k, v] : parse_server_args(line)) log.server_args[k] = v;
      mark("server_args");
    }
  }
  if (!any) {
    throw_config(
        "no SGLang start-up line in it (\"Load weight begin\", \"DSV4 memory calculation\", "
        "\"max_total_num_tokens=\", server_args=ServerArgs(...))");
  }
  if (log.free_before_load_gib && begin_max && *begin_max - *log.free_before_load_gib > 0.005) {
    log.notes.push_back("the ranks' free memory before loading differs (" + format_fixed(*log.free_before_load_gib, 2) +
                        " to " + format_fixed(*begin_max, 2) + " GiB): the least is taken, as SGLang's query does");
  }
  return log;
}

}  // namespace mlaplan

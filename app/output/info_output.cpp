// The output of `mla-plan gpus` and `mla-plan formats` (output/info_output.hpp).

#include "output/info_output.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "mlaplan/hardware/formats.hpp"
#include "mlaplan/hardware/target.hpp"
#include "output/json_out.hpp"

namespace mlaplan::cli {

void write_gpus(std::ostream& out, bool json) {
  if (json) {
    ojson j = json_document();
    ojson arr = ojson::array();
    for (const auto& g : gpu_presets()) {
      arr.push_back({{"id", g.id},
                     {"name", g.name},
                     {"compute_capability", g.cc.str()},
                     {"arch", g.cc.sm()},
                     {"family", to_string(g.family)},
                     {"family_title", arch_family_title(g.family)},
                     {"num_sms", g.num_sms},
                     {"memory_bytes", g.memory_bytes()},
                     {"runtime_memory_bytes", g.runtime_memory_bytes},
                     {"runtime_memory_basis", to_string(g.runtime_basis)},
                     {"runtime_memory_upper_bound", is_upper_bound(g.runtime_basis)},
                     {"runtime_memory_source", g.runtime_memory_source},
                     {"memory_note", g.memory_note},
                     {"unified_memory", g.unified_memory},
                     {"default", g.id == kDefaultGpuId},
                     {"note", g.note}});
    }
    j["gpus"] = std::move(arr);
    out << dump_json(j);
    return;
  }
  char line[768];
  std::snprintf(line, sizeof line, "%-14s %-38s %-6s %-20s %5s %9s %11s  %s\n", "id", "name", "arch", "family", "SMs",
                "nominal", "runtime", "note");
  out << line;
  for (const auto& g : gpu_presets()) {
    const std::string id = std::string(g.id) + (g.id == kDefaultGpuId ? " *" : "");
    const char* mark = is_upper_bound(g.runtime_basis) ? "<" : g.runtime_basis == MemoryBasis::fixture ? "?" : " ";
    char runtime[32];
    std::snprintf(runtime, sizeof runtime, "%s%.2f GiB", mark,
                  static_cast<double>(g.runtime_memory_bytes) / static_cast<double>(std::int64_t{1} << 30));
    std::string note(g.note);
    if (!g.memory_note.empty()) note += std::string(note.empty() ? "" : "; ") + std::string(g.memory_note);
    std::snprintf(line, sizeof line, "%-14s %-38s %-6s %-20s %5lld %5lld GB %-1s %11s  %s\n", id.c_str(),
                  std::string(g.name).c_str(), g.cc.sm().c_str(), std::string(arch_family_title(g.family)).c_str(),
                  static_cast<long long>(g.num_sms), static_cast<long long>(g.memory_gib), g.unified_memory ? "u" : "",
                  runtime, note.c_str());
    out << line;
  }
  out << "* the default target. u unified memory, shared with the CPU. runtime: the total the CUDA runtime reports "
         "(cudaMemGetInfo), which vLLM's --gpu-memory-utilization multiplies; the smallest seen for the part "
         "(--json gives each figure's source). < only nvidia-smi's total is known: an upper bound. ? from a test "
         "fixture, not confirmed on a device.\n"
         "Describe another GPU, or give your figures, with --arch, --num-sms and --gpu-memory-gib.\n";
}

void write_formats(std::ostream& out, bool json) {
  if (json) {
    ojson j = json_document();
    ojson arr = ojson::array();
    for (const auto& f : all_row_formats()) {
      ojson fields = ojson::array();
      for (const auto& x : f.fields) {
        fields.push_back({{"name", x.name},
                          {"region", x.region == Region::data ? "data" : "scale"},
                          {"offset", x.offset},
                          {"size", x.size},
                          {"element", x.element},
                          {"count", x.count},
                          {"covers", x.covers}});
      }
      arr.push_back({{"name", f.name},
                     {"title", f.title},
                     {"row_bytes", f.row_bytes},
                     {"page_alignment", f.page_alignment},
                     {"page_striped", f.page_striped},
                     {"data_bytes", f.data_bytes},
                     {"scale_bytes", f.scale_bytes},
                     {"dims", f.dims},
                     {"values_per_scale", f.tile},
                     {"fields", std::move(fields)},
                     {"scale_rule", f.scale_rule},
                     {"source", f.source},
                     {"used_by", f.used_by}});
    }
    j["formats"] = std::move(arr);
    out << dump_json(j);
    return;
  }
  for (const auto& f : all_row_formats()) {
    out << f.name << ": " << f.row_bytes << " bytes per row, " << f.title << "\n";
    out << "  page alignment " << f.page_alignment
        << (f.page_striped ? "; page-striped: N data parts (" + std::to_string(f.data_bytes) +
                                 " B each), then N scale parts (" + std::to_string(f.scale_bytes) + " B each)"
                           : std::string())
        << "\n";
    char line[256];
    for (const auto& x : f.fields) {
      std::snprintf(line, sizeof line, "  %-5s +%-5lld %5lld B  %4lld x %-7s %-22s %s\n",
                    x.region == Region::data ? "data" : "scale", static_cast<long long>(x.offset),
                    static_cast<long long>(x.size), static_cast<long long>(x.count), std::string(x.element).c_str(),
                    std::string(x.name).c_str(), std::string(x.covers).c_str());
      out << line;
    }
    if (!f.scale_rule.empty()) out << "  scale: " << f.scale_rule << "\n";
    out << "  used by: " << f.used_by << "\n  source: " << f.source << "\n\n";
  }
}

}  // namespace mlaplan::cli

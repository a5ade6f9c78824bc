// `mla-plan gpus` and `mla-plan formats`: the data tables the planner works from.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "output/json_out.hpp"
#include "mlaplan/hardware/formats.hpp"

namespace mlaplan::cli {

using ojson = nlohmann::ordered_json;

void setup_gpus(CLI::App& app, InfoOptions& opt) { app.add_flag("--json", opt.json, "machine-readable"); }

void setup_formats(CLI::App& app, InfoOptions& opt) { app.add_flag("--json", opt.json, "machine-readable"); }

int run_gpus(const InfoOptions& opt, std::ostream& out) {
  if (opt.json) {
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
                     {"unified_memory", g.unified_memory},
                     {"default", g.id == kDefaultGpuId},
                     {"note", g.note}});
    }
    j["gpus"] = std::move(arr);
    out << dump_json(j);
    return 0;
  }
  char line[512];
  std::snprintf(line, sizeof line, "%-14s %-34s %-6s %-20s %5s %11s  %s\n", "id", "name", "arch", "family", "SMs",
                "memory", "note");
  out << line;
  for (const auto& g : gpu_presets()) {
    const std::string id = std::string(g.id) + (g.id == kDefaultGpuId ? " *" : "");
    std::snprintf(line, sizeof line, "%-14s %-34s %-6s %-20s %5lld %5lld GiB %-1s  %s\n", id.c_str(),
                  std::string(g.name).c_str(), g.cc.sm().c_str(), std::string(arch_family_title(g.family)).c_str(),
                  static_cast<long long>(g.num_sms), static_cast<long long>(g.memory_gib), g.unified_memory ? "u" : "",
                  std::string(g.note).c_str());
    out << line;
  }
  out << "* the default target. u unified memory, shared with the CPU: less than the figure is there for the GPU.\n"
         "Describe another GPU, or give your figures, with --arch, --num-sms and --gpu-memory-gib.\n";
  return 0;
}

int run_formats(const InfoOptions& opt, std::ostream& out) {
  if (opt.json) {
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
    return 0;
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
  return 0;
}

namespace {

int run_gpus_command(const InfoOptions& opt, std::ostream& out, std::ostream&) { return run_gpus(opt, out); }
int run_formats_command(const InfoOptions& opt, std::ostream& out, std::ostream&) { return run_formats(opt, out); }

}  // namespace

const CommandRow& gpus_command() {
  static const CommandRow row =
      command_row<InfoOptions, setup_gpus, run_gpus_command>("gpus", "List the GPU presets (--gpu ids)");
  return row;
}

const CommandRow& formats_command() {
  static const CommandRow row = command_row<InfoOptions, setup_formats, run_formats_command>(
      "formats", "Print every KV row format with its byte map");
  return row;
}

}  // namespace mlaplan::cli

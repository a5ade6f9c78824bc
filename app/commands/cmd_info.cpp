// `mla-plan gpus` and `mla-plan formats`: the data tables the planner works from.

#include <CLI/CLI.hpp>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "output/info_output.hpp"

namespace mlaplan::cli {

void setup_gpus(CLI::App& app, InfoOptions& opt) { app.add_flag("--json", opt.json, "machine-readable"); }

void setup_formats(CLI::App& app, InfoOptions& opt) { app.add_flag("--json", opt.json, "machine-readable"); }

int run_gpus(const InfoOptions& opt, std::ostream& out) {
  write_gpus(out, opt.json);
  return 0;
}

int run_formats(const InfoOptions& opt, std::ostream& out) {
  write_formats(out, opt.json);
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

// verify's text matrix and --json document (verify_output.hpp, docs/verify.md).

#include "output/verify_output.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "output/json_out.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan::cli {

namespace {

std::string sci(double v) { return format_scientific(v, 2); }

std::string mode_name(const std::optional<DecodeMode>& m) { return m ? std::string(to_string(*m)) : std::string(); }

ojson launch_json(const VerifyLaunch& l) {
  return {{"kernel", l.kernel},
          {"mode", std::string(to_string(l.mode))},
          {"grid", {l.grid_x, l.grid_y, l.grid_z}},
          {"cluster", {l.cluster_x, 1, l.cluster_z}},
          {"block", l.block},
          {"pair", l.pair},
          {"pdl", l.pdl},
          {"combine", l.combine},
          {"fallback", l.fallback},
          {"description", l.description}};
}

/// A status as the JSON documents spell it: pass, fail, not_run, no_python, ... (lower, snake case).
std::string engine_status_id(EngineStatus st) {
  std::string s(to_string(st));
  for (auto& ch : s) ch = ch == ' ' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

ojson optional_number(const std::optional<double>& v) { return v ? ojson(*v) : ojson(nullptr); }

ojson engine_json(const VerifyCell& c) {
  const EngineCellResult& e = *c.engine;
  ojson j = {{"status", engine_status_id(e.status)},
             {"message", e.message},
             {"looked_for", e.looked_for},
             {"where", e.where},
             {"route", e.route},
             {"module", e.module},
             {"file", e.file},
             {"version", e.version},
             {"op", e.op},
             {"schema", e.schema},
             {"device", {{"name", e.device_name}, {"capability", e.device_capability}}},
             {"versions", {{"python", e.python_version}, {"torch", e.torch_version}, {"cuda", e.cuda_version}}},
             {"ran", e.ran}};
  if (e.ran) {
    j["max_abs"] = e.decode.max_abs;
    j["max_rel"] = e.decode.max_rel;
    j["cos_diff"] = e.decode.cos_diff;
    j["lse_max_abs"] = e.decode.lse_max_abs;
    j["own_max_abs"] = c.decode.max_abs;
    j["own_cos_diff"] = c.decode.cos_diff;
    j["metadata"] = {{"returned", e.metadata_returned},
                     {"match", e.metadata_returned ? ojson(e.metadata_match) : ojson(nullptr)},
                     {"message", e.metadata_message},
                     {"num_sm_parts", e.metadata_parts}};
    j["engine_us"] = optional_number(e.graph_us);
    j["engine_min_us"] = optional_number(e.graph_min_us);
    j["engine_eager_us"] = optional_number(e.eager_us);
    j["own_decode_us"] = c.decode_us;
    j["timing_note"] = e.timing_note;
  }
  j["bundle"] = e.bundle;
  j["probe_exit"] = e.probe_exit;
  j["probe_stderr"] = e.probe_stderr;
  return j;
}

ojson cell_json(const VerifyCell& c) {
  ojson j = {{"kv_cache_dtype", c.kv_cache_dtype},
             {"layer_type", std::string(to_string(c.type))},
             {"h_q", c.h_q},
             {"decode_mode", c.mode ? ojson(mode_name(c.mode)) : ojson(nullptr)},
             {"status", std::string(to_string(c.status))},
             {"forced", c.forced},
             {"reason", c.reason}};
  if (c.planned_mode) {
    j["planned_mode"] = mode_name(c.planned_mode);
    j["planned_reason"] = c.planned_reason;
  }
  if (!c.main_format.empty()) {
    j["main"] = {
        {"format", c.main_format}, {"page_block_size", c.main_page}, {"page_stride", c.main_stride}, {"topk", c.topk}};
  }
  if (!c.extra_format.empty()) {
    j["extra"] = {{"format", c.extra_format},
                  {"page_block_size", c.extra_page},
                  {"page_stride", c.extra_stride},
                  {"topk", c.extra_topk}};
  }
  if (c.ran) {
    j["b"] = c.b;
    j["kernel"] = c.kernel;
    if (c.launch.reported) {
      j["mode_ran"] = std::string(to_string(c.launch.mode));
      j["launch"] = launch_json(c.launch);
    }
    j["quantize_match"] = c.quantize_match;
    j["schedule_match"] = c.schedule_match;
    j["max_abs"] = c.decode.max_abs;
    j["max_rel"] = c.decode.max_rel;
    j["cos_diff"] = c.decode.cos_diff;
    j["lse_max_abs"] = c.decode.lse_max_abs;
    j["tolerance"] = {
        {"abs", 1e-3}, {"rel", 2.01 / 128}, {"cos_diff", 5e-6}, {"lse_abs", 1e-6}, {"lse_rel", 8.01 / 65536}};
    j["decode_us"] = c.decode_us;
  }
  if (c.engine) j["engine"] = engine_json(c);
  return j;
}

ojson device_json(const VerifyGpuInfo& g) {
  return {{"index", g.index},
          {"name", g.name},
          {"compute_capability", g.compute_capability},
          {"num_sms", g.num_sms},
          {"memory_bytes", g.memory_bytes},
          {"driver_version", g.driver_version},
          {"runtime_version", g.runtime_version}};
}

/// The keys of one device's results, in the order the document has them.
void put_results(ojson& j, const VerifyDeviceReport& d) {
  if (d.rank) {
    j["rank"] = {
        {"rank", d.rank->rank}, {"tp_rank", d.rank->tp_rank}, {"dp_rank", d.rank->dp_rank}, {"ranks", d.rank->ranks}};
  }
  std::vector<Finding> findings;
  for (const auto& r : d.report.rules) findings.push_back(r.finding);
  j["findings"] = findings_json(findings);
  j["batch"] = {{"context_lens", d.report.batch.context_lens}, {"description", d.report.batch.description}};
  ojson cells = ojson::array();
  for (const auto& c : d.report.cells) cells.push_back(cell_json(c));
  j["matrix"] = std::move(cells);
  j["seconds"] = d.seconds;
}

/// Every column but the last (layout / reason), which follows whole.
constexpr const char* kRowFormat = "%-13s %-8s %4s %-14s %-13s %-12s %9s %9s %9s %9s %9s  %-7s %-9s %-7s %-4s  ";

void write_matrix(std::ostream& out, const VerifyReport& report, bool mark_planned) {
  char line[1024];
  std::snprintf(line, sizeof line, kRowFormat, "kv dtype", "type", "h_q", "mode", "ran", "result", "max abs", "max rel",
                "cos diff", "lse abs", "time us", "kernel", "grid", "cluster", "pair");
  out << line << "layout / reason\n";
  for (const auto& c : report.cells) {
    const std::string status = std::string(to_string(c.status)) + (c.forced ? "*" : "");
    const std::string h = c.h_q ? std::to_string(c.h_q) : "-";
    std::string mode = c.mode ? mode_name(c.mode) : "-";
    if (mark_planned && c.mode && c.planned_mode == c.mode) mode += "+";
    const bool launched = c.ran && c.launch.reported;
    const std::string ran = launched ? std::string(to_string(c.launch.mode)) : "-";
    const std::string kernel = launched && !c.launch.kernel.empty() ? c.launch.kernel : "-";
    const std::string grid = launched ? verify_grid_text(c.launch) : "-";
    const std::string cluster = launched ? verify_cluster_text(c.launch) : "-";
    const std::string pair = launched && c.launch.pair ? "yes" : "-";
    std::string last;
    if (c.ran) {
      last = c.main_format + "/" + std::to_string(c.main_page);
      if (!c.extra_format.empty()) last += " + " + c.extra_format + "/" + std::to_string(c.extra_page);
      if (launched && !c.launch.fallback.empty()) last += "; fallback: " + c.launch.fallback;
      if (!c.reason.empty()) last += "; " + c.reason;
      std::snprintf(line, sizeof line, kRowFormat, c.kv_cache_dtype.c_str(), std::string(to_string(c.type)).c_str(),
                    h.c_str(), mode.c_str(), ran.c_str(), status.c_str(), sci(c.decode.max_abs).c_str(),
                    sci(c.decode.max_rel).c_str(), sci(c.decode.cos_diff).c_str(), sci(c.decode.lse_max_abs).c_str(),
                    format_fixed(c.decode_us, 1).c_str(), kernel.c_str(), grid.c_str(), cluster.c_str(), pair.c_str());
    } else {
      std::snprintf(line, sizeof line, kRowFormat, c.kv_cache_dtype.c_str(), std::string(to_string(c.type)).c_str(),
                    h.c_str(), mode.c_str(), "-", status.c_str(), "-", "-", "-", "-", "-", "-", "-", "-", "-");
      last = c.reason;
    }
    out << line << last << "\n";
  }
}

/// verify --engine-kernels: the engine's op beside mla-plan's kernels, one row per cell that has a
/// result, then what was looked for and where for each result that is not a PASS or FAIL (once).
void write_engine_table(std::ostream& out, const VerifyReport& report) {
  bool any = false;
  for (const auto& c : report.cells) any = any || c.engine.has_value();
  if (!any) return;
  std::string op;
  for (const auto& c : report.cells) {
    if (c.engine && !c.engine->op.empty()) {
      const auto& e = *c.engine;
      op = e.op + (e.version.empty() ? "" : " " + e.version) + (e.file.empty() ? "" : " (" + e.file + ")");
      break;
    }
  }
  out << "\nthe engine's kernels on the same bytes" << (op.empty() ? "" : ": " + op) << "\n";
  constexpr const char* kFormat = "%-13s %-8s %4s %-14s %-16s %9s %9s %9s %9s %9s %9s %9s  %-8s  ";
  char line[1024];
  std::snprintf(line, sizeof line, kFormat, "kv dtype", "type", "h_q", "mode", "engine", "max abs", "cos diff",
                "own abs", "own cos", "engine us", "eager us", "own us", "metadata");
  out << line << "message\n";
  std::vector<std::string> said;
  for (const auto& c : report.cells) {
    if (!c.engine) continue;
    const auto& e = *c.engine;
    const std::string mode = c.mode ? mode_name(c.mode) : "-";
    auto us = [](const std::optional<double>& v) { return v ? format_fixed(*v, 1) : std::string("-"); };
    const std::string meta = !e.ran ? "-" : !e.metadata_returned ? "none" : e.metadata_match ? "equal" : "DIFFERS";
    std::snprintf(line, sizeof line, kFormat, c.kv_cache_dtype.c_str(), std::string(to_string(c.type)).c_str(),
                  std::to_string(c.h_q).c_str(), mode.c_str(), std::string(to_string(e.status)).c_str(),
                  e.ran ? sci(e.decode.max_abs).c_str() : "-", e.ran ? sci(e.decode.cos_diff).c_str() : "-",
                  sci(c.decode.max_abs).c_str(), sci(c.decode.cos_diff).c_str(), us(e.graph_us).c_str(),
                  us(e.eager_us).c_str(), format_fixed(c.decode_us, 1).c_str(), meta.c_str());
    std::string row = std::string(line) + (e.status == EngineStatus::pass ? std::string() : printable(e.message));
    while (!row.empty() && row.back() == ' ') row.pop_back();
    out << row << "\n";
    if (e.status != EngineStatus::pass && e.status != EngineStatus::fail && e.status != EngineStatus::not_run) {
      std::string where;
      for (const auto& w : e.looked_for) where += (where.empty() ? "  looked for: " : "; ") + printable(w);
      std::string in;
      for (const auto& w : e.where) in += (in.empty() ? "\n  where: " : "\n         ") + printable(w);
      const std::string text = where + in;
      if (!text.empty() && std::find(said.begin(), said.end(), text) == said.end()) said.push_back(text);
    }
  }
  for (const auto& t : said) out << t << "\n";
  out << "engine us: the engine's op in a CUDA graph, L2 flushed before each replay, median (as bench times); "
         "eager us: eager calls, median (as verify times its own kernels); own: mla-plan's kernels in the cell's "
         "mode\n";
}

void write_findings_and_batch(std::ostream& out, const VerifyReport& report) {
  for (const auto& r : report.rules) {
    if (r.finding.severity == Severity::info) continue;
    out << "  " << to_string(r.finding.severity) << " [" << r.finding.id << "]: " << printable(r.finding.message)
        << "\n";
  }
  if (!report.batch.description.empty()) out << "batch: " << report.batch.description << "\n";
}

std::string device_head(const VerifyGpuInfo& g) {
  return g.name + " (" + g.sm + ", " + std::to_string(g.num_sms) + " SMs)";
}

std::string cell_counts(const VerifyReport& r) {
  std::size_t pass = 0, fail = 0, unsupported = 0;
  for (const auto& c : r.cells) {
    (c.status == VerifyStatus::pass ? pass : c.status == VerifyStatus::fail ? fail : unsupported) += 1;
  }
  std::string s = std::to_string(r.cells.size()) + " cell" + (r.cells.size() == 1 ? "" : "s");
  std::string parts;
  auto add = [&](std::size_t n, const char* what) {
    if (n) parts += (parts.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  };
  add(pass, "PASS");
  add(fail, "FAIL");
  add(unsupported, "UNSUPPORTED");
  return parts.empty() ? s : s + " (" + parts + ")";
}

void write_legend(std::ostream& out, const VerifyMultiReport& report, bool mark_planned) {
  bool forced = false, fallback = false;
  for (const auto& d : report.devices) {
    for (const auto& c : d.report.cells) {
      forced = forced || c.forced;
      fallback = fallback || (c.ran && !c.launch.fallback.empty());
    }
  }
  out << "tolerances: element abs 1e-3 or rel 2.01/128, cos diff 5e-6, lse abs 1e-6 or rel 8.01/65536"
      << (forced ? "; * ran with --force, outside the backend's support" : "") << "\n";
  out << "mode: asked of the kernels"
      << (mark_planned ? ", + the planner's choice for this batch" : " (the planner's choice)")
      << "; ran: as run (cluster_split runs as one_pass where no cluster fits"
      << (fallback ? ": the fallback says" : "") << "); grid and cluster (x by 1 by z CTAs): the decode kernel's\n";
}

}  // namespace

std::string verify_grid_text(const VerifyLaunch& l) {
  return std::to_string(l.grid_x) + "x" + std::to_string(l.grid_y) + "x" + std::to_string(l.grid_z);
}

std::string verify_cluster_text(const VerifyLaunch& l) {
  if (l.cluster_x <= 1 && l.cluster_z <= 1) return "-";
  return std::to_string(l.cluster_x) + "x1x" + std::to_string(l.cluster_z);
}

void write_verify_text(std::ostream& out, const std::string& config, const std::vector<VerifyGpuInfo>& gpus,
                       const VerifyMultiReport& report, const std::string& decode_mode) {
  const bool mark_planned = decode_mode != "planned";
  const std::string shown_config = printable(config, kQuotedPathMaxBytes);
  if (report.devices.size() == 1 && gpus.size() == 1) {
    const auto& d = report.devices.front();
    out << "mla-plan verify: " << shown_config << " on " << device_head(gpus.front()) << "\n";
    if (d.rank) out << "  runs " << d.rank->text() << " of the layout: its query heads, its DP rank's requests\n";
    write_findings_and_batch(out, d.report);
    write_matrix(out, d.report, mark_planned);
    write_engine_table(out, d.report);
    write_legend(out, report, mark_planned);
    return;
  }
  out << "mla-plan verify: " << shown_config << " on " << report.devices.size() << " devices, at once:";
  for (std::size_t i = 0; i < report.devices.size(); ++i) {
    out << (i ? "," : "") << " " << report.devices[i].label << " " << (i < gpus.size() ? gpus[i].name : "");
  }
  out << "\n";
  for (std::size_t i = 0; i < report.devices.size(); ++i) {
    const auto& d = report.devices[i];
    out << "\n" << d.label << ": " << (i < gpus.size() ? device_head(gpus[i]) : d.name) << ": exit " << d.exit_code;
    if (!d.error.empty()) {
      out << ", error: " << printable(d.error) << " (" << format_fixed(d.seconds, 1) << " s)\n";
      continue;
    }
    out << ", " << cell_counts(d.report) << " in " << format_fixed(d.seconds, 1) << " s\n";
    if (d.rank) out << "  runs " << d.rank->text() << " of the layout\n";
    write_findings_and_batch(out, d.report);
    write_matrix(out, d.report, mark_planned);
    write_engine_table(out, d.report);
  }
  out << "\n";
  write_legend(out, report, mark_planned);
}

std::string verify_json(const std::string& config, const std::vector<VerifyGpuInfo>& gpus,
                        const VerifyMultiReport& report, const std::string& decode_mode) {
  ojson j = json_document();
  j["config"] = config;
  j["decode_mode"] = decode_mode;
  if (report.devices.size() == 1 && gpus.size() == 1) {
    const auto& d = report.devices.front();
    j["device"] = device_json(gpus.front());
    put_results(j, d);
    j["exit_code"] = d.exit_code;
    return dump_json(j);
  }
  ojson devices = ojson::array();
  for (std::size_t i = 0; i < report.devices.size(); ++i) {
    const auto& d = report.devices[i];
    ojson e;
    e["label"] = d.label;
    e["device"] = i < gpus.size() ? device_json(gpus[i]) : ojson{{"index", d.index}, {"name", d.name}};
    put_results(e, d);
    if (!d.error.empty()) e["error"] = d.error;
    e["exit_code"] = d.exit_code;
    e["exit_message"] = d.exit_message;
    devices.push_back(std::move(e));
  }
  j["devices"] = std::move(devices);
  j["exit_code"] = report.exit_code;
  j["exit_message"] = report.exit_message;
  return dump_json(j);
}

}  // namespace mlaplan::cli

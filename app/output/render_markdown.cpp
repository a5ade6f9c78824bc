// `--format markdown` of `plan` and `check`: a compact summary for a pull-request comment.
// GitHub-flavoured Markdown; every value from a config or a message is made printable (one line,
// no control characters, valid UTF-8: mlaplan::printable()) and then escaped for tables.

#include <locale>
#include <sstream>

#include "output/backend_text.hpp"
#include "cli/commands.hpp"
#include "mlaplan/plan/launch.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/base/text.hpp"
#include "report/palette.hpp"

namespace mlaplan::cli {

namespace {

/// Text for a table cell or a line: printable() (control characters, newlines and invalid UTF-8
/// as escapes), then | escaped, HTML-significant characters as entities.
std::string md(const std::string& s) {
  std::string o;
  for (char c : printable(s)) {
    switch (c) {
      case '|': o += "\\|"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '\\': o += "\\\\"; break;
      case '*': o += "\\*"; break;
      case '_': o += "\\_"; break;
      case '`': o += "\\`"; break;
      case '[': o += "\\["; break;
      case ']': o += "\\]"; break;
      case '\n':
      case '\r': o += ' '; break;
      default: o += c;
    }
  }
  return o;
}

/// A code span holding printable(s) (backticks become single quotes; | escaped for tables).
std::string code(const std::string& s) {
  std::string o = "`";
  for (char c : printable(s)) {
    if (c == '`') o += '\'';
    else if (c == '|') o += "\\|";
    else if (c == '\n' || c == '\r') o += ' ';
    else o += c;
  }
  return o + "`";
}

std::string range(std::int64_t a, std::int64_t b) {
  return a == b ? std::to_string(a) : std::to_string(a) + "-" + std::to_string(b);
}

std::string comma_list(const std::vector<std::int64_t>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

void findings_table(std::ostringstream& o, const std::vector<Finding>& findings) {
  o << "| severity | id | message |\n|---|---|---|\n";
  for (const auto& f : findings) {
    o << "| " << (f.severity == Severity::error ? "**error**" : std::string(to_string(f.severity))) << " | "
      << code(f.id) << " | " << md(f.message);
    if (!f.fix.empty()) o << "<br>fix: " << md(f.fix);
    o << " |\n";
  }
}

}  // namespace

std::string render_plan_markdown(const PlanResult& r) {
  const auto& c = r.config;
  const auto& t = r.topology;
  std::ostringstream o;
  o.imbue(std::locale::classic());  // no digit grouping from the global locale
  o << "### mla-plan: " << code(c.source) << "\n\n";
  o << "**" << family_title(c.family) << "** (" << code(std::string(to_string(c.family)))
    << "): " << c.num_hidden_layers << " layers + " << c.num_draft_layers << " draft, " << c.num_attention_heads
    << " query heads, head_dim " << c.head_dim;
  if (c.sliding_window > 0) o << ", window " << c.sliding_window;
  o << ", index_topk " << c.index_topk << "  \n";
  o << "target " << code(r.target.id) << " (" << md(r.target.name) << ", " << r.target.cc.sm() << ", "
    << r.target.num_sms << " SMs)";
  if (r.layout) {
    o << ", kv " << code(std::string(to_string(r.layout->kv_cache_dtype))) << ", block " << r.layout->block_size
      << ", max_model_len " << format_grouped(r.layout->max_model_len);
  }
  o << "\n\n";
  if (r.exit_code == 0) o << "**Result: pass** (exit 0)\n\n";
  else o << "**Result: FAIL** (exit " << r.exit_code << "): " << md(r.exit_message) << "\n\n";
  if (r.sglang) {
    const SglangFit& sg = *r.sglang;
    o << "**SGLang** (" << sg.generation->id << " configurator): " << md(sg.verdict) << "  \n";
    if (!sg.refused) {
      o << md("mem_fraction_static " + format_shortest(sg.mem_fraction_static) + ", KV budget " +
              format_gib(sg.budget_bytes) + " per GPU, max_total_num_tokens " + format_grouped(sg.pools.full) +
              ", SWA pool " + format_grouped(sg.pools.swa) + " slots")
        << "  \n";
    }
    if (!sg.error.empty()) o << "error: " << code(sg.error) << "  \n";
    for (const auto& s : sg.suggestions) o << "would start: " << md(s) << "  \n";
    if (r.sglang_launch) o << "launch: " << code(r.sglang_launch->text()) << "  \n";
    o << "\n";
  }
  if (r.fit && r.engine != EngineChoice::sglang) {
    const Fit& f = *r.fit;
    const auto& pl = f.placement.layout;
    o << "**Fit** on " << pl.gpus() << " x " << code(r.target.id) << " (TP " << pl.tensor_parallel_size << " x DP "
      << pl.data_parallel_size << " x PP " << pl.pipeline_parallel_size
      << (pl.enable_expert_parallel ? ", expert parallel" : "") << ", vLLM " << f.release->version
      << "): " << md(f.verdict) << "  \n";
    if (f.vllm.fits && !f.refused) o << code(f.vllm.log_line) << "  \n";
    for (const auto& sg : f.suggestions) o << "would fit: " << md(sg) << "  \n";
    o << "\n| per GPU | weights | start-up overheads | KV cache | of total |\n|---|---:|---:|---:|---:|\n";
    for (const auto& st : f.stages) {
      const std::int64_t w = st.budget.weights_bytes();
      const std::int64_t over = st.budget.overhead_bytes();
      o << "| " << (f.stages.size() > 1 ? "stage " + std::to_string(st.weights.stage) : std::string("each GPU"))
        << " | " << format_gib(w) << " | " << format_gib(over) << " | " << format_gib(st.budget.available_bytes)
        << " | " << format_gib(st.budget.total_bytes) << " |\n";
    }
    o << "\nweights: " << md(f.weights_how) << "\n\n";
  }

  if (r.layout) {
    const Layout& l = *r.layout;
    o << "**Attention backend**: " << code(backend_title(l.backend, l.family));
    if (const Finding* f = backend_refusal(r)) o << " **refused** (" << code(f->id) << "; the closest entry is shown)";
    if (!l.backend_how.empty()) o << " (" << md(l.backend_how) << ")";
    o << "  \ndecode path: " << md(std::string(backend_info(l.backend).decode_path)) << "\n\n";
    if (!r.kernel_shapes.empty()) {
      o << "| phase | kernel | layer types | heads per rank -&gt; kernel | d\\_qk | topk (+ extra) | page rows | "
           "status |\n"
        << "|---|---|---|---:|---:|---:|---:|---|\n";
      for (const auto& s : r.kernel_shapes) {
        const bool available = s.status == ShapeStatus::available;
        o << "| " << md(s.phase) << " | " << md(s.kernel) << " | " << md(shape_layer_types(s)) << " | "
          << md(shape_heads(s)) << " | " << s.d_qk << " | " << md(shape_topk(s)) << " | " << md(shape_page_rows(s))
          << " | " << (available ? std::string("available") : "**" + std::string(to_string(s.status)) + "**");
        if (!available && !s.note.empty()) o << ": " << md(s.note);
        if (!available && !s.fix.empty()) o << "<br>fix: " << md(s.fix);
        o << " |\n";
      }
      o << "\n";
    }
  }

  o << "| type | layers | draft | attends to |\n|---|---:|---:|---|\n";
  for (auto type : t.types_present) {
    o << "| " << code(std::string(to_string(type))) << " | " << t.count(type) << " | " << t.count_draft(type) << " | "
      << md(std::string(type_style(type).meaning)) << " |\n";
  }
  o << "\n";

  std::vector<const LayerRun*> shared;
  for (const auto& run : t.runs) {
    if (run.kv_source && !(run.first == run.last && *run.kv_source == run.first)) shared.push_back(&run);
  }
  if (!shared.empty()) {
    o << "**Sharing groups**\n\n| layers | type | reads the compressed cache of | top-k from |\n|---|---|---:|---|\n";
    for (const auto* run : shared) {
      o << "| " << range(run->first, run->last) << " | " << code(std::string(to_string(run->type))) << " | "
        << *run->kv_source << " | " << comma_list(run->index_sources) << " |\n";
    }
    o << "\n";
    if (auto cs = t.candidate_source()) o << "Candidate source: layer " << *cs << ".\n\n";
  }

  if (r.layout) {
    const auto& a = r.layout->accounting;
    o << "**Bytes per token** (global): " << a.global_rows.str() << " in rows (DeepSeek's accounting), "
      << a.global_pages.str() << " in pages (the engine's); one request at max_model_len: " << format_gib(a.total_rows)
      << " in rows, " << format_gib(a.total_pages) << " in pages\n\n";
  }
  const std::string remark = schedules_remark(r);
  if (r.layout && r.schedules.empty()) o << "**Decode schedules**: none; " << md(remark) << "\n\n";
  if (!r.schedules.empty()) {
    o << "**Decode schedules** (" << md(r.batch.description) << ")\n\n";
    if (!remark.empty()) o << md(remark) << "\n\n";
    o << "| type | kernel | partitions used / idle | split requests | blocks per partition | mla-plan decode |\n"
      << "|---|---|---|---|---|---|\n";
    for (const auto& s : r.schedules) {
      const auto parts = static_cast<std::int64_t>(s.plan.records.size());
      o << "| " << code(std::string(to_string(s.type))) << " | " << code(std::string(to_string(s.plan.kernel))) << " | "
        << (parts - s.plan.idle_partitions) << " / " << s.plan.idle_partitions << " | " << s.plan.split_requests
        << " of " << s.plan.batch << " | " << s.plan.min_blocks_per_partition << "-" << s.plan.max_blocks_per_partition
        << " | " << code(std::string(to_string(s.mode.mode))) << " |\n";
    }
    o << "\n";
  }

  std::vector<Finding> problems, notes;
  for (const auto& f : r.findings) (f.severity == Severity::info ? notes : problems).push_back(f);
  if (problems.empty()) {
    o << "No errors or warnings.\n";
  } else {
    o << "**Findings**\n\n";
    findings_table(o, problems);
  }
  if (!notes.empty()) {
    o << "\n<details><summary>" << notes.size() << " note" << (notes.size() == 1 ? "" : "s")
      << " (defaults applied)</summary>\n\n";
    for (const auto& f : notes) o << "- " << md(f.message) << "\n";
    o << "\n</details>\n";
  }
  return o.str();
}

std::string render_check_markdown_head() {
  return "### mla-plan check\n\n| file | status | exit | findings |\n|---|---|---:|---|\n";
}

std::string render_check_markdown_row(const CheckSummaryRow& r) {
  std::ostringstream o;
  o.imbue(std::locale::classic());  // no digit grouping from the global locale
  o << "| " << code(r.path);
  if (!r.detail.empty()) o << "<br>" << md(r.detail);
  o << " | " << (r.code == 0 ? "pass" : "**FAIL**") << " | " << r.code << " | ";
  if (r.findings.empty()) o << "none";
  for (std::size_t i = 0; i < r.findings.size(); ++i) {
    const auto& f = r.findings[i];
    if (i) o << "<br>";
    o << (f.severity == Severity::error ? "**error**" : std::string(to_string(f.severity))) << " " << code(f.id) << ": "
      << md(f.message);
    if (!f.fix.empty()) o << " (fix: " << md(f.fix) << ")";
  }
  o << " |\n";
  return o.str();
}

std::string render_check_markdown_tail(std::size_t passed, std::size_t total) {
  return "\n**" + std::to_string(passed) + " of " + std::to_string(total) + " configs passed**\n";
}

}  // namespace mlaplan::cli

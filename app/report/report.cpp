// The drawings of `mla-plan report` (docs/report.md): the layer map, the memory picture, one
// decode-schedule chart per layer type, the findings and any verify / bench tables. Each section
// is an SVG group of known height; the SVG report stacks them in one document, the HTML report
// puts each drawing in its own inline <svg> under a heading and the rest in tables.

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

#include "mlaplan/base/number_format.hpp"
#include "report/palette.hpp"
#include "report/report.hpp"
#include "output/backend_text.hpp"
#include "report/figures.hpp"
#include "report/palette.hpp"
#include "report/svg.hpp"

namespace mlaplan::cli::figures {
namespace {

// ------------------------------------------------------------------ assembling

struct Section {
  std::string id;
  std::string heading;
  Figure figure;
};

std::vector<Section> drawings(const PlanResult& r) {
  std::vector<Section> s;
  s.push_back({"layer-map", "Layer map", layer_map(r)});
  s.push_back({"memory", "KV-cache memory", memory_picture(r)});
  s.push_back({"prefill", "Prefill workspace of the sparse indexer, per GPU", prefill_figure(r)});
  s.push_back({"kv-tiers", "Prefix cache and host offload", kv_tiers_figure(r)});
  s.push_back({"backend", "Attention backend and kernel shapes", backend_figure(r)});
  s.push_back({"schedules", "Decode schedules (FlashMLA tile scheduler), one per layer type", schedules(r)});
  return s;
}

Element svg_root(double raw_height) {
  const double height = std::ceil(raw_height);
  Element root("svg");
  root.set("width", kWidth).set("height", height);
  root.set("viewBox", "0 0 " + svg::num(kWidth) + " " + svg::num(height));
  root.set("font-family", kFontStack);
  return root;
}

}  // namespace
}  // namespace mlaplan::cli::figures

namespace mlaplan::cli {

std::vector<PartBytes> bytes_by_part(const Layout& layout) {
  // The library's accounting by cache kind (layout.hpp), in the picture's order of parts.
  const auto by_kind = bytes_by_cache_kind(layout);
  std::vector<PartBytes> parts(kCachePartStyles.size());
  for (std::size_t k = 0; k < by_kind.size(); ++k) {
    const auto& b = by_kind[k];
    auto& p = parts[static_cast<std::size_t>(cache_part(static_cast<CacheKind>(k)))];
    p.rows_per_token += b.rows_per_token;
    p.pages_per_token += b.pages_per_token;
    p.request_rows += b.request_rows;
    p.request_pages += b.request_pages;
  }
  return parts;
}

std::string render_report_svg(const PlanResult& r, const std::vector<ResultFile>& extras) {
  using namespace figures;  // NOLINT(google-build-using-namespace): the figures and their measures
  auto sections = drawings(r);
  sections.push_back({"findings", "Findings", findings_figure(r)});
  for (const auto& e : extras) {
    sections.push_back({e.flag == "--bench-json" ? "bench" : "verify", e.title, result_figure(e)});
  }

  Element body = svg::group("report");
  // Header.
  double y = 0;
  body.add(text_at(kMargin, y + 30, "mla-plan report: " + r.config.source, 20, "start", kInk, true));
  body.add(text_at(kMargin, y + 52, model_line(r), 13));
  body.add(text_at(kMargin, y + 70, target_line(r), 13, "start", kMuted));
  {
    Element status = svg::group("status");
    status.set("data-exit-code", r.exit_code);
    const std::string text = svg::fit_text(status_text(r), 12.5, kWidth - 2 * kMargin - 20);
    status.add(filled_rect(kMargin, y + 80, svg::text_width(text, 12.5) + 20, 22, status_colour(r))).set("rx", 4);
    status.add(text_at(kMargin + 10, y + 95, text, 12.5, "start", "#ffffff", true));
    body.add(std::move(status));
  }
  y += 116;
  for (auto& s : sections) {
    Element head = text_at(kMargin, y + 20, s.heading, 17, "start", kInk, true);
    head.set("class", "section-title");
    body.add(std::move(head));
    Element rule = svg::line(kMargin, y + 28, kWidth - kMargin, y + 28);
    rule.set("stroke", kGrid);
    body.add(std::move(rule));
    y += 40;
    Element placed = translated(0, y);
    placed.set("id", s.id);
    placed.add(std::move(s.figure.body));
    body.add(std::move(placed));
    y += s.figure.height + 16;
  }
  y = std::ceil(y);
  Element root = svg_root(y);
  root.set("data-family", to_string(r.config.family));
  root.add(filled_rect(0, 0, kWidth, y, "#ffffff"));
  root.add(std::move(body));
  return svg::document(std::move(root));
}

namespace {

constexpr std::string_view kCss =
    "body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;color:#1f2328;background:#ffffff;"
    "margin:24px auto;max-width:1260px;padding:0 12px}"
    "h1{font-size:22px;margin:0 0 6px}"
    "h2{font-size:18px;margin:28px 0 10px;padding-bottom:4px;border-bottom:1px solid #d0d7de}"
    "h3{font-size:15px;margin:16px 0 6px}"
    "p.meta{margin:2px 0;color:#57606a;font-size:14px}"
    ".status{display:inline-block;margin:8px 0;padding:3px 10px;border-radius:4px;color:#ffffff;font-weight:bold}"
    "svg{display:block;max-width:100%;height:auto}"
    "table{border-collapse:collapse;font-size:13px;margin:6px 0 14px}"
    "th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}"
    "th{background:#eaeef2}"
    "tr:nth-child(even) td{background:#f6f8fa}"
    "td.sev{font-weight:bold;color:#ffffff}"
    "td.error{background:#b42318 !important}"
    "td.warning{background:#b54708 !important}"
    "td.info{background:#475467 !important}"
    "td.pass{color:#067647;font-weight:bold}"
    "td.fail{color:#b42318;font-weight:bold}"
    "td.warn{color:#b54708;font-weight:bold}"
    "tr.missing td{background:#fbe9e7}"
    "code{font-family:monospace;font-size:12px}"
    "ul.notes{color:#57606a;font-size:13px}";

svg::Element html_table(const std::vector<std::string>& header) {
  svg::Element table("table");
  svg::Element& tr = table.add(svg::Element("tr"));
  for (const auto& h : header) tr.add(svg::Element("th")).text(h);
  return table;
}

}  // namespace

std::string render_report_html(const PlanResult& r, const std::vector<ResultFile>& extras) {
  using namespace figures;  // NOLINT(google-build-using-namespace): the figures and their measures
  Element html("html");
  html.set("xmlns", "http://www.w3.org/1999/xhtml").set("lang", "en");
  {
    Element head("head");
    head.add(Element("meta")).set("charset", "utf-8");
    // Nothing may be fetched: a browser blocks (and reports) any load the page would attempt.
    head.add(Element("meta"))
        .set("http-equiv", "Content-Security-Policy")
        .set("content", "default-src 'none'; style-src 'unsafe-inline'; img-src data:");
    head.add(Element("title")).text("mla-plan report: " + r.config.source);
    head.add(Element("style")).add(Element::raw_node(std::string(kCss)));
    html.add(std::move(head));
  }
  Element body("body");
  body.add(Element("h1")).text("mla-plan report: " + r.config.source);
  body.add(Element("p")).set("class", "meta").text(model_line(r));
  body.add(Element("p")).set("class", "meta").text(target_line(r));
  body.add(Element("div"))
      .set("class", "status")
      .set("data-exit-code", r.exit_code)
      .set("style", "background:" + std::string(status_colour(r)))
      .text(status_text(r));

  for (auto& s : drawings(r)) {
    body.add(Element("h2")).set("id", s.id).text(s.heading);
    if (s.id == "backend") {
      // A table, not a drawing: the backend's lines, then one row per kernel shape.
      if (!r.layout) {
        body.add(Element("p")).text("No layout: no backend was chosen.");
        continue;
      }
      const Layout& l = *r.layout;
      const BackendInfo& b = backend_info(l.backend);
      Element& p = body.add(Element("p"));
      p.set("class", "backend").set("data-backend", b.key);
      p.add(Element("strong")).text(backend_heading(r));
      p.add(Element("span")).text(" (" + std::string(b.attention_class) + ", " + std::string(b.source) + ")");
      if (!l.backend_how.empty()) body.add(Element("p")).set("class", "meta").text("chosen: " + l.backend_how);
      body.add(Element("p")).set("class", "meta").text("decode path: " + std::string(b.decode_path));
      if (r.kernel_shapes.empty()) continue;
      std::vector<std::string> header(kKernelShapeColumns.begin(), kKernelShapeColumns.end());
      header.push_back("note");
      Element table = html_table(header);
      table.set("class", "kernel-shapes");
      for (const auto& x : r.kernel_shapes) {
        Element& tr = table.add(Element("tr"));
        tr.set("class", "kernel-shape " + std::string(to_string(x.status))).set("data-status", to_string(x.status));
        const auto cells = kernel_shape_cells(x);
        for (std::size_t c = 0; c + 1 < cells.size(); ++c) tr.add(Element("td")).text(cells[c]);
        tr.add(Element("td"))
            .set("class", x.status == ShapeStatus::available ? "pass"
                          : x.status == ShapeStatus::missing ? "fail"
                                                             : "warn")
            .text(cells.back());
        std::string note = x.note;
        if (!x.fix.empty()) note += (note.empty() ? "fix: " : "; fix: ") + x.fix;
        tr.add(Element("td")).text(note);
      }
      body.add(std::move(table));
      continue;
    }
    if (s.id == "kv-tiers") {
      // A table, not a drawing.
      const auto rows = kv_tier_rows(r);
      if (rows.empty()) {
        body.add(Element("p")).text("No KV-cache groups: no prefix cache, no host tier.");
        continue;
      }
      Element table = html_table({"what", "value"});
      table.set("class", "kv-tiers");
      for (const auto& [label, value] : rows) {
        Element& tr = table.add(Element("tr"));
        tr.add(Element("td")).text(label);
        tr.add(Element("td")).text(value);
      }
      body.add(std::move(table));
      continue;
    }
    Element root = svg_root(s.figure.height);
    root.set("xmlns", "http://www.w3.org/2000/svg");
    root.add(std::move(s.figure.body));
    body.add(std::move(root));
  }

  body.add(Element("h2")).set("id", "findings").text("Findings");
  std::vector<const Finding*> problems, notes;
  for (const auto& x : r.findings) (x.severity == Severity::info ? notes : problems).push_back(&x);
  if (problems.empty()) {
    body.add(Element("p")).set("class", "findings-none").text("No errors or warnings.");
  } else {
    Element table = html_table({"severity", "id", "message", "fix"});
    table.set("class", "findings");
    for (const auto* x : problems) {
      Element& tr = table.add(Element("tr"));
      tr.add(Element("td"))
          .set("class", "sev " + std::string(to_string(x->severity)))
          .text(std::string(to_string(x->severity)));
      tr.add(Element("td")).add(Element("code")).text(x->id);
      tr.add(Element("td")).text(x->message + (x->path.empty() ? "" : " (" + x->path + ")"));
      tr.add(Element("td")).text(x->fix);
    }
    body.add(std::move(table));
  }
  if (!notes.empty()) {
    body.add(Element("h3")).text("Notes (defaults applied, spellings normalised)");
    Element ul("ul");
    ul.set("class", "notes");
    for (const auto* x : notes) ul.add(Element("li")).text(x->message);
    body.add(std::move(ul));
  }

  for (const auto& e : extras) {
    body.add(Element("h2")).set("class", "results").text(e.title);
    std::string summary = e.flag + " " + e.path;
    for (const auto& [k, v] : e.summary) summary += " · " + k + " " + v;
    body.add(Element("p")).set("class", "meta").text(summary);
    if (e.tables.empty()) {
      body.add(Element("p")).text("No array of row objects under \"results\", \"matrix\" or \"rows\".");
    }
    for (const auto& t : e.tables) {
      body.add(Element("h3")).text(t.pointer + " (" + std::to_string(t.total_rows) + " rows)");
      Element table = html_table(t.columns);
      table.set("class", "result-table").set("data-pointer", t.pointer);
      for (const auto& row : t.rows) {
        Element& tr = table.add(Element("tr"));
        for (const auto& cell : row) {
          Element& td = tr.add(Element("td"));
          const auto colour = cell_colour(cell);
          if (colour == kPassColour) td.set("class", "pass");
          else if (colour == kErrorColour) td.set("class", "fail");
          td.text(cell);
        }
      }
      body.add(std::move(table));
      if (t.total_rows > static_cast<std::int64_t>(t.rows.size())) {
        body.add(Element("p"))
            .set("class", "meta")
            .text("... " + std::to_string(t.total_rows - static_cast<std::int64_t>(t.rows.size())) +
                  " more rows (the report lists the first " + std::to_string(t.rows.size()) + ")");
      }
    }
  }
  html.add(std::move(body));
  std::string out = "<!DOCTYPE html>\n";
  html.write(out);
  out += '\n';
  return out;
}

}  // namespace mlaplan::cli

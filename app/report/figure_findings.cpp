// The findings of the plan, by severity (docs/report.md).

#include <algorithm>
#include <array>
#include <cmath>

#include "mlaplan/base/number_format.hpp"
#include "output/backend_text.hpp"
#include "report/figures.hpp"
#include "report/palette.hpp"

namespace mlaplan::cli::figures {

Figure findings_figure(const PlanResult& r) {
  Figure f;
  Element& g = f.body;
  g.set("class", "findings");
  double y = 0;
  std::vector<const Finding*> problems, notes;
  for (const auto& x : r.findings) (x.severity == Severity::info ? notes : problems).push_back(&x);
  const double text_x = kMargin + 84, width = kWidth - text_x - kMargin;
  if (problems.empty()) {
    g.add(text_at(kMargin, y + 14, "No errors or warnings.", 13, "start", kPassColour, true));
    y += 24;
  }
  for (const auto* x : problems) {
    Element item = svg::group(std::string("finding ") + std::string(to_string(x->severity)));
    item.set("data-id", x->id);
    const auto colour = x->severity == Severity::error ? kErrorColour : kWarningColour;
    item.add(filled_rect(kMargin, y + 2, 74, 17, colour)).set("rx", 3);
    std::string sev(to_string(x->severity));
    std::transform(sev.begin(), sev.end(), sev.begin(),
                   [](char c) { return static_cast<char>(std::toupper(static_cast<unsigned char>(c))); });
    item.add(text_at(kMargin + 37, y + 15, sev, 10.5, "middle", "#ffffff", true));
    bool first = true;
    for (const auto& line : svg::wrap_text("[" + x->id + "] " + x->message, 12.5, width)) {
      item.add(text_at(text_x, y + 15, line, 12.5, "start", kInk, first));
      first = false;
      y += 18;
    }
    if (!x->fix.empty()) {
      for (const auto& line : svg::wrap_text("fix: " + x->fix, 12, width)) {
        item.add(text_at(text_x, y + 15, line, 12, "start", kMuted));
        y += 17;
      }
    }
    y += 6;
    g.add(std::move(item));
  }
  if (!notes.empty()) {
    g.add(text_at(kMargin, y + 16, "Notes (defaults applied, spellings normalised)", 12.5, "start", kInk, true));
    y += 24;
    for (const auto* x : notes) {
      Element item = svg::group("finding info");
      item.set("data-id", x->id);
      for (const auto& line : svg::wrap_text("· " + x->message, 11.5, kWidth - 2 * kMargin - 12)) {
        item.add(text_at(kMargin + 12, y + 13, line, 11.5, "start", kMuted));
        y += 16;
      }
      g.add(std::move(item));
    }
  }
  f.height = y + 6;
  return f;
}

}  // namespace mlaplan::cli::figures

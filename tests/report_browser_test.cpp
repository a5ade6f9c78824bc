// The report in a real browser: headless Chromium renders the HTML report of V4.1-Flash to a PNG
// and loads the SVG report as an XML document. Passes when the PNG is a real picture (larger
// than a blank page's), Chromium logged no console message for the report (it has no scripts, so
// any message means a blocked load, a parse problem or an error), and the SVG parsed.
//
// A control page proves the console check works on this Chromium: it logs a console error and a
// blocked load, and both must show up in the log.
//
// Then the text boxes: the SVG reports of the extremes of the limits (one request, 65,536
// requests of 100,000 tokens, 4,096 of the full length, V3.2, V4.0, a GPU no backend runs on, a
// layout that does not fit) are laid out by Chromium with a checking script (the reports
// themselves have none) that compares the boxes of every pair of <text> elements: no two may
// overlap by more than a pixel each way, and none may leave the drawing. A control drawing with
// two overlapping labels must be caught. Exits 77 (CTest: skipped) when Chromium is
// absent; set MLAPLAN_CHROMIUM to use another binary.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"

namespace fs = std::filesystem;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::cout << (ok ? "ok    " : "FAIL  ") << what << "\n";
  if (!ok) ++failures;
}

std::string quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) {
    if (c == '\'') o += "'\\''";
    else o += c;
  }
  return o + "'";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(needle) != std::string::npos) out.push_back(line);
  }
  return out;
}

struct Browser {
  std::string binary;
  fs::path dir;
  int runs = 0;

  /// Runs Chromium headless on `page` with `mode` (--screenshot=... or --dump-dom); returns the
  /// exit status, with stdout in `out` and the log (stderr) in `log`.
  int run(const fs::path& page, const std::string& mode, std::string& out, std::string& log) {
    const fs::path profile = dir / ("profile-" + std::to_string(++runs));
    const fs::path out_file = dir / ("out-" + std::to_string(runs) + ".txt");
    const fs::path log_file = dir / ("log-" + std::to_string(runs) + ".txt");
    const std::string cmd = "timeout 120 " + quote(binary) +
                            " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                            " --disable-background-networking --disable-component-update --disable-sync"
                            " --hide-scrollbars --enable-logging=stderr --v=0 --user-data-dir=" +
                            quote(profile.string()) + " --window-size=1400,2000 " + mode + " " +
                            quote("file://" + page.string()) + " >" + quote(out_file.string()) + " 2>" +
                            quote(log_file.string());
    const int status = std::system(cmd.c_str());
    out = slurp(out_file);
    log = slurp(log_file);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

/// The script run on each drawing: the pairs of overlapping <text> boxes (and texts outside the
/// drawing) as lines "A | B | w x h" into <pre id="overlaps">, then "done".
const char* const kOverlapScript = R"JS(
window.addEventListener('load', () => {
  const svg = document.querySelector('svg');
  const r = svg.getBoundingClientRect();
  const boxes = Array.from(document.querySelectorAll('svg text')).map(t => {
    const b = t.getBoundingClientRect();
    return {name: t.textContent.slice(0, 60), x0: b.left, y0: b.top, x1: b.right, y1: b.bottom};
  }).filter(b => b.x1 - b.x0 > 0.5 && b.y1 - b.y0 > 0.5);
  const lines = [];
  for (let i = 0; i < boxes.length; ++i) {
    for (let j = i + 1; j < boxes.length; ++j) {
      const a = boxes[i], b = boxes[j];
      const w = Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0), h = Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0);
      if (w > 1 && h > 1) lines.push(a.name + ' | ' + b.name + ' | ' + Math.round(w) + ' x ' + Math.round(h));
    }
  }
  for (const b of boxes) {
    if (b.x0 < r.left - 1 || b.x1 > r.right + 1 || b.y0 < r.top - 1 || b.y1 > r.bottom + 1) {
      lines.push('outside the drawing | ' + b.name);
    }
  }
  const pre = document.createElement('pre');
  pre.id = 'overlaps';
  pre.textContent = lines.join('\n') + '\ndone';
  document.body.appendChild(pre);
});
)JS";

/// `svg` (a drawing) in a page with the checking script.
std::string overlap_page(const std::string& svg) {
  std::string body = svg;
  if (body.rfind("<?xml", 0) == 0) body = body.substr(body.find("?>") + 2);
  return std::string("<!DOCTYPE html><html><head><meta charset=\"utf-8\"/><script>") + kOverlapScript +
         "</script></head><body style=\"margin:0\">" + body + "</body></html>";
}

/// The lines of <pre id="overlaps"> in a dumped DOM; {"no result"} when the script did not run.
std::vector<std::string> overlap_lines(const std::string& dom) {
  const std::string open = "<pre id=\"overlaps\">";
  const auto a = dom.find(open);
  if (a == std::string::npos) return {"no result"};
  const auto b = dom.find("</pre>", a);
  std::istringstream in(dom.substr(a + open.size(), b - a - open.size()));
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(line);
  }
  if (lines.empty() || lines.back() != "done") return {"no result"};
  lines.pop_back();
  return lines;
}

/// Width and height from a PNG's IHDR chunk; {0, 0} when `data` is not a PNG.
std::pair<std::uint32_t, std::uint32_t> png_size(const std::string& data) {
  static const std::string signature = "\x89PNG\r\n\x1a\n";
  if (data.size() < 24 || data.compare(0, 8, signature) != 0 || data.compare(12, 4, "IHDR") != 0) return {0, 0};
  auto be32 = [&](std::size_t i) {
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4; ++k) v = (v << 8) | static_cast<unsigned char>(data[i + k]);
    return v;
  };
  return {be32(16), be32(20)};
}

}  // namespace

int main() {
  const char* env = std::getenv("MLAPLAN_CHROMIUM");
  const std::string chromium = env != nullptr && *env != '\0' ? env : "/usr/bin/chromium";
  if (::access(chromium.c_str(), X_OK) != 0) {
    std::cout << "SKIP: no Chromium at " << chromium
              << " (install Debian's chromium package, or set MLAPLAN_CHROMIUM to a Chromium binary)\n";
    return 77;
  }

  Browser b{chromium, fs::temp_directory_path() / ("mlaplan-test-browser-" + std::to_string(::getpid())), 0};
  fs::remove_all(b.dir);
  fs::create_directories(b.dir);

  // The reports, written by the CLI in process.
  const std::string config = std::string(MLAPLAN_SOURCE_DIR) + "/configs/deepseek-v4.1-flash.json";
  const fs::path html = b.dir / "report.html", svg = b.dir / "report.svg";
  for (const auto& out : {html, svg}) {
    std::ostringstream o, e;
    const int code =
        mlaplan::cli::run_cli({"report", config, "--tp", "8", "-o", out.string()}, o, e);  // a layout that fits
    check(code == 0, "mla-plan report -o " + out.filename().string() + " exits 0" + (code ? ": " + e.str() : ""));
  }

  // 1. The control: console messages must reach the log, or the check below proves nothing.
  const fs::path control = b.dir / "control.html";
  write_file(control,
             "<!DOCTYPE html><html><head><meta charset=\"utf-8\"/><meta http-equiv=\"Content-Security-Policy\" "
             "content=\"default-src 'none'; script-src 'unsafe-inline'\"/></head><body><p>control</p>"
             "<img src=\"https://example.invalid/blocked.png\"/>"
             "<script>console.error('mla-plan-control-error');</script></body></html>");
  std::string out, log;
  b.run(control, "--screenshot=" + quote((b.dir / "control.png").string()), out, log);
  const auto control_lines = lines_with(log, "CONSOLE");
  bool saw_error = false, saw_block = false;
  for (const auto& l : control_lines) {
    saw_error = saw_error || l.find("mla-plan-control-error") != std::string::npos;
    saw_block = saw_block || l.find("blocked.png") != std::string::npos;
  }
  check(saw_error, "control page: Chromium logs console errors (\"CONSOLE ... mla-plan-control-error\")");
  check(saw_block, "control page: Chromium logs blocked loads as console messages");

  // 2. A blank page of the same size: the baseline for "non-trivial".
  const fs::path blank = b.dir / "blank.html";
  write_file(blank, "<!DOCTYPE html><html><body></body></html>");
  b.run(blank, "--screenshot=" + quote((b.dir / "blank.png").string()), out, log);
  const std::string blank_png = slurp(b.dir / "blank.png");

  // 3. The HTML report.
  const fs::path png = b.dir / "report.png";
  const int rc = b.run(html, "--screenshot=" + quote(png.string()), out, log);
  check(rc == 0, "chromium renders report.html (exit " + std::to_string(rc) + ")");
  const std::string png_data = slurp(png);
  const auto [w, h] = png_size(png_data);
  check(w == 1400 && h == 2000,
        "report.png is a 1400x2000 PNG (got " + std::to_string(w) + "x" + std::to_string(h) + ")");
  check(!blank_png.empty() && png_data.size() > 3 * blank_png.size(),
        "report.png (" + std::to_string(png_data.size()) + " bytes) is far larger than a blank page's (" +
            std::to_string(blank_png.size()) + " bytes)");
  const auto console = lines_with(log, "CONSOLE");
  check(console.empty(), "no console messages for report.html");
  for (const auto& l : console) std::cout << "      " << l << "\n";

  // 4. The SVG report as an XML document: no parser error, the drawing is there.
  b.run(svg, "--dump-dom", out, log);
  check(out.find("parsererror") == std::string::npos, "report.svg parses as XML in Chromium");
  check(out.find("class=\"layer c2a\"") != std::string::npos, "report.svg's DOM holds the layer cells");
  const auto svg_console = lines_with(log, "CONSOLE");
  check(svg_console.empty(), "no console messages for report.svg");
  for (const auto& l : svg_console) std::cout << "      " << l << "\n";

  // 5. Text boxes never overlap, at the extremes of the limits. The control first: the check must
  //    see two labels drawn on top of each other.
  const fs::path overlap_control = b.dir / "overlap-control.html";
  write_file(overlap_control, overlap_page("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"300\" height=\"100\">"
                                           "<text x=\"10\" y=\"50\" font-size=\"14\">first label</text>"
                                           "<text x=\"20\" y=\"52\" font-size=\"14\">second label</text></svg>"));
  b.run(overlap_control, "--dump-dom", out, log);
  const auto control_overlaps = overlap_lines(out);
  check(control_overlaps.size() == 1 && control_overlaps[0].rfind("first label | second label | ", 0) == 0,
        "overlap control: the two overlapping labels are caught");
  const std::string cfgdir = std::string(MLAPLAN_SOURCE_DIR) + "/configs/";
  const std::vector<std::vector<std::string>> extremes = {
      {cfgdir + "deepseek-v4.1-flash.json", "--tp", "8", "--batch", "1"},
      {cfgdir + "deepseek-v4.1-flash.json", "--tp", "8", "--batch", "65536", "--context-len", "100000"},
      {cfgdir + "deepseek-v4.1-flash.json", "--tp", "8", "--gpu", "b200", "--batch", "4096", "--context-len",
       "1048576"},
      {cfgdir + "deepseek-v4.1-flash.json", "--tp", "8", "--indexer-tiling", "none"},  // the prefill crossing
      {cfgdir + "deepseek-v4.1-flash.json"},
      {cfgdir + "deepseek-v4.1-flash.json", "--gpu", "a100"},
      {cfgdir + "deepseek-v4-flash.json", "--tp", "2", "--batch", "512"},
      {cfgdir + "deepseek-v3.2.json", "--tp", "8", "--batch", "1024", "--context-len", "163840"},
      {cfgdir + "small/v41-8layer-flat.json", "--batch", "3"},
  };
  int n = 0;
  for (const auto& args : extremes) {
    const fs::path drawing = b.dir / ("extreme-" + std::to_string(++n) + ".svg");
    std::vector<std::string> argv = {"report"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("-o");
    argv.push_back(drawing.string());
    std::ostringstream o, e;
    std::string what;
    for (std::size_t i = 0; i < args.size(); ++i)
      what += (i == 0 ? fs::path(args[0]).filename().string() : args[i]) + " ";
    const int code = mlaplan::cli::run_cli(argv, o, e);
    check(fs::exists(drawing), "report " + what + "is written (exit " + std::to_string(code) + ")");
    const fs::path page = b.dir / ("extreme-" + std::to_string(n) + ".html");
    write_file(page, overlap_page(slurp(drawing)));
    b.run(page, "--dump-dom", out, log);
    const auto overlaps = overlap_lines(out);
    check(overlaps.empty(), "report " + what + ": no overlapping text boxes (" + std::to_string(overlaps.size()) + ")");
    for (std::size_t i = 0; i < overlaps.size() && i < 10; ++i) std::cout << "      " << overlaps[i] << "\n";
  }

  if (failures == 0) {
    std::error_code ec;
    fs::remove_all(b.dir, ec);
    std::cout << "report renders in Chromium without console messages\n";
    return 0;
  }
  std::cout << failures << " check(s) failed; files kept in " << b.dir.string() << "\n";
  return 1;
}

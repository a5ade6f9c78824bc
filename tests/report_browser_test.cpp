// The report in a real browser: headless Chromium renders the HTML report of V4.1-Flash to a PNG
// and loads the SVG report as an XML document. Passes when the PNG is a real picture (larger
// than a blank page's), Chromium logged no console message for the report (it has no scripts, so
// any message means a blocked load, a parse problem or an error), and the SVG parsed.
//
// A control page proves the console check works on this Chromium: it logs a console error and a
// blocked load, and both must show up in the log. Exits 77 (CTest: skipped) when Chromium is
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

#include "cli.hpp"

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
    const int code = mlaplan::cli::run_cli({"report", config, "--tp", "8", "-o", out.string()}, o, e);  // a layout that fits
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
  check(w == 1400 && h == 2000, "report.png is a 1400x2000 PNG (got " + std::to_string(w) + "x" + std::to_string(h) + ")");
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

  if (failures == 0) {
    std::error_code ec;
    fs::remove_all(b.dir, ec);
    std::cout << "report renders in Chromium without console messages\n";
    return 0;
  }
  std::cout << failures << " check(s) failed; files kept in " << b.dir.string() << "\n";
  return 1;
}

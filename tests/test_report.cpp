// `mla-plan report` and `--format markdown`: the SVG writer's escaping, the report as strict XML
// with the expected elements for the bundled configs, the HTML page, determinism, the -o and
// result-file errors, and the Markdown summaries of plan and check.

#include <unistd.h>

#include <catch2/catch.hpp>

#include "mlaplan/base/number_format.hpp"
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "output/output.hpp"
#include "cli/commands.hpp"
#include "mlaplan/base/error.hpp"
#include "report/palette.hpp"
#include "report/report.hpp"
#include "report/svg.hpp"

namespace fs = std::filesystem;

namespace {

// ------------------------------------------------------------------ a strict XML checker

/// One element of a parsed document.
struct Node {
  std::string tag;
  std::vector<std::pair<std::string, std::string>> attrs;  ///< values with entities decoded
  std::vector<std::unique_ptr<Node>> children;
  std::string text;  ///< the element's own text, decoded

  std::string attr(const std::string& name) const {
    for (const auto& [k, v] : attrs) {
      if (k == name) return v;
    }
    return {};
  }
  bool has_class(const std::string& c) const {
    std::istringstream in(attr("class"));
    std::string tok;
    while (in >> tok) {
      if (tok == c) return true;
    }
    return false;
  }
  /// Every element below (and including) this one for which pred holds, in document order.
  template <class Pred>
  void collect(Pred pred, std::vector<const Node*>& out) const {
    if (pred(*this)) out.push_back(this);
    for (const auto& c : children) c->collect(pred, out);
  }
  /// All text below this element.
  std::string all_text() const {
    std::string s = text;
    for (const auto& c : children) s += " " + c->all_text();
    return s;
  }
};

/// A strict well-formedness check of the subset of XML the report writes: an optional XML
/// declaration and an optional <!DOCTYPE html>, then exactly one root element; every attribute
/// quoted and unique; &, < and > in text and attribute values only as entities; tags balanced.
class XmlParser {
 public:
  explicit XmlParser(const std::string& s) : s_(s) {}

  /// The root, or nullptr with error() set.
  std::unique_ptr<Node> parse() {
    try {
      skip_ws();
      if (starts("<?xml")) {
        const auto end = s_.find("?>", i_);
        if (end == std::string::npos) fail("unterminated XML declaration");
        i_ = end + 2;
      }
      skip_ws();
      if (starts("<!DOCTYPE html>")) i_ += 15;
      skip_ws();
      if (!starts("<")) fail("expected the root element");
      auto root = element();
      skip_ws();
      if (i_ != s_.size()) fail("content after the root element");
      return root;
    } catch (const std::runtime_error& e) {
      error_ = e.what();
      return nullptr;
    }
  }
  const std::string& error() const { return error_; }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error(what + " at byte " + std::to_string(i_) + ": '" + s_.substr(i_, 40) + "'");
  }
  bool starts(const char* p) const { return s_.compare(i_, std::strlen(p), p) == 0; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  static bool name_char(char c, bool first) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':') return true;
    return !first && ((c >= '0' && c <= '9') || c == '-' || c == '.');
  }
  std::string name() {
    const std::size_t b = i_;
    if (i_ >= s_.size() || !name_char(s_[i_], true)) fail("expected a name");
    while (i_ < s_.size() && name_char(s_[i_], false)) ++i_;
    return s_.substr(b, i_ - b);
  }
  /// Decodes one entity at s_[i_] == '&'.
  std::string entity() {
    const auto end = s_.find(';', i_);
    if (end == std::string::npos || end - i_ > 10) fail("'&' not part of an entity");
    const std::string e = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    if (e == "amp") return "&";
    if (e == "lt") return "<";
    if (e == "gt") return ">";
    if (e == "quot") return "\"";
    if (e == "apos") return "'";
    if (e.size() > 1 && e[0] == '#') {
      const bool hex = e[1] == 'x';
      const std::string digits = e.substr(hex ? 2 : 1);
      if (digits.empty() ||
          digits.find_first_not_of(hex ? "0123456789abcdefABCDEF" : "0123456789") != std::string::npos) {
        fail("bad character reference");
      }
      const long cp = std::stol(digits, nullptr, hex ? 16 : 10);
      if (cp < 0x80) return std::string(1, static_cast<char>(cp));
      return "?";
    }
    fail("unknown entity &" + e + ";");
  }
  std::unique_ptr<Node> element() {
    ++i_;  // '<'
    auto node = std::make_unique<Node>();
    node->tag = name();
    std::set<std::string> seen;
    while (true) {
      const std::size_t before = i_;
      skip_ws();
      if (starts("/>")) {
        i_ += 2;
        return node;
      }
      if (starts(">")) {
        ++i_;
        break;
      }
      if (i_ == before) fail("expected whitespace before an attribute");
      const std::string key = name();
      if (!seen.insert(key).second) fail("duplicate attribute " + key);
      if (!starts("=")) fail("attribute " + key + " has no value");
      ++i_;
      if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) fail("unquoted value of attribute " + key);
      const char q = s_[i_++];
      std::string value;
      while (true) {
        if (i_ >= s_.size()) fail("unterminated attribute value");
        const char c = s_[i_];
        if (c == q) {
          ++i_;
          break;
        }
        if (c == '<') fail("raw '<' in an attribute value");
        if (c == '>') fail("raw '>' in an attribute value");
        if (c == '&') {
          value += entity();
        } else {
          value += c;
          ++i_;
        }
      }
      node->attrs.emplace_back(key, value);
    }
    // Content.
    while (true) {
      if (i_ >= s_.size()) fail("unclosed element <" + node->tag + ">");
      if (starts("</")) {
        i_ += 2;
        const std::string closing = name();
        if (closing != node->tag) fail("</" + closing + "> closes <" + node->tag + ">");
        skip_ws();
        if (!starts(">")) fail("malformed closing tag");
        ++i_;
        return node;
      }
      if (starts("<!--") || starts("<![CDATA[") || starts("<?"))
        fail("comments, CDATA and processing instructions are not expected");
      if (starts("<")) {
        node->children.push_back(element());
        continue;
      }
      const char c = s_[i_];
      if (c == '>') fail("raw '>' in text");
      if (c == '&') {
        node->text += entity();
      } else {
        node->text += c;
        ++i_;
      }
    }
  }

  const std::string& s_;
  std::size_t i_ = 0;
  std::string error_;
};

std::unique_ptr<Node> parse_xml(const std::string& text) {
  XmlParser p(text);
  auto root = p.parse();
  INFO(p.error());
  REQUIRE(root != nullptr);
  return root;
}

bool well_formed(const std::string& text) { return XmlParser(text).parse() != nullptr; }

std::vector<const Node*> find_all(const Node& root, const std::function<bool(const Node&)>& pred) {
  std::vector<const Node*> out;
  root.collect(pred, out);
  return out;
}

// ------------------------------------------------------------------ helpers

struct Run {
  int code;
  std::string out;
  std::string err;
};

Run run(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int code = mlaplan::cli::run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

std::string cfg(const std::string& rel) { return std::string(MLAPLAN_SOURCE_DIR) + "/configs/" + rel; }

/// A fresh directory for this test process, removed at exit.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("mlaplan-test-report-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

TempDir& tmp() {
  static TempDir dir;
  return dir;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

/// The TP size on which a config fits on H200s (vLLM's start-up fit): the bundled checkpoints
/// need several GPUs; the small test configs fit on one.
std::int64_t fitting_tp(const std::string& config) {
  if (config == "deepseek-v4-flash.json") return 2;
  if (config.rfind("small/", 0) == 0) return 1;
  return 8;
}

mlaplan::cli::PlanResult plan_of(const std::string& config) {
  mlaplan::cli::PlanOptions opt;
  opt.config = cfg(config);
  opt.layout.options.tensor_parallel_size = fitting_tp(config);
  opt.layout_given.tensor_parallel = true;  // as --tp: this layout, not the search of one node
  return mlaplan::cli::compute_plan(opt);
}

std::map<std::string, int> cells_by_type(const Node& root, bool draft_only = false) {
  std::map<std::string, int> counts;
  for (const auto* n : find_all(root, [](const Node& x) { return x.has_class("layer"); })) {
    if (draft_only && !n->has_class("draft")) continue;
    ++counts[n->attr("data-type")];
  }
  return counts;
}

}  // namespace

// ------------------------------------------------------------------ the SVG writer

TEST_CASE("svg writer escapes text and attributes", "[report]") {
  using namespace mlaplan::svg;
  CHECK(escape_text("a < b && c > d") == "a &lt; b &amp;&amp; c &gt; d");
  CHECK(escape_text("say \"hi\" 'there'") == "say \"hi\" 'there'");
  CHECK(escape_attr("say \"hi\" 'there' <&>") == "say &quot;hi&quot; &#39;there&#39; &lt;&amp;&gt;");
  // Control characters and invalid UTF-8 cannot appear in XML 1.0: replaced by U+FFFD.
  CHECK(escape_text(std::string("a\x01"
                                "b")) ==
        "a\xEF\xBF\xBD"
        "b");
  CHECK(escape_text(std::string("caf\xC3\xA9")) == "caf\xC3\xA9");
  CHECK(escape_text(std::string("bad\xC3(")) == "bad\xEF\xBF\xBD(");
  CHECK(escape_text(std::string("\xED\xA0\x80")) == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(escape_attr("line\nbreak") == "line&#10;break");

  CHECK(num(3) == "3");
  CHECK(num(2.5) == "2.5");
  CHECK(num(1.0 / 3.0) == "0.33");
  CHECK(num(-0.001) == "0");
  CHECK(num(-12.345) == "-12.35");
  CHECK(grouped(74463232) == "74,463,232");
  CHECK(grouped(999) == "999");
  CHECK(grouped(-1234) == "-1,234");
  CHECK_THROWS_AS(num(std::nan("")), mlaplan::Error);
}

TEST_CASE("svg writer builds well-formed documents", "[report]") {
  using namespace mlaplan::svg;
  Element root("svg");
  root.set("width", 100).set("height", 50.5);
  Element& g = root.add(group("a b"));
  g.tooltip("tip: <1 & 2>");
  g.add(label(1, 2, "x < y & \"z\"", "middle")).set("data-v", "it's \"quoted\"");
  g.add(rect(0, 0, -5, 3));  // negative sizes clamp to 0
  root.add(Element::text_node(std::string("tail \x02 ]]> end")));
  const std::string doc = document(root);
  CHECK_THAT(doc, Catch::StartsWith("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg "));
  CHECK_THAT(doc, Catch::Contains("xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK_THAT(doc, Catch::Contains("width=\"0\""));
  auto parsed = parse_xml(doc);
  CHECK(parsed->tag == "svg");
  CHECK(parsed->attr("height") == "50.5");
  const auto texts = find_all(*parsed, [](const Node& n) { return n.tag == "text"; });
  REQUIRE(texts.size() == 1);
  CHECK(texts[0]->text == "x < y & \"z\"");
  CHECK(texts[0]->attr("data-v") == "it's \"quoted\"");
  CHECK(texts[0]->attr("text-anchor") == "middle");
  const auto titles = find_all(*parsed, [](const Node& n) { return n.tag == "title"; });
  REQUIRE(titles.size() == 1);
  CHECK(titles[0]->text == "tip: <1 & 2>");
  CHECK_THROWS_AS(Element("bad name"), mlaplan::Error);
  CHECK_THROWS_AS(Element("g").set("on click", "x"), mlaplan::Error);
}

TEST_CASE("the XML checker rejects what is not well-formed", "[report]") {
  CHECK(well_formed("<a><b x=\"1\"/>t &amp; u</a>"));
  CHECK_FALSE(well_formed("<a><b></a>"));            // unbalanced
  CHECK_FALSE(well_formed("<a x=1/>"));              // unquoted attribute
  CHECK_FALSE(well_formed("<a x=\"1\" x=\"2\"/>"));  // duplicate attribute
  CHECK_FALSE(well_formed("<a>fish & chips</a>"));   // raw &
  CHECK_FALSE(well_formed("<a>1 > 0</a>"));          // raw >
  CHECK_FALSE(well_formed("<a x=\"<\"/>"));          // raw < in a value
  CHECK_FALSE(well_formed("<a/><b/>"));              // two roots
  CHECK_FALSE(well_formed("<a>&nbsp;</a>"));         // not an XML entity
  CHECK_FALSE(well_formed("<a>"));                   // unclosed
}

TEST_CASE("text fitting and wrapping", "[report]") {
  using namespace mlaplan::svg;
  CHECK(fit_text("short", 12, 200) == "short");
  const std::string cut = fit_text("a rather long label that cannot fit", 12, 80);
  CHECK_THAT(cut, Catch::EndsWith("..."));
  CHECK(text_width(cut, 12) <= 80);
  const auto lines = wrap_text("one two three four five six seven eight nine ten", 12, 100);
  CHECK(lines.size() > 2);
  for (const auto& l : lines) CHECK(text_width(l, 12) <= 100);
  CHECK(wrap_text("", 12, 100) == std::vector<std::string>{""});
  // A word longer than the line is cut, never lost.
  std::string joined;
  for (const auto& l : wrap_text("abcdefghijklmnopqrstuvwxyz0123456789", 12, 60)) joined += l;
  CHECK(joined == "abcdefghijklmnopqrstuvwxyz0123456789");
}

// ------------------------------------------------------------------ the report's content

TEST_CASE("report memory bars: every segment is labelled, in the bar or on the line below it", "[report]") {
  // At 65,536 requests of 100,000 tokens the window segments are slivers next to the compressed
  // caches: their labels go to the line below the bar.
  const std::string out = (tmp().path / "slivers.svg").string();
  const auto res = run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--batch", "65536", "--context-len",
                        "100000", "-o", out});
  REQUIRE(res.code == 0);
  auto root = parse_xml(slurp(out));
  REQUIRE(root);
  int below = 0;
  const auto bars = find_all(*root, [](const Node& n) { return n.has_class("mem-bar") || n.has_class("capacity"); });
  REQUIRE_FALSE(bars.empty());
  for (const auto* bar : bars) {
    std::string texts;
    for (const auto* t : find_all(*bar, [](const Node& n) { return n.tag == "text"; })) texts += t->text + "\n";
    below += texts.find("not labelled in the bar: ") != std::string::npos;
    for (const auto* seg : find_all(*bar, [](const Node& n) { return n.has_class("segment"); })) {
      std::string label;
      for (const auto& c : seg->children) {
        if (c->tag == "title") label = c->text;
      }
      REQUIRE_FALSE(label.empty());
      const std::string value = label.substr(label.find(' ') + 1);
      INFO(bar->attr("data-accounting") << ": " << label);
      CHECK((texts.find(label) != std::string::npos || texts.find(value) != std::string::npos));
    }
  }
  CHECK(below > 0);
}

TEST_CASE("report of a GPU no backend runs on: no capacity drawn, the reason and the finding shown", "[report]") {
  const std::string out = (tmp().path / "a100.html").string();
  const auto res = run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--gpu", "a100", "-o", out});
  CHECK(res.code == 3);
  const std::string html = slurp(out);
  auto root = parse_xml(html);  // XHTML syntax
  REQUIRE(root);
  CHECK(find_all(*root, [](const Node& n) { return n.has_class("capacity"); }).empty());
  CHECK(html.find("not decided: no attention backend runs this model on a100") != std::string::npos);
  CHECK(html.find("Would fit") == std::string::npos);
  CHECK(html.find("<code>backend.arch</code>") != std::string::npos);
}

TEST_CASE("report SVG of V4.1-Flash: cells by type, draft layers, sources, sharing bands", "[report]") {
  const auto r = plan_of("deepseek-v4.1-flash.json");
  REQUIRE(r.exit_code == 0);
  auto root = parse_xml(mlaplan::cli::render_report_svg(r, {}));
  CHECK(root->tag == "svg");
  CHECK(root->attr("data-family") == "deepseek_v41");

  const auto cells = cells_by_type(*root);
  CHECK(cells == std::map<std::string, int>{{"c1a", 20}, {"c2a", 18}, {"swaonly", 5}});
  CHECK(cells_by_type(*root, true) == std::map<std::string, int>{{"swaonly", 3}});
  // Every layer once, with its number as data-layer.
  const auto layer_nodes = find_all(*root, [](const Node& n) { return n.has_class("layer"); });
  std::set<std::string> ids;
  for (const auto* n : layer_nodes) {
    ids.insert(n->attr("data-layer"));
    CHECK(n->has_class(n->attr("data-type")));
    CHECK_FALSE(find_all(*n, [](const Node& x) { return x.tag == "title"; }).empty());
  }
  CHECK(ids.size() == 43);
  CHECK(ids.count("0") == 1);
  CHECK(ids.count("42") == 1);

  auto layers_with = [&](const std::string& marker) {
    std::vector<std::string> out;
    for (const auto* n : layer_nodes) {
      if (!find_all(*n, [&](const Node& x) { return x.has_class(marker); }).empty())
        out.push_back(n->attr("data-layer"));
    }
    return out;
  };
  CHECK(layers_with("kv-source") == std::vector<std::string>{"2", "8", "14", "20"});
  CHECK(layers_with("index-source") == std::vector<std::string>{"2", "8", "14", "20"});
  CHECK(layers_with("reindex") == std::vector<std::string>{"24", "28", "32", "36"});
  CHECK(layers_with("candidate-source") == std::vector<std::string>{"20"});

  const auto bands = find_all(*root, [](const Node& n) { return n.has_class("share-band"); });
  REQUIRE(bands.size() == 4);
  std::vector<std::string> sources;
  for (const auto* b : bands) {
    sources.push_back(b->attr("data-source") + ":" + b->attr("data-first") + "-" + b->attr("data-last"));
    CHECK(find_all(*b, [](const Node& x) { return x.has_class("share-arrow"); }).size() == 1);
  }
  CHECK(sources == std::vector<std::string>{"2:2-7", "8:8-13", "14:14-19", "20:20-39"});

  const std::string text = root->all_text();
  for (const char* label :
       {"Layer map", "KV-cache memory", "Decode schedules", "Findings", "c1a: window + full-length", "KV source",
        "index source", "reindex", "candidate source", "draft layer (DSpark)", "sharing group", "1,790 B/token",
        "1,827 B/token", "Per GPU on 8 x h200 (TP 8 x DP 1 x PP 1), vLLM 0.31.0", "weights 47.44 GiB",
        "KV cache 68.19 GiB",
        "vLLM prints: GPU KV cache size: 32,823,353 tokens, Maximum concurrency for 1,048,576 "
        "tokens per request: 31.30x",
        "layers 2-7 read layer 2's compressed cache", "No errors or warnings."}) {
    INFO(label);
    CHECK_THAT(text, Catch::Contains(label));
  }
}

TEST_CASE("report SVG of V4-Flash and V3.2: cells by type", "[report]") {
  {
    auto root = parse_xml(mlaplan::cli::render_report_svg(plan_of("deepseek-v4-flash.json"), {}));
    CHECK(cells_by_type(*root) == std::map<std::string, int>{{"c128a", 20}, {"c4a", 21}, {"swaonly", 3}});
    CHECK(cells_by_type(*root, true) == std::map<std::string, int>{{"swaonly", 1}});
    // Every V4.0 layer owns its cache: no sharing bands.
    CHECK(find_all(*root, [](const Node& n) { return n.has_class("share-band"); }).empty());
    // Markers inside layer cells (the legend shows one of each too).
    std::size_t kv = 0, index = 0;
    for (const auto* cell : find_all(*root, [](const Node& n) { return n.has_class("layer"); })) {
      kv += find_all(*cell, [](const Node& n) { return n.has_class("kv-source"); }).size();
      index += find_all(*cell, [](const Node& n) { return n.has_class("index-source"); }).size();
    }
    CHECK(kv == 41);
    CHECK(index == 21);
    CHECK(find_all(*root, [](const Node& n) { return n.has_class("legend"); }).size() == 3);
    CHECK_THAT(root->all_text(), Catch::Contains("draft layer (MTP)"));
    CHECK_THAT(root->all_text(), Catch::Contains("c128a: window + all ratio-128 compressed entries"));
  }
  {
    auto root = parse_xml(mlaplan::cli::render_report_svg(plan_of("deepseek-v3.2.json"), {}));
    CHECK(cells_by_type(*root) == std::map<std::string, int>{{"dsa", 62}});
    CHECK(cells_by_type(*root, true) == std::map<std::string, int>{{"dsa", 1}});
    CHECK(root->attr("data-family") == "deepseek_v32");
  }
}

TEST_CASE("report: one schedule chart per layer type, idle partitions and splits drawn", "[report]") {
  for (const char* config : {"deepseek-v4.1-flash.json", "deepseek-v4-flash.json", "deepseek-v3.2.json"}) {
    INFO(config);
    const auto r = plan_of(config);
    auto root = parse_xml(mlaplan::cli::render_report_svg(r, {}));
    const auto charts = find_all(*root, [](const Node& n) { return n.has_class("schedule-chart"); });
    std::vector<std::string> chart_types, expected;
    for (const auto* c : charts) chart_types.push_back(c->attr("data-type"));
    for (auto t : r.topology.types_present) expected.push_back(std::string(mlaplan::to_string(t)));
    CHECK(chart_types == expected);
    REQUIRE(charts.size() == r.schedules.size());
    for (std::size_t i = 0; i < charts.size(); ++i) {
      const auto& plan = r.schedules[i].plan;
      const auto bars = find_all(*charts[i], [](const Node& n) { return n.has_class("partition"); });
      const auto idle =
          find_all(*charts[i], [](const Node& n) { return n.has_class("partition") && n.has_class("idle"); });
      CHECK(bars.size() == plan.records.size());
      CHECK(static_cast<std::int64_t>(idle.size()) == plan.idle_partitions);
      // Blocks drawn per busy partition add up to the blocks of the batch.
      std::int64_t drawn = 0, expected_blocks = 0;
      for (const auto* b : bars) {
        if (!b->has_class("idle")) drawn += std::stoll(b->attr("data-blocks"));
      }
      for (auto n : plan.blocks) expected_blocks += n;
      CHECK(drawn == expected_blocks);
      const auto split_pieces = find_all(*charts[i], [](const Node& n) { return n.has_class("split"); });
      CHECK(split_pieces.empty() == (plan.split_requests == 0));
      if (plan.idle_partitions > 0) CHECK_THAT(charts[i]->all_text(), Catch::Contains("idle ("));
    }
  }
}

TEST_CASE("report: memory parts add up to the layout's accounting", "[report]") {
  for (const char* config : {"deepseek-v4.1-flash.json", "deepseek-v4-flash.json", "deepseek-v3.2.json"}) {
    INFO(config);
    const auto r = plan_of(config);
    REQUIRE(r.layout);
    const auto parts = mlaplan::cli::bytes_by_part(*r.layout);
    REQUIRE(parts.size() == mlaplan::cli::kCachePartStyles.size());
    double rows = 0, pages = 0;
    std::int64_t req_rows = 0, req_pages = 0;
    for (const auto& p : parts) {
      rows += p.rows_per_token;
      pages += p.pages_per_token;
      req_rows += p.request_rows;
      req_pages += p.request_pages;
    }
    const auto& a = r.layout->accounting;
    CHECK(rows == Approx(a.global_rows.value()));
    CHECK(pages == Approx(a.global_pages.value()));
    CHECK(req_pages == a.total_pages);
    CHECK(std::llabs(req_rows - a.total_rows) <= 4);  // each part rounds its fraction up
    auto root = parse_xml(mlaplan::cli::render_report_svg(r, {}));
    CHECK(find_all(*root, [](const Node& n) { return n.has_class("mem-bar"); }).size() == 4);
    const auto cap = find_all(*root, [](const Node& n) { return n.has_class("capacity"); });
    REQUIRE(cap.size() == 1);
    REQUIRE(r.fit);
    CHECK(cap[0]->attr("data-concurrency") == mlaplan::format_fixed(r.fit->vllm.concurrency, 2));
    CHECK(cap[0]->attr("data-weights") == std::to_string(r.fit->stages[0].weights.total_bytes));
    CHECK(cap[0]->attr("data-available") == std::to_string(r.fit->stages[0].budget.available_bytes));
  }
}

TEST_CASE("report of an unsupported config shows the findings and the status", "[report]") {
  const auto r = plan_of("small/v41-8layer-flat.json");
  REQUIRE(r.exit_code == 3);
  auto root = parse_xml(mlaplan::cli::render_report_svg(r, {}));
  const auto errors = find_all(*root, [](const Node& n) { return n.has_class("finding") && n.has_class("error"); });
  CHECK(errors.size() == 3);
  CHECK(errors[0]->attr("data-id") == "backend.head_size");
  const auto status = find_all(*root, [](const Node& n) { return n.has_class("status"); });
  REQUIRE(status.size() == 1);
  CHECK(status[0]->attr("data-exit-code") == "3");
  CHECK_THAT(status[0]->all_text(), Catch::Contains("exit 3: head size 16"));
}

TEST_CASE("report HTML holds the drawings inline and the findings as a table", "[report]") {
  const auto r = plan_of("small/v41-8layer-flat.json");
  const std::string html = mlaplan::cli::render_report_html(r, {});
  CHECK_THAT(html, Catch::StartsWith("<!DOCTYPE html>\n<html"));
  auto root = parse_xml(html);  // the page is also well-formed XML (XHTML syntax)
  CHECK(root->tag == "html");
  const auto svgs = find_all(*root, [](const Node& n) { return n.tag == "svg"; });
  CHECK(svgs.size() == 4);
  for (const auto* s : svgs) CHECK(s->attr("xmlns") == "http://www.w3.org/2000/svg");
  CHECK(cells_by_type(*root) == std::map<std::string, int>{{"c1a", 3}, {"c2a", 3}, {"swaonly", 5}});
  const auto h2 = find_all(*root, [](const Node& n) { return n.tag == "h2"; });
  std::vector<std::string> headings;
  for (const auto* h : h2) headings.push_back(h->text);
  CHECK(headings ==
        std::vector<std::string>{"Layer map", "KV-cache memory", "Prefill workspace of the sparse indexer, per GPU",
                                 "Prefix cache and host offload", "Attention backend and kernel shapes",
                                 "Decode schedules (FlashMLA tile scheduler), one per layer type", "Findings"});
  const auto tables = find_all(*root, [](const Node& n) { return n.tag == "table" && n.has_class("findings"); });
  REQUIRE(tables.size() == 1);
  // header + 3 errors + the expert_dtype warning + the assumed num_nextn_predict_layers (a structural default)
  CHECK(find_all(*tables[0], [](const Node& n) { return n.tag == "tr"; }).size() == 6);
  // Self-contained: no scripts, no external references, a policy that blocks any load.
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  CHECK(html.find("@import") == std::string::npos);
  std::string rest = html;
  for (const char* ns : {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xhtml"}) {
    for (auto p = rest.find(ns); p != std::string::npos; p = rest.find(ns)) rest.erase(p, std::strlen(ns));
  }
  CHECK(rest.find("http://") == std::string::npos);
  CHECK(rest.find("https://") == std::string::npos);
  CHECK(rest.find("url(") == rest.find("url(#"));
  CHECK_THAT(html, Catch::Contains("Content-Security-Policy"));
}

TEST_CASE("report: the attention backend and one kernel-shape row per shape, missing shapes marked", "[report]") {
  // The flat test model's widths (topk 8) are no FlashMLA decode shape: its decode rows are missing.
  const auto r = plan_of("small/v41-8layer-flat.json");
  REQUIRE(r.layout);
  REQUIRE(!r.kernel_shapes.empty());
  std::size_t missing = 0;
  for (const auto& s : r.kernel_shapes) missing += s.status == mlaplan::ShapeStatus::missing;
  REQUIRE(missing > 0);
  REQUIRE(missing < r.kernel_shapes.size());

  // HTML: a table like the findings table, one row per shape after the header.
  auto html = parse_xml(mlaplan::cli::render_report_html(r, {}));
  const auto backend = find_all(*html, [](const Node& n) { return n.tag == "p" && n.has_class("backend"); });
  REQUIRE(backend.size() == 1);
  CHECK(backend[0]->attr("data-backend") == "flashmla_sparse_dsv41");
  CHECK_THAT(backend[0]->all_text(), Catch::Contains("FLASHMLA_SPARSE_DSV41"));
  const auto tables = find_all(*html, [](const Node& n) { return n.tag == "table" && n.has_class("kernel-shapes"); });
  REQUIRE(tables.size() == 1);
  const auto rows = find_all(*tables[0], [](const Node& n) { return n.tag == "tr"; });
  CHECK(rows.size() == r.kernel_shapes.size() + 1);
  const auto header = find_all(*rows[0], [](const Node& n) { return n.tag == "th"; });
  REQUIRE(header.size() == 9);
  CHECK(header[0]->text == "phase");
  CHECK(header[7]->text == "status");
  const auto html_missing = find_all(*tables[0], [](const Node& n) { return n.tag == "tr" && n.has_class("missing"); });
  CHECK(html_missing.size() == missing);
  for (std::size_t i = 0; i < r.kernel_shapes.size() && i + 1 < rows.size(); ++i) {
    const auto& s = r.kernel_shapes[i];
    const auto tds = find_all(*rows[i + 1], [](const Node& n) { return n.tag == "td"; });
    REQUIRE(tds.size() == 9);
    CHECK(tds[0]->text == s.phase);
    CHECK(tds[1]->text == s.kernel);
    CHECK(tds[4]->text == std::to_string(s.d_qk));
    CHECK(tds[7]->text == std::string(mlaplan::to_string(s.status)));
    if (s.status == mlaplan::ShapeStatus::missing) {
      CHECK(tds[7]->has_class("fail"));
      CHECK_THAT(tds[8]->text, Catch::Contains(s.note));
      CHECK_THAT(tds[8]->text, Catch::Contains("fix: " + s.fix));
    } else {
      CHECK(tds[7]->has_class("pass"));
    }
  }

  // SVG: the same rows, a group each, the missing ones with their class.
  auto svg = parse_xml(mlaplan::cli::render_report_svg(r, {}));
  const auto section = find_all(*svg, [](const Node& n) { return n.attr("id") == "backend"; });
  REQUIRE(section.size() == 1);
  const auto figure = find_all(*section[0], [](const Node& n) { return n.has_class("backend"); });
  REQUIRE(figure.size() == 1);
  CHECK(figure[0]->attr("data-backend") == "flashmla_sparse_dsv41");
  const auto svg_rows = find_all(*svg, [](const Node& n) { return n.has_class("kernel-shape"); });
  CHECK(svg_rows.size() == r.kernel_shapes.size());
  const auto svg_missing =
      find_all(*svg, [](const Node& n) { return n.has_class("kernel-shape") && n.has_class("missing"); });
  CHECK(svg_missing.size() == missing);
  for (const auto* row : svg_missing) CHECK(row->attr("data-status") == "missing");
}

TEST_CASE("report: a FlashInfer backend plans its own decode work", "[report]") {
  mlaplan::cli::PlanOptions opt;
  opt.config = cfg("deepseek-v4.1-flash.json");
  opt.layout.options.tensor_parallel_size = 8;
  opt.target.gpu = "rtx-pro-6000";
  const auto r = mlaplan::cli::compute_plan(opt);
  REQUIRE(r.layout);
  CHECK(r.schedules.empty());
  auto svg = parse_xml(mlaplan::cli::render_report_svg(r, {}));
  const auto sched = find_all(*svg, [](const Node& n) { return n.has_class("schedules"); });
  REQUIRE(sched.size() == 1);
  CHECK_THAT(sched[0]->all_text(), Catch::Contains("the engine's backend plans its own work"));
  CHECK_THAT(sched[0]->all_text(), !Catch::Contains("no FlashMLA sparse decode kernel"));
  const auto figure = find_all(*svg, [](const Node& n) { return n.has_class("backend"); });
  REQUIRE(figure.size() == 1);
  CHECK(figure[0]->attr("data-backend") == "flashinfer_mla_sparse_sm120");
  CHECK(find_all(*svg, [](const Node& n) { return n.has_class("kernel-shape"); }).size() == r.kernel_shapes.size());
}

TEST_CASE("report output is deterministic", "[report]") {
  const auto a = plan_of("deepseek-v4.1-flash.json");
  const auto b = plan_of("deepseek-v4.1-flash.json");
  CHECK(mlaplan::cli::render_report_svg(a, {}) == mlaplan::cli::render_report_svg(b, {}));
  CHECK(mlaplan::cli::render_report_html(a, {}) == mlaplan::cli::render_report_html(b, {}));
  // Through the CLI: two runs, byte-identical files.
  const std::string f1 = tmp().file("det1.svg"), f2 = tmp().file("det2.svg");
  const std::string h1 = tmp().file("det1.html"), h2 = tmp().file("det2.html");
  for (const auto& f : {f1, f2, h1, h2}) {
    const auto res = run({"report", cfg("deepseek-v4-flash.json"), "--tp", "2", "-o", f});
    REQUIRE(res.code == 0);
  }
  CHECK(slurp(f1) == slurp(f2));
  CHECK(slurp(h1) == slurp(h2));
  CHECK_FALSE(slurp(f1).empty());
}

// ------------------------------------------------------------------ the CLI

TEST_CASE("report CLI writes the file and exits as plan", "[report]") {
  const std::string out = tmp().file("v41.svg");
  auto ok = run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "-o", out, "--gpu", "b200", "--batch", "8"});
  CHECK(ok.code == 0);
  CHECK(ok.err.empty());
  CHECK_THAT(ok.out, Catch::StartsWith("mla-plan: wrote " + out + " (SVG, "));
  const std::string svg = slurp(out);
  auto root = parse_xml(svg);
  CHECK_THAT(root->all_text(), Catch::Contains("target b200"));

  // An unsupported plan: the report is still written, then plan's error line and exit code.
  const std::string bad = tmp().file("flat.html");
  auto plan = run({"plan", cfg("small/v41-8layer-flat.json")});
  auto rep = run({"report", cfg("small/v41-8layer-flat.json"), "-o", bad});
  CHECK(plan.code == 3);
  CHECK(rep.code == 3);
  CHECK(rep.err == plan.err);
  CHECK(fs::exists(bad));
  CHECK_THAT(slurp(bad), Catch::Contains("backend.head_size"));

  // Does not fit (exit 4: the KV budget holds less than one request), same line as plan.
  const std::string small = tmp().file("small.svg");
  auto plan4 = run({"plan", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--kv-budget-gib", "0.5"});
  auto rep4 = run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--kv-budget-gib", "0.5", "-o", small});
  CHECK(plan4.code == 4);
  CHECK(rep4.code == 4);
  CHECK(rep4.err == plan4.err);
  CHECK_THAT(slurp(small), Catch::Contains("does not fit"));

  // An invalid config: exit 2, nothing written.
  const std::string none = tmp().file("none.svg");
  auto inv = run({"report", cfg("does-not-exist.json"), "-o", none});
  CHECK(inv.code == 2);
  CHECK_FALSE(fs::exists(none));
}

TEST_CASE("report CLI: -o errors name the flag, the value and what is allowed", "[report]") {
  auto missing = run({"report", cfg("deepseek-v4.1-flash.json")});
  CHECK(missing.code == 1);
  CHECK_THAT(missing.err, Catch::Contains("-o"));

  auto png = run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "-o", tmp().file("r.png")});
  CHECK(png.code == 1);
  CHECK(png.err == "mla-plan: error: -o: '" + tmp().file("r.png") +
                       "' has the extension '.png'; the report is written as .svg or .html (e.g. -o report.svg)\n");
  auto noext = run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "-o", tmp().file("report")});
  CHECK(noext.code == 1);
  CHECK_THAT(noext.err, Catch::Contains("has no extension; the report is written as .svg or .html"));
  // The extension is read case-insensitively.
  auto upper = run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "-o", tmp().file("UPPER.SVG")});
  CHECK(upper.code == 0);

  const std::string unwritable = tmp().file("no-such-dir/report.svg");
  auto nodir = run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "-o", unwritable});
  CHECK(nodir.code == 7);  // output that could not be written
  CHECK(nodir.err == "mla-plan: error: -o: cannot write '" + unwritable + "': No such file or directory\n");
  fs::create_directories(tmp().file("adir.svg"));
  auto dir = run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "-o", tmp().file("adir.svg")});
  CHECK(dir.code == 7);
  CHECK(dir.err == "mla-plan: error: -o: cannot write '" + tmp().file("adir.svg") +
                       "': it is a directory; give the path of a file\n");
}

TEST_CASE("report -o: every file name the file system takes gets its temporary file", "[report][output]") {
  // The temporary file is ".NAME.tmp-XXXXXX": 12 bytes more than NAME, cut short to fit NAME_MAX.
  const long name_max = ::pathconf(tmp().path.c_str(), _PC_NAME_MAX);
  REQUIRE(name_max >= 16);
  for (const long len : {5L, 200L, name_max - 12, name_max - 11, name_max - 1, name_max}) {
    INFO("name of " << len << " bytes");
    const std::string name = std::string(static_cast<std::size_t>(len) - 4, 'n') + ".svg";
    const std::string path = tmp().file(name);
    mlaplan::cli::write_file_whole(path, "<svg/>\n", "-o");
    CHECK(slurp(path) == "<svg/>\n");
    mlaplan::cli::write_file_whole(path, "<svg>2</svg>\n", "-o");  // replaced, through a temporary file too
    CHECK(slurp(path) == "<svg>2</svg>\n");
    fs::remove(path);
  }
  // No temporary file is left behind.
  CHECK(std::none_of(fs::directory_iterator(tmp().path), fs::directory_iterator(), [](const fs::directory_entry& e) {
    return e.path().filename().string().find(".tmp-") != std::string::npos;
  }));
  // A name past NAME_MAX is the file system's refusal, named (exit 7), not a temporary-file failure.
  const std::string too_long = tmp().file(std::string(static_cast<std::size_t>(name_max) - 3, 'n') + ".svg");
  try {
    mlaplan::cli::write_file_whole(too_long, "x", "-o");
    FAIL("a name of NAME_MAX + 1 bytes was written");
  } catch (const mlaplan::Error& e) {
    CHECK(e.kind() == mlaplan::ErrorKind::output);
    CHECK_THAT(e.what(), Catch::EndsWith("File name too long"));
  }
}

TEST_CASE("report -o through symbolic links: the link stays, the file it names is written", "[report][output]") {
  const fs::path d = tmp().path / "links";
  fs::remove_all(d);
  fs::create_directories(d / "sub");
  using mlaplan::cli::write_file_whole;

  SECTION("a dangling link (relative) creates the file it names") {
    fs::create_symlink("sub/new.svg", d / "dangling.svg");
    write_file_whole((d / "dangling.svg").string(), "<svg/>", "-o");
    CHECK(fs::is_symlink(d / "dangling.svg"));
    CHECK(fs::read_symlink(d / "dangling.svg") == "sub/new.svg");
    CHECK(slurp((d / "sub" / "new.svg").string()) == "<svg/>");
  }
  SECTION("a dangling link (absolute), and a chain of links ending in a dangling one") {
    fs::create_symlink(d / "abs.svg", d / "a.svg");
    fs::create_symlink("a.svg", d / "b.svg");
    write_file_whole((d / "b.svg").string(), "<svg/>", "-o");
    CHECK(fs::is_symlink(d / "a.svg"));
    CHECK(fs::is_symlink(d / "b.svg"));
    CHECK(slurp((d / "abs.svg").string()) == "<svg/>");
  }
  SECTION("a link in another directory is resolved from its own directory") {
    fs::create_symlink("target.svg", d / "sub" / "rel.svg");
    write_file_whole((d / "sub" / "rel.svg").string(), "<svg/>", "-o");
    CHECK(fs::is_symlink(d / "sub" / "rel.svg"));
    CHECK(slurp((d / "sub" / "target.svg").string()) == "<svg/>");
    CHECK_FALSE(fs::exists(d / "target.svg"));
  }
  SECTION("an existing file through a link keeps its mode; the link stays") {
    write_file((d / "real.svg").string(), "old");
    fs::permissions(d / "real.svg", fs::perms::owner_read | fs::perms::owner_write);
    fs::create_symlink("real.svg", d / "link.svg");
    write_file_whole((d / "link.svg").string(), "<svg/>", "-o");
    CHECK(fs::is_symlink(d / "link.svg"));
    CHECK(slurp((d / "real.svg").string()) == "<svg/>");
    CHECK((fs::status(d / "real.svg").permissions() & fs::perms::mask) ==
          (fs::perms::owner_read | fs::perms::owner_write));
  }
  SECTION("a link into a missing directory, and a loop of links: exit 7 naming the cause, the links untouched") {
    fs::create_symlink("no-such-dir/x.svg", d / "nodir.svg");
    fs::create_symlink("loop2.svg", d / "loop1.svg");
    fs::create_symlink("loop1.svg", d / "loop2.svg");
    for (const auto& [name, cause] : std::vector<std::pair<std::string, std::string>>{
             {"nodir.svg", "No such file or directory"}, {"loop1.svg", "Too many levels of symbolic links"}}) {
      const std::string path = (d / name).string();
      try {
        write_file_whole(path, "<svg/>", "-o");
        FAIL("written through " + name);
      } catch (const mlaplan::Error& e) {
        CHECK(e.kind() == mlaplan::ErrorKind::output);
        CHECK(std::string(e.what()) == "-o: cannot write '" + path + "': " + cause);
      }
      CHECK(fs::is_symlink(path));
    }
  }
}

TEST_CASE("report CLI: verify and bench results as tables", "[report]") {
  const std::string verify = tmp().file("verify.json");
  write_file(verify, R"({"schema": "mla-plan/1", "exit_code": 5, "gpu": "H200",
    "results": [{"layer_type": "c2a", "status": "pass", "max_abs_err": 0.0001},
                {"layer_type": "c1a", "status": "fail", "max_abs_err": 0.5, "note": "x < y & z"}],
    "nested": {"matrix": [{"dtype": "fp8", "ok": true}, 3]}})");
  const std::string bench = tmp().file("bench.json");
  write_file(bench, R"([{"kernel": "sm90-sparse", "us": 12.5}])");
  const std::string out = tmp().file("with-results.svg");
  auto r = run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "-o", out, "--verify-json", verify,
                "--bench-json", bench});
  REQUIRE(r.code == 0);
  auto root = parse_xml(slurp(out));
  const auto tables = find_all(*root, [](const Node& n) { return n.has_class("result-table"); });
  std::vector<std::string> pointers;
  for (const auto* t : tables) pointers.push_back(t->attr("data-pointer"));
  CHECK(pointers == std::vector<std::string>{"/results", "/nested/matrix", "/"});
  const auto rows = find_all(*tables[0], [](const Node& n) { return n.has_class("row"); });
  CHECK(rows.size() == 2);
  const std::string text = root->all_text();
  CHECK_THAT(text, Catch::Contains("GPU verification"));
  CHECK_THAT(text, Catch::Contains("Benchmarks"));
  CHECK_THAT(text, Catch::Contains("x < y & z"));
  CHECK_THAT(text, Catch::Contains("exit_code 5"));
  CHECK_THAT(text, Catch::Contains("max_abs_err"));

  const std::string html = tmp().file("with-results.html");
  REQUIRE(run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "-o", html, "--verify-json", verify}).code == 0);
  auto hroot = parse_xml(slurp(html));
  CHECK(find_all(*hroot, [](const Node& n) { return n.tag == "table" && n.has_class("result-table"); }).size() == 2);
  CHECK(find_all(*hroot, [](const Node& n) { return n.tag == "td" && n.has_class("fail"); }).size() == 1);

  // No table in the file: a note, not an error.
  const std::string empty = tmp().file("empty.json");
  write_file(empty, R"({"schema": "mla-plan/1"})");
  auto e =
      run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "-o", tmp().file("e.svg"), "--bench-json", empty});
  CHECK(e.code == 0);
  CHECK_THAT(slurp(tmp().file("e.svg")), Catch::Contains("No array of row objects"));
}

TEST_CASE("report CLI: unreadable or malformed result files are invalid input files (exit 2)", "[report]") {
  const std::string out = tmp().file("x.svg");
  const std::string missing = tmp().file("missing.json");
  auto m = run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "-o", out, "--verify-json", missing});
  CHECK(m.code == 2);
  CHECK(m.err == "mla-plan: error: --verify-json: cannot read '" + missing + "': no such file or directory\n");

  const std::string junk = tmp().file("junk.json");
  write_file(junk, "not json at all");
  auto j = run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "-o", out, "--bench-json", junk});
  CHECK(j.code == 2);
  CHECK_THAT(j.err, Catch::StartsWith("mla-plan: error: --bench-json: '" + junk + "' is not JSON ("));
  CHECK_THAT(j.err, Catch::Contains("expected the output of mla-plan bench --json"));

  auto d =
      run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "-o", out, "--verify-json", tmp().path.string()});
  CHECK(d.code == 2);
  CHECK_THAT(d.err, Catch::Contains("--verify-json: cannot read '" + tmp().path.string() + "': it is a directory"));

  const std::string deep = tmp().file("deep.json");
  write_file(deep, std::string(200, '[') + std::string(200, ']'));
  auto dp = run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "-o", out, "--verify-json", deep});
  CHECK(dp.code == 2);
  CHECK_THAT(dp.err, Catch::Contains("--verify-json: '" + deep + "' nests deeper than 64 levels"));

  // A bad flag value stays a usage error, also next to a bad result file.
  auto o =
      run({"report", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "-o", tmp().file("x.txt"), "--verify-json", junk});
  CHECK(o.code == 1);
  CHECK_THAT(o.err, Catch::Contains("-o: '"));
}

// ------------------------------------------------------------------ Markdown

TEST_CASE("plan --format markdown: a PR-comment summary", "[report]") {
  auto r = run({"plan", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--format", "markdown"});
  CHECK(r.code == 0);
  const std::string& md = r.out;
  CHECK_THAT(md, Catch::StartsWith("### mla-plan: `" + cfg("deepseek-v4.1-flash.json") + "`\n"));
  CHECK_THAT(md, Catch::Contains("**DeepSeek V4.1** (`deepseek_v41`): 40 layers + 3 draft"));
  CHECK_THAT(md, Catch::Contains("**Result: pass** (exit 0)"));
  CHECK_THAT(md, Catch::Contains("| type | layers | draft | attends to |\n|---|---:|---:|---|\n"));
  CHECK_THAT(md, Catch::Contains("| `c1a` | 20 | 0 | window + full-length compressed cache (top-k) |"));
  CHECK_THAT(md, Catch::Contains("| `c2a` | 18 | 0 |"));
  CHECK_THAT(md, Catch::Contains("| `swaonly` | 5 | 3 | window only |"));
  CHECK_THAT(md, Catch::Contains("| 20-39 | `c1a` | 20 | 20, 24, 28, 32, 36 |"));
  CHECK_THAT(md, Catch::Contains("**Bytes per token** (global): 1790 in rows (DeepSeek's accounting), 1827 in pages"));
  CHECK_THAT(md, Catch::Contains("**Fit** on 8 x `h200` (TP 8 x DP 1 x PP 1, vLLM 0.31.0): fits: 31.30x concurrency at "
                                 "max\\_model\\_len 1,048,576 per engine  \n"));
  CHECK_THAT(md, Catch::Contains("`GPU KV cache size: 32,823,353 tokens, Maximum concurrency for 1,048,576 tokens per "
                                 "request: 31.30x`"));
  CHECK_THAT(md, Catch::Contains("| each GPU | 47.44 GiB | 12.99 GiB | 68.19 GiB | 139.80 GiB |"));
  CHECK_THAT(md, Catch::Contains("No errors or warnings."));
  CHECK_THAT(md, Catch::Contains("<details><summary>"));
  // --json still wins, as for check.
  auto j = run({"plan", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--format", "markdown", "--json"});
  CHECK_THAT(j.out, Catch::StartsWith("{"));
  auto bad = run({"plan", cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--format", "html"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Catch::Contains("--format"));
  CHECK_THAT(bad.err, Catch::Contains("html"));

  // Failures: the result line and the findings table; table cells are escaped.
  auto f = run({"plan", cfg("small/v41-8layer-flat.json"), "--format", "markdown"});
  CHECK(f.code == 3);
  CHECK_THAT(f.out, Catch::Contains("**Result: FAIL** (exit 3): head size 16"));
  CHECK_THAT(f.out, Catch::Contains("| **error** | `backend.head_size` | head size 16 (qk\\_rope\\_head\\_dim 4)"));
  // Every table row has the column count of its header.
  std::istringstream lines(f.out);
  std::string line;
  std::size_t columns = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("|", 0) != 0) {
      columns = 0;
      continue;
    }
    std::size_t bars = 0;
    for (std::size_t i = 0; i < line.size(); ++i) bars += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    if (columns == 0) columns = bars;
    CHECK(bars == columns);
  }
}

TEST_CASE("check --format markdown: a table of files", "[report]") {
  auto r = run({"check", cfg("deepseek-v4.1-flash.json"), cfg("small/v41-8layer-flat.json"), "nope.json", "--tp", "8",
                "--format", "markdown"});
  CHECK(r.code == 2);  // the invalid file decides the run
  // Written row by row as the files are checked: the counts come last.
  CHECK_THAT(r.out, Catch::StartsWith("### mla-plan check\n\n| file | status | exit | findings |\n"));
  CHECK_THAT(r.out, Catch::EndsWith(" |\n\n**1 of 3 configs passed**\n"));
  CHECK_THAT(r.out, Catch::Contains("| `" + cfg("deepseek-v4.1-flash.json") +
                                    "`<br>deepseek\\_v41 on h200, fp8\\_ds\\_mla: 31.30x requests of 1,048,576 tokens, "
                                    "66.01 GiB to spare | pass | 0 | "
                                    "none |"));
  CHECK_THAT(r.out, Catch::Contains("| `" + cfg("small/v41-8layer-flat.json") + "`"));
  CHECK_THAT(r.out, Catch::Contains("| **FAIL** | 3 | warning `config.structural_default`: assumed "
                                    "num\\_nextn\\_predict\\_layers = 3, the transformers default<br>**error** "
                                    "`backend.head_size`: head size 16"));
  CHECK_THAT(r.out,
             Catch::Contains("| `nope.json` | **FAIL** | 2 | **error** `config.invalid`: cannot read 'nope.json'"));
  auto m = run({"check", cfg("deepseek-v4-flash.json"), "--matrix", "--tp", "1,8", "--format", "markdown"});
  CHECK(m.code == 0);
  CHECK_THAT(m.out, Catch::Contains(
                        "  h200           fp8_ds_mla        8    1    8  FLASHMLA_SPARSE_DSV4                       "
                        "yes fits: 9.70x requests of 1048576 tokens"));
  CHECK_THAT(m.out, Catch::Contains("\n  reasons:\n  [1] does not fit: "));
  CHECK_THAT(m.out, Catch::StartsWith("```text\n"));
  CHECK_THAT(m.out, Catch::EndsWith("```\n"));
}

TEST_CASE("one colour and one name per layer type", "[report]") {
  std::set<std::string> fills, names;
  for (const auto& s : mlaplan::cli::kTypeStyles) {
    fills.insert(std::string(s.fill));
    names.insert(std::string(mlaplan::to_string(s.type)));
    CHECK(&mlaplan::cli::type_style(s.type) == &s);
  }
  CHECK(fills.size() == mlaplan::all_layer_types().size());
  CHECK(names.size() == mlaplan::all_layer_types().size());
  // The report draws each type in its palette colour.
  auto root = parse_xml(mlaplan::cli::render_report_svg(plan_of("deepseek-v4-flash.json"), {}));
  for (const auto* cell : find_all(*root, [](const Node& n) { return n.has_class("layer"); })) {
    const auto t = mlaplan::parse_layer_type(cell->attr("data-type"));
    REQUIRE(t);
    REQUIRE_FALSE(cell->children.empty());
    const auto rects = find_all(*cell, [](const Node& n) { return n.tag == "rect"; });
    REQUIRE_FALSE(rects.empty());
    CHECK(rects[0]->attr("fill") == std::string(mlaplan::cli::type_style(*t).fill));
  }
}

TEST_CASE("report: the prefix cache and the host tier as a table", "[report]") {
  // V4.1-Flash at TP8: hits in multiples of 64 tokens, 65 the shortest prompt; the connector would
  // refuse the ring group (docs/offload.md).
  const auto r = plan_of("deepseek-v4.1-flash.json");
  auto root = parse_xml(mlaplan::cli::render_report_html(r, {}));
  const auto tables = find_all(*root, [](const Node& n) { return n.tag == "table" && n.has_class("kv-tiers"); });
  REQUIRE(tables.size() == 1);
  const std::string text = tables[0]->all_text();
  CHECK_THAT(text, Catch::Contains("multiples of 64 tokens"));
  CHECK_THAT(text, Catch::Contains("65 tokens"));
  CHECK_THAT(text, Catch::Contains("would refuse group 8: tokens_per_block=8 not divisible by tokens_per_hash=32"));
  auto svg = parse_xml(mlaplan::cli::render_report_svg(r, {}));
  CHECK(find_all(*svg, [](const Node& n) { return n.has_class("kv-tier-row"); }).size() == 7);
}

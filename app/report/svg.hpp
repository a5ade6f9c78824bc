#pragma once
// A small SVG (and XHTML) writer for the report: elements with attributes, text, groups and
// tooltips, serialised as well-formed XML with every attribute quoted and every &, <, >, " and '
// escaped. Output is deterministic: attributes keep the order they were set in, numbers are
// printed with at most two decimals and no locale.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mlaplan::svg {

/// Text content escaped for XML: & < > replaced, control characters other than tab and newline
/// and invalid UTF-8 replaced by U+FFFD (XML 1.0 allows neither).
std::string escape_text(std::string_view s);
/// escape_text() plus " and ' (for attribute values).
std::string escape_attr(std::string_view s);
/// A number for an attribute: at most two decimals, trailing zeros dropped, never "-0".
std::string num(double v);
/// An integer with thousands separators: 74463232 -> "74,463,232".
std::string grouped(std::int64_t v);

/// One XML element, or a text node (empty tag). Children are owned by value.
class Element {
 public:
  explicit Element(std::string tag);
  /// A text node holding `text` (escaped when written).
  static Element text_node(std::string text);
  /// Raw, already well-formed markup inserted as is (the caller guarantees it; used for CSS).
  static Element raw_node(std::string markup);

  Element& set(std::string_view name, std::string_view value);
  Element& set(std::string_view name, const char* value) { return set(name, std::string_view(value)); }
  Element& set(std::string_view name, const std::string& value) { return set(name, std::string_view(value)); }
  Element& set(std::string_view name, double value);
  Element& set(std::string_view name, std::int64_t value);
  Element& set(std::string_view name, int value) { return set(name, static_cast<std::int64_t>(value)); }

  /// Appends a text child.
  Element& text(std::string text);
  /// Appends a child element and returns it (valid until the next add on this element).
  Element& add(Element child);
  /// Adds a <title> child (a tooltip in browsers) as the first child.
  Element& tooltip(std::string text);

  const std::string& tag() const { return tag_; }
  const std::vector<Element>& children() const { return children_; }
  /// The value of attribute `name`, or "" when absent.
  std::string get(std::string_view name) const;

  /// Serialises the element and its children (no XML declaration).
  void write(std::string& out) const;
  std::string str() const;

 private:
  enum class Kind { element, text, raw };
  Kind kind_ = Kind::element;
  std::string tag_;
  std::string content_;  ///< text or raw nodes
  std::vector<std::pair<std::string, std::string>> attrs_;
  std::vector<Element> children_;
};

// ---- shape helpers (each returns the element for further attributes) ----
Element rect(double x, double y, double w, double h);
Element line(double x1, double y1, double x2, double y2);
/// A <text> element at (x, y) with `anchor` "start" | "middle" | "end".
Element label(double x, double y, std::string text, std::string_view anchor = "start");
Element group(std::string_view css_class = {});
/// A closed polygon through the points.
Element polygon(const std::vector<std::pair<double, double>>& points);
Element path(std::string d);

/// A complete standalone SVG document: XML declaration, then `root` (an <svg> element to which
/// the SVG namespace is added).
std::string document(Element root);

/// Rough width of `text` in pixels at `font_px` in a sans-serif font (for layout decisions only).
double text_width(std::string_view text, double font_px);
/// `text` shortened to about `max_px` pixels at `font_px`, ending in "..." when cut.
std::string fit_text(std::string_view text, double font_px, double max_px);
/// Breaks `text` into lines of about `max_px` pixels at `font_px` (at spaces where possible).
std::vector<std::string> wrap_text(std::string_view text, double font_px, double max_px);

}  // namespace mlaplan::svg

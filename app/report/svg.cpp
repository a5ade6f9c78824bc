#include "report/svg.hpp"

#include <algorithm>
#include <cmath>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/number_format.hpp"

namespace mlaplan::svg {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

/// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not one.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  std::uint32_t cp = 0;
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
    cp = b0 & 0x1Fu;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    cp = b0 & 0x0Fu;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    cp = b0 & 0x07u;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0u) != 0x80u) return 0;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  // Overlong forms, surrogates, beyond U+10FFFF, and the non-characters XML forbids.
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF) return 0;
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
  if (cp == 0xFFFE || cp == 0xFFFF) return 0;
  return n;
}

std::string escape(std::string_view s, bool attribute) {
  std::string o;
  o.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80) {
      switch (c) {
        case '&': o += "&amp;"; break;
        case '<': o += "&lt;"; break;
        case '>': o += "&gt;"; break;
        case '"':
          if (attribute) o += "&quot;";
          else o += c;
          break;
        case '\'':
          if (attribute) o += "&#39;";
          else o += c;
          break;
        case '\t': o += attribute ? "&#9;" : "\t"; break;
        case '\n': o += attribute ? "&#10;" : "\n"; break;
        default:
          if (u < 0x20 || u == 0x7F) o += kReplacement;
          else o += c;
      }
      ++i;
      continue;
    }
    const std::size_t n = utf8_length(s, i);
    if (n == 0) {
      o += kReplacement;
      ++i;
    } else {
      o.append(s.substr(i, n));
      i += n;
    }
  }
  return o;
}

bool valid_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == ':' || c == '.';
    if (!ok) return false;
  }
  return !(name[0] >= '0' && name[0] <= '9') && name[0] != '-' && name[0] != '.';
}

double char_width(unsigned char c) {
  if (c == ' ' || c == 'i' || c == 'l' || c == 'j' || c == 't' || c == 'f' || c == 'r' || c == '.' || c == ',' ||
      c == ':' || c == ';' || c == '\'' || c == '|' || c == '!' || c == '(' || c == ')' || c == '[' || c == ']' ||
      c == 'I' || c == '/' || c == '-')
    return 0.34;
  if (c == 'm' || c == 'w' || c == 'M' || c == 'W' || c == '@' || c == '%') return 0.9;
  if (c >= 'A' && c <= 'Z') return 0.7;
  if (c >= '0' && c <= '9') return 0.64;
  return 0.6;
}

}  // namespace

std::string escape_text(std::string_view s) { return escape(s, false); }
std::string escape_attr(std::string_view s) { return escape(s, true); }

std::string num(double v) {
  if (!std::isfinite(v)) throw_internal("svg: a coordinate is not finite");
  std::string s = format_fixed(v, 2);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

std::string grouped(std::int64_t v) { return format_grouped(v); }

Element::Element(std::string tag) : tag_(std::move(tag)) {
  if (!valid_name(tag_)) throw_internal("svg: invalid element name '" + tag_ + "'");
}

Element Element::text_node(std::string text) {
  Element e("t");
  e.kind_ = Kind::text;
  e.tag_.clear();
  e.content_ = std::move(text);
  return e;
}

Element Element::raw_node(std::string markup) {
  Element e("r");
  e.kind_ = Kind::raw;
  e.tag_.clear();
  e.content_ = std::move(markup);
  return e;
}

Element& Element::set(std::string_view name, std::string_view value) {
  if (!valid_name(name)) throw_internal("svg: invalid attribute name '" + std::string(name) + "'");
  for (auto& [k, v] : attrs_) {
    if (k == name) {
      v = std::string(value);
      return *this;
    }
  }
  attrs_.emplace_back(std::string(name), std::string(value));
  return *this;
}

Element& Element::set(std::string_view name, double value) { return set(name, std::string_view(num(value))); }

Element& Element::set(std::string_view name, std::int64_t value) {
  return set(name, std::string_view(std::to_string(value)));
}

Element& Element::text(std::string t) {
  children_.push_back(text_node(std::move(t)));
  return *this;
}

Element& Element::add(Element child) {
  children_.push_back(std::move(child));
  return children_.back();
}

Element& Element::tooltip(std::string t) {
  Element title("title");
  title.text(std::move(t));
  children_.insert(children_.begin(), std::move(title));
  return *this;
}

std::string Element::get(std::string_view name) const {
  for (const auto& [k, v] : attrs_) {
    if (k == name) return v;
  }
  return {};
}

void Element::write(std::string& out) const {
  if (kind_ == Kind::text) {
    out += escape_text(content_);
    return;
  }
  if (kind_ == Kind::raw) {
    out += content_;
    return;
  }
  out += '<';
  out += tag_;
  for (const auto& [k, v] : attrs_) {
    out += ' ';
    out += k;
    out += "=\"";
    out += escape_attr(v);
    out += '"';
  }
  if (children_.empty()) {
    out += "/>";
    return;
  }
  out += '>';
  // Elements holding text keep their content on one line (whitespace would show); others put
  // each child on its own line.
  bool mixed = false;
  for (const auto& c : children_) mixed = mixed || c.kind_ != Kind::element;
  for (const auto& c : children_) {
    if (!mixed) out += '\n';
    c.write(out);
  }
  if (!mixed) out += '\n';
  out += "</";
  out += tag_;
  out += '>';
}

std::string Element::str() const {
  std::string s;
  write(s);
  return s;
}

Element rect(double x, double y, double w, double h) {
  Element e("rect");
  e.set("x", x).set("y", y).set("width", std::max(w, 0.0)).set("height", std::max(h, 0.0));
  return e;
}

Element line(double x1, double y1, double x2, double y2) {
  Element e("line");
  e.set("x1", x1).set("y1", y1).set("x2", x2).set("y2", y2);
  return e;
}

Element label(double x, double y, std::string text, std::string_view anchor) {
  Element e("text");
  e.set("x", x).set("y", y);
  if (anchor != "start") e.set("text-anchor", anchor);
  e.text(std::move(text));
  return e;
}

Element group(std::string_view css_class) {
  Element e("g");
  if (!css_class.empty()) e.set("class", css_class);
  return e;
}

Element polygon(const std::vector<std::pair<double, double>>& points) {
  std::string p;
  for (const auto& [x, y] : points) {
    if (!p.empty()) p += ' ';
    p += num(x) + "," + num(y);
  }
  Element e("polygon");
  e.set("points", p);
  return e;
}

Element path(std::string d) {
  Element e("path");
  e.set("d", d);
  return e;
}

std::string document(Element root) {
  root.set("xmlns", "http://www.w3.org/2000/svg");
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  root.write(s);
  s += '\n';
  return s;
}

double text_width(std::string_view text, double font_px) {
  double w = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0u) == 0x80u) continue;  // UTF-8 continuation byte
    w += c < 0x80 ? char_width(c) : 0.7;
  }
  return w * font_px;
}

std::string fit_text(std::string_view text, double font_px, double max_px) {
  if (text_width(text, font_px) <= max_px) return std::string(text);
  const double budget = max_px - text_width("...", font_px);
  std::string o;
  double w = 0;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t n = 1;
    while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0u) == 0x80u) ++n;
    const double cw = text_width(text.substr(i, n), font_px);
    if (w + cw > budget) break;
    w += cw;
    o.append(text.substr(i, n));
    i += n;
  }
  return o + "...";
}

std::vector<std::string> wrap_text(std::string_view text, double font_px, double max_px) {
  std::vector<std::string> lines;
  std::string cur;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t j = text.find(' ', i);
    if (j == std::string_view::npos) j = text.size();
    std::string word(text.substr(i, j - i));
    const std::string candidate = cur.empty() ? word : cur + " " + word;
    if (cur.empty() || text_width(candidate, font_px) <= max_px) {
      cur = candidate;
    } else {
      lines.push_back(cur);
      cur = word;
    }
    // A single word longer than the line is cut hard.
    while (text_width(cur, font_px) > max_px && cur.size() > 1) {
      std::size_t k = cur.size();
      while (k > 1 && text_width(std::string_view(cur).substr(0, k), font_px) > max_px) --k;
      while (k > 1 && (static_cast<unsigned char>(cur[k]) & 0xC0u) == 0x80u) --k;
      lines.push_back(cur.substr(0, k));
      cur.erase(0, k);
    }
    i = j + 1;
  }
  if (!cur.empty() || lines.empty()) lines.push_back(cur);
  return lines;
}

}  // namespace mlaplan::svg

#include "mlaplan/base/text.hpp"

#include <algorithm>
#include <cstdint>

namespace mlaplan {

namespace {

/// The length of the valid UTF-8 sequence at s[i] and its code point, or 0 when the byte there
/// does not start one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF,
/// a sequence cut short).
std::size_t utf8_sequence(std::string_view s, std::size_t i, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  char32_t min = 0;
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2, cp = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3, cp = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

/// Code points that are valid UTF-8 but change how a terminal, a log viewer or a browser lays
/// text out: C1 controls, line / paragraph separators, bidirectional controls, the BOM.
bool is_layout_control(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xFEFF;
}

constexpr char kHex[] = "0123456789abcdef";

void append_hex_byte(std::string& out, unsigned char b) {
  out += "\\x";
  out += kHex[b >> 4];
  out += kHex[b & 0xF];
}

void append_code_point(std::string& out, char32_t cp) {
  out += "\\u{";
  bool started = false;
  for (int shift = 20; shift >= 0; shift -= 4) {
    const auto digit = static_cast<unsigned>((cp >> shift) & 0xF);
    if (digit != 0 || started || shift == 0) {
      out += kHex[digit];
      started = true;
    }
  }
  out += '}';
}

std::string render(std::string_view s, std::size_t max_bytes, bool in_quotes) {
  std::string out;
  out.reserve(s.size() < 256 ? s.size() + 2 : 256);
  std::size_t i = 0;
  while (i < s.size()) {
    char32_t cp = 0;
    const std::size_t n = utf8_sequence(s, i, cp);
    const std::size_t step = n == 0 ? 1 : n;
    if (i + step > max_bytes) break;
    if (n == 0) {
      append_hex_byte(out, static_cast<unsigned char>(s[i]));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || cp == 0x7F) {
      append_hex_byte(out, static_cast<unsigned char>(cp));
    } else if (is_layout_control(cp)) {
      append_code_point(out, cp);
    } else if (in_quotes && (cp == '\'' || cp == '\\')) {
      out += '\\';
      out += static_cast<char>(cp);
    } else {
      out.append(s.substr(i, n));
    }
    i += step;
  }
  if (in_quotes) out.insert(out.begin(), '\''), out += '\'';
  if (i < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace

std::string printable(std::string_view s, std::size_t max_bytes) { return render(s, max_bytes, false); }

std::string quoted(std::string_view s, std::size_t max_bytes) { return render(s, max_bytes, true); }

std::string printable_lines(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    out += render(text.substr(start, end - start), std::string_view::npos, false);
    if (end < text.size()) out += '\n';
    start = end + 1;
  }
  return out;
}

std::string json_printable(std::string json_text) {
  bool clean = true;
  for (std::size_t i = 0; i < json_text.size() && clean;) {
    char32_t cp = 0;
    const std::size_t n = utf8_sequence(json_text, i, cp);
    if (n == 0 || cp == 0x7F || is_layout_control(cp)) clean = false;
    i += n == 0 ? 1 : n;
  }
  if (clean) return json_text;
  std::string out;
  out.reserve(json_text.size() + 64);
  for (std::size_t i = 0; i < json_text.size();) {
    char32_t cp = 0;
    const std::size_t n = utf8_sequence(json_text, i, cp);
    if (n != 0 && (cp == 0x7F || is_layout_control(cp))) {
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(cp >> shift) & 0xF];
    } else {
      out.append(json_text, i, n == 0 ? 1 : n);
    }
    i += n == 0 ? 1 : n;
  }
  return out;
}

bool is_printable_line(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    char32_t cp = 0;
    const std::size_t n = utf8_sequence(s, i, cp);
    if (n == 0 || cp < 0x20 || cp == 0x7F || is_layout_control(cp)) return false;
    i += n;
  }
  return true;
}

std::string replace_all(std::string_view text, std::string_view token, std::string_view with) {
  if (token.empty()) return std::string(text);
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (text.substr(i, token.size()) == token) {
      out += with;
      i += token.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::string join_bounded(std::size_t count, const std::function<std::string(std::size_t)>& item, std::string_view sep,
                         std::size_t max_items, std::string_view empty) {
  if (count == 0) return std::string(empty);
  const std::size_t shown = std::min(count, std::max<std::size_t>(max_items, 1));
  std::string out;
  for (std::size_t i = 0; i < shown; ++i) {
    if (i) out += sep;
    out += item(i);
  }
  if (shown < count) out += std::string(sep) + "... (" + std::to_string(count - shown) + " more)";
  return out;
}

std::string join_bounded(const std::vector<std::string>& items, std::string_view sep, std::size_t max_items,
                         std::string_view empty) {
  return join_bounded(
      items.size(), [&items](std::size_t i) { return items[i]; }, sep, max_items, empty);
}

std::string join_bounded(const std::vector<std::int64_t>& items, std::string_view sep, std::size_t max_items,
                         std::string_view empty) {
  return join_bounded(
      items.size(), [&items](std::size_t i) { return std::to_string(items[i]); }, sep, max_items, empty);
}

}  // namespace mlaplan

#include "mlaplan/base/json_locate.hpp"

#include <cstdint>
#include <limits>

namespace mlaplan {

namespace {

/// The length of the valid UTF-8 sequence (RFC 3629: no overlong form, no surrogate, at most
/// U+10FFFF) at s[i], a byte of 0x80 or more; 0 when none starts there.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  std::uint32_t cp = 0, min = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) n = 2, cp = b0 & 0x1Fu, min = 0x80;
  else if (b0 >= 0xE0 && b0 <= 0xEF) n = 3, cp = b0 & 0x0Fu, min = 0x800;
  else if (b0 >= 0xF0 && b0 <= 0xF4) n = 4, cp = b0 & 0x07u, min = 0x10000;
  else return 0;
  if (n > s.size() - i) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

/// The array index a reference token names: "0" or digits without a leading zero, below SIZE_MAX.
std::optional<std::size_t> array_index(const std::string& token) {
  if (token.empty() || (token.size() > 1 && token[0] == '0')) return std::nullopt;
  std::size_t v = 0;
  for (char c : token) {
    if (!is_digit(c)) return std::nullopt;
    const auto d = static_cast<std::size_t>(c - '0');
    if (v > (std::numeric_limits<std::size_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

/// One pass over the text: a JSON validator with an explicit stack that remembers where the
/// pointer's value starts.
class Scanner {
 public:
  Scanner(std::string_view text, const std::vector<std::string>& tokens) : s_(text), tokens_(tokens) {
    indices_.reserve(tokens.size());
    for (const auto& t : tokens) indices_.push_back(array_index(t));
  }

  /// The offset of the pointer's value, or nothing (not found, or the text is not valid JSON).
  std::optional<std::size_t> run() {
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // a UTF-8 byte-order mark, which nlohmann skips
    skip_ws();
    if (!value(true)) return std::nullopt;
    while (!stack_.empty()) {
      skip_ws();
      if (pos_ >= s_.size()) return std::nullopt;
      Frame& f = stack_.back();
      const char c = s_[pos_];
      if (c == (f.object ? '}' : ']')) {
        ++pos_;
        stack_.pop_back();
        continue;
      }
      if (f.members == 0) {
        // just after '{' or '[': the first member or element, no comma before it
      } else if (c == ',') {
        ++pos_;
        skip_ws();
      } else {
        return std::nullopt;
      }
      if (!member(stack_.back())) return std::nullopt;
    }
    skip_ws();
    if (pos_ != s_.size()) return std::nullopt;  // only whitespace after the value
    return found_;
  }

 private:
  struct Frame {
    bool object = false;
    bool on_path = false;     ///< this container is the pointer's value at its depth: its children may match
    std::size_t members = 0;  ///< members or elements read so far
  };

  /// One member (key, colon, value) of the object `f`, or one element of the array `f`.
  bool member(Frame& f) {
    const std::size_t depth = stack_.size() - 1;  // f's depth; its children match tokens_[depth]
    bool match = false;
    if (f.object) {
      if (pos_ >= s_.size() || s_[pos_] != '"') return false;
      key_.clear();
      if (!string(f.on_path ? &key_ : nullptr)) return false;
      match = f.on_path && key_ == tokens_[depth];
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') return false;
      ++pos_;
      skip_ws();
    } else {
      match = f.on_path && indices_[depth] && *indices_[depth] == f.members;
    }
    ++f.members;
    return value(match);  // may push a frame: `f` is not used after this
  }

  /// The value at pos_: a scalar is read whole, a container's frame is pushed. `on_path`: this is
  /// the pointer's value at its depth (the latest of duplicate keys: it overrides any found before).
  bool value(bool on_path) {
    if (pos_ >= s_.size()) return false;
    const std::size_t depth = stack_.size();
    if (on_path) {
      if (depth == tokens_.size()) found_ = pos_;
      else found_.reset();  // a later duplicate of an ancestor: what was found under the earlier one is gone
    }
    const char c = s_[pos_];
    if (c == '{' || c == '[') {
      if (depth >= kJsonLocateMaxDepth) return false;
      ++pos_;
      stack_.push_back(Frame{c == '{', on_path && depth < tokens_.size(), 0});
      skip_ws();
      return true;
    }
    if (c == '"') return string(nullptr);
    if (c == '-' || is_digit(c)) return number();
    return literal("true") || literal("false") || literal("null");
  }

  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  /// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  bool number() {
    if (s_[pos_] == '-') ++pos_;
    if (pos_ >= s_.size() || !is_digit(s_[pos_])) return false;
    if (s_[pos_] == '0') ++pos_;
    else digits();
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (!digits()) return false;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digits()) return false;
    }
    return true;
  }

  bool digits() {
    const std::size_t start = pos_;
    while (pos_ < s_.size() && is_digit(s_[pos_])) ++pos_;
    return pos_ > start;
  }

  /// Four hex digits at pos_, consumed.
  std::optional<std::uint32_t> hex4() {
    if (s_.size() - pos_ < 4) return std::nullopt;
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[pos_++];
      std::uint32_t d = 0;
      if (is_digit(c)) d = static_cast<std::uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') d = static_cast<std::uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') d = static_cast<std::uint32_t>(c - 'A' + 10);
      else return std::nullopt;
      v = v * 16 + d;
    }
    return v;
  }

  /// The string at pos_ (its opening quote), consumed; decoded into `out` when given.
  bool string(std::string* out) {
    ++pos_;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      const auto u = static_cast<unsigned char>(c);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (u < 0x20) return false;  // a control character must be escaped
      if (u >= 0x80) {
        const std::size_t n = utf8_length(s_, pos_);
        if (n == 0) return false;
        if (out) out->append(s_.substr(pos_, n));
        pos_ += n;
        continue;
      }
      ++pos_;
      if (c != '\\') {
        if (out) *out += c;
        continue;
      }
      if (pos_ >= s_.size()) return false;
      const char e = s_[pos_++];
      char decoded = 0;
      switch (e) {
        case '"': decoded = '"'; break;
        case '\\': decoded = '\\'; break;
        case '/': decoded = '/'; break;
        case 'b': decoded = '\b'; break;
        case 'f': decoded = '\f'; break;
        case 'n': decoded = '\n'; break;
        case 'r': decoded = '\r'; break;
        case 't': decoded = '\t'; break;
        case 'u': {
          auto cp = hex4();
          if (!cp) return false;
          if (*cp >= 0xDC00 && *cp <= 0xDFFF) return false;  // a low surrogate alone
          if (*cp >= 0xD800 && *cp <= 0xDBFF) {
            if (s_.size() - pos_ < 2 || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') return false;
            pos_ += 2;
            const auto lo = hex4();
            if (!lo || *lo < 0xDC00 || *lo > 0xDFFF) return false;
            *cp = 0x10000 + ((*cp - 0xD800) << 10) + (*lo - 0xDC00);
          }
          if (out) append_utf8(*out, *cp);
          continue;
        }
        default: return false;
      }
      if (out) *out += decoded;
    }
    return false;  // the text ends inside the string
  }

  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }

  std::string_view s_;
  const std::vector<std::string>& tokens_;
  std::vector<std::optional<std::size_t>> indices_;  ///< tokens_ as array indices
  std::vector<Frame> stack_;
  std::size_t pos_ = 0;
  std::optional<std::size_t> found_;
  std::string key_;
};

}  // namespace

std::optional<std::vector<std::string>> parse_json_pointer(std::string_view pointer) {
  std::vector<std::string> tokens;
  if (pointer.empty()) return tokens;
  if (pointer[0] != '/') return std::nullopt;
  for (std::size_t i = 0; i < pointer.size(); ++i) {
    const char c = pointer[i];
    if (c == '/') {
      tokens.emplace_back();
    } else if (c == '~') {
      if (i + 1 >= pointer.size() || (pointer[i + 1] != '0' && pointer[i + 1] != '1')) return std::nullopt;
      tokens.back() += pointer[++i] == '0' ? '~' : '/';
    } else {
      tokens.back() += c;
    }
  }
  return tokens;
}

std::optional<JsonTextLocation> locate_json_value(std::string_view json_text, std::string_view pointer) {
  const auto tokens = parse_json_pointer(pointer);
  if (!tokens) return std::nullopt;
  const auto offset = Scanner(json_text, *tokens).run();
  if (!offset) return std::nullopt;
  JsonTextLocation loc;
  loc.offset = *offset;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < *offset; ++i) {
    if (json_text[i] == '\n') {
      ++loc.line;
      line_start = i + 1;
    }
  }
  loc.column = *offset - line_start + 1;
  return loc;
}

}  // namespace mlaplan

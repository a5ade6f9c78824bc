// A checkpoint's tensor list from its safetensors headers and index, never from its tensor data
// (include/mlaplan/model/safetensors.hpp).

#include "mlaplan/model/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <unordered_set>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/input_file.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/model/hf_cache.hpp"

namespace mlaplan {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr std::string_view kIndexName = "model.safetensors.index.json";
constexpr std::string_view kSingleName = "model.safetensors";

std::string qpath(std::string_view path) { return mlaplan::quoted(path, kQuotedPathMaxBytes); }

/// What a JSON value is, for messages.
std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "the integer " + v.dump();
    case json::value_t::number_float: return "the number " + v.dump();
    case json::value_t::string: return "the string " + mlaplan::quoted(v.get_ref<const std::string&>());
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "a " + std::string(v.type_name());
  }
}

/// Rejects nesting deeper than the limit before the recursive parser sees it.
void check_nesting(std::string_view text, const std::string& where) {
  if (const auto past = find_nesting_past(text, CheckpointLimits::max_nesting_depth)) {
    throw_config(where + "is nested deeper than " + std::to_string(CheckpointLimits::max_nesting_depth) +
                 " levels (byte offset " + std::to_string(past->offset) +
                 "); a safetensors header or index is 3 levels deep");
  }
}

/// A key given twice in one object: the keys of the objects around it (outermost first) and the key.
struct DuplicateKey {
  std::vector<std::string> path;
  std::string key;
};

/// How a reader words a duplicate key ("tensor 'x' is in the header twice ...").
using DuplicateWords = std::string (*)(const DuplicateKey&);

/// nlohmann::json's SAX events made into values, in linear time, refusing a key given twice in one
/// object (nlohmann::json's own parser keeps the last; its callback parser, which could refuse
/// it, rescans an object's members at the end of every member that is an object: quadratic).
/// With a `member` consumer, the members of a top-level object are handed to it one by one as
/// they end and not kept (a header of a million tensors never exists as one DOM), and the items
/// of a top-level array are dropped (only its kind is told).
class StrictSax {
 public:
  /// A member of the top-level object (`parent` empty), or of a top-level object member named
  /// by `nested` (`parent` its key): handed over as it ends, not kept.
  using Member = std::function<void(const std::string& parent, const std::string& key, json&& value)>;
  StrictSax(Member member, std::string nested, std::size_t max_values)
      : member_(std::move(member)), nested_(std::move(nested)), values_left_(max_values) {}

  json root;
  std::optional<DuplicateKey> duplicate;
  std::string error;      ///< nlohmann's message for a syntax error
  bool too_many = false;  ///< stopped at more than max_values values

  bool null() { return count() && value(json(nullptr)); }
  bool boolean(bool b) { return count() && value(json(b)); }
  bool number_integer(json::number_integer_t v) { return count() && value(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return count() && value(json(v)); }
  bool number_float(json::number_float_t v, const std::string&) { return count() && value(json(v)); }
  bool string(std::string& v) { return count() && value(json(std::move(v))); }
  bool binary(json::binary_t& v) { return count() && value(json::binary(std::move(v))); }
  bool start_object(std::size_t) {
    if (!count()) return false;
    frames_.push_back(Frame{json::object(), {}, {}, {}});
    return true;
  }
  bool start_array(std::size_t) {
    if (!count()) return false;
    frames_.push_back(Frame{json::array(), {}, {}, {}});
    return true;
  }
  bool key(std::string& k) {
    Frame& f = frames_.back();
    if (!f.add_key(k)) {
      DuplicateKey d;
      for (std::size_t i = 0; i + 1 < frames_.size(); ++i) d.path.push_back(frames_[i].key);
      d.key = k;
      duplicate = std::move(d);
      return false;
    }
    f.key = std::move(k);
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    error = e.what();
    return false;
  }

 private:
  struct Frame {
    json value;
    std::vector<std::string> few;          ///< the keys of an object, while it has few (a tensor entry)
    std::unordered_set<std::string> many;  ///< then all of them (a header's tensors)
    std::string key;                       ///< the last key read in it
    /// false when the object has the key already.
    bool add_key(const std::string& k) {
      constexpr std::size_t kFew = 8;
      if (many.empty()) {
        if (std::find(few.begin(), few.end(), k) != few.end()) return false;
        if (few.size() < kFew) {
          few.push_back(k);
          return true;
        }
        many.insert(std::make_move_iterator(few.begin()), std::make_move_iterator(few.end()));
        few.clear();
      }
      return many.insert(k).second;
    }
  };
  /// One more value, while the bound allows.
  bool count() {
    if (values_left_ == 0) {
      too_many = true;
      return false;
    }
    --values_left_;
    return true;
  }
  bool close() {
    json v = std::move(frames_.back().value);
    frames_.pop_back();
    return value(std::move(v));
  }
  /// A whole value: the root, a member or an item of the innermost open value.
  bool value(json&& v) {
    if (frames_.empty()) {
      root = std::move(v);
      return true;
    }
    Frame& parent = frames_.back();
    const bool top = frames_.size() == 1 && member_;
    if (parent.value.is_object()) {
      static const std::string kTop;
      if (top) {
        member_(kTop, parent.key, std::move(v));
      } else if (member_ && frames_.size() == 2 && frames_[0].value.is_object() && frames_[0].key == nested_) {
        member_(nested_, parent.key, std::move(v));
      } else {
        parent.value.emplace(parent.key, std::move(v));
      }
    } else if (!top) {
      parent.value.push_back(std::move(v));
    }
    return true;
  }
  Member member_;
  std::string nested_;
  std::size_t values_left_;
  std::vector<Frame> frames_;
};

/// The JSON of `text` (a header or an index) through StrictSax (with `member`, the top-level
/// object's members go to it and the value returned is the object without them). `prefix` starts
/// every message ("safetensors 'P': "), `what` names the text ("the header "); a duplicate key is
/// worded by `words`.
json parse_json(std::string_view text, const std::string& prefix, const std::string& what, DuplicateWords words,
                std::size_t max_values, StrictSax::Member member = nullptr, std::string nested = "") {
  const std::string where = prefix + what;
  if (auto nul = find_nul_byte(text)) {
    throw_config(where + "holds a " + describe_nul_byte(*nul) + "; it is JSON text, which never holds a NUL byte");
  }
  check_nesting(text, where);
  StrictSax sax(std::move(member), std::move(nested), max_values);
  const bool ok = json::sax_parse(text.begin(), text.end(), &sax, json::input_format_t::json, /*strict=*/true,
                                  /*ignore_comments=*/false);
  if (sax.duplicate) throw_config(prefix + words(*sax.duplicate));
  if (sax.too_many) {
    throw_config(where + "holds more than " + std::to_string(max_values) + " JSON values (" +
                 std::to_string(CheckpointLimits::max_json_values_per_tensor) +
                 " for each tensor CheckpointLimits::max_total_tensors leaves to it)");
  }
  if (!ok) {
    std::string message = sax.error;
    if (auto pos = message.find("] "); message.rfind("[json.exception", 0) == 0 && pos != std::string::npos) {
      message = message.substr(pos + 2);
    }
    throw_config(where + "is not valid JSON: " + printable(message, 240));
  }
  return std::move(sax.root);
}

/// A duplicate key of a safetensors header.
std::string header_duplicate(const DuplicateKey& d) {
  if (d.path.empty()) {
    if (d.key == "__metadata__") return "\"__metadata__\" is in the header twice";
    return "tensor " + mlaplan::quoted(d.key) +
           " is in the header twice (safetensors keys tensors by name: one entry and its bytes would be lost)";
  }
  if (d.path.front() == "__metadata__") return "\"__metadata__\" holds the key " + mlaplan::quoted(d.key) + " twice";
  return "tensor " + mlaplan::quoted(d.path.front()) + ": the key " + mlaplan::quoted(d.key) + " is given twice";
}

/// A duplicate key of model.safetensors.index.json.
std::string index_duplicate(const DuplicateKey& d) {
  if (d.path.empty()) return mlaplan::quoted(d.key) + " is in the index twice";
  if (d.path.front() == "weight_map") {
    return "\"weight_map\" names tensor " + mlaplan::quoted(d.key) + " twice (one shard would be lost)";
  }
  return mlaplan::quoted(d.path.front()) + " holds the key " + mlaplan::quoted(d.key) + " twice";
}

/// A JSON integer in 0..INT64_MAX, or nullopt.
std::optional<std::int64_t> non_negative(const json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    if (i < 0) return std::nullopt;
    return i;
  }
  return std::nullopt;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string range_text(std::int64_t begin, std::int64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

/// Opens a regular file for reading (stat() first, so that a FIFO or a device is never opened),
/// as read_input_file() does; `fail` prefixes the cause.
int open_regular(const std::string& path, const std::string& prefix, struct stat& st) {
  if (path.find('\0') != std::string::npos) throw_config(prefix + "the path holds a NUL byte");
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    struct stat link {};
    if (err == ENOENT && ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
      throw_config(prefix + "no such file or directory (a symbolic link to a missing file)");
    }
    throw_config(prefix + file_error_cause(err, path));
  }
  if (S_ISDIR(st.st_mode)) throw_config(prefix + "it is a directory");
  if (!S_ISREG(st.st_mode)) {
    throw_config(prefix + "it is " + std::string(file_type_name(st.st_mode)) + "; only a regular file is read");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw_config(prefix + file_error_cause(errno, path));
  // The path may have been swapped between stat() and open().
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    if (!S_ISREG(st.st_mode)) {
      throw_config(prefix + "it is " + std::string(file_type_name(st.st_mode)) + "; only a regular file is read");
    }
    throw_config(prefix + file_error_cause(err, path));
  }
  return fd;
}

/// Exactly `n` bytes at `offset`, or an error naming what was being read.
std::string read_exact(int fd, std::int64_t offset, std::int64_t n, const std::string& prefix, std::string_view what) {
  std::string buf(static_cast<std::size_t>(n), '\0');
  std::int64_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, buf.data() + done, static_cast<std::size_t>(n - done), offset + done);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_config(prefix + "read failed (" + std::string(what) + "): " + file_error_cause(errno, ""));
    }
    if (r == 0) {
      throw_config(prefix + "the file ended after " + std::to_string(offset + done) + " bytes while reading the " +
                   std::string(what) + " (it shrank while being read)");
    }
    done += r;
  }
  return buf;
}

/// A tensor entry whose fields have the right JSON types, before its values are checked.
struct RawTensor {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;  ///< each 0..2^63-1
  std::int64_t begin = 0;           ///< 0..2^63-1
  std::int64_t end = 0;
};

/// Checks the values of a tensor entry: a known dtype, an element count within int64, offsets in
/// the data area holding exactly elements x dtype size bytes. Messages start
/// "safetensors 'P': tensor 'NAME': ".
SafetensorsTensor finish_tensor(RawTensor&& raw, const std::string& prefix, std::int64_t data_bytes) {
  // Built only for a message: quoting every name of a large header would cost more than the parse.
  const auto where = [&] { return prefix + "tensor " + mlaplan::quoted(raw.name) + ": "; };
  const auto dt = find_safetensors_dtype(raw.dtype);
  if (!dt) {
    std::string known;
    for (const auto& d : safetensors_dtypes()) known += (known.empty() ? "" : ", ") + std::string(d.name);
    throw_config(where() + "\"dtype\" " + mlaplan::quoted(raw.dtype) + " is not a safetensors dtype (" + known + ")");
  }
  SafetensorsTensor t;
  t.dtype = std::string(dt->name);
  t.elements = 1;
  bool overflow = false;
  for (const std::int64_t d : raw.shape) {
    if (!overflow && __builtin_mul_overflow(t.elements, d, &t.elements)) overflow = true;
  }
  // A 0 anywhere makes the product 0 even after an overflow of the dimensions before it.
  if (std::find(raw.shape.begin(), raw.shape.end(), 0) != raw.shape.end()) {
    overflow = false;
    t.elements = 0;
  }
  if (overflow) throw_config(where() + "\"shape\" " + shape_text(raw.shape) + " has more elements than 2^63-1");
  t.begin = raw.begin;
  t.end = raw.end;
  const std::string range = "\"data_offsets\" " + range_text(t.begin, t.end);
  if (t.end < t.begin) throw_config(where() + range + ": end is before begin");
  if (t.end > data_bytes) {
    throw_config(where() + range + ": end is past the data area (" + std::to_string(data_bytes) +
                 " bytes after the header)");
  }
  t.bytes = t.end - t.begin;
  const auto expected = safetensors_tensor_bytes(*dt, t.elements);
  if (!expected && (t.elements % 8) * dt->bits % 8 != 0) {
    throw_config(where() + "\"shape\" " + shape_text(raw.shape) + " of " + t.dtype + " is " +
                 std::to_string(t.elements) + " x " + std::to_string(dt->bits) + " bits, not a whole number of bytes");
  }
  if (!expected) {
    throw_config(where() + range + " holds " + std::to_string(t.bytes) + " bytes; \"shape\" " + shape_text(raw.shape) +
                 " of " + t.dtype + " is more than 2^63-1 bytes");
  }
  if (*expected != t.bytes) {
    throw_config(where() + range + " holds " + std::to_string(t.bytes) + " bytes; \"shape\" " + shape_text(raw.shape) +
                 " of " + t.dtype + " is " + std::to_string(*expected) + " bytes");
  }
  t.name = std::move(raw.name);
  t.shape = std::move(raw.shape);
  return t;
}

/// Checks the JSON types of one tensor entry of a parsed header (messages as finish_tensor()).
RawTensor read_tensor(const std::string& name, const json& entry, const std::string& prefix) {
  const auto where = [&] { return prefix + "tensor " + mlaplan::quoted(name) + ": "; };
  if (!entry.is_object()) throw_config(where() + "the entry is " + describe(entry) + "; expected an object");
  RawTensor t;
  t.name = name;
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(key))
      throw_config(where() + "no \"" + key + "\" (every tensor has dtype, shape and data_offsets)");
  }
  const json& dtype = entry["dtype"];
  if (!dtype.is_string()) throw_config(where() + "\"dtype\" is " + describe(dtype) + "; expected a string");
  t.dtype = dtype.get<std::string>();
  const json& shape = entry["shape"];
  if (!shape.is_array()) throw_config(where() + "\"shape\" is " + describe(shape) + "; expected an array of integers");
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const auto d = non_negative(shape[i]);
    if (!d) {
      throw_config(where() + "\"shape\"[" + std::to_string(i) + "] is " + describe(shape[i]) +
                   "; expected an integer from 0 to 2^63-1");
    }
    t.shape.push_back(*d);
  }
  const json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    throw_config(
        where() + "\"data_offsets\" is " +
        (offsets.is_array() ? "an array of " + std::to_string(offsets.size()) + " entries" : describe(offsets)) +
        "; expected [begin, end]");
  }
  for (std::size_t i = 0; i < 2; ++i) {
    if (!non_negative(offsets[i])) {
      throw_config(where() + "\"data_offsets\"[" + std::to_string(i) + "] is " + describe(offsets[i]) +
                   "; expected an integer from 0 to 2^63-1");
    }
  }
  t.begin = *non_negative(offsets[0]);
  t.end = *non_negative(offsets[1]);
  return t;
}

/// A fast reader of the JSON that safetensors writers produce (json.dumps / serde_json of the
/// expected shape): a header object of tensors {dtype, shape, data_offsets} and a __metadata__
/// object of strings, an index {metadata: {total_size}, weight_map: {name: file}}. Strings of
/// printable ASCII without escapes, integers of at most 18 digits. On anything else (an escape, a
/// float, an unknown key, a duplicate, a syntax error) it gives up and the caller parses with
/// nlohmann::json, which accepts all of JSON and words every error: the two agree on what they
/// both accept. About 10x faster than building the DOM.
class FastJson {
 public:
  explicit FastJson(std::string_view text) : s_(text) {}

  bool ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
    return true;
  }
  bool lit(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    ws();
    return i_ < s_.size() && s_[i_] == c;
  }
  bool at_end() {
    ws();
    return i_ == s_.size();
  }
  bool str(std::string& out) {
    if (!lit('"')) return false;
    const std::size_t start = i_;
    while (i_ < s_.size()) {
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        out.assign(s_.data() + start, i_ - start);
        ++i_;
        return true;
      }
      if (c < 0x20 || c > 0x7e || c == '\\') return false;
      ++i_;
    }
    return false;
  }
  bool uint(std::int64_t& out) {
    ws();
    const std::size_t start = i_;
    std::int64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (i_ - start == 18) return false;  // more digits: nlohmann::json decides (and words the error)
      v = v * 10 + (s_[i_++] - '0');
    }
    const std::size_t n = i_ - start;
    if (n == 0 || n > 18 || (n > 1 && s_[start] == '0')) return false;
    if (i_ < s_.size() && (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) return false;
    out = v;
    return true;
  }
  /// {"k": "v", ...} into `out`, refusing a duplicate key.
  /// {"k": "v", ...} into `out`, refusing a duplicate key and more than `max` entries (then the
  /// general parser says which).
  bool string_map(std::map<std::string, std::string>& out, std::size_t max) {
    if (!lit('{')) return false;
    if (lit('}')) return true;
    do {
      std::string k, v;
      if (!str(k) || !lit(':') || !str(v) || out.size() == max) return false;
      if (!out.emplace(std::move(k), std::move(v)).second) return false;
    } while (lit(','));
    return lit('}');
  }
  bool tensor(RawTensor& t) {
    if (!lit('{')) return false;
    bool dtype = false, shape = false, offsets = false;
    do {
      std::string key;
      if (!str(key) || !lit(':')) return false;
      if (key == "dtype" && !dtype) {
        if (!str(t.dtype)) return false;
        dtype = true;
      } else if (key == "shape" && !shape) {
        if (!lit('[')) return false;
        if (!lit(']')) {
          do {
            std::int64_t d = 0;
            if (!uint(d)) return false;
            t.shape.push_back(d);
          } while (lit(','));
          if (!lit(']')) return false;
        }
        shape = true;
      } else if (key == "data_offsets" && !offsets) {
        if (!lit('[') || !uint(t.begin) || !lit(',') || !uint(t.end) || !lit(']')) return false;
        offsets = true;
      } else {
        return false;
      }
    } while (lit(','));
    return lit('}') && dtype && shape && offsets;
  }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

/// A header through FastJson, or nullopt when it gives up. Past `max_tensors` tensors it stops
/// and sets `over`.
std::optional<std::vector<RawTensor>> fast_header(std::string_view text, std::map<std::string, std::string>& metadata,
                                                  std::size_t max_tensors, bool& over) {
  FastJson p(text);
  std::vector<RawTensor> tensors;
  bool has_metadata = false;
  if (!p.lit('{')) return std::nullopt;
  if (!p.lit('}')) {
    do {
      std::string name;
      if (!p.str(name) || !p.lit(':')) return std::nullopt;
      if (name == "__metadata__") {
        if (has_metadata || !p.string_map(metadata, CheckpointLimits::max_metadata_entries)) return std::nullopt;
        has_metadata = true;
        continue;
      }
      RawTensor t;
      t.name = std::move(name);
      if (!p.tensor(t)) return std::nullopt;
      if (tensors.size() == max_tensors) {
        over = true;
        return std::nullopt;
      }
      tensors.push_back(std::move(t));
    } while (p.lit(','));
    if (!p.lit('}')) return std::nullopt;
  }
  if (!p.at_end()) return std::nullopt;
  std::sort(tensors.begin(), tensors.end(), [](const RawTensor& a, const RawTensor& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].name == tensors[i - 1].name) return std::nullopt;  // nlohmann::json's path words it
  }
  return tensors;
}

/// Plain names only: a shard named by the index is a file of the model directory itself.
bool is_plain_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

/// stat() of a directory, or an error naming it and the cause.
void require_directory(const std::string& path, const std::string& prefix) {
  if (path.find('\0') != std::string::npos) throw_config(prefix + "the path holds a NUL byte");
  if (path.empty()) throw_config(prefix + "the path is empty");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw_config(prefix + file_error_cause(errno, path));
  if (!S_ISDIR(st.st_mode)) {
    throw_config(prefix + "it is " + std::string(file_type_name(st.st_mode)) + "; expected a model directory");
  }
}

/// lstat()/stat() says the path exists (a dangling symbolic link exists too).
bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::string join(const std::string& dir, std::string_view name) {
  if (!dir.empty() && dir.back() == '/') return dir + std::string(name);
  return dir + "/" + std::string(name);
}

}  // namespace

const std::vector<SafetensorsDtype>& safetensors_dtypes() {
  // safetensors' Dtype enum (safetensors/src/tensor.rs), with bitsize().
  static const std::vector<SafetensorsDtype> dtypes = {
      {"BOOL", 8},    {"F4", 4},      {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"U8", 8},   {"I8", 8},    {"F8_E5M2", 8},
      {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"I16", 16},    {"U16", 16},    {"F16", 16}, {"BF16", 16}, {"I32", 32},
      {"U32", 32},    {"F32", 32},    {"C64", 64},    {"F64", 64},    {"I64", 64}, {"U64", 64},
  };
  return dtypes;
}

std::optional<SafetensorsDtype> find_safetensors_dtype(std::string_view name) {
  for (const auto& d : safetensors_dtypes()) {
    if (d.name == name) return d;
  }
  return std::nullopt;
}

std::optional<std::int64_t> safetensors_tensor_bytes(const SafetensorsDtype& dtype, std::int64_t elements) {
  if (elements < 0 || dtype.bits <= 0) return std::nullopt;
  if (dtype.bits % 8 == 0) {
    std::int64_t r = 0;
    if (__builtin_mul_overflow(elements, dtype.bits / 8, &r)) return std::nullopt;
    return r;
  }
  // elements x bits must be a multiple of 8; computed without overflowing elements x bits.
  const std::int64_t q = elements / 8, rem = elements % 8;
  if ((rem * dtype.bits) % 8 != 0) return std::nullopt;
  std::int64_t r = 0;
  if (__builtin_mul_overflow(q, dtype.bits, &r)) return std::nullopt;
  return r + rem * dtype.bits / 8;
}

namespace {

/// What one read of a checkpoint (a directory, or a single file) has used of the bounds
/// CheckpointLimits puts on the whole: the headers' bytes and the tensors.
class ReadBudget {
 public:
  explicit ReadBudget(std::string dir) : dir_(std::move(dir)) {}

  /// Before a header of `n` bytes (after its 8-byte length) is read; `prefix` names its file.
  void add_header(std::int64_t n, const std::string& prefix) {
    const std::int64_t after = header_bytes_ + 8 + n;  // each n is at most max_header_bytes: no overflow
    if (after > CheckpointLimits::max_total_header_bytes) {
      throw_config(prefix + "the header length " + std::to_string(n) + " takes the headers of " + where() + " to " +
                   std::to_string(after) + " bytes, over " + std::to_string(CheckpointLimits::max_total_header_bytes) +
                   " (CheckpointLimits::max_total_header_bytes); DeepSeek-V3's 163 shards have about 16 MB");
    }
    header_bytes_ = after;
  }
  /// Tensors a header or an index may still add.
  std::size_t tensors_left() const { return static_cast<std::size_t>(CheckpointLimits::max_total_tensors - tensors_); }
  void add_tensors(std::size_t n) { tensors_ += static_cast<std::int64_t>(n); }
  [[noreturn]] void too_many_tensors(const std::string& prefix) const {
    throw_config(prefix + "more than " + std::to_string(CheckpointLimits::max_total_tensors) + " tensors in " +
                 where() + " (CheckpointLimits::max_total_tensors; " + std::to_string(tensors_) +
                 " before this file); DeepSeek-V3 has 91,000");
  }

 private:
  std::string where() const { return dir_.empty() ? std::string("one checkpoint") : "checkpoint " + qpath(dir_); }
  std::string dir_;
  std::int64_t header_bytes_ = 0;
  std::int64_t tensors_ = 0;
};

/// How a shard file was found: whole, or not (what a download in progress leaves).
enum class ShardState {
  whole,
  lfs_pointer,  ///< a Git LFS pointer file: the weights were never fetched
  truncated,    ///< shorter than its 8-byte length, its header or its header's data say
};

struct ShardRead {
  SafetensorsHeader header;
  ShardState state = ShardState::whole;
  std::string why;  ///< for a shard that is not whole: "a Git LFS pointer to ...", "truncated: ..."
};

void read_header_json(SafetensorsHeader& h, const std::string& text, const std::string& prefix, std::int64_t data_limit,
                      ReadBudget& budget);
void check_overlaps(const SafetensorsHeader& h, const std::string& prefix);

/// The Git LFS pointer file `text` stands for ("version https://git-lfs.github.com/spec/v1",
/// "oid sha256:...", "size N": git-lfs's docs/spec.md; a pointer is under 1024 bytes): the size
/// of the file it points to, or -1 when it names none; nullopt when `text` is not a pointer.
std::optional<std::int64_t> lfs_pointer_size(std::string_view text) {
  if (text.rfind("version https://git-lfs.github.com/spec/", 0) != 0 &&
      text.rfind("version https://hawser.github.com/spec/", 0) != 0) {
    return std::nullopt;
  }
  const auto at = text.find("\nsize ");
  if (at == std::string_view::npos) return -1;
  std::int64_t size = 0;
  std::size_t i = at + 6, digits = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9' && digits < 18; ++i, ++digits) {
    size = size * 10 + (text[i] - '0');
  }
  return digits > 0 ? size : -1;
}

/// Reads the header of the safetensors file `path`. With `tolerate_partial` a Git LFS pointer or
/// a file shorter than it says is not an error but a ShardRead that says so (its header read as
/// far as the file allows); without, both are errors. Throws Error(invalid_config) for the rest.
ShardRead read_shard(const std::string& path, bool tolerate_partial, ReadBudget& budget) {
  const std::string prefix = "safetensors " + qpath(path) + ": ";
  if (path.empty()) throw_config(prefix + "the path is empty");
  struct stat st {};
  const FileDescriptor fd(open_regular(path, "cannot read safetensors " + qpath(path) + ": ", st));
  const std::int64_t size = st.st_size;
  ShardRead r;
  r.header.path = path;
  const auto partial = [&](ShardState state, std::string why) {
    if (!tolerate_partial) throw_config(prefix + why);
    r.state = state;
    r.why = std::move(why);
    return r;
  };
  if (size < 1024) {
    const std::string head = read_exact(fd.get(), 0, size, prefix, "file");
    if (const auto lfs = lfs_pointer_size(head)) {
      return partial(ShardState::lfs_pointer,
                     "the file is a Git LFS pointer" +
                         (*lfs >= 0 ? " to " + format_grouped(*lfs) + " bytes" : std::string()) +
                         ", not the safetensors file (the weights were not fetched: git lfs pull)");
    }
  }
  if (size < 8) {
    return partial(ShardState::truncated, "the file is " + std::to_string(size) +
                                              " bytes; a safetensors file starts with an 8-byte header length");
  }
  const std::string len_bytes = read_exact(fd.get(), 0, 8, prefix, "header length");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(len_bytes[static_cast<std::size_t>(i)]);
  if (n > static_cast<std::uint64_t>(CheckpointLimits::max_header_bytes)) {
    throw_config(prefix + "the header length " + std::to_string(n) + " is over " +
                 std::to_string(CheckpointLimits::max_header_bytes) +
                 " bytes (CheckpointLimits::max_header_bytes, safetensors' own limit)");
  }
  const auto header_bytes = static_cast<std::int64_t>(n);
  if (header_bytes > size - 8) {
    return partial(ShardState::truncated, "the header length " + std::to_string(header_bytes) +
                                              " is past the end of the file (" + std::to_string(size) +
                                              " bytes: at most " + std::to_string(size - 8) +
                                              " after the 8-byte length)");
  }
  budget.add_header(header_bytes, prefix);
  const std::string text = read_exact(fd.get(), 8, header_bytes, prefix, "header");
  SafetensorsHeader& h = r.header;
  h.header_bytes = header_bytes;
  h.data_bytes = size - 8 - header_bytes;
  // Tolerating a short file, the offsets are checked against the end the header describes.
  const std::int64_t data_limit = tolerate_partial ? INT64_MAX : h.data_bytes;
  bool over = false;
  if (auto raw = fast_header(text, h.metadata, budget.tensors_left(), over)) {
    h.tensors.reserve(raw->size());
    for (auto& t : *raw) h.tensors.push_back(finish_tensor(std::move(t), prefix, data_limit));
  } else {
    if (over) budget.too_many_tensors(prefix);
    h.metadata.clear();
    read_header_json(h, text, prefix, data_limit, budget);
  }
  budget.add_tensors(h.tensors.size());
  check_overlaps(h, prefix);
  std::int64_t data_end = 0;
  for (const auto& t : h.tensors) {
    data_end = std::max(data_end, t.end);
    h.tensor_bytes += t.bytes;  // the ranges do not overlap and end by data_end: no overflow
  }
  if (data_end > h.data_bytes) {
    return partial(ShardState::truncated, "truncated: its header describes " + format_grouped(data_end) +
                                              " bytes of tensor data, the file holds " + format_grouped(h.data_bytes));
  }
  return r;
}

void read_header_json(SafetensorsHeader& h, const std::string& text, const std::string& prefix, std::int64_t data_limit,
                      ReadBudget& budget) {
  const std::size_t most = budget.tensors_left();
  const std::size_t max_values = most * static_cast<std::size_t>(CheckpointLimits::max_json_values_per_tensor) + 1;
  const auto metadata_entry = [&](const std::string& key, const json& value) {
    if (!value.is_string()) {
      throw_config(prefix + "\"__metadata__\"[" + mlaplan::quoted(key) + "] is " + describe(value) +
                   "; expected a string");
    }
    if (static_cast<std::int64_t>(h.metadata.size()) == CheckpointLimits::max_metadata_entries) {
      throw_config(prefix + "\"__metadata__\" holds more than " +
                   std::to_string(CheckpointLimits::max_metadata_entries) +
                   " entries (CheckpointLimits::max_metadata_entries); a writer stores a few (\"format\": \"pt\")");
    }
    h.metadata.emplace(key, value.get<std::string>());
  };
  const json top = parse_json(
      text, prefix, "the header ", header_duplicate, max_values,
      [&](const std::string& parent, const std::string& name, json&& entry) {
        if (!parent.empty()) {  // a member of __metadata__, handed over one by one
          metadata_entry(name, entry);
          return;
        }
        if (name == "__metadata__") {
          if (!entry.is_object()) {
            throw_config(prefix + "\"__metadata__\" is " + describe(entry) + "; expected an object of strings");
          }
          return;  // its members came one by one
        }
        if (h.tensors.size() == most) budget.too_many_tensors(prefix);
        h.tensors.push_back(finish_tensor(read_tensor(name, entry, prefix), prefix, data_limit));
      },
      "__metadata__");
  if (!top.is_object()) throw_config(prefix + "the header is " + describe(top) + "; expected a JSON object of tensors");
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.name < b.name; });
}

/// No two tensors' ranges overlap (empty tensors hold no byte and overlap nothing).
void check_overlaps(const SafetensorsHeader& h, const std::string& prefix) {
  std::vector<const SafetensorsTensor*> by_offset;
  by_offset.reserve(h.tensors.size());
  for (const auto& t : h.tensors) {
    if (t.bytes > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->name < b->name;
  });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const auto* prev = by_offset[i - 1];
    const auto* cur = by_offset[i];
    if (cur->begin < prev->end) {
      throw_config(prefix + "tensor " + mlaplan::quoted(prev->name) + " " + range_text(prev->begin, prev->end) +
                   " and tensor " + mlaplan::quoted(cur->name) + " " + range_text(cur->begin, cur->end) +
                   " overlap in \"data_offsets\"");
    }
  }
}

}  // namespace

SafetensorsHeader read_safetensors_header(const std::string& path) {
  ReadBudget budget("");
  return read_shard(path, /*tolerate_partial=*/false, budget).header;
}

namespace {

/// Moves a header's tensors into a checkpoint.
void add_tensors(CheckpointFiles& out, SafetensorsHeader&& h, const std::string& file) {
  out.tensors.reserve(out.tensors.size() + h.tensors.size());
  for (auto& t : h.tensors) {
    out.tensor_bytes = checked_add(out.tensor_bytes, t.bytes, "the checkpoint's tensor bytes");
    out.tensors.push_back({std::move(t.name), std::move(t.dtype), std::move(t.shape), t.bytes, file});
  }
  out.header_bytes = checked_add(out.header_bytes, 8 + h.header_bytes, "the checkpoint's header bytes");
}

void sort_tensors(CheckpointFiles& out) {
  std::sort(out.tensors.begin(), out.tensors.end(),
            [](const CheckpointTensor& a, const CheckpointTensor& b) { return a.name < b.name; });
}

/// Without an index nothing says which file holds a tensor: a name in two files is an error.
void refuse_names_in_two_files(const CheckpointFiles& out) {
  for (std::size_t i = 1; i < out.tensors.size(); ++i) {
    const CheckpointTensor& a = out.tensors[i - 1];
    const CheckpointTensor& b = out.tensors[i];
    if (a.name == b.name) {
      throw_config("checkpoint " + qpath(out.dir) + ": tensor " + mlaplan::quoted(a.name) + " is in both " +
                   qpath(std::min(a.file, b.file)) + " and " + qpath(std::max(a.file, b.file)));
    }
  }
}

/// What an index says: its weight_map entries (tensor, shard) sorted by tensor, and total_size.
struct IndexEntries {
  std::vector<std::pair<std::string, std::string>> map;
  std::optional<std::int64_t> total_size;
};

/// An index through FastJson ({"metadata": {"total_size": N}, "weight_map": {...}}), or nullopt.
std::optional<IndexEntries> fast_index(std::string_view text) {
  FastJson p(text);
  IndexEntries out;
  bool has_meta = false, has_map = false;
  if (!p.lit('{')) return std::nullopt;
  if (!p.lit('}')) {
    do {
      std::string key;
      if (!p.str(key) || !p.lit(':')) return std::nullopt;
      if (key == "metadata" && !has_meta) {
        has_meta = true;
        if (!p.lit('{')) return std::nullopt;
        if (!p.lit('}')) {
          std::string k;
          std::int64_t v = 0;
          if (!p.str(k) || k != "total_size" || !p.lit(':') || !p.uint(v) || !p.lit('}')) return std::nullopt;
          out.total_size = v;
        }
      } else if (key == "weight_map" && !has_map) {
        has_map = true;
        if (!p.lit('{')) return std::nullopt;
        if (!p.lit('}')) {
          do {
            std::string name, file;
            if (!p.str(name) || !p.lit(':') || !p.str(file)) return std::nullopt;
            out.map.emplace_back(std::move(name), std::move(file));
          } while (p.lit(','));
          if (!p.lit('}')) return std::nullopt;
        }
      } else {
        return std::nullopt;
      }
    } while (p.lit(','));
    if (!p.lit('}')) return std::nullopt;
  }
  if (!p.at_end() || !has_map) return std::nullopt;
  std::sort(out.map.begin(), out.map.end());
  for (std::size_t i = 1; i < out.map.size(); ++i) {
    if (out.map[i].first == out.map[i - 1].first) return std::nullopt;
  }
  return out;
}

/// An index through nlohmann::json, with every message.
IndexEntries index_json(const std::string& text, const std::string& prefix) {
  const json top = parse_json(
      text, prefix, "the index ", index_duplicate,
      static_cast<std::size_t>(CheckpointLimits::max_total_tensors * CheckpointLimits::max_json_values_per_tensor));
  if (!top.is_object()) throw_config(prefix + "the top level is " + describe(top) + "; expected a JSON object");
  IndexEntries out;
  if (top.contains("metadata")) {
    const json& meta = top["metadata"];
    if (!meta.is_object()) throw_config(prefix + "\"metadata\" is " + describe(meta) + "; expected an object");
    if (meta.contains("total_size")) {
      const json& ts = meta["total_size"];
      // Some writers store it as a float with no fraction (1.5e10): accepted when it is a whole number.
      std::optional<std::int64_t> v = non_negative(ts);
      if (!v && ts.is_number_float()) {
        const double d = ts.get<double>();
        if (d >= 0 && d < 9.2e18 && d == static_cast<double>(static_cast<std::int64_t>(d))) {
          v = static_cast<std::int64_t>(d);
        }
      }
      if (!v) {
        throw_config(prefix + "\"metadata\".\"total_size\" is " + describe(ts) +
                     "; expected an integer from 0 to 2^63-1 (the tensors' bytes)");
      }
      out.total_size = *v;
    }
  }
  if (!top.contains("weight_map")) throw_config(prefix + "no \"weight_map\" (tensor name -> shard file)");
  const json& map = top["weight_map"];
  if (!map.is_object()) throw_config(prefix + "\"weight_map\" is " + describe(map) + "; expected an object");
  out.map.reserve(map.size());
  for (const auto& [name, file] : map.items()) {  // ordered by name, each once
    if (!file.is_string()) {
      throw_config(prefix + "\"weight_map\"[" + mlaplan::quoted(name) + "] is " + describe(file) +
                   "; expected a shard file name");
    }
    out.map.emplace_back(name, file.get<std::string>());
  }
  return out;
}

/// Records a shard the checkpoint lacks (the list keeps the first by name; all are counted).
void add_missing(CheckpointFiles& out, MissingShard m) {
  ++out.missing_count;
  if (m.tensors > 0) out.missing_tensors += m.tensors;
  out.missing.push_back(std::move(m));
  std::sort(out.missing.begin(), out.missing.end(),
            [](const MissingShard& a, const MissingShard& b) { return a.file < b.file; });
  if (static_cast<std::int64_t>(out.missing.size()) > CheckpointLimits::max_missing_listed) out.missing.pop_back();
}

void read_indexed(CheckpointFiles& out, const std::string& index_path, ReadBudget& budget) {
  const std::string prefix = qpath(index_path) + ": ";
  InputFileRules rules{"", CheckpointLimits::max_index_bytes, "CheckpointLimits::max_index_bytes",
                       "DeepSeek-V3's index (91,000 tensors) is about 9 MB"};
  const std::string text = read_input_file(index_path, rules);
  auto fast = fast_index(text);
  const IndexEntries index = fast ? std::move(*fast) : index_json(text, prefix);
  out.index_total_size = index.total_size;
  const auto& map = index.map;  // sorted by tensor name, each once
  if (map.size() > budget.tensors_left()) {
    throw_config(prefix + "\"weight_map\" names " + std::to_string(map.size()) + " tensors, more than " +
                 std::to_string(CheckpointLimits::max_total_tensors) +
                 " (CheckpointLimits::max_total_tensors); DeepSeek-V3 has 91,000");
  }

  // The shards, each with its first tensor (for a message) and how many tensors the map puts there.
  std::map<std::string, std::pair<std::string_view, std::size_t>> shards;
  for (const auto& [name, file] : map) {
    if (!is_plain_name(file)) {
      throw_config(prefix + "\"weight_map\"[" + mlaplan::quoted(name) + "] is " + qpath(file) +
                   "; a shard is a file of the model directory (a name without '/')");
    }
    auto [it, fresh] = shards.try_emplace(file, name, 0);
    ++it->second.second;
    if (fresh && static_cast<std::int64_t>(shards.size()) > CheckpointLimits::max_files) {
      throw_config(prefix + "\"weight_map\" names more than " + std::to_string(CheckpointLimits::max_files) +
                   " shard files (CheckpointLimits::max_files)");
    }
  }
  out.expected_files = static_cast<std::int64_t>(shards.size());
  const auto shard_of = [&](const std::string& name) -> const std::string* {
    auto it = std::lower_bound(map.begin(), map.end(), name,
                               [](const auto& entry, const std::string& n) { return entry.first < n; });
    return it != map.end() && it->first == name ? &it->second : nullptr;
  };
  out.tensors.reserve(map.size());
  for (const auto& [shard, info] : shards) {
    const std::string shard_path = join(out.dir, shard);
    const auto mapped = static_cast<std::int64_t>(info.second);
    if (!exists(shard_path)) {
      add_missing(out, MissingShard{shard, "not in the directory", mapped});
      continue;
    }
    ShardRead read = read_shard(shard_path, /*tolerate_partial=*/true, budget);
    if (read.state != ShardState::whole) {
      add_missing(out, MissingShard{shard, read.why, mapped});
      continue;
    }
    const SafetensorsHeader& h = read.header;
    for (const auto& t : h.tensors) {
      const std::string* file = shard_of(t.name);
      if (!file) {
        throw_config(prefix + "tensor " + mlaplan::quoted(t.name) + " of shard " + qpath(shard) +
                     " is not in \"weight_map\"");
      }
      if (*file != shard) {
        throw_config(prefix + "tensor " + mlaplan::quoted(t.name) + " is in shard " + qpath(shard) +
                     ", but \"weight_map\" puts it in " + qpath(*file));
      }
    }
    if (h.tensors.size() != info.second) {
      // Every tensor of the shard is in the map for this shard (above), so one of the map's is missing.
      for (const auto& [name, file] : map) {
        if (file != shard) continue;
        const bool held =
            std::binary_search(h.tensors.begin(), h.tensors.end(), name, [](const auto& a, const auto& b) {
              if constexpr (std::is_same_v<std::decay_t<decltype(a)>, SafetensorsTensor>) return a.name < b;
              else return a < b.name;
            });
        if (!held) {
          throw_config(prefix + "\"weight_map\" puts tensor " + mlaplan::quoted(name) + " in shard " + qpath(shard) +
                       ", which does not hold it");
        }
      }
    }
    // Each tensor is in the one shard the map names: no name can come twice.
    add_tensors(out, std::move(read.header), shard);
    out.files.push_back(shard);
  }
  // Of a complete checkpoint the index's total is the sum of its tensors; of an incomplete one it
  // is larger, which incomplete_reason() says.
  if (out.complete() && out.index_total_size && *out.index_total_size != out.tensor_bytes) {
    out.findings.push_back(std::string(kIndexName) + ": \"metadata\".\"total_size\" is " +
                           format_grouped(*out.index_total_size) + " bytes; the tensors of its " +
                           std::to_string(out.files.size()) + " shards hold " + format_grouped(out.tensor_bytes) +
                           " bytes (the headers' figure is used)");
  }
}

/// "*.safetensors", as the engines' glob matches it: not a name starting with '.' (Python's glob
/// leaves those out, so macOS's AppleDouble "._model.safetensors" is never loaded).
bool is_safetensors_name(std::string_view name) {
  constexpr std::string_view ext = ".safetensors";
  return name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0;
}

/// One file of a numbered series, "PREFIX-00002-of-00046.safetensors" (transformers' shard names).
struct SeriesMember {
  std::string series;  ///< "PREFIX\t-of-00046": the prefix and the count as written
  std::string prefix;
  std::string count_text;
  std::int64_t index = 0;  ///< 1..count
  std::int64_t count = 0;
  std::size_t width = 0;  ///< digits of the index as written
};

std::optional<SeriesMember> series_member(std::string_view name) {
  constexpr std::string_view ext = ".safetensors";
  const std::string_view stem = name.substr(0, name.size() - ext.size());
  const auto of = stem.rfind("-of-");
  if (of == std::string_view::npos) return std::nullopt;
  const auto dash = stem.rfind('-', of == 0 ? 0 : of - 1);
  if (dash == std::string_view::npos || dash >= of) return std::nullopt;
  const auto number = [](std::string_view d) -> std::int64_t {
    if (d.empty() || d.size() > 9) return -1;
    std::int64_t v = 0;
    for (char c : d) {
      if (c < '0' || c > '9') return -1;
      v = v * 10 + (c - '0');
    }
    return v;
  };
  SeriesMember m;
  m.prefix = std::string(stem.substr(0, dash));
  m.count_text = std::string(stem.substr(of + 4));
  m.index = number(stem.substr(dash + 1, of - dash - 1));
  m.count = number(m.count_text);
  m.width = of - dash - 1;
  if (m.index < 1 || m.count < 1 || m.index > m.count) return std::nullopt;
  m.series = m.prefix + '\t' + m.count_text;
  return m;
}

/// The members of each numbered series in `names` that the directory lacks.
void add_missing_series(CheckpointFiles& out, const std::vector<std::string>& names) {
  std::map<std::string, std::pair<SeriesMember, std::set<std::int64_t>>> series;
  for (const auto& name : names) {
    if (auto m = series_member(name)) {
      auto& [first, present] = series.try_emplace(m->series, *m, std::set<std::int64_t>{}).first->second;
      present.insert(m->index);
    }
  }
  for (const auto& [key, entry] : series) {
    const auto& [m, present] = entry;
    const std::int64_t absent = m.count - static_cast<std::int64_t>(present.size());
    out.expected_files += absent;
    std::int64_t listed = 0;
    for (std::int64_t i = 1; i <= m.count && listed < CheckpointLimits::max_missing_listed; ++i) {
      if (present.count(i)) continue;
      std::string digits = std::to_string(i);
      if (digits.size() < m.width) digits.insert(0, m.width - digits.size(), '0');
      add_missing(out, MissingShard{m.prefix + "-" + digits + "-of-" + m.count_text + ".safetensors",
                                    "not in the directory", -1});
      ++listed;
    }
    // The rest are counted, not named.
    out.missing_count += absent - listed;
  }
}

}  // namespace

std::string CheckpointFiles::incomplete_reason() const {
  if (complete()) return "";
  constexpr std::size_t kNamed = 3;  // in one line; `missing` keeps more
  const std::int64_t of = expected_files > 0 ? expected_files : missing_count;
  std::string s = std::to_string(missing_count) + (expected_files > 0 ? " of " + std::to_string(expected_files) : "") +
                  " shard" + (of == 1 ? "" : "s") + " " + (missing_count == 1 ? "is" : "are") + " missing: ";
  // The names, each run of the same cause said once after it.
  const std::size_t named = std::min(missing.size(), kNamed);
  for (std::size_t i = 0; i < named; ++i) {
    s += (i ? ", " : "") + qpath(missing[i].file);
    if (i + 1 == named || missing[i + 1].why != missing[i].why) s += " (" + missing[i].why + ")";
  }
  if (missing_count > static_cast<std::int64_t>(named)) {
    s += " and " + std::to_string(missing_count - static_cast<std::int64_t>(named)) + " more";
  }
  if (missing_tensors > 0) {
    s += "; the index maps " + format_grouped(missing_tensors) + " tensor" + (missing_tensors == 1 ? "" : "s") +
         " to them";
  }
  s += "; the files present hold " + format_grouped(static_cast<std::int64_t>(tensors.size())) + " tensor" +
       (tensors.size() == 1 ? "" : "s") + ", " + format_grouped(tensor_bytes) + " B";
  if (index_total_size) s += " of the index's total_size " + format_grouped(*index_total_size) + " B";
  return s;
}

bool has_checkpoint_files(const std::string& dir) {
  if (dir.empty()) return false;
  std::error_code ec;
  if (fs::exists(join(dir, kIndexName), ec)) return true;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name[0] != '.' && is_safetensors_name(name)) return true;
  }
  return false;
}

CheckpointFiles read_checkpoint_files(const std::string& dir) {
  require_directory(dir, "cannot read checkpoint " + qpath(dir) + ": ");
  CheckpointFiles out;
  out.dir = dir;
  ReadBudget budget(dir);
  const std::string index_path = join(dir, kIndexName);
  if (exists(index_path)) {
    out.has_index = true;
    read_indexed(out, index_path, budget);
    sort_tensors(out);
    return out;
  }
  std::vector<std::string> names;
  if (exists(join(dir, kSingleName))) {
    names.emplace_back(kSingleName);
  } else {
    std::error_code ec;
    fs::directory_iterator it(dir, ec);
    if (ec) throw_config("cannot read checkpoint " + qpath(dir) + ": " + file_error_cause(ec.value(), dir));
    for (const auto& entry : it) {
      const std::string name = entry.path().filename().string();
      if (!is_safetensors_name(name)) continue;
      if (name[0] == '.') {
        ++out.hidden_files_skipped;
        continue;
      }
      names.push_back(name);
      if (static_cast<std::int64_t>(names.size()) > CheckpointLimits::max_files) {
        throw_config("checkpoint " + qpath(dir) + ": more than " + std::to_string(CheckpointLimits::max_files) +
                     " *.safetensors files (CheckpointLimits::max_files)");
      }
    }
    std::sort(names.begin(), names.end());
  }
  if (names.empty()) {
    throw_config("checkpoint " + qpath(dir) + ": no " + std::string(kIndexName) + ", no " + std::string(kSingleName) +
                 " and no *.safetensors file" +
                 (out.hidden_files_skipped > 0 ? " (only hidden ones, whose names start with '.')" : ""));
  }
  for (const auto& name : names) {
    ShardRead read = read_shard(join(dir, name), /*tolerate_partial=*/true, budget);
    if (read.state != ShardState::whole) {
      add_missing(out, MissingShard{name, read.why, -1});
      continue;
    }
    add_tensors(out, std::move(read.header), name);
    out.files.push_back(name);
  }
  out.expected_files = static_cast<std::int64_t>(names.size());
  add_missing_series(out, names);
  sort_tensors(out);
  refuse_names_in_two_files(out);
  return out;
}

std::string resolve_model_dir(const std::string& path) {
  require_directory(path, "cannot read model directory " + qpath(path) + ": ");
  std::string base = path;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  const auto slash = base.rfind('/');
  const std::string name = slash == std::string::npos ? base : base.substr(slash + 1);
  const std::string ref_path = join(path, "refs/main");
  const bool cache_repo = name.rfind("models--", 0) == 0 || exists(ref_path);
  if (!cache_repo) return path;
  if (!exists(ref_path)) {
    throw_config("Hugging Face cache " + qpath(path) +
                 ": no refs/main (the commit of the snapshot to use); name a "
                 "snapshot directory, " +
                 qpath(join(path, "snapshots/REV")));
  }
  const std::string ref = read_hf_ref(ref_path, "main");
  const std::string snapshot = join(path, "snapshots/" + ref);
  require_directory(snapshot, "Hugging Face cache " + qpath(path) + ": refs/main names snapshot " +
                                  mlaplan::quoted(ref) + ", but " + qpath(snapshot) + " cannot be read: ");
  return snapshot;
}

}  // namespace mlaplan

// The JSON document of an error (output/error_json.hpp).

#include "output/error_json.hpp"

#include <algorithm>
#include <cctype>
#include <exception>
#include <nlohmann/json.hpp>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/input_file.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/model/config.hpp"

namespace mlaplan::cli::error_json {

namespace detail {

/// A config value longer than this (as JSON text) is not copied into the document: null instead.
constexpr std::size_t kMaxValueBytes = 512;
/// Nesting past this is not parsed to fetch a value (configs are a few levels deep).
constexpr int kMaxValueNesting = 64;

bool starts_with(std::string_view s, std::string_view head) { return s.substr(0, head.size()) == head; }

/// The text between the first "'" at or after `from` and the "'" that closes it (one followed by
/// the end, a space, ';', ',', ')' or ':'), or nothing.
std::optional<std::string> first_quoted(std::string_view message, std::size_t from) {
  const std::size_t open = message.find('\'', from);
  if (open == std::string_view::npos) return std::nullopt;
  for (std::size_t close = message.find('\'', open + 1); close != std::string_view::npos;
       close = message.find('\'', close + 1)) {
    const char next = close + 1 < message.size() ? message[close + 1] : ' ';
    if (next == ' ' || next == ';' || next == ',' || next == ')' || next == ':') {
      return std::string(message.substr(open + 1, close - open - 1));
    }
  }
  return std::nullopt;
}

/// A flag's name at the start of `s` ("--batch", "--context-lens[1]", "-o"), or "".
std::string flag_at(std::string_view s) {
  if (!starts_with(s, "-")) return {};
  std::size_t i = 0;
  while (i < s.size() && s[i] == '-') ++i;
  while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) != 0 || s[i] == '-' || s[i] == '_')) ++i;
  if (i < s.size() && s[i] == '[') {
    const std::size_t close = s.find(']', i);
    if (close != std::string_view::npos) i = close + 1;
  }
  const std::string_view name = s.substr(0, i);
  return name.find_first_not_of('-') == std::string_view::npos ? std::string() : std::string(name);
}

/// Field and value of a usage message (docs/cli.md, "Flag values").
void usage_facts(ErrorFacts& f) {
  const std::string_view m = f.message;
  // "plan: unknown flag '--x' ...", "unknown flag '--verison' ..."
  if (const auto p = m.find("unknown flag '"); p != std::string_view::npos && p < 40) {
    if (const auto flag = first_quoted(m, p)) f.field = *flag;
    return;
  }
  if (starts_with(m, "unknown command '")) {
    f.field = "COMMAND";
    if (const auto word = first_quoted(m, 0)) f.value = *word;
    return;
  }
  // "plan: --batch needs a value ...", "report: -o needs a value": the command's name first.
  std::string_view rest = m;
  if (const auto colon = m.find(": "); colon != std::string_view::npos && colon < 24 && !starts_with(m, "-")) {
    const std::string_view word = m.substr(0, colon);
    if (std::all_of(word.begin(), word.end(), [](char c) { return std::islower(static_cast<unsigned char>(c)); })) {
      rest = m.substr(colon + 2);
    }
  }
  if (starts_with(rest, "CONFIG")) {
    f.field = "CONFIG";
    return;
  }
  const std::string flag = flag_at(rest);
  if (flag.empty()) return;
  f.field = flag;
  const std::string_view after = rest.substr(flag.size());
  if (starts_with(after, ": '") || starts_with(after, " given twice ('")) {
    if (const auto v = first_quoted(rest, flag.size())) f.value = *v;
  } else if (starts_with(after, ": ")) {
    // "--context-lens[1]: empty item in '1,,3'", "--x: 'v' ...": the first quoted text.
    if (const auto v = first_quoted(rest, flag.size()); v && after.find("needs") == std::string_view::npos)
      f.value = *v;
  }
}

/// Field, value and place of an invalid config's message ("FILE: /pointer: ...", "FILE: not valid
/// JSON: parse error at line N, column M ...").
void config_facts(ErrorFacts& f) {
  if (const auto field = config_field_of(f.message)) {
    f.file = field->first;
    f.field = field->second;
    if (f.file.size() > kHfOverridesMark.size() && f.file.ends_with(kHfOverridesMark)) {
      // The value is --hf-overrides', not the file's: no line or value of the file.
      f.file.resize(f.file.size() - kHfOverridesMark.size());
      return;
    }
    std::string text;
    try {
      text = read_input_file(f.file, config_file_rules());
    } catch (const std::exception&) {
      return;  // gone or changed since it was read: the message alone
    }
    f.location = locate_json_value(text, f.field);
    if (!f.location || find_nesting_past(text, kMaxValueNesting)) return;
    try {
      const auto doc = nlohmann::json::parse(text);
      const auto& v = doc.at(nlohmann::json::json_pointer(f.field));
      if (v.dump().size() <= kMaxValueBytes) f.value = ojson::parse(v.dump());
    } catch (const std::exception&) {
      // a pointer nlohmann reads otherwise than the message's: no value
    }
    return;
  }
  const auto marker = f.message.find(": not valid JSON: parse error at line ");
  if (marker != std::string::npos && marker > 0) {
    f.file = f.message.substr(0, marker);
    f.location = parse_error_location(f.message, f.file);
  }
}

}  // namespace detail

std::string kind_name(int code) {
  switch (code) {
    case 1: return "usage";
    case 2: return "invalid_config";
    case 3: return "unsupported";
    case 4: return "does_not_fit";
    case 5: return "verify_failed";
    case 6: return "no_gpu";
    case 7: return "output";
    case 70: return "internal";
    default: return "error";
  }
}

bool json_requested(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return false;
    if (a == "--json" || a == "--format=json") return true;
    if (a == "--format" && i + 1 < args.size() && args[i + 1] == "json") return true;
  }
  return false;
}

std::string command_of(const std::vector<std::string>& args, const std::vector<std::string>& commands) {
  if (args.empty()) return {};
  const std::string& first = args.front();
  if (std::find(commands.begin(), commands.end(), first) != commands.end()) return first;
  if (first == "-h" || first == "--help" || first == "--version") return {};
  return "plan";  // mla-plan CONFIG, vllm serve, sglang serve, python -m sglang.launch_server
}

std::optional<JsonTextLocation> parse_error_location(const std::string& message, const std::string& file) {
  const std::string head = printable(file) + ": not valid JSON: parse error at line ";
  if (file.empty() || message.rfind(head, 0) != 0) return std::nullopt;
  const auto number = [&message](std::size_t& pos) -> std::optional<std::size_t> {
    std::size_t v = 0, digits = 0;
    for (; pos < message.size() && message[pos] >= '0' && message[pos] <= '9' && digits < 9; ++pos, ++digits) {
      v = v * 10 + static_cast<std::size_t>(message[pos] - '0');
    }
    if (digits == 0 || v == 0) return std::nullopt;
    return v;
  };
  std::size_t pos = head.size();
  JsonTextLocation loc;
  const auto line = number(pos);
  if (!line) return std::nullopt;
  loc.line = *line;
  if (message.compare(pos, 9, ", column ") == 0) {
    pos += 9;
    if (const auto column = number(pos)) loc.column = *column;
  }
  return loc;
}

std::optional<std::pair<std::string, std::string>> config_field_of(std::string_view message) {
  // The file ends at the first ": /"; the pointer at the next ": ".
  const std::size_t start = message.find(": /");
  if (start == std::string_view::npos || start == 0) return std::nullopt;
  const std::size_t end = message.find(": ", start + 2);
  if (end == std::string_view::npos) return std::nullopt;
  std::string pointer(message.substr(start + 2, end - start - 2));
  if (pointer == "/") pointer.clear();  // the document (Section::fail writes "/" for "")
  if (pointer.find(' ') != std::string::npos || !parse_json_pointer(pointer)) return std::nullopt;
  return std::make_pair(std::string(message.substr(0, start)), pointer);
}

ErrorFacts facts_of(int code, const std::string& message) {
  ErrorFacts f;
  f.exit_code = code;
  f.message = message;
  if (code == exit_code(ErrorKind::usage)) detail::usage_facts(f);
  else if (code == exit_code(ErrorKind::invalid_config)) detail::config_facts(f);
  return f;
}

std::string render(const std::string& command, const ErrorFacts& facts) {
  ojson j = json_document();
  // A mistyped command names none (`mla-plan plna`): null, not the plan of a CONFIG.
  j["command"] = command.empty() || facts.field == "COMMAND" ? ojson(nullptr) : ojson(command);
  ojson e = {{"kind", kind_name(facts.exit_code)},
             {"message", facts.message},
             {"exit_code", facts.exit_code},
             {"field", facts.field.empty() ? ojson(nullptr) : ojson(facts.field)},
             {"value", facts.value ? *facts.value : ojson(nullptr)}};
  if (!facts.file.empty()) e["file"] = facts.file;
  if (facts.location) {
    e["line"] = facts.location->line;
    e["column"] = facts.location->column;
  }
  j["error"] = std::move(e);
  j["exit_code"] = facts.exit_code;
  return dump_json(j);
}

std::string last_error_message(std::string_view err_text) {
  std::string found;
  std::size_t start = 0;
  while (start < err_text.size()) {
    std::size_t end = err_text.find('\n', start);
    if (end == std::string_view::npos) end = err_text.size();
    const std::string_view line = err_text.substr(start, end - start);
    for (const std::string_view head : {std::string_view("mla-plan: error: "), std::string_view("mla-plan: ")}) {
      if (detail::starts_with(line, head)) {
        found = std::string(line.substr(head.size()));
        break;
      }
    }
    start = end + 1;
  }
  return found;
}

}  // namespace mlaplan::cli::error_json

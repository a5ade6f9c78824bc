#include "cli/parse_errors.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstddef>
#include <string_view>

#include "cli/cli.hpp"
#include "mlaplan/base/suggest.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan::cli {

namespace {

/// The long flags of `sub` that `flag` ("--tensor-parallel", "--foo=1" without its value) most
/// likely meant, as "--name": suggest() over the names without their dashes, so that prefixes and
/// substrings are of the words ("-o" and other one-letter words get none).
std::vector<std::string> near_flags(const CLI::App& sub, std::string_view flag) {
  const auto dashes = flag.find_first_not_of('-');
  if (dashes == std::string_view::npos) return {};
  std::vector<std::string> names;
  for (const auto* opt : sub.get_options()) {
    for (const auto& l : opt->get_lnames()) names.push_back(l);
  }
  std::vector<std::string> near = suggest(flag.substr(dashes), names, SuggestRules{true, 2});
  for (auto& n : near) n.insert(0, "--");
  return near;
}

bool looks_like_flag(std::string_view arg) {
  if (arg.size() < 2 || arg.front() != '-') return false;
  const char c = arg[1];
  return !(c >= '0' && c <= '9') && c != '.';  // "-5", "-.5": a negative number, not a flag
}

std::string help_hint(const CLI::App* sub) {
  if (sub == nullptr) return "run 'mla-plan --help' for usage";
  return "run 'mla-plan " + sub->get_name() + " --help' for the flags";
}

std::string prefix(const CLI::App* sub) { return sub == nullptr ? std::string() : sub->get_name() + ": "; }

/// "plan, check, ...": the names of the command table.
std::string command_list() {
  std::string list;
  for (const auto& name : command_names()) list += (list.empty() ? "" : ", ") + name;
  return list;
}

/// "'a'", "'a' and 'b'", "'a', 'b' and 'c'", at most four shown.
std::string quoted_values(const std::vector<std::string>& values) {
  std::string s;
  const std::size_t shown = std::min<std::size_t>(values.size(), 4);
  for (std::size_t i = 0; i < shown; ++i) {
    if (i > 0) s += i + 1 == shown && shown == values.size() ? " and " : ", ";
    s += mlaplan::quoted(values[i]);
  }
  if (shown < values.size()) s += ", ... (" + std::to_string(values.size()) + " values)";
  return s;
}

std::string times(std::size_t n) { return n == 2 ? "twice" : std::to_string(n) + " times"; }

/// What an option takes, in words, from its CLI11 type name: "a decimal integer", "one of a, b".
std::string takes(const CLI::Option& opt) {
  const std::string type = opt.get_type_name();
  const auto brace = type.find('{');
  if (brace != std::string::npos && type.back() == '}') {
    std::string list = type.substr(brace + 1, type.size() - brace - 2);
    std::string words;
    for (char c : list) words += c == ',' ? std::string(", ") : std::string(1, c);
    return "one of " + words;
  }
  if (type == "INT") return "a decimal integer";
  if (type == "NUMBER") return "a decimal number";
  if (type == "INT,...") return "decimal integers separated by commas";
  if (type == "INT,...|@FILE") return "decimal integers separated by commas, or @FILE";
  if (type == "TEXT,...") return "a list separated by commas";
  return {};
}

/// The option of `sub` that a CLI11 message names ("--batch: 1 required INT missing", "Could not
/// convert: --json = x"), the longest name that matches.
const CLI::Option* option_named_in(const CLI::App& sub, std::string_view what) {
  const CLI::Option* found = nullptr;
  std::size_t found_len = 0;
  for (const auto* opt : sub.get_options()) {
    const std::string name = opt->get_name();
    if (name.empty()) continue;
    const bool at_start = what.substr(0, name.size() + 1) == name + ":";
    const bool converted = what.find(": " + name + " =") != std::string_view::npos;
    if ((at_start || converted) && name.size() > found_len) {
      found = opt;
      found_len = name.size();
    }
  }
  return found;
}

/// The subcommand the parse chose, or null.
const CLI::App* chosen(const CLI::App& app) {
  const auto subs = app.get_subcommands();
  return subs.empty() ? nullptr : subs.front();
}

std::string unknown_flag(const CLI::App& app, const CLI::App* sub, const std::string& arg) {
  const std::string name = arg.substr(0, arg.find('='));
  std::string msg = prefix(sub) + "unknown flag " + mlaplan::quoted(arg);
  if (sub != nullptr) {
    const std::string near = did_you_mean(near_flags(*sub, name));
    if (!near.empty()) {
      msg += " (" + near + ")";
    } else {
      std::string others;
      for (const auto* other : app.get_subcommands([](const CLI::App*) { return true; })) {
        if (other == sub || other->get_option_no_throw(name) == nullptr) continue;
        others += (others.empty() ? "" : ", ") + other->get_name();
      }
      if (!others.empty()) msg += " (a flag of " + others + ")";
    }
  }
  return msg + "; " + help_hint(sub);
}

std::string unexpected_argument(const CLI::App* sub, const std::string& arg) {
  std::string msg = prefix(sub) + "unexpected argument " + mlaplan::quoted(arg);
  if (sub == nullptr) return msg + "; " + help_hint(sub);
  const auto positionals = sub->get_options([](const CLI::Option* o) { return o->get_positional(); });
  if (positionals.empty()) {
    msg += ": " + sub->get_name() + " takes flags only";
  } else {
    const CLI::Option* p = positionals.back();
    const std::string name = p->get_name();
    if (p->count() > 0) {
      msg += ": " + name + " is already " + mlaplan::quoted(p->results().front()) + " and " + sub->get_name() +
             " takes one";
    }
  }
  const auto lists = sub->get_options([](const CLI::Option* o) {
    const std::string type = o->get_type_name();
    return o->count() > 0 && type.find(",...") != std::string::npos;
  });
  if (!lists.empty()) msg += " (" + lists.front()->get_name() + " takes one argument, its items separated by commas)";
  return msg + "; " + help_hint(sub);
}

/// The first argument left over, a flag one first.
const std::string* first_extra(const std::vector<std::string>& extras, bool flag) {
  for (const auto& a : extras) {
    if (looks_like_flag(a) == flag) return &a;
  }
  return nullptr;
}

std::string required_missing(const CLI::App* sub) {
  std::vector<const CLI::Option*> missing;
  for (const auto* opt : sub->get_options()) {
    if (opt->get_required() && opt->count() == 0) missing.push_back(opt);
  }
  if (missing.empty()) return {};
  std::string names;
  for (std::size_t i = 0; i < missing.size(); ++i) {
    if (i > 0) names += i + 1 == missing.size() ? " and " : ", ";
    names += missing[i]->get_name();
  }
  std::string msg = prefix(sub) + names + (missing.size() == 1 ? " is" : " are") + " required";
  if (missing.size() == 1 && !missing.front()->get_description().empty()) {
    // What to give: the argument's or the flag's description (`report: --output is required (the
    // report file: FILE.svg ...)`).
    msg += " (" + missing.front()->get_description() + ")";
  }
  return msg + "; " + help_hint(sub);
}

}  // namespace

std::string unknown_command_message(std::string_view word) {
  if (word.empty() || !std::all_of(word.begin(), word.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
      })) {
    return {};  // a path, most likely
  }
  const std::vector<std::string> commands = command_names();
  // Commands are matched by their start and by a few edits, not by a part: "my-plan-config" is a
  // file name.
  const std::string near = did_you_mean(suggest(word, commands, SuggestRules{false, 2}));
  if (near.empty()) return {};
  return "unknown command " + mlaplan::quoted(word) + " (" + near +
         "), and no file or directory of that name; the commands: " + command_list() +
         ", or mla-plan CONFIG for plan; run 'mla-plan --help' for usage";
}

std::string unknown_first_flag_message(const CLI::App& app, std::string_view arg) {
  if (arg.size() < 3 || arg.substr(0, 2) != "--") return {};
  const std::string name(arg.substr(0, arg.find('=')));
  const auto plans = app.get_subcommands([](const CLI::App* s) { return s->get_name() == "plan"; });
  if (plans.empty() || plans.front()->get_option_no_throw(name) != nullptr) return {};
  std::vector<std::string> own;
  for (const auto* opt : app.get_options()) {
    for (const auto& l : opt->get_lnames()) own.push_back(l);
  }
  std::vector<std::string> near = suggest(std::string_view(name).substr(2), own, SuggestRules{true, 2});
  if (near.empty()) return {};
  for (auto& n : near) n.insert(0, "--");
  return "unknown flag " + mlaplan::quoted(arg) + " (" + did_you_mean(near) + "); run 'mla-plan --help' for usage";
}

std::string parse_error_message(const CLI::App& app, const CLI::ParseError& e) {
  const std::string what = e.what();
  const std::vector<std::string> extras = app.remaining(true);
  const CLI::App* sub = chosen(app);

  // An unknown flag is the likeliest cause of whatever else failed (a required flag misspelled).
  if (const std::string* flag = first_extra(extras, true)) return unknown_flag(app, sub, *flag);

  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    if (const std::string* arg = first_extra(extras, false)) return unexpected_argument(sub, *arg);
  }
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    if (sub == nullptr) {
      return std::string(
                 "a command or a CONFIG is required: mla-plan CONFIG [flags], or mla-plan COMMAND with "
                 "COMMAND one of ") +
             command_list() + "; run 'mla-plan --help' for usage";
    }
    if (const std::string msg = required_missing(sub); !msg.empty()) return msg;
  }
  if (sub != nullptr && dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    // Given more than once: a single-value option (a list takes its items in one argument).
    for (const auto* opt : sub->get_options()) {
      if (opt->get_multi_option_policy() == CLI::MultiOptionPolicy::Throw && opt->get_items_expected_max() >= 1 &&
          opt->count() > static_cast<std::size_t>(opt->get_items_expected_max()) && !opt->get_positional()) {
        return opt->get_name() + " given " + times(opt->count()) + " (" + quoted_values(opt->results()) +
               "); give it once";
      }
    }
    // No value after the flag.
    if (const CLI::Option* opt = option_named_in(*sub, what)) {
      if (opt->count() == 0) {
        const std::string kind = takes(*opt);
        return prefix(sub) + opt->get_name() + " needs a value" + (kind.empty() ? "" : " (" + kind + ")") + "; " +
               help_hint(sub);
      }
    }
  }
  if (sub != nullptr && dynamic_cast<const CLI::ConversionError*>(&e) != nullptr) {
    if (const CLI::Option* opt = option_named_in(*sub, what)) {
      if (opt->get_items_expected_max() == 0) {
        return prefix(sub) + opt->get_name() + " takes no value (" + quoted_values(opt->results()) + " given); give " +
               opt->get_name() + " alone";
      }
      return opt->get_name() + ": " + quoted_values(opt->results()) + " is not allowed; " + help_hint(sub);
    }
  }
  if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr) {
    return printable(what, 400);  // "--format: 'xml' is not allowed; allowed: ..." (one_of)
  }
  return prefix(sub) + printable(what, 400) + "; " + help_hint(sub);
}

}  // namespace mlaplan::cli
